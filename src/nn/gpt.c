/* gpt.c: the GPT of gpt.h, in the order of nanoGPT's model.py: the configuration's checks, the
 * parameters (init), the block (causal self-attention, MLP), the model's forward and loss, then
 * the cache of incremental decoding and the checkpoint's field table.
 * The attention of a block reads q, k and v where c_attn leaves them, side by side in its
 * (B, T, C + 2 n_kv_head hs) output (ag_attention with AG_ATTN_COLS): no head is copied apart.
 * Not here: the ops' math (../autograd), the general modules (nn.c, attention.c).
 * Next: ../../examples (programs that train one). */
#include "gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the head size and the width of c_attn's output: C queries, then the keys and the values */
static int head_size(const GptConfig *c) { return c->n_embd / c->n_head; }
static int n_kv(const GptConfig *c) { return c->n_kv_head ? c->n_kv_head : c->n_head; }
static int qkv_width(const GptConfig *c) { return c->n_embd + 2 * n_kv(c) * head_size(c); }

int nn_gpt_check_config(const GptConfig *c, int64_t *n_params) {
    AG_CHECK_ARG(c);
    if (c->vocab_size < 1 || c->block_size < 1 || c->n_embd < 1)
        return ag_fail(AG_ERR_FORMAT, "vocab_size %d, block_size %d and n_embd %d must be >= 1",
                       c->vocab_size, c->block_size, c->n_embd);
    if (c->n_layer < 1 || c->n_layer > NN_MAX_LAYERS)
        return ag_fail(AG_ERR_FORMAT, "n_layer %d outside [1, %d]", c->n_layer, NN_MAX_LAYERS);
    if (c->n_head < 1 || c->n_embd % c->n_head != 0 || c->n_kv_head < 0 || c->n_head % n_kv(c) != 0)
        return ag_fail(AG_ERR_FORMAT,
                       "n_head %d must divide n_embd %d, and n_kv_head %d (0: n_head) must "
                       "divide n_head",
                       c->n_head, c->n_embd, c->n_kv_head);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return ag_fail(AG_ERR_FORMAT, "dropout %g must be in [0, 1)", c->dropout);
    if ((c->no_bias | c->untied) & ~1)
        return ag_fail(AG_ERR_FORMAT, "no_bias %d and untied %d must be 0 or 1", c->no_bias,
                       c->untied);
    /* the values nn_gpt_init allocates (doubles: in range, no product overflows them) */
    double C = c->n_embd, W = qkv_width(c), V = c->vocab_size, bias = c->no_bias ? 0 : 1;
    double block = (W * C + W * bias) + (C * C + C * bias)               /* c_attn, c_proj */
                   + (4 * C * C + 4 * C * bias) + (4 * C * C + C * bias) /* c_fc, c_proj */
                   + 2 * (C + C * bias);                                 /* ln_1, ln_2 */
    double total = V * C + (double)c->block_size * C + c->n_layer * block + (C + C * bias) +
                   (c->untied ? V * C : 0);
    if (n_params) *n_params = (int64_t)total;
    return AG_OK;
}

/* ---- parameters ---- */

/* A LayerNorm with or without its bias (nanoGPT's LayerNorm(ndim, bias)) */
static void ln_init(LayerNorm *ln, NnBuilder *b, const char *name, int C, int no_bias) {
    NnBuilder s = nn_scope(b, "%s", name);
    ln->weight = nn_param(&s, "weight", 1, (int[]){C});
    ln->bias = no_bias ? NULL : nn_param(&s, "bias", 1, (int[]){C});
    tensor_fill(ln->weight, 1);
    ln->eps = NN_LN_EPS;
}

/* A Linear (out, in) with weight N(0, std), bias 0 */
static void linear_init(Linear *l, NnBuilder *b, const char *name, int in, int out, int no_bias,
                        double std) {
    nn_linear_init(l, b, name, in, out, no_bias ? NN_NO_BIAS : NN_BIAS);
    rng_fill_normal(b->rng, l->weight, 0, std);
    if (l->bias) tensor_fill(l->bias, 0);
}

