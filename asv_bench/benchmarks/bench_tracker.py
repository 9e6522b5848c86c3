"""asv: the dod tracker against the numpy reference tracker, same run.

Goals (issue 5): N = 1,000 median tick <= 0.5 ms, p99 <= 1 ms, >= 5x the
reference; N = 10,000 p99 <= 10 ms; zero allocations per tick.

time_tick times one tick of a tracker warmed on the scenario's first scans
(number = 1: setup re-warms before every sample, so every sample is the same
steady-state tick). track_* report medians/p99 over a window of ticks timed
with perf_counter_ns, the reference/dod ratio, and allocations per tick.
Skipped (NotImplementedError) on commits without dod.tracker.
"""
import gc
import time
import tracemalloc

from ._util import management

try:
    import numpy as np

    from dod.tracker import ReferenceTracker, Tracker, TrackerConfig
    from dod.tracker.scenario import generate
except ImportError:         # an older commit: nothing to measure
    Tracker = None

WARMUP = 40


def _need():
    if Tracker is None:
        raise NotImplementedError("dod.tracker not in this commit")


def _scenario(n, scans):
    sc = generate(n, scans, seed=0, pd=0.9)
    cfg = TrackerConfig(capacity=max(64, 4 * n), max_detections=max(64, 2 * n + 64), **management(TrackerConfig))
    return sc, cfg


def _warm(make, cfg, sc, upto):
    t = make(cfg)
    for z in sc.detections[:upto]:
        t.tick(z, sc.dt)
    return t


def _window(t, sc, start, count):
    """Wall-clock ms per tick (and the thread CPU ms: the work without preemption)."""
    ms, cpu = [], []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for z in sc.detections[start:start + count]:
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            t.tick(z, sc.dt)
            ms.append((time.perf_counter_ns() - t0) / 1e6)
            cpu.append((time.thread_time_ns() - c0) / 1e6)
    finally:
        if gc_was:
            gc.enable()
    return np.array(ms), np.array(cpu)


class TrackerTick:
    """One steady-state tick: dod and the reference, N targets, clutter 0.2 N, Pd 0.9."""

    params = ([10, 100, 1000, 10000], ["dod", "reference"])
    param_names = ["n", "tracker"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, n, which):
        _need()
        if which == "reference" and n > 1000:
            raise NotImplementedError("reference at N=10000 takes minutes of setup")
        self.sc, cfg = _scenario(n, WARMUP + 1)
        make = Tracker if which == "dod" else ReferenceTracker
        self.t = _warm(make, cfg, self.sc, WARMUP)
        self.z = self.sc.detections[WARMUP]

    def time_tick(self, n, which):
        self.t.tick(self.z, self.sc.dt)


class TrackerEvents:
    """One steady-state tick at N = 10,000 with the scan's events recorded
    (``events=True``) and without, same scans (goal: at most 5 % more)."""

    params = ["off", "on"]
    param_names = ["events"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, events):
        _need()
        self.sc, cfg = _scenario(10000, WARMUP + 1)
        try:
            make = (lambda c: Tracker(c, events=True)) if events == "on" else Tracker
            self.t = _warm(make, cfg, self.sc, WARMUP)
        except (TypeError, ValueError):         # a commit before events=
            raise NotImplementedError("TrackerConfig(events=...) not in this commit")
        self.z = self.sc.detections[WARMUP]

    def time_tick(self, events):
        self.t.tick(self.z, self.sc.dt)


