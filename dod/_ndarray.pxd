# dod/_ndarray.pxd: turning raw allocator memory into numpy arrays, and
# validating the (shape, dtype, alignment) requests that Python faces take.
# Shared by every allocator's Python face; not a public API.
cimport numpy as cnp

cdef enum:
    DOD_MAX_NDIM = 32

ctypedef struct dod_array_request:
    int nd
    cnp.npy_intp dims[32]      # DOD_MAX_NDIM
    size_t nbytes              # product of dims times itemsize, overflow-checked
    size_t alignment           # power of two

cdef cnp.dtype as_dtype(object dtype)
cdef int parse_request(object shape, cnp.dtype dt, object align, size_t default_align,
                       dod_array_request* out) except -1
cdef size_t parse_alignment(object align, size_t default_align) except 0
cdef object wrap_memory(void* data, const dod_array_request* req, cnp.dtype dt, object base)
cdef object wrap_strided(void* data, const dod_array_request* req, cnp.npy_intp* strides, cnp.dtype dt,
                         object base)

# The one gate for arrays a caller passes in (see _ndarray.pyx).
cpdef object input_array(object obj, object dtype, str name, int ndim=*, object trailing=*,
                         str layout=*, str casting=*)
