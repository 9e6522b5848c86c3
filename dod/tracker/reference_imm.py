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
    """The coordinated turn's terms A = sin(w dt)/w, B = (1 - cos(w dt))/w
    and their derivatives in w.

    Parameters
    ----------
    w : array_like of float
        Turn rates (rad/s).
    dt : float
        The time step (s).

    Returns
    -------
    A, B, dA, dB : ndarray of float64
        Arrays shaped like `w`; below ``|w dt| < 1e-3`` their Taylor series, as
        imm.pxd computes them.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
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
    """Q (N x N, N = 2 d + 1) of one model.

    Parameters
    ----------
    d : int
        Dimension, 2 or 3.
    dt : float
        The time step (s).
    q : float
        White-acceleration noise intensity, on every axis.
    qw : float or None, default None
        Turn-rate noise intensity; None for the constant-velocity models (no
        noise on the turn rate).

    Returns
    -------
    ndarray, shape (N, N)
        The process noise covariance.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
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
    """The coordinated turn's prediction of states x and its Jacobians.

    Parameters
    ----------
    x : ndarray, shape (k, N)
        States (position, velocity, turn rate).
    d : int
        Dimension, 2 or 3 (axis 2 of a 3-D state moves at constant velocity).
    dt : float
        The time step (s).

    Returns
    -------
    fx : ndarray, shape (k, N)
        The predicted means.
    F : ndarray, shape (k, N, N)
        The Jacobians of the prediction at `x`.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
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
    """Predict the states and covariances of one model.

    Parameters
    ----------
    x : ndarray, shape (k, N)
        States.
    P : ndarray, shape (k, N, N)
        Their covariances.
    model : int
        0 or 1 (constant velocity, noise ``cfg.imm_q[model]``) or 2
        (coordinated turn, noise ``cfg.turn_q`` and ``cfg.turn_rate_q``).
    d : int
        Dimension, 2 or 3.
    dt : float
        The time step (s).
    cfg : TrackerConfig
        Where the noise intensities come from.

    Returns
    -------
    x, P : ndarray
        The predicted states (k, N) and covariances (k, N, N), symmetrised.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
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
    """The mixture of the models: the combined first n state values and their covariance.

    Parameters
    ----------
    mu : ndarray, shape (k, 3)
        Model probabilities.
    xm : ndarray, shape (k, 3, N)
        Each model's state.
    Pm : ndarray, shape (k, 3, N, N)
        Each model's covariance.
    n : int
        How many leading state values to combine (2 d: position, velocity).

    Returns
    -------
    x : ndarray, shape (k, n)
    P : ndarray, shape (k, n, n)
        The mixture's mean and covariance (spread of the means included).

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    x = np.einsum("kj,kja->ka", mu, xm[:, :, :n])
    dx = xm[:, :, :n] - x[:, None, :]
    P = np.einsum("kj,kjab->kab", mu, Pm[:, :, :n, :n] + dx[..., :, None] * dx[..., None, :])
    return x, P


def transition(cfg, dt):
    """The Markov matrix of one step of dt seconds.

    ``imm_transition`` when ``imm_rates`` is None; else exp(imm_rates dt),
    by the scaling and squaring imm.pxd's dod_imm_transition_for states
    (infinity norm halved to at most 1/2, Taylor series to the 16th power,
    squared back).

    Parameters
    ----------
    cfg : TrackerConfig
        Its ``imm_transition`` and ``imm_rates``.
    dt : float
        The time step (s), finite and >= 0.

    Returns
    -------
    ndarray, shape (3, 3)
        Row i: the probabilities of the step's model given model i.

    Notes
    -----
    Thread-safety: a pure function of its arguments (a new array out).
    """
    if cfg.imm_rates is None:
        return np.asarray(cfg.imm_transition, dtype=np.float64)
    A = np.asarray(cfg.imm_rates, dtype=np.float64) * dt
    s = 0
    norm = np.abs(A).sum(axis=1).max()
    while norm > 0.5 and s < 1100:
        A = A * 0.5
        norm *= 0.5
        s += 1
    term = A.copy()
    E = np.eye(MODELS) + A
    for p in range(2, 17):
        term = (term @ A) / p
        E = E + term
    for _ in range(s):
        E = E @ E
    return E


def predict(mu, xm, Pm, d, dt, cfg):
    """Mix and predict every model of k tracks (imm.pxd's predict step).

    Parameters
    ----------
    mu : ndarray, shape (k, 3)
        Model probabilities.
    xm : ndarray, shape (k, 3, N)
        Each model's state.
    Pm : ndarray, shape (k, 3, N, N)
        Each model's covariance.
    d : int
        Dimension, 2 or 3.
    dt : float
        The time step (s).
    cfg : TrackerConfig
        The transition matrix (:func:`transition`) and noise intensities.

    Returns
    -------
    c : ndarray, shape (k, 3)
        The predicted model probabilities.
    xm, Pm : ndarray
        The predicted states and covariances of each model.
    x, P : ndarray
        Their combination (position, velocity): (k, 2 d), (k, 2 d, 2 d).

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    T = transition(cfg, dt)
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
    """Kalman update of states with measured positions (Joseph form).

    Parameters
    ----------
    x : ndarray, shape (k, N)
        States; the first d values are the position.
    P : ndarray, shape (k, N, N)
        Their covariances.
    z : ndarray, shape (k, d)
        Measured positions.
    d : int
        Dimension, 2 or 3.
    r2 : float or ndarray
        Measurement noise variance on each axis, or shape (k, d, d): each
        detection's own noise covariance.

    Returns
    -------
    x, P : ndarray
        The updated states and (symmetrised) covariances.
    ll : ndarray, shape (k,)
        ln N(y; 0, S), the log-likelihood of each measurement.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    N = x.shape[1]
    R = r2 * np.eye(d) if np.ndim(r2) == 0 else r2
    S = P[:, :d, :d] + R
    Si = np.linalg.inv(S)
    y = z - x[:, :d]
    d2 = np.einsum("ki,kij,kj->k", y, Si, y)
    ll = -0.5 * (d * 1.8378770664093453 + np.log(np.linalg.det(S)) + d2)
    K = P[:, :, :d] @ Si
    xn = x + np.einsum("knd,kd->kn", K, y)
    A = np.broadcast_to(np.eye(N), P.shape).copy()
    A[:, :, :d] -= K
    KRK = r2 * K @ np.swapaxes(K, 1, 2) if np.ndim(r2) == 0 else K @ R @ np.swapaxes(K, 1, 2)
    Pn = A @ P @ np.swapaxes(A, 1, 2) + KRK
    return xn, 0.5 * (Pn + np.swapaxes(Pn, 1, 2)), ll


def ekf_update(x, P, zm, d, sensor, R=None):
    """Extended Kalman update of states with range-bearing measurements
    (measurement.pxd's dod_ekf_update, Joseph form).

    Parameters
    ----------
    x : ndarray, shape (k, N)
        States; the first d values are the position.
    P : ndarray, shape (k, N, N)
        Their covariances.
    zm : ndarray, shape (k, d)
        Measurements: range, bearing (and elevation when d is 3).
    d : int
        Dimension, 2 or 3.
    sensor : Sensor
        The sensor's position and noise variances.
    R : ndarray, optional
        Shape (k, d, d): each measurement's own noise, in place of the
        sensor's variances.

    Returns
    -------
    x, P : ndarray
        The updated states and covariances; rows in the sensor's singular zone
        keep their x and P.
    ll : ndarray, shape (k,)
        ln N(y; 0, S); -inf for the rows in the singular zone.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    N = x.shape[1]
    if sensor.range_rate_sigma is not None:     # zm's last column: H over position and velocity
        return _ekf_rate_update(x, P, zm, d, sensor)
    h, J, ok = _meas.predict(x, sensor.position, d)
    R = np.diag(sensor.variances) if R is None else R
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


def _ekf_rate_update(x, P, zm, d, sensor):
    """ekf_update with a range rate (measurement.pxd dod_ekf_rate_update):
    zm (k, d + 1), H (d + 1) x N with zeros past the velocity."""
    k, N = x.shape
    h, H2, ok = _meas.predict_rate(x[:, :2 * d], sensor.position, d)
    H = np.zeros((k, d + 1, N))
    H[:, :, :2 * d] = H2
    R = np.diag(np.append(sensor.variances, sensor.range_rate_sigma ** 2))
    Ht = np.swapaxes(H, 1, 2)
    S = H @ P @ Ht + R
    S = 0.5 * (S + np.swapaxes(S, 1, 2))
    Si = np.linalg.inv(S)
    y = zm - h
    y[:, 1] = _meas.wrap_angle(y[:, 1])
    d2 = np.einsum("ki,kij,kj->k", y, Si, y)
    ll = -0.5 * ((d + 1) * 1.8378770664093453 - np.linalg.slogdet(Si)[1] + d2)
    K = P @ Ht @ Si
    xn = x + np.einsum("knd,kd->kn", K, y)
    A = np.broadcast_to(np.eye(N), P.shape) - K @ H
    Pn = A @ P @ np.swapaxes(A, 1, 2) + K @ R @ np.swapaxes(K, 1, 2)
    Pn = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
    return (np.where(ok[:, None], xn, x), np.where(ok[:, None, None], Pn, P),
            np.where(ok, ll, -np.inf))


def update(mu, xm, Pm, z, d, r2, sensor=None):
    """Update every model of k tracks with one detection each, then reweigh the models.

    Parameters
    ----------
    mu : ndarray, shape (k, 3)
        Model probabilities (the predicted ones).
    xm : ndarray, shape (k, 3, N)
        Each model's state.
    Pm : ndarray, shape (k, 3, N, N)
        Each model's covariance.
    z : ndarray, shape (k, d)
        Positions, or the measurements of `sensor`.
    d : int
        Dimension, 2 or 3.
    r2 : float or ndarray
        Position noise variance (used when `sensor` is None), or shape
        (k, d, d): each detection's own noise covariance (in the sensor's
        measurement space with `sensor`).
    sensor : Sensor or None, default None
        A range-bearing sensor: the models update through :func:`ekf_update`.

    Returns
    -------
    mu, xm, Pm : ndarray
        The updated probabilities (unchanged in a row whose likelihoods all
        underflow), states and covariances.
    x, P : ndarray
        Their combination (position, velocity).

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    xs, Ps, lls = [], [], []
    for j in range(MODELS):
        if sensor is None:
            xj, Pj, lj = position_update(xm[:, j], Pm[:, j], z, d, r2)
        else:
            xj, Pj, lj = ekf_update(xm[:, j], Pm[:, j], z, d, sensor, None if np.ndim(r2) == 0 else r2)
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
    """Every model of newborn rows, from their constant-velocity birth.

    Parameters
    ----------
    x : ndarray, shape (k, n)
        The CV birth's states (n = 2 d).
    P : ndarray, shape (k, n, n)
        Their covariances.
    cfg : TrackerConfig
        ``turn_rate_v0`` (the turn rate's standard deviation at birth) and
        ``imm_mu0`` (the initial model probabilities).

    Returns
    -------
    mu : ndarray, shape (k, 3)
    xm : ndarray, shape (k, 3, n + 1)
    Pm : ndarray, shape (k, 3, n + 1, n + 1)
        Every model starts at x, P with turn rate 0.

    Notes
    -----
    Thread-safety: a pure function of its arguments (new arrays out); any
    thread may call it.
    """
    k, n = x.shape
    N = n + 1
    xm = np.zeros((k, MODELS, N))
    xm[:, :, :n] = x[:, None, :]
    Pm = np.zeros((k, MODELS, N, N))
    Pm[:, :, :n, :n] = P[:, None]
    Pm[:, :, n, n] = cfg.turn_rate_v0 ** 2
    mu = np.broadcast_to(np.asarray(cfg.imm_mu0, dtype=np.float64), (k, MODELS)).copy()
    return mu, xm, Pm
