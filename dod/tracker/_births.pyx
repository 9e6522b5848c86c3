"""Births: new tentative tracks from the detections nobody took.

Reads the free detections (k.born, listed by the update pass), the index
(their spatial order) and the configuration's birth covariance; inserts
the rows (in cell order, ids in scan order) and writes every column a
birth sets. Two-point initiation writes its births through the same row
writer (_birth_part, from _two_point.pyx), and both record their births'
events there (_insert_births: _events.pyx).

Threads: the rows are written by the workers in chunks while one of them
takes their slots; the births' order is read off the index in parts. The
same rows, ids and slots for every thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint32_t, int32_t
from libc.string cimport memcpy
from dod.table cimport (dod_table, dod_table_zero_rows, dod_table_reusable, dod_table_insert_reusing,
                        dod_table_insert_freed)
from dod._types cimport dod_index
from dod.tracker.grid cimport dod_grid
from dod.tracker.kalman cimport (dod_kalman_predict, dod_kalman_innovation_inverse, dod_kalman_packed_index,
                                 dod_kalman_mahalanobis2, dod_kalman_update, dod_kalman_log_likelihood,
                                 dod_kalman_innovation_inverse_cov, dod_kalman_update_cov)
from dod.tracker._model cimport (_dim, _motion, _meas, _planar, _spatial, _cv, _imm, _cartesian, _polar,
                                 _doppler, _cartesian_cov, _polar_cov, _d, _m, _pn, _model_of, _MODEL_3D,
                                 _MODEL_IMM, _MODEL_POLAR, _MODEL_RATE, _motion_birth, _cv_ekf_update,
                                 _cv_ekf_update_cov, _cv_rate_update, _meas_linearise, _meas_linearise_cov,
                                 _meas_birth_cov, _row_lend_x, _row_lend_P, _row_return)
from dod.tracker.measurement cimport (dod_meas_innovation, dod_meas_log_jacobian, dod_meas_rate_innovation,
                                      dod_meas_mahalanobis2, dod_meas_rate_log_likelihood)
from dod.tracker._track cimport dod_tracker, dod_track_cols, dod_tick_counts, DOD_TRACK_TENTATIVE
from dod.tracker._frame cimport _birth_plan, _tick, _TAIL_CHUNKS, _BIRTH_BITS, _BIRTH_BITS_3D
from dod.tracker._executor cimport _split_detections, _run_chunks, _parts_of, _offsets, _PASS_BIRTHS
from dod.tracker._order cimport _cell_order
from dod.tracker._events cimport _events_births


cdef enum:
    # Without a direct-mode index to read their order from (a first scan,
    # a hashed index), a scan's births are sorted into spatial order when
    # there are this many: fewer stay in scan order (at 1,000 and 10,000
    # targets, a few hundred to ~2,000 births a scan, the sort bought
    # nothing). The sort is coarse: at most 256 x 256 cells (2-D), 32**3
    # (3-D), keys of at most 16 bits, two radix passes.
    _BIRTH_ORDER_MIN = 4096


cdef enum:
    _BIRTH_BLOCK = 128              # birth rows zeroed, then written, at once




cdef void _free_dets(const dod_tracker* t, _tick* k) noexcept nogil:
    """The detections nobody took, in scan order, into k.born[0:nborn] (none
    with two-point initiation: those wait in the singles)."""
    cdef size_t j, nfree = 0
    for j in range(0 if t.two_point else k.D):     # without a branch: a tenth of them, at random
        k.born[nfree] = <int32_t>j
        k.birth_rank[j] = <int32_t>nfree
        nfree += <size_t>(k.det_track[j] < 0)
    k.nborn = nfree


cdef inline bint _born_here(const _tick* k, int32_t j, size_t nfit) noexcept nogil:
    """Detection j is free and a birth that fits (scan rank below nfit)."""
    return k.det_track[j] < 0 and <size_t>k.birth_rank[j] < nfit


cdef size_t _born_in_part(const _tick* k, size_t nfit, size_t s0, size_t s1) noexcept nogil:
    """Births among the index's sorted positions [s0, s1): their ranks into
    k.bm.key and positions s into k.bm.key2, from s0 on; returns how many."""
    cdef const dod_grid* g = &k.grid
    cdef size_t s, c = s0
    cdef int32_t j
    for s in range(s0, s1):
        j = <int32_t>g.order[s]
        if _born_here(k, j, nfit):
            k.bm.key[c] = <uint32_t>k.birth_rank[j]
            k.bm.key2[c] = <uint32_t>s
            c += 1
    return c - s0


cdef void _born_copy_part(const _tick* k, size_t s0, size_t n, size_t r0, int dim) noexcept nogil:
    """The n births _born_in_part listed from s0, to ranks and positions r0.. of the births' order."""
    cdef const dod_grid* g = &k.grid
    cdef size_t i, s
    cdef int a
    for i in range(n):
        s = k.bm.key2[s0 + i]
        k.bm.row2[r0 + i] = <dod_index>k.bm.key[s0 + i]
        for a in range(dim):
            k.bm.pos2[(r0 + i) * dim + a] = g.spos[s * dim + a]


