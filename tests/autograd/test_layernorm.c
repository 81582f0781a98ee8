/* test_layernorm.c: ag_layernorm beyond the gradient check of the case table: the forward
 * against a plain double loop, normalised rows (mean 0, biased variance var / (var + eps)), a
 * constant row (variance 0), rows with a large common offset, and misuse that must abort.
 * At the end ag_rmsnorm: against llama2.c's formula, unit mean square, a zero row, the weight
 * gradient as a column sum, bit-identical across thread counts.
 * The gradient checks themselves are cases in tests/support/cases.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "cases.h"

#ifdef AG_REAL_DOUBLE
#define TIGHT 1e-12
#else
#define TIGHT 1e-6
#endif

/* The reference: one row at a time in double, textbook two-pass formulas. x (rows, C). */
static void reference(double *y, const Real *x, const Real *w, const Real *b, double eps,
                      size_t rows, int C) {
    for (size_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++) mean += (double)x[r * C + c];
        mean /= C;
        for (int c = 0; c < C; c++) {
            double d = (double)x[r * C + c] - mean;
            var += d * d;
        }
        var /= C;
        for (int c = 0; c < C; c++)
            y[r * C + c] = ((double)x[r * C + c] - mean) / sqrt(var + eps) * (double)w[c] +
                           (b ? (double)b[c] : 0.0);
    }
}

static void fill(Tensor *t, uint64_t seed, double mean, double std) {
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal(&rng, t, mean, std);
}

/* the largest |a - ref| / max(1, |ref|) */
static double max_rel_err(const Real *a, const double *ref, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
        if (e > worst) worst = e;
    }
    return worst;
}

Test(ag_layernorm, forward_matches_a_double_reference_loop) {
    TestEnv env = test_env_new();
    enum { B = 3, T = 4, C = 37 };
    Tensor *x = tensor_new3(env.params, B, T, C, "x");
    Tensor *w = tensor_new1(env.params, C, "w"), *b = tensor_new1(env.params, C, "b");
    fill(x, 1, 0.3, 2.0);
    fill(w, 2, 1.0, 0.5);
    fill(b, 3, 0.0, 1.0);
    Tensor *y = ag_layernorm(env.tape, x, w, b, 1e-5);
    cr_assert_eq(y->ndim, 3);
    cr_assert(tensor_same_shape(x, y));
    static double ref[B * T * C];
    reference(ref, x->data, w->data, b->data, 1e-5, B * T, C);
    double err = max_rel_err(y->data, ref, x->size);
    cr_assert(err < TIGHT, "layernorm differs from the reference by %.3g", err);
    /* bias NULL is the same as a zero bias */
    Tensor *y0 = ag_layernorm(env.tape, x, w, NULL, 1e-5);
    reference(ref, x->data, w->data, NULL, 1e-5, B * T, C);
    err = max_rel_err(y0->data, ref, x->size);
    cr_assert(err < TIGHT, "layernorm without bias differs from the reference by %.3g", err);
    test_env_free(&env);
}

Test(ag_layernorm, rows_come_out_normalised_with_unit_weight_and_zero_bias) {
    TestEnv env = test_env_new();
    enum { R = 9, C = 50 };
    const double eps = 1e-5;
    Tensor *x = tensor_new2(env.params, R, C, "x");
    Tensor *w = tensor_new1(env.params, C, "w"), *b = tensor_new1(env.params, C, "b");
    fill(x, 4, -1.5, 3.0);
    tensor_fill(w, 1);
    tensor_fill(b, 0);
    Tensor *y = ag_layernorm(env.tape, x, w, b, eps);
    for (int r = 0; r < R; r++) {
        double mx = 0, vx = 0, my = 0, vy = 0;
        for (int c = 0; c < C; c++) {
            mx += (double)x->data[r * C + c];
            my += (double)y->data[r * C + c];
        }
        mx /= C, my /= C;
        for (int c = 0; c < C; c++) {
            double dx = (double)x->data[r * C + c] - mx, dy = (double)y->data[r * C + c] - my;
            vx += dx * dx, vy += dy * dy;
        }
        vx /= C, vy /= C;
        /* y = (x - mean) / sqrt(var + eps) has mean 0 and variance var / (var + eps) (just
         * below 1: eps is inside the square root, as in PyTorch) */
        cr_assert(fabs(my) < TIGHT, "row %d: mean %.3g", r, my);
        cr_assert(fabs(vy - vx / (vx + eps)) < 10 * TIGHT, "row %d: variance %.17g, expected %.17g",
                  r, vy, vx / (vx + eps));
        cr_assert(fabs(vy - 1) < 1e-5, "row %d: variance %.17g", r, vy);
    }
    test_env_free(&env);
}

