"""Golden hashes of the tracker's results: a matrix of seeded scenarios,
the whole tracker state hashed after every scan.

The hashes in ``golden/tracker_hashes.json`` are the tracker's results as
they stand; ``tests/test_tracker_golden.py`` reproduces them. A change that
is meant to keep every result (a refactor, a faster kernel, another
threading plan) keeps every hash; a change that is meant to alter results
rewrites the file, in a commit of its own that says why:

    python tests/tracker_golden.py --write

Range-bearing scans take single-point initiation only (the tracker refuses
two-point births with a sensor). Each case names its management (confirmation, initiation) explicitly, so
a change of TrackerConfig's defaults does not move a case. Every case runs
at several thread counts, which must give the same hash at every scan.
The bits come from this machine's libm (exp, log, atan2, sincos): a
machine whose libm picks other code paths may differ in the last bit.
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from dod.table import Table
from dod.tracker import Tracker, TrackerConfig, track_schema
from dod.tracker.scenario import PRESETS, generate, generate_radar

GOLDEN = Path(__file__).resolve().parent / "golden" / "tracker_hashes.json"

_TURNS = {k: v for k, v in PRESETS["manoeuvre"].items() if k in ("manoeuvre", "turn_rate", "leg", "turn_time")}
# Small scenes still take every parallel path: a pass goes parallel from
# threads * parallel_min_rows rows, the bookkeeping passes from a few
# multiples of it.
_PAR = dict(parallel_min_rows=16)

# name: (scenario kind, scenario keywords, config keywords, thread counts)
CASES = {
    "cv2_mofn_single_c0.2": ("cartesian", dict(n=700, scans=40, seed=101, clutter_per_target=0.2),
                             dict(confirmation="m_of_n", initiation="single"), (1, 2, 3, 4, 6)),
    "cv2_mofn_single_c3": ("cartesian", dict(n=300, scans=30, seed=102, clutter_per_target=3.0),
                           dict(confirmation="m_of_n", initiation="single"), (1, 2, 4)),
    "cv2_score_two_point_c0.2": ("cartesian", dict(n=700, scans=40, seed=103, clutter_per_target=0.2),
                                 dict(confirmation="score", initiation="two_point"), (1, 2, 3, 4, 6)),
    "cv2_score_two_point_c3": ("cartesian", dict(n=300, scans=30, seed=104, clutter_per_target=3.0),
                               dict(confirmation="score", initiation="two_point"), (1, 2, 4)),
    "cv2_score_single_c3": ("cartesian", dict(n=300, scans=30, seed=105, clutter_per_target=3.0),
                            dict(confirmation="score", initiation="single"), (1, 3)),
    "cv2_mofn_two_point_c0.2": ("cartesian", dict(n=500, scans=30, seed=106, clutter_per_target=0.2),
                                dict(confirmation="m_of_n", initiation="two_point"), (1, 3)),
    "cv2_sorted_rows": ("cartesian", dict(n=700, scans=40, seed=107, clutter_per_target=0.2),
                        dict(confirmation="m_of_n", initiation="single", sort_every=5,
                             confirmed_first=False), (1, 2, 4)),
    "cv3_mofn_single_c0.2": ("cartesian", dict(n=500, scans=30, seed=111, dim=3, clutter_per_target=0.2),
                             dict(dim=3, confirmation="m_of_n", initiation="single"), (1, 2, 4)),
    "cv3_score_two_point_c3": ("cartesian", dict(n=250, scans=30, seed=112, dim=3, clutter_per_target=3.0),
                               dict(dim=3, confirmation="score", initiation="two_point"), (1, 3)),
    "imm2_score_two_point": ("manoeuvre", dict(n=300, scans=40, seed=121, clutter_per_target=0.2),
                             dict(motion="imm", v0=30.0, confirmation="score", initiation="two_point"),
                             (1, 2, 3)),
    "imm2_mofn_single_c3": ("manoeuvre", dict(n=150, scans=30, seed=122, clutter_per_target=3.0),
                            dict(motion="imm", v0=30.0, confirmation="m_of_n", initiation="single"), (1, 2)),
    "imm3_mofn_single": ("manoeuvre", dict(n=200, scans=30, seed=123, dim=3, clutter_per_target=0.2),
                         dict(dim=3, motion="imm", v0=30.0, confirmation="m_of_n", initiation="single"),
                         (1, 2)),
    "radar2_mofn_single_c0.2": ("radar", dict(n=400, scans=30, seed=131, clutter_per_target=0.2),
                                dict(r=3.0, confirmation="m_of_n", initiation="single"), (1, 2, 3)),
    "radar2_score_single_c3": ("radar", dict(n=200, scans=30, seed=132, clutter_per_target=3.0),
                               dict(r=3.0, confirmation="score", initiation="single"), (1, 2)),
    "radar3_mofn_single": ("radar", dict(n=300, scans=30, seed=133, dim=3, clutter_per_target=0.2),
                           dict(dim=3, r=3.0, confirmation="m_of_n", initiation="single"), (1, 2)),
    "radar3_score_single": ("radar", dict(n=200, scans=30, seed=134, dim=3, clutter_per_target=1.0),
                            dict(dim=3, r=3.0, confirmation="score", initiation="single"), (1, 2)),
    "imm_radar2_score_single": ("radar_manoeuvre", dict(n=200, scans=30, seed=141, clutter_per_target=0.2),
                                dict(r=3.0, motion="imm", confirmation="score", initiation="single"),
                                (1, 2, 3)),
    "imm_radar2_mofn_single": ("radar_manoeuvre", dict(n=200, scans=30, seed=142, clutter_per_target=1.0),
                               dict(r=3.0, motion="imm", confirmation="m_of_n", initiation="single"), (1, 2)),
    "imm_radar3_score_single": ("radar_manoeuvre", dict(n=150, scans=25, seed=143, dim=3, clutter_per_target=0.5),
                                dict(dim=3, r=3.0, motion="imm", confirmation="score", initiation="single"),
                                (1, 2)),
    "overflow_single": ("cartesian", dict(n=600, scans=25, seed=151, clutter_per_target=0.5),
                        dict(capacity=400, confirmation="m_of_n", initiation="single"), (1, 2, 4)),
    "dirty_scans": ("dirty", dict(n=400, scans=30, seed=161, clutter_per_target=0.2),
                    dict(overflow="drop", max_detections=380, max_cluster=2, confirmation="m_of_n",
                         initiation="single"), (1, 2, 3)),
    "overflow_two_point": ("cartesian", dict(n=600, scans=25, seed=152, clutter_per_target=0.5),
                           dict(capacity=400, confirmation="score", initiation="two_point"), (1, 2)),
}


def scans(kind, n, scans, seed, clutter_per_target, dim=2):
    """The case's scans as (detections, dt, sensor or None)."""
    clutter = clutter_per_target * n
    if kind == "cartesian":
        sc = generate(n, scans, dim=dim, seed=seed, pd=0.9, crossing=0.2, clutter=clutter)
        return [(z, dt, None) for z, dt in sc]
    if kind == "dirty":         # NaN and infinite rows, and scans past max_detections (dropped)
        sc = generate(n, scans, dim=dim, seed=seed, pd=0.9, crossing=0.2, clutter=clutter)
        out = []
        for s, (z, dt) in enumerate(sc):
            z = z.copy()
            z[s % 7::11] = np.nan if s % 2 else np.inf
            out.append((z, dt, None))
        return out
    if kind == "manoeuvre":
        sc = generate(n, scans, dim=dim, seed=seed, pd=0.9, clutter=clutter, **PRESETS["manoeuvre"])
        return [(z, dt, None) for z, dt in sc]
    turns = _TURNS if kind == "radar_manoeuvre" else {}
    sc = generate_radar(n, scans, dim=dim, sensors=2, seed=seed, clutter=clutter, **turns)
    return list(sc)


