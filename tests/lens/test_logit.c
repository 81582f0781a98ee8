/* test_logit.c: the logit lens and direct logit attribution (src/lens/logit.c), the head
 * detectors on whole models (lens_detect_gpt) and the TransformerLens export (src/lens/export.c).
 * The parts of the attribution sum to the model's logit (and to a logit difference) for
 * LayerNorm, RMSNorm and no norm, with and without biases, GPT-2 and LLaMA; the lens after the
 * last block is the model's logits to the bit (and its next-token loss) and after the
 * embeddings the final norm of the embeddings done by hand; in a model without norm a last-layer head's part is exactly what
 * zero-ablating it changes. Hand-built models: a previous-token head in layer 0 and an induction
 * head in layer 1 (reading what layer 0 wrote) score 1, heads with no queries' weights score
 * the closed forms of an even spread. The export: refusals with the reason, and every array's
 * name, shape and layout against the model's weights (GPT-2; LLaMA's rotary, gated MLP and
 * grouped-query heads).
 * Not here: the subcommands and the numpy forward of the export (tests/examples/
 * test_gpt_lens_cli.c, tests/lens/tl_forward.py). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "models.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-11
#else
#define TOL 2e-5
#endif

enum { B = 2, T = 6 };

/* a model of c (seed 7) with weights large enough that every part matters: 2-D N(0, 0.3), 1-D
 * (biases, norms) N(0.5, 0.3) */
static TsGpt env_new(const GptConfig *c) { return ts_gpt_new(c, 7, 0.3, 0.3, B, T); }

static const int good[B] = {3, 5}, bad[B] = {1, 4};

static const struct {
    const char *what;
    GptConfig c;
} models[] = {
    {"GPT-2, LayerNorm, biases",
     {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 4, .n_embd = 8}},
    {"GPT-2, LayerNorm, no biases",
     {.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 4, .n_embd = 8, .no_bias = 1}},
    {"GPT-2, RMSNorm, biases",
     {.vocab_size = 11,
      .block_size = 8,
      .n_layer = 2,
      .n_head = 2,
      .n_embd = 8,
      .norm = NN_GPT_NORM_RMS}},
    {"GPT-2, RMSNorm, no biases, untied",
     {.vocab_size = 11,
      .block_size = 8,
      .n_layer = 3,
      .n_head = 2,
      .n_embd = 8,
      .norm = NN_GPT_NORM_RMS,
      .bias = NN_GPT_BIAS_OFF,
      .untied = 1}},
    {"LLaMA (RMSNorm, RoPE, SwiGLU, grouped-query)",
     {.style = NN_LLAMA,
      .vocab_size = 11,
      .block_size = 8,
      .n_layer = 2,
      .n_head = 4,
      .n_kv_head = 2,
      .n_embd = 8}},
    {"attention only, no norm",
     {.vocab_size = 11,
      .block_size = 8,
      .n_layer = 2,
      .n_head = 2,
      .n_embd = 8,
      .norm = NN_GPT_NORM_NONE,
      .mlp = NN_GPT_MLP_NONE}},
};
#define N_MODELS (int)(sizeof models / sizeof models[0])

Test(lens_logit_run, the_parts_sum_to_the_logit_and_the_logit_difference) {
    for (int k = 0; k < N_MODELS; k++)
        for (int diff = 0; diff < 2; diff++) {
            TsGpt e = env_new(&models[k].c);
            LensLogit r;
            int rc = lens_logit_run(e.t, &e.m, e.ids, B, T, good, diff ? bad : NULL, -1, &r);
            cr_assert_eq(rc, AG_OK, "%s: %s", models[k].what, ag_last_error());
            double worst = 0, mag = 0;
            for (int i = 0; i < B * T; i++) {
                double sum = 0, abs_sum = 0;
                for (int p = 0; p < r.n_parts; p++) {
                    sum += r.dla[(size_t)i * r.n_parts + p];
                    abs_sum += fabs(r.dla[(size_t)i * r.n_parts + p]);
                }
                double err = fabs(sum - r.metric[i]) / (1 + abs_sum);
                if (err > worst) worst = err;
                mag += fabs(r.metric[i]);
            }
            cr_assert(worst < TOL, "%s%s: the parts miss the metric by %.3g (relative)",
                      models[k].what, diff ? " (difference)" : "", worst);
            cr_assert(mag / (B * T) > 0.1, "%s: metrics far from 0 (%.3g)", models[k].what,
                      mag / (B * T));
            /* the last stage of the accumulated stream is the metric too */
            for (int i = 0; i < B * T; i++)
                cr_assert(fabs(r.accumulated[(size_t)r.n_layer * B * T + i] - r.metric[i]) <
                              TOL * (1 + fabs(r.metric[i])) * 10,
                          "%s: accumulated %d", models[k].what, i);
            lens_logit_free(&r);
            ts_gpt_free(&e);
        }
}

