"""The tracker's read side: its views, counters, the scan's events and the track output.

TrackerOutputs is Tracker's base class (_engine.pyx: the owner, which
makes the tables and runs the tick): every method that reads what a tick
left, and what they return:

    _EventArrays   the events' arrays (config.events), made once with the
                   tracker; the tick writes them (_events.pyx) and
                   Tracker.events() returns read-only views of the latest
                   scan's entries (ScanEvents)
    Tracks         Tracker.tracks(): ids, time, state, full covariance,
                   score and status of the confirmed (or all) tracks
    TrackBatch     Tracker.tracks_arrow(): the same columns as one Arrow
                   record batch (the Arrow PyCapsule interface, dod.arrow's
                   export: no copy of a column already contiguous)

Threads: called by the owner with the GIL held, never inside a tick.
"""
cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport uint8_t, uint64_t, int32_t, int64_t
from libc.string cimport memcpy

from dod.arrow cimport dod_arrow_desc, dod_arrow_array_capsule, dod_arrow_stream_capsule
from dod.schema cimport Schema
from dod._ndarray cimport input_array          # the one input gate for caller arrays
from dod.tracker._track cimport (dod_tracker, dod_tick_events, dod_tick_counts, DOD_TRACK_CONFIRMED,
                                 dod_track_row_load)
from dod.tracker._frame cimport _in_box

import warnings
from collections import namedtuple

import numpy as np

from dod.tracker.covariance import unpack_covariance
from dod.tracker._configure import _COLUMNS, _IMM_COLUMNS

cnp.import_array()


cdef dod_tick_counts _zero_counts


# The names of the per-tick counters, in the order of their one declaration
# (the dod_tick_counts struct in _track.pxd): the keys of Tracker.counts()
# and the order of Tracker.read_counts.
COUNT_NAMES = tuple(_zero_counts)

# read_counts copies the struct as an array of uint64: every field is a size_t.
if sizeof(dod_tick_counts) != len(COUNT_NAMES) * sizeof(uint64_t) or sizeof(size_t) != sizeof(uint64_t):
    raise ImportError("dod_tick_counts must hold only 64-bit size_t fields")


ScanEvents = namedtuple("ScanEvents", ["track", "births", "birth_rows", "confirmations", "deaths",
                                       "death_status", "counts"])
ScanEvents.__doc__ = """What happened in the latest scan (:meth:`Tracker.events`): read-only views.

Attributes
----------
track : numpy.ndarray
    int64, one per scan row the tick read (rows past ``max_detections`` with
    ``overflow="drop"`` are not read): the id of the track that row updated,
    -1 for none (clutter, a birth, a row waiting for a partner, a row dropped
    as invalid).
births : numpy.ndarray
    uint64: the ids of the tracks born this scan, ascending.
birth_rows : numpy.ndarray
    int64: the scan row each birth started from (two-point initiation: the
    row of this scan's detection of the pair).
confirmations : numpy.ndarray
    uint64: the ids of the tracks confirmed this scan.
deaths : numpy.ndarray
    uint64: the ids of the tracks deleted this scan.
death_status : numpy.ndarray
    uint8: the status each had before (1 tentative, 2 confirmed).
counts : numpy.ndarray
    uint64: the scan's counters in COUNT_NAMES order (:meth:`Tracker.counts`).

Notes
-----
The views share the tracker's arrays: the next tick overwrites them (copy
what must outlive it); the memory itself lives as long as a view does.
Confirmations and deaths are in the rows' order at the scan's management
(not sorted by id).
"""

Tracks = namedtuple("Tracks", ["ids", "time", "x", "P", "score", "status"])
Tracks.__doc__ = """The tracks after the latest scan (:meth:`Tracker.tracks`).

Attributes
----------
ids : numpy.ndarray
    uint64 (k,).
time : float
    When the tracks hold: the scan clock (:attr:`Tracker.time`, seconds),
    the time of the latest scan.
x : numpy.ndarray
    float64 (k, 2 dim): the state vectors, position then velocity
    (float32 for a tracker of ``dtype="float32"``, as P).
P : numpy.ndarray
    float64 (k, 2 dim, 2 dim): the full symmetric covariances, a new array
    unpacked from the table's packed P column.
score : numpy.ndarray
    float64 (k,): the track scores (0 unless ``confirmation="score"``).
status : numpy.ndarray
    uint8 (k,): 1 tentative, 2 confirmed.

Notes
-----
ids, x, score and status are read-only views of the table when the tracks
asked for are its leading rows (the confirmed ones, with
``confirmed_first``, the default; all of them), else new arrays; views
show the rows as they are now, which the next tick moves: copy what must
outlive it.
"""


