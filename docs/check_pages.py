#!/usr/bin/env python3
"""Does the built documentation work offline, and does it render?

    python docs/check_pages.py [docs/_build/html]              # both checks
    python docs/check_pages.py --no-browser [docs/_build/html] # the offline check only (CI)
    python docs/check_pages.py --shots DIR [docs/_build/html]  # keep the screenshots in DIR

1. Offline: no built page or stylesheet loads anything from outside the
   site. Every ``<script src>``, ``<link href>`` (stylesheets, fonts,
   icons, preloads), ``<img src>``, ``<source>``, ``<iframe>`` and every
   CSS ``url(...)`` / ``@import`` must be a relative path or a data URI,
   never ``http://``, ``https://`` or ``//host``. (Links that a reader
   clicks, ``<a href>``, are not loads and are allowed.)
2. Rendering: headless Chromium (CHROMIUM, default: chromium, then
   chromium-browser, google-chrome) opens the front page and one API page
   (``dod.table.Table``) from ``file://`` with the network off (in a new
   network namespace when ``unshare -rn`` works, otherwise with every
   request sent to a proxy that does not exist). The DOM it built must hold
   the page's content and the screenshot must show it: enough non-white
   pixels, and more than a blank theme frame.

Prints what it found. Exit status: 0 all good, 1 a check failed, 2 no
built site (or, for the rendering check, no browser).
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

# A load from outside: scheme-qualified or protocol-relative.
REMOTE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:)?//")
LOADING_TAGS = re.compile(
    r"<(script|link|img|source|iframe|video|audio|embed|object)\b([^>]*)>", re.I | re.S)
ATTR = re.compile(r"""\b(src|href|data|srcset|poster)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""", re.I)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.I)

PAGES = [
    ("index.html", ["Cython API", "API reference"]),
    ("api/generated/dod.table.Table.html", ["reorder", "Table"]),
]


def remote_loads_in_html(text):
    found = []
    for tag, attrs in LOADING_TAGS.findall(text):
        for name, v1, v2, v3 in ATTR.findall(attrs):
            value = v1 or v2 or v3
            if tag.lower() == "link" and name.lower() == "href":
                rel = re.search(r"""\brel\s*=\s*["']?([^"'>]*)""", attrs, re.I)
                if rel and rel.group(1).strip().lower() in ("canonical", "next", "prev", "search", "index"):
                    continue              # navigation, not a load
            for part in value.split(","):
                url = part.strip().split(" ")[0]
                if REMOTE.match(url):
                    found.append(f"<{tag} {name}={url}>")
    for style in re.findall(r"<style\b[^>]*>(.*?)</style>", text, re.I | re.S):
        found += [f"<style> url({u})" for u in CSS_URL.findall(style) if REMOTE.match(u)]
    return found


def remote_loads_in_css(text):
    return [f"url({u})" for u in CSS_URL.findall(text) if REMOTE.match(u)]


def offline_check(site):
    problems = []
    html = sorted(site.rglob("*.html"))
    css = sorted(site.rglob("*.css"))
    for path in html:
        problems += [f"{path.relative_to(site)}: {p}" for p in remote_loads_in_html(path.read_text(errors="replace"))]
    for path in css:
        problems += [f"{path.relative_to(site)}: {p}" for p in remote_loads_in_css(path.read_text(errors="replace"))]
    print(f"check_pages: offline: {len(html)} pages and {len(css)} stylesheets, "
          f"{len(problems)} loads from outside the site")
    for p in problems[:20]:
        print("  ", p)
    return not problems and bool(html)


# ---- rendering ----------------------------------------------------------------

def browser():
    for name in [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _offline_prefix():
    """`unshare -rn` (a network namespace with no interfaces but lo) when it works here."""
    if shutil.which("unshare"):
        try:
            ok = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        if ok:
            return ["unshare", "-rn"], "no network namespace (unshare -rn)"
    return [], "requests sent to a proxy that does not exist"


def chromium(exe, prefix, args, url, profile):
    cmd = [*prefix, exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--hide-scrollbars", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
           "--disable-background-networking", "--disable-component-update", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def png_pixels(data):
    """(width, height, fraction of pixels that are not near-white) of an 8-bit RGB(A) PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            if depth != 8 or ctype not in (2, 6):
                return width, height, None
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    dark = 0
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            if min(line[x], line[x + 1], line[x + 2]) < 200:
                dark += 1
        prev = line
    return width, height, dark / (width * height)


def render_check(site, shots):
    exe = browser()
    if exe is None:
        print("check_pages: no Chromium (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return None
    prefix, how = _offline_prefix()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for rel, words in PAGES:
            page = site / rel
            if not page.is_file():
                print(f"check_pages: no page {rel}")
                ok = False
                continue
            url = page.resolve().as_uri()
            dom = chromium(exe, prefix, ["--dump-dom"], url, os.path.join(tmp, "p1")).stdout
            text = re.sub(r"<[^>]+>", " ", re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I))
            missing = [w for w in words if w not in text]
            shot = Path(shots or tmp) / (rel.replace("/", "_").replace(".html", "") + ".png")
            shot.parent.mkdir(parents=True, exist_ok=True)
            chromium(exe, prefix, [f"--screenshot={shot}", "--window-size=1280,1400"], url, os.path.join(tmp, "p2"))
            info = png_pixels(shot.read_bytes()) if shot.is_file() else None
            inked = info[2] if info and info[2] is not None else None
            good = not missing and len(dom) > 2000 and inked is not None and inked > 0.01
            ok &= good
            print(f"check_pages: {rel}: DOM {len(dom)} characters"
                  f"{', missing ' + repr(missing) if missing else ''}; screenshot "
                  f"{'%dx%d, %.1f %% of pixels inked' % (info[0], info[1], 100 * inked) if inked is not None else 'not readable'}"
                  f" ({how}){' -> ' + str(shot) if shots else ''}: {'ok' if good else 'FAILED'}")
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site", nargs="?", default=str(HERE / "_build" / "html"))
    ap.add_argument("--no-browser", action="store_true", help="only the offline check (no Chromium)")
    ap.add_argument("--shots", help="keep the screenshots in this folder")
    args = ap.parse_args(argv)
    site = Path(args.site)
    if not (site / "index.html").is_file():
        print(f"check_pages: no built site at {site} (python -m sphinx -b html docs {site})", file=sys.stderr)
        return 2
    ok = offline_check(site)
    if not args.no_browser:
        rendered = render_check(site, args.shots)
        if rendered is None:
            return 2
        ok &= rendered
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
