"""Ring section of ``python -m dod.bench``: hand-off cost per item of dod.ring
against queue.Queue and collections.deque with a lock, same run, and the
bytes each allocates per item.

One item is a scan of ROWS x 2 float64: the ring copies it into a slot
allocated once (Python face: ``slot.write(z)``; engine: a nogil loop), the
queues pass a reference to a ready-made array (they would need a fresh
array per scan in a real pipeline, which is not counted here). Kernels:
dod/bench/_ring_kernels.pyx.
"""
import collections
import queue
import threading
import time
import tracemalloc

import numpy as np

from dod.bench import Section, median_of

ROWS = 32
SLOTS = 8


def _ring():
    from dod.ring import Ring
    return Ring(SLOTS, ROWS, 2)


class _DequeLock:
    """What one writes without dod: a bounded deque behind a Condition."""

    def __init__(self, maxlen):
        self.items = collections.deque()
        self.maxlen = maxlen
        self.cond = threading.Condition(threading.Lock())

    def put(self, x):
        with self.cond:
            while len(self.items) >= self.maxlen:
                self.cond.wait()
            self.items.append(x)
            self.cond.notify()

    def get(self):
        with self.cond:
            while not self.items:
                self.cond.wait()
            x = self.items.popleft()
            self.cond.notify()
            return x


def _python_pair(kind):
    """(put(z), get() -> something) for one of the Python-level hand-offs."""
    if kind == "ring":
        r = _ring()

        def put(z):
            s = r.acquire_write()
            s.write(z)
            r.commit()

        def get():
            s = r.acquire_read()
            s.count
            r.release()
        return put, get, r
    if kind == "queue":
        q = queue.Queue(SLOTS)
        return q.put, q.get, q
    if kind == "deque":
        d = _DequeLock(SLOTS)
        return d.put, d.get, d
    raise ValueError(kind)


STALL_NS = 20_000_000_000      # a wait this long in a hand-off of microseconds is a stall, not a wait


def _stall_report(K, r, n, got, rc, produced):
    """What a stalled two-thread engine hand-off says instead of hanging."""
    def what(code, awaited):
        return {K.LOST_WAKE_UP: f"a lost wake-up (the {awaited} it waited for was there)",
                K.TIMEOUT: f"no {awaited} in {STALL_NS / 1e9:g} s",
                K.CLOSED: "end of stream", K.OK: "done"}.get(code, f"code {code}")
    _, committed, prc = produced
    epoch, wait_read, wait_write = K.wait_state(r)
    return (f"ring hand-off stalled after {got} of {n} items: consumer: {what(rc, 'scan')}; producer "
            f"({committed} committed): {what(prc, 'free slot')}; epoch {epoch}, wait_read {wait_read}, "
            f"wait_write {wait_write}; {r.stats()}")


