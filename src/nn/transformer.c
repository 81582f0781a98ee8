/* transformer.c: encoder and decoder layers (post-LN or pre-LN), the stacks with their final
 * norms, and the seq2seq model with embeddings, positions and the generator. Names follow
 * torch.nn.Transformer's state_dict. The layers run on (B, T, C) batches, or on their live rows
 * packed (n, C) with a row map (NnRows): nn_seq2seq_loss packs, encode and decode do not.
 * nn_seq2seq_forward_hooked runs encode and decode with hooks (hooks.h) at TransformerLens's
 * points, under "encoder." and "decoder."; without hooks each point is one branch.
 * The seq2seq's configuration in a checkpoint: nn_seq2seq_ckpt_config.
 * Not here: attention itself (attention.c), the hook points' names (hooks.c). */
#include "hooks.h"
#include "nn.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x + dropout(f): the residual branch of every sub-layer */
static Tensor *residual(Tape *t, Tensor *x, Tensor *f, double p, Rng *rng) {
    return ag_add(t, x, ag_dropout(t, f, p, rng));
}

/* The end of a sub-layer: post-LN norm(x + dropout(f)) as one fused op, pre-LN x + dropout(f) */
static Tensor *residual_norm(Tape *t, Tensor *x, Tensor *f, double p, Rng *rng,
                             const LayerNorm *norm, int pre_ln) {
    return pre_ln ? residual(t, x, f, p, rng)
                  : nn_add_layernorm(t, norm, x, ag_dropout(t, f, p, rng));
}

/* ---- hook points (hooks.h): each a branch when the forward has no hooks ---- */

/* x, or what the hooks at (kind, l) of the part the forward is in make of it */
#define HOOK(h, kind, l, x) ((h) ? nn_hook_run(t, h, kind, l, x) : (x))

/* a pre-LN norm of x: ln(x), with the hooks of its scale (a kind) and hook_normalized (the
 * next kind: (x - mean) / scale before the weight and bias) */
static Tensor *pre_norm(Tape *t, NnHooks *h, const LayerNorm *ln, Tensor *x, NnHookKind scale,
                        int l) {
    return h ? nn_hook_norm(t, h, scale, l, x, ln->weight, ln->bias, ln->eps, 0)
             : nn_layernorm(t, ln, x);
}

/* The end of a sub-layer with its hooks: the branch f hooked as `out`, then residual_norm (a
 * post-LN norm with its hooks at `scale` and the next kind; the scale reads x + dropout(f),
 * computed apart only when hooked), the result hooked as `resid`. No hooks: residual_norm. */
static Tensor *sublayer_end(Tape *t, NnHooks *h, int l, Tensor *x, Tensor *f, double p, Rng *rng,
                            const LayerNorm *norm, int pre_ln, NnHookKind out, NnHookKind scale,
                            NnHookKind resid) {
    if (!h) return residual_norm(t, x, f, p, rng, norm, pre_ln);
    f = nn_hook_run(t, h, out, l, f);
    Tensor *y;
    if (pre_ln) {
        y = residual(t, x, f, p, rng);
    } else {
        Tensor *fd = ag_dropout(t, f, p, rng);
        if (nn_hooks_on(h, scale + 1, l)) /* hook_normalized before the weight and bias */
            return nn_hook_run(t, h, resid, l,
                               nn_hook_norm(t, h, scale, l, ag_add(t, x, fd), norm->weight,
                                            norm->bias, norm->eps, 0));
        if (nn_hooks_on(h, scale, l)) {
            Tensor *sum = tensor_new(t->arena, x->ndim, x->shape, "resid_sum");
            for (size_t i = 0; i < x->size; i++) sum->data[i] = x->data[i] + fd->data[i];
            nn_hook_norm_scale(t, h, scale, l, sum, norm->eps, 0);
        }
        y = nn_add_layernorm(t, norm, x, fd);
    }
    return nn_hook_run(t, h, resid, l, y);
}

/* the feed-forward with the hooks of mlp.hook_pre (linear1's output) and mlp.hook_post (after
 * the activation); without them nn_ffn (ReLU fused into linear1's product) */
static Tensor *ffn(Tape *t, NnHooks *h, int l, const FeedForward *f, Tensor *x, Rng *rng) {
    int pre = nn_hooks_on(h, NN_HOOK_MLP_PRE, l), post = nn_hooks_on(h, NN_HOOK_MLP_POST, l);
    if (!pre && !post) return nn_ffn(t, f, x, rng);
    Tensor *a;
    if (pre || f->act == NN_GELU) {
        a = nn_hook_run(t, h, NN_HOOK_MLP_PRE, l, nn_linear(t, &f->linear1, x));
        a = f->act == NN_GELU ? ag_gelu(t, a) : ag_relu(t, a);
    } else {
        a = ag_linear_relu(t, x, f->linear1.weight, f->linear1.bias);
    }
    a = nn_hook_run(t, h, NN_HOOK_MLP_POST, l, a);
    return nn_linear(t, &f->linear2, ag_dropout(t, a, f->dropout, rng));
}

