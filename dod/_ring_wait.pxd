# dod/_ring_wait.pxd: how a side of the ring waits (internal): the engine's
# spin-then-sleep slow path, under dod_ring_wait_write/_read (dod/ring.pyx),
# and the Python face's wait in chunks with the GIL released, under
# Ring.acquire_write/acquire_read. dod/ring.pxd states the protocol (the
# flags, the epoch word, the fences) that these keep. They work on the
# engine's struct (dod/_ring_engine.pxd) and the fields of the Python face
# they are handed, so that dod.ring imports this module and not the reverse.
from libc.stdint cimport uint64_t, int64_t

from dod.atomics cimport dod_atomic_fetch_add_relaxed_u64
from dod._ring_engine cimport dod_ring, dod_ring_slot, DOD_RING_TIMEOUT, DOD_RING_CLOSED


cdef enum:
    # A side of the Python face, as Ring._wstate / Ring._rstate hold it.
    _IDLE = 0
    _WAITING = 1
    _HOLDING = 2


# The statistics counters: each is bumped by one side's thread, without the
# GIL, while stats() may read it from any other thread, so both go through
# relaxed atomics (each read sees a value the counter had; they order
# nothing else). Only the slow paths count, so the locked add costs nothing
# that matters.
cdef inline void _count(uint64_t* counter) noexcept nogil:
    dod_atomic_fetch_add_relaxed_u64(counter, 1)


cdef inline void _count_write_failure(dod_ring* r, int rc) noexcept nogil:
    if rc == DOD_RING_TIMEOUT or rc == DOD_RING_CLOSED:
        _count(&r.write_failed)


cdef inline void _count_read_failure(dod_ring* r, int rc) noexcept nogil:
    if rc == DOD_RING_TIMEOUT:       # the end of the stream is not a failure
        _count(&r.read_failed)


cdef int _wait(dod_ring* r, bint writer, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil

# state and thread: the waiting side's (Ring._wstate and _wthread for the
# producer); other_state and other_thread: the other side's; ring: the
# owner, for its state() in the StallError's message.
cdef int _acquire(dod_ring* r, bint writer, int* state, unsigned long* thread, const int* other_state,
                  const unsigned long* other_thread, object ring, object timeout, object stall,
                  dod_ring_slot** s) except -1
