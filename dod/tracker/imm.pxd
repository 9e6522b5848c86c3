# dod/tracker/imm.pxd: the interacting multiple model filter (Blom and
# Bar-Shalom) of the tracker's motion="imm", as inline nogil kernels on one
# track's row (no allocation, no GIL, no checks).
#
#     from dod.tracker.imm cimport (dod_imm, dod_imm_predict, dod_imm_update,
#                                   dod_imm_birth, dod_imm_position_update,
#                                   dod_imm_weigh, dod_imm_model_x, dod_imm_model_P)
#
# Models (DOD_IMM_MODELS = 3), each over the same state of N = 2d + 1 values
# (position, velocity, turn rate w):
# not run: a table of the three models
#     0, 1  constant velocity, white-acceleration noise q[0] (low), q[1] (high);
#           w is carried unchanged (no noise: the CV models do not turn)
#     2     coordinated turn: the horizontal velocity (axes 0, 1) turns at w,
#           axis 2 (3-D) is constant velocity; white-acceleration noise q[2] on
#           every axis and turn-rate noise qw (w' = w + noise of variance qw dt).
#           The prediction is the extended Kalman filter's: the exact turn for
#           the mean, its Jacobian for the covariance; near w dt = 0 the
#           sin(w dt)/w terms use their Taylor series (|w dt| < 1e-3) so the
#           Jacobian keeps its precision.
#
# One scan of a track (rows of dod_imm's columns mu [3], xm [3, N], Pm [3, N, N]):
# not run: the filter's equations, step by step
#     predict:  c_j = sum_i T[i, j] mu_i (the predicted model probabilities, kept
#               in mu), mixing weights w_ij = T[i, j] mu_i / c_j (mu_i when c_j = 0),
#               x0_j = sum_i w_ij x_i, P0_j = sum_i w_ij (P_i + (x_i - x0_j)(x_i - x0_j)')
#               (computed about model 0's state, see dod_imm_predict),
#               then each model predicts its mixed state; the combination
#               x = sum_j c_j x_j, P = sum_j c_j (P_j + (x_j - x)(x_j - x)') (its
#               position-velocity part) goes to the track's x and P, which
#               gating and association read as for the CV tracker.
#     update:   each model takes the detection through one measurement update
#               (dod_imm_position_update: H = [I 0], noise r2 I, Joseph form),
#               which returns its log-likelihood ln N(y_j; 0, S_j);
#               mu_j = c_j L_j / sum_k c_k L_k (unchanged when every likelihood
#               underflows), and the combination is written again.
#     a miss:   the predicted models and c stay.
#     birth:    every model gets the CV birth's x, P with w = 0 of variance
#               w0var, mu = mu0.
# The numpy reference (dod/tracker/reference_imm.py) states the same
# equations; the tests check them against filterpy's IMMEstimator and a
# hand-written coordinated-turn filter.
#
# The tracker's kernel set (dod/tracker/_model.pxd) for motion _imm: predict
# dod_imm_predict, update dod_imm_update (a sensor's: each model's
# dod_ekf_position_update, then dod_imm_weigh), birth dod_imm_birth. Each
# writes the track's x and P (packed) from the models, whose own columns
# (xm, Pm: full N x N, the turn's prediction forms the unsymmetric F P in
# place) only these kernels read.
#
# Contract (checks the caller owns): d is 2 or 3, N = 2d + 1; rows are in
# range; the covariances are symmetric (every kernel keeps them so, exactly).
# Thread-safety: each kernel writes only its row: different rows may run on
# different threads.

from libc.math cimport sin, cos, exp, INFINITY, isfinite

from dod.tracker.kalman cimport (dod_kalman_position_inverse, dod_kalman_position_update,
                                 dod_kalman_mahalanobis2, dod_kalman_log_likelihood,
                                 dod_kalman_packed_index, dod_kalman_position_inverse_cov,
                                 dod_kalman_position_update_cov)

cdef enum:
    DOD_IMM_MODELS = 3          # CV low, CV high, coordinated turn
    DOD_IMM_MAXN = 7            # 3-D: position, velocity, turn rate


ctypedef struct dod_imm:
    # ZII: models = 0 is "no IMM" (motion="cv").
    int models                  # DOD_IMM_MODELS, or 0
    int N                       # 2 * dim + 1
    double q[DOD_IMM_MODELS]    # white-acceleration noise per model
    double qw                   # turn-rate noise of the turn model
    double w0var                # variance of a newborn track's turn rate
    double trans[DOD_IMM_MODELS * DOD_IMM_MODELS]   # Markov matrix, row-major, rows sum to 1
    bint timed                  # trans is exp(rates dt), made for each tick's dt (dod_imm_transition_for)
    double rates[DOD_IMM_MODELS * DOD_IMM_MODELS]   # switching rates per second (a generator: rows sum to 0)
    double mu0[DOD_IMM_MODELS]  # model probabilities at birth
    double* mu                  # column [capacity, 3]
    double* xm                  # column [capacity, 3, N]
    double* Pm                  # column [capacity, 3, N, N]


cdef inline void _dod_imm_product(const double* A, const double* B, double* C) noexcept nogil:
    """C = A B, DOD_IMM_MODELS square, row-major (C apart from A and B)."""
    cdef int i, j, l
    cdef double v
    for i in range(DOD_IMM_MODELS):
        for j in range(DOD_IMM_MODELS):
            v = 0.0
            for l in range(DOD_IMM_MODELS):
                v += A[i * DOD_IMM_MODELS + l] * B[l * DOD_IMM_MODELS + j]
            C[i * DOD_IMM_MODELS + j] = v


cdef inline void dod_imm_transition_for(dod_imm* m, double dt) noexcept nogil:
    """m.trans = exp(m.rates dt): the Markov matrix of a step of dt seconds
    of the continuous-time chain whose generator is m.rates (dt finite >= 0).

    Scaling and squaring: A = rates dt / 2^s with |A| <= 1/2 (infinity norm),
    exp(A) by its Taylor series to the 16th power (the remainder is below
    1e-19 of the sum), then squared s times. dt = 0 gives the identity
    exactly; for a generator (rows summing to 0, off-diagonal >= 0) every
    row sums to 1 within rounding. Nine numbers a tick, in the struct:
    nothing is allocated."""
    cdef double A[DOD_IMM_MODELS * DOD_IMM_MODELS]
    cdef double E[DOD_IMM_MODELS * DOD_IMM_MODELS]
    cdef double term[DOD_IMM_MODELS * DOD_IMM_MODELS]
    cdef double tmp[DOD_IMM_MODELS * DOD_IMM_MODELS]
    cdef double norm = 0.0, row
    cdef int i, j, p, s = 0
    cdef int NN = DOD_IMM_MODELS * DOD_IMM_MODELS
    for i in range(NN):
        A[i] = m.rates[i] * dt
    for i in range(DOD_IMM_MODELS):
        row = 0.0
        for j in range(DOD_IMM_MODELS):
            row += A[i * DOD_IMM_MODELS + j] if A[i * DOD_IMM_MODELS + j] >= 0.0 else -A[i * DOD_IMM_MODELS + j]
        if row > norm:
            norm = row
    while norm > 0.5 and s < 1100:         # (1100 halvings bring any finite double below 1/2)
        for i in range(NN):
            A[i] *= 0.5
        norm *= 0.5
        s += 1
    for i in range(NN):
        term[i] = A[i]
        E[i] = A[i]
    for i in range(DOD_IMM_MODELS):
        E[i * DOD_IMM_MODELS + i] += 1.0
    for p in range(2, 17):
        _dod_imm_product(term, A, tmp)
        for i in range(NN):
            term[i] = tmp[i] / p
            E[i] += term[i]
    for p in range(s):
        _dod_imm_product(E, E, tmp)
        for i in range(NN):
            E[i] = tmp[i]
    for i in range(NN):
        m.trans[i] = E[i]