/* an attention's hooks: self-attention (q NN_HOOK_Q) or cross (NN_HOOK_CROSS_Q) of layer l */
static NnHookAttn hook_attn(const MultiHeadAttention *m, int l, NnHookKind q) {
    return (NnHookAttn){.layer = l, .q = q, .n_heads = m->n_heads};
}

/* cfg with its zero fields set to their defaults (nn.h) */
static TransformerConfig layer_config(const TransformerConfig *cfg) {
    TransformerConfig c = *cfg;
    if (c.n_kv_heads == 0) c.n_kv_heads = c.n_heads;
    if (c.d_ff == 0) c.d_ff = 4 * c.d_model;
    if (c.ln_eps == 0) c.ln_eps = NN_LN_EPS;
    AG_CHECK(c.pre_ln == 0 || c.pre_ln == 1, "transformer layer: pre_ln %d is not 0 or 1",
             c.pre_ln);
    AG_CHECK(c.causal == 0 || c.causal == 1, "transformer layer: causal %d is not 0 or 1",
             c.causal);
    AG_CHECK(c.act == NN_RELU || c.act == NN_GELU,
             "transformer layer: act %d is not NN_RELU or NN_GELU", (int)c.act);
    return c;
}

/* The parts of a layer, in PyTorch's order: self_attn, multihead_attn (a decoder's, when
 * cross is given), linear1, linear2, norm1, norm2 and (a decoder's) norm3 */
static void layer_init(NnBuilder *b, const char *name, const TransformerConfig *cfg,
                       MultiHeadAttention *self_attn, MultiHeadAttention *cross, FeedForward *ffn,
                       LayerNorm *norms[3]) {
    TransformerConfig c = layer_config(cfg);
    NnBuilder s = nn_scope(b, "%s", name);
    MhaConfig mc = {.d_model = c.d_model,
                    .n_heads = c.n_heads,
                    .n_kv_heads = c.n_kv_heads,
                    .dropout = c.dropout};
    nn_mha_init(self_attn, &s, "self_attn", &mc);
    if (cross) nn_mha_init(cross, &s, "multihead_attn", &mc);
    nn_ffn_init(ffn, &s, "", c.d_model, c.d_ff, c.act, c.dropout);
    for (int i = 0; i < 3 && norms[i]; i++) {
        NnBuilder norm = nn_scope(&s, "norm%d", i + 1);
        nn_layernorm_init(norms[i], &norm, "", c.d_model, c.ln_eps);
    }
}

void nn_encoder_layer_init(EncoderLayer *l, NnBuilder *b, const char *name,
                           const TransformerConfig *cfg) {
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(cfg);
    layer_init(b, name, cfg, &l->self_attn, NULL, &l->ffn, (LayerNorm *[3]){&l->norm1, &l->norm2});
    l->dropout = cfg->dropout;
    l->pre_ln = cfg->pre_ln;
    l->causal = cfg->causal;
}

/* x (B, S, C), or (n, C) packed by rows when rows is given; hk: the hooks of layer li, or NULL
 * (with hooks the layer runs dense) */
static Tensor *encoder_layer(Tape *t, EncoderLayer *l, Tensor *x, const AgMask *src_pad,
                             const NnRows *rows, Rng *rng, NnHooks *hk, int li) {
    AG_CHECK(!hk || !rows, "encoder layer %d: hooks run on dense batches", li);
    x = HOOK(hk, NN_HOOK_RESID_PRE, li, x);
    Tensor *h = l->pre_ln ? pre_norm(t, hk, &l->norm1, x, NN_HOOK_LN1_SCALE, li) : x;
    AgAttnMask am = {.key_padding = src_pad, .causal = l->causal};
    NnHookAttn ha = hook_attn(&l->self_attn, li, NN_HOOK_Q);
    Tensor *a = hk ? nn_mha_forward_hooked(t, &l->self_attn, h, h, &am, rng, hk, &ha)
                   : nn_mha_forward_rows(t, &l->self_attn, h, rows, h, rows, &am, rng);
    x = sublayer_end(t, hk, li, x, a, l->dropout, rng, &l->norm1, l->pre_ln, NN_HOOK_ATTN_OUT,
                     NN_HOOK_LN1_SCALE, NN_HOOK_RESID_MID);
    h = l->pre_ln ? pre_norm(t, hk, &l->norm2, x, NN_HOOK_LN2_SCALE, li) : x;
    return sublayer_end(t, hk, li, x, ffn(t, hk, li, &l->ffn, h, rng), l->dropout, rng, &l->norm2,
                        l->pre_ln, NN_HOOK_MLP_OUT, NN_HOOK_LN2_SCALE, NN_HOOK_RESID_POST);
}

