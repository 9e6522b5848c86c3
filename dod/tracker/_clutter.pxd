# dod/tracker/_clutter.pxd: the clutter density estimate (see _clutter.pyx).
from libc.math cimport log
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef inline double _log_clutter(dod_tracker* t) noexcept nogil:
    return log(t.clutter) if t.clutter > 0.0 else 0.0

cdef void _estimate_clutter(dod_tracker* t, _tick* k, dod_tick_counts* cnt, bint grid_built) noexcept nogil
