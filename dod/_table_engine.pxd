# dod/_table_engine.pxd: the struct-of-arrays table's engine: the C struct,
# its inline nogil fast paths and the declarations of its slow paths
# (dod/_table_engine.pyx). dod/table.pxd re-exports every name, and its
# header states the layout, the invariants and the contract the caller owns
# on these functions: cimport them from dod.table.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.string cimport memset, memcpy

from dod._core cimport DOD_DEBUG, dod_poison, dod_prefetch
from dod._types cimport (dod_handle, dod_index, dod_generation, dod_handle_make,
                         dod_handle_index, dod_handle_generation)
from dod.schema cimport DOD_SCHEMA_MAX_NDIM


cdef enum:
    DOD_TABLE_NIL = -1              # row index of the nil row (all zeros)
    DOD_TABLE_MAX_NDIM = DOD_SCHEMA_MAX_NDIM    # dimensions of a per-row shape
    DOD_TABLE_REORDER_AHEAD = 8     # rows between a prefetch and the reorder's read of them

# High bit of slot_row for free slots (capacity is below 2**31).
cdef extern from *:
    """
    #define DOD_TABLE_FREE 0x80000000u
    """
    const uint32_t DOD_TABLE_FREE


ctypedef struct dod_table:
    char** columns            # column base pointers (F order: lane 0), ncols of them (never move)
    size_t* row_bytes         # bytes of one row of each column (every lane's item, in F order)
    uint8_t* zero_on_insert   # 1: dod_table_insert clears the column's new row
    size_t* lane_bytes        # 0: C order; F order: bytes from one lane to the next (a multiple of 64)
    size_t* lanes             # 1 in C order; F order: the row shape's components (one lane each)
    size_t lane_columns       # columns in F order (0: the row-move paths skip every lane check)
    size_t ncols
    size_t count              # live rows: rows 0 .. count-1
    size_t capacity           # rows every column holds
    dod_index* row_slot       # dense side: slot of each row [0, capacity)
    dod_index* slot_row       # sparse side [0, capacity]: row of a live slot, or FREE | next free
    dod_generation* slot_gen  # generation of each slot [0, capacity]
    dod_index free_head       # first free slot (0: none; take a never-used one)
    dod_index slots_used      # slots 1..slots_used are live or free-listed
    dod_generation gen_base   # generation a slot starts with (per-table)
    size_t peak               # highest count, folded in at remove/clear
    size_t inserts            # successful inserts since creation
    size_t removes            # rows removed since creation (clear included)
    size_t failed             # inserts refused because the table was full
    dod_index slots_high      # slots 1..slots_high have been used at least once (>= slots_used)


# Slow paths: named functions in _table_engine.pyx.
cdef void dod_table_clear(dod_table* t) noexcept nogil
cdef size_t dod_table_insert_many(dod_table* t, size_t n, dod_handle* out) noexcept nogil
cdef size_t dod_table_insert_rows(dod_table* t, size_t n) noexcept nogil
cdef void dod_table_zero_rows(dod_table* t, size_t row, size_t n) noexcept nogil

# Removing many rows at once, in phases that a caller may spread over
# threads: plan (which rows fill which holes: its listing of the rows to go
# over any split of the rows, its walk serial), then the moves and
# the freeing of the removed slots (each over any split of its index range,
# disjoint ranges at the same time), then finish (serial). The end state is
# the one dod_table_remove_row gives removing the flagged rows one at a time
# from the highest down (the last row fills each hole): the same rows in the
# same places, slots, generations, free-list order and statistics. Between
# plan and finish the table is mid-change: no other use of it.
ctypedef struct dod_table_removal:
    dod_index* hole           # caller's memory, count entries: flagged rows below the new count, ascending
    dod_index* fill           # caller's memory, count entries: the row (a live one at or above it) that fills each
    dod_index* slot           # caller's memory, count entries: slots of the flagged rows, highest row first
    size_t moves              # (hole, fill) pairs
    size_t removed            # flagged rows
    size_t count              # rows after
    dod_index free_head       # the free list's head before

cdef void dod_table_removal_plan(const dod_table* t, const uint8_t* flag, uint8_t value,
                                 dod_table_removal* r) noexcept nogil
