"""Tracker configuration, shared by the dod tracker and the numpy reference.

Both trackers read the same :class:`TrackerConfig`, so a test or benchmark
that runs both compares the same model, gates and track management.

A configuration is five parts, each a frozen dataclass that checks its own
fields when it is made (ValueError naming the field, before anything is
built):

- :class:`FilterConfig`: the state estimate (dimension, motion model,
  noise, gate);
- :class:`ManagementConfig`: the tracks' lives (births, confirmation,
  deletion, the track score);
- :class:`ClutterConfig`: the false-detection density the score assumes,
  given or estimated;
- :class:`LimitsConfig`: what a tracker holds, how a scan's work is
  bounded (capacity, detections per scan, cluster size) and what a scan
  that does not fit does (too many rows, a late time stamp);
- :class:`ExecutionConfig`: how a tick runs (threads, row order), never
  what it computes.

``TrackerConfig(filter=FilterConfig(dim=3), threads=2)`` and the flat
``TrackerConfig(dim=3, threads=2)`` make the same configuration, and every
field reads flat too (``config.dim``, ``config.filter.dim``).
"""
import dataclasses
import math
import numbers
import operator
from dataclasses import dataclass, field


def _gammainc_lower(a, x):
    """Regularised lower incomplete gamma P(a, x) (series / continued fraction)."""
    if x <= 0.0:
        return 0.0
    lg = math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(10000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return total * math.exp(-x + a * math.log(x) - lg)
    # Lentz's continued fraction for Q(a, x).
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return 1.0 - math.exp(-x + a * math.log(x) - lg) * h


def chi2_cdf(x, df):
    """CDF of the chi-square distribution with `df` degrees of freedom."""
    return _gammainc_lower(df / 2.0, x / 2.0)


def chi2_ppf(p, df):
    """Quantile of the chi-square distribution (no scipy): bisection on :func:`chi2_cdf`.

    Parameters
    ----------
    p : float
        Probability, 0 < p < 1.
    df : float
        Degrees of freedom, > 0.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Unless 0 < p < 1 and df > 0.

    Notes
    -----
    Thread-safety: a pure function.
    """
    if not (0.0 < p < 1.0):
        raise ValueError(f"probability must be in (0, 1), not {p!r}")
    if not df > 0:
        raise ValueError("df must be positive")
    if df == 2:
        return -2.0 * math.log1p(-p)        # closed form
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if chi2_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


MAX_THREADS = 256       # most threads of one tick (DOD_TRACKER_MAX_THREADS in _engine.pxd)


def _rates(value, name):
    """`value` as a 3 x 3 switching-rate generator (tuple of tuples): off-diagonal
    entries finite and >= 0, every row summing to 0 within 1e-9 of its
    largest entry; the diagonal is stored as minus the row's off-diagonal sum
    (so the rows sum to 0 exactly). ValueError otherwise."""
    import numpy as np
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers of shape (3, 3), not {value!r}") from None
    if a.shape != (3, 3):
        raise ValueError(f"{name} must have shape (3, 3), not {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} entries must be finite")
    off = a - np.diag(np.diag(a))
    if not (off >= 0.0).all():
        raise ValueError(f"{name} entries must be finite, those off the diagonal >= 0 (rates per second)")
    scale = np.maximum(np.abs(a).max(axis=1), 1e-300)
    if not (np.abs(a.sum(axis=1)) <= 1e-9 * scale).all():
        raise ValueError(f"{name} must be a generator (every row summing to 0: the diagonal is minus "
                         f"the rates of leaving), not {value!r}")
    leave = off.sum(axis=1)
    return tuple(tuple(-float(leave[i]) if i == j else float(off[i, j]) for j in range(3)) for i in range(3))


def _probabilities(value, shape, name):
    """`value` as a float64 array of `shape`, entries finite in [0, 1], rows
    (the last axis) summing to 1 within 1e-9; ValueError otherwise."""
    import numpy as np
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers of shape {shape}, not {value!r}") from None
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, not {a.shape}")
    if not (np.isfinite(a).all() and (a >= 0.0).all() and (a <= 1.0).all()):
        raise ValueError(f"{name} entries must be finite and in [0, 1]")
    if not (np.abs(a.sum(axis=-1) - 1.0) <= 1e-9).all():
        raise ValueError(f"{name} must be row-stochastic (every row summing to 1), not {value!r}")
    return a


# ---------------------------------------------------------------- field checks
# Each raises ValueError naming the field (a wrong type included: the value
# is what is wrong), so a bad configuration fails where it is written.

def _integer(owner, name, lo, hi):
    """getattr(owner, name): an integer (not a bool) in [lo, hi]; another
    integer type (numpy's) is stored as the int it is, so that no reader
    does arithmetic in a narrow type."""
    v = getattr(owner, name)
    try:
        i = operator.index(v)
        ok = not isinstance(v, bool) and lo <= i <= hi
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an int in [{lo}, {hi}], not {v!r}")
    if type(v) is not int:
        _freeze(owner, name, int(i))


def _real(owner, name, lo, hi, *, lo_open=True, hi_open=True, optional=False, label=None):
    """getattr(owner, name) (owner[name] for a label's item): a finite real
    number (not a bool) in the interval; None too when `optional`. Another
    real type (numpy's float32, a Fraction) is stored as the float it is."""
    v = owner[name] if label else getattr(owner, name)
    name = label or name
    if v is None and optional:
        return
    try:
        ok = (isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
              and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi))
    except (OverflowError, TypeError, ValueError):     # an int too large for a float, an odd Real
        ok = False
    if not ok:
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise ValueError(f"{name} must be a finite number in {rng}{' or None' if optional else ''}, not {v!r}")
    if not label and not isinstance(v, (int, float)):
        _freeze(owner, name, float(v))


