/* test_lens_seq2seq.c: the hook points of the seq2seq model (src/nn/transformer.c,
 * attention.c; names in src/nn/hooks.c) and the lens on them: every point under "encoder." and
 * "decoder." with its shape; hooks that do nothing leave every bit of encode + decode (pre- and
 * post-LN); the explicit attention (a hook on q, k, v, scores or pattern; the cross-attention's
 * too) matches the fused one; a head zero-ablated at hook_z equals the translator's head gate
 * at 0 to the bit (logits and gradients); patching the whole clean residual restores the clean
 * logits exactly; hooks are gone after the call, also a failing one; a patch sweep; the cache's
 * .npz; the refusals; in the double build, the gradient through writing hooks; and the decoder's
 * logit lens and direct logit attribution (the parts, cross-attention's included, sum to the
 * logit; the last stage is the logits; post-LN refused) and the detectors (scores in [0, 1],
 * by hand; the cross-attention's diagonal score).
 * Not here: the GPT's points (test_lens.c), the subcommands
 * (tests/examples/test_translate_lens_cli.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-11
#else
#define TOL 2e-4
#endif

enum { B = 2, S = 5, T = 4, NH = 2, C = 8, V = 13 };

typedef struct {
    Arena *a;
    Tape *t;
    Seq2Seq m;
    int src[B * S], tgt[B * T], src2[B * S], tgt2[B * T];
} Env;

/* a 2+2-layer model; pre_ln picks the norms' place; one source row ends in padding */
static Env env_new(int pre_ln) {
    Env e;
    e.a = arena_new("params", 0);
    e.t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 5);
    Seq2SeqConfig c = nn_seq2seq_default_config(V, V, C, NH, 2);
    c.layer.dropout = 0;
    c.layer.pre_ln = pre_ln;
    c.max_len = 16;
    nn_seq2seq_init(&e.m, e.a, &rng, &c);
    ts_perturb(&e.m.params, &rng, 0.2, 0); /* biases and norms away from 0 and 1 */
    for (int i = 0; i < B * S; i++) {
        e.src[i] = 1 + (i * 5 + 2) % (V - 1);
        e.src2[i] = 1 + (i * 7 + 3) % (V - 1);
    }
    e.src[B * S - 1] = e.src2[B * S - 1] = 0; /* padding: a masked key */
    for (int i = 0; i < B * T; i++) {
        e.tgt[i] = 1 + (i * 3 + 1) % (V - 1);
        e.tgt2[i] = 1 + (i * 4 + 5) % (V - 1);
    }
    return e;
}

static void env_free(Env *e) {
    Arena *step = e->t->arena;
    ag_tape_free(e->t);
    arena_free(step);
    nn_seq2seq_free(&e->m);
    arena_free(e->a);
}

static NnHooks hooks_of(const Env *e) {
    NnHooks h;
    nn_hooks_init_seq2seq(&h, e->m.cfg.n_enc_layers, e->m.cfg.n_dec_layers);
    return h;
}

/* the logits of a forward (no grad; hooks NULL: encode + decode), copied out */
static Real *logits_of(Env *e, const int *src, const int *tgt, NnHooks *h) {
    ag_tape_reset(e->t);
    int was = ag_no_grad(e->t, 1);
    Tensor *y;
    if (h) {
        y = nn_seq2seq_forward_hooked(e->t, &e->m, src, S, tgt, B, T, NULL, h);
    } else {
        Tensor *mem = nn_seq2seq_encode(e->t, &e->m, src, B, S, NULL);
        y = nn_seq2seq_decode(e->t, &e->m, mem, src, S, tgt, B, T, NULL);
    }
    ag_no_grad(e->t, was);
    cr_assert(y, "forward failed: %s", ag_last_error());
    return ts_values(y);
}

static const size_t n_logits = (size_t)B * T * V;

