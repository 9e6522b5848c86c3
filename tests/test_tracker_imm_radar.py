"""IMM with range-bearing scans: every model takes the detection through the
EKF (measurement.pxd's dod_ekf_position_update, the per-model contract of
imm.pxd), against the numpy reference after every scan; threads and
allocations as for each alone."""
import numpy as np
import pytest

from dod.tracker import ReferenceTracker, Tracker, TrackerConfig
from dod.tracker.scenario import PRESETS, generate_radar

from alloc_measure import per_call_rises
from test_tracker_imm import _assert_same as _same_imm_columns
from test_tracker_radar import _assert_same as _same_tracks


def _scenario(dim, seed, n=60, scans=60):
    turns = {k: v for k, v in PRESETS["manoeuvre"].items() if k in ("manoeuvre", "turn_rate", "leg", "turn_time")}
    return generate_radar(n, scans, dim=dim, sensors=2, seed=seed, **turns)


@pytest.mark.parametrize("dim,seed,opts", [(2, 31, {}), (3, 32, {}), (2, 33, {"confirmation": "score"})])
def test_imm_with_radar_scans_matches_the_reference_every_scan(dim, seed, opts):
    sc = _scenario(dim, seed)
    cfg = TrackerConfig(dim=dim, r=3.0, motion="imm", **opts)
    fast, ref = Tracker(cfg), ReferenceTracker(cfg)
    for s, (z, dt, sensor) in enumerate(sc):
        fast.tick(z, dt, sensor=sensor)
        ref.tick(z, dt, sensor=sensor)
        _same_tracks(fast, ref, s)
        _same_imm_columns(fast, ref)
    assert fast.counts()["confirmed"] > 40
    # the turn model took part: the probabilities moved off their start
    assert np.abs(fast.model_probabilities - np.asarray(cfg.imm_mu0)).max() > 0.05


def test_imm_with_radar_bit_identical_across_threads_and_allocates_nothing():
    sc = _scenario(2, 34, n=1400, scans=30)
    scans = list(sc)
    runs = []
    for threads in (1, 2, 3):
        t = Tracker(TrackerConfig(r=3.0, motion="imm", threads=threads, parallel_min_rows=64))
        for z, dt, sensor in scans:
            t.tick(z, dt, sensor=sensor)
        runs.append({c: t.column(c).copy() for c in ("id", "x", "P", "mu", "xm", "Pm")})
        if threads == 2:
            rises = per_call_rises(lambda z, dt, s: t.tick(z, dt, sensor=s), scans[:20])
            assert max(rises) == 0, sorted(rises)[-5:]
    for other in runs[1:]:
        for c in runs[0]:
            assert np.array_equal(runs[0][c], other[c]), c
