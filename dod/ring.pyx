"""A bounded single-producer single-consumer ring of fixed slots: input that streams.

A :class:`Ring` holds ``slots`` records allocated once, each a fixed-capacity
array of ``rows`` rows of ``row_shape`` and ``dtype`` (a scan of detections,
a batch of samples, a frame) plus a row count and a few scalars (``time``,
``dt``, ``tag``, and ``seq`` set on commit). A producer (a scenario
generator, a file reader, a socket thread) fills the next free slot and
commits it; a consumer (a tick) reads the oldest committed slot and releases
it. Nothing is allocated per item and the hand-off is two atomic counters
(acquire/release ordering from ``dod/atomics.h``): with the GIL released
on both sides when they are Cython.

Producer: ``slot = ring.acquire_write()`` -> fill ``slot.data`` / ``slot.write(a)``
-> ``ring.commit()``. Consumer: ``slot = ring.acquire_read()`` -> use
``slot.rows`` -> ``ring.release()``. Or ``with ring.write() as slot:`` and
``with ring.read() as slot:``, or ``for slot in ring:``. ``ring.close()``
(either side) ends the stream: writes then raise :class:`RingClosed`; reads
drain what was committed, then ``acquire_read`` returns None.

Waiting
    When the ring is full (producer) or empty (consumer), acquire waits up
    to ``timeout`` seconds (0: do not wait) with the GIL released: a short
    spin, then a futex sleep that commit/release/close wake; TimeoutError
    when the time is up. ``timeout=None`` waits as long as the other side
    can still make progress: a wait that can never end raises
    :class:`dod.errors.StallError` (a TimeoutError) with both sides' state
    (:meth:`Ring.state`) instead of waiting forever: the other side held by
    the waiting thread itself (a consumer that holds a slot and asks for a
    free one on a full ring, or a producer that holds its slot and waits
    for one to read), or by a thread that has ended; such a wait raises at
    once whatever the timeout. A composition that
    knows more (:meth:`dod.ring_producer.RingProducer.take`) adds its own
    test through ``stall=``. Ctrl-C interrupts a wait in the main thread
    (the wait runs in chunks of at most 100 ms between signal checks).

Lifetime rule (the one place it lives for the ring)
    The arrays of a slot (``slot.data``, ``slot.rows`` and every view taken
    from them) may be used only while the slot is held. Handing the slot on
    (``commit``, ``abort``, ``release``) while any such array is still
    referenced raises BufferError and changes nothing: delete the views (or
    copy what you keep) and call again. Memory itself is never freed under a
    view: the block of slots is a ``dod._lease.Owned`` (back to its resource
    when the ring and the last view are gone) and every slot array's base is
    a ``dod._lease.ExportPin`` over it, whose reference count tells whether
    a view is still around. Accessing a Slot
    that is not held raises RuntimeError. The arrays are made once per slot,
    so the Python face allocates nothing per item either.

Fast path
    ``dod/ring.pxd``: ``dod_ring_acquire_write`` / ``dod_ring_commit`` /
    ``dod_ring_acquire_read`` / ``dod_ring_release`` (inline, nogil), with the
    checks the caller owns listed there. The waits (the engine's and the
    Python face's) are in ``dod/_ring_wait.pyx``.

Thread-safety
    One producer thread and one consumer thread at a time, each on its own
    side, through the Python face or the engine. The Python face refuses a
    second producer (or consumer) while one is waiting or holding a slot
    (RuntimeError). ``close()``, ``closed``, ``len()`` and ``stats()`` may be
    called from any thread.
"""
cimport cython
cimport numpy as cnp
from cpython.number cimport PyNumber_Index
from cpython.object cimport PyObject
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uint64_t, int64_t, uintptr_t
from libc.string cimport memcpy, memset

from dod.atomics cimport (dod_atomic_load_u64, dod_atomic_store_u64, dod_atomic_fetch_add_u32,
                          dod_atomic_fence, dod_atomic_load_relaxed_u64, dod_atomic_wake_all_u32)
