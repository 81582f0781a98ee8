/* optim.c: creating an optimizer (checking its configuration, allocating its state once),
 * one step (the scalars of the step in double, then one k_ update per parameter), schedules
 * and gradient clipping. Not here: the update loops (../tensor/k_optim.c). */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tensor/kernels.h"

#define OPTIM_PI 3.14159265358979323846

static const char *kind_name(OptimKind k) {
    switch (k) {
    case OPTIM_SGD: return "sgd";
    case OPTIM_ADAM: return "adam";
    case OPTIM_ADAMW: return "adamw";
    }
    return "?";
}

/* ---- schedules ---- */

/* AG_OK, or AG_ERR_ARG with the reason (who names the caller in the message). */
static int schedule_check(const OptimSchedule *s, double base, const char *who) {
    switch (s->kind) {
    case OPTIM_CONSTANT: return AG_OK;
    case OPTIM_WARMUP_INVSQRT:
        if (s->warmup < 1)
            return ag_fail(AG_ERR_ARG, "%s: warmup_invsqrt schedule needs warmup >= 1 (got %lld)",
                           who, (long long)s->warmup);
        return AG_OK;
    case OPTIM_WARMUP_COSINE:
        if (!(s->warmup >= 0 && s->total > s->warmup))
            return ag_fail(AG_ERR_ARG,
                           "%s: warmup_cosine schedule needs 0 <= warmup < total (got warmup "
                           "%lld, total %lld)",
                           who, (long long)s->warmup, (long long)s->total);
        if (!(s->lr_min >= 0 && s->lr_min <= base))
            return ag_fail(AG_ERR_ARG,
                           "%s: warmup_cosine schedule needs 0 <= lr_min <= lr (got lr_min %g, "
                           "lr %g)",
                           who, s->lr_min, base);
        return AG_OK;
    }
    return ag_fail(AG_ERR_ARG, "%s: unknown schedule kind %d", who, (int)s->kind);
}

static void check_schedule(const OptimSchedule *s, double base, const char *who) {
    AG_CHECK(s != NULL, "%s: schedule is NULL", who);
    AG_CHECK(schedule_check(s, base, who) == AG_OK, "%s", ag_last_error());
}

double optim_schedule_lr(const OptimSchedule *s, double base, int64_t t) {
    AG_CHECK_ARG(s);
    check_schedule(s, base, "optim_schedule_lr");
    AG_CHECK(t >= 1, "optim_schedule_lr: steps count from 1 (got %lld)", (long long)t);
    double td = (double)t, w = (double)s->warmup;
    switch (s->kind) {
    case OPTIM_WARMUP_INVSQRT: return base * fmin(td / w, sqrt(w / td));
    case OPTIM_WARMUP_COSINE:
        if (t <= s->warmup) return base * (td / w);
        if (t >= s->total) return s->lr_min;
        {
            double progress = (td - w) / ((double)s->total - w);
            return s->lr_min + (base - s->lr_min) * 0.5 * (1 + cos(OPTIM_PI * progress));
        }
    default: return base;
    }
}

/* ---- creation ---- */

OptimConfig optim_defaults(OptimKind kind) {
    OptimConfig c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = kind == OPTIM_ADAMW ? 1e-2 : 0;
    c.schedule.kind = OPTIM_CONSTANT;
    return c;
}

