"""Predict: every track one step ahead, its gate, and the confirmed tracks' gating.

Reads and writes the track columns x, P (and the IMM's columns), age;
writes k.Si (innovation inverses), k.hw and k.hm (gate half-widths; Si
and hw in float where the float32 vector kernels write them),
k.gateable, and resets track_det and loc_t. The detection index is built
inside the same region (by one worker, or by all first with many), and
confirmed tracks are gated as they are predicted once it is ready
(_gate.pyx writes the pairs).

Threads: the rows are cut into chunks (_executor.pxd) that the workers
claim by affinity; a row writes only its own entries, so any split gives
the serial result.
"""
from libc.stdint cimport uint32_t, int32_t, int64_t
from libc.string cimport memset
from dod.atomics cimport dod_atomic_load_u32, dod_atomic_store_u32, dod_atomic_exchange_u32, dod_cpu_relax
from dod.tracker.kalman cimport dod_kalman_noise, dod_kalman_noise_of
from dod.tracker._model cimport (_dim, _motion, _meas, _planar, _spatial, _cv, _imm, _cartesian, _polar,
                                 _doppler, _model_of, _MODEL_3D, _MODEL_IMM, _MODEL_POLAR, _MODEL_RATE,
                                 _motion_predict, _meas_gate_row, _d, _Si_f32, _hw_f32)
from dod.tracker._vector cimport (dod_vk_cv_predict, dod_vk_gate_rows, dod_vk_cv_predict_f32,
                                  dod_vk_gate_rows_f32)
from dod.tracker._track cimport dod_tracker, DOD_TRACK_CONFIRMED
from dod.tracker._frame cimport _pairs, _tick, _TAIL_CHUNKS
from dod.tracker._executor cimport _clock_ns, _run_chunks, _PASS_PREDICT
from dod.tracker._intake cimport _take_dets, _index
from dod.tracker._gate cimport (_count_open, _gate_width_cuts, _gate_width_part, _gate_rows, _gate_chunk,
                                _gate_open, _grid_side)


cdef enum:
    _GRID_PARTS_MIN_THREADS = 6     # threads from which the workers build the index together first


cdef enum:
    _FUSE_ROWS = 64                 # rows predicted then gated at once (their x, P, Si, hw in L1: 16 KiB)




