"""API fuzzer: random call sequences over every public class and function of dod.

Design
------
* Hypothesis draws a *program*: a list of small integer tuples. The program is
  sent (as JSON) to a **worker child process** that interprets it against a
  fresh world of live dod objects. Every call is written to the child's log
  before it runs, so a crash (segfault, abort, ASan report) or a hang is a
  failure that names the call sequence and the last call; hypothesis then
  shrinks the program.
* The interpretation is deterministic (ints pick the object, the method and
  the arguments from tables), so a shrunk program replays exactly.
* Arguments are hostile: ints at every boundary (0, -1, 2**31, 2**32 - 1,
  2**63, 2**64, ...), NaN/inf, wrong dtypes and shapes, non-contiguous,
  read-only and 0-d arrays, stale handles (every value an earlier call
  returned), objects of other dod classes, callbacks that call back into a
  live object (reentrancy) or raise. Objects are also built with
  ``cls.__new__(cls)`` (no __init__), re-initialised, copied and pickled, and
  arrays they hand out are scribbled over.
* A call may raise any of the exceptions dod documents for bad input
  (ValueError, TypeError, OverflowError, MemoryError, BufferError,
  IndexError, KeyError, RuntimeError, AttributeError, NotImplementedError,
  ZeroDivisionError, pickle's errors): those are the contract. A failure is
  a crash, a hang (a program gets WORKER_TIMEOUT s), SystemError or any other
  unexpected exception type, or ``check()`` of a live owner raising
  InvariantError (a structure corrupted by a call that was refused or not).
* The only argument the fuzzer never passes is ``unchecked=True`` (the
  documented path on which the caller owns the checks); methods that may
  wait (BLOCKING: ring acquires, producer and stream takes) get a bounded
  ``timeout`` instead of a hostile one, so a wait that does not end within
  WORKER_TIMEOUT is a hang, reported as one.
* Objects are valid seeded ones of every public class in their interesting
  states: rings with held read and write slots, producers whose source
  raises, scan streams started and not, numpy-handler blocks with escaped
  arrays, loops with real-time options (refused ones included), trackers in
  every motion/initiation/confirmation combination at 2 threads (single-point
  ones with a range-bearing scan), both thread-cache kinds. Producer threads
  are closed at the end of each program.

Adding a public class: one entry in TARGETS (how to build a few valid ones
from the world). test_every_public_name_is_fuzzed fails until it is there.

Budget: DOD_FUZZ_EXAMPLES programs (default 300, ~40 s on 2 cores; shrinking stops after
DOD_FUZZ_SHRINK_S = 60 s);
DOD_FUZZ_EXAMPLES=2000 for a long local run. .ci/run runs it again under the
sanitize build.
"""
import copy
import importlib
import inspect
import json
import math
import os
import pickle
import random
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dod
from dod.errors import InvariantError

HERE = Path(__file__).resolve().parent
EXAMPLES = int(os.environ.get("DOD_FUZZ_EXAMPLES", "300"))
WORKER_TIMEOUT = float(os.environ.get("DOD_FUZZ_TIMEOUT", "60"))
MAX_OPS = 60

# ---------------------------------------------------------------- the table

# The modules whose public names the fuzzer must cover.
FUZZED_MODULES = ["dod", "dod.arena", "dod.atomic_arena", "dod.freelist", "dod.guard", "dod.lfpool",
                  "dod.loop", "dod.pages", "dod.pool", "dod.resource", "dod.segfit", "dod.schema", "dod.table",
                  "dod.errors", "dod.tracker", "dod.tracker.scenario", "dod.tracker.metrics",
                  "dod.ring", "dod.ring_producer", "dod.tracker.stream", "dod.numpy_memory",
                  "dod.thread_cache", "dod.realtime"]

# Public names left out, each with its reason.
NOT_FUZZED = {
    "dod.DeviceArena": "GPU: needs CuPy and a device (tests/gpu)",
    "dod.PinnedArena": "GPU: needs CuPy and a device (tests/gpu)",
    "dod.errors.InvariantError": "an exception class (raised by check(), which the fuzzer calls after every op)",
    "dod.InvariantError": "an exception class (as above)",
    "dod.tracker.metrics.mot_metrics": "clear_mot of a whole run; tests/test_tracker.py",
    "dod.tracker.metrics.run_tracker": "runs a whole scenario (seconds per call); tests/test_tracker.py",
    "dod.tracker.metrics.scenario_gospa": "runs a whole scenario (seconds per call); tests/test_demo.py",
    "dod.tracker.metrics.scenario_hota": "runs a whole scenario (seconds per call); tests/test_metrics_hota.py",
    "dod.tracker.metrics.hota": "lists of per-frame arrays; checked against TrackEval in tests/test_metrics_hota.py",
    "dod.tracker.metrics.clear_mot": "lists of per-frame arrays; tests/test_metrics_mot.py (py-motmetrics)",
    "dod.errors.EscapeWarning": "a warning class",
    "dod.errors.StallError": "an exception class (raised by the bounded waits, which the fuzzer calls)",
    "dod.ring_producer.idle_priority": "changes the calling thread's scheduling class for good; "
                                       "tests/test_track_log.py runs a writer with it",
    "dod.StallError": "an exception class (as above)",
    "dod.ring.RingClosed": "an exception class (raised by the rings, which the fuzzer calls)",
    "dod.numpy_memory.install_default": "replaces numpy's process-wide allocator for good; "
                                        "tests/test_numpy_memory.py",
    "dod.realtime.Realtime": "applies real-time options to the calling thread: fuzzed through "
                             "Loop(cpu=, lock_memory=, realtime_priority=, strict=) (refusals included)",
}

