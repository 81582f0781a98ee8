/* attention.c: multi-head attention, self and cross, with masks, grouped-query heads, head
 * gates, the probabilities kept for inspection, and inputs packed to their live rows. Straight-line code over ag_ ops; the fused
 * kernel is ag_attention (../autograd/ops_attention.c, then ../tensor/k_attention.c).
 * Not here: the transformer layers (transformer.c). */
#include "nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void nn_mha_init(MultiHeadAttention *m, NnBuilder *b, const char *name, const MhaConfig *cfg) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(cfg);
    NnBuilder s = nn_scope(b, "%s", name);
    int d_model = cfg->d_model, n_heads = cfg->n_heads;
    int n_kv_heads = cfg->n_kv_heads ? cfg->n_kv_heads : n_heads;
    AG_CHECK(n_heads > 0 && d_model > 0 && d_model % n_heads == 0,
             "nn_mha_init: '%s': d_model %d is not a positive multiple of n_heads %d", s.scope,
             d_model, n_heads);
    AG_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0,
             "nn_mha_init: '%s': n_heads %d is not divisible by n_kv_heads %d", s.scope, n_heads,
             n_kv_heads);
    AG_CHECK(cfg->dropout >= 0 && cfg->dropout < 1, "nn_mha_init: '%s': dropout %g outside [0, 1)",
             s.scope, cfg->dropout);
    AG_CHECK(cfg->no_bias == 0 || cfg->no_bias == 1, "nn_mha_init: '%s': no_bias %d is not 0 or 1",
             s.scope, cfg->no_bias);
    NnBias bias = cfg->no_bias ? NN_NO_BIAS : NN_BIAS;
    memset(m, 0, sizeof *m);
    m->d_model = d_model;
    m->n_heads = n_heads;
    m->n_kv_heads = n_kv_heads;
    m->head_dim = d_model / n_heads;
    m->dropout = cfg->dropout;
    int C = d_model, Ckv = n_kv_heads * m->head_dim;
    if (n_kv_heads == n_heads) {
        /* PyTorch's layout: one (3C, C) matrix whose row blocks are W_q, W_k, W_v, initialised
         * xavier_uniform over the whole (3C, C) matrix, biases 0 */
        m->in_proj_weight = nn_param(&s, "in_proj_weight", 2, (int[]){3 * C, C});
        double bound = sqrt(6.0 / (double)(3 * C + C));
        rng_fill_uniform(b->rng, m->in_proj_weight, -bound, bound);
        if (bias) m->in_proj_bias = nn_param(&s, "in_proj_bias", 1, (int[]){3 * C});
        Linear *proj[3] = {&m->q_proj, &m->k_proj, &m->v_proj};
        const char *names[3] = {"q_proj", "k_proj", "v_proj"};
        for (int i = 0; i < 3; i++) {
            proj[i]->in = proj[i]->out = C;
            NnBuilder view = nn_scope(&s, "%s", names[i]); /* the views' name, for the tape */
            proj[i]->weight = nn_param_rows(b->arena, m->in_proj_weight, i * C, C, view.scope);
            proj[i]->bias =
                bias ? nn_param_rows(b->arena, m->in_proj_bias, i * C, C, view.scope) : NULL;
        }
        NnBuilder kv = nn_scope(&s, "kv_proj");
        m->kv_proj_weight =
            nn_param_rows(b->arena, m->in_proj_weight, C, 2 * C, nn_scope(&kv, "weight").scope);
        m->kv_proj_bias =
            bias ? nn_param_rows(b->arena, m->in_proj_bias, C, 2 * C, nn_scope(&kv, "bias").scope)
                 : NULL;
    } else {
        nn_linear_init(&m->q_proj, &s, "q_proj", C, C, bias);
        nn_linear_init(&m->k_proj, &s, "k_proj", C, Ckv, bias);
        nn_linear_init(&m->v_proj, &s, "v_proj", C, Ckv, bias);
    }
    /* PyTorch's out_proj: NonDynamicallyQuantizableLinear, default Linear init, bias 0 */
    nn_linear_init(&m->out_proj, &s, "out_proj", C, C, bias);
    if (m->out_proj.bias) tensor_fill(m->out_proj.bias, 0);
    m->gate = tensor_new1(b->arena, n_heads, nn_scope(&s, "head_gate").scope);
    tensor_fill(m->gate, 1);
}

