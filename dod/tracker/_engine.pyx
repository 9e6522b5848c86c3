"""The tracker engine: one nogil call per scan.

Reading order: linear algebra kernels (predict, gate, Joseph update), the
spatial index, the assignment solver, one association stage (gate, cluster,
solve), the tick, then the owner class and its Python face.

Association is global nearest neighbour on gated pairs: within each cluster
of tracks and detections linked by gated pairs it minimises
``sum(d2 - gate)`` over the assigned pairs (``d2`` the squared Mahalanobis
distance), i.e. the total distance plus ``gate`` for every track left
unassigned. Confirmed tracks take detections first; tentative tracks then
compete for what is left. The reference tracker (dod.tracker.reference)
states the same rules in numpy.
"""
cimport cython
cimport numpy as cnp
from libc.math cimport sqrt, floor, isfinite, INFINITY
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int32_t, int64_t
from libc.string cimport memset, memcpy

from dod.arena cimport (dod_arena, Arena, dod_arena_push, dod_arena_mark,
                        dod_arena_rewind)
from dod.table cimport (dod_table, Table, dod_table_insert, dod_table_remove_row,
                        dod_table_handle)

import numpy as np

cnp.import_array()

cdef inline uint32_t _popcount(uint32_t v) noexcept nogil:
    # SWAR: without -mpopcnt, __builtin_popcount is a libgcc call.
    v = v - ((v >> 1) & 0x55555555u)
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u)
    v = (v + (v >> 4)) & 0x0F0F0F0Fu
    return (v * 0x01010101u) >> 24

cdef enum:
    _ALIGN = 64
    _MAXN = 6
    _PAIRS_PER_NODE = 16

cdef double _CELL_LIMIT = 1099511627776.0      # 2**40: clamp of grid coordinates


# ---------------------------------------------------------------- kernels

cdef inline void _predict(double* x, double* P, int d, double dt, double q) noexcept nogil:
    """x = F x, P = F P F' + Q for the constant-velocity model (blocks of size d)."""
    cdef int n = 2 * d, i, j
    cdef double a, b, bt, c
    cdef double q11 = q * dt * dt * dt / 3.0, q12 = q * dt * dt / 2.0, q22 = q * dt
    for i in range(d):
        x[i] += dt * x[d + i]
    # A' = A + dt (B + B') + dt^2 C + Q11; B' = B + dt C + Q12; C' = C + Q22.
    # P is kept symmetric, so compute the upper blocks and mirror them.
    for i in range(d):
        for j in range(d):
            a = P[i * n + j]
            b = P[i * n + d + j]
            bt = P[(d + i) * n + j]
            c = P[(d + i) * n + d + j]
            P[i * n + j] = a + dt * (b + bt) + dt * dt * c
            P[i * n + d + j] = b + dt * c
    for i in range(d):
        P[i * n + i] += q11
        P[i * n + d + i] += q12
        P[(d + i) * n + d + i] += q22
    for i in range(d):
        for j in range(d):
            P[(d + i) * n + j] = P[j * n + d + i]
    for i in range(n):                  # exact symmetry of the A and C blocks
        for j in range(i + 1, n):
            a = 0.5 * (P[i * n + j] + P[j * n + i])
            P[i * n + j] = a
            P[j * n + i] = a


cdef inline bint _innovation_inverse(const double* P, int d, double r2, double* Si) noexcept nogil:
    """Si = (H P H' + R)^-1 (d x d, symmetric); False when S is not positive definite."""
    cdef int n = 2 * d
    cdef double a, b, c, det, e, f, g, h, k
    if d == 2:
        a = P[0] + r2
        b = 0.5 * (P[1] + P[n])
        c = P[n + 1] + r2
        det = a * c - b * b
        if not (det > 0.0 and a > 0.0):
            return False
        Si[0] = c / det
        Si[1] = -b / det
        Si[2] = -b / det
        Si[3] = a / det
        return True
    a = P[0] + r2
    b = 0.5 * (P[1] + P[n])
    c = 0.5 * (P[2] + P[2 * n])
    e = P[n + 1] + r2
    f = 0.5 * (P[n + 2] + P[2 * n + 1])
    k = P[2 * n + 2] + r2
    # cofactors of [[a b c] [b e f] [c f k]]
    g = e * k - f * f
    h = c * f - b * k
    det = a * g + b * h + c * (b * f - c * e)
    if not (det > 0.0 and a > 0.0 and a * e - b * b > 0.0):
        return False
    Si[0] = g / det
    Si[1] = h / det
    Si[2] = (b * f - c * e) / det
    Si[3] = Si[1]
    Si[4] = (a * k - c * c) / det
    Si[5] = (b * c - a * f) / det
    Si[6] = Si[2]
    Si[7] = Si[5]
    Si[8] = (a * e - b * b) / det
    return True


cdef inline double _mahalanobis2(const double* y, const double* Si, int d) noexcept nogil:
    cdef double s = 0.0
    cdef int i, j
    for i in range(d):
        for j in range(d):
            s += y[i] * Si[i * d + j] * y[j]
    return s


