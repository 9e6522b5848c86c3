"""Tests for dod.table: Schema, Table, handles, zero policy, views, Arrow export."""
import gc
import threading

import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import dod
from dod.arena import Arena
from dod.resource import malloc as malloc_resource
from dod.table import Column, Schema, Table
from prefault_support import needs_proc, rss, run_refused


def walk_schema():
    return Schema(
        pos="float32[3]",
        id="uint32",
        w=Column("float64", zero=False),
        flags="uint8",
    )


def snapshot(t):
    """Everything observable about a table, to check that a failed call changed nothing."""
    s = t.stats()
    s.pop("views")
    return (t.handles().tolist(), t.to_numpy().tobytes(), s)


# ---------------------------------------------------------------- schema


def test_schema_specs_and_dtype():
    s = Schema({"pos": "float32[3]", "cov": ("float64", (6, 6))}, id=np.uint32, flags=Column("u1", zero=False))
    assert s.names == ("pos", "cov", "id", "flags")
    assert s["pos"].shape == (3,) and s["pos"].dtype == np.float32
    assert s["cov"].shape == (6, 6)
    assert s["id"].shape == () and s["id"].zero
    assert not s["flags"].zero
    assert s.row_bytes == 12 + 288 + 4 + 1
    assert s.dtype == np.dtype([("pos", "f4", 3), ("cov", "f8", (6, 6)), ("id", "u4"), ("flags", "u1")])
    assert Schema.from_dtype(s.dtype).names == s.names
    assert Schema(s.dtype)["cov"].shape == (6, 6)
    assert "cov" in s and "nope" not in s and len(s) == 4
    assert s.index("id") == 2
    assert "pos='float32[3]'" in repr(s)
    assert Schema(pos="float32[3]") == Schema(pos=("float32", 3))


@pytest.mark.parametrize(
    "spec, exc",
    [
        (np.dtype([("a", "f4")]), TypeError),     # structured
        (object, TypeError),
        ("U", TypeError),                          # unsized
        (">f8" if np.little_endian else "<f8", TypeError),
        (np.dtype(("f4", 3)), TypeError),          # subarray dtype
        ("float32[0]", ValueError),
        ("float32[]", ValueError),
        (("f4", -1), ValueError),
        ("notadtype", TypeError),
        (("f4", (1,) * 9), ValueError),
    ],
)
def test_schema_refuses(spec, exc):
    with pytest.raises(exc):
        Schema(x=spec)


def test_schema_refuses_structure():
    with pytest.raises(ValueError):
        Schema()
    with pytest.raises(ValueError):
        Schema([Column("f4", name="a"), Column("f4", name="a")])
    with pytest.raises(TypeError):
        Schema(["f4"])
    with pytest.raises(TypeError):
        Schema({1: "f4"})
    with pytest.raises(ValueError):
        Schema({"": "f4"})


# ---------------------------------------------------------------- basics


def test_insert_lookup_remove_and_zii():
    t = Table(walk_schema(), 4)
    assert len(t) == 0 and t.capacity == 4
    h = t.insert(pos=(1, 2, 3), id=7)
    assert h != 0 and h in t
    row = t.get(h)
    assert row["pos"].tolist() == [1, 2, 3] and row["id"] == 7 and row["flags"] == 0
    assert t.row(h) == 0 and t.handle(0) == h
    t.remove(h)
    assert h not in t and len(t) == 0
    with pytest.raises(KeyError):
        t.get(h)
    assert t.get(h, None) is None
    assert t.rows([h, 0]).tolist() == [-1, -1]
    # The slot is reused with a new generation: the old handle stays stale.
    h2 = t.insert()
    assert (h2 & 0xFFFFFFFF) == (h & 0xFFFFFFFF) and h2 != h
    assert h not in t and h2 in t
    assert t.get(h2)["pos"].tolist() == [0, 0, 0]      # ZII: zeroed by policy
    t.update(h2, pos=(4, 5, 6), id=9)
    t.update(h2, {"flags": 3})
    row = t.get(h2)
    assert row["pos"].tolist() == [4, 5, 6] and row["id"] == 9 and row["flags"] == 3
    t.check()


def test_swap_remove_keeps_handles_and_density():
    t = Table(walk_schema(), 8)
    hs = t.insert_many(id=np.arange(1, 6))
    t.remove(hs[1])
    assert t["id"].tolist() == [1, 5, 3, 4]             # the last row moved into the hole
    for h, v in zip(hs[[0, 2, 3, 4]], [1, 3, 4, 5]):
        assert t.get(h)["id"] == v
    assert t.row(hs[4]) == 1
    t.check()


def test_batch_insert_broadcasting_and_n():
    t = Table(walk_schema(), 16)
    hs = t.insert_many(pos=[0, 0, 1], id=[1, 2, 3])       # a row broadcast to every new row
    assert t["pos"].tolist() == [[0, 0, 1]] * 3
    hs2 = t.insert_many(n=2, flags=9)
    assert len(hs2) == 2 and t["flags"][-2:].tolist() == [9, 9]
    hs3 = t.insert_many({"pos": np.ones((2, 1)), "id": np.array([5], np.uint32)})   # trailing 1 broadcasts
    assert t["pos"][-2:].tolist() == [[1, 1, 1]] * 2 and t["id"][-2:].tolist() == [5, 5]
    assert t.insert_many(n=0).tolist() == []
    assert len(t) == 7 and len(set(np.concatenate([hs, hs2, hs3]).tolist())) == 7
    t.check()


def test_zero_policy():
    t = Table(Schema(a="float64", b=Column("float64", zero=False)), 4)
    hs = t.insert_many(a=[1.0, 2.0], b=[3.0, 4.0])
    t.remove_many(hs)
    h = t.insert()
    row = t.get(h)
    assert row["a"] == 0.0                       # meaningful zero: cleared
    # b's bytes are unspecified (the old row, or 0xCD poison in debug builds): not zeroed by policy
    assert row["b"] != 0.0


