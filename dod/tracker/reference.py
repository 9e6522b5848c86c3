"""The reference tracker: the same tracker as dod.tracker.Tracker, in numpy.

It states the rules of the fast tracker in vectorised numpy (no scipy), so it
is the oracle of the tests and the baseline of the benchmarks:

* predict: constant velocity, white-acceleration process noise q;
* gate: squared Mahalanobis distance <= chi-square quantile(gate_probability,
  dim), candidates found through a uniform grid (no all-pairs scan);
* associate: confirmed tracks first, then tentative tracks with the
  detections left; the gated pairs split into connected clusters; each
  cluster minimises ``sum(d2 - gate)`` over its assigned pairs, exactly
  (shortest augmenting paths, :func:`lsa`);
* update: Kalman, Joseph form, symmetrised;
* manage: M-of-N confirmation (tentative tracks deleted after N scans without
  it), deletion of confirmed tracks after max_misses consecutive misses;
  births from unassigned detections, in scan order, ids from 1;
* or, with confirmation="score": the track score (log-likelihood ratio),
  Wald's thresholds for tentative tracks, deletion of confirmed ones when
  the score falls score_drop below its maximum; with initiation="two_point":
  births from pairs of a waiting detection and a free detection of the next
  scan within the velocity gate, cheapest pair first (TrackerConfig states
  the rules); the clutter density given or estimated after the confirmed
  stage;
* with motion="imm": the IMM of :mod:`dod.tracker.reference_imm` (mix,
  predict per model, gate on the combination, update per model).

Range-bearing scans (``tick(z, dt, sensor=Sensor(...))``): extended Kalman
update with H = [J 0] at the predicted position, gate in measurement space
(bearing innovation wrapped), the grid searched within a Cartesian ball that
holds the gate (:func:`dod.tracker.sensor.gate_box`), births at the
converted positions with the converted covariance, the score's density
taken per unit area/volume (minus ``ln |det dp/dz|``); tracks in the sensor's
singular zone are not gated (dod/tracker/measurement.pxd states the model).
A sensor's own ``pd`` and ``clutter_density`` (per measurement volume) take
the configuration's place in its scans' scores: the likelihood then stays in
measurement space, births add ``ln |det dp/dz|`` (the birth density per
measurement volume), and the clutter estimate skips the scan.
A sensor with ``range_rate_sigma`` adds the range rate (last column): H is
the whole Jacobian over [p, v] (:func:`dod.tracker.sensor.predict_rate`),
the gate box is the position block's, births take the radial velocity
(:func:`dod.tracker.sensor.rate_birth`), and the score's density is also
per the sensor's ``range_rate_span``; with the IMM every model updates
through :func:`dod.tracker.reference_imm.ekf_update`'s range-rate case.

Detections with NaN/inf are dropped. Rows are kept in birth order (deletion
compacts); compare with the fast tracker by id.
"""
import numpy as np

from dod.tracker.config import TrackerConfig
from dod.tracker._engine import COUNT_NAMES
from dod.tracker import reference_imm
from dod.tracker import sensor as _meas

NONE, TENTATIVE, CONFIRMED = 0, 1, 2
_CLAMP = 1 << 20


def lsa(cost):
    """Exact minimum-cost assignment of a dense finite matrix (rows <= cols or
    not): shortest augmenting paths, numpy inner loop. Returns (rows, cols)
    as scipy.optimize.linear_sum_assignment does."""
    cost = np.asarray(cost, dtype=np.float64)
    transposed = cost.shape[0] > cost.shape[1]
    c = cost.T if transposed else cost
    nr, nc = c.shape
    u = np.zeros(nr)
    v = np.zeros(nc)
    col4row = np.full(nr, -1, dtype=np.intp)
    row4col = np.full(nc, -1, dtype=np.intp)
    for cur in range(nr):
        shortest = np.full(nc, np.inf)
        path = np.full(nc, -1, dtype=np.intp)
        SR = np.zeros(nr, dtype=bool)
        SC = np.zeros(nc, dtype=bool)
        minval = 0.0
        i = cur
        sink = -1
        while sink == -1:
            SR[i] = True
            rem = ~SC
            red = minval + c[i] - u[i] - v
            upd = rem & (red < shortest)
            path[upd] = i
            shortest[upd] = red[upd]
            cand = np.flatnonzero(rem)
            sh = shortest[cand]
            lowest = sh.min()
            if not np.isfinite(lowest):
                raise ValueError("no complete assignment of finite cost")
            ties = cand[sh == lowest]
            free = ties[row4col[ties] == -1]
            j = int(free[0] if free.size else ties[0])
            minval = lowest
            SC[j] = True
            if row4col[j] == -1:
                sink = j
            else:
                i = int(row4col[j])
        u[cur] += minval
        others = SR.copy()
        others[cur] = False
        u[others] += minval - shortest[col4row[others]]
        v[SC] -= minval - shortest[SC]
        j = sink
        while True:
            i = int(path[j])
            row4col[j] = i
            col4row[i], j = j, int(col4row[i])
            if i == cur:
                break
    rows = np.arange(nr)
    if transposed:
        order = np.argsort(col4row)
        return col4row[order], rows[order]
    return rows, col4row