void nn_mha_track_gates(MultiHeadAttention *m, int on) {
    AG_CHECK_ARG(m);
    m->track_gates = on;
    if (on) tensor_requires_grad(m->gate);
    m->gate->requires_grad = on;
}

/* Are all gates 1 and untracked? Then the gate op is skipped. */
static int gates_are_identity(const MultiHeadAttention *m) {
    if (m->track_gates) return 0;
    for (int h = 0; h < m->n_heads; h++)
        if (m->gate->data[h] != 1) return 0;
    return 1;
}

/* The mask's bytes, once its shape is checked against (B, Tk). */
static const uint8_t *mask_bytes(const NnMask *key_padding_mask, const Tensor *query, int B, int Tk,
                                 const Tensor *keys) {
    AG_CHECK(key_padding_mask == NULL ||
                 (key_padding_mask->B == B && key_padding_mask->T == Tk && key_padding_mask->data),
             "nn_mha_forward: key_padding_mask (%d,%d) must be (B, Tk) = (%d,%d) for query %s %s "
             "and keys %s",
             key_padding_mask ? key_padding_mask->B : 0, key_padding_mask ? key_padding_mask->T : 0,
             B, Tk, query->name, tensor_shape_str(query), tensor_shape_str(keys));
    return key_padding_mask ? key_padding_mask->data : NULL;
}

/* The part after the key/value projections: q from query, then attention over the given
 * key/value heads kh, vh (B, NKV, Tk, HS), gates, merge, output projection. */
static Tensor *mha_attend(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *kh, Tensor *vh,
                          const NnMask *key_padding_mask, int causal, Rng *rng) {
    const uint8_t *mask = mask_bytes(key_padding_mask, query, query->shape[0], kh->shape[2], kh);
    Tensor *q = nn_linear(t, &m->q_proj, query);   /* (B, Tq, C) */
    Tensor *qh = ag_split_heads(t, q, m->n_heads); /* (B, NH, Tq, HS) */
    /* softmax(q k^T / sqrt(HS) + masks) v, per head; probabilities (B, NH, Tq, Tk) */
    Tensor *o = ag_attention(t, qh, kh, vh, causal, mask, m->dropout, rng,
                             &m->last_probs); /* (B, NH, Tq, HS) */
    if (!gates_are_identity(m)) o = ag_head_gate(t, o, m->gate);
    Tensor *merged = ag_merge_heads(t, o);     /* (B, Tq, C) */
    return nn_linear(t, &m->out_proj, merged); /* (B, Tq, C) */
}

/* x (B, T, C), or (n, C) packed by rows when rows is given */
static void check_input(const MultiHeadAttention *m, const Tensor *x, const NnRows *rows,
                        const char *what) {
    if (rows) {
        AG_CHECK(rows->idx && rows->B > 0 && rows->T > 0 && rows->n > 0 &&
                     rows->n <= rows->B * rows->T,
                 "nn_mha_forward: the row map of %s names %d of (B, T) = (%d,%d) rows", what,
                 rows->n, rows->B, rows->T);
        AG_CHECK(x != NULL && x->ndim == 2 && x->shape[0] == rows->n && x->shape[1] == m->d_model,
                 "nn_mha_forward: packed %s %s %s must be (%d,%d), the rows of its map", what,
                 x ? x->name : "NULL", tensor_shape_str(x), rows->n, m->d_model);
        return;
    }
    AG_CHECK(x != NULL && x->ndim == 3 && x->shape[2] == m->d_model,
             "nn_mha_forward: %s %s %s must be (B,T,%d)", what, x ? x->name : "NULL",
             tensor_shape_str(x), m->d_model);
}

