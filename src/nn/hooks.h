/* hooks.h: named hook points in a model's forward, with TransformerLens's names and shapes, so
 * that a function can read (cache) or replace (ablate, patch) any activation while the model
 * runs. The GPT of gpt.h calls nn_hook_run at each point (nn_gpt_forward_hooked, and
 * nn_gpt_forward_cached_hooked for incremental decoding); the seq2seq model of nn.h too
 * (nn_seq2seq_forward_hooked), with its points under "encoder." and "decoder."; a point with
 * no hook costs one branch.
 *
 *   name                               shape              notes
 *   hook_embed                         (B, T, C)          token embeddings
 *   hook_pos_embed                     (B, T, C)          GPT-2's learned positions
 *   blocks.L.hook_resid_pre            (B, T, C)
 *   blocks.L.ln1.hook_scale            (B, T, 1)          read-only (the fused norm's 1/rstd)
 *   blocks.L.ln1.hook_normalized       (B, T, C)          (x - mean) / scale (RMSNorm: x / scale),
 *                                                         before the weight and bias
 *   blocks.L.attn.hook_q               (B, T, NH, HS)     before the rotation (rotary positions)
 *   blocks.L.attn.hook_k / hook_v      (B, T, NKV, HS)    NKV the key/value heads (grouped-query:
 *                                                         fewer than NH; before repeating them)
 *   blocks.L.attn.hook_rot_q           (B, T, NH, HS)     rotary positions only: q rotated
 *   blocks.L.attn.hook_rot_k           (B, T, NKV, HS)    rotary positions only: k rotated
 *   blocks.L.attn.hook_attn_scores     (B, NH, T, T)      scaled, causal -inf above the diagonal
 *   blocks.L.attn.hook_pattern         (B, NH, T, T)      the softmax
 *   blocks.L.attn.hook_z               (B, T, NH, HS)     the heads' outputs, before c_proj
 *   blocks.L.hook_attn_out             (B, T, C)
 *   blocks.L.hook_resid_mid            (B, T, C)          not with parallel attention and MLP
 *                                                         (TransformerLens's parallel_attn_mlp)
 *                                                         nor attention only
 *   blocks.L.ln2.hook_scale / hook_normalized             (parallel: of resid_pre)
 *   blocks.L.mlp.hook_pre / hook_post  (B, T, H)          before / after the activation (GELU,
 *                                                         ReLU; SwiGLU: w1 x, and silu(w1 x) * w3 x)
 *   blocks.L.hook_mlp_out              (B, T, C)
 *   blocks.L.hook_resid_post           (B, T, C)
 *   ln_final.hook_scale / hook_normalized
 * The seq2seq model: the same names under encoder. (S source positions for T) and decoder.,
 * hook_embed the embedding already scaled by sqrt(C); the decoder's blocks also have
 *   decoder.blocks.L.ln2.*                   the norm before the cross-attention (its ln3 is the
 *                                            MLP's)
 *   decoder.blocks.L.cross_attn.hook_q       (B, T, NH, HS)
 *   decoder.blocks.L.cross_attn.hook_k / hook_v  (B, S, NH, HS)
 *   decoder.blocks.L.cross_attn.hook_attn_scores / hook_pattern  (B, NH, T, S)
 *   decoder.blocks.L.cross_attn.hook_z       (B, T, NH, HS)
 *   decoder.blocks.L.hook_cross_attn_out     (B, T, C)
 *   decoder.blocks.L.hook_resid_mid_cross    (B, T, C)  resid_mid + cross_attn_out
 *   decoder.blocks.L.ln3.hook_scale / hook_normalized
 * The names, shapes and values are TransformerLens's (HookedTransformer, its GroupedQueryAttention
 * for NKV < NH). A hook on q, k, v, rot_q, rot_k, attn_scores or pattern of a layer makes that
 * layer's attention run as plain ops (matmul_bt, scale, mask, softmax, matmul; grouped-query: each
 * key/value head repeated to its query heads: the same numbers as the fused op up to rounding);
 * hooks on the other points leave every bit of the forward as it is without hooks.
 * Not here: what hooks do (../lens: cache, ablation, patching); the GPT (gpt.c).
 * Read next: hooks.c, then gpt.c's calls of HOOK. */
