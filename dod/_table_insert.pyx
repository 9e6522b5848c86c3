"""The value gate of a table's Python face, and the insert that uses it.

Values given by name are checked and converted to each column's dtype and
row shape (same_kind casting; integers to any integer column when every
value fits), then written into the rows beyond the table's count and
committed: all or nothing (:meth:`dod.table.Table.insert`,
:meth:`~dod.table.Table.insert_many`). :meth:`~dod.table.Table.update` and
item assignment convert through the same gate.
"""
cimport numpy as cnp
from libc.stdint cimport uint64_t
from libc.string cimport memcpy
from cpython.number cimport PyNumber_Index

from dod._ndarray cimport input_array
from dod._table_engine cimport (_put_lanes, dod_table_insert_many, dod_table_insert_uninit,
                                dod_table_zero_cells)
from dod.schema cimport Schema, dod_column_info

from collections.abc import Mapping

import numpy as np

cnp.import_array()


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




cdef object _insert(TableOwner self, object values, dict named, object n_obj, bint single):
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