def test_capacity_exhaustion_all_or_nothing():
    t = Table(walk_schema(), 3)
    t.insert_many(id=[1, 2])
    before = snapshot(t)
    with pytest.raises(MemoryError):
        t.insert_many(id=[3, 4])
    assert snapshot(t)[:2] == before[:2]
    assert t.stats()["failed"] == 1
    t.insert(id=3)
    with pytest.raises(MemoryError):
        t.insert(id=4)
    assert len(t) == 3 and t.stats()["failed"] == 2


def test_stats_and_repr():
    t = Table(walk_schema(), 10)
    hs = t.insert_many(id=np.arange(4))
    t.remove(hs[0])
    s = t.stats()
    assert s["capacity"] == 10 and s["rows"] == 3 and s["peak"] == 4
    assert s["inserts"] == 4 and s["removes"] == 1 and s["failed"] == 0
    assert s["bytes_per_row"] == 12 + 4 + 8 + 1 == t.bytes_per_row
    assert s["nbytes"] >= 10 * t.bytes_per_row
    r = repr(t)
    assert "rows=3/10" in r and "bytes_per_row=25" in r and "pos" in r


def test_columns_are_aligned_and_resources():
    for resource in (None, malloc_resource, Arena(1 << 20).resource()):
        t = Table(Schema(a="uint8", b="float64[3]", c="int16"), 100, resource=resource)
        t.insert_many(n=100)
        for name, col in t.columns().items():
            assert col.ctypes.data % 64 == 0, name
        assert (t["b"] == 0).all()
        t.check()


def test_arena_resource_exhaustion():
    small = Arena(256)
    with pytest.raises(MemoryError):
        Table(Schema(a="float64"), 1000, resource=small.resource())


def test_bad_capacity():
    for cap in (0, -1, 2**31):
        with pytest.raises(ValueError):
            Table(walk_schema(), cap)
    with pytest.raises(TypeError):
        Table(walk_schema(), 1.5)


# ---------------------------------------------------------------- bad input leaves the table unchanged


def _bad_calls(t, other_handle, live):
    return [
        (KeyError, lambda: t.insert(nope=1)),
        (KeyError, lambda: t.insert_many(id=[1, 2], nope=[1, 2])),
        (TypeError, lambda: t.insert(id=1.5)),                          # float into an int column
        (TypeError, lambda: t.insert_many(id=np.array([1.0, 2.0]))),
        (TypeError, lambda: t.insert(pos="abc")),
        (ValueError, lambda: t.insert(id=-1)),                          # does not fit uint32
        (ValueError, lambda: t.insert_many(id=np.array([1, 2**40]))),
        (ValueError, lambda: t.insert(pos=[1, 2])),                     # wrong row shape
        (ValueError, lambda: t.insert_many(pos=np.zeros((2, 4)))),
        (ValueError, lambda: t.insert_many(pos=np.zeros((2, 3, 1, 1)))),
        (ValueError, lambda: t.insert_many(id=[1, 2], flags=[1, 2, 3])),  # mismatched lengths
        (ValueError, lambda: t.insert_many(id=[1, 2], n=3)),
        (ValueError, lambda: t.insert_many(flags=1)),                  # cannot tell n
        (ValueError, lambda: t.insert_many(n=-1)),
        (ValueError, lambda: t.insert(w=np.nan)),                       # finite column
        (ValueError, lambda: t.insert_many(id=[1, 2], w=[1.0, np.inf])),
        (TypeError, lambda: t.insert(1)),
        (TypeError, lambda: t.insert({"id": 1}, id=2)),
        (KeyError, lambda: t.remove(0)),                                # nil
        (KeyError, lambda: t.remove(other_handle)),                     # another table's
        (KeyError, lambda: t.remove(live + (1 << 32))),                 # wrong generation
        (ValueError, lambda: t.remove(-1)),
        (ValueError, lambda: t.remove(2**64)),
        (TypeError, lambda: t.remove("x")),
        (KeyError, lambda: t.remove_many([live, other_handle])),
        (KeyError, lambda: t.remove_many([live, live])),                # repeated
        (ValueError, lambda: t.remove_many([live, -3])),
        (TypeError, lambda: t.remove_many([1.5])),
        (KeyError, lambda: t.update(live, nope=1)),
        (TypeError, lambda: t.update(live, id=0.5)),
        (KeyError, lambda: t.update(other_handle, id=1)),
        (ValueError, lambda: t.update(live, id=7, w=np.nan)),
        (KeyError, lambda: t["nope"]),
        (TypeError, lambda: t[0]),
        (ValueError, lambda: t.__setitem__("pos", np.zeros((99, 3)))),
        (IndexError, lambda: t.handle(99)),
    ]


def test_bad_input_leaves_table_unchanged():
    schema = Schema(pos="float32[3]", id="uint32", w=Column("float64", finite=True), flags="uint8")
    t = Table(schema, 8)
    other = Table(schema, 8)
    hs = t.insert_many(pos=np.arange(9).reshape(3, 3), id=[1, 2, 3], w=[0.5, 1.5, 2.5])
    ho = other.insert_many(n=3)
    t.remove(hs[0])
    t.insert(id=4)
    live = int(hs[1])
    assert int(ho[1]) not in t          # handles of another table are rejected
    for exc, call in _bad_calls(t, int(ho[1]), live):
        before = snapshot(t)
        with pytest.raises(exc):
            call()
        after = snapshot(t)
        assert after[:2] == before[:2], call
        t.check()


