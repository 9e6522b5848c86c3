# dod/loop.pxd: the fixed-rate loop's tick-time histogram (engine) and the
# Loop owner. cimport it to record durations in your own nogil code:
#
#     from dod.loop cimport dod_histogram, dod_histogram_record
#
# Invariants
#   * counts has DOD_HIST_BINS bins; a value v (ns) lands in bin
#     dod_histogram_bin(v): exact below 128 ns, then 64 sub-bins per power of
#     two (relative width <= 1/64, ~1.6 %). Every uint64 value has a bin.
#   * total == sum(counts); min/max/sum are exact.
#   * All bytes zero (ZII) is an empty histogram, except that `counts` must
#     point at DOD_HIST_BINS zeroed uint64 (the owner allocates them once).
from libc.stdint cimport uint64_t, int64_t

from dod.arena cimport Arena

cdef extern from *:
    int __builtin_clzll(unsigned long long x) nogil     # gcc/clang builtin

cdef enum:
    DOD_HIST_SUB_BITS = 6
    DOD_HIST_BINS = 3776        # (63 - 6) * 64 + 128: every uint64 has a bin


ctypedef struct dod_histogram:
    uint64_t* counts            # DOD_HIST_BINS counters, allocated once by the owner
    uint64_t total              # values recorded
    uint64_t min                # exact smallest (valid when total > 0)
    uint64_t max                # exact largest
    double sum                  # exact (to double precision) sum, for the mean


cdef inline int dod_histogram_bin(uint64_t v) noexcept nogil:
    cdef int e
    if v < 128:
        return <int>v
    e = 63 - __builtin_clzll(v)          # e >= 7
    return (e - DOD_HIST_SUB_BITS) * 64 + <int>(v >> (e - DOD_HIST_SUB_BITS))


cdef inline void dod_histogram_record(dod_histogram* h, uint64_t v) noexcept nogil:
    """Count one value (ns). No allocation, no branch on the bins' memory."""
    h.counts[dod_histogram_bin(v)] += 1
    if h.total == 0 or v < h.min:
        h.min = v
    if v > h.max:
        h.max = v
    h.total += 1
    h.sum += <double>v


cdef class Loop:
    cdef dod_histogram hist            # tick durations (step + scratch reset), ns
    cdef readonly object step
    cdef readonly double rate
    cdef int64_t period_ns
    cdef int64_t spin_ns
    cdef readonly Arena scratch
    cdef bint catch_up
    cdef bint check_scratch
    cdef object numpy_handler          # dod.numpy_memory.NumpyHandler over scratch, or None
    cdef object gc_mode
    cdef object clock                  # fake clock (tests) or None: CLOCK_MONOTONIC
    cdef readonly bint running
    cdef bint stop_requested
    # statistics since creation or reset_stats()
    cdef readonly uint64_t ticks       # steps run
    cdef readonly uint64_t misses      # ticks that ended after their deadline
    cdef readonly uint64_t skipped     # deadline slots skipped (overrun="skip")
    cdef readonly uint64_t longest_miss_run
    cdef uint64_t miss_run
    cdef double late_sum               # start lateness (actual start - scheduled), ns
    cdef double late_sumsq
    cdef readonly int64_t late_max_ns
    cdef object _realtime              # dod.realtime.Realtime: applied while running

    cdef int64_t _now(self) except? -1
    cdef int _sleep_until(self, int64_t t) except -1
