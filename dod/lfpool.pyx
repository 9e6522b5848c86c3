"""A lock-free pool of fixed-size blocks, shared by any number of threads.

:class:`LockFreePool` hands out blocks of one size from a free list that
threads push to and pop from with a single 16-byte compare-and-swap (a
Treiber stack whose head carries an ABA tag). Growth takes a lock, re-checks
after taking it, carves a whole chunk privately and publishes it with one
push. No memory goes back to the system before the pool itself is destroyed,
so a thread that read a stale head can never touch unmapped memory.

Safety contract (the Python face)
    Python callers hold handles (ints), never addresses: :meth:`acquire`
    returns one, :meth:`view` shows the block as a numpy array, and
    :meth:`release` gives it back. A released or foreign handle raises
    ``ValueError``; releasing a block while an array view of it is alive
    raises ``BufferError``. Either way nothing changes. (There is no
    unchecked escape: a free block's first word is the free-list link.)

Thread-safety
    The engine (``cimport dod.lfpool``) is safe from any number of threads
    at once without the GIL: acquire, try_acquire, release and
    release_chain are lock-free; only growth takes a lock. The Python face
    is safe from any Python thread (its handle table is guarded by the GIL)
    and may run while Cython threads use the engine on the same pool.
    Statistics that walk the free list (``in_use``, ``available``, ``check``)
    are exact only while no other thread is using the pool.

Cython
    ``from dod.lfpool cimport LockFreePool, dod_lfpool_acquire, dod_lfpool_release``
    and run the engine on ``&owner.engine``; see ``dod/lfpool.pxd`` for the
    checks the caller owns there.

Where things live
    Lifetime rule: ``dod._lease``: the handle table ``dod_slots`` (mapped)
    and ``SlotPin`` for views.
    Fast path: ``dod_lfpool_acquire`` / ``dod_lfpool_release``, inline in
    ``dod/lfpool.pxd`` (growth: ``dod_lfpool_acquire_slow`` here).
"""
cimport cython
from libc.stdint cimport uintptr_t, uint64_t, uint32_t, int64_t
from libc.stdio cimport fprintf, stderr
from libc.stdlib cimport abort
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_add_overflow, dod_mul_overflow, dod_is_pow2, dod_poison
from dod.atomics cimport (dod_mutex_init, dod_mutex_destroy, dod_mutex_lock, dod_mutex_unlock,
                          dod_atomic_load_ptr, dod_atomic_store_ptr, dod_atomic_load_u64,
                          dod_atomic_fetch_add_relaxed_u64, dod_thread_self, dod_atomic_load_speculative_ptr)
from dod._types cimport dod_handle
from dod._lease cimport (slots_init, slots_free, slots_reserve, slots_add, slots_find,
                         slots_check_unpinned, slots_find_many, slots_remove, slots_view)
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod.errors import InvariantError

cdef extern from "_os.h" nogil:
    size_t dod_os_page_size()

cdef enum:
    _CHUNK_ALIGN = 64           # chunks start on a cache line at least
    _DEFAULT_ALIGN = 16
    _DEFAULT_CHUNK_BYTES = 65536

cdef size_t _MAX_BLOCK = (<size_t>1) << 40
cdef size_t _MAX_BLOCKS = (<size_t>1) << 40


# ---------------------------------------------------------------- engine slow paths

cdef size_t dod_lfpool_free_count(dod_lfpool* p) noexcept nogil:
    """Blocks on the free list (exact only when no other thread uses the pool)."""
    cdef void* b = dod_tagged_load(&p.head).ptr
    cdef size_t n = 0
    cdef size_t bound = p.capacity
    while b != NULL and n <= bound:        # the bound stops a walk that a concurrent pop misled
        n += 1
        b = dod_atomic_load_ptr(<void**>b)
    return n