def _choice(owner, name, choices):
    """getattr(owner, name): one of the strings `choices`."""
    v = getattr(owner, name)
    if not (isinstance(v, str) and v in choices):
        raise ValueError(f"{name} must be {' or '.join(repr(c) for c in choices)}, not {v!r}")


def _float_dtype(v, name):
    """"float64" or "float32" from that string, a numpy dtype or a numpy
    scalar type of either; ValueError naming the field for anything else."""
    if isinstance(v, str):
        if v in ("float64", "float32"):
            return v
    elif type(v).__module__.startswith("numpy") or (isinstance(v, type) and v.__module__.startswith("numpy")):
        import numpy as np
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            found = np.dtype(v)
            if found in (np.float64, np.float32) and found.byteorder in ("=", "|"):
                return found.name
    raise ValueError(f"{name} must be 'float64' or 'float32' (or numpy's float64 or float32), not {v!r}")


def _freeze(owner, name, value):
    """Set a field of a frozen dataclass (from its own checks, or its making)."""
    object.__setattr__(owner, name, value)


# ---------------------------------------------------------------- the parts

@dataclass(frozen=True)
class FilterConfig:
    """The state estimate of every track: dimension, motion model, noise and gate.

    Parameters
    ----------
    dim
        2 or 3 spatial dimensions; the state is (position, velocity).
    q
        process noise, white-acceleration spectral density (m^2/s^3), > 0.
    r
        measurement noise standard deviation per axis (m), > 0.
    v0
        velocity standard deviation of a newborn track (m/s), > 0.
    gate_probability
        probability mass of the Mahalanobis gate, in (0, 1); the gate is the
        chi-square quantile with `dim` degrees of freedom (:attr:`gate`).
    motion
        "cv" (default: one constant-velocity model, process noise q) or "imm":
        an interacting multiple model filter (Blom and Bar-Shalom) of three
        models over the state (position, velocity, turn rate): constant velocity
        with process noise ``imm_q[0]`` and ``imm_q[1]`` (the turn rate carried
        unchanged) and a coordinated turn (in 3-D the turn is horizontal, the
        vertical axis constant velocity) with white-acceleration noise
        ``turn_q`` and turn-rate noise ``turn_rate_q`` (rad^2/s^3). Gating and
        association use the mixture of the predictions (the ``x``/``P`` columns
        hold it); the update runs per model and the model probabilities follow
        the likelihoods.
    imm_q
        (low, high), each a positive finite number (m^2/s^3).
    turn_q, turn_rate_q
        positive finite numbers.
    turn_rate_v0
        standard deviation of a newborn track's turn rate (rad/s, > 0).
    imm_transition
        3 x 3 Markov matrix, row i the probabilities of the next scan's model
        given model i (order: CV low, CV high, turn); every entry finite in [0,
        1], every row summing to 1 (within 1e-9). It is per scan, whatever the
        scan's dt: the default (0.9 on the diagonal) suits a scan a second; at
        50 Hz a diagonal near 0.998 keeps the same switching rate per second
        (with the default at 50 Hz the IMM switches models too often and its
        GOSPA on straight-line targets is measurably worse than CV's; with
        0.998 the two are nearly equal); ``imm_rates`` states the switching
        per second instead.
    imm_rates
        None (default: ``imm_transition``, per scan) or the switching rates
        per second: a 3 x 3 generator whose entry (i, j), i != j, is the rate
        (1/s) of switching from model i to model j (finite, >= 0) and whose
        diagonal is minus its row's rates (every row sums to 0, within 1e-9;
        stored exactly so). Model i then lasts 1 / -rates[i][i] seconds on
        average (its mean sojourn time); with sojourn times tau_i and
        switching probabilities p_ij (i != j, each row's summing to 1),
        rates[i][j] = p_ij / tau_i. Each tick uses the Markov matrix of its
        own dt, exp(rates dt) (:func:`dod.tracker.reference_imm.transition`),
        so irregular scans and scans at the same instant switch as time
        says; ``imm_transition`` is then not used (still checked).
    imm_mu0
        model probabilities of a newborn track (3 values >= 0, sum 1).
    dtype
        "float64" (default) or "float32": the precision of the track table's
        state ``x`` and covariance ``P`` (``numpy.float32`` and
        ``numpy.dtype("float32")`` are taken and stored as the string).
        With "float32" those two columns take half the bytes and the
        constant-velocity kernels over lanes run twice the tracks per
        instruction; every other column, the scan's detections and the
        tick's scratch (innovation inverses, gate widths) stay float64,
        and the per-row kernels (IMM, the sensors' filters, births)
        compute in double over the single-precision rows, rounding on
        the way back. Results are bit-identical across thread counts,
        instruction sets and dispatch paths for each dtype, not between
        the two. The numpy reference tracker computes in float64 whatever
        this says.

    Notes
    -----
    Motion (``dod/tracker/imm.pxd`` states the equations):

    The IMM fields are checked whatever ``motion`` says, so a configuration is
    valid or not independently of the motion chosen. A list or array given for
    ``imm_q``, ``imm_transition`` or ``imm_mu0`` is stored as a tuple (of
    tuples): the configuration cannot change after its checks.
    """

    dim: int = 2
    q: float = 1.0
    r: float = 1.0
    v0: float = 10.0
    gate_probability: float = 0.999
    motion: str = "cv"
    imm_q: tuple = (1.0, 20.0)
    turn_q: float = 1.0
    turn_rate_q: float = 0.01
    turn_rate_v0: float = 0.2
    imm_transition: tuple = ((0.90, 0.05, 0.05), (0.05, 0.90, 0.05), (0.05, 0.05, 0.90))
    imm_mu0: tuple = (0.8, 0.1, 0.1)
    imm_rates: tuple | None = None
    dtype: str = "float64"

    def __post_init__(self):
        _integer(self, "dim", 2, 3)
        _freeze(self, "dtype", _float_dtype(self.dtype, "dtype"))
        for name in ("q", "r", "v0"):
            _real(self, name, 0.0, math.inf)
        _real(self, "gate_probability", 0.0, 1.0)
        _choice(self, "motion", ("cv", "imm"))
        q = self.imm_q
        if not (isinstance(q, (tuple, list)) and len(q) == 2):
            raise ValueError(f"imm_q must be (low, high), not {q!r}")
        for i in (0, 1):
            _real(q, i, 0.0, math.inf, label=f"imm_q[{i}]")
        for name in ("turn_q", "turn_rate_q", "turn_rate_v0"):
            _real(self, name, 0.0, math.inf)
        transition = _probabilities(self.imm_transition, (3, 3), "imm_transition")
        mu0 = _probabilities(self.imm_mu0, (3,), "imm_mu0")
        if not isinstance(q, tuple):
            _freeze(self, "imm_q", tuple(q))
        if not (isinstance(self.imm_transition, tuple) and all(isinstance(row, tuple) for row in self.imm_transition)):
            _freeze(self, "imm_transition", tuple(tuple(float(x) for x in row) for row in transition))
        if not isinstance(self.imm_mu0, tuple):
            _freeze(self, "imm_mu0", tuple(float(x) for x in mu0))
        if self.imm_rates is not None:
            _freeze(self, "imm_rates", _rates(self.imm_rates, "imm_rates"))

    @property
    def gate(self):
        """The gate: squared Mahalanobis distance threshold."""
        return chi2_ppf(self.gate_probability, self.dim)

    @property
    def pair_radius_factor(self):
        """sqrt(2 * gate): the noise allowance of a two-point pair, in units of r."""
        return math.sqrt(2.0 * self.gate)


