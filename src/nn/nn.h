/* nn.h: modules that own parameters and compose ag_ ops: Linear, LayerNorm, Embedding,
 * positional encodings, the feed-forward block, multi-head attention, transformer encoder and
 * decoder layers and stacks, and the seq2seq model. Modules have no backward code: the tape
 * differentiates them. Parameter names and shapes follow PyTorch's state_dict, so that weights
 * move between the two (see nn_seq2seq_init for the full list).
 * Not here: the math (../autograd) or optimizers (../optim). Read next: nn.c (Linear first),
 * then attention.c (nn_mha_forward), then transformer.c. */
#ifndef ATTOGRAD_NN_H
#define ATTOGRAD_NN_H

#include <stdint.h>
#include <stdio.h>

#include "../autograd/autograd.h"
#include "../autograd/config.h"

/* ---- parameters (the list itself, ParamList, is autograd's: ag_params_*) ----
 * What a module's init needs: where parameters live, the list that names them, the RNG that
 * initialises them, and the scope: the dotted prefix of every name made through this builder
 * ("" at the top). Module inits take a name relative to the scope ("" is the scope itself) and
 * open a scope of their own for their parts, so that a model never formats names:
 *   NnBuilder b = nn_builder(arena, &params, &rng);
 *   for (int l = 0; l < L; l++) {
 *       NnBuilder lb = nn_scope(&b, "blocks.%d", l);      // names "blocks.<l>.*"
 *       nn_encoder_layer_init(&blocks[l], &lb, "", &cfg); // blocks.<l>.self_attn.in_proj_weight
 *   }                                                     // lb (the scope) ends here
 * A child scope is a copy of the builder (the same arena, list and RNG) with a longer prefix;
 * it ends with the C block that holds it. */
typedef struct NnBuilder {
    Arena *arena;
    ParamList *params;
    Rng *rng;
    char scope[AG_NAME_LEN]; /* "" or "blocks.0.self_attn" */
} NnBuilder;

/* A builder at the top scope: parameters in arena a, registered in pl, initialised from rng;
 * rng NULL: the module inits draw nothing and leave their weights zero (a model whose weights a
 * load overwrites) */
NnBuilder nn_builder(Arena *a, ParamList *pl, Rng *rng);
/* b's builder with the scope "<b's scope>.<fmt...>" (or "<fmt...>" at the top; an empty
 * result keeps b's scope). A scope longer than AG_NAME_LEN - 1 characters aborts. */
