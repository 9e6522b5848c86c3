# dod/tracker/_track.pxd: the tracker's state: the track columns, the
# parameters, the per-tick counters. Its parts live in
# kalman.pxd (filter algebra), grid.pxd (spatial index) and assignment.pxd
# (the solver). cimport it to run a tick from your own nogil code:
#
#     from dod.tracker._engine cimport Tracker, dod_tracker_tick
#     with nogil:
#         rc = dod_tracker_tick(&t.engine, dets, n_dets, dt, &scratch.engine)
#
# Storage: the tracks are the rows of a dod Table (dod/table.pxd), columns
# id, x, P, hits, misses, age, history, status, score, score_max (and with
# motion="imm" mu, xm, Pm, whose pointers live in `imm`: imm.pxd); `cols`
# caches their base pointers (table columns never move) and the live count
# is table.count. Two-point initiation keeps the detections waiting for a
# partner in a second table (`singles`, max_detections rows: each one's
# position z, its packed covariance C and its pair gate's noise allowance).
#
# Invariants
#   * Rows [0, table.count) are live tracks, packed (removal swaps the last
#     row in: dod_table_remove_row). ZII: an all-zero row is "no track" (id 0,
#     state NONE, zero covariance), which is what a stale handle's lookup
#     reads (the table's nil row). A birth inserts a zeroed row
#     (dod_table_insert) and writes only the fields it sets.
#   * A live row has id > 0 (unique, increasing with birth order), state
#     TENTATIVE or CONFIRMED, and a symmetric positive-definite covariance
#     (births set it explicitly: a zero covariance would mean certainty).
#   * history bit 0 is the latest scan (1: detected), bit k the scan k ago.
#
# Engine contract (checks the caller owns): `dets` holds n_dets * dim finite
# or non-finite doubles (non-finite rows are dropped and counted); n_dets <=
# max_detections; dt is finite and > 0; `scratch` is not used by anyone else
# during the call. Return 0, or -1 when the scratch arena cannot hold the
# tick's fixed-size temporaries: then nothing changed. With t.threads > 1
# the tick runs OpenMP parallel regions of t.threads threads and each worker
# w takes its cluster matrices from t.workers[w]; the result is bit-identical
# for every thread count (dod/tracker/_executor.pxd says how the passes split).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t

from dod.arena cimport dod_arena, Arena
from dod.table cimport dod_table, Table
from dod.tracker.imm cimport dod_imm
from dod.tracker.measurement cimport dod_sensor

cdef enum:
    DOD_TRACKER_MAX_THREADS = 256   # most threads of one tick (TrackerConfig.threads)

cdef enum:
    DOD_TRACK_NONE = 0
    DOD_TRACK_TENTATIVE = 1
    DOD_TRACK_CONFIRMED = 2


# x and P are read through two strides each (in elements of the column's
# type): element a of row i is x[i * xr + a * xs], P[i * Pr + a * Ps].
# They are float64 (x, P; xf and Pf NULL) or, with TrackerConfig's
# dtype="float32", float32 (xf, Pf; x and P NULL, `single` set): the
# per-row kernels compute in double either way, over a row converted into
# their locals and rounded back (dod_track_row_load / _store on a float
# column), and a pass that reads the columns itself picks its float or
# double loop once per call from `single`. Row-major columns have xr = n,
# xs = 1; component-major ones (Column(order="F"): one lane per element,
# consecutive tracks' element a contiguous) have xr = 1 and xs the lane's
# length, so a loop over tracks reads each element with unit stride. The
# per-row kernels (kalman.pxd, imm.pxd, measurement.pxd) take a contiguous
# row: dod_track_row_load / _store copy it in and out (plain copies: the
# same bits either way).
ctypedef struct dod_track_cols:
    uint64_t* id            # [capacity]        0: no track
    double* x               # [capacity, n]     position then velocity (NULL when single)
    double* P               # [capacity, n (n + 1) / 2] covariance, packed (kalman.pxd; NULL when single)
    float* xf               # x in float32 (dtype="float32"; else NULL)
    float* Pf               # P in float32 (dtype="float32"; else NULL)
    bint single             # x and P are float32: xf and Pf hold them
    size_t xr, xs           # x's row and element strides
    size_t Pr, Ps           # P's
    uint32_t* hits          # [capacity]        scans with a detection
    uint32_t* misses        # [capacity]        consecutive scans without one
    uint32_t* age           # [capacity]        scans since birth (1 at birth)
    uint32_t* history       # [capacity]        detection bits, latest in bit 0
    uint8_t* state          # [capacity]        DOD_TRACK_*: the status column
    double* score           # [capacity]        track score (log-likelihood ratio; confirmation="score")
    double* score_max       # [capacity]        its running maximum


