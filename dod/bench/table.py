"""Table section of ``python -m dod.bench``: batch insert from Python, column
scan, particle churn and Arrow export, each against its baseline in the same
run (Python objects, a list of dicts, a numpy structured array, malloc/free,
pyarrow built from numpy arrays). Kernels: dod/bench/_table_kernels.pyx.

The workloads are also asv benchmarks (asv_bench/benchmarks/bench_table.py),
which import the helpers defined here.
"""
import gc
import random
import time

import numpy as np

from dod.bench import Section, median_of

FIELDS = ("x", "y", "z", "vx", "vy", "vz", "age", "flags")
PARTICLE_DTYPE = np.dtype([(f, np.float32) for f in FIELDS[:-1]] + [("flags", np.uint32)])   # 32 bytes


def particle_schema(zero=True):
    """The benchmark's particle Schema, one column per field of ``PARTICLE_DTYPE``.

    Parameters
    ----------
    zero : bool, default True
        Whether inserts clear the columns.

    Returns
    -------
    Schema

    Notes
    -----
    Thread-safety: builds new objects only; any thread may call it.
    """
    from dod.table import Column, Schema

    return Schema([Column(PARTICLE_DTYPE[f], zero=zero, name=f) for f in FIELDS])


class Particle:
    """The object-per-particle baseline: one Python object per particle.

    Parameters
    ----------
    x, y, z, vx, vy, vz, age, flags
        The fields, stored as given (see Attributes).

    Attributes
    ----------
    x : float
        Position, x.
    y : float
        Position, y.
    z : float
        Position, z.
    vx : float
        Velocity, x.
    vy : float
        Velocity, y.
    vz : float
        Velocity, z.
    age : float
        Seconds alive.
    flags : int
        Flag bits.

    Raises
    ------
    TypeError
        For a missing argument.

    Notes
    -----
    Thread-safety: a plain object; one thread writes it.
    """

    __slots__ = FIELDS

    def __init__(self, x, y, z, vx, vy, vz, age, flags):
        self.x = x
        self.y = y
        self.z = z
        self.vx = vx
        self.vy = vy
        self.vz = vz
        self.age = age
        self.flags = flags


def frame_data(n, seed=0):
    """One frame of n particles as numpy columns.

    Parameters
    ----------
    n : int
        Particles.
    seed : int, default 0
        The random generator's seed.

    Returns
    -------
    dict of str to ndarray
        ``FIELDS`` -> arrays of n values (float32 x7, uint32 flags).

    Notes
    -----
    Thread-safety: builds new objects only; any thread may call it.
    """
    rng = np.random.default_rng(seed)
    cols = {f: rng.standard_normal(n).astype(np.float32) for f in FIELDS[:-1]}
    cols["flags"] = np.ones(n, np.uint32)
    return cols


# ---------------------------------------------------------------- batch insert from Python


def insert_table(table, cols, frames):
    """Per frame: clear the table and insert the frame's rows as one batch.

    Parameters
    ----------
    table : Table
        The table (from :func:`particle_schema`).
    cols : dict of str to ndarray
        The frame (:func:`frame_data`).
    frames : int
        Frames run.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        table.clear()
        table.insert_many(cols)
    return time.perf_counter_ns() - t0


def insert_objects(lists, frames):
    """Per frame: a new list of ``__slots__`` objects (the data already as Python lists).

    Parameters
    ----------
    lists : dict of str to list
        The frame's columns as Python lists.
    frames : int
        Frames run.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    P = Particle
    rows = list(zip(*lists))
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        live = [P(*r) for r in rows]
    del live
    return time.perf_counter_ns() - t0


def insert_dicts(lists, frames):
    """Per frame: a new list of dicts (the data already as Python lists).

    Parameters
    ----------
    lists : dict of str to list
        The frame's columns as Python lists.
    frames : int
        Frames run.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    rows = list(zip(*lists))
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        live = [{"x": x, "y": y, "z": z, "vx": vx, "vy": vy, "vz": vz, "age": a, "flags": fl}
                for x, y, z, vx, vy, vz, a, fl in rows]
    del live
    return time.perf_counter_ns() - t0


def insert_structured(cols, frames):
    """Per frame: a new numpy structured array (array of structs) filled field by field.

    Parameters
    ----------
    cols : dict of str to ndarray
        The frame (:func:`frame_data`).
    frames : int
        Frames run.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    n = len(cols["x"])
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        arr = np.empty(n, PARTICLE_DTYPE)
        for f, v in cols.items():
            arr[f] = v
    return time.perf_counter_ns() - t0


# ---------------------------------------------------------------- column scan from Python


def scan_objects(objs, reps):
    """Sum ``p.x`` over Python objects, `reps` times.

    Parameters
    ----------
    objs : list
        Objects with an ``x`` attribute.
    reps : int
        Passes.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        s = 0.0
        for p in objs:
            s += p.x
    return time.perf_counter_ns() - t0


def scan_numpy(arr, reps):
    """Sum a numpy array, `reps` times.

    Parameters
    ----------
    arr : ndarray
        The column.
    reps : int
        Passes.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        arr.sum()
    return time.perf_counter_ns() - t0


