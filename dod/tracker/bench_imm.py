"""``python -m dod.tracker.bench --imm``: the IMM (motion="imm") against
constant velocity, accuracy and tick time, in the same run on the same scans.

Scenarios (:data:`dod.tracker.scenario.PRESETS`): ``manoeuvre`` (one scan
a second, every target alternating straight legs and turns of 0.05-0.3
rad/s) and ``straight`` (the same picture without turns); N targets, Pd
0.9, Poisson clutter 0.2 N per scan. Both trackers of a scenario tick the
same scans in lockstep (each scan: CV, then IMM), so the load of a shared
machine falls on both alike. Per scenario and motion: GOSPA (c = 10 m, mean
over scans, confirmed tracks), ID switches and MOTA
(:func:`dod.tracker.metrics.clear_mot`), the tick's median and p99 (ms,
wall clock, every tick after ``warmup`` timed alone), its median thread CPU time (the ratio's basis:
the work without preemption) and the Python memory blocks the ticks kept
(sys.getallocatedblocks over the timed ticks: 0 is zero allocations per tick).
Each tracker is prefaulted (``Tracker.prefault``, as ``python -m
dod.tracker.bench`` and the demo do) before its first tick, so no timed
tick takes a first-touch page fault; ``--no-prefault`` leaves them to the
ticks.

Goals (N = 1,000): manoeuvre GOSPA of the IMM >= 25 % lower than
CV and its ID switches at most half of CV's; the IMM (3 models) tick <= 3x
the CV tick; straight-line GOSPA within 3 % of CV; zero allocations per tick.

Options: ``--sizes 1000``, ``--scans 300``, ``--warmup 20``, ``--seed 0``,
``--threads 1``, ``--markdown``, ``--no-prefault``.
"""
import argparse
import gc
import sys
import time

from dod.tracker.openmp import default_wait_policy

default_wait_policy()       # before the engine loads libgomp (dod.tracker.openmp)

import numpy as np

from dod._report import table
from dod.tracker.bench import BENCH_MANAGEMENT
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metrics import mot_metrics, sparse_gospa
from dod.tracker.scenario import PRESET_CONFIG, PRESETS, generate

SCENARIOS = ("manoeuvre", "straight")
MOTIONS = ("cv", "imm")