cdef inline void _update(double* x, double* P, const double* z, const double* Si, int d,
                         double r2) noexcept nogil:
    """Kalman update, Joseph form: P = (I-KH) P (I-KH)' + K R K', then symmetrised."""
    cdef int n = 2 * d, i, j, k
    cdef double K[_MAXN * 3]
    cdef double M[_MAXN * _MAXN]
    cdef double y[3]
    cdef double s
    for i in range(d):
        y[i] = z[i] - x[i]
    # K = P H' Si: the first d columns of P times Si.
    for i in range(n):
        for j in range(d):
            s = 0.0
            for k in range(d):
                s += P[i * n + k] * Si[k * d + j]
            K[i * d + j] = s
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += K[i * d + j] * y[j]
        x[i] += s
    # Joseph form with A = I - K H, using that A differs from I only in its
    # first d columns (H = [I 0]): A P = P - K P[:d, :] and
    # M A' = M - M[:, :d] K', so each product costs n*n*d, not n^3.
    for i in range(n):                  # M = A P
        for j in range(n):
            s = P[i * n + j]
            for k in range(d):
                s -= K[i * d + k] * P[k * n + j]
            M[i * n + j] = s
    for i in range(n):                  # P = M A' + r2 K K' (upper triangle)
        for j in range(i, n):
            s = M[i * n + j]
            for k in range(d):
                s += (r2 * K[i * d + k] - M[i * n + k]) * K[j * d + k]
            P[i * n + j] = s
    for i in range(n):                  # the lower triangle mirrors the upper one
        for j in range(i):
            P[i * n + j] = P[j * n + i]


def _kernel_predict(double[::1] x, double[:, ::1] P, double dt, double q):
    """Test hook: predict one state in place."""
    cdef int d = x.shape[0] // 2
    _predict(&x[0], &P[0, 0], d, dt, q)


def _kernel_update(double[::1] x, double[:, ::1] P, double[::1] z, double r):
    """Test hook: update one state in place with measurement z; returns d2 (or nan)."""
    cdef int d = x.shape[0] // 2
    cdef double Si[9]
    cdef double y[3]
    cdef int i
    if not _innovation_inverse(&P[0, 0], d, r * r, Si):
        return float("nan")
    for i in range(d):
        y[i] = z[i] - x[i]
    d2 = _mahalanobis2(y, Si, d)
    _update(&x[0], &P[0, 0], &z[0], Si, d, r * r)
    return d2


# ---------------------------------------------------------------- assignment

cdef int dod_lsa(int nr, int nc, const double* cost, int* col4row, dod_arena* a) noexcept nogil:
    """Exact rectangular assignment (nr <= nc): shortest augmenting paths
    (Jonker-Volgenant, in Crouse's rectangular form). Every row gets a column;
    col4row[i] is row i's column. 0, or -1 without scratch memory, -2 when no
    complete assignment has finite cost."""
    cdef size_t mark = dod_arena_mark(a)
    cdef double* u = <double*>dod_arena_push(a, nr * sizeof(double), 8)
    cdef double* v = <double*>dod_arena_push(a, nc * sizeof(double), 8)
    cdef double* shortest = <double*>dod_arena_push(a, nc * sizeof(double), 8)
    cdef int* path = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef int* row4col = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef int* remaining = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef uint8_t* SR = <uint8_t*>dod_arena_push(a, nr, 8)
    cdef uint8_t* SC = <uint8_t*>dod_arena_push(a, nc, 8)
    cdef int cur, i, j, it, index, sink, nrem, tmp
    cdef double minval, lowest, rc
    if SC == NULL:
        dod_arena_rewind(a, mark)
        return -1
    for i in range(nr):
        u[i] = 0.0
        col4row[i] = -1
    for j in range(nc):
        v[j] = 0.0
        row4col[j] = -1
        path[j] = -1
    for cur in range(nr):
        # Dijkstra from row `cur` over reduced costs to the nearest free column.
        minval = 0.0
        i = cur
        nrem = nc
        for it in range(nc):
            remaining[it] = nc - it - 1
            shortest[it] = INFINITY
            SC[it] = 0
        for it in range(nr):
            SR[it] = 0
        sink = -1
        while sink == -1:
            index = -1
            lowest = INFINITY
            SR[i] = 1
            for it in range(nrem):
                j = remaining[it]
                rc = minval + cost[<size_t>i * nc + j] - u[i] - v[j]
                if rc < shortest[j]:
                    path[j] = i
                    shortest[j] = rc
                if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                    lowest = shortest[j]
                    index = it
            minval = lowest
            if minval == INFINITY or index < 0:
                dod_arena_rewind(a, mark)
                return -2
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            SC[j] = 1
            nrem -= 1
            remaining[index] = remaining[nrem]
        # Update the dual variables, then augment along the path.
        u[cur] += minval
        for i in range(nr):
            if SR[i] and i != cur:
                u[i] += minval - shortest[col4row[i]]
        for j in range(nc):
            if SC[j]:
                v[j] -= minval - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            tmp = col4row[i]
            col4row[i] = j
            j = tmp
            if i == cur:
                break
    dod_arena_rewind(a, mark)
    return 0


