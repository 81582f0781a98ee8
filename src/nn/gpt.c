/* gpt.c: the GPT of gpt.h, in the order of nanoGPT's model.py: the configuration's checks, the
 * parameters (init, in the style's names), the block (causal self-attention with learned,
 * rotary (whole or partial) or no positions; a GELU (exact or tanh), ReLU, SwiGLU or no MLP;
 * pre- or post-LN, or GPT-NeoX's parallel attention and MLP), the model's forward and loss, then the cache of incremental decoding, generation and the checkpoint's field table.
 * Each option is read through one helper (pos_kind, norm_kind, mlp_kind, has_bias): zero
 * there means the style's choice.
 * The attention of a block reads q, k and v where c_attn leaves them, side by side in its
 * (B, T, C + 2 n_kv_head hs) output (ag_attention with AG_ATTN_COLS): no head is copied apart.
 * Not here: the ops' math (../autograd), the general modules (nn.c, attention.c).
 * Next: ../../examples (programs that train one). */
#include "gpt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the head size, the key/value heads, the width of c_attn's output (C queries, then the keys
 * and the values), the options (zero: the style's choice), the MLP's width and the norms' eps */
static int head_size(const GptConfig *c) { return c->n_embd / c->n_head; }
static int n_kv(const GptConfig *c) { return c->n_kv_head ? c->n_kv_head : c->n_head; }
static int qkv_width(const GptConfig *c) { return c->n_embd + 2 * n_kv(c) * head_size(c); }
static int llama(const GptConfig *c) { return c->style == NN_LLAMA; }
static NnGptPos pos_kind(const GptConfig *c) {
    return c->pos ? c->pos : llama(c) ? NN_GPT_POS_ROPE : NN_GPT_POS_LEARNED;
}
static NnGptNorm norm_kind(const GptConfig *c) {
    return c->norm ? c->norm : llama(c) ? NN_GPT_NORM_RMS : NN_GPT_NORM_LAYER;
}
static NnGptMlp mlp_kind(const GptConfig *c) {
    return c->mlp ? c->mlp : llama(c) ? NN_GPT_MLP_SWIGLU : NN_GPT_MLP_GELU;
}
static int has_bias(const GptConfig *c) {
    return c->bias ? c->bias == NN_GPT_BIAS_ON : !c->no_bias && !llama(c);
}
static int ffn_width(const GptConfig *c) {
    if (mlp_kind(c) == NN_GPT_MLP_NONE) return 0;
    if (c->ffn_hidden) return c->ffn_hidden;
    if (mlp_kind(c) != NN_GPT_MLP_SWIGLU) return 4 * c->n_embd; /* GELU, ReLU, GELU tanh */
    int h = 2 * (4 * c->n_embd) / 3;
    return (h + 31) / 32 * 32;
}
static double norm_eps(const GptConfig *c) { return c->norm_eps ? c->norm_eps : NN_LN_EPS; }
/* the columns of each head that rotary positions turn */
static int rot_dims(const GptConfig *c) { return c->rotary_dim ? c->rotary_dim : head_size(c); }

GptConfig nn_gpt_options(const GptConfig *c) {
    AG_CHECK_ARG(c);
    AG_CHECK(nn_gpt_check_config(c, NULL) == AG_OK, "nn_gpt_options: %s", ag_last_error());
    GptConfig r = *c;
    r.pos = pos_kind(c), r.norm = norm_kind(c), r.mlp = mlp_kind(c);
    r.bias = has_bias(c) ? NN_GPT_BIAS_ON : NN_GPT_BIAS_OFF, r.no_bias = !has_bias(c);
    r.n_kv_head = n_kv(c), r.ffn_hidden = ffn_width(c), r.norm_eps = norm_eps(c);
    r.rope_base = c->rope_base ? c->rope_base : 10000;
    r.rotary_dim = pos_kind(c) == NN_GPT_POS_ROPE ? rot_dims(c) : 0;
    return r;
}

/* x, or what the hooks of the current nn_gpt_forward_hooked call at (kind, l) make of it
 * (hooks.h; one branch when there are none) */
#define HOOK(kind, l, x) (m->hooks ? nn_hook_run(t, m->hooks, kind, l, x) : (x))

int nn_gpt_check_config(const GptConfig *c, int64_t *n_params) {
    AG_CHECK_ARG(c);
    if (c->style != NN_GPT2 && c->style != NN_LLAMA)
        return ag_fail(AG_ERR_FORMAT, "style %d is not NN_GPT2 (%d) or NN_LLAMA (%d)",
                       (int)c->style, (int)NN_GPT2, (int)NN_LLAMA);
    if ((unsigned)c->pos > NN_GPT_POS_NONE || (unsigned)c->norm > NN_GPT_NORM_NONE ||
        (unsigned)c->mlp > NN_GPT_MLP_LAST || (unsigned)c->bias > NN_GPT_BIAS_OFF ||
        (c->post_ln & ~1))
        return ag_fail(AG_ERR_FORMAT,
                       "pos %d and norm %d must be in [0, 3], mlp %d in [0, %d], bias %d in "
                       "[0, 2] and post_ln %d 0 or 1",
                       (int)c->pos, (int)c->norm, (int)c->mlp, (int)NN_GPT_MLP_LAST, (int)c->bias,
                       c->post_ln);
    if (c->vocab_size < 1 || c->block_size < 1 || c->n_embd < 1)
        return ag_fail(AG_ERR_FORMAT, "vocab_size %d, block_size %d and n_embd %d must be >= 1",
                       c->vocab_size, c->block_size, c->n_embd);
    if (c->n_layer < 1 || c->n_layer > NN_GPT_MAX_LAYERS)
        return ag_fail(AG_ERR_FORMAT,
                       "n_layer %d outside [1, %d] (%d: a build limit, NN_GPT_MAX_LAYERS in "
                       "src/nn/nn.h)",
                       c->n_layer, NN_GPT_MAX_LAYERS, NN_GPT_MAX_LAYERS);
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
    if (c->no_bias && c->bias == NN_GPT_BIAS_ON)
        return ag_fail(AG_ERR_FORMAT, "no_bias 1 contradicts bias NN_GPT_BIAS_ON");
    if (c->ffn_hidden < 0 || !(c->rope_base >= 0 && isfinite(c->rope_base)) ||
        !(c->norm_eps >= 0 && c->norm_eps < 1))
        return ag_fail(AG_ERR_FORMAT,
                       "ffn_hidden %d must be >= 0, rope_base %g >= 0 and norm_eps %g in [0, 1)",
                       c->ffn_hidden, c->rope_base, c->norm_eps);
    if (pos_kind(c) == NN_GPT_POS_ROPE && head_size(c) % 2 != 0)
        return ag_fail(AG_ERR_FORMAT, "head size %d (n_embd %d / n_head %d) must be even for RoPE",
                       head_size(c), c->n_embd, c->n_head);
    if (c->rotary_dim != 0 && (pos_kind(c) != NN_GPT_POS_ROPE || c->rotary_dim < 0 ||
                               c->rotary_dim % 2 != 0 || c->rotary_dim > head_size(c)))
        return ag_fail(AG_ERR_FORMAT,
                       "rotary_dim %d must be 0 (the whole head), or even, > 0 and <= the head "
                       "size %d with rotary positions (pos %d)",
                       c->rotary_dim, head_size(c), (int)pos_kind(c));
    if (c->parallel_residual & ~1)
        return ag_fail(AG_ERR_FORMAT, "parallel_residual %d must be 0 or 1", c->parallel_residual);
    if (c->parallel_residual && (c->post_ln || mlp_kind(c) == NN_GPT_MLP_NONE))
        return ag_fail(AG_ERR_FORMAT,
                       "parallel_residual 1 needs pre-LN blocks with an MLP (post_ln %d, mlp %d)",
                       c->post_ln, (int)mlp_kind(c));
    /* the values nn_gpt_init allocates (doubles: in range, no product overflows them) */
    double C = c->n_embd, W = qkv_width(c), V = c->vocab_size, H = ffn_width(c);
    double b = has_bias(c), nb = norm_kind(c) == NN_GPT_NORM_NONE  ? 0
                                 : norm_kind(c) == NN_GPT_NORM_RMS ? 1
                                                                   : 1 + b; /* a norm's vectors */
    double attn = W * C + W * b + C * C + C * b; /* c_attn (wq, wk, wv), c_proj (wo) */
    double mlp = mlp_kind(c) == NN_GPT_MLP_SWIGLU ? 3 * H * C + 2 * H * b + C * b
                 : H > 0 ? 2 * H * C + H * b + C * b /* GELU, ReLU, GELU tanh */
                         : 0;
    double norms = (mlp_kind(c) == NN_GPT_MLP_NONE ? 1 : 2) * nb * C; /* ln_1, ln_2 */
    double total = V * C + c->n_layer * (attn + mlp + norms) + (c->post_ln ? 0 : nb * C) +
                   (pos_kind(c) == NN_GPT_POS_LEARNED ? (double)c->block_size * C : 0) +
                   (c->untied ? V * C : 0);
    if (n_params) *n_params = (int64_t)total;
    return AG_OK;
}

/* ---- parameters ---- */

/* A norm: a LayerNorm with or without its bias (nanoGPT's LayerNorm(ndim, bias)), or the
 * weight of an RMSNorm (no bias) */
static void ln_init(LayerNorm *ln, NnBuilder *b, const char *name, int C, int no_bias, double eps) {
    NnBuilder s = nn_scope(b, "%s", name);
    ln->weight = nn_param(&s, "weight", 1, (int[]){C});
    ln->bias = no_bias ? NULL : nn_param(&s, "bias", 1, (int[]){C});
    tensor_fill(ln->weight, 1);
    ln->eps = eps;
}

/* w N(0, std) from b's stream; nothing drawn (w stays as it is) with no stream
 * (nn_gpt_init_unset) */
static void normal(NnBuilder *b, Tensor *w, double std) {
    if (b->rng) rng_fill_normal(b->rng, w, 0, std);
}

/* A Linear (out, in) with weight N(0, std), bias 0 */
static void linear_init(Linear *l, NnBuilder *b, const char *name, int in, int out, int no_bias,
                        double std) {
    nn_linear_init(l, b, name, in, out, no_bias ? NN_NO_BIAS : NN_BIAS);
    normal(b, l->weight, std);
    if (l->bias) tensor_fill(l->bias, 0);
}

/* LLaMA's parameters (Meta's names), initialised as llama2.c's model.py */
static void llama_init(Gpt *m, NnBuilder *top, double std, double proj_std) {
    const GptConfig *c = &m->cfg;
    int C = c->n_embd, KV = n_kv(c) * head_size(c), H = ffn_width(c), nb = !has_bias(c);
    int nn = norm_kind(c) == NN_GPT_NORM_NONE, lnb = nb || norm_kind(c) == NN_GPT_NORM_RMS;
    int swiglu = mlp_kind(c) == NN_GPT_MLP_SWIGLU;
    nn_embedding_init(&m->wte, top, "tok_embeddings", c->vocab_size, C, NN_NO_PADDING);
    normal(top, m->wte.weight, std);
    if (pos_kind(c) == NN_GPT_POS_LEARNED) {
        nn_positional_init(&m->wpe, top, "pos_embeddings", c->block_size, C, NN_LEARNED);
        normal(top, m->wpe.table, std);
    }
    for (int l = 0; l < c->n_layer; l++) {
        GptBlock *h = &m->h[l];
        NnBuilder hb = nn_scope(top, "layers.%d", l);
        linear_init(&h->wq, &hb, "attention.wq", C, C, nb, std);
        linear_init(&h->wk, &hb, "attention.wk", C, KV, nb, std);
        linear_init(&h->wv, &hb, "attention.wv", C, KV, nb, std);
        linear_init(&h->c_proj, &hb, "attention.wo", C, C, nb, proj_std);
        if (H) { /* w3 takes the residual's scale, as llama2.c; w2 without it */
            linear_init(&h->c_fc, &hb, "feed_forward.w1", C, H, nb, std);
            linear_init(&h->mlp_proj, &hb, "feed_forward.w2", H, C, nb, swiglu ? std : proj_std);
            if (swiglu) linear_init(&h->w3, &hb, "feed_forward.w3", C, H, nb, proj_std);
        }
        if (!nn) ln_init(&h->ln_1, &hb, "attention_norm", C, lnb, norm_eps(c));
        if (!nn && H) ln_init(&h->ln_2, &hb, "ffn_norm", C, lnb, norm_eps(c));
    }
    if (!nn && !c->post_ln) ln_init(&m->ln_f, top, "norm", C, lnb, norm_eps(c));
    if (c->untied) linear_init(&m->lm_head, top, "output", C, c->vocab_size, 1, std);
}

/* GPT-2's parameters (nanoGPT's names), initialised as nanoGPT's model.py */
static void gpt2_init(Gpt *m, NnBuilder *top, double std, double proj_std) {
    const GptConfig *c = &m->cfg;
    int C = c->n_embd, H = ffn_width(c), nb = !has_bias(c);
    int nn = norm_kind(c) == NN_GPT_NORM_NONE, lnb = nb || norm_kind(c) == NN_GPT_NORM_RMS;
    NnBuilder tr = nn_scope(top, "transformer");
    nn_embedding_init(&m->wte, &tr, "wte", c->vocab_size, C, NN_NO_PADDING);
    normal(top, m->wte.weight, std);
    if (pos_kind(c) == NN_GPT_POS_LEARNED) {
        nn_positional_init(&m->wpe, &tr, "wpe", c->block_size, C, NN_LEARNED);
        normal(top, m->wpe.table, std);
    }
    for (int l = 0; l < c->n_layer; l++) {
        GptBlock *h = &m->h[l];
        NnBuilder hb = nn_scope(&tr, "h.%d", l);
        if (!nn) ln_init(&h->ln_1, &hb, "ln_1", C, lnb, norm_eps(c));
        linear_init(&h->c_attn, &hb, "attn.c_attn", C, qkv_width(c), nb, std);
        linear_init(&h->c_proj, &hb, "attn.c_proj", C, C, nb, proj_std);
        if (!H) continue; /* attention only */
        if (!nn) ln_init(&h->ln_2, &hb, "ln_2", C, lnb, norm_eps(c));
        linear_init(&h->c_fc, &hb, "mlp.c_fc", C, H, nb, std);
        if (mlp_kind(c) == NN_GPT_MLP_SWIGLU) linear_init(&h->w3, &hb, "mlp.c_up", C, H, nb, std);
        linear_init(&h->mlp_proj, &hb, "mlp.c_proj", H, C, nb, proj_std);
    }
    if (!nn && !c->post_ln) ln_init(&m->ln_f, &tr, "ln_f", C, lnb, norm_eps(c));
    if (c->untied) linear_init(&m->lm_head, top, "lm_head", C, c->vocab_size, 1, std);
}

/* nn_gpt_init, or with rng NULL nn_gpt_init_unset (nothing drawn) */
static void gpt_init(Gpt *m, Arena *a, Rng *rng, const GptConfig *cfg, const char *fn) {
    AG_CHECK(nn_gpt_check_config(cfg, NULL) == AG_OK, "%s: %s", fn, ag_last_error());
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    int L = cfg->n_layer;
    m->h = arena_alloc(a, (size_t)L * sizeof *m->h);
    m->last_probs = arena_alloc(a, (size_t)L * sizeof *m->last_probs);
    memset(m->h, 0, (size_t)L * sizeof *m->h);
    memset(m->last_probs, 0, (size_t)L * sizeof *m->last_probs);
    double std = 0.02, proj_std = 0.02 / sqrt(2.0 * cfg->n_layer);
    NnBuilder top = nn_builder(a, &m->params, rng);
    if (cfg->style == NN_LLAMA)
        llama_init(m, &top, std, proj_std);
    else
        gpt2_init(m, &top, std, proj_std);
    if (!cfg->untied) /* weight tying: the head reads the token embeddings (no parameter) */
        m->lm_head = (Linear){.weight = m->wte.weight, .in = cfg->n_embd, .out = cfg->vocab_size};
}

void nn_gpt_init(Gpt *m, Arena *a, Rng *rng, const GptConfig *cfg) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(rng);
    AG_CHECK_ARG(cfg);
    gpt_init(m, a, rng, cfg, "nn_gpt_init");
}

