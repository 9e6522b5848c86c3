# Timed kernels for the table benchmark section (dod.bench.table) and
# asv_bench/benchmarks/bench_table.py. Every kernel times its whole loop in C
# with clock_gettime and returns nanoseconds; results go through a volatile
# sink so the compiler cannot drop the work.
cimport numpy as cnp
from libc.stdint cimport uint64_t, uint32_t
from libc.stdlib cimport malloc, free

from dod.bench._particles cimport particle, xorshift64, spawn_particle
from dod.bench._timing cimport now_ns
from dod.table cimport (Table, dod_handle, dod_table, dod_table_insert, dod_table_remove,
                        dod_table_remove_row, dod_table_row)

cnp.import_array()

cdef extern from *:
    """
    static volatile double dod_table_bench_sink_d;
    static void *volatile dod_table_bench_sink_p;
    static inline void dod_table_bench_keep_d(double v) { dod_table_bench_sink_d = v; }
    static inline void dod_table_bench_keep_p(void *p) { dod_table_bench_sink_p = p; }
    """
    void keep_d "dod_table_bench_keep_d"(double v) nogil
    void keep_p "dod_table_bench_keep_p"(void* p) nogil


# ---------------------------------------------------------------- column scan

cdef inline float _sum_strided(const char* p, size_t n, size_t stride) noexcept nogil:
    """Sum n floats `stride` bytes apart with 8 independent accumulators (the
    same code for SoA and AoS: only the stride differs)."""
    cdef float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0
    cdef size_t k = 0
    while k + 8 <= n:
        a0 += (<const float*>(p + (k + 0) * stride))[0]
        a1 += (<const float*>(p + (k + 1) * stride))[0]
        a2 += (<const float*>(p + (k + 2) * stride))[0]
        a3 += (<const float*>(p + (k + 3) * stride))[0]
        a4 += (<const float*>(p + (k + 4) * stride))[0]
        a5 += (<const float*>(p + (k + 5) * stride))[0]
        a6 += (<const float*>(p + (k + 6) * stride))[0]
        a7 += (<const float*>(p + (k + 7) * stride))[0]
        k += 8
    while k < n:
        a0 += (<const float*>(p + k * stride))[0]
        k += 1
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


cdef inline float _sum_contiguous(const float* x, size_t n) noexcept nogil:
    cdef float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0
    cdef size_t k = 0
    while k + 8 <= n:
        a0 += x[k]
        a1 += x[k + 1]
        a2 += x[k + 2]
        a3 += x[k + 3]
        a4 += x[k + 4]
        a5 += x[k + 5]
        a6 += x[k + 6]
        a7 += x[k + 7]
        k += 8
    while k < n:
        a0 += x[k]
        k += 1
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


def scan_table(Table owner, Py_ssize_t column, size_t reps):
    """Sum float32 column `column` over the live rows, `reps` times, nogil through
    the engine struct (SoA). Returns (ns for all reps, the last sum)."""
    cdef dod_table* t = &owner.engine
    cdef const float* x = <const float*>t.columns[column]
    cdef size_t r
    cdef float s = 0
    cdef double t0, t1
    with nogil:
        t0 = now_ns()
        for r in range(reps):
            s = _sum_contiguous(x, t.count)
            keep_d(s)
        t1 = now_ns()
    return t1 - t0, s


def scan_structured(cnp.ndarray records, size_t offset, size_t reps):
    """The same sum over field at byte `offset` of a numpy structured array
    (array of structs: one float every itemsize bytes). Returns (ns, sum)."""
    cdef const char* p = <const char*>cnp.PyArray_DATA(records) + offset
    cdef size_t n = <size_t>records.shape[0], stride = <size_t>records.dtype.itemsize, r
    cdef float s = 0
    cdef double t0, t1
    if not records.flags.c_contiguous:
        raise ValueError("records must be C-contiguous")
    with nogil:
        t0 = now_ns()
        for r in range(reps):
            s = _sum_strided(p, n, stride)
            keep_d(s)
        t1 = now_ns()
    return t1 - t0, s


# ---------------------------------------------------------------- particle churn



cdef struct _cols:
    float* x
    float* y
    float* z
    float* vx
    float* vy
    float* vz
    float* age
    uint32_t* flags


cdef inline void _spawn_row(_cols* c, Py_ssize_t row, uint64_t r) noexcept nogil:
    c.x[row] = <float>(r & 0xFF)
    c.y[row] = <float>((r >> 8) & 0xFF)
    c.z[row] = 0.0
    c.vx[row] = 1.0
    c.vy[row] = -1.0
    c.vz[row] = 0.5
    c.age[row] = 0.0
    c.flags[row] = 1


