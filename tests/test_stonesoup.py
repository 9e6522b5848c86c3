"""dod.tracker.stonesoup against Stone Soup itself: its detections in, its tracks out, its GOSPA on them.

Stone Soup is in the test extra (CI installs it): the module-level
importorskip only spares a developer's venv made without it.
"""
import datetime
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("stonesoup")

from stonesoup.measures import Euclidean  # noqa: E402
from stonesoup.metricgenerator.ospametric import GOSPAMetric  # noqa: E402
from stonesoup.models.measurement.linear import LinearGaussian  # noqa: E402
from stonesoup.models.measurement.nonlinear import (CartesianToBearingRange,  # noqa: E402
                                                     CartesianToElevationBearingRange)
from stonesoup.types.detection import Clutter, Detection  # noqa: E402
from stonesoup.types.groundtruth import GroundTruthPath, GroundTruthState  # noqa: E402
from stonesoup.types.state import State  # noqa: E402

from dod.tracker import Sensor, Tracker, TrackerConfig, unpack_covariance  # noqa: E402
from dod.tracker.metrics import gospa  # noqa: E402
from dod.tracker.sensor import wrap_angle  # noqa: E402
from dod.tracker.stonesoup import (TrackRecorder, cartesian_sigma, scan_from_detections,  # noqa: E402
                                   sensor_from_model, state_order)

T0 = datetime.datetime(2024, 5, 1, 12, 0, 0)


def _states(points, dim):
    """Stone Soup CV states (x, vx, y, vy[, z, vz]) at these positions, velocity 1 on every axis."""
    out = []
    for p in points:
        sv = np.ones((2 * dim, 1))
        sv[0::2, 0] = p
        out.append(State(sv, T0))
    return out


def _detections(model, points, dim, noise=False):
    return [Detection(model.function(s, noise=noise), timestamp=T0, measurement_model=model)
            for s in _states(points, dim)]


@pytest.mark.parametrize("yaw", [0.0, 0.7, -2.5])
def test_bearing_range_detections_become_range_bearing_rows_and_the_sensor(yaw):
    rng = np.random.default_rng(1)
    model = CartesianToBearingRange(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([1e-4, 25.0]),
                                    translation_offset=np.array([[10.0], [-20.0]]),
                                    rotation_offset=np.array([[0.0], [0.0], [yaw]]))
    pts = rng.uniform(-1000, 1000, (50, 2))
    z, sensor = scan_from_detections(_detections(model, pts, 2))
    assert sensor == Sensor((10.0, -20.0), range_sigma=5.0, bearing_sigma=0.01)
    assert sensor_from_model(model) == sensor
    want = sensor.measure(pts)                       # dod's own model: (range, bearing), bearing from x
    assert z.dtype == np.float64 and z.flags.c_contiguous and z.shape == (50, 2)
    np.testing.assert_allclose(z[:, 0], want[:, 0], rtol=1e-12)
    np.testing.assert_allclose(wrap_angle(z[:, 1] - want[:, 1]), 0.0, atol=1e-12)


def test_elevation_bearing_range_detections_become_range_bearing_elevation_rows():
    rng = np.random.default_rng(2)
    model = CartesianToElevationBearingRange(ndim_state=6, mapping=(0, 2, 4),
                                             noise_covar=np.diag([4e-6, 1e-6, 9.0]),
                                             translation_offset=np.array([[1.0], [2.0], [3.0]]))
    pts = rng.uniform(-500, 500, (40, 3))
    z, sensor = scan_from_detections(set(_detections(model, pts, 3)))   # a detector's set: any order
    assert sensor == Sensor((1.0, 2.0, 3.0), range_sigma=3.0, bearing_sigma=1e-3, elevation_sigma=2e-3)
    want = sensor.measure(pts)
    order = np.lexsort(want.T)
    got = z[np.lexsort(z.T)]
    np.testing.assert_allclose(got, want[order], rtol=1e-12, atol=1e-12)


