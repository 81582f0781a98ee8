/* gpt.h: a decoder-only language model. Its style chooses the defaults and the names:
 *   NN_GPT2   GPT-2 as nanoGPT's model.py writes it: token and learned position embeddings,
 *             n_layer pre-LN blocks (causal self-attention, then a GELU MLP, each on a residual
 *             branch), a final LayerNorm, a head tied to the token embeddings. nanoGPT's names:
 *             transformer.wte.weight, transformer.h.0.attn.c_attn.weight, ..., lm_head.weight.
 *   NN_LLAMA  LLaMA as Meta's model.py and llama2.c write it: token embeddings, RMSNorm,
 *             rotary positions (RoPE) on queries and keys, grouped-query heads, a SwiGLU
 *             feed-forward, no biases. Meta's names: tok_embeddings.weight,
 *             layers.0.attention.wq.weight (wk, wv, wo), layers.0.feed_forward.w1.weight (w2,
 *             w3), layers.0.attention_norm.weight, layers.0.ffn_norm.weight, norm.weight,
 *             output.weight.
 * Every option mixes with either style (GptConfig: positions, norm, MLP, biases, the tied head,
 * grouped-query heads, dropout, pre- or post-LN, GPT-NeoX's parallel residual and partial
 * rotary); a part the options leave out has no
 * parameter, and a part the style's names lack takes a name in its convention (the table in
 * nn_gpt_init, and docs/gpt.md).
 * Linear weights are (out, in) as PyTorch's nn.Linear, so a state_dict moves by name.
 * Not here: tokenizers, data, sampling; other blocks (nn.h). Read next: gpt.c. */
#ifndef ATTOGRAD_NN_GPT_H
#define ATTOGRAD_NN_GPT_H

#include "../autograd/config.h"
#include "hooks.h"
#include "nn.h"

/* The fields a model gives; zero fields take the default named, the option enums (zero: the
 * style's choice) included:
 *   GptConfig cfg = {.vocab_size = 65, .block_size = 64, .n_layer = 4, .n_head = 4,
 *                    .n_embd = 128};                                  // GPT-2
 *   cfg.pos = NN_GPT_POS_ROPE, cfg.norm = NN_GPT_NORM_RMS;             // GPT-2 with RoPE, RMSNorm
 *   cfg.mlp = NN_GPT_MLP_NONE;                                          // attention only */
typedef enum { NN_GPT2 = 0, NN_LLAMA = 1 } NnGptStyle;
/* positions: GPT-2 learned (wpe), LLaMA RoPE on queries and keys; or none (causal attention
 * alone tells positions apart) */
typedef enum { NN_GPT_POS_STYLE, NN_GPT_POS_LEARNED, NN_GPT_POS_ROPE, NN_GPT_POS_NONE } NnGptPos;
/* the norms (ln_1, ln_2, ln_f): GPT-2 LayerNorm, LLaMA RMSNorm (a weight, never a bias); or
 * none (no norm parameters at all) */
typedef enum { NN_GPT_NORM_STYLE, NN_GPT_NORM_LAYER, NN_GPT_NORM_RMS, NN_GPT_NORM_NONE } NnGptNorm;
/* the feed-forward: GPT-2 c_proj(gelu(c_fc x)), LLaMA w2(silu(w1 x) * w3 x); or none (an
 * attention-only model: each block is x + attn(ln_1(x))); or c_proj(relu(c_fc x)) (the
 * grokking papers' 1-layer model), or c_proj(gelu_tanh(c_fc x)) (GPT-2's own MLP: HF's
 * "gelu_new", ag_gelu_tanh; NN_GPT_MLP_GELU is the exact erf GELU, nanoGPT's nn.GELU()), both
 * with GELU's names and width. The values are the checkpoint
 * field's (meta.config.mlp): new kinds are appended. */
