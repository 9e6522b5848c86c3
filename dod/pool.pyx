"""Fixed-size pools: O(1) acquire and release of equal blocks.

A :class:`Pool` owns one region cut into ``block_count`` equal blocks. Free
blocks are linked through their own first word (an intrusive free list), so
a live block carries no bookkeeping; acquire and release are a few loads and
stores. Blocks never move.

Python face
    :meth:`Pool.acquire` returns a 64-bit handle (low 32 bits slot index,
    high 32 bits generation; 0 is nil). :meth:`Pool.view` turns a live handle
    into a typed numpy view of its block; :meth:`Pool.acquire_array` does both
    at once. :meth:`Pool.release` validates the handle (owner and
    generation), so a double release or a stale handle raises ValueError and
    changes nothing. :meth:`Pool.as_array` views the whole pool as one array
    of shape ``(block_count, *shape)`` and :meth:`Pool.live_mask` says which
    rows are live, for vectorised code over all live blocks.

Growth (opt-in)
    ``Pool(n, ..., growable=True, chunk_blocks=None)`` starts with one region
    of ``n`` blocks; when every block is in use, the next acquire obtains a
    whole new chunk of ``chunk_blocks`` blocks (``n`` by default) from the
    pool's resource (the same ``resource=`` as the first region, anonymous
    pages by default) and takes its first block. Live blocks never move:
    handles, views and pointers stay valid across growth. Slot indices run
    across chunks in the order they were obtained (chunk 0 is slots
    ``[0, n)``, chunk 1 ``[n, n + chunk_blocks)``, ...). Chunks are given
    back only when the pool dies; :meth:`reset` keeps them as spares. When
    the resource cannot supply a chunk, acquire raises MemoryError and the
    pool is unchanged (``failed`` counts it). A growable pool with more than
    one chunk is not one array: :meth:`as_array` raises ValueError there,
    and :meth:`chunks` gives one ``(rows, live)`` pair per chunk instead.
    The engine's fast path is the same for fixed and growable pools: growth
    is a named slow path (``dod_pool_grow``) taken only when the
    free list is empty and the current chunk is fully handed out.

Safety contract (the Python face)
    Arrays keep the pool alive. Releasing a block by handle while an array
    from :meth:`view`/:meth:`acquire_array` is still alive raises BufferError
    (nothing changes). Releasing by passing the array itself is allowed: the
    handle dies at once, and the block returns to the free list when the last
    array over it dies. :meth:`as_array` covers free blocks too, so writing
    through it into a free block is allowed and harmless by construction:
    the Python face (and :meth:`resource`) keep their free list in the side
    table, never inside a block. (The Cython engine keeps its free list in
    the blocks, its intrusive links: do not write free blocks while Cython
    code releases to and acquires from the same pool through the engine, and
    do not mix engine-level acquires with Python-face acquires on one pool.)

Bookkeeping
    Engine: zero bytes per live block. The Python face adds a side table of
    12 bytes per slot (32-bit generation, 32-bit count of live arrays,
    32-bit free-list link), never inside a block; it grows with the chunks.
    A growable pool adds a chunk table of 16 bytes per chunk.

Thread-safety
    ``Pool(..., threadsafe=False)`` (default) is for one thread at a time.
    ``Pool(..., threadsafe=True)`` takes a mutex around every engine call of
    the Python face; Cython threads sharing it must use
    ``dod_pool_acquire_locked``/``dod_pool_release_locked`` with
    ``&owner.mutex``. Cost: one uncontended pthread lock+unlock pair per
    operation (about 15-20 ns, see ``python -m dod.bench --only pool``), and
    serialisation under contention. A growable threadsafe pool grows under
    the same mutex (the upstream is called with the lock held). For many
    threads without a lock, see :mod:`dod.lfpool`.

Where things live
    Lifetime rule: ``dod._lease``: ``SlotPin`` on the side table
    ``dod_slots`` (generations, pins and the Python face's free list),
    ``ExportPin`` for whole-pool views and resources.
    Fast path: ``dod_pool_acquire`` / ``dod_pool_release``, inline in
    ``dod/_pool_engine.pxd`` and cimported from ``dod/pool.pxd`` (growth:
    ``dod_pool_grow`` in ``dod._pool_engine``). The memory, the side table,
    the lookups, :meth:`Pool.check` and the statistics: ``dod._pool_owner``
    (``PoolOwner``, Pool's base); acquire, release, views and the resource:
    here.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdint cimport SIZE_MAX
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_poison, dod_debug_fail
from dod._types cimport dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, as_dtype, wrap_memory
from dod._lease cimport (dod_slots, SlotPin, slot_pin, slots_cover_links, slots_pop, slots_push,
                         slots_clear_free, slots_open, slots_close, slots_is_live, slots_find, export_pin)
from dod._pool_engine cimport _chunk_len, _drop_chunks
from dod.resource cimport dod_resource, Resource

import numpy as np

cnp.import_array()

#: True in debug and sanitize builds (engine contract violations abort).
DEBUG = bool(DOD_DEBUG)


# ---------------------------------------------------------------- the Python face's free list
# The Python face (and resource()) keep the free blocks on the side table's
# list (dod._lease.dod_slots), never in the blocks: as_array() lets Python
# write anything into a free block, and nothing it writes can reach a link.
# The engine's intrusive list (p.free) stays empty unless Cython code
# releases through the engine; that is the "do not mix" rule.

cdef inline void _give_back(dod_pool* p, dod_slots* t, size_t index) noexcept nogil:
    """Lock held: block `index` (validated by the caller, not live) is free again."""
    dod_poison(dod_pool_block(p, index), p.stride)
    slots_push(t, index)
    p.in_use -= 1


cdef size_t _take(dod_pool* p, dod_slots* t) noexcept nogil:
    """Lock held: the slot of a block taken for the face or its resource: the
    side table's first free block, else one from the engine (an untouched
    block, or a growth). SIZE_MAX when exhausted (counted in `failed`)."""
    cdef size_t i = slots_pop(t)
    cdef size_t need
    cdef dod_pool_chunks* c = p.chunks
    cdef void* b
    if i != SIZE_MAX:
        p.in_use += 1
        p.allocations += 1
        return i
    # Links for every block that can come back, a growth's included.
    need = dod_pool_capacity(p)
    if c != NULL and p.free == NULL and p.touched >= p.count and c.current + 1 >= c.n \
            and need + c.chunk_blocks <= c.max_slots:
        need += c.chunk_blocks
    if not slots_cover_links(t, need):
        p.failed += 1
        return SIZE_MAX
    b = dod_pool_acquire(p)
    if b == NULL:
        return SIZE_MAX
    return dod_pool_index(p, b)


# ---------------------------------------------------------------- the pool as a dod_resource
# ctx is the owner's _rctx: (&pool, &mutex, &table). Blocks come from and go
# back to the side table's free list, like the Python face's, so a write
# through as_array() into a free block cannot steer this path either.

cdef inline bint _refuses(const dod_pool* p, size_t size, size_t alignment) noexcept nogil:
    """A request no block can hold."""
    return size > p.stride or ((<uintptr_t>p.base | p.stride) & (alignment - 1)) != 0


cdef inline void* _resource_take(dod_pool* p, dod_slots* t) noexcept nogil:
    cdef size_t i = _take(p, t)
    return NULL if i == SIZE_MAX else <void*>dod_pool_block(p, i)


cdef inline void _resource_give_back(dod_pool* p, dod_slots* t, void* ptr) noexcept nogil:
    cdef size_t i = dod_pool_slot_of(p, ptr), k
    if DOD_DEBUG:
        if i >= dod_pool_touched(p):
            dod_debug_fail("pool resource: deallocate of a pointer that is not a block of this pool", ptr)
        k = t.free_head
        while k != 0:
            if k - 1 == i:
                dod_debug_fail("pool resource: double deallocate", ptr)
            k = t.next[k - 1]
    if i < dod_pool_touched(p):
        _give_back(p, t, i)


cdef void* _pool_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef dod_pool* p = <dod_pool*>(<void**>ctx)[0]
    if _refuses(p, size, alignment):
        p.failed += 1
        return NULL
    return _resource_take(p, <dod_slots*>(<void**>ctx)[2])


cdef void _pool_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    if ptr != NULL:
        _resource_give_back(<dod_pool*>(<void**>ctx)[0], <dod_slots*>(<void**>ctx)[2], ptr)


cdef void* _pool_allocate_locked(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef dod_pool* p = <dod_pool*>(<void**>ctx)[0]
    cdef dod_mutex* m = <dod_mutex*>(<void**>ctx)[1]
    cdef void* b
    dod_mutex_lock(m)
    if _refuses(p, size, alignment):
        p.failed += 1
        b = NULL
    else:
        b = _resource_take(p, <dod_slots*>(<void**>ctx)[2])
    dod_mutex_unlock(m)
    return b


cdef void _pool_deallocate_locked(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    cdef dod_mutex* m = <dod_mutex*>(<void**>ctx)[1]
    if ptr != NULL:
        dod_mutex_lock(m)
        _resource_give_back(<dod_pool*>(<void**>ctx)[0], <dod_slots*>(<void**>ctx)[2], ptr)
        dod_mutex_unlock(m)


cdef void _pool_return(void* owner, size_t index) noexcept:
    """SlotPin's callback: the last array over a block released by array died."""
    cdef Pool self = <Pool>owner
    if self.threadsafe:
        dod_mutex_lock(&self.mutex)
    _give_back(&self.engine, &self._table, index)
    if self.threadsafe:
        dod_mutex_unlock(&self.mutex)
    self._pending -= 1


