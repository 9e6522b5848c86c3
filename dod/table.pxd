# dod/table.pxd: the struct-of-arrays table's engine (C struct + inline nogil
# functions) and its owner class. cimport this to insert, remove and scan rows
# in your own nogil loops:
#
# not run: a fragment (schema and the function around it left out);
# docs/guide/data.md compiles a whole module on the same engine
#     from dod.table cimport Table, dod_table, dod_table_insert, dod_table_remove, dod_table_row
#     cdef Table tracks = Table(schema, 1024)
#     cdef dod_table* t = &tracks.engine
#     cdef double* state = <double*>t.columns[tracks.column_index("state")]
#     with nogil:
#         h = dod_table_insert(t)              # 0 when the table is full
#         r = dod_table_row(t, h)              # -1 (the nil row) when h is nil or stale
#         state[r * 6 + 0] = 1.0
#         for r in range(<Py_ssize_t>t.count): # live rows are rows 0 .. count-1
#             ...
#
# Layout
#   * C order (lane_bytes[c] == 0, the default): column c holds `capacity`
#     rows of `row_bytes[c]` bytes each, contiguous and 64-byte aligned at
#     columns[c]; row r of column c is at columns[c] + r * row_bytes[c].
#   * F order (Column(..., order="F"), lane_bytes[c] > 0): the column is
#     component-major. Its row shape's components, numbered in C order over
#     the shape (k = 0 .. lanes[c] - 1), each get a lane: `capacity` items of
#     itemsize = row_bytes[c] / lanes[c] bytes, contiguous and 64-byte
#     aligned at dod_table_lane(t, c, k) = columns[c] + k * lane_bytes[c].
#     Component k of row r is at dod_table_lane(t, c, k) + r * itemsize, so
#     a loop over rows reads each component at unit stride. columns[c] is
#     lane 0 (a reader of the first component needs nothing else). A row
#     move copies one item per lane.
#   * Columns are allocated once and never move.
#   * Row -1 of every column (the bytes just before columns[c]) is the nil
#     row: always zero; in F order, item -1 of every lane is. dod_table_row
#     returns -1 for a nil or stale handle, so a lookup that fails reads
#     zeros instead of crashing. Never write it.
#   * Slots 1..capacity carry the handles: slot_row[s] is the row of a live
#     slot, slot_gen[s] its generation; row_slot[r] is the slot of live row r.
#     Slot 0 is the nil slot, so the nil handle 0 never matches.
#
# Invariants
#   * Live rows are dense: rows 0 .. count-1; count <= capacity.
#   * For a live row r: slot_row[row_slot[r]] == r.
#   * A free slot's slot_row entry is DOD_TABLE_FREE | next free slot (0 ends
#     the list), which is >= count, so one compare rejects it.
#   * Slots 1..slots_used are live or on the free list; slots above it are
#     taken in order when the free list is empty. Slots 1..slots_high have
#     been handed out at least once and keep their generation; a slot above
#     slots_high gets gen_base on first use. clear() empties the free list
#     and sets slots_used to 0, so the next inserts take slots 1, 2, 3...
#     in order (no free-list chase) with their generations moved on.
#   * A handle is (generation << 32) | slot. Removing a row increments its
#     slot's generation, so every handle to it becomes stale. Generations wrap
#     after 2**32 reuses of one slot (a stale handle that old would alias).
#     Each table starts its generations at its own 32-bit base, so a handle
#     from another table is rejected (with probability ~1 - 2**-32 per lookup).
#   * All bytes zero (ZII) is a valid, empty table of capacity 0: every
#     insert fails (returns the nil handle 0) and every lookup yields -1.
#
# What stays valid across a reorder (dod_table_reorder: rows permuted in place):
#   * handles: yes (each names the same data at its new row); column base
#     pointers: yes; row indices and pointers to rows: NO (as for a remove).
#
# What stays valid across a remove (swap with the last row):
#   * handles: yes (the moved row's slot is updated);
#   * column base pointers: yes (columns never move);
#   * row indices and pointers to rows: NO. The last row moves into the hole,
#     so row `count-1` (before the remove) becomes the removed row's index.
#     To remove while scanning, walk rows from count-1 down to 0 and call
#     dod_table_remove_row(t, r): the row that moves into r was already visited.
#   * numpy views of columns made before the remove show the moved data;
#     the Python face refuses such removes while views are alive.
#
# Engine contract (checks the caller owns on this fast path): `t` points to a
# table's struct (&owner.engine) that the owner keeps alive; row arguments
# are < count; one thread mutates a table at a time (readers only while no
# one mutates); no Python view of a column is alive across a remove unless
# you accept that it now shows moved rows. Failure is a nil handle (0) / -1 /
# False, never a crash, and inserts that do not fit are counted in `failed`.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.string cimport memset, memcpy

from dod._core cimport DOD_DEBUG, dod_poison, dod_prefetch
from dod._types cimport (dod_handle, dod_index, dod_generation, dod_handle_make,
                         dod_handle_index, dod_handle_generation)
from dod.resource cimport dod_resource, Resource
from dod.pages cimport dod_page_range
# Re-exported, so that `from dod.table cimport Schema, Column` keeps working.
from dod.schema cimport Column, Schema, dod_column_info, DOD_SCHEMA_MAX_NDIM
# The engine (dod/_table_engine.pxd: the struct, its inline fast paths, the
# slow paths) and the owner (dod/_table_owner.pxd): declared there, cimported
# from here.
from dod._table_engine cimport (DOD_TABLE_NIL, DOD_TABLE_MAX_NDIM, DOD_TABLE_REORDER_AHEAD, DOD_TABLE_FREE,
                               dod_table, dod_table_clear, dod_table_insert_many, dod_table_insert_rows,
                               dod_table_zero_rows, dod_table_removal, dod_table_removal_plan,
                               dod_table_removal_list, dod_table_removal_walk, dod_table_removal_move,
                               dod_table_removal_free, dod_table_removal_finish, dod_table_remove_flagged,
                               dod_table_reusable, dod_table_insert_reusing, dod_table_insert_freed,
                               dod_table_row, dod_table_alive, dod_table_handle, dod_table_cell,
                               dod_table_lane, dod_table_lane_item, dod_table_zero_cells,
                               dod_table_poison_cells, dod_table_insert_uninit, dod_table_insert,
                               dod_table_insert_zeroed, dod_table_copy_row, dod_table_move_row,
                               dod_table_remove_row, dod_table_swap_rows, dod_table_reorder_scratch_bytes,
                               dod_table_gather_items, dod_table_reorder_gather, dod_table_reorder_put,
                               dod_table_reorder, dod_table_remove)
from dod._table_owner cimport TableOwner


# The table: the owner's memory and engine, with the Python face (dod/table.pyx).
cdef class Table(TableOwner):
    cdef object _arrow_columns(self, char** cols)
