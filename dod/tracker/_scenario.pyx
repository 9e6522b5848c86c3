# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The scenario generator's per-scan loops, without the GIL.

:mod:`dod.tracker.scenario` draws the slow-changing parts of a scenario
(targets, births, crossings, clutter counts and positions, manoeuvre
switches) with numpy; the three passes that touch every target or
detection every scan run here: detect and perturb (`observe`), shuffle the
scan's rows (`shuffle`) and move the targets (`move`). With numpy those
passes cost as much CPU a scan as the two-thread tick itself at 100,000
targets, so the demo's producer could not keep 50 Hz beside it
(docs/design/threads-and-locality.md).

Random numbers: xoshiro256** (Blackman and Vigna), seeded with four words
drawn from the scenario's numpy Generator, so a seed still names a
scenario; Gaussian numbers by the ziggurat method (Marsaglia and Tsang, in
Doornik's 128-block form: one 64-bit draw and one table lookup ~99 % of
the time, the wedges and the tail by rejection); bounded integers by
Lemire's multiply-and-reject (no modulo bias). Nothing here allocates.
"""
from libc.math cimport exp, log, sqrt, fabs, cos, sin
from libc.stdint cimport uint64_t, uint32_t, int64_t, uint8_t

from dod._core cimport dod_prefetch_w

cdef enum:
    _ZIG_BLOCKS = 128
    _SHUFFLE_AHEAD = 64             # swaps between drawing a partner row and swapping it (a power of two)

cdef double _ZIG_R = 3.442619855899             # start of the tail
cdef double _ZIG_V = 9.91256303526217e-3        # area of each block (f(x) = exp(-x^2 / 2))
cdef double _zig_x[_ZIG_BLOCKS + 1]             # block edges, decreasing: x[1] = R, x[128] = 0
cdef double _zig_ratio[_ZIG_BLOCKS]             # x[i + 1] / x[i]: |u| below it is inside the curve


cdef void _zig_init() noexcept:
    cdef int i
    cdef double f = exp(-0.5 * _ZIG_R * _ZIG_R)
    _zig_x[0] = _ZIG_V / f          # the bottom block: a rectangle of area V with the tail
    _zig_x[1] = _ZIG_R
    _zig_x[_ZIG_BLOCKS] = 0.0
    for i in range(2, _ZIG_BLOCKS):
        _zig_x[i] = sqrt(-2.0 * log(_ZIG_V / _zig_x[i - 1] + f))
        f = exp(-0.5 * _zig_x[i] * _zig_x[i])
    for i in range(_ZIG_BLOCKS):
        _zig_ratio[i] = _zig_x[i + 1] / _zig_x[i]


_zig_init()


cdef struct _xoshiro:
    uint64_t s[4]


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t _next(_xoshiro* g) noexcept nogil:
    cdef uint64_t r = _rotl(g.s[1] * 5, 7) * 9
    cdef uint64_t t = g.s[1] << 17
    g.s[2] ^= g.s[0]
    g.s[3] ^= g.s[1]
    g.s[1] ^= g.s[2]
    g.s[0] ^= g.s[3]
    g.s[2] ^= t
    g.s[3] = _rotl(g.s[3], 45)
    return r


cdef inline double _uniform(_xoshiro* g) noexcept nogil:
    """In [0, 1), 53 bits. (Converted as a signed integer: one instruction;
    an unsigned 64-bit conversion is a branch and two on x86-64.)"""
    return <double><int64_t>(_next(g) >> 11) * (1.0 / 9007199254740992.0)


cdef inline double _uniform_open(_xoshiro* g) noexcept nogil:
    """In (0, 1): a logarithm's argument."""
    return (<double><int64_t>(_next(g) >> 11) + 0.5) * (1.0 / 9007199254740992.0)


cdef inline double _normal_tail(_xoshiro* g, bint negative) noexcept nogil:
    """|x| > R, by Marsaglia's exponential rejection."""
    cdef double x, y
    while True:
        x = log(_uniform_open(g)) / _ZIG_R
        y = log(_uniform_open(g))
        if -2.0 * y >= x * x:
            break
    return x - _ZIG_R if negative else _ZIG_R - x


