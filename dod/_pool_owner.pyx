"""The owner of a pool's memory: the base class of :class:`dod.pool.Pool`.

:class:`PoolOwner` obtains the first region (from the pool's resource, or
anonymous pages), the side table of the Python face and, for a growable
pool, the chunk table; it gives every chunk back when it dies. It holds the
engine struct and the mutex, and answers what changes no block: handle
lookups, the live mask, the invariant check, the statistics. dod.pool's
:class:`~dod.pool.Pool` adds the Python face that acquires and releases
blocks and views them. The contract of every method is the one dod.pool's
docstring states.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint32_t, uintptr_t
from libc.stdlib cimport malloc, free
from cpython.number cimport PyNumber_Index

from dod._core cimport dod_add_overflow, dod_mul_overflow
from dod._types cimport dod_handle_make
from dod._ndarray cimport as_dtype, parse_request
from dod._lease cimport SlotPin, slots_init, slots_free, slots_cover, slots_is_live, slots_find
from dod.atomics cimport dod_mutex_init, dod_mutex_destroy, dod_mutex_trylock, dod_mutex_lock, dod_mutex_unlock
from dod.resource cimport dod_resource_allocate_from_python, dod_resource_deallocate, dod_pages_resource
from dod._pool_engine cimport _chunk_start, _chunk_len, dod_pool_capacity, dod_pool_touched, dod_pool_slot_of

import numpy as np

from dod._format import fmt_bytes
from dod.errors import InvariantError

cnp.import_array()

cdef enum:
    _DEFAULT_ALIGN = 16
    _REGION_ALIGN = 64

cdef size_t _MAX_BYTES = (<size_t>1) << 48
cdef size_t _MAX_BLOCKS = 0xFFFFFFFF        # slot index is 32 bits
# A growable pool holds at most this many chunks. Without a bound, one call
# (reserve(2**31) with 8-block chunks) asked the upstream for 2**28 chunks,
# one at a time, for many minutes before failing; with it the request is
# refused at once (max_slots below) and a chunk table stays under 16 MiB.
cdef size_t _MAX_CHUNKS = (<size_t>1) << 20


cdef int _check_free_block(const dod_slots* t, size_t i, bytearray seen, str where) except -1:
    """Pool.check(): block i, found on a free list, is a touched block seen
    once on all free lists, not live and not pinned."""
    if i >= <size_t>len(seen):
        raise InvariantError(f"{where} holds slot {i}, which is not a touched block of this pool")
    if seen[i]:
        raise InvariantError(f"{where} has a cycle at block {i} (or the block is on both lists)")
    seen[i] = 1
    if t.gens[i] & 1:
        raise InvariantError(f"block {i} is on {where} but live")
    if t.pins[i]:
        raise InvariantError(f"block {i} is on {where} but pinned by arrays")
    return 0


@cython.no_gc_clear
cdef class PoolOwner:
    """The memory, lock, side table, invariants and statistics of a
    :class:`dod.pool.Pool` (its base class; construct a Pool)."""

    def __cinit__(self, block_count, dtype=None, shape=(), *, block_size=None, align=None,
                  Resource resource=None, bint threadsafe=False, bint growable=False,
                  chunk_blocks=None):
        cdef cnp.dtype dt
        cdef size_t count, nbytes, stride, total, alignment, cblocks = 0, cbytes = 0
        cdef object n = PyNumber_Index(block_count)
        if n <= 0 or n > <object>_MAX_BLOCKS:
            raise ValueError(f"block_count must be between 1 and 2**32 - 1, got {block_count!r}")
        count = <size_t>n
        if block_size is not None:
            if dtype is not None or shape != ():
                raise TypeError("give either block_size or dtype/shape, not both")
            bs = PyNumber_Index(block_size)
            if bs < <object>sizeof(void*):
                raise ValueError(f"block_size must be at least {sizeof(void*)} bytes (the free-list link), got {block_size!r}")
            if bs > <object>_MAX_BYTES:
                raise ValueError(f"block_size {block_size!r} is absurd")
            dtype = np.uint8
            shape = (int(bs),)
        elif dtype is None:
            raise TypeError("Pool() needs a dtype (with an optional per-block shape) or a block_size")
        dt = as_dtype(dtype)
        parse_request(shape, dt, align, _DEFAULT_ALIGN, &self._req)
        nbytes = self._req.nbytes
        if nbytes == 0:
            raise ValueError(f"a block of shape {shape!r} and dtype {dt} holds no bytes")
        alignment = self._req.alignment
        stride = nbytes if nbytes > sizeof(void*) else sizeof(void*)
        if dod_add_overflow(stride, alignment - 1, &stride):
            raise MemoryError("block too large")
        stride &= ~(alignment - 1)
        if dod_mul_overflow(stride, count, &total) or total > _MAX_BYTES:
            raise MemoryError(f"{count} blocks of {stride} bytes are more than 2**48 bytes")
        if growable:
            cb = n if chunk_blocks is None else PyNumber_Index(chunk_blocks)
            if cb <= 0 or cb > <object>_MAX_BLOCKS:
                raise ValueError(f"chunk_blocks must be between 1 and 2**32 - 1, got {chunk_blocks!r}")
            cblocks = <size_t>cb
            if dod_mul_overflow(stride, cblocks, &cbytes) or cbytes > _MAX_BYTES:
                raise MemoryError(f"a chunk of {cblocks} blocks of {stride} bytes is more than 2**48 bytes")
        elif chunk_blocks is not None:
            raise ValueError("chunk_blocks needs growable=True")
        self._source = dod_pages_resource() if resource is None else &resource.resource
        self._upstream = resource
        self._region_align = alignment if alignment > _REGION_ALIGN else _REGION_ALIGN
        slots_init(&self._table, False)
        if not slots_cover(&self._table, count):
            raise MemoryError(f"could not obtain the side table of a {count}-block pool")
        if growable:
            self._chunks.bases = <char**>malloc(4 * sizeof(char*))
            self._chunks.order = <size_t*>malloc(4 * sizeof(size_t))
            if self._chunks.bases == NULL or self._chunks.order == NULL:
                raise MemoryError("could not obtain the chunk table of a growable pool")
            self._chunks.cap = 4
        base = <char*>dod_resource_allocate_from_python(self._upstream, self._source, total, self._region_align)
        if base == NULL:
            raise MemoryError(f"could not obtain {total} bytes for a pool")
        if dod_mutex_init(&self.mutex) != 0:
            dod_resource_deallocate(self._source, base, total, self._region_align)
            raise MemoryError("could not initialise the pool's mutex")
        self._mutex_ready = True
        self._region = base
        self._region_size = total
        self.engine.base = base
        if growable:
            self._chunks.bases[0] = base
            self._chunks.order[0] = 0
            self._chunks.n = 1
            self._chunks.current = 0
            self._chunks.first_blocks = count
            self._chunks.chunk_blocks = cblocks
            self._chunks.chunk_bytes = cbytes
            self._chunks.chunk_align = self._region_align
            # first_blocks + (_MAX_CHUNKS - 1) * chunk_blocks, at most 2**32 - 1
            # (cblocks < 2**32, so the product stays below 2**52: no overflow)
            self._chunks.max_slots = count + (_MAX_CHUNKS - 1) * cblocks
            if self._chunks.max_slots > _MAX_BLOCKS:
                self._chunks.max_slots = _MAX_BLOCKS
            self._chunks.upstream = self._source
            self.engine.chunks = &self._chunks
        self.growable = growable
        self.engine.stride = stride
        self.engine.count = count
        self._block_bytes = nbytes
        self._dtype = dt
        self._shape = tuple(int(self._req.dims[i]) for i in range(self._req.nd))
        self.alignment = alignment
        self.threadsafe = threadsafe
        self._rctx[0] = <void*>&self.engine
        self._rctx[1] = <void*>&self.mutex
        self._rctx[2] = <void*>&self._table

    def __dealloc__(self):
        cdef size_t k
        if self.engine.chunks != NULL:        # every further chunk (the first is the region)
            for k in range(1, self._chunks.n):
                dod_resource_deallocate(self._chunks.upstream, self._chunks.bases[k],
                                        self._chunks.chunk_bytes, self._chunks.chunk_align)
        free(self._chunks.bases)
        free(self._chunks.order)
        if self._region != NULL:
            dod_resource_deallocate(self._source, self._region, self._region_size, self._region_align)
        slots_free(&self._table)
        if self._mutex_ready:
            dod_mutex_destroy(&self.mutex)

    # -------------------------------------------------------- internals

    cdef int _lock(self) except -1:
        if self.threadsafe and not dod_mutex_trylock(&self.mutex):
            with nogil:             # a nogil thread holds it: wait without blocking Python threads
                dod_mutex_lock(&self.mutex)
        return 0

    cdef void _unlock(self) noexcept:
        if self.threadsafe:
            dod_mutex_unlock(&self.mutex)

    cdef bint _cover(self, size_t slots) noexcept:
        """Lock held: the side table covers `slots` slots. False when memory
        is short: the table still covers what it covered."""
        return slots_cover(&self._table, slots)

    cdef int _covered(self) except -1:
        """The side table covers every slot (chunks added by engine-level
        acquires from Cython are not seen by the Python face until here)."""
        cdef bint ok = True
        if self._table.cap < dod_pool_capacity(&self.engine):
            self._lock()
            ok = self._cover(dod_pool_capacity(&self.engine))
            self._unlock()
        if not ok:
            raise MemoryError("could not grow the pool's side table")
        return 0

    # -------------------------------------------------------- lookups

    def handle_of(self, arr):
        """The handle of the live block that array `arr` views.

        Parameters
        ----------
        arr : numpy.ndarray
            From :meth:`view` or :meth:`acquire_array`.

        Returns
        -------
        int

        Raises
        ------
        ValueError
            If `arr` is not such an array, or its block was released.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef SlotPin L = self._lease_of(arr)
        if not slots_is_live(&self._table, L.slot):
            raise ValueError("that block was released")
        return dod_handle_make(<uint32_t>L.slot, self._table.gens[L.slot])

    def _lease_of(self, arr):
        base = arr
        for _ in range(3):
            base = getattr(base, "base", None)
            if type(base) is SlotPin:
                if (<SlotPin>base).owner is not self:
                    raise ValueError("that array views a block of another pool")
                return base
            if not isinstance(base, np.ndarray):
                break
        raise ValueError("that array is not a block view of this pool (use view() or acquire_array())")

    def is_live(self, handle):
        """Whether `handle` names a live block of this pool.

        Parameters
        ----------
        handle : int

        Returns
        -------
        bool
            Never raises for ints.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        try:
            slots_find(&self._table, handle)
        except ValueError:
            return False
        return True

    def live_mask(self):
        """Which slots hold a live block.

        Returns
        -------
        numpy.ndarray
            A new bool array of shape ``(capacity,)`` (all chunks, in slot order).

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        return self._gen_array() & 1 == 1

    def _gen_array(self):
        self._covered()
        cdef size_t i, cap = dod_pool_capacity(&self.engine)
        out = np.empty(<cnp.npy_intp>cap, dtype=np.uint32)
        cdef uint32_t[::1] o = out
        for i in range(cap):
            o[i] = self._table.gens[i]
        return out

    def handles(self):
        """The handles of all live blocks, in slot order.

        Returns
        -------
        numpy.ndarray
            A new uint64 array.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        g = self._gen_array()
        idx = np.flatnonzero(g & 1)
        return (g[idx].astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)

    def index_of(self, handle):
        """The slot index of a live handle (the row in :meth:`as_array`).

        Parameters
        ----------
        handle : int

        Returns
        -------
        int

        Raises
        ------
        ValueError
            For a nil, stale or foreign handle, or a value that is not a 64-bit
            handle.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        return slots_find(&self._table, handle)

    # -------------------------------------------------------- checks and statistics

    def check(self):
        """Walk the free lists and the side table and verify every invariant.

        Raises
        ------
        dod.InvariantError
            Naming the first broken invariant.

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef dod_pool* p = &self.engine
        cdef dod_pool_chunks* c = p.chunks
        cdef dod_slots* t = &self._table
        cdef uintptr_t b
        cdef size_t i, k, n = 0, touched = dod_pool_touched(p)
        self._covered()
        if c != NULL:
            if c.n == 0 or c.n > c.cap or c.current >= c.n or c.bases[0] != self._region:
                raise InvariantError(f"chunk table broken: n={c.n} cap={c.cap} current={c.current}")
            if (p.base != c.bases[c.current] or p.prior != _chunk_start(c, c.current)
                    or p.count != _chunk_len(c, c.current)):
                raise InvariantError(f"current chunk {c.current} does not match base/prior/count")
            for k in range(c.n):
                if k + 1 < c.n and (<uintptr_t>c.bases[c.order[k]] + _chunk_len(c, c.order[k]) * p.stride
                                    > <uintptr_t>c.bases[c.order[k + 1]]):
                    raise InvariantError(f"chunks {c.order[k]} and {c.order[k + 1]} overlap or are out of address order")
                if dod_pool_slot_of(p, c.bases[k]) != _chunk_start(c, k):
                    raise InvariantError(f"chunk {k}'s first block does not map to slot {_chunk_start(c, k)}")
        elif p.prior != 0:
            raise InvariantError("a fixed pool has slots before its only chunk")
        if p.touched > p.count:
            raise InvariantError(f"touched {p.touched} beyond the current chunk's {p.count} blocks")
        if touched > dod_pool_capacity(p) or p.in_use > touched:
            raise InvariantError("counters beyond the capacity")
        if t.link_cap < t.cap:
            raise InvariantError(f"side table links cover {t.link_cap} slots, fewer than its {t.cap}")
        seen = bytearray(touched)
        # The Python face's free list, in the side table.
        k = t.free_head
        while k != 0:
            _check_free_block(t, k - 1, seen, "the side table's free list")
            n += 1
            k = t.next[k - 1]
        if n != t.free_count:
            raise InvariantError(f"the side table counts {t.free_count} free blocks, its list holds {n}")
        # The engine's intrusive list: empty unless Cython code released through the engine.
        b = <uintptr_t>p.free
        while b != 0:
            _check_free_block(t, dod_pool_slot_of(p, <void*>b), seen, "the engine's free list")
            n += 1
            b = <uintptr_t>(<void**>b)[0]
        if n + p.in_use != touched:
            raise InvariantError(f"free {n} + in_use {p.in_use} != touched {touched}")
        for i in range(touched, dod_pool_capacity(p)):
            if t.gens[i] & 1:
                raise InvariantError(f"untouched block {i} is live")
        return True

    @property
    def capacity(self):
        """Number of blocks (all chunks of a growable pool)."""
        return dod_pool_capacity(&self.engine)

    @property
    def block_count(self):
        """Number of blocks, as :attr:`capacity`."""
        return dod_pool_capacity(&self.engine)

    @property
    def chunk_count(self):
        """Chunks obtained: 1 for a fixed pool (spares of a growable pool included)."""
        return self._chunks.n if self.engine.chunks != NULL else 1

    @property
    def chunk_blocks(self):
        """Blocks per further chunk of a growable pool; 0 for a fixed pool."""
        return self._chunks.chunk_blocks if self.engine.chunks != NULL else 0

    @property
    def max_blocks(self):
        """The most blocks this pool can ever hold: its capacity for a fixed
        pool; for a growable one the capacity at 2**20 chunks, at most
        2**32 - 1. A request for more fails at once."""
        return self._chunks.max_slots if self.engine.chunks != NULL else dod_pool_capacity(&self.engine)

    @property
    def block_size(self):
        """Bytes one block occupies (the stride, padding included)."""
        return self.engine.stride

    @property
    def dtype(self):
        """The dtype of one block's elements (uint8 for raw ``block_size`` blocks)."""
        return self._dtype

    @property
    def shape(self):
        """Per-block shape."""
        return self._shape

    @property
    def in_use(self):
        """Blocks acquired and not yet returned (released blocks pinned by arrays included)."""
        return self.engine.in_use

    @property
    def live(self):
        """Blocks with a live handle."""
        return self.engine.in_use - <size_t>self._pending

    @property
    def available(self):
        """Blocks that can be acquired without growing."""
        return dod_pool_capacity(&self.engine) - self.engine.in_use

    @property
    def peak(self):
        """Highest number of blocks in use at once (blocks ever touched)."""
        cdef size_t t = dod_pool_touched(&self.engine)
        return t if t > self.engine.peak else self.engine.peak

    @property
    def allocations(self):
        """Successful acquires since creation."""
        return self.engine.allocations

    @property
    def failed(self):
        """Acquires refused (the pool was full and could not grow)."""
        return self.engine.failed

    @property
    def nbytes(self):
        """Bytes obtained from the resource (every chunk)."""
        if self.engine.chunks == NULL:
            return self._region_size
        return self._region_size + (self._chunks.n - 1) * self._chunks.chunk_bytes

    def stats(self):
        """The statistics as a dict.

        Returns
        -------
        dict
            The shared keys (bytes: blocks times the stride), then the pool's
            own: ``block_size`` (the stride), block counts (``blocks``,
            ``blocks_in_use``, ``blocks_available``, ``blocks_peak``), ``chunks``
            and ``pending`` (released blocks still pinned by arrays).

        Notes
        -----
        Thread-safety: one thread at a time, unless the pool was made with ``threadsafe=True`` (a mutex around every engine call).
        """
        cdef size_t cap = dod_pool_capacity(&self.engine), stride = self.engine.stride
        cdef size_t peak = self.peak
        return {
            "capacity": cap * stride,
            "used": self.engine.in_use * stride,
            "available": (cap - self.engine.in_use) * stride,
            "peak": peak * stride,
            "allocations": self.engine.allocations,
            "failed": self.engine.failed,
            "block_size": stride,
            "blocks": cap,
            "blocks_in_use": self.engine.in_use,
            "blocks_available": cap - self.engine.in_use,
            "blocks_peak": peak,
            "chunks": self.chunk_count,
            "pending": self._pending,
        }

    def __len__(self):
        """Blocks with a live handle (released blocks still pinned by arrays
        excluded). Thread-safety: as every method of the pool."""
        return self.engine.in_use - <size_t>self._pending

    def __repr__(self):
        cdef size_t cap = dod_pool_capacity(&self.engine)
        chunks = ""
        if self.engine.chunks != NULL:
            chunks = (f" in {self._chunks.n} chunk{'s' if self._chunks.n > 1 else ''} "
                      f"(+{self._chunks.chunk_blocks} blocks a chunk; ")
        return (f"<dod.Pool{' growable' if self.growable else ''}{' threadsafe' if self.threadsafe else ''} "
                f"{cap} x {self._dtype}{list(self._shape) if self._shape else ''}"
                f"{chunks if chunks else ' ('}stride {self.engine.stride} B, {fmt_bytes(self.nbytes)}) "
                f"in_use={self.engine.in_use} peak={self.peak} "
                f"allocations={self.engine.allocations} failed={self.engine.failed}>")
