"""Real data: dod's tracker on MOTChallenge sequences, scored with MOTA, IDF1, HOTA and GOSPA.

MOTChallenge files are CSV rows ``frame,id,x,y,w,h,conf,...`` (pixels, box
top-left corner and size, frames from 1). Two ways to get detections:

* from ground truth (the default): each box becomes a point (its centre, or
  its foot point, the middle of its bottom edge), kept with probability
  ``pd``, moved by Gaussian noise of ``noise`` pixels per axis, plus Poisson
  clutter (``clutter`` false points per frame on average, uniform over the
  image); seeded, so a seed names a detection set. This isolates the tracker
  from the detector: what the scores measure is association and track
  management on real pedestrian motion.
* from a detector's output (``--det det.txt``, MOTChallenge format): its
  boxes with ``conf >= --min-conf``, as points.

The tracker is dod's constant-velocity tracker, in pixels: ``dt`` is the
frame interval (``1 / fps``; ``fps`` from ``seqinfo.ini`` beside the file or
above its folder, else ``--fps``, default 25), the measurement noise ``r``,
process noise ``q`` and newborn velocity spread ``v0`` come from
:class:`~dod.tracker.TrackerConfig` in pixel units (defaults below: people
walking in 640x480 video at 25 fps).

Scores: MOTA, IDF1, MOTP (mean distance, px), switches, mostly tracked
(:func:`dod.tracker.metrics.clear_mot`, py-motmetrics' values) matching
confirmed tracks to ground-truth points within ``--match`` pixels, HOTA (with DetA, AssA,
LocA; :func:`dod.tracker.metrics.hota`, similarity ``1 - d / match``), and
the mean GOSPA per frame (cut-off ``--gospa-c`` pixels). Points, not boxes:
the tracker estimates positions, so IoU matching does not apply.
``--confirmation score`` and ``--initiation two_point`` select the clutter
options of :class:`~dod.tracker.TrackerConfig`.

Bundled data: the motmetrics wheel ships MOT15 ground truth for TUD-Campus
(71 frames, 8 people) and TUD-Stadtmitte (179 frames, 10 people), 640x480 at
25 fps; :func:`builtin_sequences` finds them. From a shell:

.. not run: shell commands; tests/test_mot.py runs main() on the bundled sequences and on files

::

    python -m dod.tracker.mot                         # both bundled sequences
    python -m dod.tracker.mot path/to/gt.txt --fps 30 --noise 3 --seed 1
    python -m dod.tracker.mot gt.txt --det det.txt --min-conf 0.5
"""
import argparse
import configparser
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from dod._ndarray import input_array      # the one input gate for caller arrays
from dod.tracker import Tracker, TrackerConfig
from dod.tracker.metrics import clear_mot, gospa, hota
from dod.tracker.scenario import _number, _per_scan

#: Pixel-unit defaults for pedestrians in 640x480 video at 25 fps: q (px^2/s^3)
#: lets the velocity wander ~45 px/s per second, v0 (px/s) covers walking
#: speeds, a confirmed track coasts 4 frames (0.16 s) before deletion. One
#: setting for both bundled sequences (a small sweep over max_misses, q, r and
#: v0 on them moved MOTA by < 0.05 around it; not tuned per sequence). The
#: score settings (used with confirmation="score") were picked by a sweep on
#: these same two sequences (score_drop 9 or 11, false_track_probability 1e-3
#: or 1e-2, new_target_density 1e-6 or 1e-5): score_drop 9 is ~4 misses, as
#: max_misses; v_max 200 px/s for two-point pairs.
PIXEL_DEFAULTS = dict(confirmation="m_of_n", initiation="single",   # measured better on these sequences
                      q=2000.0, v0=60.0, gate_probability=0.999, confirm_m=3, confirm_n=5,
                      max_misses=4, v_max=200.0, score_drop=9.0, new_target_density=1e-5,
                      false_track_probability=1e-2)
