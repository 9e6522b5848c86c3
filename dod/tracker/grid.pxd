# dod/tracker/grid.pxd: the tracker's spatial index, a uniform grid of cubic
# cells over the detections, built once per scan (counting sort) and queried
# with each track's gate box. Inline nogil functions on a plain struct; the
# arrays come from the caller (the tick's scratch).
#
# not run: pseudo-code of a query (its innermost line is prose); the
# tick's gating pass, dod/tracker/_gate.pyx, is the compiled one
#     from dod.tracker.grid cimport dod_grid, dod_grid_build, dod_grid_walk, ...
#     dod_grid_build(&g, points, n, dim)            # g.h (minimum side), g.nb and the arrays set
#     mode = dod_grid_walk_begin(&g, lo_pos, hi_pos, dim, n, &w)   # the box's cells
#     if mode == DOD_GRID_WALK_ALL:                 # more cells than points: every point j
#         ...
#     elif mode == DOD_GRID_WALK_CELLS:
#         while dod_grid_walk_next(&g, &w):         # direct: a run per row of cells;
#             for s in range(w.s0, w.s1):           # hashed: a bucket per cell, buckets mix cells
#                 if g.direct or dod_grid_holds(&g, s, w.cx, w.cy, w.cz): point g.order[s] at g.spos[s]
#     dod_grid_keep_free(&g, owner, dim)            # drop points j with owner[j] >= 0, in place
#
# Two modes, chosen by build (a pure function of the points, so every thread
# count gets the same grid):
#   * direct (the common case): the bounding box of the points, in cells, has
#     at most nb cells; bucket b IS cell b in row-major order (x fastest), so
#     the cells of one row of a query box are one contiguous run of `order`
#     and `spos`, no bucket holds a foreign cell and scell is not read (the
#     build in parts keeps its routed points there).
#     When the box at the caller's side h has more than nb cells, build
#     widens the cells (up to _DOD_GRID_MAX_WIDEN x) until it fits; if the
#     widened grid crowds the points (sum of squared cell counts above
#     _DOD_GRID_CROWDED points per point: clustered data, outliers), build
#     falls back to
#   * hashed: cells of side h hashed into nb buckets (any extent, outliers
#     included); queries check scell for the cell.
# Why direct first: hashed lookups are random reads of bucket, scell and
# spos; direct buckets, with the track rows in spatial order, read them in
# order (docs/design/threads-and-locality.md has the measurements).
#
# Layout: points are n rows of dim (2 or 3) doubles; a 2-D point lives in
# cell z = 0. Cell coordinates are floor(v * inv_h) (inv_h = 1 / h), clamped
# to +-2**40 so that any value has a cell (+-inf at the clamps, NaN at
# -2**40). bucket[b] .. bucket[b + 1] are the positions in `order` of the
# points in bucket b; spos[dim s ..] are the coordinates of point order[s]
# (and scell[3 s ..] its cell, hashed mode), kept beside `order` so a query
# reads memory in order, not the points at random. dod_grid_box returns
# cells relative to the grid's origin in direct mode (clamped to the grid)
# and absolute cells in hashed mode.
#
# Contract (checks the caller owns): nb is a power of two;
# cell and scell hold 3 n int64, spos dim n doubles, order n uint32, bucket
# nb + 1 uint32; h > 0 and finite.
# Thread-safety: build is one writer (or, in parts, workers that write
# disjoint slots: see "The direct build in P parts"); queries of a built
# grid only read.
from libc.math cimport floor
from libc.stdint cimport uint32_t, uint64_t, int32_t, int64_t
from libc.string cimport memset
from dod._core cimport dod_prefetch, dod_prefetch_w


ctypedef struct dod_grid:
    int64_t* cell           # [n, 3] cell of each point (direct mode: [n], its bucket)
    uint32_t* bucket        # [nb + 1] start of each bucket in `order`
    uint32_t* order         # [n] points sorted by bucket
    int64_t* scell          # [n, 3] cell of order[s]
    double* spos            # [n, dim] coordinates of order[s]
    size_t n                # points indexed
    size_t nb               # buckets (a power of two; direct mode: the cells, set by build)
    double h                # cell side (build may widen the caller's)
    double inv_h            # 1 / h, set by every build: cells are floor(v * inv_h)
    bint direct             # bucket b is cell b (row-major over the points' box); else hashed
    int64_t org[3]          # direct: cell of the box's low corner
    int64_t ncell[3]        # direct: cells per axis (1 for unused axes)
    double cmin[3]          # direct: org - 1 and org + ncell, the bounds dod_grid_box
    double cmax[3]          #   clamps a coordinate times inv_h to (axes < dim)
    double lo[3]            # the points' bounding box, from the build (n > 0; axes < dim)
    double hi[3]


