/* test_lanes.c: k_lanes.h's row reductions in vector registers (k_row_sum_v, k_row_max_v,
 * k_row_dot_nz_v: AVX-512 and AVX2 builds; other builds map them to the plain forms) give the
 * bits of the plain ones (k_row_sum, k_row_max, k_row_dot_nz) for every row length from 0 to
 * 70 (whole blocks of 16 lanes and every tail), on random values and on rows holding
 * infinities, NaN, zeros of both signs and values of very different sizes.
 * Not here: the kernels that use them (attention's tests in tests/autograd and
 * tests/tensor/test_attention_ref.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/k_lanes.h"
#include "tensor/rng.h"

/* the same bits, or both NaN */
static int same(Real a, Real b) {
    if (a != a && b != b) return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* row e (n values, exactly n allocated) of kind 0 (uniform in [-1, 1)), 1 (some infinities,
 * NaN, signed zeros), 2 (sizes from 1e-30 to 1e30), 3 (half zeros: for the dot's y) */
static Real *row(Rng *rng, int n, int kind) {
    Real *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(Real));
    for (int j = 0; j < n; j++) {
        Real u = (Real)(2 * rng_uniform(rng) - 1);
        x[j] = u;
        if (kind == 1) {
            double r = rng_uniform(rng);
            x[j] = r < 0.05   ? (Real)INFINITY
                   : r < 0.1  ? -(Real)INFINITY
                   : r < 0.13 ? (Real)NAN
                   : r < 0.2  ? (Real)-0.0
                   : r < 0.25 ? (Real)0.0
                              : u;
        } else if (kind == 2) {
            x[j] = u * (Real)pow(10.0, 60 * rng_uniform(rng) - 30);
        } else if (kind == 3) {
            x[j] = rng_uniform(rng) < 0.5 ? 0 : u;
        }
    }
    return x;
}

Test(k_lanes, the_register_forms_give_the_bits_of_the_plain_ones) {
    Rng rng;
    rng_seed(&rng, 19);
    int checked = 0;
    for (int n = 0; n <= 70; n++)
        for (int kind = 0; kind < 4; kind++)
            for (int rep = 0; rep < 8; rep++) {
                Real *x = row(&rng, n, kind), *y = row(&rng, n, (kind + rep) % 4);
                Real s = k_row_sum(x, n), sv = k_row_sum_v(x, n);
                Real m = k_row_max(x, n), mv = k_row_max_v(x, n);
                Real d = k_row_dot_nz(x, y, n), dv = k_row_dot_nz_v(x, y, n);
                cr_assert(same(s, sv), "sum n %d kind %d rep %d: %.9g vs %.9g", n, kind, rep,
                          (double)s, (double)sv);
                cr_assert(same(m, mv), "max n %d kind %d rep %d: %.9g vs %.9g", n, kind, rep,
                          (double)m, (double)mv);
                cr_assert(same(d, dv), "dot n %d kind %d rep %d: %.9g vs %.9g", n, kind, rep,
                          (double)d, (double)dv);
                checked += 3;
                free(x), free(y);
            }
    cr_assert_eq(checked, 71 * 4 * 8 * 3);
}

Test(k_lanes, the_register_forms_of_an_empty_row) {
    Real x = 1;
    cr_assert_eq(k_row_sum_v(&x, 0), 0);
    cr_assert_eq(k_row_dot_nz_v(&x, &x, 0), 0);
    cr_assert(isinf(k_row_max_v(&x, 0)) && k_row_max_v(&x, 0) < 0);
}
