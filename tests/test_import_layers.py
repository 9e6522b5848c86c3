"""Modules import only downward: no compiled dod module, when loaded, loads
a module that loads it back (a helper split out of a public module cimports
a lower internal .pxd, never its owner's).

Each module is imported in a fresh child of one interpreter that has loaded
numpy and nothing of dod, and the dod modules the import brought in are
compared pairwise.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Forks once per module, so each import starts from the same clean state
# without paying an interpreter start-up each time.
_PROBE = r"""
import json, os, sys
import numpy
names = sys.argv[1:]
out = {}
for name in names:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        before = set(sys.modules)
        try:
            __import__(name)
            loaded = sorted(n for n in set(sys.modules) - before if n.startswith("dod.") and n != name)
        except ImportError as e:        # an optional dependency missing: nothing to compare
            loaded = None
        os.write(w, json.dumps(loaded).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out[name] = json.loads(data)
print(json.dumps(out))
"""


def _compiled_modules():
    # The extension list, by the rule setup.py builds it: one module per dod/**/*.pyx.
    return [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in sorted((ROOT / "dod").rglob("*.pyx"))]


def test_no_module_loads_a_module_that_loads_it_back():
    names = _compiled_modules()
    run = subprocess.run([sys.executable, "-c", _PROBE, *names], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    loads = {k: set(v) for k, v in json.loads(run.stdout).items() if v is not None}
    assert "dod.ring" in loads and "dod.atomic_arena" in loads
    cycles = sorted((a, b) for a in loads for b in loads[a] if a < b and a in loads.get(b, ()))
    assert not cycles, f"modules that load each other: {cycles}"
