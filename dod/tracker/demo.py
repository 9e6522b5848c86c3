"""``python -m dod.tracker``: the tracker running live at 50 Hz through dod.loop.

A seeded scenario (default 1,000 targets for 10 s, Pd 0.9, clutter 0.2 N per
scan) streams in: a producer thread runs ``scenario.iter_scans`` into the
fixed slots of a :class:`dod.ring.Ring` (:class:`dod.tracker.stream.ScanStream`:
bounded memory for any duration, back-pressure when the ring is full, no
allocation or lock per scan on the hand-off); :class:`dod.loop.Loop` calls the tracker
once per tick against absolute deadlines, and a live view shows progress,
tick time p50/p99/max, deadline misses, allocations per tick, confirmed
tracks and a running GOSPA. A summary follows (with MOTA, IDF1 and HOTA over
the scans sampled for GOSPA, after the run); ``--plot FILE.png`` draws the
tracks against the ground truth and the tick-time histogram.

What is measured, and how the demo keeps out of the measurement
    The loop runs in chunks of a few ticks (``Loop.run(ticks=k)``; its
    statistics accumulate across runs). Everything the demo itself does (the
    view, GOSPA, copying tracks for the plot) happens *between* chunks, in
    the idle remainder of the last tick's period, never inside a timed tick.
    The next chunk starts on the original 50 Hz grid; if the demo's own work
    ever overran that slot, the summary says so (``demo overruns``). GOSPA
    is sampled only when its last cost fits in the slack before the next
    chunk (the summary counts the samples skipped), and above
    ``WINDOW_TARGETS`` targets only over a square window at the centre of
    the region holding about that many (the plot draws the same window), so
    a sample costs the same at 100,000 targets as at 2,000. The scans are
    drawn by the producer thread, which runs ahead by up to the ring's slots
    at idle priority (``ScanStream(idle=True)``): in the ticks' slack, never
    preempting a tick's workers (except with ``--fast``, which has no slack).
    Allocations per tick are the net growth of ``sys.getallocatedblocks()``
    across the chunks after the first (whose one-time effects are shown
    apart), divided by their ticks: 0 means the loop and the tracker retained
    no Python object. The count is process-wide, so a chunk counts only when
    the producer was in the same quiet state at both ends (parked on a full
    ring holding no temporaries, or finished); the summary says how many
    chunks were left out. Transient blocks freed
    inside a tick do not count; ``tests/test_tracker.py`` checks those with
    tracemalloc.

Real-time options (``--lock-memory``, ``--cpu``, ``--realtime-priority``)
    :class:`dod.realtime.Realtime` applied once on the loop's thread for the
    whole run (not per chunk, as ``Loop(lock_memory=...)`` would: the demo
    runs the loop in chunks), after the producer thread started, so the
    producer keeps its own policy (idle) and affinity. What the OS refuses is
    a warning and the summary's ``realtime`` line says so (``--rt-strict``:
    an error instead). The tick's OpenMP workers (``--threads`` > 1) start
    at the first tick and inherit the loop thread's CPU pin and priority.

Without a terminal (a pipe, CI, ``--no-live``, or rich not installed) the
view is a plain line per second of scenario time.

Options: ``python -m dod.tracker --help`` lists them (scenario, motion and
initiation, threads, real-time options, ``--plot``); the tracker guide
explains them.

Prefault: before the first tick the demo faults in every page a tick can
    touch (:meth:`Tracker.prefault`: the table at its capacity, the scratch
    arena, the workers' arenas), so that RSS is flat from the start and no
    tick pays a first-touch page fault; the summary's ``prefault`` line says
    how much. ``--no-prefault`` leaves them to be faulted as first touched.
"""
import argparse
import math
import sys
import time

from dod.tracker.openmp import default_wait_policy

default_wait_policy()       # before the engine loads libgomp (dod.tracker.openmp)

import numpy as np

from dod.loop import Loop, monotonic_ns
from dod.realtime import Realtime
from dod.tracker import Tracker, TrackerConfig
from dod.tracker._engine import PASS_NAMES
from dod.tracker.metrics import sparse_gospa
from dod.tracker.scenario import PRESET_CONFIG, PRESETS, scan_extent
from dod.tracker.stream import ScanStream
from dod.tracker.demo_view import (_rich_view, plain_line, prefault_line, realtime_line,  # noqa: F401
                                   run_with_view, want_live, write_plot)

SCENARIOS = tuple(PRESETS) + ("radar",)     # radar: scenario.iter_radar_scans, the EKF update

