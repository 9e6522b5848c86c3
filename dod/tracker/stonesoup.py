"""Stone Soup in and out: its detections and sensors into a tick, dod's tracks back as its ``Track`` objects.

`Stone Soup <https://stonesoup.readthedocs.io>`_ is the open framework of the
tracking community: simulators, detectors, trackers and metrics built from
Python objects. dod's tick takes numpy arrays. This module joins the two:

* :func:`scan_from_detections`: one scan of Stone Soup detections (a set or
  list of ``Detection`` objects sharing one measurement model) to the
  ``(detections, sensor)`` pair ``Tracker.tick`` takes. A ``LinearGaussian``
  model gives Cartesian rows (sensor None); ``CartesianToBearingRange`` and
  ``CartesianToElevationBearingRange`` give polar rows and the
  :class:`~dod.tracker.Sensor` the model describes (its translation offset,
  its noise standard deviations). Stone Soup orders a polar measurement
  (bearing, range) or (elevation, bearing, range); dod's range-bearing scans
  are (range, bearing[, elevation]): the columns come back reversed, ready
  for the tick. A sensor turned about the vertical axis (``rotation_offset``
  yaw) has its bearings turned back into the tracker's frame; one tilted
  (roll or pitch) is refused.
* :class:`TrackRecorder`: after each tick, :meth:`~TrackRecorder.record`
  copies the confirmed tracks (ids, state, covariance) into numpy buffers
  (no Stone Soup object per scan); :meth:`~TrackRecorder.tracks` builds the
  Stone Soup ``Track`` objects once, at the end: one per track id, a
  ``GaussianState`` per scan it was confirmed in, with its timestamp, in
  Stone Soup's state order (x, vx, y, vy[, z, vz]) and covariance. They go
  straight into Stone Soup's metric generators (OSPA, GOSPA, SIAP) and
  plotters.

>>> import datetime
>>> import numpy as np
>>> from stonesoup.models.measurement.linear import LinearGaussian
>>> from stonesoup.types.detection import Detection
>>> from dod.tracker import Tracker
>>> from dod.tracker.stonesoup import TrackRecorder, cartesian_sigma, scan_from_detections
>>> model = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2))
>>> tracker = Tracker(r=cartesian_sigma(model), confirmation="m_of_n", initiation="single")
>>> recorder = TrackRecorder()
>>> for k in range(5):                     # one target at 1 m/s along x, a scan a second
...     t = datetime.datetime(2024, 1, 1, 12, 0, k)
...     scan = {Detection(np.array([[float(k)], [5.0]]), timestamp=t, measurement_model=model)}
...     z, sensor = scan_from_detections(scan)  # z (1, 2), sensor None: Cartesian
...     tracker.tick(z, 1.0, sensor=sensor)
...     recorder.record(tracker, t)
>>> [(track.id, len(track)) for track in recorder.tracks()]   # confirmed at the third scan
[('1', 3)]

Speed: a scan of 200 Cartesian detections converts in tens of microseconds,
200 polar ones (whose bearings are Python objects) in about a hundred:
``asv_bench/benchmarks/bench_stonesoup.py`` times both against the plain
loop that reads each detection's state vector element by element (several
milliseconds). What makes the difference: each detection's state vector is
read through Stone Soup's attribute storage once, Cartesian vectors are
joined as raw bytes, polar ones converted by one numpy cast.

Stone Soup is an optional dependency: ``pip install 'dod[stonesoup]'``.
Without it, importing this module works; :func:`scan_from_detections` needs
nothing from Stone Soup but its objects, :meth:`TrackRecorder.tracks` raises
ImportError naming the extra.
"""
import datetime
import math
import operator

import numpy as np

from dod.tracker.sensor import Sensor

__all__ = ["scan_from_detections", "sensor_from_model", "cartesian_sigma", "TrackRecorder",
           "require_stonesoup", "state_order"]


