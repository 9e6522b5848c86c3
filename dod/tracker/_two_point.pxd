# dod/tracker/_two_point.pxd: two-point initiation (see _two_point.pyx).
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef void _pair_singles(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt,
                        bint grid_built) noexcept nogil
cdef void _births_two_point(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt, int nt) noexcept nogil
