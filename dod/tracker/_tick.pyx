"""One scan through the tracker: the tick as the list of its passes.

Each pass lives in its own module (dod/tracker/__init__.py gives the
reading order); this one only orders them and keeps the profile's clock:

    frame     carve every temporary of the scan (_frame.pyx)
    intake    the scan's valid detections (_intake.pyx)
    predict   predict every track, index the detections, gate the
              confirmed tracks (_predict.pyx, _gate.pyx)
    associate confirmed tracks take detections first (_associate.pyx,
              _clusters.pyx), the clutter density is estimated from what
              they left (_clutter.pyx), tentative tracks compete for the
              rest, and two-point initiation pairs the free detections
              with the waiting ones (_two_point.pyx)
    update    score, Kalman update, hits, misses, confirmation (_update.pyx);
              the scan's events, when recorded, joined (_events.pyx)
    deaths    remove the rows management marked (_deaths.pyx)
    births    new tracks from the free detections (_births.pyx,
              _two_point.pyx)
    order     rows back into spatial order when a trigger fires (_order.pyx)

Reads the scan and the tracker's state; writes the track table, the
waiting detections, the counters (t.last), the events (t.events, with
config.events) and the profile (t.prof). Every
temporary comes from `scratch`, rewound before it returns. Threads: the
passes run their parallel regions themselves (t.threads); the result is
bit-identical for every thread count.
"""
from libc.stdint cimport int64_t
from libc.string cimport memset
from dod.arena cimport dod_arena, dod_arena_mark, dod_arena_rewind
from dod.table cimport dod_table
from dod.tracker.grid cimport dod_grid_build
from dod.tracker.measurement cimport dod_sensor
from dod.tracker.imm cimport dod_imm_transition_for
from dod.tracker._track cimport dod_tracker, dod_tick_counts, DOD_TRACK_TENTATIVE, DOD_TRACK_CONFIRMED
from dod.tracker._frame cimport _frame_open, _tick, _coord_max
from dod.tracker._executor cimport (_clock_ns, _pass_done, _chunk_rows, _PASS_SETUP, _PASS_PREDICT,
                                    _PASS_ASSOCIATE, _PASS_UPDATE, _PASS_DEATHS, _PASS_BIRTHS, _PASS_SORT)
from dod.tracker._intake cimport _intake
from dod.tracker._predict cimport _predict_pass
from dod.tracker._gate cimport _gate_close, _keep_free
from dod.tracker._associate cimport _associate
from dod.tracker._clutter cimport _log_clutter, _scan_rates, _estimate_clutter
from dod.tracker._update cimport _update_pass
from dod.tracker._deaths cimport _deaths_pass
from dod.tracker._births cimport _births_pass
from dod.tracker._two_point cimport _pair_singles, _births_two_point
from dod.tracker._order cimport _rows_in_order, _order_pass
from dod.tracker._events cimport _events_open, _events_update


cdef int dod_tracker_tick(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                          dod_arena* scratch) noexcept nogil:
    return dod_tracker_tick_sensor(t, dets, n_dets, dt, NULL, scratch)


cdef int dod_tracker_tick_sensor(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                                 const dod_sensor* sensor, dod_arena* scratch) noexcept nogil:
    return dod_tracker_tick_cov(t, dets, n_dets, dt, sensor, NULL, NULL, scratch)


