"""The bench's predict pass against its memory floor (``python -m
dod.tracker.bench --floor``) and the --passes table's shares of the tick.
No timing is compared with anything: speed goals live in the benchmarks."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dod

ROOT = Path(__file__).resolve().parent.parent


def test_predict_bytes_counts_what_the_pass_moves():
    from dod.tracker import track_schema
    from dod.tracker.bench import predict_bytes
    assert sum(predict_bytes(2).values()) == 297 and sum(predict_bytes(3).values()) == 553
    for dim in (2, 3):
        row = {c.name: c.dtype.itemsize * int(np.prod(c.shape)) for c in track_schema(dim).columns}
        # x, P and age read and written: their bytes per row in the track table, twice
        assert predict_bytes(dim)["x, P read + written"] == 2 * (row["x"] + row["P"])
        assert predict_bytes(dim)["age read + written"] == 2 * row["age"]
    with pytest.raises(ValueError):
        predict_bytes(4)
    for dim, total in ((2, 185), (3, 337)):
        row = {c.name: c.dtype.itemsize * int(np.prod(c.shape)) for c in track_schema(dim, dtype="float32").columns}
        assert predict_bytes(dim, "float32")["x, P read + written"] == 2 * (row["x"] + row["P"])
        assert sum(predict_bytes(dim, "float32").values()) == total
    with pytest.raises(ValueError):
        predict_bytes(2, "float16")


def test_copy_bandwidth_is_bytes_read_and_written_per_second():
    from dod.tracker.bench import copy_bandwidth, copy_nbytes
    assert copy_nbytes() >= 256 << 20 and copy_nbytes() % 8 == 0
    assert copy_bandwidth(1 << 20, rounds=2) > 0.0
    for bad in (dict(nbytes=4), dict(nbytes=1 << 10, rounds=0)):
        with pytest.raises(ValueError):
            copy_bandwidth(**bad)


def test_floor_times_predict_on_coasting_tracks():
    from dod.tracker.bench import floor, predict_bytes
    lines = []
    r = floor(300, scans=8, rounds=2, out=lines.append)
    assert r["live"] == 300 and r["ticks"] == 8         # every track coasted through the timed ticks
    assert r["bytes_per_track"] == sum(predict_bytes(2).values())
    assert 0.0 < r["predict_ms_p10"] <= r["predict_ms"] <= r["predict_ms_p90"]
    assert r["floor_ms"] == pytest.approx(1e3 * r["bytes_per_track"] * 300 / r["bandwidth"])
    assert r["ratio"] == pytest.approx(r["predict_ms"] / r["floor_ms"])
    text = "\n".join(lines)
    assert "none died in the timed ticks (300 live after them)" in text
    assert "predict_gate pass gates nothing" in text and ": 297 B" in text
    assert re.search(r"^measured / floor: [\d.]+x$", lines[-1]), lines[-1]
    assert r["working_set"] == 300 * 181 and r["llc"] > 0       # 297 B less x, P and age counted once
    assert "within it" in lines[-2]                             # 54 kB: in any last-level cache
    lines = []
    r = floor(50, dim=3, scans=3, rounds=2, out=lines.append, markdown=True)
    assert r["bytes_per_track"] == 553 and all(ln.startswith("- ") for ln in lines)
    for bad in (dict(n=0), dict(n=10, rounds=1), dict(n=10, warmup=0), dict(n=10, scans=0)):
        with pytest.raises(ValueError):
            floor(**bad, out=lambda *a: None)


def test_floor_times_the_float32_pass_against_its_own_floor():
    from dod.tracker.bench import floor, predict_bytes
    lines = []
    r = floor(300, scans=4, rounds=2, out=lines.append, dtype="float32")
    assert r["dtype"] == "float32" and r["live"] == 300
    assert r["bytes_per_track"] == sum(predict_bytes(2, "float32").values()) == 185
    assert r["floor64_ms"] == pytest.approx(r["floor_ms"] * 297 / 185)
    text = "\n".join(lines)
    assert "x and P in float32" in lines[0] and "x 4 = 112" in text and ": 185 B" in text
    assert "(with float64 x and P: " in text
    assert re.search(r"^measured / floor: [\d.]+x$", lines[-1]), lines[-1]
    with pytest.raises(ValueError):
        floor(10, dtype="float16", out=lambda *a: None)


def test_floor_from_the_command_line():
    env = dict(os.environ, PYTHONPATH=dod.get_include())
    p = subprocess.run([sys.executable, "-P", "-m", "dod.tracker.bench", "--floor", "--sizes", "200", "--scans", "5"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "N=200" in p.stdout and re.search(r"^measured / floor: [\d.]+x$", p.stdout, re.M), p.stdout
    p = subprocess.run([sys.executable, "-P", "-m", "dod.tracker.bench", "--floor", "--sizes", "200", "--scans", "5",
                        "--dtype", "float32"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "x and P in float32" in p.stdout and ": 185 B" in p.stdout, p.stdout
    p = subprocess.run([sys.executable, "-P", "-m", "dod.tracker.bench", "--floor", "--threads", "2"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode == 2 and "--floor times one thread" in p.stderr


def test_passes_table_prints_each_pass_share_of_the_tick():
    from dod.tracker._engine import PASS_NAMES
    from dod.tracker.bench import run
    lines = []
    (row,) = run(sizes=(500,), scans=10, threads=(1,), reference=False, passes=True, out=lines.append)
    shares = row["pass_shares"][1]
    assert shares.shape == (len(PASS_NAMES) + 1,) and (shares[:-1] >= 0).all()
    at = next(i for i, ln in enumerate(lines) if "where the dod tick goes" in ln)
    assert lines[at + 1].split()[:3] == ["N", "threads", "of"] and "outside" in lines[at + 1]
    ms, pct = lines[at + 2].split(), lines[at + 3].split()
    assert ms[2] == "ms" and pct[:2] == ["%", "tick"]
    assert [float(v) for v in pct[2:2 + len(PASS_NAMES) + 1]] == pytest.approx(100 * shares, abs=0.051)
    assert np.isclose(float(ms[3 + PASS_NAMES.index("predict_gate")]), row["passes"][1][0][1], atol=5e-4)
