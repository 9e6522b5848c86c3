"""Update and management: the Kalman step, scores, hits, misses, confirmation, deaths marked.

Reads k.track_det and the detections; writes the track columns x, P (and
the IMM's), score, score_max, hits, misses, history, status (NONE marks
a death), and the counters (associations, confirmed) and the sort
triggers' counts (k.mixed, k.unplaced). Each chunk also lists its rows to
go for the deaths (k.dead_n, k.rm.fill) while they are in cache, and
with config.events the scan's associations, confirmations and deaths
(_events.pyx).

Threads: chunks of rows claimed by the workers; each row reads and writes
only its own entries and the counts are sums of integers, so any split
gives the serial result.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from libc.string cimport memset
from dod.table cimport dod_table_removal_list
from dod._core cimport dod_prefetch
from dod._types cimport dod_index
from dod.tracker.kalman cimport dod_kalman_mahalanobis2, dod_kalman_log_likelihood
from dod.tracker.measurement cimport (dod_meas_innovation, dod_meas_log_jacobian, dod_meas_rate_innovation,
                                      dod_meas_mahalanobis2, dod_meas_rate_log_likelihood)
from dod.tracker._model cimport (_dim, _motion, _meas, _scratch, _planar, _spatial, _cv, _imm, _cartesian, _polar,
                                 _doppler, _cartesian_cov, _polar_cov, _f64, _f32, _d, _m, _model_of, _MODEL_3D,
                                 _MODEL_IMM, _MODEL_POLAR, _MODEL_RATE, _meas_update, _meas_pair_inverse,
                                 _row_inverse, _row_x, _scratch_f32, _Si_f32)
from dod.tracker._track cimport (dod_tracker, dod_track_cols, dod_tick_counts, dod_tick_events, DOD_TRACK_NONE,
                                 DOD_TRACK_TENTATIVE, DOD_TRACK_CONFIRMED)
from dod.tracker._frame cimport _sums, _tick, _TAIL_CHUNKS
from dod.tracker._executor cimport _run_chunks, _PASS_UPDATE
from dod.tracker._gate cimport _gate_width_part, _grid_side
from dod.tracker._births cimport _free_dets
from dod.tracker._events cimport _telling, _told, _quiet
from dod.tracker._vector cimport dod_vk_cv_update, dod_vk_cv_update_f32


cdef enum:
    _UPDATE_AHEAD = 8               # rows between a prefetch and the update that uses it



cdef inline uint32_t _popcount(uint32_t v) noexcept nogil:
    # SWAR: without -mpopcnt, __builtin_popcount is a libgcc call.
    v = v - ((v >> 1) & 0x55555555u)
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u)
    v = (v + (v >> 4)) & 0x0F0F0F0Fu
    return (v * 0x01010101u) >> 24


cdef void _score_rows(const _dim* v, const _meas* s, const _scratch* e, const dod_tracker* t, const _tick* k,
                      size_t row0, size_t row1) noexcept nogil:
    """Score confirmation: add to each assigned track among rows [row0,
    row1) the log density of its detection's innovation against the
    predicted track (before its update: call ahead of _update_rows), with
    the scan's ln(pd) and clutter density (_clutter.pyx: _scan_rates);
    k.Si of element type e. Each row writes only its own score: any split
    over workers gives the serial result."""
    cdef const dod_track_cols* c = &t.cols
    cdef int d = _d(v), a
    cdef size_t ti
    cdef int32_t j
    cdef double y[4]
    cdef double own[16]     # (m x m, m up to 4)
    cdef double d2
    cdef const double* Si
    cdef int mm = _m(v, s)
    for ti in range(row0, row1):
        j = k.track_det[ti]
        if j < 0:
            continue
        if _meas is _doppler:       # per unit area/volume (k.per_area 1) and range-rate interval (measurement.pxd)
            dod_meas_rate_innovation(k.zm + j * mm, k.hp + ti * mm, d, y)
            Si = _row_inverse(e, k, ti, mm, own)
            d2 = dod_meas_mahalanobis2(y, Si, mm)
            c.score[ti] += (k.log_pd - k.log_clutter + dod_meas_rate_log_likelihood(d2, Si, mm)
                            - (k.per_area * dod_meas_log_jacobian(k.zm + j * mm, d) - k.sensor.rate_log_span))
        else:
            if _meas is _polar or _meas is _polar_cov:  # measurement-space density, per unit area/volume (k.per_area 1)
                dod_meas_innovation(k.zm + j * d, k.hp + ti * d, d, y)
                c.score[ti] -= k.per_area * dod_meas_log_jacobian(k.zm + j * d, d)
            else:
                for a in range(d):
                    y[a] = k.z[j * d + a] - _row_x(v, t, ti, a)
            Si = _meas_pair_inverse(v, s, e, t, k, ti, j, own)   # (a gated pair's: never NULL)
            d2 = dod_kalman_mahalanobis2(y, Si, d)
            c.score[ti] += k.log_pd - k.log_clutter + dod_kalman_log_likelihood(d2, Si, d)


cdef void _update_rows(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, const _tick* k,
                       size_t row0, size_t row1) noexcept nogil:
    """The update of the assigned tracks among rows [row0, row1) (Kalman,
    IMM or extended: _model.pxd)."""
    cdef const dod_track_cols* c = &t.cols
    cdef int d = _d(v)
    cdef double r2 = t.r * t.r
    cdef size_t ti, tp
    cdef int32_t j
    if _motion is _cv and _meas is _cartesian:
        if c.xr == 1 and c.Pr == 1:     # lanes: the chunk's assigned rows at once (_vector.pxd)
            if c.single:
                dod_vk_cv_update_f32(d, c.xf, c.xs, c.Pf, c.Ps, row0, row1, k.track_det, k.z, _Si_f32(k), r2)
            else:
                dod_vk_cv_update(d, c.x, c.xs, c.P, c.Ps, row0, row1, k.track_det, k.z, k.Si, r2)
            return
    # (the prefetches' addresses in bytes: float64 or float32 columns alike)
    cdef size_t sz = sizeof(float) if c.single else sizeof(double)
    cdef const char* xb = <const char*>c.xf if c.single else <const char*>c.x
    cdef const char* Pb = <const char*>c.Pf if c.single else <const char*>c.P
    for ti in range(row0, row1):
        # Fetch the state, covariance, inverse and detection of the
        # assigned track _UPDATE_AHEAD rows on: the rows were last touched
        # by predict, long out of cache at 100,000 targets, and the
        # assigned ones are too sparse a stream for the hardware prefetcher.
        tp = ti + _UPDATE_AHEAD
        if tp < row1 and k.track_det[tp] >= 0:
            dod_prefetch(Pb + tp * c.Pr * sz)
            dod_prefetch(Pb + (tp * c.Pr + 8 * c.Ps) * sz)
            dod_prefetch(xb + tp * c.xr * sz)
            dod_prefetch(k.Si + tp * _m(v, s) * _m(v, s))
            dod_prefetch(k.z + k.track_det[tp] * d)
        j = k.track_det[ti]
        if j >= 0:
            _meas_update(v, m, s, t, k, ti, j, r2)


cdef void _filter_rows(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, const _tick* k,
                       size_t row0, size_t row1) noexcept nogil:
    """Score (score confirmation), then update, rows [row0, row1)."""
    if t.score_logic:
        if _scratch_f32(t, k):
            _score_rows(v, s, <_f32*>NULL, t, k, row0, row1)
        else:
            _score_rows(v, s, <_f64*>NULL, t, k, row0, row1)
    _update_rows(v, m, s, t, k, row0, row1)


cdef size_t _manage_rows(const _telling* told, const dod_tracker* t, const _tick* k, size_t row0, size_t row1,
                         size_t* confirmed, size_t* mixed, size_t* unplaced, size_t* news) noexcept nogil:
    """Hits, misses, history, score, confirmation and the death mark
    (state NONE) of rows [row0, row1); returns their associations and sets
    `confirmed` to the rows confirmed afterwards (the tick's count: births
    and deaths do not change it), `mixed` to those of them below
    k.front that are not (sort_when_mixed) and `unplaced` to the
    confirmed rows at or above k.ordered (sort_when_displaced). Each row reads and
    writes only its own entries: any split over workers gives the serial
    result. _told (config.events): each updated track's id at its
    detection, and the rows' confirmations and deaths listed from entry
    row0 of the events' arrays, news[0] and news[1] of them (_events.pyx)."""
    cdef const dod_track_cols* c = &t.cols
    cdef const dod_tick_events* e = &t.events
    cdef size_t ti, assoc = 0, conf = 0, mix = 0, unpl = 0, nconf = 0, ndied = 0
    cdef uint32_t hist
    cdef uint32_t nmask = <uint32_t>((<uint64_t>1 << t.confirm_n) - 1)
    cdef uint8_t was = 0
    for ti in range(row0, row1):
        if _telling is _told:
            was = c.state[ti]
        hist = c.history[ti] << 1
        if k.track_det[ti] >= 0:
            c.hits[ti] += 1
            c.misses[ti] = 0
            hist |= 1
            assoc += 1
            if _telling is _told:
                e.track[k.track_det[ti]] = <int64_t>c.id[ti]
        else:
            c.misses[ti] += 1
            if t.score_logic:
                c.score[ti] += k.log_miss
        c.history[ti] = hist
        if t.score_logic:
            if c.score[ti] > c.score_max[ti]:
                c.score_max[ti] = c.score[ti]
            if c.state[ti] == DOD_TRACK_TENTATIVE:
                if c.score[ti] >= t.score_confirm:
                    c.state[ti] = DOD_TRACK_CONFIRMED
                elif c.score[ti] <= t.score_delete:
                    c.state[ti] = DOD_TRACK_NONE
            elif c.score_max[ti] - c.score[ti] >= t.score_drop:
                c.state[ti] = DOD_TRACK_NONE
        elif c.state[ti] == DOD_TRACK_TENTATIVE:
            if _popcount(hist & nmask) >= t.confirm_m:
                c.state[ti] = DOD_TRACK_CONFIRMED
            elif c.age[ti] >= t.confirm_n:
                c.state[ti] = DOD_TRACK_NONE
        elif c.misses[ti] >= t.max_misses:
            c.state[ti] = DOD_TRACK_NONE
        if _telling is _told:
            if c.state[ti] != was:      # (a change is rare: one well-predicted branch a row)
                if c.state[ti] == DOD_TRACK_CONFIRMED:
                    e.confirmed[row0 + nconf] = c.id[ti]
                    nconf += 1
                else:
                    e.died[row0 + ndied] = c.id[ti]
                    e.died_status[row0 + ndied] = was
                    ndied += 1
        conf += c.state[ti] == DOD_TRACK_CONFIRMED
        mix += (ti < k.front) & (c.state[ti] != DOD_TRACK_CONFIRMED)
        unpl += (ti >= k.ordered) & (c.state[ti] == DOD_TRACK_CONFIRMED)
    confirmed[0] = conf
    mixed[0] = mix
    unplaced[0] = unpl
    news[0] = nconf
    news[1] = ndied
    return assoc


