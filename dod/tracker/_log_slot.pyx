"""A scan's records for the track log, copied straight from the tracker into a ring slot.

The track log (track_log.py) queues each scan as records in the slots of a
ring; this module is the copy on the tick's thread: one nogil pass over the
track table and the events' arrays into the slot's columns, with no numpy
temporaries (the writer thread, off the tick's thread, unpacks the
covariances and builds the Arrow batch).

A scan's records, in this order: the confirmed tracks (row order), then,
when the log records events, the births, confirmations, deaths and one
association per scan row read. Record j of a scan goes to piece j // R,
position j % R, for slots of R records.

A slot is float64 words, one region per column so that every copy is
contiguous (track_log._Layout reads the same layout):

    word 0                      the records in this slot (int64)
    id      [R]     uint64      the track (0: none)
    row     [R]     int64       the scan row (-1: none)
    score   [R]     float64     tracks only (events: left as they were)
    x       [R, n]  float64     tracks only
    P       [R, n (n + 1) / 2]  tracks only: packed upper triangles (covariance.py)
    kind    [R]     uint8       track_log.KINDS code
    status  [R]     uint8

Threads: the tracker's thread, between ticks, with the GIL held (the
tracker's _busy flag refuses a tick running elsewhere).
"""
from libc.stdint cimport uint8_t, uint64_t, int64_t
from libc.string cimport memcpy, memset

from dod.tracker._output cimport TrackerOutputs
from dod.tracker._track cimport dod_tracker, dod_track_real, DOD_TRACK_CONFIRMED

# The record kinds (track_log.KINDS, in order).
cdef enum:
    _TRACK = 0
    _BIRTH = 1
    _CONFIRMATION = 2
    _DEATH = 3
    _ASSOCIATION = 4