Test(lens_seq2seq, every_point_has_its_name_and_shape) {
    Env e = env_new(1);
    NnHooks h = hooks_of(&e);
    LensCache c;
    lens_cache_init(&c, 0);
    int n = nn_hooks_add(&h, "*", lens_cache_hook, &c);
    /* encoder: 4 model-level + 17 per layer; decoder: 4 + 27 per layer */
    cr_assert_eq(n, 4 + 17 * 2 + 4 + 27 * 2, "%d points", n);
    free(logits_of(&e, e.src, e.tgt, &h));
    cr_assert_eq(c.n, n, "%d of %d points ran", c.n, n);
    int HS = C / NH, FF = 4 * C;
    const struct {
        const char *name;
        int ndim, shape[4];
    } want[] = {
        {"encoder.hook_embed", 3, {B, S, C}},
        {"encoder.hook_pos_embed", 3, {B, S, C}},
        {"encoder.blocks.0.hook_resid_pre", 3, {B, S, C}},
        {"encoder.blocks.0.ln1.hook_scale", 3, {B, S, 1}},
        {"encoder.blocks.1.attn.hook_q", 4, {B, S, NH, HS}},
        {"encoder.blocks.1.attn.hook_pattern", 4, {B, NH, S, S}},
        {"encoder.blocks.1.mlp.hook_pre", 3, {B, S, FF}},
        {"encoder.blocks.1.hook_resid_post", 3, {B, S, C}},
        {"encoder.ln_final.hook_normalized", 3, {B, S, C}},
        {"decoder.hook_embed", 3, {B, T, C}},
        {"decoder.blocks.0.attn.hook_attn_scores", 4, {B, NH, T, T}},
        {"decoder.blocks.0.hook_resid_mid", 3, {B, T, C}},
        {"decoder.blocks.0.ln2.hook_normalized", 3, {B, T, C}},
        {"decoder.blocks.0.cross_attn.hook_q", 4, {B, T, NH, HS}},
        {"decoder.blocks.0.cross_attn.hook_k", 4, {B, S, NH, HS}},
        {"decoder.blocks.1.cross_attn.hook_v", 4, {B, S, NH, HS}},
        {"decoder.blocks.1.cross_attn.hook_attn_scores", 4, {B, NH, T, S}},
        {"decoder.blocks.1.cross_attn.hook_pattern", 4, {B, NH, T, S}},
        {"decoder.blocks.1.cross_attn.hook_z", 4, {B, T, NH, HS}},
        {"decoder.blocks.1.hook_cross_attn_out", 3, {B, T, C}},
        {"decoder.blocks.1.hook_resid_mid_cross", 3, {B, T, C}},
        {"decoder.blocks.1.ln3.hook_scale", 3, {B, T, 1}},
        {"decoder.blocks.1.ln3.hook_normalized", 3, {B, T, C}},
        {"decoder.blocks.1.mlp.hook_post", 3, {B, T, FF}},
        {"decoder.blocks.1.hook_resid_post", 3, {B, T, C}},
        {"decoder.ln_final.hook_scale", 3, {B, T, 1}},
        {"decoder.ln_final.hook_normalized", 3, {B, T, C}},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const LensAct *a = lens_cache_get(&c, want[i].name);
        cr_assert(a, "%s is not in the cache", want[i].name);
        cr_assert_eq(a->ndim, want[i].ndim, "%s: %d dims", want[i].name, a->ndim);
        for (int d = 0; d < a->ndim; d++)
            cr_assert_eq(a->shape[d], want[i].shape[d], "%s: axis %d is %d, want %d", want[i].name,
                         d, a->shape[d], want[i].shape[d]);
    }
    /* the cross pattern's rows sum to 1 and the padded source key gets nothing */
    const LensAct *p = lens_cache_get(&c, "decoder.blocks.0.cross_attn.hook_pattern");
    for (int r = 0; r < B * NH * T; r++) {
        double sum = 0;
        for (int j = 0; j < S; j++) sum += p->data[(size_t)r * S + j];
        cr_assert(fabs(sum - 1) < 1e-5, "row %d sums to %g", r, sum);
        if (r >= NH * T) cr_assert(p->data[(size_t)r * S + S - 1] == 0, "row %d sees padding", r);
    }
    /* a name lookup in the model's points */
    NnHookPoint pt;
    cr_assert_eq(nn_hooks_find(&h, "decoder.blocks.1.cross_attn.hook_z", &pt), AG_OK);
    cr_assert(pt.stack == NN_HOOK_DECODER && pt.kind == NN_HOOK_CROSS_Z && pt.layer == 1 &&
              pt.head_axis == 2 && pt.pos_axis == 1);
    cr_assert_eq(nn_hooks_find(&h, "encoder.blocks.0.cross_attn.hook_z", &pt), AG_ERR_ARG);
    cr_assert_eq(nn_hooks_find(&h, "blocks.0.attn.hook_z", &pt), AG_ERR_ARG);
    lens_cache_free(&c);
    nn_hooks_free(&h);
    env_free(&e);
}

/* every point but the attentions' q, k, v, scores and pattern */
static const char *const bitwise_points[] = {
    "*hook_embed",  "*hook_pos_embed", "*.blocks.?.hook_*", "*.ln?.hook_*",
    "*.mlp.hook_*", "*attn.hook_z",    "*ln_final.hook_*"};