cdef inline void _dod_imm_turn_terms(double w, double dt, double s, double co, double* A, double* B,
                                     double* dA, double* dB) noexcept nogil:
    """A = sin(w dt)/w, B = (1 - cos(w dt))/w and their derivatives in w
    (s, co: sin and cos of w dt)."""
    cdef double th = w * dt, t2 = th * th
    if th < 1e-3 and th > -1e-3:
        A[0] = dt * (1.0 - t2 / 6.0 + t2 * t2 / 120.0)
        B[0] = dt * th * (0.5 - t2 / 24.0 + t2 * t2 / 720.0)
        dA[0] = dt * dt * th * (-1.0 / 3.0 + t2 / 30.0)
        dB[0] = dt * dt * (0.5 - t2 / 8.0 + t2 * t2 / 144.0)
        return
    A[0] = s / w
    B[0] = (1.0 - co) / w
    dA[0] = (dt * co * w - s) / (w * w)
    dB[0] = (dt * s * w - (1.0 - co)) / (w * w)


cdef inline void dod_imm_model_predict(double* x, double* P, int d, int model, double dt,
                                       const dod_imm* m) noexcept nogil:
    """Predict one model's state (N = 2d + 1) in place: x = f(x), P = F P F' + Q.

    F differs from I only in a few rows (CV: position += dt velocity; the
    turn: px, py, vx, vy from vx, vy, w, and pz += dt vz in 3-D), so F P is
    formed in place row-wise and (F P) F' column-wise, each entry reading
    only rows (columns) that its pass has not yet written; the upper
    triangle is then mirrored (P stays exactly symmetric)."""
    cdef int N = 2 * d + 1, a, i, j
    cdef double A, B, dA, dB, s, co, vx, vy, q, g0, g1, g2, g3, pv, pu, pw
    if model < 2:
        q = m.q[model]
        for a in range(d):              # position += dt velocity
            x[a] += dt * x[d + a]
        for a in range(d):
            for i in range(N):
                P[a * N + i] += dt * P[(d + a) * N + i]
        for a in range(d):
            for i in range(N):
                P[i * N + a] += dt * P[i * N + d + a]
    else:
        q = m.q[2]
        s = sin(x[N - 1] * dt)
        co = cos(x[N - 1] * dt)
        _dod_imm_turn_terms(x[N - 1], dt, s, co, &A, &B, &dA, &dB)
        vx = x[d]
        vy = x[d + 1]
        # the Jacobian's turn-rate column (rows px, py, vx, vy)
        g0 = dA * vx - dB * vy
        g1 = dB * vx + dA * vy
        g2 = -dt * s * vx - dt * co * vy
        g3 = dt * co * vx - dt * s * vy
        x[0] += A * vx - B * vy
        x[1] += B * vx + A * vy
        x[d] = co * vx - s * vy
        x[d + 1] = s * vx + co * vy
        if d == 3:
            x[2] += dt * x[5]
        for j in range(N):              # F P: rows 0, 1, d, d+1 (and 2) of column j
            pv = P[d * N + j]
            pu = P[(d + 1) * N + j]
            pw = P[(N - 1) * N + j]
            P[j] += A * pv - B * pu + g0 * pw
            P[N + j] += B * pv + A * pu + g1 * pw
            P[d * N + j] = co * pv - s * pu + g2 * pw
            P[(d + 1) * N + j] = s * pv + co * pu + g3 * pw
            if d == 3:
                P[2 * N + j] += dt * P[5 * N + j]
        for i in range(N):              # (F P) F': columns 0, 1, d, d+1 (and 2) of row i
            pv = P[i * N + d]
            pu = P[i * N + d + 1]
            pw = P[i * N + N - 1]
            P[i * N] += A * pv - B * pu + g0 * pw
            P[i * N + 1] += B * pv + A * pu + g1 * pw
            P[i * N + d] = co * pv - s * pu + g2 * pw
            P[i * N + d + 1] = s * pv + co * pu + g3 * pw
            if d == 3:
                P[i * N + 2] += dt * P[i * N + 5]
    for i in range(N):
        for j in range(i):
            P[i * N + j] = P[j * N + i]
    for a in range(d):
        P[a * N + a] += q * dt * dt * dt / 3.0
        P[a * N + d + a] += q * dt * dt / 2.0
        P[(d + a) * N + a] += q * dt * dt / 2.0
        P[(d + a) * N + d + a] += q * dt
    if model == 2:
        P[N * N - 1] += m.qw * dt


