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
    ``dod/pool.pxd`` (growth: ``dod_pool_grow`` here).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdint cimport SIZE_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_add_overflow, dod_mul_overflow, dod_poison, dod_debug_fail
from dod._types cimport dod_handle, dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod._lease cimport (dod_slots, SlotPin, slot_pin, slots_init, slots_free, slots_cover,
                         slots_cover_links, slots_pop, slots_push, slots_clear_free, slots_open,
                         slots_close, slots_is_live, slots_find, export_pin)
from dod.atomics cimport dod_mutex_init, dod_mutex_destroy, dod_mutex_trylock
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate, dod_resource_allocate_from_python,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16
    _REGION_ALIGN = 64

#: True in debug and sanitize builds (engine contract violations abort).
DEBUG = bool(DOD_DEBUG)

cdef size_t _MAX_BYTES = (<size_t>1) << 48
cdef size_t _MAX_BLOCKS = 0xFFFFFFFF        # slot index is 32 bits
# A growable pool holds at most this many chunks. Without a bound, one call
# (reserve(2**31) with 8-block chunks) asked the upstream for 2**28 chunks,
# one at a time, for many minutes before failing; with it the request is
# refused at once (max_slots below) and a chunk table stays under 16 MiB.
cdef size_t _MAX_CHUNKS = (<size_t>1) << 20


# ---------------------------------------------------------------- engine slow paths

cdef inline size_t _chunk_start(const dod_pool_chunks* c, size_t k) noexcept nogil:
    """First slot of chunk k."""
    return 0 if k == 0 else c.first_blocks + (k - 1) * c.chunk_blocks


cdef inline size_t _chunk_len(const dod_pool_chunks* c, size_t k) noexcept nogil:
    """Blocks in chunk k."""
    return c.first_blocks if k == 0 else c.chunk_blocks


cdef inline size_t _chunks_capacity(const dod_pool_chunks* c) noexcept nogil:
    return c.first_blocks + (c.n - 1) * c.chunk_blocks


cdef int dod_pool_add_chunk(dod_pool_chunks* c) noexcept nogil:
    """Obtain one more chunk from the upstream and append it as a spare
    (after every other chunk; the bump index does not move). 0, or -1 when
    the pool is fixed (c == NULL), the slot limit is reached, or memory is
    short; on failure nothing changes (the chunk table may have grown its
    capacity). Call it under the mutex of a shared pool."""
    cdef char** bases
    cdef size_t* order
    cdef size_t cap, lo, hi, mid
    cdef char* mem
    if c == NULL or c.chunk_blocks == 0 or c.n == 0:
        return -1
    if _chunks_capacity(c) + c.chunk_blocks > c.max_slots:   # both below 2**33: no overflow
        return -1
    if c.n == c.cap:
        cap = c.cap * 2 if c.cap else 4
        bases = <char**>malloc(cap * sizeof(char*))
        order = <size_t*>malloc(cap * sizeof(size_t))
        if bases == NULL or order == NULL:
            free(bases)
            free(order)
            return -1
        memcpy(bases, c.bases, c.n * sizeof(char*))
        memcpy(order, c.order, c.n * sizeof(size_t))
        free(c.bases)
        free(c.order)
        c.bases = bases
        c.order = order
        c.cap = cap
    mem = <char*>dod_resource_allocate(c.upstream, c.chunk_bytes, c.chunk_align)
    if mem == NULL:
        return -1
    # Keep `order` sorted by address: pointer -> slot is a binary search.
    lo = 0
    hi = c.n
    while lo < hi:
        mid = (lo + hi) >> 1
        if <uintptr_t>c.bases[c.order[mid]] < <uintptr_t>mem:
            lo = mid + 1
        else:
            hi = mid
    memmove(&c.order[lo + 1], &c.order[lo], (c.n - lo) * sizeof(size_t))
    c.order[lo] = c.n
    c.bases[c.n] = mem
    c.n += 1
    return 0


