"""Every owner, created, used and destroyed many times, leaves the process as
it found it: resident memory and tracemalloc's traced bytes stay flat.

Each cycle makes one owner with a backing of at least BACKING bytes, touches
all of it (so a leaked backing would be resident), takes and hands back a
few allocations or views through its Python face, and drops it. After a
warm-up (first-use caches, numpy's and the allocators' free lists: rounds of
WARMUP cycles until one no longer grows the traced bytes past the bound, at
most WARMUP_ROUNDS of them, so a leak still reaches the measure), CYCLES
more cycles may grow the resident set by at most a quarter of what leaking
one backing per cycle would add, and the traced bytes by at most
TRACED_PER_CYCLE bytes per cycle: a leaked view, dict or handle tuple per
cycle exceeds it, while numpy's bounded caches (its small dimension arrays,
a few KiB that come and go) stay below it over CYCLES cycles. Small native leaks
(a slot table, a mutex) are below what RSS can resolve: the sanitize build
runs with LeakSanitizer for those (.ci/run, step 5).
"""
import gc
import os
import threading
import tracemalloc

import numpy as np
import pytest

BACKING = 1 << 18            # bytes each owner's memory holds at least (256 KiB)
WARMUP = 30
WARMUP_ROUNDS = 25           # numpy's small-array caches took ~500 ring cycles to fill under ASan
CYCLES = 300
TRACED_PER_CYCLE = 64        # bytes: an ndarray object alone is over 100
# Under AddressSanitizer (DOD_BUILD=sanitize) freed memory waits in ASan's
# quarantine (256 MiB by default) before it is reused, so the resident set
# grows whatever the code does; LeakSanitizer checks native memory in that
# build instead (.ci/run, step 5). tracemalloc's bound holds in every build.
RSS_SAYS_SOMETHING = os.environ.get("DOD_BUILD") != "sanitize"


def _touch(a):
    a.view(np.uint8).reshape(-1)[:] = 1


