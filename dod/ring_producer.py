"""A producer thread that fills :class:`dod.ring.Ring` slots from an iterable.

The other half of the ring's hand-off for a consumer that runs on a deadline
(a tick): the producer (a scenario generator, a file reader, a socket) runs
in one thread, made once, and writes each item into the next free slot; the
consumer takes committed slots in order. Memory is the ring's fixed slots
whatever the duration: when the ring is full the producer waits (without the
GIL, inside ``Ring.acquire_write``) until the consumer releases one
(back-pressure). The hand-off itself allocates nothing and takes no lock: it
is the ring's two atomic counters (see :mod:`dod.ring`).

>>> import numpy as np
>>> from dod.ring import Ring
>>> from dod.ring_producer import RingProducer
>>> ring = Ring(slots=4, rows=100, row_shape=2, dtype=np.float64)
>>> def fill(k):                                   # runs in the producer thread
...     with producer.write(ring) as slot:
...         slot.write(np.full((k, 2), float(k)))
>>> producer = RingProducer(ring, range(1, 21), fill)
>>> rows = 0
>>> with producer:                                 # starts the thread
...     while (slot := producer.take()) is not None:   # None: end of the stream
...         rows += slot.count                     # use slot.rows here
...         ring.release()
>>> rows, producer.produced
(210, 20)

``fill(item)`` runs in the producer thread for each item and writes it into
the ring(s) it feeds (``with ring.write() as slot: slot.write(...)``; use
:meth:`RingProducer.write` instead so that :attr:`parked` tells when it waits).
One producer may feed several rings (a scan and its ground truth); the first
is the one :meth:`take` reads by default.

Batched refills (``batched=True``)
    By default a producer parked on a full ring wakes at every release and
    draws the next item at once, while the consumer's next tick may be
    running. A Python producer needs the GIL to draw it, and a consumer
    whose tick ends its nogil section while the producer holds the GIL
    waits for it (5 ms switch interval; longer when the OS has preempted
    the producer on a loaded machine). With ``batched=True`` the producer,
    once the first ring is full, waits until the consumer calls
    :meth:`refill` (in its slack between ticks) and then fills the ring up
    again: the drawing happens where the consumer is idle. A :meth:`take`
    that finds the ring empty calls :meth:`refill` itself, so a consumer
    that never calls it is slower, never stuck.

Idle priority (``idle=True``)
    The producer thread runs in the OS's idle scheduling class (Linux
    ``SCHED_IDLE``): it gets a core only when no ordinary thread of the
    machine wants it, so it never preempts the consumer or the consumer's
    worker threads (a preempted OpenMP worker stalls a whole parallel
    region), and it draws its items in their slack. On 2 cores, with the
    tracker's tick at 100,000 targets on two OpenMP threads and a numpy
    producer drawing ~9 ms of CPU per scan, this halved the demo's missed
    deadlines. The price: on a machine whose cores ordinary work keeps
    busy the producer starves, and the consumer then waits on an empty
    ring (the ring, not the consumer's thread, absorbs how far behind it
    is). Where the class does not exist or the OS refuses it, the producer
    runs at the priority it inherited (:attr:`idle_applied` says which).

Shutdown (the one place the producer's lifetime rule lives)
    * End of items: every ring is closed; the consumer drains what was
      committed, then :meth:`take` returns None.
    * An exception in the producer (in ``items`` or ``fill``): stored in
      :attr:`error`, every ring closed; the consumer drains what was
      committed before it, then :meth:`take` raises it in the consumer's
      thread (with a note naming the producer thread), and so does
      :meth:`check` at any time. Nothing hangs: a consumer waiting on an
      empty ring is woken by the close.
    * :meth:`close` (the consumer, Ctrl-C, end of run; also ``__exit__``):
      asks the producer to stop, closes every ring (a producer waiting for a
      free slot wakes with RingClosed, which is a stop, not an error) and
      joins the thread. A producer busy inside ``next(items)`` stops after
      that item; close waits up to ``timeout`` seconds for it. The thread is
      a daemon, so one stuck in foreign code never keeps the process alive.

Bounded waits
    Every wait takes ``timeout`` (seconds; TimeoutError when it runs out).
    With ``timeout=None`` :meth:`take` waits as long as the producer can
    still deliver, and raises :class:`dod.errors.StallError` (a
    TimeoutError, with both sides' state) when it cannot: the thread was
    never started, or the producer is parked on another of its rings that
    is full while the ring taken from is empty (only the consumer, which is
    waiting here, could release that ring's slots: a truth ring left
    undrained). Ctrl-C interrupts a wait.

Thread-safety
    One consumer thread calls :meth:`take` (and releases through the ring);
    :meth:`close`, :meth:`check`, :attr:`error`, :attr:`parked` and
    :attr:`produced` may be used from any thread. The object is not
    re-startable: make a new one (the rings are closed for good).
"""
import contextlib
import functools
import os
import threading
import time

