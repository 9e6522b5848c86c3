"""Track thousands of targets at 50 Hz from a stream, with a threaded tick.
========================================================================

A producer thread draws each scan into the next free slot of a ring made once
(dod.ring: fixed slots, two atomic counters, no allocation per scan); the
loop's step ticks a tracker whose tick runs on `--threads` OpenMP workers,
bit-identical to one thread. Memory is the ring's slots and the tracker's
table and scratch, faulted in before the first tick: flat for any duration.

Run: python examples/tracker_stream.py [--targets 5000] [--scans 250] [--threads 2]
"""
import argparse

from dod.tracker.openmp import default_binding, default_wait_policy

# libgomp reads these once, when the engine loads: how its workers wait
# between regions, and one core per tick thread (in a loop that sleeps
# between ticks, unpinned threads tend to wake on one core: dod.tracker.openmp)
default_wait_policy()
default_binding()

from dod.loop import Loop
from dod.ring import Ring
from dod.ring_producer import RingProducer
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.scenario import iter_scans

SLOTS = 8


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


args = argparse.ArgumentParser(description=__doc__.split("\n")[0])
args.add_argument("--targets", type=int, default=5000)
args.add_argument("--scans", type=int, default=250, help="scans at 50 Hz (250: 5 s)")
args.add_argument("--threads", type=int, default=2, help="OpenMP threads of one tick")
a = args.parse_args()

config = TrackerConfig(capacity=4 * a.targets, max_detections=2 * a.targets + 64, threads=a.threads)
tracker = Tracker(config)
prefaulted = tracker.prefault()     # every page a tick can touch, now: no page fault inside a deadline
ring = Ring(SLOTS, config.max_detections, (2,), "float64")


def fill(item):                     # the producer thread: one scan into the next free slot
    s, scan = item
    with producer.write(ring) as slot:
        slot.write(scan.detections, dt=scan.dt, tag=s)


# batched: the producer waits on a full ring until refill(), so that it draws
# its scans in the loop's slack, not while a tick needs the cores; idle: its
# thread takes a core only when no tick thread wants one (Linux SCHED_IDLE)
producer = RingProducer(ring, enumerate(iter_scans(a.targets, a.scans, seed=0)), fill, batched=True,
                        idle=True)
rss = {}


def step():
    slot = producer.take()          # the next scan (waits only if the producer is behind)
    if slot is None:
        loop.stop()
        return
    tracker.tick(slot.rows, slot.dt)
    tick = slot.tag
    ring.release()                  # the slot goes back to the producer
    if len(ring) <= SLOTS // 2:
        producer.refill()
    if tick in (49, a.scans - 1):
        rss[tick] = rss_mib()


loop = Loop(step, rate=50)
with producer:
    loop.run(a.scans)

s = loop.stats()
c = tracker.counts()
print(f"{a.targets} targets, {a.threads} tick threads: {s['ticks']} ticks, {s['misses']} deadline misses, "
      f"step p50 {s['p50'] * 1e3:.2f} ms, p99 {s['p99'] * 1e3:.2f} ms")
print(f"{c['confirmed']} confirmed, {c['tentative']} tentative tracks; {prefaulted / 2**20:.0f} MiB prefaulted")
if len(rss) == 2:
    first, last = rss[49], rss[a.scans - 1]
    print(f"RSS {first:.1f} MiB after 50 scans, {last:.1f} MiB after {a.scans} ({(last / first - 1) * 100:+.1f} %)")
