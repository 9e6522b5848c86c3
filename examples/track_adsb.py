"""Track aircraft from an ADS-B file (OpenSky state vectors) on a local plane.
=============================================================================

The reports' WGS-84 positions go to an East-North plane around the data
(pymap3d), in scans of 10 s (OpenSky's snapshot period); the tracker
follows them and each confirmed track is checked against the aircraft whose
reports it took (the ICAO address is the truth here). Run:
``python examples/track_adsb.py [states.csv]``; without a file it tracks the
synthetic sample ``examples/data/opensky_states_sample.csv``. Needs
``pip install 'dod[geo]'``.
"""
import math
import sys
from pathlib import Path

import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.geodetic import LocalFrame
from dod.tracker.metrics import clear_mot
from dod.tracker.replay import read_opensky

try:
    here = Path(__file__).resolve().parent
except NameError:           # the docs' gallery runs the example in its folder, without __file__
    here = Path.cwd()
sample = here / "data" / "opensky_states_sample.csv"
path = sys.argv[1] if len(sys.argv) > 1 else sample
reports = read_opensky(path)
frame = LocalFrame.around(reports.latitude, reports.longitude)
print(f"{len(reports)} reports of {reports.objects.size} aircraft; "
      f"plane centred at {frame.latitude:.4f}, {frame.longitude:.4f}")

# Airliners: ADS-B positions good to tens of metres, speeds to 300 m/s,
# manoeuvres of a few m/s^2 (q in m^2/s^3); a new track's velocity spread
# covers the speeds. Every report is an aircraft (no clutter): a track starts
# from one report, is confirmed by 2 of 3 scans and lives through 3
# snapshots without a position.
config = TrackerConfig(dim=2, r=30.0, q=20.0, v0=250.0, confirmation="m_of_n", initiation="single",
                       confirm_m=2, confirm_n=3, max_misses=3,
                       capacity=1000, max_detections=1000)
tracker = Tracker(config)
truth_ids, truth_pos, est_ids, est_pos = [], [], [], []
period = 10.0                                   # OpenSky's snapshots: every 10 s, on multiples of 10
start = math.floor(reports.time[0] / period) * period
for time, ids, z in reports.scans(frame, period, start=start):
    tracker.tick(z, period)
    tid, tpos = tracker.confirmed_tracks()
    truth_ids.append(np.searchsorted(reports.objects, ids))     # ICAO address -> a number
    truth_pos.append(z)
    est_ids.append(tid)
    est_pos.append(tpos)

m = clear_mot(truth_ids, truth_pos, est_ids, est_pos, max_distance=500.0)
print(f"{len(truth_ids)} scans; {len(tracker.ids[tracker.confirmed])} confirmed tracks at the end")
print(f"MOTA {m['mota']:.3f}  IDF1 {m['idf1']:.3f}  id switches {m['num_switches']}")