Tensor *nn_encoder_layer(Tape *t, EncoderLayer *l, Tensor *x, const AgMask *src_pad, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(x);
    return encoder_layer(t, l, x, src_pad, NULL, rng, NULL, 0);
}

void nn_decoder_layer_init(DecoderLayer *l, NnBuilder *b, const char *name,
                           const TransformerConfig *cfg) {
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(cfg);
    layer_init(b, name, cfg, &l->self_attn, &l->multihead_attn, &l->ffn,
               (LayerNorm *[3]){&l->norm1, &l->norm2, &l->norm3});
    l->dropout = cfg->dropout;
    l->pre_ln = cfg->pre_ln;
}

/* Where a decoder layer's keys and values come from: computed from the inputs (training, full
 * sequences, either (B, T, C) or packed by row maps), or from a cache of earlier positions and
 * precomputed memory heads (decoding). */
typedef struct {
    NnKVCache *cache;       /* self-attention cache, or NULL */
    Tensor *mem_k, *mem_v;  /* cross-attention heads (B, NKV, S, HS), or NULL */
    const NnRows *rows;     /* x packed (n, C) by this map, or NULL */
    const NnRows *mem_rows; /* memory packed (n_mem, C) by this map, or NULL */
} KVSource;

/* hk: the hooks of layer li, or NULL (with hooks the layer runs dense, without a cache) */
static Tensor *decoder_layer(Tape *t, DecoderLayer *l, Tensor *x, Tensor *memory,
                             const AgMask *tgt_pad, const AgMask *memory_pad, KVSource kv, Rng *rng,
                             NnHooks *hk, int li) {
    AG_CHECK(!hk || (!kv.cache && !kv.mem_k && !kv.rows && !kv.mem_rows),
             "decoder layer %d: hooks run on dense batches without a cache", li);
    double p = l->dropout;
    x = HOOK(hk, NN_HOOK_RESID_PRE, li, x);
    Tensor *h = l->pre_ln ? pre_norm(t, hk, &l->norm1, x, NN_HOOK_LN1_SCALE, li) : x;
    AgAttnMask self = {.key_padding = tgt_pad, .causal = 1};
    NnHookAttn ha = hook_attn(&l->self_attn, li, NN_HOOK_Q);
    NnHookAttn hc = hook_attn(&l->multihead_attn, li, NN_HOOK_CROSS_Q);
    Tensor *a = kv.cache ? nn_mha_forward_cached(t, &l->self_attn, kv.cache, h)
                : hk     ? nn_mha_forward_hooked(t, &l->self_attn, h, h, &self, rng, hk, &ha)
                     : nn_mha_forward_rows(t, &l->self_attn, h, kv.rows, h, kv.rows, &self, rng);
    x = sublayer_end(t, hk, li, x, a, p, rng, &l->norm1, l->pre_ln, NN_HOOK_ATTN_OUT,
                     NN_HOOK_LN1_SCALE, NN_HOOK_RESID_MID);
    h = l->pre_ln ? pre_norm(t, hk, &l->norm2, x, NN_HOOK_LN2_SCALE, li) : x;
    AgAttnMask cross = {.key_padding = memory_pad};
    a = kv.mem_k ? nn_mha_forward_kv(t, &l->multihead_attn, h, kv.mem_k, kv.mem_v, &cross, rng)
        : hk     ? nn_mha_forward_hooked(t, &l->multihead_attn, h, memory, &cross, rng, hk, &hc)
             : nn_mha_forward_rows(t, &l->multihead_attn, h, kv.rows, memory, kv.mem_rows, &cross,
                                   rng);
    x = sublayer_end(t, hk, li, x, a, p, rng, &l->norm2, l->pre_ln, NN_HOOK_CROSS_ATTN_OUT,
                     NN_HOOK_LN2_SCALE, NN_HOOK_RESID_MID_CROSS);
    h = l->pre_ln ? pre_norm(t, hk, &l->norm3, x, NN_HOOK_LN3_SCALE, li) : x;
    return sublayer_end(t, hk, li, x, ffn(t, hk, li, &l->ffn, h, rng), p, rng, &l->norm3, l->pre_ln,
                        NN_HOOK_MLP_OUT, NN_HOOK_LN3_SCALE, NN_HOOK_RESID_POST);
}

Tensor *nn_decoder_layer(Tape *t, DecoderLayer *l, Tensor *x, Tensor *memory, const AgMask *tgt_pad,
                         const AgMask *memory_pad, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(x);
    AG_CHECK_ARG(memory);
    return decoder_layer(t, l, x, memory, tgt_pad, memory_pad, (KVSource){0}, rng, NULL, 0);
}

/* ---- the seq2seq model ---- */