void nn_gpt_init_unset(Gpt *m, Arena *a, const GptConfig *cfg) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(cfg);
    gpt_init(m, a, NULL, cfg, "nn_gpt_init_unset");
}

void nn_gpt_free(Gpt *m) {
    AG_CHECK_ARG(m);
    ag_params_free(&m->params);
}

/* ---- the block ---- */

/* The new positions' keys (columns [kcol, kcol + W/2) of k) and values (of v, from vcol) join
 * layer l's cache; -> the cache (B, len, W) as a tensor: keys at column 0, values at W/2. */
static Tensor *cache_append(Tape *t, GptCache *c, int l, const Tensor *k, int kcol, const Tensor *v,
                            int vcol);

/* causal attention of q over k and v, the heads at the columns heads says (AG_ATTN_COLS) */
static Tensor *attend(Tape *t, Gpt *m, int l, Tensor *q, Tensor *k, Tensor *v, AgHeads heads,
                      Rng *rng) {
    AgAttnLayout cols = {.kind = AG_ATTN_COLS, .heads = heads};
    return ag_attention(t, q, k, v, &cols, AG_CAUSAL, m->cfg.dropout, rng, &m->last_probs[l]);
}

/* GPT-2: x (B, T, C) at positions [pos0, pos0 + T) -> causal self-attention (B, T, C):
 * c_attn, attention over its columns (queries at 0, keys at C, values after them), c_proj,
 * dropout on the branch. RoPE turns the query and key columns in place (the values pass
 * through). With a cache the new keys and values join it first, and the queries attend over
 * all of it. */