cdef bint dod_lfpool_owns(const dod_lfpool* p, const void* block) noexcept nogil:
    """True when `block` is the start of a block of this pool (O(chunks))."""
    cdef dod_lfpool_chunk* c = <dod_lfpool_chunk*>dod_atomic_load_ptr(<void**>&p.chunks)
    cdef uintptr_t b = <uintptr_t>block
    cdef uintptr_t base
    while c != NULL:
        base = <uintptr_t>c.base
        if b >= base and b < base + c.blocks * p.block_size:
            return (b - base) % p.block_size == 0
        c = c.next
    return False


cdef bint dod_lfpool_grow(dod_lfpool* p) noexcept nogil:
    """Carve one more chunk and push its blocks as one chain. Call with the lock held."""
    cdef size_t want, nbytes, page, used, n, i, align
    cdef char* mem
    cdef dod_lfpool_chunk* rec
    if p.upstream == NULL or p.block_size == 0:
        return False
    want = p.chunk_blocks if p.chunk_blocks else 1
    if p.max_blocks:
        if p.capacity >= p.max_blocks:
            return False
        if want > p.max_blocks - p.capacity:
            want = p.max_blocks - p.capacity
    # The list was empty when this grow was decided, so the pool is about as
    # full as it has been: fold capacity minus cached blocks into the peak.
    # Never walk the list here: other threads pop concurrently and write
    # their data over the links of the blocks they took, so a walk could
    # follow a payload word (a 2-thread benchmark crashed on exactly that).
    # Exact with one thread; with several it may count blocks released since
    # the empty list was seen (an over-estimate of at most those blocks).
    used = p.capacity - <size_t>dod_atomic_load_u64(&p.cached)
    if used > p.peak:
        p.peak = used
    if dod_mul_overflow(want, p.block_size, &nbytes) or \
            dod_add_overflow(nbytes, sizeof(dod_lfpool_chunk) + sizeof(void*), &nbytes):
        return False
    # Ask for whole pages, and use every block that fits in them.
    page = dod_os_page_size()
    if dod_add_overflow(nbytes, page - 1, &nbytes):
        return False
    nbytes &= ~(page - 1)
    align = p.alignment if p.alignment > _CHUNK_ALIGN else _CHUNK_ALIGN
    mem = <char*>dod_resource_allocate(p.upstream, nbytes, align)
    if mem == NULL:
        return False
    rec = <dod_lfpool_chunk*>((<uintptr_t>mem + nbytes - sizeof(dod_lfpool_chunk)) & ~(<uintptr_t>sizeof(void*) - 1))
    n = (<size_t>(<char*>rec - mem)) // p.block_size
    if p.max_blocks and n > p.max_blocks - p.capacity:
        n = p.max_blocks - p.capacity
    # Link privately: nobody can see these blocks until the push below.
    for i in range(n - 1):
        (<void**>(mem + i * p.block_size))[0] = mem + (i + 1) * p.block_size
    rec.base = mem
    rec.size = nbytes
    rec.first = p.capacity
    rec.blocks = n
    rec.next = p.chunks
    dod_atomic_store_ptr(<void**>&p.chunks, rec)
    p.capacity += n
    p.grows += 1
    dod_lfpool_release_chain(p, mem, mem + (n - 1) * p.block_size)
    return True


cdef void* dod_lfpool_acquire_slow(dod_lfpool* p) noexcept nogil:
    """The free list was empty: grow under the lock (re-checked after taking it)."""
    cdef void* b
    if p.upstream == NULL:
        dod_atomic_fetch_add_relaxed_u64(&p.failed, 1)
        return NULL
    while True:
        dod_mutex_lock(&p.lock)
        b = dod_lfpool_try_acquire(p)        # someone may have grown while we waited
        if b != NULL:
            dod_mutex_unlock(&p.lock)
            return b
        if not dod_lfpool_grow(p):
            dod_mutex_unlock(&p.lock)
            dod_atomic_fetch_add_relaxed_u64(&p.failed, 1)
            return NULL
        dod_mutex_unlock(&p.lock)
        # No reservation for the grower: it pops like everyone else, and grows
        # again if other threads emptied the new chunk first.
        b = dod_lfpool_try_acquire(p)
        if b != NULL:
            return b


