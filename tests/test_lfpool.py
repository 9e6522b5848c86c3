"""LockFreePool: model-based walk, cross-thread stress, ABA, cimport API."""
import threading

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cython_build import compile_cython_module
from dod.lfpool import LockFreePool
from dod.resource import malloc


# ---------------------------------------------------------------- basics

def test_construction_validates_and_rounds():
    p = LockFreePool(24, alignment=8)
    assert p.block_size == 24 and p.alignment == 8 and p.capacity == 0
    assert LockFreePool(1).block_size == 16            # default alignment 16
    assert LockFreePool(3, alignment=1).block_size == 8  # at least the link word
    for bad in (dict(block_size=0), dict(block_size=-1), dict(block_size=8, alignment=3),
                dict(block_size=8, alignment=8192), dict(block_size=8, capacity=-1),
                dict(block_size=8, capacity=5, max_blocks=4), dict(block_size=8, chunk_blocks=0)):
        with pytest.raises(ValueError):
            LockFreePool(**bad)
    with pytest.raises(TypeError):
        LockFreePool(8.5)


def test_zero_capacity_grows_and_pages_are_used_fully():
    p = LockFreePool(64, capacity=10)
    # A page-rounded chunk: every block that fits in the pages is used.
    assert p.capacity >= 10 and p.grows == 1 and p.nbytes % 4096 == 0
    # The chunk's record (dod_lfpool_chunk: base, size, first, blocks, next:
    # five words) sits at the end of the pages; every whole block before it is used.
    assert p.capacity == (p.nbytes - 5 * 8) // 64
    hs = [p.acquire() for _ in range(p.capacity + 1)]
    assert p.grows == 2 and p.in_use == len(hs) and p.peak >= len(hs) - 1
    p.release_many(hs)
    assert p.in_use == 0 and p.available == p.capacity
    p.check()


def test_try_acquire_never_grows_and_max_blocks_fails_cleanly():
    p = LockFreePool(32, max_blocks=3)
    assert p.try_acquire() == 0 and p.capacity == 0
    hs = [p.acquire() for _ in range(3)]
    assert p.try_acquire() == 0
    before = p.stats()
    with pytest.raises(MemoryError, match="max_blocks 3"):
        p.acquire()
    after = p.stats()
    assert after.pop("failed") == before.pop("failed") + 1 and after == before
    p.release(hs[1])
    assert p.try_acquire() != 0


def test_handles_views_and_release_errors():
    p = LockFreePool(64)
    h = p.acquire()
    v = p.view(h, np.float64)
    assert v.shape == (8,) and v.ctypes.data == p.address(h) and v.ctypes.data % 16 == 0
    v[:] = 3.5
    with pytest.raises(BufferError):
        p.release(h)
    with pytest.raises(BufferError):
        p.release_many([h])
    assert p.in_use == 1
    with pytest.raises(ValueError):
        p.view(h, np.float64, (9,))                 # does not fit
    del v
    p.release(h)
    for bad in (h, 0, -1, 1 << 64, 12345):
        with pytest.raises(ValueError):
            p.release(bad)
    with pytest.raises(TypeError):
        p.release("x")
    h2 = p.acquire()
    with pytest.raises(ValueError, match="twice"):
        p.release_many([h2, h2])
    assert p.in_use == 1
    q = LockFreePool(64)
    with pytest.raises(ValueError):
        q.release(h2)                                  # foreign handle
    with pytest.raises(TypeError):
        p.view(h2, object)


def test_view_keeps_pool_alive():
    p = LockFreePool(16)
    h = p.acquire()
    v = p.view(h, np.uint32)
    v[:] = 7
    del p
    import gc
    gc.collect()
    assert list(v) == [7, 7, 7, 7]


def test_resource_face():
    p = LockFreePool(48, resource=malloc)
    r = p.resource()
    assert r.owner is p and "lfpool" in repr(r)
    assert "LockFreePool" in repr(p)


# ---------------------------------------------------------------- model-based walk

