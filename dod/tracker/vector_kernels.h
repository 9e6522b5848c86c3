/* dod/tracker/vector_kernels.h: the constant-velocity Kalman kernels over
 * lanes of tracks, one loop over rows per kernel, compiled once per element
 * type (double, float) and instruction set.
 *
 * Layout (struct of arrays): element a of row r lies at base[a * stride + r],
 * so that consecutive rows' same element is contiguous (one lane per
 * element) and a loop over rows reads and writes whole vectors. x holds 2d
 * lanes (position then velocity), P the n (n + 1) / 2 lanes of the packed
 * upper triangle (n = 2d; kalman.pxd's packed order). Si (the innovation
 * inverse), hw (the gate box's half-widths) and z (detections) stay
 * row-major: Si + r * d * d, hw + r * d, z + j * d.
 *
 * The kernels (d = 2 or 3, a constant of each instantiation):
 *   cv_predict  x = F x, P = F P F' + Q: kalman.pxd's dod_kalman_predict_step
 *   gate_rows   Si = (H P H' + r2 I)^-1 (dod_kalman_innovation_inverse), the
 *               gate box's half-widths sqrt(gate (P_aa + r2)), the widest
 *               (0 when S is not positive definite) and whether the row can
 *               be gated: _model.pxd's _meas_gate_row, Cartesian
 *   cv_update   the Joseph-form update with detection det[r] (rows with
 *               det[r] < 0 keep x and P): dod_kalman_update
 *   pair_d2     y' Si y of each gated pair of a batch (the gating pass's
 *               candidates, gathered in lanes): dod_kalman_mahalanobis2
 * Each repeats its per-row kernel's arithmetic operation by operation, in
 * the same order, so that its results are the same bits. Nothing here
 * reassociates: the build compiles with -ffp-contract=off (no a * b + c
 * fused into an FMA on the paths that have one) and without -ffast-math;
 * sqrt and division are correctly rounded in every instruction set. Every
 * path therefore gives the bits of the per-row kernels.
 *
 * Element types: each kernel's body is written once, over DOD_VK_T, in the
 * second half of this file, which the first half includes twice: with
 * double (the names above) and with float (the same names + _f32). The
 * float kernels hold x and P in float and do the double kernels'
 * operations in the same order in float: the scalars (dt, q11, q12, q22,
 * r2, gate) round to float once per call, z on load. Si and hw are of the
 * lanes' type (a float kernel writes and reads them in float: the float32
 * tracker's per-scan scratch); hm and z are double in both (hm: every
 * path's gate widths are summed in double for the index's cell side; z:
 * the scan's detections, which the index and the births read in double).
 * Every path gives a float kernel's bits too (float arithmetic is as
 * correctly rounded as double). pair_d2 alone is double only: its
 * operands are the batch the gating pass gathers in double for either
 * element type (its comment below says why).
 *
 * The row loops have no branch: a row's conditions are computed and then
 * select its values (if-conversion), which is what lets gcc vectorise them
 * across rows. Each hot loop carries a tag comment (vec: NAME) on its line:
 * tests/test_vectoriser_report.py compiles the kernels of each element type
 * with gcc's -fopt-info-vec-optimized and fails when a tagged loop is not
 * vectorised at the path's full width.
 *
 * Paths: DOD_VK_INSTANTIATE(name, target) defines one instruction set's
 * fourteen kernels (three kernels, d = 2 and 3, double and float:
 * DOD_VK_DEFINE_T one element type's six; pair_d2, d = 2 and 3:
 * DOD_VK_DEFINE_PAIRS) and its table; this header
 * instantiates baseline (the build's own target, x86-64: SSE2), avx2 (AVX2
 * and FMA) and avx512 (AVX-512F) and lists them in dod_vk_paths, unless
 * DOD_VK_KERNELS_ONLY is defined (a tool that compiles one path alone).
 * dod_vk_path_supported says which this CPU runs; dod/tracker/_vector.pyx
 * chooses among them. Off x86-64 there is one path, baseline.
 *
 * Contract (the caller's): d is 2 or 3; r0 <= r1 <= the lanes' stride;
 * lanes, Si, hw, hm, gateable and z do not overlap; a row with det[r] >= 0
 * has a valid detection det[r] in z and the Si gate_rows wrote for it
 * (cv_update reads z and Si only for such rows: z may be NULL when none);
 * pair_d2's n <= ls and its y, Si and d2 do not overlap.
 * Thread-safety: each call writes only rows [r0, r1) (and their Si, hw,
 * hm, gateable entries; pair_d2 only d2[0:n]): calls on disjoint row
 * ranges may run at once.
 */
