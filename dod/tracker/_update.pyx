"""Update and management: the Kalman step, scores, hits, misses, confirmation, deaths marked.

Reads k.track_det and the detections; writes the track columns x, P (and
the IMM's), score, score_max, hits, misses, history, state (NONE marks a
death), and the counters (associations, confirmed) and the sort
triggers' counts (k.mixed, k.unplaced). Each chunk also lists its rows to
go for the deaths (k.dead_n, k.rm.fill) while they are in cache.

Threads: chunks of rows claimed by the workers; each row reads and writes
only its own entries and the counts are sums of integers, so any split
gives the serial result.
"""
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t
from libc.string cimport memset
from dod.table cimport dod_table_removal_list
from dod._core cimport dod_prefetch
from dod._types cimport dod_index
from dod.tracker.kalman cimport (dod_kalman_packed_size, dod_kalman_pack, dod_kalman_unpack,
                                 dod_kalman_mahalanobis2, dod_kalman_update, dod_kalman_log_likelihood)
from dod.tracker.imm cimport DOD_IMM_MODELS, dod_imm_update, dod_imm_model_x, dod_imm_model_P, dod_imm_weigh
from dod.tracker.measurement cimport (dod_meas_innovation, dod_meas_update, dod_meas_log_jacobian,
                                      dod_ekf_position_update)
from dod.tracker._track cimport (dod_tracker, dod_track_cols, dod_tick_counts, DOD_TRACK_NONE,
                                 DOD_TRACK_TENTATIVE, DOD_TRACK_CONFIRMED)
from dod.tracker._frame cimport _sums, _tick, _TAIL_CHUNKS
from dod.tracker._executor cimport _run_chunks, _PASS_UPDATE
from dod.tracker._gate cimport _gate_width_part, _grid_side
from dod.tracker._births cimport _free_dets


cdef enum:
    _UPDATE_AHEAD = 8               # rows between a prefetch and the update that uses it



cdef inline uint32_t _popcount(uint32_t v) noexcept nogil:
    # SWAR: without -mpopcnt, __builtin_popcount is a libgcc call.
    v = v - ((v >> 1) & 0x55555555u)
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u)
    v = (v + (v >> 4)) & 0x0F0F0F0Fu
    return (v * 0x01010101u) >> 24


cdef inline void _imm_sensor_update(const dod_tracker* t, const _tick* k, size_t ti, const double* zm,
                                   int d) noexcept nogil:
    """IMM with a range-bearing scan: each model's EKF update (measurement.pxd,
    the per-model contract of imm.pxd), then the probabilities and the
    combination."""
    cdef double ll[DOD_IMM_MODELS]
    cdef int m
    for m in range(DOD_IMM_MODELS):
        ll[m] = dod_ekf_position_update(dod_imm_model_x(&t.imm, ti, m, d), dod_imm_model_P(&t.imm, ti, m, d),
                                        2 * d + 1, zm, d, k.sensor)
    dod_imm_weigh(&t.imm, ti, ll, t.cols.x + ti * 2 * d, t.cols.P + ti * dod_kalman_packed_size(2 * d), d)


cdef inline void _sensor_update(const dod_tracker* t, const _tick* k, size_t ti, int32_t j, int dim) noexcept nogil:
    """Extended Kalman update of row ti with range-bearing measurement j
    (measurement.pxd, whose kernels take P full: unpacked and packed
    again around it)."""
    cdef int n = 2 * dim
    cdef double y[3]
    cdef double P[36]
    cdef double* Pp = t.cols.P + ti * dod_kalman_packed_size(n)
    dod_meas_innovation(k.zm + j * dim, k.hp + ti * dim, dim, y)
    dod_kalman_unpack(Pp, n, P)
    dod_meas_update(t.cols.x + ti * n, P, n, dim, y, k.J + ti * dim * dim, k.Si + ti * dim * dim, k.sensor.var)
    dod_kalman_pack(P, n, Pp)