class PoolWalk(RuleBasedStateMachine):
    @initialize(size=st.integers(1, 200), align=st.sampled_from([8, 16, 32, 64, 128]),
                limit=st.one_of(st.none(), st.integers(1, 40)), chunk=st.integers(1, 9),
                src=st.sampled_from(["pages", "malloc"]))
    def setup(self, size, align, limit, chunk, src):
        self.pool = LockFreePool(size, alignment=align, max_blocks=limit, chunk_blocks=chunk,
                                 resource=malloc if src == "malloc" else None)
        self.size, self.align, self.limit = size, align, limit
        self.live = {}       # handle -> tag
        self.views = {}      # handle -> live array
        self.tag = 0

    def _stamp(self, h):
        self.tag += 1
        v = self.pool.view(h, np.uint8)
        v[:] = self.tag & 0xFF
        self.live[h] = self.tag & 0xFF

    @rule()
    def acquire(self):
        full = self.limit is not None and len(self.live) >= self.limit
        if full:
            before = (self.pool.capacity, self.pool.in_use)
            with pytest.raises(MemoryError):
                self.pool.acquire()
            assert (self.pool.capacity, self.pool.in_use) == before
        else:
            self._stamp(self.pool.acquire())

    @rule()
    def try_acquire(self):
        cap = self.pool.capacity
        h = self.pool.try_acquire()
        assert self.pool.capacity == cap
        if len(self.live) >= cap:
            assert h == 0
        else:
            assert h != 0
            self._stamp(h)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def release(self, data):
        h = data.draw(st.sampled_from(sorted(self.live)))
        if h in self.views:
            with pytest.raises(BufferError):
                self.pool.release(h)
            return
        self.pool.release(h)
        del self.live[h]
        with pytest.raises(ValueError):
            self.pool.release(h)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def release_many(self, data):
        hs = data.draw(st.lists(st.sampled_from(sorted(self.live)), unique=True, max_size=8))
        if any(h in self.views for h in hs):
            before = self.pool.in_use
            with pytest.raises(BufferError):
                self.pool.release_many(hs)
            assert self.pool.in_use == before
            return
        self.pool.release_many(hs)
        for h in hs:
            del self.live[h]

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def hold_view(self, data):
        h = data.draw(st.sampled_from(sorted(self.live)))
        self.views[h] = self.pool.view(h)

    @precondition(lambda self: self.views)
    @rule()
    def drop_views(self):
        self.views.clear()

    @invariant()
    def consistent(self):
        if not hasattr(self, "pool"):
            return
        p = self.pool
        p.check()
        assert p.in_use == len(self.live) == p.live_handles
        assert p.capacity == p.in_use + p.available
        assert p.peak >= p.in_use
        self.max_live = max(getattr(self, "max_live", 0), len(self.live))
        assert p.peak >= self.max_live
        if self.limit is not None:
            assert p.capacity <= self.limit
        addrs = sorted(p.address(h) for h in self.live)
        for a in addrs:
            assert a % self.align == 0
        assert all(b - a >= p.block_size for a, b in zip(addrs, addrs[1:]))   # no overlap
        assert p.block_size >= self.size
        for h, tag in self.live.items():
            assert (p.view(h, np.uint8)[: self.size] == tag).all()          # payload intact


TestPoolWalk = PoolWalk.TestCase


# ---------------------------------------------------------------- threads, ABA, cimport

