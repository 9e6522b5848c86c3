"""The README's Python examples run as written (those that need CuPy or a
compiler are exercised elsewhere: tests/gpu, the cimport tests)."""
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
RUNNABLE = [b for b in BLOCKS if "cupy" not in b and "cythonize" not in b]


def test_readme_has_examples():
    assert len(RUNNABLE) >= 8


@pytest.mark.parametrize("index", range(len(RUNNABLE)))
def test_readme_example_runs(index, capsys):
    exec(compile(RUNNABLE[index], f"README.md python block {index}", "exec"), {"np": np})
