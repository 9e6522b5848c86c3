# dod/tracker/_model.pxd: the tracker's model variants, resolved at compile
# time, and the kernel set each model implements on one track's row.
#
# A tracker has three model axes, fixed when it is built:
#   dimension     _planar (2-D), _spatial (3-D)
#   motion        _cv (constant velocity: kalman.pxd), _imm (imm.pxd)
#   measurement   _cartesian (positions), _polar (range-bearing[-elevation]
#                 of a sensor: measurement.pxd), _doppler (_polar with a
#                 last range-rate value: m = d + 1, H with a velocity block),
#                 _cartesian_cov and _polar_cov (_cartesian and _polar, each
#                 detection with its own noise: the scan's k.R)
# A pass writes its row loop once as a Cython fused function over the axes it
# depends on (its first arguments: NULL pointers of the tag types below), and
# each specialisation compiles to the straight-line code of one model:
# `if _motion is _imm` is decided by Cython, the dimension is a constant, so
# gcc unrolls every per-axis loop and folds the packed covariance's indices.
# The pass picks the specialisation from the tracker once per call over a
# range of rows (_model_of), never inside the loop. (Cython cannot pass a fused
# function as an argument, so each pass lists its own specialisations in one
# `if` over _model_of: that list is the only place a pass names the models.)
#
# The kernel set (the functions below; each a compile-time `if` over a model
# axis that calls the model's own .pxd):
#   motion       _motion_predict    one step ahead of a row's x, P (and the
#                                   model's own columns)
#                _motion_update     update with a Cartesian position
#                _motion_ekf_update update with a sensor's measurement
#                _motion_birth      a new row's model state from its x, P
#   measurement  _meas_gate_row     a predicted row's innovation inverse (k.Si)
#                                   and gate half-widths (k.hw, k.hm)
#                _meas_innovation   y of a (row, detection) pair; False when
#                                   the detection lies outside the row's box
#                _meas_update       the row's update with its detection
#                _meas_birth_cov    a single-point birth's position covariance
#                _meas_pair_inverse the innovation inverse of a (row, detection)
#                                   pair: the row's k.Si, or with the
#                                   detection's own R its own
# A new model is its .pxd with these kernels on one row, a tag struct and a
# line in its axis' fused type here, an arm in each kernel of its axis, and a
# case in _model_of: nothing in the passes changes.
#
# A fourth axis is the element type of the tick's per-row scratch k.Si and
# k.hw (_scratch: _f64, _f32): float where the float32 vector kernels gate
# the rows (_scratch_f32), double everywhere else. The kernels that read
# them (_meas_innovation, _meas_pair_inverse) take it as a tag too, and a
# pass picks it once per call over a range of rows, as the model.
#
# The model .pxd files take a row's x and packed P contiguous; the track
# columns are strided (dod_track_cols). A kernel borrows a row (_row_lend_x,
# _row_lend_P): in the rows layout the row itself, in lanes a copy in locals
# that _row_return writes back. Plain copies: the arithmetic and its bits
# are the same for every column layout.
#
# Contract: as the model .pxd files' (rows in range, P packed and symmetric).
# Thread-safety: each kernel writes only its row's entries.
from libc.math cimport sqrt
from libc.stdint cimport int32_t
from dod.tracker.kalman cimport (dod_kalman_noise, dod_kalman_predict_step, dod_kalman_update, dod_kalman_mahalanobis2,
                                 dod_kalman_innovation_inverse, dod_kalman_packed_index,
                                 dod_kalman_innovation_inverse_cov, dod_kalman_update_cov,
                                 dod_kalman_inverse_spd, dod_kalman_cv2, dod_kalman_cv3)
from dod.tracker.imm cimport (DOD_IMM_MODELS, dod_imm_predict, dod_imm_update, dod_imm_birth, dod_imm_update_cov,
                              dod_imm_model_x, dod_imm_model_P, dod_imm_weigh)
