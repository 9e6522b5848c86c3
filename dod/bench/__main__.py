"""Print dod's benchmark table: python -m dod.bench [--quick] [--only NAME ...] [--markdown] [--threads 1,2,4]."""
import argparse
import datetime
import importlib
import os
import platform
import sys

from dod.bench import SECTIONS


def machine_line():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import numpy

    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {numpy.__version__}, {platform.system()} {platform.release()}")


def render(section, markdown):
    base = section.value(section.baseline)
    lines = []
    head = f"{section.title} (per {section.per}; ratio = {section.baseline} / row)"
    if markdown:
        lines += [f"**{head}**", "", "| workload | time | vs baseline | note |", "|---|---:|---:|---|"]
    else:
        lines += [head, "-" * len(head)]
    for row in section.rows:
        ratio = base / row.value if row.value > 0 else float("inf")
        t = f"{row.value:.2f} {row.unit}"
        if markdown:
            lines.append(f"| {row.name} | {t} | {ratio:.2f}x | {row.note} |")
        else:
            lines.append(f"  {row.name:<46} {t:>14} {ratio:>8.2f}x  {row.note}")
    if section.goal:
        lines.append(("" if not markdown else "\n") + f"  goal: {section.goal}")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m dod.bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repetitions (noisier)")
    p.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (for the README)")
    p.add_argument("--threads", help="thread counts of the scaling rows, e.g. 1,2,4,8,16 "
                                     "(sets DOD_BENCH_THREADS; default 1,2)")
    args = p.parse_args(argv)
    if args.threads:
        os.environ["DOD_BENCH_THREADS"] = args.threads
    names = args.only or SECTIONS
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"dod.bench  {stamp}\n{machine_line()}\ncommand: python -m dod.bench {' '.join(argv or sys.argv[1:])}\n")
    for name in names:
        result = importlib.import_module(f"dod.bench.{name}").run(quick=args.quick)
        for section in result if isinstance(result, (list, tuple)) else [result]:
            print(render(section, args.markdown), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
