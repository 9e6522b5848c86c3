"""Gating: the (track, detection) pairs within each track's gate.

Reads the predicted tracks (x, k.Si, k.hw: double, or float in the
float32 tracker's vector path), the detection index and the detections;
writes the pair buffer (k.pt, k.pd, k.pc) as runs in row order
(k.chunk_at, k.chunk_n, k.chunks), optionally each detection's pair
count (k.det_pairs). Also the index's drop of the detections confirmed
tracks took (_keep_free), and the next scan's index cell side, from the
mean gate width (_gate_width_part, _grid_side).

The Cartesian model without a scan's own covariances (the common case)
gates in batches: the walk gathers each detection within a row's box into
a batch (its innovation and the row's inverse, in lanes), and a vector
kernel (vector_kernels.h's pair_d2) gives the batch's distances at once,
the per-pair arithmetic's bits; the pairs within the gate are then kept in
the order the walk met them. The other models test each pair as the walk
meets it (_try_pair).

Threads: chunks of rows claimed by the workers, each writing into its own
segment of the pair buffer; the run list gives the serial order back
without moving a pair. A parallel pass that drops pairs (the buffer full)
is run again serially, so the pairs kept are those of one thread.
"""
from cython.parallel cimport prange
from libc.math cimport isfinite
from libc.stdint cimport uint8_t, int32_t
from libc.string cimport memset
from dod.tracker.grid cimport (dod_grid, dod_grid_holds, dod_grid_keep_free, dod_grid_walk, dod_grid_kept_in,
                               dod_grid_bucket_from, dod_grid_keep_free_part, dod_grid_walk_begin,
                               dod_grid_walk_next, DOD_GRID_WALK_ALL, DOD_GRID_WALK_CELLS)
from dod.tracker.kalman cimport dod_kalman_mahalanobis2
from dod.tracker._model cimport (_dim, _meas, _scratch, _planar, _spatial, _cartesian, _polar, _doppler,
                                 _cartesian_cov, _polar_cov, _f64, _f32, _d, _model_of, _MODEL_3D, _MODEL_POLAR,
                                 _MODEL_RATE, _meas_innovation, _meas_d2, _meas_pair_inverse, _row_x, _hw,
                                 _scratch_f32)
from dod.tracker._track cimport dod_tracker, DOD_TRACK_TENTATIVE
from dod.tracker._frame cimport (_pairs_append, _pairs, _tick, _TAIL_CHUNKS, _LONE_PARTS_MIN_THREADS,
                                 _LONE_PARTS_MIN_DETECTIONS)
from dod.tracker._executor cimport _split_detections, _run_chunks, _parts_of, _offsets, _PASS_ASSOCIATE
from dod.tracker._vector cimport dod_vk_pair_d2


cdef enum:
    # A batch's pairs (pair_d2's lanes): a few cache lines of each lane, on
    # the stack of the pass's thread.
    _BATCH = 64


cdef struct _pair_batch:
    # Pairs within their rows' boxes, in the order the walk met them, whose
    # distances are not computed yet: pair i's y[a * _BATCH + i] (a < d) and
    # its row's inverse Si[q * _BATCH + i] (q < d * d, row-major).
    size_t n
    int32_t ti[_BATCH]
    int32_t j[_BATCH]
    double y[3 * _BATCH]
    double Si[9 * _BATCH]
    double d2[_BATCH]


cdef inline void _keep_pair(const dod_tracker* t, _pairs* out, size_t ti, size_t j, double d2) noexcept nogil:
    """Pair (ti, j) with distance d2 into `out` when within the gate (a NaN
    is not), with its detection's pair count."""
    if not d2 <= t.gate:
        return
    if _pairs_append(out, ti, j, d2) and out.count != NULL:
        out.count[j] = 1 + (out.count[j] != 0)