@dataclass(frozen=True)
class ManagementConfig:
    """The tracks' lives: births, confirmation and deletion.

    Parameters
    ----------
    confirmation
        "score" (default) or "m_of_n" (confirm_m, confirm_n, max_misses). The
        score is the sequential log-likelihood ratio of each track (Blackman and Popoli), a
        column of the track table. A birth starts at ``ln(new_target_density /
        clutter)``; each scan adds ``ln(pd * N(y; 0, S) / clutter)`` for its
        detection (y the innovation, S its covariance) or ``ln(1 - pd)`` without
        one. A tentative track is confirmed at ``ln((1 - track_loss_probability)
        / false_track_probability)`` and deleted at ``ln(track_loss_probability
        / (1 - false_track_probability))`` (Wald's thresholds); a confirmed
        track is deleted once its score is ``score_drop`` below its running
        maximum (another column). The clutter density is the
        :class:`ClutterConfig`'s.
    initiation
        "two_point" (default) or "single" (every detection no track took
        starts a tentative track). Two-point: such a detection waits one scan
        in a table of its own; a tentative track starts from a waiting
        detection and one of the next scan that no track took, when the
        pair's implied speed is at most ``v_max`` plus the measurement noise
        (the distance may exceed ``v_max * dt`` by ``sqrt(2 * gate)``
        standard deviations of the waiting detection's position: ``r`` for
        a Cartesian one, its widest axis for a range-bearing one); pairs are
        formed cheapest (closest) first. Its state is the filter of the pair:
        a birth at the first detection (its covariance: ``r**2 I``, or the
        converted measurement's) with velocity spread v0, predicted by dt and
        updated with the second (the extended Kalman update for a
        range-bearing one); as v0 grows it tends to the two-point difference,
        velocity ``(z2 - z1) / dt``.

        The defaults hold up across clutter levels (0.2 to 3 false
        detections per target per scan, Cartesian and range-bearing); M-of-N
        with single-point births collapses in dense clutter but can be more
        accurate on sparse, short-lived targets (the MOT15 replays).
    confirm_m, confirm_n
        a tentative track is confirmed once it was detected in M of its last N
        scans, and deleted when N scans passed without that (1 <= M <= N <= 32).
    max_misses
        a confirmed track is deleted after this many consecutive scans without a
        detection (an int in [1, 2**32 - 1]).
    pd
        detection probability the score assumes, in (0, 1).
    new_target_density
        expected new targets per unit area/volume per scan (> 0).
    false_track_probability, track_loss_probability
        Wald's alpha (a false track confirmed) and beta (a true track deleted),
        each in (0, 0.5).
    score_drop
        > 0, see confirmation.
    v_max
        largest target speed two-point initiation pairs (> 0, m/s): a faster
        target never starts a track, so set it to the fastest you track
        (the default, 50 m/s, is a road vehicle's; aircraft need hundreds).
    """

    confirmation: str = "score"
    initiation: str = "two_point"
    confirm_m: int = 3
    confirm_n: int = 5
    max_misses: int = 5
    pd: float = 0.9
    new_target_density: float = 1e-6
    false_track_probability: float = 1e-3
    track_loss_probability: float = 1e-2
    score_drop: float = 11.0
    v_max: float = 50.0

    def __post_init__(self):
        _choice(self, "confirmation", ("m_of_n", "score"))
        _choice(self, "initiation", ("single", "two_point"))
        _integer(self, "confirm_m", 1, 32)
        _integer(self, "confirm_n", 1, 32)
        if self.confirm_m > self.confirm_n:
            raise ValueError(f"confirm_m must be at most confirm_n, not {self.confirm_m} > {self.confirm_n}")
        _integer(self, "max_misses", 1, (1 << 32) - 1)
        _real(self, "pd", 0.0, 1.0)
        _real(self, "new_target_density", 0.0, math.inf)
        _real(self, "false_track_probability", 0.0, 0.5)
        _real(self, "track_loss_probability", 0.0, 0.5)
        _real(self, "score_drop", 0.0, math.inf)
        _real(self, "v_max", 0.0, math.inf)

    @property
    def confirm_threshold(self):
        """Wald's upper threshold: ln((1 - beta) / alpha)."""
        return math.log((1.0 - self.track_loss_probability) / self.false_track_probability)

    @property
    def delete_threshold(self):
        """Wald's lower threshold: ln(beta / (1 - alpha))."""
        return math.log(self.track_loss_probability / (1.0 - self.false_track_probability))


