# dod/_pool_engine.pxd: the fixed-size pool's engine: the C structs, the
# inline nogil fast paths and the declarations of the slow paths
# (dod/_pool_engine.pyx). dod/pool.pxd re-exports every public name, and its
# header states the invariants, the growth rule and the contract the caller
# owns on these functions: cimport them from dod.pool.
from dod._core cimport DOD_DEBUG, dod_poison, dod_debug_fail
from dod.atomics cimport dod_mutex, dod_mutex_lock, dod_mutex_unlock
from dod.resource cimport dod_resource


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


# Slow paths: named functions in _pool_engine.pyx, never inlined into the fast path.
cdef dod_pool_span dod_pool_grow(dod_pool_chunks* c) noexcept nogil
cdef int dod_pool_add_chunk(dod_pool_chunks* c) noexcept nogil
cdef void dod_pool_reset_chunks(dod_pool* p) noexcept nogil
cdef size_t dod_pool_slot_of(const dod_pool* p, const void* b) noexcept nogil
# Gives back the spare chunks numbered keep and above (Pool.reserve's all or nothing).
cdef void _drop_chunks(dod_pool* p, size_t keep) noexcept nogil


cdef inline size_t _chunk_start(const dod_pool_chunks* c, size_t k) noexcept nogil:
    """First slot of chunk k."""
    return 0 if k == 0 else c.first_blocks + (k - 1) * c.chunk_blocks


cdef inline size_t _chunk_len(const dod_pool_chunks* c, size_t k) noexcept nogil:
    """Blocks in chunk k."""
    return c.first_blocks if k == 0 else c.chunk_blocks


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
