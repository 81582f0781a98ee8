/* test_linear.c: the fused Linear op against the two ops it replaces, ag_matmul_bt followed by
 * ag_add_bias. While K fits one GEMM block the bias starting the sums rounds exactly like a bias
 * added afterwards, so outputs and gradients must match to the bit; past one block they differ
 * only by rounding. Gradients against finite differences are in test_gradcheck.c (the linear
 * rows of tests/support/cases.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "cases.h"

typedef struct {
    Real y[64 * 24], gx[64 * 600], gw[24 * 600], gb[24];
} Result;

/* x (rows, K) W (N, K) b (N); fused or composed; loss = sum(y * R) */
static void run(int fused, int rows, int K, int N, Result *r) {
    TestEnv e = test_env_new();
    Rng rng;
    rng_seed(&rng, 31);
    Tensor *x = tensor_new2(e.params, rows, K, "x"), *W = tensor_new2(e.params, N, K, "W");
    Tensor *b = tensor_new1(e.params, N, "b"), *R = tensor_new2(e.params, rows, N, "R");
    Tensor *all[4] = {x, W, b, R};
    for (int t = 0; t < 4; t++) {
        for (size_t i = 0; i < all[t]->size; i++) all[t]->data[i] = (Real)rng_normal(&rng);
        if (t < 3) tensor_requires_grad(all[t]);
    }
    Tensor *y =
        fused ? ag_linear(e.tape, x, W, b) : ag_add_bias(e.tape, ag_matmul_bt(e.tape, x, W), b);
    ag_backward(e.tape, ag_sum(e.tape, ag_mul(e.tape, y, R)));
    memcpy(r->y, y->data, y->size * sizeof(Real));
    memcpy(r->gx, x->grad, x->size * sizeof(Real));
    memcpy(r->gw, W->grad, W->size * sizeof(Real));
    memcpy(r->gb, b->grad, b->size * sizeof(Real));
    test_env_free(&e);
}

static Result fused, composed;

Test(ag_linear, equals_matmul_bt_plus_add_bias_to_the_bit_within_one_k_block) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    int rows = 37, K = kc < 200 ? kc : 200, N = 21;
    run(1, rows, K, N, &fused);
    run(0, rows, K, N, &composed);
    cr_assert(memcmp(fused.y, composed.y, (size_t)rows * N * sizeof(Real)) == 0);
    cr_assert(memcmp(fused.gx, composed.gx, (size_t)rows * K * sizeof(Real)) == 0);
    cr_assert(memcmp(fused.gw, composed.gw, (size_t)N * K * sizeof(Real)) == 0);
    cr_assert(memcmp(fused.gb, composed.gb, (size_t)N * sizeof(Real)) == 0);
}

Test(ag_linear, matches_matmul_bt_plus_add_bias_over_several_k_blocks) {
    int rows = 64, K = 600, N = 24;
    run(1, rows, K, N, &fused);
    run(0, rows, K, N, &composed);
    double tol = sizeof(Real) == sizeof(double) ? 1e-12 : 2e-5, worst = 0;
    for (int i = 0; i < rows * N; i++) {
        double d = fabs((double)fused.y[i] - (double)composed.y[i]);
        worst = fmax(worst, d / fmax(1.0, fabs((double)composed.y[i])));
    }
    cr_assert(worst <= tol, "max relative difference %g", worst);
    cr_assert(memcmp(fused.gw, composed.gw, (size_t)N * K * sizeof(Real)) == 0);
}