/* A packed (n, width) tensor back in its (B, T, width) batch, rows not in the map 0; and the
 * rows of a (B, T, width) batch that the map names, packed. Without a map, x itself. Only the
 * path with head gates needs them. */
static Tensor *unpack(Tape *t, Tensor *x, const NnRows *rows) {
    return rows ? ag_scatter_rows(t, x, rows->idx, rows->B, rows->T) : x;
}
static Tensor *pack(Tape *t, Tensor *x, const NnRows *rows) {
    return rows ? ag_gather_rows(t, x, rows->idx, rows->n) : x;
}

/* The map of all B*T rows, and x (B, T, width) viewed as those rows (B*T, width). */
static AgRows all_rows(Tape *t, const Tensor *x) {
    int B = x->shape[0], T = x->shape[1];
    int *idx = arena_alloc(t->arena, (size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) idx[i] = i;
    return (AgRows){idx, B, T};
}
static Tensor *as_rows(Tape *t, Tensor *x) {
    return ag_reshape(t, x, 2, (int[]){x->shape[0] * x->shape[1], x->shape[2]});
}

/* ag_attention_cols on (B, T, width) projections, or ag_attention_rows when a side is packed
 * (the other, if not, then viewed as all its rows). k and v may be one tensor, q and k too. */
static Tensor *attend(Tape *t, MultiHeadAttention *m, Tensor *q, const NnRows *qr, Tensor *k,
                      Tensor *v, const NnRows *kvr, AgHeads hd, const uint8_t *mask, int causal,
                      Rng *rng) {
    if (!qr && !kvr)
        return ag_attention_cols(t, q, k, v, hd, causal, mask, m->dropout, rng, &m->last_probs);
    AgRows rq = qr ? (AgRows){qr->idx, qr->B, qr->T} : all_rows(t, q);
    AgRows rk = kvr ? (AgRows){kvr->idx, kvr->B, kvr->T} : all_rows(t, k);
    Tensor *qf = qr ? q : as_rows(t, q);
    Tensor *kf = k == q ? qf : kvr ? k : as_rows(t, k);
    Tensor *vf = v == k ? kf : kvr ? v : as_rows(t, v);
    Tensor *y = ag_attention_rows(t, qf, rq, kf, vf, rk, hd, causal, mask, m->dropout, rng,
                                  &m->last_probs); /* (nq, NH*HS) */
    if (qr) return y;
    return ag_reshape(t, y, 3, (int[]){q->shape[0], q->shape[1], y->shape[1]});
}

/* Without gates: projections stay (B, T, width) or packed (n, width); ag_attention_cols or
 * ag_attention_rows reads the heads in place and writes them side by side, which is what
 * out_proj reads. No split or merge copies, no scatter or gather of rows. */
static Tensor *mha_in_place(Tape *t, MultiHeadAttention *m, Tensor *query, const NnRows *qr,
                            Tensor *key, Tensor *value, const NnRows *kvr, const uint8_t *mask,
                            int causal, Rng *rng) {
    int C = m->d_model, NH = m->n_heads, HS = m->head_dim;
    Tensor *o;
    if (m->in_proj_weight && query == key && key == value) { /* q, k, v: one (B, T, 3C) product */
        Tensor *qkv = ag_linear(t, query, m->in_proj_weight, m->in_proj_bias);
        o = attend(t, m, qkv, qr, qkv, qkv, kvr, (AgHeads){NH, NH, HS, 0, C, 2 * C}, mask, causal,
                   rng);
    } else if (m->in_proj_weight && key == value) { /* q, then k and v in one (B, Tk, 2C) */
        Tensor *q = nn_linear(t, &m->q_proj, query);
        Tensor *kv = ag_linear(t, key, m->kv_proj_weight, m->kv_proj_bias);
        o = attend(t, m, q, qr, kv, kv, kvr, (AgHeads){NH, NH, HS, 0, 0, C}, mask, causal, rng);
    } else { /* distinct key and value, or grouped-query: three projections */
        Tensor *q = nn_linear(t, &m->q_proj, query);
        Tensor *k = nn_linear(t, &m->k_proj, key);
        Tensor *v = nn_linear(t, &m->v_proj, value);
        o = attend(t, m, q, qr, k, v, kvr, (AgHeads){NH, m->n_kv_heads, HS, 0, 0, 0}, mask, causal,
                   rng);
    }
    return nn_linear(t, &m->out_proj, o); /* (B, Tq, C) or (Nq, C) */
}

/* nn_mha_forward and nn_mha_forward_rows, once their arguments are known to be non-NULL */
static Tensor *mha_forward(Tape *t, MultiHeadAttention *m, Tensor *query, const NnRows *qr,
                           Tensor *key, Tensor *value, const NnRows *kvr,
                           const NnMask *key_padding_mask, int causal, Rng *rng) {
    check_input(m, query, qr, "query");
    check_input(m, key, kvr, "key");
    check_input(m, value, kvr, "value");
    AG_CHECK(query != key || qr == kvr,
             "nn_mha_forward: query %s %s is also key but packed by another row map", query->name,
             tensor_shape_str(query));
    AG_CHECK(kvr || (value->shape[0] == key->shape[0] && value->shape[1] == key->shape[1]),
             "nn_mha_forward: key %s %s and value %s %s must have the same (B, Tk)", key->name,
             tensor_shape_str(key), value->name, tensor_shape_str(value));
    int B = qr ? qr->B : query->shape[0], Bkv = kvr ? kvr->B : key->shape[0];
    AG_CHECK(Bkv == B, "nn_mha_forward: batch sizes differ: query %s %s vs key %s %s", query->name,
             tensor_shape_str(query), key->name, tensor_shape_str(key));
    if (gates_are_identity(m)) {
        int Tk = kvr ? kvr->T : key->shape[1];
        const uint8_t *mask = mask_bytes(key_padding_mask, query, B, Tk, key);
        return mha_in_place(t, m, query, qr, key, value, kvr, mask, causal, rng);
    }
    /* gates: heads split into (B, NH, T, HS) tensors, on the whole batch */
    Tensor *q = unpack(t, query, qr);
    Tensor *k = key == query ? q : unpack(t, key, kvr);
    Tensor *v = value == key ? k : unpack(t, value, kvr);
    Tensor *kh = nn_mha_project_kv(t, m, k, 0); /* (B, NKV, Tk, HS) */
    Tensor *vh = nn_mha_project_kv(t, m, v, 1); /* (B, NKV, Tk, HS) */
    return pack(t, mha_attend(t, m, q, kh, vh, key_padding_mask, causal, rng), qr);
}

/* *masks, or none when NULL; a causal flag other than 0 or 1 aborts */
static NnAttnMasks masks_or_none(const NnAttnMasks *masks, const Tensor *query) {
    NnAttnMasks none = {0};
    if (!masks) return none;
    AG_CHECK(masks->causal == 0 || masks->causal == 1,
             "nn_mha_forward: causal %d is not 0 or 1 (query %s %s)", masks->causal, query->name,
             tensor_shape_str(query));
    return *masks;
}

Tensor *nn_mha_forward(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key, Tensor *value,
                       const NnAttnMasks *masks, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(key);
    AG_CHECK_ARG(value);
    NnAttnMasks mk = masks_or_none(masks, query);
    return mha_forward(t, m, query, NULL, key, value, NULL, mk.key_padding, mk.causal, rng);
}

Tensor *nn_mha_forward_rows(Tape *t, MultiHeadAttention *m, Tensor *query, const NnRows *q_rows,
                            Tensor *key_value, const NnRows *kv_rows, const NnAttnMasks *masks,
                            Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(key_value);
    NnAttnMasks mk = masks_or_none(masks, query);
    return mha_forward(t, m, query, q_rows, key_value, key_value, kv_rows, mk.key_padding,
                       mk.causal, rng);
}

Tensor *nn_mha_project_kv(Tape *t, MultiHeadAttention *m, Tensor *x, int which) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(x);
    check_input(m, x, NULL, "key_value");
    Tensor *p = nn_linear(t, which ? &m->v_proj : &m->k_proj, x); /* (B, Tk, NKV*HS) */
    return ag_split_heads(t, p, m->n_kv_heads);                   /* (B, NKV, Tk, HS) */
}

