"""dod.tracker.replay: the OpenSky and AIS readers on the samples in examples/data, and their scans."""
import math
from pathlib import Path

import numpy as np
import pytest

from dod.tracker.replay import KNOT, Reports, read_ais, read_opensky

DATA = Path(__file__).resolve().parent.parent / "examples" / "data"


def test_opensky_sample_reads_every_position_once():
    r = read_opensky(DATA / "opensky_states_sample.csv")
    # 4 aircraft x 31 snapshots, less one snapshot without a position and one
    # position carried forward (the same lastposupdate): 122 reports.
    assert len(r) == 122 and r.objects.tolist() == ["3c6444", "440123", "4b1805", "4b1a2c"]
    assert (np.diff(r.time) >= 0).all() and r.time[0] > 1.6e9
    assert np.isfinite(r.altitude).all() and 400 < r.altitude.min() and r.altitude.max() < 12000
    assert (np.abs(r.latitude - 47.5) < 1).all() and (np.abs(r.longitude - 8.4) < 1.5).all()
    assert 100 <= np.nanmin(r.speed) and np.nanmax(r.speed) <= 250
    assert not r.time.flags.writeable


def test_ais_sample_skips_unavailable_positions_and_reads_knots():
    r = read_ais(DATA / "ais_sample.csv")
    assert r.objects.tolist() == ["366999001", "367000222", "538000333"]
    assert len(r) == 162                       # 163 rows, one at (91, 181)
    assert (r.altitude == 0).all() and (np.abs(r.latitude - 33.7) < 0.2).all()
    tug = r.speed[r.ids == "367000222"]
    assert np.allclose(tug, 8.7 * KNOT)
    first = read_ais(DATA / "ais_sample.csv").time[0]
    assert first == pytest.approx(1685628004.0)      # 2023-06-01T14:00:04 UTC


def test_scans_hold_each_objects_latest_report_at_one_instant():
    pytest.importorskip("pymap3d")
    from dod.tracker.geodetic import LocalFrame
    # Two objects moving north at 10 m/s; A reports at 1 s and 3 s, B at 2 s; then a silent window.
    t = [1.0, 2.0, 3.0, 25.0]
    frame = LocalFrame(0.0, 0.0)
    lat, lon, _ = frame.to_geodetic([[0.0, 10.0], [100.0, 0.0], [0.0, 30.0], [0.0, 250.0]])   # metres north
    r = Reports(t, ["A", "B", "A", "A"], lat, lon, [0, 0, 0, 0],
                speed=[10.0, 10.0, 10.0, 10.0], course=[0.0, 0.0, 0.0, 0.0])
    scans = list(r.scans(frame, 10.0, start=0.0))
    assert [s[0] for s in scans] == [10.0, 20.0, 30.0]
    t0, ids, z = scans[0]
    assert ids.tolist() == ["B", "A"]                      # in report order, A's latest only
    np.testing.assert_allclose(z[:, 1], [80.0, 100.0], atol=0.05)   # moved to t = 10 s along north
    assert scans[1][1].size == 0 and scans[1][2].shape == (0, 2)
    still = list(r.scans(frame, 10.0, start=0.0, extrapolate=False))
    np.testing.assert_allclose(still[0][2][:, 1], [0.0, 30.0], atol=0.05)
    with pytest.raises(ValueError, match="period"):
        next(r.scans(frame, 0.0))
    with pytest.raises(ValueError, match="start"):
        next(r.scans(frame, 10.0, start=5.0))


def test_bad_files_and_reports_raise_clearly(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("time,icao24,lat\n1,abc,2\n")
    with pytest.raises(ValueError, match="no 'lon' column"):
        read_opensky(p)
    p.write_text("time,icao24,lat,lon\n1,abc,north,2\n")
    with pytest.raises(ValueError, match="line 2"):
        read_opensky(p)
    p.write_text("MMSI,BaseDateTime,LAT,LON\n1,yesterday,1,2\n")
    with pytest.raises(ValueError, match="line 2"):
        read_ais(p)
    p.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_ais(p)
    with pytest.raises(ValueError, match="in order"):
        Reports([2.0, 1.0], ["a", "b"], [0, 0], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="one time"):
        Reports([1.0], ["a", "b"], [0], [0], [0])
    with pytest.raises(ValueError, match="latitude"):
        Reports([1.0], ["a"], [math.inf], [0], [0])
