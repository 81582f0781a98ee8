/* test_optim.c: the optimizers against hand-written reference loops (the formulas of
 * torch.optim spelled out in double), schedules at chosen steps, gradient clipping, gradient
 * accumulation over micro-batches, resuming from saved state, thread determinism, misuse.
 * In the double build the references do the same operations in the same order as the kernels
 * and must match to the bit; in the float build the kernels round every operation to float,
 * so they match within a relative 2e-6. The comparison with torch.optim itself is
 * tests/optim/test_torch.sh (make test-torch). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"
#include "expect_abort.h"

#ifdef AG_REAL_DOUBLE
#define UPDATE_TOL 0.0 /* same arithmetic, same order: bit-exact */
#else
#define UPDATE_TOL 2e-6 /* float kernels vs double references, a few float roundings per step */
#endif

/* ---- a fixture: three parameters (28 scalars) and STEPS gradients, all rounded to float so
 * that both builds see the same numbers; references work on the flat 28 values ---- */
#define STEPS 5
#define NE 28

typedef struct {
    Arena *arena;
    ParamList pl;
    double p0[NE];
    double g[STEPS][NE];
} Fix;

static void fix_init(Fix *f, uint64_t seed) {
    memset(f, 0, sizeof *f);
    f->arena = arena_new("params", 1 << 20);
    ag_params_init(&f->pl);
    Rng rng;
    rng_seed(&rng, seed);
    NnBuilder b = nn_builder(f->arena, &f->pl, &rng);
    nn_param(&b, "lin.weight", 2, (int[]){3, 4});
    nn_param(&b, "lin.bias", 1, (int[]){4});
    nn_param(&b, "blocks.0.gain", 3, (int[]){2, 3, 2});
    cr_assert_eq(ag_params_count(&f->pl), NE);
    for (int i = 0; i < NE; i++) f->p0[i] = (float)rng_normal(&rng);
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < NE; i++) f->g[s][i] = (float)(0.5 * rng_normal(&rng));
    int k = 0;
    for (int j = 0; j < f->pl.n; j++)
        for (size_t e = 0; e < f->pl.items[j]->size; e++)
            f->pl.items[j]->data[e] = (Real)f->p0[k++];
}

static void fix_free(Fix *f) {
    ag_params_free(&f->pl);
    arena_free(f->arena);
}

/* flat values <-> the parameters' data or gradients */
static void put_grads(Fix *f, const double *g) {
    int k = 0;
    for (int j = 0; j < f->pl.n; j++)
        for (size_t e = 0; e < f->pl.items[j]->size; e++) f->pl.items[j]->grad[e] = (Real)g[k++];
}

static void get_flat(Tensor *const *ts, int n, double *out, int grads) {
    int k = 0;
    for (int j = 0; j < n; j++)
        for (size_t e = 0; e < ts[j]->size; e++)
            out[k++] = (double)(grads ? ts[j]->grad[e] : ts[j]->data[e]);
}

static void expect_match(const double *ours, const double *ref, int n, double tol, const char *what,
                         int step) {
    for (int i = 0; i < n; i++) {
        double err = fabs(ours[i] - ref[i]) / fmax(1, fabs(ref[i]));
        cr_assert(err <= tol, "%s, step %d, element %d: ours %.17g, reference %.17g (err %.3g)",
                  what, step, i, ours[i], ref[i], err);
    }
}

/* ---- reference loops: torch.optim's formulas, PyTorch 1.13 _single_tensor_sgd/_adam(w) ---- */

/* SGD, dampening 0:
 *   d = g + wd p
 *   buf = d                      on the first step
 *   buf = momentum buf + d       after
 *   d = d + momentum buf         (Nesterov)  or  d = buf
 *   p = p - lr d
 * With momentum 0 there is no buffer: p = p - lr (g + wd p). */
static void ref_sgd(double *p, double *buf, const double *g, int t, double lr, double mom,
                    double wd, int nesterov) {
    for (int i = 0; i < NE; i++) {
        double d = g[i];
        if (wd != 0) d = d + wd * p[i];
        if (mom != 0) {
            buf[i] = t == 1 ? d : buf[i] * mom + d;
            d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] = p[i] - lr * d;
    }
}

/* Adam (adamw = 0) and AdamW (adamw = 1), in torch's order of operations:
 *   Adam:  g = g + wd p            AdamW: p = p (1 - lr wd)
 *   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g g
 *   step_size = lr / (1 - b1^t);   denom = sqrt(v) / sqrt(1 - b2^t) + eps
 *   p = p - step_size m / denom */
static void ref_adam(double *p, double *m, double *v, const double *g, int t, double lr, double b1,
                     double b2, double eps, double wd, int adamw) {
    double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    for (int i = 0; i < NE; i++) {
        double gi = g[i];
        if (!adamw && wd != 0) gi = gi + wd * p[i];
        if (adamw) p[i] = p[i] * (1 - lr * wd);
        m[i] = m[i] * b1 + (1 - b1) * gi;
        v[i] = v[i] * b2 + (1 - b2) * gi * gi;
        double denom = sqrt(v[i]) / bc2_sqrt + eps;
        p[i] = p[i] - step_size * m[i] / denom;
    }
}

/* The same update as the paper writes it (Kingma & Ba, Algorithm 1, eps after the sqrt):
 * m_hat = m / (1 - b1^t), v_hat = v / (1 - b2^t), p -= lr m_hat / (sqrt(v_hat) + eps).
 * Other rounding than torch's order, so it agrees within a tolerance only. */
static void ref_adam_textbook(double *p, double *m, double *v, const double *g, int t, double lr,
                              double b1, double b2, double eps) {
    for (int i = 0; i < NE; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        double m_hat = m[i] / (1 - pow(b1, t)), v_hat = v[i] / (1 - pow(b2, t));
        p[i] -= lr * m_hat / (sqrt(v_hat) + eps);
    }
}

/* Runs STEPS steps of cfg on a fresh fixture and checks parameters and state after each one
 * against the reference loops. */
