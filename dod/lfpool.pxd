# dod/lfpool.pxd: the lock-free pool's engine (C struct + inline nogil
# functions) and its owner class. cimport it to acquire and release blocks
# from any number of threads without the GIL:
#
#     from dod.lfpool cimport LockFreePool, dod_lfpool_acquire, dod_lfpool_release
#     cdef LockFreePool owner = LockFreePool(64)
#     with nogil:
#         p = dod_lfpool_acquire(&owner.engine)
#         dod_lfpool_release(&owner.engine, p)
#
# Invariants
#   * Free blocks form a Treiber stack: `head` is (top block, tag), each free
#     block's first word links to the next free block, NULL ends the stack.
#     Every successful compare-and-swap of `head` increments the tag, so a
#     head that was popped, reused and pushed back between one thread's read
#     and its CAS no longer compares equal (ABA). The pair is 16-byte aligned
#     (cmpxchg16b).
#   * Hot path: one 16-byte CAS per acquire and per release when uncontended;
#     a failed CAS retries and adds 1 to `cas_retries` (the only other atomic,
#     and only on a retry).
#   * Growth happens only under `lock`, re-checked after taking it: the grower
#     carves a new chunk privately, links its blocks into a chain, publishes the
#     whole chain with one push and then pops like everyone else (no block is
#     reserved for it). `chunks`, `capacity`, `grows` change only under the lock.
#   * Memory is never returned while the pool lives: a thread may still read
#     the link word of a block it saw at the head a moment ago, so every chunk
#     stays mapped until the owner is deallocated.
#   * Chunks are sized to what the page source hands out (the request is
#     rounded up to whole pages and every block that fits is used); the chunk
#     record sits at the tail, so blocks keep the chunk's base alignment.
#   * All bytes zero (ZII) is a valid pool with no capacity and no upstream:
#     every acquire returns NULL.
#
# Engine contract (checks the caller owns on this fast path): a block passed
# to release came from acquire on this pool and is not released twice; a
# chain passed to release_chain is linked first..last through the first word
# of each block (dod_lfpool_link) and holds no block twice. The owner object outlives every
# thread that runs the engine on it (its __dealloc__ returns all memory). Debug builds check
# ownership on release (O(chunks)) and poison released blocks past the link.
from libc.stdint cimport uint64_t
from libc.stdio cimport fprintf, stderr
from libc.stdlib cimport abort

from dod._core cimport DOD_DEBUG, dod_poison
from dod._atomic cimport (dod_tagged_ptr, dod_tagged_load, dod_tagged_cas, dod_mutex,
                          dod_atomic_load_ptr, dod_atomic_store_ptr,
                          dod_atomic_fetch_add_relaxed_u64)
from dod.resource cimport dod_resource, Resource
from dod._lease cimport dod_slots


cdef struct dod_lfpool_chunk:
    dod_lfpool_chunk* next    # older chunk (NULL for the first)
    char* base                # first block (== the memory obtained from upstream)
    size_t size               # bytes obtained from upstream
    size_t first              # pool-wide number of this chunk's first block
    size_t blocks             # blocks carved from this chunk

ctypedef struct dod_lfpool:
    dod_tagged_ptr head       # top of the free stack and its ABA tag (16-byte aligned)
    uint64_t cas_retries      # failed compare-and-swaps in acquire and release (relaxed)
    uint64_t failed           # acquires that returned NULL (relaxed, failure path only)
    size_t block_size         # stride between blocks: >= 8, a multiple of alignment
    size_t alignment          # of every block (power of two, >= 8)
    size_t chunk_blocks       # blocks asked for in the next chunk (at least)
    size_t max_blocks         # growth stops at this capacity (0: no limit)
    size_t capacity           # blocks carved so far (under the lock)
    size_t grows              # chunks obtained (under the lock)
    size_t peak               # blocks in use, high-water: folded in at growth and when stats are read
    const dod_resource* upstream   # where chunks come from; NULL: cannot grow
    dod_lfpool_chunk* chunks  # newest first (under the lock)
    dod_mutex lock            # taken only to grow


# Slow paths: named functions in lfpool.pyx, never inlined into the fast path.
cdef void* dod_lfpool_acquire_slow(dod_lfpool* p) noexcept nogil
cdef bint dod_lfpool_grow(dod_lfpool* p) noexcept nogil
cdef bint dod_lfpool_owns(const dod_lfpool* p, const void* block) noexcept nogil
cdef size_t dod_lfpool_free_count(dod_lfpool* p) noexcept nogil


cdef inline void dod_lfpool_link(void* block, void* next) noexcept nogil:
    """Make `next` follow `block` in a chain (for dod_lfpool_release_chain)."""
    dod_atomic_store_ptr(<void**>block, next)


cdef inline void* dod_lfpool_try_acquire(dod_lfpool* p) noexcept nogil:
    """A free block, or NULL when none is free right now (never grows, never locks)."""
    cdef dod_tagged_ptr old = dod_tagged_load(&p.head)
    cdef dod_tagged_ptr new
    while old.ptr != NULL:
        # The link may be stale if another thread pops `old.ptr` first; the
        # block stays mapped (nothing is unmapped while the pool lives) and the
        # tag makes the CAS below fail, so a stale link is never installed.
        new.ptr = dod_atomic_load_ptr(<void**>old.ptr)
        new.tag = old.tag + 1
        if dod_tagged_cas(&p.head, &old, new):
            return old.ptr
        dod_atomic_fetch_add_relaxed_u64(&p.cas_retries, 1)
    return NULL


cdef inline void* dod_lfpool_acquire(dod_lfpool* p) noexcept nogil:
    """A free block, growing the pool (under its lock) when none is free; NULL when it cannot grow."""
    cdef void* b = dod_lfpool_try_acquire(p)
    if b != NULL:
        return b
    return dod_lfpool_acquire_slow(p)


cdef inline void dod_lfpool_release_chain(dod_lfpool* p, void* first, void* last) noexcept nogil:
    """Push a caller-linked chain first..last (linked with dod_lfpool_link) with one CAS."""
    cdef dod_tagged_ptr old = dod_tagged_load(&p.head)
    cdef dod_tagged_ptr new
    new.ptr = first
    while True:
        dod_atomic_store_ptr(<void**>last, old.ptr)
        new.tag = old.tag + 1
        if dod_tagged_cas(&p.head, &old, new):
            return
        dod_atomic_fetch_add_relaxed_u64(&p.cas_retries, 1)


cdef inline void dod_lfpool_release(dod_lfpool* p, void* block) noexcept nogil:
    """Return one block (from acquire on this pool, not yet released)."""
    if DOD_DEBUG:
        if not dod_lfpool_owns(p, block):
            fprintf(stderr, b"dod.lfpool: release of %p, which is not a block of pool %p\n", block, p)
            abort()
        dod_poison(<char*>block + sizeof(void*), p.block_size - sizeof(void*))
    dod_lfpool_release_chain(p, block, block)


cdef class LockFreePool:
    cdef dod_lfpool engine             # the engine state; run the inline functions on &owner.engine
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef dod_slots _handles           # Python face: handles -> blocks (dod._lease, mapped)
    cdef size_t _allocations          # acquires through the Python face
    cdef size_t _handle_peak          # most blocks held through handles at once
    cdef bint _ready                  # the mutex is initialised

    cdef size_t _in_use(self) noexcept nogil
    cdef object _acquire(self, bint grow)
