"""What happened each scan (Tracker.events), the track output (tracks,
tracks_arrow) and the status column's new name: a hand-checked scene, the
numpy reference tracker, invalid rows, sensors, the golden results with
events on, and the Arrow batch."""
import warnings

import numpy as np
import pytest

import tracker_golden
from dod.tracker import ReferenceTracker, Sensor, Tracker, TrackerConfig, unpack_covariance
from dod.tracker._engine import COUNT_NAMES
from dod.tracker.scenario import generate, generate_radar

A, B = (0.0, 0.0), (100.0, 0.0)
NAN = (np.nan, 0.0)


def _scan(*rows):
    return np.array(rows, dtype=np.float64).reshape(-1, 2)


def _copy(e):
    return {name: np.array(getattr(e, name)) for name in e._fields}


def test_a_hand_checked_scene():
    # Two still targets A and B, one clutter point a scan far from both;
    # M-of-N 2 of 3, deleted after 2 misses. Births take ids in scan order.
    cfg = TrackerConfig(dim=2, r=1.0, q=0.01, events=True, confirmation="m_of_n", initiation="single",
                        confirm_m=2, confirm_n=3, max_misses=2)
    t = Tracker(cfg)
    e = t.events()
    assert e.track.size == e.births.size == e.confirmations.size == e.deaths.size == 0
    t.tick(_scan(A, B, NAN, (5000.0, 5000.0)), dt=1.0)         # 3 births, the NaN row dropped
    e = t.events()
    assert e.track.tolist() == [-1, -1, -1, -1]
    assert e.births.tolist() == [1, 2, 3] and e.birth_rows.tolist() == [0, 1, 3]
    assert e.confirmations.size == 0 and e.deaths.size == 0
    assert dict(zip(COUNT_NAMES, e.counts.tolist())) == t.counts()
    t.tick(_scan(B, A, (9000.0, 0.0)), dt=1.0)                  # both targets hit: 2 of 3, confirmed
    e = t.events()
    assert e.track.tolist() == [2, 1, -1]
    assert e.births.tolist() == [4] and e.birth_rows.tolist() == [2]
    assert sorted(e.confirmations.tolist()) == [1, 2] and e.deaths.size == 0
    t.tick(_scan(A, B), dt=1.0)                                 # track 3: 1 hit in 3 scans, deleted
    e = t.events()
    assert e.track.tolist() == [1, 2] and e.births.size == 0 and e.confirmations.size == 0
    assert e.deaths.tolist() == [3] and e.death_status.tolist() == [1]
    t.tick(_scan(), dt=1.0)                                     # track 4 deleted; 1 and 2 miss once
    e = t.events()
    assert e.track.size == 0 and e.deaths.tolist() == [4] and e.death_status.tolist() == [1]
    t.tick(_scan(), dt=1.0)                                     # 2 misses: the confirmed tracks go
    e = t.events()
    assert sorted(e.deaths.tolist()) == [1, 2] and e.death_status.tolist() == [2, 2]
    assert len(t) == 0 and t.counts()["deaths"] == 2


def test_the_views_are_read_only_and_the_next_tick_overwrites_them():
    t = Tracker(TrackerConfig(events=True, initiation="single"))
    t.tick(_scan(A, B), dt=1.0)
    e = t.events()
    for name in e._fields:
        assert not getattr(e, name).flags.writeable, name
    t.tick(_scan(A, (700.0, 700.0)), dt=1.0)
    assert t.events().births.tolist() == [3]
    assert e.births.tolist() == [3, 2]          # the old view reads the same array: overwritten
    assert e.counts.tolist() == list(t.counts().values())      # the counters' view is live too
    del t
    assert e.track.shape == (2,)                # the memory outlives the tracker


def test_events_off_refused_and_nothing_allocated():
    t = Tracker(TrackerConfig(initiation="single"))
    t.tick(_scan(A), dt=1.0)
    with pytest.raises(RuntimeError, match="events=True"):
        t.events()
    with pytest.raises(ValueError, match="events"):
        TrackerConfig(events=1)


def _derived(before_ids, before_status, after_ids, after_status):
    """Births, confirmations and deaths that two snapshots of (ids, status) imply."""
    before = dict(zip(before_ids.tolist(), before_status.tolist()))
    after = dict(zip(after_ids.tolist(), after_status.tolist()))
    births = sorted(set(after) - set(before))
    deaths = sorted(set(before) - set(after))
    confirmed = sorted(i for i, s in after.items() if s == 2 and before.get(i, 1) != 2)
    return births, confirmed, deaths, [before[i] for i in deaths]


@pytest.mark.parametrize("management", [dict(confirmation="m_of_n", initiation="single"),
                                        dict(confirmation="score", initiation="two_point")])
