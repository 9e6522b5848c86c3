#!/usr/bin/env python3
"""Does the history page show its graphs in a headless browser, offline?

    python asv_bench/check_page.py [asv_bench/html/history/index.html]
    unshare -rn python asv_bench/check_page.py     # with no network at all (Linux)

Renders the page with headless Chromium (CHROMIUM, default: chromium, then
chromium-browser, google-chrome) twice: ``--dump-dom`` for the DOM the
browser built (every ``<img class="graph">`` must carry a data URI that
decodes to a PNG, and nothing may point outside the page), and
``--screenshot`` of the whole page, in which the graphs must be visible:
enough non-white pixels and the colours matplotlib draws lines in. Prints what
it found. Exit status: 0 graphs shown, 1 not, 2 no browser or no page.
"""
import base64
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def browser():
    for name in [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def chromium(exe, args, url, profile):
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--disable-dev-shm-usage", *args, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def png_size(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", data[16:24])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    page = os.path.abspath(argv[0] if argv else os.path.join(HERE, "html", "history", "index.html"))
    if not os.path.isfile(page):
        print(f"check_page: no page at {page}: run asv_bench/plot_history.py first", file=sys.stderr)
        return 2
    exe = browser()
    if exe is None:
        print("check_page: no Chromium (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return 2
    url = "file://" + page
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        p = chromium(exe, ["--dump-dom"], url, os.path.join(tmp, "profile-dom"))
        dom = p.stdout
        imgs = re.findall(r"<img\b[^>]*>", dom)
        graphs = [i for i in imgs if 'class="graph"' in i]
        sizes = []
        for tag in graphs:
            m = re.search(r'src="data:image/png;base64,([^"]+)"', tag)
            size = png_size(base64.b64decode(m.group(1))) if m else None
            sizes.append(size)
            if not size or min(size) < 50:
                failures.append(f"an <img> that is not an embedded PNG of a graph: {tag[:80]}")
        external = re.findall(r'(?:src|href)="(?!data:|#)([^"]+)"', dom) + re.findall(r"<script\b", dom)
        if external:
            failures.append(f"the page refers outside itself: {external[:3]}")
        if not graphs:
            failures.append(f"no graph in the DOM Chromium built ({len(dom)} characters; "
                            f"stderr: {p.stderr.strip()[-300:]})")
        print(f"check_page: DOM from {os.path.basename(exe)}: {len(graphs)} graphs "
              f"({', '.join(f'{w}x{h}' for w, h in filter(None, sizes))}), {len(external)} external references")

        shot = os.path.join(tmp, "page.png")
        height = 400 + sum(h for _, h in filter(None, sizes)) + 60 * len(sizes)
        chromium(exe, [f"--screenshot={shot}", f"--window-size=1300,{min(height, 16000)}"], url,
                 os.path.join(tmp, "profile-shot"))
        if not os.path.isfile(shot):
            failures.append("Chromium wrote no screenshot")
        else:
            import matplotlib.image
            import numpy as np

            img = matplotlib.image.imread(shot)[..., :3]
            if img.dtype != np.uint8:
                img = (img * 255).round().astype(np.uint8)
            ink = (img.min(axis=2) < 200).mean()
            # matplotlib's first line colours (C0 blue, C1 orange): drawn graphs, not broken-image icons
            c0 = (np.abs(img.astype(int) - (31, 119, 180)).sum(axis=2) < 60).sum()
            c1 = (np.abs(img.astype(int) - (255, 127, 14)).sum(axis=2) < 60).sum()
            print(f"check_page: screenshot {img.shape[1]}x{img.shape[0]}: {ink:.1%} non-white, "
                  f"{c0} pixels of line colour C0, {c1} of C1")
            if ink < 0.02 or c0 < 200 * max(1, len(graphs)):
                failures.append("the screenshot shows no graphs (blank page or broken images)")
            keep = os.environ.get("CHECK_PAGE_SCREENSHOT")
            if keep:
                shutil.copy(shot, keep)
    for f in failures:
        print(f"check_page: FAILED: {f}", file=sys.stderr)
    if not failures:
        print(f"check_page: {page} shows its graphs in headless Chromium")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
