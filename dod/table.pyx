"""Struct-of-arrays tables: ZII rows, generation handles, zero-copy columns.

A :class:`Schema` names columns, each a numpy dtype and a per-row shape
(``pos: float32[3]``, ``cov: float64[6,6]``, ``id: uint32``). A
:class:`Table` allocates every column once, for a fixed capacity, 64-byte
aligned and zeroed (ZII: an all-zero row is a valid default), from any
allocator (its own arena by default). Live rows stay packed at the front;
removing a row moves the last row into the hole. A slot map gives every row
a stable 64-bit handle (0 is nil) that survives those moves and goes stale
when its row is removed.

Safety contract (the Python face)
    Every method validates its arguments first and leaves the table
    unchanged when it raises (apart from the ``failed`` counter when an
    insert does not fit). Batches are all or nothing. ``table["pos"]``
    returns a writable numpy view of the live rows that keeps the table's
    memory alive. Inserting never moves rows, so views stay correct (they
    do not grow). Removing and clearing move rows under existing views: while
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
    dod_table_row`` and run the engine on ``&owner.table`` without the GIL;
    see ``dod/table.pxd`` for the layout, the checks the caller owns there
    and what stays valid across a remove.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t, uintptr_t
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy, strlen
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.number cimport PyNumber_Index
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF

from dod._core cimport DOD_DEBUG, DOD_CACHE_LINE, dod_add_overflow, dod_mul_overflow, dod_poison
from dod._atomic cimport dod_atomic_fetch_sub_u64
from dod._types cimport dod_handle, dod_index, dod_generation, dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, wrap_memory
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate, dod_resource_allocate_from_python,
                           dod_resource_deallocate)
from dod.arena cimport Arena

import re
from collections.abc import Mapping

import numpy as np

from dod._format import fmt_bytes

cnp.import_array()

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
            dod_poison(t.columns[c], n * t.row_bytes[c])
    t.removes += n
    t.count = 0


cdef size_t dod_table_insert_many(dod_table* t, size_t n, dod_handle* out) noexcept nogil:
    """Append n rows (no column written) and store their handles in out[0:n];
    all or nothing: returns 0 (and inserts nothing) when they do not fit."""
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
        out[k] = dod_handle_make(slot, slot_gen[slot])
    t.free_head = head
    t.slots_used = used
    t.slots_high = high
    t.count = row + n
    t.inserts += n
    return n


# ---------------------------------------------------------------- schema

_SPEC = re.compile(r"^\s*([A-Za-z0-9_<>=|]+)\s*(?:\[\s*([0-9,\s]*)\s*\])?\s*$")

# Arrow C data interface format of each numpy kind+itemsize that maps without a copy.
_ARROW_FORMATS = {
    ("i", 1): "c", ("i", 2): "s", ("i", 4): "i", ("i", 8): "l",
    ("u", 1): "C", ("u", 2): "S", ("u", 4): "I", ("u", 8): "L",
    ("f", 2): "e", ("f", 4): "f", ("f", 8): "g",
}


cdef object _column_dtype(object dtype, str name):
    """A validated element dtype for a column: sized, no objects, no fields, native order."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"column {name!r}: {dtype!r} is not a dtype ({e})") from None
    if dt.names is not None:
        raise TypeError(f"column {name!r}: structured dtype {dt} refused; give each field its own column")
    if dt.subdtype is not None:
        raise TypeError(f"column {name!r}: subarray dtype {dt} refused; use shape= for per-row shapes")
    if dt.hasobject:
        raise TypeError(f"column {name!r}: object dtype refused (table memory is raw bytes the GC cannot see)")
    if dt.itemsize == 0:
        raise TypeError(f"column {name!r}: dtype {dt} has no size (give a length, e.g. 'S8')")
    if not dt.isnative:
        raise TypeError(f"column {name!r}: dtype {dt} is not in native byte order")
    return dt


@cython.final
cdef class Column:
    """One column of a :class:`Schema`.

    Column(dtype, shape=(), *, zero=True, finite=False, name=None)

    ``dtype`` is one element's numpy dtype (no structured, object or unsized
    dtypes, native byte order); ``shape`` the per-row shape (``3`` or
    ``(6, 6)``; every dimension positive). ``zero``: the column's zero is
    meaningful, so inserts clear it when no value is given; with
    ``zero=False`` a row inserted without a value for it holds unspecified
    bytes (bulk inserts that always write it skip the clearing). ``finite``:
    the Python face refuses NaN and infinities for this column.
    """

    def __init__(self, dtype, shape=(), *, bint zero=True, bint finite=False, name=None):
        # Schemas and tables size their memory from these fields: calling
        # __init__ again on a live column would resize rows under them.
        if self.dtype is not None:
            raise TypeError("a Column is immutable; make a new one")
        label = "?" if name is None else name
        if name is not None and not isinstance(name, str):
            raise TypeError(f"column names are str, got {type(name).__name__}")
        self.name = name
        self.dtype = _column_dtype(dtype, label)
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        try:
            shape = tuple(PyNumber_Index(d) for d in shape)
        except TypeError:
            raise TypeError(f"column {label!r}: shape must be an int or a tuple of ints, got {shape!r}") from None
        if len(shape) > DOD_TABLE_MAX_NDIM:
            raise ValueError(f"column {label!r}: at most {DOD_TABLE_MAX_NDIM} dimensions per row, got {len(shape)}")
        for d in shape:
            if d <= 0 or d > (1 << 31):
                raise ValueError(f"column {label!r}: every dimension of a row must be positive (and sane), got {shape}")
        self.shape = shape
        self.zero = zero
        self.finite = finite

    cdef Column _named(self, str name):
        cdef Column c = Column.__new__(Column)
        c.name = name
        c.dtype = self.dtype
        c.shape = self.shape
        c.zero = self.zero
        c.finite = self.finite
        return c

    @property
    def row_bytes(self):
        """Bytes of one row of this column."""
        return int(self.dtype.itemsize * (np.prod(self.shape, dtype=np.int64) if self.shape else 1))

    def __eq__(self, other):
        if not isinstance(other, Column):
            return NotImplemented
        o = <Column>other
        return (self.name == o.name and self.dtype == o.dtype and self.shape == o.shape
                and self.zero == o.zero and self.finite == o.finite)

    def __hash__(self):
        return hash((self.name, self.dtype, self.shape, self.zero, self.finite))

    cdef str _spec(self):
        dims = "" if not self.shape else "[" + ",".join(map(str, self.shape)) + "]"
        flags = ("" if self.zero else ", zero=False") + (", finite=True" if self.finite else "")
        if flags:
            return f"{self.name}=Column({str(self.dtype)!r}, {self.shape}{flags})"
        return f"{self.name}={str(self.dtype) + dims!r}"

    def __repr__(self):
        return f"<Column {self._spec()}>"

    def __reduce__(self):
        return (_rebuild_column, (self.dtype, self.shape, self.zero, self.finite, self.name))


