"""dod/tracker/grid.pxd from Cython: the cell walk of a box (dod_grid_walk_*)
finds every indexed point inside the box, each once, in both modes of the
grid (direct and hashed), against brute force; after dod_grid_keep_free it
finds the same walk's free points, in the same order; the same drop in
parts (dod_grid_kept_in, dod_grid_bucket_from, dod_grid_keep_free_part: the
threaded tick's) leaves the same index; the build in parts (the tick's with
many workers) builds the same index as dod_grid_build; a direct grid's gate
box (dod_grid_box) is the one of the clamped cell coordinates, for boxes
across the edges, far outside, infinite and NaN."""
import numpy as np
import pytest

from cython_build import compile_cython_module

GRID_SOURCE = """
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint32_t, int32_t, int64_t
from libc.stdint cimport uint64_t
from dod.tracker.grid cimport (dod_grid, dod_grid_build, dod_grid_holds, dod_grid_keep_free, dod_grid_walk,
                               dod_grid_walk_begin, dod_grid_walk_next, DOD_GRID_WALK_ALL, DOD_GRID_WALK_CELLS,
                               dod_grid_kept_in, dod_grid_bucket_from, dod_grid_keep_free_part, dod_grid_box,
                               dod_grid_bounds, dod_grid_plan, dod_grid_build_hashed, dod_grid_parts,
                               dod_grid_cells_part, dod_grid_route_offsets, dod_grid_route_part,
                               dod_grid_count_part, dod_grid_uncrowded, dod_grid_fill_part, dod_grid_direct_done)

cdef void _grid_alloc(dod_grid* g, size_t n, int dim, double h, size_t nb):
    g.h = h
    g.nb = nb
    g.cell = <int64_t*>malloc((3 * n + 1) * sizeof(int64_t))
    g.scell = <int64_t*>malloc((3 * n + 1) * sizeof(int64_t))
    g.spos = <double*>malloc((dim * n + 1) * sizeof(double))
    g.order = <uint32_t*>malloc((n + 1) * sizeof(uint32_t))
    g.bucket = <uint32_t*>malloc((nb + 1) * sizeof(uint32_t))


cdef void _grid_free(dod_grid* g):
    free(g.cell); free(g.scell); free(g.spos); free(g.order); free(g.bucket)


def walk(const double[:, ::1] pts, double h, size_t nb, const double[:, ::1] lo, const double[:, ::1] hi,
         const int32_t[::1] owner=None):
    # Index pts (then, with owner, keep the points with owner[j] < 0), then
    # walk each box lo[q] .. hi[q]: per box (mode, the points visited in walk
    # order); with the grid's final side, mode and point count.
    cdef size_t n = pts.shape[0], q, s, j
    cdef int dim = pts.shape[1], mode, a
    cdef dod_grid g
    cdef dod_grid_walk w
    _grid_alloc(&g, n, dim, h, nb)
    out = []
    try:
        dod_grid_build(&g, &pts[0, 0], n, dim)
        if owner is not None:
            dod_grid_keep_free(&g, &owner[0], dim)
        for q in range(lo.shape[0]):
            mode = dod_grid_walk_begin(&g, &lo[q, 0], &hi[q, 0], dim, n, &w)
            seen = []
            if mode == DOD_GRID_WALK_ALL:
                seen = list(range(n))
            elif mode == DOD_GRID_WALK_CELLS:
                while dod_grid_walk_next(&g, &w):
                    for s in range(w.s0, w.s1):
                        if g.direct or dod_grid_holds(&g, s, w.cx, w.cy, w.cz):
                            j = g.order[s]
                            for a in range(dim):
                                assert g.spos[s * dim + a] == pts[j, a]     # spos beside order
                            seen.append(j)
            out.append((mode, seen))
        return out, g.h, bool(g.direct), g.n
    finally:
        _grid_free(&g)


def keep_free_in_parts(const double[:, ::1] pts, double h, size_t nb, const int32_t[::1] owner,
                       cuts, order_of_parts):
    # Index pts twice; drop the taken points from one with dod_grid_keep_free,
    # from the other in parts [cuts[c], cuts[c + 1]) of the sorted positions,
    # the parts' second phase run in order_of_parts (any order must do, as
    # on threads); returns both indexes as (n, order, spos, bucket).
    cdef size_t n = pts.shape[0], c, P = len(cuts) - 1, acc = 0
    cdef int dim = pts.shape[1], i
    cdef dod_grid g[2]
    cdef uint32_t* order_out = <uint32_t*>malloc((n + 1) * sizeof(uint32_t))
    cdef double* spos_out = <double*>malloc((dim * n + 1) * sizeof(double))
    for i in range(2):
        _grid_alloc(&g[i], n, dim, h, nb)
    out = []
    try:
        for i in range(2):
            dod_grid_build(&g[i], &pts[0, 0], n, dim)
        assert g[1].direct
        dod_grid_keep_free(&g[0], &owner[0], dim)
        kept_at = [0] * (P + 1)
        bucket_at = [0] * (P + 1)
        for c in range(P):
            kept_at[c] = dod_grid_kept_in(&g[1], &owner[0], cuts[c], cuts[c + 1])
            bucket_at[c] = dod_grid_bucket_from(&g[1], cuts[c])
        bucket_at[P] = g[1].nb + 1
        for c in range(P):
            kept_at[c], acc = acc, acc + kept_at[c]
        kept_at[P] = acc
        for c in order_of_parts:
            dod_grid_keep_free_part(&g[1], &owner[0], dim, cuts[c], cuts[c + 1], kept_at[c], kept_at[c + 1],
                                    bucket_at[c], bucket_at[c + 1], order_out, spos_out)
        for i in range(2):
            order = order_out if i == 1 else g[0].order
            spos = spos_out if i == 1 else g[0].spos
            m = acc if i == 1 else g[0].n
            out.append((m, [order[c] for c in range(m)], [spos[c] for c in range(m * dim)],
                        [g[i].bucket[c] for c in range(g[i].nb + 1)]))
        return out
    finally:
        free(order_out); free(spos_out)
        for i in range(2):
            _grid_free(&g[i])


def boxes(const double[:, ::1] pts, double h, size_t nb, const double[:, ::1] lo, const double[:, ::1] hi):
    # Index pts, then dod_grid_box of each box lo[q] .. hi[q]: (hit, lo cells,
    # hi cells) per box, with the grid's mode, 1 / h, origin and cells per axis.
    cdef size_t n = pts.shape[0], q
    cdef int dim = pts.shape[1]
    cdef dod_grid g
    cdef int64_t cl[3]
    cdef int64_t ch[3]
    _grid_alloc(&g, n, dim, h, nb)
    try:
        dod_grid_build(&g, &pts[0, 0], n, dim)
        out = []
        for q in range(lo.shape[0]):
            hit = dod_grid_box(&g, &lo[q, 0], &hi[q, 0], dim, cl, ch)
            out.append((bool(hit), [cl[0], cl[1], cl[2]], [ch[0], ch[1], ch[2]]))
        return out, bool(g.direct), g.inv_h, [g.org[0], g.org[1], g.org[2]], [g.ncell[0], g.ncell[1], g.ncell[2]]
    finally:
        _grid_free(&g)


cdef _index_of(dod_grid* g, int dim):
    # Everything a query reads: mode, side, points, order, spos, buckets
    # (and, hashed, scell).
    cdef size_t c, n = g.n
    return (bool(g.direct), g.h, n, g.nb, [g.order[c] for c in range(n)], [g.spos[c] for c in range(n * dim)],
            [g.bucket[c] for c in range(g.nb + 1)],
            [] if g.direct else [g.scell[c] for c in range(3 * n)])


def build_in_parts(const double[:, ::1] pts, double h, size_t nb, cuts, orders):
    # Index pts with dod_grid_build and in P = len(cuts) - 1 parts (points
    # [cuts[p], cuts[p + 1]), bucket range p), the parts of step i run in
    # orders[i] (any order must do, as on threads); returns both indexes.
    cdef size_t n = pts.shape[0], P = len(cuts) - 1, p, cells, i
    cdef int dim = pts.shape[1], a
    cdef dod_grid g[2]
    cdef double lo[3]
    cdef double hi[3]
    cdef double plo[3]
    cdef double phi[3]
    cdef uint64_t mul, crowd = 0
    cdef size_t* hist = <size_t*>malloc((P * P + 1) * sizeof(size_t))
    cdef size_t* at = <size_t*>malloc((P + 1) * sizeof(size_t))
    for i in range(2):
        _grid_alloc(&g[i], n, dim, h, nb)
    try:
        dod_grid_build(&g[0], &pts[0, 0], n, dim)
        first = True
        for p in orders[0]:
            if cuts[p + 1] > cuts[p]:       # (an empty part has no box)
                dod_grid_bounds(&pts[0, 0], dim, cuts[p], cuts[p + 1], plo, phi)
                for a in range(dim):
                    lo[a] = plo[a] if first else min(lo[a], plo[a])
                    hi[a] = phi[a] if first else max(hi[a], phi[a])
                first = False
        g[1].direct = False
        cells = dod_grid_plan(&g[1], lo, hi, n, dim)
        if cells == 0:
            dod_grid_build_hashed(&g[1], &pts[0, 0], n, dim)
        else:
            mul = dod_grid_parts(cells, P)
            for p in orders[1]:
                dod_grid_cells_part(&g[1], &pts[0, 0], dim, cuts[p], cuts[p + 1], mul, P, hist + p * P)
            dod_grid_route_offsets(hist, P, at)
            for p in orders[2]:
                dod_grid_route_part(&g[1], cuts[p], cuts[p + 1], mul, P, hist + p * P)
            for p in orders[3]:
                crowd += dod_grid_count_part(&g[1], p, mul, cells, at[p], at[p + 1], <uint32_t*>g[1].scell)
            if dod_grid_uncrowded(crowd, n):
                for p in orders[4]:
                    dod_grid_fill_part(&g[1], &pts[0, 0], dim, p, mul, cells, at[p], at[p + 1], <uint32_t*>g[1].scell)
                dod_grid_direct_done(&g[1], cells)
            else:
                g[1].h = h
                dod_grid_build_hashed(&g[1], &pts[0, 0], n, dim)
        return _index_of(&g[0], dim), _index_of(&g[1], dim), cells
    finally:
        free(hist); free(at)
        for i in range(2):
            _grid_free(&g[i])
"""