typedef enum {
    NN_GPT_MLP_STYLE,
    NN_GPT_MLP_GELU,
    NN_GPT_MLP_SWIGLU,
    NN_GPT_MLP_NONE,
    NN_GPT_MLP_RELU,
    NN_GPT_MLP_GELU_TANH,
} NnGptMlp;
#define NN_GPT_MLP_LAST NN_GPT_MLP_GELU_TANH /* the largest value */
/* biases of the Linear layers and LayerNorms: GPT-2 yes, LLaMA no */
typedef enum { NN_GPT_BIAS_STYLE, NN_GPT_BIAS_ON, NN_GPT_BIAS_OFF } NnGptBias;
typedef struct GptConfig {
    NnGptStyle style;           /* NN_GPT2 (0) or NN_LLAMA: the defaults and the names */
    int vocab_size, block_size; /* tokens, and the longest context (the positions) */
    int n_layer, n_head, n_embd;
    int n_kv_head;  /* 0: n_head; fewer: grouped-query attention (n_head a multiple of it) */
    double dropout; /* 0: none; on the embeddings, the attention probabilities and the
                     * residual branches, while training */
    int no_bias;    /* 1: no biases, as .bias = NN_GPT_BIAS_OFF (nanoGPT's bias=False) */
    int untied;     /* 1: the head's weight of its own (lm_head, output); 0: the token
                     * embeddings' (tied, as GPT-2 and llama2.c's small models) */
    int ffn_hidden; /* the MLP's width; 0: GELU (ReLU, GELU tanh) 4 n_embd, SwiGLU llama2.c's rule (2/3 of
                     * 4 n_embd rounded up to a multiple of 32) */
    double rope_base; /* RoPE's base; 0: 10000 */
    double norm_eps;  /* the norms' eps (LayerNorm, RMSNorm); 0: 1e-5 */
    NnGptPos pos;     /* 0: the style's (above) */
    NnGptNorm norm;
    NnGptMlp mlp;
    NnGptBias bias;
    int post_ln; /* 0: pre-LN, x + f(norm(x)), and a final norm (both styles); 1: post-LN as the
                  * original Transformer and GPT-1, norm(x + f(x)), no final norm */
    int parallel_residual; /* 1: GPT-NeoX's parallel attention and MLP (HF's
                            * use_parallel_residual, TransformerLens's parallel_attn_mlp): each
                            * block is x + attn(ln_1(x)) + mlp(ln_2(x)), both reading the block's
                            * input; pre-LN with an MLP only. 0: x + attn(ln_1(x)), then that plus
                            * mlp(ln_2(that)) */
    int rotary_dim; /* rotary positions: the columns of each head that turn (even, <= head size;
                     * 0: all of them). Fewer: partial rotary (GPT-NeoX's rotary_pct: rotary_dim
                     * = head_size * rotary_pct; GPT-J's and TransformerLens's rotary_dim): in
                     * each head of q and k, the pairs (2i, 2i+1) with 2i < rotary_dim turn by
                     * p base^(-2i/rotary_dim), the columns [rotary_dim, head_size) pass
                     * unchanged (ag_rope's rot_dims). HF's NeoX rotates the halves of those
                     * columns instead, pair (j, j + rotary_dim/2) at the same frequency as our
                     * pair j: a loader moves HF's q/k row j of a head to 2j and
                     * rotary_dim/2 + j to 2j + 1, for j < rotary_dim/2, and leaves the rows
                     * from rotary_dim on in place. */
} GptConfig;

/* GPT-2's names: transformer.h.<l>: ln_1, attn.c_attn (q, k, v rows), attn.c_proj, ln_2,
 * mlp.c_fc, mlp.c_proj (and mlp.c_up, SwiGLU's w3). LLaMA's: layers.<l>: attention_norm (ln_1),
 * attention.wq, wk, wv, wo (c_proj), ffn_norm (ln_2), feed_forward.w1 (c_fc), w2 (mlp_proj),
 * w3. The parts the options leave out stay zero (NULL weights). */
typedef struct GptBlock {
    LayerNorm ln_1, ln_2;  /* an RMSNorm has a weight only */
    Linear c_attn, c_proj; /* attention: (C + 2 n_kv_head hs, C) and (C, C) */
    Linear c_fc, mlp_proj; /* MLP: (H, C) and (C, H); H = ffn_hidden (GELU: 4C) */
    Linear wq, wk, wv, w3; /* LLaMA's names: (C, C), (n_kv_head hs, C) twice; SwiGLU's (H, C) */
} GptBlock;

