"""The one lifetime layer under every Python face (internal; see _lease.pxd).

Every face of dod keeps one rule: memory is never released under a live
view. This module is the only place that rule is implemented. A face makes
its arrays with one of four lease kinds as their base (:class:`Owned`,
:class:`RangePin`, :class:`SlotPin`, :class:`ExportPin`) and, when it hands
out handles, keeps them in the one slot table ``dod_slots``. No face defines
a lease class of its own.

Leases are GIL-protected: they are created and die with the GIL held. They
are not garbage-collected containers (no cycles go through them: a lease
points at its owner, never the reverse), and they cannot be copied or
pickled (a copy would be a second owner of the same count).
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uint32_t, uintptr_t
from libc.stdlib cimport realloc, free
from libc.string cimport memset
from cpython.number cimport PyNumber_Index

from dod._types cimport dod_handle, dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory

cnp.import_array()

cdef size_t _MAX_SLOTS = 0xFFFFFFFF          # a handle's slot index is 32 bits
cdef size_t _MAX_MAPPED = 0x7FFFFFFF         # live handles of a mapped table
cdef uint32_t _next_salt = 0x9E3779B8u       # advanced per table (even: generations start even)


# ---------------------------------------------------------------- Owned

@cython.final
@cython.no_gc
@cython.freelist(32)
cdef class Owned:
    """Base object of the arrays over one allocation: frees it when the last dies."""

    def __dealloc__(self):
        if self.release != NULL and self.ptr != NULL:
            self.release(self.ctx, self.ptr, self.size, self.alignment)
            self.ptr = NULL
            if self.marked and self.pending != NULL:
                self.pending[0] -= 1


cdef Owned owned(object owner, dod_deallocate_fn release, void* ctx):
    """A lease that will free through `release(ctx, ...)`; fill ptr/size/alignment
    once the memory is in hand (until then its death frees nothing)."""
    cdef Owned L = Owned.__new__(Owned)
    L.owner = owner
    L.release = release
    L.ctx = ctx
    return L


# ---------------------------------------------------------------- RangePin

@cython.final
@cython.no_gc
@cython.freelist(16)
cdef class RangePin:
    """Base object of arrays carved from a bump allocator at positions [start, end)."""

    def __dealloc__(self):
        cdef dod_range_pins* pins = self.pins
        if pins == NULL:
            return
        if self.prev != NULL:
            (<RangePin>self.prev).next = self.next
        else:
            pins.head = self.next
        if self.next != NULL:
            (<RangePin>self.next).prev = self.prev
        if pins.open == <void*>self:
            pins.open = NULL
        pins.live -= 1


cdef RangePin range_pin(dod_range_pins* pins, object owner, size_t start, size_t end):
    """A new pin on [start, end), linked into `pins` (which lives inside `owner`)."""
    cdef RangePin L = RangePin.__new__(RangePin)
    L.owner = owner
    L.pins = pins
    L.start = start
    L.end = end
    L.next = pins.head
    if pins.head != NULL:
        (<RangePin>pins.head).prev = <void*>L
    pins.head = <void*>L
    pins.live += 1
    return L


cdef size_t range_pins_top_above(const dod_range_pins* pins, size_t position) noexcept:
    """Highest end of a live pin above `position` (0 when none)."""
    cdef void* p = pins.head
    cdef size_t top = 0
    while p != NULL:
        if (<RangePin>p).end > position and (<RangePin>p).end > top:
            top = (<RangePin>p).end
        p = (<RangePin>p).next
    return top


# ---------------------------------------------------------------- dod_slots and SlotPin

@cython.final
@cython.no_gc
@cython.freelist(32)
cdef class SlotPin:
    """Base object of arrays over one slot's block: keeps the owner alive, pins the slot."""

    def __dealloc__(self):
        cdef dod_slots* t = self.slots
        if t == NULL:
            return
        t.pins[self.slot] -= 1
        if t.pins[self.slot] == 0 and (t.gens[self.slot] & 1) == 0 and self.on_return != NULL:
            self.on_return(<void*>self.owner, self.slot)     # released while viewed: it returns now


