# dod/_atomic_arena_engine.pxd: the atomic arena's engine (internal): its
# constants, the block header and arena structs, and the inline nogil
# functions that call no slow path. dod/atomic_arena.pxd re-exports every
# name, and its header states the word, the overshoot envelope, the
# invariants and the contract the caller owns: cimport them from
# dod.atomic_arena. dod._atomic_arena_blocks works on these alone, below
# dod.atomic_arena.
from libc.stdint cimport uint64_t, uint32_t, uintptr_t

from dod.atomics cimport dod_mutex
from dod.resource cimport dod_resource


cdef enum:
    DOD_AA_POS_BITS = 55
    DOD_AA_FACTOR_SHIFT = 55
    DOD_AA_INDEX_SHIFT = 57
    DOD_AA_MAX_BLOCKS = 128
    DOD_AA_HEADER = 64          # bytes of the block header (usable bytes start here)
    DOD_AA_QUANTUM = 16         # reservations are multiples of this
    DOD_AA_MAX_ALIGN = 4096

cdef extern from *:
    """
    #define DOD_AA_POS_MASK ((((uint64_t)1) << 55) - 1)
    #define DOD_AA_CLOSED (((uint64_t)1) << 54)
    #define DOD_AA_BIAS (((uint64_t)1) << 62)
    """
    const uint64_t DOD_AA_POS_MASK
    const uint64_t DOD_AA_CLOSED
    const uint64_t DOD_AA_BIAS


cdef struct dod_aa_block:
    uint64_t live              # BIAS - freed (+ handed_out - BIAS once closed); atomic
    char* base                 # first usable byte (header + 64)
    size_t capacity            # usable bytes: (block_size << factor) - 64
    size_t total               # bytes obtained from the resource
    uint32_t index             # slot in blocks[]
    uint32_t factor            # size factor of this block
    dod_aa_block* next_spare   # spare (drained) list link, under lock
    size_t generation          # times this block was installed
    char _pad[8]


ctypedef struct dod_aa:
    uint64_t word                         # THE shared word (alone on its cache line)
    char _pad0[56]
    size_t block_size                     # bytes of a factor-0 block (power of two)
    size_t block_align                    # block_size << 3: alignment of every block
    size_t max_need                       # largest reservation: (block_size << 3) - 64
    size_t max_entrants                   # the overshoot envelope (power of two)
    const dod_resource* upstream          # where blocks come from
    bint evict                            # drained blocks go back to upstream (else: spares)
    dod_mutex lock                        # slow path: install, drain, statistics
    dod_aa_block* blocks[128]             # slots; published with a release store
    uintptr_t slot_base[128]              # copies for the ownership query (no header reads)
    uintptr_t slot_end[128]
    dod_aa_block* spares                  # drained blocks ready to be installed again
    size_t peak_capacity                  # most usable bytes held in blocks at once
    uint64_t installs                       # words stored by the slow path
    uint64_t drained                        # blocks whose counter reached zero
    uint64_t recycled                       # installs that reused a spare
    uint64_t evicted                        # drained blocks given back to upstream
    uint64_t failed                         # requests refused (too big, no slot, no memory)
    uint64_t created                        # blocks obtained from upstream


cdef inline size_t dod_aa_need(size_t size, size_t alignment) noexcept nogil:
    """Bytes a request reserves: size rounded up to 16 (at least 16), plus alignment slack."""
    cdef size_t n
    if size > (<size_t>1 << 60):
        return <size_t>-1           # absurd: refused by max_need
    n = (size + (DOD_AA_QUANTUM - 1)) & ~(<size_t>DOD_AA_QUANTUM - 1)
    if n == 0:
        n = DOD_AA_QUANTUM
    if alignment > DOD_AA_QUANTUM:
        n += alignment - DOD_AA_QUANTUM
    return n


cdef inline dod_aa_block* dod_aa_block_of(const dod_aa* a, const void* p) noexcept nogil:
    """The header of the block holding p (p from this arena): one mask."""
    return <dod_aa_block*>(<uintptr_t>p & ~(<uintptr_t>a.block_align - 1))
