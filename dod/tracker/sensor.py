"""A range-bearing sensor (radar) for the tracker's range-bearing scans.

``Tracker.tick(measurements, dt, sensor=Sensor(...))`` folds in one scan of
this sensor: measurements are float64 (k, 2) rows (range, bearing) or
(k, 3) rows (range, bearing, elevation), metres and radians, bearing from
the x axis towards y (``atan2``), elevation above the x-y plane. Each scan
names its own sensor, so several sensors at different places (or one that
moves) feed one track picture, scan by scan in time order:

>>> import numpy as np
>>> from dod.tracker import Sensor, Tracker
>>> from dod.tracker.sensor import to_polar
>>> north = Sensor((0.0, 5000.0), range_sigma=5.0, bearing_sigma=1e-3)
>>> south = Sensor((0.0, -5000.0), range_sigma=5.0, bearing_sigma=2e-3)
>>> t = Tracker(r=5.0)                               # a track starts from a pair of detections
>>> target = np.array([[100.0, 200.0]])             # one target, seen by both sensors
>>> t.tick(to_polar(target, north.position), 0.5, sensor=north)
>>> t.tick(to_polar(target, south.position), 0.5, sensor=south)
>>> len(t), bool(np.allclose(t.positions, target))
(1, True)

A sensor with ``range_rate_sigma`` also measures range rate (Doppler: the
radial velocity ``d/dt |p - s| = (p - s) . v / |p - s|`` of a target at p
moving at v, in m/s, positive going away): its scans have one more column,
(range, bearing, range_rate) in 2-D and (range, bearing, elevation,
range_rate) in 3-D. The range rate stays the last column in either
:data:`ORDERS` (BEARING_RANGE reverses the positional columns only:
bearing, range, range_rate), and the tick folds it into the extended
Kalman update (the velocity gets the radial component from the first
detection on; with ``motion="imm"`` every model's update).

The conversions here (numpy, vectorised) are the ones the tick's kernels
compute (dod/tracker/measurement.pxd), for scenarios, the reference
tracker and users who need the same model.
"""
import math
from dataclasses import dataclass

import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays

MIN_RANGE2 = 1e-12      # measurement.pxd dod_meas_min_range2: the singular zone around the sensor

#: Column order of a sensor's measurements: range, bearing (2-D) and range,
#: bearing, elevation (3-D). The default, and the order of every function here.
RANGE_BEARING = "range_bearing"
#: The reverse column order: bearing, range (2-D) and elevation, bearing,
#: range (3-D): Stone Soup's (``CartesianToBearingRange``,
#: ``CartesianToElevationBearingRange``). A tick reorders such rows while it
#: converts them (``Tracker.tick``).
BEARING_RANGE = "bearing_range"
#: The column orders a Sensor accepts.
ORDERS = (RANGE_BEARING, BEARING_RANGE)

#: Where a range rate lies in a scan's row, in either order: the last column.
RANGE_RATE_COLUMN = -1


