/* k_lanes.h: the row reductions of the kernels (max, sums, dot products over a row), each in a
 * fixed order: K_LANES running values side by side (element j goes to lane j % K_LANES), then
 * the lanes combined as a tree, halves added lane by lane. The order depends only on the row's
 * length, never on threads or on where the row sits, so a row gives the same bits wherever it
 * is reduced; and the lanes advance together in vector registers, where one running sum would
 * wait on each add. Softmax, log-softmax and cross-entropy (k_softmax.c), attention's softmax
 * (k_attention.c) sum in Real; LayerNorm (k_layernorm.c) in double (its rows' statistics must
 * survive a large common offset).
 * Not here: sums over rows (a weight gradient's: k_layernorm.c, k_reduce.c), the products'
 * sums (k_simd.h's tiles). Read next: k_softmax.c. */
#ifndef ATTOGRAD_K_LANES_H
#define ATTOGRAD_K_LANES_H

#include <math.h>

#include "k_math.h"
#include "tensor.h"

#define K_LANES 16 /* k_tree16_ps and k_tree16_pd below add 16 lanes */

/* lane[0] + ... + lane[K_LANES - 1] as a tree: lane l += lane l + w for w = 8, 4, 2, 1 (the lanes
 * may be overwritten). With AVX-512 or AVX2 the tree is vector halves added (the same adds of
 * the same pairs, so the same bits): written out as scalar steps it cost more than the row's
 * own sums on rows of a few dozen values (attention's softmax). */
#if !defined(AG_SIMD_PORTABLE) && defined(__AVX2__)
#include <immintrin.h>
static inline float k_tree4_ps(__m128 b) { /* lanes 0..3 of b, tree: (0+2) + (1+3) */
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
static inline float k_tree16_ps(const float *lane) {
#ifdef __AVX512F__
    __m512 v = _mm512_loadu_ps(lane);
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
#else
    __m256 lo = _mm256_loadu_ps(lane), hi = _mm256_loadu_ps(lane + 8);
#endif
    __m256 a = _mm256_add_ps(lo, hi);
    return k_tree4_ps(_mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)));
}
static inline double k_tree16_pd(const double *lane) {
#ifdef __AVX512F__
    __m512d v = _mm512_add_pd(_mm512_loadu_pd(lane), _mm512_loadu_pd(lane + 8));
    __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
#else
    __m256d a = _mm256_add_pd(_mm256_add_pd(_mm256_loadu_pd(lane), _mm256_loadu_pd(lane + 8)),
                              _mm256_add_pd(_mm256_loadu_pd(lane + 4), _mm256_loadu_pd(lane + 12)));
#endif
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
/* max with a NaN winning (K_MAX_NAN below) lane by lane: a > b or a is NaN ? a : b, for each
 * vector type (P: _mm or _mm256; S: ps or pd) */
#define K_MAX_NAN_VEC(name, V, P, S)                                                               \
    static inline V name(V a, V b) {                                                               \
        return P##_blendv_##S(                                                                     \
            b, a, P##_or_##S(P##_cmp_##S(a, b, _CMP_GT_OQ), P##_cmp_##S(a, a, _CMP_UNORD_Q)));     \
    }
K_MAX_NAN_VEC(k_max_nan_ps, __m128, _mm, ps)
K_MAX_NAN_VEC(k_max_nan256_ps, __m256, _mm256, ps)
K_MAX_NAN_VEC(k_max_nan_pd, __m128d, _mm, pd)
K_MAX_NAN_VEC(k_max_nan256_pd, __m256d, _mm256, pd)
/* the largest of 16 lanes, halves against halves */
static inline float k_tree16_max_ps(const float *lane) {
    __m256 a = k_max_nan256_ps(_mm256_loadu_ps(lane + 8), _mm256_loadu_ps(lane));
    __m128 b = k_max_nan_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    __m128 c = k_max_nan_ps(_mm_movehl_ps(b, b), b);
    return _mm_cvtss_f32(k_max_nan_ps(_mm_shuffle_ps(c, c, 1), c));
}
static inline double k_tree16_max_pd(const double *lane) {
    __m256d a = k_max_nan256_pd(_mm256_loadu_pd(lane + 8), _mm256_loadu_pd(lane));
    a = k_max_nan256_pd(k_max_nan256_pd(_mm256_loadu_pd(lane + 12), _mm256_loadu_pd(lane + 4)), a);
    __m128d b = k_max_nan_pd(_mm256_extractf128_pd(a, 1), _mm256_castpd256_pd128(a));
    return _mm_cvtsd_f64(k_max_nan_pd(_mm_unpackhi_pd(b, b), b));
}
#define K_LANES_TREE 1
#endif

static inline Real k_lanes_total(Real *lane) {
#if defined(K_LANES_TREE) && defined(AG_REAL_DOUBLE)
    return k_tree16_pd(lane);
#elif defined(K_LANES_TREE)
    return k_tree16_ps(lane);
#else
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
#endif
}
static inline double k_lanes_total_d(double *lane) {
#ifdef K_LANES_TREE
    return k_tree16_pd(lane);
#else
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
#endif
}

/* The sum over j < n of TERM (an expression of j) in K_LANES lanes of type T, into *out: the
 * one loop shape every reduction below has (the tail of the row goes to lanes 0, 1, ...). */
#define K_LANES_SUM(T, total, n, TERM, out)                                                        \
    do {                                                                                           \
        T lane_[K_LANES] = {0};                                                                    \
        int j_ = 0;                                                                                \
        for (; j_ + K_LANES <= (n); j_ += K_LANES)                                                 \
            for (int l_ = 0; l_ < K_LANES; l_++) {                                                 \
                int j = j_ + l_;                                                                   \
                lane_[l_] += (TERM);                                                               \
            }                                                                                      \
        for (int l_ = 0; j_ + l_ < (n); l_++) {                                                    \
            int j = j_ + l_;                                                                       \
            lane_[l_] += (TERM);                                                                   \
        }                                                                                          \
        *(out) = total(lane_);                                                                     \
    } while (0)

/* max_j x_j (exact: any order gives the same value; -inf for n = 0), NaN when some x_j is NaN
 * (a NaN stays in its lane and wins the combination): a row of NaN scores must not look like a
 * row whose keys are all masked (max -inf) */
#define K_MAX_NAN(a, b) ((a) > (b) || (a) != (a) ? (a) : (b))
static inline Real k_row_max(const Real *x, int n) {
    Real lane[K_LANES];
    for (int l = 0; l < K_LANES; l++) lane[l] = -(Real)INFINITY;
    int j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++) lane[l] = K_MAX_NAN(x[j + l], lane[l]);
    for (int l = 0; j + l < n; l++) lane[l] = K_MAX_NAN(x[j + l], lane[l]);
        /* the lanes combined as a tree of halves (vector compares and selects where there are
     * vectors): the largest value of the row whatever the order (a NaN if there is one) */
#if defined(K_LANES_TREE) && defined(AG_REAL_DOUBLE)
    return k_tree16_max_pd(lane);
#elif defined(K_LANES_TREE)
    return k_tree16_max_ps(lane);
#else
    for (int w = K_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] = K_MAX_NAN(lane[l + w], lane[l]);
    return lane[0];
#endif
}

