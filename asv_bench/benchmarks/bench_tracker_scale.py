"""asv: the tracker at scale (issue 12): N = 100,000 at threads 1 and 2, the
time per track per tick at 10k vs 100k, and allocations per tick with threads;
beside the speedup, the bench's bare parallel loop's (the machine's own).

Goals: N = 100,000, threads = 2: p99 <= 20 ms on a 2-core machine; threads
1 -> 2 >= 1.7x; ns per track at 100k within 1.3x of 10k; zero allocations per
tick at every thread count. Scans stream from ``scenario.iter_scans`` (a
100k-target scenario held whole would be gigabytes). Skipped
(NotImplementedError) on commits without TrackerConfig.threads.
"""
import gc
import sys
import time

from ._util import management, openmp_env, skip

openmp_env()        # before the engine loads libgomp, as the bench and the demo

try:
    import numpy as np

    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.scenario import iter_scans
    HAVE = hasattr(TrackerConfig, "threads")     # a field (a class default) or, since the parts, a property
except ImportError:
    HAVE = False
try:
    from dod.tracker._bare_loop import sweep
    from dod.tracker.bench import LOOP_PASSES, loop_buffer
except ImportError:         # commits before the bench's bare loop
    sweep = None
try:
    from dod.tracker._bare_loop import round_trip_ns
except ImportError:         # commits before the round trip
    round_trip_ns = None

WARMUP = 30


def _need():
    if not HAVE:
        raise NotImplementedError("TrackerConfig.threads not in this commit")


def _run(n, threads, count, **config):
    """(p50 ms, p99 ms, ns per live track at p50, blocks retained per timed tick)."""
    cfg = TrackerConfig(capacity=4 * n, max_detections=2 * n + 64, threads=threads,
                        **{**management(TrackerConfig), **config})
    t = Tracker(cfg)
    if hasattr(t, "prefault"):
        t.prefault()    # as the bench and the demo: no first-touch faults in the window
    # preallocated: a list growing by a float per tick would count as the tick's blocks
    ms, rows = np.zeros(count), np.zeros(count)
    was = gc.isenabled()
    gc.disable()
    try:
        at = np.zeros(2, np.int64)      # the two reads (kept as ints, b1 would count b0's)
        for s, scan in enumerate(iter_scans(n, WARMUP + count, seed=0, pd=0.9)):
            z, dt = scan.detections, scan.dt
            if s == WARMUP:
                at[0] = sys.getallocatedblocks()
            t0 = time.perf_counter_ns()
            t.tick(z, dt)
            t1 = time.perf_counter_ns()
            if s >= WARMUP:
                ms[s - WARMUP] = (t1 - t0) / 1e6
                rows[s - WARMUP] = len(t)
            if s == WARMUP + count - 1:
                # read with the stream still open (its end frees the scenario's
                # objects); the scans are numpy arrays freed each round: what
                # stays between the two reads is the ticks'
                at[1] = sys.getallocatedblocks()
        blocks = float(at[1] - at[0]) / max(1, count)
    finally:
        if was:
            gc.enable()
    return (float(np.median(ms)), float(np.percentile(ms, 99)),
            1e6 * float(np.median(ms)) / float(np.median(rows)), blocks)


def _bare_loop_speedup(n, threads, count):
    """p50 of the bench's bare parallel loop (the machine's own speedup) at one
    thread over that at `threads`, the two alternating call by call."""
    buf = loop_buffer(n)
    ms = {1: [], threads: []}
    for _ in range(count):
        for th in ms:
            t0 = time.perf_counter_ns()
            sweep(buf, th, LOOP_PASSES)
            ms[th].append(time.perf_counter_ns() - t0)
    return float(np.median(ms[1])) / float(np.median(ms[threads]))


class _Windows:
    """The rows both classes report from setup_cache's {(n, threads): _run(...)}
    (a leading underscore: asv does not collect this class itself)."""

    param_names = ["n", "threads"]
    timeout = 1200
    COUNT = 40

    def setup(self, data, n, threads):
        _need()

    def track_p50_ms(self, data, n, threads):
        return data[(n, threads)][0]
    track_p50_ms.unit = "ms"

    def track_p99_ms(self, data, n, threads):
        return data[(n, threads)][1]
    track_p99_ms.unit = "ms"

    def track_blocks_per_tick(self, data, n, threads):
        """Python blocks retained per tick (goal: 0; includes nothing of the scan stream)."""
        return data[(n, threads)][3]
    track_blocks_per_tick.unit = "blocks"