def cv_model(d, dt, q):
    """(F, Q) of the constant-velocity model in d dimensions: the transition
    and the process noise of white acceleration with spectral density q."""
    n = 2 * d
    F = np.eye(n)
    F[:d, d:] = dt * np.eye(d)
    Q = np.zeros((n, n))
    Q[:d, :d] = q * dt**3 / 3 * np.eye(d)
    Q[:d, d:] = Q[d:, :d] = q * dt**2 / 2 * np.eye(d)
    Q[d:, d:] = q * dt * np.eye(d)
    return F, Q


def _popcount32(v):
    """Bits set in each uint32 (vectorised SWAR)."""
    v = v.astype(np.uint32)
    v = v - ((v >> 1) & 0x55555555)
    v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
    v = (v + (v >> 4)) & 0x0F0F0F0F
    return ((v * np.uint32(0x01010101)) >> 24).astype(np.int64)


def _inv_spd(S):
    """Batched inverse of symmetric 2x2 matrices written out (np.linalg.inv
    is ~10x slower on tiny matrices); 3x3 goes through np.linalg.inv."""
    if S.shape[1] != 2:
        return np.linalg.inv(S)
    a, b, c = S[:, 0, 0], 0.5 * (S[:, 0, 1] + S[:, 1, 0]), S[:, 1, 1]
    det = a * c - b * b
    out = np.empty_like(S)
    out[:, 0, 0] = c / det
    out[:, 0, 1] = out[:, 1, 0] = -b / det
    out[:, 1, 1] = a / det
    return out


def _own_S(Pp, R, J):
    """J P J' + R per row (a sensor's measurement with its own noise),
    exactly symmetric."""
    S = J @ Pp @ np.swapaxes(J, 1, 2)
    S = 0.5 * (S + np.swapaxes(S, 1, 2))
    return S + R


def _components(pt, pd, n_tracks):
    """Connected-component label (smallest track index) of each gated pair."""
    lab_t = np.arange(n_tracks)
    lab_d = {}
    # Min-label propagation over the bipartite pair graph (vectorised).
    det_ids, pd_local = np.unique(pd, return_inverse=True)
    lab_d = np.full(det_ids.size, np.iinfo(np.int64).max)
    while True:
        m = np.minimum(lab_t[pt], lab_d[pd_local])
        new_d = lab_d.copy()
        np.minimum.at(new_d, pd_local, m)
        new_t = lab_t.copy()
        np.minimum.at(new_t, pt, new_d[pd_local])
        if np.array_equal(new_t, lab_t) and np.array_equal(new_d, lab_d):
            return lab_t[pt]
        lab_t, lab_d = new_t, new_d