from dod._core cimport DOD_CACHE_LINE, dod_add_overflow, dod_mul_overflow
from dod._lease cimport Owned, owned, ExportPin, export_pin
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory, input_array
from dod.resource cimport Resource, dod_resource_allocate_from_python
from dod._ring_wait cimport (_IDLE, _HOLDING, _count, _count_write_failure,
                            _count_read_failure, _wait, _acquire)

import threading

import numpy as np

from dod.errors import InvariantError
from dod.resource import pages as _pages

cnp.import_array()

cdef extern from "Python.h":
    # The macro on a borrowed pointer: Cython's Py_REFCNT(object) would count its own temporary.
    Py_ssize_t _refs "Py_REFCNT"(PyObject* o)

class RingClosed(RuntimeError):
    """The ring was closed: no more slots can be written."""


cdef enum:
    _MAX_SLOTS = 1 << 24


# ---------------------------------------------------------------- engine slow paths

cdef void dod_ring_wake(dod_ring* r) noexcept nogil:
    dod_atomic_fetch_add_u32(&r.epoch, 1)
    dod_atomic_wake_all_u32(&r.epoch)


cdef void dod_ring_close(dod_ring* r) noexcept nogil:
    """Any thread: end the stream (idempotent) and wake both sides."""
    dod_atomic_store_u64(&r.closed, 1)
    dod_atomic_fence()
    dod_ring_wake(r)


