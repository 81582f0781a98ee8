/* test_lens.c: the hook points of a GPT (src/nn/hooks.c, gpt.c) and the lens built on them
 * (src/lens/lens.c): hooks that do nothing leave every bit of the forward, and are gone after
 * the call (also a failing one); the explicit attention a q/k/v/scores/pattern hook makes
 * matches the fused op; a zero-ablated head equals its head gate at 0 to the bit; patching the
 * whole clean residual restores the clean logits exactly; attribution patching equals real
 * patching where the metric is linear in the activation; a cache's .npz keys and shapes; the
 * float64 gradient check through writing hooks; the refusals.
 * Not here: the subcommands (tests/examples/test_gpt_cli.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 2e-5
#endif

static const GptConfig tiny = {
    .vocab_size = 11, .block_size = 6, .n_layer = 2, .n_head = 4, .n_embd = 8};
static const GptConfig tiny_llama = {
    .style = NN_LLAMA, .vocab_size = 11, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};
/* GPT-2's blocks and names with LLaMA's parts (RoPE on c_attn's columns, RMSNorm, SwiGLU) */
static const GptConfig tiny_mixed = {.vocab_size = 11,
                                     .block_size = 6,
                                     .n_layer = 2,
                                     .n_head = 4,
                                     .n_embd = 8,
                                     .pos = NN_GPT_POS_ROPE,
                                     .norm = NN_GPT_NORM_RMS,
                                     .mlp = NN_GPT_MLP_SWIGLU};

enum { B = 2, T = 5 };

/* a model of c (seed 3) with its biases and norms away from 0 and 1: N(0.5, 0.2) */
static TsGpt env_new(const GptConfig *c) { return ts_gpt_new(c, 3, 0.2, 0, B, T); }

/* the logits of a forward (no grad), copied out of the step arena */
static Real *logits_of(TsGpt *e, const int *ids, NnHooks *h) {
    ag_tape_reset(e->t);
    int was = ag_no_grad(e->t, 1);
    Tensor *y = h ? nn_gpt_forward_hooked(e->t, &e->m, ids, B, T, NULL, h)
                  : nn_gpt_forward(e->t, &e->m, ids, B, T, NULL);
    ag_no_grad(e->t, was);
    cr_assert(y, "forward failed: %s", ag_last_error());
    return ts_values(y);
}

static size_t n_logits(const TsGpt *e) { return (size_t)B * T * e->m.cfg.vocab_size; }

/* every point but q, k, v, scores and pattern (which switch to the explicit attention); '*'
 * spans dots, '?' is one character */
static const char *const bitwise_points[] = {"hook_*",
                                             "blocks.?.hook_*",
                                             "blocks.?.ln?.hook_*",
                                             "blocks.?.mlp.hook_*",
                                             "blocks.?.attn.hook_z",
                                             "ln_final.*"};

static void check_noop_is_bitwise(const GptConfig *c) {
    TsGpt e = env_new(c);
    Real *plain = logits_of(&e, e.ids, NULL);
    NnHooks h;
    nn_hooks_init(&h, c->n_layer);
    int calls = 0, points = 0;
    for (size_t i = 0; i < sizeof bitwise_points / sizeof *bitwise_points; i++) {
        int n = nn_hooks_add(&h, bitwise_points[i], ts_count_hook, &calls);
        cr_assert(n > 0, "%s: %s", bitwise_points[i], ag_last_error());
        points += n;
    }
    /* embed, pos_embed, ln_final's 2, and 12 per layer */
    cr_assert_eq(points, 4 + 12 * c->n_layer, "%d points", points);
    Real *hooked = logits_of(&e, e.ids, &h);
    int learned = nn_gpt_options(c).pos == NN_GPT_POS_LEARNED;
    int expect_calls = learned ? points : points - 1; /* no pos_embed without learned ones */
    cr_assert_eq(calls, expect_calls, "%d calls for %d points", calls, points);
    cr_assert(memcmp(plain, hooked, n_logits(&e) * sizeof(Real)) == 0,
              "a hook that does nothing changed the logits");
    free(hooked);
    nn_hooks_free(&h);
    free(plain);
    ts_gpt_free(&e);
}

