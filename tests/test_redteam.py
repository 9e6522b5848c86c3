"""Regression tests from an adversarial review of the Python faces.

Each probe that crashed (or corrupted memory) before its fix runs in a
subprocess, so a regression shows up as a failed test, not a dead runner.
"""

import copy
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dod.resource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_probe(code):
    """Run `code` in a fresh interpreter; return its stdout (fails on a crash or error)."""
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"probe died with {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p.stdout


# -------------------------------------------------------------- copies and pickles

def _owners():
    from dod.arena import Arena
    from dod.pool import Pool
    from dod.freelist import FreeList
    from dod.table import Table

    a = Arena(1024)
    p = Pool(4, np.float64)
    f = FreeList(4096)
    t = Table({"a": np.float64}, 4)
    t.insert(a=1.0)
    x = a.zeros(4)
    v = p.view(p.acquire())
    y = f.alloc(8)
    col = t["a"]
    objs = [a.mark(), a.scope(), x.base, v.base, y.base, col.base, a, p, f, t, a.resource()]
    return objs, (x, v, y, col)


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps])
def test_leases_marks_and_owners_cannot_be_copied(how):
    # Cython's generated pickling made a second lease/pin/view object: its
    # __dealloc__ unpinned a block (or a table's view count) that a live view
    # still used, so a checked release then went through under the view.
    objs, keep = _owners()
    for o in objs:
        with pytest.raises(TypeError):
            how(o)
        assert not hasattr(o, "__setstate_cython__")


def test_copied_table_view_does_not_unpin_the_table():
    # Before: copy.copy(view base) then dropping the copy decremented the
    # table's live-view count, so remove() moved rows under a live view.
    from dod.table import Table

    t = Table({"a": np.float64}, 4)
    h = t.insert(a=1.0)
    t.insert(a=2.0)
    col = t["a"]
    b = col.base
    while type(b).__name__ != "ExportPin":
        b = b.base
    with pytest.raises(TypeError):
        copy.copy(b)
    with pytest.raises(BufferError):
        t.remove(h)
    assert len(t) == 2 and list(col) == [1.0, 2.0]


def test_schema_and_column_still_pickle():
    from dod.table import Column, Schema

    s = Schema(a=Column(np.float32, (3,), finite=True), b="int8", c=Column(np.uint16, zero=False))
    assert pickle.loads(pickle.dumps(s)) == s
    assert copy.deepcopy(s) == s
    c = s["a"]
    assert pickle.loads(pickle.dumps(c)) == c


# -------------------------------------------------------------- __init__ again, __new__ alone

def test_column_init_again_is_refused():
    # Before: schema['a'].__init__(np.float64, (100000,)) resized the column
    # under the table: views read float64 rows over float32 memory, and an
    # insert of a 100000-element row memcpy'd it over the heap.
    from dod.table import Column, Table

    t = Table({"a": np.float32, "b": np.int32}, 4)
    t.insert(a=1.0, b=2)
    c = t.schema["a"]
    with pytest.raises(TypeError, match="immutable"):
        c.__init__(np.float64, (100000,), name="a")
    assert c.dtype == np.float32 and c.shape == ()
    assert t["a"].dtype == np.float32 and t["a"].shape == (1,)
    free = Column(np.int8)
    with pytest.raises(TypeError, match="immutable"):
        free.__init__(np.int64)


def test_schema_new_without_init_does_not_export():
    # Before: _desc_of raised inside a noexcept function and the export went
    # on with an uninitialised descriptor (a malloc of a garbage size).
    from dod.table import Schema

    s = Schema.__new__(Schema)
    with pytest.raises(TypeError, match="never initialised"):
        s.__arrow_c_schema__()


def test_scope_new_without_arena():
    # Before: Scope.__new__(Scope).__enter__() wrote through a None arena (segfault).
    out = run_probe("""
        from dod.arena import Arena, Scope
        s = Scope.__new__(Scope)
        try:
            s.__enter__()
        except TypeError as e:
            print("raised", e)
        print(s.__exit__(None, None, None))
        a = Arena(1024)
        sc = a.scope()
        x = a.zeros(4)
        print(sc.__exit__(None, None, None), a.used)   # never entered: no rewind
    """)
    assert "raised scopes come from Arena.scope()" in out
    assert out.splitlines()[-1] == "False 32"


# -------------------------------------------------------------- table: reentrancy and threads