cdef void _drop_chunks(dod_pool* p, size_t keep) noexcept nogil:
    """Give back the spare chunks numbered keep and above (all untouched,
    after the current one): undoes dod_pool_add_chunk calls of one request."""
    cdef dod_pool_chunks* c = p.chunks
    cdef size_t k, j = 0
    if c == NULL or keep <= c.current:
        return
    for k in range(c.n):
        if c.order[k] < keep:
            c.order[j] = c.order[k]
            j += 1
    for k in range(keep, c.n):
        dod_resource_deallocate(c.upstream, c.bases[k], c.chunk_bytes, c.chunk_align)
    c.n = keep


cdef dod_pool_span dod_pool_grow(dod_pool_chunks* c) noexcept nogil:
    """Acquire's slow path: the free list is empty and the current chunk is
    fully handed out. Moves to the next chunk (a spare, or a new one from
    the upstream) and returns it for the bump index; {NULL, 0} for a fixed
    pool (c == NULL) or when no chunk can be had (nothing changes then)."""
    cdef dod_pool_span s
    s.base = NULL
    s.count = 0
    if c == NULL or (c.current + 1 >= c.n and dod_pool_add_chunk(c) != 0):
        return s
    c.current += 1
    s.base = c.bases[c.current]
    s.count = c.chunk_blocks
    return s


cdef void dod_pool_reset_chunks(dod_pool* p) noexcept nogil:
    """dod_pool_reset of a growable pool: back to chunk 0, later chunks kept as spares."""
    cdef dod_pool_chunks* c = p.chunks
    cdef size_t k = 0
    if p.prior + p.touched > p.peak:
        p.peak = p.prior + p.touched
    while k < c.current:
        dod_poison(c.bases[k], _chunk_len(c, k) * p.stride)
        k += 1
    dod_poison(p.base, p.touched * p.stride)
    c.current = 0
    p.prior = 0
    p.base = c.bases[0]
    p.count = c.first_blocks
    p.touched = 0
    p.free = NULL
    p.in_use = 0


cdef size_t dod_pool_slot_of(const dod_pool* p, const void* b) noexcept nogil:
    """Slot index of the block that starts at `b`, or SIZE_MAX when `b` is not
    the start of a block of any chunk of this pool (touched or not)."""
    cdef const dod_pool_chunks* c = p.chunks
    cdef uintptr_t a = <uintptr_t>b, off
    cdef size_t lo, hi, mid, k
    if p.stride == 0:
        return SIZE_MAX
    if c == NULL:
        off = a - <uintptr_t>p.base
        if a < <uintptr_t>p.base or off % p.stride != 0 or off // p.stride >= p.count:
            return SIZE_MAX
        return off // p.stride
    lo = 0                      # the last chunk whose base is <= a
    hi = c.n
    while lo < hi:
        mid = (lo + hi) >> 1
        if <uintptr_t>c.bases[c.order[mid]] <= a:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return SIZE_MAX
    k = c.order[lo - 1]
    off = a - <uintptr_t>c.bases[k]
    if off % p.stride != 0 or off // p.stride >= _chunk_len(c, k):
        return SIZE_MAX
    return _chunk_start(c, k) + off // p.stride


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


cdef int _check_free_block(const dod_slots* t, size_t i, bytearray seen, str where) except -1:
    """Pool.check(): block i, found on a free list, is a touched block seen
    once on all free lists, not live and not pinned."""
    if i >= <size_t>len(seen):
        raise InvariantError(f"{where} holds slot {i}, which is not a touched block of this pool")
    if seen[i]:
        raise InvariantError(f"{where} has a cycle at block {i} (or the block is on both lists)")
    seen[i] = 1
    if t.gens[i] & 1:
        raise InvariantError(f"block {i} is on {where} but live")
    if t.pins[i]:
        raise InvariantError(f"block {i} is on {where} but pinned by arrays")
    return 0


cdef void _pool_return(void* owner, size_t index) noexcept:
    """SlotPin's callback: the last array over a block released by array died."""
    cdef Pool self = <Pool>owner
    if self.threadsafe:
        dod_mutex_lock(&self.mutex)
    _give_back(&self.engine, &self._table, index)
    if self.threadsafe:
        dod_mutex_unlock(&self.mutex)
    self._pending -= 1


