# Timed kernels for the pool and free-list benchmark sections (dod.bench.pool,
# dod.bench.freelist). Every kernel times its whole loop in C with
# clock_gettime and returns nanoseconds; results go through a volatile sink so
# the compiler cannot drop the work (gcc elides a malloc/free pair whose
# pointer does not escape).
from libc.stdint cimport uint64_t, uint32_t, uintptr_t
from libc.stdlib cimport malloc, free

from dod.bench._particles cimport particle, xorshift64, spawn_particle
from dod.pool cimport (Pool, dod_pool, dod_pool_acquire, dod_pool_reset, dod_pool_release,
                       dod_pool_acquire_locked, dod_pool_release_locked)
from dod.freelist cimport FreeList, dod_freelist_allocate, dod_freelist_free
from dod.resource cimport Resource, dod_resource_allocate, dod_resource_deallocate
from dod.bench._timing cimport now_ns

cdef extern from *:
    """
    #include <malloc.h>
    static void *volatile dod_bench_sink;
    static inline void dod_bench_keep(void *p) { dod_bench_sink = p; }
    static inline size_t dod_bench_heap_in_use(void) {
    #if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
    #else
        return 0;
    #endif
    }
    """
    void dod_bench_keep(void* p) nogil
    size_t dod_bench_heap_in_use() nogil
    size_t malloc_usable_size(void* p) nogil



# ---------------------------------------------------------------- acquire+release pairs
# Each iteration acquires a block, writes it, and releases the block acquired
# RING iterations earlier (RING blocks stay live). An immediate
# acquire-then-release of the same block would let the compiler fold the
# pair away once the engine state sits in registers (it measured 0.27 ns,
# i.e. nothing); with the ring every pair is a real pop and push.

cdef enum:
    RING = 16


def pair_pool(Pool owner, size_t n):
    """n acquire+release pairs through the inline engine on &owner.engine."""
    cdef size_t i
    cdef void* p
    cdef void* ring[RING]
    cdef double t0, t1
    with nogil:
        for i in range(RING):
            ring[i] = dod_pool_acquire(&owner.engine)
        t0 = now_ns()
        for i in range(n):
            p = dod_pool_acquire(&owner.engine)
            (<char*>p)[8] = <char>i
            dod_pool_release(&owner.engine, ring[i % RING])
            ring[i % RING] = p
        t1 = now_ns()
        for i in range(RING):
            dod_bench_keep(ring[i])
            dod_pool_release(&owner.engine, ring[i])
    return t1 - t0


def pair_pool_local(Pool owner, size_t n):
    """As pair_pool, on a local copy of the engine state written back after
    the loop: the compiler keeps the free-list head and counters in
    registers (the owner's fields live in memory that block writes may
    alias, so they are reloaded and stored around every block write)."""
    cdef size_t i
    cdef void* p
    cdef void* ring[RING]
    cdef double t0, t1
    cdef dod_pool local
    with nogil:
        for i in range(RING):
            ring[i] = dod_pool_acquire(&owner.engine)
        t0 = now_ns()
        local = owner.engine
        for i in range(n):
            p = dod_pool_acquire(&local)
            (<char*>p)[8] = <char>i
            dod_pool_release(&local, ring[i % RING])
            ring[i % RING] = p
        owner.engine = local
        t1 = now_ns()
        for i in range(RING):
            dod_bench_keep(ring[i])
            dod_pool_release(&owner.engine, ring[i])
    return t1 - t0


def pair_pool_locked(Pool owner, size_t n):
    """n pairs through the mutex-taking engine functions (uncontended)."""
    cdef size_t i
    cdef void* p
    cdef void* ring[RING]
    cdef double t0, t1
    with nogil:
        for i in range(RING):
            ring[i] = dod_pool_acquire_locked(&owner.engine, &owner.mutex)
        t0 = now_ns()
        for i in range(n):
            p = dod_pool_acquire_locked(&owner.engine, &owner.mutex)
            (<char*>p)[8] = <char>i
            dod_pool_release_locked(&owner.engine, &owner.mutex, ring[i % RING])
            ring[i % RING] = p
        t1 = now_ns()
        for i in range(RING):
            dod_bench_keep(ring[i])
            dod_pool_release_locked(&owner.engine, &owner.mutex, ring[i])
    return t1 - t0


