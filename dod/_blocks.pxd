# dod/_blocks.pxd: handles for the Python faces of block allocators (internal).
#
# A Python caller never holds a raw pointer: it holds a 64-bit handle (low 32
# bits slot, high 32 bits generation, 0 = nil) that a BlockTable maps to the
# block. Views of a block are numpy arrays whose base (a lease) keeps the
# allocator alive and counts against the block, so freeing a block that a
# live array still shows raises BufferError. A stale handle (already freed)
# or a foreign one raises ValueError. The table is touched only with the GIL
# held; the engines it fronts never see it.
from libc.stdint cimport uint32_t
from dod._types cimport dod_handle


cdef class BlockTable:
    cdef void** ptrs             # per slot: the block (NULL: slot free)
    cdef size_t* sizes           # per slot: usable bytes of the block
    cdef size_t* aux             # per slot: the allocator's note (segfit: the alignment asked for)
    cdef uint32_t* gens          # per slot: generation of the current (or next) handle
    cdef Py_ssize_t* views       # per slot: live leases (arrays) on the block
    cdef size_t* free_next       # per free slot: next free slot + 1 (0: end)
    cdef size_t free_head        # first free slot + 1 (0: none)
    cdef size_t nslots           # slots ever used
    cdef size_t cap              # slots allocated
    cdef readonly size_t live    # blocks held through handles

    cdef int reserve(self) except -1
    cdef dod_handle add(self, void* ptr, size_t size, size_t aux=*) except 0
    cdef Py_ssize_t find(self, object handle) except -1
    cdef void* remove(self, Py_ssize_t slot) noexcept
    cdef int check_free(self, Py_ssize_t slot) except -1
    cdef object view(self, Py_ssize_t slot, object owner, object dtype, object shape)
