"""The one-word atomic arena (dod.atomic_arena), pages and guard zones, against
glibc malloc and a plain bump in the same run.

Scaling: N threads (nogil, started together by dod.bench._threads) allocate
and free 64-byte blocks from one shared AtomicArena, batches of 32, either on
the shared word (one fetch-add per allocation) or through per-thread caches;
glibc malloc is the baseline. time_* are the wall time of one run; track_*
are the C-timed figures: ns per allocation and scaling against the same
allocator's own 1-thread rate (goal: thread cache >= 1.9x at 2 threads).
"""
import os

ITERATIONS = 20000            # x 32 allocations per thread
THREADS = [1, 2]
if os.environ.get("DOD_BENCH_THREADS"):
    THREADS = sorted({int(x) for x in os.environ["DOD_BENCH_THREADS"].split(",") if x.strip()} | {1})
KERNELS = ["malloc", "shared", "cached"]


def _kernels():
    try:
        from dod.bench import _atomic_kernels as K
        from dod.bench._threads import run_threads
    except ImportError as exc:          # a commit before the atomic arena
        raise NotImplementedError(str(exc))
    return K, run_threads


class AtomicScaling:
    params = (KERNELS, THREADS)
    param_names = ["allocator", "threads"]
    timeout = 120

    def setup(self, allocator, threads):
        K, self.run_threads = _kernels()
        self.bench = K.Bench(64)
        self.kernel = self.bench.kernel(allocator)
        self.run_threads(self.kernel, max(THREADS), ITERATIONS // 4)     # install blocks, fault pages

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


class AtomicContention:
    """Atomics on lines other threads write (the word, block counters) per
    allocation+free: independent of machine load, unlike the scaling ratio."""
    params = (["shared", "cached"], THREADS)
    param_names = ["allocator", "threads"]
    timeout = 120

    def setup(self, allocator, threads):
        K, self.run_threads = _kernels()
        self.bench = K.Bench(64)
        self.kernel = self.bench.kernel(allocator)

    def track_shared_atomics_per_op(self, allocator, threads):
        before = self.bench.shared_atomics()
        r = self.run_threads(self.kernel, threads, ITERATIONS)
        return (self.bench.shared_atomics() - before) / r.ops
    track_shared_atomics_per_op.unit = "atomics"


class FastPath:
    """One thread, allocation loop only: the shared word's locked add against a plain bump."""
    timeout = 120

    def setup(self):
        self.K, _ = _kernels()

    def track_ns_plain_bump(self):
        return self.K.fast_path(1 << 20)["bump"]
    track_ns_plain_bump.unit = "ns"

    def track_ns_locked_add(self):
        return self.K.fast_path(1 << 20)["xadd"]
    track_ns_locked_add.unit = "ns"

    def track_ns_thread_cache(self):
        return self.K.fast_path(1 << 20)["cache"]
    track_ns_thread_cache.unit = "ns"

    def track_locked_add_over_plain_bump(self):
        d = self.K.fast_path(1 << 20)
        return d["xadd"] / d["bump"]
    track_locked_add_over_plain_bump.unit = "x"

    def time_fast_path_all(self):
        self.K.fast_path(1 << 18)


class AtomicMetadataOverhead:
    params = (["malloc", "shared", "cached"],)
    param_names = ["allocator"]
    timeout = 120

    def setup(self, allocator):
        K, _ = _kernels()
        self.fn = {"malloc": lambda: K.overhead_malloc(1_000_000, 64),
                   "shared": lambda: K.overhead_atomic(1_000_000, 64, False),
                   "cached": lambda: K.overhead_atomic(1_000_000, 64, True)}[allocator]

    def track_bytes_per_allocation_1M_x_64B(self, allocator):
        nbytes, _ = self.fn()
        return (nbytes - 64_000_000) / 1_000_000
    track_bytes_per_allocation_1M_x_64B.unit = "bytes"

    def time_1M_x_64B_fresh(self, allocator):
        self.fn()


class PagesAndGuards:
    timeout = 120

    def setup(self):
        self.K, _ = _kernels()

    def track_ns_map_unmap_64KiB(self):
        return self.K.pages_cost(1 << 16, 2000)
    track_ns_map_unmap_64KiB.unit = "ns"

    def track_ns_guarded_alloc_free_64B(self):
        return self.K.guard_cost(64, 2000)["guard"]
    track_ns_guarded_alloc_free_64B.unit = "ns"

    def track_guard_over_malloc(self):
        d = self.K.guard_cost(64, 2000)
        return d["guard"] / d["malloc"]
    track_guard_over_malloc.unit = "x"

    def time_guarded_alloc_free_64B_x2000(self):
        self.K.guard_cost(64, 2000)
