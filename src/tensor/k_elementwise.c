/* k_elementwise.c: forward/backward pairs of the elementwise kernels (add, sub, mul, bias,
 * scale, relu, gelu, gelu_tanh, silu, dropout). Every output element depends on one input position, so the
 * loops split freely across threads. Next: k_matmul.c. */
#include <math.h>

#include "k_math.h"
#include "kernels.h"
#include "rng.h"

#define PAR_FOR _Pragma("omp parallel for schedule(static) if (n >= K_PAR_MIN)")

void k_add_forward(Real *y, const Real *a, const Real *b, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
/* g[i0, i1) = gy (store) or += gy; nothing when g is NULL. Branch-free inner loops, so that
 * they run in vector lanes. */
enum { ADD_CHUNK = 4096 };
static void add_or_store(Real *g, const Real *gy, size_t i0, size_t i1, int store) {
    if (!g) return;
    if (store)
        for (size_t i = i0; i < i1; i++) g[i] = gy[i];
    else
        for (size_t i = i0; i < i1; i++) g[i] += gy[i];
}
/* forward: y = a + b, so dy/da = dy/db = 1: both inputs receive gy unchanged. In chunks, so
 * that each input's loop is one branch-free pass (vector lanes) over a chunk still in cache. */
void k_add_backward(Real *ga, Real *gb, const Real *gy, size_t n, unsigned store) {
    int sa = store & 1, sb = (store >> 1) & 1;
    PAR_FOR
    for (size_t c = 0; c < (n + ADD_CHUNK - 1) / ADD_CHUNK; c++) {
        size_t i0 = c * ADD_CHUNK, i1 = n - i0 < ADD_CHUNK ? n : i0 + ADD_CHUNK;
        add_or_store(ga, gy, i0, i1, sa);
        add_or_store(gb, gy, i0, i1, sb);
    }
}

void k_sub_forward(Real *y, const Real *a, const Real *b, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = a[i] - b[i];
}
/* forward: y = a - b, so a receives gy and b receives -gy (in chunks, as k_add_backward) */
void k_sub_backward(Real *ga, Real *gb, const Real *gy, size_t n, unsigned store) {
    int sa = store & 1, sb = (store >> 1) & 1;
    PAR_FOR
    for (size_t c = 0; c < (n + ADD_CHUNK - 1) / ADD_CHUNK; c++) {
        size_t i0 = c * ADD_CHUNK, i1 = n - i0 < ADD_CHUNK ? n : i0 + ADD_CHUNK;
        add_or_store(ga, gy, i0, i1, sa);
        if (gb && sb)
            for (size_t i = i0; i < i1; i++) gb[i] = -gy[i];
        else if (gb)
            for (size_t i = i0; i < i1; i++) gb[i] -= gy[i];
    }
}

void k_mul_forward(Real *y, const Real *a, const Real *b, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}
/* g[i0, i1) = gy * other (store) or += gy * other; nothing when g is NULL */
static void mul_add_or_store(Real *g, const Real *gy, const Real *other, size_t i0, size_t i1,
                             int store) {
    if (!g) return;
    if (store)
        for (size_t i = i0; i < i1; i++) g[i] = gy[i] * other[i];
    else
        for (size_t i = i0; i < i1; i++) g[i] += gy[i] * other[i];
}
/* forward: y = a * b, so dy/da = b and dy/db = a. In chunks, a's gradient before b's in each:
 * with a and b one tensor (ga = gb) every element still gets gy b, then gy a. */
void k_mul_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy, size_t n,
                    unsigned store) {
    int sa = store & 1, sb = (store >> 1) & 1;
    PAR_FOR
    for (size_t c = 0; c < (n + ADD_CHUNK - 1) / ADD_CHUNK; c++) {
        size_t i0 = c * ADD_CHUNK, i1 = n - i0 < ADD_CHUNK ? n : i0 + ADD_CHUNK;
        mul_add_or_store(ga, gy, b, i0, i1, sa);
        mul_add_or_store(gb, gy, a, i0, i1, sb);
    }
}

