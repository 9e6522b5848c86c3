"""One allocator interface, so that dod allocators compose.

A :class:`Resource` wraps the C struct ``dod_resource`` (allocate,
deallocate, context) declared in ``dod/resource.pxd``. Every dod allocator
presents itself as one through its ``resource()`` method, and allocators that
need backing memory (a growable arena, a pool, a table) accept one, so an
arena can feed a pool or a table without either knowing the other.

Two process-wide resources are built in: :data:`pages` (anonymous memory from
the operating system: page aligned and zero-filled, returned to the system on
deallocate) and :data:`malloc` (``posix_memalign``/``free``).

Huge pages: a mapping of 4 MiB or more from :data:`pages` (and from a
:class:`dod.pages.PageSource`) asks the kernel for transparent huge pages
(``madvise(MADV_HUGEPAGE)``), as numpy does for its own arrays of that size.
Where THP runs in "madvise" mode (Debian, Ubuntu) only such mappings get
2 MiB pages: a table or arena of tens of MB is then walked with one TLB
entry per 2 MiB, not per 4 KiB (the tracker's tick at 1,000,000 targets:
8-22 % faster here). The costs: a first touch faults 2 MiB at once (call
``prefault()`` before a deadline loop, as the tracker demo does), RSS rounds
up to whole 2 MiB pages, and with the kernel's default ``defrag`` setting a
fault may compact memory when no huge page is free. :func:`set_huge_pages`
turns the hint off or on for the process (``DOD_HUGE_PAGES=0`` in the
environment turns it off from the start); mappings made before keep theirs.

Thread-safety: the built-in resources are safe from any thread. A resource
presented by an allocator has that allocator's promise.

Where things live
    Lifetime rule: the owner each Resource keeps alive (``Resource.owner``:
    the allocator, or a ``dod._lease`` pin on it).
    Fast path: ``dod_resource_allocate`` / ``dod_resource_deallocate``,
    inline in ``dod/resource.pxd`` (an indirect call; hot paths call their
    engine directly).
"""
cimport cython
from libc.stdint cimport uint32_t
from libc.stdlib cimport free
from cpython.pycapsule cimport PyCapsule_New

from dod._core cimport dod_is_pow2
from dod.atomics cimport dod_atomic_load_u32, dod_atomic_exchange_u32

import os


cdef extern from "_os.h" nogil:
    void* dod_os_map_aligned(size_t size, size_t alignment)
    size_t dod_os_page_round(size_t size)
    void dod_os_unmap(void* p, size_t size)
    int dod_os_advise_huge(void* p, size_t size)
    size_t DOD_OS_HUGE_MIN

cdef extern from "<stdlib.h>" nogil:
    int posix_memalign(void** memptr, size_t alignment, size_t size)


cdef uint32_t _huge_pages = 1      # the hint on (1) or off (0), for the whole process


cdef void* dod_map_pages(size_t size, size_t alignment) noexcept nogil:
    cdef void* p = dod_os_map_aligned(size, alignment)
    if p != NULL and size >= DOD_OS_HUGE_MIN and dod_atomic_load_u32(&_huge_pages):
        dod_os_advise_huge(p, dod_os_page_round(size))     # a hint: its failure changes nothing
    return p


cdef void* _pages_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    return dod_map_pages(size, alignment)


cdef void _pages_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    dod_os_unmap(ptr, dod_os_page_round(size))


cdef void* _malloc_allocate(void* ctx, size_t size, size_t alignment) noexcept nogil:
    cdef void* p = NULL
    if size == 0 or not dod_is_pow2(alignment):
        return NULL
    if alignment < sizeof(void*):
        alignment = sizeof(void*)
    if posix_memalign(&p, alignment, size) != 0:
        return NULL
    return p


cdef void _malloc_deallocate(void* ctx, void* ptr, size_t size, size_t alignment) noexcept nogil:
    free(ptr)


cdef dod_resource _PAGES
_PAGES.allocate = _pages_allocate
_PAGES.deallocate = _pages_deallocate
_PAGES.ctx = NULL

cdef dod_resource _MALLOC
_MALLOC.allocate = _malloc_allocate
_MALLOC.deallocate = _malloc_deallocate
_MALLOC.ctx = NULL


