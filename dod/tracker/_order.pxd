# dod/tracker/_order.pxd: rows in spatial order (see _order.pyx).
from libc.stdint cimport uint8_t, int32_t
from dod.arena cimport dod_arena
from dod._types cimport dod_index
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _cell_sort, _tick


# ---------------------------------------------------------------- locality: rows in spatial order
#
# Spatial order here is the detection grid's own (grid.pxd, direct mode):
# cubic cells, row-major with x fastest. Rows in that order gate along the
# grid's bucket starts and sorted points in the direction they are stored,
# a few rows of cells at a time. (Morton order, before: at 100,000 targets
# the tick took 5-7 % longer at 1 thread, both orders at 256 cells per
# axis over the births' box, builds alternating.)

cdef const dod_index* _cell_order(const double* x, size_t stride, size_t cs, const int32_t* pick, int dim, size_t N,
                                  int bits, double h, int nt, bint par, _cell_sort* m,
                                  const uint8_t* state) noexcept nogil
cdef void _rows_in_order(dod_tracker* t, size_t rows) noexcept nogil
cdef double _mean_speed(const dod_tracker* t, bint par) noexcept nogil
cdef bint _spatial_sort(dod_tracker* t, dod_arena* scratch, double h) noexcept nogil
cdef bint _order_pass(dod_tracker* t, const _tick* k, dod_arena* scratch, double dt, size_t confirmed) noexcept nogil
