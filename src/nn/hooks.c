/* hooks.c: the hook points of hooks.h: their names (one table), the glob that selects them, the
 * list of a call's hooks, and the calls a model makes at each point: nn_hook_run (any
 * activation), nn_hook_heads (a head point seen as (B, T, NH, HS)), nn_hook_norm_scale (a
 * norm's read-only scale) and nn_hook_attention (causal attention as plain ops, so that q, k,
 * v, the scores and the pattern exist as tensors). Composes ag_ ops; no backward code.
 * Not here: the hooks themselves (../lens), the model (gpt.c). Read next: ../lens/lens.c. */
#include "hooks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each kind: its name (with %d for the layer when per_layer), the axes of heads and query
 * positions in its activation, and whether a replacement is refused. */
static const struct {
    const char *fmt;
    int per_layer, head_axis, pos_axis, read_only;
} kinds[NN_HOOK_N_KINDS] = {
    [NN_HOOK_EMBED] = {"hook_embed", 0, -1, 1, 0},
    [NN_HOOK_POS_EMBED] = {"hook_pos_embed", 0, -1, 1, 0},
    [NN_HOOK_RESID_PRE] = {"blocks.%d.hook_resid_pre", 1, -1, 1, 0},
    [NN_HOOK_LN1_SCALE] = {"blocks.%d.ln1.hook_scale", 1, -1, 1, 1},
    [NN_HOOK_LN1_NORMALIZED] = {"blocks.%d.ln1.hook_normalized", 1, -1, 1, 0},
    [NN_HOOK_Q] = {"blocks.%d.attn.hook_q", 1, 2, 1, 0},
    [NN_HOOK_K] = {"blocks.%d.attn.hook_k", 1, 2, 1, 0},
    [NN_HOOK_V] = {"blocks.%d.attn.hook_v", 1, 2, 1, 0},
    [NN_HOOK_ATTN_SCORES] = {"blocks.%d.attn.hook_attn_scores", 1, 1, 2, 0},
    [NN_HOOK_PATTERN] = {"blocks.%d.attn.hook_pattern", 1, 1, 2, 0},
    [NN_HOOK_Z] = {"blocks.%d.attn.hook_z", 1, 2, 1, 0},
    [NN_HOOK_ATTN_OUT] = {"blocks.%d.hook_attn_out", 1, -1, 1, 0},
    [NN_HOOK_RESID_MID] = {"blocks.%d.hook_resid_mid", 1, -1, 1, 0},
    [NN_HOOK_LN2_SCALE] = {"blocks.%d.ln2.hook_scale", 1, -1, 1, 1},
    [NN_HOOK_LN2_NORMALIZED] = {"blocks.%d.ln2.hook_normalized", 1, -1, 1, 0},
    [NN_HOOK_MLP_PRE] = {"blocks.%d.mlp.hook_pre", 1, -1, 1, 0},
    [NN_HOOK_MLP_POST] = {"blocks.%d.mlp.hook_post", 1, -1, 1, 0},
    [NN_HOOK_MLP_OUT] = {"blocks.%d.hook_mlp_out", 1, -1, 1, 0},
    [NN_HOOK_RESID_POST] = {"blocks.%d.hook_resid_post", 1, -1, 1, 0},
    [NN_HOOK_LNF_SCALE] = {"ln_final.hook_scale", 0, -1, 1, 1},
    [NN_HOOK_LNF_NORMALIZED] = {"ln_final.hook_normalized", 0, -1, 1, 0},
};

NnHookPoint nn_hook_point(NnHookKind kind, int layer) {
    AG_CHECK(kind >= 0 && kind < NN_HOOK_N_KINDS, "nn_hook_point: kind %d outside [0, %d)",
             (int)kind, NN_HOOK_N_KINDS);
    AG_CHECK(kinds[kind].per_layer ? layer >= 0 && layer < NN_MAX_LAYERS : layer == -1,
             "nn_hook_point: layer %d of %s (per layer: %d)", layer, kinds[kind].fmt,
             kinds[kind].per_layer);
    NnHookPoint p = {.kind = kind,
                     .layer = layer,
                     .head_axis = kinds[kind].head_axis,
                     .pos_axis = kinds[kind].pos_axis,
                     .read_only = kinds[kind].read_only};
    if (kinds[kind].per_layer)
        snprintf(p.name, sizeof p.name, kinds[kind].fmt, layer);
    else
        snprintf(p.name, sizeof p.name, "%s", kinds[kind].fmt);
    return p;
}

/* Calls visit(point, ctx) for every point of a model of n_layer layers, in the forward's
 * order of names (model-level kinds once, per-layer kinds for each layer). */