static void check_against_reference(const OptimConfig *cfg, const char *what) {
    Fix f;
    fix_init(&f, 42);
    Optimizer *o = optim_new(f.arena, &f.pl, cfg);
    double p[NE], a[NE] = {0}, b[NE] = {0}, ours[NE];
    memcpy(p, f.p0, sizeof p);
    for (int t = 1; t <= STEPS; t++) {
        put_grads(&f, f.g[t - 1]);
        optim_step(o);
        double lr = optim_schedule_lr(&cfg->schedule, cfg->lr, t);
        if (cfg->kind == OPTIM_SGD)
            ref_sgd(p, a, f.g[t - 1], t, lr, cfg->momentum, cfg->weight_decay, cfg->nesterov);
        else
            ref_adam(p, a, b, f.g[t - 1], t, lr, cfg->beta1, cfg->beta2, cfg->eps,
                     cfg->weight_decay, cfg->kind == OPTIM_ADAMW);
        get_flat(o->params, o->n_params, ours, 0);
        expect_match(ours, p, NE, UPDATE_TOL, what, t);
        if (cfg->kind == OPTIM_SGD && cfg->momentum != 0) {
            get_flat(o->momentum_buffer, o->n_params, ours, 0);
            expect_match(ours, a, NE, UPDATE_TOL, "momentum_buffer", t);
        }
        if (cfg->kind != OPTIM_SGD) {
            get_flat(o->exp_avg, o->n_params, ours, 0);
            expect_match(ours, a, NE, UPDATE_TOL, "exp_avg", t);
            get_flat(o->exp_avg_sq, o->n_params, ours, 0);
            expect_match(ours, b, NE, UPDATE_TOL, "exp_avg_sq", t);
        }
        cr_assert_eq(optim_get_step(o), t);
        cr_assert_eq(o->last_lr, lr);
    }
    /* the gradients are inputs: a step leaves them as they were */
    get_flat(o->params, o->n_params, ours, 1);
    expect_match(ours, f.g[STEPS - 1], NE, 0, "gradient after the step", STEPS);
    fix_free(&f);
}

/* ---- SGD ---- */

Test(optim_sgd, plain_sgd_is_p_minus_lr_g) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = 0.1;
    check_against_reference(&c, "sgd");
}

Test(optim_sgd, momentum_and_weight_decay_match_the_formulas) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = 0.05;
    c.momentum = 0.9;
    c.weight_decay = 0.01;
    check_against_reference(&c, "sgd momentum wd");
}

Test(optim_sgd, nesterov_matches_the_formulas) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = 0.05;
    c.momentum = 0.8;
    c.nesterov = 1;
    c.weight_decay = 0.1;
    check_against_reference(&c, "sgd nesterov");
}

/* Two steps written out by hand for one element: p 1, g 0.5 then -0.25, lr 0.1, momentum
 * 0.5, Nesterov, no decay. Step 1: buf = 0.5, d = 0.5 + 0.5 * 0.5 = 0.75, p = 1 - 0.075 =
 * 0.925. Step 2: buf = 0.5 * 0.5 - 0.25 = 0, d = -0.25 + 0 = -0.25, p = 0.925 + 0.025 = 0.95. */
Test(optim_sgd, nesterov_by_hand_on_one_element) {
    Arena *a = arena_new("params", 1 << 16);
    ParamList pl;
    ag_params_init(&pl);
    NnBuilder b = nn_builder(a, &pl, NULL);
    Tensor *p = nn_param(&b, "x", 1, (int[]){1});
    p->data[0] = 1;
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = 0.1;
    c.momentum = 0.5;
    c.nesterov = 1;
    Optimizer *o = optim_new(a, &pl, &c);
    p->grad[0] = (Real)0.5;
    optim_step(o);
    cr_assert_float_eq(p->data[0], 0.925, 1e-7);
    cr_assert_float_eq(o->momentum_buffer[0]->data[0], 0.5, 0);
    p->grad[0] = (Real)-0.25;
    optim_step(o);
    cr_assert_float_eq(o->momentum_buffer[0]->data[0], 0, 0);
    cr_assert_float_eq(p->data[0], 0.95, 1e-7);
    ag_params_free(&pl);
    arena_free(a);
}

/* ---- Adam, AdamW ---- */

Test(optim_adam, defaults_match_the_formulas) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    cr_assert(c.lr == 1e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 &&
              c.weight_decay == 0);
    check_against_reference(&c, "adam defaults");
}

Test(optim_adam, l2_weight_decay_matches_the_formulas) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.lr = 0.01;
    c.beta1 = 0.8;
    c.beta2 = 0.95;
    c.eps = 1e-6;
    c.weight_decay = 0.1;
    check_against_reference(&c, "adam l2");
}

Test(optim_adamw, decoupled_decay_matches_the_formulas) {
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    cr_assert(c.weight_decay == 1e-2);
    c.lr = 0.01;
    c.weight_decay = 0.2;
    check_against_reference(&c, "adamw");
}

Test(optim_adamw, decay_uses_the_scheduled_lr) {
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    c.lr = 0.02;
    c.weight_decay = 0.5;
    c.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 2, 5, 1e-3};
    check_against_reference(&c, "adamw cosine");
}

/* optim_step_decay(o, wd, 2) is the same, bit for bit, as scaling the parameters of two or
 * more dimensions by 1 - lr wd and then optim_step (what attograd-gpt did before the decay
 * moved into Adam's pass), for every kind, with a schedule and with the kind's own weight
 * decay; the 1-D bias is not decayed, and the decay changes the others. */
static void decayed_steps(const OptimConfig *c, int fused, double *out) {
    Fix f;
    fix_init(&f, 11);
    Optimizer *o = optim_new(f.arena, &f.pl, c);
    for (int t = 0; t < STEPS; t++) {
        put_grads(&f, f.g[t]);
        if (fused) {
            optim_step_decay(o, 0.3, 2);
            continue;
        }
        Real k = (Real)(1 - optim_lr(o) * 0.3);
        for (int j = 0; j < f.pl.n; j++) {
            Tensor *p = f.pl.items[j];
            if (p->ndim >= 2)
                for (size_t e = 0; e < p->size; e++) p->data[e] *= k;
        }
        optim_step(o);
    }
    get_flat(o->params, o->n_params, out, 0);
    fix_free(&f);
}