Test(lens_hooks, hooks_that_do_nothing_leave_every_bit_of_the_forward) {
    check_noop_is_bitwise(&tiny);
    check_noop_is_bitwise(&tiny_llama);
    check_noop_is_bitwise(&tiny_mixed);
}

static double max_diff(const Real *a, const Real *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* a hook on q (or any of the five) runs the attention as plain ops: the same numbers as the
 * fused op up to rounding, and the pattern the fused op returns */
Test(lens_hooks, the_explicit_attention_matches_the_fused_one) {
    GptConfig gqa = tiny, gqa_llama = tiny_llama; /* grouped-query: 4 heads over 2, 2 over 1 */
    gqa.n_kv_head = 2, gqa_llama.n_kv_head = 1;
    const GptConfig *cs[] = {&tiny, &tiny_llama, &tiny_mixed, &gqa, &gqa_llama};
    for (int v = 0; v < 5; v++) {
        TsGpt e = env_new(cs[v]);
        Real *plain = logits_of(&e, e.ids, NULL);
        ag_tape_reset(e.t);
        nn_gpt_forward(e.t, &e.m, e.ids, B, T, NULL);
        Tensor *probs = e.m.last_probs[1]; /* (B, NH, T, T) of the fused op */
        NnHooks h;
        nn_hooks_init(&h, cs[v]->n_layer);
        LensCache c;
        lens_cache_init(&c, 0);
        cr_assert_eq(nn_hooks_add(&h, "blocks.*.attn.hook_*", lens_cache_hook, &c),
                     8 * cs[v]->n_layer); /* q, k, v, rot_q, rot_k, scores, pattern, z */
        Real *saved = malloc(probs->size * sizeof(Real));
        memcpy(saved, probs->data, probs->size * sizeof(Real));
        Real *hooked = logits_of(&e, e.ids, &h);
        cr_assert(max_diff(plain, hooked, n_logits(&e)) < 10 * TOL, "logits differ by %g",
                  max_diff(plain, hooked, n_logits(&e)));
        const LensAct *p = lens_cache_get(&c, "blocks.1.attn.hook_pattern");
        cr_assert(p && p->ndim == 4 && p->shape[0] == B && p->shape[1] == cs[v]->n_head &&
                  p->shape[2] == T && p->shape[3] == T);
        cr_assert(max_diff(saved, p->data, p->size) < 10 * TOL);
        const LensAct *s = lens_cache_get(&c, "blocks.0.attn.hook_attn_scores");
        cr_assert(isinf(s->data[1]) && s->data[1] < 0 && isfinite(s->data[T]),
                  "scores above the diagonal are -inf");
        const LensAct *q = lens_cache_get(&c, "blocks.0.attn.hook_q");
        int HS = cs[v]->n_embd / cs[v]->n_head, NKV = nn_gpt_options(cs[v]).n_kv_head;
        cr_assert(q->ndim == 4 && q->shape[1] == T && q->shape[2] == cs[v]->n_head &&
                  q->shape[3] == HS);
        /* k and v with the key/value heads (TransformerLens's GroupedQueryAttention) */
        const LensAct *k = lens_cache_get(&c, "blocks.1.attn.hook_k");
        const LensAct *vv = lens_cache_get(&c, "blocks.1.attn.hook_v");
        cr_assert(k->ndim == 4 && k->shape[2] == NKV && k->shape[3] == HS && vv->shape[2] == NKV);
        /* rotary positions: hook_q before the rotation, hook_rot_q after it (position 0 is
         * not turned, position 1 is); otherwise no rot_q */
        const LensAct *rq = lens_cache_get(&c, "blocks.0.attn.hook_rot_q");
        const LensAct *rk = lens_cache_get(&c, "blocks.0.attn.hook_rot_k");
        if (nn_gpt_options(cs[v]).pos != NN_GPT_POS_ROPE) {
            cr_assert(!rq && !rk, "rot_q without rotary positions");
        } else {
            cr_assert(rq && rk && rk->shape[2] == NKV && rq->size == q->size);
            size_t row = (size_t)cs[v]->n_head * HS; /* one position's values */
            cr_assert(max_diff(q->data, rq->data, row) == 0, "position 0 is not rotated");
            cr_assert(max_diff(q->data + row, rq->data + row, row) > 1e-3, "rot_q is q");
        }
        free(saved);
        free(hooked);
        free(plain);
        lens_cache_free(&c);
        nn_hooks_free(&h);
        ts_gpt_free(&e);
    }
}

static int failing(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at;
    ++*(int *)ctx;
    return ag_fail(AG_ERR_IO, "the hook's own failure");
}

Test(lens_hooks, are_gone_after_the_call_also_after_a_failing_one) {
    TsGpt e = env_new(&tiny);
    Real *plain = logits_of(&e, e.ids, NULL);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    int calls = 0, fails = 0, after = 0;
    LensAblation zero = {.mode = LENS_ZERO};
    nn_hooks_add(&h, "blocks.*.hook_resid_pre", ts_count_hook, &calls);
    nn_hooks_add(&h, "blocks.0.hook_attn_out", lens_ablate_hook, &zero);
    Real *ablated = logits_of(&e, e.ids, &h);
    cr_assert(e.m.hooks == NULL);
    cr_assert_eq(calls, 2);
    cr_assert(memcmp(plain, ablated, n_logits(&e) * sizeof(Real)) != 0, "the ablation worked");
    Real *again = logits_of(&e, e.ids, NULL);
    cr_assert_eq(calls, 2, "no hook ran in the plain forward");
    cr_assert(memcmp(plain, again, n_logits(&e) * sizeof(Real)) == 0);
    /* a failing hook: NULL, its message, no later hook, and again nothing left behind */
    nn_hooks_add(&h, "blocks.0.hook_mlp_out", failing, &fails);
    nn_hooks_add(&h, "blocks.1.hook_resid_post", ts_count_hook, &after);
    ag_tape_reset(e.t);
    cr_assert_null(nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h));
    cr_assert(strstr(ag_last_error(), "blocks.0.hook_mlp_out") &&
                  strstr(ag_last_error(), "the hook's own failure"),
              "%s", ag_last_error());
    cr_assert(e.m.hooks == NULL);
    cr_assert_eq(fails, 1);
    cr_assert_eq(after, 0, "no hook runs after a failure");
    free(again);
    again = logits_of(&e, e.ids, NULL);
    cr_assert(memcmp(plain, again, n_logits(&e) * sizeof(Real)) == 0);
    cr_assert_eq(calls, 3);
    free(again);
    free(ablated);
    free(plain);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

/* GPT-2's forward written out with a head gate on layer `layer`'s heads (attention.c's
 * ag_head_gate), as the head-importance study gates them */
static Tensor *gated_forward(Tape *t, Gpt *m, const int *idx, int layer, Tensor *gate) {
    int C = m->cfg.n_embd, NH = m->cfg.n_head;
    Tensor *x = nn_positional(t, &m->wpe, nn_embedding(t, &m->wte, idx, B, T), 0);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        GptBlock *h = &m->h[l];
        Tensor *qkv = nn_linear(t, &h->c_attn, nn_layernorm(t, &h->ln_1, x));
        AgAttnLayout cols = {.kind = AG_ATTN_COLS, .heads = {NH, NH, C / NH, 0, C, 2 * C}};
        Tensor *y = ag_attention(t, qkv, qkv, qkv, &cols, AG_CAUSAL, 0, NULL, NULL);
        if (l == layer) y = ag_merge_heads(t, ag_head_gate(t, ag_split_heads(t, y, NH), gate));
        x = ag_add(t, x, nn_linear(t, &h->c_proj, y));
        Tensor *f = nn_linear(t, &h->c_fc, nn_layernorm(t, &h->ln_2, x));
        x = ag_add(t, x, nn_linear(t, &h->mlp_proj, ag_gelu(t, f)));
    }
    return nn_linear(t, &m->lm_head, nn_layernorm(t, &m->ln_f, x));
}

