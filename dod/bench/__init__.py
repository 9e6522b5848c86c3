"""``python -m dod.bench``: allocator and table workloads timed on this machine.

Each section is a module of this package with a ``run(quick)`` function
returning a Section or a list of them; its kernels are compiled Cython (``_*_kernels.pyx``) timed in C
around whole loops, so the numbers are the engine's, not the interpreter's.
Every row is compared against the section's baseline measured in the same
run (malloc/free, numpy, plain Python objects).

Sections live in floors 1-3 only; the tracker has its own
``python -m dod.tracker.bench``.
"""
import os
from dataclasses import dataclass, field

# Section modules, in the order the table prints them.
SECTIONS = ["arena", "pool", "freelist", "table", "atomic", "concurrent", "numpy_memory", "ring"]


@dataclass
class Row:
    """One line of a benchmark table: a per-operation cost, with a note.

    Parameters
    ----------
    name : str
        What the row measures.
    value : float
        The cost of one operation, in `unit`.
    unit : str, default "ns"
        The unit of `value`.
    note : str, default ""
        Shown in the table's last column.

    Raises
    ------
    TypeError
        For a missing or unknown field (the dataclass constructor).

    Notes
    -----
    Thread-safety: a plain record; share it read-only.
    """
    name: str
    value: float            # per-operation cost, in `unit`
    unit: str = "ns"
    note: str = ""


@dataclass
class Section:
    """One benchmark table: rows compared against the `baseline` row measured in the same run.

    Parameters
    ----------
    title : str
        The table's title.
    baseline : str
        The name of the row the others are compared against.
    rows : list of Row, default []
        The rows, in the order printed (:meth:`add` appends).
    per : str, default "op"
        What one operation is ("record", "pair", "frame"...).
    goal : str, default ""
        The goal the rows are measured against.

    Raises
    ------
    TypeError
        For a missing or unknown field (the dataclass constructor).

    Notes
    -----
    Thread-safety: one thread builds a section; share it read-only after.
    """
    title: str
    baseline: str           # name of the row the others are compared against
    rows: list = field(default_factory=list)
    per: str = "op"         # what one operation is ("record", "pair", "frame"...)
    goal: str = ""          # the goal, as the issue states it

    def add(self, name, value, unit="ns", note=""):
        """Append a Row.

        Parameters
        ----------
        name : str
            What the row measures.
        value : float
            The cost of one operation, in `unit`.
        unit : str, default "ns"
            The unit of `value`.
        note : str, default ""
            Shown in the table's last column.

        Returns
        -------
        float
            `value`, so a measurement can be added and used in one line.

        Notes
        -----
        Thread-safety: one thread builds a section.
        """
        self.rows.append(Row(name, value, unit, note))
        return value

    def value(self, name):
        """The value of the row called `name`.

        Parameters
        ----------
        name : str
            A row's name.

        Returns
        -------
        float

        Raises
        ------
        KeyError
            When no row has that name.

        Notes
        -----
        Thread-safety: reads the rows; safe once the section is built.
        """
        for row in self.rows:
            if row.name == name:
                return row.value
        raise KeyError(name)


def thread_counts():
    """Thread counts for the scaling rows.

    Returns
    -------
    list of int
        1 and 2, or the counts listed in the environment variable
        ``DOD_BENCH_THREADS`` (e.g. ``1,2,4,8``), sorted, 1 always included.

    Raises
    ------
    ValueError
        When ``DOD_BENCH_THREADS`` lists no count, or one below 1.

    Notes
    -----
    Thread-safety: reads the environment only; any thread may call it.
    """
    raw = os.environ.get("DOD_BENCH_THREADS", "1,2")
    counts = sorted({int(x) for x in raw.split(",") if x.strip()})
    if not counts or counts[0] < 1:
        raise ValueError(f"DOD_BENCH_THREADS must list positive thread counts, got {raw!r}")
    if counts[0] != 1:
        counts = [1] + counts
    return counts


def median_of(fn, repeat):
    """The median of `repeat` timings.

    Parameters
    ----------
    fn : callable
        Takes no argument, returns one timing.
    repeat : int
        Calls of `fn` (at least 1).

    Returns
    -------
    float or int
        The median (the upper one for an even `repeat`).

    Notes
    -----
    Thread-safety: calls `fn` on the calling thread; as safe as `fn` is.
    """
    values = sorted(fn() for _ in range(repeat))
    return values[len(values) // 2]
