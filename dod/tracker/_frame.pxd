# dod/tracker/_frame.pxd: the tick's frame: its temporaries (_tick), the
# pair buffer's segments (_pairs), a spatial sort's work arrays
# (_cell_sort), the constants the passes share, and the carver that lays the
# temporaries out of the scratch arena (_frame_carve in _frame.pyx states
# the layout once: the tick carves it, scratch_bytes counts it). Memory
# that two phases use in turn is shared through scopes (_scope_open,
# _scope_close): each phase carves its own named fields after the same
# mark.
from libc.math cimport fabs
from libc.stdint cimport uint8_t, uint32_t, int32_t
from dod.arena cimport dod_arena, dod_arena_push, dod_arena_mark, dod_arena_rewind
from dod.table cimport dod_table_removal
from dod._types cimport dod_index
from dod.tracker.grid cimport dod_grid
from dod.tracker.measurement cimport dod_sensor
from dod.tracker._track cimport DOD_TRACKER_MAX_THREADS


cdef enum:
    _ALIGN = 64
    _PAIRS_PER_NODE = 16
    _GATE_CHUNKS = 256              # most chunks of a parallel gating pass
    # chunks per worker when the rows allow: a region's last chunk is its
    # tail, one worker's alone (smaller chunks, shorter tails)
    _GATE_CHUNKS_PER_THREAD = 32
    _TAIL_CHUNKS = 32               # chunks of parallel deaths (moves, and freed slots) and births
    _GRID_PARTS = 32                # most parts of the index's parallel build (_intake.pyx: _index)
    # The association's lone-pair pass runs on all workers from this many
    # threads, or with this many detections (_lone_pairs): at two threads
    # it pays at a million targets, not at 100,000; the detections' bound
    # sits between the two, not tuned.
    _LONE_PARTS_MIN_THREADS = 6
    _LONE_PARTS_MIN_DETECTIONS = 1 << 19
    _PAIRS_AHEAD = 16               # pairs between a prefetch and the association test that uses it
    _SORT_CHUNKS = 32               # row chunks of the parallel spatial sort (bounds, keys, radix passes, reorder)
    _BIRTH_BITS = 8
    _BIRTH_BITS_3D = 5
    _CLUSTER_BYTES = 16 << 20        # largest cost matrix plus solver temporaries of one cluster (a 1000 x 1000 cluster); larger ones go greedy




# ---------------------------------------------------------------- per-tick scratch layout

ctypedef struct _cell_sort:
    # The work arrays of one spatial ordering of n points (_cell_order, _cell_sort_push):
    # keys and point indices, twice (the radix passes swap them), and the
    # per-chunk radix counts, bounding boxes and ORs of the keys.
    uint32_t* key
    uint32_t* key2
    dod_index* row
    dod_index* row2
    double* pos             # [n, dim] the positions carried along (NULL: not carried):
    double* pos2            # read in order once, then moved with their keys, not gathered at random
    size_t* count           # [_SORT_CHUNKS, 256]
    double* lohi            # [_SORT_CHUNKS, 6]
    uint32_t* ors           # [_SORT_CHUNKS]
    size_t* first           # [_SORT_CHUNKS] with state: confirmed rows per chunk, then the first one's place


ctypedef struct _pairs:
    # Where one gating pass writes its pairs: the whole pair buffer (serial)
    # or one worker's segment of it (threads > 1).
    int32_t* pt
    int32_t* pd
    double* pc
    size_t n
    size_t cap
    size_t dropped
    uint8_t* count          # [D] the pairs it holds of each detection, stopping at 2 (NULL: not counted)


ctypedef struct _birth_plan:
    # One scan's births as _insert_births lays them out for its parts.
    size_t row0             # the first birth's row
    size_t n                # births
    size_t reused           # of them, those that take slots the deaths freed
    size_t step             # births a part
    const dod_index* order  # birth of each row (NULL: scan order)
    const double* opos      # their positions in that order (NULL: read from k.z)
    const int32_t* partner  # two-point births: the waiting detection of each (NULL: single-point)
    double lc               # the clutter density's log (the birth's score)


ctypedef struct _sums:
    # One worker's counts in the update pass (_update_pass): summed in
    # worker order after it, integers, so the same whatever the split.
    size_t associations
    size_t confirmed
    size_t mixed
    size_t unplaced


