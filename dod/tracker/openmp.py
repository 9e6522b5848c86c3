"""How the tick's OpenMP workers wait between parallel regions.

libgomp reads its settings once, when it is loaded (the first import of
``dod.tracker._engine``, or of any other OpenMP module in the process), so
:func:`default_wait_policy` must run before that; the bench and the demo
call it at import.

The default here, unless you set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
yourself: PASSIVE (a worker sleeps when it has waited
:data:`SPIN_COUNT` spins), not libgomp's own default of 300,000 spins
(about 17 ms here) or ACTIVE (spin forever). On a machine shared with other
work, spinning workers steal the cores the tick needs and one preempted
worker stalls every region; with no spinning at all (PASSIVE alone) every
region starts with a futex wake-up, and a tick runs about eight regions:
at 1,000 targets two threads were 2x *slower* than one (0.46 against 0.22
ms per tick) and at 10,000 no faster. 3,000 spins (about 0.15 ms of one
core per region end, measured with a bare OpenMP loop here: 55 ns a spin)
cover the serial gaps between a tick's regions up to ~10,000 targets.
On a dedicated machine ``OMP_WAIT_POLICY=ACTIVE`` wakes workers fastest.
"""
import os

SPIN_COUNT = 3000


def default_wait_policy(environ=os.environ):
    """Set PASSIVE with :data:`SPIN_COUNT` spins unless either setting is
    already there (yours wins, whole); returns what is in force."""
    if "OMP_WAIT_POLICY" not in environ and "GOMP_SPINCOUNT" not in environ:
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
        environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    return {k: environ.get(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
