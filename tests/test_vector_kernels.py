"""The lane kernels (dod/tracker/vector_kernels.h through _vector.pyx) give
the per-row kalman.pxd kernels' bits, on every instruction-set path this
CPU runs, and the gated pairs' batch kernel the per-pair distance's bits;
their float32 twins give a float32 numpy reference's bits on every path,
with the innovation inverses and gate half-widths in float32 too; and the
path's selection (DOD_SIMD, set_simd) refuses what it cannot do.

The oracles: in float64, _kernel_hooks' _rows_* hooks (each row, or pair,
through the per-row kernel the tracker's passes call, on the lanes
transposed into rows); in float32, vk_reference (the kernels' operations
in their order, on float32 arrays), which in float64 gives the per-row
kernels' bits (test_reference_is_the_per_row_kernel): the same operations
in the same order.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import vk_reference as ref
from dod.tracker import _kernel_hooks as hooks
from dod.tracker import _vector
from dod.tracker import set_simd, simd_path, simd_paths

PATHS = simd_paths()
DTYPES = [np.float64, np.float32]
# Rows that cross the kernels' blocks of 64 and end off every vector width,
# from row 0 and from inside.
SPANS = [(0, 1), (0, 7), (3, 130), (0, 200), (65, 66), (5, 5)]


@pytest.fixture
def restore_path():
    before = simd_path()
    yield
    set_simd(before)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)


def _rows(lanes):
    return np.ascontiguousarray(lanes.T)


def _assert_same_bits(got, want, what):
    if not np.array_equal(_bits(got), _bits(want)):
        bad = np.argwhere(_bits(got) != _bits(want))
        raise AssertionError(f"{what}: {len(bad)} values differ, first at {tuple(bad[0])}: "
                             f"{got[tuple(bad[0])]!r} against {want[tuple(bad[0])]!r}")


def _lanes(rng, d, n, indefinite=0.0):
    """x (2d, n) and packed P (d (2d + 1), n) lanes of random states: P = A A'
    of a random A, scaled per row over orders of magnitude; a share
    `indefinite` of rows gets a P whose position block is not positive
    definite (a negative variance or a correlation above 1)."""
    m = 2 * d
    x = rng.normal(0.0, 1.0, (m, n)) * rng.choice([1e-3, 1.0, 1e3], (1, n))
    A = rng.normal(0.0, 1.0, (n, m, m))
    full = A @ A.transpose(0, 2, 1) * rng.choice([1e-2, 1.0, 1e2], (n, 1, 1))
    bad = rng.random(n) < indefinite
    k = int(bad.sum())
    if k:
        full[bad, 0, 0] = -np.abs(full[bad, 0, 0])
        half = np.flatnonzero(bad)[::2]
        full[half, 0, 0] = 1.0
        full[half, 1, 1] = 1.0
        full[half, 0, 1] = full[half, 1, 0] = 5.0
    iu = np.triu_indices(m)
    P = np.ascontiguousarray(full[:, iu[0], iu[1]].T)
    return np.ascontiguousarray(x), P


def _lanes_of(dtype, rng, d, n, indefinite=0.0):
    """_lanes in `dtype` (rounded from the same float64 draws)."""
    x, P = _lanes(rng, d, n, indefinite)
    return x.astype(dtype), P.astype(dtype)


# The oracle of each kernel on lanes of a dtype, in place as the kernel:
# float64 the per-row kernels (on the lanes transposed into rows), float32
# the numpy reference.

def _oracle_predict(x, P, dt, q, r0, r1):
    if x.dtype != np.float64:
        return ref.predict(x, P, dt, q, r0, r1)
    xw, Pw = _rows(x), _rows(P)
    hooks._rows_predict(xw, Pw, dt, q, r0, r1)
    x[...], P[...] = xw.T, Pw.T


def _oracle_gate(P, r2, gate, Si, hw, hm, ok, r0, r1):
    if P.dtype != np.float64:
        return ref.gate_rows(P, r2, gate, Si, hw, hm, ok, r0, r1)
    hooks._rows_gate(_rows(P), r2, gate, Si, hw, hm, ok, r0, r1)


def _oracle_update(x, P, det, z, Si, r2, r0, r1):
    if x.dtype != np.float64:
        return ref.update(x, P, det, z, Si, r2, r0, r1)
    xw, Pw = _rows(x), _rows(P)
    hooks._rows_update(xw, Pw, det, z, Si, r2, r0, r1)
    x[...], P[...] = xw.T, Pw.T


def test_paths():
    assert PATHS[0] == "baseline"
    assert set(PATHS) <= {"baseline", "avx2", "avx512"}
    assert simd_path() in PATHS
    assert _vector._PATHS[:1] == ("baseline",)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [2, 3])
def test_predict_is_the_per_row_kernel(path, d, dtype, restore_path):
    set_simd(path)
    rng = np.random.default_rng(60 + d)
    for r0, r1 in SPANS:
        for dt, q in [(0.02, 1.0), (1.7, 1e-3), (0.0, 0.0), (-0.5, 30.0)]:
            x, P = _lanes_of(dtype, rng, d, 203)
            xw, Pw = x.copy(), P.copy()
            _vector._vk_predict(x, P, dt, q, r0, r1)
            _oracle_predict(xw, Pw, dt, q, r0, r1)
            _assert_same_bits(x, xw, f"{path} x rows [{r0}, {r1})")
            _assert_same_bits(P, Pw, f"{path} P rows [{r0}, {r1})")


def _gate(fn, P, d, r2, gate, r0, r1):
    """fn's Si, hw (P's dtype), hm, gateable on P (rows for _rows_gate, lanes
    for the others)."""
    n = P.shape[0] if fn is hooks._rows_gate else P.shape[1]
    Si = np.full((n, d * d), 7.0, P.dtype)
    hw = np.full((n, d), 7.0, P.dtype)
    hm = np.full(n, 7.0)
    ok = np.full(n, 7, np.uint8)
    fn(P, r2, gate, Si, hw, hm, ok, r0, r1)
    return Si, hw, hm, ok


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [2, 3])
def test_gate_rows_is_the_per_row_kernel(path, d, dtype, restore_path):
    set_simd(path)
    rng = np.random.default_rng(600 + d)
    for r0, r1 in SPANS:
        for r2, gate in [(1.0, 9.21), (1e-4, 16.0), (25.0, 0.5)]:
            _, P = _lanes_of(dtype, rng, d, 211, indefinite=0.3)
            Si, hw, hm, ok = _gate(_vector._vk_gate, P, d, r2, gate, r0, r1)
            Siw, hww, hmw, okw = _gate(_oracle_gate, P, d, r2, gate, r0, r1)
            _assert_same_bits(hw, hww, f"{path} hw")
            _assert_same_bits(hm, hmw, f"{path} hm")
            assert np.array_equal(ok, okw)
            # Si: the rows the per-row kernel wrote (the lane kernel may write
            # a row whose S is not positive definite: nobody reads it); rows
            # outside [r0, r1) untouched by both.
            rows = np.arange(P.shape[1])
            inside = (rows >= r0) & (rows < r1)
            _assert_same_bits(Si[okw == 1], Siw[okw == 1], f"{path} Si")
            _assert_same_bits(Si[~inside], Siw[~inside], f"{path} Si outside the rows")
            if r1 - r0 > 50:
                assert 0 < okw[r0:r1].sum() < r1 - r0      # both kinds of row were there


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [2, 3])
def test_update_is_the_per_row_kernel(path, d, dtype, restore_path):
    set_simd(path)
    rng = np.random.default_rng(6000 + d)
    r2 = 0.7
    for r0, r1 in SPANS:
        x, P = _lanes_of(dtype, rng, d, 207)
        n = x.shape[1]
        Si, _, _, ok = _gate(_oracle_gate, P, d, r2, 9.0, 0, n)
        z = rng.normal(0.0, 3.0, (40, d)) + rng.choice([0.0, 1e3], (40, 1))
        det = rng.integers(0, len(z), n).astype(np.int32)
        det[rng.random(n) < 0.3] = -1
        det[ok == 0] = -1
        Si[det < 0] = np.nan              # what a row without a detection holds is never read
        xw, Pw = x.copy(), P.copy()
        x0, P0 = x.copy(), P.copy()
        _vector._vk_update(x, P, det, z, Si, r2, r0, r1)
        _oracle_update(xw, Pw, det, z, Si, r2, r0, r1)
        _assert_same_bits(x, xw, f"{path} x rows [{r0}, {r1})")
        _assert_same_bits(P, Pw, f"{path} P rows [{r0}, {r1})")
        assert (det[r0:r1] >= 0).any() or r1 - r0 < 10
        keep = det < 0
        _assert_same_bits(x[:, keep], x0[:, keep], f"{path} x of rows without a detection")
        _assert_same_bits(P[:, keep], P0[:, keep], f"{path} P of rows without a detection")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
def test_update_without_detections(path, dtype, restore_path):
    """A block whose rows all lack a detection reads no detection (z empty)."""
    set_simd(path)
    x, P = _lanes_of(dtype, np.random.default_rng(1), 2, 70)
    x0, P0 = x.copy(), P.copy()
    det = np.full(70, -1, np.int32)
    _vector._vk_update(x, P, det, np.empty((0, 2)), np.full((70, 4), np.nan, dtype), 1.0)
    _assert_same_bits(x, x0, "x")
    _assert_same_bits(P, P0, "P")


def _pairs(rng, dtype, d, n):
    """n gated pairs' innovations y (n, d) and inverses Si (n, d * d) as the
    gating pass makes them for tracks of `dtype`: y = z - x in double, x a
    track's position (float32 widened), Si gate_rows' in double (float32
    widened; a row that cannot be gated holds what the oracle left: any
    values). Scaled over orders of magnitude down to underflow and up to
    overflow, with zeros of both signs and a few NaN."""
    x, P = _lanes_of(dtype, rng, d, n, indefinite=0.2)
    Si = _gate(_oracle_gate, P, d, 0.7, 9.21, 0, n)[0].astype(np.float64)
    z = x[:d].T.astype(np.float64) + rng.normal(0.0, 2.0, (n, d))
    y = (z - x[:d].T.astype(np.float64)) * rng.choice([1e-158, 1e-3, 1.0, 1e160], (n, 1))
    y[rng.random((n, d)) < 0.05] = 0.0
    y[rng.random((n, d)) < 0.05] = -0.0
    y[rng.random((n, d)) < 0.01] = np.nan
    y[0], y[1] = 0.0, -0.0
    Si[rng.random((n, d * d)) < 0.01] = np.nan
    return np.ascontiguousarray(y), Si


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [2, 3])
def test_pair_d2_is_the_per_pair_kernel(path, d, dtype, restore_path):
    """A batch's distances (pair_d2, double for either dtype's tracks) are
    the per-pair kernel's bits (dod_kalman_mahalanobis2, what the gating
    pass computed one pair at a time), for batches that end off every
    vector width; the lanes past the batch's pairs are not written."""
    set_simd(path)
    rng = np.random.default_rng(60000 + d)
    seen = []
    for n in (1, 2, 3, 5, 8, 17, 63, 64, 131):
        y, Si = _pairs(rng, dtype, d, n + 6)
        want = np.full(n + 6, 7.0)
        hooks._rows_pair_d2(y[:n], Si[:n], want[:n])
        got = np.full(n + 6, 7.0)
        _vector._vk_pair_d2(_rows(y), _rows(Si), got, n)
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), f"{path} n={n}: NaN where the per-pair kernel has none"
        _assert_same_bits(got[~nan], want[~nan], f"{path} d2 of {n} pairs")
        seen.append(want[:n])
    seen = np.concatenate(seen)       # the extremes were there: overflow, zero, subnormal
    assert np.isinf(seen).any() and (seen == 0.0).any() and ((seen > 0) & (seen < 2.3e-308)).any()
    with pytest.raises(ValueError):
        _vector._vk_pair_d2(_rows(y), _rows(Si), got, n + 7)
    with pytest.raises(ValueError):
        _vector._vk_pair_d2(_rows(y), _rows(Si)[:-1].copy(), got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_paths_agree_on_a_tracker_sequence(dtype, restore_path):
    """Predict, gate and update in turn, many steps: every path ends on the
    same bits (what golden hashes need of a tick), and so does the numpy
    reference."""
    kernels = {path: (_vector._vk_predict, _vector._vk_gate, _vector._vk_update) for path in PATHS}
    kernels["reference"] = (ref.predict, ref.gate_rows, ref.update)
    ends = []
    for path, (predict, gate, update) in kernels.items():
        if path in PATHS:
            set_simd(path)
        rng = np.random.default_rng(11)
        x, P = _lanes_of(dtype, rng, 3, 150)
        n = x.shape[1]
        for step in range(20):
            predict(x, P, 0.1, 2.0)
            Si, _, _, ok = _gate(gate, P, 3, 0.5, 11.3, 0, n)
            z = x[:3].T + rng.normal(0.0, 0.7, (n, 3))
            det = np.where(ok == 1, np.arange(n), -1).astype(np.int32)
            det[rng.random(n) < 0.2] = -1
            update(x, P, det, np.ascontiguousarray(z), Si, 0.5)
        ends.append((_bits(x).copy(), _bits(P).copy()))
    for path, (xe, Pe) in zip(kernels, ends):
        assert np.array_equal(xe, ends[0][0]) and np.array_equal(Pe, ends[0][1]), path


@pytest.mark.parametrize("d", [2, 3])
def test_reference_is_the_per_row_kernel(d):
    """In float64 the numpy reference gives the per-row kernels' bits: its
    operations are theirs, in their order (what makes it the float32
    kernels' oracle)."""
    rng = np.random.default_rng(70 + d)
    for r0, r1 in [(0, 203), (5, 131)]:
        x, P = _lanes(rng, d, 203, indefinite=0.3)
        xw, Pw = x.copy(), P.copy()
        ref.predict(x, P, 0.3, 2.0, r0, r1)
        _oracle_predict(xw, Pw, 0.3, 2.0, r0, r1)
        _assert_same_bits(x, xw, "predict x")
        _assert_same_bits(P, Pw, "predict P")
        Si, hw, hm, ok = _gate(ref.gate_rows, P, d, 0.7, 9.21, r0, r1)
        Siw, hww, hmw, okw = _gate(_oracle_gate, P, d, 0.7, 9.21, r0, r1)
        _assert_same_bits(hw, hww, "hw")
        _assert_same_bits(hm, hmw, "hm")
        _assert_same_bits(Si[okw == 1], Siw[okw == 1], "Si")
        assert np.array_equal(ok, okw) and 0 < okw[r0:r1].sum() < r1 - r0
        det = np.where(ok == 1, rng.integers(0, 40, len(ok)), -1).astype(np.int32)
        z = rng.normal(0.0, 3.0, (40, d))
        Si[det < 0] = np.nan
        ref.update(x, P, det, z, Si, 0.7, r0, r1)
        _oracle_update(xw, Pw, det, z, Si, 0.7, r0, r1)
        _assert_same_bits(x, xw, "update x")
        _assert_same_bits(P, Pw, "update P")


# ---- selection ------------------------------------------------------------

def test_set_simd_refuses_what_it_cannot_do(restore_path):
    before = simd_path()
    with pytest.raises(ValueError, match="unknown path 'sse9'"):
        set_simd("sse9")
    assert simd_path() == before
    with pytest.raises(TypeError):
        set_simd(2)
    assert simd_path() == before
    for missing in sorted({"avx2", "avx512"} - set(PATHS)):
        with pytest.raises(ValueError, match=f"lacks the {missing} path"):
            set_simd(missing)
        assert simd_path() == before


def test_set_simd_selects(restore_path):
    for path in PATHS:
        set_simd(path)
        assert simd_path() == path
    set_simd("baseline")
    set_simd("auto")
    assert simd_path() == PATHS[-1]
    set_simd(" AVX2 " if "avx2" in PATHS else "Baseline")
    assert simd_path() == ("avx2" if "avx2" in PATHS else "baseline")


def _run_with(env_value, code="from dod.tracker import simd_path; print(simd_path())"):
    env = dict(os.environ, DOD_SIMD=env_value)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_environment_selects_the_path():
    out = _run_with("baseline")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "baseline"
    out = _run_with("auto")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == PATHS[-1]


def test_environment_refuses_an_unknown_or_missing_path():
    out = _run_with("fastest")
    assert out.returncode != 0
    assert "ValueError: DOD_SIMD: unknown path 'fastest'" in out.stderr
    for missing in sorted({"avx2", "avx512"} - set(PATHS)):
        out = _run_with(missing)
        assert out.returncode != 0
        assert f"ValueError: DOD_SIMD: this CPU lacks the {missing} path" in out.stderr


@pytest.mark.parametrize("dtype", DTYPES)
def test_hooks_refuse_bad_shapes(dtype):
    x, P = _lanes_of(dtype, np.random.default_rng(2), 2, 10)
    with pytest.raises(ValueError):
        _vector._vk_predict(x[:3].copy(), P, 0.1, 1.0)
    with pytest.raises(ValueError):
        _vector._vk_predict(x, P, 0.1, 1.0, 4, 11)
    with pytest.raises(ValueError):
        _vector._vk_update(x, P, np.full(10, 3, np.int32), np.zeros((3, 2)), np.zeros((10, 4), dtype), 1.0)


def test_hooks_refuse_mixed_dtypes():
    """x, P, Si and hw of one dtype: the kernels take no mix (hm and z are
    float64 for both)."""
    x, P = _lanes(np.random.default_rng(3), 2, 10)
    with pytest.raises(ValueError, match="dtype mismatch"):
        _vector._vk_predict(x.astype(np.float32), P, 0.1, 1.0)
    hm, ok, det = np.zeros(10), np.zeros(10, np.uint8), np.full(10, -1, np.int32)
    for dtype, other in [(np.float32, np.float64), (np.float64, np.float32)]:
        xd, Pd = x.astype(dtype), P.astype(dtype)
        with pytest.raises(ValueError, match="dtype mismatch"):
            _vector._vk_gate(Pd, 1.0, 9.0, np.zeros((10, 4), other), np.zeros((10, 2), dtype), hm, ok)
        with pytest.raises(ValueError, match="dtype mismatch"):
            _vector._vk_gate(Pd, 1.0, 9.0, np.zeros((10, 4), dtype), np.zeros((10, 2), other), hm, ok)
        with pytest.raises(ValueError, match="dtype mismatch"):
            _vector._vk_update(xd, Pd, det, np.zeros((1, 2)), np.zeros((10, 4), other), 1.0)
    with pytest.raises(ValueError):        # hm and z: float64 whatever the lanes
        _vector._vk_gate(P.astype(np.float32), 1.0, 9.0, np.zeros((10, 4), np.float32),
                         np.zeros((10, 2), np.float32), hm.astype(np.float32), ok)
    with pytest.raises(TypeError):
        _vector._vk_predict(x.astype(np.int64), P.astype(np.int64), 0.1, 1.0)