static Tensor *hooked_attention(Tape *t, Gpt *m, int l, Tensor *x, int pos0, GptCache *cache,
                                Rng *rng);
static Tensor *attention(Tape *t, Gpt *m, int l, Tensor *x, int pos0, GptCache *cache, Rng *rng) {
    if (nn_hooks_explicit_attention(m->hooks, l))
        return hooked_attention(t, m, l, x, pos0, cache, rng);
    const GptConfig *c = &m->cfg;
    GptBlock *h = &m->h[l];
    int C = c->n_embd, hs = head_size(c), KV = n_kv(c) * hs;
    Tensor *qkv = nn_linear(t, &h->c_attn, x); /* (B, T, C + 2 KV) */
    AgHeads heads = {c->n_head, n_kv(c), hs, 0, C, C + KV};
    if (pos_kind(c) == NN_GPT_POS_ROPE) {
        AgRope rope = {.head_size = hs,
                       .pos0 = pos0,
                       .base = c->rope_base,
                       .n_cols = C + KV,
                       .keep = 1,
                       .rot_dims = c->rotary_dim};
        qkv = ag_rope(t, qkv, &rope); /* (B, T, C + 2 KV) */
    }
    Tensor *kv = qkv;
    if (cache) { /* (B, len, 2 KV): keys at column 0, values at KV */
        kv = cache_append(t, cache, l, qkv, C, qkv, C + KV);
        heads.k_col = 0, heads.v_col = KV;
    }
    Tensor *y = attend(t, m, l, qkv, kv, kv, heads, rng);
    if (m->hooks) y = nn_hook_heads(t, m->hooks, NN_HOOK_Z, l, y, c->n_head);
    return ag_dropout(t, nn_linear(t, &h->c_proj, y), c->dropout, rng); /* (B, T, C) */
}

