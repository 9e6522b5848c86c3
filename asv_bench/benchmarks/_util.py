"""Helpers shared by the asv suite (not a benchmark module: no time_ names)."""
import importlib
import os

try:                        # asv's runner: skips from inside a benchmark body, not only setup()
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:         # run outside asv (an older asv, or plain Python)
    SkipNotImplemented = NotImplementedError


def require(module):
    """Import `module` or tell asv to skip: commits that predate it lack it.

    With DOD_ASV_STRICT=1 (CI, at HEAD) the ImportError propagates: there a
    benchmark whose module is broken must fail, not skip.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if os.environ.get("DOD_ASV_STRICT") == "1":
            raise
        raise NotImplementedError(f"{module} is not in this commit: {e}") from None


def management(TrackerConfig):
    """The track management every tracker benchmark runs on every commit:
    M-of-N confirmation and single-point births (a commit before those
    options had no other)."""
    return dict(confirmation="m_of_n", initiation="single") if hasattr(TrackerConfig, "confirmation") else {}


def skip(reason):
    """Skip this benchmark (one of several sharing a setup()) on a commit that lacks what it measures."""
    raise SkipNotImplemented(reason)


def speedup(slow, fast, rounds=7):
    """slow() / fast(), each a measured cost: the median over `rounds` of the
    two timed back to back. Interleaved, a drift of the machine (another
    process, the clock speed) lands on both sides of a ratio alike; two
    separate medians can land it on one side only and move the ratio twofold."""
    ratios = sorted(slow() / fast() for _ in range(rounds))
    return ratios[len(ratios) // 2]


def openmp_env():
    """The tick's OpenMP wait settings, the same for every commit timed:
    PASSIVE with 3,000 spins before a worker sleeps, as
    dod.tracker.openmp.default_wait_policy sets for the bench and the demo
    (written out here, not imported, so that commits older than that module
    run under the same settings). libgomp reads them when the engine first
    loads: call this at a benchmark module's import. Yours win, whole."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
        os.environ["GOMP_SPINCOUNT"] = "3000"
