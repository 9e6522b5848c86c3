"""Tracker.prefault: every page a tick can touch (its tables, scratch and
workers' arenas, through the memory floor's dod.pages.dod_pages_prefault
and the owners' page_ranges) made resident at once, over threads, contents
kept and no result changed (issue 12: RSS flat from the first scan).

The floor's own tests: tests/test_pages.py (dod.pages.prefault, the _os.h
helpers), tests/test_arena.py and tests/test_table.py (their prefault).
Residency is read from /proc/self/statm (Linux): a fresh anonymous mapping
costs nothing until touched, so RSS grows by the pages faulted in.
"""
import numpy as np
import pytest

from prefault_support import MiB, needs_proc, rss, run_refused
from dod.tracker import Tracker, TrackerConfig

pytestmark = needs_proc


def _scenario(seed=3, scans=30, n=300):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 2000, (n, 2))
    vel = rng.normal(0, 5, (n, 2))
    for _ in range(scans):
        pos += vel * 0.02
        seen = pos[rng.random(n) < 0.9]
        clutter = rng.uniform(0, 2000, (rng.poisson(20), 2))
        yield np.ascontiguousarray(np.vstack([seen + rng.normal(0, 1, seen.shape), clutter]))


@pytest.mark.parametrize("threads", [1, 2])
def test_tracker_prefault_changes_no_result(threads):
    cfg = TrackerConfig(capacity=4000, max_detections=2000, threads=threads, parallel_min_rows=0)
    lazy, eager = Tracker(cfg), Tracker(cfg)
    before = rss()
    touched = eager.prefault()
    assert touched >= eager.table.nbytes + eager.scratch.capacity
    assert rss() - before > 0.9 * (eager.table.nbytes + eager.scratch.capacity)
    for z in _scenario():
        lazy.tick(z, 0.02)
        eager.tick(z, 0.02)
    assert lazy.count == eager.count > 0
    for name in ("id", "x", "P", "hits", "misses", "status", "score"):
        assert np.array_equal(lazy.table[name], eager.table[name]), name
    assert eager.prefault() == touched        # again, between ticks: still allowed, nothing moves
    eager.table.check()


def test_tracker_prefault_is_refused_while_its_table_is_held():
    tr = Tracker(TrackerConfig(capacity=256, max_detections=128))
    with tr.table.exclusive("someone else"):
        with pytest.raises(RuntimeError, match="someone else"):
            tr.prefault()
    assert tr.prefault() > 0


@pytest.mark.parametrize("initiation", ["single", "two_point"])
def test_tracker_prefault_over_threads_faults_the_same_pages(initiation):
    # prefault(threads=k) cuts the same blocks into 64 MiB pieces over k
    # threads: the same bytes at every count, all resident after.
    cfg = TrackerConfig(capacity=300_000, max_detections=20_000, threads=2, initiation=initiation)
    lazy = Tracker(cfg)
    before = rss()
    touched = lazy.prefault(threads=3)
    assert rss() - before > 0.9 * (lazy.table.nbytes + lazy.scratch.capacity)
    assert touched > 64 * MiB                  # more than one piece
    for k in (1, 2, 5, None):
        assert lazy.prefault(threads=k) == touched
    assert Tracker(cfg).prefault(threads=1) == touched
    # the owners' own prefaults cover a part of it: the tables and the
    # scratch arena (the rest: the workers' arenas and the displaced map)
    owners = lazy.table.prefault() + lazy.singles.prefault() + lazy.scratch.prefault(threads=2)
    assert owners < touched and touched - owners < 2 * 17 * MiB + 300_000 + 2 * (1 << 16)


def test_tracker_prefault_refuses_bad_thread_counts_and_changes_nothing():
    tr = Tracker(TrackerConfig(capacity=256, max_detections=128, threads=2))
    for bad in (0, -1, 257, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads must be"):
            tr.prefault(threads=bad)
    tr.tick(np.zeros((3, 2)), 0.02)            # nothing held: the tick runs
    assert tr.prefault(threads=256) > 0


@pytest.mark.parametrize("threads", [1, 2])
def test_tracker_prefault_over_threads_is_refused_while_a_table_is_held(threads):
    tr = Tracker(TrackerConfig(capacity=256, max_detections=128, threads=threads, initiation="two_point"))
    for held in (tr.table, tr.singles):
        with held.exclusive("someone else"):
            with pytest.raises(RuntimeError, match="someone else"):
                tr.prefault()
        assert tr.prefault() > 0                # both tables released again
        tr.tick(np.zeros((3, 2)), 0.02)


def test_demo_prefaults_unless_told_not_to():
    from dod.tracker.demo import DemoRun
    on = DemoRun(targets=50, duration=0.1, fast=True)
    off = DemoRun(targets=50, duration=0.1, fast=True, prefault=False)
    assert on.prefaulted >= on.tracker.table.nbytes + on.tracker.scratch.capacity
    assert off.prefaulted == 0
    on.run()
    off.run()
    assert "MiB faulted in at start" in on.summary()
    assert "off (--no-prefault)" in off.summary()


REFUSED_PREFAULT = r"""
import sys
import numpy as np
from dod.tracker import Tracker, TrackerConfig

def scans(seed):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 3000, (400, 2))
    for _ in range(12):
        pos += rng.normal(0, 0.5, pos.shape)
        yield np.ascontiguousarray(np.vstack([pos[rng.random(400) < 0.9], rng.uniform(0, 3000, (40, 2))]))

COLUMNS = ("id", "x", "P", "hits", "misses", "age", "history", "status")
threads = int(sys.argv[1])
cfg = TrackerConfig(capacity=300_000, max_detections=20_000, threads=threads, initiation="two_point")
refused, control = Tracker(cfg), Tracker(cfg)
first = list(scans(threads))
for z in first[:6]:
    refused.tick(z, 0.02)
    control.tick(z, 0.02)
before = {c: refused.table[c].copy() for c in COLUMNS}
waiting = refused.singles.handles().copy()
for k in (threads, 3):         # over the tracker's threads, then over three
    try:
        refused.prefault(threads=k)
    except MemoryError as e:
        assert "could not fault in" in str(e) and "Cannot allocate memory" in str(e), e
    else:
        raise AssertionError("prefault did not raise")
    for c in COLUMNS:          # contents unchanged
        assert np.array_equal(refused.table[c], before[c]), c
    assert np.array_equal(refused.singles.handles(), waiting) and len(waiting) > 0
refused.table.check()
refused.singles.check()
for z in first[6:]:            # and it ticks on as the control does
    refused.tick(z, 0.02)
    control.tick(z, 0.02)
assert refused.count == control.count > 0
for c in COLUMNS:
    assert np.array_equal(refused.table[c], control.table[c]), c

print("refused as expected")
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_prefault_refused_by_the_kernel_raises_and_changes_nothing(tmp_path, threads):
    # Tracker.prefault on one thread and over several (pieces refused after
    # some succeeded: part resident; then every piece refused).
    assert "refused as expected" in run_refused(tmp_path, REFUSED_PREFAULT, threads)