cdef int slots_init(dod_slots* t, bint mapped) except -1:
    """An empty table with its own salt (call once, on a zeroed struct)."""
    global _next_salt
    t.mapped = mapped
    t.salt = _next_salt if _next_salt else 2
    _next_salt = (_next_salt + 0x6A09E668u) & 0xFFFFFFFEu
    return 0


cdef void slots_free(dod_slots* t) noexcept:
    free(t.gens)
    free(t.pins)
    free(t.next)
    free(t.ptrs)
    free(t.sizes)
    free(t.aux)
    t.gens = t.pins = t.next = NULL
    t.ptrs = NULL
    t.sizes = t.aux = NULL
    t.cap = t.link_cap = 0


cdef inline size_t _grown(size_t have, size_t want) noexcept nogil:
    cdef size_t n = have * 2 if have else 64
    if n > _MAX_SLOTS:
        n = _MAX_SLOTS
    return n if n > want else want


cdef bint _realloc_zeroed(void** arr, size_t have, size_t n, size_t item) noexcept nogil:
    cdef void* p = realloc(arr[0], n * item)
    if p == NULL:
        return False
    arr[0] = p
    memset(<char*>p + have * item, 0, (n - have) * item)
    return True


cdef bint slots_cover_links(dod_slots* t, size_t n) noexcept nogil:
    """Free-list links for `n` slots. False when memory is short (nothing lost).
    A face whose resource path runs without the GIL calls it under its lock."""
    cdef size_t m
    if n <= t.link_cap:
        return True
    if n > _MAX_SLOTS:
        return False
    m = _grown(t.link_cap, n)
    if not _realloc_zeroed(<void**>&t.next, t.link_cap, m, sizeof(uint32_t)):
        return False
    t.link_cap = m
    return True


cdef bint slots_cover(dod_slots* t, size_t n) noexcept nogil:
    """Every per-slot array (zeroed) for `n` slots. False when memory is short:
    the table still covers what it covered (a half-done growth is harmless,
    every array is zeroed from the old cap up)."""
    cdef size_t m
    if n <= t.cap:
        return True
    if n > _MAX_SLOTS:
        return False
    m = _grown(t.cap, n)
    if not slots_cover_links(t, m):
        return False
    if not _realloc_zeroed(<void**>&t.gens, t.cap, m, sizeof(uint32_t)):
        return False
    if not _realloc_zeroed(<void**>&t.pins, t.cap, m, sizeof(uint32_t)):
        return False
    if t.mapped:
        if not _realloc_zeroed(<void**>&t.ptrs, t.cap, m, sizeof(void*)):
            return False
        if not _realloc_zeroed(<void**>&t.sizes, t.cap, m, sizeof(size_t)):
            return False
        if not _realloc_zeroed(<void**>&t.aux, t.cap, m, sizeof(size_t)):
            return False
    t.cap = m
    return True


cdef int slots_reserve(dod_slots* t) except -1:
    """Mapped tables: room for one more handle (call before taking a block, so
    that slots_add cannot fail with the block in hand)."""
    if t.free_head != 0 or t.nslots < t.cap:
        return 0
    if t.nslots >= _MAX_MAPPED:
        raise MemoryError("more than 2**31 live handles")
    if not slots_cover(t, t.nslots + 1):
        raise MemoryError("could not grow the handle table")
    return 0


cdef dod_handle slots_add(dod_slots* t, void* ptr, size_t size, size_t aux) except 0:
    """Mapped tables: a handle for the block `ptr` (slots_reserve first)."""
    cdef size_t i
    slots_reserve(t)
    i = slots_pop(t)
    if i == <size_t>-1:
        i = t.nslots
        t.nslots += 1
    t.ptrs[i] = ptr
    t.sizes[i] = size
    t.aux[i] = aux
    return slots_open(t, i)


