# dod/tracker/measurement.pxd: range-bearing(-elevation) measurements of a
# sensor at a known position: the extended Kalman filter's algebra, as inline
# nogil kernels on one track's state (no allocation, no GIL, no checks).
#
#     from dod.tracker.measurement cimport dod_sensor, dod_ekf_update, ...
#
# Measurement of dimension d = 2: (range, bearing), d = 3: (range, bearing,
# elevation), of the position p = x[0:d] seen from the sensor at s:
# not run: the measurement function, formulas
#     range     = |p - s|
#     bearing   = atan2(p_y - s_y, p_x - s_x)                  in (-pi, pi]
#     elevation = atan2(p_z - s_z, hypot(p_x - s_x, p_y - s_y)) in [-pi/2, pi/2]
# with independent Gaussian noise of variances var[0:d]. The state x has n
# entries (the position first: any motion model that keeps x[0:d] the
# position, so the IMM's models too) and covariance P[n * n], row-major and
# symmetric (_dod_meas_update also takes the constant-velocity state's packed
# P, kalman.pxd's shapes); H = [J 0] with J = dh/dp (d x d) at the predicted
# position.
#
# Why an EKF and not unbiased converted measurements: the tick gates every
# track against many candidate detections. With the EKF the innovation
# covariance S = J P J' + R belongs to the track (one inverse per track and
# scan, as in the Cartesian tick), and a candidate pair costs a subtraction,
# a bearing wrap and y' Si y. Converted measurements carry a covariance per
# detection, so S, its inverse and its determinant would belong to each
# (track, detection) pair: a 2x2/3x3 inverse per gated candidate. At radar
# accuracies (cross-range error r * sigma_bearing much smaller than the
# range) the EKF's linearisation error is negligible; converted
# measurements are used where they are the right tool: to start a track
# from one detection (dod_meas_to_cartesian).
#
# Near the sensor the model is singular (the bearing of a point at the
# sensor is undefined; in 3-D, of a point straight above it):
# dod_meas_predict refuses a position within DOD_MEAS_MIN_RANGE2 (squared
# metres: 1e-12, one micrometre) horizontally of the sensor, and the tick
# then does not gate that track against the scan (it coasts). A birth at
# range r gets cross-range standard deviations max(r sigma_angle, sigma_range)
# so its covariance stays positive definite at any range, zero included.
#
# The tracker's kernel set (dod/tracker/_model.pxd) for measurement _polar:
# gate row dod_meas_predict, dod_meas_innovation_cov, dod_kalman_inverse_spd
# and dod_meas_gate_box; pair innovation dod_meas_innovation; update
# _dod_meas_update on the track's packed P (IMM: dod_ekf_position_update per
# model); birth covariance dod_meas_to_cartesian.
#
# Range rate (Doppler; rate_var > 0): a measurement gains a last entry, the
# radial velocity rr = (p - s) . v / |p - s| (m/s) of a state whose
# velocity v is x[d:2d] (constant velocity; the IMM's models too) seen from
# a static sensor, so m = d + 1 values per measurement, whatever the
# sensor's column order. Its row of H has a velocity block: d rr/dp =
# (v - rr u) / r, d rr/dv = u (u = (p - s) / r the line of sight), so the
# update is the full EKF with H (m x n) = [[J 0], [d rr/dp, u, 0]]
# (dod_meas_rate_*; dod_ekf_rate_update per IMM model). The score compares
# a density in (range, bearing[, elevation], range rate) space: per unit
# area/volume after ln |det dp/dz| (the range rate maps to itself), and per
# m/s of range rate, which the clutter density (per unit area/volume) does
# not have: clutter is taken uniform in range rate over an interval of
# width w = exp(rate_log_span) (the sensor's unambiguous Doppler interval),
# a density of clutter_density / w per unit area/volume and m/s, so the
# score's ln p(z) - ln(clutter_density / w) adds ln w (a sensor's own
# clutter density per measurement volume the same: its range rate is
# uniform over w too). A birth from one detection takes the radial
# velocity rr u (variance rate_var along u, the birth's v0^2 across it).
#
# Contract (checks the caller owns): d is 2 or 3; d <= n <= DOD_MEAS_MAXN;
# P is symmetric (the update keeps it so, exactly); var > 0; the arrays do
# not overlap. Thread-safety: pure functions of their arguments.

