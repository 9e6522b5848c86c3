# dod/bench/_timing.pxd: the clock every C-timed benchmark kernel reads.
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef inline double now_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec * 1e9 + <double>ts.tv_nsec