Test(optim_step_decay, equals_scaling_the_matrices_then_stepping) {
    OptimConfig cs[4] = {optim_defaults(OPTIM_ADAMW), optim_defaults(OPTIM_ADAM),
                         optim_defaults(OPTIM_SGD), optim_defaults(OPTIM_ADAMW)};
    cs[0].weight_decay = 0;
    cs[0].schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 2, 5, 1e-3};
    cs[1].weight_decay = 0.05; /* with the kind's own decay too (L2 here, decoupled below) */
    cs[2].momentum = 0.9;
    cs[3].weight_decay = 0.2;
    for (int k = 0; k < 4; k++) {
        cs[k].lr = 0.05;
        double fused[NE], apart[NE], plain[NE];
        decayed_steps(&cs[k], 1, fused);
        decayed_steps(&cs[k], 0, apart);
        cr_assert(memcmp(fused, apart, sizeof fused) == 0, "config %d: fused and apart differ", k);
        Fix f;
        fix_init(&f, 11);
        Optimizer *o = optim_new(f.arena, &f.pl, &cs[k]);
        for (int t = 0; t < STEPS; t++) {
            put_grads(&f, f.g[t]);
            optim_step_decay(o, 0, 2); /* wd 0: optim_step */
        }
        get_flat(o->params, o->n_params, plain, 0);
        fix_free(&f);
        /* lin.weight (12) and blocks.0.gain (12) decay, lin.bias (4, at 12..15) does not */
        for (int i = 12; i < 16; i++)
            cr_assert(fused[i] == plain[i], "config %d: the bias decayed (%d)", k, i);
        cr_assert(fused[0] != plain[0] && fused[27] != plain[27], "config %d: no decay", k);
    }
}

/* STEPS steps of config c where each step's gradients are added (+=) into .grad: fused, by
 * optim_step_zero_grad (the gradients zeroed in the step), or apart, by ag_params_zero_grad
 * before the backward and optim_step. Parameters and state into out (NE each, then the state
 * tensors'), the gradients after the last step into grads. */
static void zeroing_steps(const OptimConfig *c, int fused, double *out, double *grads) {
    Fix f;
    fix_init(&f, 12);
    Optimizer *o = optim_new(f.arena, &f.pl, c);
    for (int t = 0; t < STEPS; t++) {
        if (!fused) ag_params_zero_grad(&f.pl);
        int k = 0;
        for (int j = 0; j < f.pl.n; j++)
            for (size_t e = 0; e < f.pl.items[j]->size; e++)
                f.pl.items[j]->grad[e] += (Real)f.g[t][k++];
        if (fused)
            optim_step_zero_grad(o);
        else
            optim_step(o);
    }
    get_flat(o->params, o->n_params, out, 0);
    get_flat(o->state, o->n_state, out + NE, 0);
    get_flat(o->params, o->n_params, grads, 1);
    fix_free(&f);
}

Test(optim_step_zero_grad, equals_stepping_then_zero_grad_bit_for_bit) {
    OptimConfig cs[5] = {optim_defaults(OPTIM_ADAM), optim_defaults(OPTIM_ADAMW),
                         optim_defaults(OPTIM_ADAM), optim_defaults(OPTIM_SGD),
                         optim_defaults(OPTIM_SGD)};
    cs[1].weight_decay = 0.2;
    cs[2].weight_decay = 0.05; /* L2 */
    cs[3].momentum = 0.9, cs[3].nesterov = 1, cs[3].weight_decay = 0.1;
    for (int k = 0; k < 5; k++) {
        cs[k].lr = 0.05;
        double fused[3 * NE], apart[3 * NE], gf[NE], ga[NE];
        memset(fused, 0, sizeof fused), memset(apart, 0, sizeof apart);
        zeroing_steps(&cs[k], 1, fused, gf);
        zeroing_steps(&cs[k], 0, apart, ga);
        cr_assert(memcmp(fused, apart, sizeof fused) == 0, "config %d: fused and apart differ", k);
        int nonzero = 0;
        for (int i = 0; i < NE; i++) {
            cr_assert(gf[i] == 0 && !signbit(gf[i]), "config %d: gradient %d is %g", k, i, gf[i]);
            nonzero += ga[i] != 0;
        }
        cr_assert(nonzero == NE, "config %d: optim_step changed the gradients", k);
    }
}

Test(optim_step_decay, negative_wd_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    optim_step_decay(optim_new(f.arena, &f.pl, &c), -0.1, 2);
}

Test(optim_step_decay, nan_wd_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_step_decay(optim_new(f.arena, &f.pl, &c), NAN, 2);
}

Test(optim_step_decay, negative_min_ndim_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_SGD);
    optim_step_decay(optim_new(f.arena, &f.pl, &c), 0.1, -1);
}

/* AdamW with lr wd = 0 is Adam without decay; Adam with wd > 0 differs from AdamW. */
Test(optim_adamw, differs_from_adam_l2_and_equals_adam_without_decay) {
    double res[3][NE];
    OptimKind kinds[3] = {OPTIM_ADAM, OPTIM_ADAMW, OPTIM_ADAMW};
    double wds[3] = {0.1, 0.1, 0};
    for (int r = 0; r < 3; r++) {
        Fix f;
        fix_init(&f, 3);
        OptimConfig c = optim_defaults(kinds[r]);
        c.lr = 0.01;
        c.weight_decay = wds[r];
        Optimizer *o = optim_new(f.arena, &f.pl, &c);
        for (int t = 0; t < STEPS; t++) {
            put_grads(&f, f.g[t]);
            optim_step(o);
        }
        get_flat(o->params, o->n_params, res[r], 0);
        fix_free(&f);
    }
    double adam_vs_adamw = 0;
    for (int i = 0; i < NE; i++) adam_vs_adamw = fmax(adam_vs_adamw, fabs(res[0][i] - res[1][i]));
    cr_assert(adam_vs_adamw > 1e-5, "Adam(wd) and AdamW(wd) should differ (max %g)", adam_vs_adamw);

    Fix f;
    fix_init(&f, 3);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.lr = 0.01;
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    for (int t = 0; t < STEPS; t++) {
        put_grads(&f, f.g[t]);
        optim_step(o);
    }
    double adam0[NE];
    get_flat(o->params, o->n_params, adam0, 0);
    cr_assert(memcmp(adam0, res[2], sizeof adam0) == 0, "AdamW(wd 0) differs from Adam(wd 0)");
    fix_free(&f);
}