from libc.math cimport sqrt, atan2, cos, sin, fmod, log, M_PI, INFINITY

from dod.tracker.kalman cimport (dod_kalman_inverse_spd, dod_kalman_log_likelihood, dod_kalman_shape,
                                 dod_kalman_shaped, _dod_kalman_at, _dod_kalman_dims, _dod_kalman_mirror)

cdef enum:
    DOD_MEAS_MAXN = 8           # largest state dimension an update takes (IMM's coordinated turn: 7 in 3-D)


ctypedef struct dod_sensor:
    double pos[3]               # sensor position (the third entry unused in 2-D)
    double var[3]               # noise variances: range (m^2), bearing and elevation (rad^2)
    # The sensor's own detection rates (0: the configuration's), resolved
    # once per scan into the tick's frame (_tick.pyx):
    double pd                   # detection probability, in (0, 1)
    double clutter              # false detections per measurement volume a scan (m rad, 2-D; m rad^2, 3-D)
    double rate_var             # range rate noise variance ((m/s)^2); 0: the scan has no range rate
    double rate_log_span        # ln of the clutter's range-rate interval (m/s): the score's density unit


cdef inline double dod_meas_min_range2() noexcept nogil:
    """DOD_MEAS_MIN_RANGE2: squared (horizontal) range below which the model is singular."""
    return 1e-12


cdef inline double dod_wrap_angle(double a) noexcept nogil:
    """a wrapped into [-pi, pi)."""
    if a >= -M_PI and a < M_PI:
        return a
    a = fmod(a + M_PI, 2.0 * M_PI)
    if a < 0.0:
        a += 2.0 * M_PI
    return a - M_PI


cdef inline bint dod_meas_predict(const double* x, const dod_sensor* s, int d, double* h,
                                  double* J) noexcept nogil:
    """Predicted measurement h[d] of position x[0:d] and its Jacobian J
    (d x d, row-major, dh/dp); False (h, J unspecified) within the singular
    zone of the sensor (see the header)."""
    cdef double dx = x[0] - s.pos[0], dy = x[1] - s.pos[1], dz, g2, g, r2, r
    g2 = dx * dx + dy * dy
    if not g2 > dod_meas_min_range2():
        return False
    if d == 2:
        r = sqrt(g2)
        h[0] = r
        h[1] = atan2(dy, dx)
        J[0] = dx / r
        J[1] = dy / r
        J[2] = -dy / g2
        J[3] = dx / g2
        return True
    dz = x[2] - s.pos[2]
    g = sqrt(g2)
    r2 = g2 + dz * dz
    r = sqrt(r2)
    h[0] = r
    h[1] = atan2(dy, dx)
    h[2] = atan2(dz, g)
    J[0] = dx / r
    J[1] = dy / r
    J[2] = dz / r
    J[3] = -dy / g2
    J[4] = dx / g2
    J[5] = 0.0
    J[6] = -dx * dz / (r2 * g)
    J[7] = -dy * dz / (r2 * g)
    J[8] = g / r2
    return True


cdef inline void _dod_meas_jpj(const double* P, int n, int d, const double* J, double* S) noexcept nogil:
    """S = J P[:d, :d] J' (d x d, exactly symmetric)."""
    cdef double JP[9]
    cdef int i, j, k
    cdef double acc
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += J[i * d + k] * P[k * n + j]
            JP[i * d + j] = acc
    for i in range(d):
        for j in range(i, d):
            acc = 0.0
            for k in range(d):
                acc += JP[i * d + k] * J[j * d + k]
            S[i * d + j] = acc
            S[j * d + i] = acc


cdef inline void dod_meas_innovation_cov(const double* P, int n, int d, const double* J,
                                         const double* var, double* S) noexcept nogil:
    """S = J P[:d, :d] J' + diag(var) (d x d, exactly symmetric)."""
    cdef int i
    _dod_meas_jpj(P, n, d, J, S)
    for i in range(d):
        S[i * d + i] += var[i]


cdef inline void dod_meas_innovation_cov_full(const double* P, int n, int d, const double* J,
                                              const double* R, double* S) noexcept nogil:
    """S = J P[:d, :d] J' + R for a detection's own noise R (d x d,
    row-major, exactly symmetric)."""
    cdef int i, j
    _dod_meas_jpj(P, n, d, J, S)
    for i in range(d):
        for j in range(d):
            S[i * d + j] += R[i * d + j]


