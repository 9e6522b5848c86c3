# dod/tracker/_input.pxd: a scan's detections as the tick reads them
# (dod/tracker/_input.pyx).
cimport numpy as cnp

cdef cnp.ndarray _scan_array(object detections, int dim)
cdef bint _columns_reversed(object sensor, int dim) except -1
cdef bint _read_in_place(cnp.ndarray a, bint reverse) noexcept
cdef int _convert_rows(cnp.ndarray a, size_t k, int dim, int rev, double* out) except -1
cdef cnp.ndarray _covariance_array(object covariance, size_t rows, object trailing)
cdef int _convert_covariance(cnp.ndarray c, const double* dets, size_t k, int dim, bint reverse, bint polar,
                             double lim, double* out, double* box) except -1