#: Box jitter of the hand annotations (px): the measurement noise r of the
#: tracker is hypot(detection noise, this) unless given.
ANNOTATION_JITTER = 3.5

# MOT15 ground truth in the motmetrics wheel has no seqinfo.ini: the values of
# the MOTChallenge site for these two sequences.
_BUILTIN_INFO = {"TUD-Campus": (25.0, 640, 480), "TUD-Stadtmitte": (25.0, 640, 480)}


@dataclass
class MotSequence:
    """A MOTChallenge file read into per-frame arrays (frames first..last, gaps empty).

    Parameters
    ----------
    name : str
        The sequence's name.
    fps, width, height : float
        Frame rate and image size in pixels: finite numbers > 0.
    first_frame : int, default 1
        The number of the first frame (>= 0).
    ids, boxes, conf : list
        One entry per frame (those given non-empty have the same length), each
        read through dod's input gate: ids int64 (k,), boxes float64 (k, 4) as
        x, y, w, h in pixels, conf float64 (k,). The lists hold converted
        copies; the caller's are left as they were.

    Raises
    ------
    TypeError
        For a name that is not a str, or entries that are not real arrays.
    ValueError
        For a non-finite or non-positive number, entries of the wrong shape, or
        per-frame lists of different lengths.

    Notes
    -----
    Thread-safety: a plain dataclass; share it read-only.
    """

    name: str
    fps: float
    width: float
    height: float
    first_frame: int = 1
    ids: list = field(default_factory=list)       # per frame: int64 (k,)
    boxes: list = field(default_factory=list)     # per frame: float64 (k, 4) x, y, w, h
    conf: list = field(default_factory=list)      # per frame: float64 (k,)

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a str, not {type(self.name).__name__}")
        for name in ("fps", "width", "height"):
            setattr(self, name, _number(name, getattr(self, name)))
        self.first_frame = _number("first_frame", self.first_frame, strict=False, integer=True)
        sizes, converted = {}, {}
        for name, ndim, trailing, dtype in (("ids", 1, None, np.int64), ("boxes", 2, 4, np.float64),
                                            ("conf", 1, None, np.float64)):
            v = _per_scan(name, getattr(self, name))
            converted[name] = [input_array(a, dtype, f"{name}[{i}]", ndim, trailing) for i, a in enumerate(v)]
            if v:
                sizes[name] = len(v)
        if len(set(sizes.values())) > 1:
            raise ValueError(f"the per-frame lists differ in length: {sizes}")
        for name, v in converted.items():
            setattr(self, name, v)               # new lists: the caller's are left as they were

    @property
    def frames(self):
        """Number of frames (first..last, gaps included)."""
        return len(self.ids)

    @property
    def n_ids(self):
        """Number of distinct ids over all frames."""
        return len(set(np.concatenate(self.ids).tolist())) if self.ids else 0

    def points(self, anchor="centre"):
        """Per frame, the (k, 2) points of the boxes.

        Parameters
        ----------
        anchor : str, default "centre"
            ``"centre"`` (box centre) or ``"foot"`` (bottom centre): :func:`anchor_points`.

        Returns
        -------
        list of numpy.ndarray
            float64 (k, 2) per frame (new arrays).

        Raises
        ------
        ValueError
            For another anchor.

        Notes
        -----
        Thread-safety: a reader (any thread).
        """
        return [anchor_points(b, anchor) for b in self.boxes]


