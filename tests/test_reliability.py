"""Hostile-user findings and their fixes: one input gate for caller arrays,
no wait without a bound, validated scenario dataclasses.

Regression tests of the four findings first (each failed before its fix),
then every entry point that takes numeric arrays against byte-swapped,
misaligned, strided, read-only, 0-d and object inputs, then the waits.
Every call that could block runs under a bound (a thread joined with a
timeout, or a child process with one), so a hang is reported as a failure.
"""
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import dod
from dod.arena import Arena
from dod.errors import StallError
from dod.ring import Ring
from dod.ring_producer import RingProducer
from dod.table import Table
from dod.tracker import Sensor, Tracker, solve_assignment
from dod.tracker.metrics import gospa, ospa, sparse_gospa
from dod.tracker.scenario import RadarScenario, Scenario, generate

BOUND_S = 20.0          # the most any wait in this file may take before it counts as a hang


def _misaligned(a):
    """A C-contiguous copy of `a` whose data starts one byte past an aligned address."""
    a = np.ascontiguousarray(a)
    buf = bytearray(a.nbytes + 1)
    out = np.frombuffer(buf, a.dtype, offset=1).reshape(a.shape)
    out[...] = a
    assert not out.flags.aligned and out.flags.c_contiguous
    return out


def _variants(a):
    """The same values in every layout the gate must read: name -> array."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    strided = np.zeros((a.shape[0] * 2,) + a.shape[1:])[::2]
    strided[...] = a
    ro = a.copy()
    ro.flags.writeable = False
    return {"byte-swapped": a.astype(a.dtype.newbyteorder(">" if sys.byteorder == "little" else "<")),
            "misaligned": _misaligned(a), "strided": strided, "read-only": ro,
            "fortran": np.asfortranarray(a), "list": a.tolist(), "float32-exact": a.astype(np.float32)}


def _bounded(fn, timeout=BOUND_S):
    """fn() in a daemon thread joined with a timeout: (finished, result or exception)."""
    box = {}

    def run():
        try:
            box["out"] = fn()
        except BaseException as e:      # noqa: BLE001  (handed to the test)
            box["err"] = e
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    return not th.is_alive(), box


# ---------------------------------------------------------------- the four findings

def _snapshot(t):
    return {k: v.copy() for k, v in t.columns().items()}, tuple(t.counts().values())


def test_finding1_byte_swapped_detections_are_read_by_value():
    z = np.array([[100.0, 200.0], [300.0, 400.0]])
    ref, t = Tracker(initiation="single"), Tracker(initiation="single")     # a scan's detections start tracks
    ref.tick(z, 0.1)
    t.tick(z.astype(">f8"), 0.1)
    np.testing.assert_array_equal(t.positions, [[100.0, 200.0], [300.0, 400.0]])
    a, b = _snapshot(ref), _snapshot(t)
    assert a[1] == b[1]
    for k in a[0]:
        assert a[0][k].tobytes() == b[0][k].tobytes(), k


def _copied_bytes(fn):
    """Peak bytes numpy allocated (traced) while fn() ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_finding2_misaligned_input_is_copied_to_aligned_memory_before_the_engines_read_it():
    # On x86 a misaligned load happens to work in a release build (the
    # sanitize build stopped with "load of misaligned address"): what a
    # release build can observe is the aligned copy the engines now read
    # (k x dim float64 more traced memory than for the aligned input), and
    # results equal to the aligned input's.
    rng = np.random.default_rng(3)
    z = rng.uniform(-100, 100, (4000, 2))
    zm = _misaligned(z)
    ta, tm = Tracker(max_detections=8192), Tracker(max_detections=8192)
    ta.tick(z, 0.1)
    tm.tick(zm, 0.1)
    assert _snapshot(ta)[1] == _snapshot(tm)[1]
    np.testing.assert_array_equal(ta.column("x"), tm.column("x"))
    t1, t2 = Tracker(max_detections=8192), Tracker(max_detections=8192)
    aligned = _copied_bytes(lambda: t1.tick(z, 0.1))
    misaligned = _copied_bytes(lambda: t2.tick(zm, 0.1))
    assert misaligned >= z.nbytes > aligned, (aligned, misaligned)

    cost = rng.uniform(0, 10, (200, 300))
    cm = _misaligned(cost)
    r1, c1 = solve_assignment(cost)
    r2, c2 = solve_assignment(cm)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(c1, c2)
    aligned = _copied_bytes(lambda: solve_assignment(cost))
    misaligned = _copied_bytes(lambda: solve_assignment(cm))
    assert misaligned - aligned >= cost.nbytes // 2, (aligned, misaligned)


