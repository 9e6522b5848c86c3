"""Configure: a TrackerConfig and a Sensor read into the engine's struct.

The owner (Tracker in _engine.pyx) makes the tables and arenas; this module
fills the engine's columns, parameters and options from the configuration
(_read_config), re-checks and reads a scan's Sensor (_read_sensor), and
sizes the scratch a tick needs (scratch_bytes: the frame with every option
on, or the spatial sort's, when larger). It also defines the track table's
schema (track_schema), which both read.

Threads: called by the owner with the GIL held, never inside a tick.
"""
from libc.math cimport isfinite, log
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memset

from dod.table cimport Table, dod_table
from dod.tracker.imm cimport dod_imm, DOD_IMM_MODELS
from dod.tracker.measurement cimport dod_sensor
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _tick, _cell_sort, _carver, _carve, _cell_sort_carve, _frame_carve, _CLUSTER_BYTES

import numpy as np


cdef size_t _sort_bytes(size_t rows, size_t row_bytes) noexcept:
    """The spatial sort's scratch over `rows` rows whose widest column takes
    row_bytes a row (_spatial_sort: its work arrays and one gathered column)."""
    cdef _carver c
    cdef _cell_sort m
    c.arena = NULL
    c.bytes = 0
    c.ok = True
    _cell_sort_carve(&c, rows, 0, &m)
    _carve(&c, rows * row_bytes, 1)
    return c.bytes


cdef size_t _scratch_bytes(size_t cap, size_t dmax, int dim) noexcept:
    """Worst-case temporaries of one tick (the frame with every option on),
    plus room for cluster matrices; or the spatial sort's, when larger (it
    reuses the same bytes after the tick)."""
    cdef _tick k
    cdef _carver c
    c.arena = NULL
    c.bytes = 0
    c.ok = True
    _frame_carve(&k, &c, cap, dmax, dmax, dim, True, dim + 1)      # (a range rate's: the widest)
    # The covariance is the widest column: dim (2 dim + 1) values packed.
    return max(c.bytes + _CLUSTER_BYTES + (1 << 16), _sort_bytes(cap, dim * (2 * dim + 1) * 8))


def scratch_bytes(config):
    """Bytes of scratch arena a tick may need at this configuration.

    The worst case at the config's ``capacity`` and ``max_detections`` (every
    option's temporaries, 16 MiB for cluster cost matrices, or the spatial
    sort's work arrays when larger). A :class:`Tracker` makes its own scratch
    arena of this size; size a shared one with it, e.g.
    ``Loop(step, scratch_bytes=scratch_bytes(cfg))`` when the tracker borrows
    the loop's scratch (``Tracker(cfg, scratch=loop.scratch)``). Anonymous
    pages cost nothing until a tick touches them.

    Parameters
    ----------
    config : TrackerConfig
        The configuration the tracker will run.

    Returns
    -------
    int
        Bytes. A smaller arena still works for scans below the worst case; a
        tick that does not fit raises MemoryError and changes nothing, and a
        large cluster may go greedy where the full size would have solved it
        exactly (Tracker's notes).

    Raises
    ------
    TypeError
        For anything but a TrackerConfig.

    Notes
    -----
    Thread-safety: any thread (a pure function of `config`).

    Examples
    --------
    >>> from dod.tracker import TrackerConfig, scratch_bytes
    >>> small, large = scratch_bytes(TrackerConfig(capacity=1_000)), scratch_bytes(TrackerConfig(capacity=100_000))
    >>> small < large
    True
    """
    from dod.tracker.config import TrackerConfig
    if not isinstance(config, TrackerConfig):
        raise TypeError(f"config must be a TrackerConfig, got {type(config).__name__}")
    return _tracker_scratch_bytes(config)


cdef size_t _imm_sort_bytes(config):
    """The spatial sort's scratch when the IMM's Pm column is the widest row."""
    cdef size_t N = 2 * config.dim + 1
    if config.motion != "imm":
        return 0
    return _sort_bytes(config.capacity, DOD_IMM_MODELS * N * N * 8)