def anchor_points(boxes, anchor="centre"):
    """Boxes to points: the box centre or the foot point.

    Parameters
    ----------
    boxes : array_like
        (k, 4) boxes ``x, y, w, h`` (top-left corner, width, height).
    anchor : str, default "centre"
        ``"centre"`` (or ``"center"``): ``(x + w/2, y + h/2)``; ``"foot"``:
        ``(x + w/2, y + h)``, where a pedestrian stands on the ground.

    Returns
    -------
    numpy.ndarray
        float64 (k, 2), C-contiguous (a tracker's tick reads it in place).

    Raises
    ------
    ValueError
        For another anchor, or boxes that do not reshape to (k, 4).

    Notes
    -----
    Thread-safety: a pure function (any thread).

    Examples
    --------
    >>> from dod.tracker.mot import anchor_points
    >>> anchor_points([[10.0, 20.0, 4.0, 8.0]], "foot")
    array([[12., 28.]])
    """
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    if anchor in ("centre", "center"):
        y = boxes[:, 1] + boxes[:, 3] / 2.0
    elif anchor == "foot":
        y = boxes[:, 1] + boxes[:, 3]
    else:
        raise ValueError(f"anchor must be 'centre' or 'foot', not {anchor!r}")
    return np.ascontiguousarray(np.stack([boxes[:, 0] + boxes[:, 2] / 2.0, y], axis=1))


