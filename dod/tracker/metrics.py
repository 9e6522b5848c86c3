"""Tracking metrics: GOSPA and OSPA (numpy), MOTA/IDF1 through py-motmetrics.

GOSPA (Rahmathullah, Garcia-Fernandez, Svensson 2017), alpha = 2:

    GOSPA(X, Y) = ( min over assignments g of  sum_{(i,j) in g} d(x_i, y_j)^p
                    + c^p / 2 * (|X| + |Y| - 2 |g|) )^(1/p)

with assigned pairs restricted to d < c: every unassigned truth is a missed
target and every unassigned estimate a false one, each costing c^p / 2.
:func:`gospa` also returns that decomposition (localisation, missed, false).

OSPA (Schuhmacher, Vo, Vo 2008), for |X| = m <= n = |Y| (symmetric):

    OSPA(X, Y) = ( (min over permutations sum_{i<=m} min(d, c)^p + c^p (n - m)) / n )^(1/p)

Both solve one exact assignment (dod's nogil solver) on the min(d, c)^p matrix.
"""
import numpy as np


def _assign(cost):
    from dod.tracker.assignment import solve_assignment

    return solve_assignment(cost)


def _distances(X, Y):
    X = np.asarray(X, dtype=np.float64).reshape(len(X), -1) if len(X) else np.zeros((0, 1))
    Y = np.asarray(Y, dtype=np.float64).reshape(len(Y), -1) if len(Y) else np.zeros((0, 1))
    if len(X) and len(Y):
        return np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    return np.zeros((len(X), len(Y)))


def gospa(X, Y, c=10.0, p=2.0, details=False):
    """GOSPA distance (alpha = 2) between point sets X (truth) and Y (estimates).

    With ``details=True`` returns (gospa, localisation, missed, false) where
    ``gospa**p == localisation + c**p / 2 * (missed + false)``.
    """
    if not (c > 0 and p >= 1):
        raise ValueError("need c > 0 and p >= 1")
    D = _distances(X, Y)
    m, n = D.shape
    loc = 0.0
    assigned = 0
    if m and n:
        C = np.minimum(D, c) ** p
        r, k = _assign(C)
        real = D[r, k] < c
        loc = float(C[r, k][real].sum())
        assigned = int(real.sum())
    missed = m - assigned
    false = n - assigned
    value = (loc + c**p / 2.0 * (missed + false)) ** (1.0 / p)
    return (value, loc, missed, false) if details else value


def ospa(X, Y, c=10.0, p=2.0):
    """OSPA distance between point sets X and Y (0 when both are empty)."""
    if not (c > 0 and p >= 1):
        raise ValueError("need c > 0 and p >= 1")
    D = _distances(X, Y)
    m, n = D.shape
    if m > n:
        D, m, n = D.T, n, m
    if n == 0:
        return 0.0
    total = c**p * (n - m)
    if m:
        C = np.minimum(D, c) ** p
        r, k = _assign(C)
        total += float(C[r, k].sum())
    return (total / n) ** (1.0 / p)


def scenario_gospa(scenario, estimates, c=10.0, p=2.0):
    """Mean GOSPA over scans; `estimates` is a list of (ids, positions) per scan."""
    vals = [gospa(tp, est[1], c, p) for tp, est in zip(scenario.truth_pos, estimates)]
    return float(np.mean(vals)) if vals else 0.0


def mot_metrics(scenario, estimates, max_distance=5.0):
    """MOTA, IDF1 and friends through py-motmetrics (the optional extra).

    `estimates`: per scan, (ids, positions) of the confirmed tracks. Truth and
    estimates match when closer than `max_distance` (metres). Returns a dict
    (mota, motp, idf1, num_switches, num_false_positives, num_misses,
    num_objects). Raises ImportError without motmetrics.
    """
    import motmetrics as mm

    acc = mm.MOTAccumulator(auto_id=True)
    for tid, tpos, (eid, epos) in zip(scenario.truth_ids, scenario.truth_pos, estimates):
        d = mm.distances.norm2squared_matrix(np.asarray(tpos), np.asarray(epos),
                                             max_d2=max_distance**2)
        acc.update(list(map(int, tid)), list(map(int, eid)), d)
    mh = mm.metrics.create()
    names = ["mota", "motp", "idf1", "num_switches", "num_false_positives", "num_misses",
             "num_objects"]
    summary = mh.compute(acc, metrics=names, name="run")
    return {k: float(summary[k].iloc[0]) for k in names}


def run_tracker(tracker, scenario):
    """Feed every scan to `tracker`; return the per-scan (ids, positions) of
    its confirmed tracks (copies)."""
    out = []
    for z, dt in scenario:
        tracker.tick(z, dt)
        out.append(tracker.confirmed_tracks())
    return out
