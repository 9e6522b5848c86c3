"""The table's engine slow paths: clear, batch inserts, batch removal.

The functions that dod/_table_engine.pxd declares and does not define
inline: the named slow paths of the engine (clearing, inserting many rows,
the phases of a batch removal and the inserts that reuse its slots, an
insert's scatter of rows into an F-order column's lanes). Plain C on the
``dod_table`` struct, without the GIL; the Python face (dod.table) and the
tracker's passes call them. The contract is dod/table.pxd's.
"""
from libc.stdint cimport uint8_t
from libc.string cimport memcpy

from dod._core cimport DOD_DEBUG
from dod._types cimport dod_handle, dod_index, dod_generation, dod_handle_make

# Rows per block when an insert scatters rows into an F-order column's lanes.
cdef enum:
    _PUT_BLOCK = 128


# ---------------------------------------------------------------- engine slow paths

cdef void dod_table_clear(dod_table* t) noexcept nogil:
    """Remove every row: each live slot's generation moves on, so every
    handle goes stale; then every slot is free, so the free list is dropped
    and the next inserts take slots 1, 2, 3... in order."""
    cdef size_t r, c, n = t.count
    cdef const dod_index* row_slot = t.row_slot
    cdef dod_generation* slot_gen = t.slot_gen
    if n > t.peak:
        t.peak = n
    for r in range(n):
        slot_gen[row_slot[r]] += 1
    if t.slots_used > t.slots_high:      # only a hand-built struct can get here
        t.slots_high = t.slots_used
    t.free_head = 0
    t.slots_used = 0
    if DOD_DEBUG:
        for c in range(t.ncols):
            dod_table_poison_cells(t, c, 0, n)
    t.removes += n
    t.count = 0


cdef size_t dod_table_insert_many(dod_table* t, size_t n, dod_handle* out) noexcept nogil:
    """Append n rows (no column written) and store their handles in out[0:n]
    (out may be NULL: not stored); all or nothing: returns 0 (and inserts
    nothing) when they do not fit."""
    cdef size_t k, row = t.count
    cdef dod_index slot, head = t.free_head, used = t.slots_used, high = t.slots_high
    cdef dod_index* row_slot = t.row_slot
    cdef dod_index* slot_row = t.slot_row
    cdef dod_generation* slot_gen = t.slot_gen
    cdef dod_generation base = t.gen_base
    if n > t.capacity - row:
        t.failed += 1
        return 0
    for k in range(n):
        if head != 0:
            slot = head
            head = slot_row[slot] & ~DOD_TABLE_FREE
        else:
            used += 1
            slot = used
            if slot > high:
                high = slot
                slot_gen[slot] = base
        slot_row[slot] = <dod_index>(row + k)
        row_slot[row + k] = slot
        if out != NULL:
            out[k] = dod_handle_make(slot, slot_gen[slot])
    t.free_head = head
    t.slots_used = used
    t.slots_high = high
    t.count = row + n
    t.inserts += n
    return n


cdef size_t dod_table_insert_rows(dod_table* t, size_t n) noexcept nogil:
    """Append n rows with the schema's zero policy, as n dod_table_insert
    calls would, but clearing each column's new rows with one memset (a
    batch of births: per-row memsets of every column were most of their
    cost); all or nothing, as dod_table_insert_many. Rows count - n .. count - 1.
    (A parallel caller: dod_table_insert_many(t, n, NULL), then
    dod_table_zero_rows over any split of the new rows.)"""
    cdef size_t row = t.count
    if n == 0 or dod_table_insert_many(t, n, NULL) == 0:
        return 0
    dod_table_zero_rows(t, row, n)
    return n


cdef void dod_table_zero_rows(dod_table* t, size_t row, size_t n) noexcept nogil:
    """Rows [row, row + n) of every column whose policy is to zero new rows,
    zeroed: one memset per column. Disjoint ranges may run on different
    threads at once."""
    cdef size_t c
    for c in range(t.ncols):
        if t.zero_on_insert[c]:
            dod_table_zero_cells(t, c, row, n)