# Methods that may wait: the fuzzer calls them with a bounded timeout only
# (a hostile timeout is a legitimately long wait, not a bug; tests/test_ring.py
# and tests/test_reliability.py check the timeout argument itself).
BLOCKING = {"Ring": {"acquire_write", "acquire_read", "write", "read"},
            "RingProducer": {"take", "close"}, "ScanStream": {"take", "close"}}
# Errors a class documents beyond OK_ERRORS: a real-time option the OS refuses
# (strict=True) is an OSError by contract; a bounded wait that runs out (or a
# stall) is a TimeoutError.
EXTRA_OK = {"Loop": (OSError,), "Ring": (TimeoutError,), "RingProducer": (TimeoutError,),
            "ScanStream": (TimeoutError,), "_WriteBlock": (TimeoutError,), "_ReadBlock": (TimeoutError,)}

_SCHEMA = dict(x="float32", v=("float64", (2,)), n="int32")


def _schema(order="C"):
    from dod.table import Column, Schema
    return Schema(**dict(_SCHEMA, v=Column("float64", (2,), order=order)))


def _loop_step(w):
    def step():
        w.reenter()
    return step


def _ring(w, held):
    """A ring with its read slot, write slot or both held by the Python face."""
    from dod.ring import Ring
    r = Ring(2, 4, (2,))
    if held in ("read", "both"):
        with r.write(0) as slot:
            slot.write(np.ones((2, 2)))
        w.values.append(r.acquire_read(0))
    if held in ("write", "both"):
        w.values.append(r.acquire_write(0))
    return r


def _raising_items():
    yield 1
    raise ValueError("a producer source that raises")


def _producer(w, source_raises):
    from dod.ring import Ring
    from dod.ring_producer import RingProducer
    r = Ring(2, 4, (2,))

    def fill(i):
        with r.write(0.05) as slot:
            slot.write(np.full((1, 2), float(i)))
    p = RingProducer(r, _raising_items() if source_raises else range(3), fill, idle=False)
    w.closers.append(p.close)
    return p.start()


def _stream(w, start):
    from dod.tracker.stream import ScanStream
    st = ScanStream(4, 6, rows=64, slots=2, sample_every=1, idle=False)
    w.closers.append(st.close)
    return st.start() if start else st


def _numpy_block(w):
    """A numpy handler whose block ended with an array still alive (escaped)."""
    h = w.get("dod.arena.Arena").numpy()
    with h:
        w.values.append(np.zeros(16))
    return h


def _tracker(w, motion, initiation, confirmation):
    """A 2-thread tracker of one motion/management combination, a few scans in;
    single-point ones also fold in a range-bearing scan (the measurement model)."""
    from dod.tracker import Sensor, Tracker
    t = Tracker(threads=2, motion=motion, initiation=initiation, confirmation=confirmation,
                events=confirmation == "score")      # (half of them record the scans' events)
    z = np.linspace(0.0, 50.0, 8).reshape(-1, 2)
    for k in range(3):
        t.tick(z + k, 0.1)
    if initiation == "single":
        s = Sensor((0.0, -100.0), 1.0, 1e-3)
        t.tick(s.measure(z + 3), 0.1, sensor=s)
    return t


