# dod/atomic_arena.pxd: the one-word atomic arena's engine (C struct + inline
# nogil functions), its per-thread cache, and the owner class. cimport this to
# allocate from many threads without the GIL:
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
#     from dod.atomic_arena cimport (AtomicArena, dod_aa_allocate,
#                                    dod_aa_free)
#     cdef AtomicArena owner = AtomicArena()
#     with nogil:                           # from any number of threads
#         p = dod_aa_allocate(&owner.engine, 64, 16)
#         ...
#         dod_aa_free(&owner.engine, p, 64, 16)
#
# The word
#   All shared state of the fast path is one 64-bit word:
#   not run: the word's three bit fields, a layout
#       bits 57..63  block index (7 bits: a slot of blocks[128])
#       bits 55..56  size factor f (2 bits: the block spans block_size << f bytes)
#       bits  0..54  position in the block's usable bytes (55 bits)
#   An allocation is ONE fetch-add of its reservation `need` on that word (no
#   compare-and-swap, no retry loop). The old value it returns says which
#   block, how big the block is, and where the reservation starts; the request
#   fitted when position + need <= capacity(f). Reservations are contiguous,
#   so the first add that does not fit starts exactly where the last fitting
#   one ended: that thread (the "closer") knows how many bytes the block handed
#   out and settles the block's counter. Every other failing add only goes to
#   the slow path, which installs the next block under `lock` with one store.
#
# The overshoot envelope
#   After a block is exhausted, every thread that enters before the new word
#   is stored adds its reservation once more and then waits on the lock. The
#   position therefore climbs past the capacity by at most
#   entrants * max_add, where max_add = block_size << 3 (the largest
#   reservation). The constructor requires
#   not run: a formula, the check the constructor makes
#       CLOSED + (max_concurrent_entrants + 1) * max_add <= 2**55
#   (CLOSED = 2**54 is the position an arena starts at before its first
#   block), so up to max_concurrent_entrants threads (a power of two, default
#   1024) can all overshoot at once without carrying into the size factor or
#   the block index. Beyond it (more threads than that allocating the largest
#   size between one exhaustion and the next install) the carry corrupts the
#   fields above: a thread may then read a wrong block or size and hand out
#   memory twice. Nothing detects that; size max_concurrent_entrants to the
#   number of threads that can ever allocate from one arena at the same time.
#
# Invariants
#   * blocks[i] (when not NULL) is the header at the start of a block of
#     block_size << factor bytes aligned to block_align = block_size << 3, so
#     the header of any pointer inside is `ptr & ~(block_align - 1)` (frees are
#     O(1)); usable bytes start 64 bytes after the header.
#   * A reservation is need(size, alignment) = round_up(max(size, 1), 16) plus
#     (alignment - 16) when alignment > 16; positions stay multiples of 16.
#     The same formula is applied on free, so free with the size and
#     alignment the allocation was made with.
#   * block.live starts at BIAS (2**62); every free subtracts its reservation;
#     the closer adds (handed_out - BIAS) once. It reaches exactly zero once,
#     when the block is closed and every reservation has been freed; whoever
#     brings it there (a free or the closer) recycles the block (spare list)
#     or, with evict, returns it to the resource.
#   * All bytes zero (ZII) is a valid arena that refuses every request
#     (max_need = 0).
#
# The fine print: stranded tails
#   A reservation that does not fit is not split: the bytes between the
#   closer's position and the block's end are never handed out (on average
#   half a typical request per block; up to max_add - 16 for a huge request).
#   A thread cache strands the unused end of its chunk when it refills; that
#   tail is counted as freed at once so the block can still drain.
#
# Engine contract (checks the caller owns on these fast paths): alignment is a
# power of two <= 4096; a pointer passed to free came from this arena and is
# freed once, with the size and alignment it was allocated with (or the size
# a shrink gave it); nothing uses memory after freeing it (blocks are
# recycled, or unmapped with evict).
from libc.stdint cimport uint64_t, uint32_t, uintptr_t
from libc.string cimport memset