Seq2SeqConfig nn_seq2seq_default_config(int src_vocab, int tgt_vocab, int d_model, int n_heads,
                                        int n_layers) {
    Seq2SeqConfig c;
    memset(&c, 0, sizeof c);
    c.src_vocab = src_vocab;
    c.tgt_vocab = tgt_vocab;
    c.n_enc_layers = c.n_dec_layers = n_layers;
    c.max_len = 128;
    c.pad_id = 0;
    c.layer.d_model = d_model;
    c.layer.n_heads = c.layer.n_kv_heads = n_heads;
    c.layer.d_ff = 4 * d_model;
    c.layer.dropout = 0.1;
    c.layer.ln_eps = 1e-5;
    c.layer.act = NN_RELU;
    return c;
}

int nn_seq2seq_check_config(const Seq2SeqConfig *cfg, int64_t *n_params, int64_t *n_values) {
    AG_CHECK_ARG(cfg);
    Seq2SeqConfig c = *cfg;
    TransformerConfig *l = &c.layer;
    if (l->n_kv_heads == 0) l->n_kv_heads = l->n_heads; /* layer_config's defaults */
    if (l->d_ff == 0) l->d_ff = 4 * l->d_model;
    if (l->ln_eps == 0) l->ln_eps = NN_LN_EPS;
    if (c.src_vocab < 1 || c.tgt_vocab < 1 || c.max_len < 1 || l->d_model < 1 || l->d_ff < 1)
        return ag_fail(
            AG_ERR_FORMAT,
            "src_vocab %d, tgt_vocab %d, max_len %d, d_model %d and d_ff %d must be >= 1",
            c.src_vocab, c.tgt_vocab, c.max_len, l->d_model, l->d_ff);
    if (c.n_enc_layers < 0 || c.n_enc_layers > NN_MAX_LAYERS || c.n_dec_layers < 1 ||
        c.n_dec_layers > NN_MAX_LAYERS)
        return ag_fail(AG_ERR_FORMAT, "layers %d+%d outside [0, %d]+[1, %d]", c.n_enc_layers,
                       c.n_dec_layers, NN_MAX_LAYERS, NN_MAX_LAYERS);
    if (c.pad_id < 0 || c.pad_id >= c.src_vocab || c.pad_id >= c.tgt_vocab)
        return ag_fail(AG_ERR_FORMAT, "pad_id %d outside the vocabularies (%d, %d)", c.pad_id,
                       c.src_vocab, c.tgt_vocab);
    if ((c.learned_pos | c.tie_output | l->pre_ln) & ~1)
        return ag_fail(AG_ERR_FORMAT, "learned_pos, tie_output and pre_ln must be 0 or 1");
    if (l->causal != 0)
        return ag_fail(AG_ERR_FORMAT, "layer.causal %d: a seq2seq encoder is not causal",
                       l->causal);
    if (l->n_heads < 1 || l->d_model % l->n_heads != 0 || l->n_kv_heads < 1 ||
        l->n_heads % l->n_kv_heads != 0)
        return ag_fail(AG_ERR_FORMAT,
                       "n_heads %d must divide d_model %d, and n_kv_heads %d must divide n_heads",
                       l->n_heads, l->d_model, l->n_kv_heads);
    if (!(l->dropout >= 0 && l->dropout < 1) || !(l->ln_eps > 0 && isfinite(l->ln_eps)))
        return ag_fail(AG_ERR_FORMAT, "dropout %g must be in [0, 1) and ln_eps %g > 0", l->dropout,
                       l->ln_eps);
    if (l->act != NN_RELU && l->act != NN_GELU)
        return ag_fail(AG_ERR_FORMAT, "activation %d is not relu (%d) or gelu (%d)", (int)l->act,
                       (int)NN_RELU, (int)NN_GELU);
    /* The values nn_seq2seq_init allocates (doubles: every field is in range, so no product
     * overflows their exact integers), following nn_mha_init, nn_ffn_init, nn_layernorm_init. */
    double C = l->d_model, FF = l->d_ff, NH = l->n_heads, L = c.max_len;
    double Ckv = (double)l->n_kv_heads * (l->d_model / l->n_heads);
    /* in_proj (3C, C) and its bias, or q, k, v projections; out_proj */
    double mha =
        l->n_kv_heads == l->n_heads ? 4 * C * C + 4 * C : 2 * (C * C + C) + 2 * (Ckv * C + Ckv);
    double ffn = 2 * C * FF + FF + C, ln = 2 * C;
    double params = (c.src_vocab + (double)c.tgt_vocab) * C + (c.learned_pos ? 2 * L * C : 0) +
                    c.n_enc_layers * (mha + ffn + 2 * ln) + ln +
                    c.n_dec_layers * (2 * mha + ffn + 3 * ln) + ln +
                    (c.tie_output ? c.tgt_vocab : c.tgt_vocab * (C + 1));
    double tables = (c.learned_pos ? 0 : 2 * L * C) + NH * (c.n_enc_layers + 2.0 * c.n_dec_layers);
    const double big = 9.2e18; /* under INT64_MAX */
    if (n_params) *n_params = params < big ? (int64_t)params : (int64_t)big;
    if (n_values) *n_values = params + tables < big ? (int64_t)(params + tables) : (int64_t)big;
    return AG_OK;
}

