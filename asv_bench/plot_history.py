#!/usr/bin/env python3
"""Benchmark history you can look at anywhere: figures, one offline HTML page, a text table.

    python asv_bench/plot_history.py                       # asv_bench/results -> asv_bench/html/history/
    python asv_bench/plot_history.py --last 5 --text-only  # the table only (terminals, CI logs)
    python asv_bench/plot_history.py -b Speedup            # benchmarks whose name matches a regex

Reads asv's stored results (asv 0.6 format: ``results/<machine>/<commit>-<env>.json``
for every machine, and ``results/benchmarks.json``, the suite the results were
taken with) and writes into ``--out``:

- ``<module>.<Class>.png``: one figure per benchmark family (an asv benchmark
  class): the ratios first (``track_*speedup*``: speedups against a baseline
  measured in the same run), then the absolute times and costs; commits on
  the x axis in commit-date order, one line per parameter (and per machine
  when there are several), the goal as a dashed line where the benchmark
  declares one;
- ``index.html``: every figure embedded as a data URI plus the table: no
  script, no stylesheet, nothing fetched, so it shows in any browser offline;
- ``history.txt``: the table of the last N commits, also printed on stdout.

Goals are declared in the benchmark modules (``asv_bench/benchmarks``) as an
attribute of the benchmark function, read here from the source without
importing it (asv ignores the attribute)::

    def track_speedup_vs_reference(self, data, n): ...
    track_speedup_vs_reference.goal = {1000: 5.0}      # per parameter value
    track_arena_speedup_vs_malloc.goal = 10.0           # or one number

A speedup goal is a floor, any other a ceiling, in the benchmark's unit.

Results of benchmarks that are no longer in ``benchmarks.json`` and results
taken with older code of a benchmark (another asv ``version``) are left out,
and counted on stderr, as ``asv publish`` does. ``--summary FILE`` also writes
one compact figure of every ratio (the README's), ``--readme FILE`` rewrites
the README block between ``<!-- history:begin -->`` and ``<!-- history:end -->``
(figure, date, machines, ``--command``). Needs matplotlib (not for --text-only).

Exit status: 0 done; 1 nothing to show (results directory missing or empty,
no readable result file, only results of benchmarks that no longer exist,
nothing matching -b); 3 only one commit has results (the table is printed, no
history is drawn); 2 bad arguments.
"""
import argparse
import ast
import base64
import datetime
import glob
import html
import io
import itertools
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BEGIN, END = "<!-- history:begin -->", "<!-- history:end -->"


class NoData(Exception):
    """Nothing usable in the results: the message says what and what to do."""


# ---------------------------------------------------------------- reading

def load_goals(benchmark_dir):
    """{"module.Class.function": goal} from `X.goal = <literal>` lines in the benchmark sources."""
    goals = {}
    for path in sorted(glob.glob(os.path.join(benchmark_dir, "*.py"))):
        module = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path) as f:
                tree = ast.parse(f.read(), path)
        except (OSError, SyntaxError, ValueError) as e:
            print(f"plot_history: goals of {path} not read ({e})", file=sys.stderr)
            continue
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for node in cls.body:
                if not isinstance(node, ast.Assign):
                    continue
                for t in node.targets:
                    if (isinstance(t, ast.Attribute) and t.attr == "goal"
                            and isinstance(t.value, ast.Name)):
                        try:
                            goals[f"{module}.{cls.name}.{t.value.id}"] = ast.literal_eval(node.value)
                        except ValueError:
                            print(f"plot_history: {path}: goal of {t.value.id} is not a literal",
                                  file=sys.stderr)
    return goals


def goal_for(goals, name, label):
    """The goal of benchmark `name` at parameter `label` (None when it has none)."""
    g = goals.get(name)
    if isinstance(g, dict):
        for k, v in g.items():
            key = ", ".join(map(str, k)) if isinstance(k, tuple) else str(k)
            if key == label:
                return v
        return None
    return g


def _label(combo):
    return ", ".join(str(p).strip("'\"") for p in combo)


