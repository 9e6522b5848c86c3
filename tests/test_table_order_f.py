"""Column(..., order="F"): a shaped column stored component-major (one lane
per component) behaves as its C-order twin in every table operation, and its
views are zero-copy strided arrays over the lanes."""
import functools
import gc
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cython_build import compile_cython_module
from dod.schema import _rebuild_column
from dod.table import Column, Schema, Table
from test_table import REMOVAL_SOURCE, _bad_calls, _cuts, snapshot

LANES_SOURCE = r"""
from libc.stdint cimport uint8_t, uint32_t, uintptr_t
from libc.stdlib cimport malloc, free
from dod._types cimport dod_index
from dod.table cimport (Table, dod_table, dod_table_lane, dod_table_insert, dod_table_insert_zeroed,
                        dod_table_insert_rows, dod_table_removal, dod_table_remove_flagged,
                        dod_table_swap_rows, dod_table_reorder_scratch_bytes, dod_table_reorder_gather,
                        dod_table_reorder_put)

def layout(Table t, size_t c):
    # (lane_bytes, lanes, the address of every lane)
    cdef size_t k
    return (t.engine.lane_bytes[c], t.engine.lanes[c],
            [<uintptr_t>dod_table_lane(&t.engine, c, k) for k in range(t.engine.lanes[c])])

def lane_columns(Table t):
    return t.engine.lane_columns

def nil_items_zero(Table t, size_t c):
    # item -1 (the nil row) of every lane of column c reads zero
    cdef size_t k, b, w = t.engine.row_bytes[c] // t.engine.lanes[c]
    cdef const char* lane
    for k in range(t.engine.lanes[c]):
        lane = dod_table_lane(&t.engine, c, k)
        for b in range(w):
            if (lane - w)[b] != 0:
                return False
    return True

def insert_one(Table t, bint zeroed):
    with nogil:
        h = dod_table_insert_zeroed(&t.engine) if zeroed else dod_table_insert(&t.engine)
    return h

def insert_rows(Table t, size_t n):
    return dod_table_insert_rows(&t.engine, n)

def remove_flagged(Table t, const uint8_t[:] flag):
    cdef dod_table_removal r
    cdef size_t n = t.engine.count, got
    r.hole = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    r.fill = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    r.slot = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    try:
        with nogil:
            got = dod_table_remove_flagged(&t.engine, &flag[0], 1, &r)
        return got
    finally:
        free(r.hole); free(r.fill); free(r.slot)

def swap(Table t, size_t a, size_t b):
    dod_table_swap_rows(&t.engine, a, b)

def reorder_split(Table t, const uint32_t[:] order, cuts):
    # dod_table_reorder's phases column by column, each over the given
    # ranges in the given order (as workers would take them)
    cdef size_t c, a, b
    cdef char* scratch = <char*>malloc(dod_table_reorder_scratch_bytes(&t.engine) + 1)
    try:
        for c in range(t.engine.ncols + 1):
            for a, b in cuts:
                dod_table_reorder_gather(&t.engine, c, <const dod_index*>&order[0], scratch, a, b)
            for a, b in cuts:
                dod_table_reorder_put(&t.engine, c, scratch, a, b)
    finally:
        free(scratch)
"""


@functools.cache
def _module(source):
    return compile_cython_module(source, Path(tempfile.mkdtemp(prefix="dod_fcol_")))


def lanes_module():
    return _module(LANES_SOURCE)


def walk_schema(order):
    return Schema(
        a=Column("float64", (4,), order=order),
        id="uint32",
        b=Column("int32", (2, 3), order=order),
        c="float32[2]",
    )


SHAPES = {"a": (4,), "id": (), "b": (2, 3), "c": (2,)}
DTYPES = {"a": np.float64, "id": np.uint32, "b": np.int32, "c": np.float32}


# ---------------------------------------------------------------- schema