/* The checkpoint's configuration: the fields of Seq2SeqConfig as meta.config.* entries (their
 * names are those of the files written before checkpoints were generic, so those still load). */
static const CkptField seq2seq_fields[] = {
    CKPT_CFG_INT(Seq2SeqConfig, src_vocab, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, tgt_vocab, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, n_enc_layers, 0, NN_MAX_LAYERS),
    CKPT_CFG_INT(Seq2SeqConfig, n_dec_layers, 1, NN_MAX_LAYERS),
    CKPT_CFG_INT(Seq2SeqConfig, max_len, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, pad_id, 0, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, learned_pos, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, tie_output, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, layer.d_model, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.n_heads, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.n_kv_heads, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.d_ff, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.pre_ln, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, layer.act, NN_RELU, NN_GELU),
    CKPT_CFG_FLOAT(Seq2SeqConfig, layer.dropout, 0, 1),
    CKPT_CFG_FLOAT(Seq2SeqConfig, layer.ln_eps, 1e-300, 1),
};

/* nn_seq2seq_check_config, and a model of at most CKPT_MAX_PARAMS values in all (the tables
 * nn_seq2seq_init allocates beside the parameters included) */
static int check_seq2seq(const void *values, int64_t *n_params) {
    int64_t n_values = 0;
    int rc = nn_seq2seq_check_config(values, n_params, &n_values);
    if (rc == AG_OK && n_values > CKPT_MAX_PARAMS)
        return ag_fail(AG_ERR_FORMAT,
                       "a model of %lld parameters and other values is over the limit of %lld "
                       "(CKPT_MAX_PARAMS)",
                       (long long)n_values, (long long)CKPT_MAX_PARAMS);
    return rc;
}

CkptConfig nn_seq2seq_ckpt_config(Seq2SeqConfig *cfg) {
    AG_CHECK_ARG(cfg);
    return (CkptConfig){"seq2seq", seq2seq_fields,
                        (int)(sizeof seq2seq_fields / sizeof seq2seq_fields[0]), cfg,
                        check_seq2seq};
}

void nn_seq2seq_init(Seq2Seq *m, Arena *a, Rng *rng, const Seq2SeqConfig *cfg) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(rng);
    AG_CHECK_ARG(cfg);
    AG_CHECK(cfg->n_enc_layers >= 0 && cfg->n_enc_layers <= NN_MAX_LAYERS &&
                 cfg->n_dec_layers >= 1 && cfg->n_dec_layers <= NN_MAX_LAYERS,
             "nn_seq2seq_init: layers %d+%d outside [0..%d]+[1..%d]", cfg->n_enc_layers,
             cfg->n_dec_layers, NN_MAX_LAYERS, NN_MAX_LAYERS);
    AG_CHECK(cfg->layer.causal == 0,
             "nn_seq2seq_init: layer.causal %d: a seq2seq encoder sees the whole source (causal "
             "encoder layers are for decoder-only models)",
             cfg->layer.causal);
    AG_CHECK(cfg->pad_id >= 0 && cfg->pad_id < cfg->src_vocab && cfg->pad_id < cfg->tgt_vocab,
             "nn_seq2seq_init: pad_id %d outside the vocabularies (%d, %d)", cfg->pad_id,
             cfg->src_vocab, cfg->tgt_vocab);
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->cfg.layer = layer_config(&cfg->layer); /* the defaults of its zero fields, resolved */
    cfg = &m->cfg;
    ag_params_init(&m->params);
    NnBuilder b = nn_builder(a, &m->params, rng);
    int C = cfg->layer.d_model;
    nn_embedding_init(&m->src_embed, &b, "src_embed", cfg->src_vocab, C, cfg->pad_id);
    nn_embedding_init(&m->tgt_embed, &b, "tgt_embed", cfg->tgt_vocab, C, cfg->pad_id);
    /* The forward scales embeddings by sqrt(d_model); with nn.Embedding's N(0, 1) that would
     * make them sqrt(d_model) times larger than the positions and drown them (a measured 46%
     * vs 92% exact match at step 1000 on the toy corpus, data/README.md). So the model starts
     * them at N(0, 1/d_model), as fairseq does: after scaling, unit size like the positions. */
    Embedding *embeds[2] = {&m->src_embed, &m->tgt_embed};
    for (int i = 0; i < 2; i++) {
        Tensor *w = embeds[i]->weight;
        for (size_t j = 0; j < w->size; j++) w->data[j] /= (Real)sqrt((double)C);
    }
    NnPositionKind pos = cfg->learned_pos ? NN_LEARNED : NN_SINUSOIDAL;
    nn_positional_init(&m->src_pos, &b, "src_pos", cfg->max_len, C, pos);
    nn_positional_init(&m->tgt_pos, &b, "tgt_pos", cfg->max_len, C, pos);
    for (int i = 0; i < cfg->n_enc_layers; i++) {
        NnBuilder layer = nn_scope(&b, "encoder.layers.%d", i);
        nn_encoder_layer_init(&m->enc[i], &layer, "", &cfg->layer);
    }
    nn_layernorm_init(&m->enc_norm, &b, "encoder.norm", C, cfg->layer.ln_eps);
    for (int i = 0; i < cfg->n_dec_layers; i++) {
        NnBuilder layer = nn_scope(&b, "decoder.layers.%d", i);
        nn_decoder_layer_init(&m->dec[i], &layer, "", &cfg->layer);
    }
    nn_layernorm_init(&m->dec_norm, &b, "decoder.norm", C, cfg->layer.ln_eps);
    if (cfg->tie_output) {
        /* generator.weight is the target embedding itself: one tensor, two uses, summed grads */
        m->generator.in = C;
        m->generator.out = cfg->tgt_vocab;
        m->generator.weight = m->tgt_embed.weight;
        m->generator.bias = nn_param(&b, "generator.bias", 1, (int[]){cfg->tgt_vocab});
    } else {
        nn_linear_init(&m->generator, &b, "generator", C, cfg->tgt_vocab, NN_BIAS);
    }
}

