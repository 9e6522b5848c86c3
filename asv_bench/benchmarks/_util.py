"""Helpers shared by the asv suite (not a benchmark module: no time_ names)."""
import importlib
import os


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
