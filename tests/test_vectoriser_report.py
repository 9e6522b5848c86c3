"""gcc vectorises every hot loop of dod/tracker/vector_kernels.h, on each
instruction-set path and for each element type, as its vectoriser report
says (the gated pairs' kernel, double only, with the float64 kernels).

Each hot loop carries a tag comment ``/* vec: NAME */`` on its ``for``
line. The test compiles one path's kernels of one element type (both d)
alone, with the flags setup.py gives every extension plus gcc's
``-fopt-info-vec-optimized``, and asks for two "loop vectorized" lines at
the tagged line using the path's full vector width (d = 2 and d = 3; a
narrower line is an epilogue). The width is in bytes, the same for both
types: 32 bytes on AVX2 are four doubles or eight floats. A change that
makes gcc give up on a loop (a branch it cannot if-convert, a store
pattern it cannot vectorise) fails here, not in a benchmark.
"""
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "dod" / "tracker" / "vector_kernels.h"
# setup.py's flags for the release build's numerics (the test reads them there, below).
FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno"]
TAGS = ("cv_predict", "gate_rows", "cv_update")
# Double only (the gated pairs' distances: double for either element type),
# compiled with the float64 kernels.
PAIR_TAGS = ("pair_d2",)
# path: (its target macro in the header, its vectors' width in bytes)
PATHS = {"baseline": ("", 16), "avx2": ("DOD_VK_TARGET_AVX2", 32), "avx512": ("DOD_VK_TARGET_AVX512", 64)}
# element type: (its C type, the suffix of its kernels' names)
DTYPES = {"float64": ("double", ""), "float32": ("float", "_f32")}

pytestmark = [
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (the report is gcc's)"),
    pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the paths are x86-64's"),
]


def _tag_lines():
    lines = {}
    for no, line in enumerate(HEADER.read_text().splitlines(), 1):
        m = re.search(r"/\* vec: (\w+) \*/", line)
        if m:
            assert m.group(1) not in lines, f"tag {m.group(1)} twice"
            lines[m.group(1)] = no
    return lines


def test_the_flags_are_setup_pys():
    text = (ROOT / "setup.py").read_text()
    for flag in FLAGS[1:]:
        assert f'"{flag}"' in text, f"setup.py no longer passes {flag}: update FLAGS here"


def test_every_hot_loop_is_tagged():
    assert set(_tag_lines()) == set(TAGS + PAIR_TAGS)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("path", list(PATHS))
def test_hot_loops_are_vectorised(path, dtype, tmp_path):
    target, width = PATHS[path]
    ctype, sfx = DTYPES[dtype]
    tags = TAGS + (PAIR_TAGS if dtype == "float64" else ())
    pairs = (f"DOD_VK_DEFINE_PAIRS({path}, {target})\n"
             f"const dod_vk_pairs_fn dod_vk_report_pairs[2] = DOD_VK_PAIRS({path});\n") if PAIR_TAGS[0] in tags else ""
    src = tmp_path / f"report_{path}_{dtype}.c"
    src.write_text(
        "#define DOD_VK_KERNELS_ONLY\n"
        '#include "tracker/vector_kernels.h"\n'
        f"DOD_VK_DEFINE_T({path}, {target}, {ctype}, {sfx})\n"
        f"const dod_vk_set{sfx} dod_vk_report_keep = {{DOD_VK_SET({path}, {sfx})}};\n" + pairs)
    out = subprocess.run(["gcc", *FLAGS, "-fPIC", "-fopt-info-vec-optimized", "-I", str(ROOT / "dod"),
                          "-c", str(src), "-o", str(tmp_path / "report.o")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = out.stderr + out.stdout
    found = {}
    for m in re.finditer(r"vector_kernels\.h:(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors",
                         report):
        if int(m.group(2)) == width:
            found[int(m.group(1))] = found.get(int(m.group(1)), 0) + 1
    missing = [f"{tag} (line {no}: {found.get(no, 0)} of 2)" for tag, no in _tag_lines().items()
               if tag in tags and found.get(no, 0) < 2]
    assert not missing, (f"{path} {dtype}: loops not vectorised with {width}-byte vectors: {', '.join(missing)}\n"
                         f"gcc's report:\n{report}")
