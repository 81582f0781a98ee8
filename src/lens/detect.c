/* detect.c: the head detectors of detect.h: the detection patterns of previous-token,
 * duplicate-token and induction heads, and a head's score on them (the share of its attention
 * on the pattern's positions) and the highest score a head can reach (lens_detect_ceiling),
 * following TransformerLens's head_detector.py with its default
 * error measure ("mul"). Plain loops in double: a layer's patterns are B * NH * T * T numbers,
 * read once; then the same scores on every layer of a GPT or a seq2seq model (its patterns
 * from hooks, and the cross-attention's diagonal score), and the repeated random sequences
 * they are measured on. Read next: the induction experiment that records these scores while a
 * model trains (examples/induction/). */
#include "detect.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lens.h"

const char *lens_head_kind_name(LensHeadKind kind) {
    static const char *const names[LENS_N_HEAD_KINDS] = {"previous_token", "duplicate_token",
                                                         "induction"};
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_head_kind_name: unknown kind %d",
             (int)kind);
    return names[kind];
}

void lens_detection_pattern(LensHeadKind kind, const int *tokens, int T, uint8_t *D) {
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(D);
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_detection_pattern: unknown kind %d",
             (int)kind);
    AG_CHECK(T >= 1, "lens_detection_pattern: T %d must be at least 1", T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            int on = 0;
            if (j <= i) switch (kind) {
                case LENS_PREVIOUS_TOKEN: on = j == i - 1; break;
                case LENS_DUPLICATE_TOKEN: on = j < i && tokens[j] == tokens[i]; break;
                default: on = j >= 1 && tokens[j - 1] == tokens[i]; break; /* induction */
                }
            D[(size_t)i * T + j] = (uint8_t)on;
        }
}

double lens_detect_ceiling(LensHeadKind kind, const int *tokens, int B, int T) {
    AG_CHECK_ARG(tokens);
    AG_CHECK(B >= 1 && T >= 1, "lens_detect_ceiling: tokens (%d, %d)", B, T);
    uint8_t *D = malloc((size_t)T * T);
    AG_CHECK(D, "lens_detect_ceiling: out of memory for (%d, %d)", T, T);
    double sum = 0;
    for (int b = 0; b < B; b++) {
        lens_detection_pattern(kind, tokens + (size_t)b * T, T, D);
        int rows = 0;
        for (int i = 0; i < T; i++) {
            int any = 0;
            for (int j = 0; j <= i; j++) any |= D[(size_t)i * T + j];
            rows += any;
        }
        sum += (double)rows / T;
    }
    free(D);
    return sum / B;
}

void lens_detect_heads(const Tensor *pattern, const int *tokens, int B, int T, LensHeadKind kind,
                       const LensDetectOptions *opt, double *scores) {
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(scores);
    AG_CHECK(kind >= 0 && kind < LENS_N_HEAD_KINDS, "lens_detect_heads: unknown kind %d",
             (int)kind);
    AG_CHECK(pattern->ndim == 4 && B >= 1 && T >= 1 && pattern->shape[0] == B &&
                 pattern->shape[2] == T && pattern->shape[3] == T,
             "lens_detect_heads: pattern %s must be (B, NH, T, T) for tokens (%d,%d)",
             tensor_shape_str(pattern), B, T);
    LensDetectOptions o = opt ? *opt : (LensDetectOptions){0};
    int NH = pattern->shape[1];
    uint8_t *D = malloc((size_t)T * T);
    AG_CHECK(D != NULL, "lens_detect_heads: out of memory for a (%d,%d) pattern", T, T);
    for (int h = 0; h < NH; h++) scores[h] = 0;
    for (int b = 0; b < B; b++) {
        lens_detection_pattern(kind, tokens + (size_t)b * T, T, D);
        for (int h = 0; h < NH; h++) {
            const Real *A = pattern->data + ((size_t)b * NH + h) * T * T;
            double on = 0, all = 0; /* mass on the pattern's positions, mass kept */
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    if ((o.exclude_bos && j == 0) || (o.exclude_current_token && j == i)) continue;
                    double a = (double)A[(size_t)i * T + j];
                    all += a;
                    if (D[(size_t)i * T + j]) on += a;
                }
            /* the mass above the diagonal (0 in a causal head) counts in the total, as
             * TransformerLens's sum of the whole pattern */
            for (int i = 0; i < T; i++)
                for (int j = i + 1; j < T; j++) all += (double)A[(size_t)i * T + j];
            /* a pattern holding a NaN or inf (a model that overflowed) scores NaN, never 0 */
            scores[h] += !isfinite(all) || !isfinite(on) ? NAN : all > 0 ? on / all : 0;
        }
    }
    for (int h = 0; h < NH; h++) scores[h] /= B;
    free(D);
}

