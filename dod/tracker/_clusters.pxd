# dod/tracker/_clusters.pxd: lone pairs, union-find and grouping of the pairs (see _clusters.pyx).
from libc.stdint cimport int32_t
from dod.tracker._frame cimport _tick


cdef inline int32_t _find(int32_t* parent, int32_t i) noexcept nogil:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i

cdef void _unite_part(_tick* k, const int32_t* nl, size_t i0, size_t i1) noexcept nogil
cdef void _roots_part(_tick* k, const int32_t* nl, int32_t* cl, size_t i0, size_t i1) noexcept nogil
cdef void _order_cluster(_tick* k, int32_t s0, int32_t s1) noexcept nogil
cdef size_t _group_parts(_tick* k, const int32_t* nl, int32_t* cl, size_t m, const size_t* i_at,
                         int nt) noexcept nogil
cdef size_t _lone_pairs(_tick* k, int32_t* nl, size_t* m_out, int nt) noexcept nogil
cdef size_t _lone_pairs_parts(_tick* k, int32_t* nl, size_t* m_out, int nt) noexcept nogil