cdef int dod_ring_wait_write(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil:
    cdef int rc
    out[0] = NULL
    _count(&r.write_waits)
    rc = _wait(r, True, timeout_ns, out)
    _count_write_failure(r, rc)
    return rc


cdef int dod_ring_wait_read(dod_ring* r, int64_t timeout_ns, dod_ring_slot** out) noexcept nogil:
    cdef int rc
    out[0] = NULL
    _count(&r.read_waits)
    rc = _wait(r, False, timeout_ns, out)
    _count_read_failure(r, rc)
    return rc


# ---------------------------------------------------------------- owner

cdef inline size_t _round_line(size_t n) noexcept nogil:
    return (n + DOD_CACHE_LINE - 1) & ~(<size_t>DOD_CACHE_LINE - 1)


@cython.final
cdef class Slot:
    """One slot of a :class:`Ring`, as the producer (writable) or the consumer
    (read-only) sees it while holding it.

    Slot objects are made once per slot and handed out again each time
    round, by :meth:`Ring.acquire_write` and :meth:`Ring.acquire_read`;
    touching one that is not held raises RuntimeError. The properties
    ``data`` (all ``rows`` rows), ``rows`` (the first ``count`` rows),
    ``count``, ``time``, ``dt``, ``tag`` (settable by the producer) and
    ``seq`` (the slot's number in the stream, set on commit) are listed
    below.

    Parameters
    ----------
    *args, **kwargs
        Refused: slots come from a ring.

    Attributes
    ----------
    writable : bool
        True on the producer's side.
    index : int
        The slot's position in the ring.

    Raises
    ------
    TypeError
        When called from Python.

    Notes
    -----
    Thread-safety: use a slot only from the thread that acquired it.
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("Slot objects come from Ring.acquire_write() / acquire_read()")

    cdef int _need_active(self) except -1:
        if not self.active:
            raise RuntimeError("this slot is not held: acquire it first (its memory now belongs "
                               "to the other side of the ring)")
        return 0

    cdef bint _shared(self) noexcept:
        # The face holds one reference to each array and to the lease, which
        # the two arrays reference too (numpy points every derived view at
        # the lease); any more is a view (or an export) still alive.
        return (_refs(<PyObject*>self._data) != 1 or _refs(<PyObject*>self._rows) != 1
                or _refs(<PyObject*>self._lease) != 3)

    cdef int _set_length(self, size_t n) except -1:
        cdef cnp.ndarray a = <cnp.ndarray>self._rows
        if <size_t>cnp.PyArray_DIMS(a)[0] == n:
            return 0
        # Two references here: the face's and the local `a`'s.
        if _refs(<PyObject*>a) != 2:
            raise BufferError("slot.rows is still referenced: delete it before changing count")
        cnp.PyArray_DIMS(a)[0] = <cnp.npy_intp>n
        cnp.PyArray_UpdateFlags(a, cnp.NPY_ARRAY_C_CONTIGUOUS | cnp.NPY_ARRAY_F_CONTIGUOUS)
        return 0

    @property
    def data(self):
        """ndarray ``(ring.rows, *row_shape)``: every row of the slot (read-only for the consumer)."""
        self._need_active()
        return self._data

    @property
    def rows(self):
        """ndarray ``(count, *row_shape)``: the filled rows (read-only for the consumer)."""
        self._need_active()
        return self._rows

    @property
    def held(self):
        """True while this slot is held through the Python face."""
        return self.active

    @property
    def count(self):
        """Rows filled, 0 .. ring.rows (the producer sets it; write() does)."""
        self._need_active()
        return self.header.count

    @count.setter
    def count(self, value):
        self._need_active()
        if not self.writable:
            raise AttributeError("the consumer's slot is read-only")
        n = PyNumber_Index(value)
        if n < 0 or n > self.max_rows:
            raise ValueError(f"count must be between 0 and {self.max_rows}, not {value!r}")
        self._set_length(<size_t>n)
        self.header.count = <uint64_t>n

    @property
    def time(self):
        """Timestamp (seconds, float)."""
        self._need_active()
        return self.header.time

    @time.setter
    def time(self, double value):
        self._need_active()
        if not self.writable:
            raise AttributeError("the consumer's slot is read-only")
        self.header.time = value

    @property
    def dt(self):
        """Time step (seconds, float)."""
        self._need_active()
        return self.header.dt

    @dt.setter
    def dt(self, double value):
        self._need_active()
        if not self.writable:
            raise AttributeError("the consumer's slot is read-only")
        self.header.dt = value

    @property
    def tag(self):
        """A free int64 for the pipeline (sensor id, flags)."""
        self._need_active()
        return self.header.tag

    @tag.setter
    def tag(self, int64_t value):
        self._need_active()
        if not self.writable:
            raise AttributeError("the consumer's slot is read-only")
        self.header.tag = value

    @property
    def seq(self):
        """The slot's number in the stream (0, 1, 2, ...), set on commit."""
        self._need_active()
        return self.header.seq

    def write(self, array, time=None, dt=None, tag=None):
        """Producer: copy `array` into the first n rows and set count = n.

        Parameters
        ----------
        array : array_like
            Of shape ``(n, *row_shape)``, n <= ``ring.rows``; any layout and
            byte order (strided, byte-swapped and misaligned arrays are
            copied element by element).
        time, dt : float, optional
            Set the slot's timestamp and time step when given.
        tag : int, optional
            Set the slot's tag when given.

        Raises
        ------
        ValueError
            For a wrong shape (0-d included) or n > ring.rows.
        TypeError
            For None, Python objects or a dtype that does not cast safely
            ("same_kind").
        RuntimeError
            When the slot is not held, or on the consumer's (read-only) slot.

        Notes
        -----
        The slot is unchanged when it raises. No allocation when `array` is an
        aligned C-contiguous array of the ring's dtype. Thread-safety: the
        thread that acquired the slot.
        """
        self._need_active()
        if not self.writable:
            raise RuntimeError("the consumer's slot is read-only: write() is the producer's")
        cdef cnp.ndarray d = <cnp.ndarray>self._data
        # the one input gate (dod._ndarray): dtype, shape; any layout (copied below)
        cdef cnp.ndarray a = input_array(array, d.dtype, "array", cnp.PyArray_NDIM(d),
                                         (<object>d).shape[1:], "any", "same_kind")
        cdef cnp.npy_intp n
        cdef int64_t tag_value = 0
        n = cnp.PyArray_DIMS(a)[0]
        if <size_t>n > self.max_rows:
            raise ValueError(f"{n} rows do not fit in a slot of {self.max_rows} rows")
        cdef bint same = cnp.PyArray_EquivTypes(a.descr, d.descr) and cnp.PyArray_ISALIGNED(a)
        if tag is not None:
            tag_value = <int64_t>tag          # OverflowError/TypeError before anything changes
        t_value = float(time) if time is not None else None
        dt_value = float(dt) if dt is not None else None
        self._set_length(<size_t>n)
        if same and cnp.PyArray_IS_C_CONTIGUOUS(a):
            memcpy(cnp.PyArray_DATA(d), cnp.PyArray_DATA(a), <size_t>cnp.PyArray_NBYTES(a))
        else:
            np.copyto(self._rows, a, casting="same_kind")
        self.header.count = <uint64_t>n
        if t_value is not None:
            self.header.time = t_value
        if dt_value is not None:
            self.header.dt = dt_value
        if tag is not None:
            self.header.tag = tag_value

    def __repr__(self):
        side = "producer" if self.writable else "consumer"
        if not self.active:
            return f"<dod.ring.Slot {self.index} ({side}, not held)>"
        return (f"<dod.ring.Slot {self.index} ({side}) seq={self.header.seq} count={self.header.count} "
                f"time={self.header.time:g} dt={self.header.dt:g} tag={self.header.tag}>")


@cython.final
cdef class _WriteBlock:
    cdef Ring ring
    cdef object timeout

    def __enter__(self):
        return self.ring.acquire_write(self.timeout)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.ring.commit()
            return False
        try:
            self.ring.abort()
        except BufferError:
            pass        # a traceback still holds a view: the slot stays held; abort() later
        return False


@cython.final
cdef class _ReadBlock:
    cdef Ring ring
    cdef object timeout

    def __enter__(self):
        return self.ring.acquire_read(self.timeout)

    def __exit__(self, exc_type, exc, tb):
        if self.ring._rstate != _HOLDING:
            return False        # end of stream: __enter__ returned None
        if exc_type is None:
            self.ring.release()
            return False
        try:
            self.ring.release()
        except BufferError:
            pass        # a traceback still holds a view: the slot stays held; release() later
        return False


@cython.final
@cython.no_gc_clear
cdef class Ring:
    """Ring(slots, rows, row_shape=(), dtype=numpy.float64, *, resource=None)

    A bounded single-producer single-consumer ring of fixed slots.

    Parameters
    ----------
    slots : int
        Number of slots (1 .. 2**24): how far the producer may run ahead.
    rows : int
        Row capacity of each slot (>= 1), e.g. the most detections a scan holds.
    row_shape : int or tuple of int
        Shape of one row, e.g. ``2`` for (x, y).
    dtype : numpy dtype
        Element type (no object dtypes).
    resource : Resource, optional
        Where the one block of slots comes from (any allocator's
        ``.resource()``, e.g. ``Arena(n).resource()``). Default
        ``dod.resource.pages``: fresh zeroed pages. Memory from another
        resource is zeroed once here.

    Attributes
    ----------
    slots : int
        Number of slots.
    rows : int
        Row capacity of each slot.
    row_shape : tuple of int
        Shape of one row.
    dtype : numpy.dtype
        Element type.

    Raises
    ------
    ValueError
        For bad sizes or shapes.
    TypeError
        For an object dtype.
    MemoryError
        When the block cannot be obtained.

    Notes
    -----
    Thread-safety: one producer thread and one consumer thread at a time,
    each on its own side, through the Python face or the engine. The Python
    face refuses a second producer (or consumer) while one is waiting or
    holding a slot (RuntimeError). :meth:`close`, :attr:`closed`, ``len()``
    and :meth:`stats` may be called from any thread. The module docstring
    describes the hand-off and the lifetime rule.
    """

    def __cinit__(self, slots, rows, row_shape=(), dtype=np.float64, *, Resource resource=None):
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef size_t nslots, nrows, row_bytes, data_bytes, stride, total, i
        cdef void* p
        cdef Owned mem
        cdef Slot face
        cdef ExportPin lease
        ns = PyNumber_Index(slots)
        if ns < 1 or ns > _MAX_SLOTS:
            raise ValueError(f"slots must be between 1 and {_MAX_SLOTS}, not {slots!r}")
        nr = PyNumber_Index(rows)
        if nr < 1 or nr > (1 << 40):
            raise ValueError(f"rows must be between 1 and 2**40, not {rows!r}")
        shape = (row_shape,) if not isinstance(row_shape, (tuple, list)) else tuple(row_shape)
        shape = tuple(PyNumber_Index(x) for x in shape)
        if any(x < 1 for x in shape):
            raise ValueError(f"row_shape must be positive sizes, not {row_shape!r}")
        parse_request((nr,) + shape, dt, None, DOD_CACHE_LINE, &req)   # overflow checks
        nslots = <size_t>ns
        nrows = <size_t>nr
        data_bytes = req.nbytes
        row_bytes = data_bytes // nrows
        stride = _round_line(data_bytes)
        if (stride < data_bytes or dod_add_overflow(stride, DOD_RING_HEADER, &stride)
                or dod_mul_overflow(stride, nslots, &total) or total > (<size_t>1 << 46)):
            raise MemoryError(f"{slots} slots of {rows} rows of {dt} {shape} do not fit in memory")
        if resource is None:
            resource = _pages
        # the block of slots returns to its resource when the ring and the last
        # view of any slot are gone (dod._lease.Owned keeps the resource alive)
        mem = owned(resource, resource.resource.deallocate, resource.resource.ctx)
        p = dod_resource_allocate_from_python(resource, &resource.resource, total, DOD_CACHE_LINE)
        if p == NULL:
            raise MemoryError(f"could not obtain {total} bytes for a ring of {slots} slots from {resource!r}")
        mem.ptr = p
        mem.size = total
        mem.alignment = DOD_CACHE_LINE
        if (<uintptr_t>p) & (DOD_CACHE_LINE - 1):
            raise MemoryError(f"{resource!r} returned memory that is not 64-byte aligned")
        if resource is not _pages:
            memset(p, 0, total)
        self._memory = mem
        self.slots = nslots
        self.rows = nrows
        self.row_shape = shape
        self.dtype = dt
        self.engine.base = <char*>p
        self.engine.stride = stride
        self.engine.nslots = nslots
        self.engine.max_rows = nrows
        self.engine.row_bytes = row_bytes
        self._writers = []
        self._readers = []
        for i in range(nslots):
            for writable in (True, False):
                # one base per face: its reference count tells whether a view
                # of the slot is still around (Slot._shared)
                lease = export_pin(mem, NULL)
                face = Slot.__new__(Slot)
                face.header = dod_ring_slot_at(&self.engine, i)
                face.writable = writable
                face.index = <Py_ssize_t>i
                face.max_rows = nrows
                face._data = wrap_memory(dod_ring_rows(face.header), &req, dt, lease)
                req.dims[0] = 0
                face._rows = wrap_memory(dod_ring_rows(face.header), &req, dt, lease)
                req.dims[0] = <cnp.npy_intp>nrows
                if not writable:
                    face._data.flags.writeable = False
                    face._rows.flags.writeable = False
                face._lease = lease
                (self._writers if writable else self._readers).append(face)
        cdef _WriteBlock w = _WriteBlock.__new__(_WriteBlock)
        w.ring = self
        self._wctx = w
        cdef _ReadBlock r = _ReadBlock.__new__(_ReadBlock)
        r.ring = self
        self._rctx = r

    def __dealloc__(self):
        # Slot faces may outlive the ring: they must refuse access from now on.
        cdef Slot face
        if self._writers is not None:
            for face in self._writers:
                face.active = False
        if self._readers is not None:
            for face in self._readers:
                face.active = False

    # -------------------------------------------------------- producer

    def state(self):
        """Both sides' state, as a dict (a snapshot, for diagnostics; any
        thread): producer and consumer ("idle", "waiting" or "holding", as
        the Python face sees it: a side used only through the cimport engine
        reads "idle"), producer_thread and consumer_thread (the name of the
        thread waiting or holding, "ended thread N" for one that has ended,
        else None), in_flight, slots, closed. Thread-safety: any thread."""
        names = {0: "idle", 1: "waiting", 2: "holding"}
        def thread_name(unsigned long ident, int st):
            if st == _IDLE or ident == 0:
                return None
            for th in threading.enumerate():
                if th.ident == ident:
                    return th.name
            return f"ended thread {ident}"
        return {"producer": names.get(self._wstate, "?"), "consumer": names.get(self._rstate, "?"),
                "producer_thread": thread_name(self._wthread, self._wstate),
                "consumer_thread": thread_name(self._rthread, self._rstate),
                "in_flight": len(self), "slots": self.slots, "closed": self.closed}

    def acquire_write(self, timeout=None, *, stall=None):
        """Producer: the next free slot, waiting with the GIL released.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait for a free slot (0: do not wait; None: while the
            consumer can still release one, see the module docstring).
        stall : callable, optional
            Called (no arguments) about every 100 ms of waiting: a string it
            returns ends the wait with StallError (the string names why it
            cannot end).

        Returns
        -------
        Slot
            Writable; its count, time, dt and tag start at 0. Hand it on with
            :meth:`commit` or give it back with :meth:`abort`.

        Raises
        ------
        TimeoutError
            When no slot frees in time.
        StallError
            (a TimeoutError) When none ever can.
        RingClosed
            When the ring is closed.
        RuntimeError
            When a slot is already held or another thread is waiting to produce.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: producer side; one
        producer thread at a time.
        """
        cdef dod_ring_slot* s = NULL
        cdef Slot face
        cdef int rc = _acquire(&self.engine, True, &self._wstate, &self._wthread, &self._rstate,
                               &self._rthread, self, timeout, stall, &s)
        if rc == DOD_RING_CLOSED:
            raise RingClosed("the ring is closed: no more slots can be written")
        if rc != DOD_RING_OK:
            raise TimeoutError(f"no free slot within {timeout} s (the consumer is behind); "
                           f"state {self.state()}")
        memset(s, 0, sizeof(dod_ring_slot))
        face = <Slot>self._writers[self.engine.widx]
        face._set_length(0)
        face.active = True
        self._wslot = face
        self._wstate = _HOLDING
        self._wthread = PyThread_get_thread_ident()
        return face

    def commit(self):
        """Producer: hand the held slot to the consumer (its seq is set now).

        Raises
        ------
        RuntimeError
            Without a held slot.
        BufferError
            While a view of the slot is alive (nothing changes: delete the views,
            call again).

        Notes
        -----
        Thread-safety: producer side; one producer thread at a time.
        """
        cdef Slot face = self._held_write("commit")
        cdef size_t n
        dod_ring_commit(&self.engine)
        face.active = False
        self._wslot = None
        self._wstate = _IDLE
        self._wthread = 0
        n = <size_t>dod_ring_size(&self.engine)
        if n > self.peak_slots:
            self.peak_slots = n

    def abort(self):
        """Producer: give the held slot back unwritten (the stream skips nothing).

        Raises
        ------
        RuntimeError
            Without a held slot.
        BufferError
            While a view of it is alive (nothing changes).

        Notes
        -----
        Thread-safety: producer side; one producer thread at a time.
        """
        cdef Slot face = self._held_write("abort")
        face.active = False
        self._wslot = None
        self._wstate = _IDLE
        self._wthread = 0

    cdef Slot _held_write(self, str what):
        if self._wstate != _HOLDING:
            raise RuntimeError(f"{what}() without a slot from acquire_write()")
        if self._wslot._shared():
            raise BufferError(f"a view of the slot being written is still alive: delete it "
                              f"(or copy what you keep) before {what}()")
        return self._wslot

    def write(self, timeout=None):
        """Producer: ``with ring.write(timeout) as slot:`` acquires a slot, commits
        it when the block ends, aborts it when the block raises.

        Parameters
        ----------
        timeout : float, optional
            As for :meth:`acquire_write`.

        Returns
        -------
        context manager
            Its ``__enter__`` returns the writable :class:`Slot`. The same
            context object is returned each time (no allocation).

        Raises
        ------
        TimeoutError, RingClosed, RuntimeError
            On entering, as :meth:`acquire_write`.
        BufferError
            On leaving, when a view of the slot was kept past the block (the
            commit is refused and the slot still held).

        Notes
        -----
        The arrays of `slot` are valid only inside the block. Thread-safety: producer side; one producer thread at a time.
        """
        (<_WriteBlock>self._wctx).timeout = timeout
        return self._wctx

    # -------------------------------------------------------- consumer

    def acquire_read(self, timeout=None, *, stall=None):
        """Consumer: the oldest committed slot, waiting with the GIL released.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait (0: do not wait; None: while the producer can
            still commit one, see the module docstring).
        stall : callable, optional
            As in :meth:`acquire_write`.

        Returns
        -------
        Slot or None
            Read-only; None at the end of the stream (closed and drained). Give
            it back with :meth:`release`.

        Raises
        ------
        TimeoutError
            When nothing arrives in time.
        StallError
            (a TimeoutError) When nothing ever can.
        RuntimeError
            When a slot is already held or another thread is waiting to consume.

        Notes
        -----
        Nothing changes when it raises. Thread-safety: consumer side; one
        consumer thread at a time.
        """
        cdef dod_ring_slot* s = NULL
        cdef Slot face
        cdef uint64_t n
        cdef int rc = _acquire(&self.engine, False, &self._rstate, &self._rthread, &self._wstate,
                               &self._wthread, self, timeout, stall, &s)
        if rc == DOD_RING_CLOSED:
            return None
        if rc != DOD_RING_OK:
            raise TimeoutError(f"no slot committed within {timeout} s; state {self.state()}")
        face = <Slot>self._readers[self.engine.ridx]
        n = s.count
        face._set_length(n if n <= self.rows else self.rows)   # a cimport producer owns count <= rows
        face.active = True
        self._rslot = face
        self._rstate = _HOLDING
        self._rthread = PyThread_get_thread_ident()
        return face

    def release(self):
        """Consumer: give the held slot back to the producer.

        Raises
        ------
        RuntimeError
            Without a held slot.
        BufferError
            While a view of it is alive (nothing changes: delete the views, call
            again).

        Notes
        -----
        Thread-safety: consumer side; one consumer thread at a time.
        """
        if self._rstate != _HOLDING:
            raise RuntimeError("release() without a slot from acquire_read()")
        cdef Slot face = self._rslot
        if face._shared():
            raise BufferError("a view of the slot being read is still alive: delete it "
                              "(or copy what you keep) before release()")
        face.active = False
        self._rslot = None
        self._rstate = _IDLE
        self._rthread = 0
        dod_ring_release(&self.engine)

    def read(self, timeout=None):
        """Consumer: ``with ring.read(timeout) as slot:`` acquires the oldest slot
        and releases it when the block ends.

        Parameters
        ----------
        timeout : float, optional
            As for :meth:`acquire_read`.

        Returns
        -------
        context manager
            Its ``__enter__`` returns the read-only :class:`Slot`, or None at the
            end of the stream. The same context object is returned each time (no
            allocation).

        Raises
        ------
        TimeoutError, RuntimeError
            On entering, as :meth:`acquire_read`.
        BufferError
            On leaving, when a view of the slot was kept past the block.

        Notes
        -----
        The arrays of `slot` are valid only inside the block. Thread-safety: consumer side; one consumer thread at a time.
        """
        (<_ReadBlock>self._rctx).timeout = timeout
        return self._rctx

    def __iter__(self):
        """Consumer: yield each committed slot until the end of the stream.

        Each slot is released when the next is asked for (no timeout).

        Yields
        ------
        Slot
            Read-only, valid until the next iteration.

        Notes
        -----
        Thread-safety: consumer side; one consumer thread at a time.
        """
        while True:
            slot = self.acquire_read()
            if slot is None:
                return
            try:
                yield slot
            finally:
                slot = None
                self.release()

    # -------------------------------------------------------- either side

    def close(self):
        """End the stream: writes raise RingClosed from now on, waiting threads
        wake, and the consumer drains what was committed, then gets None.

        Notes
        -----
        Thread-safety: any thread; idempotent.
        """
        dod_ring_close(&self.engine)

    @property
    def closed(self):
        """True after close()."""
        return dod_atomic_load_u64(&self.engine.closed) != 0

    def __len__(self):
        """Slots committed and not yet released (a snapshot).

        Returns
        -------
        int

        Notes
        -----
        Thread-safety: any thread.
        """
        return dod_ring_size(&self.engine)

    @property
    def slot_bytes(self):
        """Bytes of one slot: the 64-byte header plus the rows, padded to 64."""
        return self.engine.stride

    def stats(self):
        """Statistics as a dict (a snapshot; exact when both sides are quiet).

        Returns
        -------
        dict
            ``capacity``, ``used``, ``available``, ``peak`` (bytes of slots: all,
            in flight, free, most in flight seen at a Python commit or a stats()
            call), ``allocations`` (slots committed), ``failed`` (acquires that
            timed out or found the ring closed), then ``slots``, ``in_flight``,
            ``committed``, ``released``, ``write_waits`` / ``read_waits``
            (acquires that found the ring full / empty), ``closed``.

        Notes
        -----
        Thread-safety: any thread.
        """
        cdef uint64_t tail = dod_atomic_load_u64(&self.engine.tail)
        cdef uint64_t head = dod_atomic_load_u64(&self.engine.head)
        cdef size_t n = <size_t>(head - tail), stride = self.engine.stride
        if n > self.peak_slots:
            self.peak_slots = n
        return {
            "capacity": self.slots * stride,
            "used": n * stride,
            "available": (self.slots - n) * stride,
            "peak": self.peak_slots * stride,
            "allocations": head,
            "failed": (dod_atomic_load_relaxed_u64(&self.engine.write_failed)
                       + dod_atomic_load_relaxed_u64(&self.engine.read_failed)),
            "slots": self.slots,
            "in_flight": n,
            "committed": head,
            "released": tail,
            "write_waits": dod_atomic_load_relaxed_u64(&self.engine.write_waits),
            "read_waits": dod_atomic_load_relaxed_u64(&self.engine.read_waits),
            "closed": self.closed,
        }

    def check(self):
        """Walk the ring's invariants.

        Raises
        ------
        dod.InvariantError
            On the first broken invariant.

        Notes
        -----
        Thread-safety: call it while neither side is inside an acquire.
        """
        cdef dod_ring* r = &self.engine
        cdef uint64_t k
        if r.head - r.tail > r.nslots:
            raise InvariantError(f"{r.head - r.tail} slots in flight in a ring of {r.nslots}")
        if r.widx != r.head % r.nslots or r.ridx != r.tail % r.nslots:
            raise InvariantError("slot indices out of step with the counters")
        if r.tail_seen > r.tail or r.head_seen > r.head:
            raise InvariantError("a side's cached counter is ahead of the real one")
        if r.stride % DOD_CACHE_LINE or r.stride < DOD_RING_HEADER + r.max_rows * r.row_bytes:
            raise InvariantError("slot stride too small or not a multiple of 64")
        for k in range(r.tail, r.head):
            if dod_ring_slot_at(r, k % r.nslots).seq != k:
                raise InvariantError(f"slot {k % r.nslots} in flight carries seq "
                                     f"{dod_ring_slot_at(r, k % r.nslots).seq}, expected {k}")
            if dod_ring_slot_at(r, k % r.nslots).count > r.max_rows:
                raise InvariantError(f"slot {k % r.nslots} claims more rows than it holds")
        if (self._wstate == _HOLDING) != (self._wslot is not None):
            raise InvariantError("producer state and held slot disagree")
        if (self._rstate == _HOLDING) != (self._rslot is not None):
            raise InvariantError("consumer state and held slot disagree")
        if (self._wstate == _IDLE) != (self._wthread == 0) or (self._rstate == _IDLE) != (self._rthread == 0):
            raise InvariantError("a side's thread and its state disagree")

    def __repr__(self):
        return (f"<dod.Ring {self.slots} slots x {self.rows} rows of {self.dtype} {self.row_shape} "
                f"in_flight={len(self)}{' closed' if self.closed else ''}>")
