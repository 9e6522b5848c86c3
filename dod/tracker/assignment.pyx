"""Exact minimum-cost assignment: the nogil solver and its Python face.

The solver (:c:func:`dod_assignment_solve`, declared in
``dod/tracker/assignment.pxd``) is the Jonker-Volgenant shortest augmenting
path method in Crouse's rectangular form; the tracker's tick runs it on each
gated cluster. :func:`solve_assignment` is its Python face (the metrics and
the tests use it; scipy's ``linear_sum_assignment`` is its oracle).
"""
cimport numpy as cnp
from libc.math cimport INFINITY
from libc.stdint cimport uint8_t

from dod.arena cimport dod_arena, Arena, dod_arena_push, dod_arena_mark, dod_arena_rewind
from dod._ndarray cimport input_array

import numpy as np

cnp.import_array()


cdef int dod_assignment_solve(int nr, int nc, const double* cost, int* col4row, dod_arena* a) noexcept nogil:
    """Exact rectangular assignment (nr <= nc): shortest augmenting paths
    (Jonker-Volgenant, in Crouse's rectangular form). Every row gets a column;
    col4row[i] is row i's column. 0, or -1 without scratch memory, -2 when no
    complete assignment has finite cost."""
    cdef size_t mark = dod_arena_mark(a)
    cdef double* u = <double*>dod_arena_push(a, nr * sizeof(double), 8)
    cdef double* v = <double*>dod_arena_push(a, nc * sizeof(double), 8)
    cdef double* shortest = <double*>dod_arena_push(a, nc * sizeof(double), 8)
    cdef int* path = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef int* row4col = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef int* remaining = <int*>dod_arena_push(a, nc * sizeof(int), 8)
    cdef uint8_t* SR = <uint8_t*>dod_arena_push(a, nr, 8)
    cdef uint8_t* SC = <uint8_t*>dod_arena_push(a, nc, 8)
    cdef int cur, i, j, it, index, sink, nrem, tmp
    cdef double minval, lowest, rc
    if SC == NULL:
        dod_arena_rewind(a, mark)
        return -1
    for i in range(nr):
        u[i] = 0.0
        col4row[i] = -1
    for j in range(nc):
        v[j] = 0.0
        row4col[j] = -1
        path[j] = -1
    for cur in range(nr):
        # Dijkstra from row `cur` over reduced costs to the nearest free column.
        minval = 0.0
        i = cur
        nrem = nc
        for it in range(nc):
            remaining[it] = nc - it - 1
            shortest[it] = INFINITY
            SC[it] = 0
        for it in range(nr):
            SR[it] = 0
        sink = -1
        while sink == -1:
            index = -1
            lowest = INFINITY
            SR[i] = 1
            for it in range(nrem):
                j = remaining[it]
                rc = minval + cost[<size_t>i * nc + j] - u[i] - v[j]
                if rc < shortest[j]:
                    path[j] = i
                    shortest[j] = rc
                if shortest[j] < lowest or (shortest[j] == lowest and row4col[j] == -1):
                    lowest = shortest[j]
                    index = it
            minval = lowest
            if minval == INFINITY or index < 0:
                dod_arena_rewind(a, mark)
                return -2
            j = remaining[index]
            if row4col[j] == -1:
                sink = j
            else:
                i = row4col[j]
            SC[j] = 1
            nrem -= 1
            remaining[index] = remaining[nrem]
        # Update the dual variables, then augment along the path.
        u[cur] += minval
        for i in range(nr):
            if SR[i] and i != cur:
                u[i] += minval - shortest[col4row[i]]
        for j in range(nc):
            if SC[j]:
                v[j] -= minval - shortest[j]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            tmp = col4row[i]
            col4row[i] = j
            j = tmp
            if i == cur:
                break
    dod_arena_rewind(a, mark)
    return 0


def solve_assignment(cost):
    """Exact minimum-cost assignment of a dense (rows, cols) float64 matrix.

    A test and reference hook for the nogil solver.

    Parameters
    ----------
    cost : array_like
        Shape (rows, cols), finite, real; one that is not native-endian,
        aligned, C-contiguous float64 is first copied into one
        (dod._ndarray.input_array).

    Returns
    -------
    tuple of numpy.ndarray
        ``(row_ind, col_ind)`` as scipy.optimize.linear_sum_assignment returns
        them (every row of the smaller side assigned; rows sorted).

    Raises
    ------
    TypeError
        For None, Python objects or a non-real dtype.
    ValueError
        For a shape that is not 2-D (0-d included), more than 2**31 - 1 rows
        or columns, or non-finite costs.

    Notes
    -----
    Thread-safety: thread-safe; each call has its own scratch arena and
    releases the GIL while it solves.
    """
    c = input_array(cost, np.float64, "cost", 2)
    if c.shape[0] > 0x7fffffff or c.shape[1] > 0x7fffffff:
        raise ValueError(f"cost of shape {c.shape}: at most 2**31 - 1 rows and columns")
    if not np.isfinite(c).all():
        raise ValueError("cost must be finite")
    transposed = c.shape[0] > c.shape[1]
    if transposed:
        c = np.ascontiguousarray(c.T)
    cdef int nr = c.shape[0], nc = c.shape[1]
    cdef cnp.ndarray[cnp.float64_t, ndim=2, mode="c"] cc = c
    cdef cnp.ndarray[cnp.int32_t, ndim=1] out = np.empty(nr, dtype=np.int32)
    cdef Arena scratch = Arena(max(4096, 64 * (nr + nc) + 4096))
    cdef int rc
    if nr == 0:
        return np.empty(0, np.intp), np.empty(0, np.intp)
    with nogil:
        rc = dod_assignment_solve(nr, nc, &cc[0, 0], <int*>&out[0], &scratch.engine)
    if rc != 0:
        raise MemoryError("assignment scratch")
    rows = np.arange(nr, dtype=np.intp)
    cols = out.astype(np.intp)
    if transposed:
        order = np.argsort(cols)
        return cols[order], rows[order]
    return rows, cols
