"""Yardsticks for the machine, to read the tick's speedup against: a bare
parallel loop (the machine's own speedup) and a cache line's round trip
between two threads.

On a shared machine a thread count's speedup moves with the moment (the
other tenants' use of the caches and of memory): even this loop, which has
no serial part, no shared write and no imbalance (each thread rewrites its
own contiguous part of a buffer), scales anywhere from below 1x to nearly
2x on two vCPUs from one run to the next. So ``python -m
dod.tracker.bench`` times :func:`sweep` over a buffer sized to the
tracker's rows, in the same blocks as the ticks, and prints its speedup
beside the tick's. It is a yardstick for the machine at that moment, not a
ceiling: the loop is all memory traffic, so once its buffer outgrows the
caches it is bound by the memory's bandwidth, which the tick, with more
arithmetic per byte, is less. The measurements are in
docs/design/threads-and-locality.md.

The loop runs on the same OpenMP runtime as the tick (libgomp's persistent
pool, the same wait policy), one parallel region per pass, like the tick's
passes over its rows. Each element is updated alone, so the result is the
same bit for bit for every thread count.

The loop does not show how far apart the machine's two threads run. A
tick hands data between its workers (each pass's rows, the index, the
claims), and :func:`round_trip_ns` times that hand-off: one cache line
passed back and forth between two threads. When the two vCPUs sit far
apart on the host, the round trip is several times longer and a tick of
10,000 targets can be slower on two threads than on one, while the bare
loop still scales.
"""
import numpy as np

from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport uint32_t, uintptr_t, int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
cimport openmp

from dod.atomics cimport dod_atomic_load_u32, dod_atomic_store_u32
from dod.tracker.config import MAX_THREADS


def sweep(double[::1] buf not None, int threads, int passes=1):
    """`passes` times over `buf`, each element ``x = (x + 1e-9) * 0.9999999``,
    the buffer split into `threads` contiguous parts (one per thread, a
    static schedule), one OpenMP region per pass. In place; returns None.

    ValueError for threads outside [1, MAX_THREADS] or passes < 1 (before
    anything is written); a read-only buffer is refused by its memoryview."""
    cdef Py_ssize_t n = buf.shape[0], part, step, i, i0, i1
    cdef int p
    cdef double* x
    if not 1 <= threads <= MAX_THREADS:
        raise ValueError(f"threads must be in [1, {MAX_THREADS}], not {threads}")
    if passes < 1:
        raise ValueError(f"passes must be >= 1, not {passes}")
    if n == 0:
        return
    x = &buf[0]
    step = (n + threads - 1) // threads      # (no division in the region's body)
    with nogil:
        for p in range(passes):
            for part in prange(threads, num_threads=threads, schedule="static"):
                i0 = part * step
                i1 = min(n, i0 + step)
                for i in range(i0, i1):
                    # (an add, then a multiply: no contraction into one
                    # fused step, so numpy's (x + b) * a is the same)
                    x[i] = (x[i] + 1e-9) * 0.9999999


cdef extern from "<sched.h>" nogil:
    int sched_yield()

cdef enum:
    _SPINS_BEFORE_YIELD = 4096      # ~microseconds of spinning: far past any round trip between two running cores


cdef inline void _wait_for(const uint32_t* line, uint32_t v) noexcept nogil:
    """Spin until *line == v; yield the CPU every _SPINS_BEFORE_YIELD reads
    (with more runnable threads than cores, the other side may need this
    one's core: a bare spin would burn its whole time slice)."""
    cdef uint32_t spins = 0
    while dod_atomic_load_u32(line) != v:
        spins += 1
        if spins == _SPINS_BEFORE_YIELD:
            sched_yield()
            spins = 0


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


def round_trip_ns(int rounds=2000, int batches=1):
    """Nanoseconds for one cache line to go from one thread to another and
    back: two OpenMP threads pass a flag between them `rounds` times a
    batch (each spins on the line, without a pause, until the other has
    written it, yielding the CPU only after thousands of reads); the
    median over `batches` of a batch's time over its rounds, after one
    batch untimed (the first region may start the runtime's threads). NaN when the OpenMP runtime gives the region fewer
    than two threads (OMP_THREAD_LIMIT=1, say).

    ValueError for rounds or batches outside [1, 1_000_000] (before anything runs)."""
    cdef uint32_t box[32]       # 128 bytes: a whole 64-byte line inside
    cdef uint32_t* line = <uint32_t*>((<uintptr_t>&box[0] + 63) & ~(<uintptr_t>63))
    cdef double[::1] per
    cdef int b, r, w
    cdef int64_t t0
    if not 1 <= rounds <= 1_000_000:
        raise ValueError(f"rounds must be in [1, 1000000], not {rounds}")
    if not 1 <= batches <= 1_000_000:
        raise ValueError(f"batches must be in [1, 1000000], not {batches}")
    per = np.full(batches + 1, np.nan)
    dod_atomic_store_u32(line, 0)
    with nogil, parallel(num_threads=2):
        w = threadid()
        if openmp.omp_get_num_threads() == 2:
            for b in range(batches + 1):
                if w == 0:
                    t0 = _now_ns()
                    for r in range(rounds):
                        dod_atomic_store_u32(line, 1)
                        _wait_for(line, 0)
                    per[b] = <double>(_now_ns() - t0) / rounds
                else:
                    for r in range(rounds):
                        _wait_for(line, 1)
                        dod_atomic_store_u32(line, 0)
    return float(np.median(per[1:]))
