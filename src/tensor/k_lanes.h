/* k_lanes.h: the row reductions of the kernels (max, sums, dot products over a row), each in a
 * fixed order: K_LANES running values side by side (element j goes to lane j % K_LANES), then
 * the lanes combined as a tree, halves added lane by lane. The order depends only on the row's
 * length, never on threads or on where the row sits, so a row gives the same bits wherever it
 * is reduced; and the lanes advance together in vector registers, where one running sum would
 * wait on each add. Softmax, log-softmax and cross-entropy (k_softmax.c), attention's softmax
 * (k_attention.c) sum in Real; LayerNorm's row statistics (k_layernorm.c) in double (they must
 * survive a large common offset), its backward's row sums in Real.
 * Not here: sums over rows (a weight gradient's: k_layernorm.c, k_reduce.c), the products'
 * sums (k_simd.h's tiles). Read next: k_softmax.c. */
#ifndef ATTOGRAD_K_LANES_H
#define ATTOGRAD_K_LANES_H

#include <math.h>

#include "k_math.h"
#include "k_simd.h"
#include "tensor.h"

#define K_LANES 16

/* lane[0] + ... + lane[K_LANES - 1] as a tree (the lanes are overwritten); unrolled, so that
 * each level is a few vector adds instead of a loop of scalar ones */
static inline Real k_lanes_total(Real *lane) {
    UNROLL for (int w = K_LANES / 2; w > 0; w /= 2) {
        UNROLL for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    }
    return lane[0];
}
static inline double k_lanes_total_d(double *lane) {
    UNROLL for (int w = K_LANES / 2; w > 0; w /= 2) {
        UNROLL for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    }
    return lane[0];
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

/* max_j x_j (exact: any order gives the same value; -inf for n = 0), passing over NaN: each
 * step is x > m ? x : m, which is one vector max instruction, where a NaN-aware select cost
 * attention's softmax a fifth of its time. A NaN x_j still reaches a softmax's result through
 * e^(x_j - m); a caller that treats a max of -inf as "no visible key" checks that the row has
 * no NaN before it does (k_attention.c's softmax_row). */
#define K_MAX(a, b) ((a) > (b) ? (a) : (b))
static inline Real k_row_max(const Real *x, int n) {
    Real lane[K_LANES];
    for (int l = 0; l < K_LANES; l++) lane[l] = -(Real)INFINITY;
    int j = 0;
    for (; j + K_LANES <= n; j += K_LANES)
        for (int l = 0; l < K_LANES; l++) lane[l] = K_MAX(x[j + l], lane[l]);
    for (int l = 0; j + l < n; l++) lane[l] = K_MAX(x[j + l], lane[l]);
    UNROLL for (int w = K_LANES / 2; w > 0; w /= 2) {
        UNROLL for (int l = 0; l < w; l++) lane[l] = K_MAX(lane[l + w], lane[l]);
    }
    return lane[0];
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

/* ---- the same reductions in vector registers (the AVX-512 and AVX2 families: K_HAVE_VREDUCE)
 * The K_LANES lanes are K_LANES / VLEN vectors (lane l in vector l / VLEN), each step the same
 * operation on the same lane as above, the tail's lanes from partial loads (the others get 0,
 * or -inf for the max: a lane's value plus 0 is itself, as a lane is never -0), the tree first
 * across the vectors, then within one (vhsum, vhmax): the same bits as k_row_sum, k_row_max and
 * k_row_dot_nz, without the round trip of the lanes through memory that the tree above makes
 * (a quarter of attention's softmax). ---- */
#ifdef K_HAVE_VREDUCE
#define K_NV (K_LANES / VLEN)

static inline Real k_vlanes_total(Vec *acc) {
    UNROLL for (int w = K_NV / 2; w > 0; w /= 2) {
        UNROLL for (int l = 0; l < w; l++) acc[l] = vadd(acc[l], acc[l + w]);
    }
    return vhsum(acc[0]);
}

/* vector v of the K_LANES values from x (the row's block at j, n values in the row): whole,
 * partial, or fill past the row's end */
static inline Vec k_vlanes_load(const Real *x, int j, int n, int v, Vec fill) {
    int c = n - j - v * VLEN;
    return c >= VLEN ? vload(x + j + v * VLEN)
           : c > 0   ? vload_part(x + j + v * VLEN, c, fill)
                     : fill;
}

static inline Real k_row_sum_v(const Real *x, int n) {
    Vec acc[K_NV], z = vzero();
    UNROLL for (int v = 0; v < K_NV; v++) acc[v] = z;
    int j = 0;
    for (; j + K_LANES <= n; j += K_LANES) {
        UNROLL for (int v = 0; v < K_NV; v++) acc[v] = vadd(acc[v], vload(x + j + v * VLEN));
    }
    if (j < n) {
        UNROLL for (int v = 0; v < K_NV; v++) acc[v] = vadd(acc[v], k_vlanes_load(x, j, n, v, z));
    }
    return k_vlanes_total(acc);
}

static inline Real k_row_max_v(const Real *x, int n) {
    Vec acc[K_NV], ninf = vset1(-(Real)INFINITY);
    UNROLL for (int v = 0; v < K_NV; v++) acc[v] = ninf;
    int j = 0;
    for (; j + K_LANES <= n; j += K_LANES) {
        UNROLL for (int v = 0; v < K_NV; v++) acc[v] = vmaxv(vload(x + j + v * VLEN), acc[v]);
    }
    if (j < n) {
        UNROLL for (int v = 0; v < K_NV; v++) acc[v] =
            vmaxv(k_vlanes_load(x, j, n, v, ninf), acc[v]);
    }
    UNROLL for (int w = K_NV / 2; w > 0; w /= 2) {
        UNROLL for (int l = 0; l < w; l++) acc[l] = vmaxv(acc[l + w], acc[l]);
    }
    return vhmax(acc[0]);
}

static inline Real k_row_dot_nz_v(const Real *x, const Real *y, int n) {
    Vec acc[K_NV], z = vzero();
    UNROLL for (int v = 0; v < K_NV; v++) acc[v] = z;
    int j = 0;
    for (; j + K_LANES <= n; j += K_LANES) {
        UNROLL for (int v = 0; v < K_NV; v++) {
            Vec yv = vload(y + j + v * VLEN);
            acc[v] = vadd(acc[v], vnz(vmul(vload(x + j + v * VLEN), yv), yv));
        }
    }
    if (j < n) {
        UNROLL for (int v = 0; v < K_NV; v++) {
            Vec yv = k_vlanes_load(y, j, n, v, z);
            acc[v] = vadd(acc[v], vnz(vmul(k_vlanes_load(x, j, n, v, z), yv), yv));
        }
    }
    return k_vlanes_total(acc);
}
#else
#define k_row_sum_v k_row_sum
#define k_row_max_v k_row_max
#define k_row_dot_nz_v k_row_dot_nz
#endif

#endif