void nn_seq2seq_free(Seq2Seq *m) {
    AG_CHECK_ARG(m);
    ag_params_free(&m->params);
}

int nn_seq2seq_dropouts(Seq2Seq *m, double **p) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(p);
    int n = 0;
    p[n++] = &m->cfg.layer.dropout;
    for (int l = 0; l < m->cfg.n_enc_layers; l++) {
        p[n++] = &m->enc[l].dropout;
        p[n++] = &m->enc[l].self_attn.dropout;
        p[n++] = &m->enc[l].ffn.dropout;
    }
    for (int l = 0; l < m->cfg.n_dec_layers; l++) {
        p[n++] = &m->dec[l].dropout;
        p[n++] = &m->dec[l].self_attn.dropout;
        p[n++] = &m->dec[l].multihead_attn.dropout;
        p[n++] = &m->dec[l].ffn.dropout;
    }
    return n;
}

void nn_seq2seq_need_weights(Seq2Seq *m, int on) {
    AG_CHECK_ARG(m);
    AG_CHECK(on == 0 || on == 1, "nn_seq2seq_need_weights: on %d is not 0 or 1", on);
    for (int l = 0; l < m->cfg.n_enc_layers; l++) m->enc[l].self_attn.need_weights = on;
    for (int l = 0; l < m->cfg.n_dec_layers; l++)
        m->dec[l].self_attn.need_weights = m->dec[l].multihead_attn.need_weights = on;
}

AgMask nn_padding_mask(Tape *t, const int *ids, int B, int T, int pad_id) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(ids);
    uint8_t *mask = arena_alloc(t->arena, (size_t)B * T);
    for (size_t i = 0; i < (size_t)B * T; i++) mask[i] = ids[i] == pad_id;
    return (AgMask){mask, B, T};
}

/* embedding * sqrt(d_model) + positions, then dropout (as in the paper, section 5.4), then
 * the live rows when rows is given; with the hooks of hook_embed (the scaled embedding) and
 * hook_pos_embed. Without those hooks and with sinusoidal positions, one op
 * (ag_embedding_rows) does the lookup, scale and positions, and the live rows when there is no
 * dropout between: the same bits as the chain. */
static Tensor *embed(Tape *t, Seq2Seq *m, const Embedding *e, const PositionalEncoding *pe,
                     const int *ids, int B, int T, int start, const NnRows *rows, Rng *rng) {
    NnHooks *h = m->hooks;
    double s = sqrt((double)m->cfg.layer.d_model), p = m->cfg.layer.dropout;
    if (!nn_hooks_on(h, NN_HOOK_EMBED, -1) && !nn_hooks_on(h, NN_HOOK_POS_EMBED, -1) &&
        pe->kind == NN_SINUSOIDAL) {
        Tensor *pos = nn_positions(t, pe, start, T); /* (T, C) */
        int fuse_rows = rows && (p == 0 || t->no_grad);
        Tensor *x = ag_embedding_rows(t, e->weight, ids, B, T, e->padding_idx, s, pos,
                                      fuse_rows ? rows->idx : NULL, fuse_rows ? rows->n : 0);
        x = ag_dropout(t, x, p, rng);
        return rows && !fuse_rows ? ag_gather_rows(t, x, rows->idx, rows->n) : x;
    }
    Tensor *x = nn_embedding(t, e, ids, B, T);
    x = HOOK(h, NN_HOOK_EMBED, -1, ag_scale(t, x, s));
    if (nn_hooks_on(h, NN_HOOK_POS_EMBED, -1)) {
        /* the positions as a (B, T, C) tensor of their own: 0 + row, then x + it (same bits) */
        Tensor *zero = tensor_zeros(t->arena, 3, (int[]){B, T, m->cfg.layer.d_model}, "zeros");
        Tensor *pos = nn_positional(t, pe, zero, start);
        x = ag_add(t, x, nn_hook_run(t, h, NN_HOOK_POS_EMBED, -1, pos));
    } else {
        x = nn_positional(t, pe, x, start);
    }
    x = ag_dropout(t, x, p, rng);
    return rows ? ag_gather_rows(t, x, rows->idx, rows->n) : x;
}