int optim_check_config(const OptimConfig *c) {
    AG_CHECK_ARG(c);
    if (c->kind != OPTIM_SGD && c->kind != OPTIM_ADAM && c->kind != OPTIM_ADAMW)
        return ag_fail(AG_ERR_ARG, "optim_new: unknown optimizer kind %d", (int)c->kind);
    const char *k = kind_name(c->kind);
    /* !(x >= 0) also catches NaN */
    if (!(c->lr >= 0 && isfinite(c->lr)))
        return ag_fail(AG_ERR_ARG, "optim_new (%s): invalid lr %g (must be >= 0)", k, c->lr);
    if (!(c->weight_decay >= 0 && isfinite(c->weight_decay)))
        return ag_fail(AG_ERR_ARG, "optim_new (%s): invalid weight_decay %g (must be >= 0)", k,
                       c->weight_decay);
    if (c->kind == OPTIM_SGD) {
        if (!(c->momentum >= 0 && isfinite(c->momentum)))
            return ag_fail(AG_ERR_ARG, "optim_new (sgd): invalid momentum %g (must be >= 0)",
                           c->momentum);
        if (c->nesterov && !(c->momentum > 0))
            return ag_fail(AG_ERR_ARG,
                           "optim_new (sgd): Nesterov momentum requires a momentum > 0 (got %g)",
                           c->momentum);
    } else {
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            return ag_fail(AG_ERR_ARG, "optim_new (%s): invalid beta1 %g (must be in [0, 1))", k,
                           c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            return ag_fail(AG_ERR_ARG, "optim_new (%s): invalid beta2 %g (must be in [0, 1))", k,
                           c->beta2);
        if (!(c->eps > 0 && isfinite(c->eps)))
            return ag_fail(AG_ERR_ARG, "optim_new (%s): invalid eps %g (must be > 0)", k, c->eps);
    }
    return schedule_check(&c->schedule, c->lr, "optim_new");
}

static void check_config(const OptimConfig *c) {
    AG_CHECK(optim_check_config(c) == AG_OK, "%s", ag_last_error());
}

/* A zeroed state tensor shaped as p, named "optim.<p>.<what>", appended to o->state. */
static Tensor *state_tensor(Optimizer *o, Arena *a, const Tensor *p, const char *what) {
    size_t len = strlen("optim.") + strlen(p->name) + 1 + strlen(what);
    AG_CHECK(len < AG_NAME_LEN, "optim_new: state name 'optim.%s.%s' is longer than %d characters",
             p->name, what, AG_NAME_LEN - 1);
    Tensor *t = tensor_zeros(a, p->ndim, p->shape, "optim");
    tensor_set_name(t, "optim.%s.%s", p->name, what);
    o->state[o->n_state++] = t;
    return t;
}

Optimizer *optim_new(Arena *a, const ParamList *pl, const OptimConfig *cfg) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(cfg);
    check_config(cfg);
    AG_CHECK(pl->n > 0, "optim_new: the parameter list is empty");
    int n = pl->n;
    Optimizer *o = arena_alloc(a, sizeof *o);
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n_params = n;
    size_t bytes = (size_t)n * sizeof(Tensor *);
    o->params = arena_alloc(a, bytes);
    o->exp_avg = arena_alloc(a, bytes);
    o->exp_avg_sq = arena_alloc(a, bytes);
    o->momentum_buffer = arena_alloc(a, bytes);
    o->state = arena_alloc(a, 2 * bytes);
    for (int i = 0; i < n; i++) {
        Tensor *p = pl->items[i];
        if (p && !p->grad && p->is_param && p->requires_grad)
            tensor_requires_grad(p); /* made in an arena_lazy_grads arena */
        AG_CHECK(p != NULL && p->grad != NULL,
                 "optim_new: parameter %d '%s' %s has no gradient (make it with nn_param or "
                 "tensor_param)",
                 i, p ? p->name : "NULL", tensor_shape_str(p));
        for (int j = 0; j < i; j++)
            AG_CHECK(o->params[j] != p, "optim_new: parameter '%s' is in the list twice", p->name);
        o->params[i] = p;
        o->exp_avg[i] = o->exp_avg_sq[i] = o->momentum_buffer[i] = NULL;
        if (cfg->kind == OPTIM_SGD) {
            if (cfg->momentum != 0)
                o->momentum_buffer[i] = state_tensor(o, a, p, "momentum_buffer");
        } else {
            o->exp_avg[i] = state_tensor(o, a, p, "exp_avg");
            o->exp_avg_sq[i] = state_tensor(o, a, p, "exp_avg_sq");
        }
    }
    return o;
}

/* ---- the step ---- */

double optim_lr(const Optimizer *o) {
    AG_CHECK_ARG(o);
    return optim_schedule_lr(&o->cfg.schedule, o->cfg.lr, o->step + 1);
}

/* One step; before it, the parameters of at least min_ndim dimensions are scaled by pre (1:
 * none): in Adam's pass, as its first operation on each element, or by a pass of their own
 * before SGD's. zero: each gradient element set to 0 in the same pass, once read. */
