"""Shared test fixtures: hypothesis profiles and a compiler for cimport tests."""
import os

import pytest
from hypothesis import HealthCheck, settings

from cython_build import compile_cython_module

settings.register_profile(
    "default",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# DOD_TEST_THOROUGH=1 runs the model-based walks longer.
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=600)
settings.load_profile("thorough" if os.environ.get("DOD_TEST_THOROUGH") else "default")

# DOD_TEST_TRACKER_THREADS=N: every TrackerConfig made without threads= gets N
# threads and parallel_min_rows=1, so the whole tracker suite runs the
# threaded tick even on small scenes (the sanitize build runs it so in .ci).
# (TrackerConfig makes its ExecutionConfig part with that part's defaults.)
if os.environ.get("DOD_TEST_TRACKER_THREADS"):
    import dataclasses

    from dod.tracker.config import ExecutionConfig

    _fields = [f.name for f in dataclasses.fields(ExecutionConfig)]
    _defaults = list(ExecutionConfig.__init__.__defaults__)
    _defaults[_fields.index("threads")] = int(os.environ["DOD_TEST_TRACKER_THREADS"])
    _defaults[_fields.index("parallel_min_rows")] = 1
    ExecutionConfig.__init__.__defaults__ = tuple(_defaults)


@pytest.fixture
def compile_cython(tmp_path):
    """compile_cython(source) -> module: build a .pyx that cimports dod, as a user would."""

    def build(source: str, name: str | None = None):
        return compile_cython_module(source, tmp_path / "cimport", name)

    return build


# In CI (CI=true) a skip is a failure unless its reason is the one the CI
# machine cannot help: no GPU. .ci/run relies on this hook; a run that skips
# because scipy, motmetrics or a compiler is missing must not pass.
_ALLOWED_SKIP = ("GPU", "CuPy", "CUDA")
_bad_skips = []


def pytest_runtest_logreport(report):
    _note_skip(report)


def pytest_collectreport(report):
    _note_skip(report)


def _note_skip(report):
    if os.environ.get("CI", "").lower() not in ("1", "true", "yes") or not report.skipped:
        return
    if hasattr(report, "wasxfail"):
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    if not any(word in reason for word in _ALLOWED_SKIP):
        _bad_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _bad_skips:
        print("\nCI=true: tests skipped for a reason other than 'no GPU' (a failure in CI):")
        for line in _bad_skips:
            print("  " + line)
        session.exitstatus = 1


# Allocation measures (tests/alloc_measure.py, sys.getallocatedblocks) count
# every thread's allocations. Under pytest-xdist a worker has a second thread,
# execnet's, which receives the controller's messages and allocates as it
# does, also while a measured call has released the GIL (a no-op call showed
# a 1,182-byte rise once in 12,000 there). Such tests get the `allocs` marker,
# so that a parallel run can leave them to a serial one (.ci/run does:
# `-n 2 -m "not allocs"`, then `-m allocs`). The plain `pytest` of the README
# runs them all in one process.
_MEASURES = {"per_call_rises", "PythonAllocations", "c_heap_bytes", "getallocatedblocks", "tracemalloc"}


def _names(code, seen):
    """Global and attribute names `code` (and the code nested in it) uses."""
    if code in seen:
        return set()
    seen.add(code)
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const, seen)
    return names


def _measures_allocations(fn):
    """Does test function `fn` use an allocation measure, itself or through
    a function of its module that it calls (helpers one level down)?"""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    seen = set()
    names = _names(code, seen)
    if names & _MEASURES:
        return True
    for name in names:
        helper = fn.__globals__.get(name)
        if getattr(helper, "__module__", None) == fn.__module__ and hasattr(helper, "__code__"):
            if _names(helper.__code__, seen) & _MEASURES:
                return True
    return False


def pytest_collection_modifyitems(items):
    for item in items:
        if _measures_allocations(getattr(item, "function", None)):
            item.add_marker("allocs")
