# dod/segfit.pxd: segregated fit, dod's general-purpose allocator: the engine
# (C struct + inline nogil functions) and its owner class.
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
#     from dod.segfit cimport SegFit, dod_segfit_allocate, dod_segfit_free
#     cdef SegFit owner = SegFit()
#     with nogil:
#         p = dod_segfit_allocate(&owner.engine, 100, 16)
#         dod_segfit_free(&owner.engine, p, 100, 16)
#
# Size classes (a two-level index, as in TLSF)
#   level 0: 8, then 16 to 256 in steps of 16 (17 classes: index = ceil(size/16));
#   level f >= 8: [2**f, 2**(f+1)) split in 8 equal steps of 2**(f-3):
#   classes 2**f + k * 2**(f-3), k = 1..8, up to 256 KiB (97 classes in all).
#   Index = 17 + 8*(f-8) + k-1, computed with one count-leading-zeros.
#   Rounding waste (class size minus request): under 16 bytes up to 256 bytes,
#   under 1/8 of the request above (at most 12.5%, 6.25% on average for
#   uniform sizes). Every class from 16 up is a multiple of 16, so blocks are
#   16-byte aligned; an alignment above 16 (up to 4096) picks the first class
#   that is a multiple of it. Requests above 256 KiB (or aligned above 4096)
#   go straight to the resource ("large").
#
# Invariants
#   * Each class is a dod_lfpool (see lfpool.pxd): a lock-free free list with
#     an ABA tag, the free link in the block's first word (zero bookkeeping
#     bytes in a live block; the smallest class is pointer-sized), growth per
#     class under that class's lock, re-checked after taking it. Spans (the
#     pool's chunks) are rounded to whole pages and use every block that fits;
#     their record sits at the tail, so blocks keep the span's alignment.
#   * Frees are sized, as in the dod_resource interface and C++ sized
#     delete: the caller passes the size and alignment it allocated with, and
#     the class is recomputed from them (the same rounding the search used).
#   * Span memory returns to the resource only when the owner is destroyed;
#     large blocks return at their free.
#   * All bytes zero (ZII) is a valid allocator with no upstream: every
#     request fails with NULL.
#
# Engine contract (checks the caller owns): `alignment` is a power of two;
# a free passes the pointer with the size and alignment it was allocated
# with, once. The owner object outlives every
# thread that runs the engine on it (its __dealloc__ returns all memory). Debug builds check on each free that the block belongs to the
# class the size names (O(spans of that class)).
from libc.stdint cimport uint64_t, uintptr_t

from dod.atomics cimport dod_atomic_fetch_add_relaxed_u64
from dod.lfpool cimport (dod_lfpool, dod_lfpool_acquire, dod_lfpool_try_acquire,
                         dod_lfpool_release, dod_lfpool_release_chain, dod_lfpool_link,
                         dod_lfpool_bin, dod_lfpool_bin_push, dod_lfpool_bin_publish)
from dod._core cimport DOD_DEBUG
from dod.atomics cimport dod_atomic_load_ptr
from dod.resource cimport dod_resource, Resource
from dod._lease cimport dod_slots

cdef extern from *:
    """
    #include <stddef.h>
    /* floor(log2(x)) for x > 0: the first level of the size-class index. */
    static inline size_t dod_segfit_log2(size_t x) { return (size_t)(63 - __builtin_clzll((unsigned long long)x)); }
    /* The class index of a size <= 256 KiB. Up to 1 KiB (the classes the
       random pattern of dod.bench.concurrent draws, and most requests) it is
       one load from this table of 8-byte granules, as tcmalloc indexes its
       small classes: with mixed sizes the former branches on size <= 8 and
       size <= 256 mispredicted about every other call, twice per
       allocate+free pair (measured 14.5 ns per pair for a 64 B / 1000 B mix
       against 4.9 ns for 64 B / 200 B; tests/test_segfit.py checks every
       size against the class table). */
    static const unsigned char dod_segfit_small_class[129] = {
        0, 0, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12,
        13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 17, 17, 18, 18, 18, 18, 19, 19, 19, 19,
        20, 20, 20, 20, 21, 21, 21, 21, 22, 22, 22, 22, 23, 23, 23, 23, 24, 24, 24, 24,
        25, 25, 25, 25, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27, 27, 27,
        27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, 28, 29, 29, 29, 29, 29, 29, 29, 29,
        30, 30, 30, 30, 30, 30, 30, 30, 31, 31, 31, 31, 31, 31, 31, 31, 32, 32, 32, 32,
        32, 32, 32, 32
    };
    static inline size_t dod_segfit_class_index_select(size_t size) {
        if (size <= 1024)
            return dod_segfit_small_class[(size + 7) >> 3];
        size_t s = size - 1;
        size_t f = dod_segfit_log2(s);
        return 17 + ((f - 8) << 3) + ((s >> (f - 3)) & 7);
    }
    """
    size_t dod_segfit_log2(size_t x) nogil
    size_t dod_segfit_class_index_select(size_t size) nogil

