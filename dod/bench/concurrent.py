"""Concurrent allocators: thread scaling, CAS retries, metadata overhead, fast-path cost.

Rows (per allocation: one allocate plus its free, 64-byte blocks, batches of 32):
  * "<alloc>, N threads": wall nanoseconds per operation with N threads
    allocating and freeing at once from one shared allocator (all threads'
    operations over the span from the first start to the last end). The note
    gives the scaling: rate at N threads / the same allocator's rate at 1.
  * CAS retries per operation under contention (the lock-free pool and
    segregated fit count a retry each time their compare-and-swap loses).
  * Metadata overhead at one million 64-byte allocations held at once, from a
    fresh allocator (the time column is allocate-only, first-touch page faults
    included: "cold"): bytes the
    allocator obtained beyond 64 MB, per allocation (glibc from mallinfo2).

Thread counts: 1 and 2 by default; set DOD_BENCH_THREADS=1,2,4,8 for others.
"""
import os

from dod.bench import Row, Section, median_of, thread_counts

KERNELS = ("malloc", "lfpool", "segfit")
LABELS = {"malloc": "glibc malloc/free", "lfpool": "LockFreePool", "segfit": "SegFit"}



def scaling(threads=(1, 2), iterations=20000, repeat=5, size=64):
    """{kernel: {n: (ns_per_op, scaling vs own 1-thread rate, cas_retries_per_op)}}."""
    from dod.bench._concurrent_kernels import Bench
    from dod.bench._threads import run_threads

    bench = Bench(size)
    out = {}
    for name in KERNELS:
        k = bench.kernel(name)
        run_threads(k, max(threads), iterations // 4)          # warm up: grow the pools, fault pages in
        out[name] = {}
        for n in threads:
            runs = []
            for _ in range(repeat):
                before = bench.cas_retries(name)
                r = run_threads(k, n, iterations)
                runs.append((r.rate, r.ns_per_op, (bench.cas_retries(name) - before) / r.ops))
            runs.sort()
            rate, ns, retries = runs[len(runs) // 2]
            out[name][n] = [ns, rate, retries]
        base = out[name][threads[0]][1]
        for n in threads:
            out[name][n][1] = out[name][n][1] / base
    return out


def overhead(count=1_000_000, size=64):
    """{allocator: (bytes obtained beyond count*size, per allocation; ns per allocation)}."""
    from dod.bench import _concurrent_kernels as K

    payload = count * size
    out = {}
    for name, fn in (("malloc", K.overhead_malloc), ("segfit", K.overhead_segfit),
                     ("lfpool", K.overhead_lfpool)):
        nbytes, ns = fn(count, size)
        out[name] = ((nbytes - payload) / count, ns)
    return out


def run(quick=False):
    threads = thread_counts()
    sec = Section("Concurrent allocators: 64-byte allocate+free, shared allocator",
                  baseline="glibc malloc/free, 1 thread", per="allocation",
                  goal="each allocator's rate at N threads against its own 1-thread rate; "
                       "CAS retries explain contention or they do not "
                       f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: "
                       "threads beyond the idle cores are time-sliced, not concurrent)")
    res = scaling(threads, iterations=20000 if quick else 100000, repeat=3 if quick else 5)
    for name in KERNELS:
        for n in threads:
            ns, scale, retries = res[name][n]
            note = f"scaling {scale:.2f}x vs own 1 thread"
            if name != "malloc":
                note += f"; {retries:.4f} CAS retries/op"
            sec.add(f"{LABELS[name]}, {n} thread{'s' if n > 1 else ''}", ns, note=note)
    ov = overhead(200_000 if quick else 1_000_000)
    n = "200k" if quick else "1M"
    for name in ("malloc", "segfit", "lfpool"):
        per, ns = ov[name]
        sec.add(f"{LABELS[name]}: {n} x 64 B, cold", ns,
                note=f"metadata overhead {per:.2f} B/allocation")
    return sec
