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


# Records the settings at the moment dod.tracker._engine (which loads
# libgomp) is imported, then prints them.
_AT_ENGINE_LOAD = """
import os, sys
for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
    os.environ.pop(k, None)
seen = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "dod.tracker._engine":
            seen.append((os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT")))
        return None
sys.meta_path.insert(0, Spy())
import %s
print(seen)
"""


def test_the_bench_and_the_demo_set_it_before_the_engine_loads():
    # libgomp reads the settings once, when the engine loads it: set after
    # that, they would do nothing.
    for module in ("dod.tracker.bench", "dod.tracker.demo", "dod.tracker.bench_imm", "dod.tracker.bench_radar"):
        out = subprocess.run([sys.executable, "-c", _AT_ENGINE_LOAD % module], capture_output=True, text=True,
                             check=True).stdout
        assert out.strip() == repr([("PASSIVE", str(SPIN_COUNT))]), (module, out)
