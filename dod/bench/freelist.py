"""Free-list section of ``python -m dod.bench``: first fit and best fit
against malloc/free under a mixed-size churn, and the bookkeeping bytes per
live allocation of pool, free list and glibc malloc. Kernels:
dod/bench/_pool_kernels.pyx."""
from dod.bench import Section, median_of


def run(quick=False):
    """The free-list section of ``python -m dod.bench``.

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
    from dod.freelist import FreeList
    from dod.pool import Pool

    rep = 3 if quick else 5
    sections = []

    # Best fit walks every free block: the large case takes far fewer steps.
    for nlive, lo, hi, steps in ((1_000, 16, 512, 400_000), (10_000, 16, 4096, 40_000)):
        steps = steps // 4 if quick else steps
        cap = 4 * nlive * (hi + 32)
        s = Section(f"free list: mixed churn, {nlive:,} live blocks of {lo}-{hi} bytes, free one + alloc one per step",
                    "malloc/free", per="step (one free + one alloc)",
                    goal="report, do not hide, where malloc wins")
        for strategy in ("first", "best"):
            def one(strategy=strategy):
                fl = FreeList(cap, strategy=strategy)
                ns, fails = K.mixed_churn(fl, nlive, steps, lo, hi, 777)
                assert fails == 0, "region too small for the churn"
                return ns
            s.add(f"free list, {strategy} fit", median_of(one, rep) / steps)
        s.add("malloc/free", median_of(lambda: K.mixed_churn(None, nlive, steps, lo, hi, 777)[0], rep) / steps)
        sections.append(s)

    # -- bookkeeping bytes per live allocation
    n, size = 1_000_000, 64
    s = Section(f"bookkeeping bytes per live allocation, {n:,} live allocations of {size} bytes",
                "glibc malloc", per="allocation",
                goal="pool: 0")
    pool = Pool(n, block_size=size)
    got = K.pool_fill(pool, n)
    assert got == n
    s.add("pool engine", pool.stats()["capacity"] / n - size, "B",
          "the Python face adds a 12-byte side table per slot, outside the blocks")
    fl = FreeList(n * (size + 16) + 64)
    got = K.freelist_fill(fl, n, size)
    assert got == n
    s.add("free list (16-byte header)", fl.used / n - size, "B")
    info, usable = K.malloc_overhead(n, size)
    if info is not None:
        s.add("glibc malloc", info, "B",
              f"mallinfo2 delta; malloc_usable_size leaves {usable:.0f} B spare per block")
    else:       # no mallinfo2: the 8-byte chunk header plus the usable slack
        s.add("glibc malloc", usable + 8, "B", "malloc_usable_size + 8-byte header (no mallinfo2)")
    del pool, fl
    sections.append(s)
    return sections