#ifndef DOD_VK_T
#ifndef DOD_VECTOR_KERNELS_H
#define DOD_VECTOR_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__clang__)
/* clang builds only the ThreadSanitizer variant (at -O1, where it does not
 * vectorise): no hint, whose failure it would report as a warning. */
#define DOD_VK_IVDEP
#else
/* No row reads another row's lanes: without this gcc would version each
 * loop on runtime overlap checks of every pair of lanes (they share one
 * array and a stride it cannot see), past its limit of checks. */
#define DOD_VK_IVDEP _Pragma("GCC ivdep")
#endif
#define DOD_VK_UNROLL _Pragma("GCC unroll 32")
#define DOD_VK_INLINE static inline __attribute__((always_inline))

/* Where P[i, j] (i <= j) of an n x n packed covariance lies: row i of the
 * upper triangle starts after i rows of n, n - 1, ... values. */
#define DOD_VK_PACKED(i, j, n) ((i) * (2 * (n) - 1 - (i)) / 2 + (j))

DOD_VK_INLINE int dod_vk_packed(int i, int j, int n)
{
    return i <= j ? DOD_VK_PACKED(i, j, n) : DOD_VK_PACKED(j, i, n);
}

/* gate_rows and cv_update go through the rows in blocks: their row-major
 * operands (Si, hw, z) pass through lanes on the stack (a detection's and
 * Si's values gathered into lanes, Si and hw written out of them), so that
 * the loop with the arithmetic reads and writes only whole lanes; gcc does
 * not vectorise a loop that stores groups of 9 (Si in 3-D) or mixes
 * a byte store with double arithmetic. */
enum { DOD_VK_BLOCK = 64 };

/* A name of the element type being defined: base, or base_f32. */
#define DOD_VK_CAT_(a, b) a##b
#define DOD_VK_CAT(a, b) DOD_VK_CAT_(a, b)
#define DOD_VK_NAME(base) DOD_VK_CAT(base, DOD_VK_SFX)

/* The kernels over each element type: DOD_VK_T, the unsigned integer of
 * its width (DOD_VK_BITS, for dod_vk_blend's masks), its sqrt, and the
 * suffix of its names. */
#define DOD_VK_T double
#define DOD_VK_BITS uint64_t
#define DOD_VK_SQRT sqrt
#define DOD_VK_SFX
#include "vector_kernels.h"
#undef DOD_VK_T
#undef DOD_VK_BITS
#undef DOD_VK_SQRT
#undef DOD_VK_SFX

#define DOD_VK_T float
#define DOD_VK_BITS uint32_t
#define DOD_VK_SQRT sqrtf
#define DOD_VK_SFX _f32
#include "vector_kernels.h"
#undef DOD_VK_T
#undef DOD_VK_BITS
#undef DOD_VK_SQRT
#undef DOD_VK_SFX


/* ---- the gated pairs' distances (double, for either element type) ------- */

/* d2[i] = y_i' Si_i y_i for the pairs i in [0, n) of a batch that the
 * gating pass gathered in lanes: pair i's innovation y at y[a * ls + i]
 * (a < d) and its track's inverse Si, row-major, at Si[(a * d + b) * ls + i].
 * kalman.pxd's dod_kalman_mahalanobis2 operation for operation: from 0,
 * add (y_a Si_ab) y_b over a, then b. Double whatever the tracks' element
 * type: the pass computes a pair's y in double (a float32 position widens
 * exactly) and gathers Si in double (a float32 tracker's float Si widens
 * exactly too), so one kernel serves both. */
