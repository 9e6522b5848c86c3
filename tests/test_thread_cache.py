"""Thread caches of LockFreePool and SegFit (dod.thread_cache and the cimport engines):
bad input from Python, a model-based walk against a shadow model, cross-thread stress."""
import gc
import os
import threading

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cython_build import compile_cython_module
from dod.lfpool import LockFreePool
from dod.segfit import SegFit, class_size
from dod.thread_cache import LockFreePoolCache, SegFitCache


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(_catch(fn)))
    t.start()
    t.join()
    return out[0]


def _catch(fn):
    try:
        return fn()
    except Exception as exc:            # handed back to the test's thread
        return exc


# ---------------------------------------------------------------- Python face

def test_pool_cache_hands_out_pool_handles_and_reports_slack():
    pool = LockFreePool(64)
    c = pool.thread_cache(limit=8)
    assert isinstance(c, LockFreePoolCache) and c.limit == 8 and c.max_slack == 8 * 64
    hs = [c.acquire() for _ in range(20)]
    v = pool.view(hs[0], np.uint64)
    v[:] = 7
    del v
    assert pool.in_use == 20 and pool.live_handles == 20
    for h in hs[:10]:
        c.release(h)
    pool.release(hs[10])                                  # the pool's own release works too
    assert 0 < c.held <= 8
    st_ = pool.stats()
    assert st_["cached_blocks"] == c.held and st_["cache_slack"] == c.held * 64
    assert pool.in_use == 9 and pool.capacity == pool.in_use + pool.available + c.held
    c.flush()
    assert c.held == 0 and pool.cached_blocks == 0 and pool.cache_slack == 0
    for h in hs[11:]:
        c.release(h)
    del c
    gc.collect()
    assert pool.cached_blocks == 0 and pool.in_use == 0 and pool.available == pool.capacity
    pool.check()


def test_pool_cache_bad_input_raises_and_changes_nothing():
    pool, other = LockFreePool(32), LockFreePool(32)
    c = pool.thread_cache(limit=4)
    h = c.acquire()
    others = [other.acquire() for _ in range(3)]
    foreign = others[-1]              # live in `other`, not here (handles are per owner)
    v = pool.view(h)

    def state():
        return pool.stats(), c.held, c.refills, c.spills, pool.live_handles

    before = state()
    with pytest.raises(BufferError):
        c.release(h)                                  # a live view
    for bad in (foreign, 0, -1, 1 << 64, h + (1 << 32)):
        with pytest.raises(ValueError):
            c.release(bad)                            # foreign, nil, out of range, wrong generation
    with pytest.raises(TypeError):
        c.release("x")
    assert state() == before
    del v
    c.release(h)
    before = state()
    with pytest.raises(ValueError):
        c.release(h)                                  # double free through the cache
    with pytest.raises(ValueError):
        pool.release(h)                               # ... and through the pool
    assert state() == before
    for bad in (0, -1, 1 << 21, 2.5):
        with pytest.raises((ValueError, TypeError)):
            pool.thread_cache(bad)
    with pytest.raises(TypeError):
        LockFreePoolCache(None)
    other.release_many(others)
    pool.check()


def test_pool_cache_exhaustion_fails_cleanly():
    pool = LockFreePool(64, capacity=4, max_blocks=4)
    c = pool.thread_cache(limit=2)
    hs = [c.acquire() for _ in range(4)]
    before = (pool.capacity, pool.in_use, pool.available, c.held, pool.live_handles)
    with pytest.raises(MemoryError):
        c.acquire()
    assert (pool.capacity, pool.in_use, pool.available, c.held, pool.live_handles) == before
    assert pool.failed == 1
    for h in hs:
        c.release(h)
    assert c.held <= 2 and pool.available + c.held == 4


