"""Every code block of the README, the changelog and the site's own pages runs
in the test suite and does what it says, or is marked as not run, with why.

The pages: README.md, CHANGELOG.md, docs/getting-started.md, docs/guide/,
docs/design/, docs/performance.md, docs/changelog.md (PAGES below). The
convention their authors follow:

* A ```python block runs. Exactly one check below claims it, by a line that
  appears in it (the marker given to ``claim``); the check receives the
  block's namespace and what it printed, and tests what the block's
  comments say: the values it prints, the exceptions it promises, the keys
  it names. One marker may claim the same block on several pages (the quick
  starts are on the README and on getting started).
* A ```cython block is compiled, as a user would build it
  (tests/cython_build.py), and called: exactly one ``claim_cython`` check
  claims it the same way. All such blocks are built together, once, into
  one module named ``particle_step``, which the page's Python blocks import.
* Any other block, or one that cannot run here (it needs a GPU, it is a
  build script, it runs for minutes), carries the line
  ``<!-- not run: REASON -->`` right above its opening fence: an HTML
  comment, invisible on GitHub and in the built site. REASON says why, and
  what runs the same code instead where something does.

A block that is neither claimed nor marked fails
``test_every_block_is_run_or_marked``; a check whose block is gone fails
``test_every_check_has_a_block``.

The docstrings the API reference shows follow the same rule in
reStructuredText (the last part of this file): a ``>>>`` example runs
through doctest and must print what it shows; any other code block carries
``.. not run: REASON`` before its paragraph. MyST directives (```{toctree}``,
```{include}``, ```{math}``) are not code blocks.
"""
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "docs" / "getting-started.md",
         ROOT / "docs" / "performance.md", ROOT / "docs" / "changelog.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md")), *sorted((ROOT / "docs" / "design").glob("*.md"))]
NOT_RUN = re.compile(r"^\s*<!-- not run: (.{10,}?) -->\s*$")
FENCE = re.compile(r"^(\s*)(```+)(.*)$")


class Block:
    def __init__(self, page, line, lang, text, not_run):
        self.page, self.line, self.lang, self.text, self.not_run = page, line, lang, text, not_run

    @property
    def where(self):
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(page):
    """The fenced code blocks of a Markdown page, with the not-run reason of each."""
    lines = page.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = m.groups()
        j = i + 1
        while j < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[j]):
            j += 1
        body = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]) + "\n"
        info = info.strip()
        if not info.startswith("{"):                      # a MyST directive is not a code block
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            reason = NOT_RUN.match(lines[k]) if k >= 0 else None
            out.append(Block(page, i + 1, info.split()[0] if info else "", body,
                             reason.group(1) if reason else None))
        i = j + 1
    return out


BLOCKS = [b for page in PAGES for b in blocks_of(page)]
RUN = [b for b in BLOCKS if b.not_run is None and b.lang == "python"]
COMPILED = [b for b in BLOCKS if b.not_run is None and b.lang == "cython"]

CHECKS = {}        # a line that identifies the block -> check(namespace, stdout, block)
NEEDS = {}         # the same line -> the optional packages its block imports
BEFORE = {}        # the same line -> before(namespace, request): what the block assumes exists
CYTHON_CHECKS = {}  # a line of a Cython block -> check(built module)


def claim(marker, needs=(), before=None):
    """Register `check` for the Python block(s) holding `marker`; `needs`: the
    optional packages the block imports (without them it is skipped);
    `before(ns, request)`: sets up what the block takes from an earlier one."""
    def register(check):
        CHECKS[marker] = check
        NEEDS[marker] = needs
        BEFORE[marker] = before
        return check
    return register


def claim_cython(marker):
    def register(check):
        CYTHON_CHECKS[marker] = check
        return check
    return register


def _owners(block, checks):
    return [m for m in checks if m in block.text]


