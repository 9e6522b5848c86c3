"""Tracking metrics: GOSPA and OSPA, HOTA, MOTA and IDF1 (numpy and dod's assignment solver).

.. not run: a formula, not code (tests/test_metrics_*.py check the functions against it)

GOSPA (Rahmathullah, Garcia-Fernandez, Svensson 2017), alpha = 2::

    GOSPA(X, Y) = ( min over assignments g of  sum_{(i,j) in g} d(x_i, y_j)^p
                    + c^p / 2 * (|X| + |Y| - 2 |g|) )^(1/p)

with assigned pairs restricted to d < c: every unassigned truth is a missed
target and every unassigned estimate a false one, each costing c^p / 2.
:func:`gospa` also returns that decomposition (localisation, missed, false).

.. not run: a formula, not code

OSPA (Schuhmacher, Vo, Vo 2008), for ``|X| = m <= n = |Y|`` (symmetric)::

    OSPA(X, Y) = ( (min over permutations sum_{i<=m} min(d, c)^p + c^p (n - m)) / n )^(1/p)

Both solve one exact assignment (dod's nogil solver) on the min(d, c)^p matrix.

Two spellings of GOSPA, one value: :func:`gospa` builds the dense m x n
matrix (the definition, any size); :func:`sparse_gospa` finds the pairs
closer than c through a grid and solves each connected component apart, for
thousands of points per scan (the live demo samples it between ticks).

HOTA (Luiten et al., IJCV 2021), as TrackEval computes it, for points: the
similarity of a truth and an estimate is ``max(0, 1 - d / max_distance)``
(the role IoU plays for boxes). For each threshold alpha in 0.05, 0.10, ...,
0.95, every frame is matched by a maximum-score assignment whose score is the
similarity times the pair's global alignment score (how often the two ids
could match over the whole sequence); matches with similarity >= alpha are
true positives. Then DetA = TP / (TP + FN + FP), AssA = the mean over true
positives of TPA / (TPA + FNA + FPA) of their id pair, HOTA = sqrt(DetA AssA),
LocA = the mean similarity of the true positives; each reported value is the
mean over the 19 thresholds. :func:`hota` finds pairs through the grid and
solves each frame's connected components apart (pairs at similarity 0 add
nothing), so 1,000 targets over 300 frames take seconds, not minutes;
``tests/test_metrics_hota.py`` checks it against TrackEval to 1e-9.

MOTA and IDF1 (:func:`clear_mot`) match truth and estimates within a
distance, as py-motmetrics does from squared distances, through the same grid
and per-component assignments: every count equals py-motmetrics' (checked in
``tests/test_metrics_mot.py``), at a frame of 2,000 points in milliseconds
where py-motmetrics builds and solves the dense matrix.
"""
import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays


def _assign(cost):
    from dod.tracker.assignment import solve_assignment

    return solve_assignment(cost)


def _points(P, name):
    """A point set as float64 rows (m, dim): (m, dim) or (m,) (1-D points);
    any real array-like (dod._ndarray.input_array). TypeError for objects or
    a non-real dtype, ValueError for a 0-d array or more than 2 dimensions."""
    a = input_array(P, np.float64, name)
    if a.ndim not in (1, 2):
        raise ValueError(f"{name} must be points of shape (m, dim) or (m,), not {a.shape}"
                         + (" (a 0-d array)" if a.ndim == 0 else ""))
    return a.reshape(len(a), -1) if len(a) else np.zeros((0, a.shape[1] if a.ndim == 2 else 1))


