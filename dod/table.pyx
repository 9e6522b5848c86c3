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
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint64_t, int64_t
from cpython.mem cimport PyMem_Malloc, PyMem_Free

from dod.arrow cimport dod_arrow_desc, dod_arrow_array_capsule, dod_arrow_stream_capsule
from dod._ndarray cimport input_array
from dod._table_insert cimport _broadcastable, _convert, _insert

import numpy as np

from dod.schema import _rebuild_column      # old pickles of a Column name dod.table._rebuild_column

cnp.import_array()


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


_NOTHING = object()


# ---------------------------------------------------------------- the Python face

@cython.no_gc_clear
cdef class Table(TableOwner):
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
        return _insert(self, values, columns, None, True)

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
        return _insert(self, values, columns, n, False)

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

    # -------------------------------------------------------- lookup and update

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



# Column and Schema live in dod.schema; `from dod.table import Schema, Column` keeps working.
globals().update(Column=Column, Schema=Schema)