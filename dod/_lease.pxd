# dod/_lease.pxd: the one lifetime layer under every Python face (internal).
#
# The rule every face keeps: memory is never released under a live view. A
# numpy array made by a face has one of the lease objects below as its base,
# so its base chain keeps the owner alive and tells the owner what it still
# shows. Four kinds, one table:
#
#   Owned      an allocation freed (through a dod_deallocate_fn) when the
#              last array over it dies: AtomicArena, FreeList, GuardedResource,
#              PageSource.
#   RangePin   positions [start, end) of a bump allocator; a live pin blocks a
#              checked rewind/reset below its end. Arrays carved between two
#              marks share one pin (the owner's RangePins.open): Arena.
#   SlotPin    a pin on one slot of a dod_slots table; a pinned slot cannot be
#              released (BufferError), or, for a face that allows release by
#              array (Pool), it returns when the last pin dies.
#   ExportPin  keeps the owner alive and counts one export (a whole-pool
#              view, a Resource handed out, a Table column or Arrow capsule):
#              the owner refuses what would invalidate it while the count is
#              non-zero. With a NULL counter it only keeps the owner alive.
#
# dod_slots is the one handle table of every handle-based face (Pool,
# LockFreePool, SegFit): per slot a generation (odd = live), a count of live
# pins and a free-list link, all outside the allocator's memory, so nothing a
# Python caller writes into a block can reach them. A handle is 32 bits of
# slot and 32 bits of generation (dod._types); a stale or foreign handle is
# detected, never aliased. Two ways to use the table:
#   * indexed (Pool): slot i is block i; the table's free list is the face's
#     list of free blocks (the engine's intrusive list stays unused).
#   * mapped (LockFreePool, SegFit): slots are handed out by the table; each
#     records the block's pointer, size and an allocator note (aux).
# Everything here runs with the GIL held, except the inline slot functions,
# which are nogil so that a resource path can run them under its own lock.
from libc.stdint cimport uint32_t, uint64_t
from dod._types cimport dod_handle, dod_handle_make
from dod.resource cimport dod_deallocate_fn


# ---------------------------------------------------------------- Owned

cdef class Owned:
    cdef object owner                  # keeps what `release` acts on alive
    cdef dod_deallocate_fn release     # release(ctx, ptr, size, alignment) when the last view dies
    cdef void* ctx
    cdef void* ptr
    cdef size_t size
    cdef size_t alignment
    cdef Py_ssize_t* pending           # decremented on death when `marked` (may be NULL)
    cdef bint marked                   # the user freed it; it returns when the views die

cdef Owned owned(object owner, dod_deallocate_fn release, void* ctx)


# ---------------------------------------------------------------- RangePin

ctypedef struct dod_range_pins:
    void* head                         # live pins (borrowed RangePin*), newest first
    void* open                         # the pin new arrays join until the next mark
    Py_ssize_t live                    # pins alive

cdef class RangePin:
    cdef object owner
    cdef dod_range_pins* pins          # inside `owner`
    cdef size_t start, end
    cdef void* prev
    cdef void* next

cdef RangePin range_pin(dod_range_pins* pins, object owner, size_t start, size_t end)
cdef size_t range_pins_top_above(const dod_range_pins* pins, size_t position) noexcept


cdef inline RangePin range_pin_cover(dod_range_pins* pins, object owner, size_t start, size_t end):
    """The pin of an array at [start, end): the open pin, stretched, when the
    array follows it (one base object per mark interval), else a new open pin."""
    cdef RangePin L = <RangePin>pins.open if pins.open != NULL else None
    if L is None or start < L.end:
        L = range_pin(pins, owner, start, end)
        pins.open = <void*>L
    else:
        L.end = end
    return L


cdef inline void range_pins_close(dod_range_pins* pins) noexcept nogil:
    """Arrays after this point get a pin of their own (at a mark, rewind, reset)."""
    pins.open = NULL


# ---------------------------------------------------------------- dod_slots and SlotPin