def test_foreign_handles_rejected_across_many_tables():
    s = Schema(a="uint8")
    tables = [Table(s, 4) for _ in range(20)]
    handles = [t.insert() for t in tables]
    for i, t in enumerate(tables):
        for j, h in enumerate(handles):
            assert (h in t) == (i == j)


# ---------------------------------------------------------------- views


def test_views_are_zero_copy_and_block_moves():
    t = Table(walk_schema(), 8)
    hs = t.insert_many(id=[1, 2, 3])
    ids = t["id"]
    assert ids.base is not None and ids.flags.writeable
    assert np.shares_memory(ids, t["id"])
    ids[0] = 42
    assert t.get(hs[0])["id"] == 42
    assert t.views == 1                # `ids`; the temporary view above died with its expression
    with pytest.raises(BufferError):
        t.remove(hs[0])
    with pytest.raises(BufferError):
        t.remove_many(hs[:1])
    with pytest.raises(BufferError):
        t.clear()
    assert len(t) == 3
    t.insert(id=4)                      # inserting never moves rows: allowed
    assert ids.tolist() == [42, 2, 3]
    t.remove(hs[0], unchecked=True)     # the view now shows the moved row
    assert ids.tolist() == [4, 2, 3]
    del ids
    gc.collect()
    assert t.views == 0
    t.remove(hs[1])
    t["id"] = 5
    assert t["id"].tolist() == [5, 5]


def test_view_keeps_memory_alive():
    t = Table(walk_schema(), 8)
    t.insert_many(id=[1, 2, 3])
    ids = t["id"]
    del t
    gc.collect()
    assert ids.tolist() == [1, 2, 3]


# ---------------------------------------------------------------- structured arrays


def test_structured_round_trip():
    t = Table(Schema(pos="float32[3]", cov="float64[2,2]", id="uint32"), 10)
    t.insert_many(pos=np.arange(12).reshape(4, 3), cov=np.arange(16.0).reshape(4, 2, 2), id=[4, 3, 2, 1])
    arr = t.to_numpy()
    assert arr.dtype == t.schema.dtype and len(arr) == 4
    assert arr["cov"][1].tolist() == [[4, 5], [6, 7]]
    t2 = Table.from_numpy(arr, capacity=20)
    assert t2.capacity == 20 and t2.schema == t.schema
    assert t2.to_numpy().tobytes() == arr.tobytes()
    t2.insert_many(arr[:2])
    assert len(t2) == 6
    with pytest.raises(TypeError):
        Table.from_numpy(np.zeros(3))
    assert len(Table.from_numpy(arr[:0])) == 0


# ---------------------------------------------------------------- Arrow


ARROW_SCHEMA = dict(
    i8="int8", i16="int16", i32="int32", i64="int64", u8="uint8", u16="uint16", u32="uint32", u64="uint64",
    f16="float16", f32="float32", f64="float64", vec="float32[3]", mat="float64[2,3]", tag="S4",
)


def _arrow_table(n=5):
    t = Table(Schema(ARROW_SCHEMA), 16)
    vals = {name: np.arange(n * (np.prod(t.schema[name].shape) if t.schema[name].shape else 1))
            .reshape((n,) + t.schema[name].shape).astype(t.schema[name].dtype)
            for name in ARROW_SCHEMA if name != "tag"}
    t.insert_many(vals, tag=np.array([b"ab", b"cd", b"ef", b"gh", b"ij"][:n], "S4"))
    return t


def _leaf_address(arr):
    import pyarrow as pa

    while pa.types.is_fixed_size_list(arr.type):
        arr = arr.values
    return arr.buffers()[1].address