def test_insert_whose_value_clears_the_table_writes_in_bounds():
    # Before: insert_many captured the row count before converting the values;
    # an __array__ that cleared the table made it write rows 6..13 of an
    # 8-row table (a heap overflow) and commit rows 0..7 unwritten.
    out = run_probe("""
        import numpy as np
        from dod.table import Table
        t = Table({"a": np.float64}, 8)
        for i in range(6):
            t.insert(a=i + 1.0)
        class Evil:
            def __array__(self, dtype=None, copy=None):
                t.clear(unchecked=True)
                return 100.0 + np.arange(8)
        h = t.insert_many(a=Evil())
        print(len(t), len(h), t["a"].tolist() == (100.0 + np.arange(8)).tolist())
    """)
    assert out.split() == ["8", "8", "True"]


def test_update_whose_value_removes_the_row_does_not_write_another_row():
    # Before: update() located the row before converting the values; an
    # __array__ that removed it made the write land on the row moved into
    # its place (silently overwriting another live row).
    from dod.table import Table

    t = Table({"a": np.float64}, 8)
    h0 = t.insert(a=1.0)
    h1 = t.insert(a=2.0)

    class Evil:
        def __array__(self, dtype=None, copy=None):
            t.remove(h0, unchecked=True)
            return np.array(9.0)

    with pytest.raises(KeyError):
        t.update(h0, a=Evil())
    assert t.get(h1)["a"] == 2.0 and len(t) == 1


def test_tracker_table_refuses_inserts_while_a_tick_runs():
    # Before: tick() moves the table's rows without the GIL while another
    # Python thread inserted/cleared rows: a crash (rows past capacity,
    # a corrupted slot map) within a few hundred ticks.
    out = run_probe("""
        import sys, threading, time
        import numpy as np
        from dod.tracker import Tracker, TrackerConfig
        sys.setswitchinterval(1e-5)
        t = Tracker(TrackerConfig(dim=2, capacity=256, max_detections=256, sort_every=1))
        stop = False
        refused = 0
        def other():
            global refused
            rng = np.random.default_rng(1)
            while not stop:
                try:
                    if rng.random() < 0.7:
                        t.table.insert(status=1)
                    else:
                        t.table.clear(unchecked=True)
                except RuntimeError:
                    refused += 1
                except MemoryError as e:
                    assert "table full" in str(e), e          # the only refusal expected here
        th = threading.Thread(target=other)
        th.start()
        rng = np.random.default_rng(0)
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            t.tick(rng.random((200, 2)) * 50, 0.02)
        stop = True
        th.join()
        print("ok", len(t.table) <= 256, refused > 0)
    """)
    assert out.split() == ["ok", "True", "True"]


def test_an_exclusive_pass_begun_during_an_inserts_conversion_refuses_its_commit():
    # insert() checked for an exclusive pass (a tick or a prefault, without
    # the GIL) only before converting its values, which may run Python code
    # and release the GIL. A pass begun meanwhile then ran beside the
    # insert's writes and commit: with a tracker's tick moving rows (the
    # probe above, sorting every tick) a crash in one run of three. Here a
    # prefault (256 MiB to fault in) starts inside the conversion, which
    # returns once the pass refuses another insert.
    import threading
    from dod.table import Table
    t = Table({"a": np.float64, "b": (np.float64, (15,))}, 1 << 21)
    th = threading.Thread(target=t.prefault)

    class Slow:
        def __array__(self, dtype=None, copy=None):
            th.start()
            while True:
                try:
                    t.remove(t.insert(a=0.0))
                except RuntimeError:
                    return np.array(1.0)

    with pytest.raises(RuntimeError, match="insert refused"):
        t.insert(a=Slow())
    th.join()
    assert len(t) == 0 and t.stats()["allocations"] == t.stats()["removes"]


def test_a_plain_allocator_backing_another_is_never_entered_by_two_threads():
    """A FreeList (not thread-safe) backs a GuardedResource: one thread
    allocates through the guard while another uses the free list directly.
    Python faces keep the GIL around calls to a resource that is not
    thread-safe, so the free list's invariants hold (this used to corrupt it
    within seconds)."""
    import threading
    import time

    from dod.freelist import FreeList
    from dod.guard import GuardedResource

    fl = FreeList(1 << 22)
    res = fl.resource()
    assert not res.threadsafe and dod.resource.pages.threadsafe
    gr = GuardedResource(resource=res, quarantine=0)
    stop = time.monotonic() + 2.0

    def through_guard():
        while time.monotonic() < stop:
            try:
                x = gr.zeros(100)
                del x
            except MemoryError as e:       # the free list is shared, so it may be full for a moment
                assert "refused" in str(e), e

    def direct():
        while time.monotonic() < stop:
            x = fl.alloc(100)
            fl.free(x)
            del x

    threads = [threading.Thread(target=through_guard), threading.Thread(target=direct)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fl.check()
