"""Bump arenas: allocation is a pointer bump, release is one store.

An :class:`Arena` owns one region of memory (anonymous pages from the system,
a caller's writable buffer, or a block from any :class:`~dod.resource.Resource`)
and hands out consecutive pieces of it. Nothing is freed piece by piece: a
:meth:`~Arena.rewind` to a :meth:`~Arena.mark` or a :meth:`~Arena.reset`
frees everything allocated after that point at once. That matches lifetimes
that end together (everything made during one tick, one request, one frame).

Safety contract (the Python face)
    Arrays carved from an arena keep its memory alive: an array may outlive
    every other reference to the arena. A rewind or reset that would release
    memory under an array that is still alive raises ``BufferError`` and
    changes nothing, as ``bytearray`` does when resized while exported. Pass
    ``unchecked=True`` to skip that check in a hot loop: the caller then owns
    the risk that a live array aliases memory handed out again (the memory
    stays mapped, so this is wrong results, never a crash).

Thread-safety
    One owner at a time. An arena is not locked; share it between threads
    only with your own synchronisation (or use one arena per thread).

Cython
    ``from dod.arena cimport Arena, dod_arena_push, dod_arena_reset`` and run
    the engine on ``&owner.engine`` without the GIL; see ``dod/arena.pxd`` for
    the checks the caller owns there.

Where things live
    Lifetime rule: ``dod._lease.RangePin`` (one pin per mark interval;
    ``Arena._release_to`` asks it before every rewind/reset).
    Fast path: ``dod_arena_push`` / ``dod_arena_rewind`` and the cursor,
    inline in ``dod/arena.pxd`` (slow paths ``dod_arena_push_slow`` and
    ``dod_arena_rewind_blocks`` in this file).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uintptr_t, SIZE_MAX
from libc.string cimport memset
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_CONTIG
from cpython.number cimport PyNumber_Index

from dod._core cimport DOD_DEBUG, dod_add_overflow, dod_pad_for, dod_poison
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory, input_array
from dod._lease cimport RangePin, range_pin, range_pin_cover, range_pins_close, range_pins_top_above
from dod.resource cimport (dod_resource, Resource, dod_resource_allocate,
                           dod_resource_allocate_from_python, dod_resource_deallocate,
                           dod_pages_resource)
from dod.pages cimport dod_page_range, dod_pages_prefault, dod_pages_threads

import os

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

# Chained blocks start with their record, padded so the usable bytes start
# on a cache line: blocks keep the alignment of the memory they came from.
cdef enum:
    _BLOCK_HEADER = 64
    _BLOCK_ALIGN = 64
    _DEFAULT_ALIGN = 16

# Capacity above which a request is refused as absurd rather than attempted.
cdef size_t _MAX_CAPACITY = (<size_t>1) << 48
# Further blocks of a growable arena double up to this size.
cdef size_t _MAX_BLOCK = (<size_t>1) << 30


# ---------------------------------------------------------------- engine slow paths

cdef void* dod_arena_push_slow(dod_arena* a, size_t size, size_t alignment) noexcept nogil:
    """The current block is full: move to a spare or a new block from upstream."""
    cdef dod_arena_block* b
    cdef size_t need, want, total
    if a.upstream == NULL or a.block == NULL:
        a.failed += 1
        return NULL
    # The size rounded to the grain, plus worst-case padding at a 64-byte
    # aligned block start.
    if (dod_add_overflow(size, DOD_ARENA_GRAIN - 1, &need)
            or dod_add_overflow(need & ~(<size_t>DOD_ARENA_GRAIN - 1),
                                alignment - 1 if alignment > _BLOCK_ALIGN else 0, &need)):
        a.failed += 1
        return NULL
    b = a.block.next
    if b == NULL or b.capacity < need:
        want = need if need > a.block_size else a.block_size
        if dod_add_overflow(want, _BLOCK_HEADER + _BLOCK_ALIGN - 1, &total):
            a.failed += 1
            return NULL
        total &= ~(<size_t>_BLOCK_ALIGN - 1)
        b = <dod_arena_block*>dod_resource_allocate(a.upstream, total, _BLOCK_ALIGN)
        if b == NULL:
            a.failed += 1
            return NULL
        b.base = <char*>b + _BLOCK_HEADER
        b.capacity = total - _BLOCK_HEADER
        b.size = total
        # Insert after the current block; older spares follow the new one.
        b.prev = a.block
        b.next = a.block.next
        if b.next != NULL:
            b.next.prev = b
        a.block.next = b
        if a.block_size < _MAX_BLOCK:
            a.block_size *= 2
    # The rest of the current block is stranded until a rewind below it.
    b.prior = a.prior + a.capacity
    a.block = b
    a.base = b.base
    a.capacity = b.capacity
    a.prior = b.prior
    a.used = 0
    return dod_arena_push(a, size, alignment)


cdef void dod_arena_rewind_blocks(dod_arena* a, size_t mark) noexcept nogil:
    """Rewind below the current block: walk back, keeping later blocks as spares."""
    cdef dod_arena_block* b = a.block
    if b == NULL:               # a bare region has one block: prior is 0, nothing to walk
        a.used = 0
        return
    dod_poison(a.base, a.used)
    b = b.prev
    while b.prev != NULL and mark < b.prior:
        dod_poison(b.base, b.capacity)
        b = b.prev
    a.block = b
    a.base = b.base
    a.capacity = b.capacity
    a.prior = b.prior
    dod_poison(b.base + (mark - b.prior), b.capacity - (mark - b.prior))
    a.used = mark - b.prior


cdef void dod_arena_reset_zeroed_blocks(dod_arena* a) noexcept nogil:
    """dod_arena_reset_zeroed across blocks: every block walked back through is
    used up to its end (the tail stranded there was never written, but zeroing
    it keeps the rule simple: released bytes read zero)."""
    cdef dod_arena_block* b = a.block
    memset(a.base, 0, a.used)
    b = b.prev
    while b != NULL:
        memset(b.base, 0, b.capacity)
        if b.prev == NULL:
            break
        b = b.prev
    if a.prior + a.used > a.peak:
        a.peak = a.prior + a.used
    a.block = b
    a.base = b.base
    a.capacity = b.capacity
    a.prior = b.prior
    a.used = 0


# ---------------------------------------------------------------- the arena as a dod_resource

cdef void* _arena_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_arena_push(<dod_arena*>ctx, size, alignment)


cdef void _arena_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    pass                        # arena memory is released by rewind/reset, not piece by piece


@cython.final
cdef class Mark:
    """A position in an :class:`Arena`, from :meth:`Arena.mark`.

    Parameters
    ----------
    *args, **kwargs
        Refused: marks come from :meth:`Arena.mark`.

    Attributes
    ----------
    arena : Arena
        The arena it belongs to.
    position : int
        Bytes pushed when it was taken.

    Raises
    ------
    TypeError
        When called from Python.

    Notes
    -----
    Thread-safety: an immutable value.
    """
    cdef readonly Arena arena
    cdef readonly size_t position

    def __init__(self, *args, **kwargs):
        raise TypeError("marks come from Arena.mark()")

    def __repr__(self):
        return f"<dod.arena.Mark position={self.position}>"


@cython.final
cdef class Scope:
    """Context manager from :meth:`Arena.scope`: mark on enter, rewind on exit.

    Parameters
    ----------
    *args, **kwargs
        Refused: scopes come from :meth:`Arena.scope`.

    Raises
    ------
    TypeError
        When called from Python.

    Notes
    -----
    Entered once; ``__enter__`` returns the arena, ``__exit__`` rewinds as
    :meth:`Arena.scope` says. Thread-safety: as the arena (one owner at a
    time).
    """
    cdef Arena arena
    cdef size_t position
    cdef bint entered
    cdef bint exited

    def __init__(self, *args, **kwargs):
        raise TypeError("scopes come from Arena.scope()")

    def __enter__(self):
        """Mark the arena's position; returns the arena. RuntimeError the second time."""
        if self.arena is None:      # Scope.__new__(Scope): no arena to mark
            raise TypeError("scopes come from Arena.scope()")
        if self.entered:
            raise RuntimeError("an arena scope can be entered once")
        self.entered = True
        self.arena._scopes += 1
        range_pins_close(&self.arena._pins)
        self.position = dod_arena_mark(&self.arena.engine)
        return self.arena

    def __exit__(self, exc_type, exc, tb):
        """Rewind to the mark (see :meth:`Arena.scope` for the rules on a raised block)."""
        cdef Arena arena = self.arena
        if arena is None or not self.entered:
            return False
        if not self.exited:
            self.exited = True
            arena._scopes -= 1
        if self.position > dod_arena_mark(&arena.engine):
            return False        # an unchecked rewind inside the scope went below it
        if exc_type is None:
            arena._release_to(self.position, False)
        elif arena._pinned_above(self.position) == 0:
            arena._release_to(self.position, True)
        # else: the exception's traceback still holds arrays of this scope;
        # leave the arena where it is rather than mask the exception.
        return False


