"""Build script for dod: every ``dod/**/*.pyx`` becomes one extension module.

Build variants are chosen by one environment variable, read here and nowhere
else (flags go through ``extra_compile_args``; never set ``CFLAGS``, which
replaces setuptools' ``-O3 -DNDEBUG``):

    DOD_BUILD=release   (default) -O3 (functions and loops aligned), no bounds
                        checks, DOD_DEBUG=0
    DOD_BUILD=debug     -O0 -g, boundscheck/wraparound/initializedcheck on,
                        DOD_DEBUG=1: 0xCD poison on release, ownership checks
    DOD_BUILD=sanitize  debug + AddressSanitizer + UBSan (compile and link)
    DOD_BUILD=tsan      debug at -O1 + ThreadSanitizer, built with clang and
                        LLVM's OpenMP runtime (libomp): set CC to a clang
                        (CC=clang-14); gcc is refused. Run it under a Python
                        with TSan's runtime linked in (tools/tsan_python.c)
                        and LLVM's Archer tool loaded into libomp
                        (OMP_TOOL_LIBRARIES); the README's
                        "Build variants" has the commands, .ci/run step 6
                        runs them.

OpenMP: the modules in OPENMP_MODULES compile and link with -fopenmp
(DOD_NO_OPENMP=1 leaves it out: their prange loops then run serially).

Switching variants reuses stale objects unless build/ and the generated .c
files are removed first: ``python setup.py clean_variant`` does that.
"""
import os
import shutil
import sys
from pathlib import Path

import numpy
from Cython.Build import cythonize
from setuptools import Command, Extension, setup

HERE = Path(__file__).resolve().parent
VARIANT = os.environ.get("DOD_BUILD", "release").strip().lower() or "release"
if VARIANT not in ("release", "debug", "sanitize", "tsan"):
    sys.exit(f"DOD_BUILD must be release, debug, sanitize or tsan, not {VARIANT!r}")
DEBUG = VARIANT in ("debug", "sanitize", "tsan")

compile_args = []
link_args = []
macros = [("NPY_NO_DEPRECATED_API", "NPY_2_0_API_VERSION")]
if DEBUG:
    compile_args += ["-O0", "-g3", "-fno-omit-frame-pointer"]
    macros += [("DOD_DEBUG", "1")]
else:
    # Functions on cache lines and loops on 32 bytes: a change elsewhere in
    # a module then no longer moves a hot loop across a fetch boundary.
    # Unaligned, an edit to grid.pxd that left the tracker's gating code
    # byte for byte the same moved it 240 bytes and its tentative stage
    # took 122 against 116 us a tick (10,000 targets); aligned, 114-115
    # both ways, and the whole tick as fast as before.
    compile_args += ["-O3", "-falign-functions=64", "-falign-loops=32"]
    macros += [("DOD_DEBUG", "0"), ("NDEBUG", None)]
if VARIANT == "sanitize":
    # float-cast-overflow is not part of gcc's "undefined": a NaN or an
    # out-of-range double converted to an integer (a NaN track position
    # reached the grid's cell coordinates that way).
    san = ["-fsanitize=address,undefined,float-cast-overflow",
           "-fno-sanitize-recover=undefined,float-cast-overflow"]
    compile_args += san
    link_args += san
if VARIANT == "tsan":
    # ThreadSanitizer needs clang here, not gcc: the OpenMP modules must use
    # LLVM's runtime (libomp), whose OMPT interface lets the Archer tool tell
    # TSan about the team's fork/join, barriers and tasks. libgomp has no such
    # interface and is not instrumented: under TSan its own synchronisation
    # shows up as hundreds of races in the threaded tick. -O1: TSan at -O0
    # made the threaded tracker tests several times slower for nothing found.
    if "clang" not in os.path.basename(os.environ.get("CC", "").split(" ")[0]):
        sys.exit("DOD_BUILD=tsan builds with clang and LLVM's OpenMP runtime: "
                 "set CC=clang-14 (Debian: apt-get install clang-14 libomp-14-dev)")
    compile_args += ["-O1", "-fsanitize=thread"]
    link_args += ["-fsanitize=thread"]
