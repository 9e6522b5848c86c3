#!/usr/bin/env python3
"""Rewrite the generated tables of the performance page from a fresh benchmark run.

    python tools/update_readme_perf.py                 # full run, rewrites docs/performance.md
    python tools/update_readme_perf.py --quick         # shorter runs (noisier)
    python tools/update_readme_perf.py --dry-run       # print the block, write nothing
    python tools/update_readme_perf.py --no-tracker    # dod.bench only
    python tools/update_readme_perf.py --thread-sizes ''    # no threaded tracker table

Runs ``python -m dod.bench --markdown`` and the tracker benchmark
(``python -m dod.tracker.bench``: its ``--markdown`` output when it has one,
otherwise its ``run()`` rows rendered here; then, where it takes
``--threads``, its table at 1 and 2 threads up to 100,000 targets), and
replaces everything between the markers ``<!-- perf:begin -->`` and
``<!-- perf:end -->`` in ``docs/performance.md`` (``--page`` names another
file) with the tables, the date, the machine, the commit and the exact
commands. The numbers are never typed by hand: rerun this script instead.
The page is left untouched when a command fails or the markers are missing
(exit status 1).

Run it from a checkout with the extension built in place (``python setup.py
build_ext --inplace``) or with dod installed; the commands run with this
interpreter in the repository root.
"""
import argparse
import datetime
import functools
import importlib.util
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- perf:begin -->"
END = "<!-- perf:end -->"
DEFAULT_PAGE = os.path.join(ROOT, "docs", "performance.md")


def replace_block(text, block):
    """`text` with the lines between BEGIN and END replaced by `block`.
    Raises ValueError unless each marker occurs exactly once, BEGIN first."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"the page must contain {BEGIN} and {END} exactly once each")
    a = text.index(BEGIN) + len(BEGIN)
    b = text.index(END)
    if b < a:
        raise ValueError(f"{END} comes before {BEGIN}")
    return text[:a] + "\n" + block.strip("\n") + "\n" + text[b:]


def _dod_path():
    """The directory above the dod this process would import (the installed
    one), or the repository when none is installed (an in-place build)."""
    spec = importlib.util.find_spec("dod")
    if spec is not None and spec.origin:
        return os.path.dirname(os.path.dirname(spec.origin))
    return ROOT


def _run(cmd):
    # Never let the repository's source folder (no compiled modules) shadow
    # the package: -P drops the working directory from the child's sys.path.
    if cmd[0] == sys.executable:
        cmd = [cmd[0], "-P"] + cmd[1:]
    env = dict(os.environ, PYTHONPATH=_dod_path())
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return p.stdout


def _strip_header(out):
    """dod.bench prints a 3-line header (title, machine, command): this block has its own."""
    lines = out.splitlines()
    while lines and not lines[0].startswith("**"):
        lines.pop(0)
    return "\n".join(lines).strip()


@functools.lru_cache(maxsize=1)
def _bench_help():
    """The tracker bench's --help: which options this dod's bench has."""
    return _run([sys.executable, "-m", "dod.tracker.bench", "--help"])


def _tracker_markdown(quick, sizes):
    """The tracker table: its own --markdown when it has one, else its rows."""
    cmd = [sys.executable, "-m", "dod.tracker.bench", "--sizes", sizes] + (["--quick"] if quick else [])
    if "--markdown" in _bench_help():
        return _strip_header(_run(cmd + ["--markdown"])), " ".join(["python"] + cmd[1:] + ["--markdown"])
    code = ("import json, sys; from dod.tracker.bench import run; "
            f"rows = run(sizes={tuple(int(s) for s in sizes.split(','))!r}, quick={quick!r}, "
            "out=lambda *a: None); json.dump(rows, sys.stdout)")
    import json

    rows = json.loads(_run([sys.executable, "-c", code]))
    head = ("**Tracker: one tick, dod against the numpy reference tracker (2-D constant velocity, "
            "Pd 0.9, clutter 0.2 N per scan, 50 Hz; ms per tick; GC off while timing)**")
    lines = [head, "", "| targets | confirmed | dod p50 | dod p99 | dod CPU p99 | dod max | "
             "reference p50 | reference p99 | reference / dod |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        d = r["dod"]
        f = r.get("reference")
        ref = (f"{f[0]:.3f} | {f[1]:.3f} | {f[0] / d[0]:.1f}x" if f else "- | - | -")
        lines.append(f"| {r['n']:,} | {r['confirmed']:,} | {d[0]:.3f} | {d[1]:.3f} | {d[4]:.3f} | "
                     f"{d[2]:.3f} | {ref} |")
    return "\n".join(lines), " ".join(["python"] + cmd[1:])


def _tracker_threads_markdown(quick, sizes, threads="1,2"):
    """The threaded tick: one tracker per thread count on the same
    scans, without the reference; None when this dod's bench has no --threads."""
    if "--threads" not in _bench_help():
        return None
    cmd = [sys.executable, "-m", "dod.tracker.bench", "--threads", threads, "--sizes", sizes,
           "--no-reference", "--markdown"] + (["--quick"] if quick else [])
    return _strip_header(_run(cmd)), " ".join(["python"] + cmd[1:])


