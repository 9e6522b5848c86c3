# dod/tracker/_vector.pxd: the constant-velocity kernels over lanes of
# tracks (vector_kernels.h), through the instruction-set path chosen for
# the process (_vector.pyx: DOD_SIMD, set_simd).
#
#     from dod.tracker._vector cimport dod_vk_cv_predict, dod_vk_gate_rows, dod_vk_cv_update, dod_vk_pair_d2
#
# Each row kernel has a float32 twin (name + _f32): x, P, Si and hw in
# float, the same operations in the same order in float, the same contract
# (hm and z stay double). Every path gives a float kernel's bits too, but
# they are not the double kernel's bits rounded: they are float
# arithmetic's.
#
# Lanes: element a of row r of x is x[a * xs + r]; of the packed P
# (kalman.pxd's packed order) P[a * ps + r]. Si (d x d per row), hw (d per
# row) and z (d per detection) are row-major. Each function runs rows
# [r0, r1) with one indirect call into the selected path; every path gives
# the per-row kernels' bits.
#
# Contract: d is 2 or 3; r0 <= r1 <= xs and ps; the arrays do not overlap.
# Thread-safety: each call writes only rows [r0, r1) (and their Si, hw, hm,
# gateable entries); calls on disjoint ranges may run at once.
from libc.stdint cimport int32_t, uint8_t
from dod.tracker.kalman cimport dod_kalman_noise


cdef void dod_vk_cv_predict(int d, double* x, size_t xs, double* P, size_t ps, size_t r0, size_t r1,
                            const dod_kalman_noise* w) noexcept nogil
    # rows [r0, r1): x = F x, P = F P F' + Q, dod_kalman_predict_step's arithmetic (same bits)

cdef void dod_vk_gate_rows(int d, const double* P, size_t ps, size_t r0, size_t r1, double r2, double gate,
                           double* Si, double* hw, double* hm, uint8_t* gateable) noexcept nogil
    # rows [r0, r1): _model.pxd's _meas_gate_row, Cartesian: ok = dod_kalman_innovation_inverse(P_r, d, r2,
    # Si + r*d*d); hw[r*d + a] = sqrt(gate * (P_aa + r2)); hm[r] the widest (0.0 when not ok);
    # gateable[r] = ok. A row that is not ok may have its Si written (nobody reads it).

cdef void dod_vk_cv_update(int d, double* x, size_t xs, double* P, size_t ps, size_t r0, size_t r1,
                           const int32_t* det, const double* z, const double* Si, double r2) noexcept nogil
    # rows r in [r0, r1) with det[r] >= 0: dod_kalman_update(x_r, P_r, z + det[r]*d, Si + r*d*d, d, r2)
    # (same bits); rows with det[r] < 0 keep their x and P bit for bit, and their z and Si are not read
    # (z may be NULL when no row has a detection).

cdef void dod_vk_cv_predict_f32(int d, float* x, size_t xs, float* P, size_t ps, size_t r0, size_t r1,
                                const dod_kalman_noise* w) noexcept nogil
    # dod_vk_cv_predict's arithmetic and operation order, in float: w's dt, q11, q12, q22 rounded to float
    # once per call

cdef void dod_vk_gate_rows_f32(int d, const float* P, size_t ps, size_t r0, size_t r1, double r2, double gate,
                               float* Si, float* hw, double* hm, uint8_t* gateable) noexcept nogil
    # dod_vk_gate_rows' arithmetic in float (r2 and gate rounded to float once); Si and hw stored in float
    # (the float32 tracker's per-scan scratch: _model.pxd's _f32), hm widened to double (the gate widths'
    # sum for the index's cell side is every path's, in double); dod_vk_gate_rows' contract

cdef void dod_vk_cv_update_f32(int d, float* x, size_t xs, float* P, size_t ps, size_t r0, size_t r1,
                               const int32_t* det, const double* z, const float* Si, double r2) noexcept nogil
    # dod_vk_cv_update's arithmetic in float (Si dod_vk_gate_rows_f32's; z and r2 rounded to float on
    # load); rows with det[r] < 0 keep x and P bit for bit, and their z and Si are not read

cdef void dod_vk_pair_d2(int d, const double* y, const double* Si, size_t ls, size_t n,
                         double* d2) noexcept nogil
    # pairs i in [0, n): d2[i] = dod_kalman_mahalanobis2 of y[a * ls + i] (a < d) and Si[(a * d + b) * ls + i]
    # (row-major), the same bits; double for either element type (the gating pass's y and Si are double).
    # n <= ls; y, Si and d2 do not overlap; writes d2[0:n] only.


cdef size_t _rows_end(r0, r1, size_t rows) except? 0
    # A test hook's row range [r0, r1) (r1 None: to the end) within `rows`: its end, or ValueError.