def test_linear_gaussian_detections_become_cartesian_rows_in_order():
    rng = np.random.default_rng(3)
    model = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2) * 4.0)
    pts = rng.uniform(-1000, 1000, (200, 2))
    dets = _detections(model, pts, 2)
    dets.append(Clutter(np.array([[5.0], [6.0]]), timestamp=T0, measurement_model=model))
    z, sensor = scan_from_detections(dets)
    assert sensor is None and cartesian_sigma(model) == 2.0
    np.testing.assert_array_equal(z, np.vstack([pts, [[5.0, 6.0]]]))
    # The plain loop gives the same array.
    np.testing.assert_array_equal(z, np.array([[float(d.state_vector[i, 0]) for i in range(2)] for d in dets]))


def test_a_model_given_for_detections_without_one_and_empty_scans():
    model = LinearGaussian(ndim_state=6, mapping=(0, 2, 4), noise_covar=np.eye(3))
    bare = [Detection(np.array([[1.0], [2.0], [3.0]]), timestamp=T0)]
    with pytest.raises(ValueError, match="no measurement model"):
        scan_from_detections(bare)
    z, sensor = scan_from_detections(bare, model=model)
    assert z.tolist() == [[1.0, 2.0, 3.0]] and sensor is None
    z, sensor = scan_from_detections(set(), model=model)
    assert z.shape == (0, 3) and sensor is None
    z, sensor = scan_from_detections([])
    assert z.shape == (0, 2) and sensor is None


def test_what_dod_cannot_read_is_refused_clearly():
    a = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2))
    b = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2))
    mixed = _detections(a, [[0.0, 0.0]], 2) + _detections(b, [[1.0, 1.0]], 2)
    with pytest.raises(ValueError, match="2 different measurement models"):
        scan_from_detections(mixed)
    with pytest.raises(ValueError, match="not the model given"):
        scan_from_detections(mixed[:1], model=b)
    tilted = CartesianToBearingRange(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([1e-4, 1.0]),
                                     rotation_offset=np.array([[0.1], [0.0], [0.0]]))
    with pytest.raises(ValueError, match="tilted"):
        scan_from_detections(_detections(tilted, [[100.0, 0.0]], 2))
    correlated = CartesianToBearingRange(ndim_state=4, mapping=(0, 2),
                                         noise_covar=np.array([[1e-4, 1e-3], [1e-3, 1.0]]))
    with pytest.raises(ValueError, match="diagonal"):
        sensor_from_model(correlated)
    with pytest.raises(ValueError, match="one variance on every axis"):
        cartesian_sigma(LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([1.0, 2.0])))
    with pytest.raises(ValueError, match="LinearGaussian, CartesianToBearingRange"):
        sensor_from_model(object())
    with pytest.raises(ValueError, match="no range-bearing Sensor"):
        sensor_from_model(a)


def test_state_order():
    assert state_order(2).tolist() == [0, 2, 1, 3]
    assert state_order(3).tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(ValueError):
        state_order(4)


def _scenario(seed, steps=40, dt=1.0):
    """Five targets in straight lines, Stone Soup truth paths and noisy LinearGaussian detections (Pd 0.9,
    clutter), as Stone Soup's own simulators would give them."""
    rng = np.random.default_rng(seed)
    model = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2) * 1.0)
    start = rng.uniform(-200, 200, (5, 2))
    vel = rng.uniform(-5, 5, (5, 2))
    paths = [GroundTruthPath(id=str(i)) for i in range(5)]
    scans = []
    for k in range(steps):
        t = T0 + datetime.timedelta(seconds=k * dt)
        dets = set()
        for i, path in enumerate(paths):
            p = start[i] + vel[i] * k * dt
            path.append(GroundTruthState(np.array([[p[0]], [vel[i, 0]], [p[1]], [vel[i, 1]]]), timestamp=t))
            if rng.random() < 0.9:
                dets.add(Detection(model.function(path[-1], noise=True), timestamp=t, measurement_model=model))
        for c in rng.uniform(-300, 300, (rng.poisson(2), 2)):
            dets.add(Clutter(c.reshape(2, 1), timestamp=t, measurement_model=model))
        scans.append((t, dets))
    return model, paths, scans


