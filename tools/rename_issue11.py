#!/usr/bin/env python3
"""Apply the cimport renames of issue 11 ("one house") to a tree.

    python tools/rename_issue11.py [--check] [PATH ...]

PATH defaults to the repository's dod/, tests/, examples/, asv_bench/,
README.md and CONVENTIONS.md. Files are rewritten in place (``--check``
only lists what would change and exits 1 if anything would). It is
idempotent: run it again over a branch merged after the rename.

What it renames (the list is also in CHANGELOG.md):

* the atomic arena's C names: ``dod_atomic_arena*`` -> ``dod_aa*`` and
  ``dod_atomic_cache*`` -> ``dod_aa_cache*`` (so that ``dod_atomic_*`` is
  only the atomics header), with the allocation verb spelled out:
  ``dod_atomic_arena_alloc`` -> ``dod_aa_allocate``,
  ``dod_atomic_arena_realloc`` -> ``dod_aa_reallocate``,
  ``dod_atomic_cache_alloc`` -> ``dod_aa_cache_allocate``;
* ``dod_freelist_alloc`` -> ``dod_freelist_allocate``;
* ``dod._atomic`` -> ``dod.atomics`` (``_atomic.h`` -> ``atomics.h``), public now;
* the engine struct of every owner, taken by address in Cython
  (``&owner.arena``, ``&owner.pool``, ``&owner.fl``, ``&owner.source``,
  ``&owner.guard``, ``&owner.cache``, ``&owner.segfit``) -> ``&owner.engine``,
  and ``owner.pool`` (etc.) copied to or from a local -> ``owner.engine``.

What it cannot do safely, and only reports (``REVIEW`` lines): a struct
field read without ``&`` (``owner.pool.in_use`` in Cython), and ``stats()``
keys, whose meaning depends on the owner's type. See the README changelog
for the stats keys.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["dod", "tests", "examples", "asv_bench", "README.md", "CONVENTIONS.md"]
SUFFIXES = {".pyx", ".pxd", ".pyi", ".py", ".md", ".h", ".txt", ".cfg", ".toml"}

# Order matters: specific names before the prefix rules.
WORDS = [
    (r"\bdod_atomic_arena_alloc_slow\b", "dod_aa_allocate_slow"),
    (r"\bdod_atomic_arena_alloc\b", "dod_aa_allocate"),
    (r"\bdod_atomic_arena_realloc\b", "dod_aa_reallocate"),
    (r"\bdod_atomic_cache_alloc\b", "dod_aa_cache_allocate"),
    (r"\bdod_atomic_cache", "dod_aa_cache"),
    (r"\bdod_atomic_arena", "dod_aa"),
    (r"\bdod_freelist_alloc\b", "dod_freelist_allocate"),
    (r"\bdod\._atomic\b", "dod.atomics"),            # the atomics are public now
    (r"\b_atomic\.(h|pxd)\b", r"atomics.\1"),
]

ENGINE_ATTRS = ("arena", "pool", "fl", "source", "guard", "cache", "segfit")
# &x.pool, &self.owner.pool, &x.pool.chunks -> &x.engine...; not &x.pool._private
# (an owner's private field) and not &x.arena.engine (already an engine).
# Not `&c.segfit` / `&c.pool` (fields of the C thread-cache structs, whose
# documented local name is `c`), nor a field reached through `engine.`.
ADDRESS = re.compile(r"&(?!c\.)((?:\w+\.)*\w+)(?<!engine)\.(" + "|".join(ENGINE_ATTRS) + r")\b(?!\.(?:engine\b|_))")
# The engine struct copied to or from a local (``local = owner.pool``): the
# name the documentation uses for an owner is `owner`.
OWNER = re.compile(r"(?<![.\w])owner\.(" + "|".join(ENGINE_ATTRS) + r")\b(?!\.(?:engine\b|_))")
# Cython reads of an engine field without &: reported, not rewritten.
FIELD_READ = re.compile(r"\b(\w+)\.(" + "|".join(ENGINE_ATTRS) + r")\.(in_use|free|base|used|capacity|"
                        r"allocations|failed|peak|stride|count|touched|prior|chunks|head|block_size|"
                        r"mapped|live|free_blocks|strategy)\b")
OLD_STATS = re.compile(r"stats\(\)\[\s*[\"'](in_use|bytes|bytes_in_use|mapped)[\"']")


def rewrite(text):
    # A changelog lists the old names on purpose: leave it as it is.
    head, mark, log = text.partition("\n## Changelog\n")
    if mark:
        return rewrite(head) + mark + log
    for pat, new in WORDS:
        text = re.sub(pat, new, text)
    text = ADDRESS.sub(lambda m: f"&{m.group(1)}.engine", text)
    return OWNER.sub("owner.engine", text)


def files(paths):
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix in SUFFIXES and "build" not in f.parts \
                        and f.name != "rename_issue11.py":
                    yield f
        elif p.is_file():
            yield p


def main(argv):
    check = "--check" in argv
    paths = [a for a in argv if a != "--check"] or [ROOT / d for d in DEFAULT]
    changed = 0
    for f in files(paths):
        try:
            old = f.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite(old)
        if new != old:
            changed += 1
            print(("would rewrite " if check else "rewrote ") + str(f))
            if not check:
                f.write_text(new)
        for n, line in enumerate(new.splitlines(), 1):
            if any(m.group(1) != "self" for m in FIELD_READ.finditer(line)):
                print(f"REVIEW {f}:{n}: engine field read without &: {line.strip()}")
            if OLD_STATS.search(line):
                print(f"REVIEW {f}:{n}: stats key renamed for some owners: {line.strip()}")
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
