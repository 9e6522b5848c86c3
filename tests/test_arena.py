"""The arena's three faces: engine (through cimport), owner and Python face."""
import gc
import mmap
import os
import sys
from multiprocessing import shared_memory

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, initialize

import dod
from dod.arena import Arena, Mark
from prefault_support import MiB, PAGE, needs_proc, rss

GRAIN = 16


def addr(a):
    return a.__array_interface__["data"][0]


def state(arena):
    return (arena.used, arena.capacity, arena.allocations, arena.failed, arena.peak, arena.blocks)


# ---------------------------------------------------------------- construction

def test_fresh_arena_is_empty_and_zeroed():
    a = Arena(1 << 16)
    assert (a.capacity, a.used, a.available, a.peak, a.allocations, a.failed) == (1 << 16, 0, 1 << 16, 0, 0, 0)
    x = a.empty(1 << 13, np.uint64)        # anonymous pages: fresh memory reads as zero
    assert not x.any()
    assert "capacity=64.0 KiB" in repr(a) and "fixed" in repr(a)


@pytest.mark.parametrize("bad", [0, -1, -(1 << 70)])
def test_non_positive_capacity_is_refused(bad):
    with pytest.raises(ValueError):
        Arena(bad)


def test_absurd_capacity_is_refused():
    with pytest.raises(ValueError, match="absurd"):
        Arena(1 << 60)
    with pytest.raises((TypeError, ValueError)):
        Arena(2.5)
    with pytest.raises(TypeError):
        Arena()


def test_capacity_is_rounded_to_the_grain():
    assert Arena(1).capacity == GRAIN
    assert Arena(17).capacity == 2 * GRAIN


@pytest.mark.parametrize("make", [
    lambda: bytearray(4096),
    lambda: np.zeros(4096, np.uint8),
    lambda: mmap.mmap(-1, 4096),
])
def test_caller_buffer_is_used_and_kept_alive(make):
    buf = make()
    alone = sys.getrefcount(buf)
    a = Arena(buffer=buf)
    assert sys.getrefcount(buf) > alone       # the arena holds a reference to the buffer
    x = a.empty(16, np.uint8)
    x[:] = 7
    assert bytes(memoryview(buf)[:4096]).count(7) == 16
    del buf
    gc.collect()
    x[:] = 9                                  # still valid: the arena holds the buffer
    assert (x == 9).all()


def test_bytearray_cannot_be_resized_under_an_arena():
    buf = bytearray(1024)
    a = Arena(buffer=buf)
    with pytest.raises(BufferError):
        buf.extend(b"x")
    del a
    buf.extend(b"x")                          # released with the arena


def test_shared_memory_buffer():
    shm = shared_memory.SharedMemory(create=True, size=1 << 14)
    try:
        a = Arena(buffer=shm.buf)
        x = a.zeros(100, np.float64)
        x[:] = np.arange(100)
        other = np.ndarray((100,), np.float64, buffer=shm.buf, offset=addr(x) - addr(np.frombuffer(shm.buf, np.uint8)))
        assert (other == np.arange(100)).all()
        del x, other, a
    finally:
        shm.close()
        shm.unlink()


def test_bad_buffers_are_refused():
    with pytest.raises(TypeError):
        Arena(buffer=b"read-only bytes")
    with pytest.raises(TypeError):
        Arena(buffer=np.zeros((8, 8))[:, ::2])     # not contiguous
    with pytest.raises(ValueError):
        Arena(100, buffer=bytearray(50))
    with pytest.raises(ValueError):
        Arena(buffer=bytearray(0))


# ---------------------------------------------------------------- carving arrays

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint16, np.complex128, "S7", "U3",
                                   np.dtype([("a", "f4"), ("b", "i8")]), "M8[ns]"])
def test_arrays_have_requested_shape_dtype_and_alignment(dtype):
    a = Arena(1 << 16)
    dt = np.dtype(dtype)
    x = a.empty((3, 5), dt)
    assert x.shape == (3, 5) and x.dtype == dt and x.flags.c_contiguous and x.flags.writeable
    assert addr(x) % max(16, dt.alignment) == 0
    z = a.zeros(7, dt, align=256)
    assert addr(z) % 256 == 0
    assert (z.view(np.uint8) == 0).all()


