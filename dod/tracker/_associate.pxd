# dod/tracker/_associate.pxd: association of one stage (see _associate.pyx).
from libc.stdint cimport uint8_t
from dod.arena cimport dod_arena
from dod.tracker._track cimport dod_tracker, dod_tick_counts
from dod.tracker._frame cimport _tick


cdef void _associate(dod_tracker* t, _tick* k, dod_tick_counts* cnt, uint8_t stage,
                     dod_arena* scratch, bint gated) noexcept nogil
