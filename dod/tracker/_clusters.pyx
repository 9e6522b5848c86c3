"""Clusters: the gated pairs split into independent association problems.

Reads the pair runs (_gate.pyx); assigns lone pairs (a track and a
detection in no other pair) at once; for the others, union-find over
tracks and detections, then a counting sort that groups the pairs by
cluster in row order (k.porder, k.start). Writes k.track_det and
k.det_track for lone pairs, and k.parent, k.loc_t, k.start, k.porder.

Threads: with many workers or detections the passes run in parts: exact
counts by atomic adds, a union-find whose roots are always the smallest
node (a CAS links a root under a smaller one), so the clusters, their
numbers and their pairs' order are those of the serial passes.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint32_t, int32_t
from libc.string cimport memset, memcpy
from dod.atomics cimport (dod_atomic_fetch_add_u32, dod_atomic_load_relaxed_i32,
                          dod_atomic_store_relaxed_i32, dod_atomic_cas_i32)
from dod._core cimport dod_prefetch
from dod.tracker._frame cimport _tick, _GATE_CHUNKS, _TAIL_CHUNKS, _GRID_PARTS, _PAIRS_AHEAD


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
