# dod/tracker/_clock.pxd: the tracker's scan clock: what a scan's time stamp
# (or time step) means for the tick, as inline nogil functions on a small
# struct the owner (dod/tracker/_engine.pyx) keeps.
#
# Invariants: `now` is the time of the latest scan taken (seconds, finite),
# 0.0 before the first; it never decreases. A time-stamped scan before any
# scan predicts nothing (dt 0: there are no tracks yet) and sets `now` to its
# stamp; after that its dt is stamp - now >= 0. A dt scan advances `now` by
# dt. A stamp older than `now` is late (out of sequence): refused or skipped
# (counted in `late`) by the owner, as the configuration says; the clock is
# unchanged either way.
#
# Contract (checks the caller owns): stamps and dt are finite, dt >= 0.
# Thread-safety: the owner's; one tick at a time.

ctypedef struct dod_clock:
    double now          # time of the latest scan taken (s); 0.0 before the first
    bint started        # a scan was taken
    bint drop_late      # out_of_sequence="drop": a late scan is skipped and counted
    size_t late         # late scans skipped so far


cdef inline bint dod_clock_dt_of(const dod_clock* c, double stamp, double* dt) noexcept nogil:
    """The dt of a scan stamped `stamp` into dt[0]; False (dt[0] unset) for
    a late stamp (before the latest scan's)."""
    if not c.started:
        dt[0] = 0.0
        return True
    if stamp < c.now:
        return False
    dt[0] = stamp - c.now
    return True


cdef inline void dod_clock_stamp(dod_clock* c, double stamp) noexcept nogil:
    """A time-stamped scan was taken: `now` is its stamp (exactly, not the
    sum of the dts, so rounding never accumulates)."""
    c.now = stamp
    c.started = True


cdef inline void dod_clock_step(dod_clock* c, double dt) noexcept nogil:
    """A scan of time step dt was taken."""
    c.now += dt
    c.started = True


# The owner's checks of a tick's dt / time (dod/tracker/_clock.pyx): the
# scan's dt into step[0]; 1 for a late scan to skip, 0 to take it.
cdef int _scan_step(const dod_clock* c, object dt, object time, double* step) except -1
