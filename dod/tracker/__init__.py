"""dod.tracker: a 50 Hz multi-target tracker built on dod's arenas.

A constant-velocity Kalman tracker (2-D or 3-D) with Mahalanobis gating over
a spatial index, exact global-nearest-neighbour assignment per cluster,
M-of-N confirmation and miss-count deletion (or, for heavy clutter, track
scores with Wald's thresholds and velocity-gated two-point initiation:
``TrackerConfig(confirmation="score", initiation="two_point")``), and for
manoeuvring targets an IMM of two constant-velocity models and a
coordinated turn (``TrackerConfig(motion="imm")``). One call per scan
crosses into nogil Cython and allocates nothing.

>>> import numpy as np
>>> from dod.tracker import Tracker, TrackerConfig
>>> t = Tracker(TrackerConfig(dim=2, r=1.0, q=1.0))   # or in parts: TrackerConfig(filter=FilterConfig(...), ...)
>>> for scan in range(3):                             # two targets moving at 1 m/s, a scan every 0.02 s
...     t.tick(np.array([[0.0, 0.0], [50.0, 10.0]]) + 0.02 * scan, dt=0.02)   # detections: float64 (k, 2)
>>> len(t), t.positions.shape          # t.ids, t.positions, t.status: read-only views of the live rows
(2, (2, 2))
>>> t.table                            # the tracks: a dod.table.Table (handles, Arrow)
<dod.Table 10 columns (id, x, P, ...) rows=2/20000 ...>

Time: ``t.tick(z, time=stamp)`` instead of ``dt`` (the scan clock is
:attr:`Tracker.time`; a late stamp is refused, or dropped and counted with
``out_of_sequence="drop"``). Any (k, dim) array-like of numbers is a scan.

Radar: ``t.tick(measurements, dt, sensor=Sensor(position, range_sigma,
bearing_sigma[, elevation_sigma]))`` folds in a range-bearing(-elevation)
scan of that sensor (extended Kalman update; :mod:`dod.tracker.sensor`;
``order=BEARING_RANGE`` for Stone Soup's column order).

Also here: :mod:`dod.tracker.reference` (the same tracker in numpy: the
oracle and baseline), :mod:`dod.tracker.scenario` (seeded scenarios) and
:mod:`dod.tracker.metrics` (GOSPA, OSPA, HOTA, MOTA/IDF1: numpy and dod's solver).

.. not run: a list of the engine's source files, not code

Reading order of the engine (each file's docstring says what it reads,
writes and how it runs over threads)::

    _track.pxd      the state: track columns, parameters, counters
    kalman.pxd, imm.pxd, measurement.pxd
                    the filter kernels (constant velocity, IMM, range-bearing EKF)
    grid.pxd        the spatial index of the detections
    assignment.pyx  the exact assignment solver of one cluster
    _frame.pxd/pyx  the tick's temporaries, laid out once, phases in scopes
    _model.pxd      the model variants (dimension, motion, measurement) and their kernel set
    _executor.pxd   how a pass runs: one chunk serially, claimed chunks over the workers;
                    one body, serial or shared, for the passes in parts
    _tick.pyx       the tick as the list of its passes, in order:
    _intake.pyx       the scan's valid detections, the index
    _predict.pyx      predict, and the confirmed tracks' gating beside it
    _gate.pyx         gating into the pair buffer
    _clusters.pyx     lone pairs, union-find, grouping by cluster
    _associate.pyx    one stage's association (confirmed, then tentative)
    _clutter.pyx      the clutter density estimate
    _update.pyx       Kalman update, scores, confirmation, deaths marked
    _events.pyx       what happened in the scan, written by the passes that decide it (events=True)
    _deaths.pyx       the dead rows leave the table
    _births.pyx       births from the free detections
    _two_point.pyx    two-point initiation: pairs across two scans
    _order.pyx        rows back into spatial order
    _configure.pyx  the configuration and a scan's sensor read into the state; the scratch size
    _clock.pxd      the scan clock: time stamps to dt, late scans
    _input.pyx      a scan's detections converted (dtype, layout, column order) when not read in place
    _output.pyx     Tracker's read side (its base class): views, counters, events, track output
    _engine.pyx     the owner, Tracker: validation, the Python face
"""
from dod.tracker.config import (ClutterConfig, ExecutionConfig, FilterConfig, LimitsConfig, ManagementConfig,
                                TrackerConfig, chi2_ppf)

__all__ = ["Tracker", "TrackerConfig", "FilterConfig", "ManagementConfig", "ClutterConfig", "LimitsConfig",
           "ExecutionConfig", "ReferenceTracker", "Sensor", "chi2_ppf", "solve_assignment", "track_schema",
           "scratch_bytes", "unpack_covariance", "pack_covariance", "RANGE_BEARING", "BEARING_RANGE",
           "ScanEvents", "Tracks", "TrackBatch", "simd_paths", "simd_path", "set_simd"]


def __getattr__(name):
    if name == "solve_assignment":
        from dod.tracker.assignment import solve_assignment

        return solve_assignment
    if name in ("unpack_covariance", "pack_covariance"):
        from dod.tracker import covariance

        return getattr(covariance, name)
    if name in ("Tracker", "track_schema", "scratch_bytes", "ScanEvents", "Tracks", "TrackBatch"):
        from dod.tracker import _engine

        return getattr(_engine, name)
    if name in ("Sensor", "RANGE_BEARING", "BEARING_RANGE"):
        from dod.tracker import sensor

        return getattr(sensor, name)
    if name in ("simd_paths", "simd_path", "set_simd"):
        from dod.tracker import _vector

        return getattr(_vector, name)
    if name == "ReferenceTracker":
        from dod.tracker.reference import ReferenceTracker

        return ReferenceTracker
    raise AttributeError(f"module 'dod.tracker' has no attribute {name!r}")
