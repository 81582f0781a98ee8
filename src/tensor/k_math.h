/* k_math.h: exp, erf and log for the kernels' inner loops (softmax, cross-entropy, attention,
 * GELU), in the build's precision: K_EXP, K_ERF, K_LOG. The double build calls the C library's
 * exp, erf and log; the float build logf (once per row, never in an inner loop). The float build uses k_expf and k_erff below: straight-line float arithmetic
 * with no call and no branch, which the compiler runs in vector lanes (16 values an
 * instruction with AVX-512), where expf and erff are calls that take one value at a time. A
 * value is the same whether a vector lane or a scalar loop computes it (no FMA contraction
 * under -std=c11, and the same operations in the same order), so results do not depend on how
 * a loop is split. Accuracy, measured against the exact functions over all floats of the
 * ranges that matter: k_expf within 1.2 ulp on [-87.3, 88.3]; k_erff within 7 ulp, and
 * 1.3 ulp on average.
 * Not here: the kernels (k_*.c). */
#ifndef ATTOGRAD_K_MATH_H
#define ATTOGRAD_K_MATH_H

#include <math.h>
#include <stdint.h>

#include "tensor.h"

/* the bits of a float and back (type punning through a union is defined in C11) */
static inline uint32_t k_float_bits(float x) {
    union {
        float f;
        uint32_t u;
    } v = {x};
    return v.u;
}
static inline float k_bits_float(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } v = {u};
    return v.f;
}

/* e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2]: ln 2 in two
 * parts (the first exact in 9 bits, so n * part is exact: Cody and Waite's reduction), e^r
 * by its Taylor series to r^7 (error below 1e-8 on that interval), 2^n put straight into the
 * exponent bits. Rounding to n adds 1.5 * 2^23 (the float whose unit is 1), which leaves n in
 * the low mantissa bits. Below -88 the result is 0 (true values there are under 2^-126,
 * denormal); above 88.376 it is +inf; NaN stays NaN. */
static inline float k_expf(float x) {
    const float shift = 12582912.0f; /* 1.5 * 2^23 */
    float xc = x < -88.0f ? -88.0f : x > 88.375f ? 88.375f : x;
    float t = xc * 1.44269504088896341f + shift;
    float n = t - shift;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t e = (k_float_bits(t) - k_float_bits(shift) + 127u) << 23; /* 2^n; n = -127: 0 */
    float y = p * k_bits_float(e);
    return x > 88.3762626647949f ? INFINITY : y;
}

/* erf(x) = x P(x^2) / Q(x^2) for |x| <= 4, with P of degree 6 and Q of degree 4: a rational
 * fit by weighted least squares of erf(x)/x on [0, 4] (relative error 6.5e-8 before float
 * rounding; bench/fit_erf.py computes it). erf is odd; past 4 it is 1 in float. */
static inline float k_erff(float x) {
    float a = fabsf(x);
    a = a > 4.0f ? 4.0f : a;
    float s = a * a;
    float p = 1.9110465763927755e-08f;
    p = p * s + -1.9423022718326727e-06f;
    p = p * s + 0.0001472887703303804f;
    p = p * s + 0.003990700624354904f;
    p = p * s + 0.05152529860536302f;
    p = p * s + 0.20712850651784778f;
    p = p * s + 1.1283790939573493f;
    float q = 0.0010211412887991466f;
    q = q * s + 0.014958336653009167f;
    q = q * s + 0.11797207845838568f;
    q = q * s + 0.5168941071804425f;
    q = q * s + 1.0f;
    float y = a * p / q;
    y = y > 1.0f ? 1.0f : y;
    return copysignf(y, x);
}

#ifdef AG_REAL_DOUBLE
#define K_EXP exp
#define K_ERF erf
#define K_LOG log
#else
#define K_EXP k_expf
#define K_ERF k_erff
#define K_LOG logf
#endif

#endif