def _commit():
    try:
        h = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return h + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_block(quick=False, tracker=True, sizes="10,100,1000,10000", only=None,
                thread_sizes="1000,10000,100000"):
    bench_cmd = [sys.executable, "-m", "dod.bench", "--markdown"] + (["--quick"] if quick else [])
    if only:
        bench_cmd += ["--only", *only]
    machine = _run([sys.executable, "-c",
                    "from dod.bench.__main__ import machine_line; print(machine_line())"]).strip()
    parts = [_strip_header(_run(bench_cmd))]
    commands = [" ".join(["python"] + bench_cmd[1:])]
    if tracker:
        table, cmd = _tracker_markdown(quick, sizes)
        parts.append(table)
        commands.append(cmd)
        threaded = _tracker_threads_markdown(quick, thread_sizes) if thread_sizes else None
        if threaded:
            parts.append(threaded[0])
            commands.append(threaded[1])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "<!-- generated by tools/update_readme_perf.py: do not edit by hand, rerun it -->",
        f"Measured {stamp} on {machine}, commit {_commit()}. Medians of repeated runs on a "
        "shared machine: compare ratios within a table, not absolute times across machines.",
        "",
        "Commands: " + "; ".join(f"`{c}`" for c in commands),
    ]
    return "\n".join(head) + "\n\n" + "\n\n".join(parts) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="tools/update_readme_perf.py",
                                description=__doc__.split("\n")[0])
    p.add_argument("--page", "--readme", dest="page", default=DEFAULT_PAGE,
                   help="the Markdown file whose perf markers are rewritten (docs/performance.md)")
    p.add_argument("--quick", action="store_true", help="pass --quick to the benchmarks")
    p.add_argument("--no-tracker", action="store_true", help="skip python -m dod.tracker.bench")
    p.add_argument("--sizes", default="10,100,1000,10000", help="tracker sizes (10,100,1000,10000)")
    p.add_argument("--thread-sizes", default="1000,10000,100000",
                   help="sizes of the threaded tracker table, threads 1 and 2 ('' skips it)")
    p.add_argument("--only", nargs="*", help="dod.bench sections (default: all)")
    p.add_argument("--dry-run", action="store_true", help="print the block, change nothing")
    a = p.parse_args(argv)
    try:
        with open(a.page) as f:
            text = f.read()
        replace_block(text, "")              # markers checked before minutes of benchmarks
        block = build_block(a.quick, not a.no_tracker, a.sizes, a.only, a.thread_sizes)
        new = replace_block(text, block)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"update_readme_perf: {e}", file=sys.stderr)
        return 1
    if a.dry_run:
        print(block)
        return 0
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.page)), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.chmod(tmp, os.stat(a.page).st_mode & 0o7777)      # mkstemp made it 0600
    os.replace(tmp, a.page)
    print(f"updated {a.page} ({len(block.splitlines())} lines between the perf markers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