def scan_table_python(table, reps):
    """Sum the table's ``x`` column from Python, `reps` times.

    Parameters
    ----------
    table : Table
        The table (from :func:`particle_schema`).
    reps : int
        Passes.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        table["x"].sum()
    return time.perf_counter_ns() - t0


# ---------------------------------------------------------------- churn with Python objects


def py_churn(live0, frames, born, seed):
    """Particle churn with Python objects in a list (swap-remove): the baseline.

    Parameters
    ----------
    live0 : int
        Particles alive at the start.
    frames : int
        Frames run.
    born : int
        Particles born per frame (about as many die).
    seed : int
        Seed of the deaths' random choice.

    Returns
    -------
    ns : int
        Nanoseconds for all frames.
    ops : int
        Births and deaths counted.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    rng = random.Random(seed)
    P = Particle
    live = [P(float(k & 0xFF), 0.0, 0.0, 1.0, -1.0, 0.5, 0.0, 1) for k in range(live0)]
    ops = 0
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        for k in range(born):
            live.append(P(float(k & 0xFF), float((k >> 8) & 0xFF), 0.0, 1.0, -1.0, 0.5, 0.0, 1))
        n = len(live)
        kill = max(0, min(n, n - live0 - born // 2 + rng.randrange(born + 1)))
        for _ in range(kill):
            j = rng.randrange(len(live))
            live[j] = live[-1]
            live.pop()
        ops += born + kill
    return time.perf_counter_ns() - t0, ops


# ---------------------------------------------------------------- Arrow export


def export_capsules(table, reps):
    """Calls of ``table.__arrow_c_array__()``.

    Parameters
    ----------
    table : Table
        The table (from :func:`particle_schema`).
    reps : int
        Calls.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    f = table.__arrow_c_array__
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        f()
    return time.perf_counter_ns() - t0


def export_stream(table, reps):
    """Calls of ``table.__arrow_c_stream__()``.

    Parameters
    ----------
    table : Table
        The table (from :func:`particle_schema`).
    reps : int
        Calls.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    f = table.__arrow_c_stream__
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        f()
    return time.perf_counter_ns() - t0


def pyarrow_from_table(pa, table, reps):
    """Calls of ``pa.record_batch(table)`` (zero copy, through the PyCapsule interface).

    Parameters
    ----------
    pa : module
        ``pyarrow``.
    table : Table
        The table (from :func:`particle_schema`).
    reps : int
        Calls.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        pa.record_batch(table)
    return time.perf_counter_ns() - t0


def pyarrow_from_numpy(pa, cols, reps):
    """Calls of ``pa.record_batch`` from numpy arrays (the baseline).

    Parameters
    ----------
    pa : module
        ``pyarrow``.
    cols : dict of str to ndarray
        The columns.
    reps : int
        Calls.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    names = list(cols)
    arrays = list(cols.values())
    t0 = time.perf_counter_ns()
    for _ in range(reps):
        pa.record_batch(arrays, names=names)
    return time.perf_counter_ns() - t0


# ---------------------------------------------------------------- the section


def run(quick=False):
    """The table section of ``python -m dod.bench``: batch insert from Python, column
    scan, particle churn and Arrow export.

    Parameters
    ----------
    quick : bool, default False
        Fewer iterations and repeats (noisier numbers).

    Returns
    -------
    list of Section
        The section's tables, each against its baseline measured in the same
        run, as ``python -m dod.bench`` prints them.

    Raises
    ------
    ImportError
        When the section's compiled kernels are not built.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench import _table_kernels as K
    from dod.table import Table

    rep = 3 if quick else 7
    sections = []

    # -- batch insert of 1,000 rows per frame from Python
    n = 1000
    frames = 200 if quick else 1000
    cols = frame_data(n)
    lists = [cols[f].tolist() for f in FIELDS]
    table = Table(particle_schema(), n)
    s = Section("table: insert 1,000 particles per frame from Python (8 fields)", "__slots__ objects",
                per="frame", goal=">= 50x the objects")
    v = median_of(lambda: insert_table(table, cols, frames), rep) / frames
    s.add("Table.clear() + insert_many(8 numpy columns)", v / 1000, "us", "one batch; handles returned")
    v = median_of(lambda: insert_structured(cols, frames), rep) / frames
    s.add("numpy structured array, filled per field", v / 1000, "us", "no handles, no removal")
    pyframes = max(frames // 10, 20)
    gc.collect()
    v = median_of(lambda: insert_objects(lists, pyframes), rep) / pyframes
    s.add("__slots__ objects", v / 1000, "us", "data pre-converted to Python lists (untimed)")
    v = median_of(lambda: insert_dicts(lists, pyframes), rep) / pyframes
    s.add("list of dicts", v / 1000, "us", "data pre-converted to Python lists (untimed)")
    sections.append(s)

    # -- column scan: sum one float32 field over 100,000 rows
    n = 100_000
    reps = 200 if quick else 1000
    cols = frame_data(n, seed=1)
    scan_tab = Table(particle_schema(), n)
    scan_tab.insert_many(cols)
    records = np.empty(n, PARTICLE_DTYPE)
    for f in FIELDS:
        records[f] = cols[f]
    objs = [Particle(*r) for r in zip(*[cols[f].tolist() for f in FIELDS])]
    xi = scan_tab.column_index("x")
    s = Section(f"table: column scan, sum one float32 field over {n:,} rows", "list of __slots__ objects",
                per="scan")
    v = median_of(lambda: K.scan_table(scan_tab, xi, reps)[0], rep) / reps
    s.add("table column, nogil C loop (SoA)", v / 1000, "us", f"{n * 4 / v:.1f} GB/s")
    v = median_of(lambda: K.scan_structured(records, PARTICLE_DTYPE.fields["x"][1], reps)[0], rep) / reps
    s.add("structured array, nogil C loop (AoS, 32 B stride)", v / 1000, "us", "same code, stride differs")
    pr = max(reps // 10, 20)
    v = median_of(lambda: scan_table_python(scan_tab, pr), rep) / pr
    s.add('table["x"].sum() from Python', v / 1000, "us", "view + numpy pairwise sum")
    v = median_of(lambda: scan_numpy(records["x"], pr), rep) / pr
    s.add('structured["x"].sum() from Python', v / 1000, "us", "strided numpy sum")
    po = 3 if quick else 10
    v = median_of(lambda: scan_objects(objs, po), 3) / po
    s.add("list of __slots__ objects", v / 1000, "us", "for p in objs: s += p.x")
    sections.append(s)
    del objs

    # -- particle churn on a table
    live0, born = 75_000, 1_000
    frames = 100 if quick else 400
    churn_tab = Table(particle_schema(zero=False), live0 + 4 * born + 16)
    s = Section(f"table: particle churn, {live0:,} live, {born:,} born and ~{born:,} (+-50%) killed per frame",
                "malloc/free", per="frame", goal="churn faster than malloc/free")

    def churn(fn):
        ns, ops, _ = fn()
        return ns / frames, ns / ops

    r = median_of(lambda: churn(lambda: K.churn_table(churn_tab, live0, frames, born, 12345, True)), rep)
    s.add("table: insert + remove by handle (8 columns)", r[0] / 1000, "us", f"{r[1]:.1f} ns per insert/remove")
    r = median_of(lambda: churn(lambda: K.churn_table(churn_tab, live0, frames, born, 12345, False)), rep)
    s.add("table: insert + remove a random row", r[0] / 1000, "us", f"{r[1]:.1f} ns per insert/remove")
    r = median_of(lambda: churn(lambda: K.churn_malloc(live0, frames, born, 12345)), rep)
    s.add("malloc/free", r[0] / 1000, "us", f"{r[1]:.1f} ns per create/destroy")
    pyframes = max(frames // 10, 10)
    ns, ops = py_churn(live0, pyframes, born, 12345)
    s.add("one Python object per particle (__slots__)", ns / pyframes / 1000, "us",
          f"{ns / ops:.1f} ns per create/destroy, cyclic GC on")
    sections.append(s)

    # -- Arrow export of an 8-column table
    n = 1000
    cols = frame_data(n, seed=2)
    arrow_tab = Table(particle_schema(), n)
    arrow_tab.insert_many(cols)
    reps = 20_000 if quick else 100_000
    try:
        import pyarrow as pa
    except ImportError:     # pragma: no cover - bench extra
        pa = None
    s = Section("table: Arrow export of an 8-column table (1,000 rows)",
                "pyarrow.record_batch(8 numpy arrays)" if pa else "__arrow_c_array__()",
                per="export", goal="<= 1 us to produce the capsules")
    v = median_of(lambda: export_capsules(arrow_tab, reps), rep) / reps
    s.add("__arrow_c_array__() (schema + array capsules)", v / 1000, "us", "zero copy; freed unconsumed")
    v = median_of(lambda: export_stream(arrow_tab, reps), rep) / reps
    s.add("__arrow_c_stream__()", v / 1000, "us")
    if pa is not None:
        pr = reps // 20
        v = median_of(lambda: pyarrow_from_table(pa, arrow_tab, pr), rep) / pr
        s.add("pyarrow.record_batch(table)", v / 1000, "us", "zero copy through the capsules")
        v = median_of(lambda: pyarrow_from_numpy(pa, cols, pr), rep) / pr
        s.add("pyarrow.record_batch(8 numpy arrays)", v / 1000, "us", "pyarrow's own numpy path")
    sections.append(s)
    return sections
