# cython: language_level=3, boundscheck=False, wraparound=False
"""A downstream module that cimports dod: one nogil step over a table of
particles, with its temporaries in a scratch arena.

Built by setup.py beside it (``python setup.py build_ext --inplace``).
"""
from dod.arena cimport Arena, dod_arena, dod_arena_mark, dod_arena_push, dod_arena_rewind
from dod.table cimport Table, dod_table, dod_table_remove_row


def step(Table particles, Arena scratch, float dt, float max_age):
    """Move every particle by ``dt * vel``, age it by ``dt``, and remove
    those older than ``max_age``. Returns the number removed.

    The rows to remove are collected in `scratch` (one push, rewound before
    returning). The caller owns the engine's contract: no numpy view of the
    table's columns is alive (a remove moves rows under it) and no other
    thread uses the table or the arena during the call.
    """
    cdef dod_table* t = &particles.engine
    cdef dod_arena* a = &scratch.engine
    # Column pointers: fetched once; columns never move (rows do, on remove).
    cdef float* pos = <float*>t.columns[particles.column_index("pos")]
    cdef const float* vel = <const float*>t.columns[particles.column_index("vel")]
    cdef float* age = <float*>t.columns[particles.column_index("age")]
    cdef size_t count = t.count
    cdef size_t mark, r, n = 0
    cdef size_t* doomed
    cdef int k
    with nogil:
        mark = dod_arena_mark(a)
        doomed = <size_t*>dod_arena_push(a, (count + 1) * sizeof(size_t), sizeof(size_t))
    if doomed == NULL:
        raise MemoryError(f"scratch arena too small for {count} row indices")
    with nogil:
        for r in range(count):
            for k in range(3):
                pos[r * 3 + k] += dt * vel[r * 3 + k]
            age[r] += dt
            if age[r] > max_age:
                doomed[n] = r
                n += 1
        # Highest row first: the last row, which moves into the hole, is
        # never one still to be removed.
        while n > 0:
            n -= 1
            dod_table_remove_row(t, doomed[n])
        dod_arena_rewind(a, mark)
    return count - t.count