def test_zeros_really_zero_reused_memory():
    a = Arena(4096)
    x = a.full(64, 0xFF, np.uint8)
    del x
    a.reset()
    assert not a.zeros(64, np.uint8).any()


def test_full_array_and_like_helpers():
    a = Arena(1 << 16)
    f = a.full((2, 3), 2.5)
    assert f.dtype == np.float64 and (f == 2.5).all()
    src = np.arange(12, dtype=np.int16).reshape(3, 4)
    c = a.array(src)
    assert c.dtype == np.int16 and (c == src).all() and not np.shares_memory(c, src)
    assert a.empty_like(src).shape == (3, 4)
    assert not a.zeros_like(src, dtype=np.float32).any()


def test_arrays_do_not_overlap_and_keep_payloads():
    a = Arena(1 << 16)
    arrays = [a.empty(n, np.uint8) for n in (1, 15, 16, 17, 100, 3)]
    for i, x in enumerate(arrays):
        x[:] = i
    for i, x in enumerate(arrays):
        assert (x == i).all()
    spans = sorted((addr(x), addr(x) + x.nbytes) for x in arrays)
    assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:]))


@pytest.mark.parametrize("dtype", [object, np.dtype([("o", object)]), "S", "U", np.void])
def test_object_and_unsized_dtypes_are_refused(dtype):
    a = Arena(4096)
    before = state(a)
    with pytest.raises(TypeError):
        a.empty(4, dtype)
    assert state(a) == before


@pytest.mark.parametrize("shape,exc", [(-1, ValueError), ((3, -2), ValueError), ("ab", TypeError),
                                        (1.5, TypeError), ((1 << 62, 1 << 62), MemoryError),
                                        (tuple([1] * 40), ValueError), (1 << 80, OverflowError)])
def test_bad_shapes_are_refused_without_change(shape, exc):
    a = Arena(4096)
    a.empty(3)
    before = state(a)
    with pytest.raises(exc):
        a.empty(shape, np.float64)
    assert state(a) == before


@pytest.mark.parametrize("align", [0, 3, -16, 24, 1 << 31])
def test_bad_alignment_is_refused_without_change(align):
    a = Arena(4096)
    before = state(a)
    with pytest.raises(ValueError):
        a.empty(4, align=align)
    assert state(a) == before


def test_exhaustion_raises_memoryerror_and_counts_failure():
    a = Arena(256)
    a.empty(100, np.uint8)
    used = a.used
    with pytest.raises(MemoryError, match="exhausted"):
        a.empty(200, np.uint8)
    assert a.used == used and a.failed == 1 and a.allocations == 1


def test_zero_size_arrays():
    a = Arena(64)
    x = a.empty(0)
    y = a.empty((5, 0), np.int32)
    assert x.size == 0 and y.shape == (5, 0)


# ---------------------------------------------------------------- lifetime safety

def test_arrays_keep_the_arena_alive():
    a = Arena(4096)
    x = a.full(10, 3.0)
    del a
    gc.collect()
    assert (x == 3.0).all()
    x[:] = 4.0


def test_reset_with_live_arrays_raises_and_changes_nothing():
    a = Arena(4096)
    x = a.full(10, 1.0)
    before = state(a)
    with pytest.raises(BufferError):
        a.reset()
    assert state(a) == before
    view = x[2:5]
    del x
    with pytest.raises(BufferError):          # a view of the array still pins it
        a.reset()
    del view
    a.reset()
    assert a.used == 0 and a.peak >= 80


def test_unchecked_reset_is_allowed_and_aliases():
    a = Arena(4096)
    x = a.full(4, 1.0)
    a.reset(unchecked=True)
    y = a.full(4, 2.0)
    assert addr(x) == addr(y) and (x == 2.0).all()     # the documented risk, not a crash


