"""The one-word atomic arena: model-based walks (single thread) and a
cross-thread stress run in compiled nogil code."""
import gc
import threading

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dod.atomic_arena import AtomicArena, ThreadCache


def need(size, align):
    n = max(16, (size + 15) & ~15)
    return n + (align - 16 if align > 16 else 0)


# ---------------------------------------------------------------- basics

def test_construction_validates():
    with pytest.raises(ValueError):
        AtomicArena(1000)                    # not a power of two
    with pytest.raises(ValueError):
        AtomicArena(1024)                    # below 4096
    with pytest.raises(ValueError):
        AtomicArena(4096, max_concurrent_entrants=3)
    with pytest.raises(ValueError):          # no overshoot envelope left
        AtomicArena(1 << 40, max_concurrent_entrants=1 << 20)
    a = AtomicArena(1 << 40, max_concurrent_entrants=1 << 10)
    assert a.max_request == (1 << 43) - 64
    assert a.blocks == 0 and a.capacity == 0      # nothing mapped until the first request


def test_alloc_free_drains_and_recycles():
    a = AtomicArena(4096)
    xs = [a.empty(100, np.uint8) for _ in range(200)]       # 112 bytes each: ~36 per block
    assert a.in_use == 200 * 112
    assert a.blocks >= 5
    del xs
    gc.collect()
    assert a.in_use == 0
    assert all(v == 0 for v in a.block_counters().values())
    drained = a.drained
    assert drained == a.blocks - 1                          # every closed block; the open one stays
    blocks = a.blocks
    ys = [a.empty(100, np.uint8) for _ in range(200)]
    # every spare is installed again before a new block is made; the open
    # block's rest holds less than a block, so at most one new block
    assert a.recycled == blocks - 1
    assert a.blocks <= blocks + 1
    del ys
    a.check()


def test_evict_returns_blocks():
    a = AtomicArena(4096, evict=True)
    xs = [a.empty(1000, np.uint8) for _ in range(50)]
    assert a.blocks > 10
    del xs
    assert a.blocks == 1                                     # only the open block remains
    assert a.evicted == a.drained > 10
    a.check()


def test_slot_limit_and_spare_reuse_for_bigger_blocks():
    a = AtomicArena(4096)
    xs = [a.empty(4000, np.uint8) for _ in range(128)]         # one block each: every slot taken
    assert a.blocks == 128
    with pytest.raises(MemoryError):
        a.empty(4000, np.uint8)
    assert a.failed == 1
    del xs[:10]                                                 # ten closed blocks drain to spares
    assert a.stats()["spares"] == 10
    big = a.empty(20000, np.uint8)                              # needs factor 3: a spare makes room
    assert a.blocks == 128 and a.evicted == 1 and a.owns(big)
    del xs, big
    assert all(v == 0 for v in a.block_counters().values())
    a.check()


def test_large_requests_use_bigger_blocks_and_limits():
    a = AtomicArena(4096)
    big = a.empty(4096 * 8 - 64, np.uint8)
    assert big.nbytes == a.max_request
    with pytest.raises(ValueError):
        a.empty(4096 * 8, np.uint8)
    before = a.stats()
    with pytest.raises(ValueError):
        a.empty(10, align=8192)
    with pytest.raises(TypeError):
        a.empty(10, dtype=object)
    assert a.stats() == before


def test_alignment_and_zero():
    a = AtomicArena(1 << 16)
    for align in (1, 2, 8, 16, 32, 64, 256, 4096):
        x = a.zeros(7, np.uint8, align=align)
        assert x.ctypes.data % align == 0
        assert not x.any()


def test_resize_shrinks_in_place_and_grows_by_copy():
    a = AtomicArena(1 << 16)
    x = a.empty(1000, np.uint8)
    x[:] = np.arange(1000) % 251
    used = a.in_use
    y = a.resize(x, 100)
    assert y.ctypes.data == x.ctypes.data
    assert a.in_use == used - (1008 - 112)
    assert (y == np.arange(100) % 251).all()
    z = a.resize(y, 5000)
    assert z.ctypes.data != y.ctypes.data and (z[:100] == y).all()
    with pytest.raises(ValueError):
        a.resize(x[1:], 10)
    with pytest.raises(ValueError):
        a.resize(np.zeros(3), 1)
    del x, y, z
    assert a.in_use == 0


def test_owns():
    a = AtomicArena(4096)
    x = a.empty(10)
    assert a.owns(x)
    assert not a.owns(np.zeros(10))
    assert not AtomicArena(4096).owns(x)


def test_thread_cache_belongs_to_its_thread():
    a = AtomicArena(1 << 16)
    c = a.thread_cache(1024)
    x = c.empty(10)
    errors = []

    def other():
        try:
            c.empty(1)
        except RuntimeError as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert errors
    del x
    assert c.chunk == 1024 - 64
    assert a.in_use == c.chunk - 80               # the open chunk stays reserved; x (80 B) was freed
    c.close()
    assert a.in_use == 0
    with pytest.raises(RuntimeError):
        c.empty(1)


def test_resource_face():
    a = AtomicArena(1 << 16)
    r = a.resource()
    del a
    assert r.owner.block_size == 1 << 16          # the resource keeps the arena alive


