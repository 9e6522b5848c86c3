"""``python -m dod.tracker.bench --radar``: the range-bearing (EKF) tick
against the Cartesian tick, in the same run, on the same detections.

Scenario per N: :func:`dod.tracker.scenario.iter_radar_scans` (N targets,
2-D unless ``--dim 3``, two sensors taking turns, range noise 2 m, bearing
1 mrad, Pd 0.9, clutter 0.2 N per scan uniform in range and bearing, 50 Hz).
The Cartesian tracker gets each scan's detections converted to positions
(``Sensor.to_cartesian``): the same detections, the same clutter, so the
ratio is the cost of the measurement model alone. Both trackers tick each
scan in turn (which one goes first alternates), so a noisy neighbour slows
both alike; the first ``warmup`` scans are not timed. Columns: median, p99
and the CPU-time median per tick (ms), the polar-over-Cartesian ratio of
medians, Python blocks allocated per tick (net sys.getallocatedblocks over
the timed scans ticked once more, alone),
and the mean GOSPA (c = 10 m, p = 2, over the timed scans) of dod and, with
``--reference`` up to ``--reference-max`` targets, of the numpy reference on
the same range-bearing scans. Both dod trackers are prefaulted
(``Tracker.prefault``, as ``python -m dod.tracker.bench`` and the demo do)
before their first tick, so no timed tick takes a first-touch page fault;
``--no-prefault`` leaves them to the ticks.

Goal: N = 1,000: polar tick <= 1.3x the Cartesian tick, zero
allocations per tick.

Options: ``--sizes 1000``, ``--scans K``, ``--dim 2|3``, ``--sensors 1|2``,
``--no-reference``, ``--reference-max N``, ``--seed``, ``--quick``,
``--no-prefault``.
"""
import argparse
import gc
import sys
import time

from dod.tracker.openmp import default_wait_policy

default_wait_policy()       # before the engine loads libgomp (dod.tracker.openmp)

import numpy as np

from dod.tracker.bench import BENCH_MANAGEMENT
from dod.tracker import ReferenceTracker, Tracker, TrackerConfig
from dod.tracker.metrics import sparse_gospa
from dod.tracker.scenario import iter_radar_scans

GOSPA_C = 10.0