STRESS = r"""
from libc.stdint cimport uint64_t, uintptr_t
from dod.atomics cimport (dod_atomic_exchange_ptr, dod_atomic_cas_u64, dod_atomic_store_u64,
                          dod_atomic_fetch_add_u64, dod_atomic_load_u64,
                          dod_tagged_ptr, dod_tagged_load, dod_tagged_cas, dod_atomic_cas_ptr)
from dod.lfpool cimport (LockFreePool, dod_lfpool, dod_lfpool_acquire, dod_lfpool_try_acquire,
                         dod_lfpool_release, dod_lfpool_release_chain, dod_lfpool_link)

DEF NSLOTS = 64

cdef struct Shared:
    void* slots[64]
    uint64_t acquired
    uint64_t released
    uint64_t errors
    uint64_t nulls

cdef inline uint64_t* W(void* b) noexcept nogil:
    return <uint64_t*>b

# Block layout while held: word 0 stamp, word 1 ownership flag (1 = held),
# words 2..n-1 = stamp. The flag is set with a CAS from 0: a block handed to
# two threads at once fails it.
cdef int take(Shared* s, void* b, uint64_t stamp, size_t words) noexcept nogil:
    cdef size_t k
    cdef uint64_t zero = 0
    if not dod_atomic_cas_u64(&W(b)[1], &zero, 1):
        dod_atomic_fetch_add_u64(&s.errors, 1)
        return 0
    W(b)[0] = stamp
    for k in range(2, words):
        W(b)[k] = stamp
    return 1

cdef void give(Shared* s, dod_lfpool* p, void* b, size_t words) noexcept nogil:
    cdef size_t k
    cdef uint64_t stamp = W(b)[0]
    if dod_atomic_load_u64(&W(b)[1]) != 1:
        dod_atomic_fetch_add_u64(&s.errors, 1)
    for k in range(2, words):
        if W(b)[k] != stamp:
            dod_atomic_fetch_add_u64(&s.errors, 1)
            break
    dod_atomic_store_u64(&W(b)[1], 0)
    dod_lfpool_release(p, b)
    dod_atomic_fetch_add_u64(&s.released, 1)

cdef class Holder:
    cdef Shared s
    cdef LockFreePool pool

    def __init__(self, LockFreePool pool):
        self.pool = pool

    def run(self, int tid, size_t iters, bint try_only, bint chains):
        cdef dod_lfpool* p = &self.pool.engine
        cdef size_t i, words = p.block_size // 8, slot
        cdef void* b
        cdef void* old
        cdef void* first
        cdef void* last
        cdef uint64_t x = <uint64_t>tid * 0x9E3779B97F4A7C15ULL + 1
        with nogil:
            for i in range(iters):
                b = dod_lfpool_try_acquire(p) if try_only else dod_lfpool_acquire(p)
                if b == NULL:
                    dod_atomic_fetch_add_u64(&self.s.nulls, 1)
                    continue
                if not take(&self.s, b, (<uint64_t>tid << 48) | i, words):
                    continue
                dod_atomic_fetch_add_u64(&self.s.acquired, 1)
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                slot = x % NSLOTS
                old = dod_atomic_exchange_ptr(&self.s.slots[slot], b)
                if old != NULL:
                    give(&self.s, p, old, words)
        return None

    def hammer(self, int tid, size_t iters):
        # Pop two, push them back in a varying order: the pop-pop-push pattern
        # that recycles the head under another thread's stalled CAS (ABA).
        cdef dod_lfpool* p = &self.pool.engine
        cdef size_t i, words = p.block_size // 8
        cdef void* a
        cdef void* b
        with nogil:
            for i in range(iters):
                a = dod_lfpool_try_acquire(p)
                b = dod_lfpool_try_acquire(p)
                if a != NULL and take(&self.s, a, (<uint64_t>tid << 48) | i, words):
                    dod_atomic_fetch_add_u64(&self.s.acquired, 1)
                else:
                    a = NULL
                if b != NULL and take(&self.s, b, (<uint64_t>tid << 48) | i, words):
                    dod_atomic_fetch_add_u64(&self.s.acquired, 1)
                else:
                    b = NULL
                if i & 1:
                    if a != NULL: give(&self.s, p, a, words)
                    if b != NULL: give(&self.s, p, b, words)
                else:
                    if b != NULL: give(&self.s, p, b, words)
                    if a != NULL: give(&self.s, p, a, words)

    def drain(self):
        cdef size_t i
        for i in range(NSLOTS):
            if self.s.slots[i] != NULL:
                give(&self.s, &self.pool.engine, self.s.slots[i], self.pool.engine.block_size // 8)
                self.s.slots[i] = NULL

    def counts(self):
        return dict(acquired=self.s.acquired, released=self.s.released, errors=self.s.errors,
                    nulls=self.s.nulls)


def aba(LockFreePool pool, bint tagged):
    # Thread A reads head X and its link Y, then stalls; thread B pops X and Y
    # and pushes X back; A's CAS then expects X. Returns (cas succeeded, head
    # after, X, Y) and restores a sane free list.
    cdef dod_lfpool* p = &pool.engine
    cdef dod_tagged_ptr old = dod_tagged_load(&p.head)
    cdef dod_tagged_ptr want, now
    cdef void* X = old.ptr
    cdef void* Y = (<void**>X)[0]
    cdef void* bx = dod_lfpool_try_acquire(p)
    cdef void* by = dod_lfpool_try_acquire(p)
    assert bx == X and by == Y
    dod_lfpool_release(p, bx)              # head is X again, link now Z, tag moved on
    cdef void* expect = X
    want.ptr = Y
    want.tag = old.tag + 1
    if tagged:
        ok = dod_tagged_cas(&p.head, &old, want)
    else:
        # An untagged Treiber stack: a CAS of the head's pointer word alone
        # (the tag word is not read or written).
        ok = dod_atomic_cas_ptr(&p.head.ptr, &expect, Y)
    now = dod_tagged_load(&p.head)
    result = (bool(ok), <uintptr_t>now.ptr, <uintptr_t>X, <uintptr_t>Y)
    if ok:
        # Undo the corruption: head -> X -> (old link of X), Y stays held.
        want.ptr = X
        want.tag = now.tag + 1
        assert dod_tagged_cas(&p.head, &now, want)
    dod_lfpool_release(p, by)
    return result


def chain_roundtrip(LockFreePool pool, int n):
    cdef dod_lfpool* p = &pool.engine
    cdef void* first = NULL
    cdef void* last = NULL
    cdef void* b
    cdef int i
    got = set()
    with nogil:
        for i in range(n):
            b = dod_lfpool_acquire(p)
            with gil:
                got.add(<uintptr_t>b)
            if first == NULL:
                first = b
            else:
                dod_lfpool_link(last, b)
            last = b
        dod_lfpool_release_chain(p, first, last)
    return got
"""


