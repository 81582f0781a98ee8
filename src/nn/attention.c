/* attention.c: multi-head attention. nn_mha_forward is the projections (q, k, v: one fused
 * product for self-attention), one call of ag_attention, which reads the heads in place in
 * those (B, T, width) projections, and the output projection; nn_mha_forward_rows the same on
 * packed rows. With head gates (for study) the heads are split apart instead: ag_split_heads,
 * ag_attention, ag_head_gate, ag_merge_heads. Straight-line code over ag_ ops, no backward.
 * Not here: the key/value cache (kv_cache.c), the transformer layers (transformer.c).
 * Next: ag_attention and its backward (../autograd/ops_attention.c), then the loops
 * (../tensor/k_attention_ref.c). */
#include "hooks.h"
#include "nn.h"

#include <math.h>
#include <string.h>

/* Where an attention's hooks are during nn_mha_forward_hooked (NULL: none) */
typedef struct HookAt {
    NnHooks *h;
    const NnHookAttn *a;
} HookAt;
static NnHookKind z_kind(const HookAt *at) {
    return (NnHookKind)(at->a->q + (NN_HOOK_Z - NN_HOOK_Q));
}
static int z_hooked(const HookAt *at) { return nn_hooks_on(at->h, z_kind(at), at->a->layer); }
/* merged heads (B, Tq, C) -> the same, after z's hooks (one branch without them) */
static Tensor *hook_z(Tape *t, const HookAt *at, Tensor *merged) {
    if (!at) return merged;
    return nn_hook_heads(t, at->h, z_kind(at), at->a->layer, merged, at->a->n_heads);
}

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
    m->need_weights = 1;
}

/* Where a forward puts its probabilities: m->last_probs, or nowhere (NULL) when the module
 * does not need them, then with last_probs set to NULL (not left naming a reset arena). */