static void each_point(int n_layer, void (*visit)(const NnHookPoint *p, void *ctx), void *ctx) {
    for (int k = 0; k < NN_HOOK_N_KINDS; k++)
        for (int l = 0; l < (kinds[k].per_layer ? n_layer : 1); l++) {
            NnHookPoint p = nn_hook_point((NnHookKind)k, kinds[k].per_layer ? l : -1);
            visit(&p, ctx);
        }
}

int nn_hook_glob(const char *pattern, const char *name) {
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(name);
    const char *star = NULL, *resume = NULL; /* the last '*' and where its run ends so far */
    while (*name) {
        if (*pattern == '*') {
            star = pattern++, resume = name;
        } else if (*pattern == '?' || *pattern == *name) {
            pattern++, name++;
        } else if (star) { /* the last '*' takes one more character */
            pattern = star + 1, name = ++resume;
        } else {
            return 0;
        }
    }
    while (*pattern == '*') pattern++;
    return *pattern == 0;
}

typedef struct Finder {
    const char *name;
    NnHookPoint *out;
    int found;
} Finder;
static void find_visit(const NnHookPoint *p, void *ctx) {
    Finder *f = ctx;
    if (!f->found && strcmp(p->name, f->name) == 0) *f->out = *p, f->found = 1;
}

int nn_hook_find(const char *name, int n_layer, NnHookPoint *out) {
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(out);
    Finder f = {name, out, 0};
    each_point(n_layer, find_visit, &f);
    if (!f.found)
        return ag_fail(AG_ERR_ARG, "'%s' is not a hook point of a model of %d layers", name,
                       n_layer);
    return AG_OK;
}

void nn_hooks_init(NnHooks *h, int n_layer) {
    AG_CHECK_ARG(h);
    AG_CHECK(n_layer >= 1 && n_layer <= NN_MAX_LAYERS, "nn_hooks_init: n_layer %d outside [1, %d]",
             n_layer, NN_MAX_LAYERS);
    memset(h, 0, sizeof *h);
    h->n_layer = n_layer;
}

void nn_hooks_free(NnHooks *h) {
    AG_CHECK_ARG(h);
    free(h->entries);
    int n_layer = h->n_layer;
    memset(h, 0, sizeof *h);
    h->n_layer = n_layer;
}

typedef struct Adder {
    NnHooks *h;
    const char *pattern;
    NnHookFn fn;
    void *ctx;
    int matched;
} Adder;
static void add_visit(const NnHookPoint *p, void *ctx) {
    Adder *a = ctx;
    if (!nn_hook_glob(a->pattern, p->name)) return;
    NnHooks *h = a->h;
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 32;
        h->entries = realloc(h->entries, (size_t)h->cap * sizeof *h->entries);
        AG_CHECK(h->entries, "nn_hooks_add: out of memory for %d hooks", h->cap);
    }
    h->entries[h->n++] = (NnHookEntry){p->kind, p->layer, a->fn, a->ctx};
    h->on[p->kind][p->layer < 0 ? 0 : p->layer] = 1;
    a->matched++;
}

int nn_hooks_add(NnHooks *h, const char *pattern, NnHookFn fn, void *ctx) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(fn);
    Adder a = {h, pattern, fn, ctx, 0};
    each_point(h->n_layer, add_visit, &a);
    if (!a.matched)
        return ag_fail(AG_ERR_ARG,
                       "hook pattern '%s' matches no hook point of a model of %d layers (names "
                       "like hook_embed, blocks.0.attn.hook_pattern, ln_final.hook_normalized)",
                       pattern, h->n_layer);
    return a.matched;
}

Tensor *nn_hook_run(Tape *t, NnHooks *h, NnHookKind kind, int layer, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(x);
    if (!nn_hooks_on(h, kind, layer) || h->status != AG_OK) return x;
    NnHookPoint p = nn_hook_point(kind, layer);
    for (int i = 0; i < h->n && h->status == AG_OK; i++) {
        const NnHookEntry *e = &h->entries[i];
        if (e->kind != kind || e->layer != layer) continue;
        Tensor *y = x;
        int rc = e->fn(t, &y, &p, e->ctx);
        if (rc != AG_OK) {
            h->status = rc < 0 ? rc : AG_ERR_ARG;
            snprintf(h->error, sizeof h->error, "hook at %s: %s", p.name, ag_last_error());
            return x;
        }
        AG_CHECK(y != NULL && (y == x || !p.read_only),
                 "hook at %s: the point is read-only (the fused norm takes no replacement scale)",
                 p.name);
        AG_CHECK(tensor_same_shape(x, y),
                 "hook at %s: the replacement %s has shape %s, the activation %s", p.name, y->name,
                 tensor_shape_str(y), tensor_shape_str(x));
        x = y;
    }
    return x;
}