static void check_noop_is_bitwise(int pre_ln) {
    Env e = env_new(pre_ln);
    Real *plain = logits_of(&e, e.src, e.tgt, NULL);
    NnHooks h = hooks_of(&e);
    int calls = 0, points = 0;
    for (size_t i = 0; i < sizeof bitwise_points / sizeof *bitwise_points; i++) {
        int n = nn_hooks_add(&h, bitwise_points[i], ts_count_hook, &calls);
        cr_assert(n > 0, "%s: %s", bitwise_points[i], ag_last_error());
        points += n;
    }
    /* encoder 4 + 12 a layer, decoder 4 + 17 a layer */
    cr_assert_eq(points, 4 + 12 * 2 + 4 + 17 * 2, "%d points", points);
    Real *hooked = logits_of(&e, e.src, e.tgt, &h);
    cr_assert_eq(calls, points, "%d calls for %d points", calls, points);
    cr_assert(memcmp(plain, hooked, n_logits * sizeof(Real)) == 0,
              "hooks that do nothing changed the logits (pre_ln %d)", pre_ln);
    free(plain);
    free(hooked);
    nn_hooks_free(&h);
    env_free(&e);
}

Test(lens_seq2seq, hooks_that_do_nothing_leave_every_bit_post_ln) { check_noop_is_bitwise(0); }
Test(lens_seq2seq, hooks_that_do_nothing_leave_every_bit_pre_ln) { check_noop_is_bitwise(1); }

Test(lens_seq2seq, the_explicit_attention_matches_the_fused_one) {
    for (int pre = 0; pre < 2; pre++) {
        Env e = env_new(pre);
        Real *plain = logits_of(&e, e.src, e.tgt, NULL);
        const char *pats[] = {"encoder.blocks.*.attn.hook_pattern", "decoder.blocks.*.attn.hook_q",
                              "decoder.blocks.*.cross_attn.hook_attn_scores", "*attn.hook_v"};
        for (size_t i = 0; i < sizeof pats / sizeof *pats; i++) {
            NnHooks h = hooks_of(&e);
            int calls = 0;
            cr_assert_gt(nn_hooks_add(&h, pats[i], ts_count_hook, &calls), 0);
            Real *hooked = logits_of(&e, e.src, e.tgt, &h);
            cr_assert_gt(calls, 0);
            for (size_t k = 0; k < n_logits; k++)
                cr_assert(fabs((double)plain[k] - hooked[k]) < TOL, "%s: logit %zu: %g vs %g",
                          pats[i], k, (double)plain[k], (double)hooked[k]);
            free(hooked);
            nn_hooks_free(&h);
        }
        free(plain);
        env_free(&e);
    }
}

/* the translator's head gate (attention.c) at 0 for head 1 of one attention, against hook_z
 * zeroed there, in the forward with gradients */
static void check_gate_equals_ablation(MultiHeadAttention *(*which)(Seq2Seq *), const char *point,
                                       int pre_ln) {
    Env e = env_new(pre_ln);
    NnHooks none = hooks_of(&e);
    MultiHeadAttention *mha = which(&e.m);
    mha->gate->data[1] = 0;
    size_t n1, n2;
    ag_tape_reset(e.t);
    Real *gated = ts_logits_and_grads(
        e.t, &e.m.params, nn_seq2seq_forward_hooked(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, &none),
        &n1);
    mha->gate->data[1] = 1;
    NnHooks h = hooks_of(&e);
    int head = 1;
    LensAblation zero = {.mode = LENS_ZERO, .sel = {.heads = &head, .n_heads = 1}};
    cr_assert_eq(nn_hooks_add(&h, point, lens_ablate_hook, &zero), 1);
    ag_tape_reset(e.t);
    Real *hooked = ts_logits_and_grads(
        e.t, &e.m.params, nn_seq2seq_forward_hooked(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, &h),
        &n2);
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(gated, hooked, n_logits * sizeof(Real)) == 0, "%s: logits differ", point);
    for (size_t i = 0; i < n1; i++)
        cr_assert(memcmp(&gated[i], &hooked[i], sizeof(Real)) == 0,
                  "%s (pre_ln %d): value %zu of %zu differs: %.17g vs %.17g", point, pre_ln, i, n1,
                  (double)gated[i], (double)hooked[i]);
    Real *plain = logits_of(&e, e.src, e.tgt, NULL);
    cr_assert(memcmp(plain, hooked, n_logits * sizeof(Real)) != 0, "%s: the head mattered", point);
    free(plain);
    free(gated);
    free(hooked);
    nn_hooks_free(&h);
    nn_hooks_free(&none);
    env_free(&e);
}
static MultiHeadAttention *enc_self(Seq2Seq *m) { return &m->enc[1].self_attn; }
static MultiHeadAttention *dec_self(Seq2Seq *m) { return &m->dec[0].self_attn; }
static MultiHeadAttention *dec_cross(Seq2Seq *m) { return &m->dec[1].multihead_attn; }