import dod
from dod.errors import StallError
from dod.ring import Ring, RingClosed


def idle_priority():
    """Move the calling thread into the OS's idle scheduling class (Linux ``SCHED_IDLE``).

    Such a thread gets a core only when no ordinary thread wants it (the
    module docstring says what that buys and costs).

    Returns
    -------
    bool
        True when the thread now runs so; False where the class does not
        exist or the OS refuses (the thread keeps the priority it had).

    Notes
    -----
    Thread-safety: changes the calling thread only.
    """
    if not hasattr(os, "SCHED_IDLE"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))   # this thread only (Linux: 0 is the caller)
    except OSError:
        return False
    return True


class RingProducer:
    """RingProducer(rings, items, fill, *, name="dod-ring-producer", start=False, batched=False, cpus="initial", idle=False)

    Fill one or more rings from `items` in a producer thread.

    Parameters
    ----------
    rings : Ring or sequence of Ring
        The first is what :meth:`take` reads.
    items : iterable
        Iterated in the producer thread only.
    fill : callable
        ``fill(item)`` runs in the producer thread and writes the item (with
        :meth:`write`).
    name : str, default "dod-ring-producer"
        The thread's name.
    start : bool, default False
        Start the thread now (otherwise :meth:`start` or ``with``).
    batched : bool, default False
        On a full first ring, wait for :meth:`refill` (module docstring).
    cpus : "initial", None or collection of int, default "initial"
        Where the producer thread runs: "initial", the CPUs the process had
        when dod was first imported (``dod.initial_cpus``), so that a thread
        pinned to one core for its deadline (``Loop(cpu=...)``, or libgomp's
        ``OMP_PROC_BIND``) does not pass its pin on to the producer, which
        would then compete with it there; None: inherit the starting thread's;
        or a collection of CPU numbers. When the OS refuses "initial", the
        thread keeps the inherited CPUs; when it refuses CPUs you gave, that is
        the producer's error (raised by :meth:`take`).
    idle : bool, default False
        Run the producer thread at idle priority (module docstring);
        :attr:`idle_applied` is True once the thread runs so.

    Raises
    ------
    TypeError
        For a non-Ring, an empty sequence or a `fill` that is not callable.
    TypeError, ValueError
        For `cpus` that are not CPU numbers. Nothing is started.

    Notes
    -----
    Thread-safety: one consumer thread calls :meth:`take` (and releases
    through the ring); :meth:`close`, :meth:`check`, :attr:`error`,
    :attr:`parked` and :attr:`produced` may be used from any thread. Not
    re-startable: make a new one (the rings are closed for good). The module
    docstring describes shutdown.
    """

    def __init__(self, rings, items, fill, *, name="dod-ring-producer", start=False, batched=False,
                 cpus="initial", idle=False):
        rings = (rings,) if isinstance(rings, Ring) else tuple(rings)
        if not rings or not all(isinstance(r, Ring) for r in rings):
            raise TypeError("rings must be a dod.ring.Ring or a non-empty sequence of them")
        if not callable(fill):
            raise TypeError("fill must be callable")
        self._cpus_given = not isinstance(cpus, str)
        if isinstance(cpus, str):
            if cpus != "initial":
                raise ValueError(f'cpus must be "initial", None or CPU numbers, not {cpus!r}')
            cpus = dod.initial_cpus
        elif cpus is not None:
            try:
                cpus = frozenset(cpus)
            except TypeError:
                raise TypeError(f'cpus must be "initial", None or a collection of CPU numbers, not {cpus!r}') \
                    from None
            if not cpus or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
                raise ValueError(f"cpus must hold CPU numbers (ints >= 0), not {sorted(cpus, key=repr)!r}")
        self.cpus = cpus
        self.rings = rings
        self.ring = rings[0]
        self._items = items
        self._fill = fill
        self._stop = False
        self._parked = False
        self._started = False
        self._batched = bool(batched)
        if not isinstance(idle, bool):
            raise TypeError(f"idle must be True or False, not {idle!r}")
        self.idle = idle
        self.idle_applied = False    # set by the thread once it runs at idle priority
        self._go = threading.Event()     # batched: the consumer's refill()
        self.error = None            # the producer's exception, once it raised
        self._surfaced = False       # error raised by take() or check() already
        self.produced = 0            # items filled (fill returned) so far
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        # the stall test of a take() on each ring, made once
        self._stall_tests = tuple(functools.partial(self._stalled, r) for r in rings)
        if start:
            self.start()

    # ------------------------------------------------------------ producer side

    def start(self):
        """Start the producer thread.

        Returns
        -------
        RingProducer
            ``self``.

        Raises
        ------
        RuntimeError
            The second time (make a new producer).

        Notes
        -----
        Thread-safety: call it once, from the thread that owns the producer.
        """
        if self._started:
            raise RuntimeError("this RingProducer was already started (make a new one)")
        self._started = True
        self._thread.start()
        return self

    @contextlib.contextmanager
    def write(self, ring=None, timeout=None):
        """Producer thread, inside ``fill``: ``with p.write(ring) as slot:``.

        Parameters
        ----------
        ring : Ring, optional
            Default the first ring.
        timeout : float, optional
            Seconds (None: no bound) for the whole wait, a batched wait for
            :meth:`refill` included.

        Returns
        -------
        context manager
            ``ring.write(timeout)``, which sets :attr:`parked` while it waits
            for a free slot.

        Raises
        ------
        TimeoutError, RingClosed, RuntimeError, BufferError
            As :meth:`dod.ring.Ring.write`; TimeoutError after `timeout`.

        Notes
        -----
        Thread-safety: the producer thread only.
        """
        ring = self.ring if ring is None else ring
        if timeout is not None:
            timeout = float(timeout)
            if not (timeout >= 0.0 and timeout < 1e9):
                raise ValueError(f"timeout must be None or a number of seconds >= 0, not {timeout!r}")
            deadline = time.monotonic() + timeout
        self._parked = True
        try:
            if self._batched and ring is self.ring and len(ring) >= ring.slots:
                # the GIL released; refill(), take() on empty or close() set it
                if not self._go.wait(timeout):
                    raise TimeoutError(f"no refill() within {timeout} s (batched producer); "
                                       f"state {ring.state()}")
                self._go.clear()
                if timeout is not None:
                    timeout = max(0.0, deadline - time.monotonic())
            slot = ring.acquire_write(timeout)
        finally:
            self._parked = False
        try:
            yield slot
        except BaseException:
            slot = None
            try:
                ring.abort()
            except BufferError:
                pass        # a traceback still holds a view; the ring is closed on the way out anyway
            raise
        slot = None
        ring.commit()

    def _run(self):
        items = self._items
        try:
            if self.cpus is not None:
                try:
                    os.sched_setaffinity(0, self.cpus)   # this thread only (Linux: 0 is the caller)
                except OSError:
                    if self._cpus_given:
                        raise
                    # "initial" refused (a sandbox, a cpuset changed since): keep the inherited CPUs
            if self.idle:
                self.idle_applied = idle_priority()
            for item in items:
                if self._stop:
                    break
                self._fill(item)
                item = None
                self.produced += 1
        except RingClosed:
            # Closed under a waiting or writing producer: by close() (a stop),
            # or by whoever closed the ring directly (the stream's end, too).
            pass
        except BaseException as e:
            e.add_note(f"(raised in the producer thread {self._thread.name!r} of a dod RingProducer)")
            self.error = e
        finally:
            self._parked = False
            for r in self.rings:
                r.close()
            close = getattr(items, "close", None)     # a generator: run its finally blocks here
            if close is not None:
                try:
                    close()
                except BaseException as e:
                    if self.error is None and not self._stop:
                        self.error = e

    # ------------------------------------------------------------ consumer side

    def take(self, ring=None, timeout=None):
        """Consumer: the oldest committed slot of `ring`.

        ``ring.acquire_read(timeout)``, with the producer's failure surfaced.
        Release the slot with ``ring.release()``.

        Parameters
        ----------
        ring : Ring, optional
            Default the first ring.
        timeout : float, optional
            Seconds to wait (None: no limit while the wait can end, 0: do
            not wait).

        Returns
        -------
        Slot or None
            None at the end of the stream.

        Raises
        ------
        Exception
            The producer's own exception, when it failed (instead of None at the
            end of the stream).
        TimeoutError, RuntimeError
            As :meth:`dod.ring.Ring.acquire_read`.
        StallError
            (a TimeoutError) When the wait can never end (module docstring),
            with both sides' state; nothing changes then.

        Notes
        -----
        Thread-safety: one consumer thread.
        """
        r = self.ring if ring is None else ring
        i = 0
        for x in self.rings:             # (no allocation per call: the demo takes a slot per tick)
            if x is r:
                break
            i += 1
        else:
            raise ValueError("ring must be one of this producer's rings")
        if self._batched and len(r) == 0:
            self._go.set()               # about to wait: never for a producer waiting for us
        if not self._started and len(r) == 0 and not r.closed and timeout != 0:
            raise StallError(f"take() would wait forever: the producer thread was never started "
                             f"(call start(), or use the producer as a context manager); "
                             f"ring state {r.state()}")
        slot = r.acquire_read(timeout, stall=self._stall_tests[i])
        if slot is None and self.error is not None:
            self._surfaced = True
            raise self.error
        return slot

    def _stalled(self, taken):
        """Why a consumer waiting on the empty ring `taken` can never get a
        slot, or None (called by the ring between chunks of the wait)."""
        if not self._thread.is_alive():
            return None                  # ended: the rings are closed, the wait ends by itself
        for other in self.rings:
            if other is taken:
                continue
            st = other.state()
            if st["producer"] == "waiting" and st["in_flight"] >= st["slots"] and len(taken) == 0:
                return (f"the producer is parked on another ring that is full ({other!r}: producer "
                        f"side {st}) while this ring is empty; only the consumer, waiting here, can "
                        f"release that ring's slots (release them before taking)")
        return None

    def refill(self):
        """Consumer (``batched=True``): let a producer parked on the full first ring
        fill it up again now.

        Notes
        -----
        No effect without ``batched``. Thread-safety: any thread.
        """
        self._go.set()

    def check(self):
        """Raise the producer's exception, if it raised one.

        Raises
        ------
        Exception
            The producer's exception.

        Notes
        -----
        Thread-safety: any thread.
        """
        if self.error is not None:
            self._surfaced = True
            raise self.error

    @property
    def parked(self):
        """True while the producer waits in :meth:`write` for a free slot
        (it then holds no item's temporaries: a quiet moment to measure)."""
        return self._parked

    @property
    def alive(self):
        """True while the producer thread runs."""
        return self._thread.is_alive()

    def close(self, timeout=5.0):
        """Stop the producer, close every ring, join the thread.

        Parameters
        ----------
        timeout : float or None, default 5.0
            Seconds to wait for the thread to end (None: no limit).

        Returns
        -------
        bool
            True when the thread has ended (or never started).

        Notes
        -----
        Idempotent; does not raise the producer's error (see :meth:`check`).
        Thread-safety: any thread.
        """
        self._stop = True
        for r in self.rings:
            r.close()
        self._go.set()                   # a batched producer waiting for refill() wakes
        if self._started and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self):
        """Start the thread (if not yet); ``__exit__`` closes, and raises the
        producer's error when the block ended normally without seeing it.

        Returns
        -------
        RingProducer
            ``self``.
        """
        if not self._started:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        if exc_type is None and not self._surfaced:
            self.check()             # an error the block never saw (it stopped taking early)
        return False

    def __repr__(self):
        state = ("failed" if self.error is not None else "running" if self.alive
                 else "done" if self._started else "not started")
        return f"<dod.RingProducer {state}, {self.produced} produced, {len(self.rings)} ring(s)>"
