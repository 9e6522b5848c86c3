"""The IMM of motion="imm" in numpy: the reference tracker's half of it.

The same equations as ``dod/tracker/imm.pxd`` (which states them), batched
over the tracks: rows of ``mu`` (k, 3), ``xm`` (k, 3, N) and ``Pm``
(k, 3, N, N), N = 2 d + 1 (position, velocity, turn rate). Models: 0 and 1
constant velocity (process noise ``imm_q``), 2 coordinated turn (``turn_q``,
``turn_rate_q``). Pure functions: every one returns new arrays.
"""
import numpy as np

from dod.tracker import sensor as _meas

MODELS = 3
_SMALL_TURN = 1e-3          # |w dt| below it: Taylor series (as imm.pxd)


def turn_terms(w, dt):
    """A = sin(w dt)/w, B = (1 - cos(w dt))/w and dA/dw, dB/dw (arrays like w)."""
    w = np.asarray(w, dtype=np.float64)
    th = w * dt
    t2 = th * th
    small = np.abs(th) < _SMALL_TURN
    ws = np.where(small, 1.0, w)                # no division by ~0 in the branch not taken
    s, co = np.sin(th), np.cos(th)
    A = np.where(small, dt * (1.0 - t2 / 6.0 + t2 * t2 / 120.0), s / ws)
    B = np.where(small, dt * th * (0.5 - t2 / 24.0 + t2 * t2 / 720.0), (1.0 - co) / ws)
    dA = np.where(small, dt * dt * th * (-1.0 / 3.0 + t2 / 30.0), (dt * co * ws - s) / (ws * ws))
    dB = np.where(small, dt * dt * (0.5 - t2 / 8.0 + t2 * t2 / 144.0),
                  (dt * s * ws - (1.0 - co)) / (ws * ws))
    return A, B, dA, dB


def model_noise(d, dt, q, qw=None):
    """Q (N x N) of a model: white acceleration q on every axis, and qw on
    the turn rate (None: none, the CV models)."""
    N = 2 * d + 1
    Q = np.zeros((N, N))
    for a in range(d):
        Q[a, a] = q * dt**3 / 3.0
        Q[a, d + a] = Q[d + a, a] = q * dt**2 / 2.0
        Q[d + a, d + a] = q * dt
    if qw is not None:
        Q[N - 1, N - 1] = qw * dt
    return Q


def ct_transition(x, d, dt):
    """(f(x), F) of the coordinated turn for states x (k, N): the predicted
    means and the Jacobians (k, N, N)."""
    k, N = x.shape
    w = x[:, N - 1]
    A, B, dA, dB = turn_terms(w, dt)
    s, co = np.sin(w * dt), np.cos(w * dt)
    vx, vy = x[:, d], x[:, d + 1]
    F = np.broadcast_to(np.eye(N), (k, N, N)).copy()
    F[:, 0, d], F[:, 0, d + 1], F[:, 1, d], F[:, 1, d + 1] = A, -B, B, A
    F[:, d, d], F[:, d, d + 1], F[:, d + 1, d], F[:, d + 1, d + 1] = co, -s, s, co
    F[:, 0, N - 1] = dA * vx - dB * vy
    F[:, 1, N - 1] = dB * vx + dA * vy
    F[:, d, N - 1] = -dt * s * vx - dt * co * vy
    F[:, d + 1, N - 1] = dt * co * vx - dt * s * vy
    fx = x.copy()
    fx[:, 0] = x[:, 0] + A * vx - B * vy
    fx[:, 1] = x[:, 1] + B * vx + A * vy
    fx[:, d] = co * vx - s * vy
    fx[:, d + 1] = s * vx + co * vy
    if d == 3:
        F[:, 2, 5] = dt
        fx[:, 2] = x[:, 2] + dt * x[:, 5]
    return fx, F


def model_predict(x, P, model, d, dt, cfg):
    """Predict the states x (k, N), covariances P (k, N, N) of one model."""
    N = 2 * d + 1
    if model < 2:
        F = np.eye(N)
        F[:d, d:2 * d] = dt * np.eye(d)
        fx = x @ F.T
        F = np.broadcast_to(F, P.shape)
        Q = model_noise(d, dt, cfg.imm_q[model])
    else:
        fx, F = ct_transition(x, d, dt)
        Q = model_noise(d, dt, cfg.turn_q, cfg.turn_rate_q)
    Pn = F @ P @ np.swapaxes(F, 1, 2) + Q
    return fx, 0.5 * (Pn + np.swapaxes(Pn, 1, 2))


def combine(mu, xm, Pm, n):
    """The mixture's first n state values and their covariance: (k, n), (k, n, n)."""
    x = np.einsum("kj,kja->ka", mu, xm[:, :, :n])
    dx = xm[:, :, :n] - x[:, None, :]
    P = np.einsum("kj,kjab->kab", mu, Pm[:, :, :n, :n] + dx[..., :, None] * dx[..., None, :])
    return x, P


