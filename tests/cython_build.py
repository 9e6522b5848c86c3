"""Compile a .pyx that cimports dod, as a downstream user would (tests only)."""
import importlib.util
import os
import sysconfig
import uuid
from pathlib import Path

import numpy as np

import dod


def compile_cython_module(source: str, workdir: Path, name: str | None = None):
    """Compile `source` (a .pyx text that cimports dod) against dod.get_include()
    and the installed .pxd files, import it and return the module."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    name = name or f"dod_cimport_{uuid.uuid4().hex[:10]}"
    workdir.mkdir(parents=True, exist_ok=True)
    pyx = workdir / f"{name}.pyx"
    pyx.write_text(source)
    dod_dir = Path(dod.__file__).resolve().parent
    compile_args = ["-O2"]
    link_args = []
    if os.environ.get("DOD_BUILD") == "sanitize":
        compile_args += ["-fsanitize=address,undefined,float-cast-overflow"]
        link_args += ["-fsanitize=address,undefined,float-cast-overflow"]
    elif os.environ.get("DOD_BUILD") == "tsan":
        # compiled by $CC, which the tsan variant requires to be clang (setup.py)
        compile_args += ["-g", "-fsanitize=thread"]
        link_args += ["-fsanitize=thread"]
    ext = Extension(
        name,
        [str(pyx)],
        include_dirs=[np.get_include(), str(dod_dir)],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
        extra_compile_args=compile_args + (["-mcx16"] if sysconfig.get_platform().endswith("x86_64") else []),
        extra_link_args=link_args + ["-latomic"],
    )
    modules = cythonize(
        [ext],
        include_path=[dod.get_include()],
        compiler_directives={"language_level": 3, "boundscheck": False, "wraparound": False},
        quiet=True,
        build_dir=str(workdir / "c"),
    )
    dist = Distribution({"name": name, "ext_modules": modules})
    cmd = build_ext(dist)
    cmd.build_lib = str(workdir)
    cmd.build_temp = str(workdir / "tmp")
    cmd.ensure_finalized()
    # The compiler is not under test: under a sanitizer run (LD_PRELOAD of
    # libasan, LeakSanitizer on) gcc itself would be sanitized, and it does
    # not free what it allocates before exiting.
    saved = {k: os.environ.pop(k) for k in ("LD_PRELOAD",) if k in os.environ}
    try:
        cmd.run()
    finally:
        os.environ.update(saved)
    path = next(workdir.glob(f"{name}*.so"))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
