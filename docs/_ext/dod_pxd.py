"""The Cython API pages, read from the shipped ``.pxd`` files.

``.. dod-pxd:: dod/arena.pxd`` renders what a ``cimport`` of that file gives:
its header comment (what to cimport, the invariants, the contract the caller
owns), then every declaration at the top level of the file (and inside its
``cdef extern`` blocks): structs, enums, ctypedefs, fused types, ``cdef`` and
``cdef inline`` functions, and ``cdef class`` owners with their public
attributes. Each declaration is shown as it is declared, with the comment or
docstring that states its contract. A public file split over internal ones
named after it (dod/table.pxd cimports from dod/_table_engine.pxd and
dod/_table_owner.pxd) shows, where it cimports them, the declarations it
takes from them.

``parse_pxd`` is also what ``tests/test_docs_coverage.py`` uses to list the
names every page must document, so the page and the check read the same
declarations.

Code in a comment follows the site's rule (every code block runs in the
tests, or says why not). A paragraph of the comment whose lines are all
indented four spaces is a code block; it is shown only when it is

* a ``from dod... cimport ...`` statement (a header's "what to cimport"
  line), which ``tests/test_docs_coverage.py`` compiles with every other
  page's, or
* opened by a marker line ``# not run: REASON`` (the reason may go on over
  further lines at the marker's indentation), the code indented four spaces
  under it: the page shows the reason as a note above the block.

``code_blocks`` classifies them; an unmarked block (or a line indented four
spaces past its paragraph, outside a bullet item: a hand-laid diagram) is a
Sphinx warning, so the ``-W`` build fails, and the same function fails the
test.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FUNC = re.compile(r"^(?:cdef|cpdef)\s+(?!class\b|struct\b|enum\b|extern\b|union\b|packed\b)"
                   r"(?:inline\s+)?(?P<rest>.*)$")
_NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*\($")


@dataclass
class Decl:
    kind: str                  # struct, enum, ctypedef, fused, function, class
    name: str                  # "" for an anonymous enum
    code: str                  # the declaration as written (fields and body signature only)
    doc: str                   # its contract: docstring or the comment above it
    line: int                  # 1-based line in the .pxd
    members: list = field(default_factory=list)   # enum constants, public class attributes
    source: str = ""           # the internal .pxd that declares it, when the page's file re-exports it


def _comment_text(lines):
    out = []
    for ln in lines:
        s = ln.strip()
        if s.startswith("#"):
            s = s[1:]
            if s.startswith(" "):
                s = s[1:]
            s = s.rstrip()
            m = re.fullmatch(r"-{3,}\s*(.*?)\s*-*", s)
            if m:                           # a section divider: "# ---- cursor: ... ----"
                s = m.group(1)
            out.append(s)
        else:
            out.append("")
    text = "\n".join(out).strip("\n")
    # Development history is no part of a contract: "(issue N)", or a
    # sentence that says when something changed, is left out of the pages.
    text = re.sub(r" *\(issue \d+\)", "", text)
    text = re.sub(r"(?<=\.)\s+[A-Z][^.]*?\bissue \d+\.", "", text, flags=re.S)
    return text


def _indent(s):
    return len(s) - len(s.lstrip(" "))


def _docstring(body_lines):
    """The docstring at the start of a function body, if any."""
    text = "\n".join(body_lines).lstrip()
    m = re.match(r'("""|\'\'\'|"|\')(.*?)\1', text, re.S)
    if not m:
        return ""
    raw = m.group(2)
    first, _, rest = raw.partition("\n")
    rest_lines = rest.splitlines()
    ind = min((_indent(x) for x in rest_lines if x.strip()), default=0)
    return "\n".join([first.strip()] + [x[ind:] for x in rest_lines]).strip()


def _trailing_comment(line):
    code, hash_, comment = line.partition("  #")
    return comment.strip() if hash_ else ""


def _strip_comment(line):
    return line.partition("  #")[0].rstrip() if "  #" in line else line.rstrip()


def _func_name(signature):
    head = signature.split("(", 1)[0] + "("
    m = _NAME_BEFORE_PAREN.search(head)
    return m.group(1) if m else None