/* The explicit attention of layer l (hooks.h) on q (B, T, C), k and v (B, T, KV) as the
 * projections leave them: hook_q, hook_k and hook_v (k and v with the key/value heads), then
 * with rotary positions the rotation from position pos0 and hook_rot_q, hook_rot_k
 * (TransformerLens's order); then, with a cache, the hooked keys and values join it and the
 * queries attend over all of it (decoding runs without gradients: the cache's copy is a plain
 * tensor) -> (B, T, C), z before its hooks */
static Tensor *explicit_attention(Tape *t, Gpt *m, int l, Tensor *q, Tensor *k, Tensor *v, int pos0,
                                  GptCache *cache, Rng *rng) {
    const GptConfig *c = &m->cfg;
    NnHookAttn at = {.layer = l,
                     .q = NN_HOOK_Q,
                     .n_heads = c->n_head,
                     .causal = 1,
                     .dropout = c->dropout,
                     .rng = rng,
                     .probs = &m->last_probs[l]};
    AG_CHECK(!cache || t->no_grad, "gpt: blocks.%d: the cached forward runs without gradients", l);
    q = nn_hook_heads(t, m->hooks, NN_HOOK_Q, l, q, c->n_head);
    k = nn_hook_heads(t, m->hooks, NN_HOOK_K, l, k, n_kv(c));
    v = nn_hook_heads(t, m->hooks, NN_HOOK_V, l, v, n_kv(c));
    if (pos_kind(c) == NN_GPT_POS_ROPE) {
        AgRope rope = {.head_size = head_size(c),
                       .pos0 = pos0,
                       .base = c->rope_base,
                       .rot_dims = c->rotary_dim};
        q = nn_hook_heads(t, m->hooks, NN_HOOK_ROT_Q, l, ag_rope(t, q, &rope), c->n_head);
        k = nn_hook_heads(t, m->hooks, NN_HOOK_ROT_K, l, ag_rope(t, k, &rope), n_kv(c));
    }
    if (!cache) return nn_hook_attend(t, m->hooks, &at, q, k, v);
    Tensor *kv = cache_append(t, cache, l, k, 0, v, 0); /* (B, len, 2 KV) */
    int B = kv->shape[0], len = kv->shape[1], W = kv->shape[2], half = W / 2;
    Tensor *ks = tensor_new3(t->arena, B, len, half, "kv_cache.k");
    Tensor *vs = tensor_new3(t->arena, B, len, half, "kv_cache.v");
    for (size_t r = 0; r < (size_t)B * len; r++) {
        memcpy(ks->data + r * half, kv->data + r * W, (size_t)half * sizeof(Real));
        memcpy(vs->data + r * half, kv->data + r * W + half, (size_t)half * sizeof(Real));
    }
    return nn_hook_attend(t, m->hooks, &at, q, ks, vs);
}

