"""``python -m dod.tracker.bench``: tick time of the dod tracker and of the
numpy reference tracker, in the same run, on the same scenarios.

Scenario per N: N targets (2-D, constant velocity, 10 % crossing, 20 % born
late or dying early), Pd 0.9, Poisson clutter 0.2 N per scan, 50 Hz. The
first ``warmup`` scans are not timed (tracks confirm); then every tick is
timed alone (perf_counter_ns around the call) and the table shows median,
p99 and max in milliseconds (wall clock), the p99 of the thread's CPU time
per tick (the work, without preemption by other processes: on a loaded
machine wall-clock p99 is mostly time slices lost to others), and the
reference-over-dod ratio of medians.

Goals: N = 1,000 median <= 0.5 ms, p99 <= 1 ms, >= 5x the
reference; N = 10,000 p99 <= 10 ms. Shared machines are noisy: read the
median first, and rerun before trusting a p99.

Threads: ``--threads 1,2`` runs one dod tracker per thread count
on the same scans (streamed in blocks of 10 scans that every tracker ticks
in turn, so a ratio compares ticks timed seconds apart, not minutes);
the table adds the speedup over
threads=1 and the time per track per tick (p50 / live rows, in ns:
superlinear growth shows as a rising column). CPU is the process's CPU time
per tick (all threads). With several thread counts, "bare loop" is the
speedup, in the same blocks, of a loop with no serial part over 256 bytes
per target (at most 64 MiB; :mod:`dod.tracker._bare_loop`): what the
machine gives at that moment, to read the tick's speedup against; the
1 -> 2 goal lines add a cache line's round trip between two threads, once
a block (``round_trip_ns``: when the two vCPUs run far apart on the host
it is several times longer, and then the tick at 10,000 targets gains
nothing from a second thread). Goals:
N = 100,000 at threads = 2 p99 <= 20 ms; threads 1 -> 2 at N >= 10,000
>= 1.7x; per-track time at 100k within 1.3x of 10k. Scans are generated
one at a time (``scenario.iter_scans``), so memory stays bounded at any N;
the reference tracker runs only up to ``--reference-max`` targets (default
20,000: it is too slow beyond) and stops being timed when it exceeds its
time budget.

Options: ``--quick`` (fewer scans), ``--sizes 10,100,1000``, ``--scans K``,
``--threads 1,2,4``, ``--time``, ``--markdown`` (a Markdown table), ``--no-reference``,
``--reference-max N``, ``--dim 3``, ``--gc`` (leave the cyclic GC on while
timing; by default it is disabled around the timed ticks of both trackers).

``--initiation two_point``: the trackers (dod's and the reference) start
tracks from pairs of detections, as the demo does (default ``single``: the
scenario above, the table's history).

Before its first tick each dod tracker faults in every page a tick can
touch (``Tracker.prefault``, as the demo does before its loop, here over
every core), so the
timed window holds no first-touch page faults; ``--no-prefault`` leaves
them to the ticks (on a VM a fresh huge page the host must back anew
costs milliseconds: enough to double a p99). At 1M a tracker prefaults
~4 GiB.

``--time``: one more dod tracker (the first thread count) that takes each
scan by its time stamp (``tick(z, time=t)``) instead of its dt, timed in the
same blocks (the two take turns ticking a block first); a line per size
compares its median and p99 with the dt ticks' (the goal: no dearer,
within noise).
``--events``: each dod tracker has a twin that records what happened each
scan (``TrackerConfig(events=True)``, :meth:`~dod.tracker.Tracker.events`),
ticked on the same scans in the same blocks (the two alternate a block at
a time); a line per size gives both medians and the difference (goal: at
most 5 % at N = 10,000).
``--log``: as ``--events``, and the twin also appends each scan to a
:class:`~dod.tracker.track_log.TrackLog` right after its tick (its writer
thread, at idle priority as in the demo, builds and writes every batch, to
the null device: the disk's pace is the machine's, not the tick's); the
append is timed on its own and a line per
size gives the tick alone, with events, and with events and the append
(medians of the sums per scan, and their ratios to the tick alone; goal: at
most 5 % at N = 10,000), and the scans the log dropped on a full ring (the
ticks run back to back, faster than the writer may follow; a dropped scan
copies nothing, so only the scans queued time the append).

``--passes``: a second table, where each dod tick's time goes
(``Tracker.profile``): the median wall time of each pass, below it each
pass's share of the tick (% of the tick's wall time, the median over the
timed ticks; "outside" is the call's own checks), so that two runs
compare by shares directly, and the workers'
idle time inside the row-chunk regions (summed over the workers; "idle
share" is that over threads x tick). On many cores it tells the serial
passes and the waits from the per-row cost that grows with the cores'
shared memory traffic.

``--floor``: instead of the table, the predict pass alone against its
memory floor (:func:`floor`), at ``--sizes`` (default 100,000 targets),
one thread: one core's copy bandwidth (a numpy copy of arrays far past the
last-level cache, bytes read + written per second, the best of several
copies before and after the ticks) and the predict pass of a tracker
whose confirmed tracks coast on empty scans (max_misses 2**32 - 1: none
dies; with no detections the profile's predict_gate pass is predict
alone); the floor is the bytes the pass must move per track
(:func:`predict_bytes`: x and P read and written, the innovation
inverse, half-widths, widest half-width and gateable flag written, age
read and written, the track's detection and cell reset; 297 B in 2-D)
times N over the bandwidth, and the last line the ratio measured / floor.
With ``--dtype float32`` the pass is the float32 tracker's, against its own
floor (x and P in 4 bytes a value: 185 B in 2-D), the float64 floor printed
beside it. A line says whether the pass's working set is past the last-level cache
(only then does the floor bound it: in 2-D that is past ~185,000 targets
with a 32 MiB cache).

``--accuracy [options]``: the accuracy-in-clutter table instead (MOTA, IDF1,
HOTA, false confirmed tracks, and the tick cost of the clutter options;
:mod:`dod.tracker.accuracy`, whose options follow, e.g. ``--accuracy --quick``).

``--imm [options]``: IMM against constant velocity on the manoeuvring and
straight-line scenarios (GOSPA, ID switches, tick ratio, allocations;
:mod:`dod.tracker.bench_imm`, whose options follow, e.g. ``--imm --sizes 1000``).

``--radar [options]``: the range-bearing (EKF) tick against the Cartesian
tick on the same detections, and its GOSPA against the reference's
(:mod:`dod.tracker.bench_radar`, e.g. ``--radar --sizes 1000``).
"""
import argparse
import gc
import os
import time

