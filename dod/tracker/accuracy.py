"""``python -m dod.tracker.bench --accuracy``: tracking accuracy in clutter, and
what the clutter options cost per tick, in one run.

Scenarios: dod's generator (:func:`dod.tracker.scenario.generate`), N targets
(2-D, constant velocity, 10 % crossing, 20 % born late or dying early), Pd
0.9, 50 Hz, Poisson clutter of 0.2, 1 and 3 false detections per target per
scan, uniform over the region (``--patches K`` adds rows where half the
clutter falls in K dense patches). Each row runs two trackers on the same
scans:

* ``m_of_n``: ``confirmation="m_of_n", initiation="single"`` (3-of-5
  confirmation, single-point births, deletion after 5 misses);
* ``score+2pt``: ``confirmation="score", initiation="two_point"`` (the
  default TrackerConfig) with the other clutter settings at their defaults (clutter density estimated
  online, Pd 0.9, v_max 50 m/s).

Scores (confirmed tracks against the truth, matched within 5 m): MOTA and
IDF1 (:func:`dod.tracker.metrics.clear_mot`), HOTA with DetA/AssA/LocA
(:func:`dod.tracker.metrics.hota`, similarity 1 - d/5 m), and false
confirmed tracks per scan (CLEAR MOT false positives / scans), each the
mean over the seeds (the spread is the range over the seeds).

Tick cost: at each clutter level, both trackers are fed the same scans
alternately, every tick timed alone (perf_counter_ns, GC off); the table
shows the median tick of each and their ratio (goal: score+2pt <= 1.3x
m_of_n at N = 1,000), and the net Python blocks per tick over a further
window of the same scans, after a discarded one (goal 0). The timed
trackers are prefaulted (``Tracker.prefault``, as ``python -m
dod.tracker.bench`` and the demo do) before their first tick;
``--no-prefault`` leaves their pages to the ticks.

Goals (reported, not asserted): clutter 1: MOTA >= 0.90, HOTA
within 0.05 of clutter 0.2, false confirmed <= 1 % of the targets per scan;
clutter 0.2: score+2pt not worse than m_of_n (MOTA within 0.005).

Options: ``--targets N`` (1000), ``--scans K`` (300), ``--seeds S`` (3),
``--clutter 0.2,1,3``, ``--quick`` (200 targets, 100 scans, 1 seed),
``--patches K``, ``--no-prefault``.
"""
import argparse
import gc
import sys
import time

import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metrics import mot_metrics, scenario_hota
from dod.tracker.scenario import generate

MATCH = 5.0             # m: truth and estimate match when closer


def configs(n, clutter):
    """The two trackers compared on a row: M-of-N confirmation, and score
    confirmation with two-point initiation.

    Parameters
    ----------
    n : int
        Targets.
    clutter : float
        False detections per scan, per target (sizes the tables).

    Returns
    -------
    list of (str, TrackerConfig)
        ``("m_of_n", ...)`` and ``("score+2pt", ...)``.

    Raises
    ------
    ValueError
        For sizes the configuration refuses.

    Notes
    -----
    Thread-safety: a pure function; any thread may call it.
    """
    size = dict(capacity=max(64, 4 * n + int(4 * clutter * n)),
                max_detections=max(64, int(2 * n + 8 * clutter * n + 64)))
    return [("m_of_n", TrackerConfig(confirmation="m_of_n", initiation="single", **size)),
            ("score+2pt", TrackerConfig(confirmation="score", initiation="two_point", **size))]


