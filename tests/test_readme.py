"""The README's Python blocks run as written and do what their comments say:
what they print, the exceptions they promise, the keys they name.

Every runnable block (those that need CuPy or a compiler are exercised
elsewhere: tests/gpu, the cimport tests) must match exactly one check below,
found by a line of its own; a new block without a check fails
test_every_block_has_its_check.
"""
import math
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
RUNNABLE = [b for b in BLOCKS if "cupy" not in b and "cythonize" not in b]

CHECKS = {}        # a line that identifies the block -> check(namespace, stdout, block)
NEEDS = {}         # the same line -> the optional packages its block imports


def claim(marker, needs=()):
    """Register `check` for the README block holding `marker`; `needs`: the
    optional packages the block imports (without them it is skipped)."""
    def register(check):
        CHECKS[marker] = check
        NEEDS[marker] = needs
        return check
    return register


def _the_block(marker):
    found = [b for b in RUNNABLE if marker in b]
    assert len(found) == 1, f"{len(found)} README blocks contain {marker!r}"
    return found[0]


def _named(block, anchor):
    """The names a block's comment lists after the line containing `anchor`
    ("loop.stats()   # ticks, misses, ..."): the keys it promises."""
    line = next(ln for ln in block.splitlines() if anchor in ln)
    words = line.split("#", 1)[1].replace("...", "").replace("{", "").split(",")
    names = [w.split(":")[0].strip(" '\"") for w in words]
    return [n for n in names if n]


def _printed(out):
    return out.strip().splitlines()


def test_readme_has_examples():
    assert len(RUNNABLE) >= 8


def test_every_block_has_its_check():
    for block in RUNNABLE:
        owners = [m for m in CHECKS if m in block]
        assert len(owners) == 1, f"README block without exactly one check ({owners}):\n{block[:300]}"


@claim("scratch = Arena(1 << 20)")
def _arena(ns, out, block):
    assert _printed(out) == ["30.0"]                  # 10 rows of (1+0)*3 in the scope
    assert ns["scratch"].used == 0                    # the scope rewound


@claim("particles = Pool(100_000, np.float32, (8,))")
def _pool(ns, out, block):
    p, allp, live = ns["particles"], ns["allp"], ns["live"]
    assert allp.shape == (100_000, 8) and allp.dtype == np.float32
    assert np.shares_memory(allp, p.as_array())       # no copy
    assert live.dtype == np.bool_ and live.shape == (100_000,) and live.sum() == 1
    assert len(p) == 0
    with pytest.raises(ValueError):
        p.release(ns["h"])                            # "again -> ValueError (stale handle)"


@claim('fl = FreeList(1 << 20, strategy="best")')
def _freelist(ns, out, block):
    fl, b = ns["fl"], ns["b"]
    stats = fl.stats()
    assert set(_named(block, "fl.stats()")) <= set(stats)
    assert b.ctypes.data % 64 == 0 and b.shape == (1000,) and not b.any()
    assert stats["live"] == 1 and 1000 <= stats["used"] < 2000     # a's memory came back


@claim("bullets = Pool(1024, np.float32, (4,), growable=True, chunk_blocks=4096)")
def _pool_chunks(ns, out, block):
    bullets = ns["bullets"]
    assert len(bullets) == 0 and bullets.capacity == 13_312     # chunks stay after release_many


@claim("arena = AtomicArena(1 << 20)")
def _atomic_arena(ns, out, block):
    arena, x, y = ns["arena"], ns["x"], ns["y"]
    assert set(_named(block, "arena.stats()")) <= set(arena.stats())
    assert x.shape == (10, 3) and y.shape == (64,) and not y.any()


@claim("pool = LockFreePool(64)            # 64-byte blocks, 16-byte aligned")
def _lfpool_segfit(ns, out, block):
    pool, heap, np_ = ns["pool"], ns["heap"], ns["np"]
    heap_stats, pool_stats = (eval(d, {}) for d in re.findall(r"\{.*?\}", out))
    assert heap_stats["used"] == 0 and pool_stats["used"] == 0   # everything went back
    assert pool_stats["allocations"] == 1 and heap_stats["allocations"] == 3
    h = pool.acquire()
    v = pool.view(h, np_.float32)
    assert v.shape == (16,)
    with pytest.raises(BufferError):
        pool.release(h)                               # "release raises BufferError while a view lives"
    del v
    pool.release(h)


@claim("cache = pool.thread_cache()            # bound to this thread; keeps the pool alive")
def _thread_caches(ns, out, block):
    cached, slack = (int(w) for w in _printed(out)[0].split())
    assert cached >= 1 and slack >= 1                 # the releases went into the caches
    assert ns["pool"].stats()["cached_blocks"] == 0   # flushed
    assert ns["heap"].stats()["cache_slack"] == 0


@claim('schema = Schema(pos="float32[3]", cov="float64[6,6]", id="uint32",', needs=("pyarrow", "polars"))
def _table(ns, out, block):
    tracks = ns["tracks"]
    line = next(ln for ln in block.splitlines() if ln.startswith('tracks.get(h)["id"]'))
    expr, said = line.split("#", 1)
    assert eval(expr, ns) == eval(said, {})           # (7, False)
    assert len(tracks) == 1000
    assert tuple(tracks.get(ns["h"])["pos"]) == (1, 2, 3) and not tracks.get(ns["h"])["cov"].any()
    import pyarrow as pa
    batch = pa.record_batch(tracks)
    assert batch.num_rows == len(tracks)
    assert batch.column("id").buffers()[1].address == tracks["id"].ctypes.data    # zero copy