DOD_VK_INLINE void dod_vk_pair_d2_d(const int d, const double *__restrict y, const double *__restrict Si,
                                    size_t ls, size_t n, double *__restrict d2)
{
    DOD_VK_IVDEP
    for (size_t i = 0; i < n; i++) {  /* vec: pair_d2 */
        double s = 0.0;
        DOD_VK_UNROLL
        for (int a = 0; a < d; a++) {
            DOD_VK_UNROLL
            for (int b = 0; b < d; b++)
                s += y[a * ls + i] * Si[(a * d + b) * ls + i] * y[b * ls + i];
        }
        d2[i] = s;
    }
}

typedef void (*dod_vk_pairs_fn)(const double *y, const double *Si, size_t ls, size_t n, double *d2);


/* ---- one instruction set's kernels --------------------------------------- */

/* One element type's six kernels, T double (sfx empty) or float (sfx _f32):
 * dod_vk_cv_predict2_avx2, dod_vk_cv_predict2_f32_avx2, ... */
#define DOD_VK_DEFINE_D(isa, target, d, T, sfx)                                                             \
    target static void dod_vk_cv_predict##d##sfx##_##isa(T *x, size_t xs, T *P, size_t ps, size_t r0,      \
                                                         size_t r1, double dt, double q11, double q12,      \
                                                         double q22)                                        \
    { dod_vk_predict_rows##sfx(d, x, xs, P, ps, r0, r1, dt, q11, q12, q22); }                              \
    target static void dod_vk_gate_rows##d##sfx##_##isa(const T *P, size_t ps, size_t r0, size_t r1,       \
                                                        double r2, double gate, T *Si, T *hw, double *hm,   \
                                                        uint8_t *gateable)                                  \
    { dod_vk_gate_rows_d##sfx(d, P, ps, r0, r1, r2, gate, Si, hw, hm, gateable); }                         \
    target static void dod_vk_cv_update##d##sfx##_##isa(T *x, size_t xs, T *P, size_t ps, size_t r0,       \
                                                        size_t r1, const int32_t *det, const double *z,     \
                                                        const T *Si, double r2)                             \
    { dod_vk_update_rows##sfx(d, x, xs, P, ps, r0, r1, det, z, Si, r2); }

#define DOD_VK_DEFINE_T(isa, target, T, sfx)                                                                \
    DOD_VK_DEFINE_D(isa, target, 2, T, sfx)                                                                 \
    DOD_VK_DEFINE_D(isa, target, 3, T, sfx)

/* The initialiser of a dod_vk_set (sfx empty) or dod_vk_set_f32 (_f32). */
#define DOD_VK_SET(isa, sfx)                                                                                \
    {dod_vk_cv_predict2##sfx##_##isa, dod_vk_cv_predict3##sfx##_##isa},                                     \
    {dod_vk_gate_rows2##sfx##_##isa, dod_vk_gate_rows3##sfx##_##isa},                                       \
    {dod_vk_cv_update2##sfx##_##isa, dod_vk_cv_update3##sfx##_##isa}

/* The pairs' kernel, d = 2 and 3: dod_vk_pair_d2_2_avx2, ... */
#define DOD_VK_DEFINE_PAIRS(isa, target)                                                                    \
    target static void dod_vk_pair_d2_2_##isa(const double *y, const double *Si, size_t ls, size_t n,       \
                                              double *d2)                                                   \
    { dod_vk_pair_d2_d(2, y, Si, ls, n, d2); }                                                              \
    target static void dod_vk_pair_d2_3_##isa(const double *y, const double *Si, size_t ls, size_t n,       \
                                              double *d2)                                                   \
    { dod_vk_pair_d2_d(3, y, Si, ls, n, d2); }

#define DOD_VK_PAIRS(isa) {dod_vk_pair_d2_2_##isa, dod_vk_pair_d2_3_##isa}

typedef struct {
    const char *name;
    dod_vk_set f64;             /* the double kernels */
    dod_vk_set_f32 f32;         /* the float kernels */
    dod_vk_pairs_fn pair_d2[2]; /* the pairs' distances, [d - 2] */
} dod_vk_kernels;

#define DOD_VK_INSTANTIATE(isa, target)                                                                     \
    DOD_VK_DEFINE_T(isa, target, double, )                                                                  \
    DOD_VK_DEFINE_T(isa, target, float, _f32)                                                               \
    DOD_VK_DEFINE_PAIRS(isa, target)                                                                        \
    static const dod_vk_kernels dod_vk_kernels_##isa = {#isa, {DOD_VK_SET(isa, )}, {DOD_VK_SET(isa, _f32)}, \
                                                        DOD_VK_PAIRS(isa)};

#if defined(__x86_64__) || defined(__i386__)
#define DOD_VK_X86 1
#define DOD_VK_TARGET_AVX2 __attribute__((target("avx2,fma")))
#if defined(__clang__)
#define DOD_VK_TARGET_AVX512 __attribute__((target("avx512f")))
#else
/* 512-bit vectors: gcc's generic tuning would otherwise stop at 256 bits. */
#define DOD_VK_TARGET_AVX512 __attribute__((target("avx512f,prefer-vector-width=512")))
#endif
#else
#define DOD_VK_X86 0
#endif


/* ---- the paths ---------------------------------------------------------- */

#ifndef DOD_VK_KERNELS_ONLY

DOD_VK_INSTANTIATE(baseline, )
#if DOD_VK_X86
DOD_VK_INSTANTIATE(avx2, DOD_VK_TARGET_AVX2)
DOD_VK_INSTANTIATE(avx512, DOD_VK_TARGET_AVX512)
#endif

/* In order of preference, the most basic first. */
static const dod_vk_kernels *const dod_vk_paths[] = {
    &dod_vk_kernels_baseline,
#if DOD_VK_X86
    &dod_vk_kernels_avx2,
    &dod_vk_kernels_avx512,
#endif
};
enum { DOD_VK_NPATHS = sizeof(dod_vk_paths) / sizeof(dod_vk_paths[0]) };

/* Whether this CPU (and its operating system's saved vector state) runs
 * path i of dod_vk_paths. */
static inline int dod_vk_path_supported(int i)
{
    if (i == 0)
        return 1;
#if DOD_VK_X86
    __builtin_cpu_init();
    if (i == 1)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (i == 2)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2")
               && __builtin_cpu_supports("fma");
#endif
    return 0;
}

#endif /* DOD_VK_KERNELS_ONLY */

#endif /* DOD_VECTOR_KERNELS_H */


#else /* DOD_VK_T: ---- the kernels over one element type, DOD_VK_T -------- */

/* a where mask's bits are set, b where they are clear. A plain `on ? a : b`
 * over many values of one row lets gcc turn the row into two branches (one
 * per value of on), which the vectoriser cannot take. */
DOD_VK_INLINE DOD_VK_T DOD_VK_NAME(dod_vk_blend)(DOD_VK_BITS mask, DOD_VK_T a, DOD_VK_T b)
{
    DOD_VK_BITS ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & mask) | (ub & ~mask);
    memcpy(&a, &ua, sizeof a);
    return a;
}