def require_stonesoup():
    """The stonesoup package, imported, or an ImportError naming the extra that installs it.

    Returns
    -------
    module
        The stonesoup package.

    Raises
    ------
    ImportError
        When Stone Soup is not installed.

    Notes
    -----
    Thread-safety: any thread (an import).
    """
    try:
        import stonesoup
        import stonesoup.types.state      # noqa: F401  (the submodules this module uses)
        import stonesoup.types.track      # noqa: F401
    except ImportError as e:
        raise ImportError("this needs Stone Soup: pip install 'dod[stonesoup]' "
                          f"(or pip install stonesoup): {e}") from None
    return stonesoup


def state_order(dim):
    """Where each of Stone Soup's state components sits in dod's state vector.

    dod's state is (x, y[, z], vx, vy[, vz]), Stone Soup's constant-velocity
    state (x, vx, y, vy[, z, vz]): ``dod_state[state_order(dim)]`` is Stone
    Soup's.

    Parameters
    ----------
    dim : {2, 3}
        The tracker's dimension.

    Returns
    -------
    numpy.ndarray
        intp (2 * dim,): ``[0, dim, 1, dim + 1, ...]``.

    Raises
    ------
    ValueError
        For a dim other than 2 or 3.

    Notes
    -----
    Thread-safety: a pure function.
    """
    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, not {dim!r}")
    i = np.arange(2 * dim)
    return (i // 2 + (i % 2) * dim).astype(np.intp)


def _noise(model, n):
    """The model's measurement noise covariance: n x n, finite, diagonal."""
    R = np.asarray(model.covar(), dtype=np.float64)
    if R.shape != (n, n) or not np.isfinite(R).all():
        raise ValueError(f"the measurement model's noise covariance must be a finite {n} x {n} matrix")
    if np.count_nonzero(R - np.diag(np.diag(R))):
        raise ValueError("dod's measurement models take independent noise per component: "
                         "the model's noise covariance must be diagonal")
    d = np.diag(R)
    if not (d > 0).all():
        raise ValueError("the measurement model's noise variances must be positive")
    return d


def _kind(model):
    """'cartesian', 'polar2' or 'polar3' for the models dod reads; ValueError for another."""
    name = type(model).__name__
    for cls in type(model).__mro__:
        if cls.__name__ == "LinearGaussian" and cls.__module__.startswith("stonesoup."):
            return "cartesian"
        if cls.__name__ == "CartesianToBearingRange" and cls.__module__.startswith("stonesoup."):
            return "polar2"
        if cls.__name__ == "CartesianToElevationBearingRange" and cls.__module__.startswith("stonesoup."):
            return "polar3"
    raise ValueError(f"dod reads LinearGaussian, CartesianToBearingRange and CartesianToElevationBearingRange "
                     f"measurement models, not {name}")


def _yaw(model):
    rot = np.asarray(model.rotation_offset, dtype=np.float64).reshape(-1)
    if rot.size != 3 or not np.isfinite(rot).all():
        raise ValueError("the model's rotation_offset must be 3 finite angles")
    if rot[0] != 0.0 or rot[1] != 0.0:
        raise ValueError("a sensor tilted (roll or pitch in rotation_offset) is not a dod Sensor: "
                         "only a turn about the vertical axis (yaw) converts")
    return float(rot[2])


def sensor_from_model(model):
    """The :class:`~dod.tracker.Sensor` a Stone Soup polar measurement model describes.

    Parameters
    ----------
    model : stonesoup.models.measurement.nonlinear.CartesianToBearingRange or CartesianToElevationBearingRange
        Its ``translation_offset`` is the sensor's position, its (diagonal)
        ``noise_covar`` the variances of bearing and range (and elevation);
        ``mapping`` names the state's position components, 2 or 3 of them.

    Returns
    -------
    dod.tracker.Sensor

    Raises
    ------
    ValueError
        For another model, a noise covariance that is not diagonal with
        positive variances, or a tilted sensor (roll or pitch).

    Notes
    -----
    A yaw in ``rotation_offset`` is not part of a Sensor (bearings from the
    x axis): :func:`scan_from_detections` turns the bearings instead.
    Thread-safety: a pure function of the model (read it while no one changes it).
    """
    kind = _kind(model)
    if kind == "cartesian":
        raise ValueError("a LinearGaussian model measures positions: no range-bearing Sensor "
                         "(its scans tick with sensor=None)")
    _yaw(model)
    dim = 2 if kind == "polar2" else 3
    var = _noise(model, dim)
    pos = np.asarray(model.translation_offset, dtype=np.float64).reshape(-1)
    if pos.size < dim:
        raise ValueError(f"the model's translation_offset must have {dim} elements")
    if dim == 2:      # Stone Soup: (bearing, range)
        return Sensor(pos[:2], range_sigma=math.sqrt(var[1]), bearing_sigma=math.sqrt(var[0]))
    # (elevation, bearing, range)
    return Sensor(pos[:3], range_sigma=math.sqrt(var[2]), bearing_sigma=math.sqrt(var[1]),
                  elevation_sigma=math.sqrt(var[0]))


def cartesian_sigma(model):
    """The per-axis noise standard deviation of a ``LinearGaussian`` model: the tracker's ``r``.

    Parameters
    ----------
    model : stonesoup.models.measurement.linear.LinearGaussian
        Measuring 2 or 3 position components with one variance on every axis.

    Returns
    -------
    float
        ``sqrt`` of that variance: ``TrackerConfig(r=cartesian_sigma(model))``.

    Raises
    ------
    ValueError
        For another model, another dimension, or a noise that is not one
        positive variance on the diagonal (dod's Cartesian noise is isotropic).

    Notes
    -----
    Thread-safety: a pure function of the model.
    """
    if _kind(model) != "cartesian":
        raise ValueError("cartesian_sigma takes a LinearGaussian model")
    n = len(model.mapping)
    if n not in (2, 3):
        raise ValueError(f"dod tracks 2 or 3 position components, the model measures {n}")
    d = _noise(model, n)
    if not (d == d[0]).all():
        raise ValueError(f"dod's Cartesian measurement noise is one variance on every axis, not {d.tolist()}")
    return math.sqrt(float(d[0]))


_ATTRS = {}
_LAST_POLAR = (None, None, None, 0.0)       # model, its parameters' bytes, Sensor, yaw


def _polar(model):
    """sensor_from_model and the yaw, remembered for the last model while its parameters stay the same
    (a detector's scans share one model: the Sensor is made once, not per scan)."""
    global _LAST_POLAR
    key = b"|".join(np.asarray(v, dtype=np.float64).tobytes()
                    for v in (model.covar(), model.translation_offset, model.rotation_offset))
    last = _LAST_POLAR
    if last[0] is model and last[1] == key:
        return last[2], last[3]
    sensor, yaw = sensor_from_model(model), _yaw(model)
    _LAST_POLAR = (model, key, sensor, yaw)
    return sensor, yaw
_DTYPE = operator.attrgetter("dtype")


def _reader(cls, name):
    """A fast reader of attribute `name` of instances of `cls`.

    Stone Soup's ``Property`` stores a plain attribute's value under
    ``_property_<name>`` and its descriptor costs most of a microsecond per
    read; where the class leaves the property plain (no getter of its own),
    the storage is read directly, else the public attribute.
    """
    key = (cls, name)
    r = _ATTRS.get(key)
    if r is None:
        prop = getattr(cls, name, None)
        plain = (getattr(prop, "_getter", True) is None
                 and getattr(prop, "_property_name", None) == f"_property_{name}")
        r = operator.attrgetter(f"_property_{name}" if plain else name)
        _ATTRS[key] = r
    return r


def _read(dets, classes, name):
    if len(classes) == 1:
        return list(map(_reader(next(iter(classes)), name), dets))
    return [_reader(type(d), name)(d) for d in dets]


def scan_from_detections(detections, model=None):
    """One scan of Stone Soup detections as the ``(detections, sensor)`` a tick takes.

    Parameters
    ----------
    detections : iterable of stonesoup.types.detection.Detection
        One sensor's scan: a set (a detector's output) or any iterable; row i
        of the result is the i-th detection in iteration order (pass a list
        to keep an order you know). Clutter and true detections alike.
    model : stonesoup measurement model, optional
        The measurement model of detections that carry none (``None`` in
        their ``measurement_model``); every detection that carries one must
        carry this same object, or, when `model` is not given, one shared
        object.

    Returns
    -------
    tuple
        ``(z, sensor)``: z float64 (k, m), C-contiguous; for ``LinearGaussian``
        the measured position components (``mapping`` order) and sensor
        None; for the polar models (range, bearing) or (range, bearing,
        elevation), bearings from the x axis (a yaw in the model's
        ``rotation_offset`` added back), and the :class:`~dod.tracker.Sensor`
        of :func:`sensor_from_model`. An empty scan gives a (0, m) array when
        `model` is given, else (0, 2) and None.

    Raises
    ------
    ValueError
        For detections of different measurement models (one scan is one
        sensor's), none at all where `model` is not given, a model dod does
        not read (see :func:`sensor_from_model`), or state vectors that are
        not m finite numbers each.

    Notes
    -----
    Reads the detections, changes nothing. Thread-safety: a pure function
    (the detections and model must not change meanwhile).
    """
    dets = detections if isinstance(detections, list) else list(detections)
    classes = set(map(type, dets))
    if dets:
        models = _read(dets, classes, "measurement_model")
        found = models[0]
        # list.count compares by identity first: one C loop when all share one model.
        if models.count(found) != len(models):
            distinct = {id(m): m for m in models}
            if model is not None:
                distinct.pop(id(None), None)
                distinct.setdefault(id(model), model)
            if len(distinct) != 1:
                raise ValueError(f"the detections carry {len(distinct)} different measurement models: "
                                 "one scan is one sensor's, give each its own tick")
            found = next(iter(distinct.values()))
        if found is None:
            found = model
        elif model is not None and found is not model:
            raise ValueError("the detections' measurement model is not the model given")
        model = found
    if model is None:
        if dets:
            raise ValueError("the detections carry no measurement model: give model=")
        return np.zeros((0, 2)), None
    kind = _kind(model)
    m = len(model.mapping) if kind == "cartesian" else (2 if kind == "polar2" else 3)
    if kind == "cartesian" and m not in (2, 3):
        raise ValueError(f"dod tracks 2 or 3 position components, the model measures {m}")
    sensor, yaw = (None, 0.0) if kind == "cartesian" else _polar(model)
    k = len(dets)
    if k == 0:
        return np.zeros((0, m)), sensor
    vectors = _read(dets, classes, "state_vector")
    z = None
    f8 = np.dtype(np.float64)
    if kind == "cartesian" and list(map(_DTYPE, vectors)).count(f8) == k:
        # The state vectors' bytes joined: one copy, no per-element Python object.
        try:
            raw = b"".join(vectors)
        except (TypeError, ValueError, BufferError):      # not contiguous
            raw = None
        if raw is not None and len(raw) == 8 * k * m:
            z = np.frombuffer(raw, np.float64).reshape(k, m).copy()
    if z is None:
        try:
            # Polar vectors hold Bearing objects: one numpy cast calls their float().
            stacked = np.concatenate(vectors, axis=1, dtype=np.float64, casting="unsafe")
        except (TypeError, ValueError) as e:
            raise ValueError(f"the detections' state vectors must be {m} numbers each ({e})") from None
        if stacked.shape != (m, k):
            raise ValueError(f"the detections' state vectors must be {m} numbers each, "
                             f"together {(m, k)}, not {stacked.shape}")
        z = np.ascontiguousarray(stacked.T[:, ::-1] if kind != "cartesian" else stacked.T)
    if not np.isfinite(z).all():
        raise ValueError("the detections' state vectors must be finite")
    if yaw != 0.0:
        z[:, 1] += yaw
    return z, sensor


def _timestamp(time, epoch):
    if isinstance(time, datetime.datetime):
        return time
    if isinstance(time, bool) or not isinstance(time, (int, float, np.integer, np.floating)) \
            or not math.isfinite(time):
        raise TypeError(f"time must be a datetime or a finite number of seconds, not {time!r}")
    return epoch + datetime.timedelta(seconds=float(time))


class TrackRecorder:
    """TrackRecorder(epoch=datetime(1970, 1, 1))

    The confirmed tracks of every scan, kept for Stone Soup's metrics and plots.

    :meth:`record` copies the tracker's confirmed rows (numpy, microseconds);
    :meth:`tracks` turns what it recorded into Stone Soup ``Track`` objects
    once, when they are wanted.

    Parameters
    ----------
    epoch : datetime.datetime, default 1970-01-01
        The timestamp of time 0 for scans recorded with a time in seconds
        (a number); a datetime given to :meth:`record` is kept as it is.

    Attributes
    ----------
    scans : int
        Scans recorded so far.

    Raises
    ------
    TypeError
        For an epoch that is not a datetime.

    Notes
    -----
    Memory: every recorded row is kept (ids, state and covariance: 8 * (1 +
    2d + 4d^2) bytes a track a scan, 168 in 2-D) until the recorder is dropped.
    Thread-safety: one thread at a time; record between ticks (the tracker's
    views change during one).
    """

    def __init__(self, epoch=datetime.datetime(1970, 1, 1)):
        if not isinstance(epoch, datetime.datetime):
            raise TypeError(f"epoch must be a datetime.datetime, not {type(epoch).__name__}")
        self.epoch = epoch
        self._times = []
        self._ids = []
        self._x = []
        self._P = []
        self._dim = None

    @property
    def scans(self):
        """Scans recorded so far."""
        return len(self._times)

    def record(self, tracker, time):
        """Copy the tracker's confirmed tracks, as of the scan at `time`.

        Parameters
        ----------
        tracker : dod.tracker.Tracker
            After its tick of that scan.
        time : datetime.datetime or float
            The scan's time: a datetime (Stone Soup's detectors give one) or
            seconds after the recorder's epoch.

        Raises
        ------
        TypeError
            For a time that is neither.
        ValueError
            For a tracker of another dimension than the scans recorded before.

        Notes
        -----
        Thread-safety: between the tracker's ticks, one thread at a time.
        """
        ts = _timestamp(time, self.epoch)
        dim = tracker.config.dim
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise ValueError(f"a {dim}-D tracker after {self._dim}-D scans")
        mask = tracker.confirmed
        self._times.append(ts)
        self._ids.append(tracker.ids[mask].copy())
        self._x.append(tracker.column("x")[mask, :2 * dim].copy())
        self._P.append(tracker.column("P")[mask].copy())

    def tracks(self):
        """The recorded tracks as Stone Soup tracks.

        Returns
        -------
        set of stonesoup.types.track.Track
            One per track id (``Track.id`` is the id as a str), its
            ``GaussianState`` s in time order: state (x, vx, y, vy[, z, vz]),
            full covariance in the same order, the scan's timestamp.

        Raises
        ------
        ImportError
            Without Stone Soup (``pip install 'dod[stonesoup]'``).

        Notes
        -----
        Builds new objects each call (Stone Soup's are mutable).
        Thread-safety: one thread at a time, as :meth:`record`.
        """
        require_stonesoup()
        from stonesoup.types.array import CovarianceMatrix, StateVector
        from stonesoup.types.state import GaussianState
        from stonesoup.types.track import Track

        from dod.tracker.covariance import unpack_covariance
        if self._dim is None:
            return set()
        order = state_order(self._dim)
        by_id = {}
        for ts, ids, x, P in zip(self._times, self._ids, self._x, self._P):
            if not ids.size:
                continue
            xs = x[:, order]
            Ps = unpack_covariance(P)[:, order][:, :, order]
            for i, tid in enumerate(ids.tolist()):
                state = GaussianState(StateVector(xs[i]), CovarianceMatrix(Ps[i]), timestamp=ts)
                track = by_id.get(tid)
                if track is None:
                    by_id[tid] = track = Track(id=str(tid))
                track.append(state)
        return set(by_id.values())
