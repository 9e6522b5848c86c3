"""The track log (dod.tracker.track_log): what it writes, who reads it, and what a crash or a full disk leaves."""
import io
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from dod.tracker import Tracker, TrackerConfig
from dod.tracker import demo
from dod.tracker.track_log import KINDS, TrackLog, TrackLogError, convert, read_log, repair

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tracker(events=True, capacity=256, max_detections=128):
    return Tracker(TrackerConfig(capacity=capacity, max_detections=max_detections, events=events,
                                 confirmation="m_of_n", initiation="single"))


def _scans(n, targets=40, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 2000, (targets, 2))
    for k in range(n):
        alive = truth[: targets - (k // 10)]            # a target leaves every 10 scans: deaths
        z = alive + rng.normal(0, 1, alive.shape)
        yield np.vstack([z, rng.uniform(0, 2000, (3, 2))])   # and clutter


def _run(path, n=30, tracker=None, **kw):
    """Log n scans; return what the tracker said each scan (the expected log)."""
    t = _tracker() if tracker is None else tracker
    expected = []
    with TrackLog(path, t, full="wait", **kw) as log:
        for z in _scans(n):
            t.tick(z, 0.1)
            tr = t.tracks(confirmed=True)
            ev = t.events()
            expected.append((t.scans, t.time, tr.ids.copy(), tr.x.copy(), tr.P.copy(), tr.score.copy(),
                             tr.status.copy(), ev.births.copy(), ev.birth_rows.copy(), ev.confirmations.copy(),
                             ev.deaths.copy(), ev.death_status.copy(), ev.track.copy()))
            assert log.append()
    assert log.written == n and log.dropped == 0
    return expected


def _check(table, expected):
    kinds = np.array(table["kind"].to_pylist())
    scan = table["scan"].to_numpy()
    ids = table["id"].to_numpy()
    rows = table["row"].to_numpy()
    status = table["status"].to_numpy()
    n = expected[0][3].shape[1] if expected[0][3].size else 4
    x = table["x"].combine_chunks().flatten().to_numpy().reshape(-1, n)
    P = table["P"].combine_chunks().flatten().to_numpy().reshape(-1, n, n)
    score = table["score"].to_numpy()
    assert np.array_equal(np.unique(scan), [e[0] for e in expected])
    for (s, tm, tid, tx, tP, tscore, tstatus, births, brows, conf, deaths, dstatus, track) in expected:
        at = scan == s
        assert np.all(table["time"].to_numpy()[at] == tm)
        k = at & (kinds == "track")
        assert np.array_equal(ids[k], tid) and np.array_equal(status[k], tstatus)
        assert np.array_equal(x[k], tx) and np.array_equal(P[k], tP) and np.array_equal(score[k], tscore)
        b = at & (kinds == "birth")
        assert np.array_equal(ids[b], births) and np.array_equal(rows[b], brows)
        assert np.array_equal(ids[at & (kinds == "confirmation")], conf)
        d = at & (kinds == "death")
        assert np.array_equal(ids[d], deaths) and np.array_equal(status[d], dstatus)
        a = at & (kinds == "association")
        assert np.array_equal(rows[a], np.arange(track.shape[0]))
        assert np.array_equal(ids[a], np.where(track < 0, 0, track).astype(np.uint64))
        ev = at & (kinds != "track")
        assert np.isnan(x[ev]).all() and np.isnan(P[ev]).all() and np.isnan(score[ev]).all()


def test_round_trip_with_pyarrow(tmp_path):
    path = tmp_path / "tracks.arrow"
    expected = _run(path)
    _check(read_log(path), expected)
    with pa.ipc.open_stream(str(path)) as r:           # the plain reader: a complete stream
        t = r.read_all()
    assert t.num_rows == read_log(path).num_rows
    assert set(t["kind"].to_pylist()) == set(KINDS)     # the scenario has every kind of row


def test_a_scan_larger_than_a_slot_spans_several(tmp_path):
    path = tmp_path / "tracks.arrow"
    expected = _run(path, slots=3, slot_rows=17)        # a scan takes ~6 slots, more than the ring
    _check(read_log(path), expected)


def test_confirmed_tracks_between_tentative_rows_are_logged_in_row_order(tmp_path):
    path = tmp_path / "tracks.arrow"
    t = Tracker(TrackerConfig(capacity=256, max_detections=128, events=True, confirmation="m_of_n",
                              initiation="single", confirmed_first=False))
    expected = _run(path, tracker=t, slots=3, slot_rows=17)    # runs of confirmed rows cut by slots
    _check(read_log(path), expected)


def test_an_idle_priority_writer_writes_every_scan(tmp_path):
    path = tmp_path / "tracks.arrow"
    expected = _run(path, idle=True)                 # the writer runs in the slack; full="wait": all written
    _check(read_log(path), expected)
    with pytest.raises(ValueError):
        TrackLog(tmp_path / "bad.arrow", _tracker(), idle=1)
    assert not (tmp_path / "bad.arrow").exists()


def test_a_3d_tracker_logs_its_state_and_full_covariance(tmp_path):
    path = tmp_path / "tracks.arrow"
    t = Tracker(TrackerConfig(dim=3, capacity=128, max_detections=64, events=True, confirmation="m_of_n",
                              initiation="single"))
    rng = np.random.default_rng(1)
    truth = rng.uniform(0, 1000, (20, 3))
    expected = []
    with TrackLog(path, t, full="wait", slot_rows=7) as log:      # (21 packed values a track)
        for _ in range(12):
            t.tick(truth + rng.normal(0, 1, truth.shape), 0.1)
            tr = t.tracks()
            expected.append((t.scans, tr.ids.copy(), tr.x.copy(), tr.P.copy()))
            assert log.append()
    table = read_log(path)
    track = (np.array(table["kind"].to_pylist()) == "track")
    scan = table["scan"].to_numpy()
    x = table["x"].combine_chunks().flatten().to_numpy().reshape(-1, 6)
    P = table["P"].combine_chunks().flatten().to_numpy().reshape(-1, 6, 6)
    assert expected[-1][1].size == 20
    for s, ids, tx, tP in expected:
        k = track & (scan == s)
        assert np.array_equal(table["id"].to_numpy()[k], ids)
        assert np.array_equal(x[k], tx) and np.array_equal(P[k], tP)


def test_round_trip_with_polars(tmp_path):
    pl = pytest.importorskip("polars")
    path = tmp_path / "tracks.arrow"
    expected = _run(path)
    df = pl.read_ipc_stream(path)
    assert df.height == read_log(path).num_rows
    _check(df.to_arrow(), expected)


def test_round_trip_with_duckdb(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "tracks.arrow"
    expected = _run(path)
    log = read_log(path)                                 # noqa: F841 (duckdb reads the Arrow table by name)
    con = duckdb.connect()
    n = con.execute("select count(*) from log where kind = 'track'").fetchone()[0]
    assert n == sum(e[2].shape[0] for e in expected)
    got = con.execute("select id from log where kind = 'track' and scan = ? order by id",
                      [expected[-1][0]]).fetchall()
    assert [g[0] for g in got] == sorted(expected[-1][2].tolist())


def test_parquet_with_each_reader(tmp_path):
    path = tmp_path / "tracks.parquet"
    expected = _run(path)
    assert path.exists() and not (tmp_path / "tracks.parquet.arrows").exists()
    assert sorted(os.listdir(tmp_path)) == ["tracks.parquet"]
    import pyarrow.parquet as pq
    _check(pq.read_table(path), expected)
    _check(read_log(path), expected)
    try:
        import polars as pl
    except ImportError:
        pl = None
    if pl is not None:
        _check(pl.read_parquet(path).to_arrow(), expected)
    try:
        import duckdb
    except ImportError:
        duckdb = None
    if duckdb is not None:
        n = duckdb.connect().execute(f"select count(*) from read_parquet('{path}')").fetchone()[0]
        assert n == read_log(path).num_rows


def test_a_tracker_without_events_logs_its_tracks(tmp_path):
    t = _tracker(events=False)
    path = tmp_path / "tracks.arrow"
    with TrackLog(path, t, full="wait") as log:
        assert not log.events
        for z in _scans(10):
            t.tick(z, 0.1)
            log.append()
    assert set(read_log(path)["kind"].to_pylist()) <= {"track"}


@pytest.mark.parametrize("where", ["missing_dir", "a_directory", "parquet_in_missing_dir", "parquet_a_directory"])
def test_a_path_that_cannot_be_written_raises_and_creates_nothing(tmp_path, where):
    (tmp_path / "d").mkdir()
    (tmp_path / "d.parquet").mkdir()
    path = {"missing_dir": tmp_path / "nope" / "t.arrow", "a_directory": tmp_path / "d",
            "parquet_in_missing_dir": tmp_path / "nope" / "t.parquet",
            "parquet_a_directory": tmp_path / "d.parquet"}[where]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OSError):
        TrackLog(path, _tracker())
    assert sorted(os.listdir(tmp_path)) == before
    assert os.listdir(tmp_path / "d") == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_disk_that_refuses_at_the_start_raises_at_construction():
    with pytest.raises(OSError):
        TrackLog("/dev/full", _tracker())
    assert os.path.exists("/dev/full")                 # (a file it did not create is never removed)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_disk_that_refuses_later_surfaces_at_the_next_append(tmp_path):
    t = _tracker()
    path = tmp_path / "tracks.arrow"
    log = TrackLog(path, t, full="wait")
    scans = _scans(40)
    for _ in range(3):
        t.tick(next(scans), 0.1)
        log.append()
    deadline = time.monotonic() + 30
    while log.written < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert log.written == 3
    good = os.path.getsize(path)
    os.close(log._fd)                                  # the disk fills up: writes now fail (ENOSPC)
    log._fd = os.open("/dev/full", os.O_WRONLY)
    with pytest.raises(TrackLogError) as e:
        for z in scans:
            t.tick(z, 0.1)
            log.append()
            time.sleep(0.002)
    assert isinstance(e.value.__cause__, OSError)
    with pytest.raises(TrackLogError):
        log.close()
    assert os.path.getsize(path) == good
    assert read_log(path)["scan"].to_numpy().max() == 3   # the scans written before it, whole


def test_memory_is_the_ring_and_a_full_ring_drops_and_counts(tmp_path):
    t = _tracker()
    log = TrackLog(tmp_path / "tracks.arrow", t, slots=4)
    gate = threading.Event()
    write = log._write_scan

    def slow(pieces):                                   # the disk stalls until the gate opens
        gate.wait()
        write(pieces)
    log._write_scan = slow
    queued = 0
    for z in _scans(20):
        t.tick(z, 0.1)
        queued += log.append()
    assert log._ring.slots == 4 and log.appended == queued
    assert queued <= 5 and log.dropped == 20 - queued   # 4 slots (+1 taken by the stalled writer)
    gate.set()
    log.close()
    assert log.written == queued
    scans = np.unique(read_log(tmp_path / "tracks.arrow")["scan"].to_numpy())
    assert scans.shape[0] == queued and scans[0] == 1


def test_a_full_ring_waits_with_a_bound(tmp_path):
    t = _tracker()
    log = TrackLog(tmp_path / "tracks.arrow", t, slots=2, full="wait", timeout=0.05)
    gate = threading.Event()
    write = log._write_scan
    log._write_scan = lambda pieces: (gate.wait(), write(pieces))
    with pytest.raises(TimeoutError):
        for z in _scans(20):
            t.tick(z, 0.1)
            log.append()
    gate.set()
    log.close()
    assert log.written == log.appended


def test_append_after_close_and_bad_options(tmp_path):
    t = _tracker()
    log = TrackLog(tmp_path / "a.arrow", t)
    log.close()
    log.close()
    with pytest.raises(RuntimeError):
        log.append()
    for kw in ({"full": "block"}, {"slots": 0}, {"slot_rows": 0}, {"timeout": -1}):
        with pytest.raises(ValueError):
            TrackLog(tmp_path / "b.arrow", t, **kw)
    assert not (tmp_path / "b.arrow").exists()


def test_a_torn_last_scan_is_left_out_and_repair_cuts_it(tmp_path):
    path = tmp_path / "tracks.arrow"
    expected = _run(path, n=12)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 8 - 100])      # no end marker, and the last message torn
    _check(read_log(path), expected[:-1])
    with pytest.raises(Exception):
        pa.ipc.open_stream(str(path)).read_all()
    assert repair(path) == 11
    _check(pa.ipc.open_stream(str(path)).read_all(), expected[:-1])
    assert repair(path) == 11                            # a complete log stays as it is
    convert(path, tmp_path / "t.parquet")
    _check(read_log(tmp_path / "t.parquet"), expected[:-1])