@pytest.fixture(scope="module")
def grid_module(tmp_path_factory):
    """GRID_SOURCE built once for the module's tests."""
    return compile_cython_module(GRID_SOURCE, tmp_path_factory.mktemp("grid"))


def _cases(rng, dim, clustered):
    n = 300
    if clustered:       # a tight clump and far outliers: the hashed mode
        pts = np.vstack([rng.normal(0, 1, (n - 5, dim)), rng.uniform(-1e6, 1e6, (5, dim))])
    else:
        pts = rng.uniform(0, 1000 if dim == 2 else 100, (n, dim))     # few enough cells: direct
    centre = pts[rng.integers(0, n, 200)] + rng.normal(0, 5, (200, dim))
    half = rng.uniform(0.1, 40, (200, dim))
    half[:5] = 1e7                                  # wider than the index: every point
    return np.ascontiguousarray(pts), np.ascontiguousarray(centre - half), np.ascontiguousarray(centre + half)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("clustered", [False, True])
def test_grid_walk_finds_every_point_in_the_box_once(grid_module, dim, clustered):
    mod = grid_module
    rng = np.random.default_rng(dim * 10 + clustered)
    pts, lo, hi = _cases(rng, dim, clustered)
    out, h, direct, _ = mod.walk(pts, 4.0, 1024, lo, hi)
    assert direct == (not clustered)                # both modes covered
    modes = set()
    for (mode, seen), l, u in zip(out, lo, hi):
        modes.add(mode)
        inside = set(np.flatnonzero(((pts >= l) & (pts <= u)).all(axis=1)).tolist())
        assert len(seen) == len(set(seen))          # each point once
        assert inside <= set(seen)                  # every point in the box
        if mode == 2:                               # and only points of the box's cells
            inv = 1.0 / h                           # (grid.pxd: cells are floor(v * (1 / h)))
            cells = np.floor(pts[seen] * inv) if seen else np.zeros((0, dim))
            assert ((cells >= np.floor(l * inv)) & (cells <= np.floor(u * inv))).all()
        if mode == 0:
            assert not inside
    assert {1, 2} <= modes