cdef size_t _tracker_scratch_bytes(object config) except? 0:
    """What scratch_bytes returns: the tick's worst case, or the IMM's sort's when larger."""
    return max(_scratch_bytes(config.capacity, config.max_detections, config.dim), _imm_sort_bytes(config))


cdef void _strides(const dod_table* t, size_t c, size_t item, size_t* rs, size_t* es) noexcept:
    """The row and element strides, in elements of `item` bytes, of column
    c (dod_track_cols): a row's values together, or one lane per element."""
    if t.lane_bytes[c] == 0:
        rs[0] = t.row_bytes[c] // item
        es[0] = 1
    else:
        rs[0] = 1
        es[0] = t.lane_bytes[c] // item


cdef int _read_config(dod_tracker* e, object config, Table table, Table singles) except -1:
    """Fill e's columns, parameters and options from a TrackerConfig (which
    validated them) and the owner's two tables (`table`: track_schema's
    columns; `singles`: columns z, C, allowance). Allocates nothing; the owner keeps
    the memory (the tables, the displaced bytes, the workers' arenas)."""
    e.table = &table.engine
    e.cols.id = <uint64_t*>table.engine.columns[table.column_index("id")]
    cdef size_t cx = table.column_index("x"), cP = table.column_index("P")
    e.cols.single = config.dtype == "float32"
    if e.cols.single:
        e.cols.xf = <float*>table.engine.columns[cx]
        e.cols.Pf = <float*>table.engine.columns[cP]
    else:
        e.cols.x = <double*>table.engine.columns[cx]
        e.cols.P = <double*>table.engine.columns[cP]
    _strides(&table.engine, cx, sizeof(float) if e.cols.single else sizeof(double), &e.cols.xr, &e.cols.xs)
    _strides(&table.engine, cP, sizeof(float) if e.cols.single else sizeof(double), &e.cols.Pr, &e.cols.Ps)
    e.cols.hits = <uint32_t*>table.engine.columns[table.column_index("hits")]
    e.cols.misses = <uint32_t*>table.engine.columns[table.column_index("misses")]
    e.cols.age = <uint32_t*>table.engine.columns[table.column_index("age")]
    e.cols.history = <uint32_t*>table.engine.columns[table.column_index("history")]
    e.cols.state = <uint8_t*>table.engine.columns[table.column_index("status")]
    e.cols.score = <double*>table.engine.columns[table.column_index("score")]
    e.cols.score_max = <double*>table.engine.columns[table.column_index("score_max")]
    if config.motion == "imm":
        _init_imm(&e.imm, config, table)
    e.singles = &singles.engine
    e.single_z = <double*>singles.engine.columns[singles.column_index("z")]
    e.single_C = <double*>singles.engine.columns[singles.column_index("C")]
    e.single_allowance = <double*>singles.engine.columns[singles.column_index("allowance")]
    e.score_logic = config.confirmation == "score"
    e.two_point = config.initiation == "two_point"
    e.log_pd = log(config.pd)
    e.log_miss = log(1.0 - config.pd)
    e.log_birth = log(config.new_target_density)
    e.score_confirm = config.confirm_threshold
    e.score_delete = config.delete_threshold
    e.score_drop = config.score_drop
    e.v_max = config.v_max
    e.pair_factor = config.pair_radius_factor
    e.pair_noise = config.pair_radius_factor * config.r
    e.clutter_fixed = config.clutter_density is not None
    e.clutter = config.clutter_density if e.clutter_fixed else 0.0
    e.volume = config.surveillance_volume or 0.0
    e.clutter_w = config.clutter_smoothing
    e.max_detections = config.max_detections
    e.dim = config.dim
    e.n = 2 * config.dim
    e.q = config.q
    e.r = config.r
    e.v0 = config.v0
    e.gate = config.gate
    e.confirm_m = config.confirm_m
    e.confirm_n = config.confirm_n
    e.max_misses = config.max_misses
    e.max_cluster = config.max_cluster
    e.next_id = 1
    e.sort_every = config.sort_every
    e.sort_when_mixed = config.sort_when_mixed
    e.sort_when_displaced = config.sort_when_displaced
    e.sort_when_drifted = config.sort_when_drifted
    e.confirmed_first = config.confirmed_first
    e.threads = config.threads
    e.min_rows = config.parallel_min_rows
    return 0


