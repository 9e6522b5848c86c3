# dod/tracker/_births.pxd: births from the free detections (see _births.pyx).
from libc.stdint cimport int32_t
from dod._types cimport dod_index
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef void _free_dets(const dod_tracker* t, _tick* k) noexcept nogil
cdef const dod_index* _births_by_cell(const _tick* k, size_t nfit, int dim, int nt, bint parts) noexcept nogil
cdef void _insert_births(dod_tracker* t, _tick* k, size_t nfit, bint par, const dod_index* order,
                         const double* opos, const int32_t* partner, double lc) noexcept nogil
cdef void _births_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt) noexcept nogil