# The plan in two steps, the first over any split of the rows (each range
# listed into r.fill from its first row on, then the lists moved end to end).
cdef size_t dod_table_removal_list(const uint8_t* flag, uint8_t value, size_t row0, size_t row1,
                                   dod_index* out) noexcept nogil
cdef void dod_table_removal_walk(const dod_table* t, dod_table_removal* r, size_t m) noexcept nogil
cdef void dod_table_removal_move(dod_table* t, const dod_table_removal* r, size_t i0, size_t i1) noexcept nogil
cdef void dod_table_removal_free(dod_table* t, const dod_table_removal* r, size_t i0, size_t i1) noexcept nogil
cdef void dod_table_removal_finish(dod_table* t, const dod_table_removal* r) noexcept nogil
cdef size_t dod_table_remove_flagged(dod_table* t, const uint8_t* flag, uint8_t value,
                                     dod_table_removal* r) noexcept nogil
# Inserting right after a removal: the first rows take its freed slots,
# whose slot maps other threads may write at the same time (the free
# list's order is known: no chase of it). The same table as
# dod_table_insert_many.
cdef size_t dod_table_reusable(const dod_table* t, const dod_table_removal* r, size_t n) noexcept nogil
cdef size_t dod_table_insert_reusing(dod_table* t, const dod_table_removal* r, size_t n,
                                     size_t k) noexcept nogil
cdef void dod_table_insert_freed(dod_table* t, const dod_table_removal* r, size_t row0,
                                 size_t b0, size_t b1) noexcept nogil
# Rows [first, first + n) of F-order column c from src's rows (C order).
cdef void _put_lanes(dod_table* t, size_t c, size_t first, size_t n, const char* src, bint batch) noexcept nogil


cdef inline Py_ssize_t dod_table_row(const dod_table* t, dod_handle h) noexcept nogil:
    """Row of the live row `h` names, or DOD_TABLE_NIL (-1: the zeroed nil row)."""
    cdef dod_index slot = dod_handle_index(h)
    cdef dod_index row
    if slot == 0 or slot > t.slots_used:
        return DOD_TABLE_NIL
    row = t.slot_row[slot]
    if row >= t.count or t.slot_gen[slot] != dod_handle_generation(h):
        return DOD_TABLE_NIL
    return <Py_ssize_t>row


cdef inline bint dod_table_alive(const dod_table* t, dod_handle h) noexcept nogil:
    """True when `h` names a live row of this table."""
    return dod_table_row(t, h) >= 0


cdef inline dod_handle dod_table_handle(const dod_table* t, size_t row) noexcept nogil:
    """Handle of live row `row` (< count)."""
    cdef dod_index slot = t.row_slot[row]
    return dod_handle_make(slot, t.slot_gen[slot])


cdef inline void* dod_table_cell(const dod_table* t, size_t column, Py_ssize_t row) noexcept nogil:
    """Address of row `row` of a C-order column; row -1 (DOD_TABLE_NIL) is
    the zeroed nil row (read it, never write it). Valid until the next
    remove. (An F-order column's row is not one run of bytes: read its
    components through dod_table_lane.)"""
    return t.columns[column] + row * <Py_ssize_t>t.row_bytes[column]


cdef inline char* dod_table_lane(const dod_table* t, size_t c, size_t comp) noexcept nogil:
    """Base of lane `comp` of F-order column c (comp < lanes[c]): row r's
    component comp is at base + r * itemsize, row -1 reads zero. For a
    C-order column, lane 0 is the column (columns[c])."""
    return t.columns[c] + comp * t.lane_bytes[c]


cdef inline size_t dod_table_lane_item(const dod_table* t, size_t c) noexcept nogil:
    """Bytes of one row in one lane of column c: the itemsize in F order,
    the whole row in C order (no division when the column has one lane)."""
    return t.row_bytes[c] if t.lanes[c] == 1 else t.row_bytes[c] // t.lanes[c]


cdef inline void dod_table_zero_cells(dod_table* t, size_t c, size_t row, size_t n) noexcept nogil:
    """Rows [row, row + n) of column c cleared (every lane in F order)."""
    cdef size_t k, w
    if t.lane_bytes[c] == 0:
        memset(t.columns[c] + row * t.row_bytes[c], 0, n * t.row_bytes[c])
        return
    w = dod_table_lane_item(t, c)
    for k in range(t.lanes[c]):
        memset(dod_table_lane(t, c, k) + row * w, 0, n * w)


