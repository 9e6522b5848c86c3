"""Deaths: the rows management marked leave the table.

Reads the states and the rows each chunk listed; with confirmed_first,
first swaps the confirmed tracks into the leading rows (_confirmed_first),
then removes the marked rows by dod.table's batch removal (the last rows
fill the holes, handles of the others kept). Writes the track table and
the locality counters (t.displaced).

Threads: the plan is serial; the row moves and the freed slots run over
the workers in chunks (the moves of a row chunk by the worker that updated
it). The table is the same for every thread count.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, int32_t
from libc.string cimport memmove
from dod.table cimport (dod_table, dod_table_removal, dod_table_swap_rows, dod_table_removal_walk,
                        dod_table_removal_move, dod_table_removal_free, dod_table_removal_finish)
from dod._types cimport dod_index
from dod.tracker._track cimport dod_tracker, dod_tick_counts, DOD_TRACK_NONE, DOD_TRACK_CONFIRMED
from dod.tracker._frame cimport _tick, _TAIL_CHUNKS
from dod.tracker._executor cimport _split_rows, _run_chunks, _PASS_DEATHS


cdef enum:
    # Rows of a row pass that one row swap of confirmed_first weighs against
    # _split_rows: a swap moves two random rows, every column, so it costs
    # tens of rows' streaming work; counted as one row the swaps stayed
    # serial where they mattered (docs/design/threads-and-locality.md).
    _SWAP_ROWS = 64




cdef void _swap_pairs(dod_table* tab, const dod_index* a, const dod_index* b, size_t i0, size_t i1) noexcept nogil:
    cdef size_t i
    for i in range(i0, i1):
        dod_table_swap_rows(tab, a[i], b[i])


cdef size_t _confirmed_first(dod_tracker* t, _tick* k, size_t m, size_t q, size_t C, bint par,
                             size_t* mixed, size_t* unplaced) noexcept nogil:
    """confirmed_first: after management, put the C confirmed tracks in rows
    [0, C). In: the rows to go in k.rm.fill[0:m] and the confirmed rows at
    or past k.front in k.rm.hole[0:q], each ascending (the removal's list,
    _confirmed_past). The rows below C holding no confirmed track (the
    front's dead rows, and past the front whatever is not confirmed) pair
    with the confirmed rows at or past C (the front's last ones when it
    shrank, and the tick's confirmations), both in row order, and each pair
    swaps (dod_table_swap_rows: handles kept). Then the rows to go are all
    at or past C: the list is rewritten (k.rm.fill, ascending) and its
    length returned, for dod_table_removal_walk, whose moves fill them from
    the table's end and never touch rows below C.

    Rows [0, k.front) held confirmed tracks when the tick began (this does
    it every tick, and a sort puts them first), so both sides count the
    same; should they not (a caller wrote the state column), the shorter
    side's pairs are made and the rest left to the mixing trigger.
    A row below t.ordered_rows that takes a track counts once as displaced
    (sort_when_displaced); `mixed` and `unplaced` (counted by management)
    lose the rows this settles. The same swaps at every thread count:
    over the workers with `par` and enough of them."""
    cdef dod_table* tab = t.table
    cdef const uint8_t* state = t.cols.state
    cdef size_t front = k.front, low = min(front, C), nx = 0, ny, i, j, w, p, pairs, r, ch
    cdef dod_index* X = k.rm.slot           # (free until the walk)
    cdef dod_index* Y = k.rm.hole
    cdef dod_index* fill = k.rm.fill
    cdef size_t i_at[_TAIL_CHUNKS + 1]
    cdef int nt = t.threads
    # X: rows below C without a confirmed track, ascending: the rows to go
    # below the front, then whatever is not confirmed in [front, C).
    for i in range(m):
        if fill[i] >= low:
            break
        X[nx] = fill[i]
        nx += 1
    for r in range(front, C):
        X[nx] = <dod_index>r
        nx += state[r] != DOD_TRACK_CONFIRMED
    # Y: confirmed rows at or past C, ascending: those in [C, front), then
    # the listed ones (all at or past the front) from C on.
    ny = 0
    if C < front:
        for r in range(C, front):
            ny += state[r] == DOD_TRACK_CONFIRMED
        if ny > 0:
            memmove(Y + ny, Y, q * sizeof(dod_index))
            j = 0
            for r in range(C, front):   # (a branch: a store past the last would land on the list)
                if state[r] == DOD_TRACK_CONFIRMED:
                    Y[j] = <dod_index>r
                    j += 1
        ny += q
    else:
        j = 0
        while j < q and Y[j] < C:
            j += 1
        ny = q - j
        if j > 0 and ny > 0:
            memmove(Y, Y + j, ny * sizeof(dod_index))
    pairs = min(nx, ny)
    if pairs == 0:
        return m
    for p in range(pairs):
        if X[p] < k.front:
            mixed[0] -= 1
        if X[p] < k.ordered and Y[p] >= k.ordered:
            unplaced[0] -= 1        # (counted at Y[p]: now a displaced row instead)
        if t.displaced != NULL and X[p] < t.ordered_rows and not t.displaced[X[p]]:
            t.displaced[X[p]] = 1
            t.displaced_rows += 1
    if par and pairs * _SWAP_ROWS >= _split_rows(t):
        for ch in range(_TAIL_CHUNKS + 1):      # (no division in a region's body: see _keep_free)
            i_at[ch] = ch * pairs // _TAIL_CHUNKS
        for ch in prange(_TAIL_CHUNKS, num_threads=nt, schedule="static"):
            _swap_pairs(tab, X, Y, i_at[ch], i_at[ch + 1])
    else:
        _swap_pairs(tab, X, Y, 0, pairs)
    # The rows to go now: those listed that still go (not a row below C,
    # which took a confirmed track), and the Y rows that took a dead one.
    w = 0
    for i in range(m):
        fill[w] = fill[i]
        w += state[fill[i]] == DOD_TRACK_NONE
    j = 0
    for p in range(pairs):
        Y[j] = Y[p]
        j += state[Y[p]] == DOD_TRACK_NONE
    # merge, from the end: fill[0:w] and Y[0:j], both ascending
    i = w
    p = j
    r = w + j
    while p > 0:
        r -= 1
        if i > 0 and fill[i - 1] > Y[p - 1]:
            i -= 1
            fill[r] = fill[i]
        else:
            p -= 1
            fill[r] = Y[p]
    return w + j


cdef void _count_displaced(dod_tracker* t, const dod_table_removal* r) noexcept nogil:
    """Mark the rows in order that this tick's deaths fill with the table's
    last rows (r.hole ascends): each such row now holds a track from anywhere
    in space until the next sort (sort_when_displaced). A row counts once,
    however often it is filled again: the clutter's short-lived tracks die
    and refill the same holes scan after scan."""
    cdef size_t i, h
    if t.displaced == NULL:
        return
    for i in range(r.moves):
        h = r.hole[i]
        if h >= t.ordered_rows:
            break
        if not t.displaced[h]:
            t.displaced[h] = 1
            t.displaced_rows += 1


cdef void _deaths_kernel(dod_tracker* t, _tick* k, size_t item, int w) noexcept nogil:
    """Item < row_chunks: the moves whose holes fall in that row chunk;
    else one of the k.free_parts parts of the freed slots."""
    cdef size_t p, n = k.rm.removed, step
    if item < k.row_chunks:
        dod_table_removal_move(t.table, &k.rm, k.move_at[item], k.move_at[item + 1])
        return
    p = item - k.row_chunks
    step = max(<size_t>1, (n + k.free_parts - 1) // k.free_parts)
    dod_table_removal_free(t.table, &k.rm, min(n, p * step), min(n, (p + 1) * step))


cdef void _deaths_pass(dod_tracker* t, _tick* k, dod_tick_counts* cnt) noexcept nogil:
    """Remove the rows management marked (state NONE): the rows removing
    them one at a time from the highest down would leave (the last row
    fills each hole), planned in one pass over the states; the row moves
    (random writes) and the freed slots over the workers. A hole is filled
    by the worker that just updated its row chunk (the holes ascend: each
    chunk's moves are a run of them; split evenly instead, a hole's lines
    were in the other core's cache); the freed slots in _TAIL_CHUNKS parts.
    The same table for every thread count. With confirmed_first the
    confirmed tracks first take rows [0, confirmed) (_confirmed_first:
    swaps), so that every row to go is behind them and the moves never
    reach them."""
    cdef int nt = t.threads
    cdef size_t i = 0, j = 0, ch
    cdef bint par
    # each chunk listed its rows to go (and its confirmed ones): end to end, in row order
    for ch in range(k.row_chunks):
        if i != ch * k.chunk_rows and k.dead_n[ch] > 0:
            memmove(k.rm.fill + i, k.rm.fill + ch * k.chunk_rows, k.dead_n[ch] * sizeof(dod_index))
        i += k.dead_n[ch]
        if t.confirmed_first:
            if j != ch * k.chunk_rows and k.conf_n[ch] > 0:
                memmove(k.rm.hole + j, k.rm.hole + ch * k.chunk_rows, k.conf_n[ch] * sizeof(dod_index))
            j += k.conf_n[ch]
    if t.confirmed_first:
        i = _confirmed_first(t, k, i, j, cnt.confirmed, k.par, &k.mixed, &k.unplaced)
    dod_table_removal_walk(t.table, &k.rm, i)
    cnt.deaths += k.rm.removed
    if not t.confirmed_first:   # (with it, every hole is past the rows in order that still count)
        _count_displaced(t, &k.rm)
    par = k.par and k.rm.removed > 0
    k.free_parts = _TAIL_CHUNKS if par else 1
    i = 0
    for ch in range(k.row_chunks):
        while i < k.rm.moves and k.rm.hole[i] < ch * k.chunk_rows:
            i += 1
        k.move_at[ch] = i
    k.move_at[k.row_chunks] = k.rm.moves
    for ch in range(k.free_parts):
        k.ran[k.row_chunks + ch] = <int32_t>(ch % <size_t>nt)
    _run_chunks(t, k, par, _PASS_DEATHS, k.row_chunks + k.free_parts, NULL, _deaths_kernel, NULL)
    dod_table_removal_finish(t.table, &k.rm)