cdef void _score_rows(const dod_tracker* t, const _tick* k, size_t row0, size_t row1) noexcept nogil:
    """Score confirmation: add to each assigned track among rows [row0,
    row1) the log density of its detection's innovation against the
    predicted track (before its update: call ahead of _update_rows). Each
    row writes only its own score: any split over workers gives the serial
    result."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = t.dim, n = t.n, a
    cdef size_t ti
    cdef int32_t j
    cdef double y[3]
    cdef double d2
    for ti in range(row0, row1):
        j = k.track_det[ti]
        if j < 0:
            continue
        for a in range(dim):
            y[a] = k.z[j * dim + a] - c.x[ti * n + a]
        if k.sensor != NULL:        # measurement-space density, per unit area/volume
            dod_meas_innovation(k.zm + j * dim, k.hp + ti * dim, dim, y)
            c.score[ti] -= dod_meas_log_jacobian(k.zm + j * dim, dim)
        d2 = dod_kalman_mahalanobis2(y, k.Si + ti * dim * dim, dim)
        c.score[ti] += t.log_pd - k.log_clutter + dod_kalman_log_likelihood(d2, k.Si + ti * dim * dim, dim)


cdef void _update_rows(const dod_tracker* t, const _tick* k, size_t row0, size_t row1) noexcept nogil:
    """Kalman update of the assigned tracks among rows [row0, row1)."""
    cdef const dod_track_cols* c = &t.cols
    cdef double r2 = t.r * t.r
    cdef size_t ti, tp
    cdef int32_t j
    cdef int pn = dod_kalman_packed_size(t.n)
    for ti in range(row0, row1):
        # Fetch the state, covariance, inverse and detection of the
        # assigned track _UPDATE_AHEAD rows on: the rows were last touched
        # by predict, long out of cache at 100,000 targets, and the
        # assigned ones are too sparse a stream for the hardware prefetcher
        # (perf: two thirds of this pass waited on those loads).
        tp = ti + _UPDATE_AHEAD
        if tp < row1 and k.track_det[tp] >= 0:
            dod_prefetch(c.P + tp * pn)
            dod_prefetch(c.P + tp * pn + 8)
            dod_prefetch(c.x + tp * t.n)
            dod_prefetch(k.Si + tp * t.dim * t.dim)
            dod_prefetch(k.z + k.track_det[tp] * t.dim)
        j = k.track_det[ti]
        if j >= 0 and t.imm.models and k.sensor != NULL:   # every model through the EKF
            if t.dim == 2:
                _imm_sensor_update(t, k, ti, k.zm + j * 2, 2)
            else:
                _imm_sensor_update(t, k, ti, k.zm + j * 3, 3)
        elif j >= 0 and t.imm.models:   # every model, the probabilities, the combination
            if t.dim == 2:
                dod_imm_update(&t.imm, ti, k.z + j * 2, r2, c.x + ti * 4, c.P + ti * 10, 2)
            else:
                dod_imm_update(&t.imm, ti, k.z + j * 3, r2, c.x + ti * 6, c.P + ti * 21, 3)
        elif j >= 0 and k.sensor != NULL and t.dim == 2:  # extended Kalman update (measurement.pxd)
            _sensor_update(t, k, ti, j, 2)
        elif j >= 0 and k.sensor != NULL:
            _sensor_update(t, k, ti, j, 3)
        elif j >= 0:
            if t.dim == 2:
                dod_kalman_update(c.x + ti * 4, c.P + ti * 10, k.z + j * 2, k.Si + ti * 4, 2, r2)
            else:
                dod_kalman_update(c.x + ti * 6, c.P + ti * 21, k.z + j * 3, k.Si + ti * 9, 3, r2)


cdef size_t _manage_rows(const dod_tracker* t, const _tick* k, size_t row0, size_t row1,
                         size_t* confirmed, size_t* mixed, size_t* unplaced) noexcept nogil:
    """Hits, misses, history, score, confirmation and the death mark
    (state NONE) of rows [row0, row1); returns their associations and sets
    `confirmed` to the rows confirmed afterwards (the tick's count: births
    and deaths do not change it), `mixed` to those of them below
    k.front that are not (sort_when_mixed) and `unplaced` to the
    confirmed rows at or above k.ordered (sort_when_displaced). Each row reads and
    writes only its own entries: any split over workers gives the serial
    result."""
    cdef const dod_track_cols* c = &t.cols
    cdef size_t ti, assoc = 0, conf = 0, mix = 0, unpl = 0
    cdef uint32_t hist
    cdef uint32_t nmask = <uint32_t>((<uint64_t>1 << t.confirm_n) - 1)
    for ti in range(row0, row1):
        hist = c.history[ti] << 1
        if k.track_det[ti] >= 0:
            c.hits[ti] += 1
            c.misses[ti] = 0
            hist |= 1
            assoc += 1
        else:
            c.misses[ti] += 1
            if t.score_logic:
                c.score[ti] += t.log_miss
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
        conf += c.state[ti] == DOD_TRACK_CONFIRMED
        mix += (ti < k.front) & (c.state[ti] != DOD_TRACK_CONFIRMED)
        unpl += (ti >= k.ordered) & (c.state[ti] == DOD_TRACK_CONFIRMED)
    confirmed[0] = conf
    mixed[0] = mix
    unplaced[0] = unpl
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
    if t.score_logic:
        _score_rows(t, k, r0, r1)
    _update_rows(t, k, r0, r1)
    sums.associations += _manage_rows(t, k, r0, r1, &conf, &mix, &unpl)
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