def test_events_match_the_reference_tracker(management):
    sc = generate(80, 60, seed=7, pd=0.8, crossing=0.2, clutter=80, birth_death=0.3)
    cfg = TrackerConfig(events=True, **management)
    fast, ref = Tracker(cfg), ReferenceTracker(cfg)
    seen = dict(births=0, confirmations=0, deaths=0)
    for z, dt in sc:
        rb = (np.array(ref.ids), np.array(ref.status))
        fast.tick(z, dt)
        ref.tick(z, dt)
        e = fast.events()
        births, confirmed, deaths, status = _derived(*rb, np.array(ref.ids), np.array(ref.status))
        assert e.births.tolist() == births
        assert sorted(e.confirmations.tolist()) == confirmed
        order = np.argsort(e.deaths)
        assert e.deaths[order].tolist() == deaths and e.death_status[order].tolist() == status
        # each detection updates at most one live track, and as many as the counters say
        updated = e.track[e.track >= 0]
        assert len(set(updated.tolist())) == updated.size == fast.counts()["associations"]
        assert set(updated.tolist()) <= set(rb[0].tolist())
        assert e.track.size == len(z)
        assert not set(e.birth_rows.tolist()) & set(np.flatnonzero(e.track >= 0).tolist())
        for k in seen:
            seen[k] += getattr(e, k).size
    assert all(v > 10 for v in seen.values()), seen


def test_updated_tracks_are_near_their_detections():
    sc = generate(50, 30, seed=3, pd=0.9, clutter=10)
    t = Tracker(TrackerConfig(events=True, confirmation="m_of_n", initiation="single"))
    for z, dt in sc:
        t.tick(z, dt)
        e = t.events()
        rows = np.flatnonzero(e.track >= 0)
        where = {i: r for r, i in enumerate(t.ids.tolist())}
        pos = t.positions[[where[i] for i in e.track[rows].tolist()]]
        assert np.all(np.abs(pos - z[rows]) < 10.0)


@pytest.mark.parametrize("initiation", ["single", "two_point"])
def test_invalid_rows_read_minus_one_and_the_others_keep_their_scan_rows(initiation):
    sc = generate(60, 25, seed=11, pd=0.9, clutter=20)
    cfg = TrackerConfig(events=True, confirmation="score", initiation=initiation)
    dirty, clean = Tracker(cfg), Tracker(cfg)
    for s, (z, dt) in enumerate(sc):
        z = z.copy()
        z[s % 5::7] = np.nan if s % 2 else np.inf
        ok = np.flatnonzero(np.isfinite(z).all(axis=1))
        dirty.tick(z, dt)
        clean.tick(np.ascontiguousarray(z[ok]), dt)
        d, c = dirty.events(), clean.events()
        want = np.full(len(z), -1, np.int64)
        want[ok] = c.track
        assert d.track.tolist() == want.tolist()
        assert d.births.tolist() == c.births.tolist()
        assert d.birth_rows.tolist() == ok[c.birth_rows].tolist()
        assert d.deaths.tolist() == c.deaths.tolist() and d.confirmations.tolist() == c.confirmations.tolist()


def test_range_bearing_scans_with_invalid_rows():
    scans = list(generate_radar(60, 20, sensors=2, seed=5, clutter=10))
    cfg = TrackerConfig(events=True, r=3.0, confirmation="m_of_n", initiation="single")
    dirty, clean = Tracker(cfg), Tracker(cfg)
    for s, (z, dt, sensor) in enumerate(scans):
        z = z.copy()
        z[s % 3::9, 0] = -1.0                  # a negative range: dropped
        ok = np.flatnonzero(z[:, 0] >= 0)
        dirty.tick(z, dt, sensor=sensor)
        clean.tick(np.ascontiguousarray(z[ok]), dt, sensor=sensor)
        d, c = dirty.events(), clean.events()
        assert (d.track[ok] == c.track).all() and (np.delete(d.track, ok) == -1).all()
        assert d.birth_rows.tolist() == ok[c.birth_rows].tolist()


def test_overflow_drop_reads_only_the_rows_it_keeps():
    t = Tracker(TrackerConfig(events=True, max_detections=3, overflow="drop", initiation="single"))
    t.tick(_scan(A, B, (0.0, 500.0), (500.0, 500.0), (900.0, 0.0)), dt=1.0)
    e = t.events()
    assert e.track.size == 3 and e.birth_rows.tolist() == [0, 1, 2] and t.counts()["overflow"] == 2


def test_full_table_records_only_the_births_that_fit():
    t = Tracker(TrackerConfig(events=True, capacity=2, initiation="single"))
    t.tick(_scan(A, B, (0.0, 500.0)), dt=1.0)
    e = t.events()
    assert e.births.tolist() == [1, 2] and t.counts()["births_dropped"] == 1


