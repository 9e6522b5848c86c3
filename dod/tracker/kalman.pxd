# dod/tracker/kalman.pxd: the constant-velocity Kalman filter's algebra, as
# inline nogil kernels on one track's state (no allocation, no GIL, no checks).
#
#     from dod.tracker.kalman cimport (dod_kalman_predict, dod_kalman_innovation_inverse,
#                                      dod_kalman_noise_of, dod_kalman_predict_step,
#                                      dod_kalman_mahalanobis2, dod_kalman_update,
#                                      dod_kalman_log_likelihood, dod_kalman_packed_index,
#                                      dod_kalman_pack, dod_kalman_unpack)
#
# Layout: a state of dimension d (2 or 3) is x[2d] (position then velocity)
# and its covariance P, stored packed: the upper triangle row by row (the
# order of numpy's np.triu_indices(2d)), n (n + 1) / 2 values for n = 2d
# (dod_kalman_packed_index; dod_kalman_pack and dod_kalman_unpack convert).
# A symmetric matrix stored once is symmetric by construction, and the
# tracker's rows are 40 % smaller for it: with many targets predict and
# update stream those rows from memory. The *_position_* kernels take any
# state of n <= DOD_KALMAN_MAXN values with the position first and a full
# row-major n x n P (the IMM's models carry a turn rate: n = 2d + 1). The
# measurement is the position (H = [I 0]) with noise r2 * I. Si is the
# d x d inverse of the innovation covariance S = H P H' + R, row-major.
#
# The tracker's kernel set (dod/tracker/_model.pxd) for motion _cv and
# measurement _cartesian: predict dod_kalman_predict_step, update
# dod_kalman_update, gate row dod_kalman_innovation_inverse (and the
# half-widths sqrt(gate * (P[a, a] + r2))), pair test dod_kalman_mahalanobis2,
# birth: nothing beyond the row's x and P. A detection with its own noise
# (a full d x d R: Tracker.tick's covariance) takes
# dod_kalman_innovation_inverse_cov and dod_kalman_update_cov instead.
#
# Contract (checks the caller owns): d is 2 or 3; a full P is symmetric
# (every kernel keeps it so, exactly); the arrays do not overlap. The
# tracker's passes (dod/tracker/_predict.pyx, _update.pyx) call each kernel with a
# constant d so that gcc unrolls the inlined loops and folds the packed
# indices. Thread-safety: pure functions of their arguments.

from libc.math cimport log

cdef enum:
    DOD_KALMAN_MAXN = 7         # largest state: 3-D position, velocity and a turn rate (IMM)


ctypedef struct dod_kalman_noise:
    # The process noise of one predict step: Q's blocks q dt^3 / 3, q dt^2 / 2
    # and q dt (per axis), computed once per step for all tracks.
    double dt, q11, q12, q22


cdef inline dod_kalman_noise dod_kalman_noise_of(double dt, double q) noexcept nogil:
    """The noise terms of a step of dt with process noise density q."""
    cdef dod_kalman_noise w
    w.dt = dt
    w.q11 = q * dt * dt * dt / 3.0
    w.q12 = q * dt * dt / 2.0
    w.q22 = q * dt
    return w


cdef inline int dod_kalman_packed_size(int n) noexcept nogil:
    """Values of a packed n x n covariance: n (n + 1) / 2."""
    return n * (n + 1) // 2


cdef inline int dod_kalman_packed_index(int i, int j, int n) noexcept nogil:
    """Where P[i, j] (= P[j, i]) lies in a packed n x n covariance: row i of
    the upper triangle starts after i rows of n, n - 1, ... values."""
    cdef int t
    if i > j:
        t = i
        i = j
        j = t
    return i * (2 * n - 1 - i) // 2 + j


cdef inline void dod_kalman_pack(const double* P, int n, double* Pp) noexcept nogil:
    """Pp = the upper triangle of the full n x n P, packed."""
    cdef int i, j, k = 0
    for i in range(n):
        for j in range(i, n):
            Pp[k] = P[i * n + j]
            k += 1