def score_run(scenario, config):
    """Track a scenario with one configuration and score it.

    Parameters
    ----------
    scenario : Scenario
        From :func:`dod.tracker.scenario.generate`.
    config : TrackerConfig
        The tracker's configuration.

    Returns
    -------
    dict
        ``mota``, ``idf1``, ``hota``, ``deta``, ``assa``, ``loca``,
        ``false_per_scan`` (false positives per scan) and ``switches``
        (truth and estimate match within 5 m).

    Raises
    ------
    ValueError
        When the configuration does not fit the scenario (the tick's checks).

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    t = Tracker(config)
    est = []
    for z, dt in scenario:
        t.tick(z, dt)
        est.append(t.confirmed_tracks())
    m = mot_metrics(scenario, est, max_distance=MATCH)
    h = scenario_hota(scenario, est, max_distance=MATCH)
    return {"mota": m["mota"], "idf1": m["idf1"], "hota": h["hota"], "deta": h["deta"],
            "assa": h["assa"], "loca": h["loca"],
            "false_per_scan": m["num_false_positives"] / scenario.scans,
            "switches": m["num_switches"]}


def tick_cost(scenario, cfgs, warmup=50, prefault=True):
    """Cost per tick of each configuration, fed the same scans alternately.

    Parameters
    ----------
    scenario : Scenario
        The scans.
    cfgs : list of (str, TrackerConfig)
        As :func:`configs` returns.
    warmup : int, default 50
        Leading scans ticked, not timed.
    prefault : bool, default True
        Fault each tracker's memory in (``Tracker.prefault``) first.

    Returns
    -------
    ms : list of float
        Median ms per tick of each configuration.
    blocks : list of float
        Python blocks allocated per tick over a further window of the same
        scans.
    faulted : list of int
        The bytes each tracker's prefault faulted in (0 without `prefault`).

    Raises
    ------
    ValueError
        As :func:`score_run`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    trackers = [Tracker(c) for _, c in cfgs]
    faulted = [t.prefault() if prefault else 0 for t in trackers]
    scans = list(scenario)
    for z, dt in scans[:warmup]:
        for t in trackers:
            t.tick(z, dt)
    ms = [[] for _ in trackers]
    was = gc.isenabled()
    gc.disable()
    try:
        for z, dt in scans[warmup:]:
            for k, t in enumerate(trackers):
                t0 = time.perf_counter_ns()
                t.tick(z, dt)
                ms[k].append((time.perf_counter_ns() - t0) / 1e6)
        # Allocations: net blocks over a further window of ticks per tracker
        # (the same scans again; no timing objects inside the window).
        # A discarded window of ticks first: the measuring code's own
        # one-time blocks land there, not on the first tracker measured.
        window = scans[warmup:]
        sys.getallocatedblocks()
        for z, dt in window:
            trackers[0].tick(z, dt)
        blocks = []
        for t in trackers:
            b0 = sys.getallocatedblocks()
            for z, dt in window:
                t.tick(z, dt)
            blocks.append(sys.getallocatedblocks() - b0)
    finally:
        if was:
            gc.enable()
    n = max(1, len(scans) - warmup)
    return [float(np.median(m)) for m in ms], [b / n for b in blocks], faulted