def test_pyarrow_zero_copy():
    pa = pytest.importorskip("pyarrow")
    t = _arrow_table()
    batch = pa.record_batch(t)
    assert batch.num_rows == 5 and batch.schema.names == list(ARROW_SCHEMA)
    assert t.views == 1
    assert batch.schema.field("vec").type == pa.list_(pa.field("item", pa.float32(), False), 3)
    assert batch.schema.field("tag").type == pa.binary(4)
    views = t.columns()
    for name in ARROW_SCHEMA:
        assert _leaf_address(batch.column(name)) == views[name].ctypes.data, name
    assert batch.column("mat")[1].as_py() == [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    assert batch.column("tag")[2].as_py() == b"ef\0\0"       # fixed-size binary keeps the padding
    assert batch.column("u64").to_pylist() == [0, 1, 2, 3, 4]
    views["u64"][0] = 99            # the batch reads the table's memory
    assert batch.column("u64")[0].as_py() == 99
    del batch, views
    gc.collect()
    assert t.views == 0
    assert pa.schema(t) == pa.schema(t.schema)
    tbl = pa.table(t)               # through the stream
    assert tbl.num_rows == 5 and _leaf_address(tbl.column("f64").chunk(0)) == t["f64"].ctypes.data
    reader = pa.RecordBatchReader.from_stream(t)
    assert reader.read_all().num_rows == 5
    del tbl, reader
    gc.collect()
    assert t.views == 0


def test_arrow_empty_and_after_removes():
    pa = pytest.importorskip("pyarrow")
    t = _arrow_table()
    t.remove(t.handle(0))
    b = pa.record_batch(t)
    assert b.num_rows == 4 and b.column("i32").to_pylist() == [4, 1, 2, 3]
    del b
    t.clear()
    assert pa.record_batch(t).num_rows == 0


def test_arrow_release_in_another_thread():
    pa = pytest.importorskip("pyarrow")
    t = _arrow_table()
    box = [pa.record_batch(t)]
    th = threading.Thread(target=box.clear)
    th.start()
    th.join()
    gc.collect()
    assert t.views == 0


def test_arrow_capsules_unconsumed_are_released():
    t = _arrow_table()
    for _ in range(3):
        s, a = t.__arrow_c_array__()
        st = t.__arrow_c_stream__()
        assert t.views == 2
        del s, a, st
        assert t.views == 0
    t.__arrow_c_schema__()


def test_arrow_refuses_types_without_zero_copy():
    t = Table(Schema(ok="float32", b="bool"), 4)
    for call in (t.__arrow_c_schema__, t.__arrow_c_array__, t.__arrow_c_stream__):
        with pytest.raises(TypeError, match="bit-packed"):
            call()
    assert t.views == 0


def test_polars_zero_copy():
    pl = pytest.importorskip("polars")
    t = _arrow_table()
    df = pl.DataFrame(t)
    assert df.shape == (5, len(ARROW_SCHEMA))
    assert df["u32"].to_list() == [0, 1, 2, 3, 4]
    assert df["mat"].to_list()[1] == [[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    for name in ("i64", "f64", "u32"):
        assert df[name].to_numpy().ctypes.data == t[name].ctypes.data, name
    assert df["vec"].to_numpy().ctypes.data == t["vec"].ctypes.data
    with pytest.raises(BufferError):
        t.clear()
    del df
    gc.collect()
    assert t.views == 0
    t.clear()


# ---------------------------------------------------------------- model-based walk


class TableMachine(RuleBasedStateMachine):
    """Random insert / insert_many / remove / remove_many / lookup / clear
    against a dict model {handle: row}. Rows hold None for unspecified
    (zero=False, not given) values."""

    CAP = 8

    def __init__(self):
        super().__init__()
        self.t = Table(walk_schema(), self.CAP)
        self.model = {}
        self.dead = []
        self.seq = 0

    def _row(self, given):
        self.seq += 1
        return {
            "pos": tuple(given["pos"]) if "pos" in given else (0.0, 0.0, 0.0),
            "id": given.get("id", 0),
            "w": given.get("w", None),
            "flags": given.get("flags", 0),
        }

    def _values(self, data, k):
        cols = data.draw(st.sets(st.sampled_from(["pos", "id", "w", "flags"])))
        out = {}
        for c in cols:
            if c == "pos":
                out[c] = [tuple(float(self.seq * 10 + i * 3 + j) for j in range(3)) for i in range(k)]
            elif c == "id":
                out[c] = [self.seq * 100 + i for i in range(k)]
            elif c == "w":
                out[c] = [self.seq + i / 8 for i in range(k)]
            else:
                out[c] = [(self.seq + i) % 256 for i in range(k)]
        return out

    @rule(data=st.data())
    def insert(self, data):
        vals = {c: v[0] for c, v in self._values(data, 1).items()}
        if len(self.model) == self.CAP:
            with pytest.raises(MemoryError):
                self.t.insert(**vals)
            return
        h = self.t.insert(**vals)
        assert h != 0 and h not in self.model
        self.model[h] = self._row(vals)

    @rule(data=st.data(), k=st.integers(0, 5))
    def insert_many(self, data, k):
        vals = self._values(data, k)
        if not vals:
            vals_n = {"n": k}
        else:
            vals_n = {}
        if len(self.model) + k > self.CAP:
            with pytest.raises(MemoryError):
                self.t.insert_many(**vals, **vals_n)
            return
        shapes = {"pos": (3,), "id": (), "w": (), "flags": ()}
        batch = {c: (np.asarray(v) if k else np.empty((0,) + shapes[c])) for c, v in vals.items()}
        hs = self.t.insert_many(batch, **vals_n).tolist()
        assert len(hs) == k
        for i, h in enumerate(hs):
            assert h not in self.model
            self.model[h] = self._row({c: v[i] for c, v in vals.items()})

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        h = data.draw(st.sampled_from(sorted(self.model)))
        self.t.remove(h)
        del self.model[h]
        self.dead.append(h)

    @precondition(lambda self: self.dead)
    @rule(data=st.data())
    def remove_stale(self, data):
        h = data.draw(st.sampled_from(self.dead))
        with pytest.raises(KeyError):
            self.t.remove(h)

    @rule(data=st.data(), bad=st.booleans())
    def remove_many(self, data, bad):
        live = sorted(self.model)
        hs = data.draw(st.lists(st.sampled_from(live), unique=True)) if live else []
        if bad:
            choices = [0, 12345]
            if self.dead:
                choices.append(data.draw(st.sampled_from(self.dead)))
            if hs:
                choices.append(hs[0])           # a repeat
            pos = data.draw(st.integers(0, len(hs)))
            hs = hs[:pos] + [data.draw(st.sampled_from(choices))] + hs[pos:]
            with pytest.raises(KeyError):
                self.t.remove_many(hs)
            return
        self.t.remove_many(hs)
        for h in hs:
            del self.model[h]
            self.dead.append(h)

    @rule(data=st.data())
    def lookup(self, data):
        pool = sorted(self.model) + self.dead + [0]
        h = data.draw(st.sampled_from(pool))
        if h in self.model:
            r = self.t.row(h)
            assert self.t.handle(r) == h
        else:
            assert self.t.rows([h]).tolist() == [-1]
            with pytest.raises(KeyError):
                self.t.row(h)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), which=st.sampled_from(["remove", "remove_many", "clear"]))
    def mutate_under_view(self, data, which):
        # A live column view blocks every move of rows; nothing changes.
        h = data.draw(st.sampled_from(sorted(self.model)))
        view = self.t["id"]
        before = snapshot(self.t)
        with pytest.raises(BufferError):
            {"remove": lambda: self.t.remove(h), "remove_many": lambda: self.t.remove_many([h]),
             "clear": self.t.clear}[which]()
        assert snapshot(self.t) == before
        del view

    @precondition(lambda self: self.model)
    @rule(data=st.data(), value=st.integers(0, 2**32 - 1))
    def update(self, data, value):
        h = data.draw(st.sampled_from(sorted(self.model)))
        self.t.update(h, id=value)
        self.model[h]["id"] = value

    @rule()
    def clear(self):
        self.t.clear()
        self.dead.extend(self.model)
        self.model.clear()

    @invariant()
    def matches_model(self):
        t = self.t
        t.check()
        assert len(t) == len(self.model)
        hs = t.handles().tolist()
        assert sorted(hs) == sorted(self.model)         # density: live rows are rows 0..len-1
        cols = t.columns()
        for r, h in enumerate(hs):
            want = self.model[h]
            assert tuple(cols["pos"][r].tolist()) == want["pos"]
            assert cols["id"][r] == want["id"]
            assert cols["flags"][r] == want["flags"]
            if want["w"] is not None:
                assert cols["w"][r] == want["w"]
        del cols
        for h in self.dead[-20:]:
            assert h not in t
        s = t.stats()
        assert s["rows"] == len(self.model) and s["views"] == 0


TestTableWalk = TableMachine.TestCase


# ---------------------------------------------------------------- Cython: nogil loops over columns


CIMPORT_SOURCE = r"""
from libc.stdint cimport uint32_t, uint8_t
from libc.string cimport memset
from dod._types cimport dod_handle
from dod.table cimport (Table, dod_table, dod_table_insert, dod_table_insert_zeroed, dod_table_remove,
                        dod_table_remove_row, dod_table_row, dod_table_handle, dod_table_alive,
                        DOD_TABLE_NIL)


def scan(Table tracks):
    # Sum state[0] over live rows, nogil, through raw column pointers.
    cdef dod_table* t = &tracks.engine
    cdef const double* state = <const double*>t.columns[tracks.column_index("state")]
    cdef double total = 0
    cdef Py_ssize_t r
    with nogil:
        for r in range(<Py_ssize_t>t.count):
            total += state[r * 6]
    return total


def births_and_deaths(Table tracks, int births, uint32_t kill_mod):
    # One nogil tick: insert rows, write columns by handle, remove some while scanning.
    cdef dod_table* t = &tracks.engine
    cdef double* state = <double*>t.columns[tracks.column_index("state")]
    cdef uint32_t* ids = <uint32_t*>t.columns[tracks.column_index("id")]
    cdef uint8_t* hits = <uint8_t*>t.columns[tracks.column_index("hits")]
    cdef dod_handle h
    cdef Py_ssize_t r, i, made = 0
    with nogil:
        for i in range(births):
            h = dod_table_insert(t)
            if h == 0:
                break
            made += 1
            r = dod_table_row(t, h)
            ids[r] = <uint32_t>(t.count)
            state[r * 6] = <double>ids[r]
            hits[r] += 1
        for r in range(<Py_ssize_t>t.count - 1, -1, -1):
            if kill_mod and ids[r] % kill_mod == 0:
                dod_table_remove_row(t, r)
    return made


def nil_lookup(Table tracks, dod_handle h):
    cdef dod_table* t = &tracks.engine
    cdef const double* state = <const double*>t.columns[0]
    cdef Py_ssize_t r
    cdef double first
    with nogil:
        r = dod_table_row(t, h)
        first = state[r * 6]          # the nil row (r = -1) reads zeros
    return r, first, dod_table_alive(t, h)


def remove_handle(Table tracks, dod_handle h):
    cdef bint ok
    with nogil:
        ok = dod_table_remove(&tracks.engine, h)
    return ok


def zii_struct():
    # All-zero engine struct: a valid, empty table of capacity 0.
    cdef dod_table t
    memset(&t, 0, sizeof(dod_table))
    return dod_table_insert(&t), dod_table_row(&t, 1 | (1 << 32)), t.failed
"""


def test_cimport_nogil(compile_cython):
    mod = compile_cython(CIMPORT_SOURCE)
    t = Table(Schema(state="float64[6]", cov="float64[6,6]", id="uint32", hits="uint8", age="int32"), 16)
    assert mod.births_and_deaths(t, 10, 3) == 10
    # ids 1..10 written; multiples of 3 removed by the backwards scan
    assert sorted(t["id"].tolist()) == [1, 2, 4, 5, 7, 8, 10]
    assert mod.scan(t) == float(sum([1, 2, 4, 5, 7, 8, 10]))
    assert (t["hits"] == 1).all() and (t["cov"] == 0).all()
    t.check()
    h = t.handle(2)
    stale = t.handle(0)
    assert mod.remove_handle(t, stale) is True
    assert mod.remove_handle(t, stale) is False
    assert mod.nil_lookup(t, stale) == (-1, 0.0, False)
    r, first, alive = mod.nil_lookup(t, h)
    assert alive and r == t.row(h) and first == t.get(h)["state"][0]
    assert mod.births_and_deaths(t, 100, 0) == 16 - 6     # fills up, then insert returns 0
    assert t.stats()["failed"] == 1
    t.check()
    assert mod.zii_struct() == (0, -1, 1)


def test_example_nogil_step(compile_cython):
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "examples" / "table_nogil.pyx").read_text()
    mod = compile_cython(source)
    t = Table(Schema(pos="float32[3]", vel="float32[3]", age="float32"), 8)
    hs = t.insert_many(vel=[(1, 0, 0), (0, 2, 0), (0, 0, 3)], age=[0.0, 0.95, 0.5])
    assert mod.step(t, 0.1, 1.0) == 1                    # the second particle is now too old
    assert hs[1] not in t and len(t) == 2
    assert t.get(hs[0])["pos"].tolist() == pytest.approx([0.1, 0, 0])
    assert t.get(hs[2])["pos"].tolist() == pytest.approx([0, 0, 0.3])
    t.check()


