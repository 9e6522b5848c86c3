"""At HEAD every asv benchmark module imports, and so does every module a
benchmark names through `_util.require` (whose ImportError -> skip is for old
commits only: a benchmark broken at HEAD must fail here, not skip in asv)."""
import ast
import importlib
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "asv_bench" / "benchmarks"
MODULES = sorted(p.stem for p in BENCH.glob("bench_*.py"))


def required_modules():
    """Every string literal passed to require(...) in the benchmark modules."""
    out = set()
    for p in BENCH.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require" \
                    and node.args and isinstance(node.args[0], ast.Constant):
                out.add(node.args[0].value)
    return sorted(out)


def test_the_suite_is_there():
    assert len(MODULES) >= 6 and len(required_modules()) >= 5, (MODULES, required_modules())


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_module_imports_at_head(name, monkeypatch):
    monkeypatch.setenv("DOD_ASV_STRICT", "1")
    monkeypatch.syspath_prepend(str(BENCH.parent))
    importlib.import_module(f"benchmarks.{name}")


@pytest.mark.parametrize("module", required_modules())
def test_required_module_imports_at_head(module):
    importlib.import_module(module)


def test_strict_require_raises(monkeypatch):
    sys.path.insert(0, str(BENCH.parent))
    try:
        from benchmarks._util import require
    finally:
        sys.path.remove(str(BENCH.parent))
    with pytest.raises(NotImplementedError):
        require("dod.not_a_module")
    monkeypatch.setenv("DOD_ASV_STRICT", "1")
    with pytest.raises(ImportError):
        require("dod.not_a_module")