# ---------------------------------------------------------------- the Python face

@cython.no_gc_clear
cdef class Pool(PoolOwner):
    """Pool(block_count, dtype=None, shape=(), *, block_size=None, align=None, resource=None, threadsafe=False, growable=False, chunk_blocks=None)

    A pool of ``block_count`` equal blocks.

    Parameters
    ----------
    block_count : int
        Number of blocks, 1 to 2**32 - 1. Fixed for the life of the pool,
        unless it is growable (then the blocks of the first region).
    dtype, shape :
        What one block holds: ``Pool(1000, np.float32, (4,))`` is 1000 blocks
        of four float32. Views of a block have this dtype and shape; the
        whole-pool view has shape ``(block_count, *shape)``.
    block_size : int, optional
        Instead of dtype/shape: raw blocks of this many bytes (viewed as
        uint8), at least the size of a pointer (8).
    align : int, optional
        Block alignment, a power of two: 16 by default, or the dtype's
        alignment when larger.
    resource : Resource, optional
        Where the region comes from (anonymous pages by default), e.g.
        ``arena.resource()`` to carve the pool out of an arena.
    threadsafe : bool
        Take a mutex around every engine call (see the module docstring).
    growable : bool
        When every block is in use, obtain a whole new chunk of blocks from
        `resource` instead of failing (see the module docstring). Live
        blocks never move. Off by default: a fixed pool fails when full.
    chunk_blocks : int, optional
        Blocks per further chunk of a growable pool (``block_count`` by
        default), 1 to 2**32 - 1. The pool never exceeds 2**32 - 1 blocks
        in all (a handle's slot index is 32 bits) nor 2**20 chunks (so a
        request it could never meet fails at once: see :attr:`max_blocks`).

    Layout: the stride between blocks is the block's bytes rounded up to at
    least 8 (the free-list link) and then to the alignment; a 12-byte block
    with the default alignment takes 16 bytes, a 20-byte block 32.

    Attributes
    ----------
    threadsafe : bool
        Whether the Python face takes a mutex around every engine call.
    growable : bool
        Whether further chunks come from the resource when the pool is full.
    alignment : int
        Block alignment in bytes.

    Raises
    ------
    TypeError
        For a missing or object dtype.
    ValueError
        For a count out of range, an empty block, a block_size below 8, a
        bad alignment, or chunk_blocks without growable.
    MemoryError
        When the memory cannot be obtained.

    Notes
    -----
    Thread-safety: ``threadsafe=False`` (default) is for one thread at a
    time; ``threadsafe=True`` takes a mutex around every engine call of the
    Python face (the module docstring says what Cython threads sharing it
    must do).
    """
    cdef Py_ssize_t _pop(self) noexcept:
        """Lock held: the slot of a newly acquired block; -1 when exhausted (a
        fixed pool, or no further chunk could be had), -3 when the side table
        cannot grow. Failures are counted in `failed`. The slot is not live
        yet (the caller opens it)."""
        cdef dod_pool* p = &self.engine
        cdef dod_pool_chunks* c = p.chunks
        cdef size_t need = dod_pool_capacity(p), i
        if (c != NULL and self._table.free_head == 0 and p.free == NULL and p.touched >= p.count
                and c.current + 1 >= c.n and need + c.chunk_blocks <= c.max_slots):
            need += c.chunk_blocks      # a growth: the side table first, so a failure changes nothing
        if not self._cover(need):
            p.failed += 1
            return -3
        i = _take(p, &self._table)
        return -1 if i == SIZE_MAX else <Py_ssize_t>i

    cdef object _view(self, size_t index):
        L = slot_pin(self, &self._table, index, _pool_return)
        return wrap_memory(dod_pool_block(&self.engine, index), &self._req, <cnp.dtype>self._dtype, L)

    # -------------------------------------------------------- acquire / release

    def acquire(self):
        """Acquire a block and return its handle. O(1).

        The block's bytes are unspecified (not zeroed).

        Returns
        -------
        int
            A non-zero handle.

        Raises
        ------
        MemoryError
            When every block is in use and the pool cannot grow (fixed, or the
            resource has no further chunk): counted in ``failed``, nothing else
            changes.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef Py_ssize_t i
        self._lock()
        i = self._pop()
        self._unlock()
        if i < 0:
            self._raise_exhausted(i)
        return slots_open(&self._table, <size_t>i)

    def _raise_exhausted(self, code):
        if code == -3:
            raise MemoryError("could not grow the pool's side table")
        cdef size_t cap = dod_pool_capacity(&self.engine)
        if self.growable:
            if cap + self._chunks.chunk_blocks > self._chunks.max_slots:
                raise MemoryError(f"pool exhausted: all {cap} blocks are in use and another chunk "
                                  f"would pass max_blocks ({self._chunks.max_slots}: 2**32 - 1 blocks "
                                  "or 2**20 chunks)")
            raise MemoryError(f"pool exhausted: all {cap} blocks are in use and the resource could not "
                              f"supply another chunk ({self._chunks.chunk_blocks} blocks, "
                              f"{self._chunks.chunk_bytes} bytes)")
        raise MemoryError(f"pool exhausted: all {cap} blocks are in use")

    def acquire_array(self):
        """Acquire a block and return a typed view of it (dtype, shape of a block).

        Get its handle with :meth:`handle_of`; release it with :meth:`release`
        (the array or the handle).

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        MemoryError
            As :meth:`acquire`.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef Py_ssize_t i
        self._lock()
        i = self._pop()
        self._unlock()
        if i < 0:
            self._raise_exhausted(i)
        slots_open(&self._table, <size_t>i)
        try:
            return self._view(<size_t>i)
        except BaseException:
            slots_close(&self._table, <size_t>i)
            self._lock()
            _give_back(&self.engine, &self._table, <size_t>i)
            self._unlock()
            raise

    def view(self, handle):
        """A typed numpy view of the live block `handle` (no copy).

        Parameters
        ----------
        handle : int
            A handle from :meth:`acquire` (or :meth:`acquire_many`).

        Returns
        -------
        numpy.ndarray
            While it (or any view of it) is alive, :meth:`release` of the handle
            raises BufferError.

        Raises
        ------
        ValueError
            For a nil, stale or foreign handle.
        TypeError
            For a non-integer.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        return self._view(<size_t>slots_find(&self._table, handle))

    def release(self, obj):
        """Release a block: by handle, or by passing an array over it.

        Parameters
        ----------
        obj : int or numpy.ndarray
            A handle, or an array from :meth:`view` / :meth:`acquire_array`. By
            array, the handle dies now and the block returns to the free list when
            the last array over it dies.

        Raises
        ------
        ValueError
            For a nil, stale (double release) or foreign handle.
        BufferError
            By handle, if an array over the block is still alive (use the array
            form, or drop the arrays first).

        Notes
        -----
        Nothing changes when it raises. Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef Py_ssize_t i
        cdef SlotPin L
        if isinstance(obj, np.ndarray):
            L = self._lease_of(obj)
            i = <Py_ssize_t>L.slot
            if not slots_is_live(&self._table, <size_t>i):
                raise ValueError("that block was already released (double release)")
            slots_close(&self._table, <size_t>i)
            self._pending += 1      # the array pins it: it returns in _pool_return
            return
        i = slots_find(&self._table, obj)
        if self._table.pins[i]:
            raise BufferError(
                f"{self._table.pins[i]} array(s) over block {i} are still alive; delete them first, "
                "or release by passing the array (the block then returns when it dies)")
        slots_close(&self._table, <size_t>i)
        self._lock()
        _give_back(&self.engine, &self._table, <size_t>i)
        self._unlock()

    def reset(self):
        """Release every block at once: all handles go stale. O(touched blocks).

        A growable pool keeps its chunks (capacity does not shrink) and starts
        again from the first.

        Raises
        ------
        BufferError
            While any array from :meth:`view` / :meth:`acquire_array` is alive.
        RuntimeError
            While a Resource from :meth:`resource` is alive (its blocks would be
            lost).

        Notes
        -----
        Nothing changes when it raises. Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef size_t i, touched
        self._covered()
        touched = dod_pool_touched(&self.engine)
        for i in range(touched):
            if self._table.pins[i]:
                raise BufferError(f"an array over block {i} is still alive; delete it before reset()")
        if self._exports:
            raise RuntimeError("a Resource from resource() is alive: its blocks cannot be reset")
        for i in range(touched):
            if slots_is_live(&self._table, i):
                slots_close(&self._table, i)
        self._lock()
        dod_pool_reset(&self.engine)
        slots_clear_free(&self._table)
        self._unlock()

    cdef int _grow_for(self, size_t n) noexcept:
        """Lock held: make sure `n` blocks can be acquired without growing
        (a growable pool adds whole chunks as spares). 0, or the code of
        _pop (-1: no chunk, -3: side table); on failure the chunks added
        here are given back, so nothing changes."""
        cdef dod_pool* p = &self.engine
        cdef dod_pool_chunks* c = p.chunks
        cdef size_t keep
        cdef int code = 0
        if dod_pool_capacity(p) - p.in_use >= n:
            return 0
        if c == NULL or n > c.max_slots - p.in_use:
            return -1
        keep = c.n
        while dod_pool_capacity(p) - p.in_use < n:
            if not self._cover(dod_pool_capacity(p) + c.chunk_blocks):
                code = -3
                break
            if dod_pool_add_chunk(c) != 0:
                code = -1
                break
        if code != 0:
            _drop_chunks(p, keep)
        return code

    def reserve(self, n):
        """Make sure `n` more blocks can be acquired without asking the resource.

        A growable pool obtains whole chunks now, as spares; a fixed pool only
        checks.

        Parameters
        ----------
        n : int
            Blocks, >= 0.

        Raises
        ------
        MemoryError
            When the blocks cannot be had; all or nothing: chunks obtained by this
            call are given back, and ``failed`` is not counted (no acquire
            failed).
        ValueError
            For a negative `n`.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef object nn = PyNumber_Index(n)
        cdef int code
        if nn < 0:
            raise ValueError(f"n must be non-negative, got {n!r}")
        if nn > <object>self.max_blocks:
            raise MemoryError(f"{n} blocks are more than this pool can hold (max_blocks={self.max_blocks})")
        self._lock()
        code = self._grow_for(<size_t>nn)
        self._unlock()
        if code == -3:
            raise MemoryError("could not grow the pool's side table")
        if code != 0:
            raise MemoryError(f"pool has {self.available} free blocks and cannot obtain {n}")

    def acquire_many(self, n):
        """Acquire `n` blocks at once (one call instead of `n` from Python).

        Parameters
        ----------
        n : int

        Returns
        -------
        numpy.ndarray
            A new uint64 array of their handles.

        Raises
        ------
        MemoryError
            When fewer than `n` blocks are free and the pool cannot grow by
            enough whole chunks. All or nothing: no change but ``failed``.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef object nn = PyNumber_Index(n)
        cdef Py_ssize_t k, count, i
        cdef int code
        if nn < 0:
            raise ValueError(f"n must be non-negative, got {n!r}")
        if nn > <object>self.max_blocks:
            self.engine.failed += 1
            raise MemoryError(f"{n} blocks are more than this pool can hold (max_blocks={self.max_blocks})")
        count = <Py_ssize_t>nn
        out = np.empty(count, dtype=np.uint64)
        cdef uint64_t[::1] o = out
        self._lock()
        code = self._grow_for(<size_t>count)
        if code != 0:
            self.engine.failed += 1
            self._unlock()
            if code == -3:
                raise MemoryError("could not grow the pool's side table")
            raise MemoryError(f"pool has {self.available} free blocks, {n} requested")
        for k in range(count):
            i = self._pop()     # cannot fail: _grow_for made room and covered the side table
            if i < 0:           # defensive: undo, leaving the pool as it was
                while k > 0:
                    k -= 1
                    slots_close(&self._table, dod_handle_index(o[k]))
                    _give_back(&self.engine, &self._table, dod_handle_index(o[k]))
                self._unlock()
                self._raise_exhausted(i)
            o[k] = slots_open(&self._table, <size_t>i)
        self._unlock()
        return out

    def release_many(self, handles):
        """Release every handle in `handles`.

        Parameters
        ----------
        handles : array_like of uint64

        Raises
        ------
        ValueError
            For a nil, stale, foreign or repeated handle.
        BufferError
            For a block pinned by a live array.

        Notes
        -----
        Validated first, as a whole: nothing is released when it raises. Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        # A private copy: _lock() may wait without the GIL, and another thread
        # could rewrite the caller's array between the checks and the pushes.
        h = np.array(handles, dtype=np.uint64, copy=True).reshape(-1)
        cdef uint64_t[::1] hv = h
        cdef Py_ssize_t k, n = h.shape[0]
        cdef size_t i
        cdef uint64_t v
        # Validate everything first. A handle that passes is marked (its
        # generation advanced), so a repeat of it fails the same check; any
        # failure undoes the marks, leaving the pool as it was.
        cdef dod_slots* t = &self._table
        cdef size_t touched = dod_pool_touched(&self.engine)
        if touched > t.cap:
            touched = t.cap
        for k in range(n):
            v = hv[k]
            i = dod_handle_index(v)
            if v == 0 or i >= touched or t.gens[i] != dod_handle_generation(v) \
                    or (t.gens[i] & 1) == 0 or t.pins[i]:
                pinned = v != 0 and i < touched and t.gens[i] == dod_handle_generation(v) \
                    and (t.gens[i] & 1) == 1 and t.pins[i] != 0
                msg = (f"handles[{k}]: an array over block {i} is still alive" if pinned else
                       f"handles[{k}] = {v:#x} is not a live block of this pool "
                       "(nil, released, repeated, stale or foreign)")
                while k > 0:
                    k -= 1
                    t.gens[dod_handle_index(hv[k])] -= 1
                raise (BufferError if pinned else ValueError)(msg)
            t.gens[i] += 1          # marked: now stale, so a repeat fails the check
        t.live -= <size_t>n
        self._lock()
        for k in range(n):
            _give_back(&self.engine, t, dod_handle_index(hv[k]))
        self._unlock()

    # -------------------------------------------------------- whole-pool views

    def _chunk_array(self, size_t k):
        """Chunk k's blocks as one array of shape ``(blocks, *shape)``."""
        cdef dod_array_request req
        cdef char* base = self._region
        cdef size_t blocks = self.engine.count
        if self.engine.chunks != NULL:
            base = self._chunks.bases[k]
            blocks = _chunk_len(&self._chunks, k)
        # Made per call, not cached: a cached view would be a reference cycle
        # (pool -> array -> lease -> pool) that no collector can see. The
        # lease keeps the pool, hence every chunk, alive.
        L = export_pin(self, NULL)          # pins nothing: releases stay allowed
        req.nd = 1
        req.dims[0] = <cnp.npy_intp>(blocks * self.engine.stride)
        req.nbytes = blocks * self.engine.stride
        req.alignment = 1
        raw = wrap_memory(base, &req, as_dtype(np.uint8), L)
        dt = <cnp.dtype>self._dtype
        inner = []
        s = dt.itemsize
        for d in reversed(self._shape):
            inner.insert(0, s)
            s *= d
        return np.ndarray((int(blocks),) + self._shape, dtype=dt, buffer=raw,
                          strides=(int(self.engine.stride),) + tuple(inner))

    def as_array(self):
        """All blocks as one array of shape ``(block_count, *shape)``, no copy.

        Rows of free blocks hold unspecified bytes; combine with
        :meth:`live_mask`. Writing into free rows is harmless (see the module
        docstring). The array pins nothing: releasing blocks stays allowed.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError
            For a growable pool with more than one chunk (use :meth:`chunks`);
            with one chunk the array covers that chunk and not the chunks added
            later.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        if self.engine.chunks != NULL and self._chunks.n > 1:
            raise ValueError(f"this pool has {self._chunks.n} chunks, which are not one array; "
                             "use chunks() to get one (rows, live) pair per chunk")
        return self._chunk_array(0)

    def chunks(self):
        """One ``(rows, live)`` pair per chunk, in slot order, no copy of the blocks.

        ``rows`` views the chunk's blocks, shape ``(blocks_in_chunk, *shape)``
        (as :meth:`as_array` for a one-chunk pool); ``live`` is a new bool array
        saying which rows are live now. Row ``j`` of chunk ``k`` is slot
        ``first_blocks + (k - 1) * chunk_blocks + j`` (slot ``j`` for ``k = 0``),
        so the concatenated ``live`` arrays equal :meth:`live_mask`.

        Returns
        -------
        list of tuple
            ``(rows, live)`` per chunk. A fixed pool has one chunk. The views keep
            the pool (and every chunk) alive and pin nothing; spare chunks (after
            :meth:`reset`) are included, with no live rows.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).

        Examples
        --------
        Vectorised code over every live block of a pool that grew a second chunk:

        >>> import numpy as np
        >>> from dod.pool import Pool
        >>> pool = Pool(2, np.float64, (2,), growable=True, chunk_blocks=2)
        >>> handles = [pool.acquire() for _ in range(3)]     # the third block is in a second chunk
        >>> for h in handles:
        ...     pool.view(h)[:] = 1.0
        >>> for rows, live in pool.chunks():
        ...     rows[live] *= 0.5
        >>> len(pool.chunks()), pool.view(handles[2])
        (2, array([0.5, 0.5]))
        """
        mask = self.live_mask()
        out = []
        cdef size_t k, start = 0, n = self._chunks.n if self.engine.chunks != NULL else 1
        for k in range(n):
            rows = self._chunk_array(k)
            out.append((rows, mask[start:start + len(rows)]))
            start += len(rows)
        return out

    # -------------------------------------------------------- composition

    def resource(self):
        """This pool as a :class:`~dod.resource.Resource`.

        It serves blocks of at most ``block_size`` bytes and at most
        ``alignment``; larger requests get NULL. Blocks handed out through it
        are invisible to the Python face (no handles); they come from and return
        to the same side-table free list, so writes through :meth:`as_array` into
        free blocks cannot steer it.

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        While such a Resource is alive, :meth:`reset` raises RuntimeError. The
        resource takes the mutex when the pool is threadsafe. Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef dod_resource r
        pin = export_pin(self, &self._exports)
        r.allocate = _pool_allocate_locked if self.threadsafe else _pool_allocate
        r.deallocate = _pool_deallocate_locked if self.threadsafe else _pool_deallocate
        r.ctx = <void*>self._rctx
        return Resource.wrap(&r, pin, "pool", self.threadsafe and (self._upstream is None or self._upstream.threadsafe))
