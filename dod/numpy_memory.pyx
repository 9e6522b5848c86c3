"""numpy's own data allocations from a dod arena: a NEP 49 memory handler.

``with arena.numpy():`` installs a numpy data-memory handler (NEP 49,
``PyDataMem_SetHandler``) for the current context: every array numpy makes
in the block (results, temporaries of ``a * b + c``, ``np.zeros``...) gets
its data from ``arena``; the previous handler is restored on every exit path.
numpy keeps handlers in a ``contextvars.ContextVar``: other threads (and
contexts) keep theirs.

The lifetime rule (this module is its one place; the invariants are in ``dod/numpy_memory.pxd``)
    *Never a dangle.* numpy stores the handler's capsule in every array it
    serves, and that capsule owns the handler state, which holds the arena:
    the arena lives as long as any array it served. Arrays alive when the
    block ends (escapees: returned, stored, kept by a traceback, views of
    them) keep valid memory: the block's exit rewinds the arena only down to
    the end of the highest live array (a bump arena cannot release below
    it), and reports the escapees (:attr:`NumpyHandler.escaped` and an
    :class:`~dod.errors.EscapeWarning` on a normal exit). The escapees hold
    one arena lease whose end follows the highest live one, so the arena's
    checked ``rewind``/``reset`` (and a loop's checked scratch reset) raise
    BufferError under them, as for carved arrays. A free that comes later
    (after the block, from another thread, at interpreter shutdown) only
    updates that bookkeeping: it never rewinds the arena, so it never
    touches memory the arena has handed out again.

    Inside the block, freeing the most recent live allocation rewinds the
    arena over it (and over dead ones below it) when nothing was pushed
    after it, so a loop of temporaries reuses the same bytes.

Requests
    ``malloc``, ``calloc`` (zeroed with one memset), ``realloc`` (in place
    when the array is the arena's top, else moved) and zero-size requests
    (one grain) are all served; every array is aligned to ``align`` (64 by
    default; numpy needs 16). A request that does not fit (or arrives
    outside the block, see below) goes to the previous handler and is
    counted in ``fallbacks``; its free goes back there (a pointer is the
    arena's only if the handler has a live record of it).

Nesting and bad input
    Blocks nest (on the same arena or others); each falls back to the one it
    was entered in. A scope inside a block is allowed; a block on an arena
    with a live ``scope()`` raises RuntimeError at entry (the two exits would
    rewind the same arena in an interleaved order), nothing changed.
    Entering the same block object twice raises RuntimeError; a block on an
    arena that has no memory (a closed one) raises ValueError; nothing
    changes when they raise. Blocks must end in reverse order of entry; one
    ended out of order stops serving (its requests fall back) and leaves
    the handler that is installed in place.

Thread-safety
    The handler functions may be called from any thread: the state is
    guarded by a mutex that is never held across a call into the previous
    handler. The arena itself keeps its rule (one owner at a time): while a
    block is active, use the arena only from threads that hold the GIL.
    Enter and exit a block on one thread (``with`` does).

Cython
    ``from dod.numpy_memory cimport PyDataMem_Handler, dod_npmem,
    NumpyHandler``: ``handler.state.handler`` is the struct numpy calls.
"""
cimport cython
cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid
from cpython.ref cimport PyObject, Py_XINCREF, Py_XDECREF
from cpython.mem cimport PyMem_RawMalloc, PyMem_RawCalloc, PyMem_RawRealloc, PyMem_RawFree
from libc.stdint cimport uintptr_t, SIZE_MAX
from libc.string cimport memcpy, memset, strncpy

from dod.atomics cimport dod_mutex_init, dod_mutex_destroy, dod_mutex_lock, dod_mutex_unlock
from dod._core cimport dod_is_pow2, dod_mul_overflow, dod_poison
from dod.arena cimport (Arena, dod_arena, dod_arena_push, dod_arena_mark, dod_arena_rewind,
                        DOD_ARENA_GRAIN)
from dod._lease cimport RangePin, range_pin

import warnings

from dod.errors import EscapeWarning, InvariantError

cnp.import_array()

