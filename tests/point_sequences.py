"""Seeded sequences of truth and estimate point sets for the scoring tests
(tests/test_metrics_mot.py, tests/test_metrics_hota.py)."""
import numpy as np


def random_sequence(seed, frames=60, n=16, dim=2, spread=30.0, noise=0.8, swap=0.15, unseen=0):
    """Random tracks with id swaps between truths, fragments of the estimates'
    ids, false tracks, a frame without truth and one without estimates, close
    together so that frames have multi-pair components and crossings; the
    last `unseen` targets are never estimated."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, spread, size=(n, dim))
    vel = rng.normal(scale=0.5, size=(n, dim))
    tid = np.arange(n) + 100
    ti, tp, ei, ep = [], [], [], []
    for f in range(frames):
        pos = pos + vel
        alive = rng.random(n) < 0.9
        if f % 13 == 7:
            alive[:] = False
        seen = alive & (rng.random(n) < 0.85)
        seen[n - unseen:] = False
        if f % 17 == 11:
            seen[:] = False
        order = rng.permutation(n)                # frame order matters to the kept matches
        ti.append(tid[order][alive[order]])
        tp.append(pos[order][alive[order]])
        if rng.random() < swap:
            a, b = rng.choice(n, 2, replace=False)
            tid[[a, b]] = tid[[b, a]]
        ids = np.flatnonzero(seen) + 1 + 50 * (f // 10)
        est = pos[seen] + rng.normal(scale=noise, size=(seen.sum(), dim))
        k = int(rng.integers(0, 4))
        ids = np.concatenate([ids, 1000 + rng.choice(6, size=k, replace=False)])
        est = np.concatenate([est, rng.uniform(0, spread, size=(k, dim))])
        ei.append(ids)
        ep.append(est)
    return ti, tp, ei, ep


def five_still_points(frames=10):
    """Five points held still for `frames` frames: (ids, positions, and the
    ids reversed from the middle frame on, the positions exact)."""
    rng = np.random.default_rng(1)
    ids = [np.arange(5)] * frames
    pos = [rng.uniform(0, 100, size=(5, 2)) for _ in range(frames)]
    swapped = [a if f < frames // 2 else a[::-1] for f, a in enumerate(ids)]
    return ids, pos, swapped
