# dod/pool.pxd: the fixed-size pool's engine (C struct + inline nogil
# functions) and its owner class. cimport this to run the engine inlined:
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
#     from dod.pool cimport Pool, dod_pool_acquire, dod_pool_release
#     cdef Pool owner = Pool(100_000, block_size=64)
#     with nogil:
#         p = dod_pool_acquire(&owner.engine)
#         dod_pool_release(&owner.engine, p)
#
# Invariants
#   * A pool is one or more chunks; a fixed pool is exactly one (chunks ==
#     NULL). Slots are numbered across chunks in the order they were
#     obtained: chunk 0 holds slots [0, first_blocks), chunk k >= 1 holds
#     [first_blocks + (k-1) * chunk_blocks, ... + chunk_blocks). The slot
#     index is what a Python handle carries.
#   * base/count/touched describe the current chunk (the one the bump index
#     runs in); prior is the number of slots before it. Blocks of a chunk are
#     base + i * stride for i in [0, count); stride is a multiple of the
#     alignment and at least sizeof(void*). Chunks never move and are given
#     back only when the owner dies.
#   * Chunks before the current one are fully touched; chunks after it are
#     spares (untouched; a reset goes back to chunk 0 and keeps them).
#     Blocks [touched, count) of the current chunk have never been handed
#     out; they are not on the free list (creation costs O(1)).
#   * Every free block among the touched ones is on the intrusive free list:
#     its first pointer-sized word links to the next free block (NULL ends
#     it). A live block carries no bookkeeping at all.
#   * in_use + (free blocks on the list) == prior + touched.
#   * Free blocks are taken before untouched ones, and a growable pool moves
#     to the next chunk only when every block is in use, so prior + touched
#     is the high-water mark of in_use since the last reset: the peak costs
#     nothing to keep (a reset folds it into `peak`).
#   * All bytes zero (ZII) is a valid, empty pool: every acquire fails (NULL).
#
# Growth (opt-in, Pool(..., growable=True)): when the free list is empty and
# the current chunk is fully touched, acquire calls dod_pool_grow, a named
# function in pool.pyx: it moves to a spare chunk or obtains a whole new
# chunk of chunk_blocks blocks from the pool's resource; acquire then bumps
# its first block. A fixed pool (chunks == NULL) gets NULL from it. The
# slow path is handed `p.chunks`, never `p`: were the engine struct's
# address passed to an opaque function, a caller's local copy of it (the
# fast pattern, see the README) would escape, and every block write would
# force the compiler to reload the free-list head (0.7 -> 1.8 ns a pair).
#
# Engine contract (checks the caller owns on this fast path): a pointer
# passed to release came from acquire on this pool and is live (no double
# release, no foreign pointer); nothing uses a block after releasing it;
# nothing writes into a free block (its first word is the free-list link).
# Debug builds (DOD_BUILD=debug|sanitize) abort with a message on a foreign
# pointer or a double release (the latter walks the free list: O(free)).
# Failure is a NULL return, counted in `failed`.
#
# Thread-safety: the plain functions are for one thread at a time. The
# *_locked variants take the owner's mutex around them; every thread that
# touches a shared pool must use the locked variants.
from dod._core cimport DOD_DEBUG, dod_poison, dod_debug_fail
from dod.atomics cimport dod_mutex, dod_mutex_lock, dod_mutex_unlock
from dod.resource cimport dod_resource, Resource
from dod._ndarray cimport dod_array_request
from dod._lease cimport dod_slots
from libc.stdint cimport uint32_t


ctypedef struct dod_pool_chunks:
    # Growth state of a growable pool (the engine reaches it through
    # dod_pool.chunks). With a threadsafe pool, read it under the mutex: a
    # growth may replace the tables.
    char** bases              # bases[k]: first block of chunk k (slot order)
    size_t* order             # chunk numbers sorted by base address (pointer -> slot lookup)
    size_t n                  # chunks obtained, spares included
    size_t cap                # entries allocated in bases and order
    size_t current            # the chunk the bump index runs in
    size_t first_blocks       # blocks in chunk 0 (the owner's first region)
    size_t chunk_blocks       # blocks in every later chunk
    size_t chunk_bytes        # bytes asked of the upstream for a later chunk
    size_t chunk_align        # alignment asked of the upstream
    size_t max_slots          # slots never exceed this (a handle's index is 32 bits)
    const dod_resource* upstream   # where later chunks come from