GOSPA_C = 10.0          # cut-off (m): 10 x the measurement noise
MAX_SAMPLES = 600       # samples kept for the plot and the MOT scores (2.5 min at 4 Hz)
REFRESH_HZ = 4.0        # view refreshes (and GOSPA samples) per second of scenario time
MOT_SAMPLES = 120       # the summary's MOTA/IDF1/HOTA over the latest this many samples (30 s at 4 Hz)
LATE_SAMPLE_S = 1.0     # a loop with no slack still samples GOSPA once per this many wall seconds
WINDOW_TARGETS = 2000   # above this many targets, GOSPA and the plot look at a window holding about this many


class SampleStore:
    """The latest samples (scan, ids, positions), in memory allocated and touched once.

    The demo's memory stays flat from its first seconds (a deque of arrays
    would grow with every sample until MAX_SAMPLES). A sample keeps at most
    `points` rows; the rest are counted in ``truncated``. Iterating yields
    ``(scan, ids, positions)`` views, oldest first; later appends overwrite them.

    Parameters
    ----------
    samples : int
        Samples kept (the oldest is overwritten after that many).
    points : int
        Rows kept per sample.
    dim : int, default 2
        Coordinates per position.

    Raises
    ------
    ValueError
        For a negative size (numpy's).
    MemoryError
        When the blocks cannot be allocated.

    Notes
    -----
    Thread-safety: one thread (the demo's) appends and reads.
    """

    def __init__(self, samples, points, dim=2):
        self.capacity, self.points = int(samples), int(points)
        self.scan = np.empty(self.capacity, np.int64)
        self.count = np.empty(self.capacity, np.int64)
        self.ids = np.empty((self.capacity, self.points), np.int64)
        self.pos = np.empty((self.capacity, self.points, dim), np.float64)
        for a in (self.scan, self.count, self.ids, self.pos):
            a.fill(0)                       # touch every page now, not as samples arrive
        self.appended = 0
        self.truncated = 0

    def append(self, scan, ids, pos):
        """Store one sample, overwriting the oldest when full.

        Parameters
        ----------
        scan : int
            The scan the sample was taken after.
        ids : numpy.ndarray
            (k,) track (or truth) ids.
        pos : numpy.ndarray
            (k, dim) positions; rows past `points` are dropped and counted in ``truncated``.

        Notes
        -----
        Thread-safety: the store's one thread.
        """
        i = self.appended % self.capacity
        k = min(len(ids), self.points)
        self.truncated += len(ids) - k
        self.scan[i], self.count[i] = scan, k
        self.ids[i, :k] = ids[:k]
        self.pos[i, :k] = pos[:k]
        self.appended += 1

    def __len__(self):
        return min(self.appended, self.capacity)

    def __iter__(self):
        """The samples kept, oldest first: (scan, ids, positions) views. Thread-safety: the store's one thread."""
        n = len(self)
        for j in range(self.appended - n, self.appended):
            i = j % self.capacity
            k = self.count[i]
            yield int(self.scan[i]), self.ids[i, :k], self.pos[i, :k]


# ----------------------------------------------------------------- the run

