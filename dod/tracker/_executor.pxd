# dod/tracker/_executor.pxd: how a pass runs over the workers.
#
# A row pass cuts rows [0, T) into chunks once per tick (_chunk_rows) and
# hands them out by affinity (_claims_again, _claim_next): each worker first
# runs the chunks it ran in the tick's previous pass (their rows are in its
# core's cache), then claims the others' from the far end, as dynamic
# scheduling would. Which worker runs a chunk never changes a result: every
# pass writes by chunk, or sums integers. The thresholds for going parallel
# (_split_rows, _split_detections) and the profile's clock and region hooks
# (Tracker.profile) live here too. All inline: no call crosses a module.
from cython.parallel cimport parallel, threadid
from libc.stdint cimport uint32_t, int32_t, int64_t
from libc.string cimport memset, memcpy
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from dod.atomics cimport dod_atomic_load_u32, dod_atomic_exchange_u32
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _tick, _GATE_CHUNKS, _GATE_CHUNKS_PER_THREAD


# ---------------------------------------------------------------- one body, serial or shared

# A pass that splits a range into parts is written once, over a part
# [i0, i1), and specialised at compile time by a sharing policy: _private
# runs it as one part on the calling thread (no region opens) with plain
# memory operations, _shared as parts over the workers with the atomics
# that sharing needs. In a body, `if _sharing is _shared:` picks the
# shared form; the private specialisation compiles to the serial code
# alone. (Tags: only their type is read.)
ctypedef struct _private:
    char tag
ctypedef struct _shared:
    char tag
ctypedef fused _sharing:
    _private
    _shared


cdef inline size_t _parts_of(size_t n, size_t P, size_t* at) noexcept nogil:
    """Cut [0, n) into P parts: part p is [at[p], at[p + 1]). Outside any
    region (a checked division, in debug builds, takes the GIL)."""
    cdef size_t p
    for p in range(P + 1):
        at[p] = n * p // P
    return P


cdef inline size_t _offsets(size_t* n_of, size_t P) noexcept nogil:
    """Counts n_of[0:P] into their prefix (n_of[p]: where part p's items
    go in a packed list); returns the total. The middle step of every
    count, prefix, scatter compaction over parts."""
    cdef size_t p, acc = 0, c
    for p in range(P):
        c = n_of[p]
        n_of[p] = acc
        acc += c
    return acc


cdef enum:
    # detections, times _split_rows, for a parallel _keep_free (and the
    # births' order in parts): below it the parts' hand-off costs more than
    # the serial drop saves (docs/design/threads-and-locality.md, tuning constants)
    _FREE_INDEX_MIN = 4


# ---------------------------------------------------------------- the tick's profile (Tracker.profile)

# The passes of dod_tick_profile, in PASS_NAMES order.
cdef enum:
    _PASS_SETUP = 0         # temporaries, the scan's valid detections (serial tick)
    _PASS_PREDICT = 1       # predict, the detection index, the confirmed tracks' gating
    _PASS_ASSOCIATE = 2     # both stages' association (and the tentative gating), the clutter estimate
    _PASS_UPDATE = 3        # scores, the Kalman update, hits, misses, confirmation
    _PASS_DEATHS = 4        # the removal plan and the row moves
    _PASS_BIRTHS = 5        # the births' order, slots and rows
    _PASS_SORT = 6          # the spatial sort (sort_every)



cdef inline int64_t _clock_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline int64_t _pass_done(dod_tracker* t, int p, int64_t since) noexcept nogil:
    """Profile: add the time since `since` to pass p and return the time
    now, the next pass's start (0, and nothing read, when it is off)."""
    cdef int64_t now
    if not t.profile:
        return 0
    now = _clock_ns()
    t.prof.wall_ns[p] += now - since
    return now


cdef inline int64_t _region_open(dod_tracker* t, int nt) noexcept nogil:
    """Profile: the start of a parallel region of nt threads (0 when off).
    A thread the runtime does not give the region counts as idle in it."""
    cdef int w
    if not t.profile:
        return 0
    for w in range(nt):
        t.worker_in[w] = 0
        t.worker_out[w] = 0
        t.worker_wait[w] = 0
    return _clock_ns()


cdef inline void _worker_in(dod_tracker* t, int w) noexcept nogil:
    if t.profile:
        t.worker_in[w] = _clock_ns()


cdef inline void _worker_out(dod_tracker* t, int w) noexcept nogil:
    if t.profile:
        t.worker_out[w] = _clock_ns()


cdef inline void _region_close(dod_tracker* t, int p, int nt, int64_t opened) noexcept nogil:
    """Profile: the workers' idle time in the region opened at `opened`, into pass p."""
    cdef int64_t idle
    cdef int w
    if not t.profile:
        return
    idle = <int64_t>nt * (_clock_ns() - opened)
    for w in range(nt):
        idle -= t.worker_out[w] - t.worker_in[w] - t.worker_wait[w]
    t.prof.idle_ns[p] += idle


cdef inline size_t _split_rows(const dod_tracker* t) noexcept nogil:
    """Rows' worth of work from which the tick's bookkeeping passes (the
    index's drop of the taken detections, the births' order, confirmed_first's
    swaps) run over the workers: two workers' parallel_min_rows, whatever
    the thread count. They split into _TAIL_CHUNKS parts, not chunks of
    parallel_min_rows rows as the row passes, and with more workers a
    serial pass keeps more of them waiting, so the threshold does not grow
    with the thread count (docs/design/threads-and-locality.md)."""
    return 2 * t.min_rows


cdef inline size_t _split_detections(const dod_tracker* t) noexcept nogil:
    """Detections from which the passes over the index (its drop of the
    taken ones, the births' order read off it) run in parts over the
    workers: _FREE_INDEX_MIN times _split_rows."""
    return _split_rows(t) * _FREE_INDEX_MIN


