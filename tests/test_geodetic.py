"""dod.tracker.geodetic: WGS-84 to the local plane and back (pymap3d underneath).

pymap3d is in the test extra (CI installs it); the importorskip only spares a
developer's venv made without it.
"""
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("pymap3d")

from dod.tracker.geodetic import LocalFrame  # noqa: E402

A, F = 6378137.0, 1 / 298.257223563          # WGS-84


def _ecef(lat, lon, h):
    """The textbook geodetic-to-ECEF formula, written out here as an independent check."""
    lat, lon = np.radians(lat), np.radians(lon)
    e2 = F * (2 - F)
    n = A / np.sqrt(1 - e2 * np.sin(lat) ** 2)
    return np.stack([(n + h) * np.cos(lat) * np.cos(lon), (n + h) * np.cos(lat) * np.sin(lon),
                     (n * (1 - e2) + h) * np.sin(lat)], axis=-1)


def _enu_by_hand(frame, lat, lon, h):
    d = _ecef(lat, lon, h) - _ecef(frame.latitude, frame.longitude, frame.altitude)
    p, l = np.radians(frame.latitude), np.radians(frame.longitude)
    R = np.array([[-np.sin(l), np.cos(l), 0.0],
                  [-np.sin(p) * np.cos(l), -np.sin(p) * np.sin(l), np.cos(p)],
                  [np.cos(p) * np.cos(l), np.cos(p) * np.sin(l), np.sin(p)]])
    return d @ R.T


@pytest.mark.parametrize("origin", [(47.4647, 8.5492, 432.0), (-33.9, 151.2, 0.0), (78.2, 15.6, 20.0),
                                    (0.0, 179.9, 0.0)])
def test_the_conversion_agrees_with_the_ellipsoid_written_out(origin):
    frame = LocalFrame(*origin)
    rng = np.random.default_rng(0)
    lat = origin[0] + rng.uniform(-1, 1, 500)
    lon = origin[1] + rng.uniform(-1, 1, 500)
    h = rng.uniform(-100, 12000, 500)
    np.testing.assert_allclose(frame.to_local(lat, lon, h), _enu_by_hand(frame, lat, lon, h), atol=1e-6)
    np.testing.assert_allclose(frame.to_local(lat, lon), _enu_by_hand(frame, lat, lon, origin[2])[:, :2],
                               atol=1e-6)


@pytest.mark.parametrize("origin", [(47.4647, 8.5492, 432.0), (33.72, -118.24, 0.0), (-70.0, 0.0, 2800.0)])
def test_round_trip_is_exact_to_a_tenth_of_a_millimetre(origin):
    frame = LocalFrame(*origin)
    rng = np.random.default_rng(1)
    en = rng.uniform(-200e3, 200e3, (2000, 2))       # 200 km around, aircraft heights
    up = rng.uniform(-500, 13000, (2000, 1))
    for pts in (np.hstack([en, up]), en):
        lat, lon, alt = frame.to_geodetic(pts)
        back = frame.to_local(lat, lon, alt, dim=pts.shape[1])
        np.testing.assert_allclose(back, pts, atol=1e-4)
    lat, lon, alt = frame.to_geodetic(np.hstack([en, up]))
    lat2, lon2, alt2 = frame.to_geodetic(frame.to_local(lat, lon, alt))
    assert np.abs(lat2 - lat).max() < 1e-9 and np.abs(lon2 - lon).max() < 1e-9 and np.abs(alt2 - alt).max() < 1e-4


def test_the_plane_drops_below_the_ellipsoid_as_the_module_says():
    frame = LocalFrame(45.0, 7.0)
    lat, lon, alt = frame.to_geodetic([[100e3, 0.0]])
    assert 770 < alt[0] < 800                   # d**2 / 2R = 785 m


def test_around_centres_the_frame_on_the_data_even_across_the_antimeridian():
    f = LocalFrame.around([10.0, 12.0], [179.5, -179.5], [300.0, np.nan])
    assert f.latitude == 11.0 and abs(abs(f.longitude) - 180.0) < 1e-9 and f.altitude == 300.0
    f = LocalFrame.around([47.0, 48.0], [8.0, 9.0])
    assert (f.latitude, f.longitude, f.altitude) == (47.5, 8.5, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        LocalFrame.around([], [])


def test_bad_input_raises_clearly():
    with pytest.raises(ValueError, match="latitude"):
        LocalFrame(91.0, 0.0)
    with pytest.raises(ValueError, match="altitude"):
        LocalFrame(0.0, 0.0, float("nan"))
    f = LocalFrame(0.0, 0.0)
    with pytest.raises(ValueError, match="must have 2 elements"):
        f.to_local([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="finite"):
        f.to_local([np.nan], [0.0])
    with pytest.raises(ValueError, match=r"\[-90, 90\]"):
        f.to_local([95.0], [0.0])
    with pytest.raises(ValueError, match="dim"):
        f.to_local([0.0], [0.0], dim=4)
    with pytest.raises(ValueError, match="columns"):
        f.to_geodetic(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="finite"):
        f.to_geodetic([[np.inf, 0.0]])


def test_without_pymap3d_the_module_imports_and_names_the_extra():
    code = ("import sys; sys.modules['pymap3d'] = None\n"
            "from dod.tracker.geodetic import LocalFrame\n"
            "try:\n    LocalFrame(1.0, 2.0).to_local([1.0], [2.0])\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install 'dod[geo]'" in out.stdout
