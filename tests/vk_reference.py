"""A numpy reference of the lane kernels (dod/tracker/vector_kernels.h) in
the lanes' own dtype, for tests/test_vector_kernels.py.

Each function does its kernel's operations in the kernel's order, one
numpy operation per C operation, on arrays of the lanes' dtype (float64 or
float32) with the scalars rounded to that dtype once, as the kernels round
them. numpy never fuses a multiply and an add, and its float32 division
and sqrt are correctly rounded, so the reference gives a kernel's bits: in
float64 the per-row kernels' (a test checks that, which checks the order
of the operations here), in float32 the _f32 kernels'.

Layout as the kernels': x (2d, N) lanes, packed P (d (2d + 1), N); Si
(N, d * d), hw (N, d) of the lanes' dtype, hm, gateable and det (N,), z
(k, d) row-major, z and hm float64. Each function works on rows [r0, r1)
only.
"""
import numpy as np


def packed(i, j, n):
    """kalman.pxd's packed index of P[i, j] in an n x n covariance."""
    if i > j:
        i, j = j, i
    return i * (2 * n - 1 - i) // 2 + j


def _dims(P):
    d = {10: 2, 21: 3}[P.shape[0]]
    return d, 2 * d


def predict(x, P, dt, q, r0=0, r1=None):
    """dod_vk_cv_predict, in place: x = F x, P = F P F' + Q."""
    T = x.dtype.type
    d, n = _dims(P)
    # dod_kalman_noise_of in double, then rounded to the lanes' dtype
    dt, q11, q12, q22 = (T(v) for v in (dt, q * dt * dt * dt / 3.0, q * dt * dt / 2.0, q * dt))
    xs, Ps = x[:, r0:r1], P[:, r0:r1]
    for a in range(d):
        xs[a] = xs[a] + dt * xs[d + a]
    p = Ps.copy()
    for i in range(d):
        for j in range(d):
            b = p[packed(i, d + j, n)]
            c = p[packed(d + i, d + j, n)]
            v = b + dt * c
            if j == i:
                v = v + q12
            Ps[packed(i, d + j, n)] = v
            if j >= i:
                a = p[packed(i, j, n)]
                bt = p[packed(j, d + i, n)]
                u = a + dt * (b + bt) + dt * dt * c
                if j == i:
                    u = u + q11
                Ps[packed(i, j, n)] = u
    for i in range(d):
        Ps[packed(d + i, d + i, n)] = p[packed(d + i, d + i, n)] + q22


def gate_rows(P, r2, gate, Si, hw, hm, gateable, r0=0, r1=None):
    """dod_vk_gate_rows: Si, hw (the lanes' dtype), hm (widened to float64),
    gateable of rows [r0, r1)."""
    T = P.dtype.type
    d, n = _dims(P)
    if Si.dtype != T or hw.dtype != T:
        raise TypeError(f"Si and hw of {Si.dtype} and {hw.dtype}, not the lanes' {np.dtype(T)}")
    r2, gate, zero = T(r2), T(gate), T(0)
    Pr = P[:, r0:r1]
    with np.errstate(all="ignore"):
        if d == 2:
            a = Pr[packed(0, 0, n)] + r2
            b = Pr[packed(0, 1, n)]
            c = Pr[packed(1, 1, n)] + r2
            det = a * c - b * b
            ok = (det > zero) & (a > zero)
            s = {(0, 0): c / det, (0, 1): -b / det, (1, 1): a / det}
        else:
            a = Pr[packed(0, 0, n)] + r2
            b = Pr[packed(0, 1, n)]
            c = Pr[packed(0, 2, n)]
            e = Pr[packed(1, 1, n)] + r2
            f = Pr[packed(1, 2, n)]
            k = Pr[packed(2, 2, n)] + r2
            g = e * k - f * f
            h = c * f - b * k
            det = a * g + b * h + c * (b * f - c * e)
            ok = (det > zero) & (a > zero) & (a * e - b * b > zero)
            s = {(0, 0): g / det, (0, 1): h / det, (0, 2): (b * f - c * e) / det,
                 (1, 1): (a * k - c * c) / det, (1, 2): (b * c - a * f) / det, (2, 2): (a * e - b * b) / det}
        hmax = np.zeros_like(a)
        for i in range(d):
            w = np.sqrt(gate * (Pr[packed(i, i, n)] + r2))
            hw[r0:r1, i] = w
            hmax = np.where(w > hmax, w, hmax)
    hm[r0:r1] = np.where(ok, hmax, zero)
    for i in range(d):
        for j in range(d):
            Si[r0:r1, i * d + j] = s[min(i, j), max(i, j)]
    gateable[r0:r1] = ok


def update(x, P, det, z, Si, r2, r0=0, r1=None):
    """dod_vk_cv_update, in place: the Joseph-form update of the rows with
    det[r] >= 0 (z rounded to the lanes' dtype, Si of that dtype); the others
    keep x and P."""
    T = x.dtype.type
    d, n = _dims(P)
    r2 = T(r2)
    xs, Ps = x[:, r0:r1], P[:, r0:r1]
    j = det[r0:r1]
    on = j >= 0
    # what a row without a detection computes on: zeros (its Si is never read)
    zl = np.zeros((len(j), d), T)
    zl[on] = z[j[on]]
    if Si.dtype != T:
        raise TypeError(f"Si of {Si.dtype}, not the lanes' {np.dtype(T)}")
    sl = np.zeros((len(j), d * d), T)
    sl[on] = Si[r0:r1][on]
    xo, p = xs.copy(), Ps.copy()
    with np.errstate(all="ignore"):
        y = [zl[:, a] - xo[a] for a in range(d)]
        K = {}
        for a in range(n):
            for b in range(d):
                v = np.zeros_like(xo[0])
                for k in range(d):
                    v = v + p[packed(a, k, n)] * sl[:, k * d + b]
                K[a, b] = v
        for a in range(n):
            v = np.zeros_like(xo[0])
            for b in range(d):
                v = v + K[a, b] * y[b]
            xs[a] = np.where(on, xo[a] + v, xo[a])
        M = {}
        for a in range(n):
            for b in range(n):
                v = p[packed(a, b, n)]
                for k in range(d):
                    v = v - K[a, k] * p[packed(k, b, n)]
                M[a, b] = v
        for a in range(n):
            for b in range(a, n):
                v = M[a, b]
                for k in range(d):
                    v = v + (r2 * K[a, k] - M[a, k]) * K[b, k]
                Ps[packed(a, b, n)] = np.where(on, v, p[packed(a, b, n)])
