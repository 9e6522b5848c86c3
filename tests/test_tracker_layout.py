"""The track table's layout (ExecutionConfig.layout): the choice, its
checks, and what the views of x and P look like in each. That both
layouts give the same tracks bit for bit is the golden test's
(tests/test_tracker_golden.py runs every case in each)."""
import numpy as np
import pytest

from dod.tracker import Tracker, TrackerConfig, track_schema
from dod.tracker.config import ExecutionConfig

SCAN = np.array([[0.0, 0.0], [50.0, 10.0], [90.0, -20.0]])


def _tracker(layout):
    t = Tracker(TrackerConfig(confirmation="m_of_n", initiation="single", layout=layout))
    t.tick(SCAN, dt=0.02)
    t.tick(SCAN + 0.1, dt=0.02)
    return t


def test_the_default_is_lanes():
    assert ExecutionConfig().layout == "lanes"
    assert TrackerConfig().layout == "lanes"
    assert track_schema(2)["x"].order == "F"


@pytest.mark.parametrize("bad", ["columns", "F", "", None, 1])
def test_an_unknown_layout_is_refused(bad):
    with pytest.raises(ValueError, match="layout"):
        TrackerConfig(layout=bad)
    with pytest.raises((ValueError, TypeError)):
        track_schema(2, "cv", bad)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("motion", ["cv", "imm"])
def test_the_schema_orders_x_and_P_only(dim, motion):
    lanes, rows = track_schema(dim, motion, "lanes"), track_schema(dim, motion, "rows")
    assert lanes.names == rows.names
    for name in lanes.names:
        want = "F" if name in ("x", "P") else "C"
        assert lanes[name].order == want, name
        assert rows[name].order == "C", name


def test_views_are_strided_in_lanes_and_contiguous_in_rows():
    lanes, rows = _tracker("lanes"), _tracker("rows")
    for name in ("x", "P"):
        a, b = lanes.column(name), rows.column(name)
        assert a.shape == b.shape and a.shape[0] == len(SCAN)
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
        assert b.flags.c_contiguous
        assert not a.flags.c_contiguous and a.strides[0] == 8
        assert np.shares_memory(a, lanes.table[name])


def test_the_bench_takes_the_layout():
    from dod.tracker import bench
    lines = []
    rows = bench.run(sizes=(50,), scans=5, quick=True, reference=False, out=lines.append, layout="rows")
    assert rows and "x and P in rows" in lines[0]
