# dod/tracker/grid.pxd: the tracker's spatial index, a uniform grid of cubic
# cells hashed into buckets (counting sort), built once per scan over the
# detections and queried with each track's gate box. Inline nogil functions
# on a plain struct; the arrays come from the caller (the tick's scratch).
#
#     from dod.tracker.grid cimport dod_grid, dod_grid_build, dod_grid_cell_of, ...
#     dod_grid_build(&g, points, n, dim)            # g.h, g.nb and the arrays set
#     b = dod_grid_bucket(&g, cx, cy, cz)
#     for s in range(g.bucket[b], g.bucket[b + 1]):
#         if dod_grid_holds(&g, s, cx, cy, cz):     # other cells share the bucket
#             ... point g.order[s] lies in cell (cx, cy, cz)
#
# Layout: points are n rows of dim (2 or 3) doubles; a 2-D point lives in
# cell z = 0. Cell coordinates are floor(v / h), clamped to +-2**40 so that
# any finite value (and +-inf) has a cell. bucket[b] .. bucket[b + 1] are the
# positions in `order` of the points hashed to bucket b; scell[3 s ..] is the
# cell of point order[s] and spos[dim s ..] its coordinates, kept beside
# `order` so a query reads memory in order, not the points at random.
#
# Locality: a query reads bucket, scell and spos of one bucket in order,
# never the points array at random. (Buckets in Z-order of the cells were
# tried with the track rows sorted in Z-order, issue 12: at 1,000 targets
# the dearer bucket function cost 15-20 % and nothing was gained at 10k or
# 100k on the 2-core development machine, so the bucket stays a hash.)
#
# Contract (checks the caller owns): nb is a power of two;
# cell and scell hold 3 n int64, spos dim n doubles, order n uint32, bucket
# nb + 1 uint32; h > 0 and finite.
# Thread-safety: build is one writer; queries of a built grid only read.
from libc.math cimport floor
from libc.stdint cimport uint32_t, uint64_t, int64_t
from libc.string cimport memset, memcpy


ctypedef struct dod_grid:
    int64_t* cell           # [n, 3] cell of each point
    uint32_t* bucket        # [nb + 1] start of each hash bucket in `order`
    uint32_t* order         # [n] points sorted by bucket
    int64_t* scell          # [n, 3] cell of order[s]
    double* spos            # [n, dim] coordinates of order[s]
    size_t n                # points indexed
    size_t nb               # buckets (power of two)
    double h                # cell side


cdef inline int64_t dod_grid_cell_of(double v, double h) noexcept nogil:
    """Cell coordinate of value v for cell side h, clamped to +-2**40."""
    cdef double limit = 1099511627776.0
    cdef double c = floor(v / h)
    if c > limit:
        c = limit
    if c < -limit:
        c = -limit
    return <int64_t>c


cdef inline size_t dod_grid_bucket(const dod_grid* g, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """Hash bucket of cell (a, b, c)."""
    cdef uint64_t h = (<uint64_t>a * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t>b * 0xC2B2AE3D27D4EB4FULL) \
        ^ (<uint64_t>c * 0x165667B19E3779F9ULL)
    h ^= h >> 29
    return <size_t>(h & (g.nb - 1))


cdef inline bint dod_grid_holds(const dod_grid* g, size_t s, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """True when point order[s] lies in cell (a, b, c) (buckets mix cells)."""
    return g.scell[s * 3] == a and g.scell[s * 3 + 1] == b and g.scell[s * 3 + 2] == c


cdef inline void dod_grid_build(dod_grid* g, const double* points, size_t n, int dim) noexcept nogil:
    """Index n points (counting sort into the buckets); g.h, g.nb and the
    arrays are set by the caller."""
    cdef size_t j, b, acc, c
    cdef int a
    g.n = n
    memset(g.bucket, 0, (g.nb + 1) * sizeof(uint32_t))
    for j in range(n):
        for a in range(3):
            g.cell[j * 3 + a] = dod_grid_cell_of(points[j * dim + a], g.h) if a < dim else 0
        b = dod_grid_bucket(g, g.cell[j * 3], g.cell[j * 3 + 1], g.cell[j * 3 + 2])
        g.bucket[b + 1] += 1
    acc = 0
    for b in range(g.nb + 1):
        acc += g.bucket[b]
        g.bucket[b] = <uint32_t>acc
    # bucket[b] is now the end of bucket b-1 == start of bucket b; fill using
    # bucket[b] as a cursor, then restore starts by shifting.
    for j in range(n):
        b = dod_grid_bucket(g, g.cell[j * 3], g.cell[j * 3 + 1], g.cell[j * 3 + 2])
        g.order[g.bucket[b]] = <uint32_t>j
        g.bucket[b] += 1
    for j in range(n):
        memcpy(g.scell + j * 3, g.cell + <size_t>g.order[j] * 3, 3 * sizeof(int64_t))
        memcpy(g.spos + j * dim, points + <size_t>g.order[j] * dim, dim * sizeof(double))
    # now bucket[b] == end of bucket b; start of b is bucket[b-1] (0 for b = 0)
    c = g.nb
    while c > 0:
        g.bucket[c] = g.bucket[c - 1]
        c -= 1
    g.bucket[0] = 0