@claim('loop = Loop(step, rate=50, overrun="skip", gc="freeze", spin=0.0002)')
def _loop(ns, out, block):
    stats = ns["loop"].stats()
    assert set(_named(block, "loop.stats()")) <= set(stats)
    assert stats["ticks"] >= 1 and all(math.isfinite(stats[k]) for k in ("p50", "p99", "max"))   # reported, not compared


@claim("realtime_priority=10, lock_memory=\"onfault\", strict=False)")
def _realtime(ns, out, block):
    rt = ns["loop"].realtime
    assert list(rt) == _named(block, "loop.realtime")
    asked = {"lock_memory": "onfault", "cpu": min(ns["os"].sched_getaffinity(0)), "realtime_priority": 10}
    for option, value in asked.items():               # each was active during the run, or refused with a reason
        assert rt[option] == value or rt["refused"].get(option), (option, rt)
    assert rt["applied"] is False                     # restored when the run ended


@claim("with arena.numpy() as h:")
def _numpy_handler(ns, out, block):
    assert ns["arena"].used == 0 and ns["total"] > 0


@claim("ring = Ring(slots=8, rows=1000, row_shape=2, dtype=np.float64)")
def _ring(ns, out, block):
    assert ns["ring"].closed and ns["total"] == sum(k % 50 for k in range(100))


@claim("scans = generate(n_targets=100, scans=200, seed=0)")
def _tracker(ns, out, block):
    tracker = ns["tracker"]
    assert set(_named(block, "tracker.counts()")) <= set(tracker.counts())
    for view in (tracker.ids, tracker.positions, tracker.velocities, tracker.states):
        assert not view.flags.writeable                   # "read-only views"
    P = tracker.covariances                               # "(count, 4, 4): a read-only copy, unpacked"
    assert P.shape == (tracker.count, 4, 4) and not P.flags.writeable
    assert not np.shares_memory(P, tracker.column("P"))
    assert tracker.column("P").shape == (tracker.count, 10)    # "10 values in 2-D"
    ids, pos = ns["ids"], ns["pos"]
    assert len(ids) == len(pos) > 50                      # most of the 100 targets confirmed
    assert len(tracker.table) == len(tracker.ids)


@claim("cfg = TrackerConfig(filter=FilterConfig(dim=3, r=2.0),")
def _config_parts(ns, out, block):
    cfg, faster = ns["cfg"], ns["faster"]
    assert (faster.threads, faster.dim, faster.confirmation) == (4, 3, "score") and cfg.threads == 2
    assert faster.filter is cfg.filter and faster.execution != cfg.execution      # only the part that changed
    with pytest.raises(TypeError, match="threads"):                             # "listing them"
        ns["TrackerConfig"](thread=2)


@claim("loop = Loop(lambda: tracker.tick(next_scan(), 0.02), rate=50, scratch_bytes=scratch_bytes(cfg))")
def _tracker_loop(ns, out, block):
    stats, tracker = ns["loop"].stats(), ns["tracker"]
    assert ns["ran"] == stats["ticks"] == 100
    assert tracker.counts()["births"] > 0


@claim('cfg = TrackerConfig(confirmation="score", initiation="two_point",')
def _clutter(ns, out, block):
    hota, mota = (float(w) for w in _printed(out)[0].split())
    assert 0.0 < hota <= 1.0 and mota <= 1.0
    tracker = ns["tracker"]
    assert tracker.scores.shape == (len(tracker.table),) and tracker.clutter_density > 0


@claim("scans = iter(list(scenario))                       # (detections, dt) per scan, made up front")
def _loop_p99(ns, out, block):
    p99, misses = _printed(out)[0].split()
    stats = ns["loop"].stats()
    assert float(p99) == stats["p99"] and int(misses) == stats["misses"]     # what it prints is the loop's
    # run(ticks=n) runs n ticks; a late tick also skips grid slots, which the
    # machine's speed decides, so skipped is only counted, never a scan lost.
    assert stats["ticks"] == ns["scenario"].scans
    with pytest.raises(StopIteration):
        next(ns["scans"])                                # every scan was ticked


@claim('t = Tracker(TrackerConfig(motion="imm", **PRESET_CONFIG["manoeuvre"]))')
def _imm(ns, out, block):
    t = ns["t"]
    mu = t.model_probabilities
    assert mu.shape == (len(t), 3) and np.allclose(mu.sum(axis=1), 1.0)   # CV low, CV high, turn
    assert t.turn_rates.shape == (len(t),) and np.isfinite(t.turn_rates).all()
    assert t.counts()["confirmed"] >= 40                  # of the 50 turning targets


@claim("west = Sensor((-5000.0, 0.0), range_sigma=2.0, bearing_sigma=1e-3)")
def _radar(ns, out, block):
    t, target = ns["t"], ns["target"]
    assert len(t) == 1 and np.allclose(t.positions, target, atol=1.0)     # asserted in the block too
    assert t.counts()["associations"] == 1                # the last scan (the south sensor's) updated it


# Last: the checks above are registered by then.
@pytest.mark.parametrize("marker", list(CHECKS))
def test_readme_block_does_what_it_says(marker, capsys):
    for name in NEEDS[marker]:
        pytest.importorskip(name)
    block = _the_block(marker)
    ns = {"np": np}
    exec(compile(block, f"README.md block {marker!r}", "exec"), ns)
    CHECKS[marker](ns, capsys.readouterr().out, block)
