"""Scaling harness: one C-timed nogil kernel run by N Python threads started together.

Use from a kernels module (``cimport dod.bench._threads``), see the .pxd:

    >>> from dod.bench._threads import run_threads, scaling
    >>> r = run_threads(kernel, nthreads=2, iterations=1_000_000)
    >>> r.rate          # operations per second, all threads together
    >>> scaling(kernel, [1, 2], iterations)   # {n: ThreadRun}, and r.rate / rate(1)

Each thread is a ``threading.Thread`` whose target drops the GIL at once,
announces itself at a barrier (an atomic counter) and spins until the main
thread opens it, so all kernels start within a few hundred nanoseconds of
each other. A thread reads the clock right before and right after its kernel
call; the run's wall time is last end minus first start, so a thread that
started late or finished early does not flatter the rate.

Thread-safety: one run at a time per kernel (the kernel's context is shared
by its threads by design; what it does with it is the kernel's business).
"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free, malloc
from dod.bench._timing cimport now_ns_u64

from dod.atomics cimport (dod_atomic_load_u64, dod_atomic_store_u64,
                          dod_atomic_fetch_add_u64, dod_cpu_relax, dod_thread_yield)

import threading
from dataclasses import dataclass


cdef class ThreadKernel:
    """A nogil C kernel plus its context, ready for :func:`run_threads`.

    Made in Cython with ``ThreadKernel.wrap(fn, ctx, owner, name)``; ``owner``
    is any object that keeps ``ctx`` valid.
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("ThreadKernel objects are made in Cython with ThreadKernel.wrap()")

    @staticmethod
    cdef ThreadKernel wrap(dod_thread_kernel fn, void* ctx, object owner, str name):
        cdef ThreadKernel k = ThreadKernel.__new__(ThreadKernel)
        k.fn = fn
        k.ctx = ctx
        k.owner = owner
        k.name = name
        return k

    def __repr__(self):
        return f"<dod.bench.ThreadKernel {self.name}>"


cdef class _Run:
    cdef ThreadKernel kernel
    cdef int nthreads
    cdef size_t iterations
    cdef uint64_t ready          # threads waiting at the barrier
    cdef uint64_t go             # 1: the barrier is open
    cdef uint64_t* start_ns
    cdef uint64_t* end_ns
    cdef uint64_t* ops

    def __cinit__(self, ThreadKernel kernel, int nthreads, size_t iterations):
        self.kernel = kernel
        self.nthreads = nthreads
        self.iterations = iterations
        self.start_ns = <uint64_t*>calloc(nthreads, sizeof(uint64_t))
        self.end_ns = <uint64_t*>calloc(nthreads, sizeof(uint64_t))
        self.ops = <uint64_t*>calloc(nthreads, sizeof(uint64_t))
        if self.start_ns == NULL or self.end_ns == NULL or self.ops == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.start_ns)
        free(self.end_ns)
        free(self.ops)


cdef void _worker_nogil(_Run run, int tid) noexcept nogil:
    cdef dod_thread_kernel fn = run.kernel.fn
    cdef void* ctx = run.kernel.ctx
    cdef uint64_t t0, t1
    cdef size_t done
    cdef int spins = 0
    dod_atomic_fetch_add_u64(&run.ready, 1)
    while dod_atomic_load_u64(&run.go) == 0:
        spins += 1
        if spins & 63:
            dod_cpu_relax()
        else:
            dod_thread_yield()      # more threads than cores: let the others reach the barrier
    t0 = now_ns_u64()
    done = fn(ctx, tid, run.nthreads, run.iterations)
    t1 = now_ns_u64()
    run.start_ns[tid] = t0
    run.end_ns[tid] = t1
    run.ops[tid] = done


def _worker(_Run run, int tid):
    with nogil:
        _worker_nogil(run, tid)


@dataclass
class ThreadRun:
    """One run of a kernel on `threads` threads."""
    name: str
    threads: int
    ops: int                # operations completed, all threads
    wall_ns: int            # first start to last end
    thread_ns: list         # each thread's own kernel time

    @property
    def rate(self):
        """Operations per second, all threads together."""
        return self.ops * 1e9 / self.wall_ns if self.wall_ns else float("inf")

    @property
    def ns_per_op(self):
        """Wall nanoseconds per operation, all threads together (1e9 / rate)."""
        return self.wall_ns / self.ops if self.ops else float("inf")


def run_threads(ThreadKernel kernel not None, int nthreads, size_t iterations):
    """Run `kernel` on `nthreads` threads at once, each doing `iterations`; a :class:`ThreadRun`."""
    cdef _Run run
    cdef int i
    cdef uint64_t first, last
    if nthreads < 1:
        raise ValueError(f"nthreads must be at least 1, got {nthreads}")
    run = _Run(kernel, nthreads, iterations)
    threads = [threading.Thread(target=_worker, args=(run, i), daemon=True) for i in range(nthreads)]
    for t in threads:
        t.start()
    with nogil:
        while dod_atomic_load_u64(&run.ready) < <uint64_t>nthreads:
            dod_thread_yield()
        dod_atomic_store_u64(&run.go, 1)
    for t in threads:
        t.join()
    first = run.start_ns[0]
    last = run.end_ns[0]
    for i in range(1, nthreads):
        first = min(first, run.start_ns[i])
        last = max(last, run.end_ns[i])
    return ThreadRun(kernel.name, nthreads, sum(run.ops[i] for i in range(nthreads)), last - first,
                     [run.end_ns[i] - run.start_ns[i] for i in range(nthreads)])


def scaling(ThreadKernel kernel not None, threads, size_t iterations, int repeat=3):
    """{n: median-of-`repeat` ThreadRun} for each thread count in `threads` (by rate).

    Scaling at n threads is ``result[n].rate / result[1].rate`` when 1 is in
    `threads`: each kernel against its own single-thread rate.
    """
    out = {}
    for n in threads:
        runs = sorted((run_threads(kernel, n, iterations) for _ in range(max(1, repeat))),
                      key=lambda r: r.rate)
        out[n] = runs[len(runs) // 2]
    return out


# ---------------------------------------------------------------- the shared baseline

cdef enum:
    _MALLOC_BATCH = 32


cdef struct _MallocCtx:
    size_t size
    uint64_t sink[64]


cdef size_t _k_malloc(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    """The baseline every scaling row is compared with: `iterations` rounds of
    malloc 32 blocks of `size` bytes, write a word into each, free them in
    allocation order. One operation = one malloc plus its free."""
    cdef _MallocCtx* c = <_MallocCtx*>ctx
    cdef void* blocks[_MALLOC_BATCH]
    cdef size_t i, j, n = 0
    cdef uint64_t acc = 0
    for i in range(iterations):
        for j in range(_MALLOC_BATCH):
            blocks[j] = malloc(c.size)
            (<uint64_t*>blocks[j])[0] = j
        for j in range(_MALLOC_BATCH):
            acc += (<uint64_t*>blocks[j])[0]
            free(blocks[j])
        n += _MALLOC_BATCH
    c.sink[(thread * 8) & 63] += acc
    return n


cdef class _MallocState:
    cdef _MallocCtx ctx


def malloc_kernel(size_t size=64):
    """A ThreadKernel running the malloc/free baseline with blocks of `size` bytes."""
    if size < 8:
        raise ValueError("size must be at least 8 bytes")
    cdef _MallocState state = _MallocState()
    state.ctx.size = size
    return ThreadKernel.wrap(_k_malloc, &state.ctx, state, "malloc")
