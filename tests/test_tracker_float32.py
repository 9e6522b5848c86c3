"""The float32 tracker (``TrackerConfig(dtype="float32")``): the track
table's x and P in single precision, every other column and the scan's
detections in double; the tick's innovation inverses and gate
half-widths in single precision where the float32 vector kernels write
them, in double elsewhere.

What holds: a float32 run is bit-identical to itself at every thread count
and on every instruction-set path, in both layouts. The two layouts agree
bit for bit wherever the tick runs the per-row kernels in both (the IMM,
the range-bearing and Doppler sensors); with constant velocity and
Cartesian scans the lanes layout runs the float32 vector kernels (predict
and gate rows, and the update without per-detection covariance), whose
arithmetic is single precision, while the rows layout computes in double
over the float32 rows: those two are each reproducible, not equal.
float32 and float64 runs are close, not equal.
"""
import hashlib

import numpy as np
import pytest

import tracker_golden
from alloc_measure import per_call_rises
from dod.table import Table
from dod.tracker import Tracker, TrackerConfig, set_simd, simd_path, simd_paths, track_schema
from dod.tracker.scenario import generate
from test_tracker_covariance import _noisy_scans
from test_tracker_doppler import _scenario as _doppler_scenario

_PAR = dict(parallel_min_rows=16)


def _cartesian(n, scans, seed, dim=2, clutter=0.2):
    return [(z, dt, None, None) for z, dt, _ in tracker_golden.scans("cartesian", n, scans, seed, clutter, dim)]


def _manoeuvre(n, scans, seed):
    return [(z, dt, None, None) for z, dt, _ in tracker_golden.scans("manoeuvre", n, scans, seed, 0.2)]


def _radar(n, scans, seed, dim=2):
    return [(z, dt, s, None) for z, dt, s in tracker_golden.scans("radar", n, scans, seed, 0.2, dim)]


def _doppler(n, scans, seed):
    return [(z, dt, s, None) for z, dt, s, _, _ in _doppler_scenario(n, scans, seed=seed, sensors=2)]


def _own_noise(n, scans, seed):
    sc = generate(n, scans, seed=seed, pd=0.9, clutter=0.2 * n)
    return [(z, dt, None, R) for z, dt, R in _noisy_scans(sc, np.random.default_rng(seed), 2)]


# name: (scans as (z, dt, sensor, covariance), config keywords, the lanes
# layout runs float32 vector kernels in some pass)
CASES = {
    "cv2_mofn_single": (lambda: _cartesian(300, 25, 201), dict(confirmation="m_of_n", initiation="single"), True),
    "cv2_score_two_point": (lambda: _cartesian(250, 25, 202, clutter=2.0),
                            dict(confirmation="score", initiation="two_point", sort_every=5,
                                 confirmed_first=False), True),
    "cv3_score_single": (lambda: _cartesian(200, 20, 203, dim=3), dict(dim=3, confirmation="score",
                                                                      initiation="single"), True),
    "imm2_score_two_point": (lambda: _manoeuvre(150, 25, 204), dict(motion="imm", v0=30.0, confirmation="score",
                                                                    initiation="two_point"), False),
    "radar2_mofn_single": (lambda: _radar(200, 20, 205), dict(r=3.0, confirmation="m_of_n", initiation="single"),
                           False),
    "radar3_score_single": (lambda: _radar(150, 20, 206, dim=3), dict(dim=3, r=3.0, confirmation="score",
                                                                       initiation="single"), False),
    "doppler2_score_single": (lambda: _doppler(150, 20, 207), dict(r=5.0, confirmation="score",
                                                                   initiation="single"), False),
    "own_noise2_score_two_point": (lambda: _own_noise(200, 20, 208), dict(confirmation="score",
                                                                          initiation="two_point"), True),
}
_DATA = {}


def _data(name):
    if name not in _DATA:
        _DATA[name] = CASES[name][0]()
    return _DATA[name]


def _run(name, threads=1, layout="lanes", dtype="float32"):
    """The case's state hash after every scan (tracker_golden.state_digest;
    the table's memory count the rows layout's, so that layouts compare)."""
    ckw = CASES[name][1]
    config = TrackerConfig(threads=threads, layout=layout, dtype=dtype, **_PAR, **ckw)
    t = Tracker(config)
    nbytes = Table(track_schema(config.dim, config.motion, "rows", config.dtype), config.capacity).nbytes
    h = hashlib.blake2b(digest_size=16)
    out = []
    for z, dt, sensor, cov in _data(name):
        t.tick(z, dt, sensor=sensor, covariance=cov)
        out.append(tracker_golden.state_digest(t, h, nbytes))
    t.table.check()
    assert t.counts()["confirmed"] > 0
    return out


