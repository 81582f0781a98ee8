/* test_lens_cached.c: hooks in the GPT's incremental forward (nn_gpt_forward_cached_hooked,
 * src/nn/gpt.c): a prompt and then one token at a time, as sampling runs, gives at every hook
 * point the activations of the full forward at the same positions (the scores and the pattern
 * over every cached key), with GPT-2's learned positions and LLaMA's RoPE (also with grouped-query
 * heads); an ablation in the cached forward (of z, and of the keys, before or after the rotation,
 * which then join the cache) gives the ablated full
 * forward's logits; the hooks are gone after each call.
 * Not here: the full forward's points (test_lens.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"
#include "models.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-11
#else
#define TOL 1e-4
#endif

enum { B = 2, T = 7, PROMPT = 3 };

static const GptConfig gpt2 = {
    .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};
static const GptConfig llama = {
    .style = NN_LLAMA, .vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};

/* a model of c (seed 9) with its biases and norms away from 0 and 1: N(0.5, 0.2) */
static TsGpt env_new(const GptConfig *c) { return ts_gpt_new(c, 9, 0.2, 0, B, T); }

/* value i (C order) of a step's activation a, which holds positions [p0, p0 + n) on its
 * position axis, against the full forward's f at the same place */
static void check_slice(const LensAct *a, const LensAct *f, int p0) {
    cr_assert_eq(a->ndim, f->ndim, "%s", a->at.name);
    for (size_t i = 0; i < a->size; i++) {
        size_t rest = i, fi = 0;
        int idx[AG_MAX_DIMS];
        for (int d = a->ndim - 1; d >= 0; d--)
            idx[d] = (int)(rest % a->shape[d]), rest /= a->shape[d];
        for (int d = 0; d < a->ndim; d++) {
            int k = idx[d] + (d == a->at.pos_axis ? p0 : 0);
            cr_assert_lt(k, f->shape[d], "%s: axis %d index %d of %d", a->at.name, d, k,
                         f->shape[d]);
            fi = fi * f->shape[d] + k;
        }
        double x = a->data[i], y = f->data[fi];
        int same = (isinf(x) && x == y) || fabs(x - y) <= TOL * (1 + fabs(y));
        cr_assert(same, "%s at step position %d: value %zu is %.10g, the full forward's %.10g",
                  a->at.name, p0, i, x, y);
    }
}

/* the cached run, a prompt then one token at a time, with fresh hooks from add() per call;
 * each call's cache into steps[k]; the last call's logits (B, 1, V) and every call's into
 * logits (B, T, V) */
typedef void (*AddHooks)(NnHooks *h, LensCache *c, void *ctx);

static int run_cached(TsGpt *e, AddHooks add, void *ctx, LensCache *steps, int *p0, Real *logits) {
    GptCache kc;
    nn_gpt_cache_init(&kc, &e->m, B, T);
    int V = e->m.cfg.vocab_size, k = 0;
    for (int pos = 0; pos < T; k++) {
        int n = pos == 0 ? PROMPT : 1, ids[B * PROMPT];
        for (int b = 0; b < B; b++)
            for (int i = 0; i < n; i++) ids[b * n + i] = e->ids[b * T + pos + i];
        NnHooks h;
        nn_hooks_init(&h, e->m.cfg.n_layer);
        lens_cache_init(&steps[k], 0);
        add(&h, &steps[k], ctx);
        ag_tape_reset(e->t);
        Tensor *y = nn_gpt_forward_cached_hooked(e->t, &e->m, &kc, ids, B, n, &h);
        cr_assert(y, "%s", ag_last_error());
        cr_assert(e->m.hooks == NULL);
        cr_assert_eq(kc.len, pos + n);
        for (int b = 0; b < B; b++)
            memcpy(logits + ((size_t)b * T + pos) * V, y->data + (size_t)b * n * V,
                   (size_t)n * V * sizeof(Real));
        p0[k] = pos;
        pos += n;
        nn_hooks_free(&h);
    }
    nn_gpt_cache_free(&kc);
    return k;
}

static void add_cache_all(NnHooks *h, LensCache *c, void *ctx) {
    (void)ctx;
    cr_assert_gt(nn_hooks_add(h, "*", lens_cache_hook, c), 0);
}

