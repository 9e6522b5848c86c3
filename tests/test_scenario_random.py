"""The scenario's per-scan kernels (dod.tracker._scenario): the random
streams against their distributions, each kernel against what it promises,
and the scenario's noise against the model it states. Every stream is
seeded, so each bound below is checked on fixed numbers: the bounds are 5-6
standard deviations (or a chi-square quantile far in the tail) so that a
correct generator passes for any seed, and a wrong one (a biased block, a
missing tail, a shuffle off by one) fails by a wide margin."""
import math

import numpy as np
import pytest

from dod.tracker._scenario import Random
from dod.tracker.scenario import generate


def _rand(seed=0):
    return Random(np.random.default_rng(seed))


def _chi2_ok(observed, expected, dof):
    """Pearson's statistic below the mean + 6 standard deviations of chi2(dof)."""
    stat = float(((observed - expected) ** 2 / expected).sum())
    return stat < dof + 6.0 * math.sqrt(2.0 * dof), stat


def _normal_cdf(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def test_normal_matches_the_gaussian_cdf_tails_included():
    x = np.empty(2_000_000)
    _rand(1).normal(x)
    assert abs(x.mean()) < 6 / math.sqrt(x.size)
    assert abs(x.var() - 1.0) < 6 * math.sqrt(2.0 / x.size)
    # 80 bins over [-4, 4] plus the two tails beyond, against the exact CDF
    edges = np.concatenate([[-np.inf], np.linspace(-4.0, 4.0, 81), [np.inf]])
    counts, _ = np.histogram(x, edges)
    cdf = np.array([_normal_cdf(e) for e in edges])
    ok, stat = _chi2_ok(counts, x.size * np.diff(cdf), len(counts) - 1)
    assert ok, stat
    # the tail beyond the ziggurat's base (R = 3.4426) and far beyond it
    for t in (3.4426, 4.5):
        p = math.erfc(t / math.sqrt(2.0))
        n_beyond = int((np.abs(x) > t).sum())
        assert abs(n_beyond - x.size * p) < 6 * math.sqrt(x.size * p), (t, n_beyond, x.size * p)
    assert np.isfinite(x).all()


def test_uniform_is_in_the_half_open_unit_interval_and_flat():
    u = np.empty(1_000_000)
    _rand(2).uniform(u)
    assert u.min() >= 0.0 and u.max() < 1.0
    counts, _ = np.histogram(u, np.linspace(0.0, 1.0, 101))
    ok, stat = _chi2_ok(counts, np.full(100, u.size / 100), 99)
    assert ok, stat


@pytest.mark.parametrize("n", [1, 7, 3 << 30])
def test_below_is_uniform_without_modulo_bias(n):
    out = np.empty(600_000, dtype=np.int64)
    _rand(3).below(n, out)
    assert out.min() >= 0 and out.max() < n
    if n == 1:
        assert not out.any()
        return
    # 3 * 2^30: a modulo of a 32-bit draw would make the lower third twice as likely
    k = 7 if n == 7 else 3
    counts = np.bincount(out * k // n, minlength=k)
    ok, stat = _chi2_ok(counts, np.full(k, out.size / k), k - 1)
    assert ok, (stat, counts)


def test_below_refuses_zero():
    with pytest.raises(ValueError):
        _rand().below(0, np.empty(3, dtype=np.int64))


def test_shuffle_moves_rows_with_their_ids_and_every_order_is_equally_likely():
    g = _rand(4)
    rows = np.arange(20, dtype=np.float64).reshape(10, 2)
    ids = np.arange(10, dtype=np.int64)
    g.shuffle(rows, ids)
    assert sorted(ids.tolist()) == list(range(10))
    assert np.array_equal(rows, np.stack([2 * ids, 2 * ids + 1], axis=1).astype(np.float64))
    # all 24 orders of 4 rows, 48,000 shuffles
    seen = {}
    for _ in range(48_000):
        r = np.zeros((4, 1))
        i = np.arange(4, dtype=np.int64)
        g.shuffle(r, i)
        key = tuple(i.tolist())
        seen[key] = seen.get(key, 0) + 1
    assert len(seen) == 24
    ok, stat = _chi2_ok(np.array(list(seen.values())), np.full(24, 2000.0), 23)
    assert ok, stat
    for n in (0, 1):                      # nothing to do, nothing drawn
        g.shuffle(np.zeros((n, 2)), np.zeros(n, dtype=np.int64))
    with pytest.raises(ValueError):
        g.shuffle(np.zeros((3, 2)), np.zeros(2, dtype=np.int64))


def test_observe_takes_the_alive_targets_detects_at_pd_with_noise_r():
    g = _rand(5)
    n, dim = 200_000, 2
    pos = np.random.default_rng(0).uniform(-100, 100, (n, dim))
    start = np.zeros(n, dtype=np.int64)
    end = np.full(n, 10, dtype=np.int64)
    start[::4] = 6                                  # a quarter born at scan 6
    end[1::4] = 3                                   # a quarter dead from scan 3
    truth, tid = np.empty((n, dim)), np.empty(n, dtype=np.int64)
    det, did = np.empty((n, dim)), np.empty(n, dtype=np.int64)
    na, nd = g.observe(pos, start, end, 4, 0.7, 2.5, truth, tid, det, did)
    alive = np.flatnonzero((start <= 4) & (4 < end))
    assert na == alive.size == n // 2
    assert np.array_equal(tid[:na], alive + 1)                    # row order, ids are rows + 1
    assert np.array_equal(truth[:na], pos[alive])
    assert abs(nd / na - 0.7) < 6 * math.sqrt(0.7 * 0.3 / na)
    ids = did[:nd]
    assert np.all(np.diff(ids) > 0) and np.isin(ids, alive + 1).all()
    err = det[:nd] - pos[ids - 1]
    assert abs(err.std() - 2.5) < 6 * 2.5 / math.sqrt(2 * err.size)
    assert abs(err.mean()) < 6 * 2.5 / math.sqrt(err.size)
    # pd 0 detects nothing, pd 1 everything; r 0 is the truth itself
    assert g.observe(pos, start, end, 4, 0.0, 1.0, truth, tid, det, did) == (na, 0)
    assert g.observe(pos, start, end, 4, 1.0, 0.0, truth, tid, det, did) == (na, na)
    assert np.array_equal(det[:na], pos[alive])


def test_observe_and_move_refuse_mismatched_arrays_and_leave_them_alone():
    g = _rand(6)
    pos, vel = np.ones((5, 2)), np.ones((5, 2))
    z64 = np.zeros(5, dtype=np.int64)
    with pytest.raises(ValueError):
        g.observe(pos, z64, np.ones(4, dtype=np.int64), 0, 0.9, 1.0,
                  np.zeros((5, 2)), z64.copy(), np.zeros((5, 2)), z64.copy())
    with pytest.raises(ValueError):
        g.observe(pos, z64, np.ones(5, dtype=np.int64), 0, 0.9, 1.0,
                  np.zeros((5, 3)), z64.copy(), np.zeros((5, 2)), z64.copy())
    with pytest.raises(ValueError):
        g.move(pos, np.ones((4, 2)), np.zeros(5, dtype=np.uint8), np.zeros(5), 1.0, 0.1)
    with pytest.raises(ValueError):
        g.move(np.ones((5, 1)), np.ones((5, 1)), np.zeros(5, dtype=np.uint8), np.zeros(5), 1.0, 0.1)
    assert (pos == 1).all() and (vel == 1).all()


def test_move_accelerates_all_but_the_steady_turns_and_advances():
    g = _rand(7)
    n = 100_000
    pos = np.zeros((n, 3))
    vel = np.tile([3.0, 4.0, 1.0], (n, 1))
    steady = np.zeros(n, dtype=np.uint8)
    steady[:10] = 1
    omega = np.zeros(n)
    g.move(pos, vel, steady, omega, 0.5, 0.1)
    assert np.array_equal(vel[:10], np.tile([3.0, 4.0, 1.0], (10, 1)))       # steady: no noise
    dv = vel[10:] - [3.0, 4.0, 1.0]
    assert np.allclose(dv.std(axis=0), 0.5, atol=6 * 0.5 / math.sqrt(2 * n))
    assert np.array_equal(pos, vel * 0.1)
    # no noise, turning at omega: speed kept, heading turned by omega * dt
    pos, vel = np.zeros((2, 2)), np.array([[1.0, 0.0], [0.0, 2.0]])
    g.move(pos, vel, np.zeros(2, dtype=np.uint8), np.array([0.5, -1.0]), 0.0, 0.2)
    assert np.allclose(vel, [[math.cos(0.1), math.sin(0.1)], [2 * math.sin(0.2), 2 * math.cos(0.2)]])
    assert np.allclose(pos, vel * 0.2)


def test_a_seed_names_a_stream():
    a, b = np.empty(1000), np.empty(1000)
    _rand(8).normal(a)
    _rand(8).normal(b)
    assert np.array_equal(a, b)
    g = _rand(8)
    g.normal(b)
    g.normal(b)                              # the state moves on
    assert not np.array_equal(a, b)
    _rand(9).normal(b)
    assert not np.array_equal(a, b)


def test_scenario_noise_is_the_model_it_states():
    """Measurement noise r per axis, white acceleration: velocity steps of
    sqrt(q dt) per axis, none for the crossing pairs; rows shuffled."""
    r, q, dt = 2.0, 4.0, 0.1
    sc = generate(3000, 6, r=r, q=q, dt=dt, clutter=0.0, birth_death=0.0, crossing=0.2, seed=13)
    res = []
    for s in range(sc.scans):
        lab = sc.det_truth[s]
        pos_of = dict(zip(sc.truth_ids[s].tolist(), sc.truth_pos[s]))
        res.append(sc.detections[s] - np.array([pos_of[i] for i in lab.tolist()]))
        assert not np.all(np.diff(lab) > 0)                       # shuffled, not in id order
    res = np.concatenate(res)
    assert abs(res.std() - r) < 6 * r / math.sqrt(2 * res.size)
    p = np.stack(sc.truth_pos)                                    # (scans, targets, dim): all alive
    v = np.diff(p, axis=0) / dt
    dv = np.diff(v, axis=0)                                       # acceleration steps
    moving = np.abs(dv).max(axis=(0, 2)) > 1e-6
    n_cross = int((~moving).sum())
    assert n_cross == 2 * int(round(0.2 * 3000)) // 2             # the crossing pairs fly straight
    steps = dv[:, moving]
    assert abs(steps.std() - math.sqrt(q * dt)) < 6 * math.sqrt(q * dt) / math.sqrt(2 * steps.size)



@pytest.mark.parametrize("bad", [dict(r=-1.0), dict(r=np.nan), dict(q=-0.5), dict(q=np.inf),
                                 dict(dt=0.0), dict(dt=-0.02), dict(dt=np.nan)])
def test_scenario_refuses_negative_or_non_finite_noise_and_step(bad):
    with pytest.raises(ValueError):
        generate(10, 5, **bad)
