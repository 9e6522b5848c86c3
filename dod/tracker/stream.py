"""The demo's input pipeline: a seeded scenario's scans through bounded rings.

:class:`ScanStream` runs ``scenario.iter_scans`` in one producer thread
(:class:`dod.ring_producer.RingProducer`, made once) that writes each scan's
detections into a :class:`dod.ring.Ring` of fixed slots; the tick takes the
oldest slot and hands ``slot.rows`` (a view made once per slot) and
``slot.time`` (the scan's time stamp, ``s * dt`` for scan s; ``slot.dt``
holds the step) to ``Tracker.tick(rows, time=...)``, then releases it: no allocation and no lock
per scan on the hand-off, and memory bounded by the slots for any duration.
When the ring is full the producer waits without the GIL (back-pressure)
until the consumer calls :meth:`refill` between chunks (``batched``, see
:mod:`dod.ring_producer`).

The ground truth that GOSPA and the plot need travels in a second ring, one
slot per sampled scan (every ``sample_every``-th and the last), each row
(id, x, y[, z]), written before the scan's detections: once the tick has
taken scan s, the truth of s is already committed. With ``window=w`` the
producer keeps only the targets inside the centred square (cube) of
half-side w, as the demo's GOSPA and plot look at no others: at 100,000
targets the loop thread no longer cuts 100,000 rows down to ~2,000 at
each sample (:meth:`alive_of` still gives every target alive). That ring has
``slots // sample_every + 3`` slots, one more than the producer can fill
while the consumer drains the truth once per ``sample_every`` scans, so the
two rings never wait on each other.

Shutdown and errors: see :mod:`dod.ring_producer` (end of scenario, an
exception in the producer raised in the consumer's thread, :meth:`close`).
Thread-safety: one consumer thread (the tick's) uses take / release_scan /
truth_of / release_truth.
"""
import numpy as np

from dod.ring import Ring
from dod.ring_producer import RingProducer
from dod.tracker.scenario import iter_radar_scans, iter_scans, radar_sensors


