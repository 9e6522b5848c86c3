"""Kernels for dod.bench.concurrent: allocate/free loops timed in C, run by the
thread harness (dod.bench._threads) or once on the calling thread.

Each kernel does `iterations` rounds of: allocate BATCH blocks of `size`
bytes, write one word into each (so nothing is optimised away and the block
is touched as a user would), then free them in allocation order. One
operation = one allocation plus its free.
"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport malloc, free
from dod.bench._timing cimport now_ns_u64

from dod.bench._threads cimport ThreadKernel
from dod.bench._threads import malloc_kernel
from dod.lfpool cimport LockFreePool, dod_lfpool, dod_lfpool_acquire, dod_lfpool_release
from dod.segfit cimport SegFit, dod_segfit, dod_segfit_allocate, dod_segfit_free
from dod._atomic cimport dod_atomic_fetch_add_u64

cdef enum:
    BATCH = 32

cdef struct Ctx:
    dod_lfpool* pool
    dod_segfit* segfit
    size_t size
    uint64_t sink[64]          # one cache line per thread would be nicer; a sink only defeats DCE


cdef size_t k_lfpool(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    cdef Ctx* c = <Ctx*>ctx
    cdef void* blocks[32]
    cdef size_t i, j, n = 0
    cdef uint64_t acc = 0
    for i in range(iterations):
        for j in range(BATCH):
            blocks[j] = dod_lfpool_acquire(c.pool)
            (<uint64_t*>blocks[j])[1] = j
        for j in range(BATCH):
            acc += (<uint64_t*>blocks[j])[1]
            dod_lfpool_release(c.pool, blocks[j])
        n += BATCH
    c.sink[(thread * 8) & 63] += acc
    return n


cdef size_t k_segfit(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    cdef Ctx* c = <Ctx*>ctx
    cdef void* blocks[32]
    cdef size_t i, j, n = 0
    cdef uint64_t acc = 0
    for i in range(iterations):
        for j in range(BATCH):
            blocks[j] = dod_segfit_allocate(c.segfit, c.size, 16)
            (<uint64_t*>blocks[j])[1] = j
        for j in range(BATCH):
            acc += (<uint64_t*>blocks[j])[1]
            dod_segfit_free(c.segfit, blocks[j], c.size, 16)
        n += BATCH
    c.sink[(thread * 8) & 63] += acc
    return n


cdef class Bench:
    """The state the kernels share: a LockFreePool and a SegFit for `size`-byte blocks."""
    cdef Ctx ctx
    cdef readonly LockFreePool pool
    cdef readonly SegFit segfit

    def __init__(self, size_t size=64):
        self.pool = LockFreePool(size)
        self.segfit = SegFit()
        self.ctx.pool = &self.pool.engine
        self.ctx.segfit = &self.segfit.engine
        self.ctx.size = size

    def kernel(self, str name):
        """A ThreadKernel for 'malloc', 'lfpool' or 'segfit'."""
        if name == "malloc":
            return malloc_kernel(self.ctx.size)
        if name == "lfpool":
            return ThreadKernel.wrap(k_lfpool, &self.ctx, self, name)
        if name == "segfit":
            return ThreadKernel.wrap(k_segfit, &self.ctx, self, name)
        raise ValueError(f"no kernel {name!r}")

    def cas_retries(self, str name):
        """CAS retries counted so far by the allocator behind kernel `name` (0 for malloc)."""
        if name == "lfpool":
            return self.pool.cas_retries
        if name == "segfit":
            return self.segfit.cas_retries
        return 0


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


def overhead_segfit(size_t count, size_t size):
    """(bytes a fresh SegFit obtained for `count` blocks of `size`, ns per allocation)."""
    cdef SegFit s = SegFit()
    cdef dod_segfit* sf = &s.engine
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = dod_segfit_allocate(sf, size, 16)
            (<char*>ptrs[i])[0] = 1
        t1 = now_ns_u64()
    nbytes = s.nbytes
    with nogil:
        for i in range(count):
            dod_segfit_free(sf, ptrs[i], size, 16)
    free(ptrs)
    return nbytes, <double>(t1 - t0) / count


def overhead_lfpool(size_t count, size_t size):
    """(bytes a fresh LockFreePool(size) obtained for `count` blocks, ns per acquire)."""
    cdef LockFreePool p = LockFreePool(size)
    cdef dod_lfpool* e = &p.engine
    cdef void** ptrs = <void**>malloc(count * sizeof(void*))
    cdef size_t i
    cdef uint64_t t0, t1
    if ptrs == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns_u64()
        for i in range(count):
            ptrs[i] = dod_lfpool_acquire(e)
            (<char*>ptrs[i])[8] = 1
        t1 = now_ns_u64()
    nbytes = p.nbytes
    with nogil:
        for i in range(count):
            dod_lfpool_release(e, ptrs[i])
    free(ptrs)
    return nbytes, <double>(t1 - t0) / count