# The per-tick counters: declared here once. Every field is a size_t; the
# Python face derives COUNT_NAMES, counts() and read_counts() from this struct
# (field order is their order), so a new counter is one line here (and one
# in the reference tracker's tick, which the oracle tests compare).
ctypedef struct dod_tick_counts:
    size_t detections       # valid detections used this scan
    size_t invalid          # rows with NaN/inf, dropped
    size_t overflow         # rows beyond max_detections, dropped (overflow="drop")
    size_t associations     # track-detection pairs updated
    size_t births
    size_t births_dropped   # births refused: table full
    size_t deaths
    size_t confirmed        # confirmed tracks after the scan
    size_t tentative        # tentative tracks after the scan
    size_t pairs            # gated pairs (both stages)
    size_t pairs_dropped    # gated pairs beyond the pair buffer
    size_t clusters         # clusters solved (single pairs included)
    size_t largest_cluster  # pairs in the largest cluster
    size_t greedy_clusters  # clusters solved greedily: above max_cluster, or no scratch for the matrix
    size_t unclaimed        # valid detections no confirmed track took (the clutter estimator's count)
    size_t singles          # detections left waiting for a partner (initiation="two_point")


# What happened in the latest tick (config.events; ZII: NULL arrays, off).
# The passes that decide each fact write it (dod/tracker/_events.pyx says
# which and how); the owner sizes the arrays once: the scan's rows and the
# births by max_detections, confirmations and deaths by the table's
# capacity (a tick has at most that many tracks).
ctypedef struct dod_tick_events:
    int64_t* track          # [max_detections] each scan row read: id of the track it updated, -1 none
    int32_t* row_of         # [max_detections] scan row of each valid detection (rows were dropped)
    uint64_t* born          # [max_detections] ids of the births, ascending
    int64_t* born_row       # [max_detections] the scan row of each birth's detection
    uint64_t* confirmed     # [capacity] ids confirmed this scan, in row order
    uint64_t* died          # [capacity] ids deleted this scan, in row order
    uint8_t* died_status    # [capacity] their status before (DOD_TRACK_TENTATIVE or _CONFIRMED)
    size_t rows             # entries of track: the scan's rows read
    size_t births, confirmations, deaths


# Where the latest tick's time went, pass by pass (t.profile on; PASS_NAMES in
# dod/tracker/_engine.pyx names the passes in this order). Wall-clock time of the calling
# thread, and for the passes that run parallel regions the workers' idle
# time in them: each region's wall time times its threads, less each
# worker's time from its entry to the end of its last chunk (the region's
# start-up, the wait for the slowest chunk, the barrier). It tells a
# many-core tick's serial parts and imbalance from its per-row cost.
cdef enum:
    DOD_TICK_PASSES = 7

ctypedef struct dod_tick_profile:
    int64_t wall_ns[DOD_TICK_PASSES]
    int64_t idle_ns[DOD_TICK_PASSES]