cdef object _counts_view(const dod_tracker* e, object owner):
    """A read-only view of the latest tick's counters (COUNT_NAMES order) that keeps `owner` alive."""
    cdef cnp.npy_intp dims[1]
    dims[0] = sizeof(dod_tick_counts) // sizeof(uint64_t)
    arr = cnp.PyArray_SimpleNewFromData(1, dims, cnp.NPY_UINT64, <void*>&e.last)
    cnp.PyArray_CLEARFLAGS(<cnp.ndarray>arr, cnp.NPY_ARRAY_WRITEABLE)
    cnp.set_array_base(<cnp.ndarray>arr, owner)
    return arr


cdef inline object _read_only(object a):
    a.flags.writeable = False
    return a


cdef class _EventArrays:
    """The events' arrays of one tracker (config.events), each made and
    touched once here (so no tick faults in their pages)."""

    def __cinit__(self, size_t max_detections, size_t capacity):
        self.track = np.full(max_detections, -1, dtype=np.int64)
        self.row_of = np.zeros(max_detections, dtype=np.int32)
        self.born = np.zeros(max_detections, dtype=np.uint64)
        self.born_row = np.zeros(max_detections, dtype=np.int64)
        self.confirmed = np.zeros(capacity, dtype=np.uint64)
        self.died = np.zeros(capacity, dtype=np.uint64)
        self.died_status = np.zeros(capacity, dtype=np.uint8)
        for a in (self.row_of, self.born, self.born_row, self.confirmed, self.died, self.died_status):
            a.fill(0)               # (calloc'd pages are mapped on first write: write them now)

    cdef void attach(self, dod_tracker* e) noexcept:
        e.events.track = <int64_t*>cnp.PyArray_DATA(self.track)
        e.events.row_of = <int32_t*>cnp.PyArray_DATA(self.row_of)
        e.events.born = <uint64_t*>cnp.PyArray_DATA(self.born)
        e.events.born_row = <int64_t*>cnp.PyArray_DATA(self.born_row)
        e.events.confirmed = <uint64_t*>cnp.PyArray_DATA(self.confirmed)
        e.events.died = <uint64_t*>cnp.PyArray_DATA(self.died)
        e.events.died_status = <uint8_t*>cnp.PyArray_DATA(self.died_status)

    cdef object scan_events(self, const dod_tracker* e, object owner):
        cdef const dod_tick_events* v = &e.events
        return ScanEvents(_read_only(self.track[:v.rows]), _read_only(self.born[:v.births]),
                          _read_only(self.born_row[:v.births]), _read_only(self.confirmed[:v.confirmations]),
                          _read_only(self.died[:v.deaths]), _read_only(self.died_status[:v.deaths]),
                          _counts_view(e, owner))


cdef tuple _pick(Table table, const dod_tracker* e, bint confirmed):
    """The rows asked for as views (a slice: the leading rows) or new arrays:
    (ids, x, P packed, score, status)."""
    cdef size_t T = e.table.count, C
    cols = []
    for name in ("id", "x", "P", "score", "status"):
        arr = table[name]
        arr.flags.writeable = False
        cols.append(arr)
    status = cols[4]
    if not confirmed:
        return tuple(cols)
    mask = status == DOD_TRACK_CONFIRMED
    C = <size_t>np.count_nonzero(mask)
    if mask[:C].all():              # the leading rows (confirmed_first): views
        return tuple(c[:C] for c in cols)
    rows = np.flatnonzero(mask)
    return tuple(c[rows] for c in cols)


cdef object _track_output(Table table, const dod_tracker* e, bint confirmed, double time):
    ids, x, P, score, status = _pick(table, e, confirmed)
    return Tracks(ids, time, x, unpack_covariance(P), score, status)