/* The paper's form of the update agrees with torch's order to rounding. */
Test(optim_adam, torch_order_agrees_with_the_paper_form) {
    Fix f;
    fix_init(&f, 9);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.lr = 0.01;
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    double p[NE], m[NE] = {0}, v[NE] = {0}, ours[NE];
    memcpy(p, f.p0, sizeof p);
    for (int t = 1; t <= STEPS; t++) {
        put_grads(&f, f.g[t - 1]);
        optim_step(o);
        ref_adam_textbook(p, m, v, f.g[t - 1], t, c.lr, c.beta1, c.beta2, c.eps);
        get_flat(o->params, o->n_params, ours, 0);
#ifdef AG_REAL_DOUBLE
        expect_match(ours, p, NE, 1e-14, "adam vs paper form", t);
#else
        expect_match(ours, p, NE, UPDATE_TOL, "adam vs paper form", t);
#endif
    }
    fix_free(&f);
}

/* The first step moves every element by lr g / (|g| + eps): about lr against the gradient's
 * sign, whatever the gradient's size (m_hat = g and v_hat = g^2 at t = 1). */
Test(optim_adam, first_step_moves_each_element_by_about_lr) {
    Fix f;
    fix_init(&f, 11);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    double g[NE], p[NE];
    for (int i = 0; i < NE; i++) g[i] = f.g[0][i] * (i % 2 ? 1e3 : 1e-3);
    put_grads(&f, g);
    optim_step(o);
    get_flat(o->params, o->n_params, p, 0);
    for (int i = 0; i < NE; i++) {
        double moved = f.p0[i] - p[i], expect = 1e-3 * g[i] / (fabs(g[i]) + 1e-8);
        cr_assert(fabs(moved - expect) <= 1e-12 + 2e-7 * fabs(f.p0[i]),
                  "element %d moved %.10g, expected %.10g for g %g", i, moved, expect, g[i]);
        cr_assert(fabs(fabs(moved) - 1e-3) < 1e-4, "element %d moved %g", i, moved);
    }
    fix_free(&f);
}

/* ---- schedules ---- */

Test(optim_schedule, constant_is_the_base_lr) {
    OptimSchedule s = {OPTIM_CONSTANT, 0, 0, 0};
    cr_assert_eq(optim_schedule_lr(&s, 3e-4, 1), 3e-4);
    cr_assert_eq(optim_schedule_lr(&s, 3e-4, 1000000), 3e-4);
}

/* base * min(t / warmup, sqrt(warmup / t)), warmup 4000 */
Test(optim_schedule, warmup_invsqrt_values) {
    OptimSchedule s = {OPTIM_WARMUP_INVSQRT, 4000, 0, 0};
    cr_assert_eq(optim_schedule_lr(&s, 1, 1), 1.0 / 4000);
    cr_assert_eq(optim_schedule_lr(&s, 1, 2000), 0.5);
    cr_assert_eq(optim_schedule_lr(&s, 1, 4000), 1.0); /* the peak: base, at t = warmup */
    cr_assert_eq(optim_schedule_lr(&s, 1, 16000), 0.5);
    cr_assert_float_eq(optim_schedule_lr(&s, 2, 4001), 2 * sqrt(4000.0 / 4001), 1e-15);
    cr_assert(optim_schedule_lr(&s, 1, 3999) < 1 && optim_schedule_lr(&s, 1, 4001) < 1);
}

/* With base = d^-0.5 warmup^-0.5 it is the paper's d^-0.5 min(t^-0.5, t warmup^-1.5). */
Test(optim_schedule, warmup_invsqrt_is_the_papers_formula) {
    double d = 512, w = 4000;
    OptimSchedule s = {OPTIM_WARMUP_INVSQRT, 4000, 0, 0};
    double base = pow(d, -0.5) * pow(w, -0.5);
    int64_t ts[] = {1, 10, 100, 3999, 4000, 4001, 10000, 100000};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        double t = (double)ts[i];
        double paper = pow(d, -0.5) * fmin(pow(t, -0.5), t * pow(w, -1.5));
        double ours = optim_schedule_lr(&s, base, ts[i]);
        cr_assert(fabs(ours - paper) <= 1e-12 * paper, "t %g: ours %.17g paper %.17g", t, ours,
                  paper);
    }
}

/* base 1e-3, lr_min 1e-5, warmup 10, total 110 */
Test(optim_schedule, warmup_cosine_values) {
    OptimSchedule s = {OPTIM_WARMUP_COSINE, 10, 110, 1e-5};
    double base = 1e-3;
    cr_assert_float_eq(optim_schedule_lr(&s, base, 1), 1e-4, 1e-18);
    cr_assert_float_eq(optim_schedule_lr(&s, base, 5), 5e-4, 1e-18);
    cr_assert_eq(optim_schedule_lr(&s, base, 10), base); /* end of warmup: the peak */
    cr_assert_float_eq(optim_schedule_lr(&s, base, 60), 1e-5 + (base - 1e-5) / 2, 1e-18);
    cr_assert_eq(optim_schedule_lr(&s, base, 110), 1e-5); /* end of the cosine: the floor */
    cr_assert_eq(optim_schedule_lr(&s, base, 111), 1e-5);
    cr_assert_eq(optim_schedule_lr(&s, base, 1000000), 1e-5);
    /* a quarter of the way: lr_min + (base - lr_min) (1 + cos(pi / 4)) / 2 */
    cr_assert_float_eq(optim_schedule_lr(&s, base, 35), 1e-5 + (base - 1e-5) * (1 + sqrt(0.5)) / 2,
                       1e-18);
    double prev = base;
    for (int64_t t = 11; t <= 110; t++) {
        double lr = optim_schedule_lr(&s, base, t);
        cr_assert(lr < prev && lr >= 1e-5, "not decreasing at %lld", (long long)t);
        prev = lr;
    }
}

Test(optim_schedule, cosine_without_warmup_starts_near_the_base) {
    OptimSchedule s = {OPTIM_WARMUP_COSINE, 0, 100, 0};
    double lr1 = optim_schedule_lr(&s, 1, 1);
    cr_assert_float_eq(lr1, (1 + cos(3.14159265358979323846 / 100)) / 2, 1e-15);
    cr_assert_eq(optim_schedule_lr(&s, 1, 100), 0);
}

