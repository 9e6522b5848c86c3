# dod/_atomic_arena_blocks.pxd: the atomic arena's block table (internal):
# installing the next block under the lock, and the walks over the slots that
# the owner's statistics and check() read. dod/atomic_arena.pxd states the
# word, the blocks and their invariants; these work on that struct alone
# (dod/_atomic_arena_engine.pxd), so that dod.atomic_arena imports this
# module and not the reverse.
from libc.stdint cimport uint64_t

from dod.atomics cimport dod_atomic_store_ptr
from dod._atomic_arena_engine cimport dod_aa, dod_aa_block, DOD_AA_FACTOR_SHIFT, DOD_AA_HEADER
from dod.resource cimport dod_resource_deallocate


cdef inline size_t _cap_of(const dod_aa* a, uint64_t w) noexcept nogil:
    """Usable bytes of the block that word `w` points at (its size factor)."""
    return (a.block_size << ((w >> DOD_AA_FACTOR_SHIFT) & 3)) - DOD_AA_HEADER


cdef inline void _evict(dod_aa* a, dod_aa_block* b) noexcept nogil:
    """Under the lock: empty b's slot and give the block back to the resource."""
    cdef size_t idx = b.index
    dod_atomic_store_ptr(<void**>&a.blocks[idx], NULL)
    a.slot_base[idx] = 0
    a.slot_end[idx] = 0
    a.evicted += 1
    dod_resource_deallocate(a.upstream, b, b.total, a.block_align)


cdef bint _install(dod_aa* a, size_t need) noexcept nogil
cdef dict _walk(dod_aa* a)
cdef dict _block_counters(dod_aa* a)