/* GPT-2's attention with a hook on q, k, v, rot_q, rot_k, the scores or the pattern (hooks.h):
 * q, k and v apart (c_attn's three row blocks), the attention as plain ops, z's hooks, c_proj */
static Tensor *hooked_attention(Tape *t, Gpt *m, int l, Tensor *x, int pos0, GptCache *cache,
                                Rng *rng) {
    const GptConfig *c = &m->cfg;
    Tensor *w = m->h[l].c_attn.weight, *b = m->h[l].c_attn.bias, *qkv[3];
    int C = c->n_embd, KV = n_kv(c) * head_size(c), row0[3] = {0, C, C + KV}, rows[3] = {C, KV, KV};
    for (int i = 0; i < 3; i++) /* (B, T, C), (B, T, KV) twice */
        qkv[i] = ag_linear(t, x, nn_param_rows_on(t, w, row0[i], rows[i], "c_attn.rows"),
                           b ? nn_param_rows_on(t, b, row0[i], rows[i], "c_attn.rows") : NULL);
    Tensor *y = explicit_attention(t, m, l, qkv[0], qkv[1], qkv[2], pos0, cache, rng);
    y = nn_hook_heads(t, m->hooks, NN_HOOK_Z, l, y, c->n_head);
    return ag_dropout(t, nn_linear(t, &m->h[l].c_proj, y), c->dropout, rng); /* (B, T, C) */
}

/* LLaMA: x (B, T, C) at positions [pos0, pos0 + T) -> attention (B, T, C): wq, wk and wv,
 * RoPE on queries and keys (Meta's; learned or no positions: none), attention (grouped-query),
 * wo, dropout */
static Tensor *llama_attention(Tape *t, Gpt *m, int l, Tensor *x, int pos0, GptCache *cache,
                               Rng *rng) {
    const GptConfig *c = &m->cfg;
    GptBlock *h = &m->h[l];
    int hs = head_size(c), KV = n_kv(c) * hs;
    Tensor *q = nn_linear(t, &h->wq, x); /* (B, T, C) */
    Tensor *k = nn_linear(t, &h->wk, x); /* (B, T, KV) */
    Tensor *v = nn_linear(t, &h->wv, x); /* (B, T, KV) */
    AgHeads heads = {c->n_head, n_kv(c), hs, 0, 0, 0};
    Tensor *y;
    if (nn_hooks_explicit_attention(m->hooks, l)) {
        y = explicit_attention(t, m, l, q, k, v, pos0, cache, rng);
    } else {
        if (pos_kind(c) == NN_GPT_POS_ROPE) {
            AgRope rope = {
                .head_size = hs, .pos0 = pos0, .base = c->rope_base, .rot_dims = c->rotary_dim};
            q = ag_rope(t, q, &rope), k = ag_rope(t, k, &rope);
        }
        if (cache) { /* the rotated keys are cached */
            k = v = cache_append(t, cache, l, k, 0, v, 0);
            heads.v_col = KV;
        }
        y = attend(t, m, l, q, k, v, heads, rng);
    }
    if (m->hooks) y = nn_hook_heads(t, m->hooks, NN_HOOK_Z, l, y, c->n_head);
    return ag_dropout(t, nn_linear(t, &h->c_proj, y), c->dropout, rng); /* (B, T, C) */
}

/* x (B, T, C) -> the MLP (B, T, C): GELU's c_proj(gelu(c_fc x)) (or gelu_tanh, GPT-2's
 * gelu_new), ReLU's c_proj(relu(c_fc x)),
 * or SwiGLU's w2(silu(w1 x) * w3 x) (c_fc is w1, mlp_proj w2); then dropout. hook_pre is
 * c_fc x, hook_post the activation's output (SwiGLU: the product) */