ctypedef struct dod_pool:
    # Field order matters: in_use and allocations are both bumped on acquire;
    # kept apart (free sits between them) so gcc does not merge the two
    # increments into one 16-byte vector store, which stalls the next
    # release's 8-byte update of in_use (store forwarding): 16 ns a pair
    # instead of 2.
    char* base                # first block
    size_t touched            # blocks [0, touched) were handed out at least once
    size_t stride             # bytes from one block to the next
    size_t count              # blocks in the region
    size_t in_use             # blocks handed out and not released
    void* free                # head of the intrusive free list
    size_t allocations        # successful acquires since creation
    size_t failed             # acquires that returned NULL
    size_t peak               # high-water in_use before the last reset (read max(peak, prior + touched))
    size_t prior              # slots before the current chunk (0 in a fixed pool)
    dod_pool_chunks* chunks   # growth state; NULL: a fixed pool of one chunk


ctypedef struct dod_pool_span:
    char* base                # first block of the chunk to bump from; NULL: none to be had
    size_t count              # its blocks


# Slow paths: named functions in pool.pyx, never inlined into the fast path.
cdef dod_pool_span dod_pool_grow(dod_pool_chunks* c) noexcept nogil
cdef int dod_pool_add_chunk(dod_pool_chunks* c) noexcept nogil
cdef void dod_pool_reset_chunks(dod_pool* p) noexcept nogil
cdef size_t dod_pool_slot_of(const dod_pool* p, const void* b) noexcept nogil


cdef inline void* dod_pool_acquire(dod_pool* p) noexcept nogil:
    """One block (stride bytes, aligned), or NULL when the pool is exhausted
    (and cannot grow). O(1); a growth obtains one chunk from the resource."""
    cdef void* b = p.free
    cdef dod_pool_span nx
    if b != NULL:
        p.free = (<void**>b)[0]
    elif p.touched < p.count:
        b = p.base + p.touched * p.stride
        p.touched += 1
    else:
        nx = dod_pool_grow(p.chunks)         # slow path; a fixed pool gets NULL
        if nx.base == NULL:
            p.failed += 1
            return NULL
        p.prior += p.count
        p.base = nx.base
        p.count = nx.count
        p.touched = 1
        b = nx.base
    p.in_use += 1
    p.allocations += 1
    return b


cdef inline void dod_pool_debug_check(const dod_pool* p, void* b) noexcept nogil:
    """Debug builds: abort on a foreign pointer or a double release (walks the free list)."""
    cdef const char* c = <const char*>b
    cdef void* f = p.free
    if p.chunks != NULL:
        if dod_pool_slot_of(p, b) >= p.prior + p.touched:
            dod_debug_fail("pool release of a pointer that is not a live block of this pool", b)
    elif c < p.base or c >= p.base + p.touched * p.stride or <size_t>(c - p.base) % p.stride != 0:
        dod_debug_fail("pool release of a pointer that is not a live block of this pool", b)
    while f != NULL:
        if f == b:
            dod_debug_fail("pool double release", b)
        f = (<void**>f)[0]


cdef inline void dod_pool_release(dod_pool* p, void* b) noexcept nogil:
    """Give block `b` back (it must be live and from this pool). O(1)."""
    if DOD_DEBUG:
        dod_pool_debug_check(p, b)
    dod_poison(b, p.stride)
    (<void**>b)[0] = p.free
    p.free = b
    p.in_use -= 1


