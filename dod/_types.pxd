# dod/_types.pxd: the fixed-width types used across dod (no numpy headers).
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t

# A handle: low 32 bits slot index, high 32 bits generation. 0 is nil.
ctypedef uint64_t dod_handle
ctypedef uint32_t dod_index
ctypedef uint32_t dod_generation

cdef inline dod_handle dod_handle_make(dod_index index, dod_generation gen) noexcept nogil:
    return (<uint64_t>gen << 32) | <uint64_t>index

cdef inline dod_index dod_handle_index(dod_handle h) noexcept nogil:
    return <dod_index>(h & 0xFFFFFFFFu)

cdef inline dod_generation dod_handle_generation(dod_handle h) noexcept nogil:
    return <dod_generation>(h >> 32)
