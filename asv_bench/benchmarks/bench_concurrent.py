"""Concurrent allocators against glibc malloc, same run: the allocator article's
scaling benchmark (dod.bench.concurrent).

Each workload: N threads (nogil, started together by dod.bench._threads), one
allocator shared by all of them, allocate/free pairs over a window of 64
live blocks per thread, with random sizes across SegFit's classes up to 1 KiB
("random") or 64 bytes ("single"). Allocators: glibc, AtomicArena,
LockFreePool and SegFit, each shared and through per-thread caches.
time_* are the wall time of one run (thread start included, constant per N);
track_* are the C-timed figures: ns per operation, scaling against the same
allocator's own 1-thread rate, rate against glibc at the same thread count,
CAS retries per operation, and metadata bytes per allocation at one million
64-byte allocations.
"""
import os

ITERATIONS = 200_000          # operations per thread
THREADS = [1, 2]
if os.environ.get("DOD_BENCH_THREADS"):
    THREADS = sorted({int(x) for x in os.environ["DOD_BENCH_THREADS"].split(",") if x.strip()} | {1})
KERNELS = ["malloc", "arena_shared", "arena_cached", "lfpool_shared", "lfpool_cached",
           "segfit_shared", "segfit_cached"]
PATTERNS = ["random", "single"]


def _load():
    try:
        from dod.bench._concurrent_kernels import Bench, KINDS
        from dod.bench._threads import run_threads
    except ImportError as exc:          # a commit before the concurrent allocators
        raise NotImplementedError(str(exc))
    return Bench, KINDS, run_threads


class Scaling:
    params = (PATTERNS, KERNELS, THREADS)
    param_names = ["pattern", "allocator", "threads"]
    timeout = 120

    def setup(self, pattern, allocator, threads):
        Bench, kinds, self.run_threads = _load()
        if allocator not in kinds:      # a commit before the thread caches
            raise NotImplementedError(allocator)
        self.bench = Bench(pattern)
        self.kernel = self.bench.kernel(allocator)
        self.run_threads(self.kernel, max(THREADS), ITERATIONS // 4)       # grow pools, fault pages

    def _median(self, threads, repeat=5, kernel=None):
        k = kernel or self.kernel
        runs = sorted((self.run_threads(k, threads, ITERATIONS) for _ in range(repeat)),
                      key=lambda r: r.rate)
        return runs[len(runs) // 2]

    def time_alloc_free(self, pattern, allocator, threads):
        self.run_threads(self.kernel, threads, ITERATIONS)

    def track_ns_per_operation(self, pattern, allocator, threads):
        return self._median(threads).ns_per_op
    track_ns_per_operation.unit = "ns"

    def track_scaling_vs_own_one_thread(self, pattern, allocator, threads):
        return self._median(threads).rate / self._median(1).rate
    track_scaling_vs_own_one_thread.unit = "x"

    def track_vs_malloc_same_threads(self, pattern, allocator, threads):
        """This allocator's rate over glibc's, same pattern and thread count (>1: faster)."""
        malloc = self.bench.kernel("malloc")
        self.run_threads(malloc, max(THREADS), ITERATIONS // 4)
        return self._median(threads).rate / self._median(threads, kernel=malloc).rate
    track_vs_malloc_same_threads.unit = "x"

    def track_cas_retries_per_op(self, pattern, allocator, threads):
        before = self.bench.cas_retries(allocator)
        if before is None:
            return 0.0                  # no compare-and-swap (malloc, the arena's fetch-add)
        r = self.run_threads(self.kernel, threads, ITERATIONS)
        return (self.bench.cas_retries(allocator) - before) / r.ops
    track_cas_retries_per_op.unit = "retries"


class MetadataOverhead:
    params = (KERNELS,)
    param_names = ["allocator"]
    timeout = 120

    def setup(self, allocator):
        _load()
        from dod.bench import concurrent
        if not hasattr(concurrent, "overhead"):
            raise NotImplementedError("dod.bench.concurrent.overhead")
        self.overhead = concurrent.overhead

    def track_bytes_per_allocation_1M_x_64B(self, allocator):
        return self.overhead(1_000_000, 64, only=allocator)[allocator][0]
    track_bytes_per_allocation_1M_x_64B.unit = "bytes"

    def time_1M_x_64B_fresh(self, allocator):
        self.overhead(1_000_000, 64, only=allocator)