def load(results_dir, pattern=None):
    """Read every machine's results: (points, benchmarks, commits, notes, span).

    points: {(name, label, machine, env): {commit: value}}; commits: {hash:
    date ms}; benchmarks: benchmarks.json's entries; notes: what was left out;
    span: (first, last) time a benchmark started, ms, or None.
    Raises NoData when nothing usable is there.
    """
    if not os.path.isdir(results_dir):
        raise NoData(f"no results directory at {results_dir}: run asv_bench/history.sh first")
    bpath = os.path.join(results_dir, "benchmarks.json")
    files = [p for p in glob.glob(os.path.join(results_dir, "*", "*.json"))
             if os.path.basename(p) != "machine.json"]
    if not files:
        raise NoData(f"no results in {results_dir}: run asv_bench/history.sh first")
    try:
        with open(bpath) as f:
            benchmarks = {k: v for k, v in json.load(f).items() if isinstance(v, dict)}
    except (OSError, ValueError) as e:
        raise NoData(f"cannot read {bpath} ({e}): run asv_bench/history.sh (asv run) again") from None
    rx = re.compile(pattern) if pattern else None
    points, commits, measured = {}, {}, []
    gone, outdated, unreadable = set(), 0, 0
    for path in sorted(files):
        machine = os.path.basename(os.path.dirname(path))
        try:
            with open(path) as f:
                data = json.load(f)
            columns = data["result_columns"]
            commit = data["commit_hash"]
            env = data.get("env_name", "")
            date = int(data.get("date") or 0)
            results = data["results"]
        except (OSError, ValueError, KeyError, TypeError):
            unreadable += 1
            continue
        col = {c: i for i, c in enumerate(columns)}
        used = False
        for name, row in results.items():
            if rx and not rx.search(name):
                continue
            bench = benchmarks.get(name)
            if bench is None:
                gone.add(name)
                continue
            if not isinstance(row, list) or "result" not in col:
                continue
            version = row[col["version"]] if "version" in col and col["version"] < len(row) else None
            if version is not None and version != bench.get("version"):
                outdated += 1
                continue
            values = row[col["result"]]
            params = row[col["params"]] if "params" in col and col["params"] < len(row) else []
            combos = list(itertools.product(*params)) if params else [()]
            if not isinstance(values, list):
                values = [values]
            if "started_at" in col and col["started_at"] < len(row) and row[col["started_at"]]:
                measured.append(int(row[col["started_at"]]))
            for combo, v in zip(combos, values):
                if isinstance(v, (int, float)) and math.isfinite(v):
                    points.setdefault((name, _label(combo), machine, env), {})[commit] = float(v)
                    used = True
        if used:
            commits[commit] = max(commits.get(commit, 0), date)
    notes = []
    if unreadable:
        notes.append(f"{unreadable} result file(s) unreadable (not asv 0.6 results?), left out")
    if gone:
        notes.append(f"{len(gone)} benchmark(s) with stored results no longer exist, left out: "
                     + ", ".join(sorted(gone)[:5]) + (" ..." if len(gone) > 5 else ""))
    if outdated:
        notes.append(f"{outdated} result(s) taken with older code of their benchmark, left out "
                     "(rerun those commits to plot them)")
    if not points:
        why = "; ".join(notes) or "every stored benchmark failed or was skipped"
        if rx:
            why = f"no benchmark matching {pattern!r} has results ({why})"
        raise NoData(f"nothing to plot in {results_dir}: {why}")
    span = (min(measured), max(measured)) if measured else None
    return points, benchmarks, commits, notes, span


def is_ratio(name):
    """Speedups against an in-run baseline (bigger is better): track_*speedup*."""
    return name.rsplit(".", 1)[-1].startswith("track_") and "speedup" in name


def family(name):
    return name.rsplit(".", 1)[0]


def ordered_names(points):
    """Benchmark names: families with ratios first, and in each family its ratios first."""
    names = sorted({k[0] for k in points})
    fam_has_ratio = {family(n) for n in names if is_ratio(n)}
    return sorted(names, key=lambda n: (family(n) not in fam_has_ratio, family(n), not is_ratio(n), n))


# ---------------------------------------------------------------- formatting

def fmt(value, unit):
    if value is None:
        return "-"
    if unit == "seconds":
        for scale, u in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
            if abs(value) >= scale or u == "ns":
                return f"{value / scale:.3g}{u}"
    return f"{value:.3g}" + ("x" if unit == "x" else "")


