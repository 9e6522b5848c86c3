"""Clusters: the gated pairs split into independent association problems.

Reads the pair runs (_gate.pyx); assigns lone pairs (a track and a
detection in no other pair) at once; for the others, union-find over
tracks and detections, then a counting sort that groups the pairs by
cluster in row order (k.porder, k.start). Writes k.track_det and
k.det_track for lone pairs, and k.parent, k.loc_t, k.start, k.porder.

Threads: each pass is one body over a part of the pairs, specialised by
the sharing policy (_executor.pxd): serially one part with plain memory
operations (pair counts in bytes that stop at two, plain union-find);
over the workers, parts with exact counts by atomic adds and a union-find
whose roots are always the smallest node (a CAS links a root under a
smaller one), so the clusters, their numbers and their pairs' order are
those of the serial passes.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint32_t, int32_t
from libc.string cimport memset, memcpy
from dod.atomics cimport (dod_atomic_fetch_add_u32, dod_atomic_load_relaxed_i32,
                          dod_atomic_store_relaxed_i32, dod_atomic_cas_i32)
from dod._core cimport dod_prefetch
from dod.tracker._frame cimport _tick, _GATE_CHUNKS, _TAIL_CHUNKS, _GRID_PARTS, _PAIRS_AHEAD
from dod.tracker._executor cimport _private, _shared, _sharing, _parts_of, _offsets


# ---------------------------------------------------------------- union-find

# Over the pairs not lone (k.rest), each track node T-side, each detection
# node T + d. Serially (_private), plain path halving and links. Over the
# workers (_shared), a root is linked only under a smaller node, by a CAS
# that fails if another worker linked it first (then both ends are found
# again), so every path descends and each cluster's root is its smallest
# node, as serially, whatever the order of the unions. A node that is not
# a root only ever points to one of its ancestors, so path halving may
# write with a plain (atomic, relaxed) store: a stale write is still a
# path to the root.

cdef inline int32_t _find(_sharing s, int32_t* parent, int32_t i) noexcept nogil:
    cdef int32_t p, g
    if _sharing is _private:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    else:
        while True:
            p = dod_atomic_load_relaxed_i32(parent + i)
            if p == i:
                return i
            g = dod_atomic_load_relaxed_i32(parent + p)
            if g != p:
                dod_atomic_store_relaxed_i32(parent + i, g)
            i = g


cdef void _unite_part(_sharing s, _tick* k, size_t i0, size_t i1) noexcept nogil:
    """Union of the pairs rest[i0:i1]."""
    cdef const int32_t* nl = k.rest
    cdef size_t i
    cdef int32_t a, b
    for i in range(i0, i1):
        if i + _PAIRS_AHEAD < i1:        # (the detections' nodes are random)
            dod_prefetch(k.parent + k.T + k.pd[nl[i + _PAIRS_AHEAD]])
        a = k.pt[nl[i]]
        b = <int32_t>(k.T + k.pd[nl[i]])
        while True:
            a = _find(s, k.parent, a)
            b = _find(s, k.parent, b)
            if a == b:
                break
            if _sharing is _private:
                if a < b:
                    k.parent[b] = a
                else:
                    k.parent[a] = b
                break
            else:
                if a < b:
                    if dod_atomic_cas_i32(k.parent + b, b, a):
                        break
                elif dod_atomic_cas_i32(k.parent + a, a, b):
                    break


cdef void _roots_part(_sharing s, _tick* k, size_t i0, size_t i1) noexcept nogil:
    """The cluster root of each pair rest[i0:i1] into roots[i0:i1], once every union is done."""
    cdef size_t i
    for i in range(i0, i1):
        k.roots[i] = _find(s, k.parent, k.pt[k.rest[i]])


cdef void _unite(_sharing s, _tick* k, size_t m, int nt) noexcept nogil:
    """Union-find over the m pairs not lone, then each one's root (k.roots)."""
    cdef Py_ssize_t ch
    cdef size_t i_at[_TAIL_CHUNKS + 1]
    if _sharing is _shared:
        _parts_of(m, _TAIL_CHUNKS, i_at)
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _unite_part(s, k, i_at[ch], i_at[ch + 1])
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _roots_part(s, k, i_at[ch], i_at[ch + 1])
    else:
        _unite_part(s, k, 0, m)
        _roots_part(s, k, 0, m)


# ---------------------------------------------------------------- grouping

# The clustered pairs grouped by cluster (counting sort): cluster numbers
# in order of first pair, each cluster's pairs in row order. Serially one
# part, in row order, numbers each cluster as its first pair comes (loc_t
# at the root, -1 between clusters). Over the workers the clusters are
# numbered first (a count, a prefix, then each part its own), the pairs
# placed at cursors taken atomically, and _solve_clusters puts each
# cluster's pairs back into row order (_order_cluster): the same numbers
# and bounds. (Serially, its random reads of loc_t at the roots would hold
# the other workers at many threads.)

