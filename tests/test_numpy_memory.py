"""The NEP 49 handler over an arena (dod.numpy_memory): escape rule, accounting, bad input."""
import gc
import os
import threading
import warnings

import numpy as np
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from numpy._core.multiarray import get_handler_name

import dod
from dod.arena import Arena
from dod.errors import EscapeWarning
from dod.loop import Loop
from dod.numpy_memory import HANDLER_NAME, NumpyHandler, install_default

GRAIN = 16
ALIGN = 64


def _up(n, a):
    return (n + a - 1) & ~(a - 1)


@pytest.fixture(autouse=True)
def _quiet_escapes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EscapeWarning)
        yield


# ---------------------------------------------------------------- basics

def test_numpy_sees_dod_inside_and_default_outside():
    a = Arena(1 << 20)
    outside = get_handler_name()
    with a.numpy() as h:
        assert get_handler_name() == HANDLER_NAME == h.name
        x = np.arange(100.0)
        assert get_handler_name(x) == HANDLER_NAME
        del x
    assert get_handler_name() == outside
    assert get_handler_name(np.arange(3.0)) == outside


def test_temporaries_come_from_the_arena_and_vanish():
    a = Arena(1 << 22)
    b = np.arange(10_000, dtype=np.float64)
    with a.numpy() as h:
        r = float((b * 2.0 + b).sum())
        assert a.used == 0                     # every temporary died: rewound over them
    assert r == 3 * b.sum()
    s = h.stats()
    assert s["allocations"] >= 2 and s["fallbacks"] == 0 and s["live"] == 0 and s["used"] == 0
    assert a.peak >= 80_000 and h.escaped == []
    h.check()


def test_restored_on_exception_and_in_other_threads_untouched():
    a = Arena(1 << 20)
    seen = {}

    def other():
        seen["name"] = get_handler_name()
        seen["arr"] = get_handler_name(np.ones(10))

    with pytest.raises(KeyError):
        with a.numpy():
            t = threading.Thread(target=other)
            t.start()
            t.join()
            raise KeyError("inside")
    assert seen == {"name": "default_allocator", "arr": "default_allocator"}
    assert get_handler_name() == "default_allocator"


def test_escapee_stays_valid_pins_and_is_reported():
    a = Arena(1 << 20)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", EscapeWarning)
        with a.numpy() as h:
            keep = np.full(1000, 7, np.int32)
            tmp = np.ones(5000)
            del tmp
    assert [x.category for x in w] == [EscapeWarning]
    assert h.escaped == [(0, 4000)]
    assert a.used == _up(4000, GRAIN) and a.pinned == a.used == h.pinned
    with pytest.raises(BufferError):
        a.reset()
    filler = a.empty(4096, np.uint8)           # the arena is used from Python in between
    filler[:] = 0xEE
    assert (keep == 7).all()
    del keep                                   # late free: bookkeeping only
    assert h.live == 0 and h.pinned == 0
    assert (filler == 0xEE).all()
    del filler
    a.reset()
    h.check()


def test_arena_lives_as_long_as_an_array_it_served():
    a = Arena(1 << 20)
    with a.numpy():
        keep = np.full(256, 3, np.uint16)
    del a
    gc.collect()
    keep += 1                                  # memory still valid: the capsule holds the arena
    assert (keep == 4).all()


def test_free_from_another_thread_and_view_of_escapee():
    a = Arena(1 << 20)
    box = []
    with a.numpy() as h:
        box.append(np.arange(1000, dtype=np.int64))
        view = np.arange(500, dtype=np.int64)[100:200]
    assert h.live == 2
    t = threading.Thread(target=box.clear)
    t.start()
    t.join()
    assert h.live == 1 and (view == np.arange(100, 200)).all()
    del view
    assert h.live == 0 and a.pinned == 0
    a.reset()


def test_calloc_zeroes_dirty_memory_and_zero_size():
    a = Arena(1 << 20)
    a.full(1 << 16, 0xFF, np.uint8)
    a.reset(unchecked=True) if a.pinned else None
    with a.numpy() as h:
        dirty = np.empty(1 << 14, np.uint8)
        dirty[:] = 0xAB
        del dirty
        z = np.zeros(1 << 14, np.uint8)
        assert not z.any()
        e = np.empty(0)
        e2 = np.empty((3, 0))
        assert e.ctypes.data != e2.ctypes.data
        assert z.ctypes.data % ALIGN == 0 and e.ctypes.data % ALIGN == 0
        del z, e, e2
    assert h.stats()["live"] == 0


