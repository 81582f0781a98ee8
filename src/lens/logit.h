/* logit.h: the logit lens and direct logit attribution of a GPT (../nn/gpt.h) or of a seq2seq
 * model's decoder (../nn/nn.h), to one token or to the difference of two (the metric:
 * logits[good] - logits[bad], or logits[good] alone).
 *
 * Direct logit attribution splits the final residual stream r (the last block's output) into
 * the parts that add up to it: the token embeddings, the learned positions, every head of every
 * layer (its hook_z times its columns of c_proj, W_O), each attention's output bias b_O, each
 * MLP's output (its bias included), and reads each one through the final norm and the head.
 * The final norm is not linear, so each part is read with the statistics of the whole r (as
 * TransformerLens's apply_ln_to_stack with the final residual's cached scale):
 *   LayerNorm  part c -> ((c - mean(c)) / s) . (w * d),  s = sqrt(var(r) + eps)
 *              (centering is linear, so each part is centered on its own)
 *   RMSNorm    part c -> (c / s) . (w * d),              s = sqrt(mean(r^2) + eps)
 *   no norm    part c -> c . d
 * with d = W_U[good] - W_U[bad] the metric's direction in the head (W_U = lm_head, (V, C)) and
 * w the norm's weight. The norm's bias b reads as a part of its own, b . d ("ln_final.b"). The
 * parts then sum to the model's metric exactly (up to rounding).
 *
 * The logit lens reads the residual stream after the embeddings and after every block through
 * the final norm (each stream with its own statistics: what the model would predict if it
 * ended there) and the head (nn_gpt_unembed): after the last block it is the model's logits,
 * to the bit. The same streams read linearly (the parts so far, with the final scale) are
 * "accumulated": TransformerLens's accumulated_resid through apply_ln_to_stack.
 *
 * The seq2seq decoder's residual stream has the same parts under "decoder." plus, in every
 * block, the cross-attention's heads ("L0.cross.H0": decoder.blocks.0.cross_attn.hook_z times
 * its columns of out_proj) and bias ("L0.cross.b_O"); its head (the generator) has a bias, a
 * part of its own ("b_U", b_U[good] - b_U[bad]). A LensReadout says where each part is and
 * which weights carry it (lens_readout_gpt, lens_readout_seq2seq); lens_logit_run_model does
 * the rest for either.
 * Post-LN models (the last norm inside the last block) have no such decomposition: refused.
 * Not here: the hooks that supply the parts (../nn/hooks.h), the cache (lens.h).
 * Read next: logit.c; docs/lens.md, "Logit lens and direct logit attribution". */
#ifndef ATTOGRAD_LENS_LOGIT_H
#define ATTOGRAD_LENS_LOGIT_H

#include "../nn/gpt.h"
#include "lens.h"

#define LENS_PART_NAME_LEN 32

typedef struct LensLogit {
    int B, T, V, n_layer, n_head, pos; /* pos: the position of lens_logits (>= 0) */
    char prefix[16];                   /* the hook points' prefix: "" (GPT), "decoder." */
    int has_bad;                       /* 1: the metric is a difference of two logits */
    /* direct logit attribution */
    int n_parts;
    char (*parts)[LENS_PART_NAME_LEN]; /* "embed", "pos_embed", "L0H0".., "L0.b_O",
                                        * ("L0.cross.H0".., "L0.cross.b_O"), "L0.mlp_out", ..,
                                        * "ln_final.b", ("b_U"): those the model has, in order */
    double *dla;                       /* (B, T, n_parts) each part's share of the metric */
    double *metric;                    /* (B, T) the model's metric, from its logits */
    double *scale;                     /* (B, T) the final norm's s (1 without a norm) */
    /* logit lens: n_layer + 1 stages, blocks.0.hook_resid_pre then each blocks.L.hook_resid_post */
    double *lens;         /* (n_layer + 1, B, T) the metric of the stage's logits */
    double *lens_logprob; /* (n_layer + 1, B, T) log softmax of the stage's logits at good */
    double *lens_next;    /* (n_layer + 1, B, T) log softmax at the row's next token (NaN at
                           * the last position): minus the mean is the stage's loss */
    int *lens_top;        /* (n_layer + 1, B, T) the stage's most likely token */
    double *accumulated;  /* (n_layer + 1, B, T) the parts so far, read with the final scale,
                           * and ln_final.b: the last stage is the metric */
    float *lens_logits;   /* (n_layer + 1, B, V) the stage's logits at position pos */
    float *logits;        /* (B, T, V) the model's logits */
} LensLogit;

