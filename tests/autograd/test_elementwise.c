/* test_elementwise.c: ag_silu beyond the gradient check of the case table: values against
 * x / (1 + e^-x) in double, and inputs far out on both sides (finite, no NaN, the limits x and
 * 0); ag_gelu_tanh against PyTorch's values (committed) and far out; sub, mul and sum setting the fresh gradients of intermediates (the tape's store bits);
 * dropout's mask against its definition on rng_hash. The gradient checks of every elementwise
 * op are cases in tests/support/cases.c. */
#include <criterion/criterion.h>
#include <math.h>

#include "cases.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

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

/* op at v[0..n) far out on both sides: finite, never NaN; below 0 the output and gradient (minus)
 * zero, above it the output x and the gradient 1 */
static void check_far_limits(Tensor *(*op)(Tape *, Tensor *), const char *name, const Real *v,
                             int n) {
    TestEnv env = test_env_new();
    Tensor *x = tensor_new1(env.params, n, "x");
    for (int i = 0; i < n; i++) x->data[i] = v[i];
    tensor_requires_grad(x);
    Tensor *y = op(env.tape, x);
    ag_backward(env.tape, ag_sum(env.tape, y));
    for (int i = 0; i < n; i++) {
        double yi = (double)y->data[i], gi = (double)x->grad[i];
        cr_assert(isfinite(yi) && isfinite(gi), "%s(%g) = %g, gradient %g", name, (double)v[i], yi,
                  gi);
        if (v[i] < 0) {
            cr_assert(fabs(yi) < 1e-30, "%s(%g) = %g", name, (double)v[i], yi);
            cr_assert(fabs(gi) < 1e-30, "%s'(%g) = %g", name, (double)v[i], gi);
        } else {
            cr_assert_eq(yi, (double)v[i], "%s(%g) = %.17g", name, (double)v[i], yi);
            cr_assert_eq(gi, 1.0, "%s'(%g) = %.17g", name, (double)v[i], gi);
        }
    }
    test_env_free(&env);
}

/* e^-x overflows for x far below 0: the output must be (minus) zero and the gradient zero,
 * not NaN; far above 0 the output is x and the gradient 1 */
Test(ag_silu, far_inputs_give_the_limits_without_nan) {
    const Real v[] = {-1000, -200, -90, 90, 200, 1000};
    check_far_limits(ag_silu, "silu", v, (int)(sizeof v / sizeof v[0]));
}

/* PyTorch's values (torch 2.15, float64, torch.nn.functional.gelu(x, approximate='tanh') and
 * its autograd derivative; tests/autograd/torch_ops.py compares the op live where torch is
 * installed): x, y, dy/dx. Within TIGHT of the larger of 1 and the value (in the far left tail
 * PyTorch's 1 + tanh(u) keeps few bits; ours is x / (1 + e^-2u), the same function). */
static const double gelu_tanh_torch[][3] = {
    {-30.0, -0.0, 0},
    {-10.0, -0.0, 0},
    {-6.0, -8.43964897967453e-11, -7.7099760128363292e-10},
    {-4.5, -5.1367374119259956e-06, -2.9322270442568694e-05},
    {-3.0, -0.0036373920817729943, -0.011584166630969648},
    {-2.25, -0.027201329897288629, -0.059914534517762241},
    {-1.5, -0.10042842301976707, -0.12771079315143308},
    {-1.0, -0.15880800939172329, -0.082964083845782577},
    {-0.75, -0.17003944483437966, 0.0010617438625856179},
    {-0.5, -0.15428599017485606, 0.13263009646535764},
    {-0.25, -0.100324649298315, 0.30464590484893955},
    {-0.001, -0.00049960105778641803, 0.49920211570647499},
    {0.0, 0, 0.5},
    {0.001, 0.00050039894221358199, 0.50079788429352501},
    {0.1, 0.053982751045435165, 0.57952178927175668},
    {0.25, 0.149675350701685, 0.69535409515106039},
    {0.5, 0.34571400982514394, 0.86736990353464238},
    {0.75, 0.57996055516562028, 0.99893825613741427},
    {1.0, 0.84119199060827676, 1.0829640838457826},
    {1.5, 1.3995715769802328, 1.127710793151433},
    {2.0, 1.954597694087775, 1.0860992566236183},
    {3.0, 2.9963626079182268, 1.0115841666309695},
    {4.5, 4.4999948632625877, 1.0000293222704426},
    {6.0, 5.9999999999156035, 1.0000000007709977},
    {10.0, 10, 1},
    {30.0, 30, 1},
};
Test(ag_gelu_tanh, matches_pytorchs_gelu_approximate_tanh) {
    TestEnv env = test_env_new();
    enum { N = sizeof gelu_tanh_torch / sizeof gelu_tanh_torch[0] };
    Tensor *x = tensor_new1(env.params, N, "x");
    for (int i = 0; i < N; i++) x->data[i] = (Real)gelu_tanh_torch[i][0];
    tensor_requires_grad(x);
    Tensor *y = ag_gelu_tanh(env.tape, x);
    ag_backward(env.tape, ag_sum(env.tape, y));
    for (int i = 0; i < N; i++) {
        double v = gelu_tanh_torch[i][0], wy = gelu_tanh_torch[i][1], wg = gelu_tanh_torch[i][2];
        double yi = (double)y->data[i], gi = (double)x->grad[i];
        cr_assert(fabs(yi - wy) <= TIGHT * fmax(1, fabs(wy)), "gelu_tanh(%g) = %.17g, torch %.17g",
                  v, yi, wy);
        cr_assert(fabs(gi - wg) <= TIGHT * fmax(1, fabs(wg)), "gelu_tanh'(%g) = %.17g, torch %.17g",
                  v, gi, wg);
    }
    /* not the exact GELU: at x = 1 the two differ by 1.6e-4 */
    cr_assert(fabs((double)y->data[18] - 0.5 * (1 + erf(1 / sqrt(2.0)))) > 1e-4);
    test_env_free(&env);
}