cdef void _update_manage_chunk(const dod_tracker* t, _tick* k, size_t ch, _sums* sums) noexcept nogil:
    """Update and manage chunk ch of the rows (k.chunk_rows each); adds its
    associations, confirmed, mixed and unplaced rows (_manage_rows) to this
    worker's sums, and lists its rows to go (k.dead_n[ch] of them, at
    k.rm.fill + its first row: the removal plan's first pass, while the
    states are in this core's cache) and, with confirmed_first, its
    confirmed rows at or past the front (k.conf_n[ch], at k.rm.hole + its
    first row)."""
    cdef size_t r0 = ch * k.chunk_rows, r1 = min(k.T, r0 + k.chunk_rows), conf, mix, unpl
    cdef size_t news[2]
    cdef int m = _model_of(t, k)
    if k.R != NULL:         # the detections' own noise
        if m == 0:
            _filter_rows(<_planar*>NULL, <_cv*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D:
            _filter_rows(<_spatial*>NULL, <_cv*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_IMM:
            _filter_rows(<_planar*>NULL, <_imm*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D | _MODEL_IMM:
            _filter_rows(<_spatial*>NULL, <_imm*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_POLAR:
            _filter_rows(<_planar*>NULL, <_cv*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D | _MODEL_POLAR:
            _filter_rows(<_spatial*>NULL, <_cv*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_IMM | _MODEL_POLAR:
            _filter_rows(<_planar*>NULL, <_imm*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        else:
            _filter_rows(<_spatial*>NULL, <_imm*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
    elif m == 0:
        _filter_rows(<_planar*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D:
        _filter_rows(<_spatial*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM:
        _filter_rows(<_planar*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_IMM:
        _filter_rows(<_spatial*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_POLAR:
        _filter_rows(<_planar*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_POLAR:
        _filter_rows(<_spatial*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, r0, r1)
    elif m == _MODEL_POLAR | _MODEL_RATE:
        _filter_rows(<_planar*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_POLAR | _MODEL_RATE:
        _filter_rows(<_spatial*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _filter_rows(<_planar*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _filter_rows(<_spatial*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM | _MODEL_POLAR:
        _filter_rows(<_planar*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, r0, r1)
    else:
        _filter_rows(<_spatial*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, r0, r1)
    if t.events.track != NULL:
        sums.associations += _manage_rows(<_told*>NULL, t, k, r0, r1, &conf, &mix, &unpl, news)
        k.told_confirmed[ch] = news[0]
        k.told_died[ch] = news[1]
    else:
        sums.associations += _manage_rows(<_quiet*>NULL, t, k, r0, r1, &conf, &mix, &unpl, news)
    sums.confirmed += conf
    sums.mixed += mix
    sums.unplaced += unpl
    k.dead_n[ch] = dod_table_removal_list(t.cols.state, DOD_TRACK_NONE, r0, r1, k.rm.fill + r0)
    if t.confirmed_first:
        k.conf_n[ch] = _confirmed_past(t, k, r0, r1, k.rm.hole + r0)


cdef size_t _confirmed_past(const dod_tracker* t, const _tick* k, size_t r0, size_t r1,
                            dod_index* out) noexcept nogil:
    """The confirmed rows among [max(r0, k.front), r1), ascending, into
    out[0:count] (out has r1 - r0 entries); returns count. Past the front
    the rows hold the tentative tracks, and this tick's confirmations among
    them are few: one store a row, no branch (dod_table_removal_list's way)."""
    cdef size_t row, m = 0
    cdef const uint8_t* state = t.cols.state
    for row in range(max(r0, k.front), r1):
        out[m] = <dod_index>row
        m += state[row] == DOD_TRACK_CONFIRMED
    return m


cdef void _update_enter(dod_tracker* t, _tick* k, int w) noexcept nogil:
    if w == 0:
        _free_dets(t, k)


cdef void _update_kernel(dod_tracker* t, _tick* k, size_t item, int w) noexcept nogil:
    if item < k.row_chunks:
        _update_manage_chunk(t, k, item, &k.sums[w])
    else:
        _gate_width_part(k, item - k.row_chunks)


cdef void _update_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt) noexcept nogil:
    """Score the assigned tracks (score confirmation: the innovation density
    of the predicted track, before its update), update them (the Kalman
    step), count hits and misses, confirm, mark deaths: one pass of chunks
    over the workers (only assigned tracks update, so the cost of a chunk
    varies: claimed, not split); the counts are sums of integers, the same
    in any order. The detections nobody took are listed for the births
    (_free_dets: worker 0 first), and with k.width_late the next scan's
    cell side is summed here (its parts claimed after the row chunks)."""
    cdef int nt = t.threads if k.par else 1, w
    cdef size_t items = k.row_chunks + (_TAIL_CHUNKS if k.width_late else 0), ch
    memset(k.sums, 0, nt * sizeof(_sums))
    for ch in range(k.row_chunks, items):
        k.ran[ch] = <int32_t>(ch % <size_t>nt)
    _run_chunks(t, k, k.par, _PASS_UPDATE, items, _update_enter, _update_kernel, NULL)
    for w in range(nt):
        cnt.associations += k.sums[w].associations
        cnt.confirmed += k.sums[w].confirmed
        k.mixed += k.sums[w].mixed
        k.unplaced += k.sums[w].unplaced
    if k.width_late:
        t.grid_h = _grid_side(k)