# ---------------------------------------------------------------- the pool as a dod_resource

cdef void* _lfpool_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef dod_lfpool* p = <dod_lfpool*>ctx
    if size > p.block_size or alignment > p.alignment or size == 0:
        return NULL
    return dod_lfpool_acquire(p)


cdef void _lfpool_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    if ptr != NULL:
        dod_lfpool_release(<dod_lfpool*>ctx, ptr)


# ---------------------------------------------------------------- the owner and its Python face

cdef size_t _index_arg(object value, str name, size_t lo, size_t hi) except? 0:
    cdef object v = PyNumber_Index(value)
    if v < lo or v > hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value!r}")
    return <size_t>v


@cython.no_gc_clear
cdef class LockFreePool:
    """LockFreePool(block_size, *, alignment=16, capacity=0, chunk_blocks=None, max_blocks=None, resource=None)

    A pool of fixed-size blocks whose free list is lock-free.

    Parameters
    ----------
    block_size : int
        Usable bytes of each block (1 to 2**40). The stride between blocks
        is this rounded up to ``alignment`` (and to at least 8 bytes, the
        free-list link).
    alignment : int
        Of every block: a power of two up to the page size; at least 8.
    capacity : int
        Blocks to carve now (0: the first acquire grows the pool).
    chunk_blocks : int, optional
        Blocks asked for at each growth (the chunk is rounded up to whole
        pages and every block that fits is used). Default: enough for 64 KiB.
    max_blocks : int, optional
        Growth stops at this many blocks; acquire then raises MemoryError.
    resource : Resource, optional
        Where chunks come from; anonymous pages by default.

    Attributes
    ----------
    alignment : int
        Of every block.

    Raises
    ------
    ValueError
        For sizes out of range.
    MemoryError
        When the initial capacity cannot be obtained.

    Notes
    -----
    Memory is returned to the resource only when the pool is destroyed.
    Thread-safety: the engine (``cimport dod.lfpool``) is safe from any
    number of threads at once without the GIL; the Python face is safe from
    any Python thread and may run while Cython threads use the engine on
    the same pool. Statistics that walk the free list are exact only while
    no other thread uses the pool.
    """

    def __cinit__(self, block_size, *, alignment=None, capacity=0, chunk_blocks=None,
                  max_blocks=None, Resource resource=None):
        cdef size_t size = _index_arg(block_size, "block_size", 1, _MAX_BLOCK)
        cdef size_t align = _DEFAULT_ALIGN
        cdef size_t initial = _index_arg(capacity, "capacity", 0, _MAX_BLOCKS)
        cdef size_t stride, per_chunk, limit = 0
        cdef size_t page = dod_os_page_size()
        cdef bint ok
        if alignment is not None:
            align = _index_arg(alignment, "alignment", 1, page)
            if not dod_is_pow2(align):
                raise ValueError(f"alignment must be a power of two, got {alignment!r}")
        if align < sizeof(void*):
            align = sizeof(void*)
        stride = (size if size > sizeof(void*) else sizeof(void*)) + align - 1
        stride &= ~(align - 1)
        if chunk_blocks is None:
            per_chunk = _DEFAULT_CHUNK_BYTES // stride if stride < _DEFAULT_CHUNK_BYTES else 1
        else:
            per_chunk = _index_arg(chunk_blocks, "chunk_blocks", 1, _MAX_BLOCKS)
        if max_blocks is not None:
            limit = _index_arg(max_blocks, "max_blocks", 1, _MAX_BLOCKS)
            if initial > limit:
                raise ValueError(f"capacity {initial} is above max_blocks {limit}")
        if (<uintptr_t>&self.engine.head) % 16:
            raise SystemError("LockFreePool object is not 16-byte aligned (cmpxchg16b needs it)")
        if dod_mutex_init(&self.engine.lock) != 0:
            raise MemoryError("could not initialise the pool's lock")
        self._ready = True
        slots_init(&self._handles, True)
        self._upstream = resource if resource is not None else Resource.wrap(dod_pages_resource(), None, "pages", True)
        self.engine.upstream = &self._upstream.resource
        self.engine.block_size = stride
        self.engine.alignment = align
        self.engine.max_blocks = limit
        if initial:
            self.engine.chunk_blocks = initial
            if self._upstream.threadsafe:
                with nogil:
                    dod_mutex_lock(&self.engine.lock)
                    ok = dod_lfpool_grow(&self.engine)
                    dod_mutex_unlock(&self.engine.lock)
            else:               # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)
                dod_mutex_lock(&self.engine.lock)
                ok = dod_lfpool_grow(&self.engine)
                dod_mutex_unlock(&self.engine.lock)
            if not ok:
                raise MemoryError(f"could not obtain {initial} blocks of {stride} bytes")
        self.engine.chunk_blocks = per_chunk

    def __dealloc__(self):
        cdef dod_lfpool_chunk* c = self.engine.chunks
        cdef dod_lfpool_chunk* nxt
        cdef char* base
        cdef size_t size
        cdef size_t align = self.engine.alignment if self.engine.alignment > _CHUNK_ALIGN else _CHUNK_ALIGN
        if DOD_DEBUG and self.engine.cached:
            fprintf(stderr, b"dod.lfpool: pool %p destroyed while thread caches hold %llu of its blocks "
                    b"(a Cython dod_lfpool_cache was not flushed)\n", &self.engine, <unsigned long long>self.engine.cached)
            abort()
        while c != NULL:
            nxt = c.next
            base = c.base               # the record lives inside the chunk: read it first
            size = c.size
            dod_resource_deallocate(self.engine.upstream, base, size, align)
            c = nxt
        self.engine.chunks = NULL
        if self._ready:
            dod_mutex_destroy(&self.engine.lock)
        slots_free(&self._handles)

    # -------------------------------------------------------- blocks

    cdef size_t _in_use(self) noexcept nogil:
        return self.engine.capacity - dod_lfpool_free_count(&self.engine) - <size_t>dod_atomic_load_u64(&self.engine.cached)

    cdef object _acquire(self, bint grow):
        cdef void* b
        slots_reserve(&self._handles)          # so that slots_add below cannot fail with a block in hand
        if not grow:
            with nogil:
                b = dod_lfpool_try_acquire(&self.engine)
        elif self._upstream.threadsafe:
            with nogil:
                b = dod_lfpool_acquire(&self.engine)
        else:
            b = dod_lfpool_acquire(&self.engine)  # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)
        if b == NULL:
            if not grow:
                return 0
            raise MemoryError(
                f"lock-free pool cannot grow: {self.engine.capacity} blocks of {self.engine.block_size} bytes"
                + (f" (max_blocks {self.engine.max_blocks})" if self.engine.max_blocks else
                   "; the resource refused more memory"))
        self._allocations += 1
        h = slots_add(&self._handles, b, self.engine.block_size, 0)
        if self._handles.live > self._handle_peak:
            self._handle_peak = self._handles.live
        return h

    def acquire(self):
        """Acquire a block, growing the pool if none is free.

        Returns
        -------
        int
            The block's handle (non-zero).

        Raises
        ------
        MemoryError
            When the pool cannot grow (max_blocks reached or the resource
            refused); the pool is then unchanged apart from its ``failed``
            counter.

        Notes
        -----
        Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        return self._acquire(True)

    def try_acquire(self):
        """Acquire a block if one is free; never grows.

        Returns
        -------
        int
            The block's handle, or 0 (the nil handle) when none is free.

        Notes
        -----
        Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        return self._acquire(False)

    def release(self, handle):
        """Give a block back.

        Parameters
        ----------
        handle : int
            From :meth:`acquire` or :meth:`try_acquire`.

        Raises
        ------
        ValueError
            For a stale or foreign handle.
        BufferError
            While an array view of the block is alive.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        cdef Py_ssize_t slot = slots_find(&self._handles, handle)
        cdef void* b
        slots_check_unpinned(&self._handles, slot)
        b = slots_remove(&self._handles, slot)
        with nogil:
            dod_lfpool_release(&self.engine, b)

    def release_many(self, handles):
        """Give back several blocks with one atomic push (a caller-linked chain).

        Parameters
        ----------
        handles : sequence of int

        Raises
        ------
        ValueError
            For a stale, foreign or repeated handle.
        BufferError
            For a block with a live view.

        Notes
        -----
        Every handle is checked first; if any check fails the call releases
        nothing. Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        cdef list slots = slots_find_many(&self._handles, handles)
        cdef Py_ssize_t slot
        cdef void* first = NULL
        cdef void* last = NULL
        cdef void* b
        for slot in slots:
            b = slots_remove(&self._handles, slot)
            if first == NULL:
                first = b
            else:
                dod_lfpool_link(last, b)
            last = b
        if first != NULL:
            with nogil:
                dod_lfpool_release_chain(&self.engine, first, last)

    def view(self, handle, dtype=np.uint8, shape=None):
        """A numpy array over a block.

        Parameters
        ----------
        handle : int
        dtype : numpy dtype, default numpy.uint8
        shape : int or tuple of int, optional
            Default: the whole block as 1-D `dtype`.

        Returns
        -------
        numpy.ndarray
            It keeps the pool alive and blocks :meth:`release` of the block
            (BufferError) while it lives.

        Raises
        ------
        ValueError
            For a stale handle, or a shape/dtype that does not fit the block or
            its alignment.

        Notes
        -----
        Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        return slots_view(&self._handles, slots_find(&self._handles, handle), self, dtype, shape)

    def address(self, handle):
        """The block's address, for tests and foreign-function calls.

        Parameters
        ----------
        handle : int

        Returns
        -------
        int

        Raises
        ------
        ValueError
            For a stale or foreign handle.

        Notes
        -----
        Thread-safety: any Python thread (the handle table is guarded by the GIL), alongside Cython threads using the engine.
        """
        return <uintptr_t>self._handles.ptrs[slots_find(&self._handles, handle)]

    # -------------------------------------------------------- composition

    def resource(self):
        """This pool as a :class:`~dod.resource.Resource`.

        Requests up to ``block_size`` bytes with an alignment up to ``alignment``
        get a block, others NULL. The Resource keeps the pool alive.

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        Thread-safety: the resource is safe from any thread.
        """
        cdef dod_resource r
        r.allocate = _lfpool_allocate
        r.deallocate = _lfpool_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, self, "lfpool", self._upstream.threadsafe)

    # -------------------------------------------------------- statistics and checks

    def check(self):
        """Walk the structures and verify every invariant.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: exact only while no other thread uses the pool.
        """
        cdef dod_lfpool_chunk* c = self.engine.chunks
        cdef size_t total = 0, n = 0
        cdef void* b
        while c != NULL:
            if <uintptr_t>c.base % self.engine.alignment:
                raise InvariantError("a chunk is not aligned to the pool's alignment")
            if <char*>c < c.base + c.blocks * self.engine.block_size or <char*>(c + 1) > c.base + c.size:
                raise InvariantError("a chunk record overlaps its blocks or lies outside its chunk")
            total += c.blocks
            c = c.next
        if total != self.engine.capacity:
            raise InvariantError(f"chunks hold {total} blocks but capacity says {self.engine.capacity}")
        free = set()
        b = dod_tagged_load(&self.engine.head).ptr
        while b != NULL:
            if not dod_lfpool_owns(&self.engine, b):
                raise InvariantError(f"free list holds {<uintptr_t>b:#x}, which is not a block of this pool")
            if <uintptr_t>b in free:
                raise InvariantError(f"free list holds {<uintptr_t>b:#x} twice (a cycle or a double release)")
            free.add(<uintptr_t>b)
            n += 1
            if n > total:
                raise InvariantError("free list is longer than the capacity")
            b = (<void**>b)[0]
        for slot in range(self._handles.nslots):
            if self._handles.ptrs[slot] != NULL and <uintptr_t>self._handles.ptrs[slot] in free:
                raise InvariantError("a block held through a handle is also on the free list")
        if self._handles.live > total - n:
            raise InvariantError("more live handles than blocks in use")
        return True

    @property
    def block_size(self):
        """Bytes per block (the stride: the requested size rounded up to the alignment)."""
        return self.engine.block_size

    @property
    def alignment(self):
        return self.engine.alignment

    @property
    def capacity(self):
        """Blocks carved so far."""
        return self.engine.capacity

    @property
    def in_use(self):
        """Blocks not on the free list (walks the list: exact when no other thread is active)."""
        return self._in_use()

    @property
    def available(self):
        """Blocks on the shared free list (walks it; blocks in thread caches are not counted)."""
        return dod_lfpool_free_count(&self.engine)

    @property
    def peak(self):
        """Highest in-use count seen: folded in at each growth, at each Python-face
        acquire (blocks held through handles) and whenever statistics are read."""
        cdef size_t used = self._in_use()
        if used > self.engine.peak:
            self.engine.peak = used
        return max(self.engine.peak, self._handle_peak)

    @property
    def allocations(self):
        """Acquires through the Python face (engine calls from Cython are not counted:
        the hot path has exactly one atomic)."""
        return self._allocations

    @property
    def failed(self):
        """Acquires (engine or Python) that returned no block because the pool could not grow."""
        return dod_atomic_load_u64(&self.engine.failed)

    @property
    def cas_retries(self):
        """Compare-and-swaps that failed and were retried (contention), acquires and releases together."""
        return dod_atomic_load_u64(&self.engine.cas_retries)

    @property
    def grows(self):
        """Chunks obtained from the resource."""
        return self.engine.grows

    @property
    def nbytes(self):
        """Bytes obtained from the resource (chunk records and page rounding included)."""
        cdef dod_lfpool_chunk* c = self.engine.chunks
        cdef size_t total = 0
        while c != NULL:
            total += c.size
            c = c.next
        return total

    @property
    def live_handles(self):
        """Blocks held through Python handles."""
        return self._handles.live

    def thread_cache(self, limit=None):
        """A :class:`dod.thread_cache.LockFreePoolCache` for the calling thread.

        Parameters
        ----------
        limit : int, optional
            The most free blocks it keeps (default: 16 KiB worth, 1 to 64). It
            exchanges whole chains with the pool, one CAS each.

        Returns
        -------
        dod.thread_cache.LockFreePoolCache
            It keeps the pool alive and flushes when collected.

        Raises
        ------
        ValueError
            For a limit out of range.

        Notes
        -----
        Thread-safety: the cache belongs to the calling thread.
        """
        from dod.thread_cache import LockFreePoolCache
        return LockFreePoolCache(self, limit)

    @property
    def cached_blocks(self):
        """Free blocks held by thread caches (not on the shared list, not in use), as the
        caches last published: exact for Python caches, as of their last exchange for
        Cython ones, and 0 once every cache has flushed."""
        return <size_t>dod_atomic_load_u64(&self.engine.cached)

    @property
    def cache_slack(self):
        """Bytes of :attr:`cached_blocks` (the slack thread caches keep from other threads)."""
        return <size_t>dod_atomic_load_u64(&self.engine.cached) * self.engine.block_size

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes: blocks times ``block_size``), then the pool's
            own: ``block_size``, block counts (``blocks``, ``blocks_in_use``,
            ``blocks_available``, ``blocks_peak``), ``grows``, ``cas_retries`` and
            ``nbytes`` (obtained from the resource).

        Notes
        -----
        Thread-safety: any thread; exact while no other thread uses the pool.
        """
        cdef size_t bs = self.engine.block_size, cap = self.engine.capacity
        cdef size_t free_blocks = dod_lfpool_free_count(&self.engine)
        cdef size_t peak = self.peak
        return {
            "capacity": cap * bs,
            "used": (cap - free_blocks) * bs,
            "available": free_blocks * bs,
            "peak": peak * bs,
            "allocations": self.allocations,
            "failed": self.failed,
            "block_size": bs,
            "blocks": cap,
            "blocks_in_use": cap - free_blocks,
            "blocks_available": free_blocks,
            "blocks_peak": peak,
            "grows": self.grows,
            "cas_retries": self.cas_retries,
            "nbytes": self.nbytes,
            "cached_blocks": self.cached_blocks,
            "cache_slack": self.cache_slack,
        }

    def __repr__(self):
        return (f"<dod.LockFreePool block_size={self.engine.block_size} capacity={self.capacity} "
                f"in_use={self.in_use} peak={self.peak} allocations={self.allocations} "
                f"failed={self.failed} grows={self.grows} cas_retries={self.cas_retries}>")


