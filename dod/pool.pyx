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

Safety contract (the Python face)
    Arrays keep the pool alive. Releasing a block by handle while an array
    from :meth:`view`/:meth:`acquire_array` is still alive raises BufferError
    (nothing changes). Releasing by passing the array itself is allowed: the
    handle dies at once, and the block returns to the free list when the last
    array over it dies. :meth:`as_array` covers free blocks too, so writing
    through it into a free block is allowed: the Python face validates each
    free-list link before following it and rebuilds the list from its
    generation table when a link was overwritten. (The Cython engine trusts
    the links: do not write free blocks while Cython code acquires from the
    same pool, and do not mix engine-level acquires with Python-face
    acquires on one pool, since the rebuild sees only Python-face blocks.)

Bookkeeping
    Engine: zero bytes per live block. The Python face adds a side table of
    8 bytes per slot (32-bit generation, 32-bit count of live arrays), never
    inside a block.

Thread-safety
    ``Pool(..., threadsafe=False)`` (default) is for one thread at a time.
    ``Pool(..., threadsafe=True)`` takes a mutex around every engine call of
    the Python face; Cython threads sharing it must use
    ``dod_pool_acquire_locked``/``dod_pool_release_locked`` with
    ``&owner.mutex``. Cost: one uncontended pthread lock+unlock pair per
    operation (about 15-20 ns, see ``python -m dod.bench --only pool``), and
    serialisation under contention. The lock-free pool comes later.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_add_overflow, dod_mul_overflow, dod_is_pow2, dod_poison
from dod._types cimport dod_handle, dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, parse_alignment, wrap_memory
from dod._atomic cimport dod_mutex_init, dod_mutex_destroy, dod_mutex_trylock
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16
    _REGION_ALIGN = 64

#: True in debug and sanitize builds (engine contract violations abort).
DEBUG = bool(DOD_DEBUG)

cdef size_t _MAX_BYTES = (<size_t>1) << 48
cdef size_t _MAX_BLOCKS = 0xFFFFFFFF        # slot index is 32 bits
cdef uint32_t _next_salt = 0x9E3779B8u       # advanced per pool (even: generations start even)


cdef inline void _push(dod_pool* p, size_t index) noexcept nogil:
    """The Python face's release of a slot it has validated: no debug walk of
    the free list (whose links a whole-pool view may have overwritten)."""
    cdef void* b = p.base + index * p.stride
    dod_poison(b, p.stride)
    (<void**>b)[0] = p.free
    p.free = b
    p.in_use -= 1


# ---------------------------------------------------------------- the pool as a dod_resource

cdef void* _pool_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef dod_pool* p = <dod_pool*>(<void**>ctx)[0]
    if size > p.stride or ((<uintptr_t>p.base | p.stride) & (alignment - 1)) != 0:
        p.failed += 1           # a request no block can hold
        return NULL
    return dod_pool_acquire(p)


cdef void _pool_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_pool_release(<dod_pool*>(<void**>ctx)[0], ptr)


