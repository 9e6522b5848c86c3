"""Concurrent allocators (dod.lfpool, dod.segfit) against glibc malloc, same run.

Each workload: N threads (nogil, started together by dod.bench._threads)
allocate and free 64-byte blocks from one shared allocator, batches of 32.
time_* are the wall time of one run (thread start included, constant per N);
track_* are the C-timed figures: ns per allocation, scaling against the same
allocator's own 1-thread rate, CAS retries per operation, and metadata bytes
per allocation at one million 64-byte allocations.
"""
import os

ITERATIONS = 20000            # x 32 allocations per thread
THREADS = [1, 2]
if os.environ.get("DOD_BENCH_THREADS"):
    THREADS = sorted({int(x) for x in os.environ["DOD_BENCH_THREADS"].split(",") if x.strip()} | {1})
KERNELS = ["malloc", "lfpool", "segfit"]


def _load():
    try:
        from dod.bench._concurrent_kernels import Bench
        from dod.bench._threads import run_threads
    except ImportError as exc:          # a commit before the concurrent allocators
        raise NotImplementedError(str(exc))
    return Bench, run_threads


class Scaling:
    params = (KERNELS, THREADS)
    param_names = ["allocator", "threads"]
    timeout = 120

    def setup(self, allocator, threads):
        Bench, self.run_threads = _load()
        self.bench = Bench(64)
        self.kernel = self.bench.kernel(allocator)
        self.run_threads(self.kernel, max(THREADS), ITERATIONS // 4)       # grow pools, fault pages

    def _median(self, threads, repeat=5):
        runs = sorted((self.run_threads(self.kernel, threads, ITERATIONS) for _ in range(repeat)),
                      key=lambda r: r.rate)
        return runs[len(runs) // 2]

    def time_alloc_free(self, allocator, threads):
        self.run_threads(self.kernel, threads, ITERATIONS)

    def track_ns_per_allocation(self, allocator, threads):
        return self._median(threads).ns_per_op
    track_ns_per_allocation.unit = "ns"

    def track_scaling_vs_own_one_thread(self, allocator, threads):
        return self._median(threads).rate / self._median(1).rate
    track_scaling_vs_own_one_thread.unit = "x"

    def track_vs_malloc_same_threads(self, allocator, threads):
        """malloc's ns per allocation over this allocator's, same thread count (>1: faster)."""
        mine = self._median(threads).ns_per_op
        theirs = Scaling()
        theirs.setup("malloc", threads)
        return theirs._median(threads).ns_per_op / mine
    track_vs_malloc_same_threads.unit = "x"

    def track_cas_retries_per_op(self, allocator, threads):
        before = self.bench.cas_retries(allocator)
        r = self.run_threads(self.kernel, threads, ITERATIONS)
        return (self.bench.cas_retries(allocator) - before) / r.ops
    track_cas_retries_per_op.unit = "retries"


class MetadataOverhead:
    params = (["malloc", "segfit", "lfpool"],)
    param_names = ["allocator"]
    timeout = 120

    def setup(self, allocator):
        _load()
        from dod.bench import _concurrent_kernels as K
        self.fn = {"malloc": K.overhead_malloc, "segfit": K.overhead_segfit,
                   "lfpool": K.overhead_lfpool}[allocator]

    def track_bytes_per_allocation_1M_x_64B(self, allocator):
        nbytes, _ = self.fn(1_000_000, 64)
        return (nbytes - 64_000_000) / 1_000_000
    track_bytes_per_allocation_1M_x_64B.unit = "bytes"

    def time_1M_x_64B_fresh(self, allocator):
        self.fn(1_000_000, 64)
