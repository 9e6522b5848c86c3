"""The owner's reading of a scan's time: a tick's `dt` or `time` checked and
turned into the step the tick predicts over (the clock itself:
dod/tracker/_clock.pxd).

Threads: called by the owner with the GIL held, before its tick.
"""
from libc.math cimport isfinite


cdef int _scan_step(const dod_clock* c, object dt, object time, double* step) except -1:
    """Exactly one of dt and time (TypeError otherwise); dt finite and >= 0,
    time finite (ValueError otherwise). A time before the clock's: ValueError
    when the clock refuses late scans, else 1 (skip it). 0: take the scan
    with step[0]. Changes nothing."""
    cdef double v
    if (time is None) == (dt is None):
        raise TypeError("tick takes exactly one of dt (seconds since the previous scan) and time= "
                        "(the scan's time stamp), not " + ("neither" if time is None else "both"))
    if time is None:
        v = dt
        if not (isfinite(v) and v >= 0.0):
            raise ValueError(f"dt must be finite and >= 0, not {dt!r}")
        step[0] = v
        return 0
    v = time
    if not isfinite(v):
        raise ValueError(f"time must be finite, not {time!r}")
    if dod_clock_dt_of(c, v, step):
        return 0
    if c.drop_late:
        return 1
    raise ValueError(f"time {v!r} is before the latest scan's {c.now!r} (out of sequence): refused, "
                     "nothing changed (out_of_sequence='drop' skips and counts such scans)")