Test(lens_ablate, a_zero_ablated_head_equals_its_gate_at_zero_to_the_bit) {
    TsGpt e = env_new(&tiny);
    Tensor *gate = tensor_new1(e.a, tiny.n_head, "gate");
    tensor_fill(gate, 1);
    gate->data[2] = 0;
    size_t n1, n2;
    ag_tape_reset(e.t);
    Real *gated =
        ts_logits_and_grads(e.t, &e.m.params, gated_forward(e.t, &e.m, e.ids, 1, gate), &n1);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    int head = 2;
    LensAblation zero = {.mode = LENS_ZERO, .sel = {.heads = &head, .n_heads = 1}};
    cr_assert_eq(nn_hooks_add(&h, "blocks.1.attn.hook_z", lens_ablate_hook, &zero), 1);
    ag_tape_reset(e.t);
    Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
    Real *hooked = ts_logits_and_grads(e.t, &e.m.params, y, &n2);
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(gated, hooked, n_logits(&e) * sizeof(Real)) == 0, "logits differ");
    cr_assert(memcmp(gated, hooked, n1 * sizeof(Real)) == 0, "gradients differ");
    /* and the gate at 1 is the plain model */
    Real *plain = logits_of(&e, e.ids, NULL);
    cr_assert(memcmp(plain, hooked, n_logits(&e) * sizeof(Real)) != 0);
    free(plain);
    free(gated);
    free(hooked);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

