"""Schemas of struct-of-arrays tables: named columns, each a dtype and a per-row shape.

A :class:`Column` is one element dtype, a per-row shape and a zero policy;
a :class:`Schema` is an ordered, immutable set of named columns, with the C
description of each column (:c:type:`dod_column_info`) that the table sizes
its memory from and the Arrow export (``dod.arrow``) reads. Schemas are
immutable values: safe to share between threads. ``dod.table`` re-exports
both (``from dod.table import Schema, Column`` keeps working).
"""
cimport cython
from libc.string cimport memset
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.number cimport PyNumber_Index

from dod._core cimport dod_mul_overflow
from dod.arrow cimport dod_arrow_desc, dod_column_info, dod_arrow_schema_capsule

import re
from collections.abc import Mapping

import numpy as np


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

    Parameters
    ----------
    dtype : numpy dtype
        One element's dtype (no structured, subarray, object or unsized
        dtypes; native byte order).
    shape : int or tuple of int, default ()
        The per-row shape (``3`` or ``(6, 6)``; every dimension positive, at
        most 8 dimensions).
    zero : bool, default True
        The column's zero is meaningful, so inserts clear it when no value is
        given; with ``zero=False`` a row inserted without a value for it holds
        unspecified bytes (bulk inserts that always write it skip the
        clearing).
    finite : bool, default False
        The Python face refuses NaN and infinities for this column.
    order : {"C", "F"}, default "C"
        How a table stores the column's rows. ``"C"``: each row's values
        together (row ``r`` is one run of bytes). ``"F"``: component-major,
        one lane per component of the row shape (components numbered in C
        order over the shape), each lane holding every row's value of that
        component contiguously and 64-byte aligned, so that a loop over rows
        reads each component at unit stride (what SIMD across rows needs).
        A column of shape ``()`` has one component: ``"F"`` is stored, and
        reported, as ``"C"``.
    name : str, optional
        Usually given by the :class:`Schema` (its key or keyword).

    Attributes
    ----------
    name : str or None
    dtype : numpy.dtype
    shape : tuple of int
    zero : bool
    finite : bool
    order : str
        ``"C"`` or ``"F"`` (``"C"`` for a column of shape ``()``).

    Raises
    ------
    TypeError
        For a dtype that is not one, or is structured, subarray, object,
        unsized or byte-swapped; for a shape that is not an int or a tuple of
        ints; for a name that is not a str; and when ``__init__`` is called
        again on a built column.
    ValueError
        For more than 8 dimensions, a dimension that is not positive, or an
        order other than ``"C"`` and ``"F"``.

    Notes
    -----
    Thread-safety: immutable once built; any thread may use it.
    """

    def __init__(self, dtype, shape=(), *, bint zero=True, bint finite=False, name=None, order="C"):
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
        if len(shape) > DOD_SCHEMA_MAX_NDIM:
            raise ValueError(f"column {label!r}: at most {DOD_SCHEMA_MAX_NDIM} dimensions per row, got {len(shape)}")
        for d in shape:
            if d <= 0 or d > (1 << 31):
                raise ValueError(f"column {label!r}: every dimension of a row must be positive (and sane), got {shape}")
        if not isinstance(order, str):
            raise TypeError(f"column {label!r}: order is 'C' or 'F', got {type(order).__name__}")
        if order not in ("C", "F"):
            raise ValueError(f"column {label!r}: order is 'C' or 'F', got {order!r}")
        self.shape = shape
        self.zero = zero
        self.finite = finite
        # One component: its only lane is the C layout (and equal to it).
        self.order = order if shape else "C"

    cdef Column _named(self, str name):
        cdef Column c = Column.__new__(Column)
        c.name = name
        c.dtype = self.dtype
        c.shape = self.shape
        c.zero = self.zero
        c.finite = self.finite
        c.order = self.order
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
                and self.zero == o.zero and self.finite == o.finite and self.order == o.order)

    def __hash__(self):
        return hash((self.name, self.dtype, self.shape, self.zero, self.finite, self.order))

    cdef str _spec(self):
        dims = "" if not self.shape else "[" + ",".join(map(str, self.shape)) + "]"
        flags = (("" if self.zero else ", zero=False") + (", finite=True" if self.finite else "")
                 + (", order='F'" if self.order == "F" else ""))
        if flags:
            return f"{self.name}=Column({str(self.dtype)!r}, {self.shape}{flags})"
        return f"{self.name}={str(self.dtype) + dims!r}"

    def __repr__(self):
        return f"<Column {self._spec()}>"

    def __reduce__(self):
        return (_rebuild_column, (self.dtype, self.shape, self.zero, self.finite, self.name, self.order))


def _rebuild_column(dtype, shape, zero, finite, name, order="C"):
    """Unpickles a Column (a fresh object: a live Column is never rewritten);
    pickles made before columns had an order are C order."""
    return Column(dtype, shape, zero=zero, finite=finite, name=name, order=order)


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

    Parameters
    ----------
    columns : mapping or sequence of Column, optional
        A mapping ``{name: spec}`` or a sequence of named :class:`Column`
        objects (positional only). A spec is a :class:`Column`, a dtype
        (``"uint32"``, ``np.float64``), a string with a shape
        (``"float32[3]"``, ``"float64[6,6]"``) or a ``(dtype, shape)`` tuple.
    **named
        More columns, ``name=spec``. Column order is the order given.

    Attributes
    ----------
    columns : tuple of Column
        In order.

    Raises
    ------
    TypeError
        For structured, object, unsized or byte-swapped dtypes and for names
        that are not str.
    ValueError
        For duplicate or empty names, bad shapes, or no columns at all.

    Notes
    -----
    Thread-safety: immutable once built; any thread may use it.
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
        """The schema of a numpy structured dtype.

        Parameters
        ----------
        dtype : numpy dtype
            Structured; one column per field (subarray fields keep their shape).

        Returns
        -------
        Schema

        Raises
        ------
        TypeError, ValueError
            As :class:`Schema`, for a dtype that is not structured or a field it
            refuses.

        Notes
        -----
        Thread-safety: immutable once built; any thread may use it.
        """
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
        """The number of columns."""
        return len(self.columns)

    def __iter__(self):
        """The :class:`Column` objects, in order. Thread-safety: immutable; any thread."""
        return iter(self.columns)

    def __contains__(self, name):
        """``name in schema``: whether a column has that name."""
        return name in self._index

    def __getitem__(self, name):
        """``schema["pos"]``: the :class:`Column` of that name.

        Parameters
        ----------
        name : str

        Returns
        -------
        Column

        Raises
        ------
        KeyError
            If absent.

        Notes
        -----
        Thread-safety: immutable; any thread may use it.
        """
        try:
            return self.columns[self._index[name]]
        except KeyError:
            raise KeyError(f"no column {name!r}; the schema has {', '.join(self.names)}") from None

    def index(self, str name):
        """Position of column `name`.

        Parameters
        ----------
        name : str

        Returns
        -------
        int

        Raises
        ------
        KeyError
            If absent.

        Notes
        -----
        Thread-safety: immutable once built; any thread may use it.
        """
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
        """The schema as an ``arrow_schema`` PyCapsule (``pyarrow.schema(schema)``).

        Raises TypeError for columns Arrow cannot hold without a copy.
        Thread-safety: immutable; any thread may call it.
        """
        return self._arrow_schema()

    cdef void _desc(self, dod_arrow_desc* d) noexcept:
        d.info = self._info
        d.ncols = len(self.columns)
        d.nodes = self._nodes
        d.links = self._links
        d.strings = <const char*>self._strings
        d.strings_len = len(self._strings)

    cdef object _arrow_schema(self):
        cdef dod_arrow_desc d
        if self._info == NULL:
            raise TypeError("this Schema was never initialised (Schema.__new__ without __init__)")
        if self._unexportable is not None:
            raise TypeError(f"cannot export to Arrow: {self._unexportable}")
        self._desc(&d)
        return dod_arrow_schema_capsule(&d)

    def __repr__(self):
        return "Schema(" + ", ".join((<Column>c)._spec() for c in self.columns) + ")"
