"""The scaling harness (dod.bench._threads): every thread runs its kernel, nogil, at once."""
import pytest

KERNEL = r"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free
from dod.atomics cimport dod_atomic_load_u64, dod_atomic_fetch_add_u64, dod_thread_yield
from dod.bench._threads cimport ThreadKernel

cdef struct State:
    uint64_t seen[64]
    uint64_t inside          # threads inside their kernel at once
    uint64_t overlap         # max of `inside` that any thread observed

cdef size_t kernel(void* ctx, int thread, int nthreads, size_t iterations) noexcept nogil:
    cdef State* s = <State*>ctx
    cdef size_t i
    cdef uint64_t now
    now = dod_atomic_fetch_add_u64(&s.inside, 1) + 1
    # Wait (bounded) for the others: proves the threads run without the GIL at once.
    for i in range(200000):
        now = dod_atomic_load_u64(&s.inside)
        if now >= <uint64_t>nthreads:
            break
        dod_thread_yield()
    if now > s.overlap:
        s.overlap = now
    for i in range(iterations):
        s.seen[thread] += 1
    return iterations

cdef class Holder:
    cdef State* s
    def __cinit__(self):
        self.s = <State*>calloc(1, sizeof(State))
    def __dealloc__(self):
        free(self.s)
    def seen(self, int i):
        return self.s.seen[i]
    def overlap(self):
        return self.s.overlap
    def reset(self):
        self.s.inside = 0
        self.s.overlap = 0

def make():
    h = Holder()
    return h, ThreadKernel.wrap(kernel, <void*>h.s, h, "count")
"""


def test_every_thread_runs_its_kernel_concurrently(compile_cython):
    from dod.bench._threads import run_threads, scaling

    mod = compile_cython(KERNEL)
    holder, kernel = mod.make()
    r = run_threads(kernel, 3, 1000)
    assert r.threads == 3 and r.ops == 3000
    assert [holder.seen(i) for i in range(4)] == [1000, 1000, 1000, 0]
    assert holder.overlap() == 3          # all three were inside their kernel together
    # one clock reading per thread, and the derived figures follow from them
    # (no timing is compared with anything: speed goals live in the benchmarks)
    assert len(r.thread_ns) == 3 and all(isinstance(t, int) for t in r.thread_ns + [r.wall_ns])
    assert r.ns_per_op == pytest.approx(r.wall_ns / r.ops)
    holder.reset()
    runs = scaling(kernel, [1, 2], 10, repeat=3)
    assert sorted(runs) == [1, 2] and runs[2].ops == 20
    with pytest.raises(ValueError):
        run_threads(kernel, 0, 10)
