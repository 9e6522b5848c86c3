"""dod.tracker kernels: chi-square gate, Kalman predict/update, exact assignment."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from dod.tracker import chi2_ppf, solve_assignment
from dod.tracker._engine import _kernel_predict, _kernel_update
from dod.tracker.reference import cv_model
from dod.tracker.config import TrackerConfig, chi2_cdf
from dod.tracker.reference import lsa as reference_lsa



def scipy(name):
    """scipy.<name>, or a skip of the one test that compares against it
    (the pure-numpy and bad-input tests run without scipy)."""
    return pytest.importorskip(f"scipy.{name}")


@pytest.mark.parametrize("df", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("p", [0.5, 0.9, 0.99, 0.999, 0.9999, 1e-3])
def test_chi2_quantile_matches_scipy(df, p):
    assert chi2_ppf(p, df) == pytest.approx(scipy('stats').chi2.ppf(p, df), rel=1e-9)
    x = scipy('stats').chi2.ppf(p, df)
    assert chi2_cdf(x, df) == pytest.approx(p, rel=1e-9, abs=1e-12)


def test_chi2_quantile_rejects_bad_probability():
    for p in (0.0, 1.0, -0.1, 2.0, float("nan")):
        with pytest.raises(ValueError):
            chi2_ppf(p, 2)


def test_config_gate_and_validation():
    assert TrackerConfig(dim=3, gate_probability=0.99).gate == pytest.approx(
        scipy('stats').chi2.ppf(0.99, 3))
    for bad in (dict(dim=4), dict(r=0), dict(q=float("nan")), dict(confirm_m=4, confirm_n=3),
                dict(confirm_n=33, confirm_m=1), dict(max_misses=0), dict(overflow="wrap"),
                dict(capacity=0), dict(gate_probability=1.0)):
        with pytest.raises(ValueError):
            TrackerConfig(**bad)


_model = cv_model        # the reference tracker's (F, Q): the kernels' oracle


def _random_spd(rng, n, scale=1.0):
    A = rng.normal(size=(n, n)) * scale
    return A @ A.T + 0.1 * np.eye(n)


@pytest.mark.parametrize("d", [2, 3])
def test_kalman_predict_matches_numpy_equations(d):
    rng = np.random.default_rng(10 + d)
    for _ in range(200):
        n = 2 * d
        x = rng.normal(size=n) * 100
        P = _random_spd(rng, n, rng.uniform(0.01, 10))
        dt = rng.uniform(1e-3, 2.0)
        q = rng.uniform(1e-3, 10)
        F, Q = _model(d, dt, q)
        x1, P1 = x.copy(), P.copy()
        _kernel_predict(x1, P1, dt, q)
        np.testing.assert_allclose(x1, F @ x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(P1, F @ P @ F.T + Q, rtol=1e-10, atol=1e-10 * np.abs(P).max())
        assert np.array_equal(P1, P1.T)


@pytest.mark.parametrize("d", [2, 3])
def test_kalman_update_matches_numpy_equations(d):
    rng = np.random.default_rng(20 + d)
    n = 2 * d
    H = np.hstack([np.eye(d), np.zeros((d, d))])
    for _ in range(200):
        x = rng.normal(size=n) * 10
        P = _random_spd(rng, n, rng.uniform(0.05, 5))
        z = x[:d] + rng.normal(size=d) * 3
        r = rng.uniform(0.1, 5)
        R = r * r * np.eye(d)
        S = H @ P @ H.T + R
        K = P @ H.T @ np.linalg.inv(S)
        y = z - H @ x
        x_ref = x + K @ y
        A = np.eye(n) - K @ H
        P_ref = A @ P @ A.T + K @ R @ K.T
        d2_ref = y @ np.linalg.solve(S, y)
        x1, P1 = x.copy(), P.copy()
        d2 = _kernel_update(x1, P1, z, r)
        assert d2 == pytest.approx(d2_ref, rel=1e-9)
        np.testing.assert_allclose(x1, x_ref, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(P1, P_ref, rtol=1e-8, atol=1e-10 * np.abs(P).max())
        assert np.array_equal(P1, P1.T)
        assert np.linalg.eigvalsh(P1).min() > 0
        # The Joseph form equals the simple form in exact arithmetic.
        np.testing.assert_allclose(P1, (np.eye(n) - K @ H) @ P, rtol=1e-6, atol=1e-8 * np.abs(P).max())


def test_kalman_update_keeps_covariance_pd_under_tiny_noise():
    # Near-singular innovation: the Joseph form stays symmetric positive definite.
    x = np.zeros(4)
    P = np.diag([1e6, 1e6, 1e4, 1e4])
    for _ in range(500):
        _kernel_predict(x, P, 0.02, 1e-6)
        _kernel_update(x, P, np.array([0.0, 0.0]), 1e-3)
        assert np.array_equal(P, P.T)
    assert np.linalg.eigvalsh(P).min() > 0


def _gated_instance(rng, nr, nc, density):
    """Cluster cost as the tracker builds it: d2 - gate on gated pairs, 0 elsewhere."""
    gate = 9.21
    d2 = rng.uniform(0, gate, size=(nr, nc))
    mask = rng.random((nr, nc)) < density
    return np.where(mask, d2 - gate, 0.0), mask


def test_assignment_matches_scipy_on_random_gated_instances():
    rng = np.random.default_rng(5)
    for trial in range(600):
        nr = int(rng.integers(1, 12))
        nc = int(rng.integers(1, 12))
        cost, mask = _gated_instance(rng, nr, nc, rng.uniform(0.1, 1.0))
        r0, c0 = scipy('optimize').linear_sum_assignment(cost)
        r1, c1 = solve_assignment(cost)
        best = cost[r0, c0].sum()
        assert cost[r1, c1].sum() == pytest.approx(best, abs=1e-9)
        assert len(r1) == min(nr, nc) and len(set(c1)) == len(c1) and len(set(r1)) == len(r1)
        # Continuous random costs: the optimal gated pairs are unique.
        g0 = {(a, b) for a, b in zip(r0, c0) if mask[a, b]}
        g1 = {(a, b) for a, b in zip(r1, c1) if mask[a, b]}
        assert g0 == g1
        r2, c2 = reference_lsa(cost)
        assert cost[r2, c2].sum() == pytest.approx(best, abs=1e-9)
        assert {(a, b) for a, b in zip(r2, c2) if mask[a, b]} == g0


def test_assignment_matches_scipy_on_dense_and_large():
    rng = np.random.default_rng(6)
    for nr, nc in [(1, 1), (1, 5), (5, 1), (30, 30), (40, 70), (70, 40), (120, 120)]:
        cost = rng.normal(size=(nr, nc)) * 10
        r0, c0 = scipy('optimize').linear_sum_assignment(cost)
        r1, c1 = solve_assignment(cost)
        assert np.array_equal(r0, r1) and np.array_equal(c0, c1)


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_assignment_with_ties_is_optimal(nr, nc, seed):
    # Integer costs make ties common: the total must still be optimal.
    rng = np.random.default_rng(seed)
    cost = rng.integers(-3, 3, size=(nr, nc)).astype(float)
    r0, c0 = scipy('optimize').linear_sum_assignment(cost)
    r1, c1 = solve_assignment(cost)
    assert cost[r1, c1].sum() == cost[r0, c0].sum()
    r2, c2 = reference_lsa(cost)
    assert cost[r2, c2].sum() == cost[r0, c0].sum()


def test_assignment_rejects_bad_input():
    with pytest.raises(ValueError):
        solve_assignment(np.array([[np.inf, 1.0]]))
    with pytest.raises(ValueError):
        solve_assignment(np.zeros(3))
    r, c = solve_assignment(np.zeros((0, 3)))
    assert r.size == 0 and c.size == 0


def test_kernel_hooks_refuse_shapes_they_cannot_hold():
    # the hooks pack P into a 6 x 6 triangle on the stack: other shapes raise
    for x, P in ((np.zeros(8), np.zeros((8, 8))), (np.zeros(4), np.zeros((6, 6))), (np.zeros(5), np.eye(4))):
        with pytest.raises(ValueError):
            _kernel_predict(x, P, 0.02, 1.0)
        with pytest.raises(ValueError):
            _kernel_update(x, P, np.zeros(2), 1.0)
    with pytest.raises(ValueError):
        _kernel_update(np.zeros(4), np.eye(4), np.zeros(3), 1.0)