/* without good, each position reads its own next token: the attribution, metric and lens of a
 * position are those of a run whose good is that token (exactly: the same loops), NaN at a
 * row's last position */
Test(lens_logit_run, without_good_each_position_reads_its_next_token) {
    for (int k = 0; k < N_MODELS; k++) {
        TsGpt e = env_new(&models[k].c);
        LensLogit all, one;
        cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, NULL, NULL, -1, &all), AG_OK, "%s: %s",
                     models[k].what, ag_last_error());
        int S = all.n_layer + 1, n = all.n_parts;
        for (int p = 0; p < T; p++) {
            int g1[B];
            for (int b = 0; b < B; b++) g1[b] = p + 1 < T ? e.ids[b * T + p + 1] : 0;
            cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, g1, NULL, -1, &one), AG_OK);
            for (int b = 0; b < B; b++) {
                size_t row = (size_t)b * T + p;
                for (int q = 0; q < n; q++) {
                    double x = all.dla[row * n + q], y = one.dla[row * n + q];
                    cr_assert(p + 1 < T ? x == y : isnan(x), "%s: row %d position %d %s: %g, %g",
                              models[k].what, b, p, all.parts[q], x, y);
                }
                cr_assert(p + 1 < T ? all.metric[row] == one.metric[row] : isnan(all.metric[row]));
                for (int s = 0; s < S; s++) {
                    size_t at = (size_t)s * B * T + row;
                    cr_assert(p + 1 < T ? all.lens[at] == one.lens[at] &&
                                              all.lens_logprob[at] == one.lens_logprob[at] &&
                                              all.lens_logprob[at] == all.lens_next[at]
                                        : isnan(all.lens[at]) && isnan(all.accumulated[at]),
                              "%s: stage %d row %d position %d", models[k].what, s, b, p);
                }
            }
            lens_logit_free(&one);
        }
        lens_logit_free(&all);
        ts_gpt_free(&e);
    }
}

Test(lens_logit_run, the_parts_are_named_in_order) {
    TsGpt e = env_new(&models[0].c);
    LensLogit r;
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, NULL, 2, &r), AG_OK);
    const char *want[] = {"embed", "pos_embed", "L0H0",       "L0H1",       "L0H2",
                          "L0H3",  "L0.b_O",    "L0.mlp_out", "L1H0",       "L1H1",
                          "L1H2",  "L1H3",      "L1.b_O",     "L1.mlp_out", "ln_final.b"};
    cr_assert_eq(r.n_parts, 15, "%d parts", r.n_parts);
    for (int p = 0; p < 15; p++) cr_assert_str_eq(r.parts[p], want[p]);
    cr_assert_eq(r.pos, 2);
    lens_logit_free(&r);
    ts_gpt_free(&e);
    TsGpt l = env_new(&models[4].c); /* LLaMA: no positions, biases nor norm bias */
    cr_assert_eq(lens_logit_run(l.t, &l.m, l.ids, B, T, good, NULL, -1, &r), AG_OK);
    cr_assert_eq(r.n_parts, 1 + 2 * 5, "%d parts", r.n_parts);
    cr_assert_str_eq(r.parts[1], "L0H0");
    cr_assert_str_eq(r.parts[5], "L0.mlp_out");
    cr_assert_eq(r.pos, T - 1);
    lens_logit_free(&r);
    ts_gpt_free(&l);
}