from dod.atomics cimport (dod_mutex, dod_atomic_fetch_add_u64, dod_atomic_fetch_sub_u64,
                          dod_atomic_load_ptr)
from dod.resource cimport dod_resource, Resource
# The engine (dod/_atomic_arena_engine.pxd: the constants, the structs and
# the inline functions that call no slow path): declared there, cimported
# from here.
from dod._atomic_arena_engine cimport (DOD_AA_POS_BITS, DOD_AA_FACTOR_SHIFT, DOD_AA_INDEX_SHIFT,
                                      DOD_AA_MAX_BLOCKS, DOD_AA_HEADER, DOD_AA_QUANTUM, DOD_AA_MAX_ALIGN,
                                      DOD_AA_POS_MASK, DOD_AA_CLOSED, DOD_AA_BIAS, dod_aa_block, dod_aa,
                                      dod_aa_need, dod_aa_block_of)


# Slow paths: named functions in atomic_arena.pyx.
cdef void* dod_aa_allocate_slow(dod_aa* a, uint64_t old, size_t need,
                                        size_t alignment) noexcept nogil
cdef void dod_aa_drained(dod_aa* a, dod_aa_block* b) noexcept nogil
cdef void* dod_aa_refuse(dod_aa* a) noexcept nogil
cdef bint dod_aa_owns(dod_aa* a, const void* p) noexcept nogil
cdef void* dod_aa_reallocate(dod_aa* a, void* p, size_t old_size, size_t new_size,
                                    size_t alignment) noexcept nogil


cdef inline void* dod_aa_allocate(dod_aa* a, size_t size, size_t alignment) noexcept nogil:
    """size bytes aligned to `alignment` (power of two <= 4096), or NULL. Thread-safe."""
    cdef size_t need = dod_aa_need(size, alignment)
    cdef uint64_t old, pos
    cdef size_t cap
    cdef uintptr_t p
    if need > a.max_need:
        return dod_aa_refuse(a)
    # The one atomic. Acquire (same lock xadd as relaxed on x86-64): a thread
    # that reads a freshly installed word must also see blocks[index].
    old = dod_atomic_fetch_add_u64(&a.word, need)
    pos = old & DOD_AA_POS_MASK
    cap = (a.block_size << ((old >> DOD_AA_FACTOR_SHIFT) & 3)) - DOD_AA_HEADER
    if pos + need <= cap:
        p = <uintptr_t>a.blocks[old >> DOD_AA_INDEX_SHIFT].base + pos
        return <void*>((p + alignment - 1) & ~(<uintptr_t>alignment - 1))
    return dod_aa_allocate_slow(a, old, need, alignment)


cdef inline void dod_aa_free(dod_aa* a, void* p, size_t size, size_t alignment) noexcept nogil:
    """Give back p (size and alignment as allocated). One atomic; thread-safe; NULL ignored."""
    cdef dod_aa_block* b
    cdef size_t need
    if p == NULL:
        return
    b = dod_aa_block_of(a, p)
    need = dod_aa_need(size, alignment)
    if dod_atomic_fetch_sub_u64(&b.live, need) == need:
        dod_aa_drained(a, b)


cdef inline void* dod_aa_shrink(dod_aa* a, void* p, size_t old_size,
                                          size_t new_size, size_t alignment) noexcept nogil:
    """Shrink in place: the same pointer, now owning new_size <= old_size bytes.

    The difference in reservation is freed at once (the bytes are not handed
    out again: a bump arena never moves back). Free later with new_size.
    Returns NULL (and changes nothing) when new_size > old_size.
    """
    cdef size_t d
    cdef dod_aa_block* b
    if new_size > old_size:
        return NULL
    d = dod_aa_need(old_size, alignment) - dod_aa_need(new_size, alignment)
    if d:
        b = dod_aa_block_of(a, p)
        if dod_atomic_fetch_sub_u64(&b.live, d) == d:      # cannot drain: p itself is still live
            dod_aa_drained(a, b)
    return p


