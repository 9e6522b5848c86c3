"""Order: the track rows in spatial order (locality).

Spatial order is the detection grid's own: cubic cells, row-major with x
fastest. A sort puts the confirmed tracks first, in that order, then the
others in their row order, with dod.table's reorder (every handle kept);
the same cell order serves the births. Reads the positions and states;
writes the table's row order and the locality bookkeeping (t.ordered_rows,
t.speed, t.drift, t.since_sort, t.sorts).

Threads: keys, radix passes and the reorder's gather and put run over
_SORT_CHUNKS fixed chunks of rows; the order is a pure function of the
table's contents, the same at every thread count.
"""
from cython.parallel cimport prange
from libc.math cimport sqrt, isfinite, INFINITY
from libc.stdint cimport uint8_t, uint32_t, int32_t
from libc.string cimport memset
from dod.arena cimport dod_arena
from dod.table cimport (dod_table, dod_table_reorder, dod_table_reorder_scratch_bytes,
                        dod_table_reorder_gather, dod_table_reorder_put)
from dod._types cimport dod_index
from dod.tracker._track cimport dod_tracker, dod_track_real, DOD_TRACK_CONFIRMED
from dod.tracker._frame cimport (_carve, _cell_sort_carve, _cell_sort, _tick, _carver, _TAIL_CHUNKS,
                                 _SORT_CHUNKS)


cdef enum:
    _SPEED_EVERY = 64               # scans between measures of the mean speed (sort_when_drifted)


cdef inline const dod_track_real* _point(const dod_track_real* x, size_t stride, const int32_t* pick,
                                         size_t i) noexcept nogil:
    """Point i of a spatial ordering: x + pick[i] * stride (x + i * stride
    without pick); its coordinate a lies `cs` further on per axis."""
    return x + (<size_t>pick[i] if pick != NULL else i) * stride


cdef void _cell_bounds(const dod_track_real* x, size_t stride, size_t cs, const int32_t* pick, int dim, size_t i0,
                       size_t i1, double* lohi) noexcept nogil:
    """Bounding box of points [i0, i1): lohi[0:3] low, lohi[3:6] high."""
    cdef size_t i
    cdef int a
    cdef double v
    for a in range(3):
        lohi[a] = INFINITY
        lohi[3 + a] = -INFINITY
    for i in range(i0, i1):
        for a in range(dim):
            v = _point(x, stride, pick, i)[a * cs]
            if v < lohi[a]:
                lohi[a] = v
            if v > lohi[3 + a]:
                lohi[3 + a] = v


cdef inline uint32_t _cell_key(const dod_track_real* p, size_t cs, int dim, const double* lo, double step,
                               const uint32_t* ncell) noexcept nogil:
    """The key of point p's cell (its coordinate a at p[a * cs]; cells of
    side `step` from `lo`, ncell[a] per axis, clamped): row-major, x fastest."""
    cdef int a
    cdef double v, top
    cdef uint32_t q[3]
    for a in range(3):
        q[a] = 0
        if a < dim:
            v = (p[a * cs] - lo[a]) / step
            top = <double>(ncell[a] - 1)
            q[a] = <uint32_t>(v if v < top else top) if v > 0.0 else 0
    return (q[2] * ncell[1] + q[1]) * ncell[0] + q[0]       # (2-D: q[2] is 0)