cdef void _init_imm(dod_imm* m, config, Table table) except *:
    """The IMM's parameters (validated by TrackerConfig) and column pointers."""
    cdef int i
    m.models = DOD_IMM_MODELS
    m.N = 2 * config.dim + 1
    m.q[0] = config.imm_q[0]
    m.q[1] = config.imm_q[1]
    m.q[2] = config.turn_q
    m.qw = config.turn_rate_q
    m.w0var = config.turn_rate_v0 * config.turn_rate_v0
    tr = np.asarray(config.imm_transition, dtype=np.float64).ravel()
    for i in range(DOD_IMM_MODELS * DOD_IMM_MODELS):
        m.trans[i] = tr[i]
    m.timed = config.imm_rates is not None      # then trans is made for each tick's dt
    if m.timed:
        tr = np.asarray(config.imm_rates, dtype=np.float64).ravel()
        for i in range(DOD_IMM_MODELS * DOD_IMM_MODELS):
            m.rates[i] = tr[i]
    for i in range(DOD_IMM_MODELS):
        m.mu0[i] = float(config.imm_mu0[i])
    m.mu = <double*>table.engine.columns[table.column_index("mu")]
    m.xm = <double*>table.engine.columns[table.column_index("xm")]
    m.Pm = <double*>table.engine.columns[table.column_index("Pm")]