cdef inline void _try_pair(const _dim* v, const _meas* s, const _scratch* e, const dod_tracker* t, const _tick* k,
                           _pairs* out, size_t ti, size_t j, const double* zj, bint free_only) noexcept nogil:
    cdef double y[4]
    cdef double own[16]     # (m x m, m up to 4)
    cdef double d2
    cdef const double* Si
    if free_only and k.det_track[j] >= 0:
        return
    if not _meas_innovation(v, s, e, t, k, ti, <int32_t>j, zj, y):
        return
    Si = _meas_pair_inverse(v, s, e, t, k, ti, <int32_t>j, own)
    if Si == NULL:
        return
    _keep_pair(t, out, ti, j, _meas_d2(v, s, Si, y))


cdef inline void _batch_pair(const _dim* v, const _scratch* e, const dod_tracker* t, const _tick* k, _pairs* out,
                             _pair_batch* b, size_t ti, size_t j, const double* zj, bint free_only) noexcept nogil:
    """_try_pair's tests for a Cartesian pair (no covariance of its own):
    within the row's box, the pair joins batch `b` (its distance comes
    when the batch is full, or at the end of the rows: _batch_flush), the
    row's inverse in double (k.Si of element type e, a float one widened)."""
    cdef int d = _d(v), a
    cdef size_t i = b.n
    cdef double y[3]
    cdef double own[9]
    cdef const double* Si
    if free_only and k.det_track[j] >= 0:
        return
    if not _meas_innovation(v, <_cartesian*>NULL, e, t, k, ti, <int32_t>j, zj, y):
        return
    Si = _meas_pair_inverse(v, <_cartesian*>NULL, e, t, k, ti, <int32_t>j, own)     # (the row's: never NULL)
    for a in range(d):
        b.y[a * _BATCH + i] = y[a]
    for a in range(d * d):
        b.Si[a * _BATCH + i] = Si[a]
    b.ti[i] = <int32_t>ti
    b.j[i] = <int32_t>j
    b.n = i + 1
    if b.n == _BATCH:
        _batch_flush(v, t, out, b)


cdef void _batch_flush(const _dim* v, const dod_tracker* t, _pairs* out, _pair_batch* b) noexcept nogil:
    """The distances of batch `b`'s pairs (dod_kalman_mahalanobis2's bits),
    the pairs within the gate kept in the batch's order; `b` empty after."""
    cdef size_t i
    if b.n == 0:
        return
    dod_vk_pair_d2(_d(v), b.y, b.Si, _BATCH, b.n, b.d2)
    for i in range(b.n):
        _keep_pair(t, out, <size_t>b.ti[i], <size_t>b.j[i], b.d2[i])
    b.n = 0


cdef inline void _take_pair(const _dim* v, const _meas* s, const _scratch* e, const dod_tracker* t, const _tick* k,
                            _pairs* out, _pair_batch* b, size_t ti, size_t j, const double* zj,
                            bint free_only) noexcept nogil:
    """Candidate (ti, j) met by the walk, in the model's way: batched
    (Cartesian) or tested at once (the others)."""
    if _meas is _cartesian:
        _batch_pair(v, e, t, k, out, b, ti, j, zj, free_only)
    else:
        _try_pair(v, s, e, t, k, out, ti, j, zj, free_only)


