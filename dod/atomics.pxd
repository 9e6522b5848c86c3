# dod/atomics.pxd: the declarations of dod/atomics.h, the one place where
# atomics and locks are spelled. See the header for memory orders.
#
# Public cimport API (``from dod.atomics cimport dod_atomic_fetch_add_u64``):
# the atomics and the small mutex every dod engine is built on, for Cython
# code that shares counters or state across nogil threads (dod's own
# benchmark kernels use it this way).
from libc.stdint cimport int32_t, uint32_t, uint64_t, int64_t, uintptr_t

cdef extern from "atomics.h" nogil:
    uint64_t dod_atomic_load_u64(const uint64_t* p)
    uint64_t dod_atomic_load_relaxed_u64(const uint64_t* p)
    void dod_atomic_store_u64(uint64_t* p, uint64_t v)
    uint64_t dod_atomic_fetch_add_u64(uint64_t* p, uint64_t v)
    uint64_t dod_atomic_fetch_add_relaxed_u64(uint64_t* p, uint64_t v)
    void dod_atomic_store_relaxed_u64(uint64_t* p, uint64_t v)
    uint64_t dod_atomic_fetch_sub_u64(uint64_t* p, uint64_t v)
    bint dod_atomic_cas_u64(uint64_t* p, uint64_t* expected, uint64_t desired)
    void* dod_atomic_load_ptr(void* const* p)
    void dod_atomic_store_ptr(void** p, void* v)
    bint dod_atomic_cas_ptr(void** p, void** expected, void* desired)
    void* dod_atomic_exchange_ptr(void** p, void* v)
    void* dod_atomic_load_speculative_ptr(void* const* p)
    uint32_t dod_atomic_load_u32(const uint32_t* p)
    uint32_t dod_atomic_fetch_add_u32(uint32_t* p, uint32_t v)
    uint32_t dod_atomic_fetch_sub_u32(uint32_t* p, uint32_t v)
    uint32_t dod_atomic_exchange_u32(uint32_t* p, uint32_t v)
    void dod_atomic_store_u32(uint32_t* p, uint32_t v)
    int32_t dod_atomic_load_relaxed_i32(const int32_t* p)
    void dod_atomic_store_relaxed_i32(int32_t* p, int32_t v)
    bint dod_atomic_cas_i32(int32_t* p, int32_t expected, int32_t desired)
    void dod_atomic_fence()
    void dod_cpu_relax()

    ctypedef struct dod_tagged_ptr:
        void* ptr
        uint64_t tag
    dod_tagged_ptr dod_tagged_load(dod_tagged_ptr* p)
    bint dod_tagged_cas(dod_tagged_ptr* p, dod_tagged_ptr* expected, dod_tagged_ptr desired)

    ctypedef struct dod_mutex:
        pass
    int dod_mutex_init(dod_mutex* m)
    void dod_mutex_destroy(dod_mutex* m)
    void dod_mutex_lock(dod_mutex* m)
    void dod_mutex_unlock(dod_mutex* m)
    bint dod_mutex_trylock(dod_mutex* m)
    void dod_thread_yield()
    uintptr_t dod_thread_self()
    int dod_atomic_wait_u32(uint32_t* p, uint32_t expected, int64_t timeout_ns)
    void dod_atomic_wake_all_u32(uint32_t* p)