def track_schema(int dim, str motion="cv", str layout="lanes", str dtype="float64"):
    """The track table's Schema: the columns of :attr:`Tracker.table`.

    ``id`` uint64 (0: no track; ids are never reused), ``x`` float64[2*dim]
    (position then velocity), ``P`` float64[dim*(2*dim+1)] (the covariance,
    packed: its upper triangle row by row, :func:`unpack_covariance`),
    ``hits``, ``misses`` (consecutive), ``age`` (scans since birth),
    ``history`` (detection bits, latest in bit 0) as uint32, ``status`` uint8
    (0 none, 1 tentative, 2 confirmed), ``score`` and ``score_max`` float64
    (the track score and its running maximum; 0 unless
    ``confirmation="score"``). With ``motion="imm"`` also ``mu`` float64[3]
    (model probabilities: CV low, CV high, turn), ``xm`` float64[3, 2*dim+1]
    and ``Pm`` float64[3, 2*dim+1, 2*dim+1] (each model's state, position,
    velocity and turn rate, and covariance); ``x`` and ``P`` then hold the
    models' combination. Every column is zeroed on insert (ZII). With
    ``layout="lanes"`` (the default) ``x`` and ``P`` are stored in lanes
    (``order="F"``: each element's values of consecutive tracks together,
    so their views are strided) and the tracker's constant-velocity kernels
    run across tracks; ``"rows"`` keeps each track's values together.
    With ``dtype="float32"`` ``x`` and ``P`` are float32 (in either
    layout); every other column is as above.

    Parameters
    ----------
    dim : int
        Spatial dimensions, 2 or 3.
    motion : str, default "cv"
        ``"cv"`` (constant velocity) or ``"imm"`` (adds the IMM's columns).
    layout : str, default "lanes"
        ``"lanes"`` or ``"rows"``: how ``x`` and ``P`` are stored
        (:class:`ExecutionConfig`'s ``layout``).
    dtype : str, default "float64"
        ``"float64"`` or ``"float32"``: the type of ``x`` and ``P``
        (:class:`FilterConfig`'s ``dtype``).

    Returns
    -------
    dod.table.Schema

    Raises
    ------
    ValueError
        For another dim, motion, layout or dtype.
    TypeError
        For a dim that is not an int or a motion, layout or dtype that is not a str.

    Notes
    -----
    Thread-safety: any thread (a new Schema each call).

    Examples
    --------
    >>> from dod.tracker import track_schema
    >>> track_schema(2).names
    ('id', 'x', 'P', 'hits', 'misses', 'age', 'history', 'status', 'score', 'score_max')
    >>> track_schema(3, "imm")["Pm"].shape
    (3, 7, 7)
    """
    from dod.table import Schema, Column
    if dim not in (2, 3):
        raise ValueError("dim must be 2 or 3")
    if motion not in ("cv", "imm"):
        raise ValueError("motion must be 'cv' or 'imm'")
    n = 2 * dim
    imm = {}
    if motion == "imm":
        imm = dict(mu=(np.float64, (DOD_IMM_MODELS,)), xm=(np.float64, (DOD_IMM_MODELS, n + 1)),
                   Pm=(np.float64, (DOD_IMM_MODELS, n + 1, n + 1)))
    if layout not in ("rows", "lanes"):
        raise ValueError(f"layout must be 'rows' or 'lanes', not {layout!r}")
    # lanes: one per element, consecutive tracks' element together, so that
    # the constant-velocity kernels run over a block of tracks (_vector.pxd)
    order = "F" if layout == "lanes" else "C"
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', not {dtype!r}")
    return Schema(id=np.uint64, x=Column(dtype, (n,), order=order),
                  P=Column(dtype, (n * (n + 1) // 2,), order=order), hits=np.uint32,
                  misses=np.uint32, age=np.uint32, history=np.uint32, status=np.uint8,
                  score=np.float64, score_max=np.float64, **imm)


_COLUMNS = ("id", "x", "P", "hits", "misses", "age", "history", "status", "score", "score_max")
_IMM_COLUMNS = ("mu", "xm", "Pm")


cdef object _Sensor = None


cdef void _read_sensor(object sensor, int dim, dod_sensor* out) except *:
    """Fill `out` from a dod.tracker.Sensor, re-checking its values (a frozen
    dataclass can still be written through object.__setattr__). Allocates
    nothing for a valid sensor."""
    global _Sensor
    cdef int a
    cdef double v
    if _Sensor is None:
        from dod.tracker.sensor import Sensor
        _Sensor = Sensor
    if not isinstance(sensor, _Sensor):
        raise TypeError(f"sensor must be a dod.tracker.Sensor, not {type(sensor).__name__}")
    pos = sensor.position
    if not isinstance(pos, tuple) or len(pos) != dim:
        raise ValueError(f"sensor position must have {dim} coordinates for this {dim}-D tracker, "
                         f"not {pos!r}")
    memset(out, 0, sizeof(dod_sensor))
    for a in range(dim):
        v = pos[a]
        if not isfinite(v):
            raise ValueError(f"sensor position must be finite, not {pos!r}")
        out.pos[a] = v
    for a in range(dim):
        v = sensor.range_sigma if a == 0 else (sensor.bearing_sigma if a == 1 else sensor.elevation_sigma)
        if not (isfinite(v) and v > 0.0):
            raise ValueError(f"sensor noise must be positive and finite, not {v!r}")
        out.var[a] = v * v
    # The sensor's own detection rates (None: the configuration's, 0 here).
    rate = sensor.pd
    if rate is not None:
        v = rate
        if not (v > 0.0 and v < 1.0):
            raise ValueError(f"sensor pd must be in (0, 1) or None, not {rate!r}")
        out.pd = v
    rate = sensor.clutter_density
    if rate is not None:
        v = rate
        if not (isfinite(v) and v > 0.0):
            raise ValueError(f"sensor clutter_density must be positive and finite or None, not {rate!r}")
        out.clutter = v
    # A range rate (the scan's last column): its variance and the log of
    # the clutter's range-rate interval (measurement.pxd: the score's unit).
    if sensor.range_rate_sigma is not None:
        v = sensor.range_rate_sigma
        if not (isfinite(v) and v > 0.0):
            raise ValueError(f"range_rate_sigma must be positive and finite, not {v!r}")
        out.rate_var = v * v
        v = sensor.range_rate_span
        if not (isfinite(v) and v > 0.0):
            raise ValueError(f"range_rate_span must be positive and finite, not {v!r}")
        out.rate_log_span = log(v)