def _cell_coord(v, inv_h):
    """grid.pxd's dod_grid_cell_coord: floor(v * inv_h), clamped to +-2**40 (NaN: -2**40)."""
    limit = 2.0 ** 40
    c = v * inv_h
    c = np.where(c > limit, limit, c)
    c = np.where(c >= -limit, c, -limit)
    return np.floor(c).astype(np.int64)


@pytest.mark.parametrize("dim", [2, 3])
def test_direct_gate_box_is_the_clamped_cells(grid_module, dim):
    # dod_grid_box in direct mode clamps v * inv_h to one cell past the grid
    # (grid.pxd: _dod_grid_rel_cell); its boxes must be those of the cell
    # coordinates clamped to +-2**40, less the origin, clamped to the grid:
    # boxes inside, across the edges, far outside, huge, infinite and NaN.
    rng = np.random.default_rng(7 + dim)
    pts = np.ascontiguousarray(rng.uniform(-500, 500, (400, dim)))
    centre = np.vstack([rng.uniform(-700, 700, (300, dim)), rng.uniform(-1e15, 1e15, (40, dim))])
    half = rng.uniform(0.0, 60.0, centre.shape)
    lo = centre - half
    hi = centre + half
    specials = np.array([np.nan, np.inf, -np.inf, 1e300, -1e300, 0.0, 499.99, -500.0])
    for k in range(60):         # corners replaced by special values, one axis or several
        q = rng.integers(0, len(lo))
        a = rng.integers(0, dim)
        (lo if k % 2 else hi)[q, a] = specials[k % len(specials)]
    lo = np.ascontiguousarray(lo)
    hi = np.ascontiguousarray(hi)
    out, direct, inv_h, org, ncell = grid_module.boxes(pts, 4.0, 4096, lo, hi)
    assert direct
    org = np.array(org[:dim])
    ncell = np.array(ncell[:dim])
    with np.errstate(invalid="ignore", over="ignore"):
        want_lo = np.maximum(_cell_coord(lo, inv_h) - org, 0)
        want_hi = np.minimum(_cell_coord(hi, inv_h) - org, ncell - 1)
    hits = 0
    for (hit, got_lo, got_hi), wl, wh in zip(out, want_lo, want_hi):
        want_hit = bool((wl <= wh).all())
        assert hit == want_hit
        hits += hit
        if hit:
            assert got_lo[:dim] == wl.tolist() and got_hi[:dim] == wh.tolist()
    assert 0 < hits < len(out)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("clustered", [False, True])