def test_rewind_only_checks_arrays_after_the_mark():
    a = Arena(4096)
    keep = a.full(4, 1.0)
    m = a.mark()
    tmp = a.full(4, 2.0)
    with pytest.raises(BufferError):
        a.rewind(m)
    del tmp
    a.rewind(m)
    assert (keep == 1.0).all() and a.used == m.position
    with pytest.raises(BufferError):
        a.reset()


def test_marks_from_elsewhere_or_beyond_are_refused():
    a, b = Arena(4096), Arena(4096)
    a.empty(10)
    m = a.mark()
    a.reset()
    before = state(a)
    with pytest.raises(ValueError, match="beyond"):
        a.rewind(m)
    with pytest.raises(ValueError, match="another arena"):
        b.rewind(m)
    with pytest.raises(TypeError):
        a.rewind(5)
    with pytest.raises(TypeError):
        a.rewind(None)
    assert state(a) == before
    with pytest.raises(TypeError):
        Mark()                                  # marks come from Arena.mark() only


def test_scope_rewinds_on_exit():
    a = Arena(4096)
    a.empty(3)
    used = a.used

    def step(arena):
        x = arena.full(100, 5.0)
        return float(x.sum())

    with a.scope() as s:
        assert s is a
        assert step(a) == 500.0
        assert a.used > used
    assert a.used == used


def test_scope_with_escaping_array_raises_bufferror():
    a = Arena(4096)
    with pytest.raises(BufferError):
        with a.scope():
            x = a.empty(10)
    del x
    a.reset()


def test_scope_on_exception_propagates_and_stays_consistent():
    a = Arena(4096)

    with pytest.raises(KeyError):
        with a.scope():
            a.empty(10)                          # dead at once: rewind happens
            raise KeyError("boom")
    assert a.used == 0

    with pytest.raises(ZeroDivisionError):
        with a.scope():
            held = a.empty(10)                   # alive via the traceback: no rewind, no masking
            1 / 0
    assert a.used > 0
    del held
    a.reset()
    assert a.used == 0


def test_scope_is_single_use_and_nests():
    a = Arena(4096)
    s = a.scope()
    with s:
        with a.scope():
            a.empty(8)
        assert a.used == 0
    with pytest.raises(RuntimeError):
        with s:
            pass


def test_resource_pins_the_arena():
    a = Arena(4096)
    r = a.resource()
    assert isinstance(r, dod.resource.Resource) and r.name == "arena"
    with pytest.raises(BufferError):
        a.reset()
    del r
    a.reset()


# ---------------------------------------------------------------- growable

def test_growable_chains_blocks_without_moving_earlier_arrays():
    a = Arena(1024, growable=True)
    arrays = [a.full(300, i, np.uint8) for i in range(20)]
    assert a.blocks > 1 and a.failed == 0
    for i, x in enumerate(arrays):
        assert (x == i).all()
    big = a.empty(1 << 16, np.uint8)             # larger than any block so far
    assert big.nbytes == 1 << 16
    del arrays, big, x
    blocks = a.blocks
    a.reset()
    assert a.used == 0 and a.blocks == blocks     # blocks kept as spares
    for i in range(20):
        a.empty(300, np.uint8)
    assert a.blocks == blocks                     # ... and reused


def test_growable_rewind_across_blocks():
    a = Arena(256, growable=True)
    first = a.full(10, 1, np.uint8)
    m = a.mark()
    for _ in range(10):
        a.empty(200, np.uint8)
    assert a.used > 256
    a.rewind(m)
    assert a.used == m.position and (first == 1).all()
    assert a.peak > 256


def test_fixed_arena_suggests_growable():
    a = Arena(64)
    with pytest.raises(MemoryError, match="growable"):
        a.empty(100, np.uint8)


def test_arena_backed_by_another_resource():
    parent = Arena(1 << 16)
    child = Arena(1024, resource=parent.resource(), growable=True)
    xs = [child.full(500, 3, np.uint8) for _ in range(8)]
    assert child.blocks > 1
    assert parent.used >= 1024
    assert all((x == 3).all() for x in xs)


# ---------------------------------------------------------------- stats

