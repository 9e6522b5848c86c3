"""asv: the range-bearing (EKF) tick against the Cartesian tick, same run.

Goal (issue 18): N = 1,000 range-bearing tick <= 1.3x the Cartesian tick on
the same detections (the Cartesian tracker gets them converted to
positions), zero allocations per tick. time_tick times one steady-state
tick of either; track_polar_over_cartesian is the ratio of medians over a
window where both tick each scan in turn (dod.tracker.bench_radar).
Skipped (NotImplementedError) on commits without range-bearing scans.
"""
import sys

from ._util import management

try:
    import numpy as np

    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.bench_radar import measure
    from dod.tracker.scenario import iter_radar_scans
except ImportError:         # an older commit: nothing to measure
    Tracker = None

WARMUP = 40


def _need():
    if Tracker is None:
        raise NotImplementedError("range-bearing scans not in this commit")


def _scans(n, k):
    return [(s.detections, np.ascontiguousarray(s.sensor.to_cartesian(s.detections)), s.dt, s.sensor)
            for s in iter_radar_scans(n, k, seed=0)]


class RadarTick:
    """One steady-state tick, N targets, two radars, clutter 0.2 N, Pd 0.9."""

    params = ([100, 1000], ["cartesian", "polar"])
    param_names = ["n", "measurement"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, n, which):
        _need()
        scans = _scans(n, WARMUP + 1)
        self.t = Tracker(TrackerConfig(r=3.0, capacity=4 * n, max_detections=2 * n + 64,
                                       **management(TrackerConfig)))
        for zp, zc, dt, s in scans[:WARMUP]:
            self.t.tick(zc, dt) if which == "cartesian" else self.t.tick(zp, dt, sensor=s)
        zp, zc, self.dt, self.s = scans[WARMUP]
        self.z = zc if which == "cartesian" else zp
        self.polar = which == "polar"

    def time_tick(self, n, which):
        if self.polar:
            self.t.tick(self.z, self.dt, self.s)
        else:
            self.t.tick(self.z, self.dt)


class RadarRatio:
    """Range-bearing median / Cartesian median, same detections, ticked in turn (goal <= 1.3 at N=1000)."""

    params = [1000]
    param_names = ["n"]
    timeout = 600

    def setup_cache(self):
        if Tracker is None:
            return {"missing": True}
        return {n: measure(n, scans=150, warmup=WARMUP, reference=False) for n in self.params}

    def setup(self, data, n):
        _need()

    def track_polar_over_cartesian(self, data, n):
        return data[n]["ratio"]
    track_polar_over_cartesian.unit = "x"
    track_polar_over_cartesian.goal = {1000: 1.3}

    def track_polar_blocks_per_tick(self, data, n):
        return data[n]["polar"][3]
    track_polar_blocks_per_tick.unit = "blocks"
    track_polar_blocks_per_tick.goal = 0
