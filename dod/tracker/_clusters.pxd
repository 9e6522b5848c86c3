# dod/tracker/_clusters.pxd: lone pairs, union-find and grouping of the pairs (see _clusters.pyx).
from libc.stdint cimport int32_t
from dod.tracker._frame cimport _tick


cdef void _order_cluster(_tick* k, int32_t s0, int32_t s1) noexcept nogil
cdef size_t _lone_pairs(_tick* k, size_t* m_out, int nt, bint wide) noexcept nogil
cdef size_t _clusters(_tick* k, size_t m, int nt, bint wide, bint group_wide) noexcept nogil
