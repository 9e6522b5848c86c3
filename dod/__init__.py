"""dod: a data-oriented runtime for Python.

Allocators that match lifetimes, struct-of-arrays tables and a fixed-rate
loop, with a Cython core that runs without the GIL. Import the concept you
need (``from dod.arena import Arena``) or use the names re-exported here.
"""
import os as _os

__version__ = "0.1.0"

# The CPUs this thread may run on when dod is first imported, before anything
# in dod pins a thread (libgomp pins the thread that loads it under
# OMP_PROC_BIND; Loop(cpu=...) pins the loop's thread), and threads started
# later inherit a pin: a RingProducer's thread goes back to these
# (dod.ring_producer). None where the OS has no affinity call.
try:
    initial_cpus = frozenset(_os.sched_getaffinity(0))
except (AttributeError, OSError):
    initial_cpus = None

from dod.errors import InvariantError, StallError  # noqa: E402  (cheap: pure Python)


def get_include():
    """The directory to pass as ``include_path`` to Cython so that ``cimport dod.arena`` (and the other .pxd files) resolve.

    It is the directory *above* the package, which works for regular and
    editable installs alike. The C headers the .pxd files include are in the
    package folder itself (``os.path.join(dod.get_include(), "dod")``).

    Returns
    -------
    str

    Notes
    -----
    Thread-safety: a pure function.
    """
    return _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


# Lazily re-exported names: importing dod stays cheap and never needs what a
# program does not use.
_EXPORTS = {
    "Arena": "dod.arena",
    "DeviceArena": "dod.cuda.device_arena",     # GPU (CuPy) features import CuPy on first use only
    "PinnedArena": "dod.cuda.pinned_arena",
    "LockFreePool": "dod.lfpool",
    "SegFit": "dod.segfit",
    "Pool": "dod.pool",
    "FreeList": "dod.freelist",
    "Loop": "dod.loop",
    "Ring": "dod.ring",
    "RingProducer": "dod.ring_producer",
    "Realtime": "dod.realtime",
    "Resource": "dod.resource",
    "AtomicArena": "dod.atomic_arena",
    "ThreadCache": "dod.atomic_arena",
    "PageSource": "dod.pages",
    "GuardedResource": "dod.guard",
    "Schema": "dod.table",
    "Table": "dod.table",
    "Column": "dod.table",
}


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dod' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__():
    return sorted(list(globals()) + list(_EXPORTS))