def engine_pair(r, n, width, timeout_ns):
    """Send n items from a producer thread to this one through a ring's engine.

    Every wait is bounded by `timeout_ns`; then the ring is closed (which frees
    a producer still waiting after a stall) and the thread joined.

    Parameters
    ----------
    r : Ring
        The ring (its rows at least `width` doubles).
    n : int
        Items.
    width : int
        Doubles per item.
    timeout_ns : int
        The bound of every wait, in nanoseconds.

    Returns
    -------
    got : int
        Items the consumer took.
    rc : int
        The consumer's last return code.
    producer : tuple
        (ns, items committed, the producer's last return code); all went
        through when the result is ``(n, CLOSED, (ns, n, OK))``.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    from dod.bench import _ring_kernels as K
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("p", K.produce(r, n, width, timeout_ns)))
    t.start()
    got, _, _, rc = K.consume(r, width, timeout_ns)
    r.close()
    t.join()
    return got, rc, out["p"]


def handoff_ns(kind, threads, n, slots=SLOTS):
    """Nanoseconds per item handed through one kind of queue.

    Parameters
    ----------
    kind : str
        ``"engine"``, ``"ring"``, ``"queue"`` or ``"deque"``.
    threads : int
        1 (put then get on this thread) or 2 (a producer thread and this one).
    n : int
        Items.
    slots : int, default SLOTS
        The ring's or queue's slots.

    Returns
    -------
    float
        Nanoseconds per item.

    Raises
    ------
    RuntimeError
        When the two-thread engine hand-off stalls (with a report of both
        sides).

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    z = np.ones((ROWS, 2))
    if kind == "engine":
        from dod.bench import _ring_kernels as K
        from dod.ring import Ring
        r = Ring(slots, ROWS, 2)
        if threads == 1:
            return K.one_thread(r, n, ROWS * 2)[0] / n
        t0 = time.perf_counter_ns()
        got, rc, produced = engine_pair(r, n, ROWS * 2, STALL_NS)
        if got != n or rc != K.CLOSED:
            raise RuntimeError(_stall_report(K, r, n, got, rc, produced))
        return (time.perf_counter_ns() - t0) / n
    put, get, _ = _python_pair(kind)
    if threads == 1:
        t0 = time.perf_counter_ns()
        for _ in range(n):
            put(z)
            get()
        return (time.perf_counter_ns() - t0) / n

    def producer():
        for _ in range(n):
            put(z)
    t = threading.Thread(target=producer)
    t0 = time.perf_counter_ns()
    t.start()
    for _ in range(n):
        get()
    t.join()
    return (time.perf_counter_ns() - t0) / n


def allocated_bytes_per_item(kind, n=2000):
    """Bytes allocated per item handed through one kind of queue, on one thread.

    Parameters
    ----------
    kind : str
        As :func:`handoff_ns`.
    n : int, default 2000
        Items (the first 10 are a warm-up, not counted).

    Returns
    -------
    float
        The traced bytes allocated (peak above the start, summed over the
        items) per item: 0 means nothing is allocated at all.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    z = np.ones((ROWS, 2))
    put, get, _ = _python_pair(kind)
    for _ in range(100):
        put(z)
        get()
    rises = [0] * n
    tracemalloc.start()
    try:
        for i in range(n):
            cur, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            put(z)
            get()
            _, peak = tracemalloc.get_traced_memory()
            rises[i] = peak - cur
    finally:
        tracemalloc.stop()
    return sum(rises[10:]) / (n - 10)


def run(quick=False):
    """The ring section of ``python -m dod.bench``: the hand-off of a scan through a
    ring against queue.Queue, on one thread and between two, and the bytes
    allocated per item.

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
    RuntimeError
        When a two-thread hand-off stalls.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    rep = 3 if quick else 5
    n_py = 5_000 if quick else 20_000
    n_c = 200_000 if quick else 1_000_000
    sections = []
    for threads in (1, 2):
        where = "one thread, put then get" if threads == 1 else "producer thread -> consumer thread"
        s = Section(f"ring hand-off of a {ROWS}x2 float64 scan, {SLOTS} slots, {where}", "queue.Queue",
                    per="item", goal="hand-off without the GIL and without allocation per item")
        s.add("dod.ring engine (cimport, nogil)", median_of(lambda: handoff_ns("engine", threads, n_c), rep),
              note="copies the scan into the slot")
        if threads == 2:
            s.add("dod.ring engine, 64 slots", median_of(lambda: handoff_ns("engine", 2, n_c, 64), rep),
                  note="fewer sleeps: each wake costs a context switch")
        s.add("dod.ring Python face", median_of(lambda: handoff_ns("ring", threads, n_py), rep),
              note="slot.write(z) copies the scan")
        s.add("queue.Queue", median_of(lambda: handoff_ns("queue", threads, n_py), rep),
              note="passes a reference")
        s.add("collections.deque + Condition", median_of(lambda: handoff_ns("deque", threads, n_py), rep),
              note="passes a reference")
        sections.append(s)
    s = Section("bytes allocated per item (tracemalloc, one thread)", "queue.Queue", per="item",
                goal="0 for the ring")
    for kind, name in (("ring", "dod.ring Python face"), ("queue", "queue.Queue"),
                       ("deque", "collections.deque + Condition")):
        s.add(name, allocated_bytes_per_item(kind), "B")
    sections.append(s)
    return sections