CRASH_SCRIPT = """
import sys, numpy as np
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.track_log import TrackLog
t = Tracker(TrackerConfig(capacity=4096, max_detections=2048, events=True))
rng = np.random.default_rng(1)
truth = rng.uniform(0, 20000, (1000, 2))
log = TrackLog(sys.argv[1], t, full="wait")
k = 0
while True:
    t.tick(truth + rng.normal(0, 1, truth.shape), 0.1)
    log.append()
    k += 1
    if k == 5:
        print("running", flush=True)
"""


def test_a_crash_mid_run_leaves_every_complete_scan_readable(tmp_path):
    path = tmp_path / "tracks.arrow"
    proc = subprocess.Popen([sys.executable, "-c", CRASH_SCRIPT, str(path)], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == b"running"
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)                 # mid-run, likely mid-write
    finally:
        proc.wait()
    table = read_log(path)
    scans = np.unique(table["scan"].to_numpy())
    assert scans.shape[0] >= 3 and np.array_equal(scans, np.arange(1, scans.shape[0] + 1))
    # Each scan is whole: its association rows are the 1000 detections.
    kinds = np.array(table["kind"].to_pylist())
    per_scan = np.bincount(table["scan"].to_numpy()[kinds == "association"])[1:]
    assert np.all(per_scan == 1000)
    n = repair(path)
    assert n == scans.shape[0]
    assert pa.ipc.open_stream(str(path)).read_all().num_rows == table.num_rows
    try:
        import polars as pl
    except ImportError:
        return
    assert pl.read_ipc_stream(path).height == table.num_rows


def test_the_demo_writes_a_log(tmp_path):
    path = tmp_path / "tracks.arrow"
    out = io.StringIO()
    assert demo.main(["--fast", "--no-live", "--duration", "0.5", "--targets", "50", "--log", str(path)],
                     out=out) == 0
    assert "log" in out.getvalue()
    table = read_log(path)
    scans = np.unique(table["scan"].to_numpy())
    assert scans.shape[0] > 0 and scans.max() <= 25
    assert "track" in set(table["kind"].to_pylist())


def test_the_demo_refuses_a_log_path_it_cannot_write(tmp_path, capsys):
    assert demo.main(["--fast", "--no-live", "--duration", "0.1", "--targets", "50",
                      "--log", str(tmp_path / "nope" / "t.arrow")], out=io.StringIO()) == 2
    assert "log" in capsys.readouterr().err
