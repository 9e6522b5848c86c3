"""Track vessels from an AIS file (a common CSV export) on a local plane.
=========================================================================

The position reports' WGS-84 positions go to an East-North plane around
the data (pymap3d), in scans of 10 s stamped with their Unix time
(``tick(z, time=t)``). Vessels report at their own rates (every few seconds
under way, every few minutes at anchor), so most scans hold only some of
them; the tracker keeps a track through the silent scans. The tracker
records what happened each scan (``events=True``): which track each report
updated or started. A vessel followed well keeps one track id for all of
its reports (the MMSI is the truth here). Run:
``python examples/track_ais.py [ais.csv]``; without a file it tracks the
synthetic sample ``examples/data/ais_sample.csv`` (Marine Cadastre's
columns: MMSI, BaseDateTime, LAT, LON, SOG, COG, ...). Needs
``pip install 'dod[geo]'``.
"""
import sys
from pathlib import Path

import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.geodetic import LocalFrame
from dod.tracker.replay import read_ais

try:
    here = Path(__file__).resolve().parent
except NameError:           # the docs' gallery runs the example in its folder, without __file__
    here = Path.cwd()
sample = here / "data" / "ais_sample.csv"
path = sys.argv[1] if len(sys.argv) > 1 else sample
reports = read_ais(path)
frame = LocalFrame.around(reports.latitude, reports.longitude)
print(f"{len(reports)} reports of {reports.objects.size} vessels; "
      f"plane centred at {frame.latitude:.4f}, {frame.longitude:.4f}")

# Ships: AIS (GNSS) positions good to ~10 m, speeds to ~15 m/s, gentle
# manoeuvres (q in m^2/s^3). Every report is a vessel (no clutter): a track
# starts from one report and is confirmed by its second within 24 scans; it
# lives through 24 silent scans (4 minutes: a ship at anchor reports every 3).
config = TrackerConfig(dim=2, r=10.0, q=0.05, v0=10.0, confirmation="m_of_n", initiation="single",
                       confirm_m=2, confirm_n=24, max_misses=24, events=True,
                       capacity=1000, max_detections=1000)
tracker = Tracker(config)
period = 10.0
tracks_of = {}                                  # MMSI -> {track id: reports it took}
scans = 0
for time, mmsi, z in reports.scans(frame, period):
    tracker.tick(z, time=time)                  # Unix seconds: dt comes from the previous scan
    scans += 1
    ev = tracker.events()
    took = ev.track.copy()                      # per report: the track it updated (-1: none) ...
    took[ev.birth_rows] = ev.births             # ... or the one it started
    for vessel, tid in zip(mmsi, took):
        counts = tracks_of.setdefault(str(vessel), {})
        counts[int(tid)] = counts.get(int(tid), 0) + 1

print(f"{scans} scans; {len(tracker.ids[tracker.confirmed])} confirmed tracks at the end")
shared = {}
for vessel, counts in tracks_of.items():
    for tid in counts:
        shared.setdefault(tid, set()).add(vessel)
for vessel in sorted(tracks_of):
    counts = tracks_of[vessel]
    ids = ", ".join(f"{tid} ({k})" for tid, k in sorted(counts.items()))
    print(f"vessel {vessel}: {sum(counts.values())} reports, track {ids}")
print(f"tracks shared by two vessels: {sum(len(v) > 1 for v in shared.values())}")
