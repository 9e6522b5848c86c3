"""Thread caches for the lock-free pool and segregated fit, from Python.

A thread cache keeps a bounded chain of free blocks (one per size class for
SegFit) that its thread allocates from and frees into without atomics; it
exchanges whole chains with the shared allocator, one compare-and-swap each
(refill when empty, spill of the older half when full, everything at flush).
The engines, their invariants and the cost of a free that crosses threads
are described at the end of ``dod/lfpool.pxd`` (the one place the fast path
lives); this module is their Python face.

    >>> from dod.lfpool import LockFreePool
    >>> pool = LockFreePool(64)
    >>> cache = pool.thread_cache()        # LockFreePoolCache, for this thread
    >>> h = cache.acquire()                # a handle of the pool: pool.view(h) works
    >>> cache.release(h)                   # back into the cache, not the shared stack
    >>> cache.flush()                      # everything back to the pool

Safety contract
    Handles are the owner's handles (the owner's handle table is the one
    lifetime rule; see ``dod._lease``): a cache hands out handles that the
    owner's ``view``/``release``/``free`` accept, and it accepts any live
    handle of its owner, whichever cache or call produced it. A stale,
    foreign or doubly freed handle raises ValueError, a block with a live
    view BufferError; nothing changes then. A cache keeps its owner alive, so
    using it after the owner's last other reference is gone is safe; it
    flushes when it is closed or collected, so nothing is lost when a thread
    ends without flushing.

Thread-safety
    A cache belongs to the thread that made it: its methods raise
    RuntimeError from any other thread (make one cache per thread). Other
    threads may use the owner and their own caches at the same time. Its
    collection may run on any thread (the flush is a handover).
"""
cimport cython
from cpython.number cimport PyNumber_Index

from dod.lfpool cimport (LockFreePool, dod_lfpool_cache, dod_lfpool_cache_init,
                         dod_lfpool_cache_acquire, dod_lfpool_cache_release,
                         dod_lfpool_cache_flush, dod_lfpool_bin_publish)
from dod._lease cimport slots_reserve, slots_add, slots_find, slots_check_unpinned, slots_remove
from dod.segfit cimport (SegFit, dod_segfit_cache, dod_segfit_cache_init,
                         dod_segfit_cache_allocate, dod_segfit_cache_free, dod_segfit_cache_flush,
                         dod_segfit_class_for, dod_segfit_class_size, DOD_SEGFIT_CACHED,
                         DOD_SEGFIT_MIN_ALIGN)
from dod._ndarray cimport parse_alignment

import threading

cdef size_t _MAX_LIMIT = 1 << 20
cdef size_t _MAX_REQUEST = (<size_t>1) << 48


cdef size_t _arg(object value, str name, size_t lo, size_t hi) except? 0:
    cdef object v = PyNumber_Index(value)
    if v < lo or v > hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value!r}")
    return <size_t>v


cdef int _bound(object thread_id, bint closed, str what) except -1:
    if threading.get_ident() != thread_id:
        raise RuntimeError(f"this {what} belongs to another thread; make one per thread "
                           f"with thread_cache()")
    if closed:
        raise RuntimeError(f"this {what} is closed")
    return 0