Test(lens_ablate, mean_ablation_puts_the_batch_mean_at_the_chosen_heads_and_positions) {
    TsGpt e = env_new(&tiny);
    LensCache ref, seen;
    lens_cache_init(&ref, 0);
    lens_cache_init(&seen, 0);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    nn_hooks_add(&h, "blocks.0.attn.hook_z", lens_cache_hook, &ref);
    free(logits_of(&e, e.corrupt, &h));
    nn_hooks_free(&h);
    int heads[] = {1, 3}, pos = 2;
    LensAblation mean = {.mode = LENS_MEAN,
                         .sel = {.heads = heads, .n_heads = 2, .positions = &pos, .n_positions = 1},
                         .means = &ref};
    LensCache plain;
    lens_cache_init(&plain, 0);
    nn_hooks_init(&h, tiny.n_layer);
    nn_hooks_add(&h, "blocks.0.attn.hook_z", lens_cache_hook, &plain);
    free(logits_of(&e, e.ids, &h));
    nn_hooks_free(&h);
    nn_hooks_init(&h, tiny.n_layer);
    nn_hooks_add(&h, "blocks.0.attn.hook_z", lens_ablate_hook, &mean);
    nn_hooks_add(&h, "blocks.0.attn.hook_z", lens_cache_hook, &seen); /* after the ablation */
    free(logits_of(&e, e.ids, &h));
    const LensAct *z = lens_cache_get(&seen, "blocks.0.attn.hook_z"), *r = ref.acts,
                  *p = plain.acts;
    int NH = tiny.n_head, HS = tiny.n_embd / NH;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < NH; hh++)
                for (int d = 0; d < HS; d++) {
                    size_t i = (((size_t)b * T + t) * NH + hh) * HS + d, row = (size_t)T * NH * HS;
                    int chosen = t == pos && (hh == 1 || hh == 3);
                    Real want =
                        chosen ? (Real)(((double)r->data[i % row] + r->data[row + i % row]) / 2)
                               : p->data[i];
                    cr_assert(z->data[i] == want, "(%d,%d,%d,%d): %g, want %g", b, t, hh, d,
                              (double)z->data[i], (double)want);
                }
    lens_cache_free(&ref);
    lens_cache_free(&seen);
    lens_cache_free(&plain);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

Test(lens_patch, the_whole_clean_residual_restores_the_clean_logits_exactly) {
    const char *points[] = {"blocks.0.hook_resid_pre", "blocks.1.hook_resid_post",
                            "blocks.1.hook_resid_mid"};
    for (int v = 0; v < 2; v++) {
        const GptConfig *c = v ? &tiny_llama : &tiny;
        TsGpt e = env_new(c);
        Real *clean = logits_of(&e, e.ids, NULL), *corrupt = logits_of(&e, e.corrupt, NULL);
        cr_assert(memcmp(clean, corrupt, n_logits(&e) * sizeof(Real)) != 0);
        for (int p = 0; p < 3; p++) {
            LensCache cc;
            lens_cache_init(&cc, 0);
            NnHooks h;
            nn_hooks_init(&h, c->n_layer);
            nn_hooks_add(&h, points[p], lens_cache_hook, &cc);
            free(logits_of(&e, e.ids, &h));
            nn_hooks_free(&h);
            LensPatch patch = {.src = &cc};
            nn_hooks_init(&h, c->n_layer);
            nn_hooks_add(&h, points[p], lens_patch_hook, &patch);
            Real *patched = logits_of(&e, e.corrupt, &h);
            cr_assert(memcmp(clean, patched, n_logits(&e) * sizeof(Real)) == 0, "%s", points[p]);
            free(patched);
            nn_hooks_free(&h);
            lens_cache_free(&cc);
        }
        free(clean);
        free(corrupt);
        ts_gpt_free(&e);
    }
}

