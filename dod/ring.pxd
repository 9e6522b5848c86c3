# dod/ring.pxd: the bounded single-producer single-consumer ring of fixed
# slots (engine: C struct + inline nogil functions) and its owner, Ring.
# cimport it to hand slots between a producer thread and a consumer (a nogil
# tick) without the GIL and without allocating:
#
# not run: a fragment (ring, n, t and dt are the caller's);
# tests/test_ring.py compiles a producer that makes these calls
#     from dod.ring cimport Ring, dod_ring_slot, dod_ring_acquire_write, dod_ring_commit
#     cdef dod_ring_slot* s
#     with nogil:
#         if dod_ring_acquire_write(&ring.engine, -1, &s) == DOD_RING_OK:
#             rows = <double*>dod_ring_rows(s)      # fill up to engine.max_rows rows
#             s.count = n; s.time = t; s.dt = dt
#             dod_ring_commit(&ring.engine)
#
# Invariants
#   * head counts slots committed, tail slots released, since creation; both
#     only grow; 0 <= head - tail <= nslots. Slot k (the k-th committed, from
#     0) lives at index k % nslots (widx == head % nslots, ridx == tail %
#     nslots) and its header's seq is k from its commit until its release.
#   * Only the producer writes head, widx, tail_seen and the slot at widx;
#     only the consumer writes tail, ridx, head_seen. head is published with a
#     release store after the slot's bytes, and read with an acquire load
#     (the same for tail), so a consumer that sees head > k sees slot k's
#     bytes. The producer's and the consumer's words sit 128 bytes apart
#     (two cache lines: also apart for the adjacent-line prefetcher).
#   * Each slot is a 64-byte header (dod_ring_slot) followed by max_rows rows
#     of row_bytes, padded to 64 bytes: stride = 64 + round64(max_rows *
#     row_bytes). All slots are one block taken once from a dod Resource.
#   * closed goes 0 -> 1 once. After it: acquire_write fails (CLOSED); the
#     consumer still reads every slot committed before, then gets CLOSED
#     (end of stream).
#   * A waiting side raises its flag (wait_read: the consumer, on empty;
#     wait_write: the producer, on full) with a seq_cst exchange, reads
#     `epoch`, re-checks its condition and sleeps on epoch (futex). Commit
#     (release) publishes, fences, and when wait_read (wait_write) is up,
#     takes it down with an exchange, bumps epoch and wakes: with the fences
#     on both sides no wake-up is lost, and a side that is already being
#     woken costs the other side no further system call. close wakes both.
#   * The four statistics counters (write_waits, write_failed, read_waits,
#     read_failed) change only on the slow paths, through relaxed atomic adds,
#     and are read with relaxed loads: stats() may read them from any thread.
#   * All bytes zero (ZII) is a ring of no slots: every try fails cleanly.
#
# Engine contract (checks the caller owns on this fast path): exactly one
# thread produces (acquire_write/commit) and one consumes (acquire_read/
# release) at a time; commit only after a successful acquire_write, release
# only after a successful acquire_read; count <= max_rows; the owner outlives
# every thread using its engine. Mixing the Python face and the engine on the
# same side is the caller's business; one side each (a Python producer
# thread, a nogil consumer) is fine.
from libc.stdint cimport uint32_t, uint64_t, int64_t

from dod.atomics cimport (dod_atomic_load_u64, dod_atomic_store_u64, dod_atomic_load_u32,
                          dod_atomic_exchange_u32, dod_atomic_fence)
# The engine (dod/_ring_engine.pxd: the codes, the structs and the inline
# functions that neither wait nor wake): declared there, cimported from here.
from dod._ring_engine cimport (DOD_RING_OK, DOD_RING_TIMEOUT, DOD_RING_CLOSED, DOD_RING_INTERRUPTED,
                              DOD_RING_HEADER, dod_ring_slot, dod_ring, dod_ring_slot_at, dod_ring_rows,
                              dod_ring_try_write, dod_ring_try_read)