def test_column_order_attribute_equality_repr_and_pickle():
    f = Column("float64", (2, 3), order="F", name="P")
    c = Column("float64", (2, 3), name="P")
    assert f.order == "F" and c.order == "C"
    assert f != c and hash(f) != hash(c)
    assert Column("float64", (2, 3), order="F", name="P") == f
    assert "order='F'" in repr(f) and "order" not in repr(c)
    assert Schema(P=f) != Schema(P=c)
    assert Schema(P=f) == Schema([Column("float64", (2, 3), order="F", name="P")])
    assert "order='F'" in repr(Schema(P=f))
    for obj in (f, Schema(P=f, x="uint8")):
        assert pickle.loads(pickle.dumps(obj)) == obj
    assert pickle.loads(pickle.dumps(f)).order == "F"
    # a pickle made before columns had an order rebuilds a C-order column
    assert _rebuild_column(np.dtype("float64"), (2, 3), True, False, "P") == c
    # one component: its lane is the C layout
    s = Column("float64", order="F")
    assert s.order == "C" and s == Column("float64")
    assert Column("float64", (1,), order="F").order == "F"


@pytest.mark.parametrize("order, exc", [("c", ValueError), ("A", ValueError), ("", ValueError),
                                         (None, TypeError), (1, TypeError), (b"F", TypeError)])
def test_column_refuses_bad_orders(order, exc):
    with pytest.raises(exc, match="order"):
        Column("float64", 3, order=order)


# ---------------------------------------------------------------- layout and views


@pytest.mark.parametrize("cap", [1, 5, 8, 64, 100])
def test_lanes_are_aligned_apart_and_lead_with_a_zero_nil_item(cap):
    mod = lanes_module()
    t = Table(walk_schema("F"), cap)
    t.check()
    for name in ("a", "b"):
        c = t.column_index(name)
        lane_bytes, lanes, addr = mod.layout(t, c)
        isz = np.dtype(DTYPES[name]).itemsize
        assert lanes == int(np.prod(SHAPES[name]))
        assert lane_bytes % 64 == 0 and lane_bytes >= cap * isz + isz
        assert all(a % 64 == 0 for a in addr)
        assert [a - addr[0] for a in addr] == [k * lane_bytes for k in range(lanes)]
        assert mod.nil_items_zero(t, c)
    for name in ("id", "c"):          # C order: one lane, the column
        lane_bytes, lanes, addr = mod.layout(t, t.column_index(name))
        assert (lane_bytes, lanes) == (0, 1)
    assert mod.lane_columns(t) == 2 and mod.lane_columns(Table(walk_schema("C"), cap)) == 0
    # the whole lane block is the table's memory, and counted
    assert t.nbytes >= sum(mod.layout(t, t.column_index(n))[0] * mod.layout(t, t.column_index(n))[1]
                           for n in ("a", "b"))
    assert t.bytes_per_row == Table(walk_schema("C"), cap).bytes_per_row