def test_exclusive_pass_refuses_every_writer_of_rows_and_ends():
    t = Table(Schema(x="float64"), 8)
    h = t.insert(x=1.0)
    with t.exclusive("my batch") as held:
        assert held is t
        for call in (lambda: t.insert(x=2.0), lambda: t.insert_many(x=np.zeros(2)),
                     lambda: t.remove(h), lambda: t.remove_many([h]), lambda: t.clear()):
            with pytest.raises(RuntimeError, match="my batch"):
                call()
        with pytest.raises(RuntimeError, match="my batch"):
            with t.exclusive("second"):
                pass
        assert len(t) == 1 and t.get(h)["x"] == 1.0       # nothing changed
    t.check()
    t.insert(x=2.0)                                          # the pass ended
    assert len(t) == 2


def test_exclusive_pass_ends_on_exception():
    t = Table(Schema(x="float64"), 4)
    with pytest.raises(ZeroDivisionError):
        with t.exclusive():
            1 / 0
    t.insert(x=1.0)
    assert len(t) == 1


CORRUPT_SOURCE = """
from dod.table cimport Table

def write_nil_row(Table t, int column):
    # what no Python caller can do: write the zeroed nil row before a column
    t.engine.columns[column][-1] = 1

def unwrite_nil_row(Table t, int column):
    t.engine.columns[column][-1] = 0
"""