cdef inline void dod_meas_innovation(const double* z, const double* h, int d, double* y) noexcept nogil:
    """y = z - h, the bearing difference wrapped into [-pi, pi) (elevations
    lie in [-pi/2, pi/2]: their difference needs no wrap)."""
    y[0] = z[0] - h[0]
    y[1] = dod_wrap_angle(z[1] - h[1])
    if d == 3:
        y[2] = z[2] - h[2]


cdef inline double dod_meas_gate_box(const double* h, const double* J, const double* S, int d,
                                     double gate, const dod_sensor* s, double* hw) noexcept nogil:
    """Half-widths hw[d] of a Cartesian box around the predicted position that
    holds every detection with y' S^-1 y <= gate (conservative, for the
    spatial grid); returns the widest.

    Inside the gate |dr| <= hr = sqrt(gate S_rr), |dbearing| <= hb and
    |delevation| <= he likewise, so a detection lies at range r in
    h0 +- hr and at an angle theta <= ang = hb (+ he) from the predicted
    direction u (J's first row). Relative to the prediction it is a u + b t
    (t a unit vector across u) with |a| <= A = hr + h0 ang^2 / 2 (1 - cos
    theta <= theta^2 / 2) and |b| <= B = (h0 + hr) ang (sin theta <= theta),
    for theta <= pi/2; along axis k that is at most A |u_k| + B sqrt(1 -
    u_k^2). A wider angle (ang > 1.5) falls back to the ball of radius
    hr + h0 min(ang, 2) (a chord is at most 2). A relative 1e-9 (plus 1e-9
    of the coordinates' size) covers the rounding of the detections'
    Cartesian positions."""
    cdef double ang = sqrt(gate * S[d + 1])
    cdef double hr = sqrt(gate * S[0]), A, B, scale, v, u, widest = 0.0
    cdef int i
    if d == 3:
        ang += sqrt(gate * S[8])
    scale = h[0] + 1.0
    for i in range(d):
        scale += s.pos[i] if s.pos[i] > 0.0 else -s.pos[i]
    scale *= 1e-9
    if ang > 1.5:
        v = (hr + h[0] * (ang if ang < 2.0 else 2.0)) * (1.0 + 1e-9) + scale
        for i in range(d):
            hw[i] = v
        return v
    A = hr + 0.5 * h[0] * ang * ang
    B = (h[0] + hr) * ang
    for i in range(d):
        u = J[i]
        v = 1.0 - u * u
        v = (A * (u if u > 0.0 else -u) + B * sqrt(v if v > 0.0 else 0.0)) * (1.0 + 1e-9) + scale
        hw[i] = v
        if v > widest:
            widest = v
    return widest


cdef inline void dod_meas_update(double* x, double* P, int n, int d, const double* y,
                                 const double* J, const double* Si, const double* var) noexcept nogil:
    """EKF update with innovation y (dod_meas_innovation), Jacobian J and
    Si = S^-1 of the same prediction: K = P H' Si, x += K y, Joseph form
    P = (I - K H) P (I - K H)' + K R K', H = [J 0]; P full, symmetric on
    return."""
    cdef dod_kalman_shape shape
    shape.n = n
    shape.d = d
    _dod_meas_update(&shape, x, P, y, J, Si, var)


cdef inline void _dod_meas_gain_step(const dod_kalman_shaped* shape, double* x, const double* P,
                                     const double* y, const double* J, const double* Si, double* K,
                                     double* G, double* M) noexcept nogil:
    """The EKF update's first half, the same whatever R: the gain K = P H' Si,
    x += K y, G = K J and M = A P (A = I - K H). P is only read."""
    cdef double PH[DOD_MEAS_MAXN * 3]
    cdef int i, j, k, n, d
    cdef double acc
    _dod_kalman_dims(shape, &n, &d)
    for i in range(n):                  # PH = P[:, :d] J'
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += P[_dod_kalman_at(shape, i, k, n)] * J[j * d + k]
            PH[i * d + j] = acc
    for i in range(n):                  # K = PH Si
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += PH[i * d + k] * Si[k * d + j]
            K[i * d + j] = acc
    for i in range(n):
        acc = 0.0
        for j in range(d):
            acc += K[i * d + j] * y[j]
        x[i] += acc
    for i in range(n):                  # G = K J: the first d columns of K H
        for j in range(d):
            acc = 0.0
            for k in range(d):
                acc += K[i * d + k] * J[k * d + j]
            G[i * d + j] = acc
    # A = I - K H differs from I only in its first d columns (-G), so
    # A P = P - G P[:d, :] and M A' = M - M[:, :d] G'.
    for i in range(n):                  # M = A P
        for j in range(n):
            acc = P[_dod_kalman_at(shape, i, j, n)]
            for k in range(d):
                acc -= G[i * d + k] * P[_dod_kalman_at(shape, k, j, n)]
            M[i * n + j] = acc


