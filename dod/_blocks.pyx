"""Handles for the Python faces of block allocators (internal; see _blocks.pxd).

The pool and segregated-fit faces hand Python callers handles, never
pointers. :class:`BlockTable` maps handles to blocks, detects stale and
foreign handles with a per-slot generation, and counts the numpy views alive
on each block, so that a free under a live view raises ``BufferError`` and
changes nothing. There is no unchecked escape here, unlike the arena's
rewind: a freed block holds the allocator's free-list link in its first word,
so writing through a stale view could corrupt the allocator, not just give
wrong numbers.
"""
cimport cython
cimport numpy as cnp
from libc.stdint cimport uintptr_t
from cpython.mem cimport PyMem_Realloc, PyMem_Free
from cpython.number cimport PyNumber_Index

from dod._types cimport dod_handle_make, dod_handle_index, dod_handle_generation
from dod._ndarray cimport dod_array_request, as_dtype, parse_request, wrap_memory

cnp.import_array()


@cython.no_gc
@cython.freelist(16)
cdef class _BlockLease:
    """Base object of views of one block: keeps the allocator (and the table) alive."""
    cdef BlockTable table
    cdef object owner
    cdef Py_ssize_t slot

    def __dealloc__(self):
        if self.table is not None:
            self.table.views[self.slot] -= 1


cdef class BlockTable:
    """Handle -> block map with generations and live-view counts (GIL-protected)."""

    def __dealloc__(self):
        PyMem_Free(self.ptrs)
        PyMem_Free(self.sizes)
        PyMem_Free(self.aux)
        PyMem_Free(self.gens)
        PyMem_Free(self.views)
        PyMem_Free(self.free_next)

    cdef int reserve(self) except -1:
        """Make room for one more slot (call before taking a block, so add cannot fail)."""
        cdef size_t n
        cdef void* p
        if self.free_head != 0 or self.nslots < self.cap:
            return 0
        if self.cap >= 0x7FFFFFFF:
            raise MemoryError("more than 2**31 live handles")
        n = self.cap * 2 if self.cap else 64
        if n > 0x7FFFFFFF:
            n = 0x7FFFFFFF
        p = PyMem_Realloc(self.ptrs, n * sizeof(void*))
        if p == NULL: raise MemoryError()
        self.ptrs = <void**>p
        p = PyMem_Realloc(self.sizes, n * sizeof(size_t))
        if p == NULL: raise MemoryError()
        self.sizes = <size_t*>p
        p = PyMem_Realloc(self.aux, n * sizeof(size_t))
        if p == NULL: raise MemoryError()
        self.aux = <size_t*>p
        p = PyMem_Realloc(self.gens, n * sizeof(uint32_t))
        if p == NULL: raise MemoryError()
        self.gens = <uint32_t*>p
        p = PyMem_Realloc(self.views, n * sizeof(Py_ssize_t))
        if p == NULL: raise MemoryError()
        self.views = <Py_ssize_t*>p
        p = PyMem_Realloc(self.free_next, n * sizeof(size_t))
        if p == NULL: raise MemoryError()
        self.free_next = <size_t*>p
        self.cap = n
        return 0

    cdef dod_handle add(self, void* ptr, size_t size, size_t aux=0) except 0:
        """A handle for `ptr` (reserve() first: then this cannot fail)."""
        cdef size_t slot
        self.reserve()
        if self.free_head:
            slot = self.free_head - 1
            self.free_head = self.free_next[slot]
        else:
            slot = self.nslots
            self.nslots += 1
            self.gens[slot] = 1
        self.ptrs[slot] = ptr
        self.sizes[slot] = size
        self.aux[slot] = aux
        self.views[slot] = 0
        self.live += 1
        return dod_handle_make(<uint32_t>slot, self.gens[slot])

    cdef Py_ssize_t find(self, object handle) except -1:
        """The slot of a live handle; TypeError/ValueError otherwise."""
        cdef object h = PyNumber_Index(handle)
        cdef dod_handle v
        cdef size_t slot
        if h <= 0 or h >= (1 << 64):
            raise ValueError(f"{handle!r} is not a handle of this allocator")
        v = <dod_handle>h
        slot = dod_handle_index(v)
        if slot >= self.nslots or self.ptrs[slot] == NULL or self.gens[slot] != dod_handle_generation(v):
            raise ValueError(f"handle {handle:#x} is stale (already freed) or belongs to another allocator")
        return <Py_ssize_t>slot

    cdef int check_free(self, Py_ssize_t slot) except -1:
        if self.views[slot] > 0:
            raise BufferError(
                f"{self.views[slot]} array view(s) of this block are still alive; delete them "
                "(del, or let them go out of scope) before freeing the block")
        return 0

    cdef void* remove(self, Py_ssize_t slot) noexcept:
        """Forget a slot (check_free first); its handle becomes stale."""
        cdef void* p = self.ptrs[slot]
        self.ptrs[slot] = NULL
        self.gens[slot] += 1
        if self.gens[slot] == 0:
            self.gens[slot] = 1
        self.free_next[slot] = self.free_head
        self.free_head = <size_t>slot + 1
        self.live -= 1
        return p

    cdef object view(self, Py_ssize_t slot, object owner, object dtype, object shape):
        """A numpy array over the block (whole block as 1-D `dtype` when shape is None)."""
        cdef dod_array_request req
        cdef cnp.dtype dt = as_dtype(dtype)
        cdef size_t size = self.sizes[slot]
        cdef _BlockLease lease
        if shape is None:
            shape = size // <size_t>dt.itemsize
        parse_request(shape, dt, None, 1, &req)
        if req.nbytes > size:
            raise ValueError(f"a view of shape {shape} and dtype {dt} needs {req.nbytes} bytes; "
                             f"the block has {size}")
        if (<uintptr_t>self.ptrs[slot]) % <uintptr_t>dt.alignment:
            raise ValueError(f"the block is not aligned for dtype {dt}")
        lease = _BlockLease.__new__(_BlockLease)
        lease.table = self
        lease.owner = owner
        lease.slot = slot
        self.views[slot] += 1
        return wrap_memory(self.ptrs[slot], &req, dt, lease)
