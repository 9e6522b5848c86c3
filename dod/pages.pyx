"""Anonymous memory straight from the operating system, with statistics.

A :class:`PageSource` maps private anonymous pages (``mmap``) and unmaps them
on release, counting what it holds. Fresh pages read as zero, so a structure
whose all-zero state is valid (every dod engine struct) is ready as soon as
its pages are mapped, and untouched pages cost no physical memory. It is the
memory the other allocators take by default, and it can be handed to any of
them through :meth:`PageSource.resource`.

Safety contract (the Python face)
    :meth:`PageSource.empty` returns an array that owns its pages: they are
    unmapped when the last array viewing them dies, never before, so no
    Python caller can touch unmapped memory. :meth:`PageSource.decommit`
    gives an array's physical pages back (they then read as zero) without
    unmapping them.

Thread-safety
    Safe from any thread; the counters are atomics.

Where things live
    Lifetime rule: ``dod._lease.Owned`` (the pages are unmapped when the
    last view dies).
    Fast path: ``dod_pages_map`` / ``dod_pages_unmap`` in this file (a
    system call each: there is no inline path).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint64_t

from dod.atomics cimport (dod_atomic_fetch_add_relaxed_u64, dod_atomic_fetch_sub_u64,
                          dod_atomic_load_relaxed_u64, dod_atomic_cas_u64)
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod._lease cimport Owned, owned
from dod.resource cimport dod_resource, Resource, dod_map_pages

import numpy as np

from dod.errors import InvariantError

cnp.import_array()


cdef extern from "_os.h" nogil:
    size_t dod_os_page_size()
    size_t dod_os_page_round(size_t size)
    void dod_os_unmap(void* p, size_t size)
    int dod_os_decommit(void* p, size_t size)


cdef size_t dod_pages_size() noexcept nogil:
    """The system page size."""
    return dod_os_page_size()


cdef size_t dod_pages_round(size_t size) noexcept nogil:
    """size rounded up to whole pages; 0 when that overflows."""
    return dod_os_page_round(size)


cdef void _count_map(dod_page_source* s, size_t length) noexcept nogil:
    cdef uint64_t now = dod_atomic_fetch_add_relaxed_u64(&s.mapped, length) + length
    cdef uint64_t peak = dod_atomic_load_relaxed_u64(&s.peak)
    dod_atomic_fetch_add_relaxed_u64(&s.maps, 1)
    while now > peak and not dod_atomic_cas_u64(&s.peak, &peak, now):
        pass


cdef void* dod_pages_map(dod_page_source* s, size_t size, size_t alignment) noexcept nogil:
    """size bytes (rounded up to pages) of zero-filled memory aligned to `alignment`
    (a power of two; above the page size the mapping is over-sized and trimmed), or NULL.
    From dod.resource.HUGE_PAGES_MIN bytes it asks for huge pages (dod.resource.set_huge_pages)."""
    cdef void* p = dod_map_pages(size, alignment)
    if p == NULL:
        dod_atomic_fetch_add_relaxed_u64(&s.failed, 1)
        return NULL
    _count_map(s, dod_pages_round(size))
    return p


cdef void dod_pages_unmap(dod_page_source* s, void* p, size_t size) noexcept nogil:
    """Return pages from dod_pages_map (same size) to the system. NULL is ignored."""
    cdef size_t length = dod_pages_round(size)
    if p == NULL or length == 0:
        return
    dod_os_unmap(p, length)
    dod_atomic_fetch_sub_u64(&s.mapped, length)
    dod_atomic_fetch_add_relaxed_u64(&s.unmaps, 1)


cdef int dod_pages_decommit(dod_page_source* s, void* p, size_t size) noexcept nogil:
    """Drop the physical pages of [p, p + size) (p page aligned); they read as zero after. 0 on success."""
    dod_atomic_fetch_add_relaxed_u64(&s.decommits, 1)
    return dod_os_decommit(p, dod_pages_round(size))


# ---------------------------------------------------------------- as a dod_resource

cdef void* _ps_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_pages_map(<dod_page_source*>ctx, size, alignment)


cdef void _ps_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_pages_unmap(<dod_page_source*>ctx, ptr, size)


@cython.no_gc_clear
cdef class PageSource:
    """PageSource()

    Anonymous pages from the system, counted.

    Each source keeps its own statistics (``mapped``, ``peak``, ``maps``,
    ``unmaps``, ``failed``); make one per subsystem whose memory you want to
    see, or use it as the ``resource=`` of another allocator.

    Notes
    -----
    Thread-safety: safe from any thread; the counters are atomics.
    """

    @property
    def page_size(self):
        """The system page size in bytes."""
        return dod_os_page_size()

    def empty(self, shape, dtype=np.uint8, *, align=None):
        """A zero-filled array on fresh pages of its own (sizes round up to whole pages).

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default numpy.uint8
        align : int, optional
            A power of two; default the page size (larger values over-map and
            trim).

        Returns
        -------
        numpy.ndarray
            The pages are unmapped when the last array viewing them dies.

        Raises
        ------
        MemoryError
            When the system refuses.
        ValueError, TypeError
            For a bad request.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: any thread (the counters are atomics).
        """
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef Owned L
        cdef void* p
        parse_request(shape, dt, align, dod_os_page_size(), &req)
        if req.alignment < dod_os_page_size():
            req.alignment = dod_os_page_size()
        L = owned(self, _ps_deallocate, <void*>&self.engine)   # made first: nothing to undo if it fails
        size = req.nbytes if req.nbytes else 1
        with nogil:
            p = dod_pages_map(&self.engine, size, req.alignment)
        if p == NULL:
            raise MemoryError(f"the system refused {size} bytes of pages")
        L.ptr = p
        L.size = size
        return wrap_memory(p, &req, dt, L)

    def zeros(self, shape, dtype=np.uint8, *, align=None):
        """Same as :meth:`empty`: fresh pages are already zero.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default numpy.uint8
        align : int, optional

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        MemoryError, ValueError, TypeError
            As :meth:`empty`.

        Notes
        -----
        Thread-safety: any thread (the counters are atomics).
        """
        return self.empty(shape, dtype, align=align)

    def decommit(self, arr):
        """Give the physical pages of `arr` back to the system.

        The mapping stays: the array remains valid and reads as zero afterwards.

        Parameters
        ----------
        arr : numpy.ndarray
            An array from :meth:`empty` (not a view of one).

        Raises
        ------
        TypeError
            For an object that is not a numpy array.
        ValueError
            For an array this source did not return (views included).
        OSError
            When the system call fails.

        Notes
        -----
        Thread-safety: any thread (the counters are atomics).
        """
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"expected a numpy array, got {type(arr).__name__}")
        base = arr.base
        if type(base) is not Owned or (<Owned>base).owner is not self \
                or (<cnp.ndarray>arr).data != <char*>(<Owned>base).ptr:
            raise ValueError("that array was not returned by this PageSource's empty()")
        if dod_pages_decommit(&self.engine, (<Owned>base).ptr, (<Owned>base).size) != 0:
            raise OSError("madvise(MADV_DONTNEED) failed")

    def resource(self):
        """This source as a :class:`~dod.resource.Resource` (it keeps the source alive).

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        Thread-safety: any thread (the counters are atomics).
        """
        cdef dod_resource r
        r.allocate = _ps_allocate
        r.deallocate = _ps_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, self, "page_source", True)

    @property
    def mapped(self):
        """Bytes mapped now (whole pages)."""
        return dod_atomic_load_relaxed_u64(&self.engine.mapped)

    @property
    def in_use(self):
        """Same as ``mapped``."""
        return dod_atomic_load_relaxed_u64(&self.engine.mapped)

    @property
    def capacity(self):
        """Same as ``mapped``: a page source holds nothing it does not hand out."""
        return dod_atomic_load_relaxed_u64(&self.engine.mapped)

    @property
    def peak(self):
        """Most bytes mapped at once."""
        return dod_atomic_load_relaxed_u64(&self.engine.peak)

    @property
    def maps(self):
        """Successful maps."""
        return dod_atomic_load_relaxed_u64(&self.engine.maps)

    @property
    def allocations(self):
        """Same as ``maps``."""
        return dod_atomic_load_relaxed_u64(&self.engine.maps)

    @property
    def unmaps(self):
        """Unmaps."""
        return dod_atomic_load_relaxed_u64(&self.engine.unmaps)

    @property
    def failed(self):
        """Maps the system refused."""
        return dod_atomic_load_relaxed_u64(&self.engine.failed)

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes; ``available`` is 0: a page source holds
            nothing it has not handed out), then ``unmaps`` and ``decommits``.

        Notes
        -----
        Thread-safety: any thread (the counters are atomics).
        """
        cdef uint64_t mapped = dod_atomic_load_relaxed_u64(&self.engine.mapped)
        return {"capacity": mapped, "used": mapped, "available": 0, "peak": self.peak,
                "allocations": self.maps, "failed": self.failed, "unmaps": self.unmaps,
                "decommits": dod_atomic_load_relaxed_u64(&self.engine.decommits)}

    def check(self):
        """Verify the counters' invariants.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: exact while no other thread maps or unmaps.
        """
        cdef uint64_t mapped = dod_atomic_load_relaxed_u64(&self.engine.mapped)
        cdef uint64_t maps = dod_atomic_load_relaxed_u64(&self.engine.maps)
        cdef uint64_t unmaps = dod_atomic_load_relaxed_u64(&self.engine.unmaps)
        if unmaps > maps:
            raise InvariantError(f"{unmaps} unmaps but only {maps} maps")
        if mapped > dod_atomic_load_relaxed_u64(&self.engine.peak):
            raise InvariantError(f"mapped {mapped} above the peak")
        if mapped % dod_os_page_size():
            raise InvariantError(f"mapped {mapped} is not a whole number of pages")
        if (mapped != 0) != (maps > unmaps):
            raise InvariantError(f"mapped {mapped} with {maps - unmaps} mappings alive")
        return True

    def __repr__(self):
        return (f"<dod.PageSource mapped={self.mapped} peak={self.peak} maps={self.maps} "
                f"unmaps={self.unmaps} failed={self.failed}>")


# One process-wide source, for code that wants the statistics of "pages" without owning a source.
default = PageSource()