cdef int dod_tracker_tick_cov(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                              const dod_sensor* sensor, const double* cov, const double* cov_box,
                              dod_arena* scratch) noexcept nogil:
    cdef _tick k
    cdef dod_sensor boxed
    cdef int a
    cdef dod_tick_counts cnt
    cdef size_t mark = dod_arena_mark(scratch)
    cdef dod_table* tab = t.table
    cdef size_t T = tab.count, rows_before
    cdef int64_t clock = 0
    memset(&cnt, 0, sizeof(cnt))
    memset(&k, 0, sizeof(k))
    memset(&t.prof, 0, sizeof(t.prof))     # (a tick refused below has no profile)
    if t.profile:
        clock = _clock_ns()
    # Every fixed-size temporary first: failure here leaves the tracker unchanged.
    k.T = T
    k.front = min(T, t.last.confirmed)
    k.ordered = t.ordered_rows
    k.scan = dets
    k.n_scan = n_dets
    k.sensor = sensor
    k.coord_max = _coord_max(t.cols.single)
    k.mcols = 0 if sensor == NULL else t.dim + (1 if sensor.rate_var > 0.0 else 0)
    k.count_stride = n_dets
    k.dt = dt
    # The passes pick their kernels from k.R once per call over rows
    # (_model.pxd: _cartesian_cov); the boxes only widen to the noisiest.
    k.R = cov
    k.r2 = t.r * t.r
    if cov != NULL:
        k.r2 = 0.0
        for a in range(t.dim):
            k.r2 = max(k.r2, cov_box[a])
        if sensor != NULL:      # the sensor's variances the gate rows read: each axis's largest own
            boxed = sensor[0]
            for a in range(t.dim):
                boxed.var[a] = cov_box[a]
            k.sensor = &boxed
    k.par = t.threads > 1 and T >= <size_t>t.threads * t.min_rows
    _chunk_rows(&k, T, t.threads, t.min_rows, k.par)
    if not _frame_open(&k, scratch, T, n_dets, t.singles.count if t.two_point else 0, t.dim, t.two_point,
                       k.mcols):
        dod_arena_rewind(scratch, mark)
        return -1
    _scan_rates(t, &k)                  # pd and clutter: the sensor's or the configuration's
    if t.imm.timed:                     # switching rates per second: this step's Markov matrix
        dod_imm_transition_for(&t.imm, dt)
    _events_open(t, &k)
    _intake(t, &k)
    clock = _pass_done(t, _PASS_SETUP, clock)

    _predict_pass(t, &k)
    cnt.detections = k.D
    cnt.invalid = k.invalid
    clock = _pass_done(t, _PASS_PREDICT, clock)

    if T > 0 and k.D > 0:
        if k.index_early:
            _gate_close(t, &k, DOD_TRACK_CONFIRMED)
        else:                           # the first scan with tracks: the index from this one
            k.grid.h = t.grid_h if t.grid_h > 0.0 else 1.0
            dod_grid_build(&k.grid, k.z, k.D, t.dim)
        k.grid_built = True
        _associate(t, &k, &cnt, DOD_TRACK_CONFIRMED, scratch, k.index_early)
    if k.grid_built:
        _keep_free(t, &k)
    _estimate_clutter(t, &k, &cnt, k.grid_built)
    if k.grid_built:
        _associate(t, &k, &cnt, DOD_TRACK_TENTATIVE, scratch, False)
    if t.two_point:
        _pair_singles(t, &k, &cnt, dt, k.grid_built)
    k.log_clutter = _log_clutter(t, &k)
    clock = _pass_done(t, _PASS_ASSOCIATE, clock)

    _update_pass(t, &k, &cnt)
    _events_update(t, &k)
    clock = _pass_done(t, _PASS_UPDATE, clock)
    _deaths_pass(t, &k, &cnt)
    clock = _pass_done(t, _PASS_DEATHS, clock)

    rows_before = tab.count
    if t.two_point:
        _births_two_point(t, &k, &cnt, dt, t.threads)  # pairs start tracks; the rest wait a scan
    _births_pass(t, &k, &cnt, dt)
    if rows_before == 0 and tab.count > 0:      # a first scan's tracks (or all anew), in cell order
        _rows_in_order(t, tab.count)
    cnt.tentative = tab.count - cnt.confirmed     # births are tentative
    t.last = cnt
    t.scans += 1
    dod_arena_rewind(scratch, mark)
    clock = _pass_done(t, _PASS_BIRTHS, clock)

    if _order_pass(t, &k, scratch, dt, cnt.confirmed):
        dod_arena_rewind(scratch, mark)
        _pass_done(t, _PASS_SORT, clock)
    return 0