cdef inline void dod_table_poison_cells(dod_table* t, size_t c, size_t row, size_t n) noexcept nogil:
    """Rows [row, row + n) of column c poisoned with 0xCD (every lane in F
    order); callers call it under `if DOD_DEBUG`."""
    cdef size_t k, w
    if t.lane_bytes[c] == 0:
        dod_poison(t.columns[c] + row * t.row_bytes[c], n * t.row_bytes[c])
        return
    w = dod_table_lane_item(t, c)
    for k in range(t.lanes[c]):
        dod_poison(dod_table_lane(t, c, k) + row * w, n * w)


cdef inline dod_handle dod_table_insert_uninit(dod_table* t) noexcept nogil:
    """Append a row and return its handle (0 when full); no column is written.

    The new row is row count-1. Its bytes are whatever the last row that
    lived there left (zero for a row never used, 0xCD in debug builds):
    write every column."""
    cdef size_t row = t.count
    cdef dod_index slot
    if row >= t.capacity:
        t.failed += 1
        return 0
    slot = t.free_head
    if slot != 0:
        t.free_head = t.slot_row[slot] & ~DOD_TABLE_FREE
    else:
        t.slots_used += 1
        slot = t.slots_used
        if slot > t.slots_high:
            t.slots_high = slot
            t.slot_gen[slot] = t.gen_base
    t.slot_row[slot] = <dod_index>row
    t.row_slot[row] = slot
    t.count = row + 1
    t.inserts += 1
    return dod_handle_make(slot, t.slot_gen[slot])


cdef inline dod_handle dod_table_insert(dod_table* t) noexcept nogil:
    """Append a row, clear the columns whose zero is meaningful (the schema's
    zero policy), and return its handle (0 when full). Columns with
    zero=False keep unspecified bytes: write them."""
    cdef dod_handle h = dod_table_insert_uninit(t)
    cdef size_t c, row, rb
    cdef bint lanes = t.lane_columns != 0
    if h != 0:
        row = t.count - 1
        for c in range(t.ncols):
            if t.zero_on_insert[c]:
                if not lanes or t.lane_bytes[c] == 0:
                    rb = t.row_bytes[c]
                    memset(t.columns[c] + row * rb, 0, rb)
                else:
                    dod_table_zero_cells(t, c, row, 1)
    return h


cdef inline dod_handle dod_table_insert_zeroed(dod_table* t) noexcept nogil:
    """As dod_table_insert, with every column of the new row cleared."""
    cdef dod_handle h = dod_table_insert_uninit(t)
    cdef size_t c, row, rb
    cdef bint lanes = t.lane_columns != 0
    if h != 0:
        row = t.count - 1
        for c in range(t.ncols):
            if not lanes or t.lane_bytes[c] == 0:
                rb = t.row_bytes[c]
                memset(t.columns[c] + row * rb, 0, rb)
            else:
                dod_table_zero_cells(t, c, row, 1)
    return h


cdef inline void dod_table_copy_row(char* col, size_t rb, size_t dst, size_t src) noexcept nogil:
    """Row src of a column over row dst. Common sizes get a constant-size
    memcpy, which compiles to one load and store (a memcpy call per column
    would dominate a remove) and, unlike a typed copy, cannot break strict
    aliasing for the caller's typed column pointers."""
    if rb == 8:
        memcpy(col + dst * 8, col + src * 8, 8)
    elif rb == 4:
        memcpy(col + dst * 4, col + src * 4, 4)
    elif rb == 1:
        col[dst] = col[src]
    elif rb == 2:
        memcpy(col + dst * 2, col + src * 2, 2)
    else:
        memcpy(col + dst * rb, col + src * rb, rb)


cdef inline void dod_table_move_row(dod_table* t, size_t c, size_t dst, size_t src) noexcept nogil:
    """Row src of column c over row dst: one copy in C order, one item per
    lane in F order."""
    cdef size_t k, w
    if t.lane_bytes[c] == 0:
        dod_table_copy_row(t.columns[c], t.row_bytes[c], dst, src)
        return
    w = dod_table_lane_item(t, c)
    for k in range(t.lanes[c]):
        dod_table_copy_row(dod_table_lane(t, c, k), w, dst, src)