static Tensor *mlp(Tape *t, Gpt *m, int l, Tensor *x, Rng *rng) {
    GptBlock *h = &m->h[l];
    Tensor *a = HOOK(NN_HOOK_MLP_PRE, l, nn_linear(t, &h->c_fc, x)); /* (B, T, H) */
    NnGptMlp k = mlp_kind(&m->cfg);
    if (k == NN_GPT_MLP_SWIGLU)
        a = ag_mul(t, ag_silu(t, a), nn_linear(t, &h->w3, x));
    else if (k == NN_GPT_MLP_RELU)
        a = ag_relu(t, a);
    else if (k == NN_GPT_MLP_GELU_TANH)
        a = ag_gelu_tanh(t, a);
    else
        a = ag_gelu(t, a);
    Tensor *y = nn_linear(t, &h->mlp_proj, HOOK(NN_HOOK_MLP_POST, l, a));
    return ag_dropout(t, y, m->cfg.dropout, rng);
}

/* a norm of the model: LayerNorm (GPT-2's), RMSNorm (LLaMA's), or none; with the hooks of its
 * scale (a hook kind) and hook_normalized (the kind after it: x / scale before the weight and
 * bias, TransformerLens's) at layer l */
static Tensor *norm(Tape *t, const Gpt *m, const LayerNorm *ln, Tensor *x, NnHookKind scale,
                    int l) {
    NnGptNorm k = norm_kind(&m->cfg);
    if (k == NN_GPT_NORM_NONE) return x;
    int rms = k == NN_GPT_NORM_RMS;
    if (m->hooks) return nn_hook_norm(t, m->hooks, scale, l, x, ln->weight, ln->bias, ln->eps, rms);
    return rms ? ag_rmsnorm(t, x, ln->weight, ln->eps) : nn_layernorm(t, ln, x);
}

/* pre-LN: x + attn(norm_1(x)), then + mlp(norm_2(x)); post-LN: norm_1(x + attn(x)), then
 * norm_2(x + mlp(x)); no MLP: the attention's step alone; parallel (GPT-NeoX):
 * (x + attn(norm_1(x))) + mlp(norm_2(x)), no hook_resid_mid (TransformerLens's
 * parallel_attn_mlp: resid_pre + attn_out + mlp_out) */
static Tensor *block(Tape *t, Gpt *m, int l, Tensor *x, int pos0, GptCache *cache, Rng *rng) {
    GptBlock *h = &m->h[l];
    int post = m->cfg.post_ln;
    x = HOOK(NN_HOOK_RESID_PRE, l, x);
    if (m->cfg.parallel_residual) {
        Tensor *a = norm(t, m, &h->ln_1, x, NN_HOOK_LN1_SCALE, l);
        a = m->cfg.style == NN_LLAMA ? llama_attention(t, m, l, a, pos0, cache, rng)
                                     : attention(t, m, l, a, pos0, cache, rng);
        a = HOOK(NN_HOOK_ATTN_OUT, l, a);
        Tensor *f = norm(t, m, &h->ln_2, x, NN_HOOK_LN2_SCALE, l);
        f = HOOK(NN_HOOK_MLP_OUT, l, mlp(t, m, l, f, rng));
        return HOOK(NN_HOOK_RESID_POST, l, ag_add(t, ag_add(t, x, a), f));
    }
    Tensor *a = post ? x : norm(t, m, &h->ln_1, x, NN_HOOK_LN1_SCALE, l);
    a = m->cfg.style == NN_LLAMA ? llama_attention(t, m, l, a, pos0, cache, rng)
                                 : attention(t, m, l, a, pos0, cache, rng);
    x = ag_add(t, x, HOOK(NN_HOOK_ATTN_OUT, l, a));
    if (post) x = norm(t, m, &h->ln_1, x, NN_HOOK_LN1_SCALE, l);
    if (mlp_kind(&m->cfg) == NN_GPT_MLP_NONE) return HOOK(NN_HOOK_RESID_POST, l, x);
    x = HOOK(NN_HOOK_RESID_MID, l, x);
    Tensor *f = post ? x : norm(t, m, &h->ln_2, x, NN_HOOK_LN2_SCALE, l);
    x = ag_add(t, x, HOOK(NN_HOOK_MLP_OUT, l, mlp(t, m, l, f, rng)));
    if (post) x = norm(t, m, &h->ln_2, x, NN_HOOK_LN2_SCALE, l);
    return HOOK(NN_HOOK_RESID_POST, l, x);
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
    Tensor *x = HOOK(NN_HOOK_EMBED, -1, nn_embedding(t, &m->wte, idx, B, T));
    int learned = pos_kind(&m->cfg) == NN_GPT_POS_LEARNED; /* else no positions, or RoPE's */
    if (learned && nn_hooks_on(m->hooks, NN_HOOK_POS_EMBED, -1)) {
        /* the positions as a (B, T, C) tensor of their own: 0 + row, then x + it (same bits) */
        Tensor *zero = tensor_zeros(t->arena, 3, (int[]){B, T, m->cfg.n_embd}, "zeros");
        Tensor *pos = nn_positional(t, &m->wpe, zero, pos0);
        x = ag_add(t, x, HOOK(NN_HOOK_POS_EMBED, -1, pos));
    } else if (learned) {
        x = nn_positional(t, &m->wpe, x, pos0);
    }
    x = ag_dropout(t, x, m->cfg.dropout, rng);
    for (int l = 0; l < m->cfg.n_layer; l++) x = block(t, m, l, x, pos0, cache, rng);
    return nn_gpt_unembed(t, m, x);
}

