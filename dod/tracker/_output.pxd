# dod/tracker/_output.pxd: the tracker's outputs beyond its columns (dod/tracker/_output.pyx).
from dod.table cimport Table
from dod.tracker._track cimport dod_tracker


cdef class _EventArrays:
    cdef readonly object track, row_of, born, born_row, confirmed, died, died_status

    cdef void attach(self, dod_tracker* e) noexcept
    cdef object scan_events(self, const dod_tracker* e, object owner)


# Tracker's read side: the engine's state and the tables it reads (the
# owner, Tracker in _engine.pxd, fills them and runs the tick).
cdef class TrackerOutputs:
    cdef dod_tracker engine
    cdef readonly Table table           # the tracks: one row each
    cdef readonly Table singles         # detections waiting for a partner (two-point initiation)
    cdef bint _busy                     # a tick is running (set and read with the GIL held)
    cdef object _events                 # the events' arrays (_EventArrays; None: config.events off)

    cdef object _view(self, str name)
    cdef double _track_time(self)