from dod.tracker.openmp import default_wait_policy

default_wait_policy()       # before the engine loads libgomp (dod.tracker.openmp)

import numpy as np

import dod
from dod._report import table
from dod.tracker import ReferenceTracker, Tracker, TrackerConfig
from dod.tracker.config import MAX_THREADS
from dod.tracker._engine import PASS_NAMES
from dod.tracker._bare_loop import round_trip_ns, sweep
from dod.tracker.scenario import iter_scans

#: The track management the tracker benchmarks run (M-of-N confirmation,
#: single-point births), fixed so that their tables compare across versions
#: whatever TrackerConfig's defaults.
BENCH_MANAGEMENT = dict(confirmation="m_of_n", initiation="single")

_BLOCK = 10     # scans each tracker ticks in turn (see _measure)
_LOOP_ROW_BYTES = 256           # the bare loop's bytes per target (about a track row's state)
_LOOP_MAX_BYTES = 64 << 20      # at most (1,000,000 targets: far past the caches all the same)
LOOP_PASSES = 8                 # its parallel regions per call (a tick runs about eight)
_TRIP_ROUNDS = 500              # round trips a block (~0.2 ms between two cores)


def loop_buffer(n):
    """The bare loop's buffer for `n` targets: 256 bytes each, at most 64 MiB.

    ``sweep(loop_buffer(n), threads, LOOP_PASSES)`` (dod/tracker/_bare_loop.pyx)
    is one timed call: the floor under a tick of `n` targets, a loop over as
    many bytes with nothing else to do; asv times the same.

    Parameters
    ----------
    n : int
        Targets.

    Returns
    -------
    numpy.ndarray
        float64, filled with ones.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    return np.ones(min(_LOOP_MAX_BYTES, _LOOP_ROW_BYTES * n) // 8)


def _stats(ms, cpu, rows):
    """(p50, p99, max, timed ticks, cpu p99, cpu p50, ns per track at p50)."""
    p50 = float(np.median(ms))
    return (p50, float(np.percentile(ms, 99)), float(ms.max()), ms.size,
            float(np.percentile(cpu, 99)), float(np.median(cpu)), 1e6 * p50 / max(1.0, float(np.median(rows))))


def _measure(n, threads, k, warmup, reference, keep_gc, seed, dim, budget_s, passes=False, initiation="single",
             prefault=True, stamped=False, events=False, log=False, layout="lanes", dtype="float64"):
    """Tick every tracker on the same scans; returns ({name: stats}, confirmed);
    stats["sorts"] holds how many timed ticks of each dod tracker sorted
    its rows ({count: ticks}); with `passes`, stats["passes t<count>"]
    holds each dod tracker's (median ms of each pass in PASS_NAMES order, median idle ms, median idle share);
    with `prefault`, stats["prefault"] the bytes each dod tracker faulted in
    ({count: bytes}) before its first tick; with `stamped`, stats["stamped"]
    those of a tracker of the first thread count fed time stamps; with
    `events`, stats["t<count>e"] the twin's that records the events; with
    `log` (implies `events`), stats["t<count>a"] the twin's tick plus its
    track log's append (per scan: the sum) and stats["dropped"] ({count:
    scans the log dropped}).

    The scans stream in blocks of up to _BLOCK (fewer above 400,000
    targets: a block holds at most ~4 million detections), and every
    tracker ticks the whole block in turn: its caches stay warm within a
    block, every tracker is timed through the same swings of a shared
    machine's speed (one tracker over all scans, then the next, put minutes
    between the runs a ratio compares), and memory stays bounded at any N."""
    cfg = TrackerConfig(dim=dim, capacity=max(64, 4 * n), max_detections=max(64, 2 * n + 64), layout=layout,
                        dtype=dtype, **dict(BENCH_MANAGEMENT, initiation=initiation))
    trackers = {}
    for nt in threads:
        trackers[f"t{nt}"] = Tracker(cfg, threads=nt)
        if events:
            trackers[f"t{nt}e"] = Tracker(cfg, threads=nt, events=True)
    logs = {}
    if log:
        from dod.tracker.track_log import TrackLog

        # The writer builds and writes every batch, to the null device: the disk's pace is the
        # machine's (a scan of 10,000 tracks is ~5 MB), what the tick's thread pays is the log's.
        # At idle priority, as the demo runs it: in the slack, never preempting a tick.
        for nt in threads:
            logs[f"t{nt}e"] = TrackLog(os.devnull, trackers[f"t{nt}e"], idle=True)
    appended = {name: [] for name in logs}
    prof = {}
    for name, tr in trackers.items():
        tr.profile = passes
        prof[name] = []
    # As the demo does before its loop: without it, the first tick to reach
    # a page of the table's capacity or of the scratch pays its fault inside
    # the timed window (milliseconds for a huge page the host backs anew).
    # Over every core: a fresh VM backs pages slowly, and more threads fault
    # the ~4 GiB of a 1M-target tracker in less time.
    cores = min(len(dod.initial_cpus) if dod.initial_cpus else os.cpu_count() or 1, MAX_THREADS)   # ours (taskset)
    faulted = {nt: trackers[f"t{nt}"].prefault(threads=cores) for nt in threads} if prefault else None
    if stamped:
        trackers["stamped"] = Tracker(cfg, threads=threads[0])
        if prefault:
            trackers["stamped"].prefault(threads=cores)
    for nt in threads if prefault and events else ():
        trackers[f"t{nt}e"].prefault(threads=cores)
    if reference:
        trackers["reference"] = ReferenceTracker(cfg)
    ms = {name: [] for name in trackers}
    cpu = {name: [] for name in trackers}
    rows = {name: [] for name in trackers}
    spent = {name: 0.0 for name in trackers}
    sorting = {f"t{nt}": 0 for nt in threads}   # timed ticks that sorted the rows (a sort's price on top)
    # With several thread counts, a bare parallel loop (dod.tracker._bare_loop)
    # is timed in the same blocks: the machine's own speedup at this moment.
    buf = loop_buffer(n) if len(threads) > 1 else None
    loop = {nt: [] for nt in threads}
    trips = []          # and a cache line's round trip between two threads, once a block
    scans = iter_scans(n, warmup + k, seed=seed, pd=0.9, dim=dim)
    block = max(1, min(_BLOCK, 4_000_000 // max(1, n)))
    was = gc.isenabled()
    if not keep_gc:
        gc.disable()
    try:
        s0 = 0
        while True:
            chunk = [(sc.detections, sc.dt) for _, sc in zip(range(block), scans)]
            if not chunk:
                break
            stamps = [float(s * dt) for s, (_, dt) in enumerate(chunk, s0)]    # (made before the timing)
            turn = list(trackers.items())
            if stamped and (s0 // block) % 2:       # the stamped and dt trackers take turns going first
                first = [i for i, (name, _) in enumerate(turn) if name in (f"t{threads[0]}", "stamped")]
                turn[first[0]], turn[first[1]] = turn[first[1]], turn[first[0]]
            for name, tr in turn:
                for s, (z, dt) in enumerate(chunk, s0):
                    sorts = getattr(tr, "sorts", 0)
                    stamp = stamps[s - s0]
                    c0 = time.process_time_ns()
                    t0 = time.perf_counter_ns()
                    if name == "stamped":
                        tr.tick(z, time=stamp)
                    else:
                        tr.tick(z, dt)
                    t1 = time.perf_counter_ns()
                    c1 = time.process_time_ns()
                    if name in logs:
                        # A dropped scan (the writer behind: the disk's pace, not the tick's) costs
                        # nothing to copy: only queued scans time the append.
                        queued = logs[name].append()
                        if s >= warmup:
                            appended[name].append((time.perf_counter_ns() - t1) / 1e6 if queued else np.nan)
                    spent[name] += (t1 - t0) / 1e9
                    if s >= warmup:
                        ms[name].append((t1 - t0) / 1e6)
                        cpu[name].append((c1 - c0) / 1e6)
                        rows[name].append(len(tr))
                        if name in sorting and tr.sorts != sorts:
                            sorting[name] += 1
                        if passes and name in prof:
                            p = tr.last_profile()
                            prof[name].append([p[q][0] for q in PASS_NAMES] + [sum(v[1] for v in p.values()),
                                                                               (t1 - t0) / 1e6])
                if name == "reference" and spent[name] > budget_s and len(ms[name]) >= 10:
                    del trackers[name]          # too slow to finish: keep what was timed
            for nt in threads if buf is not None else ():
                for s in range(s0, s0 + len(chunk)):
                    t0 = time.perf_counter_ns()
                    sweep(buf, nt, LOOP_PASSES)
                    if s >= warmup:
                        loop[nt].append((time.perf_counter_ns() - t0) / 1e6)
            if buf is not None and s0 + len(chunk) > warmup:
                trips.append(round_trip_ns(_TRIP_ROUNDS))
            s0 += len(chunk)
            if s0 > warmup and all(len(ms[name]) >= 10 for name in trackers) and \
                    sum(spent[name] for name in trackers) > budget_s * max(1, len(threads)):
                break
    finally:
        if was:
            gc.enable()
        for lg in logs.values():
            lg.close()
    out = {}
    for name in ms:
        if ms[name]:
            out[name] = _stats(np.array(ms[name]), np.array(cpu[name]), np.array(rows[name]))
    for name in appended:
        a = np.array(appended[name])
        q = ~np.isnan(a)
        if not q.any():
            raise RuntimeError("the track log dropped every timed scan (its writer never kept up)")
        both = np.array(ms[name])[q] + a[q]
        out[name[:-1] + "a"] = _stats(both, np.array(cpu[name])[q], np.array(rows[name])[q])
        out[name[:-1] + "append"] = float(np.median(a[q]))
    if logs:
        out["dropped"] = {int(name[1:-1]): lg.dropped for name, lg in logs.items()}
    if buf is not None:
        out["loop"] = {nt: float(np.median(loop[nt])) for nt in threads}
        out["trip"] = (float(np.median(trips)), float(np.min(trips)), float(np.max(trips)))
    out["sorts"] = {nt: sorting[f"t{nt}"] for nt in threads}
    if faulted is not None:
        out["prefault"] = faulted
    for nt in threads if passes else ():
        a = np.array(prof[f"t{nt}"])
        out[f"passes t{nt}"] = (np.median(a[:, :len(PASS_NAMES)], axis=0), float(np.median(a[:, -2])),
                                float(np.median(a[:, -2] / (nt * a[:, -1]))))
        # each pass over its own tick, then the median: a slow tick's passes weigh as much as a fast one's
        f = a[:, :len(PASS_NAMES)] / a[:, -1:]
        out[f"shares t{nt}"] = np.median(np.column_stack([f, 1.0 - f.sum(axis=1)]), axis=0)
    return out, trackers[f"t{threads[0]}"].counts()["confirmed"]


def run(sizes=(10, 100, 1000, 10000), scans=None, quick=False, reference=True, keep_gc=False,
        seed=0, dim=2, out=print, threads=(1,), markdown=False, reference_max=20000, passes=False,
        initiation="single", prefault=True, stamped=False, events=False, log=False, layout="lanes",
        dtype="float64"):
    """Time the tick at each size and thread count; print the table with `out`; return the rows.

    Parameters
    ----------
    sizes : sequence of int, default (10, 100, 1000, 10000)
        Targets of each row.
    scans : int, optional
        Timed ticks per tracker; default by size (300 up to 1,000 targets, 150
        up to 100,000, fewer with `quick` and above).
    quick : bool, default False
        Fewer ticks and a shorter time budget (a smoke run).
    reference : bool, default True
        Also time the numpy reference tracker (up to `reference_max` targets).
    keep_gc : bool, default False
        Leave the cyclic GC enabled while timing.
    seed : int, default 0
        The scenarios' seed.
    dim : int, default 2
        2 or 3.
    out : callable, default print
        Where the tables go, a line at a time.
    threads : sequence of int, default (1,)
        Thread counts to time, each >= 1.
    markdown : bool, default False
        Print Markdown tables.
    reference_max : int, default 20000
        The largest size the reference runs at.
    passes : bool, default False
        Also time each pass (:attr:`Tracker.profile <dod.tracker.Tracker.profile>`) and print a second table.
    initiation : str, default "single"
        How dod's trackers start tracks (the demo uses ``"two_point"``).
    prefault : bool, default True
        Call each dod tracker's :meth:`~dod.tracker.Tracker.prefault` before its first tick.
    stamped : bool, default False
        Also time a tracker of the first thread count fed time stamps
        (``tick(z, time=t)``) on the same scans, and print the comparison.
    events : bool, default False
        Also tick, in the same blocks, a twin of each dod tracker that records
        the events (``events=True``), and print the difference of the medians.
    log : bool, default False
        As `events`, and the twin appends each scan to a track log
        (:class:`~dod.tracker.track_log.TrackLog`, written to the null device); print
        the tick alone, with events, and with events and the append.
    layout : str, default "lanes"
        The dod trackers' track-table layout (:class:`~dod.tracker.ExecutionConfig`'s
        ``layout``: ``"lanes"`` or ``"rows"``).
    dtype : str, default "float64"
        The dod trackers' precision of x and P (:class:`~dod.tracker.FilterConfig`'s
        ``dtype``: ``"float64"`` or ``"float32"``); the reference stays float64.

    Returns
    -------
    list of dict
        One per size: ``n``, ``confirmed``, ``dod`` (the first thread count's
        stats), ``threads`` ``{count: stats}``, ``sorts`` ``{count: timed ticks
        that sorted the rows}``, ``reference`` when it ran, with `passes`
        ``passes`` ``{count: (ms per pass in PASS_NAMES order, idle ms, idle
        share)}`` (medians over the timed ticks) and ``pass_shares``
        ``{count: array}`` (each pass's share of its tick in PASS_NAMES order,
        then the share outside the passes; medians), with `prefault` ``prefault``
        ``{count: bytes}``, with `stamped` ``stamped`` (its stats), with `events` ``events``
        ``{count: stats}`` (the twins'), with `log` ``log`` ``{count: (stats of
        tick + append, median append ms, scans dropped)}``. Stats: ``(p50, p99, max, ticks, cpu p99, cpu p50,
        ns per track)``, times in ms.

    Raises
    ------
    ValueError
        For a thread count below 1, or a size or dim the tracker refuses.

    Notes
    -----
    Thread-safety: one call at a time (it times threads of its own; another
    busy thread skews every number). Timings are for comparing within one run.
    """
    threads = tuple(threads)
    events = events or log
    if not threads or any(int(t) < 1 for t in threads):
        raise ValueError(f"thread counts must be >= 1, got {threads!r}")
    rows = []
    for n in sizes:
        if scans:
            k = scans
        elif n >= 1000000:
            k = 20
        elif n >= 100000:
            k = 40 if quick else 100
        else:
            k = 60 if quick else (300 if n <= 1000 else 150)
        warmup = 30 if quick or n >= 100000 else 50
        if n >= 1000000:
            warmup = 12
        res, confirmed = _measure(n, threads, k, warmup, reference and n <= reference_max, keep_gc, seed, dim,
                                  budget_s=10.0 if quick else 30.0, passes=passes, initiation=initiation,
                                  prefault=prefault, stamped=stamped, events=events, log=log, layout=layout,
                                  dtype=dtype)
        row = {"n": n, "confirmed": confirmed, "threads": {t: res[f"t{t}"] for t in threads},
               "dod": res[f"t{threads[0]}"], "sorts": res["sorts"]}
        if "reference" in res:
            row["reference"] = res["reference"]
        if "loop" in res:
            row["loop"] = res["loop"]
            row["trip"] = res["trip"]
        if passes:
            row["passes"] = {t: res[f"passes t{t}"] for t in threads}
            row["pass_shares"] = {t: res[f"shares t{t}"] for t in threads}
        if prefault:
            row["prefault"] = res["prefault"]
        if stamped:
            row["stamped"] = res["stamped"]
        if events:
            row["events"] = {t: res[f"t{t}e"] for t in threads}
        if log:
            row["log"] = {t: (res[f"t{t}a"], res[f"t{t}append"], res["dropped"][t]) for t in threads}
        rows.append(row)
    _print(rows, threads, dim, keep_gc, markdown, out, initiation, prefault, layout, dtype)
    for r in rows if stamped else ():
        d, s = r["dod"], r["stamped"]
        out(("- " if markdown else "") + f"N={r['n']}: time-stamped ticks p50 {s[0]:.4f} ms, p99 {s[1]:.4f} ms; "
            f"dt ticks p50 {d[0]:.4f} ms, p99 {d[1]:.4f} ms (stamped / dt p50 {s[0] / d[0]:.3f}; "
            "goal: no dearer, within noise)")
    for r in rows if events else ():
        for t in threads:
            a, b = r["threads"][t], r["events"][t]
            out(("- " if markdown else "") + f"N={r['n']} threads={t}: events on p50 {b[0]:.3f} ms, off "
                f"{a[0]:.3f} ms ({100 * (b[0] / a[0] - 1):+.1f} %); cpu p50 {b[5]:.3f} / {a[5]:.3f} ms "
                f"({100 * (b[5] / a[5] - 1):+.1f} %)" + (" (goal <= +5 % at N=10000)" if r["n"] == 10000 else ""))
    for r in rows if log else ():
        for t in threads:
            a, b = r["threads"][t], r["events"][t]
            c, append, dropped = r["log"][t]
            out(("- " if markdown else "") + f"N={r['n']} threads={t}: p50 tick {a[0]:.3f} ms, "
                f"+ events {b[0]:.3f} ms ({b[0] / a[0]:.3f}x), + events + log append {c[0]:.3f} ms "
                f"({c[0] / a[0]:.3f}x; append alone p50 {append:.3f} ms); {dropped} scans dropped (the "
                f"writer behind; the append is timed on the scans queued)"
                + (" (goal <= 1.05x at N=10000)" if r["n"] == 10000 else ""))
    if passes:
        _print_passes(rows, threads, markdown, out)
    return rows


def _print_table(head, cols, lines, markdown, out):
    """`lines` under `cols`: a Markdown table, or columns aligned right."""
    if markdown:
        out(f"**{head}**")
        out("")
        out("| " + " | ".join(cols) + " |")
        out("|" + "---:|" * len(cols))
        for line in lines:
            out("| " + " | ".join(line) + " |")
    else:
        out(head)
        w = [max(len(c), *(len(line[i]) for line in lines)) if lines else len(c) for i, c in enumerate(cols)]
        out("  ".join(c.rjust(w[i]) for i, c in enumerate(cols)))
        for line in lines:
            out("  ".join(v.rjust(w[i]) for i, v in enumerate(line)))


def _print_passes(rows, threads, markdown, out):
    head = ("where the dod tick goes (Tracker.profile; medians of the timed ticks): each pass's "
            "wall time in ms, and below it its share of the tick (% of the tick's wall time; the rest, "
            "\"outside\", is the call's own checks); idle = the workers' waits in its row-chunk regions, "
            "summed over the workers; idle share = idle / (threads x tick)")
    cols = ["N", "threads", "of", *PASS_NAMES, "outside", "idle", "idle share"]
    lines = []
    for r in rows:
        for t in threads:
            wall, idle, share = r["passes"][t]
            shares = r["pass_shares"][t]
            lines.append([f"{r['n']:,}", str(t), "ms", *(f"{v:.3f}" for v in wall), "-", f"{idle:.3f}",
                          f"{100 * share:.1f} %"])
            lines.append(["", "", "% tick", *(f"{100 * v:.1f}" for v in shares), "-", "-"])
    out("")
    _print_table(head, cols, lines, markdown, out)


def _print(rows, threads, dim, keep_gc, markdown, out, initiation="single", prefault=True, layout="lanes",
           dtype="float64"):
    head = (f"dod.tracker tick time (ms), {dim}-D CV, Pd 0.9, clutter 0.2 N, 50 Hz; "
            + ("two-point initiation; " if initiation != "single" else "")
            + ("x and P in rows; " if layout == "rows" else "")
            + ("x and P in float32; " if dtype == "float32" else "") +
            f"GC {'on' if keep_gc else 'off'} while timing; "
            + ("trackers prefaulted" if prefault else "not prefaulted (pages fault in the ticks)") +
            "; CPU = process CPU per tick (all threads); sorts = timed ticks that sorted the rows "
            "(Tracker.sorts: each such tick pays a sort on top, and a p99 over few ticks is one of them)")
    cols = ["N", "threads", "confirmed", "p50", "p99", "cpu p50", "cpu p99", "max", "sorts", "ns/track",
            "vs 1 thread", "bare loop", "ref p50", "ref/dod"]
    lines = []
    for r in rows:
        base = r["threads"][threads[0]][0]
        f = r.get("reference")
        loop = r.get("loop")
        for t in threads:
            d = r["threads"][t]
            lines.append([f"{r['n']:,}", str(t), f"{r['confirmed']:,}" if r["confirmed"] is not None else "-",
                          f"{d[0]:.3f}", f"{d[1]:.3f}", f"{d[5]:.3f}", f"{d[4]:.3f}", f"{d[2]:.3f}",
                          f"{r['sorts'][t]} of {d[3]}", f"{d[6]:.0f}", f"{base / d[0]:.2f}x",
                          f"{loop[threads[0]] / loop[t]:.2f}x" if loop else "-",
                          f"{f[0]:.3f}" if f else "-", f"{f[0] / d[0]:.1f}x" if f else "-"])
    _print_table(head, cols, lines, markdown, out)
    goals = []
    for r in rows:
        d = r["dod"]
        if r["n"] == 1000:
            goals.append(f"N=1000: median {d[0]:.3f} ms (goal <= 0.5), p99 {d[1]:.3f} ms "
                         f"(cpu {d[4]:.3f}; goal <= 1)"
                         + (f", {r['reference'][0] / d[0]:.1f}x reference (goal >= 5)"
                            if "reference" in r else ""))
        if r["n"] == 10000:
            goals.append(f"N=10000: p99 {d[1]:.3f} ms (cpu {d[4]:.3f}; goal <= 10)")
        if r["n"] == 100000 and 2 in r["threads"]:
            goals.append(f"N=100000 threads=2: p99 {r['threads'][2][1]:.3f} ms (goal <= 20)")
        if r["n"] == 1000000 and 16 in r["threads"]:
            d = r["threads"][16]
            goals.append(f"N=1000000 threads=16: p99 {d[1]:.3f} ms (goal <= 20; {r['sorts'][16]} of the "
                         f"{d[3]} timed ticks sorted)")
        if r["n"] >= 10000 and 1 in r["threads"] and 2 in r["threads"]:
            goals.append(f"N={r['n']}: threads 1 -> 2 {r['threads'][1][0] / r['threads'][2][0]:.2f}x "
                         "(goal >= 1.7; a bare parallel loop in the same run: "
                         f"{r['loop'][1] / r['loop'][2]:.2f}x; a cache line's round trip between two "
                         "threads: median {:.0f} ns, {:.0f}-{:.0f})".format(*r["trip"]))
    by_n = {r["n"]: r for r in rows}
    if 10000 in by_n and 100000 in by_n:
        for t in threads:
            a, b = by_n[10000]["threads"][t][6], by_n[100000]["threads"][t][6]
            goals.append(f"threads={t}: ns/track at 100k / 10k = {b / a:.2f} (goal <= 1.3)")
    for g in goals:
        out(("- " if markdown else "") + g)


# ---------------------------------------------------------------- the predict pass against the memory floor

_COPY_MIN_BYTES = 256 << 20     # the copy's array: at least this, and 8x the last-level cache
_COPY_ROUNDS = 8                # copies timed (best of), half before the ticks and half after
_COAST_DT = 0.02                # the empty scans' time step (50 Hz)


def predict_bytes(dim, dtype="float64"):
    """What the predict pass must move per track, in bytes, by item.

    A track's state x (2 dim values) and its packed covariance P (dim (2 dim
    + 1) values), in the table's `dtype`, read and written; the pass's writes of the innovation
    inverse (dim x dim float64), the gate half-widths (dim float64), the
    widest half-width (float64) and whether the track can be gated (one
    byte); its age (uint32) read and written; its detection and its cell in
    the index reset (int32 each). The sum, times the tracks, over a copy's
    bandwidth is the pass's memory floor (:func:`floor`).

    Parameters
    ----------
    dim : int
        2 or 3.
    dtype : str, default "float64"
        The track table's ``TrackerConfig(dtype=...)``: ``"float64"`` or
        ``"float32"`` (x and P in 4 bytes a value; the rest as in float64).

    Returns
    -------
    dict
        Item name to bytes per track, in the order above; ``sum(d.values())``
        is the total (297 in 2-D, 553 in 3-D; in float32 185 and 337).

    Raises
    ------
    ValueError
        For a dim other than 2 or 3, or another dtype.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, not {dim!r}")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', not {dtype!r}")
    n = 2 * dim
    return {"x, P read + written": 2 * (n + dim * (n + 1)) * np.dtype(dtype).itemsize, "Si": dim * dim * 8, "hw": dim * 8, "hm": 8,
            "gateable": 1, "age read + written": 2 * 4, "track_det": 4, "loc_t": 4}