HANDLER_NAME = "dod_arena"
"""The name numpy reports for dod's handler (``numpy._core.multiarray.get_handler_name()``)."""

cdef enum:
    # Dead records this close to the top are offered to a new request before
    # the arena is pushed: a temporary that dies after the next one is made
    # (t = src * 2 in a loop) leaves a hole the one after reuses.
    _REUSE_DEPTH = 8
    _FIRST_RECORDS = 64
    _FIRST_SLOTS = 128          # twice the records: the hash stays at most half full

cdef size_t _NOT_FOUND = SIZE_MAX


# ---------------------------------------------------------------- records and their hash
# All of these run with s.lock held.

cdef inline size_t _slot_of(const dod_npmem* s, const char* p) noexcept nogil:
    # Fibonacci hashing of the address without its always-zero low bits.
    return <size_t>(((<uintptr_t>p >> 4) * <uintptr_t>0x9E3779B97F4A7C15) >> 17) & s.mask


cdef size_t _find(const dod_npmem* s, const char* p, size_t size, bint match_size) noexcept nogil:
    """Hash slot of the live record of `p` (of `size` first, when two alias
    after an unchecked reset), or _NOT_FOUND."""
    cdef size_t i = _slot_of(s, p), first = _NOT_FOUND, idx
    while s.slots[i] != 0:
        idx = s.slots[i] - 1
        if s.rec[idx].ptr == p:
            if not match_size or s.rec[idx].size == size:
                return i
            if first == _NOT_FOUND:
                first = i
        i = (i + 1) & s.mask
    return first


cdef void _unhash(dod_npmem* s, size_t i) noexcept nogil:
    """Remove slot i (linear probing: shift later entries of the run back)."""
    cdef size_t j = i, home
    s.slots[i] = 0
    s.hashed -= 1
    while True:
        j = (j + 1) & s.mask
        if s.slots[j] == 0:
            return
        home = _slot_of(s, s.rec[s.slots[j] - 1].ptr)
        # The entry at j may move to i when its home is not cyclically in (i, j].
        if (j > i and (home <= i or home > j)) or (j < i and (home <= i and home > j)):
            s.slots[i] = s.slots[j]
            s.slots[j] = 0
            i = j


cdef void _hash(dod_npmem* s, size_t idx) noexcept nogil:
    cdef size_t i = _slot_of(s, s.rec[idx].ptr)
    while s.slots[i] != 0:
        i = (i + 1) & s.mask
    s.slots[i] = idx + 1
    s.hashed += 1


cdef bint _reserve(dod_npmem* s) noexcept nogil:
    """Room for one more record and its hash entry; False when memory is refused
    (the request then falls back). Growth is rare: capacities double and stay."""
    cdef dod_npmem_record* rec
    cdef size_t* slots
    cdef size_t* old
    cdef size_t i, old_n
    if s.n == s.cap:
        rec = <dod_npmem_record*>PyMem_RawRealloc(s.rec, 2 * s.cap * sizeof(dod_npmem_record))
        if rec == NULL:
            return False
        s.rec = rec
        s.cap *= 2
    if 2 * (s.hashed + 1) > s.mask + 1:
        slots = <size_t*>PyMem_RawCalloc(2 * (s.mask + 1), sizeof(size_t))
        if slots == NULL:
            return False
        old = s.slots
        old_n = s.mask + 1
        s.slots = slots
        s.mask = 2 * old_n - 1
        s.hashed = 0
        for i in range(old_n):
            if old[i] != 0:
                _hash(s, old[i] - 1)
        PyMem_RawFree(old)
    return True


cdef inline size_t _start_of(const dod_npmem_record* r) noexcept nogil:
    """Arena position of the record's first byte (after its alignment padding)."""
    return r.end - r.room


cdef inline void _set_pin(dod_npmem* s) noexcept nogil:
    s.pin[0] = s.rec[s.n - 1].end if s.n > 0 else 0


