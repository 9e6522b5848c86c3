"""Kernels for dod.bench.ring: the ring's engine driven from nogil loops, timed in C.

One item = acquire a slot, write `width` doubles into it (a scan's payload:
nothing is optimised away), commit; on the other side acquire, read the
payload into a checksum, release.

The two-thread kernels take a per-wait timeout so that a stalled hand-off
ends with a diagnosis instead of hanging its caller: each returns the code
of the wait that ended it (DOD_RING_OK or CLOSED when the stream ran out,
TIMEOUT when nothing came, LOST_WAKE_UP when what it waited for was there
when the timeout ended: the other side published and the wake never came).
"""
from libc.stdint cimport uint64_t, int64_t
from dod.bench._timing cimport now_ns_u64
from dod.ring cimport (Ring, dod_ring, dod_ring_slot, dod_ring_acquire_write, dod_ring_commit,
                       dod_ring_acquire_read, dod_ring_release, dod_ring_rows, dod_ring_close,
                       dod_ring_try_write, dod_ring_try_read,
                       DOD_RING_OK, DOD_RING_TIMEOUT, DOD_RING_CLOSED, DOD_RING_INTERRUPTED)
from dod.atomics cimport dod_atomic_load_u32

cdef enum:
    _LOST_WAKE_UP = 100         # beside the ring's own codes, which are small

OK, TIMEOUT, CLOSED, LOST_WAKE_UP = DOD_RING_OK, DOD_RING_TIMEOUT, DOD_RING_CLOSED, _LOST_WAKE_UP


cdef inline void _fill(dod_ring_slot* s, uint64_t i, size_t width) noexcept nogil:
    cdef double* rows = <double*>dod_ring_rows(s)
    cdef size_t j
    for j in range(width):
        rows[j] = <double>(i + j)
    s.count = 1


cdef inline double _sum(dod_ring_slot* s, size_t width) noexcept nogil:
    cdef double* rows = <double*>dod_ring_rows(s)
    cdef double acc = 0.0
    cdef size_t j
    for j in range(width):
        acc += rows[j]
    return acc


def one_thread(Ring ring, uint64_t n, size_t width):
    """n items written and read back on this thread; (ns, checksum)."""
    cdef dod_ring* r = &ring.engine
    cdef dod_ring_slot* s
    cdef uint64_t i, t0, t1
    cdef double acc = 0.0
    if width * sizeof(double) > r.max_rows * r.row_bytes:
        raise ValueError("payload larger than a slot")
    with nogil:
        t0 = now_ns_u64()
        for i in range(n):
            if dod_ring_acquire_write(r, -1, &s) != DOD_RING_OK:
                break
            _fill(s, i, width)
            dod_ring_commit(r)
            if dod_ring_acquire_read(r, -1, &s) != DOD_RING_OK:
                break
            acc += _sum(s, width)
            dod_ring_release(r)
        t1 = now_ns_u64()
    return t1 - t0, acc


def produce(Ring ring, uint64_t n, size_t width, int64_t timeout_ns=-1):
    """Producer thread: n items, then close; (ns, items committed, code of the
    last wait). Each wait for a free slot lasts at most timeout_ns (< 0: no limit)."""
    cdef dod_ring* r = &ring.engine
    cdef dod_ring_slot* s
    cdef uint64_t i = 0, t0, t1
    cdef int rc = DOD_RING_OK
    if width * sizeof(double) > r.max_rows * r.row_bytes:
        raise ValueError("payload larger than a slot")
    with nogil:
        t0 = now_ns_u64()
        while i < n:
            rc = dod_ring_acquire_write(r, timeout_ns, &s)
            if rc == DOD_RING_INTERRUPTED:
                continue                    # a signal: nothing to run here, wait again
            if rc == DOD_RING_TIMEOUT and dod_ring_try_write(r) != NULL:
                rc = _LOST_WAKE_UP
            if rc != DOD_RING_OK:
                break
            _fill(s, i, width)
            dod_ring_commit(r)
            i += 1
        t1 = now_ns_u64()
        dod_ring_close(r)
    return t1 - t0, i, rc


def consume(Ring ring, size_t width, int64_t timeout_ns=-1):
    """Consumer thread: until the end of the stream; (items, ns from first to
    last, checksum, code of the last wait: CLOSED at a normal end). Each wait
    for a scan lasts at most timeout_ns (< 0: no limit)."""
    cdef dod_ring* r = &ring.engine
    cdef dod_ring_slot* s
    cdef uint64_t got = 0, t0 = 0, t1 = 0
    cdef double acc = 0.0
    cdef int rc
    with nogil:
        while True:
            rc = dod_ring_acquire_read(r, timeout_ns, &s)
            if rc == DOD_RING_INTERRUPTED:
                continue
            if rc == DOD_RING_TIMEOUT and dod_ring_try_read(r) != NULL:
                rc = _LOST_WAKE_UP
            if rc != DOD_RING_OK:
                break
            if got == 0:
                t0 = now_ns_u64()
            acc += _sum(s, width)
            dod_ring_release(r)
            got += 1
        t1 = now_ns_u64()
    return got, t1 - t0, acc, rc


def wait_state(Ring ring):
    """The waiting words, for a stall report: (epoch, wait_read, wait_write)."""
    cdef dod_ring* r = &ring.engine
    return (dod_atomic_load_u32(&r.epoch), dod_atomic_load_u32(&r.wait_read),
            dod_atomic_load_u32(&r.wait_write))
