"""Concurrent allocators: the allocator article's scaling benchmark, CAS retries,
L1d misses, metadata overhead.

Workload (dod.bench._concurrent_kernels): N threads at once, one allocator
shared by all of them; each thread keeps a window of 64 live blocks and, at
each operation, frees the block in a random slot and allocates a new one
there (one operation = one allocation plus one free). Two patterns:

* random classes: sizes drawn across SegFit's 33 size classes up to 1 KiB
  (a class uniformly, then a size inside it);
* single class: 64 bytes every time.

Allocators: glibc malloc/free; AtomicArena, LockFreePool and SegFit, each
shared (every operation on the shared structure) and through a thread cache
(each thread its own cache, flushed at the end of its run). LockFreePool has
one block size: under random classes it is a pool of 1 KiB blocks.

Rows:
  * "<allocator>, N threads": wall nanoseconds per operation, all threads
    together. The note gives the scaling (rate at N threads / the same
    allocator's rate at 1 thread, measured in the same run), the rate against
    glibc at the same thread count, CAS retries per operation (for the
    allocators built on compare-and-swap) and L1 data-cache read misses per
    million operations (perf_event_open, user space; "not available" when
    the kernel does not let this process read hardware counters).
  * "scaling" rows: one allocator's scaling at every thread count, on one line.
  * metadata: bytes obtained from the system beyond the payload, per live
    allocation, at 1M x 64 B held at once from a fresh allocator (time: ns per
    allocation, page faults included: "cold"); cached rows include the
    cache's slack (it lives in the same spans).

Thread counts: 1 and 2 by default; ``--threads 1,2,4,8,16`` (or
DOD_BENCH_THREADS) for others. tools/scaling_allocators.sh runs the whole
table at 1, 2, 4, 8 and 16 threads.
"""
import os

from dod.bench import Section, thread_counts

KERNELS = ("malloc", "arena_shared", "arena_cached", "lfpool_shared", "lfpool_cached",
           "segfit_shared", "segfit_cached")
LABELS = {"malloc": "glibc malloc/free", "arena_shared": "AtomicArena shared",
          "arena_cached": "AtomicArena thread cache", "lfpool_shared": "LockFreePool shared",
          "lfpool_cached": "LockFreePool thread cache", "segfit_shared": "SegFit shared",
          "segfit_cached": "SegFit thread cache"}
PATTERNS = {"random": "random classes (33 SegFit classes up to 1 KiB)", "single": "single class, 64 B"}


def scaling(pattern="random", threads=(1, 2), iterations=400_000, repeat=5, l1d=True):
    """Throughput of each concurrent allocator at each thread count, for one
    allocation pattern.

    Parameters
    ----------
    pattern : str, default "random"
        ``"random"`` (random size classes) or the single-class pattern.
    threads : tuple of int, default (1, 2)
        Thread counts.
    iterations : int, default 400_000
        Operations per thread and run.
    repeat : int, default 5
        Runs per count (the median is kept).
    l1d : bool, default True
        Read the L1 data-cache miss counters where the hardware allows.

    Returns
    -------
    dict
        ``{kernel: {n: dict(ns, rate, scaling, vs_malloc, retries, l1d,
        l1d_why)}}``; ``retries`` is None for allocators without a
        compare-and-swap, ``l1d`` None (``l1d_why`` says why) without
        hardware counters.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench._concurrent_kernels import Bench
    from dod.bench._threads import run_threads

    bench = Bench(pattern)
    out = {}
    for name in KERNELS:
        k = bench.kernel(name)
        run_threads(k, max(threads), iterations // 4)          # warm up: grow the pools, fault pages in
        out[name] = {}
        for n in threads:
            before = bench.cas_retries(name)
            runs = sorted((run_threads(k, n, iterations) for _ in range(repeat)), key=lambda r: r.rate)
            after = bench.cas_retries(name)
            r = runs[len(runs) // 2]
            row = {"ns": r.ns_per_op, "rate": r.rate,
                   "retries": None if before is None else (after - before) / sum(x.ops for x in runs)}
            if l1d:
                bench.count_l1d(True)
                run_threads(k, n, iterations)
                row["l1d"], row["l1d_why"] = bench.l1d()
                bench.count_l1d(False)
            else:
                row["l1d"], row["l1d_why"] = None, "not measured"
            out[name][n] = row
    bench.check()                       # every block is back in the shared structures
    for name in KERNELS:
        base = out[name][threads[0]]["rate"]
        for n in threads:
            row = out[name][n]
            row["scaling"] = row["rate"] / base
            row["vs_malloc"] = row["rate"] / out["malloc"][n]["rate"]
    return out


def overhead(count=1_000_000, size=64, only=None):
    """Metadata each allocator keeps per live allocation, and its time per allocation.

    Parameters
    ----------
    count : int, default 1_000_000
        Live allocations.
    size : int, default 64
        Bytes each.
    only : str or None, default None
        Measure only this kernel.

    Returns
    -------
    dict
        ``{kernel: (metadata bytes per live allocation, ns per allocation)}``.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench import _atomic_kernels as A
    from dod.bench import _concurrent_kernels as K

    fns = {"malloc": lambda: K.overhead_malloc(count, size),
           "arena_shared": lambda: A.overhead_atomic(count, size, False),
           "arena_cached": lambda: A.overhead_atomic(count, size, True),
           "lfpool_shared": lambda: K.overhead_lfpool(count, size, False),
           "lfpool_cached": lambda: K.overhead_lfpool(count, size, True),
           "segfit_shared": lambda: K.overhead_segfit(count, size, False),
           "segfit_cached": lambda: K.overhead_segfit(count, size, True)}
    out = {}
    for name in KERNELS if only is None else [only]:
        nbytes, ns = fns[name]()
        out[name] = ((nbytes - count * size) / count, ns)
    return out