cdef inline void dod_kalman_unpack(const double* Pp, int n, double* P) noexcept nogil:
    """P = the full n x n matrix of the packed Pp (exactly symmetric)."""
    cdef int i, j, k = 0
    for i in range(n):
        for j in range(i, n):
            P[i * n + j] = Pp[k]
            P[j * n + i] = Pp[k]
            k += 1


cdef inline void dod_kalman_predict_step(double* x, double* P, int d, const dod_kalman_noise* w) noexcept nogil:
    """x = F x, P = F P F' + Q for the constant-velocity model (blocks of size
    d; P packed), with the step's noise terms `w` (dod_kalman_noise_of).

    In blocks, P = [[A B] [B^T C]] becomes A + dt (B + B^T) + dt^2 C + Q11,
    B + dt C + Q12 and C + Q22, on the upper triangle. In place: the old
    B[j, i] that the new A[i, j] reads is overwritten at step (j, i), after
    step (i, j) for j > i (and for j = i after the read), and
    B[i, j] + B[j, i] is the same sum either way round, so the new A is
    exactly symmetric term by term."""
    cdef int n = 2 * d, i, j
    cdef double a, b, bt, c, dt = w.dt
    for i in range(d):
        x[i] += dt * x[d + i]
    for i in range(d):
        for j in range(d):
            b = P[dod_kalman_packed_index(i, d + j, n)]
            c = P[dod_kalman_packed_index(d + i, d + j, n)]
            if j >= i:
                a = P[dod_kalman_packed_index(i, j, n)]
                bt = P[dod_kalman_packed_index(j, d + i, n)]
                P[dod_kalman_packed_index(i, j, n)] = a + dt * (b + bt) + dt * dt * c
            P[dod_kalman_packed_index(i, d + j, n)] = b + dt * c
    for i in range(d):
        P[dod_kalman_packed_index(i, i, n)] += w.q11
        P[dod_kalman_packed_index(i, d + i, n)] += w.q12
        P[dod_kalman_packed_index(d + i, d + i, n)] += w.q22


cdef inline void dod_kalman_predict(double* x, double* P, int d, double dt, double q) noexcept nogil:
    """x = F x, P = F P F' + Q for the constant-velocity model (blocks of size
    d; P packed)."""
    cdef dod_kalman_noise w = dod_kalman_noise_of(dt, q)
    dod_kalman_predict_step(x, P, d, &w)


cdef inline bint dod_kalman_inverse_spd(const double* S, int d, double* Si) noexcept nogil:
    """Si = S^-1 for a symmetric d x d S (d 2 or 3; its upper triangle is
    read); False when S is not positive definite. The one small inverse of
    the tracker: Cartesian, range-bearing (measurement.pxd) and IMM updates."""
    cdef double a, b, c, det, e, f, g, h, k
    if d == 2:
        a = S[0]
        b = S[1]
        c = S[3]
        det = a * c - b * b
        if not (det > 0.0 and a > 0.0):
            return False
        Si[0] = c / det
        Si[1] = -b / det
        Si[2] = -b / det
        Si[3] = a / det
        return True
    a = S[0]
    b = S[1]
    c = S[2]
    e = S[4]
    f = S[5]
    k = S[8]
    # cofactors of [[a b c] [b e f] [c f k]]
    g = e * k - f * f
    h = c * f - b * k
    det = a * g + b * h + c * (b * f - c * e)
    if not (det > 0.0 and a > 0.0 and a * e - b * b > 0.0):
        return False
    Si[0] = g / det
    Si[1] = h / det
    Si[2] = (b * f - c * e) / det
    Si[3] = Si[1]
    Si[4] = (a * k - c * c) / det
    Si[5] = (b * c - a * f) / det
    Si[6] = Si[2]
    Si[7] = Si[5]
    Si[8] = (a * e - b * b) / det
    return True


