"""The Python examples run as written and print what they compute (the GPU
one needs CuPy: tests/gpu; tracker_loop.py and tracker_demo.py run in
test_gaps.py; the .pyx ones are built by their tests). Each expected line is
recomputed here with plain numpy / Python, not read back from dod."""
import csv
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(name, capsys):
    ns = runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    return ns, capsys.readouterr().out.strip().splitlines()


def test_arena_scratch_counts_the_points_near_the_centre(capsys):
    ns, out = _run("arena_scratch.py", capsys)
    pos = np.random.default_rng(0).random((5_000, 2)) * 100.0
    near = int((np.hypot(pos[:, 0] - 50.0, pos[:, 1] - 50.0) < 10.0).sum())
    m = re.fullmatch(r"(\d+) points near the centre; peak scratch use (\d+) bytes of (\d+)", out[0])
    assert m and int(m[1]) == near
    assert 5_000 * 9 <= int(m[2]) <= int(m[3]) == 1 << 20        # 5,000 float64 + 5,000 bool
    assert out[1] == f"in a scope: {near}"
    assert ns["scratch"].used == 0                               # the scope rewound


def test_pool_particles_keeps_the_births_minus_the_deaths(capsys):
    ns, out = _run("pool_particles.py", capsys)
    alive = 0
    for _ in range(60):                                          # 50 births, a tenth dies
        alive += 50
        alive -= alive // 10
    m = re.fullmatch(r"(\d+) live particles, peak (\d+), capacity 10000", out[0])
    assert m and int(m[1]) == alive and int(m[2]) >= alive
    assert out[1].startswith("refused:") and "stale" in out[1].lower()


def test_table_basics_handles_survive_a_remove(capsys):
    ns, out = _run("table_basics.py", capsys)
    assert out[0] == "10 True False"                 # handles[10] keeps its row's id; handles[0] is stale
    schema = "\n".join(out[1:])
    for column in ("pos", "vel", "id", "hits"):
        assert re.search(rf"^{column}: ", schema, re.M), schema
    assert len(ns["particles"]) == 999


def test_track_adsb_follows_each_aircraft_of_the_sample(capsys, monkeypatch):
    pytest.importorskip("pymap3d")
    monkeypatch.setattr("sys.argv", ["track_adsb.py"])          # the default: the sample file
    ns, out = _run("track_adsb.py", capsys)
    with open(EXAMPLES / "data" / "opensky_states_sample.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["lat"]]
    # Distinct positions: a carried-forward one repeats (icao24, lastposupdate).
    distinct = {(r["icao24"], r["lastposupdate"]) for r in rows}
    aircraft = {r["icao24"] for r in rows}
    m = re.fullmatch(r"(\d+) reports of (\d+) aircraft; plane centred at ([-\d.]+), ([-\d.]+)", out[0])
    assert m and int(m[1]) == len(distinct) and int(m[2]) == len(aircraft)
    snapshots = {int(r["time"]) for r in rows}
    m = re.fullmatch(r"(\d+) scans; (\d+) confirmed tracks at the end", out[1])
    assert m and int(m[1]) == len(snapshots) and int(m[2]) == len(aircraft)
    m = re.fullmatch(r"MOTA ([-\d.]+)  IDF1 ([\d.]+)  id switches (\d+)", out[2])
    assert m and float(m[1]) > 0.9 and float(m[2]) > 0.9 and int(m[3]) == 0


def test_track_adsb_takes_a_file_from_the_command_line(capsys, monkeypatch, tmp_path):
    pytest.importorskip("pymap3d")
    lines = (EXAMPLES / "data" / "opensky_states_sample.csv").read_text().splitlines()
    keep = [lines[0]] + [ln for ln in lines[1:] if ln.split(",")[1] == "4b1805"]   # one aircraft
    f = tmp_path / "one.csv"
    f.write_text("\n".join(keep) + "\n")
    monkeypatch.setattr("sys.argv", ["track_adsb.py", str(f)])
    _, out = _run("track_adsb.py", capsys)
    assert out[0].startswith(f"{len(keep) - 1} reports of 1 aircraft")
    assert out[1].endswith("1 confirmed tracks at the end")


def test_track_ais_keeps_one_track_per_vessel_of_the_sample(capsys, monkeypatch):
    pytest.importorskip("pymap3d")
    monkeypatch.setattr("sys.argv", ["track_ais.py"])           # the default: the sample file
    _, out = _run("track_ais.py", capsys)
    with open(EXAMPLES / "data" / "ais_sample.csv", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if float(r["LAT"]) <= 90 and float(r["LON"]) <= 180]
    vessels = sorted({r["MMSI"] for r in rows})
    m = re.fullmatch(r"(\d+) reports of (\d+) vessels; plane centred at ([-\d.]+), ([-\d.]+)", out[0])
    assert m and int(m[1]) == len(rows) and int(m[2]) == len(vessels)
    m = re.fullmatch(r"(\d+) scans; (\d+) confirmed tracks at the end", out[1])
    assert m and int(m[2]) == len(vessels)
    # Each vessel's reports all went to one track of its own (a scan keeps a vessel's latest report
    # of its 10 s window: at most as many as the file holds).
    lines = out[2:2 + len(vessels)]
    for vessel, line in zip(vessels, lines):
        m = re.fullmatch(rf"vessel {vessel}: (\d+) reports, track (\d+) \((\d+)\)", line)
        assert m and int(m[1]) == int(m[3]) <= sum(r["MMSI"] == vessel for r in rows), line
    assert len({re.search(r"track (\d+)", ln)[1] for ln in lines}) == len(vessels)
    assert out[-1] == "tracks shared by two vessels: 0"
