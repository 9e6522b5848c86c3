"""Python test hooks of the Kalman and EKF kernels (kalman.pxd, measurement.pxd).

They run one kernel on numpy arrays so that tests can compare it with a
reference implementation; the tracker itself never calls them.
"""
from libc.math cimport sqrt
from libc.stdint cimport int32_t, uint8_t
from libc.string cimport memset
from dod.tracker._vector cimport _rows_end
from dod.tracker.kalman cimport (dod_kalman_predict, dod_kalman_innovation_inverse, dod_kalman_pack,
                                 dod_kalman_unpack, dod_kalman_mahalanobis2, dod_kalman_update,
                                 dod_kalman_noise, dod_kalman_noise_of, dod_kalman_predict_step,
                                 dod_kalman_packed_index)
from dod.tracker.measurement cimport dod_sensor, dod_ekf_update, dod_ekf_position_update, dod_ekf_rate_update

import numpy as np


# ---------------------------------------------------------------- test hooks of the Kalman kernels

cdef int _kernel_dim(double[::1] x, double[:, ::1] P) except -1:
    """d of a test hook's state: x of 2d values, P of 2d x 2d, d 2 or 3."""
    cdef int d = x.shape[0] // 2
    if d not in (2, 3) or x.shape[0] != 2 * d or P.shape[0] != 2 * d or P.shape[1] != 2 * d:
        raise ValueError("the kernels take x of 4 or 6 values and P of 4 x 4 or 6 x 6")
    return d


def _kernel_predict(double[::1] x, double[:, ::1] P, double dt, double q):
    """Test hook: predict one state in place (P full; the kernel runs on its
    upper triangle, packed)."""
    cdef int d = _kernel_dim(x, P)
    cdef double Pp[21]
    dod_kalman_pack(&P[0, 0], 2 * d, Pp)
    dod_kalman_predict(&x[0], Pp, d, dt, q)
    dod_kalman_unpack(Pp, 2 * d, &P[0, 0])


def _kernel_update(double[::1] x, double[:, ::1] P, double[::1] z, double r):
    """Test hook: update one state in place with measurement z (P full, as
    for _kernel_predict); returns d2 (or nan)."""
    cdef int d = _kernel_dim(x, P)
    cdef double Pp[21]
    cdef double Si[9]
    cdef double y[3]
    cdef int i
    if z.shape[0] != d:
        raise ValueError("z needs one value per position axis")
    dod_kalman_pack(&P[0, 0], 2 * d, Pp)
    if not dod_kalman_innovation_inverse(Pp, d, r * r, Si):
        return float("nan")
    for i in range(d):
        y[i] = z[i] - x[i]
    d2 = dod_kalman_mahalanobis2(y, Si, d)
    dod_kalman_update(&x[0], Pp, &z[0], Si, d, r * r)
    dod_kalman_unpack(Pp, 2 * d, &P[0, 0])
    return d2


def _kernel_ekf_update(double[::1] x, double[:, ::1] P, double[::1] z, double[::1] pos, double[::1] var,
                       bint log_likelihood=False):
    """Test hook: dod_ekf_update of one state (n = len(x), d = len(z)) in
    place; returns (d2, Si) or (nan, None) when the measurement is unusable;
    with log_likelihood, dod_ekf_position_update's ln N (or -inf) instead."""
    cdef dod_sensor s
    cdef double Si[9]
    cdef int a, d = z.shape[0]
    memset(&s, 0, sizeof(s))
    for a in range(d):
        s.pos[a] = pos[a]
        s.var[a] = var[a]
    if log_likelihood:
        return dod_ekf_position_update(&x[0], &P[0, 0], x.shape[0], &z[0], d, &s)
    d2 = dod_ekf_update(&x[0], &P[0, 0], x.shape[0], d, &z[0], &s, Si)
    if d2 < 0:
        return float("nan"), None
    return d2, np.array([Si[a] for a in range(d * d)]).reshape(d, d)


def _kernel_ekf_rate_update(double[::1] x, double[:, ::1] P, double[::1] z, double[::1] pos, double[::1] var):
    """Test hook: dod_ekf_rate_update of one state (n = len(x) >= 2d, d =
    len(z) - 1: var holds the d variances then the range rate's) in place;
    returns ln N of the prediction, or -inf with x and P unchanged."""
    cdef dod_sensor s
    cdef int a, d = z.shape[0] - 1
    if d not in (2, 3) or x.shape[0] < 2 * d or x.shape[0] > 8 or P.shape[0] != x.shape[0] \
            or P.shape[1] != x.shape[0] or pos.shape[0] != d or var.shape[0] != d + 1:
        raise ValueError("z of 3 or 4 values, x of 2d to 8, P n x n, pos d, var d + 1")
    memset(&s, 0, sizeof(s))
    for a in range(d):
        s.pos[a] = pos[a]
        s.var[a] = var[a]
    s.rate_var = var[d]
    return dod_ekf_rate_update(&x[0], &P[0, 0], x.shape[0], &z[0], d, &s)


# ---------------------------------------------------------------- the per-row kernels over rows
#
# The tracker's per-row kernels run one row at a time over row-major rows
# (x (N, 2d), packed P (N, d (2d + 1))): the oracles of the lane kernels
# (dod/tracker/_vector.pyx, tests/test_vector_kernels.py, on the transposed
# lanes) and their baseline in asv_bench/benchmarks/bench_vector_kernels.py.

