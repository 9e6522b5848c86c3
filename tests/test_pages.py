"""The page source: fresh pages are zero, memory goes back on release, statistics add up."""
import mmap

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dod.arena import Arena
from dod.pages import PageSource

PAGE = mmap.PAGESIZE


def page_round(n):
    return max(PAGE, (n + PAGE - 1) // PAGE * PAGE)


def is_mapped(addr):
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                return True
    return False


def test_fresh_pages_are_zero_and_go_back():
    s = PageSource()
    a = s.empty((1000, 3), np.float64)
    addr = a.ctypes.data
    assert addr % PAGE == 0
    assert not a.any()
    assert s.mapped == page_round(24000) and s.maps == 1
    a[:] = 7
    assert is_mapped(addr)
    del a
    assert s.mapped == 0 and s.unmaps == 1 and s.peak == page_round(24000)
    assert not is_mapped(addr)


def test_large_alignment_and_zero_size():
    s = PageSource()
    a = s.empty(10, align=1 << 21)
    assert a.ctypes.data % (1 << 21) == 0
    assert s.mapped == PAGE                  # the over-mapped head and tail were given back
    z = s.empty(0)
    assert z.size == 0 and s.mapped == 2 * PAGE


def test_decommit_reads_zero():
    s = PageSource()
    a = s.empty(3 * PAGE, np.uint8)
    a[:] = 1
    s.decommit(a)
    assert not a.any() and s.mapped == 3 * PAGE
    with pytest.raises(ValueError):
        s.decommit(a[1:])
    with pytest.raises(ValueError):
        PageSource().decommit(a)


def test_bad_requests_change_nothing():
    s = PageSource()
    before = s.stats()
    with pytest.raises(ValueError):
        s.empty(10, align=3)
    with pytest.raises(ValueError):
        s.empty(-1)
    with pytest.raises(TypeError):
        s.empty(3, dtype=object)
    with pytest.raises(MemoryError):
        s.empty(1 << 62, np.uint8)
    assert s.stats()["used"] == before["used"] and s.maps == 0


def test_backs_an_arena_through_the_resource():
    s = PageSource()
    arena = Arena(1 << 16, growable=True, resource=s.resource())
    x = arena.zeros(1 << 17, np.uint8)
    assert s.maps == 2 and s.mapped >= (1 << 16) + (1 << 17)
    del x
    del arena
    assert s.mapped == 0 and s.unmaps == 2


class PageWalk(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.src = PageSource()
        self.live = []
        self.peak = 0

    @rule(n=st.integers(0, 5 * PAGE), align=st.sampled_from([None, PAGE, 4 * PAGE, 1 << 20]))
    def allocate(self, n, align):
        a = self.src.empty(n, np.uint8, align=align)
        assert a.ctypes.data % (align or PAGE) == 0
        assert not a.any()
        a[:] = len(self.live) % 251
        self.live.append((a, len(self.live) % 251, n))
        self.peak = max(self.peak, sum(page_round(m) for _, _, m in self.live))

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 1 << 30))
    def release(self, i):
        a, tag, n = self.live.pop(i % len(self.live))
        assert (a == tag).all()
        maps = self.src.unmaps
        del a
        assert self.src.unmaps == maps + 1

    @invariant()
    def accounting(self):
        assert self.src.check()
        assert self.src.mapped == sum(page_round(m) for _, _, m in self.live)
        assert self.src.peak == self.peak
        assert self.src.maps - self.src.unmaps == len(self.live)
        for a, tag, _ in self.live:
            assert (a == tag).all()


TestPageWalk = PageWalk.TestCase