from dod.tracker.measurement cimport (dod_meas_predict, dod_meas_innovation_cov, dod_meas_gate_box,
                                      dod_meas_innovation, _dod_meas_update,
                                      dod_ekf_position_update, dod_meas_to_cartesian,
                                      dod_meas_rate_predict, dod_meas_rate_innovation_cov,
                                      dod_meas_rate_inverse, dod_meas_rate_innovation, _dod_meas_rate_update,
                                      dod_meas_rate_variances, dod_meas_rate_birth, dod_meas_mahalanobis2,
                                      dod_ekf_rate_update, dod_meas_innovation_cov_full, _dod_meas_update_cov,
                                      dod_meas_to_cartesian_cov, dod_ekf_position_update_cov)
from dod.tracker._track cimport dod_tracker, dod_track_row_load, dod_track_row_store
from dod.tracker._frame cimport _tick


cdef struct _planar:
    char unused
cdef struct _spatial:
    char unused
ctypedef fused _dim:
    _planar
    _spatial

cdef struct _cv:
    char unused
cdef struct _imm:
    char unused
ctypedef fused _motion:
    _cv
    _imm

cdef struct _cartesian:
    char unused
cdef struct _polar:
    char unused
cdef struct _doppler:
    char unused
cdef struct _cartesian_cov:
    char unused
cdef struct _polar_cov:
    char unused
ctypedef fused _meas:
    _cartesian
    _polar
    _doppler
    _cartesian_cov
    _polar_cov


# The element type of k.Si and k.hw. The frame carves them for double
# (_frame.pyx); float takes the first half of the same bytes (_Si_f32,
# _hw_f32).
cdef struct _f64:
    char unused
cdef struct _f32:
    char unused
ctypedef fused _scratch:
    _f64
    _f32


cdef enum:                          # _model_of: dimension, motion and measurement in bits
    _MODEL_3D = 1
    _MODEL_IMM = 2
    _MODEL_POLAR = 4
    _MODEL_RATE = 8                 # with _MODEL_POLAR: the scan has range rates (_doppler)


cdef inline int _model_of(const dod_tracker* t, const _tick* k) noexcept nogil:
    return ((_MODEL_3D if t.dim == 3 else 0) | (_MODEL_IMM if t.imm.models else 0)
            | (_MODEL_POLAR if k.sensor != NULL else 0)
            | (_MODEL_RATE if k.sensor != NULL and k.sensor.rate_var > 0.0 else 0))


cdef inline bint _scratch_f32(const dod_tracker* t, const _tick* k) noexcept nogil:
    """k.Si and k.hw hold float: the float32 lanes of a constant-velocity
    tracker on a Cartesian scan, whose rows predict gates with
    dod_vk_gate_rows_f32 (_predict.pyx; the update reads them with
    dod_vk_cv_update_f32, or, with the detections' own covariance, computes
    each pair's inverse). Their arithmetic is float: storing Si and hw in
    float loses nothing and halves the bytes the tick moves for them."""
    return t.cols.single and t.cols.xr == 1 and t.cols.Pr == 1 and t.imm.models == 0 and k.sensor == NULL


cdef inline float* _Si_f32(const _tick* k) noexcept nogil:
    """k.Si's bytes as float (_scratch_f32): [T, d, d]."""
    return <float*>k.Si


cdef inline float* _hw_f32(const _tick* k) noexcept nogil:
    """k.hw's bytes as float (_scratch_f32): [T, d]."""
    return <float*>k.hw


cdef inline double _hw(const _scratch* e, const _tick* k, size_t i) noexcept nogil:
    """Entry i of the gate half-widths k.hw, in double (a float one widened: exact)."""
    if _scratch is _f32:
        return _hw_f32(k)[i]
    else:
        return k.hw[i]


cdef inline const double* _row_inverse(const _scratch* e, const _tick* k, size_t ti, int m,
                                       double* buf) noexcept nogil:
    """Row ti's innovation inverse in k.Si (m x m) as doubles: in place, or
    a float one widened into buf (m x m values; exact, so the arithmetic
    that reads it is the same code in both)."""
    cdef int a
    cdef const float* f
    if _scratch is _f32:
        f = _Si_f32(k) + ti * <size_t>(m * m)
        for a in range(m * m):
            buf[a] = f[a]
        return buf
    else:
        return k.Si + ti * <size_t>(m * m)


cdef inline int _d(const _dim* v) noexcept nogil:
    """The dimension, a compile-time constant of each specialisation."""
    if _dim is _planar:
        return 2
    else:
        return 3


