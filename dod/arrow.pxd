# dod/arrow.pxd: the Arrow C data interface export (dod/arrow.pyx): the
# plain description of columns it reads, and three capsule builders.
#
# not run: a fragment (desc, columns, length and owner are the caller's);
# dod/arrow.pyx and dod/table.pyx build their exports this way
#     from dod.arrow cimport dod_arrow_desc, dod_arrow_array_capsule
#     capsule = dod_arrow_array_capsule(&desc, columns, length, owner)
#
# Contract: `desc` (and the info and strings it points to) stays valid while
# the call runs (schema, array) or, for streams, while `keepalive` lives;
# columns[c] holds `length` rows of info[c].row_bytes bytes and stays valid
# while `owner` lives. Each builder raises MemoryError when malloc fails.
from libc.stdint cimport int64_t


# One column as the export reads it (filled by dod.schema.Schema).
ctypedef struct dod_column_info:
    size_t row_bytes          # itemsize * product of dims
    size_t itemsize
    int ndim                  # per-row dimensions (0: scalar column)
    int64_t dims[8]           # DOD_TABLE_MAX_NDIM
    size_t name_off           # offset of the NUL-terminated UTF-8 name in the strings blob
    size_t fmt_off[9]         # Arrow format per nesting level (ndim lists, then the leaf)
    bint exportable           # False: Arrow has no zero-copy type for the dtype


# What a nogil builder needs from a schema.
ctypedef struct dod_arrow_desc:
    const dod_column_info* info
    size_t ncols
    size_t nodes              # structs of a tree, root included
    size_t links              # child pointers of a tree
    const char* strings       # "+s\0\0item\0", then names and formats, NUL-terminated
    size_t strings_len


cdef object dod_arrow_schema_capsule(const dod_arrow_desc* d)
cdef object dod_arrow_array_capsule(const dod_arrow_desc* d, char** columns, int64_t length, object owner)
cdef object dod_arrow_stream_capsule(const dod_arrow_desc* d, char** columns, int64_t length,
                                     object owner, object keepalive)