def parse_pxd(path):
    """(header comment, [Decl, ...]) of one .pxd file."""
    path = Path(path)
    lines = path.read_text().splitlines()
    n = len(lines)
    i = 0
    header = []
    while i < n and lines[i].lstrip().startswith("#"):
        header.append(lines[i])
        i += 1
    decls = []
    pending = []            # comment lines just above the current line

    def block_end(start, base):
        """Index after the indented block that follows line `start`."""
        j = start + 1
        while j < n and (not lines[j].strip() or _indent(lines[j]) > base):
            j += 1
        while j > start + 1 and not lines[j - 1].strip():
            j -= 1
        return j

    def parse_region(lo, hi, base, in_extern):
        nonlocal pending
        run_doc = ""
        j = lo
        while j < hi:
            raw = lines[j]
            s = raw.strip()
            if not s:
                pending = []
                run_doc = ""
                j += 1
                continue
            if _indent(raw) != base:
                j += 1
                continue
            if s.startswith("#"):
                pending.append(raw)
                j += 1
                continue
            if s.startswith(('"""', "'''")):
                # verbatim C code of a `cdef extern from *` block: not a declaration
                quote = s[:3]
                j += 1 if s.count(quote) >= 2 else 0
                if s.count(quote) < 2:
                    j += 1
                    while j < hi and quote not in lines[j]:
                        j += 1
                    j += 1
                pending = []
                continue
            doc_above = _comment_text(pending)
            if pending:
                run_doc = doc_above
            elif not doc_above:
                # a run of declarations with no blank line between shares the comment above it
                doc_above = run_doc
            pending = []
            if s.startswith(("from ", "cimport ", "import ", "include ")):
                k = j
                stmt = s
                while "(" in stmt and ")" not in stmt and k + 1 < hi:
                    k += 1
                    stmt += " " + lines[k].strip()
                if base == 0 and not in_extern:
                    decls.extend(_reexported(path, stmt))
                j = k + 1
                continue
            if s.startswith("cdef extern from"):
                end = block_end(j, base)
                inner = min((_indent(lines[k]) for k in range(j + 1, end) if lines[k].strip()), default=base + 4)
                parse_region(j + 1, end, inner, True)
                j = end
                continue
            m = re.match(r"(?:cdef|ctypedef)\s+(?:packed\s+)?(struct|union)\s+(\w+)\s*:", s)
            if m:
                end = block_end(j, base)
                body = [lines[k] for k in range(j + 1, end)]
                decls.append(Decl("struct", m.group(2), "\n".join([raw[base:]] + [b[base:] for b in body]),
                                  doc_above or _trailing_comment(raw), j + 1))
                j = end
                continue
            m = re.match(r"(?:cdef|ctypedef)\s+(?:c?p?def\s+)?enum\s*(\w*)\s*:", s)
            if m:
                end = block_end(j, base)
                body = [lines[k] for k in range(j + 1, end)]
                members = [re.match(r"\s*(\w+)", b).group(1) for b in body
                           if b.strip() and not b.strip().startswith("#")]
                decls.append(Decl("enum", m.group(1), "\n".join([raw[base:]] + [b[base:] for b in body]),
                                  doc_above or _trailing_comment(raw), j + 1, members))
                j = end
                continue
            m = re.match(r"ctypedef\s+fused\s+(\w+)\s*:", s)
            if m:
                end = block_end(j, base)
                body = [lines[k] for k in range(j + 1, end)]
                decls.append(Decl("fused", m.group(1), "\n".join([raw[base:]] + [b[base:] for b in body]),
                                  doc_above, j + 1))
                j = end
                continue
            m = re.match(r"cdef\s+class\s+(\w+)", s)
            if m:
                end = block_end(j, base)
                public = []
                shown = [raw[base:]]
                for k in range(j + 1, end):
                    b = lines[k].strip()
                    am = re.match(r"cdef\s+(?:(?:readonly|public)\s+)?(?:[\w\[\]\*\.,\s]+?\s)\**(\w+)\s*(\(|$|#)", _strip_comment(b) + "")
                    if b.startswith("cdef") and am and not am.group(1).startswith("_"):
                        public.append(am.group(1))
                        shown.append(lines[k][base:])
                if len(shown) == 1:
                    shown.append("    ...")
                decls.append(Decl("class", m.group(1), "\n".join(shown), doc_above, j + 1, public))
                j = end
                continue
            if s.startswith("ctypedef"):
                code = _strip_comment(raw[base:])
                name = re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", code.split("(")[0] if "(*" not in code else
                                  code.split("(*", 1)[1])
                nm = re.match(r"\s*(\w+)", code.split("(*", 1)[1]).group(1) if "(*" in code else (name[0] if name else "")
                decls.append(Decl("ctypedef", nm, code, doc_above or _trailing_comment(raw), j + 1))
                j += 1
                continue
            fm = _FUNC.match(s) if not in_extern else re.match(r"(?P<rest>.*)$", s)
            if fm and "(" in s:
                k = j
                sig = [raw[base:]]
                depth = raw.count("(") - raw.count(")")
                while depth > 0 and k + 1 < hi:
                    k += 1
                    sig.append(lines[k][base:])
                    depth += lines[k].count("(") - lines[k].count(")")
                code = "\n".join(_strip_comment(x) for x in sig)
                name = _func_name(code.replace("\n", " "))
                has_body = code.rstrip().endswith(":")
                end = block_end(k, base) if has_body else k + 1
                doc = _docstring(lines[k + 1:end]) if has_body else ""
                if not doc:
                    doc = doc_above or _trailing_comment(sig[-1])
                elif doc_above:
                    doc = doc_above + "\n\n" + doc
                if name:
                    decls.append(Decl("function", name, code.rstrip(":").rstrip(), doc, j + 1))
                j = end
                continue
            if in_extern or s.startswith("cdef "):
                # a variable or constant declaration: `cdef const char* NAME`, `size_t NAME`
                code = _strip_comment(raw[base:])
                m = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", code)
                if m:
                    decls.append(Decl("variable", m.group(1), code, doc_above or _trailing_comment(raw), j + 1))
            j += 1

    parse_region(i, n, 0, False)
    _docs_from_implementation(path, decls)
    return _comment_text(header), decls


def _reexported(path, stmt):
    """The declarations a ``from dod._table_engine cimport a, b`` line of
    dod/table.pxd takes from an internal .pxd that carries part of it (named
    ``_<stem>_...`` beside it, with no page of its own): a cimport of the
    public file gives them, so its page shows them, each with the contract
    its own file states."""
    m = re.match(r"from\s+(dod(?:\.\w+)*)\s+cimport\s+\(?([^)]*)\)?", stmt)
    if not m or not m.group(1).rsplit(".", 1)[-1].startswith(f"_{Path(path).stem}_"):
        return []
    root = Path(path).resolve()
    while root.name != "dod":
        root = root.parent
    root = root.parent
    target = root / (m.group(1).replace(".", "/") + ".pxd")
    if not target.exists():
        return []
    names = {re.split(r"\s+as\s+", n.strip())[0] for n in m.group(2).split(",") if n.strip()}
    out = []
    for d in parse_pxd(target)[1]:
        if d.name in names or (d.kind == "enum" and not d.name and names & set(d.members)):
            d.source = d.source or target.relative_to(root).as_posix()
            out.append(d)
    return out


def _docs_from_implementation(path, decls):
    """A function declared in the .pxd and defined in the .pyx beside it
    takes its contract from the definition's docstring (or the comment
    just above the definition) when the declaration has none."""
    pyx = path.with_suffix(".pyx")
    if not pyx.exists():
        return
    lines = pyx.read_text().splitlines()
    for d in decls:
        if d.kind != "function" or d.doc:
            continue
        for k, ln in enumerate(lines):
            if re.match(rf"(?:cdef|cpdef)\s.*\b{re.escape(d.name)}\s*\(", ln):
                j = k
                while j < len(lines) and not _strip_comment(lines[j]).rstrip().endswith(":"):
                    j += 1
                doc = _docstring(lines[j + 1:j + 40])
                above = []
                a = k - 1
                while a >= 0 and lines[a].lstrip().startswith("#"):
                    above.insert(0, lines[a])
                    a -= 1
                d.doc = doc or _comment_text(above)
                break


def public_pxd_files(root=ROOT):
    """Every shipped .pxd whose file name has no leading underscore."""
    return sorted(p for p in (Path(root) / "dod").rglob("*.pxd") if not p.name.startswith("_"))


# ---- rendering --------------------------------------------------------------

def _inline(text):
    from docutils import nodes
    parts = re.split(r"(``[^`]+``|`[^`]+`)", text)
    out = []
    for p in parts:
        if not p:
            continue
        if p.startswith("``") and p.endswith("``") and len(p) > 4:
            out.append(nodes.literal(p[2:-2], p[2:-2]))
        elif p.startswith("`") and p.endswith("`") and len(p) > 2:
            out.append(nodes.literal(p[1:-1], p[1:-1]))
        else:
            out.append(nodes.Text(p))
    return out


NOT_RUN = re.compile(r"^not run: (\S.{9,})$")
_CIMPORT = re.compile(r"^from dod[\w.]* cimport\b")


@dataclass
class CodeBlock:
    kind: str        # "not run" (marked), "cimport" (compiled by the docs tests), "unmarked"
    code: str        # as shown, dedented
    reason: str      # the marker's reason ("" unless kind is "not run")


def _cimport_only(lines):
    """True when the lines are ``from dod... cimport`` statements and nothing
    else (a parenthesised or backslashed name list may go on over lines)."""
    depth, cont = 0, False
    for ln in lines:
        st = ln.strip()
        if not st:
            continue
        if depth == 0 and not cont and not _CIMPORT.match(st):
            return False
        depth += st.count("(") - st.count(")")
        cont = st.endswith("\\")
    return True


def _segments(block, first):
    """One blank-line-separated paragraph of a comment, cut into
    ("prose", lines) and ("code", CodeBlock) segments in order."""
    lines = block.splitlines()
    base = min(_indent(x) for x in lines if x.strip())
    if base >= 4 and not first:
        code = "\n".join(x[base:] for x in lines)
        return [("code", CodeBlock("cimport" if _cimport_only(lines) else "unmarked", code, ""))]
    segs, prose, k, in_item = [], [], 0, False

    def flush():
        if prose:
            segs.append(("prose", list(prose)))
            prose.clear()

    def indented_run(k, ind):
        body = []
        while k < len(lines) and lines[k].strip() and _indent(lines[k]) >= ind + 4:
            body.append(lines[k])
            k += 1
        cut = min((_indent(x) for x in body), default=0)
        return k, "\n".join(x[cut:] for x in body)

    while k < len(lines):
        ln = lines[k]
        st, ind = ln.strip(), _indent(ln)
        m = NOT_RUN.match(st)
        if m:
            flush()
            reason = [m.group(1)]
            k += 1
            while k < len(lines) and lines[k].strip() and _indent(lines[k]) == ind:
                reason.append(lines[k].strip())
                k += 1
            k, code = indented_run(k, ind)
            segs.append(("code", CodeBlock("not run", code, " ".join(reason)) if code else
                         CodeBlock("unmarked", st, "")))          # a marker with nothing under it
            in_item = False
            continue
        if re.match(r"[*-] ", st):
            in_item = True
        elif ind >= base + 4 and not in_item:
            flush()                         # a layout drawn inside a paragraph, unmarked
            k, code = indented_run(k, base)
            segs.append(("code", CodeBlock("unmarked", code, "")))
            continue
        elif ind == base:
            in_item = False
        prose.append(ln)
        k += 1
    flush()
    return segs


def _paragraphs(text):
    blocks = [b for b in re.split(r"\n\s*\n", text.strip("\n")) if b.strip()]
    return [seg for k, b in enumerate(blocks) for seg in _segments(b, k == 0)]


def code_blocks(text):
    """Every code block of a comment or docstring, as the page shows it."""
    return [payload for kind, payload in _paragraphs(text) if kind == "code"]


def comment_nodes(text, report=None):
    """Docutils nodes for a comment or docstring: paragraphs, bullet lists
    ('* ' or '- ' items) and code blocks (see the module's docstring for
    which are shown). No markup is parsed beyond backquoted code, so any
    comment renders without warnings; `report(message)` is called for each
    code block that is neither compiled by the tests nor marked."""
    from docutils import nodes
    result = []
    for kind, payload in _paragraphs(text):
        if kind == "prose":
            result.extend(_prose_nodes(payload))
            continue
        if payload.kind == "unmarked":
            if report is not None:
                report("a code block in a .pxd comment that is neither a compiled cimport line nor "
                       "marked '# not run: REASON':\n" + payload.code)
            result.append(nodes.literal_block(payload.code, payload.code))
            continue
        if payload.kind == "not run":
            note = nodes.note()
            p = nodes.paragraph()
            p += nodes.strong("Not run: ", "Not run: ")
            p.extend(_inline(payload.reason))
            note += p
            result.append(note)
        result.append(nodes.literal_block(payload.code, payload.code, language="cython"))
    return result


def _prose_nodes(lines):
    from docutils import nodes
    result = []
    base = min(_indent(x) for x in lines if x.strip())
    para, items = [], []
    for ln in lines:
        st = ln.strip()
        if re.match(r"[*-] ", st):
            items.append([st[2:].strip()])
        elif items:
            items[-1].append(st)
        else:
            para.append(st)
    if para:
        p = nodes.paragraph()
        p.extend(_inline(" ".join(para)))
        result.append(p)
    if items:
        bl = nodes.bullet_list()
        for it in items:
            li = nodes.list_item()
            p = nodes.paragraph()
            p.extend(_inline(" ".join(it)))
            li.append(p)
            bl.append(li)
        result.append(bl)
    return result


_KIND_TITLE = {"struct": "struct", "enum": "enum", "ctypedef": "ctypedef", "fused": "fused type",
               "function": "function", "class": "owner class", "variable": "declaration"}


def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives
    from sphinx.util import logging

    logger = logging.getLogger(__name__)

    class PxdDirective(Directive):
        required_arguments = 1
        option_spec = {"no-header": directives.flag}

        def run(self):
            rel = self.arguments[0]
            path = ROOT / rel
            env = self.state.document.settings.env
            env.note_dependency(str(path))
            header, decls = parse_pxd(path)
            module = rel[:-4].replace("/", ".")

            def report(message):
                logger.warning(f"{rel}: {message}", location=(env.docname, self.lineno))

            out = []
            if header and "no-header" not in self.options:
                box = nodes.container(classes=["pxd-header"])
                box.extend(comment_nodes(header, report))
                out.append(box)
            lst = nodes.paragraph()
            lst += nodes.Text(f"{len(decls)} declarations in {rel}: ")
            for k, d in enumerate(decls):
                if k:
                    lst += nodes.Text(", ")
                ref = nodes.reference("", "", internal=True, refid=self._id(module, d))
                ref += nodes.literal(d.name or "enum", d.name or "enum")
                lst += ref
            lst += nodes.Text(".")
            out.append(lst)
            for d in decls:
                box = nodes.container(classes=["pxd-decl", f"pxd-{d.kind}"])
                title = nodes.rubric(classes=["pxd-name"])
                title["ids"].append(self._id(module, d))
                title += nodes.literal(d.name or "(anonymous enum)", d.name or "(anonymous enum)")
                title += nodes.Text(f"  {_KIND_TITLE[d.kind]}, {d.source or rel} line {d.line}")
                box += title
                box += nodes.literal_block(d.code, d.code, language="cython")
                if d.doc:
                    box.extend(comment_nodes(d.doc, report))
                if d.kind == "class" and d.members:
                    p = nodes.paragraph()
                    p += nodes.Text("Public C attributes and methods: ")
                    for k, m in enumerate(d.members):
                        if k:
                            p += nodes.Text(", ")
                        p += nodes.literal(m, m)
                    p += nodes.Text(f". Its Python face is documented in the API reference ({module}).")
                    box += p
                out.append(box)
            return out

        @staticmethod
        def _id(module, d):
            return nodes.make_id(f"pxd-{module}-{d.name or f'enum-{d.line}'}")

    app.add_directive("dod-pxd", PxdDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