/* The live rows of a (B, T) batch of ids: row r is live when a[r] or (if b is given) b[r] is
 * not pad. Fills *rows (its numbers in the tape's arena) and returns it, or returns NULL when
 * every row is live or none is: then the batch runs dense. */
static const NnRows *live_rows(Tape *t, NnRows *rows, const int *a, const int *b, int B, int T,
                               int pad) {
    int N = B * T;
    int *idx = arena_alloc(t->arena, (size_t)N * sizeof(int)), n = 0;
    for (int r = 0; r < N; r++)
        if (a[r] != pad || (b && b[r] != pad)) idx[n++] = r;
    *rows = (NnRows){idx, n, B, T};
    return n == 0 || n == N ? NULL : rows;
}

/* src (B, S) -> memory (B, S, C), or its live rows (n, C) packed by rows when given */
static Tensor *encode(Tape *t, Seq2Seq *m, const int *src, int B, int S, const AgMask *src_pad,
                      const NnRows *rows, Rng *rng) {
    if (m->hooks) m->hooks->stack = NN_HOOK_ENCODER;
    Tensor *x = embed(t, m, &m->src_embed, &m->src_pos, src, B, S, 0, rows, rng);
    for (int i = 0; i < m->cfg.n_enc_layers; i++)
        x = encoder_layer(t, &m->enc[i], x, src_pad, rows, rng, m->hooks, i);
    return pre_norm(t, m->hooks, &m->enc_norm, x, NN_HOOK_LNF_SCALE, -1);
}

/* tgt_in (B, T) and memory (from encode, packed by mem_rows or not) -> logits (B, T, V), or
 * the logits of the live rows (n, V) packed by rows when given */
static Tensor *decode(Tape *t, Seq2Seq *m, Tensor *memory, const NnRows *mem_rows,
                      const AgMask *src_pad, const int *tgt_in, int B, int T, const NnRows *rows,
                      Rng *rng) {
    AgMask tgt_pad = nn_padding_mask(t, tgt_in, B, T, m->cfg.pad_id);
    if (m->hooks) m->hooks->stack = NN_HOOK_DECODER;
    Tensor *x = embed(t, m, &m->tgt_embed, &m->tgt_pos, tgt_in, B, T, 0, rows, rng);
    KVSource kv = {NULL, NULL, NULL, rows, mem_rows};
    for (int i = 0; i < m->cfg.n_dec_layers; i++)
        x = decoder_layer(t, &m->dec[i], x, memory, &tgt_pad, src_pad, kv, rng, m->hooks, i);
    x = pre_norm(t, m->hooks, &m->dec_norm, x, NN_HOOK_LNF_SCALE, -1);
    return nn_linear(t, &m->generator, x);
}

Tensor *nn_seq2seq_encode(Tape *t, Seq2Seq *m, const int *src, int B, int S, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AgMask src_pad = nn_padding_mask(t, src, B, S, m->cfg.pad_id);
    return encode(t, m, src, B, S, &src_pad, NULL, rng);
}

Tensor *nn_seq2seq_decode(Tape *t, Seq2Seq *m, Tensor *memory, const int *src, int S,
                          const int *tgt_in, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(memory);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt_in);
    AgMask src_pad = nn_padding_mask(t, src, B, S, m->cfg.pad_id);
    return decode(t, m, memory, NULL, &src_pad, tgt_in, B, T, NULL, rng); /* (B, T, V) */
}

Tensor *nn_seq2seq_forward_hooked(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt_in,
                                  int B, int T, Rng *rng, NnHooks *hooks) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt_in);
    AG_CHECK_ARG(hooks);
    AG_CHECK(hooks->seq2seq && hooks->n_enc == m->cfg.n_enc_layers &&
                 hooks->n_dec == m->cfg.n_dec_layers,
             "nn_seq2seq_forward_hooked: hooks for %s of %d+%d layers, the model has %d+%d",
             hooks->seq2seq ? "a seq2seq model" : "a GPT", hooks->seq2seq ? hooks->n_enc : 0,
             hooks->n_layer, m->cfg.n_enc_layers, m->cfg.n_dec_layers);
    hooks->status = AG_OK;
    m->hooks = hooks; /* for this call only */
    AgMask src_pad = nn_padding_mask(t, src, B, S, m->cfg.pad_id);
    Tensor *memory = encode(t, m, src, B, S, &src_pad, NULL, rng);
    Tensor *logits = decode(t, m, memory, NULL, &src_pad, tgt_in, B, T, NULL, rng);
    m->hooks = NULL;
    hooks->stack = NN_HOOK_GPT;
    if (hooks->status != AG_OK) {
        ag_fail(hooks->status, "%s", hooks->error);
        return NULL;
    }
    return logits; /* (B, T, V) */
}

