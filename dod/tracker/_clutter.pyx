"""Clutter: the clutter density that score confirmation weighs detections against.

Reads the detections no confirmed track took and the surveillance volume
(given, or the box of the scan); writes t.clutter (exponentially smoothed
over scans, unless fixed by the configuration) and the scan's count. A
scan whose sensor gives its own rates (Sensor.pd, Sensor.clutter_density)
uses them instead, resolved once into the tick's frame (_scan_rates), and
leaves the Cartesian estimate as it was.

Threads: serial (one pass over the detections).
"""
from libc.math cimport log
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef void _scan_rates(const dod_tracker* t, _tick* k) noexcept nogil:
    """This scan's ln(pd), ln(1 - pd) and the unit of its clutter density
    into k: the sensor's own where it gives them (dod_sensor: 0 for none),
    else the configuration's. Scalars of the scan, so the score's row loops
    read them without a branch."""
    k.log_pd = t.log_pd
    k.log_miss = t.log_miss
    k.per_area = 1.0
    if k.sensor == NULL:
        return
    if k.sensor.pd > 0.0:
        k.log_pd = log(k.sensor.pd)
        k.log_miss = log(1.0 - k.sensor.pd)
    if k.sensor.clutter > 0.0:
        k.per_area = 0.0


# ---------------------------------------------------------------- track management in clutter

cdef void _estimate_clutter(dod_tracker* t, _tick* k, dod_tick_counts* cnt, bint grid_built) noexcept nogil:
    """Count the detections no confirmed track took; fold them into the
    clutter density estimate (TrackerConfig.clutter_density documents it).
    With `grid_built` (the index built over all of them this tick, by the
    workers), after _keep_free: the index's count is the free detections'
    (counted there in parts: no serial pass over the detections here) and
    its box theirs; without, no track took any, and the box takes one pass
    here."""
    cdef size_t j, u = k.grid.n if grid_built else k.D
    cdef int a, dim = t.dim
    cdef double v, V, side = 10.0 * t.r, est
    cdef double lo[3]
    cdef double hi[3]
    cnt.unclaimed = u
    if t.clutter_fixed or k.D == 0 or k.per_area == 0.0:    # (the sensor's density: not a Cartesian sample)
        return
    if t.volume > 0.0:
        V = t.volume
    else:
        for a in range(dim):
            if grid_built:
                lo[a] = k.grid.lo[a]
                hi[a] = k.grid.hi[a]
            else:
                lo[a] = hi[a] = k.z[a]
                for j in range(1, k.D):
                    v = k.z[j * dim + a]
                    lo[a] = v if v < lo[a] else lo[a]
                    hi[a] = v if v > hi[a] else hi[a]
        V = 1.0
        for a in range(dim):
            V *= hi[a] - lo[a] if hi[a] - lo[a] > side else side
    est = (<double>u + 1.0) / V
    if t.clutter > 0.0:
        t.clutter = (1.0 - t.clutter_w) * t.clutter + t.clutter_w * est
    else:
        t.clutter = est