def measure(n, scans=300, warmup=50, dim=2, sensors=2, seed=0, reference=True, prefault=True):
    """Tick a Cartesian and a range-bearing (EKF) tracker on the same scans.

    Parameters
    ----------
    n : int
        Targets.
    scans : int, default 300
        Timed scans.
    warmup : int, default 50
        Scans ticked first, not timed.
    dim : int, default 2
        2 or 3.
    sensors : int, default 2
        Radars the scans alternate between (1 or 2).
    seed : int, default 0
        The scenario's seed.
    reference : bool, default True
        Also score the numpy reference tracker (slow for large `n`).
    prefault : bool, default True
        Fault each tracker's memory in (``Tracker.prefault``) first.

    Returns
    -------
    dict
        ``n``, ``dim``, ``sensors``, ``ticks``; ``"cartesian"`` and
        ``"polar"``: (p50 ms, p99 ms, thread-CPU p50 ms, Python blocks
        allocated per tick); ``ratio`` and ``cpu_ratio`` (polar over
        Cartesian); ``gospa`` and ``gospa_reference`` (None without
        `reference`); ``confirmed``; ``prefault`` (the bytes each tracker
        faulted in, 0 without `prefault`).

    Raises
    ------
    ValueError
        For a configuration the tracker refuses (``TrackerConfig``).

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    cfg = TrackerConfig(dim=dim, r=3.0, capacity=max(64, 4 * n), max_detections=max(64, 2 * n + 64),
                        **BENCH_MANAGEMENT)
    cart, polar = Tracker(cfg), Tracker(cfg)
    faulted = {name: tr.prefault() if prefault else 0 for name, tr in (("cartesian", cart), ("polar", polar))}
    ref = ReferenceTracker(cfg) if reference else None
    data = []
    for s in iter_radar_scans(n, warmup + scans, dim=dim, sensors=sensors, seed=seed):
        data.append((s.detections, np.ascontiguousarray(s.sensor.to_cartesian(s.detections)), s.dt,
                     s.sensor, s.truth_pos))
    ms = {"cartesian": [], "polar": []}
    cpu = {"cartesian": [], "polar": []}
    blocks = {"cartesian": 0, "polar": 0}
    gospa = {"dod": [], "reference": []}

    def timed(fn):
        c0 = time.process_time_ns()
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        c1 = time.process_time_ns()
        return (t1 - t0) / 1e6, (c1 - c0) / 1e6

    was = gc.isenabled()
    gc.disable()
    try:
        for i, (zp, zc, dt, sensor, truth) in enumerate(data):
            order = ("cartesian", "polar") if i % 2 == 0 else ("polar", "cartesian")
            for name in order:
                if name == "cartesian":
                    w, c = timed(lambda: cart.tick(zc, dt))
                else:
                    w, c = timed(lambda: polar.tick(zp, dt, sensor))
                if i >= warmup:
                    ms[name].append(w)
                    cpu[name].append(c)
            if ref is not None:
                ref.tick(zp, dt, sensor=sensor)
            if i >= warmup:
                gospa["dod"].append(sparse_gospa(truth, polar.confirmed_tracks()[1], GOSPA_C))
                if ref is not None:
                    gospa["reference"].append(sparse_gospa(truth, ref.confirmed_tracks()[1], GOSPA_C))
        # Allocations: net Python blocks over the timed scans once more, each
        # tracker alone with nothing else in the loop (the timing harness's own
        # integers would count otherwise).
        timed_scans = data[warmup:]
        for name, tr in (("cartesian", cart), ("polar", polar)):
            tick = tr.tick
            b0 = sys.getallocatedblocks()
            if name == "cartesian":
                for zp, zc, dt, sensor, truth in timed_scans:
                    tick(zc, dt)
            else:
                for zp, zc, dt, sensor, truth in timed_scans:
                    tick(zp, dt, sensor)
            blocks[name] = (sys.getallocatedblocks() - b0) / max(1, len(timed_scans))
    finally:
        if was:
            gc.enable()
    out = {"n": n, "dim": dim, "sensors": sensors, "ticks": len(ms["polar"]), "prefault": faulted}
    for name in ms:
        a = np.array(ms[name])
        out[name] = (float(np.median(a)), float(np.percentile(a, 99)), float(np.median(cpu[name])),
                     blocks[name])
    out["ratio"] = out["polar"][0] / out["cartesian"][0]
    out["cpu_ratio"] = out["polar"][2] / out["cartesian"][2]
    out["gospa"] = float(np.mean(gospa["dod"]))
    out["gospa_reference"] = float(np.mean(gospa["reference"])) if gospa["reference"] else None
    out["confirmed"] = polar.counts()["confirmed"]
    return out


def run(sizes=(1000,), scans=300, warmup=50, dim=2, sensors=2, seed=0, reference=True,
        reference_max=2000, out=print, prefault=True):
    """Measure each size; print the table with `out`.

    Parameters
    ----------
    sizes : tuple of int, default (1000,)
        Target counts.
    scans, warmup, dim, sensors, seed, prefault
        As :func:`measure`.
    reference : bool, default True
        Score the numpy reference tracker too, for sizes up to
        `reference_max`.
    reference_max : int, default 2000
        The largest size the reference tracker runs for.
    out : callable, default print
        Takes each line of the report.

    Returns
    -------
    list of dict
        :func:`measure`'s dict for each size.

    Raises
    ------
    ValueError
        As :func:`measure`.

    Notes
    -----
    Thread-safety: run one benchmark at a time (it times ticks; GC is off while
    it does); the trackers it builds are its own.
    """
    rows = [measure(n, scans, warmup, dim, sensors, seed, reference and n <= reference_max, prefault) for n in sizes]
    out(f"dod.tracker range-bearing (EKF) vs Cartesian tick (ms), {dim}-D, {sensors} sensor(s), "
        "Pd 0.9, clutter 0.2 N, 50 Hz; same detections, ticked in turn; GC off while timing; trackers "
        + ("prefaulted" if prefault else "not prefaulted"))
    cols = ["N", "measurement", "confirmed", "p50", "p99", "cpu p50", "polar/cart", "blocks/tick",
            "GOSPA dod", "GOSPA ref"]
    lines = []
    for r in rows:
        for name in ("cartesian", "polar"):
            d = r[name]
            pol = name == "polar"
            lines.append([f"{r['n']:,}", name, f"{r['confirmed']:,}" if pol else "-", f"{d[0]:.3f}",
                          f"{d[1]:.3f}", f"{d[2]:.3f}",
                          f"{r['ratio']:.2f}x (cpu {r['cpu_ratio']:.2f}x)" if pol else "-",
                          f"{d[3]:.2f}", f"{r['gospa']:.3f}" if pol else "-",
                          f"{r['gospa_reference']:.3f}" if pol and r["gospa_reference"] is not None else "-"])
    w = [max(len(c), *(len(line[i]) for line in lines)) for i, c in enumerate(cols)]
    out("  ".join(c.rjust(w[i]) for i, c in enumerate(cols)))
    for line in lines:
        out("  ".join(v.rjust(w[i]) for i, v in enumerate(line)))
    for r in rows:
        if r["n"] == 1000:
            out(f"N=1000: range-bearing tick {r['ratio']:.2f}x the Cartesian tick (goal <= 1.3), "
                f"{r['polar'][3]:.2f} blocks allocated per tick (goal 0)")
    return rows


def main(argv=None):
    """``python -m dod.tracker.bench --radar``: parse `argv` and run :func:`run`.

    Options: ``--sizes``, ``--scans``, ``--dim``, ``--sensors``, ``--seed``,
    ``--quick``, ``--no-reference``, ``--reference-max``, ``--no-prefault``.

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
    p = argparse.ArgumentParser(prog="python -m dod.tracker.bench --radar", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000")
    p.add_argument("--scans", type=int, default=None)
    p.add_argument("--dim", type=int, default=2, choices=(2, 3))
    p.add_argument("--sensors", type=int, default=2, choices=(1, 2))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-reference", action="store_true")
    p.add_argument("--reference-max", type=int, default=2000)
    p.add_argument("--no-prefault", action="store_true",
                   help="leave the trackers' pages to be faulted by the ticks that first touch them")
    a = p.parse_args(argv)
    sizes = tuple(int(s) for s in a.sizes.split(",") if s)
    scans = a.scans or (100 if a.quick else 300)
    run(sizes, scans, 30 if a.quick else 50, a.dim, a.sensors, a.seed, not a.no_reference, a.reference_max,
        prefault=not a.no_prefault)


if __name__ == "__main__":
    main()
