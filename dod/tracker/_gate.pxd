# dod/tracker/_gate.pxd: gating into the pair buffer (see _gate.pyx).
from libc.stdint cimport uint8_t
from libc.string cimport memset
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _sum4, _pairs, _tick, _TAIL_CHUNKS


cdef inline void _pairs_whole(_tick* k) noexcept nogil:
    """k.whole: the whole pair buffer, empty."""
    k.whole.pt = k.pt
    k.whole.pd = k.pd
    k.whole.pc = k.pc
    k.whole.n = 0
    k.whole.cap = k.pair_cap
    k.whole.dropped = 0
    k.whole.count = NULL


cdef inline void _pairs_segments(_tick* k, int nt) noexcept nogil:
    """k.seg[0:nt]: the pair buffer cut into nt equal segments, empty."""
    cdef int w
    cdef size_t at
    for w in range(nt):
        at = k.pair_cap * <size_t>w // <size_t>nt
        k.seg[w].pt = k.pt + at
        k.seg[w].pd = k.pd + at
        k.seg[w].pc = k.pc + at
        k.seg[w].n = 0
        k.seg[w].cap = k.pair_cap * <size_t>(w + 1) // <size_t>nt - at
        k.seg[w].dropped = 0
        k.seg[w].count = NULL


cdef inline void _count_open(_tick* k, int w) noexcept nogil:
    """Worker w's pair counts zeroed, in a parallel gating pass that counts (_gate_open)."""
    if k.counted and k.gate_parallel:
        memset(k.seg[w].count, 0, k.count_stride)


# The next scan's index cells follow the mean of the gate half-widths (k.hm)
# over the rows, summed in _TAIL_CHUNKS fixed parts of the rows (their
# bounds depend on the row count alone) added in order: the same bits for
# every thread count, and the parts can run on any worker (with threads,
# in the update's region: serially, at 1,000,000 targets, the sum read
# ~14 MB on the calling thread while the workers waited).

cdef inline void _gate_width_cuts(_tick* k) noexcept nogil:
    """The parts' bounds (no division in a region's body: see _keep_free)."""
    cdef size_t p
    for p in range(_TAIL_CHUNKS + 1):
        k.hm_at[p] = p * k.T // _TAIL_CHUNKS


cdef inline void _gate_width_part(_tick* k, size_t p) noexcept nogil:
    k.hm_part[p] = _sum4(k.hm + k.hm_at[p], k.hm_at[p + 1] - k.hm_at[p])

cdef void _gate_rows(const dod_tracker* t, const _tick* k, _pairs* dest, uint8_t stage,
                     size_t row0, size_t row1) noexcept nogil
cdef void _gate_chunk(const dod_tracker* t, _tick* k, _pairs* seg, uint8_t stage, size_t ch) noexcept nogil
cdef void _gate_open(const dod_tracker* t, _tick* k) noexcept nogil
cdef void _gate_close(const dod_tracker* t, _tick* k, uint8_t stage) noexcept nogil
cdef void _gate(dod_tracker* t, _tick* k, uint8_t stage) noexcept nogil
cdef double _grid_side(const _tick* k) noexcept nogil
cdef void _keep_free(const dod_tracker* t, _tick* k) noexcept nogil