def pair_resource(Resource r, size_t size, size_t n):
    """n pairs through the dod_resource interface (two indirect calls each)."""
    cdef size_t i
    cdef void* p
    cdef void* ring[RING]
    cdef double t0, t1
    with nogil:
        for i in range(RING):
            ring[i] = dod_resource_allocate(&r.resource, size, 16)
        t0 = now_ns()
        for i in range(n):
            p = dod_resource_allocate(&r.resource, size, 16)
            (<char*>p)[8] = <char>i
            dod_resource_deallocate(&r.resource, ring[i % RING], size, 16)
            ring[i % RING] = p
        t1 = now_ns()
        for i in range(RING):
            dod_bench_keep(ring[i])
            dod_resource_deallocate(&r.resource, ring[i], size, 16)
    return t1 - t0


def pair_malloc(size_t size, size_t n):
    """n malloc+free pairs of `size` bytes, same ring pattern."""
    cdef size_t i
    cdef void* p
    cdef void* ring[RING]
    cdef double t0, t1
    with nogil:
        for i in range(RING):
            ring[i] = malloc(size)
        t0 = now_ns()
        for i in range(n):
            p = malloc(size)
            (<char*>p)[8] = <char>i
            free(ring[i % RING])
            ring[i % RING] = p
        t1 = now_ns()
        for i in range(RING):
            dod_bench_keep(ring[i])
            free(ring[i])
    return t1 - t0


# ---------------------------------------------------------------- particles (dod/bench/_particles.pxd)



