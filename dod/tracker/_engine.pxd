# dod/tracker/_engine.pxd: the tracker's owner (the Tracker class, whose
# read side is TrackerOutputs in _output.pxd) and, for
# code that runs a tick from its own nogil code, the engine's state and tick:
#
#     from dod.tracker._engine cimport Tracker, dod_tracker_tick
#     with nogil:
#         rc = dod_tracker_tick(&t.engine, dets, n_dets, dt, &scratch.engine)
#
# The state (track columns, parameters, counters) is declared in
# dod/tracker/_track.pxd, the tick in dod/tracker/_tick.pxd; both are
# re-exported here.
from libc.stdint cimport int32_t

from dod.arena cimport dod_arena, Arena
from dod.table cimport Table
from dod.tracker._track cimport (dod_tracker, dod_track_cols, dod_tick_counts, dod_tick_profile,
                                 DOD_TRACKER_MAX_THREADS, DOD_TICK_PASSES,
                                 DOD_TRACK_NONE, DOD_TRACK_TENTATIVE, DOD_TRACK_CONFIRMED)
from dod.tracker._tick cimport dod_tracker_tick, dod_tracker_tick_sensor
from dod.tracker._clock cimport dod_clock
from dod.tracker._output cimport TrackerOutputs


cdef class Tracker(TrackerOutputs):
    # engine, table, singles, _busy and _events: TrackerOutputs (_output.pxd)
    cdef readonly Arena scratch         # per-tick temporaries (mark/rewind each tick)
    cdef readonly object config
    cdef size_t _overflow_drop
    cdef list _worker_arenas            # Arena per worker thread (threads > 1), alive as long as the tracker
    cdef dod_arena** _workers           # their engines, engine.workers points here
    cdef size_t _displaced_bytes        # the pages of engine.displaced (0: none)
    cdef dod_clock clock                # the scan clock: time stamps, late scans
    cdef double* _inbuf                 # converted scans (_input.pyx): max_detections rows, mapped
    cdef size_t _inbuf_bytes
    cdef size_t _converted              # scans converted into _inbuf
    cdef double* _covbuf                # per-detection covariances (_input.pyx): max_detections
    cdef size_t _covbuf_bytes           # (dim, dim) matrices, mapped at the first scan that has them
    cdef object _cov_trailing           # (dim, dim): their shape, made once

    cdef double _track_time(self)

