"""Guard zones: make overruns and uses after free fault where they happen.

A :class:`GuardedResource` wraps another allocator (any
:class:`~dod.resource.Resource`; anonymous pages by default) and places every
allocation against an inaccessible page: writing one byte past the end (or,
with ``side="left"``, before the start) raises SIGSEGV on the spot instead of
corrupting a neighbour. Freed allocations are made inaccessible and kept in a
quarantine ring for a while, so touching memory after freeing it faults too.

Hand its :meth:`~GuardedResource.resource` to a table, a pool or any
allocator that takes ``resource=``, run the failing program, and the debugger
(or ``python -X faulthandler``) stops at the bad access.

Cost
    Every allocation takes at least two pages and two or three system calls
    (map, protect; protect again on free; unprotect and unmap when it leaves
    the quarantine). Measured with ``python -m dod.bench --only atomic`` on a
    busy 2-core VM: 19-37 microseconds per 64-byte allocate+free pair in
    steady state, 1,000-1,700 times malloc+free, plus 8 KiB of address space
    (and one dirty page) per live allocation. Meant for debugging runs only.

Safety contract (the Python face)
    Arrays from :meth:`~GuardedResource.empty` keep their allocation alive and
    numpy's own bounds checks apply, so Python code cannot fault through them;
    the faults are for C/Cython code that goes out of bounds.

Thread-safety
    Safe from any thread (the quarantine ring is under a lock).

Where things live
    Lifetime rule: ``dod._lease.Owned`` (an array's region is quarantined
    when its last view dies).
    Fast path: ``dod_guard_allocate`` / ``dod_guard_deallocate`` in this
    file (a debugging tool: two system calls a pair).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint64_t, uintptr_t
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memset

from dod._core cimport dod_is_pow2, dod_add_overflow
from dod.atomics cimport dod_mutex_init, dod_mutex_destroy, dod_mutex_lock, dod_mutex_unlock
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod._lease cimport Owned, owned
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod.errors import InvariantError

cnp.import_array()


cdef extern from "_os.h" nogil:
    size_t dod_os_page_size()
    int dod_os_protect_none(void* p, size_t size)
    int dod_os_protect_rw(void* p, size_t size)


cdef enum:
    _DEFAULT_ALIGN = 16


cdef inline size_t _data_length(const dod_guard* g, size_t size) noexcept nogil:
    """Whole pages holding size bytes (at least one); 0 on overflow."""
    cdef size_t out
    if size == 0:
        size = 1
    if dod_add_overflow(size, g.page - 1, &out):
        return 0
    return out & ~(g.page - 1)


cdef void _give_back(dod_guard* g, void* region, size_t length) noexcept nogil:
    dod_os_protect_rw(region, length)
    dod_resource_deallocate(g.upstream, region, length, g.page)


cdef void* dod_guard_allocate(dod_guard* g, size_t size, size_t alignment) noexcept nogil:
    """size bytes against a PROT_NONE page, or NULL (alignment above the page size refused)."""
    cdef size_t data = _data_length(g, size)
    cdef size_t total, rounded
    cdef char* region
    cdef char* p
    if g.upstream == NULL or data == 0 or not dod_is_pow2(alignment) or alignment > g.page \
            or dod_add_overflow(data, g.page, &total):
        dod_mutex_lock(&g.lock)
        g.failed += 1
        dod_mutex_unlock(&g.lock)
        return NULL
    region = <char*>dod_resource_allocate(g.upstream, total, g.page)
    if region != NULL and (<uintptr_t>region & (g.page - 1)) != 0:
        dod_resource_deallocate(g.upstream, region, total, g.page)
        region = NULL
    if region != NULL:
        if g.left:
            if dod_os_protect_none(region, g.page) != 0:
                dod_resource_deallocate(g.upstream, region, total, g.page)
                region = NULL
            else:
                p = region + g.page
        else:
            if dod_os_protect_none(region + data, g.page) != 0:
                dod_resource_deallocate(g.upstream, region, total, g.page)
                region = NULL
            else:
                # size 0 counts as 1 byte, so p stays inside the data pages
                # (deallocate finds the region from p's page).
                rounded = ((size if size else 1) + alignment - 1) & ~(alignment - 1)
                p = region + data - rounded
    dod_mutex_lock(&g.lock)
    if region == NULL:
        g.failed += 1
        dod_mutex_unlock(&g.lock)
        return NULL
    g.allocations += 1
    g.in_use += size
    g.mapped += total
    if g.mapped > g.peak:
        g.peak = g.mapped
    dod_mutex_unlock(&g.lock)
    return p


cdef void dod_guard_deallocate(dod_guard* g, void* p, size_t size, size_t alignment) noexcept nogil:
    """Make p's whole region PROT_NONE and quarantine it (the oldest leaves the ring)."""
    cdef size_t data = _data_length(g, size)
    cdef size_t total = data + g.page
    cdef char* region
    cdef void* old_region = NULL
    cdef size_t old_length = 0
    if p == NULL:
        return
    if g.left:
        region = <char*>p - g.page
    else:
        region = <char*>(<uintptr_t>p & ~(<uintptr_t>g.page - 1))
    dod_os_protect_none(region, total)
    dod_mutex_lock(&g.lock)
    g.frees += 1
    g.in_use -= size
    if g.quarantine == 0:
        old_region = region
        old_length = total
        g.mapped -= total
    else:
        if g.q_count == g.quarantine:
            old_region = g.q_region[g.q_head]
            old_length = g.q_length[g.q_head]
            g.q_head = (g.q_head + 1) % g.quarantine
            g.q_count -= 1
            g.quarantined -= old_length
            g.mapped -= old_length
        g.q_region[(g.q_head + g.q_count) % g.quarantine] = region
        g.q_length[(g.q_head + g.q_count) % g.quarantine] = total
        g.q_count += 1
        g.quarantined += total
    dod_mutex_unlock(&g.lock)
    if old_region != NULL:
        _give_back(g, old_region, old_length)