#ifndef ATTOGRAD_NN_HOOKS_H
#define ATTOGRAD_NN_HOOKS_H

#include "nn.h"

typedef enum {
    NN_HOOK_EMBED,
    NN_HOOK_POS_EMBED,
    NN_HOOK_RESID_PRE,
    NN_HOOK_LN1_SCALE,
    NN_HOOK_LN1_NORMALIZED,
    NN_HOOK_Q,
    NN_HOOK_K,
    NN_HOOK_V,
    NN_HOOK_ATTN_SCORES,
    NN_HOOK_PATTERN,
    NN_HOOK_Z,
    NN_HOOK_ATTN_OUT,
    NN_HOOK_RESID_MID,
    NN_HOOK_LN2_SCALE,
    NN_HOOK_LN2_NORMALIZED,
    NN_HOOK_MLP_PRE,
    NN_HOOK_MLP_POST,
    NN_HOOK_MLP_OUT,
    NN_HOOK_RESID_POST,
    NN_HOOK_LNF_SCALE,
    NN_HOOK_LNF_NORMALIZED,
    /* the seq2seq decoder's (decoder.blocks.L.*): its cross-attention, in the order of q..z */
    NN_HOOK_CROSS_Q,
    NN_HOOK_CROSS_K,
    NN_HOOK_CROSS_V,
    NN_HOOK_CROSS_ATTN_SCORES,
    NN_HOOK_CROSS_PATTERN,
    NN_HOOK_CROSS_Z,
    NN_HOOK_CROSS_ATTN_OUT,
    NN_HOOK_RESID_MID_CROSS,
    NN_HOOK_LN3_SCALE,
    NN_HOOK_LN3_NORMALIZED,
    /* a GPT's with rotary positions: q and k after the rotation (listed after hook_v) */
    NN_HOOK_ROT_Q,
    NN_HOOK_ROT_K,
    NN_HOOK_N_KINDS
} NnHookKind;

/* Which part of a model a point is in: a GPT's (no prefix), or a seq2seq model's encoder or
 * decoder ("encoder.", "decoder.") */
typedef enum { NN_HOOK_GPT = 0, NN_HOOK_ENCODER, NN_HOOK_DECODER, NN_HOOK_N_STACKS } NnHookStack;

#define NN_HOOK_NAME_LEN 64

/* Where a hook runs: the part of the model, the kind, the layer (-1 for the model-level points),
 * the full name ("blocks.0.attn.hook_z", "decoder.blocks.0.cross_attn.hook_z"), and the axes of its activation that hold heads and query
 * positions (-1: none), so that one ablation or patch works on any point. */
typedef struct NnHookPoint {
    NnHookStack stack;
    NnHookKind kind;
    int layer;
    char name[NN_HOOK_NAME_LEN];
    int head_axis, pos_axis;
    int read_only; /* a replacement aborts (hook_scale: the fused norm does not take one) */
} NnHookPoint;

/* A hook: reads *x (its shape is the table's) and may set *x to a replacement of the same
 * shape, made with ag_ ops so that backward flows through it. Returns AG_OK, or an AG_ERR_*
 * code after ag_fail: the forward then finishes without running any later hook, and
 * nn_gpt_forward_hooked returns NULL with that message. */
typedef int (*NnHookFn)(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx);

typedef struct NnHookEntry {
    NnHookStack stack;
    NnHookKind kind;
    int layer;
    NnHookFn fn;
    void *ctx;
} NnHookEntry;

/* The hooks of one forward call, for a GPT of n_layer layers (nn_hooks_init) or a seq2seq
 * model of n_enc + n_dec layers (nn_hooks_init_seq2seq). nn_hooks_free frees the list. */