Test(lens_logit_run, the_last_stage_of_the_lens_is_the_models_logits_to_the_bit) {
    for (int k = 0; k < N_MODELS; k++) {
        TsGpt e = env_new(&models[k].c);
        LensLogit r;
        cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, bad, 3, &r), AG_OK);
        int S = r.n_layer + 1, V = r.V;
        for (int i = 0; i < B * T; i++)
            cr_assert_eq(r.lens[(size_t)(S - 1) * B * T + i], r.metric[i], "%s: %d", models[k].what,
                         i);
        for (int b = 0; b < B; b++)
            cr_assert(memcmp(r.lens_logits + ((size_t)(S - 1) * B + b) * V,
                             r.logits + ((size_t)b * T + 3) * V, (size_t)V * sizeof(float)) == 0,
                      "%s: row %d's lens logits", models[k].what, b);
        /* the model's logits are nn_gpt_forward's */
        ag_tape_reset(e.t);
        int was = ag_no_grad(e.t, 1);
        Tensor *y = nn_gpt_forward(e.t, &e.m, e.ids, B, T, NULL);
        ag_no_grad(e.t, was);
        for (size_t i = 0; i < y->size; i++)
            cr_assert_eq(r.logits[i], (float)y->data[i], "%s: logit %zu", models[k].what, i);
        /* minus the mean of lens_next at the last stage is the model's next-token loss */
        int tgt[B * T];
        double lens_loss = 0;
        for (int i = 0; i < B * T; i++) {
            tgt[i] = i % T < T - 1 ? e.ids[i + 1] : -1;
            double lp = r.lens_next[(size_t)(S - 1) * B * T + i];
            cr_assert(i % T < T - 1 ? isfinite(lp) && lp < 0 : isnan(lp), "%d: %g", i, lp);
            if (i % T < T - 1) lens_loss -= lp / (B * (T - 1));
        }
        was = ag_no_grad(e.t, 1);
        double loss = (double)ag_cross_entropy(e.t, y, tgt, -1)->data[0];
        ag_no_grad(e.t, was);
        cr_assert(fabs(loss - lens_loss) < TOL * 10 * loss, "%s: loss %.17g, the lens's %.17g",
                  models[k].what, loss, lens_loss);
        lens_logit_free(&r);
        ts_gpt_free(&e);
    }
}

Test(lens_logit_run, the_first_stage_is_the_final_norm_of_the_embeddings) {
    TsGpt e = env_new(&models[0].c); /* LayerNorm with a bias */
    LensLogit r;
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, NULL, -1, &r), AG_OK);
    int C = 8, V = 11;
    for (int b = 0; b < B; b++)
        for (int p = 0; p < T; p++) {
            double x[8], mean = 0, var = 0, logit = 0;
            for (int i = 0; i < C; i++) {
                x[i] = (double)e.m.wte.weight->data[e.ids[b * T + p] * C + i] +
                       (double)e.m.wpe.table->data[p * C + i];
                mean += x[i] / C;
            }
            for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean) / C;
            for (int i = 0; i < C; i++) {
                double y = (x[i] - mean) / sqrt(var + 1e-5) * e.m.ln_f.weight->data[i] +
                           e.m.ln_f.bias->data[i];
                logit += y * e.m.lm_head.weight->data[good[b] * C + i];
            }
            double got = r.lens[b * T + p];
            cr_assert(fabs(got - logit) < TOL * 10 * (1 + fabs(logit)), "(%d,%d): %.17g vs %.17g",
                      b, p, got, logit);
        }
    (void)V;
    lens_logit_free(&r);
    ts_gpt_free(&e);
}

/* In a model without norm or MLP the logits are linear in the last layer's hook_z (its
 * patterns do not depend on it): zero-ablating a head there changes the metric by its part. */
Test(lens_logit_run, a_last_layer_heads_part_is_what_ablating_it_changes) {
    TsGpt e = env_new(&models[5].c);
    LensLogit r;
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, bad, -1, &r), AG_OK);
    for (int h = 0; h < 2; h++) {
        LensAblation ab = {LENS_ZERO, {&h, 1, NULL, 0}, NULL};
        NnHooks hooks;
        nn_hooks_init(&hooks, 2);
        nn_hooks_add(&hooks, "blocks.1.attn.hook_z", lens_ablate_hook, &ab);
        ag_tape_reset(e.t);
        int was = ag_no_grad(e.t, 1);
        Tensor *y = nn_gpt_forward_hooked(e.t, &e.m, e.ids, B, T, NULL, &hooks);
        ag_no_grad(e.t, was);
        nn_hooks_free(&hooks);
        int V = 11, part = -1;
        char want_name[16];
        snprintf(want_name, sizeof want_name, "L1H%d", h);
        for (int k = 0; k < r.n_parts; k++)
            if (strcmp(r.parts[k], want_name) == 0) part = k;
        cr_assert(part >= 0, "no part %s", want_name);
        for (int b = 0; b < B; b++) {
            size_t row = (size_t)b * T + T - 1;
            double ablated = (double)y->data[row * V + good[b]] - (double)y->data[row * V + bad[b]];
            double change = r.metric[row] - ablated, want = r.dla[row * r.n_parts + part];
            cr_assert(fabs(change - want) < TOL * 10 * (1 + fabs(want)),
                      "head %d row %d: ablation changes %.17g, the part is %.17g", h, b, change,
                      want);
            cr_assert(fabs(want) > 1e-3, "head %d row %d: a part worth testing (%g)", h, b, want);
        }
    }
    lens_logit_free(&r);
    ts_gpt_free(&e);
}