cdef void _pop_dead(dod_npmem* s) noexcept nogil:
    """Forget dead records at the top; while active, rewind the arena over each
    one that nothing was pushed after (its bytes are dead). After the block a
    free never rewinds: the arena may have handed those bytes out again."""
    cdef dod_npmem_record* r
    while s.n > 0 and not s.rec[s.n - 1].live:
        r = &s.rec[s.n - 1]
        if s.active and dod_arena_mark(s.arena) == r.end:
            dod_arena_rewind(s.arena, r.before)
        s.n -= 1
    _set_pin(s)


cdef void* _push(dod_npmem* s, size_t size) noexcept nogil:
    """An arena allocation with its record (lock held), or NULL: the caller falls back."""
    cdef size_t before, want = size if size > 0 else 1, k, lo
    cdef size_t rounded = (want + (DOD_ARENA_GRAIN - 1)) & ~(<size_t>DOD_ARENA_GRAIN - 1)
    cdef char* p
    cdef dod_npmem_record* r
    if not s.active or not _reserve(s):
        return NULL
    k = s.n
    lo = s.n - _REUSE_DEPTH if s.n > _REUSE_DEPTH else 0
    while k > lo:
        k -= 1
        r = &s.rec[k]
        if not r.live and r.room >= rounded:
            r.size = size
            r.use = s.use
            r.live = True
            _hash(s, k)
            s.allocations += 1
            s.live += 1
            s.live_bytes += size
            if s.live_bytes > s.peak_bytes:
                s.peak_bytes = s.live_bytes
            return r.ptr
    before = dod_arena_mark(s.arena)
    p = <char*>dod_arena_push(s.arena, want, s.align)
    if p == NULL:
        return NULL
    r = &s.rec[s.n]
    r.ptr = p
    r.size = size
    r.before = before
    r.end = dod_arena_mark(s.arena)
    r.room = rounded                # the push took exactly this after its padding
    r.use = s.use
    r.live = True
    _hash(s, s.n)
    s.n += 1
    s.allocations += 1
    s.live += 1
    s.live_bytes += size
    if s.live_bytes > s.peak_bytes:
        s.peak_bytes = s.live_bytes
    _set_pin(s)
    return p


# ---------------------------------------------------------------- the handler numpy calls

cdef void* _fallback_malloc(dod_npmem* s, size_t size, size_t nelem, bint zero) noexcept nogil:
    cdef void* p
    if zero:
        p = s.prev.calloc(s.prev.ctx, nelem, size)
    else:
        p = s.prev.malloc(s.prev.ctx, size)
    dod_mutex_lock(&s.lock)
    s.fallbacks += 1
    if p != NULL:
        s.fallback_live += 1
    dod_mutex_unlock(&s.lock)
    return p


cdef void* _np_malloc(void* ctx, size_t size) noexcept nogil:
    cdef dod_npmem* s = <dod_npmem*>ctx
    cdef void* p
    dod_mutex_lock(&s.lock)
    p = _push(s, size)
    dod_mutex_unlock(&s.lock)
    if p == NULL:
        p = _fallback_malloc(s, size, 0, False)
    return p


cdef void* _np_calloc(void* ctx, size_t nelem, size_t elsize) noexcept nogil:
    cdef dod_npmem* s = <dod_npmem*>ctx
    cdef size_t size
    cdef void* p
    if dod_mul_overflow(nelem, elsize, &size):
        return _fallback_malloc(s, elsize, nelem, True)     # prev refuses it as calloc would
    dod_mutex_lock(&s.lock)
    p = _push(s, size)
    dod_mutex_unlock(&s.lock)
    if p == NULL:
        return _fallback_malloc(s, elsize, nelem, True)
    memset(p, 0, size)
    return p


cdef void _np_free(void* ctx, void* ptr, size_t size) noexcept nogil:
    cdef dod_npmem* s = <dod_npmem*>ctx
    cdef size_t i, idx
    if ptr == NULL:
        return
    dod_mutex_lock(&s.lock)
    i = _find(s, <char*>ptr, size, True)
    if i == _NOT_FOUND:
        s.fallback_live -= 1
        dod_mutex_unlock(&s.lock)
        s.prev.free(s.prev.ctx, ptr, size)
        return
    idx = s.slots[i] - 1
    _unhash(s, i)
    s.rec[idx].live = False
    s.live -= 1
    s.live_bytes -= s.rec[idx].size
    s.frees += 1
    _pop_dead(s)
    dod_mutex_unlock(&s.lock)


