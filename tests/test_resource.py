"""dod.resource: the one allocator interface, and allocators composed through it."""
import gc

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dod.resource
from dod.arena import Arena
from dod.freelist import FreeList
from dod.pool import Pool
from dod.resource import Resource


def addr(a):
    return a.__array_interface__["data"][0]


def test_resources_cannot_be_made_from_python():
    with pytest.raises(TypeError):
        Resource()


def test_every_allocator_presents_a_resource():
    arena, pool, fl = Arena(1 << 16), Pool(8, block_size=64), FreeList(1 << 16)
    for owner, name in ((arena, "arena"), (pool, "pool"), (fl, "freelist")):
        r = owner.resource()
        assert isinstance(r, Resource) and r.name == name
        assert "dod_resource" in repr(r.capsule())


def test_pool_carved_from_an_arena():
    arena = Arena(1 << 16)
    pool = Pool(100, np.float64, (4,), resource=arena.resource())
    assert arena.used >= 100 * 32
    hs = [pool.acquire() for _ in range(100)]
    base = addr(pool.as_array())
    assert base % 64 == 0
    with pytest.raises(BufferError):
        arena.reset()                 # the pool's region came through the arena's resource
    del hs, pool
    gc.collect()
    arena.reset()


def test_freelist_carved_from_an_arena_and_a_pool():
    arena = Arena(1 << 16)
    fl = FreeList(4096, resource=arena.resource())
    a = fl.alloc(100, np.int32)
    a[:] = 3
    assert a.sum() == 300
    pool = Pool(4, block_size=4096)
    fl2 = FreeList(4096, resource=pool.resource())
    assert pool.in_use == 1
    b = fl2.alloc(10)
    del b, fl2
    gc.collect()
    assert pool.in_use == 0           # the free list gave its region back on dealloc


def test_pool_resource_refuses_what_does_not_fit():
    pool = Pool(2, block_size=64, align=64)
    with pytest.raises(MemoryError):
        FreeList(4096, resource=pool.resource())         # larger than a block
    with pytest.raises(MemoryError):
        Arena(1024, resource=pool.resource())
    a = Arena(64, resource=pool.resource())              # fits a block exactly
    assert pool.in_use == 1
    x = a.empty(8, np.float64)
    x[:] = 1
    del x, a
    gc.collect()
    assert pool.in_use == 0
    assert pool.failed == 2


def test_resource_keeps_its_allocator_alive():
    pool = Pool(4, block_size=256)
    r = pool.resource()
    del pool
    gc.collect()
    fl = FreeList(200, resource=r)
    assert fl.alloc(10, np.uint8).nbytes == 10
    assert r.owner is not None


def test_exhausted_upstream_is_memory_error_and_no_change():
    arena = Arena(1024)
    with pytest.raises(MemoryError):
        Pool(1000, np.float64, resource=arena.resource())
    with pytest.raises(MemoryError):
        FreeList(1 << 20, resource=arena.resource())
    assert arena.failed == 2


@given(sizes=st.lists(st.integers(1, 200), min_size=1, max_size=30))
def test_builtin_resources_back_every_allocator(sizes):
    for res in (dod.resource.pages, dod.resource.malloc):
        fl = FreeList(1 << 14, strategy="best", resource=res)
        arrs = []
        for n in sizes:
            try:
                arrs.append(fl.alloc(n, np.uint8))
            except MemoryError:
                break
        fl.check()
        del arrs
        assert fl.used == 0
        pool = Pool(len(sizes), np.int16, (3,), resource=res)
        hs = [pool.acquire() for _ in sizes]
        assert len(set(hs)) == len(sizes)


RESOURCE_CIMPORT = r"""
# cython: language_level=3
from libc.stdint cimport uintptr_t
from dod.resource cimport Resource, dod_resource_allocate, dod_resource_deallocate

def roundtrip(Resource r, size_t size, size_t alignment, size_t n):
    '''n allocations through the interface: returns (got, misaligned), then frees all.'''
    cdef void* ps[64]
    cdef size_t i, got = 0, misaligned = 0
    with nogil:
        for i in range(n):
            ps[i] = dod_resource_allocate(&r.resource, size, alignment)
            if ps[i] != NULL:
                got += 1
                if (<uintptr_t>ps[i]) % alignment:
                    misaligned += 1
                (<char*>ps[i])[size - 1] = 7
        for i in range(n):
            dod_resource_deallocate(&r.resource, ps[i], size, alignment)
    return got, misaligned
"""


def test_cimport_through_the_interface(compile_cython):
    mod = compile_cython(RESOURCE_CIMPORT, "dod_resource_cimport_mod")
    pool = Pool(10, block_size=48)
    assert mod.roundtrip(pool.resource(), 48, 16, 12) == (10, 0)
    assert pool.in_use == 0 and pool.failed == 2
    assert mod.roundtrip(pool.resource(), 49, 16, 3) == (0, 0)      # too big for a block
    fl = FreeList(1 << 14)
    assert mod.roundtrip(fl.resource(), 100, 64, 40) == (40, 0)
    assert fl.live == 0 and fl.free_blocks == 1
    fl.check()
    arena = Arena(4096)
    r = arena.resource()
    assert mod.roundtrip(r, 100, 32, 64)[1] == 0
    assert mod.roundtrip(dod.resource.malloc, 1000, 256, 8) == (8, 0)
    assert mod.roundtrip(dod.resource.pages, 5000, 8192, 2) == (2, 0)