def solve_assignment(cost):
    """Exact minimum-cost assignment of a dense (rows, cols) float64 matrix.

    Returns (row_ind, col_ind) as scipy.optimize.linear_sum_assignment does
    (every row of the smaller side assigned; rows sorted). Raises ValueError
    for non-finite costs. A test and reference hook for the nogil solver.
    """
    c = np.ascontiguousarray(cost, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError("cost must be 2-D")
    if not np.isfinite(c).all():
        raise ValueError("cost must be finite")
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = np.ascontiguousarray(c.T)
    cdef int nr = c.shape[0], nc = c.shape[1]
    cdef cnp.ndarray[cnp.float64_t, ndim=2, mode="c"] cc = c
    cdef cnp.ndarray[cnp.int32_t, ndim=1] out = np.empty(nr, dtype=np.int32)
    cdef Arena scratch = Arena(max(4096, 64 * (nr + nc) + 4096))
    cdef int rc
    if nr == 0:
        return np.empty(0, np.intp), np.empty(0, np.intp)
    with nogil:
        rc = dod_lsa(nr, nc, &cc[0, 0], <int*>&out[0], &scratch.arena)
    if rc != 0:
        raise MemoryError("assignment scratch")
    rows = np.arange(nr, dtype=np.intp)
    cols = out.astype(np.intp)
    if transposed:
        order = np.argsort(cols)
        return cols[order], rows[order]
    return rows, cols


# ---------------------------------------------------------------- per-tick scratch layout

ctypedef struct _tick:
    # detections
    double* z               # [D, dim] valid detections
    int64_t* cell           # [D, 3] grid cell of each detection
    uint32_t* bucket        # [nb + 1] start of each hash bucket in `order`
    uint32_t* order         # [D] detections sorted by bucket
    int64_t* scell          # [D, 3] cell of order[s]: the query reads one cache line
    size_t D
    size_t nb               # buckets (power of two)
    double h                # cell size
    # tracks
    double* Si              # [T, dim, dim] innovation inverse after predict
    double* hw              # [T, dim] gate half-widths
    uint8_t* gateable       # [T]
    size_t T
    # association
    int32_t* det_track      # [D] assigned track or -1
    int32_t* track_det      # [T] assigned detection or -1
    int32_t* parent         # [T + D] union-find
    int32_t* start          # [T + D + 1] cluster starts
    int32_t* porder         # [pair_cap] pairs grouped by cluster
    int32_t* loc_t          # [T] local index in the current cluster, or -1
    int32_t* loc_d          # [D]
    int32_t* glob_t         # [T] cluster's tracks (local -> global)
    int32_t* glob_d         # [D]
    int32_t* pt             # [pair_cap] pair track
    int32_t* pd             # [pair_cap] pair detection
    double* pc              # [pair_cap] pair d2
    size_t pair_cap
    size_t npairs


cdef inline void* _push(dod_arena* a, size_t n, size_t size, bint* ok) noexcept nogil:
    cdef void* p = dod_arena_push(a, n * size if n > 0 else 1, _ALIGN)
    if p == NULL:
        ok[0] = False
    return p


cdef inline int64_t _cell_of(double v, double h) noexcept nogil:
    cdef double c = floor(v / h)
    if c > _CELL_LIMIT:
        c = _CELL_LIMIT
    if c < -_CELL_LIMIT:
        c = -_CELL_LIMIT
    return <int64_t>c


cdef inline size_t _hash3(int64_t a, int64_t b, int64_t c, size_t mask) noexcept nogil:
    cdef uint64_t h = (<uint64_t>a * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t>b * 0xC2B2AE3D27D4EB4FULL) \
        ^ (<uint64_t>c * 0x165667B19E3779F9ULL)
    h ^= h >> 29
    return <size_t>(h & mask)


cdef void _build_index(_tick* k, int dim) noexcept nogil:
    """Counting sort of the detections into hash buckets of a uniform grid."""
    cdef size_t j, b, mask = k.nb - 1, acc, c
    cdef int a
    memset(k.bucket, 0, (k.nb + 1) * sizeof(uint32_t))
    for j in range(k.D):
        for a in range(3):
            k.cell[j * 3 + a] = _cell_of(k.z[j * dim + a], k.h) if a < dim else 0
        b = _hash3(k.cell[j * 3], k.cell[j * 3 + 1], k.cell[j * 3 + 2], mask)
        k.bucket[b + 1] += 1
    acc = 0
    for b in range(k.nb + 1):
        acc += k.bucket[b]
        k.bucket[b] = <uint32_t>acc
    # bucket[b] is now the end of bucket b-1 == start of bucket b; fill using
    # bucket[b] as a cursor, then restore starts by shifting.
    for j in range(k.D):
        b = _hash3(k.cell[j * 3], k.cell[j * 3 + 1], k.cell[j * 3 + 2], mask)
        k.order[k.bucket[b]] = <uint32_t>j
        k.bucket[b] += 1
    for j in range(k.D):
        memcpy(k.scell + j * 3, k.cell + <size_t>k.order[j] * 3, 3 * sizeof(int64_t))
    # now bucket[b] == end of bucket b; start of b is bucket[b-1] (0 for b = 0)
    c = k.nb
    while c > 0:
        k.bucket[c] = k.bucket[c - 1]
        c -= 1
    k.bucket[0] = 0


cdef inline void _try_pair(dod_tracker* t, _tick* k, dod_tick_counts* cnt, size_t ti, size_t j,
                           bint free_only) noexcept nogil:
    cdef int dim = t.dim, a
    cdef double y[3]
    cdef double d2
    if free_only and k.det_track[j] >= 0:
        return
    for a in range(dim):
        y[a] = k.z[j * dim + a] - t.cols.x[ti * t.n + a]
        if y[a] > k.hw[ti * dim + a] or y[a] < -k.hw[ti * dim + a]:
            return
    # constant dimension at each call site: gcc unrolls the inlined kernels
    if dim == 2:
        d2 = _mahalanobis2(y, k.Si + ti * 4, 2)
    else:
        d2 = _mahalanobis2(y, k.Si + ti * 9, 3)
    if not d2 <= t.gate:
        return
    if k.npairs >= k.pair_cap:
        cnt.pairs_dropped += 1
        return
    k.pt[k.npairs] = <int32_t>ti
    k.pd[k.npairs] = <int32_t>j
    k.pc[k.npairs] = d2
    k.npairs += 1


cdef void _gate(dod_tracker* t, _tick* k, dod_tick_counts* cnt, uint8_t stage) noexcept nogil:
    """Gated pairs of the tracks in `stage` (and, for tentative, free detections)."""
    cdef int dim = t.dim, a
    cdef size_t ti, j, b, s, mask = k.nb - 1
    cdef int64_t lo[3]
    cdef int64_t hi[3]
    cdef int64_t cx, cy, cz
    cdef double ncells
    cdef bint free_only = stage == DOD_TRACK_TENTATIVE
    k.npairs = 0
    if k.D == 0:
        return
    for ti in range(k.T):
        if t.cols.state[ti] != stage or not k.gateable[ti]:
            continue
        ncells = 1.0
        for a in range(3):
            if a < dim:
                lo[a] = _cell_of(t.cols.x[ti * t.n + a] - k.hw[ti * dim + a], k.h)
                hi[a] = _cell_of(t.cols.x[ti * t.n + a] + k.hw[ti * dim + a], k.h)
            else:
                lo[a] = 0
                hi[a] = 0
            ncells *= <double>(hi[a] - lo[a] + 1)
        if ncells > <double>k.D:
            # A gate wider than the whole index: scanning every detection is cheaper.
            for j in range(k.D):
                _try_pair(t, k, cnt, ti, j, free_only)
            continue
        cx = lo[0]
        while cx <= hi[0]:
            cy = lo[1]
            while cy <= hi[1]:
                cz = lo[2]
                while cz <= hi[2]:
                    b = _hash3(cx, cy, cz, mask)
                    for s in range(k.bucket[b], k.bucket[b + 1]):
                        # Other cells may share this bucket: keep this cell's only.
                        if k.scell[s * 3] == cx and k.scell[s * 3 + 1] == cy and k.scell[s * 3 + 2] == cz:
                            _try_pair(t, k, cnt, ti, k.order[s], free_only)
                    cz += 1
                cy += 1
            cx += 1


cdef inline int32_t _find(int32_t* parent, int32_t i) noexcept nogil:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


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


cdef void _solve_cluster(dod_tracker* t, _tick* k, dod_tick_counts* cnt, int32_t s0, int32_t s1,
                         dod_arena* scratch) noexcept nogil:
    """Exact assignment of one cluster (pairs porder[s0:s1])."""
    cdef int32_t s, p, nt = 0, nd = 0, i, nr, nc
    cdef size_t mark
    cdef double* cost
    cdef uint8_t* gated
    cdef int* col4row
    cdef bint rows_are_tracks, ok = True
    cdef int rc
    if s1 - s0 == 1:            # the common case: one pair, no matrix
        p = k.porder[s0]
        k.track_det[k.pt[p]] = k.pd[p]
        k.det_track[k.pd[p]] = k.pt[p]
        return
    for s in range(s0, s1):
        p = k.porder[s]
        if k.loc_t[k.pt[p]] < 0:
            k.loc_t[k.pt[p]] = nt
            k.glob_t[nt] = k.pt[p]
            nt += 1
        if k.loc_d[k.pd[p]] < 0:
            k.loc_d[k.pd[p]] = nd
            k.glob_d[nd] = k.pd[p]
            nd += 1
    rows_are_tracks = nt <= nd
    nr = nt if rows_are_tracks else nd
    nc = nd if rows_are_tracks else nt
    mark = dod_arena_mark(scratch)
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
        rc = dod_lsa(nr, nc, cost, col4row, scratch)
    if rc == 0:
        for i in range(nr):
            if gated[i * nc + col4row[i]]:
                if rows_are_tracks:
                    k.track_det[k.glob_t[i]] = k.glob_d[col4row[i]]
                    k.det_track[k.glob_d[col4row[i]]] = k.glob_t[i]
                else:
                    k.track_det[k.glob_t[col4row[i]]] = k.glob_d[i]
                    k.det_track[k.glob_d[i]] = k.glob_t[col4row[i]]
    else:
        cnt.greedy_clusters += 1
        _solve_greedy(k, s0, s1)
    dod_arena_rewind(scratch, mark)
    for i in range(nt):
        k.loc_t[k.glob_t[i]] = -1
    for i in range(nd):
        k.loc_d[k.glob_d[i]] = -1


cdef void _associate(dod_tracker* t, _tick* k, dod_tick_counts* cnt, uint8_t stage,
                     dod_arena* scratch) noexcept nogil:
    """One stage: gate, split the pairs into clusters (union-find), solve each."""
    cdef size_t p, T = k.T, N
    cdef int32_t a, b, r, acc, c
    _gate(t, k, cnt, stage)
    cnt.pairs += k.npairs
    if k.npairs == 0:
        return
    N = T + k.D
    for p in range(N):
        k.parent[p] = <int32_t>p
    for p in range(k.npairs):
        a = _find(k.parent, k.pt[p])
        b = _find(k.parent, <int32_t>(T + k.pd[p]))
        if a != b:
            if a < b:
                k.parent[b] = a
            else:
                k.parent[a] = b
    # Group pairs by cluster root (counting sort; roots are track nodes).
    memset(k.start, 0, (N + 1) * sizeof(int32_t))
    for p in range(k.npairs):
        k.start[_find(k.parent, k.pt[p]) + 1] += 1
    acc = 0
    for p in range(N + 1):
        acc += k.start[p]
        k.start[p] = acc
    # fill with start[r] as a cursor, then shift back
    for p in range(k.npairs):
        r = _find(k.parent, k.pt[p])
        k.porder[k.start[r]] = <int32_t>p
        k.start[r] += 1
    # start[r] == end of cluster r now; its start is the previous end
    acc = 0
    for p in range(T):
        c = k.start[p]
        if c > acc:
            cnt.clusters += 1
            if <size_t>(c - acc) > cnt.largest_cluster:
                cnt.largest_cluster = <size_t>(c - acc)
            _solve_cluster(t, k, cnt, acc, c, scratch)
            acc = c


# ---------------------------------------------------------------- the tick

cdef int dod_tracker_tick(dod_tracker* t, const double* dets, size_t n_dets, double dt,
                          dod_arena* scratch) noexcept nogil:
    cdef _tick k
    cdef dod_tick_counts cnt
    cdef size_t mark = dod_arena_mark(scratch)
    cdef dod_table* tab = t.table
    cdef size_t T = tab.count, j, i, nb, ti
    cdef int dim = t.dim, n = t.n, a
    cdef bint ok = True, finite
    cdef double r2 = t.r * t.r, hsum = 0.0, hmax, v
    cdef uint32_t nmask, hist
    cdef dod_track_cols* c = &t.cols
    memset(&cnt, 0, sizeof(cnt))
    memset(&k, 0, sizeof(k))
    # 1. Every fixed-size temporary first: failure here leaves the tracker unchanged.
    nb = 1
    while nb < 2 * n_dets:
        nb <<= 1
    k.nb = nb
    k.T = T
    k.pair_cap = _PAIRS_PER_NODE * (T + n_dets) + 64
    k.z = <double*>_push(scratch, n_dets * dim, sizeof(double), &ok)
    k.cell = <int64_t*>_push(scratch, n_dets * 3, sizeof(int64_t), &ok)
    k.bucket = <uint32_t*>_push(scratch, nb + 1, sizeof(uint32_t), &ok)
    k.order = <uint32_t*>_push(scratch, n_dets, sizeof(uint32_t), &ok)
    k.scell = <int64_t*>_push(scratch, n_dets * 3, sizeof(int64_t), &ok)
    k.Si = <double*>_push(scratch, T * dim * dim, sizeof(double), &ok)
    k.hw = <double*>_push(scratch, T * dim, sizeof(double), &ok)
    k.gateable = <uint8_t*>_push(scratch, T, 1, &ok)
    k.det_track = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.track_det = <int32_t*>_push(scratch, T, sizeof(int32_t), &ok)
    k.parent = <int32_t*>_push(scratch, T + n_dets, sizeof(int32_t), &ok)
    k.start = <int32_t*>_push(scratch, T + n_dets + 1, sizeof(int32_t), &ok)
    k.loc_t = <int32_t*>_push(scratch, T, sizeof(int32_t), &ok)
    k.loc_d = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.glob_t = <int32_t*>_push(scratch, T, sizeof(int32_t), &ok)
    k.glob_d = <int32_t*>_push(scratch, n_dets, sizeof(int32_t), &ok)
    k.pt = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.pd = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    k.pc = <double*>_push(scratch, k.pair_cap, sizeof(double), &ok)
    k.porder = <int32_t*>_push(scratch, k.pair_cap, sizeof(int32_t), &ok)
    if not ok:
        dod_arena_rewind(scratch, mark)
        return -1

    # 2. Valid detections (NaN/inf rows dropped and counted).
    for j in range(n_dets):
        finite = True
        for a in range(dim):
            if not isfinite(dets[j * dim + a]):
                finite = False
        if finite:
            memcpy(k.z + k.D * dim, dets + j * dim, dim * sizeof(double))
            k.D += 1
        else:
            cnt.invalid += 1
    cnt.detections = k.D
    for j in range(k.D):
        k.det_track[j] = -1
        k.loc_d[j] = -1

    # 3. Predict every track; innovation inverse and gate half-widths.
    for ti in range(T):
        if dim == 2:
            _predict(c.x + ti * 4, c.P + ti * 16, 2, dt, t.q)
        else:
            _predict(c.x + ti * 6, c.P + ti * 36, 3, dt, t.q)
        c.age[ti] += 1
        k.track_det[ti] = -1
        k.loc_t[ti] = -1
        if dim == 2:
            k.gateable[ti] = _innovation_inverse(c.P + ti * 16, 2, r2, k.Si + ti * 4)
        else:
            k.gateable[ti] = _innovation_inverse(c.P + ti * 36, 3, r2, k.Si + ti * 9)
        hmax = 0.0
        for a in range(dim):
            # |y_a| <= sqrt(gate * S_aa) bounds the ellipse d2 <= gate.
            v = sqrt(t.gate * (c.P[ti * n * n + a * n + a] + r2))
            k.hw[ti * dim + a] = v
            if v > hmax:
                hmax = v
        if k.gateable[ti]:
            hsum += hmax
    # 4. Index and associate: confirmed tracks first, then tentative ones.
    if T > 0 and k.D > 0:
        # Cells twice the mean gate width: a typical gate box touches 1-2
        # cells per axis, and sparse scenes keep few detections per cell.
        k.h = 4.0 * hsum / <double>T
        if not (k.h > 0.0 and isfinite(k.h)):
            k.h = 1.0
        _build_index(&k, dim)
        _associate(t, &k, &cnt, DOD_TRACK_CONFIRMED, scratch)
        _associate(t, &k, &cnt, DOD_TRACK_TENTATIVE, scratch)

    # 5. Update, count hits and misses, confirm, delete.
    nmask = <uint32_t>((<uint64_t>1 << t.confirm_n) - 1)
    for ti in range(T):
        hist = c.history[ti] << 1
        if k.track_det[ti] >= 0:
            if dim == 2:
                _update(c.x + ti * 4, c.P + ti * 16, k.z + k.track_det[ti] * 2, k.Si + ti * 4, 2, r2)
            else:
                _update(c.x + ti * 6, c.P + ti * 36, k.z + k.track_det[ti] * 3, k.Si + ti * 9, 3, r2)
            c.hits[ti] += 1
            c.misses[ti] = 0
            hist |= 1
            cnt.associations += 1
        else:
            c.misses[ti] += 1
        c.history[ti] = hist
        if c.state[ti] == DOD_TRACK_TENTATIVE:
            if _popcount(hist & nmask) >= t.confirm_m:
                c.state[ti] = DOD_TRACK_CONFIRMED
            elif c.age[ti] >= t.confirm_n:
                c.state[ti] = DOD_TRACK_NONE
        elif c.misses[ti] >= t.max_misses:
            c.state[ti] = DOD_TRACK_NONE
    # Walk down so the row that moves into a hole was already visited.
    i = T
    while i > 0:
        i -= 1
        if c.state[i] == DOD_TRACK_NONE:
            cnt.deaths += 1
            dod_table_remove_row(tab, i)

    # 6. Births from the detections nobody took, in scan order. The table
    # zeroes the new row (ZII: velocity 0, misses 0); the birth writes only
    # what it sets, the covariance always (a zero covariance means certainty).
    for j in range(k.D):
        if k.det_track[j] >= 0:
            continue
        if dod_table_insert(tab) == 0:
            cnt.births_dropped += 1
            continue
        i = tab.count - 1
        c.id[i] = t.next_id
        t.next_id += 1
        memcpy(c.x + i * n, k.z + j * dim, dim * sizeof(double))
        for a in range(dim):
            c.P[i * n * n + a * n + a] = r2
            c.P[i * n * n + (dim + a) * n + dim + a] = t.v0 * t.v0
        c.hits[i] = 1
        c.age[i] = 1
        c.history[i] = 1
        c.state[i] = DOD_TRACK_TENTATIVE
        cnt.births += 1
    for i in range(tab.count):
        if c.state[i] == DOD_TRACK_CONFIRMED:
            cnt.confirmed += 1
        else:
            cnt.tentative += 1
    t.last = cnt
    t.scans += 1
    dod_arena_rewind(scratch, mark)
    return 0


# ---------------------------------------------------------------- the owner

cdef size_t _round_up(size_t x) noexcept:
    return (x + 127) & ~(<size_t>63)


cdef size_t _scratch_bytes(size_t cap, size_t dmax, int dim) noexcept:
    """Worst-case fixed-size temporaries of one tick, plus room for cluster matrices."""
    cdef size_t nb = 1, total = 0, pairs = _PAIRS_PER_NODE * (cap + dmax) + 64
    while nb < 2 * dmax:
        nb <<= 1
    total += _round_up(dmax * dim * 8) + 2 * _round_up(dmax * 24) + _round_up((nb + 1) * 4)
    total += _round_up(dmax * 4) + _round_up(cap * dim * dim * 8) + _round_up(cap * dim * 8)
    total += _round_up(cap) + _round_up(dmax * 4) + _round_up(cap * 4)
    total += 2 * _round_up((cap + dmax + 1) * 4) + 2 * _round_up(cap * 4) + 2 * _round_up(dmax * 4)
    total += 3 * _round_up(pairs * 4) + _round_up(pairs * 8)
    total += 16 << 20          # cluster cost matrices: 16 MiB holds a 1000 x 1000 cluster
    return total


def scratch_bytes(config):
    """Bytes of scratch arena a tick may need at this config's capacity and
    max_detections (worst case, with 16 MiB for cluster cost matrices).

    Size a shared arena with it, e.g. ``Loop(step, scratch_bytes=...)`` when
    the tracker borrows the loop's scratch. Anonymous pages cost nothing
    until a tick touches them. TypeError for anything but a TrackerConfig."""
    from dod.tracker.config import TrackerConfig
    if not isinstance(config, TrackerConfig):
        raise TypeError(f"config must be a TrackerConfig, got {type(config).__name__}")
    return _scratch_bytes(config.capacity, config.max_detections, config.dim)


def track_schema(int dim):
    """The track table's Schema for `dim` (2 or 3) spatial dimensions.

    id uint64 (0: no track; ids are never reused), x float64[2*dim]
    (position then velocity), P float64[2*dim, 2*dim] (covariance), hits,
    misses (consecutive), age (scans since birth), history (detection bits,
    latest in bit 0) as uint32, state uint8 (0 none, 1 tentative, 2
    confirmed). Every column is zeroed on insert (ZII).
    """
    from dod.table import Schema
    if dim not in (2, 3):
        raise ValueError("dim must be 2 or 3")
    n = 2 * dim
    return Schema(id=np.uint64, x=(np.float64, (n,)), P=(np.float64, (n, n)), hits=np.uint32,
                  misses=np.uint32, age=np.uint32, history=np.uint32, state=np.uint8)


_COLUMNS = ("id", "x", "P", "hits", "misses", "age", "history", "state")

# Order of Tracker.read_counts; the keys of Tracker.counts().
COUNT_NAMES = ("detections", "invalid", "overflow", "associations", "births", "births_dropped",
               "deaths", "confirmed", "tentative", "pairs", "pairs_dropped", "clusters",
               "largest_cluster", "greedy_clusters")


@cython.final
cdef class Tracker:
    """A constant-velocity multi-target tracker (global nearest neighbour).

    Tracker(config=None, *, scratch=None, **overrides)

    `config` is a :class:`~dod.tracker.TrackerConfig` (keyword overrides
    build one). The tracks are the rows of :attr:`table`, a
    :class:`dod.table.Table` of ``config.capacity`` rows (schema:
    :func:`track_schema`); each row has a stable handle while its track
    lives. Each :meth:`tick` takes its temporaries from :attr:`scratch` (its
    own arena by default, or one you pass, e.g. a :class:`~dod.loop.Loop`'s)
    and gives them back before it returns.

    The tracker owns its table: read it (views, handles, Arrow export), but
    do not insert, remove or write rows yourself.

    Thread-safety: one thread at a time. tick() releases the GIL while it
    runs, so other Python threads run meanwhile. A second tick() of the same
    tracker from another thread raises RuntimeError; other threads must not
    mutate its table or use its scratch arena meanwhile (reading the views
    is safe: the memory stays valid, values may be mid-update).
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
        cdef Table table = Table(track_schema(dim), config.capacity)
        cdef dod_tracker* e = &self.engine
        self.table = table
        e.table = &table.table
        e.cols.id = <uint64_t*>table.table.columns[table.column_index("id")]
        e.cols.x = <double*>table.table.columns[table.column_index("x")]
        e.cols.P = <double*>table.table.columns[table.column_index("P")]
        e.cols.hits = <uint32_t*>table.table.columns[table.column_index("hits")]
        e.cols.misses = <uint32_t*>table.table.columns[table.column_index("misses")]
        e.cols.age = <uint32_t*>table.table.columns[table.column_index("age")]
        e.cols.history = <uint32_t*>table.table.columns[table.column_index("history")]
        e.cols.state = <uint8_t*>table.table.columns[table.column_index("state")]
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
        self._overflow_drop = config.overflow == "drop"
        self.scratch = scratch if scratch is not None else Arena(
            _scratch_bytes(config.capacity, config.max_detections, dim))

    def tick(self, cnp.ndarray detections not None, double dt):
        """Advance all tracks by `dt` seconds and fold in one scan of detections.

        `detections`: float64 array of shape (k, dim), C-contiguous (k may be
        0). Rows with NaN or inf are dropped and counted (``invalid``). With
        more than ``max_detections`` rows, overflow="error" raises ValueError
        and overflow="drop" uses the first max_detections (the rest counted
        in ``overflow``). Raises TypeError/ValueError for a wrong dtype,
        shape, layout or dt (not finite and > 0) before anything changes;
        MemoryError when a caller-supplied scratch arena cannot hold the
        tick's temporaries (nothing changed). Allocates nothing.
        """
        cdef size_t k, over = 0
        cdef int rc
        cdef const double* data
        if self.table is None or self.scratch is None:
            raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
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
            raise RuntimeError("a tick of this tracker is already running in another thread")
        # The table's Python face refuses inserts and removes while the tick
        # moves rows without the GIL (another thread's insert raced the
        # tick's births past the capacity); and a tick waits for its own
        # table's remove_many.
        self.table._check_idle("tick")
        self._busy = True
        self.table._busy = 1
        try:
            with nogil:
                rc = dod_tracker_tick(&self.engine, data, k, dt, &self.scratch.arena)
        finally:
            self._busy = False
            self.table._busy = 0
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
        """Read-only view of the live rows of a column: id, x, P, hits,
        misses, age, history or state. Rows reorder when tracks die (the
        last row moves into the hole): match rows by id or handle. The view
        shows the rows live when it was made, and stays safe to read (the
        table's memory never moves and lives as long as the view)."""
        if name not in _COLUMNS:
            raise KeyError(f"no column {name!r}; columns are {', '.join(_COLUMNS)}")
        return self._view(name)

    def columns(self):
        """Read-only views of every column's live rows, as a dict."""
        out = self.table.columns()
        for arr in out.values():
            arr.flags.writeable = False
        return out

    def handles(self):
        """Stable table handles of the live rows (a new uint64 array)."""
        return self.table.handles()

    @property
    def ids(self):
        return self._view("id")

    @property
    def positions(self):
        return self._view("x")[:, :self.engine.dim]

    @property
    def velocities(self):
        return self._view("x")[:, self.engine.dim:]

    @property
    def covariances(self):
        return self._view("P")

    @property
    def states(self):
        """1 tentative, 2 confirmed."""
        return self._view("state")

    @property
    def confirmed(self):
        """Boolean mask of the confirmed live rows (a new array)."""
        return self._view("state") == DOD_TRACK_CONFIRMED

    @property
    def scans(self):
        return self.engine.scans

    def read_counts(self, cnp.ndarray out not None):
        """Write the latest tick's counters into `out` (uint64, at least
        len(COUNT_NAMES) elements, contiguous) in COUNT_NAMES order: reading
        them allocates nothing. Raises TypeError/ValueError otherwise."""
        cdef uint64_t* o
        cdef dod_tick_counts* c = &self.engine.last
        if cnp.PyArray_TYPE(out) != cnp.NPY_UINT64 or not cnp.PyArray_IS_C_CONTIGUOUS(out):
            raise TypeError("out must be a contiguous uint64 array")
        if cnp.PyArray_SIZE(out) < 14 or not cnp.PyArray_ISWRITEABLE(out):
            raise ValueError("out must be writable with at least 14 elements")
        o = <uint64_t*>cnp.PyArray_DATA(out)
        o[0] = c.detections
        o[1] = c.invalid
        o[2] = c.overflow
        o[3] = c.associations
        o[4] = c.births
        o[5] = c.births_dropped
        o[6] = c.deaths
        o[7] = c.confirmed
        o[8] = c.tentative
        o[9] = c.pairs
        o[10] = c.pairs_dropped
        o[11] = c.clusters
        o[12] = c.largest_cluster
        o[13] = c.greedy_clusters

    def counts(self):
        """The latest tick's counters as a dict (see COUNT_NAMES)."""
        c = self.engine.last
        return {
            "detections": c.detections, "invalid": c.invalid, "overflow": c.overflow,
            "associations": c.associations, "births": c.births,
            "births_dropped": c.births_dropped, "deaths": c.deaths,
            "confirmed": c.confirmed, "tentative": c.tentative, "pairs": c.pairs,
            "pairs_dropped": c.pairs_dropped, "clusters": c.clusters,
            "largest_cluster": c.largest_cluster, "greedy_clusters": c.greedy_clusters,
        }

    def confirmed_tracks(self):
        """(ids, positions) of the confirmed tracks (copies)."""
        m = self.confirmed
        return self.ids[m].copy(), self.positions[m].copy()

    def __repr__(self):
        c = self.engine.last
        return (f"<dod.tracker.Tracker dim={self.engine.dim} tracks={self.engine.table.count} "
                f"confirmed={c.confirmed} scans={self.engine.scans} "
                f"capacity={self.engine.table.capacity}>")