def state_digest(t, h, nbytes=None):
    """Fold everything a tick leaves behind into the running hash h: the
    table's bytes in row order, each row's slot (generations start at a
    per-table base), the table's statistics, the scan's counters, the
    waiting detections of two-point initiation, the clutter estimate.
    `nbytes` stands in for the table's own memory count (a layout's padding
    is the one statistic a layout changes)."""
    st = t.table.stats()
    st.pop("views")
    if nbytes is not None:
        st["nbytes"] = nbytes
    h.update(t.table.to_numpy().tobytes())
    h.update((t.table.handles() & 0xFFFFFFFF).tobytes())
    h.update(repr(sorted(st.items())).encode())
    h.update(repr(tuple(t.counts().items())).encode())
    h.update(repr((t.scans, t.sorts, float(t.clutter_density))).encode())
    h.update(np.ascontiguousarray(t.waiting).tobytes())
    return h.hexdigest()[:16]


def run(name, threads, layout="rows"):
    """The case's hash after every scan at this thread count, the track
    table in `layout` (the record's: rows, whatever the default). With
    layout="lanes" the table's memory count is the rows layout's, so that
    both layouts hash to the golden record."""
    kind, skw, ckw, _ = CASES[name]
    skw = dict(skw)
    data = scans(kind, skw.pop("n"), skw.pop("scans"), **skw)
    config = TrackerConfig(threads=threads, layout=layout, **_PAR, **ckw)
    t = Tracker(config)
    nbytes = None
    if layout != "rows":
        nbytes = Table(track_schema(config.dim, config.motion, "rows"), config.capacity).nbytes
    h = hashlib.blake2b(digest_size=16)
    out = []
    for z, dt, sensor in data:
        t.tick(z, dt, sensor=sensor) if sensor is not None else t.tick(z, dt)
        out.append(state_digest(t, h, nbytes))
    t.table.check()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the golden file from this build")
    args = ap.parse_args(argv)
    golden = {}
    for name, case in CASES.items():
        runs = {n: run(name, n) for n in case[3]}
        first = runs[case[3][0]]
        for n, r in runs.items():
            if r != first:
                s = next(i for i, (a, b) in enumerate(zip(first, r)) if a != b)
                sys.exit(f"{name}: threads={n} differs from threads={case[3][0]} at scan {s}")
        golden[name] = first
        print(f"{name}: {len(first)} scans, final {first[-1]}")
    if args.write:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1) + "\n")
        print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    main()