cdef enum:
    _DOD_GRID_MAX_WIDEN = 16        # direct mode widens the cells at most this much
    _DOD_GRID_CROWDED = 8           # sum(count**2) / n above this: too crowded, hash instead
    _DOD_GRID_AHEAD = 32            # the build fetches the bucket (or point) this many points ahead


cdef inline int64_t _dod_grid_floor(double c) noexcept nogil:
    """floor(c) by truncation, exact within +-2**40 (c a number: converting
    NaN or a value out of range to an integer is undefined behaviour): the
    baseline x86-64 build has no floor instruction, and gcc's inline floor
    costs a visible share of the tick. The step down is a subtraction, not a
    branch: it is taken for every negative non-integer value, so as a branch
    it would mispredict about every other cell of a scene around the origin."""
    cdef int64_t i = <int64_t>c
    return i - <int64_t>(<double>i > c)


cdef inline int64_t dod_grid_cell_coord(double v, double inv_h) noexcept nogil:
    """Cell coordinate of value v for cells of side 1 / inv_h, clamped to
    +-2**40 (NaN: -2**40; a track whose position a caller set to NaN gates
    nothing). A multiply, not a division: two divisions a coordinate of
    every gate box slowed the gating passes measurably. floor(v * inv_h) is
    monotone in v like floor(v / h), which is all a box's corner cells need
    to bound its points'."""
    cdef double limit = 1099511627776.0
    cdef double c = v * inv_h
    if c > limit:
        c = limit
    if not c >= -limit:     # NaN too
        c = -limit
    return _dod_grid_floor(c)