def test_cache_is_bound_to_its_thread_and_close_refuses_use():
    pool, heap = LockFreePool(64), SegFit()
    c, s = pool.thread_cache(), heap.thread_cache()
    h, g = c.acquire(), s.allocate(100)
    for fn in (c.acquire, lambda: c.release(h), c.flush, lambda: s.allocate(8), lambda: s.free(g), s.flush):
        assert isinstance(_in_thread(fn), RuntimeError)
    assert pool.in_use == 1 and heap.live_handles == 1
    # Another thread may free the block through its own cache: frees cross threads.
    assert _in_thread(lambda: pool.thread_cache().release(h)) is None
    assert _in_thread(lambda: heap.thread_cache().free(g)) is None
    assert pool.in_use == 0 and heap.in_use == 0
    assert pool.cached_blocks == c.held and heap.cached_blocks == s.held
    c.close()
    s.close()
    for fn in (c.acquire, c.flush, lambda: s.allocate(8)):
        with pytest.raises(RuntimeError, match="closed"):
            fn()


def test_cache_keeps_its_owner_alive():
    c = LockFreePool(48).thread_cache()
    s = SegFit().thread_cache()
    gc.collect()                                      # the owners have no other reference
    hs = [c.acquire() for _ in range(100)]
    gs = [s.allocate(n) for n in range(1, 3000, 29)]
    assert c.owner.view(hs[-1]).nbytes == 48 and s.owner.size(gs[-1]) == list(range(1, 3000, 29))[-1]
    for h in hs:
        c.release(h)
    for g in gs:
        s.free(g)
    c.owner.check()
    s.owner.check()
    pool, heap = c.owner, s.owner
    del c, s
    gc.collect()
    assert pool.cached_blocks == 0 and heap.cached_blocks == 0
    assert pool.available == pool.capacity and heap.in_use == 0


def test_a_thread_that_ends_without_flushing_loses_nothing():
    pool, heap = LockFreePool(64), SegFit()

    def work():
        c, s = pool.thread_cache(), heap.thread_cache()
        for h in [c.acquire() for _ in range(50)]:
            c.release(h)
        for g in [s.allocate(n) for n in (8, 64, 64, 500, 4000, 40000, 300000)]:
            s.free(g)
        assert pool.cached_blocks > 0 and heap.cached_blocks > 0

    assert _in_thread(work) is None
    gc.collect()
    assert pool.cached_blocks == 0 and heap.cached_blocks == 0
    assert pool.available == pool.capacity and heap.in_use == 0 and heap.large == 0
    pool.check()
    heap.check()


def test_segfit_cache_bad_input_and_large_blocks():
    heap, other = SegFit(), SegFit()
    s = heap.thread_cache(class_bytes=1024)
    assert isinstance(s, SegFitCache)
    lim = s.limits()
    assert lim[64] == 16 and lim[16] == 64 and lim[1024] == 1 and max(lim) == 32768
    assert s.max_slack == sum(k * v for k, v in lim.items())
    g = s.allocate(100, align=64)
    assert heap.address(g) % 64 == 0 and heap.size(g) == 100
    big = s.allocate(300_000)                         # large: straight to the resource
    assert heap.large == 1
    others = [other.allocate(100) for _ in range(4)]
    foreign = others[-1]

    def state():
        return heap.stats(), s.held, heap.live_handles

    before = state()
    for bad in (dict(nbytes=-1), dict(nbytes=1 << 49), dict(nbytes=8, align=3)):
        with pytest.raises(ValueError):
            s.allocate(**bad)
    with pytest.raises(ValueError):
        s.free(foreign)
    v = heap.view(g)
    with pytest.raises(BufferError):
        s.free(g)
    assert state() == before
    del v
    s.free(g)
    s.free(big)
    assert heap.large == 0
    before = state()
    with pytest.raises(ValueError):
        s.free(g)
    assert state() == before
    assert heap.stats()["cache_slack"] == s.held_bytes == class_size(100, 64) * s.held
    s.flush()
    assert heap.cache_slack == 0 and heap.in_use == 0
    other.free_many(others)
    heap.check()


