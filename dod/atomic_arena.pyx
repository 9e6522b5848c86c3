"""The one-word atomic arena: a bump allocator that many threads share.

An :class:`AtomicArena` keeps all the state its allocation path touches in one
64-bit word (block index, size factor, position). Allocating is one atomic
fetch-add on that word, with no compare-and-swap loop; when a block is full,
one thread installs the next block under a lock. Frees are counted per block:
a block whose every allocation has been freed is recycled into the rotation
(or, with ``evict=True``, given back to its resource).

A :class:`ThreadCache` takes a chunk of the shared word at a time and bumps
inside it without atomics, so threads that each use their own cache do not
contend on the word at all.

The overshoot envelope
    When a block runs out, every thread that allocates before the next block
    is installed pushes the position further past the end, once each, before
    waiting on the lock. The position field (55 bits) is sized so that up to
    ``max_concurrent_entrants`` threads (a power of two, default 1024) can all
    do that with the largest request at once without the carry reaching the
    size factor or block index. The constructor refuses a block size whose
    envelope does not fit. Beyond the envelope (more threads than that
    allocating at the same moment) the word is corrupted silently and memory
    may be handed out twice: set it to at least the number of threads that
    can ever allocate from the arena concurrently.

The fine print: stranded tails
    A request that does not fit in the rest of a block is not split: the
    block's last bytes are never handed out (typically half a request per
    block; up to one maximal request). A thread cache leaves the unused end of
    its chunk when it refills. Both count as freed at once, so blocks still
    drain to zero, but they are memory you do not get. Reservations are
    multiples of 16 bytes (plus ``alignment - 16`` for larger alignments).

Safety contract (the Python face)
    Arrays from :meth:`AtomicArena.empty` keep their allocation alive; the
    allocation is freed when the last array viewing it dies (there is no
    explicit free that could leave a dangling array). :meth:`AtomicArena.resize`
    shrinks in place or copies to a new allocation. Nothing a Python caller
    does can read freed memory.

Thread-safety
    The engine (``dod_aa_allocate``/``free``, cimported) is safe from
    any number of threads without the GIL, within the envelope. The Python
    face may be used from any thread. A ThreadCache belongs to the thread that
    made it: its Python face raises RuntimeError from another thread, and the
    engine's ``dod_aa_cache_*`` functions must be called by one thread at
    a time.

Cython
    ``from dod.atomic_arena cimport AtomicArena, dod_aa_allocate,
    dod_aa_free, dod_aa_cache, dod_aa_cache_allocate, ...``;
    see ``dod/atomic_arena.pxd`` for the word layout and the checks the
    caller owns.

Where things live
    Lifetime rule: ``dod._lease.Owned`` (each array's allocation is freed
    through ``dod_aa_free`` when its last view dies).
    Fast path: ``dod_aa_allocate`` / ``dod_aa_free`` and
    ``dod_aa_cache_allocate``, inline in ``dod/atomic_arena.pxd`` (slow
    paths ``dod_aa_allocate_slow``, ``dod_aa_cache_refill`` here; the
    install of the next block and the walks over the slots in
    ``dod/_atomic_arena_blocks.pyx``).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint64_t, uintptr_t
from libc.string cimport memset, memcpy
from cpython.number cimport PyNumber_Index

from dod._core cimport dod_is_pow2
from dod.atomics cimport (dod_mutex_init, dod_mutex_destroy, dod_mutex_lock, dod_mutex_unlock,
                          dod_atomic_load_u64, dod_atomic_fetch_add_u64,
                          dod_atomic_fetch_add_relaxed_u64, dod_atomic_fetch_sub_u64,
                          dod_atomic_load_relaxed_u64)
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory
from dod._lease cimport Owned, owned
from dod.resource cimport dod_resource, Resource, dod_resource_deallocate, dod_pages_resource
from dod._atomic_arena_blocks cimport _cap_of, _evict, _install, _walk, _block_counters

import threading

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16

cdef size_t _MIN_BLOCK = 4096


# ---------------------------------------------------------------- engine slow paths

cdef void* dod_aa_refuse(dod_aa* a) noexcept nogil:
    """A request the arena can never satisfy (too big, or a ZII arena)."""
    dod_atomic_fetch_add_relaxed_u64(&a.failed, 1)
    return NULL


cdef inline void _settle(dod_aa* a, uint64_t old) noexcept nogil:
    """After an add that did not fit: if it was the first such add on its block
    (it started at or below the capacity), it closes the block's counter."""
    cdef uint64_t pos = old & DOD_AA_POS_MASK
    cdef dod_aa_block* b
    cdef uint64_t delta
    if pos > _cap_of(a, old):
        return                  # someone else closed it (or it is the initial CLOSED word)
    b = a.blocks[old >> DOD_AA_INDEX_SHIFT]
    # live = BIAS - freed  ->  handed_out - freed (wrapping arithmetic)
    delta = pos - DOD_AA_BIAS
    if dod_atomic_fetch_add_u64(&b.live, delta) + delta == 0:
        dod_aa_drained(a, b)