ctypedef struct _tick:
    # detections
    double* z               # [D, dim] valid detections
    size_t D
    size_t invalid          # rows dropped (NaN/inf; range-bearing: also out of range)
    dod_grid grid           # spatial index of z (dod/tracker/grid.pxd)
    # tracks
    double* Si              # [T, m, m] innovation inverse after predict (m: dim, or mcols with a range rate)
    double* hw              # [T, dim] gate half-widths
    double* hm              # [T] widest half-width of a gateable track (0 otherwise)
    uint8_t* gateable       # [T]
    size_t T
    # association
    int32_t* det_track      # [D] assigned track or -1
    int32_t* track_det      # [T] assigned detection or -1
    int32_t* parent         # [T + D] union-find
    int32_t* start          # [T + D + 1] cluster starts
    uint8_t* det_pairs      # [4 D] pairs of each detection in one stage: 0, 1, or 2 for two or more (D int32: exact)
    size_t count_stride     # det_pairs' bytes for one worker's pair counts: the scan's rows (it holds 4 such)
    bint counted            # the gating pass counted its pairs (_gate_open)
    int32_t* porder         # [pair_cap] pairs grouped by cluster
    int32_t* rest           # [pair_cap] the pairs not lone, in row order (_lone_pairs)
    int32_t* roots          # [pair_cap] their cluster roots, then their cluster numbers
    int32_t* listed         # [pair_cap] over the workers, each run's pairs not lone at the run's place, then packed
    int32_t* loc_t          # [T] local index in the current cluster, or -1
    int32_t* loc_d          # [D]
    int32_t* glob_t         # [pair_cap] cluster's tracks (local -> global), at the cluster's first pair
    int32_t* glob_d         # [pair_cap] (so clusters solved at once never share an entry)
    int32_t* pt             # [pair_cap] pair track
    int32_t* pd             # [pair_cap] pair detection
    double* pc              # [pair_cap] pair d2
    size_t pair_cap
    size_t npairs           # pairs in the runs below
    size_t chunks           # runs of the pair buffer, in row order (_gate)
    size_t chunk_rows       # rows per chunk of a parallel pass over the tracks (_chunk_rows)
    size_t row_chunks       # chunks of chunk_rows rows covering rows [0, T)
    size_t chunk_at[_GATE_CHUNKS]
    size_t chunk_n[_GATE_CHUNKS]
    bint gate_parallel      # the current gating pass runs over the workers (_gate_open)
    _pairs whole            # its buffer when serial
    _pairs seg[DOD_TRACKER_MAX_THREADS]     # the workers' segments when parallel
    uint8_t chunk_gated[_GATE_CHUNKS]       # fused pass: chunk gated beside its predict
    uint32_t predicted[_GATE_CHUNKS]        # fused pass: chunk predicted (atomic: release by its worker)
    uint32_t gate_taken[_GATE_CHUNKS]       # fused pass: a chunk predicted before the index, claimed to gate (atomic)
    int32_t gated_by[_GATE_CHUNKS]          # fused pass: the worker that gated such a chunk (-1: none)
    uint32_t grid_ready     # fused pass: the index is built (atomic: release by its builder)
    # which worker runs which chunk of a parallel pass (_claim_next)
    int32_t owner[_GATE_CHUNKS + _TAIL_CHUNKS]      # runs it first in this pass (read-only during it)
    int32_t ran[_GATE_CHUNKS + _TAIL_CHUNKS]        # ran it in this pass (written by that worker alone)
    uint32_t taken[_GATE_CHUNKS + _TAIL_CHUNKS]     # claimed in this pass (atomic)
    size_t move_at[_GATE_CHUNKS + 1]                # deaths: the first move whose hole is in row chunk c
    size_t free_parts                               # deaths: parts of the freed slots
    bint cluster_runs       # a cluster's pairs may sit in runs out of row order (_clusters.pyx: _group)
    size_t dead_n[_GATE_CHUNKS]                     # deaths: rows of chunk c to go (listed at k.rm.fill + its first row)
    size_t told_confirmed[_GATE_CHUNKS]             # events: ids chunk c confirmed (at events.confirmed + its first row)
    size_t told_died[_GATE_CHUNKS]                  # events: ids chunk c deleted (at events.died + its first row)
    size_t conf_n[_GATE_CHUNKS]                     # confirmed_first: confirmed rows of chunk c at or past front (at k.rm.hole + its first row)
    size_t front            # rows [0, front) should hold confirmed tracks: the previous tick's confirmed count
    size_t ordered          # t.ordered_rows when the tick began
    size_t hm_at[_TAIL_CHUNKS + 1]                  # the mean gate width's parts: rows [hm_at[p], hm_at[p + 1])
    double hm_part[_TAIL_CHUNKS]                    # their sums (_gate_width_part)
    # two-point initiation (initiation="two_point")
    uint8_t* sused          # [singles] waiting detection paired this scan
    int32_t* sbest          # [singles] its cheapest pair this round
    int32_t* dbest          # [D] a free detection's cheapest pair this round
    size_t pairs_dropped    # pairs beyond pair_cap in the latest gating pass
    double log_clutter      # the clutter density's log, once associated (score confirmation: _score_rows)
    # this scan's detection rates (score confirmation), from its sensor or
    # the configuration: scalars of the scan, never branched on per row
    double log_pd, log_miss # ln(pd), ln(1 - pd)
    double per_area         # 1.0: log_clutter is per unit area/volume (a polar likelihood less
                            # ln |det dp/dz|); 0.0: per measurement volume (the sensor's own density)
    # range-bearing scans (sensor != NULL; measurement.pxd): z holds the
    # detections' Cartesian positions (grid, births, clutter), zm the measurements
    const dod_sensor* sensor
    double coord_max        # the largest valid detection value (_coord_max)
    int mcols               # values per measurement: dim, or dim + 1 with a range rate (0: Cartesian)
    double* zm              # [D, mcols] valid measurements (range, bearing[, elevation][, range rate])
    double* hp              # [T, mcols] predicted measurement of each track
    double* J               # [T, dim, dim] its Jacobian; with a range rate the whole H [T, dim + 1, 2 dim]
    # per-detection covariance (Tracker.tick's covariance; NULL: every
    # detection has the tracker's r^2 I or its sensor's variances; never
    # with a range rate): R[j] is valid detection j's full d x d noise,
    # symmetric positive definite (the owner's checks)
    const double* R         # [D, dim, dim]
    double r2               # the gate boxes' noise variance: r^2, or the scan's largest diagonal entry of R
    # deaths and births
    dod_table_removal rm    # hole, fill, slot: [T] each (dod.table's batch removal)
    int32_t* born           # [D] free detections in scan order (births of single-scan initiation)
    size_t nborn            # how many
    int32_t* birth_rank     # [D] a free detection's place in born
    int32_t* partner        # [D] two-point: birth b's waiting detection (its single)
    int32_t* wait           # [D] two-point: the detections left to wait for a partner next scan
    _cell_sort bm           # the births' spatial order (single-scan initiation)
    # the tick's plan, set before its passes
    const double* scan      # the scan as given: n_scan rows, read by intake
    size_t n_scan
    bint par                # row passes over the workers (threads > 1 and enough rows)
    bint scan_late          # a Cartesian scan read by the index's builder inside the predict region
    bint index_early        # the index built beside predict (a previous scan gave its cell side)
    bint grid_first         # ... by every worker, before predict (many threads)
    bint width_late         # the next scan's cell side summed in the update's region
    bint grid_built         # the index exists: association ran
    size_t mixed            # management's counts for the sort triggers (sort_when_mixed,
    size_t unplaced         # sort_when_displaced)
    double dt               # the scan's time step
    uint8_t stage           # the track state the current gating pass gates
    _sums sums[DOD_TRACKER_MAX_THREADS]     # each worker's counts in the update pass
    _birth_plan births      # the births' layout (_insert_births)


