"""Seeded multi-target scenarios: truth trajectories and per-scan detections.

``generate(n_targets, scans, ...)`` returns a :class:`Scenario` (and
``iter_scans`` streams the same scans one at a time, in bounded memory): for every
scan the true ids and positions of the targets alive then, and the scan's
detections (each alive target detected with probability ``pd``, with
Gaussian noise of standard deviation ``r``; Poisson clutter, uniform over the
surveillance region or partly in a few dense patches; rows shuffled). Targets move at constant velocity with
white-acceleration noise ``q``; a fraction is born late or dies early, and a
fraction flies in pairs that cross each other mid-scenario. With
``manoeuvre`` > 0 that fraction of the targets alternates straight legs and
coordinated turns (``--scenario manoeuvre`` of the demo: :data:`PRESETS`). Everything comes
from one ``numpy.random.Generator(seed)`` (the per-scan passes over every
target and detection from a xoshiro256** stream it seeds:
:mod:`dod.tracker._scenario`), so a seed names a scenario.
"""
import dataclasses
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays

from dod.tracker._scenario import Random


def _number(name, v, *, low=0.0, strict=True, integer=False, high=None):
    """`v` as a float (an int with integer=True) in range, or a clear
    TypeError (not a real number; bool refused) / ValueError (NaN, inf, out
    of range). Scenario and RadarScenario validate every field with it."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or integer and not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be {'an int' if integer else 'a real number'}, not {type(v).__name__}")
    x = int(v) if integer else float(v)
    if not (math.isfinite(x) and (x > low if strict else x >= low) and (high is None or x <= high)):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {low}"
                         + (f" and <= {high}" if high is not None else "") + f", not {v!r}")
    return x


def _per_scan(name, v):
    if not isinstance(v, list):
        raise TypeError(f"{name} must be a list (one entry per scan), not {type(v).__name__}")
    return v


@dataclass
class Scenario:
    """A generated scenario: every scan's detections and the truth behind them.

    Made by :func:`generate`; iterate it for ``(detections, dt)`` per scan
    (what :meth:`dod.tracker.Tracker.tick` takes).

    Parameters
    ----------
    dim : int
        2 or 3 spatial dimensions.
    dt : float
        Seconds between scans, finite and > 0.
    extent : float
        Side of the square (cube) region, in metres, finite and > 0, with a
        finite area (volume).
    detections : list of numpy.ndarray
        Per scan: (k, dim) numbers, read through dod's input gate and
        stored as float64.
    truth_ids : list of numpy.ndarray
        Per scan: int64 (m,), the targets present.
    truth_pos : list of numpy.ndarray
        Per scan: float64 (m, dim), their positions.
    det_truth : list of numpy.ndarray
        Per scan: int64 (k,), the target each detection came from (-1:
        clutter). The lists given non-empty have the same length.
    clutter : float, default 0.0
        Mean false detections per scan, finite and >= 0.
    patch_centres : numpy.ndarray, optional
        (patches, dim) finite centres of the dense clutter patches.
    patch_radius : float, default 0.0
        Radius of the clutter patches, finite and >= 0.

    Raises
    ------
    TypeError, ValueError
        In ``__post_init__`` for anything else, before anything is built.

    Notes
    -----
    Thread-safety: plain data; share it read-only.
    """
    dim: int
    dt: float
    extent: float                      # side of the square/cube region (m)
    detections: list = field(default_factory=list)     # per scan: float64 (k, dim)
    truth_ids: list = field(default_factory=list)      # per scan: int64 (m,)
    truth_pos: list = field(default_factory=list)      # per scan: float64 (m, dim)
    det_truth: list = field(default_factory=list)      # per scan: int64 (k,), -1 clutter
    clutter: float = 0.0               # mean false detections per scan
    patch_centres: object = None       # (patches, dim) centres of the dense clutter patches
    patch_radius: float = 0.0

    def __post_init__(self):
        if isinstance(self.dim, bool) or not isinstance(self.dim, (int, np.integer)):
            raise TypeError(f"dim must be the int 2 or 3, not {type(self.dim).__name__}")
        if self.dim not in (2, 3):
            raise ValueError(f"dim must be 2 or 3, not {self.dim!r}")
        self.dim = int(self.dim)
        self.dt = _number("dt", self.dt)
        self.extent = _number("extent", self.extent)
        try:
            volume = self.extent ** self.dim
        except OverflowError:
            volume = math.inf
        if not math.isfinite(volume):
            raise ValueError(f"extent {self.extent!r} makes a region of infinite "
                             f"{'area' if self.dim == 2 else 'volume'}")
        self.clutter = _number("clutter", self.clutter, strict=False)
        self.patch_radius = _number("patch_radius", self.patch_radius, strict=False)
        if self.patch_centres is not None:
            c = input_array(self.patch_centres, np.float64, "patch_centres", 2, self.dim)
            if not np.isfinite(c).all():
                raise ValueError("patch_centres must be finite")
            self.patch_centres = c
        lists = {}
        for name, ndim, trailing, dtype in (("detections", 2, self.dim, np.float64),
                                            ("truth_ids", 1, None, np.int64),
                                            ("truth_pos", 2, self.dim, np.float64),
                                            ("det_truth", 1, None, np.int64)):
            v = _per_scan(name, getattr(self, name))
            lists[name] = [input_array(a, dtype, f"{name}[{i}]", ndim, trailing) for i, a in enumerate(v)]
        self._check_lengths(lists)
        for name, v in lists.items():
            setattr(self, name, v)               # new lists: the caller's are left as they were

    def _check_lengths(self, lists):
        sizes = {name: len(v) for name, v in lists.items() if len(v)}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"the per-scan lists differ in length: {sizes}")

    @property
    def volume(self):
        """Area (2-D) or volume (3-D) of the surveillance region."""
        return self.extent ** self.dim

    @property
    def clutter_density(self):
        """Mean clutter density over the region (false detections per unit
        area/volume per scan; patches included, as if spread evenly)."""
        return self.clutter / self.volume

    @property
    def scans(self):
        """Number of scans."""
        return len(self.detections)

    def __iter__(self):
        """Yields (detections, dt) per scan: feed them to Tracker.tick."""
        for d in self.detections:
            yield d, self.dt


class Scan(NamedTuple):
    """One scan of a scenario, as :func:`iter_scans` yields it."""
    detections: np.ndarray      # float64 (k, dim), C-contiguous
    dt: float
    truth_ids: np.ndarray       # int64 (m,)
    truth_pos: np.ndarray       # float64 (m, dim)
    det_truth: np.ndarray       # int64 (k,), -1 clutter


#: Most targets a scenario may hold: every target costs ~200 bytes of state
#: per scan drawn (this many is ~20 GB); more is refused before anything is built.
MAX_TARGETS = 10**8

# Named scenarios of the demo and the benchmarks (python -m dod.tracker --scenario NAME):
# keyword arguments of iter_scans.
PRESETS = {
    "default": {},
    # A surveillance radar's picture: one scan a second, targets at 10-30 m/s
    # 500 m apart, every one alternating straight legs (10-40 s) and turns
    # of 0.05-0.3 rad/s (5-20 s). Track it with TrackerConfig(v0=30) (PRESET_CONFIG).
    "manoeuvre": dict(manoeuvre=1.0, turn_rate=(0.05, 0.3), leg=(10.0, 40.0), turn_time=(5.0, 20.0),
                      dt=1.0, speed=(10.0, 30.0), spacing=500.0),
    # the same picture flown straight: the baseline the IMM must not lose on
    "straight": dict(dt=1.0, speed=(10.0, 30.0), spacing=500.0),
}

# TrackerConfig overrides that match each preset (newborn velocity spread).
PRESET_CONFIG = {"default": {}, "manoeuvre": dict(v0=30.0), "straight": dict(v0=30.0)}


def generate(n_targets=100, scans=200, **kwargs):
    """A seeded scenario, every scan held in memory.

    Use :func:`iter_scans` (same parameters, same scans) to stream scans in
    bounded memory instead.

    Parameters
    ----------
    n_targets : int, default 100
    scans : int, default 200
    **kwargs
        As for :func:`iter_scans`.

    Returns
    -------
    Scenario

    Raises
    ------
    ValueError
        For a parameter out of its range.

    Notes
    -----
    Thread-safety: a pure function of its arguments.
    """
    meta = {}
    stream = _scan_stream(meta, n_targets, scans, **kwargs)
    scans_ = list(stream)
    sc = Scenario(**meta)
    for scan in scans_:
        sc.detections.append(scan.detections)
        sc.det_truth.append(scan.det_truth)
        sc.truth_ids.append(scan.truth_ids)
        sc.truth_pos.append(scan.truth_pos)
    return sc


def scan_extent(n_targets, *, dim=2, spacing=200.0, **_):
    """Side of the surveillance region of a scenario of `n_targets`."""
    return spacing * max(int(n_targets), 1) ** (1.0 / dim)


def iter_scans(n_targets=100, scans=200, **kwargs):
    """A seeded scenario, one :class:`Scan` at a time (a generator).

    Memory stays bounded by the targets (O(n_targets)) however many scans are
    drawn: a producer thread can run it for any duration. The scans are
    exactly those of :func:`generate` with the same arguments (one random
    stream, drawn in the same order).

    Parameters
    ----------
    n_targets : int, default 100
        Targets over the scenario (not all alive at once when ``birth_death``
        > 0).
    scans : int, default 200
        Scans to draw.
    **kwargs
        Keyword only, with their defaults:

        * ``dim=2``: 2 or 3 spatial dimensions.
        * ``dt=0.02``: seconds between scans (finite, > 0).
        * ``pd=0.9``: probability that an alive target is detected in a scan.
        * ``r=1.0``: detection noise, standard deviation per axis (m, >= 0).
        * ``q=1.0``: the targets' white-acceleration noise (spectral density,
          >= 0); crossing pairs fly straight.
        * ``clutter=None``: mean false detections per scan (Poisson); default
          0.2 * n_targets.
        * ``clutter_density=None``: instead of ``clutter``, mean false
          detections per unit area/volume per scan (``clutter =
          clutter_density * extent**dim``).
        * ``patches=0``, ``patch_fraction=0.5``, ``patch_radius=None``: number
          of dense clutter patches (balls of ``patch_radius``, default
          ``spacing / 2``, centres uniform in the region, fixed for the
          scenario); each false detection falls in one of them (chosen
          uniformly, uniform inside it) with probability ``patch_fraction``,
          else uniformly over the region.
        * ``speed=(5.0, 20.0)``: (min, max) initial speed, m/s.
        * ``spacing=200.0``: the region holds one target per ``spacing**dim``:
          its side is ``spacing * n_targets ** (1 / dim)``.
        * ``birth_death=0.2``: fraction of targets born after the start or
          dying before the end.
        * ``crossing=0.1``: fraction of targets flying in pairs that cross
          mid-scenario.
        * ``manoeuvre=0.0``, ``turn_rate=(0.05, 0.3)``, ``leg=(2.0, 6.0)``,
          ``turn_time=(1.0, 5.0)``: fraction of the targets (not of the
          crossing pairs) that manoeuvre: each starts a straight leg of ``leg``
          = (min, max) seconds (uniform), then turns for ``turn_time`` seconds
          at a rate uniform in ``turn_rate`` = (min, max) rad/s, either sense
          (the velocity vector rotates in the horizontal plane, axes 0 and 1;
          speed kept), then another leg, and so on. 0 draws nothing extra: the
          other scenarios keep their seeds' streams.
        * ``seed=0``: the random seed.

    Yields
    ------
    Scan
        Detections (float64 (k, dim)), dt, and the truth behind them.

    Raises
    ------
    ValueError
        For a parameter out of its range (the message names it).

    Notes
    -----
    Thread-safety: a generator; consume it from one thread at a time.
    """
    return _scan_stream({}, n_targets, scans, **kwargs)


def _scan_stream(meta, n_targets=100, scans=200, *, dim=2, dt=0.02, pd=0.9, r=1.0, q=1.0,
             clutter=None, clutter_density=None, patches=0, patch_fraction=0.5,
             patch_radius=None, speed=(5.0, 20.0), spacing=200.0, birth_death=0.2,
             crossing=0.1, manoeuvre=0.0, turn_rate=(0.05, 0.3), leg=(2.0, 6.0),
             turn_time=(1.0, 5.0), seed=0, velocities=None):
    """The scans of a seeded scenario, one :class:`Scan` at a time; fills
    `meta` (the Scenario fields) before the first scan. With `velocities`
    (a list) its one item is set to each scan's truth velocities (rows of
    truth_pos) before the scan is yielded (the radar scenario's range
    rates; nothing drawn for it).

    Parameters
    ----------
    n_targets
        targets over the scenario (not all alive at once when
        ``birth_death`` > 0).
    clutter
        mean false detections per scan (Poisson); default 0.2 * n_targets.
    clutter_density
        instead of ``clutter``: mean false detections per unit
        area/volume per scan (``clutter = clutter_density * extent**dim``).
    patches
        number of dense clutter patches (balls of ``patch_radius``,
        default ``spacing / 2``, centres uniform in the region, fixed for the
        scenario); each false detection falls in one of them (chosen
        uniformly, uniform inside it) with probability ``patch_fraction``,
        else uniformly over the region.
    speed
        (min, max) initial speed, m/s.
    spacing
        the region holds one target per ``spacing**dim``: its side is
        ``spacing * n_targets ** (1 / dim)``.
    birth_death
        fraction of targets born after the start or dying before the end.
    crossing
        fraction of targets flying in pairs that cross mid-scenario.
    manoeuvre
        fraction of the targets (not of the crossing pairs) that
        manoeuvre: each starts a straight leg of ``leg`` = (min, max) seconds
        (uniform), then turns for ``turn_time`` seconds at a rate uniform in
        ``turn_rate`` = (min, max) rad/s, either sense (the velocity vector
        rotates in the horizontal plane, axes 0 and 1; speed kept), then
        another leg, and so on. 0 (default) draws nothing extra: the other
        scenarios keep their seeds' streams.
    """
    if dim not in (2, 3):
        raise ValueError("dim must be 2 or 3")
    # sizes that would exhaust memory or time fail here, before anything is drawn
    _number("n_targets", n_targets, strict=False, integer=True, high=MAX_TARGETS)
    _number("scans", scans, strict=False, integer=True, high=2**62)
    _number("spacing", spacing)
    _number("patches", patches, strict=False, integer=True, high=MAX_TARGETS)
    if not 0.0 <= pd <= 1.0:
        raise ValueError(f"pd must be in [0, 1], not {pd!r}")
    for name, v in (("r", r), ("q", q)):        # (the kernels would take any number)
        if not (0.0 <= v < np.inf):
            raise ValueError(f"{name} must be a finite number >= 0, not {v!r}")
    if not (0.0 < dt < np.inf):
        raise ValueError(f"dt must be a finite number > 0, not {dt!r}")
    if clutter is not None and clutter_density is not None:
        raise ValueError("give clutter or clutter_density, not both")
    if not (0.0 <= patch_fraction <= 1.0) or patches < 0:
        raise ValueError("need patches >= 0 and patch_fraction in [0, 1]")
    if not 0.0 <= speed[0] <= speed[1]:
        raise ValueError(f"speed must be (min, max) with 0 <= min <= max, not {speed!r}")
    if not 0.0 <= manoeuvre <= 1.0:
        raise ValueError(f"manoeuvre must be a fraction in [0, 1], not {manoeuvre!r}")
    for name, (lo, hi) in (("turn_rate", turn_rate), ("leg", leg), ("turn_time", turn_time)):
        if not (0.0 <= lo <= hi and np.isfinite(hi)):
            raise ValueError(f"{name} must be (min, max) with 0 <= min <= max, not {(lo, hi)!r}")
    rng = np.random.default_rng(seed)
    n = int(n_targets)
    extent = spacing * max(n, 1) ** (1.0 / dim)
    if clutter_density is not None:
        lam = float(clutter_density) * extent ** dim
    else:
        lam = 0.2 * n if clutter is None else float(clutter)
    if not (lam >= 0.0 and np.isfinite(lam)):
        raise ValueError(f"clutter must be a finite number >= 0, not {lam!r}")
    half = extent / 2.0
    patch_r = spacing / 2.0 if patch_radius is None else float(patch_radius)
    # drawn only when asked: scenarios without patches keep their seeds' streams
    centres = rng.uniform(-half, half, size=(int(patches), dim)) if patches else np.zeros((0, dim))

    def clutter_points(k):
        """k false detections: uniform, or (probability patch_fraction) in a patch."""
        zc = rng.uniform(-half, half, size=(k, dim))
        if patches:
            inp = rng.random(k) < patch_fraction
            m = int(inp.sum())
            u = rng.normal(size=(m, dim))
            u /= np.linalg.norm(u, axis=1, keepdims=True)
            rad = patch_r * rng.random((m, 1)) ** (1.0 / dim)     # uniform in the ball
            zc[inp] = centres[rng.integers(0, patches, size=m)] + u * rad
        return zc

    def random_velocity(k):
        u = rng.normal(size=(k, dim))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        return u * rng.uniform(speed[0], speed[1], size=(k, 1))

    pos = rng.uniform(-half, half, size=(n, dim))
    vel = random_velocity(n)
    start = np.zeros(n, dtype=np.int64)
    end = np.full(n, scans, dtype=np.int64)
    k_bd = int(round(birth_death * n))
    if k_bd and scans > 4:
        who = rng.choice(n, size=k_bd, replace=False)
        late = who[: k_bd // 2]
        early = who[k_bd // 2:]
        start[late] = rng.integers(1, scans // 2, size=late.size)
        end[early] = rng.integers(scans // 2, scans, size=early.size)
    # Crossing pairs: both at the same point at mid-scenario, moving apart.
    k_cross = int(round(crossing * n)) // 2
    crossing_mask = np.zeros(n, dtype=bool)
    if k_cross:
        pairs = rng.choice(n, size=2 * k_cross, replace=False).reshape(k_cross, 2)
        t_mid = scans * dt / 2.0
        for a, b in pairs:
            c = rng.uniform(-half * 0.8, half * 0.8, size=dim)
            start[a] = start[b] = 0
            end[a] = end[b] = scans
            vel[a] = random_velocity(1)[0]
            vel[b] = random_velocity(1)[0]
            pos[a] = c - vel[a] * t_mid
            pos[b] = c - vel[b] * t_mid
            crossing_mask[a] = crossing_mask[b] = True
    # Manoeuvring targets: phase_end is the scan where the current leg or turn ends.
    turning = np.zeros(n, dtype=bool)
    omega = np.zeros(n)
    phase_end = np.full(n, np.iinfo(np.int64).max)
    k_man = int(round(manoeuvre * n))
    if k_man:
        free = np.flatnonzero(~crossing_mask)
        man = rng.choice(free, size=min(k_man, free.size), replace=False)
        phase_end[man] = start[man] + np.round(rng.uniform(*leg, size=man.size) / dt).astype(np.int64)
    meta.update(dim=dim, dt=dt, extent=extent, clutter=lam, patch_centres=centres, patch_radius=patch_r)
    # The passes over every target and detection of a scan (detection and
    # its noise, the rows' shuffle, the motion) run in _scenario, on a
    # xoshiro256** stream seeded from rng: in numpy they cost the demo's
    # producer thread more CPU than it can spend beside a two-thread tick
    # on two cores (dod/tracker/_scenario.pyx).
    fast = Random(rng)
    sq = np.sqrt(q * dt)
    steady = crossing_mask.view(np.uint8)       # crossing pairs fly straight (no acceleration)
    for s in range(scans):
        nc = int(rng.poisson(lam)) if lam > 0 else 0
        truth = np.empty((n, dim))
        truth_ids = np.empty(n, dtype=np.int64)
        det = np.empty((n + nc, dim))
        det_ids = np.empty(n + nc, dtype=np.int64)
        na, nd = fast.observe(pos, start, end, s, pd, r, truth, truth_ids, det, det_ids)
        det[nd:nd + nc] = clutter_points(nc)
        det_ids[nd:nd + nc] = -1
        det, det_ids = det[:nd + nc], det_ids[:nd + nc]
        fast.shuffle(det, det_ids)
        scan = Scan(det, dt, truth_ids[:na], truth[:na], det_ids)
        if velocities is not None:              # (ids are rows + 1)
            velocities[:] = [vel[truth_ids[:na] - 1]]
        if k_man:
            switch = np.flatnonzero(phase_end <= s)
            if switch.size:
                turning[switch] = ~turning[switch]
                rate = rng.uniform(*turn_rate, size=switch.size) * rng.choice([-1.0, 1.0], size=switch.size)
                omega[switch] = np.where(turning[switch], rate, 0.0)
                span = np.where(turning[switch], rng.uniform(*turn_time, size=switch.size),
                                rng.uniform(*leg, size=switch.size))
                phase_end[switch] = s + np.maximum(1, np.round(span / dt)).astype(np.int64)
        # constant velocity plus white acceleration, turned where manoeuvring
        fast.move(pos, vel, steady, omega, sq, dt)
        yield scan


# ---------------------------------------------------------------- radar scenarios (range-bearing scans)

@dataclass
class RadarScenario(Scenario):
    """A :class:`Scenario` seen by range-bearing sensors: ``detections[s]``
    holds scan s's measurements (range, bearing[, elevation]) and
    ``sensors[s]`` the :class:`dod.tracker.Sensor` that made them."""
    sensors: list = field(default_factory=list)     # per scan: the Sensor of that scan

    def __post_init__(self):
        from dod.tracker.sensor import Sensor
        _per_scan("sensors", self.sensors)
        for i, sn in enumerate(self.sensors):
            if not isinstance(sn, Sensor):
                raise TypeError(f"sensors[{i}] must be a dod.tracker.Sensor, not {type(sn).__name__}")
        super().__post_init__()
        for i, sn in enumerate(self.sensors):
            if sn.dim != self.dim:
                raise ValueError(f"sensors[{i}] is {sn.dim}-D in a {self.dim}-D scenario")

    def _check_lengths(self, lists):
        super()._check_lengths(dict(lists, sensors=self.sensors))

    def __iter__(self):
        """Yields (detections, dt, sensor) per scan: ``tick(z, dt, sensor=sensor)``."""
        for d, s in zip(self.detections, self.sensors):
            yield d, self.dt, s


class RadarScan(NamedTuple):
    """One scan of a radar scenario, as :func:`iter_radar_scans` yields it."""
    detections: np.ndarray      # float64 (k, dim[+1]): range, bearing[, elevation][, range rate], C-contiguous
    dt: float
    sensor: object              # the dod.tracker.Sensor of this scan
    truth_ids: np.ndarray       # int64 (m,)
    truth_pos: np.ndarray       # float64 (m, dim), Cartesian
    det_truth: np.ndarray       # int64 (k,), -1 clutter


def radar_sensors(n_targets, *, dim=2, sensors=2, range_sigma=2.0, bearing_sigma=1e-3,
                  elevation_sigma=1e-3, spacing=200.0, range_rate_sigma=None, range_rate_span=1000.0, **_):
    """The sensors of a radar scenario: one west of the region (at 0.75 of its
    side from the centre), a second south of it; on the ground (z = 0) in 3-D;
    with range_rate_sigma they measure range rate (Sensor's parameters)."""
    from dod.tracker.sensor import Sensor
    if sensors not in (1, 2):
        raise ValueError(f"sensors must be 1 or 2, not {sensors!r}")
    ext = scan_extent(n_targets, dim=dim, spacing=spacing)
    places = [(-0.75 * ext, 0.0), (0.0, -0.75 * ext)][:sensors]
    noise = dict(range_sigma=range_sigma, bearing_sigma=bearing_sigma,
                 elevation_sigma=elevation_sigma if dim == 3 else None, range_rate_sigma=range_rate_sigma,
                 range_rate_span=range_rate_span)
    return [Sensor(p + ((0.0,) if dim == 3 else ()), **noise) for p in places]


def generate_radar(n_targets=100, scans=200, **kwargs):
    """A seeded radar scenario, every scan in memory.

    Parameters
    ----------
    n_targets : int, default 100
        Targets alive at the start.
    scans : int, default 200
        Scans.
    **kwargs
        As for :func:`iter_radar_scans` (the same scans).

    Returns
    -------
    RadarScenario

    Raises
    ------
    ValueError
        As :func:`iter_radar_scans`.

    Notes
    -----
    Thread-safety: a pure function of its arguments.
    """
    meta = {}
    out = list(_radar_stream(meta, n_targets, scans, **kwargs))
    sc = RadarScenario(**meta)
    for scan in out:
        sc.detections.append(scan.detections)
        sc.sensors.append(scan.sensor)
        sc.det_truth.append(scan.det_truth)
        sc.truth_ids.append(scan.truth_ids)
        sc.truth_pos.append(scan.truth_pos)
    return sc


def iter_radar_scans(n_targets=100, scans=200, **kwargs):
    """A seeded radar scenario, one :class:`RadarScan` at a time (bounded memory).

    The targets move as in :func:`iter_scans` with the same seed and motion
    parameters (its truth, drawn from its own stream); one or two sensors
    (:func:`radar_sensors`) take turns, scan s coming from sensor s mod
    ``sensors``. Each alive target is detected with probability ``pd``, its
    range, bearing (and elevation) with Gaussian noise; clutter is Poisson and
    uniform in polar coordinates: range uniform in [0, 1.05 x the farthest
    corner of the region], bearing over the sector the region spans from the
    sensor (elevation over the region's span in 3-D). The noise streams use
    ``seed + 1``.

    Parameters
    ----------
    n_targets : int, default 100
        Targets alive at the start.
    scans : int, default 200
        Scans to yield.
    **kwargs
        ``sensors`` (1 or 2, default 2), ``range_sigma`` (m, default 2.0),
        ``bearing_sigma`` and ``elevation_sigma`` (rad, default 1e-3), ``pd``
        (default 0.9), ``clutter`` (mean false detections a scan, default 0.2
        n_targets), ``sensor_rates`` (default False; True: each sensor
        carries the scenario's ``pd`` and its true clutter density in its
        measurement space, ``clutter`` over its range x bearing [x
        elevation] box, as :class:`dod.tracker.Sensor`'s ``pd`` and
        ``clutter_density``), ``range_rate_sigma`` (m/s, default None: no range rate;
        with it each row gains the range rate of the target's true
        velocity plus noise, clutter's uniform over ``range_rate_span``,
        default 1000 m/s), and :func:`iter_scans`'s dim, dt, q, speed,
        spacing, birth_death, crossing and seed.

    Yields
    ------
    RadarScan
        ``detections``, ``dt``, ``sensor`` (unpack the first three as a
        tick's arguments), then the scan's truth: ``truth_ids``,
        ``truth_pos`` and ``det_truth``.

    Raises
    ------
    ValueError
        For a parameter out of its range (pd outside [0, 1], negative or
        non-finite clutter, a bad sensor noise, or :func:`iter_scans`'s).

    Notes
    -----
    Thread-safety: a generator: one consumer at a time; separate calls share nothing.

    Examples
    --------
    >>> from dod.tracker import Tracker
    >>> from dod.tracker.scenario import iter_radar_scans
    >>> t = Tracker(r=3.0)
    >>> for scan in iter_radar_scans(n_targets=20, scans=50, seed=1):
    ...     t.tick(scan.detections, scan.dt, sensor=scan.sensor)
    >>> t.scans
    50
    """
    return _radar_stream({}, n_targets, scans, **kwargs)


def _radar_stream(meta, n_targets=100, scans=200, *, dim=2, sensors=2, range_sigma=2.0,
                  bearing_sigma=1e-3, elevation_sigma=1e-3, pd=0.9, clutter=None, sensor_rates=False, seed=0,
                  range_rate_sigma=None, range_rate_span=1000.0, **motion):
    from dod.tracker.sensor import to_polar
    if not 0.0 <= pd <= 1.0:
        raise ValueError(f"pd must be in [0, 1], not {pd!r}")
    spacing = motion.get("spacing", 200.0)
    sens = radar_sensors(n_targets, dim=dim, sensors=sensors, range_sigma=range_sigma,
                         bearing_sigma=bearing_sigma, elevation_sigma=elevation_sigma, spacing=spacing,
                         range_rate_sigma=range_rate_sigma, range_rate_span=range_rate_span)
    rate = range_rate_sigma is not None
    vel = [] if rate else None
    lam = 0.2 * int(n_targets) if clutter is None else float(clutter)
    if not (lam >= 0.0 and np.isfinite(lam)):
        raise ValueError(f"clutter must be a finite number >= 0, not {lam!r}")
    truth = _scan_stream(meta, n_targets, scans, dim=dim, pd=1.0, r=1e-9, clutter=0, seed=seed, velocities=vel,
                         **motion)
    rng = np.random.default_rng(seed + 1)
    ext = scan_extent(n_targets, dim=dim, spacing=spacing)
    half = ext / 2.0
    corners = np.array(np.meshgrid(*[[-half, half]] * dim, indexing="ij")).reshape(dim, -1).T
    spans = []                                 # per sensor: (max range, bearing lo/hi, elevation lo/hi)
    for s in sens:
        c = to_polar(corners, s.position)
        spans.append((c[:, 0].max() * 1.05, c[:, 1].min(), c[:, 1].max(),
                      (c[:, 2].min(), c[:, 2].max()) if dim == 3 else None))
    if sensor_rates:                           # the clutter's density over each sensor's (range, angles) box
        def own(s, span):
            rmax, blo, bhi, elev = span
            box = rmax * (bhi - blo) * ((elev[1] - elev[0]) if dim == 3 else 1.0)
            return dataclasses.replace(s, pd=pd, clutter_density=lam / box if lam > 0 else None)
        sens = [own(s, span) for s, span in zip(sens, spans)]
    sigma = np.array([range_sigma, bearing_sigma] + ([elevation_sigma] if dim == 3 else [])
                     + ([range_rate_sigma] if rate else []))
    cols = dim + rate
    first = True
    for s, scan in enumerate(truth):
        if first:
            meta["clutter"] = lam
            first = False
        k = s % len(sens)
        sensor = sens[k]
        rmax, blo, bhi, elev = spans[k]
        tp = scan.truth_pos
        det_mask = rng.random(tp.shape[0]) < pd
        z = to_polar(tp[det_mask], sensor.position, vel[0][det_mask] if rate else None) \
            + rng.normal(size=(int(det_mask.sum()), cols)) * sigma
        z[:, 0] = np.abs(z[:, 0])               # a range is never negative
        nc = rng.poisson(lam) if lam > 0 else 0
        zc = np.empty((nc, cols))
        zc[:, 0] = rng.uniform(0.0, rmax, size=nc)
        zc[:, 1] = rng.uniform(blo, bhi, size=nc)
        if dim == 3:
            zc[:, 2] = rng.uniform(elev[0], elev[1], size=nc)
        if rate:
            zc[:, dim] = rng.uniform(-0.5 * range_rate_span, 0.5 * range_rate_span, size=nc)
        allz = np.concatenate([z, zc])
        allt = np.concatenate([scan.truth_ids[det_mask], np.full(nc, -1, dtype=np.int64)])
        perm = rng.permutation(allz.shape[0])
        yield RadarScan(np.ascontiguousarray(allz[perm]), scan.dt, sensor, scan.truth_ids, tp, allt[perm])
