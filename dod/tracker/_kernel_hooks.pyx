"""Python test hooks of the Kalman and EKF kernels (kalman.pxd, measurement.pxd).

They run one kernel on numpy arrays so that tests can compare it with a
reference implementation; the tracker itself never calls them.
"""
from libc.string cimport memset
from dod.tracker.kalman cimport (dod_kalman_predict, dod_kalman_innovation_inverse, dod_kalman_pack,
                                 dod_kalman_unpack, dod_kalman_mahalanobis2, dod_kalman_update)
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