cdef int _columns(Table owner, _cols* c) except -1:
    cdef dod_table* t = &owner.engine
    c.x = <float*>t.columns[owner.column_index("x")]
    c.y = <float*>t.columns[owner.column_index("y")]
    c.z = <float*>t.columns[owner.column_index("z")]
    c.vx = <float*>t.columns[owner.column_index("vx")]
    c.vy = <float*>t.columns[owner.column_index("vy")]
    c.vz = <float*>t.columns[owner.column_index("vz")]
    c.age = <float*>t.columns[owner.column_index("age")]
    c.flags = <uint32_t*>t.columns[owner.column_index("flags")]
    return 0


cdef inline size_t _kill_count(size_t n, size_t live0, size_t born, uint64_t r) noexcept nogil:
    # born +- 50%, plus whatever steers the population back to live0
    cdef long long kk = <long long>n - <long long>live0 - <long long>(born // 2) + <long long>(r % (born + 1))
    return 0 if kk < 0 else (<size_t>kk if <size_t>kk < n else n)


def churn_table(Table owner, size_t live0, size_t frames, size_t born, uint64_t seed, bint by_handle):
    """The pools issue's particle churn on a table: `live0` particles live; per
    frame `born` inserted (all 8 columns written) and about `born` (+-50%)
    removed at random. by_handle: the caller keeps every particle's handle
    (as it would keep pointers) and removes by handle; otherwise a random row
    is removed (a table needs no handle list). Returns (ns for all frames,
    operations, final live count); the initial fill is not timed."""
    cdef dod_table* t = &owner.engine
    cdef _cols c
    cdef size_t cap = live0 + 4 * born + 16
    cdef dod_handle* live = NULL
    cdef size_t n = 0, f, k, kill, ops = 0, j
    cdef uint64_t s = seed | 1, r
    cdef double t0, t1
    cdef dod_handle h
    _columns(owner, &c)
    owner.clear(unchecked=True)
    if t.capacity < cap:
        raise ValueError(f"the table needs capacity >= {cap}")
    live = <dod_handle*>malloc(cap * sizeof(dod_handle))
    if live == NULL:
        raise MemoryError()
    with nogil:
        for k in range(live0):
            h = dod_table_insert(t)
            _spawn_row(&c, <Py_ssize_t>t.count - 1, k)
            live[n] = h
            n += 1
        t0 = now_ns()
        for f in range(frames):
            for k in range(born):
                r = xorshift64(&s)
                h = dod_table_insert(t)
                _spawn_row(&c, <Py_ssize_t>t.count - 1, r)     # a new row is always the last
                live[n] = h
                n += 1
            kill = _kill_count(n, live0, born, xorshift64(&s))
            for k in range(kill):
                j = xorshift64(&s) % n
                if by_handle:
                    dod_table_remove(t, live[j])
                    n -= 1
                    live[j] = live[n]
                else:
                    dod_table_remove_row(t, j)
                    n -= 1
            ops += born + kill
        t1 = now_ns()
        keep_p(live)
    free(live)
    return t1 - t0, ops, t.count


def churn_malloc(size_t live0, size_t frames, size_t born, uint64_t seed):
    """The same churn with one malloc'd 32-byte struct per particle (baseline)."""
    cdef size_t cap = live0 + 4 * born + 16
    cdef particle** live = <particle**>malloc(cap * sizeof(particle*))
    cdef size_t n = 0, f, k, kill, ops = 0, j
    cdef uint64_t s = seed | 1, r
    cdef double t0, t1
    cdef particle* q
    if live == NULL:
        raise MemoryError()
    with nogil:
        for k in range(live0):
            q = <particle*>malloc(sizeof(particle))
            spawn_particle(q, k)
            live[n] = q
            n += 1
        t0 = now_ns()
        for f in range(frames):
            for k in range(born):
                r = xorshift64(&s)
                q = <particle*>malloc(sizeof(particle))
                spawn_particle(q, r)
                live[n] = q
                n += 1
            kill = _kill_count(n, live0, born, xorshift64(&s))
            for k in range(kill):
                j = xorshift64(&s) % n
                q = live[j]
                n -= 1
                live[j] = live[n]
                keep_p(q)
                free(q)
            ops += born + kill
        t1 = now_ns()
        for k in range(n):
            free(live[k])
    free(live)
    return t1 - t0, ops, n