cdef inline bint _opens_cluster(const _tick* k, size_t i) noexcept nogil:
    """Pair rest[i] is its cluster's first in row order: its track is the
    root (the cluster's smallest node: its first row) and this is that
    track's first pair (a track's pairs are consecutive)."""
    cdef int32_t tr = k.pt[k.rest[i]]
    return tr == k.roots[i] and (i == 0 or k.pt[k.rest[i - 1]] != tr)


cdef size_t _opened_in(const _tick* k, size_t i0, size_t i1) noexcept nogil:
    """The clusters whose first pair is among rest[i0:i1]."""
    cdef size_t i, n = 0
    for i in range(i0, i1):
        n += _opens_cluster(k, i)
    return n


cdef inline void _name(_tick* k, int32_t r, size_t c) noexcept nogil:
    """Cluster c has root r: the number at the root (loc_t), the root at
    the number (parent, free now), the number's pair count 0."""
    k.loc_t[r] = <int32_t>c
    k.parent[c] = r
    k.start[c + 1] = 0


cdef void _name_part(_tick* k, size_t i0, size_t i1, size_t c) noexcept nogil:
    """Number the clusters opened among rest[i0:i1] from c on."""
    cdef size_t i
    for i in range(i0, i1):
        if _opens_cluster(k, i):
            _name(k, k.roots[i], c)
            c += 1


cdef size_t _count_part(_sharing s, _tick* k, size_t i0, size_t i1, size_t ncl) noexcept nogil:
    """Each pair's cluster number over its root in roots[i0:i1], counted in
    start[number + 1] (shared: atomic adds, the same counts in any order).
    Serially the clusters not numbered yet are numbered here from ncl, as
    their first pair comes; returns the clusters numbered then."""
    cdef size_t i
    cdef int32_t c, r
    for i in range(i0, i1):
        r = k.roots[i]
        if _sharing is _shared:
            if i + _PAIRS_AHEAD < i1:        # (the roots are random rows)
                dod_prefetch(k.loc_t + k.roots[i + _PAIRS_AHEAD])
            c = k.loc_t[r]
            k.roots[i] = c
            dod_atomic_fetch_add_u32(<uint32_t*>(k.start + c + 1), 1)
        else:
            c = k.loc_t[r]
            if c < 0:
                c = <int32_t>ncl
                _name(k, r, ncl)
                ncl += 1
            k.roots[i] = c
            k.start[c + 1] += 1
    return ncl


cdef void _place_part(_sharing s, _tick* k, size_t i0, size_t i1, size_t c0, size_t c1) noexcept nogil:
    """Pairs rest[i0:i1] to the next places of their clusters (start[c]
    the cursor, ending at cluster c's end; shared: taken atomically, so
    which part's run comes first in a cluster varies), and loc_t reset at
    the roots of clusters [c0, c1)."""
    cdef size_t i, c
    cdef uint32_t at
    for i in range(i0, i1):
        if _sharing is _shared:
            at = dod_atomic_fetch_add_u32(<uint32_t*>(k.start + k.roots[i]), 1)
        else:
            at = <uint32_t>k.start[k.roots[i]]
            k.start[k.roots[i]] = <int32_t>(at + 1)
        k.porder[at] = k.rest[i]
    for c in range(c0, c1):
        k.loc_t[k.parent[c]] = -1


cdef size_t _group(_sharing s, _tick* k, size_t m, int nt) noexcept nogil:
    """Group the m clustered pairs (roots in k.roots) into k.porder by
    cluster, cluster c's pairs at porder[start[c - 1] : start[c]]
    (start[-1] = 0). Returns the clusters."""
    cdef Py_ssize_t ch
    cdef size_t ncl = 0, c
    cdef size_t i_at[_TAIL_CHUNKS + 1]
    cdef size_t opened[_TAIL_CHUNKS]
    cdef size_t c_at[_TAIL_CHUNKS + 1]
    k.start[0] = 0
    if _sharing is _shared:
        _parts_of(m, _TAIL_CHUNKS, i_at)
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            opened[ch] = _opened_in(k, i_at[ch], i_at[ch + 1])
        ncl = _offsets(opened, _TAIL_CHUNKS)
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _name_part(k, i_at[ch], i_at[ch + 1], opened[ch])
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _count_part(s, k, i_at[ch], i_at[ch + 1], 0)
    else:
        ncl = _count_part(s, k, 0, m, 0)
    for c in range(ncl):
        k.start[c + 1] += k.start[c]
    if _sharing is _shared:
        _parts_of(ncl, _TAIL_CHUNKS, c_at)
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _place_part(s, k, i_at[ch], i_at[ch + 1], c_at[ch], c_at[ch + 1])
        k.cluster_runs = True
    else:
        _place_part(s, k, 0, m, 0, ncl)
        k.cluster_runs = False
    return ncl


cdef size_t _clusters(_tick* k, size_t m, int nt, bint wide, bint group_wide) noexcept nogil:
    """The clusters of the m pairs not lone (k.rest, from _lone_pairs):
    union-find, over the workers when `wide`, then their grouping, over
    the workers when `group_wide` too. Returns the clusters."""
    cdef _private one
    cdef _shared many
    if wide:
        _unite(many, k, m, nt)
    else:
        _unite(one, k, m, nt)
    if wide and group_wide:
        return _group(many, k, m, nt)
    return _group(one, k, m, nt)


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
        # (the pairs' detections are random: fetched _PAIRS_AHEAD pairs ahead)
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


