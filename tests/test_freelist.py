"""dod.freelist: model-based walks (both strategies), coalescing, bad input, cimport."""
import gc

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dod.freelist import FreeList

HEADER = 16


def addr(a):
    return a.__array_interface__["data"][0]


def state(fl):
    s = fl.stats()
    s.pop("failed")
    return s


class FreeListWalk(RuleBasedStateMachine):
    """Random alloc/free against a shadow list of live allocations."""

    @initialize(capacity=st.integers(64, 8192), strategy=st.sampled_from(["first", "best"]))
    def make(self, capacity, strategy):
        self.fl = FreeList(capacity, strategy=strategy)
        self.capacity = self.fl.capacity
        self.live = {}          # key -> (array, tag, align)
        self.next_key = 1

    @rule(n=st.integers(0, 600), dtype=st.sampled_from(["u1", "f4", "f8", "c16"]),
          align=st.sampled_from([None, 8, 32, 64, 256]))
    def alloc(self, n, dtype, align):
        itemsize = np.dtype(dtype).itemsize
        n = n // itemsize
        before = state(self.fl)
        failed = self.fl.failed
        try:
            a = self.fl.alloc(n, dtype, align=align)
        except MemoryError:
            assert state(self.fl) == before
            assert self.fl.failed == failed + 1
            return
        want = max(align or 16, np.dtype(dtype).alignment, 16) if align is None else align
        assert addr(a) % want == 0
        assert a.shape == (n,) and a.dtype == np.dtype(dtype)
        lo, hi = addr(a), addr(a) + max(a.nbytes, 1)
        for other, _, _ in self.live.values():
            olo, ohi = addr(other), addr(other) + max(other.nbytes, 1)
            assert hi <= olo or ohi <= lo, "allocations overlap"
        tag = self.next_key & 0xFF
        a.view(np.uint8)[:] = tag
        self.live[self.next_key] = (a, tag, align)
        self.next_key += 1
        assert self.fl.used > before["used"]

    @precondition(lambda self: self.live)
    @rule(data=st.data(), via_slice=st.booleans())
    def free(self, data, via_slice):
        key = data.draw(st.sampled_from(sorted(self.live)))
        a, tag, _ = self.live.pop(key)
        assert (a.view(np.uint8) == tag).all(), "payload changed under a live allocation"
        used = self.fl.used
        self.fl.free(a[1:] if via_slice and a.size > 1 else a)
        assert self.fl.used == used                 # still viewed by `a`
        with pytest.raises(ValueError):
            self.fl.free(a)                         # double free
        del a
        assert self.fl.used < used                  # returned when the array died

    @rule()
    def free_foreign(self):
        before = self.fl.stats()
        for bad in (np.zeros(4), np.zeros(4)[1:], FreeList(64).alloc(2)):
            with pytest.raises(ValueError):
                self.fl.free(bad)
        with pytest.raises(ValueError):
            self.fl.free("nope")
        assert self.fl.stats() == before

    @invariant()
    def consistent(self):
        fl = getattr(self, "fl", None)
        if fl is None:
            return
        fl.check()
        assert fl.live == len(self.live)
        assert fl.used + fl.available == self.capacity - HEADER
        assert fl.largest_free() <= fl.available
        assert fl.peak >= fl.used

    def teardown(self):
        fl = getattr(self, "fl", None)
        if fl is None:
            return
        for a, tag, _ in self.live.values():
            assert (a.view(np.uint8) == tag).all()
            del a
        self.live.clear()
        gc.collect()
        fl.check()
        # Coalescing cross-check: everything free again is one block, and one
        # maximal allocation succeeds.
        assert fl.used == 0 and fl.free_blocks == 1
        assert fl.largest_free() == self.capacity - 2 * HEADER
        big = fl.alloc(fl.largest_free(), np.uint8)
        assert fl.available == 0
        del big
        fl.check()


TestFreeListWalk = FreeListWalk.TestCase


@pytest.mark.parametrize("strategy", ["first", "best"])
def test_coalesce_both_sides(strategy):
    fl = FreeList(4096, strategy=strategy)
    a, b, c = fl.alloc(100, np.uint8), fl.alloc(100, np.uint8), fl.alloc(100, np.uint8)
    tail = fl.alloc(16, np.uint8)       # keeps c from merging with the tail block
    blocks = fl.free_blocks
    fl.free(a)
    del a
    fl.free(c)
    del c
    assert fl.free_blocks == blocks + 2
    fl.free(b)
    del b                               # merges a, b, c into one
    assert fl.free_blocks == blocks + 1
    fl.check()
    big = fl.alloc(3 * 112 + 2 * HEADER - HEADER, np.uint8)   # exactly the merged block's payload
    assert fl.free_blocks == blocks
    del big, tail