cdef void* dod_aa_allocate_slow(dod_aa* a, uint64_t old, size_t need,
                                        size_t alignment) noexcept nogil:
    """The add did not fit: settle the old block, install the next, add again."""
    cdef uint64_t w, pos
    cdef uintptr_t p
    while True:
        _settle(a, old)
        dod_mutex_lock(&a.lock)
        w = dod_atomic_load_u64(&a.word)
        # Closed (position past capacity): install. Open: another thread
        # installed since our add; add again (which fits, or closes it).
        if (w & DOD_AA_POS_MASK) > _cap_of(a, w):
            if not _install(a, need):
                dod_atomic_fetch_add_relaxed_u64(&a.failed, 1)
                dod_mutex_unlock(&a.lock)
                return NULL
        dod_mutex_unlock(&a.lock)
        old = dod_atomic_fetch_add_u64(&a.word, need)
        pos = old & DOD_AA_POS_MASK
        if pos + need <= _cap_of(a, old):
            p = <uintptr_t>a.blocks[old >> DOD_AA_INDEX_SHIFT].base + pos
            return <void*>((p + alignment - 1) & ~(<uintptr_t>alignment - 1))


cdef void dod_aa_drained(dod_aa* a, dod_aa_block* b) noexcept nogil:
    """b's counter reached zero: every allocation of the closed block is freed."""
    dod_mutex_lock(&a.lock)
    a.drained += 1
    if a.evict:
        _evict(a, b)
    else:
        b.next_spare = a.spares
        a.spares = b
    dod_mutex_unlock(&a.lock)


cdef bint dod_aa_owns(dod_aa* a, const void* p) noexcept nogil:
    """Is p inside one of the arena's blocks? O(blocks): a scan of the slot table.
    Exact unless a block is installed or evicted concurrently."""
    cdef size_t i
    cdef uintptr_t q = <uintptr_t>p
    for i in range(DOD_AA_MAX_BLOCKS):
        if a.slot_base[i] <= q and q < a.slot_end[i]:
            return True
    return False


cdef void* dod_aa_reallocate(dod_aa* a, void* p, size_t old_size, size_t new_size,
                                    size_t alignment) noexcept nogil:
    """Shrink in place (same pointer), or move: allocate, copy old_size bytes, free p.
    NULL when the move cannot allocate (p is then untouched and still owned by the caller).
    p NULL behaves as alloc."""
    cdef void* q
    if p == NULL:
        return dod_aa_allocate(a, new_size, alignment)
    if new_size <= old_size:
        return dod_aa_shrink(a, p, old_size, new_size, alignment)
    q = dod_aa_allocate(a, new_size, alignment)
    if q != NULL:
        memcpy(q, p, old_size)
        dod_aa_free(a, p, old_size, alignment)
    return q


# ---------------------------------------------------------------- thread cache slow paths

cdef void dod_aa_cache_publish(dod_aa_cache* c) noexcept nogil:
    """Subtract the privately summed frees from their block (one atomic)."""
    cdef size_t n = c.pending
    if n:
        c.pending = 0
        c.publishes += 1
        if dod_atomic_fetch_sub_u64(&c.pending_block.live, n) == n:
            dod_aa_drained(c.arena, c.pending_block)


cdef void _retire_chunk(dod_aa_cache* c) noexcept nogil:
    """The unused end of the chunk counts as freed (a stranded tail)."""
    cdef dod_aa_block* b
    if c.cursor != NULL and c.cursor < c.end:
        b = dod_aa_block_of(c.arena, c.cursor)
        if b != c.pending_block:
            dod_aa_cache_publish(c)
            c.pending_block = b
        c.pending += <size_t>(c.end - c.cursor)
    c.cursor = NULL
    c.end = NULL