cdef void _detections_part(_sharing s, _tick* k, size_t d0, size_t d1) noexcept nogil:
    """Detections [d0, d1): their union-find nodes made roots (in order,
    not the nodes of the pairs not lone, one random write each) and,
    shared, their exact pair counts zeroed."""
    cdef size_t i, T = k.T
    if _sharing is _shared:
        memset(<uint32_t*>k.det_pairs + d0, 0, (d1 - d0) * sizeof(uint32_t))
    for i in range(d0, d1):
        k.parent[T + i] = <int32_t>(T + i)


cdef void _count_run(_tick* k, size_t ch) noexcept nogil:
    """The exact pair counts of run ch's detections (atomic adds)."""
    cdef size_t p
    for p in range(k.chunk_at[ch], k.chunk_at[ch] + k.chunk_n[ch]):
        dod_atomic_fetch_add_u32(<uint32_t*>k.det_pairs + k.pd[p], 1)


cdef void _byte_counts(_tick* k, int nt) noexcept nogil:
    """The pair counts in bytes that stop at two (a quarter of the memory
    of exact counts): counted here unless the gating pass counted them
    (k.counted), with workers in their own quarters, added up here."""
    cdef size_t p, ch
    cdef int w
    if not k.counted:
        memset(k.det_pairs, 0, k.D)
        for ch in range(k.chunks):
            for p in range(k.chunk_at[ch], k.chunk_at[ch] + k.chunk_n[ch]):
                k.det_pairs[k.pd[p]] = 1 + (k.det_pairs[k.pd[p]] != 0)
    elif k.gate_parallel:           # the workers' counts (_gate_open) added up, stopping at two
        for w in range(1, nt):
            _add_counts(k.det_pairs, k.det_pairs + <size_t>w * k.count_stride, k.D)


cdef size_t _lone_pairs_as(_sharing s, _tick* k, size_t* m_out, int nt) noexcept nogil:
    """Assign the lone pairs; list the others in row order in k.rest
    (their number in m_out) with their tracks' union-find nodes made
    roots, and every detection's node a root. Returns the lone pairs.

    Serially the counts are bytes that stop at two (a quarter of int32
    counts' memory) and each run lists its pairs right after the runs
    before it. Shared, the counts are
    exact (atomic adds to int32: det_pairs holds D of them); each run
    assigns its lone pairs (no other pair shares their track or
    detection, so no two workers write one entry) and lists its other
    pairs in k.listed at its own place, and the lists are packed in run
    order (count, prefix, scatter): serially, at a million targets, these
    passes would be most of the tick's serial part, which many workers
    wait on (at 100,000 targets on two cores the split costs more than it
    saves: docs/design/threads-and-locality.md)."""
    cdef size_t P, D = k.D, ch, lone = 0, m = 0, run
    cdef Py_ssize_t part, c
    cdef size_t d_at[_GRID_PARTS + 1]
    cdef size_t run_m[_GATE_CHUNKS + 1]
    cdef size_t run_lone[_GATE_CHUNKS]
    if _sharing is _shared:
        P = _parts_of(D, min(<size_t>nt, <size_t>_GRID_PARTS), d_at)
        for part in prange(<Py_ssize_t>P, num_threads=nt, schedule="static"):
            _detections_part(s, k, d_at[part], d_at[part + 1])
        for c in prange(<Py_ssize_t>k.chunks, num_threads=nt, schedule="dynamic"):
            _count_run(k, c)
        for c in prange(<Py_ssize_t>k.chunks, num_threads=nt, schedule="dynamic"):
            run_lone[c] = _lone_run(k, <const uint32_t*>k.det_pairs, c, k.listed + k.chunk_at[c], &run_m[c])
        for ch in range(k.chunks):
            lone += run_lone[ch]
        m = _offsets(run_m, k.chunks)
        run_m[k.chunks] = m
        for c in prange(<Py_ssize_t>k.chunks, num_threads=nt, schedule="dynamic"):
            memcpy(k.rest + run_m[c], k.listed + k.chunk_at[c], (run_m[c + 1] - run_m[c]) * sizeof(int32_t))
    else:
        _byte_counts(k, nt)
        _detections_part(s, k, 0, D)
        # The other pairs (in row order) into rest: union-find and the
        # grouping walk these alone, not every pair (most clusters are lone
        # pairs).
        for ch in range(k.chunks):
            lone += _lone_run(k, <const uint8_t*>k.det_pairs, ch, k.rest + m, &run)
            m += run
    m_out[0] = m
    return lone


cdef size_t _lone_pairs(_tick* k, size_t* m_out, int nt, bint wide) noexcept nogil:
    """_lone_pairs_as, over the workers when `wide`."""
    cdef _private one
    cdef _shared many
    if wide:
        return _lone_pairs_as(many, k, m_out, nt)
    return _lone_pairs_as(one, k, m_out, nt)