Test(ag_layernorm, a_constant_row_gives_finite_output_and_gradients) {
    TestEnv env = test_env_new();
    enum { R = 3, C = 8 };
    const double eps = 1e-5;
    Tensor *x = tensor_new2(env.params, R, C, "x");
    Tensor *w = tensor_new1(env.params, C, "w"), *b = tensor_new1(env.params, C, "b");
    fill(x, 5, 0, 1);
    for (int c = 0; c < C; c++) x->data[C + c] = (Real)3.25; /* row 1: variance 0 */
    fill(w, 6, 1, 0.3);
    fill(b, 7, 0, 1);
    tensor_requires_grad(x);
    tensor_requires_grad(w);
    tensor_requires_grad(b);
    Tensor *y = ag_layernorm(env.tape, x, w, b, eps);
    Tensor *R_ = tensor_new2(env.tape->arena, R, C, "R");
    fill(R_, 8, 0, 1);
    ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)));
    for (size_t i = 0; i < x->size; i++) {
        cr_assert(isfinite((double)y->data[i]), "output %zu is %g", i, (double)y->data[i]);
        cr_assert(isfinite((double)x->grad[i]), "gradient %zu is %g", i, (double)x->grad[i]);
    }
    for (int c = 0; c < C; c++) {
        cr_assert(isfinite((double)w->grad[c]) && isfinite((double)b->grad[c]));
        /* xhat is exactly 0 on the constant row, so its output is the bias */
        cr_assert_eq(y->data[C + c], b->data[c], "column %d: %.17g vs bias %.17g", c,
                     (double)y->data[C + c], (double)b->data[c]);
    }
    /* with xhat = 0, gx = rstd (gy w - mean(gy w)), rstd = 1 / sqrt(eps) */
    double mean_d = 0;
    for (int c = 0; c < C; c++) mean_d += (double)R_->data[C + c] * (double)w->data[c];
    mean_d /= C;
    for (int c = 0; c < C; c++) {
        double want = ((double)R_->data[C + c] * (double)w->data[c] - mean_d) / sqrt(eps);
        cr_assert(fabs((double)x->grad[C + c] - want) <= TIGHT * fmax(1.0, fabs(want)) * 10,
                  "column %d: gradient %.17g, expected %.17g", c, (double)x->grad[C + c], want);
    }
    test_env_free(&env);
}

#ifdef AG_REAL_DOUBLE
static Tensor *ln_fn(Tape *tape, Tensor **in, void *ctx) {
    (void)ctx;
    return ag_layernorm(tape, in[0], in[1], in[2], 1e-5);
}

/* Near variance 0 the op is still smooth (eps > 0): the gradient check holds there too. */
Test(ag_layernorm, gradient_of_a_constant_row_matches_finite_differences) {
    TestEnv env = test_env_new();
    enum { R = 2, C = 6 };
    Tensor *in[3] = {tensor_new2(env.params, R, C, "x"), tensor_new1(env.params, C, "w"),
                     tensor_new1(env.params, C, "b")};
    fill(in[0], 9, 0, 1);
    for (int c = 0; c < C; c++) in[0]->data[c] = -0.75; /* row 0: variance 0 */
    fill(in[1], 10, 1, 0.3);
    fill(in[2], 11, 0, 1);
    for (int i = 0; i < 3; i++) tensor_requires_grad(in[i]);
    AgGradcheckResult r;
    int ok = ag_gradcheck(env.tape, ln_fn, NULL, in, 3, 1e-6, 1e-6, &r);
    cr_assert(ok, "worst error %.3g at input %d element %zu (analytic %.12g, numeric %.12g)",
              r.max_err, r.input, r.index, r.analytic, r.numeric);
    test_env_free(&env);
}
#endif