def test_views_are_zero_copy_strided_lanes():
    mod = lanes_module()
    t = Table(walk_schema("F"), 10)
    rng = np.random.default_rng(3)
    a = rng.normal(size=(6, 4))
    b = rng.integers(-99, 99, (6, 2, 3)).astype(np.int32)
    hs = t.insert_many(a=a, b=b, id=np.arange(6), c=np.ones((6, 2)))
    va, vb = t["a"], t["b"]
    lane_a, _, addr_a = mod.layout(t, t.column_index("a"))
    lane_b, _, addr_b = mod.layout(t, t.column_index("b"))
    assert va.shape == (6, 4) and va.strides == (8, lane_a)
    assert vb.shape == (6, 2, 3) and vb.strides == (4, 3 * lane_b, lane_b)
    assert va.ctypes.data == addr_a[0] and vb.ctypes.data == addr_b[0]
    assert not va.flags.c_contiguous and va.flags.writeable and va.flags.aligned
    for k in range(4):
        assert va[:, k].flags.c_contiguous and va[:, k].ctypes.data == addr_a[k]
    for i in range(2):
        for j in range(3):
            assert vb[:, i, j].flags.c_contiguous and vb[:, i, j].ctypes.data == addr_b[i * 3 + j]
    assert np.array_equal(va, a) and np.array_equal(vb, b)
    assert np.shares_memory(va, t["a"]) and not np.shares_memory(va[:, 0], va[:, 1])
    # one lane block: a view over the whole of it from lane 0's address holds the column
    block = np.lib.stride_tricks.as_strided(va, shape=(4, 10), strides=(lane_a, 8))
    assert np.shares_memory(block, va) and np.array_equal(block[:, :6].T, a)
    va[2, 3] = 7.5                          # writes reach the table
    vb[1, 0, 2] = -5
    assert t.get(hs[2])["a"][3] == 7.5 and t.get(hs[1])["b"][0, 2] == -5
    assert t.views == 2
    with pytest.raises(BufferError):
        t.remove(hs[0])
    t.remove(hs[0], unchecked=True)         # the last row moved into row 0, lane by lane
    assert np.array_equal(va[0], t.get(hs[5])["a"]) and np.array_equal(vb[0], t.get(hs[5])["b"])
    del va, vb, block
    gc.collect()
    assert t.views == 0
    t.check()


def test_nil_row_reads_zero_per_lane_after_use():
    mod = lanes_module()
    t = Table(walk_schema("F"), 4)
    for _ in range(3):
        hs = t.insert_many(a=np.full((4, 4), -1.0), b=np.full((4, 2, 3), -1, np.int32), id=np.arange(4))
        t.remove_many(hs[:2])
        t.clear()
    for name in ("a", "b"):
        assert mod.nil_items_zero(t, t.column_index(name))
    t.check()


def test_insert_broadcast_convert_and_zero_policy():
    mod = lanes_module()
    for order in ("C", "F"):
        t = Table(walk_schema(order), 8)
        h1 = t.insert(a=(1, 2, 3, 4), b=7)                             # one row, b broadcast
        hs = t.insert_many(a=np.float32([[1, 2, 3, 4]]), id=[5, 6, 7])  # a: one row over three; float32 -> float64
        h5 = t.insert_many(b=np.arange(12, dtype=np.int64).reshape(2, 2, 3)[:, :, ::-1])   # not contiguous; int64 fits
        t.update(hs[1], a=[9, 9, 9, 9], b=[[1, 2, 3], [4, 5, 6]])
        got = t.to_numpy()
        assert got["a"].tolist()[:4] == [[1, 2, 3, 4], [1, 2, 3, 4], [9, 9, 9, 9], [1, 2, 3, 4]]
        assert (got["b"][0] == 7).all() and (got["b"][1] == 0).all()
        assert got["b"][2].tolist() == [[1, 2, 3], [4, 5, 6]]
        assert got["b"][4].tolist() == [[2, 1, 0], [5, 4, 3]]
        assert (got["a"][4:] == 0).all()
        if order == "F":
            fb = got
        else:
            cb = got
        # the engine's inserts zero every lane of a row another row left dirty
        t["a"] = 3.0
        t["b"] = np.int32(-2)
        t.remove_many(h5)
        assert mod.insert_one(t, False) and mod.insert_one(t, True) and mod.insert_rows(t, 2) == 2
        assert (t["a"][-4:] == 0).all() and (t["b"][-4:] == 0).all()
        t.check()
    assert fb.tobytes() == cb.tobytes()
    assert h1 and len(hs) == 3


