"""Real surveillance reports (ADS-B, AIS) read from files and cut into scans for the tracker.

A file of position reports becomes :class:`Reports`: time-ordered arrays of
time (Unix seconds), the reporting object's id, WGS-84 latitude, longitude
and altitude. :meth:`Reports.scans` converts them to the tracker's local
plane (:class:`~dod.tracker.geodetic.LocalFrame`) and cuts them into scans
of a fixed period, ready for ``Tracker.tick``.

Two formats are read:

.. not run: a table of the file's columns, not code

**OpenSky state vectors** (:func:`read_opensky`), the CSV of the OpenSky
Network's historical data set (``states_YYYY-MM-DD-HH.csv``; also what its
Impala shell exports from ``state_vectors_data4``): a header row, then one
row per aircraft per snapshot (every 10 s), the columns (by name, in any
order; only the first four are required)::

    time           snapshot time, Unix seconds (integer)
    icao24         the transponder's 24-bit address, 6 hex digits (the id)
    lat, lon       WGS-84 degrees; empty when the aircraft sent no position
    velocity       ground speed (m/s), heading: track angle (degrees from north)
    lastposupdate  Unix seconds (float) of the position itself (<= time)
    geoaltitude    GNSS height (m); empty when unknown
    baroaltitude   barometric altitude (m); used when geoaltitude is empty
    vertrate, callsign, onground, alert, spi, squawk,
    lastcontact    read past (not needed to track)

A row without a position is skipped; a position repeated from an earlier
snapshot (the same ``lastposupdate``: OpenSky carries the last position
forward until a new one arrives) is kept once, at its own time.

.. not run: a table of the file's columns, not code

**AIS** (:func:`read_ais`), the CSV of the US Marine Cadastre
(``AIS_YYYY_MM_DD.csv``, the common export of decoded AIS position
reports; many other tools write the same columns): a header row, then one
row per position report::

    MMSI           the vessel's 9-digit identity (the id)
    BaseDateTime   report time, UTC, ISO 8601 (2023-01-01T00:00:04)
    LAT, LON       WGS-84 degrees; 91 / 181 mean "not available"
    SOG, COG       speed (knots) and course (degrees) over ground;
                   102.3 / 360 mean "not available"
    Heading, VesselName, IMO, CallSign, VesselType, Status,
    Length, Width, Draft, Cargo, TransceiverClass   read past

Column names are matched without regard to case; ``Latitude``,
``Longitude`` and ``Timestamp`` are accepted for ``LAT``, ``LON`` and
``BaseDateTime``. A ship has no altitude (0 m). Reports come asynchronously
(every 2-10 s under way, every 3 min at anchor): a scan holds each vessel's
latest report in its period.

Synthetic samples of both formats (a few aircraft near Zurich, a few
vessels off Los Angeles, a few minutes each; values realistic, not
recorded) are in ``examples/data/``; ``examples/track_adsb.py`` tracks one.
"""
import csv
import datetime
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Reports", "read_opensky", "read_ais", "KNOT"]

#: One knot in m/s (AIS speeds are in knots).
KNOT = 1852.0 / 3600.0


