"""Behaviour nothing else tested (issue 16's list), one test per promise."""
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import dod
from dod.arena import Arena
from dod.atomic_arena import AtomicArena
from dod.freelist import FreeList
from dod.loop import Loop
from dod.table import Schema, Table
from dod.tracker import Tracker, track_schema
from dod.tracker.scenario import generate

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- scenario statistics

def test_scenario_detection_rate_clutter_and_speeds_are_what_was_asked():
    sc = generate(100, 300, pd=0.8, clutter=5.0, speed=(5.0, 20.0), birth_death=0.0, crossing=0.0, seed=4)
    truth = sum(len(ids) for ids in sc.truth_ids)
    hits = sum(int((d >= 0).sum()) for d in sc.det_truth)
    false = sum(int((d < 0).sum()) for d in sc.det_truth)
    # Binomial(truth, 0.8): 30,000 trials, sd 0.0023; 5 sd bounds
    assert abs(hits / truth - 0.8) < 5 * np.sqrt(0.8 * 0.2 / truth)
    # Poisson(5) per scan over 300 scans: mean sd 0.13; 5 sd bounds
    assert abs(false / sc.scans - 5.0) < 5 * np.sqrt(5.0 / sc.scans)
    # initial speeds within (min, max): from the first two scans of each target
    p0, p1 = sc.truth_pos[0], sc.truth_pos[1]
    speed = np.linalg.norm(p1 - p0, axis=1) / sc.dt
    assert speed.min() > 5.0 * 0.8 and speed.max() < 20.0 * 1.2   # process noise q=1 moves them a little
    assert np.median(speed) == pytest.approx(12.5, rel=0.15)        # uniform (5, 20): median 12.5
    assert generate(10, 5, seed=1).detections[3].tolist() == generate(10, 5, seed=1).detections[3].tolist()


# ---------------------------------------------------------------- Loop

def test_loop_period_tick_spin_and_a_caller_scratch():
    scratch = Arena(1 << 12)
    seen = []

    def step():
        seen.append(lp.tick)
        lp.scratch.empty(8)               # the per-tick arena is the one we passed
        if lp.tick == 4:
            lp.stop()

    lp = Loop(step, rate=1000.0, spin=0.0005, scratch=scratch, gc=None)
    assert lp.period == pytest.approx(1e-3)
    assert lp.scratch is scratch
    lp.run(100)
    assert seen == [0, 1, 2, 3, 4] and lp.ticks == 5
    assert scratch.used == 0 and scratch.peak >= 8     # rewound after every tick
    with pytest.raises((ValueError, OverflowError)):
        Loop(step, rate=0.0)
    with pytest.raises(ValueError):
        Loop(step, spin=-1.0)


# ---------------------------------------------------------------- Table

def test_table_keys_and_remove_many_unchecked():
    t = Table(Schema(a="float32", b=("int64", (2,))), 8)
    assert list(t.keys()) == ["a", "b"]
    assert set(dict(t)) == {"a", "b"}
    hs = t.insert_many(a=[1, 2, 3, 4])
    view = t["a"]
    with pytest.raises(BufferError):
        t.remove_many(hs[:2])
    assert len(t) == 4
    t.remove_many(hs[:2], unchecked=True)           # stale views are the caller's business
    assert len(t) == 2 and sorted(t["a"].tolist()) == [3.0, 4.0]
    assert hs[0] not in t and hs[2] in t
    del view
    t.check()


# ---------------------------------------------------------------- Arena

def test_arena_pinned_and_unchecked_rewind():
    a = Arena(1 << 12)
    assert a.pinned == 0
    m = a.mark()
    x = a.empty(16, np.uint8)
    assert a.pinned >= 16                            # a live array sits below it
    with pytest.raises(BufferError):
        a.rewind(m)
    assert a.used >= 16
    a.rewind(m, unchecked=True)
    assert a.used == 0
    del x
    assert a.pinned == 0



# ---------------------------------------------------------------- FreeList

def test_freelist_owns_and_strategy():
    f = FreeList(1 << 12, strategy="best")
    assert f.strategy == "best" and FreeList(1 << 12).strategy == "first"
    x = f.alloc(10)
    y = np.zeros(10)
    assert f.owns(x) and not f.owns(y) and not FreeList(1 << 12).owns(x)
    f.free(x)
    assert not f.owns(x)
    with pytest.raises(ValueError):
        FreeList(1 << 12, strategy="worst")


# ---------------------------------------------------------------- ThreadCache