cdef dict _batch_schemas = {}


cdef Schema _batch_schema(int dim, object dtype):
    """The track batch's columns (made once per dimension and x/P dtype)."""
    cdef int n = 2 * dim
    s = _batch_schemas.get((dim, dtype))
    if s is None:
        from dod.table import Schema as _S
        s = _S(id=np.uint64, time=np.float64, x=(dtype, (n,)), P=(dtype, (n, n)),
               score=np.float64, status=np.uint8)
        _batch_schemas[(dim, dtype)] = s
    return <Schema>s


cdef class TrackBatch:
    """The tracks as one Arrow record batch (:meth:`Tracker.tracks_arrow`).

    Columns id (uint64), time (float64), x (fixed-size list of 2 dim
    float64), P (2 dim lists of 2 dim float64: the full covariance), score
    (float64), status (uint8); x and P are float32 for a tracker of
    ``dtype="float32"``. It implements the Arrow PyCapsule interface:
    ``pyarrow.record_batch(batch)``, ``polars.from_arrow(batch)`` and duckdb
    read it without a copy; the memory lives while an export does.

    Attributes
    ----------
    columns : tuple of numpy.ndarray
        The exported arrays, in column order (C-contiguous).
    num_rows : int

    Notes
    -----
    Thread-safety: immutable; any thread may export it.
    """
    cdef readonly tuple columns
    cdef Schema _schema
    cdef readonly Py_ssize_t num_rows

    cdef int _ready(self, dod_arrow_desc* d, char** cols) except -1:
        """The export's descriptor and column pointers (six); TypeError for a
        batch Tracker.tracks_arrow() did not make."""
        cdef int c
        if self._schema is None:
            raise TypeError("a TrackBatch is made by Tracker.tracks_arrow()")
        for c in range(6):
            cols[c] = <char*>cnp.PyArray_DATA(<cnp.ndarray>self.columns[c])
        self._schema._desc(d)
        return 0

    def __arrow_c_schema__(self):
        """The columns as an ``arrow_schema`` PyCapsule."""
        if self._schema is None:
            raise TypeError("a TrackBatch is made by Tracker.tracks_arrow()")
        return self._schema._arrow_schema()

    def __arrow_c_array__(self, requested_schema=None):
        """``(arrow_schema, arrow_array)`` PyCapsules over the columns, without a copy."""
        cdef dod_arrow_desc d
        cdef char* cols[6]
        self._ready(&d, cols)
        return self._schema._arrow_schema(), dod_arrow_array_capsule(&d, cols, self.num_rows, self)

    def __arrow_c_stream__(self, requested_schema=None):
        """An ``arrow_array_stream`` PyCapsule of the one batch, without a copy."""
        cdef dod_arrow_desc d
        cdef char* cols[6]
        self._ready(&d, cols)
        return dod_arrow_stream_capsule(&d, cols, self.num_rows, self, self._schema)

    def __repr__(self):
        return f"<dod.tracker.TrackBatch rows={self.num_rows} columns=(id, time, x, P, score, status)>"


cdef object _track_batch(Table table, const dod_tracker* e, bint confirmed, double time):
    ids, x, P, score, status = _pick(table, e, confirmed)
    cdef TrackBatch b = TrackBatch.__new__(TrackBatch)
    k = ids.shape[0]
    b.columns = (np.ascontiguousarray(ids), np.full(k, time), np.ascontiguousarray(x), unpack_covariance(P),
                 np.ascontiguousarray(score), np.ascontiguousarray(status))
    b._schema = _batch_schema(e.dim, x.dtype)
    b.num_rows = k
    return b


