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
# Locality: the bucket of a cell is the Morton (Z-order) code of the low bits
# of its coordinates (the cells of one block of 2**k per axis, k =
# log2(nb) / dim, fill the buckets in Z-order), XORed with a hash of the
# block, so that blocks far apart do not collide on one pattern (a scene
# along a line). Queries from tracks in Z-order (the tracker sorts its rows
# so) then walk the buckets and the points nearly in order.
#
# Contract (checks the caller owns): nb is a power of two (at most 2**30);
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
    int kbits               # low bits per axis in the Z-order part of the bucket (set by build)
    int dim                 # 2 or 3 (set by build)


cdef inline int64_t dod_grid_cell_of(double v, double h) noexcept nogil:
    """Cell coordinate of value v for cell side h, clamped to +-2**40."""
    cdef double limit = 1099511627776.0
    cdef double c = floor(v / h)
    if c > limit:
        c = limit
    if c < -limit:
        c = -limit
    return <int64_t>c


cdef inline uint64_t _dod_grid_spread(uint64_t v, int dim) noexcept nogil:
    """The low bits of v moved to every dim-th bit: 16 bits for dim 2, 10 for 3."""
    if dim == 2:
        v &= 0xFFFFu
        v = (v | (v << 8)) & 0x00FF00FFu
        v = (v | (v << 4)) & 0x0F0F0F0Fu
        v = (v | (v << 2)) & 0x33333333u
        return (v | (v << 1)) & 0x55555555u
    v &= 0x3FFu
    v = (v | (v << 16)) & 0x030000FFu
    v = (v | (v << 8)) & 0x0300F00Fu
    v = (v | (v << 4)) & 0x030C30C3u
    return (v | (v << 2)) & 0x09249249u


cdef inline size_t dod_grid_bucket(const dod_grid* g, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """Bucket of cell (a, b, c): Z-order of the low kbits of each
    coordinate, XOR a hash of the block the cell is in."""
    cdef int k = g.kbits
    cdef uint64_t lowmask = (<uint64_t>1 << k) - 1
    cdef uint64_t z, h
    z = _dod_grid_spread(<uint64_t>a & lowmask, g.dim) | (_dod_grid_spread(<uint64_t>b & lowmask, g.dim) << 1)
    if g.dim == 3:
        z |= _dod_grid_spread(<uint64_t>c & lowmask, 3) << 2
    h = (<uint64_t>(a >> k) * 0x9E3779B97F4A7C15ULL) ^ (<uint64_t>(b >> k) * 0xC2B2AE3D27D4EB4FULL) \
        ^ (<uint64_t>(c >> k) * 0x165667B19E3779F9ULL)
    h ^= h >> 29
    return <size_t>((z ^ h) & (g.nb - 1))


cdef inline bint dod_grid_holds(const dod_grid* g, size_t s, int64_t a, int64_t b, int64_t c) noexcept nogil:
    """True when point order[s] lies in cell (a, b, c) (buckets mix cells)."""
    return g.scell[s * 3] == a and g.scell[s * 3 + 1] == b and g.scell[s * 3 + 2] == c


cdef inline void dod_grid_build(dod_grid* g, const double* points, size_t n, int dim) noexcept nogil:
    """Index n points (counting sort into the buckets); g.h, g.nb and the
    arrays are set by the caller."""
    cdef size_t j, b, acc, c
    cdef int a
    g.n = n
    g.dim = dim
    g.kbits = 0
    while (<size_t>1 << ((g.kbits + 1) * dim)) <= g.nb and g.kbits < (16 if dim == 2 else 10):
        g.kbits += 1
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