cdef Py_ssize_t slots_find(const dod_slots* t, object handle) except -1:
    """The slot of a live handle; TypeError for a non-integer, ValueError otherwise."""
    cdef object h = PyNumber_Index(handle)
    cdef dod_handle v
    cdef size_t i
    if h < 0 or h > 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"{handle!r} is not a handle (64-bit unsigned)")
    v = <dod_handle>h
    if v == 0:
        raise ValueError("nil handle (0)")
    i = dod_handle_index(v)
    if i >= t.cap or t.gens[i] != dod_handle_generation(v) or (t.gens[i] & 1) == 0:
        raise ValueError(f"handle {v:#x} is not live here (released, stale, or of another allocator)")
    return <Py_ssize_t>i


cdef int slots_check_unpinned(const dod_slots* t, Py_ssize_t slot) except -1:
    """BufferError while arrays over the slot's block are alive."""
    if t.pins[slot]:
        raise BufferError(
            f"{t.pins[slot]} array view(s) of this block are still alive; delete them "
            "(del, or let them go out of scope) before releasing the block")
    return 0


cdef list slots_find_many(const dod_slots* t, object handles):
    """The slots of `handles`, each live, unpinned and named once; raises
    (ValueError, BufferError) on the first that is not, with nothing changed."""
    cdef list slots = []
    cdef set seen = set()
    cdef Py_ssize_t slot
    for h in handles:
        slot = slots_find(t, h)
        if slot in seen:
            raise ValueError(f"handle {h:#x} appears twice")
        slots_check_unpinned(t, slot)
        seen.add(slot)
        slots.append(slot)
    return slots


cdef void* slots_remove(dod_slots* t, Py_ssize_t slot) noexcept:
    """Mapped tables: forget a live, unpinned slot; its handle goes stale. The block."""
    cdef void* p = t.ptrs[slot]
    t.ptrs[slot] = NULL
    slots_close(t, <size_t>slot)
    slots_push(t, <size_t>slot)
    return p


cdef SlotPin slot_pin(object owner, dod_slots* t, size_t slot, dod_slot_return_fn on_return):
    """A pin on `slot` of the table inside `owner`."""
    cdef SlotPin L = SlotPin.__new__(SlotPin)
    L.owner = owner
    L.slot = slot
    L.on_return = on_return
    t.pins[slot] += 1
    L.slots = t
    return L


cdef object slots_view(dod_slots* t, Py_ssize_t slot, object owner, object dtype, object shape):
    """Mapped tables: a numpy array over the block (the whole block as 1-D
    `dtype` when shape is None), pinning the slot."""
    cdef dod_array_request req
    cdef cnp.dtype dt = as_dtype(dtype)
    cdef size_t size = t.sizes[slot]
    if shape is None:
        shape = size // <size_t>dt.itemsize
    parse_request(shape, dt, None, 1, &req)
    if req.nbytes > size:
        raise ValueError(f"a view of shape {shape} and dtype {dt} needs {req.nbytes} bytes; "
                         f"the block has {size}")
    if (<uintptr_t>t.ptrs[slot]) % <uintptr_t>dt.alignment:
        raise ValueError(f"the block is not aligned for dtype {dt}")
    return wrap_memory(t.ptrs[slot], &req, dt, slot_pin(owner, t, <size_t>slot, NULL))


# ---------------------------------------------------------------- ExportPin

@cython.final
@cython.no_gc
cdef class ExportPin:
    """Keeps the owner alive and counts one live export of it."""

    def __dealloc__(self):
        if self.count != NULL:
            self.count[0] -= 1


cdef ExportPin export_pin(object owner, Py_ssize_t* count):
    cdef ExportPin L = ExportPin.__new__(ExportPin)
    L.owner = owner
    L.count = count
    if count != NULL:
        count[0] += 1
    return L
