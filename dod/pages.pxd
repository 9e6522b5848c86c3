# dod/pages.pxd: the page source, anonymous memory straight from the system,
# with its statistics. Every other allocator's default backing memory.
#
# not run: a fragment (p's type and the function around it left out)
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
#
# Prefaulting over threads: dod_pages_prefault faults in every page of a
# list of memory ranges now (resident from then on, contents unchanged), the
# ranges cut into DOD_PAGES_PREFAULT_PIECE pieces that `threads` threads take
# in turn. Any owner's memory can be listed: Arena.page_ranges and
# Table.page_ranges (cimport API) list theirs, as a tracker does for its
# tables and arenas before its loop.
#
# not run: a fragment (r's ranges are the caller's); tests/test_pages.py
# compiles a module that makes this call
#     from dod.pages cimport dod_page_range, dod_pages_prefault
#     cdef dod_page_range r[2]        # {base, size} each
#     cdef size_t touched
#     with nogil:
#         err = dod_pages_prefault(r, 2, 4, &touched)      # 0, or an errno
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


# ---- prefaulting over threads ---------------------------------------------

ctypedef struct dod_page_range:
    void* base                # first byte (NULL or size 0: nothing to fault)
    size_t size               # bytes

cdef enum:
    DOD_PAGES_MAX_THREADS = 256             # most threads of one prefault
    DOD_PAGES_PREFAULT_PIECE = 64 << 20     # bytes a thread faults at a time: cuts at multiples of it

# Fault every page of ranges[0:n] in for writing; 0 and *touched = the bytes
# of whole pages the ranges span, or the errno of a piece the system could
# not back (ENOMEM; EFAULT for a file mapping past its end): the pieces not
# yet started are then left, part of the memory may be resident, and
# *touched counts the pieces done. Contents never change. threads (1 ..
# DOD_PAGES_MAX_THREADS; fewer when there are fewer pieces): the calling
# thread and threads - 1 threads started for the call and joined before it
# returns, placed on the CPUs the process had when dod was first imported
# (dod.initial_cpus), not on a pin of the calling thread; a thread the
# system refuses to start leaves its share to the others. The caller keeps
# the memory mapped and unmoved meanwhile; where the kernel lacks
# MADV_POPULATE_WRITE (before Linux 5.14) pages are touched instead, and
# then no other thread may write the ranges meanwhile.
cdef int dod_pages_prefault(const dod_page_range* ranges, size_t n, int threads, size_t* touched) noexcept nogil

# `threads` as every prefault takes it: an int in [1, DOD_PAGES_MAX_THREADS]
# (ValueError otherwise, naming the argument `threads`).
cdef int dod_pages_threads(object threads) except -1
