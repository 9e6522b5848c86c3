"""The numpy reference tracker in a Loop, with and without ``numpy_scratch=True``.

``python -m dod.tracker.bench_numpy [--quick]``: one tick of the numpy
reference tracker at N = 1,000 (``dod.tracker.reference``), p50 per tick,
minor page faults per tick and, with a C compiler, malloc-family calls per
tick counted by the LD_PRELOAD counter of :mod:`dod.bench.numpy_memory`;
with ``numpy_scratch=True`` also the numpy arrays served from scratch per
tick and the requests that fell back to numpy's default handler.

Goal: 0 allocations per tick inside ``Loop(numpy_scratch=True)``.
A NEP 49 handler sees numpy's data allocations only; numpy's other
allocations (iterators, ufunc buffers, shape arrays) and Python's own
objects still reach malloc, and the counter shows them.
"""
import argparse

from dod.bench import Section
from dod.bench.numpy_memory import Counter, faults, note, with_counter


def _tracker(ticks, numpy_scratch, counter):
    from dod.loop import Loop
    from dod.tracker import ReferenceTracker, TrackerConfig
    from dod.tracker.bench import BENCH_MANAGEMENT
    from dod.tracker.scenario import generate

    warm = 30
    sc = generate(1000, warm + ticks + 2, seed=0, pd=0.9)
    t = ReferenceTracker(TrackerConfig(capacity=4000, max_detections=2064, **BENCH_MANAGEMENT))
    it = iter(sc.detections)

    def step():
        t.tick(next(it), sc.dt)

    loop = Loop(step, rate=1e6, numpy_scratch=numpy_scratch, scratch_bytes=32 << 20, gc="disable")
    loop.run(warm)
    loop.reset_stats()
    s0 = loop.numpy_stats
    f0, (m0, p0) = faults(), counter.read()
    loop.run(ticks)
    f1, (m1, p1) = faults(), counter.read()
    s1 = loop.numpy_stats
    st = loop.stats()
    out = {"ns": st["p50"] * 1e9, "faults": (f1 - f0) / ticks, "malloc": (m1 - m0) / ticks,
           "mmap": (p1 - p0) / ticks}
    if s1 is not None:
        out["fallbacks"] = (s1["fallbacks"] - s0["fallbacks"]) / ticks
        out["served"] = (s1["allocations"] - s0["allocations"]) / ticks
    return out


def measure(quick=False):
    """Per-tick cost of the numpy reference tracker in a Loop, without and with
    ``numpy_scratch``.

    Parameters
    ----------
    quick : bool, default False
        20 ticks instead of 100.

    Returns
    -------
    dict
        ``"default"`` and ``"dod"`` (the Loop without and with
        ``numpy_scratch=True``): dicts of ``ns`` per tick and, when a malloc
        counter could be loaded, the allocation counts; ``"counted"``: whether
        one was.

    Raises
    ------
    ValueError
        When the Loop or the tracker refuses its configuration.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    counter = Counter()
    ticks = 20 if quick else 100
    return {"default": _tracker(ticks, False, counter), "dod": _tracker(ticks, True, counter),
            "counted": counter.lib is not None}


def run(quick=False):
    """The numpy-reference-tracker Section: a Loop with and without
    ``numpy_scratch=True``.

    Measured in a child process with the malloc counter preloaded when one can
    be built (:func:`dod.bench.numpy_memory.with_counter`), else here.

    Parameters
    ----------
    quick : bool, default False
        Fewer ticks.

    Returns
    -------
    list of Section
        One table, as ``python -m dod.bench`` prints its sections.

    Raises
    ------
    ValueError
        As :func:`measure`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    res = with_counter("dod.tracker.bench_numpy", quick) or measure(quick)
    counted = res["counted"]
    sec = Section("numpy reference tracker, N = 1,000, one tick in a Loop", baseline="Loop()", per="tick",
                  goal="Loop(numpy_scratch=True): 0 allocations per tick")
    sec.add("Loop()", res["default"]["ns"] / 1e3, "us", note(res["default"], counted))
    sec.add("Loop(numpy_scratch=True)", res["dod"]["ns"] / 1e3, "us", note(res["dod"], counted))
    return [sec]


def main(argv=None):
    """``python -m dod.tracker.bench_numpy``: parse `argv` and run :func:`run`.

    Option: ``--quick``.

    Parameters
    ----------
    argv : list of str or None, default None
        The arguments (``--help`` lists them); None reads ``sys.argv[1:]``.

    Returns
    -------
    None
        The table is printed.

    Raises
    ------
    SystemExit
        For bad arguments (argparse's usage error, status 2).

    Notes
    -----
    Thread-safety: the main thread (it prints).
    """
    p = argparse.ArgumentParser(prog="python -m dod.tracker.bench_numpy", description=__doc__)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args(argv)
    from dod.bench.__main__ import render

    for sec in run(a.quick):
        print(render(sec, False))


if __name__ == "__main__":
    main()