void k_add_bias_forward(Real *y, const Real *x, const Real *bias, size_t rows, int C) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) y[r * C + c] = x[r * C + c] + bias[c];
}
/* forward: y[r,c] = x[r,c] + bias[c]; x gets gy as is, bias[c] gets the sum of column c
 * (k_sum_rows: threads split the columns, each sums its columns over the rows in row order) */
void k_add_bias_backward(Real *gx, Real *gbias, const Real *gy, size_t rows, int C, int store) {
    size_t n = rows * (size_t)C;
    if (gx && store) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] = gy[i];
    } else if (gx) {
        k_accumulate(gx, gy, n);
    }
    if (gbias) k_sum_rows(gbias, gy, rows, C);
}

void k_scale_forward(Real *y, const Real *x, Real s, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = s * x[i];
}
/* forward: y = s x, so gx = s gy (stored, or added) */
void k_scale_backward(Real *gx, const Real *gy, Real s, size_t n, int store) {
    if (store) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] = s * gy[i];
    } else {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] += s * gy[i];
    }
}

void k_relu_forward(Real *y, const Real *x, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}
/* forward: y = max(x, 0); the slope is 1 where x > 0 (equivalently y > 0) and 0 elsewhere */
void k_relu_backward(Real *gx, const Real *y, const Real *gy, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++)
        if (y[i] > 0) gx[i] += gy[i];
}

#define INV_SQRT2 ((Real)0.70710678118654752440)
#define INV_SQRT_2PI ((Real)0.39894228040143267794)

/* in the build's precision: erff and expf in the float build (each within about an ulp) */
void k_gelu_forward(Real *y, const Real *x, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = (Real)0.5 * x[i] * (1 + K_ERF(x[i] * INV_SQRT2));
}
/* forward: y = x Phi(x) with Phi the normal CDF (the exact erf form, not the tanh one);
 * dy/dx = Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi) the normal density.
 * store: gx is a fresh buffer, written (=) instead of added to (the tape then spares zeroing
 * it: a GPT's MLP hands over a new (B, T, 4C) gradient each layer). */
void k_gelu_backward(Real *gx, const Real *x, const Real *gy, size_t n, int store) {
    /* EXERCISE(gelu): dL/dx into gx for y = gelu(x) = x Phi(x), elementwise.
     *   x, gy, gx (n): the forward's input, dL/dy, dL/dx
     *   store: 1: gx is a fresh buffer, write it (=); 0: accumulate (+=)
     * Phi is the normal CDF, 0.5 (1 + erf(x / sqrt 2)) (K_ERF, INV_SQRT2, INV_SQRT_2PI in
     * k_math.h). The derivative is in GELU's row of src/autograd/ops.def; docs/backprop.md
     * section 12 does the same for SiLU.
     * STUB: for (size_t i = 0; store && i < n; i++) gx[i] = 0;
     * STUB: (void)x; (void)gy; */
    /* Phi(v) + v phi(v); two loops, so that neither has a branch and both run in vector
     * lanes (with store, the old gx is never read) */
#define GELU_SLOPE(v)                                                                              \
    ((Real)0.5 * (1 + K_ERF((v)*INV_SQRT2)) + (v) * (INV_SQRT_2PI * K_EXP((Real)-0.5 * (v) * (v))))
    if (store) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] = gy[i] * GELU_SLOPE(x[i]);
    } else {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] += gy[i] * GELU_SLOPE(x[i]);
    }
#undef GELU_SLOPE
    /* END EXERCISE */
}

/* GPT-2's GELU (HF's gelu_new, PyTorch's gelu(approximate='tanh')):
 *   y = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).
 * Computed as y = x s with s = (1 + tanh u) / 2 = 1 / (1 + e^(-2u)) (the same function: no
 * cancellation where tanh u is near -1, and K_EXP runs in vector lanes where tanh is a call).
 * Far below 0, e^(-2u) overflows to inf and s is 0; x^3 overflowing gives u = -inf, also s = 0. */