static LensMetric logit_diff(const int *good, const int *bad) {
    return (LensMetric){.kind = LENS_LOGIT_DIFF, .pos = -1, .good = good, .bad = bad};
}

/* the logits are linear in ln_final.hook_normalized: the first-order estimate is exact there */
Test(lens_patch, attribution_equals_patching_where_the_metric_is_linear) {
    TsGpt e = env_new(&tiny);
    int good[B] = {3, 4}, bad[B] = {5, 1};
    LensMetric mt = logit_diff(good, bad);
    LensSweep real, est;
    cr_assert_eq(lens_patch_sweep(e.t, &e.m, e.ids, e.corrupt, B, T, "ln_final.hook_normalized",
                                  LENS_BY_POS, &mt, &real),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(lens_attribute(e.t, &e.m, e.ids, e.corrupt, B, T, "ln_final.hook_normalized",
                                LENS_BY_POS, &mt, &est),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(real.n_points, 1);
    cr_assert(real.clean != real.corrupted);
    cr_assert_eq(real.clean, est.clean);
    for (int t = 0; t < T; t++) {
        double effect = real.values[t] - real.corrupted;
        cr_assert(fabs(effect - est.values[t]) < 1e3 * TOL * (1 + fabs(effect)),
                  "position %d: patching %g, attribution %g", t, effect, est.values[t]);
        cr_assert((t == T - 1) == (effect != 0), "position %d: effect %g", t, effect);
    }
    /* the last position's whole residual: the clean metric, to the bit */
    LensSweep resid;
    cr_assert_eq(lens_patch_sweep(e.t, &e.m, e.ids, e.corrupt, B, T, "blocks.*.hook_resid_post",
                                  LENS_BY_POS, &mt, &resid),
                 AG_OK);
    cr_assert_eq(resid.n_points, 2);
    cr_assert_eq(resid.values[T + T - 1], resid.clean);
    for (size_t i = 0; i < est.n_points * (size_t)T; i++) cr_assert(isfinite(est.values[i]));
    for (int p = 0; p < e.m.params.n; p++)
        for (size_t i = 0; i < e.m.params.items[p]->size; i++)
            cr_assert_eq(e.m.params.items[p]->grad[i], 0, "parameter gradients are left zero");
    lens_sweep_free(&resid);
    lens_sweep_free(&real);
    lens_sweep_free(&est);
    ts_gpt_free(&e);
}

Test(lens_patch, sweeps_over_heads_and_head_positions_have_their_shapes) {
    TsGpt e = env_new(&tiny);
    int good[B] = {3, 4}, bad[B] = {5, 1};
    LensMetric mt = logit_diff(good, bad);
    LensSweep s, a;
    cr_assert_eq(lens_patch_sweep(e.t, &e.m, e.ids, e.corrupt, B, T, "blocks.*.attn.hook_z",
                                  LENS_BY_HEAD_POS, &mt, &s),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(lens_attribute(e.t, &e.m, e.ids, e.corrupt, B, T, "blocks.*.attn.hook_pattern",
                                LENS_BY_HEAD, &mt, &a),
                 AG_OK, "%s", ag_last_error());
    cr_assert(s.n_points == 2 && s.n_heads == tiny.n_head && s.T == T);
    cr_assert(a.n_points == 2 && a.axes == LENS_BY_HEAD);
    /* a head's z at a position other than the last changes the last position's logits only
     * through later layers: layer 1's z matters only at the last position */
    for (int h = 0; h < tiny.n_head; h++)
        for (int t = 0; t < T - 1; t++)
            cr_assert_eq(s.values[((size_t)1 * tiny.n_head + h) * T + t], s.corrupted);
    LensSweep bad_axes;
    cr_assert_eq(lens_patch_sweep(e.t, &e.m, e.ids, e.corrupt, B, T, "blocks.*.hook_resid_pre",
                                  LENS_BY_HEAD, &mt, &bad_axes),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "blocks.0.hook_resid_pre"), "%s", ag_last_error());
    lens_sweep_free(&s);
    lens_sweep_free(&a);
    ts_gpt_free(&e);
}

/* does a bytes entry hold s? */
static int contains(const NpzEntry *en, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= en->nbytes; i++)
        if (memcmp((const char *)en->data + i, s, n) == 0) return 1;
    return 0;
}

/* every point's key and shape in the .npz, tokens, the config, gradients as <name>.grad */
Test(lens_cache, the_npz_holds_every_point_with_its_shape) {
    TsGpt e = env_new(&tiny);
    LensCache c;
    lens_cache_init(&c, 1);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    cr_assert_eq(nn_hooks_add(&h, "*", lens_cache_hook, &c), 4 + 19 * tiny.n_layer);
    ag_tape_reset(e.t);
    Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
    int good[B] = {1, 2}, bad[B] = {3, 4};
    LensMetric mt = logit_diff(good, bad);
    ag_backward(e.t, lens_metric(e.t, &mt, y));
    lens_cache_take_grads(&c);
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "lens");
    const char *strs[B * T];
    for (int i = 0; i < B * T; i++) strs[i] = i % 2 ? "a\"b" : "x";
    LensRunInfo run = {.tokens = e.ids, .B = B, .T = T, .token_strs = strs, .cfg = &tiny};
    cr_assert_eq(lens_cache_save(&c, ts_join(path, dir, "cache.npz"), &run), AG_OK, "%s",
                 ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    int C = tiny.n_embd, NH = tiny.n_head, HS = C / NH;
    struct {
        const char *name;
        int ndim, shape[4];
    } want[] = {
        {"hook_embed", 3, {B, T, C}},
        {"hook_pos_embed", 3, {B, T, C}},
        {"blocks.0.hook_resid_pre", 3, {B, T, C}},
        {"blocks.0.ln1.hook_scale", 3, {B, T, 1}},
        {"blocks.0.ln1.hook_normalized", 3, {B, T, C}},
        {"blocks.1.attn.hook_q", 4, {B, T, NH, HS}},
        {"blocks.1.attn.hook_k", 4, {B, T, NH, HS}},
        {"blocks.1.attn.hook_v", 4, {B, T, NH, HS}},
        {"blocks.1.attn.hook_attn_scores", 4, {B, NH, T, T}},
        {"blocks.0.attn.hook_pattern", 4, {B, NH, T, T}},
        {"blocks.0.attn.hook_z", 4, {B, T, NH, HS}},
        {"blocks.0.hook_attn_out", 3, {B, T, C}},
        {"blocks.0.hook_resid_mid", 3, {B, T, C}},
        {"blocks.1.ln2.hook_scale", 3, {B, T, 1}},
        {"blocks.1.mlp.hook_pre", 3, {B, T, 4 * C}},
        {"blocks.1.mlp.hook_post", 3, {B, T, 4 * C}},
        {"blocks.1.hook_mlp_out", 3, {B, T, C}},
        {"blocks.1.hook_resid_post", 3, {B, T, C}},
        {"ln_final.hook_scale", 3, {B, T, 1}},
        {"ln_final.hook_normalized", 3, {B, T, C}},
        {"blocks.0.hook_resid_pre.grad", 3, {B, T, C}},
        {"blocks.1.attn.hook_pattern.grad", 4, {B, NH, T, T}},
        {"tokens", 2, {B, T}},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const NpzEntry *en = npz_find(f, want[i].name);
        cr_assert(en, "no %s", want[i].name);
        cr_assert_eq(en->ndim, want[i].ndim, "%s", want[i].name);
        for (int d = 0; d < en->ndim; d++)
            cr_assert_eq(en->shape[d], want[i].shape[d], "%s dim %d", want[i].name, d);
    }
    cr_assert_eq(npz_find(f, "tokens")->dtype, NPZ_I32);
    cr_assert_eq(((const int32_t *)npz_find(f, "tokens")->data)[3], e.ids[3]);
    cr_assert(!npz_find(f, "blocks.0.ln1.hook_scale.grad"), "a read-only point has no gradient");
    const NpzEntry *cfg = npz_find(f, "config"), *ts = npz_find(f, "token_strs");
    cr_assert(cfg && contains(cfg, "\"n_layer\": 2") && contains(cfg, "\"style\": \"gpt2\""));
    cr_assert(ts && contains(ts, "[\"x\",\"a\\\"b\",\"x\","), "the strings as JSON");
    /* values: the scale is the standard deviation of resid_pre's rows, the cache's gradient the
     * tape's (resid_post of the last layer reaches the logits through ln_final only) */
    const LensAct *x = lens_cache_get(&c, "blocks.0.hook_resid_pre"),
                  *s = lens_cache_get(&c, "blocks.0.ln1.hook_scale");
    double mean = 0, var = 0;
    for (int i = 0; i < C; i++) mean += x->data[i] / C;
    for (int i = 0; i < C; i++) var += (x->data[i] - mean) * (x->data[i] - mean) / C;
    cr_assert(fabs(s->data[0] - sqrt(var + 1e-5)) < TOL * 10);
    const LensAct *g = lens_cache_get(&c, "blocks.1.hook_resid_post");
    double gmax = 0;
    for (size_t i = 0; i < g->size; i++) gmax = fmax(gmax, fabs(g->grad[i]));
    cr_assert(gmax > 0);
    npz_free(f);
    ts_rm_tree(dir);
    lens_cache_free(&c);
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

/* ---- refusals ---- */

Test(lens_hooks, a_pattern_that_matches_nothing_is_an_error_naming_it) {
    NnHooks h;
    nn_hooks_init(&h, 2);
    int calls = 0;
    cr_assert_eq(nn_hooks_add(&h, "blocks.2.hook_resid_pre", ts_count_hook, &calls), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "'blocks.2.hook_resid_pre'"), "%s", ag_last_error());
    cr_assert_eq(nn_hooks_add(&h, "blocks.*.attn.hook_result", ts_count_hook, &calls), AG_ERR_ARG);
    cr_assert_eq(h.n, 0);
    cr_assert_eq(nn_hooks_add(&h, "blocks.?.hook_resid_p*", ts_count_hook, &calls), 4);
    cr_assert(nn_hook_glob("*", "") && !nn_hook_glob("a*b", "acbd") &&
              nn_hook_glob("a*b", "acbdb"));
    NnHookPoint p;
    cr_assert_eq(nn_hook_find("blocks.1.attn.hook_z", 2, &p), AG_OK);
    cr_assert(p.kind == NN_HOOK_Z && p.layer == 1 && p.head_axis == 2 && p.pos_axis == 1);
    cr_assert_eq(nn_hook_find("blocks.2.attn.hook_z", 2, &p), AG_ERR_ARG);
    nn_hooks_free(&h);
}

Test(lens_ablate, choosing_heads_where_there_are_none_is_an_error) {
    TsGpt e = env_new(&tiny);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    int head = 0;
    LensAblation zero = {.mode = LENS_ZERO, .sel = {.heads = &head, .n_heads = 1}};
    nn_hooks_add(&h, "blocks.0.hook_attn_out", lens_ablate_hook, &zero);
    ag_tape_reset(e.t);
    cr_assert_null(nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h));
    cr_assert(strstr(ag_last_error(), "has no head axis"), "%s", ag_last_error());
    nn_hooks_free(&h);
    ts_gpt_free(&e);
}

