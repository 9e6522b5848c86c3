"""The atomic arena's block table (internal; see _atomic_arena_blocks.pxd).

The slow path's install (a spare block, or a new one from the resource,
made current with one store of the word) and the walks over the 128 slots
that :class:`dod.atomic_arena.AtomicArena` reports from (its statistics,
``block_counters()`` and ``check()``). All of them take the arena's lock.
"""
from libc.stdint cimport uint64_t, uintptr_t

from dod.atomics cimport (dod_mutex_lock, dod_mutex_unlock, dod_atomic_load_u64, dod_atomic_store_u64,
                          dod_atomic_store_ptr, dod_atomic_load_relaxed_u64)
from dod._atomic_arena_engine cimport (dod_aa_block, DOD_AA_MAX_BLOCKS, DOD_AA_INDEX_SHIFT, DOD_AA_POS_MASK,
                                      DOD_AA_CLOSED, DOD_AA_BIAS)
from dod.resource cimport dod_resource_allocate, dod_resource_deallocate


cdef bint _install(dod_aa* a, size_t need) noexcept nogil:
    """Under the lock: install a block with room for `need` (a spare or a new one)."""
    cdef uint64_t f = 0
    cdef dod_aa_block* b
    cdef dod_aa_block** link
    cdef size_t i, idx, total, capacity
    cdef char* mem
    while (a.block_size << f) - DOD_AA_HEADER < need:
        f += 1
    link = &a.spares
    b = NULL
    while link[0] != NULL:
        if link[0].factor >= f:
            b = link[0]
            link[0] = b.next_spare
            b.next_spare = NULL
            a.recycled += 1
            break
        link = &link[0].next_spare
    if b == NULL:
        idx = DOD_AA_MAX_BLOCKS
        for i in range(DOD_AA_MAX_BLOCKS):
            if a.blocks[i] == NULL:
                idx = i
                break
        if idx == DOD_AA_MAX_BLOCKS and a.spares != NULL:
            # Every slot is taken but a spare too small for this request is
            # idle: give it back and take its slot.
            b = a.spares
            a.spares = b.next_spare
            idx = b.index
            _evict(a, b)
            b = NULL
        if idx == DOD_AA_MAX_BLOCKS:
            return False
        total = a.block_size << f
        mem = <char*>dod_resource_allocate(a.upstream, total, a.block_align)
        if mem == NULL:
            return False
        if (<uintptr_t>mem & (a.block_align - 1)) != 0:     # a resource that ignored the alignment
            dod_resource_deallocate(a.upstream, mem, total, a.block_align)
            return False
        b = <dod_aa_block*>mem
        b.base = mem + DOD_AA_HEADER
        b.capacity = total - DOD_AA_HEADER
        b.total = total
        b.index = <unsigned int>idx
        b.factor = <unsigned int>f
        b.next_spare = NULL
        b.generation = 0
        a.slot_base[idx] = <uintptr_t>b.base
        a.slot_end[idx] = <uintptr_t>b.base + b.capacity
        dod_atomic_store_ptr(<void**>&a.blocks[idx], b)
        a.created += 1
        capacity = 0
        for i in range(DOD_AA_MAX_BLOCKS):
            if a.blocks[i] != NULL:
                capacity += a.blocks[i].capacity
        if capacity > a.peak_capacity:
            a.peak_capacity = capacity
    b.generation += 1
    dod_atomic_store_u64(&b.live, DOD_AA_BIAS)
    a.installs += 1
    # The one store that moves every thread to the new block; it overwrites
    # the failed adds of threads still on the old word (they all retry).
    dod_atomic_store_u64(&a.word, (<uint64_t>b.index << DOD_AA_INDEX_SHIFT)
                         | (<uint64_t>b.factor << DOD_AA_FACTOR_SHIFT))
    return True


cdef dict _walk(dod_aa* a):
    """Statistics and invariant checks from one pass over the slots, under the lock."""
    cdef size_t i, n_blocks = 0, capacity = 0, spares = 0
    cdef uint64_t w, live, handed, in_use = 0
    cdef dod_aa_block* b
    cdef list problems = []
    with nogil:
        dod_mutex_lock(&a.lock)
    try:
        w = dod_atomic_load_u64(&a.word)
        for i in range(DOD_AA_MAX_BLOCKS):
            b = a.blocks[i]
            if b == NULL:
                if a.slot_base[i] != 0:
                    problems.append(f"slot {i} is empty but has an address range")
                continue
            n_blocks += 1
            capacity += b.capacity
            if b.index != i:
                problems.append(f"block in slot {i} says index {b.index}")
            if <uintptr_t>b & (a.block_align - 1):
                problems.append(f"block {i} is not aligned to {a.block_align}")
            if b.total != a.block_size << b.factor or b.capacity != b.total - DOD_AA_HEADER:
                problems.append(f"block {i} has inconsistent sizes")
            if b.base != <char*>b + DOD_AA_HEADER:
                problems.append(f"block {i} base is not 64 bytes after its header")
            live = dod_atomic_load_relaxed_u64(&b.live)
            if (w >> DOD_AA_INDEX_SHIFT) == i and (w & DOD_AA_POS_MASK) <= b.capacity \
                    and (w & DOD_AA_POS_MASK) < DOD_AA_CLOSED:
                handed = w & DOD_AA_POS_MASK           # the open block: live = BIAS - freed
                in_use += handed - (DOD_AA_BIAS - live)
            elif live < DOD_AA_BIAS // 2:
                in_use += live                          # closed: live = handed - freed
            else:
                problems.append(f"closed block {i} was never settled (live = BIAS - {DOD_AA_BIAS - live})")
        b = a.spares
        while b != NULL:
            spares += 1
            if b.live != 0:
                problems.append(f"spare block {b.index} has live = {b.live}")
            b = b.next_spare
    finally:
        dod_mutex_unlock(&a.lock)
    return {"blocks": n_blocks, "capacity": capacity, "in_use": in_use, "spares": spares,
            "problems": problems}


cdef dict _block_counters(dod_aa* a):
    """Live bytes per block held, under the lock (AtomicArena.block_counters)."""
    cdef size_t i
    cdef uint64_t w, live
    cdef dod_aa_block* b
    out = {}
    with nogil:
        dod_mutex_lock(&a.lock)
    w = dod_atomic_load_u64(&a.word)
    for i in range(DOD_AA_MAX_BLOCKS):
        b = a.blocks[i]
        if b == NULL:
            continue
        live = dod_atomic_load_relaxed_u64(&b.live)
        if (w >> DOD_AA_INDEX_SHIFT) == i and (w & DOD_AA_POS_MASK) <= b.capacity:
            live = (w & DOD_AA_POS_MASK) - (DOD_AA_BIAS - live)
        out[i] = live
    dod_mutex_unlock(&a.lock)
    return out