Tensor *nn_gpt_unembed(Tape *t, Gpt *m, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(x);
    AG_CHECK(x->ndim == 3 && x->shape[2] == m->cfg.n_embd,
             "nn_gpt_unembed: x %s must be (B, T, %d)", tensor_shape_str(x), m->cfg.n_embd);
    if (!m->cfg.post_ln) x = norm(t, m, &m->ln_f, x, NN_HOOK_LNF_SCALE, -1);
    return nn_linear(t, &m->lm_head, x); /* (B, T, V) */
}

Tensor *nn_gpt_forward(Tape *t, Gpt *m, const int *idx, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(idx);
    check_ids(m, idx, B, T, 0, "nn_gpt_forward");
    return forward(t, m, idx, B, T, 0, NULL, rng); /* (B, T, V) */
}

/* hooks made for this model, then cleared of an earlier call's failure */
static void check_hooks(Gpt *m, NnHooks *hooks, const char *fn) {
    AG_CHECK(!hooks->seq2seq && hooks->n_layer == m->cfg.n_layer,
             "%s: hooks for %s of %d layers, the model has %d", fn,
             hooks->seq2seq ? "a seq2seq model" : "a GPT", hooks->n_layer, m->cfg.n_layer);
    hooks->status = AG_OK;
    hooks->stack = NN_HOOK_GPT;
}
/* the hooks off the model again; logits, or NULL with the failing hook's message */
static Tensor *hooks_done(Gpt *m, Tensor *logits) {
    NnHooks *hooks = m->hooks;
    m->hooks = NULL;
    if (hooks->status == AG_OK) return logits;
    ag_fail(hooks->status, "%s", hooks->error);
    return NULL;
}

Tensor *nn_gpt_forward_hooked(Tape *t, Gpt *m, const int *idx, int B, int T, Rng *rng,
                              NnHooks *hooks) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(idx);
    AG_CHECK_ARG(hooks);
    check_hooks(m, hooks, "nn_gpt_forward_hooked");
    m->hooks = hooks; /* for this call only */
    Tensor *logits = nn_gpt_forward(t, m, idx, B, T, rng);
    return hooks_done(m, logits); /* (B, T, V) */
}

Tensor *nn_gpt_loss(Tape *t, Gpt *m, const int *idx, const int *targets, int B, int T, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(idx);
    AG_CHECK_ARG(targets);
    return ag_cross_entropy(t, nn_gpt_forward(t, m, idx, B, T, rng), targets, -1);
}

double nn_gpt_loss_over(Tape *t, Gpt *m, const int *tokens, size_t n, int batch, int64_t *n_pred) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(tokens);
    AG_CHECK_ARG(n_pred);
    AG_CHECK(batch >= 1, "nn_gpt_loss_over: batch %d must be >= 1", batch);
    int T = m->cfg.block_size;
    size_t windows = n > 1 ? (n - 2) / (size_t)T + 1 : 0; /* window w: x at w T, T or fewer */
    int *x = malloc((size_t)batch * (size_t)T * sizeof(int));
    int *y = malloc((size_t)batch * (size_t)T * sizeof(int));
    AG_CHECK(x && y, "nn_gpt_loss_over: out of memory for %d windows of %d tokens", batch, T);
    double sum = 0;
    *n_pred = 0;
    int was = ag_no_grad(t, 1);
    for (size_t w = 0; w < windows;) {
        /* full windows in batches; the last, shorter one alone */
        size_t lo = w * (size_t)T;
        int len = (int)(n - 1 - lo < (size_t)T ? n - 1 - lo : (size_t)T);
        int B = 0;
        while (w < windows && B < batch) {
            size_t at = w * (size_t)T;
            int l = (int)(n - 1 - at < (size_t)T ? n - 1 - at : (size_t)T);
            if (l != len) break;
            memcpy(x + (size_t)B * len, tokens + at, (size_t)len * sizeof(int));
            memcpy(y + (size_t)B * len, tokens + at + 1, (size_t)len * sizeof(int));
            B++, w++;
        }
        ag_tape_reset(t);
        double l = (double)nn_gpt_loss(t, m, x, y, B, len, NULL)->data[0];
        if (!isfinite(l)) { /* stop there; the tape keeps what its check mode saw */
            ag_fail(AG_ERR_RANGE, "the loss of tokens %zu..%zu is %g", lo, lo + (size_t)B * len, l);
            sum = NAN;
            break;
        }
        sum += l * B * len; /* the mean of B len tokens */
        *n_pred += (int64_t)B * len;
    }
    ag_no_grad(t, was);
    free(x);
    free(y);
    return *n_pred && isfinite(sum) ? sum / (double)*n_pred : NAN;
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
    c->kv = calloc((size_t)c->n_layer, sizeof *c->kv);
    AG_CHECK(c->kv, "nn_gpt_cache_init: out of memory for %d layers", c->n_layer);
    for (int l = 0; l < c->n_layer; l++) {
        c->kv[l] = calloc((size_t)B * max_T * c->width, sizeof(Real));
        AG_CHECK(c->kv[l], "nn_gpt_cache_init: out of memory for (%d, %d, %d) values", B, max_T,
                 c->width);
    }
}