static void step(Optimizer *o, double wd, int min_ndim, int zero) {
    const OptimConfig *c = &o->cfg;
    int64_t t = o->step + 1;
    double lr = optim_schedule_lr(&c->schedule, c->lr, t);
    Real pre = (Real)(1 - lr * wd);
    /* the packed bf16 copies of the weights (k_gemm_bf16.c): SGD's step leaves them stale,
     * Adam's packs them as it writes each block of rows */
    k_bf16_cache_begin(o->params, o->n_params, c->kind != OPTIM_SGD);
    if (c->kind == OPTIM_SGD) {
        KSgd h = {(Real)lr, (Real)c->momentum, (Real)c->weight_decay, c->nesterov, t == 1, zero};
        for (int i = 0; i < o->n_params; i++) {
            Tensor *p = o->params[i];
            if (wd != 0 && p->ndim >= min_ndim) k_scale_inplace(p->data, pre, p->size);
            Real *buf = o->momentum_buffer[i] ? o->momentum_buffer[i]->data : NULL;
            k_sgd_step(p->data, p->grad, buf, p->size, &h);
        }
    } else {
        /* torch: bias_correction1 = 1 - beta1 ** step; step_size = lr / bias_correction1;
         * bias_correction2_sqrt = sqrt(1 - beta2 ** step), all in double */
        double bc1 = 1 - pow(c->beta1, (double)t), bc2 = 1 - pow(c->beta2, (double)t);
        int adamw = c->kind == OPTIM_ADAMW;
        KAdam h = {
            .beta1 = (Real)c->beta1,
            .beta2 = (Real)c->beta2,
            .one_minus_beta1 = (Real)(1 - c->beta1),
            .one_minus_beta2 = (Real)(1 - c->beta2),
            .eps = (Real)c->eps,
            .l2 = adamw ? 0 : (Real)c->weight_decay,
            .decay = adamw ? (Real)(1 - lr * c->weight_decay) : 1,
            .step_size = (Real)(lr / bc1),
            .bc2_sqrt = (Real)sqrt(bc2),
            .pre = wd != 0 ? pre : 1,
            .pre_min_ndim = min_ndim,
            .zero_grad = zero,
        };
        /* all parameters in one parallel region (k_adam_step_many); nothing allocated */
        k_adam_step_many(o->params, o->exp_avg, o->exp_avg_sq, o->n_params, &h);
    }
    o->step = t;
    o->last_lr = lr;
}

void optim_step(Optimizer *o) {
    AG_CHECK_ARG(o);
    step(o, 0, 0, 0);
}

void optim_step_zero_grad(Optimizer *o) {
    AG_CHECK_ARG(o);
    step(o, 0, 0, 1);
}

void optim_step_decay(Optimizer *o, double wd, int min_ndim) {
    AG_CHECK_ARG(o);
    AG_CHECK(wd >= 0 && isfinite(wd) && min_ndim >= 0,
             "optim_step_decay: wd %g must be >= 0 and finite, min_ndim %d >= 0", wd, min_ndim);
    step(o, wd, min_ndim, 0);
}

/* ---- training state ---- */

int optim_state_count(const Optimizer *o) {
    AG_CHECK_ARG(o);
    return o->n_state;
}

Tensor *optim_state_tensor(const Optimizer *o, int i) {
    AG_CHECK_ARG(o);
    AG_CHECK(i >= 0 && i < o->n_state, "optim_state_tensor: index %d outside [0, %d)", i,
             o->n_state);
    return o->state[i];
}

int64_t optim_get_step(const Optimizer *o) {
    AG_CHECK_ARG(o);
    return o->step;
}

void optim_set_step(Optimizer *o, int64_t step) {
    AG_CHECK_ARG(o);
    AG_CHECK(step >= 0, "optim_set_step: step %lld is negative", (long long)step);
    o->step = step;
}

/* ---- clipping ---- */

/* The norm again, when the sum of squares overflowed: every gradient divided by the largest
 * magnitude first, as BLAS's nrm2 does. In the double build finite values beyond about 1e154
 * square to inf, and a diverging run gets there: then the norm is still finite and clipping
 * still works. (Floats squared in double cannot overflow.) A NaN or inf gradient gives it back. */
static double scaled_norm(const ParamList *pl) {
    double big = 0;
    for (int i = 0; i < pl->n; i++) {
        const Tensor *p = pl->items[i];
        for (size_t j = 0; p->grad && j < p->size; j++) {
            double a = fabs((double)p->grad[j]);
            if (!isfinite(a)) return a;
            if (a > big) big = a;
        }
    }
    if (big == 0) return 0;
    double s = 0;
    for (int i = 0; i < pl->n; i++) {
        const Tensor *p = pl->items[i];
        for (size_t j = 0; p->grad && j < p->size; j++) {
            double x = (double)p->grad[j] / big;
            s += x * x;
        }
    }
    return big * sqrt(s);
}

double optim_clip_grad_norm(const ParamList *pl, double max_norm) {
    AG_CHECK_ARG(pl);
    AG_CHECK(max_norm > 0 && isfinite(max_norm),
             "optim_clip_grad_norm: max_norm %g must be > 0 and finite", max_norm);
    double norm = sqrt(k_sum_squares_grads(pl->items, pl->n));
    if (isinf(norm)) norm = scaled_norm(pl); /* finite values whose squares overflow? */
    if (!isfinite(norm)) return norm;
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) k_scale_grads(pl->items, pl->n, (Real)coef);
    return norm;
}
