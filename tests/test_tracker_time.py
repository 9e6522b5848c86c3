"""The tracker at its boundary: time stamps and the scan clock, dt = 0,
out-of-sequence scans, IMM switching rates per second, any array-like of
numbers as a scan, and the polar column orders."""
import math

import numpy as np
import pytest

from dod.tracker import (BEARING_RANGE, RANGE_BEARING, ReferenceTracker, Sensor, Tracker, TrackerConfig,
                         pack_covariance)
from dod.tracker import reference_imm
from dod.tracker.scenario import generate, iter_radar_scans
from dod.tracker.sensor import to_polar

from alloc_measure import per_call_rises


def _snapshot(t):
    return {k: v.copy() for k, v in t.columns().items()} | {
        "count": t.count, "scans": t.scans, "time": t.time, "late": t.late_scans,
        "counts": tuple(t.counts().values())}


def _same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].tobytes() == b[k].tobytes(), k
        else:
            assert a[k] == b[k], k


def _table_bytes(t):
    return t.table.to_numpy().tobytes()


def _stamps(n, dt, t0=1000.0):
    """n time stamps from t0, dt apart, and the dts the clock derives from them
    (the first 0: nothing to predict)."""
    times = t0 + dt * np.arange(n)
    return times, np.concatenate([[0.0], np.diff(times)])


# ---------------------------------------------------------------- time stamps and the clock

@pytest.mark.parametrize("motion", ["cv", "imm"])
def test_time_stamped_ticks_are_the_dt_ticks_of_their_differences(motion):
    sc = generate(40, 60, seed=3)
    times, dts = _stamps(60, sc.dt)
    a, b = Tracker(motion=motion), Tracker(motion=motion)
    for z, t, dt in zip(sc.detections, times, dts):
        a.tick(z, time=t)
        b.tick(z, dt)
        assert _table_bytes(a) == _table_bytes(b)
    assert a.time == times[-1]                  # the stamp itself, not a sum of dts
    assert b.time == pytest.approx(times[-1] - times[0])
    assert a.scans == b.scans == 60 and a.counts()["confirmed"] >= 30


def test_the_clock_starts_at_zero_dt_ticks_advance_it_and_the_first_stamp_sets_it():
    t = Tracker()
    assert t.time == 0.0 and t.late_scans == 0
    t.tick(np.zeros((0, 2)), 0.25)
    t.tick(np.zeros((0, 2)), 0.5)
    assert t.time == 0.75
    u = Tracker(initiation="single")            # a scan's detection starts a track at once
    u.tick([[1.0, 2.0]], time=-40.0)            # any finite stamp may come first
    assert u.time == -40.0 and u.count == 1
    u.tick([[1.0, 2.0]], time=-39.0)
    assert u.time == -39.0 and u.counts()["associations"] == 1
    with pytest.raises(AttributeError):
        u.time = 3.0


@pytest.mark.parametrize("motion,dim", [("cv", 2), ("cv", 3), ("imm", 2), ("imm", 3)])
def test_dt_zero_predicts_nothing(motion, dim):
    sc = generate(30, 30, dim=dim, seed=8)
    t = Tracker(motion=motion, dim=dim)
    for z, dt in sc:
        t.tick(z, dt)
    names = ["x", "P"] + (["mu", "xm", "Pm"] if motion == "imm" else [])
    before = {n: t.column(n).copy() for n in names}
    ids = t.ids.copy()
    t.tick(np.zeros((0, dim)), 0.0)                     # nothing seen, no time passed
    keep = np.isin(ids, t.ids)
    order = np.argsort(t.ids)
    for n in names:
        assert before[n][keep][np.argsort(ids[keep])].tobytes() == t.column(n)[order].tobytes(), n
    t2 = Tracker(motion=motion, dim=dim)
    for z, dt in sc:
        t2.tick(z, dt)
    s = t2.time
    t2.tick(np.zeros((0, dim)), time=s)                 # the same through a stamp
    assert t2.time == s
    for n in names:
        assert t2.column(n)[np.argsort(t2.ids)].tobytes() == t.column(n)[order].tobytes(), n


