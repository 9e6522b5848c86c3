"""Raw memory to numpy arrays, validation of array requests, and the one
gate for the arrays callers pass in (internal).

Every Python face in dod carves arrays the same way: validate the request
(shape, dtype, alignment) completely before touching the allocator, so a bad
request leaves it unchanged; then wrap the memory in an ndarray whose base is
an object that keeps the memory alive.

Every public entry point that takes numeric arrays (tracker ticks and
sensors, assignment, metrics, tables, rings, arenas) reads them through
:func:`input_array`: one place that checks (or converts) dtype, byte order,
alignment, contiguity and shape, with one set of error messages.
"""
cimport numpy as cnp
from cpython.long cimport PyLong_Check
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject, PyTypeObject
from cpython.number cimport PyNumber_Index, PyNumber_AsSsize_t
from libc.stdint cimport uintptr_t

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


cdef object wrap_strided(void* data, const dod_array_request* req, cnp.npy_intp* strides, cnp.dtype dt,
                         object base):
    """A writable, aligned ndarray over *data* with the given byte strides
    (a table's F-order column: the rows' values lie across lanes); numpy
    works out its contiguity flags. Base as for wrap_memory."""
    Py_INCREF(dt)
    arr = PyArray_NewFromDescr(<PyTypeObject*>cnp.ndarray, dt, req.nd, <cnp.npy_intp*>req.dims, strides, data,
                               cnp.NPY_ARRAY_WRITEABLE | cnp.NPY_ARRAY_ALIGNED, NULL)
    cnp.set_array_base(<cnp.ndarray>arr, base)
    return arr


# ---------------------------------------------------------------- the input gate

cdef str _shape_spec(int ndim, object trailing):
    """"(n, 2)"-style description of the shapes a gate accepts."""
    if ndim < 0:
        return "any shape"
    if ndim == 0:
        return "shape ()"
    cdef list parts = ["n"] * ndim
    cdef Py_ssize_t i, nt = len(trailing)
    for i in range(nt):
        if trailing[i] >= 0:
            parts[ndim - nt + i] = str(trailing[i])
    return "shape (" + ", ".join(parts) + ("," if ndim == 1 else "") + ")"


cdef inline bint _aligned(cnp.ndarray a) noexcept:
    # numpy's own ALIGNED flag: the data pointer and every stride are
    # multiples of the dtype's alignment.
    return cnp.PyArray_ISALIGNED(a)


cdef bint _shape_ok(cnp.ndarray a, int ndim, object trailing) except -1:
    cdef int nd = cnp.PyArray_NDIM(a), i, nt
    if ndim < 0:
        return True
    if nd != ndim:
        return False
    if trailing is None:
        return True
    if PyLong_Check(trailing):
        return nd >= 1 and (<Py_ssize_t>trailing < 0 or cnp.PyArray_DIMS(a)[nd - 1] == <Py_ssize_t>trailing)
    nt = len(trailing)
    if nt > nd:
        return False
    for i in range(nt):
        if trailing[i] >= 0 and cnp.PyArray_DIMS(a)[nd - nt + i] != <Py_ssize_t>trailing[i]:
            return False
    return True