void nn_gpt_init(Gpt *m, Arena *a, Rng *rng, const GptConfig *cfg) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(rng);
    AG_CHECK_ARG(cfg);
    AG_CHECK(nn_gpt_check_config(cfg, NULL) == AG_OK, "nn_gpt_init: %s", ag_last_error());
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const GptConfig *c = &m->cfg;
    int C = c->n_embd, nb = c->no_bias;
    double std = 0.02, proj_std = 0.02 / sqrt(2.0 * c->n_layer);
    NnBuilder top = nn_builder(a, &m->params, rng);
    NnBuilder tr = nn_scope(&top, "transformer");
    nn_embedding_init(&m->wte, &tr, "wte", c->vocab_size, C, NN_NO_PADDING);
    rng_fill_normal(rng, m->wte.weight, 0, std);
    nn_positional_init(&m->wpe, &tr, "wpe", c->block_size, C, NN_LEARNED);
    rng_fill_normal(rng, m->wpe.table, 0, std);
    for (int l = 0; l < c->n_layer; l++) {
        GptBlock *h = &m->h[l];
        NnBuilder hb = nn_scope(&tr, "h.%d", l);
        ln_init(&h->ln_1, &hb, "ln_1", C, nb);
        linear_init(&h->c_attn, &hb, "attn.c_attn", C, qkv_width(c), nb, std);
        linear_init(&h->c_proj, &hb, "attn.c_proj", C, C, nb, proj_std);
        ln_init(&h->ln_2, &hb, "ln_2", C, nb);
        linear_init(&h->c_fc, &hb, "mlp.c_fc", C, 4 * C, nb, std);
        linear_init(&h->mlp_proj, &hb, "mlp.c_proj", 4 * C, C, nb, proj_std);
    }
    ln_init(&m->ln_f, &tr, "ln_f", C, nb);
    if (c->untied)
        linear_init(&m->lm_head, &top, "lm_head", C, c->vocab_size, 1, std);
    else /* weight tying: the head reads the token embeddings (no parameter of its own) */
        m->lm_head = (Linear){.weight = m->wte.weight, .in = C, .out = c->vocab_size};
}

void nn_gpt_free(Gpt *m) {
    AG_CHECK_ARG(m);
    ag_params_free(&m->params);
}

/* ---- the block ---- */

static Tensor *cache_append(Tape *t, GptCache *c, int l, Tensor *qkv, int C);

/* x (B, T, C) -> causal self-attention (B, T, C): c_attn, attention over its columns (queries
 * at 0, keys at C, values after them), c_proj, dropout on the branch. With a cache the new
 * keys and values join it first, and the queries attend over all of it. */
static Tensor *attention(Tape *t, Gpt *m, int l, Tensor *x, GptCache *cache, Rng *rng) {
    const GptConfig *c = &m->cfg;
    GptBlock *h = &m->h[l];
    int C = c->n_embd, hs = head_size(c), NKV = n_kv(c);
    Tensor *qkv = nn_linear(t, &h->c_attn, x); /* (B, T, C + 2 NKV hs) */
    AgAttnLayout cols = {.kind = AG_ATTN_COLS, .heads = {c->n_head, NKV, hs, 0, C, C + NKV * hs}};
    Tensor *kv = qkv;
    if (cache) { /* (B, len, 2 NKV hs): keys at column 0, values at NKV hs */
        kv = cache_append(t, cache, l, qkv, C);
        cols.heads.k_col = 0, cols.heads.v_col = NKV * hs;
    }
    Tensor *y = ag_attention(t, qkv, kv, kv, &cols, AG_CAUSAL, c->dropout, rng, &m->last_probs[l]);
    return ag_dropout(t, nn_linear(t, &h->c_proj, y), c->dropout, rng); /* (B, T, C) */
}

/* x (B, T, C) -> the MLP (B, T, C): c_fc, GELU, c_proj, dropout */
static Tensor *mlp(Tape *t, Gpt *m, int l, Tensor *x, Rng *rng) {
    GptBlock *h = &m->h[l];
    Tensor *y = nn_linear(t, &h->mlp_proj, ag_gelu(t, nn_linear(t, &h->c_fc, x)));
    return ag_dropout(t, y, m->cfg.dropout, rng);
}

