"""Kernels for dod.bench.atomic: the one-word atomic arena, its thread caches,
the page source and the guard zones, timed in C.

Scaling kernels (run by dod.bench._threads) do `iterations` rounds of:
allocate BATCH blocks of `size` bytes, write one word into each, then free
them in allocation order. One operation = one allocation plus its free
(the same shape as dod.bench.concurrent, so the rows compare).
"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from dod.bench._timing cimport now_ns_u64

from dod.bench._threads cimport ThreadKernel
from dod.bench._threads import malloc_kernel
from dod.atomics cimport dod_atomic_fetch_add_u64, dod_atomic_load_u64
from dod.arena cimport Arena, dod_arena_push, dod_arena_reset
from dod.atomic_arena cimport (AtomicArena, dod_aa, dod_aa_allocate,
                               dod_aa_free, dod_aa_cache, dod_aa_cache_allocate,
                               dod_aa_cache_free, dod_aa_cache_flush, dod_aa_cache_init)
from dod.pages cimport PageSource, dod_pages_map, dod_pages_unmap
from dod.guard cimport GuardedResource, dod_guard_allocate, dod_guard_deallocate

cdef extern from "<malloc.h>" nogil:
    struct mallinfo2:
        size_t uordblks
        size_t hblkhd
    mallinfo2 c_mallinfo2 "mallinfo2"()

cdef enum:
    BATCH = 32
    FAST_BATCH = 1024


cdef struct Ctx:
    dod_aa* arena
    size_t size
    size_t chunk
    uint64_t shared_atomics    # atomics on shared lines (word, block counters), all threads
    uint64_t sink[64]


cdef size_t k_shared(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    """Every allocation is one fetch-add on the shared word; every free one fetch-sub."""
    cdef Ctx* c = <Ctx*>ctx
    cdef void* blocks[32]
    cdef size_t i, j, n = 0
    cdef uint64_t acc = 0
    for i in range(iterations):
        for j in range(BATCH):
            blocks[j] = dod_aa_allocate(c.arena, c.size, 16)
            (<uint64_t*>blocks[j])[0] = j
        for j in range(BATCH):
            acc += (<uint64_t*>blocks[j])[0]
            dod_aa_free(c.arena, blocks[j], c.size, 16)
        n += BATCH
    dod_atomic_fetch_add_u64(&c.shared_atomics, 2 * n)      # one fetch-add + one fetch-sub each
    c.sink[(thread * 8) & 63] += acc
    return n


cdef size_t k_cached(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    """Each thread bumps its own chunk; frees are summed privately per block."""
    cdef Ctx* c = <Ctx*>ctx
    cdef void* blocks[32]
    cdef size_t i, j, n = 0
    cdef uint64_t acc = 0
    cdef dod_aa_cache cache
    dod_aa_cache_init(&cache, c.arena, c.chunk)
    for i in range(iterations):
        for j in range(BATCH):
            blocks[j] = dod_aa_cache_allocate(&cache, c.size, 16)
            (<uint64_t*>blocks[j])[0] = j
        for j in range(BATCH):
            acc += (<uint64_t*>blocks[j])[0]
            dod_aa_cache_free(&cache, blocks[j], c.size, 16)
        n += BATCH
    dod_aa_cache_flush(&cache)
    dod_atomic_fetch_add_u64(&c.shared_atomics, cache.refills + cache.publishes)
    c.sink[(thread * 8) & 63] += acc
    return n


cdef class Bench:
    """Contexts for the scaling kernels: one AtomicArena shared by all threads."""
    cdef Ctx ctx
    cdef readonly AtomicArena arena

    def __cinit__(self, size_t size=64, size_t block_size=1 << 20, size_t chunk=1 << 16):
        memset(&self.ctx, 0, sizeof(Ctx))
        self.arena = AtomicArena(block_size)
        self.ctx.arena = &self.arena.engine
        self.ctx.size = size
        self.ctx.chunk = chunk

    def shared_atomics(self):
        """Atomic read-modify-writes on shared cache lines so far (arena kernels only)."""
        return dod_atomic_load_u64(&self.ctx.shared_atomics)

    def kernel(self, str name):
        if name == "malloc":
            return malloc_kernel(self.ctx.size)
        if name == "shared":
            return ThreadKernel.wrap(k_shared, &self.ctx, self, name)
        if name == "cached":
            return ThreadKernel.wrap(k_cached, &self.ctx, self, name)
        raise ValueError(name)


# ---------------------------------------------------------------- single-thread fast path

def fast_path(size_t count=1 << 20, size_t size=64):
    """ns per allocation of the allocation loop alone (batches of 1024 timed, the
    release between batches untimed): {"bump": plain arena bump, "xadd": the shared
    word's fetch-add, "cache": thread-cache bump, "malloc": malloc}."""
    cdef Arena arena = Arena(FAST_BATCH * (size + 64))
    cdef AtomicArena aa = AtomicArena(1 << 20)
    cdef dod_aa_cache cache
    cdef void* ptrs[1024]
    cdef size_t rounds = count // FAST_BATCH, r, j
    cdef uint64_t t0, tb = 0, tx = 0, tc = 0, tm = 0, acc = 0
    dod_aa_cache_init(&cache, &aa.engine, 1 << 16)
    with nogil:
        for r in range(rounds):
            t0 = now_ns_u64()
            for j in range(FAST_BATCH):
                ptrs[j] = dod_arena_push(&arena.engine, size, 16)
                (<uint64_t*>ptrs[j])[0] = j
            tb += now_ns_u64() - t0
            acc += (<uint64_t*>ptrs[r & 1023])[0]
            dod_arena_reset(&arena.engine)

            t0 = now_ns_u64()
            for j in range(FAST_BATCH):
                ptrs[j] = dod_aa_allocate(&aa.engine, size, 16)
                (<uint64_t*>ptrs[j])[0] = j
            tx += now_ns_u64() - t0
            for j in range(FAST_BATCH):
                acc += (<uint64_t*>ptrs[j])[0]
                dod_aa_free(&aa.engine, ptrs[j], size, 16)

            t0 = now_ns_u64()
            for j in range(FAST_BATCH):
                ptrs[j] = dod_aa_cache_allocate(&cache, size, 16)
                (<uint64_t*>ptrs[j])[0] = j
            tc += now_ns_u64() - t0
            for j in range(FAST_BATCH):
                acc += (<uint64_t*>ptrs[j])[0]
                dod_aa_cache_free(&cache, ptrs[j], size, 16)

            t0 = now_ns_u64()
            for j in range(FAST_BATCH):
                ptrs[j] = malloc(size)
                (<uint64_t*>ptrs[j])[0] = j
            tm += now_ns_u64() - t0
            for j in range(FAST_BATCH):
                acc += (<uint64_t*>ptrs[j])[0]
                free(ptrs[j])
        dod_aa_cache_flush(&cache)
    n = <double>(rounds * FAST_BATCH)
    return {"bump": tb / n, "xadd": tx / n, "cache": tc / n, "malloc": tm / n, "_sink": acc}


# ---------------------------------------------------------------- metadata overhead

def overhead_atomic(size_t count=1000000, size_t size=64, bint cached=False, size_t block_size=1 << 20):
    """(bytes obtained from the system, ns per allocation) for `count` live allocations."""
    cdef AtomicArena aa = AtomicArena(block_size)
    cdef dod_aa_cache cache
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    dod_aa_cache_init(&cache, &aa.engine, 1 << 16)
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = dod_aa_cache_allocate(&cache, size, 16) if cached else dod_aa_allocate(&aa.engine, size, 16)
            (<uint64_t*>ptrs[i])[0] = i
        t1 = now_ns_u64()
    d = aa.check()
    obtained = d["capacity"] + 64 * d["blocks"]
    with nogil:
        for i in range(count):
            if cached:
                dod_aa_cache_free(&cache, ptrs[i], size, 16)
            else:
                dod_aa_free(&aa.engine, ptrs[i], size, 16)
        dod_aa_cache_flush(&cache)
    free(ptrs)
    return obtained, (t1 - t0) / <double>count


def overhead_malloc(size_t count=1000000, size_t size=64):
    """(bytes glibc's heap grew by, from mallinfo2, ns per allocation)."""
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i, before, after
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    before = c_mallinfo2().uordblks
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = malloc(size)
            (<uint64_t*>ptrs[i])[0] = i
        t1 = now_ns_u64()
    after = c_mallinfo2().uordblks
    for i in range(count):
        free(ptrs[i])
    free(ptrs)
    return after - before, (t1 - t0) / <double>count


# ---------------------------------------------------------------- pages and guards

def pages_cost(size_t size=1 << 16, size_t count=2000, bint touch=False):
    """ns per map+unmap of `size` bytes through a PageSource (touching every page if asked)."""
    cdef PageSource src = PageSource()
    cdef size_t i, k
    cdef char* p
    cdef uint64_t t0, t1
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            p = <char*>dod_pages_map(&src.engine, size, 4096)
            if touch:
                k = 0
                while k < size:
                    p[k] = 1
                    k += 4096
            else:
                p[0] = 1
            dod_pages_unmap(&src.engine, p, size)
        t1 = now_ns_u64()
    return (t1 - t0) / <double>count


def guard_cost(size_t size=64, size_t count=2000, size_t quarantine=64):
    """{"guard": ns per guarded allocate+free (quarantine ring full, so each free also
    releases one), "malloc": ns per malloc+free of the same size}."""
    cdef GuardedResource g = GuardedResource(quarantine=quarantine)
    cdef void* blocks[32]
    cdef size_t i, j
    cdef char* p
    cdef uint64_t t0, t1, t2, acc = 0
    with nogil:
        for i in range(quarantine):                   # fill the ring: steady state
            p = <char*>dod_guard_allocate(&g.engine, size, 16)
            dod_guard_deallocate(&g.engine, p, size, 16)
        t0 = now_ns_u64()
        for i in range(count):
            p = <char*>dod_guard_allocate(&g.engine, size, 16)
            p[0] = 1
            dod_guard_deallocate(&g.engine, p, size, 16)
        t1 = now_ns_u64()
        for i in range(count * 4):               # the same batched loop as the scaling kernels
            for j in range(BATCH):
                blocks[j] = malloc(size)
                (<char*>blocks[j])[0] = <char>j
            for j in range(BATCH):
                acc += <uint64_t>(<char*>blocks[j])[0]
                free(blocks[j])
        t2 = now_ns_u64()
    return {"guard": (t1 - t0) / <double>count, "malloc": (t2 - t1) / <double>(count * 4 * BATCH),
            "_sink": acc}