cdef inline void _dod_meas_update(const dod_kalman_shaped* shape, double* x, double* P, const double* y,
                                  const double* J, const double* Si, const double* var) noexcept nogil:
    """dod_meas_update with n and d from `shape` (kalman.pxd: constants for
    the constant-velocity shapes, whose P is packed, as the tracker's rows)
    and P in the shape's layout. Every read of P comes before the first
    write."""
    cdef double K[DOD_MEAS_MAXN * 3]
    cdef double G[DOD_MEAS_MAXN * 3]
    cdef double M[DOD_MEAS_MAXN * DOD_MEAS_MAXN]
    cdef int i, j, k, n, d
    cdef double acc
    _dod_kalman_dims(shape, &n, &d)
    _dod_meas_gain_step(shape, x, P, y, J, Si, K, G, M)
    for i in range(n):                  # P = M A' + K R K' (upper triangle)
        for j in range(i, n):
            acc = M[i * n + j]
            for k in range(d):
                acc += var[k] * K[i * d + k] * K[j * d + k] - M[i * n + k] * G[j * d + k]
            P[_dod_kalman_at(shape, i, j, n)] = acc
    _dod_kalman_mirror(shape, P)


cdef inline void _dod_meas_update_cov(const dod_kalman_shaped* shape, double* x, double* P, const double* y,
                                      const double* J, const double* Si, const double* R) noexcept nogil:
    """_dod_meas_update with a detection's own noise R (d x d, row-major,
    symmetric) in place of diag(var)."""
    cdef double K[DOD_MEAS_MAXN * 3]
    cdef double KR[DOD_MEAS_MAXN * 3]
    cdef double G[DOD_MEAS_MAXN * 3]
    cdef double M[DOD_MEAS_MAXN * DOD_MEAS_MAXN]
    cdef int i, j, k, l, n, d
    cdef double acc
    _dod_kalman_dims(shape, &n, &d)
    _dod_meas_gain_step(shape, x, P, y, J, Si, K, G, M)
    for i in range(n):                  # K R
        for k in range(d):
            acc = 0.0
            for l in range(d):
                acc += K[i * d + l] * R[l * d + k]
            KR[i * d + k] = acc
    for i in range(n):                  # P = M A' + K R K' (upper triangle)
        for j in range(i, n):
            acc = M[i * n + j]
            for k in range(d):
                acc += KR[i * d + k] * K[j * d + k] - M[i * n + k] * G[j * d + k]
            P[_dod_kalman_at(shape, i, j, n)] = acc
    _dod_kalman_mirror(shape, P)


cdef inline double dod_ekf_update(double* x, double* P, int n, int d, const double* z,
                                  const dod_sensor* s, double* Si) noexcept nogil:
    """The whole EKF step of one state with one measurement z[d] of sensor s:
    predict the measurement, innovation covariance and inverse (into Si,
    d x d, for the caller's likelihood: dod_kalman_log_likelihood(d2, Si, d)),
    wrapped innovation, Joseph update. Returns d2 = y' Si y of the innovation
    before the update, or -1.0 with x and P unchanged when the measurement
    cannot be used (position in the singular zone, S not positive definite).
    This is the routine a per-model (IMM) update calls."""
    cdef double h[3]
    cdef double J[9]
    cdef double S[9]
    cdef double y[3]
    cdef double d2 = 0.0
    cdef int i, j
    if not dod_meas_predict(x, s, d, h, J):
        return -1.0
    dod_meas_innovation_cov(P, n, d, J, s.var, S)
    if not dod_kalman_inverse_spd(S, d, Si):
        return -1.0
    dod_meas_innovation(z, h, d, y)
    for i in range(d):
        for j in range(d):
            d2 += y[i] * Si[i * d + j] * y[j]
    dod_meas_update(x, P, n, d, y, J, Si, s.var)
    return d2