/* Where the parts of a model's final residual stream are and the weights that read them:
 * filled by lens_readout_gpt and lens_readout_seq2seq (the tensors are the model's own) */
#define LENS_MAX_ATTN 2
typedef enum { LENS_NORM_NONE = 0, LENS_NORM_LAYER, LENS_NORM_RMS } LensNorm;
typedef struct LensReadout {
    const char *refuse; /* non-NULL: why the model has no decomposition (post-LN) */
    const char *prefix; /* "" or "decoder." */
    int n_layer, n_head, C, V;
    LensNorm norm;        /* the final norm */
    const Tensor *norm_w; /* (C), NULL without a norm */
    const Tensor *norm_b; /* (C) or NULL */
    double eps;
    const Tensor *W_U;               /* (V, C) */
    const Tensor *b_U;               /* (V) or NULL */
    int has_pos, has_mlp;            /* hook_pos_embed and blocks.L.hook_mlp_out are parts */
    int n_attn;                      /* attentions per block: 1, or 2 (self, cross) */
    const char *attn[LENS_MAX_ATTN]; /* their hook names: "attn", "cross_attn" */
    const Tensor *W_O[NN_GPT_MAX_LAYERS][LENS_MAX_ATTN]; /* (C, C): out, in (the heads' columns) */
    const Tensor *b_O[NN_GPT_MAX_LAYERS][LENS_MAX_ATTN]; /* (C) or NULL */
    /* the final norm and the head on a stream x (B, T, C) -> (B, T, V), the model's own ops */
    Tensor *(*unembed)(Tape *t, void *model, Tensor *x);
    void *model;
} LensReadout;
LensReadout lens_readout_gpt(Gpt *m);
LensReadout lens_readout_seq2seq(Seq2Seq *m);

/* The lens of any model: lm runs input (as lens_gpt's or lens_seq2seq's), ro reads it; next
 * (B, T) the token each position predicts (-1: none, lens_next NaN there); good, bad, pos as
 * lens_logit_run. AG_OK or AG_ERR_ARG (ro->refuse, a token or position out of range, a hook's
 * failure). Resets the tape t. */
int lens_logit_run_model(Tape *t, const LensModel *lm, const void *input, const LensReadout *ro,
                         const int *next, int B, int T, const int *good, const int *bad, int pos,
                         LensLogit *out);

/* Runs the model (no grad, as in evaluation) on ids (B, T) with the hooks it needs and fills
 * out: good (B) the tokens whose logit counts, bad (B) the ones subtracted or NULL; pos the
 * position whose whole lens logits are kept (-1: the last). good NULL (bad NULL too: a bad
 * without a good aborts): each position's own next token (TransformerLens's direct logit
 * attribution to the correct next token; metric, dla, lens, lens_logprob and accumulated NaN
 * where a row has none, its last position; lens_logit_save needs a good). AG_OK, or AG_ERR_ARG for a post-LN model, a token or
 * position out of range (out is then empty). Resets the tape t. */
int lens_logit_run(Tape *t, Gpt *m, const int *ids, int B, int T, const int *good, const int *bad,
                   int pos, LensLogit *out);
void lens_logit_free(LensLogit *r);
/* Writes r to path: "tokens" (int32 (B, T)), "good", "bad" (int32 (B); bad absent for one
 * token), "metric", "scale", "dla" (B, T, n_parts), "parts" (the names, JSON in bytes),
 * "lens", "lens_logprob", "lens_next", "accumulated" ((stage, B, T)), "lens_top" (int32), "stages" (JSON),
 * "lens_logits" (float32 (stage, B, V)), "logits" (float32 (B, T, V)), "pos"; the stages
 * named with r->prefix. ids: the tokens of the stream read (the decoder's input). AG_OK or
 * npz_write's error naming the path. */
int lens_logit_save(const LensLogit *r, const int *ids, const int *good, const int *bad,
                    const char *path);

#endif
