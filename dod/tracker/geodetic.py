"""Geodetic positions (WGS-84 latitude, longitude, altitude) to the tracker's local plane and back.

The tracker works in metres of a local Cartesian frame. Real reports (ADS-B,
AIS, a radar's geodetic output) come as WGS-84 latitude, longitude and
height. :class:`LocalFrame` fixes a reference point and converts both ways
through the East-North-Up (ENU) frame tangent to the ellipsoid there: x is
east, y north, z up, in metres. A 2-D tracker takes (east, north); a 3-D one
(east, north, up).

>>> from dod.tracker.geodetic import LocalFrame
>>> frame = LocalFrame(47.4647, 8.5492, 432.0)            # Zurich airport
>>> xy = frame.to_local([47.5, 47.4], [8.6, 8.5])          # (k, 2): east, north (m), for a 2-D tracker
>>> xy.round(1).tolist()
[[3827.7, 3926.2], [-3714.2, -7192.6]]
>>> enu = frame.to_local([47.5], [8.6], [3000.0])           # (k, 3): east, north, up
>>> lat, lon, alt = frame.to_geodetic(enu)                 # and back
>>> round(float(lat[0]), 12), round(float(lon[0]), 12), round(float(alt[0]), 6)
(47.5, 8.6, 3000.0)

The geodesy is pymap3d's (``geodetic2enu`` and ``enu2geodetic``), not
written here. Why pymap3d rather than pyproj (measured with pymap3d 3.2 and
pyproj 3.7 on 10,000 points within 100 km of a reference):

* size: pure Python with no required dependency, a 65 kB wheel (0.7 MB
  installed), against pyproj's 9.5 MB wheel (33 MB installed: PROJ and its
  data bundled); Stone Soup installs pymap3d anyway;
* the API: its functions are the ENU conversions themselves; pyproj needs a
  geocentric-to-topocentric PROJ pipeline for the same result;
* speed: numpy arrays in whole, about 0.15 us a point forward and 0.25 us
  back, against pyproj's 0.12 us: both far below a scan's budget;
* accuracy: both agree to 3e-9 m; pymap3d's round trip returns latitude
  and longitude to 3e-14 degrees and height to 3e-9 m (its inverse is a
  closed form, You 2000). tests/test_geodetic.py checks the round trip and
  the ellipsoid written out by hand.

The tangent plane is not the ellipsoid: a point 100 km from the reference
at zero altitude is ~785 m below the plane (``d**2 / 2R``). A 2-D tracker
that drops ``up`` sees horizontal distances within 1e-4 of the true ones up
to ~100 km; beyond that choose a reference nearer the data, or track in 3-D.

pymap3d is an optional dependency: ``pip install 'dod[geo]'``. Without it,
importing this module works and each conversion raises ImportError naming
the extra.
"""
import math
from dataclasses import dataclass

import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays

__all__ = ["LocalFrame", "require_pymap3d"]


def require_pymap3d():
    """pymap3d, imported, or an ImportError that names the extra that installs it.

    Returns
    -------
    module
        The pymap3d package.

    Raises
    ------
    ImportError
        When pymap3d is not installed.

    Notes
    -----
    Thread-safety: any thread (an import).
    """
    try:
        import pymap3d
    except ImportError as e:
        raise ImportError("dod.tracker.geodetic needs pymap3d: pip install 'dod[geo]' "
                          f"(or pip install pymap3d): {e}") from None
    return pymap3d


def _coordinate(v, name, n=None):
    a = input_array(v, np.float64, name, 1) if np.ndim(v) else input_array([v], np.float64, name, 1)
    if n is not None and a.size not in (1, n):
        raise ValueError(f"{name} must have {n} elements (or 1), not {a.size}")
    return a


