"""The instruction-set paths of the tracker's vector kernels, and the one
place that chooses among them.

vector_kernels.h compiles the constant-velocity kernels over lanes of
tracks once per instruction set: ``baseline`` (x86-64's SSE2, what the
wheel targets), ``avx2`` (AVX2 and FMA) and ``avx512`` (AVX-512F). At
import this module keeps the paths the CPU runs (``simd_paths()``) and
selects one: the widest, or the one the environment variable ``DOD_SIMD``
names (``baseline``, ``avx2``, ``avx512`` or ``auto``; an unknown name, or
a path this CPU lacks, raises ValueError at import). ``set_simd(name)``
selects another for the whole process. Every path gives the same bits (the
kernels repeat the per-row kernels' operations in order and the build never
fuses a multiply-add), so the choice changes only the speed.

The kernels' C-level face (dod_vk_cv_predict, dod_vk_gate_rows,
dod_vk_cv_update, their float32 twins dod_vk_*_f32, and the gated pairs'
distances dod_vk_pair_d2, selected by the same switch) is declared in
_vector.pxd; the ``_vk_*`` functions are test
hooks that run them on numpy lane arrays (float64 or float32).
"""
import os

import numpy as np

from cython cimport floating
from libc.stdint cimport int32_t, uint8_t
from dod.tracker.kalman cimport dod_kalman_noise, dod_kalman_noise_of


cdef extern from "tracker/vector_kernels.h" nogil:
    ctypedef void (*dod_vk_predict_fn)(double*, size_t, double*, size_t, size_t, size_t, double, double, double,
                                       double) noexcept
    ctypedef void (*dod_vk_gate_fn)(const double*, size_t, size_t, size_t, double, double, double*, double*,
                                    double*, uint8_t*) noexcept
    ctypedef void (*dod_vk_update_fn)(double*, size_t, double*, size_t, size_t, size_t, const int32_t*,
                                      const double*, const double*, double) noexcept
    ctypedef void (*dod_vk_predict_fn_f32)(float*, size_t, float*, size_t, size_t, size_t, double, double,
                                           double, double) noexcept
    ctypedef void (*dod_vk_gate_fn_f32)(const float*, size_t, size_t, size_t, double, double, float*, float*,
                                        double*, uint8_t*) noexcept
    ctypedef void (*dod_vk_update_fn_f32)(float*, size_t, float*, size_t, size_t, size_t, const int32_t*,
                                          const double*, const float*, double) noexcept
    ctypedef struct dod_vk_set:
        dod_vk_predict_fn predict[2]
        dod_vk_gate_fn gate[2]
        dod_vk_update_fn update[2]
    ctypedef struct dod_vk_set_f32:
        dod_vk_predict_fn_f32 predict[2]
        dod_vk_gate_fn_f32 gate[2]
        dod_vk_update_fn_f32 update[2]
    ctypedef void (*dod_vk_pairs_fn)(const double*, const double*, size_t, size_t, double*) noexcept
    ctypedef struct dod_vk_kernels:
        const char* name
        dod_vk_set f64
        dod_vk_set_f32 f32
        dod_vk_pairs_fn pair_d2[2]
    const dod_vk_kernels** dod_vk_paths
    enum:
        DOD_VK_NPATHS
    int dod_vk_path_supported(int i)


# The selected path (both element types' kernels): read once per call of a
# kernel (one indirect call per block of rows), written only by _select
# (import, set_simd).
cdef const dod_vk_kernels* _kernels = dod_vk_paths[0]


cdef void dod_vk_cv_predict(int d, double* x, size_t xs, double* P, size_t ps, size_t r0, size_t r1,
                            const dod_kalman_noise* w) noexcept nogil:
    _kernels.f64.predict[d - 2](x, xs, P, ps, r0, r1, w.dt, w.q11, w.q12, w.q22)


cdef void dod_vk_gate_rows(int d, const double* P, size_t ps, size_t r0, size_t r1, double r2, double gate,
                           double* Si, double* hw, double* hm, uint8_t* gateable) noexcept nogil:
    _kernels.f64.gate[d - 2](P, ps, r0, r1, r2, gate, Si, hw, hm, gateable)


cdef void dod_vk_cv_update(int d, double* x, size_t xs, double* P, size_t ps, size_t r0, size_t r1,
                           const int32_t* det, const double* z, const double* Si, double r2) noexcept nogil:
    _kernels.f64.update[d - 2](x, xs, P, ps, r0, r1, det, z, Si, r2)


cdef void dod_vk_cv_predict_f32(int d, float* x, size_t xs, float* P, size_t ps, size_t r0, size_t r1,
                                const dod_kalman_noise* w) noexcept nogil:
    _kernels.f32.predict[d - 2](x, xs, P, ps, r0, r1, w.dt, w.q11, w.q12, w.q22)