cdef void dod_guard_flush(dod_guard* g) noexcept nogil:
    """Release every quarantined region to the upstream resource."""
    cdef void* region
    cdef size_t length
    while True:
        dod_mutex_lock(&g.lock)
        if g.q_count == 0:
            dod_mutex_unlock(&g.lock)
            return
        region = g.q_region[g.q_head]
        length = g.q_length[g.q_head]
        g.q_head = (g.q_head + 1) % g.quarantine
        g.q_count -= 1
        g.quarantined -= length
        g.mapped -= length
        dod_mutex_unlock(&g.lock)
        _give_back(g, region, length)


# ---------------------------------------------------------------- as a dod_resource

cdef void* _g_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_guard_allocate(<dod_guard*>ctx, size, alignment)


cdef void _g_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_guard_deallocate(<dod_guard*>ctx, ptr, size, alignment)


@cython.no_gc_clear
cdef class GuardedResource:
    """GuardedResource(resource=None, *, side="right", quarantine=64)

    Every allocation against an inaccessible page; freed ones quarantined inaccessible.

    Parameters
    ----------
    resource : Resource, optional
        Where regions come from (anonymous pages by default). It must return
        page-aligned memory when asked for page alignment.
    side : "right" or "left"
        "right" (default): the allocation ends at the guard page, so an
        overrun faults (after at most ``alignment - 1`` bytes of slack when
        the size is not a multiple of the alignment). "left": it starts right
        after the guard page, so an underrun faults.
    quarantine : int
        How many freed allocations stay inaccessible (a ring; the oldest goes
        back to the resource when it overflows). 0 returns them at once.

    Raises
    ------
    ValueError
        For a side other than "right" or "left", or a quarantine out of
        0 .. 2**24.
    MemoryError
        When the quarantine ring or the lock cannot be set up.

    Notes
    -----
    Alignment is limited to the page size. A debugging tool: see the module
    documentation for its cost. Thread-safety: safe from any thread (the
    quarantine ring is under a lock).
    """

    def __cinit__(self, Resource resource=None, *, side="right", quarantine=64):
        if side not in ("right", "left"):
            raise ValueError(f"side must be 'right' or 'left', got {side!r}")
        q = int(quarantine)
        if q < 0 or q > (1 << 24):
            raise ValueError(f"quarantine must be between 0 and 2**24, got {quarantine!r}")
        if q:
            self.engine.q_region = <void**>calloc(q, sizeof(void*))
            self.engine.q_length = <size_t*>calloc(q, sizeof(size_t))
            if self.engine.q_region == NULL or self.engine.q_length == NULL:
                raise MemoryError("could not allocate the quarantine ring")
        if dod_mutex_init(&self.engine.lock) != 0:
            raise MemoryError("could not initialise the lock")   # pragma: no cover
        self._ready = True
        self._upstream = resource if resource is not None else Resource.wrap(dod_pages_resource(), None, "pages", True)
        self.engine.upstream = &self._upstream.resource
        # Held directly too: the cyclic GC may clear Resource.owner before this
        # object (no_gc_clear) releases its regions through the resource.
        self._upstream_owner = self._upstream.owner
        self.engine.page = dod_os_page_size()
        self.engine.left = side == "left"
        self.engine.quarantine = <size_t>q

    def __dealloc__(self):
        if self._ready:
            dod_guard_flush(&self.engine)
            dod_mutex_destroy(&self.engine.lock)
        free(self.engine.q_region)
        free(self.engine.q_length)

    def empty(self, shape, dtype=float, *, align=None):
        """A new uninitialised array placed against a guard page.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to the page size; default 16, or the dtype's.

        Returns
        -------
        numpy.ndarray
            The allocation is freed into the quarantine when the last array
            viewing it dies.

        Raises
        ------
        ValueError
            For a larger alignment.
        MemoryError
            When the resource refuses.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: any thread (the quarantine ring is under a lock).
        """
        return self._carve(shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`empty`, filled with zeros.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError, MemoryError
            As :meth:`empty`.

        Notes
        -----
        Thread-safety: any thread (the quarantine ring is under a lock).
        """
        return self._carve(shape, dtype, align, True)

    def _carve(self, shape, dtype, align, bint zero):
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef void* p
        cdef Owned L
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &req)
        if req.alignment > self.engine.page:
            raise ValueError(f"alignment {req.alignment} is above the page size {self.engine.page}")
        L = owned(self, _g_deallocate, <void*>&self.engine)   # made first: nothing to undo if it fails
        if self._upstream.threadsafe:
            with nogil:
                p = dod_guard_allocate(&self.engine, req.nbytes, req.alignment)
        else:
            p = dod_guard_allocate(&self.engine, req.nbytes, req.alignment)  # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)
        if p == NULL:
            raise MemoryError(f"the resource refused {req.nbytes} bytes plus a guard page")
        L.ptr = p
        L.size = req.nbytes
        L.alignment = req.alignment
        if zero:
            memset(p, 0, req.nbytes)
        return wrap_memory(p, &req, dt, L)

    def flush_quarantine(self):
        """Give every quarantined allocation back to the resource now.

        Notes
        -----
        Thread-safety: any thread (the quarantine ring is under a lock).
        """
        if self._upstream.threadsafe:
            with nogil:
                dod_guard_flush(&self.engine)
        else:
            dod_guard_flush(&self.engine)  # keep the GIL: the upstream is not thread-safe (Resource.threadsafe)

    def resource(self):
        """This wrapper as a :class:`~dod.resource.Resource` (it keeps the wrapper alive).

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        Thread-safety: any thread (the quarantine ring is under a lock).
        """
        cdef dod_resource r
        r.allocate = _g_allocate
        r.deallocate = _g_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, self, "guarded", self._upstream.threadsafe)

    @property
    def side(self):
        """"right" (overruns fault) or "left" (underruns fault)."""
        return "left" if self.engine.left else "right"

    @property
    def quarantine(self):
        """Capacity of the quarantine ring."""
        return self.engine.quarantine

    @property
    def quarantined(self):
        """Allocations in the quarantine ring now."""
        return self.engine.q_count

    @property
    def page_size(self):
        """The system page size, in bytes."""
        return self.engine.page

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (capacity and peak count region bytes, guard pages and
            quarantine included; ``used`` counts the bytes callers asked for;
            ``available`` is 0: every region is made for one request), then
            ``frees``, ``quarantined`` and ``quarantined_bytes``.

        Notes
        -----
        Thread-safety: any thread (the quarantine ring is under a lock).
        """
        dod_mutex_lock(&self.engine.lock)
        try:
            return {"capacity": self.engine.mapped, "used": self.engine.in_use, "available": 0,
                    "peak": self.engine.peak, "allocations": self.engine.allocations,
                    "failed": self.engine.failed, "frees": self.engine.frees,
                    "quarantined": self.engine.q_count,
                    "quarantined_bytes": self.engine.quarantined}
        finally:
            dod_mutex_unlock(&self.engine.lock)

    def check(self):
        """Verify the quarantine ring and the counters.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: any thread (the quarantine ring is under a lock).
        """
        cdef dod_guard* g = &self.engine
        cdef size_t k, i, held = 0
        dod_mutex_lock(&g.lock)
        try:
            if g.q_count > g.quarantine or (g.quarantine and g.q_head >= g.quarantine):
                raise InvariantError(f"ring of {g.quarantine}: head {g.q_head}, count {g.q_count}")
            for k in range(g.q_count):
                i = (g.q_head + k) % g.quarantine
                held += g.q_length[i]
                if g.q_region[i] == NULL or (<uintptr_t>g.q_region[i]) % g.page:
                    raise InvariantError(f"quarantined region {i} is NULL or not page-aligned")
            if held != self.engine.quarantined:
                raise InvariantError(f"the ring holds {held} bytes, quarantined says {self.engine.quarantined}")
            if self.engine.in_use > self.engine.mapped or self.engine.mapped > self.engine.peak:
                raise InvariantError("in_use above mapped, or mapped above peak")
            if self.engine.frees > self.engine.allocations:
                raise InvariantError(f"{self.engine.frees} frees of {self.engine.allocations} allocations")
        finally:
            dod_mutex_unlock(&g.lock)
        return True

    def __repr__(self):
        s = self.stats()
        return (f"<dod.GuardedResource side={self.side} quarantine={self.engine.q_count}/"
                f"{self.engine.quarantine} used={s['used']} mapped={s['capacity']} "
                f"allocations={s['allocations']}>")