Test(lens_logit_run, refuses_post_ln_models_and_tokens_or_positions_out_of_range) {
    GptConfig post = models[0].c;
    post.post_ln = 1;
    TsGpt e = env_new(&post);
    LensLogit r;
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, NULL, -1, &r), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "post-LN"), "%s", ag_last_error());
    cr_assert_null(r.dla);
    ts_gpt_free(&e);
    e = env_new(&models[0].c);
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, good, NULL, T, &r), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "position 6"), "%s", ag_last_error());
    cr_assert_eq(lens_logit_run(e.t, &e.m, e.ids, B, T, (int[]){0, 11}, NULL, -1, &r), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "token 11"), "%s", ag_last_error());
    ts_gpt_free(&e);
}

/* ---- the detectors on hand-built models ----
 * Attention only, no norm, no biases, one head a layer, T = 8 positions, 4 tokens, C = 16:
 * dims 0..7 the position (one-hot, wpe), 8..11 the token (one-hot, wte), 12..15 the previous
 * token (written by layer 0). Layer 0: q_i = s e_i, k_j = e_{j+1}, so query i attends key i - 1;
 * its values are the tokens, which c_proj writes into 12..15. Layer 1: q_i = s (token of i, and
 * 1/2 on a sink dim), k_j = (previous token of j, and position 0 on the sink dim), so query i
 * attends the keys whose previous token is its own (induction), or key 0 when there is none. */
static const GptConfig hand = {.vocab_size = 4,
                               .block_size = 8,
                               .n_layer = 2,
                               .n_head = 1,
                               .n_embd = 16,
                               .norm = NN_GPT_NORM_NONE,
                               .mlp = NN_GPT_MLP_NONE,
                               .bias = NN_GPT_BIAS_OFF};

static void hand_build(Gpt *m, double s) {
    for (int i = 0; i < m->params.n; i++) tensor_fill(m->params.items[i], 0);
    int C = 16;
    for (int v = 0; v < 4; v++) m->wte.weight->data[v * C + 8 + v] = 1;
    for (int p = 0; p < 8; p++) m->wpe.table->data[p * C + p] = 1;
    Real *W0 = m->h[0].c_attn.weight->data, *P0 = m->h[0].c_proj.weight->data; /* (3C, C), (C, C) */
    for (int p = 0; p < 8; p++) W0[p * C + p] = (Real)s;                       /* q: position */
    for (int k = 1; k < 8; k++) W0[(C + k) * C + k - 1] = 1;         /* k: next position */
    for (int v = 0; v < 4; v++) W0[(2 * C + 8 + v) * C + 8 + v] = 1; /* v: the token */
    for (int v = 0; v < 4; v++) P0[(12 + v) * C + 8 + v] = 1; /* into the previous-token dims */
    Real *W1 = m->h[1].c_attn.weight->data;
    for (int v = 0; v < 4; v++) W1[v * C + 8 + v] = (Real)s;   /* q: the token */
    for (int p = 0; p < 8; p++) W1[4 * C + p] = (Real)(s / 2); /* q: the sink, always on */
    for (int v = 0; v < 4; v++) W1[(C + v) * C + 12 + v] = 1;  /* k: the previous token */
    W1[(C + 4) * C + 0] = 1;                                   /* k: the sink at position 0 */
}