def _rebuild_column(dtype, shape, zero, finite, name):
    """Unpickles a Column (a fresh object: a live Column is never rewritten)."""
    return Column(dtype, shape, zero=zero, finite=finite, name=name)


cdef Column _as_column(str name, object spec):
    """A Column from a spec: Column, dtype-like, 'float32[3]', or (dtype, shape)."""
    if isinstance(spec, Column):
        return (<Column>spec)._named(name)
    if isinstance(spec, str):
        m = _SPEC.match(spec)
        if m is not None and m.group(2) is not None:
            dims = [d for d in m.group(2).replace(" ", "").split(",") if d]
            if not dims:
                raise ValueError(f"column {name!r}: empty shape in {spec!r}")
            return Column(m.group(1), tuple(int(d) for d in dims), name=name)
        return Column(spec, name=name)
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise TypeError(f"column {name!r}: a tuple spec is (dtype, shape), got {spec!r}")
        return Column(spec[0], spec[1], name=name)
    return Column(spec, name=name)


@cython.final
cdef class Schema:
    """Named columns: each a dtype and a per-row shape.

    Schema(columns=None, /, **named)

    ``columns`` is a mapping ``{name: spec}`` or a sequence of named
    :class:`Column` objects; keyword arguments add more. A spec is a
    :class:`Column`, a dtype (``"uint32"``, ``np.float64``), a string with a
    shape (``"float32[3]"``, ``"float64[6,6]"``) or a ``(dtype, shape)``
    tuple. Column order is the order given.

    Raises TypeError for structured, object, unsized or byte-swapped dtypes
    and for names that are not str, ValueError for duplicate or empty names,
    bad shapes, or no columns at all.
    """

    def __init__(self, columns=None, /, **named):
        cdef list cols = []
        cdef Column c
        items = []
        if self._info != NULL:
            raise TypeError("a Schema is immutable; make a new one")
        if columns is not None:
            if isinstance(columns, Mapping):
                items.extend(columns.items())
            elif isinstance(columns, np.dtype):
                self._init_from((<Schema>Schema.from_dtype(columns)).columns)
                return
            else:
                for c0 in columns:
                    if not isinstance(c0, Column) or (<Column>c0).name is None:
                        raise TypeError("a sequence of columns must hold named Column objects "
                                        "(Column(dtype, shape, name=...)); or pass a mapping")
                    items.append(((<Column>c0).name, c0))
        items.extend(named.items())
        for name, spec in items:
            if not isinstance(name, str):
                raise TypeError(f"column names are str, got {name!r}")
            if not name or "\0" in name:
                raise ValueError(f"column name {name!r} must be non-empty and without NUL")
            cols.append(_as_column(name, spec))
        self._init_from(tuple(cols))

    cdef int _init_from(self, tuple cols) except -1:
        cdef Py_ssize_t i, j, n = len(cols)
        cdef Column c
        cdef dod_column_info* info
        cdef list blob = []
        cdef size_t off = 0, row_bytes, total = 0
        if n == 0:
            raise ValueError("a schema needs at least one column")
        index = {}
        for i in range(n):
            c = cols[i]
            if c.name in index:
                raise ValueError(f"duplicate column name {c.name!r}")
            index[c.name] = i
        info = <dod_column_info*>PyMem_Malloc(n * sizeof(dod_column_info))
        if info == NULL:
            raise MemoryError()
        memset(info, 0, n * sizeof(dod_column_info))
        unexportable = None
        nodes = 1
        links = n
        # The strings blob starts with the root's format "+s" (offset 0), the
        # empty root name (offset 3) and the name of list children (offset 4).
        blob.append(b"+s\0\0item\0")
        off = 9
        for i in range(n):
            c = cols[i]
            row_bytes = <size_t>c.dtype.itemsize
            for j, d in enumerate(c.shape):
                if dod_mul_overflow(row_bytes, <size_t>d, &row_bytes) or row_bytes > (<size_t>1 << 40):
                    PyMem_Free(info)
                    raise ValueError(f"column {c.name!r}: a row of shape {c.shape} is absurdly large")
                info[i].dims[j] = d
            info[i].row_bytes = row_bytes
            info[i].itemsize = <size_t>c.dtype.itemsize
            info[i].ndim = <int>len(c.shape)
            total += row_bytes
            name_b = c.name.encode("utf-8") + b"\0"
            info[i].name_off = off
            blob.append(name_b)
            off += len(name_b)
            fmt = _ARROW_FORMATS.get((c.dtype.kind, c.dtype.itemsize))
            if fmt is None and c.dtype.kind == "S":
                fmt = f"w:{c.dtype.itemsize}"
            info[i].exportable = fmt is not None
            if fmt is None:
                fmt = "n"     # placeholder; export refuses before using it
                if unexportable is None:
                    unexportable = (f"column {c.name!r} of dtype {c.dtype} has no zero-copy Arrow type"
                                    + (" (Arrow booleans are bit-packed; use uint8)" if c.dtype.kind == "b" else ""))
            for j in range(info[i].ndim + 1):
                f = (f"+w:{c.shape[j]}" if j < info[i].ndim else fmt).encode() + b"\0"
                info[i].fmt_off[j] = off
                blob.append(f)
                off += len(f)
            nodes += 1 + info[i].ndim
            links += info[i].ndim
        self.columns = cols
        self._index = index
        self._info = info
        self._strings = b"".join(blob)
        self._nodes = nodes
        self._links = links
        self._unexportable = unexportable
        self._row_bytes = total
        return 0

    def __dealloc__(self):
        PyMem_Free(self._info)

    @staticmethod
    def from_dtype(dtype):
        """The schema of a numpy structured dtype: one column per field (subarray fields keep their shape)."""
        dt = np.dtype(dtype)
        if dt.names is None:
            raise TypeError(f"{dt} is not a structured dtype")
        cols = []
        for name in dt.names:
            fdt = dt.fields[name][0]
            if fdt.subdtype is not None:
                cols.append(Column(fdt.subdtype[0], fdt.subdtype[1], name=name))
            else:
                cols.append(Column(fdt, name=name))
        return Schema(cols)

    @property
    def names(self):
        """Column names, in order."""
        return tuple(c.name for c in self.columns)

    @property
    def dtype(self):
        """The equivalent numpy structured dtype (packed, fields in column order)."""
        return np.dtype([(c.name, c.dtype, c.shape) for c in self.columns])

    @property
    def row_bytes(self):
        """Bytes of one row across all columns."""
        return self._row_bytes

    def __len__(self):
        return len(self.columns)

    def __iter__(self):
        return iter(self.columns)

    def __contains__(self, name):
        return name in self._index

    def __getitem__(self, name):
        try:
            return self.columns[self._index[name]]
        except KeyError:
            raise KeyError(f"no column {name!r}; the schema has {', '.join(self.names)}") from None

    def index(self, str name):
        """Position of column `name` (KeyError if absent)."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; the schema has {', '.join(self.names)}") from None

    def __eq__(self, other):
        if not isinstance(other, Schema):
            return NotImplemented
        return self.columns == (<Schema>other).columns

    def __hash__(self):
        return hash(self.columns)

    def __reduce__(self):
        return (Schema, (list(self.columns),))

    def __arrow_c_schema__(self):
        """The schema as an ``arrow_schema`` PyCapsule (``pyarrow.schema(schema)``)."""
        return _schema_capsule(self)

    def __repr__(self):
        return "Schema(" + ", ".join((<Column>c)._spec() for c in self.columns) + ")"


# ---------------------------------------------------------------- Arrow C data interface

# The structs of the Arrow C data interface (ABI-stable, defined by the spec:
# https://arrow.apache.org/docs/format/CDataInterface.html), declared here so
# that no Arrow library is needed at build or run time.
cdef extern from *:
    """
    #ifndef ARROW_C_DATA_INTERFACE
    #define ARROW_C_DATA_INTERFACE
    #define ARROW_FLAG_DICTIONARY_ORDERED 1
    #define ARROW_FLAG_NULLABLE 2
    #define ARROW_FLAG_MAP_KEYS_SORTED 4
    struct ArrowSchema {
      const char* format; const char* name; const char* metadata; int64_t flags;
      int64_t n_children; struct ArrowSchema** children; struct ArrowSchema* dictionary;
      void (*release)(struct ArrowSchema*); void* private_data;
    };
    struct ArrowArray {
      int64_t length; int64_t null_count; int64_t offset; int64_t n_buffers; int64_t n_children;
      const void** buffers; struct ArrowArray** children; struct ArrowArray* dictionary;
      void (*release)(struct ArrowArray*); void* private_data;
    };
    #endif
    #ifndef ARROW_C_STREAM_INTERFACE
    #define ARROW_C_STREAM_INTERFACE
    struct ArrowArrayStream {
      int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
      int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
      const char* (*get_last_error)(struct ArrowArrayStream*);
      void (*release)(struct ArrowArrayStream*);
      void* private_data;
    };
    #endif
    """
    struct ArrowSchema:
        const char* format
        const char* name
        const char* metadata
        int64_t flags
        int64_t n_children
        ArrowSchema** children
        ArrowSchema* dictionary
        void (*release)(ArrowSchema*) noexcept nogil
        void* private_data

    struct ArrowArray:
        int64_t length
        int64_t null_count
        int64_t offset
        int64_t n_buffers
        int64_t n_children
        const void** buffers
        ArrowArray** children
        ArrowArray* dictionary
        void (*release)(ArrowArray*) noexcept nogil
        void* private_data

    struct ArrowArrayStream:
        int (*get_schema)(ArrowArrayStream*, ArrowSchema* out) noexcept nogil
        int (*get_next)(ArrowArrayStream*, ArrowArray* out) noexcept nogil
        const char* (*get_last_error)(ArrowArrayStream*) noexcept nogil
        void (*release)(ArrowArrayStream*) noexcept nogil
        void* private_data

cdef extern from "<errno.h>":
    const int ENOMEM

# An export is one malloc'd block: a header, then every struct of the tree
# (root first), the child pointer arrays, the buffer pointer arrays and (for
# schemas) a copy of the strings. Every struct of the tree holds one
# reference to the block, so a consumer may move children out and release
# them in any order; the capsule holds one more for the struct it points to.
# The last reference frees the block (and, for arrays, drops the Python
# object that keeps the table's memory alive, taking the GIL for that).
ctypedef struct _ExportBlock:
    uint64_t refs
    PyObject* owner           # strong reference (arrays: the table's lease), or NULL
    uint64_t _pad

ctypedef struct _SchemaDesc:  # what a nogil builder needs from a Schema
    const dod_column_info* info
    size_t ncols
    size_t nodes              # structs of a tree, root included
    size_t links              # child pointers of a tree
    const char* strings
    size_t strings_len


cdef inline void _desc_of(Schema s, _SchemaDesc* d) noexcept:
    d.info = s._info
    d.ncols = len(s.columns)
    d.nodes = s._nodes
    d.links = s._links
    d.strings = <const char*>s._strings
    d.strings_len = len(s._strings)


cdef void _unref(void* block) noexcept nogil:
    cdef _ExportBlock* b = <_ExportBlock*>block
    if dod_atomic_fetch_sub_u64(&b.refs, 1) == 1:
        if b.owner != NULL:
            with gil:
                Py_DECREF(<object>b.owner)
        free(b)


cdef void _release_schema(ArrowSchema* s) noexcept nogil:
    cdef int64_t i
    for i in range(s.n_children):
        if s.children[i].release != NULL:
            s.children[i].release(s.children[i])
    s.release = NULL
    _unref(s.private_data)


cdef void _release_array(ArrowArray* a) noexcept nogil:
    cdef int64_t i
    for i in range(a.n_children):
        if a.children[i].release != NULL:
            a.children[i].release(a.children[i])
    a.release = NULL
    _unref(a.private_data)


cdef ArrowSchema* _build_schema(const _SchemaDesc* d, uint64_t extra_refs) noexcept nogil:
    """A new ArrowSchema tree (struct of columns; vector columns as nested
    fixed-size lists); the root is returned, NULL when malloc fails."""
    cdef size_t size = sizeof(_ExportBlock) + d.nodes * sizeof(ArrowSchema) + d.links * sizeof(void*) + d.strings_len
    cdef char* mem = <char*>malloc(size)
    cdef _ExportBlock* blk = <_ExportBlock*>mem
    cdef ArrowSchema* nodes
    cdef ArrowSchema** links
    cdef ArrowSchema** slot
    cdef ArrowSchema* node
    cdef const dod_column_info* info
    cdef char* strs
    cdef size_t c, k = 1, l
    cdef int j
    if mem == NULL:
        return NULL
    blk.refs = d.nodes + extra_refs
    blk.owner = NULL
    nodes = <ArrowSchema*>(mem + sizeof(_ExportBlock))
    links = <ArrowSchema**>(nodes + d.nodes)
    strs = <char*>(links + d.links)
    memcpy(strs, d.strings, d.strings_len)
    node = &nodes[0]
    node.format = strs
    node.name = strs + 3
    node.metadata = NULL
    node.flags = 0
    node.n_children = <int64_t>d.ncols
    node.children = links
    node.dictionary = NULL
    node.release = _release_schema
    node.private_data = blk
    l = d.ncols
    for c in range(d.ncols):
        info = &d.info[c]
        slot = &links[c]
        for j in range(info.ndim + 1):
            node = &nodes[k]
            k += 1
            slot[0] = node
            node.format = strs + info.fmt_off[j]
            node.name = strs + (info.name_off if j == 0 else 4)
            node.metadata = NULL
            node.flags = 0
            node.dictionary = NULL
            node.release = _release_schema
            node.private_data = blk
            if j < info.ndim:
                node.n_children = 1
                node.children = &links[l]
                slot = &links[l]
                l += 1
            else:
                node.n_children = 0
                node.children = NULL
    return &nodes[0]


cdef ArrowArray* _build_array(const _SchemaDesc* d, char** columns, int64_t length,
                              PyObject* owner, uint64_t extra_refs) noexcept nogil:
    """A new ArrowArray tree over the table's columns (no copy): rows
    0..length-1. `owner` (a new reference the block takes over) keeps the
    memory alive. NULL when malloc fails (the reference is then not taken)."""
    cdef size_t nbufs = 1 + 2 * d.ncols + (d.links - d.ncols)
    cdef size_t size = (sizeof(_ExportBlock) + d.nodes * sizeof(ArrowArray)
                        + d.links * sizeof(void*) + nbufs * sizeof(void*))
    cdef char* mem = <char*>malloc(size)
    cdef _ExportBlock* blk = <_ExportBlock*>mem
    cdef ArrowArray* nodes
    cdef ArrowArray** links
    cdef ArrowArray** slot
    cdef ArrowArray* node
    cdef const void** bufs
    cdef const dod_column_info* info
    cdef size_t c, k = 1, l, b = 1
    cdef int64_t n
    cdef int j
    if mem == NULL:
        return NULL
    blk.refs = d.nodes + extra_refs
    blk.owner = owner
    nodes = <ArrowArray*>(mem + sizeof(_ExportBlock))
    links = <ArrowArray**>(nodes + d.nodes)
    bufs = <const void**>(links + d.links)
    node = &nodes[0]
    node.length = length
    node.null_count = 0
    node.offset = 0
    node.n_buffers = 1
    node.buffers = bufs
    bufs[0] = NULL                     # no validity bitmap: no nulls
    node.n_children = <int64_t>d.ncols
    node.children = links
    node.dictionary = NULL
    node.release = _release_array
    node.private_data = blk
    l = d.ncols
    for c in range(d.ncols):
        info = &d.info[c]
        slot = &links[c]
        n = length
        for j in range(info.ndim + 1):
            node = &nodes[k]
            k += 1
            slot[0] = node
            node.length = n
            node.null_count = 0
            node.offset = 0
            node.buffers = &bufs[b]
            node.dictionary = NULL
            node.release = _release_array
            node.private_data = blk
            bufs[b] = NULL
            if j < info.ndim:          # fixed-size list: validity only, one child
                node.n_buffers = 1
                b += 1
                node.n_children = 1
                node.children = &links[l]
                slot = &links[l]
                l += 1
                n *= info.dims[j]
            else:                      # primitive / fixed-size binary: validity, data
                node.n_buffers = 2
                bufs[b + 1] = columns[c]
                b += 2
                node.n_children = 0
                node.children = NULL
    return &nodes[0]


cdef void _schema_capsule_free(object capsule) noexcept:
    cdef ArrowSchema* s = <ArrowSchema*>PyCapsule_GetPointer(capsule, b"arrow_schema")
    if s == NULL:
        return
    # The root sits right after the block header. A consumer that moved the
    # struct out may have overwritten all of it (not just `release`), so the
    # block is found from the address, never from private_data.
    cdef void* blk = <char*>s - sizeof(_ExportBlock)
    if s.release != NULL:
        s.release(s)
    _unref(blk)


cdef void _array_capsule_free(object capsule) noexcept:
    cdef ArrowArray* a = <ArrowArray*>PyCapsule_GetPointer(capsule, b"arrow_array")
    if a == NULL:
        return
    cdef void* blk = <char*>a - sizeof(_ExportBlock)     # see _schema_capsule_free
    if a.release != NULL:
        a.release(a)
    _unref(blk)


cdef object _schema_capsule(Schema s):
    cdef _SchemaDesc d
    cdef ArrowSchema* root
    if s._info == NULL:
        raise TypeError("this Schema was never initialised (Schema.__new__ without __init__)")
    if s._unexportable is not None:
        raise TypeError(f"cannot export to Arrow: {s._unexportable}")
    _desc_of(s, &d)
    root = _build_schema(&d, 1)
    if root == NULL:
        raise MemoryError()
    try:
        return PyCapsule_New(root, b"arrow_schema", <void(*)(object) noexcept>_schema_capsule_free)
    except BaseException:
        root.release(root)
        _unref(<char*>root - sizeof(_ExportBlock))
        raise


ctypedef struct _StreamState:
    _SchemaDesc desc
    PyObject* schema          # strong reference: keeps desc's memory alive
    ArrowArray* array         # the one batch, until get_next hands it out


cdef int _stream_get_schema(ArrowArrayStream* st, ArrowSchema* out) noexcept nogil:
    cdef _StreamState* s = <_StreamState*>st.private_data
    cdef ArrowSchema* root = _build_schema(&s.desc, 0)
    if root == NULL:
        return ENOMEM
    memcpy(out, root, sizeof(ArrowSchema))      # move the root out of the block
    root.release = NULL
    return 0


cdef int _stream_get_next(ArrowArrayStream* st, ArrowArray* out) noexcept nogil:
    cdef _StreamState* s = <_StreamState*>st.private_data
    if s.array == NULL:
        out.release = NULL                      # end of stream
        return 0
    memcpy(out, s.array, sizeof(ArrowArray))
    s.array.release = NULL
    s.array = NULL
    return 0


cdef const char* _stream_last_error(ArrowArrayStream* st) noexcept nogil:
    return NULL


cdef void _stream_release(ArrowArrayStream* st) noexcept nogil:
    cdef _StreamState* s = <_StreamState*>st.private_data
    if s.array != NULL:
        s.array.release(s.array)
    with gil:
        Py_DECREF(<object>s.schema)
    free(s)
    st.release = NULL


cdef void _stream_capsule_free(object capsule) noexcept:
    cdef ArrowArrayStream* st = <ArrowArrayStream*>PyCapsule_GetPointer(capsule, b"arrow_array_stream")
    if st == NULL:
        return
    if st.release != NULL:
        st.release(st)
    free(st)


# ---------------------------------------------------------------- views: what keeps exports safe

@cython.no_gc
@cython.freelist(16)
cdef class _View:
    """Base object of column views and Arrow exports: keeps the table alive
    and counts as a live export, which blocks checked removes and clears."""
    cdef Table table

    def __dealloc__(self):
        if self.table is not None:
            self.table._views -= 1


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
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (ValueError, TypeError) as e:
        raise ValueError(f"column {col.name!r}: cannot make an array of {value!r} ({e})") from None
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
    """A fixed-capacity struct-of-arrays table with generation handles.

    Table(schema, capacity, *, resource=None)

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

    Raises ValueError for a bad capacity, MemoryError when the memory cannot
    be obtained (nothing is leaked).
    """

    def __cinit__(self, schema, capacity, *, Resource resource=None):
        cdef Schema s = schema if isinstance(schema, Schema) else Schema(schema)
        cdef size_t cap, ncols = len(s.columns), i, size, total = 0, slot_bytes
        cdef bint known_zero = False
        cdef void* p
        cap_obj = PyNumber_Index(capacity)
        if cap_obj <= 0 or cap_obj > <object>_MAX_CAPACITY:
            raise ValueError(f"capacity must be between 1 and {_MAX_CAPACITY}, got {capacity!r}")
        cap = <size_t>cap_obj
        self.schema = s
        # Sizes first (overflow-checked), then memory: one block per column
        # (a cache line in front holds the nil row) and one for the slot map.
        sizes = []
        for i in range(ncols):
            if (dod_mul_overflow(cap, s._info[i].row_bytes, &size)
                    or dod_add_overflow(size, _round_line(s._info[i].row_bytes), &size)
                    or size > (<size_t>1 << 46)):
                raise MemoryError(f"a column of {cap} rows of {s._info[i].row_bytes} bytes does not fit in memory")
            sizes.append(size)
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
        self.table.columns = <char**>PyMem_Malloc(ncols * sizeof(char*))
        self.table.row_bytes = <size_t*>PyMem_Malloc(ncols * sizeof(size_t))
        self.table.zero_on_insert = <uint8_t*>PyMem_Malloc(ncols)
        if (self._blocks == NULL or self._block_sizes == NULL or self.table.columns == NULL
                or self.table.row_bytes == NULL or self.table.zero_on_insert == NULL):
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
            self.table.row_bytes[i] = s._info[i].row_bytes
            self.table.columns[i] = <char*>self._blocks[i] + _round_line(s._info[i].row_bytes)
            self.table.zero_on_insert[i] = (<Column>s.columns[i]).zero
        p = self._blocks[ncols]
        self.table.row_slot = <dod_index*>p
        self.table.slot_row = <dod_index*>(<char*>p + _round_line(cap * sizeof(dod_index)))
        self.table.slot_gen = <dod_generation*>(<char*>self.table.slot_row + _round_line((cap + 1) * sizeof(dod_index)))
        self._mark = <uint8_t*>self.table.slot_gen + _round_line((cap + 1) * sizeof(dod_index))
        self.table.ncols = ncols
        self.table.capacity = cap
        # Each table's generations start at their own base (a Weyl sequence
        # over 32 bits), so a handle from another table fails the check.
        global _serial
        _serial += 1
        self.table.gen_base = <dod_generation>(<uint32_t>_serial * <uint32_t>0x9E3779B9u) | 1u

    def __dealloc__(self):
        cdef size_t i
        if self._blocks != NULL:
            for i in range(self._nblocks):
                dod_resource_deallocate(self._source, self._blocks[i], self._block_sizes[i], DOD_CACHE_LINE)
        PyMem_Free(self._blocks)
        PyMem_Free(self._block_sizes)
        PyMem_Free(self.table.columns)
        PyMem_Free(self.table.row_bytes)
        PyMem_Free(self.table.zero_on_insert)

    # -------------------------------------------------------- internals

    cpdef Py_ssize_t column_index(self, str name) except -1:
        """Position of column `name` in the schema (and in ``table.columns``
        of the C struct); KeyError if absent. Call it once, outside hot loops."""
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
            raise RuntimeError(f"{what} refused: another thread holds an exclusive pass over this "
                               f"table's rows ({self._exclusive_what}); wait for it to end")
        return 0

    cdef int begin_exclusive(self, str what) except -1:
        """Start an exclusive pass named `what`: from now until
        :meth:`end_exclusive`, the Python face refuses every insert, remove
        and clear (RuntimeError naming `what`), so the caller may run the
        engine on ``&self.table`` without the GIL, as the table's one writer.
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
        cdef _View v = _View.__new__(_View)
        v.table = self
        self._views += 1
        return v

    cdef object _column_array(self, Py_ssize_t c, size_t first, size_t n, object base):
        cdef dod_array_request req
        cdef Column col = self.schema.columns[c]
        cdef dod_column_info* info = &self.schema._info[c]
        cdef int j
        req.nd = 1 + info.ndim
        req.dims[0] = <cnp.npy_intp>n
        for j in range(info.ndim):
            req.dims[j + 1] = <cnp.npy_intp>info.dims[j]
        return wrap_memory(self.table.columns[c] + first * info.row_bytes, &req, <cnp.dtype>col.dtype, base)

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
            return np.ascontiguousarray(arr, dtype=np.uint64)
        if arr.dtype.kind == "i":
            if (arr < 0).any():
                raise ValueError("handles are never negative")
            return np.ascontiguousarray(arr, dtype=np.uint64)
        if arr.dtype.kind == "O" or (arr.dtype.kind == "f" and not isinstance(handles, np.ndarray)):
            # Python ints above 2**63 make numpy guess float64 or object: convert one by one.
            return np.asarray([self._handle_arg(x) for x in handles], dtype=np.uint64)
        raise TypeError(f"handles must be integers, got dtype {arr.dtype}")

    cdef object _insert(self, object values, dict named, object n_obj, bint single):
        """Validate everything, write the new rows beyond `count`, then commit."""
        cdef Schema s = self.schema
        cdef Py_ssize_t c, ncols = len(s.columns), i
        cdef Column col
        cdef size_t n, first = self.table.count, rb, k
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
            if n_py > <object>(self.table.capacity - self.table.count):
                self.table.failed += 1
                raise MemoryError(f"table full: {n_py} rows do not fit ({self.table.count} of "
                                  f"{self.table.capacity} rows in use); nothing was inserted")
            n = <size_t>n_py
        if single and self.table.count >= self.table.capacity:
            self.table.failed += 1
            raise MemoryError(f"table full ({self.table.capacity} rows); nothing was inserted")
        # Converting the values above may have run Python code (__array__,
        # __index__...) that inserted or removed rows of this very table:
        # the rows to write start at the count now, and the room checks above
        # were made against it.
        first = self.table.count
        # Write rows [first, first + n): not live yet, so a failure here changes nothing visible.
        for c in range(ncols):
            rb = self.table.row_bytes[c]
            dest = self.table.columns[c] + first * rb
            p = prepared[c]
            if p is None:
                if self.table.zero_on_insert[c]:
                    memset(dest, 0, n * rb)
                continue
            arr, mode = p
            if mode == 2 and cnp.PyArray_DIMS(<cnp.ndarray>arr)[0] == <cnp.npy_intp>n:
                memcpy(dest, cnp.PyArray_DATA(<cnp.ndarray>arr), n * rb)
                continue
            is_batch = mode != 0
            col = s.columns[c]
            if arr.dtype == col.dtype and arr.flags.c_contiguous:
                if is_batch and arr.shape[0] == n and arr.shape[1:] == col.shape:
                    src = <char*>cnp.PyArray_DATA(arr)
                    memcpy(dest, src, n * rb)
                    continue
                if not is_batch and arr.shape == col.shape:
                    src = <char*>cnp.PyArray_DATA(arr)
                    for k in range(n):
                        memcpy(dest + k * rb, src, rb)
                    continue
            np.copyto(self._column_array(c, first, n, self), arr, casting="same_kind")
        # Commit: hand out the slots.
        if single:
            return dod_table_insert_uninit(&self.table)
        out = np.empty(n, np.uint64)
        hp = <uint64_t*>cnp.PyArray_DATA(out)
        dod_table_insert_many(&self.table, n, hp)
        return out

    # -------------------------------------------------------- insert, remove, clear

    def insert(self, values=None, /, **columns):
        """Insert one row; return its handle (an int, never 0).

        ``table.insert(pos=(1, 2, 3), id=7)`` or ``table.insert({"pos": ...})``.
        Each value broadcasts to the column's row shape and converts with
        same_kind casting (Python ints fit any integer column if in range).
        Columns not given are zero if the schema says their zero is
        meaningful, unspecified otherwise.

        Raises KeyError for an unknown column, TypeError for a value that
        does not convert, ValueError for a wrong shape or a non-finite value
        in a finite column, MemoryError when the table is full. The table is
        unchanged when it raises.
        """
        return self._insert(values, columns, None, True)

    def insert_many(self, values=None, /, *, n=None, **columns):
        """Insert a batch of rows; return their handles (uint64 array, in row order).

        Values are arrays of shape ``(n, *row_shape)``, or one row that
        broadcasts to all ``n`` rows; ``values`` may also be a mapping or a
        numpy structured array. ``n`` is needed only when no value is a
        batch. Columns not given follow the zero policy (see :meth:`insert`).

        All or nothing: on any error (those of :meth:`insert`, mismatched
        batch lengths, a batch larger than the room left) nothing is inserted.
        """
        return self._insert(values, columns, n, False)

    def remove(self, handle, *, bint unchecked=False):
        """Remove the row `handle` names; the last row moves into its place.

        Raises KeyError for a nil, stale or foreign handle, BufferError while
        column views or Arrow exports are alive (unless ``unchecked``: they
        then show the moved rows). Nothing changes when it raises.
        """
        cdef dod_handle h = <dod_handle>self._handle_arg(handle)
        cdef Py_ssize_t row = dod_table_row(&self.table, h)
        if row < 0:
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        self._check_idle("remove")
        self._check_unpinned(unchecked, "remove")
        dod_table_remove_row(&self.table, <size_t>row)

    def remove_many(self, handles, *, bint unchecked=False):
        """Remove a batch of rows by handle (each moves the last row into its place).

        All or nothing: if any handle is nil, stale, foreign or repeated,
        KeyError and nothing is removed. BufferError as for :meth:`remove`.
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
                    if dod_table_row(&self.table, hp[i]) < 0 or self._mark[dod_handle_index(hp[i])]:
                        bad = i
                        break
                    self._mark[dod_handle_index(hp[i])] = 1
                for i in range(n if bad < 0 else bad):
                    self._mark[dod_handle_index(hp[i])] = 0
            if bad >= 0:
                dup = dod_table_row(&self.table, hp[bad]) >= 0
                raise KeyError(f"handle {hp[bad]:#x} (position {bad}) is "
                               + ("repeated in the batch" if dup else "nil, stale or from another table")
                               + "; nothing was removed")
            self._check_unpinned(unchecked, "remove_many")
            with nogil:
                for i in range(n):
                    dod_table_remove(&self.table, hp[i])
        finally:
            self.end_exclusive()

    def clear(self, *, bint unchecked=False):
        """Remove every row; every handle goes stale. BufferError as for :meth:`remove`."""
        self._check_idle("clear")
        self._check_unpinned(unchecked, "clear")
        dod_table_clear(&self.table)

    def exclusive(self, str what="an exclusive pass"):
        """A context manager that holds the table's exclusive pass::

            with table.exclusive("my batch"):
                ...   # e.g. a nogil loop of a Cython helper over the engine

        While it is held, :meth:`insert`, :meth:`insert_many`,
        :meth:`remove`, :meth:`remove_many` and :meth:`clear` from any thread
        raise RuntimeError naming `what`, so code inside may write rows
        through the cimport engine without the GIL. Entering raises
        RuntimeError when another pass is running (a remove_many, another
        ``exclusive()``, or a cimport user's ``begin_exclusive``). Not
        reentrant. Cython code uses ``begin_exclusive(what)`` /
        ``end_exclusive()`` directly (declared in dod/table.pxd)."""
        return _ExclusivePass(self, what)

    # -------------------------------------------------------- lookup

    def __len__(self):
        return self.table.count

    def __contains__(self, handle):
        try:
            h = self._handle_arg(handle)
        except (TypeError, ValueError):
            return False
        return dod_table_alive(&self.table, <dod_handle>h)

    def row(self, handle):
        """Row index of `handle` now (KeyError if nil, stale or foreign).

        Row indices change when rows are removed; handles do not."""
        cdef Py_ssize_t r = dod_table_row(&self.table, <dod_handle>self._handle_arg(handle))
        if r < 0:
            raise KeyError(f"handle {handle:#x} is nil, stale or from another table")
        return r

    def rows(self, handles):
        """Row index of each handle (int64 array), -1 for nil or stale ones (the fast path's answer)."""
        cdef cnp.ndarray arr = self._handles_arg(handles)
        cdef Py_ssize_t n = arr.shape[0], i
        cdef cnp.ndarray out = np.empty(n, np.int64)
        cdef uint64_t* hp = <uint64_t*>cnp.PyArray_DATA(arr)
        cdef int64_t* op = <int64_t*>cnp.PyArray_DATA(out)
        with nogil:
            for i in range(n):
                op[i] = dod_table_row(&self.table, hp[i])
        return out

    def handle(self, row):
        """Handle of live row `row` (IndexError when out of range)."""
        r = PyNumber_Index(row)
        if r < 0:
            r += self.table.count
        if r < 0 or r >= self.table.count:
            raise IndexError(f"row {row} out of range for {self.table.count} live rows")
        return dod_table_handle(&self.table, <size_t>r)

    def handles(self):
        """Handles of the live rows, in row order (a uint64 copy)."""
        cdef size_t n = self.table.count, i
        cdef cnp.ndarray out = np.empty(n, np.uint64)
        cdef uint64_t* hp = <uint64_t*>cnp.PyArray_DATA(out)
        with nogil:
            for i in range(n):
                hp[i] = dod_table_handle(&self.table, i)
        return out

    def get(self, handle, default=_NOTHING):
        """The row `handle` names as a dict of copies (numpy scalars / arrays).

        A nil, stale or foreign handle raises KeyError, or returns `default` if given."""
        cdef Py_ssize_t r = dod_table_row(&self.table, <dod_handle>self._handle_arg(handle))
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
        """Write some columns of the row `handle` names (validated as :meth:`insert`).

        KeyError for a dead handle or unknown column; nothing changes when it raises."""
        cdef Py_ssize_t r = dod_table_row(&self.table, <dod_handle>self._handle_arg(handle))
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
        r = dod_table_row(&self.table, <dod_handle>self._handle_arg(handle))
        if r < 0:
            raise KeyError(f"handle {handle:#x} was removed while its values were converted")
        for c, arr in todo:
            np.copyto(self._column_array(c, <size_t>r, 1, self), arr, casting="same_kind")

    # -------------------------------------------------------- columns

    def __getitem__(self, name):
        """``table["pos"]``: a writable numpy view of the live rows of a column,
        shape ``(len(table), *row_shape)``, zero-copy. While it is alive,
        checked removes and clears raise BufferError (see the module docs)."""
        if not isinstance(name, str):
            raise TypeError(f"index a table by column name (str); for rows use get(handle), got {type(name).__name__}")
        return self._column_array(self.column_index(name), 0, self.table.count, self._new_view())

    def __setitem__(self, name, value):
        """``table["pos"] = values``: write a whole column of the live rows (broadcasting)."""
        cdef Py_ssize_t c = self.column_index(name)
        cdef Column col = self.schema.columns[c]
        arr = _convert(value, col)
        full = (self.table.count,) + col.shape
        if not _broadcastable(arr.shape, full):
            raise ValueError(f"column {name!r} has shape {full}, cannot assign shape {arr.shape}")
        if col.finite and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
            raise ValueError(f"column {name!r} refuses NaN and infinities (finite=True)")
        np.copyto(self._column_array(c, 0, self.table.count, self), arr, casting="same_kind")

    def columns(self):
        """Every column as a view of the live rows: a dict name -> ndarray (one lease for all)."""
        base = self._new_view()
        return {(<Column>self.schema.columns[c]).name: self._column_array(c, 0, self.table.count, base)
                for c in range(len(self.schema.columns))}

    def keys(self):
        """Column names (so ``dict(table)`` and ``pandas.DataFrame(dict(...))`` work)."""
        return self.schema.names

    # -------------------------------------------------------- Arrow PyCapsule interface

    def __arrow_c_schema__(self):
        """The schema as an ``arrow_schema`` PyCapsule (Arrow C data interface):
        a struct of the columns; vector columns are (nested) fixed-size lists."""
        return _schema_capsule(self.schema)

    def __arrow_c_array__(self, requested_schema=None):
        """The live rows as a struct array: ``(arrow_schema, arrow_array)``
        PyCapsules over the table's memory (no copy).

        The export counts as a live view until the consumer releases it
        (a pyarrow batch or polars frame that still uses the memory keeps
        checked removes refused). ``requested_schema`` is ignored (the spec
        allows it; the consumer checks). TypeError for columns Arrow cannot
        hold without a copy (bool, complex, unicode, datetime...)."""
        cdef _SchemaDesc d
        cdef ArrowArray* root
        cdef Schema s = self.schema
        sc = _schema_capsule(s)
        _desc_of(s, &d)
        lease = self._new_view()
        Py_INCREF(lease)
        root = _build_array(&d, self.table.columns, <int64_t>self.table.count, <PyObject*>lease, 1)
        if root == NULL:
            Py_DECREF(lease)
            raise MemoryError()
        try:
            ac = PyCapsule_New(root, b"arrow_array", <void(*)(object) noexcept>_array_capsule_free)
        except BaseException:
            root.release(root)
            _unref(<char*>root - sizeof(_ExportBlock))
            raise
        return sc, ac

    def __arrow_c_stream__(self, requested_schema=None):
        """The live rows as an ``arrow_array_stream`` PyCapsule of one batch
        (no copy; lifetime as for :meth:`__arrow_c_array__`)."""
        cdef Schema s = self.schema
        cdef ArrowArrayStream* st
        cdef _StreamState* state
        if s._unexportable is not None:
            raise TypeError(f"cannot export to Arrow: {s._unexportable}")
        st = <ArrowArrayStream*>malloc(sizeof(ArrowArrayStream))
        state = <_StreamState*>malloc(sizeof(_StreamState))
        if st == NULL or state == NULL:
            free(st)
            free(state)
            raise MemoryError()
        _desc_of(s, &state.desc)
        lease = self._new_view()
        Py_INCREF(lease)
        state.array = _build_array(&state.desc, self.table.columns, <int64_t>self.table.count, <PyObject*>lease, 0)
        if state.array == NULL:
            Py_DECREF(lease)
            free(st)
            free(state)
            raise MemoryError()
        Py_INCREF(s)
        state.schema = <PyObject*>s
        st.get_schema = _stream_get_schema
        st.get_next = _stream_get_next
        st.get_last_error = _stream_last_error
        st.release = _stream_release
        st.private_data = state
        try:
            return PyCapsule_New(st, b"arrow_array_stream", <void(*)(object) noexcept>_stream_capsule_free)
        except BaseException:
            st.release(st)
            free(st)
            raise

    # -------------------------------------------------------- numpy structured arrays

    def to_numpy(self):
        """A copy of the live rows as a numpy structured array (dtype ``schema.dtype``)."""
        cdef Py_ssize_t c
        out = np.empty(self.table.count, dtype=self.schema.dtype)
        for c in range(len(self.schema.columns)):
            name = (<Column>self.schema.columns[c]).name
            out[name] = self._column_array(c, 0, self.table.count, self)
        return out

    @classmethod
    def from_numpy(cls, array, capacity=None, *, Resource resource=None):
        """A new table holding a copy of a structured array's records (schema from its dtype).

        ``capacity`` defaults to the number of records (at least 1)."""
        arr = np.asarray(array)
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
        """Walk the structures and verify every invariant of dod/table.pxd; raise AssertionError if one fails."""
        cdef dod_table* t = &self.table
        cdef size_t r, c, free_count = 0, rb
        cdef dod_index slot
        cdef char* nil
        assert t.count <= t.capacity, "count above capacity"
        assert t.slots_used <= t.slots_high <= t.capacity, "slots_used <= slots_high <= capacity broken"
        for r in range(t.count):
            slot = t.row_slot[r]
            assert 1 <= slot <= t.slots_used, f"row {r} maps to slot {slot} out of range"
            assert t.slot_row[slot] == r, f"slot {slot} of row {r} points to row {t.slot_row[slot]}"
        slot = t.free_head
        while slot != 0:
            assert 1 <= slot <= t.slots_used, f"free list holds slot {slot} out of range"
            assert t.slot_row[slot] & DOD_TABLE_FREE, f"free slot {slot} is not marked free"
            free_count += 1
            assert free_count <= t.slots_used, "cycle in the free list"
            slot = t.slot_row[slot] & ~DOD_TABLE_FREE
        assert free_count + t.count == t.slots_used, \
            f"{free_count} free + {t.count} live slots != {t.slots_used} used"
        for c in range(t.ncols):
            rb = t.row_bytes[c]
            nil = t.columns[c] - rb
            for r in range(rb):
                assert nil[r] == 0, f"the nil row of column {c} was written"
            assert (<uintptr_t>t.columns[c]) % DOD_CACHE_LINE == 0, f"column {c} is not 64-byte aligned"
        for r in range(t.capacity + 1):
            assert self._mark[r] == 0, "batch scratch marks left behind"

    @property
    def capacity(self):
        """Rows every column holds."""
        return self.table.capacity

    @property
    def peak(self):
        """Most live rows at once."""
        return max(self.table.peak, self.table.count)

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
        """The common statistics as a dict."""
        return {
            "capacity": self.table.capacity,
            "rows": self.table.count,
            "peak": self.peak,
            "bytes_per_row": self.schema._row_bytes,
            "nbytes": self._nbytes,
            "inserts": self.table.inserts,
            "removes": self.table.removes,
            "failed": self.table.failed,
            "views": self._views,
        }

    def __repr__(self):
        return (f"<dod.Table {len(self.schema.columns)} columns ({', '.join(self.schema.names)}) "
                f"rows={self.table.count}/{self.table.capacity} peak={self.peak} "
                f"bytes_per_row={self.schema._row_bytes} memory={fmt_bytes(self._nbytes)} "
                f"views={self._views}>")