/* ---- the kernels, generic in d (a constant where they are inlined) ------ */

DOD_VK_INLINE void DOD_VK_NAME(dod_vk_predict_rows)(const int d, DOD_VK_T *__restrict x, size_t xs,
                                                    DOD_VK_T *__restrict P, size_t ps, size_t r0, size_t r1,
                                                    DOD_VK_T dt, DOD_VK_T q11, DOD_VK_T q12, DOD_VK_T q22)
{
    const int n = 2 * d;
    DOD_VK_IVDEP
    for (size_t r = r0; r < r1; r++) {  /* vec: cv_predict */
        DOD_VK_T p[21];
        DOD_VK_UNROLL
        for (int a = 0; a < d; a++)
            x[a * xs + r] += dt * x[(d + a) * xs + r];
        DOD_VK_UNROLL
        for (int k = 0; k < n * (n + 1) / 2; k++)
            p[k] = P[k * ps + r];
        /* kalman.pxd's blocks: A + dt (B + B') + dt^2 C + Q11, B + dt C + Q12,
         * C + Q22, every term read from the old P. */
        DOD_VK_UNROLL
        for (int i = 0; i < d; i++) {
            DOD_VK_UNROLL
            for (int j = 0; j < d; j++) {
                const DOD_VK_T b = p[DOD_VK_PACKED(i, d + j, n)];
                const DOD_VK_T c = p[dod_vk_packed(d + i, d + j, n)];
                DOD_VK_T v = b + dt * c;
                if (j == i)
                    v += q12;
                P[DOD_VK_PACKED(i, d + j, n) * ps + r] = v;
                if (j >= i) {
                    const DOD_VK_T a = p[DOD_VK_PACKED(i, j, n)];
                    const DOD_VK_T bt = p[DOD_VK_PACKED(j, d + i, n)];
                    DOD_VK_T u = a + dt * (b + bt) + dt * dt * c;
                    if (j == i)
                        u += q11;
                    P[DOD_VK_PACKED(i, j, n) * ps + r] = u;
                }
            }
        }
        DOD_VK_UNROLL
        for (int i = 0; i < d; i++)
            P[DOD_VK_PACKED(d + i, d + i, n) * ps + r] = p[DOD_VK_PACKED(d + i, d + i, n)] + q22;
    }
}


