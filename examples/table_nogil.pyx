# cython: language_level=3
"""A nogil step over a dod table (built by tests/test_table.py, as a user would).

    step(table, dt, max_age): integrate positions, age every particle, and
    remove those older than max_age, all without the GIL.
"""
from dod.table cimport Table, dod_table, dod_table_remove_row


def step(Table particles, float dt, float max_age):
    cdef dod_table* t = &particles.engine
    # Column pointers: fetch once; they never move (rows do, on remove).
    cdef float* pos = <float*>t.columns[particles.column_index("pos")]
    cdef const float* vel = <const float*>t.columns[particles.column_index("vel")]
    cdef float* age = <float*>t.columns[particles.column_index("age")]
    cdef Py_ssize_t r, k, removed = 0
    with nogil:
        for r in range(<Py_ssize_t>t.count):
            for k in range(3):
                pos[r * 3 + k] += dt * vel[r * 3 + k]
            age[r] += dt
        # Walk backwards: the row that moves into r on a remove was already visited.
        for r in range(<Py_ssize_t>t.count - 1, -1, -1):
            if age[r] > max_age:
                dod_table_remove_row(t, r)
                removed += 1
    return removed
