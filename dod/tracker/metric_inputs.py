"""dod's per-scan tracks as the inputs of the MOT evaluation packages: py-motmetrics and TrackEval.

:mod:`dod.tracker.metrics` computes GOSPA, HOTA, MOTA and IDF1 itself (and
its tests hold those to the two packages' values). A user who already runs
py-motmetrics or TrackEval on other trackers wants dod's output in their
pipeline instead, to score everything with one code. Both take per-frame
ids and a truth-to-estimate matrix:

* :func:`motmetrics_accumulator` fills a py-motmetrics ``MOTAccumulator``:
  one ``update`` per scan with the squared distances, ``nan`` beyond
  ``max_distance`` (what ``motmetrics.distances.norm2squared_matrix(...,
  max_d2=max_distance**2)`` gives), frame ids the scan indices. Then
  ``motmetrics.metrics.create().compute(acc, ...)`` as for any tracker.
* :func:`trackeval_data` builds the dict TrackEval's metrics read
  (``trackeval.metrics.HOTA().eval_sequence(data)``, ``CLEAR``,
  ``Identity``, ``Count``): ids made contiguous per sequence, the
  similarity ``max(0, 1 - d / zero_distance)`` of TrackEval's own
  Euclidean datasets (``_calculate_euclidean_similarity``), and the
  positions as ``gt_dets`` / ``tracker_dets``. CLEAR and Identity count a
  match at similarity >= 0.5 (their default threshold), that is within
  ``zero_distance / 2``.

Both take what :func:`dod.tracker.metrics.run_tracker` collects: per scan,
the truth's ids and positions and the confirmed tracks' ids and positions
(``Tracker.confirmed_tracks()``), any units.

>>> import numpy as np
>>> from dod.tracker.metric_inputs import trackeval_data
>>> truth_ids, truth_pos = [np.array([7]), np.array([7])], [np.array([[0.0, 0.0]]), np.array([[1.0, 0.0]])]
>>> est_ids, est_pos = [np.array([3]), np.array([3])], [np.array([[0.5, 0.0]]), np.array([[1.0, 0.0]])]
>>> data = trackeval_data(truth_ids, truth_pos, est_ids, est_pos, zero_distance=2.0)
>>> data["similarity_scores"][0].tolist(), data["gt_ids"][1].tolist()
([[0.75]], [0])

py-motmetrics (``pip install motmetrics``) is needed by
:func:`motmetrics_accumulator` only, which raises ImportError naming it;
:func:`trackeval_data` needs nothing but numpy.
"""
import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays

__all__ = ["motmetrics_accumulator", "trackeval_data"]


def _frames(truth_ids, truth_pos, est_ids, est_pos):
    """The four sequences checked and read: per frame (gi, gp, ti, tp), ids int64, positions (k, dim)."""
    seqs = [list(s) for s in (truth_ids, truth_pos, est_ids, est_pos)]
    if len({len(s) for s in seqs}) != 1:
        raise ValueError(f"truth and estimates must have one entry per scan each, not "
                         f"{[len(s) for s in seqs]}")
    dim = None
    out = []
    for f, (gi, gp, ti, tp) in enumerate(zip(*seqs)):
        frame = []
        for who, ids, pos in (("truth", gi, gp), ("estimate", ti, tp)):
            i = input_array(ids, np.int64, f"{who} ids of scan {f}", 1, casting="unsafe")
            p = np.asarray(pos, dtype=np.float64)
            if p.size == 0:
                p = p.reshape(0, dim or 2)
            p = input_array(p, np.float64, f"{who} positions of scan {f}", 2)
            if p.shape[0] != i.size:
                raise ValueError(f"scan {f}: {i.size} {who} ids but {p.shape[0]} positions")
            if i.size and np.unique(i).size != i.size:
                raise ValueError(f"scan {f}: a {who} id repeats")
            if i.size and not np.isfinite(p).all():
                raise ValueError(f"scan {f}: {who} positions must be finite")
            if i.size:
                if dim is None:
                    dim = p.shape[1]
                elif p.shape[1] != dim:
                    raise ValueError(f"scan {f}: points of dimension {p.shape[1]}, earlier {dim}")
            frame += [i, p]
        out.append(frame)
    return out


def _distances(gp, tp):
    if not (len(gp) and len(tp)):
        return np.zeros((len(gp), len(tp)))
    diff = gp[:, None, :] - tp[None, :, :]
    return np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))