DOD_VK_INLINE void DOD_VK_NAME(dod_vk_gate_rows_d)(const int d, const DOD_VK_T *__restrict P, size_t ps,
                                                   size_t r0, size_t r1, DOD_VK_T r2, DOD_VK_T gate,
                                                   DOD_VK_T *__restrict Si, DOD_VK_T *__restrict hw,
                                                   double *__restrict hm, uint8_t *__restrict gateable)
{
    const int n = 2 * d;
    const DOD_VK_T zero = 0;
    DOD_VK_T sl[9][DOD_VK_BLOCK] __attribute__((aligned(64)));
    DOD_VK_T wl[3][DOD_VK_BLOCK] __attribute__((aligned(64)));
    DOD_VK_T hml[DOD_VK_BLOCK] __attribute__((aligned(64)));
    DOD_VK_T okl[DOD_VK_BLOCK] __attribute__((aligned(64)));
    for (size_t b0 = r0; b0 < r1; b0 += DOD_VK_BLOCK) {
        const size_t nb = r1 - b0 < DOD_VK_BLOCK ? r1 - b0 : DOD_VK_BLOCK;
        const DOD_VK_T *__restrict Pb = P + b0;
        DOD_VK_IVDEP
        for (size_t i = 0; i < nb; i++) {  /* vec: gate_rows */
            DOD_VK_T det, hmax = zero;
            int ok;
            /* S = H P H' + r2 I (its upper triangle) and its inverse:
             * dod_kalman_inverse_spd's cofactors, in its order. */
            if (d == 2) {
                const DOD_VK_T a = Pb[DOD_VK_PACKED(0, 0, n) * ps + i] + r2;
                const DOD_VK_T b = Pb[DOD_VK_PACKED(0, 1, n) * ps + i];
                const DOD_VK_T c = Pb[DOD_VK_PACKED(1, 1, n) * ps + i] + r2;
                det = a * c - b * b;
                ok = (det > zero) & (a > zero);
                sl[0][i] = c / det;
                sl[1][i] = -b / det;
                sl[3][i] = a / det;
            } else {
                const DOD_VK_T a = Pb[DOD_VK_PACKED(0, 0, n) * ps + i] + r2;
                const DOD_VK_T b = Pb[DOD_VK_PACKED(0, 1, n) * ps + i];
                const DOD_VK_T c = Pb[DOD_VK_PACKED(0, 2, n) * ps + i];
                const DOD_VK_T e = Pb[DOD_VK_PACKED(1, 1, n) * ps + i] + r2;
                const DOD_VK_T f = Pb[DOD_VK_PACKED(1, 2, n) * ps + i];
                const DOD_VK_T k = Pb[DOD_VK_PACKED(2, 2, n) * ps + i] + r2;
                const DOD_VK_T g = e * k - f * f;
                const DOD_VK_T h = c * f - b * k;
                det = a * g + b * h + c * (b * f - c * e);
                ok = (det > zero) & (a > zero) & (a * e - b * b > zero);
                sl[0][i] = g / det;
                sl[1][i] = h / det;
                sl[2][i] = (b * f - c * e) / det;
                sl[4][i] = (a * k - c * c) / det;
                sl[5][i] = (b * c - a * f) / det;
                sl[8][i] = (a * e - b * b) / det;
            }
            DOD_VK_UNROLL
            for (int a = 0; a < d; a++) {
                /* |y_a| <= sqrt(gate * S_aa) bounds the ellipse d2 <= gate. */
                const DOD_VK_T w = DOD_VK_SQRT(gate * (Pb[DOD_VK_PACKED(a, a, n) * ps + i] + r2));
                wl[a][i] = w;
                hmax = w > hmax ? w : hmax;
            }
            hml[i] = ok ? hmax : zero;
            okl[i] = ok ? (DOD_VK_T)1 : zero;
        }
        /* Out of the lanes (hm widened to double); Si is symmetric. hm too
         * goes through a lane: written in the loop above, the float
         * kernel's `ok ? hmax : 0` stored to a double becomes a widening
         * under a condition, which gcc does not if-convert (the conversion
         * could trap), and the loop would not vectorise. */
        for (size_t i = 0; i < nb; i++) {
            hm[b0 + i] = hml[i];
            DOD_VK_T *__restrict s = Si + (b0 + i) * (size_t)(d * d);
            DOD_VK_UNROLL
            for (int a = 0; a < d; a++) {
                hw[(b0 + i) * d + a] = wl[a][i];
                DOD_VK_UNROLL
                for (int b = 0; b < d; b++)
                    s[a * d + b] = a <= b ? sl[a * d + b][i] : sl[b * d + a][i];
            }
            gateable[b0 + i] = (uint8_t)(okl[i] != zero);
        }
    }
}


