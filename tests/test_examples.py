"""The Python examples run as written (the GPU one needs CuPy: tests/gpu; the
tracker demo is tested in test_demo.py; the .pyx ones are built by their tests)."""
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
QUICK = ["arena_scratch.py", "pool_particles.py", "table_basics.py"]


@pytest.mark.parametrize("name", QUICK)
def test_example_runs(name, capsys):
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    assert capsys.readouterr().out.strip()