def test_statistics_and_peak_folding():
    a = Arena(4096)
    for _ in range(3):
        a.empty(10, np.uint8)
    assert a.allocations == 3 and a.used == 3 * GRAIN
    assert a.peak == a.used                      # peak reads the live position too
    a.reset()
    assert a.peak == 3 * GRAIN
    s = a.stats()
    assert set(s) == {"capacity", "used", "available", "peak", "allocations", "failed"}
    assert s["available"] == s["capacity"] - s["used"]


def test_dod_lazy_exports_and_include():
    import os
    assert dod.Arena is Arena
    assert os.path.exists(os.path.join(dod.get_include(), "dod", "arena.pxd"))
    with pytest.raises(AttributeError):
        dod.NoSuchThing


# ---------------------------------------------------------------- model-based random walk

class ArenaModel(RuleBasedStateMachine):
    """Random walks over push / push zeroed / mark / rewind / reset / scope
    against a shadow model of live allocations."""

    @initialize(capacity=st.integers(64, 8192), growable=st.booleans())
    def setup(self, capacity, growable):
        self.arena = Arena(capacity, growable=growable)
        self.live = []        # (array, tag, position at push) in push order
        self.marks = []       # (Mark, number of live entries at the mark)
        self.allocations = 0
        self.failed = 0
        self.tag = 0

    def _check_live(self):
        for arr, tag, _ in self.live:
            assert (arr == tag % 251).all()

    @rule(n=st.integers(0, 600), itemsize=st.sampled_from([1, 2, 4, 8]),
          align=st.sampled_from([None, 1, 8, 16, 64, 256]), zero=st.booleans())
    def push(self, n, itemsize, align, zero):
        dt = np.dtype(f"u{itemsize}")
        before = state(self.arena)
        try:
            arr = (self.arena.zeros if zero else self.arena.empty)(n, dt, align=align)
        except MemoryError:
            self.failed += 1
            after = state(self.arena)
            assert after[0] == before[0] and after[2] == before[2] and after[3] == before[3] + 1
            return
        self.allocations += 1
        if zero:
            assert not arr.any()
        assert addr(arr) % (align or max(16, itemsize)) == 0
        self.tag += 1
        arr[...] = self.tag % 251
        self.live.append((arr, self.tag, self.arena.used))
        # no overlap with any live allocation
        lo, hi = addr(arr), addr(arr) + arr.nbytes
        for other, _, _ in self.live[:-1]:
            olo, ohi = addr(other), addr(other) + other.nbytes
            assert hi <= olo or ohi <= lo or arr.nbytes == 0 or other.nbytes == 0

    @rule()
    def mark(self):
        self.marks.append((self.arena.mark(), len(self.live)))

    @precondition(lambda self: self.marks)
    @rule(drop=st.booleans())
    def rewind(self, drop):
        m, n = self.marks.pop()
        if m.position > self.arena.used:
            with pytest.raises(ValueError):
                self.arena.rewind(m)
            return
        if any(arr.nbytes for arr, _, _ in self.live[n:]) and not drop:   # empty arrays pin nothing
            before = state(self.arena)
            with pytest.raises(BufferError):
                self.arena.rewind(m)
            assert state(self.arena) == before
            self.marks.append((m, n))
            return
        del self.live[n:]
        self.arena.rewind(m)
        assert self.arena.used == m.position
        # marks above the rewind point are stale now
        self.marks = [(mm, k) for mm, k in self.marks if mm.position <= m.position]

    @rule(drop=st.booleans())
    def reset(self, drop):
        if any(arr.nbytes for arr, _, _ in self.live) and not drop:
            before = state(self.arena)
            with pytest.raises(BufferError):
                self.arena.reset()
            assert state(self.arena) == before
            return
        self.live.clear()
        self.marks.clear()
        self.arena.reset()
        assert self.arena.used == 0

    @rule(n=st.integers(1, 200))
    def scope(self, n):
        used = self.arena.used
        try:
            with self.arena.scope():
                x = self.arena.full(n, 7, np.uint8)
                assert (x == 7).all()
                del x
        except MemoryError:
            self.failed += 1
            return
        self.allocations += 1
        assert self.arena.used == used

    @invariant()
    def consistent(self):
        if not hasattr(self, "arena"):
            return
        a = self.arena
        assert a.check()
        assert a.allocations == self.allocations
        assert a.failed == self.failed
        assert 0 <= a.used <= a.capacity or a.growable
        assert a.peak >= a.used
        assert a.available == a.capacity - a.used
        self._check_live()