static int wrong_shape(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)at, (void)ctx;
    *x = tensor_zeros(t->arena, 2, (int[]){3, 4}, "wrong");
    return AG_OK;
}

static void run_with(const char *pattern, NnHookFn fn) {
    TsGpt e = env_new(&tiny);
    NnHooks h;
    nn_hooks_init(&h, tiny.n_layer);
    nn_hooks_add(&h, pattern, fn, NULL);
    nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
}

Test(lens_hooks, a_replacement_of_another_shape_aborts_naming_the_hook, .signal = SIGABRT) {
    run_with("blocks.1.hook_mlp_out", wrong_shape);
}

static int replace_scale(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)at, (void)ctx;
    *x = ag_scale(t, *x, 2);
    return AG_OK;
}

Test(lens_hooks, replacing_a_read_only_scale_aborts, .signal = SIGABRT) {
    run_with("blocks.0.ln1.hook_scale", replace_scale);
}

Test(lens_hooks, hooks_for_another_number_of_layers_abort, .signal = SIGABRT) {
    TsGpt e = env_new(&tiny);
    NnHooks h;
    nn_hooks_init(&h, 3);
    nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &h);
}

/* ---- gradients through writing hooks: the double build's check ---- */
#ifdef AG_REAL_DOUBLE
typedef struct {
    TsGpt *e;
    NnHooks *h;
} GcLens;

