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

``--dtypes float64,float32`` (also ``python -m dod.tracker.accuracy
--dtypes ...``): instead of the table above, the same trackers' scores in
each precision (``TrackerConfig(dtype=...)``, :func:`compare_dtypes`): per
scene, GOSPA (c = 10 m), MOTA and IDF1 of each dtype and the differences
from the first, on the constant-velocity scenes at clutter 0.2 and 3 per
target (``--clutter`` sets the levels), manoeuvring targets tracked with
the IMM, and two range-bearing radars at clutter 0.2 per target
(:func:`dtype_scenes`), means over the seeds; ``--markdown`` prints a
Markdown table. Goal (reported): GOSPA within 1 % and MOTA and IDF1 within
0.005 of float64 on every scene and seed.
"""
import argparse
import gc
import sys
import time

import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metrics import mot_metrics, run_tracker, scenario_gospa, scenario_hota
from dod.tracker import scenario as scenarios
from dod.tracker.scenario import generate, generate_radar

MATCH = 5.0             # m: truth and estimate match when closer
DTYPES = ("float64", "float32")     # the precisions TrackerConfig(dtype=...) takes


def _sizes(n, clutter):
    """Table sizes for `n` targets and `clutter` false detections per target
    per scan: room for the births that clutter starts, and for a scan's
    detections with the Poisson clutter's tail."""
    return dict(capacity=max(64, 4 * n + int(4 * clutter * n)),
                max_detections=max(64, int(2 * n + 8 * clutter * n + 64)))


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
    size = _sizes(n, clutter)
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


# ---------------------------------------------------------------- one precision against another


def dtype_scenes(targets, scans, seed, clutters=(0.2, 3.0)):
    """The seeded scenes on which :func:`compare_dtypes` sets one precision against another.

    Parameters
    ----------
    targets : int
        Targets per scene.
    scans : int
        Scans per scene.
    seed : int
        The scenes' seed.
    clutters : tuple of float, default (0.2, 3.0)
        False detections per scan, per target, of the constant-velocity scenes.

    Yields
    ------
    name : str
        The scene, as the table names it.
    scenario : Scenario or RadarScenario
        Its scans: per clutter level the generator's default scene at Pd 0.9
        (:func:`dod.tracker.scenario.generate`); the ``"manoeuvre"`` preset
        (:data:`dod.tracker.scenario.PRESETS`: 1 Hz, every target turning
        between straight legs, clutter 0.2 per target); two range-bearing
        radars taking turns, clutter 0.2 per target
        (:func:`dod.tracker.scenario.generate_radar`).
    config : dict
        The scene's TrackerConfig keywords, less ``dtype``: the default
        configuration (score confirmation, two-point initiation) sized for the
        clutter; ``motion="imm"`` with the preset's ``v0`` for the
        manoeuvring targets; ``r=3.0`` for the radar, as
        :mod:`dod.tracker.bench_radar` sets it.

    Raises
    ------
    ValueError
        For a parameter the scenario generators refuse.

    Notes
    -----
    Thread-safety: a pure function of its arguments (each scene is built when
    the loop reaches it, so one is in memory at a time).
    """
    for c in clutters:
        yield (f"CV, clutter {c:g} per target", generate(targets, scans, seed=seed, pd=0.9, clutter=c * targets),
               _sizes(targets, c))
    yield ("IMM, manoeuvring targets", generate(targets, scans, seed=seed, **scenarios.PRESETS["manoeuvre"]),
           dict(motion="imm", **scenarios.PRESET_CONFIG["manoeuvre"], **_sizes(targets, 0.2)))
    yield ("range-bearing radar, clutter 0.2 per target",
           generate_radar(targets, scans, seed=seed, pd=0.9, clutter=0.2 * targets),
           dict(r=3.0, **_sizes(targets, 0.2)))


