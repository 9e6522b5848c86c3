# dod/tracker/_tick.pxd: one scan through the tracker (dod/tracker/_tick.pyx).
from dod.arena cimport dod_arena
from dod.tracker._track cimport dod_tracker
from dod.tracker.measurement cimport dod_sensor


# dt: finite and >= 0 (the caller's check); 0 predicts nothing (a scan at the
# same instant). With the IMM's rates per second (imm_rates) the tick makes
# its own Markov matrix for dt. Time stamps, the clock and late scans are the
# owner's (Tracker.tick, dod/tracker/_clock.pxd).
cdef int dod_tracker_tick(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                          dod_arena* scratch) noexcept nogil

# A range-bearing scan of one sensor (measurement.pxd: dets hold n_dets
# measurements (range, bearing[, elevation]), each followed by its range
# rate when sensor.rate_var > 0; the sensor's variances > 0 and position
# finite are the caller's checks, and its pd in (0, 1) and clutter density
# > 0 and finite, each or 0 for the configuration's: zero the struct
# first); sensor NULL: Cartesian, as dod_tracker_tick.
cdef int dod_tracker_tick_sensor(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                                 const dod_sensor* sensor, dod_arena* scratch) noexcept nogil

# A scan whose detections carry their own measurement noise: cov holds one
# d x d row-major matrix for each VALID row of dets (the rows intake keeps,
# in scan order), in the measurement's space and the kernels' column order,
# each symmetric and positive definite, and cov_box[a] the largest variance
# of axis a among them (the gate boxes' noise): the caller's checks, as the
# rest. cov NULL: dod_tracker_tick_sensor.
cdef int dod_tracker_tick_cov(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                              const dod_sensor* sensor, const double* cov, const double* cov_box,
                              dod_arena* scratch) noexcept nogil
