"""The tick's profile (Tracker.profile, last_profile): where a tick's time
goes, pass by pass, without changing the tick's result or allocating."""
import sys
import time

import numpy as np
import pytest

from dod.tracker import Tracker, TrackerConfig
from dod.tracker._engine import PASS_NAMES
from dod.tracker.scenario import generate

from alloc_measure import per_call_rises

N_TARGETS = 2600        # above 2 x 512 rows: two workers take the parallel paths


def _config(**kw):
    base = dict(capacity=4 * N_TARGETS, max_detections=2 * N_TARGETS + 64)
    base.update(kw)
    return TrackerConfig(**base)


@pytest.fixture(scope="module")
def scans():
    sc = generate(N_TARGETS, 40, seed=11, pd=0.9, crossing=0.2)
    return list(sc.detections), sc.dt


def test_off_by_default_and_none_without_a_profiled_tick(scans):
    zs, dt = scans
    t = Tracker(_config())
    assert t.profile is False
    assert t.last_profile() is None             # no tick yet
    t.tick(zs[0], dt)
    assert t.last_profile() is None             # a tick with profile off
    t.profile = True
    assert t.profile is True
    t.tick(zs[1], dt)
    assert t.last_profile() is not None
    t.profile = 0                               # any truth value
    assert t.profile is False
    t.tick(zs[2], dt)
    assert t.last_profile() is None             # the latest tick's, not an older one's


@pytest.mark.parametrize("threads,sort_every,mixed", [(1, 0, 0), (2, 0, 0), (2, 5, 0), (3, 0, 0), (2, 0, 0.1)])
def test_passes_add_up_within_the_call(scans, threads, sort_every, mixed):
    zs, dt = scans
    t = Tracker(_config(threads=threads, sort_every=sort_every, sort_when_mixed=mixed, sort_when_displaced=mixed))
    t.profile = True
    sorted_ticks = 0
    for s, z in enumerate(zs):
        sorts = t.sorts
        t0 = time.perf_counter_ns()
        t.tick(z, dt)
        call_ms = (time.perf_counter_ns() - t0) / 1e6
        p = t.last_profile()
        assert tuple(p) == PASS_NAMES
        wall = np.array([v[0] for v in p.values()])
        idle = np.array([v[1] for v in p.values()])
        assert (wall >= 0).all() and (idle >= 0).all(), p
        # the passes lie inside the call, one after the other
        assert 0 < wall.sum() <= call_ms, (wall.sum(), call_ms)
        # a pass's waits fit in its regions' threads x time
        assert (idle <= threads * wall + 1e-6).all(), p
        if threads == 1:
            assert not idle.any(), p            # no region: no worker waits
        assert (p["sort"][0] > 0) == (t.sorts > sorts), (s, p["sort"])
        sorted_ticks += t.sorts > sorts
        if s >= 1:                              # tracks and detections: every main pass ran
            for name in ("predict_gate", "associate", "update", "deaths", "births"):
                assert p[name][0] > 0, (s, name, p)
    if threads > 1:                             # the row-chunk regions ran, so waits were measured
        assert len(t) >= threads * 512
        assert p["predict_gate"][1] > 0 and p["update"][1] > 0, p
    if mixed:                                   # sorts when the leading rows mixed: at least once here
        assert sorted_ticks == t.sorts >= 1
    else:
        assert sorted_ticks == (len(zs) // sort_every if sort_every else 0)


def test_profile_changes_no_result(scans):
    zs, dt = scans
    a = Tracker(_config(threads=2, sort_every=7))
    b = Tracker(_config(threads=2, sort_every=7))
    b.profile = True
    for z in zs:
        a.tick(z, dt)
        b.tick(z, dt)
        assert a.counts() == b.counts()
    assert a.table.to_numpy().tobytes() == b.table.to_numpy().tobytes()
    # the same slots (generations start at a per-table base)
    assert (a.table.handles() & 0xFFFFFFFF).tobytes() == (b.table.handles() & 0xFFFFFFFF).tobytes()


def test_profiled_tick_allocates_nothing(scans):
    zs, dt = scans
    t = Tracker(_config(threads=2))
    t.profile = True
    for z in zs[:20]:
        t.tick(z, dt)
    tick = t.tick
    before = sys.getallocatedblocks()
    for z in zs[20:]:
        tick(z, dt)
    assert sys.getallocatedblocks() - before < 20
    rises = per_call_rises(tick, [(z, dt) for z in zs[20:]])
    assert max(rises) == 0, sorted(rises)[-5:]


def test_read_profile_fills_without_allocating_and_matches_last_profile(scans):
    zs, dt = scans
    t = Tracker(_config(threads=2))
    out = np.zeros(2 * len(PASS_NAMES) + 3)
    t.tick(zs[0], dt)
    t.read_profile(out)
    assert not out.any()                        # profile off: zeros
    t.profile = True
    for z in zs[:5]:
        t.tick(z, dt)
    t.read_profile(out)
    p = t.last_profile()
    n = len(PASS_NAMES)
    assert out[:n].tolist() == [v[0] for v in p.values()]
    assert out[n:2 * n].tolist() == [v[1] for v in p.values()]
    assert not out[2 * n:].any()                # nothing past its 2 * len(PASS_NAMES) values
    rises = per_call_rises(t.read_profile, [(out,)] * 50)
    assert max(rises) == 0, sorted(rises)[-5:]
    for bad, err in ((np.zeros(2 * n, np.float32), TypeError), (np.zeros((2 * n, 2))[:, 0], ValueError),
                     (np.zeros(2 * n - 1), ValueError), ([0.0] * (2 * n), TypeError)):
        with pytest.raises(err):
            t.read_profile(bad)
    ro = np.zeros(2 * n)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        t.read_profile(ro)
    assert not ro.any()