cdef inline bint dod_kalman_position_inverse(const double* P, int n, int d, double r2, double* Si) noexcept nogil:
    """Si = (H P H' + R)^-1 for a position measurement (H = [I 0], R = r2 I) of
    a state of n values (P: n x n, the position first); the off-diagonal
    entries are averaged, so a P a rounding off symmetric gives a symmetric
    Si. False when S is not positive definite."""
    cdef double S[9]
    cdef int i, j
    for i in range(d):
        S[i * d + i] = P[i * n + i] + r2
        for j in range(i + 1, d):
            S[i * d + j] = 0.5 * (P[i * n + j] + P[j * n + i])
    return dod_kalman_inverse_spd(S, d, Si)


cdef inline bint dod_kalman_innovation_inverse(const double* P, int d, double r2, double* Si) noexcept nogil:
    """Si = (H P H' + R)^-1 (d x d, symmetric) of the constant-velocity state
    (n = 2d, P packed); False when S is not positive definite."""
    cdef double S[9]
    cdef int i, j, n = 2 * d
    for i in range(d):
        S[i * d + i] = P[dod_kalman_packed_index(i, i, n)] + r2
        for j in range(i + 1, d):
            S[i * d + j] = P[dod_kalman_packed_index(i, j, n)]
    return dod_kalman_inverse_spd(S, d, Si)


cdef inline bint dod_kalman_position_inverse_cov(const double* P, int n, int d, const double* R,
                                                 double* Si) noexcept nogil:
    """dod_kalman_position_inverse with a full d x d R (row-major,
    symmetric): a detection's own noise."""
    cdef double S[9]
    cdef int i, j
    for i in range(d):
        S[i * d + i] = P[i * n + i] + R[i * d + i]
        for j in range(i + 1, d):
            S[i * d + j] = 0.5 * (P[i * n + j] + P[j * n + i]) + R[i * d + j]
    return dod_kalman_inverse_spd(S, d, Si)


cdef inline bint dod_kalman_innovation_inverse_cov(const double* P, int d, const double* R,
                                                   double* Si) noexcept nogil:
    """Si = (H P H' + R)^-1 of the constant-velocity state (n = 2d, P packed)
    for a full d x d R (row-major, symmetric: its upper triangle is read): a
    detection's own noise. False when S is not positive definite."""
    cdef double S[9]
    cdef int i, j, n = 2 * d
    for i in range(d):
        for j in range(i, d):
            S[i * d + j] = P[dod_kalman_packed_index(i, j, n)] + R[i * d + j]
    return dod_kalman_inverse_spd(S, d, Si)


cdef inline double dod_kalman_mahalanobis2(const double* y, const double* Si, int d) noexcept nogil:
    """y' Si y: the squared Mahalanobis distance of innovation y (d values)."""
    cdef double s = 0.0
    cdef int i, j
    for i in range(d):
        for j in range(d):
            s += y[i] * Si[i * d + j] * y[j]
    return s


# The update's shape as a type. Its body is too large for gcc to inline at
# each call, so a constant d at the call site stays a variable in it, and
# the loops run generic; a fused argument makes Cython emit one C function
# per shape, in which n and d are constants that gcc unrolls (the same
# operations in the same order: the same bits). The
# generic shape reads and writes a full P (the IMM's models), the
# constant-velocity shapes the tracker's packed P.
ctypedef struct dod_kalman_shape:       # n and d at run time, P full
    int n, d
ctypedef struct dod_kalman_cv2:         # 2-D constant velocity: n = 4, d = 2, P packed
    char unused
ctypedef struct dod_kalman_cv3:         # 3-D constant velocity: n = 6, d = 3, P packed
    char unused
ctypedef fused dod_kalman_shaped:
    dod_kalman_shape
    dod_kalman_cv2
    dod_kalman_cv3