DOD_VK_INLINE void DOD_VK_NAME(dod_vk_update_rows)(const int d, DOD_VK_T *__restrict x, size_t xs,
                                                   DOD_VK_T *__restrict P, size_t ps, size_t r0, size_t r1,
                                                   const int32_t *__restrict det, const double *__restrict z,
                                                   const DOD_VK_T *__restrict Si, DOD_VK_T r2)
{
    /* A row without a detection computes on zeros (not on whatever its Si
     * holds, which may be a NaN or a denormal) and keeps its x and P. */
    static const double none[3] = {0.0};
    static const DOD_VK_T snone[9] = {0};
    const int n = 2 * d;
    DOD_VK_T zl[3][DOD_VK_BLOCK] __attribute__((aligned(64)));
    DOD_VK_T sl[9][DOD_VK_BLOCK] __attribute__((aligned(64)));
    DOD_VK_BITS onl[DOD_VK_BLOCK] __attribute__((aligned(64)));  /* all ones: the row has a detection */
    for (size_t b0 = r0; b0 < r1; b0 += DOD_VK_BLOCK) {
        const size_t nb = r1 - b0 < DOD_VK_BLOCK ? r1 - b0 : DOD_VK_BLOCK;
        DOD_VK_T *__restrict xb = x + b0;
        DOD_VK_T *__restrict Pb = P + b0;
        for (size_t i = 0; i < nb; i++) {   /* into lanes: the row's detection and Si (zeros for none) */
            const int32_t j = det[b0 + i];
            const double *__restrict zr = j >= 0 ? z + (size_t)j * d : none;
            const DOD_VK_T *__restrict s = j >= 0 ? Si + (b0 + i) * (size_t)(d * d) : snone;
            onl[i] = j >= 0 ? ~(DOD_VK_BITS)0 : 0;
            DOD_VK_UNROLL
            for (int a = 0; a < d; a++)
                zl[a][i] = (DOD_VK_T)zr[a];
            DOD_VK_UNROLL
            for (int k = 0; k < d * d; k++)
                sl[k][i] = s[k];
        }
        DOD_VK_IVDEP
        for (size_t i = 0; i < nb; i++) {  /* vec: cv_update */
            const DOD_VK_BITS on = onl[i];
            DOD_VK_T xo[6], p[21], y[3], K[18], M[36], v;
            DOD_VK_UNROLL
            for (int k = 0; k < n; k++)
                xo[k] = xb[k * xs + i];
            DOD_VK_UNROLL
            for (int k = 0; k < n * (n + 1) / 2; k++)
                p[k] = Pb[k * ps + i];
            /* kalman.pxd's _dod_kalman_gain_step: K = P H' Si, x += K y, M = (I - K H) P */
            DOD_VK_UNROLL
            for (int a = 0; a < d; a++)
                y[a] = zl[a][i] - xo[a];
            DOD_VK_UNROLL
            for (int a = 0; a < n; a++) {
                DOD_VK_UNROLL
                for (int b = 0; b < d; b++) {
                    v = 0;
                    DOD_VK_UNROLL
                    for (int k = 0; k < d; k++)
                        v += p[dod_vk_packed(a, k, n)] * sl[k * d + b][i];
                    K[a * d + b] = v;
                }
            }
            DOD_VK_UNROLL
            for (int a = 0; a < n; a++) {
                v = 0;
                DOD_VK_UNROLL
                for (int b = 0; b < d; b++)
                    v += K[a * d + b] * y[b];
                xb[a * xs + i] = DOD_VK_NAME(dod_vk_blend)(on, xo[a] + v, xo[a]);
            }
            DOD_VK_UNROLL
            for (int a = 0; a < n; a++) {
                DOD_VK_UNROLL
                for (int b = 0; b < n; b++) {
                    v = p[dod_vk_packed(a, b, n)];
                    DOD_VK_UNROLL
                    for (int k = 0; k < d; k++)
                        v -= K[a * d + k] * p[dod_vk_packed(k, b, n)];
                    M[a * n + b] = v;
                }
            }
            /* _dod_kalman_position_update: P = M A' + r2 K K' (upper triangle) */
            DOD_VK_UNROLL
            for (int a = 0; a < n; a++) {
                DOD_VK_UNROLL
                for (int b = a; b < n; b++) {
                    v = M[a * n + b];
                    DOD_VK_UNROLL
                    for (int k = 0; k < d; k++)
                        v += (r2 * K[a * d + k] - M[a * n + k]) * K[b * d + k];
                    Pb[DOD_VK_PACKED(a, b, n) * ps + i] =
                        DOD_VK_NAME(dod_vk_blend)(on, v, p[DOD_VK_PACKED(a, b, n)]);
                }
            }
        }
    }
}