cdef void* _pool_allocate_locked(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef dod_pool* p = <dod_pool*>(<void**>ctx)[0]
    cdef dod_mutex* m = <dod_mutex*>(<void**>ctx)[1]
    if size > p.stride or ((<uintptr_t>p.base | p.stride) & (alignment - 1)) != 0:
        dod_mutex_lock(m)
        p.failed += 1           # a request no block can hold
        dod_mutex_unlock(m)
        return NULL
    return dod_pool_acquire_locked(p, m)


cdef void _pool_deallocate_locked(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_pool_release_locked(<dod_pool*>(<void**>ctx)[0], <dod_mutex*>(<void**>ctx)[1], ptr)


# ---------------------------------------------------------------- leases

@cython.no_gc
@cython.freelist(32)
cdef class _BlockLease:
    """Base object of arrays over one block: keeps the pool alive, pins the block."""
    cdef Pool pool
    cdef size_t index

    def __dealloc__(self):
        if self.pool is not None:
            self.pool._unpin(self.index)


@cython.no_gc
cdef class _RegionLease:
    """Base object of the whole-pool view: keeps the pool alive, pins nothing."""
    cdef Pool pool


@cython.no_gc
cdef class _ResourcePin:
    """Owner of a Resource from Pool.resource(): keeps the pool alive, counts exports."""
    cdef Pool pool

    def __dealloc__(self):
        if self.pool is not None:
            self.pool._exports -= 1


cdef str _fmt_bytes(size_t n):
    cdef double x = <double>n
    for unit in ("B", "KiB", "MiB", "GiB"):
        if x < 1024.0 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024.0


# ---------------------------------------------------------------- the owner and its Python face

@cython.no_gc_clear
cdef class Pool:
    """A pool of ``block_count`` equal blocks.

    Pool(block_count, dtype=None, shape=(), *, block_size=None, align=None,
         resource=None, threadsafe=False)

    Parameters
    ----------
    block_count : int
        Number of blocks, 1 to 2**32 - 1. Fixed for the life of the pool.
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

    Layout: the stride between blocks is the block's bytes rounded up to at
    least 8 (the free-list link) and then to the alignment; a 12-byte block
    with the default alignment takes 16 bytes, a 20-byte block 32.

    Raises TypeError for a missing or object dtype, ValueError for a count
    out of range, an empty block, a block_size below 8 or a bad alignment,
    MemoryError when the memory cannot be obtained.
    """

    def __cinit__(self, block_count, dtype=None, shape=(), *, block_size=None, align=None,
                  Resource resource=None, bint threadsafe=False):
        global _next_salt
        cdef cnp.dtype dt
        cdef size_t count, nbytes, stride, total, alignment
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
        self._source = dod_pages_resource() if resource is None else &resource.resource
        self._upstream = resource
        self._region_align = alignment if alignment > _REGION_ALIGN else _REGION_ALIGN
        self._gens = <uint32_t*>calloc(count, sizeof(uint32_t))
        self._pins = <uint32_t*>calloc(count, sizeof(uint32_t))
        if self._gens == NULL or self._pins == NULL:
            raise MemoryError(f"could not obtain the side table of a {count}-block pool")
        with nogil:
            base = <char*>dod_resource_allocate(self._source, total, self._region_align)
        if base == NULL:
            raise MemoryError(f"could not obtain {total} bytes for a pool")
        if dod_mutex_init(&self.mutex) != 0:
            dod_resource_deallocate(self._source, base, total, self._region_align)
            raise MemoryError("could not initialise the pool's mutex")
        self._mutex_ready = True
        self._region_size = total
        self.pool.base = base
        self.pool.stride = stride
        self.pool.count = count
        self._block_bytes = nbytes
        self._dtype = dt
        self._shape = tuple(int(self._req.dims[i]) for i in range(self._req.nd))
        self.alignment = alignment
        self.threadsafe = threadsafe
        self._rctx[0] = <void*>&self.pool
        self._rctx[1] = <void*>&self.mutex
        self._salt = _next_salt if _next_salt else 2
        _next_salt = (_next_salt + 0x6A09E668u) & 0xFFFFFFFEu

    def __dealloc__(self):
        if self.pool.base != NULL:
            dod_resource_deallocate(self._source, self.pool.base, self._region_size, self._region_align)
        free(self._gens)
        free(self._pins)
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

    cdef Py_ssize_t _checked_pop(self) noexcept:
        """Acquire a slot for the Python face (lock held): its index, -1 when
        exhausted, -2 when the free list is corrupt and cannot be rebuilt.

        Every free-list link is validated before it is followed: a write
        through the whole-pool view into a free block must not make the
        pool hand out a live block or a wild pointer.
        """
        cdef dod_pool* p = &self.pool
        cdef uintptr_t b, off
        cdef size_t i
        cdef bint repaired = False
        while True:
            b = <uintptr_t>p.free
            if b != 0:
                off = b - <uintptr_t>p.base
                if b >= <uintptr_t>p.base and off % p.stride == 0:
                    i = off // p.stride
                    if i < p.touched and (self._gens[i] & 1) == 0 and self._pins[i] == 0:
                        p.free = (<void**>b)[0]
                        p.in_use += 1
                        p.allocations += 1
                        return <Py_ssize_t>i
            elif p.touched < p.count:
                i = p.touched
                if self._gens[i] == 0:      # first touch ever (a reset keeps generations)
                    self._gens[i] = self._salt
                dod_pool_acquire(p)          # takes the untouched block i
                return <Py_ssize_t>i
            elif p.in_use >= p.touched:
                p.failed += 1
                return -1
            # A link was overwritten, or free blocks fell off the list.
            if repaired or not self._rebuild():
                return -2
            repaired = True

    cdef bint _rebuild(self) noexcept:
        """Relink every free slot from the generation table (lock held)."""
        cdef dod_pool* p = &self.pool
        cdef size_t i = p.touched, nfree = 0
        cdef void* head = NULL
        cdef void* b
        if self._exports > 0:
            return False            # blocks handed out through resource() are invisible here
        while i > 0:
            i -= 1
            if (self._gens[i] & 1) == 0 and self._pins[i] == 0:
                b = p.base + i * p.stride
                (<void**>b)[0] = head
                head = b
                nfree += 1
        p.free = head
        p.in_use = p.touched - nfree
        self._repairs += 1
        return True

    cdef Py_ssize_t _index_of_handle(self, object handle) except -1:
        cdef object h = PyNumber_Index(handle)
        cdef dod_handle v
        cdef size_t i
        if h < 0 or h > 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"{handle!r} is not a handle (64-bit unsigned)")
        v = <dod_handle>h
        if v == 0:
            raise ValueError("nil handle (0)")
        i = dod_handle_index(v)
        if i >= self.pool.touched or self._gens[i] != dod_handle_generation(v):
            raise ValueError(f"handle {v:#x} is not a live block of this pool (released, stale or foreign)")
        if (self._gens[i] & 1) == 0:
            raise ValueError(f"handle {v:#x} is not live (even generation)")
        return <Py_ssize_t>i

    cdef void _unpin(self, size_t index) noexcept:
        self._pins[index] -= 1
        if self._pins[index] == 0 and (self._gens[index] & 1) == 0:
            # Released while arrays were alive: the block returns now.
            if self.threadsafe:
                dod_mutex_lock(&self.mutex)
            _push(&self.pool, index)
            if self.threadsafe:
                dod_mutex_unlock(&self.mutex)
            self._pending -= 1

    cdef object _view(self, size_t index):
        cdef _BlockLease L = _BlockLease.__new__(_BlockLease)
        L.pool = self
        L.index = index
        self._pins[index] += 1
        return wrap_memory(self.pool.base + index * self.pool.stride, &self._req, <cnp.dtype>self._dtype, L)

    cdef object _handle(self, size_t i):
        return dod_handle_make(<uint32_t>i, self._gens[i])

    # -------------------------------------------------------- acquire / release

    def acquire(self):
        """A live block's handle (a non-zero int). O(1).

        Raises MemoryError when every block is in use (counted in ``failed``;
        nothing else changes). The block's bytes are unspecified (not zeroed).
        """
        cdef Py_ssize_t i
        self._lock()
        i = self._checked_pop()
        self._unlock()
        if i < 0:
            self._raise_exhausted(i)
        self._gens[i] += 1
        return self._handle(<size_t>i)

    def _raise_exhausted(self, code):
        if code == -2:
            raise RuntimeError(
                "this pool's free list was overwritten (a write into a free block through "
                "as_array()) while a Resource from resource() is alive, so it cannot be rebuilt")
        raise MemoryError(f"pool exhausted: all {self.pool.count} blocks are in use")

    def acquire_array(self):
        """Acquire a block and return a typed view of it (dtype, shape of a block).

        Get its handle with :meth:`handle_of`; release it with
        :meth:`release` (the array or the handle). Raises as :meth:`acquire`.
        """
        cdef Py_ssize_t i
        self._lock()
        i = self._checked_pop()
        self._unlock()
        if i < 0:
            self._raise_exhausted(i)
        self._gens[i] += 1
        try:
            return self._view(<size_t>i)
        except BaseException:
            self._gens[i] += 1
            self._lock()
            _push(&self.pool, <size_t>i)
            self._unlock()
            raise

    def view(self, handle):
        """A typed numpy view of the live block `handle` (no copy).

        While the array (or any view of it) is alive, :meth:`release` of the
        handle raises BufferError. Raises ValueError for nil, stale or
        foreign handles, TypeError for non-integers.
        """
        return self._view(<size_t>self._index_of_handle(handle))

    def handle_of(self, arr):
        """The handle of the live block that array `arr` (from :meth:`view` or
        :meth:`acquire_array`) views. ValueError if it is not one, or released."""
        cdef _BlockLease L = self._lease_of(arr)
        if (self._gens[L.index] & 1) == 0:
            raise ValueError("that block was released")
        return self._handle(L.index)

    def _lease_of(self, arr):
        base = arr
        for _ in range(3):
            base = getattr(base, "base", None)
            if type(base) is _BlockLease:
                if (<_BlockLease>base).pool is not self:
                    raise ValueError("that array views a block of another pool")
                return base
            if not isinstance(base, np.ndarray):
                break
        raise ValueError("that array is not a block view of this pool (use view() or acquire_array())")

    def release(self, obj):
        """Release a block: by handle, or by passing an array over it.

        By handle: ValueError for nil, stale (double release) or foreign
        handles; BufferError if an array over the block is still alive (use
        the array form, or drop the arrays first). By array (from
        :meth:`view`/:meth:`acquire_array`): the handle dies now, and the
        block returns to the free list when the last array over it dies.
        Nothing changes when it raises.
        """
        cdef Py_ssize_t i
        cdef _BlockLease L
        if isinstance(obj, np.ndarray):
            L = self._lease_of(obj)
            i = <Py_ssize_t>L.index
            if (self._gens[i] & 1) == 0:
                raise ValueError("that block was already released (double release)")
            self._gens[i] += 1
            self._pending += 1      # the array pins it: it returns in _unpin
            return
        i = self._index_of_handle(obj)
        if self._pins[i]:
            raise BufferError(
                f"{self._pins[i]} array(s) over block {i} are still alive; delete them first, "
                "or release by passing the array (the block then returns when it dies)")
        self._gens[i] += 1
        self._lock()
        _push(&self.pool, <size_t>i)
        self._unlock()

    def reset(self):
        """Release every block at once: all handles go stale, O(touched blocks).

        Raises BufferError (and changes nothing) while any array from
        :meth:`view`/:meth:`acquire_array` is alive, or RuntimeError while a
        Resource from :meth:`resource` is alive (its blocks would be lost).
        """
        cdef size_t i
        for i in range(self.pool.touched):
            if self._pins[i]:
                raise BufferError(f"an array over block {i} is still alive; delete it before reset()")
        if self._exports:
            raise RuntimeError("a Resource from resource() is alive: its blocks cannot be reset")
        for i in range(self.pool.touched):
            if self._gens[i] & 1:
                self._gens[i] += 1
        self._lock()
        dod_pool_reset(&self.pool)
        self._unlock()

    def acquire_many(self, n):
        """Acquire `n` blocks at once: a new uint64 array of their handles.

        All or nothing: MemoryError (and no change but ``failed``) when fewer
        than `n` blocks are free. One call instead of `n` from Python.
        """
        cdef object nn = PyNumber_Index(n)
        cdef Py_ssize_t k, count, i
        if nn < 0:
            raise ValueError(f"n must be non-negative, got {n!r}")
        if nn > <object>(self.pool.count - self.pool.in_use):
            self.pool.failed += 1
            raise MemoryError(f"pool has {self.pool.count - self.pool.in_use} free blocks, {n} requested")
        count = <Py_ssize_t>nn
        out = np.empty(count, dtype=np.uint64)
        cdef uint64_t[::1] o = out
        self._lock()
        for k in range(count):
            i = self._checked_pop()
            if i < 0:           # only a corrupt, unrepairable list gets here: undo
                while k > 0:
                    k -= 1
                    _push(&self.pool, dod_handle_index(o[k]))
                    self._gens[dod_handle_index(o[k])] += 1
                self._unlock()
                self._raise_exhausted(i)
            self._gens[i] += 1
            o[k] = dod_handle_make(<uint32_t>i, self._gens[i])
        self._unlock()
        return out

    def release_many(self, handles):
        """Release every handle in `handles` (array-like of uint64).

        Validated first, as a whole: a nil, stale, foreign or repeated handle
        raises ValueError, a pinned block BufferError, and nothing is released.
        """
        h = np.ascontiguousarray(handles, dtype=np.uint64).reshape(-1)
        cdef uint64_t[::1] hv = h
        cdef Py_ssize_t k, n = h.shape[0]
        cdef size_t i
        cdef uint64_t v
        # Validate everything first. A handle that passes is marked (its
        # generation advanced), so a repeat of it fails the same check; any
        # failure undoes the marks, leaving the pool as it was.
        for k in range(n):
            v = hv[k]
            i = dod_handle_index(v)
            if v == 0 or i >= self.pool.touched or self._gens[i] != dod_handle_generation(v) \
                    or (self._gens[i] & 1) == 0 or self._pins[i]:
                pinned = v != 0 and i < self.pool.touched and self._gens[i] == dod_handle_generation(v) \
                    and (self._gens[i] & 1) == 1 and self._pins[i] != 0
                msg = (f"handles[{k}]: an array over block {i} is still alive" if pinned else
                       f"handles[{k}] = {v:#x} is not a live block of this pool "
                       "(nil, released, repeated, stale or foreign)")
                while k > 0:
                    k -= 1
                    self._gens[dod_handle_index(hv[k])] -= 1
                raise (BufferError if pinned else ValueError)(msg)
            self._gens[i] += 1
        self._lock()
        for k in range(n):
            _push(&self.pool, dod_handle_index(hv[k]))
        self._unlock()

    def is_live(self, handle):
        """True if `handle` names a live block of this pool (never raises for ints)."""
        try:
            self._index_of_handle(handle)
        except ValueError:
            return False
        return True

    # -------------------------------------------------------- whole-pool views

    def as_array(self):
        """All blocks as one array of shape ``(block_count, *shape)``, no copy.

        Rows of free blocks hold unspecified bytes; combine with
        :meth:`live_mask`. Writing into free rows is harmless (see the module
        docstring). The array pins nothing: releasing blocks stays allowed.
        """
        cdef dod_array_request req
        cdef _RegionLease L
        # Made per call, not cached: a cached view would be a reference cycle
        # (pool -> array -> lease -> pool) that no collector can see.
        L = _RegionLease.__new__(_RegionLease)
        L.pool = self
        req.nd = 1
        req.dims[0] = <cnp.npy_intp>self._region_size
        req.nbytes = self._region_size
        req.alignment = 1
        raw = wrap_memory(self.pool.base, &req, as_dtype(np.uint8), L)
        dt = <cnp.dtype>self._dtype
        inner = []
        s = dt.itemsize
        for d in reversed(self._shape):
            inner.insert(0, s)
            s *= d
        return np.ndarray((int(self.pool.count),) + self._shape, dtype=dt, buffer=raw,
                          strides=(int(self.pool.stride),) + tuple(inner))

    def live_mask(self):
        """A new bool array of shape ``(block_count,)``: True where the block is live."""
        return self._gen_array() & 1 == 1

    def _gen_array(self):
        cdef cnp.npy_intp n = <cnp.npy_intp>self.pool.count
        out = np.empty(n, dtype=np.uint32)
        cdef uint32_t[::1] o = out
        cdef size_t i
        for i in range(self.pool.count):
            o[i] = self._gens[i]
        return out

    def handles(self):
        """A new uint64 array of the handles of all live blocks, in slot order."""
        g = self._gen_array()
        idx = np.flatnonzero(g & 1)
        return (g[idx].astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)

    def index_of(self, handle):
        """The slot index of a live handle (the row in :meth:`as_array`)."""
        return self._index_of_handle(handle)

    # -------------------------------------------------------- composition

    def resource(self):
        """This pool as a :class:`~dod.resource.Resource` (blocks of at most
        ``block_size`` bytes and at most ``alignment``; larger requests get NULL).

        It takes the mutex when the pool is threadsafe. Blocks handed out
        through it are invisible to the Python face (no handles); while such
        a Resource is alive the free-list repair is disabled.
        """
        cdef dod_resource r
        cdef _ResourcePin pin = _ResourcePin.__new__(_ResourcePin)
        pin.pool = self
        self._exports += 1
        r.allocate = _pool_allocate_locked if self.threadsafe else _pool_allocate
        r.deallocate = _pool_deallocate_locked if self.threadsafe else _pool_deallocate
        r.ctx = <void*>self._rctx
        return Resource.wrap(&r, pin, "pool")

    # -------------------------------------------------------- checks and statistics

    def check(self):
        """Walk the free list and verify every invariant; AssertionError names the first broken one."""
        cdef dod_pool* p = &self.pool
        cdef uintptr_t b, off
        cdef size_t i, n = 0, pinned_free = 0
        seen = bytearray(p.touched)
        b = <uintptr_t>p.free
        while b != 0:
            off = b - <uintptr_t>p.base
            if b < <uintptr_t>p.base or off % p.stride != 0 or off // p.stride >= p.touched:
                raise AssertionError(f"free-list link {b:#x} is not a touched block of this pool")
            i = off // p.stride
            if seen[i]:
                raise AssertionError(f"free list has a cycle at block {i}")
            seen[i] = 1
            if self._gens[i] & 1:
                raise AssertionError(f"block {i} is on the free list but live")
            if self._pins[i]:
                raise AssertionError(f"block {i} is on the free list but pinned by arrays")
            n += 1
            b = <uintptr_t>(<void**>b)[0]
        if n + p.in_use != p.touched:
            raise AssertionError(f"free {n} + in_use {p.in_use} != touched {p.touched}")
        live = 0
        for i in range(p.touched):
            if self._gens[i] & 1:
                live += 1
                if seen[i]:
                    raise AssertionError(f"live block {i} on the free list")
            elif not seen[i]:
                pinned_free += 1
        if p.touched > p.count or p.in_use > p.count:
            raise AssertionError("counters beyond the capacity")
        return True

    @property
    def capacity(self):
        """Number of blocks."""
        return self.pool.count

    @property
    def block_count(self):
        return self.pool.count

    @property
    def block_size(self):
        """Bytes one block occupies (the stride, padding included)."""
        return self.pool.stride

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        """Per-block shape."""
        return self._shape

    @property
    def in_use(self):
        """Blocks acquired and not yet returned (released blocks pinned by arrays included)."""
        return self.pool.in_use

    @property
    def live(self):
        """Blocks with a live handle."""
        return self.pool.in_use - <size_t>self._pending

    @property
    def available(self):
        return self.pool.count - self.pool.in_use

    @property
    def peak(self):
        """Highest number of blocks in use at once (blocks ever touched)."""
        return self.pool.touched if self.pool.touched > self.pool.peak else self.pool.peak

    @property
    def allocations(self):
        return self.pool.allocations

    @property
    def failed(self):
        return self.pool.failed

    @property
    def repairs(self):
        """Times the Python face rebuilt the free list after writes into free blocks."""
        return self._repairs

    def stats(self):
        """The common statistics as a dict (block counts, and bytes)."""
        return {
            "capacity": self.pool.count,
            "in_use": self.pool.in_use,
            "available": self.pool.count - self.pool.in_use,
            "peak": self.peak,
            "allocations": self.pool.allocations,
            "failed": self.pool.failed,
            "block_size": self.pool.stride,
            "bytes": self._region_size,
            "bytes_in_use": self.pool.in_use * self.pool.stride,
            "pending": self._pending,
            "repairs": self._repairs,
        }

    def __len__(self):
        return self.pool.in_use - <size_t>self._pending

    def __repr__(self):
        return (f"<dod.Pool{' threadsafe' if self.threadsafe else ''} {self.pool.count} x "
                f"{self._dtype}{list(self._shape) if self._shape else ''} "
                f"(stride {self.pool.stride} B, {_fmt_bytes(self._region_size)}) "
                f"in_use={self.pool.in_use} peak={self.peak} "
                f"allocations={self.pool.allocations} failed={self.pool.failed}>")
