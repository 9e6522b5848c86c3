# dod/freelist.pxd: the free-list allocator's engine (C struct + inline nogil
# functions) and its owner class. cimport this to run the engine inlined:
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
#     from dod.freelist cimport FreeList, dod_freelist_allocate, dod_freelist_free
#     cdef FreeList owner = FreeList(1 << 20)
#     with nogil:
#         p = dod_freelist_allocate(&owner.engine, 100, 16)
#         dod_freelist_free(&owner.engine, p)
#
# Block layout (boundary tags)
#   Every block starts with a 16-byte header {prev_size, size_flags}; the
#   payload follows it. Blocks are 16-byte aligned and sized in multiples of
#   16 (header included), at least 32 (room for the two free-list links).
#   not run: the header's two fields, a layout
#       size_flags = size | USED (1) | PREV_USED (2)
#       prev_size  = size of the block before, kept valid while that block is
#                    free, so a free can find its left neighbour in O(1).
#   The region ends with a 16-byte sentinel header (size 0, USED): the walk
#   stops there and no block coalesces past it. The first block has
#   PREV_USED set, so none coalesces before the start.
#
# Invariants
#   * The blocks tile the region exactly: base + sum of sizes = sentinel.
#   * Every free block is on the doubly linked free list (unordered: a freed
#     block goes to the front) and no two free blocks are adjacent
#     (coalescing on every free, both sides, in O(1)).
#   * PREV_USED of a block equals USED of the block before it.
#   * used = sum of the sizes of used blocks (headers and padding included).
#   * All bytes zero (ZII) is a valid, empty allocator: every request fails.
#
# Strategies: first fit takes the first free block (from the front of the
# list) that fits; best fit walks the whole list for the smallest that fits
# (stopping early on an exact fit). Both are O(free blocks) per allocation;
# frees are O(1).
#
# Overhead: 16 header bytes per allocation, plus rounding of the payload to
# 16 bytes, plus alignment padding for alignments above 16 (a leading gap
# becomes a free block when it is 32 bytes or more, else it is kept with the
# block). `available` is the sum of free bytes; `largest_free()` is the
# biggest single request that can succeed (about that minus the header):
# fragmentation is the gap between the two.
#
# Engine contract (checks the caller owns): alignment is a power of two; a
# pointer passed to free came from alloc on this allocator and is live
# (debug builds abort with a message on a pointer outside the region or a
# block that is not in use).
# Failure is a NULL return, counted in `failed`; it changes nothing else.
from libc.stdint cimport uintptr_t
from dod._core cimport DOD_DEBUG, dod_add_overflow, dod_pad_for, dod_poison, dod_debug_fail
from dod.resource cimport dod_resource, Resource


cdef enum:
    DOD_FL_HEADER = 16
    DOD_FL_MIN_BLOCK = 32
    DOD_FL_USED = 1
    DOD_FL_PREV_USED = 2
    DOD_FL_FIRST_FIT = 0
    DOD_FL_BEST_FIT = 1


ctypedef struct dod_fl_block:
    size_t prev_size          # size of the previous block (valid while it is free)
    size_t size_flags         # size | USED | PREV_USED
    dod_fl_block* next        # free blocks only: the free-list links (in the payload)
    dod_fl_block* prev


ctypedef struct dod_freelist:
    char* base                # first block (16-byte aligned)
    size_t capacity           # bytes of the region, sentinel included
    dod_fl_block* head        # first free block
    int strategy              # DOD_FL_FIRST_FIT or DOD_FL_BEST_FIT
    size_t used               # bytes in used blocks, headers and padding included
    size_t peak               # highest `used`
    size_t live               # live allocations
    size_t free_blocks        # blocks on the free list
    size_t allocations        # successful allocs since creation
    size_t failed             # allocs that returned NULL


cdef inline size_t dod_fl_size(const dod_fl_block* b) noexcept nogil:
    return b.size_flags & ~(<size_t>3)


cdef inline dod_fl_block* dod_fl_at(void* p, size_t offset) noexcept nogil:
    return <dod_fl_block*>(<char*>p + offset)


cdef inline void dod_fl_unlink(dod_freelist* fl, dod_fl_block* b) noexcept nogil:
    if b.prev != NULL:
        b.prev.next = b.next
    else:
        fl.head = b.next
    if b.next != NULL:
        b.next.prev = b.prev
    fl.free_blocks -= 1


cdef inline void dod_fl_push(dod_freelist* fl, dod_fl_block* b) noexcept nogil:
    b.prev = NULL
    b.next = fl.head
    if fl.head != NULL:
        fl.head.prev = b
    fl.head = b
    fl.free_blocks += 1


cdef inline void dod_fl_make_free(dod_freelist* fl, dod_fl_block* b, size_t size, size_t prev_used) noexcept nogil:
    """Mark [b, b+size) one free block, tell its right neighbour, push it."""
    cdef dod_fl_block* nxt = dod_fl_at(b, size)
    b.size_flags = size | prev_used
    nxt.prev_size = size
    nxt.size_flags &= ~(<size_t>DOD_FL_PREV_USED)
    dod_fl_push(fl, b)


