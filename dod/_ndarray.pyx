"""Raw memory to numpy arrays, and validation of array requests (internal).

Every Python face in dod carves arrays the same way: validate the request
(shape, dtype, alignment) completely before touching the allocator, so a bad
request leaves it unchanged; then wrap the memory in an ndarray whose base is
an object that keeps the memory alive.
"""
cimport numpy as cnp
from cpython.long cimport PyLong_Check
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject, PyTypeObject
from cpython.number cimport PyNumber_Index, PyNumber_AsSsize_t

from dod._core cimport dod_is_pow2, dod_mul_overflow

import numpy as np

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    # Declared here because numpy's pxd comments it out. Steals `descr`.
    object PyArray_NewFromDescr(PyTypeObject* subtype, cnp.dtype descr, int nd,
                                cnp.npy_intp* dims, cnp.npy_intp* strides, void* data,
                                int flags, PyObject* obj)

# Largest array in bytes numpy can index (PY_SSIZE_T_MAX).
cdef size_t _MAX_BYTES = <size_t>(<size_t>-1 >> 1)
cdef dict _DTYPE_CACHE = {}


cdef cnp.dtype _checked_dtype(object dtype):
    cdef cnp.dtype dt = np.dtype(dtype)
    if dt.hasobject:
        raise TypeError(
            f"dtype {dt} holds Python object references; dod memory is raw bytes "
            "that the garbage collector cannot see, so object dtypes are refused")
    if dt.itemsize == 0:
        raise TypeError(f"dtype {dt} has no size (give a length, e.g. 'S8' or 'U4')")
    return dt


cdef cnp.dtype as_dtype(object dtype):
    """A validated dtype: no Python objects inside, itemsize > 0."""
    if isinstance(dtype, cnp.dtype) and not (<cnp.dtype>dtype).hasobject and (<cnp.dtype>dtype).itemsize:
        return <cnp.dtype>dtype
    try:
        cached = _DTYPE_CACHE.get(dtype)
    except TypeError:          # unhashable dtype-like (a list spec): no cache
        return _checked_dtype(dtype)
    if cached is not None:
        return <cnp.dtype>cached
    dt = _checked_dtype(dtype)
    if len(_DTYPE_CACHE) < 256:
        _DTYPE_CACHE[dtype] = dt
    return dt


cdef size_t parse_alignment(object align, size_t default_align) except 0:
    if align is None:
        return default_align
    cdef object a = PyNumber_Index(align)
    if a <= 0 or a > (1 << 30) or not dod_is_pow2(<size_t>a):
        raise ValueError(f"alignment must be a power of two between 1 and 2**30, got {align!r}")
    return <size_t>a


cdef inline int _set_dim(dod_array_request* out, int i, object n) except -1:
    cdef Py_ssize_t v = PyNumber_AsSsize_t(n if PyLong_Check(n) else PyNumber_Index(n), OverflowError)
    if v < 0:
        raise ValueError(f"negative dimension {v} in shape")
    out.dims[i] = <cnp.npy_intp>v
    return 0


cdef int parse_request(object shape, cnp.dtype dt, object align, size_t default_align,
                       dod_array_request* out) except -1:
    """Fill *out* from (shape, dtype, align); raises without side effects."""
    cdef Py_ssize_t i, nd
    cdef size_t nbytes = <size_t>dt.itemsize
    if PyLong_Check(shape):
        out.nd = 1
        _set_dim(out, 0, shape)
    else:
        if not PyTuple_Check(shape):
            try:
                shape = tuple(shape)
            except TypeError:
                raise TypeError(f"shape must be an int or a sequence of ints, got {type(shape).__name__}") from None
        nd = PyTuple_GET_SIZE(shape)
        if nd > DOD_MAX_NDIM:
            raise ValueError(f"at most {DOD_MAX_NDIM} dimensions, got {nd}")
        out.nd = <int>nd
        for i in range(nd):
            _set_dim(out, <int>i, <object>PyTuple_GET_ITEM(shape, i))
    for i in range(out.nd):
        if dod_mul_overflow(nbytes, <size_t>out.dims[i], &nbytes) or nbytes > _MAX_BYTES:
            raise MemoryError(f"an array of shape {shape} and dtype {dt} does not fit in memory")
    out.nbytes = nbytes
    # Default alignment: the caller's default, or the dtype's when larger.
    if align is None and <size_t>dt.alignment > default_align and dod_is_pow2(<size_t>dt.alignment):
        default_align = <size_t>dt.alignment
    out.alignment = parse_alignment(align, default_align)
    return 0


cdef object wrap_memory(void* data, const dod_array_request* req, cnp.dtype dt, object base):
    """A C-contiguous, writable ndarray over *data* whose base is *base*."""
    Py_INCREF(dt)          # PyArray_NewFromDescr steals a reference to the descr
    arr = PyArray_NewFromDescr(<PyTypeObject*>cnp.ndarray, dt, req.nd,
                               <cnp.npy_intp*>req.dims, NULL, data, cnp.NPY_ARRAY_CARRAY, NULL)
    cnp.set_array_base(<cnp.ndarray>arr, base)
    return arr