# ---------------------------------------------------------------- model-based walk

class AtomicArenaWalk(RuleBasedStateMachine):
    @initialize(evict=st.booleans(), chunk=st.sampled_from([256, 1024]))
    def setup(self, evict, chunk):
        self.arena = AtomicArena(4096, evict=evict)
        self.cache = self.arena.thread_cache(chunk)
        self.live = {}          # tag -> (array, tag byte, size, align)
        self.next_tag = 1

    def _check_all(self):
        spans = []
        for tag, (arr, byte, size, align) in self.live.items():
            assert arr.ctypes.data % align == 0
            assert (arr == byte).all(), "payload tag overwritten"
            assert self.arena.owns(arr)
            spans.append((arr.ctypes.data, arr.ctypes.data + max(size, 1)))
        spans.sort()
        for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
            assert e0 <= s1, "overlapping allocations"

    @rule(size=st.integers(0, 3000), align=st.sampled_from([1, 8, 16, 64, 256]),
          cached=st.booleans())
    def allocate(self, size, align, cached):
        src = self.cache if cached else self.arena
        arr = src.empty(size, np.uint8, align=align)
        byte = self.next_tag % 251
        arr[:] = byte
        self.live[self.next_tag] = (arr, byte, size, align)
        self.next_tag += 1

    @rule(size=st.integers(40000, 1 << 20))
    def too_large_fails_cleanly(self, size):
        before = (self.arena.stats(), self.arena.block_counters())
        if size > self.arena.max_request:
            with pytest.raises(ValueError):
                self.arena.empty(size, np.uint8)
            assert (self.arena.stats(), self.arena.block_counters()) == before

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data):
        tag = data.draw(st.sampled_from(sorted(self.live)))
        arr, byte, size, align = self.live.pop(tag)
        assert (arr == byte).all()
        del arr

    @precondition(lambda self: self.live)
    @rule(data=st.data(), frac=st.floats(0, 1))
    def shrink(self, data, frac):
        tag = data.draw(st.sampled_from(sorted(self.live)))
        arr, byte, size, align = self.live[tag]
        new = int(size * frac)
        out = self.arena.resize(arr, new)
        assert out.ctypes.data == arr.ctypes.data
        self.live[tag] = (out, byte, new, align)

    @rule()
    def flush_and_account(self):
        self.cache.flush()
        assert self.arena.in_use == sum(need(s, a) for (_, _, s, a) in self.live.values())

    @invariant()
    def invariants(self):
        self.arena.check()
        self._check_all()

    def teardown(self):
        self.live.clear()
        self.cache.flush()
        assert self.arena.in_use == 0
        assert all(v == 0 for v in self.arena.block_counters().values())
        self.arena.check()


TestAtomicArenaWalk = AtomicArenaWalk.TestCase


# ---------------------------------------------------------------- threads, without the GIL

