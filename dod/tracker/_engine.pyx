"""The tracker's tick and its owner: one nogil call per scan.

The tick composes three engines, each in its own module: the Kalman algebra
(``dod/tracker/kalman.pxd``: predict, innovation inverse, Joseph update;
with motion="imm" the IMM's in ``dod/tracker/imm.pxd`` predicts and updates
instead, writing the models' combination where the CV state lives),
the spatial index (``dod/tracker/grid.pxd``: a hashed uniform grid of the
detections) and the assignment solver (``dod.tracker.assignment``). Reading
order here: the per-tick scratch layout, one association stage (gate through
the grid, cluster, solve), the tick, then the owner class and its Python face.

Association is global nearest neighbour on gated pairs: within each cluster
of tracks and detections linked by gated pairs it minimises
``sum(d2 - gate)`` over the assigned pairs (``d2`` the squared Mahalanobis
distance), i.e. the total distance plus ``gate`` for every track left
unassigned. Confirmed tracks take detections first; tentative tracks then
compete for what is left. The reference tracker (dod.tracker.reference)
states the same rules in numpy.

Track management in clutter (TrackerConfig confirmation="score",
initiation="two_point"; the rules are in TrackerConfig's docstring): the
clutter density is estimated after the confirmed stage (the detections no
confirmed track took); the score column gains ln(pd N(y; 0, S) / clutter) for
a detection (the innovation density of the predicted track, taken before the
update) or ln(1 - pd) for a miss; pairs for two-point births are formed after
both stages, from the previous scan's waiting detections (the `singles`
table) and this scan's free ones, by iterated mutual nearest neighbours
(the same result as cheapest pair first, ties by index), and the free
detections left over replace the waiting ones.
"""
cimport cython
cimport numpy as cnp
from cython.parallel cimport prange, parallel, threadid
from libc.math cimport sqrt, isfinite, log, INFINITY
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t, uintptr_t
from libc.string cimport memset, memcpy, memmove, strerror
from libc.errno cimport errno
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from dod.atomics cimport (dod_atomic_load_u32, dod_atomic_store_u32, dod_atomic_exchange_u32,
                          dod_atomic_fetch_add_u32, dod_atomic_load_relaxed_i32,
                          dod_atomic_store_relaxed_i32, dod_atomic_cas_i32, dod_cpu_relax)

from dod.arena cimport (dod_arena, dod_arena_block, Arena, dod_arena_push, dod_arena_mark,
                        dod_arena_rewind)
from dod.table cimport (dod_table, Table, dod_table_insert, dod_table_insert_many, dod_table_zero_rows,
                        dod_table_clear,
                        dod_table_reorder, dod_table_removal, dod_table_swap_rows,
                        dod_table_removal_list, dod_table_removal_walk,
                        dod_table_reusable, dod_table_insert_reusing, dod_table_insert_freed,
                        dod_table_removal_move, dod_table_removal_free, dod_table_removal_finish,
                        dod_table_reorder_scratch_bytes, dod_table_reorder_gather, dod_table_reorder_put)
from dod._core cimport dod_prefetch
from dod._types cimport dod_index
from dod.tracker.assignment cimport dod_assignment_solve
from dod.tracker.grid cimport (dod_grid, dod_grid_build, dod_grid_holds, dod_grid_keep_free, dod_grid_walk,
                               dod_grid_kept_in, dod_grid_bucket_from, dod_grid_keep_free_part,
                               dod_grid_walk_begin, dod_grid_walk_next, DOD_GRID_WALK_ALL, DOD_GRID_WALK_CELLS,
                               dod_grid_bounds, dod_grid_plan, dod_grid_parts, dod_grid_cells_part,
                               dod_grid_route_offsets, dod_grid_route_part, dod_grid_count_part,
                               dod_grid_uncrowded, dod_grid_fill_part, dod_grid_direct_done,
                               dod_grid_build_hashed)
from dod.tracker.kalman cimport (dod_kalman_predict, dod_kalman_noise, dod_kalman_noise_of, dod_kalman_predict_step,
                                 dod_kalman_innovation_inverse, dod_kalman_packed_size, dod_kalman_packed_index,
                                 dod_kalman_pack, dod_kalman_unpack,
                                 dod_kalman_mahalanobis2, dod_kalman_update, dod_kalman_inverse_spd,
                                 dod_kalman_log_likelihood)
from dod.tracker.imm cimport (DOD_IMM_MODELS, dod_imm_predict, dod_imm_update, dod_imm_birth,
                              dod_imm_model_x, dod_imm_model_P, dod_imm_weigh)
from dod.tracker.measurement cimport (dod_sensor, dod_meas_predict, dod_meas_innovation_cov,
                                      dod_meas_innovation, dod_meas_gate_box,
                                      dod_meas_update, dod_meas_to_cartesian, dod_meas_log_jacobian,
                                      dod_ekf_update, dod_ekf_position_update)

import numpy as np

from dod.tracker.covariance import unpack_covariance

cnp.import_array()

cdef inline uint32_t _popcount(uint32_t v) noexcept nogil:
    # SWAR: without -mpopcnt, __builtin_popcount is a libgcc call.
    v = v - ((v >> 1) & 0x55555555u)
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u)
    v = (v + (v >> 4)) & 0x0F0F0F0Fu
    return (v * 0x01010101u) >> 24

cdef enum:
    _ALIGN = 64
    _PAIRS_PER_NODE = 16
    _GATE_CHUNKS = 256              # most chunks of a parallel gating pass
    # chunks per worker when the rows allow: a region's last chunk is its
    # tail, one worker's alone (100,000 targets, two threads: 16 a worker
    # left the predict region's workers ~290-340 us idle a tick, summed;
    # 32, ~180-275)
    _GATE_CHUNKS_PER_THREAD = 32
    _CLUSTER_CHUNK = 256            # clusters per dynamic chunk of the parallel cluster solve
    _CLUSTER_CHUNKS_PER_THREAD = 8  # its chunks per worker when there are fewer clusters
    _TAIL_CHUNKS = 32               # chunks of parallel deaths (moves, and freed slots) and births
    _GRID_PARTS = 32                # most parts of the index's parallel build (_index_parts)
    _GRID_PARTS_MIN_THREADS = 6     # threads from which the index is built by all workers (step 3)
    # The association's lone-pair pass runs on all workers from this many
    # threads, or with this many detections (_lone_pairs_parts). At 2
    # threads, ticks of builds alternating: 1,000,000 targets (~1.1 M
    # detections) 222-225 against 240-264 ms a tick, 100,000 19-20 against
    # 16-19 ms; the detections' bound sits between the two, not tuned.
    _LONE_PARTS_MIN_THREADS = 6
    _LONE_PARTS_MIN_DETECTIONS = 1 << 19
    # detections, times _split_rows, for a parallel _keep_free (and the
    # births' order in parts): at 10,000 targets (~11,000 detections) on two
    # threads the drop took ~24 us in parts against ~30 serially
    # (Tracker.profile's association pass 128 against 133 us)
    _FREE_INDEX_MIN = 4
    _GROUP_PARTS_MIN = 16           # clustered pairs, times parallel_min_rows, for their grouping in parts
    # Clusters (those left after the lone pairs), times parallel_min_rows,
    # for their solve over the workers. On a 2-core Intel VM (2 MiB L2 a
    # core), 2 threads, sub-pass timers on a copied tree: at 10,000 targets
    # (~65 such clusters a tick) the solve took ~15 us in parts against ~7
    # serially, at 100,000 (~1,950) ~200 against 170-190: the clusters'
    # lists, written by the calling thread, and their rows and detections,
    # at random, cost the other core more than its half saves (on the AMD
    # EPYC VMs of the thirty-seventh session serial below 2,048 clusters
    # made no difference either way).
    _SOLVE_PARTS_MIN = 4
    # Rows of a row pass that one row swap of confirmed_first weighs against
    # _split_rows: two random rows, every column, ~0.7 us a swap at 100,000
    # targets (~90 swaps a tick once the tracks settle; ~7,500 at
    # 1,000,000). Counted as rows, and against every worker's
    # parallel_min_rows, they stayed serial at 16 threads: ~2.4 ms of the
    # calling thread's time a tick at 1,000,000 targets, ~0.06 ms at
    # 100,000, with 15 workers waiting (perf, 16 threads on the 2-core VM).
    # At 2 threads 8 or 64 made no difference at 10,000 or 100,000.
    _SWAP_ROWS = 64
    _UPDATE_AHEAD = 8               # rows between a prefetch and the update that uses it
    _PAIRS_AHEAD = 16               # pairs between a prefetch and the association test that uses it
    _CLUSTERS_AHEAD = 12            # clusters between a prefetch and the solve that uses it
    _SPEED_EVERY = 64               # scans between measures of the mean speed (sort_when_drifted)
    _BIRTH_BLOCK = 128              # birth rows zeroed, then written, at once
    _FUSE_ROWS = 64                 # rows predicted then gated at once (their x, P, Si, hw in L1: 16 KiB)
    _SORT_CHUNKS = 32               # row chunks of the parallel spatial sort (bounds, keys, radix passes, reorder)
    # Without a direct-mode index to read their order from (a first scan,
    # a hashed index), a scan's births are sorted into spatial order when
    # there are this many: fewer stay in scan order (at 1,000 and 10,000
    # targets, a few hundred to ~2,000 births a scan, the sort bought
    # nothing). The sort is coarse: at most 256 x 256 cells (2-D), 32**3
    # (3-D), keys of at most 16 bits, two radix passes (100,000 births:
    # ~1.5 a cell).
    _BIRTH_ORDER_MIN = 4096
    _BIRTH_BITS = 8
    _BIRTH_BITS_3D = 5

# Largest cost matrix plus solver temporaries of one cluster (16 MiB: a
# 1000 x 1000 cluster); larger clusters are solved greedily and counted.
cdef size_t _CLUSTER_BYTES = <size_t>16 << 20


# ---------------------------------------------------------------- the tick's profile (Tracker.profile)

# The passes of dod_tick_profile, in PASS_NAMES order.
cdef enum:
    _PASS_SETUP = 0         # temporaries, the scan's valid detections (serial tick)
    _PASS_PREDICT = 1       # predict, the detection index, the confirmed tracks' gating
    _PASS_ASSOCIATE = 2     # both stages' association (and the tentative gating), the clutter estimate
    _PASS_UPDATE = 3        # scores, the Kalman update, hits, misses, confirmation
    _PASS_DEATHS = 4        # the removal plan and the row moves
    _PASS_BIRTHS = 5        # the births' order, slots and rows
    _PASS_SORT = 6          # the spatial sort (sort_every)

PASS_NAMES = ("setup", "predict_gate", "associate", "update", "deaths", "births", "sort")
if len(PASS_NAMES) != DOD_TICK_PASSES:
    raise ImportError("PASS_NAMES and DOD_TICK_PASSES disagree")


cdef inline int64_t _clock_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline int64_t _pass_done(dod_tracker* t, int p, int64_t since) noexcept nogil:
    """Profile: add the time since `since` to pass p and return the time
    now, the next pass's start (0, and nothing read, when it is off)."""
    cdef int64_t now
    if not t.profile:
        return 0
    now = _clock_ns()
    t.prof.wall_ns[p] += now - since
    return now


cdef inline int64_t _region_open(dod_tracker* t, int nt) noexcept nogil:
    """Profile: the start of a parallel region of nt threads (0 when off).
    A thread the runtime does not give the region counts as idle in it."""
    cdef int w
    if not t.profile:
        return 0
    for w in range(nt):
        t.worker_in[w] = 0
        t.worker_out[w] = 0
        t.worker_wait[w] = 0
    return _clock_ns()


cdef inline void _worker_in(dod_tracker* t, int w) noexcept nogil:
    if t.profile:
        t.worker_in[w] = _clock_ns()


cdef inline void _worker_out(dod_tracker* t, int w) noexcept nogil:
    if t.profile:
        t.worker_out[w] = _clock_ns()


cdef inline void _region_close(dod_tracker* t, int p, int nt, int64_t opened) noexcept nogil:
    """Profile: the workers' idle time in the region opened at `opened`, into pass p."""
    cdef int64_t idle
    cdef int w
    if not t.profile:
        return
    idle = <int64_t>nt * (_clock_ns() - opened)
    for w in range(nt):
        idle -= t.worker_out[w] - t.worker_in[w] - t.worker_wait[w]
    t.prof.idle_ns[p] += idle


# ---------------------------------------------------------------- test hooks of the Kalman kernels

cdef int _kernel_dim(double[::1] x, double[:, ::1] P) except -1:
    """d of a test hook's state: x of 2d values, P of 2d x 2d, d 2 or 3."""
    cdef int d = x.shape[0] // 2
    if d not in (2, 3) or x.shape[0] != 2 * d or P.shape[0] != 2 * d or P.shape[1] != 2 * d:
        raise ValueError("the kernels take x of 4 or 6 values and P of 4 x 4 or 6 x 6")
    return d


def _kernel_predict(double[::1] x, double[:, ::1] P, double dt, double q):
    """Test hook: predict one state in place (P full; the kernel runs on its
    upper triangle, packed)."""
    cdef int d = _kernel_dim(x, P)
    cdef double Pp[21]
    dod_kalman_pack(&P[0, 0], 2 * d, Pp)
    dod_kalman_predict(&x[0], Pp, d, dt, q)
    dod_kalman_unpack(Pp, 2 * d, &P[0, 0])


def _kernel_update(double[::1] x, double[:, ::1] P, double[::1] z, double r):
    """Test hook: update one state in place with measurement z (P full, as
    for _kernel_predict); returns d2 (or nan)."""
    cdef int d = _kernel_dim(x, P)
    cdef double Pp[21]
    cdef double Si[9]
    cdef double y[3]
    cdef int i
    if z.shape[0] != d:
        raise ValueError("z needs one value per position axis")
    dod_kalman_pack(&P[0, 0], 2 * d, Pp)
    if not dod_kalman_innovation_inverse(Pp, d, r * r, Si):
        return float("nan")
    for i in range(d):
        y[i] = z[i] - x[i]
    d2 = dod_kalman_mahalanobis2(y, Si, d)
    dod_kalman_update(&x[0], Pp, &z[0], Si, d, r * r)
    dod_kalman_unpack(Pp, 2 * d, &P[0, 0])
    return d2


def _kernel_ekf_update(double[::1] x, double[:, ::1] P, double[::1] z, double[::1] pos, double[::1] var,
                       bint log_likelihood=False):
    """Test hook: dod_ekf_update of one state (n = len(x), d = len(z)) in
    place; returns (d2, Si) or (nan, None) when the measurement is unusable;
    with log_likelihood, dod_ekf_position_update's ln N (or -inf) instead."""
    cdef dod_sensor s
    cdef double Si[9]
    cdef int a, d = z.shape[0]
    memset(&s, 0, sizeof(s))
    for a in range(d):
        s.pos[a] = pos[a]
        s.var[a] = var[a]
    if log_likelihood:
        return dod_ekf_position_update(&x[0], &P[0, 0], x.shape[0], &z[0], d, &s)
    d2 = dod_ekf_update(&x[0], &P[0, 0], x.shape[0], d, &z[0], &s, Si)
    if d2 < 0:
        return float("nan"), None
    return d2, np.array([Si[a] for a in range(d * d)]).reshape(d, d)


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


ctypedef struct _tick:
    # detections
    double* z               # [D, dim] valid detections
    size_t D
    size_t invalid          # rows dropped (NaN/inf; range-bearing: also out of range)
    dod_grid grid           # spatial index of z (dod/tracker/grid.pxd)
    # tracks
    double* Si              # [T, dim, dim] innovation inverse after predict
    double* hw              # [T, dim] gate half-widths
    double* hm              # [T] widest half-width of a gateable track (0 otherwise)
    uint8_t* gateable       # [T]
    size_t T
    # association
    int32_t* det_track      # [D] assigned track or -1
    int32_t* track_det      # [T] assigned detection or -1
    int32_t* parent         # [T + D] union-find
    int32_t* start          # [T + D + 1] cluster starts
    uint8_t* det_pairs      # [D] pairs of each detection in one stage: 0, 1, or 2 for two or more
    size_t count_stride     # det_pairs' bytes for one worker's pair counts: the scan's rows (it holds 4 such)
    bint counted            # the gating pass counted its pairs (_gate_open)
    int32_t* porder         # [pair_cap] pairs grouped by cluster
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
    bint cluster_runs       # a cluster's pairs may sit in runs out of row order (_group_parts)
    size_t dead_n[_GATE_CHUNKS]                     # deaths: rows of chunk c to go (listed at k.rm.fill + its first row)
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
    # range-bearing scans (sensor != NULL; measurement.pxd): z holds the
    # detections' Cartesian positions (grid, births, clutter), zm the measurements
    const dod_sensor* sensor
    double* zm              # [D, dim] valid measurements (range, bearing[, elevation])
    double* hp              # [T, dim] predicted measurement of each track
    double* J               # [T, dim, dim] its Jacobian
    # deaths and births
    dod_table_removal rm    # hole, fill, slot: [T] each (dod.table's batch removal)
    int32_t* born           # [D] free detections in scan order (births of single-scan initiation)
    size_t nborn            # how many
    int32_t* birth_rank     # [D] a free detection's place in born (det_pairs' memory, D int32: dead by then)
    _cell_sort bm           # the births' spatial order (single-scan initiation)


cdef inline double _sum4(const double* v, size_t n, bint finite_test) noexcept nogil:
    """v[0] + ... + v[n - 1] as four interleaved sums (no chain of dependent
    adds) added at the end: the same bits on every call, and so for every
    thread count. With `finite_test`, the sum of v[i] - v[i] instead: 0 for
    a finite value and NaN otherwise, so 0 exactly when all are finite (one
    branch-free pass instead of a test and a branch per value)."""
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef size_t i = 0
    while i + 4 <= n:
        a0 += v[i] - v[i] if finite_test else v[i]
        a1 += v[i + 1] - v[i + 1] if finite_test else v[i + 1]
        a2 += v[i + 2] - v[i + 2] if finite_test else v[i + 2]
        a3 += v[i + 3] - v[i + 3] if finite_test else v[i + 3]
        i += 4
    while i < n:
        a0 += v[i] - v[i] if finite_test else v[i]
        i += 1
    return (a0 + a1) + (a2 + a3)


cdef inline bint _in_box(const double* x, const double* lo, const double* hi, int dim) noexcept nogil:
    """lo <= x <= hi on every axis (False where x is NaN)."""
    cdef int a
    for a in range(dim):
        if not (lo[a] <= x[a] <= hi[a]):
            return False
    return True


cdef inline bint _all_finite(const double* v, size_t n) noexcept nogil:
    """True when none of v[0:n] is NaN or infinite."""
    return _sum4(v, n, True) == 0.0


cdef inline void* _push(dod_arena* a, size_t n, size_t size, bint* ok) noexcept nogil:
    cdef void* p = dod_arena_push(a, n * size if n > 0 else 1, _ALIGN)
    if p == NULL:
        ok[0] = False
    return p


cdef inline void _try_pair(const dod_tracker* t, const _tick* k, _pairs* out, size_t ti, size_t j,
                           const double* zj, bint free_only, int dim) noexcept nogil:
    cdef int a
    cdef double y[3]
    cdef double d2
    if free_only and k.det_track[j] >= 0:
        return
    if k.sensor != NULL:            # range-bearing scan: innovation in measurement space
        if dim == 2:
            dod_meas_innovation(k.zm + j * 2, k.hp + ti * 2, 2, y)
        else:
            dod_meas_innovation(k.zm + j * 3, k.hp + ti * 3, 3, y)
    else:
        for a in range(dim):
            y[a] = zj[a] - t.cols.x[ti * t.n + a]
            if y[a] > k.hw[ti * dim + a] or y[a] < -k.hw[ti * dim + a]:
                return
    # constant dimension at each call site: gcc unrolls the inlined kernels
    if dim == 2:
        d2 = dod_kalman_mahalanobis2(y, k.Si + ti * 4, 2)
    else:
        d2 = dod_kalman_mahalanobis2(y, k.Si + ti * 9, 3)
    if not d2 <= t.gate:
        return
    if out.n >= out.cap:
        out.dropped += 1
        return
    out.pt[out.n] = <int32_t>ti
    out.pd[out.n] = <int32_t>j
    out.pc[out.n] = d2
    out.n += 1
    if out.count != NULL:
        out.count[j] = 1 + (out.count[j] != 0)


cdef void _gate_rows(const dod_tracker* t, const _tick* k, _pairs* dest, uint8_t stage,
                     size_t row0, size_t row1) noexcept nogil:
    """Gated pairs of the tracks in `stage` among rows [row0, row1) (and, for
    tentative, free detections: k.grid then holds only those,
    dod_grid_keep_free), appended to `dest` in row order."""
    # a constant dimension in each call: gcc unrolls every per-axis loop of
    # the inlined gate, box and walk (callgrind: 14 % fewer instructions)
    if t.dim == 2:
        _gate_rows_dim(t, k, dest, stage, row0, row1, 2)
    else:
        _gate_rows_dim(t, k, dest, stage, row0, row1, 3)


cdef inline void _gate_rows_dim(const dod_tracker* t, const _tick* k, _pairs* dest, uint8_t stage,
                                size_t row0, size_t row1, int dim) noexcept nogil:
    """_gate_rows in dimension dim. Works on a local copy of `dest` (the
    workers' segments sit side by side: counting in place would bounce
    their cache line between cores at every pair)."""
    cdef _pairs local = dest[0]
    cdef _pairs* out = &local
    cdef int a, mode
    cdef size_t ti, j, s
    cdef const dod_grid* g = &k.grid
    cdef dod_grid_walk w
    cdef double blo[3]
    cdef double bhi[3]
    cdef bint free_only = stage == DOD_TRACK_TENTATIVE
    cdef bint direct = g.direct        # a local: the test below stays out of memory
    for ti in range(row0, row1):
        if t.cols.state[ti] != stage or not k.gateable[ti]:
            continue
        for a in range(dim):
            blo[a] = t.cols.x[ti * t.n + a] - k.hw[ti * dim + a]
            bhi[a] = t.cols.x[ti * t.n + a] + k.hw[ti * dim + a]
        mode = dod_grid_walk_begin(g, blo, bhi, dim, k.D, &w)
        if mode == DOD_GRID_WALK_ALL:
            # A gate wider than the whole index: scanning every detection is cheaper.
            for j in range(k.D):
                _try_pair(t, k, out, ti, j, k.z + j * dim, free_only, dim)
        elif mode == DOD_GRID_WALK_CELLS:
            # (the tentative stage's index holds the free detections only: no test)
            while dod_grid_walk_next(g, &w):
                for s in range(w.s0, w.s1):
                    # A hashed bucket may hold other cells' points: keep this cell's only.
                    if direct or dod_grid_holds(g, s, w.cx, w.cy, w.cz):
                        _try_pair(t, k, out, ti, g.order[s], g.spos + s * dim, False, dim)
    dest[0] = local


