# dod/tracker/_clutter.pxd: the clutter density estimate (see _clutter.pyx).
from libc.math cimport log
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef inline double _log_clutter(const dod_tracker* t, const _tick* k) noexcept nogil:
    """The scan's clutter density's log: its sensor's own (per measurement
    volume, k.per_area 0), else the configuration's or the estimate (per
    unit area/volume; 0.0 before an estimate)."""
    if k.per_area == 0.0:
        return log(k.sensor.clutter)
    return log(t.clutter) if t.clutter > 0.0 else 0.0

cdef void _scan_rates(const dod_tracker* t, _tick* k) noexcept nogil
cdef void _estimate_clutter(dod_tracker* t, _tick* k, dod_tick_counts* cnt, bint grid_built) noexcept nogil