def test_check_raises_invariant_error_on_a_written_nil_row(compile_cython):
    mod = compile_cython(CORRUPT_SOURCE)
    t = Table(Schema(x="float64", n="uint8"), 4)
    t.insert(x=1.0)
    t.check()
    mod.write_nil_row(t, 1)
    with pytest.raises(dod.InvariantError, match="nil row of column 1"):
        t.check()
    mod.unwrite_nil_row(t, 1)
    t.check()


INSERT_ROWS_SOURCE = """
from dod.table cimport Table, dod_table_insert, dod_table_insert_rows, dod_table_remove_row

def insert_rows(Table t, size_t n):
    cdef size_t made
    with nogil:
        made = dod_table_insert_rows(&t.engine, n)
    return made

def insert_each(Table t, size_t n):
    cdef size_t i, made = 0
    with nogil:
        for i in range(n):
            if dod_table_insert(&t.engine) == 0:
                break
            made += 1
    return made

def remove_rows(Table t, rows):
    for r in rows:
        dod_table_remove_row(&t.engine, r)
"""


def test_cimport_insert_rows_is_n_inserts(compile_cython):
    # dod_table_insert_rows(t, n): the same slots, generations, handles and
    # row bytes as n dod_table_insert calls (free-listed slots reused in the
    # same order, zero policy per column), all or nothing when they do not fit.
    mod = compile_cython(INSERT_ROWS_SOURCE)
    schema = Schema(x="float64[3]", P="float64[3,3]", k="uint32", keep=Column("int64", zero=False))
    a, b = Table(schema, 12), Table(schema, 12)
    for t in (a, b):
        t.insert_many(x=np.ones((9, 3)), P=np.ones((9, 3, 3)), k=np.arange(9), keep=np.arange(9) + 100)
        mod.remove_rows(t, [7, 2, 4, 0])                     # slots on the free list, rows moved
    assert mod.insert_rows(a, 5) == 5
    assert mod.insert_each(b, 5) == 5
    ha, hb = a.handles(), b.handles()
    assert ((ha & 0xFFFFFFFF) == (hb & 0xFFFFFFFF)).all()          # the same slots, in the same rows
    assert len(set(((ha >> 32) - (hb >> 32)).tolist())) == 1      # generations: each table's base + the same count
    for name in ("x", "P", "k", "keep"):
        assert np.array_equal(a[name], b[name]), name
    assert (a["x"][5:] == 0).all() and (a["P"][5:] == 0).all() and (a["k"][5:] == 0).all()
    sa, sb = a.stats(), b.stats()
    assert sa == sb and sa["failed"] == 0
    a.check()
    before = (a.handles().tolist(), a["x"].copy())
    assert mod.insert_rows(a, 3) == 0                        # 2 rows left: nothing inserted
    assert a.stats()["failed"] == 1 and len(a) == 10
    assert a.handles().tolist() == before[0] and np.array_equal(a["x"], before[1])
    assert mod.insert_rows(a, 0) == 0 and a.stats()["failed"] == 1
    assert mod.insert_rows(a, 2) == 2 and len(a) == 12
    a.check()