cdef uint32_t _cell_keys(const dod_track_real* x, size_t stride, size_t cs, const int32_t* pick, int dim, size_t i0,
                         size_t i1, const double* lo, double step, const uint32_t* ncell, uint32_t* key, dod_index* row,
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
                pos[i * dim + a] = _point(x, stride, pick, i)[a * cs]
        key[i] = _cell_key(_point(x, stride, pick, i), cs, dim, lo, step, ncell)
        acc |= key[i]
        row[i] = <dod_index>i
    return acc


cdef size_t _confirmed_in(const uint8_t* state, size_t i0, size_t i1) noexcept nogil:
    """How many of rows [i0, i1) hold a confirmed track."""
    cdef size_t i, n = 0
    for i in range(i0, i1):
        n += state[i] == DOD_TRACK_CONFIRMED
    return n


cdef uint32_t _track_keys(const dod_track_real* x, size_t stride, size_t cs, int dim, size_t i0, size_t i1,
                          const double* lo, double step, const uint32_t* ncell, const uint8_t* state, _cell_sort* m,
                          size_t c, size_t u) noexcept nogil:
    """The confirmed rows of [i0, i1), in row order, to key[c ..] (their
    cell keys) and row[c ..]; the others, in row order, to row[u ..] and
    row2[u ..] (they are not sorted: whichever array the radix passes end
    in holds them). Returns the OR of the keys written."""
    cdef size_t i
    cdef uint32_t acc = 0
    for i in range(i0, i1):
        if state[i] == DOD_TRACK_CONFIRMED:
            m.key[c] = _cell_key(x + i * stride, cs, dim, lo, step, ncell)
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


cdef const dod_index* _cell_order(const double* x, size_t stride, size_t cs, const int32_t* pick, int dim, size_t N,
                                  int bits, double h, int nt, bint par, _cell_sort* m,
                                  const uint8_t* state) noexcept nogil:
    """_cell_order_of over double coordinates (the scan's detections)."""
    return _cell_order_of(x, stride, cs, pick, dim, N, bits, h, nt, par, m, state)


cdef const dod_index* _cell_order_of(const dod_track_real* x, size_t stride, size_t cs, const int32_t* pick, int dim,
                                     size_t N, int bits, double h, int nt, bint par, _cell_sort* m,
                                     const uint8_t* state) noexcept nogil:
    """Points 0 .. N-1 (point i at x + pick[i] * stride, or x + i * stride;
    its coordinate a `a * cs` further) in cell order of their position (row-major, x fastest): the returned
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
            _cell_bounds(x, stride, cs, pick, dim, min(N, ch * per), min(N, (ch + 1) * per), m.lohi + ch * 6)
    else:
        _cell_bounds(x, stride, cs, pick, dim, 0, N, m.lohi)
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
                m.ors[ch] = _track_keys(x, stride, cs, dim, min(N, ch * per), min(N, (ch + 1) * per), lo, step,
                                        ncell, state, m, m.first[ch], n + min(N, ch * per) - m.first[ch])
        else:
            m.ors[0] = _track_keys(x, stride, cs, dim, 0, N, lo, step, ncell, state, m, 0, n)
        per = (n + nch - 1) // nch      # the radix passes: over the confirmed rows alone
    elif par:
        for ch in prange(nch, num_threads=nt, schedule="static"):
            m.ors[ch] = _cell_keys(x, stride, cs, pick, dim, min(N, ch * per), min(N, (ch + 1) * per), lo, step,
                                   ncell, m.key, m.row, m.pos)
    else:
        m.ors[0] = _cell_keys(x, stride, cs, pick, dim, 0, N, lo, step, ncell, m.key, m.row, m.pos)
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
    if t.cols.single:
        _speed_part_of(t, t.cols.xf, r0, r1, total, count)
    else:
        _speed_part_of(t, t.cols.x, r0, r1, total, count)


cdef void _speed_part_of(const dod_tracker* t, const dod_track_real* col, size_t r0, size_t r1, double* total,
                         size_t* count) noexcept nogil:
    """_speed_part over x's column `col` (float64 or float32: each speed summed in double)."""
    cdef size_t ti, m = 0
    cdef int a, dim = t.dim
    cdef double v2, va, s = 0.0
    cdef const dod_track_real* x
    for ti in range(r0, r1):
        if t.cols.state[ti] != DOD_TRACK_CONFIRMED:
            continue
        x = col + ti * t.cols.xr + dim * t.cols.xs
        v2 = 0.0
        for a in range(dim):
            va = x[a * t.cols.xs]
            v2 += va * va
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
    cdef bint par = nt > 1 and T >= <size_t>nt * t.min_rows
    cdef _cell_sort m
    cdef const dod_index* row
    cdef char* buf
    cdef _carver carver
    carver.bytes = 0
    carver.ok = True
    if T < 2:
        return True
    carver.arena = scratch
    _cell_sort_carve(&carver, T, 0, &m)
    buf = <char*>_carve(&carver, dod_table_reorder_scratch_bytes(tab), 1)
    if not carver.ok:
        return False
    if t.cols.single:
        row = _cell_order_of(t.cols.xf, t.cols.xr, t.cols.xs, NULL, t.dim, T, 15 if t.dim == 2 else 10, h, nt, par,
                             &m, t.cols.state)
    else:
        row = _cell_order_of(t.cols.x, t.cols.xr, t.cols.xs, NULL, t.dim, T, 15 if t.dim == 2 else 10, h, nt, par,
                             &m, t.cols.state)
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


cdef bint _order_pass(dod_tracker* t, const _tick* k, dod_arena* scratch, double dt,
                      size_t confirmed) noexcept nogil:
    """Put the rows back into order (_spatial_sort: confirmed tracks first,
    in spatial order) when one of the triggers fires; returns whether it
    tried (the caller then rewinds the scratch the sort took). Triggers:
    every sort_every scans; when the leading rows have mixed
    (sort_when_mixed: more than that fraction of rows [0, front) hold no
    confirmed track after management); when the rows in order were
    displaced (sort_when_displaced: rows in order that deaths emptied,
    _count_displaced, plus confirmed tracks in rows after them, above that
    fraction of the rows in order); when the confirmed tracks have moved
    sort_when_drifted grid cells since the last sort (their mean speed,
    measured then and every _SPEED_EVERY scans, times the time). Births
    append at the end and deaths move the last row into the hole, so
    without sorts the rows scatter in space and the next ticks' reads with
    them; after a sort the churn stays behind the confirmed tracks."""
    cdef int nt = t.threads
    t.since_sort += 1
    if t.sort_when_drifted > 0.0:
        if t.since_sort % _SPEED_EVERY == 0:
            t.speed = _mean_speed(t, nt > 1)
        t.drift += dt * t.speed
    if not ((t.sort_every and t.since_sort >= t.sort_every) or
            (t.sort_when_drifted > 0.0 and t.grid_h > 0.0 and t.drift > t.sort_when_drifted * t.grid_h) or
            (t.sort_when_mixed > 0.0 and <double>k.mixed > t.sort_when_mixed * <double>k.front) or
            (t.sort_when_displaced > 0.0 and
             <double>(t.displaced_rows + k.unplaced) > t.sort_when_displaced * <double>t.ordered_rows)):
        return False
    # Cells of this scan's index as built (its side may be widened beyond
    # the one asked); without one, the next scan's side. (Not k.grid.h
    # whenever: with workers a scan of only invalid rows starts an index
    # that serially is never begun.)
    if _spatial_sort(t, scratch, k.grid.h if k.grid_built else t.grid_h):
        _rows_in_order(t, confirmed)    # (the sort puts the confirmed tracks first)
        t.since_sort = 0
        t.drift = 0.0
        if t.sort_when_drifted > 0.0:
            t.speed = _mean_speed(t, nt > 1)
        t.sorts += 1
    return True
