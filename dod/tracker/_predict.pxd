# dod/tracker/_predict.pxd: predict and the fused confirmed gating (see _predict.pyx).
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _pairs, _tick


cdef void _predict_rows(const dod_tracker* t, _tick* k, double dt, size_t row0, size_t row1) noexcept nogil
cdef void _predict_gate_rows(const dod_tracker* t, _tick* k, double dt, _pairs* dest,
                             size_t row0, size_t row1) noexcept nogil
cdef void _predict_chunk(const dod_tracker* t, _tick* k, double dt, size_t ch, bint fused,
                         _pairs* seg) noexcept nogil
cdef void _gate_late(dod_tracker* t, _tick* k, int w) noexcept nogil
cdef void _predict_pass(dod_tracker* t, _tick* k) noexcept nogil