cdef void _predict_rows(const dod_tracker* t, _tick* k, double dt, size_t row0, size_t row1) noexcept nogil:
    """Predict rows [row0, row1); their innovation inverses, gate half-widths
    and widest half-width (hm: 0 for a track that cannot be gated), in the
    tracker's model (_model.pxd). Writes only these rows' entries."""
    cdef int m = _model_of(t, k)
    if m == 0:
        _predict_rows_as(<_planar*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_3D:
        _predict_rows_as(<_spatial*>NULL, <_cv*>NULL, <_cartesian*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_IMM:
        _predict_rows_as(<_planar*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_3D | _MODEL_IMM:
        _predict_rows_as(<_spatial*>NULL, <_imm*>NULL, <_cartesian*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_POLAR:
        _predict_rows_as(<_planar*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_3D | _MODEL_POLAR:
        _predict_rows_as(<_spatial*>NULL, <_cv*>NULL, <_polar*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_POLAR | _MODEL_RATE:
        _predict_rows_as(<_planar*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_3D | _MODEL_POLAR | _MODEL_RATE:
        _predict_rows_as(<_spatial*>NULL, <_cv*>NULL, <_doppler*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _predict_rows_as(<_planar*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_3D | _MODEL_IMM | _MODEL_POLAR | _MODEL_RATE:
        _predict_rows_as(<_spatial*>NULL, <_imm*>NULL, <_doppler*>NULL, t, k, dt, row0, row1)
    elif m == _MODEL_IMM | _MODEL_POLAR:
        _predict_rows_as(<_planar*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, dt, row0, row1)
    else:
        _predict_rows_as(<_spatial*>NULL, <_imm*>NULL, <_polar*>NULL, t, k, dt, row0, row1)


cdef void _predict_rows_as(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t, _tick* k,
                           double dt, size_t row0, size_t row1) noexcept nogil:
    cdef size_t ti
    cdef double r2 = k.r2       # r^2, or the scan's largest own variance (the boxes hold every pair's gate)
    cdef dod_kalman_noise w = dod_kalman_noise_of(dt, t.q)     # once, not per row
    cdef bint moves = dt != 0.0     # a scan at the same instant predicts nothing (the IMM would still mix)
    if _motion is _cv and _meas is _cartesian:
        if t.cols.xr == 1 and t.cols.Pr == 1:
            # Lanes: the block's rows at once, each kernel one loop over
            # the rows per element (the vector kernels: dod/tracker/_vector.pxd;
            # float32 columns: their single-precision twins).
            if moves and t.cols.single:
                dod_vk_cv_predict_f32(_d(v), t.cols.xf, t.cols.xs, t.cols.Pf, t.cols.Ps, row0, row1, &w)
            elif moves:
                dod_vk_cv_predict(_d(v), t.cols.x, t.cols.xs, t.cols.P, t.cols.Ps, row0, row1, &w)
            for ti in range(row0, row1):
                t.cols.age[ti] += 1
                k.track_det[ti] = -1
                k.loc_t[ti] = -1
            if t.cols.single:       # (Si and hw in float: _model.pxd's _scratch_f32)
                dod_vk_gate_rows_f32(_d(v), t.cols.Pf, t.cols.Ps, row0, row1, r2, t.gate, _Si_f32(k), _hw_f32(k),
                                     k.hm, k.gateable)
            else:
                dod_vk_gate_rows(_d(v), t.cols.P, t.cols.Ps, row0, row1, r2, t.gate, k.Si, k.hw, k.hm, k.gateable)
            return
    for ti in range(row0, row1):
        if moves:
            _motion_predict(v, m, t, ti, &w, dt)
        t.cols.age[ti] += 1
        k.track_det[ti] = -1
        k.loc_t[ti] = -1
        _meas_gate_row(v, s, t, k, ti, r2)


cdef void _predict_gate_rows(const dod_tracker* t, _tick* k, double dt, _pairs* dest,
                             size_t row0, size_t row1) noexcept nogil:
    """Predict rows [row0, row1) and gate the confirmed ones among them
    into `dest` (the index built), _FUSE_ROWS rows at a time: gating reads
    a row's state, gate and innovation inverse while predict has just left
    them in L1 (two passes over the table read them from memory twice:
    at 100,000 targets the tracks' columns fill tens of MB). The pairs and
    all they depend on are those of the two passes one after the other."""
    cdef size_t b0, b1
    b0 = row0
    while b0 < row1:
        b1 = min(row1, b0 + _FUSE_ROWS)
        _predict_rows(t, k, dt, b0, b1)
        _gate_rows(t, k, dest, DOD_TRACK_CONFIRMED, b0, b1)
        b0 = b1


cdef void _predict_chunk(const dod_tracker* t, _tick* k, double dt, size_t ch, bint fused,
                         _pairs* seg) noexcept nogil:
    """Predict chunk ch of the rows (k.chunk_rows each) on a worker; with
    `fused`, gate its confirmed tracks too, into this worker's segment
    `seg`, when the index is ready by then (k.grid_ready; a chunk predicted
    before is gated after the pass)."""
    cdef size_t r0 = ch * k.chunk_rows, r1 = min(k.T, r0 + k.chunk_rows), n0
    if fused and dod_atomic_load_u32(&k.grid_ready):
        n0 = seg.n
        _predict_gate_rows(t, k, dt, seg, r0, r1)
        k.chunk_at[ch] = <size_t>(seg.pt - k.pt) + n0
        k.chunk_n[ch] = seg.n - n0
        k.chunk_gated[ch] = 1
    else:
        _predict_rows(t, k, dt, r0, r1)


cdef void _gate_late(dod_tracker* t, _tick* k, int w) noexcept nogil:
    """In the fused pass's region, once worker w has no chunk left to
    predict: gate the confirmed tracks of the chunks predicted before the
    index was ready, those w predicted first, then the others', each
    claimed once (k.gate_taken) and only once its prediction is done
    (k.predicted: the worker that predicted a chunk looks at it after, so
    none is left out). In the same region, not a second one: a second
    region waits for the first one's last chunk."""
    cdef size_t ch, i
    cdef int round
    cdef int64_t spun = _clock_ns() if t.profile else 0
    while not dod_atomic_load_u32(&k.grid_ready):
        dod_cpu_relax()
    if t.profile:           # (a wait for the index: idle, as at a region's end)
        t.worker_wait[w] = _clock_ns() - spun
    for round in range(2):
        for i in range(k.row_chunks):
            # its own in order, the others' from the far end (as _claim_next:
            # both ascending, the workers would take every other chunk)
            ch = i if round == 0 else k.row_chunks - 1 - i
            # (ran and chunk_gated read once the chunk is predicted: written before)
            if not dod_atomic_load_u32(&k.predicted[ch]) or k.chunk_gated[ch]:
                continue
            if (k.ran[ch] == w) != (round == 0):
                continue
            if (dod_atomic_load_u32(&k.gate_taken[ch]) == 0
                    and dod_atomic_exchange_u32(&k.gate_taken[ch], 1) == 0):
                _gate_chunk(t, k, &k.seg[w], DOD_TRACK_CONFIRMED, ch)
                k.gated_by[ch] = w


cdef void _predict_enter(dod_tracker* t, _tick* k, int w) noexcept nogil:
    """A worker's start of the predict region: its pair counts zeroed (a
    no-op unless _gate_open began a counting pass); worker 0 first reads
    the scan if it is late and builds the index, then predicts."""
    _count_open(k, w)
    if w == 0:
        if k.scan_late:
            _take_dets(k, k.scan, k.n_scan, t.dim, 1)
        if k.index_early and not k.grid_first:
            _index(k, t.dim, 1)
        dod_atomic_store_u32(&k.grid_ready, 1)


cdef void _predict_kernel(dod_tracker* t, _tick* k, size_t ch, int w) noexcept nogil:
    _predict_chunk(t, k, k.dt, ch, k.index_early, &k.seg[w] if k.gate_parallel else &k.whole)
    dod_atomic_store_u32(&k.predicted[ch], 1)


cdef void _predict_leave(dod_tracker* t, _tick* k, int w) noexcept nogil:
    if k.index_early:
        _gate_late(t, k, w)


cdef void _predict_pass(dod_tracker* t, _tick* k) noexcept nogil:
    """Predict every track (innovation inverse and gate half-widths: rows are
    independent, chunks over the workers) and meanwhile index the
    detections, whose grid cells are twice the mean gate width of the
    previous scan (the only input the index takes from the tracks: a
    typical gate box then touches 1-2 cells per axis, and sparse scenes
    keep few detections per cell; which cell side only changes the speed).
    With the index built from the start, the confirmed tracks are gated as
    they are predicted (_predict_gate_rows: one pass over their columns
    instead of two). With workers, worker 0 builds the index first while
    the others predict their chunks and then take its chunks from the far
    end; chunks predicted before the index is ready are gated by whichever
    worker has no chunk left to predict (_gate_late), in the same region.
    Then the next scan's cell side (the mean summed in row order: the same
    for every thread count): now, or with workers and the index built, in
    the update's region (k.width_late). (With the scan still to be read,
    its rows stand in for its valid ones: if none is valid, the index is
    empty and gating finds no pair.)"""
    cdef size_t ch, i
    k.index_early = k.T > 0 and (k.n_scan if k.scan_late else k.D) > 0 and t.grid_h > 0.0
    if k.index_early:
        k.grid.h = t.grid_h
        _gate_open(t, k)
    k.grid_first = k.par and k.index_early and t.threads >= _GRID_PARTS_MIN_THREADS
    if k.grid_first:
        # With many workers, the one building the index would hold up the
        # others: the index takes a fifth to a quarter of predict, index and
        # confirmed gating, so from about five workers the builder is the
        # region's longest path. From _GRID_PARTS_MIN_THREADS the workers
        # build it together first (_index: the same index).
        if k.scan_late:
            _take_dets(k, k.scan, k.n_scan, t.dim, t.threads)
            k.scan_late = False
        _index(k, t.dim, t.threads)
        k.grid_ready = 1
    memset(k.predicted, 0, k.row_chunks * sizeof(uint32_t))
    memset(k.gate_taken, 0, k.row_chunks * sizeof(uint32_t))
    memset(k.gated_by, 0xff, k.row_chunks * sizeof(int32_t))
    _run_chunks(t, k, k.par, _PASS_PREDICT, k.row_chunks, _predict_enter, _predict_kernel, _predict_leave)
    for ch in range(k.row_chunks):      # (the next passes' affinity: who gated it last)
        if k.gated_by[ch] >= 0:
            k.ran[ch] = k.gated_by[ch]
    _gate_width_cuts(k)
    k.width_late = k.par and k.index_early
    if not k.width_late:
        for i in range(<size_t>_TAIL_CHUNKS):
            _gate_width_part(k, i)
        t.grid_h = _grid_side(k)
