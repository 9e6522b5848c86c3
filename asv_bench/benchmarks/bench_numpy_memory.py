"""asv: numpy's own allocations from a dod arena (NEP 49 handler) against numpy's default.

Goals (issue 15), compared inside one run: a pure-numpy step (a synthetic step
of 50 temporaries from 8 KB to 4 MB; 4 MB temporaries that die at once; the
numpy reference tracker's tick at N = 1,000) makes zero data allocations
outside the arena per tick and is not slower than the default handler;
page faults per tick; the reference tracker inside Loop(numpy_scratch=True)
serves every numpy array from scratch. The malloc-call counts with an
LD_PRELOAD counter are in ``python -m dod.bench --only numpy_memory`` and
``python -m dod.tracker.bench_numpy`` (asv cannot preload into its workers).
Skipped (NotImplementedError) on commits without dod.numpy_memory.
"""
import resource

import numpy as np

from ._util import require

WORKLOADS = ["synthetic", "big4mb"]
HANDLERS = ["default", "dod"]


def _steps():
    bench = require("dod.bench.numpy_memory")
    src = np.ones(bench.BIG // 8)
    return bench, {"synthetic": lambda: bench._synthetic_step(src),
                   "big4mb": lambda: bench._big_step(src)}


class NumpyStep:
    """One tick of a pure-numpy step under numpy's default handler or arena.numpy()."""

    params = (WORKLOADS, HANDLERS)
    param_names = ["workload", "handler"]
    number = 1
    repeat = 20
    warmup_time = 0

    def setup(self, workload, handler):
        require("dod.numpy_memory")
        from dod.arena import Arena

        _, steps = _steps()
        self.step = steps[workload]
        self.arenas = [Arena(64 << 20), Arena(64 << 20)] if handler == "dod" else None
        self.k = 0
        for _ in range(3):
            self.tick()

    def tick(self):
        if self.arenas is None:
            self.step()
            return
        a = self.arenas[self.k & 1]
        with a.numpy():
            self.step()
        self.arenas[1 - (self.k & 1)].reset()
        self.k += 1

    def time_tick(self, workload, handler):
        self.tick()

    def track_page_faults_per_tick(self, workload, handler):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            self.tick()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 10
    track_page_faults_per_tick.unit = "faults"


class ReferenceTrackerLoop:
    """The numpy reference tracker at N = 1,000 in a Loop, with and without numpy_scratch."""

    params = [False, True]
    param_names = ["numpy_scratch"]
    timeout = 300

    def setup_cache(self):
        try:
            require("dod.numpy_memory")
            tb = require("dod.tracker.bench_numpy")
        except NotImplementedError:
            return {"missing": True}
        counter = require("dod.bench.numpy_memory").Counter()
        return {flag: tb._tracker(40, flag, counter) for flag in self.params}

    def setup(self, data, numpy_scratch):
        if data.get("missing"):
            raise NotImplementedError("dod.numpy_memory not in this commit")

    def track_tick_us(self, data, numpy_scratch):
        return data[numpy_scratch]["ns"] / 1e3
    track_tick_us.unit = "us"

    def track_page_faults_per_tick(self, data, numpy_scratch):
        return data[numpy_scratch]["faults"]
    track_page_faults_per_tick.unit = "faults"

    def track_fallbacks_per_tick(self, data, numpy_scratch):
        """numpy data allocations that reached numpy's default handler (0 is the goal)."""
        return data[numpy_scratch].get("fallbacks", float("nan"))
    track_fallbacks_per_tick.unit = "allocations"
