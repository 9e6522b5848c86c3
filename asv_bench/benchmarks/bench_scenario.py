"""The scenario generator's cost per scan (dod.tracker.scenario.iter_scans):
what the demo's producer thread spends beside the tick on the same cores.

time_scan: one scan drawn from a stream already past its first scans (the
default scenario: Pd 0.9, clutter 0.2 N). At 100,000 targets the numpy
version took ~20 ms of CPU a scan on the 2-core VMs, as much as the
two-thread tick; the per-scan passes now run in dod.tracker._scenario.
"""
from ._util import require


class ScenarioScan:
    params = ([1000, 100_000],)
    param_names = ["targets"]
    timeout = 120

    def setup(self, targets):
        scenario = require("dod.tracker.scenario")
        self.scans = scenario.iter_scans(targets, 10**9, seed=0)
        for _ in range(3):
            next(self.scans)

    def time_scan(self, targets):
        next(self.scans)