# ---------------------------------------------------------------- model-based walk

class BinModel:
    """The shadow of one bin: what refill, spill and flush must do to the counts."""

    def __init__(self, limit):
        self.limit, self.held = limit, 0

    def acquire(self, shared):
        """(blocks taken from the shared stack, whether it must grow) for one acquire."""
        if self.held:
            self.held -= 1
            return 0, False
        if shared == 0:
            return 0, True
        k = min(max(1, self.limit // 2), shared)
        self.held = k - 1
        return k, False

    def release(self):
        """Blocks given back to the shared stack by one release."""
        back = 0
        if self.held >= self.limit:
            keep = self.limit // 2
            keep = 0 if keep >= self.held else keep
            back, self.held = self.held - keep, keep
        self.held += 1
        return back


class PoolCacheWalk(RuleBasedStateMachine):
    @initialize(size=st.integers(1, 200), limit=st.integers(1, 9), chunk=st.integers(1, 12),
                cap=st.one_of(st.none(), st.integers(1, 40)))
    def setup(self, size, limit, chunk, cap):
        self.pool = LockFreePool(size, chunk_blocks=chunk, max_blocks=cap)
        self.cache = self.pool.thread_cache(limit)
        self.model = BinModel(limit)
        self.shared = 0
        self.live = {}
        self.tag = 0
        self.size = size

    def _stamp(self, h):
        self.tag = (self.tag + 1) & 0xFF
        self.pool.view(h)[: self.size] = self.tag
        self.live[h] = self.tag

    def _grown(self, before, got):
        grown = self.pool.capacity - before
        assert grown > 0
        self.shared += grown - got

    @rule()
    def acquire(self):
        taken, grow = self.model.acquire(self.shared)
        cap = self.pool.capacity
        try:
            h = self.cache.acquire()
        except MemoryError:
            assert grow and self.pool.capacity == cap     # exhaustion: nothing changed
            return
        if grow:
            self._grown(cap, 1)
        else:
            self.shared -= taken
        self._stamp(h)

    @rule()
    def pool_acquire(self):
        cap = self.pool.capacity
        try:
            h = self.pool.acquire()
        except MemoryError:
            assert self.shared == 0 and self.pool.capacity == cap
            return
        if self.shared:
            self.shared -= 1
        else:
            self._grown(cap, 1)
        self._stamp(h)

    @precondition(lambda self: self.live)
    @rule(data=st.data(), through_cache=st.booleans())
    def release(self, data, through_cache):
        h = data.draw(st.sampled_from(sorted(self.live)))
        if through_cache:
            self.cache.release(h)
            self.shared += self.model.release()
        else:
            self.pool.release(h)
            self.shared += 1
        del self.live[h]
        with pytest.raises(ValueError):
            self.cache.release(h)                     # a double free changes nothing

    @rule()
    def flush(self):
        self.cache.flush()
        self.shared += self.model.held
        self.model.held = 0

    @invariant()
    def agrees_with_the_model(self):
        if not hasattr(self, "pool"):
            return
        p, c = self.pool, self.cache
        p.check()
        assert c.held == self.model.held <= c.limit
        assert p.available == self.shared
        assert p.cached_blocks == c.held and p.cache_slack == c.held * p.block_size
        assert p.in_use == len(self.live) == p.live_handles
        assert p.capacity == p.in_use + p.available + c.held
        addrs = sorted(p.address(h) for h in self.live)
        assert all(b - a >= p.block_size for a, b in zip(addrs, addrs[1:]))
        for h, tag in self.live.items():
            assert (p.view(h)[: self.size] == tag).all()


TestPoolCacheWalk = PoolCacheWalk.TestCase

SIZES = [1, 8, 24, 64, 100, 256, 1000, 5000, 40000, 300000]


class SegFitCacheWalk(RuleBasedStateMachine):
    @initialize(class_bytes=st.sampled_from([64, 512, 4096, 16384]))
    def setup(self, class_bytes):
        self.heap = SegFit()
        self.cache = self.heap.thread_cache(class_bytes)
        self.limits = self.cache.limits()
        self.bins = {}                        # class size -> BinModel
        self.shared = {}                      # class size -> free blocks on the class's stack
        self.live = {}                        # handle -> (tag, size)
        self.tag = 0

    def _bin(self, cs):
        if cs not in self.bins and cs in self.limits:
            self.bins[cs] = BinModel(self.limits[cs])
        return self.bins.get(cs)

    def _carved(self, cs):
        return self.heap.class_stats().get(cs, (0, 0))[0]

    @rule(size=st.sampled_from(SIZES), align=st.sampled_from([None, 64]))
    def allocate(self, size, align):
        cs = class_size(size, align or 16)
        b = self._bin(cs)
        shared = self.shared.get(cs, 0)
        carved = self._carved(cs)
        h = self.cache.allocate(size, align)
        if b is not None:
            taken, grow = b.acquire(shared)
            if grow:
                self.shared[cs] = self._carved(cs) - carved - 1
            else:
                self.shared[cs] = shared - taken
        elif size <= 256 * 1024:                      # an uncached class: the shared allocator
            self.shared[cs] = shared - 1 if shared else self._carved(cs) - carved - 1
        self.tag = (self.tag + 1) & 0xFF
        self.heap.view(h)[:] = self.tag
        self.live[h] = (self.tag, size, align)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        h = data.draw(st.sampled_from(sorted(self.live)))
        _, size, align = self.live.pop(h)
        cs = class_size(size, align or 16)
        self.cache.free(h)
        b = self._bin(cs)
        if b is not None:
            self.shared[cs] = self.shared.get(cs, 0) + b.release()
        elif size <= 256 * 1024:
            self.shared[cs] = self.shared.get(cs, 0) + 1
        with pytest.raises(ValueError):
            self.cache.free(h)

    @rule()
    def flush(self):
        self.cache.flush()
        for cs, b in self.bins.items():
            self.shared[cs] = self.shared.get(cs, 0) + b.held
            b.held = 0

    @invariant()
    def agrees_with_the_model(self):
        if not hasattr(self, "heap"):
            return
        s, c = self.heap, self.cache
        s.check()
        held = sum(b.held for b in self.bins.values())
        assert c.held == held and s.cached_blocks == held
        assert c.held_bytes == s.cache_slack == sum(cs * b.held for cs, b in self.bins.items())
        for cs, (carved, free) in s.class_stats().items():
            assert free == self.shared.get(cs, 0), cs
        assert s.live_handles == len(self.live)
        for h, (tag, size, _) in self.live.items():
            assert (s.view(h) == tag).all()


TestSegFitCacheWalk = SegFitCacheWalk.TestCase


# ---------------------------------------------------------------- cimport: threads, cross-thread frees

STRESS = r"""
from libc.stdint cimport uint64_t
from libc.string cimport memset
from dod.atomics cimport (dod_atomic_exchange_ptr, dod_atomic_cas_u64, dod_atomic_store_u64,
                          dod_atomic_fetch_add_u64, dod_atomic_load_u64)
from dod.lfpool cimport (LockFreePool, dod_lfpool_cache, dod_lfpool_cache_init,
                         dod_lfpool_cache_acquire, dod_lfpool_cache_release, dod_lfpool_cache_flush)
from dod.segfit cimport (SegFit, dod_segfit_cache, dod_segfit_cache_init, dod_segfit_cache_allocate,
                         dod_segfit_cache_free, dod_segfit_cache_flush)

cdef struct Shared:
    void* slots[64]
    uint64_t handed
    uint64_t freed
    uint64_t errors
    uint64_t nulls

cdef size_t SIZES[8]
SIZES[:] = [24, 64, 64, 100, 256, 1000, 5000, 40000]

cdef inline uint64_t* W(void* b) noexcept nogil:
    return <uint64_t*>b

# A held block: word 0 a stamp, word 1 a held flag set to 1 by CAS from whatever
# else it holds (0, or the debug poison of a free), so a block handed out twice at
# once fails it; word 2 its size, every further word the stamp.
cdef bint take(Shared* s, void* b, uint64_t stamp, size_t size) noexcept nogil:
    cdef uint64_t was = dod_atomic_load_u64(&W(b)[1])
    cdef size_t k
    if was == 1 or not dod_atomic_cas_u64(&W(b)[1], &was, 1):
        dod_atomic_fetch_add_u64(&s.errors, 1)
        return False
    W(b)[0] = stamp
    W(b)[2] = size
    for k in range(3, size // 8):
        W(b)[k] = stamp
    dod_atomic_fetch_add_u64(&s.handed, 1)
    return True

cdef size_t check_and_clear(Shared* s, void* b) noexcept nogil:
    cdef uint64_t stamp = W(b)[0]
    cdef size_t size = W(b)[2], k
    if dod_atomic_load_u64(&W(b)[1]) != 1:
        dod_atomic_fetch_add_u64(&s.errors, 1)
    for k in range(3, size // 8):
        if W(b)[k] != stamp:
            dod_atomic_fetch_add_u64(&s.errors, 1)
            break
    dod_atomic_store_u64(&W(b)[1], 0)
    dod_atomic_fetch_add_u64(&s.freed, 1)
    return size

cdef class Holder:
    cdef Shared s
    cdef LockFreePool pool
    cdef SegFit heap

    def __init__(self, LockFreePool pool=None, SegFit heap=None):
        self.pool = pool
        self.heap = heap

    def run_pool(self, int tid, size_t iters, size_t limit):
        cdef dod_lfpool_cache c
        cdef size_t i
        cdef void* b
        cdef void* old
        cdef uint64_t x = <uint64_t>tid * 0x9E3779B97F4A7C15ULL + 1
        dod_lfpool_cache_init(&c, &self.pool.engine, limit)
        with nogil:
            for i in range(iters):
                b = dod_lfpool_cache_acquire(&c)
                if b == NULL:
                    dod_atomic_fetch_add_u64(&self.s.nulls, 1)
                    continue
                if not take(&self.s, b, (<uint64_t>tid << 48) | i, self.pool.engine.block_size):
                    continue
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                old = dod_atomic_exchange_ptr(&self.s.slots[x % 64], b)
                if old != NULL:             # most likely another thread's: a cross-thread free
                    check_and_clear(&self.s, old)
                    dod_lfpool_cache_release(&c, old)
            dod_lfpool_cache_flush(&c)

    def run_heap(self, int tid, size_t iters, size_t class_bytes):
        cdef dod_segfit_cache c
        cdef size_t i, size
        cdef void* b
        cdef void* old
        cdef uint64_t x = <uint64_t>tid * 0x9E3779B97F4A7C15ULL + 1
        dod_segfit_cache_init(&c, &self.heap.engine, class_bytes)
        with nogil:
            for i in range(iters):
                x ^= x << 13; x ^= x >> 7; x ^= x << 17
                size = SIZES[(x >> 20) & 7]
                b = dod_segfit_cache_allocate(&c, size, 16)
                if b == NULL:
                    dod_atomic_fetch_add_u64(&self.s.nulls, 1)
                    continue
                if not take(&self.s, b, (<uint64_t>tid << 48) | i, size):
                    continue
                old = dod_atomic_exchange_ptr(&self.s.slots[x % 64], b)
                if old != NULL:
                    size = check_and_clear(&self.s, old)
                    dod_segfit_cache_free(&c, old, size, 16)
            dod_segfit_cache_flush(&c)

    def drain(self):
        cdef dod_lfpool_cache lc
        cdef dod_segfit_cache sc
        cdef size_t i, size
        if self.pool is not None:
            dod_lfpool_cache_init(&lc, &self.pool.engine, 0)
        if self.heap is not None:
            dod_segfit_cache_init(&sc, &self.heap.engine, 0)
        for i in range(64):
            if self.s.slots[i] != NULL:
                size = check_and_clear(&self.s, self.s.slots[i])
                if self.pool is not None:
                    dod_lfpool_cache_release(&lc, self.s.slots[i])
                else:
                    dod_segfit_cache_free(&sc, self.s.slots[i], size, 16)
                self.s.slots[i] = NULL
        if self.pool is not None:
            dod_lfpool_cache_flush(&lc)
        if self.heap is not None:
            dod_segfit_cache_flush(&sc)

    def counts(self):
        return dict(handed=self.s.handed, freed=self.s.freed, errors=self.s.errors, nulls=self.s.nulls)


def zii():
    # All bytes zero is a valid, empty cache: every request fails cleanly.
    cdef dod_lfpool_cache lc
    cdef dod_segfit_cache sc
    memset(&lc, 0, sizeof(lc))
    memset(&sc, 0, sizeof(sc))
    return (dod_lfpool_cache_acquire(&lc) == NULL, dod_segfit_cache_allocate(&sc, 64, 16) == NULL,
            dod_segfit_cache_allocate(&sc, 1 << 20, 16) == NULL)
"""


@pytest.fixture(scope="module")
def stress(tmp_path_factory):
    return compile_cython_module(STRESS, tmp_path_factory.mktemp("thread_cache_stress"))


def _run(fn, n, *args):
    ts = [threading.Thread(target=fn, args=(i, *args)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


@pytest.mark.parametrize("nthreads,limit", [(2, 3), (4, 64), (4, 1)])
def test_pool_caches_cross_thread_stress(stress, nthreads, limit):
    pool = LockFreePool(64, chunk_blocks=16)
    h = stress.Holder(pool=pool)
    _run(h.run_pool, nthreads, 30000, limit)
    h.drain()
    c = h.counts()
    assert c["errors"] == 0 and c["nulls"] == 0
    assert c["handed"] == c["freed"] == nthreads * 30000
    pool.check()                                      # every block on the shared list exactly once
    assert pool.cached_blocks == 0 and pool.in_use == 0 and pool.available == pool.capacity


@pytest.mark.parametrize("nthreads,class_bytes", [(2, 256), (4, 0)])
def test_segfit_caches_cross_thread_stress(stress, nthreads, class_bytes):
    heap = SegFit()
    h = stress.Holder(heap=heap)
    _run(h.run_heap, nthreads, 20000, class_bytes)
    h.drain()
    c = h.counts()
    assert c["errors"] == 0 and c["nulls"] == 0
    assert c["handed"] == c["freed"] == nthreads * 20000
    heap.check()
    assert heap.cached_blocks == 0 and heap.in_use == 0
    assert all(carved == free for carved, free in heap.class_stats().values())


def test_zero_initialised_caches_refuse_cleanly(stress):
    assert stress.zii() == (True, True, True)


# ---------------------------------------------------------------- debug builds: the Cython contract

DEATH = r"""
# distutils: define_macros=DOD_DEBUG=1
# The engine is inlined here, so its debug checks follow this module's DOD_DEBUG.
import threading
from dod.lfpool cimport (LockFreePool, dod_lfpool_cache, dod_lfpool_cache_init,
                         dod_lfpool_cache_acquire, dod_lfpool_cache_release, dod_lfpool_cache_flush)
from dod.segfit cimport (SegFit, dod_segfit_cache, dod_segfit_cache_init, dod_segfit_cache_allocate,
                         dod_segfit_cache_free, dod_segfit_cache_flush)

cdef class PoolCache:
    cdef dod_lfpool_cache c
    cdef LockFreePool pool
    def __init__(self, LockFreePool pool, size_t limit=4):
        self.pool = pool
        dod_lfpool_cache_init(&self.c, &pool.engine, limit)
    def acquire(self):
        return <size_t>dod_lfpool_cache_acquire(&self.c)
    def release(self, size_t b):
        dod_lfpool_cache_release(&self.c, <void*>b)
    def flush(self):
        dod_lfpool_cache_flush(&self.c)

cdef class HeapCache:
    cdef dod_segfit_cache c
    cdef SegFit heap
    def __init__(self, SegFit heap):
        self.heap = heap
        dod_segfit_cache_init(&self.c, &heap.engine, 0)
    def allocate(self, size_t n):
        return <size_t>dod_segfit_cache_allocate(&self.c, n, 16)
    def free(self, size_t b, size_t n):
        dod_segfit_cache_free(&self.c, <void*>b, n, 16)
    def flush(self):
        dod_segfit_cache_flush(&self.c)

def double_free(LockFreePool pool):
    c = PoolCache(pool)
    b = c.acquire()
    c.release(b)
    c.release(b)

def foreign_free(LockFreePool pool):
    other = LockFreePool(pool.block_size)
    b = PoolCache(other).acquire()
    PoolCache(pool).release(b)

def wrong_class(SegFit heap):
    c = HeapCache(heap)
    c.free(c.allocate(64), 1000)

def second_thread(LockFreePool pool, bint flush_between):
    c = PoolCache(pool)
    c.release(c.acquire())
    if flush_between:
        c.flush()
    t = threading.Thread(target=lambda: c.release(c.acquire()))
    t.start()
    t.join()
    c.flush()

def good(LockFreePool pool, SegFit heap):
    c, h = PoolCache(pool, 2), HeapCache(heap)
    bs = [c.acquire() for _ in range(50)]
    for b in bs:
        c.release(b)
    gs = [(h.allocate(n), n) for n in (8, 64, 64, 1000, 40000)]
    for g, n in gs:
        h.free(g, n)
    # Debug caches publish every operation: the owners' counts are exact.
    seen = (pool.cached_blocks, c.c.bin.count, heap.cached_blocks,
            sum(h.c.bins[k].count for k in range(73)))
    c.flush()
    h.flush()
    return seen + (pool.cached_blocks, heap.cached_blocks)

def unflushed(LockFreePool pool):
    c = PoolCache(pool)
    c.release(c.acquire())
"""


def test_debug_cache_aborts_on_a_broken_contract(compile_cython):
    from test_pool import dies_with_abort

    mod = compile_cython(DEATH, "dod_thread_cache_death_mod")
    assert dies_with_abort(lambda: mod.double_free(LockFreePool(64)))
    assert dies_with_abort(lambda: mod.foreign_free(LockFreePool(64)))
    assert dies_with_abort(lambda: mod.wrong_class(SegFit()))
    assert dies_with_abort(lambda: mod.second_thread(LockFreePool(64), False))
    assert not dies_with_abort(lambda: mod.second_thread(LockFreePool(64), True))
    assert not dies_with_abort(lambda: mod.good(LockFreePool(64), SegFit()))
    p, held, hp, hheld, p_after, h_after = mod.good(LockFreePool(64), SegFit())
    assert p == held == 2 and hp == hheld > 0 and p_after == h_after == 0


def test_debug_owner_aborts_when_a_cython_cache_was_not_flushed(compile_cython):
    """Debug, sanitize and tsan builds abort on an owner whose Cython cache was never
    flushed; a release build documents the flush as the caller's contract and
    does not check (the child must then survive)."""
    from test_pool import dies_with_abort

    mod = compile_cython(DEATH, "dod_thread_cache_death_mod2")

    def lose_a_cache():
        pool = LockFreePool(64)
        mod.unflushed(pool)
        del pool
        gc.collect()

    assert dies_with_abort(lose_a_cache) == (os.environ.get("DOD_BUILD") in ("debug", "sanitize", "tsan"))