typedef struct Gpt {
    GptConfig cfg;
    ParamList params;
    Embedding wte;          /* transformer.wte.weight (vocab_size, C); LLaMA: tok_embeddings */
    PositionalEncoding wpe; /* learned positions: transformer.wpe.weight (block_size, C);
                             * LLaMA's names: pos_embeddings.weight */
    GptBlock *h;            /* n_layer blocks, in the parameters' arena */
    LayerNorm ln_f;         /* LLaMA: norm (weight only); none post-LN */
    Linear lm_head; /* (vocab_size, C), no bias; its weight is wte's unless untied; LLaMA: output */
    Tensor **last_probs; /* n_layer: each block's attention probabilities (B, NH, T, T) of the
                          * last forward, in the step arena */
    NnHooks *hooks;      /* during nn_gpt_forward_hooked only; NULL otherwise */
} Gpt;

/* Checks a configuration (e.g. one read from a file) before nn_gpt_init, which aborts on what
 * this refuses. AG_OK with the parameter count in *n_params (may be NULL), or AG_ERR_FORMAT
 * with the reason in ag_last_error() ("n_head 3 must divide n_embd 64"). */
int nn_gpt_check_config(const GptConfig *c, int64_t *n_params);
/* Every parameter in arena a (registered in m->params; the blocks' table too, so the model
 * lives as long as the arena), initialised as nanoGPT and llama2.c
 * do: weights and embeddings N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj;
 * LLaMA's wo and w3, or w2 without w3) N(0, 0.02 / sqrt(2 n_layer)), biases 0, norms 1 and 0.
 * The parameters, in this order (a part is there when the options in brackets say so):
 *   GPT-2's names                    LLaMA's names               [when]
 *   transformer.wte                  tok_embeddings
 *   transformer.wpe                  pos_embeddings              [learned positions]
 *   transformer.h.<l>.ln_1           layers.<l>.attention_norm   [a norm]
 *   ...attn.c_attn (q, k, v rows)    ...attention.wq, wk, wv
 *   ...attn.c_proj                   ...attention.wo
 *   ...ln_2                          ...ffn_norm                 [a norm and an MLP]
 *   ...mlp.c_fc                      ...feed_forward.w1          [an MLP]
 *   ...mlp.c_up                      ...feed_forward.w3          [SwiGLU]
 *   ...mlp.c_proj                    ...feed_forward.w2          [an MLP]
 *   transformer.ln_f                 norm                        [a norm, pre-LN]
 *   lm_head                          output                      [untied]
 * (A block's order in LLaMA's names is Meta's: wq, wk, wv, wo, w1, w2, w3, attention_norm,
 * ffn_norm.) Each norm has .weight, and .bias when it is a LayerNorm with biases; each Linear .weight, and
 * .bias with biases (never the head's). */
void nn_gpt_init(Gpt *m, Arena *a, Rng *rng, const GptConfig *cfg);
/* nn_gpt_init without the initialisation's draws: the same parameters, names and order, the
 * norms' weights 1 and every other value 0, for a model whose weights a load overwrites
 * (ckpt_load, an HF folder): no normals generated to be thrown away. Initialisation stays
 * serial (one RNG stream in the parameters' order: the same bits for any thread count, and
 * for the runs and checkpoints already made); this entry is what makes a load fast. */
void nn_gpt_init_unset(Gpt *m, Arena *a, const GptConfig *cfg);
void nn_gpt_free(Gpt *m);
/* idx (B, T) token ids in [0, vocab_size), T <= block_size -> logits (B, T, vocab_size) */
Tensor *nn_gpt_forward(Tape *t, Gpt *m, const int *idx, int B, int T, Rng *rng);
/* nn_gpt_forward with the hooks at their points (hooks.h), for this call only: m->hooks is
 * NULL again when it returns. NULL when a hook failed (the forward still ran to the end, the
 * later hooks did not), with the hook's message in ag_last_error(). */
Tensor *nn_gpt_forward_hooked(Tape *t, Gpt *m, const int *idx, int B, int T, Rng *rng,
                              NnHooks *hooks);
/* The end of the forward on any residual stream x (B, T, C): the final norm (pre-LN models;
 * none post-LN, none with NN_GPT_NORM_NONE), then the head -> logits (B, T, vocab_size). On the
 * last block's output it gives nn_gpt_forward's logits to the bit; on an earlier layer's, the
 * logit lens (../lens/logit.h). Inside nn_gpt_forward_hooked the ln_final hooks run. */