cdef inline int _m(const _dim* v, const _meas* s) noexcept nogil:
    """Values of one measurement (the stride of k.zm, k.hp; k.Si is m x m):
    d, and d + 1 with a range rate."""
    if _meas is _doppler:
        return _d(v) + 1
    else:
        return _d(v)


cdef inline int _hn(const _dim* v, const _meas* s) noexcept nogil:
    """Columns of a row's Jacobian in k.J (m x _hn): dh/dp (d), or with a
    range rate the whole H over the CV state (2d)."""
    if _meas is _doppler:
        return 2 * _d(v)
    else:
        return _d(v)


cdef inline int _pn(const _dim* v) noexcept nogil:
    """Values of a packed covariance of the 2d-entry state (2d(2d+1)/2)."""
    if _dim is _planar:
        return 10
    else:
        return 21


cdef inline double* _row_lend_x(const _dim* v, const dod_tracker* t, size_t ti, double* buf) noexcept nogil:
    """Row ti's x as 2d contiguous values: the row itself when its values
    lie together in doubles (rows), else its lanes, or its float32 values,
    copied into buf (2d values)."""
    if t.cols.single:
        dod_track_row_load(t.cols.xf, t.cols.xr, t.cols.xs, ti, 2 * _d(v), buf)
        return buf
    if t.cols.xs == 1:          # (rows: xr is 2d, a constant here)
        return t.cols.x + ti * 2 * _d(v)
    dod_track_row_load(t.cols.x, t.cols.xr, t.cols.xs, ti, 2 * _d(v), buf)
    return buf


cdef inline double* _row_lend_P(const _dim* v, const dod_tracker* t, size_t ti, double* buf) noexcept nogil:
    """Row ti's packed P (_pn values) contiguous: _row_lend_x's twin."""
    if t.cols.single:
        dod_track_row_load(t.cols.Pf, t.cols.Pr, t.cols.Ps, ti, _pn(v), buf)
        return buf
    if t.cols.Ps == 1:
        return t.cols.P + ti * _pn(v)
    dod_track_row_load(t.cols.P, t.cols.Pr, t.cols.Ps, ti, _pn(v), buf)
    return buf


cdef inline void _row_return(const _dim* v, const dod_tracker* t, size_t ti, const double* x,
                             const double* P) noexcept nogil:
    """Write back the x and P that _row_lend_x and _row_lend_P lent (and
    a kernel changed): nothing when they are the row itself; float32 rows
    rounded to nearest."""
    if t.cols.single:
        dod_track_row_store(t.cols.xf, t.cols.xr, t.cols.xs, ti, 2 * _d(v), x)
        dod_track_row_store(t.cols.Pf, t.cols.Pr, t.cols.Ps, ti, _pn(v), P)
        return
    if t.cols.xs != 1:
        dod_track_row_store(t.cols.x, t.cols.xr, t.cols.xs, ti, 2 * _d(v), x)
    if t.cols.Ps != 1:
        dod_track_row_store(t.cols.P, t.cols.Pr, t.cols.Ps, ti, _pn(v), P)


cdef inline double _row_x(const _dim* v, const dod_tracker* t, size_t ti, int a) noexcept nogil:
    """Element a of row ti's x (rows: 2d values a row, a constant; lanes:
    one value a row; float32: either, as a double)."""
    if t.cols.single:
        return t.cols.xf[ti * t.cols.xr + <size_t>a * t.cols.xs]
    if t.cols.xs == 1:
        return t.cols.x[ti * 2 * _d(v) + a]
    return t.cols.x[<size_t>a * t.cols.xs + ti]


# --- motion ---------------------------------------------------------------

cdef inline void _motion_predict(const _dim* v, const _motion* m, const dod_tracker* t, size_t ti,
                                 const dod_kalman_noise* w, double dt) noexcept nogil:
    cdef int d = _d(v)
    cdef double xb[6]
    cdef double Pb[21]
    cdef double* x = _row_lend_x(v, t, ti, xb)
    cdef double* P = _row_lend_P(v, t, ti, Pb)
    if _motion is _imm:         # mix, predict each model, combine into x, P
        dod_imm_predict(&t.imm, ti, x, P, d, dt)
    else:
        dod_kalman_predict_step(x, P, d, w)
    _row_return(v, t, ti, x, P)