cdef void dod_vk_gate_rows_f32(int d, const float* P, size_t ps, size_t r0, size_t r1, double r2, double gate,
                               float* Si, float* hw, double* hm, uint8_t* gateable) noexcept nogil:
    _kernels.f32.gate[d - 2](P, ps, r0, r1, r2, gate, Si, hw, hm, gateable)


cdef void dod_vk_cv_update_f32(int d, float* x, size_t xs, float* P, size_t ps, size_t r0, size_t r1,
                               const int32_t* det, const double* z, const float* Si, double r2) noexcept nogil:
    _kernels.f32.update[d - 2](x, xs, P, ps, r0, r1, det, z, Si, r2)


cdef void dod_vk_pair_d2(int d, const double* y, const double* Si, size_t ls, size_t n,
                         double* d2) noexcept nogil:
    _kernels.pair_d2[d - 2](y, Si, ls, n, d2)


# ---------------------------------------------------------------- the Python face

def _all_paths():
    return tuple(dod_vk_paths[i].name.decode() for i in range(DOD_VK_NPATHS))


_PATHS = _all_paths()
_SUPPORTED = tuple(_PATHS[i] for i in range(DOD_VK_NPATHS) if dod_vk_path_supported(i))


def simd_paths():
    """The instruction-set paths of the tracker's kernels that this CPU runs.

    Returns
    -------
    tuple of str
        From the most basic to the widest: ``"baseline"`` always, then
        ``"avx2"`` (AVX2 and FMA) and ``"avx512"`` (AVX-512F) where the CPU
        and the operating system support them.

    Notes
    -----
    Every path gives bit-identical results; only the speed differs.
    """
    return _SUPPORTED


def simd_path():
    """The instruction-set path the tracker's kernels run now (see simd_paths).

    Returns
    -------
    str
        One of :func:`simd_paths`: the widest unless ``DOD_SIMD`` or
        :func:`set_simd` chose another.
    """
    return _kernels.name.decode()


cdef _select(name, what):
    """Select the path called `name` ("auto": the widest); ValueError, with
    the selection unchanged, for an unknown name or one this CPU lacks."""
    global _kernels
    if not isinstance(name, str):
        raise TypeError(f"{what} takes a path name (str), not {type(name).__name__}")
    key = name.strip().lower()
    if key in ("", "auto"):
        key = _SUPPORTED[len(_SUPPORTED) - 1]      # (no negative index: wraparound is off)
    if key not in _PATHS:
        raise ValueError(f"{what}: unknown path {name!r}; the paths are {', '.join(_PATHS)} and auto")
    if key not in _SUPPORTED:
        raise ValueError(f"{what}: this CPU lacks the {key} path; it runs {', '.join(_SUPPORTED)}")
    _kernels = dod_vk_paths[_PATHS.index(key)]


def set_simd(name):
    """Select the instruction-set path of the tracker's kernels for the process.

    Parameters
    ----------
    name : str
        ``"baseline"``, ``"avx2"``, ``"avx512"`` or ``"auto"`` (the widest
        this CPU runs).

    Raises
    ------
    ValueError
        For an unknown name or a path this CPU lacks (:func:`simd_paths`);
        the selection is then unchanged.
    TypeError
        When `name` is not a string.

    Notes
    -----
    Results do not depend on the path, only the speed. Not thread-safe
    against a tick: call it between ticks. The environment variable
    ``DOD_SIMD`` makes the same choice when the module is imported.
    """
    _select(name, "set_simd")


_select(os.environ.get("DOD_SIMD", "auto"), "DOD_SIMD")


# ---------------------------------------------------------------- test hooks on lane arrays

# Each hook takes lanes of float64 (the double kernels) or float32 (the
# _f32 kernels): x, P, Si and hw of one dtype; hm and z float64 in both.

cdef int _lanes_dim(Py_ssize_t x_lanes, Py_ssize_t P_lanes) except -1:
    """d of a test hook's lanes: x of 2d lanes, P of d (2d + 1), d 2 or 3."""
    cdef int d = x_lanes // 2
    if d not in (2, 3) or x_lanes != 2 * d or P_lanes != d * (2 * d + 1):
        raise ValueError("the lane kernels take x of 4 or 6 lanes and P of 10 or 21")
    return d


cdef size_t _rows_end(r0, r1, size_t rows) except? 0:
    cdef size_t end = rows if r1 is None else r1
    if r0 < 0 or end > rows or r0 > end:
        raise ValueError(f"rows [{r0}, {end}) are not within the {rows} rows")
    return end