@cython.no_gc_clear
cdef class LockFreePoolCache:
    """LockFreePoolCache(pool, limit=None)

    A thread cache over a :class:`~dod.lfpool.LockFreePool`. Made by
    ``LockFreePoolCache(pool, limit)`` or ``pool.thread_cache(limit)``.

    Keeps at most `limit` free blocks (1 to 2**20; default 16 KiB worth,
    1 to 64 blocks); an acquire that finds it empty takes up to limit/2
    blocks from the pool with one CAS (growing the pool when it has none), a
    release that finds it full gives the older half back with one CAS.
    Bound to the calling thread (RuntimeError elsewhere); keeps the pool
    alive; flushes when closed or collected.

    Parameters
    ----------
    pool : LockFreePool
    limit : int, optional
        The most free blocks the cache keeps (1 to 2**20; default 16 KiB
        worth, 1 to 64 blocks).

    Attributes
    ----------
    owner : LockFreePool
        The pool (kept alive by the cache).
    thread_id : int
        The thread allowed to use it.

    Raises
    ------
    ValueError
        For a limit out of range.
    RuntimeError
        From methods called on another thread.

    Notes
    -----
    Thread-safety: a cache belongs to the thread that made it: its methods
    raise RuntimeError from any other thread (make one cache per thread).
    Other threads may use the pool and their own caches at the same time.
    Its collection may run on any thread (the flush is a handover).
    """
    cdef dod_lfpool_cache engine
    cdef readonly LockFreePool owner     # the pool (kept alive by the cache)
    cdef readonly object thread_id      # the thread allowed to use it
    cdef bint _closed

    def __cinit__(self, LockFreePool pool not None, limit=None):
        cdef size_t n = 0 if limit is None else _arg(limit, "limit", 1, _MAX_LIMIT)
        self.owner = pool
        dod_lfpool_cache_init(&self.engine, &pool.engine, n)
        self.thread_id = threading.get_ident()

    def __dealloc__(self):
        if self.owner is not None:
            dod_lfpool_cache_flush(&self.engine)

    cdef int _mine(self) except -1:
        return _bound(self.thread_id, self._closed, "LockFreePoolCache")

    def acquire(self):
        """A block's handle (a handle of the pool), from the cache.

        Refills from the pool, or grows it, when the cache is empty.

        Returns
        -------
        int

        Raises
        ------
        MemoryError
            When the pool cannot grow (nothing changes but the pool's ``failed``
            counter).
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        cdef LockFreePool p = self.owner
        cdef void* b
        self._mine()
        slots_reserve(&p._handles)            # so that add() below cannot fail with a block in hand
        b = dod_lfpool_cache_acquire(&self.engine)
        dod_lfpool_bin_publish(self.engine.pool, &self.engine.bin)    # the owner's stats stay exact
        if b == NULL:
            raise MemoryError(f"lock-free pool cannot grow: {p.engine.capacity} blocks of "
                              f"{p.engine.block_size} bytes")
        p._allocations += 1
        h = slots_add(&p._handles, b, p.engine.block_size, 0)
        if p._handles.live > p._handle_peak:
            p._handle_peak = p._handles.live
        return h

    def release(self, handle):
        """Free a block of the pool (whichever cache or call handed it out) into this cache.

        Parameters
        ----------
        handle : int

        Raises
        ------
        ValueError
            For a stale, foreign or already released handle.
        BufferError
            While a view of the block is alive.
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        cdef LockFreePool p = self.owner
        cdef Py_ssize_t slot
        cdef void* b
        self._mine()
        slot = slots_find(&p._handles, handle)
        slots_check_unpinned(&p._handles, slot)
        b = slots_remove(&p._handles, slot)
        dod_lfpool_cache_release(&self.engine, b)
        dod_lfpool_bin_publish(self.engine.pool, &self.engine.bin)

    def flush(self):
        """Give every cached block back to the pool (one CAS).

        Raises
        ------
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self._mine()
        dod_lfpool_cache_flush(&self.engine)

    def close(self):
        """Flush and refuse further use (RuntimeError from then on).

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self.flush()
        self._closed = True

    @property
    def held(self):
        """Free blocks in the cache now."""
        return self.engine.bin.count

    @property
    def limit(self):
        """Most free blocks the cache keeps (its slack bound, in blocks)."""
        return self.engine.bin.limit

    @property
    def max_slack(self):
        """Most bytes the cache keeps from other threads: limit x block size."""
        return self.engine.bin.limit * self.owner.engine.block_size

    @property
    def refills(self):
        """Chains taken from the pool (one CAS each) or growths."""
        return self.engine.refills

    @property
    def spills(self):
        """Chains given back because the cache was full (one CAS each)."""
        return self.engine.spills

    def __repr__(self):
        return (f"<dod.thread_cache.LockFreePoolCache held={self.held} limit={self.limit} "
                f"refills={self.refills} spills={self.spills} thread={self.thread_id}>")