cdef inline void _motion_update(const _dim* v, const _motion* m, const dod_tracker* t, size_t ti,
                                const double* z, const double* Si, double r2, double* x, double* P) noexcept nogil:
    """Row ti's update with a Cartesian position z; x, P its loaded row."""
    cdef int d = _d(v)
    if _motion is _imm:         # every model, the probabilities, the combination
        dod_imm_update(&t.imm, ti, z, r2, x, P, d)
    else:
        dod_kalman_update(x, P, z, Si, d, r2)


cdef inline void _motion_ekf_update(const _dim* v, const _motion* m, const dod_tracker* t, const _tick* k,
                                    size_t ti, int32_t j, double* x, double* P) noexcept nogil:
    """Row ti's update with sensor measurement j (x, P its loaded row). CV:
    the extended Kalman update with the innovation inverse and Jacobian of
    _meas_gate_row. IMM: each model's own EKF update (its prediction
    differs), then the probabilities and the combination."""
    cdef int d = _d(v), n = 2 * d, a
    cdef double y[3]
    cdef double ll[DOD_IMM_MODELS]
    if _motion is _imm:
        for a in range(DOD_IMM_MODELS):
            ll[a] = dod_ekf_position_update(dod_imm_model_x(&t.imm, ti, a, d), dod_imm_model_P(&t.imm, ti, a, d),
                                            n + 1, k.zm + j * d, d, k.sensor)
        dod_imm_weigh(&t.imm, ti, ll, x, P, d)
    else:
        dod_meas_innovation(k.zm + j * d, k.hp + ti * d, d, y)
        _cv_ekf_update(v, k, x, P, y, k.J + ti * d * d, k.Si + ti * d * d)


cdef inline void _cv_ekf_update(const _dim* v, const _tick* k, double* x, double* P, const double* y,
                                const double* J, const double* Si) noexcept nogil:
    """The extended Kalman update of a CV state x, packed P with innovation
    y, Jacobian J and innovation inverse Si (_meas_linearise's)."""
    if _dim is _planar:         # the packed P of the CV state: kalman.pxd's shape
        _dod_meas_update(<dod_kalman_cv2*>NULL, x, P, y, J, Si, k.sensor.var)
    else:
        _dod_meas_update(<dod_kalman_cv3*>NULL, x, P, y, J, Si, k.sensor.var)


cdef inline void _cv_rate_update(const _dim* v, const _tick* k, double* x, double* P, const double* y,
                                 const double* H, const double* Si) noexcept nogil:
    """_cv_ekf_update with a range rate: H the whole (d + 1) x 2d Jacobian,
    Si (d + 1) x (d + 1) (_meas_linearise's)."""
    cdef double var[4]
    dod_meas_rate_variances(k.sensor, _d(v), var)
    if _dim is _planar:
        _dod_meas_rate_update(<dod_kalman_cv2*>NULL, x, P, y, H, Si, var)
    else:
        _dod_meas_rate_update(<dod_kalman_cv3*>NULL, x, P, y, H, Si, var)
cdef inline void _cv_ekf_update_cov(const _dim* v, double* x, double* P, const double* y, const double* J,
                                    const double* Si, const double* R) noexcept nogil:
    """_cv_ekf_update with a detection's own noise R (d x d)."""
    if _dim is _planar:
        _dod_meas_update_cov(<dod_kalman_cv2*>NULL, x, P, y, J, Si, R)
    else:
        _dod_meas_update_cov(<dod_kalman_cv3*>NULL, x, P, y, J, Si, R)


cdef inline void _motion_birth(const _dim* v, const _motion* m, const dod_tracker* t, size_t i, const double* x,
                               const double* P) noexcept nogil:
    """A new row i's model state from its x and P: every IMM model starts from them."""
    cdef int d = _d(v)
    if _motion is _imm:
        dod_imm_birth(&t.imm, i, x, P, d)


# --- measurement ----------------------------------------------------------

