/* test_math.c: k_expf and k_erff (src/tensor/k_math.h), the float exp and erf the kernels use
 * in vector lanes: their error in ulp over dense grids against the double functions, special
 * values, erf's symmetry, and the same bits from a vectorized loop as from one call at a time.
 * Not here: the kernels that use them (their op tests in tests/autograd). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/k_math.h"

/* |y - ref| in units of the float spacing at ref */
static double ulps(float y, double ref) {
    float r = (float)ref;
    double spacing = (double)nextafterf(fabsf(r), INFINITY) - (double)fabsf(r);
    return fabs((double)y - ref) / spacing;
}

Test(k_math, expf_is_within_1_5_ulp_on_its_range) {
    double worst = 0;
    for (int i = 0; i <= 2000000; i++) {
        float x = (float)(-87.0 + 175.3 * i / 2000000.0);
        worst = fmax(worst, ulps(k_expf(x), exp((double)x)));
    }
    cr_assert_leq(worst, 1.5, "worst %.3f ulp", worst);
}

Test(k_math, expf_special_values) {
    cr_assert_eq(k_expf(0.0f), 1.0f);
    cr_assert_eq(k_expf(-INFINITY), 0.0f);
    cr_assert_eq(k_expf(-1000.0f), 0.0f);
    cr_assert(isinf(k_expf(INFINITY)) && k_expf(INFINITY) > 0);
    cr_assert(isinf(k_expf(89.0f)));
    cr_assert(isfinite(k_expf(88.37f)));
    cr_assert(isnan(k_expf(NAN)));
}

Test(k_math, erff_is_within_8_ulp_and_odd) {
    double worst = 0;
    for (int i = 1; i <= 2000000; i++) {
        float x = (float)(6.0 * i / 2000000.0);
        float y = k_erff(x);
        worst = fmax(worst, ulps(y, erf((double)x)));
        cr_assert_eq(k_erff(-x), -y, "erf(-%.9g) is not -erf(%.9g)", (double)x, (double)x);
        cr_assert_leq(y, 1.0f);
    }
    /* small arguments keep their relative precision (erf x ~ 2x/sqrt(pi)) */
    for (float x = 1e-30f; x < 1e-3f; x *= 3.7f)
        worst = fmax(worst, ulps(k_erff(x), erf((double)x)));
    cr_assert_leq(worst, 8.0, "worst %.3f ulp", worst);
}

Test(k_math, erff_special_values) {
    cr_assert_eq(k_erff(0.0f), 0.0f);
    cr_assert_eq(k_erff(INFINITY), 1.0f);
    cr_assert_eq(k_erff(-INFINITY), -1.0f);
    cr_assert_eq(k_erff(10.0f), 1.0f);
    cr_assert(isnan(k_erff(NAN)));
}

/* one value at a time, never vectorized */
__attribute__((noinline)) static float one_exp(float x) { return k_expf(x); }
__attribute__((noinline)) static float one_erf(float x) { return k_erff(x); }

Test(k_math, vector_lanes_and_single_calls_give_the_same_bits) {
    enum { N = 4099 }; /* not a multiple of any vector width: a scalar tail too */
    static float x[N], ye[N], yf[N];
    for (int i = 0; i < N; i++) x[i] = (float)(-30.0 + 60.0 * i / N) + 1e-3f * (float)(i % 7);
    for (int i = 0; i < N; i++) ye[i] = k_expf(x[i]);
    for (int i = 0; i < N; i++) yf[i] = k_erff(x[i]);
    for (int i = 0; i < N; i++) {
        float e = one_exp(x[i]), f = one_erf(x[i]);
        cr_assert(memcmp(&e, &ye[i], sizeof e) == 0, "exp(%.9g): %.9g vs %.9g", (double)x[i],
                  (double)e, (double)ye[i]);
        cr_assert(memcmp(&f, &yf[i], sizeof f) == 0, "erf(%.9g)", (double)x[i]);
    }
}
