"""What happened in a scan: the events, written by the passes that decide them.

With config.events the owner gives the engine arrays (dod_tick_events in
_track.pxd, sized once: the scan's rows and births by max_detections,
confirmations and deaths by the table's capacity); without, they are NULL
and nothing here or in the passes writes. Per tick:

    open      once the frame is carved (_events_open): no scan row has
              updated a track yet (-1), no event
    update    management (_update.pyx: _manage_rows, its _told variant)
              writes each updated track's id at its detection, and lists
              each row chunk's confirmations and deaths (with the status
              the dead track had) from the chunk's first row on; after the
              pass (_events_update) the chunks' lists are joined in row
              order, and a scan with invalid rows has its detections' ids
              moved back to their scan rows (-1 at the dropped ones)
    births    the births' insert (_births.pyx: _insert_births, both
              initiations) writes their ids (next_id on, ascending) and
              their detections' scan rows (_events_births)

Reads the track table's ids and states at the moments above, and the scan.
Threads: management's rows write only their own detection's entry (a
detection updates one track at most) and their own chunk's lists, which
are joined serially in row order; the rest is serial. The same events for
every thread count.
"""
from libc.stdint cimport uint8_t, uint64_t, int32_t, int64_t
from libc.string cimport memset, memmove
from dod.tracker._track cimport dod_tracker, dod_tick_events
from dod.tracker._intake cimport _row_valid


cdef void _events_open(dod_tracker* t, const _tick* k) noexcept nogil:
    """The tick's events, empty: every scan row read unassigned (-1)."""
    cdef dod_tick_events* e = &t.events
    if e.track == NULL:
        return
    memset(e.track, 0xff, k.n_scan * sizeof(int64_t))
    e.rows = k.n_scan
    e.births = 0
    e.confirmations = 0
    e.deaths = 0


cdef size_t _join(void* base, size_t size, const size_t* n, size_t chunks, size_t chunk_rows) noexcept nogil:
    """Chunk c's n[c] entries of `size` bytes, at entry c * chunk_rows, end to end from entry 0; how many."""
    cdef char* b = <char*>base
    cdef size_t ch, at = 0
    for ch in range(chunks):
        if at != ch * chunk_rows and n[ch] > 0:
            memmove(b + at * size, b + ch * chunk_rows * size, n[ch] * size)
        at += n[ch]
    return at


cdef void _spread_rows(dod_tick_events* e, const _tick* k, int dim) noexcept nogil:
    """A scan with invalid rows: the valid detections' entries (e.track[0:D])
    to their scan rows, -1 at the rows intake dropped (its test, row by row:
    _intake.pyx), and each valid detection's scan row into e.row_of. From
    the last row down: a row is never before its detection's place, so the
    moves never overwrite an entry still to move."""
    cdef size_t row = k.n_scan, j = k.D
    cdef const double* z
    cdef int cols = dim if k.sensor == NULL else k.mcols
    while row > 0:
        row -= 1
        z = k.scan + row * cols
        if _row_valid(z, cols, dim, k.sensor != NULL, k.coord_max):
            j -= 1
            e.track[row] = e.track[j]
            e.row_of[j] = <int32_t>row
        else:
            e.track[row] = -1


cdef void _events_update(dod_tracker* t, const _tick* k) noexcept nogil:
    """After the update pass: its chunks' confirmations and deaths joined in
    row order, the updated tracks' ids at their scan rows."""
    cdef dod_tick_events* e = &t.events
    if e.track == NULL:
        return
    e.confirmations = _join(e.confirmed, sizeof(uint64_t), k.told_confirmed, k.row_chunks, k.chunk_rows)
    e.deaths = _join(e.died, sizeof(uint64_t), k.told_died, k.row_chunks, k.chunk_rows)
    _join(e.died_status, sizeof(uint8_t), k.told_died, k.row_chunks, k.chunk_rows)
    if k.D != k.n_scan:
        _spread_rows(e, k, t.dim)


cdef void _events_births(dod_tracker* t, const _tick* k, size_t n) noexcept nogil:
    """n births (k.born[0:n], in scan order, before next_id moves past
    them): their ids and their detections' scan rows, after the scan's
    births so far (two-point initiation's, then single-point's: each
    detection is born once, so there are at most D)."""
    cdef dod_tick_events* e = &t.events
    cdef size_t b, at
    cdef int32_t j
    if e.track == NULL:
        return
    at = e.births
    for b in range(n):
        j = k.born[b]
        e.born[at + b] = t.next_id + b
        e.born_row[at + b] = e.row_of[j] if k.D != k.n_scan else j
    e.births = at + n
