# dod/lfpool.pxd: the lock-free pool's engine (C struct + inline nogil
# functions) and its owner class. cimport it to acquire and release blocks
# from any number of threads without the GIL:
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
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
from libc.stdint cimport uint64_t, uint32_t, uintptr_t
from libc.string cimport memset
from libc.stdio cimport fprintf, stderr
from libc.stdlib cimport abort

from dod._core cimport DOD_DEBUG, dod_poison
from dod.atomics cimport (dod_tagged_ptr, dod_tagged_load, dod_tagged_cas, dod_mutex,
                          dod_atomic_load_ptr, dod_atomic_store_ptr, dod_atomic_load_speculative_ptr,
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
    uint64_t cached           # blocks held by thread caches, as they last published (see the end)
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
        new.ptr = dod_atomic_load_speculative_ptr(<void**>old.ptr)
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


# ================================================================ thread caches
#
# A thread cache is a private LIFO chain of free blocks (a "bin") that ONE
# thread allocates from and frees into with plain loads and stores: no
# atomic read-modify-write on the fast path. It exchanges whole chains with
# the shared stack, one CAS per exchange:
#   * refill (the bin is empty): dod_lfpool_take pops up to limit/2 blocks in
#     one CAS; only when the shared stack is empty does it grow the pool
#     (under the lock, as dod_lfpool_acquire does);
#   * spill (a free finds the bin full, count == limit): the older
#     limit - limit/2 blocks go back with one dod_lfpool_release_chain;
#   * flush: the whole bin goes back with one dod_lfpool_release_chain.
#
# Invariants
#   * bin.head..bin.tail is a NULL-terminated chain of bin.count free blocks
#     linked through their first word; tail is meaningful only when count > 0.
#   * count <= limit: the slack (blocks one cache keeps from other threads) is
#     bounded by limit blocks per bin.
#   * published is the count this bin last added to pool.cached (at every
#     exchange; at every operation in debug builds), so pool.cached is the
#     blocks held by all caches as of their last exchange and is exact once
#     they have flushed.
#
# Frees that cross threads: a block another thread's cache handed out may be
# freed into this one (all blocks of a pool are alike). It costs what a local
# free costs (no atomic), plus the transfer of the block's cache line to this
# core when its link word is written; a thread that only frees spills one
# chain (one CAS) per limit - limit/2 frees, and a thread that only
# allocates refills one chain (one CAS) per limit/2 allocations.
#
# Cython contract (checks the caller owns): a cache is used by one thread at
# a time between flushes; the caller flushes it (dod_lfpool_cache_flush)
# before it goes out of scope and before the owner dies, else its blocks
# stay out of the shared stack until the owner is destroyed. Debug builds
# check: the thread (a second thread using a cache before a flush aborts),
# ownership and double free into the cache, and at the owner's destruction
# that every cache has flushed. From Python use LockFreePool.thread_cache()
# (dod.thread_cache), which checks all of this and flushes in its dealloc.

cdef enum:
    DOD_LFPOOL_CACHE_BYTES = 16384     # default slack budget of a bin, in bytes...
    DOD_LFPOOL_CACHE_MAX = 64          # ...and in blocks (the smaller wins; at least 1)

ctypedef struct dod_lfpool_bin:
    void* head                # most recently freed block (NULL: empty)
    void* tail                # oldest block (when count > 0)
    uint32_t count            # blocks in the chain
    uint32_t limit            # the slack bound (0: a ZII bin that holds nothing)
    uint32_t published        # count as last added to the pool's `cached`
    uint32_t _pad

ctypedef struct dod_lfpool_cache:
    dod_lfpool* pool          # NULL (ZII): every acquire returns NULL
    dod_lfpool_bin bin
    uintptr_t thread          # debug builds: the thread using it since its last flush (0: none)
    size_t refills            # chains taken from the shared stack (one CAS each) or growths
    size_t spills             # chains given back because the bin was full (one CAS each)


cdef uint32_t dod_lfpool_bin_limit(size_t block_size, size_t budget) noexcept nogil
cdef size_t dod_lfpool_take(dod_lfpool* p, size_t n, void** first, void** last) noexcept nogil
cdef void dod_lfpool_bin_publish(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil
cdef void* dod_lfpool_bin_refill(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil
cdef void dod_lfpool_bin_spill(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil
cdef void dod_lfpool_bin_flush(dod_lfpool* p, dod_lfpool_bin* b) noexcept nogil
cdef void dod_lfpool_bin_debug(dod_lfpool* p, dod_lfpool_bin* b, uintptr_t* thread,
                               void* block) noexcept nogil
cdef void* dod_lfpool_cache_refill(dod_lfpool_cache* c) noexcept nogil
cdef void dod_lfpool_cache_spill(dod_lfpool_cache* c) noexcept nogil
cdef void dod_lfpool_cache_flush(dod_lfpool_cache* c) noexcept nogil


cdef inline void* dod_lfpool_bin_pop(dod_lfpool_bin* b) noexcept nogil:
    """The most recently freed block of the bin, or NULL when it is empty."""
    cdef void* blk = b.head
    if blk != NULL:
        b.head = dod_atomic_load_ptr(<void**>blk)
        b.count -= 1
    return blk


cdef inline void dod_lfpool_bin_push(dod_lfpool_bin* b, void* blk) noexcept nogil:
    """Put a block on the bin (the caller keeps count <= limit)."""
    # An atomic store (a plain mov on x86-64): a thread whose dod_lfpool_take
    # read a stale head may still read this word; it discards what it read.
    dod_atomic_store_ptr(<void**>blk, b.head)
    if b.count == 0:
        b.tail = blk
    b.head = blk
    b.count += 1


cdef inline void dod_lfpool_cache_init(dod_lfpool_cache* c, dod_lfpool* p, size_t limit) noexcept nogil:
    """Set up an unused (or flushed) cache over `p`, keeping at most `limit` blocks
    (0: DOD_LFPOOL_CACHE_BYTES worth, at most DOD_LFPOOL_CACHE_MAX, at least 1)."""
    memset(c, 0, sizeof(dod_lfpool_cache))
    c.pool = p
    if p == NULL:
        return
    if limit:
        c.bin.limit = <uint32_t>(limit if limit < 0x7fffffff else 0x7fffffff)
    else:
        c.bin.limit = dod_lfpool_bin_limit(p.block_size, DOD_LFPOOL_CACHE_BYTES)


cdef inline void* dod_lfpool_cache_acquire(dod_lfpool_cache* c) noexcept nogil:
    """A block from the calling thread's cache: no atomic unless the bin is empty
    (then one CAS refills it, or the pool grows); NULL when the pool cannot grow."""
    cdef void* b
    if DOD_DEBUG:
        dod_lfpool_bin_debug(c.pool, &c.bin, &c.thread, NULL)
    b = c.bin.head
    if b != NULL:
        c.bin.head = dod_atomic_load_ptr(<void**>b)
        c.bin.count -= 1
        if DOD_DEBUG:
            dod_lfpool_bin_publish(c.pool, &c.bin)
        return b
    return dod_lfpool_cache_refill(c)


cdef inline void dod_lfpool_cache_release(dod_lfpool_cache* c, void* block) noexcept nogil:
    """Free a block of this pool (from any thread's cache or acquire) into the cache:
    no atomic unless the bin is full (then one CAS spills its older half)."""
    if DOD_DEBUG:
        dod_lfpool_bin_debug(c.pool, &c.bin, &c.thread, block)
    if c.bin.count >= c.bin.limit:
        dod_lfpool_cache_spill(c)
    dod_lfpool_bin_push(&c.bin, block)
    if DOD_DEBUG:
        dod_lfpool_bin_publish(c.pool, &c.bin)
