"""A 50 Hz tracker in a few lines: dod.loop calls dod.tracker once per tick.
=========================================================================

    python examples/tracker_demo.py            # 500 targets, 5 s, real time

The loop runs the step against absolute deadlines, sleeps without the GIL,
resets the tracker's scratch arena after every tick and keeps a tick-time
histogram. The full demo, with a live view, GOSPA and a plot, is
``python -m dod.tracker --help``.
"""
import sys

from dod.loop import Loop
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.scenario import generate

RATE, SECONDS, TARGETS = 50.0, 5.0, 500

scenario = generate(TARGETS, int(RATE * SECONDS), dt=1 / RATE, seed=0)
tracker = Tracker(TrackerConfig(capacity=4 * TARGETS, max_detections=2 * TARGETS + 64))
scans = iter(list(scenario))                            # (detections, dt) per scan, made up front


def step():
    tracker.tick(*next(scans))                          # one nogil call, no allocation


loop = Loop(step, RATE, scratch=tracker.scratch)        # gc frozen while it runs
loop.run(ticks=int(RATE))                               # the first second (one-time effects)
blocks = sys.getallocatedblocks()
loop.run(ticks=scenario.scans - int(RATE))              # statistics accumulate across runs
retained = sys.getallocatedblocks() - blocks - 1        # - 1: the int holding `blocks`
s = loop.stats()
print(f"{s['ticks']} ticks at {RATE:g} Hz: p50 {s['p50'] * 1e3:.3f} ms, p99 {s['p99'] * 1e3:.3f} ms, "
      f"max {s['max'] * 1e3:.3f} ms, {s['misses']} deadline misses")
print(f"Python blocks retained by {scenario.scans - int(RATE)} ticks after the first second: {retained}")
print(f"confirmed tracks: {tracker.counts()['confirmed']} "
      f"(targets alive: {scenario.truth_ids[-1].size})")