Tensor *nn_hook_heads(Tape *t, NnHooks *h, NnHookKind kind, int layer, Tensor *x, int n_heads) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(x);
    if (!nn_hooks_on(h, kind, layer)) return x;
    int B = x->shape[0], T = x->shape[1], W = x->shape[2];
    Tensor *y =
        nn_hook_run(t, h, kind, layer, ag_reshape(t, x, 4, (int[]){B, T, n_heads, W / n_heads}));
    return ag_reshape(t, y, 3, (int[]){B, T, W});
}

void nn_hook_norm_scale(Tape *t, NnHooks *h, NnHookKind kind, int layer, const Tensor *x,
                        double eps, int rms) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(x);
    if (!nn_hooks_on(h, kind, layer)) return;
    int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    Tensor *s = tensor_new3(t->arena, B, T, 1, "norm_scale"); /* (B, T, 1) */
    for (size_t r = 0; r < (size_t)B * T; r++) { /* in double, 4 partial sums (for speed) */
        const Real *row = x->data + r * C;
        double m[4] = {0}, v[4] = {0}, mean = 0;
        int c = 0;
        for (; !rms && c + 4 <= C; c += 4)
            for (int k = 0; k < 4; k++) m[k] += row[c + k];
        for (; !rms && c < C; c++) m[0] += row[c];
        mean = (m[0] + m[1] + m[2] + m[3]) / C;
        for (c = 0; c + 4 <= C; c += 4)
            for (int k = 0; k < 4; k++) v[k] += (row[c + k] - mean) * (row[c + k] - mean);
        for (; c < C; c++) v[0] += (row[c] - mean) * (row[c] - mean);
        s->data[r] = (Real)sqrt((v[0] + v[1] + v[2] + v[3]) / C + eps);
    }
    nn_hook_run(t, h, kind, layer, s);
}

int nn_hooks_explicit_attention(const NnHooks *h, int layer) {
    return nn_hooks_on(h, NN_HOOK_Q, layer) || nn_hooks_on(h, NN_HOOK_K, layer) ||
           nn_hooks_on(h, NN_HOOK_V, layer) || nn_hooks_on(h, NN_HOOK_ATTN_SCORES, layer) ||
           nn_hooks_on(h, NN_HOOK_PATTERN, layer);
}

Tensor *nn_hook_attention(Tape *t, NnHooks *h, int layer, Tensor *q, Tensor *k, Tensor *v,
                          int n_heads, double dropout, Rng *rng, Tensor **probs) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(q);
    AG_CHECK_ARG(k);
    AG_CHECK_ARG(v);
    AG_CHECK(q->ndim == 3 && tensor_same_shape(q, k) && tensor_same_shape(q, v),
             "nn_hook_attention: blocks.%d: q %s, k %s and v %s must be the same (B, T, NH*HS): "
             "grouped-query attention has no hooked path",
             layer, tensor_shape_str(q), tensor_shape_str(k), tensor_shape_str(v));
    int B = q->shape[0], T = q->shape[1], HS = q->shape[2] / n_heads;
    Tensor *qh = ag_split_heads(t, nn_hook_heads(t, h, NN_HOOK_Q, layer, q, n_heads), n_heads);
    Tensor *kh = ag_split_heads(t, nn_hook_heads(t, h, NN_HOOK_K, layer, k, n_heads), n_heads);
    Tensor *vh = ag_split_heads(t, nn_hook_heads(t, h, NN_HOOK_V, layer, v, n_heads), n_heads);
    /* the scores (B, NH, T, T): q k^T / sqrt(HS), -inf above the diagonal */
    Tensor *mask = tensor_new4(t->arena, B, n_heads, T, T, "causal_mask");
    for (size_t r = 0; r < (size_t)B * n_heads; r++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                mask->data[(r * T + i) * T + j] = j > i ? -(Real)INFINITY : 0;
    Tensor *s = ag_scale(t, ag_matmul_bt(t, qh, kh), 1.0 / sqrt((double)HS));
    s = nn_hook_run(t, h, NN_HOOK_ATTN_SCORES, layer, ag_add(t, s, mask));
    Tensor *p = nn_hook_run(t, h, NN_HOOK_PATTERN, layer, ag_softmax(t, s));
    if (probs) *probs = p;
    Tensor *y = ag_matmul(t, ag_dropout(t, p, dropout, rng), vh); /* (B, NH, T, HS) */
    return ag_merge_heads(t, y);                                  /* (B, T, C) */
}