def test_finding3_scenario_with_huge_fields_raises_at_once():
    # A child process with a time limit: the unfixed dataclass accepted the
    # fields and .volume then ran for minutes (big-int power).
    code = ("from dod.tracker.scenario import Scenario\n"
            "try:\n"
            "    s = Scenario(2**40, 0.02, 65536)\n"
            "except ValueError as e:\n"
            "    print('refused', e)\n"
            "else:\n"
            "    print('volume', s.volume)\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=BOUND_S, env=_child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused dim must be 2 or 3"), out.stdout


def _child_env():
    import os
    return dict(os.environ, PYTHONPATH=dod.get_include())


def test_finding4_scan_stream_take_raises_when_the_truth_ring_is_not_drained():
    from dod.tracker.stream import ScanStream
    st = ScanStream(20, 50, rows=64, slots=2, sample_every=1, idle=False).start()
    try:
        def consume():
            taken = 0
            while True:
                slot = st.take()            # never drains the truth ring
                if slot is None:
                    return taken
                slot = None
                st.release_scan()
                taken += 1
        done, box = _bounded(consume)
        assert done, "ScanStream.take() waited forever on a stalled producer"
        e = box.get("err")
        assert isinstance(e, StallError) and isinstance(e, TimeoutError), box
        msg = str(e)
        assert "parked on another ring that is full" in msg
        assert "'producer': 'waiting'" in msg and "'consumer': 'waiting'" in msg, msg
    finally:
        assert st.close()


# ---------------------------------------------------------------- every entry point, every layout

Z = np.array([[10.0, 20.0], [30.0, -40.0], [55.5, 0.25]])


def _bad_inputs_raise(call, *, shape=Z.shape):
    with pytest.raises(ValueError):
        call(np.float64(1.0))                       # 0-d
    with pytest.raises(TypeError):
        call(np.empty(shape, dtype=object))         # Python objects
    with pytest.raises(TypeError):
        call(None)
    with pytest.raises(TypeError):
        call(np.zeros(shape, dtype="U3"))           # not numbers


@pytest.mark.parametrize("threads", [1, 2])
def test_tracker_tick_reads_every_layout_by_value(threads):
    ref = Tracker(threads=threads)
    ref.tick(Z, 0.1)
    want = _snapshot(ref)
    for name, z in _variants(Z).items():
        if name == "float32-exact":
            z = Z.astype(np.float32).astype(np.float64).astype(np.float32)
        t = Tracker(threads=threads)
        t.tick(z, 0.1)
        got = _snapshot(t)
        if name != "float32-exact":
            assert got[1] == want[1], name
            for k in want[0]:
                assert got[0][k].tobytes() == want[0][k].tobytes(), (name, k)
    t = Tracker(threads=threads)
    t.tick(Z, 0.1)
    before = _snapshot(t)
    _bad_inputs_raise(lambda z: t.tick(z, 0.1))
    with pytest.raises(ValueError):
        t.tick(np.zeros((3, 3)), 0.1)
    after = _snapshot(t)
    assert before[1] == after[1] and all(before[0][k].tobytes() == after[0][k].tobytes() for k in before[0])


def test_tracker_outputs_refuse_what_they_cannot_fill_in_place():
    from dod.tracker._engine import COUNT_NAMES, PASS_NAMES
    t = Tracker()
    t.tick(Z, 0.1)
    n = 2 * len(PASS_NAMES)
    for call, dtype, size in ((t.read_profile, np.float64, n), (t.read_counts, np.uint64, len(COUNT_NAMES))):
        good = np.zeros(size, dtype)
        call(good)
        swapped = np.zeros(size, np.dtype(dtype).newbyteorder("S"))
        with pytest.raises(TypeError, match="byte-swapped"):
            call(swapped)
        with pytest.raises(ValueError, match="misaligned"):
            call(_misaligned(good))
        with pytest.raises(ValueError, match="C-contiguous"):
            call(np.zeros(2 * size, dtype)[::2])
        ro = np.zeros(size, dtype)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            call(ro)
        with pytest.raises(ValueError):
            call(np.zeros((), dtype))
        with pytest.raises(TypeError):
            call(np.zeros(size, object))
        assert not swapped.any() and not ro.any()