def _named(block, anchor):
    """The names a block's comment lists after the line containing `anchor`
    ("loop.stats()   # ticks, misses, ..."): the keys it promises."""
    line = next(ln for ln in block.splitlines() if anchor in ln)
    words = line.split("#", 1)[1].replace("...", "").replace("{", "").split(",")
    names = [w.split(":")[0].strip(" '\"") for w in words]
    return [n for n in names if n]


def _printed(out):
    return out.strip().splitlines()


def _block_with(marker):
    found = [b for b in RUN if marker in b.text]
    assert found, f"no page block contains {marker!r}"
    return found[0]


def _exec(block, ns):
    exec(compile(block.text, block.where, "exec"), ns)


def test_the_pages_have_examples():
    assert len(RUN) >= 20 and len(COMPILED) >= 2


def test_every_block_is_run_or_marked():
    for b in BLOCKS:
        if b.not_run is not None:
            continue
        assert b.lang in ("python", "cython"), \
            f"{b.where}: a ```{b.lang} block must be preceded by <!-- not run: REASON -->"
        owners = _owners(b, CHECKS if b.lang == "python" else CYTHON_CHECKS)
        assert len(owners) == 1, f"{b.where}: block without exactly one check ({owners}):\n{b.text[:300]}"


def test_not_run_markers_sit_on_blocks():
    """A marker that no longer precedes a block would silently excuse nothing."""
    for page in PAGES:
        marked = sum(1 for ln in page.read_text().splitlines() if NOT_RUN.match(ln))
        assert marked == sum(1 for b in blocks_of(page) if b.not_run is not None), page


def test_every_check_has_a_block():
    for marker in CHECKS:
        assert any(marker in b.text for b in RUN), f"check {marker!r} claims no block"
    for marker in CYTHON_CHECKS:
        assert any(marker in b.text for b in COMPILED), f"Cython check {marker!r} claims no block"


def test_readme_is_a_front_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for module in ("thread_cache", "numpy_memory", "schema", "arrow", "ring_producer", "atomics", "bench"):
        assert f"`dod.{module}`" in text, module
    assert "python -m sphinx -W --keep-going -b html docs docs/_build/html" in text