/* The optimizer's step t uses the schedule's lr(t): optim_lr says it before the step. */
Test(optim_schedule, the_optimizer_steps_with_the_scheduled_lr) {
    Fix f;
    fix_init(&f, 5);
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = 0.5;
    c.schedule = (OptimSchedule){OPTIM_WARMUP_INVSQRT, 2, 0, 0};
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    double expect_lr[STEPS] = {0.25, 0.5, 0.5 * sqrt(2.0 / 3), 0.5 * sqrt(0.5), 0.5 * sqrt(0.4)};
    double p[NE], ours[NE];
    memcpy(p, f.p0, sizeof p);
    for (int t = 1; t <= STEPS; t++) {
        cr_assert_float_eq(optim_lr(o), expect_lr[t - 1], 1e-15);
        put_grads(&f, f.g[t - 1]);
        optim_step(o);
        cr_assert_float_eq(o->last_lr, expect_lr[t - 1], 1e-15);
        for (int i = 0; i < NE; i++) p[i] -= o->last_lr * f.g[t - 1][i];
        get_flat(o->params, o->n_params, ours, 0);
        expect_match(ours, p, NE, UPDATE_TOL, "sgd with schedule", t);
    }
    fix_free(&f);
}

/* ---- training state ---- */

Test(optim_state, named_after_the_parameters_zeroed_and_counted) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    cr_assert_eq(optim_state_count(o), 6);
    const char *names[6] = {"optim.lin.weight.exp_avg",    "optim.lin.weight.exp_avg_sq",
                            "optim.lin.bias.exp_avg",      "optim.lin.bias.exp_avg_sq",
                            "optim.blocks.0.gain.exp_avg", "optim.blocks.0.gain.exp_avg_sq"};
    for (int i = 0; i < 6; i++) {
        Tensor *s = optim_state_tensor(o, i);
        cr_assert_str_eq(s->name, names[i]);
        cr_assert(tensor_same_shape(s, f.pl.items[i / 2]));
        for (size_t e = 0; e < s->size; e++) cr_assert_eq(s->data[e], 0);
    }
    cr_assert_eq(optim_get_step(o), 0);

    OptimConfig sgd = optim_defaults(OPTIM_SGD);
    cr_assert_eq(optim_state_count(optim_new(f.arena, &f.pl, &sgd)), 0); /* no momentum */
    sgd.momentum = 0.9;
    Optimizer *m = optim_new(f.arena, &f.pl, &sgd);
    cr_assert_eq(optim_state_count(m), 3);
    cr_assert_str_eq(optim_state_tensor(m, 2)->name, "optim.blocks.0.gain.momentum_buffer");
    fix_free(&f);
}

/* No allocation in a step: the arena holding parameters and state does not grow. */
Test(optim_state, a_step_allocates_nothing) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    Optimizer *o = optim_new(f.arena, &f.pl, &c);
    size_t used = f.arena->used;
    for (int t = 0; t < STEPS; t++) {
        put_grads(&f, f.g[t]);
        optim_step(o);
        optim_clip_grad_norm(&f.pl, 0.1);
        ag_params_zero_grad(&f.pl);
    }
    cr_assert_eq(f.arena->used, used);
    fix_free(&f);
}

/* 5 steps in one run equal 3 steps, a copy of parameters, state and step count into a fresh
 * optimizer (what a checkpoint does), then 2 more: to the bit. Momentum SGD and AdamW with a
 * schedule, whose position is the step count. */
static void check_resume(const OptimConfig *c) {
    Fix a, b;
    fix_init(&a, 21);
    fix_init(&b, 21);
    Optimizer *oa = optim_new(a.arena, &a.pl, c);
    for (int t = 0; t < STEPS; t++) {
        put_grads(&a, a.g[t]);
        optim_step(oa);
    }
    Optimizer *first = optim_new(b.arena, &b.pl, c);
    for (int t = 0; t < 3; t++) {
        put_grads(&b, b.g[t]);
        optim_step(first);
    }
    /* "save" into a second set of parameters and a second optimizer */
    Fix r;
    fix_init(&r, 77); /* other initial values, overwritten below */
    Optimizer *resumed = optim_new(r.arena, &r.pl, c);
    for (int j = 0; j < b.pl.n; j++)
        memcpy(r.pl.items[j]->data, b.pl.items[j]->data, b.pl.items[j]->size * sizeof(Real));
    cr_assert_eq(optim_state_count(resumed), optim_state_count(first));
    for (int i = 0; i < optim_state_count(first); i++) {
        Tensor *from = optim_state_tensor(first, i), *to = optim_state_tensor(resumed, i);
        cr_assert_str_eq(from->name, to->name);
        memcpy(to->data, from->data, from->size * sizeof(Real));
    }
    optim_set_step(resumed, optim_get_step(first));
    for (int t = 3; t < STEPS; t++) {
        put_grads(&r, a.g[t]);
        optim_step(resumed);
    }
    for (int j = 0; j < a.pl.n; j++)
        cr_assert(memcmp(a.pl.items[j]->data, r.pl.items[j]->data,
                         a.pl.items[j]->size * sizeof(Real)) == 0,
                  "resumed run differs in %s", a.pl.items[j]->name);
    fix_free(&a);
    fix_free(&b);
    fix_free(&r);
}

Test(optim_state, resuming_from_saved_state_continues_exactly) {
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    c.lr = 0.01;
    c.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 2, 6, 1e-4};
    check_resume(&c);
    OptimConfig s = optim_defaults(OPTIM_SGD);
    s.lr = 0.1;
    s.momentum = 0.9;
    s.nesterov = 1;
    check_resume(&s);
}

/* ---- clipping ---- */

/* gradients 3, 4 and 12 in three tensors, zero elsewhere: the norm is exactly 13 */
static void grads_3_4_12(Fix *f) {
    double g[NE] = {0};
    g[0] = 3;   /* lin.weight */
    g[13] = -4; /* lin.bias */
    g[27] = 12; /* blocks.0.gain */
    put_grads(f, g);
}

Test(optim_clip, returns_the_norm_before_clipping) {
    Fix f;
    fix_init(&f, 2);
    grads_3_4_12(&f);
    cr_assert_eq(optim_clip_grad_norm(&f.pl, 1e9), 13.0);
    /* random gradients: the hand-computed norm, one running sum over all elements */
    put_grads(&f, f.g[0]);
    double s = 0;
    for (int i = 0; i < NE; i++) s += f.g[0][i] * f.g[0][i];
    double norm = optim_clip_grad_norm(&f.pl, 1e9);
    cr_assert(fabs(norm - sqrt(s)) <= 1e-14 * sqrt(s), "norm %.17g, by hand %.17g", norm, sqrt(s));
    fix_free(&f);
}

