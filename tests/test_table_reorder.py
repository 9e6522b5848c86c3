"""Table.reorder / Table.sort: rows permuted in place, every handle still valid."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from dod.table import Schema, Table

from test_table import TableMachine, snapshot, walk_schema


def filled(n, cap=None):
    t = Table(walk_schema(), cap or max(n, 1))
    hs = t.insert_many(pos=np.arange(3 * n, dtype=np.float32).reshape(n, 3),
                       id=np.arange(n, dtype=np.uint32) * 7, w=np.arange(n) / 4.0,
                       flags=np.arange(n) % 256, n=n) if n else np.empty(0, np.uint64)
    return t, hs


class ReorderMachine(TableMachine):
    """The table walk of test_table with reorders and sorts interleaved: the
    shadow model (handle -> row values) must hold after each, the rows must
    come out in exactly the requested order, dead handles stay dead, and a
    bad permutation or a live view changes nothing."""

    @rule(data=st.data())
    def reorder(self, data):
        before = self.t.handles().tolist()
        order = data.draw(st.permutations(range(len(before))))
        self.t.reorder(np.asarray(order, dtype=np.int64))
        assert self.t.handles().tolist() == [before[i] for i in order]

    @rule(data=st.data())
    def sort_by_key(self, data):
        before = self.t.handles().tolist()
        key = data.draw(st.lists(st.integers(-3, 3), min_size=len(before), max_size=len(before)))
        order = self.t.sort(np.asarray(key, dtype=np.int64))
        want = sorted(range(len(before)), key=lambda i: key[i])       # stable, like the table's
        assert order.tolist() == want
        assert self.t.handles().tolist() == [before[i] for i in want]

    @rule(data=st.data())
    def sort_by_column(self, data):
        before = self.t.handles().tolist()
        ids = [self.model[h]["id"] for h in before]
        self.t.sort("id")
        assert self.t.handles().tolist() == [before[i] for i in sorted(range(len(before)), key=lambda i: ids[i])]

    @rule(data=st.data(), kind=st.sampled_from(["short", "long", "repeat", "negative", "big", "float"]))
    def reorder_bad(self, data, kind):
        n = len(self.model)
        order = list(range(n))
        if kind == "short":
            if n == 0:
                return
            order = order[:-1]
        elif kind == "long":
            order = order + [n]
        elif kind == "repeat":
            if n < 2:
                return
            order[data.draw(st.integers(0, n - 1))] = order[data.draw(st.integers(0, n - 1))]
            if len(set(order)) == n:
                return
        elif kind == "negative":
            if n == 0:
                return
            order[data.draw(st.integers(0, n - 1))] = -1
        elif kind == "big":
            if n == 0:
                return
            order[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from([n, n + 5, 2**31, 2**40]))
        before = snapshot(self.t)
        if kind == "float":
            with pytest.raises(TypeError):
                self.t.reorder(np.arange(n, dtype=np.float64) + 0.5 if n else [0.5])
        else:
            with pytest.raises(ValueError):
                self.t.reorder(order)
        assert snapshot(self.t) == before
        self.t.check()

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data())
    def reorder_under_view(self, data):
        view = self.t["pos"]
        before = snapshot(self.t)
        order = data.draw(st.permutations(range(len(self.model))))
        with pytest.raises(BufferError):
            self.t.reorder(order)
        with pytest.raises(BufferError):
            self.t.sort("id")
        assert snapshot(self.t) == before
        # unchecked: the view shows the permuted rows (the memory never moves)
        old = view.copy()
        self.t.reorder(order, unchecked=True)
        assert np.array_equal(view, old[list(order)])
        del view


TestReorderWalk = ReorderMachine.TestCase
TestReorderWalk.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


def test_reorder_empty_and_full_tables():
    t, _ = filled(0, cap=4)
    t.reorder([])
    t.reorder(np.empty(0, np.int64))
    assert t.sort("id").tolist() == []
    t.check()
    with pytest.raises(ValueError):
        t.reorder([0])
    n = 64
    t, hs = filled(n)
    assert len(t) == t.capacity == n
    rows = t.to_numpy()
    order = np.random.default_rng(1).permutation(n)
    t.reorder(order)
    t.check()
    assert np.array_equal(t.handles(), hs[order])
    assert t.to_numpy().tobytes() == rows[order].tobytes()
    for h, r in zip(hs, range(n)):
        assert t.get(int(h))["id"] == rows["id"][r]       # each handle names its own data
    # a remove and an insert after the reorder: generations and the free list unharmed
    t.remove(int(hs[5]))
    assert int(hs[5]) not in t
    h = t.insert(id=99)
    assert h != hs[5] and (h & 0xFFFFFFFF) == (int(hs[5]) & 0xFFFFFFFF)     # slot reused, new generation
    t.check()


def test_reorder_refused_during_an_exclusive_pass():
    t, _ = filled(5)
    before = snapshot(t)
    with t.exclusive("a test pass"):
        with pytest.raises(RuntimeError, match="a test pass"):
            t.reorder([4, 3, 2, 1, 0])
        with pytest.raises(RuntimeError):
            t.sort("id")
    assert snapshot(t) == before
    t.reorder([4, 3, 2, 1, 0])


def test_sort_refuses_bad_keys():
    t, _ = filled(5)
    before = snapshot(t)
    with pytest.raises(ValueError):
        t.sort("pos")                      # rows of shape (3,)
    with pytest.raises(KeyError):
        t.sort("nope")
    with pytest.raises(ValueError):
        t.sort(np.arange(4))
    with pytest.raises(TypeError):
        t.reorder(np.array(["a"] * 5))
    with pytest.raises(ValueError):
        t.reorder(np.arange(5).reshape(5, 1))
    assert snapshot(t) == before


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_reorder_wide_rows_matches_numpy(n, seed):
    # Every row width (1, 4, 8 and odd sizes) against numpy's fancy indexing.
    t = Table(Schema(a="uint8", b="uint16", c="float32", d="float64", e="float64[4,4]", f="uint8[3]"), n)
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, dtype=t.schema.dtype)
    for name in rec.dtype.names:
        rec[name] = rng.integers(0, 200, size=rec[name].shape)
    hs = t.insert_many(rec)
    order = rng.permutation(n)
    t.reorder(order)
    t.check()
    assert t.to_numpy().tobytes() == rec[order].tobytes()
    assert np.array_equal(t.rows(hs), np.argsort(order))