Test(lens_seq2seq, a_zero_ablated_head_equals_the_head_gate_at_zero_to_the_bit) {
    for (int pre = 0; pre < 2; pre++) {
        check_gate_equals_ablation(enc_self, "encoder.blocks.1.attn.hook_z", pre);
        check_gate_equals_ablation(dec_self, "decoder.blocks.0.attn.hook_z", pre);
        check_gate_equals_ablation(dec_cross, "decoder.blocks.1.cross_attn.hook_z", pre);
    }
}

/* the corrupted run with the clean run's values at the points of pattern (all of them) */
static Real *patched(Env *e, const char *const *patterns, int n) {
    LensCache clean;
    lens_cache_init(&clean, 0);
    NnHooks h = hooks_of(e);
    for (int i = 0; i < n; i++)
        cr_assert_gt(nn_hooks_add(&h, patterns[i], lens_cache_hook, &clean), 0);
    free(logits_of(e, e->src, e->tgt, &h));
    nn_hooks_free(&h);
    LensPatch all = {.src = &clean};
    for (int i = 0; i < n; i++) nn_hooks_add(&h, patterns[i], lens_patch_hook, &all);
    Real *y = logits_of(e, e->src2, e->tgt2, &h);
    nn_hooks_free(&h);
    lens_cache_free(&clean);
    return y;
}

Test(lens_seq2seq, patching_the_whole_clean_residual_restores_the_clean_logits) {
    for (int pre = 0; pre < 2; pre++) {
        Env e = env_new(pre);
        Real *clean = logits_of(&e, e.src, e.tgt, NULL);
        Real *corrupt = logits_of(&e, e.src2, e.tgt2, NULL);
        cr_assert(memcmp(clean, corrupt, n_logits * sizeof(Real)) != 0);
        const char *last[] = {"decoder.blocks.1.hook_resid_post"};
        const char *first[] = {"encoder.blocks.0.hook_resid_pre",
                               "decoder.blocks.0.hook_resid_pre"};
        const char *mid[] = {"encoder.ln_final.hook_normalized",
                             "decoder.blocks.1.hook_resid_mid_cross"};
        const char *dec_only[] = {"decoder.blocks.0.hook_resid_pre"};
        Real *y[4] = {patched(&e, last, 1), patched(&e, first, 2), patched(&e, mid, 2),
                      patched(&e, dec_only, 1)};
        for (int k = 0; k < 3; k++)
            cr_assert(memcmp(clean, y[k], n_logits * sizeof(Real)) == 0,
                      "patch %d (pre_ln %d) did not restore the clean logits", k, pre);
        /* the decoder's residual alone leaves the corrupted source in the cross-attention */
        cr_assert(memcmp(clean, y[3], n_logits * sizeof(Real)) != 0);
        for (int k = 0; k < 4; k++) free(y[k]);
        free(clean);
        free(corrupt);
        env_free(&e);
    }
}

static int failing(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at;
    ++*(int *)ctx;
    return ag_fail(AG_ERR_IO, "the hook's own failure");
}

Test(lens_seq2seq, hooks_are_gone_after_the_call_also_after_a_failing_one) {
    Env e = env_new(0);
    Real *plain = logits_of(&e, e.src, e.tgt, NULL);
    NnHooks h = hooks_of(&e);
    int calls = 0, fails = 0, after = 0;
    LensAblation zero = {.mode = LENS_ZERO};
    nn_hooks_add(&h, "*.blocks.*.hook_resid_pre", ts_count_hook, &calls);
    nn_hooks_add(&h, "decoder.blocks.0.hook_cross_attn_out", lens_ablate_hook, &zero);
    Real *ablated = logits_of(&e, e.src, e.tgt, &h);
    cr_assert(e.m.hooks == NULL);
    cr_assert_eq(calls, 4);
    cr_assert(memcmp(plain, ablated, n_logits * sizeof(Real)) != 0, "the ablation worked");
    Real *again = logits_of(&e, e.src, e.tgt, NULL);
    cr_assert_eq(calls, 4, "no hook ran in the plain forward");
    cr_assert(memcmp(plain, again, n_logits * sizeof(Real)) == 0);
    free(again);
    nn_hooks_add(&h, "encoder.blocks.1.hook_mlp_out", failing, &fails);
    nn_hooks_add(&h, "decoder.blocks.*.hook_resid_post", ts_count_hook, &after);
    ag_tape_reset(e.t);
    cr_assert_null(nn_seq2seq_forward_hooked(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, &h));
    cr_assert(strstr(ag_last_error(), "encoder.blocks.1.hook_mlp_out") &&
                  strstr(ag_last_error(), "the hook's own failure"),
              "%s", ag_last_error());
    cr_assert(e.m.hooks == NULL);
    cr_assert_eq(fails, 1);
    cr_assert_eq(after, 0, "no hook runs after a failure");
    again = logits_of(&e, e.src, e.tgt, NULL);
    cr_assert(memcmp(plain, again, n_logits * sizeof(Real)) == 0);
    cr_assert_eq(calls, 6, "the encoder's two ran before the failure");
    free(again);
    free(ablated);
    free(plain);
    nn_hooks_free(&h);
    env_free(&e);
}

