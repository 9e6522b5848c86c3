# dod/_ring_engine.pxd: the ring's engine (internal): its codes, the slot
# header and ring structs, and the inline nogil functions that neither wait
# nor wake. dod/ring.pxd re-exports every name, and its header states the
# invariants and the contract the caller owns on these functions: cimport
# them from dod.ring. dod._ring_wait works on these alone, below dod.ring.
from libc.stdint cimport uint32_t, uint64_t, int64_t

from dod.atomics cimport dod_atomic_load_u64


cdef enum:
    DOD_RING_OK = 0
    DOD_RING_TIMEOUT = 1        # nothing within the timeout (0: a try)
    DOD_RING_CLOSED = 2         # writer: the ring is closed; reader: end of stream
    DOD_RING_INTERRUPTED = 3    # a signal woke the wait (time left: wait again)
    DOD_RING_HEADER = 64        # bytes of dod_ring_slot before the rows


ctypedef struct dod_ring_slot:
    uint64_t seq                # set by commit: the slot's number in the stream, from 0
    uint64_t count              # rows filled (<= max_rows)
    double time                 # timestamp (seconds, the producer's clock)
    double dt                   # time step (seconds)
    int64_t tag                 # free for the pipeline (sensor id, flags)
    uint64_t reserved[3]


ctypedef struct dod_ring:
    char _front[128]            # keeps the owner's other fields off the producer's line
    # producer's line
    uint64_t head               # slots committed
    uint64_t tail_seen          # the producer's last look at tail
    size_t widx                 # head % nslots
    uint64_t write_waits        # acquire_write calls that found the ring full
    uint64_t write_failed       # acquire_write calls that timed out or found it closed
    char _pad_producer[88]
    # consumer's line
    uint64_t tail               # slots released
    uint64_t head_seen          # the consumer's last look at head
    size_t ridx                 # tail % nslots
    uint64_t read_waits         # acquire_read calls that found the ring empty
    uint64_t read_failed        # acquire_read calls that timed out (end of stream is not a failure)
    char _pad_consumer[88]
    # waiting (slow path only)
    uint32_t epoch              # futex word: bumped on every wake
    uint32_t wait_write         # 1: the producer is (about to be) asleep on a full ring
    uint32_t wait_read          # 1: the consumer is (about to be) asleep on an empty ring
    uint32_t _spare
    uint64_t closed             # 1 after dod_ring_close
    char _pad_wait[104]
    # read-only after construction
    char* base                  # slot 0
    size_t stride               # bytes from one slot to the next (multiple of 64)
    size_t nslots
    size_t max_rows
    size_t row_bytes


cdef inline dod_ring_slot* dod_ring_slot_at(const dod_ring* r, size_t index) noexcept nogil:
    return <dod_ring_slot*>(r.base + index * r.stride)


cdef inline void* dod_ring_rows(dod_ring_slot* s) noexcept nogil:
    """The slot's rows: max_rows * row_bytes bytes, 64-byte aligned."""
    return <char*>s + DOD_RING_HEADER


cdef inline dod_ring_slot* dod_ring_try_write(dod_ring* r) noexcept nogil:
    """Producer: the next free slot, or NULL when the ring is full or closed."""
    if r.head - r.tail_seen >= r.nslots:
        r.tail_seen = dod_atomic_load_u64(&r.tail)
        if r.head - r.tail_seen >= r.nslots:
            return NULL
    if dod_atomic_load_u64(&r.closed):
        return NULL
    return dod_ring_slot_at(r, r.widx)


cdef inline dod_ring_slot* dod_ring_try_read(dod_ring* r) noexcept nogil:
    """Consumer: the oldest committed slot, or NULL when there is none."""
    if r.tail == r.head_seen:
        r.head_seen = dod_atomic_load_u64(&r.head)
        if r.tail == r.head_seen:
            return NULL
    return dod_ring_slot_at(r, r.ridx)