cdef void* _np_realloc(void* ctx, void* ptr, size_t new_size) noexcept nogil:
    cdef dod_npmem* s = <dod_npmem*>ctx
    cdef size_t i, idx, old_size, want, used
    cdef dod_npmem_record* r
    cdef dod_arena* a = s.arena
    cdef char* p = <char*>ptr
    cdef void* q
    if ptr == NULL:
        return _np_malloc(ctx, new_size)
    dod_mutex_lock(&s.lock)
    i = _find(s, p, 0, False)
    if i == _NOT_FOUND:
        dod_mutex_unlock(&s.lock)
        return s.prev.realloc(s.prev.ctx, ptr, new_size)
    idx = s.slots[i] - 1
    r = &s.rec[idx]
    old_size = r.size
    want = new_size if new_size > 0 else 1
    # In place: the top record, nothing pushed after it, in the current block.
    if (s.active and idx == s.n - 1 and dod_arena_mark(a) == r.end
            and p >= a.base and p < a.base + a.capacity):
        used = <size_t>(p - a.base) + ((want + (DOD_ARENA_GRAIN - 1)) & ~(<size_t>DOD_ARENA_GRAIN - 1))
        if used <= a.capacity:
            if used < a.used:
                dod_poison(a.base + used, a.used - used)
            a.used = used
            r.end = a.prior + used
            r.room = used - <size_t>(p - a.base)
            s.live_bytes = s.live_bytes - old_size + new_size
            if s.live_bytes > s.peak_bytes:
                s.peak_bytes = s.live_bytes
            r.size = new_size
            s.reallocs += 1
            _set_pin(s)
            dod_mutex_unlock(&s.lock)
            return ptr
    dod_mutex_unlock(&s.lock)
    # Moved: a new allocation (arena or fallback), the bytes, then the old one freed.
    q = _np_malloc(ctx, new_size)
    if q == NULL:
        return NULL                 # as realloc: the old block is untouched
    memcpy(q, ptr, old_size if old_size < new_size else new_size)
    _np_free(ctx, ptr, old_size)
    dod_mutex_lock(&s.lock)
    s.reallocs += 1
    dod_mutex_unlock(&s.lock)
    return q


cdef void _capsule_destructor(object capsule) noexcept:
    """The last array served (or the handler object) is gone: free the state and
    release the arena, its lease and the previous handler's capsule."""
    cdef dod_npmem* s = <dod_npmem*>PyCapsule_GetPointer(capsule, "mem_handler")
    if s == NULL:
        return
    PyMem_RawFree(s.rec)
    PyMem_RawFree(s.slots)
    dod_mutex_destroy(&s.lock)
    Py_XDECREF(<PyObject*>s.refs)
    PyMem_RawFree(s)


cdef inline size_t _arena_has_memory(Arena arena) noexcept:
    return arena.engine.base != NULL and arena.engine.capacity > 0


# ---------------------------------------------------------------- the owner and its Python face