cdef void* dod_aa_cache_refill(dod_aa_cache* c, size_t size, size_t alignment) noexcept nogil:
    """The chunk is used up: large requests go to the shared word, others take a new chunk."""
    cdef size_t need = dod_aa_need(size, alignment)
    cdef void* p
    cdef uintptr_t q
    if c.arena == NULL or c.chunk == 0:
        c.failed += 1
        return NULL
    if need > c.chunk // 2:
        p = dod_aa_allocate(c.arena, size, alignment)
        if p == NULL:
            c.failed += 1
        else:
            c.allocations += 1
        return p
    _retire_chunk(c)
    p = dod_aa_allocate(c.arena, c.chunk, DOD_AA_QUANTUM)
    if p == NULL:
        c.failed += 1
        return NULL
    c.refills += 1
    q = <uintptr_t>p
    c.cursor = <char*>p + need
    c.end = <char*>p + c.chunk
    c.allocations += 1
    return <void*>((q + alignment - 1) & ~(<uintptr_t>alignment - 1))


cdef void dod_aa_cache_flush(dod_aa_cache* c) noexcept nogil:
    """Give back the open chunk's unused end and publish pending frees."""
    if c.arena == NULL:
        return
    _retire_chunk(c)
    dod_aa_cache_publish(c)


# ---------------------------------------------------------------- the arena as a dod_resource

cdef void* _aa_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    if alignment > DOD_AA_MAX_ALIGN or not dod_is_pow2(alignment):
        return NULL
    return dod_aa_allocate(<dod_aa*>ctx, size, alignment)


cdef void _aa_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_aa_free(<dod_aa*>ctx, ptr, size, alignment)


# ---------------------------------------------------------------- carving (leases: dod._lease.Owned)

cdef object _carve(AtomicArena arena, dod_aa_cache* cache, object shape, object dtype,
                   object align, bint zero):
    """Validate, allocate (from the cache when given), wrap. Raises with nothing changed."""
    cdef dod_array_request req
    cdef cnp.dtype dt = as_dtype(dtype)
    cdef void* p
    cdef Owned L
    parse_request(shape, dt, align, _DEFAULT_ALIGN, &req)
    if req.alignment > DOD_AA_MAX_ALIGN:
        raise ValueError(f"alignment {req.alignment} is above the atomic arena's limit of {DOD_AA_MAX_ALIGN}")
    if dod_aa_need(req.nbytes, req.alignment) > arena.engine.max_need:
        raise ValueError(
            f"{req.nbytes} bytes (alignment {req.alignment}) is more than one block can hold "
            f"(max_request={arena.max_request}); use a larger block_size")
    L = owned(arena, _aa_deallocate, <void*>&arena.engine)   # made first: nothing to undo if it fails
    if cache != NULL:
        p = dod_aa_cache_allocate(cache, req.nbytes, req.alignment)
    else:
        p = dod_aa_allocate(&arena.engine, req.nbytes, req.alignment)
    if p == NULL:
        raise MemoryError(
            f"atomic arena could not get a block for {req.nbytes} bytes "
            f"({arena.blocks} of {DOD_AA_MAX_BLOCKS} block slots in use, or the resource refused)")
    L.ptr = p
    L.size = req.nbytes
    L.alignment = req.alignment
    if cache == NULL:
        arena._py_allocations += 1
    if zero:
        memset(p, 0, req.nbytes)
    return wrap_memory(p, &req, dt, L)


cdef Owned _lease_of(AtomicArena arena, object arr):
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected a numpy array from this arena, got {type(arr).__name__}")
    base = arr.base
    if type(base) is not Owned or (<Owned>base).owner is not arena:
        raise ValueError("that array was not allocated by this arena (or is a view of one)")
    return <Owned>base


# ---------------------------------------------------------------- the owner and its Python face

cdef size_t _parse_pow2(object value, str name, size_t lo, size_t hi) except 0:
    v = PyNumber_Index(value)
    if v < <object>lo or v > <object>hi or not dod_is_pow2(<size_t>v):
        raise ValueError(f"{name} must be a power of two between {lo} and {hi}, got {value!r}")
    return <size_t>v


