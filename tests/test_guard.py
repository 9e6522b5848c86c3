"""Guard zones: overruns and uses after free kill a forked child with a signal."""
import ctypes
import faulthandler
import mmap
import os
import signal

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dod.resource
from dod.guard import GuardedResource
from dod.pages import PageSource

PAGE = mmap.PAGESIZE


def dies_with_signal(fn):
    """Run fn in a forked child; return the signal that killed it (None if it exited)."""
    pid = os.fork()
    if pid == 0:                                   # child
        faulthandler.disable()                     # die quietly: the signal is the verdict
        for sig in FAULTS:                         # and let it kill us (AddressSanitizer would catch it)
            signal.signal(sig, signal.SIG_DFL)
        try:
            fn()
        finally:
            os._exit(0)                            # survived: the parent sees a normal exit
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else None


def poke(addr):
    ctypes.c_uint8.from_address(addr).value = 1


def peek(addr):
    return ctypes.c_uint8.from_address(addr).value


FAULTS = (signal.SIGSEGV, signal.SIGBUS)


@pytest.mark.parametrize("n", [64, 100, 4096])
def test_overrun_faults(n):
    g = GuardedResource()
    a = g.empty(n, np.uint8, align=1)
    end = a.ctypes.data + n
    poke(end - 1)                                  # the last byte is fine
    assert dies_with_signal(lambda: poke(end)) in FAULTS
    assert dies_with_signal(lambda: poke(end - 1)) is None     # the harness itself can pass


def test_underrun_faults_on_the_left():
    g = GuardedResource(side="left")
    a = g.empty(10, np.uint8)
    assert a.ctypes.data % PAGE == 0
    poke(a.ctypes.data + 9)
    assert dies_with_signal(lambda: poke(a.ctypes.data - 1)) in FAULTS


def test_use_after_free_faults_while_quarantined():
    g = GuardedResource(quarantine=4)
    a = g.empty(100, np.uint8)
    addr = a.ctypes.data
    a[:] = 5
    assert dies_with_signal(lambda: peek(addr)) is None
    del a                                          # freed: quarantined, PROT_NONE
    assert g.quarantined == 1
    assert dies_with_signal(lambda: peek(addr)) in FAULTS
    assert dies_with_signal(lambda: poke(addr + 50)) in FAULTS


def test_quarantine_ring_releases_the_oldest():
    src = PageSource()
    g = GuardedResource(src.resource(), quarantine=2)
    for _ in range(5):
        g.empty(10)
    s = g.stats()
    assert s["quarantined"] == 2 and s["frees"] == 5 and s["used"] == 0
    assert src.mapped == 2 * 2 * PAGE == s["capacity"]
    g.flush_quarantine()
    assert src.mapped == 0 and g.quarantined == 0


def test_over_malloc_resource_and_validation():
    g = GuardedResource(dod.resource.malloc, quarantine=1)
    a = g.zeros(33, np.uint8)
    assert not a.any()
    with pytest.raises(ValueError):
        g.empty(1, align=2 * PAGE)
    with pytest.raises(ValueError):
        GuardedResource(side="middle")
    with pytest.raises(ValueError):
        GuardedResource(quarantine=-1)
    assert g.stats()["failed"] == 0
    del a


class GuardWalk(RuleBasedStateMachine):
    @initialize(side=st.sampled_from(["right", "left"]), q=st.integers(0, 4))
    def setup(self, side, q):
        self.src = PageSource()
        self.g = GuardedResource(self.src.resource(), side=side, quarantine=q)
        self.live = []
        self.frees = 0

    @rule(n=st.integers(0, 3 * PAGE), align=st.sampled_from([1, 16, 64, PAGE]))
    def allocate(self, n, align):
        a = self.g.empty(n, np.uint8, align=align)
        addr = a.ctypes.data
        assert addr % align == 0
        if self.g.side == "left":
            assert addr % PAGE == 0
        else:
            assert (addr + n + align - 1) // align * align % PAGE == 0 or n == 0
        a[:] = 3
        self.live.append((a, n))

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 1 << 30))
    def free(self, i):
        a, n = self.live.pop(i % len(self.live))
        assert (a == 3).all()
        del a
        self.frees += 1

    @invariant()
    def accounting(self):
        assert self.g.check()
        s = self.g.stats()
        assert s["used"] == sum(n for _, n in self.live)
        assert s["frees"] == self.frees
        assert s["quarantined"] == min(self.frees, self.g.quarantine)
        assert self.src.mapped == s["capacity"]
        regions = sum((max(n, 1) + PAGE - 1) // PAGE * PAGE + PAGE for _, n in self.live)
        assert s["capacity"] == regions + s["quarantined_bytes"]


TestGuardWalk = GuardWalk.TestCase


def test_wraps_another_dod_allocator():
    """The wrapper sits on any dod resource: here the atomic arena's blocks."""
    from dod.atomic_arena import AtomicArena

    arena = AtomicArena(1 << 16)
    g = GuardedResource(arena.resource(), quarantine=2)
    a = g.empty(100, np.uint8, align=4)
    assert arena.owns(a) and arena.in_use > 0
    end = a.ctypes.data + 100
    assert dies_with_signal(lambda: poke(end)) in FAULTS
    del a
    g.flush_quarantine()
    assert arena.in_use == 0 and all(v == 0 for v in arena.block_counters().values())