cdef inline double dod_imm_position_update(double* x, double* P, int N, const double* z, int d,
                                           double r2) noexcept nogil:
    """The measurement update of one model: position z (H = [I 0], noise r2 I)
    into the state x (N values) and covariance P (N x N), Joseph form, kept
    exactly symmetric (kalman.pxd's position kernels). Returns
    ln N(z - H x; 0, S) of the prediction, or -INFINITY (x, P unchanged) when
    S = H P H' + R is not positive definite. Every model's update goes
    through this one routine: another measurement of the same shape (the
    range-bearing EKF, measurement.pxd dod_ekf_position_update) replaces it."""
    cdef double Si[9]
    cdef double y[3]
    cdef double d2
    cdef int i
    if not dod_kalman_position_inverse(P, N, d, r2, Si):
        return -INFINITY
    for i in range(d):
        y[i] = z[i] - x[i]
    d2 = dod_kalman_mahalanobis2(y, Si, d)
    dod_kalman_position_update(x, P, N, z, Si, d, r2)
    return dod_kalman_log_likelihood(d2, Si, d)


cdef inline double dod_imm_position_update_cov(double* x, double* P, int N, const double* z, int d,
                                               const double* R) noexcept nogil:
    """dod_imm_position_update with the detection's own noise R (d x d,
    row-major, symmetric) in place of r2 I."""
    cdef double Si[9]
    cdef double y[3]
    cdef double d2
    cdef int i
    if not dod_kalman_position_inverse_cov(P, N, d, R, Si):
        return -INFINITY
    for i in range(d):
        y[i] = z[i] - x[i]
    d2 = dod_kalman_mahalanobis2(y, Si, d)
    dod_kalman_position_update_cov(x, P, N, z, Si, d, R)
    return dod_kalman_log_likelihood(d2, Si, d)


cdef inline void dod_imm_combine(const dod_imm* m, size_t row, double* x, double* P, int d) noexcept nogil:
    """The mixture of the row's models, weighted by mu: its position-velocity
    part into x (2d values) and P (2d x 2d, packed as the tracker's P:
    kalman.pxd)."""
    cdef int N = 2 * d + 1, n = 2 * d, j, a, b
    cdef const double* mu = m.mu + row * DOD_IMM_MODELS
    cdef const double* xm = m.xm + row * DOD_IMM_MODELS * N
    cdef const double* Pm = m.Pm + row * DOD_IMM_MODELS * N * N
    cdef double dx[DOD_IMM_MODELS * DOD_IMM_MAXN]
    cdef double v
    for a in range(n):
        v = 0.0
        for j in range(DOD_IMM_MODELS):
            v += mu[j] * xm[j * N + a]
        x[a] = v
    for j in range(DOD_IMM_MODELS):
        for a in range(n):
            dx[j * N + a] = xm[j * N + a] - x[a]
    for a in range(n):
        for b in range(a, n):
            v = 0.0
            for j in range(DOD_IMM_MODELS):
                v += mu[j] * (Pm[j * N * N + a * N + b] + dx[j * N + a] * dx[j * N + b])
            P[dod_kalman_packed_index(a, b, n)] = v