def test_contents_table_lists_every_public_module():
    """Every module of dod/ whose name has no leading underscore is in the README's table."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Contents"):text.index("## Quick start")]
    for path in sorted((ROOT / "dod").iterdir()):
        name = path.stem if path.is_file() else path.name
        if name.startswith("_") or (path.is_file() and path.suffix not in (".py", ".pyx", ".pxd")):
            continue
        assert f"`dod.{name}`" in table, f"dod.{name} is missing from the README's contents table"


def test_no_work_log_words_on_the_pages():
    for page in PAGES:
        text = page.read_text()
        for pattern in (r"\bsessions?\b", r"\bissue \d+", r"\(issue", r"thirt|fortieth|twent\w+ session"):
            found = re.search(pattern, text, re.I)
            assert not found, f"{page.relative_to(ROOT)}: {found.group(0)!r}"


# ---------------------------------------------------------------- Cython

@pytest.fixture(scope="module")
def particle_step(tmp_path_factory):
    """Every claimed Cython block, built together as one module, as a user would."""
    from cython_build import compile_cython_module

    source = "\n".join(b.text for b in COMPILED)
    module = compile_cython_module(source, tmp_path_factory.mktemp("docs_cython"), "particle_step")
    sys.modules["particle_step"] = module
    yield module
    sys.modules.pop("particle_step", None)


@claim_cython("def frame(Arena scratch, int n):")
def _cy_frame(mod):
    from dod.arena import Arena
    scratch = Arena(1 << 16)
    mod.frame(scratch, 100)
    assert scratch.used == 0                            # "dod_arena_reset" at the end of the frame
    mod.frame(scratch, 100_000)                         # more than fits: the push returns NULL, no raise
    assert scratch.used == 0 and scratch.failed >= 1


@claim_cython("def step(Table particles, Arena scratch, double dt, double limit):")
def _cy_step(mod):
    from dod.arena import Arena
    from dod.table import Schema, Table
    t = Table(Schema(pos="float64[2]", vel="float64[2]"), capacity=10)
    t.insert_many(pos=np.zeros((3, 2)), vel=np.array([[1.0, 0.0], [0.0, 3.0], [4.0, 3.0]]))
    scratch = Arena(1 << 12)
    assert mod.step(t, scratch, 0.5, 2.0) == 2          # speeds 1, 3, 5
    assert np.array_equal(t["pos"], [[0.5, 0.0], [0.0, 1.5], [2.0, 1.5]])
    assert scratch.used == 0                            # "the temporary is gone"
    with pytest.raises(MemoryError):
        mod.step(t, Arena(16), 0.5, 2.0)                # scratch too small for 3 doubles


@claim_cython("def churn(Pool pool, FreeList fl, int n):")
def _cy_pool_freelist(mod):
    from dod.freelist import FreeList
    from dod.pool import Pool
    pool, fl = Pool(4, block_size=64), FreeList(1 << 12)
    assert mod.churn(pool, fl, 1000) == 1000            # every block came back each time
    assert pool.stats()["used"] == 0 and fl.stats()["used"] == 0
    pool.check()
    fl.check()


@claim_cython("def fill(Pool pool, int n):")
def _cy_growable(mod):
    from dod.pool import Pool
    fixed, grows = Pool(1024, block_size=64), Pool(1024, block_size=64, growable=True)
    assert mod.fill(fixed, 3000) == 1024                # "NULL when exhausted"
    assert mod.fill(grows, 3000) == 3000                # "full: one new chunk from the resource"
    assert grows.chunk_count == 3 and grows.capacity == 3 * 1024   # blocks: whole chunks of 1,024


@claim_cython("def pairs(AtomicArena arena, int n):")
def _cy_atomic_arena(mod):
    from dod.atomic_arena import AtomicArena
    arena = AtomicArena()
    assert mod.pairs(arena, 10_000) == 10_000
    assert arena.stats()["used"] == 0                   # every allocation freed; the cache flushed
    arena.check()


@claim_cython("def work(LockFreePool pool, SegFit heap, int n):")
def _cy_lfpool_segfit(mod):
    from dod import LockFreePool, SegFit
    pool, heap = LockFreePool(64), SegFit()
    mod.work(pool, heap, 10_000)
    assert pool.stats()["used"] == 0 and heap.stats()["used"] == 0
    pool.check()
    heap.check()


@claim_cython("def work_cached(SegFit heap, int n):")
def _cy_segfit_cache(mod):
    from dod import SegFit
    heap = SegFit()
    mod.work_cached(heap, 10_000)
    stats = heap.stats()
    assert stats["used"] == 0 and stats["cache_slack"] == 0     # flushed: the cache holds nothing
    heap.check()


@claim_cython("def advance(Table tracks, double dt):")
def _cy_table(mod):
    from dod.table import Schema, Table
    tracks = Table(Schema(state="float64[6]"), capacity=4)
    far = tracks.insert(state=(1e6 - 1.0, 0, 0, 10.0, 0, 0))   # leaves after a step of 0.5
    near = tracks.insert(state=(0.0, 0, 0, 1.0, 0, 0))
    h = mod.advance(tracks, 0.5)
    assert h != 0 and h in tracks and far not in tracks and near in tracks
    assert len(tracks) == 2 and tracks.get(near)["state"][0] == 0.5
    assert not tracks.get(h)["state"].any()             # the new row: zeroed, then moved by zero speed
    tracks.check()
    full = Table(Schema(state="float64[6]"), capacity=1)
    full.insert()
    assert mod.advance(full, 0.1) == 0                  # "0 when full"


@claim_cython("def shift_lane(Table t, double dx):")
def _cy_table_lane(mod):
    from dod.table import Column, Schema, Table
    t = Table(Schema(x=Column("float64", 4, order="F"), id="uint32"), capacity=8)
    t.insert_many(x=np.arange(12.0).reshape(3, 4))
    mod.shift_lane(t, 0.5)
    assert t["x"].tolist() == [[0.5, 1, 2, 3], [4.5, 5, 6, 7], [8.5, 9, 10, 11]]     # component 0 only
    t.check()


@claim_cython("def count(int n):")
def _cy_atomics(mod):
    import threading
    before = mod.count(0)
    threads = [threading.Thread(target=mod.count, args=(50_000,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mod.count(0) - before == 100_000             # no add lost between the two threads


@pytest.mark.parametrize("marker", list(CYTHON_CHECKS))
def test_cython_block_builds_and_does_what_it_says(marker, particle_step):
    CYTHON_CHECKS[marker](particle_step)


# ---------------------------------------------------------------- Python

@claim("scratch = Arena(1 << 20)                 # 1 MiB of anonymous pages: costs nothing until touched")
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
    for view in (tracker.ids, tracker.positions, tracker.velocities, tracker.status):
        assert not view.flags.writeable                   # "read-only views"
    P = tracker.covariances                               # "(count, 4, 4): a read-only copy, unpacked"
    assert P.shape == (tracker.count, 4, 4) and not P.flags.writeable
    assert not np.shares_memory(P, tracker.column("P"))
    assert tracker.column("P").shape == (tracker.count, 10)    # "10 values in 2-D"
    ids, pos = ns["ids"], ns["pos"]
    assert len(ids) == len(pos) > 50                      # most of the 100 targets confirmed
    assert len(tracker.table) == len(tracker.ids)


@claim('t = Tracker(TrackerConfig(events=True, confirmation="m_of_n", initiation="single", confirm_m=2, confirm_n=3))')
def _events(ns, out, block):
    lines = _printed(out)
    assert lines[0] == "[ 2  1 -1] [3] [2]"          # rows 0 and 1 updated tracks 2 and 1; a birth from row 2
    assert lines[1] == "[1 2] []"                      # both confirmed, nothing deleted
    assert lines[2] == "[1 2] (2, 4) (2, 4, 4) 2.0"
    t, batch = ns["t"], ns["batch"]
    assert batch.num_rows == 2 and np.shares_memory(ns["tracks"].x, t.column("x"))


@claim("tracker = Tracker(cfg, scratch=loop.scratch)          # the tick's temporaries come from the loop's arena")
def _tracker_loop(ns, out, block):
    stats, tracker = ns["loop"].stats(), ns["tracker"]
    assert stats["ticks"] == 100 and tracker.scans == 100
    assert _printed(out) == ["True"]                      # "most of the 100 targets are confirmed"
    assert len(ns["ids"]) == len(ns["pos"]) == tracker.counts()["confirmed"]
    assert ns["loop"].scratch is tracker.scratch


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


@claim("cfg = TrackerConfig(motion=\"imm\", imm_rates=rates)    # the same switching at any scan rate")
def _imm_rates(ns, out, block):
    from dod.tracker import reference_imm
    cfg = ns["cfg"]
    G = np.array(cfg.imm_rates)
    assert np.allclose(-1.0 / np.diag(G), (20.0, 5.0, 8.0))          # the sojourn times
    assert np.array_equal(reference_imm.transition(cfg, 0.0), np.eye(3))
    T = reference_imm.transition(cfg, 1.0)
    assert np.allclose(T.sum(axis=1), 1.0) and T[0, 0] > T[1, 1]       # CV low lasts longest


@claim('t = Tracker(out_of_sequence="drop")       # default "refuse"')
def _time_stamps(ns, out, block):
    t = ns["t"]
    assert out.strip() == "1700000000.5 1"                              # what the block prints
    assert t.scans == 3 and t.late_scans == 1 and t.time == 1700000000.5


@claim("west = Sensor((-5000.0, 0.0), range_sigma=2.0, bearing_sigma=1e-3)")
def _radar(ns, out, block):
    t, target = ns["t"], ns["target"]
    assert len(t) == 1 and np.allclose(t.positions, target, atol=1.0)     # asserted in the block too
    assert t.counts()["associations"] == 1                # the last scan (the south sensor's) updated it


@claim("arena = Arena(1 << 20, resource=pages.resource())       # the arena's block comes from the page source")
def _composed(ns, out, block):
    assert _printed(out) == ["1 16000 16000"]
    pool, arena, pages = ns["pool"], ns["arena"], ns["pages"]
    assert pages.mapped == 1 << 20 and arena.capacity == 1 << 20
    with pytest.raises(BufferError):
        arena.reset()                                     # the pool's blocks came through the arena's Resource


@claim('t.sort("x")                               # rows by x; every handle still names its row')
def _table_sort(ns, out, block):
    assert _printed(out) == ["[10 20 30] 2"]
    t, hs = ns["t"], ns["hs"]
    assert [t.get(int(h))["id"] for h in hs] == [30, 10, 20]    # each handle kept its row's data


@claim('x = t["x"]              # shape (3, 4), zero copy: strides (8, lane stride)')
def _table_order_f(ns, out, block):
    assert _printed(out) == ["[ 2.  6. 10.]"]
    x = ns["x"]
    assert x.shape == (3, 4) and x.strides[0] == 8 and x.strides[1] % 64 == 0
    assert x[:, 2].flags.c_contiguous and np.shares_memory(x, ns["t"]["x"])


@claim("particles = Table(schema, capacity=10_000)")
def _tour_table(ns, out, block):
    assert _printed(out) == ["1000 False [5. 5.]"]
    particles = ns["particles"]
    assert particles.get(ns["h"])["age"] == 0             # "age: zero"
    assert particles["vel"][0, 0] == 1.0                  # "the last row moves into row 0"


@claim("loop = Loop(tick, rate=200)")
def _tour_loop(ns, out, block):
    assert _printed(out) == ["50 0"]
    assert ns["loop"].stats()["ticks"] == 50


def _tour_table_and_module(ns, request):
    _exec(_block_with("particles = Table(schema, capacity=10_000)"), ns)
    request.getfixturevalue("particle_step")              # builds the page's Cython module


@claim("print(particle_step.step(particles, scratch, 0.1, 500.0))", before=_tour_table_and_module)
def _tour_cython_call(ns, out, block):
    assert _printed(out) == ["499"]                       # vx 501..999 exceed 500; the moved row has vx 1
    assert ns["scratch"].used == 0
    assert ns["particles"]["pos"][999, 0] == pytest.approx(99.9)         # row 999 has vx 999: x += 0.1 * 999


@claim("producer = RingProducer(ring, range(1, 21), fill)")
def _ring_producer(ns, out, block):
    assert _printed(out) == ["210 20"]                    # 1 + 2 + ... + 20 rows in 20 items
    assert ns["ring"].closed and ns["producer"].error is None and not ns["producer"].alive


@claim("one, two = Tracker(TrackerConfig(threads=1)), Tracker(TrackerConfig(threads=2, parallel_min_rows=64))")
def _threads_same_bits(ns, out, block):
    assert _printed(out) == ["True"]
    one, two = ns["one"], ns["two"]
    assert one.counts() == two.counts() and len(one) > 1000
    assert np.array_equal(one.covariances, two.covariances)


@claim("est = run_tracker(Tracker(), scans)               # (ids, positions) of the confirmed tracks, per scan")
def _metrics(ns, out, block):
    first, second = _printed(out)
    assert first == "True 0 True" and second == "7.0887"
    scores = ns["scores"]
    assert set(_named(block, "scores = mot_metrics")) <= set(scores)
    assert len(ns["est"]) == 60
    value, loc, missed, false = ns["gospa"](ns["truth"], ns["tracks"], c=10.0, p=2.0, details=True)
    assert (loc, missed, false) == (0.25, 1, 0) and value == pytest.approx(math.sqrt(0.25 + 50))

@claim("recorder.record(tracker, t)", needs=("stonesoup",))
def _peers_stonesoup(ns, out, block):
    assert _printed(out) == ["1 18"]
    track = next(iter(ns["tracks"]))
    assert len(track.state_vector) == 4 and track.covar.shape == (4, 4)
    late = [m.value["distance"] for m in ns["result"].value][5:]
    assert late and max(late) < 2.0                   # one target, tracked to well under a metre or two


@claim("acc = motmetrics_accumulator(scenario.truth_ids", needs=("motmetrics", "trackeval"))
def _peers_mot(ns, out, block):
    from dod.tracker.metrics import clear_mot, hota
    assert _printed(out) == ["True True"]
    seq = (ns["scenario"].truth_ids, ns["scenario"].truth_pos, ns["ids"], ns["pos"])
    assert float(ns["summary"]["mota"].iloc[0]) == pytest.approx(clear_mot(*seq, max_distance=5.0)["mota"])
    assert float(ns["hota"]["HOTA"].mean()) == pytest.approx(hota(*seq, max_distance=5.0)["hota"], abs=1e-9)


def _in_the_repository(ns, request):
    request.getfixturevalue("monkeypatch").chdir(ROOT)     # the block names the sample by its path there


@claim('reports = read_opensky("examples/data/opensky_states_sample.csv")', needs=("pymap3d",),
       before=_in_the_repository)
def _peers_adsb(ns, out, block):
    assert _printed(out) == ["4"]
    assert ns["reports"].objects.size == 4


# Last: the checks above are registered by then.
@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_page_block_does_what_it_says(block, capsys, request):
    owners = _owners(block, CHECKS)
    assert len(owners) == 1, f"{block.where}: block without exactly one check ({owners})"
    marker = owners[0]
    for name in NEEDS[marker]:
        pytest.importorskip(name)
    ns = {"np": np}
    environ = dict(os.environ)
    try:
        if BEFORE[marker]:
            BEFORE[marker](ns, request)
            capsys.readouterr()
        _exec(block, ns)
        CHECKS[marker](ns, capsys.readouterr().out, block.text)
    finally:
        os.environ.clear()                              # a block may set OpenMP's variables
        os.environ.update(environ)


@claim("cfg = TrackerConfig(filter=FilterConfig(dim=3, r=2.0),")
def _config_parts(ns, out, block):
    from dod.tracker import FilterConfig, TrackerConfig
    cfg, faster = ns["cfg"], ns["faster"]
    assert cfg.filter == FilterConfig(dim=3, r=2.0) and cfg.dim == 3
    assert (faster.threads, cfg.threads) == (4, 2) and faster.management == cfg.management
    with pytest.raises(TypeError):                    # "a keyword that names no field raises TypeError"
        TrackerConfig(no_such_field=1)


@claim("rows = np.ascontiguousarray(x)        # C order (each track's 4 values together): copied when strided")
def _layout_views(ns, out, block):
    t, x, rows = ns["t"], ns["x"], ns["rows"]
    assert _printed(out) == ["(3, 4) True True"]
    assert not x.flags.writeable and np.shares_memory(x, t.table["x"])      # "read-only, no copy"
    assert np.shares_memory(rows, x) == x.flags.c_contiguous                # "copied when strided"
    assert np.array_equal(x[:, :2], t.positions) and np.array_equal(x[:, 2:], t.velocities)


# ---------------------------------------------------------------- docstrings
# The API reference shows the docstrings of every public name
# (docs/_ext/dod_public.py says which) and of their classes' own members.
# The same convention holds there, in reStructuredText: a ``>>>`` example
# runs here, through doctest, and prints what it shows; any other code block
# (a paragraph ending in ``::`` with its indented block, a ``.. code-block::``
# or ``.. code::`` directive) is preceded by the comment line
# ``.. not run: REASON`` (invisible in the built page) before its paragraph.

import doctest
import importlib
import inspect

sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import dod_public  # noqa: E402

NOT_RUN_RST = re.compile(r"^\s*\.\. not run: (.{10,}?)\s*$")
LITERAL = re.compile(r"(^|[^:])::\s*$|^\s*\.\. (code-block|code|sourcecode)::")


def _own_doc(value):
    """A member's own docstring: None for a value whose __doc__ is its type's."""
    func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
    doc = getattr(func, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return None
    if not (inspect.isroutine(func) or inspect.isclass(func) or inspect.isdatadescriptor(func)
            or isinstance(func, property)) and doc == type(func).__doc__:
        return None
    return doc


def public_docstrings():
    """(name, module, docstring) of every public module, public class and
    function, and each class's own public members, once per docstring."""
    out, seen = [], set()

    def add(name, module, doc):
        if doc is not None and (module.__name__, doc) not in seen:
            seen.add((module.__name__, doc))
            out.append((name, module, doc))

    for modname in dod_public.public_modules():
        module = importlib.import_module(modname)
        add(modname, module, module.__doc__)
        code, _ = dod_public.public_names(modname)
        for n in code:
            obj = getattr(module, n)
            add(f"{modname}.{n}", module, _own_doc(obj))
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if not attr.startswith("_"):
                        add(f"{modname}.{n}.{attr}", module, _own_doc(value))
    return out