/* sum_j x_j */
static inline Real k_row_sum(const Real *x, int n) {
    Real s;
    K_LANES_SUM(Real, k_lanes_total, n, x[j], &s);
    return s;
}

/* sum_j x_j y_j */
static inline Real k_row_dot(const Real *x, const Real *y, int n) {
    Real s;
    K_LANES_SUM(Real, k_lanes_total, n, x[j] * y[j], &s);
    return s;
}

/* sum_j x_j y_j over the j where y_j != 0 (an x_j beside a y_j of 0 is not read into the sum,
 * so an infinite x_j there adds nothing) */
static inline Real k_row_dot_nz(const Real *x, const Real *y, int n) {
    Real s;
    K_LANES_SUM(Real, k_lanes_total, n, y[j] != 0 ? x[j] * y[j] : 0, &s);
    return s;
}

/* sum_j e^(x_j - m) (K_EXP: in vector lanes in the float build) */
static inline Real k_row_sum_exp(const Real *x, Real m, int n) {
    Real s;
    K_LANES_SUM(Real, k_lanes_total, n, K_EXP(x[j] - m), &s);
    return s;
}

/* in double: sum_j x_j, and given the mean, sum_j (x_j - mean)^2 */
static inline double k_row_sum_d(const Real *x, int n) {
    double s;
    K_LANES_SUM(double, k_lanes_total_d, n, (double)x[j], &s);
    return s;
}
static inline double k_row_sq_dev_d(const Real *x, double mean, int n) {
    double s;
    K_LANES_SUM(double, k_lanes_total_d, n, ((double)x[j] - mean) * ((double)x[j] - mean), &s);
    return s;
}

#endif
