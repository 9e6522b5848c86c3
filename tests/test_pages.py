"""The page source: fresh pages are zero, memory goes back on release, statistics add up."""

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dod.arena import Arena
from dod.pages import PageSource, prefault
from prefault_support import MiB, PAGE, needs_proc, rss, run_refused, span


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


# ---------------------------------------------------------------- prefault over threads

@needs_proc
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_prefault_makes_buffers_resident_and_keeps_contents(threads):
    s = PageSource()
    big = s.empty(150 * MiB, np.uint8)        # three 64 MiB pieces at least
    small = s.empty((1000, 3), np.float64)
    small[:] = np.arange(3000).reshape(1000, 3)
    view = big[100:100 + 70 * MiB]            # starts inside a page, crosses a 64 MiB line
    before = rss()
    touched = prefault(view, small, bytearray(10), threads=threads)
    assert touched == span(view.ctypes.data, view.nbytes) + span(small.ctypes.data, small.nbytes) + PAGE
    assert rss() - before > 0.9 * view.nbytes
    assert not view.any() and np.array_equal(small, np.arange(3000).reshape(1000, 3))
    assert prefault(big, threads=threads) == span(big.ctypes.data, big.nbytes) == 150 * MiB


def test_prefault_counts_the_same_pages_at_any_thread_count():
    a = np.zeros(3 * PAGE + 5, np.uint8)
    b = PageSource().empty(65 * MiB + 7, np.uint8)[3:]
    want = span(a.ctypes.data, a.nbytes) + span(b.ctypes.data, b.nbytes)
    for threads in (1, 2, 3, 4, 256):
        assert prefault(a, b, threads=threads) == want
    assert prefault(threads=4) == 0 and prefault(np.zeros(0), threads=2) == 0


def test_prefault_refuses_what_it_cannot_fault_and_faults_nothing():
    ro = np.zeros(10)
    ro.flags.writeable = False
    for bad, err in ((b"bytes", BufferError), (ro, BufferError), (np.zeros((4, 4))[:, ::2], BufferError),
                     (object(), TypeError), (3, TypeError)):
        with pytest.raises(err):
            prefault(np.zeros(10), bad)
    for bad in (0, -1, 257, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="threads must be"):
            prefault(np.zeros(10), threads=bad)


def test_prefault_holds_the_buffers_while_it_runs():
    # a bytearray cannot be resized while exported; after prefault it can again
    buf = bytearray(5 * PAGE)
    assert prefault(buf, buf, threads=2) >= 2 * len(buf)
    buf.extend(b"x" * 10)
    assert len(buf) == 5 * PAGE + 10


REFUSED_PAGES_PREFAULT = r"""
import sys
import numpy as np
from dod.arena import Arena
from dod.pages import PageSource, prefault

threads = int(sys.argv[1])
a = PageSource().empty(200 << 20, np.uint8)       # four pieces
a[::4096] = 7
arena = Arena(100 << 20)
x = arena.empty(10, np.int64)
x[:] = 5
for k in (threads, 4):
    for call in (lambda: prefault(a, threads=k), lambda: arena.prefault(threads=k)):
        try:
            call()
        except MemoryError as e:
            assert "could not fault in" in str(e) and "Cannot allocate memory" in str(e), e
        else:
            raise AssertionError("prefault did not raise")
assert (a[::4096] == 7).all() and (x == 5).all() and a.sum() == 7 * len(a[::4096])
print("refused as expected")
"""


@pytest.mark.parametrize("threads", [1, 3])
def test_prefault_refused_by_the_kernel_raises_and_changes_nothing(tmp_path, threads):
    # pieces refused after some succeeded (part resident), then every piece
    assert "refused as expected" in run_refused(tmp_path, REFUSED_PAGES_PREFAULT, threads, ok=2)


OS_SOURCE = """
from dod.arena cimport Arena

cdef extern from "_os.h" nogil:
    size_t dod_os_touch_pages(void* p, size_t size)
    size_t dod_os_span_pages(const void* p, size_t size)

def touch(Arena a, size_t offset, size_t n):
    return dod_os_touch_pages(a.engine.base + offset, n)

def span(size_t address, size_t n):
    return dod_os_span_pages(<const void*>address, n)

def base(Arena a):
    return <size_t>a.engine.base
"""


@needs_proc
def test_os_touch_fallback_and_page_span(compile_cython):
    # dod_os_touch_pages is the path where MADV_POPULATE_WRITE is missing
    # (kernels before 5.14): one read-write per page, contents unchanged.
    mod = compile_cython(OS_SOURCE)
    a = Arena(24 * MiB)
    x = a.empty(4096, np.uint8)
    x[:] = np.arange(4096) % 251
    before = rss()
    assert mod.touch(a, 100, 16 * MiB) == mod.span(mod.base(a) + 100, 16 * MiB) >= 16 * MiB
    assert rss() - before > 15 * MiB
    assert np.array_equal(x, np.arange(4096) % 251)
    assert mod.touch(a, 0, 0) == 0
    base = PAGE * 1000
    assert mod.span(base, 1) == PAGE and mod.span(base, PAGE) == PAGE
    assert mod.span(base + PAGE - 1, 2) == 2 * PAGE           # crosses a boundary
    assert mod.span(base + 5, PAGE) == 2 * PAGE
    assert mod.span(base, 0) == 0 and mod.span(0, 100) == 0


RANGES_SOURCE = """
from libc.stdlib cimport malloc, free
from dod.arena cimport Arena
from dod.table cimport Table
from dod.pages cimport dod_page_range, dod_pages_prefault, DOD_PAGES_PREFAULT_PIECE

def ranges(owner):
    cdef size_t n, i
    cdef dod_page_range* r
    n = (<Arena>owner).page_ranges(NULL) if isinstance(owner, Arena) else (<Table>owner).page_ranges(NULL)
    r = <dod_page_range*>malloc((n + 1) * sizeof(dod_page_range))
    if isinstance(owner, Arena):
        (<Arena>owner).page_ranges(r)
    else:
        (<Table>owner).page_ranges(r)
    out = [(<size_t>r[i].base, r[i].size) for i in range(n)]
    free(r)
    return out

def fault(list spans, int threads):
    cdef size_t n = len(spans), i, touched = 123
    cdef int err
    cdef dod_page_range* r = <dod_page_range*>malloc((n + 1) * sizeof(dod_page_range))
    for i in range(n):
        r[i].base = <void*><size_t>spans[i][0]
        r[i].size = spans[i][1]
    with nogil:
        err = dod_pages_prefault(r, n, threads, &touched)
    free(r)
    return err, touched

PIECE = DOD_PAGES_PREFAULT_PIECE
"""


def test_owners_list_their_memory_for_the_cimport_api(compile_cython):
    from dod.table import Table
    mod = compile_cython(RANGES_SOURCE)
    assert mod.PIECE == 64 * MiB
    a = Arena(3 * MiB, growable=True)
    a.empty(4 * MiB, np.uint8)                # a second block
    r = mod.ranges(a)
    assert len(r) == a.blocks == 2 and sum(n for _, n in r) == a.capacity
    t = Table({"x": np.float64, "v": (np.float32, (3,))}, 1000)
    r = mod.ranges(t)
    assert len(r) >= 3 and sum(n for _, n in r) == t.nbytes       # each column and the slot map
    assert mod.fault(r, 2) == (0, sum(span(p, n) for p, n in r)) == (0, t.prefault())
    assert mod.fault([], 4) == (0, 0) and mod.fault([(0, 100), (12345, 0)], 2) == (0, 0)     # nothing to fault