def _l1d_note(row):
    if row["l1d"] is None:
        return f"L1d misses/Mop: not available ({row['l1d_why']})"
    return f"L1d misses/Mop: {row['l1d']:,.0f}"


def run(quick=False):
    """The concurrent-allocators section of ``python -m dod.bench``: the scaling of
    each allocator at every thread count (:func:`scaling`) for the random-classes
    and single-class patterns, and the metadata overhead (:func:`overhead`).

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
    ValueError
        As :func:`dod.bench.thread_counts`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    threads = thread_counts()
    load = (f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: "
            "threads beyond the idle cores are time-sliced, not concurrent")
    sections = []
    for pattern in ("random", "single"):
        res = scaling(pattern, threads, iterations=100_000 if quick else 400_000, repeat=3 if quick else 5)
        sec = Section(f"Allocator scaling, {PATTERNS[pattern]}: allocate+free pairs, one allocator shared by N threads",
                      baseline="glibc malloc/free, 1 thread", per="operation (allocation + free)",
                      goal="cached LockFreePool and SegFit >= 1.8x their own 1-thread rate at 2 threads "
                           "and faster than glibc there; CAS retries <= 0.01 per op; at 1 thread the cached "
                           f"fast path costs at most half the shared one ({load})")
        for name in KERNELS:
            for n in threads:
                row = res[name][n]
                note = f"scaling {row['scaling']:.2f}x vs own 1 thread"
                if name != "malloc":
                    note += f"; {row['vs_malloc']:.2f}x glibc's rate at {n}"
                if row["retries"] is not None:
                    note += f"; {row['retries']:.4f} CAS retries/op"
                if n == 1 and name.endswith("_cached"):
                    shared = res[name.replace("_cached", "_shared")][1]["ns"]
                    note += f"; {row['ns'] / shared:.2f} of the shared cost"
                note += "; " + _l1d_note(row)
                sec.add(f"{LABELS[name]}, {n} thread{'s' if n > 1 else ''}", row["ns"], note=note)
        for name in KERNELS:
            steps = " / ".join(f"{n}: {res[name][n]['scaling']:.2f}x" for n in threads)
            sec.add(f"{LABELS[name]}: scaling vs own 1 thread", res[name][1]["ns"], note=steps)
        sections.append(sec)
    count = 200_000 if quick else 1_000_000
    label = "200k" if quick else "1M"
    ov = overhead(count)
    sec = Section(f"Allocator metadata: {label} x 64 B live at once, fresh allocator",
                  baseline=f"{LABELS['malloc']}: {label} x 64 B, cold", per="allocation (cold)",
                  goal="metadata at 1M x 64 B unchanged by the caches (<= 0.1 B per allocation) "
                       "plus their slack (at most 64 blocks = 4 KiB per cache at 64 B)")
    for name in KERNELS:
        per, ns = ov[name]
        sec.add(f"{LABELS[name]}: {label} x 64 B, cold", ns, note=f"metadata overhead {per:.3f} B/allocation")
    sections.append(sec)
    return sections