/* Rows of N(0,1) shifted by 1e4: the statistics must not lose the small spread to the offset.
 * Against the double reference on the same stored values (both builds), and in the double
 * build also against the unshifted rows, whose normalised values are the same. */
Test(ag_layernorm, a_large_offset_keeps_the_result_accurate) {
    TestEnv env = test_env_new();
    enum { R = 6, C = 64 };
    Tensor *x = tensor_new2(env.params, R, C, "x"), *xs = tensor_new2(env.params, R, C, "x+1e4");
    Tensor *w = tensor_new1(env.params, C, "w"), *b = tensor_new1(env.params, C, "b");
    fill(x, 12, 0, 1);
    for (size_t i = 0; i < x->size; i++) xs->data[i] = x->data[i] + (Real)1e4;
    fill(w, 13, 1, 0.3);
    fill(b, 14, 0, 1);
    tensor_requires_grad(xs);
    Tensor *ys = ag_layernorm(env.tape, xs, w, b, 1e-5);
    static double ref[R * C];
    reference(ref, xs->data, w->data, b->data, 1e-5, R, C);
    double err = max_rel_err(ys->data, ref, xs->size);
    cr_assert(err < 10 * TIGHT, "offset rows differ from the reference by %.3g", err);
#ifdef AG_REAL_DOUBLE
    tensor_requires_grad(x);
    Tensor *y = ag_layernorm(env.tape, x, w, b, 1e-5);
    /* the shift itself rounds x by about 1e-12 (ulp of 1e4), so allow a little more */
    for (size_t i = 0; i < x->size; i++) ref[i] = (double)y->data[i];
    err = max_rel_err(ys->data, ref, x->size);
    cr_assert(err < 1e-10, "shifting rows by 1e4 changed the output by %.3g", err);
    /* and the gradients too: both go into one loss */
    Tensor *R_ = tensor_new2(env.tape->arena, R, C, "R");
    fill(R_, 15, 0, 1);
    Tensor *l = ag_add(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)),
                       ag_sum(env.tape, ag_mul(env.tape, ys, R_)));
    ag_backward(env.tape, l);
    for (size_t i = 0; i < x->size; i++) ref[i] = (double)x->grad[i];
    err = max_rel_err(xs->grad, ref, x->size);
    cr_assert(err < 1e-9, "shifting rows by 1e4 changed the gradient by %.3g", err);
#endif
    test_env_free(&env);
}

/* The weight and bias gradients are column sums over many rows: at the default parallel
 * threshold with a size above it, compare with a serial double sum. */
Test(ag_layernorm, weight_and_bias_gradients_are_column_sums) {
    TestEnv env = test_env_new();
    enum { R = 300, C = 70 }; /* 21000 elements: over the default threshold, 3 column blocks */
    Tensor *x = tensor_new2(env.params, R, C, "x");
    Tensor *w = tensor_new1(env.params, C, "w"), *b = tensor_new1(env.params, C, "b");
    fill(x, 16, 0, 1);
    fill(w, 17, 1, 0.3);
    fill(b, 18, 0, 1);
    tensor_requires_grad(w);
    tensor_requires_grad(b);
    Tensor *y = ag_layernorm(env.tape, x, w, b, 1e-5);
    Tensor *R_ = tensor_new2(env.tape->arena, R, C, "R");
    fill(R_, 19, 0, 1);
    ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)));
    /* xhat from the output: xhat = (y - b) / w */
    for (int c = 0; c < C; c++) {
        double gw = 0, gb = 0;
        for (int r = 0; r < R; r++) {
            double xhat = ((double)y->data[r * C + c] - (double)b->data[c]) / (double)w->data[c];
            gw += (double)R_->data[r * C + c] * xhat;
            gb += (double)R_->data[r * C + c];
        }
        cr_assert(fabs((double)w->grad[c] - gw) < 1e3 * TIGHT * fmax(1.0, fabs(gw)),
                  "column %d: weight gradient %.17g, expected %.17g", c, (double)w->grad[c], gw);
        cr_assert(fabs((double)b->grad[c] - gb) < 1e3 * TIGHT * fmax(1.0, fabs(gb)),
                  "column %d: bias gradient %.17g, expected %.17g", c, (double)b->grad[c], gb);
    }
    test_env_free(&env);
}

