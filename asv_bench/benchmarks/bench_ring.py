"""Floor 3, the ring (dod.ring): hand-off cost per item against queue.Queue
and collections.deque + Condition in the same run, and allocation per item.

time_handoff: wall time of ITEMS items (one thread: put then get; two
threads: a producer thread feeding this one). track_ns_per_item is the same
per item, track_vs_queue is queue.Queue's ns per item over this variant's
(same thread count, same run: > 1 is faster), and track_bytes_allocated_per_item
is the traced allocation per item through the Python faces (goal: 0 for the ring).
The workload lives in dod.bench.ring, shared with ``python -m dod.bench --only ring``.
"""
from ._util import require

ITEMS = {"engine": 200_000, "ring": 10_000, "queue": 10_000, "deque": 10_000}


class RingHandoff:
    params = (["engine", "ring", "queue", "deque"], [1, 2])
    param_names = ["variant", "threads"]
    timeout = 180

    def setup(self, variant, threads):
        self.m = require("dod.bench.ring")
        require("dod.ring")
        self.m.handoff_ns(variant, threads, 1000)          # warm up: pages, threads, caches

    def time_handoff(self, variant, threads):
        self.m.handoff_ns(variant, threads, ITEMS[variant])

    def _median(self, variant, threads, repeat=5):
        values = sorted(self.m.handoff_ns(variant, threads, ITEMS[variant]) for _ in range(repeat))
        return values[len(values) // 2]

    def track_ns_per_item(self, variant, threads):
        return self._median(variant, threads)
    track_ns_per_item.unit = "ns"

    def track_vs_queue(self, variant, threads):
        return self._median("queue", threads) / self._median(variant, threads)
    track_vs_queue.unit = "x"


class RingAllocation:
    params = (["ring", "queue", "deque"],)
    param_names = ["variant"]
    timeout = 120

    def setup(self, variant):
        self.m = require("dod.bench.ring")
        require("dod.ring")

    def track_bytes_allocated_per_item(self, variant):
        return self.m.allocated_bytes_per_item(variant)
    track_bytes_allocated_per_item.unit = "bytes"
