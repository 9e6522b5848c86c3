"""dod.tracker.openmp: the workers' wait settings the bench and the demo set."""
import subprocess
import sys

from dod.tracker.openmp import SPIN_COUNT, default_wait_policy


def test_default_is_passive_with_a_short_spin():
    env = {}
    assert default_wait_policy(env) == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": str(SPIN_COUNT)}
    assert env == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": str(SPIN_COUNT)}


def test_a_setting_of_yours_wins_whole():
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert default_wait_policy(env) == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": None}
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}
    env = {"GOMP_SPINCOUNT": "0"}
    assert default_wait_policy(env) == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "0"}
    assert env == {"GOMP_SPINCOUNT": "0"}


# Removes the settings `keys`, runs `run`, and prints the settings at the
# moment dod.tracker._engine (which loads libgomp) was imported.
_AT_ENGINE_LOAD = """
import os, runpy, sys
keys = %(keys)r
for k in keys:
    os.environ.pop(k, None)
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "dod.tracker._engine":
            seen.append(tuple(os.environ.get(k) for k in keys))
        return None
sys.meta_path.insert(0, Spy())
%(run)s
print(seen)
"""


def _settings_at_engine_load(keys, run):
    out = subprocess.run([sys.executable, "-c", _AT_ENGINE_LOAD % {"keys": keys, "run": run}],
                         capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1]


def test_the_bench_and_the_demo_set_it_before_the_engine_loads():
    # libgomp reads the settings once, when the engine loads it: set after
    # that, they would do nothing.
    for module in ("dod.tracker.bench", "dod.tracker.demo", "dod.tracker.bench_imm", "dod.tracker.bench_radar"):
        seen = _settings_at_engine_load(("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"), f"import {module}")
        assert seen == repr([("PASSIVE", str(SPIN_COUNT))]), (module, seen)


def test_binding_default_and_yours_wins_whole():
    from dod.tracker.openmp import BINDING, default_binding
    env = {}
    assert default_binding(env) == dict(BINDING, GOMP_CPU_AFFINITY=None)
    assert env == BINDING == {"OMP_PROC_BIND": "spread", "OMP_PLACES": "cores"}
    for yours in ({"OMP_PROC_BIND": "false"}, {"OMP_PLACES": "threads"}, {"GOMP_CPU_AFFINITY": "0-1"}):
        env = dict(yours)
        default_binding(env)
        assert env == yours


def test_the_demo_program_binds_and_an_import_of_the_demo_does_not():
    # `python -m dod.tracker` sets the binding before libgomp loads; a
    # process that imports the demo module keeps its threads where they are.
    run = ("sys.argv = ['dod.tracker', '--targets', '20', '--duration', '0.1', '--fast', '--no-live']\n"
           "try:\n    runpy.run_module('dod.tracker', run_name='__main__')\nexcept SystemExit:\n    pass")
    keys = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")
    assert _settings_at_engine_load(keys, run) == repr([("spread", "cores", None)])
    assert _settings_at_engine_load(keys, "import dod.tracker.demo") == repr([(None, None, None)])


def _mapped_libraries():
    with open("/proc/self/maps") as f:
        return {line.split()[-1].rsplit("/", 1)[-1] for line in f if "/" in line}


def test_the_threaded_tick_runs_on_a_runtime_the_thread_checker_can_see():
    # The tick's threads come from the OpenMP runtime the engine linked:
    # libgomp in gcc builds. DOD_BUILD=tsan links LLVM's libomp instead, and
    # .ci/run (step 6) loads its Archer tool (OMP_TOOL_LIBRARIES), which shows
    # the team's fork/join and barriers to ThreadSanitizer: without it the
    # threaded tracker tests reported over a thousand races inside them, with
    # it none. So under TSan, a run without Archer must fail here, not there.
    import os

    from dod.tracker import Tracker, TrackerConfig
    from dod.tracker.scenario import generate

    t = Tracker(TrackerConfig(threads=2, parallel_min_rows=1, capacity=256, max_detections=256))
    for z, dt in generate(60, 3, seed=2):
        t.tick(z, dt)
    libs = _mapped_libraries()
    runtimes = {name for name in libs if name.startswith(("libgomp.so", "libomp.so"))}
    assert runtimes, f"no OpenMP runtime mapped (dod built with DOD_NO_OPENMP=1?): {sorted(libs)}"
    if os.environ.get("DOD_BUILD") == "tsan":
        assert any(name.startswith("libomp.so") for name in runtimes), runtimes
        assert "libarcher.so" in libs, "ThreadSanitizer run without Archer: set OMP_TOOL_LIBRARIES"
