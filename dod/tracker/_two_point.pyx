"""Two-point initiation: a track starts from two detections of consecutive scans.

Reads the waiting detections (t.singles, from the previous scan) and this
scan's free ones; pairs them by iterated mutual nearest neighbours within
the velocity gate (the same result as cheapest pair first, ties by index),
births a track per pair (velocity from the two positions) and leaves the
free detections left over waiting for the next scan.

Threads: the pairing walk runs over chunks of the waiting detections, each
worker into its own segment of the pair buffer; the rounds and the births'
order are serial decisions over those pairs, the same for every thread
count.
"""
from cython.parallel cimport prange, threadid
from libc.stdint cimport uint32_t, int32_t
from libc.string cimport memcpy, memmove
from libc.math cimport sqrt, fabs
from dod.table cimport dod_table, dod_table_insert_many, dod_table_clear
from dod._types cimport dod_index
from dod.tracker.grid cimport (dod_grid, dod_grid_build, dod_grid_holds, dod_grid_walk, dod_grid_walk_begin,
                               dod_grid_walk_next, DOD_GRID_WALK_ALL, DOD_GRID_WALK_CELLS)
from dod.tracker.kalman cimport dod_kalman_packed_index
from dod.tracker.measurement cimport dod_meas_to_cartesian, dod_meas_to_cartesian_cov
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport (_pairs_append, _pairs, _tick, _GATE_CHUNKS, _GATE_CHUNKS_PER_THREAD,
                                 _TAIL_CHUNKS, _BIRTH_BITS, _BIRTH_BITS_3D)
from dod.tracker._executor cimport _split_detections
from dod.tracker._gate cimport _pairs_whole, _pairs_segments
from dod.tracker._births cimport _insert_births
from dod.tracker._order cimport _cell_order


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
    _pairs_append(out, i, j, d2)


cdef inline const double* _allowances(const dod_tracker* t, size_t* step) noexcept nogil:
    """The singles' pair-gate noise terms: single i's is at [i * step]
    (Cartesian singles share pair_noise: step 0)."""
    step[0] = 1 if t.singles_polar else 0
    return t.single_allowance if t.singles_polar else &t.pair_noise