# ================================================================ thread caches: slow paths
# The bins and caches are described at the end of lfpool.pxd; these are the
# exchanges with the shared stack (one CAS each) and the debug checks.

cdef uint32_t dod_lfpool_bin_limit(size_t block_size, size_t budget) noexcept nogil:
    """Blocks a bin of `block_size` keeps at most for a slack budget of `budget` bytes:
    budget // block_size, clamped to 1..DOD_LFPOOL_CACHE_MAX."""
    cdef size_t n = budget // block_size if block_size else 1
    if n > DOD_LFPOOL_CACHE_MAX:
        n = DOD_LFPOOL_CACHE_MAX
    return <uint32_t>(n if n else 1)


cdef size_t dod_lfpool_take(dod_lfpool* p, size_t n, void** first, void** last) noexcept nogil:
    """Pop up to `n` (>= 1) blocks as one chain first..last with one CAS; the count taken
    (0 when the shared stack is empty). Never grows, never locks.

    The walk follows links of blocks that are on the stack when `old` was read.
    A link is trusted only after the head's tag is seen unchanged AFTER reading
    it: no CAS happened in between, so the stack was frozen and the link is a
    real free block (mapped: nothing is unmapped while the pool lives). A
    changed tag restarts the walk, so a block that another thread popped and
    scribbled on is never followed."""
    cdef dod_tagged_ptr old = dod_tagged_load(&p.head)
    cdef dod_tagged_ptr new
    cdef void* b
    cdef void* nxt
    cdef size_t k
    while old.ptr != NULL:
        b = old.ptr
        k = 1
        while k < n:
            nxt = dod_atomic_load_speculative_ptr(<void**>b)      # acquire: the tag load below stays after it
            if dod_atomic_load_u64(&p.head.tag) != old.tag:
                break
            if nxt == NULL:
                break
            b = nxt
            k += 1
        else:
            nxt = dod_atomic_load_speculative_ptr(<void**>b)
        if dod_atomic_load_u64(&p.head.tag) == old.tag:
            new.ptr = nxt
            new.tag = old.tag + 1
            if dod_tagged_cas(&p.head, &old, new):
                first[0] = old.ptr
                last[0] = b
                return k
        else:
            old = dod_tagged_load(&p.head)
        dod_atomic_fetch_add_relaxed_u64(&p.cas_retries, 1)
    return 0