@dataclass(frozen=True)
class Sensor:
    """Sensor(position, range_sigma, bearing_sigma, elevation_sigma=None, order=RANGE_BEARING,
    pd=None, clutter_density=None, range_rate_sigma=None, range_rate_span=1000.0)

    Parameters
    ----------
    position
        the sensor's position, 2 (2-D) or 3 (3-D) finite numbers
        (any array-like; stored as a tuple of floats).
    range_sigma
        range noise standard deviation (m), > 0.
    bearing_sigma
        bearing noise standard deviation (rad), > 0.
    elevation_sigma
        elevation noise standard deviation (rad), > 0: required
        in 3-D, must be None in 2-D.
    order
        the column order of this sensor's measurements: :data:`RANGE_BEARING`
        (default: range, bearing[, elevation]) or :data:`BEARING_RANGE` (the
        reverse: bearing, range, or elevation, bearing, range; Stone Soup's).
        :meth:`measure` writes and :meth:`to_cartesian` reads this order; the
        module's functions and the noise sigmas keep range, bearing[,
        elevation].
    pd
        this sensor's detection probability, in (0, 1) as
        ``ManagementConfig.pd`` (``ln(1 - pd)`` must be finite), or None
        (default): the configuration's. Score confirmation uses it for
        this sensor's scans: ``ln(pd)`` for a track's detection and
        ``ln(1 - pd)`` for each track the scan did not update.
    clutter_density
        this sensor's false detections per scan per unit of its
        measurement space, > 0 and finite, or None (default): the
        configuration's (``ClutterConfig.clutter_density``, per unit
        area/volume, or its online estimate). In 2-D per metre-radian
        (range x bearing), in 3-D per metre-radian^2 (range x bearing x
        elevation): a radar's clutter spread uniformly over its range and
        bearing cells has one such density, while its Cartesian density
        falls as 1/r. A Cartesian density ``lambda_c`` at range r is
        ``lambda_c * r`` here in 2-D and ``lambda_c * r**2 * cos(el)`` in
        3-D (:func:`clutter_density_at`). Score confirmation then weighs
        this sensor's detections against it in measurement space (the
        likelihood of the innovation per measurement volume, with no
        Jacobian), and its births' ``new_target_density`` (per unit
        area/volume) is converted to measurement space at each detection;
        such a scan leaves the Cartesian clutter estimate unchanged (it is
        not a sample of it). M-of-N confirmation uses neither rate.
    range_rate_sigma
        range rate noise standard deviation (m/s), > 0, or None (default:
        no range rate). With it each scan row has a last column, the
        range rate (:data:`RANGE_RATE_COLUMN`, in either order).
    range_rate_span
        the width (m/s, > 0; default 1000) of the interval over which a
        false detection's range rate is uniform (the radar's unambiguous
        Doppler interval). Score confirmation compares a detection's
        density per unit area/volume and per m/s of range rate with
        ``clutter_density / range_rate_span``; M-of-N ignores it.

    Attributes
    ----------
    position : tuple of float
    range_sigma : float
    bearing_sigma : float
    elevation_sigma : float or None
    order : str
    pd : float or None
    clutter_density : float or None
    range_rate_sigma : float or None
    range_rate_span : float

    Raises
    ------
    ValueError
        For a position of the wrong shape or not finite, a noise (or
        range_rate_span) that is not a positive finite number, another
        order, a pd outside (0, 1) or a clutter density that is not a
        positive finite number.

    Notes
    -----
    Immutable and hashable; a sensor that moves is a new Sensor per scan
    (cheap). Thread-safety: immutable, share it freely.
    """

    position: tuple
    range_sigma: float
    bearing_sigma: float
    elevation_sigma: float | None = None
    order: str = RANGE_BEARING
    pd: float | None = None
    clutter_density: float | None = None
    range_rate_sigma: float | None = None
    range_rate_span: float = 1000.0

    def __post_init__(self):
        try:
            p = input_array(self.position, np.float64, "sensor position", 1)
        except TypeError as e:      # (the documented error of a Sensor's position is ValueError)
            raise ValueError(f"{e}; sensor position must be 2 or 3 numbers, not {self.position!r}") from None
        if p.shape not in ((2,), (3,)):
            raise ValueError(f"sensor position must have shape (2,) or (3,), not {p.shape}")
        if not np.isfinite(p).all():
            raise ValueError(f"sensor position must be finite, not {self.position!r}")
        object.__setattr__(self, "position", tuple(float(v) for v in p))
        names = ("range_sigma", "bearing_sigma") + (("elevation_sigma",) if p.size == 3 else ()) \
            + (("range_rate_sigma",) if self.range_rate_sigma is not None else ()) + ("range_rate_span",)
        for name in names:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, not {v!r}")
            object.__setattr__(self, name, float(v))
        if p.size == 2 and self.elevation_sigma is not None:
            raise ValueError("a 2-D sensor has no elevation_sigma (leave it None)")
        if not (isinstance(self.order, str) and self.order in ORDERS):
            raise ValueError(f"order must be RANGE_BEARING ({RANGE_BEARING!r}) or BEARING_RANGE "
                             f"({BEARING_RANGE!r}), not {self.order!r}")
        _rate(self, "pd", 0.0, 1.0, "in (0, 1)")
        _rate(self, "clutter_density", 0.0, math.inf, "a positive finite number")

    @property
    def dim(self):
        """2 or 3: the dimension of the position (and of a measurement)."""
        return len(self.position)

    @property
    def columns(self):
        """Values per measurement row: dim, plus one with a range rate."""
        return self.dim + (self.range_rate_sigma is not None)

    @property
    def variances(self):
        """Noise variances (range, bearing[, elevation]) as a float64 array."""
        s = (self.range_sigma, self.bearing_sigma) + ((self.elevation_sigma,) if self.dim == 3 else ())
        return np.square(np.array(s, dtype=np.float64))

    def measure(self, points, velocities=None):
        """Noise-free measurements of Cartesian points, seen from this sensor.

        Parameters
        ----------
        points : array_like
            Shape (k, dim), any real numbers.
        velocities : array_like, optional
            Shape (k, dim): the points' velocities; required (and only
            allowed) for a sensor with ``range_rate_sigma``.

        Returns
        -------
        numpy.ndarray
            (k, :attr:`columns`) float64: range, bearing[, elevation], in
            the sensor's :attr:`order`, then the range rate if any.

        Raises
        ------
        TypeError, ValueError
            For anything else.

        Notes
        -----
        Thread-safety: a pure function of its arguments.
        """
        if (velocities is None) != (self.range_rate_sigma is None):
            raise ValueError("velocities are required with range_rate_sigma and refused without")
        p = input_array(points, np.float64, "points", 2, self.dim)
        v = None if velocities is None else input_array(velocities, np.float64, "velocities", 2, self.dim)
        if v is not None and v.shape != p.shape:
            raise ValueError(f"velocities must have the points' shape {p.shape}, not {v.shape}")
        z = to_polar(p, self.position, v)
        if self.order == BEARING_RANGE:
            z[:, :self.dim] = z[:, self.dim - 1::-1].copy()
        return z

    def to_cartesian(self, measurements):
        """Cartesian positions of measurements taken by this sensor.

        Parameters
        ----------
        measurements : array_like
            Shape (k, :attr:`columns`): range, bearing[, elevation] in the
            sensor's :attr:`order` (then the range rate, not used), any
            real numbers.

        Returns
        -------
        numpy.ndarray
            (k, dim) float64.

        Raises
        ------
        TypeError, ValueError
            For anything else.

        Notes
        -----
        Thread-safety: a pure function of its arguments.
        """
        z = input_array(measurements, np.float64, "measurements", 2, self.columns)[:, :self.dim]
        return to_cartesian(z if self.order == RANGE_BEARING else z[:, ::-1], self.position)