cdef void _pair_walk(const dod_tracker* t, _tick* k, _pairs* dest, size_t i0, size_t i1,
                     double reach) noexcept nogil:
    """The pairs of singles i0 .. i1 with this scan's free detections within
    R = reach + the single's allowance (the same cell walk as _gate_rows,
    over the box [s - R, s + R]), appended to `dest` in single order (a
    local copy while it runs: the workers' segments sit side by side)."""
    cdef _pairs local = dest[0]
    cdef const dod_grid* g = &k.grid
    cdef dod_grid_walk w
    cdef double blo[3]
    cdef double bhi[3]
    cdef int a, mode, dim = t.dim
    cdef size_t i, j, s, step
    cdef const double* allowance = _allowances(t, &step)
    cdef double R
    for i in range(i0, i1):
        k.sused[i] = 0
        R = reach + allowance[i * step]
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
    initiation): gate |z - s| <= v_max dt + the single's allowance (its
    position's noise, _singles_part) through the grid, then
    iterated mutual nearest neighbours. A paired detection j of single i is
    marked det_track[j] = -2 - i.

    Threads: with enough singles the walk runs in chunks of them over the
    workers, each appending to its own segment of the pair buffer (as
    _gate_open cuts it), the segments then moved end to end. The pairs'
    order then depends on which worker took which chunk; the matching does
    not depend on it. If a segment fills, the serial walk runs instead: the
    same pairs kept and dropped at every thread count (serially, the walk
    is most of the association pass at a million targets)."""
    cdef size_t ns = t.singles.count, i, j, p, per, ch, m
    cdef int nt = t.threads, w
    cdef double reach = t.v_max * dt, widest = 0.0
    cdef size_t step
    cdef const double* allowance = _allowances(t, &step)
    cdef int32_t bi, bd
    cdef size_t matched, dropped = 0
    cdef bint par
    k.npairs = 0
    if ns == 0 or k.D == 0:
        return
    if not grid_built:                  # cells as wide as the widest gate
        for i in range(ns):
            widest = max(widest, allowance[i * step])
        k.grid.h = 2.0 * (reach + widest)
        dod_grid_build(&k.grid, k.z, k.D, t.dim)
    par = nt > 1 and ns >= <size_t>nt * t.min_rows
    if par:
        m = min(<size_t>_GATE_CHUNKS, <size_t>nt * _GATE_CHUNKS_PER_THREAD)       # chunks
        per = (ns + m - 1) // m
        _pairs_segments(k, nt)
        for ch in prange((ns + per - 1) // per, num_threads=nt, schedule="dynamic"):
            _pair_walk(t, k, &k.seg[threadid()], ch * per, min(ns, (ch + 1) * per), reach)
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
        _pair_walk(t, k, &k.whole, 0, ns, reach)
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
    """Waiting rows r0 .. r1 (inserted) take the positions of detections
    wait[r0:r1]; from a range-bearing scan also their covariances (the
    converted measurement's, as a single-point birth's) and their pair
    gate's noise allowance: pair_factor standard deviations along the
    position's widest axis (bounded by the largest absolute row sum of C).
    A scan whose detections carry their own noise: the same from each one's
    R. Cartesian singles all have r^2 I and pair_noise: nothing is written."""
    cdef size_t r, j
    cdef int dim = t.dim, pc = dim * (dim + 1) // 2, a, b
    cdef double row, widest
    cdef double p[3]
    cdef double own[9]
    cdef const double* C = own
    cdef double* Cs
    for r in range(r0, r1):
        memcpy(t.single_z + r * dim, k.z + <size_t>wait[r] * dim, dim * sizeof(double))
    if k.sensor == NULL and k.R == NULL:
        return
    for r in range(r0, r1):
        j = <size_t>wait[r]
        if k.R != NULL and k.sensor != NULL:
            dod_meas_to_cartesian_cov(k.zm + j * dim, k.sensor, dim, k.R + j * dim * dim, p, own)
        elif k.R != NULL:
            C = k.R + j * dim * dim
        else:
            dod_meas_to_cartesian(k.zm + j * <size_t>k.mcols, k.sensor, dim, p, own)     # (a range rate is not kept)
        Cs = t.single_C + r * pc
        widest = 0.0
        for a in range(dim):            # the upper triangle (in 3-D C[a, b] and C[b, a] may differ in the last bit)
            row = 0.0
            for b in range(dim):
                Cs[dod_kalman_packed_index(a, b, dim)] = C[min(a, b) * dim + max(a, b)]
                row += fabs(C[min(a, b) * dim + max(a, b)])
            widest = max(widest, row)
        t.single_allowance[r] = t.pair_factor * sqrt(widest)


cdef void _births_two_point(dod_tracker* t, _tick* k, dod_tick_counts* cnt, double dt, int nt) noexcept nogil:
    """Tentative tracks from the pairs, then this scan's free detections
    become the waiting ones (in the index's cell order when it has them
    all). Birth b is the pair of the b-th paired detection in scan order,
    with id next_id + b (while rows last; the rest are dropped, as one
    insert per birth would); its row is in spatial (cell) order of that
    detection, as single-point births are (_cell_order into k.bm). In scan
    order, which the scenarios shuffle, the rows would reach the detection
    index at random. Right after the deaths (k.rm), with workers and enough
    births, the rows are written in parts over them, as _birth_rows'."""
    cdef dod_table* tab = t.table
    cdef int dim = t.dim
    cdef size_t j, nb = 0, nfit
    cdef Py_ssize_t ch
    cdef double lc = k.log_clutter
    cdef const dod_index* order = NULL
    cdef const dod_grid* g = &k.grid
    cdef int32_t* wait = k.wait         # the next singles' detections
    cdef int32_t* partner = k.partner   # birth b's single
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
    # _pair_singles walks the index from each of them next scan, and
    # neighbours walk the same cells. The index holds every
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
        order = _cell_order(k.z, dim, 1, k.born, dim, nfit, _BIRTH_BITS if dim == 2 else _BIRTH_BITS_3D,
                            t.grid_h, nt, par, &k.bm, NULL)
        opos = k.bm.pos
    # In cell order, birth b's detection is read in order (carried by the
    # sort) and its single nearly so (the singles are in the previous
    # scan's cell order); its place among the scan's detections would be a
    # random read.
    _insert_births(t, k, nfit, par, order, opos, partner, lc)
    t.next_id += nfit
    cnt.births += nfit
    dod_table_clear(t.singles)
    dod_table_insert_many(t.singles, nwait, NULL)   # (max_detections rows: they fit)
    t.singles_polar = k.sensor != NULL or k.R != NULL
    if parts:
        for ch in range(_TAIL_CHUNKS + 1):
            w_at[ch] = ch * t.singles.count // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _singles_part(t, k, wait, w_at[ch], w_at[ch + 1])
    else:
        _singles_part(t, k, wait, 0, t.singles.count)
    cnt.singles = t.singles.count
