"""Struct-of-arrays tables: ZII rows, generation handles, zero-copy columns.

A :class:`Schema` names columns, each a numpy dtype and a per-row shape
(``pos: float32[3]``, ``cov: float64[6,6]``, ``id: uint32``). A
:class:`Table` allocates every column once, for a fixed capacity, 64-byte
aligned and zeroed (ZII: an all-zero row is a valid default), from any
allocator (its own arena by default). Live rows stay packed at the front;
removing a row moves the last row into the hole. A slot map gives every row
a stable 64-bit handle (0 is nil) that survives those moves and goes stale
when its row is removed. A shaped column is stored row by row (C order) or
component-major (``Column(..., order="F")``: one lane per component, for
loops that vectorise across rows); every operation gives the same results
on both.

Safety contract (the Python face)
    Every method validates its arguments first and leaves the table
    unchanged when it raises (apart from the ``failed`` counter when an
    insert does not fit). Batches are all or nothing. ``table["pos"]``
    returns a writable numpy view of the live rows that keeps the table's
    memory alive. Inserting never moves rows, so views stay correct (they
    do not grow). Removing, clearing and reordering (:meth:`Table.reorder`,
    :meth:`Table.sort`) move rows under existing views: while
    a view (or an Arrow export: a pyarrow batch, a polars frame) is alive
    they raise ``BufferError`` and change nothing, unless ``unchecked=True``,
    in which case the views show the moved rows (never freed memory).

Thread-safety
    One writer at a time and no readers while it writes; a table is not
    locked. Concurrent readers of an unchanging table are fine. A writer
    that works without the GIL (``remove_many``; Cython code that runs the
    engine in a nogil loop) holds the table's *exclusive pass*
    (:meth:`Table.exclusive`, or ``begin_exclusive``/``end_exclusive`` from
    Cython): meanwhile the Python face refuses inserts, removes and clears
    from every thread with RuntimeError.

Cython
    ``from dod.table cimport Table, dod_table_insert, dod_table_remove,
    dod_table_row`` and run the engine on ``&owner.engine`` without the GIL;
    see ``dod/table.pxd`` for the layout, the checks the caller owns there
    and what stays valid across a remove.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t, uintptr_t
from libc.string cimport memset, memcpy
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, DOD_CACHE_LINE, dod_add_overflow, dod_mul_overflow, dod_poison
from dod.arrow cimport dod_arrow_desc, dod_arrow_array_capsule, dod_arrow_stream_capsule
from dod._types cimport dod_handle, dod_index, dod_generation, dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, wrap_memory, wrap_strided, input_array
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate, dod_resource_allocate_from_python,
                           dod_resource_deallocate)
from dod.arena cimport Arena
from dod._lease cimport export_pin
from dod.pages cimport dod_page_range, dod_pages_prefault, dod_pages_threads

import os
from collections.abc import Mapping

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError
from dod.schema import _rebuild_column      # old pickles of a Column name dod.table._rebuild_column

cnp.import_array()

# Rows per block when an insert scatters rows into an F-order column's lanes.
cdef enum:
    _PUT_BLOCK = 128

# Largest capacity: slot indices are 31 bits (the high bit marks free slots).
cdef size_t _MAX_CAPACITY = (<size_t>1 << 31) - 2
cdef uint32_t _serial = 0


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


# ---------------------------------------------------------------- the exclusive pass

@cython.final
cdef class _ExclusivePass:
    """What Table.exclusive() returns: holds the pass from __enter__ to __exit__."""
    cdef Table table
    cdef str what
    cdef bint held

    def __cinit__(self, Table table, str what):
        self.table = table
        self.what = what

    def __enter__(self):
        if self.held:
            raise RuntimeError("this exclusive pass is already held (not reentrant)")
        self.table.begin_exclusive(self.what)
        self.held = True
        return self.table

    def __exit__(self, *exc):
        if self.held:
            self.held = False
            self.table.end_exclusive()
        return False


# ---------------------------------------------------------------- helpers of the Python face

cdef inline size_t _round_line(size_t n) noexcept nogil:
    return (n + DOD_CACHE_LINE - 1) & ~(<size_t>DOD_CACHE_LINE - 1)


cdef bint _broadcastable(tuple src, tuple dst):
    """True when an array of shape `src` broadcasts to exactly `dst`."""
    cdef Py_ssize_t k = len(src), m = len(dst), i
    if k > m:
        return False
    for i in range(1, k + 1):
        if src[k - i] != 1 and src[k - i] != dst[m - i]:
            return False
    return True


cdef object _convert(object value, Column col):
    """`value` as an array that converts to the column's dtype without surprise:
    same_kind casting (float64 -> float32 is fine, float -> int is not), and
    integers to any integer column when every value fits (checked)."""
    cdef str kind = col.dtype.kind
    # the one input gate (dod._ndarray): an array of any layout, no objects
    arr = input_array(value, None, f"column {col.name!r}", -1, None, "any")
    if arr.dtype == col.dtype:
        return arr
    if arr.size == 0 and not arr.dtype.hasobject:
        return arr.astype(col.dtype)        # nothing to lose (np.asarray([]) is float64)
    if arr.dtype.kind in "iu" and kind in "iu" and not np.can_cast(arr.dtype, col.dtype, casting="safe"):
        if arr.size:
            info = np.iinfo(col.dtype)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise ValueError(f"column {col.name!r} holds {col.dtype}; values in [{lo}, {hi}] do not fit")
        return arr.astype(col.dtype)
    if arr.dtype.hasobject or not np.can_cast(arr.dtype, col.dtype, casting="same_kind"):
        raise TypeError(f"column {col.name!r} holds {col.dtype}; values of dtype {arr.dtype} "
                        "do not convert safely (same_kind casting)")
    return arr


_NOTHING = object()


# ---------------------------------------------------------------- the owner and its Python face

@cython.no_gc_clear
cdef class Table:
    """Table(schema, capacity, *, resource=None)

    A fixed-capacity struct-of-arrays table with generation handles.

    Parameters
    ----------
    schema : Schema, or anything Schema() accepts as its first argument
        (a mapping of column specs, a structured dtype).
    capacity : int
        Rows every column holds (1 .. 2**31 - 2). Columns are allocated once,
        64-byte aligned, and never move.
    resource : Resource, optional
        Where the columns and the slot map come from (any allocator's
        ``.resource()``). By default the table makes its own arena, sized
        exactly, whose fresh pages are zero and cost nothing until touched.
        Memory from another resource is cleared once at construction.

    Attributes
    ----------
    schema : Schema
        The columns (immutable).

    Raises
    ------
    ValueError
        For a bad capacity.
    MemoryError
        When the memory cannot be obtained (nothing is leaked).

    Notes
    -----
    Thread-safety: one writer at a time and no readers while it writes; a
    table is not locked. Concurrent readers of an unchanging table are fine.
    A writer that works without the GIL holds the table's exclusive pass
    (:meth:`exclusive`); meanwhile inserts, removes and clears from every
    thread raise RuntimeError.
    """

    def __cinit__(self, schema, capacity, *, Resource resource=None):
        cdef Schema s = schema if isinstance(schema, Schema) else Schema(schema)
        cdef size_t cap, ncols = len(s.columns), i, size, total = 0, slot_bytes, isz, nl, stride
        cdef bint known_zero = False
        cdef void* p
        cap_obj = PyNumber_Index(capacity)
        if cap_obj <= 0 or cap_obj > <object>_MAX_CAPACITY:
            raise ValueError(f"capacity must be between 1 and {_MAX_CAPACITY}, got {capacity!r}")
        cap = <size_t>cap_obj
        self.schema = s
        # Sizes first (overflow-checked), then memory: one block per column
        # (a cache line in front holds the nil row) and one for the slot map.
        # An F-order column's block is its lanes, each led by the lines that
        # hold its nil item: lane stride = round(cap * itemsize) + round(itemsize).
        sizes = []
        strides = []
        for i in range(ncols):
            isz = s._info[i].itemsize
            nl = s._info[i].row_bytes // isz
            if (<Column>s.columns[i]).order == "F":
                if (dod_mul_overflow(cap, isz, &stride)
                        or dod_add_overflow(_round_line(stride), _round_line(isz), &stride)
                        or dod_mul_overflow(stride, nl, &size)
                        or size > (<size_t>1 << 46)):
                    raise MemoryError(f"a column of {cap} rows of {s._info[i].row_bytes} bytes does not fit in memory")
            elif (dod_mul_overflow(cap, s._info[i].row_bytes, &size)
                    or dod_add_overflow(size, _round_line(s._info[i].row_bytes), &size)
                    or size > (<size_t>1 << 46)):
                raise MemoryError(f"a column of {cap} rows of {s._info[i].row_bytes} bytes does not fit in memory")
            else:
                stride = 0
            sizes.append(size)
            strides.append(stride)
        slot_bytes = _round_line(cap * sizeof(dod_index)) + 2 * _round_line((cap + 1) * sizeof(dod_index)) + (cap + 1)
        sizes.append(slot_bytes)
        for size in sizes:
            total += _round_line(size)
        if resource is None:
            self._arena = Arena(total)
            resource = self._arena.resource()
            known_zero = True
        self._resource = resource
        self._source = &resource.resource
        self._blocks = <void**>PyMem_Malloc((ncols + 1) * sizeof(void*))
        self._block_sizes = <size_t*>PyMem_Malloc((ncols + 1) * sizeof(size_t))
        self.engine.columns = <char**>PyMem_Malloc(ncols * sizeof(char*))
        self.engine.row_bytes = <size_t*>PyMem_Malloc(ncols * sizeof(size_t))
        self.engine.zero_on_insert = <uint8_t*>PyMem_Malloc(ncols)
        self.engine.lane_bytes = <size_t*>PyMem_Malloc(ncols * sizeof(size_t))
        self.engine.lanes = <size_t*>PyMem_Malloc(ncols * sizeof(size_t))
        if (self._blocks == NULL or self._block_sizes == NULL or self.engine.columns == NULL
                or self.engine.row_bytes == NULL or self.engine.zero_on_insert == NULL
                or self.engine.lane_bytes == NULL or self.engine.lanes == NULL):
            raise MemoryError()
        for i in range(ncols + 1):
            size = sizes[i]
            p = dod_resource_allocate_from_python(resource, self._source, size, DOD_CACHE_LINE)
            if p == NULL:
                raise MemoryError(f"could not obtain {size} bytes for a table of {cap} rows "
                                  f"({fmt_bytes(total)} in all) from {resource!r}")
            if (<uintptr_t>p) & (DOD_CACHE_LINE - 1):
                self._blocks[self._nblocks] = p
                self._block_sizes[self._nblocks] = size
                self._nblocks += 1
                raise MemoryError(f"{resource!r} returned memory that is not 64-byte aligned")
            if not known_zero:
                memset(p, 0, size)
            self._blocks[self._nblocks] = p
            self._block_sizes[self._nblocks] = size
            self._nblocks += 1
            self._nbytes += size
        for i in range(ncols):
            self.engine.row_bytes[i] = s._info[i].row_bytes
            self.engine.zero_on_insert[i] = (<Column>s.columns[i]).zero
            self.engine.lane_bytes[i] = strides[i]
            if strides[i]:
                self.engine.lane_columns += 1
                self.engine.lanes[i] = s._info[i].row_bytes // s._info[i].itemsize
                self.engine.columns[i] = <char*>self._blocks[i] + _round_line(s._info[i].itemsize)
            else:
                self.engine.lanes[i] = 1
                self.engine.columns[i] = <char*>self._blocks[i] + _round_line(s._info[i].row_bytes)
        p = self._blocks[ncols]
        self.engine.row_slot = <dod_index*>p
        self.engine.slot_row = <dod_index*>(<char*>p + _round_line(cap * sizeof(dod_index)))
        self.engine.slot_gen = <dod_generation*>(<char*>self.engine.slot_row + _round_line((cap + 1) * sizeof(dod_index)))
        self._mark = <uint8_t*>self.engine.slot_gen + _round_line((cap + 1) * sizeof(dod_index))
        self.engine.ncols = ncols
        self.engine.capacity = cap
        # Each table's generations start at their own base (a Weyl sequence
        # over 32 bits), so a handle from another table fails the check.
        global _serial
        _serial += 1
        self.engine.gen_base = <dod_generation>(<uint32_t>_serial * <uint32_t>0x9E3779B9u) | 1u

    def __dealloc__(self):
        cdef size_t i
        if self._blocks != NULL:
            for i in range(self._nblocks):
                dod_resource_deallocate(self._source, self._blocks[i], self._block_sizes[i], DOD_CACHE_LINE)
        PyMem_Free(self._blocks)
        PyMem_Free(self._block_sizes)
        PyMem_Free(self.engine.columns)
        PyMem_Free(self.engine.row_bytes)
        PyMem_Free(self.engine.zero_on_insert)
        PyMem_Free(self.engine.lane_bytes)
        PyMem_Free(self.engine.lanes)

    # -------------------------------------------------------- internals

    cpdef Py_ssize_t column_index(self, str name) except -1:
        """Position of column `name` in the schema (and in ``table.columns`` of the C struct).

        Call it once, outside hot loops.

        Parameters
        ----------
        name : str

        Returns
        -------
        int

        Raises
        ------
        KeyError
            If the schema has no such column.

        Notes
        -----
        Thread-safety: the schema is immutable; any thread may call it.
        """
        try:
            return self.schema._index[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; the table has {', '.join(self.schema.names)}") from None

    cdef int _check_unpinned(self, bint unchecked, str what) except -1:
        if self._views and not unchecked:
            raise BufferError(
                f"{what} would move rows under {self._views} live column view(s) or Arrow export(s) "
                "of this table; delete them first, or pass unchecked=True if stale views are fine")
        return 0

    cdef int _check_idle(self, str what) except -1:
        # Without this, a Python thread could insert or remove rows while an
        # exclusive pass moves them without the GIL: two writers of count and
        # the slot map, rows written past capacity.
        if self._exclusive:
            # The pass does not record its thread: the message holds both for
            # a write from inside the pass (the holder's own thread) and for
            # one from another thread while it runs.
            raise RuntimeError(f"{what} refused: an exclusive pass over this table's rows is running "
                               f"({self._exclusive_what}); write after it ends, whichever thread holds it")
        return 0

    cdef int begin_exclusive(self, str what) except -1:
        """Start an exclusive pass named `what`: from now until
        :meth:`end_exclusive`, the Python face refuses every insert, remove
        and clear (RuntimeError naming `what`), so the caller may run the
        engine on ``&self.engine`` without the GIL, as the table's one writer.
        RuntimeError (and nothing changes) when a pass is already running.
        Call it and end_exclusive with the GIL held; end the pass in a
        ``finally``. The pass does not check live views: a pass that moves
        rows (removes) makes them show moved rows, never freed memory."""
        self._check_idle(what)
        self._exclusive = 1
        self._exclusive_what = what
        return 0

    cdef void end_exclusive(self) noexcept:
        """End the exclusive pass begun by :meth:`begin_exclusive`."""
        self._exclusive = 0
        self._exclusive_what = None

    cdef object _new_view(self):
        # The base of column views and Arrow exports (dod._lease.ExportPin):
        # keeps the table alive and counts a live export, which blocks
        # checked removes, clears and reorders.
        return export_pin(self, &self._views)

    cdef object _column_array(self, Py_ssize_t c, size_t first, size_t n, object base):
        cdef dod_array_request req
        cdef Column col = self.schema.columns[c]
        cdef dod_column_info* info = &self.schema._info[c]
        cdef cnp.npy_intp strides[DOD_TABLE_MAX_NDIM + 1]
        cdef size_t step
        cdef int j
        req.nd = 1 + info.ndim
        req.dims[0] = <cnp.npy_intp>n
        for j in range(info.ndim):
            req.dims[j + 1] = <cnp.npy_intp>info.dims[j]
        if self.engine.lane_bytes[c] == 0:
            return wrap_memory(self.engine.columns[c] + first * info.row_bytes, &req, <cnp.dtype>col.dtype, base)
        # F order: rows step by one item; the row shape's last dimension
        # steps one lane, each earlier one the lanes of the dimensions after it.
        strides[0] = <cnp.npy_intp>info.itemsize
        step = self.engine.lane_bytes[c]
        for j in range(info.ndim - 1, -1, -1):
            strides[j + 1] = <cnp.npy_intp>step
            step *= <size_t>info.dims[j]
        return wrap_strided(self.engine.columns[c] + first * info.itemsize, &req, strides,
                            <cnp.dtype>col.dtype, base)

    cdef object _handle_arg(self, object h):
        cdef object v
        try:
            v = PyNumber_Index(h)
        except TypeError:
            raise TypeError(f"a handle is an int, got {type(h).__name__}") from None
        if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"handle {h!r} is out of the 64-bit range")
        return v

    cdef object _handles_arg(self, object handles):
        arr = np.asarray(handles)
        if arr.ndim != 1:
            arr = arr.reshape(-1) if arr.ndim == 0 else None
            if arr is None:
                raise ValueError("handles must be a one-dimensional sequence")
        if arr.size == 0:
            return np.empty(0, np.uint64)
        if arr.dtype.kind == "u":
            return input_array(arr, np.uint64, "handles", 1, None, "c", "unsafe")   # (checked >= 0)
        if arr.dtype.kind == "i":
            if (arr < 0).any():
                raise ValueError("handles are never negative")
            return input_array(arr, np.uint64, "handles", 1, None, "c", "unsafe")   # (checked >= 0)
        if arr.dtype.kind == "O" or (arr.dtype.kind == "f" and not isinstance(handles, np.ndarray)):
            # Python ints above 2**63 make numpy guess float64 or object: convert one by one.
            return np.asarray([self._handle_arg(x) for x in handles], dtype=np.uint64)
        raise TypeError(f"handles must be integers, got dtype {arr.dtype}")

    cdef object _insert(self, object values, dict named, object n_obj, bint single):
        """Validate everything, write the new rows beyond `count`, then commit."""
        cdef Schema s = self.schema
        cdef Py_ssize_t c, ncols = len(s.columns), i
        cdef Column col
        cdef size_t n, first = self.engine.count, rb, k
        cdef char* dest
        cdef char* src
        cdef cnp.ndarray out
        cdef uint64_t* hp
        cdef cnp.ndarray a
        cdef int mode
        cdef dod_column_info* info
        self._check_idle("insert")
        if values is None:
            given = named
        else:
            if type(values) is dict:
                pass
            elif isinstance(values, np.ndarray) and values.dtype.names is not None:
                if single and values.ndim != 0:
                    raise ValueError("insert() takes one record; use insert_many() for a structured array")
                values = {name: values[name] for name in values.dtype.names}
            elif not isinstance(values, Mapping):
                raise TypeError(f"values must be a mapping of column name to data (or a structured array), "
                                f"got {type(values).__name__}")
            if named:
                given = dict(values)
                for name, v in named.items():
                    if name in given:
                        raise TypeError(f"column {name!r} given twice")
                    given[name] = v
            else:
                given = values
        prepared = [None] * ncols
        batch_len = {}
        for name, v in given.items():
            c = s._index.get(name, -1)
            if c < 0:
                raise KeyError(f"unknown column {name!r}; the table has {', '.join(s.names)}")
            col = s.columns[c]
            info = &s._info[c]
            # Fast path: a C-contiguous batch of exactly the column's dtype and row shape.
            if not single and cnp.PyArray_Check(v):
                a = <cnp.ndarray>v
                mode = 2
                if cnp.PyArray_NDIM(a) != info.ndim + 1 or not cnp.PyArray_IS_C_CONTIGUOUS(a):
                    mode = 0
                elif <void*>cnp.PyArray_DESCR(a) != <void*>col.dtype and not cnp.PyArray_EquivTypes(a.dtype, <cnp.dtype>col.dtype):
                    mode = 0
                else:
                    for k in range(<size_t>info.ndim):
                        if cnp.PyArray_DIMS(a)[k + 1] != info.dims[k]:
                            mode = 0
                if mode == 2:
                    if col.finite and not np.isfinite(a).all():
                        raise ValueError(f"column {name!r} refuses NaN and infinities (finite=True)")
                    batch_len[name] = cnp.PyArray_DIMS(a)[0]
                    prepared[c] = (a, 2)
                    continue
            arr = _convert(v, col)
            shape = col.shape
            if single:
                if not _broadcastable(arr.shape, shape):
                    raise ValueError(f"column {name!r}: a row has shape {shape}, got {arr.shape}")
                is_batch = False
            elif arr.ndim == len(shape) + 1:
                if not _broadcastable(arr.shape[1:], shape):
                    raise ValueError(f"column {name!r}: rows have shape {shape}, got a batch of shape {arr.shape}")
                is_batch = True
                batch_len[name] = arr.shape[0]
            elif _broadcastable(arr.shape, shape):
                is_batch = False
            else:
                raise ValueError(f"column {name!r}: expected a batch of shape (n, {', '.join(map(str, shape))}) "
                                 f"or one row of shape {shape}, got {arr.shape}")
            if col.finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                raise ValueError(f"column {name!r} refuses NaN and infinities (finite=True)")
            prepared[c] = (arr, 1 if is_batch else 0)
        # The number of rows: explicit, or the batch length all batches agree on.
        if single:
            n = 1
        else:
            lengths = set(batch_len.values())
            if n_obj is not None:
                n_py = PyNumber_Index(n_obj)
                if n_py < 0:
                    raise ValueError(f"n must be >= 0, got {n_obj!r}")
                bad = {k2: v2 for k2, v2 in batch_len.items() if v2 != n_py and v2 != 1}
                if bad:
                    raise ValueError(f"n={n_py} but batch lengths are {bad}")
            else:
                if len(lengths) > 1:
                    lengths.discard(1)      # length-1 batches broadcast against the others
                if len(lengths) > 1:
                    raise ValueError(f"mismatched batch lengths: {batch_len}")
                if not lengths:
                    raise ValueError("cannot tell how many rows to insert: give at least one batch "
                                     "(an array with one more dimension than the column's row), or n=")
                n_py = lengths.pop()
            if n_py > <object>(self.engine.capacity - self.engine.count):
                self.engine.failed += 1
                raise MemoryError(f"table full: {n_py} rows do not fit ({self.engine.count} of "
                                  f"{self.engine.capacity} rows in use); nothing was inserted")
            n = <size_t>n_py
        if single and self.engine.count >= self.engine.capacity:
            self.engine.failed += 1
            raise MemoryError(f"table full ({self.engine.capacity} rows); nothing was inserted")
        # Every value as contiguous bytes of the column's dtype: n rows, or
        # one row repeated (mode 0). What may run Python code or release the
        # GIL (conversions, numpy's broadcasting copies, the handles' array)
        # happens here, before the last check below.
        for c in range(ncols):
            p = prepared[c]
            if p is None:
                continue
            arr, mode = p
            col = s.columns[c]
            if mode == 2 and cnp.PyArray_DIMS(<cnp.ndarray>arr)[0] == <cnp.npy_intp>n:
                continue
            if arr.dtype == col.dtype and arr.flags.c_contiguous:
                if mode != 0 and arr.shape[0] == n and arr.shape[1:] == col.shape:
                    prepared[c] = (arr, 2)
                    continue
                if mode == 0 and arr.shape == col.shape:
                    continue
            full = np.empty((n,) + col.shape, col.dtype)
            np.copyto(full, arr, casting="same_kind")
            prepared[c] = (full, 2)
        out = None if single else np.empty(n, np.uint64)
        # The last check: from here to the commit the GIL stays held and
        # nothing releases it, so no exclusive pass (a tracker's tick, moving
        # rows without the GIL) can start before these rows are live. (Checked
        # only at the start, a tick begun while numpy copied above raced this
        # insert for the same rows.) Converting the values may also have run
        # Python code that inserted or removed rows of this very table: the
        # room is checked again, and the rows to write start at the count now.
        self._check_idle("insert")
        if n > self.engine.capacity - self.engine.count:
            self.engine.failed += 1
            if single:
                raise MemoryError(f"table full ({self.engine.capacity} rows); nothing was inserted")
            raise MemoryError(f"table full: {n} rows do not fit ({self.engine.count} of "
                              f"{self.engine.capacity} rows in use); nothing was inserted")
        first = self.engine.count
        # Write rows [first, first + n): not live yet, so a failure here changes nothing visible.
        for c in range(ncols):
            p = prepared[c]
            if p is None:
                if self.engine.zero_on_insert[c]:
                    dod_table_zero_cells(&self.engine, c, first, n)
                continue
            arr, mode = p
            src = <char*>cnp.PyArray_DATA(<cnp.ndarray>arr)
            if self.engine.lane_bytes[c]:
                _put_lanes(&self.engine, c, first, n, src, mode == 2)
                continue
            rb = self.engine.row_bytes[c]
            dest = self.engine.columns[c] + first * rb
            if mode == 2:
                memcpy(dest, src, n * rb)
            else:
                for k in range(n):
                    memcpy(dest + k * rb, src, rb)
        # Commit: hand out the slots.
        if single:
            return dod_table_insert_uninit(&self.engine)
        hp = <uint64_t*>cnp.PyArray_DATA(out)
        dod_table_insert_many(&self.engine, n, hp)
        return out

    # -------------------------------------------------------- insert, remove, clear

    def insert(self, values=None, /, **columns):
        """Insert one row and return its handle.

        ``table.insert(pos=(1, 2, 3), id=7)`` or ``table.insert({"pos": ...})``.

        Parameters
        ----------
        values : mapping, optional
            Column name to value (positional only); merged with ``columns``.
        **columns
            Column name to value. Each value broadcasts to the column's row shape
            and converts with same_kind casting (Python ints fit any integer column
            if in range). Columns not given are zero if the schema says their zero
            is meaningful, unspecified otherwise.

        Returns
        -------
        int
            The new row's handle, never 0.

        Raises
        ------
        KeyError
            For an unknown column.
        TypeError
            For a value that does not convert.
        ValueError
            For a wrong shape, or a non-finite value in a finite column.
        MemoryError
            When the table is full.
        RuntimeError
            While an exclusive pass is running (held by this thread or another).

        Notes
        -----
        The table is unchanged when it raises.
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        return self._insert(values, columns, None, True)

    def insert_many(self, values=None, /, *, n=None, **columns):
        """Insert a batch of rows and return their handles.

        Parameters
        ----------
        values : mapping or numpy structured array, optional
            Column name to values (positional only); merged with ``columns``.
        n : int, optional
            The batch size; needed only when no value is a batch.
        **columns
            Column name to values: arrays of shape ``(n, *row_shape)``, or one row
            that broadcasts to all ``n`` rows. Columns not given follow the zero
            policy (see :meth:`insert`).

        Returns
        -------
        numpy.ndarray
            The handles, uint64, in row order.

        Raises
        ------
        KeyError, TypeError, ValueError, MemoryError, RuntimeError
            As :meth:`insert`; ValueError also for mismatched batch lengths;
            MemoryError for a batch larger than the room left. All or nothing:
            on any error nothing is inserted.

        Notes
        -----
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        return self._insert(values, columns, n, False)

    def remove(self, handle, *, bint unchecked=False):
        """Remove the row `handle` names; the last row moves into its place.

        Parameters
        ----------
        handle : int
            A handle from :meth:`insert` or :meth:`insert_many`.
        unchecked : bool, default False
            Remove even while column views or Arrow exports are alive (they then
            show the moved rows).

        Raises
        ------
        KeyError
            For a nil, stale or foreign handle.
        BufferError
            While column views or Arrow exports are alive (unless ``unchecked``).
        RuntimeError
            While an exclusive pass is running (held by this thread or another).

        Notes
        -----
        Nothing changes when it raises. Other handles stay valid; row indices
        taken before do not.
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        cdef dod_handle h = <dod_handle>self._handle_arg(handle)
        cdef Py_ssize_t row = dod_table_row(&self.engine, h)
        if row < 0:
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        self._check_idle("remove")
        self._check_unpinned(unchecked, "remove")
        dod_table_remove_row(&self.engine, <size_t>row)

    def remove_many(self, handles, *, bint unchecked=False):
        """Remove a batch of rows by handle (each moves the last row into its place).

        Parameters
        ----------
        handles : sequence of int
            Handles of live rows, each once.
        unchecked : bool, default False
            As for :meth:`remove`.

        Raises
        ------
        KeyError
            If any handle is nil, stale, foreign or repeated.
        BufferError, RuntimeError
            As for :meth:`remove`.

        Notes
        -----
        All or nothing: nothing is removed when it raises.
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked). It runs without the GIL, holding the exclusive pass.
        """
        # A private copy: the checks below and the removes run without the
        # GIL, and another thread may rewrite the caller's array meanwhile.
        cdef cnp.ndarray arr = np.array(self._handles_arg(handles), dtype=np.uint64, copy=True)
        cdef Py_ssize_t n = arr.shape[0], i, bad = -1
        cdef uint64_t* hp = <uint64_t*>cnp.PyArray_DATA(arr)
        cdef dod_index slot
        if n == 0:
            return
        self.begin_exclusive("remove_many")
        try:
            with nogil:
                for i in range(n):
                    if dod_table_row(&self.engine, hp[i]) < 0 or self._mark[dod_handle_index(hp[i])]:
                        bad = i
                        break
                    self._mark[dod_handle_index(hp[i])] = 1
                for i in range(n if bad < 0 else bad):
                    self._mark[dod_handle_index(hp[i])] = 0
            if bad >= 0:
                dup = dod_table_row(&self.engine, hp[bad]) >= 0
                raise KeyError(f"handle {hp[bad]:#x} (position {bad}) is "
                               + ("repeated in the batch" if dup else "nil, stale or from another table")
                               + "; nothing was removed")
            self._check_unpinned(unchecked, "remove_many")
            with nogil:
                for i in range(n):
                    dod_table_remove(&self.engine, hp[i])
        finally:
            self.end_exclusive()

    def clear(self, *, bint unchecked=False):
        """Remove every row; every handle goes stale.

        Parameters
        ----------
        unchecked : bool, default False
            As for :meth:`remove`.

        Raises
        ------
        BufferError, RuntimeError
            As for :meth:`remove`; nothing changes when it raises.

        Notes
        -----
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        self._check_idle("clear")
        self._check_unpinned(unchecked, "clear")
        dod_table_clear(&self.engine)

    def prefault(self, threads=1):
        """Fault every page of the table's memory in now.

        All ``capacity`` rows of every column, and the slot map. Rows are dense,
        so a table touches pages up to its highest row count: RSS creeps up as
        that peak rises, and the insert that first reaches a page pays its fault.
        For a loop against a deadline, call this once at start: RSS is the full
        capacity from then on and no insert faults. Contents do not change.

        Parameters
        ----------
        threads : int, optional
            In [1, 256], default 1: the memory is faulted in 64 MiB pieces
            over that many threads (:func:`dod.pages.prefault`: the calling
            thread and threads started for the call, joined before it
            returns); where the system backs fresh pages slowly more threads
            take less time. The same pages and bytes at any count.

        Returns
        -------
        int
            The bytes of pages touched.

        Raises
        ------
        ValueError
            For `threads` (nothing done).
        RuntimeError
            While an exclusive pass is running (held by this thread or another);
            nothing is done.
        MemoryError
            When the system cannot back the pages (contents unchanged; part of
            the table may be resident).

        Notes
        -----
        Thread-safety: it runs as an exclusive pass without the GIL; inserts from
        other threads are refused until it ends.
        """
        cdef int nt = dod_pages_threads(threads)
        cdef size_t n = self.page_ranges(NULL), total = 0
        cdef int err = 0
        cdef dod_page_range* ranges = <dod_page_range*>PyMem_Malloc(max(n, <size_t>1) * sizeof(dod_page_range))
        if ranges == NULL:
            raise MemoryError()
        try:
            self.begin_exclusive("a prefault")
            try:
                self.page_ranges(ranges)
                with nogil:
                    err = dod_pages_prefault(ranges, n, nt, &total)
            finally:
                self.end_exclusive()
        finally:
            PyMem_Free(ranges)
        if err != 0:
            raise MemoryError(f"the system could not fault in this table's memory ({os.strerror(err)}); "
                              "contents unchanged")
        return total

    cdef size_t page_ranges(self, dod_page_range* out) noexcept:
        """Every block of the table's memory into out (NULL: count only); how many."""
        cdef size_t i
        if out != NULL:
            for i in range(self._nblocks):
                out[i].base = self._blocks[i]
                out[i].size = self._block_sizes[i]
        return self._nblocks

    def reorder(self, order, *, bint unchecked=False):
        """Permute the live rows in place: new row ``i`` is old row ``order[i]``.

        Every column, the slot map and the generations move together, so every
        handle stays valid and names the same data (at its new row); row indices
        taken before are stale. Use it to put rows in the order the hot loops
        walk them (e.g. spatial order).

        Parameters
        ----------
        order : array_like of int
            A permutation of ``range(len(table))``.
        unchecked : bool, default False
            Reorder even while column views or Arrow exports are alive (they then
            show the permuted rows).

        Raises
        ------
        ValueError
            For an order that is not a permutation (wrong length, out of range,
            repeated).
        TypeError
            For non-integers.
        BufferError
            While column views or Arrow exports are alive (unless ``unchecked``).
        RuntimeError
            During an exclusive pass.

        Notes
        -----
        All or nothing: the table is unchanged when it raises.
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        Cython: ``dod_table_reorder`` in dod/table.pxd (no checks, no allocation:
        the caller gives the scratch).
        """
        cdef size_t n = self.engine.count, i
        cdef cnp.ndarray arr
        cdef int64_t* op
        cdef dod_index* idx
        cdef Py_ssize_t bad = -1
        cdef char* scratch
        self._check_idle("reorder")
        a = input_array(order, None, "order", -1, None, "any")
        if a.dtype.kind not in "iu":
            if a.size == 0 and a.dtype.kind == "f":
                a = a.astype(np.int64)
            else:
                raise TypeError(f"order must hold integers, got dtype {a.dtype}")
        if a.ndim != 1 or <size_t>a.shape[0] != n:
            raise ValueError(f"order must be a permutation of the {n} live rows "
                             f"(shape ({n},)), got shape {a.shape}")
        if n == 0:
            self._check_unpinned(unchecked, "reorder")
            return
        # A private copy: the check and the permutation run on it, whatever
        # another thread does to the caller's array meanwhile.
        arr = np.array(a, dtype=np.int64, copy=True)
        op = <int64_t*>cnp.PyArray_DATA(arr)
        idx = <dod_index*>op                      # compacted in place to 32-bit rows below
        with nogil:
            for i in range(n):
                if op[i] < 0 or <uint64_t>op[i] >= n or self._mark[op[i]]:
                    bad = <Py_ssize_t>i
                    break
                self._mark[op[i]] = 1
            for i in range(n if bad < 0 else <size_t>bad):
                self._mark[op[i]] = 0
        if bad >= 0:
            v = op[bad]
            raise ValueError(f"order is not a permutation of the {n} live rows: "
                             + (f"{v} (position {bad}) is repeated" if 0 <= v < <int64_t>n
                                else f"{v} (position {bad}) is out of range"))
        self._check_unpinned(unchecked, "reorder")
        scratch = <char*>PyMem_Malloc(dod_table_reorder_scratch_bytes(&self.engine))
        if scratch == NULL:
            raise MemoryError("no scratch memory for the reorder; nothing changed")
        try:
            with nogil:
                for i in range(n):                # int64 -> dod_index, front to back (never overtakes)
                    idx[i] = <dod_index>op[i]
                dod_table_reorder(&self.engine, idx, scratch)
        finally:
            PyMem_Free(scratch)

    def sort(self, key, *, bint unchecked=False):
        """Reorder the live rows by `key`, ascending, ties in row order (stable).

        Parameters
        ----------
        key : str or array_like
            The name of a column with one value per row (no row shape), or an
            array of ``len(table)`` values.
        unchecked : bool, default False
            As for :meth:`reorder`.

        Returns
        -------
        numpy.ndarray
            The permutation applied (``order`` as :meth:`reorder` took it).

        Raises
        ------
        KeyError
            For an unknown column.
        ValueError
            For a key of the wrong shape.
        BufferError, RuntimeError
            As for :meth:`reorder`.

        Notes
        -----
        The table is unchanged when it raises. Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        if isinstance(key, str):
            c = self.column_index(key)
            if (<Column>self.schema.columns[c]).shape != ():
                raise ValueError(f"column {key!r} has rows of shape {(<Column>self.schema.columns[c]).shape}; "
                                 "sort needs one value per row")
            k = self._column_array(c, 0, self.engine.count, self).copy()
        else:
            k = input_array(key, None, "key", -1, None, "any")
            if k.ndim != 1 or <size_t>k.shape[0] != self.engine.count:
                raise ValueError(f"key must have shape ({self.engine.count},), got {k.shape}")
        order = np.argsort(k, kind="stable")
        self.reorder(order, unchecked=unchecked)
        return order

    def exclusive(self, str what="an exclusive pass"):
        """A context manager that holds the table's exclusive pass.

        Inside, code may write rows through the cimport engine without the
        GIL (e.g. a nogil loop of a Cython helper); writers from Python are
        refused until it ends (see Examples).

        Parameters
        ----------
        what : str, default "an exclusive pass"
            Named in the RuntimeError that refused writers raise.

        Returns
        -------
        context manager
            Holds the pass from ``__enter__`` to ``__exit__``.

        Raises
        ------
        RuntimeError
            On entering, when another pass is running (a remove_many, another
            ``exclusive()``, or a cimport user's ``begin_exclusive``).

        Notes
        -----
        Thread-safety: while it is held, :meth:`insert`, :meth:`insert_many`,
        :meth:`remove`, :meth:`remove_many` and :meth:`clear` from any thread
        raise RuntimeError naming `what`, so code inside may write rows through
        the cimport engine without the GIL. Not reentrant. Cython code uses
        ``begin_exclusive(what)`` / ``end_exclusive()`` directly (declared in
        dod/table.pxd).

        Examples
        --------
        >>> from dod.table import Schema, Table
        >>> table = Table(Schema(x="float64"), capacity=4)
        >>> h = table.insert(x=1.0)
        >>> with table.exclusive("a scaling pass"):
        ...     table["x"][:] *= 2.0              # here a Cython helper's nogil loop would run
        ...     table.insert(x=5.0)               # refused: the pass is held
        Traceback (most recent call last):
            ...
        RuntimeError: insert refused: ... (a scaling pass); write after it ends, whichever thread holds it
        >>> float(table.get(h)["x"]), len(table)
        (2.0, 1)
        """
        return _ExclusivePass(self, what)

    # -------------------------------------------------------- lookup

    def __len__(self):
        """The number of live rows. Thread-safety: a reader."""
        return self.engine.count

    def __contains__(self, handle):
        """``handle in table``: whether `handle` names a live row of this table
        (False for anything that is not a handle). Thread-safety: a reader."""
        try:
            h = self._handle_arg(handle)
        except (TypeError, ValueError):
            return False
        return dod_table_alive(&self.engine, <dod_handle>h)

    def row(self, handle):
        """Row index of `handle` now.

        Row indices change when rows are removed or reordered; handles do not.

        Parameters
        ----------
        handle : int

        Returns
        -------
        int
            The row, in ``range(len(table))``.

        Raises
        ------
        KeyError
            If the handle is nil, stale or from another table.
        TypeError
            For a handle that is not an integer.
        ValueError
            For an integer outside the 64-bit range.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef Py_ssize_t r = dod_table_row(&self.engine, <dod_handle>self._handle_arg(handle))
        if r < 0:
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        return r

    def rows(self, handles):
        """Row index of each handle: the fast path's answer, without exceptions.

        Parameters
        ----------
        handles : array_like of int

        Returns
        -------
        numpy.ndarray
            int64, one row per handle; -1 for a nil or stale handle.

        Raises
        ------
        TypeError, ValueError
            For values that are not 64-bit handles.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef cnp.ndarray arr = self._handles_arg(handles)
        cdef Py_ssize_t n = arr.shape[0], i
        cdef cnp.ndarray out = np.empty(n, np.int64)
        cdef uint64_t* hp = <uint64_t*>cnp.PyArray_DATA(arr)
        cdef int64_t* op = <int64_t*>cnp.PyArray_DATA(out)
        with nogil:
            for i in range(n):
                op[i] = dod_table_row(&self.engine, hp[i])
        return out

    def handle(self, row):
        """Handle of live row `row`.

        Parameters
        ----------
        row : int
            A live row; negative values count from the end.

        Returns
        -------
        int

        Raises
        ------
        IndexError
            When the row is out of range.
        TypeError
            For a row that is not an integer.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        r = PyNumber_Index(row)
        if r < 0:
            r += self.engine.count
        if r < 0 or r >= self.engine.count:
            raise IndexError(f"row {row} out of range for {self.engine.count} live rows")
        return dod_table_handle(&self.engine, <size_t>r)

    def handles(self):
        """Handles of the live rows, in row order.

        Returns
        -------
        numpy.ndarray
            A uint64 copy.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef size_t n = self.engine.count, i
        cdef cnp.ndarray out = np.empty(n, np.uint64)
        cdef uint64_t* hp = <uint64_t*>cnp.PyArray_DATA(out)
        with nogil:
            for i in range(n):
                hp[i] = dod_table_handle(&self.engine, i)
        return out

    def get(self, handle, default=_NOTHING):
        """The row `handle` names, as a dict of copies.

        Parameters
        ----------
        handle : int
        default : object, optional
            Returned for a nil, stale or foreign handle instead of raising.

        Returns
        -------
        dict
            Column name to a numpy scalar or array (copies).

        Raises
        ------
        KeyError
            For a nil, stale or foreign handle, when no `default` is given.
        TypeError
            For a handle that is not an integer.
        ValueError
            For an integer outside the 64-bit range.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef Py_ssize_t r = dod_table_row(&self.engine, <dod_handle>self._handle_arg(handle))
        cdef Py_ssize_t c
        if r < 0:
            if default is not _NOTHING:
                return default
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        out = {}
        for c in range(len(self.schema.columns)):
            a = self._column_array(c, <size_t>r, 1, self).copy()
            out[(<Column>self.schema.columns[c]).name] = a[0]
        return out

    def update(self, handle, values=None, /, **columns):
        """Write some columns of the row `handle` names.

        Parameters
        ----------
        handle : int
        values : mapping, optional
            Column name to value (positional only); merged with ``columns``.
        **columns
            Column name to value, validated and converted as by :meth:`insert`.

        Raises
        ------
        KeyError
            For a dead handle or an unknown column.
        TypeError, ValueError
            As for :meth:`insert`.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        cdef Py_ssize_t r = dod_table_row(&self.engine, <dod_handle>self._handle_arg(handle))
        cdef Schema s = self.schema
        if r < 0:
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        given = dict(values) if values is not None else {}
        given.update(columns)
        todo = []
        for name, v in given.items():
            c = s._index.get(name, -1)
            if c < 0:
                raise KeyError(f"unknown column {name!r}; the table has {', '.join(s.names)}")
            col = s.columns[c]
            arr = _convert(v, col)
            if not _broadcastable(arr.shape, col.shape):
                raise ValueError(f"column {name!r}: a row has shape {col.shape}, got {arr.shape}")
            if col.finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
                raise ValueError(f"column {name!r} refuses NaN and infinities (finite=True)")
            todo.append((c, arr))
        # The conversions may have run Python code that removed or moved
        # this row: find it again rather than write over whichever row moved in.
        r = dod_table_row(&self.engine, <dod_handle>self._handle_arg(handle))
        if r < 0:
            raise KeyError(f"handle {handle:#x} was removed while its values were converted")
        for c, arr in todo:
            np.copyto(self._column_array(c, <size_t>r, 1, self), arr, casting="same_kind")

    # -------------------------------------------------------- columns

    def __getitem__(self, name):
        """``table["pos"]``: a view of the live rows of one column.

        Parameters
        ----------
        name : str
            A column of the schema.

        Returns
        -------
        numpy.ndarray
            Writable, zero-copy, of shape ``(len(table), *row_shape)``. While it is
            alive, checked removes, reorders and clears raise BufferError.

        Raises
        ------
        KeyError
            For an unknown column.
        TypeError
            For a key that is not a str (rows are read with :meth:`get`).

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        if not isinstance(name, str):
            raise TypeError(f"index a table by column name (str); for rows use get(handle), got {type(name).__name__}")
        return self._column_array(self.column_index(name), 0, self.engine.count, self._new_view())

    def __setitem__(self, name, value):
        """``table["pos"] = values``: write a whole column of the live rows.

        Parameters
        ----------
        name : str
            A column of the schema.
        value : array_like
            Broadcasts to ``(len(table), *row_shape)``; converts with same_kind
            casting.

        Raises
        ------
        KeyError
            For an unknown column.
        TypeError, ValueError
            For a value that does not convert or broadcast, or a non-finite value
            in a finite column; the column is unchanged.

        Notes
        -----
        Thread-safety: a writer; one writer at a time and no readers meanwhile (the table is not locked).
        """
        cdef Py_ssize_t c = self.column_index(name)
        cdef Column col = self.schema.columns[c]
        arr = _convert(value, col)
        full = (self.engine.count,) + col.shape
        if not _broadcastable(arr.shape, full):
            raise ValueError(f"column {name!r} has shape {full}, cannot assign shape {arr.shape}")
        if col.finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
            raise ValueError(f"column {name!r} refuses NaN and infinities (finite=True)")
        np.copyto(self._column_array(c, 0, self.engine.count, self), arr, casting="same_kind")

    def columns(self):
        """Every column as a view of the live rows.

        Returns
        -------
        dict
            Column name to a writable, zero-copy ndarray; the views share one
            lease (while any is alive, checked removes raise BufferError).

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        base = self._new_view()
        return {(<Column>self.schema.columns[c]).name: self._column_array(c, 0, self.engine.count, base)
                for c in range(len(self.schema.columns))}

    def keys(self):
        """The column names, so that ``dict(table)`` and ``pandas.DataFrame(dict(table))`` work.

        Returns
        -------
        tuple of str

        Notes
        -----
        Thread-safety: the schema is immutable; any thread may call it.
        """
        return self.schema.names

    # -------------------------------------------------------- Arrow PyCapsule interface

    def __arrow_c_schema__(self):
        """The schema as an ``arrow_schema`` PyCapsule (Arrow C data interface).

        Returns
        -------
        PyCapsule
            A struct of the columns; vector columns are (nested) fixed-size lists.

        Raises
        ------
        TypeError
            For columns Arrow cannot hold without a copy (bool, complex, unicode,
            datetime...).

        Notes
        -----
        Thread-safety: the schema is immutable; any thread may call it.
        """
        return self.schema._arrow_schema()

    def __arrow_c_array__(self, requested_schema=None):
        """The live rows as a struct array, without a copy (F-order columns: copied).

        Parameters
        ----------
        requested_schema : PyCapsule, optional
            Ignored (the Arrow PyCapsule interface allows it; the consumer checks).

        Returns
        -------
        tuple of PyCapsule
            ``(arrow_schema, arrow_array)`` over the table's memory.

        Raises
        ------
        TypeError
            For columns Arrow cannot hold without a copy (bool, complex, unicode,
            datetime...).

        Notes
        -----
        The export counts as a live view until the consumer releases it (a
        pyarrow batch or polars frame that still uses the memory keeps checked
        removes refused). An F-order column (``Column(..., order="F")``) is
        exported as a row-major copy of its live rows, made by this call
        (Arrow's fixed-size lists hold each row's values together); every
        other column is the table's memory. Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef dod_arrow_desc d
        cdef Schema s = self.schema
        cdef char** cols
        sc = s._arrow_schema()
        s._desc(&d)
        cols = <char**>PyMem_Malloc(len(s.columns) * sizeof(char*))
        if cols == NULL:
            raise MemoryError()
        try:
            owner = self._arrow_columns(cols)
            return sc, dod_arrow_array_capsule(&d, cols, <int64_t>self.engine.count, owner)
        finally:
            PyMem_Free(cols)

    def __arrow_c_stream__(self, requested_schema=None):
        """The live rows as an ``arrow_array_stream`` PyCapsule of one batch (no copy; F-order columns: copied).

        Parameters
        ----------
        requested_schema : PyCapsule, optional
            Ignored, as for :meth:`__arrow_c_array__`.

        Returns
        -------
        PyCapsule

        Raises
        ------
        TypeError
            As for :meth:`__arrow_c_array__`.

        Notes
        -----
        Lifetime and F-order columns as for :meth:`__arrow_c_array__`. Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef Schema s = self.schema
        cdef dod_arrow_desc d
        cdef char** cols
        if s._unexportable is not None:
            raise TypeError(f"cannot export to Arrow: {s._unexportable}")
        s._desc(&d)
        cols = <char**>PyMem_Malloc(len(s.columns) * sizeof(char*))
        if cols == NULL:
            raise MemoryError()
        try:
            owner = self._arrow_columns(cols)
            return dod_arrow_stream_capsule(&d, cols, <int64_t>self.engine.count, owner, s)
        finally:
            PyMem_Free(cols)

    cdef object _arrow_columns(self, char** cols):
        """The data buffer of each column for an Arrow export into cols, and
        the object that keeps them alive (the export's owner). A C-order
        column is its own memory (zero-copy, pinned by a view lease); Arrow's
        fixed-size lists hold each row's values together, which an F-order
        column does not, so its live rows are copied into row-major order."""
        cdef Py_ssize_t c
        cdef size_t n = self.engine.count
        lease = self._new_view()
        copies = []
        for c in range(len(self.schema.columns)):
            if self.engine.lane_bytes[c] == 0:
                cols[c] = self.engine.columns[c]
                continue
            a = np.ascontiguousarray(self._column_array(c, 0, n, self))
            copies.append(a)
            cols[c] = <char*>cnp.PyArray_DATA(<cnp.ndarray>a)
        return (lease, copies) if copies else lease

    # -------------------------------------------------------- numpy structured arrays

    def to_numpy(self):
        """A copy of the live rows as a numpy structured array.

        Returns
        -------
        numpy.ndarray
            Of dtype ``schema.dtype``, one record per live row, in row order.

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef Py_ssize_t c
        out = np.empty(self.engine.count, dtype=self.schema.dtype)
        for c in range(len(self.schema.columns)):
            name = (<Column>self.schema.columns[c]).name
            out[name] = self._column_array(c, 0, self.engine.count, self)
        return out

    @classmethod
    def from_numpy(cls, array, capacity=None, *, Resource resource=None):
        """A new table holding a copy of a structured array's records.

        Parameters
        ----------
        array : numpy structured array
            Its dtype gives the schema (:meth:`Schema.from_dtype`).
        capacity : int, optional
            Defaults to the number of records (at least 1).
        resource : Resource, optional
            As for :class:`Table`.

        Returns
        -------
        Table

        Raises
        ------
        TypeError
            For an array that is not structured.
        ValueError, MemoryError
            As for :class:`Table` and :meth:`insert_many`.

        Notes
        -----
        Thread-safety: builds a new table; safe from any thread.
        """
        arr = input_array(array, None, "array", -1, None, "any")
        if arr.dtype.names is None:
            raise TypeError(f"from_numpy needs a structured array, got dtype {arr.dtype}")
        arr = arr.reshape(-1)
        schema = Schema.from_dtype(arr.dtype)
        t = cls(schema, max(1, len(arr)) if capacity is None else capacity, resource=resource)
        if len(arr):
            t.insert_many(arr)
        return t

    # -------------------------------------------------------- invariants and statistics

    def check(self):
        """Walk the structures and verify every invariant of dod/table.pxd.

        Raises
        ------
        dod.InvariantError
            On the first invariant that fails (never a bare assert: ``python -O``
            keeps the check).

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        cdef dod_table* t = &self.engine
        cdef size_t r, c, k, free_count = 0, rb
        cdef dod_index slot
        cdef char* nil
        if not (t.count <= t.capacity):
            raise InvariantError("count above capacity")
        if not (t.slots_used <= t.slots_high <= t.capacity):
            raise InvariantError("slots_used <= slots_high <= capacity broken")
        for r in range(t.count):
            slot = t.row_slot[r]
            if not (1 <= slot <= t.slots_used):
                raise InvariantError(f"row {r} maps to slot {slot} out of range")
            if not (t.slot_row[slot] == r):
                raise InvariantError(f"slot {slot} of row {r} points to row {t.slot_row[slot]}")
        slot = t.free_head
        while slot != 0:
            if not (1 <= slot <= t.slots_used):
                raise InvariantError(f"free list holds slot {slot} out of range")
            if not (t.slot_row[slot] & DOD_TABLE_FREE):
                raise InvariantError(f"free slot {slot} is not marked free")
            free_count += 1
            if not (free_count <= t.slots_used):
                raise InvariantError("cycle in the free list")
            slot = t.slot_row[slot] & ~DOD_TABLE_FREE
        if not (free_count + t.count == t.slots_used):
            raise InvariantError(f"{free_count} free + {t.count} live slots != {t.slots_used} used")
        for c in range(t.ncols):
            rb = dod_table_lane_item(t, c)
            for k in range(t.lanes[c]):
                nil = dod_table_lane(t, c, k) - rb
                for r in range(rb):
                    if not (nil[r] == 0):
                        raise InvariantError(f"the nil row of column {c}"
                                             + (f" (lane {k})" if t.lane_bytes[c] else "") + " was written")
                if not ((<uintptr_t>(nil + rb)) % DOD_CACHE_LINE == 0):
                    raise InvariantError(f"column {c}" + (f" (lane {k})" if t.lane_bytes[c] else "")
                                         + " is not 64-byte aligned")
            if t.lane_bytes[c] and (t.lane_bytes[c] % DOD_CACHE_LINE
                                    or t.lane_bytes[c] < t.capacity * rb + rb):
                raise InvariantError(f"column {c}: lane stride {t.lane_bytes[c]} cannot hold "
                                     f"{t.capacity} items and a nil item")
        for r in range(t.capacity + 1):
            if not (self._mark[r] == 0):
                raise InvariantError("batch scratch marks left behind")

    @property
    def capacity(self):
        """Rows every column holds."""
        return self.engine.capacity

    @property
    def peak(self):
        """Most live rows at once."""
        return max(self.engine.peak, self.engine.count)

    @property
    def bytes_per_row(self):
        """Bytes of one row across all columns (slot map excluded)."""
        return self.schema._row_bytes

    @property
    def nbytes(self):
        """Bytes taken from the resource: columns, nil rows, slot map."""
        return self._nbytes

    @property
    def views(self):
        """Live column views and Arrow exports (they block checked removes)."""
        return self._views

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            First the shared keys of every owner, counted in rows since a table
            holds rows, not bytes: ``capacity``, ``used`` (live rows),
            ``available``, ``peak``, ``allocations`` (rows inserted), ``failed``
            (inserts refused: full); then the table's own: ``rows`` (= used),
            ``bytes_per_row``, ``nbytes`` (bytes taken from the resource),
            ``inserts`` (= allocations), ``removes``, ``views`` (live views and
            exports).

        Notes
        -----
        Thread-safety: a reader; safe alongside other readers, not while a writer runs.
        """
        return {
            "capacity": self.engine.capacity,
            "used": self.engine.count,
            "available": self.engine.capacity - self.engine.count,
            "peak": self.peak,
            "allocations": self.engine.inserts,
            "failed": self.engine.failed,
            "rows": self.engine.count,
            "bytes_per_row": self.schema._row_bytes,
            "nbytes": self._nbytes,
            "inserts": self.engine.inserts,
            "removes": self.engine.removes,
            "views": self._views,
        }

    def __repr__(self):
        return (f"<dod.Table {len(self.schema.columns)} columns ({', '.join(self.schema.names)}) "
                f"rows={self.engine.count}/{self.engine.capacity} peak={self.peak} "
                f"bytes_per_row={self.schema._row_bytes} memory={fmt_bytes(self._nbytes)} "
                f"views={self._views}>")


# Column and Schema live in dod.schema; `from dod.table import Schema, Column` keeps working.
globals().update(Column=Column, Schema=Schema)