def _rate(sensor, name, lo, hi, what):
    """Check and store sensor.name as a float in the open interval (lo, hi), or None."""
    v = getattr(sensor, name)
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
            or not (math.isfinite(v) and lo < v < hi):
        raise ValueError(f"{name} must be {what} or None, not {v!r}")
    object.__setattr__(sensor, name, float(v))


def clutter_density_at(cartesian_density, z):
    """A Cartesian clutter density seen in a sensor's measurement space.

    The density per metre-radian (2-D) or metre-radian^2 (3-D) that a
    clutter density per unit area/volume has at measurements z:
    ``cartesian_density * |det dp/dz|``, that is ``cartesian_density * r``
    in 2-D and ``cartesian_density * r**2 * cos(elevation)`` in 3-D. The
    unit of :attr:`Sensor.clutter_density`.

    Parameters
    ----------
    cartesian_density : float or array_like
        False detections per unit area (2-D) or volume (3-D) per scan.
    z : array_like
        (k, d) measurements: range (m), bearing (rad)[, elevation (rad)].

    Returns
    -------
    numpy.ndarray
        float64 (k,).

    Notes
    -----
    Thread-safety: a pure function (any thread).

    Examples
    --------
    >>> from dod.tracker.sensor import clutter_density_at
    >>> clutter_density_at(1e-6, [[2000.0, 0.3]]).tolist()      # 1e-6 per m^2 at 2 km
    [0.002]
    """
    z = np.asarray(z, dtype=np.float64)
    r = np.maximum(z[:, 0], 1e-6)       # log_jacobian's floors
    jac = r if z.shape[1] == 2 else r * r * np.maximum(np.cos(z[:, 2]), 1e-12)
    return np.asarray(cartesian_density, dtype=np.float64) * jac