def test_alignment_as_asked():
    a = Arena(1 << 20)
    with a.numpy(align=256) as h:
        xs = [np.empty(n, np.uint8) for n in (1, 17, 300, 4097)]
        assert all(x.ctypes.data % 256 == 0 for x in xs)
        assert h.align == 256
        del xs


def test_realloc_grow_in_place_shrink_and_moved():
    a = Arena(1 << 20)
    with a.numpy() as h:
        x = np.arange(100, dtype=np.int64)
        p = x.ctypes.data
        x.resize(1000, refcheck=False)          # top of the arena: grows in place
        assert x.ctypes.data == p and (x[:100] == np.arange(100)).all() and not x[100:].any()
        assert a.used == _up(8000, GRAIN)
        x.resize(10, refcheck=False)            # shrinks in place
        assert a.used == _up(80, GRAIN) and (x == np.arange(10)).all()
        y = np.ones(10)                         # now x is not the top: a resize moves it
        x.resize(2000, refcheck=False)
        assert x.ctypes.data != p and (x[:10] == np.arange(10)).all()
        assert h.stats()["reallocs"] == 3 and h.live == 2
        del x, y
    assert a.used == 0 and h.live == 0
    h.check()


def test_request_that_does_not_fit_falls_back_and_frees_back():
    a = Arena(1 << 16)
    with a.numpy() as h:
        small = np.ones(100)
        big = np.ones(1 << 16)                  # 512 KiB: not in a 64 KiB arena
        assert get_handler_name(big) == HANDLER_NAME      # numpy records our handler...
        s = h.stats()
        assert s["fallbacks"] == 1 and s["fallback_live"] == 1 and s["live"] == 1
        big.resize(1 << 17, refcheck=False)     # ...and realloc goes to the one that owns it
        assert h.stats()["fallbacks"] == 1 and h.live == 1
        del big                                 # ...and so does free
        assert h.stats()["fallback_live"] == 0
        del small
    assert a.failed >= 1
    with a.numpy() as h2:
        pass
    outside = np.ones(10)
    assert h2.stats()["fallbacks"] == 0 and get_handler_name(outside) == "default_allocator"


def test_growable_arena_serves_across_blocks():
    a = Arena(4096, growable=True)
    with a.numpy() as h:
        xs = [np.full(3000, i, np.uint8) for i in range(8)]
        assert a.blocks > 1 and h.stats()["fallbacks"] == 0
        assert all((x == i).all() for i, x in enumerate(xs))
        del xs
    assert a.used == 0
    a.reset()


# ---------------------------------------------------------------- nesting, scopes, bad input

def test_nested_blocks_fall_back_to_their_own_previous():
    outer_a, inner_a = Arena(1 << 20), Arena(1 << 12)
    with outer_a.numpy() as outer:
        with inner_a.numpy() as inner:
            big = np.ones(10_000)               # does not fit inner: goes to outer
            assert outer.live == 1 and inner.stats()["fallbacks"] == 1
            del big
            assert outer.live == 0 and inner.stats()["fallback_live"] == 0
        assert get_handler_name() == HANDLER_NAME
    assert get_handler_name() == "default_allocator"


def test_same_arena_nested_blocks_keep_each_others_arrays():
    a = Arena(1 << 20)
    with a.numpy():
        x = np.full(100, 1.0)
        with a.numpy():
            y = np.full(100, 2.0)
        z = np.full(100, 3.0)
        assert (x == 1).all() and (y == 2).all() and (z == 3).all()
        del x, y, z
    assert a.used == 0


def test_block_inside_an_arena_scope_is_refused_and_changes_nothing():
    a = Arena(1 << 20)
    before = get_handler_name()
    with a.scope():
        x = a.empty(10)
        used = a.used
        h = a.numpy()
        with pytest.raises(RuntimeError, match="inside a live scope"):
            h.__enter__()
        assert get_handler_name() == before and a.used == used and not h.active
        del x
    with a.numpy():                             # after the scope: allowed
        np.ones(100)
    assert a.used == 0