class ScanStream:
    """ScanStream(targets, scans, *, rows, slots, sample_every, dim=2, radar=False, idle=True, window=None, **scenario)

    Scans of ``iter_scans(targets, scans, dim=dim, **scenario)`` (with
    ``radar=True``: ``iter_radar_scans``, each scan's sensor in
    :attr:`sensors`, ``sensors[tag % len(sensors)]``) through a ring.

    Parameters
    ----------
    targets, scans : int
        The scenario's size: targets, and scans to produce.
    rows
        most detections a scan may hold (the tracker's max_detections);
        a scan with more makes the producer fail with ValueError.
    slots
        scan slots (how far the producer may run ahead).
    sample_every
        the truth of every this many scans (and of the last) is kept.
    idle
        the producer thread runs at idle priority (``RingProducer(idle=...)``):
        it draws in the tick's slack and never preempts the tick's workers.
    window
        None, or w > 0: a truth slot holds only the targets with
        ``|position| <= w`` on every axis.
    dim : int, default 2
        2 or 3 spatial dimensions.
    radar : bool, default False
        Range-bearing scans (``iter_radar_scans``) instead of Cartesian ones.
    **scenario
        Passed on to the scenario generator.

    Raises
    ------
    ValueError
        For rows, slots or sample_every below 1, or a window that is not
        None or a number > 0.

    Notes
    -----
    Call :meth:`start`; the consumer calls :meth:`take` (a Slot, or None at
    the end), ``release_scan()`` after the tick, and between ticks
    :meth:`truth_of` / ``release_truth()``. :meth:`close` ends it.
    Thread-safety: one producer thread (its own) and one consumer thread;
    :meth:`close` and :meth:`quiet` from any thread.
    """

    def __init__(self, targets, scans, *, rows, slots, sample_every, dim=2, radar=False, idle=True,
                 window=None, **scenario):
        if sample_every < 1 or slots < 1 or rows < 1:
            raise ValueError("rows, slots and sample_every must be >= 1")
        if window is not None and not window > 0:
            raise ValueError(f"window must be None or a number > 0, not {window!r}")
        self.total = int(scans)
        self.sample_every = int(sample_every)
        self.window = window
        self.scans = Ring(slots, rows, (dim,), np.float64)
        self.truth = Ring(slots // self.sample_every + 3, max(1, int(targets)), (dim + 1,), np.float64)
        # Targets alive at the scan of each truth slot, by slot index: the
        # producer writes it before the commit, the consumer reads it while
        # it holds the slot.
        self._alive = np.zeros(self.truth.slots, dtype=np.int64)
        self._truth_held = None
        # radar: range-bearing scans (scenario.iter_radar_scans), scan s from
        # sensors[s % len(sensors)]; the consumer reads s from slot.tag.
        self.sensors = tuple(radar_sensors(targets, dim=dim, **scenario)) if radar else None
        scans_of = iter_radar_scans if radar else iter_scans
        items = enumerate(scans_of(targets, scans, dim=dim, **scenario))
        # batched: the producer refills the ring when the demo says so, between
        # chunks, not at each release while the next tick may be running.
        self.producer = RingProducer((self.scans, self.truth), items, self._fill,
                                     name="dod-tracker-scans", batched=True, idle=idle)
        self.refill = self.producer.refill
        self.release_scan = self.scans.release

    def is_sampled(self, s):
        """Whether the truth of scan `s` is kept (every sample_every-th and the last).

        Parameters
        ----------
        s : int
            A scan index.

        Returns
        -------
        bool

        Notes
        -----
        Thread-safety: any thread (a pure function of the settings).
        """
        return (s + 1) % self.sample_every == 0 or s == self.total - 1

    def _fill(self, item):                                  # the producer thread
        # No local but the item survives to the wait for a scan slot: the
        # producer parks holding the same blocks whichever scan it holds, so
        # the demo's process-wide block count taken then is the tick's own.
        s, scan = item
        if self.sensors is not None and scan.sensor != self.sensors[s % len(self.sensors)]:
            raise RuntimeError(f"radar scan {s} is not from sensor {s % len(self.sensors)}")
        if self.is_sampled(s):
            self._fill_truth(s, scan)
        with self.producer.write(self.scans) as slot:
            slot.write(scan.detections, time=s * scan.dt, dt=scan.dt, tag=s)

    def _fill_truth(self, s, scan):
        ids, pos = scan.truth_ids, scan.truth_pos
        if self.window is not None:
            inside = (np.abs(pos) <= self.window).all(axis=1)
            ids, pos = ids[inside], pos[inside]
        m = ids.shape[0]
        with self.producer.write(self.truth) as t:
            t.count = m
            t.data[:m, 0] = ids
            t.data[:m, 1:] = pos
            t.tag = s
            self._alive[t.index] = scan.truth_ids.shape[0]

    def start(self):
        """Start the producer thread; returns the stream. Thread-safety: once, from the consumer."""
        self.producer.start()
        return self

    def take(self, timeout=None):
        """The next scan's slot: rows, dt, tag = the scan index.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (TimeoutError after); None waits as long
            as the producer can deliver.

        Returns
        -------
        dod.ring.Slot or None
            None at the end of the stream.

        Raises
        ------
        Exception
            The producer's exception, if it failed.
        TimeoutError
            After `timeout`.
        StallError
            (a TimeoutError, with both rings' state) When the wait cannot
            end: the stream was never started, or the producer is parked on
            a full truth ring (the consumer must drain it: :meth:`truth_of` /
            :meth:`release_truth` or :meth:`drop_truth` for every sampled
            scan).

        Notes
        -----
        Thread-safety: the consumer thread (the one that ticks).
        """
        return self.producer.take(timeout=timeout)

    def truth_of(self, s):
        """The held truth slot of scan `s`; never waits.

        Older truth slots are released on the way.

        Parameters
        ----------
        s : int
            A scan index.

        Returns
        -------
        dod.ring.Slot or None
            Rows (id, x, y[, z]), count = targets alive; None when `s` is not
            sampled or not yet produced.

        Notes
        -----
        Thread-safety: the consumer thread (the one that ticks).
        """
        while True:
            slot = self._truth_held
            if slot is None:
                if len(self.truth) == 0:
                    return None
                slot = self.truth.acquire_read(0)
                if slot is None:
                    return None
                self._truth_held = slot
            if slot.tag == s:
                return slot
            if slot.tag > s:
                return None                                 # keep it for its own scan
            self.release_truth()

    def alive_of(self, slot):
        """Targets alive at the scan of a truth slot (all of them: with a window, more than its rows).

        Parameters
        ----------
        slot : dod.ring.Slot
            One that :meth:`truth_of` returned.

        Returns
        -------
        int

        Notes
        -----
        Thread-safety: the consumer thread (the one that ticks).
        """
        return int(self._alive[slot.index])

    def release_truth(self):
        """Release the truth slot that :meth:`truth_of` returned (its arrays must be gone).

        Raises
        ------
        BufferError
            While a view of the slot's arrays is alive.

        Notes
        -----
        Thread-safety: the consumer thread (the one that ticks).
        """
        if self._truth_held is not None:
            self._truth_held = None
            self.truth.release()

    def drop_truth(self, s):
        """Release the truth of scan `s` (and older) unread: a skipped sample.

        Parameters
        ----------
        s : int
            A scan index.

        Returns
        -------
        int or None
            The targets alive at `s`; None when `s` had no truth slot.

        Notes
        -----
        Thread-safety: the consumer thread (the one that ticks).
        """
        slot = self.truth_of(s)
        if slot is None:
            return None
        alive = self.alive_of(slot)
        slot = None
        self.release_truth()
        return alive

    def quiet(self):
        """Whether the producer holds no temporaries of a scan in progress.

        Returns
        -------
        str or None
            "parked" (waiting for a free slot, holding one drawn scan) or "done"
            (the thread ended), else None: process-wide allocation counts taken at
            two moments of the same state see the consumer's own.

        Notes
        -----
        Thread-safety: any thread.
        """
        return "done" if not self.producer.alive else "parked" if self.producer.parked else None

    def close(self, timeout=5.0):
        """Stop the producer and close both rings (idempotent).

        Parameters
        ----------
        timeout : float or None, default 5.0
            Seconds to wait for the producer thread (None: no limit).

        Returns
        -------
        bool
            True when the producer thread has ended.

        Notes
        -----
        Thread-safety: any thread.
        """
        return self.producer.close(timeout)
