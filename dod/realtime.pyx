"""Real-time deployment options for a thread: lock memory, pin to a CPU, SCHED_FIFO.

A deadline loop on a shared machine loses its worst ticks to the operating
system, not to its own work: a page fault on memory that was swapped or never
touched, a migration to a busy CPU, preemption by an ordinary process.
:class:`Realtime` asks the kernel for the three standard remedies, each
optional, applies them on the calling thread, and undoes exactly what it did:

``lock_memory``
    ``mlockall(MCL_CURRENT | MCL_FUTURE)``: every page of the process stays in
    RAM (process-wide). ``"onfault"`` adds ``MCL_ONFAULT`` (Linux >= 4.4):
    pages are locked as they are first touched instead of all at once, which
    keeps dod's lazily-touched arenas lazy. Undone with ``munlockall()`` only
    when this object locked and nothing was locked before.
``cpu``
    ``sched_setaffinity`` of the calling thread to that one CPU. Undone by
    restoring the previous affinity.
``priority``
    ``sched_setscheduler(SCHED_FIFO, priority)`` of the calling thread
    (``sched_get_priority_min``..``max``, 1..99 on Linux). Undone by restoring
    the previous policy and priority.

Arguments are validated when the object is made (ValueError/TypeError,
nothing changed). What the kernel refuses at :meth:`Realtime.apply` (no
CAP_IPC_LOCK / RLIMIT_MEMLOCK too small, no CAP_SYS_NICE / RLIMIT_RTPRIO
too low or no real-time bandwidth in the cgroup, a CPU this process may not
use) raises OSError after undoing what was already applied (``strict=True``,
the default: you asked for it), or warns (RuntimeWarning) and goes on without
it (``strict=False``). :attr:`Realtime.active` and :attr:`Realtime.refused`
say what holds.

A SCHED_FIFO thread that never sleeps owns its CPU: the loop sleeps between
ticks, but a step that spins forever at real-time priority starves every
ordinary thread on that CPU.

Thread-safety: apply() and undo() act on the calling thread (lock_memory on
the whole process); call both from the same thread, one Realtime per thread.
"""
from libc.errno cimport errno
from libc.string cimport strerror

import os as _os
import warnings as _warnings

cdef extern from "<sys/mman.h>" nogil:
    int mlockall(int flags)
    int munlockall()
    const int MCL_CURRENT
    const int MCL_FUTURE

cdef extern from *:
    """
    #include <sys/mman.h>
    #ifndef MCL_ONFAULT
    #define MCL_ONFAULT 4
    #endif
    """
    const int MCL_ONFAULT

CPU_SETSIZE = 1024