def compare_dtypes(targets=1000, scans=300, seeds=3, dtypes=DTYPES, clutters=(0.2, 3.0), out=print,
                   markdown=False):
    """Track each scene of :func:`dtype_scenes` in each precision and print the scores side by side.

    Every scene is tracked once per dtype on the same scans; the scores are
    GOSPA (:func:`dod.tracker.metrics.scenario_gospa`, c = 10 m, p = 2, the
    mean over the scans) and MOTA and IDF1 (matched within 5 m), each the
    mean over the seeds, and the difference of every dtype after the first
    from the first (GOSPA relative, in %; MOTA and IDF1 absolute). A line
    per later dtype reports the goal (not asserted): GOSPA within 1 % and
    MOTA and IDF1 within 0.005 of the first dtype's, on every scene and seed.

    Parameters
    ----------
    targets : int, default 1000
        Targets per scene.
    scans : int, default 300
        Scans per scene.
    seeds : int, default 3
        Seeds 0 to `seeds` - 1 of every scene.
    dtypes : sequence of str, default ("float64", "float32")
        The precisions (``TrackerConfig(dtype=...)``); the first is the one
        the others are compared with.
    clutters : tuple of float, default (0.2, 3.0)
        As for :func:`dtype_scenes`.
    out : callable, default print
        Takes each line of the report.
    markdown : bool, default False
        Print the table as a Markdown table.

    Returns
    -------
    list of dict
        One per scene: ``scene``; per dtype a dict of the means ``gospa``,
        ``mota``, ``idf1`` and ``per_seed`` (those three per seed); and per
        later dtype ``"d_" + dtype``: ``gospa_pct``, ``mota``, ``idf1`` (the
        differences of the means) and ``worst_gospa_pct``, ``worst_mota``,
        ``worst_idf1`` (the largest absolute difference over the seeds).

    Raises
    ------
    ValueError
        For an unknown or repeated dtype, none, `seeds` below 1, or a
        parameter the scenes or the tracker refuse.

    Notes
    -----
    Thread-safety: any thread; the trackers it builds are its own. Nothing is
    timed.
    """
    dtypes = tuple(dtypes)
    if not dtypes or len(set(dtypes)) != len(dtypes) or any(d not in DTYPES for d in dtypes):
        raise ValueError(f"dtypes must be distinct names out of {DTYPES}, not {dtypes!r}")
    if int(seeds) < 1:
        raise ValueError(f"seeds must be >= 1, not {seeds!r}")
    scores = {}
    for seed in range(int(seeds)):
        for name, sc, kw in dtype_scenes(targets, scans, seed, clutters):
            for dt in dtypes:
                est = run_tracker(Tracker(TrackerConfig(dtype=dt, **kw)), sc)
                m = mot_metrics(sc, est, max_distance=MATCH)
                scores.setdefault(name, {}).setdefault(dt, []).append(
                    (scenario_gospa(sc, est), float(m["mota"]), float(m["idf1"])))
    base = dtypes[0]
    rows = []
    for name, by in scores.items():
        row = {"scene": name}
        for dt in dtypes:
            g, mo, i1 = np.array(by[dt]).mean(axis=0)
            row[dt] = {"gospa": float(g), "mota": float(mo), "idf1": float(i1), "per_seed": by[dt]}
        for dt in dtypes[1:]:
            a, b = np.array(by[base]), np.array(by[dt])
            worst = np.abs(b - a).max(axis=0)
            row["d_" + dt] = {"gospa_pct": 100.0 * (row[dt]["gospa"] / row[base]["gospa"] - 1.0),
                              "mota": row[dt]["mota"] - row[base]["mota"],
                              "idf1": row[dt]["idf1"] - row[base]["idf1"],
                              "worst_gospa_pct": float(100.0 * np.max(np.abs(b[:, 0] / a[:, 0] - 1.0))),
                              "worst_mota": float(worst[1]), "worst_idf1": float(worst[2])}
        rows.append(row)
    _print_dtypes(rows, targets, scans, int(seeds), dtypes, out, markdown)
    return rows