cdef inline double _sum4(const double* v, size_t n) noexcept nogil:
    """v[0] + ... + v[n - 1] as four interleaved sums (no chain of dependent
    adds) added at the end: the same bits on every call, and so for every
    thread count."""
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef size_t i = 0
    while i + 4 <= n:
        a0 += v[i]
        a1 += v[i + 1]
        a2 += v[i + 2]
        a3 += v[i + 3]
        i += 4
    while i < n:
        a0 += v[i]
        i += 1
    return (a0 + a1) + (a2 + a3)


cdef inline bint _in_box(const double* x, const double* lo, const double* hi, int dim) noexcept nogil:
    """lo <= x <= hi on every axis (False where x is NaN)."""
    cdef int a
    for a in range(dim):
        if not (lo[a] <= x[a] <= hi[a]):
            return False
    return True


# A detection's values are valid up to this magnitude (the Python face:
# dod.tracker.sensor.COORDINATE_LIMIT, which says why): beyond it a row is
# dropped and counted, as a NaN row is. float32's is far below FLT_MAX,
# where x itself would round to inf.
cdef inline double _coord_max(bint single) noexcept nogil:
    """The largest valid detection value for a float32 (`single`) or float64 state."""
    return 4.611686018427388e+18 if single else 3.3519519824856493e+153     # 2**62, 2**510


cdef inline bint _all_within(const double* v, size_t n, double lim) noexcept nogil:
    """True when every v[0:n] is at most `lim` in magnitude (so none is NaN
    or infinite). One pass with no branch: the common case is all valid."""
    cdef size_t i
    cdef int out = 0
    for i in range(n):
        out |= not (fabs(v[i]) <= lim)
    return out == 0


