"""dod.ring_producer and the demo's scan pipeline (dod.tracker.stream): a
producer thread filling ring slots, the consumer taking them in order;
back-pressure, bounded memory, shutdown (end, close, Ctrl-C) and an
exception in the producer raised in the consumer's thread."""
import _thread
import os
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import dod
from dod.ring import Ring
from dod.ring_producer import RingProducer
from dod.tracker import demo
from dod.tracker.scenario import iter_scans, scan_extent
from dod.tracker.stream import ScanStream


def filler(p, ring, log=None):
    def fill(i):
        with p.write(ring) as slot:
            if log is not None:
                log.append(len(ring))                     # slots in flight while the producer holds one
            slot.write(np.full((i % 7 + 1, 2), float(i)), tag=i)
    return fill


def make(n, slots=4, items=None, log=None):
    ring = Ring(slots, 8, (2,))
    p = RingProducer(ring, range(n) if items is None else items, lambda i: None)
    p._fill = filler(p, ring, log)
    return ring, p


def drain(p, ring, delay=0.0):
    got = []
    while (slot := p.take(timeout=30)) is not None:
        got.append((slot.seq, slot.tag, slot.count, float(slot.rows[0, 0])))
        ring.release()
        if delay:
            time.sleep(delay)
    return got


# ---------------------------------------------------------------- order and back-pressure

def test_every_item_arrives_once_in_order():
    ring, p = make(500)
    with p:
        got = drain(p, ring)
    assert got == [(i, i, i % 7 + 1, float(i)) for i in range(500)]
    assert p.produced == 500 and p.error is None and not p.alive
    assert ring.closed and len(ring) == 0
    ring.check()
    assert p.take() is None                             # end of stream stays the end


def test_back_pressure_bounds_what_waits():
    log = []
    ring, p = make(60, slots=3, log=log)
    consumed = []
    with p:
        while (slot := p.take(timeout=30)) is not None:
            # the producer is never more than the ring (+ the slot it fills) ahead
            assert p.produced - len(consumed) <= ring.slots + 1
            consumed.append(slot.tag)
            ring.release()
            time.sleep(0.002)                           # a slow consumer: the producer must wait
    assert consumed == list(range(60))
    assert max(log) <= ring.slots - 1                   # in flight while the producer holds a slot
    st = ring.stats()
    assert st["write_waits"] > 0 and st["peak"] <= st["capacity"]


def test_memory_stays_bounded_over_a_long_stream():
    # Steady state: no Python blocks kept per item (counted when the producer
    # is parked on a full ring, so that its temporaries are not in flight).
    ring, p = make(6000, slots=4)
    counts = []
    with p:
        n = 0
        while (slot := p.take(timeout=30)) is not None:
            ring.release()
            n += 1
            if n % 1000 == 0:
                t0 = time.monotonic()
                while not p.parked and p.alive and time.monotonic() - t0 < 5:
                    time.sleep(0.0005)
                if p.parked:
                    counts.append(sys.getallocatedblocks())
    assert n == 6000 and len(counts) >= 3
    if counts[0]:                                       # pymalloc: 0 otherwise
        # 5000 items between the first and last count: a leak of one block per item shows as 5000
        assert counts[-1] - counts[0] < 200, counts


# ---------------------------------------------------------------- errors surface, nothing hangs

def failing(n, exc):
    yield from range(n)
    raise exc


def test_an_exception_in_the_items_reaches_the_consumer_after_the_committed_slots():
    ring, p = make(0, items=failing(5, ValueError("bad scan")))
    with pytest.raises(ValueError, match="bad scan") as info:
        with p:
            got = []
            while (slot := p.take(timeout=30)) is not None:
                got.append(slot.tag)
                ring.release()
    assert got == [0, 1, 2, 3, 4]
    assert any("producer thread" in note for note in info.value.__notes__)
    assert not p.alive and ring.closed
    with pytest.raises(ValueError):
        p.check()


def test_an_exception_in_fill_wakes_a_waiting_consumer():
    ring = Ring(2, 4, (2,))

    def fill(i):
        time.sleep(0.2)                                  # the consumer is asleep in take() by now
        raise KeyError(i)

    p = RingProducer(ring, range(3), fill, start=True)
    t0 = time.monotonic()
    with pytest.raises(KeyError):
        p.take(timeout=30)
    assert time.monotonic() - t0 < 20                    # woken by the close, not by the timeout
    p.close()
    assert not p.alive and len(ring) == 0               # the held slot was given back (abort)