cdef inline void dod_table_remove_row(dod_table* t, size_t row) noexcept nogil:
    """Remove live row `row` (< count): the last row moves into it.

    Every handle stays valid except the removed row's; row `count-1` is
    renumbered `row`. Poisoned (0xCD) in debug builds: the vacated last row."""
    cdef size_t last = t.count - 1
    cdef size_t c, rb
    cdef dod_index slot = t.row_slot[row]
    cdef dod_index moved
    if t.count > t.peak:
        t.peak = t.count
    if row != last:
        if t.lane_columns == 0:
            for c in range(t.ncols):
                dod_table_copy_row(t.columns[c], t.row_bytes[c], row, last)
        else:
            for c in range(t.ncols):
                dod_table_move_row(t, c, row, last)
        moved = t.row_slot[last]
        t.row_slot[row] = moved
        t.slot_row[moved] = <dod_index>row
    if DOD_DEBUG:
        for c in range(t.ncols):
            dod_table_poison_cells(t, c, last, 1)
    t.slot_gen[slot] += 1
    t.slot_row[slot] = DOD_TABLE_FREE | t.free_head
    t.free_head = slot
    t.count = last
    t.removes += 1


cdef inline void dod_table_swap_rows(dod_table* t, size_t a, size_t b) noexcept nogil:
    """Exchange live rows a and b (< count) in every column and in the slot
    map: every handle stays valid and names the same data at its new row
    (the reorder of one transposition, without its scratch). Swaps of
    disjoint row pairs may run on different threads at once."""
    cdef size_t c, k, rb, off, n, nl = 1
    cdef char* col
    cdef char tmp[64]
    cdef dod_index sa, sb
    cdef bint lanes = t.lane_columns != 0
    if a == b:
        return
    for c in range(t.ncols):
        col = t.columns[c]
        rb = t.row_bytes[c]
        if lanes:
            rb = dod_table_lane_item(t, c)      # one lane's item
            nl = t.lanes[c]
        for k in range(nl):
            off = 0
            while off < rb:                 # through a 64-byte buffer: rows of any width
                n = rb - off if rb - off < 64 else 64
                memcpy(tmp, col + a * rb + off, n)
                memcpy(col + a * rb + off, col + b * rb + off, n)
                memcpy(col + b * rb + off, tmp, n)
                off += n
            col += t.lane_bytes[c] if lanes else 0
    sa = t.row_slot[a]
    sb = t.row_slot[b]
    t.row_slot[a] = sb
    t.row_slot[b] = sa
    t.slot_row[sa] = <dod_index>b
    t.slot_row[sb] = <dod_index>a


cdef inline size_t dod_table_reorder_scratch_bytes(const dod_table* t) noexcept nogil:
    """Bytes of scratch dod_table_reorder needs for this table's live rows:
    count times the widest row (the slot map's 4-byte entries included)."""
    cdef size_t c, w = sizeof(dod_index)
    for c in range(t.ncols):
        if t.row_bytes[c] > w:
            w = t.row_bytes[c]
    return t.count * w


cdef inline void dod_table_gather_items(const char* col, size_t rb, const dod_index* order, char* out,
                                        size_t i0, size_t i1) noexcept nogil:
    """out's items i0 .. i1 - 1 (rb bytes each) become col's items
    order[i0 .. i1 - 1]: one lane (or C-order column) of a reorder's gather."""
    cdef size_t i, w
    cdef const char* src
    # constant sizes: gcc turns each memcpy into one load and store
    if rb == 8:
        for i in range(i0, i1):
            memcpy(out + i * 8, col + <size_t>order[i] * 8, 8)
    elif rb == 4:
        for i in range(i0, i1):
            memcpy(out + i * 4, col + <size_t>order[i] * 4, 4)
    elif rb == 1:
        for i in range(i0, i1):
            out[i] = col[order[i]]
    elif rb % 8 == 0:   # wide rows (a state vector, a covariance): words, not a memcpy call a row
        for i in range(i0, i1):
            if i + DOD_TABLE_REORDER_AHEAD < i1:
                dod_prefetch(col + <size_t>order[i + DOD_TABLE_REORDER_AHEAD] * rb)
                dod_prefetch(col + <size_t>order[i + DOD_TABLE_REORDER_AHEAD] * rb + rb - 1)
            src = col + <size_t>order[i] * rb
            for w in range(0, rb, 8):
                memcpy(out + i * rb + w, src + w, 8)
    else:
        for i in range(i0, i1):
            memcpy(out + i * rb, col + <size_t>order[i] * rb, rb)