Test(lens_detect_gpt, a_hand_built_previous_token_head_and_induction_head_score_one) {
    TsGpt e = env_new(&hand);
    hand_build(&e.m, 240);
    /* a first token that never recurs, then 0 1 2 repeated */
    int ids[2 * 8] = {3, 0, 1, 2, 0, 1, 2, 0, 3, 2, 0, 1, 2, 0, 1, 2};
    double s[LENS_N_HEAD_KINDS * 2];
    LensDetectOptions no_bos = {.exclude_bos = 1};
    lens_detect_gpt(e.t, &e.m, ids, 2, 8, &no_bos, s); /* (kind, layer, head = 1) */
    double prev0 = s[LENS_PREVIOUS_TOKEN * 2 + 0], ind1 = s[LENS_INDUCTION * 2 + 1];
    cr_assert(fabs(prev0 - 1) < 1e-9, "layer 0 as a previous-token head: %.17g", prev0);
    cr_assert(fabs(ind1 - 1) < 1e-9, "layer 1 as an induction head: %.17g", ind1);
    cr_assert(s[LENS_INDUCTION * 2 + 0] < 0.05, "layer 0 is no induction head: %g",
              s[LENS_INDUCTION * 2 + 0]);
    cr_assert(s[LENS_PREVIOUS_TOKEN * 2 + 1] < 0.05, "layer 1 is no previous-token head: %g",
              s[LENS_PREVIOUS_TOKEN * 2 + 1]);
    /* the same scores as lens_detect_heads on the pattern the hook point hands out */
    LensCache c;
    lens_cache_init(&c, 0);
    NnHooks h;
    nn_hooks_init(&h, 2);
    nn_hooks_add(&h, "blocks.1.attn.hook_pattern", lens_cache_hook, &c);
    ag_tape_reset(e.t);
    int was = ag_no_grad(e.t, 1);
    nn_gpt_forward_hooked(e.t, &e.m, ids, 2, 8, NULL, &h);
    ag_no_grad(e.t, was);
    const LensAct *p = lens_cache_get(&c, "blocks.1.attn.hook_pattern");
    Tensor *pt = tensor_new(e.a, 4, p->shape, "pattern");
    memcpy(pt->data, p->data, p->size * sizeof(Real));
    double via;
    lens_detect_heads(pt, ids, 2, 8, LENS_INDUCTION, &no_bos, &via);
    cr_assert(fabs(via - ind1) < 1e-6, "%.17g vs %.17g", via, ind1);
    nn_hooks_free(&h);
    lens_cache_free(&c);
    ts_gpt_free(&e);
}

Test(lens_detect_gpt, heads_without_query_weights_spread_evenly_and_score_near_one_over_t) {
    TsGpt e = env_new(&hand);
    hand_build(&e.m, 240);
    for (int l = 0; l < 2; l++) /* q = 0: every score 0, an even spread over the keys seen */
        memset(e.m.h[l].c_attn.weight->data, 0, 16 * 16 * sizeof(Real));
    int ids[8] = {3, 0, 1, 2, 0, 1, 2, 0};
    double s[LENS_N_HEAD_KINDS * 2], harmonic = 0;
    lens_detect_gpt(e.t, &e.m, ids, 1, 8, NULL, s);
    for (int k = 1; k <= 8; k++) harmonic += 1.0 / k;
    for (int l = 0; l < 2; l++) {
        double prev = s[LENS_PREVIOUS_TOKEN * 2 + l];
        cr_assert(fabs(prev - (harmonic - 1) / 8) < 1e-6, "layer %d: %.17g vs (H_8 - 1)/8 %.17g", l,
                  prev, (harmonic - 1) / 8);
        cr_assert(prev > 0.5 / 8 && prev < 2.0 / 8, "near 1/T: %g", prev);
    }
    ts_gpt_free(&e);
}

Test(lens_repeated_tokens, rows_repeat_their_first_l_tokens) {
    Rng r;
    rng_seed(&r, 5);
    int ids[3 * 20];
    lens_repeated_tokens(&r, 50, 7, 3, 20, ids);
    int distinct = 0;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 20; i++) {
            cr_assert(ids[b * 20 + i] >= 0 && ids[b * 20 + i] < 50);
            if (i >= 7) cr_assert_eq(ids[b * 20 + i], ids[b * 20 + i - 7]);
            distinct += i > 0 && ids[b * 20 + i] != ids[b * 20 + i - 1];
        }
    cr_assert(distinct > 30, "random tokens (%d changes)", distinct);
}

/* ---- the export ---- */

