"""The tick's frame: every temporary of one scan, laid out once.

_frame_carve is the one statement of the layout. The tick carves its
temporaries with it from the scratch arena before any pass runs (so a tick
that cannot have them changes nothing), and Tracker's scratch_bytes counts
the same layout at the configuration's worst case.
"""
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t
from dod._types cimport dod_index


cdef void _frame_carve(_tick* k, _carver* c, size_t T, size_t n_dets, size_t ns, int dim, bint two_point,
                       bint polar) noexcept nogil:
    """Carve (or count) the temporaries of a tick over T tracks and a scan
    of n_dets rows, with ns detections waiting (two-point initiation) and a
    range-bearing scan's arrays when `polar`. Sets k's pointers and pair_cap."""
    cdef size_t nb = 1      # buckets for the whole scan (the index takes the valid ones': _dets_ready)
    while nb < 2 * n_dets:
        nb <<= 1
    k.pair_cap = _PAIRS_PER_NODE * (T + n_dets) + 64
    k.z = <double*>_carve(c, n_dets * dim, sizeof(double))
    k.grid.cell = <int64_t*>_carve(c, n_dets * 3, sizeof(int64_t))
    k.grid.bucket = <uint32_t*>_carve(c, nb + 1, sizeof(uint32_t))
    k.grid.order = <uint32_t*>_carve(c, n_dets, sizeof(uint32_t))
    k.grid.scell = <int64_t*>_carve(c, n_dets * 3, sizeof(int64_t))
    k.grid.spos = <double*>_carve(c, n_dets * dim, sizeof(double))
    k.Si = <double*>_carve(c, T * dim * dim, sizeof(double))
    k.hw = <double*>_carve(c, T * dim, sizeof(double))
    k.gateable = <uint8_t*>_carve(c, T, 1)
    k.hm = <double*>_carve(c, T, sizeof(double))
    k.det_track = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    k.track_det = <int32_t*>_carve(c, T, sizeof(int32_t))
    k.parent = <int32_t*>_carve(c, T + n_dets, sizeof(int32_t))
    k.start = <int32_t*>_carve(c, T + n_dets + 1, sizeof(int32_t))
    k.det_pairs = <uint8_t*>_carve(c, n_dets, sizeof(int32_t))      # (birth_rank's size)
    k.loc_t = <int32_t*>_carve(c, T, sizeof(int32_t))
    k.loc_d = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    k.glob_t = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.glob_d = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.pt = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.pd = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.pc = <double*>_carve(c, k.pair_cap, sizeof(double))
    k.porder = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    if two_point:
        k.sused = <uint8_t*>_carve(c, ns, 1)
        k.sbest = <int32_t*>_carve(c, ns, sizeof(int32_t))
        k.dbest = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    if polar:
        k.zm = <double*>_carve(c, n_dets * dim, sizeof(double))
        k.hp = <double*>_carve(c, T * dim, sizeof(double))
        k.J = <double*>_carve(c, T * dim * dim, sizeof(double))
    k.rm.hole = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.rm.fill = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.rm.slot = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.born = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    k.birth_rank = <int32_t*>k.det_pairs
    if n_dets >= 2:         # the births' spatial order (fewer: nothing to order)
        _cell_sort_carve(c, n_dets, dim, &k.bm)
