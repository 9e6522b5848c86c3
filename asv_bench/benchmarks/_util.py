"""Helpers shared by the asv suite (not a benchmark module: no time_ names)."""
import importlib


def require(module):
    """Import `module` or tell asv to skip: commits that predate it lack it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise NotImplementedError(f"{module} is not in this commit: {e}") from None