cdef enum:
    DOD_SEGFIT_CLASSES = 97           # size classes (index DOD_SEGFIT_CLASSES means "large")
    DOD_SEGFIT_MAX_CLASS = 262144     # largest class: 256 KiB
    DOD_SEGFIT_MAX_ALIGN = 4096       # largest alignment served from a class
    DOD_SEGFIT_MIN_ALIGN = 16         # alignment of every class from 16 bytes up

ctypedef struct dod_segfit:
    dod_lfpool classes[97]            # one lock-free pool per class (DOD_SEGFIT_CLASSES)
    const dod_resource* upstream      # spans and large blocks come from here; NULL: fails
    uint64_t large_count              # large blocks live (relaxed atomics, large path only)
    uint64_t large_bytes              # bytes of them as asked for
    uint64_t large_failed             # large requests the resource refused


cdef void* dod_segfit_allocate_large(dod_segfit* s, size_t size, size_t alignment) noexcept nogil
cdef void dod_segfit_free_large(dod_segfit* s, void* ptr, size_t size, size_t alignment) noexcept nogil
cdef void dod_segfit_check_class(dod_segfit* s, size_t c, void* ptr) noexcept nogil


cdef inline size_t dod_segfit_class_index(size_t size) noexcept nogil:
    """Index of the smallest class >= size (size <= DOD_SEGFIT_MAX_CLASS): 0 up
    to 8 bytes, (size + 15) / 16 up to 256, then 8 classes per power of two
    (a table up to 1 KiB: dod_segfit_class_index_select above)."""
    return dod_segfit_class_index_select(size)


cdef inline size_t dod_segfit_class_size(size_t index) noexcept nogil:
    """Bytes of class `index` (< DOD_SEGFIT_CLASSES)."""
    cdef size_t j, f
    if index == 0:
        return 8
    if index <= 16:
        return index << 4
    j = index - 17
    f = 8 + (j >> 3)
    return ((<size_t>1) << f) + ((j & 7) + 1) * ((<size_t>1) << (f - 3))


cdef inline size_t dod_segfit_class_for(size_t size, size_t alignment) noexcept nogil:
    """The class serving (size, alignment), or DOD_SEGFIT_CLASSES for a large block."""
    cdef size_t c
    if size > DOD_SEGFIT_MAX_CLASS or alignment > DOD_SEGFIT_MAX_ALIGN:
        return DOD_SEGFIT_CLASSES
    if alignment <= DOD_SEGFIT_MIN_ALIGN:
        c = dod_segfit_class_index(size)
        return 1 if c == 0 and alignment > 8 else c
    size = (size + alignment - 1) & ~(alignment - 1)
    c = dod_segfit_class_index(size)
    while c < DOD_SEGFIT_CLASSES and (dod_segfit_class_size(c) & (alignment - 1)):
        c += 1
    return c


cdef inline void* dod_segfit_allocate(dod_segfit* s, size_t size, size_t alignment) noexcept nogil:
    """`size` bytes aligned to `alignment` (a power of two), or NULL."""
    cdef size_t c = dod_segfit_class_for(size, alignment)
    if c < DOD_SEGFIT_CLASSES:
        return dod_lfpool_acquire(&s.classes[c])
    return dod_segfit_allocate_large(s, size, alignment)


cdef inline void* dod_segfit_try_allocate(dod_segfit* s, size_t size, size_t alignment) noexcept nogil:
    """As allocate, but only from a block already free in its class: never grows, never locks
    (NULL for large requests, which always need the resource)."""
    cdef size_t c = dod_segfit_class_for(size, alignment)
    if c < DOD_SEGFIT_CLASSES:
        return dod_lfpool_try_acquire(&s.classes[c])
    return NULL


cdef inline void dod_segfit_free(dod_segfit* s, void* ptr, size_t size, size_t alignment) noexcept nogil:
    """Free `ptr`, allocated with this (size, alignment). NULL is ignored."""
    cdef size_t c
    if ptr == NULL:
        return
    c = dod_segfit_class_for(size, alignment)
    if c < DOD_SEGFIT_CLASSES:
        dod_segfit_check_class(s, c, ptr)
        dod_lfpool_release(&s.classes[c], ptr)
    else:
        dod_segfit_free_large(s, ptr, size, alignment)


cdef inline void dod_segfit_free_chain(dod_segfit* s, void* first, void* last, size_t size,
                                       size_t alignment) noexcept nogil:
    """Free a caller-linked chain first..last (dod_lfpool_link) of blocks that were all
    allocated with this (size, alignment), with one atomic. Not for large blocks."""
    cdef size_t c = dod_segfit_class_for(size, alignment)
    if c < DOD_SEGFIT_CLASSES and first != NULL:
        dod_lfpool_release_chain(&s.classes[c], first, last)


