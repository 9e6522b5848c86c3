"""How a side of the ring waits (internal; see _ring_wait.pxd).

The engine's slow path (``_wait``): poll a while, then raise the
side's flag and sleep on the epoch word until commit, release or close
wakes it. The Python face's wait (``_acquire``): the same engine
wait in chunks of at most 100 ms with the GIL released, running signal
handlers and the stall tests between chunks, so that Ctrl-C interrupts it
and a wait that can never end raises :class:`dod.errors.StallError`.
"""
from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport PyThread_get_thread_ident
from libc.errno cimport EINTR
from libc.stdint cimport uint32_t, int64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from dod.atomics cimport (dod_atomic_load_u64, dod_atomic_load_u32, dod_atomic_exchange_u32,
                          dod_atomic_store_u32, dod_atomic_fence, dod_atomic_wait_u32, dod_cpu_relax)
from dod._ring_engine cimport DOD_RING_OK, DOD_RING_INTERRUPTED, dod_ring_try_write, dod_ring_try_read

import threading

from dod.errors import StallError


cdef enum:
    _SPINS = 256                 # polls before a waiter sleeps (a hand-off often lands in this window)

cdef int64_t _PY_WAIT_CHUNK_NS = 100000000    # the Python face checks for signals at least every 100 ms


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef int _wait(dod_ring* r, bint writer, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil:
    """The slow path of both acquires: spin, then sleep on the epoch word."""
    cdef int64_t deadline = 0, left = -1
    cdef uint32_t e
    cdef int spins = 0, rc
    cdef uint32_t* flag
    cdef dod_ring_slot* s
    if timeout_ns > 0:
        deadline = _now_ns() + timeout_ns
    while True:
        s = dod_ring_try_write(r) if writer else dod_ring_try_read(r)
        if s != NULL:
            out[0] = s
            return DOD_RING_OK
        if dod_atomic_load_u64(&r.closed):
            # closed is set after the producer's last commit: one more look
            # at head drains a slot committed just before the close.
            s = NULL if writer else dod_ring_try_read(r)
            if s != NULL:
                out[0] = s
                return DOD_RING_OK
            return DOD_RING_CLOSED
        if timeout_ns == 0 or (timeout_ns > 0 and _now_ns() >= deadline):
            return DOD_RING_TIMEOUT
        if spins < _SPINS:
            spins += 1
            dod_cpu_relax()
            continue
        flag = &r.wait_write if writer else &r.wait_read
        dod_atomic_exchange_u32(flag, 1)
        e = dod_atomic_load_u32(&r.epoch)
        dod_atomic_fence()
        s = dod_ring_try_write(r) if writer else dod_ring_try_read(r)
        rc = 0
        if s == NULL and not dod_atomic_load_u64(&r.closed):
            if timeout_ns > 0:
                left = deadline - _now_ns()
                if left < 0:
                    left = 0
            rc = dod_atomic_wait_u32(&r.epoch, e, left)
        dod_atomic_store_u32(flag, 0)
        if s != NULL:
            out[0] = s
            return DOD_RING_OK
        if rc == EINTR:
            return DOD_RING_INTERRUPTED


cdef int64_t _timeout_ns(object timeout) except? -2:
    if timeout is None:
        return -1
    t = float(timeout)
    if not (t >= 0.0 and t < 1e9):
        raise ValueError(f"timeout must be None or a number of seconds >= 0, not {timeout!r}")
    return <int64_t>(t * 1e9)


cdef str _stalled(bint writer, int other, unsigned long who):
    """Why a wait of this side can never end, or None: the other side (its
    state `other`, its thread `who`) is held by the waiting thread itself,
    or by a thread that has ended (a Python thread that returned holding its
    slot). Thread ids only (no allocation on the hand-off): an ended holder
    whose id a live thread reuses reads as that thread."""
    what = "the consumer" if writer else "the producer"
    if other != _HOLDING or who == 0:
        return None
    if who == PyThread_get_thread_ident():
        return (f"{what}'s slot is held by this same thread (or by an ended thread whose id it "
                f"now has): " + ("release() it before waiting for a free slot" if writer
                                 else "commit() or abort() it before waiting for one to read"))
    for th in threading.enumerate():
        if th.ident == who:
            return None
    return f"{what}'s thread ended while holding a slot: nothing can hand it back"


cdef int _acquire(dod_ring* r, bint writer, int* state, unsigned long* thread, const int* other_state,
                  const unsigned long* other_thread, object ring, object timeout, object stall,
                  dod_ring_slot** s) except -1:
    """Both acquires: try, then wait in chunks with the GIL released,
    running signal handlers and the stall tests between chunks. Returns
    the engine's code; counts one wait and at most one failure per call
    (the chunks call the engine's uncounted wait)."""
    cdef int rc = DOD_RING_TIMEOUT
    cdef int64_t t = _timeout_ns(timeout), left, chunk
    cdef int64_t deadline = _now_ns() + t if t > 0 else 0
    side = "writing" if writer else "reading"
    if state[0] == _HOLDING:
        raise RuntimeError(f"a slot is already held for {side}: "
                           + ("commit() or abort() it first" if writer else "release() it first"))
    if state[0] == _WAITING:
        raise RuntimeError(f"another thread is waiting for {side}: a Ring has a single "
                           + ("producer" if writer else "consumer"))
    if stall is not None and not callable(stall):
        raise TypeError(f"stall must be None or a callable, not {type(stall).__name__}")
    s[0] = dod_ring_try_write(r) if writer else dod_ring_try_read(r)
    if s[0] != NULL:
        return DOD_RING_OK
    state[0] = _WAITING
    thread[0] = PyThread_get_thread_ident()
    _count(&r.write_waits if writer else &r.read_waits)
    try:
        first = True
        while True:
            if t != 0 and not dod_atomic_load_u64(&r.closed):
                why = _stalled(writer, other_state[0], other_thread[0])
                if why is None and stall is not None and not first:
                    why = stall()
                if why is not None:
                    raise StallError(f"{'acquire_write' if writer else 'acquire_read'} can never "
                                     f"succeed: {why}; state {ring.state()}")
            first = False
            chunk = _PY_WAIT_CHUNK_NS
            if t >= 0:
                left = deadline - _now_ns() if t > 0 else 0
                chunk = left if left < chunk else chunk
                if chunk < 0:
                    chunk = 0
            with nogil:
                rc = _wait(r, writer, chunk, s)
            if rc == DOD_RING_OK or rc == DOD_RING_CLOSED:
                break
            if rc == DOD_RING_TIMEOUT and (t == 0 or (t > 0 and _now_ns() >= deadline)):
                break
            PyErr_CheckSignals()
    finally:
        state[0] = _IDLE
        thread[0] = 0
        if writer:
            if rc != DOD_RING_OK:         # timed out, closed, or interrupted by an exception
                _count(&r.write_failed)
        else:
            _count_read_failure(r, rc)
    return rc