def test_scope_inside_a_block():
    a = Arena(1 << 20)
    with a.numpy():
        with a.scope():
            t = a.empty(10)
            r = float((np.ones(1000) * 2).sum())
            del t
        assert r == 2000.0 and a.used == 0


def test_reentering_the_same_block_raises_and_changes_nothing():
    a = Arena(1 << 20)
    h = a.numpy()
    with h:
        with pytest.raises(RuntimeError, match="entered once"):
            h.__enter__()
        assert get_handler_name() == HANDLER_NAME and h.active
    with pytest.raises(RuntimeError, match="entered once"):
        with h:
            pass
    assert get_handler_name() == "default_allocator" and not h.active


def test_bad_arguments():
    a = Arena(1 << 20)
    for bad in (0, 8, 48, 1 << 13, -64):
        with pytest.raises(ValueError):
            a.numpy(align=bad)
    with pytest.raises(TypeError):
        a.numpy(align=64.0)
    with pytest.raises(TypeError):
        NumpyHandler(None)
    assert a.used == 0 and a.pinned == 0 and get_handler_name() == "default_allocator"


def test_out_of_order_exit_stops_serving_and_leaves_the_installed_handler():
    a, b = Arena(1 << 20), Arena(1 << 20)
    ha, hb = a.numpy(), b.numpy()
    ha.__enter__()
    hb.__enter__()
    with pytest.raises(RuntimeError, match="out of order"):
        ha.__exit__(None, None, None)
    assert get_handler_name() == HANDLER_NAME and not ha.active
    hb.__exit__(None, None, None)               # reinstalls ha's capsule: inactive, it passes through
    before = ha.stats()["fallbacks"]
    x = np.ones(10)
    assert ha.stats()["fallbacks"] > before and ha.live == 0
    del x
    with pytest.raises(RuntimeError):
        ha.__enter__()
    install_default()
    assert get_handler_name() == "default_allocator"


def test_closed_arena_is_refused(compile_cython):
    mod = compile_cython(CIMPORT_SOURCE)
    a = Arena(1 << 16)
    assert mod.handler_name(a) == "dod_arena"
    assert mod.served(a, 1000) == (1000, True)
    b = Arena(1 << 16)
    mod.close(b)                               # the ZII state a closed arena is left in
    with pytest.raises(ValueError, match="closed"):
        b.numpy()
    assert get_handler_name() == "default_allocator"


CIMPORT_SOURCE = r"""
# cython: language_level=3
from dod.arena cimport Arena
from dod.numpy_memory cimport PyDataMem_Handler, dod_npmem, NumpyHandler

def handler_name(Arena a):
    cdef NumpyHandler h = a.numpy()
    cdef PyDataMem_Handler* hd = &h.state.handler
    return hd.name.decode()

def served(Arena a, size_t n):
    # The handler's C functions, called as numpy calls them.
    cdef NumpyHandler h = a.numpy()
    with h:
        p = h.state.handler.allocator.malloc(h.state.handler.allocator.ctx, n)
        live = h.state.live
        h.state.handler.allocator.free(h.state.handler.allocator.ctx, p, n)
    return h.state.allocations * n, live == 1 and h.state.live == 0

def close(Arena a):
    a.engine.base = NULL
    a.engine.capacity = 0
"""


# ---------------------------------------------------------------- the loop

class _Clock:
    def __init__(self):
        self.t = 0

    def now(self):
        return self.t

    def sleep_until(self, t):
        self.t = t


def test_loop_numpy_scratch_state_for_one_tick_then_reset():
    state = {"x": np.zeros(1000)}

    def step():
        state["x"] = state["x"] + np.ones(1000) * 2    # new state every tick, temporaries die

    lp = Loop(step, 50, numpy_scratch=True, scratch_bytes=1 << 20, clock=_Clock())
    assert lp.numpy_scratch
    lp.run(20)
    assert (state["x"] == 40).all()
    s = lp.numpy_stats
    assert s["fallbacks"] == 0 and s["allocations"] >= 60 and s["live"] == 1
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(state["x"]) == HANDLER_NAME


def test_loop_numpy_scratch_refuses_an_array_kept_two_ticks():
    kept = []

    def step():
        if not kept:
            kept.append(np.ones(100))

    lp = Loop(step, 50, numpy_scratch=True, clock=_Clock())
    with pytest.raises(BufferError):
        lp.run(5)
    assert (kept[0] == 1).all() and get_handler_name() == "default_allocator"