static Tensor *hooked_logits(Tape *t, Tensor **in, void *ctx) {
    (void)in;
    GcLens *g = ctx;
    return nn_gpt_forward_hooked(t, &g->e->m, g->e->ids, B, T, NULL, g->h);
}

/* the float64 gradient check of model c's logits with the hooks of hooks[] (a point, a
 * mode: 0 mean ablation of heads {0, last key/value head} at position 1, 1 patch of that head
 * at position 4 from the corrupted run, 2 zero ablation at position 1, 3 patch of position 4) */
static void check_gradients(const GptConfig *c, const char *const *points, const int *modes,
                            int n) {
    TsGpt e = env_new(c);
    LensCache ref;
    lens_cache_init(&ref, 0);
    NnHooks h;
    nn_hooks_init(&h, c->n_layer);
    nn_hooks_add(&h, "*", lens_cache_hook, &ref);
    free(logits_of(&e, e.corrupt, &h));
    nn_hooks_free(&h);
    int heads[] = {0, nn_gpt_options(c).n_kv_head - 1}, pos[] = {1, 4};
    LensAblation mean = {LENS_MEAN, {heads, 2, pos, 1}, &ref};
    LensPatch patch = {&ref, {heads + 1, 1, pos + 1, 1}};
    LensAblation zero = {LENS_ZERO, {NULL, 0, pos, 1}, NULL};
    LensPatch patch_pos = {&ref, {NULL, 0, pos + 1, 1}};
    nn_hooks_init(&h, c->n_layer);
    for (int i = 0; i < n; i++)
        cr_assert(nn_hooks_add(&h, points[i], modes[i] % 2 ? lens_patch_hook : lens_ablate_hook,
                               modes[i] == 0   ? (void *)&mean
                               : modes[i] == 1 ? (void *)&patch
                               : modes[i] == 2 ? (void *)&zero
                                               : (void *)&patch_pos) == 1,
                  "%s", points[i]);
    GcLens g = {&e, &h};
    free(logits_of(&e, e.ids, &h)); /* the hooks run */
    AgGradcheckResult r;
    int ok = ag_gradcheck(e.t, hooked_logits, &g, e.m.params.items, e.m.params.n, 1e-6, 1e-6, &r);
    cr_assert(ok, "max error %g at input %d (%s) element %zu: analytic %g, numeric %g", r.max_err,
              r.input, e.m.params.items[r.input]->name, r.index, r.analytic, r.numeric);
    cr_assert(r.max_abs_grad > 0);
    nn_hooks_free(&h);
    lens_cache_free(&ref);
    ts_gpt_free(&e);
}

Test(lens_hooks, gradients_through_writing_hooks_match_finite_differences) {
    check_gradients(&tiny,
                    (const char *[]){"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_z",
                                     "blocks.0.hook_resid_mid", "blocks.1.ln1.hook_normalized"},
                    (int[]){0, 1, 2, 3}, 4);
    /* grouped-query heads with rotary positions, RMSNorm and SwiGLU: the keys' and values' own
     * heads, the rotated queries and keys, a normalized point before the weight */
    GptConfig gqa = tiny_mixed;
    gqa.n_kv_head = 2;
    check_gradients(&gqa,
                    (const char *[]){"blocks.0.attn.hook_k", "blocks.0.attn.hook_v",
                                     "blocks.1.attn.hook_rot_q", "blocks.1.attn.hook_rot_k",
                                     "blocks.0.ln2.hook_normalized", "ln_final.hook_normalized"},
                    (int[]){0, 1, 2, 0, 3, 2}, 6);
}
#endif
