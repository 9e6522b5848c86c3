# dod/schema.pxd: Column and Schema (dod/schema.pyx), the description of a
# struct-of-arrays table's columns. cimport it (or dod.table, which
# re-exports both) to read a schema's per-column C description:
#
# not run: a fragment (schema and c are the caller's); dod/arrow.pyx
# reads the column descriptions this way
#     from dod.schema cimport Schema, dod_column_info
#     cdef const dod_column_info* info = &schema._info[c]   # row_bytes, ndim, dims
#
# A Schema is immutable once built: _info, _strings and the counts never
# change, so any thread may read them.
from dod.arrow cimport dod_column_info, dod_arrow_desc

cdef enum:
    DOD_SCHEMA_MAX_NDIM = 8         # dimensions of a per-row shape (dod_column_info.dims)


cdef class Column:
    cdef readonly str name
    cdef readonly object dtype        # numpy dtype of one element
    cdef readonly tuple shape         # per-row shape, () for a scalar column
    cdef readonly bint zero           # clear on insert when not given (ZII)
    cdef readonly bint finite         # refuse NaN and infinities from Python
    cdef readonly str order           # "C": rows contiguous; "F": one lane per component (dod/table.pxd)

    cdef Column _named(self, str name)
    cdef str _spec(self)


cdef class Schema:
    cdef readonly tuple columns       # Column objects, in order
    cdef dict _index                  # name -> position
    cdef dod_column_info* _info       # ncols entries (owned)
    cdef bytes _strings               # names and Arrow formats, NUL-terminated
    cdef size_t _nodes                # ArrowSchema nodes of an export (root included)
    cdef size_t _links                # child pointers of an export
    cdef str _unexportable            # why Arrow export is refused (None: it is not)
    cdef size_t _row_bytes

    cdef int _init_from(self, tuple cols) except -1
    cdef void _desc(self, dod_arrow_desc* d) noexcept       # fill the Arrow export's description
    cdef object _arrow_schema(self)                         # an arrow_schema PyCapsule
