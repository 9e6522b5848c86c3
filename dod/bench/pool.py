"""Pool section of ``python -m dod.bench``: acquire+release pairs, particle
churn and particle throughput, against malloc/free and one Python object per
particle, all in one run. Kernels: dod/bench/_pool_kernels.pyx."""
import gc
import random
import time

from dod.bench import Section, median_of

PAIR_SIZE = 64          # bytes per block in the pair benchmark
PARTICLE = 32           # bytes per particle (float32 x7 + uint32 flags)


class Particle:
    """The object-per-particle baseline: one Python object per particle.

    Parameters
    ----------
    r : int
        Seeds the position (its low bytes); the velocity is fixed.

    Attributes
    ----------
    x : float
        Position, x.
    y : float
        Position, y.
    z : float
        Position, z.
    vx : float
        Velocity, x.
    vy : float
        Velocity, y.
    vz : float
        Velocity, z.
    age : float
        Seconds alive.
    flags : int
        Flag bits.

    Raises
    ------
    TypeError
        When `r` is not an integer.

    Notes
    -----
    Thread-safety: a plain object; one thread writes it.
    """

    __slots__ = ("x", "y", "z", "vx", "vy", "vz", "age", "flags")

    def __init__(self, r):
        self.x = float(r & 0xFF)
        self.y = float((r >> 8) & 0xFF)
        self.z = 0.0
        self.vx = 1.0
        self.vy = -1.0
        self.vz = 0.5
        self.age = 0.0
        self.flags = 1


def py_churn(live0, frames, born, seed):
    """The churn workload with Python objects in a list (swap-remove): the baseline.

    Parameters
    ----------
    live0 : int
        Particles alive at the start.
    frames : int
        Frames run.
    born : int
        Particles born per frame (about as many die).
    seed : int
        Seed of the deaths' random choice.

    Returns
    -------
    ns : int
        Nanoseconds for all frames.
    ops : int
        Births and deaths counted.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    rng = random.Random(seed)
    live = [Particle(k) for k in range(live0)]
    ops = 0
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        for k in range(born):
            live.append(Particle(k))
        n = len(live)
        kill = max(0, min(n, n - live0 - born // 2 + rng.randrange(born + 1)))
        for _ in range(kill):
            j = rng.randrange(len(live))
            live[j] = live[-1]
            live.pop()
        ops += born + kill
    t1 = time.perf_counter_ns()
    return t1 - t0, ops


def py_throughput(count, frames):
    """Create and drop `count` :class:`Particle` objects, `frames` times (the
    plain-Python baseline).

    Parameters
    ----------
    count : int
        Objects per frame.
    frames : int
        Frames run.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        live = [Particle(k) for k in range(count)]
        del live
    return time.perf_counter_ns() - t0