def test_a_write_too_big_for_the_slot_is_the_producer_error():
    ring = Ring(2, 4, (2,))
    p = RingProducer(ring, [np.zeros((5, 2))], lambda a: None)

    def fill(a):
        with p.write() as slot:
            slot.write(a)
    p._fill = fill
    with p:
        with pytest.raises(ValueError, match="do not fit"):
            p.take(timeout=30)


# ---------------------------------------------------------------- shutdown

def test_close_stops_a_parked_producer_and_runs_the_generators_finally():
    done = []

    def items():
        try:
            yield from range(10**9)
        finally:
            done.append(True)

    ring, p = make(0, slots=2, items=items())
    p.start()
    t0 = time.monotonic()
    while not p.parked and time.monotonic() - t0 < 10:
        time.sleep(0.001)
    assert p.parked and len(ring) == 2
    assert p.close(timeout=10)
    assert not p.alive and done == [True] and p.error is None      # a stop is not an error
    assert p.produced == 2
    p.close()                                           # idempotent


def test_close_waits_for_an_item_in_progress():
    def slow():
        yield 0
        time.sleep(0.3)
        yield 1
        yield 2

    ring, p = make(0, items=slow())
    p.start()
    assert p.take(timeout=30).tag == 0
    ring.release()
    assert p.close(timeout=10) and not p.alive
    assert p.produced <= 2                               # stopped after the item it was drawing


def test_ctrl_c_while_the_consumer_waits_ends_the_producer():
    def stalled():
        yield 0
        time.sleep(0.5)                                  # nothing comes for a while
        yield from range(1, 10**9)

    ring, p = make(0, items=stalled())
    # A process started with SIGINT ignored (a background job of a shell
    # without job control) or a test runner's worker may not have Python's
    # handler: put it back for the test, and close the producer after a
    # bound so that a failure returns instead of waiting forever.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    backstop = threading.Timer(30.0, p.close)
    fire = threading.Timer(0.2, _thread.interrupt_main)
    backstop.start()
    fire.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            with p:
                while p.take() is not None:             # no timeout: only Ctrl-C gets us out
                    ring.release()
    finally:
        fire.cancel()
        backstop.cancel()
        signal.signal(signal.SIGINT, previous)
    assert not p.alive and ring.closed


def test_bad_arguments():
    ring = Ring(2, 4)
    with pytest.raises(TypeError):
        RingProducer([], range(3), print)
    with pytest.raises(TypeError):
        RingProducer([ring, "x"], range(3), print)
    with pytest.raises(TypeError):
        RingProducer(ring, range(3), None)
    p = RingProducer(ring, range(0), print, start=True)
    with pytest.raises(RuntimeError):
        p.start()
    p.close()


# ---------------------------------------------------------------- the demo's scan stream

def test_scan_stream_delivers_the_scenario_and_its_sampled_truth():
    want = list(iter_scans(200, 47, seed=2))
    rows = max(s.detections.shape[0] for s in want)
    st = ScanStream(200, 47, rows=rows, slots=6, sample_every=10, seed=2).start()
    got = []
    try:
        while (slot := st.take()) is not None:
            s = slot.tag
            assert slot.seq == s == len(got) and slot.dt == want[s].dt
            assert slot.rows.tobytes() == want[s].detections.tobytes()
            got.append(s)
            st.release_scan()
            t = st.truth_of(s)
            assert (t is not None) == st.is_sampled(s) == ((s + 1) % 10 == 0 or s == 46)
            if t is not None:
                assert np.array_equal(t.rows[:, 0], want[s].truth_ids)
                assert t.rows[:, 1:].tobytes() == want[s].truth_pos.tobytes()
                st.release_truth()
    finally:
        st.close()
    assert got == list(range(47)) and len(st.truth) == 0


def test_scan_stream_window_keeps_the_targets_inside_and_counts_all():
    want = list(iter_scans(300, 25, seed=4))
    rows = max(s.detections.shape[0] for s in want)
    w = scan_extent(300) / 4
    st = ScanStream(300, 25, rows=rows, slots=4, sample_every=3, window=w, seed=4).start()
    seen = 0
    try:
        while (slot := st.take()) is not None:
            s = slot.tag
            st.release_scan()
            t = st.truth_of(s)
            if t is not None:
                inside = np.all(np.abs(want[s].truth_pos) <= w, axis=1)
                assert 0 < inside.sum() < inside.size
                assert np.array_equal(t.rows[:, 0], want[s].truth_ids[inside])
                assert t.rows[:, 1:].tobytes() == want[s].truth_pos[inside].tobytes()
                assert st.alive_of(t) == want[s].truth_ids.shape[0]
                t = None
                st.release_truth()
                seen += 1
    finally:
        st.close()
    assert seen == 9
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            ScanStream(10, 5, rows=10, slots=2, sample_every=1, window=bad)