cdef inline double dod_ekf_position_update(double* x, double* P, int n, const double* z, int d,
                                           const dod_sensor* s) noexcept nogil:
    """dod_ekf_update with the contract of the IMM's per-model position update
    (dod/tracker/imm.pxd dod_imm_position_update): returns ln N(y; 0, S), the
    measurement-space density of the prediction (within one track every model
    sees the same measurement, so the unit cancels in the model
    probabilities), or -INFINITY with x and P unchanged."""
    cdef double Si[9]
    cdef double d2 = dod_ekf_update(x, P, n, d, z, s, Si)
    if d2 < 0.0:
        return -INFINITY
    return dod_kalman_log_likelihood(d2, Si, d)


cdef inline double dod_ekf_position_update_cov(double* x, double* P, int n, const double* z, int d,
                                               const dod_sensor* s, const double* R) noexcept nogil:
    """dod_ekf_position_update with the measurement's own noise R (d x d,
    row-major, symmetric) in place of the sensor's variances."""
    cdef double h[3]
    cdef double J[9]
    cdef double S[9]
    cdef double Si[9]
    cdef double y[3]
    cdef double d2 = 0.0
    cdef int i, j
    cdef dod_kalman_shape shape
    if not dod_meas_predict(x, s, d, h, J):
        return -INFINITY
    dod_meas_innovation_cov_full(P, n, d, J, R, S)
    if not dod_kalman_inverse_spd(S, d, Si):
        return -INFINITY
    dod_meas_innovation(z, h, d, y)
    for i in range(d):
        for j in range(d):
            d2 += y[i] * Si[i * d + j] * y[j]
    shape.n = n
    shape.d = d
    _dod_meas_update_cov(&shape, x, P, y, J, Si, R)
    return dod_kalman_log_likelihood(d2, Si, d)


cdef inline void dod_meas_to_cartesian(const double* z, const dod_sensor* s, int d, double* p,
                                       double* C) noexcept nogil:
    """Position p[d] of measurement z seen from s, and its converted
    covariance C (d x d): J R J' with the cross-range standard deviations
    floored at the range's (see the header), so C is positive definite at
    any range. C may be NULL (position only)."""
    cdef double r = z[0], cb = cos(z[1]), sb = sin(z[1]), ce, se, vr = s.var[0], vb, ve
    cdef double u[3]
    cdef double v[3]
    cdef double w[3]
    cdef int i, j
    if d == 2:
        p[0] = s.pos[0] + r * cb
        p[1] = s.pos[1] + r * sb
        if C == NULL:
            return
        vb = r * r * s.var[1]
        if vb < vr:
            vb = vr
        C[0] = vr * cb * cb + vb * sb * sb
        C[1] = (vr - vb) * cb * sb
        C[2] = C[1]
        C[3] = vr * sb * sb + vb * cb * cb
        return
    ce = cos(z[2])
    se = sin(z[2])
    p[0] = s.pos[0] + r * ce * cb
    p[1] = s.pos[1] + r * ce * sb
    p[2] = s.pos[2] + r * se
    if C == NULL:
        return
    # radial, bearing and elevation unit vectors (orthonormal)
    u[0] = ce * cb
    u[1] = ce * sb
    u[2] = se
    v[0] = -sb
    v[1] = cb
    v[2] = 0.0
    w[0] = -se * cb
    w[1] = -se * sb
    w[2] = ce
    vb = r * r * ce * ce * s.var[1]
    if vb < vr:
        vb = vr
    ve = r * r * s.var[2]
    if ve < vr:
        ve = vr
    for i in range(3):
        for j in range(3):
            C[i * 3 + j] = vr * u[i] * u[j] + vb * v[i] * v[j] + ve * w[i] * w[j]