NnBuilder nn_scope(const NnBuilder *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A new parameter named "<scope>.<name>" (or "<name>" at the top), zeroed. A name that exists
 * or does not fit AG_NAME_LEN aborts. */
Tensor *nn_param(NnBuilder *b, const char *name, int ndim, const int *shape);
/* A view on rows [row0, row0 + rows) of a 2-D or 1-D parameter: same data and gradient memory,
 * allocated in arena a; the tape treats it as a leaf whose gradient lands in the parameter (a
 * lazy parameter's, arena_lazy_grads, is made then). */
Tensor *nn_param_rows(Arena *a, Tensor *p, int row0, int rows, const char *name);
/* nn_param_rows for a forward on tape t, in t's arena: the view's gradient is p's when t
 * records gradients; in no-grad mode (a forward only run or studied) a lazy parameter's
 * gradient is left unmade, and the view has none */
Tensor *nn_param_rows_on(Tape *t, Tensor *p, int row0, int rows, const char *name);

/* ---- the flags of module inits, by name ---- */
typedef enum { NN_NO_BIAS = 0, NN_BIAS = 1 } NnBias;               /* Linear */
typedef enum { NN_SINUSOIDAL = 0, NN_LEARNED = 1 } NnPositionKind; /* positions */
#define NN_NO_PADDING (-1) /* Embedding: no padding row (PyTorch's padding_idx=None) */
#define NN_LN_EPS 1e-5     /* LayerNorm's eps by default, as PyTorch's */

/* ---- Linear: y = x W^T + b, W (out, in), b (out) ----
 * Initialised like PyTorch's nn.Linear: W and b uniform in [-1/sqrt(in), 1/sqrt(in)] (that is
 * kaiming_uniform with a = sqrt(5) for W). Names: <name>.weight, <name>.bias. */
typedef struct Linear {
    Tensor *weight, *bias; /* bias may be NULL */
    int in, out;
} Linear;
void nn_linear_init(Linear *l, NnBuilder *b, const char *name, int in, int out, NnBias bias);
/* x (..., in) -> (..., out) */
Tensor *nn_linear(Tape *t, const Linear *l, Tensor *x);

/* ---- LayerNorm(C, eps): weight 1, bias 0 ---- */
typedef struct LayerNorm {
    Tensor *weight, *bias;
    double eps;
} LayerNorm;
/* eps: NN_LN_EPS unless the model says otherwise */
void nn_layernorm_init(LayerNorm *ln, NnBuilder *b, const char *name, int C, double eps);
/* x (..., C) -> (..., C) */
Tensor *nn_layernorm(Tape *t, const LayerNorm *ln, Tensor *x);
/* x, f (..., C) -> LayerNorm(x + f), one fused op (ag_add_layernorm) */
Tensor *nn_add_layernorm(Tape *t, const LayerNorm *ln, Tensor *x, Tensor *f);

/* ---- Embedding(V, C): N(0, 1) like PyTorch; the padding row (if any) starts at 0 and
 * receives no gradient ---- */
typedef struct Embedding {
    Tensor *weight;
    int padding_idx; /* NN_NO_PADDING: none */
} Embedding;
void nn_embedding_init(Embedding *e, NnBuilder *b, const char *name, int V, int C, int padding_idx);
/* ids (B, T) -> (B, T, C) */
Tensor *nn_embedding(Tape *t, const Embedding *e, const int *ids, int B, int T);

/* ---- positions: sinusoidal ("Attention Is All You Need", 3.5) or learned ----
 * pe[pos, 2i] = sin(pos / 10000^(2i/C)), pe[pos, 2i+1] = cos(pos / 10000^(2i/C)). */
typedef struct PositionalEncoding {
    Tensor *table; /* (max_len, C): a constant, or the parameter when learned */
    NnPositionKind kind;
    int max_len;
} PositionalEncoding;
/* NN_LEARNED: a parameter <name>.weight, N(0, 0.02); NN_SINUSOIDAL: a constant table */
void nn_positional_init(PositionalEncoding *pe, NnBuilder *b, const char *name, int max_len, int C,
                        NnPositionKind kind);
/* the rows [start, start + T) of the table -> (T, C), a view; start + T <= max_len */
Tensor *nn_positions(Tape *t, const PositionalEncoding *pe, int start, int T);
/* x (B, T, C) + positions [start, start + T) -> (B, T, C); T + start <= max_len */
Tensor *nn_positional(Tape *t, const PositionalEncoding *pe, Tensor *x, int start);

/* ---- feed-forward: linear2(dropout(act(linear1(x)))) ---- */
typedef enum { NN_RELU = 0, NN_GELU = 1 } NnActivation;
typedef struct FeedForward {
    Linear linear1, linear2;
    NnActivation act;
    double dropout;
} FeedForward;
/* names: <name>.linear1.*, <name>.linear2.* (attributes of PyTorch's transformer layers) */
void nn_ffn_init(FeedForward *f, NnBuilder *b, const char *name, int C, int ff, NnActivation act,
                 double dropout);
/* x (..., C) -> (..., C) */
Tensor *nn_ffn(Tape *t, const FeedForward *f, Tensor *x, Rng *rng);

/* ---- masks: what an attention call may mask is ag_attention's AgAttnMask (autograd.h): causal,
 * key_padding (an AgMask: (B, Tk) bytes with their shape, 1 = padding, PyTorch's
 * key_padding_mask=True) and attn_mask; zeroed (or a NULL pointer to it): nothing.
 *   nn_mha_forward(t, &m, x, x, x, &(AgAttnMask){.causal = 1}, rng)  (GPT's self-attention)
 *   nn_mha_forward(t, &m, q, mem, mem, &(AgAttnMask){.key_padding = &pad}, rng)
 * causal: query i sees keys j <= i + (Tk - Tq) (aligned at the end: with a cache of earlier
 * keys, a new query sees all of them), as ag_attention. ---- */

/* ---- multi-head attention ----
 * n_kv_heads == n_heads: PyTorch's nn.MultiheadAttention layout, in_proj_weight (3C, C) and
 * in_proj_bias (3C) (rows: q, k, v), out_proj.weight (C, C), out_proj.bias (C).
 * n_kv_heads < n_heads (grouped-query; 1 is multi-query), which PyTorch's module lacks:
 * q_proj (C, C), k_proj and v_proj (n_kv_heads * head_dim, C), out_proj.
 * Head gates (NH), 1 by default, scale each head's output before out_proj; 0 ablates a head.
 * They are not parameters (the optimizer does not see them); nn_mha_track_gates makes their
 * gradient, the head-importance score of Michel et al. 2019, accumulate in gate->grad. */
typedef struct MultiHeadAttention {
    int d_model, n_heads, n_kv_heads, head_dim;
    double dropout;
    Tensor *in_proj_weight, *in_proj_bias; /* NULL for grouped-query */
    Linear q_proj, k_proj, v_proj;         /* views into in_proj_* when it exists */
    Tensor *kv_proj_weight, *kv_proj_bias; /* rows [C, 3C) of in_proj_* (keys and values in
                                            * one product), NULL for grouped-query */
    Linear out_proj;
    Tensor *gate; /* (NH) */
    int track_gates;
    Tensor *last_probs; /* (B, NH, Tq, Tk) of the last forward, in the step arena; after
                         * nn_mha_forward_rows the rows of queries not in q_rows are 0.
                         * NULL after a forward with need_weights 0 */
    int need_weights;   /* 1 (nn_mha_init's default, as PyTorch's need_weights=True): every
                         * forward sets last_probs; 0: it sets last_probs to NULL, and a
                         * forward on packed rows does not unpack the probabilities into a
                         * (B, NH, Tq, Tk) tensor (PyTorch's nn.Transformer layers call their
                         * attention with need_weights=False). The values are the same. */
} MultiHeadAttention;
/* The fields a model gives; zero fields take the default named. */
typedef struct MhaConfig {
    int d_model, n_heads;
    int n_kv_heads; /* 0: n_heads (PyTorch's layout); fewer: grouped-query */
    int no_bias;    /* 1: no biases (PyTorch's bias=False); 0: biases */
    double dropout; /* on the attention probabilities, while training */
} MhaConfig;
/* nn_mha_init(&m, b, "self_attn", &(MhaConfig){.d_model = 128, .n_heads = 4}) */
void nn_mha_init(MultiHeadAttention *m, NnBuilder *b, const char *name, const MhaConfig *cfg);
void nn_mha_track_gates(MultiHeadAttention *m, int on);
/* query (B, Tq, C), key and value (B, Tk, C) (PyTorch's query, key, value; self-attention:
 * one tensor for all three), masks or NULL (a key padding mask of another shape than (B, Tk)
 * aborts).
 * -> (B, Tq, C); m->last_probs holds the attention probabilities.
 * While the head gates are all 1 and untracked, the projections stay (B, T, C) and
 * ag_attention reads the heads in place (AG_ATTN_COLS): self-attention projects q, k and v in one product
 * (in_proj_weight), cross-attention with key == value k and v in one (kv_proj_weight), and
 * distinct key and value tensors each through its rows of in_proj_weight. With gates the heads are
 * split into (B, NH, T, HS) tensors for ag_attention and ag_head_gate. */
Tensor *nn_mha_forward(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key, Tensor *value,
                       const AgAttnMask *masks, Rng *rng);

/* ---- packed rows: the live rows of a (B, T, C) batch ----
 * A row map names n of the B*T rows of a batch (row b*T + t), distinct and increasing. A tensor
 * packed by it is (n, C): row i is row idx[i] of the (B, T, C) batch. nn_seq2seq_loss packs the
 * rows that can reach the loss and runs every per-row op (Linear, LayerNorm, residual, dropout)
 * on them alone. */
typedef struct NnRows {
    const int *idx; /* (n) row numbers, in the tape's arena */
    int n, B, T;
} NnRows;

/* nn_mha_forward on packed inputs: query (Nq, C) packed by q_rows (or (B, Tq, C) when q_rows is
 * NULL), key_value likewise by kv_rows (self-attention: the same tensor and the same map).
 * The projections run on the packed rows and so does the attention (ag_attention, AG_ATTN_ROWS: key
 * rows not in kv_rows must be masked by key_padding_mask, padding; query rows not in q_rows are
 * not computed). A side without a map is viewed as all its rows. -> (Nq, C), or (B, Tq, C) when
 * q_rows is NULL. With head gates (not all 1, or tracked) the inputs are scattered and
 * nn_mha_forward runs on the full batch. m->last_probs is (B, NH, Tq, Tk); a row of a query not
 * in q_rows is 0 (with head gates: the attention of a zero query, uniform over the visible
 * keys). */
Tensor *nn_mha_forward_rows(Tape *t, MultiHeadAttention *m, Tensor *query, const NnRows *q_rows,
                            Tensor *key_value, const NnRows *kv_rows, const AgAttnMask *masks,
                            Rng *rng);

/* The pieces of nn_mha_forward, for callers that reuse keys and values (cross-attention over
 * a fixed memory while decoding): x (B, Tk, C) -> key (which 0) or value (which 1) heads
 * (B, NKV, Tk, HS); then attention of query (B, Tq, C) over those heads -> (B, Tq, C). */
Tensor *nn_mha_project_kv(Tape *t, MultiHeadAttention *m, Tensor *x, int which);
Tensor *nn_mha_forward_kv(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *kh, Tensor *vh,
                          const AgAttnMask *masks, Rng *rng);

/* A key/value cache for causal self-attention during incremental decoding: keys and values of
 * every position decoded so far, (B, NKV, max_T, HS) each, owned by the cache (malloc). */
typedef struct NnKVCache {
    int B, NKV, HS, max_T, len;
    Real *k, *v;
} NnKVCache;
void nn_kv_cache_init(NnKVCache *c, const MultiHeadAttention *m, int B, int max_T);
void nn_kv_cache_free(NnKVCache *c);
/* Causal self-attention of the new positions x (B, T, C) over the cache plus themselves;
 * appends their keys and values. No dropout (decoding). -> (B, T, C) */
Tensor *nn_mha_forward_cached(Tape *t, MultiHeadAttention *m, NnKVCache *c, Tensor *x);

/* ---- transformer layers (PyTorch's nn.TransformerEncoderLayer / DecoderLayer, batch_first)
 * post-LN (PyTorch's default, norm_first=False):
 *   encoder: x = norm1(x + drop(self_attn(x)));  x = norm2(x + drop(ffn(x)))
 *   decoder: x = norm1(x + drop(self_attn(x, causal))); x = norm2(x + drop(cross(x, memory)));
 *            x = norm3(x + drop(ffn(x)))
 * pre-LN (norm_first=True): x = x + drop(self_attn(norm1(x))), and so on. */
/* The fields a model gives; zero fields take the default named:
 *   TransformerConfig cfg = {.d_model = 128, .n_heads = 4, .pre_ln = 1, .act = NN_GELU}; */
typedef struct TransformerConfig {
    int d_model, n_heads;
    int n_kv_heads;   /* 0: n_heads */
    int d_ff;         /* 0: 4 * d_model */
    double dropout;   /* 0: none */
    double ln_eps;    /* 0: NN_LN_EPS */
    int pre_ln;       /* 1: pre-LN (norm_first=True); 0: post-LN, PyTorch's default */
    NnActivation act; /* NN_RELU (0, PyTorch's default) or NN_GELU */
    int causal;       /* encoder layers: 1 = each position sees itself and earlier ones only
                       * (a GPT block; PyTorch: a causal src_mask). Decoder layers' self-attention
                       * is always causal and ignores it. */
} TransformerConfig;

typedef struct EncoderLayer {
    MultiHeadAttention self_attn;
    FeedForward ffn;
    LayerNorm norm1, norm2;
    double dropout;
    int pre_ln, causal;
} EncoderLayer;

typedef struct DecoderLayer {
    MultiHeadAttention self_attn, multihead_attn;
    FeedForward ffn;
    LayerNorm norm1, norm2, norm3;
    double dropout;
    int pre_ln;
} DecoderLayer;

/* names: <name>.self_attn.*, <name>.linear1.*, ..., <name>.norm2.* */
void nn_encoder_layer_init(EncoderLayer *l, NnBuilder *b, const char *name,
                           const TransformerConfig *cfg);
/* x (B, S, C), src_pad (B, S) 1 = padding or NULL -> (B, S, C); causal when the layer is.
 * A decoder-only (GPT) block is a causal encoder layer:
 *   nn_encoder_layer_init(&blk, b, "", &(TransformerConfig){.d_model = C, .n_heads = NH,
 *                         .pre_ln = 1, .act = NN_GELU, .causal = 1});
 *   x = nn_encoder_layer(t, &blk, x, NULL, rng); */
Tensor *nn_encoder_layer(Tape *t, EncoderLayer *l, Tensor *x, const AgMask *src_pad, Rng *rng);
/* names: <name>.self_attn.*, <name>.multihead_attn.*, <name>.linear1.*, ..., <name>.norm3.* */
void nn_decoder_layer_init(DecoderLayer *l, NnBuilder *b, const char *name,
                           const TransformerConfig *cfg);
/* x (B, T, C), memory (B, S, C), tgt_pad (B, T) and memory_pad (B, S) or NULL -> (B, T, C) */
Tensor *nn_decoder_layer(Tape *t, DecoderLayer *l, Tensor *x, Tensor *memory, const AgMask *tgt_pad,
                         const AgMask *memory_pad, Rng *rng);

/* ---- the seq2seq model: embeddings * sqrt(d_model) + positions, encoder and decoder stacks
 * with their final LayerNorms (encoder.norm, decoder.norm, as nn.Transformer), and a
 * generator Linear to the target vocabulary (optionally tied to tgt_embed.weight). ---- */
#define NN_MAX_LAYERS 16
/* The most blocks a GPT (gpt.h) may have: a build limit (the hooks' table, hooks.h, and the
 * logit lens's readout, ../lens/logit.h, hold a slot per layer); the model and its cache are
 * allocated per model. Published models stay well below it (GPT-2 XL 48, LLaMA 3 405B 126). */
#define NN_GPT_MAX_LAYERS 256
typedef struct Seq2SeqConfig {
    int src_vocab, tgt_vocab;
    int n_enc_layers, n_dec_layers;
    int max_len;     /* longest sequence the positions cover */
    int pad_id;      /* padding token in both vocabularies: masked keys, ignored targets */
    int learned_pos; /* 0: sinusoidal */
    int tie_output;  /* generator.weight is tgt_embed.weight */
    TransformerConfig layer;
} Seq2SeqConfig;

struct NnHooks; /* hooks.h */
typedef struct Seq2Seq {
    Seq2SeqConfig cfg;
    ParamList params;
    Embedding src_embed, tgt_embed;
    PositionalEncoding src_pos, tgt_pos;
    EncoderLayer enc[NN_MAX_LAYERS];
    DecoderLayer dec[NN_MAX_LAYERS];
    LayerNorm enc_norm, dec_norm;
    Linear generator;
    struct NnHooks *hooks; /* during nn_seq2seq_forward_hooked only; NULL otherwise */
} Seq2Seq;

/* Sensible defaults for the fields not given (d_ff 4*d_model, eps 1e-5, ...). */
Seq2SeqConfig nn_seq2seq_default_config(int src_vocab, int tgt_vocab, int d_model, int n_heads,
                                        int n_layers);
/* Creates every parameter in arena a (registered in m->params), initialised from rng (each
 * module as its PyTorch counterpart, except the embeddings: N(0, 1/d_model), since the forward
 * scales them by sqrt(d_model)).
 * Parameter names: src_embed.weight, tgt_embed.weight, [src_pos.weight, tgt_pos.weight,]
 * encoder.layers.N.{self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*}, encoder.norm.*,
 * decoder.layers.N.{self_attn.*, multihead_attn.*, linear1.*, linear2.*, norm1..3.*},
 * decoder.norm.*, generator.weight (unless tied), generator.bias. */
void nn_seq2seq_init(Seq2Seq *m, Arena *a, Rng *rng, const Seq2SeqConfig *cfg);
void nn_seq2seq_free(Seq2Seq *m);
/* Checks a configuration (e.g. one read from a file) before nn_seq2seq_init, which aborts on
 * what this refuses: every field in range (zero fields take their defaults, as in
 * nn_seq2seq_init). AG_OK with the model's parameter count in *n_params and every value it
 * allocates in *n_values (parameters, sinusoidal tables, head gates; either may be NULL), or
 * AG_ERR_FORMAT with the reason in ag_last_error() ("n_heads 3 must divide d_model 64"). A
 * test pins the counts to nn_seq2seq_init's. */
int nn_seq2seq_check_config(const Seq2SeqConfig *c, int64_t *n_params, int64_t *n_values);
/* The configuration as a checkpoint's (meta.model "seq2seq"; each field with its range, and
 * nn_seq2seq_check_config with at most CKPT_MAX_PARAMS values as its check):
 * Checkpoint ck = {.config = nn_seq2seq_ckpt_config(&cfg)}. */
CkptConfig nn_seq2seq_ckpt_config(Seq2SeqConfig *cfg);
/* Every dropout probability of m: the configuration's (the embeddings'), then each encoder
 * layer's (residual, self-attention, feed-forward) and each decoder layer's (residual, self-,
 * cross-attention, feed-forward). Their addresses go to p (room for NN_SEQ2SEQ_MAX_DROPOUTS);
 * returns their count. For a pass with gradients measured as the model translates: save them,
 * set them to 0, put them back. */
#define NN_SEQ2SEQ_MAX_DROPOUTS (1 + 4 * 2 * NN_MAX_LAYERS)
int nn_seq2seq_dropouts(Seq2Seq *m, double **p);
/* Sets need_weights (MultiHeadAttention) of every attention of m to on (0 or 1): a training
 * loop that reads no attention maps passes 0 (nothing else changes: the same loss and
 * gradients, to the bit), a pass that reads them (tr_attention, lens) 1, the default. */
void nn_seq2seq_need_weights(Seq2Seq *m, int on);
/* A (B, T) padding mask of ids: 1 where ids == pad_id, its bytes in the tape's arena. */
AgMask nn_padding_mask(Tape *t, const int *ids, int B, int T, int pad_id);
/* src (B, S) -> memory (B, S, C) */
Tensor *nn_seq2seq_encode(Tape *t, Seq2Seq *m, const int *src, int B, int S, Rng *rng);
/* tgt_in (B, T) and memory (B, S, C) from encode with src (for its padding) -> logits (B,T,V) */
Tensor *nn_seq2seq_decode(Tape *t, Seq2Seq *m, Tensor *memory, const int *src, int S,
                          const int *tgt_in, int B, int T, Rng *rng);
/* encode and decode of src (B, S) and tgt_in (B, T) -> logits (B, T, V), dense (no packed
 * rows), with the hooks at their points (hooks.h: the encoder's under "encoder.", the
 * decoder's under "decoder.") for this call only: m->hooks is NULL again when it returns. NULL
 * when a hook failed (the forward still ran to the end, the later hooks did not), with the
 * hook's message in ag_last_error(). Hooks made by nn_hooks_init_seq2seq for the model's
 * layers. With hooks that do nothing (on any point but an attention's q, k, v, scores or
 * pattern) the same bits as nn_seq2seq_decode(nn_seq2seq_encode(...)). */
Tensor *nn_seq2seq_forward_hooked(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt_in,
                                  int B, int T, Rng *rng, struct NnHooks *hooks);
/* Mean cross-entropy of the next-token logits against tgt_out (B, T), padding ignored.
 * The same loss and gradients as ag_cross_entropy(nn_seq2seq_decode(nn_seq2seq_encode(...)),
 * tgt_out, pad_id) up to rounding, without the arithmetic on padding: only the live rows are
 * computed (source rows that are not padding; target rows whose input or target is not
 * padding), packed (NnRows). The rows left out are only ever masked keys and ignored targets.
 * A side without padding runs dense, so a batch without any padding gives the same bits as the
 * dense path. Dropout masks are drawn over the packed rows (other masks than the dense path's). */
Tensor *nn_seq2seq_loss(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt_in,
                        const int *tgt_out, int B, int T, Rng *rng);

/* ---- sampling a next token from logits (sample.c) ----
 * temperature 0: the most likely token (greedy; the lowest id on ties), no draw. Otherwise the
 * softmax of logits / temperature, cut to the top_k most likely tokens (0: all) and then to the
 * smallest set of them whose probability reaches top_p (0 or 1: all; nucleus sampling), the
 * kept probabilities renormalised; one draw of rng. Zeroed fields: greedy. */
typedef struct NnSampling {
    double temperature;
    int top_k;
    double top_p;
} NnSampling;
/* logits (V), none NaN or +inf (and not all -inf when drawing) -> a token in [0, V) */
int nn_sample(const Real *logits, int V, const NnSampling *s, Rng *rng);
/* The cross-entropy of one position's logits (V) against target, in double: log sum_v
 * e^(logits[v] - max) + max - logits[target] (nats; what ag_cross_entropy gives a row, without a
 * tape: records and evaluations that read logits) */
double nn_token_loss(const Real *logits, int V, int target);

/* ---- incremental decoding: one token per step, reusing cached keys and values ----
 * nn_decode_begin projects the memory into every layer's cross-attention keys and values once
 * (kept in the state's own arena); each nn_decode_step embeds one token per batch row at the
 * next position and runs the decoder on it alone, attending over the cache. Greedy decoding of
 * T tokens is then T steps of O(1) new positions each, and step i's logits equal position i of
 * the full nn_seq2seq_decode. Steps run in no-grad mode; the caller may reset its tape between
 * steps (the state does not live there). */
typedef struct NnDecodeState {
    int B, S, max_T, pos;
    Arena *arena;
    AgMask src_pad;
    Tensor *mem_k[NN_MAX_LAYERS], *mem_v[NN_MAX_LAYERS];
    NnKVCache self[NN_MAX_LAYERS];
} NnDecodeState;
/* memory (B, S, C) from nn_seq2seq_encode of src (B, S) */
void nn_decode_begin(NnDecodeState *s, Seq2Seq *m, Tensor *memory, const int *src, int B, int S,
                     int max_T);
/* tokens (B): the token at position s->pos of each row -> logits (B, 1, V) */
Tensor *nn_decode_step(Tape *t, Seq2Seq *m, NnDecodeState *s, const int *tokens);
void nn_decode_end(NnDecodeState *s);

/* ---- a translation with the cache (seq2seq_search.c) ----
 * src (B, S): rows as nn_seq2seq_encode reads them (a sentence's tokens, its end token, then
 * pad_id). Every row starts from the token bos; pad_id and bos are never chosen; a row ends at
 * eos, or after max_T - 1 tokens (max_T <= max_len). No-grad; both reset the tape t. A logit
 * that is not finite (finite weights that overflow) gives AG_ERR_RANGE naming it ("the
 * decoder's logits[i] = inf: must be finite", and where it began when t's check mode saw it).
 * nn_seq2seq_greedy: the most likely token at each step (the lowest id on ties), a batch at a
 * time: row b's tokens (without bos and eos) in out[b * max_T ...], their count in lens[b];
 * AG_OK (the decoding runs to its end even after a bad logit) or AG_ERR_RANGE.
 * nn_seq2seq_beam: beam search of one row (B = 1) with K beams (1..64; K = 1 is greedy),
 * hypotheses ranked by log-probability / ((5 + len) / 6)^alpha (GNMT's length penalty, alpha
 * >= 0; 0: plain log-probability): the best one's tokens in out (max_T), returns their count,
 * or AG_ERR_RANGE. */
int nn_seq2seq_greedy(Tape *t, Seq2Seq *m, const int *src, int B, int S, int bos, int eos,
                      int max_T, int *out, int *lens);
int nn_seq2seq_beam(Tape *t, Seq2Seq *m, const int *src, int S, int bos, int eos, int K, int max_T,
                    double alpha, int *out);

#endif
