"""The numpy_memory section of ``python -m dod.bench``: numpy's own allocations
from an arena (``arena.numpy()``, NEP 49) against numpy's default handler.

Workloads, each timed per tick (median) in one run:

* synthetic: a step making 50 temporaries from 8 KB to 4 MB (geometric
  sizes), each written, all alive until the step ends;
* 4 MB temporaries: 10 per tick, each dying at once (glibc maps and faults
  them afresh).

The numpy reference tracker inside ``Loop(numpy_scratch=True)`` is measured
by ``python -m dod.tracker.bench_numpy`` (this package sits below the
tracker), with the same counter.

Per tick it reports minor page faults (``getrusage``) and the numpy data
allocations that reached a malloc-backed handler (the default handler's
count, or the dod handler's fallbacks). When a C compiler is present, the
section re-runs itself in a child process with an ``LD_PRELOAD`` counter of
``malloc``/``calloc``/``realloc``/``posix_memalign`` and ``mmap`` calls made
through the dynamic linker, and reports malloc-family calls per tick
(everything the process allocates, Python's own objects included; glibc's
internal mmaps for large chunks do not pass through the linker: the page
faults show them).
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from dod.arena import Arena
from dod.bench import Section

KB = 1024
SIZES = np.unique(np.geomspace(8 * KB, 4 * KB * KB, 50).astype(np.int64) // 8 * 8)
BIG = 4 * KB * KB

_COUNTER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/types.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern int __posix_memalign(void **, size_t, size_t);
static unsigned long long counts[3];   /* malloc family, mmap, free */
unsigned long long dod_count(int i) { return __atomic_load_n(&counts[i], __ATOMIC_RELAXED); }
void *malloc(size_t n) { __atomic_fetch_add(&counts[0], 1, __ATOMIC_RELAXED); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { __atomic_fetch_add(&counts[0], 1, __ATOMIC_RELAXED); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { __atomic_fetch_add(&counts[0], 1, __ATOMIC_RELAXED); return __libc_realloc(p, n); }
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
void *mmap(void *a, size_t n, int p, int f, int fd, off_t o) {
    if (!real_mmap) real_mmap = dlsym(RTLD_NEXT, "mmap");
    __atomic_fetch_add(&counts[1], 1, __ATOMIC_RELAXED);
    return real_mmap(a, n, p, f, fd, o);
}
"""


def faults():
    """Minor page faults of this process so far (``getrusage``).

    Returns
    -------
    int

    Notes
    -----
    Thread-safety: a read of the process's counters; any thread may call it.
    """
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Counter:
    """The malloc and mmap counter preloaded into this process, when there is one.

    :func:`with_counter` starts a child process with the counter library in
    ``LD_PRELOAD`` and its path in ``DOD_NPMEM_COUNTER``; anywhere else the
    counts read as zeros.

    Attributes
    ----------
    lib : ctypes.CDLL or None
        The loaded counter; None without one.

    Raises
    ------
    OSError
        When ``DOD_NPMEM_COUNTER`` names a library that cannot be loaded.

    Notes
    -----
    Thread-safety: the counts are the process's; any thread may read them.
    """

    def __init__(self):
        self.lib = None
        if os.environ.get("DOD_NPMEM_COUNTER"):
            import ctypes

            self.lib = ctypes.CDLL(os.environ["DOD_NPMEM_COUNTER"])
            self.lib.dod_count.restype = ctypes.c_ulonglong

    def read(self):
        """The calls counted so far.

        Returns
        -------
        tuple of int
            (malloc calls, mmap calls) since the process started; (0, 0)
            without a counter.

        Notes
        -----
        Thread-safety: any thread may read them.
        """
        if self.lib is None:
            return (0, 0)
        return (self.lib.dod_count(0), self.lib.dod_count(1))


