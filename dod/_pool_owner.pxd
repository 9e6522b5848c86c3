# dod/_pool_owner.pxd: the owner of a pool's memory, the base of
# dod.pool.Pool (which dod/pool.pxd declares and re-exports this from). It
# holds the engine struct, the mutex, the chunk table and the side table of
# the Python face, and everything that reads them: the lock, the side
# table's cover of every slot, the handle lookups, the invariant check and
# the statistics. Its attributes and cdef methods are Pool's.
from dod.atomics cimport dod_mutex
from dod.resource cimport dod_resource, Resource
from dod._ndarray cimport dod_array_request
from dod._lease cimport dod_slots
from dod._pool_engine cimport dod_pool, dod_pool_chunks


cdef class PoolOwner:
    cdef dod_pool engine               # the engine state; run the inline functions on &owner.engine
    cdef dod_mutex mutex              # taken by the *_locked functions and the threadsafe Python face
    cdef dod_pool_chunks _chunks      # growth state (pool.chunks points here when growable)
    cdef readonly bint threadsafe     # the Python face takes `mutex` around every engine call
    cdef readonly bint growable       # further chunks come from the resource when the pool is full
    cdef Resource _upstream           # keeps the backing resource (and its owner) alive
    cdef const dod_resource* _source  # where the region (and every further chunk) came from
    cdef char* _region                # the first region (chunk 0)
    cdef size_t _region_size          # bytes obtained from _source
    cdef size_t _region_align
    cdef dod_slots _table             # Python face: per slot generation (odd = live), live pins and
                                      # the free list (dod._lease), never inside a block
    cdef object _dtype                # block dtype
    cdef tuple _shape                 # per-block shape
    cdef dod_array_request _req       # one block as an array request
    cdef size_t _block_bytes          # bytes of one block's array (<= stride)
    cdef readonly size_t alignment
    cdef Py_ssize_t _exports          # live Resources handed out by resource()
    cdef Py_ssize_t _pending          # released blocks still pinned by arrays
    cdef bint _mutex_ready
    cdef void* _rctx[3]               # (&pool, &mutex, &_table): the context of resource()

    cdef int _lock(self) except -1
    cdef bint _cover(self, size_t slots) noexcept
    cdef int _covered(self) except -1
    cdef void _unlock(self) noexcept
