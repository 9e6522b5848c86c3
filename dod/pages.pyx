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

Prefaulting
    :func:`prefault` makes memory resident now (so that no write in a
    deadline loop pays a first-touch page fault), over several threads
    where the system backs fresh pages slowly. It is the one prefault of
    the library: ``Arena.prefault``, ``Table.prefault`` and the tracker's
    run it over the ranges their owners list (``page_ranges``, cimport
    API), through ``dod_pages_prefault``.

Thread-safety
    Safe from any thread; the counters are atomics.

Where things live
    Lifetime rule: ``dod._lease.Owned`` (the pages are unmapped when the
    last view dies).
    Fast path: ``dod_pages_map`` / ``dod_pages_unmap`` in this file (a
    system call each: there is no inline path). Prefaulting:
    ``dod_pages_prefault`` in this file, one page range's fault
    (``dod_os_prefault``) in ``dod/_os.h``.
"""
cimport cython
cimport numpy as cnp
from libc.errno cimport errno, ENOMEM
from libc.stdint cimport uint64_t, uintptr_t
from libc.stdlib cimport malloc, free
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_ANY_CONTIGUOUS
from cpython.mem cimport PyMem_Malloc, PyMem_Free

from dod.atomics cimport (dod_atomic_fetch_add_relaxed_u64, dod_atomic_fetch_sub_u64,
                          dod_atomic_load_relaxed_u64, dod_atomic_cas_u64, dod_atomic_fetch_add_u64,
                          dod_atomic_load_u64)
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
    size_t dod_os_prefault(void* p, size_t size)

cdef extern from "<sched.h>" nogil:
    ctypedef struct cpu_set_t:
        pass
    int CPU_SETSIZE
    void CPU_ZERO(cpu_set_t* s)
    void CPU_SET(int cpu, cpu_set_t* s)

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_attr_t:
        pass
    int pthread_attr_init(pthread_attr_t* a)
    int pthread_attr_destroy(pthread_attr_t* a)
    int pthread_attr_setaffinity_np(pthread_attr_t* a, size_t size, const cpu_set_t* cpus)
    int pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*start)(void*) noexcept nogil, void* arg)
    int pthread_join(pthread_t t, void** result)


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


# ---------------------------------------------------------------- prefaulting over threads
# One job: the ranges, cut at the multiples of DOD_PAGES_PREFAULT_PIECE into
# pieces numbered in range order; each thread takes the next number until
# none is left or a piece failed. The cuts are page-aligned, so the pieces'
# page spans add up to the ranges' (dod_os_prefault's bytes).

ctypedef struct _prefault_job:
    const dod_page_range* ranges
    size_t n
    uint64_t pieces
    uint64_t next           # the next piece to take (atomic)
    uint64_t touched        # bytes of pages faulted in so far (atomic)
    uint64_t err            # errno of the first piece that failed, 0: none (atomic)


cdef cpu_set_t _initial_cpus        # dod.initial_cpus, for the started threads
cdef bint _have_initial_cpus = False


cdef inline uint64_t _pieces(const dod_page_range* r) noexcept nogil:
    cdef uintptr_t a = <uintptr_t>r.base
    if r.base == NULL or r.size == 0:
        return 0
    return (a + (r.size - 1)) // DOD_PAGES_PREFAULT_PIECE - a // DOD_PAGES_PREFAULT_PIECE + 1


cdef void _piece(const _prefault_job* job, uint64_t k, char** p, size_t* size) noexcept nogil:
    """Piece k (< job.pieces) of the job: its first byte and length."""
    cdef size_t i
    cdef uint64_t c
    cdef uintptr_t a, lo, hi
    p[0] = NULL
    size[0] = 0
    for i in range(job.n):
        c = _pieces(&job.ranges[i])
        if k < c:
            a = <uintptr_t>job.ranges[i].base
            lo = (a // DOD_PAGES_PREFAULT_PIECE + k) * DOD_PAGES_PREFAULT_PIECE
            hi = lo + DOD_PAGES_PREFAULT_PIECE
            lo = a if lo < a else lo
            hi = a + job.ranges[i].size if hi > a + job.ranges[i].size else hi
            p[0] = <char*>lo
            size[0] = hi - lo
            return
        k -= c


cdef void* _prefault_work(void* arg) noexcept nogil:
    """A thread's share of the job: pieces until none is left or one failed."""
    cdef _prefault_job* job = <_prefault_job*>arg
    cdef uint64_t k, none = 0
    cdef char* p
    cdef size_t size, done
    while dod_atomic_load_u64(&job.err) == 0:
        k = dod_atomic_fetch_add_u64(&job.next, 1)
        if k >= job.pieces:
            break
        _piece(job, k, &p, &size)
        done = dod_os_prefault(p, size)
        if done == 0:
            dod_atomic_cas_u64(&job.err, &none, <uint64_t>(errno if errno > 0 else ENOMEM))
            break
        dod_atomic_fetch_add_relaxed_u64(&job.touched, done)
    return NULL


