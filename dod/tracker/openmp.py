"""How the tick's OpenMP workers wait between parallel regions.

libgomp reads its settings once, when it is loaded (the first import of
``dod.tracker._engine``, or of any other OpenMP module in the process), so
:func:`default_wait_policy` must run before that; the bench and the demo
call it at import.

The default here, unless you set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
yourself: PASSIVE (a worker sleeps when it has waited
:data:`SPIN_COUNT` spins), not libgomp's own default of 300,000 spins
(milliseconds) or ACTIVE (spin forever). On a machine shared with other
work, spinning workers steal the cores the tick needs and one preempted
worker stalls every region; with no spinning at all (PASSIVE alone) every
region starts with a futex wake-up, and a tick runs about eight regions:
small ticks then run slower on two threads than on one. 3,000 spins (a
fraction of a millisecond of one core per region end) cover the serial
gaps between a tick's regions up to ~10,000 targets. On a dedicated
machine ``OMP_WAIT_POLICY=ACTIVE`` wakes workers fastest.

Where the threads run: in a loop that sleeps between ticks (a 50 Hz loop
with slack) both the calling thread and the worker sleep, and the kernel
tends to wake them on the same core, where two threads are slower than
one. :func:`default_binding` pins them one per core
(``OMP_PROC_BIND=spread``, ``OMP_PLACES=cores``). The demo (``python -m
dod.tracker``) sets it; the bench, whose ticks follow each other without
sleeping, does not. The measurements behind both defaults are in the
design notes (threads and locality).
"""
import os

SPIN_COUNT = 3000
BINDING = {"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"}
_BINDING_KEYS = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")


def default_wait_policy(environ=os.environ):
    """Set PASSIVE with :data:`SPIN_COUNT` spins unless either setting is
    already there (yours wins, whole); returns what is in force."""
    if "OMP_WAIT_POLICY" not in environ and "GOMP_SPINCOUNT" not in environ:
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
        environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return {k: environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}


def default_binding(environ=os.environ):
    """Pin the OpenMP threads one per core (:data:`BINDING`) unless any of
    OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY is already there (yours
    wins, whole; ``OMP_PROC_BIND=false`` turns binding off); returns what is
    in force. Like the wait settings it must run before the engine loads.

    libgomp then pins the thread that loads it to the first core, for the
    rest of the process, and a thread started from it afterwards inherits
    that pin: a :class:`dod.ring_producer.RingProducer` thread goes back to
    the process's CPUs by default, a thread of yours should do the same
    (``os.sched_setaffinity(0, dod.initial_cpus)`` in it)."""
    if not any(k in environ for k in _BINDING_KEYS):
        environ.update(BINDING)
    return {k: environ.get(k) for k in _BINDING_KEYS}
