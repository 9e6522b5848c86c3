"""The arena section of ``python -m dod.bench``: the ZII/arena article's workloads."""
import time

import numpy as np

from dod.arena import Arena
from dod.bench import Section, median_of
from dod.bench import _arena_kernels as k

RECORDS = 1000          # records per frame
COLUMNS = 8


def _python_columns(fn, frames):
    t0 = time.perf_counter_ns()
    for _ in range(frames):
        fn()
    return (time.perf_counter_ns() - t0) / frames


def run(quick=False):
    """The arena section of ``python -m dod.bench``: records per frame, struct of
    arrays, and pushes from Python.

    Parameters
    ----------
    quick : bool, default False
        Fewer iterations and repeats (noisier numbers).

    Returns
    -------
    list of Section
        The section's tables, each against its baseline measured in the same
        run, as ``python -m dod.bench`` prints them.

    Raises
    ------
    ImportError
        When the section's compiled kernels are not built.

    Notes
    -----
    Thread-safety: run one benchmark at a time (the timings share the
    machine); the objects it times are its own.
    """
    repeat = 3 if quick else 9
    frames = 2000 if quick else 20000
    arena = Arena(1 << 20)

    rec = Section("Arena: one frame of 1000 x 32-byte records, write two fields, release all",
                  baseline="malloc/free", per="record",
                  goal="arena <= 1.0 ns/record and >= 10x malloc/free; zeroing adds <= 0.2 ns/record")
    rec.add("malloc/free", median_of(lambda: k.frame_malloc(frames, RECORDS), repeat))
    rec.add("calloc/free", median_of(lambda: k.frame_malloc(frames, RECORDS, True), repeat))
    rec.add("PyMem_Malloc/PyMem_Free (GIL)", median_of(lambda: k.frame_pymem(frames, RECORDS), repeat))
    rec.add("arena push + reset (nogil, inline)", median_of(lambda: k.frame_arena(arena, frames, RECORDS), repeat))
    rec.add("arena push zeroed + reset", median_of(lambda: k.frame_arena(arena, frames, RECORDS, True), repeat))
    rec.add("arena cursor push + close + reset", median_of(lambda: k.frame_cursor(arena, frames, RECORDS), repeat),
            note="position kept in registers (dod_arena_open/dod_cursor_push)")
    rec.add("arena cursor push zeroed + close + reset",
            median_of(lambda: k.frame_cursor(arena, frames, RECORDS, True), repeat))
    rec.add("arena cursor push + reset_zeroed (ZII in bulk)",
            median_of(lambda: k.frame_cursor_reset_zeroed(arena, frames, RECORDS), repeat),
            note="records read zero without per-record stores")
    rec.add("fields only, no allocation (floor)", median_of(lambda: k.fields_only(frames, RECORDS), repeat))

    soa = Section(f"Arena: struct of arrays, {COLUMNS} float64 columns of {RECORDS} per frame, every element written",
                  baseline="malloc/free per column", per="frame")
    soa.add("malloc/free per column", median_of(lambda: k.soa_malloc(frames // 4, RECORDS, COLUMNS), repeat), "ns")
    soa.add("arena push + reset", median_of(lambda: k.soa_arena(arena, frames // 4, RECORDS, COLUMNS), repeat), "ns")

    f32 = np.dtype(np.float32)
    py_frames = frames // 4

    def carve():
        e = arena.empty
        cols = [e(RECORDS, f32) for _ in range(COLUMNS)]
        del cols
        arena.reset()

    def np_empty():
        e = np.empty
        cols = [e(RECORDS, f32) for _ in range(COLUMNS)]
        del cols

    def np_zeros():
        z = np.zeros
        cols = [z(RECORDS, f32) for _ in range(COLUMNS)]
        del cols

    py = Section(f"From Python: {COLUMNS} float32 numpy columns of {RECORDS} per frame",
                 baseline="np.empty", per="frame",
                 goal="an array carved from the arena costs <= 1/2 of np.empty")
    py.add("np.empty", median_of(lambda: _python_columns(np_empty, py_frames), repeat))
    py.add("np.zeros", median_of(lambda: _python_columns(np_zeros, py_frames), repeat))
    py.add("Arena.empty + reset", median_of(lambda: _python_columns(carve, py_frames), repeat))
    return [rec, soa, py]