cdef inline double _normal(_xoshiro* g) noexcept nogil:
    """A standard Gaussian number."""
    cdef uint64_t r
    cdef int i
    cdef double u, x, f0, f1
    while True:
        r = _next(g)
        i = <int>(r & (_ZIG_BLOCKS - 1))                   # the low 7 bits: the block
        u = <double><int64_t>(r >> 11) * (1.0 / 4503599627370496.0) - 1.0     # the high 53: [-1, 1)
        if fabs(u) < _zig_ratio[i]:
            return u * _zig_x[i]
        if i == 0:
            return _normal_tail(g, u < 0.0)
        x = u * _zig_x[i]
        f0 = exp(-0.5 * (_zig_x[i] * _zig_x[i] - x * x))          # f(x[i]) / f(x)
        f1 = exp(-0.5 * (_zig_x[i + 1] * _zig_x[i + 1] - x * x))  # f(x[i + 1]) / f(x)
        if f1 + _uniform(g) * (f0 - f1) < 1.0:                    # under the curve in the wedge
            return x


cdef inline uint32_t _below(_xoshiro* g, uint32_t n) noexcept nogil:
    """Uniform in [0, n), n >= 1 (Lemire: a multiply, and a rejection only
    in the first (2^32 mod n) of 2^32 outcomes)."""
    cdef uint64_t m = (_next(g) >> 32) * <uint64_t>n
    cdef uint32_t low = <uint32_t>m, floor
    if low < n:
        floor = (0 - n) % n
        while low < floor:
            m = (_next(g) >> 32) * <uint64_t>n
            low = <uint32_t>m
    return <uint32_t>(m >> 32)


