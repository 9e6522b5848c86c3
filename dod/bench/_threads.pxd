# dod/bench/_threads.pxd: a scaling harness for nogil kernels.
#
# A kernel is a C function that one thread runs without the GIL:
#
#     cdef size_t my_kernel(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil
#
# It does `iterations` units of work (its own notion of an operation) and
# returns the number of operations it completed. A kernels module wraps it:
#
#     from dod.bench._threads cimport ThreadKernel
#     k = ThreadKernel.wrap(my_kernel, <void*>state, state_owner, "name")
#
# and Python runs it with dod.bench._threads.run_threads(k, nthreads, iterations):
# N Python threads are started, each drops the GIL, all wait at a barrier in
# C, and each times only its own kernel call with clock_gettime. The rate is
# total operations over the span from the first start to the last end.

ctypedef size_t (*dod_thread_kernel)(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil


cdef class ThreadKernel:
    cdef dod_thread_kernel fn
    cdef void* ctx            # passed to every call; kept alive by `owner`
    cdef readonly object owner
    cdef readonly str name

    @staticmethod
    cdef ThreadKernel wrap(dod_thread_kernel fn, void* ctx, object owner, str name)
