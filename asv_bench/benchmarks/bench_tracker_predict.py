"""asv: the tracker's predict pass alone, one thread, at 1,000 and 100,000
targets, and at 100,000 its time over its memory floor.

The method of ``python -m dod.tracker.bench --floor``: a tracker whose n
confirmed tracks coast on empty scans (M-of-N 1 of 2 confirms every
single-point birth at its next scan, max_misses 2**32 - 1 keeps it through
any run of misses), so the profile's predict_gate pass gates nothing and
its time is predict's (each track moved a step, its innovation inverse and
gate half-widths written). The tracker is set up here from the public API
alone, not through the bench, so that commits from before the bench's
floor time the same pass (the before/after comparison of a layout change);
the floor ratio needs the bench's predict_bytes and copy_bandwidth and is
skipped without them.

Goals (the track table stored as lanes with the vector kernels, against the
row layout, one thread): predict >= 3x faster at 100,000 targets, no slower
at 1,000: compare track_predict_ms across commits (asv compare). Skipped
(NotImplementedError) on commits without Tracker.profile or M-of-N.
"""
import gc

from ._util import openmp_env, skip

openmp_env()        # before the engine loads libgomp, as the bench and the demo

try:
    import numpy as np

    from dod.tracker import Tracker, TrackerConfig
    HAVE = hasattr(Tracker, "profile") and hasattr(TrackerConfig, "max_misses")
except ImportError:
    HAVE = False
try:
    from dod.tracker.bench import copy_bandwidth, predict_bytes
except ImportError:         # commits before the bench's floor
    copy_bandwidth = None

DT = 0.02       # the empty scans' step (50 Hz)
WARMUP = 5      # empty ticks before the timed ones (the first confirms every track)


def _predict_ms(n, count):
    """(median predict_gate ms over `count` empty ticks, tracks live after them)."""
    cfg = TrackerConfig(capacity=max(64, 2 * n), max_detections=max(64, n + 64), confirmation="m_of_n",
                        initiation="single", confirm_m=1, confirm_n=2, max_misses=(1 << 32) - 1)
    t = Tracker(cfg)
    if hasattr(t, "prefault"):
        t.prefault()
    t.tick(np.random.default_rng(0).uniform(0.0, 20.0 * n ** 0.5, (n, 2)), DT)
    empty = np.empty((0, 2))
    ms = np.zeros(count)
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(WARMUP):
            t.tick(empty, DT)
        t.profile = True
        for i in range(count):
            t.tick(empty, DT)
            ms[i] = t.last_profile()["predict_gate"][0]
    finally:
        if was:
            gc.enable()
    return float(np.median(ms)), len(t)


class TrackerPredictPass:
    """The predict pass of n coasting confirmed tracks, one thread."""

    params = ([1000, 100000],)
    param_names = ["n"]
    timeout = 600
    COUNT = {1000: 200, 100000: 60}

    def setup_cache(self):
        if not HAVE:
            return {"missing": True}
        data = {}
        if copy_bandwidth is not None:
            data["bandwidth"] = copy_bandwidth(rounds=4)
        for n in self.params[0]:
            data[n] = _predict_ms(n, self.COUNT[n])
        if copy_bandwidth is not None:      # the best copy, before and after the ticks
            data["bandwidth"] = max(data["bandwidth"], copy_bandwidth(rounds=4))
        return data

    def setup(self, data, n):
        if "missing" in data:
            raise NotImplementedError("Tracker.profile or M-of-N management not in this commit")
        if data[n][1] != n:
            raise RuntimeError(f"{data[n][1]} of {n} tracks coasted through the timed ticks")

    def track_predict_ms(self, data, n):
        """Median of the predict pass (Tracker.profile's predict_gate on empty scans)."""
        return data[n][0]
    track_predict_ms.unit = "ms"

    def track_predict_ns_per_track(self, data, n):
        return 1e6 * data[n][0] / n
    track_predict_ns_per_track.unit = "ns"

    def track_predict_over_floor(self, data, n):
        """The pass's time over its memory floor: predict_bytes(2) per track,
        times n, over one core's copy bandwidth measured in the same run
        (1.0 would be a pass that only moves its bytes); on the n=100000 rows
        (at 1,000 targets the tracks sit in the caches: no memory floor)."""
        if n != 100000:
            skip("reported on n=100000")
        if "bandwidth" not in data:
            skip("no dod.tracker.bench.copy_bandwidth in this commit")
        floor_ms = 1e3 * sum(predict_bytes(2).values()) * n / data["bandwidth"]
        return data[n][0] / floor_ms
    track_predict_over_floor.unit = "x"