def test_thread_cache_counters():
    upstream = Arena(1 << 15)                    # runs out: refills then fail
    arena = AtomicArena(1 << 12, resource=upstream.resource())
    c = arena.thread_cache(1024)
    assert (c.refills, c.publishes, c.failed) == (0, 0, 0)
    assert 512 < c.chunk <= 1024                     # the request less the block header it shares
    assert c.thread_id == threading.get_ident()
    xs = [c.empty(100, np.uint8) for _ in range(20)]   # 2,000+ bytes: at least two refills
    assert c.refills >= 2
    c.flush()
    assert c.publishes >= 1
    with pytest.raises(MemoryError):
        for _ in range(10_000):
            xs.append(c.empty(400, np.uint8))
    assert c.failed >= 1
    del xs
    c.close()


# ---------------------------------------------------------------- tracker

def test_track_schema_and_confirmed():
    s = track_schema(3)
    names = list(Table(s, 1).keys())
    assert names[:3] == ["id", "x", "P"]
    t = Table(s, 1)
    assert t["x"].shape == (0, 6) and t["P"].shape == (0, 21)       # packed: 6 * 7 / 2
    with pytest.raises(ValueError):
        track_schema(4)
    tr = Tracker()
    sc = generate(10, 20, seed=2)
    for z in sc.detections:
        tr.tick(z, sc.dt)
    mask = tr.confirmed
    assert mask.dtype == bool and mask.shape == (tr.count,)
    assert int(mask.sum()) == tr.counts()["confirmed"] and mask.sum() > 0


# ---------------------------------------------------------------- examples and the tracker bench