def run(targets=1000, scans=300, seeds=3, clutters=(0.2, 1.0, 3.0), patches=0, out=print, prefault=True):
    """Score each configuration of :func:`configs` per clutter level and print the table.

    Parameters
    ----------
    targets : int, default 1000
        Targets per scenario.
    scans : int, default 300
        Scans per scenario.
    seeds : int, default 3
        Seeded scenarios per clutter level (the table shows means).
    clutters : tuple of float, default (0.2, 1.0, 3.0)
        False detections per scan, per target.
    patches : int, default 0
        When not 0, one more level: clutter 1 concentrated in this many
        patches.
    out : callable, default print
        Takes each line of the report.
    prefault : bool, default True
        As :func:`tick_cost`.

    Returns
    -------
    list of dict
        One row per level and configuration: the means of :func:`score_run`'s
        scores (and each one's ``_range`` over the seeds), ``tick_ms``,
        ``blocks`` and ``prefault``.

    Raises
    ------
    ValueError
        As :func:`score_run`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    rows = []
    levels = [(c, 0) for c in clutters] + ([(1.0, patches)] if patches else [])
    for c, k in levels:
        cfgs = configs(targets, c)
        res = {name: [] for name, _ in cfgs}
        for seed in range(seeds):
            sc = generate(targets, scans, seed=seed, pd=0.9, clutter=c * targets, patches=k)
            for name, cfg in cfgs:
                res[name].append(score_run(sc, cfg))
        sc = generate(targets, min(scans, 250), seed=0, pd=0.9, clutter=c * targets, patches=k)
        med, blocks, faulted = tick_cost(sc, cfgs, prefault=prefault)
        for (name, _), m, b, f in zip(cfgs, med, blocks, faulted):
            rs = res[name]
            row = {"clutter": c, "patches": k, "tracker": name, "tick_ms": m, "blocks": b, "prefault": f}
            for key in rs[0]:
                vals = np.array([r[key] for r in rs])
                row[key] = float(vals.mean())
                row[key + "_range"] = (float(vals.min()), float(vals.max()))
            rows.append(row)
    out(f"dod.tracker accuracy in clutter: N={targets}, {scans} scans, {seeds} seed(s), Pd 0.9, "
        f"50 Hz, match {MATCH:g} m (means over seeds); timed trackers "
        f"{'prefaulted' if prefault else 'not prefaulted'}")
    out(f"{'clutter/target':>14} {'tracker':>10} | {'MOTA':>6} {'IDF1':>6} {'HOTA':>6} {'DetA':>6} "
        f"{'AssA':>6} {'LocA':>6} | {'false/scan':>10} | {'tick ms':>7} {'ratio':>5} {'blocks':>6}")
    base = {}
    for r in rows:
        key = (r["clutter"], r["patches"])
        if r["tracker"] == "m_of_n":
            base[key] = r
        ratio = r["tick_ms"] / base[key]["tick_ms"] if key in base else float("nan")
        label = f"{r['clutter']:g}" + (f" ({r['patches']} patches)" if r["patches"] else "")
        out(f"{label:>14} {r['tracker']:>10} | {r['mota']:6.3f} {r['idf1']:6.3f} {r['hota']:6.3f} "
            f"{r['deta']:6.3f} {r['assa']:6.3f} {r['loca']:6.3f} | {r['false_per_scan']:10.2f} | "
            f"{r['tick_ms']:7.3f} {ratio:4.2f}x {r['blocks']:6.2f}")
    by = {(r["clutter"], r["patches"], r["tracker"]): r for r in rows}
    for name in ("m_of_n", "score+2pt"):
        one, low = by.get((1.0, 0, name)), by.get((0.2, 0, name))
        if one and low:
            out(f"goals {name}: clutter 1 MOTA {one['mota']:.3f} (>= 0.90), HOTA {one['hota']:.3f} vs "
                f"{low['hota']:.3f} at 0.2 (within 0.05: {abs(low['hota'] - one['hota']) <= 0.05}), "
                f"false confirmed {one['false_per_scan'] / targets:.2%} of targets (<= 1%)")
    a, b = by.get((0.2, 0, "m_of_n")), by.get((0.2, 0, "score+2pt"))
    if a and b:
        out(f"goal clutter 0.2: score+2pt MOTA {b['mota']:.4f} vs m_of_n {a['mota']:.4f} "
            f"(within 0.005: {b['mota'] >= a['mota'] - 0.005})")
    return rows


def main(argv=None):
    """``python -m dod.tracker.bench --accuracy``: parse `argv` and run :func:`run`.

    Options: ``--targets``, ``--scans``, ``--seeds``, ``--clutter 0.2,1,3``,
    ``--patches``, ``--quick``, ``--no-prefault``.

    Parameters
    ----------
    argv : list of str or None, default None
        The arguments (``--help`` lists them); None reads ``sys.argv[1:]``.

    Returns
    -------
    int
        0 (the report is printed).

    Raises
    ------
    SystemExit
        For bad arguments (argparse's usage error, status 2).

    Notes
    -----
    Thread-safety: the main thread (it prints).
    """
    p = argparse.ArgumentParser(prog="python -m dod.tracker.bench --accuracy",
                                description=__doc__.split("\n")[0])
    p.add_argument("--targets", type=int, default=1000)
    p.add_argument("--scans", type=int, default=300)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--clutter", default="0.2,1,3")
    p.add_argument("--patches", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="200 targets, 100 scans, 1 seed")
    p.add_argument("--no-prefault", action="store_true",
                   help="leave the timed trackers' pages to be faulted by the ticks that first touch them")
    a = p.parse_args(argv)
    if a.quick:
        a.targets, a.scans, a.seeds = 200, 100, 1
    if a.targets < 1 or a.scans < 60 or a.seeds < 1:
        p.error("need --targets >= 1, --scans >= 60, --seeds >= 1")
    run(a.targets, a.scans, a.seeds, tuple(float(c) for c in a.clutter.split(",") if c), a.patches,
        prefault=not a.no_prefault)
    return 0


if __name__ == "__main__":
    sys.exit(main())
