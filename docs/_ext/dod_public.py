"""The public Python names of dod: what the API reference must document.

A module is public when no part of its dotted name (after ``dod``) starts
with an underscore. Its public names are its ``__all__`` where it defines
one; otherwise every attribute without a leading underscore that is not a
module and is either defined in that module (a class or function whose
``__module__`` is the module) or a value (a constant, an instance) rather
than a class or function imported from elsewhere. Used by
``tests/test_docs_coverage.py`` and by ``python docs/_ext/dod_public.py``,
which prints the API pages' listing of every public module.
"""
import importlib
import inspect
import pkgutil


def public_modules():
    import dod
    names = ["dod"]
    for info in pkgutil.walk_packages(dod.__path__, "dod."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


def _is_code(value):
    return inspect.isclass(value) or inspect.isroutine(value)


def public_names(module_name):
    """(functions and classes, data) of one public module, in definition order."""
    mod = importlib.import_module(module_name)
    if hasattr(mod, "__all__"):
        names = list(mod.__all__)
    else:
        names = [n for n, v in vars(mod).items()
                 if not n.startswith("_") and not inspect.ismodule(v)
                 and (not _is_code(v) or getattr(v, "__module__", None) == module_name)]
    code = [n for n in names if _is_code(getattr(mod, n))]
    data = [n for n in names if not _is_code(getattr(mod, n))]
    return code, data


def reexports():
    """Names the ``dod`` package re-exports lazily, with the module that
    defines each (where the reference documents it)."""
    import dod
    return {name: getattr(importlib.import_module(mod), name).__module__
            for name, mod in dod._EXPORTS.items()}


if __name__ == "__main__":
    for m in public_modules():
        code, data = public_names(m)
        print(m, "code:", " ".join(code), "| data:", " ".join(data))