cdef inline size_t _split_rows(const dod_tracker* t) noexcept nogil:
    """Rows' worth of work from which the tick's bookkeeping passes (the
    index's drop of the taken detections, the births' order, confirmed_first's
    swaps) run over the workers: two workers' parallel_min_rows, whatever
    the thread count. They split into _TAIL_CHUNKS parts, not chunks of
    parallel_min_rows rows as the row passes, and with more workers a
    serial pass keeps more of them waiting: counted against every worker's
    rows, at 100,000 targets on 16 threads (perf on the 2-core VM) the
    births' order and the swaps stayed serial, ~0.2 ms of the calling
    thread's time a tick, with 15 workers waiting."""
    return 2 * t.min_rows


cdef inline size_t _split_detections(const dod_tracker* t) noexcept nogil:
    """Detections from which the passes over the index (its drop of the
    taken ones, the births' order read off it) run in parts over the
    workers: _FREE_INDEX_MIN times _split_rows."""
    return _split_rows(t) * _FREE_INDEX_MIN


cdef inline void _chunk_rows(_tick* k, size_t T, int nt, size_t min_rows) noexcept nogil:
    """Cut rows [0, T) into k.row_chunks chunks of k.chunk_rows rows (at
    least min_rows, about _GATE_CHUNKS_PER_THREAD per worker, at most
    _GATE_CHUNKS chunks; past 64 rows a multiple of 64, so that a byte
    column's cache line never spans two chunks) for the parallel passes
    over the workers, and give worker w the w-th of nt contiguous ranges
    of them for the first pass (_claim_next). Once per tick, before any
    parallel region, so that no region's body can raise (a body that can,
    e.g. a checked division in the debug build, makes every worker take
    the GIL and a thread state at the region's start)."""
    cdef size_t ch
    cdef size_t nch = min(<size_t>_GATE_CHUNKS, <size_t>nt * _GATE_CHUNKS_PER_THREAD)
    k.chunk_rows = max(<size_t>1, max(min_rows, (T + nch - 1) // nch))
    if k.chunk_rows > 64:       # (smaller: only with parallel_min_rows < 64, e.g. the tests' small scenes)
        k.chunk_rows = (k.chunk_rows + 63) // 64 * 64
    k.row_chunks = (T + k.chunk_rows - 1) // k.chunk_rows
    for ch in range(k.row_chunks):      # the first pass's owners: contiguous ranges
        k.ran[ch] = <int32_t>(ch * <size_t>nt // k.row_chunks)


# Which worker runs which chunk. A parallel pass over the rows hands its
# chunks out by affinity: each worker first runs, in row order, the chunks
# it ran in the tick's previous pass (their rows are in its core's cache:
# predict wrote the state, covariance, inverse and gate that gating, the
# update and the deaths' moves touch next), then claims the others' from
# the far end, as dynamic scheduling would (a slow or preempted worker
# does not hold the pass up). Before the first pass of a tick, worker w
# "ran" the w-th of nt contiguous ranges of chunks (_chunk_rows).
# Scheduled dynamically, a chunk landed on whichever core was free: at
# 10,000 targets on two cores a two-thread tick took ~6 % longer (paired
# runs, builds alternating; issue 12). Which worker runs a chunk never
# changes a result: every pass writes by chunk, or sums integers.

cdef inline void _claims_again(_tick* k, size_t n) noexcept nogil:
    """Open a pass of n chunks, each owned by the worker that ran it last."""
    memcpy(k.owner, k.ran, n * sizeof(int32_t))
    memset(k.taken, 0, n * sizeof(uint32_t))


cdef inline Py_ssize_t _claim_next(_tick* k, size_t n, int w, size_t* own, size_t* far) noexcept nogil:
    """The next chunk for worker w (-1: none left): its own in order, then
    anyone's from the end. `own` and `far` are w's cursors, 0 at the start
    of the pass."""
    cdef size_t ch
    while own[0] < n:
        ch = own[0]
        own[0] += 1
        if k.owner[ch] == w and dod_atomic_load_u32(&k.taken[ch]) == 0 \
                and dod_atomic_exchange_u32(&k.taken[ch], 1) == 0:
            k.ran[ch] = w
            return <Py_ssize_t>ch
    while far[0] < n:
        ch = n - 1 - far[0]
        far[0] += 1
        if dod_atomic_load_u32(&k.taken[ch]) == 0 and dod_atomic_exchange_u32(&k.taken[ch], 1) == 0:
            k.ran[ch] = w
            return <Py_ssize_t>ch
    return -1


cdef void _gate_chunk(const dod_tracker* t, _tick* k, _pairs* seg, uint8_t stage, size_t ch) noexcept nogil:
    """Gate chunk ch of the rows (k.chunk_rows each) into this worker's
    segment `seg`, and note where its pairs went (k.chunk_at, k.chunk_n)."""
    cdef size_t r0 = ch * k.chunk_rows, r1 = min(k.T, r0 + k.chunk_rows), n0 = seg.n
    _gate_rows(t, k, seg, stage, r0, r1)
    k.chunk_at[ch] = <size_t>(seg.pt - k.pt) + n0
    k.chunk_n[ch] = seg.n - n0


cdef inline void _pairs_whole(_tick* k) noexcept nogil:
    """k.whole: the whole pair buffer, empty."""
    k.whole.pt = k.pt
    k.whole.pd = k.pd
    k.whole.pc = k.pc
    k.whole.n = 0
    k.whole.cap = k.pair_cap
    k.whole.dropped = 0
    k.whole.count = NULL


cdef inline void _pairs_segments(_tick* k, int nt) noexcept nogil:
    """k.seg[0:nt]: the pair buffer cut into nt equal segments, empty."""
    cdef int w
    cdef size_t at
    for w in range(nt):
        at = k.pair_cap * <size_t>w // <size_t>nt
        k.seg[w].pt = k.pt + at
        k.seg[w].pd = k.pd + at
        k.seg[w].pc = k.pc + at
        k.seg[w].n = 0
        k.seg[w].cap = k.pair_cap * <size_t>(w + 1) // <size_t>nt - at
        k.seg[w].dropped = 0
        k.seg[w].count = NULL


cdef void _gate_open(const dod_tracker* t, _tick* k) noexcept nogil:
    """Start a gating pass: the whole pair buffer (serial), or one segment
    of it per worker (threads, with enough rows).

    Where the association's lone pass runs serially (_lone_pairs), the
    pass also counts each detection's pairs as it writes them (stopping at
    two), each segment in its own quarter of det_pairs (a worker zeroes
    its own: _count_open), and the lone pass adds the quarters up instead
    of reading every pair again (Tracker.profile's association, builds
    alternating: 10,000 targets 161 against 166-172 us a tick at one
    thread, 112 against 117 at two; 100,000 2.34-2.46 against 2.63-2.66
    ms, 1.61-1.63 against 1.76-1.79)."""
    cdef int nt = t.threads, w
    k.npairs = 0
    k.pairs_dropped = 0
    k.chunks = 0
    _pairs_whole(k)
    k.gate_parallel = nt > 1 and k.T >= <size_t>nt * t.min_rows
    if k.gate_parallel:
        _pairs_segments(k, nt)
    # Not from _LONE_PARTS_MIN_DETECTIONS rows (where the lone pass may run
    # in parts, _lone_pairs_parts counts exactly, with atomics): at
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


cdef inline void _count_open(_tick* k, int w) noexcept nogil:
    """Worker w's pair counts zeroed, in a parallel gating pass that counts (_gate_open)."""
    if k.counted and k.gate_parallel:
        memset(k.seg[w].count, 0, k.count_stride)


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


cdef void _gate(dod_tracker* t, _tick* k, uint8_t stage) noexcept nogil:
    """All gated pairs of `stage` into k.pt/pd/pc, as k.chunks runs: run c
    is k.pt[chunk_at[c] : chunk_at[c] + chunk_n[c]], and the runs in order
    are the pairs in row order (what one serial pass writes; serially, one
    run from 0). k.npairs counts them all.

    Threads: the rows are cut into chunks (several per worker) that the
    workers take by affinity, then as they finish (_claim_next: the cost of
    a chunk varies with its tracks' stages and gate widths, and a worker
    preempted by another process should not hold up the others); each
    worker appends to its own segment of the pair buffer, and the run list
    gives the order back without moving a pair."""
    cdef size_t own, far
    cdef Py_ssize_t ch
    cdef int w
    cdef int64_t opened
    _gate_open(t, k)
    if k.D == 0:
        return
    if k.gate_parallel:
        _claims_again(k, k.row_chunks)
        opened = _region_open(t, t.threads)
        with parallel(num_threads=t.threads):
            w = threadid()
            _worker_in(t, w)
            _count_open(k, w)
            own = 0
            far = 0
            ch = _claim_next(k, k.row_chunks, w, &own, &far)
            while ch >= 0:
                _gate_chunk(t, k, &k.seg[w], stage, <size_t>ch)
                ch = _claim_next(k, k.row_chunks, w, &own, &far)
            _worker_out(t, w)
        _region_close(t, _PASS_ASSOCIATE, t.threads, opened)
    else:
        _gate_rows(t, k, &k.whole, stage, 0, k.T)
    _gate_close(t, k, stage)


cdef inline int32_t _find(int32_t* parent, int32_t i) noexcept nogil:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


# Union-find over the workers (_associate, with the lone pass's parts). A
# root is linked only under a smaller node, by a CAS that fails if another
# worker linked it first (then both ends are found again), so every path
# descends and each cluster's root is its smallest node, as serially,
# whatever the order of the unions. A node that is not a root only ever
# points to one of its ancestors, so path halving may write with a plain
# (atomic, relaxed) store: a stale write is still a path to the root.

cdef inline int32_t _find_shared(int32_t* parent, int32_t i) noexcept nogil:
    """_find while other workers link roots."""
    cdef int32_t p, g
    while True:
        p = dod_atomic_load_relaxed_i32(parent + i)
        if p == i:
            return i
        g = dod_atomic_load_relaxed_i32(parent + p)
        if g != p:
            dod_atomic_store_relaxed_i32(parent + i, g)
        i = g


cdef void _unite_part(_tick* k, const int32_t* nl, size_t i0, size_t i1) noexcept nogil:
    """Union of the pairs nl[i0:i1] (track node, detection node T + d)."""
    cdef size_t i
    cdef int32_t a, b
    for i in range(i0, i1):
        if i + _PAIRS_AHEAD < i1:        # (the detections' nodes are random)
            dod_prefetch(k.parent + k.T + k.pd[nl[i + _PAIRS_AHEAD]])
        a = k.pt[nl[i]]
        b = <int32_t>(k.T + k.pd[nl[i]])
        while True:
            a = _find_shared(k.parent, a)
            b = _find_shared(k.parent, b)
            if a == b:
                break
            if a < b:
                if dod_atomic_cas_i32(k.parent + b, b, a):
                    break
            elif dod_atomic_cas_i32(k.parent + a, a, b):
                break


cdef void _roots_part(_tick* k, const int32_t* nl, int32_t* cl, size_t i0, size_t i1) noexcept nogil:
    """The cluster root of each pair nl[i0:i1] into cl[i0:i1], once every union is done."""
    cdef size_t i
    for i in range(i0, i1):
        cl[i] = _find_shared(k.parent, k.pt[nl[i]])


# Grouping the clustered pairs by cluster in parts (_group_parts): the same
# cluster numbers and bounds as the serial counting sort in _associate, and
# each cluster's pairs in the same order once _solve_clusters has put them
# back into row order (_order_cluster). Serially, at 1,000,000 targets,
# the grouping took ~2.5 ms of the calling thread a tick (its reads of
# loc_t at the roots are random) while the workers waited.

cdef inline bint _opens_cluster(const _tick* k, const int32_t* nl, const int32_t* cl, size_t i) noexcept nogil:
    """Pair nl[i] is its cluster's first in row order: its track is the
    root (the cluster's smallest node: its first row) and this is that
    track's first pair (a track's pairs are consecutive)."""
    cdef int32_t tr = k.pt[nl[i]]
    return tr == cl[i] and (i == 0 or k.pt[nl[i - 1]] != tr)


cdef size_t _opened_in(const _tick* k, const int32_t* nl, const int32_t* cl, size_t i0, size_t i1) noexcept nogil:
    """The clusters whose first pair is among nl[i0:i1]."""
    cdef size_t i, n = 0
    for i in range(i0, i1):
        n += _opens_cluster(k, nl, cl, i)
    return n


cdef void _name_part(_tick* k, const int32_t* nl, const int32_t* cl, size_t i0, size_t i1,
                     size_t c) noexcept nogil:
    """Number the clusters opened among nl[i0:i1] from c on (their order of
    first pair): the number at the root (loc_t), the root at the number
    (parent, free now), the number's pair count 0."""
    cdef size_t i
    for i in range(i0, i1):
        if _opens_cluster(k, nl, cl, i):
            k.loc_t[cl[i]] = <int32_t>c
            k.parent[c] = cl[i]
            k.start[c + 1] = 0
            c += 1


cdef void _count_part(_tick* k, int32_t* cl, size_t i0, size_t i1) noexcept nogil:
    """Each pair's cluster number over its root in cl[i0:i1], counted in
    start[number + 1] (atomic adds: the counts are the same in any order)."""
    cdef size_t i
    cdef int32_t c
    for i in range(i0, i1):
        if i + _PAIRS_AHEAD < i1:        # (the roots are random rows)
            dod_prefetch(k.loc_t + cl[i + _PAIRS_AHEAD])
        c = k.loc_t[cl[i]]
        cl[i] = c
        dod_atomic_fetch_add_u32(<uint32_t*>(k.start + c + 1), 1)


cdef void _place_part(_tick* k, const int32_t* nl, const int32_t* cl, size_t i0, size_t i1) noexcept nogil:
    """Pairs nl[i0:i1] to the next places of their clusters (start[c] the
    cursor, taken atomically: which part's run comes first in a cluster
    varies, _order_cluster restores the row order)."""
    cdef size_t i
    cdef uint32_t s
    for i in range(i0, i1):
        s = dod_atomic_fetch_add_u32(<uint32_t*>(k.start + cl[i]), 1)
        k.porder[s] = nl[i]


cdef inline bint _pair_after(const _tick* k, int32_t a, int32_t b) noexcept nogil:
    """Pair a comes after pair b in row order: by track row, then pair (a
    track's pairs are consecutive and ascending)."""
    return k.pt[a] > k.pt[b] or (k.pt[a] == k.pt[b] and a > b)


cdef void _sift_down(_tick* k, int32_t* v, int32_t i, int32_t n) noexcept nogil:
    """Max-heap v[0:n] (by _pair_after), v[i] sifted down."""
    cdef int32_t c, p = v[i]
    while 2 * i + 1 < n:
        c = 2 * i + 1
        if c + 1 < n and _pair_after(k, v[c + 1], v[c]):
            c += 1
        if not _pair_after(k, v[c], p):
            break
        v[i] = v[c]
        i = c
    v[i] = p


cdef void _order_cluster(_tick* k, int32_t s0, int32_t s1) noexcept nogil:
    """porder[s0:s1] back into row order (_pair_after). Small clusters (most)
    by insertion, nearly sorted as they come; larger ones by heapsort (the
    parts' atomic places can interleave a large cluster pair by pair: an
    insertion sort would be quadratic)."""
    cdef int32_t s, u, p, n = s1 - s0
    cdef int32_t* v = k.porder + s0
    if n <= 32:
        for s in range(1, n):
            p = v[s]
            u = s
            while u > 0 and _pair_after(k, v[u - 1], p):
                v[u] = v[u - 1]
                u -= 1
            v[u] = p
        return
    s = n // 2
    while s > 0:
        s -= 1
        _sift_down(k, v, s, n)
    s = n
    while s > 1:
        s -= 1
        p = v[0]
        v[0] = v[s]
        v[s] = p
        _sift_down(k, v, 0, s)


cdef size_t _group_parts(_tick* k, const int32_t* nl, int32_t* cl, size_t m, const size_t* i_at,
                         int nt) noexcept nogil:
    """The grouping of _associate over the workers, in the _TAIL_CHUNKS
    parts i_at of the m clustered pairs: number the clusters (a count, a
    prefix, then each part its own), count each one's pairs, prefix the
    counts (serially: one pass over the clusters), place the pairs and
    reset loc_t. Returns the clusters."""
    cdef size_t ch, ncl = 0, c
    cdef size_t opened[_TAIL_CHUNKS]
    cdef size_t c_at[_TAIL_CHUNKS + 1]
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        opened[ch] = _opened_in(k, nl, cl, i_at[ch], i_at[ch + 1])
    for ch in range(_TAIL_CHUNKS):      # counts to first numbers
        c = opened[ch]
        opened[ch] = ncl
        ncl += c
    k.start[0] = 0
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        _name_part(k, nl, cl, i_at[ch], i_at[ch + 1], opened[ch])
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        _count_part(k, cl, i_at[ch], i_at[ch + 1])
    for c in range(ncl):
        k.start[c + 1] += k.start[c]
    for ch in range(_TAIL_CHUNKS + 1):
        c_at[ch] = ch * ncl // _TAIL_CHUNKS
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        _place_part(k, nl, cl, i_at[ch], i_at[ch + 1])
        for c in range(c_at[ch], c_at[ch + 1]):
            k.loc_t[k.parent[c]] = -1
    k.cluster_runs = True
    return ncl


cdef void _solve_greedy(_tick* k, int32_t s0, int32_t s1) noexcept nogil:
    """Fallback when a cluster's cost matrix does not fit scratch: repeatedly
    take the cheapest pair whose track and detection are both free."""
    cdef int32_t s, best, p
    cdef double bc
    while True:
        best = -1
        bc = INFINITY
        for s in range(s0, s1):
            p = k.porder[s]
            if k.track_det[k.pt[p]] < 0 and k.det_track[k.pd[p]] < 0 and k.pc[p] < bc:
                bc = k.pc[p]
                best = p
        if best < 0:
            return
        k.track_det[k.pt[best]] = k.pd[best]
        k.det_track[k.pd[best]] = k.pt[best]


cdef int _solve_cluster(const dod_tracker* t, _tick* k, int32_t s0, int32_t s1,
                        dod_arena* scratch) noexcept nogil:
    """Exact assignment of one cluster (pairs porder[s0:s1]: two or more, a
    lone pair is assigned by _associate); returns 1 when it was solved
    greedily, else 0.

    Writes only entries of its own tracks and detections (track_det,
    det_track, loc_t, loc_d) and glob_t/glob_d[s0:s1] (a cluster of m pairs
    has at most m tracks and m detections), and takes its matrix from
    `scratch`: clusters are solved at once by several workers, each with its
    own arena, and the result does not depend on which worker solves which."""
    cdef int32_t s, p, nt = 0, nd = 0, i, nr, nc
    cdef int32_t* glob_t = k.glob_t + s0
    cdef int32_t* glob_d = k.glob_d + s0
    cdef size_t mark
    cdef double* cost
    cdef uint8_t* gated
    cdef int* col4row
    cdef bint rows_are_tracks, ok = True
    cdef int rc
    for s in range(s0, s1):
        p = k.porder[s]
        if k.loc_t[k.pt[p]] < 0:
            k.loc_t[k.pt[p]] = nt
            glob_t[nt] = k.pt[p]
            nt += 1
        if k.loc_d[k.pd[p]] < 0:
            k.loc_d[k.pd[p]] = nd
            glob_d[nd] = k.pd[p]
            nd += 1
    rows_are_tracks = nt <= nd
    nr = nt if rows_are_tracks else nd
    nc = nd if rows_are_tracks else nt
    mark = dod_arena_mark(scratch)
    # One budget for every thread count: a matrix that does not fit in
    # _CLUSTER_BYTES goes greedy whichever arena (the tick's, a worker's)
    # would hold it, so the thread count never changes an assignment.
    if <size_t>nr * nc * 9 + <size_t>nr * 13 + <size_t>nc * 29 + 1024 > _CLUSTER_BYTES:
        ok = False
    cost = NULL
    gated = NULL
    col4row = NULL
    if ok:
        cost = <double*>_push(scratch, <size_t>nr * nc, sizeof(double), &ok)
        gated = <uint8_t*>_push(scratch, <size_t>nr * nc, 1, &ok)
        col4row = <int*>_push(scratch, nr, sizeof(int), &ok)
    rc = -1
    if ok and (t.max_cluster == 0 or <uint32_t>nc <= t.max_cluster):
        memset(cost, 0, <size_t>nr * nc * sizeof(double))
        memset(gated, 0, <size_t>nr * nc)
        for s in range(s0, s1):
            p = k.porder[s]
            if rows_are_tracks:
                i = k.loc_t[k.pt[p]] * nc + k.loc_d[k.pd[p]]
            else:
                i = k.loc_d[k.pd[p]] * nc + k.loc_t[k.pt[p]]
            cost[i] = k.pc[p] - t.gate
            gated[i] = 1
        rc = dod_assignment_solve(nr, nc, cost, col4row, scratch)
    if rc == 0:
        for i in range(nr):
            if gated[i * nc + col4row[i]]:
                if rows_are_tracks:
                    k.track_det[glob_t[i]] = glob_d[col4row[i]]
                    k.det_track[glob_d[col4row[i]]] = glob_t[i]
                else:
                    k.track_det[glob_t[col4row[i]]] = glob_d[i]
                    k.det_track[glob_d[i]] = glob_t[col4row[i]]
    else:
        _solve_greedy(k, s0, s1)
    dod_arena_rewind(scratch, mark)
    for i in range(nt):
        k.loc_t[glob_t[i]] = -1
    for i in range(nd):
        k.loc_d[glob_d[i]] = -1
    return 0 if rc == 0 else 1


cdef size_t _solve_clusters(const dod_tracker* t, _tick* k, size_t c0, size_t c1, dod_arena* scratch) noexcept nogil:
    """Solve clusters [c0, c1): cluster c holds pairs porder[start[c-1] :
    start[c]] (start[-1] = 0). Returns the number solved greedily."""
    cdef size_t c, greedy = 0
    cdef int32_t s, p
    for c in range(c0, c1):
        # A cluster's tracks and detections are random rows of the
        # per-track and per-detection arrays: a few misses, one after
        # the other, per cluster. Fetched _CLUSTERS_AHEAD clusters ahead,
        # the solve of 100,000 targets' confirmed clusters took ~0.8
        # against ~1.5 ms (1 thread), as at 10,000 otherwise.
        if c + _CLUSTERS_AHEAD < c1:
            for s in range(k.start[c + _CLUSTERS_AHEAD - 1], k.start[c + _CLUSTERS_AHEAD]):
                p = k.porder[s]
                dod_prefetch(k.loc_d + k.pd[p])
                dod_prefetch(k.det_track + k.pd[p])
                dod_prefetch(k.loc_t + k.pt[p])
                dod_prefetch(k.track_det + k.pt[p])
                dod_prefetch(k.pc + p)
        if k.cluster_runs:
            _order_cluster(k, k.start[c - 1] if c > 0 else 0, k.start[c])
        greedy += <size_t>_solve_cluster(t, k, k.start[c - 1] if c > 0 else 0, k.start[c], scratch)
    return greedy


ctypedef fused _pair_count:       # a detection's pairs: bytes that stop at two, or exact (atomic)
    uint8_t
    uint32_t


cdef size_t _lone_run(_tick* k, const _pair_count* count, size_t ch, int32_t* out,
                      size_t* m_out) noexcept nogil:
    """Run ch of the pairs (a gating chunk: all of a track's pairs sit in
    one): assign its lone pairs (count 1, and their track in no other
    pair), list the others in order in `out` (their number in m_out), their
    tracks' union-find nodes made roots. Returns the lone pairs."""
    cdef size_t p, p0 = k.chunk_at[ch], p1 = p0 + k.chunk_n[ch], lone = 0, m = 0
    for p in range(p0, p1):
        # (the pairs' detections are random: fetched _PAIRS_AHEAD pairs
        # ahead, the pass took ~20 % less at 100,000 targets, ~0.2 ms)
        if p + _PAIRS_AHEAD < p1:
            dod_prefetch(count + k.pd[p + _PAIRS_AHEAD])
            dod_prefetch(k.det_track + k.pd[p + _PAIRS_AHEAD])
        if (count[k.pd[p]] == 1 and (p == p0 or k.pt[p - 1] != k.pt[p])
                and (p + 1 == p1 or k.pt[p + 1] != k.pt[p])):
            k.track_det[k.pt[p]] = k.pd[p]
            k.det_track[k.pd[p]] = k.pt[p]
            lone += 1
            continue
        out[m] = <int32_t>p
        m += 1
        k.parent[k.pt[p]] = k.pt[p]
    m_out[0] = m
    return lone


cdef void _add_counts(uint8_t* acc, const uint8_t* more, size_t n) noexcept nogil:
    """acc[i] += more[i], stopping at two (a loop gcc vectorizes)."""
    cdef size_t i
    cdef uint8_t c
    for i in range(n):
        c = acc[i] + more[i]
        acc[i] = c if c < 2 else 2


cdef size_t _lone_pairs(_tick* k, int32_t* nl, size_t* m_out, int nt) noexcept nogil:
    """Assign the lone pairs (_associate); list the others in row order in
    nl (their number in m_out) with their tracks' union-find nodes made
    roots, and every detection's node a root. Returns the lone pairs."""
    cdef size_t p, ch, i, T = k.T, lone = 0, m = 0, run_m
    cdef int w
    # The counts stop at two (a byte each, a quarter of the memory of int32
    # counts), and every detection's node is made a root in order (not the
    # nodes of the pairs not lone, one random write each): at 1,000,000
    # targets the two passes took ~17 against ~21-23 ms (2 threads, ticks
    # alternating in one process), at 100,000 0-19 % less (~0.8-1.0 ms).
    if not k.counted:
        memset(k.det_pairs, 0, k.D)
        for ch in range(k.chunks):
            for p in range(k.chunk_at[ch], k.chunk_at[ch] + k.chunk_n[ch]):
                k.det_pairs[k.pd[p]] = 1 + (k.det_pairs[k.pd[p]] != 0)
    elif k.gate_parallel:           # the workers' counts (_gate_open) added up, stopping at two
        for w in range(1, nt):
            _add_counts(k.det_pairs, k.det_pairs + <size_t>w * k.count_stride, k.D)
    for i in range(k.D):
        k.parent[T + i] = <int32_t>(T + i)
    # The other pairs (in row order) into nl: union-find and the grouping
    # walk these alone, not every pair (at 100,000 targets at most 27 % of
    # the pairs: 98,650 pairs in 85,426 clusters, and every cluster that
    # is not a lone pair has two or more).
    for ch in range(k.chunks):
        lone += _lone_run(k, <const uint8_t*>k.det_pairs, ch, nl + m, &run_m)
        m += run_m
    m_out[0] = m
    return lone


cdef size_t _lone_pairs_parts(_tick* k, int32_t* nl, size_t* m_out, int nt) noexcept nogil:
    """_lone_pairs over the workers (from _LONE_PARTS_MIN_THREADS threads or
    _LONE_PARTS_MIN_DETECTIONS detections): the same assignments, the same
    nl in the same order, the same roots. The detections' counts are exact
    (atomic adds to int32: det_pairs' memory holds D of them); each run of
    pairs then assigns its lone pairs (no other pair shares their track or
    detection, so no two workers write one entry) and lists its other
    pairs at its own place in porder (free until the grouping), and the
    lists are packed in run order. Serially, at 1,000,000 targets, these passes took ~18 ms of a
    two-thread tick, most of its serial part: 16 workers would wait on
    them. (At 100,000 targets on two cores the split costs more than it
    saves: docs/threads-and-locality.md.)"""
    cdef uint32_t* count = <uint32_t*>k.det_pairs
    cdef size_t P = min(<size_t>nt, <size_t>_GRID_PARTS), T = k.T, D = k.D, part, i, ch, p
    cdef size_t lone = 0
    cdef size_t d_at[_GRID_PARTS + 1]
    cdef size_t run_m[_GATE_CHUNKS]
    cdef size_t run_lone[_GATE_CHUNKS]
    cdef size_t run_at[_GATE_CHUNKS + 1]
    for part in range(P + 1):       # (no division in a region's body: see _keep_free)
        d_at[part] = D * part // P
    for part in prange(P, num_threads=nt, schedule="static"):
        memset(count + d_at[part], 0, (d_at[part + 1] - d_at[part]) * sizeof(uint32_t))
        for i in range(d_at[part], d_at[part + 1]):
            k.parent[T + i] = <int32_t>(T + i)
    for ch in prange(k.chunks, num_threads=nt, schedule="dynamic"):
        for p in range(k.chunk_at[ch], k.chunk_at[ch] + k.chunk_n[ch]):
            dod_atomic_fetch_add_u32(count + k.pd[p], 1)
    for ch in prange(k.chunks, num_threads=nt, schedule="dynamic"):
        run_lone[ch] = _lone_run(k, <const uint32_t*>count, ch, k.porder + k.chunk_at[ch], &run_m[ch])
    run_at[0] = 0
    for ch in range(k.chunks):
        run_at[ch + 1] = run_at[ch] + run_m[ch]
        lone += run_lone[ch]
    for ch in prange(k.chunks, num_threads=nt, schedule="dynamic"):
        memcpy(nl + run_at[ch], k.porder + k.chunk_at[ch], run_m[ch] * sizeof(int32_t))
    m_out[0] = run_at[k.chunks]
    return lone


cdef void _associate(dod_tracker* t, _tick* k, dod_tick_counts* cnt, uint8_t stage,
                     dod_arena* scratch, bint gated) noexcept nogil:
    """One stage: gate (unless `gated`: the pairs are in the buffer, from the
    fused predict pass), split the pairs into clusters (union-find), solve each.

    Lone pairs are assigned at once; union-find of the other pairs runs
    over the workers where the lone pass does (many threads or
    detections), their grouping is serial (a few passes over the pairs);
    with threads the clusters, which share no track and no detection, are
    solved in parallel, each worker with its own arena."""
    cdef size_t T = k.T, greedy = 0, chunks, ch, lone = 0, m = 0, i, ncl = 0, csize
    cdef int32_t a, b, r, acc, c
    cdef int32_t* nl = k.glob_t         # the pairs not lone (glob_t/glob_d are the solver's, after this)
    cdef int32_t* cl = k.glob_d         # their cluster roots, then cluster ids
    cdef int nt = t.threads
    cdef bint wide
    cdef size_t i_at[_TAIL_CHUNKS + 1]
    if not gated:
        _gate(t, k, stage)
    cnt.pairs += k.npairs
    cnt.pairs_dropped += k.pairs_dropped
    if k.npairs == 0:
        return
    # A lone pair (its track and its detection in no other pair: most
    # clusters of a sparse scene) is a cluster of its own whatever the other
    # pairs are, and its solution is the pair: assigned here, it stays out
    # of union-find and the grouping, which then find the same clusters as
    # over all pairs. A track's pairs are consecutive (gated row by row);
    # the detections' pair counts take one pass (_lone_pairs; with many
    # threads or detections over the workers, _lone_pairs_parts).
    wide = nt > 1 and (nt >= _LONE_PARTS_MIN_THREADS or k.D >= _LONE_PARTS_MIN_DETECTIONS) \
        and T >= <size_t>nt * t.min_rows
    if wide:
        lone = _lone_pairs_parts(k, nl, &m, nt)
    else:
        lone = _lone_pairs(k, nl, &m, nt)
    cnt.clusters += lone
    if lone > 0 and cnt.largest_cluster < 1:
        cnt.largest_cluster = 1
    if m == 0:
        return
    # The root of a cluster is its smallest node (the larger root goes
    # under the smaller), whatever the order of the unions: a track row.
    # Where the lone pass ran in parts, so do the unions and the roots
    # (_unite_part: serially they took ~5 ms of a two-thread tick at
    # 1,000,000 targets).
    if wide:
        for ch in range(_TAIL_CHUNKS + 1):      # (no division in a region's body: see _keep_free)
            i_at[ch] = ch * m // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _unite_part(k, nl, i_at[ch], i_at[ch + 1])
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _roots_part(k, nl, cl, i_at[ch], i_at[ch + 1])
    else:
        for i in range(m):
            if i + _PAIRS_AHEAD < m:        # (the detections' nodes are random)
                dod_prefetch(k.parent + T + k.pd[nl[i + _PAIRS_AHEAD]])
            a = _find(k.parent, k.pt[nl[i]])
            b = _find(k.parent, <int32_t>(T + k.pd[nl[i]]))
            if a != b:
                if a < b:
                    k.parent[b] = a
                else:
                    k.parent[a] = b
        for i in range(m):
            cl[i] = _find(k.parent, k.pt[nl[i]])
    # Group them by cluster (counting sort), pairs in row order within a
    # cluster: cluster ids in order of first pair, through loc_t (all -1
    # between clusters; the roots are noted in parent, free now, to reset it).
    # With many clustered pairs, where union-find ran in parts, so does this
    # (_group_parts: the same clusters). (~18 % of the pairs are clustered
    # in the bench's scenes: ~1,600 at 10,000 targets, where the parts'
    # regions would cost more than they save, ~18,000 at 100,000.)
    k.cluster_runs = False
    if wide and m >= <size_t>_GROUP_PARTS_MIN * t.min_rows:
        ncl = _group_parts(k, nl, cl, m, i_at, nt)
    else:
        for i in range(m):
            r = cl[i]
            c = k.loc_t[r]
            if c < 0:
                c = <int32_t>ncl
                k.loc_t[r] = c
                k.parent[ncl] = r
                k.start[ncl + 1] = 0
                ncl += 1
            cl[i] = c
            k.start[c + 1] += 1
        k.start[0] = 0
        for c in range(<int32_t>ncl):
            k.start[c + 1] += k.start[c]
            k.loc_t[k.parent[c]] = -1
        for i in range(m):          # start[c] as the cursor: it ends at cluster c's end
            k.porder[k.start[cl[i]]] = nl[i]
            k.start[cl[i]] += 1
    acc = 0
    for c in range(<int32_t>ncl):
        if <size_t>(k.start[c] - acc) > cnt.largest_cluster:
            cnt.largest_cluster = <size_t>(k.start[c] - acc)
        acc = k.start[c]
    cnt.clusters += ncl
    # Clusters share no track and no detection: in any order, on any worker,
    # in chunks of at most _CLUSTER_CHUNK clusters and about _CLUSTER_CHUNKS_PER_THREAD
    # a worker; serially below _SOLVE_PARTS_MIN * parallel_min_rows clusters.
    if nt > 1 and T >= <size_t>nt * t.min_rows and ncl >= <size_t>_SOLVE_PARTS_MIN * t.min_rows:
        csize = min(<size_t>_CLUSTER_CHUNK, max(<size_t>1, ncl // (<size_t>nt * _CLUSTER_CHUNKS_PER_THREAD)))
        chunks = (ncl + csize - 1) // csize
        for ch in prange(chunks, num_threads=nt, schedule="dynamic"):
            greedy += _solve_clusters(t, k, ch * csize, min(ncl, (ch + 1) * csize), t.workers[threadid()])
    else:
        greedy = _solve_clusters(t, k, 0, ncl, scratch)
    cnt.greedy_clusters += greedy


# ---------------------------------------------------------------- row passes of the tick (chunks over the workers)

cdef inline void _index_buckets(_tick* k) noexcept nogil:
    """The index's bucket count for the scan's k.D valid detections."""
    cdef size_t nb = 1
    while nb < 2 * k.D:
        nb <<= 1
    k.grid.nb = nb


cdef void _dets_ready(_tick* k) noexcept nogil:
    """k.z[0:D] filled: no detection assigned yet (det_track, loc_d: -1,
    all bytes 0xff). The index gets the buckets of the valid detections
    (its array holds those of the whole scan): a scan's invalid rows change
    neither the index nor the births' rows, which follow its cells."""
    memset(k.det_track, 0xff, k.D * sizeof(int32_t))
    memset(k.loc_d, 0xff, k.D * sizeof(int32_t))
    _index_buckets(k)


cdef size_t _finite_rows(const double* dets, int dim, size_t j0, size_t j1, double* out) noexcept nogil:
    """Copy the finite rows of dets[j0:j1] to `out`, in order; returns how
    many. (NULL `out`: count them only.) All finite, the common case: one
    test and one copy."""
    cdef size_t j, n = 0
    cdef int a
    if _all_finite(dets + j0 * dim, (j1 - j0) * dim):
        if out != NULL:
            memcpy(out, dets + j0 * dim, (j1 - j0) * dim * sizeof(double))
        return j1 - j0
    for j in range(j0, j1):
        if _all_finite(dets + j * dim, dim):
            if out != NULL:
                for a in range(dim):
                    out[n * dim + a] = dets[j * dim + a]
            n += 1
    return n


cdef void _take_dets(_tick* k, const double* dets, size_t n_dets, int dim) noexcept nogil:
    """A Cartesian scan into k.z and k.D: one copy when every value is
    finite (the common case), else its finite rows in order, the others
    counted in k.invalid; then no detection assigned yet (_dets_ready)."""
    k.D = _finite_rows(dets, dim, 0, n_dets, k.z)
    k.invalid += n_dets - k.D
    _dets_ready(k)


cdef void _take_dets_parts(_tick* k, const double* dets, size_t n_dets, int dim, int nt) noexcept nogil:
    """_take_dets over the workers, before the index is built in parts
    (_index_parts): P row parts count their finite rows, then copy them to
    their place (the counts' prefix) and mark them unassigned. The same
    k.z, k.D and k.invalid as _take_dets: at a million targets the scan
    (~16 MB read and written) would take one core several ms while the
    others wait."""
    cdef size_t P = min(<size_t>nt, <size_t>_GRID_PARTS), p
    cdef size_t j_at[_GRID_PARTS + 1]
    cdef size_t at[_GRID_PARTS + 1]
    cdef size_t valid[_GRID_PARTS]
    if n_dets < P:
        _take_dets(k, dets, n_dets, dim)
        return
    for p in range(P + 1):          # (no division in a region's body: see _keep_free)
        j_at[p] = n_dets * p // P
    for p in prange(P, num_threads=nt, schedule="static"):
        valid[p] = _finite_rows(dets, dim, j_at[p], j_at[p + 1], NULL)
    at[0] = 0
    for p in range(P):
        at[p + 1] = at[p] + valid[p]
    k.D = at[P]
    k.invalid = n_dets - k.D
    for p in prange(P, num_threads=nt, schedule="static"):
        if valid[p] == j_at[p + 1] - j_at[p]:       # all finite: checked already
            memcpy(k.z + at[p] * dim, dets + j_at[p] * dim, valid[p] * dim * sizeof(double))
        else:
            _finite_rows(dets, dim, j_at[p], j_at[p + 1], k.z + at[p] * dim)
        memset(k.det_track + at[p], 0xff, valid[p] * sizeof(int32_t))
        memset(k.loc_d + at[p], 0xff, valid[p] * sizeof(int32_t))
    _index_buckets(k)


cdef void _index_if(_tick* k, int dim, bint build) noexcept nogil:
    """Build the detection grid (k.grid.h set) when `build`."""
    if build:
        dod_grid_build(&k.grid, k.z, k.D, dim)


cdef void _index_parts(_tick* k, int dim, int nt) noexcept nogil:
    """Build the detection grid (k.grid.h set) over the workers, in
    P = min(nt, _GRID_PARTS) parts (grid.pxd: the direct build in parts):
    the index of dod_grid_build, slot for slot. A hashed or crowded grid is
    built serially."""
    cdef dod_grid* g = &k.grid
    cdef size_t P = min(<size_t>nt, <size_t>_GRID_PARTS), n = k.D, p, cells, r
    cdef double h0 = g.h
    cdef uint64_t mul, crowd = 0
    cdef int a
    cdef size_t j_at[_GRID_PARTS + 1]
    cdef size_t at[_GRID_PARTS + 1]
    cdef size_t hist[_GRID_PARTS * _GRID_PARTS]   # points of each point part in each bucket range
    cdef uint64_t crowd_of[_GRID_PARTS]
    cdef double lo[_GRID_PARTS][3]
    cdef double hi[_GRID_PARTS][3]
    if n < P:
        dod_grid_build(g, k.z, n, dim)
        return
    for p in range(P + 1):          # (no division in a region's body: see _keep_free)
        j_at[p] = n * p // P
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_bounds(k.z, dim, j_at[p], j_at[p + 1], lo[p], hi[p])
    for p in range(1, P):
        for a in range(dim):
            lo[0][a] = min(lo[0][a], lo[p][a])
            hi[0][a] = max(hi[0][a], hi[p][a])
    g.direct = False
    cells = dod_grid_plan(g, lo[0], hi[0], n, dim)
    if cells == 0:
        dod_grid_build_hashed(g, k.z, n, dim)
        return
    mul = dod_grid_parts(cells, P)
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_cells_part(g, k.z, dim, j_at[p], j_at[p + 1], mul, P, hist + p * P)
    dod_grid_route_offsets(hist, P, at)
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_route_part(g, j_at[p], j_at[p + 1], mul, P, hist + p * P)
    for r in prange(P, num_threads=nt, schedule="static"):
        crowd_of[r] = dod_grid_count_part(g, r, mul, cells, at[r], at[r + 1])
    for r in range(P):
        crowd += crowd_of[r]
    if not dod_grid_uncrowded(crowd, n):
        g.h = h0
        dod_grid_build_hashed(g, k.z, n, dim)
        return
    for r in prange(P, num_threads=nt, schedule="static"):
        dod_grid_fill_part(g, k.z, dim, r, mul, cells, at[r], at[r + 1])
    dod_grid_direct_done(g, cells)


cdef void _predict_rows(const dod_tracker* t, _tick* k, double dt, size_t row0, size_t row1) noexcept nogil:
    """Predict rows [row0, row1); their innovation inverses, gate half-widths
    and widest half-width (hm: 0 for a track that cannot be gated). Writes
    only these rows' entries."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = t.dim, n = t.n, pn = dod_kalman_packed_size(t.n), a
    cdef int diag[3]                # where P[a, a] lies in a packed row
    cdef double r2 = t.r * t.r, hmax, v
    cdef size_t ti
    cdef dod_kalman_noise w = dod_kalman_noise_of(dt, t.q)     # once, not per row
    for a in range(dim):
        diag[a] = dod_kalman_packed_index(a, a, n)
    for ti in range(row0, row1):
        if t.imm.models:            # mix, predict each model, combine into x, P (constant d: unrolled)
            if dim == 2:
                dod_imm_predict(&t.imm, ti, c.x + ti * 4, c.P + ti * 10, 2, dt)
            else:
                dod_imm_predict(&t.imm, ti, c.x + ti * 6, c.P + ti * 21, 3, dt)
        elif dim == 2:
            dod_kalman_predict_step(c.x + ti * 4, c.P + ti * 10, 2, &w)
        else:
            dod_kalman_predict_step(c.x + ti * 6, c.P + ti * 21, 3, &w)
        c.age[ti] += 1
        k.track_det[ti] = -1
        k.loc_t[ti] = -1
        if k.sensor != NULL:        # constant dimensions: gcc unrolls the inlined kernels
            if dim == 2:
                _polar_gate_row(t, k, ti, 2)
            else:
                _polar_gate_row(t, k, ti, 3)
            continue
        if dim == 2:
            k.gateable[ti] = dod_kalman_innovation_inverse(c.P + ti * 10, 2, r2, k.Si + ti * 4)
        else:
            k.gateable[ti] = dod_kalman_innovation_inverse(c.P + ti * 21, 3, r2, k.Si + ti * 9)
        hmax = 0.0
        for a in range(dim):
            # |y_a| <= sqrt(gate * S_aa) bounds the ellipse d2 <= gate.
            v = sqrt(t.gate * (c.P[ti * pn + diag[a]] + r2))
            k.hw[ti * dim + a] = v
            if v > hmax:
                hmax = v
        k.hm[ti] = hmax if k.gateable[ti] else 0.0


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
    none is left out). In a second region instead (the first one's last
    chunk kept the other worker waiting, then both started the second), at
    10,000 targets on two threads, ~24 of 35 chunks predicted early, the
    pass took 299-301 against 294 us a tick, the workers idle in it ~36
    against ~25 us (100,000: 215-266 against ~100 us idle)."""
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
            # both ascending, the workers took every other chunk, and at
            # 1,000,000 targets the pass took ~54 against ~48-50 ms)
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


cdef inline void _polar_gate_row(const dod_tracker* t, _tick* k, size_t ti, int dim) noexcept nogil:
    """Range-bearing scan: predicted measurement, Jacobian, innovation
    inverse of row ti, and the half-widths of a Cartesian box holding its
    gate (the grid's box: dod_meas_gate_box). A track in the
    sensor's singular zone, or with S not positive definite, is not gated."""
    cdef int n = 2 * dim, a, b
    cdef double S[9]
    cdef double Ppos[9]
    cdef const double* P = t.cols.P + ti * dod_kalman_packed_size(n)
    cdef double rad = 0.0
    cdef bint ok
    ok = dod_meas_predict(t.cols.x + ti * n, k.sensor, dim, k.hp + ti * dim, k.J + ti * dim * dim)
    if ok:
        for a in range(dim):        # the position block, full (the EKF's kernels read P full)
            for b in range(dim):
                Ppos[a * dim + b] = P[dod_kalman_packed_index(a, b, n)]
        dod_meas_innovation_cov(Ppos, dim, dim, k.J + ti * dim * dim, k.sensor.var, S)
        ok = dod_kalman_inverse_spd(S, dim, k.Si + ti * dim * dim)
    if ok:
        rad = dod_meas_gate_box(k.hp + ti * dim, k.J + ti * dim * dim, S, dim, t.gate, k.sensor,
                                k.hw + ti * dim)
    else:
        for a in range(dim):
            k.hw[ti * dim + a] = 0.0
    k.gateable[ti] = ok
    k.hm[ti] = rad


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


cdef void _update_manage_chunk(const dod_tracker* t, _tick* k, size_t ch, size_t* assoc,
                               size_t* confirmed, size_t* mixed, size_t* unplaced) noexcept nogil:
    """Update and manage chunk ch of the rows (k.chunk_rows each); adds its
    associations, confirmed, mixed and unplaced rows (_manage_rows) to this worker's sums, and lists its
    rows to go (k.dead_n[ch] of them, at k.rm.fill + its first row: the
    removal plan's first pass, while the states are in this core's cache;
    serially, at 1,000,000 targets, it read them back from memory)."""
    cdef size_t r0 = ch * k.chunk_rows, r1 = min(k.T, r0 + k.chunk_rows), conf, mix, unpl
    if t.score_logic:
        _score_rows(t, k, r0, r1)
    _update_rows(t, k, r0, r1)
    assoc[0] += _manage_rows(t, k, r0, r1, &conf, &mix, &unpl)
    confirmed[0] += conf
    mixed[0] += mix
    unplaced[0] += unpl
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


cdef void _swap_pairs(dod_table* tab, const dod_index* a, const dod_index* b, size_t i0, size_t i1) noexcept nogil:
    cdef size_t i
    for i in range(i0, i1):
        dod_table_swap_rows(tab, a[i], b[i])


cdef size_t _confirmed_first(dod_tracker* t, _tick* k, size_t m, size_t q, size_t C, bint par,
                             size_t* mixed, size_t* unplaced) noexcept nogil:
    """confirmed_first: after management, put the C confirmed tracks in rows
    [0, C). In: the rows to go in k.rm.fill[0:m] and the confirmed rows at
    or past k.front in k.rm.hole[0:q], each ascending (the removal's list,
    _confirmed_past). The rows below C holding no confirmed track (the
    front's dead rows, and past the front whatever is not confirmed) pair
    with the confirmed rows at or past C (the front's last ones when it
    shrank, and the tick's confirmations), both in row order, and each pair
    swaps (dod_table_swap_rows: handles kept). Then the rows to go are all
    at or past C: the list is rewritten (k.rm.fill, ascending) and its
    length returned, for dod_table_removal_walk, whose moves fill them from
    the table's end and never touch rows below C.

    Rows [0, k.front) held confirmed tracks when the tick began (this does
    it every tick, and a sort puts them first), so both sides count the
    same; should they not (a caller wrote the state column), the shorter
    side's pairs are made and the rest left to the mixing trigger.
    A row below t.ordered_rows that takes a track counts once as displaced
    (sort_when_displaced); `mixed` and `unplaced` (counted by management)
    lose the rows this settles. The same swaps at every thread count:
    over the workers with `par` and enough of them."""
    cdef dod_table* tab = t.table
    cdef const uint8_t* state = t.cols.state
    cdef size_t front = k.front, low = min(front, C), nx = 0, ny, i, j, w, p, pairs, r, ch
    cdef dod_index* X = k.rm.slot           # (free until the walk)
    cdef dod_index* Y = k.rm.hole
    cdef dod_index* fill = k.rm.fill
    cdef size_t i_at[_TAIL_CHUNKS + 1]
    cdef int nt = t.threads
    # X: rows below C without a confirmed track, ascending: the rows to go
    # below the front, then whatever is not confirmed in [front, C).
    for i in range(m):
        if fill[i] >= low:
            break
        X[nx] = fill[i]
        nx += 1
    for r in range(front, C):
        X[nx] = <dod_index>r
        nx += state[r] != DOD_TRACK_CONFIRMED
    # Y: confirmed rows at or past C, ascending: those in [C, front), then
    # the listed ones (all at or past the front) from C on.
    ny = 0
    if C < front:
        for r in range(C, front):
            ny += state[r] == DOD_TRACK_CONFIRMED
        if ny > 0:
            memmove(Y + ny, Y, q * sizeof(dod_index))
            j = 0
            for r in range(C, front):   # (a branch: a store past the last would land on the list)
                if state[r] == DOD_TRACK_CONFIRMED:
                    Y[j] = <dod_index>r
                    j += 1
        ny += q
    else:
        j = 0
        while j < q and Y[j] < C:
            j += 1
        ny = q - j
        if j > 0 and ny > 0:
            memmove(Y, Y + j, ny * sizeof(dod_index))
    pairs = min(nx, ny)
    if pairs == 0:
        return m
    for p in range(pairs):
        if X[p] < k.front:
            mixed[0] -= 1
        if X[p] < k.ordered and Y[p] >= k.ordered:
            unplaced[0] -= 1        # (counted at Y[p]: now a displaced row instead)
        if t.displaced != NULL and X[p] < t.ordered_rows and not t.displaced[X[p]]:
            t.displaced[X[p]] = 1
            t.displaced_rows += 1
    if par and pairs * _SWAP_ROWS >= _split_rows(t):
        for ch in range(_TAIL_CHUNKS + 1):      # (no division in a region's body: see _keep_free)
            i_at[ch] = ch * pairs // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _swap_pairs(tab, X, Y, i_at[ch], i_at[ch + 1])
    else:
        _swap_pairs(tab, X, Y, 0, pairs)
    # The rows to go now: those listed that still go (not a row below C,
    # which took a confirmed track), and the Y rows that took a dead one.
    w = 0
    for i in range(m):
        fill[w] = fill[i]
        w += state[fill[i]] == DOD_TRACK_NONE
    j = 0
    for p in range(pairs):
        Y[j] = Y[p]
        j += state[Y[p]] == DOD_TRACK_NONE
    # merge, from the end: fill[0:w] and Y[0:j], both ascending
    i = w
    p = j
    r = w + j
    while p > 0:
        r -= 1
        if i > 0 and fill[i - 1] > Y[p - 1]:
            i -= 1
            fill[r] = fill[i]
        else:
            p -= 1
            fill[r] = Y[p]
    return w + j


# The next scan's index cells follow the mean of the gate half-widths (k.hm)
# over the rows, summed in _TAIL_CHUNKS fixed parts of the rows (their
# bounds depend on the row count alone) added in order: the same bits for
# every thread count, and the parts can run on any worker (with threads,
# in the update's region: serially, at 1,000,000 targets, the sum read
# ~14 MB on the calling thread while the workers waited).

cdef inline void _gate_width_cuts(_tick* k) noexcept nogil:
    """The parts' bounds (no division in a region's body: see _keep_free)."""
    cdef size_t p
    for p in range(_TAIL_CHUNKS + 1):
        k.hm_at[p] = p * k.T // _TAIL_CHUNKS


cdef inline void _gate_width_part(_tick* k, size_t p) noexcept nogil:
    k.hm_part[p] = _sum4(k.hm + k.hm_at[p], k.hm_at[p + 1] - k.hm_at[p], False)


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


cdef void _keep_free(const dod_tracker* t, _tick* k, int dim) noexcept nogil:
    """The index keeps the detections no confirmed track took (same
    geometry and order: the same pairs as testing each point).

    With workers, a direct-mode index and _split_detections detections or
    more, the drop runs in _TAIL_CHUNKS parts over
    the workers (grid.pxd: counts and bucket bounds, then each part out of
    place), into the births' order arrays: the index is dead before the
    births use them. (Serially, at 100,000 targets, it took ~0.7 ms of the
    calling thread's own time in a two-thread tick.)"""
    cdef dod_grid* g = &k.grid
    cdef int nt = t.threads
    cdef size_t n = g.n, ch, acc = 0, c
    cdef size_t part_at[_TAIL_CHUNKS + 1]
    cdef size_t bucket_at[_TAIL_CHUNKS + 1]
    cdef size_t s_at[_TAIL_CHUNKS + 1]      # the parts' first sorted positions (no division in a
                                            # region's body: checked, in debug builds, it takes the GIL)
    if not (nt > 1 and g.direct and k.bm.row != NULL and k.bm.pos != NULL and n > 0
            and n >= _split_detections(t)):
        if dim == 2:
            dod_grid_keep_free(g, k.det_track, 2)
        else:
            dod_grid_keep_free(g, k.det_track, 3)
        return
    for ch in range(_TAIL_CHUNKS + 1):
        s_at[ch] = ch * n // _TAIL_CHUNKS
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        part_at[ch] = dod_grid_kept_in(g, k.det_track, s_at[ch], s_at[ch + 1])
        bucket_at[ch] = dod_grid_bucket_from(g, s_at[ch])
    bucket_at[_TAIL_CHUNKS] = g.nb + 1
    for ch in range(_TAIL_CHUNKS):      # counts to offsets
        c = part_at[ch]
        part_at[ch] = acc
        acc += c
    part_at[_TAIL_CHUNKS] = acc
    for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
        if dim == 2:
            dod_grid_keep_free_part(g, k.det_track, 2, s_at[ch], s_at[ch + 1], part_at[ch], part_at[ch + 1],
                                    bucket_at[ch], bucket_at[ch + 1], k.bm.row, k.bm.pos)
        else:
            dod_grid_keep_free_part(g, k.det_track, 3, s_at[ch], s_at[ch + 1], part_at[ch], part_at[ch + 1],
                                    bucket_at[ch], bucket_at[ch + 1], k.bm.row, k.bm.pos)
    g.order = k.bm.row
    g.spos = k.bm.pos
    g.n = acc


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
    sort (bounds, keys, two radix passes): at 100,000 targets, ~20,000
    births a scan, the births took ~1.3 against ~1.9 ms of a one-thread
    tick and ~1.0 against ~1.3 ms at two threads.

    With `parts` (threads, and as many detections as a parallel _keep_free
    takes) the pass runs in _TAIL_CHUNKS parts of the index over the
    workers: each lists its births (k.bm.key, key2, unused until a sort),
    then each copies them to its place in order, the same arrays.
    (Serially, its random reads of the detections' tracks and ranks took
    ~8 ms of a two-thread tick at 1,000,000 targets, ~2 % of its samples
    and a quarter of a 16-core tick's budget.)"""
    cdef const dod_grid* g = &k.grid
    cdef dod_index* out = k.bm.row2
    cdef double* pos = k.bm.pos2
    cdef size_t s, r = 0, ch, n = g.n
    cdef size_t s_at[_TAIL_CHUNKS + 1]
    cdef size_t r_at[_TAIL_CHUNKS + 1]
    cdef int32_t j
    cdef int a
    if not g.direct or out == NULL or pos == NULL:
        return NULL
    if parts and k.bm.key != NULL and k.bm.key2 != NULL:
        for ch in range(_TAIL_CHUNKS + 1):      # (no division in a region's body: see _keep_free)
            s_at[ch] = ch * n // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            r_at[ch + 1] = _born_in_part(k, nfit, s_at[ch], s_at[ch + 1])
        r_at[0] = 0
        for ch in range(_TAIL_CHUNKS):          # counts to offsets
            r_at[ch + 1] += r_at[ch]
        r = r_at[_TAIL_CHUNKS]
        if r == nfit:
            for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
                _born_copy_part(k, s_at[ch], r_at[ch + 1] - r_at[ch], r_at[ch], dim)
        return out if r == nfit else NULL
    for s in range(n):
        j = <int32_t>g.order[s]
        if _born_here(k, j, nfit):
            out[r] = <dod_index>k.birth_rank[j]
            for a in range(dim):
                pos[r * dim + a] = g.spos[s * dim + a]
            r += 1
    return out if r == nfit else NULL     # (every birth is in the index: r == nfit)


# ---------------------------------------------------------------- locality: rows in spatial order
#
# Spatial order here is the detection grid's own (grid.pxd, direct mode):
# cubic cells, row-major with x fastest. Rows in that order gate along the
# grid's bucket starts and sorted points in the direction they are stored,
# a few rows of cells at a time. (Morton order, before: at 100,000 targets
# the tick took 5-7 % longer at 1 thread, both orders at 256 cells per
# axis over the births' box, builds alternating.)

cdef inline void _cell_sort_push(dod_arena* scratch, size_t n, int carry, _cell_sort* m, bint* ok) noexcept nogil:
    """The work arrays for n points (the chunk arrays for _SORT_CHUNKS
    whatever the thread count: a scratch that fits one fits every count),
    with room to carry `carry` coordinates per point (0: none)."""
    m.pos = m.pos2 = NULL
    if carry > 0:
        m.pos = <double*>_push(scratch, n * <size_t>carry, sizeof(double), ok)
        m.pos2 = <double*>_push(scratch, n * <size_t>carry, sizeof(double), ok)
    m.key = <uint32_t*>_push(scratch, n, sizeof(uint32_t), ok)
    m.key2 = <uint32_t*>_push(scratch, n, sizeof(uint32_t), ok)
    m.row = <dod_index*>_push(scratch, n, sizeof(dod_index), ok)
    m.row2 = <dod_index*>_push(scratch, n, sizeof(dod_index), ok)
    m.count = <size_t*>_push(scratch, _SORT_CHUNKS * 256, sizeof(size_t), ok)
    m.lohi = <double*>_push(scratch, _SORT_CHUNKS * 6, sizeof(double), ok)
    m.ors = <uint32_t*>_push(scratch, _SORT_CHUNKS, sizeof(uint32_t), ok)
    m.first = <size_t*>_push(scratch, _SORT_CHUNKS, sizeof(size_t), ok)


cdef inline const double* _point(const double* x, size_t stride, const int32_t* pick, size_t i) noexcept nogil:
    """Point i of a spatial ordering: x + pick[i] * stride (x + i * stride without pick)."""
    return x + (<size_t>pick[i] if pick != NULL else i) * stride


cdef void _cell_bounds(const double* x, size_t stride, const int32_t* pick, int dim, size_t i0, size_t i1,
                       double* lohi) noexcept nogil:
    """Bounding box of points [i0, i1): lohi[0:3] low, lohi[3:6] high."""
    cdef size_t i
    cdef int a
    cdef double v
    for a in range(3):
        lohi[a] = INFINITY
        lohi[3 + a] = -INFINITY
    for i in range(i0, i1):
        for a in range(dim):
            v = _point(x, stride, pick, i)[a]
            if v < lohi[a]:
                lohi[a] = v
            if v > lohi[3 + a]:
                lohi[3 + a] = v


cdef inline uint32_t _cell_key(const double* p, int dim, const double* lo, double step,
                               const uint32_t* ncell) noexcept nogil:
    """The key of point p's cell (cells of side `step` from `lo`, ncell[a]
    per axis, clamped): row-major, x fastest."""
    cdef int a
    cdef double v, top
    cdef uint32_t q[3]
    for a in range(3):
        q[a] = 0
        if a < dim:
            v = (p[a] - lo[a]) / step
            top = <double>(ncell[a] - 1)
            q[a] = <uint32_t>(v if v < top else top) if v > 0.0 else 0
    if dim == 2:
        return q[1] * ncell[0] + q[0]
    return (q[2] * ncell[1] + q[1]) * ncell[0] + q[0]


cdef uint32_t _cell_keys(const double* x, size_t stride, const int32_t* pick, int dim, size_t i0, size_t i1,
                         const double* lo, double step, const uint32_t* ncell, uint32_t* key, dod_index* row,
                         double* pos) noexcept nogil:
    """Cell keys of points [i0, i1) (_cell_key) into key, row[i] = i, and
    (pos not NULL) the point's coordinates into pos[i]; returns the OR of
    the keys (a radix pass whose byte is 0 in every key is skipped)."""
    cdef size_t i
    cdef int a
    cdef uint32_t acc = 0
    for i in range(i0, i1):
        if pos != NULL:
            for a in range(dim):
                pos[i * dim + a] = _point(x, stride, pick, i)[a]
        key[i] = _cell_key(_point(x, stride, pick, i), dim, lo, step, ncell)
        acc |= key[i]
        row[i] = <dod_index>i
    return acc


cdef size_t _confirmed_in(const uint8_t* state, size_t i0, size_t i1) noexcept nogil:
    """How many of rows [i0, i1) hold a confirmed track."""
    cdef size_t i, n = 0
    for i in range(i0, i1):
        n += state[i] == DOD_TRACK_CONFIRMED
    return n


cdef uint32_t _track_keys(const double* x, size_t stride, int dim, size_t i0, size_t i1, const double* lo,
                          double step, const uint32_t* ncell, const uint8_t* state, _cell_sort* m,
                          size_t c, size_t u) noexcept nogil:
    """The confirmed rows of [i0, i1), in row order, to key[c ..] (their
    cell keys) and row[c ..]; the others, in row order, to row[u ..] and
    row2[u ..] (they are not sorted: whichever array the radix passes end
    in holds them). Returns the OR of the keys written."""
    cdef size_t i
    cdef uint32_t acc = 0
    for i in range(i0, i1):
        if state[i] == DOD_TRACK_CONFIRMED:
            m.key[c] = _cell_key(x + i * stride, dim, lo, step, ncell)
            acc |= m.key[c]
            m.row[c] = <dod_index>i
            c += 1
        else:
            m.row[u] = m.row2[u] = <dod_index>i
            u += 1
    return acc


cdef void _radix_count(const uint32_t* key, size_t i0, size_t i1, int shift, size_t* count) noexcept nogil:
    """count[b]: keys of [i0, i1) whose byte at `shift` is b."""
    cdef size_t i
    memset(count, 0, 256 * sizeof(size_t))
    for i in range(i0, i1):
        count[(key[i] >> shift) & 0xFF] += 1


cdef void _radix_scatter(const _cell_sort* m, size_t i0, size_t i1, int shift, int dim, size_t* cursor) noexcept nogil:
    """Keys, rows (and carried positions) of [i0, i1) to their places in
    key2, row2 (pos2): cursor[b] is where the next key with byte b goes
    (stable: [i0, i1) in order)."""
    cdef size_t i, b, d
    cdef int a
    for i in range(i0, i1):
        b = (m.key[i] >> shift) & 0xFF
        d = cursor[b]
        m.key2[d] = m.key[i]
        m.row2[d] = m.row[i]
        if m.pos != NULL:
            for a in range(dim):
                m.pos2[d * dim + a] = m.pos[i * dim + a]
        cursor[b] = d + 1


cdef const dod_index* _cell_order(const double* x, size_t stride, const int32_t* pick, int dim, size_t N,
                                  int bits, double h, int nt, bint par, _cell_sort* m,
                                  const uint8_t* state) noexcept nogil:
    """Points 0 .. N-1 (point i at x + pick[i] * stride, or x + i * stride)
    in cell order of their position (row-major, x fastest): the returned
    array lists them (and m.pos, when carried, holds their coordinates in
    that order), or NULL when there is nothing to order (fewer than two
    points, all at one place, or no finite extent).

    Cells are cubes over the points' bounding box, side the widest extent
    over 2**bits - 1 (bits at most 16 in 2-D, 10 in 3-D: a key fits 32 bits)
    and no smaller than `h` (the grid's cell side, so points in one grid
    cell stay together); the key of cell (q0, q1[, q2]) is its row-major
    index over the cells the box spans, so the keys use as few bytes as the
    box needs. Sorted by key (LSD radix sort, passes of 8 bits, as many as
    the keys use: stable, ties in index order). With `par` every
    step runs over _SORT_CHUNKS chunks on nt workers: the bounds and the
    keys per chunk, each radix pass as counts per chunk, one serial prefix
    over (byte, chunk), then the scatters, so the order is that of one
    stable sort: the same at every thread count. With `state` (track
    rows, pick NULL), only the confirmed ones are sorted; the others follow
    them in index order (_track_keys: as if keyed 2**31 + index, without
    radix passes over them or over the index's bytes)."""
    cdef size_t i, b, acc, pass_, ch, nch = _SORT_CHUNKS if par else 1, per, n = N
    cdef int a, shift
    cdef double lo[3]
    cdef double hi[3]
    cdef double step, span, v
    cdef uint32_t ncell[3]
    cdef double levels = <double>((1 << bits) - 1)
    cdef uint32_t orall = 0
    cdef uint32_t* kswp
    cdef dod_index* swp
    cdef double* pswp
    if N < 2:
        return NULL
    per = (N + nch - 1) // nch
    if par:
        for ch in prange(nch, num_threads=nt, schedule="static"):
            _cell_bounds(x, stride, pick, dim, min(N, ch * per), min(N, (ch + 1) * per), m.lohi + ch * 6)
    else:
        _cell_bounds(x, stride, pick, dim, 0, N, m.lohi)
    for a in range(3):
        lo[a] = INFINITY
        hi[a] = -INFINITY
    for ch in range(nch):               # min and max: exact in any grouping
        for a in range(dim):
            if m.lohi[ch * 6 + a] < lo[a]:
                lo[a] = m.lohi[ch * 6 + a]
            if m.lohi[ch * 6 + 3 + a] > hi[a]:
                hi[a] = m.lohi[ch * 6 + 3 + a]
    span = 0.0
    for a in range(dim):
        if hi[a] - lo[a] > span:
            span = hi[a] - lo[a]
    step = span / levels
    if not (h > 0.0 and isfinite(h)):
        h = step
    if step < h:
        step = h
    if not (step > 0.0 and isfinite(step)):
        return NULL
    for a in range(3):
        ncell[a] = 1
        v = (hi[a] - lo[a]) / step if a < dim else 0.0
        if v > 0.0:             # (an axis without a finite value has no extent: -inf here, or NaN)
            ncell[a] = <uint32_t>(v if v < levels else levels) + 1
    if state != NULL:       # confirmed rows chunk by chunk from 0, the others from n
        if par:
            for ch in prange(nch, num_threads=nt, schedule="static"):
                m.first[ch] = _confirmed_in(state, min(N, ch * per), min(N, (ch + 1) * per))
        else:
            m.first[0] = _confirmed_in(state, 0, N)
        n = 0
        for ch in range(nch):
            i = m.first[ch]
            m.first[ch] = n
            n += i
        if par:
            for ch in prange(nch, num_threads=nt, schedule="static"):
                m.ors[ch] = _track_keys(x, stride, dim, min(N, ch * per), min(N, (ch + 1) * per), lo, step,
                                        ncell, state, m, m.first[ch], n + min(N, ch * per) - m.first[ch])
        else:
            m.ors[0] = _track_keys(x, stride, dim, 0, N, lo, step, ncell, state, m, 0, n)
        per = (n + nch - 1) // nch      # the radix passes: over the confirmed rows alone
    elif par:
        for ch in prange(nch, num_threads=nt, schedule="static"):
            m.ors[ch] = _cell_keys(x, stride, pick, dim, min(N, ch * per), min(N, (ch + 1) * per), lo, step,
                                   ncell, m.key, m.row, m.pos)
    else:
        m.ors[0] = _cell_keys(x, stride, pick, dim, 0, N, lo, step, ncell, m.key, m.row, m.pos)
    for ch in range(nch):
        orall |= m.ors[ch]
    for pass_ in range(4):
        shift = <int>(8 * pass_)
        if n < 2 or ((orall >> shift) & 0xFF) == 0:
            continue                    # every key has byte 0 here: the pass would keep the order
        if par:
            for ch in prange(nch, num_threads=nt, schedule="static"):
                _radix_count(m.key, min(n, ch * per), min(n, (ch + 1) * per), shift, m.count + ch * 256)
        else:
            _radix_count(m.key, 0, n, shift, m.count)
        acc = 0                         # cursors: byte-major, then chunk order (stable)
        for b in range(256):
            for ch in range(nch):
                i = m.count[ch * 256 + b]
                m.count[ch * 256 + b] = acc
                acc += i
        if par:
            for ch in prange(nch, num_threads=nt, schedule="static"):
                _radix_scatter(m, min(n, ch * per), min(n, (ch + 1) * per), shift, dim, m.count + ch * 256)
        else:
            _radix_scatter(m, 0, n, shift, dim, m.count)
        kswp = m.key
        m.key = m.key2
        m.key2 = kswp
        swp = m.row
        m.row = m.row2
        m.row2 = swp
        pswp = m.pos
        m.pos = m.pos2
        m.pos2 = pswp
    return m.row


cdef void _rows_in_order(dod_tracker* t, size_t rows) noexcept nogil:
    """Rows [0, rows) are in spatial order now (a sort's confirmed rows, or
    births into an empty table): none of them displaced."""
    if t.displaced != NULL:
        memset(t.displaced, 0, t.ordered_rows)
    t.ordered_rows = rows
    t.displaced_rows = 0


cdef void _speed_part(const dod_tracker* t, size_t r0, size_t r1, double* total, size_t* count) noexcept nogil:
    """Sum of the confirmed tracks' speeds among rows [r0, r1), and their count."""
    cdef size_t ti, m = 0
    cdef int a, dim = t.dim
    cdef double v2, s = 0.0
    cdef const double* x
    for ti in range(r0, r1):
        if t.cols.state[ti] != DOD_TRACK_CONFIRMED:
            continue
        x = t.cols.x + ti * t.n + dim
        v2 = 0.0
        for a in range(dim):
            v2 += x[a] * x[a]
        if v2 < INFINITY:       # (a caller's NaN or inf stays out of the mean)
            s += sqrt(v2)
            m += 1
    total[0] = s
    count[0] = m


cdef double _mean_speed(const dod_tracker* t, bint par) noexcept nogil:
    """The confirmed tracks' mean speed (0 without any): summed in
    _TAIL_CHUNKS fixed parts of the rows (bounds from the row count alone)
    added in order, so the same bits at every thread count; the parts over
    the workers with `par`."""
    cdef size_t T = t.table.count, p, m = 0
    cdef size_t at[_TAIL_CHUNKS + 1]
    cdef double part[_TAIL_CHUNKS]
    cdef size_t cnt[_TAIL_CHUNKS]
    cdef double s = 0.0
    for p in range(_TAIL_CHUNKS + 1):       # (no division in a region's body: see _keep_free)
        at[p] = p * T // _TAIL_CHUNKS
    if par and T >= <size_t>t.threads * t.min_rows:
        for p in prange(_TAIL_CHUNKS, num_threads=t.threads, schedule="static"):
            _speed_part(t, at[p], at[p + 1], &part[p], &cnt[p])
    else:
        for p in range(_TAIL_CHUNKS):
            _speed_part(t, at[p], at[p + 1], &part[p], &cnt[p])
    for p in range(_TAIL_CHUNKS):
        s += part[p]
        m += cnt[p]
    return s / <double>m if m > 0 else 0.0


cdef void _count_displaced(dod_tracker* t, const dod_table_removal* r) noexcept nogil:
    """Mark the rows in order that this tick's deaths fill with the table's
    last rows (r.hole ascends): each such row now holds a track from anywhere
    in space until the next sort (sort_when_displaced). A row counts once,
    however often it is filled again: the clutter's short-lived tracks die
    and refill the same holes scan after scan."""
    cdef size_t i, h
    if t.displaced == NULL:
        return
    for i in range(r.moves):
        h = r.hole[i]
        if h >= t.ordered_rows:
            break
        if not t.displaced[h]:
            t.displaced[h] = 1
            t.displaced_rows += 1


cdef bint _spatial_sort(dod_tracker* t, dod_arena* scratch, double h) noexcept nogil:
    """Reorder the track rows: the confirmed tracks first, in the cell
    order of their position (_cell_order, cells no smaller than `h`),
    then the others in their row order (tentative tracks live a few scans:
    births and deaths churn them at the end of the table, behind the
    confirmed rows; kept in row order, their part of the reorder reads
    memory in order). In place with
    dod_table_reorder's phases, which keep every handle. With threads (and
    enough rows) the ordering and each column of the reorder (gathered,
    then put back) run over _SORT_CHUNKS row chunks on the workers. A pure
    function of the table's contents: the same order at every thread
    count. False (nothing changed) when the scratch cannot hold it."""
    cdef dod_table* tab = t.table
    cdef size_t T = tab.count, ch, c, per
    cdef int nt = t.threads
    cdef bint ok = True, par = nt > 1 and T >= <size_t>nt * t.min_rows
    cdef _cell_sort m
    cdef const dod_index* row
    cdef char* buf
    if T < 2:
        return True
    _cell_sort_push(scratch, T, 0, &m, &ok)
    buf = <char*>_push(scratch, dod_table_reorder_scratch_bytes(tab), 1, &ok)
    if not ok:
        return False
    row = _cell_order(t.cols.x, t.n, NULL, t.dim, T, 15 if t.dim == 2 else 10, h, nt, par, &m, t.cols.state)
    if row == NULL:
        return True                     # every track at one point (or no finite extent): nothing to order
    if not par:
        dod_table_reorder(tab, row, buf)
        return True
    per = (T + _SORT_CHUNKS - 1) // _SORT_CHUNKS
    for c in range(tab.ncols + 1):      # + 1: the slot map
        for ch in prange(_SORT_CHUNKS, num_threads=nt, schedule="static"):
            dod_table_reorder_gather(tab, c, row, buf, min(T, ch * per), min(T, (ch + 1) * per))
        for ch in prange(_SORT_CHUNKS, num_threads=nt, schedule="static"):
            dod_table_reorder_put(tab, c, buf, min(T, ch * per), min(T, (ch + 1) * per))
    return True


# ---------------------------------------------------------------- track management in clutter

cdef void _estimate_clutter(dod_tracker* t, _tick* k, dod_tick_counts* cnt, bint grid_built) noexcept nogil:
    """Count the detections no confirmed track took; fold them into the
    clutter density estimate (TrackerConfig.clutter_density documents it).
    With `grid_built` (the index built over all of them this tick, by the
    workers), after _keep_free: the index's count is the free detections'
    (counted there in parts; a pass here over the detections took ~0.5 ms
    of the calling thread at 1,000,000 targets) and its box theirs;
    without, no track took any, and the box takes one pass here."""
    cdef size_t j, u = k.grid.n if grid_built else k.D
    cdef int a, dim = t.dim
    cdef double v, V, side = 10.0 * t.r, est
    cdef double lo[3]
    cdef double hi[3]
    cnt.unclaimed = u
    if t.clutter_fixed or k.D == 0:
        return
    if t.volume > 0.0:
        V = t.volume
    else:
        for a in range(dim):
            if grid_built:
                lo[a] = k.grid.lo[a]
                hi[a] = k.grid.hi[a]
            else:
                lo[a] = hi[a] = k.z[a]
                for j in range(1, k.D):
                    v = k.z[j * dim + a]
                    lo[a] = v if v < lo[a] else lo[a]
                    hi[a] = v if v > hi[a] else hi[a]
        V = 1.0
        for a in range(dim):
            V *= hi[a] - lo[a] if hi[a] - lo[a] > side else side
    est = (<double>u + 1.0) / V
    if t.clutter > 0.0:
        t.clutter = (1.0 - t.clutter_w) * t.clutter + t.clutter_w * est
    else:
        t.clutter = est


cdef inline void _try_single(const dod_tracker* t, const _tick* k, _pairs* out, size_t i, size_t j,
                             const double* zj, double R2) noexcept nogil:
    """Pair single i with detection j (at zj: the index's copy, read in
    order) into `out` if it is free and within R2. The distance first: the
    detection's owner is a random read, and few points of a cell are near
    enough."""
    cdef int a, dim = t.dim
    cdef double y, d2 = 0.0
    for a in range(dim):
        y = zj[a] - t.single_z[i * dim + a]
        d2 += y * y
    if not d2 <= R2:
        return
    if k.det_track[j] != -1:
        return
    if out.n >= out.cap:
        out.dropped += 1
        return
    out.pt[out.n] = <int32_t>i
    out.pd[out.n] = <int32_t>j
    out.pc[out.n] = d2
    out.n += 1


cdef void _pair_walk(const dod_tracker* t, _tick* k, _pairs* dest, size_t i0, size_t i1,
                     double R) noexcept nogil:
    """The pairs of singles i0 .. i1 with this scan's free detections within
    R (the same cell walk as _gate_rows, over the box [s - R, s + R]),
    appended to `dest` in single order (a local copy while it runs: the
    workers' segments sit side by side)."""
    cdef _pairs local = dest[0]
    cdef const dod_grid* g = &k.grid
    cdef dod_grid_walk w
    cdef double blo[3]
    cdef double bhi[3]
    cdef int a, mode, dim = t.dim
    cdef size_t i, j, s
    for i in range(i0, i1):
        k.sused[i] = 0
        for a in range(dim):
            blo[a] = t.single_z[i * dim + a] - R
            bhi[a] = t.single_z[i * dim + a] + R
        mode = dod_grid_walk_begin(g, blo, bhi, dim, k.D, &w)
        if mode == DOD_GRID_WALK_ALL:
            for j in range(k.D):
                _try_single(t, k, &local, i, j, k.z + j * dim, R * R)
        elif mode == DOD_GRID_WALK_CELLS:
            while dod_grid_walk_next(g, &w):
                for s in range(w.s0, w.s1):
                    if g.direct or dod_grid_holds(g, s, w.cx, w.cy, w.cz):
                        _try_single(t, k, &local, i, g.order[s], g.spos + s * dim, R * R)
    dest[0] = local


cdef void _pair_singles(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt,
                        bint grid_built) noexcept nogil:
    """Pair the waiting detections with this scan's free ones (two-point
    initiation): gate |z - s| <= v_max dt + pair_noise through the grid, then
    iterated mutual nearest neighbours. A paired detection j of single i is
    marked det_track[j] = -2 - i.

    Threads: with enough singles the walk runs in chunks of them over the
    workers, each appending to its own segment of the pair buffer (as
    _gate_open cuts it), the segments then moved end to end. The pairs'
    order then depends on which worker took which chunk; the matching does
    not depend on it. If a segment fills, the serial walk runs instead: the
    same pairs kept and dropped at every thread count. (At 1,000,000
    targets, ~200,000 singles a scan, the serial walk was most of the
    association pass, ~35 ms of a ~200 ms one-thread tick, and scaled not
    at all at two threads: 35 -> 33 ms.)"""
    cdef size_t ns = t.singles.count, i, j, p, per, ch, m
    cdef int nt = t.threads, w
    cdef double R = t.v_max * dt + t.pair_noise
    cdef int32_t bi, bd
    cdef size_t matched, dropped = 0
    cdef bint par
    k.npairs = 0
    if ns == 0 or k.D == 0:
        return
    if not grid_built:
        k.grid.h = 2.0 * R
        dod_grid_build(&k.grid, k.z, k.D, t.dim)
    par = nt > 1 and ns >= <size_t>nt * t.min_rows
    if par:
        m = min(<size_t>_GATE_CHUNKS, <size_t>nt * _GATE_CHUNKS_PER_THREAD)       # chunks
        per = (ns + m - 1) // m
        _pairs_segments(k, nt)
        for ch in prange((ns + per - 1) // per, num_threads=nt, schedule="dynamic"):
            _pair_walk(t, k, &k.seg[threadid()], ch * per, min(ns, (ch + 1) * per), R)
        for w in range(nt):
            dropped += k.seg[w].dropped
        par = dropped == 0
        if par:                         # end to end (each moves down, never onto one still to move)
            for w in range(nt):
                m = k.seg[w].n
                memmove(k.pt + k.npairs, k.seg[w].pt, m * sizeof(int32_t))
                memmove(k.pd + k.npairs, k.seg[w].pd, m * sizeof(int32_t))
                memmove(k.pc + k.npairs, k.seg[w].pc, m * sizeof(double))
                k.npairs += m
    if not par:
        _pairs_whole(k)
        _pair_walk(t, k, &k.whole, 0, ns, R)
        k.npairs = k.whole.n
        cnt.pairs_dropped += k.whole.dropped
    cnt.pairs += k.npairs
    # Iterated mutual nearest neighbours: a pair that is the cheapest of both
    # its single (ties: lower detection) and its detection (ties: lower
    # single) is taken; repeat on what is left. With this strict order that
    # is the cheapest-first greedy matching, whatever the pairs' order.
    while True:
        for p in range(k.npairs):
            k.sbest[k.pt[p]] = -1
            k.dbest[k.pd[p]] = -1
        for p in range(k.npairs):
            i = <size_t>k.pt[p]
            j = <size_t>k.pd[p]
            if k.sused[i] or k.det_track[j] != -1:
                continue
            bi = k.sbest[i]
            if bi < 0 or k.pc[p] < k.pc[bi] or (k.pc[p] == k.pc[bi] and k.pd[p] < k.pd[bi]):
                k.sbest[i] = <int32_t>p
            bd = k.dbest[j]
            if bd < 0 or k.pc[p] < k.pc[bd] or (k.pc[p] == k.pc[bd] and k.pt[p] < k.pt[bd]):
                k.dbest[j] = <int32_t>p
        matched = 0
        for p in range(k.npairs):
            i = <size_t>k.pt[p]
            j = <size_t>k.pd[p]
            if k.sused[i] or k.det_track[j] != -1:
                continue
            if k.sbest[i] == <int32_t>p and k.dbest[j] == <int32_t>p:
                k.sused[i] = 1
                k.det_track[j] = -2 - <int32_t>i
                matched += 1
        if matched == 0:
            return


cdef inline double _log_clutter(dod_tracker* t) noexcept nogil:
    return log(t.clutter) if t.clutter > 0.0 else 0.0


cdef inline void _birth_cov(double* P, int dim, double r2, double v2) noexcept nogil:
    """A birth's covariance diag(r2, .., v2, ..) into a zeroed packed P (a
    constant dimension in each branch: the indices fold)."""
    cdef int a
    if dim == 2:
        for a in range(2):
            P[dod_kalman_packed_index(a, a, 4)] = r2
            P[dod_kalman_packed_index(2 + a, 2 + a, 4)] = v2
    else:
        for a in range(3):
            P[dod_kalman_packed_index(a, a, 6)] = r2
            P[dod_kalman_packed_index(3 + a, 3 + a, 6)] = v2


cdef inline void _imm_birth(const dod_tracker* t, size_t i) noexcept nogil:
    """Every IMM model of row i from its CV state (a constant dimension in
    each call: the packed covariance's indices fold)."""
    if t.dim == 2:
        dod_imm_birth(&t.imm, i, t.cols.x + i * 4, t.cols.P + i * 10, 2)
    else:
        dod_imm_birth(&t.imm, i, t.cols.x + i * 6, t.cols.P + i * 21, 3)


cdef size_t _waiting_part(const _tick* k, size_t s0, size_t s1, int32_t* out) noexcept nogil:
    """The free detections (det_track -1) among the index's points s0 .. s1,
    in its order, into out (NULL: only counted); returns how many."""
    cdef size_t s, m = 0
    cdef uint32_t j
    for s in range(s0, s1):
        j = k.grid.order[s]
        if k.det_track[j] == -1:
            if out != NULL:
                out[m] = <int32_t>j
            m += 1
    return m


cdef void _singles_part(dod_tracker* t, const _tick* k, const int32_t* wait, size_t r0, size_t r1) noexcept nogil:
    """Waiting rows r0 .. r1 (inserted) take the positions of detections wait[r0:r1]."""
    cdef size_t r
    cdef int dim = t.dim
    for r in range(r0, r1):
        memcpy(t.single_z + r * dim, k.z + <size_t>wait[r] * dim, dim * sizeof(double))


cdef void _pair_birth_rows(const dod_tracker* t, const _tick* k, size_t row0, const dod_index* order,
                           const double* opos, const int32_t* partner, double dt, double lc,
                           size_t r0, size_t r1) noexcept nogil:
    """Rows row0 + [r0, r1) of this scan's two-point births (inserted, not
    zeroed): row row0 + r holds birth b = order[r] (r without an order),
    the pair of single partner[b] and detection born[b] (at opos[r] with
    an order), id next_id + b: a track from the single, predicted and
    updated with the detection. Writes only these rows."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = t.dim, n = t.n, pn = dod_kalman_packed_size(t.n), a
    cdef size_t b, i, r, si
    cdef double r2 = t.r * t.r, d2
    cdef double Si[9]
    cdef double y[3]
    cdef const double* z
    for r in range(r0, r1):
        if (r - r0) % _BIRTH_BLOCK == 0:        # zeroed a block at a time, written while in cache (_birth_rows)
            dod_table_zero_rows(t.table, row0 + r, min(r1 - r, <size_t>_BIRTH_BLOCK))
        b = order[r] if order != NULL else r
        z = opos + r * dim if order != NULL and opos != NULL else k.z + <size_t>k.born[b] * dim
        si = <size_t>partner[b]
        i = row0 + r
        c.id[i] = t.next_id + b
        memcpy(c.x + i * n, t.single_z + si * dim, dim * sizeof(double))
        _birth_cov(c.P + i * pn, dim, r2, t.v0 * t.v0)
        dod_kalman_predict(c.x + i * n, c.P + i * pn, dim, dt, t.q)
        dod_kalman_innovation_inverse(c.P + i * pn, dim, r2, Si)
        for a in range(dim):
            y[a] = z[a] - c.x[i * n + a]
        d2 = dod_kalman_mahalanobis2(y, Si, dim)
        if t.score_logic:
            c.score[i] = (t.log_birth - lc) + (t.log_pd - lc + dod_kalman_log_likelihood(d2, Si, dim))
            c.score_max[i] = c.score[i]
        dod_kalman_update(c.x + i * n, c.P + i * pn, z, Si, dim, r2)
        if t.imm.models:
            _imm_birth(t, i)
        c.hits[i] = 2
        c.age[i] = 2
        c.history[i] = 3
        c.state[i] = DOD_TRACK_TENTATIVE


cdef void _birth_part(const dod_tracker* t, const _tick* k, size_t row0, const dod_index* order,
                      const double* opos, const int32_t* partner, double dt, double lc,
                      size_t r0, size_t r1) noexcept nogil:
    """Births [r0, r1) into rows row0 + r0 ..: two-point ones (_pair_birth_rows)
    with `partner`, else single-point ones (_birth_rows)."""
    if partner != NULL:
        _pair_birth_rows(t, k, row0, order, opos, partner, dt, lc, r0, r1)
    else:
        _birth_rows(t, k, row0, order, opos, r0, r1, lc)


cdef void _insert_births(dod_tracker* t, _tick* k, size_t nfit, bint par, const dod_index* order,
                         const double* opos, const int32_t* partner, double dt, double lc) noexcept nogil:
    """Insert nfit rows right after this tick's removal (k.rm) and write the
    births into them (_birth_part). With `par`, over the workers: the
    births first take the slots the deaths just freed, whose order in the
    free list is known: each chunk writes the slot maps of its rows among
    those, and the serial item only the rest (chasing the free list,
    ~200,000 slots a scan at 1,000,000 targets, took ~1.4 ms: the region's
    longest item with many workers). The serial item is worker 0's first;
    each chunk of births goes first to the worker that ran the row chunk
    its first row falls in (_claim_next): those rows, the table's last
    before the deaths, are in that core's cache (the tentative tracks it
    updated, or the rows its moves read). Handed out in turn instead, the
    births took ~34 against ~28 us of a 10,000-target tick at 2 threads."""
    cdef dod_table* tab = t.table
    cdef size_t row0 = tab.count, reused, bstep, p, own, far
    cdef Py_ssize_t ch
    cdef int w, nt = t.threads
    cdef int64_t opened
    if par:
        reused = dod_table_reusable(tab, &k.rm, nfit)
        bstep = (nfit + _TAIL_CHUNKS - 1) // _TAIL_CHUNKS
        k.owner[0] = 0
        for p in range(1, _TAIL_CHUNKS + 1):
            if k.row_chunks > 0:
                k.owner[p] = k.ran[min((row0 + min(nfit, (p - 1) * bstep)) // k.chunk_rows, k.row_chunks - 1)]
            else:
                k.owner[p] = <int32_t>(p % <size_t>nt)
        memset(k.taken, 0, (_TAIL_CHUNKS + 1) * sizeof(uint32_t))
        opened = _region_open(t, nt)
        with parallel(num_threads=nt):
            w = threadid()
            _worker_in(t, w)
            own = 0
            far = 0
            ch = _claim_next(k, _TAIL_CHUNKS + 1, w, &own, &far)
            while ch >= 0:
                if ch == 0:
                    dod_table_insert_reusing(tab, &k.rm, nfit, reused)
                else:
                    dod_table_insert_freed(tab, &k.rm, row0, min(reused, (ch - 1) * bstep),
                                           min(reused, ch * bstep))
                    _birth_part(t, k, row0, order, opos, partner, dt, lc, min(nfit, (ch - 1) * bstep),
                                min(nfit, ch * bstep))
                ch = _claim_next(k, _TAIL_CHUNKS + 1, w, &own, &far)
            _worker_out(t, w)
        _region_close(t, _PASS_BIRTHS, nt, opened)
    else:
        dod_table_insert_many(tab, nfit, NULL)
        _birth_part(t, k, row0, order, opos, partner, dt, lc, 0, nfit)


cdef void _births_two_point(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt, int nt) noexcept nogil:
    """Tentative tracks from the pairs, then this scan's free detections
    become the waiting ones (in the index's cell order when it has them
    all). Birth b is the pair of the b-th paired detection in scan order,
    with id next_id + b (while rows last; the rest are dropped, as one
    insert per birth would); its row is in spatial (cell) order of that
    detection, as single-point births are (_cell_order into k.bm). In scan
    order, which the scenarios shuffle, the rows reached the detection
    index at random: at 1,000,000 targets one thread's predict and
    confirmed gating took 250-270 ms a tick with two-point births against
    140 with single-point ones, for half the rows (Tracker.profile, the
    same scans). Right after the deaths (k.rm), with workers and enough
    births, the rows are written in parts over them, as _birth_rows'."""
    cdef dod_table* tab = t.table
    cdef int dim = t.dim
    cdef size_t j, nb = 0, nfit
    cdef Py_ssize_t ch
    cdef double lc = _log_clutter(t)
    cdef const dod_index* order = NULL
    cdef const dod_grid* g = &k.grid
    cdef int32_t* wait = k.dbest        # the next singles' detections (free once _pair_singles is done)
    cdef int32_t* partner = k.birth_rank    # birth b's single (single-point births' ranks: unused here)
    cdef const double* opos = NULL
    cdef size_t nwait = 0, nfree = 0, n = g.n
    cdef size_t s_at[_TAIL_CHUNKS + 1]
    cdef size_t w_at[_TAIL_CHUNKS + 1]
    cdef bint par, parts = nt > 1 and k.D >= _split_detections(t)
    for j in range(k.D):                # the pairs' detections, in scan order (k.born: unused with pairs)
        if k.det_track[j] <= -2:
            k.born[nb] = <int32_t>j
            partner[nb] = -2 - k.det_track[j]
            nb += 1
        nfree += k.det_track[j] == -1
    # The detections left free wait for a partner in the index's cell order
    # too (its last use, before _cell_order reuses arrays it may live in):
    # _pair_singles walks the index from each of them next scan (at
    # 1,000,000 targets, ~200,000 waiting detections a scan, the one-thread
    # association pass took ~50 ms with them in scan order, ~37 in cell
    # order: Tracker.profile, the same scans). The index holds every
    # detection no confirmed track took (built this scan, direct mode);
    # otherwise, or if it misses any, scan order. Their reads are random:
    # with workers and many detections, in parts over them (as _keep_free).
    if g.direct and n > 0:
        if parts:
            for ch in range(_TAIL_CHUNKS + 1):      # (no division in a region's body: see _keep_free)
                s_at[ch] = ch * n // _TAIL_CHUNKS
            for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
                w_at[ch + 1] = _waiting_part(k, s_at[ch], s_at[ch + 1], NULL)
            w_at[0] = 0
            for ch in range(_TAIL_CHUNKS):          # counts to offsets
                w_at[ch + 1] += w_at[ch]
            if w_at[_TAIL_CHUNKS] == nfree:
                for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
                    _waiting_part(k, s_at[ch], s_at[ch + 1], wait + w_at[ch])
                nwait = nfree
        else:
            nwait = _waiting_part(k, 0, n, wait)
    if nwait != nfree:
        nwait = 0
        for j in range(k.D):
            if k.det_track[j] == -1:
                wait[nwait] = <int32_t>j
                nwait += 1
    nfit = min(nb, tab.capacity - tab.count)
    cnt.births_dropped += nb - nfit
    tab.failed += nb - nfit             # each dropped birth is a refused insert
    par = nt > 1 and nfit >= <size_t>nt * t.min_rows
    if nfit >= 2 and k.bm.key != NULL:
        order = _cell_order(k.z, dim, k.born, dim, nfit, _BIRTH_BITS if dim == 2 else _BIRTH_BITS_3D,
                            t.grid_h, nt, par, &k.bm, NULL)
        opos = k.bm.pos
    # In cell order, birth b's detection is read in order (carried by the
    # sort) and its single nearly so (the singles are in the previous
    # scan's cell order); its place among the scan's detections would be a
    # random read.
    _insert_births(t, k, nfit, par, order, opos, partner, dt, lc)
    t.next_id += nfit
    cnt.births += nfit
    dod_table_clear(t.singles)
    dod_table_insert_many(t.singles, nwait, NULL)   # (max_detections rows: they fit)
    if parts:
        for ch in range(_TAIL_CHUNKS + 1):
            w_at[ch] = ch * t.singles.count // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _singles_part(t, k, wait, w_at[ch], w_at[ch + 1])
    else:
        _singles_part(t, k, wait, 0, t.singles.count)
    cnt.singles = t.singles.count


# ---------------------------------------------------------------- range-bearing scans

cdef inline bint _polar_valid(const double* z, int dim) noexcept nogil:
    """A usable (finite) measurement: range >= 0, elevation in [-pi/2, pi/2]."""
    if not z[0] >= 0.0:
        return False
    return dim == 2 or (z[2] >= -1.5707963267948966 and z[2] <= 1.5707963267948966)


cdef inline void _polar_birth_cov(const double* z, const dod_sensor* s, int dim, double* P, int n) noexcept nogil:
    """The position block of a birth's covariance (P packed): z's converted
    covariance, its upper triangle (in 3-D C[a, b] and C[b, a] may differ
    in the last bit: the packed P keeps one, so the track starts symmetric)."""
    cdef double p[3]
    cdef double C[9]
    cdef int a, b
    dod_meas_to_cartesian(z, s, dim, p, C)
    for a in range(dim):
        for b in range(a, dim):
            P[dod_kalman_packed_index(a, b, n)] = C[a * dim + b]


# ---------------------------------------------------------------- the tick

cdef int dod_tracker_tick(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                          dod_arena* scratch) noexcept nogil:
    return dod_tracker_tick_sensor(t, dets, n_dets, dt, NULL, scratch)


cdef void _birth_rows(const dod_tracker* t, const _tick* k, size_t row0, const dod_index* order,
                      const double* opos, size_t r0, size_t r1, double lc) noexcept nogil:
    """Rows row0 + [r0, r1) of this scan's births (inserted, not zeroed):
    row row0 + r holds birth b = order[r] (r without an order), detection
    born[b] (its position opos[r] with an order), id next_id + b. Zeroes
    the rows (the schema's policy: velocity 0, misses 0), then writes what
    a birth sets, the covariance always (a zero covariance means
    certainty). Writes only these rows."""
    cdef const dod_track_cols* c = &t.cols
    cdef int dim = t.dim, n = t.n, pn = dod_kalman_packed_size(t.n), a
    cdef double r2 = t.r * t.r
    cdef size_t b, i, r, q
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
        if order != NULL:               # carried in order: born[b] would be a random read
            for a in range(dim):
                c.x[i * n + a] = opos[r * dim + a]
        else:
            for a in range(dim):
                c.x[i * n + a] = k.z[<size_t>k.born[b] * dim + a]
        _birth_cov(c.P + i * pn, dim, r2, t.v0 * t.v0)
        if k.sensor != NULL:        # the converted measurement's covariance
            _polar_birth_cov(k.zm + <size_t>k.born[b] * dim, k.sensor, dim, c.P + i * pn, n)
        if t.imm.models:            # after the covariance: every model starts from it
            _imm_birth(t, i)
        c.hits[i] = 1
        c.age[i] = 1
        c.history[i] = 1
        c.state[i] = DOD_TRACK_TENTATIVE
        if t.score_logic:
            c.score[i] = t.log_birth - lc
            c.score_max[i] = c.score[i]


cdef int dod_tracker_tick_sensor(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                                 const dod_sensor* sensor, dod_arena* scratch) noexcept nogil:
    cdef _tick k
    cdef dod_tick_counts cnt
    cdef size_t mark = dod_arena_mark(scratch)
    cdef dod_table* tab = t.table
    cdef size_t T = tab.count, j, i, nb, ti, nfree, nfit, ch, fstep, items, rows_before
    cdef bint index_early, grid_first
    cdef int dim = t.dim, n = t.n, a
    cdef bint ok = True, par, width_late
    cdef const dod_index* border
    cdef const double* bpos = NULL
    cdef const double* late
    cdef double lc
    cdef uint32_t nmask, hist
    cdef bint grid_built = False
    cdef size_t ns = t.singles.count if t.two_point else 0
    cdef dod_track_cols* c = &t.cols
    cdef int nt = t.threads, w
    cdef size_t own, far
    cdef Py_ssize_t sch
    cdef size_t assoc[DOD_TRACKER_MAX_THREADS]
    cdef size_t conf[DOD_TRACKER_MAX_THREADS]
    cdef size_t mix[DOD_TRACKER_MAX_THREADS]
    cdef size_t unpl[DOD_TRACKER_MAX_THREADS]
    cdef size_t mixed = 0, unplaced = 0
    cdef int64_t clock = 0, opened
    memset(&cnt, 0, sizeof(cnt))
    memset(&k, 0, sizeof(k))
    memset(&t.prof, 0, sizeof(t.prof))     # (a tick refused below has no profile)
    if t.profile:
        clock = _clock_ns()
    # 1. Every fixed-size temporary first: failure here leaves the tracker unchanged.
    nb = 1                  # buckets for the whole scan (the index takes the valid ones': _dets_ready)
    while nb < 2 * n_dets:
        nb <<= 1
    k.T = T
    k.front = min(T, t.last.confirmed)
    k.ordered = t.ordered_rows
    if nt > 1:
        _chunk_rows(&k, T, nt, t.min_rows)
    k.pair_cap = _PAIRS_PER_NODE * (T + n_dets) + 64
    k.count_stride = n_dets
    k.z = <double*>_push(scratch, n_dets * dim, sizeof(double), &ok)
    k.grid.cell = <int64_t*>_push(scratch, n_dets * 3, sizeof(int64_t), &ok)
    k.grid.bucket = <uint32_t*>_push(scratch, nb + 1, sizeof(uint32_t), &ok)
    k.grid.order = <uint32_t*>_push(scratch, n_dets, sizeof(uint32_t), &ok)
    k.grid.scell = <int64_t*>_push(scratch, n_dets * 3, sizeof(int64_t), &ok)
    k.grid.spos = <double*>_push(scratch, n_dets * dim, sizeof(double), &ok)
    k.Si = <double*>_push(scratch, T * dim * dim, sizeof(double), &ok)
    k.hw = <double*>_push(scratch, T * dim, sizeof(double), &ok)
    k.gateable = <uint8_t*>_push(scratch, T, 1, &ok)
    k.hm = <double*>_push(scratch, T, sizeof(double), &ok)
    k.det_track = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.track_det = <int32_t*>_push(scratch, T, sizeof(int32_t), &ok)
    k.parent = <int32_t*>_push(scratch, T + n_dets, sizeof(int32_t), &ok)
    k.start = <int32_t*>_push(scratch, T + n_dets + 1, sizeof(int32_t), &ok)
    k.det_pairs = <uint8_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)      # (birth_rank's size)
    k.loc_t = <int32_t*>_push(scratch, T, sizeof(int32_t), &ok)
    k.loc_d = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.glob_t = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.glob_d = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.pt = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.pd = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.pc = <double*>_push(scratch, k.pair_cap, sizeof(double), &ok)
    k.porder = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    if t.two_point:
        k.sused = <uint8_t*>_push(scratch, ns, 1, &ok)
        k.sbest = <int32_t*>_push(scratch, ns, sizeof(int32_t), &ok)
        k.dbest = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    if sensor != NULL:
        k.sensor = sensor
        k.zm = <double*>_push(scratch, n_dets * dim, sizeof(double), &ok)
        k.hp = <double*>_push(scratch, T * dim, sizeof(double), &ok)
        k.J = <double*>_push(scratch, T * dim * dim, sizeof(double), &ok)
    k.rm.hole = <dod_index*>_push(scratch, T, sizeof(dod_index), &ok)
    k.rm.fill = <dod_index*>_push(scratch, T, sizeof(dod_index), &ok)
    k.rm.slot = <dod_index*>_push(scratch, T, sizeof(dod_index), &ok)
    k.born = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.birth_rank = <int32_t*>k.det_pairs
    if n_dets >= 2:         # the births' spatial order (fewer: nothing to order)
        _cell_sort_push(scratch, n_dets, dim, &k.bm, &ok)
    if not ok:
        dod_arena_rewind(scratch, mark)
        return -1

    # 2. Valid detections (NaN/inf rows dropped and counted; range-bearing:
    # also a negative range or an elevation outside [-pi/2, pi/2]). A
    # Cartesian scan with workers is read, checked and copied by the worker
    # that builds the index (below), while the others start predicting: at
    # 100,000 targets the check alone, the scan's first read, was ~0.35 ms
    # of the calling thread's own time.
    par = nt > 1 and T >= <size_t>nt * t.min_rows
    late = NULL
    if sensor == NULL:
        if par:
            late = dets
        else:
            _take_dets(&k, dets, n_dets, dim)
    else:
        for j in range(n_dets):
            if _all_finite(dets + j * dim, dim) and _polar_valid(dets + j * dim, dim):
                for a in range(dim):
                    k.zm[k.D * dim + a] = dets[j * dim + a]
                if dim == 2:
                    dod_meas_to_cartesian(dets + j * 2, sensor, 2, k.z + k.D * 2, NULL)
                else:
                    dod_meas_to_cartesian(dets + j * 3, sensor, 3, k.z + k.D * 3, NULL)
                k.D += 1
            else:
                k.invalid += 1
        _dets_ready(&k)

    # 3. Predict every track: innovation inverse and gate half-widths (rows
    # are independent: chunks over the workers). Meanwhile index the
    # detections, whose grid cells are twice the mean gate width of the
    # previous scan (the only input the index takes from the tracks: a
    # typical gate box then touches 1-2 cells per axis, and sparse scenes
    # keep few detections per cell; which cell side only changes the speed).
    # The mean is summed in row order, so it is the same for every thread count.
    # (With the scan still to be read, its rows stand in for its valid ones:
    # if none is valid, the index is empty and gating finds no pair.)
    clock = _pass_done(t, _PASS_SETUP, clock)
    index_early = T > 0 and (n_dets if late != NULL else k.D) > 0 and t.grid_h > 0.0
    if index_early:
        k.grid.h = t.grid_h
        # With the index built from the start, the confirmed tracks are
        # gated as they are predicted (_predict_gate_rows: one pass over
        # their columns instead of two).
        _gate_open(t, &k)
    grid_first = par and index_early and nt >= _GRID_PARTS_MIN_THREADS
    if grid_first:
        # With many workers, the one building the index would hold up the
        # others (below): at 100,000 and 1,000,000 targets on one thread
        # the index took a fifth to a quarter of predict, index and
        # confirmed gating (~3 of ~13 ms, ~55 of ~271 ms), so from about
        # five workers the builder is the region's longest path, and the
        # chunks predicted before the index was ready are gated in a second
        # pass. From _GRID_PARTS_MIN_THREADS the workers build it together
        # first (_index_parts: the same index). At 2 threads that order
        # was slower (100,000 targets: 21.6 and 23.9 against 19.5 and 22.1
        # ms a tick, ticks alternating in one process); no machine with
        # more than 2 cores has measured it.
        if late != NULL:
            _take_dets_parts(&k, late, n_dets, dim, nt)
            late = NULL
        _index_parts(&k, dim, nt)
        k.grid_ready = 1
    if par:
        # Fewer workers: worker 0 builds the grid first while the others
        # predict their chunks and then take its chunks from the far end.
        # (Built by the calling thread before the region, it kept the other
        # worker from its first chunk until the grid was done: at 100,000
        # targets no chunk started before 4.4 ms.) Chunks predicted before
        # it is ready are gated by whichever worker has no chunk left to
        # predict (_gate_late), in the same region.
        _claims_again(&k, k.row_chunks)
        memset(k.predicted, 0, k.row_chunks * sizeof(uint32_t))
        memset(k.gate_taken, 0, k.row_chunks * sizeof(uint32_t))
        memset(k.gated_by, 0xff, k.row_chunks * sizeof(int32_t))
        opened = _region_open(t, nt)
        with parallel(num_threads=nt):
            w = threadid()
            _worker_in(t, w)
            _count_open(&k, w)      # (a no-op unless _gate_open began a counting pass)
            if w == 0:
                if late != NULL:
                    _take_dets(&k, late, n_dets, dim)
                _index_if(&k, dim, index_early and not grid_first)
                dod_atomic_store_u32(&k.grid_ready, 1)
            own = 0
            far = 0
            sch = _claim_next(&k, k.row_chunks, w, &own, &far)
            while sch >= 0:
                _predict_chunk(t, &k, dt, <size_t>sch, index_early, &k.seg[w])
                dod_atomic_store_u32(&k.predicted[sch], 1)
                sch = _claim_next(&k, k.row_chunks, w, &own, &far)
            if index_early:
                _gate_late(t, &k, w)
            _worker_out(t, w)
        _region_close(t, _PASS_PREDICT, nt, opened)
        for ch in range(k.row_chunks):      # (the next passes' affinity: who gated it last)
            if k.gated_by[ch] >= 0:
                k.ran[ch] = k.gated_by[ch]
    elif index_early:   # serially: the index, then predict and gate in one pass
        _index_if(&k, dim, True)
        _predict_gate_rows(t, &k, dt, &k.whole, 0, T)
    else:
        _predict_rows(t, &k, dt, 0, T)
    cnt.detections = k.D
    cnt.invalid = k.invalid
    # The next scan's cell side: with workers and the index built, summed in
    # the update's region (its parts claimed after the row chunks); else now
    # (a first index, below, takes it at once).
    _gate_width_cuts(&k)
    width_late = par and index_early
    if not width_late:
        for i in range(<size_t>_TAIL_CHUNKS):
            _gate_width_part(&k, i)
        t.grid_h = _grid_side(&k)
    clock = _pass_done(t, _PASS_PREDICT, clock)
    # 4. Associate: confirmed tracks first, then tentative ones.
    if T > 0 and k.D > 0:
        if index_early:
            _gate_close(t, &k, DOD_TRACK_CONFIRMED)
        else:                           # the first scan with tracks: the index from this one
            k.grid.h = t.grid_h if t.grid_h > 0.0 else 1.0
            dod_grid_build(&k.grid, k.z, k.D, dim)
        grid_built = True
        _associate(t, &k, &cnt, DOD_TRACK_CONFIRMED, scratch, index_early)
    if grid_built:
        _keep_free(t, &k, dim)
    _estimate_clutter(t, &k, &cnt, grid_built)
    if grid_built:
        _associate(t, &k, &cnt, DOD_TRACK_TENTATIVE, scratch, False)
    if t.two_point:
        _pair_singles(t, &k, &cnt, dt, grid_built)
    lc = _log_clutter(t)
    k.log_clutter = lc
    clock = _pass_done(t, _PASS_ASSOCIATE, clock)

    # 5. Score the assigned tracks (score confirmation: the innovation
    # density of the predicted track, before its update), update (the Kalman
    # step), count hits and misses, confirm, delete: one pass of chunks over
    # the workers (only assigned tracks update, so the cost of a chunk
    # varies: claimed, not split); the counts are sums of integers, the same
    # in any order. Worker 0 first lists the births (the detections nobody
    # took, final now).
    if par:
        for w in range(nt):
            assoc[w] = 0
            conf[w] = 0
            mix[w] = 0
            unpl[w] = 0
        items = k.row_chunks + (_TAIL_CHUNKS if width_late else 0)
        for ch in range(k.row_chunks, items):
            k.ran[ch] = <int32_t>(ch % <size_t>nt)
        _claims_again(&k, items)
        opened = _region_open(t, nt)
        with parallel(num_threads=nt):
            w = threadid()
            _worker_in(t, w)
            if w == 0:
                _free_dets(t, &k)
            own = 0
            far = 0
            sch = _claim_next(&k, items, w, &own, &far)
            while sch >= 0:
                if <size_t>sch < k.row_chunks:
                    _update_manage_chunk(t, &k, <size_t>sch, &assoc[w], &conf[w], &mix[w], &unpl[w])
                else:
                    _gate_width_part(&k, <size_t>sch - k.row_chunks)
                sch = _claim_next(&k, items, w, &own, &far)
            _worker_out(t, w)
        _region_close(t, _PASS_UPDATE, nt, opened)
        for w in range(nt):
            cnt.associations += assoc[w]
            cnt.confirmed += conf[w]
            mixed += mix[w]
            unplaced += unpl[w]
        if width_late:
            t.grid_h = _grid_side(&k)
    else:
        if t.score_logic:
            _score_rows(t, &k, 0, T)
        _update_rows(t, &k, 0, T)
        cnt.associations += _manage_rows(t, &k, 0, T, &cnt.confirmed, &mixed, &unplaced)
        _free_dets(t, &k)
    clock = _pass_done(t, _PASS_UPDATE, clock)
    # Deaths: the rows removing them one at a time from the highest down
    # would leave (the last row fills each hole), planned in one pass over
    # the states; the row moves (random writes) and the freed slots over the
    # workers. A hole is filled by the worker that just updated its row
    # chunk (the holes ascend: each chunk's moves are a run of them; split
    # evenly instead, the moves took as long at 2 threads as at 1 at
    # 10,000 targets: a hole's lines were in the other core's cache); the
    # freed slots in _TAIL_CHUNKS parts. The same table for every thread count.
    # With confirmed_first the confirmed tracks first take rows [0,
    # confirmed) (_confirmed_first: swaps), so that every row to go is
    # behind them and the moves never reach them.
    j = 0
    if par:     # each chunk listed its rows to go (and its confirmed ones): end to end, in row order
        i = 0
        for ch in range(k.row_chunks):
            if i != ch * k.chunk_rows and k.dead_n[ch] > 0:
                memmove(k.rm.fill + i, k.rm.fill + ch * k.chunk_rows, k.dead_n[ch] * sizeof(dod_index))
            i += k.dead_n[ch]
            if t.confirmed_first:
                if j != ch * k.chunk_rows and k.conf_n[ch] > 0:
                    memmove(k.rm.hole + j, k.rm.hole + ch * k.chunk_rows, k.conf_n[ch] * sizeof(dod_index))
                j += k.conf_n[ch]
    else:
        i = dod_table_removal_list(c.state, DOD_TRACK_NONE, 0, T, k.rm.fill)
        if t.confirmed_first:
            j = _confirmed_past(t, &k, 0, T, k.rm.hole)
    if t.confirmed_first:
        i = _confirmed_first(t, &k, i, j, cnt.confirmed, par, &mixed, &unplaced)
    dod_table_removal_walk(tab, &k.rm, i)
    cnt.deaths += k.rm.removed
    if not t.confirmed_first:   # (with it, every hole is past the rows in order that still count)
        _count_displaced(t, &k.rm)
    if par and k.rm.removed > 0:
        fstep = max(<size_t>1, (k.rm.removed + _TAIL_CHUNKS - 1) // _TAIL_CHUNKS)
        i = 0
        for ch in range(k.row_chunks):
            while i < k.rm.moves and k.rm.hole[i] < ch * k.chunk_rows:
                i += 1
            k.move_at[ch] = i
        k.move_at[k.row_chunks] = k.rm.moves
        for ch in range(<size_t>_TAIL_CHUNKS):
            k.ran[k.row_chunks + ch] = <int32_t>(ch % <size_t>nt)
        _claims_again(&k, k.row_chunks + _TAIL_CHUNKS)
        opened = _region_open(t, nt)
        with parallel(num_threads=nt):
            w = threadid()
            _worker_in(t, w)
            own = 0
            far = 0
            sch = _claim_next(&k, k.row_chunks + _TAIL_CHUNKS, w, &own, &far)
            while sch >= 0:
                if <size_t>sch < k.row_chunks:
                    dod_table_removal_move(tab, &k.rm, k.move_at[sch], k.move_at[sch + 1])
                else:
                    dod_table_removal_free(tab, &k.rm, min(k.rm.removed, (sch - k.row_chunks) * fstep),
                                           min(k.rm.removed, (sch - k.row_chunks + 1) * fstep))
                sch = _claim_next(&k, k.row_chunks + _TAIL_CHUNKS, w, &own, &far)
            _worker_out(t, w)
        _region_close(t, _PASS_DEATHS, nt, opened)
    else:
        dod_table_removal_move(tab, &k.rm, 0, k.rm.moves)
        dod_table_removal_free(tab, &k.rm, 0, k.rm.removed)
    dod_table_removal_finish(tab, &k.rm)
    clock = _pass_done(t, _PASS_DEATHS, clock)

    # 6. Births from the detections nobody took. The table zeroes the new
    # row (ZII: velocity 0, misses 0); the birth writes only what it sets,
    # the covariance always (a zero covariance means certainty).
    rows_before = tab.count
    if t.two_point:
        _births_two_point(t, &k, &cnt, dt, nt)  # pairs start tracks; the rest wait a scan
    # Free detections (k.born, listed with the update) are births in scan
    # order while rows last, the rest are dropped (as one insert per birth
    # would): birth b is detection born[b] with id next_id + b. Their rows
    # are in spatial (cell) order of the detections, not in scan order:
    # tracks born together (all of them, at a first scan) then read their
    # neighbours' memory when they are gated (at 100,000 targets, p99 of
    # the tick 25.8 against 34.1 ms at 2 threads, the same run), and ids
    # stay those of scan order. The order is the index's, read off it
    # (_births_by_cell) whatever the births' number (at 10,000 targets the
    # tentative gating at 2 threads took ~0.20 against ~0.27 ms with ~2,000
    # births a scan in scan order); without a direct-mode index, sorted
    # (_cell_order) from _BIRTH_ORDER_MIN births. The rows (zeroed, then
    # set) can be written by the workers in chunks, while one of them takes
    # their slots (the insert touches the slot maps alone).
    nfree = k.nborn
    nfit = min(nfree, tab.capacity - tab.count)
    cnt.births_dropped += nfree - nfit
    tab.failed += nfree - nfit     # each dropped birth is a refused insert
    par = par and nfit >= <size_t>nt * t.min_rows
    border = NULL
    if not t.two_point and grid_built and nfit >= 2:
        border = _births_by_cell(&k, nfit, dim, nt,
                                 par and k.grid.n >= _split_detections(t))
        bpos = k.bm.pos2
    if not t.two_point and border == NULL and nfit >= _BIRTH_ORDER_MIN:
        # (over the workers with enough births: serially, the sort of
        # ~20,000 births took ~1.4 ms of a two-thread tick at 100,000 targets)
        border = _cell_order(k.z, dim, k.born, dim, nfit, _BIRTH_BITS if dim == 2 else _BIRTH_BITS_3D,
                             t.grid_h, nt, par, &k.bm, NULL)
        bpos = k.bm.pos
    _insert_births(t, &k, nfit, par, border, bpos, NULL, dt, lc)
    t.next_id += nfit
    cnt.births += nfit
    if rows_before == 0 and tab.count > 0:      # a first scan's tracks (or all anew), in cell order
        _rows_in_order(t, tab.count)
    cnt.tentative = tab.count - cnt.confirmed     # births are tentative
    t.last = cnt
    t.scans += 1
    dod_arena_rewind(scratch, mark)
    clock = _pass_done(t, _PASS_BIRTHS, clock)
    # 7. Locality: put the rows back into order (_spatial_sort: confirmed
    # tracks first, in spatial order) every sort_every scans, or when the
    # leading rows have mixed (sort_when_mixed: more than that fraction of
    # rows [0, front) hold no confirmed track after management). Births
    # append at the end and deaths move the last row into the hole, so
    # without sorts a first scan's clutter rows, dying among the targets'
    # rows, leave holes that the churning tentative tracks fill for good
    # (at 1,000,000 targets the one-thread tick grew from ~175 to ~245 ms
    # over 45 scans); after a sort the churn stays behind the confirmed
    # tracks, which move a fraction of a cell per scan. Or when the rows in
    # order were displaced (sort_when_displaced: rows in order that deaths
    # emptied, _count_displaced, plus confirmed tracks in rows after them,
    # above that fraction of the rows in order): with few tentative tracks
    # (two-point births) the leading rows never mix, yet at 1,000,000
    # targets the one-thread tick grew from ~140 to ~190 ms over 100 scans.
    # (With confirmed_first the leading rows never mix either: its swaps
    # mark the rows in order they fill.) Or when the confirmed tracks have
    # moved sort_when_drifted grid cells since the last sort (their mean
    # speed, measured then and every _SPEED_EVERY scans, times the time):
    # motion scatters rows that nothing else moved (100,000 targets, two
    # threads: the tick crept from ~7.2 to ~9.5 ms over 2,000 scans).
    t.since_sort += 1
    if t.sort_when_drifted > 0.0:
        if t.since_sort % _SPEED_EVERY == 0:
            t.speed = _mean_speed(t, nt > 1)
        t.drift += dt * t.speed
    if (t.sort_every and t.since_sort >= t.sort_every) or \
            (t.sort_when_drifted > 0.0 and t.grid_h > 0.0 and t.drift > t.sort_when_drifted * t.grid_h) or \
            (t.sort_when_mixed > 0.0 and <double>mixed > t.sort_when_mixed * <double>k.front) or \
            (t.sort_when_displaced > 0.0 and
             <double>(t.displaced_rows + unplaced) > t.sort_when_displaced * <double>t.ordered_rows):
        # Cells of this scan's index as built (its side may be widened
        # beyond the one asked); without one, the next scan's side. (Not
        # k.grid.h whenever: with workers a scan of only invalid rows
        # starts an index that serially is never begun, and the rows of
        # such a scan took another order at one thread than at two.)
        if _spatial_sort(t, scratch, k.grid.h if grid_built else t.grid_h):
            _rows_in_order(t, cnt.confirmed)    # (the sort puts the confirmed tracks first)
            t.since_sort = 0
            t.drift = 0.0
            if t.sort_when_drifted > 0.0:
                t.speed = _mean_speed(t, nt > 1)
            t.sorts += 1
        dod_arena_rewind(scratch, mark)
        _pass_done(t, _PASS_SORT, clock)
    return 0


# ---------------------------------------------------------------- the owner

# The spatial sort's fixed part: per-chunk radix counts, bounds, ORs and confirmed counts, with rounding.
cdef size_t _SORT_BYTES = _SORT_CHUNKS * (257 * sizeof(size_t) + 6 * sizeof(double) + sizeof(uint32_t)) + 5 * 4096


cdef size_t _round_up(size_t x) noexcept:
    return (x + 127) & ~(<size_t>63)


cdef size_t _scratch_bytes(size_t cap, size_t dmax, int dim) noexcept:
    """Worst-case fixed-size temporaries of one tick, plus room for cluster matrices."""
    cdef size_t nb = 1, total = 0, pairs = _PAIRS_PER_NODE * (cap + dmax) + 64
    while nb < 2 * dmax:
        nb <<= 1
    total += 2 * _round_up(dmax * dim * 8) + 2 * _round_up(dmax * 24) + _round_up((nb + 1) * 4)
    total += _round_up(dmax * 4) + _round_up(cap * dim * dim * 8) + _round_up(cap * dim * 8)
    total += _round_up(cap) + _round_up(dmax * 4) + _round_up(cap * 4)
    total += 2 * _round_up((cap + dmax + 1) * 4) + _round_up(cap * 4) + _round_up(dmax * 4) + _round_up(cap * 8)
    total += 5 * _round_up(pairs * 4) + _round_up(pairs * 8)       # pt pd porder glob_t glob_d, pc
    total += _round_up(dmax) + 2 * _round_up(dmax * 4)     # two-point pairing (sused, sbest, dbest)
    total += _round_up(dmax * dim * 8) + _round_up(cap * dim * 8) + _round_up(cap * dim * dim * 8)  # zm hp J
    total += 3 * _round_up(cap * 4) + _round_up(dmax * 4)     # deaths: hole, fill, slot; births: born
    total += 4 * _round_up(dmax * 4) + 2 * _round_up(dmax * dim * 8) + _SORT_BYTES   # births' spatial order
    total += _round_up(dmax * 4)            # det_pairs (lone pairs of the association)
    total += _CLUSTER_BYTES + (1 << 16)      # cluster cost matrices: 16 MiB holds a 1000 x 1000 cluster
    # The spatial sort after the tick reuses the same bytes: keys, rows and
    # one column's worth of gathered rows (the covariance is the widest:
    # dim (2 dim + 1) values packed).
    return max(total, _round_up(cap * 16) + _round_up(cap * dim * (2 * dim + 1) * 8) + _SORT_BYTES)


def scratch_bytes(config):
    """Bytes of scratch arena a tick may need at this config's capacity and
    max_detections (worst case, with 16 MiB for cluster cost matrices).

    Size a shared arena with it, e.g. ``Loop(step, scratch_bytes=...)`` when
    the tracker borrows the loop's scratch. Anonymous pages cost nothing
    until a tick touches them. TypeError for anything but a TrackerConfig."""
    from dod.tracker.config import TrackerConfig
    if not isinstance(config, TrackerConfig):
        raise TypeError(f"config must be a TrackerConfig, got {type(config).__name__}")
    return max(_scratch_bytes(config.capacity, config.max_detections, config.dim),
               _imm_sort_bytes(config))


cdef size_t _imm_sort_bytes(config):
    """The spatial sort's scratch when the IMM's Pm column is the widest row."""
    cdef size_t N = 2 * config.dim + 1
    if config.motion != "imm":
        return 0
    return _round_up(config.capacity * 16) + _round_up(config.capacity * DOD_IMM_MODELS * N * N * 8) + _SORT_BYTES


cdef void _init_imm(dod_imm* m, config, Table table) except *:
    """The IMM's parameters (validated by TrackerConfig) and column pointers."""
    cdef int i
    m.models = DOD_IMM_MODELS
    m.N = 2 * config.dim + 1
    m.q[0] = config.imm_q[0]
    m.q[1] = config.imm_q[1]
    m.q[2] = config.turn_q
    m.qw = config.turn_rate_q
    m.w0var = config.turn_rate_v0 * config.turn_rate_v0
    tr = np.asarray(config.imm_transition, dtype=np.float64).ravel()
    for i in range(DOD_IMM_MODELS * DOD_IMM_MODELS):
        m.trans[i] = tr[i]
    for i in range(DOD_IMM_MODELS):
        m.mu0[i] = float(config.imm_mu0[i])
    m.mu = <double*>table.engine.columns[table.column_index("mu")]
    m.xm = <double*>table.engine.columns[table.column_index("xm")]
    m.Pm = <double*>table.engine.columns[table.column_index("Pm")]


def track_schema(int dim, str motion="cv"):
    """The track table's Schema for `dim` (2 or 3) spatial dimensions.

    id uint64 (0: no track; ids are never reused), x float64[2*dim]
    (position then velocity), P float64[dim*(2*dim+1)] (the covariance,
    packed: its upper triangle row by row, dod.tracker.unpack_covariance), hits,
    misses (consecutive), age (scans since birth), history (detection bits,
    latest in bit 0) as uint32, state uint8 (0 none, 1 tentative, 2
    confirmed), score and score_max float64 (the track score and its
    running maximum; 0 unless confirmation="score"). With motion="imm"
    also mu float64[3] (model probabilities: CV low, CV high, turn), xm
    float64[3, 2*dim+1] and Pm float64[3, 2*dim+1, 2*dim+1] (each model's
    state, position, velocity and turn rate, and covariance); x and P then
    hold the models' combination. Every column is zeroed on insert (ZII).
    """
    from dod.table import Schema
    if dim not in (2, 3):
        raise ValueError("dim must be 2 or 3")
    if motion not in ("cv", "imm"):
        raise ValueError("motion must be 'cv' or 'imm'")
    n = 2 * dim
    imm = {}
    if motion == "imm":
        imm = dict(mu=(np.float64, (DOD_IMM_MODELS,)), xm=(np.float64, (DOD_IMM_MODELS, n + 1)),
                   Pm=(np.float64, (DOD_IMM_MODELS, n + 1, n + 1)))
    return Schema(id=np.uint64, x=(np.float64, (n,)), P=(np.float64, (n * (n + 1) // 2,)), hits=np.uint32,
                  misses=np.uint32, age=np.uint32, history=np.uint32, state=np.uint8,
                  score=np.float64, score_max=np.float64, **imm)


_COLUMNS = ("id", "x", "P", "hits", "misses", "age", "history", "state", "score", "score_max")
_IMM_COLUMNS = ("mu", "xm", "Pm")


cdef dod_tick_counts _zero_counts


# The names of the per-tick counters, in the order of their one declaration
# (the dod_tick_counts struct in _engine.pxd): the keys of Tracker.counts()
# and the order of Tracker.read_counts.
COUNT_NAMES = tuple(_zero_counts)

# read_counts copies the struct as an array of uint64: every field is a size_t.
if sizeof(dod_tick_counts) != len(COUNT_NAMES) * sizeof(uint64_t) or sizeof(size_t) != sizeof(uint64_t):
    raise ImportError("dod_tick_counts must hold only 64-bit size_t fields")


cdef object _Sensor = None


cdef void _read_sensor(object sensor, int dim, bint two_point, dod_sensor* out) except *:
    """Fill `out` from a dod.tracker.Sensor, re-checking its values (a frozen
    dataclass can still be written through object.__setattr__). Allocates
    nothing for a valid sensor."""
    global _Sensor
    cdef int a
    cdef double v
    if _Sensor is None:
        from dod.tracker.sensor import Sensor
        _Sensor = Sensor
    if not isinstance(sensor, _Sensor):
        raise TypeError(f"sensor must be a dod.tracker.Sensor, not {type(sensor).__name__}")
    if two_point:
        raise ValueError("range-bearing scans (sensor=...) need initiation='single'")
    pos = sensor.position
    if not isinstance(pos, tuple) or len(pos) != dim:
        raise ValueError(f"sensor position must have {dim} coordinates for this {dim}-D tracker, "
                         f"not {pos!r}")
    memset(out, 0, sizeof(dod_sensor))
    for a in range(dim):
        v = pos[a]
        if not isfinite(v):
            raise ValueError(f"sensor position must be finite, not {pos!r}")
        out.pos[a] = v
    for a in range(dim):
        v = sensor.range_sigma if a == 0 else (sensor.bearing_sigma if a == 1 else sensor.elevation_sigma)
        if not (isfinite(v) and v > 0.0):
            raise ValueError(f"sensor noise must be positive and finite, not {v!r}")
        out.var[a] = v * v


# ---------------------------------------------------------------- prefault over threads

cdef extern from "_os.h" nogil:
    size_t dod_os_prefault(void* p, size_t size)
    size_t dod_os_page_round(size_t size)
    void* dod_os_map(size_t size)
    void dod_os_unmap(void* p, size_t size)

cdef enum:
    _PREFAULT_PIECE = 64 << 20      # bytes a thread faults in at a time (page-aligned cuts)

cdef struct _fault_piece:
    char* p
    size_t n
    size_t done         # bytes of pages faulted in (0 with n > 0: failed, err says why)
    int err


cdef size_t _cut_pieces(_fault_piece* out, size_t at, char* p, size_t n) noexcept:
    """Cut [p, p + n) at the multiples of _PREFAULT_PIECE into out[at:] (NULL:
    count only); returns at plus the pieces. The cuts are page-aligned, so the
    pieces' page spans add up to the range's (dod_os_prefault's bytes)."""
    cdef size_t m
    while n > 0:
        m = min(n, _PREFAULT_PIECE - <size_t>(<uintptr_t>p % _PREFAULT_PIECE))
        if out != NULL:
            out[at].p = p
            out[at].n = m
            out[at].done = 0
            out[at].err = 0
        at += 1
        p += m
        n -= m
    return at


cdef size_t _cut_arena(_fault_piece* out, size_t at, Arena a) noexcept:
    """_cut_pieces over every block of arena `a`."""
    cdef dod_arena_block* b = &a._first
    while b != NULL:
        at = _cut_pieces(out, at, b.base, b.capacity)
        b = b.next
    return at


cdef size_t _cut_table(_fault_piece* out, size_t at, Table t) noexcept:
    """_cut_pieces over every block of table `t` (its columns and slot map)."""
    cdef size_t i
    for i in range(t._nblocks):
        at = _cut_pieces(out, at, <char*>t._blocks[i], t._block_sizes[i])
    return at


cdef size_t _cut_tracker(_fault_piece* out, Tracker tr):
    """_cut_pieces over all a tick can touch: what Tracker.prefault faults in."""
    cdef size_t at = _cut_table(out, 0, tr.table)
    at = _cut_table(out, at, tr.singles)
    if tr.engine.displaced != NULL:
        at = _cut_pieces(out, at, <char*>tr.engine.displaced, tr._displaced_bytes)
    at = _cut_arena(out, at, tr.scratch)
    for wa in tr._worker_arenas:
        at = _cut_arena(out, at, <Arena>wa)
    return at


cdef int _hold_tables(Tracker tr, str what) except -1:
    """Begin the exclusive passes of both of tr's tables (named `what`) and
    mark it busy: all or nothing (RuntimeError from a held table)."""
    tr.table.begin_exclusive(what)
    try:
        tr.singles.begin_exclusive(what)
    except BaseException:
        tr.table.end_exclusive()
        raise
    tr._busy = True
    return 0


cdef void _release_tables(Tracker tr) noexcept:
    """End what _hold_tables began."""
    tr._busy = False
    tr.singles.end_exclusive()
    tr.table.end_exclusive()


@cython.final
cdef class Tracker:
    """Tracker(config=None, *, scratch=None, **overrides)

    A constant-velocity (or, with ``motion="imm"``, interacting multiple
    model) multi-target tracker (global nearest neighbour).

    `config` is a :class:`~dod.tracker.TrackerConfig` (keyword overrides
    build one). The tracks are the rows of :attr:`table`, a
    :class:`dod.table.Table` of ``config.capacity`` rows (schema:
    :func:`track_schema`); each row has a stable handle while its track
    lives. Each :meth:`tick` takes its temporaries from :attr:`scratch` (its
    own arena by default, or one you pass, e.g. a :class:`~dod.loop.Loop`'s)
    and gives them back before it returns.

    The tracker owns its table: read it (views, handles, Arrow export), but
    do not insert, remove or write rows yourself.

    Parameters
    ----------
    config : TrackerConfig, optional
        The model, gating and management settings (defaults if None).
    scratch : Arena, optional
        Where each tick's temporaries come from; by default the tracker's
        own arena of :func:`scratch_bytes`.
    **overrides
        Fields of :class:`~dod.tracker.TrackerConfig` that replace those of
        `config`.

    Attributes
    ----------
    table : dod.table.Table
        The tracks, one row each.
    singles : dod.table.Table
        Detections waiting for a partner (two-point initiation).
    scratch : dod.arena.Arena
        Per-tick temporaries (mark and rewind each tick).
    config : TrackerConfig
        The settings in force.

    Raises
    ------
    TypeError, ValueError
        For a bad config or override (as :class:`~dod.tracker.TrackerConfig`).
    MemoryError
        When the table or the scratch cannot be allocated.

    Notes
    -----
    Thread-safety: one thread at a time. tick() releases the GIL while it
    runs, so other Python threads run meanwhile. A second tick() of the same
    tracker from another thread raises RuntimeError; other threads must not
    mutate its table or use its scratch arena meanwhile (reading the views
    is safe: the memory stays valid, values may be mid-update). With
    ``config.threads > 1`` the tick itself runs on that many OpenMP threads
    (libgomp's pool, made on the first threaded tick and kept); the result
    is bit-identical for every thread count, given a scratch arena of at
    least :func:`scratch_bytes` (a smaller one the caller passes can make a
    large cluster go greedy in one thread count and not another). The rows
    hold the confirmed tracks first (``config.confirmed_first``) and are
    sorted by position now and then (``config.sort_when_drifted``,
    ``sort_when_displaced``, ``sort_when_mixed``, ``sort_every``): handles
    stay valid, row indices do not (as after deaths).
    """

    def __cinit__(self, config=None, *, Arena scratch=None, **overrides):
        from dod.tracker.config import TrackerConfig
        if config is None:
            config = TrackerConfig(**overrides)
        elif overrides:
            import dataclasses
            config = dataclasses.replace(config, **overrides)
        if not isinstance(config, TrackerConfig):
            raise TypeError("config must be a TrackerConfig")
        self.config = config
        cdef int dim = config.dim
        cdef Table table = Table(track_schema(dim, config.motion), config.capacity)
        cdef dod_tracker* e = &self.engine
        self.table = table
        e.table = &table.engine
        e.cols.id = <uint64_t*>table.engine.columns[table.column_index("id")]
        e.cols.x = <double*>table.engine.columns[table.column_index("x")]
        e.cols.P = <double*>table.engine.columns[table.column_index("P")]
        e.cols.hits = <uint32_t*>table.engine.columns[table.column_index("hits")]
        e.cols.misses = <uint32_t*>table.engine.columns[table.column_index("misses")]
        e.cols.age = <uint32_t*>table.engine.columns[table.column_index("age")]
        e.cols.history = <uint32_t*>table.engine.columns[table.column_index("history")]
        e.cols.state = <uint8_t*>table.engine.columns[table.column_index("state")]
        e.cols.score = <double*>table.engine.columns[table.column_index("score")]
        e.cols.score_max = <double*>table.engine.columns[table.column_index("score_max")]
        if config.motion == "imm":
            _init_imm(&e.imm, config, table)
        # Waiting detections of two-point initiation: a ZII table of their own,
        # sized once (one scan's detections at most).
        from dod.table import Schema
        cdef Table singles = Table(Schema(z=(np.float64, (dim,))),
                                   config.max_detections if config.initiation == "two_point" else 1)
        self.singles = singles
        e.singles = &singles.engine
        e.single_z = <double*>singles.engine.columns[0]
        e.score_logic = config.confirmation == "score"
        e.two_point = config.initiation == "two_point"
        e.log_pd = log(config.pd)
        e.log_miss = log(1.0 - config.pd)
        e.log_birth = log(config.new_target_density)
        e.score_confirm = config.confirm_threshold
        e.score_delete = config.delete_threshold
        e.score_drop = config.score_drop
        e.v_max = config.v_max
        e.pair_noise = config.pair_radius_factor * config.r
        e.clutter_fixed = config.clutter_density is not None
        e.clutter = config.clutter_density if e.clutter_fixed else 0.0
        e.volume = config.surveillance_volume or 0.0
        e.clutter_w = config.clutter_smoothing
        e.max_detections = config.max_detections
        e.dim = dim
        e.n = 2 * dim
        e.q = config.q
        e.r = config.r
        e.v0 = config.v0
        e.gate = config.gate
        e.confirm_m = config.confirm_m
        e.confirm_n = config.confirm_n
        e.max_misses = config.max_misses
        e.max_cluster = config.max_cluster
        e.next_id = 1
        e.sort_every = config.sort_every
        e.sort_when_mixed = config.sort_when_mixed
        e.sort_when_displaced = config.sort_when_displaced
        e.sort_when_drifted = config.sort_when_drifted
        e.confirmed_first = config.confirmed_first
        if config.sort_when_displaced > 0:
            # A byte a row (set on the calling thread alone), in pages of
            # its own: zero from the start, and the same pages for prefault
            # whatever the heap's alignment.
            self._displaced_bytes = dod_os_page_round(table.engine.capacity)
            e.displaced = <uint8_t*>dod_os_map(self._displaced_bytes)
            if e.displaced == NULL:
                raise MemoryError()
        # Threads: OpenMP parallel regions of the tick (libgomp keeps its
        # pool of threads between regions: none is created per tick). Each
        # worker takes cluster matrices from its own arena, made here once.
        self._worker_arenas = []
        if config.threads > 1:
            self._workers = <dod_arena**>PyMem_Malloc(config.threads * sizeof(dod_arena*))
            if self._workers == NULL:
                raise MemoryError()
            for w in range(config.threads):
                wa = Arena(_CLUSTER_BYTES + (1 << 16))
                self._worker_arenas.append(wa)
                self._workers[w] = &(<Arena>wa).engine
            e.workers = self._workers
        e.threads = config.threads
        e.min_rows = config.parallel_min_rows
        self._overflow_drop = config.overflow == "drop"
        self.scratch = scratch if scratch is not None else Arena(max(
            _scratch_bytes(config.capacity, config.max_detections, dim), _imm_sort_bytes(config)))

    def __dealloc__(self):
        PyMem_Free(self._workers)
        dod_os_unmap(self.engine.displaced, self._displaced_bytes)

    @property
    def threads(self):
        """Threads of one tick (config.threads)."""
        return self.engine.threads if self.engine.threads > 0 else 1

    @property
    def sorts(self):
        """Spatial sorts of the track rows so far (every config.sort_every scans)."""
        return self.engine.sorts

    @property
    def profile(self):
        """Whether each tick times its passes (default False); see last_profile().

        On, a tick reads the clock twice a pass and each worker twice a
        parallel region: tens of nanoseconds each, nothing allocated.
        Setting it while a tick runs in another thread raises RuntimeError."""
        return bool(self.engine.profile)

    @profile.setter
    def profile(self, value):
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        self.engine.profile = bool(value)

    def read_profile(self, cnp.ndarray out not None):
        """Write the latest tick's profile into `out`, allocating nothing.

        Each pass's wall time in ms in PASS_NAMES order, then each pass's idle
        ms (:meth:`last_profile`'s numbers; zeros for a tick with profile off).
        A loop can sum it every tick.

        Parameters
        ----------
        out : numpy.ndarray
            float64, contiguous, at least ``2 * len(PASS_NAMES)`` elements.

        Raises
        ------
        TypeError, ValueError
            For another dtype, layout or a shorter array.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        cdef double* o
        cdef int p
        if cnp.PyArray_TYPE(out) != cnp.NPY_FLOAT64 or not cnp.PyArray_IS_C_CONTIGUOUS(out):
            raise TypeError("out must be a contiguous float64 array")
        if cnp.PyArray_SIZE(out) < 2 * DOD_TICK_PASSES or not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError(f"out must be writable with at least {2 * DOD_TICK_PASSES} elements")
        o = <double*>cnp.PyArray_DATA(out)
        for p in range(DOD_TICK_PASSES):
            o[p] = self.engine.prof.wall_ns[p] / 1e6
            o[DOD_TICK_PASSES + p] = self.engine.prof.idle_ns[p] / 1e6

    def last_profile(self):
        """Where the latest tick's time went.

        wall_ms is the calling thread's wall-clock time in the pass (the passes
        add up to the tick, less the call's own checks). idle_ms is the sum over
        the workers of their time waiting inside the pass's row-chunk regions:
        each region's wall time times its threads, less each worker's time from
        its entry to the end of its last chunk (start-up, waiting for the
        slowest chunk, the closing barrier, and in the predict pass a worker's
        wait for the detection index); 0.0 for a serial pass. The other regions
        (the index's build and drop in parts, union-find and the cluster solve,
        the births' order, confirmed_first's swaps) count in wall_ms only.
        "sort" is 0.0 except in a tick that ran the spatial sort (sort_every).

        Returns
        -------
        dict or None
            ``{pass: (wall_ms, idle_ms)}`` in PASS_NAMES order, or None when that
            tick ran with profile off (or there was none).

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        cdef int p
        cdef int64_t total = 0
        for p in range(DOD_TICK_PASSES):
            total += self.engine.prof.wall_ns[p]
        if total == 0:
            return None
        return {PASS_NAMES[p]: (self.engine.prof.wall_ns[p] / 1e6, self.engine.prof.idle_ns[p] / 1e6)
                for p in range(DOD_TICK_PASSES)}

    def prefault(self, threads=None):
        """Fault in every page a tick can touch.

        That is the table at its full ``capacity`` (and the two-point waiting
        table), the scratch arena (all of it: a tick's temporaries at the worst
        case, :func:`scratch_bytes`) and each worker's arena. Without it those
        pages are touched for the first time by whichever tick first reaches
        them: a page fault inside the deadline, and RSS that rises with the
        table's peak row count and the scratch's high-water mark for minutes
        (bounded by the capacity, but not flat). With it RSS is the worst case
        from the start and stays there. Call it once, before the loop (the demo
        does, unless ``--no-prefault``). Contents do not change.

        Parameters
        ----------
        threads : int, optional
            Default: the tracker's ``threads``; an int in [1, 256]. The pages are
            faulted in over that many OpenMP threads, 64 MiB at a time: where the
            system backs fresh pages slowly (a VM whose host must back them too:
            4 GiB took 21-28 s on one thread there, 14-16 on two) more threads
            take less time. The same pages and the same bytes at any count.

        Returns
        -------
        int
            The bytes of pages touched.

        Raises
        ------
        RuntimeError
            While a tick runs in another thread (and a tick is refused while this
            runs).
        MemoryError
            When the system cannot back the pages (part may be resident, nothing
            else changes).

        Notes
        -----
        Thread-safety: one thread at a time, not while a tick runs in another thread.
        """
        cdef int nt
        cdef size_t npieces = 0, total = 0, i
        cdef Py_ssize_t j
        cdef _fault_piece* pieces = NULL
        cdef int err = 0
        cdef bint failed = False
        if self.table is None or self.scratch is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if threads is None:
            nt = self.engine.threads
        elif not isinstance(threads, int) or isinstance(threads, bool) or not (1 <= threads <= DOD_TRACKER_MAX_THREADS):
            raise ValueError(f"threads must be an int in [1, {DOD_TRACKER_MAX_THREADS}] or None, not {threads!r}")
        else:
            nt = threads
        if self._busy:
            raise RuntimeError("a tick of this tracker is already running in another thread")
        # The tables' exclusive passes, as their own prefault takes them
        # (inserts from other threads refused meanwhile).
        _hold_tables(self, "a prefault")
        try:
            npieces = _cut_tracker(NULL, self)
            pieces = <_fault_piece*>PyMem_Malloc(max(<size_t>1, npieces) * sizeof(_fault_piece))
            if pieces == NULL:
                raise MemoryError()
            _cut_tracker(pieces, self)
            with nogil:
                for j in prange(<Py_ssize_t>npieces, num_threads=nt, schedule="dynamic"):
                    pieces[j].done = dod_os_prefault(pieces[j].p, pieces[j].n)
                    if pieces[j].done == 0:
                        pieces[j].err = errno
            for i in range(npieces):
                if pieces[i].done == 0:         # (every piece has n > 0)
                    failed = True
                    err = pieces[i].err
                    break
                total += pieces[i].done
        finally:
            PyMem_Free(pieces)
            _release_tables(self)
        if failed:
            raise MemoryError(f"the system could not fault in this tracker's memory ({strerror(err).decode()}); "
                              "contents unchanged")
        return total

    def tick(self, cnp.ndarray detections not None, double dt, sensor=None):
        """Advance all tracks by `dt` seconds and fold in one scan of detections.

        One nogil call; allocates nothing.

        Parameters
        ----------
        detections : numpy.ndarray
            float64, shape (k, dim), C-contiguous (k may be 0): Cartesian
            positions, or with ``sensor`` range-bearing measurements (range,
            bearing[, elevation]) in metres and radians, bearing from the x axis
            towards y, elevation above the x-y plane. Rows with NaN or inf
            (range-bearing: also a negative range or an elevation outside
            [-pi/2, pi/2]) are dropped and counted (``invalid``). With more than
            ``max_detections`` rows, overflow="error" raises ValueError and
            overflow="drop" uses the first max_detections (the rest counted in
            ``overflow``).
        dt : float
            Seconds since the previous scan (finite, > 0).
        sensor : dod.tracker.Sensor, optional
            Its position and noise for this scan. Such a scan is folded in by an
            extended Kalman update (dod/tracker/measurement.pxd), gated in
            measurement space, and starts tracks at the converted positions with
            the converted covariance; scans of several sensors may follow each
            other in time order.

        Raises
        ------
        TypeError
            For a wrong dtype or layout, or a sensor that is not a Sensor.
        ValueError
            For a wrong shape or dt; too many rows with overflow="error"; a
            sensor of the other dimension, with a non-finite position or a
            non-positive noise, or with initiation="two_point" (not supported
            with range-bearing scans).
        MemoryError
            When a caller-supplied scratch arena cannot hold the tick's
            temporaries.
        RuntimeError
            When another thread's tick of this tracker is running.

        Notes
        -----
        Every check runs before anything changes: the tracker is unchanged when
        it raises. Thread-safety: one tick at a time; it releases the GIL while
        it runs (see the class notes).
        """
        cdef size_t k, over = 0
        cdef int rc
        cdef const double* data
        cdef dod_sensor sens
        cdef const dod_sensor* sp = NULL
        if self.table is None or self.scratch is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if sensor is not None:
            _read_sensor(sensor, self.engine.dim, self.engine.two_point, &sens)
            sp = &sens
        if cnp.PyArray_TYPE(detections) != cnp.NPY_FLOAT64:
            raise TypeError(f"detections must be float64, not {(<object>detections).dtype}")
        if cnp.PyArray_NDIM(detections) != 2 or cnp.PyArray_DIM(detections, 1) != self.engine.dim:
            raise ValueError(f"detections must have shape (k, {self.engine.dim}), "
                             f"not {(<object>detections).shape}")
        if not cnp.PyArray_IS_C_CONTIGUOUS(detections):
            raise ValueError("detections must be C-contiguous (np.ascontiguousarray)")
        if not (isfinite(dt) and dt > 0.0):
            raise ValueError(f"dt must be finite and > 0, not {dt!r}")
        k = <size_t>cnp.PyArray_DIM(detections, 0)
        if k > self.engine.max_detections:
            if not self._overflow_drop:
                raise ValueError(
                    f"{k} detections exceed max_detections={self.engine.max_detections} "
                    "(raise it, or use overflow='drop')")
            over = k - self.engine.max_detections
            k = self.engine.max_detections
        data = <const double*>cnp.PyArray_DATA(detections)
        if self._busy:
            raise RuntimeError("a tick (or a prefault) of this tracker is already running in another thread")
        # The tick moves the table's rows without the GIL: it holds the
        # table's exclusive pass, so another thread's insert cannot race the
        # tick's births past the capacity (and a tick waits for its own
        # table's remove_many).
        _hold_tables(self, "a Tracker tick")
        try:
            with nogil:
                rc = dod_tracker_tick_sensor(&self.engine, data, k, dt, sp, &self.scratch.engine)
        finally:
            _release_tables(self)
        if rc != 0:
            raise MemoryError(
                f"the scratch arena ({self.scratch.available} bytes available) cannot hold this "
                "tick's temporaries; nothing changed (dod.tracker.scratch_bytes(config) gives "
                "the worst case)")
        self.engine.last.overflow = over

    # -------------------------------------------------------- results (views, no copies)

    cdef object _view(self, str name):
        arr = self.table[name]
        arr.flags.writeable = False          # the engine writes; Python reads
        return arr

    @property
    def count(self):
        """Live tracks (tentative and confirmed)."""
        return self.engine.table.count

    def __len__(self):
        return self.engine.table.count

    def column(self, name):
        """Read-only view of the live rows of a column.

        Rows reorder when tracks die (the last row moves into the hole), confirm
        (confirmed tracks first) and when the rows are sorted: match rows by id
        or handle. The view shows the rows live when it was made, and stays safe
        to read (the table's memory never moves and lives as long as the view).

        Parameters
        ----------
        name : str
            id, x, P, hits, misses, age, history, state, score or score_max (and,
            with motion="imm", mu, xm, Pm: see track_schema).

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        KeyError
            For another name.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        if name not in _COLUMNS and not (self.engine.imm.models and name in _IMM_COLUMNS):
            raise KeyError(f"no column {name!r}; columns are {', '.join(_COLUMNS)}")
        return self._view(name)

    def columns(self):
        """Read-only views of every column's live rows.

        Returns
        -------
        dict
            Column name to a view, as :meth:`column`.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        out = self.table.columns()
        for arr in out.values():
            arr.flags.writeable = False
        return out

    def handles(self):
        """Stable table handles of the live rows.

        Returns
        -------
        numpy.ndarray
            A new uint64 array, in row order.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        return self.table.handles()

    @property
    def ids(self):
        """Read-only view of the live rows' track ids (uint64; 0 is no track)."""
        return self._view("id")

    @property
    def positions(self):
        """Read-only (count, dim) view of the live rows' positions."""
        return self._view("x")[:, :self.engine.dim]

    @property
    def velocities(self):
        """Read-only (count, dim) view of the live rows' velocities."""
        return self._view("x")[:, self.engine.dim:]

    @property
    def covariances(self):
        """The live rows' covariances, (count, n, n): a new read-only array
        unpacked from the P column (which stores each one's upper triangle:
        unpack_covariance)."""
        out = unpack_covariance(self._view("P"))       # dod/tracker/covariance.py
        out.flags.writeable = False
        return out

    @property
    def states(self):
        """1 tentative, 2 confirmed."""
        return self._view("state")

    @property
    def model_probabilities(self):
        """motion="imm": read-only (k, 3) view of the live rows' model
        probabilities (CV low, CV high, turn); None for motion="cv"."""
        return self._view("mu") if self.engine.imm.models else None

    @property
    def turn_rates(self):
        """motion="imm": the combined turn rate of each live row (rad/s,
        sum_j mu_j w_j; a new array); None for motion="cv"."""
        if not self.engine.imm.models:
            return None
        return np.einsum("kj,kj->k", self._view("mu"), self._view("xm")[:, :, 2 * self.engine.dim])

    @property
    def scores(self):
        """Track scores (log-likelihood ratios) of the live rows; zeros unless
        confirmation="score"."""
        return self._view("score")

    @property
    def clutter_density(self):
        """The clutter density the latest scan used: the config's, or the
        online estimate (0.0 before the first scan with detections)."""
        return self.engine.clutter

    @property
    def waiting(self):
        """Detections waiting for a partner (two-point initiation): a
        read-only (k, dim) view, in the tracker's order (the detection
        index's cell order, when the index held them all: next scan's
        pairing walks the index from each; else scan order)."""
        arr = self.singles["z"]
        arr.flags.writeable = False
        return arr

    @property
    def confirmed(self):
        """Boolean mask of the confirmed live rows (a new array)."""
        return self._view("state") == DOD_TRACK_CONFIRMED

    @property
    def scans(self):
        """Scans folded in so far (ticks run)."""
        return self.engine.scans

    def read_counts(self, cnp.ndarray out not None):
        """Write the latest tick's counters into `out`, allocating nothing.

        Parameters
        ----------
        out : numpy.ndarray
            uint64, contiguous, at least ``len(COUNT_NAMES)`` elements; filled in
            COUNT_NAMES order.

        Raises
        ------
        TypeError, ValueError
            For another dtype, layout or a shorter array.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        if cnp.PyArray_TYPE(out) != cnp.NPY_UINT64 or not cnp.PyArray_IS_C_CONTIGUOUS(out):
            raise TypeError("out must be a contiguous uint64 array")
        if <size_t>cnp.PyArray_SIZE(out) < sizeof(dod_tick_counts) // sizeof(uint64_t) \
                or not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError(f"out must be writable with at least {len(COUNT_NAMES)} elements")
        memcpy(cnp.PyArray_DATA(out), &self.engine.last, sizeof(dod_tick_counts))

    def counts(self):
        """The latest tick's counters.

        Returns
        -------
        dict
            Keys: COUNT_NAMES, in order.

        Notes
        -----
        Thread-safety: a reader; safe while no tick runs (during a tick the values may be mid-update).
        """
        return self.engine.last

    def confirmed_tracks(self, box=None):
        """The ids and positions of the confirmed tracks, in row order.

        One pass over the state and position columns, with the GIL held (no tick
        can start meanwhile): the demo samples GOSPA over a window of a
        100,000-track table this way, where a mask and fancy-indexed copies of
        the views took ~7 ms.

        Parameters
        ----------
        box : tuple, optional
            ``(lo, hi)``, dim numbers each (-inf / inf allowed): only the tracks
            with lo <= position <= hi on every axis. A box with lo > hi on an axis
            holds nothing.

        Returns
        -------
        tuple of numpy.ndarray
            ``(ids, positions)``: new arrays, ids uint64 (k,) and positions
            float64 (k, dim).

        Raises
        ------
        ValueError
            For a NaN in the box or a wrong length.

        Notes
        -----
        Thread-safety: any thread; it holds the GIL, so no tick of this tracker
        runs meanwhile.
        """
        cdef double lo[3]
        cdef double hi[3]
        cdef const dod_tracker* e = &self.engine
        cdef int dim = e.dim, a
        cdef size_t T, i, k = 0
        cdef cnp.ndarray ids_out, pos_out
        cdef uint64_t* po
        cdef double* xo
        if self.table is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
        if self._busy:
            raise RuntimeError("a tick of this tracker is running in another thread")
        for a in range(3):
            lo[a] = -INFINITY
            hi[a] = INFINITY
        if box is not None:
            blo, bhi = box
            blo = np.asarray(blo, dtype=np.float64).reshape(-1)
            bhi = np.asarray(bhi, dtype=np.float64).reshape(-1)
            if blo.shape[0] != dim or bhi.shape[0] != dim:
                raise ValueError(f"box must be (lo, hi) with {dim} numbers each")
            if np.isnan(blo).any() or np.isnan(bhi).any():
                raise ValueError("box must not hold NaN")
            for a in range(dim):
                lo[a] = blo[a]
                hi[a] = bhi[a]
        # One pass into arrays of the table's length: only the pages the
        # kept rows touch are ever faulted in, and a window is copied out.
        T = e.table.count
        ids_out = np.empty(T, dtype=np.uint64)
        pos_out = np.empty((T, dim), dtype=np.float64)
        po = <uint64_t*>cnp.PyArray_DATA(ids_out)
        xo = <double*>cnp.PyArray_DATA(pos_out)
        for i in range(T):
            if e.cols.state[i] == DOD_TRACK_CONFIRMED and _in_box(e.cols.x + i * e.n, lo, hi, dim):
                po[k] = e.cols.id[i]
                memcpy(xo + k * dim, e.cols.x + i * e.n, dim * sizeof(double))
                k += 1
        if 2 * k >= T:
            return ids_out[:k], pos_out[:k]
        return ids_out[:k].copy(), pos_out[:k].copy()

    def __repr__(self):
        c = self.engine.last
        return (f"<dod.tracker.Tracker dim={self.engine.dim} tracks={self.engine.table.count} "
                f"confirmed={c.confirmed} scans={self.engine.scans} "
                f"capacity={self.engine.table.capacity}>")