cdef const dod_index* _births_by_cell(const _tick* k, size_t nfit, int dim, int nt, bint parts) noexcept nogil:
    """The births of scan rank below nfit in the index's cell order, read
    off the index (direct mode: row-major cells, as _cell_order's), which
    after _keep_free holds every free detection: k.bm.row2 lists their
    ranks and k.bm.pos2 their positions. NULL without a direct-mode index
    (then _cell_order sorts them). One pass over the index instead of a
    sort (bounds, keys, two radix passes).

    With `parts` (threads, and as many detections as a parallel _keep_free
    takes) the pass runs in _TAIL_CHUNKS parts of the index over the
    workers: each lists its births (k.bm.key, key2, unused until a sort),
    then each copies them to its place in order, the same arrays;
    serially the same as one part (its random reads of the detections'
    tracks and ranks would hold the other workers at many threads)."""
    cdef const dod_grid* g = &k.grid
    cdef size_t r, ch, n = g.n, P = _TAIL_CHUNKS if parts else 1
    cdef size_t s_at[_TAIL_CHUNKS + 1]
    cdef size_t r_at[_TAIL_CHUNKS + 1]
    if not g.direct or k.bm.row2 == NULL or k.bm.pos2 == NULL:
        return NULL
    _parts_of(n, P, s_at)
    if parts:
        for ch in prange(P, num_threads=nt, schedule="static"):
            r_at[ch] = _born_in_part(k, nfit, s_at[ch], s_at[ch + 1])
    else:
        r_at[0] = _born_in_part(k, nfit, 0, n)
    r = r_at[P] = _offsets(r_at, P)
    if r != nfit:                   # (every birth is in the index: r == nfit)
        return NULL
    if parts:
        for ch in prange(P, num_threads=nt, schedule="static"):
            _born_copy_part(k, s_at[ch], r_at[ch + 1] - r_at[ch], r_at[ch], dim)
    else:
        _born_copy_part(k, 0, r, 0, dim)
    return k.bm.row2


cdef inline void _birth_cov(const _dim* v, double* P, double r2, double v2) noexcept nogil:
    """A birth's covariance diag(r2, .., v2, ..) into a zeroed packed P."""
    cdef int d = _d(v), a
    for a in range(d):
        P[dod_kalman_packed_index(a, a, 2 * d)] = r2
        P[dod_kalman_packed_index(d + a, d + a, 2 * d)] = v2


