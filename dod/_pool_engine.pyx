"""The pool's engine slow paths: growth, reset of a growable pool, pointer to slot.

The functions that dod/_pool_engine.pxd declares and does not define
inline: the named slow paths of the engine (obtaining a chunk from the
upstream and moving to it, giving back the spares one request added, the
reset of a growable pool, the slot of a pointer). Plain C on the
``dod_pool`` struct and its chunk table, without the GIL; the fast path
(dod_pool_acquire) and the Python face (dod.pool) call them. The contract
is dod/pool.pxd's.
"""
from libc.stdint cimport uintptr_t
from libc.stdint cimport SIZE_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove

from dod.resource cimport dod_resource_allocate, dod_resource_deallocate


# ---------------------------------------------------------------- engine slow paths

cdef inline size_t _chunks_capacity(const dod_pool_chunks* c) noexcept nogil:
    return c.first_blocks + (c.n - 1) * c.chunk_blocks


cdef int dod_pool_add_chunk(dod_pool_chunks* c) noexcept nogil:
    """Obtain one more chunk from the upstream and append it as a spare
    (after every other chunk; the bump index does not move). 0, or -1 when
    the pool is fixed (c == NULL), the slot limit is reached, or memory is
    short; on failure nothing changes (the chunk table may have grown its
    capacity). Call it under the mutex of a shared pool."""
    cdef char** bases
    cdef size_t* order
    cdef size_t cap, lo, hi, mid
    cdef char* mem
    if c == NULL or c.chunk_blocks == 0 or c.n == 0:
        return -1
    if _chunks_capacity(c) + c.chunk_blocks > c.max_slots:   # both below 2**33: no overflow
        return -1
    if c.n == c.cap:
        cap = c.cap * 2 if c.cap else 4
        bases = <char**>malloc(cap * sizeof(char*))
        order = <size_t*>malloc(cap * sizeof(size_t))
        if bases == NULL or order == NULL:
            free(bases)
            free(order)
            return -1
        memcpy(bases, c.bases, c.n * sizeof(char*))
        memcpy(order, c.order, c.n * sizeof(size_t))
        free(c.bases)
        free(c.order)
        c.bases = bases
        c.order = order
        c.cap = cap
    mem = <char*>dod_resource_allocate(c.upstream, c.chunk_bytes, c.chunk_align)
    if mem == NULL:
        return -1
    # Keep `order` sorted by address: pointer -> slot is a binary search.
    lo = 0
    hi = c.n
    while lo < hi:
        mid = (lo + hi) >> 1
        if <uintptr_t>c.bases[c.order[mid]] < <uintptr_t>mem:
            lo = mid + 1
        else:
            hi = mid
    memmove(&c.order[lo + 1], &c.order[lo], (c.n - lo) * sizeof(size_t))
    c.order[lo] = c.n
    c.bases[c.n] = mem
    c.n += 1
    return 0


cdef void _drop_chunks(dod_pool* p, size_t keep) noexcept nogil:
    """Give back the spare chunks numbered keep and above (all untouched,
    after the current one): undoes dod_pool_add_chunk calls of one request."""
    cdef dod_pool_chunks* c = p.chunks
    cdef size_t k, j = 0
    if c == NULL or keep <= c.current:
        return
    for k in range(c.n):
        if c.order[k] < keep:
            c.order[j] = c.order[k]
            j += 1
    for k in range(keep, c.n):
        dod_resource_deallocate(c.upstream, c.bases[k], c.chunk_bytes, c.chunk_align)
    c.n = keep


cdef dod_pool_span dod_pool_grow(dod_pool_chunks* c) noexcept nogil:
    """Acquire's slow path: the free list is empty and the current chunk is
    fully handed out. Moves to the next chunk (a spare, or a new one from
    the upstream) and returns it for the bump index; {NULL, 0} for a fixed
    pool (c == NULL) or when no chunk can be had (nothing changes then)."""
    cdef dod_pool_span s
    s.base = NULL
    s.count = 0
    if c == NULL or (c.current + 1 >= c.n and dod_pool_add_chunk(c) != 0):
        return s
    c.current += 1
    s.base = c.bases[c.current]
    s.count = c.chunk_blocks
    return s


cdef void dod_pool_reset_chunks(dod_pool* p) noexcept nogil:
    """dod_pool_reset of a growable pool: back to chunk 0, later chunks kept as spares."""
    cdef dod_pool_chunks* c = p.chunks
    cdef size_t k = 0
    if p.prior + p.touched > p.peak:
        p.peak = p.prior + p.touched
    while k < c.current:
        dod_poison(c.bases[k], _chunk_len(c, k) * p.stride)
        k += 1
    dod_poison(p.base, p.touched * p.stride)
    c.current = 0
    p.prior = 0
    p.base = c.bases[0]
    p.count = c.first_blocks
    p.touched = 0
    p.free = NULL
    p.in_use = 0


cdef size_t dod_pool_slot_of(const dod_pool* p, const void* b) noexcept nogil:
    """Slot index of the block that starts at `b`, or SIZE_MAX when `b` is not
    the start of a block of any chunk of this pool (touched or not)."""
    cdef const dod_pool_chunks* c = p.chunks
    cdef uintptr_t a = <uintptr_t>b, off
    cdef size_t lo, hi, mid, k
    if p.stride == 0:
        return SIZE_MAX
    if c == NULL:
        off = a - <uintptr_t>p.base
        if a < <uintptr_t>p.base or off % p.stride != 0 or off // p.stride >= p.count:
            return SIZE_MAX
        return off // p.stride
    lo = 0                      # the last chunk whose base is <= a
    hi = c.n
    while lo < hi:
        mid = (lo + hi) >> 1
        if <uintptr_t>c.bases[c.order[mid]] <= a:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return SIZE_MAX
    k = c.order[lo - 1]
    off = a - <uintptr_t>c.bases[k]
    if off % p.stride != 0 or off // p.stride >= _chunk_len(c, k):
        return SIZE_MAX
    return _chunk_start(c, k) + off // p.stride
