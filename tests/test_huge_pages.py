"""The huge-page hint of the pages resource and of PageSource (dod.resource:
madvise(MADV_HUGEPAGE) from HUGE_PAGES_MIN bytes, switched per process).

Whether a mapping carries the hint is read from its VmFlags in
/proc/self/smaps ("hg": VM_HUGEPAGE, set by the madvise whatever the
system's THP mode, on every kernel built with THP); whether the kernel then
gives huge pages is its own setting, not tested here.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from dod import resource
from dod.arena import Arena
from dod.pages import PageSource
from dod.table import Table

MiB = 1 << 20
THP = os.path.isdir("/sys/kernel/mm/transparent_hugepage")      # a kernel built with THP takes the hint

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps (Linux)")


def vm_flags(address):
    """The VmFlags of the mapping that holds `address`."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and not head[0].endswith(":"):
                lo, hi = (int(v, 16) for v in head[0].split("-"))
                inside = lo <= address < hi
            elif inside and head[0] == "VmFlags:":
                return set(head[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def hinted(array):
    return "hg" in vm_flags(array.__array_interface__["data"][0])


@pytest.fixture
def hint_on():
    was = resource.set_huge_pages(True)
    yield
    resource.set_huge_pages(was)


def test_the_default_follows_the_environment():
    assert resource.huge_pages() == (os.environ.get("DOD_HUGE_PAGES", "1") == "1")
    assert resource.HUGE_PAGES_MIN == 4 * MiB


def test_page_source_hints_large_mappings_only(hint_on):
    ps = PageSource()
    big = ps.empty(resource.HUGE_PAGES_MIN, np.uint8)
    small = ps.empty(resource.HUGE_PAGES_MIN - 4096, np.uint8)
    assert hinted(big) == THP
    assert not hinted(small)
    assert not big.any()                      # still zero-filled pages


def test_the_switch_applies_to_later_mappings_and_returns_the_previous_setting(hint_on):
    ps = PageSource()
    before = ps.empty(8 * MiB, np.uint8)
    assert resource.set_huge_pages(False) is True
    try:
        assert resource.huge_pages() is False
        after = ps.empty(8 * MiB, np.uint8)
        assert not hinted(after)
        assert hinted(before) == THP          # a mapping keeps what it was given
        assert resource.set_huge_pages(False) is False
    finally:
        assert resource.set_huge_pages(True) is False
    assert hinted(ps.empty(8 * MiB, np.uint8)) == THP


def test_arena_and_table_memory_from_the_pages_resource_is_hinted(hint_on):
    a = Arena(16 * MiB)
    assert hinted(a.empty(10, np.float64)) == THP
    t = Table({"x": (np.float64, (4,))}, 1 << 18)       # 8 MiB column
    t.insert_many(x=np.ones((3, 4)))
    assert hinted(t["x"]) == THP
    assert not hinted(Arena(1 * MiB).empty(10, np.float64))


@pytest.mark.parametrize("bad", [1, 0, None, "yes", np.bool_(True)])
def test_set_huge_pages_takes_a_bool_only_and_changes_nothing_else(bad, hint_on):
    with pytest.raises(TypeError, match="True or False"):
        resource.set_huge_pages(bad)
    assert resource.huge_pages() is True


@pytest.mark.parametrize("value,expected", [(None, True), ("1", True), ("0", False)])
def test_environment_values(value, expected):
    env = {} if value is None else {"DOD_HUGE_PAGES": value}
    assert resource._huge_pages_from_environment(env) is expected


@pytest.mark.parametrize("value", ["", "2", "off", "true"])
def test_environment_refuses_other_values(value):
    with pytest.raises(ValueError, match="DOD_HUGE_PAGES must be 0 or 1"):
        resource._huge_pages_from_environment({"DOD_HUGE_PAGES": value})


def test_environment_turns_the_hint_off_from_import():
    code = ("import numpy as np, dod.resource as r, dod.pages as p, sys\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "from test_huge_pages import hinted\n"
            "print(r.huge_pages(), hinted(p.PageSource().empty(8 << 20, np.uint8)))")
    env = dict(os.environ, DOD_HUGE_PAGES="0")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
