"""A scan's detections as the tick reads them: float64 rows, C order, the
measurement's columns in the kernels' order.

A scan that already is so (native-endian, aligned, C-contiguous float64,
and for a sensor whose order is ``RANGE_BEARING``, or none) is read in
place: no copy. Any other array of numbers (another real dtype, Fortran
order, a strided view, a sensor's ``BEARING_RANGE`` order) is converted
once into the tracker's input buffer (rows of float64, sized at
construction for ``max_detections`` rows, its pages backed when first
written): the first min(k, max_detections) rows, each value cast to
float64, the polar columns put in the kernels' order (range, bearing[,
elevation]; a range rate stays last) on the way, so that no kernel
branches on a column order.
float64, float32, int64 and int32 arrays of any strides (native, aligned)
are copied here without a Python object (nothing allocated); other dtypes,
byte-swapped or misaligned arrays go through numpy's copy (which makes
small temporaries). A list is made an array by numpy (a temporary as
large as the scan), which is read in place when it is float64 in the
kernels' order, else converted as above.

A scan's per-detection covariance (``covariance=``) is checked and
copied once into the tracker's covariance buffer (``max_detections``
(dim, dim) matrices, mapped at the first scan that has them): the matrices
of the rows the tick keeps (valid, among the first min(k,
max_detections)), in their order, symmetrised, for a ``BEARING_RANGE``
sensor's scan rows and columns reordered, so that the kernels index it by
valid detection. A C-contiguous float64 array is read in
place for the copy; any other array-like goes through numpy's conversion
first (a temporary as large as it).

Threads: called by the owner with the GIL held, the tracker marked busy
(the buffer is the tracker's: one tick at a time writes it).
"""
cimport numpy as cnp
from libc.math cimport fabs, sqrt
from libc.stdint cimport int32_t, int64_t

from dod._ndarray cimport input_array          # the one input gate for caller arrays
from dod.tracker._intake cimport _row_valid      # (the rows the tick keeps: intake's test)

import numpy as np

cnp.import_array()

ctypedef fused _src:
    double
    float
    int64_t
    int32_t


cdef bint _columns_reversed(object sensor, int dim) except -1:
    """Whether the sensor's measurement columns are in the reverse of the
    kernels' order (its ``order``: BEARING_RANGE); False without a sensor.
    ValueError for an order that is neither (a frozen Sensor written
    through object.__setattr__)."""
    if sensor is None:
        return False
    order = sensor.order
    if order == "range_bearing":
        return False
    if order == "bearing_range":
        return True
    raise ValueError(f"sensor order must be RANGE_BEARING or BEARING_RANGE, not {order!r}")


cdef cnp.ndarray _scan_array(object detections, int dim):
    """`detections` as a (k, dim) array of real numbers, not copied (a list:
    numpy's array of it), or input_array's clear exception. An array of
    the dtypes copied here (native, aligned, any strides) is taken without
    a call into numpy (numpy's dtype checks make small objects)."""
    cdef cnp.ndarray a
    cdef int tn
    if cnp.PyArray_Check(detections):
        a = <cnp.ndarray>detections
        tn = cnp.PyArray_TYPE(a)
        if ((tn == cnp.NPY_FLOAT64 or tn == cnp.NPY_FLOAT32 or tn == cnp.NPY_INT64 or tn == cnp.NPY_INT32)
                and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a) and cnp.PyArray_NDIM(a) == 2
                and cnp.PyArray_DIM(a, 1) == dim):
            return a
    return input_array(detections, np.float64, "detections", 2, dim, "any")


cdef bint _read_in_place(cnp.ndarray a, bint reverse) noexcept:
    """Whether the tick can read `a` (shape checked) as it is."""
    return (not reverse and cnp.PyArray_TYPE(a) == cnp.NPY_FLOAT64 and cnp.PyArray_ISNOTSWAPPED(a)
            and cnp.PyArray_ISALIGNED(a) and cnp.PyArray_IS_C_CONTIGUOUS(a))


cdef void _copy_as(const _src* tag, const char* src, Py_ssize_t s0, Py_ssize_t s1, size_t k, int dim,
                   int rev, double* out) noexcept nogil:
    """out[i, a] = src[i, a] (for a < rev: src[i, rev - 1 - a]) as float64,
    for the first k rows of a (k, dim) array with byte strides s0, s1."""
    cdef size_t i
    cdef int a, c
    cdef const char* row
    for i in range(k):
        row = src + <Py_ssize_t>i * s0
        for a in range(dim):
            c = rev - 1 - a if a < rev else a
            out[i * dim + a] = <double>(<const _src*>(row + c * s1))[0]