def _last_level_cache_bytes():
    """The largest cache the first CPU reports (sysfs), or 32 MiB when none does."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    for entry in os.listdir(base) if os.path.isdir(base) else ():
        try:
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KMGkmg")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else 32 << 20


def copy_nbytes():
    """The array size :func:`copy_bandwidth` copies by default: at least
    256 MiB and eight times the last-level cache (read from sysfs; 32 MiB
    assumed where it says nothing), so that the copy runs at memory speed.

    Returns
    -------
    int
        Bytes, a multiple of 8.

    Notes
    -----
    Thread-safety: any thread (reads sysfs).
    """
    return max(_COPY_MIN_BYTES, 8 * _last_level_cache_bytes()) // 8 * 8


def copy_bandwidth(nbytes=None, rounds=5):
    """One core's copy bandwidth: bytes read plus bytes written per second.

    Copies one float64 array into another (``numpy.copyto``, one thread)
    `rounds` times, after one untimed copy that faults both in, and keeps
    the fastest: the memory speed the machine gives one core at its best,
    the floor's denominator (:func:`floor`).

    Parameters
    ----------
    nbytes : int, optional
        Bytes of each array (default :func:`copy_nbytes`: far past the
        last-level cache). Two such arrays are allocated.
    rounds : int, default 5
        Timed copies, >= 1.

    Returns
    -------
    float
        ``2 * nbytes / seconds`` of the fastest copy.

    Raises
    ------
    ValueError
        For `nbytes` below 8 or `rounds` below 1.

    Notes
    -----
    Thread-safety: any thread; another busy thread on the same core or
    memory lowers the figure.
    """
    nbytes = copy_nbytes() if nbytes is None else int(nbytes)
    if nbytes < 8 or int(rounds) < 1:
        raise ValueError(f"nbytes must be >= 8 and rounds >= 1, got {nbytes!r} and {rounds!r}")
    src = np.ones(nbytes // 8)
    dst = np.zeros_like(src)
    np.copyto(dst, src)
    best = None
    for _ in range(int(rounds)):
        t0 = time.perf_counter_ns()
        np.copyto(dst, src)
        ns = time.perf_counter_ns() - t0
        best = ns if best is None else min(best, ns)
    return 2.0 * src.nbytes / (max(best, 1) / 1e9)


def _coasting_tracker(n, dim, seed, dtype="float64"):
    """A one-thread tracker holding `n` confirmed tracks that empty scans never delete.

    Scan 1 puts `n` detections (uniform over a square of 20 m per target:
    the scenario's density) and every one starts a track (single-point
    births into an empty table); M-of-N 1 of 2 confirms each at its next
    scan whatever it holds, and max_misses 2**32 - 1 keeps a confirmed
    track through any run of misses. Prefaulted."""
    side = 20.0 * n ** (1.0 / dim)
    cfg = TrackerConfig(dim=dim, capacity=max(64, 2 * n), max_detections=max(64, n + 64),
                        confirmation="m_of_n", initiation="single", confirm_m=1, confirm_n=2,
                        max_misses=(1 << 32) - 1, dtype=dtype)
    tr = Tracker(cfg, threads=1)
    tr.prefault(threads=1)
    tr.tick(np.random.default_rng(seed).uniform(0.0, side, (n, dim)), _COAST_DT)
    return tr


def floor(n=100000, dim=2, scans=None, warmup=5, seed=0, rounds=_COPY_ROUNDS, out=print, markdown=False,
          dtype="float64"):
    """The predict pass at `n` targets, one thread, against its memory floor.

    In the same run: one core's copy bandwidth (:func:`copy_bandwidth`,
    half its rounds before the ticks and half after, the best kept) and
    the predict pass alone, timed by :attr:`Tracker.profile
    <dod.tracker.Tracker.profile>` on a tracker of `n` confirmed tracks fed
    empty scans: with no detection the predict_gate pass gates nothing, so
    its time is predict's (each track moved a step, its innovation inverse
    and gate half-widths written). The tracks are confirmed with M-of-N 1 of
    2 and max_misses 2**32 - 1, so none dies during the timed ticks (checked:
    RuntimeError otherwise). The floor is :func:`predict_bytes` times `n`
    over the bandwidth: the time the pass would take if it only moved its
    bytes at the speed of a copy. It bounds the pass only when the bytes
    the pass touches (its working set) are past the last-level cache: below
    that, the rows may still be in the cache from the previous tick, and
    the ratio may fall under 1 (a line says which). Prints what it measured
    with `out`, ending with the ratio line ``measured / floor``.

    Parameters
    ----------
    n : int, default 100000
        Targets (confirmed tracks), >= 1.
    dim : int, default 2
        2 or 3.
    scans : int, optional
        Timed empty ticks (default 60 at 100,000 targets and above, 200 below).
    warmup : int, default 5
        Empty ticks before the timed ones (the first confirms every track).
    seed : int, default 0
        Seed of the detections that start the tracks.
    rounds : int, default 8
        Timed copies of the bandwidth measurement, >= 2.
    out : callable, default print
        Where the lines go.
    markdown : bool, default False
        Print the lines as a Markdown list.
    dtype : str, default "float64"
        The tracker's ``TrackerConfig(dtype=...)``; in ``"float32"`` the pass
        runs the float32 kernels and the floor counts x and P in float32
        (:func:`predict_bytes`), and a line also gives the floor of the same
        pass with float64 x and P.

    Returns
    -------
    dict
        ``n``, ``dim``, ``dtype``, ``bytes`` (:func:`predict_bytes`), ``bytes_per_track``
        (their sum), ``bandwidth`` (bytes per second), ``copy_bytes`` (each
        copied array's size), ``predict_ms`` (median of the timed ticks),
        ``predict_ms_p10``, ``predict_ms_p90``, ``tick_ms`` (median of the whole
        empty ticks), ``ticks`` (timed), ``live`` (tracks after the last tick),
        ``working_set`` (bytes the pass touches, each once), ``llc`` (the
        last-level cache's bytes, from sysfs; 32 MiB assumed where it says
        nothing), ``floor_ms``, ``ratio`` (``predict_ms / floor_ms``) and
        ``floor64_ms`` (the floor with float64 x and P: ``floor_ms`` in
        float64).

    Raises
    ------
    ValueError
        For `n` below 1, a dim the tracker refuses, `warmup` below 1, `rounds`
        below 2, `scans` below 1 or a dtype other than float64 and float32.
    RuntimeError
        When a track died or was never confirmed (the pass would time fewer rows).

    Notes
    -----
    Thread-safety: one call at a time (another busy thread skews every
    number). Timings are for comparing within one run.
    """
    n, dim, warmup, rounds = int(n), int(dim), int(warmup), int(rounds)
    scans = int(scans) if scans is not None else (60 if n >= 100000 else 200)
    if n < 1 or warmup < 1 or rounds < 2 or scans < 1:
        raise ValueError(f"n, warmup and scans must be >= 1 and rounds >= 2, got n={n}, warmup={warmup}, "
                         f"scans={scans}, rounds={rounds}")
    parts = predict_bytes(dim, dtype)
    per_track = sum(parts.values())
    nbytes = copy_nbytes()
    bandwidth = copy_bandwidth(nbytes, rounds // 2)
    tr = _coasting_tracker(n, dim, seed, dtype)
    empty = np.empty((0, dim))
    predict = np.zeros(scans)
    tick = np.zeros(scans)
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(warmup):
            tr.tick(empty, _COAST_DT)
        confirmed = tr.counts()["confirmed"]
        tr.profile = True
        for s in range(scans):
            t0 = time.perf_counter_ns()
            tr.tick(empty, _COAST_DT)
            tick[s] = (time.perf_counter_ns() - t0) / 1e6
            predict[s] = tr.last_profile()["predict_gate"][0]
    finally:
        if was:
            gc.enable()
    live = len(tr)
    if confirmed != n or live != n or tr.counts()["confirmed"] != n:
        raise RuntimeError(f"{n} tracks were to coast through the timed ticks: {confirmed} confirmed before "
                           f"them, {live} live after")
    bandwidth = max(bandwidth, copy_bandwidth(nbytes, rounds - rounds // 2))
    res = {"n": n, "dim": dim, "dtype": dtype, "bytes": parts, "bytes_per_track": per_track, "bandwidth": bandwidth,
           "copy_bytes": nbytes, "predict_ms": float(np.median(predict)),
           "predict_ms_p10": float(np.percentile(predict, 10)), "predict_ms_p90": float(np.percentile(predict, 90)),
           "tick_ms": float(np.median(tick)), "ticks": scans, "live": live}
    # what the pass touches, each byte once: at 100,000 tracks in 2-D ~18 MB, which a large
    # last-level cache may hold from one tick to the next (then the floor bounds nothing)
    res["working_set"] = n * (per_track - parts["x, P read + written"] // 2 - parts["age read + written"] // 2)
    res["llc"] = _last_level_cache_bytes()
    res["floor_ms"] = 1e3 * per_track * n / bandwidth
    res["floor64_ms"] = 1e3 * sum(predict_bytes(dim).values()) * n / bandwidth
    res["ratio"] = res["predict_ms"] / res["floor_ms"]
    _print_floor(res, markdown, out)
    return res


def _print_floor(r, markdown, out):
    d, n = r["dim"], r["n"]
    b = r["bytes"]
    f32 = r["dtype"] == "float32"
    lines = [
        f"predict pass against its memory floor: N={n:,}, {d}-D CV, one thread"
        + (", x and P in float32" if f32 else ""),
        f"tracks: {n:,} confirmed (M-of-N 1 of 2) with max_misses 2**32 - 1, fed empty scans "
        f"(dt {_COAST_DT} s): none died in the timed ticks ({r['live']:,} live after them); with no "
        "detections the predict_gate pass gates nothing, so its time is the predict pass",
        f"bytes per track: x and P read + written 2 x ({2 * d} + {d * (2 * d + 1)}) x {4 if f32 else 8} = "
        f"{b['x, P read + written']}, innovation inverse Si {b['Si']}, half-widths hw {b['hw']}, hm {b['hm']}, "
        f"gateable {b['gateable']}, age read + written {b['age read + written']}, track_det {b['track_det']}, "
        f"loc_t {b['loc_t']}: {r['bytes_per_track']} B",
        f"copy bandwidth: {r['bandwidth'] / 1e9:.2f} GB/s (one core, numpy.copyto of {r['copy_bytes'] >> 20} MiB, "
        "bytes read + written per second, the best copy, before and after the ticks)",
        f"predict pass: median {r['predict_ms']:.4f} ms over {r['ticks']} ticks (p10 {r['predict_ms_p10']:.4f}, "
        f"p90 {r['predict_ms_p90']:.4f}), {1e6 * r['predict_ms'] / n:.2f} ns per track, "
        f"{100 * r['predict_ms'] / r['tick_ms']:.0f} % of the empty tick ({r['tick_ms']:.4f} ms)",
        f"floor: {r['bytes_per_track']} B x {n:,} / {r['bandwidth'] / 1e9:.2f} GB/s = {r['floor_ms']:.4f} ms"
        + (f" (with float64 x and P: {r['floor64_ms']:.4f} ms)" if f32 else ""),
        f"working set: {r['working_set'] / 1e6:.1f} MB (each byte the pass touches once), last-level cache "
        f"{r['llc'] / 1e6:.1f} MB: " + ("past it, the floor bounds the pass" if r["working_set"] > r["llc"] else
                                        "within it, the pass may find its rows in the cache from one tick to "
                                        "the next and run below the floor"),
        f"measured / floor: {r['ratio']:.2f}x",
    ]
    for line in lines:
        out(("- " if markdown else "") + line)


def main(argv=None):
    """The command line ``python -m dod.tracker.bench`` (``--help`` lists its options).

    Runs :func:`run` with the options given, or with ``--accuracy``, ``--imm``
    or ``--radar`` the accuracy, IMM or radar benchmark
    (:mod:`dod.tracker.accuracy`, :mod:`dod.tracker.bench_imm`,
    :mod:`dod.tracker.bench_radar`).

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int or None
        The dispatched benchmark's exit status; None after the tick benchmark.

    Raises
    ------
    SystemExit
        For bad arguments (argparse's usage error, status 2).

    Notes
    -----
    Thread-safety: the main thread (it prints).
    """
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    if "--accuracy" in argv:
        from dod.tracker import accuracy

        argv.remove("--accuracy")
        return accuracy.main(argv)
    if "--imm" in argv:
        from dod.tracker import bench_imm

        argv.remove("--imm")
        return bench_imm.main(argv)
    if "--radar" in argv:
        from dod.tracker import bench_radar

        argv.remove("--radar")
        return bench_radar.main(argv)
    p = argparse.ArgumentParser(prog="python -m dod.tracker.bench", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sizes", default=None, help="comma-separated target counts (default 10,100,1000,10000; "
                                                  "with --floor 100000)")
    p.add_argument("--threads", default="1", help="comma-separated thread counts, e.g. 1,2,4")
    p.add_argument("--scans", type=int, default=None)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--reference-max", type=int, default=20000,
                   help="run the numpy reference only up to this many targets")
    p.add_argument("--gc", action="store_true", help="leave the cyclic GC enabled while timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dim", type=int, default=2, choices=(2, 3))
    p.add_argument("--initiation", choices=("single", "two_point"), default="single",
                   help="how dod's trackers start tracks (the demo: two_point)")
    p.add_argument("--passes", action="store_true",
                   help="also print where each tick goes, pass by pass (Tracker.profile)")
    p.add_argument("--events", action="store_true",
                   help="also time twins that record the events (events=True), in the same blocks")
    p.add_argument("--log", action="store_true",
                   help="also time the events twins with a track log appended after each tick")
    p.add_argument("--no-prefault", action="store_true",
                   help="leave the trackers' pages to be faulted by the ticks that first touch them")
    p.add_argument("--time", action="store_true",
                   help="also time a tracker fed time stamps (tick(z, time=t)) against the dt ticks")
    p.add_argument("--layout", choices=("lanes", "rows"), default="lanes",
                   help="the track table's layout (TrackerConfig layout): each track's x and P together, "
                        "or one lane per element")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="the track state and covariance's precision (TrackerConfig dtype)")
    p.add_argument("--floor", action="store_true",
                   help="instead: the predict pass alone (one thread, empty scans) against its memory floor, "
                        "bytes per track over one core's copy bandwidth")
    a = p.parse_args(argv)
    sizes = tuple(int(s) for s in (a.sizes or ("100000" if a.floor else "10,100,1000,10000")).split(",") if s)
    if a.floor:
        if a.threads.strip() != "1":
            p.error("--floor times one thread (the floor is one core's bandwidth); leave --threads out")
        try:
            for i, n in enumerate(sizes):
                if i:
                    print()
                floor(n, a.dim, a.scans, seed=a.seed, markdown=a.markdown, dtype=a.dtype)
        except ValueError as e:
            p.error(str(e))
        return None
    try:
        threads = tuple(int(s) for s in a.threads.split(",") if s)
        run(sizes, a.scans, a.quick, not a.no_reference, a.gc, a.seed, a.dim, threads=threads,
            markdown=a.markdown, reference_max=a.reference_max, passes=a.passes, initiation=a.initiation,
            prefault=not a.no_prefault, stamped=a.time, events=a.events, log=a.log, layout=a.layout,
            dtype=a.dtype)
    except ValueError as e:
        p.error(str(e))


if __name__ == "__main__":
    main()