# ---------------------------------------------------------------- the configuration and the columns

@pytest.mark.parametrize("bad", ["float16", "f4", None, np.int32])
def test_a_dtype_other_than_float64_or_float32_raises_before_anything_is_built(bad):
    with pytest.raises(ValueError, match="dtype"):
        Tracker(dtype=bad)
    with pytest.raises(ValueError, match="dtype"):
        track_schema(2, "cv", "lanes", "float16")


@pytest.mark.parametrize("layout", ["rows", "lanes"])
@pytest.mark.parametrize("motion", ["cv", "imm"])
def test_x_and_P_are_float32_and_take_half_the_bytes(layout, motion):
    t32 = Tracker(dtype="float32", layout=layout, motion=motion, capacity=1000)
    t64 = Tracker(layout=layout, motion=motion, capacity=1000)
    sc = generate(30, 5, seed=3)
    for z, dt in sc:
        t32.tick(z.astype(np.float32), dt)      # float32 detections are read into the float64 scratch
        t64.tick(z, dt)
    for name in t32.table.schema.names:
        want = np.float32 if name in ("x", "P") else t64.table[name].dtype
        assert t32.table[name].dtype == want, name
        assert t32.column(name).dtype == want, name
    assert len(t32) == len(t64) > 0
    for name in ("x", "P"):
        assert t32.table[name].nbytes * 2 == t64.table[name].nbytes
    tr = t32.tracks(confirmed=False)
    assert tr.x.dtype == np.float32 and tr.P.dtype == np.float32
    assert tr.x.base is not None                # a view, as in float64
    assert t32.positions.dtype == np.float32 and t32.covariances.dtype == np.float32
    n = 4
    s32 = track_schema(2, motion, "rows", "float32")
    s64 = track_schema(2, motion, "rows")
    assert Table(s64, 10).bytes_per_row - Table(s32, 10).bytes_per_row == (n + n * (n + 1) // 2) * 4
    if motion == "imm":                         # the IMM's own columns stay float64
        assert t32.table["xm"].dtype == t32.table["Pm"].dtype == t32.table["mu"].dtype == np.float64


def test_arrow_batch_carries_float32_x_and_P():
    pa = pytest.importorskip("pyarrow")
    t = Tracker(dtype="float32")
    for z, dt in generate(30, 8, seed=4):
        t.tick(z, dt)
    b = pa.record_batch(t.tracks_arrow(confirmed=False))
    assert b.num_rows == len(t) > 0
    np.testing.assert_array_equal(np.stack(b.column("x").to_numpy(zero_copy_only=False)), t.tracks(False).x)
    assert b.schema.field("x").type.value_type == pa.float32()
    assert b.schema.field("score").type == pa.float64()


# ---------------------------------------------------------------- bit-identical runs

@pytest.mark.parametrize("name", list(CASES))
def test_float32_is_bit_identical_across_threads_and_paths(name):
    base = {layout: _run(name, 1, layout) for layout in ("rows", "lanes")}
    for layout in ("rows", "lanes"):
        for threads in (2, 4):
            assert _run(name, threads, layout) == base[layout], (layout, threads)
        before = simd_path()
        for path in simd_paths():
            set_simd(path)
            try:
                got = _run(name, 1, layout)
            finally:
                set_simd(before)
            assert got == base[layout], (layout, path)
    if not CASES[name][2]:                      # per-row kernels in both layouts: the same bits
        assert base["rows"] == base["lanes"]


def test_float64_is_unchanged_by_the_dtype_field():
    assert _run("cv2_mofn_single", dtype="float64") == _run("cv2_mofn_single", dtype=np.float64)


# ---------------------------------------------------------------- accuracy beside float64

@pytest.mark.parametrize("layout", ["rows", "lanes"])
def test_float32_tracks_stay_close_to_float64(layout):
    # The same scene in both precisions: the tracks they share (by id) sit
    # within a few float32 ulps of metres-scale positions of each other.
    sc = generate(300, 60, seed=21, pd=0.9, crossing=0.2, clutter=60)
    cfg = dict(confirmation="score", initiation="two_point", layout=layout)
    t32 = Tracker(dtype="float32", **cfg)
    t64 = Tracker(**cfg)
    for z, dt in sc:
        t32.tick(z, dt)
        t64.tick(z, dt)
    a, b = t32.tracks(), t64.tracks()
    assert abs(len(a.ids) - len(b.ids)) <= 0.02 * len(b.ids)
    common, ia, ib = np.intersect1d(a.ids, b.ids, return_indices=True)
    assert len(common) >= 0.95 * len(b.ids)
    d = a.x[ia, :2].astype(np.float64) - b.x[ib, :2]
    rms = float(np.sqrt(np.mean(np.sum(d * d, axis=1))))
    assert rms < 0.01, rms                      # metres, with r = 1 m detections
    assert np.isfinite(a.P).all()
    # every float32 covariance is still positive definite
    assert (np.linalg.eigvalsh(a.P.astype(np.float64)) > 0).all()


# ---------------------------------------------------------------- allocations

@pytest.mark.parametrize("layout", ["rows", "lanes"])
def test_zero_allocations_per_tick_in_float32(layout):
    sc = generate(50, 200, seed=9, clutter=20)
    scans = list(sc.detections)
    dt = sc.dt
    t = Tracker(TrackerConfig(dtype="float32", layout=layout, confirmation="score", initiation="two_point"))
    for z in scans[:60]:
        t.tick(z, dt)
    rises = per_call_rises(t.tick, [(z, dt) for z in scans[60:]])
    assert max(rises) == 0, sorted(rises)[-5:]


# ---------------------------------------------------------------- consumers of the tracks

@pytest.mark.parametrize("layout", ["rows", "lanes"])
def test_track_log_records_a_float32_tracker_in_float64(tmp_path, layout):
    pytest.importorskip("pyarrow")
    import test_track_log as tl
    from dod.tracker.track_log import read_log
    t = Tracker(TrackerConfig(capacity=256, max_detections=128, events=True, confirmation="m_of_n",
                              initiation="single", dtype="float32", layout=layout))
    path = tmp_path / "tracks.arrow"
    expected = tl._run(path, tracker=t)         # the log's x and P: the float32 values, exactly, in float64
    table = read_log(path)
    assert str(table.schema.field("x").type.value_type) == "double"
    tl._check(table, expected)


def test_metrics_read_a_float32_tracker():
    from dod.tracker.metrics import run_tracker, scenario_gospa
    sc = generate(100, 60, seed=22, pd=0.9, clutter=20)
    g32 = scenario_gospa(sc, run_tracker(Tracker(dtype="float32"), sc))
    g64 = scenario_gospa(sc, run_tracker(Tracker(), sc))
    assert abs(g32 - g64) <= 0.02 * g64 + 1e-3, (g32, g64)


def test_accuracy_command_sets_float32_beside_float64(capsys):
    # The command that reproduces the guide's float32 accuracy table, on
    # scenes small enough for a test; GOSPA within 1 % is the dtype's goal.
    from dod.tracker import accuracy
    lines = []
    rows = accuracy.compare_dtypes(targets=40, scans=60, seeds=1, out=lines.append)
    assert [r["scene"] for r in rows] == ["CV, clutter 0.2 per target", "CV, clutter 3 per target",
                                          "IMM, manoeuvring targets", "range-bearing radar, clutter 0.2 per target"]
    for r in rows:
        g64, g32 = r["float64"]["gospa"], r["float32"]["gospa"]
        assert g64 > 0.0 and abs(g32 - g64) <= 0.01 * g64, (r["scene"], g64, g32)
        assert r["d_float32"]["gospa_pct"] == pytest.approx(100.0 * (g32 / g64 - 1.0))
    assert "GOSPA float64" in lines[1] and "GOSPA float32" in lines[1] and "dGOSPA % float32" in lines[1]
    assert lines[-1].startswith("goal float32: GOSPA within 1 % of float64")
    for bad in ((), ("float64", "float64"), ("float16",)):
        with pytest.raises(ValueError):
            accuracy.compare_dtypes(targets=10, scans=60, seeds=1, dtypes=bad, out=lines.append)
    assert accuracy.main(["--dtypes", "float64,float32", "--targets", "20", "--scans", "60", "--seeds", "1",
                          "--clutter", "0.2", "--markdown"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("| scene | GOSPA float64 | GOSPA float32 |") and out[2].startswith("| --- |")
    assert len(out) == 1 + 2 + 3 + 1            # title, head, 3 scenes (one clutter level), the goal
    for argv in (["--markdown"], ["--dtypes", "float64,float32", "--patches", "2"]):
        with pytest.raises(SystemExit):
            accuracy.main(argv + ["--quick"])