#define GELU_TANH_K ((Real)0.79788456080286535588) /* sqrt(2 / pi) */
#define GELU_TANH_C ((Real)0.044715)
static inline Real gelu_tanh_e(Real x) { /* e^(-2u) */
    return K_EXP(-2 * GELU_TANH_K * (x + GELU_TANH_C * x * x * x));
}
void k_gelu_tanh_forward(Real *y, const Real *x, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = x[i] / (1 + gelu_tanh_e(x[i]));
}
/* forward: y = x s(u(x)) with s = sigmoid(2u), so ds/dx = 2 s (1 - s) u'(x),
 * u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2); dy/dx = s + 2 x s (1 - s) u'(x) (in tanh's terms
 * 0.5 (1 + t) + 0.5 x (1 - t^2) u'). s (1 - s) is taken as e s^2 with e = e^(-2u) (1 - s
 * rounded from s near 1 would keep few bits); where e is inf, or s (1 - s) is 0, the second
 * term is 0 (not 0 * inf: x^3 overflows first). store: gx is a fresh buffer, written (=). */
static inline Real gelu_tanh_slope(Real x) {
    Real e = gelu_tanh_e(x), s = 1 / (1 + e);
    Real ss = e < (Real)INFINITY ? e * s * s : 0;
    Real du = GELU_TANH_K * (1 + 3 * GELU_TANH_C * x * x);
    return s + (ss > 0 ? 2 * x * ss * du : 0);
}
void k_gelu_tanh_backward(Real *gx, const Real *x, const Real *gy, size_t n, int store) {
    if (store) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] = gy[i] * gelu_tanh_slope(x[i]);
    } else {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] += gy[i] * gelu_tanh_slope(x[i]);
    }
}

/* sigmoid(x) = 1 / (1 + e^-x). For x far below 0, e^-x overflows to inf and the result is 0,
 * not NaN, so silu(x) = x * 0 there. */
static inline Real sigmoid(Real x) { return 1 / (1 + K_EXP(-x)); }

void k_silu_forward(Real *y, const Real *x, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = x[i] * sigmoid(x[i]);
}
/* forward: y = x s(x) with s the logistic sigmoid, whose derivative is s (1 - s); so
 * dy/dx = s + x s (1 - s) = s (1 + x (1 - s)), recomputed from the saved input x */
void k_silu_backward(Real *gx, const Real *x, const Real *gy, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) {
        Real s = sigmoid(x[i]);
        gx[i] += gy[i] * (s * (1 + x[i] * (1 - s)));
    }
}

/* Element i is kept when its hashed uniform u 2^-53 in [0, 1) is >= p, u = rng_hash(key, i) >>
 * 11: a pure function of (key, i). u < 2^53 is exact in double and so are u 2^-53 and p 2^53
 * (powers of two), so u 2^-53 >= p exactly when the integer u >= ceil(p 2^53): the test is one
 * integer compare, and with the hash inline the loops run in vector lanes (a call to rng_hash
 * per element took 2.5 ns). */
static uint64_t dropout_threshold(double p) { return (uint64_t)ceil(p * 0x1.0p53); }
static inline int dropout_keep(uint64_t key, size_t i, uint64_t threshold) {
    return (k_hash(key, i) >> 11) >= threshold;
}

void k_dropout_forward(Real *y, const Real *x, uint64_t key, double p, size_t n) {
    Real scale = (Real)(1.0 / (1.0 - p));
    uint64_t th = dropout_threshold(p);
    PAR_FOR
    for (size_t i = 0; i < n; i++) y[i] = dropout_keep(key, i, th) ? x[i] * scale : 0;
}
/* forward: y = x m / (1 - p) with m the 0/1 mask; the same mask, recomputed from the key,
 * passes or stops each gradient with the same scale (a dropped element's gradient is left as it
 * was, written back: a choice between two values, not a store or none; or set to 0 by store) */
void k_dropout_backward(Real *gx, const Real *gy, uint64_t key, double p, size_t n, int store) {
    Real scale = (Real)(1.0 / (1.0 - p));
    uint64_t th = dropout_threshold(p);
    if (store) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) gx[i] = dropout_keep(key, i, th) ? gy[i] * scale : 0;
    } else {
        PAR_FOR
        for (size_t i = 0; i < n; i++)
            gx[i] = dropout_keep(key, i, th) ? gx[i] + gy[i] * scale : gx[i];
    }
}