def slot_words(int n, size_t rows):
    """Float64 words of a slot of `rows` records for a state of `n` elements."""
    return 1 + rows * (3 + n + n * (n + 1) // 2) + (2 * rows + 7) // 8


cdef size_t _confirmed(const dod_tracker* e) noexcept nogil:
    cdef size_t i, c = 0
    cdef const uint8_t* state = e.cols.state
    for i in range(e.table.count):
        c += state[i] == DOD_TRACK_CONFIRMED
    return c


cdef const dod_tracker* _engine(TrackerOutputs t) except NULL:
    if t.table is None:
        raise TypeError("this Tracker was never initialised (Tracker.__new__ without __init__)")
    if t._busy:
        raise RuntimeError("a tick of this tracker is running in another thread")
    return &t.engine


def scan_records(TrackerOutputs tracker, bint events):
    """(records, tracks): the latest scan's records and how many of them are confirmed tracks.

    Raises RuntimeError while a tick runs in another thread.
    """
    cdef const dod_tracker* e = _engine(tracker)
    cdef size_t c = _confirmed(e)
    cdef size_t total = c
    if events:
        total += e.events.births + e.events.confirmations + e.events.deaths + e.events.rows
    return total, c


cdef inline void _copy_rows(double* out, const dod_track_real* col, size_t rs, size_t es, size_t i0, size_t run,
                            size_t k) noexcept nogil:
    """Rows i0 .. i0 + run of a strided track column (dod_track_cols: k
    elements, row stride rs, element stride es) into out, row-major and in
    float64 (the record's format whatever the column's layout and dtype):
    one memcpy when the column's rows are contiguous doubles, else element
    by element, each element's lane read in order."""
    cdef size_t r, a
    if dod_track_real is double:
        if es == 1 and rs == k:
            memcpy(out, col + i0 * k, run * k * sizeof(double))
            return
    for a in range(k):
        for r in range(run):
            out[r * k + a] = col[(i0 + r) * rs + a * es]


cdef size_t _fill(const dod_tracker* e, bint events, double* w, size_t R, size_t start) noexcept nogil:
    """Write the scan's records start .. start + m into slot words `w` (m: what fits). Returns m."""
    cdef size_t n = <size_t>e.n, npk = n * (n + 1) // 2
    cdef uint64_t* ids = <uint64_t*>(w + 1)
    cdef int64_t* row = <int64_t*>(w + 1 + R)
    cdef double* score = w + 1 + 2 * R
    cdef double* x = w + 1 + 3 * R
    cdef double* P = x + R * n
    cdef uint8_t* kind = <uint8_t*>(P + R * npk)
    cdef uint8_t* status = kind + R
    cdef const uint8_t* state = e.cols.state
    cdef size_t T = e.table.count, i = 0, i0, run, j = 0, pos = 0, q, lo, hi, base, k
    cdef int p
    cdef int64_t tr
    # The confirmed tracks: runs of consecutive confirmed rows, each column one memcpy per run.
    while i < T and pos < R:
        if state[i] != DOD_TRACK_CONFIRMED:
            i += 1
            continue
        i0 = i
        while i < T and state[i] == DOD_TRACK_CONFIRMED:
            i += 1
        run = i - i0
        if j + run <= start:                    # before this piece
            j += run
            continue
        if j < start:                           # the run starts in an earlier piece
            i0 += start - j
            run -= start - j
            j = start
        if run > R - pos:
            run = R - pos
            i = i0 + run
        memcpy(ids + pos, e.cols.id + i0, run * sizeof(uint64_t))
        memcpy(score + pos, e.cols.score + i0, run * sizeof(double))
        if e.cols.single:
            _copy_rows(x + pos * n, e.cols.xf, e.cols.xr, e.cols.xs, i0, run, n)
            _copy_rows(P + pos * npk, e.cols.Pf, e.cols.Pr, e.cols.Ps, i0, run, npk)
        else:
            _copy_rows(x + pos * n, e.cols.x, e.cols.xr, e.cols.xs, i0, run, n)
            _copy_rows(P + pos * npk, e.cols.P, e.cols.Pr, e.cols.Ps, i0, run, npk)
        for q in range(pos, pos + run):
            row[q] = -1
        memset(kind + pos, _TRACK, run)
        memset(status + pos, DOD_TRACK_CONFIRMED, run)
        pos += run
        j += run
    if not events:
        (<int64_t*>w)[0] = <int64_t>pos
        return pos
    base = _confirmed(e)                        # (the walk above may have stopped at a full slot)
    # Each event part occupies records [base, base + k); this piece takes the part of it in
    # [start + pos, start + R).
    for p in range(_BIRTH, _ASSOCIATION + 1):
        if p == _BIRTH:
            k = e.events.births
        elif p == _CONFIRMATION:
            k = e.events.confirmations
        elif p == _DEATH:
            k = e.events.deaths
        else:
            k = e.events.rows
        lo = start + pos
        if lo < base:
            lo = base
        hi = start + R
        if hi > base + k:
            hi = base + k
        if lo < hi:
            lo -= base
            hi -= base
            if p == _BIRTH:
                memcpy(ids + pos, e.events.born + lo, (hi - lo) * sizeof(uint64_t))
                memcpy(row + pos, e.events.born_row + lo, (hi - lo) * sizeof(int64_t))
                memset(status + pos, 0, hi - lo)
            elif p == _CONFIRMATION:
                memcpy(ids + pos, e.events.confirmed + lo, (hi - lo) * sizeof(uint64_t))
                memset(status + pos, 0, hi - lo)
                for q in range(hi - lo):
                    row[pos + q] = -1
            elif p == _DEATH:
                memcpy(ids + pos, e.events.died + lo, (hi - lo) * sizeof(uint64_t))
                memcpy(status + pos, e.events.died_status + lo, hi - lo)
                for q in range(hi - lo):
                    row[pos + q] = -1
            else:
                for q in range(hi - lo):
                    tr = e.events.track[lo + q]
                    ids[pos + q] = <uint64_t>tr if tr >= 0 else 0
                    row[pos + q] = <int64_t>(lo + q)
                memset(status + pos, 0, hi - lo)
            memset(kind + pos, p, hi - lo)
            pos += hi - lo
        base += k
    (<int64_t*>w)[0] = <int64_t>pos
    return pos


def fill_slot(TrackerOutputs tracker, bint events, double[::1] words not None, size_t rows, size_t start):
    """Copy the latest scan's records start .. start + m into a slot of `rows` records; returns m.

    `words` is the slot (at least :func:`slot_words` long); word 0 receives m.

    Raises
    ------
    ValueError
        A slot shorter than its layout.
    RuntimeError
        While a tick runs in another thread.
    """
    cdef const dod_tracker* e = _engine(tracker)
    if <size_t>words.shape[0] < <size_t>slot_words(e.n, rows):
        raise ValueError(f"a slot of {rows} records needs {slot_words(e.n, rows)} words, not {words.shape[0]}")
    # The copy keeps the GIL: it is short (~0.1 ms at 10,000 tracks), and a thread that let it go
    # here could wait for the log's writer thread to give it back.
    return _fill(e, events, &words[0], rows, start)


def finish_records(const uint8_t[::1] kind not None, double[::1] score not None, double[:, ::1] x not None,
                   const double[:, ::1] packed not None, double[:, :, ::1] P not None):
    """The writer thread's half: full covariances from the packed ones, NaN in an event's score, x and P.

    `P` (k, n, n) receives each track record's covariance (the packed upper
    triangle, row by row, mirrored); event records get NaN in score, x and
    P. One pass without the GIL, so that the writer leaves the tick's
    thread the interpreter.

    Raises
    ------
    ValueError
        Columns of different lengths or shapes that do not fit n.
    """
    cdef Py_ssize_t k = kind.shape[0], n = x.shape[1], r, a, b, q
    if not (score.shape[0] == k and x.shape[0] == k and packed.shape[0] == k and P.shape[0] == k) or \
            packed.shape[1] != n * (n + 1) // 2 or P.shape[1] != n or P.shape[2] != n:
        raise ValueError("finish_records needs k records of score, x (k, n), packed (k, n(n+1)/2) and P (k, n, n)")
    cdef double nan = float("nan")
    with nogil:
        for r in range(k):
            if kind[r] != _TRACK:
                score[r] = nan
                for a in range(n):
                    x[r, a] = nan
                    for b in range(n):
                        P[r, a, b] = nan
                continue
            q = 0
            for a in range(n):
                for b in range(a, n):
                    P[r, a, b] = packed[r, q]
                    P[r, b, a] = packed[r, q]
                    q += 1