# ---------------------------------------------------------------- the owner and its Python face

@cython.no_gc_clear
cdef class Arena:
    """Arena(capacity=None, *, buffer=None, growable=False, resource=None)

    A bump arena.

    Parameters
    ----------
    capacity : int, optional
        Bytes of the first region. Required unless ``buffer`` is given.
        Memory comes from anonymous pages (zero-filled, costing nothing
        until touched) unless ``resource`` says otherwise.
    buffer : writable buffer, optional
        Carve from this object's memory instead (``bytearray``, a numpy
        array, ``multiprocessing.shared_memory.SharedMemory.buf``...). It is
        kept alive (and locked against resizing) while the arena lives.
        ``capacity``, if given, uses only its first bytes. The usable
        capacity starts at the first 16-byte boundary and is a multiple of
        16 (the grain every push is rounded to).
    growable : bool
        Fixed capacity by default: a request that does not fit fails. A
        growable arena chains further blocks (each at least twice the last)
        and never moves earlier allocations. Padding at the end of a block
        that a request did not fit in is stranded until a rewind below it.
    resource : Resource, optional
        Where the first region (unless ``buffer``) and further blocks come
        from; anonymous pages by default.

    Raises
    ------
    ValueError
        For a capacity that is not positive or above 2**48.
    TypeError
        For a buffer that is not writable and contiguous.
    MemoryError
        When the system refuses the memory.

    Notes
    -----
    Thread-safety: one owner at a time. An arena is not locked; share it
    between threads only with your own synchronisation (or use one arena
    per thread).
    """

    def __cinit__(self, capacity=None, *, buffer=None, bint growable=False, Resource resource=None):
        cdef size_t cap = 0, skip, usable
        cdef void* region = NULL
        cdef const dod_resource* source = dod_pages_resource() if resource is None else &resource.resource
        if capacity is not None:
            cap_obj = PyNumber_Index(capacity)
            if cap_obj <= 0:
                raise ValueError(f"capacity must be positive, got {capacity!r}")
            if cap_obj > <object>_MAX_CAPACITY:
                raise ValueError(f"capacity {capacity!r} is absurd (more than 2**48 bytes)")
            cap = <size_t>cap_obj
        elif buffer is None:
            raise TypeError("Arena() needs a capacity or a buffer")
        if buffer is not None:
            try:
                PyObject_GetBuffer(buffer, &self._buffer, PyBUF_CONTIG)
            except (BufferError, TypeError, ValueError) as e:
                raise TypeError(f"buffer must be a writable, contiguous buffer: {e}") from e
            self._has_buffer = True
            if capacity is None:
                cap = <size_t>self._buffer.len
            elif cap > <size_t>self._buffer.len:
                raise ValueError(f"capacity {cap} is larger than the buffer ({self._buffer.len} bytes)")
            if cap == 0:
                raise ValueError("buffer is empty")
            region = self._buffer.buf
            self._first.size = 0
        else:
            cap = (cap + DOD_ARENA_GRAIN - 1) & ~(<size_t>DOD_ARENA_GRAIN - 1)
            region = dod_resource_allocate_from_python(resource, source, cap, _BLOCK_ALIGN)
            if region == NULL:
                raise MemoryError(f"could not obtain {cap} bytes for an arena")
            self._region = region
            self._first_source = source
            self._first.size = cap
        # Keep the grain invariant: base 16-aligned, capacity a multiple of 16.
        skip = dod_pad_for(<uintptr_t>region, DOD_ARENA_GRAIN)
        if cap < skip + DOD_ARENA_GRAIN:
            raise ValueError(f"buffer too small for an arena ({cap} bytes, at least {skip + DOD_ARENA_GRAIN} needed here)")
        usable = (cap - skip) & ~(<size_t>DOD_ARENA_GRAIN - 1)
        self._first.base = <char*>region + skip
        self._first.capacity = usable
        self.engine.base = self._first.base
        self.engine.capacity = usable
        self.engine.block = &self._first
        self.growable_ = growable
        if growable:
            self._upstream = resource if resource is not None else Resource.wrap(dod_pages_resource(), None, "pages", True)
            self.engine.upstream = &self._upstream.resource
            self.engine.block_size = cap
        elif resource is not None:
            self._upstream = resource       # keep the first region's source alive

    def __dealloc__(self):
        cdef dod_arena_block* b = self._first.next
        cdef dod_arena_block* nxt
        while b != NULL:
            nxt = b.next
            dod_resource_deallocate(self.engine.upstream, b, b.size, _BLOCK_ALIGN)
            b = nxt
        if self._has_buffer:
            PyBuffer_Release(&self._buffer)
        elif self._region != NULL:
            dod_resource_deallocate(self._first_source, self._region, self._first.size, _BLOCK_ALIGN)

    # -------------------------------------------------------- pins (dod._lease)

    cdef size_t _pinned_above(self, size_t position) noexcept:
        """Highest end of a live pin above `position` (0 when none)."""
        return range_pins_top_above(&self._pins, position)

    cdef int _release_to(self, size_t position, bint unchecked) except -1:
        cdef size_t pinned
        if not unchecked:
            pinned = self._pinned_above(position)
            if pinned:
                raise BufferError(
                    f"arrays carved from this arena are still alive up to position {pinned}, "
                    f"above the requested {position}; delete them (del, or let them go out of "
                    "scope) first, or pass unchecked=True if you own the risk of aliasing")
        dod_arena_rewind(&self.engine, position)
        range_pins_close(&self._pins)
        return 0

    # -------------------------------------------------------- carving arrays

    cdef object _carve(self, object shape, object dtype, object align, bint zero):
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef size_t before, end, peak, allocations
        cdef RangePin L
        cdef void* p
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &req)
        before = dod_arena_mark(&self.engine)
        peak = self.engine.peak
        allocations = self.engine.allocations
        p = dod_arena_push(&self.engine, req.nbytes, req.alignment)
        if p == NULL:
            raise MemoryError(
                f"arena exhausted: {req.nbytes} bytes (alignment {req.alignment}) requested, "
                f"{self.available} available of {self.capacity}"
                + ("" if self.growable_ else "; pass growable=True to chain further blocks"))
        end = dod_arena_mark(&self.engine)
        try:
            L = range_pin_cover(&self._pins, self, end - req.nbytes, end)
            if zero:
                memset(p, 0, req.nbytes)
            return wrap_memory(p, &req, dt, L)
        except BaseException:
            dod_arena_rewind(&self.engine, before)
            self.engine.peak = peak
            self.engine.allocations = allocations
            raise

    def empty(self, shape, dtype=float, *, align=None):
        """A new uninitialised array carved from the arena.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory; it keeps the arena alive, and while it is
            alive a checked :meth:`rewind` or :meth:`reset` below it raises
            BufferError.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed`` counter on exhaustion). Thread-safety: one owner at a time (the arena is not locked).
        """
        return self._carve(shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`empty`, filled with zeros.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory, as from :meth:`empty`.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed`` counter on exhaustion). Thread-safety: one owner at a time (the arena is not locked).
        """
        return self._carve(shape, dtype, align, True)

    def full(self, shape, fill_value, dtype=None, *, align=None):
        """As :meth:`empty`, filled with `fill_value`.

        Parameters
        ----------
        shape : int or tuple of int
        fill_value : scalar
        dtype : numpy dtype, optional
            Defaults to the type of `fill_value`.
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory, as from :meth:`empty`.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed`` counter on exhaustion). Thread-safety: one owner at a time (the arena is not locked).
        """
        if dtype is None:
            dtype = np.asarray(fill_value).dtype
        arr = self._carve(shape, dtype, align, False)
        arr.fill(fill_value)
        return arr

    def empty_like(self, prototype, dtype=None, *, align=None):
        """As :meth:`empty`, with the shape (and dtype, unless given) of `prototype`.

        Parameters
        ----------
        prototype : array_like
        dtype : numpy dtype, optional
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory, as from :meth:`empty`.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed`` counter on exhaustion). Thread-safety: one owner at a time (the arena is not locked).
        """
        prototype = np.asarray(prototype)
        return self._carve(prototype.shape, prototype.dtype if dtype is None else dtype, align, False)

    def zeros_like(self, prototype, dtype=None, *, align=None):
        """As :meth:`zeros`, with the shape (and dtype, unless given) of `prototype`.

        Parameters
        ----------
        prototype : array_like
        dtype : numpy dtype, optional
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory, as from :meth:`empty`.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For an object dtype.
        ValueError
            For negative dimensions or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed`` counter on exhaustion). Thread-safety: one owner at a time (the arena is not locked).
        """
        prototype = np.asarray(prototype)
        return self._carve(prototype.shape, prototype.dtype if dtype is None else dtype, align, True)

    def array(self, obj, dtype=None, *, align=None):
        """A copy of array-like `obj` in arena memory (C order).

        Parameters
        ----------
        obj : array_like
            Any layout and byte order is read (strided, byte-swapped,
            misaligned), converted as ``numpy.asarray(obj, dtype)`` would.
        dtype : numpy dtype, optional
            Default: obj's dtype.
        align : int, optional
            A power of two; default 16, or the dtype's alignment if larger.

        Returns
        -------
        numpy.ndarray
            A view of arena memory, as from :meth:`empty`.

        Raises
        ------
        MemoryError
            When the arena is exhausted (counted in ``failed``).
        TypeError
            For Python objects, an object dtype, or numbers that do not
            convert to `dtype`.
        ValueError
            For an array-like numpy cannot make rectangular, or a bad alignment.

        Notes
        -----
        The arena is unchanged by a failed call (apart from the ``failed``
        counter on exhaustion). Thread-safety: one owner at a time (the arena
        is not locked).
        """
        # the one input gate (dod._ndarray): no objects, any layout
        src = input_array(obj, dtype, "obj", -1, None, "any", "unsafe")
        arr = self._carve(src.shape, src.dtype if dtype is None else dtype, align, False)
        np.copyto(arr, src, casting="unsafe")
        return arr

    # -------------------------------------------------------- marks, scopes, reset

    def mark(self):
        """The current position, to :meth:`rewind` to later.

        Returns
        -------
        Mark

        Notes
        -----
        Thread-safety: one owner at a time (the arena is not locked).
        """
        cdef Mark m = Mark.__new__(Mark)
        m.arena = self
        m.position = dod_arena_mark(&self.engine)
        range_pins_close(&self._pins)      # arrays after the mark get their own pin
        return m

    def rewind(self, Mark mark not None, *, bint unchecked=False):
        """Free everything allocated after `mark`.

        Parameters
        ----------
        mark : Mark
            From :meth:`mark` on this arena.
        unchecked : bool, default False
            Rewind even while arrays carved after the mark are alive (they then
            show memory that later pushes reuse).

        Raises
        ------
        ValueError
            For a mark of another arena, or one above the current position
            (taken before an earlier rewind or reset).
        BufferError
            When an array carved after the mark is still alive (unless
            ``unchecked``).

        Notes
        -----
        Nothing changes when it raises. Thread-safety: one owner at a time (the arena is not locked).
        """
        if mark.arena is not self:
            raise ValueError("that mark belongs to another arena")
        if mark.position > dod_arena_mark(&self.engine):
            raise ValueError(
                f"mark at position {mark.position} is beyond the current position "
                f"{dod_arena_mark(&self.engine)} (it was taken before a rewind or reset)")
        self._release_to(mark.position, unchecked)

    def reset(self, *, bint unchecked=False):
        """Free everything.

        Parameters
        ----------
        unchecked : bool, default False
            As for :meth:`rewind`.

        Raises
        ------
        BufferError
            While arrays are alive (unless ``unchecked``); nothing changes.

        Notes
        -----
        Thread-safety: one owner at a time (the arena is not locked).
        """
        self._release_to(0, unchecked)

    def scope(self):
        """A context manager: mark on enter, rewind on exit (``with arena.scope() as a:``).

        Returns
        -------
        Scope
            Its ``__enter__`` returns the arena.

        Raises
        ------
        BufferError
            On a normal exit, when an array carved inside is still alive (``del``
            them, or carve them in a function called inside the block).

        Notes
        -----
        When the block raises, the rewind happens only if no array of the scope
        is still alive (the traceback often holds some); otherwise the arena is
        left as it is and the original exception propagates. Thread-safety: one owner at a time (the arena is not locked).
        """
        cdef Scope s = Scope.__new__(Scope)
        s.arena = self
        return s

    def numpy(self, *, align=64):
        """numpy's own data allocations from this arena for a ``with`` block (NEP 49).

        ``with arena.numpy():`` installs a numpy data-memory handler for the
        current context (thread / contextvar) and restores the previous one on
        exit. Arrays still alive at the end keep valid memory (the arena rewinds
        only above them) and are reported; see
        :class:`dod.numpy_memory.NumpyHandler` for the rules.

        Parameters
        ----------
        align : int, default 64
            Alignment of the data of every array numpy makes in the block.

        Returns
        -------
        dod.numpy_memory.NumpyHandler
            The context manager.

        Notes
        -----
        Thread-safety: one owner at a time (the arena is not locked).
        """
        from dod.numpy_memory import NumpyHandler
        return NumpyHandler(self, align=align)

    def prefault(self, threads=1):
        """Fault every page of the arena's blocks in now.

        For a loop against a deadline: the first touch of a page costs a page
        fault (zeroing it included) inside whichever push reaches it first, and
        RSS creeps up with the arena's high-water mark. After this the whole
        capacity is resident and no push faults. Contents do not change. A
        growable arena's later blocks fault as they come (call it again after it
        grows). Memory the caller passed as ``buffer`` is faulted too. Linux:
        ``MADV_POPULATE_WRITE``, else one write per page.

        Parameters
        ----------
        threads : int, optional
            In [1, 256], default 1: the blocks are faulted in 64 MiB pieces
            over that many threads (:func:`dod.pages.prefault`: the calling
            thread and threads started for the call, joined before it
            returns); where the system backs fresh pages slowly more threads
            take less time. The same pages and bytes at any count. The GIL
            is released meanwhile.

        Returns
        -------
        int
            The bytes of pages touched.

        Raises
        ------
        ValueError
            For `threads` (nothing faulted).
        MemoryError
            When the system cannot back the pages (not enough memory, or a file
            mapping past its end; contents unchanged, part of the arena may be
            resident).

        Notes
        -----
        On kernels before Linux 5.14, which lack ``MADV_POPULATE_WRITE``, the
        pages are touched instead, and a buffer the system cannot back raises
        SIGBUS there, as any write to it would. Thread-safety: one owner at a
        time (the arena is not locked).
        """
        cdef int nt = dod_pages_threads(threads)
        cdef size_t n = self.page_ranges(NULL), total = 0
        cdef int err
        cdef dod_page_range* ranges = <dod_page_range*>PyMem_Malloc(max(n, <size_t>1) * sizeof(dod_page_range))
        if ranges == NULL:
            raise MemoryError()
        try:
            self.page_ranges(ranges)
            with nogil:
                err = dod_pages_prefault(ranges, n, nt, &total)
        finally:
            PyMem_Free(ranges)
        if err != 0:
            raise MemoryError(f"the system could not fault in this arena's memory ({os.strerror(err)}); "
                              "contents unchanged")
        return total

    cdef size_t page_ranges(self, dod_page_range* out) noexcept:
        """Every block's memory (spares included) into out (NULL: count only); how many."""
        cdef size_t n = 0
        cdef dod_arena_block* b = &self._first
        while b != NULL:
            if out != NULL:
                out[n].base = b.base
                out[n].size = b.capacity
            n += 1
            b = b.next
        return n

    # -------------------------------------------------------- composition

    def resource(self):
        """This arena as a :class:`~dod.resource.Resource`, to back other allocators.

        The resource pushes from this arena; its deallocate does nothing (memory
        returns at rewind/reset).

        Returns
        -------
        dod.resource.Resource

        Notes
        -----
        While the Resource (or anything holding it) is alive, checked rewinds and
        resets raise BufferError, since memory handed out through it is invisible
        to the arena. Thread-safety: one owner at a time (the arena is not locked).
        """
        cdef dod_resource r
        r.allocate = _arena_allocate
        r.deallocate = _arena_deallocate
        r.ctx = <void*>&self.engine
        pin = range_pin(&self._pins, self, dod_arena_mark(&self.engine), SIZE_MAX)
        range_pins_close(&self._pins)
        return Resource.wrap(&r, pin, "arena")

    # -------------------------------------------------------- statistics

    @property
    def capacity(self):
        """Bytes of all blocks (one unless growable)."""
        cdef size_t total = 0
        cdef dod_arena_block* b = &self._first
        while b != NULL:
            total += b.capacity
            b = b.next
        return total

    @property
    def used(self):
        """Position: bytes pushed, alignment padding (and stranded block tails) included."""
        return dod_arena_mark(&self.engine)

    @property
    def available(self):
        """Bytes that can still be pushed without growing (before padding)."""
        return self.capacity - dod_arena_mark(&self.engine)

    @property
    def peak(self):
        """Highest position reached."""
        cdef size_t pos = dod_arena_mark(&self.engine)
        return pos if pos > self.engine.peak else self.engine.peak

    @property
    def allocations(self):
        """Successful pushes since creation."""
        return self.engine.allocations

    @property
    def failed(self):
        """Pushes that did not fit."""
        return self.engine.failed

    @property
    def growable(self):
        """Whether the arena chains further blocks when a request does not fit."""
        return self.growable_

    @property
    def blocks(self):
        """Number of blocks in the chain (spares included)."""
        cdef size_t n = 0
        cdef dod_arena_block* b = &self._first
        while b != NULL:
            n += 1
            b = b.next
        return n

    @property
    def pinned(self):
        """Lowest position a checked rewind can reach now (live arrays sit below it)."""
        return self._pinned_above(0)

    def check(self):
        """Walk the block chain and the live pins and verify every invariant.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: one owner at a time (the arena is not locked).
        """
        cdef dod_arena* a = &self.engine
        cdef dod_arena_block* b = &self._first
        cdef dod_arena_block* prev = NULL
        cdef size_t prior = 0, n = 0
        cdef bint current_seen = False
        cdef void* p
        if <uintptr_t>a.base % DOD_ARENA_GRAIN or a.capacity % DOD_ARENA_GRAIN or a.used % DOD_ARENA_GRAIN:
            raise InvariantError("base, capacity or used is off the 16-byte grain")
        if a.used > a.capacity:
            raise InvariantError(f"used {a.used} beyond the current block's capacity {a.capacity}")
        while b != NULL:
            if b.prev != prev:
                raise InvariantError(f"block {n} has a broken back link")
            if b == a.block:
                current_seen = True
                if b.base != a.base or b.capacity != a.capacity or b.prior != a.prior:
                    raise InvariantError(f"the current block ({n}) disagrees with base/capacity/prior")
            elif not current_seen and b.prior != prior:
                raise InvariantError(f"block {n} starts at position {b.prior}, not {prior}")
            if b.capacity % DOD_ARENA_GRAIN:
                raise InvariantError(f"block {n}'s capacity is off the grain")
            if not current_seen or b == a.block:
                prior = b.prior + b.capacity
            prev = b
            b = b.next
            n += 1
        if not current_seen:
            raise InvariantError("the current block is not in the chain")
        if a.upstream == NULL and n != 1:
            raise InvariantError(f"a fixed arena has {n} blocks")
        n = 0
        p = self._pins.head
        while p != NULL:
            if (<RangePin>p).owner is not self or (<RangePin>p).start > (<RangePin>p).end:
                raise InvariantError("a live pin belongs to another arena or has start > end")
            n += 1
            p = (<RangePin>p).next
        if <Py_ssize_t>n != self._pins.live:
            raise InvariantError(f"{n} pins on the list, {self._pins.live} counted")
        return True

    def stats(self):
        """The shared statistics as a dict.

        Returns
        -------
        dict
            ``capacity``, ``used``, ``available``, ``peak``, ``allocations``,
            ``failed`` (bytes for the first four, counts for the last two).

        Notes
        -----
        Thread-safety: one owner at a time (the arena is not locked).
        """
        return {
            "capacity": self.capacity,
            "used": self.used,
            "available": self.available,
            "peak": self.peak,
            "allocations": self.allocations,
            "failed": self.failed,
        }

    def __repr__(self):
        return (f"<dod.Arena {'growable' if self.growable_ else 'fixed'} "
                f"capacity={fmt_bytes(self.capacity)} used={fmt_bytes(self.used)} "
                f"peak={fmt_bytes(self.peak)} allocations={self.allocations} "
                f"failed={self.failed} blocks={self.blocks} pinned={self.pinned}>")