cdef class SegFit:
    cdef dod_segfit engine           # the engine state; run the inline functions on &owner.engine
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef dod_slots _handles           # Python face: handles -> blocks (dod._lease, mapped)
    cdef size_t _allocations          # allocations through the Python face
    cdef size_t _bytes_peak           # peak of the bytes held through handles
    cdef size_t _bytes_live           # bytes held through handles (as asked for)
    cdef int _ready                   # class locks initialised

    cdef object _allocate(self, object nbytes, object align, bint grow)
    cdef size_t _cached_blocks(self) noexcept nogil


# ================================================================ thread caches
#
# A SegFit thread cache is one lfpool bin per size class up to 32 KiB (see
# "thread caches" at the end of lfpool.pxd: the bin, its refill and spill,
# one CAS per exchange with the class's shared stack, and what a free of a
# block from another thread's cache costs). Allocation and free of a cached
# class touch only the calling thread's bin: no atomic. Larger classes and
# large blocks go to the shared allocator directly (their cost is dominated
# by touching the memory).
#
# Slack: bin k keeps at most clamp(class_bytes / size_k, 1, 64) blocks
# (class_bytes = 16 KiB by default), so one cache holds at most about
# 1.1 MiB however many classes it uses (dod.thread_cache.SegFitCache.max_slack
# gives the exact bound); the owner's stats() report what caches hold
# (cache_slack, cached_blocks).
#
# Cython contract: as for dod_lfpool_cache (one thread at a time between
# flushes; dod_segfit_cache_flush before it goes out of scope and before the
# owner dies; debug builds check the thread, the class of every free, double
# frees into a bin, and that every cache flushed when the owner dies).

cdef enum:
    DOD_SEGFIT_CACHED = 73               # classes 0..72 (up to 32 KiB) have a bin
    DOD_SEGFIT_CACHE_BYTES = 16384       # default slack budget per class

ctypedef struct dod_segfit_cache:
    dod_segfit* segfit                   # NULL (ZII): every allocation returns NULL
    dod_lfpool_bin bins[73]              # one per cached class (DOD_SEGFIT_CACHED)
    uintptr_t thread                     # debug builds: the thread using it since its last flush
    size_t refills                       # chains taken from a class (one CAS each) or growths
    size_t spills                        # chains given back from a full bin (one CAS each)


cdef void dod_segfit_cache_init(dod_segfit_cache* c, dod_segfit* s, size_t class_bytes) noexcept nogil
cdef void* dod_segfit_cache_refill(dod_segfit_cache* c, size_t k) noexcept nogil
cdef void dod_segfit_cache_spill(dod_segfit_cache* c, size_t k) noexcept nogil
cdef void dod_segfit_cache_flush(dod_segfit_cache* c) noexcept nogil
cdef void* dod_segfit_cache_allocate_direct(dod_segfit_cache* c, size_t size, size_t alignment) noexcept nogil
cdef void dod_segfit_cache_free_direct(dod_segfit_cache* c, void* ptr, size_t size, size_t alignment) noexcept nogil
cdef void dod_segfit_cache_debug(dod_segfit_cache* c, size_t k, void* ptr) noexcept nogil


cdef inline void* dod_segfit_cache_allocate(dod_segfit_cache* c, size_t size, size_t alignment) noexcept nogil:
    """As dod_segfit_allocate, from the calling thread's cache: no atomic unless the
    class's bin is empty (one CAS refills it) or the class is not cached."""
    cdef size_t k = dod_segfit_class_for(size, alignment)
    cdef void* b
    if k < DOD_SEGFIT_CACHED:
        if DOD_DEBUG:
            dod_segfit_cache_debug(c, k, NULL)
        b = c.bins[k].head
        if b != NULL:
            c.bins[k].head = dod_atomic_load_ptr(<void**>b)
            c.bins[k].count -= 1
            if DOD_DEBUG:
                dod_lfpool_bin_publish(&c.segfit.classes[k], &c.bins[k])
            return b
        return dod_segfit_cache_refill(c, k)
    return dod_segfit_cache_allocate_direct(c, size, alignment)


cdef inline void dod_segfit_cache_free(dod_segfit_cache* c, void* ptr, size_t size, size_t alignment) noexcept nogil:
    """Free `ptr` (allocated with this size and alignment, by any thread, cached or not)
    into the cache: no atomic unless its bin is full (one CAS spills the older half)."""
    cdef size_t k
    if ptr == NULL:
        return
    k = dod_segfit_class_for(size, alignment)
    if k < DOD_SEGFIT_CACHED:
        if DOD_DEBUG:
            dod_segfit_cache_debug(c, k, ptr)
        if c.bins[k].count >= c.bins[k].limit:
            dod_segfit_cache_spill(c, k)
        dod_lfpool_bin_push(&c.bins[k], ptr)
        if DOD_DEBUG:
            dod_lfpool_bin_publish(&c.segfit.classes[k], &c.bins[k])
    else:
        dod_segfit_cache_free_direct(c, ptr, size, alignment)