Tensor *nn_gpt_unembed(Tape *t, Gpt *m, Tensor *x);
/* The mean cross-entropy of nn_gpt_forward's logits against targets (B, T); a target of -1 is
 * ignored (nanoGPT's ignore_index). A scalar. */
Tensor *nn_gpt_loss(Tape *t, Gpt *m, const int *idx, const int *targets, int B, int T, Rng *rng);
/* The mean cross-entropy (nats per token) of the model over every token of tokens[0..n) that
 * has a predecessor, in consecutive windows of block_size positions (each window's first
 * token is context only, as in training), batch windows a forward: *n_pred the tokens
 * predicted. No dropout, no grad. It stops at the first window whose loss is not finite and
 * returns NAN, with ag_fail naming the tokens (the tape is left as that window left it, for
 * ag_first_nonfinite). NAN with *n_pred 0 when n < 2. */
double nn_gpt_loss_over(Tape *t, Gpt *m, const int *tokens, size_t n, int batch, int64_t *n_pred);
/* The configuration as a checkpoint's (meta.model "gpt"; each field with its range, and
 * nn_gpt_check_config as its check): Checkpoint ck = {.config = nn_gpt_ckpt_config(&cfg)}. */
CkptConfig nn_gpt_ckpt_config(GptConfig *cfg);
/* The configuration with every style's choice made: pos, norm, mlp, bias (ON or OFF, no_bias
 * to match), n_kv_head, ffn_hidden (0 without an MLP), rope_base and norm_eps filled in. A
 * model built from it is the same model. c must pass nn_gpt_check_config. */
GptConfig nn_gpt_options(const GptConfig *c);

/* ---- incremental decoding: the keys and values of every position so far, per layer ----
 * nn_gpt_forward_cached runs T new positions per batch row over the cache and appends theirs:
 * position i's logits equal position i of nn_gpt_forward on the whole sequence (no dropout:
 * it runs as in evaluation). Owned by the cache (malloc). */
typedef struct GptCache {
    int B, max_T, len, width; /* width: 2 n_kv_head hs, a position's keys then values */
    int n_layer;
    Real **kv; /* n_layer of (B, max_T, width) */
} GptCache;
void nn_gpt_cache_init(GptCache *c, const Gpt *m, int B, int max_T);
void nn_gpt_cache_free(GptCache *c);
/* idx (B, T) at positions [c->len, c->len + T) -> logits (B, T, vocab_size) */
Tensor *nn_gpt_forward_cached(Tape *t, Gpt *m, GptCache *c, const int *idx, int B, int T);
/* nn_gpt_forward_cached with hooks, for this call only (as nn_gpt_forward_hooked). The points
 * hold the new positions: (B, T, ...) at positions [c->len, c->len + T), hook_attn_scores and
 * hook_pattern (B, NH, T, len) over every cached key (len = c->len + T), the same values as
 * the full forward's at those positions; hook_k and hook_v are the new keys and values, and
 * what a hook leaves there is what joins the cache. */
Tensor *nn_gpt_forward_cached_hooked(Tape *t, Gpt *m, GptCache *c, const int *idx, int B, int T,
                                     NnHooks *hooks);

/* Continues ids[0..n) (n >= 1) by up to max_new tokens written to ids[n..] (room for
 * n + max_new), each drawn by nn_sample from the logits of the last position; each new token
 * goes to on_token(token, ctx) as it comes (NULL: none), which may return nonzero to stop. The
 * context is the last block_size tokens (nanoGPT's crop): a cache while they fit, then the
 * window run again for each token. One row (B = 1), no-grad; resets the tape t between
 * tokens. Returns how many tokens were added, or AG_ERR_RANGE (negative; ag_last_error names the
 * position, the value and the token id) when the logits it would draw from hold a NaN or an
 * infinity: finite weights that overflow are a fault of the file they came from, not misuse. */
int nn_gpt_generate(Tape *t, Gpt *m, int *ids, int n, int max_new, const NnSampling *s, Rng *rng,
                    int (*on_token)(int token, void *ctx), void *ctx);

#endif