def to_polar(points, position, velocities=None):
    """Range, bearing (and elevation) of Cartesian points seen from a sensor.

    Parameters
    ----------
    points : array_like
        (k, d) positions, d 2 or 3, metres.
    position : array_like
        The sensor's position, d numbers.
    velocities : array_like, optional
        (k, d) velocities of the points (m/s): adds the range rate column.

    Returns
    -------
    numpy.ndarray
        float64 (k, d), or (k, d + 1) with velocities: range (m), bearing
        from the x axis towards y (rad, in [-pi, pi]), in 3-D the elevation
        above the x-y plane (rad), then the range rate (m/s,
        ``(p - s) . v / |p - s|``; 0 at the sensor).

    Notes
    -----
    Thread-safety: a pure function (any thread).

    Examples
    --------
    >>> from dod.tracker.sensor import to_polar, to_cartesian
    >>> z = to_polar([[3.0, 4.0]], (0.0, 0.0))
    >>> z.round(4).tolist(), to_cartesian(z, (0.0, 0.0)).round(6).tolist()
    ([[5.0, 0.9273]], [[3.0, 4.0]])
    """
    p = np.asarray(points, dtype=np.float64)
    s = np.asarray(position, dtype=np.float64)
    dx = p - s
    d = p.shape[1]
    g = np.hypot(dx[:, 0], dx[:, 1])
    out = np.empty((p.shape[0], d + (velocities is not None)))
    out[:, 1] = np.arctan2(dx[:, 1], dx[:, 0])
    if d == 2:
        out[:, 0] = g
    else:
        out[:, 0] = np.sqrt(g * g + dx[:, 2] * dx[:, 2])
        out[:, 2] = np.arctan2(dx[:, 2], g)
    if velocities is not None:
        v = np.asarray(velocities, dtype=np.float64)
        r = out[:, 0]
        out[:, d] = np.where(r > 0, (dx * v).sum(axis=1) / np.where(r > 0, r, 1.0), 0.0)
    return out


def to_cartesian(z, position):
    """Cartesian positions of range-bearing(-elevation) measurements of a sensor.

    The inverse of :func:`to_polar`.

    Parameters
    ----------
    z : array_like
        (k, d) measurements: range (m), bearing (rad)[, elevation (rad)].
    position : array_like
        The sensor's position, d numbers.

    Returns
    -------
    numpy.ndarray
        float64 (k, d) positions, metres.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    z = np.asarray(z, dtype=np.float64)
    s = np.asarray(position, dtype=np.float64)
    r, b = z[:, 0], z[:, 1]
    if z.shape[1] == 2:
        return np.stack([s[0] + r * np.cos(b), s[1] + r * np.sin(b)], axis=1)
    ce = np.cos(z[:, 2])
    return np.stack([s[0] + r * ce * np.cos(b), s[1] + r * ce * np.sin(b), s[2] + r * np.sin(z[:, 2])], axis=1)


def converted_covariance(z, variances):
    """Covariance of the Cartesian positions of measurements (a birth's covariance).

    ``J R J'`` with the cross-range standard deviations floored at the range
    noise's, so it is positive definite at any range (measurement.pxd computes
    the same for the tick).

    Parameters
    ----------
    z : array_like
        (k, d) measurements: range, bearing[, elevation].
    variances : array_like
        The sensor's d variances: range (m^2), bearing[, elevation] (rad^2).

    Returns
    -------
    numpy.ndarray
        float64 (k, d, d).

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    z = np.asarray(z, dtype=np.float64)
    var = np.asarray(variances, dtype=np.float64)
    r, cb, sb = z[:, 0], np.cos(z[:, 1]), np.sin(z[:, 1])
    vr = var[0]
    if z.shape[1] == 2:
        vb = np.maximum(r * r * var[1], vr)
        u = np.stack([cb, sb], axis=1)
        v = np.stack([-sb, cb], axis=1)
        return vr * u[:, :, None] * u[:, None, :] + vb[:, None, None] * v[:, :, None] * v[:, None, :]
    ce, se = np.cos(z[:, 2]), np.sin(z[:, 2])
    vb = np.maximum(r * r * ce * ce * var[1], vr)
    ve = np.maximum(r * r * var[2], vr)
    u = np.stack([ce * cb, ce * sb, se], axis=1)
    v = np.stack([-sb, cb, np.zeros_like(sb)], axis=1)
    w = np.stack([-se * cb, -se * sb, ce], axis=1)
    return (vr * u[:, :, None] * u[:, None, :] + vb[:, None, None] * v[:, :, None] * v[:, None, :]
            + ve[:, None, None] * w[:, :, None] * w[:, None, :])