TestArenaModel = ArenaModel.TestCase


# ---------------------------------------------------------------- the cimport API

CIMPORT_SOURCE = r"""
# cython: language_level=3
from libc.stdint cimport uintptr_t
from dod.arena cimport (Arena, dod_arena, dod_arena_push, dod_arena_push_zeroed, dod_arena_mark,
                        dod_arena_rewind, dod_arena_reset, dod_arena_reset_zeroed, dod_arena_cursor,
                        dod_arena_open, dod_arena_close, dod_cursor_push)

ctypedef struct rec:
    double x
    long long id
    double pad[2]

def frame(Arena owner, int n):
    '''Push n records nogil, write them, sum them back, reset. Returns
    (sum of x, sum of ids, all aligned, distinct addresses).'''
    cdef rec* r
    cdef rec* first = NULL
    cdef double sx = 0
    cdef long long sid = 0
    cdef bint aligned = True
    cdef int i
    cdef uintptr_t prev = 0
    cdef bint increasing = True
    with nogil:
        for i in range(n):
            r = <rec*>dod_arena_push(&owner.engine, sizeof(rec), 32)
            if r == NULL:
                break
            aligned = aligned and (<uintptr_t>r % 32 == 0)
            increasing = increasing and (<uintptr_t>r > prev)
            prev = <uintptr_t>r
            r.x = i * 0.5
            r.id = i
            if first == NULL:
                first = r
        for i in range(n):
            sx += first[i].x
            sid += first[i].id
        dod_arena_reset(&owner.engine)
    return sx, sid, aligned, increasing

def cursor_frame(Arena owner, int n):
    cdef dod_arena_cursor c = dod_arena_open(&owner.engine)
    cdef double* p
    cdef int i, got = 0
    with nogil:
        for i in range(n):
            p = <double*>dod_cursor_push(&c, &owner.engine, 8, 8)
            if p == NULL:
                break
            p[0] = i
            got += 1
        dod_arena_close(&owner.engine, &c)
    return got

def zii():
    '''An all-zero engine struct is a valid empty arena: every push fails cleanly.'''
    cdef dod_arena a
    cdef char* z = <char*>&a
    cdef size_t k
    for k in range(sizeof(dod_arena)):
        z[k] = 0
    with nogil:
        p = dod_arena_push(&a, 8, 8)
        q = dod_arena_push_zeroed(&a, 1, 1)
        big = dod_arena_push(&a, <size_t>-1, 16)
        dod_arena_reset(&a)
    return p == NULL and q == NULL and big == NULL, a.failed, dod_arena_mark(&a)

def overflow(Arena owner):
    with nogil:
        p = dod_arena_push(&owner.engine, <size_t>-1, 16)
        q = dod_arena_push(&owner.engine, <size_t>-8, 4096)
    return p == NULL and q == NULL

def reset_zeroed(Arena owner):
    cdef unsigned char* p
    cdef size_t k, nonzero = 0
    with nogil:
        p = <unsigned char*>dod_arena_push(&owner.engine, 256, 16)
        for k in range(256):
            p[k] = 0xAB
        dod_arena_reset_zeroed(&owner.engine)
        p = <unsigned char*>dod_arena_push(&owner.engine, 256, 16)
        for k in range(256):
            nonzero += p[k] != 0
    return nonzero, dod_arena_mark(&owner.engine)

def marks(Arena owner):
    cdef size_t m
    with nogil:
        dod_arena_push(&owner.engine, 24, 8)
        m = dod_arena_mark(&owner.engine)
        dod_arena_push(&owner.engine, 100, 8)
        dod_arena_rewind(&owner.engine, m)
    return m, dod_arena_mark(&owner.engine)
"""


