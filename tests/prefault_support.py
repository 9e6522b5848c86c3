"""Shared by the prefault tests (test_pages, test_arena, test_table,
test_prefault): residency from /proc, the page span of a buffer, and a
madvise that refuses MADV_POPULATE_WRITE, preloaded into a fresh
interpreter (the only way to reach the MemoryError of a prefault over
anonymous memory without exhausting the machine)."""
import ctypes
import mmap
import os
import shutil
import subprocess
import sys

import pytest

PAGE = mmap.PAGESIZE
MiB = 1 << 20

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")


def rss():
    """Resident bytes of this process (/proc/self/statm)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def span(address, size):
    """Bytes of the whole pages [address, address + size) touches (0 when empty)."""
    if size == 0:
        return 0
    first = address // PAGE * PAGE
    last = (address + size - 1) // PAGE * PAGE
    return last - first + PAGE


# Refuses MADV_POPULATE_WRITE (ENOMEM, as a kernel short of memory does)
# after DOD_TEST_POPULATE_OK successful calls.
REFUSING_MADVISE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_long populates;

int madvise(void *addr, size_t len, int advice) {
#ifdef MADV_POPULATE_WRITE
    const char *ok = getenv("DOD_TEST_POPULATE_OK");
    if (advice == MADV_POPULATE_WRITE && ok != NULL && atomic_fetch_add(&populates, 1) >= atol(ok)) {
        errno = ENOMEM;
        return -1;
    }
#endif
    return (int)syscall(SYS_madvise, addr, len, advice);
}

int refuses_populate(void) {       /* 0: the headers lack it, and so does dod's build */
#ifdef MADV_POPULATE_WRITE
    return 1;
#else
    return 0;
#endif
}
"""


def run_refused(tmp_path, script, *args, ok=2):
    """Run `script` (python -c) with args in an interpreter whose madvise
    refuses every MADV_POPULATE_WRITE after the first `ok`; returns its
    stdout, asserting a zero exit. Skips (with the reason) where no C
    compiler or no MADV_POPULATE_WRITE is there to refuse."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.skip(reason="no C compiler to build the refusing madvise")
    (tmp_path / "refuse.c").write_text(REFUSING_MADVISE)
    shim = tmp_path / "librefuse.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(shim), str(tmp_path / "refuse.c")], check=True)
    if not ctypes.CDLL(str(shim)).refuses_populate():
        pytest.skip(reason="the C headers lack MADV_POPULATE_WRITE: prefault touches pages instead")
    env = dict(os.environ, DOD_TEST_POPULATE_OK=str(ok))
    # after the sanitizer's runtime where the sanitize build preloads it (it must come first)
    env["LD_PRELOAD"] = ":".join(p for p in (os.environ.get("LD_PRELOAD", ""), str(shim)) if p)
    run = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout
