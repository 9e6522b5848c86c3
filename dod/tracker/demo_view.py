"""The demo's view: the live terminal view, its progress and report lines, and the plot.

:class:`dod.tracker.demo.DemoRun` runs the tracker; these functions show
what it measured, between chunks of ticks (never inside one): a rich live
view on a terminal (:func:`want_live` decides), a plain line per second of
scenario time otherwise (:func:`plain_line`), the summary's real-time and
prefault lines, and ``--plot`` (:func:`write_plot`). ``python -m
dod.tracker`` (:func:`dod.tracker.demo.main`) wires them up.
"""
import os

import numpy as np

from dod.loop import monotonic_ns


def realtime_line(rt, before=False):
    """What a :class:`dod.realtime.Realtime` holds (or held), and what the OS refused.

    Parameters
    ----------
    rt : dod.realtime.Realtime
        The options.
    before : bool, default False
        Say what is requested (nothing applied yet) instead of what was applied.

    Returns
    -------
    str
        One line of the demo's header or summary.

    Notes
    -----
    Thread-safety: a reader (any thread).
    """
    if not rt.requested:
        return "none requested (--lock-memory, --cpu, --realtime-priority)"
    if before:
        return "requested " + ", ".join(
            ([f"lock_memory {'onfault' if rt.lock_memory == 'onfault' else 'all'}"] if rt.lock_memory else [])
            + ([f"cpu {rt.cpu}"] if rt.cpu is not None else [])
            + ([f"SCHED_FIFO {rt.priority}"] if rt.priority is not None else []))
    rep = rt.report()
    parts = []
    if rt.lock_memory:
        parts.append("lock_memory " + ("refused" if "lock_memory" in rep["refused"] else
                                       f"active ({rep['lock_memory']})"))
    if rt.cpu is not None:
        parts.append(f"cpu {rt.cpu} " + ("refused" if "cpu" in rep["refused"] else "active"))
    if rt.priority is not None:
        parts.append(f"SCHED_FIFO {rt.priority} " + ("refused" if "realtime_priority" in rep["refused"]
                                                    else "active"))
    out = "; ".join(parts)
    if rep["refused"]:
        out += " | refused: " + "; ".join(rep["refused"].values())
    return out


def prefault_line(nbytes):
    """What the tracker's prefault at start touched, as a line of the summary.

    Parameters
    ----------
    nbytes : int
        Bytes faulted in (0: ``--no-prefault``).

    Returns
    -------
    str

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    if not nbytes:
        return "off (--no-prefault): pages are faulted by the first tick that touches them"
    return (f"{nbytes / 2**20:.1f} MiB faulted in at start (table at capacity, scratch, worker "
            "arenas): no tick takes a first-touch fault, RSS flat from the start")


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def plain_line(s):
    """One progress line of the demo (``--no-live``).

    Parameters
    ----------
    s : dict
        A :meth:`DemoRun.snapshot`.

    Returns
    -------
    str

    Raises
    ------
    KeyError
        For a dict without a snapshot's keys.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    return (f"t={s['time']:6.2f}s {s['ticks']:>6}/{s['total']} ticks | tick p50 {s['p50_ms']:.3f} "
            f"p99 {s['p99_ms']:.3f} max {s['max_ms']:.3f} ms | misses {_fmt(s['misses'], 'd')} | "
            f"alloc/tick {s['alloc_per_tick']:.2f} | confirmed {s['confirmed']}/{s['truth']} | "
            f"GOSPA {s['gospa']:.2f} (mean {s['gospa_mean']:.2f})")


def _view_rows(run):
    """(label, value) rows of the live view."""
    s = run.snapshot()
    width = 30
    filled = int(width * s["ticks"] / s["total"])
    return [
        ("progress", f"{'#' * filled}{'.' * (width - filled)} {s['ticks']}/{s['total']}  {s['time']:.2f} s"),
        ("tick p50 / p99 / max", f"{s['p50_ms']:.3f} / {s['p99_ms']:.3f} / {s['max_ms']:.3f} ms"),
        ("deadline misses", "n/a (fast)" if run.fast else f"{s['misses']} ({s['skipped']} skipped)"),
        ("allocations per tick", f"{s['alloc_per_tick']:.2f}"),
        ("confirmed tracks", f"{s['confirmed']} (truth {s['truth']}, tentative {s['tentative']})"),
        ("real-time options", realtime_line(run.realtime, before=not run.realtime.applied and not run.done)),
        ("GOSPA now / mean", f"{s['gospa']:.2f} / {s['gospa_mean']:.2f} ({s['missed']} missed, {s['false']} false)"),
    ]


def _rich_view(run):
    """The live view: a title and aligned rows as one styled rich Text (a
    rich Table of the same rows costs ten times as much to lay out and draw,
    and at 100,000 targets a tick's slack is a few ms)."""
    from rich.text import Text

    t = Text(f"dod.tracker  {run.targets} targets @ {run.rate:g} Hz{'  (fast)' if run.fast else ''}\n",
             style="bold")
    for label, value in _view_rows(run):
        t.append(f"  {label:<22}", style="bold")
        t.append(f"{value}\n")
    return t


def want_live(no_live, stream):
    """Whether to show the rich live view: on a real terminal, outside CI, with rich installed.

    Parameters
    ----------
    no_live : bool
        ``--no-live`` was given.
    stream : file
        Where the demo writes (its ``isatty()`` decides).

    Returns
    -------
    bool

    Notes
    -----
    Thread-safety: any thread.
    """
    if no_live or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        if not stream.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def write_plot(run, path):
    """Tracks against ground truth, and the tick-time histogram, to a PNG.

    Parameters
    ----------
    run : DemoRun
        A finished run made with ``keep_tracks=True``.
    path : str or path-like
        The PNG file to write.

    Raises
    ------
    RuntimeError
        Without matplotlib (``pip install 'dod[demo]'``).
    OSError
        When the file cannot be written.

    Notes
    -----
    Thread-safety: one thread (matplotlib's Agg backend, set here).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'dod[demo]' "
                           "(or pip install matplotlib)") from None
    fig, (ax, ah) = plt.subplots(1, 2, figsize=(14, 6.5), gridspec_kw={"width_ratios": [1.3, 1]})
    # ground truth (sampled with the tracks, inside the window): one polyline per target id
    tracks = {}
    for _, ids, pos in run.truth_samples:
        for i, p in zip(ids.tolist(), pos[:, :2]):
            tracks.setdefault(i, []).append(p)
    ax.add_collection(LineCollection([np.array(v) for v in tracks.values()], colors="0.6",
                                     linewidths=1.0, label="ground truth"))
    est = {}
    for _, ids, pos in run.samples:
        for i, p in zip(ids.tolist(), pos[:, :2]):
            est.setdefault(i, []).append(p)
    if est:
        pts = np.concatenate([np.array(v) for v in est.values()])
        col = np.concatenate([np.full(len(v), k % 20) for k, v in enumerate(est.values())])
        ax.scatter(pts[:, 0], pts[:, 1], c=col, cmap="tab20", s=4, label="confirmed tracks")
    ax.autoscale()
    ax.set_aspect("equal")
    ax.set_title(f"{run.targets} targets, {run.done} scans: truth (grey), tracks "
                 f"({len(est)} ids, sampled {run.rate / run.chunk:g}/s)")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.legend(loc="upper right", markerscale=3)
    lows, counts = run.loop.histogram()
    if lows:
        ms = np.array(lows, dtype=np.float64) / 1e6
        lo, hi = max(ms.min(), 1e-4), max(ms.max() * 1.1, 1e3 / run.rate * 1.2)
        ah.hist(np.maximum(ms, lo), bins=np.geomspace(lo, hi, 80), weights=counts)
        ah.set_xscale("log")
        ah.axvline(1e3 / run.rate, color="r", ls="--", label=f"deadline {1e3 / run.rate:g} ms")
        st = run.loop.stats()
        top = ah.get_ylim()[1]
        for q, name, y in ((st["p50"], "p50", 0.95), (st["p99"], "p99", 0.88)):
            ah.axvline(q * 1e3, color="k", ls=":", lw=1)
            ah.text(q * 1e3, top * y, f" {name}", fontsize=8)
        ah.legend()
    ah.set_title("tick time histogram (step + scratch reset)")
    ah.set_xlabel("ms (log)")
    ah.set_ylabel("ticks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_with_view(run, no_live, rate, fast, out, late_s):
    """Run a :class:`~dod.tracker.demo.DemoRun` while showing it: the live
    rich view on a terminal, else one plain line per second of scenario time.

    Parameters
    ----------
    run : dod.tracker.demo.DemoRun
        The run (not started).
    no_live : bool
        Plain lines even on a terminal.
    rate : float
        Scans per second of scenario time (the plain lines' spacing).
    fast : bool
        The run ticks as fast as it can: about ten plain lines in all.
    out : file
        Where the view goes.
    late_s : float
        A loop without slack still redraws once per this many wall seconds.

    Returns
    -------
    None
        The run holds what it measured.

    Notes
    -----
    Thread-safety: the run's thread (the view redraws between its chunks).
    """
    if want_live(no_live, out):
        from rich.console import Console
        from rich.live import Live

        # auto_refresh=False: no refresh thread competing with the ticks for
        # the GIL; the view is redrawn between chunks only, when the redraw
        # fits before the next chunk (as GOSPA samples are), else once per
        # LATE_SAMPLE_S of wall time, and at the end.
        state = {"cost": 0, "last": 0}

        def redraw(r):
            now = monotonic_ns()
            if r.fast or r.done >= r.total or r.slack_ns() > 1.5 * state["cost"] \
                    or now - state["last"] > late_s * 1e9:
                live.update(_rich_view(r), refresh=True)
                state["last"] = monotonic_ns()
                state["cost"] = state["last"] - now

        with Live(_rich_view(run), console=Console(file=out), auto_refresh=False,
                  redirect_stdout=False, redirect_stderr=False) as live:
            run.run(redraw)
    else:
        every = max(1, int(round(rate)))          # one line per second of scenario time
        if fast:
            every = max(every, run.total // 10)
        state = {"next": every}

        def line(r):
            if r.done >= state["next"] or r.done == r.total:
                state["next"] += every
                print(plain_line(r.snapshot()), file=out, flush=True)

        run.run(line)