# name -> list of recipes; a recipe builds a valid object from the world `w`
# (w.get(cls) returns a live object of that class or builds one).
TARGETS = {
    "dod.arena.Arena": [
        lambda w: __import__("dod.arena").arena.Arena(4096),
        lambda w: __import__("dod.arena").arena.Arena(256, growable=True),
        lambda w: __import__("dod.arena").arena.Arena(buffer=bytearray(1024)),
        lambda w: __import__("dod.arena").arena.Arena(512, resource=w.resource()),
    ],
    "dod.arena.Mark": [lambda w: w.get("dod.arena.Arena").mark()],
    "dod.arena.Scope": [lambda w: w.get("dod.arena.Arena").scope()],
    "dod.atomic_arena.AtomicArena": [
        lambda w: __import__("dod.atomic_arena").atomic_arena.AtomicArena(4096),
        lambda w: __import__("dod.atomic_arena").atomic_arena.AtomicArena(1 << 16, evict=True,
                                                                          max_concurrent_entrants=2),
    ],
    "dod.atomic_arena.ThreadCache": [
        lambda w: __import__("dod.atomic_arena").atomic_arena.ThreadCache(
            w.get("dod.atomic_arena.AtomicArena"), chunk=256)],
    "dod.freelist.FreeList": [
        lambda w: __import__("dod.freelist").freelist.FreeList(4096),
        lambda w: __import__("dod.freelist").freelist.FreeList(1024, strategy="best", resource=w.resource()),
    ],
    "dod.guard.GuardedResource": [
        lambda w: __import__("dod.guard").guard.GuardedResource(quarantine=2),
        lambda w: __import__("dod.guard").guard.GuardedResource(side="left", quarantine=0),
    ],
    "dod.lfpool.LockFreePool": [
        lambda w: __import__("dod.lfpool").lfpool.LockFreePool(32, capacity=8),
        lambda w: __import__("dod.lfpool").lfpool.LockFreePool(16, capacity=4, chunk_blocks=4),
    ],
    "dod.loop.Loop": [
        lambda w: __import__("dod.loop").loop.Loop(_loop_step(w), rate=1e6, scratch_bytes=4096, gc=None),
        lambda w: __import__("dod.loop").loop.Loop(_loop_step(w), rate=1e5, spin=1e-6,
                                                   scratch=w.get("dod.arena.Arena"), check_scratch=False),
        # real-time options: one the OS grants, ones it refuses (warned, or OSError with strict)
        lambda w: __import__("dod.loop").loop.Loop(_loop_step(w), rate=1e5, scratch_bytes=4096, gc=None,
                                                   cpu=sorted(dod.initial_cpus or {0})[0], strict=False),
        lambda w: __import__("dod.loop").loop.Loop(_loop_step(w), rate=1e5, scratch_bytes=4096, gc=None,
                                                   realtime_priority=1, lock_memory=True, strict=False),
        lambda w: __import__("dod.loop").loop.Loop(_loop_step(w), rate=1e5, scratch_bytes=4096, gc=None,
                                                   realtime_priority=1, strict=True),
    ],
    "dod.loop.monotonic_ns": None,                      # a function: called with hostile arguments
    "dod.pages.PageSource": [lambda w: __import__("dod.pages").pages.PageSource()],
    "dod.pages.prefault": None,                         # a function: called with hostile arguments
    "dod.pool.Pool": [
        lambda w: __import__("dod.pool").pool.Pool(8, block_size=32),
        lambda w: __import__("dod.pool").pool.Pool(4, np.float32, (3,), growable=True, chunk_blocks=2),
        lambda w: __import__("dod.pool").pool.Pool(4, "int64", threadsafe=True),
        lambda w: __import__("dod.pool").pool.Pool(4, block_size=16, resource=w.resource()),
    ],
    "dod.resource.Resource": [lambda w: w.resource()],
    "dod.resource.huge_pages": None,
    "dod.resource.set_huge_pages": None,        # changes only later mappings' hint
    "dod.segfit.SegFit": [lambda w: __import__("dod.segfit").segfit.SegFit()],
    "dod.segfit.class_size": None,
    "dod.segfit.class_sizes": None,
    "dod.schema.Column": [lambda w: __import__("dod.table").table.Column("float32", (2,), name="c"),
                          lambda w: __import__("dod.table").table.Column("float64", (2, 3), order="F", name="f")],
    "dod.schema.Schema": [lambda w: _schema()],
    "dod.table.Table": [
        lambda w: __import__("dod.table").table.Table(_schema(), 8),
        lambda w: __import__("dod.table").table.Table(_schema(), 4, resource=w.resource()),
        lambda w: __import__("dod.table").table.Table(_schema("F"), 8),     # v stored in lanes
    ],
    "dod.get_include": None,
    "dod.tracker.Tracker": [lambda w: __import__("dod.tracker").tracker.Tracker()] + [
        (lambda m, i, c: lambda w: _tracker(w, m, i, c))(m, i, c)
        for m in ("cv", "imm") for i in ("single", "two_point") for c in ("m_of_n", "score")],
    "dod.ring.Ring": [lambda w: _ring(w, None), lambda w: _ring(w, "read"), lambda w: _ring(w, "write"),
                      lambda w: _ring(w, "both")],
    "dod.ring.Slot": [lambda w: _ring(w, "read") and w.values[-1], lambda w: _ring(w, "write") and w.values[-1]],
    "dod.ring_producer.RingProducer": [lambda w: _producer(w, False), lambda w: _producer(w, True)],
    "dod.tracker.stream.ScanStream": [lambda w: _stream(w, False), lambda w: _stream(w, True)],
    "dod.numpy_memory.NumpyHandler": [_numpy_block],
    "dod.numpy_memory.handler_name": None,
    "dod.thread_cache.LockFreePoolCache": [
        lambda w: __import__("dod.thread_cache").thread_cache.LockFreePoolCache(
            w.get("dod.lfpool.LockFreePool"))],
    "dod.thread_cache.SegFitCache": [
        lambda w: __import__("dod.thread_cache").thread_cache.SegFitCache(w.get("dod.segfit.SegFit"))],
    "dod.realtime.locked_kib": None,
    "dod.tracker.TrackerConfig": [
        lambda w: __import__("dod.tracker").tracker.TrackerConfig(),
        lambda w: __import__("dod.tracker").tracker.TrackerConfig(
            filter=__import__("dod.tracker").tracker.FilterConfig(dim=3), threads=2)],
    "dod.tracker.FilterConfig": [lambda w: __import__("dod.tracker").tracker.FilterConfig()],
    "dod.tracker.ManagementConfig": [lambda w: __import__("dod.tracker").tracker.ManagementConfig()],
    "dod.tracker.ClutterConfig": [lambda w: __import__("dod.tracker").tracker.ClutterConfig()],
    "dod.tracker.LimitsConfig": [lambda w: __import__("dod.tracker").tracker.LimitsConfig()],
    "dod.tracker.ExecutionConfig": [lambda w: __import__("dod.tracker").tracker.ExecutionConfig()],
    "dod.tracker.ReferenceTracker": [lambda w: __import__("dod.tracker").tracker.ReferenceTracker()],
    "dod.tracker.chi2_ppf": None,
    "dod.tracker.solve_assignment": None,
    "dod.tracker.track_schema": None,
    "dod.tracker.set_simd": None,
    "dod.tracker.simd_path": None,
    "dod.tracker.simd_paths": None,
    "dod.tracker.scratch_bytes": None,
    "dod.tracker.unpack_covariance": None,
    "dod.tracker.pack_covariance": None,
    "dod.tracker.scenario.Scenario": [
        lambda w: __import__("dod.tracker.scenario").tracker.scenario.generate(3, 5, seed=1)],
    "dod.tracker.scenario.generate": None,
    "dod.tracker.Sensor": [lambda w: __import__("dod.tracker").tracker.Sensor((0.0, 0.0), 1.0, 1e-3)],
    "dod.tracker.TrackBatch": [lambda w: w.get("dod.tracker.Tracker").tracks_arrow(),
                               lambda w: w.get("dod.tracker.Tracker").tracks_arrow(confirmed=False)],
    "dod.tracker.ScanEvents": None,
    "dod.tracker.Tracks": None,
    "dod.tracker.scenario.RadarScenario": [
        lambda w: __import__("dod.tracker.scenario").tracker.scenario.generate_radar(3, 5, seed=1)],
    "dod.tracker.scenario.RadarScan": None,
    "dod.tracker.scenario.generate_radar": None,
    "dod.tracker.scenario.iter_radar_scans": None,
    "dod.tracker.scenario.radar_sensors": None,
    "dod.tracker.metrics.gospa": None,
    "dod.tracker.metrics.sparse_gospa": None,
    "dod.tracker.scenario.Scan": None,
    "dod.tracker.scenario.iter_scans": None,
    "dod.tracker.scenario.scan_extent": None,
    "dod.tracker.metrics.ospa": None,
}
# Re-exports are the same objects as their home names.
ALIASES = {"dod.Ring": "dod.ring.Ring", "dod.RingProducer": "dod.ring_producer.RingProducer",
           "dod.Realtime": "dod.realtime.Realtime", "dod.Arena": "dod.arena.Arena", "dod.LockFreePool": "dod.lfpool.LockFreePool",
           "dod.SegFit": "dod.segfit.SegFit", "dod.Pool": "dod.pool.Pool", "dod.FreeList": "dod.freelist.FreeList",
           "dod.Loop": "dod.loop.Loop", "dod.Resource": "dod.resource.Resource",
           "dod.AtomicArena": "dod.atomic_arena.AtomicArena", "dod.ThreadCache": "dod.atomic_arena.ThreadCache",
           "dod.PageSource": "dod.pages.PageSource", "dod.GuardedResource": "dod.guard.GuardedResource",
           "dod.Schema": "dod.schema.Schema", "dod.Table": "dod.table.Table", "dod.Column": "dod.schema.Column"}