cdef inline bint _pairs_append(_pairs* out, size_t i, size_t j, double d2) noexcept nogil:
    """Append pair (i, j) with cost d2; False (and counted as dropped) when full."""
    if out.n >= out.cap:
        out.dropped += 1
        return False
    out.pt[out.n] = <int32_t>i
    out.pd[out.n] = <int32_t>j
    out.pc[out.n] = d2
    out.n += 1
    return True


ctypedef struct _carver:
    # Carves a tick's temporaries from an arena, or counts the bytes they
    # take: the layout is written once (_frame_carve) and serves both.
    dod_arena* arena        # carve from it (NULL: count only)
    size_t bytes            # bytes counted, each block's worst-case alignment included
    bint ok                 # every block carved so far fitted


cdef inline void* _carve(_carver* c, size_t n, size_t size) noexcept nogil:
    """n items of `size` bytes, _ALIGN-aligned (NULL when counting, or when
    the arena is full: then c.ok is False)."""
    cdef size_t b = n * size if n > 0 else 1
    cdef void* p
    if c.arena == NULL:
        c.bytes += (b + _ALIGN - 1) // _ALIGN * _ALIGN + _ALIGN
        return NULL
    p = dod_arena_push(c.arena, b, _ALIGN)
    if p == NULL:
        c.ok = False
    return p


# A phase's scope. The frame carves what lives the whole tick, then each
# phase whose temporaries are dead before another's begin carves them
# after one mark and closes its scope at the end of its declarations: the
# next phase's fields take the same bytes. The frame's bytes run to the
# furthest any scope reached (`high`: _scopes_end), so that the count
# (scratch_bytes) is the largest phase's, not their sum. A scope rewinds
# the carver's arena: the frame carves from an arena of its own over the
# scratch's free bytes (_frame_open), never from the tick's scratch, whose
# later pushes (the clusters' matrices) must not land on a scope's bytes.

cdef inline size_t _scope_open(const _carver* c) noexcept nogil:
    """The mark a scope's fields are carved after."""
    return dod_arena_mark(c.arena) if c.arena != NULL else c.bytes


cdef inline void _scope_close(_carver* c, size_t mark, size_t* high) noexcept nogil:
    """Close the scope opened at `mark`: the next carve takes its bytes
    again; high: the furthest position a scope has reached."""
    cdef size_t at = _scope_open(c)
    if at > high[0]:
        high[0] = at
    if c.arena != NULL:
        dod_arena_rewind(c.arena, mark)
    else:
        c.bytes = mark


cdef inline void _scopes_end(_carver* c, size_t high) noexcept nogil:
    """After the frame's last scope: the frame runs to the furthest one."""
    cdef size_t at = _scope_open(c)
    if at >= high:
        return
    if c.arena == NULL:
        c.bytes = high
    elif dod_arena_push(c.arena, high - at, 1) == NULL:      # (positions are whole grains)
        c.ok = False


cdef inline void _cell_sort_carve(_carver* c, size_t n, int carry, _cell_sort* m) noexcept nogil:
    """The work arrays of one spatial ordering of n points (the chunk arrays
    for _SORT_CHUNKS whatever the thread count: a scratch that fits one fits
    every count), with room to carry `carry` coordinates per point (0: none)."""
    m.pos = m.pos2 = NULL
    if carry > 0:
        m.pos = <double*>_carve(c, n * <size_t>carry, sizeof(double))
        m.pos2 = <double*>_carve(c, n * <size_t>carry, sizeof(double))
    m.key = <uint32_t*>_carve(c, n, sizeof(uint32_t))
    m.key2 = <uint32_t*>_carve(c, n, sizeof(uint32_t))
    m.row = <dod_index*>_carve(c, n, sizeof(dod_index))
    m.row2 = <dod_index*>_carve(c, n, sizeof(dod_index))
    m.count = <size_t*>_carve(c, _SORT_CHUNKS * 256, sizeof(size_t))
    m.lohi = <double*>_carve(c, _SORT_CHUNKS * 6, sizeof(double))
    m.ors = <uint32_t*>_carve(c, _SORT_CHUNKS, sizeof(uint32_t))
    m.first = <size_t*>_carve(c, _SORT_CHUNKS, sizeof(size_t))


cdef void _frame_carve(_tick* k, _carver* c, size_t T, size_t n_dets, size_t ns, int dim, bint two_point,
                       int mcols) noexcept nogil
cdef bint _frame_open(_tick* k, dod_arena* scratch, size_t T, size_t n_dets, size_t ns, int dim, bint two_point,
                      int mcols) noexcept nogil