cdef const dod_resource* dod_pages_resource() noexcept nogil:
    return &_PAGES


cdef const dod_resource* dod_malloc_resource() noexcept nogil:
    return &_MALLOC


@cython.no_gc_clear
cdef class Resource:
    """An allocator seen through dod's one C interface (allocate, deallocate, context).

    Instances come from allocators (``Arena.resource()``, ...) or are the
    built-in :data:`pages` and :data:`malloc`; they cannot be made from
    Python directly. A Resource keeps the allocator behind it alive, so
    whatever takes a Resource may outlive the caller's reference to the
    allocator.

    ``threadsafe`` says whether the allocator behind it may be called from
    several threads at once (pages, malloc and the concurrent allocators).
    Python faces release the GIL around a call to a resource only when it is
    thread-safe, so a plain arena, pool or free list backing another
    allocator is never entered by two threads.

    The garbage collector never clears ``owner`` before the Resource dies
    (``no_gc_clear``): allocators that took memory through a Resource give it
    back through the same one in their ``__dealloc__``.

    Cython code reaches the struct as ``res.resource`` (``from dod.resource
    cimport Resource, dod_resource_allocate``); other C consumers get a
    pointer to it from :meth:`capsule`.

    Parameters
    ----------
    *args, **kwargs
        Refused: Resources come from allocators, not from ``Resource(...)``.

    Attributes
    ----------
    owner : object
        What the Resource keeps alive (the allocator, or a pin on it).
    name : str
        A label for messages and ``repr``.
    threadsafe : bool
        Whether the allocator behind it may be called from several threads
        at once, without the GIL.

    Raises
    ------
    TypeError
        Always, when called from Python.

    Notes
    -----
    Thread-safety: the built-in resources are safe from any thread; a
    resource presented by an allocator has that allocator's promise
    (``threadsafe``).
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("Resource objects come from allocators (e.g. Arena.resource()) or dod.resource.pages/malloc")

    @staticmethod
    cdef Resource wrap(const dod_resource* r, object owner, str name, bint threadsafe=False):
        cdef Resource self = Resource.__new__(Resource)
        self.resource = r[0]
        self.owner = owner
        self.name = name
        self.threadsafe = threadsafe
        return self

    def capsule(self):
        """A PyCapsule named ``"dod_resource"`` holding ``dod_resource*``.

        Returns
        -------
        PyCapsule
            The pointer is valid while this Resource object is alive; keep a
            reference to it for as long as C code uses the pointer.

        Notes
        -----
        Thread-safety: any thread.
        """
        return PyCapsule_New(&self.resource, b"dod_resource", NULL)

    def __repr__(self):
        return f"<dod.Resource {self.name}{' threadsafe' if self.threadsafe else ''}>"


pages = Resource.wrap(&_PAGES, None, "pages", True)
malloc = Resource.wrap(&_MALLOC, None, "malloc", True)

HUGE_PAGES_MIN = DOD_OS_HUGE_MIN


def huge_pages():
    """Whether large mappings ask for transparent huge pages.

    Mappings of :data:`HUGE_PAGES_MIN` bytes or more from the pages resource
    (and from every PageSource) ask for them while this is True.

    Returns
    -------
    bool

    Notes
    -----
    Thread-safety: any thread.
    """
    return dod_atomic_load_u32(&_huge_pages) != 0


def set_huge_pages(enabled):
    """Turn the huge-page hint on or off for mappings made from now on, in the whole process.

    Whether the kernel gives huge pages is its own setting
    (``/sys/kernel/mm/transparent_hugepage/enabled``).

    Parameters
    ----------
    enabled : bool

    Returns
    -------
    bool
        The previous setting.

    Raises
    ------
    TypeError
        For anything but True or False.

    Notes
    -----
    Thread-safety: any thread; mappings already made keep their hint.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, not {enabled!r}")
    return dod_atomic_exchange_u32(&_huge_pages, 1 if enabled else 0) != 0


def _huge_pages_from_environment(environ):
    value = environ.get("DOD_HUGE_PAGES")
    if value is None:
        return True
    if value not in ("0", "1"):
        raise ValueError(f"DOD_HUGE_PAGES must be 0 or 1, not {value!r}")
    return value == "1"


set_huge_pages(_huge_pages_from_environment(os.environ))