Test(lens_tl_check, refuses_what_hooked_transformer_cannot_run_naming_why) {
    const struct {
        GptConfig c;
        const char *says;
    } rows[] = {
        {{.vocab_size = 5,
          .block_size = 4,
          .n_layer = 1,
          .n_head = 2,
          .n_embd = 8,
          .mlp = NN_GPT_MLP_SWIGLU},
         "SwiGLU MLP with biases"},
        {{.style = NN_LLAMA,
          .vocab_size = 5,
          .block_size = 4,
          .n_layer = 1,
          .n_head = 2,
          .n_embd = 8,
          .bias = NN_GPT_BIAS_ON},
         "SwiGLU MLP with biases"},
        {{.vocab_size = 5, .block_size = 4, .n_layer = 1, .n_head = 2, .n_embd = 8, .post_ln = 1},
         "post-LN"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        cr_assert_eq(lens_tl_check(&rows[k].c), AG_ERR_ARG, "row %zu", k);
        cr_assert(strstr(ag_last_error(), rows[k].says), "row %zu: %s", k, ag_last_error());
    }
    for (int k = 0; k < N_MODELS; k++) /* LLaMA, RoPE, grouped-query heads included */
        cr_assert_eq(lens_tl_check(&models[k].c), AG_OK, "%s: %s", models[k].what, ag_last_error());
    GptConfig none = models[0].c;
    none.pos = NN_GPT_POS_NONE;
    cr_assert_eq(lens_tl_check(&none), AG_OK, "%s", ag_last_error());
}

static const NpzEntry *arr(const NpzFile *f, const char *name, int ndim, const int64_t *shape) {
    const NpzEntry *e = npz_find(f, name);
    cr_assert(e, "no %s", name);
    cr_assert_eq(e->dtype, NPZ_F32, "%s is not float32", name);
    cr_assert_eq(e->ndim, ndim, "%s: %d dims", name, e->ndim);
    for (int d = 0; d < ndim; d++)
        cr_assert_eq(e->shape[d], shape[d], "%s: dim %d is %lld", name, d, (long long)e->shape[d]);
    return e;
}

/* e's model exported into a new folder dir: its arrays, and its config's text in text */
static NpzFile *exported(const TsGpt *e, char *dir, size_t n, char *text, size_t text_n) {
    char npz[512], json[512];
    ts_tmp_dir(dir, n, "tlexport");
    cr_assert_eq(lens_tl_export(&e->m, ts_join(npz, dir, "tl.npz"), ts_join(json, dir, "tl.json")),
                 AG_OK, "%s", ag_last_error());
    NpzFile *f;
    cr_assert_eq(npz_read(npz, &f, NULL), AG_OK, "%s", ag_last_error());
    FILE *j = fopen(json, "r");
    cr_assert(j, "no %s", json);
    memset(text, 0, text_n);
    cr_assert(fread(text, 1, text_n - 1, j) > 0, "%s is empty", json);
    fclose(j);
    return f;
}

/* the config's text has every one of want[0..n) */
static void says(const char *text, const char *const *want, size_t n) {
    for (size_t k = 0; k < n; k++)
        cr_assert(strstr(text, want[k]), "the config lacks %s: %s", want[k], text);
}

Test(lens_tl_export, writes_transformer_lens_names_shapes_and_layout) {
    TsGpt e = env_new(&models[0].c); /* C 8, 4 heads of 2, H 32, V 11, n_ctx 8 */
    char dir[256], text[2048];
    NpzFile *f = exported(&e, dir, sizeof dir, text, sizeof text);
    int C = 8, NH = 4, HS = 2, H = 32, V = 11;
    const float *WE = arr(f, "embed.W_E", 2, (int64_t[]){V, C})->data;
    arr(f, "pos_embed.W_pos", 2, (int64_t[]){8, C});
    cr_assert_eq(WE[3 * C + 5], (float)e.m.wte.weight->data[3 * C + 5]);
    for (int l = 0; l < 2; l++) {
        char name[64];
        const GptBlock *h = &e.m.h[l];
#define ARR(suffix, ...)                                                                           \
    (snprintf(name, sizeof name, "blocks.%d.%s", l, suffix),                                       \
     (const float *)arr(f, name, __VA_ARGS__)->data)
        const float *WQ = ARR("attn.W_Q", 3, (int64_t[]){NH, C, HS});
        const float *WK = ARR("attn.W_K", 3, (int64_t[]){NH, C, HS});
        const float *WV = ARR("attn.W_V", 3, (int64_t[]){NH, C, HS});
        const float *bV = ARR("attn.b_V", 2, (int64_t[]){NH, HS});
        const float *WO = ARR("attn.W_O", 3, (int64_t[]){NH, HS, C});
        const float *Win = ARR("mlp.W_in", 2, (int64_t[]){C, H});
        const float *Wout = ARR("mlp.W_out", 2, (int64_t[]){H, C});
        ARR("attn.b_Q", 2, (int64_t[]){NH, HS});
        ARR("attn.b_K", 2, (int64_t[]){NH, HS});
        ARR("attn.b_O", 1, (int64_t[]){C});
        ARR("ln1.w", 1, (int64_t[]){C});
        ARR("ln1.b", 1, (int64_t[]){C});
        ARR("ln2.w", 1, (int64_t[]){C});
        ARR("ln2.b", 1, (int64_t[]){C});
        ARR("mlp.b_in", 1, (int64_t[]){H});
        ARR("mlp.b_out", 1, (int64_t[]){C});
#undef ARR
        const Real *w = h->c_attn.weight->data; /* (3C, C) */
        for (int hd = 0; hd < NH; hd++)
            for (int m = 0; m < C; m++)
                for (int k = 0; k < HS; k++) {
                    int row = hd * HS + k;
                    cr_assert_eq(WQ[(hd * C + m) * HS + k], (float)w[row * C + m]);
                    cr_assert_eq(WK[(hd * C + m) * HS + k], (float)w[(C + row) * C + m]);
                    cr_assert_eq(WV[(hd * C + m) * HS + k], (float)w[(2 * C + row) * C + m]);
                    cr_assert_eq(WO[(hd * HS + k) * C + m],
                                 (float)h->c_proj.weight->data[m * C + row]);
                }
        cr_assert_eq(bV[3 * HS + 1], (float)h->c_attn.bias->data[2 * C + 3 * HS + 1]);
        cr_assert_eq(Win[5 * H + 17], (float)h->c_fc.weight->data[17 * C + 5]);
        cr_assert_eq(Wout[17 * C + 5], (float)h->mlp_proj.weight->data[5 * H + 17]);
    }
    arr(f, "ln_final.w", 1, (int64_t[]){C});
    arr(f, "ln_final.b", 1, (int64_t[]){C});
    const float *WU = arr(f, "unembed.W_U", 2, (int64_t[]){C, V})->data;
    const float *bU = arr(f, "unembed.b_U", 1, (int64_t[]){V})->data;
    cr_assert_eq(WU[5 * V + 3], (float)e.m.lm_head.weight->data[3 * C + 5]);
    cr_assert_eq(bU[4], 0.0f);
    cr_assert_eq(f->n, 2 + 2 * 16 + 4, "%d arrays", f->n);
    npz_free(f);
    const char *want[] = {"\"n_layers\": 2",
                          "\"d_model\": 8",
                          "\"n_ctx\": 8",
                          "\"d_head\": 2",
                          "\"n_heads\": 4",
                          "\"d_mlp\": 32",
                          "\"d_vocab\": 11",
                          "\"act_fn\": \"gelu\"",
                          "\"normalization_type\": \"LN\"",
                          "\"positional_embedding_type\": \"standard\""};
    says(text, want, sizeof want / sizeof want[0]);
    ts_rm_tree(dir);
    ts_gpt_free(&e);
}

Test(lens_tl_export, an_attention_only_rmsnorm_model_has_no_mlp_and_no_norm_biases) {
    GptConfig c = models[3].c; /* RMSNorm, no biases, untied */
    c.mlp = NN_GPT_MLP_NONE;
    TsGpt e = env_new(&c);
    char dir[256], text[2048];
    NpzFile *f = exported(&e, dir, sizeof dir, text, sizeof text);
    says(text, (const char *[]){"\"attn_only\": true", "\"normalization_type\": \"RMS\""}, 2);
    cr_assert(npz_find(f, "blocks.2.ln1.w") && !npz_find(f, "blocks.2.ln1.b") &&
              !npz_find(f, "blocks.0.ln2.w") && !npz_find(f, "blocks.0.mlp.W_in"));
    const float *bQ = arr(f, "blocks.1.attn.b_Q", 2, (int64_t[]){2, 4})->data;
    for (int i = 0; i < 8; i++) cr_assert_eq(bQ[i], 0.0f, "zero biases");
    cr_assert_eq(f->n, 2 + 3 * 9 + 3, "%d arrays", f->n);
    npz_free(f);
    ts_rm_tree(dir);
    ts_gpt_free(&e);
}

Test(lens_tl_export, a_llama_model_has_rotary_gated_and_grouped_query_layout) {
    TsGpt e = env_new(&models[4].c); /* C 8, 4 query heads of 2, 2 key/value heads, SwiGLU 32 */
    char dir[256], text[2048];
    NpzFile *f = exported(&e, dir, sizeof dir, text, sizeof text);
    int C = 8, HS = 2, H = 32;
    cr_assert(!npz_find(f, "pos_embed.W_pos") && !npz_find(f, "blocks.0.attn.W_K") &&
              !npz_find(f, "blocks.0.mlp.b_gate") && !npz_find(f, "blocks.0.ln1.b"));
    /* TransformerLens's GatedMLP holds b_in and b_out (no b_gate): zeros, for a strict load */
    const float *bi = arr(f, "blocks.0.mlp.b_in", 1, (int64_t[]){H})->data;
    const float *bo = arr(f, "blocks.0.mlp.b_out", 1, (int64_t[]){C})->data;
    for (int i = 0; i < H; i++) cr_assert_eq(bi[i], 0.0f, "b_in[%d]", i);
    for (int i = 0; i < C; i++) cr_assert_eq(bo[i], 0.0f, "b_out[%d]", i);
    const GptBlock *h = &e.m.h[1];
    const float *WQ = arr(f, "blocks.1.attn.W_Q", 3, (int64_t[]){4, C, HS})->data;
    const float *WK = arr(f, "blocks.1.attn._W_K", 3, (int64_t[]){2, C, HS})->data;
    const float *WV = arr(f, "blocks.1.attn._W_V", 3, (int64_t[]){2, C, HS})->data;
    arr(f, "blocks.1.attn._b_K", 2, (int64_t[]){2, HS});
    const float *Wg = arr(f, "blocks.1.mlp.W_gate", 2, (int64_t[]){C, H})->data;
    const float *Wi = arr(f, "blocks.1.mlp.W_in", 2, (int64_t[]){C, H})->data;
    const float *Wo = arr(f, "blocks.1.mlp.W_out", 2, (int64_t[]){H, C})->data;
    for (int m = 0; m < C; m++) {
        cr_assert_eq(WQ[(3 * C + m) * HS + 1], (float)h->wq.weight->data[(3 * HS + 1) * C + m]);
        cr_assert_eq(WK[(1 * C + m) * HS + 0], (float)h->wk.weight->data[(1 * HS + 0) * C + m]);
        cr_assert_eq(WV[(1 * C + m) * HS + 1], (float)h->wv.weight->data[(1 * HS + 1) * C + m]);
        cr_assert_eq(Wg[m * H + 20], (float)h->c_fc.weight->data[20 * C + m]); /* w1 */
        cr_assert_eq(Wi[m * H + 20], (float)h->w3.weight->data[20 * C + m]);
        cr_assert_eq(Wo[20 * C + m], (float)h->mlp_proj.weight->data[m * H + 20]); /* w2 */
    }
    npz_free(f);
    const char *want[] = {"\"positional_embedding_type\": \"rotary\"",
                          "\"rotary_dim\": 2",
                          "\"rotary_base\": 10000",
                          "\"rotary_adjacent_pairs\": true",
                          "\"n_key_value_heads\": 2",
                          "\"gated_mlp\": true",
                          "\"act_fn\": \"silu\"",
                          "\"normalization_type\": \"RMS\"",
                          "\"d_mlp\": 32"};
    says(text, want, sizeof want / sizeof want[0]);
    ts_rm_tree(dir);
    ts_gpt_free(&e);
}

Test(lens_tl_export, an_unwritable_path_is_named) {
    TsGpt e = env_new(&models[0].c);
    cr_assert_eq(lens_tl_export(&e.m, "/nonexistent-dir/tl.npz", "/nonexistent-dir/tl.json"),
                 AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "/nonexistent-dir/tl.npz"), "%s", ag_last_error());
    ts_gpt_free(&e);
}
