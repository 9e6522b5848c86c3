"""asv: what the tracker's boundary adds to a tick: time stamps, events, the track log.

Goals: time-stamped ticks (``tick(z, time=t)``) cost no more than dt ticks
(same sizes, same run, within noise); the events and the log together add
at most 5 % to the tick at N = 10,000.

TrackerBoundary.time_tick times one steady-state tick (N targets, clutter
0.2 N, Pd 0.9; number = 1, setup re-warms before every sample) of each
variant on the same scans: ``dt`` (``tick(z, dt)``), ``time`` (the same
scan by its time stamp), ``covariance`` (the same scan with each
detection's own noise, ``tick(z, dt, covariance=R)``, R = r^2 I per row:
the plain scan's result at the per-pair kernels' cost), ``events`` (a
tracker made with ``events=True``) and ``events+log`` (that tick, then
:meth:`TrackLog.append` of the scan into the log's ring). TrackLogAppend.time_append times the append alone.
Each variant skips (NotImplementedError) on commits that lack its API.
"""
import os
import shutil
import tempfile

import numpy as np

from ._util import management

try:
    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.scenario import generate
except ImportError:         # an older commit: nothing to measure
    Tracker = None

WARMUP = 40


def _warm(n, variant):
    """A tracker warmed on the scenario's first WARMUP scans, and the next scan."""
    if Tracker is None:
        raise NotImplementedError("dod.tracker not in this commit")
    sc = generate(n, WARMUP + 1, seed=0, pd=0.9)
    cfg = TrackerConfig(capacity=max(64, 4 * n), max_detections=max(64, 2 * n + 64), **management(TrackerConfig))
    try:
        t = Tracker(cfg, events=True) if variant.startswith("events") else Tracker(cfg)
    except (TypeError, ValueError):
        raise NotImplementedError("TrackerConfig(events=...) not in this commit") from None
    for z in sc.detections[:WARMUP]:
        t.tick(z, sc.dt)
    if variant == "time" and not hasattr(t, "time"):
        raise NotImplementedError("tick(z, time=t) not in this commit")
    return t, sc


def _log(t):
    """A track log of `t` in a new folder: (log, folder)."""
    try:
        from dod.tracker.track_log import TrackLog
    except ImportError:
        raise NotImplementedError("dod.tracker.track_log (or pyarrow) not here") from None
    folder = tempfile.mkdtemp(prefix="dod-asv-log-")
    return TrackLog(os.path.join(folder, "tracks.arrow"), t), folder


class TrackerBoundary:
    """One steady-state tick by dt, by time stamp, with events, and with events and the log's append."""

    params = ([1000, 10000], ["dt", "time", "covariance", "events", "events+log"])
    param_names = ["n", "variant"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, n, variant):
        self.t, self.sc = _warm(n, variant)
        self.z = self.sc.detections[WARMUP]
        self.stamp = float(self.t.time) + self.sc.dt if variant == "time" else None
        self.cov = None
        if variant == "covariance":
            k, d = self.z.shape
            try:                    # (a throwaway tracker: the timed one's state stays as warmed)
                Tracker().tick(np.zeros((0, 2)), 0.02, covariance=np.zeros((0, 2, 2)))
            except TypeError:
                raise NotImplementedError("tick(..., covariance=R) not in this commit") from None
            r = self.t.config.r
            self.cov = np.ascontiguousarray(np.broadcast_to(r * r * np.eye(d), (k, d, d)))
        self.log, self.folder = _log(self.t) if variant == "events+log" else (None, None)

    def teardown(self, n, variant):
        if self.log is not None:
            self.log.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    def time_tick(self, n, variant):
        if self.stamp is not None:
            self.t.tick(self.z, time=self.stamp)
        elif self.cov is not None:
            self.t.tick(self.z, self.sc.dt, covariance=self.cov)
        else:
            self.t.tick(self.z, self.sc.dt)
        if self.log is not None:
            self.log.append()


class TrackLogAppend:
    """One scan's confirmed tracks and events copied into the track log's ring (the tick's thread's share)."""

    params = [1000, 10000]
    param_names = ["n"]
    number = 1
    repeat = 15
    warmup_time = 0
    timeout = 300

    def setup(self, n):
        self.t, sc = _warm(n, "events")
        self.t.tick(sc.detections[WARMUP], sc.dt)
        self.log, self.folder = _log(self.t)

    def teardown(self, n):
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def time_append(self, n):
        self.log.append()