def test_sensor_reads_every_layout_by_value():
    s = Sensor((1.0, 2.0), 1.0, 1e-3)
    want = s.measure(Z)
    for name, z in _variants(Z).items():
        if name != "float32-exact":
            assert s.measure(z).tobytes() == want.tobytes(), name
            assert s.to_cartesian(s.measure(z)).tobytes() == s.to_cartesian(want).tobytes(), name
    for name, p in _variants(np.array([1.0, 2.0])).items():
        if name != "float32-exact":
            assert Sensor(p, 1.0, 1e-3) == s, name
    _bad_inputs_raise(s.measure)
    with pytest.raises(ValueError):
        Sensor(np.float64(1.0), 1.0, 1e-3)
    with pytest.raises(ValueError):
        Sensor(np.empty(2, dtype=object), 1.0, 1e-3)
    t = Tracker()
    t.tick(_variants(s.measure(Z))["byte-swapped"], 0.1, sensor=s)
    ref = Tracker()
    ref.tick(s.measure(Z), 0.1, sensor=s)
    assert t.column("x").tobytes() == ref.column("x").tobytes()


def test_assignment_reads_every_layout_by_value():
    cost = np.abs(Z) + 1.0
    want = solve_assignment(cost)
    for name, c in _variants(cost).items():
        got = solve_assignment(c)
        assert all(np.array_equal(a, b) for a, b in zip(got, want)), name
    _bad_inputs_raise(solve_assignment)
    with pytest.raises(TypeError):
        solve_assignment(cost.astype(np.complex128))


@pytest.mark.parametrize("metric", [gospa, sparse_gospa, ospa])
def test_metrics_read_every_layout_by_value(metric):
    Y = Z + 0.5
    want = metric(Z, Y)
    for name, x in _variants(Z).items():
        if name != "float32-exact":
            assert metric(x, Y) == want, name
            assert metric(Z, _variants(Y)[name]) == want, name
    _bad_inputs_raise(lambda x: metric(x, Y))
    with pytest.raises(ValueError):
        metric(Z, np.zeros((2, 3)))            # points of another dimension


def test_table_reads_every_layout_by_value():
    ref = Table({"p": ("float64", (2,))}, 8)
    ref.insert_many(p=Z)
    for name, z in _variants(Z).items():
        t = Table({"p": ("float64", (2,))}, 8)
        h = t.insert_many(p=z)
        if name != "float32-exact":
            assert t["p"].tobytes() == ref["p"].tobytes(), name
        for hv in _variants(h.astype(np.float64)).values():
            if isinstance(hv, np.ndarray):
                with pytest.raises(TypeError):
                    t.remove_many(hv)              # handles are integers
        swapped = h.astype(h.dtype.newbyteorder("S"))
        t.remove_many(_misaligned(swapped[:1]).astype(swapped.dtype))
        t.remove_many(h[1:][::-1].copy())
        assert len(t) == 0
        t.check()
    t = Table({"p": ("float64", (2,))}, 8)
    before = t.stats()
    _bad_inputs_raise(lambda z: t.insert_many(p=z))
    assert t.stats() == before and len(t) == 0


def test_ring_write_reads_every_layout_by_value():
    r = Ring(2, 8, 2)
    for name, z in _variants(Z).items():
        with r.write(0) as slot:
            slot.write(z)
        with r.read(0) as slot:
            if name != "float32-exact":
                assert slot.rows.tobytes() == Z.tobytes(), name
    with r.write(0) as slot:
        _bad_inputs_raise(slot.write)
        assert slot.count == 0
    r.check()


