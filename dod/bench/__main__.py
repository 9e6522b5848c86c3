"""Print dod's benchmark table: python -m dod.bench [--quick] [--only NAME ...] [--markdown] [--threads 1,2,4]."""
import argparse
import importlib
import os
import sys

# machine_line is imported from here by tools/update_readme_perf.py.
from dod._report import header, machine_line
from dod._report import section as render
from dod.bench import SECTIONS


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
    print(header("dod.bench", argv or sys.argv[1:], machine_line()))
    for name in names:
        result = importlib.import_module(f"dod.bench.{name}").run(quick=args.quick)
        for section in result if isinstance(result, (list, tuple)) else [result]:
            print(render(section, args.markdown), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
