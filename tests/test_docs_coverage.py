"""The documentation site covers every public name, and its code runs.

* Every public Python name (docs/_ext/dod_public.py says what that is) is
  listed on its module's page of the API reference, and every page is in
  the reference's contents.
* Every public .pxd has its page in the Cython API, and every declaration
  in it states a contract: a comment or docstring in the .pxd (or on its
  definition in the .pyx beside it), or a mention on its page.
* Every code block of the reference pages is run here or marked as not run
  with a reason; the worked downstream module builds with its setup.py and
  prints what its comments say. The same holds for the code in the .pxd
  comments the Cython pages render: a block is a ``from dod... cimport``
  statement, compiled here, or opens with ``# not run: REASON``.

The site itself is built, with warnings as errors, by the docs step of
.ci/run (``python -m sphinx -W --keep-going -b html docs docs/_build/html``).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

import dod_public  # noqa: E402
import dod_pxd  # noqa: E402


def _autosummary_names(text):
    """Names listed under the autosummary directives of an .rst page."""
    names = []
    for block in re.findall(r"^\.\. autosummary::\n((?:[ \t]+.*\n|\n)+)", text, re.M):
        for line in block.splitlines():
            s = line.strip()
            if s and not s.startswith(":"):
                names.append(s)
    return names


def _toctree_entries(text):
    entries = []
    for block in re.findall(r"^\.\. toctree::\n((?:[ \t]+.*\n|\n)+)", text, re.M):
        entries += [s.strip() for s in block.splitlines() if s.strip() and not s.strip().startswith(":")]
    return entries


# ---- the Python reference ---------------------------------------------------

def test_public_names_are_found():
    modules = dod_public.public_modules()
    assert {"dod", "dod.arena", "dod.table", "dod.ring", "dod.tracker", "dod.thread_cache",
            "dod.numpy_memory", "dod.schema", "dod.arrow", "dod.ring_producer", "dod.bench"} <= set(modules)
    assert not [m for m in modules if any(p.startswith("_") for p in m.split(".")[1:])]
    code, _ = dod_public.public_names("dod.arena")
    assert "Arena" in code
    code, data = dod_public.public_names("dod.resource")
    assert "Resource" in code and "pages" in data
    code, _ = dod_public.public_names("dod.tracker")      # its __all__
    assert "Tracker" in code and "solve_assignment" in code


def test_every_public_module_has_a_page_in_the_reference():
    index = (DOCS / "api" / "index.rst").read_text()
    listed = _toctree_entries(index)
    missing = [m for m in dod_public.public_modules() if m not in listed or not (DOCS / "api" / f"{m}.rst").exists()]
    assert not missing, f"public modules without an API page (docs/api/<module>.rst, listed in docs/api/index.rst): {missing}"
    stale = [e for e in listed if e not in dod_public.public_modules()]
    assert not stale, f"API pages of modules that are not public: {stale}"


@pytest.mark.parametrize("module", dod_public.public_modules())
def test_every_public_name_is_in_the_reference(module):
    page = (DOCS / "api" / f"{module}.rst").read_text()
    assert f".. automodule:: {module}" in page
    code, data = dod_public.public_names(module)
    listed = _autosummary_names(page)
    missing = [n for n in code + data if n not in listed]
    assert not missing, (f"{module}: public names missing from docs/api/{module}.rst "
                         f"(add them to its autosummary list): {missing}")
    extra = [n for n in listed if n not in code + data]
    assert not extra, f"{module}: docs/api/{module}.rst lists names that are not public: {extra}"


@pytest.mark.parametrize("module", dod_public.public_modules())
def test_every_public_name_has_a_docstring(module):
    import importlib
    mod = importlib.import_module(module)
    assert (mod.__doc__ or "").strip(), f"{module} has no module docstring"
    code, _ = dod_public.public_names(module)
    # A dataclass without a docstring gets its signature as __doc__ (one line): that is no docstring.
    bare = [n for n in code if not (getattr(mod, n).__doc__ or "").strip()
            or re.fullmatch(r"\w+\([^\n]*\)", (getattr(mod, n).__doc__ or "").strip())]
    assert not bare, f"{module}: public classes and functions without a docstring: {bare}"


def test_the_package_reexports_are_documented_at_home():
    for name, home in dod_public.reexports().items():
        page = (DOCS / "api" / f"{home}.rst").read_text()
        assert name in _autosummary_names(page), f"dod.{name} is not documented on its home page {home}"


# ---- the Cython reference ---------------------------------------------------

def _pxd_pages():
    pages = {}
    for page in sorted((DOCS / "cython").glob("*.rst")):
        for rel in re.findall(r"^\.\. dod-pxd:: (\S+)", page.read_text(), re.M):
            pages.setdefault(rel, []).append(page)
    return pages


def test_every_public_pxd_has_one_page():
    pages = _pxd_pages()
    index = _toctree_entries((DOCS / "cython" / "index.rst").read_text())
    for pxd in dod_pxd.public_pxd_files(ROOT):
        rel = pxd.relative_to(ROOT).as_posix()
        assert len(pages.get(rel, [])) == 1, f"{rel}: {len(pages.get(rel, []))} pages in docs/cython (need one)"
        assert pages[rel][0].stem in index, f"{pages[rel][0].name} is not in docs/cython/index.rst's contents"
    for rel in pages:
        assert not Path(rel).name.startswith("_"), f"an internal .pxd has a public page: {rel}"


def test_internal_pxd_files_are_not_public():
    public = {p.name for p in dod_pxd.public_pxd_files(ROOT)}
    assert "arena.pxd" in public and "kalman.pxd" in public and "atomics.pxd" in public
    assert not [n for n in public if n.startswith("_")]


_TOP_LEVEL_DECL = re.compile(
    r"^(?:cdef|cpdef|ctypedef)\s+(?:(?:inline|packed|public|readonly|const)\s+)*"
    r"(?:(?:struct|union|class|enum|fused)\s+(?P<tname>\w+)|[^(#=]*?\b(?P<fname>\w+)\s*\()")


@pytest.mark.parametrize("pxd", dod_pxd.public_pxd_files(ROOT), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_pxd_parser_sees_every_declaration(pxd):
    """A plain scan of the file's top-level lines names nothing the page
    renderer missed (a declaration it cannot parse would vanish from the page)."""
    _, decls = dod_pxd.parse_pxd(pxd)
    parsed = {d.name for d in decls}
    seen = set()
    for line in pxd.read_text().splitlines():
        m = _TOP_LEVEL_DECL.match(line)
        if m:
            name = m.group("tname") or m.group("fname")
            if name and not name.startswith("(") and "(*" not in line:
                seen.add(name)
    missing = seen - parsed
    assert not missing, f"{pxd.name}: declarations the page would leave out: {sorted(missing)}"
    assert decls, f"{pxd.name}: no declarations parsed"


@pytest.mark.parametrize("pxd", dod_pxd.public_pxd_files(ROOT), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_pxd_declaration_states_its_contract(pxd):
    rel = pxd.relative_to(ROOT).as_posix()
    header, decls = dod_pxd.parse_pxd(pxd)
    page_text = _pxd_pages()[rel][0].read_text()
    undocumented = []
    for d in decls:
        if d.kind == "class":
            continue                      # the owner's Python face is in the API reference
        commented_body = d.kind in ("struct", "enum") and "#" in d.code
        if d.doc.strip() or commented_body:
            continue
        if d.name and (re.search(rf"\b{re.escape(d.name)}\b", header) or f"``{d.name}``" in page_text):
            continue
        if d.kind == "enum" and d.members and all(f"``{m}``" in page_text for m in d.members):
            continue
        undocumented.append(d.name or f"(enum at line {d.line})")
    assert not undocumented, (f"{rel}: declarations with no contract (comment them in the .pxd, "
                              f"or describe them on docs/cython/{_pxd_pages()[rel][0].name}): {undocumented}")


def _header_cimports(header):
    """The ``from dod... cimport ...`` statements a .pxd header shows (a
    trailing ``, ...`` dropped: it stands for the rest of the file)."""
    out, lines, i = [], header.splitlines(), 0
    while i < len(lines):
        if re.match(r"\s+from dod[\w.]* cimport", lines[i]):
            stmt = lines[i].strip()
            while "(" in stmt and ")" not in stmt and i + 1 < len(lines):
                i += 1
                stmt += " " + lines[i].strip()
            out.append(re.sub(r",\s*\.\.\.\s*$", "", stmt))
        i += 1
    return out


def test_the_cimport_lines_the_pages_show_compile(tmp_path):
    """The 'what to cimport' line at the top of every Cython API page names
    what the .pxd declares: all of them, compiled together as a user would."""
    from cython_build import compile_cython_module

    statements = []
    for pxd in dod_pxd.public_pxd_files(ROOT):
        header, decls = dod_pxd.parse_pxd(pxd)
        statements += _header_cimports(header)
        # a cimport block the pages show without a not-run note is one of these
        for text in [header] + [d.doc for d in decls]:
            statements += [re.sub(r",\s*\.\.\.\s*$", "", b.code.replace("\n", " "))
                           for b in dod_pxd.code_blocks(text) if b.kind == "cimport"]
    assert len(statements) >= 15
    module = compile_cython_module("\n".join(statements) + "\n\nOK = True\n", tmp_path, "docs_cimports")
    assert module.OK


@pytest.mark.parametrize("pxd", dod_pxd.public_pxd_files(ROOT), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_code_block_in_a_pxd_comment_is_compiled_or_marked(pxd):
    """The Cython pages show a .pxd comment's code block only when the test
    above compiles it (a cimport statement) or a ``# not run: REASON`` line
    opens it; anything else is a Sphinx warning, and fails here."""
    header, decls = dod_pxd.parse_pxd(pxd)
    for where, text in [("header", header)] + [(d.name, d.doc) for d in decls]:
        for b in dod_pxd.code_blocks(text):
            assert b.kind != "unmarked", (
                f"{pxd.relative_to(ROOT)} ({where}): a code block that is neither a compiled cimport "
                f"statement nor opened by '# not run: REASON':\n{b.code}")
            assert b.kind == "cimport" or len(b.reason) >= 10


def test_the_pxd_comment_convention():
    """How a comment's code reads: what is shown, and what fails."""
    kinds = lambda text: [(b.kind, b.reason) for b in dod_pxd.code_blocks(text)]   # noqa: E731
    assert kinds("Cimport it:\n\n    from dod.arena cimport (Arena,\n                           dod_arena_push)") == \
        [("cimport", "")]
    assert kinds("Use it:\n\n    from dod.arena cimport Arena\n    cdef Arena a = Arena(64)") == \
        [("unmarked", "")]
    assert kinds("Use it:\n\nnot run: a fragment, the caller's\nnames left out\n"
                 "    cdef Arena a = Arena(64)") == [("not run", "a fragment, the caller's names left out")]
    # a diagram inside a paragraph: marked, the prose around it stays prose
    assert kinds("Layout:\n  not run: a diagram of the pages\n      [ guard ][ data ]\n  and more prose") == \
        [("not run", "a diagram of the pages")]
    assert kinds("Layout:\n  the prose\n      [ guard ][ data ]\n  and more prose") == [("unmarked", "")]
    assert kinds("Layout:\nnot run: a marker with no code under it\nmore prose") == [("unmarked", "")]
    # a bullet item's continuation lines are prose
    assert kinds("Modes:\n  * direct: the common\n    case\n  * hashed") == []