cdef inline void dod_meas_to_cartesian_cov(const double* z, const dod_sensor* s, int d, const double* R,
                                           double* p, double* C) noexcept nogil:
    """dod_meas_to_cartesian for a measurement with its own noise R (d x d,
    row-major, symmetric, in the kernels' column order): C = U L U' with U
    the radial, bearing (and elevation) unit vectors and L = D R D, D =
    diag(1, r cos(elevation)[, r]) (the noise in metres along them), its
    cross-range variances floored at its range variance as the sensor's
    (a diagonal R gives dod_meas_to_cartesian's C)."""
    cdef double r = z[0], cb = cos(z[1]), sb = sin(z[1]), ce = 1.0, se = 0.0, acc
    cdef double D[3]
    cdef double U[9]                    # column a: unit vector a
    cdef double L[9]
    cdef double UL[9]
    cdef int a, b, i, j
    dod_meas_to_cartesian(z, s, d, p, NULL)
    if d == 3:
        ce = cos(z[2])
        se = sin(z[2])
    D[0] = 1.0
    D[1] = r * ce
    D[2] = r
    if d == 2:
        U[0] = cb
        U[1] = -sb
        U[2] = sb
        U[3] = cb
    else:
        U[0] = ce * cb
        U[1] = -sb
        U[2] = -se * cb
        U[3] = ce * sb
        U[4] = cb
        U[5] = -se * sb
        U[6] = se
        U[7] = 0.0
        U[8] = ce
    for a in range(d):
        for b in range(d):
            L[a * d + b] = D[a] * R[a * d + b] * D[b]
    for a in range(1, d):
        if L[a * d + a] < L[0]:
            L[a * d + a] = L[0]
    for i in range(d):                  # U L
        for b in range(d):
            acc = 0.0
            for a in range(d):
                acc += U[i * d + a] * L[a * d + b]
            UL[i * d + b] = acc
    for i in range(d):                  # (U L) U', exactly symmetric
        for j in range(i, d):
            acc = 0.0
            for b in range(d):
                acc += UL[i * d + b] * U[j * d + b]
            C[i * d + j] = acc
            C[j * d + i] = acc


cdef inline double dod_meas_log_jacobian(const double* z, int d) noexcept nogil:
    """ln |det dp/dz| of the polar-to-Cartesian map at z: ln r (2-D), ln(r^2
    cos(elevation)) (3-D), r floored at 1e-6 m and cos at 1e-12. A density
    in measurement space minus this is the density per unit area/volume
    (the unit of the clutter density the track score compares with)."""
    cdef double r = z[0] if z[0] > 1e-6 else 1e-6, c
    if d == 2:
        return log(r)
    c = cos(z[2])
    if c < 1e-12:
        c = 1e-12
    return log(r * r * c)


# --- range rate (Doppler) -------------------------------------------------

cdef enum:
    DOD_MEAS_MAXM = 4           # most measurement values: range, bearing, elevation, range rate


cdef inline bint dod_meas_rate_predict(const double* x, const dod_sensor* s, int d, double* h,
                                       double* H) noexcept nogil:
    """Predicted measurement h[d + 1] (range, bearing[, elevation], range
    rate) of the constant-velocity state x[2d] and its Jacobian H ((d + 1)
    x 2d, row-major); False in the sensor's singular zone (the header)."""
    cdef double J[9]
    cdef double u[3]
    cdef double r = 0.0, rr = 0.0
    cdef int a, b, m = d + 1, n = 2 * d
    if not dod_meas_predict(x, s, d, h, J):
        return False
    for a in range(d):
        u[a] = x[a] - s.pos[a]
        r += u[a] * u[a]
    r = sqrt(r)
    for a in range(d):
        u[a] = u[a] / r
        rr += u[a] * x[d + a]
    h[d] = rr
    for a in range(d):
        for b in range(n):
            H[a * n + b] = J[a * d + b] if b < d else 0.0
        H[d * n + a] = (x[d + a] - rr * u[a]) / r
        H[d * n + d + a] = u[a]
    return True


cdef inline void dod_meas_rate_innovation_cov(const double* P, int n, int m, const double* H,
                                              const double* var, double* S) noexcept nogil:
    """S = H P H' + diag(var) (m x m, exactly symmetric) for a full P (n x n)."""
    cdef double HP[DOD_MEAS_MAXM * DOD_MEAS_MAXN]
    cdef int i, j, k
    cdef double acc
    for i in range(m):
        for j in range(n):
            acc = 0.0
            for k in range(n):
                acc += H[i * n + k] * P[k * n + j]
            HP[i * n + j] = acc
    for i in range(m):
        for j in range(i, m):
            acc = 0.0
            for k in range(n):
                acc += HP[i * n + k] * H[j * n + k]
            S[i * m + j] = acc
            S[j * m + i] = acc
        S[i * m + i] += var[i]


