"""dod.tracker.mot: MOTChallenge reading, detections from truth, tracking real
pedestrian motion (MOT15 ground truth bundled with motmetrics), scores."""
import numpy as np
import pytest

from dod.tracker import mot

try:
    import motmetrics  # noqa: F401
except ImportError:
    motmetrics = None
# Only the tests that score (or read the MOT15 files bundled with motmetrics)
# need it; the file parser and detector tests run without it.
needs_motmetrics = pytest.mark.skipif(motmetrics is None, reason="needs motmetrics (pip install motmetrics)")

# Floors for the bundled sequences at the CLI defaults (Pd 0.9, noise 2 px,
# clutter 1/frame, seed 0). Measured over seeds 0-9 with
#   python -c "from dod.tracker import mot
#   for n, p in sorted(mot.builtin_sequences().items()):
#       r = [mot.evaluate(p, seed=k, name=n)[1] for k in range(10)]
#       print(n, *(f'{m} {min(x[m] for x in r):.3f}-{max(x[m] for x in r):.3f}' for m in ('mota', 'idf1', 'gospa')))"
# (re-run 2026-12-01 on the 2-core CI VM, same ranges):
#   TUD-Campus      MOTA 0.900-0.922, IDF1 0.950-0.961, GOSPA 16.8-19.3 px
#   TUD-Stadtmitte  MOTA 0.966-0.971, IDF1 0.983-0.986, GOSPA  8.7-9.4 px
# The ceiling is below 1: a track confirms on its 3rd detection, so every
# person's first frames are misses (Campus: 8 people in 71 frames). Floors sit
# about 0.05 (GOSPA ~30 %) below the worst seed: a real regression in
# association or track management moves them by more. Measured at seed 0:
# max_misses 12 instead of 4 gives Campus MOTA 0.78 / GOSPA 34; 5-of-5
# confirmation instead of 3-of-5 gives MOTA 0.76 / 0.89; a 0.9 gate instead
# of 0.999 gives Campus 6 switches and IDF1 0.84. Each fails a floor.
FLOORS = {
    "TUD-Campus": dict(mota=0.85, idf1=0.90, gospa=25.0),
    "TUD-Stadtmitte": dict(mota=0.92, idf1=0.93, gospa=13.0),
}


@needs_motmetrics
@pytest.mark.parametrize("name", sorted(FLOORS))
def test_bundled_sequences_score_above_their_floors(name):
    path = mot.builtin_sequences()[name]
    seq, s = mot.evaluate(path, seed=0, name=name)
    assert seq.fps == 25.0 and (seq.width, seq.height) == (640, 480)
    f = FLOORS[name]
    assert s["mota"] >= f["mota"], s
    assert s["idf1"] >= f["idf1"], s
    assert s["gospa"] <= f["gospa"], s
    assert s["num_switches"] <= 2, s


@needs_motmetrics
def test_bundled_files_are_what_the_notes_say():
    seqs = mot.builtin_sequences()
    campus = mot.read_mot(seqs["TUD-Campus"], name="TUD-Campus")
    stadt = mot.read_mot(seqs["TUD-Stadtmitte"], name="TUD-Stadtmitte")
    assert (campus.frames, campus.n_ids) == (71, 8)
    assert (stadt.frames, stadt.n_ids) == (179, 10)


@needs_motmetrics
def test_truth_as_estimates_scores_perfectly():
    # the scoring path itself: ground truth against itself
    path = mot.builtin_sequences()["TUD-Campus"]
    seq = mot.read_mot(path)
    s = mot.score(seq, list(zip(seq.ids, seq.points())))
    assert s["mota"] == 1.0 and s["idf1"] == 1.0 and s["gospa"] == 0.0


@needs_motmetrics
def test_tracking_beats_reporting_nothing_by_far():
    path = mot.builtin_sequences()["TUD-Stadtmitte"]
    seq, s = mot.evaluate(path, seed=1)
    empty = mot.score(seq, [(np.zeros(0, np.int64), np.zeros((0, 2)))] * seq.frames)
    assert empty["mota"] == 0.0
    assert s["gospa"] < 0.2 * empty["gospa"]