/* One path's kernels of this element type (dod_vk_set: double, dod_vk_set_f32:
 * float), [d - 2]. The scalars, hm and z are double in both: a float kernel
 * rounds the scalars and z; Si and hw are of the element type. */
typedef void (*DOD_VK_NAME(dod_vk_predict_fn))(DOD_VK_T *x, size_t xs, DOD_VK_T *P, size_t ps, size_t r0,
                                               size_t r1, double dt, double q11, double q12, double q22);
typedef void (*DOD_VK_NAME(dod_vk_gate_fn))(const DOD_VK_T *P, size_t ps, size_t r0, size_t r1, double r2,
                                            double gate, DOD_VK_T *Si, DOD_VK_T *hw, double *hm,
                                            uint8_t *gateable);
typedef void (*DOD_VK_NAME(dod_vk_update_fn))(DOD_VK_T *x, size_t xs, DOD_VK_T *P, size_t ps, size_t r0,
                                              size_t r1, const int32_t *det, const double *z,
                                              const DOD_VK_T *Si, double r2);

typedef struct {
    DOD_VK_NAME(dod_vk_predict_fn) predict[2];
    DOD_VK_NAME(dod_vk_gate_fn) gate[2];
    DOD_VK_NAME(dod_vk_update_fn) update[2];
} DOD_VK_NAME(dod_vk_set);

#endif /* DOD_VK_T */