@pytest.fixture(scope="module")
def stress(tmp_path_factory):
    return compile_cython_module(STRESS, tmp_path_factory.mktemp("lfpool_stress"))


def _threads(holder, n, iters, try_only=False, chains=False):
    ts = [threading.Thread(target=holder.run, args=(i, iters, try_only, chains)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


@pytest.mark.parametrize("nthreads", [2, 4])
def test_cross_thread_stress_accounts_for_every_block(stress, nthreads):
    pool = LockFreePool(64, chunk_blocks=16)
    h = stress.Holder(pool)
    _threads(h, nthreads, 40000)
    h.drain()
    c = h.counts()
    assert c["errors"] == 0 and c["nulls"] == 0
    assert c["acquired"] == c["released"] == nthreads * 40000
    pool.check()                                  # every block on the free list exactly once
    assert pool.in_use == 0 and pool.available == pool.capacity


def test_aba_hammer_on_a_tiny_pool(stress):
    # Three blocks and four threads: the head is popped and pushed back
    # constantly, the pattern that breaks an untagged stack within seconds.
    pool = LockFreePool(32, capacity=3, max_blocks=3)
    h = stress.Holder(pool)
    ts = [threading.Thread(target=h.hammer, args=(i, 100000)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    c = h.counts()
    assert c["errors"] == 0
    assert c["acquired"] == c["released"] > 0
    pool.check()
    assert pool.capacity == 3 and pool.available == 3


def test_aba_tag_rejects_a_recycled_head(stress):
    pool = LockFreePool(32, capacity=3, max_blocks=3)
    ok, head, X, Y = stress.aba(pool, True)
    assert not ok and head == X                  # the tag caught the recycled head
    pool.check()
    ok, head, X, Y = stress.aba(pool, False)
    assert ok and head == Y                      # without the tag: a held block became the head
    pool.check()
    assert pool.available == 3


def test_cimport_chain_release(stress):
    pool = LockFreePool(40, alignment=8)
    got = stress.chain_roundtrip(pool, 100)
    assert len(got) == 100 and all(a % 8 == 0 for a in got)
    pool.check()
    assert pool.in_use == 0 and pool.capacity >= 100


def test_backs_an_arena_through_the_resource_interface():
    from dod.arena import Arena

    p = LockFreePool(4096, alignment=64)
    a = Arena(4096, resource=p.resource())
    assert p.in_use == 1
    a.zeros(100, np.uint8)[:] = 1
    with pytest.raises(MemoryError):
        Arena(8192, resource=p.resource())    # larger than a block: the resource says NULL
    del a
    import gc
    gc.collect()
    p.check()
    assert p.in_use == 0