ctypedef struct dod_tracker:
    dod_table* table        # the track table (rows 0 .. table.count - 1 live)
    dod_track_cols cols     # its column base pointers
    size_t max_detections
    int dim                 # 2 or 3
    int n                   # 2 * dim
    double q, r, v0, gate
    uint32_t confirm_m, confirm_n, max_misses
    uint32_t max_cluster    # clusters with more tracks or detections go greedy (0: never)
    # track management in clutter (TrackerConfig: confirmation, initiation)
    bint score_logic        # confirmation == "score"
    bint two_point          # initiation == "two_point"
    double log_pd, log_miss # ln(pd), ln(1 - pd)
    double log_birth        # ln(new_target_density)
    double score_confirm, score_delete, score_drop
    double v_max, pair_noise    # pair gate: |z2 - z1| <= v_max * dt + allowance (a Cartesian single's: pair_noise)
    double pair_factor      # a single's allowance in standard deviations of its position (sqrt(2 gate))
    double clutter          # clutter density used this scan (0: no estimate yet)
    bint clutter_fixed      # given in the config: never estimated
    double volume           # surveillance volume for the estimator (0: box of the scan)
    double clutter_w        # smoothing weight of the newest scan
    dod_table* singles      # detections waiting one scan (rows 0 .. singles.count - 1)
    double* single_z        # its column z [max_detections, dim]: the position
    bint singles_polar      # the singles came from a range-bearing scan, or one with per-detection
                            # covariance: C and allowance hold theirs
    double* single_C        # its column C [max_detections, dim(dim+1)/2]: the position's packed covariance
    double* single_allowance    # its column allowance [max_detections]: the pair gate's noise term
                                # (Cartesian singles: r^2 I and pair_noise, not written)
    uint64_t next_id        # id of the next birth (starts at 1)
    dod_tick_counts last    # counters of the latest tick
    dod_tick_events events  # what happened in it (config.events)
    uint64_t scans          # ticks run
    # Threads and locality. ZII: 0 threads runs serially; sort_every, sort_when_mixed and
    # sort_when_displaced 0 never sort; displaced NULL does not count displaced rows.
    int threads             # OpenMP threads of one tick (0 or 1: serial, no parallel region)
    dod_arena** workers     # [threads] per-worker arenas for cluster matrices (NULL when serial)
    size_t min_rows         # a pass runs in parallel only with >= threads * min_rows rows
    uint32_t sort_every     # rows into spatial order every this many scans (0: never)
    double sort_when_mixed  # ... or when more than this fraction of the leading rows went unconfirmed (0: never)
    double sort_when_displaced  # ... or when more than this fraction of the rows in order were displaced (0: never)
    double sort_when_drifted    # ... or when the confirmed tracks moved this many grid cells since (0: never)
    double speed            # their mean speed (measured at each sort and every _SPEED_EVERY scans)
    double drift            # metres moved at that speed since the last sort
    bint confirmed_first    # management leaves the confirmed tracks in rows [0, confirmed) (0: deaths swap-remove anywhere)
    uint8_t* displaced      # [table capacity] 1: a row moved into this row since it was in order (NULL: not counted)
    size_t ordered_rows     # rows [0, ordered_rows) were in spatial order after the last sort (or first births)
    size_t displaced_rows   # the entries of displaced set (all below ordered_rows)
    uint32_t since_sort     # scans since the last spatial sort
    uint64_t sorts          # spatial sorts done
    double grid_h           # detection grid cell side for the next scan (0: none yet, from the scan's own tracks)
    dod_imm imm             # motion="imm" (dod/tracker/imm.pxd; ZII: imm.models 0 is constant velocity)
    # Tick profile (ZII: off). Two clock reads a pass and two a worker per
    # region when on; nothing when off.
    bint profile
    dod_tick_profile prof   # the latest tick's (zero when it was off)
    int64_t worker_in[DOD_TRACKER_MAX_THREADS]      # a region's entry and leaving time, per worker
    int64_t worker_out[DOD_TRACKER_MAX_THREADS]
    int64_t worker_wait[DOD_TRACKER_MAX_THREADS]    # time a worker spun inside the region (idle too)


ctypedef fused dod_track_real:      # the element type of the x and P columns
    float
    double


cdef inline void dod_track_row_load(const dod_track_real* col, size_t rs, size_t es, size_t i, int k,
                                    double* out) noexcept nogil:
    """The k elements of row i of a strided column (row stride rs, element
    stride es) into out[0 .. k), as doubles (a float column's exactly)."""
    cdef int a
    cdef const dod_track_real* p = col + i * rs
    for a in range(k):
        out[a] = p[<size_t>a * es]


cdef inline void dod_track_row_store(dod_track_real* col, size_t rs, size_t es, size_t i, int k,
                                     const double* v) noexcept nogil:
    """v[0 .. k) into row i of a strided column (dod_track_row_load's
    inverse; a float column's rounded to nearest)."""
    cdef int a
    cdef dod_track_real* p = col + i * rs
    for a in range(k):
        p[<size_t>a * es] = <dod_track_real>v[a]