cdef inline void dod_imm_predict(const dod_imm* m, size_t row, double* x, double* P, int d,
                                 double dt) noexcept nogil:
    """Mix, predict every model, keep the predicted model probabilities in
    mu, and write the combined prediction into x, P (the track's columns).

    The mixing spreads are taken about model 0's state: with D_i = x_i - x_0
    and e_j = x0_j - x_0 = sum_i w_ij D_i,
    sum_i w_ij (P_i + (x_i - x0_j)(x_i - x0_j)') = sum_i w_ij (P_i + D_i D_i') - e_j e_j',
    so P_i + D_i D_i' is formed once per model, not once per pair (the
    models' states are close: no cancellation worth the name)."""
    cdef int N = 2 * d + 1, NN = (2 * d + 1) * (2 * d + 1), i, j, a, b
    cdef double* mu = m.mu + row * DOD_IMM_MODELS
    cdef double* xm = m.xm + row * DOD_IMM_MODELS * N
    cdef double* Pm = m.Pm + row * DOD_IMM_MODELS * NN
    cdef double c[DOD_IMM_MODELS]
    cdef double w[DOD_IMM_MODELS * DOD_IMM_MODELS]     # w[j * 3 + i]
    cdef double xb[DOD_IMM_MAXN]
    cdef double D[DOD_IMM_MODELS * DOD_IMM_MAXN]
    cdef double S[DOD_IMM_MODELS * DOD_IMM_MAXN * DOD_IMM_MAXN]
    cdef double e[DOD_IMM_MAXN]
    cdef double v, ct = 0.0, inv
    for j in range(DOD_IMM_MODELS):
        v = 0.0
        for i in range(DOD_IMM_MODELS):
            v += m.trans[i * DOD_IMM_MODELS + j] * mu[i]
        c[j] = v
        ct += v
    for j in range(DOD_IMM_MODELS):
        if c[j] > 0.0:
            inv = 1.0 / c[j]
            for i in range(DOD_IMM_MODELS):
                w[j * DOD_IMM_MODELS + i] = m.trans[i * DOD_IMM_MODELS + j] * mu[i] * inv
        else:
            for i in range(DOD_IMM_MODELS):
                w[j * DOD_IMM_MODELS + i] = mu[i]
    for a in range(N):
        xb[a] = xm[a]
    for i in range(DOD_IMM_MODELS):
        for a in range(N):
            D[i * N + a] = xm[i * N + a] - xb[a]
        for a in range(N):
            for b in range(a, N):
                S[i * NN + a * N + b] = Pm[i * NN + a * N + b] + D[i * N + a] * D[i * N + b]
    for j in range(DOD_IMM_MODELS):
        for a in range(N):
            v = 0.0
            for i in range(DOD_IMM_MODELS):
                v += w[j * DOD_IMM_MODELS + i] * D[i * N + a]
            e[a] = v
            xm[j * N + a] = xb[a] + v
        for a in range(N):
            for b in range(a, N):
                v = 0.0
                for i in range(DOD_IMM_MODELS):
                    v += w[j * DOD_IMM_MODELS + i] * S[i * NN + a * N + b]
                v -= e[a] * e[b]
                Pm[j * NN + a * N + b] = v
                Pm[j * NN + b * N + a] = v
        mu[j] = c[j] / ct if ct > 0.0 else c[j]
    # one call per model with a constant model number: gcc folds the model's
    # branch and its sparse Jacobian's indices, and unrolls the loops
    dod_imm_model_predict(xm, Pm, d, 0, dt, m)
    dod_imm_model_predict(xm + N, Pm + NN, d, 1, dt, m)
    dod_imm_model_predict(xm + 2 * N, Pm + 2 * NN, d, 2, dt, m)
    dod_imm_combine(m, row, x, P, d)


cdef inline double* dod_imm_model_x(const dod_imm* m, size_t row, int j, int d) noexcept nogil:
    """Model j's state of the row (2d + 1 values)."""
    return m.xm + (row * DOD_IMM_MODELS + j) * (2 * d + 1)