cdef inline void _meas_gate_row(const _dim* v, const _meas* s, const dod_tracker* t, _tick* k,
                                size_t ti, double r2) noexcept nogil:
    """Row ti's innovation inverse (k.Si), the half-widths of a Cartesian box
    holding its gate (k.hw) and the widest (k.hm: 0 for a row that cannot
    be gated, k.gateable). Range-bearing: also the predicted measurement
    (k.hp) and its Jacobian (k.J); a track in the sensor's singular zone, or
    with S not positive definite, is not gated."""
    cdef int d = _d(v), n = 2 * d, a, b, m = _m(v, s), hn = _hn(v, s)
    cdef double xb[6]
    cdef double Pb[21]
    cdef const double* x
    cdef const double* P = _row_lend_P(v, t, ti, Pb)
    cdef double S[16]
    cdef double Spos[9]
    cdef double hmax = 0.0, w
    cdef bint ok
    if _meas is _polar or _meas is _doppler or _meas is _polar_cov:     # (_polar_cov: k.sensor's variances are the box's)
        x = _row_lend_x(v, t, ti, xb)
        ok = _meas_linearise(v, s, k, x, P, k.hp + ti * m, k.J + ti * m * hn, S,
                             k.Si + ti * m * m)
        if ok:
            # The box holds the position part's gate: a detection within
            # the whole gate is within its marginal's (S's position block).
            for a in range(d):
                for b in range(d):
                    Spos[a * d + b] = S[a * m + b]
            # (the box reads J's first row: H's first d entries with a range rate)
            hmax = dod_meas_gate_box(k.hp + ti * m, k.J + ti * m * hn, Spos, d, t.gate, k.sensor, k.hw + ti * d)
        else:
            for a in range(d):
                k.hw[ti * d + a] = 0.0
    else:
        ok = dod_kalman_innovation_inverse(P, d, r2, k.Si + ti * d * d)
        for a in range(d):
            # |y_a| <= sqrt(gate * S_aa) bounds the ellipse d2 <= gate.
            w = sqrt(t.gate * (P[dod_kalman_packed_index(a, a, n)] + r2))
            k.hw[ti * d + a] = w
            if w > hmax:
                hmax = w
        if not ok:
            hmax = 0.0
    k.gateable[ti] = ok
    k.hm[ti] = hmax


cdef inline bint _meas_linearise(const _dim* v, const _meas* s, const _tick* k, const double* x, const double* P,
                                 double* h, double* J, double* S, double* Si) noexcept nogil:
    """Range-bearing: the predicted measurement h of the CV state x, packed P,
    its Jacobian J, innovation covariance S and inverse Si; False in the
    sensor's singular zone or for S not positive definite (h, J, S, Si
    then partial). With a range rate (_doppler): h[d + 1], J the whole H
    ((d + 1) x 2d), S and Si (d + 1) x (d + 1)."""
    cdef int d = _d(v), n = 2 * d, a, b
    cdef double Ppos[9]
    cdef double Pf[36]
    cdef double var[4]
    if _meas is _doppler:
        if not dod_meas_rate_predict(x, k.sensor, d, h, J):
            return False
        for a in range(n):          # the whole P, full
            for b in range(n):
                Pf[a * n + b] = P[dod_kalman_packed_index(a, b, n)]
        dod_meas_rate_variances(k.sensor, d, var)
        dod_meas_rate_innovation_cov(Pf, n, d + 1, J, var, S)
        return dod_meas_rate_inverse(S, d + 1, Si)
    else:
        if not dod_meas_predict(x, k.sensor, d, h, J):
            return False
        for a in range(d):          # the position block, full
            for b in range(d):
                Ppos[a * d + b] = P[dod_kalman_packed_index(a, b, 2 * d)]
        dod_meas_innovation_cov(Ppos, d, d, J, k.sensor.var, S)
        return dod_kalman_inverse_spd(S, d, Si)


cdef inline bint _meas_linearise_cov(const _dim* v, const _tick* k, const double* x, const double* P,
                                     const double* R, double* h, double* J, double* S,
                                     double* Si) noexcept nogil:
    """_meas_linearise with a detection's own noise R (d x d) in place of
    the sensor's variances."""
    cdef int d = _d(v), a, b
    cdef double Ppos[9]
    if not dod_meas_predict(x, k.sensor, d, h, J):
        return False
    for a in range(d):
        for b in range(d):
            Ppos[a * d + b] = P[dod_kalman_packed_index(a, b, 2 * d)]
    dod_meas_innovation_cov_full(Ppos, d, d, J, R, S)
    return dod_kalman_inverse_spd(S, d, Si)


