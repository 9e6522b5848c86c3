"""Kernels for dod.bench.concurrent: the scaling benchmark of the allocator
article, timed in C and run by the thread harness (dod.bench._threads).

Every thread runs the same loop against one allocator shared by all threads:
it keeps a window of WINDOW live blocks and, `iterations` times, picks a
slot at random, frees the block in it (if any) and allocates a new one
there, writing a word into it. One operation = one allocation plus one free.
The random pattern ("random classes") draws each size from a table of 256
sizes: a class drawn uniformly from SegFit's 33 classes up to 1 KiB, a size
drawn uniformly inside it, but never below 8 bytes (each block carries the
8-byte word the loop writes); the single-class pattern asks for 64 bytes each
time. The random stream depends only on the thread number, so every
allocator sees the same requests.

Allocators (kind): glibc malloc/free; AtomicArena through its shared word and
through a thread cache; LockFreePool and SegFit shared (one CAS per
operation) and through a thread cache (dod_lfpool_cache, dod_segfit_cache:
no atomics). LockFreePool has one block size: under the random pattern it
is a pool of 1 KiB blocks serving every request.

L1 data-cache read misses are counted per thread with perf_event_open
(user space only) when Bench.count_l1d is set and the kernel allows it.
"""
from libc.stdint cimport uint64_t, uint32_t, int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset
from dod.bench._timing cimport now_ns_u64

from dod.bench._threads cimport ThreadKernel
from dod.atomics cimport dod_atomic_fetch_add_u64, dod_atomic_load_u64
from dod.lfpool cimport (LockFreePool, dod_lfpool, dod_lfpool_acquire, dod_lfpool_release,
                         dod_lfpool_cache, dod_lfpool_cache_init, dod_lfpool_cache_acquire,
                         dod_lfpool_cache_release, dod_lfpool_cache_flush)
from dod.segfit cimport (SegFit, dod_segfit, dod_segfit_allocate, dod_segfit_free,
                         dod_segfit_cache, dod_segfit_cache_init, dod_segfit_cache_allocate,
                         dod_segfit_cache_free, dod_segfit_cache_flush, dod_segfit_class_size)
from dod.atomic_arena cimport (AtomicArena, dod_aa, dod_aa_allocate,
                               dod_aa_free, dod_aa_cache, dod_aa_cache_allocate,
                               dod_aa_cache_free, dod_aa_cache_flush, dod_aa_cache_init)

cdef extern from *:
    """
    #include <errno.h>
    #include <string.h>
    #include <unistd.h>
    #include <sys/syscall.h>
    #include <linux/perf_event.h>
    /* A user-space L1d read-miss counter for the calling thread: fd >= 0, or -errno. */
    static int dod_bench_l1d_open(void) {
        struct perf_event_attr a;
        int fd;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_HW_CACHE;
        a.config = PERF_COUNT_HW_CACHE_L1D | (PERF_COUNT_HW_CACHE_OP_READ << 8)
                 | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        return fd >= 0 ? fd : -errno;
    }
    static long long dod_bench_l1d_read(int fd) {
        long long v = 0;
        return read(fd, &v, sizeof v) == (ssize_t)sizeof v ? v : -1;
    }
    """
    int dod_bench_l1d_open() nogil
    long long dod_bench_l1d_read(int fd) nogil
    int close(int fd) nogil
    char* strerror(int errnum) nogil

cdef enum:
    WINDOW = 64                  # live blocks per thread (a power of two)
    RANDOM_CLASSES = 33          # SegFit classes up to 1 KiB (class 32 is 1024 B; 41 reached 2 KiB)
    RANDOM_MAX = 1024            # the largest random request (the random pool's block)

cdef enum Kind:
    K_MALLOC
    K_AA_SHARED
    K_AA_CACHED
    K_LF_SHARED
    K_LF_CACHED
    K_SF_SHARED
    K_SF_CACHED

KINDS = {"malloc": K_MALLOC, "arena_shared": K_AA_SHARED, "arena_cached": K_AA_CACHED,
         "lfpool_shared": K_LF_SHARED, "lfpool_cached": K_LF_CACHED,
         "segfit_shared": K_SF_SHARED, "segfit_cached": K_SF_CACHED}


