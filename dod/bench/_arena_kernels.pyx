"""C-timed kernels for the arena section of ``python -m dod.bench``.

The ZII/arena article's workload: one frame = `n` allocations of a 32-byte
record, write two fields in each, release all. Each function runs `frames`
frames and returns nanoseconds per record (or per frame), timed in C around
the whole loop. malloc-family calls go through function pointers so the
compiler cannot pair and delete them (it knows malloc's semantics); a real
program's allocator calls are opaque calls too.
"""
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memset
from cpython.mem cimport PyMem_Malloc, PyMem_Free

from dod.arena cimport (Arena, dod_arena_push, dod_arena_push_zeroed, dod_arena_reset, dod_arena_reset_zeroed,
                        dod_arena_cursor, dod_arena_open, dod_arena_close, dod_cursor_push)
from dod.bench._timing cimport now_ns

ctypedef struct record:
    double x
    double y
    int64_t id
    int64_t flags

ctypedef void* (*malloc_fn)(size_t) noexcept nogil
ctypedef void* (*calloc_fn)(size_t, size_t) noexcept nogil
ctypedef void (*free_fn)(void*) noexcept nogil

cdef malloc_fn c_malloc = malloc
cdef calloc_fn c_calloc = calloc
cdef free_fn c_free = free

# Written once per frame so the stores cannot be proven dead.
cdef extern from *:
    """static volatile double dod_bench_sink;"""
    double sink "dod_bench_sink"


cdef int check(int frames, int n) except -1:
    if frames < 1 or n < 1 or n > (1 << 24):
        raise ValueError("frames and n must be positive (n at most 2**24)")
    return 0


cdef inline void consume(double v) noexcept nogil:
    global sink
    sink = sink + v


def fields_only(int frames, int n):
    """Floor: write the two fields into a preallocated array (no allocation)."""
    check(frames, n)
    cdef record* recs = <record*>malloc(n * sizeof(record))
    cdef int f, i
    cdef double t0, t1
    if recs == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for i in range(n):
                recs[i].x = <double>i
                recs[i].y = <double>(i + f)
            consume(recs[f % n].x)
        t1 = now_ns()
    free(recs)
    return (t1 - t0) / (<double>frames * n)


def frame_arena(Arena owner, int frames, int n, bint zeroed=False):
    """Arena: push n records (aligned 16), write two fields, reset; ns per record."""
    check(frames, n)
    cdef record* r = NULL
    cdef int f, i
    cdef double t0, t1
    owner.reset()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for i in range(n):
                if zeroed:
                    r = <record*>dod_arena_push_zeroed(&owner.engine, sizeof(record), 16)
                else:
                    r = <record*>dod_arena_push(&owner.engine, sizeof(record), 16)
                if r == NULL:
                    break
                r.x = <double>i
                r.y = <double>(i + f)
            if r != NULL:
                consume(r.x)
            dod_arena_reset(&owner.engine)
        t1 = now_ns()
    return (t1 - t0) / (<double>frames * n)

def frame_cursor(Arena owner, int frames, int n, bint zeroed=False):
    """Arena through a cursor (position in registers): ns per record."""
    check(frames, n)
    cdef record* r = NULL
    cdef dod_arena_cursor c
    cdef int f, i
    cdef double t0, t1
    owner.reset()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            c = dod_arena_open(&owner.engine)
            for i in range(n):
                r = <record*>dod_cursor_push(&c, &owner.engine, sizeof(record), 16)
                if r == NULL:
                    break
                if zeroed:
                    memset(r, 0, sizeof(record))
                r.x = <double>i
                r.y = <double>(i + f)
            dod_arena_close(&owner.engine, &c)
            if r != NULL:
                consume(r.x)
            dod_arena_reset(&owner.engine)
        t1 = now_ns()
    return (t1 - t0) / (<double>frames * n)