cpdef object input_array(object obj, object dtype, str name, int ndim=-1, object trailing=None,
                         str layout="c", str casting="same_kind"):
    """`obj` as an ndarray a dod entry point can read, or a clear exception.

    dtype : the dtype the entry point reads (native byte order is meant), or
        None for "its own dtype" (any dtype without Python objects).
    name : the argument's name, for the messages.
    ndim : the number of dimensions required (-1: any).
    trailing : None, an int (the size of the last axis) or a tuple of sizes
        of the last axes (-1: any size).
    layout :
        "c" (default): the array returned is native-endian, aligned and
        C-contiguous, of exactly `dtype`: `obj` itself when it already is
        (no copy, no allocation), else one converted copy (array-likes,
        other dtypes that cast under `casting`, byte-swapped, misaligned or
        strided arrays).
        "any": `obj` as an array of any layout and byte order whose dtype
        casts to `dtype` under `casting` (the caller copies it with numpy,
        which handles every layout); no copy is made here.
        "strict": `obj` must already be an ndarray of exactly `dtype`,
        native-endian, aligned and C-contiguous; nothing is converted.
        "out": as "strict", and writable (an output the caller fills).
    casting : numpy's casting rule from the given dtype to `dtype`.

    Raises TypeError for None, an object (or otherwise non-numeric) dtype,
    a dtype that does not cast, a non-array where one is required ("strict",
    "out") and a byte-swapped array there; ValueError for a wrong number of
    dimensions or a wrong shape (0-d included), an array-like numpy cannot
    make rectangular, a misaligned or non-contiguous array where "strict"
    or "out" refuses it, and a read-only array given as an output. Nothing
    the caller owns is changed.
    """
    cdef cnp.ndarray a
    cdef cnp.dtype want = None, have
    # The fast path (a tick per scan takes it): an array already as read.
    if dtype is not None and cnp.PyArray_Check(obj):
        a = <cnp.ndarray>obj
        want = as_dtype(dtype)
        if ((<void*>cnp.PyArray_DESCR(a) == <void*>want or cnp.PyArray_EquivTypes(a.descr, want))
                and cnp.PyArray_ISNOTSWAPPED(a) and cnp.PyArray_ISALIGNED(a) and cnp.PyArray_IS_C_CONTIGUOUS(a)
                and _shape_ok(a, ndim, trailing) and (layout != "out" or cnp.PyArray_ISWRITEABLE(a))
                and (layout == "c" or layout == "any" or layout == "strict" or layout == "out")):
            return a
        want = None
    if layout != "c" and layout != "any" and layout != "strict" and layout != "out":
        raise ValueError(f"layout must be 'c', 'any', 'strict' or 'out', not {layout!r}")
    if dtype is not None:
        want = as_dtype(dtype)
        if not want.isnative:
            want = want.newbyteorder("=")
    if obj is None:
        raise TypeError(f"{name} must be an array" + (f" of {want}" if want is not None else "") + ", not None")
    if cnp.PyArray_Check(obj):
        a = <cnp.ndarray>obj
    elif layout == "strict" or layout == "out":
        raise TypeError(f"{name} must be a numpy array" + (f" of {want}" if want is not None else "")
                        + f", not {type(obj).__name__}")
    else:
        try:
            a = np.asarray(obj)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{name}: cannot make an array of this {type(obj).__name__} ({e})") from None
    have = <cnp.dtype>a.descr
    if have.hasobject:
        raise TypeError(f"{name} holds Python objects (dtype {have}); "
                        + (f"it must hold numbers convertible to {want}" if want is not None
                           else "dod reads raw bytes only"))
    if want is None:
        as_dtype(have)                          # the itemsize check, one message
        want = have if have.isnative else have.newbyteorder("=")
    elif not cnp.PyArray_EquivTypes(have, want):
        if layout == "strict" or layout == "out":
            if have.isnative or not cnp.PyArray_EquivTypes(have.newbyteorder("="), want):
                raise TypeError(f"{name} must be {want}, not {have}")
            raise TypeError(f"{name} is byte-swapped ({have.str}, not the machine's {want.str}): "
                            f"pass {name}.astype({want.name!r}) (a native-endian copy)")
        if have.kind not in "biuf" and not (have.kind == "c" and want.kind == "c") \
                or not np.can_cast(have, want, casting):
            raise TypeError(f"{name} must hold numbers that convert to {want} ({casting} casting), "
                            f"not {have}")
    # shape
    if not _shape_ok(a, ndim, trailing):
        if trailing is None:
            trailing = ()
        elif PyLong_Check(trailing):
            trailing = (trailing,)
        raise ValueError(f"{name} must have {_shape_spec(ndim, trailing)}, not {(<object>a).shape}"
                         + (" (a 0-d array)" if cnp.PyArray_NDIM(a) == 0 else ""))
    if layout == "any":
        return a
    if cnp.PyArray_EquivTypes(have, want) and _aligned(a) and cnp.PyArray_IS_C_CONTIGUOUS(a):
        if layout == "out" and not cnp.PyArray_ISWRITEABLE(a):
            raise ValueError(f"{name} is read-only; an output must be writable")
        return a
    if layout == "strict" or layout == "out":
        if not _aligned(a):
            raise ValueError(f"{name} is misaligned for {want} (its data does not start on a multiple "
                             f"of {want.alignment} bytes): pass np.array({name}), an aligned copy")
        raise ValueError(f"{name} must be C-contiguous: pass np.ascontiguousarray({name})")
    out = np.empty((<object>a).shape, want)
    np.copyto(out, a, casting="unsafe")        # (the cast was checked above)
    return out