Test(lens_seq2seq, a_patch_sweep_by_head_and_by_position) {
    Env e = env_new(1);
    LensModel lm = lens_seq2seq(&e.m);
    LensPair clean = {e.src, e.tgt, B, S, T}, corrupt = {e.src2, e.tgt2, B, S, T};
    int good[B] = {3, 4}, bad[B] = {5, 6};
    LensMetric mt = {.kind = LENS_LOGIT_DIFF, .pos = -1, .good = good, .bad = bad};
    LensSweep s;
    cr_assert_eq(lens_patch_sweep_model(e.t, &lm, &clean, &corrupt,
                                        "decoder.blocks.*.cross_attn.hook_z", LENS_BY_HEAD, &mt,
                                        &s),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(s.n_points, 2);
    cr_assert_eq(s.n_heads, NH);
    cr_assert(s.clean != s.corrupted);
    lens_sweep_free(&s);
    /* by position over the decoder's last residual: the last position restores the metric */
    cr_assert_eq(lens_patch_sweep_model(e.t, &lm, &clean, &corrupt,
                                        "decoder.blocks.1.hook_resid_post", LENS_BY_POS, &mt, &s),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(s.T, T);
    cr_assert(s.values[T - 1] == s.clean, "%.17g vs %.17g", s.values[T - 1], s.clean);
    cr_assert(s.values[0] == s.corrupted, "an earlier position changes nothing at the last");
    lens_sweep_free(&s);
    /* the encoder's points have the source's positions; mixing them with the decoder's fails */
    cr_assert_eq(lens_attribute_model(e.t, &lm, &clean, &corrupt, "encoder.blocks.0.hook_resid_pre",
                                      LENS_BY_POS, &mt, &s),
                 AG_OK, "%s", ag_last_error());
    cr_assert_eq(s.T, S);
    lens_sweep_free(&s);
    cr_assert_eq(lens_patch_sweep_model(e.t, &lm, &clean, &corrupt, "*.blocks.0.hook_resid_pre",
                                        LENS_BY_POS, &mt, &s),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "positions"), "%s", ag_last_error());
    cr_assert(e.m.hooks == NULL);
    env_free(&e);
}

Test(lens_seq2seq, the_cache_npz_has_both_sides_tokens_and_the_config) {
    Env e = env_new(0);
    NnHooks h = hooks_of(&e);
    LensCache c;
    lens_cache_init(&c, 0);
    nn_hooks_add(&h, "decoder.blocks.*.cross_attn.hook_pattern", lens_cache_hook, &c);
    free(logits_of(&e, e.src, e.tgt, &h));
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "lens_s2s");
    ts_join(path, dir, "cache.npz");
    LensRunInfo run = {
        .tokens = e.tgt, .B = B, .T = T, .src_tokens = e.src, .S = S, .seq2seq_cfg = &e.m.cfg};
    cr_assert_eq(lens_cache_save(&c, path, &run), AG_OK, "%s", ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *p = npz_find(f, "decoder.blocks.1.cross_attn.hook_pattern");
    cr_assert(p && p->ndim == 4 && p->shape[0] == B && p->shape[1] == NH && p->shape[2] == T &&
              p->shape[3] == S);
    const NpzEntry *st = npz_find(f, "src_tokens"), *tt = npz_find(f, "tokens");
    cr_assert(st && st->ndim == 2 && st->shape[1] == S && tt && tt->shape[1] == T);
    const NpzEntry *cfg = npz_find(f, "config");
    cr_assert(cfg);
    char json[1024] = {0};
    memcpy(json, cfg->data, cfg->nbytes < sizeof json - 1 ? cfg->nbytes : sizeof json - 1);
    cr_assert(strstr(json, "\"model\": \"seq2seq\"") && strstr(json, "\"n_dec_layers\": 2"), "%s",
              json);
    npz_free(f);
    ts_rm_tree(dir);
    lens_cache_free(&c);
    nn_hooks_free(&h);
    env_free(&e);
}

Test(lens_seq2seq, refuses_what_is_not_its_point) {
    Env e = env_new(0);
    NnHooks h = hooks_of(&e);
    int calls = 0;
    cr_assert_eq(nn_hooks_add(&h, "blocks.0.attn.hook_z", ts_count_hook, &calls), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "blocks.0.attn.hook_z") &&
                  strstr(ag_last_error(), "seq2seq model of 2+2 layers"),
              "%s", ag_last_error());
    cr_assert_eq(nn_hooks_add(&h, "encoder.blocks.0.cross_attn.*", ts_count_hook, &calls),
                 AG_ERR_ARG);
    NnHooks g;
    nn_hooks_init(&g, 2); /* a GPT's points: no cross-attention */
    cr_assert_eq(nn_hooks_add(&g, "*cross*", ts_count_hook, &calls), AG_ERR_ARG);
    nn_hooks_free(&g);
    nn_hooks_free(&h);
    env_free(&e);
}