def test_two_sensors_at_the_same_instant():
    scans = list(iter_radar_scans(20, 40, seed=2, sensors=2))
    t, ref = Tracker(r=3.0), ReferenceTracker(r=3.0)
    now = 0.0
    for i, s in enumerate(scans):
        if i % 2 == 0:                  # pairs of scans share a stamp
            now += 2 * s.dt
        t.tick(s.detections, time=now, sensor=s.sensor)
        ref.tick(s.detections, time=now, sensor=s.sensor)
        assert t.time == ref.time == now
        fi, ri = np.argsort(t.ids), np.argsort(ref.ids)
        assert np.array_equal(t.ids[fi], ref.ids[ri])
        np.testing.assert_allclose(t.positions[fi], ref.positions[ri], rtol=1e-9, atol=1e-9)
    assert t.counts()["confirmed"] >= 10


def test_both_or_neither_of_dt_and_time_raise_type_error_before_anything_changes():
    t = Tracker()
    t.tick([[0.0, 0.0]], time=5.0)
    before = _snapshot(t)
    with pytest.raises(TypeError, match="both"):
        t.tick([[0.0, 0.0]], 0.1, time=5.1)
    with pytest.raises(TypeError, match="neither"):
        t.tick([[0.0, 0.0]])
    with pytest.raises(TypeError):
        t.tick([[0.0, 0.0]], "0.1")
    with pytest.raises(TypeError):
        t.tick([[0.0, 0.0]], time="5.1")
    _same(before, _snapshot(t))


@pytest.mark.parametrize("policy", ["refuse", "drop"])
def test_bad_time_and_dt_raise_value_error_before_anything_changes(policy):
    t = Tracker(out_of_sequence=policy)
    t.tick([[0.0, 0.0], [50.0, 50.0]], time=5.0)
    t.tick([[0.1, 0.0], [50.0, 50.1]], time=5.5)
    before = _snapshot(t)
    for bad in (math.nan, math.inf, -math.inf, np.float64("nan")):
        with pytest.raises(ValueError, match="time must be finite"):
            t.tick([[0.0, 0.0]], time=bad)
    for bad in (-1e-9, -1.0, math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="dt must be finite and >= 0"):
            t.tick([[0.0, 0.0]], bad)
    # bad detections at a late stamp: the shape is checked first, under either policy
    with pytest.raises(ValueError):
        t.tick(np.zeros((2, 3)), time=1.0)
    with pytest.raises(TypeError):
        t.tick(None, time=1.0)
    _same(before, _snapshot(t))


def test_a_late_scan_is_refused_by_default_and_nothing_changes():
    assert TrackerConfig().out_of_sequence == "refuse"
    t = Tracker()
    t.tick([[0.0, 0.0]], time=10.0)
    t.tick([[0.1, 0.0]], time=11.0)
    before = _snapshot(t)
    with pytest.raises(ValueError, match="out of sequence"):
        t.tick([[0.2, 0.0]], time=10.5)
    _same(before, _snapshot(t))
    t.tick([[0.2, 0.0]], time=11.0)             # the same instant is not late
    assert t.time == 11.0 and t.scans == 3 and t.late_scans == 0


def test_a_late_scan_is_dropped_and_counted_under_drop():
    t, ref = Tracker(out_of_sequence="drop"), ReferenceTracker(out_of_sequence="drop")
    for x in (t, ref):
        x.tick([[0.0, 0.0]], time=10.0)
        x.tick([[0.1, 0.0]], time=11.0)
    before = _snapshot(t)
    for x in (t, ref):
        x.tick([[0.2, 0.0]], time=10.5)
        x.tick([[0.2, 0.0], [9.0, 9.0]], time=-3.0)
    after = _snapshot(t)
    assert after.pop("late") == 2 and ref.late_scans == 2
    before.pop("late")
    _same(before, after)
    t.tick([[0.2, 0.0]], time=12.0)
    ref.tick([[0.2, 0.0]], time=12.0)
    assert t.late_scans == 2 and t.scans == 3 and t.time == ref.time == 12.0
    np.testing.assert_allclose(t.positions, ref.positions, rtol=1e-12)
    with pytest.raises(ValueError, match="out_of_sequence"):
        TrackerConfig(out_of_sequence="retrodict")


