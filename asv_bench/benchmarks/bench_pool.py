"""asv: pool and free list against malloc/free (and Python objects), same run.

Every goal of the pools issue is here; time_* benchmarks time whole kernels
(asv's own timer), track_* report C-timed per-operation costs and ratios.
Skipped (NotImplementedError) on commits without dod.pool / dod.freelist.
"""
from ._util import require, speedup

K = Pool = FreeList = py_churn = py_throughput = None


def _need():
    """Import what the suite measures, or skip (NotImplementedError) on older commits."""
    global K, Pool, FreeList, py_churn, py_throughput
    K = require("dod.bench._pool_kernels")
    Pool = require("dod.pool").Pool
    FreeList = require("dod.freelist").FreeList
    bench = require("dod.bench.pool")
    py_churn, py_throughput = bench.py_churn, bench.py_throughput


def _median(fn, repeat=5):
    values = sorted(fn() for _ in range(repeat))
    return values[len(values) // 2]


class PoolPair:
    """Goal: <= 1.5 ns per acquire+release pair, >= 3x malloc/free (64-byte blocks).

    Each pair acquires a block and releases the one acquired 16 pairs earlier
    (see _pool_kernels.pyx: an immediate acquire-release folds away)."""

    N = 1_000_000

    def setup(self):
        _need()
        self.pool = Pool(1024, block_size=64)
        self.locked = Pool(1024, block_size=64, threadsafe=True)
        self.res = Pool(1024, block_size=64).resource()

    def time_pool_engine_local(self):
        K.pair_pool_local(self.pool, self.N)

    def time_pool_engine_owner(self):
        K.pair_pool(self.pool, self.N)

    def time_pool_engine_locked(self):
        K.pair_pool_locked(self.locked, self.N)

    def time_pool_through_resource(self):
        K.pair_resource(self.res, 64, self.N)

    def time_malloc_free(self):
        K.pair_malloc(64, self.N)

    def track_ns_per_pair_pool(self):
        return _median(lambda: K.pair_pool_local(self.pool, self.N)) / self.N
    track_ns_per_pair_pool.unit = "ns"
    track_ns_per_pair_pool.goal = 1.5              # read by asv_bench/plot_history.py

    def track_ns_per_pair_resource_indirection(self):
        return _median(lambda: K.pair_resource(self.res, 64, self.N)) / self.N
    track_ns_per_pair_resource_indirection.unit = "ns"

    def track_speedup_pool_vs_malloc(self):
        return speedup(lambda: K.pair_malloc(64, self.N), lambda: K.pair_pool_local(self.pool, self.N))
    track_speedup_pool_vs_malloc.unit = "x"
    track_speedup_pool_vs_malloc.goal = 3.0


class ParticleChurn:
    """75,000 live particles, 1,000 born and ~1,000 killed per frame. Goal: faster than malloc/free."""

    LIVE, BORN, FRAMES = 75_000, 1_000, 400     # enough frames that the untimed-in-C fill does not dominate time_

    def setup(self):
        _need()
        self.pool = Pool(self.LIVE + 4 * self.BORN, block_size=32)
        K.churn(self.pool, self.LIVE, 1, self.BORN, 1)      # fault the pages in before timing

    def time_pool(self):
        K.churn(self.pool, self.LIVE, self.FRAMES, self.BORN, 1)

    def time_malloc_free(self):
        K.churn(None, self.LIVE, self.FRAMES, self.BORN, 1)

    def time_python_objects(self):
        py_churn(self.LIVE, 5, self.BORN, 1)

    def track_speedup_pool_vs_malloc(self):
        return speedup(lambda: K.churn(None, self.LIVE, self.FRAMES, self.BORN, 1)[0],
                       lambda: K.churn(self.pool, self.LIVE, self.FRAMES, self.BORN, 1)[0])
    track_speedup_pool_vs_malloc.unit = "x"


class ParticleThroughput:
    """100,000 created then destroyed per frame. Goal: >= 10x malloc/free."""

    COUNT, FRAMES = 100_000, 5

    def setup(self):
        _need()
        self.pool = Pool(self.COUNT, block_size=32)
        K.throughput_local(self.pool, self.COUNT, 1)         # fault the pages in before timing

    def time_pool_local(self):
        K.throughput_local(self.pool, self.COUNT, self.FRAMES)

    def time_pool_owner(self):
        K.throughput(self.pool, self.COUNT, self.FRAMES)

    def time_malloc_free(self):
        K.throughput(None, self.COUNT, self.FRAMES)

    def time_python_objects(self):
        py_throughput(self.COUNT, 1)

    def track_speedup_pool_vs_malloc(self):
        return speedup(lambda: K.throughput(None, self.COUNT, self.FRAMES),
                       lambda: K.throughput_local(self.pool, self.COUNT, self.FRAMES))
    track_speedup_pool_vs_malloc.unit = "x"
    track_speedup_pool_vs_malloc.goal = 10.0


class FreeListMixedChurn:
    """Mixed sizes (16-512 B, 1,000 live): first fit, best fit, malloc/free. Report where malloc wins."""

    params = ["first", "best", "malloc"]
    param_names = ["allocator"]
    NLIVE, STEPS = 1_000, 100_000

    def setup(self, allocator):
        _need()
        self.owner = None if allocator == "malloc" else FreeList(4 * self.NLIVE * 544, strategy=allocator)

    def time_mixed_churn(self, allocator):
        K.mixed_churn(self.owner, self.NLIVE, self.STEPS, 16, 512, 7)

    def track_ns_per_step(self, allocator):
        return _median(lambda: K.mixed_churn(self.owner, self.NLIVE, self.STEPS, 16, 512, 7)[0]) / self.STEPS
    track_ns_per_step.unit = "ns"


class Bookkeeping:
    """Bytes of bookkeeping per live allocation at 1,000,000 x 64 B. Goal: pool 0."""

    N, SIZE = 1_000_000, 64

    def setup(self):
        _need()

    def track_bytes_pool(self):
        pool = Pool(self.N, block_size=self.SIZE)
        K.pool_fill(pool, self.N)
        return pool.stats()["capacity"] / self.N - self.SIZE
    track_bytes_pool.unit = "bytes"
    track_bytes_pool.goal = 0

    def track_bytes_freelist(self):
        fl = FreeList(self.N * (self.SIZE + 16) + 64)
        K.freelist_fill(fl, self.N, self.SIZE)
        return fl.used / self.N - self.SIZE
    track_bytes_freelist.unit = "bytes"

    def track_bytes_glibc_malloc(self):
        info, usable = K.malloc_overhead(self.N, self.SIZE)
        return info if info is not None else usable + 8
    track_bytes_glibc_malloc.unit = "bytes"
