"""Track management in clutter (issue 14): the track score, two-point
initiation and the clutter density estimate, against the numpy reference
(the oracle tests of tests/test_tracker.py, extended to these options), by
hand, on bad input, and for allocations; and the scenario generator's own
statistics."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dod.tracker import ReferenceTracker, Tracker, TrackerConfig
from dod.tracker.scenario import generate

from alloc_measure import per_call_rises

SCORE_2PT = dict(confirmation="score", initiation="two_point")
M_OF_N = dict(confirmation="m_of_n", initiation="single")


def _rows_sorted(a):
    return a[np.lexsort(a.T[::-1])] if len(a) else a


def _assert_same(fast, ref, tol=1e-6):
    a, b = np.argsort(fast.ids), np.argsort(ref.ids)
    assert np.array_equal(fast.ids[a], ref.ids[b])
    np.testing.assert_allclose(fast.column("x")[a], ref.x[b], atol=tol, rtol=0)
    np.testing.assert_allclose(fast.scores[a], ref.score[b], atol=tol, rtol=0)
    np.testing.assert_allclose(fast.column("score_max")[a], ref.score_max[b], atol=tol, rtol=0)
    assert np.array_equal(fast.status[a], ref.status[b])
    assert np.array_equal(fast.column("hits")[a], ref.hits[b])
    assert fast.clutter_density == pytest.approx(ref.clutter_density, rel=1e-12, abs=0)
    # the same detections wait (dod keeps them in its index's cell order, the reference in scan order)
    np.testing.assert_array_equal(_rows_sorted(fast.waiting), _rows_sorted(ref.waiting))
    cf, cr = fast.counts(), ref.counts()
    for key in ("detections", "invalid", "associations", "births", "births_dropped", "deaths",
                "confirmed", "tentative", "pairs", "clusters", "largest_cluster", "unclaimed",
                "singles"):
        assert cf[key] == cr[key], (key, cf[key], cr[key])


# ---------------------------------------------------------------- oracle: same ids, same states

@pytest.mark.parametrize("dim,opts,clutter,patches,seed", [
    (2, SCORE_2PT, 1.0, 0, 1),
    (2, SCORE_2PT, 3.0, 4, 2),
    (2, dict(confirmation="score"), 1.0, 0, 3),
    (2, dict(initiation="two_point"), 1.0, 2, 4),
    (2, dict(SCORE_2PT, clutter_density=3e-4), 1.0, 0, 5),
    (2, dict(SCORE_2PT, surveillance_volume=1e5, clutter_smoothing=1.0), 1.0, 0, 6),
    (3, SCORE_2PT, 1.0, 0, 7),
    (3, dict(confirmation="score"), 2.0, 3, 8),
])
def test_fast_and_reference_agree_with_clutter_options(dim, opts, clutter, patches, seed):
    n = 60
    sc = generate(n, 100, dim=dim, seed=seed, clutter=clutter * n, patches=patches,
                  spacing=40.0 if dim == 2 else 25.0, crossing=0.2)
    cfg = TrackerConfig(dim=dim, **opts)
    fast, ref = Tracker(cfg), ReferenceTracker(cfg)
    confirmed = births = pairs = 0
    for z, dt in sc:
        fast.tick(z, dt)
        ref.tick(z, dt)
        _assert_same(fast, ref)
        confirmed = max(confirmed, fast.counts()["confirmed"])
        births += fast.counts()["births"]
        pairs += fast.counts()["pairs"]
    assert confirmed >= 0.5 * n and births > 0 and pairs > 0       # the options were exercised


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dim=st.sampled_from([2, 3]),
       n_targets=st.integers(0, 6), scans=st.integers(1, 25), spread=st.floats(2.0, 200.0),
       confirmation=st.sampled_from(["m_of_n", "score"]),
       initiation=st.sampled_from(["single", "two_point"]),
       density=st.sampled_from([None, 1e-3]))
def test_fast_matches_reference_on_random_scans_with_clutter_options(
        seed, dim, n_targets, scans, spread, confirmation, initiation, density):
    rng = np.random.default_rng(seed)
    cfg = TrackerConfig(dim=dim, confirmation=confirmation, initiation=initiation,
                        clutter_density=density, v0=5.0, v_max=20.0, score_drop=6.0)
    fast, ref = Tracker(cfg), ReferenceTracker(cfg)
    pos = rng.uniform(0, spread, size=(n_targets, dim))
    vel = rng.normal(scale=5.0, size=(n_targets, dim))
    for _ in range(scans):
        dt = float(rng.uniform(0.005, 0.5))
        pos = pos + vel * dt
        seen = pos[rng.random(n_targets) < 0.8]
        z = seen + rng.normal(scale=cfg.r, size=seen.shape)
        z = np.concatenate([z, rng.uniform(0, spread, size=(int(rng.integers(0, 5)), dim))])
        if rng.random() < 0.3 and len(z):
            z[int(rng.integers(len(z))), int(rng.integers(dim))] = np.nan
        z = np.ascontiguousarray(z[rng.permutation(len(z))])
        fast.tick(z, dt)
        ref.tick(z, dt)
        _assert_same(fast, ref)


# ---------------------------------------------------------------- the score, by hand

def test_score_of_one_target_follows_the_log_likelihood_ratio():
    rho, pd, beta_nt = 1e-4, 0.9, 1e-6
    cfg = TrackerConfig(confirmation="score", initiation="single", clutter_density=rho, pd=pd,
                        new_target_density=beta_nt, false_track_probability=1e-3, track_loss_probability=1e-2, score_drop=11.0)
    assert cfg.confirm_threshold == pytest.approx(math.log(0.99 / 1e-3))
    assert cfg.delete_threshold == pytest.approx(math.log(1e-2 / 0.999))
    t = Tracker(cfg)
    dt = 0.1
    t.tick(np.array([[0.0, 0.0]]), dt)
    expect = math.log(beta_nt / rho)
    assert t.scores.tolist() == [pytest.approx(expect)]
    # next detection exactly at the prediction (d2 = 0): + ln(pd / rho) + ln N(0; 0, S)
    S = cfg.r**2 + (cfg.r**2 + cfg.v0**2 * dt**2 + cfg.q * dt**3 / 3)
    t.tick(np.array([[0.0, 0.0]]), dt)
    expect += math.log(pd / rho) - math.log(2 * math.pi * S)
    assert t.scores[0] == pytest.approx(expect, rel=1e-12)
    assert t.status.tolist() == [1] and expect < cfg.confirm_threshold
    for _ in range(5):
        t.tick(np.array([[0.0, 0.0]]), dt)
        if t.status[0] == 2:
            break
    assert t.status.tolist() == [2] and t.scores[0] >= cfg.confirm_threshold
    top = float(t.column("score_max")[0])
    # misses: ln(1 - pd) each; deleted once 11 below the maximum (5 misses: 11.51)
    for k in range(1, 6):
        t.tick(np.zeros((0, 2)), dt)
        if k < 5:
            assert t.scores[0] == pytest.approx(top + k * math.log(1 - pd))
            assert t.column("score_max")[0] == top
    assert t.count == 0 and t.counts()["deaths"] == 1


def test_tentative_clutter_track_is_deleted_at_walds_lower_threshold():
    cfg = TrackerConfig(confirmation="score", initiation="single", clutter_density=1e-2, new_target_density=1e-1)
    t = Tracker(cfg)
    t.tick(np.array([[5.0, 5.0]]), 0.02)
    s0 = math.log(1e-1 / 1e-2)
    misses = math.ceil((s0 - cfg.delete_threshold) / -math.log(1 - cfg.pd))
    for k in range(misses - 1):
        t.tick(np.zeros((0, 2)), 0.02)
        assert t.count == 1
    t.tick(np.zeros((0, 2)), 0.02)
    assert t.count == 0


# ---------------------------------------------------------------- two-point initiation

def test_two_point_pair_starts_a_track_with_the_pairs_velocity():
    # v0 huge: the Kalman filter of the pair is the two-point difference.
    r, dt = 0.5, 0.1
    cfg = TrackerConfig(initiation="two_point", r=r, v0=1e6, q=1e-9, v_max=40.0)
    t = Tracker(cfg)
    z1, z2 = np.array([[10.0, 20.0]]), np.array([[12.0, 19.0]])     # 22.4 m/s
    t.tick(z1, dt)
    assert t.count == 0 and t.counts()["singles"] == 1 and t.waiting.tolist() == z1.tolist()
    t.tick(z2, dt)
    assert t.count == 1 and t.counts()["births"] == 1 and t.counts()["singles"] == 0
    np.testing.assert_allclose(t.positions[0], z2[0], atol=1e-6)
    np.testing.assert_allclose(t.velocities[0], (z2[0] - z1[0]) / dt, rtol=1e-6)
    P = t.covariances[0]
    np.testing.assert_allclose(np.diag(P), [r * r, r * r, 2 * r * r / dt**2, 2 * r * r / dt**2],
                               rtol=1e-5)
    np.testing.assert_allclose(P[0, 2], r * r / dt, rtol=1e-5)
    assert t.column("hits").tolist() == [2] and t.column("age").tolist() == [2]


def test_two_point_velocity_gate():
    r, dt, vmax = 0.5, 0.1, 30.0
    cfg = TrackerConfig(initiation="two_point", r=r, v_max=vmax)
    reach = vmax * dt + cfg.pair_radius_factor * r          # the gate: speed plus noise
    for dist, paired in ((reach * 0.999, True), (reach * 1.001, False)):
        t = Tracker(cfg)
        t.tick(np.array([[0.0, 0.0]]), dt)
        t.tick(np.array([[dist, 0.0]]), dt)
        assert (t.count == 1) is paired, dist
        assert t.counts()["singles"] == (0 if paired else 1)   # the unpaired one waits instead


def test_two_point_pairs_cheapest_first():
    cfg = TrackerConfig(initiation="two_point", v_max=100.0)
    t = Tracker(cfg)
    reach = 100.0 * 0.02 + cfg.pair_radius_factor * cfg.r          # 7.25 m
    t.tick(np.array([[0.0, 0.0], [3.0, 0.0]]), 0.02)
    # detection 0 is within reach of both singles, detection 1 of single 1
    # only: cheapest first takes (single 1, det 0) at 0.5 m, which leaves
    # single 0 nothing (in single order it would take det 0, single 1 det 1).
    far = 3.0 + 0.97 * reach
    assert far > reach
    t.tick(np.array([[2.5, 0.0], [far, 0.0]]), 0.02)
    assert t.count == 1
    np.testing.assert_allclose(t.positions[0], [2.5, 0.0], atol=0.5)
    assert t.counts()["singles"] == 1 and t.waiting.tolist() == [[far, 0.0]]


# ---------------------------------------------------------------- the clutter estimate

def test_clutter_estimate_converges_and_stays_positive():
    rng = np.random.default_rng(3)
    side, lam = 1000.0, 200
    t = Tracker(confirmation="score", initiation="two_point", surveillance_volume=side * side)
    for _ in range(150):
        z = rng.uniform(0, side, size=(rng.poisson(lam), 2))
        t.tick(z, 0.02)
        assert t.clutter_density > 0.0
    # only clutter: every detection is unclaimed; (u + 1) / V smoothed
    assert t.clutter_density == pytest.approx((lam + 1) / side**2, rel=0.1)
    assert t.counts()["confirmed"] <= 2                        # clutter rarely confirms
    # without a volume: the box of the detections (each side >= 10 r)
    b = Tracker(confirmation="score")
    b.tick(np.array([[0.0, 0.0], [0.0, 0.0]]), 0.02)
    assert b.clutter_density == pytest.approx(3 / (10 * b.config.r) ** 2)
    b.tick(np.zeros((0, 2)), 0.02)                             # an empty scan changes nothing
    assert b.clutter_density == pytest.approx(3 / (10 * b.config.r) ** 2)
    b.tick(np.full((4, 2), np.nan), 0.02)                      # all-NaN: no valid detections either
    assert b.clutter_density == pytest.approx(3 / (10 * b.config.r) ** 2)
    fixed = Tracker(confirmation="score", clutter_density=2e-6)
    fixed.tick(rng.uniform(0, side, size=(50, 2)), 0.02)
    assert fixed.clutter_density == 2e-6


# ---------------------------------------------------------------- bad input and policies

@pytest.mark.parametrize("field,values", [
    ("pd", [0.0, 1.0, -0.1, 1.5, math.nan, "0.9"]),
    ("clutter_density", [0.0, -1e-6, math.inf, math.nan]),
    ("new_target_density", [0.0, -1.0, math.inf]),
    ("false_track_probability", [0.0, 0.5, 1.0, -1e-3]),
    ("track_loss_probability", [0.0, 0.5, 2.0]),
    ("score_drop", [0.0, -1.0, math.inf]),
    ("v_max", [0.0, -5.0, math.nan, math.inf]),
    ("surveillance_volume", [0.0, -1.0, math.inf]),
    ("clutter_smoothing", [0.0, 1.5, math.nan]),
    ("confirmation", ["wald", None]),
    ("initiation", ["three_point", None]),
])
def test_bad_clutter_settings_raise_value_error_naming_the_field(field, values):
    for v in values:
        with pytest.raises(ValueError, match=field):
            TrackerConfig(**{field: v})
        with pytest.raises(ValueError, match=field):
            Tracker(**{field: v})


def _state(t):
    return ({k: v.copy() for k, v in t.columns().items()}, t.count, t.clutter_density,
            t.waiting.copy(), t.scans)


def _same(a, b):
    for k in a[0]:
        assert np.array_equal(a[0][k], b[0][k]), k
    assert a[1:3] == b[1:3] and np.array_equal(a[3], b[3]) and a[4] == b[4]


@pytest.mark.parametrize("opts", [SCORE_2PT, dict(confirmation="score"), dict(initiation="two_point")])
def test_policies_hold_with_clutter_options(opts):
    sc = generate(30, 40, seed=21, clutter=30)
    t = Tracker(max_detections=200, **opts)
    ref = ReferenceTracker(max_detections=200, **opts)
    for z, dt in sc:
        t.tick(z, dt)
        ref.tick(z, dt)
    before = _state(t)
    # 10x max_detections with overflow="error": ValueError, nothing changed
    big = np.random.default_rng(0).uniform(-500, 500, size=(2000, 2))
    with pytest.raises(ValueError, match="max_detections"):
        t.tick(big, 0.02)
    _same(before, _state(t))
    # an empty scan and an all-NaN scan: every track coasts, nobody is born,
    # the clutter estimate and the waiting detections as the reference has them
    for z in (np.zeros((0, 2)), np.full((7, 2), np.nan)):
        t.tick(z, 0.02)
        ref.tick(z, 0.02)
        assert t.counts()["births"] == 0 and t.counts()["associations"] == 0
        assert t.counts()["invalid"] == len(z)
        assert t.clutter_density == before[2]
        _assert_same(t, ref)
    assert t.counts()["singles"] == 0 and len(t.waiting) == 0
    # scans of clutter only: as the reference, and (score logic) nothing confirmed from it
    rng = np.random.default_rng(5)
    n_conf = t.counts()["confirmed"]
    for _ in range(30):
        z = rng.uniform(-2000, 2000, size=(150, 2))
        t.tick(z, 0.02)
        ref.tick(z, 0.02)
        _assert_same(t, ref)
    if opts.get("confirmation") == "score":
        assert t.counts()["confirmed"] <= n_conf
    # overflow="drop" at 10x: the first max_detections rows are used
    a = Tracker(max_detections=200, overflow="drop", **opts)
    b = Tracker(max_detections=200, **opts)
    a.tick(big, 0.02)
    b.tick(np.ascontiguousarray(big[:200]), 0.02)
    assert a.counts()["overflow"] == 1800
    _same(_state(a), _state(b))


def test_table_full_drops_pair_births_and_counts():
    t = Tracker(capacity=5, initiation="two_point", v_max=100.0)
    z = np.random.default_rng(2).uniform(0, 1000, size=(12, 2))
    t.tick(z, 0.02)
    t.tick(z + 0.1, 0.02)
    assert t.count == 5 and t.counts()["births"] == 5 and t.counts()["births_dropped"] == 7
    assert t.counts()["singles"] == 0


def test_zero_allocations_per_tick_with_score_and_two_point():
    sc = generate(50, 260, seed=10, clutter=50)
    scans = list(sc.detections)
    dt = sc.dt
    t = Tracker(**SCORE_2PT)
    tick = t.tick
    for z in scans[:60]:
        tick(z, dt)
    rises = per_call_rises(tick, [(z, dt) for z in scans[60:]])
    assert max(rises) == 0, sorted(rises)[-5:]
    assert t.counts()["confirmed"] >= 30


def test_score_and_two_point_track_well_at_moderate_clutter():
    from dod.tracker.metrics import mot_metrics, run_tracker, scenario_hota

    sc = generate(100, 200, seed=3, clutter=100)          # clutter 1 per target per scan
    est = run_tracker(Tracker(**SCORE_2PT), sc)
    m = mot_metrics(sc, est)
    assert m["mota"] >= 0.9 and m["idf1"] >= 0.9
    assert m["num_false_positives"] / sc.scans <= 1.0      # <= 1 % of the targets per scan
    assert scenario_hota(sc, est)["hota"] >= 0.8


# ---------------------------------------------------------------- the scenario generator itself

def _z_tol(n, p, sigmas=5.0):
    return sigmas * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("pd,clutter,patches", [(0.9, 50.0, 0), (0.6, 400.0, 3), (1.0, 0.0, 0)])
def test_generator_detection_rate_and_clutter_count(pd, clutter, patches):
    sc = generate(100, 150, seed=31, pd=pd, clutter=clutter, patches=patches)
    alive = sum(len(t) for t in sc.truth_ids)
    detected = sum(int((dt >= 0).sum()) for dt in sc.det_truth)
    false = sum(int((dt < 0).sum()) for dt in sc.det_truth)
    # detections of targets: Binomial(alive, pd); clutter: Poisson(clutter * scans)
    assert abs(detected - pd * alive) <= _z_tol(alive, pd)
    assert abs(false - clutter * sc.scans) <= 5.0 * math.sqrt(clutter * sc.scans)
    assert sc.clutter == clutter and sc.clutter_density == pytest.approx(clutter / sc.extent**2)
    # every target detection is its truth plus N(0, r^2) noise: chi-square check of the spread
    res = []
    for z, dt, ids, pos in zip(sc.detections, sc.det_truth, sc.truth_ids, sc.truth_pos):
        m = dt >= 0
        where = np.searchsorted(ids, dt[m])
        res.append(z[m] - pos[where])
    res = np.concatenate(res)
    k = res.size
    if k:
        assert abs((res**2).sum() - k) <= 5.0 * math.sqrt(2 * k)     # r = 1: chi2(k)


def test_generator_clutter_density_and_patches():
    sc = generate(200, 100, seed=32, clutter_density=2e-5, patches=4, patch_fraction=0.5,
                  patch_radius=50.0)
    lam = 2e-5 * sc.extent**2
    assert sc.clutter == pytest.approx(lam)
    zc = np.concatenate([z[dt < 0] for z, dt in zip(sc.detections, sc.det_truth)])
    assert abs(len(zc) - lam * sc.scans) <= 5 * math.sqrt(lam * sc.scans)
    d = np.sqrt(((zc[:, None, :] - sc.patch_centres[None, :, :]) ** 2).sum(-1)).min(1)
    inside = d <= 50.0 + 1e-9
    # P(in a patch) = fraction + (1 - fraction) * (patch area share of the region, overlap ignored)
    share = min(1.0, 4 * math.pi * 50.0**2 / sc.extent**2)
    p = 0.5 + 0.5 * share
    assert abs(inside.sum() - p * len(zc)) <= _z_tol(len(zc), p) + 0.5 * share * len(zc)
    # and the patches are dense: their clutter density is far above the uniform part
    dens_in = inside.sum() / (4 * math.pi * 50.0**2)
    dens_out = (~inside).sum() / (sc.extent**2 - 4 * math.pi * 50.0**2)
    assert dens_in > 50 * dens_out
    with pytest.raises(ValueError):
        generate(10, 5, clutter=3, clutter_density=1e-5)
    with pytest.raises(ValueError):
        generate(10, 5, clutter=-1)
    with pytest.raises(ValueError):
        generate(10, 5, pd=1.5)


def test_generator_target_speeds_match_what_was_asked():
    lo, hi = 5.0, 20.0
    sc = generate(2000, 3, seed=33, speed=(lo, hi), q=1e-12, crossing=0.0, birth_death=0.0)
    v = (sc.truth_pos[1] - sc.truth_pos[0]) / sc.dt          # q ~ 0: the initial velocities
    s = np.linalg.norm(v, axis=1)
    assert s.min() >= lo - 1e-6 and s.max() <= hi + 1e-6
    # uniform on [lo, hi]: mean (lo + hi) / 2, variance (hi - lo)^2 / 12
    assert abs(s.mean() - (lo + hi) / 2) <= 5 * (hi - lo) / math.sqrt(12 * s.size)
    # directions uniform: the mean unit vector is ~0 (each component std 1/sqrt(2 n))
    u = v / s[:, None]
    assert np.abs(u.mean(0)).max() <= 5 / math.sqrt(2 * s.size)
    # process noise: velocity steps have variance q * dt per axis (chi-square check)
    q = 4.0
    sc = generate(500, 4, seed=34, q=q, crossing=0.0, birth_death=0.0)
    v1 = (sc.truth_pos[1] - sc.truth_pos[0]) / sc.dt
    v2 = (sc.truth_pos[2] - sc.truth_pos[1]) / sc.dt
    steps = (v2 - v1).ravel() / math.sqrt(q * sc.dt)
    k = steps.size
    assert abs((steps**2).sum() - k) <= 5 * math.sqrt(2 * k)


def test_accuracy_bench_runs_and_reports_both_trackers():
    from dod.tracker import accuracy

    lines = []
    rows = accuracy.run(targets=40, scans=60, seeds=1, clutters=(0.2, 1.0), out=lines.append)
    assert [r["tracker"] for r in rows] == ["m_of_n", "score+2pt"] * 2
    for r in rows:
        assert 0.5 < r["mota"] <= 1.0 and 0.3 < r["hota"] <= 1.0 and math.isfinite(r["tick_ms"])
        assert r["blocks"] < 0.5
    assert any("goals score+2pt" in ln for ln in lines)
    assert any("goal clutter 0.2" in ln for ln in lines)
    # the timed trackers prefaulted before their first tick (the bytes of a
    # fresh tracker of the same config), as the title says; or not at all
    cfgs = accuracy.configs(40, 1.0)
    want = [Tracker(c).prefault() for _, c in cfgs]
    assert [r["prefault"] for r in rows[2:]] == want and all(w > 0 for w in want)
    assert "timed trackers prefaulted" in lines[0]
    sc = generate(40, 60, seed=0, pd=0.9, clutter=40.0)
    assert accuracy.tick_cost(sc, cfgs, prefault=False)[2] == [0, 0]


# ---------------------------------------------------------------- the defaults

def test_default_management_is_the_score_and_two_point_births():
    cfg = TrackerConfig()
    assert (cfg.confirmation, cfg.initiation) == ("score", "two_point")
    assert TrackerConfig(**M_OF_N) != cfg and TrackerConfig(**SCORE_2PT) == cfg


@pytest.mark.parametrize("kind,dim,clutter", [("cartesian", 2, 3.0), ("cartesian", 3, 3.0), ("radar", 2, 3.0),
                                              ("cartesian", 2, 0.2), ("radar", 3, 0.2)])
def test_the_defaults_hold_up_where_m_of_n_does_not(kind, dim, clutter):
    # Seeded scenarios, 100 targets, `clutter` false detections per target per
    # scan: the defaults' MOTA is high at every level, and at least M-of-N's
    # with single-point births (less 0.01: at light clutter the two are level).
    from dod.tracker.metrics import mot_metrics, run_tracker
    from dod.tracker.scenario import generate_radar

    if kind == "radar":
        sc = generate_radar(100, 150, dim=dim, sensors=2, seed=4, clutter=clutter * 100)
    else:
        sc = generate(100, 150, dim=dim, seed=4, clutter=clutter * 100)
    mota = {name: mot_metrics(sc, run_tracker(Tracker(dim=dim, r=3.0, **kw), sc))["mota"]
            for name, kw in (("defaults", {}), ("m_of_n", M_OF_N))}
    assert mota["defaults"] >= 0.96, mota
    assert mota["defaults"] >= mota["m_of_n"] - 0.01, mota