cdef object _confirmed_tracks(const dod_tracker* e, object box):
    """Tracker.confirmed_tracks' body: (ids, positions) of the confirmed rows
    inside the box, in row order, new arrays."""
    cdef double lo[3]
    cdef double hi[3]
    cdef int dim = e.dim, a
    cdef size_t T, i, k = 0
    cdef cnp.ndarray ids_out, pos_out
    cdef uint64_t* po
    cdef double* xo
    for a in range(3):
        lo[a] = -INFINITY
        hi[a] = INFINITY
    if box is not None:
        blo, bhi = box
        blo = np.asarray(blo, dtype=np.float64).reshape(-1)
        bhi = np.asarray(bhi, dtype=np.float64).reshape(-1)
        if blo.shape[0] != dim or bhi.shape[0] != dim:
            raise ValueError(f"box must be (lo, hi) with {dim} numbers each")
        if np.isnan(blo).any() or np.isnan(bhi).any():
            raise ValueError("box must not hold NaN")
        for a in range(dim):
            lo[a] = blo[a]
            hi[a] = bhi[a]
    # One pass into arrays of the table's length: only the pages the
    # kept rows touch are ever faulted in, and a window is copied out.
    T = e.table.count
    ids_out = np.empty(T, dtype=np.uint64)
    pos_out = np.empty((T, dim), dtype=np.float64)
    po = <uint64_t*>cnp.PyArray_DATA(ids_out)
    xo = <double*>cnp.PyArray_DATA(pos_out)
    for i in range(T):
        if e.cols.state[i] != DOD_TRACK_CONFIRMED:
            continue
        if e.cols.single:                                                           # (kept when in the box)
            dod_track_row_load(e.cols.xf, e.cols.xr, e.cols.xs, i, dim, xo + k * dim)
        else:
            dod_track_row_load(e.cols.x, e.cols.xr, e.cols.xs, i, dim, xo + k * dim)
        if _in_box(xo + k * dim, lo, hi, dim):
            po[k] = e.cols.id[i]
            k += 1
    if 2 * k >= T:
        return ids_out[:k], pos_out[:k]
    return ids_out[:k].copy(), pos_out[:k].copy()


