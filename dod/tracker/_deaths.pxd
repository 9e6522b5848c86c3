# dod/tracker/_deaths.pxd: removal of the dead rows (see _deaths.pyx).
from dod.table cimport dod_table_removal
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef size_t _confirmed_first(dod_tracker* t, _tick* k, size_t m, size_t q, size_t C, bint par,
                             size_t* mixed, size_t* unplaced) noexcept nogil
cdef void _count_displaced(dod_tracker* t, const dod_table_removal* r) noexcept nogil
cdef void _deaths_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt) noexcept nogil