cdef struct Ctx:
    dod_lfpool* pool             # the pool of this pattern (64 B, or 1 KiB for random classes)
    dod_segfit* segfit
    dod_aa* arena
    uint32_t sizes[256]          # the request table (all 64 for the single class)
    bint count_l1d               # count L1d misses in this run
    uint64_t l1d_misses          # all threads, since the last reset
    uint64_t l1d_ops
    int64_t l1d_error            # 0, or -errno of the last failed perf_event_open
    uint64_t sink[64]


cdef inline void* _alloc(int kind, Ctx* c, dod_lfpool_cache* lc, dod_segfit_cache* sc,
                         dod_aa_cache* ac, size_t size) noexcept nogil:
    if kind == K_MALLOC:
        return malloc(size)
    if kind == K_AA_SHARED:
        return dod_aa_allocate(c.arena, size, 16)
    if kind == K_AA_CACHED:
        return dod_aa_cache_allocate(ac, size, 16)
    if kind == K_LF_SHARED:
        return dod_lfpool_acquire(c.pool)
    if kind == K_LF_CACHED:
        return dod_lfpool_cache_acquire(lc)
    if kind == K_SF_SHARED:
        return dod_segfit_allocate(c.segfit, size, 16)
    return dod_segfit_cache_allocate(sc, size, 16)


cdef inline void _free(int kind, Ctx* c, dod_lfpool_cache* lc, dod_segfit_cache* sc,
                       dod_aa_cache* ac, void* p, size_t size) noexcept nogil:
    if kind == K_MALLOC:
        free(p)
    elif kind == K_AA_SHARED:
        dod_aa_free(c.arena, p, size, 16)
    elif kind == K_AA_CACHED:
        dod_aa_cache_free(ac, p, size, 16)
    elif kind == K_LF_SHARED:
        dod_lfpool_release(c.pool, p)
    elif kind == K_LF_CACHED:
        dod_lfpool_cache_release(lc, p)
    elif kind == K_SF_SHARED:
        dod_segfit_free(c.segfit, p, size, 16)
    else:
        dod_segfit_cache_free(sc, p, size, 16)


cdef inline size_t _run(Ctx* c, int thread, size_t iterations, int kind) noexcept nogil:
    """The window loop for one allocator (`kind` is a constant at every call site, so
    the dispatch above folds away)."""
    cdef void* ptrs[64]
    cdef uint32_t held[64]
    cdef dod_lfpool_cache lc
    cdef dod_segfit_cache sc
    cdef dod_aa_cache ac
    cdef uint64_t x = (<uint64_t>thread + 1) * 0x9E3779B97F4A7C15ULL
    cdef uint64_t acc = 0
    cdef size_t i, slot, size
    cdef int fd = -1
    cdef long long m0 = 0, m1
    cdef void* p
    memset(ptrs, 0, sizeof(ptrs))
    if kind == K_LF_CACHED:
        dod_lfpool_cache_init(&lc, c.pool, 0)
    elif kind == K_SF_CACHED:
        dod_segfit_cache_init(&sc, c.segfit, 0)
    elif kind == K_AA_CACHED:
        dod_aa_cache_init(&ac, c.arena, 1 << 16)
    if c.count_l1d:
        fd = dod_bench_l1d_open()
        if fd < 0:
            c.l1d_error = fd
        else:
            m0 = dod_bench_l1d_read(fd)
    for i in range(iterations):
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        slot = x & (WINDOW - 1)
        size = c.sizes[(x >> 8) & 255]
        if ptrs[slot] != NULL:
            acc += (<uint64_t*>ptrs[slot])[0]
            _free(kind, c, &lc, &sc, &ac, ptrs[slot], held[slot])
        p = _alloc(kind, c, &lc, &sc, &ac, size)
        (<uint64_t*>p)[0] = i
        ptrs[slot] = p
        held[slot] = <uint32_t>size
    if fd >= 0:
        m1 = dod_bench_l1d_read(fd)
        close(fd)
        if m0 >= 0 and m1 >= m0:
            dod_atomic_fetch_add_u64(&c.l1d_misses, <uint64_t>(m1 - m0))
            dod_atomic_fetch_add_u64(&c.l1d_ops, iterations)
    for slot in range(WINDOW):
        if ptrs[slot] != NULL:
            _free(kind, c, &lc, &sc, &ac, ptrs[slot], held[slot])
    if kind == K_LF_CACHED:
        dod_lfpool_cache_flush(&lc)
    elif kind == K_SF_CACHED:
        dod_segfit_cache_flush(&sc)
    elif kind == K_AA_CACHED:
        dod_aa_cache_flush(&ac)
    c.sink[(thread * 8) & 63] += acc
    return iterations