@dataclass(frozen=True)
class ClutterConfig:
    """The density of false detections the track score assumes.

    Parameters
    ----------
    clutter_density
        false detections per unit area (2-D) or volume (3-D) per scan, > 0; None
        (default): estimated online, per scan, as ``(1 - clutter_smoothing) *
        previous + clutter_smoothing * (u + 1) / V`` with u the valid detections
        no confirmed track took and V ``surveillance_volume`` or, without it,
        the volume of the box around the scan's detections (each side at least
        10 r). The first estimate is the first scan's value; an empty scan
        leaves it as it is. It is always positive and at most ``(max_detections
        + 1) / (10 r)**dim``.
    surveillance_volume
        area/volume of the region the clutter estimator divides by (> 0), or
        None.
    clutter_smoothing
        weight of the newest scan in the clutter estimate, in (0, 1].
    """

    clutter_density: float | None = None
    surveillance_volume: float | None = None
    clutter_smoothing: float = 0.1

    def __post_init__(self):
        _real(self, "clutter_density", 0.0, math.inf, optional=True)
        _real(self, "surveillance_volume", 0.0, math.inf, optional=True)
        _real(self, "clutter_smoothing", 0.0, 1.0, hi_open=False)


@dataclass(frozen=True)
class LimitsConfig:
    """What a tracker holds, how one scan's work is bounded, and what a scan
    that does not fit does.

    Parameters
    ----------
    capacity
        most tracks held at once, in [1, 2**24]; births beyond it are dropped
        and counted.
    max_detections
        most detections per scan, in [1, 2**24] (sizes the scratch memory, and
        with two-point initiation the table of waiting detections).
    overflow
        "error" (a scan with more detections raises ValueError before any state
        changes) or "drop" (the first max_detections are used, the rest counted
        in ``overflow``).
    out_of_sequence
        What a time-stamped scan older than the latest scan taken does (a late,
        out-of-sequence scan): "refuse" (default: ValueError, nothing changes)
        or "drop" (the scan is skipped, nothing changes, and it is counted in
        ``Tracker.late_scans``). A scan at the same instant as the latest is
        not late (dt = 0). Retrodiction (folding a late scan into the past of
        the tracks) is not provided.
    max_cluster
        0 (default): every cluster is solved exactly. Otherwise a cluster with
        more than this many tracks or detections is solved greedily (cheapest
        free pair first), bounding the worst-case tick (exact assignment is
        cubic in the cluster size); counted in ``greedy_clusters``. The numpy
        reference always solves exactly. Whatever this says, a cluster whose
        cost matrix would exceed 16 MiB (about 1000 x 1000) is solved greedily
        (and counted). An int in [0, 2**31 - 1].
    """

    capacity: int = 20000
    max_detections: int = 30000
    overflow: str = "error"
    max_cluster: int = 0
    out_of_sequence: str = "refuse"

    def __post_init__(self):
        _integer(self, "capacity", 1, 1 << 24)
        _integer(self, "max_detections", 1, 1 << 24)
        _choice(self, "overflow", ("error", "drop"))
        _integer(self, "max_cluster", 0, (1 << 31) - 1)
        _choice(self, "out_of_sequence", ("refuse", "drop"))


