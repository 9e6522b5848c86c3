# dod/pool.pxd: the fixed-size pool's engine (C struct + inline nogil
# functions) and its owner class. cimport this to run the engine inlined:
#
# not run: a fragment (p's type and the function around it left out);
# a compiled block of docs/guide/memory.md makes the same calls
#     from dod.pool cimport Pool, dod_pool_acquire, dod_pool_release
#     cdef Pool owner = Pool(100_000, block_size=64)
#     with nogil:
#         p = dod_pool_acquire(&owner.engine)
#         dod_pool_release(&owner.engine, p)
#
# Invariants
#   * A pool is one or more chunks; a fixed pool is exactly one (chunks ==
#     NULL). Slots are numbered across chunks in the order they were
#     obtained: chunk 0 holds slots [0, first_blocks), chunk k >= 1 holds
#     [first_blocks + (k-1) * chunk_blocks, ... + chunk_blocks). The slot
#     index is what a Python handle carries.
#   * base/count/touched describe the current chunk (the one the bump index
#     runs in); prior is the number of slots before it. Blocks of a chunk are
#     base + i * stride for i in [0, count); stride is a multiple of the
#     alignment and at least sizeof(void*). Chunks never move and are given
#     back only when the owner dies.
#   * Chunks before the current one are fully touched; chunks after it are
#     spares (untouched; a reset goes back to chunk 0 and keeps them).
#     Blocks [touched, count) of the current chunk have never been handed
#     out; they are not on the free list (creation costs O(1)).
#   * Every free block among the touched ones is on the intrusive free list:
#     its first pointer-sized word links to the next free block (NULL ends
#     it). A live block carries no bookkeeping at all.
#   * in_use + (free blocks on the list) == prior + touched.
#   * Free blocks are taken before untouched ones, and a growable pool moves
#     to the next chunk only when every block is in use, so prior + touched
#     is the high-water mark of in_use since the last reset: the peak costs
#     nothing to keep (a reset folds it into `peak`).
#   * All bytes zero (ZII) is a valid, empty pool: every acquire fails (NULL).
#
# Growth (opt-in, Pool(..., growable=True)): when the free list is empty and
# the current chunk is fully touched, acquire calls dod_pool_grow, a named
# function in _pool_engine.pyx: it moves to a spare chunk or obtains a whole
# new chunk of chunk_blocks blocks from the pool's resource; acquire then
# bumps its first block. A fixed pool (chunks == NULL) gets NULL from it. The
# slow path is handed `p.chunks`, never `p`: were the engine struct's
# address passed to an opaque function, a caller's local copy of it (the
# fast pattern, see the README) would escape, and every block write would
# force the compiler to reload the free-list head (0.7 -> 1.8 ns a pair).
#
# Engine contract (checks the caller owns on this fast path): a pointer
# passed to release came from acquire on this pool and is live (no double
# release, no foreign pointer); nothing uses a block after releasing it;
# nothing writes into a free block (its first word is the free-list link).
# Debug builds (DOD_BUILD=debug|sanitize) abort with a message on a foreign
# pointer or a double release (the latter walks the free list: O(free)).
# Failure is a NULL return, counted in `failed`.
#
# Thread-safety: the plain functions are for one thread at a time. The
# *_locked variants take the owner's mutex around them; every thread that
# touches a shared pool must use the locked variants.
from dod._core cimport DOD_DEBUG, dod_poison, dod_debug_fail
from dod.atomics cimport dod_mutex, dod_mutex_lock, dod_mutex_unlock
from dod.resource cimport dod_resource, Resource
from dod._ndarray cimport dod_array_request
from dod._lease cimport dod_slots
from libc.stdint cimport uint32_t
# The engine (dod/_pool_engine.pxd: the structs, the inline fast paths, the
# slow paths) and the owner (dod/_pool_owner.pxd): declared there, cimported
# from here.
from dod._pool_engine cimport (dod_pool_chunks, dod_pool, dod_pool_span, dod_pool_grow, dod_pool_add_chunk,
                               dod_pool_reset_chunks, dod_pool_slot_of, dod_pool_acquire, dod_pool_debug_check,
                               dod_pool_release, dod_pool_reset, dod_pool_acquire_locked, dod_pool_release_locked,
                               dod_pool_index, dod_pool_block, dod_pool_capacity, dod_pool_touched)
from dod._pool_owner cimport PoolOwner


# The pool: the owner's memory and engine, with the Python face (dod/pool.pyx).
cdef class Pool(PoolOwner):
    cdef int _grow_for(self, size_t n) noexcept
    cdef Py_ssize_t _pop(self) noexcept
    cdef object _view(self, size_t index)