Tensor *nn_seq2seq_loss(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt_in,
                        const int *tgt_out, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt_in);
    AG_CHECK_ARG(tgt_out);
    int pad = m->cfg.pad_id;
    AgMask src_pad = nn_padding_mask(t, src, B, S, pad);
    /* dead rows: source padding (only ever a masked key), and target positions whose input is
     * padding (a masked key) and whose target is padding (ignored by the loss) */
    NnRows src_map, tgt_map;
    const NnRows *src_rows = live_rows(t, &src_map, src, NULL, B, S, pad);
    const NnRows *tgt_rows = live_rows(t, &tgt_map, tgt_in, tgt_out, B, T, pad);
    Tensor *memory = encode(t, m, src, B, S, &src_pad, src_rows, rng);
    Tensor *logits = decode(t, m, memory, src_rows, &src_pad, tgt_in, B, T, tgt_rows, rng);
    if (!tgt_rows) return ag_cross_entropy(t, logits, tgt_out, pad);
    int *targets = arena_alloc(t->arena, (size_t)tgt_rows->n * sizeof(int));
    for (int i = 0; i < tgt_rows->n; i++) targets[i] = tgt_out[tgt_rows->idx[i]];
    return ag_cross_entropy(t, logits, targets, pad); /* the same kept rows, the same mean */
}

/* ---- incremental decoding ---- */

void nn_decode_begin(NnDecodeState *s, Seq2Seq *m, Tensor *memory, const int *src, int B, int S,
                     int max_T) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(memory);
    AG_CHECK_ARG(src);
    AG_CHECK(memory != NULL && memory->ndim == 3 && memory->shape[0] == B &&
                 memory->shape[1] == S && memory->shape[2] == m->cfg.layer.d_model,
             "nn_decode_begin: memory %s must be (%d,%d,%d)", tensor_shape_str(memory), B, S,
             m->cfg.layer.d_model);
    AG_CHECK(max_T > 0 && max_T <= m->cfg.max_len, "nn_decode_begin: max_T %d outside [1, %d]",
             max_T, m->cfg.max_len);
    memset(s, 0, sizeof *s);
    s->B = B;
    s->S = S;
    s->max_T = max_T;
    int L = m->cfg.n_dec_layers;
    /* memory heads of every layer, plus the projections they come from, plus the mask */
    size_t bytes = (size_t)L * 6 * B * S * m->cfg.layer.d_model * sizeof(Real) + (1 << 16);
    s->arena = arena_new("decode", bytes);
    Tape *tape = ag_tape_new(s->arena);
    ag_no_grad(tape, 1);
    s->src_pad = nn_padding_mask(tape, src, B, S, m->cfg.pad_id);
    for (int i = 0; i < L; i++) {
        MultiHeadAttention *cross = &m->dec[i].multihead_attn;
        s->mem_k[i] = nn_mha_project_kv(tape, cross, memory, 0);
        s->mem_v[i] = nn_mha_project_kv(tape, cross, memory, 1);
        nn_kv_cache_init(&s->self[i], &m->dec[i].self_attn, B, max_T);
    }
    ag_tape_free(tape);
}

Tensor *nn_decode_step(Tape *t, Seq2Seq *m, NnDecodeState *s, const int *tokens) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(tokens);
    AG_CHECK(s->pos < s->max_T, "nn_decode_step: all %d positions are used", s->max_T);
    int prev = ag_no_grad(t, 1);
    Tensor *x = embed(t, m, &m->tgt_embed, &m->tgt_pos, tokens, s->B, 1, s->pos, NULL, NULL);
    for (int i = 0; i < m->cfg.n_dec_layers; i++) {
        KVSource kv = {&s->self[i], s->mem_k[i], s->mem_v[i], NULL, NULL};
        x = decoder_layer(t, &m->dec[i], x, NULL, NULL, &s->src_pad, kv, NULL, NULL, i);
    }
    x = nn_layernorm(t, &m->dec_norm, x);
    Tensor *logits = nn_linear(t, &m->generator, x); /* (B, 1, V) */
    s->pos++;
    ag_no_grad(t, prev);
    return logits;
}

void nn_decode_end(NnDecodeState *s) {
    AG_CHECK_ARG(s);
    for (int i = 0; i < NN_MAX_LAYERS; i++) nn_kv_cache_free(&s->self[i]);
    arena_free(s->arena);
    s->arena = NULL;
}