cdef void _gate_rows(const dod_tracker* t, const _tick* k, _pairs* dest, uint8_t stage,
                     size_t row0, size_t row1) noexcept nogil:
    """Gated pairs of the tracks in `stage` among rows [row0, row1) (and, for
    tentative, free detections: k.grid then holds only those,
    dod_grid_keep_free), appended to `dest` in row order, in the tracker's
    dimension and measurement (_model.pxd), over the tick's scratch type."""
    cdef int m = _model_of(t, k) & (_MODEL_3D | _MODEL_POLAR | _MODEL_RATE)
    if k.R != NULL:         # each pair its own S = H P H' + R_j (never with a range rate: Tracker.tick)
        if m == 0:
            _gate_rows_in(<_planar*>NULL, <_cartesian_cov*>NULL, t, k, dest, stage, row0, row1)
        elif m == _MODEL_3D:
            _gate_rows_in(<_spatial*>NULL, <_cartesian_cov*>NULL, t, k, dest, stage, row0, row1)
        elif m == _MODEL_POLAR:
            _gate_rows_in(<_planar*>NULL, <_polar_cov*>NULL, t, k, dest, stage, row0, row1)
        else:
            _gate_rows_in(<_spatial*>NULL, <_polar_cov*>NULL, t, k, dest, stage, row0, row1)
    elif m == 0:
        _gate_rows_in(<_planar*>NULL, <_cartesian*>NULL, t, k, dest, stage, row0, row1)
    elif m == _MODEL_3D:
        _gate_rows_in(<_spatial*>NULL, <_cartesian*>NULL, t, k, dest, stage, row0, row1)
    elif m == _MODEL_POLAR:
        _gate_rows_in(<_planar*>NULL, <_polar*>NULL, t, k, dest, stage, row0, row1)
    elif m == _MODEL_POLAR | _MODEL_RATE:
        _gate_rows_in(<_planar*>NULL, <_doppler*>NULL, t, k, dest, stage, row0, row1)
    elif m == _MODEL_3D | _MODEL_POLAR | _MODEL_RATE:
        _gate_rows_in(<_spatial*>NULL, <_doppler*>NULL, t, k, dest, stage, row0, row1)
    else:
        _gate_rows_in(<_spatial*>NULL, <_polar*>NULL, t, k, dest, stage, row0, row1)


cdef inline void _gate_rows_in(const _dim* v, const _meas* s, const dod_tracker* t, const _tick* k, _pairs* dest,
                               uint8_t stage, size_t row0, size_t row1) noexcept nogil:
    """_gate_rows_as in one model, with k.Si and k.hw of the tick's element
    type (_scratch_f32)."""
    if _scratch_f32(t, k):
        _gate_rows_as(v, s, <_f32*>NULL, t, k, dest, stage, row0, row1)
    else:
        _gate_rows_as(v, s, <_f64*>NULL, t, k, dest, stage, row0, row1)


cdef void _gate_rows_as(const _dim* v, const _meas* s, const _scratch* e, const dod_tracker* t, const _tick* k,
                        _pairs* dest, uint8_t stage, size_t row0, size_t row1) noexcept nogil:
    """_gate_rows in one model and scratch type. Works on a local copy of
    `dest` (the workers' segments sit side by side: counting in place would
    bounce their cache line between cores at every pair). A batch spans
    rows: it is flushed when full and at the end."""
    cdef _pairs local = dest[0]
    cdef _pairs* out = &local
    cdef _pair_batch batch
    cdef int a, mode
    cdef int dim = _d(v)
    cdef size_t ti, j, q
    cdef const dod_grid* g = &k.grid
    cdef dod_grid_walk w
    cdef double blo[3]
    cdef double bhi[3]
    cdef bint free_only = stage == DOD_TRACK_TENTATIVE
    cdef bint direct = g.direct        # a local: the test below stays out of memory
    batch.n = 0
    for ti in range(row0, row1):
        if t.cols.state[ti] != stage or not k.gateable[ti]:
            continue
        for a in range(dim):
            blo[a] = _row_x(v, t, ti, a) - _hw(e, k, ti * dim + a)
            bhi[a] = _row_x(v, t, ti, a) + _hw(e, k, ti * dim + a)
        mode = dod_grid_walk_begin(g, blo, bhi, dim, k.D, &w)
        if mode == DOD_GRID_WALK_ALL:
            # A gate wider than the whole index: scanning every detection is cheaper.
            for j in range(k.D):
                _take_pair(v, s, e, t, k, out, &batch, ti, j, k.z + j * dim, free_only)
        elif mode == DOD_GRID_WALK_CELLS:
            # (the tentative stage's index holds the free detections only: no test)
            while dod_grid_walk_next(g, &w):
                for q in range(w.s0, w.s1):
                    # A hashed bucket may hold other cells' points: keep this cell's only.
                    if direct or dod_grid_holds(g, q, w.cx, w.cy, w.cz):
                        _take_pair(v, s, e, t, k, out, &batch, ti, g.order[q], g.spos + q * dim, False)
    if _meas is _cartesian:
        _batch_flush(v, t, out, &batch)
    dest[0] = local


