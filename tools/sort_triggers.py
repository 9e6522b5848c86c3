"""Trackers of several configurations on the same scans, ticked in turn:
p50 / mean / p99 / max of each tick (ms) and the sorts each made.

    python tools/sort_triggers.py [--blocks B] N SCANS THREADS WARMUP CONFIG [CONFIG ...]

Each CONFIG is TrackerConfig keywords in Python syntax ("" for the
defaults), e.g. the sort triggers of the README's Locality table:

    python tools/sort_triggers.py 1000000 150 2 20 "sort_when_displaced=0" "" \\
        "initiation='two_point', sort_when_displaced=0" "initiation='two_point'"

With ``--blocks B`` each row is followed by the scans that sorted and the
p50 of each block of B timed ticks (how the order ages between sorts:
the README's drift table used ``--blocks 200`` over 2,030 scans at
100,000 targets).

Every tracker is prefaulted first (capacity 4 N, max_detections 2 N + 64);
scans come from dod.tracker.scenario.iter_scans (seed 0, Pd 0.9), one at a
time, each ticked by every tracker before the next (a noisy neighbour slows
all alike); the first WARMUP ticks are not counted. At 1M targets each
tracker holds ~4 GiB.
"""
import ast
import gc
import sys
import time

import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.scenario import iter_scans


def keywords(text):
    """TrackerConfig keywords from "a=1, b='x'" (literals only)."""
    call = ast.parse(f"f({text})", mode="eval").body
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def main(argv):
    blocks = 0
    if argv[:1] == ["--blocks"] and len(argv) > 1:
        blocks = int(argv[1])
        argv = argv[2:]
    if len(argv) < 5:
        sys.exit(__doc__)
    n, scans, threads, warmup = (int(a) for a in argv[:4])
    names = argv[4:]
    trackers = [Tracker(TrackerConfig(capacity=4 * n, max_detections=2 * n + 64, threads=threads,
                                      **keywords(c))) for c in names]
    for t in trackers:
        t.prefault()
    ms = [[] for _ in trackers]
    at = [[] for _ in trackers]
    gc.disable()
    for s, sc in enumerate(iter_scans(n, scans, seed=0, pd=0.9, dim=2)):
        for k, t in enumerate(trackers):
            before = t.sorts
            t0 = time.perf_counter_ns()
            t.tick(sc.detections, sc.dt)
            ms[k].append((time.perf_counter_ns() - t0) / 1e6)
            if t.sorts != before:
                at[k].append(s)
    gc.enable()
    print(f"N={n:,}, {scans} scans ({warmup} untimed), threads={threads}; tick ms")
    for name, t, m, when in zip(names, trackers, ms, at):
        a = np.array(m[warmup:])
        print(f"{name or '(defaults)':55s} sorts {t.sorts:3d}  p50 {np.median(a):8.3f}  mean {a.mean():8.3f}  "
              f"p99 {np.percentile(a, 99):8.3f}  max {a.max():8.3f}")
        if blocks > 0:
            p50s = [float(np.median(a[i:i + blocks])) for i in range(0, a.size, blocks)]
            print(f"    sorted at scans {when}; p50 per {blocks} ticks: " + " ".join(f"{v:.2f}" for v in p50s))


if __name__ == "__main__":
    main(sys.argv[1:])
