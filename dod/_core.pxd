# dod/_core.pxd: shared C facts (build variant, poison byte, overflow-checked
# size arithmetic). Declarations only; the code is in _core.h.
from libc.stdint cimport uintptr_t

cdef extern from "_core.h" nogil:
    const bint DOD_DEBUG          # 1 in debug and sanitize builds
    const int DOD_POISON          # byte written over released memory (debug)
    const size_t DOD_CACHE_LINE   # 64: alignment of columns and system blocks
    bint dod_add_overflow(size_t a, size_t b, size_t* out)
    bint dod_mul_overflow(size_t a, size_t b, size_t* out)
    bint dod_is_pow2(size_t x)
    size_t dod_pad_for(uintptr_t p, size_t align)
    void dod_poison(void* p, size_t n)
    void dod_prefetch(const void* p)      # a hint: fetch p's line to read it soon
    void dod_prefetch_w(const void* p)    # ... to write it soon
    void dod_debug_fail(const char* what, const void* p)   # debug builds: report and abort
