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
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uintptr_t
from libc.string cimport memset
from cpython.number cimport PyNumber_Index

from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate, dod_resource_allocate_from_python,
                           dod_resource_deallocate, dod_pages_resource)

import numpy as np

from dod._format import fmt_bytes

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16
    _REGION_ALIGN = 64

cdef size_t _MAX_CAPACITY = (<size_t>1) << 48

_STRATEGIES = {"first": DOD_FL_FIRST_FIT, "best": DOD_FL_BEST_FIT}


# ---------------------------------------------------------------- the free list as a dod_resource

cdef void* _fl_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_freelist_alloc(<dod_freelist*>ctx, size, alignment)


cdef void _fl_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_freelist_free(<dod_freelist*>ctx, ptr)


# ---------------------------------------------------------------- leases

@cython.no_gc
@cython.freelist(32)
cdef class _Allocation:
    """Base object of an array from FreeList.alloc: owns the allocation."""
    cdef FreeList owner
    cdef void* ptr
    cdef size_t nbytes
    cdef bint freed

    def __dealloc__(self):
        if self.owner is not None:
            self.owner._release(self.ptr, self.freed)


@cython.no_gc
cdef class _ResourcePin:
    cdef FreeList owner

    def __dealloc__(self):
        if self.owner is not None:
            self.owner._exports -= 1