cdef inline double* dod_imm_model_P(const dod_imm* m, size_t row, int j, int d) noexcept nogil:
    """Model j's covariance of the row ((2d + 1) x (2d + 1))."""
    return m.Pm + (row * DOD_IMM_MODELS + j) * (2 * d + 1) * (2 * d + 1)


cdef inline void dod_imm_weigh(const dod_imm* m, size_t row, double* ll, double* x, double* P,
                               int d) noexcept nogil:
    """After every model of the row took the detection (ll[j] its log-likelihood,
    -INFINITY for a model that could not): mu_j = c_j L_j / sum_k c_k L_k
    (unchanged when no likelihood is finite or all underflow), and the
    combination into x, P. ll is overwritten."""
    cdef double* mu = m.mu + row * DOD_IMM_MODELS
    cdef double best = -INFINITY, s = 0.0
    cdef int j
    for j in range(DOD_IMM_MODELS):
        if ll[j] > best:
            best = ll[j]
    if isfinite(best):
        for j in range(DOD_IMM_MODELS):
            ll[j] = mu[j] * exp(ll[j] - best)
            s += ll[j]
        if s > 0.0:
            for j in range(DOD_IMM_MODELS):
                mu[j] = ll[j] / s
    dod_imm_combine(m, row, x, P, d)


cdef inline void dod_imm_update(const dod_imm* m, size_t row, const double* z, double r2, double* x,
                                double* P, int d) noexcept nogil:
    """Update every model of the row with position z (dod_imm_position_update),
    then the probabilities and the combination (dod_imm_weigh). Another
    measurement (range-bearing EKF) composes the same way: its update per
    model on dod_imm_model_x/_P, then dod_imm_weigh."""
    cdef int N = 2 * d + 1, j
    cdef double ll[DOD_IMM_MODELS]
    for j in range(DOD_IMM_MODELS):
        ll[j] = dod_imm_position_update(dod_imm_model_x(m, row, j, d), dod_imm_model_P(m, row, j, d),
                                        N, z, d, r2)
    dod_imm_weigh(m, row, ll, x, P, d)


cdef inline void dod_imm_update_cov(const dod_imm* m, size_t row, const double* z, const double* R, double* x,
                                    double* P, int d) noexcept nogil:
    """dod_imm_update with the detection's own noise R (d x d, row-major,
    symmetric): dod_imm_position_update_cov per model, then dod_imm_weigh."""
    cdef int N = 2 * d + 1, j
    cdef double ll[DOD_IMM_MODELS]
    for j in range(DOD_IMM_MODELS):
        ll[j] = dod_imm_position_update_cov(dod_imm_model_x(m, row, j, d), dod_imm_model_P(m, row, j, d),
                                            N, z, d, R)
    dod_imm_weigh(m, row, ll, x, P, d)


cdef inline void dod_imm_birth(const dod_imm* m, size_t row, const double* x, const double* P,
                               int d) noexcept nogil:
    """Set every model of a newborn row from its CV state x (2d) and P (2d x 2d,
    packed): turn rate 0 with variance w0var, probabilities mu0."""
    cdef int N = 2 * d + 1, NN = (2 * d + 1) * (2 * d + 1), n = 2 * d, j, a, b
    cdef double* xm
    cdef double* Pm
    for j in range(DOD_IMM_MODELS):
        xm = m.xm + (row * DOD_IMM_MODELS + j) * N
        Pm = m.Pm + (row * DOD_IMM_MODELS + j) * NN
        for a in range(N):
            xm[a] = x[a] if a < n else 0.0
            for b in range(N):
                Pm[a * N + b] = P[dod_kalman_packed_index(a, b, n)] if a < n and b < n else 0.0
        Pm[NN - 1] = m.w0var
        m.mu[row * DOD_IMM_MODELS + j] = m.mu0[j]