def test_tracks_out_score_with_stone_soups_gospa_as_with_dods():
    model, paths, scans = _scenario(seed=5)
    tracker = Tracker(TrackerConfig(dim=2, r=cartesian_sigma(model), q=0.5, v0=5.0, confirmation="m_of_n",
                                    initiation="single"))
    recorder = TrackRecorder()
    estimates = []
    for k, (t, dets) in enumerate(scans):
        z, sensor = scan_from_detections(dets)
        tracker.tick(z, 1.0, sensor=sensor)
        recorder.record(tracker, t)
        estimates.append(tracker.confirmed_tracks())
    tracks = recorder.tracks()
    assert recorder.scans == len(scans) and 5 <= len(tracks) <= 7
    # Stone Soup's GOSPA generator, on Stone Soup's objects, scan by scan, against dod's own GOSPA.
    metric = GOSPAMetric(c=10.0, p=2.0, measure=Euclidean(mapping=(0, 2)))
    result = metric.compute_over_time(*metric.extract_states(tracks, True), *metric.extract_states(paths, True))
    ss = {m.timestamp: m.value["distance"] for m in result.value}
    truth = {t: np.array([[float(p[t].state_vector[0, 0]), float(p[t].state_vector[2, 0])] for p in paths])
             for t, _ in scans}
    compared = 0
    for (t, _), (ids, pos) in zip(scans, estimates):
        if t in ss:
            assert ss[t] == pytest.approx(gospa(truth[t], pos, c=10.0, p=2.0), rel=1e-9, abs=1e-9)
            compared += 1
    assert compared == len(scans)
    late = [ss[t] for t, _ in scans[10:]]
    assert np.mean(late) < 5.0            # 5 targets tracked to ~1 m once confirmed (a miss costs 7.1)


def test_a_recorded_state_is_the_trackers_in_stone_soups_order():
    tracker = Tracker(TrackerConfig(dim=3, r=1.0, q=1.0, confirmation="m_of_n", initiation="single"))
    recorder = TrackRecorder()
    pts = np.array([[0.0, 0.0, 0.0], [100.0, 50.0, 10.0]])
    for k in range(4):
        tracker.tick(pts + k, 1.0)
        recorder.record(tracker, 10.0 * k)              # seconds after the epoch
    mask = tracker.confirmed
    x, P = tracker.column("x")[mask], unpack_covariance(tracker.column("P")[mask])
    ids = tracker.ids[mask].tolist()
    assert len(ids) == 2                                # confirmed at the third scan
    tracks = {tr.id: tr for tr in recorder.tracks()}
    assert set(tracks) == {str(i) for i in ids}
    order = state_order(3)
    for row, tid in enumerate(ids):
        last = tracks[str(tid)][-1]
        assert last.timestamp == datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=30.0)
        np.testing.assert_array_equal(np.asarray(last.state_vector).ravel(), x[row][order])
        np.testing.assert_array_equal(np.asarray(last.covar), P[row][np.ix_(order, order)])
    with pytest.raises(TypeError, match="datetime"):
        recorder.record(tracker, "now")
    with pytest.raises(ValueError, match="2-D tracker after 3-D"):
        recorder.record(Tracker(TrackerConfig(dim=2)), 40.0)


def test_without_stonesoup_the_module_imports_and_names_the_extra():
    code = ("import sys; sys.modules['stonesoup'] = None\n"
            "import dod.tracker.stonesoup as s\n"
            "r = s.TrackRecorder()\n"
            "try:\n    r.tracks()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'dod[stonesoup]'" in out.stdout


def test_a_model_changed_between_scans_gives_its_new_sensor():
    model = CartesianToBearingRange(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([1e-4, 25.0]))
    dets = _detections(model, [[100.0, 0.0]], 2)
    assert scan_from_detections(dets)[1].range_sigma == 5.0
    model.noise_covar = np.diag([1e-4, 4.0])                  # the same object, changed in place
    assert scan_from_detections(dets)[1].range_sigma == 2.0
    model.translation_offset = np.array([[1.0], [2.0]])
    assert scan_from_detections(dets)[1].position == (1.0, 2.0)