/* pre-LN: x + attn(ln_1(x)), then + mlp(ln_2(x)) */
static Tensor *block(Tape *t, Gpt *m, int l, Tensor *x, GptCache *cache, Rng *rng) {
    x = ag_add(t, x, attention(t, m, l, nn_layernorm(t, &m->h[l].ln_1, x), cache, rng));
    return ag_add(t, x, mlp(t, m, l, nn_layernorm(t, &m->h[l].ln_2, x), rng));
}

/* ---- the model ---- */

static void check_ids(const Gpt *m, const int *idx, int B, int T, int pos0, const char *fn) {
    AG_CHECK(B > 0 && T > 0 && pos0 + T <= m->cfg.block_size,
             "%s: (B, T) = (%d,%d) at position %d must fit block_size %d", fn, B, T, pos0,
             m->cfg.block_size);
    for (size_t i = 0; i < (size_t)B * T; i++)
        AG_CHECK(idx[i] >= 0 && idx[i] < m->cfg.vocab_size,
                 "%s: token %d at (%zu,%zu) outside [0, %d)", fn, idx[i], i / (size_t)T,
                 i % (size_t)T, m->cfg.vocab_size);
}

/* tokens (B, T) at positions [pos0, pos0 + T) -> logits (B, T, V) */
static Tensor *forward(Tape *t, Gpt *m, const int *idx, int B, int T, int pos0, GptCache *cache,
                       Rng *rng) {
    Tensor *x = nn_positional(t, &m->wpe, nn_embedding(t, &m->wte, idx, B, T), pos0);
    x = ag_dropout(t, x, m->cfg.dropout, rng);
    for (int l = 0; l < m->cfg.n_layer; l++) x = block(t, m, l, x, cache, rng);
    return nn_linear(t, &m->lm_head, nn_layernorm(t, &m->ln_f, x));
}

Tensor *nn_gpt_forward(Tape *t, Gpt *m, const int *idx, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(idx);
    check_ids(m, idx, B, T, 0, "nn_gpt_forward");
    return forward(t, m, idx, B, T, 0, NULL, rng); /* (B, T, V) */
}

Tensor *nn_gpt_loss(Tape *t, Gpt *m, const int *idx, const int *targets, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(idx);
    AG_CHECK_ARG(targets);
    return ag_cross_entropy(t, nn_gpt_forward(t, m, idx, B, T, rng), targets, -1);
}

/* ---- incremental decoding ---- */

void nn_gpt_cache_init(GptCache *c, const Gpt *m, int B, int max_T) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(m);
    AG_CHECK(B > 0 && max_T > 0 && max_T <= m->cfg.block_size,
             "nn_gpt_cache_init: B %d and max_T %d must be > 0, max_T <= block_size %d", B, max_T,
             m->cfg.block_size);
    memset(c, 0, sizeof *c);
    c->B = B, c->max_T = max_T, c->n_layer = m->cfg.n_layer;
    c->width = 2 * n_kv(&m->cfg) * head_size(&m->cfg);
    for (int l = 0; l < c->n_layer; l++) {
        c->kv[l] = calloc((size_t)B * max_T * c->width, sizeof(Real));
        AG_CHECK(c->kv[l], "nn_gpt_cache_init: out of memory for (%d, %d, %d) values", B, max_T,
                 c->width);
    }
}

void nn_gpt_cache_free(GptCache *c) {
    AG_CHECK_ARG(c);
    for (int l = 0; l < c->n_layer; l++) free(c->kv[l]);
    memset(c, 0, sizeof *c);
}

/* Appends the new positions' keys and values (columns [C, C + width) of qkv (B, T, C + width),
 * c_attn's output) to layer l's cache; -> the layer's cache (B, len + T, width) as a tensor in
 * the tape's arena. */