Tensor *nn_mha_forward_kv(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *kh, Tensor *vh,
                          const NnAttnMasks *masks, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(kh);
    AG_CHECK_ARG(vh);
    check_input(m, query, NULL, "query");
    NnAttnMasks mk = masks_or_none(masks, query);
    return mha_attend(t, m, query, kh, vh, mk.key_padding, mk.causal, rng);
}

/* ---- key/value cache for incremental decoding ---- */

void nn_kv_cache_init(NnKVCache *c, const MultiHeadAttention *m, int B, int max_T) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(m);
    AG_CHECK(B > 0 && max_T > 0, "nn_kv_cache_init: B %d and max_T %d must be > 0", B, max_T);
    c->B = B;
    c->NKV = m->n_kv_heads;
    c->HS = m->head_dim;
    c->max_T = max_T;
    c->len = 0;
    size_t n = (size_t)B * c->NKV * max_T * c->HS;
    c->k = calloc(n, sizeof(Real));
    c->v = calloc(n, sizeof(Real));
    AG_CHECK(c->k && c->v, "nn_kv_cache_init: out of memory for %zu values", 2 * n);
}

void nn_kv_cache_free(NnKVCache *c) {
    AG_CHECK_ARG(c);
    free(c->k);
    free(c->v);
    c->k = c->v = NULL;
}