def frame_cursor_reset_zeroed(Arena owner, int frames, int n):
    """Zero-initialised records without per-record stores: plain cursor pushes
    into memory that dod_arena_reset_zeroed cleared in bulk (ZII); ns per record."""
    check(frames, n)
    cdef record* r = NULL
    cdef dod_arena_cursor c
    cdef int f, i
    cdef double t0, t1
    owner.reset()
    dod_arena_reset_zeroed(&owner.engine)
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            c = dod_arena_open(&owner.engine)
            for i in range(n):
                r = <record*>dod_cursor_push(&c, &owner.engine, sizeof(record), 16)
                if r == NULL:
                    break
                r.x = <double>i
                r.y = <double>(i + f)
            dod_arena_close(&owner.engine, &c)
            if r != NULL:
                consume(r.x + r.id)         # id was never written: it reads the zero
            dod_arena_reset_zeroed(&owner.engine)
        t1 = now_ns()
    return (t1 - t0) / (<double>frames * n)


def frame_malloc(int frames, int n, bint zeroed=False):
    """malloc (or calloc) each record, write two fields, free all; ns per record."""
    check(frames, n)
    cdef record** ptrs = <record**>malloc(n * sizeof(record*))
    cdef record* r
    cdef int f, i
    cdef double t0, t1
    if ptrs == NULL:
        raise MemoryError()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for i in range(n):
                if zeroed:
                    r = <record*>c_calloc(1, sizeof(record))
                else:
                    r = <record*>c_malloc(sizeof(record))
                r.x = <double>i
                r.y = <double>(i + f)
                ptrs[i] = r
            consume(ptrs[f % n].x)
            for i in range(n):
                c_free(ptrs[i])
        t1 = now_ns()
    free(ptrs)
    return (t1 - t0) / (<double>frames * n)


def frame_pymem(int frames, int n):
    """PyMem_Malloc/PyMem_Free (pymalloc; needs the GIL); ns per record."""
    check(frames, n)
    cdef record** ptrs = <record**>malloc(n * sizeof(record*))
    cdef record* r
    cdef int f, i
    cdef double t0, t1
    if ptrs == NULL:
        raise MemoryError()
    t0 = now_ns()
    for f in range(frames):
        for i in range(n):
            r = <record*>PyMem_Malloc(sizeof(record))
            r.x = <double>i
            r.id = i + f
            ptrs[i] = r
        consume(ptrs[f % n].x)
        for i in range(n):
            PyMem_Free(ptrs[i])
    t1 = now_ns()
    free(ptrs)
    return (t1 - t0) / (<double>frames * n)


def soa_arena(Arena owner, int frames, int n, int columns=8):
    """Struct of arrays: push `columns` float64 columns of n (64-byte aligned),
    write every element, reset; ns per frame."""
    check(frames, n)
    if not 1 <= columns <= 64:
        raise ValueError("columns must be in 1..64")
    cdef double* cols[64]
    cdef int f, c, i
    cdef double t0, t1
    owner.reset()
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for c in range(columns):
                cols[c] = <double*>dod_arena_push(&owner.engine, n * sizeof(double), 64)
            for c in range(columns):
                if cols[c] != NULL:
                    for i in range(n):
                        cols[c][i] = <double>(i + c)
            if cols[0] != NULL:
                consume(cols[0][f % n])
            dod_arena_reset(&owner.engine)
        t1 = now_ns()
    return (t1 - t0) / frames


def soa_malloc(int frames, int n, int columns=8):
    """Struct of arrays with malloc/free per column; ns per frame."""
    check(frames, n)
    if not 1 <= columns <= 64:
        raise ValueError("columns must be in 1..64")
    cdef double* cols[64]
    cdef int f, c, i
    cdef double t0, t1
    with nogil:
        t0 = now_ns()
        for f in range(frames):
            for c in range(columns):
                cols[c] = <double*>c_malloc(n * sizeof(double))
            for c in range(columns):
                for i in range(n):
                    cols[c][i] = <double>(i + c)
            consume(cols[0][f % n])
            for c in range(columns):
                c_free(cols[c])
        t1 = now_ns()
    return (t1 - t0) / frames
