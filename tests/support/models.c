/* models.c: the small models of models.h (see there). Not Criterion's cr_assert: the support
 * objects link into tools without Criterion too, so a failure prints and aborts (AG_CHECK). */
#include "models.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ts_perturb(const ParamList *pl, Rng *rng, double sd1, double sd2) {
    for (int i = 0; i < pl->n; i++) {
        Tensor *p = pl->items[i];
        if (p->ndim == 1)
            rng_fill_normal(rng, p, 0.5, sd1);
        else if (sd2 > 0)
            rng_fill_normal(rng, p, 0, sd2);
    }
}

TsGpt ts_gpt_new(const GptConfig *c, uint64_t seed, double sd1, double sd2, int B, int T) {
    AG_CHECK(B > 0 && T > 0 && B * T <= TS_MAX_TOKENS,
             "ts_gpt_new: B %d, T %d: B * T not in [1, %d]", B, T, TS_MAX_TOKENS);
    TsGpt e;
    memset(&e, 0, sizeof e);
    e.a = arena_new("params", 0);
    e.t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, seed);
    nn_gpt_init(&e.m, e.a, &rng, c);
    ts_perturb(&e.m.params, &rng, sd1, sd2);
    for (int i = 0; i < B * T; i++) {
        e.ids[i] = (i * 5 + i / T * 3 + 1) % c->vocab_size;
        e.corrupt[i] = (i * 7 + 2) % c->vocab_size;
    }
    return e;
}

void ts_gpt_free(TsGpt *e) {
    Arena *step = e->t->arena;
    ag_tape_free(e->t);
    arena_free(step);
    nn_gpt_free(&e->m);
    arena_free(e->a);
}

int ts_count_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at;
    ++*(int *)ctx;
    return AG_OK;
}

Real *ts_values(const Tensor *y) {
    Real *out = malloc(y->size * sizeof(Real));
    AG_CHECK(out, "ts_values: out of memory (%zu values)", y->size);
    memcpy(out, y->data, y->size * sizeof(Real));
    return out;
}

Real *ts_logits_and_grads(Tape *t, const ParamList *pl, Tensor *logits, size_t *n) {
    AG_CHECK(logits, "ts_logits_and_grads: the forward failed: %s", ag_last_error());
    Tensor *r = tensor_new(t->arena, logits->ndim, logits->shape, "R");
    for (size_t i = 0; i < r->size; i++) r->data[i] = (Real)sin(0.7 * (double)i + 0.3);
    ag_params_zero_grad(pl);
    ag_backward(t, ag_sum(t, ag_mul(t, logits, r)));
    size_t total = logits->size + ag_params_count(pl), k = logits->size;
    Real *out = malloc(total * sizeof(Real));
    AG_CHECK(out, "ts_logits_and_grads: out of memory (%zu values)", total);
    memcpy(out, logits->data, logits->size * sizeof(Real));
    for (int i = 0; i < pl->n; i++) {
        const Tensor *p = pl->items[i];
        memcpy(out + k, p->grad, p->size * sizeof(Real));
        k += p->size;
    }
    *n = total;
    return out;
}

double ts_logits_error(const char *path, Gpt *m) {
    StFile *f;
    AG_CHECK(st_read(path, &f, NULL) == AG_OK, "ts_logits_error: %s", ag_last_error());
    const StTensor *ids = st_find(f, "ids"), *lg = st_find(f, "logits");
    AG_CHECK(ids && lg && ids->ndim == 2 && lg->ndim == 3 && lg->dtype == ST_F64 &&
                 lg->shape[0] == ids->shape[0] && lg->shape[1] == ids->shape[1] &&
                 lg->shape[2] == (int64_t)m->cfg.vocab_size,
             "ts_logits_error: %s: not ids (B, T) and F64 logits (B, T, %d)", path,
             m->cfg.vocab_size);
    int B = (int)ids->shape[0], T = (int)ids->shape[1];
    int *idx = malloc(sizeof(int) * (size_t)B * (size_t)T);
    AG_CHECK(idx, "ts_logits_error: out of memory (%d ids)", B * T);
    for (int i = 0; i < B * T; i++) idx[i] = (int)st_value(ids, (size_t)i);
    Tape *t = ag_tape_new(arena_new("step", 0));
    ag_no_grad(t, 1);
    Tensor *y = nn_gpt_forward(t, m, idx, B, T, NULL);
    AG_CHECK(y && y->size == lg->count, "ts_logits_error: %s: the forward failed: %s", path,
             ag_last_error());
    double worst = 0;
    for (size_t i = 0; i < y->size; i++) {
        double want = st_value(lg, i), e = fabs((double)y->data[i] - want) / (1 + fabs(want));
        if (!(e <= worst)) worst = e; /* a NaN wins */
    }
    Arena *step = t->arena;
    ag_tape_free(t);
    arena_free(step);
    free(idx);
    st_free(f);
    return worst;
}
