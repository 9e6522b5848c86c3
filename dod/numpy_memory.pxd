# dod/numpy_memory.pxd: numpy's NEP 49 data-memory handler over a dod arena.
# cimport the handler struct and the state behind it:
#
# not run: a fragment (arena is the caller's dod Arena)
#     from dod.numpy_memory cimport PyDataMem_Handler, dod_npmem, NumpyHandler
#     cdef NumpyHandler h = arena.numpy()
#     cdef dod_npmem* s = h.state          # s.handler is what numpy calls
#
# Invariants (the lifetime rule of the module; dod/numpy_memory.pyx says why)
#   * Every allocation served from the arena has one record in rec[0:n], in
#     push order, with the positions [before, end) the push took; live
#     records are exactly the entries of the hash `slots` (index + 1, 0 empty).
#   * A dead record below the top keeps its bytes [ptr, ptr + room): they lie
#     under a live record, so no checked rewind releases them, and a request
#     that fits reuses them (the few records nearest the top are looked at).
#   * rec[n - 1] is live (dead records are popped from the top at each free),
#     and *pin == rec[n - 1].end (0 when n == 0): the arena lease that *pin
#     belongs to keeps every checked rewind above the highest live array.
#   * A pointer that is not in the hash was served by `prev` (the handler in
#     force when the block was entered) and goes back to it: frees are never
#     mixed between handlers.
#   * Between begin and end (active), requests push from the arena; outside
#     they go to `prev` (counted in fallbacks), and a free only does
#     bookkeeping: it never rewinds, so it never touches memory the arena
#     has handed out again.
#   * Every field is read and written under `lock` (frees may come from any
#     thread); the lock is never held across a call into `prev` (numpy's
#     default handler may release the GIL inside).
from libc.stdint cimport uint8_t

from dod.atomics cimport dod_mutex
from dod.arena cimport Arena, dod_arena


cdef extern from "numpy/ndarraytypes.h":
    # numpy's own declarations (numpy/ndarraytypes.h, NEP 49, version 1).
    ctypedef struct PyDataMemAllocator:
        void* ctx
        # Plain C functions: numpy's own (and dod's) raise nothing and
        # may be called without the GIL.
        void* (*malloc)(void* ctx, size_t size) noexcept nogil
        void* (*calloc)(void* ctx, size_t nelem, size_t elsize) noexcept nogil
        void* (*realloc)(void* ctx, void* ptr, size_t new_size) noexcept nogil
        void (*free)(void* ctx, void* ptr, size_t size) noexcept nogil

    ctypedef struct PyDataMem_Handler:
        char name[127]
        uint8_t version
        PyDataMemAllocator allocator


ctypedef struct dod_npmem_record:
    char* ptr                  # what numpy got
    size_t size                # bytes numpy asked for (what its free passes back)
    size_t before              # arena position before the push
    size_t end                 # arena position after the push
    size_t room                # bytes from ptr to end (what a later request may reuse)
    size_t use                 # which begin..end made it (escape reports)
    bint live


ctypedef struct dod_npmem:
    PyDataMem_Handler handler  # first: the capsule's pointer is the state's
    dod_mutex lock
    dod_arena* arena           # the engine it pushes into (its owner is kept alive)
    PyDataMemAllocator prev    # where requests that do not fit go
    size_t align               # alignment of every array served (power of two, >= 16)
    size_t floor               # arena position when the current use began
    size_t use                 # uses begun so far
    bint active
    dod_npmem_record* rec
    size_t n, cap
    size_t* slots              # open-addressing hash of live records by ptr
    size_t mask                # slots has mask + 1 entries (a power of two)
    size_t hashed
    size_t* pin                # end word of the arena lease this state holds
    void* refs                 # owned tuple (arena, lease, prev capsule), released with the capsule
    # statistics
    size_t allocations         # requests served from the arena (reallocs that moved included)
    size_t fallbacks           # requests sent to prev (did not fit, or outside a use)
    size_t fallback_live       # prev's allocations not yet freed
    size_t frees               # frees of arena allocations
    size_t reallocs            # reallocs of arena allocations (in place or moved)
    size_t live                # live arena allocations
    size_t live_bytes          # bytes numpy asked for, live
    size_t peak_bytes          # highest live_bytes


cdef class NumpyHandler:
    cdef dod_npmem* state          # owned by the capsule (freed when it and every array are gone)
    cdef object capsule            # the "mem_handler" capsule numpy stores in each array
    cdef readonly Arena arena
    cdef bint entered
    cdef bint exited
    cdef readonly list escaped     # (position, nbytes) of arrays alive at the last end
    cdef size_t started            # the use this object's block began

    cdef int _begin(self) except -1
    cdef int _end(self, bint report) except -1