Test(optim_clip, after_clipping_the_norm_is_max_norm) {
    Fix f;
    fix_init(&f, 2);
    grads_3_4_12(&f);
    cr_assert_eq(optim_clip_grad_norm(&f.pl, 1), 13.0);
    double g[NE];
    get_flat(f.pl.items, f.pl.n, g, 1);
    double coef = 1 / (13 + 1e-6);
    cr_assert_float_eq(g[0], 3 * coef, 1e-7);
    cr_assert_float_eq(g[13], -4 * coef, 1e-7);
    cr_assert_float_eq(g[27], 12 * coef, 1e-7);
    double after = optim_clip_grad_norm(&f.pl, 1e9);
    cr_assert(fabs(after - 1) <= 1e-6, "norm after clipping %.17g", after);

    put_grads(&f, f.g[1]);
    double before = optim_clip_grad_norm(&f.pl, 0.25);
    cr_assert(before > 1, "the case must clip (norm %g)", before);
    after = optim_clip_grad_norm(&f.pl, 1e9);
    cr_assert(fabs(after - 0.25) <= 1e-6 * 0.25, "norm after clipping %.17g", after);
    fix_free(&f);
}

Test(optim_clip, below_max_norm_nothing_changes) {
    Fix f;
    fix_init(&f, 2);
    grads_3_4_12(&f);
    Real before[NE], after[NE];
    int k = 0;
    for (int j = 0; j < f.pl.n; j++)
        for (size_t e = 0; e < f.pl.items[j]->size; e++) before[k++] = f.pl.items[j]->grad[e];
    cr_assert_eq(optim_clip_grad_norm(&f.pl, 14), 13.0);
    k = 0;
    for (int j = 0; j < f.pl.n; j++)
        for (size_t e = 0; e < f.pl.items[j]->size; e++) after[k++] = f.pl.items[j]->grad[e];
    cr_assert(memcmp(before, after, sizeof before) == 0);
    fix_free(&f);
}

/* A NaN or inf gradient: the norm says so and nothing is scaled. */
Test(optim_clip, a_non_finite_norm_is_returned_and_nothing_scaled) {
    Fix f;
    fix_init(&f, 2);
    grads_3_4_12(&f);
    f.pl.items[1]->grad[2] = (Real)NAN;
    cr_assert(isnan(optim_clip_grad_norm(&f.pl, 1)));
    cr_assert_eq(f.pl.items[0]->grad[0], 3);
    cr_assert_eq(f.pl.items[2]->grad[11], 12);
    f.pl.items[1]->grad[2] = (Real)INFINITY;
    cr_assert(isinf(optim_clip_grad_norm(&f.pl, 1)));
    cr_assert_eq(f.pl.items[0]->grad[0], 3);
    cr_assert_eq(f.pl.items[1]->grad[1], -4);
    fix_free(&f);
}

/* Huge finite gradients: the norm is still their finite norm, and clipping brings it to
 * max_norm. In the double build 1e200 squares to inf (the norm is summed again scaled); in the
 * float build 1e30, near the top of float, whose squares double holds. */
Test(optim_clip, huge_finite_gradients_still_clip) {
    const double big = sizeof(Real) == sizeof(double) ? 1e200 : 1e30;
    Fix f;
    fix_init(&f, 2);
    grads_3_4_12(&f);
    for (int i = 0; i < f.pl.n; i++)
        for (size_t e = 0; e < f.pl.items[i]->size; e++) f.pl.items[i]->grad[e] *= (Real)big;
    double norm = optim_clip_grad_norm(&f.pl, 1);
    cr_assert(fabs(norm - 13 * big) <= 1e-6 * 13 * big, "norm %.17g", norm);
    double after = optim_clip_grad_norm(&f.pl, 1e300);
    cr_assert(fabs(after - 1) <= 1e-6, "norm after clipping %.17g", after);
    f.pl.items[1]->grad[0] = (Real)INFINITY; /* an inf among huge values: still inf */
    for (int i = 0; i < f.pl.n; i++)
        for (size_t e = 0; e < f.pl.items[i]->size; e++) f.pl.items[i]->grad[e] *= (Real)big;
    cr_assert(isinf(optim_clip_grad_norm(&f.pl, 1)));
    fix_free(&f);
}

/* ---- gradient accumulation ----
 * A tiny classifier, Linear(3, 5) -> relu -> Linear(5, 4) -> mean cross-entropy, on a batch of
 * 4 rows at once, and on 2 micro-batches of 2 rows whose losses are scaled by 1/2 and whose
 * gradients accumulate (no zero_grad in between). The two gradients are the same sum of the
 * same per-row terms (each row's logits gradient is 1/4 (softmax - onehot) in both: 1/4 from
 * the mean over 4, or 1/2 from the scale times 1/2 from the mean over 2), but not always in the
 * same grouping: a bias gradient is a column sum over the rows added to .grad, so it is
 * 0 + (r0 + r1 + r2 + r3) in one batch and (0 + (r0 + r1)) + (r2 + r3) in two. (Today's GEMM
 * adds each row straight into a weight's .grad, so weight gradients happen to match to the
 * bit on the first step; in the run measured, 42/44 first-step values were bit-identical,
 * the others differed by ~1e-17, and later steps inherit those differences through the
 * parameters.) So the check is a tolerance: 1e-14 (double) or 1e-6 (float) relative to
 * max(1, |value|), on the gradients and on the parameters after each of three Adam steps. */
#ifdef AG_REAL_DOUBLE
#define ACC_TOL 1e-14
#else
#define ACC_TOL 1e-6
#endif

typedef struct {
    Arena *arena;
    ParamList pl;
    Linear l1, l2;
    Optimizer *opt;
} TinyNet;

static void tiny_init(TinyNet *n) {
    n->arena = arena_new("params", 1 << 20);
    ag_params_init(&n->pl);
    Rng rng;
    rng_seed(&rng, 2718);
    NnBuilder b = nn_builder(n->arena, &n->pl, &rng);
    nn_linear_init(&n->l1, &b, "l1", 3, 5, NN_BIAS);
    nn_linear_init(&n->l2, &b, "l2", 5, 4, NN_BIAS);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.lr = 0.05;
    n->opt = optim_new(n->arena, &n->pl, &c);
}

