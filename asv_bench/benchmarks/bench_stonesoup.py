"""asv: a scan of Stone Soup detections into the arrays a tick takes, against the plain Python loop.

Goal: 200 detections convert in well under a millisecond
(dod.tracker.stonesoup.scan_from_detections). time_convert times the
converter, time_loop the loop a user writes by hand (each detection's state
vector read element by element, polar columns swapped), both on the same
set of detections of one sensor: Cartesian (LinearGaussian) or polar
(CartesianToBearingRange, whose bearings are Python objects).
track_speedup_vs_loop is the ratio, interleaved (_util.speedup).
"""
import datetime
import timeit

from ._util import require, speedup


def _detections(kind, n):
    np = require("numpy")
    require("stonesoup")
    from stonesoup.models.measurement.linear import LinearGaussian
    from stonesoup.models.measurement.nonlinear import CartesianToBearingRange
    from stonesoup.types.detection import Detection
    from stonesoup.types.state import State
    t = datetime.datetime(2024, 1, 1)
    if kind == "cartesian":
        model = LinearGaussian(ndim_state=4, mapping=(0, 2), noise_covar=np.eye(2) * 4.0)
    else:
        model = CartesianToBearingRange(ndim_state=4, mapping=(0, 2), noise_covar=np.diag([1e-4, 25.0]),
                                        translation_offset=np.array([[10.0], [20.0]]))
    rng = np.random.default_rng(0)
    return {Detection(model.function(State(np.array([[x], [1.0], [y], [1.0]]), t), noise=True),
                      timestamp=t, measurement_model=model)
            for x, y in rng.uniform(-1000, 1000, (n, 2))}


def _loop(dets, kind):
    """By hand: a Python list of rows, then an array (dod's (range, bearing) order for polar)."""
    np = require("numpy")
    if kind == "cartesian":
        return np.array([[float(d.state_vector[0, 0]), float(d.state_vector[1, 0])] for d in dets])
    return np.array([[float(d.state_vector[1, 0]), float(d.state_vector[0, 0])] for d in dets])


class StoneSoupScan:
    params = (["cartesian", "polar"], [200])
    param_names = ["measurement", "detections"]

    def setup(self, kind, n):
        self.convert = require("dod.tracker.stonesoup").scan_from_detections
        self.dets = _detections(kind, n)
        self.kind = kind

    def time_convert(self, kind, n):
        self.convert(self.dets)

    time_convert.goal = 5e-4        # s: "well under a millisecond" for 200 detections

    def time_loop(self, kind, n):
        _loop(self.dets, kind)

    def track_speedup_vs_loop(self, kind, n):
        def cost(f):
            return min(timeit.repeat(f, number=20, repeat=3)) / 20
        return speedup(lambda: cost(lambda: _loop(self.dets, kind)),
                       lambda: cost(lambda: self.convert(self.dets)))

    track_speedup_vs_loop.unit = "x"
