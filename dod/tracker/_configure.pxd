# dod/tracker/_configure.pxd: a TrackerConfig and a Sensor read into the
# engine's struct, and the scratch a tick needs (see _configure.pyx).
from dod.table cimport Table
from dod.tracker._track cimport dod_tracker
from dod.tracker.measurement cimport dod_sensor


cdef size_t _tracker_scratch_bytes(object config) except? 0
cdef int _read_config(dod_tracker* e, object config, Table table, Table singles) except -1
cdef void _read_sensor(object sensor, int dim, dod_sensor* out) except *