static Tensor **probs_of(MultiHeadAttention *m) {
    AG_CHECK(m->need_weights == 0 || m->need_weights == 1,
             "nn_mha_forward: need_weights %d is not 0 or 1", m->need_weights);
    m->last_probs = NULL;
    return m->need_weights ? &m->last_probs : NULL;
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

/* Checks the key padding mask's shape against (B, Tk) in the module's terms, before any
 * projection (ag_attention checks it again, and the attention mask's). */
static void check_padding(const AgAttnMask *mk, const Tensor *query, int B, int Tk,
                          const Tensor *keys) {
    const AgMask *key_padding_mask = mk->key_padding;
    AG_CHECK(key_padding_mask == NULL ||
                 (key_padding_mask->B == B && key_padding_mask->T == Tk && key_padding_mask->data),
             "nn_mha_forward: key_padding_mask (%d,%d) must be (B, Tk) = (%d,%d) for query %s %s "
             "and keys %s",
             key_padding_mask ? key_padding_mask->B : 0, key_padding_mask ? key_padding_mask->T : 0,
             B, Tk, query->name, tensor_shape_str(query), tensor_shape_str(keys));
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

/* *masks, or none when NULL; a causal flag other than 0 or 1 aborts */
static AgAttnMask masks_or_none(const AgAttnMask *masks, const Tensor *query) {
    AgAttnMask none = {0};
    if (!masks) return none;
    AG_CHECK(masks->causal == 0 || masks->causal == 1,
             "nn_mha_forward: causal %d is not 0 or 1 (query %s %s)", masks->causal, query->name,
             tensor_shape_str(query));
    return *masks;
}

/* The projections as Linear layers leave them, (B, T, width) or packed (n, width), and where
 * their heads are (the columns ag_attention reads). */
typedef struct MhaProj {
    Tensor *q, *k, *v; /* one tensor for all three (self-attention), or k == v */
    AgHeads heads;
} MhaProj;
static MhaProj project(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key, Tensor *value) {
    int C = m->d_model, NH = m->n_heads, HS = m->head_dim;
    if (m->in_proj_weight && query == key && key == value) { /* q, k, v: one (B, T, 3C) product */
        Tensor *qkv = ag_linear(t, query, m->in_proj_weight, m->in_proj_bias);
        return (MhaProj){qkv, qkv, qkv, {NH, NH, HS, 0, C, 2 * C}};
    }
    if (m->in_proj_weight && key == value) { /* q, then k and v in one (B, Tk, 2C) product */
        Tensor *q = nn_linear(t, &m->q_proj, query);
        Tensor *kv = ag_linear(t, key, m->kv_proj_weight, m->kv_proj_bias);
        return (MhaProj){q, kv, kv, {NH, NH, HS, 0, 0, C}};
    }
    Tensor *q = nn_linear(t, &m->q_proj, query); /* distinct key and value, or grouped-query */
    Tensor *k = nn_linear(t, &m->k_proj, key);
    Tensor *v = nn_linear(t, &m->v_proj, value);
    return (MhaProj){q, k, v, {NH, m->n_kv_heads, HS, 0, 0, 0}};
}

/* With head gates: query (B, Tq, C), keys and values split into heads kh, vh (B, NKV, Tk, HS);
 * q split the same way, attention, the gates, the heads merged, the output projection. */
static Tensor *mha_attend(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *kh, Tensor *vh,
                          const AgAttnMask *masks, Rng *rng, const HookAt *at) {
    check_padding(masks, query, query->shape[0], kh->shape[2], kh);
    Tensor *q = nn_linear(t, &m->q_proj, query);   /* (B, Tq, C) */
    Tensor *qh = ag_split_heads(t, q, m->n_heads); /* (B, NH, Tq, HS) */
    Tensor *o = ag_attention(t, qh, kh, vh, NULL, masks, m->dropout, rng,
                             probs_of(m)); /* (B, NH, Tq, HS) */
    if (!gates_are_identity(m)) o = ag_head_gate(t, o, m->gate);
    Tensor *merged = hook_z(t, at, ag_merge_heads(t, o)); /* (B, Tq, C) */
    return nn_linear(t, &m->out_proj, merged);            /* (B, Tq, C) */
}

/* nn_mha_forward, with z's hooks when at is given */
static Tensor *mha_forward(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key,
                           Tensor *value, const AgAttnMask *masks, Rng *rng, const HookAt *at) {
    AgAttnMask mk = masks_or_none(masks, query);
    check_input(m, query, NULL, "query");
    check_input(m, key, NULL, "key");
    check_input(m, value, NULL, "value");
    AG_CHECK(value->shape[0] == key->shape[0] && value->shape[1] == key->shape[1],
             "nn_mha_forward: key %s %s and value %s %s must have the same (B, Tk)", key->name,
             tensor_shape_str(key), value->name, tensor_shape_str(value));
    AG_CHECK(key->shape[0] == query->shape[0],
             "nn_mha_forward: batch sizes differ: query %s %s vs key %s %s", query->name,
             tensor_shape_str(query), key->name, tensor_shape_str(key));
    /* heads split apart, so that the gates can scale them; with z's hooks too, so that zeroing
     * a head there is the gate at 0 to the bit, forward and backward */
    if (!gates_are_identity(m) || (at && z_hooked(at))) {
        Tensor *kh = nn_mha_project_kv(t, m, key, 0);   /* (B, NKV, Tk, HS) */
        Tensor *vh = nn_mha_project_kv(t, m, value, 1); /* (B, NKV, Tk, HS) */
        return mha_attend(t, m, query, kh, vh, &mk, rng, at);
    }
    check_padding(&mk, query, query->shape[0], key->shape[1], key);
    MhaProj p = project(t, m, query, key, value); /* (B, T, width): heads side by side */
    Tensor *o =
        ag_attention(t, p.q, p.k, p.v, &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = p.heads}, &mk,
                     m->dropout, rng, probs_of(m));      /* (B, Tq, C) */
    return nn_linear(t, &m->out_proj, hook_z(t, at, o)); /* (B, Tq, C) */
}

Tensor *nn_mha_forward(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key, Tensor *value,
                       const AgAttnMask *masks, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(key);
    AG_CHECK_ARG(value);
    return mha_forward(t, m, query, key, value, masks, rng, NULL);
}

Tensor *nn_mha_forward_hooked(Tape *t, MultiHeadAttention *m, Tensor *query, Tensor *key_value,
                              const AgAttnMask *masks, Rng *rng, NnHooks *h, const NnHookAttn *a) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(key_value);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(a);
    AG_CHECK(a->n_heads == m->n_heads,
             "nn_mha_forward_hooked: blocks.%d: %d heads for a module "
             "of %d",
             a->layer, a->n_heads, m->n_heads);
    HookAt at = {h, a};
    if (!nn_hooks_explicit_at(h, a->layer, a->q))
        return mha_forward(t, m, query, key_value, key_value, masks, rng, &at);
    AgAttnMask mk = masks_or_none(masks, query);
    check_input(m, query, NULL, "query");
    check_input(m, key_value, NULL, "key");
    AG_CHECK(m->n_kv_heads == m->n_heads && !mk.attn_mask,
             "nn_mha_forward_hooked: blocks.%d: grouped-query attention (%d of %d heads) and "
             "float attention masks have no hooked path",
             a->layer, m->n_kv_heads, m->n_heads);
    check_padding(&mk, query, query->shape[0], key_value->shape[1], key_value);
    NnHookAttn plain = *a; /* the module's masks, dropout and probabilities */
    plain.causal = mk.causal, plain.key_padding = mk.key_padding ? mk.key_padding->data : NULL;
    plain.dropout = m->dropout, plain.rng = rng, plain.probs = probs_of(m);
    Tensor *q = nn_linear(t, &m->q_proj, query);             /* (B, Tq, C) */
    Tensor *k = nn_linear(t, &m->k_proj, key_value);         /* (B, Tk, C) */
    Tensor *v = nn_linear(t, &m->v_proj, key_value);         /* (B, Tk, C) */
    Tensor *y = nn_hook_attention_at(t, h, &plain, q, k, v); /* (B, Tq, C) */
    if (!gates_are_identity(m))
        y = ag_merge_heads(t, ag_head_gate(t, ag_split_heads(t, y, m->n_heads), m->gate));
    return nn_linear(t, &m->out_proj, hook_z(t, &at, y)); /* (B, Tq, C) */
}