/* loss of rows [r0, r0 + rows) of x (4, 3), scaled by s, then backward */
static void tiny_backward(TinyNet *n, Tape *t, const double *x, const int *y, int r0, int rows,
                          double s) {
    Tensor *in = tensor_new2(t->arena, rows, 3, "x");
    for (int i = 0; i < rows * 3; i++) in->data[i] = (Real)x[r0 * 3 + i];
    Tensor *h = ag_relu(t, nn_linear(t, &n->l1, in));
    Tensor *loss = ag_cross_entropy(t, nn_linear(t, &n->l2, h), y + r0, -1);
    if (s != 1) loss = ag_scale(t, loss, s);
    ag_backward(t, loss);
    ag_tape_reset(t);
}

static void compare_nets(TinyNet *a, TinyNet *b, int grads, const char *what, int *exact,
                         int *total) {
    for (int j = 0; j < a->pl.n; j++) {
        Tensor *pa = a->pl.items[j], *pb = b->pl.items[j];
        for (size_t e = 0; e < pa->size; e++) {
            double u = grads ? pa->grad[e] : pa->data[e], w = grads ? pb->grad[e] : pb->data[e];
            double err = fabs(u - w) / fmax(1, fabs(u));
            cr_assert(err <= ACC_TOL, "%s %s[%zu]: batch %.17g, micro-batches %.17g", what,
                      pa->name, e, u, w);
            *exact += u == w;
            (*total)++;
        }
    }
}

Test(optim_accumulation, two_micro_batches_equal_one_batch) {
    TinyNet full, micro;
    tiny_init(&full);
    tiny_init(&micro);
    Tape *t = ag_tape_new(arena_new("step", 1 << 20));
    Rng rng;
    rng_seed(&rng, 99);
    double x[12];
    int y[4] = {0, 2, 1, 3};
    int exact = 0, total = 0, g_exact = 0, g_total = 0;
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 12; i++) x[i] = (float)rng_normal(&rng);
        ag_params_zero_grad(&full.pl);
        tiny_backward(&full, t, x, y, 0, 4, 1);
        ag_params_zero_grad(&micro.pl);
        tiny_backward(&micro, t, x, y, 0, 2, 0.5);
        tiny_backward(&micro, t, x, y, 2, 2, 0.5);
        compare_nets(&full, &micro, 1, "gradient", &g_exact, &g_total);
        if (step == 0)
            cr_log_info("accumulation, first step: %d/%d gradient values bit-identical", g_exact,
                        g_total);
        optim_step(full.opt);
        optim_step(micro.opt);
        compare_nets(&full, &micro, 0, "parameter after Adam", &exact, &total);
    }
    cr_log_info("accumulation: %d/%d gradient values and %d/%d parameter values bit-identical",
                g_exact, g_total, exact, total);
    /* the gradients are not trivially zero */
    cr_assert(k_sum_squares_grads(&full.l1.weight, 1) > 0);
    arena_free(t->arena);
    ag_tape_free(t);
    ag_params_free(&full.pl);
    arena_free(full.arena);
    ag_params_free(&micro.pl);
    arena_free(micro.arena);
}

/* ---- determinism ---- */

/* 3 steps of cfg on 3000 parameters with `threads` threads; returns the final parameters and
 * state (malloc'd, caller frees). */
static Real *run_threads(const OptimConfig *cfg, int threads, size_t *n_out) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    Arena *a = arena_new("params", 1 << 20);
    ParamList pl;
    ag_params_init(&pl);
    Rng rng;
    rng_seed(&rng, 31);
    NnBuilder b = nn_builder(a, &pl, &rng);
    Tensor *w = nn_param(&b, "w.weight", 2, (int[]){40, 50});
    Tensor *v = nn_param(&b, "v.bias", 1, (int[]){1000});
    rng_fill_normal(&rng, w, 0, 1);
    rng_fill_normal(&rng, v, 0, 1);
    Optimizer *o = optim_new(a, &pl, cfg);
    for (int t = 0; t < 3; t++) {
        for (size_t e = 0; e < w->size; e++) w->grad[e] = (Real)rng_normal(&rng);
        for (size_t e = 0; e < v->size; e++) v->grad[e] = (Real)rng_normal(&rng);
        optim_clip_grad_norm(&pl, 10);
        optim_step(o);
    }
    size_t n = w->size + v->size;
    for (int i = 0; i < optim_state_count(o); i++) n += optim_state_tensor(o, i)->size;
    Real *out = malloc(n * sizeof(Real)), *q = out;
    memcpy(q, w->data, w->size * sizeof(Real));
    q += w->size;
    memcpy(q, v->data, v->size * sizeof(Real));
    q += v->size;
    for (int i = 0; i < optim_state_count(o); i++) {
        Tensor *s = optim_state_tensor(o, i);
        memcpy(q, s->data, s->size * sizeof(Real));
        q += s->size;
    }
    *n_out = n;
    ag_params_free(&pl);
    arena_free(a);
    return out;
}

static void check_threads(const OptimConfig *c, const char *what) {
    size_t saved = k_par_min, n1, n2;
    k_par_min = 1; /* split even small loops across threads */
    Real *one = run_threads(c, 1, &n1), *two = run_threads(c, 2, &n2);
    k_par_min = saved;
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(one, two, n1 * sizeof(Real)) == 0, "%s: 1 and 2 threads differ", what);
    free(one);
    free(two);
}

Test(optim_threads, adam_and_sgd_bit_identical_for_1_and_2_threads) {
    OptimConfig adam = optim_defaults(OPTIM_ADAM);
    adam.weight_decay = 0.01;
    check_threads(&adam, "adam");
    OptimConfig adamw = optim_defaults(OPTIM_ADAMW);
    check_threads(&adamw, "adamw");
    OptimConfig sgd = optim_defaults(OPTIM_SGD);
    sgd.momentum = 0.9;
    sgd.nesterov = 1;
    sgd.weight_decay = 0.01;
    check_threads(&sgd, "sgd");
}

/* The clipping norm of gradients of 1 to several blocks of 4096 (k_sum_squares_grads): the same
 * bits for 1, 2 and 3 threads, the true norm to rounding, and the scaling the same as well. */