/* The same big case with 1, 2 and 3 threads at the default threshold: outputs and all
 * gradients bit-identical (the case table checks small shapes with the threshold at 1). rms:
 * ag_rmsnorm instead (no bias; its gradient slot stays 0). */
enum { BIG_R = 257, BIG_C = 100 };
static void run_big(int threads, int rms, Real *out) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    TestEnv env = test_env_new();
    Tensor *x = tensor_new2(env.params, BIG_R, BIG_C, "x");
    Tensor *w = tensor_new1(env.params, BIG_C, "w"), *b = tensor_new1(env.params, BIG_C, "b");
    fill(x, 20, 0.5, 2);
    fill(w, 21, 1, 0.3);
    fill(b, 22, 0, 1);
    tensor_requires_grad(x);
    tensor_requires_grad(w);
    tensor_requires_grad(b);
    tensor_zero_grad(b);
    Tensor *y = rms ? ag_rmsnorm(env.tape, x, w, 1e-5) : ag_layernorm(env.tape, x, w, b, 1e-5);
    Tensor *R_ = tensor_new2(env.tape->arena, BIG_R, BIG_C, "R");
    fill(R_, 23, 0, 1);
    ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)));
    size_t n = x->size;
    memcpy(out, y->data, n * sizeof(Real));
    memcpy(out + n, x->grad, n * sizeof(Real));
    memcpy(out + 2 * n, w->grad, BIG_C * sizeof(Real));
    memcpy(out + 2 * n + BIG_C, b->grad, BIG_C * sizeof(Real));
    test_env_free(&env);
}

static void check_threads(int rms) {
    static Real one[2 * BIG_R * BIG_C + 2 * BIG_C], many[2 * BIG_R * BIG_C + 2 * BIG_C];
    run_big(1, rms, one);
    for (int threads = 2; threads <= 3; threads++) {
        run_big(threads, rms, many);
        cr_assert(memcmp(one, many, sizeof one) == 0, "%d threads differ from 1", threads);
    }
}

Test(ag_layernorm, bit_identical_for_1_2_and_3_threads_at_the_default_threshold) {
    check_threads(0);
}

static void misuse(int wC, int bC, double eps) {
    TestEnv env = test_env_new();
    Tensor *x = tensor_new3(env.params, 2, 3, 5, "x");
    Tensor *w = tensor_new1(env.params, wC, "w"), *b = tensor_new1(env.params, bC, "b");
    tensor_fill(x, 1);
    tensor_fill(w, 1);
    tensor_fill(b, 0);
    ag_layernorm(env.tape, x, w, b, eps);
    test_env_free(&env); /* not reached */
}

Test(ag_layernorm, aborts_on_wrong_weight_shape, .signal = SIGABRT) { misuse(4, 5, 1e-5); }
Test(ag_layernorm, aborts_on_wrong_bias_shape, .signal = SIGABRT) { misuse(5, 6, 1e-5); }
Test(ag_layernorm, aborts_on_zero_eps, .signal = SIGABRT) { misuse(5, 5, 0); }

/* A 2-D weight with the right element count is still the wrong shape. */
Test(ag_layernorm, aborts_on_a_weight_of_two_dims, .signal = SIGABRT) {
    TestEnv env = test_env_new();
    Tensor *x = tensor_new2(env.params, 3, 6, "x");
    Tensor *w = tensor_new2(env.params, 1, 6, "w");
    tensor_fill(x, 1);
    tensor_fill(w, 1);
    ag_layernorm(env.tape, x, w, NULL, 1e-5);
    test_env_free(&env); /* not reached */
}

/* ---- ag_add_layernorm: the residual step norm(x + f) as one op ---- */

/* The residual pattern of a sub-layer: xs = 0.7 x0, f = relu(xs) * f0 (f depends on xs, so
 * xs's gradient has two terms), y = norm(xs + f), loss = sum(y * R); fused or as ag_add then
 * ag_layernorm. out: y, then the gradients of x0, f0, w, b. C > 256: more than one chunk. */