cdef inline void _dod_kalman_dims(const dod_kalman_shaped* shape, int* n, int* d) noexcept nogil:
    """The state's size n and the position's d: constants for the
    constant-velocity shapes."""
    if dod_kalman_shaped is dod_kalman_cv2:
        n[0] = 4
        d[0] = 2
    elif dod_kalman_shaped is dod_kalman_cv3:
        n[0] = 6
        d[0] = 3
    else:
        n[0] = shape.n
        d[0] = shape.d


cdef inline int _dod_kalman_at(const dod_kalman_shaped* shape, int i, int j, int n) noexcept nogil:
    """Where P[i, j] lies for this shape: row-major (generic) or packed."""
    if dod_kalman_shaped is dod_kalman_shape:
        return i * n + j
    else:
        return dod_kalman_packed_index(i, j, n)


cdef inline void dod_kalman_position_update(double* x, double* P, int n, const double* z, const double* Si,
                                           int d, double r2) noexcept nogil:
    """Kalman update of a state of n values (position first, P full) with a
    position z (H = [I 0], R = r2 I) and Si = S^-1, Joseph form:
    P = (I-KH) P (I-KH)' + K R K', then symmetrised."""
    cdef dod_kalman_shape shape
    shape.n = n
    shape.d = d
    _dod_kalman_position_update(&shape, x, P, z, Si, r2)


cdef inline void _dod_kalman_gain_step(const dod_kalman_shaped* shape, double* x, const double* P,
                                       const double* z, const double* Si, double* K, double* M) noexcept nogil:
    """The update's first half, the same whatever R: the gain K = P H' Si
    (n x d), x += K (z - x[:d]), and M = A P (n x n, A = I - K H). P is
    only read."""
    cdef int i, j, k, n, d
    cdef double y[3]
    cdef double s
    _dod_kalman_dims(shape, &n, &d)
    for i in range(d):
        y[i] = z[i] - x[i]
    # K = P H' Si: the first d columns of P times Si.
    for i in range(n):
        for j in range(d):
            s = 0.0
            for k in range(d):
                s += P[_dod_kalman_at(shape, i, k, n)] * Si[k * d + j]
            K[i * d + j] = s
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += K[i * d + j] * y[j]
        x[i] += s
    # Joseph form with A = I - K H, using that A differs from I only in its
    # first d columns (H = [I 0]): A P = P - K P[:d, :] and
    # M A' = M - M[:, :d] K', so each product costs n*n*d, not n^3.
    for i in range(n):                  # M = A P
        for j in range(n):
            s = P[_dod_kalman_at(shape, i, j, n)]
            for k in range(d):
                s -= K[i * d + k] * P[_dod_kalman_at(shape, k, j, n)]
            M[i * n + j] = s


cdef inline void _dod_kalman_mirror(const dod_kalman_shaped* shape, double* P) noexcept nogil:
    """A full P's lower triangle from its upper one (packed: nothing)."""
    cdef int i, j, n, d
    _dod_kalman_dims(shape, &n, &d)
    if dod_kalman_shaped is dod_kalman_shape:
        for i in range(n):
            for j in range(i):
                P[i * n + j] = P[j * n + i]


cdef inline void _dod_kalman_position_update(const dod_kalman_shaped* shape, double* x, double* P,
                                            const double* z, const double* Si, double r2) noexcept nogil:
    """dod_kalman_position_update, with n and d from `shape` (constants for
    the constant-velocity shapes, read from it for dod_kalman_shape) and P
    in the shape's layout (_dod_kalman_at). Every read of P comes before the
    first write."""
    cdef int i, j, k, n, d
    cdef double K[DOD_KALMAN_MAXN * 3]
    cdef double M[DOD_KALMAN_MAXN * DOD_KALMAN_MAXN]
    cdef double s
    _dod_kalman_dims(shape, &n, &d)
    _dod_kalman_gain_step(shape, x, P, z, Si, K, M)
    for i in range(n):                  # P = M A' + r2 K K' (upper triangle)
        for j in range(i, n):
            s = M[i * n + j]
            for k in range(d):
                s += (r2 * K[i * d + k] - M[i * n + k]) * K[j * d + k]
            P[_dod_kalman_at(shape, i, j, n)] = s
    _dod_kalman_mirror(shape, P)