void nn_gpt_cache_free(GptCache *c) {
    AG_CHECK_ARG(c);
    for (int l = 0; c->kv && l < c->n_layer; l++) free(c->kv[l]);
    free(c->kv);
    memset(c, 0, sizeof *c);
}

/* (the cache's rows of one sequence are its first len rows: with B = 1 the tensor is a view
 * of them, not a copy, so that a token's step reads the cache once and copies nothing but its
 * own keys and values; with B > 1 the sequences are max_T rows apart and are copied together) */
static Tensor *cache_append(Tape *t, GptCache *c, int l, const Tensor *k, int kcol, const Tensor *v,
                            int vcol) {
    int B = c->B, T = k->shape[1], W = c->width, half = W / 2, len = c->len + T;
    int wk = k->shape[2], wv = v->shape[2];
    for (int b = 0; b < B; b++) {
        Real *dst = c->kv[l] + (size_t)b * c->max_T * W;
        for (int i = 0; i < T; i++) {
            size_t row = (size_t)b * T + i;
            Real *d = dst + (size_t)(c->len + i) * W;
            memcpy(d, k->data + row * wk + kcol, (size_t)half * sizeof(Real));
            memcpy(d + half, v->data + row * wv + vcol, (size_t)half * sizeof(Real));
        }
    }
    if (B == 1) {
        Tensor *kv = arena_alloc(t->arena, sizeof *kv);
        *kv = (Tensor){.ndim = 3,
                       .shape = {1, len, W},
                       .size = (size_t)len * W,
                       .data = c->kv[l],
                       .arena = t->arena,
                       .name = "kv_cache"};
        return kv;
    }
    Tensor *kv = tensor_new3(t->arena, B, len, W, "kv_cache");
    for (int b = 0; b < B; b++)
        memcpy(kv->data + (size_t)b * len * W, c->kv[l] + (size_t)b * c->max_T * W,
               (size_t)len * W * sizeof(Real));
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

Tensor *nn_gpt_forward_cached_hooked(Tape *t, Gpt *m, GptCache *c, const int *idx, int B, int T,
                                     NnHooks *hooks) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(idx);
    AG_CHECK_ARG(hooks);
    check_hooks(m, hooks, "nn_gpt_forward_cached_hooked");
    m->hooks = hooks; /* for this call only */
    Tensor *logits = nn_gpt_forward_cached(t, m, c, idx, B, T);
    return hooks_done(m, logits); /* (B, T, V) */
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
        const Real *last = logits->data + (size_t)(T - 1) * V;
        for (int j = 0; j < V; j++)
            if (!isfinite((double)last[j])) { /* weights that overflow: an error, not an abort */
                nn_gpt_cache_free(&c);
                return ag_fail(AG_ERR_RANGE,
                               "the logits of position %d hold %g (token id %d of %d): the model "
                               "overflowed",
                               n - 1, (double)last[j], j, V);
            }
        int tok = nn_sample(last, V, s, rng);
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
    GPT_INT(style, 0, 1),
    GPT_INT(ffn_hidden, 0, 1 << 20),
    CKPT_CFG_FLOAT(GptConfig, rope_base, 0, 1e9),
    CKPT_CFG_FLOAT(GptConfig, norm_eps, 0, 0.5),
    GPT_INT(vocab_size, 1, 1 << 24),
    GPT_INT(block_size, 1, 1 << 20),
    GPT_INT(n_layer, 1, NN_GPT_MAX_LAYERS),
    GPT_INT(n_head, 1, 1024),
    GPT_INT(n_embd, 1, 1 << 16),
    GPT_INT(n_kv_head, 0, 1024),
    CKPT_CFG_FLOAT(GptConfig, dropout, 0, 0.99),
    GPT_INT(no_bias, 0, 1),
    GPT_INT(untied, 0, 1),
    /* added later: files without them are of the style's choices, as the code that wrote them */
    CKPT_CFG_INT_OPT(GptConfig, pos, 0, NN_GPT_POS_NONE),
    CKPT_CFG_INT_OPT(GptConfig, norm, 0, NN_GPT_NORM_NONE),
    CKPT_CFG_INT_OPT(GptConfig, mlp, 0, NN_GPT_MLP_LAST),
    CKPT_CFG_INT_OPT(GptConfig, bias, 0, NN_GPT_BIAS_OFF),
    CKPT_CFG_INT_OPT(GptConfig, post_ln, 0, 1),
    CKPT_CFG_INT_OPT(GptConfig, parallel_residual, 0, 1),
    CKPT_CFG_INT_OPT(GptConfig, rotary_dim, 0, 1 << 16),
};

static int check_values(const void *values, int64_t *n_params) {
    return nn_gpt_check_config(values, n_params);
}

CkptConfig nn_gpt_ckpt_config(GptConfig *cfg) {
    AG_CHECK_ARG(cfg);
    return (CkptConfig){"gpt", gpt_fields, (int)(sizeof gpt_fields / sizeof gpt_fields[0]), cfg,
                        check_values};
}