def py_face_pairs(pool, n):
    """Acquire+release pairs through the pool's Python face.

    Parameters
    ----------
    pool : Pool
        A pool with a free block.
    n : int
        Pairs.

    Returns
    -------
    int
        Nanoseconds (``time.perf_counter_ns``) for the whole loop.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    acquire, release = pool.acquire, pool.release
    t0 = time.perf_counter_ns()
    for _ in range(n):
        release(acquire())
    return time.perf_counter_ns() - t0


def run(quick=False):
    """The pool section of ``python -m dod.bench``.

    Parameters
    ----------
    quick : bool, default False
        Fewer iterations and repeats (noisier numbers).

    Returns
    -------
    list of Section
        The section's tables, each against its baseline measured in the same
        run, as ``python -m dod.bench`` prints them.

    Raises
    ------
    ImportError
        When the section's compiled kernels are not built.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench import _pool_kernels as K
    from dod.pool import Pool

    rep = 3 if quick else 7
    sections = []

    # -- pairs
    n = 2_000_000 if quick else 10_000_000
    pool = Pool(1024, block_size=PAIR_SIZE)
    locked = Pool(1024, block_size=PAIR_SIZE, threadsafe=True)
    res = Pool(1024, block_size=PAIR_SIZE).resource()
    s = Section("pool: acquire+release pairs, 64-byte blocks, 16 live (release the block acquired 16 pairs earlier)",
                "malloc/free", per="pair",
                goal="<= 1.5 ns per pair and >= 3x malloc/free")
    s.add("pool engine, state in a local (registers)", median_of(lambda: K.pair_pool_local(pool, n), rep) / n,
          note="copy owner.engine to a local for the loop, write it back after")
    s.add("pool engine on &owner.engine", median_of(lambda: K.pair_pool(pool, n), rep) / n,
          note="state reloaded/stored each pair: block writes may alias it")
    gpool = Pool(1024, block_size=PAIR_SIZE, growable=True)
    s.add("growable pool engine, state in a local", median_of(lambda: K.pair_pool_local(gpool, n), rep) / n,
          note="same fast path; growth is a slow path not taken here")
    s.add("pool engine, locked (threadsafe, uncontended)", median_of(lambda: K.pair_pool_locked(locked, n), rep) / n)
    s.add("pool through dod_resource (indirect calls)", median_of(lambda: K.pair_resource(res, PAIR_SIZE, n), rep) / n)
    s.add("malloc/free", median_of(lambda: K.pair_malloc(PAIR_SIZE, n), rep) / n)
    m = 200_000 if quick else 1_000_000
    py = Pool(1024, block_size=PAIR_SIZE)
    s.add("pool Python face: release(acquire())", median_of(lambda: py_face_pairs(py, m), rep) / m,
          note="interpreter call overhead included")
    batch = Pool(1024, block_size=PAIR_SIZE)

    def batched():
        t0 = time.perf_counter_ns()
        for _ in range(20):
            batch.release_many(batch.acquire_many(1000))
        return time.perf_counter_ns() - t0

    s.add("pool Python face: acquire_many/release_many(1000)", median_of(batched, rep) / 20_000,
          note="per block, batches of 1000")
    sections.append(s)

    # -- churn
    live0, born = 75_000, 1_000
    frames = 100 if quick else 400
    cpool = Pool(live0 + 4 * born, block_size=PARTICLE)
    s = Section(f"particle churn: {live0:,} live, {born:,} born and ~{born:,} (+-50%) killed per frame",
                "malloc/free", per="frame", goal="churn faster than malloc/free")

    def kernel_churn(owner):
        ns, ops, _ = K.churn(owner, live0, frames, born, 12345)
        return ns / frames, ns / ops

    prow = median_of(lambda: kernel_churn(cpool), rep)
    mrow = median_of(lambda: kernel_churn(None), rep)
    s.add("pool engine", prow[0] / 1000, "us", f"{prow[1]:.1f} ns per create/destroy")
    s.add("malloc/free", mrow[0] / 1000, "us", f"{mrow[1]:.1f} ns per create/destroy")
    pyframes = max(frames // 10, 10)
    ns, ops = py_churn(live0, pyframes, born, 12345)
    s.add("one Python object per particle (__slots__)", ns / pyframes / 1000, "us",
          f"{ns / ops:.1f} ns per create/destroy, cyclic GC on")
    sections.append(s)

    # -- throughput
    count = 100_000
    frames = 10 if quick else 40
    tpool = Pool(count, block_size=PARTICLE)
    s = Section(f"particle throughput: {count:,} created then destroyed per frame", "malloc/free",
                per="frame", goal=">= 10x malloc/free")
    v = median_of(lambda: K.throughput_local(tpool, count, frames), rep) / frames
    s.add("pool engine, state in a local per frame", v / 1000, "us", f"{v / count / 2:.2f} ns per create or destroy")
    v = median_of(lambda: K.throughput_reset(tpool, count, frames), rep) / frames
    s.add("pool engine, destroy all with one dod_pool_reset", v / 1000, "us",
          f"{v / count:.2f} ns per particle (create only; the reset is O(1))")
    v = median_of(lambda: K.throughput(tpool, count, frames), rep) / frames
    s.add("pool engine on &owner.engine", v / 1000, "us", f"{v / count / 2:.2f} ns per create or destroy")
    v = median_of(lambda: K.throughput(None, count, frames), rep) / frames
    s.add("malloc/free", v / 1000, "us", f"{v / count / 2:.2f} ns per create or destroy")
    # Growth: the first frame into a fresh pool, fixed versus growable from
    # 1,000 blocks by chunks of 4,096 (24 chunks from the pages resource).
    v = median_of(lambda: K.throughput_local(Pool(count, block_size=PARTICLE), count, 1), rep)
    s.add("pool engine, first frame into a fresh fixed pool", v / 1000, "us",
          f"{v / count / 2:.2f} ns per create or destroy, page faults included")
    v = median_of(lambda: K.throughput_local(Pool(1000, block_size=PARTICLE, growable=True, chunk_blocks=4096),
                                             count, 1), rep)
    s.add("same, growable pool from 1,000 blocks (+4,096 a chunk)", v / 1000, "us",
          f"{v / count / 2:.2f} ns per create or destroy, 24 growths included")
    pyframes = 3 if quick else 8
    gc.collect()
    v = median_of(lambda: py_throughput(count, pyframes), 3) / pyframes
    s.add("one Python object per particle (__slots__)", v / 1000, "us",
          f"{v / count / 2:.1f} ns per create or destroy")
    sections.append(s)
    return sections