class TrackerConfirmedInBox:
    """The confirmed tracks inside a window holding ~1/50 of them (what the
    demo samples GOSPA over above 2,000 targets): Tracker.confirmed_tracks(
    box=...), one pass, against the numpy baseline it replaced (a mask over
    the views' rows and fancy-indexed copies), on the same tracker."""

    params = ["box", "numpy mask"]
    param_names = ["how"]
    timeout = 300

    def setup(self, how):
        _need()
        n = 20_000
        sc, cfg = _scenario(n, 20)
        self.t = _warm(Tracker, cfg, sc, 20)
        w = sc.extent * np.sqrt(1 / 50) / 2
        self.lo, self.hi = np.full(2, -w), np.full(2, w)
        try:
            self.t.confirmed_tracks(box=(self.lo, self.hi))
        except TypeError:       # a commit before box=
            if how == "box":
                raise NotImplementedError("confirmed_tracks(box=...) not in this commit")

    def time_confirmed(self, how):
        t = self.t
        if how == "box":
            t.confirmed_tracks(box=(self.lo, self.hi))
        else:
            pos = t.positions
            status = t.status if hasattr(t, "status") else t.states     # (states: commits before the rename)
            m = (status == 2) & np.all((pos >= self.lo) & (pos <= self.hi), axis=1)
            t.ids[m].copy(), pos[m].copy()


class TrackerMotScores:
    """MOTA and IDF1 of 10 scans of 2,000 targets and the tracker's confirmed
    tracks (what the demo's summary scores at 100,000 targets): dod's
    clear_mot (grid and per-component assignments) against py-motmetrics
    (the dense matrix per scan), same values, same run."""

    params = ["clear_mot", "motmetrics"]
    param_names = ["how"]
    number = 1
    repeat = 3
    timeout = 300

    def setup(self, how):
        _need()
        try:
            from dod.tracker.metrics import clear_mot
        except ImportError:
            clear_mot = None
        if how == "clear_mot" and clear_mot is None:
            raise NotImplementedError("clear_mot not in this commit")
        if how == "motmetrics":
            try:
                import motmetrics
            except ImportError:
                raise NotImplementedError("motmetrics is not installed")
            self.mm = motmetrics
        self.clear_mot = clear_mot
        sc, cfg = _scenario(2000, 40)
        t = Tracker(cfg)
        est = []
        for z in sc.detections:
            t.tick(z, sc.dt)
            est.append(t.confirmed_tracks())
        self.frames = (sc.truth_ids[30:], sc.truth_pos[30:], [e[0] for e in est[30:]],
                       [e[1] for e in est[30:]])

    def time_scores(self, how):
        if how == "clear_mot":
            self.clear_mot(*self.frames, 5.0)
            return
        mm = self.mm
        acc = mm.MOTAccumulator(auto_id=True)
        for ti, tp, ei, ep in zip(*self.frames):
            acc.update(ti.tolist(), ei.tolist(), mm.distances.norm2squared_matrix(tp, ep, max_d2=25.0))
        mm.metrics.create().compute(acc, metrics=["mota", "idf1"], name="asv")


class TrackerWindow:
    """Median and p99 tick (ms) over a window of consecutive steady-state ticks."""

    params = [100, 1000, 10000]
    param_names = ["n"]
    timeout = 600
    COUNT = 100

    def setup_cache(self):
        if Tracker is None:     # setup() skips; raising here would print a traceback
            return {"missing": True}
        out = {}
        for n in self.params:
            sc, cfg = _scenario(n, WARMUP + self.COUNT)
            t = _warm(Tracker, cfg, sc, WARMUP)
            dod, cpu = _window(t, sc, WARMUP, self.COUNT)
            out[n] = (float(np.median(dod)), float(np.percentile(dod, 99)),
                      float(np.percentile(cpu, 99)))
        return out

    def setup(self, data, n):
        _need()

    def track_median_ms(self, data, n):
        return data[n][0]
    track_median_ms.unit = "ms"
    track_median_ms.goal = {1000: 0.5}             # read by asv_bench/plot_history.py

    def track_p99_ms(self, data, n):
        return data[n][1]
    track_p99_ms.unit = "ms"
    track_p99_ms.goal = {1000: 1.0, 10000: 10.0}

    def track_p99_cpu_ms(self, data, n):
        """p99 of the thread CPU time per tick: the work, without preemption."""
        return data[n][2]
    track_p99_cpu_ms.unit = "ms"