ctypedef void (*dod_slot_return_fn)(void* owner, size_t slot) noexcept

ctypedef struct dod_slots:
    uint32_t* gens            # per slot: generation; odd = live, 0 = never used
    uint32_t* pins            # per slot: live SlotPins
    uint32_t* next            # per free slot: next free slot + 1 (0 ends the list)
    void** ptrs               # mapped tables: the block of each live slot
    size_t* sizes             # mapped tables: its usable bytes
    size_t* aux               # mapped tables: the allocator's note (segfit: the alignment asked)
    size_t cap                # slots that gens and pins (and ptrs/sizes/aux) cover
    size_t link_cap           # slots that next covers (>= cap; grown under the owner's lock)
    size_t free_head          # first free slot + 1 (0: none)
    size_t free_count         # slots on the free list
    size_t nslots             # mapped tables: slots ever handed out
    size_t live               # live handles
    uint32_t salt             # first generation of a slot (even; per table, so foreign handles rarely match)
    bint mapped

cdef class SlotPin:
    cdef object owner
    cdef dod_slots* slots              # inside `owner`
    cdef size_t slot
    cdef dod_slot_return_fn on_return  # called when the last pin of a released slot dies (may be NULL)

cdef int slots_init(dod_slots* t, bint mapped) except -1
cdef void slots_free(dod_slots* t) noexcept
cdef bint slots_cover(dod_slots* t, size_t n) noexcept nogil
cdef bint slots_cover_links(dod_slots* t, size_t n) noexcept nogil
cdef int slots_reserve(dod_slots* t) except -1
cdef dod_handle slots_add(dod_slots* t, void* ptr, size_t size, size_t aux) except 0
cdef Py_ssize_t slots_find(const dod_slots* t, object handle) except -1
cdef int slots_check_unpinned(const dod_slots* t, Py_ssize_t slot) except -1
cdef list slots_find_many(const dod_slots* t, object handles)
cdef void* slots_remove(dod_slots* t, Py_ssize_t slot) noexcept
cdef SlotPin slot_pin(object owner, dod_slots* t, size_t slot, dod_slot_return_fn on_return)
cdef object slots_view(dod_slots* t, Py_ssize_t slot, object owner, object dtype, object shape)


cdef inline size_t slots_pop(dod_slots* t) noexcept nogil:
    """The first free slot, taken off the list; (size_t)-1 when there is none."""
    cdef size_t i
    if t.free_head == 0:
        return <size_t>-1
    i = t.free_head - 1
    t.free_head = t.next[i]
    t.free_count -= 1
    return i


cdef inline void slots_push(dod_slots* t, size_t i) noexcept nogil:
    """Put slot i (below link_cap, not live, not on the list) on the free list."""
    t.next[i] = <uint32_t>t.free_head
    t.free_head = i + 1
    t.free_count += 1


cdef inline void slots_clear_free(dod_slots* t) noexcept nogil:
    """Empty the free list (the slots themselves keep their generations)."""
    t.free_head = 0
    t.free_count = 0


cdef inline dod_handle slots_open(dod_slots* t, size_t i) noexcept nogil:
    """Make slot i (below cap, not live) live: its new handle."""
    if t.gens[i] == 0:
        t.gens[i] = t.salt
    t.gens[i] += 1
    t.live += 1
    return dod_handle_make(<uint32_t>i, t.gens[i])


cdef inline void slots_close(dod_slots* t, size_t i) noexcept nogil:
    """Slot i (live) is no longer: every handle of it is stale from now on."""
    t.gens[i] += 1
    t.live -= 1


cdef inline bint slots_is_live(const dod_slots* t, size_t i) noexcept nogil:
    return i < t.cap and (t.gens[i] & 1) != 0


# ---------------------------------------------------------------- ExportPin

cdef class ExportPin:
    cdef object owner
    cdef Py_ssize_t* count             # inside `owner`; NULL: counts nothing

cdef ExportPin export_pin(object owner, Py_ssize_t* count)
