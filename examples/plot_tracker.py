"""Tracks against the truth
========================

The tracker over a simulated scenario: 40 targets moving in a plane, 150
scans at 50 Hz, each target detected with probability 0.9, plus clutter
(false detections). Each scan is one call to ``Tracker.tick``; after it,
``confirmed_tracks`` returns the ids and positions of the tracks the
tracker believes in. The lines are the true trajectories, the dots the
confirmed tracks' positions, one colour per track id.
"""
import matplotlib.pyplot as plt
import numpy as np

from dod.tracker import Tracker, TrackerConfig
from dod.tracker.scenario import generate

scenario = generate(40, 150, pd=0.9, seed=3)
tracker = Tracker(TrackerConfig(dim=2, r=1.0, q=1.0))

ids, positions = [], []
for detections in scenario.detections:
    tracker.tick(detections, scenario.dt)
    i, p = tracker.confirmed_tracks()
    ids.append(i)
    positions.append(p)

print(f"{scenario.scans} scans, {sum(len(d) for d in scenario.detections)} detections")
print(f"after the last scan: {len(ids[-1])} confirmed tracks, {len(scenario.truth_ids[-1])} true targets")

fig, ax = plt.subplots(figsize=(7, 7))
truth_ids = np.concatenate(scenario.truth_ids)
truth_pos = np.concatenate(scenario.truth_pos)
for t in np.unique(truth_ids):
    xy = truth_pos[truth_ids == t]
    ax.plot(xy[:, 0], xy[:, 1], color="0.7", lw=1)
est_ids = np.concatenate(ids)
est_pos = np.concatenate(positions)
ax.scatter(est_pos[:, 0], est_pos[:, 1], c=est_ids % 20, cmap="tab20", s=2)
ax.set_aspect("equal")
ax.set_xlabel("x (m)")
ax.set_ylabel("y (m)")
ax.set_title("true trajectories (grey) and confirmed tracks (dots)")
fig.tight_layout()
plt.show()
