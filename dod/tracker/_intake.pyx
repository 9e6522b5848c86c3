"""Intake: the scan's valid detections, and the detection index.

Reads the scan (k.scan, k.n_scan: Cartesian positions, or a range-bearing
sensor's measurements); writes k.z and k.D (the valid rows, in scan order;
rows with a NaN, an inf or a value beyond k.coord_max (_frame.pxd), and for
a range-bearing scan a negative range or an elevation outside
[-pi/2, pi/2], counted in k.invalid), k.zm (the valid
measurements), and resets the detections' assignment (det_track, loc_d).
The index (grid.pxd) over k.z is built here too, serially or in parts.

Threads: _take_dets (one body, serial or in parts: _executor.pxd's
sharing policy) and _index split the rows into parts over the
workers (counts, a prefix, then each part writes its own place): the same
k.z and the same index, slot for slot, as serially.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint32_t, uint64_t, int32_t
from libc.string cimport memset, memcpy
from dod.tracker.grid cimport (dod_grid, dod_grid_build, dod_grid_bounds, dod_grid_plan, dod_grid_parts,
                               dod_grid_cells_part, dod_grid_route_offsets, dod_grid_route_part,
                               dod_grid_count_part, dod_grid_uncrowded, dod_grid_fill_part,
                               dod_grid_direct_done, dod_grid_build_hashed)
from dod.tracker.measurement cimport dod_meas_to_cartesian
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _all_within, _tick, _GRID_PARTS
from dod.tracker._executor cimport _private, _shared, _sharing, _parts_of, _offsets


# ---------------------------------------------------------------- row passes of the tick (chunks over the workers)

cdef inline void _index_buckets(_tick* k) noexcept nogil:
    """The index's bucket count for the scan's k.D valid detections."""
    cdef size_t nb = 1
    while nb < 2 * k.D:
        nb <<= 1
    k.grid.nb = nb


cdef void _dets_ready(_tick* k) noexcept nogil:
    """k.z[0:D] filled: no detection assigned yet (det_track, loc_d: -1,
    all bytes 0xff). The index gets the buckets of the valid detections
    (its array holds those of the whole scan): a scan's invalid rows change
    neither the index nor the births' rows, which follow its cells."""
    memset(k.det_track, 0xff, k.D * sizeof(int32_t))
    memset(k.loc_d, 0xff, k.D * sizeof(int32_t))
    _index_buckets(k)


cdef size_t _valid_rows(const double* dets, int dim, size_t j0, size_t j1, double lim, double* out) noexcept nogil:
    """Copy the valid rows of dets[j0:j1] (every value at most `lim` in
    magnitude: k.coord_max) to `out`, in order; returns how many. (NULL
    `out`: count them only.) All valid, the common case: one test and one
    copy."""
    cdef size_t j, n = 0
    cdef int a
    if _all_within(dets + j0 * dim, (j1 - j0) * dim, lim):
        if out != NULL:
            memcpy(out, dets + j0 * dim, (j1 - j0) * dim * sizeof(double))
        return j1 - j0
    for j in range(j0, j1):
        if _all_within(dets + j * dim, dim, lim):
            if out != NULL:
                for a in range(dim):
                    out[n * dim + a] = dets[j * dim + a]
            n += 1
    return n


cdef size_t _take_part(_tick* k, const double* dets, int dim, size_t j0, size_t j1, size_t at,
                       size_t valid) noexcept nogil:
    """Rows [j0, j1) of a Cartesian scan into k.z from row `at`: one copy
    when `valid` says all are valid (counted already), else their valid
    rows, checked here; those detections unassigned yet (det_track, loc_d:
    -1, all bytes 0xff). Returns how many."""
    if valid == j1 - j0:
        memcpy(k.z + at * dim, dets + j0 * dim, valid * dim * sizeof(double))
    else:
        valid = _valid_rows(dets, dim, j0, j1, k.coord_max, k.z + at * dim)
    memset(k.det_track + at, 0xff, valid * sizeof(int32_t))
    memset(k.loc_d + at, 0xff, valid * sizeof(int32_t))
    return valid


cdef void _take_dets_as(_sharing s, _tick* k, const double* dets, size_t n_dets, int dim, int nt) noexcept nogil:
    """A Cartesian scan into k.z and k.D: its valid rows in order (one
    copy when every value is valid, the common case), the others counted
    in k.invalid, no detection assigned yet. Serially one part, checked as
    it is copied. Shared, in P row parts (before the index is built in
    parts: _index): each counts its valid rows, then copies them to
    its place (the counts' prefix): at a million targets the scan (~16 MB
    read and written) would take one core several ms while the others
    wait."""
    cdef size_t P, p
    cdef size_t j_at[_GRID_PARTS + 1]
    cdef size_t at[_GRID_PARTS + 1]
    cdef size_t valid[_GRID_PARTS]
    if _sharing is _shared:
        P = _parts_of(n_dets, min(<size_t>nt, <size_t>_GRID_PARTS), j_at)
        for p in prange(P, num_threads=nt, schedule="static"):
            valid[p] = _valid_rows(dets, dim, j_at[p], j_at[p + 1], k.coord_max, NULL)
        for p in range(P):
            at[p] = valid[p]
        k.D = _offsets(at, P)
        for p in prange(P, num_threads=nt, schedule="static"):
            _take_part(k, dets, dim, j_at[p], j_at[p + 1], at[p], valid[p])
    else:
        k.D = _take_part(k, dets, dim, 0, n_dets, 0, <size_t>-1)
    k.invalid += n_dets - k.D
    _index_buckets(k)