@cython.no_gc_clear
cdef class AtomicArena:
    """AtomicArena(block_size=1 << 20, *, max_concurrent_entrants=1024, evict=False, resource=None)

    A bump arena shared by many threads through one atomic word.

    Parameters
    ----------
    block_size : int
        Bytes of a block (a power of two, at least 4096); the first 64 bytes
        hold its header. A request larger than a block gets a block of 2, 4 or
        8 times that size (the 2-bit size factor), so the largest request is
        ``8 * block_size - 64`` bytes (``max_request``). Blocks are aligned to
        ``8 * block_size`` (address space only), which makes a free O(1).
    max_concurrent_entrants : int
        The overshoot envelope: how many threads may allocate at the same
        moment (a power of two). ``(max_concurrent_entrants + 1) * 8 *
        block_size`` must not exceed 2**54; ValueError otherwise. Exceeding
        it at run time corrupts the arena silently (see the module docs).
    evict : bool
        A block whose allocations are all freed is kept as a spare and
        installed again (default). With ``evict=True`` it is given back to
        the resource (its slot and memory are released).
    resource : Resource, optional
        Where blocks come from; anonymous pages by default. It must honour
        alignments up to ``8 * block_size``.

    Raises
    ------
    ValueError
        For sizes out of range.
    MemoryError
        When the arena's lock cannot be initialised.

    Notes
    -----
    Up to 128 blocks exist at once; a request that needs a 129th fails with
    MemoryError (Python) or NULL (engine). Memory taken through the engine
    (cimport) must be freed, and no thread may use it, before the owner dies:
    the owner returns every block to the resource in ``__dealloc__``.
    Thread-safety: the engine (``dod_aa_allocate``/``free``, cimported) is
    safe from any number of threads without the GIL, within the envelope;
    the Python face may be used from any thread.
    """

    def __cinit__(self, block_size=1 << 20, *, max_concurrent_entrants=1024, bint evict=False,
                  Resource resource=None):
        cdef size_t bs = _parse_pow2(block_size, "block_size", _MIN_BLOCK, (<size_t>1) << 40)
        cdef size_t n = _parse_pow2(max_concurrent_entrants, "max_concurrent_entrants", 1, (<size_t>1) << 30)
        if (<object>n + 1) * (<object>bs << 3) > (1 << 54):
            raise ValueError(
                f"block_size {bs} with max_concurrent_entrants {n} leaves no overshoot envelope: "
                f"(entrants + 1) * 8 * block_size must be at most 2**54")
        if dod_mutex_init(&self.engine.lock) != 0:
            raise MemoryError("could not initialise the arena's lock")   # pragma: no cover
        self._lock_ready = True
        self._upstream = resource if resource is not None else Resource.wrap(dod_pages_resource(), None, "pages", True)
        self.engine.upstream = &self._upstream.resource
        # Held directly too: the cyclic GC may clear Resource.owner before this
        # object (no_gc_clear) gives its blocks back through the resource.
        self._upstream_owner = self._upstream.owner
        self.engine.block_size = bs
        self.engine.block_align = bs << 3
        self.engine.max_need = (bs << 3) - DOD_AA_HEADER
        self.engine.max_entrants = n
        self.engine.evict = evict
        self.engine.word = DOD_AA_CLOSED      # no block yet: the first request installs one

    def __dealloc__(self):
        cdef size_t i
        cdef dod_aa_block* b
        for i in range(DOD_AA_MAX_BLOCKS):
            b = self.engine.blocks[i]
            if b != NULL:
                self.engine.blocks[i] = NULL
                dod_resource_deallocate(self.engine.upstream, b, b.total, self.engine.block_align)
        if self._lock_ready:
            dod_mutex_destroy(&self.engine.lock)

    # -------------------------------------------------------- allocation

    def empty(self, shape, dtype=float, *, align=None):
        """A new uninitialised array carved from the shared word.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to 4096; default 16, or the dtype's alignment.

        Returns
        -------
        numpy.ndarray
            The allocation is freed when the last array viewing it dies.

        Raises
        ------
        ValueError
            For a request larger than ``max_request`` or a bad alignment.
        TypeError
            For an object dtype.
        MemoryError
            When no block can be had.

        Notes
        -----
        Nothing changes when it raises (apart from the ``failed`` counter).
        Thread-safety: any thread (the engine is lock-free).
        """
        return _carve(self, NULL, shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`empty`, filled with zeros (recycled blocks are not zero).

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to 4096; default 16, or the dtype's alignment.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError, TypeError, MemoryError
            As :meth:`empty`.

        Notes
        -----
        Thread-safety: any thread (the engine is lock-free).
        """
        return _carve(self, NULL, shape, dtype, align, True)

    def resize(self, arr, shape):
        """An array of the new `shape` (same dtype) holding `arr`'s leading bytes.

        Shrinking happens in place: the result views the same memory, the
        reservation's surplus is freed at once (it is never handed out again) and
        `arr` stays valid. Growing allocates anew and copies; `arr` keeps its own
        memory until it dies.

        Parameters
        ----------
        arr : numpy.ndarray
            An array returned by :meth:`empty` / :meth:`zeros` (not a slice of one).
        shape : int or tuple of int

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError
            For an array that is not such an allocation (a view of one
            included), or a bad shape.
        TypeError
            For an object that is not a numpy array.
        MemoryError
            When growing and no block can be had.

        Notes
        -----
        Thread-safety: any thread (the engine is lock-free).
        """
        cdef Owned L = _lease_of(self, arr)
        cdef dod_array_request req
        cdef cnp.dtype dt = (<cnp.ndarray>arr).dtype
        parse_request(shape, dt, L.alignment, _DEFAULT_ALIGN, &req)
        if (<cnp.ndarray>arr).data != <char*>L.ptr or not (<cnp.ndarray>arr).flags.c_contiguous:
            raise ValueError("resize needs the array that empty()/zeros() returned, not a view of it")
        if req.nbytes <= L.size:
            dod_aa_shrink(&self.engine, L.ptr, L.size, req.nbytes, L.alignment)
            L.size = req.nbytes
            return wrap_memory(L.ptr, &req, dt, L)
        out = _carve(self, NULL, shape, dt, L.alignment, False)
        memcpy(<void*>(<cnp.ndarray>out).data, L.ptr, L.size)
        return out

    def owns(self, arr):
        """Whether the array's data lies in one of this arena's blocks (O(blocks)).

        Parameters
        ----------
        arr : numpy.ndarray

        Returns
        -------
        bool

        Notes
        -----
        Thread-safety: any thread (the engine is lock-free).
        """
        cdef uintptr_t p
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"expected a numpy array, got {type(arr).__name__}")
        p = <uintptr_t>(<cnp.ndarray>arr).data
        return bool(dod_aa_owns(&self.engine, <void*>p))

    def thread_cache(self, chunk=1 << 16):
        """A :class:`ThreadCache` for the calling thread.

        Parameters
        ----------
        chunk : int, default 65536
            A power of two from 256 up to ``max_request``; each refill reserves
            ``chunk - 64`` bytes so that chunks tile a block exactly.

        Returns
        -------
        ThreadCache

        Raises
        ------
        ValueError
            For a chunk out of range or not a power of two.

        Notes
        -----
        Thread-safety: the cache belongs to the calling thread.
        """
        return ThreadCache(self, chunk)

    def resource(self):
        """This arena as a :class:`~dod.resource.Resource` (it keeps the arena alive).

        Returns
        -------
        dod.resource.Resource
            Thread-safe allocate and deallocate; alignment up to 4096.

        Notes
        -----
        Thread-safety: any thread.
        """
        cdef dod_resource r
        r.allocate = _aa_allocate
        r.deallocate = _aa_deallocate
        r.ctx = <void*>&self.engine
        return Resource.wrap(&r, self, "atomic_arena", self._upstream.threadsafe)

    # -------------------------------------------------------- statistics

    def block_counters(self):
        """Live bytes per block held.

        A closed block's entry is its counter (bytes handed out minus bytes
        freed); the open block's is its position minus the bytes freed from it.
        After every allocation is freed (and thread caches flushed) every entry
        is exactly zero.

        Returns
        -------
        dict
            ``{slot: live bytes}`` for every block held.

        Notes
        -----
        Thread-safety: exact while no thread allocates.
        """
        return _block_counters(&self.engine)

    def check(self):
        """Walk the blocks and verify every invariant.

        Returns
        -------
        dict
            The walk's statistics.

        Raises
        ------
        dod.InvariantError
            Naming every broken invariant.

        Notes
        -----
        Thread-safety: call it while no thread allocates.
        """
        d = _walk(&self.engine)
        if d["problems"]:
            raise InvariantError("; ".join(d["problems"]))
        del d["problems"]
        return d

    @property
    def block_size(self):
        """Bytes of the smallest block (blocks for large requests are larger)."""
        return self.engine.block_size

    @property
    def max_request(self):
        """Largest request in bytes (at alignment 16): one factor-3 block."""
        return self.engine.max_need

    @property
    def max_concurrent_entrants(self):
        """The most threads that may be inside an allocation at once (the envelope)."""
        return self.engine.max_entrants

    @property
    def evict(self):
        """Whether drained blocks go back to the resource (True) or stay as spares."""
        return bool(self.engine.evict)

    @property
    def capacity(self):
        """Usable bytes of the blocks held now (spares included)."""
        return _walk(&self.engine)["capacity"]

    @property
    def in_use(self):
        """Bytes reserved and not yet freed: padding, open thread-cache chunks and
        frees a cache has not published included. Exact while no thread allocates."""
        return _walk(&self.engine)["in_use"]

    @property
    def peak(self):
        """Most usable bytes held in blocks at once (the arena's high-water mark)."""
        return self.engine.peak_capacity

    @property
    def blocks(self):
        """Blocks held now (spares included)."""
        return _walk(&self.engine)["blocks"]

    @property
    def allocations(self):
        """Allocations made through the Python face and through flushed or closed
        ThreadCaches (engine calls from Cython are not counted: that would be a
        second atomic on the fast path)."""
        return self._py_allocations

    @property
    def failed(self):
        """Requests refused (too large, no block slot, or the resource refused)."""
        return dod_atomic_load_relaxed_u64(&self.engine.failed)

    @property
    def drained(self):
        """Times a block's counter reached zero (all its allocations freed)."""
        return self.engine.drained

    @property
    def recycled(self):
        """Drained blocks installed again."""
        return self.engine.recycled

    @property
    def evicted(self):
        """Drained blocks given back to the resource (evict=True)."""
        return self.engine.evicted

    @property
    def installs(self):
        """Blocks installed into the word (new or recycled)."""
        return self.engine.installs

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes; ``peak`` is the most bytes held in blocks at
            once, ``available`` what the held blocks have not handed out or have
            had freed), then the block counters: ``blocks``, ``spares``,
            ``installs``, ``drained``, ``recycled``, ``evicted``.

        Notes
        -----
        Thread-safety: any thread (the engine is lock-free).
        """
        d = _walk(&self.engine)
        return {
            "capacity": d["capacity"],
            "used": d["in_use"],
            "available": d["capacity"] - d["in_use"] if d["capacity"] > d["in_use"] else 0,
            "peak": self.peak,
            "allocations": self.allocations,
            "failed": self.failed,
            "blocks": d["blocks"],
            "spares": d["spares"],
            "installs": self.installs,
            "drained": self.drained,
            "recycled": self.recycled,
            "evicted": self.evicted,
        }

    def __repr__(self):
        d = _walk(&self.engine)
        return (f"<dod.AtomicArena block_size={fmt_bytes(self.engine.block_size)} "
                f"blocks={d['blocks']} capacity={fmt_bytes(d['capacity'])} "
                f"in_use={fmt_bytes(d['in_use'])} drained={self.drained} "
                f"{'evict' if self.engine.evict else 'recycle'} "
                f"entrants<={self.engine.max_entrants}>")


@cython.no_gc_clear
cdef class ThreadCache:
    """ThreadCache(arena, chunk=65536)

    A per-thread cache over an :class:`AtomicArena`: bumps a private chunk
    without atomics and touches the shared word only to refill. Made by
    ``ThreadCache(arena, chunk)`` or ``arena.thread_cache(chunk)``.

    Allocations larger than half a chunk go straight to the shared word. The
    cache belongs to the thread that made it: its methods raise RuntimeError
    from any other thread. Arrays it returns are ordinary arena allocations
    (they may be passed to and freed by any thread). :meth:`flush` (also run
    when the cache is closed or collected) gives back the chunk's unused end
    and publishes the counters; until then the chunk keeps its block from
    draining.

    Parameters
    ----------
    arena : AtomicArena
    chunk : int, default 65536
        A power of two from 256 up to ``arena.max_request``.

    Attributes
    ----------
    arena : AtomicArena
        The arena (kept alive by the cache).
    thread_id : int
        The thread allowed to use the Python face.

    Raises
    ------
    ValueError
        For a chunk out of range or not a power of two.
    RuntimeError
        From methods called on another thread.

    Notes
    -----
    Thread-safety: the thread that made it; the engine's ``dod_aa_cache_*``
    functions must be called by one thread at a time.
    """

    def __cinit__(self, AtomicArena arena not None, chunk=1 << 16):
        cdef size_t c = _parse_pow2(chunk, "chunk", 256, arena.engine.max_need)
        self.arena = arena
        dod_aa_cache_init(&self.engine, &arena.engine, c)
        self.thread_id = threading.get_ident()

    def __dealloc__(self):
        if self.arena is not None:
            dod_aa_cache_flush(&self.engine)
            self.arena._py_allocations += self.engine.allocations

    cdef int _mine(self) except -1:
        if threading.get_ident() != self.thread_id:
            raise RuntimeError("this ThreadCache belongs to another thread; make one per thread "
                               "with arena.thread_cache()")
        if self.engine.arena == NULL:
            raise RuntimeError("this ThreadCache is closed")
        return 0

    def empty(self, shape, dtype=float, *, align=None):
        """As :meth:`AtomicArena.empty`, from this thread's chunk.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to 4096; default 16, or the dtype's alignment.

        Returns
        -------
        numpy.ndarray
            An ordinary arena allocation: any thread may hold it, and it is freed
            when the last array over it dies.

        Raises
        ------
        ValueError, TypeError, MemoryError
            As :meth:`AtomicArena.empty`.
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self._mine()
        return _carve(self.arena, &self.engine, shape, dtype, align, False)

    def zeros(self, shape, dtype=float, *, align=None):
        """As :meth:`AtomicArena.zeros`, from this thread's chunk.

        Parameters
        ----------
        shape : int or tuple of int
        dtype : numpy dtype, default float
        align : int, optional
            A power of two up to 4096; default 16, or the dtype's alignment.

        Returns
        -------
        numpy.ndarray

        Raises
        ------
        ValueError, TypeError, MemoryError
            As :meth:`AtomicArena.empty`.
        RuntimeError
            From another thread, or after :meth:`close`.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self._mine()
        return _carve(self.arena, &self.engine, shape, dtype, align, True)

    def flush(self):
        """Give back the unused end of the open chunk (it is stranded) and publish counters.

        Raises
        ------
        RuntimeError
            From another thread.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self._mine()
        dod_aa_cache_flush(&self.engine)
        self.arena._py_allocations += self.engine.allocations
        self.engine.allocations = 0

    def close(self):
        """Flush and refuse further use.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        self.flush()
        self.engine.arena = NULL

    @property
    def chunk(self):
        """Bytes reserved per refill: the requested chunk minus 64 (see dod_aa_cache_init)."""
        return self.engine.chunk

    @property
    def refills(self):
        """Chunks reserved from the shared word."""
        return self.engine.refills

    @property
    def publishes(self):
        """Times summed frees were published to a block (one atomic each)."""
        return self.engine.publishes

    @property
    def failed(self):
        """Requests this cache could not serve (no block could be had)."""
        return self.engine.failed

    @property
    def available(self):
        """Bytes left in the open chunk."""
        return <size_t>(self.engine.end - self.engine.cursor)

    def check(self):
        """Verify the open chunk and the pending frees.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.
        RuntimeError
            From another thread.

        Notes
        -----
        Thread-safety: the cache's own thread only (RuntimeError from any other).
        """
        cdef dod_aa_cache* c = &self.engine
        self._mine()
        if (c.cursor == NULL) != (c.end == NULL) or c.cursor > c.end:
            raise InvariantError("open chunk: cursor and end disagree")
        if c.cursor != NULL and <size_t>(c.end - c.cursor) > c.chunk:
            raise InvariantError(f"open chunk holds {<size_t>(c.end - c.cursor)} bytes, more than a chunk")
        if c.cursor != NULL and not dod_aa_owns(c.arena, c.cursor):
            raise InvariantError("the open chunk is not inside a block of the arena")
        if c.pending and c.pending_block == NULL:
            raise InvariantError(f"{c.pending} pending freed bytes without a block")
        return True

    def __repr__(self):
        return (f"<dod.atomic_arena.ThreadCache chunk={fmt_bytes(self.engine.chunk)} "
                f"available={self.available} refills={self.engine.refills} thread={self.thread_id}>")