/* far out on both sides: the limits (0 and x, slopes 0 and 1), never NaN (x^3 overflows) */
Test(ag_gelu_tanh, far_inputs_give_the_limits_without_nan) {
    const Real v[] = {-1e30f, -1e6, -200, 200, 1e6, 1e30f};
    check_far_limits(ag_gelu_tanh, "gelu_tanh", v, (int)(sizeof v / sizeof v[0]));
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

/* The kernels keep element i when u = rng_hash(key, i) >> 11 is at least an integer threshold;
 * the definition (ops.def, rng.h) is u 2^-53 >= p in double. Both, element by element, for p at
 * the edges (0, the smallest subnormal, a p just below 1) and in between, forward and backward;
 * a kept element is x / (1 - p) (Real), a dropped one 0, and backward adds gy / (1 - p) to a
 * kept element's gradient and leaves a dropped one's as it was (or, storing, sets them to
 * gy / (1 - p) and 0). */
Test(k_dropout, keeps_exactly_the_elements_whose_uniform_is_at_least_p) {
    const double ps[] = {0, 0x1p-1074, 1e-9, 0.1, 0.25, 0.5, 0.9, 0x1.fffffffffffffp-1};
    enum { N = 4099 };
    static Real x[N], y[N], gx[N], gy[N];
    for (int i = 0; i < N; i++) x[i] = (Real)(1 + (i % 13)), gy[i] = (Real)(0.5 + (i % 7));
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double p = ps[k];
        uint64_t key = 0x9E3779B97F4A7C15ull * (k + 1);
        Real scale = (Real)(1.0 / (1.0 - p));
        for (int i = 0; i < N; i++) gx[i] = -1;
        k_dropout_forward(y, x, key, p, N);
        k_dropout_backward(gx, gy, key, p, N, 0);
        static Real gs[N]; /* the store form: a fresh buffer set whole */
        for (int i = 0; i < N; i++) gs[i] = (Real)NAN;
        k_dropout_backward(gs, gy, key, p, N, 1);
        int kept = 0;
        for (int i = 0; i < N; i++) {
            int keep = (double)(rng_hash(key, (uint64_t)i) >> 11) * 0x1.0p-53 >= p;
            kept += keep;
            Real want = keep ? x[i] * scale : 0, want_g = keep ? -1 + gy[i] * scale : -1;
            cr_assert(y[i] == want, "p %a, element %d: y %g, expected %g (kept: %d)", p, i,
                      (double)y[i], (double)want, keep);
            cr_assert(gx[i] == want_g, "p %a, element %d: gx %g, expected %g (kept: %d)", p, i,
                      (double)gx[i], (double)want_g, keep);
            Real want_s = keep ? gy[i] * scale : 0;
            cr_assert(gs[i] == want_s, "p %a, element %d: stored gx %g, expected %g", p, i,
                      (double)gs[i], (double)want_s);
        }
        if (p == 0) cr_assert_eq(kept, N, "p = 0 keeps every element");
        if (p > 0.5) cr_assert(kept < N / 4, "p %g kept %d of %d", p, kept, N);
    }
}
