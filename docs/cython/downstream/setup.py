"""Build the downstream module against the installed dod:

    python setup.py build_ext --inplace

dod.get_include() is the directory above the installed package, where
Cython finds ``dod/arena.pxd`` and the other .pxd files; the C headers the
.pxd files include (``_core.h``, ``atomics.h``) are in the package folder
itself, and numpy's headers are needed because the owners' declarations
cimport numpy.
"""
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

import dod

extension = Extension(
    "particle_step",
    ["particle_step.pyx"],
    include_dirs=[numpy.get_include(), os.path.join(dod.get_include(), "dod")],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")],
    # -mcx16 and libatomic: the 16-byte compare-and-swap of dod/atomics.h (x86-64)
    extra_compile_args=["-O3"] + (["-mcx16"] if os.uname().machine == "x86_64" else []),
    extra_link_args=["-latomic"],
)

setup(
    name="particle-step",
    ext_modules=cythonize([extension], include_path=[dod.get_include()],
                          compiler_directives={"language_level": 3}),
)