cdef void _pair_birth_rows(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, const _tick* k,
                           size_t row0, const dod_index* order, const double* opos, const int32_t* partner,
                           double dt, double lc, size_t r0, size_t r1) noexcept nogil:
    """Rows row0 + [r0, r1) of this scan's two-point births (inserted, not
    zeroed): row row0 + r holds birth b = order[r] (r without an order),
    the pair of single partner[b] and detection born[b] (at opos[r] with
    an order), id next_id + b: a track from the single (its position and
    covariance, velocity 0 +- v0), predicted and updated with the
    detection, the score taking both (as two single-point scans would).
    Range-bearing: the extended Kalman update in the sensor's space, as a
    track's (a prediction in the sensor's singular zone is not updated
    and scores no likelihood); with a range rate the pair's update uses
    the second detection's (the single's own range rate is not kept: it
    waited as a position). Writes only these rows."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = _d(v), n = 2 * _d(v), a, q, mm = _m(v, s)
    cdef size_t b, i, r, si
    cdef int32_t j
    cdef double r2 = t.r * t.r, d2, ll, lb, lj = 0.0
    cdef double Si[16]
    cdef double S[16]
    cdef double J[24]
    cdef double h[4]
    cdef double y[4]
    cdef const double* z
    cdef const double* Cs
    cdef bint ok
    cdef double xb[6]           # the row's x and P lent (_row_lend_x), returned at the end
    cdef double Pb[21]
    cdef double* x
    cdef double* P
    # The single's position covariance: its own (range-bearing), or the
    # r^2 I every Cartesian single shares (a step of 0 through `shared`).
    cdef double shared[6]
    cdef size_t cstep = <size_t>(dim * (dim + 1) // 2) if t.singles_polar else 0
    cdef const double* C0 = t.single_C if t.singles_polar else shared
    for a in range(dim):
        for q in range(a, dim):
            shared[dod_kalman_packed_index(a, q, dim)] = r2 if a == q else 0.0
    for r in range(r0, r1):
        if (r - r0) % _BIRTH_BLOCK == 0:        # zeroed a block at a time, written while in cache (_birth_rows)
            dod_table_zero_rows(t.table, row0 + r, min(r1 - r, <size_t>_BIRTH_BLOCK))
        b = order[r] if order != NULL else r
        j = k.born[b]
        z = opos + r * dim if order != NULL and opos != NULL else k.z + <size_t>j * dim
        si = <size_t>partner[b]
        i = row0 + r
        c.id[i] = t.next_id + b
        x = _row_lend_x(v, t, i, xb)    # (the zeroed row)
        P = _row_lend_P(v, t, i, Pb)
        memcpy(x, t.single_z + si * dim, dim * sizeof(double))
        _birth_cov(v, P, r2, t.v0 * t.v0)
        Cs = C0 + si * cstep
        for a in range(dim):
            for q in range(a, dim):
                P[dod_kalman_packed_index(a, q, n)] = Cs[dod_kalman_packed_index(a, q, dim)]
        dod_kalman_predict(x, P, dim, dt, t.q)
        if _meas is _polar or _meas is _polar_cov:
            if _meas is _polar_cov:             # the detection's own noise
                ok = _meas_linearise_cov(v, k, x, P, k.R + <size_t>j * dim * dim, h, J, S, Si)
            else:
                ok = _meas_linearise(v, s, k, x, P, h, J, S, Si)
            if ok:
                dod_meas_innovation(k.zm + <size_t>j * dim, h, dim, y)
        elif _meas is _doppler:
            ok = _meas_linearise(v, s, k, x, P, h, J, S, Si)
            if ok:
                dod_meas_rate_innovation(k.zm + <size_t>j * mm, h, dim, y)
        else:
            if _meas is _cartesian_cov:         # the detection's own noise
                ok = dod_kalman_innovation_inverse_cov(P, dim, k.R + <size_t>j * dim * dim, Si)
            else:
                ok = dod_kalman_innovation_inverse(P, dim, r2, Si)
            for a in range(dim):
                y[a] = z[a] - x[a]
        if t.score_logic:
            ll = 0.0
            lb = t.log_birth - lc
            if _meas is _polar or _meas is _doppler or _meas is _polar_cov:
                # As the score pass and a single birth: the likelihood per
                # unit area/volume, less ln |det dp/dz| (k.per_area 1), or
                # with the sensor's own clutter the birth density per
                # measurement volume, plus it (k.per_area 0; the single
                # taken at this detection's range, a scan's motion away).
                lj = dod_meas_log_jacobian(k.zm + <size_t>j * mm, dim)
                lb += (1.0 - k.per_area) * lj
            if ok and _meas is _doppler:     # also per range-rate interval (measurement.pxd)
                d2 = dod_meas_mahalanobis2(y, Si, mm)
                ll = dod_meas_rate_log_likelihood(d2, Si, mm) - k.per_area * lj + k.sensor.rate_log_span
            elif ok:
                d2 = dod_kalman_mahalanobis2(y, Si, dim)
                ll = dod_kalman_log_likelihood(d2, Si, dim)
                if _meas is _polar or _meas is _polar_cov:
                    ll -= k.per_area * lj
            c.score[i] = lb + (k.log_pd - lc + ll)
            c.score_max[i] = c.score[i]
        if _meas is _polar:
            if ok:
                _cv_ekf_update(v, k, x, P, y, J, Si)
        elif _meas is _doppler:
            if ok:
                _cv_rate_update(v, k, x, P, y, J, Si)
        elif _meas is _polar_cov:
            if ok:
                _cv_ekf_update_cov(v, x, P, y, J, Si, k.R + <size_t>j * dim * dim)
        elif _meas is _cartesian_cov:
            if ok:
                dod_kalman_update_cov(x, P, z, Si, dim, k.R + <size_t>j * dim * dim)
        else:
            dod_kalman_update(x, P, z, Si, dim, r2)
        _row_return(v, t, i, x, P)
        _motion_birth(v, m, t, i, x, P)
        c.hits[i] = 2
        c.age[i] = 2
        c.history[i] = 3
        c.state[i] = DOD_TRACK_TENTATIVE


cdef void _birth_part(const dod_tracker* t, const _tick* k, size_t r0, size_t r1) noexcept nogil:
    """Births [r0, r1) of the plan k.births, in the tracker's model
    (_model.pxd)."""
    cdef int m = _model_of(t, k)
    if k.R != NULL:         # the detections' own noise
        if m == 0:
            _birth_part_as(<_planar*>NULL, <_cv*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D:
            _birth_part_as(<_spatial*>NULL, <_cv*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_IMM:
            _birth_part_as(<_planar*>NULL, <_imm*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D | _MODEL_IMM:
            _birth_part_as(<_spatial*>NULL, <_imm*>NULL, <_cartesian_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_POLAR:
            _birth_part_as(<_planar*>NULL, <_cv*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_3D | _MODEL_POLAR:
            _birth_part_as(<_spatial*>NULL, <_cv*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        elif m == _MODEL_IMM | _MODEL_POLAR:
            _birth_part_as(<_planar*>NULL, <_imm*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
        else:
            _birth_part_as(<_spatial*>NULL, <_imm*>NULL, <_polar_cov*>NULL, t, k, r0, r1)
    elif m == 0:
        _birth_part_as(<_planar*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D:
        _birth_part_as(<_spatial*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM:
        _birth_part_as(<_planar*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_IMM:
        _birth_part_as(<_spatial*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, r0, r1)
    elif m == _MODEL_POLAR:
        _birth_part_as(<_planar*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_POLAR:
        _birth_part_as(<_spatial*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, r0, r1)
    elif m == _MODEL_POLAR | _MODEL_RATE:
        _birth_part_as(<_planar*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_POLAR | _MODEL_RATE:
        _birth_part_as(<_spatial*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _birth_part_as(<_planar*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_3D | _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _birth_part_as(<_spatial*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, r0, r1)
    elif m == _MODEL_IMM | _MODEL_POLAR:
        _birth_part_as(<_planar*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, r0, r1)
    else:
        _birth_part_as(<_spatial*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, r0, r1)


cdef void _birth_part_as(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, const _tick* k,
                         size_t r0, size_t r1) noexcept nogil:
    """Two-point births (_pair_birth_rows) with a partner, else single-point
    ones (_birth_rows)."""
    cdef const _birth_plan* b = &k.births
    if b.partner != NULL:
        _pair_birth_rows(v, m, s, t, k, b.row0, b.order, b.opos, b.partner, k.dt, b.lc, r0, r1)
    else:
        _birth_rows(v, m, s, t, k, b.row0, b.order, b.opos, r0, r1, b.lc)


cdef void _births_kernel(dod_tracker* t, _tick* k, size_t item, int w) noexcept nogil:
    """Item 0: the births' slots (the insert's serial part); item p > 0: the
    slot maps of part p's rows among the reused slots, and its rows."""
    cdef _birth_plan* b = &k.births
    cdef size_t r0, r1
    if item == 0:
        dod_table_insert_reusing(t.table, &k.rm, b.n, b.reused)
        return
    r0 = min(b.n, (item - 1) * b.step)
    r1 = min(b.n, item * b.step)
    dod_table_insert_freed(t.table, &k.rm, b.row0, min(b.reused, r0), min(b.reused, r1))
    _birth_part(t, k, r0, r1)


