"""The tracker's owner: the Tracker class and its Python face.

Tracker holds the track table, the table of detections waiting for a
partner (two-point initiation), the per-tick scratch arena and the workers'
arenas, validates every argument, and calls the tick (dod/tracker/_tick.pyx)
once per scan with the GIL released. What it reads from the configuration
and from a scan's sensor, the track table's schema and the scratch size are
in _configure.pyx (track_schema and scratch_bytes are re-exported here).
Reading order of the tick's passes: the package docstring
(dod/tracker/__init__.py).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint8_t, int64_t
from libc.string cimport strerror
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cython.parallel cimport prange

from dod.arena cimport dod_arena, Arena
from dod.table cimport dod_table, Table
from dod._ndarray cimport input_array          # the one input gate for caller arrays
from dod.tracker.measurement cimport dod_sensor
from dod.tracker._track cimport (dod_tracker, dod_track_cols, dod_tick_counts, dod_tick_profile,
                                 DOD_TRACKER_MAX_THREADS, DOD_TICK_PASSES,
                                 DOD_TRACK_NONE, DOD_TRACK_TENTATIVE, DOD_TRACK_CONFIRMED)
from dod.tracker._frame cimport _CLUSTER_BYTES, _coord_max
from dod.tracker._tick cimport dod_tracker_tick, dod_tracker_tick_sensor, dod_tracker_tick_cov
from dod.tracker._configure cimport _tracker_scratch_bytes, _read_config, _read_sensor
from dod.tracker._clock cimport _scan_step, dod_clock_stamp, dod_clock_step
from dod.tracker._input cimport (_scan_array, _columns_reversed, _read_in_place, _convert_rows,
                                 _covariance_array, _convert_covariance)
from dod.tracker._output cimport TrackerOutputs, _EventArrays

import numpy as np

from dod.tracker._configure import track_schema, scratch_bytes
from dod.tracker._output import COUNT_NAMES, ScanEvents, Tracks, TrackBatch
# The Kalman kernels' test hooks (tests/test_tracker_kernels.py, test_tracker_radar.py)
from dod.tracker._kernel_hooks import _kernel_predict, _kernel_update, _kernel_ekf_update

cnp.import_array()


PASS_NAMES = ("setup", "predict_gate", "associate", "update", "deaths", "births", "sort")
if len(PASS_NAMES) != DOD_TICK_PASSES:
    raise ImportError("PASS_NAMES and DOD_TICK_PASSES disagree")


# ---------------------------------------------------------------- prefault over threads
# The memory floor's service (dod.pages.dod_pages_prefault) over what the
# tracker owns; the tables and arenas list their own memory (page_ranges).
from dod.pages cimport dod_page_range, dod_pages_prefault, dod_pages_threads

cdef extern from "_os.h" nogil:
    size_t dod_os_page_round(size_t size)
    void* dod_os_map(size_t size)
    void dod_os_unmap(void* p, size_t size)


cdef size_t _tracker_ranges(Tracker tr, dod_page_range* out):
    """All a tick can touch, as ranges into out (NULL: count only); how many:
    what Tracker.prefault faults in."""
    cdef size_t n = tr.table.page_ranges(out)
    n += tr.singles.page_ranges(NULL if out == NULL else out + n)
    if tr.engine.displaced != NULL:
        if out != NULL:
            out[n].base = tr.engine.displaced
            out[n].size = tr._displaced_bytes
        n += 1
    if out != NULL:
        out[n].base = tr._inbuf
        out[n].size = tr._inbuf_bytes
    n += 1
    if tr._covbuf != NULL:
        if out != NULL:
            out[n].base = tr._covbuf
            out[n].size = tr._covbuf_bytes
        n += 1
    n += tr.scratch.page_ranges(NULL if out == NULL else out + n)
    for wa in tr._worker_arenas:
        n += (<Arena>wa).page_ranges(NULL if out == NULL else out + n)
    return n


cdef int _hold_tables(Tracker tr, str what) except -1:
    """Begin the exclusive passes of both of tr's tables (named `what`) and
    mark it busy: all or nothing (RuntimeError from a held table)."""
    tr.table.begin_exclusive(what)
    try:
        tr.singles.begin_exclusive(what)
    except BaseException:
        tr.table.end_exclusive()
        raise
    tr._busy = True
    return 0


cdef void _release_tables(Tracker tr) noexcept:
    """End what _hold_tables began."""
    tr._busy = False
    tr.singles.end_exclusive()
    tr.table.end_exclusive()


@cython.final
cdef class Tracker(TrackerOutputs):
    """Tracker(config=None, *, scratch=None, **overrides)

    A constant-velocity (or, with ``motion="imm"``, interacting multiple
    model) multi-target tracker (global nearest neighbour).

    `config` is a :class:`~dod.tracker.TrackerConfig` (keyword overrides
    build one). The tracks are the rows of :attr:`table`, a
    :class:`dod.table.Table` of ``config.capacity`` rows (schema:
    :func:`track_schema`); each row has a stable handle while its track
    lives. Each :meth:`tick` takes its temporaries from :attr:`scratch` (its
    own arena by default, or one you pass, e.g. a :class:`~dod.loop.Loop`'s)
    and gives them back before it returns.

    The tracker owns its table: read it (views, handles, Arrow export), but
    do not insert, remove or write rows yourself.

    Parameters
    ----------
    config : TrackerConfig, optional
        The model, gating and management settings (defaults if None).
    scratch : Arena, optional
        Where each tick's temporaries come from; by default the tracker's
        own arena of :func:`scratch_bytes`.
    **overrides
        Fields of :class:`~dod.tracker.TrackerConfig` that replace those of
        `config`.

    Attributes
    ----------
    table, singles : dod.table.Table
        The tracks, one row each, and the detections waiting for a partner
        (:class:`TrackerOutputs` says what their columns hold).
    scratch : dod.arena.Arena
        Per-tick temporaries (mark and rewind each tick).
    config : TrackerConfig
        The settings in force.

    Raises
    ------
    TypeError, ValueError
        For a bad config or override (as :class:`~dod.tracker.TrackerConfig`).
    MemoryError
        When the table or the scratch cannot be allocated.

    Notes
    -----
    Thread-safety: one thread at a time. tick() releases the GIL while it
    runs, so other Python threads run meanwhile. A second tick() of the same
    tracker from another thread raises RuntimeError; other threads must not
    mutate its table or use its scratch arena meanwhile (reading the views
    is safe: the memory stays valid, values may be mid-update). With
    ``config.threads > 1`` the tick itself runs on that many OpenMP threads
    (libgomp's pool, made on the first threaded tick and kept); the result
    is bit-identical for every thread count, given a scratch arena of at
    least :func:`scratch_bytes` (a smaller one the caller passes can make a
    large cluster go greedy in one thread count and not another). The rows
    hold the confirmed tracks first (``config.confirmed_first``) and are
    sorted by position now and then (``config.sort_when_drifted``,
    ``sort_when_displaced``, ``sort_when_mixed``, ``sort_every``): handles
    stay valid, row indices do not (as after deaths).
    """

    def __cinit__(self, config=None, *, Arena scratch=None, **overrides):
        from dod.tracker.config import TrackerConfig
        if config is None:
            config = TrackerConfig(**overrides)
        elif overrides:
            import dataclasses
            config = dataclasses.replace(config, **overrides)
        if not isinstance(config, TrackerConfig):
            raise TypeError("config must be a TrackerConfig")
        self.config = config
        cdef int dim = config.dim
        cdef Table table = Table(track_schema(dim, config.motion, config.layout, config.dtype), config.capacity)
        cdef dod_tracker* e = &self.engine
        self.table = table
        # Waiting detections of two-point initiation: a ZII table of their own,
        # sized once (one scan's detections at most).
        from dod.table import Column, Schema
        # (C and allowance: written for a range-bearing scan's only, so not zeroed)
        cdef Table singles = Table(Schema(z=(np.float64, (dim,)),
                                          C=Column(np.float64, (dim * (dim + 1) // 2,), zero=False),
                                          allowance=Column(np.float64, zero=False)),
                                   config.max_detections if config.initiation == "two_point" else 1)
        self.singles = singles
        _read_config(e, config, table, singles)
        if config.sort_when_displaced > 0:
            # A byte a row (set on the calling thread alone), in pages of
            # its own: zero from the start, and the same pages for prefault
            # whatever the heap's alignment.
            self._displaced_bytes = dod_os_page_round(table.engine.capacity)
            e.displaced = <uint8_t*>dod_os_map(self._displaced_bytes)
            if e.displaced == NULL:
                raise MemoryError()
        # Threads: OpenMP parallel regions of the tick (libgomp keeps its
        # pool of threads between regions: none is created per tick). Each
        # worker takes cluster matrices from its own arena, made here once.
        self._worker_arenas = []
        if config.threads > 1:
            self._workers = <dod_arena**>PyMem_Malloc(config.threads * sizeof(dod_arena*))
            if self._workers == NULL:
                raise MemoryError()
            for w in range(config.threads):
                wa = Arena(_CLUSTER_BYTES + (1 << 16))
                self._worker_arenas.append(wa)
                self._workers[w] = &(<Arena>wa).engine
            e.workers = self._workers
        self._overflow_drop = config.overflow == "drop"
        self.clock.drop_late = config.out_of_sequence == "drop"
        # Converted scans (_input.pyx): one scan's rows at most, pages backed when first written.
        # (dim + 1 columns: a range-bearing scan's range rate)
        self._inbuf_bytes = dod_os_page_round(config.max_detections * (dim + 1) * sizeof(double))
        self._inbuf = <double*>dod_os_map(self._inbuf_bytes)
        if self._inbuf == NULL:
            raise MemoryError()
        self._cov_trailing = (dim, dim)
        if config.events:
            self._events = _EventArrays(config.max_detections, config.capacity)
            (<_EventArrays>self._events).attach(e)
        self.scratch = scratch if scratch is not None else Arena(_tracker_scratch_bytes(config))

    def __dealloc__(self):
        PyMem_Free(self._workers)
        dod_os_unmap(self.engine.displaced, self._displaced_bytes)
        dod_os_unmap(self._inbuf, self._inbuf_bytes)
        dod_os_unmap(self._covbuf, self._covbuf_bytes)

    @property
    def threads(self):
        """Threads of one tick (config.threads)."""
        return self.engine.threads if self.engine.threads > 0 else 1

    @property
    def sorts(self):
        """Spatial sorts of the track rows so far (every config.sort_every scans)."""
        return self.engine.sorts

    @property
    def profile(self):
        """Whether each tick times its passes (default False); see last_profile().

        On, a tick reads the clock twice a pass and each worker twice a
        parallel region: tens of nanoseconds each, nothing allocated.
        Setting it while a tick runs in another thread raises RuntimeError."""
        return bool(self.engine.profile)

    @profile.setter
    def profile(self, value):
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        self.engine.profile = bool(value)

    def read_profile(self, cnp.ndarray out not None):
        """Write the latest tick's profile into `out`, allocating nothing.

        Each pass's wall time in ms in PASS_NAMES order, then each pass's idle
        ms (:meth:`last_profile`'s numbers; zeros for a tick with profile off).
        A loop can sum it every tick.

        Parameters
        ----------
        out : numpy.ndarray
            float64, contiguous, at least ``2 * len(PASS_NAMES)`` elements.

        Raises
        ------
        TypeError, ValueError
            For another dtype, layout or a shorter array.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        cdef double* o
        cdef int p
        input_array(out, np.float64, "out", -1, None, "out")    # native, aligned, contiguous, writable
        if cnp.PyArray_SIZE(out) < 2 * DOD_TICK_PASSES or not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError(f"out must be writable with at least {2 * DOD_TICK_PASSES} elements")
        o = <double*>cnp.PyArray_DATA(out)
        for p in range(DOD_TICK_PASSES):
            o[p] = self.engine.prof.wall_ns[p] / 1e6
            o[DOD_TICK_PASSES + p] = self.engine.prof.idle_ns[p] / 1e6

    def last_profile(self):
        """Where the latest tick's time went.

        wall_ms is the calling thread's wall-clock time in the pass (the passes
        add up to the tick, less the call's own checks). idle_ms is the sum over
        the workers of their time waiting inside the pass's row-chunk regions:
        each region's wall time times its threads, less each worker's time from
        its entry to the end of its last chunk (start-up, waiting for the
        slowest chunk, the closing barrier, and in the predict pass a worker's
        wait for the detection index); 0.0 for a serial pass. The other regions
        (the index's build and drop in parts, union-find and the cluster solve,
        the births' order, confirmed_first's swaps) count in wall_ms only.
        "sort" is 0.0 except in a tick that ran the spatial sort (sort_every).

        Returns
        -------
        dict or None
            ``{pass: (wall_ms, idle_ms)}`` in PASS_NAMES order, or None when that
            tick ran with profile off (or there was none).

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        cdef int p
        cdef int64_t total = 0
        for p in range(DOD_TICK_PASSES):
            total += self.engine.prof.wall_ns[p]
        if total == 0:
            return None
        return {PASS_NAMES[p]: (self.engine.prof.wall_ns[p] / 1e6, self.engine.prof.idle_ns[p] / 1e6)
                for p in range(DOD_TICK_PASSES)}

    def prefault(self, threads=None):
        """Fault in every page a tick can touch.

        That is the table at its full ``capacity`` (and the two-point waiting
        table), the scratch arena (all of it: a tick's temporaries at the worst
        case, :func:`scratch_bytes`), the input buffer, the covariance
        buffer (once a scan has given ``covariance``: prefault after such a
        scan to have it too) and each worker's arena. Without it those pages are touched for the first time by whichever tick first reaches
        them: a page fault inside the deadline, and RSS that rises with the
        table's peak row count and the scratch's high-water mark for minutes
        (bounded by the capacity, but not flat). With it RSS is the worst case
        from the start and stays there. Call it once, before the loop (the demo
        does, unless ``--no-prefault``). Contents do not change.

        Parameters
        ----------
        threads : int, optional
            Default: the tracker's ``threads``; an int in [1, 256]. The pages are
            faulted in over that many threads, 64 MiB at a time
            (:func:`dod.pages.prefault`: the calling thread and threads started
            for the call, joined before it returns): where the system backs
            fresh pages slowly (a VM whose host must back them too) more
            threads take less time. The same pages and the same bytes at any
            count.

        Returns
        -------
        int
            The bytes of pages touched.

        Raises
        ------
        ValueError
            For `threads`.
        RuntimeError
            While a tick runs in another thread (and a tick is refused while this
            runs).
        MemoryError
            When the system cannot back the pages (part may be resident, nothing
            else changes).

        Notes
        -----
        Thread-safety: one thread at a time, not while a tick runs in another thread.
        """
        cdef int nt
        cdef size_t n, total = 0
        cdef dod_page_range* ranges = NULL
        cdef int err = 0
        if self.table is None or self.scratch is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        nt = self.engine.threads if threads is None else dod_pages_threads(threads)
        if self._busy:
            raise RuntimeError("a tick of this tracker is already running in another thread")
        # The tables' exclusive passes, as their own prefault takes them
        # (inserts from other threads refused meanwhile).
        _hold_tables(self, "a prefault")
        try:
            n = _tracker_ranges(self, NULL)
            ranges = <dod_page_range*>PyMem_Malloc(max(<size_t>1, n) * sizeof(dod_page_range))
            if ranges == NULL:
                raise MemoryError()
            _tracker_ranges(self, ranges)
            with nogil:
                err = dod_pages_prefault(ranges, n, nt, &total)
        finally:
            PyMem_Free(ranges)
            _release_tables(self)
        if err != 0:
            raise MemoryError(f"the system could not fault in this tracker's memory ({strerror(err).decode()}); "
                              "contents unchanged")
        return total

    def tick(self, detections, dt=None, sensor=None, *, time=None, covariance=None):
        """Fold in one scan: advance all tracks to its time, then its detections.

        Give the scan's time as exactly one of `dt` (seconds since the previous
        scan) or `time` (its time stamp). One nogil call; allocates nothing
        for arrays of float64, float32, int64 or int32 (see `detections`).

        Parameters
        ----------
        detections : array_like
            Shape (k, dim) (k may be 0) of real numbers: Cartesian positions,
            or with ``sensor`` polar measurements (range, bearing[,
            elevation], or reversed for a ``BEARING_RANGE`` sensor) in metres
            and radians, bearing from the x axis towards y, elevation above
            the x-y plane; with a sensor's ``range_rate_sigma`` a last
            column (k, dim + 1), the range rate in m/s, last in either
            order. Read in place when it is a native-endian, aligned,
            C-contiguous float64 array in the range-bearing order; otherwise
            its first min(k, max_detections) rows are cast to float64 and
            put in range-bearing order once, into the tracker's input buffer
            (:attr:`converted_scans`; dod/tracker/_input.pyx); so also for
            a tracker of ``dtype="float32"``, whose detections stay float64
            in the scratch (its innovation inverses and gate widths are
            float32 where the float32 vector kernels compute them: constant
            velocity, Cartesian scans, the lanes layout). Rows with NaN,
            inf or a value beyond ``dod.tracker.sensor.COORDINATE_LIMIT``
            (2**510; float32: 2**62) (polar: also a negative range or an
            elevation outside [-pi/2, pi/2]) are dropped and counted
            (``invalid``). With more than
            ``max_detections`` rows, overflow="error" raises ValueError and
            overflow="drop" uses the first max_detections (the rest counted
            in ``overflow``).
        dt : float, optional
            Seconds since the previous scan (finite, >= 0; 0: the same
            instant, nothing is predicted). Advances :attr:`time` by dt.
        sensor : dod.tracker.Sensor, optional
            Its position, noise and column order for this scan. Such a scan is
            folded in by an extended Kalman update (dod/tracker/measurement.pxd),
            gated in measurement space, and starts tracks at the converted
            positions with the converted covariance; scans of several sensors
            may follow each other in time order. Its ``pd`` and
            ``clutter_density``, when given, replace the configuration's in
            this scan's scores (:class:`~dod.tracker.Sensor`).
        time : float, optional
            The scan's time stamp (s, finite; keyword only): dt is time less
            :attr:`time` (the first scan: 0), equal stamps are legal; an older
            one is refused (ValueError) or with ``out_of_sequence="drop"``
            skipped and counted (:attr:`late_scans`). No retrodiction.
        covariance : array_like, optional
            Shape (k, dim, dim) (keyword only): each detection row's own
            measurement noise covariance, symmetric and positive definite,
            in the scan's measurement space: the position's (m^2) in place
            of ``config.r``'s r^2 I, or with ``sensor`` the measurement's
            (m^2, rad^2, in the sensor's column order) in place of its
            variances. Each gated pair is then tested against its own
            S = H P H' + R_j (the gate's search box widens to the scan's
            largest variance on each axis, so no pair is missed), and the
            update, a single-point birth's position covariance (R_j,
            converted for a sensor), a waiting detection's covariance and
            pair gate (two-point) and the score's likelihood take R_j. The
            matrices of the rows used are checked and copied once into a
            buffer of the tracker's (dod/tracker/_input.pyx); a row dropped
            as invalid or beyond ``max_detections`` drops its matrix unread.
            With ``motion="imm"`` each model updates with R_j.

        Raises
        ------
        TypeError
            For both or neither of dt and time, None or Python objects as
            detections or a non-numeric dtype, or a sensor that is not a
            Sensor.
        ValueError
            For another shape (0-d included), a negative or non-finite dt, a
            non-finite time or (out_of_sequence="refuse") one before the
            latest scan's; too many rows with overflow="error"; a sensor of
            the other dimension, with a non-finite position or a non-positive
            noise, a pd outside (0, 1) or a clutter density that is not
            positive and finite; a covariance of another shape, with a
            range-rate sensor, or (naming its row) not finite, not symmetric
            (beyond a relative 1e-6) or not positive definite.
        MemoryError
            When a caller-supplied scratch arena cannot hold the tick's
            temporaries.
        RuntimeError
            When another thread's tick of this tracker is running.

        Notes
        -----
        Every check runs before anything changes: the tracker (its clock
        included) is unchanged when it raises. Thread-safety: one tick at a
        time; it releases the GIL while it runs (see the class notes).
        """
        cdef size_t k, over = 0
        cdef int rc, late
        cdef double step = 0.0
        cdef bint reverse
        cdef int cols = self.engine.dim
        cdef const double* data
        cdef dod_sensor sens
        cdef const dod_sensor* sp = NULL
        cdef cnp.ndarray cov = None
        cdef const double* covp = NULL
        cdef double cov_box[3]
        if self.table is None or self.scratch is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if sensor is not None:
            _read_sensor(sensor, self.engine.dim, &sens)
            sp = &sens
            if sens.rate_var > 0.0:     # a last column: the range rate
                cols += 1
        reverse = _columns_reversed(sensor, self.engine.dim)
        cdef cnp.ndarray z = _scan_array(detections, cols)
        k = <size_t>cnp.PyArray_DIM(z, 0)
        if covariance is not None:
            # (the kernels' per-detection noise: dod/tracker/_model.pxd,
            # _cartesian_cov and _polar_cov)
            if cols != self.engine.dim:
                raise ValueError("covariance is not supported with a range-rate sensor (its rows take the "
                                 "sensor's noise)")
            cov = _covariance_array(covariance, k, self._cov_trailing)
        if k > self.engine.max_detections:
            if not self._overflow_drop:
                raise ValueError(
                    f"{k} detections exceed max_detections={self.engine.max_detections} "
                    "(raise it, or use overflow='drop')")
            over = k - self.engine.max_detections
            k = self.engine.max_detections
        late = _scan_step(&self.clock, dt, time, &step)
        if self._busy:
            raise RuntimeError("a tick (or a prefault) of this tracker is already running in another thread")
        if late:
            self.clock.late += 1
            return
        # The tick moves the table's rows without the GIL: it holds the
        # table's exclusive pass, so another thread's insert cannot race the
        # tick's births past the capacity (and a tick waits for its own
        # table's remove_many). The input buffer is written inside it.
        _hold_tables(self, "a Tracker tick")
        try:
            if _read_in_place(z, reverse):
                data = <const double*>cnp.PyArray_DATA(z)
            else:
                _convert_rows(z, k, cols, self.engine.dim if reverse else 0, self._inbuf)
                data = self._inbuf
            if cov is not None:         # (a bad matrix raises here: nothing changed yet)
                if self._covbuf == NULL:
                    self._covbuf_bytes = dod_os_page_round(self.engine.max_detections * self.engine.dim
                                                           * self.engine.dim * sizeof(double))
                    self._covbuf = <double*>dod_os_map(self._covbuf_bytes)
                    if self._covbuf == NULL:
                        self._covbuf_bytes = 0
                        raise MemoryError()
                _convert_covariance(cov, data, k, self.engine.dim, reverse, sensor is not None,
                                    _coord_max(self.engine.cols.single), self._covbuf, cov_box)
                covp = self._covbuf
            if data == self._inbuf:
                self._converted += 1
            with nogil:
                rc = dod_tracker_tick_cov(&self.engine, data, k, step, sp, covp, cov_box, &self.scratch.engine)
        finally:
            _release_tables(self)
        if rc != 0:
            raise MemoryError(
                f"the scratch arena ({self.scratch.available} bytes available) cannot hold this "
                "tick's temporaries; nothing changed (dod.tracker.scratch_bytes(config) gives "
                "the worst case)")
        self.engine.last.overflow = over
        if time is None:
            dod_clock_step(&self.clock, step)
        else:
            dod_clock_stamp(&self.clock, time)

    cdef double _track_time(self):
        return self.clock.now           # the track outputs' time: the scan clock

    @property
    def time(self):
        """The scan clock (s, read-only): the latest time-stamped scan's stamp,
        advanced by dt by each dt scan; 0.0 before the first scan (a first
        time-stamped scan sets it to its stamp)."""
        return self.clock.now

    @property
    def late_scans(self):
        """Time-stamped scans skipped as out of sequence so far
        (``out_of_sequence="drop"``; always 0 with "refuse")."""
        return self.clock.late

    @property
    def converted_scans(self):
        """Scans converted into the input buffer so far (not read in place)."""
        return self._converted

    def __repr__(self):
        c = self.engine.last
        return (f"<dod.tracker.Tracker dim={self.engine.dim} tracks={self.engine.table.count} "
                f"confirmed={c.confirmed} scans={self.engine.scans} "
                f"capacity={self.engine.table.capacity}>")
