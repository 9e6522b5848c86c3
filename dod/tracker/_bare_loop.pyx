"""A bare parallel loop: the machine's own speedup, to read the tick's against.

On a shared machine a thread count's speedup moves with the moment (the
other tenants' use of the caches and of memory): on the 2-core VMs of issue
12 this loop, which has no serial part, no shared write and no imbalance
(each thread rewrites its own contiguous part of a buffer), gave 0.93x to
1.91x over one thread at 10,000 targets' size in six runs of the bench. So ``python -m
dod.tracker.bench`` times :func:`sweep` over a buffer sized to the
tracker's rows, in the same blocks as the ticks, and prints its speedup
beside the tick's. It is a yardstick for the machine at that moment, not a
ceiling: the loop is all memory traffic, so once its buffer outgrows the
caches it is bound by the memory's bandwidth, which the tick, with more
arithmetic per byte, is less (100,000 targets: the tick 1.67x, the loop
1.37x in one run; 10,000: 1.74x and 1.72x).

The loop runs on the same OpenMP runtime as the tick (libgomp's persistent
pool, the same wait policy), one parallel region per pass, like the tick's
passes over its rows. Each element is updated alone, so the result is the
same bit for bit for every thread count.
"""
from cython.parallel cimport prange

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
