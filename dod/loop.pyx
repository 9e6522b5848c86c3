"""The fixed-rate loop: run a step at a fixed rate against absolute deadlines.

:class:`Loop` calls ``step()`` once per tick. Tick k is scheduled to start at
``t0 + k * period`` on the monotonic clock (absolute deadlines: lateness never
accumulates), and must end before the next tick's scheduled start (its
deadline). Between ticks the loop sleeps *without the GIL* until the next
start, optionally spinning for the last ``spin`` seconds to cut wake-up
jitter. After every step it resets a scratch :class:`~dod.arena.Arena` (one
store) and records the tick's duration in a histogram allocated once, so the
loop itself allocates nothing per tick.

Overrun policy (a tick ends after its deadline: a *miss*)
    ``overrun="skip"`` (default): the next tick starts at the next slot of the
    original grid still in the future; the slots passed over are counted in
    ``skipped``. The rate is kept, ticks are lost.
    ``overrun="catch_up"``: the missed slots run back to back, without
    sleeping, until the loop is back on its grid. No tick is lost; the ticks
    that catch up start late (see the lateness statistics).

Cyclic GC policy
    ``gc="freeze"`` (default) runs ``gc.freeze()`` and ``gc.disable()`` when the
    loop starts, and ``gc.unfreeze()`` and the previous enabled state when it
    ends, on any exit (an exception from the step or the scratch reset, a
    KeyboardInterrupt, :meth:`Loop.stop`). If the program had already frozen
    objects (``gc.get_freeze_count() > 0``), the loop does not freeze (an
    unfreeze would release the program's frozen objects too) and only
    disables. Some interpreters start that way: a Python 3.12 seen here
    reported 375 frozen objects before any code ran. ``gc="disable"`` only
    disables; ``gc=None`` leaves the collector alone.

Scratch
    The scratch arena is reset after every step. By default the reset is
    checked: if the step keeps a numpy array carved from scratch alive across
    ticks, the reset raises BufferError (and the loop stops) instead of
    handing that memory out again. ``check_scratch=False`` makes it one store,
    and the caller owns the aliasing risk (wrong values, never a crash).
    ``numpy_scratch=True`` also puts numpy's own allocations of the step
    (results and temporaries) in scratch, through a NEP 49 handler installed
    for the step's context (:mod:`dod.numpy_memory`). numpy code replaces
    its state arrays every tick (``self.x = F @ self.x``), so those arrays
    live one tick longer than the temporaries: the numpy scratch is a pair
    of arenas of ``scratch_bytes``, tick k allocating from arena k % 2, which
    is reset (checked, as above) at the end of tick k + 1. Temporaries
    vanish at that reset; an array kept longer is an escape the checked
    reset refuses with BufferError.

Statistics
    :meth:`Loop.stats` reports tick time p50/p99/p99.9/max (histogram bins of
    at most 1/64 relative width; min/max/mean exact), jitter (standard
    deviation of start lateness), misses, skipped slots and the longest run
    of consecutive misses.

Real-time deployment (``lock_memory``, ``cpu``, ``realtime_priority``, ``strict``)
    Each optional: lock the process's memory in RAM (mlockall), pin the loop
    thread to one CPU, run it at a SCHED_FIFO priority. Applied on the loop's
    thread when run() starts and undone when it ends, on any exit (see
    :mod:`dod.realtime`). Bad values raise ValueError when the loop is made;
    an OS refusal raises OSError from run() before the first tick
    (``strict=True``, default) or warns and runs without it
    (``strict=False``). :attr:`Loop.realtime` says which are active.

Thread-safety
    A loop runs on one thread at a time; :meth:`Loop.stop` may be called from
    the step or from another thread (it sets a flag read once per tick).
"""
cimport cython
from cpython.exc cimport PyErr_CheckSignals
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.errno cimport EINTR
from libc.math cimport sqrt
from libc.stdint cimport uint64_t, int64_t
from libc.string cimport memset

from dod.arena cimport Arena, dod_arena_reset
from dod.numpy_memory cimport NumpyHandler

import gc as _gc

from dod.realtime import Realtime as _Realtime

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    ctypedef int clockid_t
    const clockid_t CLOCK_MONOTONIC
    const int TIMER_ABSTIME
    int clock_gettime(clockid_t clk, timespec* tp)
    int clock_nanosleep(clockid_t clk, int flags, const timespec* req, timespec* rem)


cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline bint _sleep_abs(int64_t t, int64_t spin_ns) noexcept nogil:
    """Sleep until monotonic time t (ns), spinning for the last spin_ns.
    False when a signal interrupted the sleep (the caller checks for it and
    sleeps again)."""
    cdef timespec ts
    cdef int64_t wake = t - spin_ns
    if _mono_ns() < wake:
        ts.tv_sec = <time_t>(wake // 1000000000)
        ts.tv_nsec = <long>(wake % 1000000000)
        if clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR:
            return False
    if spin_ns > 0:
        while _mono_ns() < t:
            pass
    return True


def monotonic_ns():
    """The loop's clock: CLOCK_MONOTONIC in nanoseconds.

    Returns
    -------
    int

    Notes
    -----
    Thread-safety: any thread.
    """
    return _mono_ns()


cdef uint64_t _bin_low(int b) noexcept nogil:
    """Smallest value that lands in bin b."""
    cdef int e
    if b < 128:
        return <uint64_t>b
    e = b // 64 + DOD_HIST_SUB_BITS - 1     # b = (e-6)*64 + s with s in [64, 128)
    return (<uint64_t>(b - (e - DOD_HIST_SUB_BITS) * 64)) << (e - DOD_HIST_SUB_BITS)


def _histogram_bin(v):
    """Bin of value v (tests)."""
    return dod_histogram_bin(<uint64_t>v)


def _histogram_bin_low(b):
    """Smallest value in bin b (tests)."""
    return _bin_low(b)


cdef double _hist_quantile(const dod_histogram* h, double q) noexcept nogil:
    """The q-quantile (0..1) of the recorded values: the midpoint of the bin
    holding the ceil(q * total)-th value, clamped to the exact min and max."""
    cdef uint64_t rank, seen = 0
    cdef int b
    cdef double lo, hi, v
    if h.total == 0:
        return 0.0
    rank = <uint64_t>(q * <double>h.total + 0.999999999)
    if rank < 1:
        rank = 1
    if rank > h.total:
        rank = h.total
    for b in range(DOD_HIST_BINS):
        seen += h.counts[b]
        if seen >= rank:
            lo = <double>_bin_low(b)
            hi = <double>_bin_low(b + 1) if b + 1 < DOD_HIST_BINS else lo
            v = lo if hi - lo <= 1.0 else 0.5 * (lo + hi)
            if v < <double>h.min:
                v = <double>h.min
            if v > <double>h.max:
                v = <double>h.max
            return v
    return <double>h.max


cdef int _numpy_step(Loop self, object step) except -1:
    # Tick k's numpy arrays come from arena k % 2; arrays still alive at its
    # end (the step's new state: numpy code replaces its arrays every tick)
    # must be gone by the end of tick k + 1, when that arena is reset again.
    # Two handler objects serve every tick (nothing allocated per tick); a
    # new one only when the handler around the loop changed while the old
    # one still owns arrays of the previous handler.
    cdef list pair = <list>self.numpy_handler
    cdef int k = <int>(self.ticks & 1)
    cdef NumpyHandler h = <NumpyHandler>pair[k]
    cdef Arena previous
    if h._begin() != 0:
        h = NumpyHandler(h.arena)
        pair[k] = h
        h._begin()
    try:
        step()
    finally:
        h._end(False)
    previous = (<NumpyHandler>pair[1 - k]).arena
    if self.check_scratch:
        previous._release_to(0, False)
    else:
        dod_arena_reset(&previous.engine)
    return 0


@cython.final
cdef class Loop:
    """Loop(step, rate=50.0, *, scratch=None, scratch_bytes=1 << 20, spin=0.0, overrun="skip", gc="freeze", check_scratch=True, numpy_scratch=False, clock=None, lock_memory=False, cpu=None, realtime_priority=None, strict=True)

    A fixed-rate loop.

    Parameters
    ----------
    step : callable
        Called as ``step()`` once per tick. Read :attr:`tick` for the tick
        number and :attr:`scratch` for per-tick memory; call :meth:`stop` to
        end the loop after this tick. An exception ends the loop and
        propagates (GC state restored first).
    rate : float
        Ticks per second (> 0).
    scratch : Arena, optional
        The per-tick scratch arena; by default one of ``scratch_bytes``.
    scratch_bytes : int, default 1 << 20
        Size of the scratch arena the loop makes when none is given.
    spin : float
        Seconds before each scheduled start to busy-wait instead of sleeping
        (0 by default; ~0.0002 cuts wake-up jitter at the price of a core).
    overrun : "skip" or "catch_up"
        What happens after a tick misses its deadline (module docstring).
    gc : "freeze", "disable" or None
        Cyclic GC policy while running (module docstring).
    check_scratch : bool
        Checked reset of scratch (BufferError if an array of it outlives the
        tick); False: the unchecked one-store reset.
    numpy_scratch : bool
        numpy's data allocations in the step come from a pair of scratch
        arenas (module docstring); requests that do not fit go to the
        handler in force when the loop runs (counted in
        :attr:`numpy_stats`).
    clock : object, optional
        For tests: an object with ``now() -> int`` (ns) and
        ``sleep_until(t: int)``; the step may advance it. Default: the
        monotonic clock and ``clock_nanosleep`` without the GIL.
    lock_memory : False, True or "onfault"
        mlockall(MCL_CURRENT | MCL_FUTURE) while running ("onfault": pages are
        locked as first touched, MCL_ONFAULT); munlockall after, only if this
        loop locked.
    cpu : int, optional
        Pin the loop thread to this CPU while running (previous affinity restored).
    realtime_priority : int, optional
        Run the loop thread at SCHED_FIFO with this priority
        (``os.sched_get_priority_min/max(os.SCHED_FIFO)``); previous policy restored.
    strict : bool
        An OS refusal of any of the three raises OSError (True) or warns (False).

    Attributes
    ----------
    step : callable
        The step.
    rate : float
        Ticks per second.
    scratch : Arena
        The per-tick scratch arena (reset after every tick).
    running : bool
        True while :meth:`run` runs.
    ticks : int
        Ticks run (all runs since the last :meth:`reset_stats`).
    misses : int
        Ticks that ended after their deadline.
    skipped : int
        Deadline slots skipped (``overrun="skip"``).
    longest_miss_run : int
        The most consecutive missed ticks.
    late_max_ns : int
        The largest start lateness, in nanoseconds.

    Raises
    ------
    ValueError
        For a bad rate, spin, overrun, gc, cpu, priority or lock_memory
        value.
    TypeError
        For a step that is not callable.

    Notes
    -----
    Thread-safety: a loop runs on one thread at a time; :meth:`stop` may be
    called from the step or from another thread (it sets a flag read once
    per tick).
    """

    def __cinit__(self, step, double rate=50.0, *, Arena scratch=None, scratch_bytes=1 << 20,
                  double spin=0.0, overrun="skip", gc="freeze", bint check_scratch=True,
                  bint numpy_scratch=False, clock=None, lock_memory=False, cpu=None,
                  realtime_priority=None, strict=True):
        if not callable(step):
            raise TypeError("step must be callable")
        if not (rate > 0.0 and rate <= 1e9):
            raise ValueError(f"rate must be in (0, 1e9] ticks per second, not {rate!r}")
        if not (spin >= 0.0 and spin * rate <= 1.0):
            raise ValueError(f"spin must be >= 0 and at most one period, not {spin!r}")
        if overrun not in ("skip", "catch_up"):
            raise ValueError(f"overrun must be 'skip' or 'catch_up', not {overrun!r}")
        if gc not in ("freeze", "disable", None):
            raise ValueError(f"gc must be 'freeze', 'disable' or None, not {gc!r}")
        if clock is not None and not (callable(getattr(clock, "now", None))
                                      and callable(getattr(clock, "sleep_until", None))):
            raise TypeError("clock must have now() and sleep_until(t) methods")
        self._realtime = _Realtime(lock_memory, cpu, realtime_priority, strict=strict)
        self.step = step
        self.rate = rate
        self.period_ns = <int64_t>(1e9 / rate + 0.5)
        if self.period_ns < 1:
            self.period_ns = 1
        self.spin_ns = <int64_t>(spin * 1e9)
        self.catch_up = overrun == "catch_up"
        self.gc_mode = gc
        self.check_scratch = check_scratch
        self.clock = clock
        self.scratch = scratch if scratch is not None else Arena(scratch_bytes)
        if numpy_scratch:
            self.numpy_handler = [NumpyHandler(Arena(scratch_bytes)), NumpyHandler(Arena(scratch_bytes))]
        self.hist.counts = <uint64_t*>PyMem_Calloc(DOD_HIST_BINS, sizeof(uint64_t))
        if self.hist.counts == NULL:
            raise MemoryError()

    def __dealloc__(self):
        PyMem_Free(self.hist.counts)
        self.hist.counts = NULL

    cdef int64_t _now(self) except? -1:
        if self.clock is None:
            return _mono_ns()
        return self.clock.now()

    cdef int _sleep_until(self, int64_t t) except -1:
        if self.clock is not None:
            self.clock.sleep_until(t)
            return 0
        cdef bint done = False
        while not done:
            with nogil:
                done = _sleep_abs(t, self.spin_ns)
            # A signal interrupts the sleep: run its Python handler here (Ctrl-C
            # raises KeyboardInterrupt), then sleep on if it did not raise.
            PyErr_CheckSignals()
        return 0

    @property
    def numpy_scratch(self):
        """True when numpy's allocations in the step come from scratch."""
        return self.numpy_handler is not None

    @property
    def numpy_stats(self):
        """Sum of the two numpy scratch handlers' counts (allocations, fallbacks,
        frees, reallocs, live) and their arenas' peak, or None without
        numpy_scratch."""
        if self.numpy_handler is None:
            return None
        total = dict.fromkeys(("allocations", "fallbacks", "frees", "reallocs", "live"), 0)
        for h in self.numpy_handler:
            st = h.stats()
            for key in total:
                total[key] += st[key]
        total["peak"] = max(h.arena.peak for h in self.numpy_handler)
        return total

    @property
    def period(self):
        """Seconds per tick."""
        return self.period_ns / 1e9

    @property
    def tick(self):
        """Ticks run so far (the number of the tick in progress, from 0)."""
        return self.ticks

    @property
    def realtime(self):
        """Real-time options: {"lock_memory", "cpu", "realtime_priority"} as
        active while running (or during the last run: False/None when not
        asked for or refused), "refused" ({option: the OS's reason}) and
        "applied" (in force now)."""
        return self._realtime.report()

    def stop(self):
        """End the loop after the tick in progress (or before the next one).

        Notes
        -----
        Thread-safety: from the step or from any other thread (it sets a flag
        read once per tick).
        """
        self.stop_requested = True

    def run(self, ticks=None, *, duration=None):
        """Run until `ticks` more ticks ran, `duration` seconds passed, or :meth:`stop`.

        With neither limit it runs until :meth:`stop` or an exception.
        Statistics accumulate across runs (see :meth:`reset_stats`).

        Parameters
        ----------
        ticks : int, optional
            Ticks to run (>= 0).
        duration : float, optional
            Seconds to run (>= 0).

        Returns
        -------
        int
            The number of ticks run.

        Raises
        ------
        RuntimeError
            When the loop is already running.
        ValueError
            For a negative limit.
        Exception
            Whatever the step raised, after the GC state is restored.

        Notes
        -----
        Thread-safety: one thread runs a loop at a time; :meth:`stop` may come
        from any thread.
        """
        cdef int64_t n_limit = -1, t_limit = -1
        cdef int64_t start, sched, t0, t1, deadline, late, end_at = 0, slots
        cdef int64_t done = 0
        cdef object step = self.step
        cdef Arena scratch = self.scratch
        if self.running:
            raise RuntimeError("this loop is already running")
        if ticks is not None:
            n_limit = ticks
            if n_limit < 0:
                raise ValueError("ticks must be >= 0")
        if duration is not None:
            if not duration >= 0:
                raise ValueError("duration must be >= 0")
            t_limit = <int64_t>(duration * 1e9)
        was_enabled = _gc.isenabled()
        # unfreeze() cannot tell our frozen objects from the caller's: freeze
        # (and unfreeze afterwards) only when nothing was frozen before.
        froze = False
        freeze = self.gc_mode == "freeze" and _gc.get_freeze_count() == 0
        self.running = True
        self.stop_requested = False
        try:
            if self._realtime.requested:
                self._realtime.apply()
            if freeze:
                _gc.freeze()
                froze = True
            if self.gc_mode is not None:
                _gc.disable()
            start = self._now()
            sched = start
            if t_limit >= 0:
                end_at = start + t_limit
            while not self.stop_requested and (n_limit < 0 or done < n_limit):
                t0 = self._now()
                if t_limit >= 0 and t0 >= end_at:
                    break
                if self.numpy_handler is None:
                    step()
                else:
                    _numpy_step(self, step)
                if self.check_scratch:
                    scratch._release_to(0, False)
                else:
                    dod_arena_reset(&scratch.engine)
                t1 = self._now()
                dod_histogram_record(&self.hist, <uint64_t>(t1 - t0 if t1 > t0 else 0))
                late = t0 - sched if t0 > sched else 0
                self.late_sum += <double>late
                self.late_sumsq += <double>late * <double>late
                if late > self.late_max_ns:
                    self.late_max_ns = late
                self.ticks += 1
                done += 1
                deadline = sched + self.period_ns
                sched = deadline
                if t1 > deadline:
                    self.misses += 1
                    self.miss_run += 1
                    if self.miss_run > self.longest_miss_run:
                        self.longest_miss_run = self.miss_run
                    if not self.catch_up:
                        # Next slot of the grid that is still ahead of t1.
                        slots = (t1 - deadline) // self.period_ns + 1
                        self.skipped += <uint64_t>slots
                        sched = deadline + slots * self.period_ns
                else:
                    self.miss_run = 0
                if self.stop_requested or (n_limit >= 0 and done >= n_limit):
                    break
                if t_limit >= 0 and sched >= end_at:
                    break
                self._sleep_until(sched)
        finally:
            self.running = False
            self._realtime.undo()
            if froze:
                _gc.unfreeze()
            if self.gc_mode is not None and was_enabled:
                _gc.enable()
        return done

    def percentile(self, double q):
        """Tick time at percentile `q`.

        Parameters
        ----------
        q : float
            In [0, 100].

        Returns
        -------
        float
            Seconds; 0.0 before any tick.

        Raises
        ------
        ValueError
            For `q` outside [0, 100].

        Notes
        -----
        Thread-safety: the loop runs on one thread at a time; call this from that thread, or while the loop is not running.
        """
        if not 0.0 <= q <= 100.0:
            raise ValueError("q must be in [0, 100]")
        return _hist_quantile(&self.hist, q / 100.0) / 1e9

    def histogram(self):
        """The non-empty bins of the tick-time histogram.

        Returns
        -------
        tuple of list
            ``(lower bounds in ns, counts)``. Bins are exact below 128 ns, then 64
            per power of two.

        Notes
        -----
        Thread-safety: the loop runs on one thread at a time; call this from that thread, or while the loop is not running.
        """
        lows, counts = [], []
        for b in range(DOD_HIST_BINS):
            if self.hist.counts[b]:
                lows.append(_bin_low(b))
                counts.append(self.hist.counts[b])
        return lows, counts

    def reset_stats(self):
        """Forget all statistics.

        Raises
        ------
        RuntimeError
            While the loop is running.

        Notes
        -----
        Thread-safety: the loop runs on one thread at a time; call this from that thread, or while the loop is not running.
        """
        if self.running:
            raise RuntimeError("cannot reset statistics while running")
        memset(self.hist.counts, 0, DOD_HIST_BINS * sizeof(uint64_t))
        self.hist.total = 0
        self.hist.min = 0
        self.hist.max = 0
        self.hist.sum = 0.0
        self.ticks = self.misses = self.skipped = self.longest_miss_run = self.miss_run = 0
        self.late_sum = self.late_sumsq = 0.0
        self.late_max_ns = 0

    def stats(self):
        """Statistics as a dict; times in seconds.

        Returns
        -------
        dict
            ``ticks``, ``misses``, ``skipped``, ``longest_miss_run``, ``p50``,
            ``p99``, ``p999``, ``max``, ``min``, ``mean`` (tick duration: step +
            scratch reset), ``jitter`` (standard deviation of the start lateness),
            ``late_max`` (largest start lateness), ``rate``, ``period``.

        Notes
        -----
        Thread-safety: the loop runs on one thread at a time; call this from that thread, or while the loop is not running.
        """
        cdef double n = <double>self.ticks
        cdef double mean_late = self.late_sum / n if n > 0 else 0.0
        cdef double var = self.late_sumsq / n - mean_late * mean_late if n > 0 else 0.0
        return {
            "ticks": self.ticks,
            "misses": self.misses,
            "skipped": self.skipped,
            "longest_miss_run": self.longest_miss_run,
            "p50": _hist_quantile(&self.hist, 0.5) / 1e9,
            "p99": _hist_quantile(&self.hist, 0.99) / 1e9,
            "p999": _hist_quantile(&self.hist, 0.999) / 1e9,
            "max": self.hist.max / 1e9,
            "min": self.hist.min / 1e9,
            "mean": (self.hist.sum / self.hist.total / 1e9) if self.hist.total else 0.0,
            "jitter": sqrt(var if var > 0 else 0.0) / 1e9,
            "late_max": self.late_max_ns / 1e9,
            "rate": self.rate,
            "period": self.period_ns / 1e9,
        }

    def __repr__(self):
        s = self.stats()
        return (f"<dod.Loop rate={self.rate:g} Hz ticks={s['ticks']} misses={s['misses']} "
                f"p50={s['p50'] * 1e3:.3f} ms p99={s['p99'] * 1e3:.3f} ms "
                f"max={s['max'] * 1e3:.3f} ms>")
