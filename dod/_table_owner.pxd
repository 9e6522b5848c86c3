# dod/_table_owner.pxd: the owner of a table's memory, the base of
# dod.table.Table (which dod/table.pxd declares and re-exports this from).
# It holds the engine struct and everything the Python face shares: the
# memory (allocated once, given back at dealloc), the exclusive pass, the
# count of live views, the argument gates for handles, the invariant check
# and the statistics. Its attributes and cdef methods are Table's.
from libc.stdint cimport uint8_t

from dod._table_engine cimport dod_table
from dod.resource cimport dod_resource, Resource
from dod.pages cimport dod_page_range
from dod.schema cimport Schema


cdef class TableOwner:
    cdef dod_table engine             # the engine state; run the inline functions on &owner.engine
    cdef readonly Schema schema
    cdef Resource _resource           # keeps the source of the memory alive
    cdef object _arena                # the table's own arena (default source), or None
    cdef const dod_resource* _source
    cdef void** _blocks               # every block taken from the source (to give back)
    cdef size_t* _block_sizes
    cdef size_t _nblocks
    cdef size_t _nbytes               # bytes taken from the source, in all
    cdef uint8_t* _mark               # scratch: one byte per slot, for batch-remove checks
    cdef Py_ssize_t _views            # live column views and Arrow exports
    cdef int _exclusive               # an exclusive pass is running (begin_exclusive .. end_exclusive)
    cdef str _exclusive_what          # what holds it, for the refusal message

    cpdef Py_ssize_t column_index(self, str name) except -1
    # The table's memory (every column at its full capacity with its nil
    # row, and the slot map) as ranges for dod.pages.dod_pages_prefault:
    # writes them to out (NULL: counts only) and returns how many. Valid as
    # long as the table lives (its memory never moves).
    cdef size_t page_ranges(self, dod_page_range* out) noexcept
    cdef int _check_unpinned(self, bint unchecked, str what) except -1
    cdef int _check_idle(self, str what) except -1
    # The exclusive-pass protocol (see Table.exclusive): call both with the GIL held.
    cdef int begin_exclusive(self, str what) except -1
    cdef void end_exclusive(self) noexcept
    cdef object _new_view(self)
    cdef object _column_array(self, Py_ssize_t c, size_t first, size_t n, object base)
    cdef object _handle_arg(self, object h)
    cdef object _handles_arg(self, object handles)
