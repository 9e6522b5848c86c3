"""asv: struct-of-arrays tables against their baselines, in the same run.

Every goal of the tables issue is here: batch insert of 1,000 rows per frame
from Python against __slots__ objects and a list of dicts (goal >= 50x the
objects), a column scan against a numpy structured array and a list of
objects, the pools issue's particle churn on a table against malloc/free,
the Arrow export of an 8-column table (goal <= 1 us for the capsules), and
the in-place reorder of 100,000 rows (issue 12's locality).
time_* benchmarks use asv's timer; track_* report per-operation costs and
ratios measured in one process. Skipped (NotImplementedError) on commits
without dod.table.
"""
import gc
import time

try:
    import numpy as np

    from dod.bench import _table_kernels as K
    from dod.bench.table import (FIELDS, PARTICLE_DTYPE, Particle, export_capsules, frame_data,
                                 insert_dicts, insert_objects, insert_table, particle_schema, py_churn)
    from dod.table import Table
except ImportError:         # an older commit: nothing to measure
    K = None


def _need():
    if K is None:
        raise NotImplementedError("dod.table not in this commit")


def _median(fn, repeat=5):
    values = sorted(fn() for _ in range(repeat))
    return values[len(values) // 2]


def _timed_ns(fn):
    t0 = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - t0


class InsertBatch:
    """1,000 rows of 8 fields per frame from Python. Goal: >= 50x the __slots__ objects."""

    N = 1000

    def setup(self):
        _need()
        self.cols = frame_data(self.N)
        self.lists = [self.cols[f].tolist() for f in FIELDS]
        self.rows = list(zip(*self.lists))
        self.table = Table(particle_schema(), self.N)

    def time_table_insert_many(self):
        self.table.clear()
        self.table.insert_many(self.cols)

    def time_slots_objects(self):
        P = Particle
        [P(*r) for r in self.rows]

    def time_list_of_dicts(self):
        [{"x": x, "y": y, "z": z, "vx": vx, "vy": vy, "vz": vz, "age": a, "flags": fl}
         for x, y, z, vx, vy, vz, a, fl in self.rows]

    def track_speedup_table_vs_objects(self):
        gc.collect()
        table = _median(lambda: insert_table(self.table, self.cols, 200)) / 200
        objs = _median(lambda: insert_objects(self.lists, 20)) / 20
        return objs / table
    track_speedup_table_vs_objects.unit = "x"
    track_speedup_table_vs_objects.goal = 50.0      # read by asv_bench/plot_history.py

    def track_speedup_table_vs_dicts(self):
        gc.collect()
        table = _median(lambda: insert_table(self.table, self.cols, 200)) / 200
        dicts = _median(lambda: insert_dicts(self.lists, 20)) / 20
        return dicts / table
    track_speedup_table_vs_dicts.unit = "x"


class ColumnScan:
    """Sum one float32 field over 100,000 rows: table column (SoA) vs structured array (AoS) vs objects."""

    N = 100_000
    REPS = 100

    def setup(self):
        _need()
        cols = frame_data(self.N, seed=1)
        self.table = Table(particle_schema(), self.N)
        self.table.insert_many(cols)
        self.records = np.empty(self.N, PARTICLE_DTYPE)
        for f in FIELDS:
            self.records[f] = cols[f]
        self.objs = [Particle(*r) for r in zip(*[cols[f].tolist() for f in FIELDS])]
        self.xi = self.table.column_index("x")
        self.xoff = PARTICLE_DTYPE.fields["x"][1]

    def time_table_column_nogil(self):
        K.scan_table(self.table, self.xi, 1)

    def time_structured_array_nogil(self):
        K.scan_structured(self.records, self.xoff, 1)

    def time_table_column_numpy(self):
        self.table["x"].sum()

    def time_structured_array_numpy(self):
        self.records["x"].sum()

    def time_list_of_objects(self):
        s = 0.0
        for p in self.objs:
            s += p.x

    def track_us_table_column_nogil(self):
        return _median(lambda: K.scan_table(self.table, self.xi, self.REPS)[0]) / self.REPS / 1000
    track_us_table_column_nogil.unit = "us"

    def track_speedup_soa_vs_aos_nogil(self):
        soa = _median(lambda: K.scan_table(self.table, self.xi, self.REPS)[0])
        return _median(lambda: K.scan_structured(self.records, self.xoff, self.REPS)[0]) / soa
    track_speedup_soa_vs_aos_nogil.unit = "x"


class ParticleChurn:
    """The pools issue's churn on a table: 75,000 live, 1,000 born and ~1,000 killed per frame."""

    LIVE, BORN, FRAMES = 75_000, 1_000, 50

    def setup(self):
        _need()
        self.table = Table(particle_schema(zero=False), self.LIVE + 4 * self.BORN + 16)

    def time_table_by_handle(self):
        K.churn_table(self.table, self.LIVE, self.FRAMES, self.BORN, 1, True)

    def time_table_random_row(self):
        K.churn_table(self.table, self.LIVE, self.FRAMES, self.BORN, 1, False)

    def time_malloc_free(self):
        K.churn_malloc(self.LIVE, self.FRAMES, self.BORN, 1)

    def time_python_objects(self):
        py_churn(self.LIVE, 3, self.BORN, 1)

    def track_ns_per_op_table_by_handle(self):
        ns, ops, _ = _median(lambda: K.churn_table(self.table, self.LIVE, self.FRAMES, self.BORN, 1, True))
        return ns / ops
    track_ns_per_op_table_by_handle.unit = "ns"

    def track_speedup_table_by_handle_vs_malloc(self):
        t = _median(lambda: K.churn_table(self.table, self.LIVE, self.FRAMES, self.BORN, 1, True))
        m = _median(lambda: K.churn_malloc(self.LIVE, self.FRAMES, self.BORN, 1))
        return (m[0] / m[1]) / (t[0] / t[1])
    track_speedup_table_by_handle_vs_malloc.unit = "x"


class ArrowExport:
    """Arrow PyCapsule export of an 8-column table. Goal: <= 1 us to produce the capsules."""

    N = 1000

    def setup(self):
        _need()
        self.cols = frame_data(self.N, seed=2)
        self.table = Table(particle_schema(), self.N)
        self.table.insert_many(self.cols)
        try:
            import pyarrow
        except ImportError:
            pyarrow = None
        self.pa = pyarrow

    def time_arrow_c_array(self):
        self.table.__arrow_c_array__()

    def time_arrow_c_stream(self):
        self.table.__arrow_c_stream__()

    def time_pyarrow_record_batch_from_table(self):
        if self.pa is None:
            raise NotImplementedError("pyarrow not installed")
        self.pa.record_batch(self.table)

    def time_pyarrow_record_batch_from_numpy(self):
        if self.pa is None:
            raise NotImplementedError("pyarrow not installed")
        self.pa.record_batch(list(self.cols.values()), names=list(self.cols))

    def track_us_capsules(self):
        return _median(lambda: export_capsules(self.table, 20_000)) / 20_000 / 1000
    track_us_capsules.unit = "us"
    track_us_capsules.goal = 1.0


class Reorder:
    """Permute 100,000 rows of 8 columns in place, every handle kept
    (Table.reorder: validate the order, then gather and put back each column
    and the slot map), against numpy doing the gather alone: the same
    columns as arrays (c[:] = c[order]) and as one structured array."""

    N = 100_000

    def setup(self):
        _need()
        if not hasattr(Table, "reorder"):
            raise NotImplementedError("Table.reorder not in this commit")
        cols = frame_data(self.N, seed=3)
        self.table = Table(particle_schema(), self.N)
        self.table.insert_many(cols)
        self.order = np.random.default_rng(4).permutation(self.N)
        self.cols = list(cols.values())
        self.aos = np.zeros(self.N, PARTICLE_DTYPE)
        for f, c in cols.items():
            self.aos[f] = c

    def time_table_reorder(self):
        self.table.reorder(self.order)

    def time_numpy_columns_gather(self):
        for c in self.cols:
            c[:] = c[self.order]

    def time_structured_array_gather(self):
        self.aos[:] = self.aos[self.order]

    def track_ns_per_row_table_reorder(self):
        return _median(lambda: _timed_ns(lambda: self.table.reorder(self.order))) / self.N
    track_ns_per_row_table_reorder.unit = "ns"


class _RowMoves:
    """The tables RowMovesByOrder and RowMovesByOrderRatio time: a track
    table's state (float64[4]) and packed covariance (float64[10]) beside
    six scalar columns, 100,000 rows, in C order and in F order."""

    N = 100_000

    def _tables(self):
        _need()
        from dod.table import Column, Schema
        try:
            Column("float64", 2, order="F")
        except TypeError:
            raise NotImplementedError("Column(order=...) not in this commit") from None
        rng = np.random.default_rng(5)
        self.x = rng.normal(size=(self.N, 4))
        self.P = rng.normal(size=(self.N, 10))
        self.order = rng.permutation(self.N)
        self.kill = rng.choice(self.N, self.N // 10, replace=False)
        self.tables = {}
        for o in ("C", "F"):
            kw = {"order": "F"} if o == "F" else {}
            schema = Schema(id="uint64", x=Column("float64", 4, **kw), P=Column("float64", 10, **kw),
                            hits="uint32", misses="uint32", age="uint32", status="uint8", score="float64")
            t = Table(schema, self.N)
            t.insert_many(x=self.x, P=self.P, id=np.arange(self.N))
            self.tables[o] = t

    def _reorder(self, t):
        t.reorder(self.order)

    def _churn(self, t):
        t.remove_many(t.handles()[self.kill])
        t.insert_many(n=len(self.kill))

    def _fill(self, t):
        t.clear()
        t.insert_many(x=self.x, P=self.P)


class RowMovesByOrder(_RowMoves):
    """What component-major columns (Column(..., order="F")) cost the table
    operations that move rows, against the same table in C order (_RowMoves):
    reorder all rows; remove 10% (the last row fills each hole) and insert
    them back; fill the table from row-major arrays."""

    params = ["C", "F"]
    param_names = ["order"]

    def setup(self, order):
        self._tables()
        self.table = self.tables[order]

    def time_reorder(self, order):
        self._reorder(self.table)

    def time_remove_insert_10pct(self, order):
        self._churn(self.table)

    def time_insert_many(self, order):
        self._fill(self.table)


class RowMovesByOrderRatio(_RowMoves):
    """RowMovesByOrder's operations: the F-order time over the C-order time
    (medians of 7 each, in one process)."""

    def setup(self):
        self._tables()

    def _ratio(self, op):
        f = _median(lambda: _timed_ns(lambda: op(self.tables["F"])), 7)
        c = _median(lambda: _timed_ns(lambda: op(self.tables["C"])), 7)
        return f / c

    def track_ratio_f_over_c_reorder(self):
        return self._ratio(self._reorder)
    track_ratio_f_over_c_reorder.unit = "ratio"

    def track_ratio_f_over_c_remove_insert(self):
        return self._ratio(self._churn)
    track_ratio_f_over_c_remove_insert.unit = "ratio"

    def track_ratio_f_over_c_insert_many(self):
        return self._ratio(self._fill)
    track_ratio_f_over_c_insert_many.unit = "ratio"