cdef inline bint _meas_innovation(const _dim* v, const _meas* s, const _scratch* e, const dod_tracker* t,
                                  const _tick* k, size_t ti, int32_t j, const double* zj, double* y) noexcept nogil:
    """y = the innovation of row ti's prediction by detection j (Cartesian: at
    zj). Cartesian: False as soon as an axis leaves the row's box (k.hw, of
    element type e; y then partial)."""
    cdef int d = _d(v), a
    if _meas is _polar or _meas is _polar_cov:      # in measurement space, the bearing wrapped
        dod_meas_innovation(k.zm + j * d, k.hp + ti * d, d, y)
    elif _meas is _doppler:
        dod_meas_rate_innovation(k.zm + j * (d + 1), k.hp + ti * (d + 1), d, y)
    else:
        for a in range(d):
            y[a] = zj[a] - _row_x(v, t, ti, a)
            if y[a] > _hw(e, k, ti * d + a) or y[a] < -_hw(e, k, ti * d + a):
                return False
    return True


cdef inline double _meas_d2(const _dim* v, const _meas* s, const double* Si, const double* y) noexcept nogil:
    """y' Si y of an innovation y (_meas_innovation's) and its inverse Si
    (_meas_pair_inverse's)."""
    if _meas is _doppler:
        return dod_meas_mahalanobis2(y, Si, _m(v, s))
    else:
        return dod_kalman_mahalanobis2(y, Si, _m(v, s))


cdef inline const double* _meas_pair_inverse(const _dim* v, const _meas* s, const _scratch* e,
                                             const dod_tracker* t, const _tick* k, size_t ti, int32_t j,
                                             double* Si) noexcept nogil:
    """The innovation inverse of row ti's prediction (the combined one with
    the IMM: the gate's and the score's) and detection j: the
    row's own (k.Si, _meas_gate_row's, of element type e: a float one
    widened into Si, m x m), or with the detection's own noise
    (H P H' + R_j)^-1 written into Si (d x d); NULL when that S is not
    positive definite (not for a live row's P and a checked R_j)."""
    cdef int d = _d(v), a, b
    cdef double Ppos[9]
    cdef double S[9]
    cdef double Pb[21]
    cdef const double* P
    if _meas is _cartesian_cov:
        P = _row_lend_P(v, t, ti, Pb)
        if not dod_kalman_innovation_inverse_cov(P, d, k.R + <size_t>j * d * d, Si):
            return NULL
        return Si
    elif _meas is _polar_cov:           # J P J' + R_j with the row's Jacobian
        P = _row_lend_P(v, t, ti, Pb)
        for a in range(d):
            for b in range(d):
                Ppos[a * d + b] = P[dod_kalman_packed_index(a, b, 2 * d)]
        dod_meas_innovation_cov_full(Ppos, d, d, k.J + ti * d * d, k.R + <size_t>j * d * d, S)
        if not dod_kalman_inverse_spd(S, d, Si):
            return NULL
        return Si
    else:
        return _row_inverse(e, k, ti, _m(v, s), Si)