class DemoRun:
    """One demo run: scenario, tracker, loop and what the view shows.

    Build it, call :meth:`run` (optionally with a callback per chunk), then read
    :meth:`summary`. ``python -m dod.tracker`` (:func:`main`) does that with the
    command line's options; the tests do it directly.

    Parameters
    ----------
    targets : int, default 1000
        Targets in the scenario (>= 1).
    rate : float, default 50.0
        Ticks per second (> 0).
    duration : float, default 10.0
        Scenario seconds (> 0).
    seed : int, default 0
        The scenario's seed.
    fast : bool, default False
        Run as fast as possible (no sleeping between ticks).
    keep_tracks : bool, default False
        Keep the samples a plot needs (:func:`write_plot`).
    threads : int, default 1
        Threads of one tick (``TrackerConfig.threads``).
    scenario : str, default "default"
        One of :data:`SCENARIOS`.
    motion : str, optional
        ``"cv"`` or ``"imm"``; default ``"imm"`` for the manoeuvre scenario, else ``"cv"``.
    lock_memory, cpu, realtime_priority, rt_strict
        The real-time options (:class:`dod.realtime.Realtime`'s `lock_memory`,
        `cpu`, `realtime_priority` and `strict`), applied around :meth:`run`.
    prefault : bool, default True
        Fault in every page a tick can touch before the run (:meth:`Tracker.prefault <dod.tracker.Tracker.prefault>`).
    initiation : str, optional
        ``"single"`` or ``"two_point"``; default: TrackerConfig's (two-point).
    profile : bool, default False
        Time each tick's passes (:attr:`Tracker.profile <dod.tracker.Tracker.profile>`) and report them.
    log : str or os.PathLike, optional
        Log every scan's confirmed tracks and events there
        (:class:`dod.tracker.track_log.TrackLog`, an Arrow IPC stream or, for
        ``.parquet``, Parquet; full ring: the scan is dropped and counted).
        The tracker then records events; each tick is followed by the log's
        copy of its scan.
    dtype : str, default "float64"
        The tracks' state and covariance precision (TrackerConfig's
        ``dtype``: ``"float64"`` or ``"float32"``).

    Raises
    ------
    ValueError, TypeError
        For a bad option (before anything runs).
    OSError
        For a `log` path that cannot be written (nothing is created).
    MemoryError
        When the tracker's memory cannot be allocated or faulted in.

    Notes
    -----
    Thread-safety: one thread builds and runs it; the scans come from a
    producer thread of its own (:class:`dod.tracker.stream.ScanStream`).
    """

    def __init__(self, targets=1000, rate=50.0, duration=10.0, seed=0, fast=False,
                 keep_tracks=False, threads=1, scenario="default", motion=None, lock_memory=False,
                 cpu=None, realtime_priority=None, rt_strict=False, prefault=True, initiation=None,
                 profile=False, log=None, dtype="float64"):
        if targets < 1:
            raise ValueError("targets must be >= 1")
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError("rate must be a positive number")
        if not (duration > 0 and math.isfinite(duration)):
            raise ValueError("duration must be a positive number of seconds")
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {', '.join(SCENARIOS)}, not {scenario!r}")
        self.targets, self.rate, self.duration, self.seed, self.fast = targets, rate, duration, seed, fast
        # A preset with its own scan period (manoeuvre: one scan a second) is
        # replayed at `rate` ticks per second; duration is scenario time.
        preset = dict(PRESETS.get(scenario, {}))
        self.dt = preset.pop("dt", 1.0 / rate)
        self.total = max(1, int(round(duration / self.dt)))
        self.scenario = scenario
        self.extent = scan_extent(targets, **preset)
        # Above WINDOW_TARGETS targets, GOSPA and the plot look at a centred square holding ~that many.
        frac = min(1.0, WINDOW_TARGETS / targets)
        self.window = self.extent * math.sqrt(frac) / 2.0
        if motion is None:
            motion = "imm" if scenario == "manoeuvre" else "cv"
        # Two-point initiation (the default): as accurate as single-point
        # births here, and the clutter detections no longer start tentative
        # tracks, so the table holds fewer rows and the tick is faster
        # (docs/design/threads-and-locality.md).
        if initiation is None:
            initiation = "two_point"
        self.config = TrackerConfig(capacity=max(64, 4 * targets),
                                    max_detections=max(64, 2 * targets + 64), overflow="drop",
                                    threads=threads, motion=motion, initiation=initiation,
                                    events=log is not None, dtype=dtype,
                                    **({"r": 3.0} if scenario == "radar" else PRESET_CONFIG[scenario]))
        # Validated now (ValueError/TypeError); applied once around run().
        self.realtime = Realtime(lock_memory, cpu, realtime_priority, strict=rt_strict)
        self.tracker = Tracker(self.config)
        self.log = None
        if log is not None:
            from dod.tracker.track_log import TrackLog
            # As the producer: the writer works in the loop's slack (idle priority), unless --fast.
            self.log = TrackLog(log, self.tracker, idle=not fast)
        # Every page a tick can touch, faulted in now: no first touch inside
        # a tick, and RSS flat from the first scan (at the worst case:
        # table capacity and scratch). --no-prefault leaves them lazy.
        self.prefaulted = self.tracker.prefault() if prefault else 0
        # Chunk: about 1/REFRESH_HZ seconds of ticks, dividing a second when it can
        # (so that plain lines fall on whole seconds).
        per_s = max(1, int(round(rate)))
        self.chunk = max([d for d in range(1, per_s + 1)
                          if per_s % d == 0 and d <= max(1.0, rate / REFRESH_HZ)])
        # The producer runs up to two chunks ahead; the truth of each chunk's last scan is kept.
        # With a window, the producer cuts the truth down to it and the
        # tracks come through Tracker.confirmed_tracks(box=...): masking both
        # sides in numpy cost the loop thread more than a tick's slack.
        windowed = self.window * 2.0 < self.extent
        self.box = ([-self.window] * self.config.dim, [self.window] * self.config.dim) if windowed else None
        self.stream = ScanStream(targets, self.total, rows=self.config.max_detections,
                                 slots=2 * self.chunk, sample_every=self.chunk, radar=scenario == "radar",
                                 dt=self.dt, seed=seed, idle=not fast,
                                 window=self.window if windowed else None, **preset)
        self.gen_seconds = 0.0         # waiting for the first chunk's scans (run())
        self.truth_alive = 0           # targets alive at the last sampled scan
        tick = self.tracker.tick
        take = self.stream.take
        release = self.stream.release_scan
        if self.log is not None:             # the log's copy of the scan follows its tick
            release_scan, append = release, self.log.append

            def release():
                release_scan()
                append()
        sensors = self.stream.sensors          # None unless radar
        # --profile: each tick's pass times (Tracker.profile) summed in place,
        # allocating nothing: [wall ms per pass, idle ms per pass, ticks].
        self.tracker.profile = profile
        self.profile_sum = np.zeros(2 * len(PASS_NAMES) + 1) if profile else None
        last = np.zeros(2 * len(PASS_NAMES) + 1)
        last[-1] = 1.0
        read_profile = self.tracker.read_profile
        add = np.add
        total = self.profile_sum

        def step():
            # The hand-off: the oldest slot (two atomic counters; its arrays
            # exist already), the tick on its rows, the slot back to the producer.
            slot = take()
            if slot is None:                    # the stream ended early (take raises a producer error)
                self.loop.stop()
                return
            # Each scan carries its time stamp (the producer's scan clock): the tracker
            # derives dt from it, as it would for a real sensor's scans.
            if sensors is None:
                tick(slot.rows, time=slot.time)
            else:                               # scan s came from sensor s mod len(sensors)
                tick(slot.rows, sensor=sensors[slot.tag % len(sensors)], time=slot.time)
            release()
            if total is not None:
                read_profile(last)
                add(total, last, out=total)

        # The loop resets the tracker's scratch arena after every tick.
        # --fast: the highest rate the loop accepts, catching up without sleeping.
        self.loop = Loop(step, 1e9 if fast else rate, scratch=self.tracker.scratch,
                         overrun="catch_up" if fast else "skip")
        self.done = 0
        self.alloc_blocks = 0          # net blocks retained by the timed ticks (after warm-up)
        self.alloc_ticks = 0
        self.warmup_blocks = None      # the first chunk's net blocks (one-time effects)
        self.gospa_sum = 0.0
        self.gospa_n = 0
        self.last_gospa = (math.nan, 0.0, 0, 0)
        self.demo_overruns = 0
        self._next_start = 0           # the next chunk's start (monotonic ns), for on_chunk (slack_ns)
        self.samples_skipped = 0       # GOSPA samples left out to keep the rate
        self.cpu_ns = 0                # thread CPU time inside the chunks (sleep costs none)
        self._sample_ns = 0
        self.wall = 0.0
        self.alloc_unquiet = 0         # chunks left out of the count: the producer was busy at an end
        self.keep_tracks = keep_tracks
        # (scan, ids, positions) of the tracks and of the truth, inside the
        # window, for the plot and MOTA/IDF1/HOTA: the latest MAX_SAMPLES only,
        # so memory stays flat however long the demo runs.
        points = int(1.25 * min(targets, WINDOW_TARGETS)) + 64   # tracks or truth in the window, with room
        self.samples = SampleStore(MAX_SAMPLES, points)
        self.truth_samples = SampleStore(MAX_SAMPLES, points)

    # One chunk of ticks; everything else happens outside the loop.
    def _run_chunk(self, k):
        c0 = time.thread_time_ns()
        quiet = self.stream.quiet()
        b0 = sys.getallocatedblocks()
        n = self.loop.run(k)
        b1 = sys.getallocatedblocks()
        self.cpu_ns += time.thread_time_ns() - c0
        if self.warmup_blocks is None:
            self.warmup_blocks = b1 - b0 - self._alloc_base
        elif quiet is not None and quiet == self.stream.quiet():
            self.alloc_blocks += b1 - b0 - self._alloc_base
            self.alloc_ticks += n
        else:
            self.alloc_unquiet += 1
        self.done += n
        return n

    def _sample(self):
        scan = self.done - 1
        slot = self.stream.truth_of(scan)
        if slot is None:
            return False
        ids, pos = self.tracker.confirmed_tracks(box=self.box)
        self.truth_alive = self.stream.alive_of(slot)
        rows = slot.rows                             # the window's targets only (ScanStream(window=...))
        tid, tpos = rows[:, 0].astype(np.int64), rows[:, 1:].copy()
        del rows, slot                               # no view of the slot may outlive it
        self.stream.release_truth()
        g = sparse_gospa(tpos, pos, c=GOSPA_C, details=True)
        self.last_gospa = g
        self.gospa_sum += g[0]
        self.gospa_n += 1
        self.samples.append(scan, ids, pos)
        self.truth_samples.append(scan, tid, tpos)
        return True

    def slack_ns(self):
        """Nanoseconds until the next chunk starts (negative: late).

        Returns
        -------
        int

        Notes
        -----
        Thread-safety: call it from :meth:`run`'s callback, between chunks.
        """
        return self._next_start - monotonic_ns()

    def run(self, on_chunk=None):
        """Run every scan.

        Parameters
        ----------
        on_chunk : callable, optional
            Called as ``on_chunk(self)`` between chunks of ticks (a view redraws
            there; it may read :meth:`slack_ns` and :meth:`snapshot`).

        Returns
        -------
        DemoRun
            Itself.

        Raises
        ------
        Exception
            The scan producer's error, re-raised here; whatever `on_chunk` raises.

        Notes
        -----
        Thread-safety: the thread that built it. The real-time options are
        applied to this thread for the run and undone after it.
        """
        # Calibrate the measurement: two back-to-back reads differ by the int
        # object holding the first one.
        b0 = sys.getallocatedblocks()
        b1 = sys.getallocatedblocks()
        self._alloc_base = b1 - b0
        # Start the producer and let it draw the first chunk's scans before the
        # first tick (as a sensor feed would be running already).
        t = time.perf_counter()
        self.stream.start()
        want = min(self.chunk, self.total)
        while len(self.stream.scans) < want and self.stream.producer.alive:
            time.sleep(0.001)
        self.stream.producer.check()
        self.gen_seconds = time.perf_counter() - t
        # Warm GOSPA up (imports, first numpy calls) outside the run, and take
        # the second call's cost as the first estimate of a sample's cost.
        truth = np.random.default_rng(0).uniform(0, self.extent, (min(self.targets, WINDOW_TARGETS), 2))
        for _ in range(2):
            t = monotonic_ns()
            sparse_gospa(truth, truth + 0.5, c=GOSPA_C)
            self._sample_ns = monotonic_ns() - t
        period_ns = int(round(1e9 / self.rate))
        start = monotonic_ns()
        next_start = start
        self._last_sample = start
        try:
            # Applied on this (the loop's) thread, after the producer started.
            if self.realtime.requested:
                self.realtime.apply()
            while self.done < self.total:
                k = min(self.chunk, self.total - self.done)
                if not self.fast:
                    now = monotonic_ns()
                    if now < next_start:
                        time.sleep((next_start - now) / 1e9)
                    elif now > next_start + period_ns // 2 and self.done:
                        self.demo_overruns += 1        # the view made us late: re-anchor
                        next_start = now
                skipped = self.loop.skipped
                if self._run_chunk(k) < k:
                    self.stream.producer.check()      # it failed: raise its error here
                    break                             # (or the stream ended early)
                self.stream.refill()                  # the producer draws the next scans now, in the slack
                # The chunk's grid: its k slots and those its late ticks passed over
                # (a tick's overrun is a miss, not the demo's).
                next_start += (k + self.loop.skipped - skipped) * period_ns
                # Sample GOSPA only when it fits before the next chunk (at
                # 10,000 targets it takes longer than a tick's slack), and in a
                # loop that is behind anyway (no slack ever) once per
                # LATE_SAMPLE_S of wall time, so the view and the plot still
                # show something (a windowed sample costs a few ms).
                now = monotonic_ns()
                if self.fast or next_start - now > 1.5 * self._sample_ns \
                        or self.done >= self.total or now - self._last_sample > LATE_SAMPLE_S * 1e9:
                    if self._sample():
                        self._last_sample = monotonic_ns()
                        self._sample_ns = self._last_sample - now
                else:
                    self.samples_skipped += 1
                    alive = self.stream.drop_truth(self.done - 1)   # its truth goes back unread
                    self.truth_alive = self.truth_alive if alive is None else alive
                    # Forget the estimate slowly: the first sample is the slowest
                    # (warm-up), and the load of the machine changes.
                    self._sample_ns *= 0.8
                if on_chunk is not None:
                    self._next_start = next_start
                    on_chunk(self)
        finally:
            self.wall = (monotonic_ns() - start) / 1e9
            self.realtime.undo()
            self.stream.close()
            if self.log is not None:
                self.log.close()
        return self

    # ----------------------------------------------------------- reporting
    @property
    def allocations_per_tick(self):
        # rounded, and + 0.0 so that a tiny negative prints 0.00, not -0.00
        """Python memory blocks allocated per tick in steady state (0.00 expected)."""
        return round(self.alloc_blocks / self.alloc_ticks, 2) + 0.0 if self.alloc_ticks else 0.0

    @property
    def mean_gospa(self):
        """Mean GOSPA (m) over the samples taken so far (NaN before the first)."""
        return self.gospa_sum / self.gospa_n if self.gospa_n else math.nan

    def mot_scores(self, match=5.0):
        """MOTA, IDF1 and HOTA over the latest MOT_SAMPLES sampled scans.

        The samples are the GOSPA samples: identities are followed from one sample
        to the next. Computed after the run, never inside a tick.

        Parameters
        ----------
        match : float, default 5.0
            Truth and tracks match within this distance (m).

        Returns
        -------
        dict or None
            ``scans``, ``mota``, ``idf1``, ``hota``; None before the first sample.

        Notes
        -----
        Thread-safety: the run's thread, between or after chunks.
        """
        from dod.tracker.metrics import clear_mot, hota

        if not self.samples:
            return None
        est = list(self.samples)[-MOT_SAMPLES:]
        truth = list(self.truth_samples)[-MOT_SAMPLES:]
        args = ([s[1] for s in truth], [s[2] for s in truth], [s[1] for s in est],
                [s[2] for s in est], match)
        m = clear_mot(*args)
        return {"scans": len(est), "mota": m["mota"], "idf1": m["idf1"],
                "hota": hota(*args)["hota"]}

    def snapshot(self):
        """What the live view shows now: timing, allocations, tracks and GOSPA.

        Returns
        -------
        dict
            ``ticks``, ``total``, ``time``, ``p50_ms``, ``p99_ms``, ``max_ms``,
            ``mean_ms``, ``misses``, ``skipped`` (None in fast mode),
            ``alloc_per_tick``, ``confirmed``, ``tentative``, ``truth``,
            ``detections``, ``gospa``, ``gospa_mean``, ``missed``, ``false``.

        Notes
        -----
        Thread-safety: the run's thread, between or after chunks.
        """
        s = self.loop.stats()
        c = self.tracker.counts()
        scan = max(self.done - 1, 0)
        return {
            "ticks": self.done, "total": self.total, "time": self.done * self.dt,
            "p50_ms": s["p50"] * 1e3, "p99_ms": s["p99"] * 1e3, "max_ms": s["max"] * 1e3,
            "mean_ms": s["mean"] * 1e3,
            "misses": None if self.fast else s["misses"],
            "skipped": None if self.fast else s["skipped"],
            "alloc_per_tick": self.allocations_per_tick,
            "confirmed": c["confirmed"], "tentative": c["tentative"],
            "truth": self.truth_alive,
            "detections": c["detections"],
            "gospa": self.last_gospa[0], "gospa_mean": self.mean_gospa,
            "missed": self.last_gospa[2], "false": self.last_gospa[3],
        }

    def summary(self):
        """The report printed at the end of a run.

        Returns
        -------
        str
            Several lines: scenario, mode, tick times, deadline misses, allocations
            per tick, memory, accuracy (GOSPA, MOTA, IDF1, HOTA) and, with
            ``profile``, where the tick's time went.

        Notes
        -----
        Thread-safety: the run's thread, after :meth:`run`.
        """
        s = self.snapshot()
        st = self.loop.stats()
        lines = [
            "dod.tracker demo: summary",
            f"  scenario   {self.targets} targets, {self.total} scans at {self.rate:g} Hz "
            f"({self.total * self.dt:g} s), seed {self.seed}, Pd 0.9, clutter 0.2 N/scan, "
            + ("two radars (range 2 m, bearing 1 mrad), " if self.scenario == "radar" else "") +
            f"region {self.extent:.0f} m wide; tick threads {self.tracker.threads}"
            + (f"; scenario {self.scenario}" if self.scenario != "default" else "")
            + f"; motion {self.config.motion}; initiation {self.config.initiation}"
            + (f"; GOSPA and plot over the central {2 * self.window:.0f} m square"
               if self.window * 2.0 < self.extent else ""),
            f"  mode       {'fast (no sleeping)' if self.fast else 'real time'}; "
            f"wall {self.wall:.2f} s ({self.done / self.wall if self.wall else 0:.0f} ticks/s)",
            f"  tick time  p50 {s['p50_ms']:.3f} ms  p99 {s['p99_ms']:.3f} ms  "
            f"p99.9 {st['p999'] * 1e3:.3f} ms  max {s['max_ms']:.3f} ms  mean {s['mean_ms']:.3f} ms "
            f"(budget {1e3 / self.rate:.1f} ms)",
            f"  cpu        {self.cpu_ns / 1e6 / max(self.done, 1):.3f} ms per tick on average (thread "
            "CPU time; a wall-clock p99 far above it is preemption by other processes)",
        ]
        if self.fast:
            lines.append("  deadlines  not applicable (--fast)")
        else:
            lines.append(f"  deadlines  {st['misses']} missed of {self.done} ticks, {st['skipped']} slots "
                         f"skipped, longest run {st['longest_miss_run']}, start jitter "
                         f"{st['jitter'] * 1e3:.3f} ms; demo overruns {self.demo_overruns}")
        if sys.getallocatedblocks() == 0:
            lines.append("  memory     not measured: Python runs without pymalloc (PYTHONMALLOC)")
        elif not self.alloc_ticks:
            lines.append(f"  memory     not measured: the producer thread was never parked at both ends "
                         f"of a chunk ({self.alloc_unquiet} chunks; it is behind the ticks)")
        else:
            lines.append(f"  memory     {s['alloc_per_tick']:.2f} Python blocks retained per tick "
                         f"({self.alloc_blocks:+d} net sys.getallocatedblocks over "
                         f"{self.alloc_ticks} ticks after the first chunk; first chunk "
                         f"{self.warmup_blocks or 0:+d}"
                         + (f"; {self.alloc_unquiet} chunks left out, the producer busy"
                            if self.alloc_unquiet else "") + ")")
        st_in = self.stream.scans.stats()
        prio = "idle priority" if self.stream.producer.idle_applied else "normal priority"
        lines.append(f"  input      producer thread ({prio}) -> ring of {st_in['slots']} slots "
                     f"({st_in['capacity'] / 2**20:.1f} MiB, refilled between chunks): {st_in['committed']} "
                     f"scans; a tick found the ring empty {st_in['read_waits']} times (the producer behind)")
        lines.append("  realtime   " + realtime_line(self.realtime))
        lines.append("  prefault   " + prefault_line(self.prefaulted))
        lines += [
            f"  tracks     {s['confirmed']} confirmed, {s['tentative']} tentative; "
            f"{s['truth']} targets alive; rows sorted {self.tracker.sorts} times "
            "(confirmed tracks first: TrackerConfig.sort_when_drifted, sort_when_displaced, sort_when_mixed, sort_every)",
            f"  accuracy   GOSPA (c={GOSPA_C:g} m, p=2) mean {s['gospa_mean']:.2f} over "
            f"{self.gospa_n} samples; last {s['gospa']:.2f} ({s['missed']} missed, {s['false']} false)"
            + (f"; {self.samples_skipped} samples skipped to keep the rate" if self.samples_skipped else ""),
        ]
        if self.log is not None:
            lines.append(f"  log        {self.log.written} scans written to {self.log.path} "
                         f"({self.log.dropped} dropped: the writer behind)")
        if self.profile_sum is not None and self.profile_sum[-1] > 0:
            n = len(PASS_NAMES)
            mean = self.profile_sum[:-1] / self.profile_sum[-1]
            lines.append("  passes     ms per tick on average (Tracker.profile): "
                         + ", ".join(f"{name} {mean[i]:.3f}" for i, name in enumerate(PASS_NAMES))
                         + f"; the workers waited {mean[n:].sum():.3f} ms a tick in the row-chunk regions "
                         f"({100 * mean[n:].sum() / max(1e-12, self.tracker.threads * mean[:n].sum()):.1f} % "
                         "of threads x tick)")
        m = self.mot_scores()
        if m is not None:
            lines.append(f"             MOTA {m['mota']:.3f}  IDF1 {m['idf1']:.3f}  HOTA {m['hota']:.3f} "
                         f"over the {m['scans']} sampled scans (match 5 m)")
        return "\n".join(lines)


