# dod/tracker/assignment.pxd: exact minimum-cost assignment (rectangular,
# shortest augmenting paths), nogil, temporaries from an arena.
#
# not run: a fragment (the arrays and the arena are the caller's)
#     from dod.tracker.assignment cimport dod_assignment_solve
#     with nogil:
#         rc = dod_assignment_solve(nr, nc, cost, col4row, arena)   # arena: a dod_arena*
#
# Contract (checks the caller owns): nr <= nc; cost holds nr * nc doubles,
# row-major, none NaN (+inf marks a forbidden pair); col4row has room for nr
# ints; the arena is not used by anyone else during the call. Returns 0 (every
# row has a column: col4row[i]), -1 when the arena cannot hold the solver's
# temporaries, -2 when no complete assignment has finite cost. The arena is
# rewound to where it was before the call in every case. Thread-safety: one
# call per arena at a time; the cost matrix is only read.
from dod.arena cimport dod_arena

cdef int dod_assignment_solve(int nr, int nc, const double* cost, int* col4row,
                              dod_arena* a) noexcept nogil