def _run(args, timeout=300):
    env = dict(os.environ, PYTHONPATH=dod.get_include())
    p = subprocess.run([sys.executable, "-P", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_example_tracker_loop_prints_what_it_says():
    out = _run(["examples/tracker_loop.py"])
    m = re.search(r"(\d+) ticks, (\d+) deadline misses", out)
    assert m and int(m.group(1)) == 250
    m = re.search(r"(\d+) confirmed tracks, (\d+) true targets", out)
    assert m and abs(int(m.group(1)) - int(m.group(2))) <= 0.1 * int(m.group(2))


def test_example_tracker_stream_prints_what_it_says():
    out = _run(["examples/tracker_stream.py", "--targets", "1500", "--scans", "90", "--threads", "2"])
    m = re.search(r"1500 targets, 2 tick threads: (\d+) ticks, (\d+) deadline misses", out)
    assert m and int(m.group(1)) == 90, out
    m = re.search(r"(\d+) confirmed, (\d+) tentative tracks", out)
    assert m and abs(int(m.group(1)) - 1500) <= 0.15 * 1500, out
    m = re.search(r"RSS ([\d.]+) MiB after 50 scans, ([\d.]+) MiB after 90", out)
    assert m and float(m.group(2)) <= 1.1 * float(m.group(1)), out     # flat: the pages were faulted in first


def test_example_tracker_demo_runs():
    out = _run(["examples/tracker_demo.py"])
    assert out.strip()


def test_tracker_bench_quick():
    out = _run(["-m", "dod.tracker.bench", "--quick"], timeout=600)
    assert "median" in out.lower() or "p50" in out.lower(), out
    assert re.search(r"\b1000\b|\b100\b", out), out


def test_tracker_bench_times_every_tracker_on_every_scan():
    # The scans stream in blocks that each tracker ticks in turn: every
    # tracker is timed on every scan after the warm-up, blocks ragged or not.
    from dod.tracker.bench import run
    for scans in (25, 30):
        rows = run(sizes=(200,), scans=scans, threads=(1, 2), out=lambda *a: None)
        (row,) = rows
        assert [row["threads"][t][3] for t in (1, 2)] == [scans, scans]
        assert row["reference"][3] == scans
        assert row["dod"] == row["threads"][1] and row["confirmed"] > 100
        # and the bare parallel loop beside them, at each thread count
        assert set(row["loop"]) == {1, 2} and all(ms > 0 for ms in row["loop"].values())
        # and a cache line's round trip between two threads, once a timed block
        median, low, high = row["trip"]
        assert 0.0 < low <= median <= high
    (row,) = run(sizes=(200,), scans=25, threads=(1,), out=lambda *a: None)
    assert "loop" not in row and "trip" not in row      # one thread count: no speedup to read


def test_tracker_bench_counts_the_timed_ticks_that_sorted():
    # A sort is a tick's work on top (at 1M about half a tick), so a p99 over
    # few ticks may be a sort's: the table says how many timed ticks sorted,
    # the same at every thread count, as a tracker ticked alone counts them.
    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.bench import run
    from dod.tracker.scenario import iter_scans
    lines = []
    (row,) = run(sizes=(200,), scans=150, threads=(1, 2), reference=False, out=lines.append)
    alone = Tracker(TrackerConfig(capacity=4 * 200, max_detections=2 * 200 + 64))
    sorted_at = []
    for s, sc in enumerate(iter_scans(200, 50 + 150, seed=0, pd=0.9, dim=2)):    # 50 untimed, as the bench
        before = alone.sorts
        alone.tick(sc.detections, sc.dt)
        if alone.sorts != before:
            sorted_at.append(s)
    timed = sum(s >= 50 for s in sorted_at)
    assert timed >= 1 and sorted_at[0] < 50          # sorts in the warm-up, one timed (sort_when_drifted, ~scan 190)
    assert row["sorts"] == {1: timed, 2: timed}
    assert "sorts" in lines[1] and f"{timed} of 150" in lines[2] and f"{timed} of 150" in lines[3]


def test_tracker_bench_passes_table():
    # --passes: every pass's median time per thread count, and a second table.
    from dod.tracker._engine import PASS_NAMES
    from dod.tracker.bench import run
    lines = []
    (row,) = run(sizes=(1500,), scans=20, threads=(1, 2), reference=False, passes=True, out=lines.append)
    assert set(row["passes"]) == {1, 2}
    for t in (1, 2):
        wall, idle, share = row["passes"][t]
        assert len(wall) == len(PASS_NAMES) and (wall >= 0).all() and wall.sum() > 0
        assert (wall <= row["threads"][t][2] + 1e-6).all()   # each within the slowest tick
        assert 0.0 <= share <= 1.0 and idle >= 0.0
    assert row["passes"][1][1] == 0.0                       # one thread: nobody waits
    text = "\n".join(lines)
    assert "where the dod tick goes" in text and "predict_gate" in text
    (row,) = run(sizes=(200,), scans=20, threads=(1,), reference=False, out=lambda *a: None)
    assert "passes" not in row


def test_tracker_bench_prefaults_its_trackers_unless_told_not_to():
    # By default every dod tracker faults its pages in before its first tick
    # (as the demo does): the timed window holds no first-touch faults.
    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.bench import BENCH_MANAGEMENT, run
    lines = []
    (row,) = run(sizes=(200,), scans=20, threads=(1, 2), reference=False, out=lines.append)
    assert "trackers prefaulted" in lines[0]
    cfg = TrackerConfig(capacity=4 * 200, max_detections=2 * 200 + 64, **BENCH_MANAGEMENT)
    assert row["prefault"] == {t: Tracker(cfg, threads=t).prefault() for t in (1, 2)}
    assert row["prefault"][2] > row["prefault"][1] > 0         # and the second worker's arena
    lines = []
    (row,) = run(sizes=(200,), scans=20, threads=(1,), reference=False, out=lines.append, prefault=False)
    assert "prefault" not in row and "not prefaulted" in lines[0]
    out = _run(["-m", "dod.tracker.bench", "--sizes", "100", "--scans", "5", "--no-reference", "--no-prefault"])
    assert "not prefaulted" in out, out


def test_allocation_tests_carry_the_allocs_marker():
    # conftest marks the tests that measure allocations (every thread's:
    # .ci/run runs them apart from pytest-xdist), directly or through a
    # helper of their module; the others stay unmarked.
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-m", "allocs", "-p", "no:cacheprovider",
                        "tests/test_tracker_clutter.py", "tests/test_ring.py", "tests/test_table.py"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    assert "tests/test_tracker_clutter.py::test_zero_allocations_per_tick_with_score_and_two_point" in ids
    assert any(i.startswith("tests/test_ring.py::") for i in ids)
    assert not any(i.startswith("tests/test_table.py::") for i in ids)
    assert not any("track_well" in i for i in ids)


def test_tracker_bench_with_the_demos_initiation():
    # --initiation two_point: tracks start from pairs, as in the demo; the
    # reference runs the same configuration (its ratio compares like with like).
    from dod.tracker.bench import run
    lines = []
    (row,) = run(sizes=(300,), scans=25, threads=(1,), initiation="two_point", out=lines.append)
    assert "two-point initiation" in lines[0]
    assert row["confirmed"] > 200 and row["reference"][3] == 25


def test_scratch_bytes_refuses_what_is_not_a_config():
    # found by tests/test_fuzz_api.py: scratch_bytes(0) raised AttributeError
    from dod.tracker import TrackerConfig, scratch_bytes
    assert scratch_bytes(TrackerConfig()) > 0
    for bad in (0, None, "x", np.zeros(3)):
        with pytest.raises(TypeError, match="TrackerConfig"):
            scratch_bytes(bad)