@dataclass(frozen=True)
class ExecutionConfig:
    """How a tick runs: its threads and the order of the track rows.

    Parameters
    ----------
    threads
        threads of one tick (1, the default: serial, no parallel region). With
        more, predict, innovation inverses, gating and the Kalman updates run
        over chunks of rows that the workers take as they finish, the detection
        grid is built while the other workers predict, independent clusters are
        solved in parallel, and deaths and births (their rows, ids and slots
        planned serially, in one order) are written in chunks (OpenMP), so the
        result is bit-identical for every thread count. How the workers wait
        between the tick's regions is libgomp's setting, read once when the
        engine loads: ``dod.tracker.openmp.default_wait_policy()`` (which the
        bench and the demo call) sets a short spin before they sleep. In a loop
        that sleeps between ticks, pin the threads one per core, or two threads
        can be slower than one: ``default_binding()`` (which ``python -m
        dod.tracker`` calls; see dod.tracker.openmp). 1 <= threads <=
        MAX_THREADS (256).
    parallel_min_rows
        with threads > 1, a pass over the tracks runs in parallel only when
        there are at least ``threads * parallel_min_rows`` rows (fewer: serial,
        cheaper than waking the workers); the drop of the detections confirmed
        tracks took from the index, and the births' spatial order, only with ``8
        * parallel_min_rows`` detections, the row swaps of ``confirmed_first``
        with ``parallel_min_rows / 32`` swaps (these three whatever the thread
        count), the grouping of the clustered pairs by cluster with ``16 *
        parallel_min_rows`` pairs, the solve of the clusters (those not a lone
        pair) with ``4 * parallel_min_rows`` of them. Speed only: the result is
        the same either way. An int in [0, 2**31 - 1].
    sort_every
        every this many scans the track rows are sorted after the tick: the
        confirmed tracks first, in spatial order (the detection grid's own:
        row-major cells, x fastest), so the next ticks walk the tracks and the
        grid's cells together; then the other tracks in their row order (0, the
        default: never on a schedule). An int in [0, 2**31 - 1].
    sort_when_mixed
        the rows are also sorted after a tick that leaves more than this
        fraction of the leading rows (as many as the tracks the previous tick
        confirmed) without a confirmed track (0: never; default 0.1). Deaths
        move the last row into each hole, so clutter's short-lived tracks, born
        among the targets' rows at a first scan and dying there, leave holes
        that other tentative tracks keep filling, and the tick slows as the
        rows mix. After a sort the churn stays behind the confirmed rows; in
        the bench's scenes the trigger fires at the third scan, then every
        tens to a hundred-odd scans (the costs: docs/design/threads-and-locality.md).
    sort_when_displaced
        the rows are also sorted after a tick that leaves more than this
        fraction of the rows in order out of it (0: never; default 0.2). In
        order: the confirmed rows the last sort placed, or a first scan's births
        (born in cell order). Out of it: each such row a death emptied (the
        table's last row fills the hole, from anywhere in space; a row counts
        once however often it is refilled) and each confirmed track in a row
        after them (born since). Why: with few tentative tracks
        (``initiation="two_point"``, the demo's) the leading rows never mix, yet
        deaths and births scatter them and the tick slows; with this trigger
        one sort brings p50 and p99 back down. Single-point births sort as
        often either way (the mixing trigger fires first).
    sort_when_drifted
        the rows are also sorted once the confirmed tracks have moved this many
        cells of the detection grid since the last sort, on average (0: never;
        default 2; a finite number >= 0): the time since the sort times their
        mean speed, over the cell side. Motion is what scatters the rows when
        nothing else does: a track's neighbours in memory drift away from it in
        space, and the grid's reads with them. The mean speed is measured at
        each sort and every 64 scans (a pass over the velocities in fixed parts
        of the rows: the same at every thread count). The default, 2 cells,
        sorts before the order decays measurably and rarely enough (every
        ~150 scans in the bench's scenes) that a p99 over many ticks stays a
        tick's own; the measurements that set it are in
        docs/design/threads-and-locality.md.
    confirmed_first
        keep the confirmed tracks in the leading rows between sorts (default
        True). After each tick's management, every row below the confirmed count
        that holds no confirmed track (a confirmed track that died, or a
        tentative one) is swapped with a confirmed track in a row at or above it
        (the last of the leading rows, or one confirmed this tick), both lists
        in row order; then the dead rows, all behind the confirmed ones, take
        the table's last rows as before. So the tentative tracks' churn never
        reaches the leading rows and they never mix (``sort_when_mixed`` finds
        nothing); a row below the rows in order that takes a track from
        elsewhere counts once against ``sort_when_displaced``. False: deaths
        move the last row into each hole wherever it is (the table's own
        removal), and the mixing trigger sorts the leading rows back.
    events
        record what happened in each scan (default False): which track each
        detection updated, the births, confirmations and deaths with their
        ids (:meth:`Tracker.events`). The passes that decide each fact write
        it into arrays sized once when the tracker is made (the scan's rows
        and births: ``max_detections`` entries each; confirmations and
        deaths: ``capacity`` each; 28 and 17 bytes an entry), so a tick
        still allocates nothing; off, those passes write nothing and the
        arrays are not made.
    layout
        how the track table stores the state ``x`` and covariance ``P``:
        ``"lanes"`` (default: one lane per element, consecutive tracks' same
        element together; ``x`` and ``P`` are strided views, and with
        constant-velocity motion and Cartesian scans predict, the gate and
        the update run across tracks in the vector kernels of the CPU's
        instruction set, :func:`simd_path`) or ``"rows"`` (each track's
        values together: ``x`` a C-contiguous view; every model runs one
        track at a time). The median tick of ``python -m dod.tracker.bench``
        on one core of a 2-core AVX2 virtual machine: lanes 0.110 ms at
        1,000 targets, 1.20 ms at 10,000 and 16.7 ms at 100,000; rows 0.125,
        1.35 and 16.2 ms. At 100,000 the table streams from memory, and a
        birth, a death and an update touch one cache line per element in
        lanes. Measure your own scene with ``--layout rows`` and without.

    Notes
    -----
    Nothing here changes a result: the tracks, their ids and every count are the
    same bits at every setting (row order is not part of the result: match rows
    by id or handle).
    """

    threads: int = 1
    parallel_min_rows: int = 512
    sort_every: int = 0
    sort_when_mixed: float = 0.1
    sort_when_displaced: float = 0.2
    sort_when_drifted: float = 2.0
    confirmed_first: bool = True
    events: bool = False
    layout: str = "lanes"

    def __post_init__(self):
        _integer(self, "threads", 1, MAX_THREADS)
        _integer(self, "parallel_min_rows", 0, (1 << 31) - 1)
        _integer(self, "sort_every", 0, (1 << 31) - 1)
        _real(self, "sort_when_mixed", 0.0, 1.0, lo_open=False, hi_open=False)
        _real(self, "sort_when_displaced", 0.0, 1.0, lo_open=False, hi_open=False)
        _real(self, "sort_when_drifted", 0.0, math.inf, lo_open=False)
        if not isinstance(self.confirmed_first, bool):
            raise ValueError(f"confirmed_first must be True or False, not {self.confirmed_first!r}")
        if not isinstance(self.events, bool):
            raise ValueError(f"events must be True or False, not {self.events!r}")
        if self.layout not in ("rows", "lanes"):
            raise ValueError(f"layout must be 'rows' or 'lanes', not {self.layout!r}")