cdef inline void dod_pool_reset(dod_pool* p) noexcept nogil:
    """Release every block at once, O(1): the pool is as new (counters kept;
    a growable pool keeps its chunks). Nothing may use any block afterwards."""
    if p.chunks != NULL:
        dod_pool_reset_chunks(p)
        return
    dod_poison(p.base, p.touched * p.stride)
    if p.touched > p.peak:
        p.peak = p.touched
    p.free = NULL
    p.touched = 0
    p.in_use = 0


cdef inline void* dod_pool_acquire_locked(dod_pool* p, dod_mutex* m) noexcept nogil:
    """dod_pool_acquire under mutex `m` (the owner's `mutex`)."""
    cdef void* b
    dod_mutex_lock(m)
    b = dod_pool_acquire(p)
    dod_mutex_unlock(m)
    return b


cdef inline void dod_pool_release_locked(dod_pool* p, dod_mutex* m, void* b) noexcept nogil:
    """dod_pool_release under mutex `m` (the owner's `mutex`)."""
    dod_mutex_lock(m)
    dod_pool_release(p, b)
    dod_mutex_unlock(m)


cdef inline size_t dod_pool_index(const dod_pool* p, const void* b) noexcept nogil:
    """Slot index of block `b` (which must be a block of this pool). O(1) in a
    fixed pool, O(log chunks) in a growable one."""
    if p.chunks != NULL:
        return dod_pool_slot_of(p, b)
    return <size_t>(<const char*>b - p.base) // p.stride


cdef inline char* dod_pool_block(const dod_pool* p, size_t slot) noexcept nogil:
    """The block of slot index `slot` (which must be below dod_pool_capacity)."""
    cdef const dod_pool_chunks* c = p.chunks
    if c == NULL:
        return p.base + slot * p.stride
    if slot < c.first_blocks:
        return c.bases[0] + slot * p.stride
    slot -= c.first_blocks
    return c.bases[1 + slot // c.chunk_blocks] + (slot % c.chunk_blocks) * p.stride


cdef inline size_t dod_pool_capacity(const dod_pool* p) noexcept nogil:
    """Blocks in all chunks (spares included)."""
    if p.chunks == NULL:
        return p.count
    return p.chunks.first_blocks + (p.chunks.n - 1) * p.chunks.chunk_blocks


cdef inline size_t dod_pool_touched(const dod_pool* p) noexcept nogil:
    """Slots [0, touched) were handed out at least once since the last reset."""
    return p.prior + p.touched


cdef class Pool:
    cdef dod_pool engine               # the engine state; run the inline functions on &owner.engine
    cdef dod_mutex mutex              # taken by the *_locked functions and the threadsafe Python face
    cdef dod_pool_chunks _chunks      # growth state (pool.chunks points here when growable)
    cdef readonly bint threadsafe     # the Python face takes `mutex` around every engine call
    cdef readonly bint growable       # further chunks come from the resource when the pool is full
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef const dod_resource* _source  # where the region (and every further chunk) came from
    cdef char* _region                # the first region (chunk 0)
    cdef size_t _region_size          # bytes obtained from _source
    cdef size_t _region_align
    cdef dod_slots _table             # Python face: per slot generation (odd = live), live pins and
                                      # the free list (dod._lease), never inside a block
    cdef object _dtype                # block dtype
    cdef tuple _shape                 # per-block shape
    cdef dod_array_request _req       # one block as an array request
    cdef size_t _block_bytes          # bytes of one block's array (<= stride)
    cdef readonly size_t alignment
    cdef Py_ssize_t _exports          # live Resources handed out by resource()
    cdef Py_ssize_t _pending          # released blocks still pinned by arrays
    cdef bint _mutex_ready
    cdef void* _rctx[3]               # (&pool, &mutex, &_table): the context of resource()

    cdef int _lock(self) except -1
    cdef bint _cover(self, size_t slots) noexcept
    cdef int _covered(self) except -1
    cdef int _grow_for(self, size_t n) noexcept
    cdef void _unlock(self) noexcept
    cdef Py_ssize_t _pop(self) noexcept
    cdef object _view(self, size_t index)