cdef void _gate_chunk(const dod_tracker* t, _tick* k, _pairs* seg, uint8_t stage, size_t ch) noexcept nogil:
    """Gate chunk ch of the rows (k.chunk_rows each) into this worker's
    segment `seg`, and note where its pairs went (k.chunk_at, k.chunk_n)."""
    cdef size_t r0 = ch * k.chunk_rows, r1 = min(k.T, r0 + k.chunk_rows), n0 = seg.n
    _gate_rows(t, k, seg, stage, r0, r1)
    k.chunk_at[ch] = <size_t>(seg.pt - k.pt) + n0
    k.chunk_n[ch] = seg.n - n0


cdef void _gate_open(const dod_tracker* t, _tick* k) noexcept nogil:
    """Start a gating pass: the whole pair buffer (serial), or one segment
    of it per worker (threads, with enough rows).

    Where the association's lone pass runs serially (_lone_pairs), the
    pass also counts each detection's pairs as it writes them (stopping at
    two), each segment in its own quarter of det_pairs (a worker zeroes
    its own: _count_open), and the lone pass adds the quarters up instead
    of reading every pair again."""
    cdef int nt = t.threads, w
    k.npairs = 0
    k.pairs_dropped = 0
    k.chunks = 0
    _pairs_whole(k)
    k.gate_parallel = k.par
    if k.gate_parallel:
        _pairs_segments(k, nt)
    # Not from _LONE_PARTS_MIN_DETECTIONS rows (where the lone pass may run
    # in parts, _lone_pairs counts exactly, with atomics): at
    # 1,000,000 targets on one thread the counts (~1 MB written at random
    # as the pairs come) raised predict and gating from 92-96 to 100-104
    # ms a tick, more than the lone pass saved (a scan with fewer valid
    # rows than that may still run it serially: it counts then).
    k.counted = nt <= <int>sizeof(int32_t) and nt < _LONE_PARTS_MIN_THREADS \
        and k.count_stride < _LONE_PARTS_MIN_DETECTIONS
    if not k.counted:
        return
    if k.gate_parallel:
        for w in range(nt):
            k.seg[w].count = k.det_pairs + <size_t>w * k.count_stride
    else:
        k.whole.count = k.det_pairs
        memset(k.det_pairs, 0, k.count_stride)


cdef void _gate_close(const dod_tracker* t, _tick* k, uint8_t stage) noexcept nogil:
    """End a gating pass: the run list of the chunks the workers gated or,
    serially (or when a worker's segment filled up), the one run of the
    whole buffer. After a parallel pass that dropped pairs the serial pass
    runs instead, so the pairs kept and dropped are those of one thread
    whatever the thread count."""
    cdef int w
    cdef size_t dropped = 0, ch
    if k.gate_parallel:
        for w in range(t.threads):
            dropped += k.seg[w].dropped
        if dropped == 0:
            k.chunks = k.row_chunks
            for ch in range(k.row_chunks):
                k.npairs += k.chunk_n[ch]
            return
        k.whole.n = 0
        k.whole.dropped = 0
        k.counted = False           # (the lone pass counts these itself)
        _gate_rows(t, k, &k.whole, stage, 0, k.T)
    k.chunks = 1
    k.chunk_at[0] = 0
    k.chunk_n[0] = k.whole.n
    k.npairs = k.whole.n
    k.pairs_dropped = k.whole.dropped