Test(lens_seq2seq, aborts_on_a_gpts_hooks, .signal = SIGABRT) {
    Env e = env_new(0);
    NnHooks g;
    nn_hooks_init(&g, 2);
    nn_seq2seq_forward_hooked(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, &g);
}

Test(lens_seq2seq, aborts_on_hooks_for_other_layers, .signal = SIGABRT) {
    Env e = env_new(0);
    NnHooks h;
    nn_hooks_init_seq2seq(&h, 1, 2);
    nn_seq2seq_forward_hooked(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, &h);
}

/* replaces the activation by one of another shape */
static int wrong_shape(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)at, (void)ctx;
    *x = tensor_zeros(t->arena, 2, (int[]){3, 4}, "wrong");
    return AG_OK;
}

Test(lens_seq2seq, aborts_on_a_replacement_of_another_shape, .signal = SIGABRT) {
    Env e = env_new(0);
    NnHooks h = hooks_of(&e);
    nn_hooks_add(&h, "decoder.blocks.0.cross_attn.hook_k", wrong_shape, NULL);
    logits_of(&e, e.src, e.tgt, &h);
}

#ifdef AG_REAL_DOUBLE
/* the gradient of one parameter entry of sum(logits * R) through the hooks, by central
 * differences, against backward */
static double loss_of(Env *e, NnHooks *h, int grad) {
    ag_tape_reset(e->t);
    int was = ag_no_grad(e->t, !grad);
    Tensor *y = nn_seq2seq_forward_hooked(e->t, &e->m, e->src, S, e->tgt, B, T, NULL, h);
    cr_assert(y, "%s", ag_last_error());
    Tensor *r = tensor_new(e->t->arena, 3, y->shape, "R");
    for (size_t i = 0; i < r->size; i++) r->data[i] = (Real)sin(1.3 * (double)i + 0.1);
    Tensor *l = ag_sum(e->t, ag_mul(e->t, y, r));
    if (grad) ag_backward(e->t, l);
    ag_no_grad(e->t, was);
    return l->data[0];
}