cdef void _insert_births(dod_tracker* t, _tick* k, size_t nfit, bint par, const dod_index* order,
                         const double* opos, const int32_t* partner, double lc) noexcept nogil:
    """Insert nfit rows right after this tick's removal (k.rm) and write the
    births into them (_birth_part), with `par` over the workers in
    _TAIL_CHUNKS parts (else one). The births first take the slots the
    deaths just freed, whose order in the free list is known: each part
    writes the slot maps of its rows among those, and item 0 only the rest
    (chasing the free list would be the region's longest item). Item 0 is
    worker 0's first; each part goes first to the worker that ran the row
    chunk its first row falls in (_claim_next): those rows, the table's
    last before the deaths, are in that core's cache (the tentative tracks
    it updated, or the rows its moves read)."""
    cdef _birth_plan* b = &k.births
    cdef size_t parts = _TAIL_CHUNKS if par else 1, p
    cdef int32_t owner[_TAIL_CHUNKS + 1]
    _events_births(t, k, nfit)
    b.row0 = t.table.count
    b.n = nfit
    b.reused = dod_table_reusable(t.table, &k.rm, nfit)
    b.step = max(<size_t>1, (nfit + parts - 1) // parts)
    b.order = order
    b.opos = opos
    b.partner = partner
    b.lc = lc
    owner[0] = 0
    for p in range(1, parts + 1):
        if k.row_chunks > 0:
            owner[p] = k.ran[min((b.row0 + min(nfit, (p - 1) * b.step)) // k.chunk_rows, k.row_chunks - 1)]
        else:
            owner[p] = <int32_t>(p % <size_t>t.threads)
    memcpy(k.ran, owner, (parts + 1) * sizeof(int32_t))
    _run_chunks(t, k, par, _PASS_BIRTHS, parts + 1, NULL, _births_kernel, NULL)


cdef void _birth_rows(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, const _tick* k,
                      size_t row0, const dod_index* order, const double* opos, size_t r0, size_t r1,
                      double lc) noexcept nogil:
    """Rows row0 + [r0, r1) of this scan's births (inserted, not zeroed):
    row row0 + r holds birth b = order[r] (r without an order), detection
    born[b] (its position opos[r] with an order), id next_id + b. Zeroes
    the rows (the schema's policy: velocity 0, misses 0), then writes what
    a birth sets, the covariance always (a zero covariance means
    certainty). Writes only these rows."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = _d(v), a
    cdef double r2 = t.r * t.r
    cdef size_t b, i, r, q
    cdef double xb[6]           # the row's x and P lent (_row_lend_x), returned at the end
    cdef double Pb[21]
    cdef double* x
    cdef double* P
    for r in range(r0, r1):
        # Zeroed a block at a time, each block written while its lines are
        # still in cache (zeroed all at once, 20,000 births' rows were
        # written twice through memory: ~4 MB of columns at 100,000 targets).
        if (r - r0) % _BIRTH_BLOCK == 0:
            q = min(r1 - r, <size_t>_BIRTH_BLOCK)
            dod_table_zero_rows(t.table, row0 + r, q)
        i = row0 + r
        b = order[r] if order != NULL else r
        c.id[i] = t.next_id + b
        x = _row_lend_x(v, t, i, xb)    # (the zeroed row)
        P = _row_lend_P(v, t, i, Pb)
        if order != NULL:               # carried in order: born[b] would be a random read
            for a in range(dim):
                x[a] = opos[r * dim + a]
        else:
            for a in range(dim):
                x[a] = k.z[<size_t>k.born[b] * dim + a]
        _birth_cov(v, P, r2, t.v0 * t.v0)
        _meas_birth_cov(v, s, k, k.born[b], x, P, t.v0 * t.v0)     # a sensor's: the converted measurement's
        _row_return(v, t, i, x, P)
        _motion_birth(v, m, t, i, x, P)   # after the covariance: every IMM model starts from it
        c.hits[i] = 1
        c.age[i] = 1
        c.history[i] = 1
        c.state[i] = DOD_TRACK_TENTATIVE
        if t.score_logic:
            c.score[i] = t.log_birth - lc
            if _meas is _polar or _meas is _doppler or _meas is _polar_cov:     # the sensor's own clutter: the birth density per measurement volume
                c.score[i] += (1.0 - k.per_area) * dod_meas_log_jacobian(k.zm + <size_t>k.born[b] * _m(v, s), dim)
            c.score_max[i] = c.score[i]


cdef void _births_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt) noexcept nogil:
    """Births from the free detections (k.born, listed with the update; none
    with two-point initiation, whose free detections wait a scan), in scan
    order while rows last, the rest dropped (as one insert per birth
    would): birth b is detection born[b] with id next_id + b. The table
    zeroes the new row (ZII: velocity 0, misses 0); the birth writes only
    what it sets, the covariance always (a zero covariance means
    certainty). Their rows are in spatial (cell) order of the detections,
    not in scan order: tracks born together (all of them, at a first scan)
    then read their neighbours' memory when they are gated, and ids stay
    those of scan order. The order is the index's, read off it
    (_births_by_cell) whatever the births' number; without a direct-mode
    index, sorted (_cell_order) from _BIRTH_ORDER_MIN births. The rows
    (zeroed, then set) can be written by the workers in chunks, while one of
    them takes their slots (the insert touches the slot maps alone)."""
    cdef dod_table* tab = t.table
    cdef int nt = t.threads, dim = t.dim
    cdef size_t nfree = k.nborn, nfit = min(nfree, tab.capacity - tab.count)
    cdef bint par
    cdef const dod_index* border = NULL
    cdef const double* bpos = NULL
    cnt.births_dropped += nfree - nfit
    tab.failed += nfree - nfit     # each dropped birth is a refused insert
    par = k.par and nfit >= <size_t>nt * t.min_rows
    if not t.two_point and k.grid_built and nfit >= 2:
        border = _births_by_cell(k, nfit, dim, nt, par and k.grid.n >= _split_detections(t))
        bpos = k.bm.pos2
    if not t.two_point and border == NULL and nfit >= _BIRTH_ORDER_MIN:
        # (over the workers with enough births)
        border = _cell_order(k.z, dim, 1, k.born, dim, nfit, _BIRTH_BITS if dim == 2 else _BIRTH_BITS_3D,
                             t.grid_h, nt, par, &k.bm, NULL)
        bpos = k.bm.pos
    _insert_births(t, k, nfit, par, border, bpos, NULL, k.log_clutter)
    t.next_id += nfit
    cnt.births += nfit