cdef void _take_dets(_tick* k, const double* dets, size_t n_dets, int dim, int nt) noexcept nogil:
    """_take_dets_as, in parts over nt workers when nt > 1 (else on the calling thread)."""
    cdef _private one
    cdef _shared many
    if nt > 1:
        _take_dets_as(many, k, dets, n_dets, dim, nt)
    else:
        _take_dets_as(one, k, dets, n_dets, dim, 1)


cdef void _index(_tick* k, int dim, int nt) noexcept nogil:
    """Build the detection grid (k.grid.h set): with nt > 1 over the
    workers, in P = min(nt, _GRID_PARTS) parts of the points and of the
    buckets (grid.pxd: the direct build in parts), the index of
    dod_grid_build, its one-part build, slot for slot. A hashed or crowded
    grid is built serially."""
    cdef dod_grid* g = &k.grid
    cdef size_t P = min(<size_t>nt, <size_t>_GRID_PARTS), n = k.D, p, cells, r
    cdef double h0 = g.h
    cdef uint64_t mul, crowd = 0
    cdef int a
    cdef const uint32_t* routed
    cdef size_t j_at[_GRID_PARTS + 1]
    cdef size_t at[_GRID_PARTS + 1]
    cdef size_t hist[_GRID_PARTS * _GRID_PARTS]   # points of each point part in each bucket range
    cdef uint64_t crowd_of[_GRID_PARTS]
    cdef double lo[_GRID_PARTS][3]
    cdef double hi[_GRID_PARTS][3]
    if nt <= 1 or n < P:
        dod_grid_build(g, k.z, n, dim)
        return
    _parts_of(n, P, j_at)
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_bounds(k.z, dim, j_at[p], j_at[p + 1], lo[p], hi[p])
    for p in range(1, P):
        for a in range(dim):
            lo[0][a] = min(lo[0][a], lo[p][a])
            hi[0][a] = max(hi[0][a], hi[p][a])
    g.n = n
    g.direct = False
    cells = dod_grid_plan(g, lo[0], hi[0], n, dim)
    if cells == 0:
        dod_grid_build_hashed(g, k.z, n, dim)
        return
    mul = dod_grid_parts(cells, P)
    routed = <uint32_t*>g.scell
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_cells_part(g, k.z, dim, j_at[p], j_at[p + 1], mul, P, hist + p * P)
    dod_grid_route_offsets(hist, P, at)
    for p in prange(P, num_threads=nt, schedule="static"):
        dod_grid_route_part(g, j_at[p], j_at[p + 1], mul, P, hist + p * P)
    for r in prange(P, num_threads=nt, schedule="static"):
        crowd_of[r] = dod_grid_count_part(g, r, mul, cells, at[r], at[r + 1], routed)
    for r in range(P):
        crowd += crowd_of[r]
    if not dod_grid_uncrowded(crowd, n):
        g.h = h0
        dod_grid_build_hashed(g, k.z, n, dim)
        return
    for r in prange(P, num_threads=nt, schedule="static"):
        dod_grid_fill_part(g, k.z, dim, r, mul, cells, at[r], at[r + 1], routed)
    dod_grid_direct_done(g, cells)


cdef void _intake(const dod_tracker* t, _tick* k) noexcept nogil:
    """The scan's valid detections (rows with a NaN, an inf or a value beyond
    k.coord_max dropped and counted in k.invalid; range-bearing: also a
    negative range or an elevation outside [-pi/2, pi/2]) into k.z, and for
    a range-bearing scan the measurements (k.mcols values a row) into k.zm.
    A Cartesian scan with workers is only noted (k.scan_late):
    the worker that builds the index reads, checks and copies it inside the
    predict region while the others start predicting (the check is the
    scan's first read from memory)."""
    cdef size_t j
    cdef int a, dim = t.dim, mc = k.mcols
    cdef const double* dets = k.scan
    if k.sensor == NULL:
        if k.par:
            k.scan_late = True
        else:
            _take_dets(k, dets, k.n_scan, dim, 1)
        return
    for j in range(k.n_scan):
        if _row_valid(dets + j * mc, mc, dim, True, k.coord_max):      # (a NaN range rate: invalid)
            for a in range(mc):
                k.zm[k.D * mc + a] = dets[j * mc + a]
            dod_meas_to_cartesian(dets + j * mc, k.sensor, dim, k.z + k.D * dim, NULL)
            k.D += 1
        else:
            k.invalid += 1
    _dets_ready(k)