@cython.final
cdef class NumpyHandler:
    """numpy's data allocations from an arena for a ``with`` block; from :meth:`dod.arena.Arena.numpy`.

    ``with arena.numpy(align=64) as h:`` makes every numpy data allocation of
    the current context come from ``arena`` until the block ends; the module
    docstring states the escape rule, nesting and thread-safety. After the
    block: :attr:`escaped` lists ``(position, nbytes)`` of the arrays still
    alive at its end, :meth:`stats` the handler's accounting.

    Parameters
    ----------
    arena : Arena
        Where the arrays' data comes from.
    align : int, default 64
        Alignment of every array served: a power of two in [16, 4096].

    Attributes
    ----------
    arena : Arena
    escaped : list of tuple
        ``(position, nbytes)`` of the arrays alive at the last end.

    Raises
    ------
    ValueError
        For an ``align`` that is not a power of two in [16, 4096], or an
        arena without memory.
    RuntimeError
        When entered twice, or inside a live scope of the same arena.

    Notes
    -----
    Thread-safety: the handler functions may be called from any thread;
    enter and exit a block on one thread (``with`` does). The arena keeps
    its rule (one owner at a time).
    """

    def __cinit__(self, Arena arena not None, *, align=64):
        cdef size_t al
        if not isinstance(align, int) or isinstance(align, bool):
            raise TypeError(f"align must be an int, not {type(align).__name__}")
        if not (16 <= align <= 4096) or not dod_is_pow2(<size_t>align):
            raise ValueError(f"align must be a power of two in [16, 4096], not {align!r}")
        if not _arena_has_memory(arena):
            raise ValueError("this arena has no memory (it is closed)")
        al = <size_t>align
        lease = range_pin(&arena._pins, arena, 0, 0)   # pins nothing until an array is served
        cdef size_t* pin = &(<RangePin>lease).end
        cdef dod_npmem* s = <dod_npmem*>PyMem_RawCalloc(1, sizeof(dod_npmem))
        if s == NULL:
            raise MemoryError()
        s.rec = <dod_npmem_record*>PyMem_RawMalloc(_FIRST_RECORDS * sizeof(dod_npmem_record))
        s.slots = <size_t*>PyMem_RawCalloc(_FIRST_SLOTS, sizeof(size_t))
        if s.rec == NULL or s.slots == NULL or dod_mutex_init(&s.lock) != 0:
            PyMem_RawFree(s.rec)
            PyMem_RawFree(s.slots)
            PyMem_RawFree(s)
            raise MemoryError()
        s.cap = _FIRST_RECORDS
        s.mask = _FIRST_SLOTS - 1
        s.arena = &arena.engine
        s.align = al
        s.pin = pin
        strncpy(s.handler.name, b"dod_arena", 126)
        s.handler.version = 1
        s.handler.allocator.ctx = <void*>s
        s.handler.allocator.malloc = _np_malloc
        s.handler.allocator.calloc = _np_calloc
        s.handler.allocator.realloc = _np_realloc
        s.handler.allocator.free = _np_free
        refs = (arena, lease, None)
        Py_XINCREF(<PyObject*>refs)
        s.refs = <void*>refs
        try:
            self.capsule = PyCapsule_New(<void*>s, "mem_handler", _capsule_destructor)
        except BaseException:
            _free_uncapsuled(s)
            raise
        self.state = s
        self.arena = arena
        self.escaped = []

    def __init__(self, Arena arena not None, *, align=64):
        pass

    # -------------------------------------------------------- begin / end (also the loop's)

    cdef int _begin(self) except -1:
        """Install the handler for this context. Returns 1 (and changes nothing)
        when the handler in force differs from the one this state falls back
        to while that one still owns live arrays (make a new NumpyHandler)."""
        cdef dod_npmem* s = self.state
        cdef PyDataMem_Handler* prev
        if s.active:
            raise RuntimeError("this numpy handler is already active")
        if not _arena_has_memory(self.arena):
            raise ValueError("this arena has no memory (it is closed)")
        current = cnp.PyDataMem_GetHandler()
        refs = <tuple>s.refs
        if current is not refs[2]:
            if s.fallback_live and refs[2] is not None:
                return 1
            if not PyCapsule_IsValid(current, "mem_handler"):
                raise RuntimeError("numpy's current data handler is not a 'mem_handler' capsule")
            prev = <PyDataMem_Handler*>PyCapsule_GetPointer(current, "mem_handler")
            new_refs = (refs[0], refs[1], current)
            Py_XINCREF(<PyObject*>new_refs)
            dod_mutex_lock(&s.lock)
            s.prev = prev.allocator
            old = <object>s.refs
            s.refs = <void*>new_refs
            dod_mutex_unlock(&s.lock)
            Py_XDECREF(<PyObject*>old)
        dod_mutex_lock(&s.lock)
        s.use += 1
        s.floor = dod_arena_mark(s.arena)
        s.active = True
        dod_mutex_unlock(&s.lock)
        try:
            cnp.PyDataMem_SetHandler(self.capsule)
        except BaseException:
            dod_mutex_lock(&s.lock)
            s.active = False
            dod_mutex_unlock(&s.lock)
            raise
        self.started = s.use
        return 0

    cdef int _end(self, bint report) except -1:
        """Restore the previous handler (when ours is the one in force), stop
        serving, rewind above the live arrays and (report) list the escapees."""
        cdef dod_npmem* s = self.state
        cdef Arena arena = self.arena
        cdef size_t k, floor, target, pinned
        cdef bint in_order
        if not s.active:
            return 0
        in_order = cnp.PyDataMem_GetHandler() is self.capsule
        if in_order:
            cnp.PyDataMem_SetHandler((<tuple>s.refs)[2])
        dod_mutex_lock(&s.lock)
        s.active = False
        floor = s.floor
        dod_mutex_unlock(&s.lock)
        if report:
            escaped = []
            dod_mutex_lock(&s.lock)
            for k in range(s.n):
                if s.rec[k].live and s.rec[k].use == self.started:
                    escaped.append((_start_of(&s.rec[k]), s.rec[k].size))
            dod_mutex_unlock(&s.lock)
            self.escaped = escaped
        # Everything above the highest live thing (ours, carved arrays, pins) is dead.
        pinned = arena._pinned_above(floor)
        target = pinned if pinned > floor else floor
        if target < dod_arena_mark(&arena.engine):
            arena._release_to(target, True)
        if not in_order:
            raise RuntimeError("numpy handler blocks ended out of order: the handler in force "
                               "was not this block's, so it was left in place")
        return 0

    def __enter__(self):
        """Install the handler for the current context; returns the handler.
        RuntimeError when entered twice or inside a live scope of the arena."""
        if self.entered:
            raise RuntimeError("a numpy handler block can be entered once")
        if self.arena._scopes > 0:
            # The block's exit rewinds the arena; inside a scope that rewind
            # and the scope's would interleave. Open the block first, or use
            # another arena.
            raise RuntimeError("arena.numpy() inside a live scope of the same arena: enter the "
                               "block outside the scope (a scope inside a block is fine)")
        if self._begin() != 0:      # a fresh object has no fallbacks: cannot happen
            raise RuntimeError("numpy handler could not begin")
        self.entered = True
        return self

    def __exit__(self, exc_type, exc, tb):
        """Restore the previous handler and rewind the arena down to the
        highest live array (escapees are recorded in :attr:`escaped`)."""
        cdef Py_ssize_t n
        if not self.entered or self.exited:
            return False
        self.exited = True
        try:
            self._end(True)
        except RuntimeError:
            if exc_type is None:
                raise
            return False
        n = len(self.escaped)
        if n and exc_type is None:
            total = sum(b for _, b in self.escaped)
            warnings.warn(
                f"{n} numpy array(s) ({total} bytes) made in an arena.numpy() block are still "
                f"alive at its end; their memory stays valid (the arena rewound only to position "
                f"{self.arena.used}) and returns at a later rewind or reset once they are gone",
                EscapeWarning, stacklevel=2)
        return False

    # -------------------------------------------------------- introspection

    @property
    def active(self):
        """True between enter and exit: numpy allocations of this context come from the arena."""
        return bool(self.state.active)

    @property
    def name(self):
        """The handler name numpy reports: ``"dod_arena"``."""
        return HANDLER_NAME

    @property
    def align(self):
        """Alignment of every array served."""
        return self.state.align

    @property
    def live(self):
        """Arrays (data blocks) served from the arena and not yet freed, at any time."""
        return self.state.live

    @property
    def pinned(self):
        """Arena position below which the live arrays of this handler keep a checked rewind (0: none)."""
        return self.state.pin[0]

    def stats(self):
        """The common statistics, then this handler's own, as a dict.

        Returns
        -------
        dict
            capacity, available: the arena's. used: bytes numpy asked for that
            are live (served from the arena). peak: highest ``used``.
            allocations: requests served from the arena. failed: requests that did
            not fit (or came outside the block) and went to the previous handler
            (also ``fallbacks``). Extras: live (arrays), frees, reallocs,
            fallbacks, fallback_live (previous handler's arrays not yet freed),
            pinned.

        Notes
        -----
        Thread-safety: any thread.
        """
        cdef dod_npmem* s = self.state
        dod_mutex_lock(&s.lock)
        d = {
            "capacity": self.arena.capacity,
            "used": s.live_bytes,
            "available": self.arena.available,
            "peak": s.peak_bytes,
            "allocations": s.allocations,
            "failed": s.fallbacks,
            "live": s.live,
            "frees": s.frees,
            "reallocs": s.reallocs,
            "fallbacks": s.fallbacks,
            "fallback_live": s.fallback_live,
            "pinned": s.pin[0],
        }
        dod_mutex_unlock(&s.lock)
        return d

    def check(self):
        """Walk the records and the hash.

        Raises
        ------
        dod.InvariantError
            On the first broken invariant (stated in dod/numpy_memory.pxd).

        Notes
        -----
        Thread-safety: any thread.
        """
        cdef dod_npmem* s = self.state
        cdef size_t k, live = 0, nbytes = 0, hashed = 0, i
        problem = None
        dod_mutex_lock(&s.lock)
        for k in range(s.n):
            if s.rec[k].live:
                live += 1
                nbytes += s.rec[k].size
                if _find(s, s.rec[k].ptr, s.rec[k].size, True) == _NOT_FOUND:
                    problem = f"live record {k} is not in the hash"
                if s.rec[k].end <= s.rec[k].before:
                    problem = f"record {k} has an empty range"
        for i in range(s.mask + 1):
            if s.slots[i] != 0:
                hashed += 1
                if s.slots[i] > s.n or not s.rec[s.slots[i] - 1].live:
                    problem = f"hash slot {i} names a record that is not live"
        if problem is None and s.n > 0 and not s.rec[s.n - 1].live:
            problem = "the top record is dead (it should have been popped)"
        if problem is None and s.pin[0] != (s.rec[s.n - 1].end if s.n else 0):
            problem = f"pin {s.pin[0]} is not the top record's end"
        if problem is None and (live != s.live or nbytes != s.live_bytes or hashed != s.hashed):
            problem = (f"counters disagree: live {s.live} vs {live}, bytes {s.live_bytes} vs "
                       f"{nbytes}, hashed {s.hashed} vs {hashed}")
        dod_mutex_unlock(&s.lock)
        if problem is not None:
            raise InvariantError(f"numpy handler: {problem}")

    def __repr__(self):
        s = self.stats()
        return (f"<dod.NumpyHandler {'active' if self.active else 'idle'} align={self.align} "
                f"allocations={s['allocations']} live={s['live']} fallbacks={s['fallbacks']} "
                f"escaped={len(self.escaped)}>")


