"""dod.pool: model-based walks, bad input, views and leases, thread stress, cimport."""
import faulthandler
import gc
import os
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import event, given, note, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dod.pool
from dod.arena import Arena
from dod.freelist import FreeList
from dod.pool import Pool


def addr(a):
    return a.__array_interface__["data"][0]


def counters(pool):
    s = pool.stats()
    s.pop("failed")
    return s


# ---------------------------------------------------------------- model-based walk


def flat_rows(rows):
    """A chunk's (or the whole pool's) rows as (blocks, bytes) uint8."""
    return rows.view(np.uint8).reshape(len(rows), -1) if rows.ndim > 1 else rows.reshape(len(rows), 1).view(np.uint8)


class PoolWalk(RuleBasedStateMachine):
    """Random acquire/release/view/overwrite against a shadow model of live blocks.

    Growth: a growable pool (pages, or a small Arena that runs out) adds a
    whole chunk when every block is in use; the model knows the capacity
    after every step. With the arena, a growth may fail: then nothing but
    ``failed`` changes, and the model's capacity stays.
    """

    @initialize(threadsafe=st.booleans(), count=st.integers(1, 40),
                kind=st.sampled_from([("f4", (3,)), ("f8", ()), ("u1", (24,)), ("i2", (2, 5)), ("raw", 48)]),
                align=st.sampled_from([None, 16, 64]),
                grow=st.sampled_from([None, None, "pages", "arena"]), chunk=st.sampled_from([None, 1, 3, 8]),
                room=st.integers(0, 3))
    def make(self, threadsafe, count, kind, align, grow, chunk, room):
        kw = dict(align=align, threadsafe=threadsafe)
        make = ((lambda **k: Pool(count, block_size=kind[1], **k)) if kind[0] == "raw" else
                (lambda **k: Pool(count, np.dtype(kind[0]), kind[1], **k)))
        self.upstream = None
        if grow:
            kw.update(growable=True, chunk_blocks=chunk)
            if grow == "arena":
                # Room for the first region and `room` further chunks (plus
                # alignment padding): the next growth fails.
                stride = make(align=align).block_size
                self.upstream = Arena(stride * (count + room * (chunk or count)) + 64 * (room + 1))
                kw["resource"] = self.upstream.resource()
        self.pool = make(**kw)
        self.growable = bool(grow)
        self.chunk = (chunk or count) if grow else 0
        self.may_fail = grow == "arena"   # a growth may fail: the arena runs out
        self.count = count            # the model's capacity (all chunks)
        self.align = self.pool.alignment
        assert self.pool.growable == self.growable and self.pool.chunk_blocks == self.chunk
        self.live = {}          # handle -> tag
        self.dead = []          # released handles
        self.views = {}         # handle -> live array (pins the block)
        self.next_tag = 1

    def _tag_block(self, h, tag):
        v = self.pool.view(h)
        raw = v.reshape(-1).view(np.uint8) if v.ndim else v.reshape(1).view(np.uint8)
        raw[:] = tag & 0xFF
        del v, raw

    def _read_tag(self, h):
        v = self.pool.view(h)
        raw = (v.reshape(-1) if v.ndim else v.reshape(1)).view(np.uint8)
        vals = set(raw.tolist())
        del v, raw
        return vals

    def _expect_failure(self, call):
        """call() must raise MemoryError and change nothing but `failed`."""
        before = counters(self.pool)
        failed = self.pool.failed
        with pytest.raises(MemoryError):
            call()
        assert counters(self.pool) == before
        assert self.pool.failed == failed + 1

    @rule()
    def acquire(self):
        if len(self.live) == self.count:
            if not self.growable:
                self._expect_failure(self.pool.acquire)
                return
            before = counters(self.pool)
            failed = self.pool.failed
            try:
                h = self.pool.acquire()
            except MemoryError:
                assert self.may_fail
                assert counters(self.pool) == before and self.pool.failed == failed + 1
                event("acquire: the upstream ran out, nothing changed")
                return
            event("acquire grew the pool")
            self.count += self.chunk          # grew by exactly one whole chunk
            assert self.pool.capacity == self.count
            assert h & 0xFFFFFFFF == len(self.live)     # the first slot of the new chunk
        else:
            h = self.pool.acquire()
        assert h != 0 and h not in self.live
        v = self.pool.view(h)
        assert addr(v) % self.align == 0
        del v
        tag = self.next_tag
        self.next_tag += 1
        self._tag_block(h, tag)
        self.live[h] = tag

    @rule(k=st.integers(0, 12))
    def acquire_many(self, k):
        short = len(self.live) + k - self.count
        if short > 0 and not self.growable:
            self._expect_failure(lambda: self.pool.acquire_many(k))
            return
        if short > 0:
            before = counters(self.pool)
            failed = self.pool.failed
            try:
                hs = self.pool.acquire_many(k)
            except MemoryError:               # all or nothing: the chunks it got are given back
                assert self.may_fail
                assert counters(self.pool) == before and self.pool.failed == failed + 1
                event("acquire_many: the upstream ran out, nothing changed")
                return
            event("acquire_many grew the pool")
            self.count += -(-short // self.chunk) * self.chunk
            assert self.pool.capacity == self.count
        else:
            hs = self.pool.acquire_many(k)
        assert hs.dtype == np.uint64 and hs.shape == (k,)
        for h in hs.tolist():
            assert h != 0 and h not in self.live
            tag = self.next_tag
            self.next_tag += 1
            self._tag_block(h, tag)
            self.live[h] = tag

    @precondition(lambda self: self.live)
    @rule(data=st.data(), spoil=st.sampled_from([None, "dead", "dup", "pinned"]))
    def release_many(self, data, spoil):
        hs = data.draw(st.lists(st.sampled_from(sorted(self.live)), unique=True, min_size=1))
        unpinned = [h for h in hs if h not in self.views]
        bad = list(unpinned)
        if spoil == "dead" and self.dead:
            bad.append(self.dead[0])
        elif spoil == "dup" and unpinned:
            bad.append(unpinned[0])
        elif spoil == "pinned" and len(unpinned) != len(hs):
            bad = hs
        if bad != unpinned:
            before = counters(self.pool)
            with pytest.raises((ValueError, BufferError)):
                self.pool.release_many(np.array(bad, dtype=np.uint64))
            assert counters(self.pool) == before
            assert all(self.pool.is_live(h) for h in unpinned)
            return
        for h in unpinned:
            assert self._read_tag(h) == {self.live[h] & 0xFF}
        self.pool.release_many(unpinned)
        for h in unpinned:
            del self.live[h]
            self.dead.append(h)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def release(self, data):
        h = data.draw(st.sampled_from(sorted(self.live)))
        if h in self.views:
            before = counters(self.pool)
            with pytest.raises(BufferError):
                self.pool.release(h)
            assert counters(self.pool) == before
            assert self.pool.is_live(h)
            return
        assert self._read_tag(h) == {self.live[h] & 0xFF}
        self.pool.release(h)
        del self.live[h]
        self.dead.append(h)

    @precondition(lambda self: self.dead)
    @rule(data=st.data())
    def release_stale(self, data):
        h = data.draw(st.sampled_from(self.dead))
        before = counters(self.pool)
        with pytest.raises(ValueError):
            self.pool.release(h)
        with pytest.raises(ValueError):
            self.pool.view(h)
        assert counters(self.pool) == before

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def pin_view(self, data):
        h = data.draw(st.sampled_from(sorted(self.live)))
        self.views[h] = self.pool.view(h)

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def drop_view(self, data):
        h = data.draw(st.sampled_from(sorted(self.views)))
        del self.views[h]

    @precondition(lambda self: self.views)
    @rule(data=st.data())
    def release_by_array(self, data):
        h = data.draw(st.sampled_from(sorted(self.views)))
        arr = self.views.pop(h)
        in_use = self.pool.in_use
        self.pool.release(arr)
        assert not self.pool.is_live(h)
        assert self.pool.in_use == in_use          # still pinned by arr
        with pytest.raises(ValueError):
            self.pool.release(arr)                 # double release
        del arr
        assert self.pool.in_use == in_use - 1      # returned when the array died
        del self.live[h]
        self.dead.append(h)

    @rule(k=st.integers(0, 12))
    def reserve(self, k):
        short = len(self.live) + k - self.count
        before = counters(self.pool)
        failed = self.pool.failed
        if short <= 0 or self.growable:
            try:
                self.pool.reserve(k)
            except MemoryError:
                assert self.may_fail and short > 0
                assert counters(self.pool) == before and self.pool.failed == failed
                return
            if short > 0:
                self.count += -(-short // self.chunk) * self.chunk
            assert self.pool.available >= k and self.pool.capacity == self.count
        else:
            with pytest.raises(MemoryError):
                self.pool.reserve(k)
            assert counters(self.pool) == before and self.pool.failed == failed

    @rule()
    def reset(self):
        if self.views:
            before = counters(self.pool)
            with pytest.raises(BufferError):
                self.pool.reset()
            assert counters(self.pool) == before
            return
        self.pool.reset()
        self.dead.extend(self.live)
        self.live.clear()

    @rule(value=st.integers(0, 255))
    def scribble_free_rows(self, value):
        """Vectorised writes over the whole pool hit free blocks too: harmless."""
        if self.pool.chunk_count == 1:
            whole = self.pool.as_array()
            assert len(whole) == self.count
            flat_rows(whole)[~self.pool.live_mask()] = value
            del whole
        else:
            event("scribbled over several chunks")
            with pytest.raises(ValueError):
                self.pool.as_array()            # several chunks are not one array
        n = 0
        for rows, live in self.pool.chunks():
            flat_rows(rows)[~live] = value
            n += len(rows)
        assert n == self.count

    @invariant()
    def consistent(self):
        pool = getattr(self, "pool", None)
        if pool is None:
            return
        mask = pool.live_mask()
        idx = {h & 0xFFFFFFFF for h in self.live}
        assert mask.shape == (self.count,) and pool.capacity == self.count
        assert set(np.flatnonzero(mask).tolist()) == idx
        assert np.array_equal(np.concatenate([live for _, live in pool.chunks()]), mask)
        assert len(pool) == len(self.live)
        assert sorted(pool.handles().tolist()) == sorted(self.live)
        assert pool.peak >= pool.in_use
        assert all(pool.is_live(h) for h in self.live)
        pool.check()                    # scribbles never reach the free list (it is in the side table)

    def teardown(self):
        pool = getattr(self, "pool", None)
        if pool is None:
            return
        self.views.clear()
        for h in list(self.live):
            assert self._read_tag(h) == {self.live[h] & 0xFF}
            pool.release(h)
        assert pool.in_use == 0
        # Full reuse: every block can be acquired again, without growing.
        nbytes = pool.nbytes
        hs = [pool.acquire() for _ in range(self.count)]
        assert len(set(h & 0xFFFFFFFF for h in hs)) == self.count
        assert pool.capacity == self.count and pool.nbytes == nbytes
        if not self.growable:
            with pytest.raises(MemoryError):
                pool.acquire()
        for h in hs:
            pool.release(h)
        pool.check()


TestPoolWalk = PoolWalk.TestCase


def test_check_after_walk_without_scribbles():
    pool = Pool(8, np.float64, (2,))
    hs = [pool.acquire() for _ in range(5)]
    for h in hs[::2]:
        pool.release(h)
    assert pool.check()
    assert pool.stats()["blocks_in_use"] == 2 and pool.peak == 5


# ---------------------------------------------------------------- views, leases, whole-pool arrays


def test_view_shape_dtype_and_whole_pool():
    pool = Pool(100, np.float32, (4,))
    assert pool.block_size == 16 and pool.shape == (4,)
    hs = [pool.acquire() for _ in range(10)]
    for k, h in enumerate(hs):
        pool.view(h)[:] = k
    whole = pool.as_array()
    assert whole.shape == (100, 4) and whole.dtype == np.float32
    mask = pool.live_mask()
    assert mask.sum() == 10
    np.testing.assert_array_equal(whole[mask][:, 0], np.arange(10, dtype=np.float32))
    whole[mask] *= 2                        # vectorised update of live blocks
    assert pool.view(hs[3])[0] == 6
    assert pool.index_of(hs[3]) == 3


def test_views_keep_pool_alive():
    pool = Pool(4, np.int64, (2,))
    h = pool.acquire()
    v = pool.view(h)
    v[:] = 7
    whole = pool.as_array()
    del pool
    gc.collect()
    assert v.tolist() == [7, 7] and whole[0].tolist() == [7, 7]


def test_release_by_handle_with_live_view_raises_bufferError():
    pool = Pool(4, np.uint8, (16,))
    h = pool.acquire()
    v = pool.view(h)
    s = v[2:5]                              # a view of the view also pins
    del v
    with pytest.raises(BufferError):
        pool.release(h)
    assert pool.is_live(h) and pool.in_use == 1
    del s
    pool.release(h)
    assert pool.in_use == 0


def test_acquire_array_and_handle_of():
    pool = Pool(3, np.float64, (2, 2))
    a = pool.acquire_array()
    assert a.shape == (2, 2)
    h = pool.handle_of(a)
    assert pool.is_live(h)
    with pytest.raises(BufferError):
        pool.release(h)
    pool.release(a[0])                      # a view of the array names the block too
    assert not pool.is_live(h)
    with pytest.raises(ValueError):
        pool.handle_of(a)
    assert pool.in_use == 1 and len(pool) == 0
    del a
    assert pool.in_use == 0


def test_as_array_does_not_pin_release():
    pool = Pool(4, np.float32)
    h = pool.acquire()
    whole = pool.as_array()
    pool.release(h)
    assert whole.shape == (4,)


def test_stride_and_alignment_rules():
    assert Pool(2, np.float32).block_size == 16           # padded to the link and alignment
    assert Pool(2, np.uint8, (20,)).block_size == 32
    assert Pool(2, block_size=8).block_size == 16
    assert Pool(2, block_size=64, align=64).block_size == 64
    assert Pool(2, np.uint8, (65,), align=64).block_size == 128
    assert Pool(2, np.uint8, (9,), align=8).block_size == 16
    p = Pool(50, np.complex128, (3,), align=128)
    hs = [p.acquire() for _ in range(50)]
    assert all(addr(p.view(h)) % 128 == 0 for h in hs)


def test_free_rows_overwritten_are_harmless():
    pool = Pool(16, np.uint64)
    hs = [pool.acquire() for _ in range(16)]
    for h in hs[::2]:
        pool.release(h)
    pool.as_array()[:] = 0xDEADBEEF        # overwrites the links of free blocks
    got = [pool.acquire() for _ in range(8)]
    assert len({h & 0xFFFFFFFF for h in got} | {h & 0xFFFFFFFF for h in hs[1::2]}) == 16
    with pytest.raises(MemoryError):
        pool.acquire()
    pool.check()


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("kwargs, exc", [
    (dict(block_count=0, dtype=np.float32), ValueError),
    (dict(block_count=-3, dtype=np.float32), ValueError),
    (dict(block_count=2**32, dtype=np.float32), ValueError),
    (dict(block_count=1.5, dtype=np.float32), TypeError),
    (dict(block_count=4), TypeError),
    (dict(block_count=4, dtype=object), TypeError),
    (dict(block_count=4, dtype=np.float32, shape=(0,)), ValueError),
    (dict(block_count=4, dtype=np.float32, shape=(-1,)), ValueError),
    (dict(block_count=4, dtype=np.float32, align=3), ValueError),
    (dict(block_count=4, dtype=np.float32, align=0), ValueError),
    (dict(block_count=4, block_size=4), ValueError),
    (dict(block_count=4, block_size=0), ValueError),
    (dict(block_count=4, block_size=64, dtype=np.uint8), TypeError),
    (dict(block_count=2**31, block_size=2**20), MemoryError),
])
def test_bad_construction(kwargs, exc):
    with pytest.raises(exc):
        Pool(**kwargs)


def test_bad_handles_leave_state_unchanged():
    pool = Pool(4, np.int32)
    other = Pool(4, np.int32)
    h = pool.acquire()
    foreign = other.acquire()
    before = pool.stats()
    for bad, exc in [(0, ValueError), (-1, ValueError), (2**64, ValueError), ("1", TypeError),
                     (1.0, TypeError), (None, TypeError), (foreign, ValueError), (h + 1, ValueError),
                     (h ^ (1 << 40), ValueError), (np.zeros(3), ValueError), (other.view(foreign), ValueError)]:
        with pytest.raises(exc):
            pool.release(bad)
        assert pool.stats() == before
    pool.release(h)
    with pytest.raises(ValueError):
        pool.release(h)                     # double release
    h2 = pool.acquire()                     # same slot, new generation
    assert h2 & 0xFFFFFFFF == h & 0xFFFFFFFF and h2 != h
    with pytest.raises(ValueError):
        pool.view(h)                        # stale
    assert pool.is_live(h2) and not pool.is_live(h)


def test_exhaustion_counts_failed_only():
    pool = Pool(2, np.int8)
    pool.acquire(), pool.acquire()
    before = counters(pool)
    for _ in range(3):
        with pytest.raises(MemoryError):
            pool.acquire()
        with pytest.raises(MemoryError):
            pool.acquire_array()
    assert counters(pool) == before and pool.failed == 6


def test_repr_and_stats():
    pool = Pool(10, np.float32, (3,), threadsafe=True)
    pool.acquire()
    r = repr(pool)
    assert "threadsafe" in r and "in_use=1" in r
    s = pool.stats()
    assert s["blocks"] == 10 and s["blocks_in_use"] == 1 and s["blocks_peak"] == 1 and s["allocations"] == 1


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize("growable", [False, True])
def test_threadsafe_python_face_cross_thread_release(growable):
    pool = (Pool(8, np.uint64, threadsafe=True, growable=True, chunk_blocks=8) if growable
            else Pool(256, np.uint64, threadsafe=True))
    handoff = []
    lock = threading.Lock()
    errors = []
    released = []

    def producer():
        try:
            for _ in range(2000):
                try:
                    h = pool.acquire()
                except MemoryError:
                    continue
                pool.view(h)[...] = h
                with lock:
                    handoff.append(h)
        except Exception as e:     # pragma: no cover - reported below
            errors.append(e)

    def consumer():
        try:
            for _ in range(4000):
                with lock:
                    h = handoff.pop() if handoff else None
                if h is None:
                    continue
                if int(pool.view(h)) != h:
                    errors.append(AssertionError("payload changed"))
                pool.release(h)
                released.append(h)
        except Exception as e:     # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=producer) for _ in range(2)] + [threading.Thread(target=consumer) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(set(released)) == len(released)
    assert pool.in_use == len(handoff)
    for h in handoff:
        pool.release(h)
    assert pool.in_use == 0
    if growable:
        assert pool.failed == 0 and pool.capacity == 8 * pool.chunk_count
    pool.check()


STRESS = r"""
# cython: language_level=3
from libc.stdint cimport uint64_t, uintptr_t
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from dod.pool cimport (Pool, dod_pool, dod_pool_acquire, dod_pool_release, dod_pool_acquire_locked,
                       dod_pool_release_locked, dod_pool_index, dod_pool_block, dod_pool_capacity,
                       dod_pool_reset)
from dod.atomics cimport dod_atomic_exchange_ptr
from libc.string cimport memset

cdef uint64_t MAGIC = 0xA5A5A5A5A5A5A5A5

def engine_roundtrip(Pool pool, size_t n):
    '''Acquire n blocks through the inline engine, check them, release them.'''
    cdef size_t i, k
    cdef void* ps[64]
    cdef uintptr_t stride = pool.engine.stride
    out = []
    with nogil:
        for i in range(n):
            ps[i] = dod_pool_acquire(&pool.engine)
    for i in range(n):
        out.append(0 if ps[i] == NULL else dod_pool_index(&pool.engine, ps[i]))
    with nogil:
        for i in range(n):
            if ps[i] != NULL:
                dod_pool_release(&pool.engine, ps[i])
    return out

def engine_grow(Pool pool, size_t n, bint keep):
    '''Acquire n blocks nogil through the inline engine (a growable pool grows
    past its first chunk), tag each with its own address, check every tag
    and the slot <-> block mapping, then release them all unless `keep`.
    Returns (acquired, bad, slots).'''
    cdef size_t i, got = 0, bad = 0
    cdef void** ps = <void**>PyMem_Malloc(n * sizeof(void*))
    cdef size_t* idx = <size_t*>PyMem_Malloc(n * sizeof(size_t))
    with nogil:
        for i in range(n):
            ps[i] = dod_pool_acquire(&pool.engine)
            if ps[i] != NULL:
                got += 1
                (<uint64_t*>ps[i])[0] = <uintptr_t>ps[i] ^ MAGIC
        for i in range(n):
            if ps[i] == NULL:
                idx[i] = <size_t>-1
                continue
            idx[i] = dod_pool_index(&pool.engine, ps[i])
            if (<uint64_t*>ps[i])[0] != (<uintptr_t>ps[i] ^ MAGIC) or <void*>dod_pool_block(&pool.engine, idx[i]) != ps[i]:
                bad += 1
        if not keep:
            for i in range(n):
                if ps[i] != NULL:
                    dod_pool_release(&pool.engine, ps[i])
    out = [idx[i] for i in range(n)]
    PyMem_Free(ps)
    PyMem_Free(idx)
    return got, bad, out

def zii_pool():
    '''All bytes zero is an empty pool: acquire fails cleanly, also nogil.'''
    cdef dod_pool p
    cdef void* b
    memset(&p, 0, sizeof(p))
    with nogil:
        b = dod_pool_acquire(&p)
        dod_pool_reset(&p)
    return b == NULL, p.failed, dod_pool_capacity(&p)

def worker(Pool pool, uintptr_t slots_addr, size_t nslots, size_t iters, uint64_t seed):
    '''Random cross-thread traffic: a slot holds a block some thread acquired;
    whoever empties it checks the block's tag and releases it.'''
    cdef void** slots = <void**>slots_addr
    cdef uint64_t x = seed | 1
    cdef size_t i, k, acquired = 0, released = 0, bad = 0, failed = 0
    cdef void* p
    cdef void* old
    with nogil:
        for k in range(iters):
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
            i = x % nslots
            old = dod_atomic_exchange_ptr(&slots[i], NULL)
            if old == NULL:
                p = dod_pool_acquire_locked(&pool.engine, &pool.mutex)
                if p == NULL:
                    failed += 1
                    continue
                (<uint64_t*>p)[1] = <uintptr_t>p ^ MAGIC
                acquired += 1
                old = dod_atomic_exchange_ptr(&slots[i], p)
            if old != NULL:
                if (<uint64_t*>old)[1] != (<uintptr_t>old ^ MAGIC):
                    bad += 1
                (<uint64_t*>old)[1] = 0
                dod_pool_release_locked(&pool.engine, &pool.mutex, old)
                released += 1
    return acquired, released, bad, failed

def tag_ok(uintptr_t p):
    return (<uint64_t*>p)[1] == (p ^ MAGIC)

def release_all(Pool pool, uintptr_t slots_addr, size_t nslots):
    cdef void** slots = <void**>slots_addr
    cdef size_t i
    for i in range(nslots):
        if slots[i] != NULL:
            dod_pool_release_locked(&pool.engine, &pool.mutex, slots[i])
            slots[i] = NULL
"""


@pytest.fixture
def stress_module(compile_cython):
    return compile_cython(STRESS, "dod_pool_stress_mod")


def test_cimport_engine(stress_module):
    pool = Pool(10, block_size=32)
    idx = stress_module.engine_roundtrip(pool, 12)
    assert idx[:10] == list(range(10)) and idx[10:] == [0, 0]
    assert pool.failed == 2 and pool.in_use == 0 and pool.peak == 10
    pool.check()


def test_cimport_engine_grows_past_the_first_chunk(stress_module):
    pool = Pool(8, block_size=32, growable=True, chunk_blocks=5)
    got, bad, idx = stress_module.engine_grow(pool, 30, False)
    assert got == 30 and bad == 0 and idx == list(range(30))
    assert pool.capacity == 33 and pool.chunk_count == 6 and pool.in_use == 0
    assert pool.peak == 30 and pool.failed == 0
    pool.check()
    # Again: the free list (now spread over six chunks) serves first, no growth.
    got, bad, idx = stress_module.engine_grow(pool, 33, True)
    assert got == 33 and bad == 0 and sorted(idx) == list(range(33)) and pool.capacity == 33
    # A fixed pool's engine still returns NULL when full; so does the ZII struct.
    fixed = Pool(8, block_size=32)
    got, bad, idx = stress_module.engine_grow(fixed, 10, False)
    assert got == 8 and bad == 0 and idx[8:] == [2**64 - 1] * 2 and fixed.failed == 2
    assert stress_module.zii_pool() == (True, 1, 0)


def test_python_face_after_engine_growth(stress_module):
    """Chunks added by engine-level acquires are picked up by the Python face
    (its side table catches up); it never reads past its tables."""
    pool = Pool(2, np.uint64, growable=True, chunk_blocks=2)
    got, bad, idx = stress_module.engine_grow(pool, 7, False)     # four chunks, all released
    assert got == 7 and bad == 0 and pool.capacity == 8
    assert pool.live_mask().shape == (8,) and not pool.live_mask().any()
    hs = [pool.acquire() for _ in range(9)]
    assert len({h & 0xFFFFFFFF for h in hs}) == 9 and pool.capacity == 10
    assert not pool.is_live((1 << 32) | 100)                # beyond every table: just not live
    pool.check()


@pytest.mark.parametrize("growable", [False, True])
def test_locked_pool_thread_stress_nogil(stress_module, growable):
    nslots, nthreads, iters = 512, 4, 200_000
    if growable:            # starts small and grows under the mutex, by chunks of 16
        pool = Pool(16, block_size=32, threadsafe=True, growable=True, chunk_blocks=16)
    else:                   # fewer blocks than slots: exhaustion happens
        pool = Pool(300, block_size=32, threadsafe=True)
    slots = np.zeros(nslots, dtype=np.uintp)
    results = [None] * nthreads

    def run(k):
        results[k] = stress_module.worker(pool, slots.ctypes.data, nslots, iters, (0x9E3779B97F4A7C15 * (k + 1)) & (2**64 - 1))

    ts = [threading.Thread(target=run, args=(k,)) for k in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    acquired = sum(r[0] for r in results)
    released = sum(r[1] for r in results)
    assert sum(r[2] for r in results) == 0, "a block's tag changed: handed out twice"
    held = [int(p) for p in slots if p]
    assert len(set(held)) == len(held)                     # nothing duplicated
    assert acquired - released == len(held) == pool.in_use  # nothing lost
    assert all(stress_module.tag_ok(p) for p in held)
    assert pool.allocations == acquired
    if growable:
        assert sum(r[3] for r in results) == 0 and pool.failed == 0    # never exhausted
        assert pool.chunk_count > 1 and pool.capacity == 16 * pool.chunk_count
        assert pool.peak <= pool.capacity <= nslots + 16 * nthreads
    pool.check()
    stress_module.release_all(pool, slots.ctypes.data, nslots)
    assert pool.in_use == 0
    pool.check()


def dies_with_abort(fn):
    """Run fn in a forked child; True if the child died of SIGABRT."""
    pid = os.fork()
    if pid == 0:                            # child
        try:
            faulthandler.disable()          # the abort is expected: no traceback dump
            os.close(2)                     # keep the expected message out of the test log
            fn()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGABRT


DEATH = r"""
# cython: language_level=3
# distutils: define_macros=DOD_DEBUG=1
# The engine is inlined into this module, so its debug checks follow this
# module's DOD_DEBUG, whatever the build of dod itself.
from dod.pool cimport Pool, dod_pool_acquire, dod_pool_release
from dod.freelist cimport FreeList, dod_freelist_allocate, dod_freelist_free

def double_release(Pool pool):
    cdef void* p = dod_pool_acquire(&pool.engine)
    dod_pool_release(&pool.engine, p)
    dod_pool_release(&pool.engine, p)

def foreign_release(Pool pool):
    cdef char buf[64]
    dod_pool_release(&pool.engine, <void*>buf)

def double_release_after_growth(Pool pool, size_t n):
    cdef size_t i
    cdef void* p = NULL
    for i in range(n):
        p = dod_pool_acquire(&pool.engine)
    dod_pool_release(&pool.engine, p)
    dod_pool_release(&pool.engine, p)

def good_pairs(Pool pool, size_t n):
    cdef size_t i
    cdef void* p
    for i in range(n):
        p = dod_pool_acquire(&pool.engine)
        dod_pool_release(&pool.engine, p)
    return pool.engine.in_use

def double_free(FreeList owner):
    cdef void* p = dod_freelist_allocate(&owner.engine, 64, 16)
    cdef void* q = dod_freelist_allocate(&owner.engine, 64, 16)
    dod_freelist_free(&owner.engine, p)
    dod_freelist_free(&owner.engine, p)

def foreign_free(FreeList owner):
    cdef char buf[64]
    dod_freelist_free(&owner.engine, <void*>(buf + 16))
"""


def test_debug_engine_aborts_on_misuse(compile_cython):
    """Death tests: a module compiled with DOD_DEBUG=1 aborts on a broken engine contract."""
    mod = compile_cython(DEATH, "dod_pool_death_mod")
    assert dies_with_abort(lambda: mod.double_release(Pool(4, block_size=16)))
    assert dies_with_abort(lambda: mod.foreign_release(Pool(4, block_size=16)))
    assert dies_with_abort(lambda: mod.foreign_release(Pool(4, block_size=16, growable=True)))
    assert dies_with_abort(lambda: mod.double_release_after_growth(Pool(4, block_size=16, growable=True), 9))
    assert not dies_with_abort(lambda: mod.good_pairs(Pool(1, block_size=16, growable=True), 100))
    assert dies_with_abort(lambda: mod.double_free(FreeList(4096)))
    assert dies_with_abort(lambda: mod.foreign_free(FreeList(4096)))
    assert not dies_with_abort(lambda: mod.good_pairs(Pool(4, block_size=16), 100))
    assert mod.good_pairs(Pool(4, block_size=16), 100) == 0


def test_reset_releases_everything_and_stales_handles():
    pool = Pool(8, np.int32)
    hs = [pool.acquire() for _ in range(5)]
    v = pool.view(hs[0])
    with pytest.raises(BufferError):
        pool.reset()
    assert pool.in_use == 5 and all(pool.is_live(h) for h in hs)
    del v
    r = pool.resource()
    with pytest.raises(RuntimeError):
        pool.reset()
    del r
    pool.reset()
    assert pool.in_use == 0 and pool.peak == 5 and not any(pool.is_live(h) for h in hs)
    new = [pool.acquire() for _ in range(8)]
    assert not set(new) & set(hs)
    for h in hs:
        with pytest.raises(ValueError):
            pool.release(h)
    assert pool.peak == 8
    pool.check()


def test_acquire_many_release_many():
    pool = Pool(100, np.float32, (2,))
    hs = pool.acquire_many(60)
    assert len(set(hs.tolist())) == 60 and pool.in_use == 60
    with pytest.raises(MemoryError):
        pool.acquire_many(41)
    assert pool.in_use == 60 and pool.failed == 1
    with pytest.raises(ValueError):
        pool.acquire_many(-1)
    assert pool.acquire_many(0).shape == (0,)
    pool.as_array()[pool.live_mask()] = 1.5
    with pytest.raises(ValueError):
        pool.release_many(np.r_[hs[:5], hs[:1]])          # repeated handle
    with pytest.raises(ValueError):
        pool.release_many([hs[0], 0])                     # nil
    v = pool.view(hs[7])
    with pytest.raises(BufferError):
        pool.release_many(hs[:10])
    assert pool.in_use == 60
    del v
    pool.release_many(hs[:30])
    assert pool.in_use == 30
    with pytest.raises(ValueError):
        pool.release_many(hs[:1])                         # already released
    pool.release_many(hs[30:])
    assert pool.in_use == 0
    pool.check()


# ---------------------------------------------------------------- growth by whole chunks


def test_fixed_pool_never_grows():
    pool = Pool(3, np.int32)
    assert not pool.growable and pool.chunk_count == 1 and pool.chunk_blocks == 0
    hs = [pool.acquire() for _ in range(3)]
    before = counters(pool)
    with pytest.raises(MemoryError, match="all 3 blocks"):
        pool.acquire()
    with pytest.raises(MemoryError):
        pool.acquire_many(1)
    with pytest.raises(MemoryError):
        pool.reserve(1)
    assert counters(pool) == before and pool.failed == 2 and pool.capacity == 3
    pool.reserve(0)
    assert len(pool.chunks()) == 1 and pool.chunks()[0][0].shape == pool.as_array().shape == (3,)
    pool.release(hs[0])
    pool.reserve(1)
    assert pool.capacity == 3


@pytest.mark.parametrize("kwargs, exc", [
    (dict(chunk_blocks=4), ValueError),                     # needs growable=True
    (dict(growable=True, chunk_blocks=0), ValueError),
    (dict(growable=True, chunk_blocks=-1), ValueError),
    (dict(growable=True, chunk_blocks=2**32), ValueError),
    (dict(growable=True, chunk_blocks=1.5), TypeError),
    (dict(growable=True, chunk_blocks=2**31, block_size=2**20), MemoryError),   # a chunk over 2**48 bytes
])
def test_bad_growth_arguments(kwargs, exc):
    kwargs.setdefault("block_size", 16)
    with pytest.raises(exc):
        Pool(4, **kwargs)


def test_growth_keeps_handles_views_and_tags():
    pool = Pool(4, np.uint64, (2,), growable=True, chunk_blocks=3)
    assert pool.growable and pool.chunk_blocks == 3 and pool.capacity == 4
    hs = [pool.acquire() for _ in range(4)]
    views = {h: pool.view(h) for h in hs}
    addrs = {h: addr(v) for h, v in views.items()}
    for h, v in views.items():
        v[:] = h
    hs += [pool.acquire() for _ in range(8)]                 # three more chunks of 3
    assert pool.capacity == 13 and pool.chunk_count == 4 and pool.in_use == 12
    assert [h & 0xFFFFFFFF for h in hs] == list(range(12))   # slot indices run across chunks
    for h in hs[4:]:
        pool.view(h)[:] = h
    for h, v in views.items():                               # live blocks never moved
        assert addr(v) == addrs[h] and v.tolist() == [h, h]
        assert addr(pool.view(h)) == addrs[h]
    for h in hs:
        assert pool.is_live(h) and pool.view(h).tolist() == [h, h]
        assert pool.index_of(h) == h & 0xFFFFFFFF
    all_addrs = [addr(pool.view(h)) for h in hs]
    assert len(set(all_addrs)) == 12 and all(a % 16 == 0 for a in all_addrs)
    # Free blocks are reused before the pool grows again.
    pool.release(hs[6])
    del views[hs[1]]
    pool.release(hs[1])
    h1, h6 = pool.acquire(), pool.acquire()
    assert {h1 & 0xFFFFFFFF, h6 & 0xFFFFFFFF} == {1, 6} and pool.capacity == 13
    assert not pool.is_live(hs[1]) and not pool.is_live(hs[6])
    with pytest.raises(ValueError):
        pool.release(hs[6])                                  # stale across chunks too
    h12 = pool.acquire()
    assert h12 & 0xFFFFFFFF == 12 and pool.capacity == 13    # the last free slot of chunk 3
    pool.acquire()
    assert pool.capacity == 16 and pool.chunk_count == 5
    pool.check()
    assert pool.peak == 14 and pool.allocations == 16


def test_chunks_and_live_mask_over_several_chunks():
    pool = Pool(3, np.float32, (2,), growable=True, chunk_blocks=2)
    whole = pool.as_array()                                  # one chunk: one array, as a fixed pool
    assert whole.shape == (3, 2)
    hs = pool.acquire_many(6)
    assert pool.capacity == 7 and pool.chunk_count == 3
    with pytest.raises(ValueError, match="chunks"):
        pool.as_array()
    pool.release(hs[1])
    pool.release(hs[4])
    parts = pool.chunks()
    assert [rows.shape for rows, _ in parts] == [(3, 2), (2, 2), (2, 2)]
    assert [live.tolist() for _, live in parts] == [[True, False, True], [True, False], [True, False]]
    mask = pool.live_mask()
    assert mask.shape == (7,) and np.array_equal(np.concatenate([l for _, l in parts]), mask)
    for h in pool.handles().tolist():
        pool.view(h)[:] = h & 0xFFFFFFFF
    for rows, live in pool.chunks():                         # the vectorised idiom
        rows[live] *= 10
    assert [float(pool.view(h)[0]) for h in pool.handles().tolist()] == [0, 20, 30, 50]
    assert whole[2].tolist() == [20, 20]                     # the early view still sees chunk 0


def test_views_keep_chunks_alive():
    pool = Pool(2, np.int64, (4,), growable=True)
    hs = pool.acquire_many(7)                                # chunks of 2: four chunks
    last = pool.view(hs[-1])
    rows, live = pool.chunks()[2]
    last[:] = 7
    rows[:] = 3
    del pool, hs
    gc.collect()
    assert last.tolist() == [7] * 4 and rows.tolist() == [[3] * 4] * 2
    last += 1
    rows += 1
    assert last.sum() == 32 and rows.sum() == 32


def test_growth_failure_leaves_pool_unchanged():
    arena = Arena(1024)
    pool = Pool(4, block_size=64, growable=True, chunk_blocks=4, resource=arena.resource())
    got = []
    with pytest.raises(MemoryError, match="could not supply another chunk"):
        while True:
            got.append(pool.acquire())
    cap = pool.capacity
    assert 4 < cap <= 16 and len(got) == cap and pool.failed == 1   # the arena held a few chunks
    before = counters(pool)
    with pytest.raises(MemoryError):
        pool.acquire_array()
    with pytest.raises(MemoryError):
        pool.acquire_many(3)
    with pytest.raises(MemoryError):
        pool.reserve(1)
    assert counters(pool) == before and pool.failed == 3 and pool.capacity == cap
    pool.check()
    pool.release(got.pop())                                  # a free block: no growth needed
    got.append(pool.acquire())
    for h in got:
        pool.release(h)
    pool.check()


def test_acquire_many_growth_is_all_or_nothing():
    # The upstream is a pool of three 256-byte blocks: the first region and
    # two chunks of 4 x 64 bytes. Chunks given back return to it.
    upstream = Pool(3, block_size=256, align=64)
    pool = Pool(4, block_size=64, growable=True, resource=upstream.resource())
    hs = pool.acquire_many(2)
    with pytest.raises(MemoryError):
        pool.acquire_many(11)                                # needs three chunks: there are two
    assert pool.capacity == 4 and pool.chunk_count == 1 and pool.in_use == 2 and pool.failed == 1
    assert upstream.in_use == 1                              # the two chunks it got went back
    pool.check()
    hs2 = pool.acquire_many(8)                               # two chunks do fit
    assert pool.capacity == 12 and len(set(hs.tolist()) | set(hs2.tolist())) == 10
    assert upstream.in_use == 3
    pool.check()
    del pool
    assert upstream.in_use == 0                              # every chunk given back on dealloc


def test_reserve_and_reset_keep_spare_chunks():
    pool = Pool(4, np.float64, growable=True, chunk_blocks=4)
    pool.reserve(10)
    assert pool.capacity == 12 and pool.chunk_count == 3 and pool.in_use == 0
    nbytes = pool.nbytes
    hs = [pool.acquire() for _ in range(12)]
    assert pool.nbytes == nbytes                             # the spares were used, nothing new
    pool.reset()
    assert pool.capacity == 12 and pool.in_use == 0 and pool.peak == 12
    assert not any(pool.is_live(h) for h in hs)
    hs2 = [pool.acquire() for _ in range(12)]
    assert sorted(h & 0xFFFFFFFF for h in hs2) == list(range(12)) and pool.nbytes == nbytes
    assert not set(hs) & set(hs2)
    pool.acquire()
    assert pool.capacity == 16
    pool.check()
    with pytest.raises(ValueError):
        pool.reserve(-1)


def test_growable_repr_stats_and_resource():
    pool = Pool(2, np.float32, (3,), growable=True, chunk_blocks=5, threadsafe=True)
    pool.acquire_many(3)
    r = repr(pool)
    assert "growable" in r and "threadsafe" in r and "2 chunks" in r and "7 x" in r, r
    s = pool.stats()
    assert s["blocks"] == 7 and s["chunks"] == 2 and s["blocks_in_use"] == 3 and s["capacity"] == 7 * 16
    # As a resource the pool grows too: three free lists, one block each.
    raw = Pool(1, block_size=4096, growable=True)
    fls = [FreeList(4096, resource=raw.resource()) for _ in range(3)]
    assert raw.in_use == 3 and raw.capacity == 3 and raw.chunk_count == 3
    del fls
    assert raw.in_use == 0
    raw.check()


def test_side_table_grows_without_moving_handles():
    pool = Pool(1, np.uint32, growable=True, chunk_blocks=1)
    hs = []
    for k in range(300):                                     # many chunks: the side tables reallocate
        hs.append(pool.acquire())
        pool.view(hs[-1])[...] = k
    assert pool.chunk_count == 300
    assert [int(pool.view(h)) for h in hs] == list(range(300))
    pool.release_many(hs[::2])
    assert pool.live_mask().sum() == 150
    pool.check()


def test_scribbled_free_list_never_reaches_the_resource_path():
    """Writes through as_array() into free blocks, then an allocator backed by
    the pool's resource: the free list lives in the side table, so every
    request is served and none follows a garbage link (this used to crash
    the interpreter)."""
    from dod.arena import Arena

    pool = Pool(4, block_size=64)
    hs = [pool.acquire() for _ in range(4)]
    for h in hs:
        pool.release(h)
    whole = pool.as_array()
    whole[:] = 1                                  # every free block's link is now garbage
    r = pool.resource()
    arenas = [Arena(32, resource=r) for _ in range(4)]
    assert pool.in_use == 4
    del arenas
    whole[:] = 1                                  # scribble again while exported
    ok = 0
    failed = pool.failed
    for _ in range(6):
        Arena(32, resource=r)                     # served: the free list lives outside the blocks
        ok += 1
    assert ok == 6 and pool.failed == failed      # each arena dies at once: its block returns
    del r, whole
    h = pool.acquire()
    pool.release(h)
    pool.check()


@pytest.mark.parametrize("call", ["reserve", "acquire_many"])
def test_a_request_past_max_blocks_fails_at_once_and_changes_nothing(call):
    # This used to ask the upstream for 2**28 chunks one at a time (minutes).
    p = Pool(8, block_size=32, growable=True, chunk_blocks=8)
    assert p.max_blocks == 8 + ((1 << 20) - 1) * 8
    before = (p.capacity, p.chunk_count, p.in_use, p.failed)
    t0 = time.perf_counter()
    for n in (2**31, p.max_blocks + 1):
        with pytest.raises(MemoryError, match="max_blocks"):
            getattr(p, call)(n)
    assert time.perf_counter() - t0 < 1.0        # refused up front, not after the chunks
    grown = 1 if call == "acquire_many" else 0   # acquire_many counts its failures
    assert (p.capacity, p.chunk_count, p.in_use, p.failed) == before[:3] + (before[3] + 2 * grown,)
    p.check()
    assert Pool(5, block_size=8).max_blocks == 5
    assert Pool(8, block_size=8, growable=True, chunk_blocks=2**32 - 1).max_blocks == 2**32 - 1