static void check_every_point(const GptConfig *cfg) {
    TsGpt e = env_new(cfg);
    LensCache full;
    lens_cache_init(&full, 0);
    NnHooks h;
    nn_hooks_init(&h, cfg->n_layer);
    nn_hooks_add(&h, "*", lens_cache_hook, &full);
    ag_tape_reset(e.t);
    ag_no_grad(e.t, 1);
    Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
    cr_assert(y);
    size_t nl = y->size;
    Real *want = malloc(nl * sizeof(Real)), *got = malloc(nl * sizeof(Real));
    memcpy(want, y->data, nl * sizeof(Real));
    nn_hooks_free(&h);
    LensCache steps[T];
    int p0[T];
    int n = run_cached(&e, add_cache_all, NULL, steps, p0, got);
    cr_assert_eq(n, 1 + T - PROMPT);
    for (int k = 0; k < n; k++) {
        cr_assert_eq(steps[k].n, full.n, "step %d cached %d points, the full forward %d", k,
                     steps[k].n, full.n);
        for (int i = 0; i < steps[k].n; i++) {
            const LensAct *a = &steps[k].acts[i], *f = lens_cache_get(&full, a->at.name);
            cr_assert(f, "%s", a->at.name);
            check_slice(a, f, p0[k]);
        }
        /* the pattern of the last step: one query over every key so far */
        const LensAct *p = lens_cache_get(&steps[k], "blocks.1.attn.hook_pattern");
        cr_assert(p->shape[3] == p0[k] + (k == 0 ? PROMPT : 1));
        lens_cache_free(&steps[k]);
    }
    for (size_t i = 0; i < nl; i++)
        cr_assert(fabs((double)want[i] - got[i]) <= TOL * (1 + fabs((double)want[i])), "logit %zu",
                  i);
    free(want);
    free(got);
    lens_cache_free(&full);
    ts_gpt_free(&e);
}

Test(lens_cached, every_point_of_a_cached_step_is_the_full_forwards_at_its_positions_gpt2) {
    check_every_point(&gpt2);
}
Test(lens_cached, every_point_of_a_cached_step_is_the_full_forwards_at_its_positions_llama) {
    check_every_point(&llama);
}
/* grouped-query heads (4 query heads on 2 key/value heads) with rotary positions */
static const GptConfig llama_gqa = {.style = NN_LLAMA,
                                    .vocab_size = 11,
                                    .block_size = 8,
                                    .n_layer = 2,
                                    .n_head = 4,
                                    .n_kv_head = 2,
                                    .n_embd = 16};
Test(lens_cached, every_point_of_a_cached_step_is_the_full_forwards_at_its_positions_gqa) {
    check_every_point(&llama_gqa);
}

typedef struct {
    const char *point;
    LensAblation *ab;
} AblateAt;
static void add_ablation(NnHooks *h, LensCache *c, void *ctx) {
    (void)c;
    const AblateAt *a = ctx;
    cr_assert_eq(nn_hooks_add(h, a->point, lens_ablate_hook, a->ab), 1);
}

/* zero-ablating head 1 at point in the cached run gives the ablated full forward's logits */
static void check_ablation(const GptConfig *cfg, const char *point) {
    TsGpt e = env_new(cfg);
    int head = 1;
    LensAblation zero = {.mode = LENS_ZERO, .sel = {.heads = &head, .n_heads = 1}};
    NnHooks h;
    nn_hooks_init(&h, cfg->n_layer);
    nn_hooks_add(&h, point, lens_ablate_hook, &zero);
    ag_tape_reset(e.t);
    ag_no_grad(e.t, 1);
    Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
    size_t nl = y->size;
    Real *want = malloc(nl * sizeof(Real)), *got = malloc(nl * sizeof(Real));
    memcpy(want, y->data, nl * sizeof(Real));
    nn_hooks_free(&h);
    y = nn_gpt_forward(e.t, &e.m, e.ids, B, T, NULL);
    cr_assert(memcmp(y->data, want, nl * sizeof(Real)) != 0, "%s: the ablation changes", point);
    LensCache steps[T];
    int p0[T];
    AblateAt at = {point, &zero};
    int n = run_cached(&e, add_ablation, &at, steps, p0, got);
    for (int k = 0; k < n; k++) lens_cache_free(&steps[k]);
    for (size_t i = 0; i < nl; i++)
        cr_assert(fabs((double)want[i] - got[i]) <= TOL * (1 + fabs((double)want[i])),
                  "%s: logit %zu: %.10g, the full forward's %.10g", point, i, (double)got[i],
                  (double)want[i]);
    free(want);
    free(got);
    ts_gpt_free(&e);
}

Test(lens_cached, an_ablation_in_the_cached_forward_is_the_full_forwards) {
    check_ablation(&gpt2, "blocks.0.attn.hook_z");
    check_ablation(&gpt2, "blocks.1.attn.hook_k"); /* the zeroed keys join the cache */
    check_ablation(&llama, "blocks.0.attn.hook_v");
    check_ablation(&llama, "blocks.1.attn.hook_pattern");
    check_ablation(&llama, "blocks.1.attn.hook_rot_k"); /* the rotated keys join the cache */
    check_ablation(&llama_gqa, "blocks.0.attn.hook_k"); /* key/value head 1 of 2 */
    check_ablation(&llama_gqa, "blocks.1.attn.hook_rot_q");
}
