"""Segregated fit: dod's general-purpose allocator, safe from any thread.

:class:`SegFit` rounds each request up to one of 97 size classes (8 bytes to
256 KiB, a two-level index as in TLSF: at most 12.5% rounding waste above
256 bytes, under 16 bytes below) and serves it from that class's lock-free
free list (see :mod:`dod.lfpool`). A live block carries no header: the free
link lives in the block only while it is free. Larger requests go straight
to the backing resource.

Safety contract (the Python face)
    Python callers hold handles (ints), never addresses: :meth:`allocate`
    returns one, :meth:`view` shows the block as a numpy array, :meth:`free`
    gives it back. A freed or foreign handle raises ``ValueError``; freeing a
    block while an array view of it is alive raises ``BufferError``. Either
    way nothing changes.

Thread-safety
    The engine (``cimport dod.segfit``) is safe from any number of threads
    at once without the GIL: allocate, try_allocate and free are lock-free
    on a class that has a free block; growing a class takes that class's
    lock. The Python face is safe from any Python thread. Statistics that
    walk free lists (``in_use``, ``check``) are exact only while no other
    thread is using the allocator.

Cython
    ``from dod.segfit cimport SegFit, dod_segfit_allocate, dod_segfit_free``
    and run the engine on ``&owner.engine``; see ``dod/segfit.pxd``.

Where things live
    Lifetime rule: ``dod._lease``: the handle table ``dod_slots`` (mapped)
    and ``SlotPin`` for views.
    Fast path: ``dod_segfit_allocate`` / ``dod_segfit_free``, inline in
    ``dod/segfit.pxd`` (large requests: ``dod_segfit_allocate_large``
    here).
"""
cimport cython
from libc.stdint cimport uintptr_t, uint64_t
from libc.stdio cimport fprintf, stderr
from libc.stdlib cimport abort
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_is_pow2
from dod.atomics cimport (dod_mutex_init, dod_mutex_destroy, dod_atomic_load_u64,
                          dod_atomic_fetch_add_relaxed_u64, dod_atomic_fetch_sub_u64)
from dod.lfpool cimport (dod_lfpool_chunk, dod_lfpool_owns, dod_lfpool_free_count,
                         dod_lfpool_bin_limit, dod_lfpool_bin_refill, dod_lfpool_bin_spill,
                         dod_lfpool_bin_flush, dod_lfpool_bin_debug)
from libc.string cimport memset
from dod._ndarray cimport parse_alignment
from dod._lease cimport (slots_init, slots_free, slots_reserve, slots_add, slots_find,
                         slots_check_unpinned, slots_find_many, slots_remove, slots_view)