cdef int dod_pages_prefault(const dod_page_range* ranges, size_t n, int threads, size_t* touched) noexcept nogil:
    """Fault in every page of ranges[0:n] over `threads` threads (dod/pages.pxd states the contract)."""
    cdef _prefault_job job
    cdef size_t i, started = 0, want
    cdef pthread_t* tids = NULL
    cdef pthread_attr_t attr
    cdef bint pinned = False
    job.ranges = ranges
    job.n = n
    job.pieces = 0
    job.next = 0
    job.touched = 0
    job.err = 0
    for i in range(n):
        job.pieces += _pieces(&ranges[i])
    want = <size_t>threads if threads > 1 else 1
    if want > job.pieces:
        want = job.pieces
    if want > 1:
        tids = <pthread_t*>malloc((want - 1) * sizeof(pthread_t))
    if tids != NULL:
        pthread_attr_init(&attr)
        pinned = _have_initial_cpus and pthread_attr_setaffinity_np(&attr, sizeof(cpu_set_t), &_initial_cpus) == 0
        for i in range(want - 1):
            if pthread_create(&tids[started], &attr if pinned else NULL, _prefault_work, &job) == 0:
                started += 1
            elif pinned and pthread_create(&tids[started], NULL, _prefault_work, &job) == 0:
                started += 1        # the initial CPUs are gone (taken offline): inherit the caller's
        pthread_attr_destroy(&attr)
    _prefault_work(&job)
    for i in range(started):
        pthread_join(tids[i], NULL)
    free(tids)
    touched[0] = job.touched
    return <int>job.err


cdef int dod_pages_threads(object threads) except -1:
    """`threads` checked as every prefault takes it (dod/pages.pxd)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or not (1 <= threads <= DOD_PAGES_MAX_THREADS):
        raise ValueError(f"threads must be an int in [1, {DOD_PAGES_MAX_THREADS}], not {threads!r}")
    return threads


def _set_initial_cpus():
    global _have_initial_cpus
    import dod
    cpus = dod.initial_cpus
    CPU_ZERO(&_initial_cpus)
    for c in cpus or ():
        if 0 <= c < CPU_SETSIZE:
            CPU_SET(c, &_initial_cpus)
            _have_initial_cpus = True


_set_initial_cpus()


def prefault(*buffers, threads=1):
    """Fault every page of the buffers' memory in now; returns the bytes of pages touched.

    `buffers`: writable, contiguous buffer objects (numpy arrays, a
    ``bytearray``, an ``mmap``, :meth:`PageSource.empty`'s arrays). The first
    touch of a page costs a page fault (zeroing it included) inside
    whichever write reaches it first, and RSS creeps up as memory is first
    used; after this the buffers' pages are resident and none faults.
    Contents do not change. Linux: ``MADV_POPULATE_WRITE``; before Linux
    5.14 one write per page instead (then no other thread may write the
    buffers meanwhile). Whole pages are counted, the partial pages at a
    buffer's ends included.

    `threads` (an int in [1, 256]): the pages are faulted in 64 MiB pieces
    over that many threads (the caller's, and threads started for the call
    on the CPUs of ``dod.initial_cpus``, joined before it returns). Where
    the system backs fresh pages slowly (a VM whose host backs them too)
    more threads take less time; the same pages and bytes at any count.
    The GIL is released meanwhile.

    TypeError for an object without the buffer protocol, BufferError for a
    read-only or non-contiguous one, ValueError for `threads` (nothing
    faulted then); MemoryError when the system cannot back the pages (not
    enough memory, or a file mapping past its end; contents unchanged, part
    may be resident).

    Thread-safety: safe from any thread; the buffers stay exported (and so
    alive and unresized) until it returns.
    """
    cdef int nt = dod_pages_threads(threads)
    cdef Py_ssize_t n = len(buffers), i, held = 0
    cdef Py_buffer* views = <Py_buffer*>PyMem_Malloc(max(n, 1) * sizeof(Py_buffer))
    cdef dod_page_range* ranges = <dod_page_range*>PyMem_Malloc(max(n, 1) * sizeof(dod_page_range))
    cdef size_t total = 0
    cdef int err = 0
    try:
        if views == NULL or ranges == NULL:
            raise MemoryError()
        for i in range(n):
            try:
                PyObject_GetBuffer(buffers[i], &views[i], PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS)
            except (BufferError, ValueError) as e:        # numpy says ValueError
                raise BufferError(f"buffer {i} must be writable and contiguous ({e}); nothing faulted") from None
            held += 1
            ranges[i].base = views[i].buf
            ranges[i].size = <size_t>views[i].len
        with nogil:
            err = dod_pages_prefault(ranges, <size_t>n, nt, &total)
    finally:
        for i in range(held):
            PyBuffer_Release(&views[i])
        PyMem_Free(views)
        PyMem_Free(ranges)
    if err != 0:
        import os
        raise MemoryError(f"the system could not fault in these buffers' memory ({os.strerror(err)}); "
                          "contents unchanged")
    return total


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