enum { RES_R = 4 * 9, RES_C = 300 };
static void run_residual(int fused, Real *out) {
    TestEnv env = test_env_new();
    Tensor *x0 = tensor_new2(env.params, RES_R, RES_C, "x0");
    Tensor *f0 = tensor_new2(env.params, RES_R, RES_C, "f0");
    Tensor *w = tensor_new1(env.params, RES_C, "w"), *b = tensor_new1(env.params, RES_C, "b");
    fill(x0, 31, 0.2, 1.5);
    fill(f0, 32, 0.0, 1.0);
    fill(w, 33, 1.0, 0.3);
    fill(b, 34, 0.0, 0.5);
    Tensor *leaves[4] = {x0, f0, w, b};
    for (int i = 0; i < 4; i++) tensor_requires_grad(leaves[i]);
    Tape *t = env.tape;
    Tensor *xs = ag_scale(t, x0, 0.7);
    Tensor *f = ag_mul(t, ag_relu(t, xs), f0);
    Tensor *y = fused ? ag_add_layernorm(t, xs, f, w, b, 1e-5)
                      : ag_layernorm(t, ag_add(t, xs, f), w, b, 1e-5);
    Tensor *R_ = tensor_new2(t->arena, RES_R, RES_C, "R");
    fill(R_, 35, 0, 1);
    ag_backward(t, ag_sum(t, ag_mul(t, y, R_)));
    memcpy(out, y->data, y->size * sizeof(Real));
    out += y->size;
    for (int i = 0; i < 4; i++) {
        memcpy(out, leaves[i]->grad, leaves[i]->size * sizeof(Real));
        out += leaves[i]->size;
    }
    test_env_free(&env);
}

Test(ag_add_layernorm, matches_ag_add_then_ag_layernorm_values_and_gradients) {
    enum { N = 3 * RES_R * RES_C + 2 * RES_C };
    static Real fused[N], plain[N];
    run_residual(1, fused);
    run_residual(0, plain);
    double worst = 0, size = 0;
    for (size_t i = 0; i < N; i++) {
        double e = fabs((double)fused[i] - (double)plain[i]) / fmax(1.0, fabs((double)plain[i]));
        worst = fmax(worst, e);
        size = fmax(size, fabs((double)plain[i]));
    }
    cr_assert(size > 0.1, "the values compared are all near 0 (largest %g)", size);
    cr_assert(worst < TIGHT, "fused add + layernorm differs from add then layernorm by %.3g",
              worst);
}

Test(ag_add_layernorm, bit_identical_for_1_2_and_3_threads) {
    enum { N = 3 * RES_R * RES_C + 2 * RES_C };
    static Real one[N], many[N];
    size_t saved = k_par_min;
    k_par_min = 1; /* every kernel parallel, even at this size */
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    run_residual(1, one);
    for (int threads = 2; threads <= 3; threads++) {
#ifdef _OPENMP
        omp_set_num_threads(threads);
#endif
        run_residual(1, many);
        cr_assert(memcmp(one, many, sizeof one) == 0, "%d threads differ from 1", threads);
    }
    k_par_min = saved;
}

/* ---- ag_rmsnorm: LLaMA's RMSNorm, y = x / sqrt(mean(x^2) + eps) * w ---- */

/* The reference, as llama2.c's rmsnorm writes it (in double): ss = sum x^2 / C + eps, then
 * y = w * (x / sqrt(ss)). x (rows, C). */
static void rms_reference(double *y, const Real *x, const Real *w, double eps, size_t rows, int C) {
    for (size_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[r * C + c] * (double)x[r * C + c];
        ss = ss / C + eps;
        for (int c = 0; c < C; c++) y[r * C + c] = (double)w[c] * ((double)x[r * C + c] / sqrt(ss));
    }
}

Test(ag_rmsnorm, forward_matches_llama2c_written_out_in_double) {
    TestEnv env = test_env_new();
    enum { B = 3, T = 4, C = 37 };
    Tensor *x = tensor_new3(env.params, B, T, C, "x"), *w = tensor_new1(env.params, C, "w");
    fill(x, 41, 0.3, 2.0);
    fill(w, 42, 1.0, 0.5);
    Tensor *y = ag_rmsnorm(env.tape, x, w, 1e-5);
    cr_assert(tensor_same_shape(x, y));
    static double ref[B * T * C];
    rms_reference(ref, x->data, w->data, 1e-5, B * T, C);
    double err = max_rel_err(y->data, ref, x->size);
    cr_assert(err < TIGHT, "rmsnorm differs from the reference by %.3g", err);
    test_env_free(&env);
}

