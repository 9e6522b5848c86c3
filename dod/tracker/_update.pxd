# dod/tracker/_update.pxd: update and management (see _update.pyx).
from dod._types cimport dod_index
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef size_t _confirmed_past(const dod_tracker* t, const _tick* k, size_t r0, size_t r1,
                            dod_index* out) noexcept nogil
cdef void _update_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt) noexcept nogil