DOCSTRINGS = public_docstrings()
DOC_EXAMPLES = [(name, module, doc) for name, module, doc in DOCSTRINGS if ">>>" in doc]


def _indent(line):
    return len(line) - len(line.lstrip())


def _paragraph_start(lines, i):
    while i > 0 and lines[i - 1].strip():
        i -= 1
    return i


def test_docstrings_were_found():
    names = {name for name, _, _ in DOCSTRINGS}
    assert {"dod.arena", "dod.table.Table.exclusive", "dod.pool.Pool.chunks", "dod.tracker.Tracker.tick"} <= names
    assert len(DOC_EXAMPLES) >= 4


def test_every_docstring_block_is_run_or_marked():
    problems = []
    for name, _, doc in DOCSTRINGS:
        lines = inspect.cleandoc(doc).splitlines()
        for i, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                problems.append(f"{name}: a Markdown fence in a docstring (reStructuredText shows it as text)")
            if not LITERAL.search(line) or NOT_RUN_RST.match(line):
                continue
            start = _paragraph_start(lines, i)
            prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            if not NOT_RUN_RST.match(prev):
                problems.append(f"{name}: code block at {line.strip()!r} is neither a >>> example nor "
                                "preceded by '.. not run: REASON' before its paragraph")
        for i, line in enumerate(lines):
            if NOT_RUN_RST.match(line):           # a marker excuses the block right after it, nothing else
                j = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
                end = j
                while end is not None and end + 1 < len(lines) and lines[end + 1].strip():
                    end += 1
                if j is None or not any(LITERAL.search(ln) for ln in lines[j:end + 1]):
                    problems.append(f"{name}: '.. not run:' marker on no code block")
        for i, line in enumerate(lines):
            # An indented block after a paragraph that does not end in "::"
            # renders as a quotation, code or not: make it a >>> example or a
            # (marked) literal block.
            if i == 0 or not line.strip() or lines[i - 1].strip() or line.lstrip().startswith(">>>"):
                continue
            prev = next(lines[j] for j in range(i - 1, -1, -1) if lines[j].strip())
            if _indent(line) > _indent(prev) and not LITERAL.search(prev) and not prev.lstrip().startswith(".."):
                problems.append(f"{name}: {line.strip()!r} is indented under a paragraph without '::' "
                                "(the page shows it as a quotation)")
        if re.search(r"^Examples\n-{8}", "\n".join(lines), re.M) and ">>>" not in doc:
            problems.append(f"{name}: an Examples section without a >>> example")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name, module, doc", DOC_EXAMPLES, ids=[n for n, _, _ in DOC_EXAMPLES])
def test_docstring_example_does_what_it_says(name, module, doc):
    test = doctest.DocTestParser().get_doctest(inspect.cleandoc(doc), dict(vars(module)), name,
                                               getattr(module, "__file__", None), 0)
    assert test.examples
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    environ = dict(os.environ)
    try:
        runner.run(test, out=report.append, clear_globs=True)
    finally:
        os.environ.clear()
        os.environ.update(environ)
    assert runner.failures == 0, "".join(report)
