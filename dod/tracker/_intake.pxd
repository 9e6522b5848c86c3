# dod/tracker/_intake.pxd: the scan's valid detections and their index (see _intake.pyx).
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _tick, _all_within


# ---------------------------------------------------------------- range-bearing scans

cdef inline bint _polar_valid(const double* z, int dim) noexcept nogil:
    """A usable (finite) measurement: range >= 0, elevation in [-pi/2, pi/2]."""
    if not z[0] >= 0.0:
        return False
    return dim == 2 or (z[2] >= -1.5707963267948966 and z[2] <= 1.5707963267948966)


cdef inline bint _row_valid(const double* z, int cols, int dim, bint polar, double lim) noexcept nogil:
    """The tick keeps scan row z (cols values): every value within `lim`
    (k.coord_max), and for a range-bearing scan (`polar`) _polar_valid."""
    return _all_within(z, cols, lim) and (not polar or _polar_valid(z, dim))


cdef void _dets_ready(_tick* k) noexcept nogil
cdef void _take_dets(_tick* k, const double* dets, size_t n_dets, int dim, int nt) noexcept nogil
cdef void _index(_tick* k, int dim, int nt) noexcept nogil
cdef void _intake(const dod_tracker* t, _tick* k) noexcept nogil
