/* test_elementwise.c: ag_silu beyond the gradient check of the case table: values against
 * x / (1 + e^-x) in double, and inputs far out on both sides (finite, no NaN, the limits x and
 * 0); sub, mul and sum setting the fresh gradients of intermediates (the tape's store bits).
 * The gradient checks of every elementwise op are cases in tests/support/cases.c. */
#include <criterion/criterion.h>
#include <math.h>

#include "cases.h"

#ifdef AG_REAL_DOUBLE
#define TIGHT 1e-14
#else
#define TIGHT 1e-6
#endif

Test(ag_silu, matches_x_over_one_plus_exp_minus_x) {
    TestEnv env = test_env_new();
    Tensor *x = tensor_new1(env.params, 201, "x");
    for (int i = 0; i < 201; i++) x->data[i] = (Real)((i - 100) * 0.1);
    Tensor *y = ag_silu(env.tape, x);
    for (int i = 0; i < 201; i++) {
        double v = (double)x->data[i], want = v / (1 + exp(-v));
        cr_assert(fabs((double)y->data[i] - want) <= TIGHT * fmax(1, fabs(want)),
                  "silu(%g) = %.17g, expected %.17g", v, (double)y->data[i], want);
    }
    test_env_free(&env);
}

/* e^-x overflows for x far below 0: the output must be (minus) zero and the gradient zero,
 * not NaN; far above 0 the output is x and the gradient 1 */
Test(ag_silu, far_inputs_give_the_limits_without_nan) {
    TestEnv env = test_env_new();
    const Real v[] = {-1000, -200, -90, 90, 200, 1000};
    enum { N = sizeof v / sizeof v[0] };
    Tensor *x = tensor_new1(env.params, N, "x");
    for (int i = 0; i < N; i++) x->data[i] = v[i];
    tensor_requires_grad(x);
    Tensor *y = ag_silu(env.tape, x);
    ag_backward(env.tape, ag_sum(env.tape, y));
    for (int i = 0; i < N; i++) {
        double yi = (double)y->data[i], gi = (double)x->grad[i];
        cr_assert(isfinite(yi) && isfinite(gi), "silu(%g) = %g, gradient %g", (double)v[i], yi, gi);
        if (v[i] < 0) {
            cr_assert(fabs(yi) < 1e-30, "silu(%g) = %g", (double)v[i], yi);
            cr_assert(fabs(gi) < 1e-30, "silu'(%g) = %g", (double)v[i], gi);
        } else {
            cr_assert_eq(yi, (double)v[i], "silu(%g) = %.17g", (double)v[i], yi);
            cr_assert_eq(gi, 1.0, "silu'(%g) = %.17g", (double)v[i], gi);
        }
    }
    test_env_free(&env);
}

/* a = 2x and b = 3x are intermediates, so their gradient buffers are new when sub or mul runs
 * its backward: the tape marks both in node->store and the op sets them (=); sum sets its
 * input's. n crosses the kernels' chunks of 4096 (a debug build fills a buffer to be set with
 * NaN, so an element left unset shows up). d sum(a - b)/dx = 2 - 3 = -1, d sum(a b)/dx = 12 x. */
static void check_sets_fresh_gradients(int mul) {
    TestEnv env = test_env_new();
    enum { N = 5000 };
    Tensor *x = tensor_new1(env.params, N, "x");
    for (int i = 0; i < N; i++) x->data[i] = (Real)((i % 97) * 0.01 - 0.5);
    tensor_requires_grad(x);
    Tensor *a = ag_scale(env.tape, x, 2), *b = ag_scale(env.tape, x, 3);
    Tensor *y = mul ? ag_mul(env.tape, a, b) : ag_sub(env.tape, a, b);
    ag_backward(env.tape, ag_sum(env.tape, y));
    AgNode *sum = env.tape->last, *op = sum->prev;
    cr_assert_eq(sum->store, 1u, "sum sets its input's gradient: store %u", sum->store);
    cr_assert_eq(op->store, 3u, "%s sets both inputs' gradients: store %u", mul ? "mul" : "sub",
                 op->store);
    for (int i = 0; i < N; i++) {
        double want = mul ? 12 * (double)x->data[i] : -1.0, got = (double)x->grad[i];
        cr_assert(fabs(got - want) <= TIGHT * 8 * fmax(1, fabs(want)),
                  "%s: x->grad[%d] = %.17g, expected %.17g", mul ? "mul" : "sub", i, got, want);
    }
    test_env_free(&env);
}

Test(ag_sub, sets_the_fresh_gradients_of_both_inputs) { check_sets_fresh_gradients(0); }
Test(ag_mul, sets_the_fresh_gradients_of_both_inputs) { check_sets_fresh_gradients(1); }
