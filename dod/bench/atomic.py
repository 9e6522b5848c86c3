"""The one-word atomic arena, its thread caches, pages and guard zones.

Rows:
  * "<allocator>, N threads": wall nanoseconds per operation (one 64-byte
    allocation plus its free, batches of 32) with N threads at once on one
    shared allocator; the note gives the scaling against the same
    allocator's own 1-thread rate. "shared word": every allocation is a
    fetch-add on the arena's one word (and every free a fetch-sub on its
    block's counter); "thread cache": each thread bumps its own 64 KiB chunk
    and sums its frees privately.
  * Fast path, one thread: the allocation loop alone (batches of 1024): a
    plain bump (dod.arena) against the shared word's locked add, the cache's
    bump and malloc.
  * Metadata overhead at 1M x 64-byte live allocations: bytes obtained from
    the system beyond 64 MB, per allocation (glibc from mallinfo2).
  * Pages: map+unmap of 64 KiB; guard zones: allocate+free of 64 bytes.

Thread counts: 1 and 2 by default; DOD_BENCH_THREADS=1,2,4,8 for others.
"""
import os

from dod.bench import Section, thread_counts

KERNELS = ("malloc", "shared", "cached")
LABELS = {"malloc": "glibc malloc/free", "shared": "AtomicArena shared word",
          "cached": "AtomicArena thread cache"}



def scaling(threads=(1, 2), iterations=20000, repeat=5, size=64):
    """Allocate+free throughput of each kernel (malloc, the shared word, the
    thread cache) at each thread count.

    Shared atomics per op (read-modify-writes on a cache line that other
    threads write: the word, block counters) do not depend on machine load,
    unlike the scaling ratio; malloc's are not counted (None).

    Parameters
    ----------
    threads : tuple of int, default (1, 2)
        Thread counts; the first is the base of the scaling ratio.
    iterations : int, default 20000
        Allocate+free pairs per thread and run.
    repeat : int, default 5
        Runs per count (the median is kept).
    size : int, default 64
        Bytes per allocation.

    Returns
    -------
    dict
        ``{kernel: {n: [ns per op, scaling vs its own rate at threads[0],
        shared atomics per op]}}``.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench._atomic_kernels import Bench
    from dod.bench._threads import run_threads

    bench = Bench(size)
    out = {}
    for name in KERNELS:
        k = bench.kernel(name)
        run_threads(k, max(threads), iterations // 4)          # warm up: blocks installed, pages faulted
        out[name] = {}
        for n in threads:
            before = bench.shared_atomics()
            runs = sorted((run_threads(k, n, iterations) for _ in range(repeat)), key=lambda r: r.rate)
            atomics = None if name == "malloc" else (bench.shared_atomics() - before) / sum(x.ops for x in runs)
            r = runs[len(runs) // 2]
            out[name][n] = [r.ns_per_op, r.rate, atomics]
        base = out[name][threads[0]][1]
        for n in threads:
            out[name][n][1] = out[name][n][1] / base
    return out


def overhead(count=1_000_000, size=64):
    """Memory each allocator obtains beyond the payload, and its time per allocation.

    Parameters
    ----------
    count : int, default 1_000_000
        Live allocations.
    size : int, default 64
        Bytes each.

    Returns
    -------
    dict
        ``{allocator: (bytes obtained beyond count * size, per allocation;
        ns per allocation)}`` for ``"malloc"``, ``"shared"`` and ``"cached"``.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench import _atomic_kernels as K

    payload = count * size
    out = {}
    for name, fn in (("malloc", lambda: K.overhead_malloc(count, size)),
                     ("shared", lambda: K.overhead_atomic(count, size, False)),
                     ("cached", lambda: K.overhead_atomic(count, size, True))):
        nbytes, ns = fn()
        out[name] = ((nbytes - payload) / count, ns)
    return out


def run(quick=False):
    """The atomic-arena section of ``python -m dod.bench``: allocate+free timings
    at the thread counts of :func:`dod.bench.thread_counts`, and the overhead.

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
    from dod.bench import _atomic_kernels as K

    threads = thread_counts()
    sec = Section("One-word atomic arena: 64-byte allocate+free, one arena shared by all threads",
                  baseline="glibc malloc/free, 1 thread", per="allocation",
                  goal="thread cache >= 1.9x its own 1-thread rate at 2 threads "
                       f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: "
                       "threads beyond the idle cores are time-sliced, not concurrent)")
    res = scaling(threads, iterations=20000 if quick else 100000, repeat=3 if quick else 5)
    for name in KERNELS:
        for n in threads:
            ns, scale, atomics = res[name][n]
            note = f"scaling {scale:.2f}x vs own 1 thread"
            if atomics is not None:
                note += f"; {atomics:.4f} shared atomics/op"
            sec.add(f"{LABELS[name]}, {n} thread{'s' if n > 1 else ''}", ns, note=note)
    fast = [K.fast_path(1 << 18 if quick else 1 << 20) for _ in range(3)]
    med = {k: sorted(f[k] for f in fast)[1] for k in ("bump", "xadd", "cache", "malloc")}
    sec.add("fast path: plain bump (dod.arena), alloc only", med["bump"])
    sec.add("fast path: shared word locked add, alloc only", med["xadd"],
            note=f"{med['xadd'] / med['bump']:.1f}x the plain bump")
    sec.add("fast path: thread-cache bump, alloc only", med["cache"],
            note=f"{med['cache'] / med['bump']:.1f}x the plain bump")
    sec.add("fast path: malloc, alloc only", med["malloc"])
    n = 200_000 if quick else 1_000_000
    ov = overhead(n)
    label = "200k" if quick else "1M"
    for name in KERNELS:
        per, ns = ov[name]
        sec.add(f"{LABELS[name]}: {label} x 64 B held (cold pages)", ns,
                note=f"metadata overhead {per:.2f} B/allocation")
    sec.add("PageSource map+unmap 64 KiB (one page touched)", K.pages_cost(1 << 16, 500 if quick else 2000),
            unit="ns")
    sec.add("PageSource map+unmap 64 KiB (all 16 pages touched)",
            K.pages_cost(1 << 16, 500 if quick else 2000, True))
    g = K.guard_cost(64, 500 if quick else 2000)
    sec.add("GuardedResource 64 B allocate+free (quarantine 64)", g["guard"],
            note=f"{g['guard'] / g['malloc']:.0f}x malloc+free ({g['malloc']:.1f} ns)")
    return sec