def wrap_angle(a):
    """Angles wrapped into [-pi, pi).

    Parameters
    ----------
    a : array_like
        Angles, radians.

    Returns
    -------
    numpy.ndarray
        float64, the same shape.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    a = np.asarray(a, dtype=np.float64)
    return np.where((a >= -np.pi) & (a < np.pi), a, np.mod(a + np.pi, 2.0 * np.pi) - np.pi)


def predict(x, position, d):
    """Predicted measurements h (k, d), Jacobians J (k, d, d) of the
    positions x[:, :d], and a mask of the rows outside the singular zone
    (the others' h and J are zeros)."""
    dx = x[:, :d] - np.asarray(position, dtype=np.float64)
    g2 = dx[:, 0] * dx[:, 0] + dx[:, 1] * dx[:, 1]
    ok = g2 > MIN_RANGE2
    g2s = np.where(ok, g2, 1.0)
    k = x.shape[0]
    h = np.zeros((k, d))
    J = np.zeros((k, d, d))
    h[:, 1] = np.arctan2(dx[:, 1], dx[:, 0])
    if d == 2:
        r = np.sqrt(g2s)
        h[:, 0] = r
        J[:, 0, 0], J[:, 0, 1] = dx[:, 0] / r, dx[:, 1] / r
        J[:, 1, 0], J[:, 1, 1] = -dx[:, 1] / g2s, dx[:, 0] / g2s
    else:
        g = np.sqrt(g2s)
        r2 = g2s + dx[:, 2] * dx[:, 2]
        r = np.sqrt(r2)
        h[:, 0] = r
        h[:, 2] = np.arctan2(dx[:, 2], g)
        J[:, 0] = dx / r[:, None]
        J[:, 1, 0], J[:, 1, 1] = -dx[:, 1] / g2s, dx[:, 0] / g2s
        J[:, 2, 0] = -dx[:, 0] * dx[:, 2] / (r2 * g)
        J[:, 2, 1] = -dx[:, 1] * dx[:, 2] / (r2 * g)
        J[:, 2, 2] = g / r2
    h[~ok] = 0.0
    J[~ok] = 0.0
    return h, J, ok


def gate_box(h, J, S, gate, position):
    """Half-widths (k, d) of a Cartesian box around each predicted position
    that holds its gate (measurement.pxd dod_meas_gate_box states the bound)."""
    d = h.shape[1]
    ang = np.sqrt(gate * S[:, 1, 1])
    if d == 3:
        ang = ang + np.sqrt(gate * S[:, 2, 2])
    hr = np.sqrt(gate * S[:, 0, 0])
    scale = 1e-9 * (h[:, 0] + 1.0 + float(np.abs(np.asarray(position, dtype=np.float64)).sum()))
    u = J[:, 0, :]
    A = hr + 0.5 * h[:, 0] * ang * ang
    B = (h[:, 0] + hr) * ang
    box = (A[:, None] * np.abs(u) + B[:, None] * np.sqrt(np.maximum(1.0 - u * u, 0.0))) * (1.0 + 1e-9) \
        + scale[:, None]
    ball = (hr + h[:, 0] * np.minimum(ang, 2.0)) * (1.0 + 1e-9) + scale
    return np.where((ang > 1.5)[:, None], ball[:, None], box)


def log_jacobian(z):
    """``ln |det dp/dz|`` per measurement (measurement.pxd dod_meas_log_jacobian)."""
    r = np.maximum(z[:, 0], 1e-6)
    if z.shape[1] == 2:
        return np.log(r)
    return np.log(r * r * np.maximum(np.cos(z[:, 2]), 1e-12))


#: The largest magnitude of a detection value (a coordinate; a range or a
#: range rate) the tracker takes, by its ``dtype``: the square of the
#: difference of two such values stays finite in the track state's type, as
#: gating and the update need. A row with a larger value is dropped and
#: counted (``invalid``), as a row with a NaN or an inf is.
COORDINATE_LIMIT = {"float64": 2.0 ** 510, "float32": 2.0 ** 62}


def within_limit(z, dtype="float64"):
    """Rows of z (k, c) whose every value is at most ``COORDINATE_LIMIT[dtype]``
    in magnitude (so neither NaN nor infinite): bool (k,)."""
    with np.errstate(invalid="ignore"):
        return (np.abs(z) <= COORDINATE_LIMIT[dtype]).all(axis=1)


def valid(z, d=None, dtype="float64"):
    """Which rows of measurements the tracker uses.

    Parameters
    ----------
    z : numpy.ndarray
        (k, d) measurements: range, bearing[, elevation], or (k, d + 1)
        with a last range rate (which must be finite).
    d : int, optional
        The dimension (2 or 3); default: z's columns.
    dtype : str, optional
        The tracker's ``dtype`` (its :data:`COORDINATE_LIMIT`).

    Returns
    -------
    numpy.ndarray
        bool (k,): every value within :data:`COORDINATE_LIMIT` (so finite),
        range >= 0 and, in 3-D, elevation in [-pi/2, pi/2]. The tick drops
        the other rows and counts them (``invalid``).

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    ok = within_limit(z, dtype)
    with np.errstate(invalid="ignore"):
        ok &= z[:, 0] >= 0.0
        if (z.shape[1] if d is None else d) == 3:
            ok &= (z[:, 2] >= -np.pi / 2) & (z[:, 2] <= np.pi / 2)
    return ok


def predict_rate(x, position, d):
    """With a range rate: predicted measurements h (k, d + 1) of the
    constant-velocity states x (k, 2d), their Jacobians H (k, d + 1, 2d)
    and the mask of :func:`predict` (measurement.pxd dod_meas_rate_predict)."""
    h0, J, ok = predict(x, position, d)
    k = x.shape[0]
    dx = x[:, :d] - np.asarray(position, dtype=np.float64)
    r = np.sqrt((dx * dx).sum(axis=1))
    r = np.where(ok, r, 1.0)
    u = dx / r[:, None]
    v = x[:, d:2 * d]
    rr = (u * v).sum(axis=1)
    h = np.zeros((k, d + 1))
    H = np.zeros((k, d + 1, 2 * d))
    h[:, :d] = h0
    h[:, d] = rr
    H[:, :d, :d] = J
    H[:, d, :d] = (v - rr[:, None] * u) / r[:, None]
    H[:, d, d:] = u
    h[~ok] = 0.0
    H[~ok] = 0.0
    return h, H, ok


def rate_birth(z, rate_variance, v0sq):
    """A single-point birth's velocity (k, d) and its covariance (k, d, d)
    from measurements z (k, d + 1) with range rates: the range rate along
    the measured line of sight u, variance rate_variance along u and v0sq
    across (measurement.pxd dod_meas_rate_birth)."""
    z = np.asarray(z, dtype=np.float64)
    d = z.shape[1] - 1
    cb, sb = np.cos(z[:, 1]), np.sin(z[:, 1])
    if d == 2:
        u = np.stack([cb, sb], axis=1)
    else:
        ce = np.cos(z[:, 2])
        u = np.stack([ce * cb, ce * sb, np.sin(z[:, 2])], axis=1)
    C = (rate_variance - v0sq) * u[:, :, None] * u[:, None, :] + v0sq * np.eye(d)
    return z[:, d:d + 1] * u, C
def converted_covariance_of(z, R):
    """Covariance of the Cartesian positions of measurements that carry their
    own noise (a birth's covariance, as measurement.pxd's
    dod_meas_to_cartesian_cov computes it).

    ``U L U'`` with U the radial, bearing (and elevation) unit vectors and
    ``L = D R D``, ``D = diag(1, r cos(elevation)[, r])``, its cross-range
    variances floored at its range variance (a diagonal R gives
    :func:`converted_covariance`).

    Parameters
    ----------
    z : array_like
        (k, d) measurements: range, bearing[, elevation].
    R : array_like
        (k, d, d) their noise covariances, in the same column order.

    Returns
    -------
    numpy.ndarray
        float64 (k, d, d).

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    z = np.asarray(z, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    k, d = z.shape
    r, cb, sb = z[:, 0], np.cos(z[:, 1]), np.sin(z[:, 1])
    ce = np.cos(z[:, 2]) if d == 3 else np.ones(k)
    se = np.sin(z[:, 2]) if d == 3 else np.zeros(k)
    D = np.stack([np.ones(k), r * ce, r][:d], axis=1)
    L = D[:, :, None] * R * D[:, None, :]
    for a in range(1, d):
        L[:, a, a] = np.maximum(L[:, a, a], L[:, 0, 0])
    if d == 2:
        U = np.stack([np.stack([cb, -sb], axis=1), np.stack([sb, cb], axis=1)], axis=1)
    else:
        U = np.stack([np.stack([ce * cb, -sb, -se * cb], axis=1), np.stack([ce * sb, cb, -se * sb], axis=1),
                      np.stack([se, np.zeros(k), ce], axis=1)], axis=1)
    C = U @ L @ np.swapaxes(U, 1, 2)
    return 0.5 * (C + np.swapaxes(C, 1, 2))