cdef class Random:
    """xoshiro256** state, seeded from a numpy Generator (four 64-bit
    words; the all-zero state, which would stay zero, is replaced). Each
    method draws from a local copy of the state and stores it back at the
    end: kept in registers, not stored and reloaded at every draw, which
    is the draws' dependency chain (about twice as fast).
    The methods release the GIL: use one Random from one thread at a time
    (two at once would draw the same numbers, not crash).

    Random(rng)   rng: numpy.random.Generator
    """
    cdef _xoshiro g

    def __init__(self, rng):
        import numpy as np
        words = rng.integers(0, 2 ** 64, size=4, dtype=np.uint64, endpoint=False)
        for i in range(4):
            self.g.s[i] = <uint64_t>int(words[i])
        if self.g.s[0] == 0 and self.g.s[1] == 0 and self.g.s[2] == 0 and self.g.s[3] == 0:
            self.g.s[0] = 0x9E3779B97F4A7C15

    def normal(self, double[::1] out not None):
        """Fill `out` with standard Gaussian numbers."""
        self._fill(out, True)

    def uniform(self, double[::1] out not None):
        """Fill `out` with numbers uniform in [0, 1)."""
        self._fill(out, False)

    cdef void _fill(self, double[::1] out, bint gaussian):
        cdef _xoshiro g
        cdef Py_ssize_t i
        g = self.g
        with nogil:
            for i in range(out.shape[0]):
                out[i] = _normal(&g) if gaussian else _uniform(&g)
        self.g = g

    def below(self, uint32_t n, int64_t[::1] out not None):
        """Fill `out` with integers uniform in [0, n)."""
        cdef _xoshiro g
        cdef Py_ssize_t i
        if n < 1:
            raise ValueError("n must be >= 1")
        g = self.g
        with nogil:
            for i in range(out.shape[0]):
                out[i] = _below(&g, n)
        self.g = g

    def observe(self, const double[:, ::1] pos not None, const int64_t[::1] start not None,
                const int64_t[::1] end not None, int64_t s, double pd, double r,
                double[:, ::1] truth not None, int64_t[::1] truth_ids not None,
                double[:, ::1] det not None, int64_t[::1] det_ids not None):
        """Scan `s` of the targets: those alive (start <= s < end) in row
        order into truth / truth_ids (ids are rows + 1), and each of them
        detected with probability pd, with Gaussian noise of deviation r
        per axis, into det / det_ids. Returns (alive, detected)."""
        cdef Py_ssize_t n = pos.shape[0], dim = pos.shape[1], i, a, na = 0, nd = 0
        cdef _xoshiro g
        if not (start.shape[0] == n and end.shape[0] == n and truth.shape[0] >= n and truth_ids.shape[0] >= n
                and det.shape[0] >= n and det_ids.shape[0] >= n and truth.shape[1] == dim and det.shape[1] == dim):
            raise ValueError("observe: array shapes do not match the targets")
        g = self.g
        with nogil:
            for i in range(n):
                if start[i] <= s < end[i]:
                    for a in range(dim):
                        truth[na, a] = pos[i, a]
                    truth_ids[na] = i + 1
                    na += 1
                    if _uniform(&g) < pd:
                        for a in range(dim):
                            det[nd, a] = pos[i, a] + r * _normal(&g)
                        det_ids[nd] = i + 1
                        nd += 1
        self.g = g
        return na, nd

    def shuffle(self, double[:, ::1] rows not None, int64_t[::1] ids not None):
        """Shuffle rows and ids together, in place (Fisher-Yates)."""
        cdef Py_ssize_t n = rows.shape[0], dim = rows.shape[1], i, j, a, m = 0
        cdef _xoshiro g
        cdef double v
        cdef int64_t t
        cdef uint32_t ahead[_SHUFFLE_AHEAD]
        if ids.shape[0] != n:
            raise ValueError("shuffle: rows and ids differ in length")
        if n > <Py_ssize_t>0xFFFFFFFF:
            raise ValueError("shuffle: too many rows")
        g = self.g
        with nogil:
            # Each swap's partner j is a random row: beyond the caches at
            # 100,000 rows. The partners are drawn _SHUFFLE_AHEAD swaps
            # early (the same draws in the same order: the same
            # permutation) and their lines fetched meanwhile.
            i = n - 1
            while i > 0 and m < _SHUFFLE_AHEAD:
                j = _below(&g, <uint32_t>(i + 1))
                ahead[m] = <uint32_t>j
                dod_prefetch_w(&rows[j, 0])
                dod_prefetch_w(&ids[j])
                i -= 1
                m += 1
            i = n - 1
            m = 0
            while i > 0:
                j = ahead[m]
                if i > _SHUFFLE_AHEAD:          # the partner of swap i - _SHUFFLE_AHEAD
                    a = _below(&g, <uint32_t>(i - _SHUFFLE_AHEAD + 1))
                    ahead[m] = <uint32_t>a
                    dod_prefetch_w(&rows[a, 0])
                    dod_prefetch_w(&ids[a])
                m = (m + 1) & (_SHUFFLE_AHEAD - 1)
                for a in range(dim):
                    v = rows[i, a]
                    rows[i, a] = rows[j, a]
                    rows[j, a] = v
                t = ids[i]
                ids[i] = ids[j]
                ids[j] = t
                i -= 1
        self.g = g

    def move(self, double[:, ::1] pos not None, double[:, ::1] vel not None,
             const uint8_t[::1] steady not None, const double[::1] omega not None, double sq, double dt):
        """One step of every target: velocity plus white acceleration
        (Gaussian, deviation sq per axis; none for rows marked steady),
        then turned by omega * dt in the plane of axes 0 and 1 (where
        omega is not 0), then position plus velocity * dt."""
        cdef Py_ssize_t n = pos.shape[0], dim = pos.shape[1], i, a
        cdef double th, c, sn, vx, vy
        cdef _xoshiro g
        if not (dim >= 2 and vel.shape[0] == n and vel.shape[1] == dim and steady.shape[0] == n and omega.shape[0] == n):
            raise ValueError("move: array shapes do not match the targets")
        g = self.g
        with nogil:
            for i in range(n):
                if not steady[i]:
                    for a in range(dim):
                        vel[i, a] += sq * _normal(&g)
                if omega[i] != 0.0:
                    th = omega[i] * dt
                    c = cos(th)
                    sn = sin(th)
                    vx = vel[i, 0]
                    vy = vel[i, 1]
                    vel[i, 0] = c * vx - sn * vy
                    vel[i, 1] = sn * vx + c * vy
                for a in range(dim):
                    pos[i, a] += vel[i, a] * dt
        self.g = g