def churn(object owner, size_t live0, size_t frames, size_t born, uint64_t seed):
    """Particle churn: `live0` particles live; per frame `born` are created and
    a variable number (about `born`, +-50%, steering back to live0) destroyed
    at random. owner: a Pool (engine) or None (malloc/free). Returns
    (ns for all frames, operations, final live count); the initial fill is
    not timed."""
    cdef Pool pool = owner
    cdef bint use_pool = owner is not None
    cdef size_t cap = live0 + 4 * born + 16
    cdef particle** live = <particle**>malloc(cap * sizeof(particle*))
    cdef size_t n = 0, f, k, kill, ops = 0, j
    cdef long long kk
    cdef uint64_t s = seed | 1, r
    cdef double t0, t1
    cdef particle* q
    if live == NULL:
        raise MemoryError()
    with nogil:
        for k in range(live0):
            q = <particle*>(dod_pool_acquire(&pool.engine) if use_pool else malloc(sizeof(particle)))
            spawn_particle(q, k)
            live[n] = q
            n += 1
        t0 = now_ns()
        for f in range(frames):
            for k in range(born):
                r = xorshift64(&s)
                q = <particle*>(dod_pool_acquire(&pool.engine) if use_pool else malloc(sizeof(particle)))
                spawn_particle(q, r)
                live[n] = q
                n += 1
            r = xorshift64(&s)
            # born +- 50%, plus whatever steers the population back to live0
            kk = <long long>n - <long long>live0 - <long long>(born // 2) + <long long>(r % (born + 1))
            kill = 0 if kk < 0 else (<size_t>kk if <size_t>kk < n else n)
            for k in range(kill):
                j = xorshift64(&s) % n
                q = live[j]
                n -= 1
                live[j] = live[n]
                if use_pool:
                    dod_pool_release(&pool.engine, q)
                else:
                    free(q)
            ops += born + kill
        t1 = now_ns()
        for k in range(n):
            if use_pool:
                dod_pool_release(&pool.engine, live[k])
            else:
                free(live[k])
    free(live)
    return t1 - t0, ops, n


def throughput_local(Pool owner, size_t count, size_t frames):
    """throughput() with the pool's engine state in a local for each frame
    (see pair_pool_local). Returns ns for all frames."""
    cdef particle** live = <particle**>malloc(count * sizeof(particle*))
    cdef size_t f, k
    cdef double t0, t1
    cdef particle* q
    cdef dod_pool local
    if live == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            local = owner.engine
            for k in range(count):
                q = <particle*>dod_pool_acquire(&local)
                spawn_particle(q, k)
                live[k] = q
            dod_bench_keep(live[count // 2])
            for k in range(count):
                dod_pool_release(&local, live[k])
            owner.engine = local
        t1 = now_ns()
    free(live)
    return t1 - t0


def throughput_reset(Pool owner, size_t count, size_t frames):
    """throughput() destroying the frame's particles with one dod_pool_reset."""
    cdef particle** live = <particle**>malloc(count * sizeof(particle*))
    cdef size_t f, k
    cdef double t0, t1
    cdef particle* q
    cdef dod_pool local
    if live == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            local = owner.engine
            for k in range(count):
                q = <particle*>dod_pool_acquire(&local)
                spawn_particle(q, k)
                live[k] = q
            dod_bench_keep(live[count // 2])
            dod_pool_reset(&local)
            owner.engine = local
        t1 = now_ns()
    free(live)
    return t1 - t0


def throughput(object owner, size_t count, size_t frames):
    """Per frame: create `count` particles, then destroy them all. owner: a
    Pool (engine) or None (malloc/free). Returns ns for all frames."""
    cdef Pool pool = owner
    cdef bint use_pool = owner is not None
    cdef particle** live = <particle**>malloc(count * sizeof(particle*))
    cdef size_t f, k
    cdef double t0, t1
    cdef particle* q
    if live == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for k in range(count):
                q = <particle*>(dod_pool_acquire(&pool.engine) if use_pool else malloc(sizeof(particle)))
                spawn_particle(q, k)
                live[k] = q
            dod_bench_keep(live[count // 2])
            for k in range(count):
                if use_pool:
                    dod_pool_release(&pool.engine, live[k])
                else:
                    free(live[k])
        t1 = now_ns()
    free(live)
    return t1 - t0


# ---------------------------------------------------------------- free list mixed churn

def mixed_churn(object owner, size_t nlive, size_t steps, size_t min_size, size_t max_size, uint64_t seed):
    """Mixed-size churn: `nlive` live blocks of random sizes in [min_size,
    max_size]; each step frees a random one and allocates a new random size.
    owner: a FreeList (engine) or None (malloc/free). Returns (ns, failures)."""
    cdef FreeList fl = owner
    cdef bint use_fl = owner is not None
    cdef void** live = <void**>malloc(nlive * sizeof(void*))
    cdef size_t k, j, size, span = max_size - min_size + 1, fails = 0
    cdef uint64_t s = seed | 1
    cdef double t0, t1
    cdef void* p
    if live == NULL:
        raise MemoryError()
    with nogil:
        for k in range(nlive):
            size = min_size + xorshift64(&s) % span
            live[k] = dod_freelist_allocate(&fl.engine, size, 16) if use_fl else malloc(size)
        t0 = now_ns()
        for k in range(steps):
            j = xorshift64(&s) % nlive
            if live[j] != NULL:
                if use_fl:
                    dod_freelist_free(&fl.engine, live[j])
                else:
                    free(live[j])
            size = min_size + xorshift64(&s) % span
            p = dod_freelist_allocate(&fl.engine, size, 16) if use_fl else malloc(size)
            if p == NULL:
                fails += 1
            else:
                (<char*>p)[0] = <char>k
            live[j] = p
        t1 = now_ns()
        for k in range(nlive):
            if live[k] != NULL:
                if use_fl:
                    dod_freelist_free(&fl.engine, live[k])
                else:
                    free(live[k])
    free(live)
    return t1 - t0, fails


# ---------------------------------------------------------------- bookkeeping bytes

def malloc_overhead(size_t n, size_t size):
    """glibc's bookkeeping per live allocation: (mallinfo2 delta / n - size,
    mean malloc_usable_size - size) at n live allocations of `size` bytes."""
    cdef void** ps = <void**>malloc(n * sizeof(void*))
    cdef size_t k, before, after, usable = 0
    if ps == NULL:
        raise MemoryError()
    with nogil:
        before = dod_bench_heap_in_use()
        for k in range(n):
            ps[k] = malloc(size)
            usable += malloc_usable_size(ps[k])
        after = dod_bench_heap_in_use()
        for k in range(n):
            free(ps[k])
    free(ps)
    if before == 0 and after == 0:
        return None, usable / <double>n - size
    return (after - before) / <double>n - size, usable / <double>n - size


def freelist_fill(FreeList owner, size_t n, size_t size):
    """Allocate n blocks of `size` bytes (alignment 16) through the engine; returns how many succeeded."""
    cdef size_t k, got = 0
    with nogil:
        for k in range(n):
            if dod_freelist_allocate(&owner.engine, size, 16) != NULL:
                got += 1
    return got


def pool_fill(Pool owner, size_t n):
    """Acquire n blocks through the engine; returns how many succeeded."""
    cdef size_t k, got = 0
    with nogil:
        for k in range(n):
            if dod_pool_acquire(&owner.engine) != NULL:
                got += 1
    return got