class TrackerSpeedup:
    """Reference median / dod median over the same steady-state window (goal >= 5x at N=1000)."""

    params = [100, 1000]
    param_names = ["n"]
    timeout = 600
    COUNT = 40

    def setup_cache(self):
        if Tracker is None:
            return {"missing": True}
        out = {}
        for n in self.params:
            sc, cfg = _scenario(n, WARMUP + self.COUNT)
            dod = _window(_warm(Tracker, cfg, sc, WARMUP), sc, WARMUP, self.COUNT)[0]
            ref = _window(_warm(ReferenceTracker, cfg, sc, WARMUP), sc, WARMUP, self.COUNT)[0]
            out[n] = float(np.median(ref)) / float(np.median(dod))
        return out

    def setup(self, data, n):
        _need()

    def track_speedup_vs_reference(self, data, n):
        return data[n]
    track_speedup_vs_reference.unit = "x"
    track_speedup_vs_reference.goal = {1000: 5.0}


class TrackerAllocations:
    """Allocations per tick in steady state (goal: 0)."""

    def setup(self):
        _need()
        self.sc, cfg = _scenario(100, WARMUP + 300)
        self.t = _warm(Tracker, cfg, self.sc, WARMUP)

    def track_blocks_per_tick(self):
        import sys

        scans = self.sc.detections[WARMUP:]
        tick, dt = self.t.tick, self.sc.dt
        for z in scans:                 # a first pass: one-time effects settle
            tick(z, dt)

        def blocks(body):
            b0 = sys.getallocatedblocks()
            body()
            return sys.getallocatedblocks() - b0

        def empty():
            for z in scans:
                pass

        def ticks():
            for z in scans:
                tick(z, dt)

        # The same measurement around an empty loop: its own objects cancel out.
        return (blocks(ticks) - blocks(empty)) / len(scans)
    track_blocks_per_tick.unit = "blocks"
    track_blocks_per_tick.goal = 0

    def track_ticks_that_allocate(self):
        """Ticks (of 300) during which the traced peak rose: transient allocations too."""
        scans = self.sc.detections[WARMUP:]
        t = self.t
        rising = 0
        tracemalloc.start()
        try:
            for i, z in enumerate(scans):
                cur, _ = tracemalloc.get_traced_memory()
                tracemalloc.reset_peak()
                t.tick(z, self.sc.dt)
                _, peak = tracemalloc.get_traced_memory()
                if i >= 2 and peak > cur:
                    rising += 1
        finally:
            tracemalloc.stop()
        return rising
    track_ticks_that_allocate.unit = "ticks"


class TrackerAccuracyInClutter:
    """Accuracy in clutter (issue 14), reduced size: N = 200, 100 scans, one
    seed, clutter 0.2 and 1 per target per scan, m_of_n against
    score + two-point (dod.tracker.accuracy; the full table is
    ``python -m dod.tracker.bench --accuracy``). Commits before
    metrics.clear_mot scored with py-motmetrics: skipped there without it."""

    params = ([0.2, 1.0], ["m_of_n", "score+2pt"])
    param_names = ["clutter", "tracker"]
    timeout = 900

    def setup_cache(self):
        try:
            from dod.tracker import accuracy
            rows = accuracy.run(targets=200, scans=100, seeds=1, clutters=tuple(self.params[0]),
                                out=lambda *a: None)
        except ImportError:
            return {"missing": True}
        return {(r["clutter"], r["tracker"]): r for r in rows}

    def setup(self, data, clutter, tracker):
        if "missing" in data:
            raise NotImplementedError("dod.tracker.accuracy or motmetrics not available")

    def track_mota(self, data, clutter, tracker):
        return data[(clutter, tracker)]["mota"]
    track_mota.unit = "MOTA"

    def track_hota(self, data, clutter, tracker):
        return data[(clutter, tracker)]["hota"]
    track_hota.unit = "HOTA"

    def track_idf1(self, data, clutter, tracker):
        return data[(clutter, tracker)]["idf1"]
    track_idf1.unit = "IDF1"

    def track_false_confirmed_per_scan(self, data, clutter, tracker):
        return data[(clutter, tracker)]["false_per_scan"]
    track_false_confirmed_per_scan.unit = "tracks"

    def track_tick_ms(self, data, clutter, tracker):
        """Median tick, the two trackers fed the same scans alternately."""
        return data[(clutter, tracker)]["tick_ms"]
    track_tick_ms.unit = "ms"
