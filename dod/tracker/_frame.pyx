"""The tick's frame: every temporary of one scan, laid out once.

_frame_carve is the one statement of the layout. The tick carves its
temporaries with it before any pass runs (_frame_open: one block of the
scratch arena, so a tick that cannot have them changes nothing), and
Tracker's scratch_bytes counts the same layout at the configuration's
worst case. The phases whose temporaries are dead before another's begin
(the association's, the births') share their bytes through scopes.
"""
from libc.stdint cimport uint8_t, uint32_t, int32_t, int64_t, intptr_t, uintptr_t
from libc.string cimport memset
from dod.arena cimport dod_arena, dod_arena_push
from dod._types cimport dod_index


cdef void _frame_carve(_tick* k, _carver* c, size_t T, size_t n_dets, size_t ns, int dim, bint two_point,
                       int mcols) noexcept nogil:
    """Carve (or count) the temporaries of a tick over T tracks and a scan
    of n_dets rows, with ns detections waiting (two-point initiation) and a
    range-bearing scan's arrays when mcols > 0 (its values per measurement:
    dim, or dim + 1 with a range rate, whose rows' Jacobian is the whole
    (dim + 1) x 2 dim H and Si (dim + 1) x (dim + 1)). Sets k's pointers
    and pair_cap.
    Carving, c's arena is the frame's own (_frame_open: the scopes rewind it)."""
    cdef size_t nb = 1      # buckets for the whole scan (the index takes the valid ones': _dets_ready)
    cdef size_t high = 0, tick, stage       # the scopes' furthest reach; their marks
    while nb < 2 * n_dets:
        nb <<= 1
    k.pair_cap = _PAIRS_PER_NODE * (T + n_dets) + 64
    k.z = <double*>_carve(c, n_dets * dim, sizeof(double))
    k.grid.cell = <int64_t*>_carve(c, n_dets * 3, sizeof(int64_t))
    k.grid.bucket = <uint32_t*>_carve(c, nb + 1, sizeof(uint32_t))
    k.grid.order = <uint32_t*>_carve(c, n_dets, sizeof(uint32_t))
    k.grid.scell = <int64_t*>_carve(c, n_dets * 3, sizeof(int64_t))
    k.grid.spos = <double*>_carve(c, n_dets * dim, sizeof(double))
    cdef size_t sd = <size_t>(mcols if mcols > dim else dim)        # Si's side
    k.Si = <double*>_carve(c, T * sd * sd, sizeof(double))
    k.hw = <double*>_carve(c, T * dim, sizeof(double))
    k.gateable = <uint8_t*>_carve(c, T, 1)
    k.hm = <double*>_carve(c, T, sizeof(double))
    k.det_track = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    k.track_det = <int32_t*>_carve(c, T, sizeof(int32_t))
    k.loc_t = <int32_t*>_carve(c, T, sizeof(int32_t))
    k.loc_d = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    k.pt = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.pd = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.pc = <double*>_carve(c, k.pair_cap, sizeof(double))
    if two_point:
        k.sused = <uint8_t*>_carve(c, ns, 1)
        k.sbest = <int32_t*>_carve(c, ns, sizeof(int32_t))
        k.dbest = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    if mcols > 0:
        k.zm = <double*>_carve(c, n_dets * mcols, sizeof(double))
        k.hp = <double*>_carve(c, T * mcols, sizeof(double))
        k.J = <double*>_carve(c, T * mcols * (2 * dim if mcols > dim else dim), sizeof(double))
    k.rm.hole = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.rm.fill = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.rm.slot = <dod_index*>_carve(c, T, sizeof(dod_index))
    k.born = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    if n_dets >= 2:         # the births' spatial order (fewer: nothing to order; the index
        _cell_sort_carve(c, n_dets, dim, &k.bm)     # lives in it from _keep_free on)
    tick = _scope_open(c)
    # The association (gating's pair counts to the last cluster solved).
    k.parent = <int32_t*>_carve(c, T + n_dets, sizeof(int32_t))
    k.start = <int32_t*>_carve(c, T + n_dets + 1, sizeof(int32_t))
    k.det_pairs = <uint8_t*>_carve(c, n_dets, sizeof(int32_t))      # (D exact counts, or 4 workers' bytes)
    k.porder = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    stage = _scope_open(c)
    # ... its clusters: the pairs not lone and their roots (listed: before
    # the roots; _lone_pairs' runs)
    k.rest = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    _carve_after(c, &k.listed, &k.roots, k.pair_cap, &high)
    _scope_close(c, stage, &high)
    # ... its solve: each cluster's tracks and detections
    k.glob_t = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    k.glob_d = <int32_t*>_carve(c, k.pair_cap, sizeof(int32_t))
    _scope_close(c, tick, &high)
    # The births (from the update's list of the free detections on).
    k.birth_rank = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    if two_point:
        k.partner = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
        k.wait = <int32_t*>_carve(c, n_dets, sizeof(int32_t))
    _scope_close(c, tick, &high)
    _scopes_end(c, high)


cdef inline void _carve_after(_carver* c, int32_t** first, int32_t** then, size_t n, size_t* high) noexcept nogil:
    """Two arrays of n int32 in turn, the second on the first's bytes (a scope of one)."""
    cdef size_t mark = _scope_open(c)
    first[0] = <int32_t*>_carve(c, n, sizeof(int32_t))
    _scope_close(c, mark, high)
    then[0] = <int32_t*>_carve(c, n, sizeof(int32_t))


cdef bint _frame_open(_tick* k, dod_arena* scratch, size_t T, size_t n_dets, size_t ns, int dim, bint two_point,
                      int mcols) noexcept nogil:
    """Carve the frame (_frame_carve) and push its bytes from `scratch`;
    False, and nothing pushed, when they do not fit. The frame carves from
    an arena of its own over the scratch's free bytes (its scopes rewind
    it), then pushes what it used, in place. Where the current block is
    too small (an arena that grows by blocks), over one new block of the
    frame's count instead."""
    cdef _carver c
    cdef dod_arena frame
    cdef size_t pad, avail = scratch.capacity - scratch.used
    cdef void* block
    pad = <size_t>(-<intptr_t>(<uintptr_t>scratch.base + scratch.used)) & (_ALIGN - 1)
    memset(&frame, 0, sizeof(frame))     # (a bare region: no upstream, no block record)
    c.arena = &frame
    c.bytes = 0
    c.ok = scratch.base != NULL and avail >= pad
    if c.ok:
        frame.base = scratch.base + scratch.used + pad
        frame.capacity = avail - pad
        _frame_carve(k, &c, T, n_dets, ns, dim, two_point, mcols)
        if c.ok:
            return dod_arena_push(scratch, frame.used, _ALIGN) == <void*>frame.base
    c.arena = NULL
    c.bytes = 0
    c.ok = True
    _frame_carve(k, &c, T, n_dets, ns, dim, two_point, mcols)
    block = dod_arena_push(scratch, c.bytes, _ALIGN)
    if block == NULL:
        return False
    memset(&frame, 0, sizeof(frame))
    frame.base = <char*>block
    frame.capacity = c.bytes
    c.arena = &frame
    c.bytes = 0
    c.ok = True
    _frame_carve(k, &c, T, n_dets, ns, dim, two_point, mcols)
    return c.ok