class TrackerScale(_Windows):
    """One tracker per (N, threads), 30 warm-up scans, then a timed window."""

    params = ([10000, 100000], [1, 2])

    def setup_cache(self):
        if not HAVE:
            return {"missing": True}
        data = {(n, th): _run(n, th, self.COUNT) for n in self.params[0] for th in self.params[1]}
        if sweep is not None:
            for n in self.params[0]:
                for th in self.params[1]:
                    data[("loop", n, th)] = _bare_loop_speedup(n, th, self.COUNT)
        if round_trip_ns is not None:
            for n in self.params[0]:
                data[("trip", n)] = round_trip_ns(2000, 15)
        return data

    def track_ns_per_track(self, data, n, threads):
        """Median tick / live rows: flat from 10k to 100k when the tick scales linearly."""
        return data[(n, threads)][2]
    track_ns_per_track.unit = "ns"

    def track_per_track_ratio_100k_over_10k(self, data, n, threads):
        """ns per track at 100k over that at 10k (goal <= 1.3); reported on the n=100000 rows."""
        if n != 100000:
            skip("reported on n=100000")
        return data[(100000, threads)][2] / data[(10000, threads)][2]
    track_per_track_ratio_100k_over_10k.unit = "x"

    def track_speedup_vs_one_thread(self, data, n, threads):
        return data[(n, 1)][0] / data[(n, threads)][0]
    track_speedup_vs_one_thread.unit = "x"

    def track_bare_loop_speedup(self, data, n, threads):
        """The bench's bare parallel loop (256 bytes per target, no serial part)
        at `threads` against one thread, timed after the trackers: what the
        machine gave, to read track_speedup_vs_one_thread against."""
        if ("loop", n, threads) not in data:
            skip("no dod.tracker._bare_loop in this commit")
        return data[("loop", n, threads)]
    track_bare_loop_speedup.unit = "x"

    def track_round_trip_ns(self, data, n, threads):
        """A cache line's round trip between two threads (round_trip_ns),
        timed after the trackers; reported on the threads=2 rows. On the
        2-core VMs ~80-90 ns, or ~350-380 when the two vCPUs ran far apart,
        and then the 2-thread tick at 10k was no faster than one thread."""
        if threads != 2:
            skip("reported on threads=2")
        if ("trip", n) not in data:
            skip("no round_trip_ns in this commit")
        return data[("trip", n)]
    track_round_trip_ns.unit = "ns"


class TrackerScaleTwoPoint(_Windows):
    """N = 100,000 as the demo runs it (initiation="two_point": tracks start
    from pairs of detections), threads 1 and 2. Its births took rows in scan
    order until 2026-12-04 (the tick ~1.2x longer at 100k, ~1.7x at 1M)."""

    params = ([100000], [1, 2])

    def setup_cache(self):
        if not HAVE:
            return {"missing": True}
        return {(n, th): _run(n, th, self.COUNT, initiation="two_point")
                for n in self.params[0] for th in self.params[1]}


def _sort_ms(n, threads, count):
    """Median of the sort pass (Tracker.profile, ms) over `count` ticks of a
    tracker that sorts after every tick (sort_every=1), after WARMUP ticks."""
    cfg = TrackerConfig(capacity=4 * n, max_detections=2 * n + 64, threads=threads, sort_every=1,
                        **management(TrackerConfig))
    t = Tracker(cfg)
    t.prefault()
    t.profile = True
    ms = []
    for s, scan in enumerate(iter_scans(n, WARMUP + count, seed=0, pd=0.9)):
        t.tick(scan.detections, scan.dt)
        if s >= WARMUP:
            ms.append(t.last_profile()["sort"][0])
    return float(np.median(ms))


def _scans_per_sort(n, scans):
    """Scans over the sorts that the default triggers (sort_when_mixed,
    sort_when_displaced) made in `scans` scans, the first included (the
    same at every thread count: one thread)."""
    t = Tracker(TrackerConfig(capacity=4 * n, max_detections=2 * n + 64, **management(TrackerConfig)))
    t.prefault()
    for scan in iter_scans(n, scans, seed=0, pd=0.9):
        t.tick(scan.detections, scan.dt)
    return scans / max(1, t.sorts)


class TrackerSort:
    """The tracker's spatial sort at N = 100,000: its price (the sort pass of
    a tick, sorting after every tick) and how rarely the default triggers
    call it. A tick that sorts pays the sort on top, so wherever sorts are
    more than 1 % of the ticks a sort's tick is the p99: at 1M on 16 cores
    a sort cost ~21 ms (twenty-fourth session) against a 20 ms goal. The
    sort is bound by memory traffic (at 1M: 85-88 ms at one thread, 81-83 at
    two on the 2-core VMs); the one-thread row is the one to compare across
    commits. Skipped on commits without Tracker.profile or Tracker.sorts."""

    params = ([100000], [1, 2])
    param_names = ["n", "threads"]
    timeout = 1200
    COUNT = 15
    SCANS = 250

    def setup_cache(self):
        if not HAVE or not hasattr(Tracker, "profile") or not hasattr(Tracker, "sorts"):
            return {"missing": True}
        data = {(n, th): _sort_ms(n, th, self.COUNT) for n in self.params[0] for th in self.params[1]}
        for n in self.params[0]:
            data[("every", n)] = _scans_per_sort(n, self.SCANS)
        return data

    def setup(self, data, n, threads):
        if "missing" in data:
            raise NotImplementedError("Tracker.profile or Tracker.sorts not in this commit")

    def track_sort_ms(self, data, n, threads):
        return data[(n, threads)]
    track_sort_ms.unit = "ms"

    def track_scans_per_sort(self, data, n, threads):
        """Scans per sort under the default triggers (higher: rarer sorts);
        reported on the threads=1 rows (the ticks are the same at every count)."""
        if threads != 1:
            skip("reported on threads=1")
        return data[("every", n)]
    track_scans_per_sort.unit = "scans"
