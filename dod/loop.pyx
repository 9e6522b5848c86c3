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
    disables. ``gc="disable"`` only disables; ``gc=None`` leaves the
    collector alone.

Scratch
    The scratch arena is reset after every step. By default the reset is
    checked: if the step keeps a numpy array carved from scratch alive across
    ticks, the reset raises BufferError (and the loop stops) instead of
    handing that memory out again. ``check_scratch=False`` makes it one store,
    and the caller owns the aliasing risk (wrong values, never a crash).

Statistics
    :meth:`Loop.stats` reports tick time p50/p99/p99.9/max (histogram bins of
    at most 1/64 relative width; min/max/mean exact), jitter (standard
    deviation of start lateness), misses, skipped slots and the longest run
    of consecutive misses.

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

import gc as _gc

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
    """The loop's clock: CLOCK_MONOTONIC in nanoseconds."""
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


@cython.final
cdef class Loop:
    """A fixed-rate loop.

    Loop(step, rate=50.0, *, scratch=None, scratch_bytes=1 << 20, spin=0.0,
         overrun="skip", gc="freeze", check_scratch=True, clock=None)

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
    clock : object, optional
        For tests: an object with ``now() -> int`` (ns) and
        ``sleep_until(t: int)``; the step may advance it. Default: the
        monotonic clock and ``clock_nanosleep`` without the GIL.

    Raises ValueError for a bad rate, spin, overrun or gc value, TypeError
    for a step that is not callable.
    """

    def __cinit__(self, step, double rate=50.0, *, Arena scratch=None, scratch_bytes=1 << 20,
                  double spin=0.0, overrun="skip", gc="freeze", bint check_scratch=True,
                  clock=None):
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
    def period(self):
        """Seconds per tick."""
        return self.period_ns / 1e9

    @property
    def tick(self):
        """Ticks run so far (the number of the tick in progress, from 0)."""
        return self.ticks

    def stop(self):
        """End the loop after the tick in progress (or before the next one)."""
        self.stop_requested = True

    def run(self, ticks=None, *, duration=None):
        """Run until `ticks` more ticks ran, `duration` seconds passed, or stop().

        With neither limit it runs until :meth:`stop` or an exception.
        Statistics accumulate across runs (see :meth:`reset_stats`). Raises
        RuntimeError when the loop is already running, ValueError for a
        negative limit; an exception from the step propagates after the GC
        state is restored. Returns the number of ticks run.
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
                step()
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
            if froze:
                _gc.unfreeze()
            if self.gc_mode is not None and was_enabled:
                _gc.enable()
        return done

    def percentile(self, double q):
        """Tick time (seconds) at percentile q in [0, 100]; 0.0 before any tick."""
        if not 0.0 <= q <= 100.0:
            raise ValueError("q must be in [0, 100]")
        return _hist_quantile(&self.hist, q / 100.0) / 1e9

    def histogram(self):
        """(lower bounds in ns, counts) of the non-empty histogram bins, as lists."""
        lows, counts = [], []
        for b in range(DOD_HIST_BINS):
            if self.hist.counts[b]:
                lows.append(_bin_low(b))
                counts.append(self.hist.counts[b])
        return lows, counts

    def reset_stats(self):
        """Forget all statistics (not while running)."""
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

        ticks, misses, skipped, longest_miss_run, p50, p99, p999, max, min,
        mean (tick duration: step + scratch reset), jitter (standard deviation
        of the start lateness), late_max (largest start lateness), rate, period.
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
