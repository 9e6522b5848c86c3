"""dod.tracker.metrics.clear_mot (MOTA, MOTP, IDF1) against py-motmetrics.

py-motmetrics is a test extra: without it the comparisons skip, the
self-checks below them still run.
"""
import numpy as np
import pytest
from point_sequences import five_still_points, random_sequence

from dod.tracker.metrics import clear_mot

COUNTS = ("num_switches", "num_false_positives", "num_misses", "num_objects", "num_matches",
          "num_detections", "num_unique_objects", "mostly_tracked", "partially_tracked",
          "mostly_lost")


def _motmetrics(truth_ids, truth_pos, est_ids, est_pos, c):
    """py-motmetrics on the same frames, squared distances cut at c**2 (as the demo fed it);
    MOTP as the mean distance of its matched pairs."""
    mm = pytest.importorskip("motmetrics")
    acc = mm.MOTAccumulator(auto_id=True)
    for gi, gp, ti, tp in zip(truth_ids, truth_pos, est_ids, est_pos):
        dim = np.asarray(gp).shape[-1] if len(gi) else np.asarray(tp).shape[-1] if len(ti) else 2
        d = mm.distances.norm2squared_matrix(np.asarray(gp, float).reshape(len(gi), dim),
                                             np.asarray(tp, float).reshape(len(ti), dim),
                                             max_d2=c**2)
        acc.update(list(map(int, gi)), list(map(int, ti)), d.reshape(len(gi), len(ti)))
    names = ["mota", "idf1", "idp", "idr"] + list(COUNTS)
    s = mm.metrics.create().compute(acc, metrics=names, name="ref")
    out = {k: float(s[k].iloc[0]) for k in names}
    ev = acc.mot_events
    d2 = ev[ev["Type"].isin(["MATCH", "SWITCH"])]["D"].to_numpy(float)
    out["motp"] = float(np.sqrt(d2).mean()) if d2.size else float("nan")
    return out


def _compare(truth_ids, truth_pos, est_ids, est_pos, c):
    ours = clear_mot(truth_ids, truth_pos, est_ids, est_pos, max_distance=c)
    ref = _motmetrics(truth_ids, truth_pos, est_ids, est_pos, c)
    for k in COUNTS:
        assert ours[k] == ref[k], (k, ours[k], ref[k])
    for k in ("mota", "idf1", "idp", "idr", "motp"):
        assert ours[k] == pytest.approx(ref[k], rel=0, abs=1e-12, nan_ok=True), k
    return ours


@pytest.mark.parametrize("seed", range(8))
def test_clear_mot_matches_motmetrics_on_synthetic_sequences(seed):
    ours = _compare(*random_sequence(seed, unseen=seed % 3), c=3.0)
    assert ours["num_switches"] > 0 and ours["partially_tracked"] > 0


@pytest.mark.parametrize("seed", range(4))
def test_clear_mot_matches_motmetrics_in_dense_3d_crowds(seed):
    # Noise near the gate and targets packed: components of many pairs each frame.
    _compare(*random_sequence(100 + seed, n=40, dim=3, spread=12.0, noise=1.5, swap=0.3), c=2.5)


def test_clear_mot_matches_motmetrics_on_dod_tracks():
    from dod.tracker import Tracker
    from dod.tracker.metrics import run_tracker
    from dod.tracker.scenario import generate

    sc = generate(200, 60, seed=3)
    est = run_tracker(Tracker(), sc)
    ours = _compare(sc.truth_ids, sc.truth_pos, [e[0] for e in est], [e[1] for e in est], c=5.0)
    assert ours["mota"] > 0.5 and ours["num_detections"] > 0


def test_clear_mot_of_perfect_swapped_and_empty_estimates():
    ids, pos, swapped = five_still_points()
    perfect = clear_mot(ids, pos, ids, pos)
    assert perfect["mota"] == 1.0 and perfect["idf1"] == 1.0 and perfect["motp"] == 0.0
    assert perfect["num_switches"] == 0 and perfect["num_detections"] == 50
    # Estimate ids reversed halfway (positions exact): 4 of 5 truths switch once,
    # and each keeps the better half of its frames in the global id map.
    half = clear_mot(ids, pos, swapped, pos)
    assert half["num_switches"] == 4 and half["mota"] == 1.0 - 4 / 50
    assert half["idtp"] == 30 and half["idf1"] == 30 / 50
    empty = clear_mot(ids, pos, [np.zeros(0)] * 10, [np.zeros((0, 2))] * 10)
    assert empty["num_misses"] == 50 and empty["mota"] == 0.0 and empty["idf1"] == 0.0
    assert np.isnan(empty["motp"])
    none = clear_mot([], [], [], [])
    assert none["num_objects"] == 0 and np.isnan(none["mota"]) and np.isnan(none["idf1"])


def test_clear_mot_matches_at_exactly_max_distance_and_not_beyond():
    ids = [np.array([1])]
    at = clear_mot(ids, [np.array([[0.0, 0.0]])], ids, [np.array([[3.0, 4.0]])], max_distance=5.0)
    beyond = clear_mot(ids, [np.array([[0.0, 0.0]])], ids, [np.array([[3.0, 4.0 + 1e-9]])],
                       max_distance=5.0)
    assert at["num_detections"] == 1 and at["motp"] == 5.0
    assert beyond["num_detections"] == 0 and beyond["num_misses"] == 1


def test_clear_mot_rejects_bad_arguments():
    one = [np.zeros(1)]
    with pytest.raises(ValueError, match="max_distance"):
        clear_mot([], [], [], [], max_distance=0.0)
    with pytest.raises(ValueError, match="max_distance"):
        clear_mot([], [], [], [], max_distance=float("nan"))
    with pytest.raises(ValueError, match="one entry per frame"):
        clear_mot(one, [np.zeros((1, 2))], [], [])
    with pytest.raises(ValueError, match="dimension"):
        clear_mot(one, [np.zeros((1, 2))], one, [np.zeros((1, 3))])
    with pytest.raises(ValueError, match="repeat"):
        clear_mot([np.array([3, 3])], [np.zeros((2, 2))], one, [np.zeros((1, 2))])


@pytest.mark.parametrize("score", ["clear_mot", "hota"])
def test_scores_refuse_positions_that_do_not_fit_their_ids(score):
    from dod.tracker import metrics

    f = getattr(metrics, score)
    ids = [np.array([1, 2])]
    good = [np.zeros((2, 2))]
    f(ids, good, ids, good)
    f([np.zeros(0)], [np.zeros(0)], ids, good)         # an empty frame may be any empty array
    for bad in ([np.zeros((3, 2))], [np.zeros(4)], [np.zeros((2, 2, 1))],
                [np.array([[0.0, 0.0], [np.nan, 1.0]])], [np.array([[0.0, 0.0], [np.inf, 1.0]])]):
        with pytest.raises(ValueError, match="frame 0"):
            f(ids, bad, ids, good)
        with pytest.raises(ValueError, match="frame 0"):
            f(ids, good, ids, bad)