def test_bad_input_leaves_an_f_order_table_unchanged():
    schema = Schema(pos=Column("float32", 3, order="F"), id="uint32", w=Column("float64", finite=True),
                    flags="uint8")
    t = Table(schema, 8)
    other = Table(schema, 8)
    hs = t.insert_many(pos=np.arange(9).reshape(3, 3), id=[1, 2, 3], w=[0.5, 1.5, 2.5])
    ho = other.insert_many(n=3)
    t.remove(hs[0])
    t.insert(id=4)
    live = int(hs[1])
    for exc, call in _bad_calls(t, int(ho[1]), live):
        before = snapshot(t)
        with pytest.raises(exc):
            call()
        assert snapshot(t)[:2] == before[:2], call
        t.check()
    with pytest.raises(ValueError):
        t.insert_many(pos=np.full((2, 3), 1.0), n=2, w=[1.0, np.nan])
    with pytest.raises(MemoryError):
        t.insert_many(pos=np.zeros((9, 3)))
    assert t["pos"].tolist() == [[6, 7, 8], [3, 4, 5], [0, 0, 0]]


# ---------------------------------------------------------------- Arrow


def test_arrow_export_copies_f_columns_into_rows():
    pa = pytest.importorskip("pyarrow")
    tables = {}
    for order in ("C", "F"):
        t = Table(walk_schema(order), 8)
        t.insert_many(a=np.arange(20.0).reshape(5, 4), b=np.arange(30, dtype=np.int32).reshape(5, 2, 3),
                      id=np.arange(5), c=np.arange(10, dtype=np.float32).reshape(5, 2))
        t.remove(t.handle(1))
        tables[order] = t
    f, c = pa.record_batch(tables["F"]), pa.record_batch(tables["C"])
    assert f.equals(c) and f.schema == c.schema
    assert f.column("b")[1].as_py() == [[24, 25, 26], [27, 28, 29]]
    assert pa.table(tables["F"]).equals(pa.table(tables["C"]))         # the stream too
    t = tables["F"]
    assert t.views >= 1                     # the export pins the zero-copy columns
    with pytest.raises(BufferError):
        t.clear()
    t["a"][0, 0] = 100.0                    # an F column's export is a copy, taken at export time
    assert f.column("a")[0].as_py()[0] == 0.0
    t["id"][0] = 100                        # a C column's is the table's memory
    assert f.column("id")[0].as_py() == 100
    del f, c
    gc.collect()
    assert t.views == 0
    empty = Table(walk_schema("F"), 2)
    assert pa.record_batch(empty).num_rows == 0


# ---------------------------------------------------------------- the engine's batch paths


def test_batch_removal_over_any_split_matches_c_order(tmp_path):
    mod = compile_cython_module(REMOVAL_SOURCE, tmp_path / "removal")
    rng = np.random.default_rng(60)
    for case in range(30):
        cap = int(rng.integers(1, 50))
        n = int(rng.integers(0, cap + 1))
        data = dict(a=rng.normal(size=(n, 4)), b=rng.integers(-9, 9, (n, 2, 3)), id=rng.integers(0, 99, n),
                    c=rng.normal(size=(n, 2)))
        flag = np.where(rng.random(n) < rng.random(), 7, 0).astype(np.uint8)
        births = int(rng.integers(0, cap - n + int((flag == 7).sum()) + 1))
        out = {}
        for order in ("C", "F"):
            t = Table(walk_schema(order), cap)
            t.insert_many(**data)
            res = mod.remove_batch(t, flag, _cuts(rng), _cuts(rng), _cuts(rng), births, _cuts(rng))
            t.check()
            stats = t.stats()
            stats.pop("nbytes")             # (the lanes' padding: F order takes more)
            out[order] = (res, mod.slot_map(t)[1:], t.to_numpy().tobytes(), stats)
        assert out["C"] == out["F"]