def test_loop_numpy_scratch_restores_handler_when_step_raises():
    def step():
        np.ones(10)
        raise ZeroDivisionError

    lp = Loop(step, 50, numpy_scratch=True, clock=_Clock())
    with pytest.raises(ZeroDivisionError):
        lp.run(3)
    assert get_handler_name() == "default_allocator"


# ---------------------------------------------------------------- the model-based walk

GLOBAL_KEEP = []
CAP = 1 << 22


class HandlerWalk(RuleBasedStateMachine):
    """Nested blocks on one arena against a shadow of the arena position and of
    every handler's records; arrays escape by every route (held, global,
    traceback, views) and die anywhere (here, another thread)."""

    def __init__(self):
        super().__init__()
        self.arena = Arena(CAP)
        self.pos = 0
        self.blocks = []          # open: [handler, floor, records]
        self.handlers = []        # every handler made: (handler, records)
        self.parent = {}          # id(records) -> records of the handler it falls back to
        self.arrays = {}          # key -> (array, tag, owner records or None, record)
        self.tb_holders = []
        self.views = {}
        self.key = 0
        GLOBAL_KEEP.clear()

    # -- model helpers
    def _push(self, recs, n):
        start = _up(self.pos, ALIGN)
        n = max(n, 1)                         # numpy asks one byte for an empty array
        for rec in reversed(recs[-8:]):       # a dead hole near the top that fits is reused
            if not rec["live"] and rec["room"] >= _up(n, GRAIN):
                rec["live"], rec["n"] = True, n
                return rec
        rec = {"before": self.pos, "end": start + _up(n, GRAIN), "room": _up(n, GRAIN), "live": True, "n": n}
        self.pos = rec["end"]
        recs.append(rec)
        return rec

    def _free(self, recs, rec, active, floor):
        rec["live"] = False
        while recs and not recs[-1]["live"]:
            r = recs.pop()
            if active and self.pos == r["end"]:
                self.pos = r["before"]

    def _active(self, recs):
        for h, floor, r in self.blocks:
            if r is recs:
                return True, floor
        return False, 0

    def _drop(self, key, in_thread=False):
        arr, tag, recs, rec = self.arrays.pop(key)
        for i, g in enumerate(GLOBAL_KEEP):
            if g is arr:
                del GLOBAL_KEEP[i]
                break
        box = [arr]
        del arr
        if in_thread:
            t = threading.Thread(target=box.clear)
            t.start()
            t.join()
        else:
            box.clear()
        if recs is not None and not any(v[1] is rec for v in self.views.values()):
            active, floor = self._active(recs)
            self._free(recs, rec, active, floor)

    def _forget_global(self, arr):
        for i, g in enumerate(GLOBAL_KEEP):
            if g is arr:
                del GLOBAL_KEEP[i]
                return

    # -- rules
    @precondition(lambda self: len(self.blocks) < 3)
    @rule()
    def enter(self):
        h = self.arena.numpy()
        h.__enter__()
        recs = []
        # Requests this handler cannot serve go to the one it was entered in.
        self.parent[id(recs)] = self.blocks[-1][2] if self.blocks else None
        self.blocks.append([h, self.pos, recs])
        self.handlers.append((h, recs))

    @precondition(lambda self: self.blocks)
    @rule(raise_inside=st.booleans())
    def exit(self, raise_inside):
        h, floor, recs = self.blocks.pop()
        if raise_inside:
            def body():
                local = np.full(64, 0x5A, np.uint8)     # kept by the traceback's frame
                raise ValueError(local.size)
            rec = None
            try:
                body()
            except ValueError as e:
                rec = self._push(recs, 64)
                h.__exit__(type(e), e, e.__traceback__)
                self.tb_holders.append((e, rec, recs))
        else:
            h.__exit__(None, None, None)
        ends = [r["end"] for _, rs in self.handlers for r in rs if r["live"]]
        top = max([floor] + [e for e in ends if e > floor])
        if top < self.pos:
            self.pos = top

    @precondition(lambda self: self.blocks)
    @rule(n=st.integers(0, 5000), where=st.sampled_from(["held", "global"]))
    def allocate(self, n, where):
        h, floor, recs = self.blocks[-1]
        tag = (self.key * 37 + 11) % 251
        arr = np.full(n, tag, np.uint8)
        rec = self._push(recs, n)
        self.key += 1
        self.arrays[self.key] = (arr, tag, recs, rec)
        if where == "global":                  # a module global holds it too
            GLOBAL_KEEP.append(arr)

    @precondition(lambda self: self.arrays)
    @rule(data=st.data(), in_thread=st.booleans())
    def free(self, data, in_thread):
        key = data.draw(st.sampled_from(sorted(self.arrays)))
        self._drop(key, in_thread)

    @precondition(lambda self: self.arrays)
    @rule(data=st.data())
    def view_then_drop_base(self, data):
        key = data.draw(st.sampled_from(sorted(self.arrays)))
        arr, tag, recs, rec = self.arrays[key]
        if arr.size < 2:
            return
        self.views[key] = (arr[1:], rec, tag, recs)
        del arr
        self._forget_global(self.arrays.pop(key)[0])

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def drop_view(self, data):
        key = data.draw(st.sampled_from(sorted(self.views)))
        v, rec, tag, recs = self.views.pop(key)
        assert (v == tag).all()
        del v
        if recs is not None:
            active, floor = self._active(recs)
            self._free(recs, rec, active, floor)

    @precondition(lambda self: self.tb_holders)
    @rule()
    def drop_traceback(self):
        e, rec, recs = self.tb_holders.pop()
        del e
        active, floor = self._active(recs)
        self._free(recs, rec, active, floor)

    @precondition(lambda self: self.arrays)
    @rule(data=st.data(), n=st.integers(1, 4000))
    def resize(self, data, n):
        key = data.draw(st.sampled_from(sorted(self.arrays)))
        arr, tag, recs, rec = self.arrays[key]
        if recs is None or not rec["live"] or any(v[1] is rec for v in self.views.values()):
            return
        old = arr.size
        if n == old:
            arr.resize(n, refcheck=False)      # same size: numpy does not call realloc
            arr[old:] = tag
            return
        active, floor = self._active(recs)
        in_place = active and recs and recs[-1] is rec and self.pos == rec["end"]
        arr.resize(n, refcheck=False)
        if in_place:
            rec["end"] = _up(rec["before"], ALIGN) + _up(n, GRAIN)
            rec["room"] = _up(n, GRAIN)
            self.pos = rec["end"]
            rec["n"] = n
        else:
            target = recs                      # the first active handler down the chain
            while target is not None and not self._active(target)[0]:
                target = self.parent[id(target)]
            new = self._push(target, n) if target is not None else None
            self._free(recs, rec, active, floor)
            rec, recs = new, target
        arr[old:] = tag
        self.arrays[key] = (arr, tag, recs, rec)

    # -- invariants
    @invariant()
    def accounting_matches_the_shadow(self):
        assert self.arena.used == self.pos
        for h, recs in self.handlers:
            h.check()
            live = [r for r in recs if r["live"]]
            assert h.live == len(live)
            assert h.stats()["used"] == sum(r["n"] for r in live)
            assert h.pinned == (recs[-1]["end"] if recs else 0)
        ends = [r["end"] for _, rs in self.handlers for r in rs if r["live"]]
        assert self.arena.pinned == max(ends, default=0)

    @invariant()
    def no_live_bytes_changed(self):
        for arr, tag, _, _ in self.arrays.values():
            assert (arr == tag).all()
        for v, _, tag, _ in self.views.values():
            assert (v == tag).all()

    def teardown(self):
        while self.blocks:
            h, _, _ = self.blocks.pop()
            h.__exit__(None, None, None)
        assert get_handler_name() == "default_allocator"
        self.arrays.clear()
        GLOBAL_KEEP.clear()
        self.views.clear()
        self.tb_holders.clear()
        for h, _ in self.handlers:
            assert h.live == 0
        self.arena.reset()


TestHandlerWalk = HandlerWalk.TestCase
TestHandlerWalk.settings = settings(settings.get_profile(settings._current_profile),
                                    max_examples=min(40, settings.default.max_examples * 2 // 3)
                                    if not os.environ.get("DOD_TEST_THOROUGH") else 400,
                                    stateful_step_count=30)
