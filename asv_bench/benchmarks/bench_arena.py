"""Floor 1, the arena: the ZII/arena article's frame, against malloc/free,
calloc/free and pymalloc in the same run, and numpy columns from Python
against np.empty / np.zeros.

Each time_ benchmark runs FRAMES frames of RECORDS 32-byte records (push,
write two fields, release all) inside one C call, so the interpreter's call
overhead is amortised. The track_ benchmarks report the kernels' own
C-timed ns per record and the speedups, which is what the goals are stated in.
"""
import numpy as np

from ._util import require, skip, speedup

RECORDS = 1000
FRAMES = 200


class ArenaFrame:
    params = ["arena", "arena_zeroed", "cursor", "cursor_reset_zeroed", "malloc", "calloc", "pymem",
              "fields_only"]
    param_names = ["variant"]

    def setup(self, variant):
        self.k = require("dod.bench._arena_kernels")
        arena_mod = require("dod.arena")
        self.arena = arena_mod.Arena(1 << 20)
        if variant == "cursor" and not hasattr(self.k, "frame_cursor"):
            raise NotImplementedError("no cursor in this commit")
        if variant == "cursor_reset_zeroed" and not hasattr(self.k, "frame_cursor_reset_zeroed"):
            raise NotImplementedError("no dod_arena_reset_zeroed in this commit")

    def _run(self, variant, frames):
        k = self.k
        if variant == "arena":
            return k.frame_arena(self.arena, frames, RECORDS)
        if variant == "arena_zeroed":
            return k.frame_arena(self.arena, frames, RECORDS, True)
        if variant == "cursor":
            return k.frame_cursor(self.arena, frames, RECORDS)
        if variant == "cursor_reset_zeroed":
            return k.frame_cursor_reset_zeroed(self.arena, frames, RECORDS)
        if variant == "malloc":
            return k.frame_malloc(frames, RECORDS)
        if variant == "calloc":
            return k.frame_malloc(frames, RECORDS, True)
        if variant == "pymem":
            return k.frame_pymem(frames, RECORDS)
        return k.fields_only(frames, RECORDS)

    def time_frames(self, variant):
        self._run(variant, FRAMES)

    def track_ns_per_record(self, variant):
        return min(self._run(variant, 2000) for _ in range(5))

    track_ns_per_record.unit = "ns/record"


class ArenaSpeedup:
    """Goal: arena >= 10x malloc/free; zeroing adds <= 0.2 ns per record."""

    def setup(self):
        self.k = require("dod.bench._arena_kernels")
        self.arena = require("dod.arena").Arena(1 << 20)

    def _best(self, fn):
        return min(fn() for _ in range(5))

    def track_arena_speedup_vs_malloc(self):
        return speedup(lambda: self.k.frame_malloc(1000, RECORDS),
                       lambda: self.k.frame_arena(self.arena, 5000, RECORDS), rounds=9)

    track_arena_speedup_vs_malloc.unit = "x"
    track_arena_speedup_vs_malloc.goal = 10.0       # read by asv_bench/plot_history.py

    def track_zeroing_cost(self):
        z = self._best(lambda: self.k.frame_arena(self.arena, 5000, RECORDS, True))
        a = self._best(lambda: self.k.frame_arena(self.arena, 5000, RECORDS))
        return z - a

    track_zeroing_cost.unit = "ns/record"
    track_zeroing_cost.goal = 0.2

    def track_bulk_zeroing_cost(self):
        """Zeroed records through the cursor and dod_arena_reset_zeroed, minus plain cursor pushes."""
        if not hasattr(self.k, "frame_cursor_reset_zeroed"):
            skip("no dod_arena_reset_zeroed in this commit")
        z = self._best(lambda: self.k.frame_cursor_reset_zeroed(self.arena, 5000, RECORDS))
        a = self._best(lambda: self.k.frame_cursor(self.arena, 5000, RECORDS))
        return z - a

    track_bulk_zeroing_cost.unit = "ns/record"
    track_bulk_zeroing_cost.goal = 0.2


class StructOfArrays:
    """8 float64 columns of 1000 per frame, every element written."""
    params = ["arena", "malloc"]
    param_names = ["variant"]

    def setup(self, variant):
        self.k = require("dod.bench._arena_kernels")
        self.arena = require("dod.arena").Arena(1 << 20)

    def time_frames(self, variant):
        if variant == "arena":
            self.k.soa_arena(self.arena, 50, RECORDS, 8)
        else:
            self.k.soa_malloc(50, RECORDS, 8)


class PythonColumns:
    """From Python: 8 float32 numpy columns of 1000 per frame.
    Goal: carving from the arena costs <= 1/2 of np.empty."""
    params = ["arena", "np.empty", "np.zeros"]
    param_names = ["variant"]

    def setup(self, variant):
        self.arena = require("dod.arena").Arena(1 << 20)
        self.dt = np.dtype(np.float32)

    def time_frame(self, variant):
        dt = self.dt
        if variant == "arena":
            e = self.arena.empty
            cols = [e(RECORDS, dt) for _ in range(8)]
            del cols
            self.arena.reset()
        elif variant == "np.empty":
            cols = [np.empty(RECORDS, dt) for _ in range(8)]
        else:
            cols = [np.zeros(RECORDS, dt) for _ in range(8)]
