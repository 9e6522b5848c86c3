"""dod.tracker.metrics.hota against TrackEval (the MOTChallenge's reference code).

TrackEval is an optional test extra (``pip install 'dod[hota]'``): without it
the comparisons skip, the self-checks below them still run.
"""
import numpy as np
import pytest
from point_sequences import five_still_points, random_sequence

from dod.tracker.metrics import HOTA_ALPHAS, hota


def _trackeval_hota(truth_ids, truth_pos, est_ids, est_pos, c):
    """TrackEval's HOTA on the same frames: dense similarity matrices, ids made contiguous."""
    te = pytest.importorskip("trackeval")
    g_uni = np.unique(np.concatenate([np.asarray(a, np.int64) for a in truth_ids]))
    t_uni = np.unique(np.concatenate([np.asarray(a, np.int64) for a in est_ids]))
    data = {"gt_ids": [], "tracker_ids": [], "similarity_scores": [],
            "num_gt_ids": g_uni.size, "num_tracker_ids": t_uni.size,
            "num_gt_dets": int(sum(len(a) for a in truth_ids)),
            "num_tracker_dets": int(sum(len(a) for a in est_ids))}
    for gi, gp, ti, tp in zip(truth_ids, truth_pos, est_ids, est_pos):
        gp = np.asarray(gp, float).reshape(len(gi), 2)
        tp = np.asarray(tp, float).reshape(len(ti), 2)
        d = np.sqrt(((gp[:, None, :] - tp[None, :, :]) ** 2).sum(-1)) if len(gi) and len(ti) \
            else np.zeros((len(gi), len(ti)))
        data["gt_ids"].append(np.searchsorted(g_uni, np.asarray(gi, np.int64)))
        data["tracker_ids"].append(np.searchsorted(t_uni, np.asarray(ti, np.int64)))
        data["similarity_scores"].append(np.maximum(0.0, 1.0 - d / c))
    return te.metrics.HOTA().eval_sequence(data)


def _compare(truth_ids, truth_pos, est_ids, est_pos, c, tol=1e-9):
    ours = hota(truth_ids, truth_pos, est_ids, est_pos, max_distance=c)
    ref = _trackeval_hota(truth_ids, truth_pos, est_ids, est_pos, c)
    for k in ("hota", "deta", "assa", "loca"):
        np.testing.assert_allclose(ours[k + "_alpha"], ref[k.replace("hota", "HOTA").replace(
            "deta", "DetA").replace("assa", "AssA").replace("loca", "LocA")], atol=tol, rtol=0)
    np.testing.assert_array_equal(ours["tp"], ref["HOTA_TP"])
    np.testing.assert_array_equal(ours["fp"], ref["HOTA_FP"])
    np.testing.assert_array_equal(ours["fn"], ref["HOTA_FN"])
    assert abs(ours["hota"] - float(np.mean(ref["HOTA"]))) <= tol
    return ours


def _dod_on_mot15(name, seed, **cfg):
    mot = pytest.importorskip("dod.tracker.mot")
    pytest.importorskip("motmetrics")
    seq = mot.read_mot(mot.builtin_sequences()[name], name=name)
    dets = mot.detections_from_truth(seq, seed=seed)
    est = mot.track(seq, dets, mot.make_config(max_objects=64, **cfg))
    return seq, est


@pytest.mark.parametrize("name", ["TUD-Campus", "TUD-Stadtmitte"])
@pytest.mark.parametrize("confirmation", ["m_of_n", "score"])
def test_hota_matches_trackeval_on_mot15(name, confirmation):
    seq, est = _dod_on_mot15(name, seed=0, confirmation=confirmation)
    pts = seq.points()
    ours = _compare(seq.ids, pts, [e[0] for e in est], [e[1] for e in est], c=50.0)
    assert 0.3 < ours["hota"] < 1.0


@pytest.mark.parametrize("seed", range(6))
def test_hota_matches_trackeval_on_synthetic_sequences(seed):
    _compare(*random_sequence(seed, frames=40, n=12), c=3.0)


def test_hota_of_perfect_and_empty_estimates():
    ids, pos, swapped = five_still_points()
    perfect = hota(ids, pos, ids, pos)
    assert perfect["hota"] == 1.0 and perfect["deta"] == 1.0 and perfect["assa"] == 1.0
    assert perfect["loca"] == 1.0
    empty = hota(ids, pos, [np.zeros(0)] * 10, [np.zeros((0, 2))] * 10)
    assert empty["hota"] == 0.0 and (empty["fn"] == 50).all() and empty["loca"] == 1.0
    # Estimate ids reversed halfway (positions exact): detection stays
    # perfect; 4 of 5 truths swap identity, each id pair then matches in 5 of
    # 10 + 10 - 5 frames: AssA = (40 / 3 + 10) / 50 = 7 / 15 at every alpha.
    half = hota(ids, pos, swapped, pos)
    assert half["deta"] == 1.0
    np.testing.assert_allclose(half["assa_alpha"], 7 / 15, rtol=0, atol=1e-12)
    assert HOTA_ALPHAS.size == 19


def test_hota_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_distance"):
        hota([], [], [], [], max_distance=0.0)
    with pytest.raises(ValueError, match="one entry per frame"):
        hota([np.zeros(1)], [np.zeros((1, 2))], [], [])
    with pytest.raises(ValueError, match="dimension"):
        hota([np.zeros(1)], [np.zeros((1, 2))], [np.zeros(1)], [np.zeros((1, 3))])
    with pytest.raises(ValueError, match="repeat"):
        hota([np.zeros(1)], [np.zeros((1, 2))], [np.array([4, 4])], [np.zeros((2, 2))])