@cython.no_gc_clear
cdef class FreeList:
    """A free-list allocator over one region.

    FreeList(capacity, *, strategy="first", resource=None)

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

    Raises ValueError for a capacity out of range or an unknown strategy,
    MemoryError when the region cannot be obtained.
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
        self.fl.base = region
        self.fl.capacity = cap
        self.fl.strategy = _STRATEGIES[strategy]
        # One free block spanning everything before the sentinel.
        sentinel = dod_fl_at(region, cap - DOD_FL_HEADER)
        sentinel.size_flags = DOD_FL_USED
        dod_fl_make_free(&self.fl, <dod_fl_block*>region, cap - DOD_FL_HEADER, DOD_FL_PREV_USED)

    def __dealloc__(self):
        if self._region != NULL:
            dod_resource_deallocate(self._source, self._region, self._region_size, _REGION_ALIGN)

    cdef void _release(self, void* p, bint was_freed) noexcept:
        dod_freelist_free(&self.fl, p)
        if was_freed:
            self._pending -= 1

    # -------------------------------------------------------- alloc / free

    cdef object _carve(self, object shape, object dtype, object align, bint zero):
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef size_t peak, allocations
        cdef void* p
        cdef _Allocation L
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &req)
        peak = self.fl.peak
        allocations = self.fl.allocations
        p = dod_freelist_alloc(&self.fl, req.nbytes, req.alignment)
        if p == NULL:
            raise MemoryError(
                f"free list cannot fit {req.nbytes} bytes (alignment {req.alignment}): "
                f"{self.available} bytes free, largest free request {self.largest_free()} bytes")
        try:
            L = _Allocation.__new__(_Allocation)
            L.ptr = p
            L.nbytes = req.nbytes
            if zero:
                memset(p, 0, req.nbytes)
            arr = wrap_memory(p, &req, dt, L)
        except BaseException:
            dod_freelist_free(&self.fl, p)
            self.fl.peak = peak
            self.fl.allocations = allocations
            raise
        L.owner = self
        return arr

    def alloc(self, shape, dtype=float, *, align=None):
        """A new uninitialised array of `shape` and `dtype` from the free list.

        ``align`` is a power of two (default 16, or the dtype's alignment if
        larger). Raises MemoryError when no free block fits, TypeError for
        object dtypes, ValueError for negative dimensions or a bad alignment;
        a failed call changes nothing but ``failed``.
        """
        return self._carve(shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`alloc`, filled with zeros."""
        return self._carve(shape, dtype, align, True)

    cdef object _allocation_of(self, object arr):
        base = arr
        for _ in range(3):
            base = getattr(base, "base", None)
            if type(base) is _Allocation:
                if (<_Allocation>base).owner is not self:
                    raise ValueError("that array belongs to another allocator")
                return <_Allocation>base
            if not isinstance(base, np.ndarray):
                break
        raise ValueError("that array is not an allocation of this free list")

    def free(self, arr):
        """Free the allocation that `arr` (from :meth:`alloc`, or a view of it) covers.

        Raises ValueError when it is not a live allocation of this allocator
        (foreign array, or already freed). The memory returns when the last
        array over it dies (at once when you drop `arr`, if it has no other
        views), never while an array can still read it.
        """
        cdef _Allocation L = self._allocation_of(arr)
        if L.freed:
            raise ValueError("that allocation was already freed (double free)")
        L.freed = True
        self._pending += 1

    def owns(self, arr):
        """True if `arr` views a live (not yet freed) allocation of this free list."""
        cdef _Allocation L
        try:
            L = self._allocation_of(arr)    # typed: `freed` is a C field, invisible to Python lookup
        except ValueError:
            return False
        return not L.freed

    # -------------------------------------------------------- composition

    def resource(self):
        """This free list as a :class:`~dod.resource.Resource` (alloc/free through the engine).

        Memory handed out through it is invisible to the Python face; it is
        returned by the Resource's deallocate, or with the free list.
        """
        cdef dod_resource r
        cdef _ResourcePin pin = _ResourcePin.__new__(_ResourcePin)
        pin.owner = self
        self._exports += 1
        r.allocate = _fl_allocate
        r.deallocate = _fl_deallocate
        r.ctx = <void*>&self.fl
        return Resource.wrap(&r, pin, "freelist")

    # -------------------------------------------------------- checks and statistics

    def largest_free(self):
        """Payload bytes of the largest request (alignment <= 16) that can succeed now."""
        cdef dod_fl_block* b = self.fl.head
        cdef size_t best = 0, s
        while b != NULL:
            s = dod_fl_size(b)
            if s > best:
                best = s
            b = b.next
        return best - DOD_FL_HEADER if best else 0

    def check(self):
        """Walk the region and the free list, verify every invariant; AssertionError names the first broken one."""
        cdef char* p = self.fl.base
        cdef char* end
        cdef dod_fl_block* b
        cdef size_t size, used = 0, live = 0, nfree = 0, prev_size = 0
        cdef bint prev_used = True
        cdef dod_fl_block* back = NULL
        if p == NULL:
            return True
        end = p + self.fl.capacity - DOD_FL_HEADER
        free_at = set()
        while p < end:
            b = <dod_fl_block*>p
            size = dod_fl_size(b)
            if size < DOD_FL_MIN_BLOCK or size % 16 or p + size > end:
                raise AssertionError(f"block at offset {p - self.fl.base} has bad size {size}")
            if bool(b.size_flags & DOD_FL_PREV_USED) != prev_used:
                raise AssertionError(f"PREV_USED of block at offset {p - self.fl.base} is wrong")
            if not prev_used and b.prev_size != prev_size:
                raise AssertionError(f"prev_size of block at offset {p - self.fl.base} is wrong")
            if b.size_flags & DOD_FL_USED:
                used += size
                live += 1
                prev_used = True
            else:
                if not prev_used:
                    raise AssertionError(f"two adjacent free blocks at offset {p - self.fl.base} (missed coalescing)")
                nfree += 1
                free_at.add(<uintptr_t>p)
                prev_used = False
            prev_size = size
            p += size
        if p != end:
            raise AssertionError("blocks do not tile the region")
        b = <dod_fl_block*>end
        if not (b.size_flags & DOD_FL_USED) or dod_fl_size(b) != 0:
            raise AssertionError("end sentinel overwritten")
        if bool(b.size_flags & DOD_FL_PREV_USED) != prev_used:
            raise AssertionError("PREV_USED of the sentinel is wrong")
        # The free list holds exactly the free blocks, with consistent links.
        n = 0
        b = self.fl.head
        while b != NULL:
            if <uintptr_t>b not in free_at:
                raise AssertionError(f"free list holds {<uintptr_t>b:#x}, not a free block")
            if b.prev != back:
                raise AssertionError("free-list back link broken")
            free_at.discard(<uintptr_t>b)
            n += 1
            back = b
            b = b.next
        if free_at:
            raise AssertionError(f"{len(free_at)} free block(s) missing from the free list")
        if n != self.fl.free_blocks or nfree != n:
            raise AssertionError(f"free_blocks {self.fl.free_blocks} != {n} on the list")
        if used != self.fl.used:
            raise AssertionError(f"used {self.fl.used} != {used} in used blocks")
        if live != self.fl.live:
            raise AssertionError(f"live {self.fl.live} != {live} used blocks")
        if self.fl.peak < self.fl.used:
            raise AssertionError("peak below used")
        return True

    @property
    def capacity(self):
        """Bytes of the region (the 16-byte end sentinel included)."""
        return self.fl.capacity

    @property
    def used(self):
        """Bytes in used blocks: payloads, headers and padding."""
        return self.fl.used

    @property
    def available(self):
        """Bytes in free blocks (headers of future allocations included): not one request's limit."""
        return self.fl.capacity - DOD_FL_HEADER - self.fl.used

    @property
    def peak(self):
        return self.fl.peak

    @property
    def allocations(self):
        return self.fl.allocations

    @property
    def failed(self):
        return self.fl.failed

    @property
    def live(self):
        """Allocations whose memory has not returned yet (freed-but-viewed included)."""
        return self.fl.live

    @property
    def free_blocks(self):
        return self.fl.free_blocks

    @property
    def strategy(self):
        return "best" if self.fl.strategy == DOD_FL_BEST_FIT else "first"

    def stats(self):
        """The common statistics as a dict."""
        return {
            "capacity": self.fl.capacity,
            "used": self.fl.used,
            "available": self.available,
            "largest_free": self.largest_free(),
            "peak": self.fl.peak,
            "allocations": self.fl.allocations,
            "failed": self.fl.failed,
            "live": self.fl.live,
            "pending": self._pending,
            "free_blocks": self.fl.free_blocks,
        }

    def __repr__(self):
        return (f"<dod.FreeList {self.strategy}-fit capacity={fmt_bytes(self.fl.capacity)} "
                f"used={fmt_bytes(self.fl.used)} largest_free={fmt_bytes(self.largest_free())} "
                f"live={self.fl.live} free_blocks={self.fl.free_blocks} peak={fmt_bytes(self.fl.peak)} "
                f"allocations={self.fl.allocations} failed={self.fl.failed}>")