# ---------------------------------------------------------------- the whole

# The parts, in the order TrackerConfig holds them, and which part each flat
# field belongs to (the names are unique across the parts).
PARTS = {"filter": FilterConfig, "management": ManagementConfig, "clutter": ClutterConfig,
         "limits": LimitsConfig, "execution": ExecutionConfig}
FLAT_FIELDS = {f.name: part for part, cls in PARTS.items() for f in dataclasses.fields(cls)}
if len(FLAT_FIELDS) != sum(len(dataclasses.fields(cls)) for cls in PARTS.values()):
    raise ImportError("a field name is repeated across the TrackerConfig parts")


@dataclass(frozen=True, init=False)
class TrackerConfig:
    """TrackerConfig(*, filter=None, management=None, clutter=None, limits=None, execution=None, **fields)

    Everything a tracker is built from: five parts.

    Parameters
    ----------
    filter : FilterConfig, optional
        Dimension, motion, noise, gate.
    management : ManagementConfig, optional
        Births, confirmation, deletion.
    clutter : ClutterConfig, optional
        False-detection density.
    limits : LimitsConfig, optional
        Capacity, detections per scan, clusters.
    execution : ExecutionConfig, optional
        Threads, row order: never the result.
    **fields
        The parts' fields by their own names (``dim=3``, ``threads=2``,
        ...: the flat form), each set in its part; a field given this way
        wins over the same field of a part given beside it, which is what
        ``dataclasses.replace(config, dim=3)`` relies on.

    Raises
    ------
    ValueError
        From a part's checks, naming the field (wrong types included),
        before anything is built.
    TypeError
        For a keyword that names no field (the message lists them) and for
        a part of the wrong type.

    Notes
    -----
    A part not given is its defaults. Every field also reads flat
    (``config.threads`` is ``config.execution.threads``), as do
    :attr:`gate`, :attr:`pair_radius_factor`, :attr:`confirm_threshold` and
    :attr:`delete_threshold`. Frozen, hashable, compared part by part;
    pickles and copies as a dataclass does. The dod tracker and the numpy
    reference read the same configuration. Thread-safety: immutable; share
    it freely.
    """

    filter: FilterConfig = field(default_factory=FilterConfig)
    management: ManagementConfig = field(default_factory=ManagementConfig)
    clutter: ClutterConfig = field(default_factory=ClutterConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    execution: ExecutionConfig = field(default_factory=ExecutionConfig)

    def __init__(self, *, filter=None, management=None, clutter=None, limits=None, execution=None,
                 **fields):
        given = {"filter": filter, "management": management, "clutter": clutter, "limits": limits,
                 "execution": execution}
        unknown = [name for name in fields if name not in FLAT_FIELDS]
        if unknown:
            raise TypeError(f"TrackerConfig got unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                            f"the parts are {', '.join(PARTS)} and the fields "
                            f"{', '.join(sorted(FLAT_FIELDS))}")
        for part, cls in PARTS.items():
            value = given[part]
            own = {name: v for name, v in fields.items() if FLAT_FIELDS[name] == part}
            if value is None:
                value = cls(**own)
            elif own and isinstance(value, cls):
                value = dataclasses.replace(value, **own)
            _freeze(self, part, value)
        self.__post_init__()

    def __post_init__(self):
        for part, cls in PARTS.items():
            value = getattr(self, part)
            if not isinstance(value, cls):
                raise TypeError(f"{part} must be a {cls.__name__}, not {type(value).__name__}")

    @property
    def gate(self):
        """The gate: squared Mahalanobis distance threshold (:attr:`FilterConfig.gate`)."""
        return self.filter.gate

    @property
    def pair_radius_factor(self):
        """sqrt(2 * gate): the noise allowance of a two-point pair, in units of r."""
        return self.filter.pair_radius_factor

    @property
    def confirm_threshold(self):
        """Wald's upper threshold: ln((1 - beta) / alpha)."""
        return self.management.confirm_threshold

    @property
    def delete_threshold(self):
        """Wald's lower threshold: ln(beta / (1 - alpha))."""
        return self.management.delete_threshold


def _flat(part, name):
    def read(self):
        return getattr(getattr(self, part), name)
    return property(read, doc=f"``{part}.{name}`` (:class:`{PARTS[part].__name__}`).")


for _name, _part in FLAT_FIELDS.items():
    setattr(TrackerConfig, _name, _flat(_part, _name))
del _name, _part