@dataclass(frozen=True)
class Reports:
    """Reports(time, ids, latitude, longitude, altitude, speed=None, course=None, source="")

    Position reports in time order, one row each.

    Parameters
    ----------
    time : numpy.ndarray
        float64 (n,), Unix seconds, non-decreasing.
    ids : numpy.ndarray
        (n,) str: the reporting object (ICAO address, MMSI).
    latitude, longitude : numpy.ndarray
        float64 (n,), WGS-84 degrees.
    altitude : numpy.ndarray
        float64 (n,), metres above the ellipsoid; nan where not known.
    speed, course : numpy.ndarray, optional
        float64 (n,): the reported ground speed (m/s) and course over ground
        (degrees clockwise from north); nan where not known (default: all).
    source : str, default ""
        Where the reports came from (a file name).

    Raises
    ------
    ValueError
        For arrays of different lengths, times that are not finite or
        decrease, or coordinates that are not finite in range.

    Notes
    -----
    Thread-safety: immutable once made (the arrays are made read-only);
    share it freely.
    """

    time: np.ndarray
    ids: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray
    altitude: np.ndarray
    speed: np.ndarray = None
    course: np.ndarray = None
    source: str = ""

    def __post_init__(self):
        cols = {}
        ids = np.array(self.ids, dtype=str).reshape(-1)
        n = ids.size
        for name in ("time", "latitude", "longitude", "altitude", "speed", "course"):
            v = getattr(self, name)
            cols[name] = np.full(n, np.nan) if v is None else np.array(v, dtype=np.float64).reshape(-1)
        if any(a.size != n for a in cols.values()):
            raise ValueError(f"reports need one time, id, latitude, longitude, altitude, speed and course each, "
                             f"not {[cols[k].size for k in cols]} and {n} ids")
        t = cols["time"]
        if not np.isfinite(t).all() or (n > 1 and (np.diff(t) < 0).any()):
            raise ValueError("report times must be finite and in order")
        lat, lon = cols["latitude"], cols["longitude"]
        if not (np.isfinite(lat).all() and np.isfinite(lon).all()) or (np.abs(lat) > 90).any() \
                or (np.abs(lon) > 180).any():
            raise ValueError("report positions must be finite, latitude in [-90, 90], longitude in [-180, 180]")
        for name, a in cols.items():
            a.flags.writeable = False
            object.__setattr__(self, name, a)
        ids.flags.writeable = False
        object.__setattr__(self, "ids", ids)

    def __len__(self):
        return int(self.ids.size)

    @property
    def objects(self):
        """The distinct ids, sorted (a new array)."""
        return np.unique(self.ids)

    def scans(self, frame, period, dim=2, extrapolate=True, start=None):
        """The reports as scans of the tracker: ``(time, ids, positions)`` per period.

        Parameters
        ----------
        frame : dod.tracker.geodetic.LocalFrame
            The local plane positions are given in.
        period : float
            The scan period (s, > 0). Scan j covers the reports in ``[t0 + j
            period, t0 + (j + 1) period)`` (t0 is `start`) and
            holds each object's latest report there; its time is the window's
            end. Windows without reports give empty scans (the tracker then
            counts misses), so consecutive scans are ``period`` apart.
        dim : {2, 3}, default 2
            2: (east, north); 3: (east, north, up), reports without an
            altitude left out.
        extrapolate : bool, default True
            Move each report to its scan's time along its reported ground
            velocity (speed and course; reports without them stay where they
            are): the scan then shows every object at one instant.
        start : float, optional
            The first window's start (Unix seconds, <= the first report's
            time); default the first report's time. Snapshots taken every
            ``period`` (OpenSky's, on multiples of 10 s) fit their windows
            with ``start = math.floor(reports.time[0] / period) * period``.

        Yields
        ------
        tuple
            ``(time, ids, positions)``: float seconds, str (k,) and float64
            (k, dim), new arrays.

        Raises
        ------
        ImportError
            Without pymap3d (``pip install 'dod[geo]'``).
        ValueError
            For a period that is not a positive finite number, a dim other
            than 2 or 3, or a start after the first report.

        Notes
        -----
        A report is up to ``period`` older than its scan's time: without
        extrapolation, at speed v its position lags by up to ``v * period``
        (an airliner's 2 s is 500 m); with it, by the error of its velocity
        times that age. Thread-safety: a generator over immutable data.
        """
        if isinstance(period, bool) or not isinstance(period, (int, float, np.integer, np.floating)) \
                or not (math.isfinite(period) and period > 0):
            raise ValueError(f"period must be a positive finite number of seconds, not {period!r}")
        if dim not in (2, 3):
            raise ValueError(f"dim must be 2 or 3, not {dim!r}")
        keep = np.isfinite(self.altitude) if dim == 3 else np.ones(len(self), bool)
        t, ids = self.time[keep], self.ids[keep]
        if not t.size:
            return
        t0 = float(t[0]) if start is None else float(start)
        if not (math.isfinite(t0) and t0 <= t[0]):
            raise ValueError(f"start must be a time before the first report ({t[0]}), not {start!r}")
        alt = self.altitude[keep] if dim == 3 else None
        pos = frame.to_local(self.latitude[keep], self.longitude[keep], alt, dim=dim)
        window = np.floor((t - t0) / period).astype(np.int64)
        if extrapolate:
            # The ground velocity in the plane (east, north); age: the scan's time minus the report's.
            course = np.radians(self.course[keep])
            v = np.stack([self.speed[keep] * np.sin(course), self.speed[keep] * np.cos(course)], axis=1)
            age = t0 + (window + 1) * period - t
            known = np.isfinite(v).all(axis=1)
            pos[known, :2] += v[known] * age[known, None]
        starts = np.searchsorted(window, np.arange(window[-1] + 2))
        for j in range(window[-1] + 1):
            a, b = starts[j], starts[j + 1]
            # The latest report of each object: the first of each id in the reversed window.
            _, last = np.unique(ids[a:b][::-1], return_index=True)
            rows = np.sort(b - 1 - last)
            yield t0 + (j + 1) * period, ids[rows].copy(), pos[rows].copy()


def _read_csv(path, want, report, width):
    """The columns of a CSV file's reports: ``width`` lists, one entry per row
    for which ``report(row, columns)`` returns a tuple (None skips the row; a
    ValueError or IndexError it raises names the file and line)."""
    rows = []
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path}: empty file (a header row is required)")
        c = _columns(header, want, path)
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                r = report(row, c)
            except (ValueError, IndexError) as e:
                raise ValueError(f"{path}, line {line}: {e}") from None
            if r is not None:
                rows.append(r)
    return [list(col) for col in zip(*rows)] if rows else [[] for _ in range(width)]