cdef int _convert_rows(cnp.ndarray a, size_t k, int dim, int rev, double* out) except -1:
    """The first k rows of `a` (a (>= k, dim) array of real numbers: the
    caller's checks) into out (k * dim float64), its first `rev` columns
    reversed (0: none; a range rate after them stays last)."""
    cdef const char* src = <const char*>cnp.PyArray_DATA(a)
    cdef Py_ssize_t s0 = cnp.PyArray_STRIDE(a, 0), s1 = cnp.PyArray_STRIDE(a, 1)
    cdef int tn = cnp.PyArray_TYPE(a)
    cdef cnp.npy_intp dims[2]
    if k == 0:
        return 0
    if cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a):
        if tn == cnp.NPY_FLOAT64:
            _copy_as(<const double*>NULL, src, s0, s1, k, dim, rev, out)
            return 0
        if tn == cnp.NPY_FLOAT32:
            _copy_as(<const float*>NULL, src, s0, s1, k, dim, rev, out)
            return 0
        if tn == cnp.NPY_INT64:
            _copy_as(<const int64_t*>NULL, src, s0, s1, k, dim, rev, out)
            return 0
        if tn == cnp.NPY_INT32:
            _copy_as(<const int32_t*>NULL, src, s0, s1, k, dim, rev, out)
            return 0
    dims[0] = <cnp.npy_intp>k
    dims[1] = dim
    dest = cnp.PyArray_SimpleNewFromData(2, dims, cnp.NPY_FLOAT64, out)
    np.copyto(dest, a[:k], casting="unsafe")      # (input_array checked that the dtype casts)
    if rev:
        dest[:, :rev] = dest[:, rev - 1::-1].copy()
    return 0


# A covariance's entries a and b (a != b) may differ by this much relative
# to sqrt(C[a, a] C[b, b]) and still count as symmetric: the rounding of a
# matrix computed as J C J' (a converted measurement) in float64, with room
# for a float32 source, but not a transposed or mistyped matrix.
cdef double _SYMMETRY_RTOL = 1e-6


cdef cnp.ndarray _covariance_array(object covariance, size_t rows, object trailing):
    """`covariance` as a C-contiguous float64 (rows, dim, dim) array (the
    same array when it already is one), or a clear exception (TypeError for
    no numbers, ValueError for another shape)."""
    cdef cnp.ndarray c = input_array(covariance, np.float64, "covariance", 3, trailing, "c")
    if <size_t>cnp.PyArray_DIM(c, 0) != rows:
        raise ValueError(f"covariance must have shape ({rows}, {trailing[0]}, {trailing[1]}): one matrix "
                         f"per detection row, not {(<object>c).shape}")
    return c


cdef int _cov_check(const double* C, int dim, double lim2, double* out) noexcept nogil:
    """C (dim x dim, row-major) into out symmetrised; 0, or what is wrong
    with it: 1 an entry beyond lim2 in magnitude (NaN, inf: a float32
    tracker's P would overflow), 2 not symmetric, 3 not positive definite
    (Sylvester: the leading minors, of the symmetrised matrix)."""
    cdef int a, b
    cdef double x, y, m1, m2, m3
    for a in range(dim * dim):
        if not fabs(C[a]) <= lim2:
            return 1
    for a in range(dim):
        for b in range(a, dim):
            x = C[a * dim + b]
            y = C[b * dim + a]
            if fabs(x - y) > _SYMMETRY_RTOL * sqrt(fabs(C[a * dim + a] * C[b * dim + b])):
                return 2
            out[a * dim + b] = out[b * dim + a] = 0.5 * (x + y) if a != b else x
    m1 = out[0]
    m2 = out[0] * out[dim + 1] - out[1] * out[dim]
    if not (m1 > 0.0 and m2 > 0.0):
        return 3
    if dim == 3:
        m3 = (out[0] * (out[4] * out[8] - out[5] * out[7]) - out[1] * (out[3] * out[8] - out[5] * out[6])
              + out[2] * (out[3] * out[7] - out[4] * out[6]))
        if not m3 > 0.0:
            return 3
    return 0


cdef int _convert_covariance(cnp.ndarray c, const double* dets, size_t k, int dim, bint reverse, bint polar,
                             double lim, double* out, double* box) except -1:
    """Check and copy the covariances of the rows the tick keeps among the
    first k rows of the scan `dets` (float64, k x dim, as the tick reads it,
    in the kernels' column order: a row intake drops, _row_valid's test with
    `lim`, the tracker's coordinate limit, is dropped, and its matrix with
    it, unread) from c (a C-contiguous
    float64 (>= k, dim, dim) array; `reverse`: in the reverse column order,
    put in the kernels' on the way) into out, in order, symmetrised. box[a]:
    the largest variance of axis a among them (0.0 for none: the gate
    boxes' noise). ValueError naming the first bad matrix's row: not
    finite or an entry beyond lim**2, not symmetric, not positive
    definite."""
    cdef const double* src = <const double*>cnp.PyArray_DATA(c)
    cdef size_t j, n = 0, dd = <size_t>dim * dim
    cdef int a, b, bad = 0
    cdef bint valid
    cdef double C[9]
    for a in range(dim):
        box[a] = 0.0
    with nogil:
        for j in range(k):
            if not _row_valid(dets + j * dim, dim, dim, polar, lim):
                continue
            for a in range(dim):
                for b in range(dim):
                    C[a * dim + b] = (src[j * dd + (dim - 1 - a) * dim + dim - 1 - b] if reverse
                                      else src[j * dd + a * dim + b])
            bad = _cov_check(C, dim, lim * lim, out + n * dd)
            if bad != 0:
                break
            for a in range(dim):
                box[a] = max(box[a], out[n * dd + a * dim + a])
            n += 1
    if bad == 1:
        raise ValueError(f"covariance[{j}] is not finite or has an entry beyond {lim * lim:g} "
                         f"(COORDINATE_LIMIT**2)")
    if bad == 2:
        raise ValueError(f"covariance[{j}] is not symmetric")
    if bad == 3:
        raise ValueError(f"covariance[{j}] is not positive definite")
    return 0