cdef inline size_t dod_grid_bucket(const dod_grid* g, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """Hash bucket of cell (a, b, c)."""
    cdef uint64_t h = (<uint64_t>a * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t>b * 0xC2B2AE3D27D4EB4FULL) \
        ^ (<uint64_t>c * 0x165667B19E3779F9ULL)
    h ^= h >> 29
    return <size_t>(h & (g.nb - 1))


cdef inline bint dod_grid_holds(const dod_grid* g, size_t s, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """True when point order[s] lies in cell (a, b, c) (buckets mix cells)."""
    return g.scell[s * 3] == a and g.scell[s * 3 + 1] == b and g.scell[s * 3 + 2] == c


cdef inline int64_t dod_grid_row(const dod_grid* g, int64_t cy, int64_t cz) noexcept nogil:
    """Direct mode: bucket of cell (0, cy, cz) (relative cells); a row's cell cx is bucket row + cx."""
    return (cz * g.ncell[1] + cy) * g.ncell[0]


cdef inline int64_t _dod_grid_rel_cell(const dod_grid* g, double v, int a) noexcept nogil:
    """Direct mode: v's cell on axis a relative to the origin, the cell
    coordinate (dod_grid_cell_coord) clamped to one cell beyond the grid's
    either side (NaN: the low one). Clamped in doubles, branch-free (the
    compares pick NaN's bound): every cell past an edge clamps to the edge
    in dod_grid_box all the same, so its box is dod_grid_cell_coord's."""
    cdef double c = v * g.inv_h
    c = c if c > g.cmin[a] else g.cmin[a]
    c = c if c < g.cmax[a] else g.cmax[a]
    return _dod_grid_floor(c) - g.org[a]


cdef inline bint dod_grid_box(const dod_grid* g, const double* lo_pos, const double* hi_pos, int dim,
                              int64_t* lo, int64_t* hi) noexcept nogil:
    """Cells lo[a] .. hi[a] (a < 3; unused axes 0 .. 0) of the box lo_pos .. hi_pos:
    absolute in hashed mode, relative to the origin and clamped to the grid in
    direct mode. False when the box misses the grid (direct mode: no point).
    (In direct mode through _dod_grid_rel_cell: without dod_grid_cell_coord's
    clamps to +-2**40 and their branches, which the grid's own clamp makes
    redundant.)"""
    cdef int a
    cdef bint hit = True
    for a in range(3):
        if a >= dim:
            lo[a] = 0
            hi[a] = 0
        elif g.direct:
            lo[a] = _dod_grid_rel_cell(g, lo_pos[a], a)
            hi[a] = _dod_grid_rel_cell(g, hi_pos[a], a)
            lo[a] = lo[a] if lo[a] > 0 else 0
            hi[a] = hi[a] if hi[a] < g.ncell[a] - 1 else g.ncell[a] - 1
            hit = hit and lo[a] <= hi[a]
        else:
            lo[a] = dod_grid_cell_coord(lo_pos[a], g.inv_h)
            hi[a] = dod_grid_cell_coord(hi_pos[a], g.inv_h)
    return hit


ctypedef struct dod_grid_walk:
    # The runs of sorted points (order[s0:s1], spos[s0:s1]) in the cells of
    # a box, from dod_grid_walk_begin / dod_grid_walk_next. Direct: one run
    # per row of cells (cz, then cy). Hashed: one bucket per cell (cx, then
    # cy, then cz), which may hold other cells' points: the caller keeps
    # those with dod_grid_holds(g, s, cx, cy, cz).
    int64_t lo[3]
    int64_t hi[3]
    int64_t cx, cy, cz      # the current cell (hashed) or row of cells (direct: cy, cz)
    size_t s0, s1           # the current run
    bint started


cdef enum:
    DOD_GRID_WALK_NONE = 0          # the box misses the grid: no point
    DOD_GRID_WALK_ALL = 1           # more cells than points: scan every point instead
    DOD_GRID_WALK_CELLS = 2         # walk the runs with dod_grid_walk_next


cdef inline int dod_grid_walk_begin(const dod_grid* g, const double* lo_pos, const double* hi_pos, int dim,
                                    size_t npoints, dod_grid_walk* w) noexcept nogil:
    """Start a walk of the cells of the box lo_pos .. hi_pos (DOD_GRID_WALK_*)."""
    cdef double ncells = 1.0
    cdef int a
    if not dod_grid_box(g, lo_pos, hi_pos, dim, w.lo, w.hi):
        return DOD_GRID_WALK_NONE
    for a in range(3):
        ncells *= <double>(w.hi[a] - w.lo[a] + 1)
    if ncells > <double>npoints:
        return DOD_GRID_WALK_ALL
    w.started = False
    return DOD_GRID_WALK_CELLS


cdef inline bint dod_grid_walk_next(const dod_grid* g, dod_grid_walk* w) noexcept nogil:
    """Step to the next run (w.s0 .. w.s1, possibly empty); False after the last."""
    cdef size_t b
    cdef int64_t base
    if g.direct:
        if not w.started:
            w.started = True
            w.cz = w.lo[2]
            w.cy = w.lo[1]
        else:
            w.cy += 1
            if w.cy > w.hi[1]:
                w.cy = w.lo[1]
                w.cz += 1
        if w.cz > w.hi[2]:
            return False
        base = dod_grid_row(g, w.cy, w.cz)
        w.s0 = g.bucket[base + w.lo[0]]
        w.s1 = g.bucket[base + w.hi[0] + 1]
        return True
    if not w.started:
        w.started = True
        w.cx = w.lo[0]
        w.cy = w.lo[1]
        w.cz = w.lo[2]
    else:
        w.cz += 1
        if w.cz > w.hi[2]:
            w.cz = w.lo[2]
            w.cy += 1
            if w.cy > w.hi[1]:
                w.cy = w.lo[1]
                w.cx += 1
    if w.cx > w.hi[0]:
        return False
    b = dod_grid_bucket(g, w.cx, w.cy, w.cz)
    w.s0 = g.bucket[b]
    w.s1 = g.bucket[b + 1]
    return True


cdef inline void dod_grid_keep_free(dod_grid* g, const int32_t* owner, int dim) noexcept nogil:
    """Drop from the index, in place, every point j with owner[j] >= 0 (a
    detection a track took), keeping the grid's geometry (mode, side,
    origin, buckets) and the order of the points left: a walk of any box
    then yields the free points of the same walk over the full index, in the
    same order. (Tentative tracks gate against the free detections only,
    a small part of the scan once the confirmed tracks took theirs: their
    wide gates then walk a sparser index and never read owner[] at random.)
    g.n becomes the points kept; g.cell (used by the build only) is
    overwritten.

    Two flat passes (_dod_grid_keep_run over the whole index as one part):
    the points, each written at the kept count so far (the count then
    steps by whether it is kept; m <= s, so nothing not yet read is
    overwritten), with that count noted per sorted position; then each
    bucket start becomes the count at its old start."""
    if g.n == 0:                # nothing to drop (and cell may hold no word for kept[0])
        return
    g.n = _dod_grid_keep_run(g, owner, dim, 0, g.n, 0, g.n, 0, g.nb + 1, g.order, g.spos,
                             NULL if g.direct else g.scell)


# The same drop over a direct-mode index in parts that threads can share,
# out of place (in place, a part would overwrite points the part before it
# has not read yet). For parts [s_c, s_c+1) of the sorted positions (s_0 = 0,
# the last ending at g.n): first, in any order, dod_grid_kept_in and
# dod_grid_bucket_from for every part (these read the index as built); then
# dod_grid_keep_free_part for every part, in any order, part c writing
# [m_c, m_c+1) (m_c: the kept points of the parts before it) and remapping
# the buckets from bucket_from(s_c) to bucket_from(s_c+1) (the last part: to
# nb, inclusive); then g.order and g.spos are the output arrays and g.n the sum.
# The index is then the one dod_grid_keep_free leaves, point for point.

cdef inline size_t dod_grid_kept_in(const dod_grid* g, const int32_t* owner, size_t s0, size_t s1) noexcept nogil:
    """Points at sorted positions [s0, s1) that no track took (owner < 0)."""
    cdef size_t s, m = 0
    for s in range(s0, s1):
        m += <size_t>(owner[g.order[s]] < 0)
    return m


cdef inline size_t dod_grid_bucket_from(const dod_grid* g, size_t s) noexcept nogil:
    """The first bucket b (0 <= b <= nb) whose start is >= s (the starts
    ascend; nb + 1 when none is)."""
    cdef size_t lo = 0, hi = g.nb + 1, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if g.bucket[mid] < s:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void dod_grid_keep_free_part(dod_grid* g, const int32_t* owner, int dim, size_t s0, size_t s1,
                                         size_t m0, size_t m1, size_t b0, size_t b1, uint32_t* order_out,
                                         double* spos_out) noexcept nogil:
    """One part of the drop (see above): the kept points of sorted positions
    [s0, s1), m1 - m0 of them (dod_grid_kept_in), into order_out / spos_out
    [m0, m1), each position's kept count so far into g.cell (as
    dod_grid_keep_free; kept[n] by the last part), then buckets [b0, b1)
    remapped."""
    _dod_grid_keep_run(g, owner, dim, s0, s1, m0, m1, b0, b1, order_out, spos_out, NULL)


cdef inline size_t _dod_grid_keep_run(dod_grid* g, const int32_t* owner, int dim, size_t s0, size_t s1,
                                      size_t m0, size_t m1, size_t b0, size_t b1, uint32_t* order_out,
                                      double* spos_out, int64_t* scell_out) noexcept nogil:
    """The drop of sorted positions [s0, s1), its kept points written from
    m0 (and their cells into scell_out, hashed mode, unless NULL); returns
    the count after them. Each point is written at the count so far, kept by
    stepping it, but never at m1: the dropped points after a part's last
    kept one would land on the next part's first (one branch, taken until
    then). In place (the whole index as one part, m1 = n) m <= s, so nothing
    not yet read is overwritten."""
    cdef size_t s, m = m0, j, b
    cdef uint32_t* kept = <uint32_t*>g.cell     # [n + 1] points kept before sorted position s
    cdef int a
    for s in range(s0, s1):
        kept[s] = <uint32_t>m
        j = g.order[s]
        if m < m1:
            order_out[m] = <uint32_t>j
            for a in range(dim):
                spos_out[m * dim + a] = g.spos[s * dim + a]
            if scell_out != NULL:
                for a in range(3):
                    scell_out[m * 3 + a] = g.scell[s * 3 + a]
        m += <size_t>(owner[j] < 0)
    if s1 == g.n:
        kept[g.n] = <uint32_t>m
    for b in range(b0, b1):
        g.bucket[b] = kept[g.bucket[b]]
    return m


cdef inline double _dod_grid_box_cells(dod_grid* g, const double* lo, const double* hi, int dim) noexcept nogil:
    """Direct mode geometry at side g.h for points within lo .. hi: origin
    and cells per axis (and inv_h); returns the number of cells (as a double).
    A point's cell is monotone in v, so the box's corner cells bound every point's."""
    cdef int a
    cdef double cells = 1.0
    g.inv_h = 1.0 / g.h
    for a in range(3):
        g.org[a] = 0
        g.ncell[a] = 1
        if a < dim:
            g.org[a] = dod_grid_cell_coord(lo[a], g.inv_h)
            g.ncell[a] = dod_grid_cell_coord(hi[a], g.inv_h) - g.org[a] + 1
            cells *= <double>g.ncell[a]
        g.cmin[a] = <double>(g.org[a] - 1)
        g.cmax[a] = <double>(g.org[a] + g.ncell[a])
    return cells


cdef inline size_t _dod_grid_direct_cell(const dod_grid* g, const double* p, int dim, bint inside) noexcept nogil:
    """Direct mode: the bucket (row-major cell, x fastest) of point p. With
    `inside` (every coordinate times inv_h strictly within +-2**40:
    dod_grid_cells checks the box) the same cell without
    dod_grid_cell_coord's clamps."""
    cdef size_t b = 0
    cdef int a = dim - 1
    cdef int64_t i
    while a >= 0:
        i = _dod_grid_floor(p[a] * g.inv_h) if inside else dod_grid_cell_coord(p[a], g.inv_h)
        b = b * <size_t>g.ncell[a] + <size_t>(i - g.org[a])
        a -= 1
    return b


cdef inline void _dod_grid_counts_to_cursors(dod_grid* g, size_t nb) noexcept nogil:
    """bucket[b + 1] holds bucket b's count (b < nb; bucket[0] is 0): make
    it b's start, the counts before b. A fill that places bucket b's points
    at the cursor bucket[b + 1] leaves it at b's end, the next bucket's
    start: then every bucket[b] is b's start, with no shift of the array
    (a memmove of the buckets after a fill at bucket[b])."""
    cdef size_t b
    cdef uint32_t acc = 0, c
    for b in range(1, nb + 1):
        c = g.bucket[b]
        g.bucket[b] = acc
        acc += c


cdef inline void _dod_grid_gather(dod_grid* g, const double* points, int dim, size_t s0, size_t s1) noexcept nogil:
    """spos[s0:s1]: the points order[s0:s1] (copies of constant size: a
    memcpy call of dim doubles per point was a fifth of the build)."""
    cdef size_t j, o
    if dim == 2:
        for j in range(s0, s1):
            if j + _DOD_GRID_AHEAD < s1:
                dod_prefetch(points + <size_t>g.order[j + _DOD_GRID_AHEAD] * 2)
            o = <size_t>g.order[j] * 2
            g.spos[j * 2] = points[o]
            g.spos[j * 2 + 1] = points[o + 1]
    else:
        for j in range(s0, s1):
            if j + _DOD_GRID_AHEAD < s1:
                dod_prefetch(points + <size_t>g.order[j + _DOD_GRID_AHEAD] * 3)
            o = <size_t>g.order[j] * 3
            g.spos[j * 3] = points[o]
            g.spos[j * 3 + 1] = points[o + 1]
            g.spos[j * 3 + 2] = points[o + 2]


cdef inline void dod_grid_bounds(const double* points, int dim, size_t j0, size_t j1,
                                 double* lo, double* hi) noexcept nogil:
    """lo[:dim], hi[:dim]: the bounding box of points [j0, j1) (j1 > j0)."""
    cdef size_t j
    cdef int a
    cdef double v, lo0, lo1, hi0, hi1
    if dim == 2:
        # In locals, not through lo and hi (which may alias the points, so
        # that every compare would store and reload): about three times faster.
        lo0 = hi0 = points[j0 * 2]
        lo1 = hi1 = points[j0 * 2 + 1]
        for j in range(j0 + 1, j1):
            v = points[j * 2]
            lo0 = v if v < lo0 else lo0
            hi0 = v if v > hi0 else hi0
            v = points[j * 2 + 1]
            lo1 = v if v < lo1 else lo1
            hi1 = v if v > hi1 else hi1
        lo[0] = lo0
        lo[1] = lo1
        hi[0] = hi0
        hi[1] = hi1
        return
    for a in range(dim):
        lo[a] = points[j0 * dim + a]
        hi[a] = points[j0 * dim + a]
    for j in range(j0 + 1, j1):
        for a in range(dim):
            v = points[j * dim + a]
            if v < lo[a]:
                lo[a] = v
            if v > hi[a]:
                hi[a] = v


cdef inline size_t dod_grid_plan(dod_grid* g, const double* lo, const double* hi, size_t n, int dim) noexcept nogil:
    """The first half of a build, given the points' box (n > 0): widen g.h
    until the box fits in g.nb direct cells (see the header). Returns the
    direct grid's cells, or 0 when it does not fit (hashed; g.h as it was)."""
    cdef int a, widen = 0
    cdef double h0 = g.h, f, cells
    g.n = n
    for a in range(dim):
        g.lo[a] = lo[a]
        g.hi[a] = hi[a]
    cells = _dod_grid_box_cells(g, lo, hi, dim)
    while cells > <double>g.nb and widen < 8 and g.h <= h0 * _DOD_GRID_MAX_WIDEN:
        # cells ~ (extent / h) ** dim: widen by the root of the excess (and a little)
        f = (cells / <double>g.nb) ** (1.0 / dim) * 1.001 + 1e-9
        g.h *= f
        cells = _dod_grid_box_cells(g, lo, hi, dim)
        widen += 1
    if cells <= <double>g.nb and g.h <= h0 * _DOD_GRID_MAX_WIDEN:
        return <size_t>cells
    g.h = h0
    return 0


cdef inline void dod_grid_cells(dod_grid* g, const double* points, int dim, size_t j0, size_t j1) noexcept nogil:
    """Direct mode, after plan: cell[j] (one index per point: its bucket)
    for the points [j0, j1) (within the box plan took, g.lo .. g.hi)."""
    cdef size_t j
    cdef double limit = 1099511627776.0
    cdef bint inside = True
    cdef int a
    # The box's corners times inv_h within the clamps of
    # dod_grid_cell_coord: so is every point's (a product is monotone in
    # v), and the clamps change nothing: the build skips them.
    for a in range(dim):
        inside = inside and g.lo[a] * g.inv_h > -limit and g.hi[a] * g.inv_h < limit
    # (constant arguments in each loop: gcc unrolls the inlined cells)
    if dim == 2 and inside:
        for j in range(j0, j1):
            g.cell[j] = <int64_t>_dod_grid_direct_cell(g, points + j * 2, 2, True)
    elif dim == 2:
        for j in range(j0, j1):
            g.cell[j] = <int64_t>_dod_grid_direct_cell(g, points + j * 2, 2, False)
    elif inside:
        for j in range(j0, j1):
            g.cell[j] = <int64_t>_dod_grid_direct_cell(g, points + j * 3, 3, True)
    else:
        for j in range(j0, j1):
            g.cell[j] = <int64_t>_dod_grid_direct_cell(g, points + j * 3, 3, False)


cdef inline void dod_grid_build_hashed(dod_grid* g, const double* points, size_t n, int dim) noexcept nogil:
    """The hashed mode's build (g.h the caller's side)."""
    cdef size_t j, b
    cdef int a
    g.n = n
    g.direct = False
    g.inv_h = 1.0 / g.h
    memset(g.bucket, 0, (g.nb + 1) * sizeof(uint32_t))
    for j in range(n):
        for a in range(3):
            g.cell[j * 3 + a] = dod_grid_cell_coord(points[j * dim + a], g.inv_h) if a < dim else 0
        b = dod_grid_bucket(g, g.cell[j * 3], g.cell[j * 3 + 1], g.cell[j * 3 + 2])
        g.bucket[b + 1] += 1
    _dod_grid_counts_to_cursors(g, g.nb)
    for j in range(n):
        b = dod_grid_bucket(g, g.cell[j * 3], g.cell[j * 3 + 1], g.cell[j * 3 + 2])
        g.order[g.bucket[b + 1]] = <uint32_t>j
        g.bucket[b + 1] += 1
    for j in range(n):
        for a in range(3):
            g.scell[j * 3 + a] = g.cell[<size_t>g.order[j] * 3 + a]
    _dod_grid_gather(g, points, dim, 0, n)


cdef inline void dod_grid_build(dod_grid* g, const double* points, size_t n, int dim) noexcept nogil:
    """Index n points (counting sort into the buckets); g.h (the smallest
    cell side wanted), g.nb and the arrays are set by the caller. Chooses
    the mode (see the header) and may widen g.h. The direct build in one
    part (below): its points need no routing, each range's pass reads them
    in order."""
    cdef size_t cells = 0
    cdef uint64_t mul
    cdef double h0 = g.h
    cdef double lo[3]
    cdef double hi[3]
    g.n = n
    g.direct = False
    if n > 0:
        dod_grid_bounds(points, dim, 0, n, lo, hi)
        cells = dod_grid_plan(g, lo, hi, n, dim)
    if cells > 0:
        mul = dod_grid_parts(cells, 1)
        dod_grid_cells(g, points, dim, 0, n)
        if dod_grid_uncrowded(dod_grid_count_part(g, 0, mul, cells, 0, n, NULL), n):
            dod_grid_fill_part(g, points, dim, 0, mul, cells, 0, n, NULL)
            dod_grid_direct_done(g, cells)
            return
        g.h = h0        # too crowded: the hashed mode instead
    dod_grid_build_hashed(g, points, n, dim)


# The direct build in P parts, for workers (the threaded tick; the serial
# build above is the same steps in one part, its points read in order). The buckets are cut into P
# contiguous ranges (part_of: a multiply and a shift per bucket), and the
# points routed to their bucket's range, in point order (a stable counting
# sort of their range numbers, by point parts); then each range counts,
# places and gathers its own points alone: no part writes another's
# buckets, `order` or `spos` slots, and no part reads every point. The
# index is the serial build's, slot for slot, whatever the cuts and the
# order the parts run in. In P parts, `hist` a [P * P] size_t array, the
# routed points kept in the unused scell (direct mode):
#
#     dod_grid_bounds(points, dim, j0, j1, lo_p, hi_p)        # each point part; lo, hi: their min, max
#     cells = dod_grid_plan(&g, lo, hi, n, dim)                # 0: dod_grid_build_hashed(&g, points, n, dim)
#     mul = dod_grid_parts(cells, P)
#     dod_grid_cells_part(&g, points, dim, j0, j1, mul, P, hist + p * P)    # each point part p
#     dod_grid_route_offsets(hist, P, at)                      # at[r]: range r's first slot; at[P] = n
#     dod_grid_route_part(&g, j0, j1, mul, P, hist + p * P)    # each point part p
#     routed = <uint32_t*>g.scell
#     crowd_r = dod_grid_count_part(&g, r, mul, cells, at[r], at[r + 1], routed)    # each bucket range r
#     if dod_grid_uncrowded(sum of crowd_r, n):                # else g.h = the side asked, hashed build
#         dod_grid_fill_part(&g, points, dim, r, mul, cells, at[r], at[r + 1], routed)  # each range r
#         dod_grid_direct_done(&g, cells)

cdef inline bint dod_grid_uncrowded(uint64_t crowd, size_t n) noexcept nogil:
    """A direct grid whose squared bucket counts sum to `crowd` is kept."""
    return <double>crowd <= <double>_DOD_GRID_CROWDED * <double>n + 64.0


cdef inline uint64_t dod_grid_parts(size_t cells, size_t P) noexcept nogil:
    """The multiplier of part_of for `cells` buckets in P ranges."""
    return ((<uint64_t>P) << 32) // <uint64_t>cells


cdef inline size_t _dod_grid_part_of(size_t b, uint64_t mul) noexcept nogil:
    """The range of bucket b: (b * mul) >> 32, monotone in b and below P."""
    return <size_t>((<uint64_t>b * mul) >> 32)


cdef inline size_t _dod_grid_range_start(size_t r, uint64_t mul, size_t cells) noexcept nogil:
    """The first bucket of range r (cells when the range is empty at the end)."""
    cdef uint64_t b = ((<uint64_t>r << 32) + mul - 1) // mul
    return <size_t>b if b < cells else cells


cdef inline void dod_grid_cells_part(dod_grid* g, const double* points, int dim, size_t j0, size_t j1,
                                     uint64_t mul, size_t P, size_t* hist) noexcept nogil:
    """cell[j] for the points [j0, j1), and hist[r]: how many of them are in
    bucket range r."""
    cdef size_t j
    memset(hist, 0, P * sizeof(size_t))
    dod_grid_cells(g, points, dim, j0, j1)
    for j in range(j0, j1):
        hist[_dod_grid_part_of(<size_t>g.cell[j], mul)] += 1


cdef inline void dod_grid_route_offsets(size_t* hist, size_t P, size_t* at) noexcept nogil:
    """hist[p * P + r] (point part p's points in range r) to the slot where
    each point part's first point of range r goes; at[r]: range r's first
    slot (at[P]: all points)."""
    cdef size_t p, r, acc = 0, c
    for r in range(P):
        at[r] = acc
        for p in range(P):
            c = hist[p * P + r]
            hist[p * P + r] = acc
            acc += c
    at[P] = acc


cdef inline void dod_grid_route_part(dod_grid* g, size_t j0, size_t j1, uint64_t mul, size_t P,
                                     size_t* cursor) noexcept nogil:
    """The points [j0, j1) to the routed list (scell), each at its range's
    cursor (from dod_grid_route_offsets)."""
    cdef uint32_t* routed = <uint32_t*>g.scell
    cdef size_t j, r
    for j in range(j0, j1):
        r = _dod_grid_part_of(<size_t>g.cell[j], mul)
        routed[cursor[r]] = <uint32_t>j
        cursor[r] += 1


cdef inline size_t _dod_grid_point(const uint32_t* routed, size_t s) noexcept nogil:
    """The point at routed slot s (routed NULL, one part: point s)."""
    return <size_t>routed[s] if routed != NULL else s


cdef inline uint64_t dod_grid_count_part(dod_grid* g, size_t r, uint64_t mul, size_t cells,
                                         size_t s0, size_t s1, const uint32_t* routed) noexcept nogil:
    """Count range r's points (routed slots [s0, s1); routed NULL: points
    [s0, s1), the whole build in one part) into its buckets. Returns their
    crowding (the sum of the squared counts). (A constant NULL folds the
    test away where the call is inlined.)"""
    cdef size_t s, b, b0, b1
    cdef uint64_t crowd = 0
    cdef uint32_t c
    b0 = _dod_grid_range_start(r, mul, cells)
    b1 = _dod_grid_range_start(r + 1, mul, cells)
    memset(g.bucket + b0, 0, (b1 - b0) * sizeof(uint32_t))
    # The counts, cursors, `order` and the gather's points are hit at
    # random: with a million points (8 MB of buckets, out of the caches)
    # each miss would stall the pass, so they are fetched _DOD_GRID_AHEAD
    # points ahead. The crowding grows by 2c + 1 as a count goes from c to
    # c + 1: summed here, point by point, not in a pass over the (about
    # three times as many) buckets.
    for s in range(s0, s1):
        if s + _DOD_GRID_AHEAD < s1:
            dod_prefetch_w(g.bucket + g.cell[_dod_grid_point(routed, s + _DOD_GRID_AHEAD)])
        b = <size_t>g.cell[_dod_grid_point(routed, s)]
        c = g.bucket[b]
        g.bucket[b] = c + 1
        crowd += 2 * <uint64_t>c + 1
    return crowd


cdef inline void dod_grid_fill_part(dod_grid* g, const double* points, int dim, size_t r, uint64_t mul,
                                    size_t cells, size_t s0, size_t s1, const uint32_t* routed) noexcept nogil:
    """Place range r's points (counted by dod_grid_count_part, routed as
    there) at `order` and `spos` slots [s0, s1), in point order, and leave
    bucket[b] = b's start for each of its buckets."""
    cdef size_t s, b, b0, b1, acc = s0, c
    cdef uint32_t j
    b0 = _dod_grid_range_start(r, mul, cells)
    b1 = _dod_grid_range_start(r + 1, mul, cells)
    for b in range(b0, b1):         # counts to starts, then cursors
        c = g.bucket[b]
        g.bucket[b] = <uint32_t>acc
        acc += c
    for s in range(s0, s1):
        # (two steps ahead: the cursor, then where it points in `order`;
        # a cursor read early may have moved on by then: only a fetch)
        if s + 2 * _DOD_GRID_AHEAD < s1:
            dod_prefetch_w(g.bucket + g.cell[_dod_grid_point(routed, s + 2 * _DOD_GRID_AHEAD)])
        if s + _DOD_GRID_AHEAD < s1:
            dod_prefetch_w(g.order + g.bucket[g.cell[_dod_grid_point(routed, s + _DOD_GRID_AHEAD)]])
        j = <uint32_t>_dod_grid_point(routed, s)
        b = <size_t>g.cell[j]
        g.order[g.bucket[b]] = j
        g.bucket[b] += 1
    _dod_grid_gather(g, points, dim, s0, s1)
    # each cursor stands at its bucket's end, the next one's start
    b = b1
    while b > b0 + 1:
        b -= 1
        g.bucket[b] = g.bucket[b - 1]
    if b1 > b0:
        g.bucket[b0] = <uint32_t>s0


cdef inline void dod_grid_direct_done(dod_grid* g, size_t cells) noexcept nogil:
    """After every range's fill: the direct grid of `cells` buckets."""
    g.direct = True
    g.nb = cells
    g.bucket[cells] = <uint32_t>g.n