# ---------------------------------------------------------------- per-thread cache
#
# A thread cache takes a chunk of the shared word with one fetch-add and then
# bumps inside it with plain (non-atomic) arithmetic; it touches the shared
# word only to refill. Frees through a cache are summed privately while they
# hit the same block and published with one atomic when the block changes or
# at flush. A cache belongs to ONE thread at a time; its counters and pending
# frees are published by dod_aa_cache_flush (a block cannot drain while a
# cache holds pending frees or an open chunk in it).

ctypedef struct dod_aa_cache:
    dod_aa* arena
    char* cursor                  # next byte of the chunk (16-aligned)
    char* end                     # end of the chunk
    dod_aa_block* pending_block   # block that `pending` bytes were freed into
    size_t pending                # freed bytes not yet subtracted from pending_block.live
    size_t chunk                  # bytes per refill (multiple of 16; see dod_aa_cache_init)
    size_t allocations
    size_t refills                # chunks taken from the shared word (one fetch-add each)
    size_t publishes              # pending frees published (one fetch-sub each)
    size_t failed

cdef inline void dod_aa_cache_init(dod_aa_cache* c, dod_aa* a, size_t chunk) noexcept nogil:
    """Set up an (unused or flushed) cache over `a`. Each refill reserves chunk - 64 bytes,
    so that a block's usable bytes (a power of two minus its 64-byte header) hold a whole
    number of chunks when chunk is a power of two: no chunk-sized tail is stranded."""
    memset(c, 0, sizeof(dod_aa_cache))
    c.arena = a
    if chunk > 2 * DOD_AA_HEADER:
        chunk -= DOD_AA_HEADER
    c.chunk = chunk & ~(<size_t>DOD_AA_QUANTUM - 1)


cdef void* dod_aa_cache_refill(dod_aa_cache* c, size_t size, size_t alignment) noexcept nogil
cdef void dod_aa_cache_publish(dod_aa_cache* c) noexcept nogil
cdef void dod_aa_cache_flush(dod_aa_cache* c) noexcept nogil


cdef inline void* dod_aa_cache_allocate(dod_aa_cache* c, size_t size, size_t alignment) noexcept nogil:
    """As dod_aa_allocate, from the calling thread's cache: no atomic unless it refills."""
    cdef size_t need = dod_aa_need(size, alignment)
    cdef uintptr_t p = <uintptr_t>c.cursor
    if need <= <size_t>(c.end - c.cursor):
        c.cursor += need
        c.allocations += 1
        return <void*>((p + alignment - 1) & ~(<uintptr_t>alignment - 1))
    return dod_aa_cache_refill(c, size, alignment)


cdef inline void dod_aa_cache_free(dod_aa_cache* c, void* p, size_t size, size_t alignment) noexcept nogil:
    """Free p (from this arena, any thread's allocation) through the cache: deferred, no atomic
    while consecutive frees hit the same block."""
    cdef dod_aa_block* b
    if p == NULL:
        return
    b = dod_aa_block_of(c.arena, p)
    if b != c.pending_block:
        dod_aa_cache_publish(c)
        c.pending_block = b
    c.pending += dod_aa_need(size, alignment)


cdef class AtomicArena:
    cdef dod_aa engine     # run the inline functions on &owner.engine
    cdef object _upstream_owner      # the resource's owner, held directly (see the .pyx)
    cdef Resource _upstream          # keeps the block source alive
    cdef bint _lock_ready
    cdef size_t _py_allocations      # allocations made through the Python face
    cdef object __weakref__


cdef class ThreadCache:
    cdef dod_aa_cache engine     # run dod_aa_cache_* on &owner.engine, from one thread
    cdef readonly AtomicArena arena
    cdef readonly object thread_id   # the thread allowed to use the Python face

    cdef int _mine(self) except -1
