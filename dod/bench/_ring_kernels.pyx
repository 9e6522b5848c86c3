"""Kernels for dod.bench.ring: the ring's engine driven from nogil loops, timed in C.

One item = acquire a slot, write `width` doubles into it (a scan's payload:
nothing is optimised away), commit; on the other side acquire, read the
payload into a checksum, release.
"""
from libc.stdint cimport uint64_t
from dod.bench._timing cimport now_ns_u64
from dod.ring cimport (Ring, dod_ring, dod_ring_slot, dod_ring_acquire_write, dod_ring_commit,
                       dod_ring_acquire_read, dod_ring_release, dod_ring_rows, dod_ring_close,
                       DOD_RING_OK, DOD_RING_CLOSED)


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


def produce(Ring ring, uint64_t n, size_t width):
    """Producer thread: n items, then close; returns the ns it took."""
    cdef dod_ring* r = &ring.engine
    cdef dod_ring_slot* s
    cdef uint64_t i, t0, t1
    if width * sizeof(double) > r.max_rows * r.row_bytes:
        raise ValueError("payload larger than a slot")
    with nogil:
        t0 = now_ns_u64()
        for i in range(n):
            if dod_ring_acquire_write(r, -1, &s) != DOD_RING_OK:
                break
            _fill(s, i, width)
            dod_ring_commit(r)
        t1 = now_ns_u64()
        dod_ring_close(r)
    return t1 - t0


def consume(Ring ring, size_t width):
    """Consumer thread: until the end of the stream; (items, ns from first to last, checksum)."""
    cdef dod_ring* r = &ring.engine
    cdef dod_ring_slot* s
    cdef uint64_t got = 0, t0 = 0, t1 = 0
    cdef double acc = 0.0
    cdef int rc
    with nogil:
        while True:
            rc = dod_ring_acquire_read(r, -1, &s)
            if rc == DOD_RING_CLOSED:
                break
            if rc != DOD_RING_OK:
                continue
            if got == 0:
                t0 = now_ns_u64()
            acc += _sum(s, width)
            dod_ring_release(r)
            got += 1
        t1 = now_ns_u64()
    return got, t1 - t0, acc