def test_reference_refuses_late_and_bad_time_as_the_tracker():
    ref = ReferenceTracker()
    ref.tick(np.zeros((1, 2)), time=3.0)
    with pytest.raises(ValueError):
        ref.tick(np.zeros((1, 2)), time=2.0)
    with pytest.raises(ValueError):
        ref.tick(np.zeros((1, 2)), time=math.nan)
    with pytest.raises(ValueError):
        ref.tick(np.zeros((1, 2)), -0.5)
    with pytest.raises(TypeError):
        ref.tick(np.zeros((1, 2)), 0.1, time=3.1)
    with pytest.raises(TypeError):
        ref.tick(np.zeros((1, 2)))
    assert ref.time == 3.0 and ref.scans == 1


@pytest.mark.parametrize("motion", ["cv", "imm"])
def test_irregular_stamps_agree_with_the_reference(motion):
    sc = generate(30, 50, seed=12)
    rng = np.random.default_rng(0)
    gaps = rng.choice([0.0, 0.01, 0.02, 0.05], size=50)
    cfg = TrackerConfig(motion=motion, imm_rates=((-0.5, 0.25, 0.25), (0.25, -0.5, 0.25), (0.5, 0.5, -1.0)))
    t, ref = Tracker(cfg), ReferenceTracker(cfg)
    now = 100.0
    for z, g in zip(sc.detections, gaps):
        now += g
        t.tick(z, time=now)
        ref.tick(z, time=now)
        fi, ri = np.argsort(t.ids), np.argsort(ref.ids)
        assert np.array_equal(t.ids[fi], ref.ids[ri])
        np.testing.assert_allclose(t.column("x")[fi], ref.x[ri], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(t.column("P")[fi], pack_covariance(ref.P[ri]), rtol=1e-9, atol=1e-12)
        if motion == "imm":
            np.testing.assert_allclose(t.model_probabilities[fi], ref.mu[ri], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- IMM rates per second

RATES = ((-0.2, 0.1, 0.1), (0.3, -0.6, 0.3), (0.05, 0.15, -0.2))


def test_transition_of_the_rates_is_the_matrix_exponential():
    cfg = TrackerConfig(imm_rates=RATES)
    assert np.array_equal(reference_imm.transition(cfg, 0.0), np.eye(3))
    G = np.array(RATES)
    for dt in (1e-4, 0.02, 1.0, 7.5, 300.0):
        T = reference_imm.transition(cfg, dt)
        # against an independent exponential: the eigen-decomposition
        w, V = np.linalg.eig(G)
        want = (V @ np.diag(np.exp(w * dt)) @ np.linalg.inv(V)).real
        np.testing.assert_allclose(T, want, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(T.sum(axis=1), 1.0, rtol=0, atol=1e-13)
        assert (T >= 0).all()
    # the per-scan form is unchanged
    assert np.array_equal(reference_imm.transition(TrackerConfig(), 0.3), np.array(TrackerConfig().imm_transition))


def test_rates_follow_the_scan_interval():
    # Two scans of dt and one of 2 dt switch alike: exp(G dt)^2 = exp(2 G dt).
    cfg = TrackerConfig(motion="imm", imm_rates=RATES)
    a = reference_imm.transition(cfg, 0.5)
    np.testing.assert_allclose(a @ a, reference_imm.transition(cfg, 1.0), rtol=1e-12)


def test_rates_validated_and_stored_as_a_generator():
    cfg = TrackerConfig(imm_rates=[[-0.2, 0.1, 0.1], [0.3, -0.6, 0.3], [0.05, 0.15, -0.2]])
    assert cfg.imm_rates == RATES and isinstance(cfg.imm_rates, tuple)
    assert TrackerConfig().imm_rates is None
    for bad in ([[0.0] * 3] * 2, [[-0.1, 0.2, -0.1], [0.0] * 3, [0.0] * 3], [[-0.2, 0.1, 0.0]] * 3,
                [[math.nan, 0.0, 0.0]] * 3, [[-math.inf, math.inf, 0.0]] * 3, "fast", 1.0):
        with pytest.raises(ValueError, match="imm_rates"):
            TrackerConfig(imm_rates=bad)


def test_imm_rates_tracker_agrees_with_the_reference_on_regular_scans():
    sc = generate(40, 60, seed=5)
    cfg = TrackerConfig(motion="imm", imm_rates=RATES)
    t, ref = Tracker(cfg), ReferenceTracker(cfg)
    for z, dt in sc:
        t.tick(z, dt)
        ref.tick(z, dt)
    fi, ri = np.argsort(t.ids), np.argsort(ref.ids)
    assert np.array_equal(t.ids[fi], ref.ids[ri])
    np.testing.assert_allclose(t.model_probabilities[fi], ref.mu[ri], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(t.column("xm")[fi], ref.xm[ri], rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- any array-like of numbers

def _float32_scans(n, k, seed):
    """Scans whose values are exact in float32 (so every conversion gives the same float64)."""
    sc = generate(n, k, seed=seed)
    return [z.astype(np.float32).astype(np.float64) for z in sc.detections], sc.dt


@pytest.mark.parametrize("form", ["float32", "fortran", "strided", "list", "int32", "int64", "bigendian",
                                  "float16", "tuple"])
def test_any_array_like_gives_the_float64_result(form):
    scans, dt = _float32_scans(30, 30, 6)
    if form in ("int32", "int64", "float16"):
        scans = [np.round(z) for z in scans]
        if form == "float16":
            scans = [np.clip(z, -2000, 2000) for z in scans]
    convert = {
        "float32": lambda z: z.astype(np.float32),
        "fortran": np.asfortranarray,
        "strided": lambda z: np.repeat(z, 2, axis=0)[::2],
        "list": lambda z: z.tolist(),
        "tuple": lambda z: tuple(map(tuple, z.tolist())),
        "int32": lambda z: z.astype(np.int32),
        "int64": lambda z: z.astype(np.int64),
        "bigendian": lambda z: z.astype(">f8"),
        "float16": lambda z: z.astype(np.float16),
    }[form]
    a, b = Tracker(), Tracker()
    for z in scans:
        a.tick(z, dt)
        b.tick(convert(z), dt)
        assert _table_bytes(a) == _table_bytes(b)
    assert a.count > 0
    # (numpy makes a list's float64 array, which is read in place: one copy either way)
    assert (a.converted_scans, b.converted_scans) == (0, 0 if form in ("list", "tuple") else len(scans))


def test_converted_input_stays_within_max_detections_and_overflow_drop():
    rng = np.random.default_rng(1)
    z = rng.uniform(0, 1000, size=(80, 2)).astype(np.float32)
    a = Tracker(max_detections=50, overflow="drop")
    b = Tracker(max_detections=50)
    a.tick(z, 0.02)
    b.tick(np.ascontiguousarray(z[:50], dtype=np.float64), 0.02)
    assert a.counts()["overflow"] == 30
    assert _table_bytes(a) == _table_bytes(b)
    with pytest.raises(ValueError, match="max_detections"):
        b.tick(np.asfortranarray(z), 0.02)


def test_bad_array_likes_raise_the_same_clear_errors_before_anything_changes():
    t = Tracker()
    t.tick(np.float32([[0.0, 0.0], [5.0, 5.0]]), 0.1)
    before = _snapshot(t)
    for bad, err in ((np.zeros((3, 3), np.float32), ValueError), (np.zeros(4, np.float32), ValueError),
                     ([[0.0, 0.0], [1.0]], ValueError), ([["a", "b"]], TypeError),
                     (np.zeros((2, 2), np.complex64), TypeError), (np.asfortranarray(np.zeros((2, 5))), ValueError),
                     (None, TypeError), ([[object(), 1.0]], TypeError)):
        with pytest.raises(err):
            t.tick(bad, 0.1)
    _same(before, _snapshot(t))
    t.tick(np.full((3, 2), np.nan, np.float32), 0.1)    # NaN rows: dropped and counted, as float64 ones
    assert t.counts()["invalid"] == 3


@pytest.mark.parametrize("form", ["float32", "fortran", "strided", "int64"])
def test_converted_input_allocates_nothing_per_tick(form):
    scans, dt = _float32_scans(50, 200, 10)
    convert = {"float32": lambda z: z.astype(np.float32), "fortran": np.asfortranarray,
               "strided": lambda z: np.repeat(z, 2, axis=0)[::2],
               "int64": lambda z: np.round(z).astype(np.int64)}[form]
    scans = [convert(z) for z in scans]
    t = Tracker()
    tick = t.tick
    for z in scans[:60]:
        tick(z, dt)
    rises = per_call_rises(tick, [(z, dt) for z in scans[60:]])
    assert max(rises) == 0, sorted(rises)[-5:]


def test_time_stamped_ticks_allocate_nothing():
    sc = generate(50, 200, seed=11)
    times, _ = _stamps(200, sc.dt)
    stamps = [float(s) for s in times]
    t = Tracker(motion="imm", imm_rates=RATES)
    tick = t.tick

    def stamped(z, s):
        tick(z, time=s)

    for z, s in zip(sc.detections[:60], stamps[:60]):
        stamped(z, s)
    rises = per_call_rises(stamped, list(zip(sc.detections[60:], stamps[60:])))
    assert max(rises) == 0, sorted(rises)[-5:]
    assert t.time == stamps[-1]


# ---------------------------------------------------------------- polar column orders

@pytest.mark.parametrize("dim,initiation", [(2, "single"), (3, "single"), (2, "two_point")])
def test_bearing_range_rows_give_the_range_bearing_result(dim, initiation):
    scans = list(iter_radar_scans(30, 40, seed=4, dim=dim, sensors=2))
    a, b = (Tracker(r=3.0, dim=dim, initiation=initiation) for _ in range(2))
    for s in scans:
        rev = Sensor(s.sensor.position, s.sensor.range_sigma, s.sensor.bearing_sigma, s.sensor.elevation_sigma,
                     order=BEARING_RANGE)
        a.tick(s.detections, s.dt, sensor=s.sensor)
        b.tick(s.detections[:, ::-1].copy(), s.dt, sensor=rev)       # Stone Soup's order
        assert _table_bytes(a) == _table_bytes(b)
    assert a.counts()["confirmed"] >= 15


def test_sensor_order_constants_measure_and_validate():
    assert RANGE_BEARING == "range_bearing" and BEARING_RANGE == "bearing_range"
    p = np.array([[3.0, 4.0], [-10.0, 2.0]])
    s = Sensor((0.0, 0.0), 1.0, 1e-3)
    r = Sensor((0.0, 0.0), 1.0, 1e-3, order=BEARING_RANGE)
    assert s.order == RANGE_BEARING
    np.testing.assert_array_equal(r.measure(p), to_polar(p, (0.0, 0.0))[:, ::-1])
    np.testing.assert_allclose(r.to_cartesian(r.measure(p)), p, atol=1e-12)
    s3 = Sensor((0.0, 0.0, 0.0), 1.0, 1e-3, 1e-3, order=BEARING_RANGE)
    q = np.array([[3.0, 4.0, 5.0]])
    np.testing.assert_array_equal(s3.measure(q), to_polar(q, (0.0, 0.0, 0.0))[:, ::-1])   # elevation, bearing, range
    for bad in ("xy", None, 1, "RANGE_BEARING"):
        with pytest.raises(ValueError, match="order"):
            Sensor((0.0, 0.0), 1.0, 1e-3, order=bad)


def test_a_sensor_order_written_behind_the_checks_is_refused_by_the_tick():
    s = Sensor((0.0, 0.0), 1.0, 1e-3)
    object.__setattr__(s, "order", "sideways")
    t = Tracker()
    with pytest.raises(ValueError, match="order"):
        t.tick(np.zeros((1, 2)), 0.1, sensor=s)
    assert t.scans == 0 and t.time == 0.0


def test_bearing_range_scans_allocate_nothing_per_tick():
    scans = list(iter_radar_scans(50, 200, seed=9, sensors=2))
    rev = {s.sensor: Sensor(s.sensor.position, s.sensor.range_sigma, s.sensor.bearing_sigma, order=BEARING_RANGE)
           for s in scans}
    args = [(np.ascontiguousarray(s.detections[:, ::-1]), s.dt, rev[s.sensor]) for s in scans]
    t = Tracker(r=3.0)
    tick = t.tick
    for a in args[:60]:
        tick(*a)
    rises = per_call_rises(tick, args[60:])
    assert max(rises) == 0, sorted(rises)[-5:]