def builtin_sequences():
    """The MOT15 ground truth shipped in the motmetrics wheel.

    Returns
    -------
    dict
        ``{name: path}`` of each bundled ``gt.txt`` (TUD-Campus, TUD-Stadtmitte).

    Raises
    ------
    ImportError
        Without motmetrics (``pip install 'dod[demo]'``).

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    import motmetrics

    base = os.path.join(os.path.dirname(os.path.abspath(motmetrics.__file__)), "data")
    out = {}
    for name in _BUILTIN_INFO:
        p = os.path.join(base, name, "gt.txt")
        if os.path.isfile(p):
            out[name] = p
    return out


def _seqinfo(path):
    """(fps, width, height) from seqinfo.ini beside the file or one folder up, else None."""
    d = os.path.dirname(os.path.abspath(path))
    for folder in (d, os.path.dirname(d)):
        ini = os.path.join(folder, "seqinfo.ini")
        if os.path.isfile(ini):
            cp = configparser.ConfigParser()
            cp.read(ini)
            if cp.has_section("Sequence"):
                s = cp["Sequence"]
                try:
                    return (float(s.get("frameRate")), float(s.get("imWidth", "nan")),
                            float(s.get("imHeight", "nan")))
                except (TypeError, ValueError):
                    return None
    return None


def read_mot(path, *, fps=None, size=None, min_conf=None, ground_truth=True, name=None):
    """Read a MOTChallenge CSV file (``frame,id,x,y,w,h[,conf,class,visibility]``).

    Parameters
    ----------
    path : str or path-like
        The file (``gt.txt`` or a detector's output).
    fps : float, optional
        Frame rate; default from the sequence's ``seqinfo.ini``, the bundled
        sequences' known values, else 25.
    size : tuple of float, optional
        ``(width, height)`` of the image; default from ``seqinfo.ini``, the
        bundled sequences' values, else the extent of the boxes.
    min_conf : float, optional
        With ``ground_truth=False``: keep the rows whose confidence is at least this.
    ground_truth : bool, default True
        Drop rows whose 7th column is 0 (the MOT16+ "ignore" flag) and, in
        9-column MOT16/17 ground truth, rows whose class is not 1 (pedestrian).
        For a detector's output pass False and use `min_conf`.
    name : str, optional
        The sequence's name; default the folder's name.

    Returns
    -------
    MotSequence

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a malformed file (the message names its line).

    Notes
    -----
    Thread-safety: any thread (reads the file, shares nothing).
    """
    rows = []
    ncols = None
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.replace(" ", "").split(",")
            if len(parts) < 6:
                raise ValueError(f"{path}:{lineno}: need at least frame,id,x,y,w,h; got {line!r}")
            try:
                vals = [float(v) for v in parts[:9]]
            except ValueError:
                raise ValueError(f"{path}:{lineno}: not numbers: {line!r}") from None
            if not all(math.isfinite(v) for v in vals[:6]):
                raise ValueError(f"{path}:{lineno}: non-finite value: {line!r}")
            ncols = len(parts) if ncols is None else ncols
            conf = vals[6] if len(vals) > 6 else 1.0
            if ground_truth:
                if len(vals) > 6 and conf == 0:
                    continue
                if len(parts) == 9 and int(vals[7]) != 1:
                    continue
            elif min_conf is not None and conf < min_conf:
                continue
            if vals[0] < 1 or vals[0] != int(vals[0]):
                raise ValueError(f"{path}:{lineno}: frame must be an integer >= 1: {line!r}")
            rows.append((int(vals[0]), int(vals[1]), vals[2], vals[3], vals[4], vals[5], conf))
    name = name or os.path.basename(os.path.dirname(os.path.abspath(path))) or path
    if name == "gt":       # MOTChallenge layout: SEQ/gt/gt.txt
        name = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    info = _seqinfo(path) or _BUILTIN_INFO.get(name)
    arr = np.array(rows, dtype=np.float64).reshape(-1, 7)
    if fps is None:
        fps = info[0] if info else 25.0
    if not (fps > 0 and math.isfinite(fps)):
        raise ValueError(f"fps must be positive, not {fps!r}")
    if size is None:
        if info and math.isfinite(info[1]) and math.isfinite(info[2]):
            size = (info[1], info[2])
        elif len(arr):
            size = (float((arr[:, 2] + arr[:, 4]).max()), float((arr[:, 3] + arr[:, 5]).max()))
        else:
            size = (1.0, 1.0)
    seq = MotSequence(name=name, fps=float(fps), width=float(size[0]), height=float(size[1]))
    if not len(arr):
        return seq
    frames = arr[:, 0].astype(np.int64)
    first, last = int(frames.min()), int(frames.max())
    seq.first_frame = first
    order = np.argsort(frames, kind="stable")
    arr, frames = arr[order], frames[order]
    bounds = np.searchsorted(frames, np.arange(first, last + 2))
    for k in range(last - first + 1):
        a = arr[bounds[k]:bounds[k + 1]]
        seq.ids.append(a[:, 1].astype(np.int64))
        seq.boxes.append(np.ascontiguousarray(a[:, 2:6]))
        seq.conf.append(a[:, 6].copy())
    return seq


def detections_from_truth(seq, *, pd=0.9, noise=2.0, clutter=1.0, anchor="centre", seed=0):
    """Per frame, detections made from ground truth (seeded).

    Each truth point is kept with probability `pd` and moved by Gaussian
    noise; Poisson clutter is added uniformly over the image; the rows of a
    frame are shuffled.

    Parameters
    ----------
    seq : MotSequence
        The ground truth.
    pd : float, default 0.9
        Detection probability, in [0, 1].
    noise : float, default 2.0
        Standard deviation of the noise, pixels per axis (>= 0).
    clutter : float, default 1.0
        Mean false detections per frame (>= 0).
    anchor : str, default "centre"
        Which point of a box is detected (:func:`anchor_points`).
    seed : int, default 0
        The random generator's seed: the same seed gives the same detections.

    Returns
    -------
    list of numpy.ndarray
        float64 (k, 2) per frame.

    Raises
    ------
    ValueError
        For pd outside [0, 1], negative noise or clutter, or another anchor.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    if not 0.0 <= pd <= 1.0:
        raise ValueError("pd must be in [0, 1]")
    if not (noise >= 0 and clutter >= 0):
        raise ValueError("noise and clutter must be >= 0")
    rng = np.random.default_rng(seed)
    out = []
    for pts in seq.points(anchor):
        keep = rng.random(len(pts)) < pd
        z = pts[keep] + rng.normal(scale=noise, size=(int(keep.sum()), 2)) if noise > 0 else pts[keep]
        nc = rng.poisson(clutter) if clutter > 0 else 0
        zc = rng.uniform((0.0, 0.0), (seq.width, seq.height), size=(nc, 2))
        allz = np.concatenate([z, zc])
        out.append(np.ascontiguousarray(allz[rng.permutation(len(allz))]))
    return out


def make_config(noise=2.0, max_objects=1000, **overrides):
    """A pixel-unit TrackerConfig for MOTChallenge sequences.

    :data:`PIXEL_DEFAULTS`, then ``r = hypot(noise, ANNOTATION_JITTER)``,
    capacity and max_detections from `max_objects` (``overflow="drop"``), then
    `overrides`. The command line and :func:`evaluate` pass the image area as
    ``surveillance_volume`` (the clutter estimator's region).

    Parameters
    ----------
    noise : float, default 2.0
        The detections' noise, pixels per axis.
    max_objects : int, default 1000
        The most objects (detections) of a frame: capacity and max_detections
        are four times it (at least 64 and 256).
    **overrides
        Any :class:`~dod.tracker.TrackerConfig` field; None is ignored.

    Returns
    -------
    TrackerConfig

    Raises
    ------
    TypeError, ValueError
        As :class:`~dod.tracker.TrackerConfig` for a bad field.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    kw = dict(PIXEL_DEFAULTS)
    kw["r"] = math.hypot(float(noise), ANNOTATION_JITTER)
    kw.update(capacity=max(64, 4 * max_objects), max_detections=max(256, 4 * max_objects),
              overflow="drop")
    kw.update({k: v for k, v in overrides.items() if v is not None})
    return TrackerConfig(dim=2, **kw)


def track(seq, detections, config):
    """Run dod's tracker over a sequence's frames.

    Parameters
    ----------
    seq : MotSequence
        Gives dt (``1 / seq.fps``).
    detections : sequence of array_like
        Per frame, (k, 2) points.
    config : TrackerConfig
        The tracker's configuration (:func:`make_config`).

    Returns
    -------
    list of tuple
        Per frame, ``(ids, points)`` of the confirmed tracks (copies).

    Raises
    ------
    ValueError, TypeError
        As :meth:`Tracker.tick <dod.tracker.Tracker.tick>`.

    Notes
    -----
    Thread-safety: any thread (a tracker of its own).
    """
    tracker = Tracker(config)
    dt = 1.0 / seq.fps
    out = []
    for z in detections:
        tracker.tick(np.ascontiguousarray(z, dtype=np.float64).reshape(-1, 2), dt)
        out.append(tracker.confirmed_tracks())
    return out


def score(seq, estimates, *, anchor="centre", match=50.0, gospa_c=50.0):
    """Score per-frame estimates against a sequence's ground truth.

    Parameters
    ----------
    seq : MotSequence
        The ground truth.
    estimates : sequence of tuple
        Per frame, ``(ids, points)`` (what :func:`track` returns).
    anchor : str, default "centre"
        The truth's point of each box (:func:`anchor_points`).
    match : float, default 50.0
        Match distance for MOTA/IDF1 (:func:`~dod.tracker.metrics.clear_mot`),
        and HOTA's similarity scale (``1 - d / match``), pixels.
    gospa_c : float, default 50.0
        GOSPA's cut-off, pixels.

    Returns
    -------
    dict
        :func:`~dod.tracker.metrics.clear_mot`'s keys (MOTA, IDF1, MOTP in
        pixels, switches, false positives, misses, mostly tracked ...), plus
        ``hota``, ``deta``, ``assa``, ``loca`` and ``gospa`` (the mean over the
        frames, pixels).

    Raises
    ------
    ValueError
        As :func:`~dod.tracker.metrics.clear_mot`.

    Notes
    -----
    Thread-safety: a pure function (any thread).
    """
    points = seq.points(anchor)
    frames = (seq.ids, points, [e[0] for e in estimates], [e[1] for e in estimates])
    out = clear_mot(*frames, max_distance=match)
    g = [gospa(tpos, epos, c=gospa_c) for tpos, (_, epos) in zip(points, estimates)]
    out["gospa"] = float(np.mean(g)) if g else 0.0
    h = hota(*frames, max_distance=match)
    out.update(hota=h["hota"], deta=h["deta"], assa=h["assa"], loca=h["loca"])
    return out


def evaluate(path, *, det=None, min_conf=None, fps=None, pd=0.9, noise=2.0, clutter=1.0,
             anchor="centre", seed=0, match=50.0, gospa_c=50.0, config=None, name=None):
    """Read a sequence, make (or read) detections, track them and score the result.

    Parameters
    ----------
    path : str or path-like
        The ground truth (MOTChallenge ``gt.txt``).
    det : str or path-like, optional
        A detector's MOTChallenge output to track instead of noisy truth.
    min_conf : float, optional
        With `det`: keep detections whose confidence is at least this.
    fps : float, optional
        Frame rate (default: :func:`read_mot`'s).
    pd, noise, clutter, seed
        Without `det`: :func:`detections_from_truth`'s.
    anchor : str, default "centre"
        The point of each box (:func:`anchor_points`).
    match, gospa_c : float, default 50.0
        :func:`score`'s.
    config : TrackerConfig, optional
        Default: :func:`make_config` for the noise, the busiest frame and the
        image area.
    name : str, optional
        The sequence's name.

    Returns
    -------
    tuple
        ``(seq, scores)``: the :class:`MotSequence` and :func:`score`'s dict.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`read_mot`, :func:`detections_from_truth` and the tracker.

    Notes
    -----
    Thread-safety: any thread (a tracker of its own).
    """
    seq = read_mot(path, fps=fps, name=name)
    if det is not None:
        dseq = read_mot(det, fps=seq.fps, size=(seq.width, seq.height), min_conf=min_conf,
                        ground_truth=False)
        pts = dseq.points(anchor)
        # align the detector's frames with the ground truth's
        detections = []
        for k in range(seq.frames):
            j = seq.first_frame + k - dseq.first_frame
            detections.append(pts[j] if 0 <= j < dseq.frames else np.zeros((0, 2)))
    else:
        detections = detections_from_truth(seq, pd=pd, noise=noise, clutter=clutter, anchor=anchor,
                                           seed=seed)
    most = max((len(z) for z in detections), default=1)
    config = config or make_config(noise=noise, max_objects=max(most, 1),
                                   surveillance_volume=seq.width * seq.height)
    est = track(seq, detections, config)
    return seq, score(seq, est, anchor=anchor, match=match, gospa_c=gospa_c)


def _format(seq, s):
    return (f"{seq.name:<16} {seq.frames:>6} {seq.n_ids:>4} | MOTA {s['mota']:6.3f}  IDF1 {s['idf1']:6.3f}  "
            f"HOTA {s['hota']:6.3f} (DetA {s['deta']:5.3f} AssA {s['assa']:5.3f} LocA {s['loca']:5.3f})  "
            f"MOTP {s['motp']:5.2f} px  switches {int(s['num_switches']):>3}  FP {int(s['num_false_positives']):>4}  "
            f"FN {int(s['num_misses']):>4}  GOSPA {s['gospa']:6.2f} px")


def main(argv=None):
    """The command line ``python -m dod.tracker.mot``.

    Tracks MOTChallenge ground truth (or a detector's output, ``--det``) and
    prints MOTA, IDF1 and GOSPA per sequence; without FILE, the MOT15
    sequences bundled with motmetrics. ``--help`` lists the options.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status: 0 done, 1 a file could not be read or tracked (the
        error printed), 2 no FILE and no motmetrics, or ``--det`` with more
        than one FILE.

    Raises
    ------
    SystemExit
        For bad arguments (argparse's).

    Notes
    -----
    Thread-safety: the main thread (it prints).
    """
    p = argparse.ArgumentParser(
        prog="python -m dod.tracker.mot",
        description="Track MOTChallenge ground truth (or detections) with dod; print MOTA, IDF1, GOSPA. "
                    "Without FILE: the MOT15 sequences bundled with motmetrics.")
    p.add_argument("files", nargs="*", metavar="FILE", help="MOTChallenge gt.txt file(s)")
    p.add_argument("--det", help="a detector's MOTChallenge output to track instead of noisy truth "
                                 "(one FILE only)")
    p.add_argument("--min-conf", type=float, default=None, help="with --det: keep conf >= this")
    p.add_argument("--fps", type=float, default=None, help="frame rate (default: seqinfo.ini, else 25)")
    p.add_argument("--pd", type=float, default=0.9, help="detection probability (0.9)")
    p.add_argument("--noise", type=float, default=2.0, help="detection noise, px per axis (2)")
    p.add_argument("--clutter", type=float, default=1.0, help="false detections per frame (1)")
    p.add_argument("--anchor", choices=("centre", "foot"), default="centre")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--match", type=float, default=50.0, help="match distance for MOTA/IDF1, px (50)")
    p.add_argument("--gospa-c", type=float, default=50.0, help="GOSPA cut-off, px (50)")
    p.add_argument("--r", type=float, default=None,
                   help=f"tracker measurement noise, px (default hypot(noise, {ANNOTATION_JITTER:g}))")
    p.add_argument("--q", type=float, default=None,
                   help=f"tracker process noise, px^2/s^3 (default {PIXEL_DEFAULTS['q']:g})")
    p.add_argument("--v0", type=float, default=None,
                   help=f"tracker newborn velocity spread, px/s (default {PIXEL_DEFAULTS['v0']:g})")
    p.add_argument("--max-misses", type=int, default=None,
                   help=f"frames a confirmed track coasts before deletion "
                        f"(default {PIXEL_DEFAULTS['max_misses']})")
    p.add_argument("--confirmation", choices=("m_of_n", "score"), default=None,
                   help="track confirmation (default m_of_n)")
    p.add_argument("--initiation", choices=("single", "two_point"), default=None,
                   help="track initiation (default single)")
    a = p.parse_args(argv)
    try:
        files = [(f, None) for f in a.files] or [(v, k) for k, v in builtin_sequences().items()]
    except ImportError:
        print("error: no FILE given and motmetrics is not installed: pip install 'dod[demo]'",
              file=sys.stderr)
        return 2
    if a.det and len(files) != 1:
        print("error: --det needs exactly one ground-truth FILE", file=sys.stderr)
        return 2
    print(f"dod.tracker ({a.confirmation or 'm_of_n'}, {a.initiation or 'single'}) on MOTChallenge data: detections {'from ' + a.det if a.det else 'from ground truth'}"
          + ("" if a.det else f" (Pd {a.pd:g}, noise {a.noise:g} px, clutter {a.clutter:g}/frame, "
                              f"{a.anchor} point, seed {a.seed})")
          + f"; match {a.match:g} px")
    print(f"{'sequence':<16} {'frames':>6} {'ids':>4} |")
    for path, name in files:
        try:
            seq = read_mot(path, fps=a.fps, name=name)
            cfg = make_config(noise=a.noise, max_objects=max(1, max((len(i) for i in seq.ids), default=1)),
                              r=a.r, q=a.q, v0=a.v0, max_misses=a.max_misses,
                              confirmation=a.confirmation, initiation=a.initiation,
                              surveillance_volume=seq.width * seq.height)
            seq, s = evaluate(path, det=a.det, min_conf=a.min_conf, fps=a.fps, pd=a.pd,
                              noise=a.noise, clutter=a.clutter, anchor=a.anchor, seed=a.seed,
                              match=a.match, gospa_c=a.gospa_c, config=cfg, name=name)
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(_format(seq, s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