@pytest.mark.parametrize("name", ["cv2_mofn_single_c3", "cv2_score_two_point_c0.2", "radar2_score_single_c3",
                                  "imm2_mofn_single_c3", "dirty_scans", "overflow_single"])
def test_recording_events_changes_no_result(name, monkeypatch):
    kind, skw, ckw, threads = tracker_golden.CASES[name]
    monkeypatch.setitem(tracker_golden.CASES, name + "+events", (kind, skw, dict(ckw, events=True), threads))
    want = tracker_golden.GOLDEN.read_text()
    import json
    want = json.loads(want)[name]
    for n in threads[:2]:
        assert tracker_golden.run(name + "+events", n) == want


# ---------------------------------------------------------------- the track output

def _scene(**kw):
    t = Tracker(TrackerConfig(**dict(dict(confirmation="m_of_n", initiation="single"), **kw)))
    for z, dt in generate(40, 20, seed=2, pd=0.9, clutter=15):
        t.tick(z, dt)
    return t


def test_tracks_are_views_of_the_leading_rows():
    t = _scene()
    out = t.tracks()
    conf = t.status == 2
    k = int(conf.sum())
    assert k > 30 and conf[:k].all()
    assert out.ids.shape == (k,) and out.x.shape == (k, 4) and out.P.shape == (k, 4, 4)
    assert np.shares_memory(out.ids, t.ids) and np.shares_memory(out.x, t.column("x"))
    assert not out.ids.flags.writeable and not out.x.flags.writeable
    assert np.array_equal(out.P, unpack_covariance(t.column("P")[:k]))
    assert np.array_equal(out.P, np.swapaxes(out.P, 1, 2))
    assert out.time == t.time > 0 and (out.status == 2).all()
    every = t.tracks(confirmed=False)
    assert every.ids.shape == (len(t),) and np.array_equal(every.score, t.scores)


def test_tracks_without_confirmed_first_are_copies_of_the_same_rows():
    a, b = _scene(), _scene(confirmed_first=False, sort_when_mixed=0.0)
    ta, tb = a.tracks(), b.tracks()
    oa, ob = np.argsort(ta.ids), np.argsort(tb.ids)
    assert np.array_equal(ta.ids[oa], tb.ids[ob])
    assert np.array_equal(ta.x[oa], tb.x[ob]) and np.array_equal(ta.P[oa], tb.P[ob])
    ids, pos = b.confirmed_tracks()
    assert np.array_equal(np.sort(ids), np.sort(tb.ids))


def test_track_batch_through_arrow_without_copies():
    pa = pytest.importorskip("pyarrow")
    t = _scene()
    batch = t.tracks_arrow()
    rb = pa.record_batch(batch)
    out = t.tracks()
    assert rb.num_rows == batch.num_rows == out.ids.size
    assert rb.schema.names == ["id", "time", "x", "P", "score", "status"]
    assert rb.column("id").to_numpy().tolist() == out.ids.tolist()
    assert rb.column("id").buffers()[1].address == out.ids.ctypes.data          # the table's memory
    flat = rb.column("P").flatten().flatten().to_numpy()
    assert np.array_equal(flat.reshape(out.P.shape), out.P)
    assert (rb.column("time").to_numpy() == t.time).all()
    table = pa.table(pa.RecordBatchReader.from_stream(batch))
    assert table.num_rows == rb.num_rows


def test_track_batch_in_polars():
    pl = pytest.importorskip("polars")
    t = _scene()
    df = pl.from_arrow(__import__("pyarrow").record_batch(t.tracks_arrow()))
    assert df["id"].to_list() == t.tracks().ids.tolist()


# ---------------------------------------------------------------- the status column's name

def test_status_and_its_former_name():
    t = _scene()
    assert t.table.schema.names[7] == "status"
    with pytest.warns(DeprecationWarning, match="status"):
        old = t.states
    with pytest.warns(DeprecationWarning, match="status"):
        col = t.column("state")
    assert np.array_equal(old, t.status) and np.array_equal(col, t.column("status"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t.status, t.column("status"), t.columns()["status"]
    ref = ReferenceTracker(TrackerConfig())
    with pytest.warns(DeprecationWarning):
        ref.states
    assert ref.status.size == 0


def test_the_bench_times_the_events_beside_the_plain_tick():
    from dod.tracker.bench import run

    lines = []
    rows = run(sizes=(200,), scans=20, quick=True, reference=False, events=True, prefault=False, out=lines.append)
    assert set(rows[0]["events"]) == {1} and rows[0]["events"][1][3] == rows[0]["dod"][3] == 20
    assert any(line.startswith("N=200 threads=1: events on p50") for line in lines)