cdef size_t dod_table_removal_list(const uint8_t* flag, uint8_t value, size_t row0, size_t row1,
                                   dod_index* out) noexcept nogil:
    """The rows r in [row0, row1) with flag[r] == value, ascending, into
    out[0:count]; returns count. `out` needs row1 - row0 entries: the pass
    writes one at every row, without a branch (a test per row mispredicts
    at every flagged row, and these are scattered). Disjoint row ranges
    may be listed at the same time, each into its own part of r.fill."""
    cdef size_t row, m = 0
    for row in range(row0, row1):
        out[m] = <dod_index>row
        m += flag[row] == value
    return m


cdef void dod_table_removal_plan(const dod_table* t, const uint8_t* flag, uint8_t value,
                                 dod_table_removal* r) noexcept nogil:
    """Rows r with flag[r] == value (flag: one byte per row, count of them)
    are to go. Writes r.hole/r.fill/r.slot and the counts; the table is not
    changed yet. (dod_table_removal_list over all rows into r.fill, then
    dod_table_removal_walk.)"""
    dod_table_removal_walk(t, r, dod_table_removal_list(flag, value, 0, t.count, r.fill))


cdef void dod_table_removal_walk(const dod_table* t, dod_table_removal* r, size_t m) noexcept nogil:
    """The plan, from the m rows to go listed ascending in r.fill[0:m]
    (dod_table_removal_list, over all rows or over consecutive ranges
    whose lists were put end to end).

    One-at-a-time removal from the highest row down moves the last row into
    each hole, and a row that filled a hole at or above the new count moves
    again when a lower hole takes the last row; so the pairs come from
    replaying that walk on row numbers alone, in the same pass that lists
    the freed slots: `at` holds which original row sits at each position at
    or above the new count (in r.hole's memory past the holes: there are at
    most new-count holes and count - new-count such positions).

    The list's first `moves` entries are the holes (below the new count),
    and hole h, the h-th entry, is read just before fill[h] is written over it."""
    cdef size_t n = t.count, row, h, s = 0, cnt, last, L, i, lo, hi
    cdef dod_index* at
    cdef const dod_index* flagged = r.fill
    L = n - m
    lo = 0              # the holes: the entries below L (a binary search of the ascending list)
    hi = m
    while lo < hi:
        h = (lo + hi) // 2
        if flagged[h] < L:
            lo = h + 1
        else:
            hi = h
    h = lo
    r.removed = m
    r.count = L
    r.moves = h
    r.free_head = t.free_head
    at = r.hole + r.moves
    for row in range(L, n):
        at[row - L] = <dod_index>row
    cnt = n
    i = m
    while i > 0:
        i -= 1
        row = flagged[i]
        r.slot[s] = t.row_slot[row]         # the order the walk frees them
        s += 1
        last = cnt - 1          # >= L: this flagged row is not removed yet
        if row < L:             # a final hole (i == h - 1): filled by the original row now last
            h -= 1
            r.hole[h] = <dod_index>row
            r.fill[h] = at[last - L]
        elif row != last:
            at[row - L] = at[last - L]
        cnt -= 1


cdef void dod_table_removal_move(dod_table* t, const dod_table_removal* r, size_t i0, size_t i1) noexcept nogil:
    """Moves [i0, i1): row fill[i] over row hole[i] in every column, and the
    slot map. Column by column, lane by lane in F order (the holes in
    ascending order)."""
    cdef size_t c, k, i, rb
    cdef char* col
    cdef dod_index moved
    for c in range(t.ncols):
        rb = dod_table_lane_item(t, c)
        for k in range(t.lanes[c]):
            col = dod_table_lane(t, c, k)
            for i in range(i0, i1):
                dod_table_copy_row(col, rb, r.hole[i], r.fill[i])
    for i in range(i0, i1):
        moved = t.row_slot[r.fill[i]]
        t.row_slot[r.hole[i]] = moved
        t.slot_row[moved] = r.hole[i]


cdef void dod_table_removal_free(dod_table* t, const dod_table_removal* r, size_t i0, size_t i1) noexcept nogil:
    """Removed slots [i0, i1): generation + 1, linked into the free list in
    the order one-at-a-time removal pushes them (slot[i] points at slot[i - 1])."""
    cdef size_t i
    cdef dod_index s
    for i in range(i0, i1):
        s = r.slot[i]
        t.slot_gen[s] += 1
        t.slot_row[s] = DOD_TABLE_FREE | (r.slot[i - 1] if i > 0 else r.free_head)


