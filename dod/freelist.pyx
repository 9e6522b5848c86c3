"""Free-list allocator: variable-size blocks from one region, freed one by one.

A :class:`FreeList` owns one region and carves blocks of any size out of it,
first fit or best fit, each freed individually; adjacent free blocks
coalesce on every free (boundary tags, O(1)). It suits objects of mixed
sizes whose lifetimes do not nest (arena) and are not all equal (pool).

Overhead: a 16-byte header per allocation, payloads rounded up to 16
bytes, and padding for alignments above 16. ``available`` (total free
bytes) is not the largest request that can succeed: that is
:meth:`largest_free`; the gap between the two is fragmentation.

Safety contract (the Python face)
    :meth:`FreeList.alloc` returns a numpy array whose base keeps the
    allocator alive and owns the allocation. The memory returns to the free
    list when the last array over it dies, so freed memory is never viewed.
    :meth:`free` says you are done with an allocation: it raises ValueError
    for an array that is not a live allocation of this allocator (foreign, or
    already freed) and otherwise marks it freed; the memory comes back as soon
    as the array (and any view of it) is gone, which under CPython's reference
    counting is when you drop your last reference. A failed request raises
    MemoryError and changes nothing but the ``failed`` counter.

Thread-safety
    One owner at a time: not locked. Share it between threads only with your
    own lock.

Where things live
    Lifetime rule: ``dod._lease.Owned`` (freed through
    ``dod_freelist_free`` when the last view dies; ``free()`` only marks
    it).
    Fast path: ``dod_freelist_allocate`` / ``dod_freelist_free``, inline in
    ``dod/freelist.pxd``.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uintptr_t
from libc.string cimport memset
from cpython.number cimport PyNumber_Index

from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod._lease cimport Owned, owned, export_pin
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate, dod_resource_allocate_from_python,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16
    _REGION_ALIGN = 64

cdef size_t _MAX_CAPACITY = (<size_t>1) << 48

_STRATEGIES = {"first": DOD_FL_FIRST_FIT, "best": DOD_FL_BEST_FIT}


# ---------------------------------------------------------------- the free list as a dod_resource

cdef void* _fl_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_freelist_allocate(<dod_freelist*>ctx, size, alignment)


cdef void _fl_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_freelist_free(<dod_freelist*>ctx, ptr)


@cython.no_gc_clear
cdef class FreeList:
    """FreeList(capacity, *, strategy="first", resource=None)

    A free-list allocator over one region.

    Parameters
    ----------
    capacity : int
        Bytes of the region (rounded down to 16), at least 48: 16 go to the
        end sentinel, and every allocation also pays its 16-byte header.
    strategy : "first" or "best"
        First fit (fast, more fragmentation at the front) or best fit (walks
        every free block, keeps large blocks whole).
    resource : Resource, optional
        Where the region comes from (anonymous pages by default).

    Raises
    ------
    ValueError
        For a capacity out of range or an unknown strategy.
    MemoryError
        When the region cannot be obtained.

    Notes
    -----
    Thread-safety: one owner at a time: not locked. Share it between
    threads only with your own lock.
    """

    def __cinit__(self, capacity, *, strategy="first", Resource resource=None):
        cdef size_t cap
        cdef char* region
        cap_obj = PyNumber_Index(capacity)
        if cap_obj < DOD_FL_HEADER + DOD_FL_MIN_BLOCK or cap_obj > <object>_MAX_CAPACITY:
            raise ValueError(f"capacity must be between {DOD_FL_HEADER + DOD_FL_MIN_BLOCK} and 2**48 bytes, got {capacity!r}")
        if strategy not in _STRATEGIES:
            raise ValueError(f"strategy must be 'first' or 'best', got {strategy!r}")
        cap = (<size_t>cap_obj) & ~(<size_t>15)
        self._source = dod_pages_resource() if resource is None else &resource.resource
        self._upstream = resource
        region = <char*>dod_resource_allocate_from_python(resource, self._source, cap, _REGION_ALIGN)
        if region == NULL:
            raise MemoryError(f"could not obtain {cap} bytes for a free list")
        self._region = region
        self._region_size = cap
        self.engine.base = region
        self.engine.capacity = cap
        self.engine.strategy = _STRATEGIES[strategy]
        # One free block spanning everything before the sentinel.
        sentinel = dod_fl_at(region, cap - DOD_FL_HEADER)
        sentinel.size_flags = DOD_FL_USED
        dod_fl_make_free(&self.engine, <dod_fl_block*>region, cap - DOD_FL_HEADER, DOD_FL_PREV_USED)

    def __dealloc__(self):
        if self._region != NULL:
            dod_resource_deallocate(self._source, self._region, self._region_size, _REGION_ALIGN)

    # -------------------------------------------------------- alloc / free

    cdef object _carve(self, object shape, object dtype, object align, bint zero):
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef size_t peak, allocations
        cdef void* p
        cdef Owned L
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &req)
        peak = self.engine.peak
        allocations = self.engine.allocations
        p = dod_freelist_allocate(&self.engine, req.nbytes, req.alignment)
        if p == NULL:
            raise MemoryError(
                f"free list cannot fit {req.nbytes} bytes (alignment {req.alignment}): "
                f"{self.available} bytes free, largest free request {self.largest_free()} bytes")
        try:
            L = owned(self, _fl_deallocate, <void*>&self.engine)
            L.pending = &self._pending
            if zero:
                memset(p, 0, req.nbytes)
            arr = wrap_memory(p, &req, dt, L)
        except BaseException:
            dod_freelist_free(&self.engine, p)
            self.engine.peak = peak
            self.engine.allocations = allocations
            raise
        L.ptr = p                   # from here on the lease frees the allocation
        L.size = req.nbytes
        return arr

    def empty(self, shape, dtype=float, *, align=None):
        """A new uninitialised array from the free list.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            Its memory returns to the free list when :meth:`free` was called and
            the last array over it dies (or when the free list dies).

        Raises
        ------
        MemoryError
            When no free block fits.
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        A failed call changes nothing but ``failed``. Thread-safety: one owner at a time (not locked).
        """
        return self._carve(shape, dtype, align, False)

    def alloc(self, shape, dtype=float, *, align=None):
        """The same as :meth:`empty` (its older name, kept as an alias).

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        MemoryError
            When no free block fits.
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        return self._carve(shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`empty`, filled with zeros.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        MemoryError
            When no free block fits.
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        return self._carve(shape, dtype, align, True)

    cdef object _allocation_of(self, object arr):
        base = arr
        for _ in range(3):
            base = getattr(base, "base", None)
            if type(base) is Owned:
                if (<Owned>base).owner is not self:
                    raise ValueError("that array belongs to another allocator")
                return <Owned>base
            if not isinstance(base, np.ndarray):
                break
        raise ValueError("that array is not an allocation of this free list")

    def free(self, arr):
        """Free the allocation that `arr` covers.

        The memory returns when the last array over it dies (at once when you
        drop `arr`, if it has no other views), never while an array can still
        read it.

        Parameters
        ----------
        arr : numpy.ndarray
            From :meth:`empty` / :meth:`zeros` / :meth:`alloc`, or a view of it.

        Raises
        ------
        ValueError
            When it is not a live allocation of this free list (foreign array, or
            already freed).

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        cdef Owned L = self._allocation_of(arr)
        if L.marked:
            raise ValueError("that allocation was already freed (double free)")
        L.marked = True
        self._pending += 1

    def owns(self, arr):
        """Whether `arr` views a live (not yet freed) allocation of this free list.

        Parameters
        ----------
        arr : object

        Returns
        -------
        bool

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        try:
            return not (<Owned>self._allocation_of(arr)).marked
        except ValueError:
            return False

    # -------------------------------------------------------- composition

    def resource(self):
        """This free list as a :class:`~dod.resource.Resource` (allocate and free through the engine).

        Memory handed out through it is invisible to the Python face; it is
        returned by the Resource's deallocate, or with the free list.

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        cdef dod_resource r
        pin = export_pin(self, NULL)           # keeps this free list alive; blocks nothing
        r.allocate = _fl_allocate
        r.deallocate = _fl_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, pin, "freelist")

    # -------------------------------------------------------- checks and statistics

    def largest_free(self):
        """Payload bytes of the largest request (alignment <= 16) that can succeed now.

        Returns
        -------
        int

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        cdef dod_fl_block* b = self.engine.head
        cdef size_t best = 0, s
        while b != NULL:
            s = dod_fl_size(b)
            if s > best:
                best = s
            b = b.next
        return best - DOD_FL_HEADER if best else 0

    def check(self):
        """Walk the region and the free list, verify every invariant.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        cdef char* p = self.engine.base
        cdef char* end
        cdef dod_fl_block* b
        cdef size_t size, used = 0, live = 0, nfree = 0, prev_size = 0
        cdef bint prev_used = True
        cdef dod_fl_block* back = NULL
        if p == NULL:
            return True
        end = p + self.engine.capacity - DOD_FL_HEADER
        free_at = set()
        while p < end:
            b = <dod_fl_block*>p
            size = dod_fl_size(b)
            if size < DOD_FL_MIN_BLOCK or size % 16 or p + size > end:
                raise InvariantError(f"block at offset {p - self.engine.base} has bad size {size}")
            if bool(b.size_flags & DOD_FL_PREV_USED) != prev_used:
                raise InvariantError(f"PREV_USED of block at offset {p - self.engine.base} is wrong")
            if not prev_used and b.prev_size != prev_size:
                raise InvariantError(f"prev_size of block at offset {p - self.engine.base} is wrong")
            if b.size_flags & DOD_FL_USED:
                used += size
                live += 1
                prev_used = True
            else:
                if not prev_used:
                    raise InvariantError(f"two adjacent free blocks at offset {p - self.engine.base} (missed coalescing)")
                nfree += 1
                free_at.add(<uintptr_t>p)
                prev_used = False
            prev_size = size
            p += size
        if p != end:
            raise InvariantError("blocks do not tile the region")
        b = <dod_fl_block*>end
        if not (b.size_flags & DOD_FL_USED) or dod_fl_size(b) != 0:
            raise InvariantError("end sentinel overwritten")
        if bool(b.size_flags & DOD_FL_PREV_USED) != prev_used:
            raise InvariantError("PREV_USED of the sentinel is wrong")
        # The free list holds exactly the free blocks, with consistent links.
        n = 0
        b = self.engine.head
        while b != NULL:
            if <uintptr_t>b not in free_at:
                raise InvariantError(f"free list holds {<uintptr_t>b:#x}, not a free block")
            if b.prev != back:
                raise InvariantError("free-list back link broken")
            free_at.discard(<uintptr_t>b)
            n += 1
            back = b
            b = b.next
        if free_at:
            raise InvariantError(f"{len(free_at)} free block(s) missing from the free list")
        if n != self.engine.free_blocks or nfree != n:
            raise InvariantError(f"free_blocks {self.engine.free_blocks} != {n} on the list")
        if used != self.engine.used:
            raise InvariantError(f"used {self.engine.used} != {used} in used blocks")
        if live != self.engine.live:
            raise InvariantError(f"live {self.engine.live} != {live} used blocks")
        if self.engine.peak < self.engine.used:
            raise InvariantError("peak below used")
        return True

    @property
    def capacity(self):
        """Bytes of the region (the 16-byte end sentinel included)."""
        return self.engine.capacity

    @property
    def used(self):
        """Bytes in used blocks: payloads, headers and padding."""
        return self.engine.used

    @property
    def available(self):
        """Bytes in free blocks (headers of future allocations included): not one request's limit."""
        return self.engine.capacity - DOD_FL_HEADER - self.engine.used

    @property
    def peak(self):
        """Highest ``used`` reached (bytes in use, as the shared statistics count them)."""
        return self.engine.peak

    @property
    def allocations(self):
        """Successful allocations since creation."""
        return self.engine.allocations

    @property
    def failed(self):
        """Allocations refused (no free block fitted)."""
        return self.engine.failed

    @property
    def live(self):
        """Allocations whose memory has not returned yet (freed-but-viewed included)."""
        return self.engine.live

    @property
    def free_blocks(self):
        """Blocks on the free list now."""
        return self.engine.free_blocks

    @property
    def strategy(self):
        """"first" or "best": the fit the free list searches with."""
        return "best" if self.engine.strategy == DOD_FL_BEST_FIT else "first"

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes), then ``largest_free``, ``live``, ``pending``
            and ``free_blocks``.

        Notes
        -----
        Thread-safety: one owner at a time (not locked).
        """
        return {
            "capacity": self.engine.capacity,
            "used": self.engine.used,
            "available": self.available,
            "peak": self.engine.peak,
            "allocations": self.engine.allocations,
            "failed": self.engine.failed,
            "largest_free": self.largest_free(),
            "live": self.engine.live,
            "pending": self._pending,
            "free_blocks": self.engine.free_blocks,
        }

    def __repr__(self):
        return (f"<dod.FreeList {self.strategy}-fit capacity={fmt_bytes(self.engine.capacity)} "
                f"used={fmt_bytes(self.engine.used)} largest_free={fmt_bytes(self.largest_free())} "
                f"live={self.engine.live} free_blocks={self.engine.free_blocks} peak={fmt_bytes(self.engine.peak)} "
                f"allocations={self.engine.allocations} failed={self.engine.failed}>")
