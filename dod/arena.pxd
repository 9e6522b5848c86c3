# dod/arena.pxd: the bump arena's engine (C struct + inline nogil functions)
# and its owner class. cimport this to run the engine inlined in your own
# nogil loops:
#
# not run: a fragment (p's type and the function around it left out);
# docs/cython/downstream/particle_step.pyx compiles the same calls
#     from dod.arena cimport Arena, dod_arena_push, dod_arena_reset
#     cdef Arena owner = Arena(1 << 20)
#     with nogil:
#         p = dod_arena_push(&owner.engine, 32, 16)
#
# Invariants
#   * The live region of the current block is base[0:used]; used <= capacity.
#     base is 16-byte aligned and used, capacity and every position are
#     multiples of DOD_ARENA_GRAIN (16): pushes are rounded up to it.
#   * Position = prior + used, where prior is the sum of the capacities of the
#     blocks before the current one. Positions only grow between rewinds, so a
#     mark is a position and rewinding to it frees everything pushed after it.
#   * All bytes zero (ZII) is a valid, empty arena of capacity 0 and no
#     upstream: every push of a non-zero size fails cleanly (NULL).
#   * peak is folded in at rewind/reset only (max of peak and the position
#     then), never on the push path: read max(peak, position) for the truth.
#   * A growable arena chains further blocks from `upstream`. Earlier blocks
#     never move; a rewind walks back through `block.prev` and keeps later
#     blocks as spares for the next growth.
#
# Engine contract (checks the caller owns on this fast path): `alignment` is a
# power of two; a mark passed to rewind came from dod_arena_mark on this arena
# and is not above the current position; nothing still uses memory that a
# rewind or reset releases. Failure is a NULL return, counted in `failed`.
from libc.stdint cimport uintptr_t
from libc.string cimport memset

from dod._core cimport dod_pad_for, dod_poison
from dod.resource cimport dod_resource, Resource
from dod._lease cimport dod_range_pins
from dod.pages cimport dod_page_range


cdef struct dod_arena_block:
    dod_arena_block* prev     # block before this one in the chain (NULL for the first)
    dod_arena_block* next     # block after this one: active or a spare
    char* base                # first usable byte (64-byte aligned in chained blocks)
    size_t capacity           # usable bytes
    size_t size               # bytes obtained from upstream (0: not ours to give back)
    size_t prior              # position of base: sum of capacities before this block

ctypedef struct dod_arena:
    char* base                # current block's first usable byte
    size_t used               # bytes pushed into the current block, padding included
    size_t capacity           # usable bytes of the current block
    size_t prior              # position of base (0 for the first block)
    size_t peak               # high-water position, folded in at rewind/reset
    size_t allocations        # successful pushes since creation
    size_t failed             # pushes that returned NULL
    dod_arena_block* block    # current block record; NULL for a bare region
    const dod_resource* upstream   # where further blocks come from; NULL: fixed capacity
    size_t block_size         # usable bytes asked for the next further block


# Slow paths: named functions in arena.pyx, never inlined into the fast path.
cdef void* dod_arena_push_slow(dod_arena* a, size_t size, size_t alignment) noexcept nogil
cdef void dod_arena_rewind_blocks(dod_arena* a, size_t mark) noexcept nogil
cdef void dod_arena_reset_zeroed_blocks(dod_arena* a) noexcept nogil


cdef enum:
    # Every push is rounded up to the grain and the position stays a multiple
    # of it, so a push aligned to 16 or less needs no alignment arithmetic: the
    # bump is one add. Pushes under 16 bytes waste the difference.
    DOD_ARENA_GRAIN = 16


cdef inline size_t dod_arena_pad(uintptr_t top, size_t alignment) noexcept nogil:
    # Folds to 0 when `alignment` is a constant <= the grain.
    return dod_pad_for(top, alignment) if alignment > DOD_ARENA_GRAIN else 0


cdef inline void* dod_arena_push(dod_arena* a, size_t size, size_t alignment) noexcept nogil:
    """size bytes aligned to `alignment` (a power of two), or NULL when they do not fit."""
    cdef uintptr_t top = <uintptr_t>a.base + a.used
    cdef size_t pad = dod_arena_pad(top, alignment)
    cdef size_t avail = a.capacity - a.used
    if pad > avail or size > avail - pad:
        return dod_arena_push_slow(a, size, alignment)
    a.used += pad + ((size + (DOD_ARENA_GRAIN - 1)) & ~(<size_t>DOD_ARENA_GRAIN - 1))
    a.allocations += 1
    return <void*>(top + pad)


cdef inline void* dod_arena_push_zeroed(dod_arena* a, size_t size, size_t alignment) noexcept nogil:
    """As dod_arena_push, with the bytes set to zero."""
    cdef void* p = dod_arena_push(a, size, alignment)
    if p != NULL:
        memset(p, 0, size)
    return p