def locked_kib():
    """Kibibytes of this process's memory locked in RAM now (VmLck).

    Returns
    -------
    int
        -1 if unknown.

    Notes
    -----
    Thread-safety: any thread.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmLck:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Realtime:
    """Realtime(lock_memory=False, cpu=None, priority=None, *, strict=True)

    Real-time options for the calling thread, applied by apply() and undone by undo().

    Parameters
    ----------
    lock_memory : False, True or "onfault", default False
        mlockall while applied ("onfault": pages locked as first touched).
    cpu : int, optional
        0 .. 1023; whether this process may use it is the OS's answer.
    priority : int, optional
        SCHED_FIFO priority in sched_get_priority_min/max(SCHED_FIFO).
    strict : bool, default True
        Refusal by the OS raises OSError (True) or warns (False).

    Raises
    ------
    ValueError, TypeError
        For a bad argument (nothing changes).

    Notes
    -----
    Thread-safety: apply() and undo() act on the calling thread
    (lock_memory on the whole process); call both from the same thread,
    one Realtime per thread.
    """

    def __init__(self, lock_memory=False, cpu=None, priority=None, *, strict=True):
        if not (lock_memory is True or lock_memory is False or lock_memory == "onfault"):
            raise ValueError(f"lock_memory must be False, True or 'onfault', not {lock_memory!r}")
        if cpu is not None:
            if isinstance(cpu, bool) or not isinstance(cpu, int):
                raise TypeError(f"cpu must be an int or None, not {type(cpu).__name__}")
            if not 0 <= cpu < CPU_SETSIZE:
                raise ValueError(f"cpu must be between 0 and {CPU_SETSIZE - 1}, not {cpu}")
        if priority is not None:
            if isinstance(priority, bool) or not isinstance(priority, int):
                raise TypeError(f"realtime priority must be an int or None, not {type(priority).__name__}")
            if not hasattr(_os, "SCHED_FIFO"):
                raise ValueError("SCHED_FIFO is not available on this system")
            lo = _os.sched_get_priority_min(_os.SCHED_FIFO)
            hi = _os.sched_get_priority_max(_os.SCHED_FIFO)
            if not lo <= priority <= hi:
                raise ValueError(f"realtime priority must be between {lo} and {hi} (SCHED_FIFO), not {priority}")
        if not isinstance(strict, bool):
            raise TypeError("strict must be True or False")
        self.lock_memory = lock_memory
        self.cpu = cpu
        self.priority = priority
        self.strict = strict
        self._applied = False
        self._prev_affinity = None
        self._prev_sched = None
        self._unlock = False
        self.active = {"lock_memory": False, "cpu": None, "realtime_priority": None}
        self.refused = {}

    @property
    def applied(self):
        """True between apply() and undo()."""
        return self._applied

    @property
    def requested(self):
        """True when any option was asked for."""
        return bool(self.lock_memory) or self.cpu is not None or self.priority is not None

    def _refuse(self, name, message, err):
        self.refused[name] = message
        if self.strict:
            self.undo()
            raise type(err)(err.errno, message) from err
        _warnings.warn(message + " (continuing without it: strict=False)", RuntimeWarning, stacklevel=4)

    def apply(self):
        """Apply the requested options to the calling thread.

        Returns
        -------
        dict
            :attr:`active`: what holds now.

        Raises
        ------
        OSError
            When the OS refuses an option (strict), after undoing what was
            applied; not strict, a RuntimeWarning per refused option instead.
        RuntimeError
            If already applied.

        Notes
        -----
        Thread-safety: acts on the calling thread; undo from the same thread.
        """
        cdef int flags, rc
        if self._applied:
            raise RuntimeError("real-time options already applied: undo() first")
        self._applied = True
        self.active = {"lock_memory": False, "cpu": None, "realtime_priority": None}
        self.refused = {}
        if self.cpu is not None:
            prev = _os.sched_getaffinity(0)
            try:
                _os.sched_setaffinity(0, {self.cpu})
            except OSError as e:
                self._refuse("cpu", f"cannot pin the loop thread to CPU {self.cpu}: {e.strerror} "
                                    f"(this process may use CPUs {sorted(prev)})", e)
            else:
                self._prev_affinity = prev
                self.active["cpu"] = self.cpu
        if self.priority is not None:
            prev_policy = _os.sched_getscheduler(0)
            prev_param = _os.sched_getparam(0)
            try:
                _os.sched_setscheduler(0, _os.SCHED_FIFO, _os.sched_param(self.priority))
            except OSError as e:
                self._refuse("realtime_priority",
                             f"SCHED_FIFO priority {self.priority} refused: {e.strerror} (needs CAP_SYS_NICE "
                             f"or RLIMIT_RTPRIO >= {self.priority}, see `ulimit -r`, and real-time "
                             f"bandwidth for this cgroup)", e)
            else:
                self._prev_sched = (prev_policy, prev_param)
                self.active["realtime_priority"] = self.priority
        if self.lock_memory:
            before = locked_kib()
            flags = MCL_CURRENT | MCL_FUTURE
            if self.lock_memory == "onfault":
                flags |= MCL_ONFAULT
            with nogil:
                rc = mlockall(flags)
            if rc != 0:
                err = errno
                self._refuse("lock_memory",
                             f"mlockall refused: {strerror(err).decode()} (needs CAP_IPC_LOCK or "
                             f"RLIMIT_MEMLOCK above the process's size, see `ulimit -l`)",
                             OSError(err, strerror(err).decode()))
            else:
                self._unlock = before == 0
                self.active["lock_memory"] = "onfault" if self.lock_memory == "onfault" else True
        return self.active

    def undo(self):
        """Restore what apply() changed (idempotent).

        Memory is unlocked only if this object locked it and nothing was locked
        before; the previous scheduling policy and affinity of the calling thread
        come back. :attr:`active` keeps saying what held during the last apply
        (see :attr:`applied`).

        Notes
        -----
        Thread-safety: call it from the thread that applied.
        """
        if not self._applied:
            return
        self._applied = False
        problems = []
        if self._unlock:
            with nogil:
                munlockall()
            self._unlock = False
        if self._prev_sched is not None:
            policy, param = self._prev_sched
            self._prev_sched = None
            try:
                _os.sched_setscheduler(0, policy, param)
            except OSError as e:
                problems.append(f"scheduling policy: {e}")
        if self._prev_affinity is not None:
            prev, self._prev_affinity = self._prev_affinity, None
            try:
                _os.sched_setaffinity(0, prev)
            except OSError as e:
                problems.append(f"CPU affinity: {e}")
        if problems:
            _warnings.warn("could not restore " + "; ".join(problems), RuntimeWarning, stacklevel=2)

    def report(self):
        """What holds now (or held during the last apply), and why anything was refused.

        Returns
        -------
        dict
            ``{"lock_memory", "cpu", "realtime_priority", "refused", "applied"}``:
            the options in force, the OS's reason per refused option, and whether
            they are in force now.

        Notes
        -----
        Thread-safety: any thread (it reads this object's record).
        """
        return dict(self.active, refused=dict(self.refused), applied=self._applied)

    def __repr__(self):
        return (f"<dod.Realtime lock_memory={self.lock_memory!r} cpu={self.cpu!r} "
                f"priority={self.priority!r} strict={self.strict} active={self.active}>")