def test_cimport_engine_runs_nogil_frames(compile_cython):
    mod = compile_cython(CIMPORT_SOURCE)
    a = Arena(1 << 16)
    n = 1000
    sx, sid, aligned, increasing = mod.frame(a, n)
    assert sx == sum(i * 0.5 for i in range(n)) and sid == n * (n - 1) // 2
    assert aligned and increasing
    assert a.used == 0 and a.allocations == n and a.peak >= n * 32
    assert mod.cursor_frame(a, 100) == 100 and a.allocations == n + 100 and a.used == 100 * GRAIN
    ok, failed, pos = mod.zii()
    assert ok and failed == 3 and pos == 0
    before = a.failed
    assert mod.overflow(a) and a.failed == before + 2
    a.reset()
    m, pos = mod.marks(a)
    assert m == 32 and pos == 32
    a.reset()
    assert mod.reset_zeroed(a) == (0, 256)
    g = Arena(512, growable=True)              # the walk back across blocks zeroes too
    keep = [g.full(400, 0xAB, np.uint8) for _ in range(4)]
    assert g.blocks > 1
    del keep                                   # g is in a later block: the reset walks back
    assert mod.reset_zeroed(g) == (0, 256)     # ... and block 0, full of 0xAB, reads zero


# ---------------------------------------------------------------- prefault

@needs_proc
def test_arena_prefault_makes_the_capacity_resident_and_keeps_contents():
    a = Arena(48 * MiB)
    x = a.empty(1000, np.int64)
    x[:] = np.arange(1000) * 7
    before = rss()
    touched = a.prefault()
    assert touched >= 48 * MiB and touched % PAGE == 0
    assert rss() - before > 44 * MiB          # the pages were not resident before
    assert np.array_equal(x, np.arange(1000) * 7)
    assert a.used > 0 and a.stats()["allocations"] == 1       # nothing pushed or rewound
    again = rss()
    assert a.prefault() == touched and rss() - again < 2 * MiB        # idempotent


def test_arena_prefault_of_a_caller_buffer_keeps_its_bytes():
    buf = bytearray(os.urandom(3 * PAGE + 123))
    copy = bytes(buf)
    a = Arena(buffer=buf)
    touched = a.prefault()
    assert touched >= len(buf) and touched % PAGE == 0
    assert a.prefault(threads=3) == touched
    assert bytes(buf) == copy


def test_prefault_of_pages_the_system_cannot_back_raises(tmp_path):
    # A shared file mapping past the end of its file: a touch would be
    # SIGBUS, MADV_POPULATE_WRITE fails (EFAULT). prefault must raise
    # MemoryError, not fall back to touching (the interpreter would die).
    # Needs Linux 5.14+ (MADV_POPULATE_WRITE), as every machine CI runs on.
    with open(tmp_path / "backing", "w+b") as f:
        f.truncate(4 * PAGE)
        m = mmap.mmap(f.fileno(), 4 * PAGE)
        f.truncate(0)
    a = Arena(buffer=m)
    for threads in (1, 2):
        with pytest.raises(MemoryError, match="could not fault in this arena's memory"):
            a.prefault(threads=threads)
    del a
    m.close()


@needs_proc
def test_growable_arena_prefaults_every_block_over_threads():
    a = Arena(70 * MiB, growable=True)
    a.empty(71 * MiB, np.uint8)                # a second block
    assert a.blocks == 2
    before = rss()
    touched = a.prefault(threads=4)           # three pieces or more: the first block crosses a 64 MiB line
    assert touched >= a.capacity and rss() - before > 0.9 * a.capacity
    for threads in (1, 2, 3, 256):
        assert a.prefault(threads=threads) == touched        # the same pages at any count


def test_arena_prefault_refuses_bad_thread_counts_and_changes_nothing():
    a = Arena(4096)
    x = a.empty(8, np.int64)
    x[:] = 3
    for bad in (0, -1, 257, 1.5, True, "2", None):
        with pytest.raises(ValueError, match="threads must be"):
            a.prefault(threads=bad)
    assert a.used == 64 and a.stats()["allocations"] == 1 and (x == 3).all()