void lens_detect_gpt(Tape *t, Gpt *m, const int *tokens, int B, int T, const LensDetectOptions *opt,
                     double *scores) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(scores);
    int L = m->cfg.n_layer, NH = m->cfg.n_head;
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    nn_gpt_forward(t, m, tokens, B, T, NULL); /* fills m->last_probs: (B, NH, T, T) per layer */
    for (int k = 0; k < LENS_N_HEAD_KINDS; k++)
        for (int l = 0; l < L; l++)
            lens_detect_heads(m->last_probs[l], tokens, B, T, (LensHeadKind)k, opt,
                              scores + ((size_t)k * L + l) * NH);
    ag_no_grad(t, was);
    ag_tape_reset(t);
}

void lens_detect_diagonal(const Tensor *pattern, int B, double *scores) {
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(scores);
    AG_CHECK(pattern->ndim == 4 && B >= 1 && pattern->shape[0] == B,
             "lens_detect_diagonal: pattern %s must be (B, NH, Tq, Tk) with B %d",
             tensor_shape_str(pattern), B);
    int NH = pattern->shape[1], Tq = pattern->shape[2], Tk = pattern->shape[3];
    for (int h = 0; h < NH; h++) scores[h] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const Real *A = pattern->data + ((size_t)b * NH + h) * Tq * Tk;
            double on = 0, all = 0;
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++) {
                    all += (double)A[(size_t)i * Tk + j];
                    if (i == j) on += (double)A[(size_t)i * Tk + j];
                }
            scores[h] += all > 0 ? on / all : 0;
        }
    for (int h = 0; h < NH; h++) scores[h] /= B;
}

/* the cached pattern name as a tensor in the tape's arena */
static const Tensor *cached(Tape *t, const LensCache *c, const char *name) {
    const LensAct *a = lens_cache_get(c, name);
    AG_CHECK(a && a->ndim == 4, "lens_detect_seq2seq: %s was not cached", name);
    Tensor *x = tensor_zeros(t->arena, 4, a->shape, "pattern");
    memcpy(x->data, a->data, a->size * sizeof(Real));
    return x;
}

void lens_detect_seq2seq(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt, int B, int T,
                         const LensDetectOptions *opt, double *enc, double *dec, double *cross) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt);
    AG_CHECK_ARG(enc);
    AG_CHECK_ARG(dec);
    AG_CHECK_ARG(cross);
    int LE = m->cfg.n_enc_layers, LD = m->cfg.n_dec_layers, NH = m->cfg.layer.n_heads;
    LensModel lm = lens_seq2seq(m);
    LensCache c;
    lens_cache_init(&c, 0);
    NnHooks h;
    nn_hooks_init_like(&h, &lm.layout);
    const char *points[] = {"decoder.blocks.*.attn.hook_pattern",
                            "decoder.blocks.*.cross_attn.hook_pattern",
                            LE ? "encoder.blocks.*.attn.hook_pattern" : NULL};
    for (int i = 0; i < 3; i++)
        if (points[i])
            AG_CHECK(nn_hooks_add(&h, points[i], lens_cache_hook, &c) > 0, "%s", ag_last_error());
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    LensPair in = {src, tgt, B, S, T};
    AG_CHECK(lm.forward(t, m, &in, &h) != NULL, "lens_detect_seq2seq: %s", ag_last_error());
    char name[NN_HOOK_NAME_LEN];
    for (int k = 0; k < LENS_N_HEAD_KINDS; k++) {
        for (int l = 0; l < LE; l++) {
            snprintf(name, sizeof name, "encoder.blocks.%d.attn.hook_pattern", l);
            lens_detect_heads(cached(t, &c, name), src, B, S, (LensHeadKind)k, opt,
                              enc + ((size_t)k * LE + l) * NH);
        }
        for (int l = 0; l < LD; l++) {
            snprintf(name, sizeof name, "decoder.blocks.%d.attn.hook_pattern", l);
            lens_detect_heads(cached(t, &c, name), tgt, B, T, (LensHeadKind)k, opt,
                              dec + ((size_t)k * LD + l) * NH);
        }
    }
    for (int l = 0; l < LD; l++) {
        snprintf(name, sizeof name, "decoder.blocks.%d.cross_attn.hook_pattern", l);
        lens_detect_diagonal(cached(t, &c, name), B, cross + (size_t)l * NH);
    }
    ag_no_grad(t, was);
    ag_tape_reset(t);
    nn_hooks_free(&h);
    nn_hooks_free(&lm.layout);
    lens_cache_free(&c);
}

void lens_repeated_tokens(Rng *r, int V, int L, int B, int T, int *tokens) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(tokens);
    AG_CHECK(V >= 1 && L >= 1 && L <= T && B >= 1,
             "lens_repeated_tokens: V %d, L %d, (B, T) (%d,%d): need V >= 1, 1 <= L <= T", V, L, B,
             T);
    for (int b = 0; b < B; b++) {
        int *row = tokens + (size_t)b * T;
        for (int i = 0; i < L; i++) row[i] = (int)rng_below(r, (uint64_t)V);
        for (int i = L; i < T; i++) row[i] = row[i - L];
    }
}
