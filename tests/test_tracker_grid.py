"""dod/tracker/grid.pxd from Cython: the cell walk of a box (dod_grid_walk_*)
finds every indexed point inside the box, each once, in both modes of the
grid (direct and hashed), against brute force; after dod_grid_keep_free it
finds the same walk's free points, in the same order."""
import numpy as np
import pytest

from cython_build import compile_cython_module

GRID_SOURCE = """
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint32_t, int32_t, int64_t
from dod.tracker.grid cimport (dod_grid, dod_grid_build, dod_grid_holds, dod_grid_keep_free, dod_grid_walk,
                               dod_grid_walk_begin, dod_grid_walk_next, DOD_GRID_WALK_ALL, DOD_GRID_WALK_CELLS)

def walk(const double[:, ::1] pts, double h, size_t nb, const double[:, ::1] lo, const double[:, ::1] hi,
         const int32_t[::1] owner=None):
    # Index pts (then, with owner, keep the points with owner[j] < 0), then
    # walk each box lo[q] .. hi[q]: per box (mode, the points visited in walk
    # order); with the grid's final side, mode and point count.
    cdef size_t n = pts.shape[0], q, s, j
    cdef int dim = pts.shape[1], mode, a
    cdef dod_grid g
    cdef dod_grid_walk w
    g.h = h
    g.nb = nb
    g.cell = <int64_t*>malloc((3 * n + 1) * sizeof(int64_t))
    g.scell = <int64_t*>malloc((3 * n + 1) * sizeof(int64_t))
    g.spos = <double*>malloc((dim * n + 1) * sizeof(double))
    g.order = <uint32_t*>malloc((n + 1) * sizeof(uint32_t))
    g.bucket = <uint32_t*>malloc((nb + 1) * sizeof(uint32_t))
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
        free(g.cell); free(g.scell); free(g.spos); free(g.order); free(g.bucket)
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
            cells = np.floor(pts[seen] / h) if seen else np.zeros((0, dim))
            assert ((cells >= np.floor(l / h)) & (cells <= np.floor(u / h))).all()
        if mode == 0:
            assert not inside
    assert {1, 2} <= modes


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