def _write(path, rows):
    path.write_text("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
    return str(path)


def test_read_mot_frames_gaps_flags_and_seqinfo(tmp_path):
    seqdir = tmp_path / "MySeq"
    (seqdir / "gt").mkdir(parents=True)
    (seqdir / "seqinfo.ini").write_text("[Sequence]\nname=MySeq\nframeRate=30\nimWidth=1920\n"
                                        "imHeight=1080\n")
    gt = _write(seqdir / "gt" / "gt.txt", [
        (2, 1, 10, 20, 4, 8, 1, 1, 1.0),
        (2, 2, 50, 60, 10, 20, 0, 1, 1.0),      # ignore flag: dropped
        (4, 1, 12, 22, 4, 8, 1, 1, 0.5),
        (4, 3, 90, 90, 10, 10, 1, 7, 1.0),      # class 7 (static person): dropped
    ])
    seq = mot.read_mot(gt)
    assert seq.name == "MySeq" and seq.fps == 30.0 and (seq.width, seq.height) == (1920, 1080)
    assert seq.first_frame == 2 and seq.frames == 3          # frames 2, 3 (empty), 4
    assert [i.tolist() for i in seq.ids] == [[1], [], [1]]
    np.testing.assert_array_equal(seq.points("centre")[0], [[12.0, 24.0]])
    np.testing.assert_array_equal(seq.points("foot")[2], [[14.0, 30.0]])
    assert mot.read_mot(gt, fps=10).fps == 10.0


def test_read_mot_rejects_bad_files(tmp_path):
    with pytest.raises(ValueError, match=":2:"):
        mot.read_mot(_write(tmp_path / "a.txt", [(1, 1, 0, 0, 1, 1), (1, 2, "x", 0, 1, 1)]))
    with pytest.raises(ValueError, match="frame,id,x,y,w,h"):
        mot.read_mot(_write(tmp_path / "b.txt", [(1, 1, 0)]))
    with pytest.raises(ValueError, match="frame"):
        mot.read_mot(_write(tmp_path / "c.txt", [(0, 1, 0, 0, 1, 1)]))
    with pytest.raises(ValueError, match="non-finite"):
        mot.read_mot(_write(tmp_path / "d.txt", [(1, 1, "nan", 0, 1, 1)]))
    with pytest.raises(FileNotFoundError):
        mot.read_mot(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError):
        mot.anchor_points(np.zeros((1, 4)), "head")


@needs_motmetrics
def test_detections_from_truth_are_seeded_and_follow_the_knobs():
    seq = mot.read_mot(mot.builtin_sequences()["TUD-Campus"])
    a = mot.detections_from_truth(seq, seed=5)
    b = mot.detections_from_truth(seq, seed=5)
    c = mot.detections_from_truth(seq, seed=6)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    exact = mot.detections_from_truth(seq, pd=1.0, noise=0.0, clutter=0.0)
    for z, p in zip(exact, seq.points()):
        np.testing.assert_array_equal(np.sort(z, axis=0), np.sort(p, axis=0))
    n_truth = sum(len(p) for p in seq.points())
    n = sum(len(z) for z in mot.detections_from_truth(seq, pd=0.5, clutter=0.0, seed=1))
    assert 0.4 * n_truth < n < 0.6 * n_truth
    with pytest.raises(ValueError):
        mot.detections_from_truth(seq, pd=1.5)


@needs_motmetrics
def test_detector_file_path(tmp_path):
    # A "detector" that reports the true boxes (conf 0.9) plus junk at conf 0.1,
    # filtered out by min_conf: tracking that is nearly perfect.
    gt_path = mot.builtin_sequences()["TUD-Campus"]
    seq = mot.read_mot(gt_path)
    rows = []
    for k, (ids, boxes) in enumerate(zip(seq.ids, seq.boxes)):
        for b in boxes:
            rows.append((seq.first_frame + k, -1, *b.tolist(), 0.9))
        rows.append((seq.first_frame + k, -1, 300, 300, 20, 40, 0.1))
    det = _write(tmp_path / "det.txt", rows)
    _, s = mot.evaluate(gt_path, det=det, min_conf=0.5, name="TUD-Campus")
    assert s["num_switches"] == 0
    assert s["idf1"] >= 0.95 and s["mota"] >= 0.9
    _, junk = mot.evaluate(gt_path, det=det, name="TUD-Campus")      # junk kept: false tracks
    assert junk["num_false_positives"] > s["num_false_positives"]


@needs_motmetrics
def test_cli_on_bundled_data(capsys):
    assert mot.main([]) == 0
    out = capsys.readouterr().out
    assert "TUD-Campus" in out and "TUD-Stadtmitte" in out and "IDF1" in out


def test_cli_on_a_user_file(tmp_path, capsys):
    # Scoring needs no motmetrics (clear_mot): only the bundled files do.
    user = _write(tmp_path / "gt.txt", [(f, 1, 100 + 2 * f, 100, 10, 20, 1, -1, -1, -1)
                                        for f in range(1, 40)])
    assert mot.main([user, "--fps", "10", "--clutter", "0", "--pd", "1"]) == 0
    out = capsys.readouterr().out
    assert "MOTA" in out and "switches   0  FP    0" in out      # 1 person, seen every frame
    assert mot.main([str(tmp_path / "nope.txt")]) == 1
    assert "error" in capsys.readouterr().err


@needs_motmetrics
def test_hota_is_scored_and_printed_for_both_confirmation_logics(capsys):
    path = mot.builtin_sequences()["TUD-Stadtmitte"]
    seq = mot.read_mot(path)
    perfect = mot.score(seq, list(zip(seq.ids, seq.points())))
    assert perfect["hota"] == 1.0 and perfect["deta"] == 1.0 and perfect["assa"] == 1.0
    _, m = mot.evaluate(path, seed=0, name="TUD-Stadtmitte")
    assert 0.9 <= m["hota"] < 1.0 and m["hota"] <= m["loca"] + 1e-9
    assert mot.main(["--confirmation", "score", "--initiation", "two_point"]) == 0
    out = capsys.readouterr().out
    assert out.count("HOTA") == 2 and "score, two_point" in out
