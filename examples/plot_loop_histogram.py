"""Tick times of a fixed-rate loop
===============================

A :class:`dod.loop.Loop` runs a step at 200 Hz for one second. Each tick
it calls the step, rewinds the loop's scratch arena, records the tick's
duration in a preallocated histogram and sleeps until the next absolute
deadline. The step here does a little numpy work on arrays carved from the
scratch arena (nothing to free: the loop's reset takes them back).
"""
import matplotlib.pyplot as plt
import numpy as np

from dod.loop import Loop

positions = np.random.default_rng(0).random((2000, 2)) * 100.0


def step():
    d = loop.scratch.empty(len(positions))                 # freed by the loop's reset
    np.hypot(positions[:, 0] - 50.0, positions[:, 1] - 50.0, out=d)
    np.less(d, 10.0, out=loop.scratch.empty(len(positions), np.bool_))


loop = Loop(step, rate=200)
loop.run(ticks=200)
s = loop.stats()
print(f"{s['ticks']} ticks, {s['misses']} deadline misses, "
      f"tick p50 {s['p50'] * 1e6:.0f} us, p99 {s['p99'] * 1e6:.0f} us, max {s['max'] * 1e6:.0f} us")

lower_ns, counts = loop.histogram()
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.bar(np.asarray(lower_ns) / 1e3, counts, width=np.asarray(lower_ns) / 1e3 / 64, align="edge", color="tab:blue")
ax.set_xscale("log")
ax.set_xlabel("tick time (us, log scale; bins of 1/64 of a power of two)")
ax.set_ylabel("ticks")
ax.set_title("200 ticks at 200 Hz")
fig.tight_layout()
plt.show()