cdef inline void dod_table_reorder_gather(const dod_table* t, size_t c, const dod_index* order, char* scratch,
                                          size_t i0, size_t i1) noexcept nogil:
    """Phase 1 of a reorder, for part [i0, i1) of one column: scratch's rows
    i0 .. i1 - 1 become column c's rows order[i0 .. i1 - 1] (c == t.ncols:
    the slot map's row_slot). Any split of [0, count) may run at once on
    different threads; then dod_table_reorder_put for the same column. An
    F-order column is gathered lane by lane: lane k into scratch's block k
    of count items (the same scratch bytes as its rows in C order)."""
    cdef size_t k, w
    if c == t.ncols:
        dod_table_gather_items(<const char*>t.row_slot, sizeof(dod_index), order, scratch, i0, i1)
    elif t.lane_bytes[c] == 0:
        dod_table_gather_items(t.columns[c], t.row_bytes[c], order, scratch, i0, i1)
    else:
        w = dod_table_lane_item(t, c)
        for k in range(t.lanes[c]):
            dod_table_gather_items(dod_table_lane(t, c, k), w, order, scratch + k * t.count * w, i0, i1)


cdef inline void dod_table_reorder_put(dod_table* t, size_t c, const char* scratch, size_t i0, size_t i1) noexcept nogil:
    """Phase 2 of a reorder, for part [i0, i1): column c's rows i0 .. i1 - 1
    become scratch's (c == t.ncols: row_slot, and slot_row names the new
    rows). After every gather of this column; any split may run at once."""
    cdef size_t i, k, w
    cdef const dod_index* slots = <const dod_index*>scratch
    if c < t.ncols:
        if t.lane_bytes[c] == 0:
            memcpy(t.columns[c] + i0 * t.row_bytes[c], scratch + i0 * t.row_bytes[c], (i1 - i0) * t.row_bytes[c])
            return
        w = dod_table_lane_item(t, c)
        for k in range(t.lanes[c]):
            memcpy(dod_table_lane(t, c, k) + i0 * w, scratch + (k * t.count + i0) * w, (i1 - i0) * w)
        return
    for i in range(i0, i1):
        t.row_slot[i] = slots[i]
        t.slot_row[slots[i]] = <dod_index>i


cdef inline void dod_table_reorder(dod_table* t, const dod_index* order, char* scratch) noexcept nogil:
    """Permute the live rows in place: new row i is old row order[i].

    Every column, the dense slot side (row_slot) and the sparse side
    (slot_row) move together, so every handle stays valid and names the
    same data at its new row; generations, the free list and the nil row
    are untouched. `scratch` holds dod_table_reorder_scratch_bytes(t) bytes
    (any alignment): each column is gathered into it and copied back, so the
    pass streams memory and allocates nothing. (To spread a reorder over
    threads, run its phases per column, c = 0 .. t.ncols: gather, then put,
    each over any split of the rows.)

    Checks the caller owns: order[0:count] is a permutation of 0..count-1
    (the Python face, Table.reorder, validates it); no view of a column is
    relied on to keep showing the old rows; this thread is the table's one
    writer. Row indices and row pointers taken before the call are stale."""
    cdef size_t c
    for c in range(t.ncols + 1):
        dod_table_reorder_gather(t, c, order, scratch, 0, t.count)
        dod_table_reorder_put(t, c, scratch, 0, t.count)


cdef inline bint dod_table_remove(dod_table* t, dod_handle h) noexcept nogil:
    """Remove the row `h` names (swap with the last row); False if nil or stale."""
    cdef Py_ssize_t row = dod_table_row(t, h)
    if row < 0:
        return False
    dod_table_remove_row(t, <size_t>row)
    return True