cdef void dod_table_removal_finish(dod_table* t, const dod_table_removal* r) noexcept nogil:
    """The counts, the free list's head, the peak; poisons the vacated rows (debug builds)."""
    cdef size_t c
    if r.removed == 0:
        return
    if t.count > t.peak:
        t.peak = t.count
    if DOD_DEBUG:
        for c in range(t.ncols):
            dod_table_poison_cells(t, c, r.count, t.count - r.count)
    t.free_head = r.slot[r.removed - 1]
    t.count = r.count
    t.removes += r.removed


cdef size_t dod_table_reusable(const dod_table* t, const dod_table_removal* r, size_t n) noexcept nogil:
    """How many of n rows inserted now take slots that the removal r freed:
    min(n, r.removed) when nothing was inserted or removed since r finished
    (its slots head the free list), else 0."""
    if r.removed == 0 or t.count != r.count or t.free_head != r.slot[r.removed - 1]:
        return 0
    return min(n, r.removed)


cdef size_t dod_table_insert_reusing(dod_table* t, const dod_table_removal* r, size_t n,
                                     size_t k) noexcept nogil:
    """dod_table_insert_many(t, n, NULL), except the slot maps of the first k
    rows (k from dod_table_reusable): their slots are r's, in the order the
    free list holds them, and dod_table_insert_freed writes their maps over
    any split of [0, k), while this runs or after (they touch other
    entries). All or nothing: returns 0 (and inserts nothing) when the n
    rows do not fit, else n."""
    if n > t.capacity - t.count:
        t.failed += 1
        return 0
    if k > 0:
        t.free_head = r.slot[r.removed - 1 - k] if k < r.removed else r.free_head
        t.count += k
        t.inserts += k
    if n > k:
        dod_table_insert_many(t, n - k, NULL)
    return n


cdef void dod_table_insert_freed(dod_table* t, const dod_table_removal* r, size_t row0,
                                 size_t b0, size_t b1) noexcept nogil:
    """Slot maps of the rows dod_table_insert_reusing took from r's slots:
    row row0 + b, b in [b0, b1), holds slot r.slot[r.removed - 1 - b] (the
    b-th of the free list: the walk freed the highest row's slot first)."""
    cdef size_t b
    cdef dod_index s
    for b in range(b0, b1):
        s = r.slot[r.removed - 1 - b]
        t.slot_row[s] = <dod_index>(row0 + b)
        t.row_slot[row0 + b] = s


cdef size_t dod_table_remove_flagged(dod_table* t, const uint8_t* flag, uint8_t value,
                                     dod_table_removal* r) noexcept nogil:
    """Every phase of a removal, serially; returns the rows removed."""
    dod_table_removal_plan(t, flag, value, r)
    dod_table_removal_move(t, r, 0, r.moves)
    dod_table_removal_free(t, r, 0, r.removed)
    dod_table_removal_finish(t, r)
    return r.removed


cdef void _put_lanes(dod_table* t, size_t c, size_t first, size_t n, const char* src, bint batch) noexcept nogil:
    """Rows [first, first + n) of F-order column c from `src`, rows in C
    order (batch False: one row, written to all n): component k of each row
    into lane k. In blocks of rows, so that a block's source rows stay in
    cache while every lane takes its part (lane by lane over all rows read
    the source once per lane)."""
    cdef size_t k, i, b, e, w = dod_table_lane_item(t, c)
    cdef size_t step = t.row_bytes[c] if batch else 0
    cdef char* lane
    cdef const char* s
    b = 0
    while b < n:
        e = min(n - b, <size_t>_PUT_BLOCK)
        for k in range(t.lanes[c]):
            lane = dod_table_lane(t, c, k) + (first + b) * w
            s = src + b * step + k * w
            if w == 8:          # constant sizes: one load and store each
                for i in range(e):
                    memcpy(lane + i * 8, s + i * step, 8)
            elif w == 4:
                for i in range(e):
                    memcpy(lane + i * 4, s + i * step, 4)
            else:
                for i in range(e):
                    memcpy(lane + i * w, s + i * step, w)
        b += e