REMOVAL_SOURCE = """
from libc.stdint cimport uint8_t
from libc.stdlib cimport malloc, free
from dod._types cimport dod_index
from dod.table cimport (Table, dod_table_remove_row, dod_table_removal, dod_table_removal_plan,
                        dod_table_removal_move, dod_table_removal_free, dod_table_removal_finish,
                        dod_table_remove_flagged, dod_table_removal_list, dod_table_removal_walk,
                        dod_table_insert_rows, dod_table_zero_rows, dod_table_reusable,
                        dod_table_insert_reusing, dod_table_insert_freed)

def remove_one_by_one(Table t, const uint8_t[:] flag):
    cdef size_t i = t.engine.count
    while i > 0:
        i -= 1
        if flag[i] == 7:
            dod_table_remove_row(&t.engine, i)

def remove_batch(Table t, const uint8_t[:] flag, moves_cuts=None, free_cuts=None, list_cuts=None,
                 size_t insert=0, insert_cuts=None):
    # Without cuts: dod_table_remove_flagged, then dod_table_insert_many of
    # `insert` rows. With them: the phases, the index ranges cut at the
    # given points and each range run in the order given (as workers would
    # take them): the rows listed in ranges (list_cuts, in row order, each
    # range's list put after the last), then the walk; the inserts reusing
    # the freed slots, their maps written over insert_cuts. Returns (moves,
    # removed, inserted, reused).
    cdef dod_table_removal r
    cdef size_t n = t.engine.count, m = 0, k, got, a, b
    r.hole = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    r.fill = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    r.slot = <dod_index*>malloc((n + 1) * sizeof(dod_index))
    try:
        if moves_cuts is None:
            removed = dod_table_remove_flagged(&t.engine, &flag[0], 7, &r)
            got = dod_table_insert_rows(&t.engine, insert)
            return r.moves, removed, got, 0
        if list_cuts is None:
            dod_table_removal_plan(&t.engine, &flag[0], 7, &r)
        else:
            for a, b in sorted(list_cuts(n)):
                m += dod_table_removal_list(&flag[0], 7, a, b, r.fill + m)
            dod_table_removal_walk(&t.engine, &r, m)
        for a, b in moves_cuts(r.moves):
            dod_table_removal_move(&t.engine, &r, a, b)
        for a, b in free_cuts(r.removed):
            dod_table_removal_free(&t.engine, &r, a, b)
        dod_table_removal_finish(&t.engine, &r)
        row0 = t.engine.count
        k = dod_table_reusable(&t.engine, &r, insert)
        got = dod_table_insert_reusing(&t.engine, &r, insert, k)
        if got:
            for a, b in insert_cuts(k):
                dod_table_insert_freed(&t.engine, &r, row0, a, b)
            dod_table_zero_rows(&t.engine, row0, got)
        return r.moves, r.removed, got, k if got else 0
    finally:
        free(r.hole); free(r.fill); free(r.slot)

def insert_rows(Table t, size_t n):
    return dod_table_insert_rows(&t.engine, n)

def slot_map(Table t):
    cdef size_t i
    return (t.engine.free_head, [t.engine.slot_row[i] for i in range(t.engine.capacity + 1)],
            [<int>(t.engine.slot_gen[i] - t.engine.gen_base) if t.engine.slot_gen[i] else -1     # 0: never used
             for i in range(t.engine.capacity + 1)],
            [t.engine.row_slot[i] for i in range(t.engine.count)])
"""


def _cuts(rng):
    """Random cuts of range(n) into ranges, in a shuffled order."""
    def cut(n):
        points = sorted(set([0, n] + rng.integers(0, n + 1, rng.integers(0, 6)).tolist()))
        ranges = list(zip(points[:-1], points[1:])) or [(0, 0)]
        rng.shuffle(ranges)
        return ranges
    return cut


SWAP_SOURCE = """
from dod.table cimport Table, dod_table_swap_rows

def swap(Table t, size_t a, size_t b):
    dod_table_swap_rows(&t.engine, a, b)
"""


def test_cimport_swap_rows_exchanges_rows_and_keeps_every_handle(compile_cython):
    # dod_table_swap_rows: the two rows trade places in every column (a row
    # wider than its 64-byte buffer, 1-byte and 8-byte ones) and in the slot
    # map; every handle names the same data at its new row; a row swapped
    # with itself is unchanged. A random walk of swaps against numpy.
    mod = compile_cython(SWAP_SOURCE)
    rng = np.random.default_rng(31)
    schema = Schema(x="float64[4]", P="float64[4,4]", s="uint8", wide="uint8[67]")
    for n in (1, 2, 9, 40):
        t = Table(schema, n + 3)
        t.insert_many(x=rng.normal(size=(n, 4)), P=rng.normal(size=(n, 4, 4)), s=rng.integers(0, 255, n),
                      wide=rng.integers(0, 255, (n, 67)))
        want = t.to_numpy()
        handles = t.handles()
        for _ in range(3 * n):
            a, b = (int(v) for v in rng.integers(0, n, 2))
            mod.swap(t, a, b)
            want[[a, b]] = want[[b, a]]
            handles[[a, b]] = handles[[b, a]]
            assert t.to_numpy().tobytes() == want.tobytes()
            assert np.array_equal(t.handles(), handles)
        for r, h in enumerate(handles):
            assert t.row(int(h)) == r
        t.check()