STRESS = r"""
# cython: boundscheck=False, wraparound=False
from libc.stdint cimport uint64_t, uintptr_t
from libc.string cimport memset
from dod.atomics cimport dod_atomic_exchange_ptr, dod_atomic_fetch_add_u64
from dod.atomic_arena cimport (AtomicArena, dod_aa, dod_aa_allocate,
    dod_aa_free, dod_aa_cache, dod_aa_cache_allocate, dod_aa_cache_free,
    dod_aa_cache_flush, dod_aa_reallocate, dod_aa_cache_init)

cdef enum:
    NSLOTS = 64
cdef uint64_t MAGIC = 0x9E3779B97F4A7C15ULL
cdef void* slots[64]

cdef struct Tally:
    uint64_t allocs, frees, xor_alloc, xor_free, bad, failed

cdef inline uint64_t rnd(uint64_t* s) noexcept nogil:
    s[0] ^= s[0] << 13
    s[0] ^= s[0] >> 7
    s[0] ^= s[0] << 17
    return s[0]

cdef void release(dod_aa* a, dod_aa_cache* c, void* q, Tally* t) noexcept nogil:
    cdef uint64_t* h = <uint64_t*>q
    cdef uint64_t size = h[0], ident = h[1], align = h[2]
    if size < 32 or size > 4096 or (<uint64_t*>(<char*>q + size - 8))[0] != (ident ^ MAGIC) \
            or (<uintptr_t>q & (align - 1)) != 0:
        t.bad += 1
    t.frees += 1
    t.xor_free ^= ident
    memset(q, 0xDD, size)          # a block handed out twice would now fail its owner's check
    if c != NULL:
        dod_aa_cache_free(c, q, size, align)
    else:
        dod_aa_free(a, q, size, align)

def work(AtomicArena arena, uint64_t tid, uint64_t iters, bint cached, size_t chunk):
    cdef dod_aa_cache cache
    cdef Tally t
    cdef uint64_t s = 0x2545F4914F6CDD1DULL * (tid + 1), i, size, align, r, ident
    cdef void* p
    cdef void* q
    cdef dod_aa* a = &arena.engine
    memset(&t, 0, sizeof(t))
    dod_aa_cache_init(&cache, a, chunk)
    with nogil:
        for i in range(iters):
            r = rnd(&s)
            size = 32 + (r % 60) * 8
            align = 64 if (r >> 20) % 8 == 0 else 16
            p = dod_aa_cache_allocate(&cache, size, align) if cached else dod_aa_allocate(a, size, align)
            if p == NULL:
                t.failed += 1
                continue
            ident = ((tid + 1) << 40) | i
            (<uint64_t*>p)[0] = size
            (<uint64_t*>p)[1] = ident
            (<uint64_t*>p)[2] = align
            (<uint64_t*>(<char*>p + size - 8))[0] = ident ^ MAGIC
            t.allocs += 1
            t.xor_alloc ^= ident
            q = dod_atomic_exchange_ptr(&slots[(r >> 32) % NSLOTS], p)
            if q != NULL:
                release(a, &cache if cached else NULL, q, &t)
        dod_aa_cache_flush(&cache)
    return t

def overshoot(AtomicArena arena, uint64_t k):
    # k raw adds of the largest reservation on a word with no block yet (position
    # CLOSED, the worst start): the index and factor bits afterwards.
    cdef uint64_t i
    for i in range(k):
        dod_atomic_fetch_add_u64(&arena.engine.word, arena.engine.max_need)
    return arena.engine.word >> 55

def realloc_roundtrip(AtomicArena arena):
    # grow by moving, shrink in place, free: returns (moved, same_after_shrink, in_use_delta_ok)
    cdef char* p = <char*>dod_aa_allocate(&arena.engine, 100, 16)
    cdef char* q
    cdef int i
    for i in range(100):
        p[i] = <char>i
    q = <char*>dod_aa_reallocate(&arena.engine, p, 100, 5000, 16)
    ok = all(q[i] == <char>i for i in range(100))
    p = <char*>dod_aa_reallocate(&arena.engine, q, 5000, 10, 16)
    same = p == q
    dod_aa_free(&arena.engine, p, 10, 16)
    return ok, same

def drain(AtomicArena arena):
    cdef Tally t
    cdef int i
    cdef void* q
    memset(&t, 0, sizeof(t))
    for i in range(NSLOTS):
        q = dod_atomic_exchange_ptr(&slots[i], NULL)
        if q != NULL:
            release(&arena.engine, NULL, q, &t)
    return t
"""


@pytest.fixture(scope="module")
def stress_module(tmp_path_factory):
    from cython_build import compile_cython_module

    return compile_cython_module(STRESS, tmp_path_factory.mktemp("atomic_stress"))


def test_engine_realloc(stress_module):
    a = AtomicArena(1 << 16)
    assert stress_module.realloc_roundtrip(a) == (True, True)
    assert a.in_use == 0 and all(v == 0 for v in a.block_counters().values())


def test_overshoot_envelope(stress_module):
    """max_concurrent_entrants largest requests on an exhausted word leave the
    index and size factor alone; past the envelope the carry reaches them
    (which is why it is documented as the caller's limit)."""
    n = 1024
    inside = AtomicArena(1 << 40, max_concurrent_entrants=n)
    assert stress_module.overshoot(inside, n) == 0
    beyond = AtomicArena(1 << 40, max_concurrent_entrants=n)
    carry_at = (1 << 54) // beyond.max_request + 1          # from CLOSED = 2**54 to 2**55
    assert carry_at > n
    assert stress_module.overshoot(beyond, carry_at - 1) == 0
    assert stress_module.overshoot(beyond, 1) != 0


@pytest.mark.parametrize("cached,evict", [(False, False), (True, False), (False, True), (True, True)])
def test_cross_thread_stress(stress_module, cached, evict):
    threads_n, iters = 4, 300_000
    arena = AtomicArena(1 << 14, evict=evict)       # small blocks: many installs and drains
    results = [None] * threads_n

    def run(i):
        results[i] = stress_module.work(arena, i, iters, cached, 512)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads_n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    tail = stress_module.drain(arena)
    tallies = results + [tail]
    assert sum(r["bad"] for r in tallies) == 0, "payload tags damaged"
    assert sum(r["failed"] for r in tallies) == 0
    allocs = sum(r["allocs"] for r in tallies)
    assert allocs == threads_n * iters
    assert sum(r["frees"] for r in tallies) == allocs       # every block freed exactly once
    xa = xf = 0
    for r in tallies:
        xa ^= r["xor_alloc"]
        xf ^= r["xor_free"]
    assert xa == xf
    counters = arena.block_counters()
    assert counters and all(v == 0 for v in counters.values()), counters
    assert arena.in_use == 0
    assert arena.drained > 10
    if evict:
        assert arena.evicted == arena.drained
    else:
        assert arena.recycled > 0
    arena.check()


def test_thread_cache_check_and_invariant_error_type():
    import dod

    a = AtomicArena(1 << 16)
    c = a.thread_cache(1 << 12)
    keep = [c.empty(100, np.uint8) for _ in range(50)]
    assert c.check() and a.check()
    del keep
    c.flush()
    assert c.check()
    assert issubclass(dod.InvariantError, AssertionError) and issubclass(dod.InvariantError, RuntimeError)