Test(lens_seq2seq, the_gradient_through_writing_hooks_matches_central_differences) {
    Env e = env_new(1);
    LensCache ref;
    lens_cache_init(&ref, 0);
    NnHooks h = hooks_of(&e);
    nn_hooks_add(&h, "decoder.blocks.*.cross_attn.hook_pattern", lens_cache_hook, &ref);
    nn_hooks_add(&h, "encoder.blocks.0.attn.hook_z", lens_cache_hook, &ref);
    e.m.cfg.layer.dropout = 0;
    free(logits_of(&e, e.src2, e.tgt2, &h));
    nn_hooks_free(&h);
    int head = 1, pos = 2;
    LensAblation mean = {.mode = LENS_MEAN, .sel = {.heads = &head, .n_heads = 1}, .means = &ref};
    LensPatch patch = {.src = &ref, .sel = {.positions = &pos, .n_positions = 1}};
    LensAblation zero = {.mode = LENS_ZERO, .sel = {.positions = &pos, .n_positions = 1}};
    h = hooks_of(&e);
    nn_hooks_add(&h, "decoder.blocks.1.cross_attn.hook_pattern", lens_ablate_hook, &mean);
    nn_hooks_add(&h, "encoder.blocks.0.attn.hook_z", lens_patch_hook, &patch);
    nn_hooks_add(&h, "decoder.blocks.0.hook_resid_mid_cross", lens_ablate_hook, &zero);
    ag_params_zero_grad(&e.m.params);
    loss_of(&e, &h, 1);
    int checked = 0;
    for (int i = 0; i < e.m.params.n; i++) {
        Tensor *p = e.m.params.items[i];
        int embed = strstr(p->name, "_embed.") != NULL;
        for (size_t k = embed ? C : 0; k < p->size; k += 1 + p->size / 3) {
            /* (an embedding's padding row takes no gradient, as PyTorch's padding_idx) */
            Real keep = p->data[k];
            double eps = 1e-5;
            p->data[k] = keep + eps;
            double up = loss_of(&e, &h, 0);
            p->data[k] = keep - eps;
            double down = loss_of(&e, &h, 0);
            p->data[k] = keep;
            double fd = (up - down) / (2 * eps), g = p->grad[k];
            cr_assert(fabs(fd - g) < 1e-6 * (1 + fabs(fd)), "%s[%zu]: backward %.12g, fd %.12g",
                      p->name, k, g, fd);
            checked++;
        }
    }
    cr_assert_gt(checked, 50);
    lens_cache_free(&ref);
    nn_hooks_free(&h);
    env_free(&e);
}
#endif

/* ---- the logit lens and the detectors on the decoder (src/lens/logit.c, detect.c) ---- */

static double max_abs_or(double a, double b) { return a > b ? a : b; }

Test(lens_seq2seq, the_decoders_parts_sum_to_the_logit_and_the_lens_ends_at_the_logits) {
    Env e = env_new(1);
    LensModel lm = lens_seq2seq(&e.m);
    LensPair in = {e.src, e.tgt, B, S, T};
    LensReadout ro = lens_readout_seq2seq(&e.m);
    int next[B * T], good[B] = {3, 7}, bad[B] = {5, 1};
    for (int i = 0; i < B * T; i++) next[i] = i % T < T - 1 ? e.tgt[i + 1] : -1;
    const char *want[] = {
        "embed",       "pos_embed",    "L0H0",         "L0H1",       "L0.b_O",     "L0.cross.H0",
        "L0.cross.H1", "L0.cross.b_O", "L0.mlp_out",   "L1H0",       "L1H1",       "L1.b_O",
        "L1.cross.H0", "L1.cross.H1",  "L1.cross.b_O", "L1.mlp_out", "ln_final.b", "b_U"};
    for (int diff = 0; diff < 2; diff++) {
        LensLogit r;
        int rc =
            lens_logit_run_model(e.t, &lm, &in, &ro, next, B, T, good, diff ? bad : NULL, 2, &r);
        cr_assert_eq(rc, AG_OK, "%s", ag_last_error());
        cr_assert_eq(r.n_parts, 18, "%d parts", r.n_parts);
        for (int p = 0; p < 18; p++) cr_assert_str_eq(r.parts[p], want[p]);
        double worst = 0, mag = 0;
        for (int i = 0; i < B * T; i++) {
            double sum = 0, abs_sum = 0;
            for (int p = 0; p < r.n_parts; p++) {
                sum += r.dla[(size_t)i * r.n_parts + p];
                abs_sum += fabs(r.dla[(size_t)i * r.n_parts + p]);
            }
            worst = max_abs_or(worst, fabs(sum - r.metric[i]) / (1 + abs_sum));
            mag += fabs(r.metric[i]);
            cr_assert(fabs(r.accumulated[(size_t)2 * B * T + i] - r.metric[i]) <
                          10 * TOL * (1 + abs_sum),
                      "accumulated %d", i);
        }
        cr_assert(worst < (sizeof(Real) == 8 ? 1e-11 : 2e-5),
                  "%s: the parts miss the metric by %.3g (relative)", diff ? "difference" : "logit",
                  worst);
        cr_assert(mag / (B * T) > 0.05, "metrics far from 0 (%.3g)", mag / (B * T));
        /* the last stage is the model's logits to the bit, and those are encode + decode's */
        for (int i = 0; i < B * T; i++)
            cr_assert_eq(r.lens[(size_t)2 * B * T + i], r.metric[i], "%d", i);
        for (int b = 0; b < B; b++)
            cr_assert(memcmp(r.lens_logits + ((size_t)2 * B + b) * V,
                             r.logits + ((size_t)b * T + 2) * V, (size_t)V * sizeof(float)) == 0,
                      "row %d's lens logits", b);
        Real *y = logits_of(&e, e.src, e.tgt, NULL);
        for (size_t i = 0; i < n_logits; i++)
            cr_assert_eq(r.logits[i], (float)y[i], "logit %zu", i);
        free(y);
        for (int i = 0; i < B * T; i++) {
            double lp = r.lens_next[(size_t)2 * B * T + i];
            cr_assert(i % T < T - 1 ? isfinite(lp) && lp < 0 : isnan(lp), "%d: %g", i, lp);
        }
        lens_logit_free(&r);
    }
    nn_hooks_free(&lm.layout);
    env_free(&e);
}