def _synthetic_step(src):
    keep = []
    for n in SIZES:
        t = src[: n // 8] * 2.0            # one temporary of n bytes, written
        keep.append(t)
    return float(sum(t[-1] for t in keep))


def _big_step(src):
    s = 0.0
    for _ in range(10):
        t = src * 2.0                      # 4 MB, dies at once
        s += t[-1]
    return s


def _measure(step, arenas, ticks, counter):
    """Per-tick median ns, page faults, malloc-family and mmap calls; `arenas`
    None = numpy's default handler, else a pair of arenas used in turn (the
    step's results live one tick, as in Loop(numpy_scratch=True))."""
    times = []
    f0, (m0, p0) = faults(), counter.read()
    handlers = []
    for k in range(ticks):
        t0 = time.perf_counter_ns()
        if arenas is None:
            step()
        else:
            a = arenas[k & 1]
            h = a.numpy()
            with h:
                step()
            arenas[1 - (k & 1)].reset()
            handlers.append(h.stats()["fallbacks"])
        times.append(time.perf_counter_ns() - t0)
    f1, (m1, p1) = faults(), counter.read()
    return {"ns": float(np.median(times)), "faults": (f1 - f0) / ticks, "malloc": (m1 - m0) / ticks,
            "mmap": (p1 - p0) / ticks, "fallbacks": sum(handlers) / ticks if handlers else None}


def _counting_default(step, ticks):
    """numpy data allocations per tick: every request of the step, counted by a
    dod handler over an arena too small to serve them (they pass through to
    the default handler)."""
    tiny = Arena(16)
    h = tiny.numpy()
    with h:
        for _ in range(ticks):
            step()
    s = h.stats()
    return (s["fallbacks"] + s["allocations"]) / ticks


def measure(quick=False):
    """Every row of the section, measured here (what the child process of
    :func:`with_counter` prints).

    Parameters
    ----------
    quick : bool, default False
        20 ticks instead of 100.

    Returns
    -------
    dict
        ``"synthetic"`` and ``"big"`` (the two workloads), each with
        ``"default"`` and ``"dod"`` measurements and ``"numpy_allocations"``;
        ``"counted"``: whether the malloc counter could be loaded.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    counter = Counter()
    ticks = 20 if quick else 100
    src = np.ones(BIG // 8)
    arenas = [Arena(64 << 20), Arena(64 << 20)]
    res = {}
    for name, step in (("synthetic", lambda: _synthetic_step(src)), ("big", lambda: _big_step(src))):
        for _ in range(3):              # warm both paths (glibc's thresholds adapt)
            step()
        _measure(step, arenas, 4, counter)
        res[name] = {"default": _measure(step, None, ticks, counter),
                     "dod": _measure(step, arenas, ticks, counter),
                     "numpy_allocations": _counting_default(step, 3)}
    res["counted"] = counter.lib is not None
    return res


def with_counter(module, quick):
    """Run ``module.measure(quick)`` in a child process with the malloc counter
    preloaded (``LD_PRELOAD``).

    Parameters
    ----------
    module : str
        The module whose ``measure`` runs (e.g. ``"dod.bench.numpy_memory"``).
    quick : bool
        Passed to ``measure``.

    Returns
    -------
    dict or None
        What the child's ``measure`` returned; None without a C compiler to
        build the counter, or when the child fails.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or sys.platform != "linux":
        return None
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "count.c")
        lib = os.path.join(d, "libdodcount.so")
        with open(src, "w") as f:
            f.write(_COUNTER_C)
        if subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src, "-ldl"],
                          capture_output=True).returncode != 0:
            return None
        env = dict(os.environ, LD_PRELOAD=lib, DOD_NPMEM_COUNTER=lib)
        code = f"import json, {module} as m; print(json.dumps(m.measure({quick!r})))"
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout.strip().splitlines()[-1])


def note(r, counted):
    """The note column of a row.

    Parameters
    ----------
    r : dict
        One measurement of :func:`measure`.
    counted : bool
        Whether malloc and mmap calls were counted.

    Returns
    -------
    str
        Page faults per tick; malloc and mmap calls per tick when `counted`;
        fallbacks and served allocations when `r` has them.

    Notes
    -----
    Thread-safety: a pure function; any thread may call it.
    """
    parts = [f"{r['faults']:.1f} page faults/tick"]
    if counted:
        parts.append(f"{r['malloc']:.0f} malloc calls/tick, {r['mmap']:.1f} mmap/tick")
    if r.get("fallbacks") is not None:
        parts.append(f"{r['fallbacks']:.0f} fallbacks/tick")
    if r.get("served") is not None:
        parts.append(f"{r['served']:.0f} arrays/tick from scratch")
    return "; ".join(parts)


def run(quick=False):
    """The numpy-memory section of ``python -m dod.bench``: page faults (and malloc
    and mmap calls, where a counter could be loaded) in the rows' notes.

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
    res = with_counter("dod.bench.numpy_memory", quick)
    if res is None:
        res = measure(quick)
    counted = res["counted"]
    out = []
    titles = {
        "synthetic": "numpy handler: a step making 50 temporaries of 8 KB .. 4 MB (all alive to its end)",
        "big": "numpy handler: 10 temporaries of 4 MB per tick, each dying at once",
    }
    for name in ("synthetic", "big"):
        r = res[name]
        sec = Section(titles[name], baseline="numpy default handler", per="tick",
                      goal="zero malloc/mmap calls per tick inside the handler; not slower than the default")
        sec.add("numpy default handler", r["default"]["ns"] / 1e3, "us",
                note(r["default"], counted) + f"; {r['numpy_allocations']:.0f} numpy data allocations/tick")
        sec.add("with arena.numpy() (two arenas in turn)", r["dod"]["ns"] / 1e3, "us", note(r["dod"], counted))
        out.append(sec)
    return out