def test_scan_stream_skipped_samples_never_stall_the_producer():
    # The consumer never reads the truth except by dropping it: the truth
    # ring (slots // sample_every + 3) must never fill up and block the scans.
    st = ScanStream(50, 300, rows=200, slots=4, sample_every=2, seed=1).start()
    n = 0
    try:
        while (slot := st.take()) is not None:
            s = slot.tag
            st.release_scan()
            st.drop_truth(s if n % 2 else -1)           # every other scan nothing is dropped
            n += 1
    finally:
        st.close()
    assert n == 300


def test_demo_surfaces_a_producer_error(monkeypatch):
    import dod.tracker.stream as stream

    def broken(*a, **k):
        yield from iter_scans(*a, **k)
        raise RuntimeError("sensor unplugged")

    def short(n, scans, **k):
        return broken(n, min(scans, 30), **k)

    monkeypatch.setattr(stream, "iter_scans", short)
    run = demo.DemoRun(targets=50, duration=2.0, fast=True)
    with pytest.raises(RuntimeError, match="sensor unplugged"):
        run.run()
    assert run.done == 30 and not run.stream.producer.alive


def test_demo_reports_realtime_options():
    cpu = min(os.sched_getaffinity(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)          # SCHED_FIFO may be refused here
        run = demo.DemoRun(targets=50, rate=100.0, duration=0.2, cpu=cpu, realtime_priority=1).run()
    text = run.summary()
    assert f"realtime   cpu {cpu} active" in text
    assert "SCHED_FIFO 1 active" in text or ("SCHED_FIFO 1 refused" in text and "refused: " in text)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER       # undone after the run
    assert "realtime   none requested" in demo.DemoRun(targets=50, duration=0.1, fast=True).run().summary()


def test_demo_cli_realtime_flags():
    a = demo.build_parser().parse_args(["--lock-memory", "--cpu", "0", "--realtime-priority", "5"])
    assert (a.lock_memory, a.cpu, a.realtime_priority, a.rt_strict) == (True, 0, 5, False)
    assert demo.build_parser().parse_args(["--lock-memory", "onfault"]).lock_memory == "onfault"
    with pytest.raises(SystemExit):
        demo.build_parser().parse_args(["--lock-memory", "always"])
    err = demo.main(["--cpu", "-1", "--no-live", "--duration", "0.1"], out=open(os.devnull, "w"))
    assert err == 2                                           # a bad value: an error before the run


def test_batched_producer_refills_only_when_asked_and_never_stalls_a_consumer():
    ring = Ring(4, 8, (2,))
    p = RingProducer(ring, range(40), lambda i: None, batched=True)
    p._fill = filler(p, ring)

    def settle():
        t0 = time.monotonic()
        while not (p.parked or not p.alive) and time.monotonic() - t0 < 10:
            time.sleep(0.001)
        time.sleep(0.05)
    with p:
        settle()
        assert len(ring) == 4 and p.parked
        for _ in range(3):                             # released, but no refill asked for
            assert p.take(timeout=30) is not None
            ring.release()
        settle()
        assert len(ring) == 1 and p.produced == 4      # the producer did not wake per release
        p.refill()
        settle()
        assert len(ring) == 4 and p.produced == 7
        got = []
        while (slot := p.take(timeout=30)) is not None:   # never refilled by hand: take() on empty does
            got.append(slot.tag)
            ring.release()
    assert got == list(range(3, 40))


def test_demo_sample_store_keeps_the_latest_samples_in_fixed_blocks():
    store = demo.SampleStore(3, 4)
    nbytes = store.ids.nbytes + store.pos.nbytes
    for k in range(5):
        n = k + 2                                        # 2..6 points: the last two are cut to 4
        store.append(10 + k, np.arange(n) + 100 * k, np.full((n, 2), float(k)))
    got = list(store)
    assert [g[0] for g in got] == [12, 13, 14] and len(store) == 3
    assert [g[1].tolist() for g in got] == [[200, 201, 202, 203], [300, 301, 302, 303],
                                            [400, 401, 402, 403]]
    assert all((g[2] == k + 2).all() and g[2].shape == (4, 2) for k, g in enumerate(got))
    assert store.truncated == 1 + 2 and store.ids.nbytes + store.pos.nbytes == nbytes


def test_demo_strict_refusal_is_an_error(monkeypatch, capsys):
    import dod.realtime

    def refuse(*a):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(dod.realtime._os, "sched_setaffinity", refuse)
    out = open(os.devnull, "w")
    assert demo.main(["--cpu", "0", "--rt-strict", "--no-live", "--duration", "0.1"], out=out) == 1
    assert "cannot pin the loop thread to CPU 0" in capsys.readouterr().err
    # not strict: a warning, the run goes on and the summary says what was refused
    with pytest.warns(RuntimeWarning):
        run = demo.DemoRun(targets=20, duration=0.1, fast=True, cpu=0).run()
    assert "cpu 0 refused | refused: cannot pin" in run.summary()


def test_demo_header_says_requested_before_the_run():
    from dod.realtime import Realtime
    line = demo.realtime_line(Realtime("onfault", 0, None), before=True)
    assert line == "requested lock_memory onfault, cpu 0"
    assert demo.realtime_line(Realtime(), before=True).startswith("none requested")


def _affinity_seen(cpus_kw, main_mask=None):
    """The producer thread's CPUs, with the starting thread pinned to main_mask."""
    ring = Ring(2, 4, (2,), np.float64)
    seen = []
    before = os.sched_getaffinity(0)
    try:
        if main_mask is not None:
            os.sched_setaffinity(0, main_mask)          # this thread only
        with RingProducer(ring, range(1), lambda i: seen.append(os.sched_getaffinity(0)), **cpus_kw) as p:
            while p.take() is not None:
                ring.release()
    finally:
        os.sched_setaffinity(0, before)
    return seen[0]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_producer_thread_leaves_the_starting_threads_pin():
    # A loop thread pinned to one core (Loop(cpu=...), or libgomp under
    # OMP_PROC_BIND) must not pass its pin on to the producer it starts.
    first = min(dod.initial_cpus)
    assert _affinity_seen({}, {first}) == dod.initial_cpus
    assert _affinity_seen({"cpus": None}, {first}) == {first}          # None: inherit
    assert _affinity_seen({"cpus": [first]}) == {first}


def test_producer_cpus_validated_before_anything_starts():
    ring = Ring(2, 4, (2,), np.float64)
    for bad in ("all", [], [-1], [1.5], [True]):
        with pytest.raises(ValueError):
            RingProducer(ring, range(1), lambda i: None, cpus=bad)
    with pytest.raises(TypeError, match="CPU numbers"):
        RingProducer(ring, range(1), lambda i: None, cpus=3)
    assert not ring.closed


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_producer_on_a_cpu_the_os_refuses_fails_at_take():
    ring = Ring(2, 4, (2,), np.float64)
    with pytest.raises(OSError):
        with RingProducer(ring, range(3), lambda i: None, cpus=[1 << 20]) as p:
            p.take()


# ---------------------------------------------------------------- idle priority

def _policy_seen(**kw):
    """(the producer thread's scheduling policy, idle_applied, the items in order)."""
    ring = Ring(2, 4, (2,), np.float64)
    seen = []
    p = RingProducer(ring, range(5), lambda i: None, **kw)

    def fill(i):
        if not seen:
            seen.append(os.sched_getscheduler(0))        # 0: this (the producer) thread
        with p.write(ring) as slot:
            slot.write(np.full((1, 2), float(i)), tag=i)
    p._fill = fill
    with p:
        got = drain(p, ring)
    return seen[0], p.idle_applied, [g[1] for g in got]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this OS")
def test_idle_producer_runs_in_the_idle_class_and_delivers_everything():
    policy, applied, tags = _policy_seen(idle=True)
    assert (policy, applied, tags) == (os.SCHED_IDLE, True, [0, 1, 2, 3, 4])
    assert os.sched_getscheduler(0) == os.SCHED_OTHER             # only its own thread
    policy, applied, tags = _policy_seen()
    assert (policy, applied, tags) == (os.SCHED_OTHER, False, [0, 1, 2, 3, 4])


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this OS")
def test_idle_refused_by_the_os_keeps_the_inherited_priority(monkeypatch):
    def refuse(*a):
        raise PermissionError("not here")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    assert _policy_seen(idle=True) == (os.SCHED_OTHER, False, [0, 1, 2, 3, 4])


def test_idle_must_be_a_bool():
    ring = Ring(2, 4, (2,), np.float64)
    for bad in (1, "yes", None):
        with pytest.raises(TypeError, match="idle"):
            RingProducer(ring, range(1), lambda i: None, idle=bad)
    assert not ring.closed


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="no SCHED_IDLE on this OS")
def test_demo_producer_at_idle_priority_in_real_time_only():
    run = demo.DemoRun(targets=50, rate=100.0, duration=0.1).run()
    assert run.stream.producer.idle_applied and "producer thread (idle priority)" in run.summary()
    run = demo.DemoRun(targets=50, duration=0.1, fast=True).run()      # --fast: no slack to draw in
    assert not run.stream.producer.idle_applied and "producer thread (normal priority)" in run.summary()
