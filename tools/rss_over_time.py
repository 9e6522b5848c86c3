#!/usr/bin/env python3
"""RSS of a command over its run: is memory flat with duration? (issue 12)

Runs a command (by default the live demo, ``python -m dod.tracker``) and
reads its resident set size from ``/proc/PID/status`` (VmRSS; VmHWM is the
peak) every ``--every`` seconds. At the end it prints a table of RSS at
checkpoints and each one's ratio to the RSS after ``--baseline`` seconds,
and a verdict: flat when every sample after the baseline stays within
``--tolerance`` (10 %) of it. Exit status 0 when flat, 1 when not, 2 when the
command failed or ended before the baseline. Linux only (``/proc``).

    python tools/rss_over_time.py -- --targets 1000 --duration 600 --no-live
    python tools/rss_over_time.py -- --targets 100000 --threads 2 --duration 60 --no-live
    python tools/rss_over_time.py --cmd "python my_app.py" --baseline 5

Arguments after ``--`` go to ``python -m dod.tracker`` (this interpreter);
``--cmd`` runs any command instead. The command's own output goes to
``--log`` (default: discarded), so the table is the only output.

``--mark REGEX`` (default: the demo's progress line of its last tick,
``N/N ticks``) ends the measured phase: the verdict covers the samples
before the first output line that matches, and the table shows the rest
apart (after the run the demo's summary scores its latest sampled scans with
motmetrics: a one-time cost bounded by that cap, not by the duration).
"""
import argparse
import re
import shlex
import subprocess
import sys
import threading
import time


def read_status_kib(pid):
    """(VmRSS, VmHWM) of process `pid` in KiB, or None once it is gone."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None if rss is None else (rss, hwm)


def checkpoints(end, baseline):
    """Times (s) the table shows: the baseline, then a roughly doubling series up to `end`."""
    out = [baseline]
    t = baseline
    for step in (10, 20, 30, 60, 120, 180, 300, 420, 600, 900, 1200, 1800, 2400, 3600):
        if step > t and step < end:
            out.append(step)
            t = step
    while t * 2 < end:
        t *= 2
        out.append(t)
    out.append(end)
    return sorted(set(x for x in out if x <= end))


def sample(cmd, every, log, mark=None):
    """Run `cmd`; return ([(seconds, rss_kib, hwm_kib)], returncode, seconds
    when a line of its output first matched `mark` or None)."""
    out = open(log, "wb") if log else None
    marked = []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        pattern = re.compile(mark.encode()) if mark else None

        def reader():
            for line in proc.stdout:
                if out is not None:
                    out.write(line)
                    out.flush()
                if pattern is not None and not marked and pattern.search(line):
                    marked.append(time.monotonic() - t0)

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        samples = []
        try:
            while proc.poll() is None:
                s = read_status_kib(proc.pid)
                if s is not None and proc.poll() is None:
                    samples.append((time.monotonic() - t0, s[0], s[1]))
                time.sleep(every)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
        rc = proc.wait()
        th.join(5)
        return samples, rc, (marked[0] if marked else None)
    finally:
        if out is not None:
            out.close()


def table(samples, baseline, tolerance, mark_at=None):
    """The report lines and whether the run was flat (None: ended before the
    baseline); samples from `mark_at` seconds on are shown apart."""
    rest = [s for s in samples if mark_at is not None and s[0] >= mark_at]
    samples = [s for s in samples if mark_at is None or s[0] < mark_at]
    base = next((s for s in samples if s[0] >= baseline), None)
    if base is None:
        return [f"the command ended after {samples[-1][0] if samples else 0:.1f} s, before the "
                f"{baseline:g} s baseline: nothing to compare"], None
    end = samples[-1][0]
    lines = [f"{'t (s)':>8} {'RSS (MiB)':>10} {'/ RSS@' + format(baseline, 'g') + 's':>11} "
             f"{'peak (MiB)':>11}"]
    for c in checkpoints(end, base[0]):
        s = min(samples, key=lambda x: abs(x[0] - c))
        lines.append(f"{s[0]:8.1f} {s[1] / 1024:10.1f} {s[1] / base[1]:11.3f} {s[2] / 1024:11.1f}")
    after = [s for s in samples if s[0] >= base[0]]
    lo = min(after, key=lambda s: s[1])
    hi = max(after, key=lambda s: s[1])
    flat = hi[1] <= base[1] * (1 + tolerance) and lo[1] >= base[1] * (1 - tolerance)
    lines.append(f"after {base[0]:.1f} s: min {lo[1] / 1024:.1f} MiB at {lo[0]:.0f} s, max "
                 f"{hi[1] / 1024:.1f} MiB at {hi[0]:.0f} s ({hi[1] / base[1] - 1:+.1%} of the "
                 f"baseline), {len(samples)} samples; "
                 + ("FLAT" if flat else "NOT FLAT") + f" within {tolerance:.0%}")
    if rest:
        top = max(rest, key=lambda s: s[1])
        lines.append(f"after the mark ({mark_at:.1f} s: the end of the measured phase): max RSS "
                     f"{top[1] / 1024:.1f} MiB at {top[0]:.0f} s, peak {rest[-1][2] / 1024:.1f} MiB, "
                     f"until {rest[-1][0]:.0f} s")
    return lines, flat


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    passthrough = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description="Sample a command's RSS over its run and print the table.")
    p.add_argument("--cmd", help="command to run (default: python -m dod.tracker ARGS after --)")
    p.add_argument("--every", type=float, default=1.0, help="seconds between samples (1)")
    p.add_argument("--baseline", type=float, default=10.0,
                   help="compare with the RSS after this many seconds (10)")
    p.add_argument("--tolerance", type=float, default=0.10, help="allowed relative change (0.10)")
    p.add_argument("--log", help="file for the command's own output (default: discarded)")
    p.add_argument("--mark", default=r" (\d+)/\1 ticks",
                   help="regex of the output line that ends the measured phase (default: the demo's "
                        "last progress line; '' for none)")
    a = p.parse_args(argv)
    if not (a.every > 0 and a.baseline >= 0 and a.tolerance >= 0):
        p.error("--every must be > 0, --baseline and --tolerance >= 0")
    cmd = shlex.split(a.cmd) if a.cmd else [sys.executable, "-m", "dod.tracker"] + passthrough
    print("command: " + shlex.join(cmd), flush=True)
    samples, rc, mark_at = sample(cmd, a.every, a.log, a.mark or None)
    lines, flat = table(samples, a.baseline, a.tolerance, mark_at)
    print("\n".join(lines))
    if rc != 0:
        print(f"the command exited with status {rc}")
        return 2
    return 2 if flat is None else (0 if flat else 1)


if __name__ == "__main__":
    sys.exit(main())