cdef inline void _dod_kalman_position_update_cov(const dod_kalman_shaped* shape, double* x, double* P,
                                                const double* z, const double* Si,
                                                const double* R) noexcept nogil:
    """_dod_kalman_position_update with a full d x d noise R (row-major,
    symmetric): P = M A' + K R K'."""
    cdef int i, j, k, l, n, d
    cdef double K[DOD_KALMAN_MAXN * 3]
    cdef double KR[DOD_KALMAN_MAXN * 3]
    cdef double M[DOD_KALMAN_MAXN * DOD_KALMAN_MAXN]
    cdef double s
    _dod_kalman_dims(shape, &n, &d)
    _dod_kalman_gain_step(shape, x, P, z, Si, K, M)
    for i in range(n):                  # K R
        for k in range(d):
            s = 0.0
            for l in range(d):
                s += K[i * d + l] * R[l * d + k]
            KR[i * d + k] = s
    for i in range(n):                  # P = M A' + K R K' (upper triangle)
        for j in range(i, n):
            s = M[i * n + j]
            for k in range(d):
                s += (KR[i * d + k] - M[i * n + k]) * K[j * d + k]
            P[_dod_kalman_at(shape, i, j, n)] = s
    _dod_kalman_mirror(shape, P)


cdef inline void dod_kalman_update(double* x, double* P, const double* z, const double* Si, int d,
                         double r2) noexcept nogil:
    """Kalman update of the constant-velocity state (n = 2d, P packed), Joseph form."""
    if d == 2:
        _dod_kalman_position_update(<dod_kalman_cv2*>NULL, x, P, z, Si, r2)
    else:
        _dod_kalman_position_update(<dod_kalman_cv3*>NULL, x, P, z, Si, r2)


cdef inline void dod_kalman_position_update_cov(double* x, double* P, int n, const double* z, const double* Si,
                                               int d, const double* R) noexcept nogil:
    """dod_kalman_position_update with a full d x d noise R (row-major,
    symmetric) and Si = (H P H' + R)^-1."""
    cdef dod_kalman_shape shape
    shape.n = n
    shape.d = d
    _dod_kalman_position_update_cov(&shape, x, P, z, Si, R)


cdef inline void dod_kalman_update_cov(double* x, double* P, const double* z, const double* Si, int d,
                                       const double* R) noexcept nogil:
    """dod_kalman_update with a detection's own full noise R (d x d,
    row-major, symmetric) and Si = (H P H' + R)^-1."""
    if d == 2:
        _dod_kalman_position_update_cov(<dod_kalman_cv2*>NULL, x, P, z, Si, R)
    else:
        _dod_kalman_position_update_cov(<dod_kalman_cv3*>NULL, x, P, z, Si, R)


cdef inline double dod_kalman_log_likelihood(double d2, const double* Si, int d) noexcept nogil:
    """ln N(y; 0, S) of an innovation with y' Si y = d2: the Gaussian density
    the track score compares with the clutter density.
    ln N = -(d ln(2 pi) - ln det(Si) + d2) / 2."""
    cdef double det
    if d == 2:
        det = Si[0] * Si[3] - Si[1] * Si[2]
    else:
        det = (Si[0] * (Si[4] * Si[8] - Si[5] * Si[7]) - Si[1] * (Si[3] * Si[8] - Si[5] * Si[6])
               + Si[2] * (Si[3] * Si[7] - Si[4] * Si[6]))
    return -0.5 * (d * 1.8378770664093453 - log(det) + d2)
