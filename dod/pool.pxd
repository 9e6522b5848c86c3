# dod/pool.pxd: the fixed-size pool's engine (C struct + inline nogil
# functions) and its owner class. cimport this to run the engine inlined:
#
#     from dod.pool cimport Pool, dod_pool_acquire, dod_pool_release
#     cdef Pool owner = Pool(100_000, block_size=64)
#     with nogil:
#         p = dod_pool_acquire(&owner.pool)
#         dod_pool_release(&owner.pool, p)
#
# Invariants
#   * Blocks are base + i * stride for i in [0, count); stride is a multiple
#     of the alignment and at least sizeof(void*).
#   * Blocks [touched, count) have never been handed out; they are not on the
#     free list (creation costs O(1), whatever the count).
#   * Every free block among [0, touched) is on the intrusive free list: its
#     first pointer-sized word links to the next free block (NULL ends it).
#     A live block carries no bookkeeping at all.
#   * in_use + (free blocks on the list) == touched.
#   * Free blocks are taken before untouched ones, so `touched` is the
#     high-water mark of in_use since the last reset: the peak costs nothing
#     to keep (a reset folds it into `peak`).
#   * All bytes zero (ZII) is a valid, empty pool: every acquire fails (NULL).
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
from dod._atomic cimport dod_mutex, dod_mutex_lock, dod_mutex_unlock
from dod.resource cimport dod_resource, Resource
from dod._ndarray cimport dod_array_request
from libc.stdint cimport uint32_t


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
    size_t peak               # high-water in_use before the last reset (read max(peak, touched))


cdef inline void* dod_pool_acquire(dod_pool* p) noexcept nogil:
    """One block (stride bytes, aligned), or NULL when the pool is exhausted. O(1)."""
    cdef void* b = p.free
    if b != NULL:
        p.free = (<void**>b)[0]
    elif p.touched < p.count:
        b = p.base + p.touched * p.stride
        p.touched += 1
    else:
        p.failed += 1
        return NULL
    p.in_use += 1
    p.allocations += 1
    return b


cdef inline void dod_pool_debug_check(const dod_pool* p, void* b) noexcept nogil:
    """Debug builds: abort on a foreign pointer or a double release (walks the free list)."""
    cdef const char* c = <const char*>b
    cdef void* f = p.free
    if c < p.base or c >= p.base + p.touched * p.stride or <size_t>(c - p.base) % p.stride != 0:
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
    """Release every block at once, O(1): the pool is as new (counters kept).
    Nothing may use any block afterwards."""
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
    """Slot index of block `b` (which must be a block of this pool)."""
    return <size_t>(<const char*>b - p.base) // p.stride


cdef class Pool:
    cdef dod_pool pool                # the engine state; run the inline functions on &owner.pool
    cdef dod_mutex mutex              # taken by the *_locked functions and the threadsafe Python face
    cdef readonly bint threadsafe     # the Python face takes `mutex` around every engine call
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef const dod_resource* _source  # where the region came from
    cdef size_t _region_size          # bytes obtained from _source
    cdef size_t _region_align
    cdef uint32_t* _gens              # per slot generation (Python face): odd = live
    cdef uint32_t* _pins              # per slot count of live array leases (Python face)
    cdef object _dtype                # block dtype
    cdef tuple _shape                 # per-block shape
    cdef dod_array_request _req       # one block as an array request
    cdef size_t _block_bytes          # bytes of one block's array (<= stride)
    cdef readonly size_t alignment
    cdef Py_ssize_t _exports          # live Resources handed out by resource()
    cdef Py_ssize_t _pending          # released blocks still pinned by arrays
    cdef size_t _repairs              # free-list rebuilds after writes into free blocks
    cdef bint _mutex_ready
    cdef void* _rctx[2]               # (&pool, &mutex): the context of resource()
    cdef uint32_t _salt               # per-pool generation offset: foreign handles rarely match

    cdef int _lock(self) except -1
    cdef void _unlock(self) noexcept
    cdef Py_ssize_t _checked_pop(self) noexcept
    cdef bint _rebuild(self) noexcept
    cdef Py_ssize_t _index_of_handle(self, object handle) except -1
    cdef void _unpin(self, size_t index) noexcept
    cdef object _view(self, size_t index)
    cdef object _handle(self, size_t i)