def test_the_pages_say_nothing_about_development_history():
    for pxd in dod_pxd.public_pxd_files(ROOT):
        header, decls = dod_pxd.parse_pxd(pxd)
        for text in [header] + [d.doc for d in decls]:
            assert not re.search(r"\bissue \d+", text), f"{pxd.name}: {text[:200]}"


# ---- code on the reference pages ---------------------------------------------

REFERENCE_PAGES = [DOCS / "index.rst", *sorted((DOCS / "api").glob("*.rst")), *sorted((DOCS / "cython").glob("*.rst"))]
# Files that literalinclude shows, and the test that runs each.
INCLUDED_AND_TESTED = {
    "downstream/particle_step.pyx": "test_the_downstream_module_builds_and_prints_what_it_says",
    "downstream/setup.py": "test_the_downstream_module_builds_and_prints_what_it_says",
    "downstream/use_step.py": "test_the_downstream_module_builds_and_prints_what_it_says",
    "../../examples/table_nogil.pyx": "tests/test_table.py (the cimport test builds it)",
}


def test_every_code_block_is_run_or_says_why_not():
    for page in REFERENCE_PAGES:
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(r"\s*\.\. (code-block|code|sourcecode)::", line) or re.match(r".*[^:]::\s*$", line) and not line.strip().startswith(".."):
                prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                m = re.match(r"\s*\.\. not run: (.+)", prev)
                assert m and len(m.group(1).strip()) > 10, (
                    f"{page.relative_to(ROOT)}:{i + 1}: a code block that is neither run by a test nor "
                    f"preceded by '.. not run: <reason>'")
            m = re.match(r"\s*\.\. literalinclude:: (\S+)", line)
            if m:
                assert m.group(1) in INCLUDED_AND_TESTED, (
                    f"{page.relative_to(ROOT)}:{i + 1}: {m.group(1)} is shown but no test runs it")
                assert (page.parent / m.group(1)).exists()