cdef inline void _meas_update(const _dim* v, const _motion* m, const _meas* s, const dod_tracker* t,
                              const _tick* k, size_t ti, int32_t j, double r2) noexcept nogil:
    """Row ti's update with detection j: its x, P loaded, updated by the
    model's kernel and stored back (a row a kernel leaves alone keeps its bits)."""
    cdef int d = _d(v), n = 2 * d, a
    cdef double Si[9]
    cdef double y[4]
    cdef double ll[DOD_IMM_MODELS]
    cdef double xb[6]
    cdef double Pb[21]
    cdef double* x = _row_lend_x(v, t, ti, xb)
    cdef double* P = _row_lend_P(v, t, ti, Pb)
    if _meas is _doppler:
        if _motion is _imm:         # each model's own EKF (its prediction differs), then mu
            for a in range(DOD_IMM_MODELS):
                ll[a] = dod_ekf_rate_update(dod_imm_model_x(&t.imm, ti, a, d), dod_imm_model_P(&t.imm, ti, a, d),
                                            n + 1, k.zm + j * (d + 1), d, k.sensor)
            dod_imm_weigh(&t.imm, ti, ll, x, P, d)
        else:
            dod_meas_rate_innovation(k.zm + j * (d + 1), k.hp + ti * (d + 1), d, y)
            _cv_rate_update(v, k, x, P, y, k.J + ti * (d + 1) * n, k.Si + ti * (d + 1) * (d + 1))
    elif _meas is _polar:
        _motion_ekf_update(v, m, t, k, ti, j, x, P)
    elif _meas is _polar_cov:
        if _motion is _imm:             # each model's own EKF update with R_j, then mu and the combination
            for a in range(DOD_IMM_MODELS):
                ll[a] = dod_ekf_position_update_cov(dod_imm_model_x(&t.imm, ti, a, d),
                                                    dod_imm_model_P(&t.imm, ti, a, d), 2 * d + 1, k.zm + j * d,
                                                    d, k.sensor, k.R + <size_t>j * d * d)
            dod_imm_weigh(&t.imm, ti, ll, x, P, d)
        elif _meas_pair_inverse(v, s, <_f64*>NULL, t, k, ti, j, Si) != NULL:    # (its own: k.Si not read)
            dod_meas_innovation(k.zm + j * d, k.hp + ti * d, d, y)
            _cv_ekf_update_cov(v, x, P, y, k.J + ti * d * d, Si, k.R + <size_t>j * d * d)
    elif _meas is _cartesian_cov:
        if _motion is _imm:     # every model with R_j, then the probabilities and the combination
            dod_imm_update_cov(&t.imm, ti, k.z + j * d, k.R + <size_t>j * d * d, x, P, d)
        elif _meas_pair_inverse(v, s, <_f64*>NULL, t, k, ti, j, Si) != NULL:    # (its own: k.Si not read)
            dod_kalman_update_cov(x, P, k.z + j * d, Si, d, k.R + <size_t>j * d * d)
    else:
        _motion_update(v, m, t, ti, k.z + j * d, k.Si + ti * d * d, r2, x, P)
    _row_return(v, t, ti, x, P)


cdef inline void _meas_birth_cov(const _dim* v, const _meas* s, const _tick* k, int32_t j,
                                 double* x, double* P, double v0sq) noexcept nogil:
    """Range-bearing: the position block of a birth's packed covariance P
    from detection j's converted covariance, its upper triangle (in 3-D
    C[a, b] and C[b, a] may differ in the last bit: the packed P keeps one,
    so the track starts symmetric). With a range rate also the velocity
    x[d:2d] and its block (dod_meas_rate_birth; v0sq the birth's velocity
    variance). A detection with its own noise: R_j. Cartesian: nothing
    (the birth's diagonal stays)."""
    cdef int d = _d(v), a, b, mm = _m(v, s)
    cdef double p[3]
    cdef double C[9]
    if _meas is _cartesian_cov:
        for a in range(d):
            for b in range(a, d):
                P[dod_kalman_packed_index(a, b, 2 * d)] = k.R[(<size_t>j * d + a) * d + b]
    elif _meas is _polar_cov:
        dod_meas_to_cartesian_cov(k.zm + <size_t>j * d, k.sensor, d, k.R + <size_t>j * d * d, p, C)
        for a in range(d):
            for b in range(a, d):
                P[dod_kalman_packed_index(a, b, 2 * d)] = C[a * d + b]
    elif _meas is _polar or _meas is _doppler:
        dod_meas_to_cartesian(k.zm + <size_t>j * mm, k.sensor, d, p, C)
        for a in range(d):
            for b in range(a, d):
                P[dod_kalman_packed_index(a, b, 2 * d)] = C[a * d + b]
    if _meas is _doppler:
        dod_meas_rate_birth(k.zm + <size_t>j * mm, k.sensor, d, v0sq, x + d, C)
        for a in range(d):
            for b in range(a, d):
                P[dod_kalman_packed_index(d + a, d + b, 2 * d)] = C[a * d + b]