cdef void dod_lfpool_bin_publish(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil:
    """Add the bin's change in count since its last publication to p.cached."""
    cdef int64_t d = <int64_t>b.count - <int64_t>b.published
    if d != 0 and p != NULL:
        dod_atomic_fetch_add_relaxed_u64(&p.cached, <uint64_t>d)
        b.published = b.count


cdef void* dod_lfpool_bin_refill(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil:
    """The bin is empty: take up to limit/2 blocks (one CAS) and hand out the first; grow
    the pool when the shared stack is empty. NULL when the pool cannot grow."""
    cdef void* first
    cdef void* last
    cdef size_t want = b.limit // 2
    cdef size_t k
    if p == NULL:
        return NULL
    k = dod_lfpool_take(p, want if want else 1, &first, &last)
    if k == 0:
        return dod_lfpool_acquire_slow(p)         # grows under the lock (the rest of the chunk stays shared)
    if k > 1:
        b.head = dod_atomic_load_ptr(<void**>first)
        b.tail = last
        dod_atomic_store_ptr(<void**>last, NULL)
        b.count = <uint32_t>(k - 1)
        dod_lfpool_bin_publish(p, b)
    return first


cdef void dod_lfpool_bin_spill(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil:
    """The bin is full: give its older count - limit/2 blocks back with one CAS."""
    cdef uint32_t keep = b.limit // 2
    cdef uint32_t i
    cdef void* m
    cdef void* first
    if p == NULL or b.count == 0:
        return
    if keep == 0 or keep >= b.count:
        dod_lfpool_bin_flush(p, b)
        return
    m = b.head                                    # the newest `keep` blocks stay: they are hot
    for i in range(keep - 1):
        m = dod_atomic_load_ptr(<void**>m)
    first = dod_atomic_load_ptr(<void**>m)
    dod_atomic_store_ptr(<void**>m, NULL)
    dod_lfpool_release_chain(p, first, b.tail)
    b.tail = m
    b.count = keep
    dod_lfpool_bin_publish(p, b)


cdef void dod_lfpool_bin_flush(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil:
    """Give every block of the bin back with one CAS."""
    if p == NULL:
        return
    if b.count:
        dod_lfpool_release_chain(p, b.head, b.tail)
        b.head = NULL
        b.tail = NULL
        b.count = 0
    dod_lfpool_bin_publish(p, b)


cdef void dod_lfpool_bin_debug(dod_lfpool* p, dod_lfpool_bin* b, uintptr_t* thread,
                               void* block) noexcept nogil:
    """Debug builds: the cache stays on one thread between flushes; a block freed into it
    belongs to `p` and is not already in the bin (then it is poisoned past its link)."""
    cdef uintptr_t me = dod_thread_self()
    cdef void* q
    cdef uint32_t n = 0
    if thread[0] == 0:
        thread[0] = me
    elif thread[0] != me:
        fprintf(stderr, b"dod.lfpool: a thread cache (bin %p) used by a second thread before a flush\n", b)
        abort()
    if block == NULL:
        return
    if p == NULL or not dod_lfpool_owns(p, block):
        fprintf(stderr, b"dod.lfpool: free of %p into a thread cache of pool %p, which does not own it\n",
                block, p)
        abort()
    q = b.head
    while q != NULL and n <= b.count:
        if q == block:
            fprintf(stderr, b"dod.lfpool: double free of %p into a thread cache\n", block)
            abort()
        q = (<void**>q)[0]
        n += 1
    dod_poison(<char*>block + sizeof(void*), p.block_size - sizeof(void*))


cdef void* dod_lfpool_cache_refill(dod_lfpool_cache* c) noexcept nogil:
    c.refills += 1
    return dod_lfpool_bin_refill(c.pool, &c.bin)


cdef void dod_lfpool_cache_spill(dod_lfpool_cache* c) noexcept nogil:
    c.spills += 1
    dod_lfpool_bin_spill(c.pool, &c.bin)


cdef void dod_lfpool_cache_flush(dod_lfpool_cache* c) noexcept nogil:
    """Give every cached block back (one CAS) and unbind the cache from its thread.
    Any thread may flush a cache that no thread is using."""
    dod_lfpool_bin_flush(c.pool, &c.bin)
    c.thread = 0