# Methods the generic caller leaves to a bounded op of their own (a hostile
# count would be a legitimately long run, not a bug).
BOUNDED = {"dod.loop.Loop": {"run"}}

OK_ERRORS = (ValueError, TypeError, OverflowError, MemoryError, BufferError, IndexError, KeyError,
             RuntimeError, AttributeError, NotImplementedError, ZeroDivisionError, pickle.PicklingError,
             StopIteration, FloatingPointError, np.linalg.LinAlgError)


def public_names():
    """Every public class and function of FUZZED_MODULES, by dotted name."""
    out = set()
    for m in FUZZED_MODULES:
        mod = importlib.import_module(m)
        names = getattr(mod, "__all__", None)
        if names is None:
            names = [n for n in dir(mod) if not n.startswith("_")]
        for n in names:
            try:
                o = getattr(mod, n)
            except Exception:            # a lazily exported GPU name that cannot import here
                out.add(f"{m}.{n}")
                continue
            if inspect.ismodule(o) or not callable(o):
                continue
            if getattr(mod, "__all__", None) is None and getattr(o, "__module__", m) != m and m != "dod":
                continue                 # imported from elsewhere, not defined here
            out.add(f"{m}.{n}")
    return out


def resolve(name):
    mod, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


# ---------------------------------------------------------------- the worker (child process)

_BIG_FEASIBLE = [2**31 - 1, 2**31, 2**32 - 1, 2**32]     # huge but satisfiable on a 64-bit machine


def _boundary_ints(sanitize):
    ints = [0, 1, -1, 2, 3, 7, 8, 16, 255, 256, 4096, 65535, 65536, 2**48, 2**63 - 1, 2**63, -2**63,
            -2**63 - 1, 2**64 - 1, 2**64, 2**100, -2**31]
    if not sanitize:                 # ASan cannot run under an address-space limit: leave these out there
        ints += _BIG_FEASIBLE
    return ints