static double clip_norm_threads(int threads, Real *scaled, size_t n_scaled) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    Arena *a = arena_new("params", 0);
    ParamList pl;
    ag_params_init(&pl);
    Rng rng;
    rng_seed(&rng, 5);
    NnBuilder b = nn_builder(a, &pl, &rng);
    int sizes[] = {1, 4095, 4096, 4097, 13000, 7};
    size_t at = 0;
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d.weight", i);
        nn_param(&b, name, 1, (int[]){sizes[i]});
    }
    for (int i = 0; i < pl.n; i++)
        for (size_t e = 0; e < pl.items[i]->size; e++)
            pl.items[i]->grad[e] = (Real)rng_normal(&rng);
    long double exact = 0;
    for (int i = 0; i < pl.n; i++)
        for (size_t e = 0; e < pl.items[i]->size; e++)
            exact += (long double)pl.items[i]->grad[e] * pl.items[i]->grad[e];
    double norm = optim_clip_grad_norm(&pl, 1), want = sqrt((double)exact);
    cr_assert(fabs(norm - want) <= 1e-14 * want, "norm %.17g, exact %.17g", norm, want);
    for (int i = 0; i < pl.n; i++)
        for (size_t e = 0; e < pl.items[i]->size && at < n_scaled; e++)
            scaled[at++] = pl.items[i]->grad[e];
    ag_params_free(&pl);
    arena_free(a);
    return norm;
}

Test(optim_threads, clip_norm_bit_identical_for_1_2_and_3_threads) {
    size_t saved = k_par_min, n = 1 + 4095 + 4096 + 4097 + 13000 + 7;
    k_par_min = 1;
    Real *g[3];
    double norm[3];
    for (int t = 0; t < 3; t++) {
        g[t] = malloc(n * sizeof(Real));
        norm[t] = clip_norm_threads(t + 1, g[t], n);
    }
    k_par_min = saved;
    for (int t = 1; t < 3; t++) {
        cr_assert(memcmp(&norm[0], &norm[t], sizeof(double)) == 0, "1 and %d threads: %.17g %.17g",
                  t + 1, norm[0], norm[t]);
        cr_assert(memcmp(g[0], g[t], n * sizeof(Real)) == 0, "scaled gradients: 1 and %d threads",
                  t + 1);
    }
    for (int t = 0; t < 3; t++) free(g[t]);
}

/* ---- misuse aborts ---- */

static void make_with(OptimConfig c) {
    Fix f;
    fix_init(&f, 1);
    optim_new(f.arena, &f.pl, &c);
}

Test(optim_misuse, negative_lr_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.lr = -1e-3;
    make_with(c);
}

Test(optim_misuse, nan_lr_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.lr = NAN;
    make_with(c);
}

Test(optim_misuse, beta1_of_one_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.beta1 = 1;
    make_with(c);
}

Test(optim_misuse, negative_beta2_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    c.beta2 = -0.1;
    make_with(c);
}

Test(optim_misuse, zero_eps_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.eps = 0;
    make_with(c);
}

Test(optim_misuse, negative_weight_decay_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAMW);
    c.weight_decay = -0.01;
    make_with(c);
}

Test(optim_misuse, negative_momentum_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.momentum = -0.5;
    make_with(c);
}

Test(optim_misuse, nesterov_without_momentum_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.nesterov = 1;
    make_with(c);
}

Test(optim_misuse, unknown_kind_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.kind = (OptimKind)7;
    make_with(c);
}

Test(optim_misuse, invsqrt_without_warmup_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.schedule = (OptimSchedule){OPTIM_WARMUP_INVSQRT, 0, 0, 0};
    make_with(c);
}

Test(optim_misuse, cosine_total_not_after_warmup_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 100, 100, 0};
    make_with(c);
}

Test(optim_misuse, cosine_floor_above_lr_aborts, .signal = SIGABRT) {
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 10, 100, 1e-2};
    make_with(c);
}

Test(optim_misuse, schedule_step_zero_aborts, .signal = SIGABRT) {
    OptimSchedule s = {OPTIM_CONSTANT, 0, 0, 0};
    optim_schedule_lr(&s, 1, 0);
}

Test(optim_misuse, empty_parameter_list_aborts, .signal = SIGABRT) {
    Arena *a = arena_new("params", 1 << 16);
    ParamList pl;
    ag_params_init(&pl);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_new(a, &pl, &c);
}

Test(optim_misuse, a_parameter_without_gradient_aborts, .signal = SIGABRT) {
    Arena *a = arena_new("params", 1 << 16);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *t = tensor_new1(a, 3, "frozen");
    pl.items = &t;
    pl.n = pl.cap = 1;
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_new(a, &pl, &c);
}

Test(optim_misuse, state_index_out_of_range_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_state_tensor(optim_new(f.arena, &f.pl, &c), 6);
}

Test(optim_misuse, negative_step_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_set_step(optim_new(f.arena, &f.pl, &c), -1);
}

Test(optim_misuse, clip_to_zero_aborts, .signal = SIGABRT) {
    Fix f;
    fix_init(&f, 1);
    optim_clip_grad_norm(&f.pl, 0);
}

/* the messages name the function, the field and its value */
static void bad_beta1(void *ctx) {
    (void)ctx;
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    c.beta1 = 1;
    make_with(c);
}

static void nesterov_no_momentum(void *ctx) {
    (void)ctx;
    OptimConfig c = optim_defaults(OPTIM_SGD);
    c.nesterov = 1;
    make_with(c);
}

static void frozen_param(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("params", 1 << 16);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *t = tensor_new2(a, 2, 3, "frozen");
    pl.items = &t;
    pl.n = pl.cap = 1;
    OptimConfig c = optim_defaults(OPTIM_ADAM);
    optim_new(a, &pl, &c);
}

Test(optim_misuse, messages_name_the_field_and_value) {
    Capture c;
    capture_run(bad_beta1, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_file_line(&c, NULL, 0, NULL, NULL), "no file:line prefix: %s", c.err);
    cr_assert(capture_has(&c, "optim_new (adam): invalid beta1 1 (must be in [0, 1))"), "%s",
              c.err);
    capture_run(nesterov_no_momentum, NULL, &c);
    cr_assert(capture_aborted(&c));
    cr_assert(capture_has(&c, "optim_new (sgd): Nesterov momentum requires a momentum > 0"), "%s",
              c.err);
    capture_run(frozen_param, NULL, &c);
    cr_assert(capture_aborted(&c));
    cr_assert(capture_has(&c, "optim_new: parameter 0 'frozen' (2,3) has no gradient"), "%s",
              c.err);
}
