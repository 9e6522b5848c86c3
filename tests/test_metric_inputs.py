"""dod.tracker.metric_inputs: dod's per-scan tracks fed to py-motmetrics and TrackEval (both in the
test extra, so CI runs these against the real packages), scored equal to dod's own metrics."""
import numpy as np
import pytest
from point_sequences import random_sequence

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metric_inputs import motmetrics_accumulator, trackeval_data
from dod.tracker.metrics import clear_mot, hota, run_tracker
from dod.tracker.scenario import generate

COUNTS = ("num_switches", "num_false_positives", "num_misses", "num_objects", "num_matches",
          "num_unique_objects", "mostly_tracked", "partially_tracked", "mostly_lost")


def _dod_run(seed):
    scenario = generate(30, 60, pd=0.9, seed=seed)
    est = run_tracker(Tracker(TrackerConfig(dim=2, r=1.0, q=1.0)), scenario)
    return scenario.truth_ids, scenario.truth_pos, [e[0] for e in est], [e[1] for e in est]


@pytest.mark.parametrize("source", ["tracker", "synthetic"])
def test_the_motmetrics_accumulator_scores_as_dods_clear_mot(source):
    mm = pytest.importorskip("motmetrics")
    seq = _dod_run(3) if source == "tracker" else random_sequence(4, unseen=1)
    c = 5.0 if source == "tracker" else 3.0
    acc = motmetrics_accumulator(*seq, max_distance=c)
    names = ["mota", "idf1"] + list(COUNTS)
    summary = mm.metrics.create().compute(acc, metrics=names, name="dod")
    ours = clear_mot(*seq, max_distance=c)
    for k in COUNTS:
        assert float(summary[k].iloc[0]) == ours[k], k
    for k in ("mota", "idf1"):
        assert float(summary[k].iloc[0]) == pytest.approx(ours[k], abs=1e-12), k
    if source == "tracker":
        assert ours["mota"] > 0.8


def test_the_accumulator_appends_with_frame_ids_that_follow():
    mm = pytest.importorskip("motmetrics")
    ids = [np.array([1]), np.array([1])]
    pos = [np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]])]
    acc = motmetrics_accumulator(ids, pos, ids, pos, max_distance=1.0)
    acc = motmetrics_accumulator(ids, pos, [np.array([2]), np.zeros(0)], [np.array([[5.0, 0.0]]), np.zeros((0, 2))],
                                 max_distance=1.0, accumulator=acc, first_frame=2)
    frames = sorted(set(acc.mot_events.index.get_level_values(0)))
    assert frames == [0, 1, 2, 3]
    s = mm.metrics.create().compute(acc, metrics=["num_matches", "num_misses", "num_false_positives"])
    assert s["num_matches"].iloc[0] == 2 and s["num_misses"].iloc[0] == 2 and s["num_false_positives"].iloc[0] == 1


@pytest.mark.parametrize("source", ["tracker", "synthetic"])
def test_trackeval_on_the_data_scores_as_dods_hota(source):
    te = pytest.importorskip("trackeval")
    seq = _dod_run(7) if source == "tracker" else random_sequence(9)
    c = 5.0 if source == "tracker" else 3.0
    data = trackeval_data(*seq, zero_distance=c)
    ref = te.metrics.HOTA().eval_sequence(data)
    ours = hota(*seq, max_distance=c)
    np.testing.assert_allclose(ours["hota_alpha"], ref["HOTA"], atol=1e-9, rtol=0)
    np.testing.assert_allclose(ours["assa_alpha"], ref["AssA"], atol=1e-9, rtol=0)
    np.testing.assert_array_equal(ours["tp"], ref["HOTA_TP"])
    counts = te.metrics.Count().eval_sequence(data)
    assert counts["Dets"] == sum(len(i) for i in seq[2]) and counts["GT_Dets"] == sum(len(i) for i in seq[0])
    assert counts["IDs"] == len(np.unique(np.concatenate(seq[2])))
    # CLEAR and Identity match at similarity >= 0.5, within zero_distance / 2: dod's MOTA and IDF1 there.
    clear = te.metrics.CLEAR().eval_sequence(data)
    ident = te.metrics.Identity().eval_sequence(data)
    mot = clear_mot(*seq, max_distance=c / 2)
    assert clear["CLR_TP"] == mot["num_matches"] + mot["num_switches"]
    assert clear["CLR_FN"] == mot["num_misses"] and clear["CLR_FP"] == mot["num_false_positives"]
    assert ident["IDF1"] == pytest.approx(mot["idf1"], abs=1e-12)


def test_trackeval_data_layout():
    ids = [np.array([70, 3]), np.array([], np.int64)]
    pos = [np.array([[0.0, 0.0], [4.0, 0.0]]), np.zeros((0, 2))]
    data = trackeval_data(ids, pos, [np.array([9]), np.array([9])],
                          [np.array([[1.0, 0.0]]), np.array([[2.0, 0.0]])], zero_distance=2.0)
    assert data["gt_ids"][0].tolist() == [1, 0] and data["tracker_ids"][1].tolist() == [0]
    assert data["similarity_scores"][0].tolist() == [[0.5], [0.0]]
    assert data["similarity_scores"][1].shape == (0, 1)
    assert (data["num_timesteps"], data["num_gt_ids"], data["num_tracker_ids"], data["num_gt_dets"],
            data["num_tracker_dets"]) == (2, 2, 1, 2, 2)


def test_bad_sequences_raise_clearly():
    one = [np.array([1])]
    p = [np.array([[0.0, 0.0]])]
    with pytest.raises(ValueError, match="one entry per scan"):
        trackeval_data(one, p, one * 2, p * 2, 1.0)
    with pytest.raises(ValueError, match="repeats"):
        trackeval_data([np.array([1, 1])], [np.zeros((2, 2))], one, p, 1.0)
    with pytest.raises(ValueError, match="2 truth ids but 1 positions"):
        trackeval_data([np.array([1, 2])], p, one, p, 1.0)
    with pytest.raises(ValueError, match="finite"):
        trackeval_data(one, [np.array([[np.nan, 0.0]])], one, p, 1.0)
    with pytest.raises(ValueError, match="zero_distance"):
        trackeval_data(one, p, one, p, 0.0)
    with pytest.raises(ValueError, match="max_distance"):
        motmetrics_accumulator(one, p, one, p, -1.0)
    with pytest.raises(TypeError, match="first_frame"):
        motmetrics_accumulator(one, p, one, p, 1.0, first_frame=1.5)