@pytest.mark.parametrize("taken", [0.0, 0.3, 0.8, 1.0])
def test_keep_free_walks_the_free_points_in_the_same_order(grid_module, dim, clustered, taken):
    # The tentative tracks' index: the detections confirmed tracks took
    # (owner >= 0) dropped in place. Every walk must yield the free points of
    # the full index's walk, in its order (the tracker's pair order depends
    # on it), with the same geometry.
    mod = grid_module
    rng = np.random.default_rng(dim * 100 + clustered * 10 + int(taken * 10))
    pts, lo, hi = _cases(rng, dim, clustered)
    owner = np.where(rng.random(len(pts)) < taken, rng.integers(0, 50, len(pts)), -1).astype(np.int32)
    full, h, direct, n = mod.walk(pts, 4.0, 1024, lo, hi)
    kept, h2, direct2, n2 = mod.walk(pts, 4.0, 1024, lo, hi, owner)
    assert (h2, direct2) == (h, direct) and n == len(pts) and n2 == int((owner < 0).sum())
    for (mode, seen), (mode2, seen2) in zip(full, kept):
        assert mode2 == mode
        if mode == 2:
            assert seen2 == [j for j in seen if owner[j] < 0]


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("taken", [0.0, 0.3, 0.8, 1.0])
def test_keep_free_in_parts_leaves_the_same_index(grid_module, dim, taken):
    # The threaded tick drops the taken detections in parts, out of place,
    # over its workers: whatever the cuts (empty parts, a part of one point,
    # parts ending in a run of taken points) and whatever order the parts
    # run in, the index must be the one dod_grid_keep_free leaves. A part
    # that wrote past its own kept points would overwrite the next part's
    # first one when that part ran before it.
    mod = grid_module
    rng = np.random.default_rng(dim * 1000 + int(taken * 10))
    pts, _, _ = _cases(rng, dim, False)
    n = len(pts)
    for trial in range(12):
        owner = np.where(rng.random(n) < taken, rng.integers(0, 50, n), -1).astype(np.int32)
        if trial % 4 == 3:
            owner[: n // 2] = 7                     # taken runs at the end of the first parts
        inner = np.sort(rng.integers(0, n + 1, int(rng.integers(0, 9))))
        cuts = [0, *inner.tolist(), n]
        parts = list(range(len(cuts) - 1))
        for order_of_parts in (parts, parts[::-1], list(rng.permutation(parts))):
            whole, in_parts = mod.keep_free_in_parts(pts, 4.0, 1024, owner, cuts, order_of_parts)
            assert in_parts == whole
            assert whole[0] == int((owner < 0).sum())


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("kind", ["uniform", "few cells", "crowded", "outliers"])
def test_build_in_parts_builds_the_same_index(grid_module, dim, kind):
    # With many workers the tick builds the index in parts: whatever the
    # point cuts (empty parts, a part of one point) and whatever order each
    # step's parts run in, it must be dod_grid_build's, slot for slot, and
    # fall back to the same hashed index (a box too wide for the buckets, or
    # a crowded direct grid).
    mod = grid_module
    rng = np.random.default_rng(dim * 7 + len(kind))
    n = 40 if kind == "few cells" else 400
    side = 1000 if dim == 2 else 100                # few enough cells: direct
    if kind == "uniform":
        pts = rng.uniform(0, side, (n, dim))
    elif kind == "few cells":       # 3 cells a side: ranges of one bucket, and empty ones
        pts = rng.uniform(0, 11.9, (n, dim))
    elif kind == "crowded":         # fits the buckets, but 390 points in one cell
        pts = np.vstack([rng.normal(side / 2, 0.01, (n - 10, dim)), rng.uniform(0, side, (10, dim))])
    else:
        pts = np.vstack([rng.normal(0, 1, (n - 5, dim)), rng.uniform(-1e6, 1e6, (5, dim))])
    pts = np.ascontiguousarray(pts)
    for trial in range(10):
        P = int(rng.integers(1, 9))
        inner = np.sort(rng.integers(0, n + 1, P - 1))
        if trial == 0:
            inner = np.array([1] * (P - 1), dtype=np.int64)       # parts of one point, then empty ones
        cuts = [0, *inner.tolist(), n]
        orders = [list(rng.permutation(P)) if trial % 2 else list(range(P))[::-1] for _ in range(5)]
        whole, in_parts, cells = mod.build_in_parts(pts, 4.0, 2048, cuts, orders)
        assert in_parts == whole
        assert whole[0] == (kind in ("uniform", "few cells")) and (cells > 0) == (kind != "outliers")
        assert sorted(whole[4]) == list(range(n))