@cython.no_gc_clear
cdef class SegFitCache:
    """SegFitCache(heap, class_bytes=None)

    A thread cache over a :class:`~dod.segfit.SegFit`: one bin per size class up to
    32 KiB; larger requests go to the allocator directly. Made by
    ``SegFitCache(heap, class_bytes)`` or ``heap.thread_cache(class_bytes)``.

    Bin k keeps at most clamp(class_bytes / size_k, 1, 64) blocks (class_bytes
    64 to 2**30, default 16 KiB); refills and spills move half a bin with one
    CAS on the class. Bound to the calling thread (RuntimeError elsewhere);
    keeps the allocator alive; flushes when closed or collected.

    Parameters
    ----------
    heap : SegFit
    class_bytes : int, optional
        What each bin keeps at most, in bytes (64 to 2**30, default 16 KiB).

    Attributes
    ----------
    owner : SegFit
        The allocator (kept alive by the cache).
    thread_id : int
        The thread allowed to use it.

    Raises
    ------
    ValueError
        For class_bytes out of range.
    RuntimeError
        From methods called on another thread.

    Notes
    -----
    Thread-safety: a cache belongs to the thread that made it: its methods
    raise RuntimeError from any other thread (make one cache per thread).
    Other threads may use the allocator and their own caches at the same
    time. Its collection may run on any thread (the flush is a handover).
    """
    cdef dod_segfit_cache engine
    cdef readonly SegFit owner          # the allocator (kept alive by the cache)
    cdef readonly object thread_id
    cdef bint _closed

    def __cinit__(self, SegFit heap not None, class_bytes=None):
        cdef size_t n = 0 if class_bytes is None else _arg(class_bytes, "class_bytes", 64, 1 << 30)
        self.owner = heap
        dod_segfit_cache_init(&self.engine, &heap.engine, n)
        self.thread_id = threading.get_ident()

    def __dealloc__(self):
        if self.owner is not None:
            dod_segfit_cache_flush(&self.engine)

    cdef int _mine(self) except -1:
        return _bound(self.thread_id, self._closed, "SegFitCache")

    cdef void _publish(self, size_t k) noexcept:
        if k < DOD_SEGFIT_CACHED:
            dod_lfpool_bin_publish(&self.engine.segfit.classes[k], &self.engine.bins[k])

    def allocate(self, nbytes, align=None):
        """A block of at least `nbytes` bytes from this thread's bin of its class.

        Parameters
        ----------
        nbytes : int
        align : int, optional
            A power of two, default 16.

        Returns
        -------
        int
            A handle of the allocator.

        Raises
        ------
        ValueError
            For a bad size or alignment.
        MemoryError
            When memory is refused; the allocator is then unchanged but for its
            ``failed`` counter.
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        cdef SegFit s = self.owner
        cdef object n = PyNumber_Index(nbytes)
        cdef size_t size, a, k
        cdef void* p
        self._mine()
        if n < 0 or n > <object>_MAX_REQUEST:
            raise ValueError(f"nbytes must be between 0 and 2**48, got {nbytes!r}")
        size = <size_t>n
        a = parse_alignment(align, DOD_SEGFIT_MIN_ALIGN)
        slots_reserve(&s._handles)
        p = dod_segfit_cache_allocate(&self.engine, size, a)
        k = dod_segfit_class_for(size, a)
        self._publish(k)
        if p == NULL:
            raise MemoryError(f"segregated fit could not obtain {size} bytes (alignment {a})")
        s._allocations += 1
        s._bytes_live += size
        if s._bytes_live > s._bytes_peak:
            s._bytes_peak = s._bytes_live
        return slots_add(&s._handles, p, size, a)

    def free(self, handle):
        """Free a block of the allocator (whichever cache or call made it) into this cache.

        Parameters
        ----------
        handle : int

        Raises
        ------
        ValueError
            For a stale, foreign or already freed handle.
        BufferError
            While a view of it is alive.
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        cdef SegFit s = self.owner
        cdef Py_ssize_t slot
        cdef size_t size, a
        cdef void* p
        self._mine()
        slot = slots_find(&s._handles, handle)
        slots_check_unpinned(&s._handles, slot)
        size = s._handles.sizes[slot]
        a = s._handles.aux[slot]
        p = slots_remove(&s._handles, slot)
        s._bytes_live -= size
        dod_segfit_cache_free(&self.engine, p, size, a)
        self._publish(dod_segfit_class_for(size, a))

    def flush(self):
        """Give every cached block back to its class (one CAS per non-empty bin).

        Raises
        ------
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self._mine()
        dod_segfit_cache_flush(&self.engine)

    def close(self):
        """Flush and refuse further use (RuntimeError from then on).

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self.flush()
        self._closed = True

    @property
    def held(self):
        """Free blocks in the cache now, all classes."""
        cdef size_t k, total = 0
        for k in range(DOD_SEGFIT_CACHED):
            total += self.engine.bins[k].count
        return total

    @property
    def held_bytes(self):
        """Bytes of :attr:`held` (class sizes)."""
        cdef size_t k, total = 0
        for k in range(DOD_SEGFIT_CACHED):
            total += self.engine.bins[k].count * dod_segfit_class_size(k)
        return total

    def limits(self):
        """The most blocks each cached class's bin keeps.

        Returns
        -------
        dict
            ``{class size: most blocks its bin keeps}`` for every cached class.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        return {dod_segfit_class_size(k): self.engine.bins[k].limit for k in range(DOD_SEGFIT_CACHED)}

    @property
    def max_slack(self):
        """Most bytes the cache can keep, all bins full: sum of limit x class size."""
        cdef size_t k, total = 0
        for k in range(DOD_SEGFIT_CACHED):
            total += self.engine.bins[k].limit * dod_segfit_class_size(k)
        return total

    @property
    def refills(self):
        """Chains taken from the class pools (one CAS each) or growths, all bins."""
        return self.engine.refills

    @property
    def spills(self):
        """Chains given back because a bin was full (one CAS each), all bins."""
        return self.engine.spills

    def __repr__(self):
        return (f"<dod.thread_cache.SegFitCache held={self.held} held_bytes={self.held_bytes} "
                f"refills={self.refills} spills={self.spills} thread={self.thread_id}>")
