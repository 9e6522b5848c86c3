# dod/resource.pxd: one allocator interface so allocators compose.
#
# A dod_resource is three words: allocate, deallocate and the context they
# act on, in the spirit of std::pmr::memory_resource and numpy's
# PyDataMem_Handler. Every dod allocator can present itself as one (its
# owner's .resource() method); tables, the guard-zone wrapper and growable
# allocators take their memory through it. Hot paths never go through it:
# they call the engine functions of the allocator they know.
#
# Contract of the function pointers:
# not run: the two signatures and what each promises, laid out as a table
#     allocate(ctx, size, alignment): alignment is a power of two; returns a
#         pointer aligned to it, or NULL (never raises, never takes the GIL).
#         size 0 may return NULL.
#     deallocate(ctx, ptr, size, alignment): ptr came from allocate on the same
#         resource with the same size and alignment; NULL is ignored. A resource
#         whose memory is released wholesale (an arena) makes this a no-op.
# All-zero (ZII) is a valid resource that fails every request.

cdef extern from *:
    """
    #include <stddef.h>
    """

ctypedef void* (*dod_allocate_fn)(void* ctx, size_t size, size_t alignment) noexcept nogil
ctypedef void (*dod_deallocate_fn)(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil

ctypedef struct dod_resource:
    dod_allocate_fn allocate
    dod_deallocate_fn deallocate
    void* ctx


cdef inline void* dod_resource_allocate(const dod_resource* r, size_t size, size_t alignment) noexcept nogil:
    if r == NULL or r.allocate == NULL:
        return NULL
    return r.allocate(r.ctx, size, alignment)


cdef inline void dod_resource_deallocate(const dod_resource* r, void* ptr, size_t size, size_t alignment) noexcept nogil:
    if r != NULL and r.deallocate != NULL and ptr != NULL:
        r.deallocate(r.ctx, ptr, size, alignment)


# The process-wide resources, valid for the life of the process.
cdef const dod_resource* dod_pages_resource() noexcept nogil    # anonymous pages (mmap): zeroed, page-aligned
cdef const dod_resource* dod_malloc_resource() noexcept nogil   # posix_memalign / free
# What the pages resource maps with: dod_os_map_aligned (NULL on failure),
# plus the huge-page hint from DOD_OS_HUGE_MIN bytes while it is on.
cdef void* dod_map_pages(size_t size, size_t alignment) noexcept nogil


cdef class Resource:
    """A dod_resource made visible to Python, with the object that keeps its context alive."""
    cdef dod_resource resource
    cdef readonly object owner
    cdef readonly str name
    cdef readonly bint threadsafe    # may be called from several threads at once, without the GIL

    @staticmethod
    cdef Resource wrap(const dod_resource* r, object owner, str name, bint threadsafe=*)


# Python faces call a resource through this: they release the GIL around the
# call only when the resource is thread-safe. Otherwise another Python thread
# could run the backing allocator's own (GIL-serialised) methods at the same
# time. None stands for the default, the thread-safe pages.
cdef inline void* dod_resource_allocate_from_python(Resource res, const dod_resource* r,
                                                    size_t size, size_t alignment) noexcept:
    cdef void* p
    if res is None or res.threadsafe:
        with nogil:
            p = dod_resource_allocate(r, size, alignment)
    else:
        p = dod_resource_allocate(r, size, alignment)
    return p
