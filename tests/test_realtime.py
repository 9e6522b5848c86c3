"""Loop's real-time options (dod.realtime): validation, success where the OS
allows it, refusal where it cannot (strict: OSError; not strict: a warning),
and the process's state restored either way.

mlockall is process-wide and faults pages in, so the memory tests run in a
fresh interpreter. AddressSanitizer intercepts mlockall as a no-op that
succeeds (it would lock the shadow memory): under the sanitize build the
lock is reported but VmLck stays 0, and it cannot be refused. The forced-refusal test drops every privilege first
(RLIMIT_MEMLOCK and RLIMIT_RTPRIO to 0, and uid nobody when run as root).
"""
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from dod.loop import Loop
from dod.realtime import Realtime, locked_kib

ROOT = Path(__file__).resolve().parent.parent
ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")
linux_only = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux scheduling calls")


def state():
    return os.sched_getaffinity(0), os.sched_getscheduler(0), os.sched_getparam(0).sched_priority


def run_child(code, timeout=60):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = f"ASAN = {ASAN}\n" + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=str(ROOT))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@linux_only
@pytest.mark.parametrize("kwargs, err", [
    (dict(cpu=-1), ValueError), (dict(cpu=1 << 20), ValueError), (dict(cpu=1.0), TypeError),
    (dict(cpu=True), TypeError), (dict(realtime_priority=0), ValueError),
    (dict(realtime_priority=100), ValueError), (dict(realtime_priority="5"), TypeError),
    (dict(lock_memory="yes"), ValueError), (dict(lock_memory=2), ValueError),
    (dict(strict=1), TypeError),
])
def test_bad_arguments_raise_before_anything_changes(kwargs, err):
    before = state()
    with pytest.raises(err):
        Loop(lambda: None, 100.0, **kwargs)
    assert state() == before


def test_no_options_report_nothing():
    loop = Loop(lambda: None, 1000.0)
    loop.run(2)
    assert loop.realtime == {"lock_memory": False, "cpu": None, "realtime_priority": None,
                             "refused": {}, "applied": False}


@linux_only
def test_pin_applies_on_the_loop_thread_and_restores():
    before = state()
    cpu = max(before[0])
    seen = []
    loop = Loop(lambda: seen.append((os.sched_getaffinity(0), loop.realtime)), 1000.0, cpu=cpu)
    loop.run(3)
    assert all(aff == {cpu} for aff, _ in seen)
    assert seen[0][1]["cpu"] == cpu and seen[0][1]["applied"]
    assert loop.realtime["cpu"] == cpu and not loop.realtime["applied"]    # what held during the run
    assert state() == before


@linux_only
def test_pin_restored_when_the_step_raises():
    before = state()

    def step():
        assert os.sched_getaffinity(0) == {min(before[0])}
        raise KeyError("boom")
    with pytest.raises(KeyError):
        Loop(step, 1000.0, cpu=min(before[0])).run(5)
    assert state() == before


@linux_only
def test_cpu_outside_the_allowed_set_is_refused():
    before = state()
    impossible = max(os.cpu_count() or 1, max(before[0]) + 1)     # not a CPU this process may use
    ran = []
    with pytest.raises(OSError, match=f"CPU {impossible}"):
        Loop(lambda: ran.append(1), 1000.0, cpu=impossible).run(3)
    assert ran == [] and state() == before                         # strict: no tick ran
    loop = Loop(lambda: ran.append(os.sched_getaffinity(0)), 1000.0, cpu=impossible, strict=False)
    with pytest.warns(RuntimeWarning, match="cannot pin"):
        loop.run(3)
    assert ran == [before[0]] * 3
    assert loop.realtime["cpu"] is None and "cpu" in loop.realtime["refused"]
    assert state() == before


@linux_only
def test_sched_fifo_where_allowed_else_refused_cleanly():
    before = state()
    seen = []
    loop = Loop(lambda: seen.append(os.sched_getscheduler(0)), 1000.0, realtime_priority=5)
    try:
        loop.run(3)
    except PermissionError as e:               # this machine does not allow it: the refusal path
        assert "SCHED_FIFO priority 5 refused" in str(e)
        assert seen == [] and loop.realtime["refused"]
    else:                                      # allowed: it held during every tick
        assert seen == [os.SCHED_FIFO] * 3
        assert loop.realtime["realtime_priority"] == 5 and not loop.realtime["refused"]
    assert state() == before


@linux_only
def test_lock_memory_in_a_fresh_process():
    out = run_child("""
        import os
        from dod.loop import Loop
        from dod.realtime import locked_kib
        for mode in (True, "onfault"):
            seen = []
            loop = Loop(lambda: seen.append(locked_kib()), 1000.0, lock_memory=mode, strict=False)
            before = locked_kib()
            import warnings
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                loop.run(3)
            rt = loop.realtime
            if rt["lock_memory"]:
                assert before == 0 and (ASAN or min(seen) > 0) and locked_kib() == 0, (before, seen, locked_kib())
                print("locked", mode, min(seen))
            else:
                assert "lock_memory" in rt["refused"] and w and seen and max(seen) == 0, (rt, seen)
                print("refused", mode)
    """)
    assert out.count("\n") == 2, out


@linux_only
def test_every_option_refused_without_privileges():
    # Limits to zero, and uid nobody when root (which would ignore them):
    # lock_memory, SCHED_FIFO and an impossible CPU are all refused.
    out = run_child("""
        import os, resource, warnings
        from dod.loop import Loop                  # imported first: nobody may not read the stdlib
        from dod.realtime import locked_kib
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
        resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        allowed = os.sched_getaffinity(0)
        before = (allowed, os.sched_getscheduler(0))
        bad_cpu = max(os.cpu_count(), max(allowed) + 1)
        # strict: the first refusal raises, what was applied (the pin) is undone, no tick runs
        ran = []
        loop = Loop(lambda: ran.append(1), 1000.0, cpu=min(allowed), realtime_priority=10)
        try:
            loop.run(2)
        except PermissionError as e:
            assert "SCHED_FIFO" in str(e), e
        else:
            raise SystemExit("SCHED_FIFO was not refused")
        assert ran == [] and (os.sched_getaffinity(0), os.sched_getscheduler(0)) == before
        # not strict: three warnings, the loop runs without them
        loop = Loop(lambda: ran.append(locked_kib()), 1000.0, cpu=bad_cpu, realtime_priority=10,
                    lock_memory=True, strict=False)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loop.run(2)
        rt = loop.realtime
        refused = ["cpu", "realtime_priority"] if ASAN else ["cpu", "lock_memory", "realtime_priority"]
        assert sorted(rt["refused"]) == refused, rt
        assert (rt["cpu"], rt["realtime_priority"], rt["lock_memory"]) == (None, None, ASAN), rt
        assert len([x for x in w if issubclass(x.category, RuntimeWarning)]) == len(refused)
        assert ran == [0, 0] and (os.sched_getaffinity(0), os.sched_getscheduler(0)) == before
        print("ok")
    """)
    assert out.strip() == "ok"


def test_realtime_object_apply_undo_is_idempotent():
    rt = Realtime()
    assert not rt.requested
    rt.apply()
    with pytest.raises(RuntimeError):
        rt.apply()
    rt.undo()
    rt.undo()
    assert not rt.applied
    assert locked_kib() >= -1