static Tensor *cache_append(Tape *t, GptCache *c, int l, Tensor *qkv, int C) {
    int B = c->B, T = qkv->shape[1], W = c->width, len = c->len + T;
    Tensor *kv = tensor_new3(t->arena, B, len, W, "kv_cache");
    for (int b = 0; b < B; b++) {
        Real *dst = c->kv[l] + (size_t)b * c->max_T * W;
        for (int i = 0; i < T; i++)
            memcpy(dst + (size_t)(c->len + i) * W, qkv->data + ((size_t)b * T + i) * (C + W) + C,
                   (size_t)W * sizeof(Real));
        memcpy(kv->data + (size_t)b * len * W, dst, (size_t)len * W * sizeof(Real));
    }
    return kv;
}

Tensor *nn_gpt_forward_cached(Tape *t, Gpt *m, GptCache *c, const int *idx, int B, int T) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(idx);
    AG_CHECK(B == c->B && T > 0 && c->len + T <= c->max_T && c->n_layer == m->cfg.n_layer,
             "nn_gpt_forward_cached: (B, T) = (%d,%d) does not fit the cache (B %d, %d of %d "
             "positions used, %d layers for %d)",
             B, T, c->B, c->len, c->max_T, c->n_layer, m->cfg.n_layer);
    check_ids(m, idx, B, T, c->len, "nn_gpt_forward_cached");
    int was = t->no_grad;
    ag_no_grad(t, 1); /* as in evaluation: no dropout, no tape */
    Tensor *logits = forward(t, m, idx, B, T, c->len, c, NULL);
    ag_no_grad(t, was);
    c->len += T;
    return logits;
}

int nn_gpt_generate(Tape *t, Gpt *m, int *ids, int n, int max_new, const NnSampling *s, Rng *rng,
                    int (*on_token)(int token, void *ctx), void *ctx) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(s);
    AG_CHECK(n >= 1 && max_new >= 0, "nn_gpt_generate: n %d must be >= 1 and max_new %d >= 0", n,
             max_new);
    int block = m->cfg.block_size, V = m->cfg.vocab_size, added = 0;
    GptCache c;
    nn_gpt_cache_init(&c, m, 1, block);
    int T = n < block ? n : block; /* the context: the last T tokens */
    ag_tape_reset(t);
    Tensor *logits = nn_gpt_forward_cached(t, m, &c, ids + n - T, 1, T);
    while (added < max_new) {
        int tok = nn_sample(logits->data + (size_t)(T - 1) * V, V, s, rng);
        ids[n++] = tok, added++;
        if ((on_token && on_token(tok, ctx)) || added == max_new) break;
        ag_tape_reset(t);
        T = c.len < block ? 1 : block; /* the new token alone, or the whole window again */
        if (T == block) c.len = 0;
        logits = nn_gpt_forward_cached(t, m, &c, ids + n - T, 1, T);
    }
    nn_gpt_cache_free(&c);
    return added;
}

/* ---- the checkpoint's configuration ---- */

#define GPT_INT(f, lo, hi) CKPT_CFG_INT(GptConfig, f, lo, hi)
static const CkptField gpt_fields[] = {
    GPT_INT(vocab_size, 1, 1 << 24),
    GPT_INT(block_size, 1, 1 << 20),
    GPT_INT(n_layer, 1, NN_MAX_LAYERS),
    GPT_INT(n_head, 1, 1024),
    GPT_INT(n_embd, 1, 1 << 16),
    GPT_INT(n_kv_head, 0, 1024),
    CKPT_CFG_FLOAT(GptConfig, dropout, 0, 0.99),
    GPT_INT(no_bias, 0, 1),
    GPT_INT(untied, 0, 1),
};

static int check_values(const void *values, int64_t *n_params) {
    return nn_gpt_check_config(values, n_params);
}

CkptConfig nn_gpt_ckpt_config(GptConfig *cfg) {
    AG_CHECK_ARG(cfg);
    return (CkptConfig){"gpt", gpt_fields, (int)(sizeof gpt_fields / sizeof gpt_fields[0]), cfg,
                        check_values};
}