def arena():
    from dod.arena import Arena
    a = Arena(BACKING)
    x = a.empty(BACKING // 8, np.float64)
    _touch(x)
    del x
    a.reset()
    with a.scope():
        a.zeros(100, np.int32)


def arena_growable():
    from dod.arena import Arena
    a = Arena(4096, growable=True)
    xs = [a.empty(BACKING // 64, np.uint8) for _ in range(64)]
    for x in xs:
        _touch(x)


def pool():
    from dod.pool import Pool
    p = Pool(64, block_size=BACKING // 64)
    hs = [p.acquire() for _ in range(64)]
    for h in hs:
        _touch(p.view(h))
    for h in hs:
        p.release(h)
    a = p.acquire_array()
    p.release(a)


def lfpool():
    from dod.lfpool import LockFreePool
    p = LockFreePool(BACKING // 64, capacity=64)
    hs = [p.acquire() for _ in range(64)]
    for h in hs:
        _touch(p.view(h))
    p.release_many(hs)
    c = p.thread_cache()                          # the LockFreePool cache kind
    hs = [c.acquire() for _ in range(100)]
    for h in hs:
        c.release(h)
    c.close()


def freelist():
    from dod.freelist import FreeList
    f = FreeList(BACKING)
    x = f.empty(BACKING // 2, np.uint8)
    _touch(x)
    y = f.zeros(100, np.float32)
    del x, y


def segfit():
    from dod.segfit import SegFit
    s = SegFit()
    hs = [s.allocate(n) for n in (16, 100, 4000, BACKING)]
    _touch(s.view(hs[-1]))
    for h in hs:
        s.free(h)
    c = s.thread_cache()                          # the SegFit cache kind
    hs = [c.allocate(64) for _ in range(50)]
    for h in hs:
        c.free(h)
    c.close()


def atomic_arena():
    from dod.atomic_arena import AtomicArena
    a = AtomicArena(BACKING)
    xs = [a.empty(1000, np.uint8) for _ in range(BACKING // 1000)]
    for x in xs:
        _touch(x)
    del xs
    c = a.thread_cache()                          # the AtomicArena cache kind
    ys = [c.zeros(100, np.float64) for _ in range(20)]
    del ys
    c.close()


def page_source():
    from dod.pages import PageSource
    s = PageSource()
    x = s.empty(BACKING, np.uint8)
    _touch(x)
    y = s.zeros((10, 3))
    del x, y


def guarded():
    from dod.guard import GuardedResource
    g = GuardedResource()
    xs = [g.empty(BACKING // 16, np.uint8, align=1) for _ in range(16)]
    for x in xs:
        _touch(x)


def table():
    from dod.table import Schema, Table
    t = Table(Schema(pos="float32[3]", id=np.uint32, cov="float64[6,6]"), BACKING // 300)
    hs = [t.insert() for _ in range(100)]
    _touch(t["cov"])
    for h in hs[::2]:
        t.remove(h)
    t.to_numpy()


def ring():
    from dod.ring import Ring
    r = Ring(4, BACKING // 64, (2,))
    for i in range(6):
        with r.write() as slot:
            _touch(slot.data)
            slot.write(np.full((3, 2), float(i)))
        with r.read() as slot:
            slot.rows.sum()
    r.close()


def ring_producer():
    from dod.ring import Ring
    from dod.ring_producer import RingProducer
    r = Ring(4, BACKING // 64, (2,))
    box = []

    def fill(i):
        with box[0].write(r) as slot:
            slot.write(np.full((i % 3 + 1, 2), float(i)))
    p = RingProducer(r, range(8), fill)
    box.append(p)
    p.start()
    n = 0
    while (slot := p.take(timeout=30)) is not None:
        n += slot.count
        del slot
        r.release()
    p.close()
    assert n == sum(i % 3 + 1 for i in range(8))


def loop():
    from dod.loop import Loop
    box = []

    def step():
        x = box[0].scratch.empty(BACKING // 16, np.uint8)
        _touch(x)
    lp = Loop(step, rate=2000.0, scratch_bytes=BACKING)
    box.append(lp)
    lp.run(ticks=3)
    assert lp.ticks == 3


def numpy_handler():
    from dod.arena import Arena
    a = Arena(BACKING)
    with a.numpy():
        x = np.ones(BACKING // 16, np.uint8)
        y = x + 1
        first = int(y[0])
        del x, y                                  # none escapes the block
    assert first == 2
    a.reset()


def tracker():
    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.scenario import generate
    t = Tracker(TrackerConfig(capacity=64, max_detections=64))
    for z, dt in generate(20, 3, seed=1):
        t.tick(z, dt)
    assert t.scans == 3


OWNERS = [arena, arena_growable, pool, lfpool, freelist, segfit, atomic_arena, page_source,
          guarded, table, ring, ring_producer, loop, numpy_handler, tracker]


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settled():
    gc.collect()
    return _rss(), tracemalloc.get_traced_memory()[0]


def _warm_up(cycle):
    last = _settled()[1]
    for _ in range(WARMUP_ROUNDS):
        for _ in range(WARMUP):
            cycle()
        now = _settled()[1]
        if now - last <= TRACED_PER_CYCLE * WARMUP:
            return
        last = now


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"),
                    reason="reads the resident set from /proc/self/statm (Linux)")
@pytest.mark.parametrize("cycle", OWNERS, ids=[f.__name__ for f in OWNERS])
def test_create_and_destroy_many_times_stays_flat(cycle):
    threads0 = threading.active_count()
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        _warm_up(cycle)
        rss0, traced0 = _settled()
        for i in range(CYCLES):
            cycle()
            if i % 50 == 49:
                gc.collect()          # owners with views in cycles go with the collector
        rss1, traced1 = _settled()
    finally:
        if not started:
            tracemalloc.stop()
    assert traced1 - traced0 <= TRACED_PER_CYCLE * CYCLES, (
        f"{cycle.__name__}: tracemalloc grew by {traced1 - traced0} bytes over {CYCLES} cycles")
    assert not RSS_SAYS_SOMETHING or rss1 - rss0 <= BACKING * CYCLES // 4, (
        f"{cycle.__name__}: resident set grew by {(rss1 - rss0) >> 10} KiB over {CYCLES} cycles")
    assert threading.active_count() == threads0          # every producer thread was joined


def test_the_bounds_catch_a_leak_of_one_backing_or_one_object_per_cycle():
    # The harness itself, against a cycle that does leak: one touched
    # BACKING-sized numpy array (resident and traced), and one one-element
    # array (what a forgotten view costs). Both bounds must fire.
    kept = []

    def leaky():
        x = np.empty(BACKING, np.uint8)
        _touch(x)
        kept.append(x)

    def leaky_small():
        kept.append(np.empty(1))

    tracemalloc.start()
    try:
        for f in (leaky, leaky_small):
            for _ in range(WARMUP):        # a fixed warm-up: these never settle
                f()
            rss0, traced0 = _settled()
            for _ in range(CYCLES):
                f()
            rss1, traced1 = _settled()
            assert traced1 - traced0 > TRACED_PER_CYCLE * CYCLES
            if f is leaky and RSS_SAYS_SOMETHING:
                assert rss1 - rss0 > BACKING * CYCLES // 4
    finally:
        tracemalloc.stop()
        kept.clear()
