"""Prefaulting: Arena.prefault, Table.prefault, Tracker.prefault and the
_os.h helpers under them make every page resident at once, keep contents,
and change no result (issue 12: RSS flat from the first scan).

Residency is read from /proc/self/statm (Linux): a fresh anonymous mapping
costs nothing until touched, so RSS grows by the pages faulted in.
"""
import ctypes
import mmap
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from dod.arena import Arena
from dod.table import Table
from dod.tracker import Tracker, TrackerConfig

PAGE = mmap.PAGESIZE
MiB = 1 << 20

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def test_arena_prefault_makes_the_capacity_resident_and_keeps_contents():
    a = Arena(48 * MiB)
    x = a.empty(1000, np.int64)
    x[:] = np.arange(1000) * 7
    before = rss()
    touched = a.prefault()
    assert touched >= 48 * MiB and touched % PAGE == 0
    assert rss() - before > 44 * MiB          # the pages were not resident before
    assert np.array_equal(x, np.arange(1000) * 7)
    assert a.used > 0 and a.stats()["allocations"] == 1       # nothing pushed or rewound
    again = rss()
    assert a.prefault() == touched and rss() - again < 2 * MiB        # idempotent


def test_arena_prefault_of_a_caller_buffer_keeps_its_bytes():
    buf = bytearray(os.urandom(3 * PAGE + 123))
    copy = bytes(buf)
    a = Arena(buffer=buf)
    assert a.prefault() >= len(buf)
    assert bytes(buf) == copy


def test_prefault_of_pages_the_system_cannot_back_raises(tmp_path):
    # A shared file mapping past the end of its file: a touch would be
    # SIGBUS, MADV_POPULATE_WRITE fails (EFAULT). prefault must raise
    # MemoryError, not fall back to touching (the interpreter would die).
    # Needs Linux 5.14+ (MADV_POPULATE_WRITE), as every machine CI runs on.
    with open(tmp_path / "backing", "w+b") as f:
        f.truncate(4 * PAGE)
        m = mmap.mmap(f.fileno(), 4 * PAGE)
        f.truncate(0)
    a = Arena(buffer=m)
    with pytest.raises(MemoryError, match="could not fault in"):
        a.prefault()
    del a
    m.close()