def test_reorder_phases_over_any_split_match_c_order():
    mod = lanes_module()
    rng = np.random.default_rng(61)
    for n in (1, 2, 7, 64, 129):
        rec = None
        tables = [Table(walk_schema(o), n) for o in ("C", "F", "F")]
        for t in tables:
            t.insert_many(a=np.arange(4.0 * n).reshape(n, 4), b=np.arange(6 * n, dtype=np.int32).reshape(n, 2, 3),
                          id=np.arange(n), c=np.ones((n, 2)))
            rec = t.to_numpy()
        order = rng.permutation(n)
        tables[0].reorder(order)
        tables[1].reorder(order)
        mod.reorder_split(tables[2], order.astype(np.uint32), _cuts(rng)(n))
        for t in tables:
            t.check()
            assert t.to_numpy().tobytes() == rec[order].tobytes()
            assert np.array_equal(t.rows(t.handles()), np.arange(n))
        assert np.array_equal(tables[1].handles() & 0xFFFFFFFF, tables[0].handles() & 0xFFFFFFFF)


# ---------------------------------------------------------------- model-based walk


class OrderFMachine(RuleBasedStateMachine):
    """A random walk of every operation that moves or writes rows, run on
    the same schema in F order and in C order, against a shadow model
    {F handle: row values}: the two tables hold the same bytes, slots and
    statistics after each step, and both match the model."""

    CAP = 9

    def __init__(self):
        super().__init__()
        self.mod = lanes_module()
        self.f = Table(walk_schema("F"), self.CAP)
        self.c = Table(walk_schema("C"), self.CAP)
        self.model = {}           # F handle -> {name: ndarray}
        self.twin = {}            # F handle -> C handle
        self.seq = 0

    def _rows(self, k, cols):
        self.seq += 1
        out = {}
        for name in cols:
            shape = (k,) + SHAPES[name]
            out[name] = (np.arange(int(np.prod(shape))).reshape(shape) + self.seq * 100).astype(DTYPES[name])
        return out

    def _record(self, hf, hc, given, i):
        self.model[int(hf)] = {name: (given[name][i].copy() if name in given
                                      else np.zeros(SHAPES[name], DTYPES[name])) for name in SHAPES}
        self.twin[int(hf)] = int(hc)

    def _both(self, call):
        return call(self.f), call(self.c)

    @rule(cols=st.sets(st.sampled_from(sorted(SHAPES))))
    def insert(self, cols):
        vals = {k: v[0] for k, v in self._rows(1, cols).items()}
        if len(self.model) == self.CAP:
            for t in (self.f, self.c):
                with pytest.raises(MemoryError):
                    t.insert(**vals)
            return
        hf, hc = self._both(lambda t: t.insert(**vals))
        self._record(hf, hc, {k: v[None] for k, v in vals.items()}, 0)

    @rule(k=st.integers(0, 5), cols=st.sets(st.sampled_from(sorted(SHAPES))), one=st.booleans())
    def insert_many(self, k, cols, one):
        vals = self._rows(k, cols)
        if one and k:
            vals = {name: v[0] for name, v in vals.items()}        # one row, broadcast to k
            given = {name: np.broadcast_to(v, (k,) + v.shape) for name, v in vals.items()}
        else:
            given = vals
        if len(self.model) + k > self.CAP:
            for t in (self.f, self.c):
                with pytest.raises(MemoryError):
                    t.insert_many(vals, n=k)
            return
        hf, hc = self._both(lambda t: t.insert_many(vals, n=k))
        for i in range(k):
            self._record(hf[i], hc[i], given, i)

    @rule(zeroed=st.booleans(), k=st.integers(0, 3))
    def engine_insert(self, zeroed, k):
        # the cimport inserts: the zero policy clears every lane of the new rows
        if len(self.model) + k > self.CAP:
            return
        for _ in range(k):
            self._both(lambda t: self.mod.insert_one(t, zeroed))
        if k:
            self._both(lambda t: self.mod.insert_rows(t, 1))
        self._adopt_new_rows()

    def _adopt_new_rows(self):
        hf, hc = self.f.handles().tolist(), self.c.handles().tolist()
        for a, b in zip(hf, hc):
            if a not in self.model:
                self._record(a, b, {}, 0)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        h = data.draw(st.sampled_from(sorted(self.model)))
        self.f.remove(h)
        self.c.remove(self.twin.pop(h))
        del self.model[h]

    @rule(data=st.data())
    def remove_many(self, data):
        hs = data.draw(st.lists(st.sampled_from(sorted(self.model)), unique=True)) if self.model else []
        self.f.remove_many(hs)
        self.c.remove_many([self.twin.pop(h) for h in hs])
        for h in hs:
            del self.model[h]

    @rule(data=st.data())
    def remove_flagged(self, data):
        n = len(self.model)
        flag = np.asarray(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)) + [0], np.uint8)
        gone = [int(h) for h, f in zip(self.f.handles(), flag) if f]
        assert self.mod.remove_flagged(self.f, flag) == self.mod.remove_flagged(self.c, flag) == len(gone)
        for h in gone:
            del self.model[h]
            del self.twin[h]

    @rule(data=st.data(), split=st.booleans())
    def reorder(self, data, split):
        order = np.asarray(data.draw(st.permutations(range(len(self.model)))), np.int64)
        if split and len(order):
            cuts = _cuts(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))))(len(order))
            self.mod.reorder_split(self.f, order.astype(np.uint32), cuts)
            self.mod.reorder_split(self.c, order.astype(np.uint32), cuts)
        else:
            self._both(lambda t: t.reorder(order))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def swap(self, data):
        n = len(self.model)
        a, b = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
        self._both(lambda t: self.mod.swap(t, a, b))

    @rule()
    def clear(self):
        self._both(lambda t: t.clear())
        self.model.clear()
        self.twin.clear()

    @rule(name=st.sampled_from(["a", "b"]), whole=st.booleans())
    def set_column(self, name, whole):
        n = len(self.model)
        value = self._rows(n, [name])[name] if whole else self._rows(1, [name])[name][0]
        for t in (self.f, self.c):
            t[name] = value
        for r, h in enumerate(self.f.handles().tolist()):
            self.model[h][name] = (value[r] if whole else value).copy()

    @precondition(lambda self: self.model)
    @rule(data=st.data(), name=st.sampled_from(["a", "b"]))
    def update(self, data, name):
        h = data.draw(st.sampled_from(sorted(self.model)))
        v = self._rows(1, [name])[name][0]
        self.f.update(h, {name: v})
        self.c.update(self.twin[h], {name: v})
        self.model[h][name] = v

    @precondition(lambda self: self.model)
    @rule(data=st.data(), name=st.sampled_from(["a", "b"]))
    def write_view(self, data, name):
        # a write through the strided view lands in the lanes
        n = len(self.model)
        r = data.draw(st.integers(0, n - 1))
        v = self._rows(1, [name])[name][0]
        self.f[name][r] = v
        self.c[name][r] = v
        self.model[int(self.f.handle(r))][name] = v

    @invariant()
    def tables_match_each_other_and_the_model(self):
        f, c = self.f, self.c
        f.check()
        c.check()
        assert len(f) == len(c) == len(self.model)
        hf, hc = f.handles(), c.handles()
        assert np.array_equal(hf & 0xFFFFFFFF, hc & 0xFFFFFFFF)
        assert [self.twin[h] for h in hf.tolist()] == hc.tolist()
        assert f.to_numpy().tobytes() == c.to_numpy().tobytes()
        sf, sc = f.stats(), c.stats()
        assert sf.pop("nbytes") >= sc.pop("nbytes") and sf == sc
        for r, h in enumerate(hf.tolist()):
            got = f.get(h)
            for name in SHAPES:
                assert np.array_equal(got[name], self.model[h][name]), (name, r)
        for name in ("a", "b"):
            assert self.mod.nil_items_zero(f, f.column_index(name))


TestOrderFWalk = OrderFMachine.TestCase
TestOrderFWalk.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
