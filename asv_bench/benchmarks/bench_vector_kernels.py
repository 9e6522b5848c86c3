"""asv: the tracker's lane kernels (dod/tracker/vector_kernels.h) on each
instruction-set path against the per-row kernels (issue 60).

One call runs a kernel over N rows: ``path="rows"`` is kalman.pxd's per-row
kernel over row-major rows (x + r * 2d, packed P + r * d (2d + 1)), one row
at a time, as the tracker's passes ran it; the others are the lane kernel
(element a of row r at [a, r]) on that path. ns per row = time / N. The
goals are the tracker's (predict and update >= 3x faster at 100,000 targets
on one thread, no slower at 1,000): this suite shows what the kernels alone
give. A path this CPU lacks is skipped. ``dtype="float32"`` runs the
float32 lane kernels (x, P, Si and hw in single precision; there is no
per-row float32 kernel, so ``path="rows"`` runs float64 only).
VectorKernelSpeedup tracks the ratio per row against the per-row kernel, and
VectorKernelFloat32Speedup the float64 lane kernel's cost over the float32
one's on the same path, each timed in the thread's CPU time (what another
process on the machine does not move), interleaved.
"""
import time

from ._util import require, speedup

PATHS = ["rows", "baseline", "avx2", "avx512"]
DTYPES = ["float64", "float32"]


class VectorKernels:
    params = (PATHS, [2, 3], [1_000, 100_000], DTYPES)
    param_names = ["path", "d", "n", "dtype"]
    timeout = 120

    def setup(self, path, d, n, dtype="float64"):
        import numpy as np

        self.vec = require("dod.tracker._vector")
        self.hooks = require("dod.tracker._kernel_hooks")
        if not hasattr(self.hooks, "_rows_gate"):
            raise NotImplementedError("the per-row hooks are not in this commit")
        if dtype != "float64" and path == "rows":
            raise NotImplementedError("the per-row kernels are float64 only")
        if path != "rows":
            if path not in self.vec.simd_paths():
                raise NotImplementedError(f"this CPU lacks the {path} path")
            self.vec.set_simd(path)
        rng = np.random.default_rng(60)
        m = 2 * d
        A = rng.normal(0.0, 1.0, (n, m, m))
        full = A @ A.transpose(0, 2, 1) + np.eye(m)
        iu = np.triu_indices(m)
        rows_x = rng.normal(0.0, 100.0, (n, m))
        rows_P = np.ascontiguousarray(full[:, iu[0], iu[1]])
        self.r2 = 1.0
        Si = np.zeros((n, d * d))
        hw = np.zeros((n, d))
        hm = np.zeros(n)
        ok = np.zeros(n, np.uint8)
        self.hooks._rows_gate(rows_P, self.r2, 9.21, Si, hw, hm, ok)
        self.out = (Si, hw, hm, ok)
        self.Si = Si.copy()
        self.z = np.ascontiguousarray(rows_x[:, :d] + rng.normal(0.0, 1.0, (n, d)))
        det = np.arange(n, dtype=np.int32)
        det[rng.random(n) >= 0.9] = -1          # Pd 0.9
        det[ok == 0] = -1
        self.det = det
        if path == "rows":
            self.x, self.P = rows_x, rows_P
        else:
            self.x, self.P = rows_x.T.astype(dtype, order="C"), rows_P.T.astype(dtype, order="C")
            if dtype != "float64":
                try:                    # a commit before the float32 kernels: its hooks take float64 only
                    self.vec._vk_predict(self.x[:, :1].copy(), self.P[:, :1].copy(), 0.02, 1.0)
                except (TypeError, ValueError):
                    raise NotImplementedError("the float32 lane kernels are not in this commit") from None
                # Si and hw in the lanes' dtype (float64 in a commit whose
                # float32 kernels widened them)
                sdt = dtype
                one = (np.zeros((1, d * d), sdt), np.zeros((1, d), sdt), np.zeros(1), np.zeros(1, np.uint8))
                try:
                    self.vec._vk_gate(self.P[:, :1].copy(), self.r2, 9.21, *one)
                except ValueError:
                    sdt = "float64"
                self.out = (Si.astype(sdt), hw.astype(sdt), hm, ok)
                self.Si = Si.astype(sdt)
        self.rows = path == "rows"
        self.args = (path, d, n, dtype)

    def teardown(self, path, d, n, dtype="float64"):
        if path != "rows" and hasattr(self, "vec"):     # (asv tears down after a setup that raised too)
            self.vec.set_simd("auto")

    def time_predict(self, path, d, n, dtype="float64"):
        if self.rows:
            self.hooks._rows_predict(self.x, self.P, 0.02, 1.0)
        else:
            self.vec._vk_predict(self.x, self.P, 0.02, 1.0)

    def time_gate_rows(self, path, d, n, dtype="float64"):
        if self.rows:
            self.hooks._rows_gate(self.P, self.r2, 9.21, *self.out)
        else:
            self.vec._vk_gate(self.P, self.r2, 9.21, *self.out)

    def time_update(self, path, d, n, dtype="float64"):
        if self.rows:
            self.hooks._rows_update(self.x, self.P, self.det, self.z, self.Si, self.r2)
        else:
            self.vec._vk_update(self.x, self.P, self.det, self.z, self.Si, self.r2)