def test_growable_arena_prefaults_every_block():
    a = Arena(1 * MiB, growable=True)
    a.empty(3 * MiB // 2, np.uint8)            # a second block
    assert a.blocks == 2
    assert a.prefault() >= a.capacity


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


def test_table_prefault_is_refused_during_an_exclusive_pass():
    t = Table({"x": np.float64}, 100)
    t.insert_many(x=np.ones(3))
    with t.exclusive("a test pass"):
        with pytest.raises(RuntimeError, match="a test pass"):
            t.prefault()
    assert t.prefault() > 0                   # the pass ended: allowed again
    t.insert_many(x=np.ones(2))               # and the table takes inserts again
    assert len(t) == 5


OS_SOURCE = """
from dod.arena cimport Arena

cdef extern from "_os.h" nogil:
    size_t dod_os_touch_pages(void* p, size_t size)
    size_t dod_os_span_pages(const void* p, size_t size)

def touch(Arena a, size_t offset, size_t n):
    return dod_os_touch_pages(a.engine.base + offset, n)

def span(size_t address, size_t n):
    return dod_os_span_pages(<const void*>address, n)

def base(Arena a):
    return <size_t>a.engine.base
"""


def test_os_touch_fallback_and_page_span(compile_cython):
    # dod_os_touch_pages is the path where MADV_POPULATE_WRITE is missing
    # (kernels before 5.14): one read-write per page, contents unchanged.
    mod = compile_cython(OS_SOURCE)
    a = Arena(24 * MiB)
    x = a.empty(4096, np.uint8)
    x[:] = np.arange(4096) % 251
    before = rss()
    assert mod.touch(a, 100, 16 * MiB) == mod.span(mod.base(a) + 100, 16 * MiB) >= 16 * MiB
    assert rss() - before > 15 * MiB
    assert np.array_equal(x, np.arange(4096) % 251)
    assert mod.touch(a, 0, 0) == 0
    base = PAGE * 1000
    assert mod.span(base, 1) == PAGE and mod.span(base, PAGE) == PAGE
    assert mod.span(base + PAGE - 1, 2) == 2 * PAGE           # crosses a boundary
    assert mod.span(base + 5, PAGE) == 2 * PAGE
    assert mod.span(base, 0) == 0 and mod.span(0, 100) == 0


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
    for name in ("id", "x", "P", "hits", "misses", "state", "score"):
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
    # OpenMP threads: the same bytes at every count, all resident after.
    cfg = TrackerConfig(capacity=300_000, max_detections=20_000, threads=2, initiation=initiation)
    lazy = Tracker(cfg)
    before = rss()
    touched = lazy.prefault(threads=3)
    assert rss() - before > 0.9 * (lazy.table.nbytes + lazy.scratch.capacity)
    assert touched > 64 * MiB                  # more than one piece
    for k in (1, 2, 5, None):
        assert lazy.prefault(threads=k) == touched
    assert Tracker(cfg).prefault(threads=1) == touched


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


# A madvise that refuses MADV_POPULATE_WRITE (ENOMEM, as a kernel short of
# memory does) after DOD_TEST_POPULATE_OK successful calls, preloaded into a
# fresh interpreter: the only way to reach the MemoryError of a prefault over
# anonymous memory (the tracker's mappings) without exhausting the machine.
REFUSING_MADVISE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long populates;

int madvise(void *addr, size_t len, int advice) {
#ifdef MADV_POPULATE_WRITE
    const char *ok = getenv("DOD_TEST_POPULATE_OK");
    if (advice == MADV_POPULATE_WRITE && ok != NULL && atomic_fetch_add(&populates, 1) >= atol(ok)) {
        errno = ENOMEM;
        return -1;
    }
#endif
    return (int)syscall(SYS_madvise, addr, len, advice);
}

int refuses_populate(void) {       /* 0: the headers lack it, and so does dod's build */
#ifdef MADV_POPULATE_WRITE
    return 1;
#else
    return 0;
#endif
}
"""

REFUSED_PREFAULT = r"""
import sys
import numpy as np
from dod.tracker import Tracker, TrackerConfig
from dod.table import Table

def scans(seed):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 3000, (400, 2))
    for _ in range(12):
        pos += rng.normal(0, 0.5, pos.shape)
        yield np.ascontiguousarray(np.vstack([pos[rng.random(400) < 0.9], rng.uniform(0, 3000, (40, 2))]))

COLUMNS = ("id", "x", "P", "hits", "misses", "age", "history", "state")
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

t = Table({"x": np.float64}, 1_000_000)
t.insert_many(x=np.arange(5.0))
try:
    t.prefault()
except MemoryError:
    pass
else:
    raise AssertionError("Table.prefault did not raise")
assert t["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
t.check()
print("refused as expected")
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_prefault_refused_by_the_kernel_raises_and_changes_nothing(tmp_path, threads):
    # Tracker.prefault on one thread and over workers (pieces refused after
    # some succeeded: part resident; then every piece refused), and
    # Table.prefault.
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip(reason="no C compiler to build the refusing madvise")
    (tmp_path / "refuse.c").write_text(REFUSING_MADVISE)
    shim = tmp_path / "librefuse.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(shim), str(tmp_path / "refuse.c")], check=True)
    if not ctypes.CDLL(str(shim)).refuses_populate():
        pytest.skip(reason="the C headers lack MADV_POPULATE_WRITE: prefault touches pages instead")
    env = dict(os.environ, DOD_TEST_POPULATE_OK="2")
    # after the sanitizer's runtime where the sanitize build preloads it (it must come first)
    env["LD_PRELOAD"] = ":".join(p for p in (os.environ.get("LD_PRELOAD", ""), str(shim)) if p)
    run = subprocess.run([sys.executable, "-c", REFUSED_PREFAULT, str(threads)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "refused as expected" in run.stdout