def measure(n, scenario, motions=MOTIONS, scans=300, warmup=20, seed=0, threads=1, prefault=True):
    """One tracker per motion model over the same scenario, ticked in lockstep.

    On each scan every tracker ticks in turn, so machine load falls on all alike.

    Parameters
    ----------
    n : int
        Targets.
    scenario : str
        A key of :data:`dod.tracker.scenario.PRESETS` (``"manoeuvre"``,
        ``"straight"``).
    motions : tuple of str, default ("cv", "imm")
        The trackers' ``motion``.
    scans : int, default 300
        Scans ticked.
    warmup : int, default 20
        Leading scans left out of the timings and the allocation count.
    seed : int, default 0
        The scenario's seed.
    threads : int, default 1
        The trackers' ``threads``.
    prefault : bool, default True
        Fault each tracker's memory in (``Tracker.prefault``) before its first
        tick.

    Returns
    -------
    dict
        ``{motion: dict}`` with ``gospa`` (mean sparse GOSPA), ``switches``,
        ``mota``, ``p50``, ``p99`` (wall ms per tick), ``cpu50`` (thread CPU
        ms), ``kept_blocks`` (Python blocks the timed ticks kept),
        ``confirmed`` and ``prefault`` (the bytes faulted in; 0 without
        `prefault`).

    Raises
    ------
    KeyError
        For an unknown `scenario`.
    ValueError
        For a configuration the tracker refuses (``TrackerConfig``).

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    sc = generate(n, scans, seed=seed, **PRESETS[scenario])
    trackers = {m: Tracker(TrackerConfig(motion=m, capacity=max(64, 4 * n), max_detections=max(64, 2 * n + 64),
                                         threads=threads, **BENCH_MANAGEMENT, **PRESET_CONFIG[scenario]))
                for m in motions}
    faulted = {m: t.prefault() if prefault else 0 for m, t in trackers.items()}
    ms = {m: np.zeros(scans) for m in motions}
    cpu = {m: np.zeros(scans) for m in motions}
    estimates = {m: [None] * scans for m in motions}
    kept = dict.fromkeys(motions, 0)
    was = gc.isenabled()
    gc.disable()
    try:
        for s, (z, dt) in enumerate(sc):
            for m, t in trackers.items():
                b0 = sys.getallocatedblocks()
                c0 = time.thread_time_ns()
                t0 = time.perf_counter_ns()
                t.tick(z, dt)
                t1 = time.perf_counter_ns()
                c1 = time.thread_time_ns()
                b1 = sys.getallocatedblocks()
                if s >= warmup:
                    kept[m] += b1 - b0
                ms[m][s] = (t1 - t0) / 1e6
                cpu[m][s] = (c1 - c0) / 1e6
                estimates[m][s] = t.confirmed_tracks()
    finally:
        if was:
            gc.enable()
    out = {}
    for m, t in trackers.items():
        g = float(np.mean([sparse_gospa(tp, e[1]) for tp, e in zip(sc.truth_pos, estimates[m])]))
        mm = mot_metrics(sc, estimates[m])
        switches, mota = int(mm["num_switches"]), float(mm["mota"])
        out[m] = dict(gospa=g, switches=switches, mota=mota, p50=float(np.median(ms[m][warmup:])),
                      p99=float(np.percentile(ms[m][warmup:], 99)), cpu50=float(np.median(cpu[m][warmup:])),
                      kept_blocks=int(kept[m]), confirmed=int(t.counts()["confirmed"]), prefault=faulted[m])
    return out


def run(sizes=(1000,), scans=300, warmup=20, seed=0, threads=1, markdown=False, out=print, prefault=True):
    """Measure every size x scenario x motion; print the table and the goals.

    Parameters
    ----------
    sizes : tuple of int, default (1000,)
        Target counts.
    scans, warmup, seed, threads, prefault
        As :func:`measure`.
    markdown : bool, default False
        Print a Markdown table.
    out : callable, default print
        Takes each line of the report.

    Returns
    -------
    list of dict
        One row per size, scenario and motion: :func:`measure`'s dict with
        ``n``, ``scenario`` and ``motion`` added.

    Raises
    ------
    ValueError
        As :func:`measure`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    rows = []
    for n in sizes:
        for scenario in SCENARIOS:
            for motion, r in measure(n, scenario, MOTIONS, scans, warmup, seed, threads, prefault).items():
                r.update(n=n, scenario=scenario, motion=motion)
                rows.append(r)
    cols = ["N", "scenario", "motion", "GOSPA", "ID switches", "MOTA", "tick p50", "tick p99",
            "cpu p50", "vs CV (cpu)", "kept blocks"]
    by = {(r["n"], r["scenario"], r["motion"]): r for r in rows}
    lines = []
    for r in rows:
        cv = by[(r["n"], r["scenario"], "cv")]
        lines.append([f"{r['n']:,}", r["scenario"], r["motion"], f"{r['gospa']:.3f}",
                      str(r["switches"]), f"{r['mota']:.3f}",
                      f"{r['p50']:.3f}", f"{r['p99']:.3f}", f"{r['cpu50']:.3f}",
                      f"{r['cpu50'] / cv['cpu50']:.2f}x",
                      str(r["kept_blocks"])])
    head = (f"dod.tracker IMM vs CV: 2-D, Pd 0.9, clutter 0.2 N, one scan a second, {scans} scans "
            f"(first {warmup} not timed), threads={threads}; trackers "
            f"{'prefaulted' if prefault else 'not prefaulted'}; tick in ms")
    out(f"**{head}**\n" if markdown else head)
    out(table(cols, lines, markdown=markdown))
    for n in sizes:
        mc, mi = by[(n, "manoeuvre", "cv")], by[(n, "manoeuvre", "imm")]
        sc_, si = by[(n, "straight", "cv")], by[(n, "straight", "imm")]
        goals = [f"N={n} manoeuvre: IMM GOSPA {100 * (1 - mi['gospa'] / mc['gospa']):.1f}% lower than CV "
                 "(goal >= 25%)"]
        goals.append(f"N={n} manoeuvre: ID switches IMM/CV = {mi['switches']}/{mc['switches']} = "
                     f"{mi['switches'] / max(1, mc['switches']):.2f} (goal <= 0.5)")
        goals.append(f"N={n}: IMM tick / CV tick (median thread CPU) = {mi['cpu50'] / mc['cpu50']:.2f}x "
                     f"(manoeuvre), {si['cpu50'] / sc_['cpu50']:.2f}x (straight); wall clock "
                     f"{mi['p50'] / mc['p50']:.2f}x, {si['p50'] / sc_['p50']:.2f}x (goal <= 3)")
        goals.append(f"N={n} straight: IMM GOSPA {100 * (si['gospa'] / sc_['gospa'] - 1):+.1f}% vs CV "
                     "(goal within +3%)")
        goals.append(f"N={n}: blocks kept by the timed ticks: " +
                     ", ".join(f"{r['scenario']}/{r['motion']} {r['kept_blocks']}"
                               for r in rows if r["n"] == n) + " (goal 0)")
        for g in goals:
            out(("- " if markdown else "") + g)
    return rows


def main(argv=None):
    """``python -m dod.tracker.bench --imm``: parse `argv` and run :func:`run`.

    Options: ``--sizes 1000,5000``, ``--scans``, ``--warmup``, ``--seed``,
    ``--threads``, ``--markdown``, ``--no-prefault``.

    Parameters
    ----------
    argv : list of str or None, default None
        The arguments (``--help`` lists them); None reads ``sys.argv[1:]``.

    Returns
    -------
    None
        The report is printed.

    Raises
    ------
    SystemExit
        For bad arguments (argparse's usage error, status 2).

    Notes
    -----
    Thread-safety: the main thread (it prints).
    """
    p = argparse.ArgumentParser(prog="python -m dod.tracker.bench --imm", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000")
    p.add_argument("--scans", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--no-prefault", action="store_true",
                   help="leave the trackers' pages to be faulted by the ticks that first touch them")
    a = p.parse_args(argv)
    sizes = tuple(int(s) for s in a.sizes.split(",") if s)
    if not sizes or any(s < 1 for s in sizes) or a.scans <= a.warmup or a.warmup < 0:
        p.error("need sizes >= 1 and scans > warmup >= 0")
    run(sizes, a.scans, a.warmup, a.seed, a.threads, a.markdown, prefault=not a.no_prefault)


if __name__ == "__main__":
    main()