Test(lens_seq2seq, the_lens_refuses_a_post_ln_decoder) {
    Env e = env_new(0);
    LensModel lm = lens_seq2seq(&e.m);
    LensPair in = {e.src, e.tgt, B, S, T};
    LensReadout ro = lens_readout_seq2seq(&e.m);
    int next[B * T] = {0}, good[B] = {3, 7};
    LensLogit r;
    cr_assert_eq(lens_logit_run_model(e.t, &lm, &in, &ro, next, B, T, good, NULL, -1, &r),
                 AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "post-LN"), "%s", ag_last_error());
    cr_assert_eq(r.n_parts, 0);
    nn_hooks_free(&lm.layout);
    env_free(&e);
}

Test(lens_seq2seq, detectors_score_every_head_in_zero_one) {
    Env e = env_new(1);
    enum { K = LENS_N_HEAD_KINDS };
    double enc[K * 2 * NH], dec[K * 2 * NH], cross[2 * NH];
    lens_detect_seq2seq(e.t, &e.m, e.src, S, e.tgt, B, T, NULL, enc, dec, cross);
    for (int i = 0; i < K * 2 * NH; i++) {
        cr_assert(enc[i] >= 0 && enc[i] <= 1 + 1e-12, "encoder %d: %g", i, enc[i]);
        cr_assert(dec[i] >= 0 && dec[i] <= 1 + 1e-12, "decoder %d: %g", i, dec[i]);
    }
    for (int i = 0; i < 2 * NH; i++)
        cr_assert(cross[i] >= 0 && cross[i] <= 1 + 1e-12, "cross %d: %g", i, cross[i]);
    /* the decoder's previous-token score of layer 0 is the one of its pattern, by hand */
    NnHooks h = hooks_of(&e);
    LensCache c;
    lens_cache_init(&c, 0);
    cr_assert_eq(nn_hooks_add(&h, "decoder.blocks.0.attn.hook_pattern", lens_cache_hook, &c), 1);
    free(logits_of(&e, e.src, e.tgt, &h));
    const LensAct *a = lens_cache_get(&c, "decoder.blocks.0.attn.hook_pattern");
    cr_assert(a);
    for (int hd = 0; hd < NH; hd++) {
        double want = 0;
        for (int b = 0; b < B; b++) {
            double on = 0, all = 0;
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) {
                    double p = a->data[(((size_t)b * NH + hd) * T + i) * T + j];
                    all += p;
                    if (j == i - 1) on += p;
                }
            want += on / all / B;
        }
        cr_assert(fabs(dec[hd] - want) < 1e-6, "head %d: %g, by hand %g", hd, dec[hd], want);
    }
    nn_hooks_free(&h);
    lens_cache_free(&c);
    env_free(&e);
}

Test(lens_detect_diagonal, an_aligned_head_scores_one_a_uniform_one_the_share_of_the_diagonal) {
    enum { Q = 3, K = 4 };
    Arena *ar = arena_new("t", 0);
    Tensor *p = tensor_zeros(ar, 4, (int[]){1, 2, Q, K}, "p");
    for (int i = 0; i < Q; i++)
        for (int j = 0; j < K; j++) {
            p->data[i * K + j] = i == j;          /* head 0: query i on key i */
            p->data[Q * K + i * K + j] = 1.0 / K; /* head 1: uniform */
        }
    double s[2];
    lens_detect_diagonal(p, 1, s);
    cr_assert_eq(s[0], 1.0);
    cr_assert(fabs(s[1] - 1.0 / K) < 1e-6, "%g", s[1]);
    arena_free(ar);
}

Test(lens_detect_diagonal, aborts_naming_a_pattern_of_another_shape, .signal = SIGABRT) {
    Arena *ar = arena_new("t", 0);
    Tensor *p = tensor_zeros(ar, 3, (int[]){1, 3, 4}, "p");
    double s[4];
    lens_detect_diagonal(p, 1, s);
}