cdef inline bint dod_meas_rate_inverse(const double* S, int m, double* Si) noexcept nogil:
    """Si = S^-1 of a symmetric m x m S (m <= DOD_MEAS_MAXM) through its
    Cholesky factor, exactly symmetric; False when S is not positive
    definite (Si then partial)."""
    cdef double L[DOD_MEAS_MAXM * DOD_MEAS_MAXM]
    cdef double W[DOD_MEAS_MAXM * DOD_MEAS_MAXM]
    cdef int i, j, k
    cdef double acc
    for i in range(m):                  # S = L L'
        for j in range(i + 1):
            acc = S[i * m + j]
            for k in range(j):
                acc -= L[i * m + k] * L[j * m + k]
            if i == j:
                if not acc > 0.0:
                    return False
                L[i * m + i] = sqrt(acc)
            else:
                L[i * m + j] = acc / L[j * m + j]
    for j in range(m):                  # W = L^-1 (lower triangular)
        for i in range(m):
            if i < j:
                W[i * m + j] = 0.0
            elif i == j:
                W[i * m + i] = 1.0 / L[i * m + i]
            else:
                acc = 0.0
                for k in range(j, i):
                    acc -= L[i * m + k] * W[k * m + j]
                W[i * m + j] = acc / L[i * m + i]
    for i in range(m):                  # Si = W' W
        for j in range(i, m):
            acc = 0.0
            for k in range(j, m):
                acc += W[k * m + i] * W[k * m + j]
            Si[i * m + j] = acc
            Si[j * m + i] = acc
    return True


cdef inline double dod_meas_rate_log_likelihood(double d2, const double* Si, int m) noexcept nogil:
    """ln N(y; 0, S) with y' Si y = d2 for an m x m Si (positive definite):
    -(m ln(2 pi) - ln det(Si) + d2) / 2, det(Si) through its Cholesky factor."""
    cdef double L[DOD_MEAS_MAXM * DOD_MEAS_MAXM]
    cdef double acc, logdet = 0.0
    cdef int i, j, k
    for i in range(m):
        for j in range(i + 1):
            acc = Si[i * m + j]
            for k in range(j):
                acc -= L[i * m + k] * L[j * m + k]
            if i == j:
                L[i * m + i] = sqrt(acc)
                logdet += log(acc)
            else:
                L[i * m + j] = acc / L[j * m + j]
    return -0.5 * (m * 1.8378770664093453 - logdet + d2)


cdef inline double dod_meas_mahalanobis2(const double* y, const double* Si, int m) noexcept nogil:
    """y' Si y for an m x m Si."""
    cdef double acc = 0.0
    cdef int i, j
    for i in range(m):
        for j in range(m):
            acc += y[i] * Si[i * m + j] * y[j]
    return acc


cdef inline void dod_meas_rate_innovation(const double* z, const double* h, int d, double* y) noexcept nogil:
    """y = z - h for the d + 1 values of a range-rate measurement (the bearing wrapped)."""
    dod_meas_innovation(z, h, d, y)
    y[d] = z[d] - h[d]


cdef inline void _dod_meas_rate_update(const dod_kalman_shaped* shape, double* x, double* P, const double* y,
                                       const double* H, const double* Si, const double* var) noexcept nogil:
    """The EKF update with a full H (m = d + 1 rows of n, the shape's n and
    d): K = P H' Si, x += K y, Joseph form P = (I - G) P (I - G)' + K R K'
    with G = K H, R = diag(var); P in the shape's layout (packed for the
    constant-velocity shapes), symmetric on return. Every read of P comes
    before the first write."""
    cdef double PH[DOD_MEAS_MAXN * DOD_MEAS_MAXM]
    cdef double K[DOD_MEAS_MAXN * DOD_MEAS_MAXM]
    cdef double G[DOD_MEAS_MAXN * DOD_MEAS_MAXN]
    cdef double M[DOD_MEAS_MAXN * DOD_MEAS_MAXN]
    cdef int i, j, k, n, d, m
    cdef double acc
    _dod_kalman_dims(shape, &n, &d)
    m = d + 1
    for i in range(n):                  # PH = P H'
        for j in range(m):
            acc = 0.0
            for k in range(n):
                acc += P[_dod_kalman_at(shape, i, k, n)] * H[j * n + k]
            PH[i * m + j] = acc
    for i in range(n):                  # K = PH Si
        for j in range(m):
            acc = 0.0
            for k in range(m):
                acc += PH[i * m + k] * Si[k * m + j]
            K[i * m + j] = acc
    for i in range(n):
        acc = 0.0
        for j in range(m):
            acc += K[i * m + j] * y[j]
        x[i] += acc
    for i in range(n):                  # G = K H
        for j in range(n):
            acc = 0.0
            for k in range(m):
                acc += K[i * m + k] * H[k * n + j]
            G[i * n + j] = acc
    for i in range(n):                  # M = (I - G) P
        for j in range(n):
            acc = P[_dod_kalman_at(shape, i, j, n)]
            for k in range(n):
                acc -= G[i * n + k] * P[_dod_kalman_at(shape, k, j, n)]
            M[i * n + j] = acc
    for i in range(n):                  # P = M (I - G)' + K R K' (upper triangle)
        for j in range(i, n):
            acc = M[i * n + j]
            for k in range(n):
                acc -= M[i * n + k] * G[j * n + k]
            for k in range(m):
                acc += var[k] * K[i * m + k] * K[j * m + k]
            P[_dod_kalman_at(shape, i, j, n)] = acc
    if dod_kalman_shaped is dod_kalman_shape:
        for i in range(n):              # the lower triangle mirrors the upper one
            for j in range(i):
                P[i * n + j] = P[j * n + i]


