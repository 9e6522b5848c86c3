"""The one report renderer of dod's benchmark CLIs (internal).

``python -m dod.bench``, ``python -m dod.tracker.bench`` and
``python -m dod.cuda.bench`` print their numbers through this module: the
three-line header (program and date, machine, command), tables as aligned
text for terminals or as Markdown for the README, and the "rows against a
baseline" section every allocator benchmark reports. Pure Python, no
dependency beyond the standard library (numpy only for its version in the
machine line); nothing here times anything.

Thread safety: every function is pure apart from reading /proc/cpuinfo and
the clock; call them from any thread.
"""
import datetime
import os
import platform

SEPARATOR = "|"     # a column whose header is SEPARATOR is a vertical rule in text


def machine_line():
    """One line naming the CPU, its cores, Python, numpy and the OS."""
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


def header(prog, argv, machine):
    """The header every CLI prints first: `prog  <UTC date>`, `machine`, the command, a blank line."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"{prog}  {stamp}\n{machine}\ncommand: python -m {prog} {' '.join(argv)}\n"


def table(headers, rows, align=None, markdown=False, indent="", show_header=True):
    """`rows` (sequences of cells, str() applied) under `headers` as one string.

    align: one of "<" / ">" per column (default: first column left, the others
    right). Text: columns padded to their widest cell, joined by one space,
    each line prefixed by `indent`; a column headed SEPARATOR prints as a
    vertical rule. Markdown: a pipe table (separator columns dropped, the
    alignment row from `align`); `show_header` False has no effect there, as
    Markdown tables need their header. Raises ValueError when a row's length
    differs from the headers'.
    """
    headers = [str(h) for h in headers]
    ncol = len(headers)
    if align is None:
        align = ["<"] + [">"] * (ncol - 1)
    if len(align) != ncol:
        raise ValueError(f"align has {len(align)} entries for {ncol} columns")
    cells = []
    for r in rows:
        r = [str(c) for c in r]
        if len(r) != ncol:
            raise ValueError(f"row {r!r} has {len(r)} cells for {ncol} columns")
        cells.append(r)
    if markdown:
        keep = [i for i, h in enumerate(headers) if h != SEPARATOR]
        rule = {"<": "---", ">": "---:", "^": ":---:"}
        out = ["| " + " | ".join(headers[i] for i in keep) + " |",
               "|" + "|".join(rule[align[i]] for i in keep) + "|"]
        out += ["| " + " | ".join(r[i] for i in keep) + " |" for r in cells]
        return "\n".join(out)
    widths = [max([len(headers[i]) if show_header else 0] + [len(r[i]) for r in cells])
              for i in range(ncol)]

    def line(r):
        parts = [f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)]
        return (indent + " ".join(parts)).rstrip()

    out = [line(headers)] if show_header else []
    out += [line(r) for r in cells]
    return "\n".join(out)


def ratio(base, value):
    """base / value: inf for a zero value, nan for a negative or NaN one."""
    if value != value or value < 0:
        return float("nan")
    return base / value if value > 0 else float("inf")


def section(sec, markdown=False):
    """A benchmark section (title, baseline, per, rows of name/value/unit/note, goal)
    as text or Markdown: every row's time and its ratio baseline / row."""
    base = sec.value(sec.baseline)
    head = f"{sec.title} (per {sec.per}; ratio = {sec.baseline} / row)"
    rows = [(r.name, f"{r.value:.2f} {r.unit}", f"{ratio(base, r.value):.2f}x", r.note) for r in sec.rows]
    if markdown:
        lines = [f"**{head}**", "",
                 table(("workload", "time", "vs baseline", "note"), rows, ("<", ">", ">", "<"), markdown=True)]
    else:
        lines = [head, "-" * len(head)]
        if rows:        # two spaces before a note: it reads apart from the ratio
            rows = [r[:3] + ((" " + r[3]) if r[3] else "",) for r in rows]
            lines.append(table(("", "", "", ""), rows, ("<", ">", ">", "<"), indent="  ",
                               show_header=False))
    if sec.goal:
        lines.append(("\n" if markdown else "") + f"  goal: {sec.goal}")
    lines.append("")
    return "\n".join(lines)
