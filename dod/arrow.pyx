"""The Arrow C data interface, exported without copies and without pyarrow.

Builds ``ArrowSchema``, ``ArrowArray`` and ``ArrowArrayStream`` trees (a
struct of columns; vector columns as nested fixed-size lists) from a plain
description of the columns (:c:type:`dod_arrow_desc`, filled by
:class:`dod.schema.Schema`) and wraps them in the PyCapsules of the Arrow
PyCapsule interface. The one lifetime rule: an exported array holds a strong
reference to an ``owner`` object until the consumer's last release (the
table passes a view lease, so the rows' memory outlives every export).
Thread-safety: a tree may be released from any thread (the last release
takes the GIL to drop the owner).
"""
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF

from dod.atomics cimport dod_atomic_fetch_sub_u64


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


cdef ArrowSchema* _build_schema(const dod_arrow_desc* d, uint64_t extra_refs) noexcept nogil:
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


cdef ArrowArray* _build_array(const dod_arrow_desc* d, char** columns, int64_t length,
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


cdef object dod_arrow_schema_capsule(const dod_arrow_desc* d):
    cdef ArrowSchema* root = _build_schema(d, 1)
    if root == NULL:
        raise MemoryError()
    try:
        return PyCapsule_New(root, b"arrow_schema", <void(*)(object) noexcept>_schema_capsule_free)
    except BaseException:
        root.release(root)
        _unref(<char*>root - sizeof(_ExportBlock))
        raise


cdef object dod_arrow_array_capsule(const dod_arrow_desc* d, char** columns, int64_t length, object owner):
    cdef ArrowArray* root
    Py_INCREF(owner)
    root = _build_array(d, columns, length, <PyObject*>owner, 1)
    if root == NULL:
        Py_DECREF(owner)
        raise MemoryError()
    try:
        return PyCapsule_New(root, b"arrow_array", <void(*)(object) noexcept>_array_capsule_free)
    except BaseException:
        root.release(root)
        _unref(<char*>root - sizeof(_ExportBlock))
        raise


ctypedef struct _StreamState:
    dod_arrow_desc desc
    PyObject* keepalive       # strong reference: keeps desc's memory alive
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
        Py_DECREF(<object>s.keepalive)
    free(s)
    st.release = NULL


cdef void _stream_capsule_free(object capsule) noexcept:
    cdef ArrowArrayStream* st = <ArrowArrayStream*>PyCapsule_GetPointer(capsule, b"arrow_array_stream")
    if st == NULL:
        return
    if st.release != NULL:
        st.release(st)
    free(st)



cdef object dod_arrow_stream_capsule(const dod_arrow_desc* d, char** columns, int64_t length,
                                     object owner, object keepalive):
    cdef ArrowArrayStream* st = <ArrowArrayStream*>malloc(sizeof(ArrowArrayStream))
    cdef _StreamState* state = <_StreamState*>malloc(sizeof(_StreamState))
    if st == NULL or state == NULL:
        free(st)
        free(state)
        raise MemoryError()
    memcpy(&state.desc, d, sizeof(dod_arrow_desc))
    Py_INCREF(owner)
    state.array = _build_array(&state.desc, columns, length, <PyObject*>owner, 0)
    if state.array == NULL:
        Py_DECREF(owner)
        free(st)
        free(state)
        raise MemoryError()
    Py_INCREF(keepalive)
    state.keepalive = <PyObject*>keepalive
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