cdef inline size_t dod_arena_mark(const dod_arena* a) noexcept nogil:
    """The current position; rewind to it to free everything pushed after."""
    return a.prior + a.used


cdef inline void dod_arena_rewind(dod_arena* a, size_t mark) noexcept nogil:
    """Free everything pushed after `mark` (from dod_arena_mark, not above the position)."""
    cdef size_t pos = a.prior + a.used
    if pos > a.peak:
        a.peak = pos
    if mark >= a.prior:
        dod_poison(a.base + (mark - a.prior), a.used - (mark - a.prior))
        a.used = mark - a.prior
    else:
        dod_arena_rewind_blocks(a, mark)


cdef inline void dod_arena_reset(dod_arena* a) noexcept nogil:
    """Free everything: one store in a single-block arena."""
    dod_arena_rewind(a, 0)


cdef inline void dod_arena_reset_zeroed(dod_arena* a) noexcept nogil:
    """Free everything and leave the released bytes zero (one memset).

    ZII without per-push stores: an arena that starts on fresh pages (or
    zeroed memory) and is only ever reset this way hands out zeroed memory
    from plain dod_arena_push, and a bulk memset is cheaper than zeroing
    record by record. Which resets the arena has seen is the caller's to know.
    """
    if a.prior == 0:
        memset(a.base, 0, a.used)
        if a.used > a.peak:
            a.peak = a.used
        a.used = 0
    else:
        dod_arena_reset_zeroed_blocks(a)


# ---- cursor: the same push for tight loops ---------------------------------
# dod_arena_push keeps the position in the struct, so a loop that pushes and
# writes carries a dependency through memory (store, reload) and the opaque
# slow-path call stops the compiler from keeping it in a register: ~2-3 ns a
# push. A cursor is a local copy of the hot state that lives in registers;
# open it before the loop, push from it, close it after. Between open and
# close the cursor holds the truth: do not use the arena struct directly.
ctypedef struct dod_arena_cursor:
    uintptr_t top             # next free byte
    uintptr_t end             # end of the current block
    size_t count              # pushes not yet added to the arena's allocations


cdef inline dod_arena_cursor dod_arena_open(const dod_arena* a) noexcept nogil:
    cdef dod_arena_cursor c
    c.top = <uintptr_t>a.base + a.used
    c.end = <uintptr_t>a.base + a.capacity
    c.count = 0
    return c


cdef inline void dod_arena_close(dod_arena* a, dod_arena_cursor* c) noexcept nogil:
    a.used = c.top - <uintptr_t>a.base
    a.allocations += c.count
    c.count = 0


cdef inline void* dod_cursor_push(dod_arena_cursor* c, dod_arena* a, size_t size, size_t alignment) noexcept nogil:
    """dod_arena_push through an open cursor; NULL when it does not fit."""
    cdef size_t pad = dod_arena_pad(c.top, alignment)
    cdef size_t avail = c.end - c.top
    cdef void* p
    if pad > avail or size > avail - pad:
        dod_arena_close(a, c)
        p = dod_arena_push_slow(a, size, alignment)
        c[0] = dod_arena_open(a)
        return p
    p = <void*>(c.top + pad)
    c.top += pad + ((size + (DOD_ARENA_GRAIN - 1)) & ~(<size_t>DOD_ARENA_GRAIN - 1))
    c.count += 1
    return p


cdef class Arena:
    cdef dod_arena engine             # the engine state; run the inline functions on &owner.engine
    cdef dod_arena_block _first       # record of the first region (the head of the block chain)
    cdef void* _region                # the first region as obtained (before grain alignment)
    cdef Resource _upstream           # keeps the upstream resource (and its owner) alive
    cdef const dod_resource* _first_source   # where the first region came from (NULL: caller's buffer)
    cdef Py_buffer _buffer            # the caller's buffer, when the arena lives in one
    cdef bint _has_buffer
    cdef dod_range_pins _pins         # live views into this arena (dod._lease.RangePin)
    cdef Py_ssize_t _scopes           # scopes entered and not yet exited (dod.numpy_memory refuses a block inside one)
    cdef bint growable_

    # The memory of every block (spares included) as ranges for
    # dod.pages.dod_pages_prefault: writes them to out (NULL: counts only)
    # and returns how many. Valid until the arena grows or dies.
    cdef size_t page_ranges(self, dod_page_range* out) noexcept
    cdef size_t _pinned_above(self, size_t position) noexcept
    cdef int _release_to(self, size_t position, bint unchecked) except -1
    cdef object _carve(self, object shape, object dtype, object align, bint zero)
