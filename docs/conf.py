"""Sphinx configuration of dod's documentation site.

Build it (the ``docs`` extra installs what it needs)::

    pip install -e '.[docs]'
    python -m sphinx -W --keep-going -b html docs docs/_build/html

The build is offline: no intersphinx inventory is fetched and the theme
loads no remote font or script (``docs/check_pages.py --offline`` checks the
built pages). The gallery runs ``examples/*.py`` while it builds, except
``gpu_frame.py``, which needs a CUDA GPU and is shown without its output.
"""
import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))

# Document the compiled modules themselves (their docstrings, with the
# signatures Cython embeds), not the .pyi stubs beside them: Sphinx would
# otherwise load a stub in place of the extension module and the next
# Cython module that imports its types would fail.
os.environ["SPHINX_AUTODOC_IGNORE_NATIVE_MODULE_TYPE_STUBS"] = "1"

import dod  # noqa: E402  (the installed package: the reference documents what users import)

project = "dod"
author = "the dod developers"
copyright = "the dod developers"
version = release = dod.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "dod_pxd",                      # docs/_ext/dod_pxd.py: the Cython API pages from the .pxd files
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "archive", "Thumbs.db", ".DS_Store", "sg_execution_times.rst",
                    "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip",
                    "auto_examples/*.json", "auto_examples/*.md5"]
templates_path = ["_templates"]
html_static_path = ["_static"]

# No intersphinx: the build must not reach the network.
nitpicky = False

# ---- autodoc / autosummary / numpydoc -------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_docstring_signature = True      # Cython's embedsignature: the first line of __doc__
autodoc_typehints = "none"              # the signatures carry what the .pyi stubs say
numpydoc_show_class_members = False     # members are documented on the class page itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = set()

# ---- MyST (Markdown pages) ------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# ---- sphinx-gallery: examples/ run at build time --------------------------
# needs CuPy and a CUDA GPU, so it is shown without being run.
os.environ.setdefault("MPLBACKEND", "agg")
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/(?!gpu_frame)[^/]+\.py$",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "show_signature": False,
    "reference_url": {},
    "backreferences_dir": None,
    "matplotlib_animations": False,
    # The computation-times page loads jQuery and DataTables from CDNs.
    "write_computation_times": False,
}

# ---- math without MathJax ----------------------------------------------------
# MathJax would load from a CDN. Math is shown as its TeX source, set apart
# and in a serif face by _static/dod.css: readable offline, nothing to load.
html_math_renderer = "dod_plain"

# ---- HTML: pydata-sphinx-theme, nothing remote ----------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"dod {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 8,
    "icon_links": [],
    "navbar_end": ["theme-switcher", "navbar-icon-links"],
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
    "use_edit_page_button": False,
    "analytics": {},
}
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_css_files = ["dod.css"]


# ---- constants: their value, not the docstring of their type ---------------
def _constant_docstring(app, what, name, obj, options, lines):
    """A module constant has no docstring of its own: autodoc would show the
    docstring of its type (an ndarray's, a dict's). Show its value instead;
    an attribute docstring in the source (a string after the assignment)
    is kept."""
    import inspect
    if what not in ("data", "attribute") or inspect.isclass(obj) or callable(obj) \
            or inspect.isdatadescriptor(obj) or inspect.ismemberdescriptor(obj):
        return
    module, _, attr = name.rpartition(".")
    try:
        from sphinx.pycode import ModuleAnalyzer
        own = any(key[-1] == attr for key in ModuleAnalyzer.for_module(module).find_attr_docs())
    except Exception:
        own = False                 # a compiled module: no source to hold an attribute docstring
    if not own:
        lines[:] = []               # a value's __doc__ is its type's, never its own
    if what != "data":
        return
    text = " ".join(repr(obj).split())
    if len(text) > 300:
        text = text[:300] + " ..."
    lines[:0] = [f"``{type(obj).__name__}``: ``{text}``" if "``" not in text else f"``{type(obj).__name__}``", ""]


def _math_inline(self, node):
    from html import escape
    self.body.append(f'<span class="math dod-math">{escape(node.astext())}</span>')
    raise _SkipNode


def _math_block(self, node):
    from html import escape
    self.body.append(self.starttag(node, "div", CLASS="math dod-math"))
    self.body.append(f"<pre>{escape(node.astext())}</pre></div>")
    raise _SkipNode


from docutils.nodes import SkipNode as _SkipNode  # noqa: E402


def _no_self(app, what, name, obj, options, signature, return_annotation):
    """Cython's embedded signatures name ``self``; Python's do not show it."""
    if signature and what in ("method", "class", "exception"):
        signature = re.sub(r"^\(self(?:, |\))", lambda m: "(" if m.group(0).endswith(", ") else "()", signature)
    return signature, return_annotation


def setup(app):
    app.connect("autodoc-process-docstring", _constant_docstring, priority=100)   # before numpydoc
    app.connect("autodoc-process-signature", _no_self, priority=100)   # the first result wins: before numpydoc
    app.add_html_math_renderer("dod_plain", (_math_inline, None), (_math_block, None))