/* Copies the first len positions of a (B, NKV, max_T, HS) cache into a (B, NKV, len, HS) tensor */
static Tensor *cache_view(Tape *t, const NnKVCache *c, const Real *src) {
    Tensor *x = tensor_new4(t->arena, c->B, c->NKV, c->len, c->HS, "kv_cache");
    size_t row = (size_t)c->len * c->HS;
    for (int bh = 0; bh < c->B * c->NKV; bh++)
        memcpy(x->data + bh * row, src + (size_t)bh * c->max_T * c->HS, row * sizeof(Real));
    return x;
}

Tensor *nn_mha_forward_cached(Tape *t, MultiHeadAttention *m, NnKVCache *c, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(x);
    check_input(m, x, NULL, "x");
    AG_CHECK(x->shape[0] == c->B && c->len + x->shape[1] <= c->max_T,
             "nn_mha_forward_cached: x %s does not fit the cache (B %d, %d of %d positions "
             "used)",
             tensor_shape_str(x), c->B, c->len, c->max_T);
    int T = x->shape[1];
    Tensor *k = nn_mha_project_kv(t, m, x, 0), *v = nn_mha_project_kv(t, m, x, 1);
    for (int bh = 0; bh < c->B * c->NKV; bh++) { /* append the new positions */
        size_t dst = ((size_t)bh * c->max_T + c->len) * c->HS, src = (size_t)bh * T * c->HS;
        memcpy(c->k + dst, k->data + src, (size_t)T * c->HS * sizeof(Real));
        memcpy(c->v + dst, v->data + src, (size_t)T * c->HS * sizeof(Real));
    }
    c->len += T;
    /* causal aligned at the end: new position i sees the cache and new positions <= i */
    return mha_attend(t, m, x, cache_view(t, c, c->k), cache_view(t, c, c->v), NULL, 1, NULL);
}