# ---------------------------------------------------------------- the owner and its Python face

@cython.no_gc_clear
cdef class Pool:
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

    def __cinit__(self, block_count, dtype=None, shape=(), *, block_size=None, align=None,
                  Resource resource=None, bint threadsafe=False, bint growable=False,
                  chunk_blocks=None):
        cdef cnp.dtype dt
        cdef size_t count, nbytes, stride, total, alignment, cblocks = 0, cbytes = 0
        cdef object n = PyNumber_Index(block_count)
        if n <= 0 or n > <object>_MAX_BLOCKS:
            raise ValueError(f"block_count must be between 1 and 2**32 - 1, got {block_count!r}")
        count = <size_t>n
        if block_size is not None:
            if dtype is not None or shape != ():
                raise TypeError("give either block_size or dtype/shape, not both")
            bs = PyNumber_Index(block_size)
            if bs < <object>sizeof(void*):
                raise ValueError(f"block_size must be at least {sizeof(void*)} bytes (the free-list link), got {block_size!r}")
            if bs > <object>_MAX_BYTES:
                raise ValueError(f"block_size {block_size!r} is absurd")
            dtype = np.uint8
            shape = (int(bs),)
        elif dtype is None:
            raise TypeError("Pool() needs a dtype (with an optional per-block shape) or a block_size")
        dt = as_dtype(dtype)
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &self._req)
        nbytes = self._req.nbytes
        if nbytes == 0:
            raise ValueError(f"a block of shape {shape!r} and dtype {dt} holds no bytes")
        alignment = self._req.alignment
        stride = nbytes if nbytes > sizeof(void*) else sizeof(void*)
        if dod_add_overflow(stride, alignment - 1, &stride):
            raise MemoryError("block too large")
        stride &= ~(alignment - 1)
        if dod_mul_overflow(stride, count, &total) or total > _MAX_BYTES:
            raise MemoryError(f"{count} blocks of {stride} bytes are more than 2**48 bytes")
        if growable:
            cb = n if chunk_blocks is None else PyNumber_Index(chunk_blocks)
            if cb <= 0 or cb > <object>_MAX_BLOCKS:
                raise ValueError(f"chunk_blocks must be between 1 and 2**32 - 1, got {chunk_blocks!r}")
            cblocks = <size_t>cb
            if dod_mul_overflow(stride, cblocks, &cbytes) or cbytes > _MAX_BYTES:
                raise MemoryError(f"a chunk of {cblocks} blocks of {stride} bytes is more than 2**48 bytes")
        elif chunk_blocks is not None:
            raise ValueError("chunk_blocks needs growable=True")
        self._source = dod_pages_resource() if resource is None else &resource.resource
        self._upstream = resource
        self._region_align = alignment if alignment > _REGION_ALIGN else _REGION_ALIGN
        slots_init(&self._table, False)
        if not slots_cover(&self._table, count):
            raise MemoryError(f"could not obtain the side table of a {count}-block pool")
        if growable:
            self._chunks.bases = <char**>malloc(4 * sizeof(char*))
            self._chunks.order = <size_t*>malloc(4 * sizeof(size_t))
            if self._chunks.bases == NULL or self._chunks.order == NULL:
                raise MemoryError("could not obtain the chunk table of a growable pool")
            self._chunks.cap = 4
        base = <char*>dod_resource_allocate_from_python(self._upstream, self._source, total, self._region_align)
        if base == NULL:
            raise MemoryError(f"could not obtain {total} bytes for a pool")
        if dod_mutex_init(&self.mutex) != 0:
            dod_resource_deallocate(self._source, base, total, self._region_align)
            raise MemoryError("could not initialise the pool's mutex")
        self._mutex_ready = True
        self._region = base
        self._region_size = total
        self.engine.base = base
        if growable:
            self._chunks.bases[0] = base
            self._chunks.order[0] = 0
            self._chunks.n = 1
            self._chunks.current = 0
            self._chunks.first_blocks = count
            self._chunks.chunk_blocks = cblocks
            self._chunks.chunk_bytes = cbytes
            self._chunks.chunk_align = self._region_align
            # first_blocks + (_MAX_CHUNKS - 1) * chunk_blocks, at most 2**32 - 1
            # (cblocks < 2**32, so the product stays below 2**52: no overflow)
            self._chunks.max_slots = count + (_MAX_CHUNKS - 1) * cblocks
            if self._chunks.max_slots > _MAX_BLOCKS:
                self._chunks.max_slots = _MAX_BLOCKS
            self._chunks.upstream = self._source
            self.engine.chunks = &self._chunks
        self.growable = growable
        self.engine.stride = stride
        self.engine.count = count
        self._block_bytes = nbytes
        self._dtype = dt
        self._shape = tuple(int(self._req.dims[i]) for i in range(self._req.nd))
        self.alignment = alignment
        self.threadsafe = threadsafe
        self._rctx[0] = <void*>&self.engine
        self._rctx[1] = <void*>&self.mutex
        self._rctx[2] = <void*>&self._table

    def __dealloc__(self):
        cdef size_t k
        if self.engine.chunks != NULL:        # every further chunk (the first is the region)
            for k in range(1, self._chunks.n):
                dod_resource_deallocate(self._chunks.upstream, self._chunks.bases[k],
                                        self._chunks.chunk_bytes, self._chunks.chunk_align)
        free(self._chunks.bases)
        free(self._chunks.order)
        if self._region != NULL:
            dod_resource_deallocate(self._source, self._region, self._region_size, self._region_align)
        slots_free(&self._table)
        if self._mutex_ready:
            dod_mutex_destroy(&self.mutex)

    # -------------------------------------------------------- internals

    cdef int _lock(self) except -1:
        if self.threadsafe and not dod_mutex_trylock(&self.mutex):
            with nogil:             # a nogil thread holds it: wait without blocking Python threads
                dod_mutex_lock(&self.mutex)
        return 0

    cdef void _unlock(self) noexcept:
        if self.threadsafe:
            dod_mutex_unlock(&self.mutex)

    cdef bint _cover(self, size_t slots) noexcept:
        """Lock held: the side table covers `slots` slots. False when memory
        is short: the table still covers what it covered."""
        return slots_cover(&self._table, slots)

    cdef int _covered(self) except -1:
        """The side table covers every slot (chunks added by engine-level
        acquires from Cython are not seen by the Python face until here)."""
        cdef bint ok = True
        if self._table.cap < dod_pool_capacity(&self.engine):
            self._lock()
            ok = self._cover(dod_pool_capacity(&self.engine))
            self._unlock()
        if not ok:
            raise MemoryError("could not grow the pool's side table")
        return 0

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

    def handle_of(self, arr):
        """The handle of the live block that array `arr` views.

        Parameters
        ----------
        arr : numpy.ndarray
            From :meth:`view` or :meth:`acquire_array`.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            If `arr` is not such an array, or its block was released.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef SlotPin L = self._lease_of(arr)
        if not slots_is_live(&self._table, L.slot):
            raise ValueError("that block was released")
        return dod_handle_make(<uint32_t>L.slot, self._table.gens[L.slot])

    def _lease_of(self, arr):
        base = arr
        for _ in range(3):
            base = getattr(base, "base", None)
            if type(base) is SlotPin:
                if (<SlotPin>base).owner is not self:
                    raise ValueError("that array views a block of another pool")
                return base
            if not isinstance(base, np.ndarray):
                break
        raise ValueError("that array is not a block view of this pool (use view() or acquire_array())")

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

    def is_live(self, handle):
        """Whether `handle` names a live block of this pool.

        Parameters
        ----------
        handle : int

        Returns
        -------
        bool
            Never raises for ints.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        try:
            slots_find(&self._table, handle)
        except ValueError:
            return False
        return True

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

    def live_mask(self):
        """Which slots hold a live block.

        Returns
        -------
        numpy.ndarray
            A new bool array of shape ``(capacity,)`` (all chunks, in slot order).

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        return self._gen_array() & 1 == 1

    def _gen_array(self):
        self._covered()
        cdef size_t i, cap = dod_pool_capacity(&self.engine)
        out = np.empty(<cnp.npy_intp>cap, dtype=np.uint32)
        cdef uint32_t[::1] o = out
        for i in range(cap):
            o[i] = self._table.gens[i]
        return out

    def handles(self):
        """The handles of all live blocks, in slot order.

        Returns
        -------
        numpy.ndarray
            A new uint64 array.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        g = self._gen_array()
        idx = np.flatnonzero(g & 1)
        return (g[idx].astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)

    def index_of(self, handle):
        """The slot index of a live handle (the row in :meth:`as_array`).

        Parameters
        ----------
        handle : int

        Returns
        -------
        int

        Raises
        ------
        ValueError
            For a nil, stale or foreign handle, or a value that is not a 64-bit
            handle.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        return slots_find(&self._table, handle)

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

    # -------------------------------------------------------- checks and statistics

    def check(self):
        """Walk the free lists and the side table and verify every invariant.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef dod_pool* p = &self.engine
        cdef dod_pool_chunks* c = p.chunks
        cdef dod_slots* t = &self._table
        cdef uintptr_t b
        cdef size_t i, k, n = 0, touched = dod_pool_touched(p)
        self._covered()
        if c != NULL:
            if c.n == 0 or c.n > c.cap or c.current >= c.n or c.bases[0] != self._region:
                raise InvariantError(f"chunk table broken: n={c.n} cap={c.cap} current={c.current}")
            if (p.base != c.bases[c.current] or p.prior != _chunk_start(c, c.current)
                    or p.count != _chunk_len(c, c.current)):
                raise InvariantError(f"current chunk {c.current} does not match base/prior/count")
            for k in range(c.n):
                if k + 1 < c.n and (<uintptr_t>c.bases[c.order[k]] + _chunk_len(c, c.order[k]) * p.stride
                                    > <uintptr_t>c.bases[c.order[k + 1]]):
                    raise InvariantError(f"chunks {c.order[k]} and {c.order[k + 1]} overlap or are out of address order")
                if dod_pool_slot_of(p, c.bases[k]) != _chunk_start(c, k):
                    raise InvariantError(f"chunk {k}'s first block does not map to slot {_chunk_start(c, k)}")
        elif p.prior != 0:
            raise InvariantError("a fixed pool has slots before its only chunk")
        if p.touched > p.count:
            raise InvariantError(f"touched {p.touched} beyond the current chunk's {p.count} blocks")
        if touched > dod_pool_capacity(p) or p.in_use > touched:
            raise InvariantError("counters beyond the capacity")
        if t.link_cap < t.cap:
            raise InvariantError(f"side table links cover {t.link_cap} slots, fewer than its {t.cap}")
        seen = bytearray(touched)
        # The Python face's free list, in the side table.
        k = t.free_head
        while k != 0:
            _check_free_block(t, k - 1, seen, "the side table's free list")
            n += 1
            k = t.next[k - 1]
        if n != t.free_count:
            raise InvariantError(f"the side table counts {t.free_count} free blocks, its list holds {n}")
        # The engine's intrusive list: empty unless Cython code released through the engine.
        b = <uintptr_t>p.free
        while b != 0:
            _check_free_block(t, dod_pool_slot_of(p, <void*>b), seen, "the engine's free list")
            n += 1
            b = <uintptr_t>(<void**>b)[0]
        if n + p.in_use != touched:
            raise InvariantError(f"free {n} + in_use {p.in_use} != touched {touched}")
        for i in range(touched, dod_pool_capacity(p)):
            if t.gens[i] & 1:
                raise InvariantError(f"untouched block {i} is live")
        return True

    @property
    def capacity(self):
        """Number of blocks (all chunks of a growable pool)."""
        return dod_pool_capacity(&self.engine)

    @property
    def block_count(self):
        """Number of blocks, as :attr:`capacity`."""
        return dod_pool_capacity(&self.engine)

    @property
    def chunk_count(self):
        """Chunks obtained: 1 for a fixed pool (spares of a growable pool included)."""
        return self._chunks.n if self.engine.chunks != NULL else 1

    @property
    def chunk_blocks(self):
        """Blocks per further chunk of a growable pool; 0 for a fixed pool."""
        return self._chunks.chunk_blocks if self.engine.chunks != NULL else 0

    @property
    def max_blocks(self):
        """The most blocks this pool can ever hold: its capacity for a fixed
        pool; for a growable one the capacity at 2**20 chunks, at most
        2**32 - 1. A request for more fails at once."""
        return self._chunks.max_slots if self.engine.chunks != NULL else dod_pool_capacity(&self.engine)

    @property
    def block_size(self):
        """Bytes one block occupies (the stride, padding included)."""
        return self.engine.stride

    @property
    def dtype(self):
        """The dtype of one block's elements (uint8 for raw ``block_size`` blocks)."""
        return self._dtype

    @property
    def shape(self):
        """Per-block shape."""
        return self._shape

    @property
    def in_use(self):
        """Blocks acquired and not yet returned (released blocks pinned by arrays included)."""
        return self.engine.in_use

    @property
    def live(self):
        """Blocks with a live handle."""
        return self.engine.in_use - <size_t>self._pending

    @property
    def available(self):
        """Blocks that can be acquired without growing."""
        return dod_pool_capacity(&self.engine) - self.engine.in_use

    @property
    def peak(self):
        """Highest number of blocks in use at once (blocks ever touched)."""
        cdef size_t t = dod_pool_touched(&self.engine)
        return t if t > self.engine.peak else self.engine.peak

    @property
    def allocations(self):
        """Successful acquires since creation."""
        return self.engine.allocations

    @property
    def failed(self):
        """Acquires refused (the pool was full and could not grow)."""
        return self.engine.failed

    @property
    def nbytes(self):
        """Bytes obtained from the resource (every chunk)."""
        if self.engine.chunks == NULL:
            return self._region_size
        return self._region_size + (self._chunks.n - 1) * self._chunks.chunk_bytes

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes: blocks times the stride), then the pool's
            own: ``block_size`` (the stride), block counts (``blocks``,
            ``blocks_in_use``, ``blocks_available``, ``blocks_peak``), ``chunks``
            and ``pending`` (released blocks still pinned by arrays).

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef size_t cap = dod_pool_capacity(&self.engine), stride = self.engine.stride
        cdef size_t peak = self.peak
        return {
            "capacity": cap * stride,
            "used": self.engine.in_use * stride,
            "available": (cap - self.engine.in_use) * stride,
            "peak": peak * stride,
            "allocations": self.engine.allocations,
            "failed": self.engine.failed,
            "block_size": stride,
            "blocks": cap,
            "blocks_in_use": self.engine.in_use,
            "blocks_available": cap - self.engine.in_use,
            "blocks_peak": peak,
            "chunks": self.chunk_count,
            "pending": self._pending,
        }

    def __len__(self):
        """Blocks with a live handle (released blocks still pinned by arrays
        excluded). Thread-safety: as every method of the pool."""
        return self.engine.in_use - <size_t>self._pending

    def __repr__(self):
        cdef size_t cap = dod_pool_capacity(&self.engine)
        chunks = ""
        if self.engine.chunks != NULL:
            chunks = (f" in {self._chunks.n} chunk{'s' if self._chunks.n > 1 else ''} "
                      f"(+{self._chunks.chunk_blocks} blocks a chunk; ")
        return (f"<dod.Pool{' growable' if self.growable else ''}{' threadsafe' if self.threadsafe else ''} "
                f"{cap} x {self._dtype}{list(self._shape) if self._shape else ''}"
                f"{chunks if chunks else ' ('}stride {self.engine.stride} B, {fmt_bytes(self.nbytes)}) "
                f"in_use={self.engine.in_use} peak={self.peak} "
                f"allocations={self.engine.allocations} failed={self.engine.failed}>")