def build_parser():
    """The argument parser of ``python -m dod.tracker`` (``--help`` lists its options).

    Returns
    -------
    argparse.ArgumentParser

    Notes
    -----
    Thread-safety: any thread (a new parser each call).
    """
    p = argparse.ArgumentParser(prog="python -m dod.tracker",
                                description="Run dod's tracker live at a fixed rate on a generated "
                                            "scenario and report timing, memory and accuracy.")
    p.add_argument("--targets", type=int, default=1000, help="targets in the scenario (1000)")
    p.add_argument("--rate", type=float, default=50.0, help="ticks per second (50)")
    p.add_argument("--duration", type=float, default=10.0, help="scenario length in seconds (10)")
    p.add_argument("--seed", type=int, default=0, help="scenario seed (0)")
    p.add_argument("--fast", action="store_true", help="run as fast as possible (no sleeping)")
    p.add_argument("--plot", metavar="FILE.png", help="write tracks vs truth and the tick histogram")
    p.add_argument("--no-live", action="store_true", help="plain progress lines, no live view")
    p.add_argument("--threads", type=int, default=1, help="threads of one tick (1)")
    p.add_argument("--scenario", choices=SCENARIOS, default="default",
                   help="default (50 Hz, constant velocity), manoeuvre (one scan a second, turning "
                        "targets, replayed at --rate; try --duration 300 --fast), straight, or "
                        "radar (range-bearing scans of two sensors)")
    p.add_argument("--motion", choices=("cv", "imm"), default=None,
                   help="motion model (default: imm for --scenario manoeuvre, else cv)")
    p.add_argument("--initiation", choices=("single", "two_point"), default=None,
                   help="track initiation (TrackerConfig.initiation; default two_point; single: every "
                        "detection no track took starts a tentative track)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="the tracks' state and covariance precision (TrackerConfig.dtype; default float64)")
    p.add_argument("--lock-memory", nargs="?", const=True, default=False, choices=[True, "onfault"],
                   help="mlockall the process (onfault: lock pages as first touched)")
    p.add_argument("--cpu", type=int, default=None, help="pin the loop thread to this CPU")
    p.add_argument("--realtime-priority", type=int, default=None, metavar="P",
                   help="run the loop thread at SCHED_FIFO priority P")
    p.add_argument("--no-prefault", action="store_true",
                   help="do not fault the tracker's memory in at start (RSS then rises with the "
                        "table's peak rows and the scratch high-water mark, bounded by capacity)")
    p.add_argument("--profile", action="store_true",
                   help="time the tick's passes (Tracker.profile) and print their means in the summary")
    p.add_argument("--log", metavar="FILE", default=None,
                   help="log every scan's confirmed tracks and events to FILE (Arrow IPC stream; "
                        "Parquet for FILE.parquet)")
    p.add_argument("--rt-strict", action="store_true",
                   help="an OS refusal of a real-time option is an error (default: a warning)")
    return p


def main(argv=None, out=None):
    """The command line ``python -m dod.tracker``: run the demo and print its summary.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).
    out : file, optional
        Where the progress and the summary go (default stdout).

    Returns
    -------
    int
        The exit status: 0 done, 2 for bad arguments (the error printed).

    Notes
    -----
    Thread-safety: the main thread (it may set real-time options on it).
    """
    out = out or sys.stdout
    a = build_parser().parse_args(argv)
    if a.targets < 1 or not a.rate > 0 or not a.duration > 0:
        print("error: --targets, --rate and --duration must be positive", file=sys.stderr)
        return 2
    if a.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("error: --plot needs matplotlib: pip install 'dod[demo]' (or pip install matplotlib)",
                  file=sys.stderr)
            return 2
    try:
        run = DemoRun(a.targets, a.rate, a.duration, a.seed, a.fast, keep_tracks=bool(a.plot),
                      threads=a.threads, scenario=a.scenario, motion=a.motion, initiation=a.initiation,
                      lock_memory=a.lock_memory,
                      cpu=a.cpu, realtime_priority=a.realtime_priority, rt_strict=a.rt_strict,
                      prefault=not a.no_prefault, profile=a.profile, log=a.log, dtype=a.dtype)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: --log {a.log}: {e}", file=sys.stderr)
        return 2
    print(f"dod.tracker demo: {a.targets} targets, {run.total} scans at {a.rate:g} Hz, seed {a.seed} "
          f"({run.tracker.threads} tick threads; scans stream from a producer thread through a ring of "
          f"{run.stream.scans.slots} slots; real-time options: {realtime_line(run.realtime, before=True)})",
          file=out, flush=True)
    try:
        run_with_view(run, a.no_live, a.rate, a.fast, out, LATE_SAMPLE_S)
    except KeyboardInterrupt:
        print(f"interrupted after {run.done} of {run.total} ticks", file=out, flush=True)
    except OSError as e:               # --rt-strict: the OS refused a real-time option
        if isinstance(e, BrokenPipeError) or not run.realtime.refused:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(run.summary(), file=out, flush=True)
    if a.plot:
        write_plot(run, a.plot)
        print(f"plot written to {a.plot}", file=out, flush=True)
    return 0