# Slow paths: named functions in ring.pyx, never inlined into the fast path.
cdef int dod_ring_wait_write(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil
cdef int dod_ring_wait_read(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil
cdef void dod_ring_wake(dod_ring* r) noexcept nogil          # bump epoch, wake every waiter
cdef void dod_ring_close(dod_ring* r) noexcept nogil


cdef inline void dod_ring_notify(dod_ring* r, uint32_t* flag) noexcept nogil:
    # The fence orders the counter just published before the read of the
    # other side's flag (a waiter orders raising it before its re-check).
    dod_atomic_fence()
    if dod_atomic_load_u32(flag) != 0 and dod_atomic_exchange_u32(flag, 0) != 0:
        dod_ring_wake(r)


cdef inline int dod_ring_acquire_write(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil:
    """Producer: a free slot in *out. timeout_ns < 0 waits for ever, 0 tries.
    DOD_RING_OK, TIMEOUT, CLOSED or INTERRUPTED (*out NULL unless OK)."""
    out[0] = dod_ring_try_write(r)
    if out[0] != NULL:
        return DOD_RING_OK
    return dod_ring_wait_write(r, timeout_ns, out)


cdef inline void dod_ring_commit(dod_ring* r) noexcept nogil:
    """Producer: hand the slot from acquire_write to the consumer (sets its seq)."""
    cdef uint64_t h = r.head
    dod_ring_slot_at(r, r.widx).seq = h
    r.widx += 1
    if r.widx == r.nslots:
        r.widx = 0
    dod_atomic_store_u64(&r.head, h + 1)
    dod_ring_notify(r, &r.wait_read)


cdef inline int dod_ring_acquire_read(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil:
    """Consumer: the oldest committed slot in *out. timeout_ns < 0 waits for
    ever, 0 tries. DOD_RING_OK, TIMEOUT, CLOSED (end of stream: closed and
    drained) or INTERRUPTED."""
    out[0] = dod_ring_try_read(r)
    if out[0] != NULL:
        return DOD_RING_OK
    return dod_ring_wait_read(r, timeout_ns, out)


cdef inline void dod_ring_release(dod_ring* r) noexcept nogil:
    """Consumer: give the slot from acquire_read back to the producer."""
    cdef uint64_t t = r.tail
    r.ridx += 1
    if r.ridx == r.nslots:
        r.ridx = 0
    dod_atomic_store_u64(&r.tail, t + 1)
    dod_ring_notify(r, &r.wait_write)


cdef inline uint64_t dod_ring_size(dod_ring* r) noexcept nogil:
    """Slots committed and not yet released (a snapshot from any thread)."""
    cdef uint64_t t = dod_atomic_load_u64(&r.tail)
    return dod_atomic_load_u64(&r.head) - t


cdef class Slot:
    cdef dod_ring_slot* header
    cdef readonly bint writable
    cdef bint active                 # held through the Python face right now
    cdef object _data                # ndarray (max_rows, *row_shape)
    cdef object _rows                # ndarray (count, *row_shape): its length is set while no one else sees it
    cdef object _lease               # the base of both arrays (and of every view derived from them)
    cdef readonly Py_ssize_t index
    cdef size_t max_rows

    cdef int _need_active(self) except -1
    cdef bint _shared(self) noexcept
    cdef int _set_length(self, size_t n) except -1


cdef class Ring:
    cdef dod_ring engine
    cdef object _memory              # the block of slots (keeps it alive for views)
    cdef readonly size_t slots
    cdef readonly size_t rows
    cdef readonly tuple row_shape
    cdef readonly object dtype
    cdef list _writers               # Slot faces, writable
    cdef list _readers               # Slot faces, read-only
    cdef int _wstate                 # Python producer: 0 idle, 1 waiting, 2 holding a slot
    cdef int _rstate                 # Python consumer: the same
    cdef Slot _wslot
    cdef Slot _rslot
    cdef object _wctx
    cdef object _rctx
    cdef size_t peak_slots           # most slots in flight seen at a commit by the Python face or at stats()
    cdef unsigned long _wthread      # the Python producer's thread id while it waits or holds (0: none)
    cdef unsigned long _rthread      # the Python consumer's, the same

    cdef Slot _held_write(self, str what)