def _build_downstream(tmp_path):
    work = tmp_path / "downstream"
    shutil.copytree(DOCS / "cython" / "downstream", work)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}      # the compiler needs no sanitizer
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-3000:]
    return work


def test_the_downstream_module_builds_and_prints_what_it_says(tmp_path):
    work = _build_downstream(tmp_path)
    assert list(work.glob("particle_step*.so")), "setup.py built no extension module"
    run = subprocess.run([sys.executable, "use_step.py"], cwd=work, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    promised = re.findall(r"# prints: (.*)$", (work / "use_step.py").read_text(), re.M)
    assert len(promised) >= 3
    assert run.stdout.strip().splitlines() == [p.strip() for p in promised]


# ---- docstrings in numpydoc form ------------------------------------------------

# Classes whose docstrings are complete in numpydoc form: the class states
# its parameters, what it raises and its thread-safety; each public method
# lists every parameter of its signature, and states thread-safety (itself
# or in the class's notes). A class joins this list once it is converted;
# the rest of the reference is generated from the docstrings as they are.
NUMPYDOC_COMPLETE = [
    "dod.table.Table",
    "dod.ring.Ring",
    "dod.ring_producer.RingProducer",
    "dod.arena.Arena",
    "dod.pool.Pool",
    "dod.loop.Loop",
    "dod.schema.Schema",
    "dod.schema.Column",
    "dod.tracker.Tracker",
    "dod.tracker._output.TrackerOutputs",
    "dod.lfpool.LockFreePool",
    "dod.thread_cache.LockFreePoolCache",
    "dod.thread_cache.SegFitCache",
    "dod.segfit.SegFit",
    "dod.freelist.FreeList",
    "dod.atomic_arena.AtomicArena",
    "dod.atomic_arena.ThreadCache",
    "dod.pages.PageSource",
    "dod.guard.GuardedResource",
    "dod.resource.Resource",
    "dod.numpy_memory.NumpyHandler",
    "dod.realtime.Realtime",
    "dod.ring.Slot",
    "dod.arena.Mark",
    "dod.arena.Scope",
    "dod.tracker.Sensor",
    "dod.tracker.ReferenceTracker",
    "dod.tracker.TrackerConfig",
    "dod.tracker.stream.ScanStream",
    "dod.cuda.device_arena.DeviceArena",
    "dod.cuda.pinned_arena.PinnedArena",
    "dod.cuda.frame.ArenaFrame",
    "dod.tracker.mot.MotSequence",
    "dod.tracker.track_log.TrackLog",
    "dod.tracker.demo.SampleStore",
    "dod.tracker.demo.DemoRun",
    "dod.bench.Row",
    "dod.bench.Section",
    "dod.bench.numpy_memory.Counter",
    "dod.bench.pool.Particle",
    "dod.bench.table.Particle",
    "dod.tracker.stonesoup.TrackRecorder",
    "dod.tracker.geodetic.LocalFrame",
    "dod.tracker.replay.Reports",
]

NUMPYDOC_COMPLETE_FUNCTIONS = [
    "dod.tracker.track_log.read_log",
    "dod.tracker.track_log.repair",
    "dod.tracker.track_log.convert",
    "dod.tracker.track_log.log_schema",
    "dod.tracker.solve_assignment",
    "dod.tracker.chi2_ppf",
    "dod.tracker.pack_covariance",
    "dod.tracker.unpack_covariance",
    "dod.get_include",
    "dod.resource.huge_pages",
    "dod.resource.set_huge_pages",
    "dod.segfit.class_size",
    "dod.segfit.class_sizes",
    "dod.realtime.locked_kib",
    "dod.loop.monotonic_ns",
    "dod.numpy_memory.install_default",
    "dod.numpy_memory.handler_name",
    "dod.tracker.scenario.generate",
    "dod.tracker.scenario.iter_scans",
    "dod.tracker.track_schema",
    "dod.tracker.scratch_bytes",
    "dod.tracker.metrics.gospa",
    "dod.tracker.metrics.sparse_gospa",
    "dod.tracker.metrics.ospa",
    "dod.tracker.metrics.hota",
    "dod.tracker.metrics.clear_mot",
    "dod.tracker.metrics.scenario_hota",
    "dod.tracker.metrics.scenario_gospa",
    "dod.tracker.metrics.mot_metrics",
    "dod.tracker.metrics.run_tracker",
    "dod.tracker.mot.anchor_points",
    "dod.tracker.mot.builtin_sequences",
    "dod.tracker.mot.read_mot",
    "dod.tracker.mot.detections_from_truth",
    "dod.tracker.mot.make_config",
    "dod.tracker.mot.track",
    "dod.tracker.mot.score",
    "dod.tracker.mot.evaluate",
    "dod.tracker.mot.main",
    "dod.tracker.demo_view.realtime_line",
    "dod.tracker.demo_view.prefault_line",
    "dod.tracker.demo_view.plain_line",
    "dod.tracker.demo_view.want_live",
    "dod.tracker.demo_view.run_with_view",
    "dod.tracker.demo.build_parser",
    "dod.tracker.demo.main",
    "dod.tracker.bench.loop_buffer",
    "dod.tracker.bench.run",
    "dod.tracker.bench.predict_bytes",
    "dod.tracker.bench.copy_nbytes",
    "dod.tracker.bench.copy_bandwidth",
    "dod.tracker.bench.floor",
    "dod.tracker.bench.main",
    "dod.cuda.frame.detections",
    "dod.cuda.frame.reference_hits",
    "dod.cuda.frame.allocating_frame",
    "dod.cuda.frame.sorted_hits",
    "dod.tracker.sensor.to_polar",
    "dod.tracker.sensor.to_cartesian",
    "dod.tracker.sensor.converted_covariance",
    "dod.tracker.sensor.wrap_angle",
    "dod.tracker.sensor.valid",
    "dod.tracker.scenario.generate_radar",
    "dod.tracker.scenario.iter_radar_scans",
    # benchmarks, the IMM reference and the CUDA helpers
    "dod.bench.thread_counts",
    "dod.bench.median_of",
    "dod.bench.arena.run",
    "dod.bench.atomic.scaling",
    "dod.bench.atomic.overhead",
    "dod.bench.atomic.run",
    "dod.bench.concurrent.scaling",
    "dod.bench.concurrent.overhead",
    "dod.bench.concurrent.run",
    "dod.bench.freelist.run",
    "dod.bench.numpy_memory.faults",
    "dod.bench.numpy_memory.measure",
    "dod.bench.numpy_memory.with_counter",
    "dod.bench.numpy_memory.note",
    "dod.bench.numpy_memory.run",
    "dod.bench.pool.py_churn",
    "dod.bench.pool.py_throughput",
    "dod.bench.pool.py_face_pairs",
    "dod.bench.pool.run",
    "dod.bench.ring.engine_pair",
    "dod.bench.ring.handoff_ns",
    "dod.bench.ring.allocated_bytes_per_item",
    "dod.bench.ring.run",
    "dod.bench.table.particle_schema",
    "dod.bench.table.frame_data",
    "dod.bench.table.insert_table",
    "dod.bench.table.insert_objects",
    "dod.bench.table.insert_dicts",
    "dod.bench.table.insert_structured",
    "dod.bench.table.scan_objects",
    "dod.bench.table.scan_numpy",
    "dod.bench.table.scan_table_python",
    "dod.bench.table.py_churn",
    "dod.bench.table.export_capsules",
    "dod.bench.table.export_stream",
    "dod.bench.table.pyarrow_from_table",
    "dod.bench.table.pyarrow_from_numpy",
    "dod.bench.table.run",
    "dod.tracker.accuracy.configs",
    "dod.tracker.accuracy.score_run",
    "dod.tracker.accuracy.tick_cost",
    "dod.tracker.accuracy.run",
    "dod.tracker.accuracy.dtype_scenes",
    "dod.tracker.accuracy.compare_dtypes",
    "dod.tracker.accuracy.main",
    "dod.tracker.bench_imm.measure",
    "dod.tracker.bench_imm.run",
    "dod.tracker.bench_imm.main",
    "dod.tracker.bench_radar.measure",
    "dod.tracker.bench_radar.run",
    "dod.tracker.bench_radar.main",
    "dod.tracker.bench_numpy.measure",
    "dod.tracker.bench_numpy.run",
    "dod.tracker.bench_numpy.main",
    "dod.tracker.reference_imm.turn_terms",
    "dod.tracker.reference_imm.model_noise",
    "dod.tracker.reference_imm.ct_transition",
    "dod.tracker.reference_imm.transition",
    "dod.tracker.reference_imm.model_predict",
    "dod.tracker.reference_imm.combine",
    "dod.tracker.reference_imm.predict",
    "dod.tracker.reference_imm.position_update",
    "dod.tracker.reference_imm.ekf_update",
    "dod.tracker.reference_imm.update",
    "dod.tracker.reference_imm.birth",
    "dod.cuda.bench.bench_frame",
    "dod.cuda.bench.bench_in_kernel",
    "dod.cuda.bench.bench_columns",
    "dod.cuda.bench.device_line",
    "dod.cuda.bench.main",
    "dod.cuda.kernels.get_module",
    "dod.cuda.kernels.get_function",
    "dod.cuda.kernels.launch",
    # the peers' objects in and out, real data in
    "dod.tracker.stonesoup.scan_from_detections",
    "dod.tracker.stonesoup.sensor_from_model",
    "dod.tracker.stonesoup.cartesian_sigma",
    "dod.tracker.stonesoup.state_order",
    "dod.tracker.stonesoup.require_stonesoup",
    "dod.tracker.geodetic.require_pymap3d",
    "dod.tracker.replay.read_opensky",
    "dod.tracker.replay.read_ais",
    "dod.tracker.metric_inputs.motmetrics_accumulator",
    "dod.tracker.metric_inputs.trackeval_data",
]


def _signature_params(obj, doc):
    """Parameter names of a callable, from Cython's embedded first line or inspect."""
    first = doc.lstrip().split("\n", 1)[0]
    m = re.match(r"^[\w.]+\((.*)\)(?:\s*->.*)?$", first)
    if m:
        raw = m.group(1)
    else:
        import inspect
        try:
            raw = str(inspect.signature(obj))[1:].rsplit(")", 1)[0]
        except (TypeError, ValueError):
            return []
    names = []
    depth, cur = 0, ""
    for ch in raw + ",":
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            part = cur.split("=")[0].strip()
            cur = ""
            if ":" in part:                     # "name: annotation" (Python)
                part = part.split(":")[0].strip()
            if part and part not in ("/", "*", "self", "cls"):
                names.append(part.split()[-1].lstrip("*"))    # "[C type] name" (Cython)
        else:
            cur += ch
    return names


def _numpydoc(doc):
    from numpydoc.docscrape import NumpyDocString
    lines = doc.lstrip().split("\n")
    if re.match(r"^[\w.]+\(.*\)(\s*->.*)?$", lines[0]):
        lines = lines[1:]
    import textwrap
    return NumpyDocString(textwrap.dedent("\n".join(lines)))


@pytest.mark.parametrize("qualname", NUMPYDOC_COMPLETE)
def test_numpydoc_complete_classes(qualname):
    import importlib
    import inspect
    module, _, name = qualname.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    cdoc = _numpydoc(cls.__doc__)
    listed = {n.strip().lstrip("*") for p in cdoc["Parameters"] for n in p.name.split(",")}
    params = _signature_params(cls, cls.__doc__)
    missing = [p for p in params if p not in listed]
    assert not missing, f"{qualname}: parameters not in its Parameters section: {missing}"
    assert cdoc["Raises"] or not params, f"{qualname}: no Raises section"
    assert "Thread-safety" in cls.__doc__, f"{qualname}: no thread-safety statement"
    problems = []
    for attr, value in vars(cls).items():
        if attr.startswith("_") and attr not in ("__getitem__", "__setitem__", "__iter__", "__enter__",
                                                 "__arrow_c_array__", "__arrow_c_stream__", "__arrow_c_schema__"):
            continue
        func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if isinstance(value, property) or inspect.isdatadescriptor(value) or not callable(func):
            doc = getattr(value, "__doc__", None)
            # Cython's cdef attributes cannot carry a docstring: the class's Attributes section does
            # (or, for a dataclass field, its Parameters section).
            if not (doc and doc.strip()) and attr not in {a.name for a in cdoc["Attributes"]} | listed:
                problems.append(f"{attr}: no docstring and not in the class's Attributes section")
            continue
        doc = func.__doc__ or ""
        if not doc.strip():
            problems.append(f"{attr}: no docstring")
            continue
        parsed = _numpydoc(doc)
        names = {n.strip().lstrip("*") for p in parsed["Parameters"] for n in p.name.split(",")}
        missing = [p for p in _signature_params(func, doc) if p not in names]
        if missing:
            problems.append(f"{attr}: parameters not in its Parameters section: {missing}")
        if "Thread-safety" not in doc and attr not in ("__enter__",):
            problems.append(f"{attr}: no thread-safety statement")
    assert not problems, f"{qualname}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("qualname", NUMPYDOC_COMPLETE_FUNCTIONS)
def test_numpydoc_complete_functions(qualname):
    import importlib
    module, _, name = qualname.rpartition(".")
    func = getattr(importlib.import_module(module), name)
    doc = func.__doc__ or ""
    parsed = _numpydoc(doc)
    names = {n.strip().lstrip("*") for p in parsed["Parameters"] for n in p.name.split(",")}
    missing = [p for p in _signature_params(func, doc) if p not in names]
    assert not missing, f"{qualname}: parameters not in its Parameters section: {missing}"
    assert parsed["Returns"] or parsed["Yields"], f"{qualname}: no Returns (or Yields) section"
    assert "Thread-safety" in doc, f"{qualname}: no thread-safety statement"