def _print_dtypes(rows, targets, scans, seeds, dtypes, out, markdown):
    base, later = dtypes[0], dtypes[1:]
    seeds_text = "seed 0" if seeds == 1 else f"seeds 0-{seeds - 1} (means)"
    out(f"dod.tracker accuracy by precision: N={targets}, {scans} scans, {seeds_text}, "
        f"GOSPA c = 10 m p = 2, MOTA and IDF1 matched within {MATCH:g} m"
        + (f"; d: {', '.join(later)} minus {base} (GOSPA relative, in %)" if later else ""))
    head = ["scene"]
    for metric in ("GOSPA", "MOTA", "IDF1"):
        unit = " %" if metric == "GOSPA" else ""
        head += [f"{metric} {dt}" for dt in dtypes] + [f"d{metric}{unit} {dt}" for dt in later]
    table = []
    for r in rows:
        cells = [r["scene"]]
        for key, fmt in (("gospa", "{:.4f}"), ("mota", "{:.4f}"), ("idf1", "{:.4f}")):
            cells += [fmt.format(r[dt][key]) for dt in dtypes]
            cells += [f"{r['d_' + dt][key + '_pct' if key == 'gospa' else key]:+.4f}" for dt in later]
        table.append(cells)
    if markdown:
        out("| " + " | ".join(head) + " |")
        out("|" + " --- |" * len(head))
        for cells in table:
            out("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(c[k]) for c in [head] + table) for k in range(len(head))]
        for cells in [head] + table:
            out(" ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(cells, widths))))
    for dt in later:
        d = [r["d_" + dt] for r in rows]
        g, mo, i1 = (max(x[k] for x in d) for k in ("worst_gospa_pct", "worst_mota", "worst_idf1"))
        out(("- " if markdown else "") + f"goal {dt}: GOSPA within 1 % of {base} (worst scene and seed "
            f"{g:.3f} %), MOTA and IDF1 within 0.005 (worst {mo:.4f}, {i1:.4f}): "
            + ("met" if g <= 1.0 and mo <= 0.005 and i1 <= 0.005 else "not met"))


def main(argv=None):
    """``python -m dod.tracker.bench --accuracy``: parse `argv` and run :func:`run`,
    or with ``--dtypes`` :func:`compare_dtypes`.

    Options: ``--targets``, ``--scans``, ``--seeds``, ``--clutter 0.2,1,3``,
    ``--patches``, ``--quick``, ``--no-prefault``; ``--dtypes float64,float32``
    and ``--markdown`` for the precision comparison.

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
                                description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--targets", type=int, default=1000)
    p.add_argument("--scans", type=int, default=300)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--clutter", default=None,
                   help="false detections per scan, per target, comma-separated (default 0.2,1,3; "
                        "with --dtypes 0.2,3)")
    p.add_argument("--patches", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="200 targets, 100 scans, 1 seed")
    p.add_argument("--no-prefault", action="store_true",
                   help="leave the timed trackers' pages to be faulted by the ticks that first touch them")
    p.add_argument("--dtypes", default=None,
                   help="instead: GOSPA, MOTA and IDF1 of the default tracker in each precision, e.g. "
                        "float64,float32, and the differences from the first, on constant-velocity scenes at "
                        "each clutter level, manoeuvring targets (IMM) and range-bearing radar")
    p.add_argument("--markdown", action="store_true", help="with --dtypes: print a Markdown table")
    a = p.parse_args(argv)
    if a.quick:
        a.targets, a.scans, a.seeds = 200, 100, 1
    if a.targets < 1 or a.scans < 60 or a.seeds < 1:
        p.error("need --targets >= 1, --scans >= 60, --seeds >= 1")
    clutter = a.clutter or ("0.2,3" if a.dtypes else "0.2,1,3")
    clutters = tuple(float(c) for c in clutter.split(",") if c)
    if a.dtypes is None:
        if a.markdown:
            p.error("--markdown goes with --dtypes")
        run(a.targets, a.scans, a.seeds, clutters, a.patches, prefault=not a.no_prefault)
        return 0
    if a.patches or a.no_prefault:
        p.error("--patches and --no-prefault go with the clutter table, not --dtypes")
    try:
        compare_dtypes(a.targets, a.scans, a.seeds, tuple(d.strip() for d in a.dtypes.split(",") if d.strip()),
                       clutters, markdown=a.markdown)
    except ValueError as e:
        p.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