typedef struct NnHooks {
    int n_layer;       /* a GPT's layers; seq2seq: n_dec */
    int seq2seq;       /* 1: the points are a seq2seq model's */
    int n_enc, n_dec;  /* seq2seq: the encoder's layers (may be 0) and the decoder's */
    NnHookStack stack; /* the part the forward is in now (set by the model) */
    int n, cap;
    NnHookEntry *entries; /* in the order they were added: run in that order at a point */
    /* model-level points: layer 0 */
    unsigned char on[NN_HOOK_N_STACKS][NN_HOOK_N_KINDS][NN_GPT_MAX_LAYERS];
    int status;      /* AG_OK, or the first hook's failure */
    char error[512]; /* its message */
} NnHooks;

void nn_hooks_init(NnHooks *h, int n_layer);
void nn_hooks_init_seq2seq(NnHooks *h, int n_enc, int n_dec);
/* h's model (GPT or seq2seq, its layers), with no hooks: for another call on the same model */
void nn_hooks_init_like(NnHooks *h, const NnHooks *like);
void nn_hooks_free(NnHooks *h);
/* Adds fn at every point whose name matches pattern, a glob ('*' any run of characters, dots
 * included; '?' one character): "blocks.*.attn.hook_pattern", "*hook_resid_post", "hook_embed".
 * Returns the number of points matched, or AG_ERR_ARG naming the pattern when none does. */
int nn_hooks_add(NnHooks *h, const char *pattern, NnHookFn fn, void *ctx);
/* 1 when name matches the glob pattern */
int nn_hook_glob(const char *pattern, const char *name);
/* The GPT's point of kind at layer (-1 for the model-level kinds), its name and axes filled in
 * (nn_hook_point_in: in a part of a seq2seq model); AG_ERR_ARG when name is not a hook point of
 * a GPT of n_layer layers (nn_hook_find) or of h's model (nn_hooks_find). */
NnHookPoint nn_hook_point(NnHookKind kind, int layer);
NnHookPoint nn_hook_point_in(NnHookStack stack, NnHookKind kind, int layer);
int nn_hook_find(const char *name, int n_layer, NnHookPoint *out);
int nn_hooks_find(const NnHooks *h, const char *name, NnHookPoint *out);
/* The point of one of h's entries */
NnHookPoint nn_hook_entry_point(const NnHookEntry *e);
/* Is any hook set at (kind, layer) of the part the forward is in? h NULL: none is */
static inline int nn_hooks_on(const NnHooks *h, NnHookKind kind, int layer) {
    return h && h->on[h->stack][kind][layer < 0 ? 0 : layer];
}

/* ---- for the models: the calls at each point ---- */

/* (the calls below take a non-NULL h: the model calls them only when it has hooks) */
/* x -> x, or what the hooks at (kind, layer) replaced it with (the same shape; another shape
 * aborts naming the hook and both shapes). */
Tensor *nn_hook_run(Tape *t, NnHooks *h, NnHookKind kind, int layer, Tensor *x);
/* x (B, T, NH*HS) seen as (B, T, NH, HS) at a head point (q, k, v, rot_q, rot_k, z; n_heads:
 * x's heads, the key/value heads for k and v), hooked, back to 3-D */
Tensor *nn_hook_heads(Tape *t, NnHooks *h, NnHookKind kind, int layer, Tensor *x, int n_heads);
/* The hooks of a norm's scale, read-only: x (B, T, C) the norm's input -> (B, T, 1) the
 * standard deviation sqrt(var + eps) (LayerNorm) or the root mean square sqrt(mean(x^2) + eps)
 * (rms = 1), computed only when a hook is set. */
void nn_hook_norm_scale(Tape *t, NnHooks *h, NnHookKind kind, int layer, const Tensor *x,
                        double eps, int rms);