def _distances(X, Y):
    X = _points(X, "X")
    Y = _points(Y, "Y")
    if len(X) and len(Y) and X.shape[1] != Y.shape[1]:
        raise ValueError(f"points of different dimension: {X.shape[1]} and {Y.shape[1]}")
    if len(X) and len(Y):
        return np.sqrt(((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1))
    return np.zeros((len(X), len(Y)))


def gospa(X, Y, c=10.0, p=2.0, details=False):
    """GOSPA distance (alpha = 2) between point sets X (truth) and Y (estimates).

    The definition (the module's formula), from one dense m x n matrix and one
    exact assignment: use it for small sets or as the reference;
    :func:`sparse_gospa` gives the same value without the matrix.

    Parameters
    ----------
    X : array_like
        The truth: points of shape (m, dim), or (m,) for dim 1; any real dtype.
    Y : array_like
        The estimates: points of shape (n, dim).
    c : float, default 10.0
        The cut-off: pairs c or more apart are not assigned, and each
        unassigned point costs ``c**p / 2``.
    p : float, default 2.0
        The order (>= 1).
    details : bool, default False
        Also return the decomposition.

    Returns
    -------
    float or tuple
        The distance; with ``details=True`` the tuple ``(gospa, localisation,
        missed, false)``, where ``gospa**p == localisation + c**p / 2 * (missed
        + false)``.

    Raises
    ------
    ValueError
        For c <= 0 or p < 1, a 0-d array or one of more than 2 dimensions, or
        points of different dimension.
    TypeError
        For Python objects or a non-real dtype.

    Notes
    -----
    Thread-safety: a pure function (any thread).

    Examples
    --------
    >>> from dod.tracker.metrics import gospa
    >>> gospa([[0.0, 0.0], [100.0, 0.0]], [[0.0, 1.0]], c=10.0, details=True)   # one found, one missed
    (7.14142842854285, 1.0, 1, 0)
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


def _pairs_within(X, Y, c):
    """Index pairs (i, j) with |X_i - Y_j| < c, through a grid of cell side c
    (no m x n matrix). Returns (i, j, d)."""
    dim = X.shape[1]
    cx = np.floor(X / c).astype(np.int64)
    cy = np.floor(Y / c).astype(np.int64)
    lo = np.minimum(cx.min(0), cy.min(0)) - 1
    span = np.maximum(cx.max(0), cy.max(0)) - lo + 2
    strides = np.cumprod(np.concatenate([[1], span[:-1]]))
    ky = ((cy - lo) * strides).sum(1)
    order = np.argsort(ky, kind="stable")
    ky_sorted = ky[order]
    kx = ((cx - lo) * strides).sum(1)
    xorder = np.argsort(kx, kind="stable")       # sorted needles: searchsorted walks forward
    kx = kx[xorder]
    ii, jj = [], []
    for off in np.ndindex(*(3,) * dim):
        k = kx + ((np.asarray(off) - 1) * strides).sum()
        a = np.searchsorted(ky_sorted, k, "left")
        b = np.searchsorted(ky_sorted, k, "right")
        cnt = b - a
        if not cnt.any():
            continue
        i = np.repeat(xorder, cnt)
        starts = np.repeat(a - np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt)
        j = order[np.arange(i.size) + starts]
        ii.append(i)
        jj.append(j)
    if not ii:
        e = np.zeros(0, dtype=np.int64)
        return e, e, np.zeros(0)
    i = np.concatenate(ii)
    j = np.concatenate(jj)
    d = np.sqrt(((X[i] - Y[j]) ** 2).sum(1))
    keep = d < c
    return i[keep], j[keep], d[keep]


def _components(a, b):
    """Connected component of every edge (a[k], b[k]) of a graph given by its
    edges: minimum-label propagation with pointer jumping (components here
    are small, so a few rounds). Returns per-edge labels 0..K-1."""
    nodes, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    ea, eb = inv[:a.size], inv[a.size:]
    lab = np.arange(nodes.size)
    while True:
        low = np.minimum(lab[ea], lab[eb])
        new = lab.copy()
        np.minimum.at(new, ea, low)
        np.minimum.at(new, eb, low)
        new = new[new]
        if np.array_equal(new, lab):
            break
        lab = new
    return np.unique(lab[ea], return_inverse=True)[1]


def sparse_gospa(X, Y, c=10.0, p=2.0, details=False):
    """GOSPA (alpha = 2), equal to :func:`gospa` (to rounding), without the dense matrix.

    The pairs closer than c are found through a grid and the assignment is
    solved per connected component of that pair graph (pairs c or more apart
    cost ``c**p``, the same as leaving both unassigned, so the components are
    independent). Thousands of points per scan take milliseconds where the
    dense version takes a hundred times longer: the demo samples it between
    ticks.

    Parameters
    ----------
    X : array_like
        The truth: points of shape (m, dim), or (m,) for dim 1; any real dtype.
    Y : array_like
        The estimates: points of shape (n, dim).
    c : float, default 10.0
        The cut-off, as for :func:`gospa`.
    p : float, default 2.0
        The order (>= 1).
    details : bool, default False
        Also return ``(localisation, missed, false)``.

    Returns
    -------
    float or tuple
        As :func:`gospa`.

    Raises
    ------
    ValueError, TypeError
        As :func:`gospa`.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    if not (c > 0 and p >= 1):
        raise ValueError("need c > 0 and p >= 1")
    X = _points(X, "X")
    Y = _points(Y, "Y")
    m, n = len(X), len(Y)
    loc, assigned = 0.0, 0
    if m and n:
        if X.shape[1] != Y.shape[1]:
            raise ValueError(f"points of different dimension: {X.shape[1]} and {Y.shape[1]}")
        i, j, d = _pairs_within(X, Y, c)
        if i.size:
            deg_i = np.bincount(i, minlength=m)
            deg_j = np.bincount(j, minlength=n)
            single = (deg_i[i] == 1) & (deg_j[j] == 1)
            loc += float((d[single] ** p).sum())
            assigned += int(single.sum())
            rest = ~single
            if rest.any():
                a, b, dr = i[rest], j[rest] + m, d[rest]      # Y nodes numbered after X
                comp = _components(a, b)
                # A component with one point on either side: its nearest pair.
                nc = int(comp.max()) + 1
                xa = np.unique(np.stack([comp, a], 1), axis=0)     # (component, node), sorted
                yb = np.unique(np.stack([comp, b], 1), axis=0)
                nx = np.bincount(xa[:, 0], minlength=nc)
                ny = np.bincount(yb[:, 0], minlength=nc)
                star = (np.minimum(nx, ny) == 1)[comp]
                if star.any():
                    best = np.full(nc, np.inf)
                    np.minimum.at(best, comp[star], dr[star] ** p)
                    loc += float(best[np.isfinite(best)].sum())
                    assigned += int(np.isfinite(best).sum())
                # Two on each side (crossing pairs): the cheaper of the two pairings.
                quad = (nx == 2) & (ny == 2)
                if quad.any():
                    xq = xa[quad[xa[:, 0]], 1].reshape(-1, 2)          # rows come in pairs
                    yq = yb[quad[yb[:, 0]], 1].reshape(-1, 2) - m
                    D = np.sqrt(((X[xq][:, :, None, :] - Y[yq][:, None, :, :]) ** 2).sum(-1))
                    C = np.minimum(D, c) ** p
                    straight = C[:, 0, 0] + C[:, 1, 1] <= C[:, 0, 1] + C[:, 1, 0]
                    d1 = np.where(straight, D[:, 0, 0], D[:, 0, 1])
                    d2 = np.where(straight, D[:, 1, 1], D[:, 1, 0])
                    for dd in (d1, d2):
                        real = dd < c
                        loc += float((dd[real] ** p).sum())
                        assigned += int(real.sum())
                # The rest (larger components): an exact assignment each.
                others = np.flatnonzero(~star & ~quad[comp])
                if others.size:
                    others = others[np.argsort(comp[others], kind="stable")]
                    cuts = np.flatnonzero(np.diff(comp[others])) + 1
                    for e in np.split(others, cuts):
                        xs = np.unique(a[e])
                        ys = np.unique(b[e]) - m
                        _, l_, miss, _ = gospa(X[xs], Y[ys], c, p, details=True)
                        loc += l_
                        assigned += len(xs) - miss
    missed, false = m - assigned, n - assigned
    value = (loc + c**p / 2.0 * (missed + false)) ** (1.0 / p)
    return (value, loc, missed, false) if details else value


def ospa(X, Y, c=10.0, p=2.0):
    """OSPA distance between point sets X and Y (0 when both are empty).

    Parameters
    ----------
    X : array_like
        The truth: points of shape (m, dim), or (m,) for dim 1; any real dtype.
    Y : array_like
        The estimates: points of shape (n, dim).
    c : float, default 10.0
        The cut-off: each distance counts at most c, and each point without a
        partner costs c.
    p : float, default 2.0
        The order (>= 1).

    Returns
    -------
    float
        In [0, c]; symmetric in X and Y.

    Raises
    ------
    ValueError, TypeError
        As :func:`gospa`.

    Notes
    -----
    Thread-safety: a pure function (any thread).

    Examples
    --------
    >>> from dod.tracker.metrics import ospa
    >>> ospa([[0.0, 0.0]], [[3.0, 4.0], [50.0, 0.0]], c=10.0)      # 5 m off, and one point too many
    7.905694150420948
    """
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


HOTA_ALPHAS = np.arange(0.05, 0.99, 0.05)       # TrackEval's 19 thresholds


def _match_frame(i, j, score, m):
    """Maximum-score matching of one frame's pairs (i truth, j estimate; score > 0):
    singles directly, every larger connected component by an exact assignment.
    Returns the indices of the matched pairs."""
    if i.size == 0:
        return np.zeros(0, dtype=np.intp)
    deg_i = np.bincount(i)
    deg_j = np.bincount(j)
    single = (deg_i[i] == 1) & (deg_j[j] == 1)
    out = [np.flatnonzero(single)]
    rest = np.flatnonzero(~single)
    if rest.size:
        comp = _components(i[rest], j[rest] + m)
        rest = rest[np.argsort(comp, kind="stable")]
        cuts = np.flatnonzero(np.diff(np.sort(comp))) + 1
        for e in np.split(rest, cuts):
            xs, li = np.unique(i[e], return_inverse=True)
            ys, lj = np.unique(j[e], return_inverse=True)
            cost = np.zeros((xs.size, ys.size))
            cost[li, lj] = -score[e]
            edge = np.full((xs.size, ys.size), -1, dtype=np.intp)
            edge[li, lj] = e
            r, c = _assign(cost)
            hit = edge[r, c]
            out.append(hit[hit >= 0])
    return np.concatenate(out)


def _check_sequence(truth_ids, truth_pos, est_ids, est_pos, max_distance):
    """The checks every sequence score makes first; returns the frame count."""
    if not (max_distance > 0 and np.isfinite(max_distance)):
        raise ValueError(f"max_distance must be positive and finite, not {max_distance!r}")
    frames = len(truth_ids)
    if not (len(truth_pos) == len(est_ids) == len(est_pos) == frames):
        raise ValueError("truth_ids, truth_pos, est_ids and est_pos need one entry per frame")
    return frames


def _sequence_ids(ids, name):
    """One side's ids: per frame (int64, distinct within the frame), each
    one's index 0..K-1 over the sequence (in id order) in frame order, K, and
    each frame's offset into that concatenation."""
    frame = []
    for f, a in enumerate(ids):
        a = np.asarray(a, dtype=np.int64).reshape(-1)
        if np.unique(a).size != a.size:
            raise ValueError(f"frame {f}: {name} ids repeat within the frame")
        frame.append(a)
    every = np.concatenate(frame) if frame else np.zeros(0, np.int64)
    uni, idx = np.unique(every, return_inverse=True)
    off = np.concatenate([[0], np.cumsum([a.size for a in frame])]).astype(np.intp)
    return frame, idx.reshape(-1), uni.size, off


def _frame_points(pos, k, f, name):
    """One frame's (k, dim) float64 positions: one finite row per id."""
    X = input_array(pos, np.float64, f"frame {f}: {name} positions")
    if k == 0 and X.size == 0:
        return X.reshape(0, X.shape[-1] if X.ndim == 2 else 0)      # an empty frame, any shape
    if X.ndim != 2 or X.shape[0] != k:
        raise ValueError(f"frame {f}: {name} positions must be ({k}, dim) for {k} ids, "
                         f"not {X.shape}")
    if not np.isfinite(X).all():
        raise ValueError(f"frame {f}: {name} positions must be finite")
    return X


def hota(truth_ids, truth_pos, est_ids, est_pos, max_distance=5.0):
    """HOTA, DetA, AssA and LocA of a sequence of point sets (TrackEval's definition).

    Parameters
    ----------
    truth_ids, est_ids : sequence of array_like
        Per frame, the ids (k,) of the truth and of the estimates (any integers;
        an id may not repeat within a frame).
    truth_pos, est_pos : sequence of array_like
        Per frame, their positions (k, dim), finite, one row per id.
    max_distance : float, default 5.0
        The distance at which the similarity ``1 - d / max_distance`` reaches 0
        (the positions' units).

    Returns
    -------
    dict
        ``hota``, ``deta``, ``assa``, ``loca`` (means over the 19 thresholds of
        :data:`HOTA_ALPHAS`), ``hota_alpha``, ``deta_alpha``, ``assa_alpha``,
        ``loca_alpha`` (per threshold), and the integer arrays ``tp``, ``fn``,
        ``fp`` per threshold.

    Raises
    ------
    ValueError
        For sequences of different lengths, a non-positive max_distance, ids
        that repeat within a frame (TrackEval refuses them too), positions that
        are not one finite row per id, or points of different dimension.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    frames = _check_sequence(truth_ids, truth_pos, est_ids, est_pos, max_distance)
    g_ids, g_idx, ng, g_off = _sequence_ids(truth_ids, "truth")
    t_ids, t_idx, nt, t_off = _sequence_ids(est_ids, "estimate")
    g_count = np.bincount(g_idx, minlength=ng).astype(np.float64)
    t_count = np.bincount(t_idx, minlength=nt).astype(np.float64)
    # Per frame: pairs within max_distance, their similarity and global key.
    eps = np.finfo(float).eps
    per_frame = []
    keys, pot = [], []
    for f in range(frames):
        m, n = g_ids[f].size, t_ids[f].size
        X = _frame_points(truth_pos[f], m, f, "truth")
        Y = _frame_points(est_pos[f], n, f, "estimate")
        if m == 0 or n == 0:
            per_frame.append(None)
            continue
        if X.shape[1] != Y.shape[1]:
            raise ValueError(f"frame {f}: points of different dimension")
        i, j, d = _pairs_within(X, Y, max_distance)
        sim = 1.0 - d / max_distance
        ok = sim > 0.0
        i, j, sim = i[ok], j[ok], sim[ok]
        key = g_idx[g_off[f] + i] * nt + t_idx[t_off[f] + j]
        denom = np.bincount(i, sim, minlength=m)[i] + np.bincount(j, sim, minlength=n)[j] - sim
        iou = np.where(denom > eps, sim / np.where(denom > eps, denom, 1.0), 0.0)
        keys.append(key)
        pot.append(iou)
        per_frame.append((i, j, sim, key, m))
    if keys:
        all_keys = np.concatenate(keys)
        uk, inv = np.unique(all_keys, return_inverse=True)
        potential = np.bincount(inv, np.concatenate(pot), minlength=uk.size)
    else:
        uk, potential = np.zeros(0, np.int64), np.zeros(0)
    kg, kt = uk // max(nt, 1), uk % max(nt, 1)
    alignment = potential / (g_count[kg] + t_count[kt] - potential)
    m_key, m_sim = [], []
    for f, fr in enumerate(per_frame):
        if fr is None:
            continue
        i, j, sim, key, m = fr
        ki = np.searchsorted(uk, key)
        score = alignment[ki] * sim
        hit = _match_frame(i, j, score, m)
        m_key.append(ki[hit])
        m_sim.append(sim[hit])
    mk = np.concatenate(m_key) if m_key else np.zeros(0, np.intp)
    ms = np.concatenate(m_sim) if m_sim else np.zeros(0)
    A = HOTA_ALPHAS.size
    tp = np.zeros(A, np.int64)
    loc = np.zeros(A)
    assa = np.zeros(A)
    for a, alpha in enumerate(HOTA_ALPHAS):
        keep = ms >= alpha - eps
        tp[a] = int(keep.sum())
        loc[a] = float(ms[keep].sum())
        mc = np.bincount(mk[keep], minlength=uk.size).astype(np.float64)
        ass = mc / np.maximum(1.0, g_count[kg] + t_count[kt] - mc)
        assa[a] = float((mc * ass).sum()) / max(1, tp[a])
    fn = g_idx.size - tp
    fp = t_idx.size - tp
    loca = np.maximum(1e-10, loc) / np.maximum(1e-10, tp)
    deta = tp / np.maximum(1, tp + fn + fp)
    h = np.sqrt(deta * assa)
    return {"hota": float(h.mean()), "deta": float(deta.mean()), "assa": float(assa.mean()),
            "loca": float(loca.mean()), "hota_alpha": h, "deta_alpha": deta, "assa_alpha": assa,
            "loca_alpha": loca, "tp": tp, "fn": fn, "fp": fp}


def clear_mot(truth_ids, truth_pos, est_ids, est_pos, max_distance=5.0):
    """MOTA, MOTP and the identity scores (IDF1, IDP, IDR) of a sequence of point sets.

    The CLEAR MOT matching (Bernardin, Stiefelhagen 2008) as py-motmetrics 1.4
    computes it from squared distances (``norm2squared_matrix(max_d2=
    max_distance**2)``), without its dense per-frame matrix. A truth and an
    estimate can match when ``d <= max_distance``. Each frame, a truth keeps the
    estimate it last matched (in any earlier frame) while that pair can still
    match; a conflict goes to the truth listed first. The rest are matched by the
    most pairs, then the least sum of squared distances; a truth matched to an
    estimate other than its last is an identity switch. Then
    MOTA = 1 - (misses + false positives + switches) / truths.
    IDF1 (Ristani et al. 2016): one global one-to-one map of truth ids to
    estimate ids maximising IDTP, the frames in which mapped pairs can match;
    IDF1 = 2 IDTP / (truths + estimates).

    Both matchings are solved per connected component of the graph of pairs
    that can match (found through a grid), so thousands of points a frame cost
    milliseconds; ``tests/test_metrics_mot.py`` checks every count against
    py-motmetrics. Where two matchings tie exactly (equal pair counts and
    sums, e.g. duplicate estimates at one position) the solvers may pick
    different ones, and the switch counts can then differ.

    Parameters
    ----------
    truth_ids, est_ids : sequence of array_like
        Per frame, the ids (k,) of the truth and of the estimates (any integers;
        an id may not repeat within a frame).
    truth_pos, est_pos : sequence of array_like
        Per frame, their positions (k, dim), finite, one row per id.
    max_distance : float, default 5.0
        The farthest a truth and an estimate may be apart and still match.

    Returns
    -------
    dict
        ``mota``, ``motp`` (mean distance of the matched pairs; py-motmetrics
        fed squared distances reports its square), ``idf1``, ``idp``, ``idr``,
        ``num_switches``, ``num_false_positives``, ``num_misses``,
        ``num_objects``, ``num_predictions``, ``num_detections`` (matched
        pairs), ``num_matches`` (those that are not switches, as py-motmetrics
        counts), ``idtp``, ``num_unique_objects`` (truth ids) and how many of
        them were matched in at least 80 % of their frames
        (``mostly_tracked``), 20-80 % (``partially_tracked``) or under 20 %
        (``mostly_lost``). Ratios with a zero denominator are NaN.

    Raises
    ------
    ValueError
        For sequences of different lengths, a non-positive max_distance, ids
        that repeat within a frame, positions that are not one finite row per
        id, or points of different dimension.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    frames = _check_sequence(truth_ids, truth_pos, est_ids, est_pos, max_distance)
    g_ids, g_idx, ng, g_off = _sequence_ids(truth_ids, "truth")
    t_ids, t_idx, nt, t_off = _sequence_ids(est_ids, "estimate")
    r2 = float(max_distance) ** 2
    reach = np.nextafter(float(max_distance), np.inf)    # _pairs_within keeps d < reach
    last = np.full(ng, -1, dtype=np.intp)       # the estimate each truth last matched
    covered = np.zeros(ng, dtype=np.int64)      # frames in which each truth was matched
    switches = matches = 0
    dist_sum = 0.0
    keys = []
    for f in range(frames):
        m, n = g_ids[f].size, t_ids[f].size
        X = _frame_points(truth_pos[f], m, f, "truth")
        Y = _frame_points(est_pos[f], n, f, "estimate")
        if m == 0 or n == 0:
            continue
        if X.shape[1] != Y.shape[1]:
            raise ValueError(f"frame {f}: points of different dimension")
        i, j, _ = _pairs_within(X, Y, reach)
        d2 = ((X[i] - Y[j]) ** 2).sum(1)
        ok = d2 <= r2
        i, j, d2 = i[ok], j[ok], d2[ok]
        gi = g_idx[g_off[f] + i]
        tj = t_idx[t_off[f] + j]
        keys.append(gi * nt + tj)
        # 1. Kept: pairs that matched before; an estimate claimed twice goes to
        #    the truth listed first.
        kept = np.flatnonzero(last[gi] == tj)
        kept = kept[np.argsort(i[kept], kind="stable")]
        kept = kept[np.unique(j[kept], return_index=True)[1]]
        # 2. The rest: most pairs, then least squared distance (a pair's score
        #    L - d2 with L above any component's total d2 puts count first).
        free_i = np.ones(m, bool)
        free_j = np.ones(n, bool)
        free_i[i[kept]] = False
        free_j[j[kept]] = False
        rest = np.flatnonzero(free_i[i] & free_j[j])
        big = r2 * (min(m, n) + 1)
        new = rest[_match_frame(i[rest], j[rest], big - d2[rest], m)]
        switches += int(((last[gi[new]] >= 0) & (last[gi[new]] != tj[new])).sum())
        both = np.concatenate([kept, new])
        last[gi[both]] = tj[both]
        covered[gi[both]] += 1
        matches += both.size
        dist_sum += float(np.sqrt(d2[both]).sum())
    # IDF1: the id map with the most frames in reach, per component of the id-pair graph.
    if keys:
        uk, count = np.unique(np.concatenate(keys), return_counts=True)
        idtp = int(count[_match_frame(uk // nt, uk % nt, count.astype(np.float64), ng)].sum())
    else:
        idtp = 0
    no, nh = g_idx.size, t_idx.size
    misses, false = no - matches, nh - matches
    ratio = covered / np.maximum(np.bincount(g_idx, minlength=ng), 1)
    nan = float("nan")
    return {"mota": 1.0 - (misses + false + switches) / no if no else nan,
            "motp": dist_sum / matches if matches else nan,
            "idf1": 2.0 * idtp / (no + nh) if no + nh else nan,
            "idp": idtp / nh if nh else nan, "idr": idtp / no if no else nan,
            "num_switches": switches, "num_false_positives": false, "num_misses": misses,
            "num_objects": no, "num_predictions": nh, "num_detections": matches,
            "num_matches": matches - switches, "idtp": idtp, "num_unique_objects": ng,
            "mostly_tracked": int((ratio >= 0.8).sum()),
            "partially_tracked": int(((ratio >= 0.2) & (ratio < 0.8)).sum()),
            "mostly_lost": int((ratio < 0.2).sum())}


def scenario_hota(scenario, estimates, max_distance=5.0):
    """:func:`hota` of a scenario's truth against per-scan (ids, positions) estimates.

    Parameters
    ----------
    scenario : dod.tracker.scenario.Scenario
        The truth (its ``truth_ids`` and ``truth_pos`` per scan).
    estimates : sequence of tuple
        Per scan, ``(ids, positions)`` of the confirmed tracks (what
        :func:`run_tracker` returns), as many as the scenario has scans.
    max_distance : float, default 5.0
        As for :func:`hota` (metres).

    Returns
    -------
    dict
        As :func:`hota`.

    Raises
    ------
    ValueError
        As :func:`hota`.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    return hota(scenario.truth_ids, scenario.truth_pos, [e[0] for e in estimates],
                [e[1] for e in estimates], max_distance)


def scenario_gospa(scenario, estimates, c=10.0, p=2.0):
    """Mean :func:`gospa` over a scenario's scans.

    Parameters
    ----------
    scenario : dod.tracker.scenario.Scenario
        The truth (its ``truth_ids`` and ``truth_pos`` per scan).
    estimates : sequence of tuple
        Per scan, ``(ids, positions)`` of the confirmed tracks (what
        :func:`run_tracker` returns), as many as the scenario has scans.
    c : float, default 10.0
        The cut-off, as for :func:`gospa`.
    p : float, default 2.0
        The order (>= 1).

    Returns
    -------
    float
        The mean over the scans (0.0 for none).

    Raises
    ------
    ValueError
        As :func:`gospa`.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    vals = [gospa(tp, est[1], c, p) for tp, est in zip(scenario.truth_pos, estimates)]
    return float(np.mean(vals)) if vals else 0.0


def mot_metrics(scenario, estimates, max_distance=5.0):
    """:func:`clear_mot` (MOTA, IDF1 and the counts) of a scenario's truth against its estimates.

    Parameters
    ----------
    scenario : dod.tracker.scenario.Scenario
        The truth (its ``truth_ids`` and ``truth_pos`` per scan).
    estimates : sequence of tuple
        Per scan, ``(ids, positions)`` of the confirmed tracks (what
        :func:`run_tracker` returns), as many as the scenario has scans.
    max_distance : float, default 5.0
        Match within this distance (metres), as for :func:`clear_mot`.

    Returns
    -------
    dict
        As :func:`clear_mot`.

    Raises
    ------
    ValueError
        As :func:`clear_mot`.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    return clear_mot(scenario.truth_ids, scenario.truth_pos, [e[0] for e in estimates],
                     [e[1] for e in estimates], max_distance)


def run_tracker(tracker, scenario):
    """Feed every scan of a scenario to a tracker.

    Parameters
    ----------
    tracker : Tracker or ReferenceTracker
        Anything with ``tick(detections, dt)`` and ``confirmed_tracks()``.
    scenario : iterable
        Its items are ``(detections, dt)`` per scan, or ``(detections, dt,
        sensor)`` (a :class:`~dod.tracker.scenario.Scenario`, a radar scenario,
        or a list of such tuples).

    Returns
    -------
    list of tuple
        Per scan, ``(ids, positions)`` of the tracker's confirmed tracks after
        that scan (copies).

    Raises
    ------
    Exception
        Whatever the tracker's tick raises.

    Notes
    -----
    Thread-safety: the tracker's (one thread at a time).
    """
    out = []
    for z, dt, *sensor in scenario:         # a RadarScenario yields each scan's sensor too
        tracker.tick(z, dt, *sensor)
        out.append(tracker.confirmed_tracks())
    return out