cdef inline size_t dod_fl_lead(dod_fl_block* b, size_t alignment) noexcept nogil:
    """Bytes to skip at the front of free block b so the payload is aligned:
    0, or at least DOD_FL_MIN_BLOCK (the gap becomes a free block)."""
    cdef uintptr_t payload = <uintptr_t>b + DOD_FL_HEADER
    cdef size_t lead = dod_pad_for(payload, alignment)
    if lead != 0 and lead < DOD_FL_MIN_BLOCK:
        lead = DOD_FL_MIN_BLOCK + dod_pad_for(payload + DOD_FL_MIN_BLOCK, alignment)
    return lead


cdef inline size_t dod_fl_block_size(size_t size) noexcept nogil:
    """Block bytes for a payload of `size` (0 when it overflows)."""
    cdef size_t need
    if dod_add_overflow(size, DOD_FL_HEADER + 15, &need):
        return 0
    need &= ~(<size_t>15)
    return need if need >= DOD_FL_MIN_BLOCK else DOD_FL_MIN_BLOCK


cdef inline void* dod_freelist_take(dod_freelist* fl, dod_fl_block* b, size_t lead, size_t need) noexcept nogil:
    """Carve `need` bytes at offset `lead` out of free block b (it fits)."""
    cdef size_t size = dod_fl_size(b)
    cdef size_t prev_used = b.size_flags & DOD_FL_PREV_USED
    cdef dod_fl_block* nxt
    dod_fl_unlink(fl, b)
    if lead:
        dod_fl_make_free(fl, b, lead, prev_used)
        b = dod_fl_at(b, lead)
        size -= lead
        prev_used = 0
    if size - need >= DOD_FL_MIN_BLOCK:
        dod_fl_make_free(fl, dod_fl_at(b, need), size - need, DOD_FL_PREV_USED)
        size = need
    else:
        nxt = dod_fl_at(b, size)
        nxt.size_flags |= DOD_FL_PREV_USED
    b.size_flags = size | DOD_FL_USED | prev_used
    fl.used += size
    if fl.used > fl.peak:
        fl.peak = fl.used
    fl.live += 1
    fl.allocations += 1
    return <char*>b + DOD_FL_HEADER


cdef inline void* dod_freelist_allocate(dod_freelist* fl, size_t size, size_t alignment) noexcept nogil:
    """`size` bytes aligned to `alignment` (a power of two), or NULL. Size 0 gets a minimal block."""
    cdef size_t need = dod_fl_block_size(size)
    cdef dod_fl_block* b = fl.head
    cdef dod_fl_block* best = NULL
    cdef size_t best_size = <size_t>-1, best_lead = 0, lead, bsize
    if alignment < 16:
        alignment = 16
    if need == 0:
        fl.failed += 1
        return NULL
    while b != NULL:
        bsize = dod_fl_size(b)
        if bsize >= need:
            lead = 0 if alignment == 16 else dod_fl_lead(b, alignment)
            if bsize - need >= lead:
                if fl.strategy == DOD_FL_FIRST_FIT or bsize == need + lead:
                    return dod_freelist_take(fl, b, lead, need)
                if bsize < best_size:
                    best = b
                    best_size = bsize
                    best_lead = lead
        b = b.next
    if best != NULL:
        return dod_freelist_take(fl, best, best_lead, need)
    fl.failed += 1
    return NULL


cdef inline void dod_freelist_free(dod_freelist* fl, void* p) noexcept nogil:
    """Give back `p` (live, from this allocator); coalesces with free neighbours. O(1)."""
    cdef dod_fl_block* b = <dod_fl_block*>(<char*>p - DOD_FL_HEADER)
    cdef size_t size = dod_fl_size(b)
    cdef size_t prev_used = b.size_flags & DOD_FL_PREV_USED
    cdef dod_fl_block* nxt = dod_fl_at(b, size)
    cdef dod_fl_block* left
    if DOD_DEBUG:
        if <char*>b < fl.base or <char*>b >= fl.base + fl.capacity - DOD_FL_HEADER or (<uintptr_t>p & 15) != 0:
            dod_debug_fail("free-list free of a pointer outside this allocator", p)
        if (b.size_flags & DOD_FL_USED) == 0:
            dod_debug_fail("free-list double free", p)
    fl.used -= size
    fl.live -= 1
    dod_poison(p, size - DOD_FL_HEADER)
    if (nxt.size_flags & DOD_FL_USED) == 0:
        dod_fl_unlink(fl, nxt)
        size += dod_fl_size(nxt)
    if not prev_used:
        left = <dod_fl_block*>(<char*>b - b.prev_size)
        dod_fl_unlink(fl, left)
        size += dod_fl_size(left)
        prev_used = left.size_flags & DOD_FL_PREV_USED
        b = left
    dod_fl_make_free(fl, b, size, prev_used)


cdef class FreeList:
    cdef dod_freelist engine              # the engine state; run the inline functions on &owner.engine
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef const dod_resource* _source  # where the region came from
    cdef void* _region                # what _source returned
    cdef size_t _region_size
    cdef Py_ssize_t _pending          # allocations freed by the user, still viewed by arrays

    cdef object _carve(self, object shape, object dtype, object align, bint zero)
    cdef object _allocation_of(self, object arr)