def motmetrics_accumulator(truth_ids, truth_pos, est_ids, est_pos, max_distance, accumulator=None, first_frame=0):
    """A py-motmetrics accumulator holding a sequence of scans.

    Parameters
    ----------
    truth_ids, est_ids : sequence of array_like
        Per scan, the ids (k,) of the truth and of the estimates (integers,
        none repeated within a scan).
    truth_pos, est_pos : sequence of array_like
        Per scan, their positions (k, dim), finite.
    max_distance : float
        A truth and an estimate farther apart than this cannot match (> 0,
        the positions' units).
    accumulator : motmetrics.MOTAccumulator, optional
        One to append to (made with ``auto_id=False``); default a new one.
    first_frame : int, default 0
        The frame id of the first scan (to append after frames already in
        `accumulator`).

    Returns
    -------
    motmetrics.MOTAccumulator
        Scan f's frame id is ``first_frame + f``;
        the distances are squared, as ``norm2squared_matrix`` gives them
        (MOTP then is a mean squared distance).

    Raises
    ------
    ImportError
        Without py-motmetrics.
    ValueError
        For sequences of different lengths, ids that repeat within a scan,
        positions that are not one finite row per id or of mixed dimension,
        or a max_distance that is not a positive finite number.
    TypeError
        For a first_frame that is not an integer.

    Notes
    -----
    Thread-safety: a pure function of its inputs (the accumulator given is
    changed: one thread at a time).
    """
    try:
        import motmetrics as mm
    except ImportError as e:
        raise ImportError(f"motmetrics_accumulator needs py-motmetrics: pip install motmetrics ({e})") from None
    if not (isinstance(max_distance, (int, float, np.integer, np.floating)) and np.isfinite(max_distance)
            and max_distance > 0) or isinstance(max_distance, bool):
        raise ValueError(f"max_distance must be a positive finite number, not {max_distance!r}")
    if isinstance(first_frame, bool) or not isinstance(first_frame, (int, np.integer)):
        raise TypeError(f"first_frame must be an integer, not {first_frame!r}")
    frames = _frames(truth_ids, truth_pos, est_ids, est_pos)
    acc = mm.MOTAccumulator(auto_id=False) if accumulator is None else accumulator
    first = int(first_frame)
    max_d2 = float(max_distance) ** 2
    for f, (gi, gp, ti, tp) in enumerate(frames):
        d = _distances(gp, tp)
        d2 = d * d
        d2[d2 > max_d2] = np.nan
        acc.update(gi, ti, d2, frameid=first + f)
    return acc


def trackeval_data(truth_ids, truth_pos, est_ids, est_pos, zero_distance):
    """One sequence in the form TrackEval's metrics read (``Metric.eval_sequence(data)``).

    Parameters
    ----------
    truth_ids, est_ids : sequence of array_like
        Per scan, the ids (k,) of the truth and of the estimates (integers,
        none repeated within a scan).
    truth_pos, est_pos : sequence of array_like
        Per scan, their positions (k, dim), finite.
    zero_distance : float
        The distance at which the similarity ``1 - d / zero_distance`` reaches
        0 (> 0): HOTA's ``max_distance`` in :func:`dod.tracker.metrics.hota`;
        CLEAR and Identity match within half of it.

    Returns
    -------
    dict
        ``gt_ids``, ``tracker_ids`` (per scan, int ids renumbered 0.. over
        the sequence in increasing order of the given ids),
        ``similarity_scores`` (per scan, (k_truth, k_est) float64),
        ``gt_dets``, ``tracker_dets`` (per scan, the positions),
        ``num_timesteps``, ``num_gt_ids``, ``num_tracker_ids``,
        ``num_gt_dets``, ``num_tracker_dets``, and ``seq``.

    Raises
    ------
    ValueError
        As :func:`motmetrics_accumulator`, for zero_distance.

    Notes
    -----
    Thread-safety: a pure function.
    """
    if not (isinstance(zero_distance, (int, float, np.integer, np.floating)) and np.isfinite(zero_distance)
            and zero_distance > 0) or isinstance(zero_distance, bool):
        raise ValueError(f"zero_distance must be a positive finite number, not {zero_distance!r}")
    frames = _frames(truth_ids, truth_pos, est_ids, est_pos)
    g_all = [f[0] for f in frames]
    t_all = [f[2] for f in frames]
    g_uni = np.unique(np.concatenate(g_all)) if g_all else np.zeros(0, np.int64)
    t_uni = np.unique(np.concatenate(t_all)) if t_all else np.zeros(0, np.int64)
    data = {"gt_ids": [], "tracker_ids": [], "similarity_scores": [], "gt_dets": [], "tracker_dets": [],
            "num_timesteps": len(frames), "num_gt_ids": int(g_uni.size), "num_tracker_ids": int(t_uni.size),
            "num_gt_dets": int(sum(g.size for g in g_all)), "num_tracker_dets": int(sum(t.size for t in t_all)),
            "seq": "dod"}
    for gi, gp, ti, tp in frames:
        data["gt_ids"].append(np.searchsorted(g_uni, gi).astype(int))
        data["tracker_ids"].append(np.searchsorted(t_uni, ti).astype(int))
        data["similarity_scores"].append(np.maximum(0.0, 1.0 - _distances(gp, tp) / zero_distance))
        data["gt_dets"].append(gp)
        data["tracker_dets"].append(tp)
    return data