def test_arena_array_reads_every_layout_by_value():
    a = Arena(1 << 16)
    for name, z in _variants(Z).items():
        out = a.array(z, np.float64)
        if name != "float32-exact":
            assert out.tobytes() == Z.tobytes() and out.flags.aligned and out.flags.c_contiguous, name
    used = a.stats()["used"]
    with pytest.raises(TypeError):
        a.array(np.empty(3, dtype=object))
    with pytest.raises(ValueError):
        a.array([[1.0, 2.0], [3.0]])
    assert a.stats()["used"] == used


# ---------------------------------------------------------------- scenario dataclasses

@pytest.mark.parametrize("args, kwargs, exc", [
    ((2**40, 0.02, 65536), {}, ValueError),
    ((True, 0.02, 10.0), {}, TypeError),
    ((2, 0.0, 10.0), {}, ValueError),
    ((2, float("nan"), 10.0), {}, ValueError),
    ((2, 0.02, "10"), {}, TypeError),
    ((2, 0.02, 1e200), {}, ValueError),                  # infinite area
    ((3, 0.02, -1.0), {}, ValueError),
    ((2, 0.02, 10.0), dict(clutter=-1.0), ValueError),
    ((2, 0.02, 10.0), dict(patch_radius=float("inf")), ValueError),
    ((2, 0.02, 10.0), dict(patch_centres=np.zeros((2, 3))), ValueError),
    ((2, 0.02, 10.0), dict(detections=(np.zeros((1, 2)),)), TypeError),
    ((2, 0.02, 10.0), dict(detections=[np.zeros((1, 3))]), ValueError),
    ((2, 0.02, 10.0), dict(detections=[np.zeros((1, 2))], truth_ids=[np.zeros(1, np.int64)] * 2), ValueError),
    ((2, 0.02, 10.0), dict(detections=[np.empty((1, 2), object)]), TypeError),
])
def test_scenario_fields_are_validated_before_anything_is_built(args, kwargs, exc):
    with pytest.raises(exc):
        Scenario(*args, **kwargs)


def test_scenario_and_radar_scenario_accept_what_generate_makes():
    sc = generate(5, 4, seed=2)
    again = Scenario(sc.dim, sc.dt, sc.extent, list(sc.detections), list(sc.truth_ids), list(sc.truth_pos),
                     list(sc.det_truth), sc.clutter, sc.patch_centres, sc.patch_radius)
    assert again.volume == sc.volume and again.scans == sc.scans
    swapped = [d.astype(">f8") for d in sc.detections]
    s2 = Scenario(2, 0.02, 10.0, swapped)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(s2.detections, sc.detections))
    assert all(d.dtype == np.dtype(">f8") for d in swapped)      # the caller's list is left as it was
    with pytest.raises(TypeError):
        RadarScenario(2, 0.02, 10.0, sensors=["not a sensor"])
    with pytest.raises(ValueError):
        RadarScenario(2, 0.02, 10.0, sensors=[Sensor((0.0, 0.0, 0.0), 1.0, 1e-3, 1e-3)])


def test_mot_sequence_fields_are_validated():
    from dod.tracker.mot import MotSequence
    ok = MotSequence("s", 25.0, 640, 480, ids=[[1, 2]], boxes=[np.zeros((2, 4), ">f8")], conf=[[1.0, 0.5]])
    assert ok.boxes[0].dtype == np.float64 and ok.ids[0].dtype == np.int64
    for kwargs, exc in ((dict(fps=0.0), ValueError), (dict(width=float("inf")), ValueError),
                        (dict(name=3), TypeError), (dict(first_frame=-1), ValueError),
                        (dict(boxes=[np.zeros((2, 3))]), ValueError), (dict(ids=[[1], [2]], conf=[[1.0]]), ValueError),
                        (dict(ids=[np.empty(1, object)]), TypeError)):
        args = dict(name="s", fps=25.0, width=640, height=480)
        args.update(kwargs)
        with pytest.raises(exc):
            MotSequence(**args)


def test_scenario_generators_refuse_sizes_that_would_exhaust_memory():
    from dod.tracker.scenario import iter_scans
    for n in (2**40, -1, 1.5, True):
        with pytest.raises((TypeError, ValueError)):
            next(iter_scans(n, 3))
    with pytest.raises(ValueError):
        next(iter_scans(3, 3, spacing=float("inf")))