/* with unit weight every row's mean square is ms / (ms + eps), and the mean is not removed */
Test(ag_rmsnorm, rows_come_out_with_unit_mean_square_and_their_mean_kept) {
    TestEnv env = test_env_new();
    enum { R = 9, C = 50 };
    const double eps = 1e-5;
    Tensor *x = tensor_new2(env.params, R, C, "x"), *w = tensor_new1(env.params, C, "w");
    fill(x, 43, 2.0, 1.0);
    tensor_fill(w, 1);
    Tensor *y = ag_rmsnorm(env.tape, x, w, eps);
    for (int r = 0; r < R; r++) {
        double msx = 0, msy = 0, my = 0;
        for (int c = 0; c < C; c++) {
            double a = (double)x->data[r * C + c], b = (double)y->data[r * C + c];
            msx += a * a, msy += b * b, my += b;
        }
        msx /= C, msy /= C, my /= C;
        cr_assert(fabs(msy - msx / (msx + eps)) < 10 * TIGHT, "row %d: mean square %.17g", r, msy);
        cr_assert(my > 0.5, "row %d: mean %.3g (an offset of 2 must survive)", r, my);
    }
    test_env_free(&env);
}

/* an all-zero row: rstd = 1 / sqrt(eps), output 0, gradient gy w / sqrt(eps), all finite */
Test(ag_rmsnorm, a_zero_row_gives_finite_output_and_gradients) {
    TestEnv env = test_env_new();
    enum { R = 3, C = 8 };
    const double eps = 1e-5;
    Tensor *x = tensor_new2(env.params, R, C, "x"), *w = tensor_new1(env.params, C, "w");
    fill(x, 44, 0, 1);
    for (int c = 0; c < C; c++) x->data[C + c] = 0;
    fill(w, 45, 1, 0.3);
    tensor_requires_grad(x);
    tensor_requires_grad(w);
    Tensor *y = ag_rmsnorm(env.tape, x, w, eps);
    Tensor *R_ = tensor_new2(env.tape->arena, R, C, "R");
    fill(R_, 46, 0, 1);
    ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)));
    for (int c = 0; c < C; c++) {
        cr_assert_eq(y->data[C + c], 0);
        double want = (double)R_->data[C + c] * (double)w->data[c] / sqrt(eps);
        cr_assert(fabs((double)x->grad[C + c] - want) <= 10 * TIGHT * fmax(1.0, fabs(want)),
                  "column %d: gradient %.17g, expected %.17g", c, (double)x->grad[C + c], want);
        cr_assert(isfinite((double)w->grad[c]));
    }
    test_env_free(&env);
}

/* 70 rows (three weight-gradient blocks) of 300 (two column chunks): the weight gradient is
 * the column sum of gy * x rstd, checked here in double */
Test(ag_rmsnorm, weight_gradient_is_the_column_sum_of_gy_times_x_rstd) {
    enum { R = 70, C = 300 };
    TestEnv env = test_env_new();
    Tensor *x = tensor_new2(env.params, R, C, "x"), *w = tensor_new1(env.params, C, "w");
    fill(x, 47, 0.1, 1.0);
    fill(w, 48, 1.0, 0.2);
    tensor_requires_grad(w);
    Tensor *y = ag_rmsnorm(env.tape, x, w, 1e-6);
    Tensor *R_ = tensor_new2(env.tape->arena, R, C, "R");
    fill(R_, 49, 0, 1);
    ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R_)));
    static double rstd[R];
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int k = 0; k < C; k++) ss += (double)x->data[r * C + k] * (double)x->data[r * C + k];
        rstd[r] = 1 / sqrt(ss / C + 1e-6);
    }
    for (int c = 0; c < C; c++) {
        double want = 0;
        for (int r = 0; r < R; r++)
            want += (double)R_->data[r * C + c] * (double)x->data[r * C + c] * rstd[r];
        cr_assert(fabs((double)w->grad[c] - want) < 10 * TIGHT * fmax(1.0, fabs(want)),
                  "weight gradient %d: %.17g, expected %.17g", c, (double)w->grad[c], want);
    }
    test_env_free(&env);
}

Test(ag_rmsnorm, bit_identical_for_1_2_and_3_threads_at_the_default_threshold) { check_threads(1); }
