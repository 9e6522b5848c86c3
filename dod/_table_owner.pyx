"""The owner of a table's memory: the base class of :class:`dod.table.Table`.

:class:`TableOwner` allocates the columns and the slot map once (from the
table's own arena or a given resource) and gives them back when it dies; it
holds the engine struct, the exclusive pass, the count of live views and
exports, and answers what needs no row data: handle lookups, the invariant
check, the statistics, the prefault. dod.table's :class:`~dod.table.Table`
adds the Python face that moves and reads rows. The contract of every
method is the one dod.table's docstring states.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t, uintptr_t
from libc.string cimport memset
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_CACHE_LINE, dod_add_overflow, dod_mul_overflow
from dod._types cimport dod_handle, dod_index, dod_generation
from dod._ndarray cimport dod_array_request, wrap_memory, wrap_strided, input_array
from dod._table_engine cimport (DOD_TABLE_FREE, DOD_TABLE_MAX_NDIM, dod_table_alive, dod_table_handle,
                                dod_table_lane, dod_table_lane_item, dod_table_row)
from dod.resource cimport dod_resource_allocate_from_python, dod_resource_deallocate
from dod.arena cimport Arena
from dod._lease cimport export_pin
from dod.pages cimport dod_pages_prefault, dod_pages_threads
from dod.schema cimport Column, dod_column_info

import os

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

# Largest capacity: slot indices are 31 bits (the high bit marks free slots).
cdef size_t _MAX_CAPACITY = (<size_t>1 << 31) - 2
cdef uint32_t _serial = 0


cdef inline size_t _round_line(size_t n) noexcept nogil:
    return (n + DOD_CACHE_LINE - 1) & ~(<size_t>DOD_CACHE_LINE - 1)


@cython.no_gc_clear
cdef class TableOwner:
    """The memory, handles, exclusive pass, invariants and statistics of a
    :class:`dod.table.Table` (its base class; construct a Table)."""

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

    # -------------------------------------------------------- the memory

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
