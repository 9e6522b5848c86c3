# dod/pages.pxd: the page source, anonymous memory straight from the system,
# with its statistics. Every other allocator's default backing memory.
#
#     from dod.pages cimport PageSource, dod_pages_map, dod_pages_unmap
#     cdef PageSource src = PageSource()
#     with nogil:
#         p = dod_pages_map(&src.engine, 1 << 20, 4096)     # zero-filled
#         dod_pages_unmap(&src.engine, p, 1 << 20)
#
# Invariants
#   * Fresh pages read as zero (ZII for free) and cost nothing until touched.
#   * Sizes are rounded up to whole pages; unmap takes the size passed to map.
#   * mapped = bytes mapped and not yet unmapped (rounded), peak its maximum;
#     the counters are atomics, so the source is safe from any thread.
#   * All bytes zero (ZII) is a valid source (counters at zero).
# These are system calls (microseconds); the statistics' atomics are noise.
from libc.stdint cimport uint64_t

from dod.resource cimport dod_resource, Resource


ctypedef struct dod_page_source:
    uint64_t mapped        # bytes currently mapped through this source
    uint64_t peak          # most bytes mapped at once
    uint64_t maps          # successful map calls
    uint64_t unmaps        # unmap calls
    uint64_t failed        # map calls the system refused (or bad arguments)
    uint64_t decommits     # decommit calls


cdef size_t dod_pages_size() noexcept nogil
cdef size_t dod_pages_round(size_t size) noexcept nogil
cdef void* dod_pages_map(dod_page_source* s, size_t size, size_t alignment) noexcept nogil
cdef void dod_pages_unmap(dod_page_source* s, void* p, size_t size) noexcept nogil
cdef int dod_pages_decommit(dod_page_source* s, void* p, size_t size) noexcept nogil


cdef class PageSource:
    cdef dod_page_source engine      # the engine state; call dod_pages_* on &owner.engine
    cdef object __weakref__