# ---------------------------------------------------------------- bounded waits

def test_ring_wait_on_a_side_held_by_the_same_thread_raises_at_once():
    r = Ring(1, 1)
    with r.write(0):
        pass
    slot = r.acquire_read(0)
    t0 = time.monotonic()
    with pytest.raises(StallError, match="this same thread") as e:
        r.acquire_write()                       # full, and only this thread can release
    assert time.monotonic() - t0 < BOUND_S
    assert "'consumer': 'holding'" in str(e.value) and "'producer': 'waiting'" in str(e.value)
    slot = None
    r.release()
    w = r.acquire_write(0)
    with pytest.raises(StallError):
        r.acquire_read(5.0)                     # a bound does not make it wait for what cannot come
    w = None
    r.abort()
    r.check()
    assert r.state() == {"producer": "idle", "consumer": "idle", "producer_thread": None,
                         "consumer_thread": None, "in_flight": 0, "slots": 1, "closed": False}


def test_ring_wait_on_a_side_held_by_an_ended_thread_raises():
    r = Ring(1, 1)

    def hold():
        r.acquire_write(0)                      # returns holding the slot: nothing can commit it
    th = threading.Thread(target=hold)
    th.start()
    th.join()
    done, box = _bounded(lambda: r.acquire_read())
    assert done and isinstance(box.get("err"), StallError), box
    assert "ended" in str(box["err"])          # (or its id reused by the waiting thread: said so)


def test_ring_bounded_wait_raises_timeout_with_both_sides_state():
    r = Ring(1, 1)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as e:
        r.acquire_read(0.05)
    assert not isinstance(e.value, StallError)
    assert 0.04 < time.monotonic() - t0 < BOUND_S
    assert "'producer': 'idle'" in str(e.value) and "'in_flight': 0" in str(e.value)
    with pytest.raises(TypeError):
        r.acquire_read(0, stall=3)


def test_ctrl_c_interrupts_an_unbounded_ring_wait():
    r = Ring(1, 1)
    main = threading.main_thread().ident
    assert threading.current_thread().ident == main     # signals reach the main thread only
    # A test runner's worker process may have replaced Python's handler
    # (pytest-xdist's workers do): put it back for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    fire = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT))
    backstop = threading.Timer(BOUND_S, r.close)       # a failure returns instead of hanging
    fire.start()
    backstop.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            r.acquire_read()
    finally:
        fire.cancel()
        backstop.cancel()
        signal.signal(signal.SIGINT, previous)
    assert not r.closed
    assert r.state()["consumer"] == "idle"


def test_ring_producer_take_before_start_raises():
    r = Ring(2, 1)
    p = RingProducer(r, range(3), lambda i: None)
    with pytest.raises(StallError, match="never started"):
        p.take()
    with pytest.raises(ValueError):
        p.take(Ring(1, 1))
    assert p.close()


@pytest.mark.parametrize("batched", [False, True])
def test_ring_producer_take_raises_when_the_producer_is_parked_on_an_undrained_ring(batched):
    a, b = Ring(2, 1), Ring(1, 1)

    def fill(i):
        with p.write(b) as slot:               # the side ring, never drained by the consumer
            slot.write([i])
        with p.write(a) as slot:
            slot.write([i])
    p = RingProducer((a, b), range(100), fill, batched=batched)
    with p:
        def consume():
            while (s := p.take()) is not None:
                s = None
                a.release()
        done, box = _bounded(consume)
        assert done, "take() waited forever"
        assert isinstance(box.get("err"), StallError), box
    assert not p.alive


def test_ring_producer_write_timeout_bounds_a_batched_wait():
    a = Ring(1, 1)
    errors = []

    def fill(i):
        try:
            with p.write(a, timeout=0.05) as slot:
                slot.write([i])
        except TimeoutError as e:
            errors.append(e)
            raise
    p = RingProducer(a, range(5), fill, batched=True)
    p.start()
    p._thread.join(BOUND_S)
    assert not p.alive and errors and isinstance(p.error, TimeoutError)
    assert p.close()