cdef class TrackerOutputs:
    """The read side of :class:`Tracker` (its base class): views of the
    track table, the counters, the scan's events and the track output.

    Made only as a Tracker; every method reads what the latest tick left.

    Attributes
    ----------
    table : dod.table.Table
        The tracks, one row each.
    singles : dod.table.Table
        Detections waiting for a partner (two-point initiation): column ``z``
        (positions); after a range-bearing scan, or one with per-detection
        covariance, also ``C`` (the packed position covariances) and
        ``allowance`` (the pair gate's noise terms), which a plain Cartesian
        scan leaves unwritten (theirs are ``r**2 I`` and the
        configuration's).

    Raises
    ------
    TypeError
        Never made directly: a Tracker makes it.

    Notes
    -----
    Thread-safety: readers; safe while no tick runs (during a tick the values
    may be mid-update, and the methods that copy refuse with RuntimeError).
    """

    def __cinit__(self, *args, **kwargs):
        if type(self) is TrackerOutputs:
            raise TypeError("TrackerOutputs is Tracker's read side: make a Tracker")

    cdef object _view(self, str name):
        arr = self.table[name]
        arr.flags.writeable = False          # the engine writes; Python reads
        return arr

    @property
    def count(self):
        """Live tracks (tentative and confirmed)."""
        return self.engine.table.count

    def __len__(self):
        return self.engine.table.count

    def column(self, name):
        """Read-only view of the live rows of a column.

        Rows reorder when tracks die (the last row moves into the hole), confirm
        (confirmed tracks first) and when the rows are sorted: match rows by id
        or handle. The view shows the rows live when it was made, and stays safe
        to read (the table's memory never moves and lives as long as the view).

        Parameters
        ----------
        name : str
            id, x, P, hits, misses, age, history, status, score or score_max (and,
            with motion="imm", mu, xm, Pm: see track_schema). "state", the
            status column's former name, still reads it, with a
            DeprecationWarning.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        KeyError
            For another name.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        if name == "state":
            warnings.warn('the track status column is "status" ("state" is deprecated)', DeprecationWarning,
                          stacklevel=2)
            name = "status"
        if name not in _COLUMNS and not (self.engine.imm.models and name in _IMM_COLUMNS):
            raise KeyError(f"no column {name!r}; columns are {', '.join(_COLUMNS)}")
        return self._view(name)

    def columns(self):
        """Read-only views of every column's live rows.

        Returns
        -------
        dict
            Column name to a view, as :meth:`column`.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        out = self.table.columns()
        for arr in out.values():
            arr.flags.writeable = False
        return out

    def handles(self):
        """Stable table handles of the live rows.

        Returns
        -------
        numpy.ndarray
            A new uint64 array, in row order.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        return self.table.handles()

    @property
    def ids(self):
        """Read-only view of the live rows' track ids (uint64; 0 is no track)."""
        return self._view("id")

    @property
    def positions(self):
        """Read-only (count, dim) view of the live rows' positions."""
        return self._view("x")[:, :self.engine.dim]

    @property
    def velocities(self):
        """Read-only (count, dim) view of the live rows' velocities."""
        return self._view("x")[:, self.engine.dim:]

    @property
    def covariances(self):
        """The live rows' covariances, (count, n, n): a new read-only array
        unpacked from the P column (which stores each one's upper triangle:
        unpack_covariance)."""
        out = unpack_covariance(self._view("P"))       # dod/tracker/covariance.py
        out.flags.writeable = False
        return out

    @property
    def status(self):
        """Read-only view of the live rows' track status (uint8): 1 tentative, 2 confirmed."""
        return self._view("status")

    @property
    def states(self):
        """Deprecated name of :attr:`status` (the track status, not the state vector: that is ``x``)."""
        warnings.warn("Tracker.states is deprecated: the track status is Tracker.status (the state vectors "
                      "are the x column)", DeprecationWarning, stacklevel=2)
        return self._view("status")

    @property
    def model_probabilities(self):
        """motion="imm": read-only (k, 3) view of the live rows' model
        probabilities (CV low, CV high, turn); None for motion="cv"."""
        return self._view("mu") if self.engine.imm.models else None

    @property
    def turn_rates(self):
        """motion="imm": the combined turn rate of each live row (rad/s,
        sum_j mu_j w_j; a new array); None for motion="cv"."""
        if not self.engine.imm.models:
            return None
        return np.einsum("kj,kj->k", self._view("mu"), self._view("xm")[:, :, 2 * self.engine.dim])

    @property
    def scores(self):
        """Track scores (log-likelihood ratios) of the live rows; zeros unless
        confirmation="score"."""
        return self._view("score")

    @property
    def clutter_density(self):
        """The clutter density per unit area/volume: the config's, or the
        online estimate (0.0 before the first scan with detections). A scan
        whose Sensor gives its own ``clutter_density`` uses that one and
        leaves this unchanged."""
        return self.engine.clutter

    @property
    def waiting(self):
        """Detections waiting for a partner (two-point initiation): a
        read-only (k, dim) view, in the tracker's order (the detection
        index's cell order, when the index held them all: next scan's
        pairing walks the index from each; else scan order)."""
        arr = self.singles["z"]
        arr.flags.writeable = False
        return arr

    @property
    def confirmed(self):
        """Boolean mask of the confirmed live rows (a new array)."""
        return self._view("status") == DOD_TRACK_CONFIRMED

    @property
    def scans(self):
        """Scans folded in so far (ticks run)."""
        return self.engine.scans

    def read_counts(self, cnp.ndarray out not None):
        """Write the latest tick's counters into `out`, allocating nothing.

        Parameters
        ----------
        out : numpy.ndarray
            uint64, native, aligned, contiguous, writable, at least
            ``len(COUNT_NAMES)`` elements; filled in COUNT_NAMES order.

        Raises
        ------
        TypeError, ValueError
            For another dtype, layout or a shorter array.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        input_array(out, np.uint64, "out", -1, None, "out")     # native, aligned, contiguous, writable
        if <size_t>cnp.PyArray_SIZE(out) < sizeof(dod_tick_counts) // sizeof(uint64_t) \
                or not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError(f"out must be writable with at least {len(COUNT_NAMES)} elements")
        memcpy(cnp.PyArray_DATA(out), &self.engine.last, sizeof(dod_tick_counts))

    def counts(self):
        """The latest tick's counters.

        Returns
        -------
        dict
            Keys: COUNT_NAMES, in order.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        return self.engine.last

    def confirmed_tracks(self, box=None):
        """The ids and positions of the confirmed tracks, in row order.

        One pass over the state and position columns, with the GIL held (no tick
        can start meanwhile): the demo samples GOSPA over a window of a
        100,000-track table this way, several times faster than a mask and
        fancy-indexed copies of the views.

        Parameters
        ----------
        box : tuple, optional
            ``(lo, hi)``, dim numbers each (-inf / inf allowed): only the tracks
            with lo <= position <= hi on every axis. A box with lo > hi on an axis
            holds nothing.

        Returns
        -------
        tuple of numpy.ndarray
            ``(ids, positions)``: new arrays, ids uint64 (k,) and positions
            float64 (k, dim).

        Raises
        ------
        ValueError
            For a NaN in the box or a wrong length.

        Notes
        -----
        Thread-safety: any thread; it holds the GIL, so no tick of this tracker
        runs meanwhile.
        """
        if self.table is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        return _confirmed_tracks(&self.engine, box)

    # -------------------------------------------------------- what happened, and the tracks

    def events(self):
        """What happened in the latest scan (``config.events``).

        Returns
        -------
        ScanEvents
            Read-only views (dod.tracker.ScanEvents): for each scan row the
            id of the track it updated (-1: none), the births' ids and scan
            rows, the confirmations' and deaths' ids (with each dead track's
            former status) and the counters. The tick writes them into arrays
            made with the tracker (no allocation in the tick; rows and births
            up to ``max_detections``, confirmations and deaths up to
            ``capacity``); the next tick overwrites them: copy what must
            outlive it. Empty before the first tick.

        Raises
        ------
        RuntimeError
            When the tracker was made without ``events=True``, or while a tick
            runs in another thread.

        Notes
        -----
        Thread-safety: a reader; a call builds seven small views (a few µs).
        """
        if self._events is None:
            raise RuntimeError("this tracker records no events: make it with events=True (ExecutionConfig)")
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        return (<_EventArrays>self._events).scan_events(&self.engine, self)

    cdef double _track_time(self):
        # What the track outputs give as their time: the owner's scan clock
        # (Tracker overrides this; the read side keeps no clock).
        return <double>self.engine.scans

    def tracks(self, confirmed=True):
        """The tracks now: ids, time, state vector, full covariance, score, status.

        Parameters
        ----------
        confirmed : bool, default True
            Only the confirmed tracks (else every live one), in row order.

        Returns
        -------
        Tracks
            dod.tracker.Tracks: ``ids`` uint64 (k,), ``time`` float (the scan
            count: the tracker keeps no clock), ``x`` float64 (k, 2 dim),
            ``P`` float64 (k, 2 dim, 2 dim) (a new array, unpacked from the
            packed column), ``score`` float64 (k,), ``status`` uint8 (k,);
            ``x`` and ``P`` float32 for a tracker of ``dtype="float32"``.
            ids, x, score and status are read-only views of the table when
            the tracks are its leading rows (all of them, or the confirmed
            ones with ``confirmed_first``, the default), else new arrays.

        Raises
        ------
        RuntimeError
            While a tick runs in another thread.

        Notes
        -----
        Thread-safety: a reader. Views show the rows as they are now: the
        next tick moves rows and overwrites them (copy what must outlive it).
        """
        if self.table is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        return _track_output(self.table, &self.engine, bool(confirmed), self._track_time())

    def tracks_arrow(self, confirmed=True):
        """The tracks now as one Arrow record batch.

        Parameters
        ----------
        confirmed : bool, default True
            As for :meth:`tracks`.

        Returns
        -------
        TrackBatch
            dod.tracker.TrackBatch, read by ``pyarrow.record_batch(b)``,
            ``polars.from_arrow(b)`` or duckdb through the Arrow PyCapsule
            interface: columns id, time, x, P (full), score, status. The
            columns :meth:`tracks` gives as views are exported without a copy
            (their memory is the table's: the next tick changes it, as for the
            views); the time and covariance columns are new arrays.

        Raises
        ------
        RuntimeError
            While a tick runs in another thread.

        Notes
        -----
        Thread-safety: a reader.
        """
        if self.table is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        return _track_batch(self.table, &self.engine, bool(confirmed), self._track_time())