class World:
    """The live objects of one program and everything its calls returned."""

    def __init__(self, log, sanitize):
        self.objs = []                  # dod objects (any public class)
        self.values = []                # every return value (handles, arrays, marks, ...)
        self.bare = set()               # ids of objects made by __new__ alone
        self.log = log
        self.depth = 0
        self.ints = _boundary_ints(sanitize)
        self.rng = random.Random(0)
        self.closers = []               # close() of every producer thread started (run at the end)

    def close(self):
        for c in self.closers:
            c(timeout=10.0)

    def resource(self):
        owners = [o for o in self.objs if hasattr(o, "resource") and callable(o.resource)
                  and type(o).__name__ in ("Arena", "Pool", "FreeList", "SegFit", "GuardedResource",
                                           "PageSource", "AtomicArena", "LockFreePool")]
        if owners and self.rng.random() < 0.7:
            try:
                return self.rng.choice(owners).resource()
            except OK_ERRORS:
                pass
        import dod.resource
        return self.rng.choice([dod.resource.pages, dod.resource.malloc])

    def get(self, name):
        cls = resolve(name)
        live = [o for o in self.objs if type(o) is cls]
        if live:
            return self.rng.choice(live)
        o = self.rng.choice(TARGETS[name])(self)
        self.objs.append(o)
        return o

    def reenter(self):
        """Called back by dod (a Loop step, a reentrant argument): call into a live object."""
        if self.depth >= 2 or not self.objs:
            return
        self.depth += 1
        try:
            call_random(self, self.rng.randrange(1 << 30), self.rng.randrange(1 << 30), reentrant=True)
        finally:
            self.depth -= 1

    # -------------------------------------------------------- hostile values

    def value(self, k):
        """A hostile argument, chosen by the int k."""
        r = random.Random(k)
        kind = k % 16
        if kind == 0:
            return r.choice(self.ints)
        if kind == 1:
            return r.choice([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 0.5, -1.5])
        if kind == 2:
            return self._array(r)
        if kind == 3 and self.values:
            return r.choice(self.values)            # stale handles, old arrays, old marks
        if kind == 4 and self.objs:
            return r.choice(self.objs)              # an object of any dod class
        if kind == 5:
            return r.choice(["", "float32", "float64", "int8", "O", "first", "best", "left", "skip",
                             "x" * 300, "float32[3]", "id", "\x00", "raise", "freeze"])
        if kind == 6:
            return r.choice([None, True, False, b"", bytearray(17), memoryview(b"abc"), (), [], {},
                             object(), np.float32, np.dtype("O"), np.dtype([("a", "i4")]), slice(None)])
        if kind == 7:
            return [r.choice(self.ints[:12]) for _ in range(r.randrange(4))]
        if kind == 8:
            return self._callback(r)
        if kind == 9:
            return tuple(r.choice([0, 1, 2, 3, -1, 2**31, 2**63]) for _ in range(r.randrange(4)))
        if kind == 10:
            return np.int64(r.choice([i for i in self.ints if -2**63 <= i < 2**63]) if r.random() < 0.5 else 3)
        # plausible values, so calls get past the checks into the engines
        recent = [v for v in self.values[-6:] if isinstance(v, (int, np.integer, np.ndarray))]
        if recent and kind in (11, 12):
            return r.choice(recent)                      # the handle or array just returned
        if kind == 13:
            return np.linspace(0.0, 50.0, r.choice([2, 6, 10])).reshape(-1, 2)   # detections / points
        return r.choice([0, 1, 2, 3, 4, 8, 16, -1, 0.5, 0.02, "float32", (2,)])

    def _array(self, r):
        dt = r.choice([np.float64, np.float32, np.int64, np.uint64, np.int32, np.uint8, np.bool_,
                       np.complex128, object])
        shape = r.choice([(0,), (1,), (3,), (5, 2), (4, 3), (2, 3, 2), (), (7, 1), (0, 2)])
        if dt is object:
            a = np.empty(shape, dtype=object)
        else:
            a = (np.arange(int(np.prod(shape)) or 0) * r.choice([1, 7, -3])).astype(dt).reshape(shape)
            if r.random() < 0.3 and a.dtype.kind == "f":
                a.flat[: max(1, a.size // 2)] = r.choice([np.nan, np.inf, -np.inf])
            if r.random() < 0.2 and a.dtype.kind in "iu":
                a.flat[:] = np.iinfo(a.dtype).max
        mode = r.randrange(5)
        if mode == 1 and a.ndim and a.shape[0] > 1:
            a = a[::2]                                   # non-contiguous
        elif mode == 2:
            a.flags.writeable = False                    # read-only
        elif mode == 3 and a.ndim >= 2:
            a = np.asfortranarray(a)
        elif mode == 4 and a.ndim >= 2:
            a = a.T
        return a

    def _callback(self, r):
        if r.random() < 0.3:
            def boom(*args, **kwargs):
                raise ValueError("a callback that raises")
            return boom

        def cb(*args, **kwargs):
            self.reenter()
            return r.choice([None, 0, 1.0, np.zeros(2)])
        return cb


def _compiled(obj):
    """True for names defined in an extension module: there an AttributeError
    on a live object means a C field read as a Python attribute (a bug).
    The pure-Python modules (tracker config, reference, metrics) still answer
    some wrong types with AttributeError: accepted there (known, reported)."""
    return str(getattr(sys.modules.get(getattr(obj, "__module__", "")), "__file__", "")).endswith(".so")


def _pick(k, n):
    """An index below n from the int k, spread evenly (hypothesis' ints lean small)."""
    return random.Random(k).randrange(n)


def _methods(obj):
    bounded = BOUNDED.get(f"{type(obj).__module__}.{type(obj).__name__}", set())
    names = []
    for n in sorted(dir(type(obj))):
        if n.startswith("__") and n not in ("__enter__", "__exit__", "__init__", "__len__", "__iter__",
                                            "__contains__", "__getitem__", "__setitem__", "__delitem__",
                                            "__repr__", "__reduce__", "__array__", "__arrow_c_array__",
                                            "__arrow_c_stream__", "__arrow_c_schema__", "__bool__"):
            continue
        if n.startswith("_") and not n.startswith("__"):
            continue
        if n in bounded:
            continue
        names.append(n)
    return names


def _signature_arity(f):
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return 3, []
    pos = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
           and p.name != "self"]
    kw = [p.name for p in sig.parameters.values() if p.kind == p.KEYWORD_ONLY]
    return len(pos), kw


def _short(v):
    if isinstance(v, np.ndarray):
        s = f"ndarray({v.dtype}, {v.shape}, c={v.flags.c_contiguous}, w={v.flags.writeable})"
    else:
        try:
            s = repr(v)
        except OK_ERRORS as e:                  # e.g. an object made by __new__ alone
            s = f"<{type(v).__name__}: repr raised {type(e).__name__}>"
        except InvariantError:
            raise
    return s if len(s) < 90 else s[:87] + "..."


def _raised_by_bare(w, e):
    """True when the innermost frame of `e` is a method of an object made by __new__ alone."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and id(tb.tb_frame.f_locals.get("self")) in w.bare


def _checked_call(w, f, args, kwargs, what, lenient_attr=False, extra_ok=()):
    w.log(f"{what}({', '.join([_short(a) for a in args] + [f'{k}={_short(v)}' for k, v in kwargs.items()])})")
    try:
        out = f(*args, **kwargs)
    except InvariantError:
        raise                                   # a broken structure, never bad input
    except extra_ok as e:
        w.log(f"  -> {type(e).__name__} (documented for this class): {str(e)[:100]}")
        return None
    except AttributeError as e:
        # Only an object made by __new__ alone may lack what its methods read;
        # on a live object it is a bug (FreeList.owns raised it on every array).
        # A bare object passed as an argument counts too: its own method
        # raised it (a bare Scenario iterated by release_many), not the callee.
        if not lenient_attr and not _raised_by_bare(w, e):
            raise
        w.log(f"  -> {type(e).__name__}: {str(e)[:100]}")
        return None
    except OK_ERRORS as e:
        w.log(f"  -> {type(e).__name__}: {str(e)[:100]}")
        return None
    if out is not None and not isinstance(out, (bool, float, str)):
        w.values.append(out)
        if isinstance(out, (list, tuple)):
            w.values.extend(x for x in out[:4] if x is not None)
    if type(out).__module__.startswith("dod") and not isinstance(out, type):
        w.objs.append(out)
    w.log(f"  -> {_short(out)}")
    return out


def _pickle_round_trip(x):
    try:
        data = pickle.dumps(x)
    except AttributeError as e:
        # Python < 3.14 reports a value pickle cannot name (a local function
        # stored in a plain dataclass, say) as AttributeError, not
        # PicklingError: pickle's refusal, not a dod object missing a field.
        if not str(e).startswith("Can't pickle local object"):
            raise
        raise pickle.PicklingError(str(e)) from e
    return pickle.loads(data)


def _args_for(w, f, a, b):
    npos, kw = _signature_arity(f)
    r = random.Random(a * 7919 + b)
    n = r.randrange(npos + 2)
    args = [w.value(r.randrange(1 << 30)) for _ in range(n)]
    kwargs = {}
    for name in kw:
        if r.random() < 0.3:
            if name == "unchecked":
                continue                        # the caller-owns-the-checks path is out of scope
            kwargs[name] = w.value(r.randrange(1 << 30))
    return args, kwargs


def call_random(w, a, b, reentrant=False, newest=False):
    """Call a method of a live object (or a public function) with hostile arguments."""
    if not w.objs or (a % 5 == 0 and not newest):
        fname = sorted(n for n, v in TARGETS.items() if v is None)[b % sum(v is None for v in TARGETS.values())]
        f = resolve(fname)
        args, kwargs = _args_for(w, f, a, b)
        if fname.endswith("generate"):           # a scenario's work grows with its arguments
            args = [x if not isinstance(x, int) or abs(x) < 64 else 5 for x in args]
        return _checked_call(w, f, args, kwargs, fname, lenient_attr=not _compiled(f))
    # Half the calls go to one of the three newest objects (what a program just made).
    obj = w.objs[-1] if newest else \
        w.objs[-1 - (a // 2) % min(3, len(w.objs))] if a % 2 else w.objs[a // 2 % len(w.objs)]
    names = _methods(obj)
    if not names:
        return None
    name = names[_pick(b, len(names))]
    try:
        attr = getattr(obj, name)
    except OK_ERRORS as e:
        w.log(f"{type(obj).__name__}.{name} -> {type(e).__name__}: {e}")
        return None
    if not callable(attr):                      # a property: reading it was the call
        w.log(f"{type(obj).__name__}.{name} -> {_short(attr)}")
        if attr is not None and not isinstance(attr, (bool, int, float, str)):
            w.values.append(attr)
        return attr
    args, kwargs = _args_for(w, attr, a, b)
    if name in BLOCKING.get(type(obj).__name__, ()):
        args, kwargs = [], {"timeout": [0, 1e-3, 1e-2][b % 3]}     # a bound on every wait
    return _checked_call(w, attr, args, kwargs, f"{'  ' * reentrant}{type(obj).__name__}.{name}",
                         lenient_attr=id(obj) in w.bare or not _compiled(type(obj)),
                         extra_ok=EXTRA_OK.get(type(obj).__name__, ()))


# op kind -> what it does (0 build, 1-5 call, 6 hostile constructor, 7 __new__/__init__ again,
# 8 copy/pickle, 9 scribble, 10 del, 11 bounded ops); repeats weight the draw.
KINDS = [0, 0, 1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 7, 8, 9, 10, 11]


def run_op(w, op):
    kind, a, b = op
    kind = KINDS[kind % len(KINDS)]
    if kind == 0 or not w.objs and kind < 11:   # build something
        names = sorted(n for n, v in TARGETS.items() if v)
        name = names[_pick(a, len(names))]
        recipes = TARGETS[name]
        w.rng.seed(b)
        w.log(f"new {name} #{b % len(recipes)}")
        try:
            w.objs.append(recipes[b % len(recipes)](w))
        except OK_ERRORS as e:
            w.log(f"  -> {type(e).__name__}: {e}")
    elif kind <= 5:
        call_random(w, a, b)
    elif kind == 6:                             # a constructor with hostile arguments
        names = sorted(n for n, v in TARGETS.items() if v)
        cls = resolve(names[_pick(a, len(names))])
        args, kwargs = _args_for(w, cls, a, b)
        _checked_call(w, cls, args, kwargs, cls.__name__, lenient_attr=not _compiled(cls))
    elif kind == 7:                             # __new__ without __init__, or __init__ again
        names = sorted(n for n, v in TARGETS.items() if v)
        cls = resolve(names[_pick(a, len(names))])
        if b % 2:
            w.log(f"{cls.__name__}.__new__({cls.__name__})")
            try:
                w.objs.append(cls.__new__(cls))
                w.bare.add(id(w.objs[-1]))
            except OK_ERRORS as e:
                w.log(f"  -> {type(e).__name__}: {e}")
            else:                               # a bare object is the hazard: every method at once
                bare = w.objs[-1]
                for k, name in enumerate(_methods(bare)):
                    try:
                        f = getattr(bare, name)
                    except OK_ERRORS:
                        continue
                    if callable(f) and name != "__init__":
                        npos, _ = _signature_arity(f)
                        args = [w.value(a * 131 + 16 * k + 11 + j) for j in range(npos)]
                        _checked_call(w, f, args, {}, f"bare {cls.__name__}.{name}", lenient_attr=True)
        else:
            live = [o for o in w.objs if type(o) is cls]
            if live:
                o = live[b % len(live)]
                args, kwargs = _args_for(w, cls, a, b)
                _checked_call(w, o.__init__, args, kwargs, f"{cls.__name__}.__init__ (again)",
                              lenient_attr=not _compiled(cls))
    elif kind == 8 and w.values + w.objs:       # copy / deepcopy / pickle a value or an object
        pool = w.values + w.objs
        v = pool[a % len(pool)]
        how = ["copy.copy", "copy.deepcopy", "pickle"][b % 3]
        f = {"copy.copy": copy.copy, "copy.deepcopy": copy.deepcopy, "pickle": _pickle_round_trip}[how]
        if isinstance(v, np.ndarray) and v.base is not None:
            v = v.base if b % 2 else v          # the lease object behind a view too
        _checked_call(w, f, [v], {}, how)
    elif kind == 9 and w.values:                # scribble over / read an array dod handed out
        arrays = [v for v in w.values if isinstance(v, np.ndarray)]
        if arrays:
            x = arrays[a % len(arrays)]
            w.log(f"scribble {_short(x)} mode {b % 3}")
            try:
                raw = x.reshape(-1).view(np.uint8) if x.flags.c_contiguous else None
            except OK_ERRORS:
                raw = None
            if raw is not None and raw.size and x.flags.writeable and b % 3:
                raw[:] = np.random.default_rng(b).integers(0, 256, raw.size, dtype=np.uint8) \
                    if b % 3 == 1 else 0xFF
            else:
                float(np.asarray(x, dtype=object).size)
    elif kind == 10 and w.objs:                 # drop a reference (frees what only it kept)
        gone = w.objs.pop(a % len(w.objs))
        w.log(f"del {type(gone).__name__}")
        del gone
        if b % 3 == 0 and w.values:
            w.values.pop(b % len(w.values))
        import gc
        gc.collect()
    elif kind == 11:                            # the bounded ops
        loops = [o for o in w.objs if type(o).__name__ == "Loop"]
        if loops:
            lp = loops[a % len(loops)]
            n = [0, 1, 3, None][b % 4]
            kw = {"duration": 0.001} if n is None else {}
            _checked_call(w, lp.run, [n] if n is not None else [], kw, "Loop.run", extra_ok=EXTRA_OK["Loop"])


def check_all(w):
    for o in list(w.objs):
        chk = getattr(o, "check", None)
        if callable(chk):
            try:
                chk()
            except InvariantError:
                raise
            except OK_ERRORS + EXTRA_OK.get(type(o).__name__, ()):
                pass                    # (RingProducer.check re-raises its producer's error)


def worker():
    """Read programs (JSON lines) from stdin; answer one line each."""
    sanitize = os.environ.get("DOD_BUILD") == "sanitize"
    if not sanitize:
        import resource as rlim            # huge-but-feasible sizes fail fast instead of eating the machine
        lim = 8 << 30
        rlim.setrlimit(rlim.RLIMIT_AS, (lim, lim))
    for line in sys.stdin:
        program = json.loads(line)

        def log(msg):
            sys.stderr.write(msg + "\n")
            sys.stderr.flush()

        log("=== program")
        w = World(log, sanitize)
        verdict = "ok"
        try:
            for op in program:
                run_op(w, op)
                check_all(w)
            w.close()
        except BaseException as e:          # noqa: BLE001  (anything but the documented errors)
            import traceback
            log(traceback.format_exc())
            verdict = f"{type(e).__name__}: {e}"
        del w
        import gc
        gc.collect()
        sys.stdout.write(json.dumps(verdict) + "\n")
        sys.stdout.flush()


# ---------------------------------------------------------------- the parent side

class Worker:
    def __init__(self, log=None):
        self.log = log or os.environ.get("DOD_FUZZ_LOG", f"/tmp/dod-fuzz-{os.getpid()}.log")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([dod.get_include(), str(HERE)]))
        self.p = subprocess.Popen([sys.executable, "-P", "-c", "import test_fuzz_api as t; t.worker()"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.log, "w"),
                                  text=True, env=env, cwd=str(HERE.parent))

    def run(self, program):
        """None, or why the program failed (with the child's log of it)."""
        with open(self.log) as f:
            f.seek(0, 2)
            start = f.tell()
        try:
            self.p.stdin.write(json.dumps(program) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.p.stdout], [], [], WORKER_TIMEOUT)
        line = self.p.stdout.readline() if ready else ""
        if ready and line:
            verdict = json.loads(line)
            if verdict == "ok":
                return None
            why = f"unexpected exception {verdict}"
        elif not ready:
            why = f"hang: no answer within {WORKER_TIMEOUT} s"
            self.p.kill()
        else:
            self.p.wait(timeout=30)
            why = f"the child died (exit status {self.p.returncode})"
        self.p.wait(timeout=30) if why.startswith("hang") else None
        with open(self.log) as f:
            f.seek(start)
            tail = f.read()[-6000:]
        return f"{why}\n--- call log (last part) ---\n{tail}"

    def close(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            self.p.wait(timeout=60)


_worker = None
_first_failure = None           # when the first failing program was seen (bounds the shrinking)
SHRINK_BUDGET = float(os.environ.get("DOD_FUZZ_SHRINK_S", "60"))


def _get_worker():
    global _worker
    if _worker is None or _worker.p.poll() is not None:
        _worker = Worker()
    return _worker


@pytest.fixture(scope="module", autouse=True)
def _close_worker():
    yield
    if _worker is not None:
        _worker.close()


op = st.tuples(st.integers(0, len(KINDS) - 1), st.integers(0, 1 << 20), st.integers(0, 1 << 20))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(op, min_size=4, max_size=MAX_OPS))
def test_random_call_sequences_never_crash_hang_or_corrupt(program):
    global _first_failure
    if _first_failure is not None and time.monotonic() - _first_failure > SHRINK_BUDGET:
        return          # out of shrinking time: hypothesis reports the smallest failure found so far
    w = _get_worker()
    failure = w.run(program)
    if failure is not None:
        if _first_failure is None:
            _first_failure = time.monotonic()
        pytest.fail(failure, pytrace=False)


def test_every_public_name_is_fuzzed():
    """A new public class or function needs its entry in TARGETS (or a reason in NOT_FUZZED)."""
    names = public_names()
    missing = sorted(n for n in names if n not in TARGETS and n not in NOT_FUZZED and n not in ALIASES)
    assert not missing, f"add these to TARGETS in {__file__}: {missing}"
    for alias, home in ALIASES.items():
        assert resolve(alias) is resolve(home)
    stale = sorted(n for n in TARGETS if n not in names)
    assert not stale, f"TARGETS names that are not public any more: {stale}"


def test_the_worker_reports_a_crash_with_its_call_log(tmp_path):
    """The harness itself: a child that dies is a failure naming the last call."""
    w = Worker(str(tmp_path / "log"))
    try:
        w.p.stdin.write("[[\"crash\"]]\n")          # run_op cannot unpack this: an unexpected exception
        w.p.stdin.flush()
        line = w.p.stdout.readline()
        assert "ValueError" in json.loads(line) or "TypeError" in json.loads(line)
        w.p.stdin.write("!\n")                       # not JSON: the child dies with a traceback
        w.p.stdin.flush()
        assert w.run([[0, 0, 0]]).startswith("the child died")
    finally:
        w.p.kill()
        w.p.wait()