def _columns(header, want, path):
    names = {h.strip().lstrip("#").strip().lower(): i for i, h in enumerate(header)}
    out = {}
    for key, aliases, required in want:
        for a in aliases:
            if a in names:
                out[key] = names[a]
                break
        else:
            if required:
                raise ValueError(f"{path}: no {aliases[0]!r} column (the header has {list(names)})")
    return out


def _float(s):
    s = s.strip()
    return float(s) if s else math.nan


def _finish(t, ids, lat, lon, alt, speed, course, source):
    t = np.array(t, np.float64)
    order = np.argsort(t, kind="stable")
    ids = np.array(ids, dtype=str)[order]
    t = t[order]
    # One report per object and time (repeats of a carried-forward position).
    key = np.char.add(ids, np.char.mod("@%.6f", t))
    _, first = np.unique(key, return_index=True)
    keep = np.sort(first)
    pick = order[keep]
    return Reports(t[keep], ids[keep], np.array(lat, np.float64)[pick], np.array(lon, np.float64)[pick],
                   np.array(alt, np.float64)[pick], np.array(speed, np.float64)[pick],
                   np.array(course, np.float64)[pick], source)


def read_opensky(path):
    """OpenSky Network state vectors (CSV) as :class:`Reports`.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file in the format the module's docstring describes.

    Returns
    -------
    Reports
        One row per distinct position (at ``lastposupdate`` when given, else
        the snapshot's ``time``), ids the ICAO addresses, altitude
        ``geoaltitude`` (else ``baroaltitude``, else nan).

    Raises
    ------
    OSError
        When the file cannot be read.
    ValueError
        For a missing required column or a value that is not a number where
        one is required (the message names the line).

    Notes
    -----
    Thread-safety: a pure function of the file.
    """
    want = [("time", ("time",), True), ("id", ("icao24",), True),
            ("lat", ("lat",), True), ("lon", ("lon",), True),
            ("pos_time", ("lastposupdate",), False),
            ("geo", ("geoaltitude",), False), ("baro", ("baroaltitude",), False),
            ("speed", ("velocity",), False), ("course", ("heading",), False)]

    def report(row, c):
        la, lo = _float(row[c["lat"]]), _float(row[c["lon"]])
        if math.isnan(la) or math.isnan(lo):
            return None                         # no position in this snapshot
        when = _float(row[c["pos_time"]]) if "pos_time" in c else math.nan
        if math.isnan(when):
            when = _float(row[c["time"]])
        if math.isnan(when):
            raise ValueError("no time")
        h = _float(row[c["geo"]]) if "geo" in c else math.nan
        if math.isnan(h) and "baro" in c:
            h = _float(row[c["baro"]])
        sp = _float(row[c["speed"]]) if "speed" in c else math.nan
        co = _float(row[c["course"]]) if "course" in c else math.nan
        return when, row[c["id"]].strip().lower(), la, lo, h, sp, co

    return _finish(*_read_csv(path, want, report, 7), str(path))


def _iso_seconds(s):
    d = datetime.datetime.fromisoformat(s.strip().replace("Z", "+00:00"))
    if d.tzinfo is None:
        d = d.replace(tzinfo=datetime.timezone.utc)      # Marine Cadastre's times are UTC
    return d.timestamp()


def read_ais(path):
    """AIS position reports (Marine Cadastre CSV) as :class:`Reports`.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file in the format the module's docstring describes.

    Returns
    -------
    Reports
        One row per report with a position, ids the MMSIs, altitude 0.

    Raises
    ------
    OSError
        When the file cannot be read.
    ValueError
        For a missing required column, or a time or position that cannot be
        read (the message names the line).

    Notes
    -----
    Reports whose position is "not available" (latitude 91 or longitude 181)
    are skipped. Thread-safety: a pure function of the file.
    """
    want = [("id", ("mmsi",), True), ("time", ("basedatetime", "timestamp"), True),
            ("lat", ("lat", "latitude"), True), ("lon", ("lon", "longitude"), True),
            ("speed", ("sog",), False), ("course", ("cog",), False)]

    def report(row, c):
        la, lo = _float(row[c["lat"]]), _float(row[c["lon"]])
        if math.isnan(la) or math.isnan(lo) or abs(la) > 90 or abs(lo) > 180:
            return None                         # 91 / 181: no position
        when = _iso_seconds(row[c["time"]])
        sp = _float(row[c["speed"]]) if "speed" in c else math.nan
        co = _float(row[c["course"]]) if "course" in c else math.nan
        if sp >= 102.2 or co >= 360.0:          # 102.3 kn / 360 deg: not available
            sp = co = math.nan
        return when, row[c["id"]].strip(), la, lo, 0.0, sp * KNOT, co

    return _finish(*_read_csv(path, want, report, 7), str(path))