def _vk_predict(floating[:, ::1] x, floating[:, ::1] P, double dt, double q, size_t r0=0, r1=None):
    """Test hook: dod_vk_cv_predict (float64 lanes) or dod_vk_cv_predict_f32
    (float32) on rows [r0, r1) of lanes x (2d, N) and P (d (2d + 1), N), in
    place, through the selected path."""
    cdef int d = _lanes_dim(x.shape[0], P.shape[0])
    cdef size_t end = _rows_end(r0, r1, min(x.shape[1], P.shape[1]))
    cdef dod_kalman_noise w = dod_kalman_noise_of(dt, q)
    if end > r0:
        if floating is double:
            dod_vk_cv_predict(d, &x[0, 0], x.shape[1], &P[0, 0], P.shape[1], r0, end, &w)
        else:
            dod_vk_cv_predict_f32(d, &x[0, 0], x.shape[1], &P[0, 0], P.shape[1], r0, end, &w)


def _vk_gate(const floating[:, ::1] P, double r2, double gate, floating[:, ::1] Si, floating[:, ::1] hw,
             double[::1] hm, uint8_t[::1] gateable, size_t r0=0, r1=None):
    """Test hook: dod_vk_gate_rows (float64 lanes) or dod_vk_gate_rows_f32
    (float32) on rows [r0, r1) of lanes P (d (2d + 1), N) into Si (N, d * d)
    and hw (N, d) of P's dtype, hm (N,) float64 and gateable (N,)."""
    cdef int d = 2 if P.shape[0] == 10 else 3
    cdef Py_ssize_t n = P.shape[1]
    if P.shape[0] not in (10, 21) or Si.shape[0] != n or Si.shape[1] != d * d or hw.shape[0] != n \
            or hw.shape[1] != d or hm.shape[0] != n or gateable.shape[0] != n:
        raise ValueError("P of 10 or 21 lanes of N rows, Si (N, d*d), hw (N, d), hm and gateable (N,)")
    cdef size_t end = _rows_end(r0, r1, n)
    if end > r0:
        if floating is double:
            dod_vk_gate_rows(d, &P[0, 0], n, r0, end, r2, gate, &Si[0, 0], &hw[0, 0], &hm[0], &gateable[0])
        else:
            dod_vk_gate_rows_f32(d, &P[0, 0], n, r0, end, r2, gate, &Si[0, 0], &hw[0, 0], &hm[0], &gateable[0])


def _vk_update(floating[:, ::1] x, floating[:, ::1] P, const int32_t[::1] det, const double[:, ::1] z,
               const floating[:, ::1] Si, double r2, size_t r0=0, r1=None):
    """Test hook: dod_vk_cv_update (float64 lanes) or dod_vk_cv_update_f32
    (float32) on rows [r0, r1) of lanes x, P (as _vk_predict's) with
    detections z (k, d) float64, det (N,) the row's detection or -1, and Si
    (N, d * d) gate_rows' inverses, of x's dtype."""
    cdef int d = _lanes_dim(x.shape[0], P.shape[0])
    cdef Py_ssize_t n = x.shape[1]
    cdef size_t j
    if P.shape[1] != n or det.shape[0] != n or Si.shape[0] != n or Si.shape[1] != d * d or z.shape[1] != d:
        raise ValueError("x and P of N rows, det (N,), Si (N, d*d), z (k, d)")
    cdef size_t end = _rows_end(r0, r1, n)
    for j in range(r0, end):
        if det[j] >= <int32_t>z.shape[0]:
            raise ValueError(f"row {j}'s detection {det[j]} is not one of the {z.shape[0]}")
    if end > r0:
        if floating is double:
            dod_vk_cv_update(d, &x[0, 0], n, &P[0, 0], n, r0, end, &det[0], &z[0, 0] if z.shape[0] else NULL,
                             &Si[0, 0], r2)
        else:
            dod_vk_cv_update_f32(d, &x[0, 0], n, &P[0, 0], n, r0, end, &det[0],
                                 &z[0, 0] if z.shape[0] else NULL, &Si[0, 0], r2)


def _vk_pair_d2(const double[:, ::1] y, const double[:, ::1] Si, double[::1] d2, n=None):
    """Test hook: dod_vk_pair_d2 on the first n pairs (None: all) of lanes
    y (d, N) and Si (d * d, N), d 2 or 3, into d2 (N,), through the
    selected path."""
    cdef int d = y.shape[0]
    cdef Py_ssize_t ls = y.shape[1]
    cdef size_t count = _rows_end(0, n, ls)
    if d not in (2, 3) or Si.shape[0] != d * d or Si.shape[1] != ls or d2.shape[0] != ls:
        raise ValueError("y (d, N) with d 2 or 3, Si (d * d, N), d2 (N,)")
    if count > 0:
        dod_vk_pair_d2(d, &y[0, 0], &Si[0, 0], ls, count, &d2[0])