@dataclass(frozen=True)
class LocalFrame:
    """LocalFrame(latitude, longitude, altitude=0.0)

    The East-North-Up frame tangent to the WGS-84 ellipsoid at a reference point.

    Parameters
    ----------
    latitude : float
        Geodetic latitude of the reference point, degrees in [-90, 90].
    longitude : float
        Longitude, degrees in [-180, 360).
    altitude : float, default 0.0
        Height above the ellipsoid (m), finite.

    Attributes
    ----------
    latitude, longitude, altitude : float

    Raises
    ------
    ValueError
        For a coordinate that is not a finite number in its range.

    Notes
    -----
    Immutable. Thread-safety: share it freely; its methods are pure functions.
    """

    latitude: float
    longitude: float
    altitude: float = 0.0

    def __post_init__(self):
        for name, lo, hi in (("latitude", -90.0, 90.0), ("longitude", -180.0, 360.0),
                             ("altitude", -math.inf, math.inf)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) \
                    or not math.isfinite(v) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a finite number in [{lo}, {hi}], not {v!r}")
            object.__setattr__(self, name, float(v))

    @classmethod
    def around(cls, latitude, longitude, altitude=None):
        """The frame at the middle of a set of positions (its bounding box's centre, on the ground).

        Parameters
        ----------
        latitude, longitude : array_like
            Degrees, finite, at least one point.
        altitude : array_like, optional
            Heights (m); the frame's altitude is their lowest value (0.0 when not given).

        Returns
        -------
        LocalFrame

        Raises
        ------
        ValueError
            For no points, or coordinates that are not finite or not in range.

        Notes
        -----
        The longitudes' middle is taken on the shorter side of the globe, so data
        across the antimeridian gets a frame among it. Thread-safety: a pure function.
        """
        lat = _coordinate(latitude, "latitude")
        lon = _coordinate(longitude, "longitude", lat.size)
        if lat.size == 0 or not (np.isfinite(lat).all() and np.isfinite(lon).all()):
            raise ValueError("LocalFrame.around needs at least one finite position")
        w = np.unwrap(np.radians(np.sort(lon)))
        mid = math.degrees(0.5 * (w.min() + w.max()))
        mid = (mid + 180.0) % 360.0 - 180.0
        alt = 0.0
        if altitude is not None:
            h = _coordinate(altitude, "altitude")
            h = h[np.isfinite(h)]
            alt = float(h.min()) if h.size else 0.0
        return cls(0.5 * float(lat.min() + lat.max()), mid, alt)

    def to_local(self, latitude, longitude, altitude=None, dim=None):
        """Local positions (east, north[, up]) in metres of geodetic positions.

        Parameters
        ----------
        latitude, longitude : array_like
            Degrees, shape (k,) (or scalars).
        altitude : array_like, optional
            Heights above the ellipsoid (m), (k,) or one number; the frame's
            altitude when not given (the points then lie on the frame's height).
        dim : {2, 3}, optional
            Columns of the result: 2 (east, north) or 3 (east, north, up);
            default 3 when `altitude` is given, else 2.

        Returns
        -------
        numpy.ndarray
            float64 (k, dim), C-contiguous: what ``Tracker.tick`` takes.

        Raises
        ------
        ImportError
            Without pymap3d (``pip install 'dod[geo]'``).
        ValueError
            For arrays of different lengths, a latitude outside [-90, 90] or a
            non-finite coordinate, or a dim other than 2 or 3.

        Notes
        -----
        Thread-safety: a pure function.
        """
        pm = require_pymap3d()
        lat = _coordinate(latitude, "latitude")
        lon = _coordinate(longitude, "longitude", lat.size)
        h = _coordinate(self.altitude if altitude is None else altitude, "altitude", lat.size)
        if dim is None:
            dim = 2 if altitude is None else 3
        if dim not in (2, 3):
            raise ValueError(f"dim must be 2 or 3, not {dim!r}")
        for name, a in (("latitude", lat), ("longitude", lon), ("altitude", h)):
            if not np.isfinite(a).all():
                raise ValueError(f"{name} must be finite")
        if (np.abs(lat) > 90.0).any():
            raise ValueError("latitude must lie in [-90, 90] degrees")
        e, n, u = pm.geodetic2enu(lat, lon, h, self.latitude, self.longitude, self.altitude)
        out = np.empty((max(lat.size, lon.size, h.size), dim), np.float64)
        out[:, 0] = e
        out[:, 1] = n
        if dim == 3:
            out[:, 2] = u
        return out

    def to_geodetic(self, points):
        """Geodetic positions of local points (the inverse of :meth:`to_local`).

        Parameters
        ----------
        points : array_like
            (k, 2) east, north (taken at the frame's ``up`` = 0) or (k, 3)
            east, north, up, in metres, finite.

        Returns
        -------
        tuple of numpy.ndarray
            ``(latitude, longitude, altitude)``: degrees, degrees (in
            [-180, 180)) and metres above the ellipsoid, each float64 (k,).

        Raises
        ------
        ImportError
            Without pymap3d (``pip install 'dod[geo]'``).
        TypeError, ValueError
            For points that are not a finite (k, 2) or (k, 3) array of numbers.

        Notes
        -----
        A 2-D point maps to the tangent plane's point, whose height above the
        ellipsoid grows with its distance from the reference (see the module's
        notes). Thread-safety: a pure function.
        """
        pm = require_pymap3d()
        p = input_array(points, np.float64, "points", 2)
        if p.shape[1] not in (2, 3):
            raise ValueError(f"points must have 2 or 3 columns, not {p.shape[1]}")
        if not np.isfinite(p).all():
            raise ValueError("points must be finite")
        up = p[:, 2] if p.shape[1] == 3 else np.zeros(p.shape[0])
        lat, lon, alt = pm.enu2geodetic(p[:, 0], p[:, 1], up, self.latitude, self.longitude, self.altitude)
        lon = (np.asarray(lon, np.float64) + 180.0) % 360.0 - 180.0
        return (np.asarray(lat, np.float64).reshape(-1), lon.reshape(-1),
                np.asarray(alt, np.float64).reshape(-1))
