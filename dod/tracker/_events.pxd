# dod/tracker/_events.pxd: what happened in a scan, written by the passes
# that decide it (dod/tracker/_events.pyx; the arrays: dod_tick_events in
# _track.pxd).
from dod.tracker._track cimport dod_tracker
from dod.tracker._frame cimport _tick


# A pass that may record events is written once and specialised at compile
# time: _quiet (config.events off) writes nothing, _told writes them; in
# its body `if _telling is _told:` (tags: only their type is read).
ctypedef struct _quiet:
    char tag
ctypedef struct _told:
    char tag
ctypedef fused _telling:
    _quiet
    _told


cdef void _events_open(dod_tracker* t, const _tick* k) noexcept nogil
cdef void _events_update(dod_tracker* t, const _tick* k) noexcept nogil
cdef void _events_births(dod_tracker* t, const _tick* k, size_t n) noexcept nogil