def text_table(points, benchmarks, commits, last):
    """The last `last` commits (columns, oldest first) of every series (rows)."""
    order = sorted(commits, key=lambda c: (commits[c], c))[-last:]
    machines = sorted({k[2] for k in points})
    head = ["benchmark"] + (["machine"] if len(machines) > 1 else []) + [c[:8] for c in order]
    rows = []
    for name in ordered_names(points):
        unit = benchmarks[name].get("unit", "")
        for key in sorted(k for k in points if k[0] == name):
            series = points[key]
            if not any(c in series for c in order):
                continue
            label = name + (f"({key[1]})" if key[1] else "")
            rows.append([label] + ([key[2]] if len(machines) > 1 else [])
                        + [fmt(series.get(c), unit) for c in order])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    nleft = 2 if len(machines) > 1 else 1
    lines = []
    for r in [head] + rows:
        cells = [f"{c:<{w}}" if i < nleft else f"{c:>{w}}" for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    dates = ", ".join(f"{c[:8]} {_day(commits[c])}" for c in order)
    return "\n".join(lines) + f"\n\ncommits (commit date): {dates}\n"


def _day(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


# ---------------------------------------------------------------- drawing

def _plt():
    try:
        import matplotlib
    except ImportError:
        raise NoData("matplotlib is needed for the figures (pip install matplotlib), "
                     "or use --text-only") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_panel(ax, name, points, benchmarks, goals, order, machines, small=False):
    unit = benchmarks[name].get("unit", "")
    scale, shown = 1.0, unit
    keys = sorted(k for k in points if k[0] == name)
    if unit == "seconds":
        top = max(v for k in keys for v in points[k].values())
        scale, shown = next((s, u) for s, u in ((1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
                            if top >= s or u == "ns")
    x_of = {c: i for i, c in enumerate(order)}
    colors = {}
    cycle = [f"C{i}" for i in range(10)]
    for key in keys:
        _, label, machine, _env = key
        series = sorted((x_of[c], v / scale) for c, v in points[key].items() if c in x_of)
        if not series:
            continue
        color = colors.setdefault(label, cycle[len(colors) % len(cycle)])
        style = ["-", "--", ":", "-."][machines.index(machine) % 4]
        text = label or "value"
        if len(machines) > 1:
            text += f" [{machine}]"
        xs, ys = zip(*series)
        ax.plot(xs, ys, style, marker="o", ms=3, color=color, label=text)
    for label, color in colors.items():
        g = goal_for(goals, name, label)
        if isinstance(g, (int, float)):
            ax.axhline(g / scale, color=color, ls="--", lw=1, alpha=0.7,
                       label=f"goal {'>=' if is_ratio(name) else '<='} {g:g}"
                             + (f" ({label})" if label else ""))
    ax.set_title(name.rsplit(".", 1)[-1], fontsize=8 if small else 9)
    ax.set_ylabel(shown, fontsize=8)
    lows = [v / scale for k in keys for v in points[k].values()]
    ax.set_ylim(bottom=min([0.0] + lows) * 1.1)      # from zero: ratios and costs read true to scale
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="best")


def _ticks(ax, order):
    step = max(1, len(order) // 12)
    idx = list(range(0, len(order), step))
    ax.set_xticks(idx)
    ax.set_xticklabels([order[i][:7] for i in idx], rotation=60, fontsize=6)


def family_figure(plt, fam, names, points, benchmarks, goals, order, machines):
    n = len(names)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        draw_panel(ax, name, points, benchmarks, goals, order, machines)
        _ticks(ax, order)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(fam, fontsize=10)
    fig.tight_layout()
    return fig


def summary_figure(plt, names, points, benchmarks, goals, order, machines):
    """Every ratio on one compact figure (the README's)."""
    ratios = [n for n in names if is_ratio(n)] or names[:4]
    cols = min(len(ratios), 3)
    rows = math.ceil(len(ratios) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, ratios):
        draw_panel(ax, name, points, benchmarks, goals, order, machines, small=True)
        ax.set_title(name.split(".", 1)[-1].replace(".track_", "\n"), fontsize=7)
        _ticks(ax, order)
    for ax in list(axes.flat)[len(ratios):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def png(fig, plt, dpi):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def page(figures, table, commits, order, machines, notes):
    """One self-contained HTML page: inline style, images as data URIs, nothing external."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
             "<title>dod benchmark history</title>",
             "<style>body{font-family:sans-serif;margin:1em 2em}img{max-width:100%}"
             "pre{font-size:12px;overflow-x:auto}</style></head><body>",
             "<h1>dod benchmark history</h1>",
             f"<p>{len(order)} commits ({html.escape(order[0][:8])} .. {html.escape(order[-1][:8])}), "
             f"machines: {html.escape(', '.join(machines))}; generated {stamp} by "
             "asv_bench/plot_history.py. Ratios (speedups against a baseline measured in the same "
             "run) first; dashed lines are goals.</p>"]
    for note in notes:
        parts.append(f"<p><em>{html.escape(note)}</em></p>")
    parts.append("<h2>Last commits</h2><pre>" + html.escape(table) + "</pre>")
    for fam, data in figures:
        b64 = base64.b64encode(data).decode("ascii")
        parts.append(f"<h2 id=\"{html.escape(fam)}\">{html.escape(fam)}</h2>")
        parts.append(f"<img class=\"graph\" alt=\"{html.escape(fam)}\" src=\"data:image/png;base64,{b64}\">")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def readme_block(image_rel, order, commits, machines_info, command, measured=None):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    when = f"measured {_day(measured[0])} .. {_day(measured[1])} UTC, " if measured else ""
    return "\n".join([
        "<!-- generated by asv_bench/plot_history.py --readme: do not edit by hand, rerun it -->",
        f"![benchmark history: speedups over {len(order)} commits]({image_rel})",
        "",
        f"Drawn {stamp} from asv results ({when}{len(order)} commits "
        f"{order[0][:8]} of {_day(commits[order[0]])} .. {order[-1][:8]} of {_day(commits[order[-1]])}) "
        f"on {machines_info}. Command: `{command}`. Dashed lines are goals; "
        "`asv_bench/html/history/index.html` has every benchmark.",
    ])


def replace_block(text, block):
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(END) < text.index(BEGIN):
        raise ValueError(f"the README must contain {BEGIN} then {END}, once each")
    a = text.index(BEGIN) + len(BEGIN)
    return text[:a] + "\n" + block + "\n" + text[text.index(END):]


def machine_info(results_dir, machines):
    out = []
    for m in machines:
        try:
            with open(os.path.join(results_dir, m, "machine.json")) as f:
                d = json.load(f)
            out.append(f"{m} ({d.get('cpu', '?')}, {d.get('num_cpu', '?')} cores, {d.get('os', '?')})")
        except (OSError, ValueError):
            out.append(m)
    return "; ".join(out)


# ---------------------------------------------------------------- main

def main(argv=None):
    p = argparse.ArgumentParser(prog="plot_history.py", description=__doc__.split("\n")[0])
    p.add_argument("--results", default=os.path.join(HERE, "results"), help="asv results directory")
    p.add_argument("--benchmarks", default=os.path.join(HERE, "benchmarks"),
                   help="benchmark sources (for the goals)")
    p.add_argument("--out", default=os.path.join(HERE, "html", "history"), help="output directory")
    p.add_argument("--last", type=int, default=8, help="commits in the text table (default 8)")
    p.add_argument("-b", "--bench", default=None, help="only benchmarks whose name matches this regex")
    p.add_argument("--text-only", action="store_true", help="print the table, draw nothing")
    p.add_argument("--summary", default=None, help="also write every ratio on one figure (PNG) here")
    p.add_argument("--readme", default=None, help="rewrite this README's history block (needs --summary)")
    p.add_argument("--command", default="asv_bench/history.sh", help="the command named in the README")
    p.add_argument("--dpi", type=int, default=90)
    a = p.parse_args(argv)
    if a.last < 1:
        p.error("--last must be at least 1")
    if a.readme and not a.summary:
        p.error("--readme needs --summary (the figure it shows)")
    try:
        if a.bench:
            re.compile(a.bench)
    except re.error as e:
        p.error(f"-b: not a regular expression ({e})")
    try:
        points, benchmarks, commits, notes, span = load(a.results, a.bench)
        for note in notes:
            print(f"plot_history: {note}", file=sys.stderr)
        table = text_table(points, benchmarks, commits, a.last)
        sys.stdout.write(table)
        if len(commits) < 2:
            print(f"plot_history: only one commit ({next(iter(commits))[:8]}) has results: no history "
                  "to draw; benchmark more commits (STEPS=10 asv_bench/history.sh ALL)", file=sys.stderr)
            return 3
        if a.text_only:
            return 0
        plt = _plt()
        order = sorted(commits, key=lambda c: (commits[c], c))
        machines = sorted({k[2] for k in points})
        goals = load_goals(a.benchmarks)
        names = ordered_names(points)
        os.makedirs(a.out, exist_ok=True)
        figures = []
        for fam, group in itertools.groupby(names, key=family):
            data = png(family_figure(plt, fam, list(group), points, benchmarks, goals, order, machines),
                       plt, a.dpi)
            with open(os.path.join(a.out, fam + ".png"), "wb") as f:
                f.write(data)
            figures.append((fam, data))
        with open(os.path.join(a.out, "history.txt"), "w") as f:
            f.write(table)
        with open(os.path.join(a.out, "index.html"), "w") as f:
            f.write(page(figures, table, commits, order, machines, notes))
        print(f"plot_history: {len(figures)} figures, {len(order)} commits -> "
              f"{os.path.join(a.out, 'index.html')}", file=sys.stderr)
        if a.summary:
            data = png(summary_figure(plt, names, points, benchmarks, goals, order, machines), plt, a.dpi)
            with open(a.summary, "wb") as f:
                f.write(data)
            print(f"plot_history: summary figure {a.summary} ({len(data) // 1024} KiB)", file=sys.stderr)
        if a.readme:
            rel = os.path.relpath(os.path.abspath(a.summary), os.path.dirname(os.path.abspath(a.readme)))
            with open(a.readme) as f:
                text = f.read()
            new = replace_block(text, readme_block(rel, order, commits,
                                                   machine_info(a.results, machines), a.command,
                                                   span))
            with open(a.readme, "w") as f:
                f.write(new)
            print(f"plot_history: updated {a.readme}", file=sys.stderr)
    except NoData as e:
        print(f"plot_history: {e}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"plot_history: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