# sqrt as one instruction: without this gcc follows each sqrt with a test and
# a libm call that only sets errno for a negative argument (dod reads errno
# only after system calls). No result changes: sqrt is correctly rounded both ways.
compile_args += ["-fno-math-errno"]
# No a * b + c fused into one FMA (gcc's default for C where the target has
# FMA, as the AVX2 path of dod/tracker/vector_kernels.h has; clang's within
# an expression): the fused result rounds once, not twice, so each
# instruction-set path would give its own bits. Off, every path and every
# variant computes what the source says, in its order.
compile_args += ["-ffp-contract=off"]
# 16-byte compare-and-swap for the lock-free stacks (dod/atomics.h).
if os.uname().machine in ("x86_64", "AMD64"):
    compile_args += ["-mcx16"]
link_args += ["-latomic"]

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": not DEBUG,
    "embedsignature": True,
    "freethreading_compatible": False,
    # No generated __reduce_cython__/__setstate_cython__: a copy or unpickle
    # of a lease, pin or mark is a second owner of the same count (its
    # __dealloc__ would unpin a block a live view still uses), and
    # __setstate_cython__ rewrites a live object's fields. Classes that can
    # be pickled say so with their own __reduce__.
    "auto_pickle": False,
}


# Modules whose prange loops run on OpenMP threads (as scikit-learn builds
# them: -fopenmp at compile and link time, libgomp's persistent thread pool).
OPENMP_MODULES = {"dod.tracker._bare_loop", "dod.tracker._engine", "dod.tracker._tick",
                  "dod.tracker._intake", "dod.tracker._predict", "dod.tracker._gate",
                  "dod.tracker._clusters", "dod.tracker._associate", "dod.tracker._update",
                  "dod.tracker._deaths", "dod.tracker._births", "dod.tracker._two_point",
                  "dod.tracker._order", "dod.tracker._clutter"}
OPENMP = [] if os.environ.get("DOD_NO_OPENMP") else ["-fopenmp"]

# C headers whose change rebuilds a module (Cython tracks .pxd files, not these).
HEADER_DEPENDS = {"dod.tracker._vector": ["dod/tracker/vector_kernels.h"]}


def extensions():
    exts = []
    for pyx in sorted((HERE / "dod").rglob("*.pyx")):
        rel = pyx.relative_to(HERE)
        name = ".".join(rel.with_suffix("").parts)
        omp = OPENMP if name in OPENMP_MODULES else []
        exts.append(
            Extension(
                name,
                [str(rel)],
                depends=HEADER_DEPENDS.get(name, []),
                include_dirs=[numpy.get_include(), str(HERE / "dod")],
                define_macros=macros,
                extra_compile_args=compile_args + omp,
                extra_link_args=link_args + omp,
            )
        )
    return exts


class CleanVariant(Command):
    """Remove build/ and every generated .c/.so so the next build starts clean."""

    description = "remove build products so a different DOD_BUILD variant starts clean"
    user_options = []

    def initialize_options(self):
        pass

    def finalize_options(self):
        pass

    def run(self):
        shutil.rmtree(HERE / "build", ignore_errors=True)
        for pyx in (HERE / "dod").rglob("*.pyx"):
            for generated in (pyx.with_suffix(".c"), *pyx.parent.glob(pyx.stem + ".*.so")):
                if generated.exists():
                    generated.unlink()


def variant_changed():
    """True when the last build in this tree was another variant (then regenerate all C)."""
    stamp = HERE / "build" / "dod-variant"
    previous = stamp.read_text().strip() if stamp.exists() else None
    stamp.parent.mkdir(exist_ok=True)
    stamp.write_text(VARIANT)
    return previous is not None and previous != VARIANT


JOBS = int(os.environ.get("DOD_BUILD_JOBS", str(os.cpu_count() or 1)))

setup(
    ext_modules=cythonize(
        extensions(),
        compiler_directives=directives,
        nthreads=JOBS if JOBS > 1 else 0,
        force=variant_changed(),
    ),
    cmdclass={"clean_variant": CleanVariant},
    options={"build_ext": {"parallel": JOBS}},
)