cdef inline void _chunk_rows(_tick* k, size_t T, int nt, size_t min_rows, bint par) noexcept nogil:
    """Cut rows [0, T) into k.row_chunks chunks of k.chunk_rows rows (at
    least min_rows, about _GATE_CHUNKS_PER_THREAD per worker, at most
    _GATE_CHUNKS chunks; past 64 rows a multiple of 64, so that a byte
    column's cache line never spans two chunks) for the parallel passes
    over the workers, and give worker w the w-th of nt contiguous ranges
    of them for the first pass (_claim_next); serially (not `par`), one
    chunk of every row. Once per tick, before any
    parallel region, so that no region's body can raise (a body that can,
    e.g. a checked division in the debug build, makes every worker take
    the GIL and a thread state at the region's start)."""
    cdef size_t ch
    cdef size_t nch = min(<size_t>_GATE_CHUNKS, <size_t>nt * _GATE_CHUNKS_PER_THREAD)
    if not par:                 # a serial tick: one chunk of every row
        k.chunk_rows = max(<size_t>1, T)
        k.row_chunks = T > 0
        k.ran[0] = 0
        return
    k.chunk_rows = max(<size_t>1, max(min_rows, (T + nch - 1) // nch))
    if k.chunk_rows > 64:       # (smaller: only with parallel_min_rows < 64, e.g. the tests' small scenes)
        k.chunk_rows = (k.chunk_rows + 63) // 64 * 64
    k.row_chunks = (T + k.chunk_rows - 1) // k.chunk_rows
    for ch in range(k.row_chunks):      # the first pass's owners: contiguous ranges
        k.ran[ch] = <int32_t>(ch * <size_t>nt // k.row_chunks)


# Which worker runs which chunk. A parallel pass over the rows hands its
# chunks out by affinity: each worker first runs, in row order, the chunks
# it ran in the tick's previous pass (their rows are in its core's cache:
# predict wrote the state, covariance, inverse and gate that gating, the
# update and the deaths' moves touch next), then claims the others' from
# the far end, as dynamic scheduling would (a slow or preempted worker
# does not hold the pass up). Before the first pass of a tick, worker w
# "ran" the w-th of nt contiguous ranges of chunks (_chunk_rows).
# Plain dynamic scheduling lands a chunk on whichever core is free, away
# from its rows' cache, and measured slower (docs/design/threads-and-locality.md).
# Which worker runs a chunk never changes a result: every pass writes by
# chunk, or sums integers.

cdef inline void _claims_again(_tick* k, size_t n) noexcept nogil:
    """Open a pass of n chunks, each owned by the worker that ran it last."""
    memcpy(k.owner, k.ran, n * sizeof(int32_t))
    memset(k.taken, 0, n * sizeof(uint32_t))


cdef inline Py_ssize_t _claim_next(_tick* k, size_t n, int w, size_t* own, size_t* far) noexcept nogil:
    """The next chunk for worker w (-1: none left): its own in order, then
    anyone's from the end. `own` and `far` are w's cursors, 0 at the start
    of the pass."""
    cdef size_t ch
    while own[0] < n:
        ch = own[0]
        own[0] += 1
        if k.owner[ch] == w and dod_atomic_load_u32(&k.taken[ch]) == 0 \
                and dod_atomic_exchange_u32(&k.taken[ch], 1) == 0:
            k.ran[ch] = w
            return <Py_ssize_t>ch
    while far[0] < n:
        ch = n - 1 - far[0]
        far[0] += 1
        if dod_atomic_load_u32(&k.taken[ch]) == 0 and dod_atomic_exchange_u32(&k.taken[ch], 1) == 0:
            k.ran[ch] = w
            return <Py_ssize_t>ch
    return -1


# A pass over claimed chunks: the one skeleton of every row pass. Each
# worker runs enter(w), then the chunks it claims (kernel(item, w)), then
# leave(w); NULL hooks are skipped. Serially (par false) the calling thread
# is worker 0 and runs the same three in order, every item, and no region
# opens: the serial tick is the same kernels over the same items (a serial
# tick cuts its rows into one chunk: _chunk_rows).
ctypedef void (*_worker_hook)(dod_tracker* t, _tick* k, int w) noexcept nogil
ctypedef void (*_chunk_kernel)(dod_tracker* t, _tick* k, size_t item, int w) noexcept nogil


cdef inline void _run_chunks(dod_tracker* t, _tick* k, bint par, int pass_id, size_t items,
                             _worker_hook enter, _chunk_kernel kernel, _worker_hook leave) noexcept nogil:
    """Run kernel over items [0, items), each once, with `par` over the
    workers (claimed by affinity, _claim_next; the profile's region for
    pass_id), else in order on the calling thread."""
    cdef int nt = t.threads, w
    cdef size_t own, far, i
    cdef Py_ssize_t ch
    cdef int64_t opened
    if not par:
        if enter != NULL:
            enter(t, k, 0)
        for i in range(items):
            kernel(t, k, i, 0)
        if leave != NULL:
            leave(t, k, 0)
        return
    _claims_again(k, items)
    opened = _region_open(t, nt)
    with parallel(num_threads=nt):
        w = threadid()
        _worker_in(t, w)
        if enter != NULL:
            enter(t, k, w)
        own = 0
        far = 0
        ch = _claim_next(k, items, w, &own, &far)
        while ch >= 0:
            kernel(t, k, <size_t>ch, w)
            ch = _claim_next(k, items, w, &own, &far)
        if leave != NULL:
            leave(t, k, w)
        _worker_out(t, w)
    _region_close(t, pass_id, nt, opened)