cdef void _gate_enter(dod_tracker* t, _tick* k, int w) noexcept nogil:
    _count_open(k, w)


cdef void _gate_kernel(dod_tracker* t, _tick* k, size_t ch, int w) noexcept nogil:
    _gate_chunk(t, k, &k.seg[w] if k.gate_parallel else &k.whole, k.stage, ch)


cdef void _gate(dod_tracker* t, _tick* k, uint8_t stage) noexcept nogil:
    """All gated pairs of `stage` into k.pt/pd/pc, as k.chunks runs: run c
    is k.pt[chunk_at[c] : chunk_at[c] + chunk_n[c]], and the runs in order
    are the pairs in row order (what one serial pass writes; serially, one
    run from 0). k.npairs counts them all.

    Threads: the rows' chunks are claimed by the workers (_run_chunks: the
    cost of a chunk varies with its tracks' stages and gate widths); each
    worker appends to its own segment of the pair buffer, and the run list
    gives the order back without moving a pair."""
    _gate_open(t, k)
    if k.D == 0:
        return
    k.stage = stage
    _run_chunks(t, k, k.gate_parallel, _PASS_ASSOCIATE, k.row_chunks, _gate_enter, _gate_kernel, NULL)
    _gate_close(t, k, stage)


cdef double _grid_side(const _tick* k) noexcept nogil:
    """Twice the mean gate width from the parts' sums (0: no usable width)."""
    cdef double total = 0.0, h
    cdef size_t p
    if k.T == 0:
        return 0.0
    for p in range(_TAIL_CHUNKS):
        total += k.hm_part[p]
    h = 4.0 * total / <double>k.T
    return h if h > 0.0 and isfinite(h) else 0.0


cdef void _keep_free(const dod_tracker* t, _tick* k) noexcept nogil:
    """_keep_free_as in the tracker's dimension."""
    if t.dim == 2:
        _keep_free_as(<_planar*>NULL, t, k)
    else:
        _keep_free_as(<_spatial*>NULL, t, k)


cdef void _keep_free_as(const _dim* v, const dod_tracker* t, _tick* k) noexcept nogil:
    """The index keeps the detections no confirmed track took (same
    geometry and order: the same pairs as testing each point).

    With workers, a direct-mode index and _split_detections detections or
    more, the drop runs in _TAIL_CHUNKS parts over the workers (grid.pxd:
    counts and bucket bounds, then each part out of place), into the
    births' order arrays: the index is dead before the births use them.
    Else the same body runs as one part, in place."""
    cdef dod_grid* g = &k.grid
    cdef int nt = t.threads
    cdef size_t n = g.n, ch, acc
    cdef size_t part_at[_TAIL_CHUNKS + 1]
    cdef size_t bucket_at[_TAIL_CHUNKS + 1]
    cdef size_t s_at[_TAIL_CHUNKS + 1]      # the parts' first sorted positions
    if not (nt > 1 and g.direct and k.bm.row != NULL and k.bm.pos != NULL and n > 0
            and n >= _split_detections(t)):
        dod_grid_keep_free(g, k.det_track, _d(v))
        return
    _parts_of(n, _TAIL_CHUNKS, s_at)
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        part_at[ch] = dod_grid_kept_in(g, k.det_track, s_at[ch], s_at[ch + 1])
        bucket_at[ch] = dod_grid_bucket_from(g, s_at[ch])
    bucket_at[_TAIL_CHUNKS] = g.nb + 1
    acc = _offsets(part_at, _TAIL_CHUNKS)
    part_at[_TAIL_CHUNKS] = acc
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        dod_grid_keep_free_part(g, k.det_track, _d(v), s_at[ch], s_at[ch + 1], part_at[ch], part_at[ch + 1],
                                bucket_at[ch], bucket_at[ch + 1], k.bm.row, k.bm.pos)
    g.order = k.bm.row
    g.spos = k.bm.pos
    g.n = acc