cdef size_t k_malloc(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_MALLOC)

cdef size_t k_aa_shared(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_AA_SHARED)

cdef size_t k_aa_cached(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_AA_CACHED)

cdef size_t k_lf_shared(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_LF_SHARED)

cdef size_t k_lf_cached(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_LF_CACHED)

cdef size_t k_sf_shared(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_SF_SHARED)

cdef size_t k_sf_cached(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    return _run(<Ctx*>ctx, thread, iterations, K_SF_CACHED)


def random_sizes():
    """The 256 request sizes of the random pattern (deterministic)."""
    cdef uint64_t x = 0x2545F4914F6CDD1DULL
    cdef size_t i, k, lo, hi
    out = []
    for i in range(256):
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        k = (x >> 16) % RANDOM_CLASSES
        lo = dod_segfit_class_size(k - 1) + 1 if k else 1
        hi = dod_segfit_class_size(k)
        # at least the 8-byte word _run writes into every block (a 7-byte malloc
        # request overflowed there: found by the sanitize build)
        out.append(max(8, lo + (x >> 40) % (hi - lo + 1)))
    return out


cdef class Bench:
    """The allocators one pattern's kernels share (all threads use the same ones).

    Bench(pattern): "single" (64-byte requests; a 64-byte LockFreePool) or
    "random" (the random class table; a 1 KiB LockFreePool)."""
    cdef Ctx ctx
    cdef readonly str pattern
    cdef readonly LockFreePool pool
    cdef readonly SegFit segfit
    cdef readonly AtomicArena arena

    def __cinit__(self, str pattern="single"):
        cdef size_t i
        memset(&self.ctx, 0, sizeof(Ctx))
        if pattern not in ("single", "random"):
            raise ValueError(f"pattern must be 'single' or 'random', not {pattern!r}")
        self.pattern = pattern
        sizes = random_sizes() if pattern == "random" else [64] * 256
        for i in range(256):
            self.ctx.sizes[i] = sizes[i]
        self.pool = LockFreePool(RANDOM_MAX if pattern == "random" else 64)
        self.segfit = SegFit()
        self.arena = AtomicArena(1 << 20)
        self.ctx.pool = &self.pool.engine
        self.ctx.segfit = &self.segfit.engine
        self.ctx.arena = &self.arena.engine

    def kernel(self, str name):
        """A ThreadKernel for one of KINDS."""
        cdef int kind
        if name not in KINDS:
            raise ValueError(f"no kernel {name!r}; one of {sorted(KINDS)}")
        kind = KINDS[name]
        if kind == K_MALLOC:
            return ThreadKernel.wrap(k_malloc, &self.ctx, self, name)
        if kind == K_AA_SHARED:
            return ThreadKernel.wrap(k_aa_shared, &self.ctx, self, name)
        if kind == K_AA_CACHED:
            return ThreadKernel.wrap(k_aa_cached, &self.ctx, self, name)
        if kind == K_LF_SHARED:
            return ThreadKernel.wrap(k_lf_shared, &self.ctx, self, name)
        if kind == K_LF_CACHED:
            return ThreadKernel.wrap(k_lf_cached, &self.ctx, self, name)
        if kind == K_SF_SHARED:
            return ThreadKernel.wrap(k_sf_shared, &self.ctx, self, name)
        return ThreadKernel.wrap(k_sf_cached, &self.ctx, self, name)

    def cas_retries(self, str name):
        """CAS retries counted so far by the allocator behind kernel `name` (None when it
        has no compare-and-swap: malloc, the arena's fetch-add)."""
        if name.startswith("lfpool"):
            return self.pool.cas_retries
        if name.startswith("segfit"):
            return self.segfit.cas_retries
        return None

    def count_l1d(self, bint on):
        """Count L1d read misses in the following runs (and reset the totals)."""
        self.ctx.count_l1d = on
        self.ctx.l1d_misses = 0
        self.ctx.l1d_ops = 0
        self.ctx.l1d_error = 0

    def l1d(self):
        """(L1d read misses per million operations, None) or (None, why not available)."""
        if self.ctx.l1d_error:
            return None, "perf_event_open: " + strerror(<int>-self.ctx.l1d_error).decode()
        if self.ctx.l1d_ops == 0:
            return None, "no counted run"
        return dod_atomic_load_u64(&self.ctx.l1d_misses) * 1e6 / self.ctx.l1d_ops, None

    def check(self):
        """Every block came back: the shared structures hold all their blocks."""
        self.pool.check()
        self.segfit.check()
        if self.pool.in_use or self.segfit.in_use or self.pool.cached_blocks or self.segfit.cached_blocks:
            raise RuntimeError("a kernel left blocks out of the shared allocators")


# ---------------------------------------------------------------- metadata overhead

cdef extern from "<malloc.h>" nogil:
    struct mallinfo2:
        size_t arena       # non-mmapped bytes obtained from the system
        size_t hblkhd      # mmapped bytes
        size_t uordblks    # bytes in allocated chunks (headers included)
    mallinfo2 c_mallinfo2 "mallinfo2"()
    int malloc_trim(size_t pad)


def overhead_malloc(size_t count, size_t size):
    """(bytes glibc obtained from the system for `count` blocks of `size`, ns per malloc).

    Measured as the growth of mallinfo2's arena + mmapped bytes across the
    allocations (nothing else allocates in between: the loop is nogil C).
    """
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef mallinfo2 before, after
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    with nogil:
        malloc_trim(0)
        before = c_mallinfo2()
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = malloc(size)
            (<char*>ptrs[i])[0] = 1
        t1 = now_ns_u64()
        after = c_mallinfo2()
        for i in range(count):
            free(ptrs[i])
        malloc_trim(0)
    free(ptrs)
    return (after.arena + after.hblkhd) - (before.arena + before.hblkhd), <double>(t1 - t0) / count


def overhead_segfit(size_t count, size_t size, bint cached=False):
    """(bytes a fresh SegFit obtained for `count` live blocks of `size`, ns per allocation),
    allocated through a thread cache when `cached` (its slack is counted: it is in the spans)."""
    cdef SegFit s = SegFit()
    cdef dod_segfit* sf = &s.engine
    cdef dod_segfit_cache sc
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    dod_segfit_cache_init(&sc, sf, 0)
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = dod_segfit_cache_allocate(&sc, size, 16) if cached else dod_segfit_allocate(sf, size, 16)
            (<char*>ptrs[i])[0] = 1
        t1 = now_ns_u64()
    nbytes = s.nbytes
    with nogil:
        for i in range(count):
            if cached:
                dod_segfit_cache_free(&sc, ptrs[i], size, 16)
            else:
                dod_segfit_free(sf, ptrs[i], size, 16)
        dod_segfit_cache_flush(&sc)
    free(ptrs)
    return nbytes, <double>(t1 - t0) / count


def overhead_lfpool(size_t count, size_t size, bint cached=False):
    """(bytes a fresh LockFreePool(size) obtained for `count` live blocks, ns per acquire),
    through a thread cache when `cached`."""
    cdef LockFreePool p = LockFreePool(size)
    cdef dod_lfpool* e = &p.engine
    cdef dod_lfpool_cache lc
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    dod_lfpool_cache_init(&lc, e, 0)
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = dod_lfpool_cache_acquire(&lc) if cached else dod_lfpool_acquire(e)
            (<char*>ptrs[i])[8] = 1
        t1 = now_ns_u64()
    nbytes = p.nbytes
    with nogil:
        for i in range(count):
            if cached:
                dod_lfpool_cache_release(&lc, ptrs[i])
            else:
                dod_lfpool_release(e, ptrs[i])
        dod_lfpool_cache_flush(&lc)
    free(ptrs)
    return nbytes, <double>(t1 - t0) / count