def test_cimport_batch_removal_is_removing_one_by_one(compile_cython):
    # dod_table_removal_*: the end state of removing the flagged rows one at
    # a time from the highest down (dod_table_remove_row), whatever the split
    # of the listing, move and free phases: rows, columns, slot map,
    # generations, free-list order (the next inserts take the same slots)
    # and stats; then inserts reusing the freed slots (their maps written
    # over any split) leave what dod_table_insert_rows leaves.
    mod = compile_cython(REMOVAL_SOURCE)
    rng = np.random.default_rng(12)
    schema = Schema(x="float64[4]", P="float64[4,4]", k="uint32", s="uint8", keep=Column("int64", zero=False))
    for case in range(40):
        cap = int(rng.integers(1, 60))
        n0 = int(rng.integers(0, cap + 1))
        tables = [Table(schema, cap) for _ in range(3)]
        data = dict(x=rng.normal(size=(n0, 4)), P=rng.normal(size=(n0, 4, 4)),
                    k=rng.integers(0, 1000, n0), s=rng.integers(0, 3, n0), keep=rng.integers(0, 99, n0))
        early = rng.choice(n0, size=min(n0, int(rng.integers(0, 4))), replace=False) if n0 else []
        for t in tables:
            t.insert_many(**data)
            mod.remove_one_by_one(t, np.isin(np.arange(n0), early).astype(np.uint8) * 7)  # a free list first
        n = len(tables[0])
        p = [0.0, 1.0, rng.random()][case % 3] if n else 0.0
        flag = np.where(rng.random(n) < p, 7, rng.integers(0, 7, n)).astype(np.uint8)
        if case % 5 == 4 and n:
            flag[:] = 0
            flag[n // 2:] = 7                      # the tail only: no moves
        room = cap - n + int((flag == 7).sum())
        births = int(rng.integers(0, room + 2))      # room + 1: refused, nothing inserted
        mod.remove_one_by_one(tables[0], flag)
        got = mod.insert_rows(tables[0], births)
        moves, removed, inserted, reused = mod.remove_batch(tables[1], flag, _cuts(rng), _cuts(rng), _cuts(rng),
                                                            births, _cuts(rng))
        assert mod.remove_batch(tables[2], flag, insert=births) == (moves, removed, inserted, 0)
        assert removed == int((flag == 7).sum())
        assert moves <= removed
        assert inserted == got == (births if births <= room else 0)
        assert reused == (min(births, removed) if inserted else 0)
        ref = tables[0]
        for t in tables[1:]:
            assert len(t) == len(ref)
            assert ((t.handles() & 0xFFFFFFFF) == (ref.handles() & 0xFFFFFFFF)).all()
            assert mod.slot_map(t) == mod.slot_map(ref)
            for name in ("x", "P", "k", "s"):
                assert np.array_equal(t[name], ref[name]), name
            old = len(ref) - inserted                   # (new rows of a column not zeroed: whatever was there)
            assert np.array_equal(t["keep"][:old], ref["keep"][:old])
            assert t.stats() == ref.stats()
            t.check()
        room = cap - len(ref)
        hs = [t.insert_many(n=room) & 0xFFFFFFFF for t in tables]         # the same slots, in the same order
        assert all((h == hs[0]).all() for h in hs)


# ---------------------------------------------------------------- prefault

@needs_proc
def test_table_prefault_covers_every_row_and_keeps_contents():
    t = Table({"x": (np.float64, (4,)), "k": np.uint32}, 200_000)
    before = rss()      # before any row is written: with huge pages one row faults 2 MiB in
    h = t.insert_many(x=np.arange(40.0).reshape(10, 4), k=np.arange(10))
    touched = t.prefault()
    assert touched >= t.nbytes
    assert rss() - before > 0.9 * t.nbytes
    assert np.array_equal(t["x"], np.arange(40.0).reshape(10, 4)) and t["k"].tolist() == list(range(10))
    assert t.handles().tolist() == h.tolist() and len(t) == 10
    t.check()


@needs_proc
def test_table_prefault_over_threads_faults_the_same_pages():
    t = Table({"x": (np.float64, (6,)), "P": (np.float64, (21,)), "k": np.uint32}, 600_000)   # ~130 MiB
    t.insert_many(k=np.arange(5))
    before = rss()
    touched = t.prefault(threads=3)
    assert touched >= t.nbytes > 2 * (64 << 20) and rss() - before > 0.9 * t.nbytes
    for threads in (1, 2, 8):
        assert t.prefault(threads=threads) == touched
    assert t["k"].tolist() == list(range(5))
    t.check()


@pytest.mark.parametrize("threads", [1, 2])
def test_table_prefault_is_refused_during_an_exclusive_pass(threads):
    t = Table({"x": np.float64}, 100)
    t.insert_many(x=np.ones(3))
    with t.exclusive("a test pass"):
        with pytest.raises(RuntimeError, match="a test pass"):
            t.prefault(threads=threads)
    assert t.prefault(threads=threads) > 0    # the pass ended: allowed again
    t.insert_many(x=np.ones(2))               # and the table takes inserts again
    assert len(t) == 5


def test_an_insert_refused_by_an_exclusive_pass_names_no_other_thread():
    # The refusal reads true on the thread that holds the pass as well as on
    # another one: it names the pass, not a thread.
    t = Table({"x": np.float64}, 10)
    with t.exclusive("a test pass"):
        with pytest.raises(RuntimeError, match=r"insert refused: .*\(a test pass\)") as same:
            t.insert(x=1.0)
        errors = []
        other = threading.Thread(target=lambda: errors.append(_refusal(t)))
        other.start()
        other.join()
    for message in (str(same.value), errors[0]):
        assert "another thread" not in message and "whichever thread holds it" in message
    assert len(t) == 0


def _refusal(t):
    try:
        t.insert(x=1.0)
    except RuntimeError as e:
        return str(e)
    return "no refusal"


def test_table_prefault_refuses_bad_thread_counts_and_changes_nothing():
    t = Table({"x": np.float64}, 100)
    t.insert_many(x=np.arange(3.0))
    for bad in (0, 257, 2.0, False, "1", None):
        with pytest.raises(ValueError, match="threads must be"):
            t.prefault(threads=bad)
    t.insert_many(x=np.ones(2))               # no exclusive pass was left behind
    assert t["x"].tolist() == [0.0, 1.0, 2.0, 1.0, 1.0]


REFUSED_TABLE_PREFAULT = r"""
import sys
import numpy as np
from dod.table import Table

t = Table({"x": np.float64, "y": (np.float64, (8,))}, 1_000_000)      # ~76 MiB: two pieces
t.insert_many(x=np.arange(5.0))
for threads in (int(sys.argv[1]), 3):
    try:
        t.prefault(threads=threads)
    except MemoryError as e:
        assert "could not fault in this table's memory" in str(e) and "Cannot allocate memory" in str(e), e
    else:
        raise AssertionError("Table.prefault did not raise")
    assert t["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    t.check()
    t.insert_many(x=np.ones(1))       # the exclusive pass ended
    t.remove(t.handles()[-1])
print("refused as expected")
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_table_prefault_refused_by_the_kernel_raises_and_changes_nothing(tmp_path, threads):
    assert "refused as expected" in run_refused(tmp_path, REFUSED_TABLE_PREFAULT, threads, ok=1)