def predict(mu, xm, Pm, d, dt, cfg):
    """Mix and predict every model: (c, xm, Pm, x, P) with c the predicted
    model probabilities and x, P the combination (position, velocity)."""
    T = np.asarray(cfg.imm_transition, dtype=np.float64)
    c = mu @ T                                          # c_j = sum_i T_ij mu_i
    with np.errstate(invalid="ignore", divide="ignore"):
        wmix = mu[:, :, None] * T[None, :, :] * (1.0 / c[:, None, :])      # [k, i, j]
    wmix = np.where(c[:, None, :] > 0.0, wmix, mu[:, :, None])
    x0 = np.einsum("kij,kia->kja", wmix, xm)
    dx = xm[:, :, None, :] - x0[:, None, :, :]                  # [k, i, j, a]
    P0 = np.einsum("kij,kijab->kjab", wmix, Pm[:, :, None] + dx[..., :, None] * dx[..., None, :])
    xs, Ps = [], []
    for j in range(MODELS):
        xj, Pj = model_predict(x0[:, j], P0[:, j], j, d, dt, cfg)
        xs.append(xj)
        Ps.append(Pj)
    xm = np.stack(xs, axis=1) if xs else xm
    Pm = np.stack(Ps, axis=1) if Ps else Pm
    ct = c.sum(axis=1, keepdims=True)
    c = np.where(ct > 0.0, c / np.where(ct > 0.0, ct, 1.0), c)
    x, P = combine(c, xm, Pm, 2 * d)
    return c, xm, Pm, x, P


def position_update(x, P, z, d, r2):
    """Kalman update of states x (k, N) with positions z (k, d), Joseph form:
    (x, P, ln N(y; 0, S))."""
    N = x.shape[1]
    S = P[:, :d, :d] + r2 * np.eye(d)
    Si = np.linalg.inv(S)
    y = z - x[:, :d]
    d2 = np.einsum("ki,kij,kj->k", y, Si, y)
    ll = -0.5 * (d * 1.8378770664093453 + np.log(np.linalg.det(S)) + d2)
    K = P[:, :, :d] @ Si
    xn = x + np.einsum("knd,kd->kn", K, y)
    A = np.broadcast_to(np.eye(N), P.shape).copy()
    A[:, :, :d] -= K
    Pn = A @ P @ np.swapaxes(A, 1, 2) + r2 * K @ np.swapaxes(K, 1, 2)
    return xn, 0.5 * (Pn + np.swapaxes(Pn, 1, 2)), ll


def ekf_update(x, P, zm, d, sensor):
    """Extended Kalman update of states x (k, N) with measurements zm (k, d) of
    a range-bearing `sensor` (measurement.pxd dod_ekf_update), Joseph form:
    (x, P, ln N(y; 0, S)); rows in the sensor's singular zone keep x and P and
    get -inf."""
    N = x.shape[1]
    h, J, ok = _meas.predict(x, sensor.position, d)
    R = np.diag(sensor.variances)
    Jt = np.swapaxes(J, 1, 2)
    S = J @ P[:, :d, :d] @ Jt + R
    Si = np.linalg.inv(S)
    y = zm - h
    y[:, 1] = _meas.wrap_angle(y[:, 1])
    d2 = np.einsum("ki,kij,kj->k", y, Si, y)
    ll = -0.5 * (d * 1.8378770664093453 - np.log(np.linalg.det(Si)) + d2)
    K = P[:, :, :d] @ Jt @ Si
    xn = x + np.einsum("knd,kd->kn", K, y)
    A = np.broadcast_to(np.eye(N), P.shape).copy()
    A[:, :, :d] -= K @ J
    Pn = A @ P @ np.swapaxes(A, 1, 2) + K @ R @ np.swapaxes(K, 1, 2)
    Pn = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
    return (np.where(ok[:, None], xn, x), np.where(ok[:, None, None], Pn, P),
            np.where(ok, ll, -np.inf))


def update(mu, xm, Pm, z, d, r2, sensor=None):
    """Update every model with z (k, d): positions, or the measurements of a
    range-bearing `sensor` (then through :func:`ekf_update`); (mu, xm, Pm, x,
    P) after it."""
    xs, Ps, lls = [], [], []
    for j in range(MODELS):
        if sensor is None:
            xj, Pj, lj = position_update(xm[:, j], Pm[:, j], z, d, r2)
        else:
            xj, Pj, lj = ekf_update(xm[:, j], Pm[:, j], z, d, sensor)
        xs.append(xj)
        Ps.append(Pj)
        lls.append(lj)
    xm = np.stack(xs, axis=1)
    Pm = np.stack(Ps, axis=1)
    ll = np.stack(lls, axis=1)
    best = ll.max(axis=1, keepdims=True)
    usable = np.isfinite(best)              # no finite likelihood: mu unchanged (imm.pxd dod_imm_weigh)
    w = mu * np.exp(ll - np.where(usable, best, 0.0))
    s = w.sum(axis=1, keepdims=True)
    mu = np.where(usable & (s > 0.0), w / np.where(s > 0.0, s, 1.0), mu)
    x, P = combine(mu, xm, Pm, 2 * d)
    return mu, xm, Pm, x, P


def birth(x, P, cfg):
    """Every model of newborn rows from their CV x (k, n), P (k, n, n)."""
    k, n = x.shape
    N = n + 1
    xm = np.zeros((k, MODELS, N))
    xm[:, :, :n] = x[:, None, :]
    Pm = np.zeros((k, MODELS, N, N))
    Pm[:, :, :n, :n] = P[:, None]
    Pm[:, :, n, n] = cfg.turn_rate_v0 ** 2
    mu = np.broadcast_to(np.asarray(cfg.imm_mu0, dtype=np.float64), (k, MODELS)).copy()
    return mu, xm, Pm