/* A norm with its hooks: x (B, T, C) -> LayerNorm (x - mean) / scale * weight + bias (bias
 * NULL: none), or RMSNorm (rms = 1, bias NULL) x / scale * weight, (B, T, C). hook_scale (the
 * kind `scale`) reads the scale; hook_normalized (the kind after it) is TransformerLens's:
 * (x - mean) / scale, or x / scale, BEFORE the weight and bias. With no hook on it the norm is
 * the fused op; with one, x / scale is computed with a weight of ones, hooked, then times the
 * weight plus the bias (the fused kernel's order of operations: the same bits). */
Tensor *nn_hook_norm(Tape *t, NnHooks *h, NnHookKind scale, int layer, Tensor *x, Tensor *weight,
                     Tensor *bias, double eps, int rms);
/* Does layer l need the explicit attention (a hook on q, k, v, rot_q, rot_k, scores or
 * pattern)? h NULL:
 * no. nn_hooks_explicit_at: of the attention whose hook_q is kind q (NN_HOOK_Q, or
 * NN_HOOK_CROSS_Q: the decoder's cross-attention). */
int nn_hooks_explicit_attention(const NnHooks *h, int layer);
int nn_hooks_explicit_at(const NnHooks *h, int layer, NnHookKind q);
/* Causal self-attention as plain ops with the hooks of layer l: q (B, T, NH*HS), k and v
 * (B, T, NKV*HS), NKV dividing NH -> (B, T, NH*HS), the heads merged (z before its hook);
 * *probs gets the pattern (B, NH, T, T). dropout on the pattern while training. */
Tensor *nn_hook_attention(Tape *t, NnHooks *h, int layer, Tensor *q, Tensor *k, Tensor *v,
                          int n_heads, double dropout, Rng *rng, Tensor **probs); /* rng, probs:
                                                                                 * may be NULL */
/* One attention of layer `layer` as plain ops, for nn_hook_attend: the kind of its hook_q
 * (NN_HOOK_Q, NN_HOOK_CROSS_Q; the other five kinds follow it), its heads, its masks (causal:
 * query i sees keys j <= i + Tk - Tq, aligned at the end as ag_attention; key_padding (B, Tk),
 * 1 = a masked key, or NULL), dropout on the pattern (rng may be NULL), and where the pattern
 * goes (probs, may be NULL). */
typedef struct NnHookAttn {
    int layer;
    NnHookKind q;
    int n_heads;
    int causal;
    const uint8_t *key_padding;
    double dropout;
    Rng *rng;
    Tensor **probs;
} NnHookAttn;
/* q (B, Tq, NH*HS), k and v (B, Tk, NKV*HS) (NKV dividing NH: grouped-query, each key/value
 * head repeated to its NH / NKV query heads), already past their hooks -> the scores (hooked),
 * the pattern (hooked), pattern . v merged (B, Tq, NH*HS) (z before its hook) */
Tensor *nn_hook_attend(Tape *t, NnHooks *h, const NnHookAttn *a, Tensor *q, Tensor *k, Tensor *v);
/* nn_hook_attend after the hooks of q, k and v */
Tensor *nn_hook_attention_at(Tape *t, NnHooks *h, const NnHookAttn *a, Tensor *q, Tensor *k,
                             Tensor *v);

/* Multi-head attention (attention.c's nn_mha_forward, one key_value tensor, no packed rows)
 * with the hooks of one attention: a->q names it (self: NN_HOOK_Q, cross: NN_HOOK_CROSS_Q) and
 * a->layer its layer; the masks, dropout, rng and probs of a are ignored (masks, the module's).
 * Without a hook on its q, k, v, scores or pattern it runs nn_mha_forward's ops, with z's
 * hooks before out_proj (same bits with hooks that do nothing); with one, the attention as
 * plain ops (nn_hook_attend). Grouped-query modules have no explicit path (it aborts). */
Tensor *nn_mha_forward_hooked(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key_value,
                              const AgAttnMask *masks, Rng *rng, NnHooks *h, const NnHookAttn *a);

#endif