cdef int _rows_dim(double[:, ::1] x, double[:, ::1] P) except -1:
    cdef int d = x.shape[1] // 2
    if d not in (2, 3) or x.shape[1] != 2 * d or P.shape[1] != d * (2 * d + 1) or P.shape[0] != x.shape[0]:
        raise ValueError("rows x (N, 2d) and P (N, d (2d + 1)), d 2 or 3")
    return d


def _rows_predict(double[:, ::1] x, double[:, ::1] P, double dt, double q, size_t r0=0, r1=None):
    """Test hook: dod_kalman_predict_step on each of rows [r0, r1) of x
    (N, 2d) and P (N, d (2d + 1)), in place."""
    cdef int d = _rows_dim(x, P)
    cdef size_t r, end = _rows_end(r0, r1, x.shape[0])
    cdef dod_kalman_noise w = dod_kalman_noise_of(dt, q)
    if d == 2:                  # d a constant in each loop, as in the tracker's passes
        for r in range(r0, end):
            dod_kalman_predict_step(&x[r, 0], &P[r, 0], 2, &w)
    else:
        for r in range(r0, end):
            dod_kalman_predict_step(&x[r, 0], &P[r, 0], 3, &w)


def _rows_gate(double[:, ::1] P, double r2, double gate, double[:, ::1] Si, double[:, ::1] hw, double[::1] hm,
               uint8_t[::1] gateable, size_t r0=0, r1=None):
    """Test hook: rows [r0, r1) of P (N, d (2d + 1)) as _model.pxd's
    _meas_gate_row (Cartesian) gates them: Si (N, d * d) from
    dod_kalman_innovation_inverse (written only where it succeeds), the
    half-widths hw (N, d), the widest hm (0 where it failed), gateable."""
    cdef int d = 2 if P.shape[1] == 10 else 3
    cdef Py_ssize_t rows = P.shape[0]
    cdef size_t r, end = _rows_end(r0, r1, P.shape[0])
    if P.shape[1] not in (10, 21) or Si.shape[0] != rows or Si.shape[1] != d * d or hw.shape[0] != rows \
            or hw.shape[1] != d or hm.shape[0] != rows or gateable.shape[0] != rows:
        raise ValueError("P (N, 10 or 21), Si (N, d*d), hw (N, d), hm and gateable (N,)")
    if d == 2:
        for r in range(r0, end):
            _row_gate(&P[r, 0], 2, r2, gate, &Si[r, 0], &hw[r, 0], &hm[r], &gateable[r])
    else:
        for r in range(r0, end):
            _row_gate(&P[r, 0], 3, r2, gate, &Si[r, 0], &hw[r, 0], &hm[r], &gateable[r])


cdef inline void _row_gate(const double* P, int d, double r2, double gate, double* Si, double* hw, double* hm,
                           uint8_t* gateable) noexcept nogil:
    """_meas_gate_row's Cartesian branch on one row."""
    cdef int a, n = 2 * d
    cdef double w, hmax = 0.0
    cdef bint ok = dod_kalman_innovation_inverse(P, d, r2, Si)
    for a in range(d):
        w = sqrt(gate * (P[dod_kalman_packed_index(a, a, n)] + r2))
        hw[a] = w
        if w > hmax:
            hmax = w
    if not ok:
        hmax = 0.0
    gateable[0] = ok
    hm[0] = hmax


def _rows_update(double[:, ::1] x, double[:, ::1] P, const int32_t[::1] det, const double[:, ::1] z,
                 const double[:, ::1] Si, double r2, size_t r0=0, r1=None):
    """Test hook: dod_kalman_update of each of rows [r0, r1) of x, P (as
    _rows_predict's) with detection det[r] of z (k, d) and Si (N, d * d);
    rows with det[r] < 0 are left alone."""
    cdef int d = _rows_dim(x, P)
    cdef size_t r, end = _rows_end(r0, r1, x.shape[0])
    if det.shape[0] != x.shape[0] or z.shape[1] != d or Si.shape[0] != x.shape[0] or Si.shape[1] != d * d:
        raise ValueError("det (N,), z (k, d), Si (N, d*d)")
    for r in range(r0, end):
        if det[r] >= z.shape[0]:
            raise ValueError(f"row {r}'s detection {det[r]} is not one of the {z.shape[0]}")
    if d == 2:
        for r in range(r0, end):
            if det[r] >= 0:
                dod_kalman_update(&x[r, 0], &P[r, 0], &z[det[r], 0], &Si[r, 0], 2, r2)
    else:
        for r in range(r0, end):
            if det[r] >= 0:
                dod_kalman_update(&x[r, 0], &P[r, 0], &z[det[r], 0], &Si[r, 0], 3, r2)


def _rows_pair_d2(const double[:, ::1] y, const double[:, ::1] Si, double[::1] d2):
    """Test hook: dod_kalman_mahalanobis2 (the gating pass's per-pair
    distance) of each pair r of y (N, d) and Si (N, d * d), into d2 (N,)."""
    cdef int d = y.shape[1]
    cdef Py_ssize_t r
    if d not in (2, 3) or Si.shape[0] != y.shape[0] or Si.shape[1] != d * d or d2.shape[0] != y.shape[0]:
        raise ValueError("y (N, d) with d 2 or 3, Si (N, d*d), d2 (N,)")
    for r in range(y.shape[0]):
        d2[r] = dod_kalman_mahalanobis2(&y[r, 0], &Si[r, 0], d)