cdef inline double dod_ekf_rate_update(double* x, double* P, int n, const double* z, int d,
                                       const dod_sensor* s) noexcept nogil:
    """dod_ekf_position_update with a range rate: measurement z[d + 1] of a
    state x[n] (n >= 2d: position, velocity, then entries the measurement
    does not see, as the IMM's turn rate) with full P (n x n). Returns ln
    N(y; 0, S), or -INFINITY with x and P unchanged (singular zone, S not
    positive definite)."""
    cdef double h[DOD_MEAS_MAXM]
    cdef double Hc[DOD_MEAS_MAXM * 6]
    cdef double H[DOD_MEAS_MAXM * DOD_MEAS_MAXN]
    cdef double S[DOD_MEAS_MAXM * DOD_MEAS_MAXM]
    cdef double Si[DOD_MEAS_MAXM * DOD_MEAS_MAXM]
    cdef double y[DOD_MEAS_MAXM]
    cdef double var[DOD_MEAS_MAXM]
    cdef double d2
    cdef dod_kalman_shape shape
    cdef int a, b, m = d + 1
    if not dod_meas_rate_predict(x, s, d, h, Hc):
        return -INFINITY
    for a in range(m):                  # H over the whole state: zeros past the velocity
        for b in range(n):
            H[a * n + b] = Hc[a * 2 * d + b] if b < 2 * d else 0.0
    dod_meas_rate_variances(s, d, var)
    dod_meas_rate_innovation_cov(P, n, m, H, var, S)
    if not dod_meas_rate_inverse(S, m, Si):
        return -INFINITY
    dod_meas_rate_innovation(z, h, d, y)
    d2 = dod_meas_mahalanobis2(y, Si, m)
    shape.n = n
    shape.d = d
    _dod_meas_rate_update(&shape, x, P, y, H, Si, var)
    return dod_meas_rate_log_likelihood(d2, Si, m)


cdef inline void dod_meas_rate_variances(const dod_sensor* s, int d, double* var) noexcept nogil:
    """var[d + 1]: the sensor's noise variances with the range rate's last."""
    cdef int a
    for a in range(d):
        var[a] = s.var[a]
    var[d] = s.rate_var


cdef inline void dod_meas_rate_birth(const double* z, const dod_sensor* s, int d, double v0sq, double* v,
                                     double* C) noexcept nogil:
    """A single-point birth's velocity v[d] from the range rate z[d] of
    measurement z: rr u along the measured line of sight u, with covariance
    C (d x d) = rate_var u u' + v0sq (I - u u') (v0sq: the birth's velocity
    variance across it)."""
    cdef double u[3]
    cdef double cb = cos(z[1]), sb = sin(z[1]), ce = 1.0
    cdef int a, b
    if d == 3:
        ce = cos(z[2])
        u[2] = sin(z[2])
    u[0] = ce * cb
    u[1] = ce * sb
    for a in range(d):
        v[a] = z[d] * u[a]
        for b in range(d):
            C[a * d + b] = (s.rate_var - v0sq) * u[a] * u[b] + (v0sq if a == b else 0.0)