cdef void _free_uncapsuled(dod_npmem* s) noexcept:
    PyMem_RawFree(s.rec)
    PyMem_RawFree(s.slots)
    dod_mutex_destroy(&s.lock)
    Py_XDECREF(<PyObject*>s.refs)
    PyMem_RawFree(s)


cdef extern from "numpy/arrayobject.h":
    # The raw call: NULL restores numpy's default handler for this context.
    object _set_handler_raw "PyDataMem_SetHandler"(PyObject* handler)


def install_default():
    """Install numpy's default data handler in the current context.

    For recovery after blocks ended out of order.

    Returns
    -------
    PyCapsule
        The handler that was in force.

    Notes
    -----
    Thread-safety: acts on the current context (thread / contextvar) only.
    """
    return _set_handler_raw(NULL)


def handler_name(arr=None):
    """numpy's name for the handler of `arr` (or the current one).

    A thin wrapper of ``numpy._core.multiarray.get_handler_name``.

    Parameters
    ----------
    arr : numpy.ndarray, optional
        Default: the handler in force in the current context.

    Returns
    -------
    str or None
        ``"dod_arena"`` inside a block.

    Notes
    -----
    Thread-safety: any thread.
    """
    from numpy._core.multiarray import get_handler_name
    return get_handler_name() if arr is None else get_handler_name(arr)