class ReferenceTracker:
    """ReferenceTracker(config=None, **overrides)

    The numpy tracker.

    Same interface as the fast tracker's reading side: tick(detections, dt),
    ids, positions, velocities, covariances, status, counts().

    Parameters
    ----------
    config : TrackerConfig, optional
        Defaults if None.
    **overrides
        Fields of :class:`~dod.tracker.TrackerConfig` that replace those of
        `config`.

    Raises
    ------
    TypeError, ValueError
        For a bad config or override.

    Notes
    -----
    It computes in float64 whatever the configuration's ``dtype`` says
    (``dtype="float32"`` is taken and ignored: it compares a float32 dod
    tracker against double precision). Thread-safety: one thread at a time
    (plain numpy state).
    """

    def __init__(self, config=None, **overrides):
        if config is None:
            config = TrackerConfig(**overrides)
        elif overrides:
            import dataclasses

            config = dataclasses.replace(config, **overrides)
        self.config = c = config
        self.dim = d = c.dim
        self.n = n = 2 * d
        self.gate = c.gate
        self.r2 = c.r * c.r
        self.id = np.zeros(0, np.uint64)
        self.x = np.zeros((0, n))
        self.P = np.zeros((0, n, n))
        self.hits = np.zeros(0, np.uint32)
        self.misses = np.zeros(0, np.uint32)
        self.age = np.zeros(0, np.uint32)
        self.history = np.zeros(0, np.uint32)
        self.state = np.zeros(0, np.uint8)
        self.score = np.zeros(0)
        self.score_max = np.zeros(0)
        self.imm = c.motion == "imm"
        if self.imm:                    # per-model columns, as the engine's track table
            self.mu = np.zeros((0, reference_imm.MODELS))
            self.xm = np.zeros((0, reference_imm.MODELS, n + 1))
            self.Pm = np.zeros((0, reference_imm.MODELS, n + 1, n + 1))
        self.singles = np.zeros((0, d))          # waiting detections: positions,
        self.single_C = np.zeros((0, d, d))      # their covariances
        self.single_allowance = np.zeros(0)      # and their pair gates' noise terms
        self.clutter = c.clutter_density if c.clutter_density is not None else 0.0
        self.next_id = 1
        self.scans = 0
        self.last = {}
        self.time = 0.0                 # the scan clock, as Tracker.time
        self._started = False
        self.late_scans = 0

    # ------------------------------------------------------------ pieces

    def _model(self, dt):
        return cv_model(self.dim, dt, self.config.q)

    def _gate(self, rows, z, free, xp, Si, hw, meas=None, own=None):
        """Gated pairs (track row, detection, d2) of `rows` against the free
        detections; own: (P's position blocks, the detections' R, the
        Jacobians or None) when each pair takes its own S = J P J' + R_j."""
        d = self.dim
        dets = np.flatnonzero(free)
        if rows.size == 0 or dets.size == 0:
            return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)
        h = float(hw[rows].max())
        if not (h > 0 and np.isfinite(h)):
            h = 1.0
        cz = np.clip(np.floor(z[dets] / h), -_CLAMP, _CLAMP - 1).astype(np.int64) + _CLAMP
        keys = np.zeros(dets.size, np.int64)
        for a in range(d):
            keys = (keys << 21) | cz[:, a]
        order = np.argsort(keys, kind="stable")
        skeys = keys[order]
        ct = np.clip(np.floor(xp[rows, :d] / h), -_CLAMP, _CLAMP - 1).astype(np.int64) + _CLAMP
        offsets = np.array(np.meshgrid(*[[-1, 0, 1]] * d, indexing="ij")).reshape(d, -1).T
        pt_parts, pd_parts = [], []
        for off in offsets:
            cc = np.clip(ct + off, 0, 2 * _CLAMP - 1)
            k = np.zeros(rows.size, np.int64)
            for a in range(d):
                k = (k << 21) | cc[:, a]
            lo = np.searchsorted(skeys, k, "left")
            hi = np.searchsorted(skeys, k, "right")
            cnt = hi - lo
            tot = int(cnt.sum())
            if tot == 0:
                continue
            rep = np.repeat(np.arange(rows.size), cnt)
            within = np.arange(tot) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            pt_parts.append(rows[rep])
            pd_parts.append(dets[order[lo[rep] + within]])
        if not pt_parts:
            return np.zeros(0, np.intp), np.zeros(0, np.intp), np.zeros(0)
        pt = np.concatenate(pt_parts)
        pd = np.concatenate(pd_parts)
        y = z[pd] - xp[pt, :d] if meas is None else self._innovation(meas[0][pd], meas[1][pt])
        if own is None:
            Sp = Si[pt]
        elif own[2] is None:
            Sp = _inv_spd(own[0][pt] + own[1][pd])
        else:
            Sp = np.linalg.inv(_own_S(own[0][pt], own[1][pd], own[2][pt]))
        d2 = np.einsum("ki,kij,kj->k", y, Sp, y)
        keep = d2 <= self.gate
        return pt[keep], pd[keep], d2[keep]

    @staticmethod
    def _innovation(zm, h):
        """Measurement-space innovation, the bearing wrapped (measurement.pxd)."""
        y = zm - h
        y[:, 1] = _meas.wrap_angle(y[:, 1])
        return y

    def _associate(self, rows, z, det_track, track_det, xp, Si, hw, counts, meas=None, own=None):
        pt, pd, d2 = self._gate(rows, z, det_track < 0, xp, Si, hw, meas, own)
        counts["pairs"] += pt.size
        if pt.size == 0:
            return
        lab = _components(pt, pd, xp.shape[0])
        labels, inv, sizes = np.unique(lab, return_inverse=True, return_counts=True)
        counts["clusters"] += labels.size
        counts["largest_cluster"] = max(counts["largest_cluster"], int(sizes.max()))
        single = sizes[inv] == 1
        track_det[pt[single]] = pd[single]
        det_track[pd[single]] = pt[single]
        multi = np.flatnonzero(~single)
        if multi.size == 0:
            return
        order = multi[np.argsort(inv[multi], kind="stable")]
        bounds = np.flatnonzero(np.diff(inv[order])) + 1
        for grp in np.split(order, bounds):
            ts, tl = np.unique(pt[grp], return_inverse=True)
            ds, dl = np.unique(pd[grp], return_inverse=True)
            cost = np.zeros((ts.size, ds.size))
            gated = np.zeros((ts.size, ds.size), bool)
            cost[tl, dl] = d2[grp] - self.gate
            gated[tl, dl] = True
            r, c = lsa(cost)
            ok = gated[r, c]
            track_det[ts[r[ok]]] = ds[c[ok]]
            det_track[ds[c[ok]]] = ts[r[ok]]

    def _estimate_clutter(self, z, det_track, counts, own_clutter):
        cfg = self.config
        u = int((det_track < 0).sum())
        counts["unclaimed"] = u
        if cfg.clutter_density is not None or own_clutter or z.shape[0] == 0:    # (own: not a sample of it)
            return
        if cfg.surveillance_volume is not None:
            V = float(cfg.surveillance_volume)
        else:
            V = 1.0
            side = 10.0 * cfg.r
            for a in range(self.dim):
                ext = float(z[:, a].max() - z[:, a].min())
                V *= ext if ext > side else side
        est = (u + 1.0) / V
        w = cfg.clutter_smoothing
        self.clutter = (1.0 - w) * self.clutter + w * est if self.clutter > 0.0 else est

    def _log_likelihood(self, d2, Si):
        """ln N(y; 0, S) per row, from y' Si y and Si (as kalman.pxd computes it)."""
        if Si.shape[-1] != self.dim:        # with a range rate (measurement.pxd)
            return -0.5 * (Si.shape[-1] * 1.8378770664093453 - np.linalg.slogdet(Si)[1] + d2)
        if self.dim == 2:
            det = Si[:, 0, 0] * Si[:, 1, 1] - Si[:, 0, 1] * Si[:, 1, 0]
        else:
            det = np.linalg.det(Si)
        return -0.5 * (self.dim * 1.8378770664093453 - np.log(det) + d2)

    def _pairs(self, z, det_track, dt, counts):
        """Greedy cheapest-first pairs (single index, detection index) of the
        waiting detections with this scan's free ones inside the velocity gate."""
        cfg = self.config
        R = cfg.v_max * dt + self.single_allowance      # per single
        free = np.flatnonzero(det_track < 0)
        ns = self.singles.shape[0]
        pt, pd_, pc = [], [], []
        for lo in range(0, ns, 256):                  # blocks of singles: bounded memory
            sb = self.singles[lo:lo + 256]
            y = z[free][None, :, :] - sb[:, None, :]
            d2 = y[..., 0] * y[..., 0] + y[..., 1] * y[..., 1]
            if self.dim == 3:
                d2 = d2 + y[..., 2] * y[..., 2]
            Rb = R[lo:lo + 256, None]
            i, j = np.nonzero(d2 <= Rb * Rb)
            pt.append(i + lo)
            pd_.append(free[j])
            pc.append(d2[i, j])
        if not pt:
            return np.zeros(0, np.intp), np.zeros(0, np.intp)
        pt, pd_, pc = np.concatenate(pt), np.concatenate(pd_), np.concatenate(pc)
        counts["pairs"] += int(pt.size)
        used_s, used_d, out_s, out_d = set(), set(), [], []
        for p in np.lexsort((pd_, pt, pc)):           # by cost, then single, then detection
            i, j = int(pt[p]), int(pd_[p])
            if i in used_s or j in used_d:
                continue
            used_s.add(i)
            used_d.add(j)
            out_s.append(i)
            out_d.append(j)
        return np.array(out_s, np.intp), np.array(out_d, np.intp)

    def _append(self, xb, Pb, hits, age, history, score):
        k = xb.shape[0]
        self.id = np.concatenate([self.id, np.arange(self.next_id, self.next_id + k, dtype=np.uint64)])
        self.next_id += k
        self.x = np.concatenate([self.x, xb])
        self.P = np.concatenate([self.P, Pb])
        self.hits = np.concatenate([self.hits, np.full(k, hits, np.uint32)])
        self.misses = np.concatenate([self.misses, np.zeros(k, np.uint32)])
        self.age = np.concatenate([self.age, np.full(k, age, np.uint32)])
        self.history = np.concatenate([self.history, np.full(k, history, np.uint32)])
        self.state = np.concatenate([self.state, np.full(k, TENTATIVE, np.uint8)])
        self.score = np.concatenate([self.score, score])
        self.score_max = np.concatenate([self.score_max, score])
        if self.imm:
            mu, xm, Pm = reference_imm.birth(xb, Pb, self.config)
            self.mu = np.concatenate([self.mu, mu])
            self.xm = np.concatenate([self.xm, xm])
            self.Pm = np.concatenate([self.Pm, Pm])

    # ------------------------------------------------------------ the tick

    def tick(self, detections, dt=None, sensor=None, *, time=None, covariance=None):
        """Advance all tracks to the scan's time and fold in one scan.

        The same rules as :meth:`dod.tracker.Tracker.tick`, in numpy.

        Parameters
        ----------
        detections : numpy.ndarray
            float64, shape (k, dim): positions, or with `sensor` range-bearing
            measurements.
        dt : float, optional
            Seconds since the previous scan (finite, >= 0).
        sensor : dod.tracker.Sensor, optional
            Its position, noise and column order for this scan.
        time : float, optional
            The scan's time stamp (keyword; exactly one of dt and time), as
            :meth:`dod.tracker.Tracker.tick` reads it (the clock, late scans).
        covariance : numpy.ndarray, optional
            Shape (k, dim, dim): each detection's own noise (keyword), as
            :meth:`dod.tracker.Tracker.tick` takes it (Cartesian scans).

        Raises
        ------
        TypeError
            For detections that are not float64, a sensor that is not a
            Sensor, or both or neither of dt and time.
        ValueError
            For a wrong shape, a bad dt or time, too many detections
            (overflow="error") or a sensor position of the other dimension.

        Notes
        -----
        Thread-safety: one thread at a time (plain numpy state).
        """
        cfg, d, n = self.config, self.dim, self.n
        if sensor is not None and not isinstance(sensor, _meas.Sensor):
            raise TypeError("sensor must be a dod.tracker.Sensor")
        rate = sensor is not None and sensor.range_rate_sigma is not None
        if sensor is not None:
            if sensor.dim != d:
                raise ValueError(f"sensor position must have {d} coordinates")
        cols = d + rate
        detections = np.asarray(detections)
        if detections.dtype != np.float64:
            raise TypeError("detections must be float64")
        if detections.ndim != 2 or detections.shape[1] != cols:
            raise ValueError(f"detections must have shape (k, {cols})")
        if sensor is not None and sensor.order == _meas.BEARING_RANGE:
            # the kernels' order: range, bearing[, elevation] (a range rate stays last)
            detections = np.concatenate([detections[:, d - 1::-1], detections[:, d:]], axis=1)
        if covariance is not None:
            if rate:
                raise ValueError("covariance is not supported with a range-rate sensor")
            covariance = np.asarray(covariance, np.float64)
            if covariance.shape != (detections.shape[0], d, d):
                raise ValueError(f"covariance must have shape ({detections.shape[0]}, {d}, {d})")
            covariance = covariance[: cfg.max_detections]
            if sensor is not None and sensor.order == _meas.BEARING_RANGE:
                covariance = covariance[:, ::-1, ::-1]      # as the detections' columns
        over = 0
        if detections.shape[0] > cfg.max_detections:
            if cfg.overflow == "error":
                raise ValueError("too many detections")
            over = detections.shape[0] - cfg.max_detections
            detections = detections[: cfg.max_detections]
        if (dt is None) == (time is None):
            raise TypeError("tick takes exactly one of dt and time=")
        if time is None:
            if not (np.isfinite(dt) and dt >= 0):
                raise ValueError("dt must be finite and >= 0")
        else:
            if not np.isfinite(time):
                raise ValueError("time must be finite")
            dt = time - self.time if self._started else 0.0
            if dt < 0 and cfg.out_of_sequence == "refuse":
                raise ValueError("time is before the latest scan's (out of sequence)")
        if dt < 0:                                  # late, out_of_sequence="drop": skipped, counted
            self.late_scans += 1
            return
        self.time = self.time + dt if time is None else float(time)
        self._started = True
        finite = _meas.within_limit(detections) if sensor is None else _meas.valid(detections, d)
        z = detections[finite]
        zm = None
        Rz = None                           # the valid rows' own noise, symmetrised (as _input.pyx)
        r2box = self.r2                     # the gate boxes' noise: r^2, or the largest own variance
        if covariance is not None:
            Rz = covariance[finite]
            Rz = 0.5 * (Rz + np.swapaxes(Rz, 1, 2))
            if not ((np.abs(Rz) <= _meas.COORDINATE_LIMIT["float64"] ** 2).all() and (Rz[:, 0, 0] > 0).all()
                    and (np.linalg.det(Rz[:, :2, :2]) > 0).all() and (np.linalg.det(Rz) > 0).all()):
                raise ValueError("covariance must be finite (within COORDINATE_LIMIT**2), symmetric and positive "
                                 "definite")
            boxvar = np.diagonal(Rz, axis1=1, axis2=2).max(axis=0) if Rz.shape[0] else np.zeros(d)
            r2box = float(boxvar.max())
        if sensor is not None:              # measurements; z: their Cartesian positions
            zm, z = z, _meas.to_cartesian(z[:, :d], sensor.position)
            R = np.diag(np.append(sensor.variances if Rz is None else boxvar,     # (Rz: the gate boxes' noise)
                                  [sensor.range_rate_sigma ** 2] if rate else []))
        counts = dict.fromkeys(COUNT_NAMES, 0)      # the engine's one list of counters
        counts.update(detections=int(z.shape[0]), invalid=int((~finite).sum()), overflow=over)
        T = self.x.shape[0]
        F, Q = self._model(dt)
        # predict
        if self.imm and dt == 0:        # the same instant: nothing predicted (mixing would move it)
            mu, xm, Pm, x, P = self.mu, self.xm, self.Pm, self.x, self.P
        elif self.imm:
            mu, xm, Pm, x, P = reference_imm.predict(self.mu, self.xm, self.Pm, d, dt, cfg)
        else:
            x = self.x @ F.T
            P = F @ self.P @ F.T + Q
            P = 0.5 * (P + np.swapaxes(P, 1, 2))
        self.age = self.age + 1
        gateable = np.ones(T, bool)
        meas = None
        if sensor is None:
            S = P[:, :d, :d] + r2box * np.eye(d)
            Si = _inv_spd(S) if T else np.zeros((0, d, d))
            hw = np.sqrt(self.gate * np.diagonal(S, axis1=1, axis2=2)) if T else np.zeros((0, d))
            hwmax = hw.max(axis=1) if T else np.zeros(0)
        elif rate:                          # H over [p, v]; the box of the position block
            hpred, J, gateable = _meas.predict_rate(x, sensor.position, d)
            S = J @ P @ np.swapaxes(J, 1, 2) + R
            S = 0.5 * (S + np.swapaxes(S, 1, 2))
            gateable &= np.all(np.linalg.eigvalsh(S) > 0, axis=1) if T else gateable
            S[~gateable] = np.eye(d + 1)
            Si = np.linalg.inv(S) if T else np.zeros((0, d + 1, d + 1))
            hwmax = np.where(gateable, _meas.gate_box(hpred[:, :d], J[:, :d, :d], S[:, :d, :d], self.gate,
                                                      sensor.position).max(axis=1), 0.0) if T else np.zeros(0)
            meas = (zm, hpred)
        else:
            hpred, J, gateable = _meas.predict(x, sensor.position, d)
            S = J @ P[:, :d, :d] @ np.swapaxes(J, 1, 2) + R
            S = 0.5 * (S + np.swapaxes(S, 1, 2))
            gateable &= np.linalg.det(S) > 0 if T else gateable
            S[~gateable] = np.eye(d)
            Si = np.linalg.inv(S) if T else np.zeros((0, d, d))
            hwmax = np.where(gateable, _meas.gate_box(hpred, J, S, self.gate, sensor.position).max(axis=1),
                             0.0) if T else np.zeros(0)
            meas = (zm, hpred)
        track_det = np.full(T, -1, np.intp)
        det_track = np.full(z.shape[0], -1, np.intp)
        # The scan's rates: its sensor's own, else the configuration's (and
        # then the clutter per unit area/volume, estimated or given).
        own_clutter = sensor is not None and sensor.clutter_density is not None
        pd = cfg.pd if sensor is None or sensor.pd is None else sensor.pd
        for stage in (CONFIRMED, TENTATIVE):
            if stage == TENTATIVE:
                self._estimate_clutter(z, det_track, counts, own_clutter)
            rows = np.flatnonzero((self.state == stage) & gateable)
            self._associate(rows, z, det_track, track_det, x, Si, hwmax, counts, meas,
                            None if Rz is None else (P[:, :d, :d], Rz, None if sensor is None else J))
        score_logic = cfg.confirmation == "score"
        lc = float(np.log(self.clutter)) if self.clutter > 0.0 else 0.0
        if own_clutter:
            lc = float(np.log(sensor.clutter_density))
        if cfg.initiation == "two_point":
            pair_s, pair_d = self._pairs(z, det_track, dt, counts)
        score = self.score.copy()
        # update (Joseph form)
        a = np.flatnonzero(track_det >= 0)
        counts["associations"] = int(a.size)
        if a.size and sensor is not None:   # the EKF's innovation, H = [J 0]
            Pa, xa, Sia, Ja = P[a], x[a], Si[a], J[a]
            if Rz is not None:              # each pair's own S = J P J' + R_j
                R = Rz[track_det[a]]
                Sia = np.linalg.inv(_own_S(Pa[:, :d, :d], R, Ja))
            y = self._innovation(zm[track_det[a]], hpred[a])
            if score_logic:
                d2 = np.einsum("ki,kij,kj->k", y, Sia, y)
                ll = self._log_likelihood(d2, Sia)
                if not own_clutter:             # per unit area/volume, as the clutter density
                    ll = ll - _meas.log_jacobian(zm[track_det[a], :d])
                if rate:                        # per m/s: clutter uniform in range rate over the span
                    ll = ll + np.log(sensor.range_rate_span)
                score[a] += np.log(pd) - lc + ll
        elif a.size:
            Pa, xa, Sia = P[a], x[a], Si[a]
            if Rz is not None:              # each pair's own S = P + R_j
                Sia = _inv_spd(Pa[:, :d, :d] + Rz[track_det[a]])
            y = z[track_det[a]] - xa[:, :d]
            if score_logic:
                d2 = np.einsum("ki,kij,kj->k", y, Sia, y)
                score[a] += np.log(pd) - lc + self._log_likelihood(d2, Sia)
        if a.size and self.imm:             # every model (EKF per model with a sensor), then mu
            zu = z[track_det[a]] if sensor is None else zm[track_det[a]]
            Ru = self.r2 if Rz is None else Rz[track_det[a]]
            mu[a], xm[a], Pm[a], x[a], P[a] = reference_imm.update(mu[a], xm[a], Pm[a], zu, d, Ru, sensor)
        elif a.size and rate:               # the same with the whole H (k, d + 1, n)
            K = Pa @ np.swapaxes(Ja, 1, 2) @ Sia
            x[a] = xa + np.einsum("knd,kd->kn", K, y)
            A = np.broadcast_to(np.eye(n), Pa.shape) - K @ Ja
            Pn = A @ Pa @ np.swapaxes(A, 1, 2) + K @ R @ np.swapaxes(K, 1, 2)
            P[a] = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
        elif a.size and sensor is not None:  # extended Kalman update (Joseph form)
            K = Pa[:, :, :d] @ np.swapaxes(Ja, 1, 2) @ Sia          # (k, n, d)
            x[a] = xa + np.einsum("knd,kd->kn", K, y)
            A = np.broadcast_to(np.eye(n), Pa.shape).copy()
            A[:, :, :d] -= K @ Ja
            Pn = A @ Pa @ np.swapaxes(A, 1, 2) + K @ R @ np.swapaxes(K, 1, 2)
            P[a] = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
        elif a.size:                        # Kalman update (Joseph form)
            K = Pa[:, :, :d] @ Sia                                  # (k, n, d)
            x[a] = xa + np.einsum("knd,kd->kn", K, y)
            A = np.broadcast_to(np.eye(n), Pa.shape).copy()
            A[:, :, :d] -= K
            R = self.r2 if Rz is None else Rz[track_det[a]]
            KRK = R * K @ np.swapaxes(K, 1, 2) if Rz is None else K @ R @ np.swapaxes(K, 1, 2)
            Pn = A @ Pa @ np.swapaxes(A, 1, 2) + KRK
            P[a] = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
        hit = track_det >= 0
        if score_logic:
            score[~hit] += np.log(1.0 - pd)
        score_max = np.maximum(self.score_max, score) if score_logic else self.score_max
        self.hits = self.hits + hit.astype(np.uint32)
        self.misses = np.where(hit, 0, self.misses + 1).astype(np.uint32)
        self.history = ((self.history.astype(np.uint64) << 1) & 0xFFFFFFFF).astype(np.uint32) \
            | hit.astype(np.uint32)
        state = self.state.copy()
        nmask = np.uint32((1 << cfg.confirm_n) - 1)
        pop = _popcount32(self.history & nmask)
        tent = state == TENTATIVE
        if score_logic:
            conf_now = tent & (score >= cfg.confirm_threshold)
            state[conf_now] = CONFIRMED
            state[tent & ~conf_now & (score <= cfg.delete_threshold)] = NONE
            state[(self.state == CONFIRMED) & (score_max - score >= cfg.score_drop)] = NONE
        else:
            conf_now = tent & (pop >= cfg.confirm_m)
            state[conf_now] = CONFIRMED
            state[tent & ~conf_now & (self.age >= cfg.confirm_n)] = NONE
            state[(self.state == CONFIRMED) & (self.misses >= cfg.max_misses)] = NONE
        keep = state != NONE
        counts["deaths"] = int((~keep).sum())
        self.x, self.P, self.state = x[keep], P[keep], state[keep]
        self.id, self.hits, self.misses = self.id[keep], self.hits[keep], self.misses[keep]
        self.age, self.history = self.age[keep], self.history[keep]
        self.score, self.score_max = score[keep], score_max[keep]
        if self.imm:
            self.mu, self.xm, self.Pm = mu[keep], xm[keep], Pm[keep]
        if cfg.initiation == "two_point":
            self._births_two_point(z, zm, sensor, det_track, pair_s, pair_d, dt, lc, pd, counts,
                                   R if rate else None, Rz)
            k = 0
        else:
            # births
            free = np.flatnonzero(det_track < 0)
            room = max(cfg.capacity - self.x.shape[0], 0)
            born = free[:room]
            counts["births_dropped"] = int(free.size - born.size)
            k = born.size
            counts["births"] = int(k)
        if k:
            xb = np.zeros((k, n))
            xb[:, :d] = z[born]
            Pb = np.zeros((k, n, n))
            Pb[:, range(d), range(d)] = self.r2
            Pb[:, range(d, n), range(d, n)] = cfg.v0 * cfg.v0
            if sensor is not None:          # the converted measurements' covariance
                Pb[:, :d, :d] = (_meas.converted_covariance(zm[born, :d], sensor.variances) if Rz is None
                                 else _meas.converted_covariance_of(zm[born], Rz[born]))
            elif Rz is not None:            # the detections' own
                Pb[:, :d, :d] = Rz[born]
            if rate:                        # the radial velocity
                xb[:, d:], Pb[:, d:, d:] = _meas.rate_birth(zm[born], sensor.range_rate_sigma ** 2, cfg.v0 * cfg.v0)
            sb = np.full(k, np.log(cfg.new_target_density) - lc) if score_logic else np.zeros(k)
            if score_logic and own_clutter:     # the birth density per measurement volume
                sb = sb + _meas.log_jacobian(zm[born, :d])
            self._append(xb, Pb, 1, 1, 1, sb)
        counts["confirmed"] = int((self.state == CONFIRMED).sum())
        counts["tentative"] = int((self.state == TENTATIVE).sum())
        self.last = counts
        self.scans += 1

    def _births_two_point(self, z, zm, sensor, det_track, pair_s, pair_d, dt, lc, pd, counts, Rrate=None, Rz=None):
        cfg, d, n = self.config, self.dim, self.n
        order = np.argsort(pair_d, kind="stable")        # in the order of the second detection
        pair_s, pair_d = pair_s[order], pair_d[order]
        room = max(cfg.capacity - self.x.shape[0], 0)
        counts["births_dropped"] = int(max(pair_d.size - room, 0))
        born_s, born_d = pair_s[:room], pair_d[:room]
        k = born_s.size
        counts["births"] = int(k)
        if k:
            F, Q = self._model(dt)
            x0 = np.zeros((k, n))
            x0[:, :d] = self.singles[born_s]
            P0 = np.zeros((k, n, n))
            P0[:, :d, :d] = self.single_C[born_s]
            P0[:, range(d, n), range(d, n)] = cfg.v0 * cfg.v0
            x = x0 @ F.T
            P = F @ P0 @ F.T + Q
            P = 0.5 * (P + np.swapaxes(P, 1, 2))
            if Rrate is not None:           # with a range rate: the whole H, as a track's update
                h, H, ok = _meas.predict_rate(x, sensor.position, d)
                R = Rrate
                S = H @ P @ np.swapaxes(H, 1, 2) + R
                S = 0.5 * (S + np.swapaxes(S, 1, 2))
                ok &= np.all(np.linalg.eigvalsh(S) > 0, axis=1)
                S[~ok] = np.eye(d + 1)
                Si = np.linalg.inv(S)
                y = self._innovation(zm[born_d], h)
            elif sensor is None:
                ok = np.ones(k, bool)
                R = self.r2 * np.eye(d) if Rz is None else Rz[born_d]
                Si = _inv_spd(P[:, :d, :d] + R)
                y = z[born_d] - x[:, :d]
                H = np.broadcast_to(np.eye(d), (k, d, d))
            else:                           # the EKF, as a track's update (none in the singular zone)
                h, H, ok = _meas.predict(x, sensor.position, d)
                R = np.diag(sensor.variances) if Rz is None else Rz[born_d]
                S = H @ P[:, :d, :d] @ np.swapaxes(H, 1, 2) + R
                S = 0.5 * (S + np.swapaxes(S, 1, 2))
                ok &= np.linalg.det(S) > 0
                S[~ok] = np.eye(d)
                Si = np.linalg.inv(S)
                y = self._innovation(zm[born_d], h)
            d2 = np.einsum("ki,kij,kj->k", y, Si, y)
            if cfg.confirmation == "score":
                ll = self._log_likelihood(d2, Si)
                lb = np.log(cfg.new_target_density) - lc
                if sensor is not None and sensor.clutter_density is not None:
                    lb = lb + _meas.log_jacobian(zm[born_d, :d])     # (the single at this detection's range)
                elif sensor is not None:
                    ll = ll - _meas.log_jacobian(zm[born_d, :d])
                if Rrate is not None:
                    ll = ll + np.log(sensor.range_rate_span)
                sb = lb + (np.log(pd) - lc + np.where(ok, ll, 0.0))
            else:
                sb = np.zeros(k)
            if Rrate is not None:
                K = P @ np.swapaxes(H, 1, 2) @ Si
                A = np.broadcast_to(np.eye(n), P.shape) - K @ H
            else:
                K = P[:, :, :d] @ np.swapaxes(H, 1, 2) @ Si
                A = np.broadcast_to(np.eye(n), P.shape).copy()
                A[:, :, :d] -= K @ H
            xu = x + np.einsum("knd,kd->kn", K, y)
            Pn = A @ P @ np.swapaxes(A, 1, 2) + K @ R @ np.swapaxes(K, 1, 2)
            Pn = 0.5 * (Pn + np.swapaxes(Pn, 1, 2))
            x = np.where(ok[:, None], xu, x)
            P = np.where(ok[:, None, None], Pn, P)
            self._append(x, P, 2, 2, 3, sb)
        waiting = det_track < 0
        waiting[pair_d] = False
        self.singles = z[waiting].copy()
        m = self.singles.shape[0]
        if sensor is None and Rz is None:
            self.single_C = np.broadcast_to(self.r2 * np.eye(d), (m, d, d)).copy()
            self.single_allowance = np.full(m, cfg.pair_radius_factor * cfg.r)
        else:                               # the converted or own covariance's upper triangle, symmetric
            if sensor is None:
                C = np.triu(Rz[waiting])
            elif Rz is None:
                C = np.triu(_meas.converted_covariance(zm[waiting, :d], sensor.variances))
            else:
                C = np.triu(_meas.converted_covariance_of(zm[waiting], Rz[waiting]))
            self.single_C = C + np.swapaxes(np.triu(C, 1), 1, 2)
            widest = np.abs(self.single_C).sum(axis=2).max(axis=1)
            self.single_allowance = cfg.pair_radius_factor * np.sqrt(widest)
        counts["singles"] = int(m)

    # ------------------------------------------------------------ reading

    @property
    def count(self):
        """Live tracks (tentative and confirmed)."""
        return self.x.shape[0]

    def __len__(self):
        """Live tracks, as :attr:`count`."""
        return self.x.shape[0]

    @property
    def ids(self):
        """Track ids of the rows (uint64; the array itself, not a copy)."""
        return self.id

    @property
    def positions(self):
        """(count, dim) positions of the rows (a view of the state)."""
        return self.x[:, : self.dim]

    @property
    def velocities(self):
        """(count, dim) velocities of the rows (a view of the state)."""
        return self.x[:, self.dim:]

    @property
    def covariances(self):
        """(count, n, n) full covariances of the rows."""
        return self.P

    @property
    def status(self):
        """1 tentative, 2 confirmed, per row (Tracker.status)."""
        return self.state

    @property
    def states(self):
        """Deprecated name of :attr:`status`, as Tracker.states."""
        import warnings
        warnings.warn("ReferenceTracker.states is deprecated: the track status is ReferenceTracker.status",
                      DeprecationWarning, stacklevel=2)
        return self.state

    @property
    def scores(self):
        """Track scores (log-likelihood ratios) of the rows; zeros unless confirmation="score"."""
        return self.score

    @property
    def model_probabilities(self):
        """motion="imm": (k, 3) model probabilities; None for motion="cv"."""
        return self.mu if self.imm else None

    @property
    def turn_rates(self):
        """motion="imm": the combined turn rate of each row; None for motion="cv"."""
        return np.einsum("kj,kj->k", self.mu, self.xm[:, :, -1]) if self.imm else None

    @property
    def clutter_density(self):
        """The clutter density the latest scan used."""
        return self.clutter

    @property
    def waiting(self):
        """Detections waiting for a partner (two-point initiation), (k, dim)."""
        return self.singles

    @property
    def confirmed(self):
        """Boolean mask of the confirmed rows (a new array)."""
        return self.state == CONFIRMED

    def counts(self):
        """The latest tick's counters, as a dict (a copy). Thread-safety: as the tracker."""
        return dict(self.last)

    def confirmed_tracks(self):
        """``(ids, positions)`` of the confirmed tracks, in row order (new arrays).
        Thread-safety: as the tracker (one thread at a time)."""
        m = self.confirmed
        return self.id[m].copy(), self.positions[m].copy()
