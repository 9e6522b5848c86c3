"""Track 200 simulated targets at 50 Hz in a fixed-rate loop, allocation-free.
===========================================================================

The loop owns the scratch arena and the tracker borrows it; each tick feeds
one scan and the loop reports its timing. Run: python examples/tracker_loop.py
"""
import numpy as np

from dod.loop import Loop
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metrics import mot_metrics
from dod.tracker.scenario import generate

scenario = generate(200, 250, pd=0.9, seed=1)        # 5 s of scans, clutter 0.2 N
scans = iter(scenario.detections)
estimates = []


def step():
    tracker.tick(next(scans), scenario.dt)
    estimates.append(tracker.confirmed_tracks())    # copies, for scoring (allocates)


loop = Loop(step, rate=50)
tracker = Tracker(TrackerConfig(dim=2, r=1.0, q=1.0), scratch=loop.scratch)
loop.run(scenario.scans)

s = loop.stats()
print(f"{s['ticks']} ticks, {s['misses']} deadline misses, "
      f"tick p50 {s['p50'] * 1e3:.3f} ms, p99 {s['p99'] * 1e3:.3f} ms, jitter {s['jitter'] * 1e6:.0f} us")
print(f"{tracker.counts()['confirmed']} confirmed tracks, {len(scenario.truth_ids[-1])} true targets")
m = mot_metrics(scenario, estimates)
print(f"MOTA {m['mota']:.3f}  IDF1 {m['idf1']:.3f}  id switches {m['num_switches']:.0f}")