def _cost(bench, kernel, reps):
    """Thread CPU time of `reps` calls of a set-up VectorKernels' time_<kernel>."""
    f = getattr(bench, "time_" + kernel)
    t0 = time.thread_time_ns()
    for _ in range(reps):
        f(*bench.args)
    return time.thread_time_ns() - t0


def _ratio(slow, fast, kernel, reps):
    """slow's cost over fast's (two set-up VectorKernels), interleaved."""
    return speedup(lambda: _cost(slow, kernel, reps), lambda: _cost(fast, kernel, reps), rounds=9)


class VectorKernelSpeedup:
    """rows / path: the per-row kernel's cost over the lane kernel's, per kernel."""

    params = (PATHS[1:], [2, 3], [1_000, 100_000])
    param_names = ["path", "d", "n"]
    timeout = 300

    def setup(self, path, d, n):
        self.rows, self.lanes = VectorKernels(), VectorKernels()
        self.rows.setup("rows", d, n)
        self.lanes.setup(path, d, n)
        self.reps = max(1, 100_000 // n)

    def teardown(self, path, d, n):
        self.lanes.teardown(path, d, n)

    def _ratio(self, kernel, path, d, n):
        return _ratio(self.rows, self.lanes, kernel, self.reps)

    def track_predict(self, path, d, n):
        return self._ratio("predict", path, d, n)

    def track_gate_rows(self, path, d, n):
        return self._ratio("gate_rows", path, d, n)

    def track_update(self, path, d, n):
        return self._ratio("update", path, d, n)

    track_predict.unit = track_gate_rows.unit = track_update.unit = "x"


class VectorKernelFloat32Speedup:
    """float64 / float32: the float64 lane kernel's cost over the float32
    one's, on the same path, per kernel (x and P in half the bytes, twice
    the lanes per vector)."""

    params = (PATHS[1:], [2, 3], [1_000, 100_000])
    param_names = ["path", "d", "n"]
    timeout = 300

    def setup(self, path, d, n):
        self.f64, self.f32 = VectorKernels(), VectorKernels()
        self.f64.setup(path, d, n, "float64")
        self.f32.setup(path, d, n, "float32")
        self.reps = max(1, 100_000 // n)

    def teardown(self, path, d, n):
        self.f64.teardown(path, d, n)           # set up first: it chose the path

    def track_predict(self, path, d, n):
        return _ratio(self.f64, self.f32, "predict", self.reps)

    def track_gate_rows(self, path, d, n):
        return _ratio(self.f64, self.f32, "gate_rows", self.reps)

    def track_update(self, path, d, n):
        return _ratio(self.f64, self.f32, "update", self.reps)

    track_predict.unit = track_gate_rows.unit = track_update.unit = "x"