def test_best_fit_picks_smallest_first_fit_picks_first():
    for strategy, expect in (("first", "big"), ("best", "small")):
        fl = FreeList(8192, strategy=strategy)
        keep = []
        small = fl.alloc(64, np.uint8)
        keep.append(fl.alloc(16, np.uint8))
        big = fl.alloc(1024, np.uint8)
        keep.append(fl.alloc(16, np.uint8))
        where = {"small": addr(small), "big": addr(big)}
        fl.free(small)
        del small
        fl.free(big)                # freed last: front of the list
        del big
        got = fl.alloc(48, np.uint8)
        assert addr(got) == where[expect], strategy


def test_largest_free_versus_available():
    fl = FreeList(1024)
    arrs = [fl.alloc(48, np.uint8) for _ in range(15)]
    for a in arrs[::2]:
        fl.free(a)
    del a
    arrs = arrs[1::2]
    gc.collect()
    assert fl.available > 2 * fl.largest_free()     # fragmented
    with pytest.raises(MemoryError) as e:
        fl.alloc(fl.largest_free() + 1, np.uint8)
    assert "largest free" in str(e.value)


def test_arrays_keep_allocator_alive_and_return_memory():
    fl = FreeList(1 << 16)
    a = fl.zeros((10, 3), np.float32)
    assert (a == 0).all()
    del fl
    gc.collect()
    a[:] = 5                                        # still valid memory
    assert a.sum() == 150


def test_dropping_array_without_free_returns_memory():
    fl = FreeList(4096)
    fl.alloc(100, np.uint8)                         # dropped at once
    assert fl.live == 0 and fl.used == 0 and fl.allocations == 1


@pytest.mark.parametrize("args, kwargs, exc", [
    ((0,), {}, ValueError),
    ((-8,), {}, ValueError),
    ((47,), {}, ValueError),
    ((2**60,), {}, ValueError),
    ((1.5,), {}, TypeError),
    ((4096,), {"strategy": "worst"}, ValueError),
])
def test_bad_construction(args, kwargs, exc):
    with pytest.raises(exc):
        FreeList(*args, **kwargs)


def test_bad_requests_leave_state_unchanged():
    fl = FreeList(4096)
    keep = fl.alloc(10)
    before = fl.stats()
    for shape, dtype, align, exc in [(-1, "f8", None, ValueError), ((2, -3), "f8", None, ValueError),
                                     (4, object, None, TypeError), (4, "f8", 3, ValueError),
                                     (4, "f8", 0, ValueError), ("x", "f8", None, TypeError),
                                     (2**62, "f8", None, MemoryError), (1 << 20, "u1", None, MemoryError)]:
        with pytest.raises(exc):
            fl.alloc(shape, dtype, align=align)
    after = fl.stats()
    assert after.pop("failed") == before.pop("failed") + 1     # only the real exhaustion counts
    assert after == before
    fl.check()
    del keep


def test_zero_size_allocation():
    fl = FreeList(256)
    a = fl.alloc(0, np.float64)
    assert a.shape == (0,) and fl.live == 1
    fl.free(a)
    del a
    assert fl.live == 0


CIMPORT = r"""
# cython: language_level=3
from libc.stdint cimport uintptr_t
from dod.freelist cimport FreeList, dod_freelist_allocate, dod_freelist_free

def churn(FreeList owner, size_t rounds):
    '''Allocate mixed sizes and alignments through the inline engine, free every other.'''
    cdef void* ps[256]
    cdef size_t r, i, n = 0, misaligned = 0, fails = 0
    with nogil:
        for r in range(rounds):
            for i in range(256):
                ps[i] = dod_freelist_allocate(&owner.engine, 8 + (i * 37) % 300, 16 << (i % 4))
                if ps[i] == NULL:
                    fails += 1
                elif (<uintptr_t>ps[i]) % (16 << (i % 4)):
                    misaligned += 1
            for i in range(0, 256, 2):
                if ps[i] != NULL:
                    dod_freelist_free(&owner.engine, ps[i])
            for i in range(1, 256, 2):
                if ps[i] != NULL:
                    dod_freelist_free(&owner.engine, ps[i])
    return misaligned, fails
"""


def test_cimport_engine(compile_cython):
    mod = compile_cython(CIMPORT, "dod_freelist_cimport_mod")
    for strategy in ("first", "best"):
        _engine_churn(mod, strategy)


def _engine_churn(mod, strategy):
    fl = FreeList(1 << 20, strategy=strategy)
    misaligned, fails = mod.churn(fl, 20)
    assert misaligned == 0 and fails == 0
    assert fl.live == 0 and fl.used == 0 and fl.free_blocks == 1 and fl.allocations == 20 * 256
    fl.check()
    small = FreeList(4096, strategy=strategy)
    misaligned, fails = mod.churn(small, 1)
    assert misaligned == 0 and fails > 0 and small.failed == fails
    small.check()
