# dod/guard.pxd: the guard-zone wrapper, a debugging allocator that makes
# memory stomps fault where they happen.
#
# not run: it writes past the end on purpose and dies of SIGSEGV;
# tests/test_guard.py checks that fault in a child process
#     from dod.guard cimport GuardedResource, dod_guard_allocate, dod_guard_deallocate
#     cdef GuardedResource g = GuardedResource()
#     with nogil:
#         p = dod_guard_allocate(&g.engine, 100, 16)
#         (<char*>p)[100 + 12] = 1     # SIGSEGV: the page after p's end is PROT_NONE
#
# Layout of one allocation (right-aligned, the default):
# not run: a diagram of the pages around one allocation
#     [ data pages ............ | ptr .. ptr+size ][ guard page: PROT_NONE ]
#   ptr = guard - round_up(size, alignment), so the first byte past the end
#   faults when size is a multiple of the alignment; otherwise up to
#   alignment - 1 bytes of slack sit before the guard. Left-aligned (side
#   "left"): [ guard page ][ ptr .. ] so an underrun faults instead.
# Freed allocations are made PROT_NONE entirely and kept in a quarantine ring
# (default 64 entries); a use after free faults until the allocation leaves
# the ring (the oldest goes back to the upstream resource when a new one
# arrives). Every allocation costs at least two pages and two or three
# system calls: this is for hunting bugs, not for production.
#
# Engine contract: alignment is a power of two <= page size; deallocate gets
# the size and alignment passed to allocate; the upstream resource returns
# page-aligned memory when asked for page alignment (pages and malloc do).
from libc.stdint cimport uint64_t

from dod.atomics cimport dod_mutex
from dod.resource cimport dod_resource, Resource


ctypedef struct dod_guard:
    const dod_resource* upstream   # where regions come from (pages by default)
    size_t page                    # system page size
    bint left                      # guard page before the data instead of after
    size_t quarantine              # ring capacity (0: freed regions go back at once)
    void** q_region                # ring of quarantined regions (oldest at q_head)
    size_t* q_length
    size_t q_head
    size_t q_count
    dod_mutex lock                 # quarantine ring and counters
    uint64_t allocations
    uint64_t frees
    uint64_t failed
    uint64_t in_use                # bytes requested by live allocations
    uint64_t mapped                # bytes of regions held: live + quarantined, guard pages included
    uint64_t peak                  # most bytes of regions held at once
    uint64_t quarantined           # bytes of regions in the ring


cdef void* dod_guard_allocate(dod_guard* g, size_t size, size_t alignment) noexcept nogil
cdef void dod_guard_deallocate(dod_guard* g, void* p, size_t size, size_t alignment) noexcept nogil
cdef void dod_guard_flush(dod_guard* g) noexcept nogil


cdef class GuardedResource:
    cdef dod_guard engine            # call dod_guard_* on &owner.engine (any thread)
    cdef object _upstream_owner      # the resource's owner, held directly (see the .pyx)
    cdef Resource _upstream
    cdef bint _ready
    cdef object __weakref__