/* A side of nn_mha_forward_rows: its map, or all B*T rows of x (B, T, width) */
static AgRows rows_of(Tape *t, const NnRows *r, const Tensor *x) {
    if (r) return (AgRows){r->idx, r->B, r->T};
    int B = x->shape[0], T = x->shape[1];
    int *idx = arena_alloc(t->arena, (size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) idx[i] = i;
    return (AgRows){idx, B, T};
}
/* x packed (n, width) as it is, or x (B, T, width) viewed as its rows (B*T, width) */
static Tensor *as_rows(Tape *t, Tensor *x, const NnRows *r) {
    if (r) return x;
    return ag_reshape(t, x, 2, (int[]){x->shape[0] * x->shape[1], x->shape[2]});
}

Tensor *nn_mha_forward_rows(Tape *t, MultiHeadAttention *m, Tensor *query, const NnRows *q_rows,
                            Tensor *key_value, const NnRows *kv_rows, const AgAttnMask *masks,
                            Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(key_value);
    if (!q_rows && !kv_rows) return nn_mha_forward(t, m, query, key_value, key_value, masks, rng);
    AgAttnMask mk = masks_or_none(masks, query);
    check_input(m, query, q_rows, "query");
    check_input(m, key_value, kv_rows, "key");
    AG_CHECK(query != key_value || q_rows == kv_rows,
             "nn_mha_forward: query %s %s is also key but packed by another row map", query->name,
             tensor_shape_str(query));
    int B = q_rows ? q_rows->B : query->shape[0], Bkv = kv_rows ? kv_rows->B : key_value->shape[0];
    AG_CHECK(Bkv == B, "nn_mha_forward: batch sizes differ: query %s %s vs key %s %s", query->name,
             tensor_shape_str(query), key_value->name, tensor_shape_str(key_value));
    if (!gates_are_identity(m)) { /* the gates' path runs on the whole batch */
        Tensor *q = q_rows ? ag_scatter_rows(t, query, q_rows->idx, B, q_rows->T) : query;
        Tensor *kv = key_value == query ? q
                     : kv_rows          ? ag_scatter_rows(t, key_value, kv_rows->idx, B, kv_rows->T)
                                        : key_value;
        Tensor *kh = nn_mha_project_kv(t, m, kv, 0), *vh = nn_mha_project_kv(t, m, kv, 1);
        Tensor *y = mha_attend(t, m, q, kh, vh, &mk, rng, NULL);
        return q_rows ? ag_gather_rows(t, y, q_rows->idx, q_rows->n) : y;
    }
    int Tk = kv_rows ? kv_rows->T : key_value->shape[1];
    check_padding(&mk, query, B, Tk, key_value);
    MhaProj p = project(t, m, query, key_value, key_value); /* packed (n, width) */
    AgAttnLayout rows = {.kind = AG_ATTN_ROWS, .heads = p.heads};
    rows.q_rows = rows_of(t, q_rows, p.q);
    rows.k_rows = rows_of(t, kv_rows, p.k);
    Tensor *q = as_rows(t, p.q, q_rows);
    Tensor *k = p.k == p.q ? q : as_rows(t, p.k, kv_rows);
    Tensor *v = p.v == p.k ? k : as_rows(t, p.v, kv_rows);
    Tensor *o = ag_attention(t, q, k, v, &rows, &mk, m->dropout, rng, probs_of(m)); /* (nq, C) */
    if (!q_rows) o = ag_reshape(t, o, 3, (int[]){p.q->shape[0], p.q->shape[1], o->shape[1]});
    return nn_linear(t, &m->out_proj, o); /* (Nq, C) or (B, Tq, C) */
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
                          const AgAttnMask *masks, Rng *rng) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(query);
    AG_CHECK_ARG(kh);
    AG_CHECK_ARG(vh);
    check_input(m, query, NULL, "query");
    AgAttnMask mk = masks_or_none(masks, query);
    return mha_attend(t, m, query, kh, vh, &mk, rng, NULL);
}
