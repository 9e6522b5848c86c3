"""Association: global nearest neighbour within each cluster.

For one stage (confirmed tracks, then tentative ones with the detections
left), gate, cluster (_clusters.pyx), then solve each cluster exactly
(dod.tracker.assignment: minimises sum(d2 - gate) over the assigned
pairs), or greedily when its matrix exceeds _CLUSTER_BYTES or
max_cluster. Writes k.track_det and k.det_track, and the stage's counters.

Threads: clusters share no track and no detection, so they are solved in
any order on any worker, each worker's matrices from its own arena
(t.workers[w]); one budget for every thread count keeps the greedy choice
(and so the result) independent of it.
"""
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stdint cimport uint8_t, uint32_t, int32_t
from libc.string cimport memset
from dod.arena cimport dod_arena, dod_arena_mark, dod_arena_rewind
from dod._core cimport dod_prefetch
from dod.tracker.assignment cimport dod_assignment_solve
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport (_carve, _tick, _carver, _LONE_PARTS_MIN_THREADS, _LONE_PARTS_MIN_DETECTIONS,
                                 _CLUSTER_BYTES)
from dod.tracker._gate cimport _gate
from dod.tracker._clusters cimport _order_cluster, _lone_pairs, _clusters


cdef enum:
    _CLUSTER_CHUNK = 256            # clusters per dynamic chunk of the parallel cluster solve
    _CLUSTER_CHUNKS_PER_THREAD = 8  # its chunks per worker when there are fewer clusters
    _GROUP_PARTS_MIN = 16           # clustered pairs, times parallel_min_rows, for their grouping in parts
    # Clusters (those left after the lone pairs), times parallel_min_rows,
    # for their solve over the workers: below, the clusters' lists, written
    # by the calling thread, and their random rows and detections cost the
    # other cores more than their share saves.
    _SOLVE_PARTS_MIN = 4
    _CLUSTERS_AHEAD = 12            # clusters between a prefetch and the solve that uses it




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
    cdef _carver carver
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
        carver.arena = scratch
        carver.ok = True
        cost = <double*>_carve(&carver, <size_t>nr * nc, sizeof(double))
        gated = <uint8_t*>_carve(&carver, <size_t>nr * nc, 1)
        col4row = <int*>_carve(&carver, nr, sizeof(int))
        ok = carver.ok
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
        # the other, per cluster: fetched _CLUSTERS_AHEAD clusters ahead.
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


cdef void _associate(dod_tracker* t, _tick* k, dod_tick_counts* cnt, uint8_t stage,
                     dod_arena* scratch, bint gated) noexcept nogil:
    """One stage: gate (unless `gated`: the pairs are in the buffer, from the
    fused predict pass), split the pairs into clusters (union-find), solve each.

    Lone pairs are assigned at once; union-find of the other pairs runs
    over the workers where the lone pass does (many threads or
    detections), and so does their grouping when they are many; with
    threads the clusters, which share no track and no detection, are
    solved in parallel, each worker with its own arena."""
    cdef size_t T = k.T, greedy = 0, chunks, ch, lone = 0, m = 0, ncl = 0, csize
    cdef int32_t acc, c
    cdef int nt = t.threads
    cdef bint wide
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
    # threads or detections over the workers).
    wide = nt > 1 and (nt >= _LONE_PARTS_MIN_THREADS or k.D >= _LONE_PARTS_MIN_DETECTIONS) \
        and T >= <size_t>nt * t.min_rows
    lone = _lone_pairs(k, &m, nt, wide)
    cnt.clusters += lone
    if lone > 0 and cnt.largest_cluster < 1:
        cnt.largest_cluster = 1
    if m == 0:
        return
    # The root of a cluster is its smallest node (the larger root goes
    # under the smaller), whatever the order of the unions: a track row.
    # Where the lone pass ran over the workers, so do the unions and the
    # roots, and with many clustered pairs the grouping too (with few, the
    # parts' regions would cost more than they save).
    ncl = _clusters(k, m, nt, wide, m >= <size_t>_GROUP_PARTS_MIN * t.min_rows)
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