from dod.resource cimport (dod_resource_allocate, dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod.errors import InvariantError

cdef enum:
    _SPAN_BYTES = 65536         # a class asks for spans of at least this many bytes...
    _SPAN_MIN_BLOCKS = 4        # ...and of at least this many blocks
    _CHUNK_ALIGN = 64

cdef size_t _MAX_REQUEST = (<size_t>1) << 48


# ---------------------------------------------------------------- engine slow paths

cdef void* dod_segfit_allocate_large(dod_segfit* s, size_t size, size_t alignment) noexcept nogil:
    """Above the largest class: a block of its own from the resource."""
    cdef void* p
    if alignment < DOD_SEGFIT_MIN_ALIGN:
        alignment = DOD_SEGFIT_MIN_ALIGN
    p = dod_resource_allocate(s.upstream, size, alignment)
    if p == NULL:
        dod_atomic_fetch_add_relaxed_u64(&s.large_failed, 1)
        return NULL
    dod_atomic_fetch_add_relaxed_u64(&s.large_count, 1)
    dod_atomic_fetch_add_relaxed_u64(&s.large_bytes, size)
    return p


cdef void dod_segfit_free_large(dod_segfit* s, void* ptr, size_t size, size_t alignment) noexcept nogil:
    if alignment < DOD_SEGFIT_MIN_ALIGN:
        alignment = DOD_SEGFIT_MIN_ALIGN
    dod_resource_deallocate(s.upstream, ptr, size, alignment)
    dod_atomic_fetch_sub_u64(&s.large_count, 1)
    dod_atomic_fetch_sub_u64(&s.large_bytes, size)


cdef void dod_segfit_check_class(dod_segfit* s, size_t c, void* ptr) noexcept nogil:
    """Debug builds: the block must belong to the class its size names."""
    if DOD_DEBUG and not dod_lfpool_owns(&s.classes[c], ptr):
        fprintf(stderr, b"dod.segfit: free of %p with a size of class %zu bytes, "
                b"but it is not a block of that class\n", ptr, dod_segfit_class_size(c))
        abort()


# ---------------------------------------------------------------- the allocator as a dod_resource

cdef void* _segfit_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_segfit_allocate(<dod_segfit*>ctx, size, alignment)


cdef void _segfit_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_segfit_free(<dod_segfit*>ctx, ptr, size, alignment)


# ---------------------------------------------------------------- the owner and its Python face

def class_size(size, alignment=16):
    """The bytes a request really takes: its class, or the size itself when large.

    Parameters
    ----------
    size : int
        Bytes, >= 0.
    alignment : int, default 16
        A power of two.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        For a size that is not an integer.
    OverflowError
        For a negative size.
    ValueError
        For a bad alignment.

    Notes
    -----
    Thread-safety: a pure function.
    """
    cdef size_t n = <size_t>PyNumber_Index(size)
    cdef size_t a = parse_alignment(alignment, 16)
    cdef size_t c = dod_segfit_class_for(n, a)
    return dod_segfit_class_size(c) if c < DOD_SEGFIT_CLASSES else n


def class_sizes():
    """All class sizes, smallest first.

    Returns
    -------
    list of int

    Notes
    -----
    Thread-safety: a pure function.
    """
    return [dod_segfit_class_size(i) for i in range(DOD_SEGFIT_CLASSES)]


@cython.no_gc_clear
cdef class SegFit:
    """SegFit(*, resource=None)

    Segregated fit: a general-purpose allocator with lock-free size classes.

    Parameters
    ----------
    resource : Resource, optional
        Where spans and large blocks come from; anonymous pages by default.

    Requests round up to a size class (see :func:`class_sizes`): under 16
    bytes of waste up to 256 bytes, at most 1/8 of the request above, up to
    256 KiB; larger requests (or alignments above 4096) are served by the
    resource directly. Span memory returns to the resource when the
    allocator is destroyed.

    Raises
    ------
    SystemError
        If the object is not 16-byte aligned (the lock-free classes need
        it).
    MemoryError
        When a size class's lock cannot be initialised.

    Notes
    -----
    Thread-safety: the engine (``cimport dod.segfit``) is safe from any
    number of threads at once without the GIL: allocate, try_allocate and
    free are lock-free on a class that has a free block; growing a class
    takes that class's lock. The Python face is safe from any Python
    thread. Statistics that walk free lists are exact only while no other
    thread is using the allocator.
    """

    def __cinit__(self, *, Resource resource=None):
        cdef size_t i, cs, align, per
        if (<uintptr_t>&self.engine.classes[0].head) % 16:
            raise SystemError("SegFit object is not 16-byte aligned (cmpxchg16b needs it)")
        slots_init(&self._handles, True)
        self._upstream = resource if resource is not None else Resource.wrap(dod_pages_resource(), None, "pages", True)
        self.engine.upstream = &self._upstream.resource
        for i in range(DOD_SEGFIT_CLASSES):
            if dod_mutex_init(&self.engine.classes[i].lock) != 0:
                raise MemoryError("could not initialise a size class's lock")
            self._ready += 1
            cs = dod_segfit_class_size(i)
            align = cs & (~cs + 1)                  # the largest power of two dividing cs
            if align > DOD_SEGFIT_MAX_ALIGN:
                align = DOD_SEGFIT_MAX_ALIGN
            per = _SPAN_BYTES // cs
            if per < _SPAN_MIN_BLOCKS:
                per = _SPAN_MIN_BLOCKS
            self.engine.classes[i].block_size = cs
            self.engine.classes[i].alignment = align
            self.engine.classes[i].chunk_blocks = per
            self.engine.classes[i].upstream = self.engine.upstream

    def __dealloc__(self):
        cdef size_t i, align
        cdef dod_lfpool_chunk* c
        cdef dod_lfpool_chunk* nxt
        cdef char* base
        cdef size_t size
        if DOD_DEBUG and self._cached_blocks():
            fprintf(stderr, b"dod.segfit: allocator %p destroyed while thread caches hold %zu of its blocks "
                    b"(a Cython dod_segfit_cache was not flushed)\n", &self.engine, self._cached_blocks())
            abort()
        for i in range(DOD_SEGFIT_CLASSES):
            align = self.engine.classes[i].alignment
            if align < _CHUNK_ALIGN:
                align = _CHUNK_ALIGN
            c = self.engine.classes[i].chunks
            while c != NULL:
                nxt = c.next
                base = c.base
                size = c.size
                dod_resource_deallocate(self.engine.upstream, base, size, align)
                c = nxt
            self.engine.classes[i].chunks = NULL
        for i in range(<size_t>self._ready):
            dod_mutex_destroy(&self.engine.classes[i].lock)
        # Large blocks still held through Python handles go back too.
        for i in range(self._handles.nslots):
            if self._handles.ptrs[i] != NULL and dod_segfit_class_for(
                    self._handles.sizes[i], self._handles.aux[i]) >= DOD_SEGFIT_CLASSES:
                dod_segfit_free_large(&self.engine, self._handles.ptrs[i],
                                      self._handles.sizes[i], self._handles.aux[i])
        slots_free(&self._handles)

    # -------------------------------------------------------- blocks

    cdef object _allocate(self, object nbytes, object align, bint grow):
        cdef object n = PyNumber_Index(nbytes)
        cdef size_t size, a
        cdef void* p
        if n < 0 or n > <object>_MAX_REQUEST:
            raise ValueError(f"nbytes must be between 0 and 2**48, got {nbytes!r}")
        size = <size_t>n
        a = parse_alignment(align, DOD_SEGFIT_MIN_ALIGN)
        slots_reserve(&self._handles)
        if not grow:
            with nogil:
                p = dod_segfit_try_allocate(&self.engine, size, a)
        elif self._upstream.threadsafe:
            with nogil:
                p = dod_segfit_allocate(&self.engine, size, a)
        else:
            p = dod_segfit_allocate(&self.engine, size, a)  # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)
        if p == NULL:
            if not grow:
                return 0
            raise MemoryError(f"segregated fit could not obtain {size} bytes (alignment {a})")
        self._allocations += 1
        self._bytes_live += size
        if self._bytes_live > self._bytes_peak:
            self._bytes_peak = self._bytes_live
        return slots_add(&self._handles, p, size, a)

    def allocate(self, nbytes, align=None):
        """A new block of at least `nbytes` bytes.

        Parameters
        ----------
        nbytes : int
            0 to 2**48.
        align : int, optional
            A power of two, default 16.

        Returns
        -------
        int
            Its handle (non-zero).

        Raises
        ------
        ValueError
            For a size out of range or a bad alignment.
        MemoryError
            When the resource refuses memory; the allocator is then unchanged.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        return self._allocate(nbytes, align, True)

    def try_allocate(self, nbytes, align=None):
        """As :meth:`allocate`, but only from a block already free in its class.

        Never grows, never locks.

        Parameters
        ----------
        nbytes : int
        align : int, optional
            A power of two, default 16.

        Returns
        -------
        int
            Its handle, or 0 (the nil handle) when none is free.

        Raises
        ------
        ValueError
            As :meth:`allocate`.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        return self._allocate(nbytes, align, False)

    def free(self, handle):
        """Free a block.

        Parameters
        ----------
        handle : int

        Raises
        ------
        ValueError
            For a stale or foreign handle.
        BufferError
            While an array view of it is alive.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        cdef Py_ssize_t slot = slots_find(&self._handles, handle)
        cdef size_t size, a
        cdef void* p
        slots_check_unpinned(&self._handles, slot)
        size = self._handles.sizes[slot]
        a = self._handles.aux[slot]
        p = slots_remove(&self._handles, slot)
        self._bytes_live -= size
        if self._upstream.threadsafe:
            with nogil:
                dod_segfit_free(&self.engine, p, size, a)
        else:
            dod_segfit_free(&self.engine, p, size, a)  # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)

    def free_many(self, handles):
        """Free several blocks: one atomic push per size class involved.

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
        Every handle is checked first; if any check fails the call frees
        nothing. Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        cdef list slots = slots_find_many(&self._handles, handles)
        cdef Py_ssize_t slot
        cdef size_t c, size, a
        cdef void* p
        cdef void* firsts[97]
        cdef void* lasts[97]
        for c in range(DOD_SEGFIT_CLASSES):
            firsts[c] = NULL
            lasts[c] = NULL
        for slot in slots:
            size = self._handles.sizes[slot]
            a = self._handles.aux[slot]
            p = slots_remove(&self._handles, slot)
            self._bytes_live -= size
            c = dod_segfit_class_for(size, a)
            if c >= DOD_SEGFIT_CLASSES:
                dod_segfit_free_large(&self.engine, p, size, a)
                continue
            if DOD_DEBUG:
                dod_segfit_check_class(&self.engine, c, p)
            if firsts[c] == NULL:
                firsts[c] = p
            else:
                dod_lfpool_link(lasts[c], p)
            lasts[c] = p
        with nogil:
            for c in range(DOD_SEGFIT_CLASSES):
                if firsts[c] != NULL:
                    dod_lfpool_release_chain(&self.engine.classes[c], firsts[c], lasts[c])

    def view(self, handle, dtype=np.uint8, shape=None):
        """A numpy array over a block.

        Parameters
        ----------
        handle : int
        dtype : numpy dtype, default numpy.uint8
        shape : int or tuple of int, optional
            Default: the requested bytes as 1-D `dtype`.

        Returns
        -------
        numpy.ndarray
            It keeps the allocator alive and blocks :meth:`free` of the block
            (BufferError) while it lives.

        Raises
        ------
        ValueError
            For a stale handle, or a shape/dtype that does not fit the block.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        return slots_view(&self._handles, slots_find(&self._handles, handle), self, dtype, shape)

    def address(self, handle):
        """The block's address.

        Parameters
        ----------
        handle : int

        Returns
        -------
        int

        Raises
        ------
        ValueError
            For a nil, stale or foreign handle.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        return <uintptr_t>self._handles.ptrs[slots_find(&self._handles, handle)]

    def size(self, handle):
        """The bytes asked for when the block was allocated.

        Parameters
        ----------
        handle : int

        Returns
        -------
        int

        Raises
        ------
        ValueError
            For a nil, stale or foreign handle.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine.
        """
        return self._handles.sizes[slots_find(&self._handles, handle)]

    # -------------------------------------------------------- composition

    def resource(self):
        """This allocator as a :class:`~dod.resource.Resource` (it keeps the allocator alive).

        Returns
        -------
        dod.resource.Resource
            Its deallocate must pass the size and alignment given to allocate.

        Notes
        -----
        Thread-safety: the resource is safe from any thread.
        """
        cdef dod_resource r
        r.allocate = _segfit_allocate
        r.deallocate = _segfit_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, self, "segfit", self._upstream.threadsafe)

    # -------------------------------------------------------- statistics and checks

    def check(self):
        """Walk every class and verify its invariants.

        Raises
        ------
        dod.InvariantError
            On the first broken invariant.

        Notes
        -----
        Thread-safety: exact only while no other thread uses the allocator.
        """
        cdef size_t i, total, n
        cdef dod_lfpool* p
        cdef dod_lfpool_chunk* c
        cdef void* b
        free = set()
        for i in range(DOD_SEGFIT_CLASSES):
            p = &self.engine.classes[i]
            total = 0
            c = p.chunks
            while c != NULL:
                if <uintptr_t>c.base % p.alignment:
                    raise InvariantError(f"a span of class {p.block_size} is misaligned")
                if <char*>c < c.base + c.blocks * p.block_size or <char*>(c + 1) > c.base + c.size:
                    raise InvariantError(f"a span record of class {p.block_size} overlaps its blocks")
                total += c.blocks
                c = c.next
            if total != p.capacity:
                raise InvariantError(f"class {p.block_size}: spans hold {total} blocks, capacity says {p.capacity}")
            n = 0
            b = p.head.ptr
            while b != NULL:
                if not dod_lfpool_owns(p, b):
                    raise InvariantError(f"class {p.block_size}: free list holds a foreign pointer {<uintptr_t>b:#x}")
                if <uintptr_t>b in free:
                    raise InvariantError(f"class {p.block_size}: {<uintptr_t>b:#x} is free twice")
                free.add(<uintptr_t>b)
                n += 1
                if n > total:
                    raise InvariantError(f"class {p.block_size}: free list longer than capacity")
                b = (<void**>b)[0]
        for slot in range(self._handles.nslots):
            if self._handles.ptrs[slot] != NULL:
                if <uintptr_t>self._handles.ptrs[slot] in free:
                    raise InvariantError("a block held through a handle is also on a free list")
                i = dod_segfit_class_for(self._handles.sizes[slot], self._handles.aux[slot])
                if i < DOD_SEGFIT_CLASSES and not dod_lfpool_owns(&self.engine.classes[i], self._handles.ptrs[slot]):
                    raise InvariantError("a block held through a handle is not in its class")
        return True

    @property
    def capacity(self):
        """Bytes in class blocks carved so far plus live large blocks."""
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += self.engine.classes[i].capacity * self.engine.classes[i].block_size
        return total + dod_atomic_load_u64(&self.engine.large_bytes)

    @property
    def in_use(self):
        """Bytes allocated (class sizes, so rounding included; large blocks as asked for).
        Walks the free lists: exact when no other thread is active."""
        cdef size_t i, total = 0
        cdef dod_lfpool* p
        for i in range(DOD_SEGFIT_CLASSES):
            p = &self.engine.classes[i]
            total += (p.capacity - dod_lfpool_free_count(p) - <size_t>dod_atomic_load_u64(&p.cached)) * p.block_size
        return total + dod_atomic_load_u64(&self.engine.large_bytes)

    @property
    def requested(self):
        """Bytes held through Python handles, as asked for (rounding excluded)."""
        return self._bytes_live

    @property
    def peak(self):
        """Highest ``requested`` seen (Python face)."""
        return self._bytes_peak

    @property
    def allocations(self):
        """Allocations through the Python face."""
        return self._allocations

    @property
    def failed(self):
        """Requests (engine or Python) that returned no memory."""
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += dod_atomic_load_u64(&self.engine.classes[i].failed)
        return total + dod_atomic_load_u64(&self.engine.large_failed)

    @property
    def cas_retries(self):
        """Failed compare-and-swaps retried, over all classes (a contention measure)."""
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += dod_atomic_load_u64(&self.engine.classes[i].cas_retries)
        return total

    @property
    def nbytes(self):
        """Bytes obtained from the resource: spans (records and page rounding included)
        plus live large blocks as asked for."""
        cdef size_t i, total = 0
        cdef dod_lfpool_chunk* c
        for i in range(DOD_SEGFIT_CLASSES):
            c = self.engine.classes[i].chunks
            while c != NULL:
                total += c.size
                c = c.next
        return total + dod_atomic_load_u64(&self.engine.large_bytes)

    @property
    def spans(self):
        """Spans obtained, all classes."""
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += self.engine.classes[i].grows
        return total

    @property
    def large(self):
        """Large blocks live (served by the resource directly)."""
        return dod_atomic_load_u64(&self.engine.large_count)

    @property
    def live_handles(self):
        """Blocks held through Python handles."""
        return self._handles.live

    def thread_cache(self, class_bytes=None):
        """A :class:`dod.thread_cache.SegFitCache` for the calling thread.

        One bin per class up to 32 KiB, exchanging whole chains with the class,
        one CAS each.

        Parameters
        ----------
        class_bytes : int, optional
            What each bin keeps at most (default 16 KiB; 1 to 64 blocks).

        Returns
        -------
        dod.thread_cache.SegFitCache
            It keeps this allocator alive and flushes when collected.

        Raises
        ------
        ValueError
            For class_bytes out of range.

        Notes
        -----
        Thread-safety: the cache belongs to the calling thread.
        """
        from dod.thread_cache import SegFitCache
        return SegFitCache(self, class_bytes)

    cdef size_t _cached_blocks(self) noexcept nogil:
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += <size_t>dod_atomic_load_u64(&self.engine.classes[i].cached)
        return total

    @property
    def cached_blocks(self):
        """Free blocks held by thread caches, all classes, as the caches last published
        (exact for Python caches; 0 once every cache has flushed)."""
        return self._cached_blocks()

    @property
    def cache_slack(self):
        """Bytes of :attr:`cached_blocks` (class sizes): the slack thread caches keep."""
        cdef size_t i, total = 0
        for i in range(DOD_SEGFIT_CLASSES):
            total += <size_t>dod_atomic_load_u64(&self.engine.classes[i].cached) * self.engine.classes[i].block_size
        return total

    def class_stats(self):
        """Blocks per size class.

        Returns
        -------
        dict
            ``{class size: (blocks carved, blocks free)}`` for every class that
            has spans.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine. Exact while no other thread uses the allocator.
        """
        cdef size_t i
        cdef dod_lfpool* p
        out = {}
        for i in range(DOD_SEGFIT_CLASSES):
            p = &self.engine.classes[i]
            if p.capacity:
                out[p.block_size] = (p.capacity, dod_lfpool_free_count(p))
        return out

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes), then ``requested`` (bytes asked for),
            ``spans``, ``large``, ``cas_retries`` and ``nbytes``.

        Notes
        -----
        Thread-safety: any Python thread, alongside Cython threads using the engine. Exact while no other thread uses the allocator.
        """
        cdef size_t capacity = self.capacity, used = self.in_use
        return {
            "capacity": capacity,
            "used": used,
            "available": capacity - used,
            "peak": self.peak,
            "allocations": self.allocations,
            "failed": self.failed,
            "requested": self.requested,
            "spans": self.spans,
            "large": self.large,
            "cas_retries": self.cas_retries,
            "nbytes": self.nbytes,
            "cached_blocks": self.cached_blocks,
            "cache_slack": self.cache_slack,
        }

    def __repr__(self):
        return (f"<dod.SegFit capacity={self.capacity} in_use={self.in_use} "
                f"requested={self.requested} peak={self.peak} allocations={self.allocations} "
                f"failed={self.failed} spans={self.spans} large={self.large}>")


# ================================================================ thread caches: slow paths
# The cache is described at the end of segfit.pxd; each bin's exchanges are
# the lfpool bin functions run on the class's pool.

cdef void dod_segfit_cache_init(dod_segfit_cache* c, dod_segfit* s, size_t class_bytes) noexcept nogil:
    """Set up an unused (or flushed) cache over `s`: bin k keeps at most
    clamp(class_bytes / size_k, 1, 64) blocks (class_bytes 0: DOD_SEGFIT_CACHE_BYTES)."""
    cdef size_t k
    memset(c, 0, sizeof(dod_segfit_cache))
    c.segfit = s
    if s == NULL:
        return
    if class_bytes == 0:
        class_bytes = DOD_SEGFIT_CACHE_BYTES
    for k in range(DOD_SEGFIT_CACHED):
        c.bins[k].limit = dod_lfpool_bin_limit(dod_segfit_class_size(k), class_bytes)


cdef void* dod_segfit_cache_refill(dod_segfit_cache* c, size_t k) noexcept nogil:
    if c.segfit == NULL:
        return NULL
    c.refills += 1
    return dod_lfpool_bin_refill(&c.segfit.classes[k], &c.bins[k])


cdef void dod_segfit_cache_spill(dod_segfit_cache* c, size_t k) noexcept nogil:
    if c.segfit == NULL:
        return
    c.spills += 1
    dod_lfpool_bin_spill(&c.segfit.classes[k], &c.bins[k])


cdef void dod_segfit_cache_flush(dod_segfit_cache* c) noexcept nogil:
    """Give every cached block back to its class (one CAS per non-empty bin) and unbind the
    cache from its thread. Any thread may flush a cache that no thread is using."""
    cdef size_t k
    c.thread = 0
    if c.segfit == NULL:
        return
    for k in range(DOD_SEGFIT_CACHED):
        if c.bins[k].count or c.bins[k].published:
            dod_lfpool_bin_flush(&c.segfit.classes[k], &c.bins[k])


cdef void* dod_segfit_cache_allocate_direct(dod_segfit_cache* c, size_t size, size_t alignment) noexcept nogil:
    """An uncached class or a large block: the shared allocator (NULL for a ZII cache)."""
    if c.segfit == NULL:
        return NULL
    return dod_segfit_allocate(c.segfit, size, alignment)


cdef void dod_segfit_cache_free_direct(dod_segfit_cache* c, void* ptr, size_t size, size_t alignment) noexcept nogil:
    if c.segfit != NULL:
        dod_segfit_free(c.segfit, ptr, size, alignment)


cdef void dod_segfit_cache_debug(dod_segfit_cache* c, size_t k, void* ptr) noexcept nogil:
    """Debug builds: one thread between flushes; a freed block belongs to class k and is
    not already in its bin (then it is poisoned past its link)."""
    if c.segfit == NULL:
        if ptr != NULL:
            fprintf(stderr, b"dod.segfit: free of %p into a thread cache with no allocator\n", ptr)
            abort()
        return
    if ptr != NULL:
        dod_segfit_check_class(c.segfit, k, ptr)
    dod_lfpool_bin_debug(&c.segfit.classes[k], &c.bins[k], &c.thread, ptr)
