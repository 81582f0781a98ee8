/* hooks.c: the hook points of hooks.h: their names (one table; a seq2seq model's under
 * "encoder." and "decoder."), the glob that selects them, the list of a call's hooks, and the
 * calls a model makes at each point: nn_hook_run (any activation), nn_hook_heads (a head point
 * seen as (B, T, NH, HS)), nn_hook_norm_scale (a norm's read-only scale) and nn_hook_attend /
 * nn_hook_attention (attention as plain ops, causal or with key padding, so that q, k, v, the
 * scores and the pattern exist as tensors). Composes ag_ ops; no backward code.
 * Not here: the hooks themselves (../lens), the models (gpt.c, transformer.c, attention.c's
 * nn_mha_forward_hooked). Read next: ../lens/lens.c. */
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
    [NN_HOOK_CROSS_Q] = {"blocks.%d.cross_attn.hook_q", 1, 2, 1, 0},
    [NN_HOOK_CROSS_K] = {"blocks.%d.cross_attn.hook_k", 1, 2, 1, 0}, /* positions: the source's */
    [NN_HOOK_CROSS_V] = {"blocks.%d.cross_attn.hook_v", 1, 2, 1, 0},
    [NN_HOOK_CROSS_ATTN_SCORES] = {"blocks.%d.cross_attn.hook_attn_scores", 1, 1, 2, 0},
    [NN_HOOK_CROSS_PATTERN] = {"blocks.%d.cross_attn.hook_pattern", 1, 1, 2, 0},
    [NN_HOOK_CROSS_Z] = {"blocks.%d.cross_attn.hook_z", 1, 2, 1, 0},
    [NN_HOOK_CROSS_ATTN_OUT] = {"blocks.%d.hook_cross_attn_out", 1, -1, 1, 0},
    [NN_HOOK_RESID_MID_CROSS] = {"blocks.%d.hook_resid_mid_cross", 1, -1, 1, 0},
    [NN_HOOK_LN3_SCALE] = {"blocks.%d.ln3.hook_scale", 1, -1, 1, 1},
    [NN_HOOK_LN3_NORMALIZED] = {"blocks.%d.ln3.hook_normalized", 1, -1, 1, 0},
    [NN_HOOK_ROT_Q] = {"blocks.%d.attn.hook_rot_q", 1, 2, 1, 0},
    [NN_HOOK_ROT_K] = {"blocks.%d.attn.hook_rot_k", 1, 2, 1, 0},
};

static const char *const stack_prefix[NN_HOOK_N_STACKS] = {"", "encoder.", "decoder."};

NnHookPoint nn_hook_point_in(NnHookStack stack, NnHookKind kind, int layer) {
    AG_CHECK(stack >= 0 && stack < NN_HOOK_N_STACKS, "nn_hook_point: stack %d outside [0, %d)",
             (int)stack, NN_HOOK_N_STACKS);
    AG_CHECK(kind >= 0 && kind < NN_HOOK_N_KINDS, "nn_hook_point: kind %d outside [0, %d)",
             (int)kind, NN_HOOK_N_KINDS);
    AG_CHECK(kinds[kind].per_layer ? layer >= 0 && layer < NN_GPT_MAX_LAYERS : layer == -1,
             "nn_hook_point: layer %d of %s (per layer: %d)", layer, kinds[kind].fmt,
             kinds[kind].per_layer);
    int rot = kind == NN_HOOK_ROT_Q || kind == NN_HOOK_ROT_K;
    AG_CHECK(rot ? stack == NN_HOOK_GPT
                 : kind <= NN_HOOK_LNF_NORMALIZED || stack == NN_HOOK_DECODER,
             "nn_hook_point: %s is a %s point, not of %s", kinds[kind].fmt,
             rot ? "GPT's" : "seq2seq decoder's",
             stack == NN_HOOK_GPT       ? "a GPT"
             : stack == NN_HOOK_ENCODER ? "the encoder"
                                        : "the decoder");
    NnHookPoint p = {.stack = stack,
                     .kind = kind,
                     .layer = layer,
                     .head_axis = kinds[kind].head_axis,
                     .pos_axis = kinds[kind].pos_axis,
                     .read_only = kinds[kind].read_only};
    char name[NN_HOOK_NAME_LEN];
    if (kinds[kind].per_layer)
        snprintf(name, sizeof name, kinds[kind].fmt, layer);
    else
        snprintf(name, sizeof name, "%s", kinds[kind].fmt);
    snprintf(p.name, sizeof p.name, "%s%s", stack_prefix[stack], name);
    return p;
}

NnHookPoint nn_hook_point(NnHookKind kind, int layer) {
    return nn_hook_point_in(NN_HOOK_GPT, kind, layer);
}

NnHookPoint nn_hook_entry_point(const NnHookEntry *e) {
    AG_CHECK_ARG(e);
    return nn_hook_point_in(e->stack, e->kind, e->layer);
}

/* Calls visit(point, ctx) for every point of the part stack of n_layer layers, in the
 * forward's order of names (model-level kinds once, per-layer kinds for each layer). */
static void each_kind(NnHookStack stack, NnHookKind k, int n_layer,
                      void (*visit)(const NnHookPoint *p, void *ctx), void *ctx) {
    for (int l = 0; l < (kinds[k].per_layer ? n_layer : 1); l++) {
        NnHookPoint p = nn_hook_point_in(stack, k, kinds[k].per_layer ? l : -1);
        visit(&p, ctx);
    }
}
/* The kinds in the forward's order: a GPT's and an encoder's are the enum's up to ln_final's; a
 * GPT's add hook_rot_q and hook_rot_k after hook_v (as TransformerLens lists them; they run
 * only with rotary positions); a decoder's add the cross-attention (through ln3) after ln2 */
static void each_point_of(NnHookStack stack, int n_layer,
                          void (*visit)(const NnHookPoint *p, void *ctx), void *ctx) {
    for (int k = 0; k <= NN_HOOK_LNF_NORMALIZED; k++) {
        each_kind(stack, (NnHookKind)k, n_layer, visit, ctx);
        if (k == NN_HOOK_V && stack == NN_HOOK_GPT)
            for (int r = NN_HOOK_ROT_Q; r <= NN_HOOK_ROT_K; r++)
                each_kind(stack, (NnHookKind)r, n_layer, visit, ctx);
        if (k == NN_HOOK_LN2_NORMALIZED && stack == NN_HOOK_DECODER)
            for (int c = NN_HOOK_CROSS_Q; c <= NN_HOOK_LN3_NORMALIZED; c++)
                each_kind(stack, (NnHookKind)c, n_layer, visit, ctx);
    }
}

/* every point of h's model: a GPT's, or a seq2seq model's encoder then decoder */
static void each_point(const NnHooks *h, void (*visit)(const NnHookPoint *p, void *ctx),
                       void *ctx) {
    if (!h->seq2seq) {
        each_point_of(NN_HOOK_GPT, h->n_layer, visit, ctx);
        return;
    }
    each_point_of(NN_HOOK_ENCODER, h->n_enc, visit, ctx);
    each_point_of(NN_HOOK_DECODER, h->n_dec, visit, ctx);
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

/* what a model of h's layout is called in messages */
static void describe(const NnHooks *h, char *buf, size_t n) {
    if (h->seq2seq)
        snprintf(buf, n, "a seq2seq model of %d+%d layers", h->n_enc, h->n_dec);
    else
        snprintf(buf, n, "a GPT of %d layers", h->n_layer);
}

int nn_hooks_find(const NnHooks *h, const char *name, NnHookPoint *out) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(out);
    Finder f = {name, out, 0};
    each_point(h, find_visit, &f);
    char what[64];
    describe(h, what, sizeof what);
    if (!f.found) return ag_fail(AG_ERR_ARG, "'%s' is not a hook point of %s", name, what);
    return AG_OK;
}

int nn_hook_find(const char *name, int n_layer, NnHookPoint *out) {
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(out);
    NnHooks h;
    nn_hooks_init(&h, n_layer);
    return nn_hooks_find(&h, name, out);
}

void nn_hooks_init(NnHooks *h, int n_layer) {
    AG_CHECK_ARG(h);
    AG_CHECK(n_layer >= 1 && n_layer <= NN_GPT_MAX_LAYERS,
             "nn_hooks_init: n_layer %d outside [1, %d] (a build limit, NN_GPT_MAX_LAYERS)",
             n_layer, NN_GPT_MAX_LAYERS);
    memset(h, 0, sizeof *h);
    h->n_layer = n_layer;
}

void nn_hooks_init_seq2seq(NnHooks *h, int n_enc, int n_dec) {
    AG_CHECK_ARG(h);
    AG_CHECK(n_enc >= 0 && n_enc <= NN_MAX_LAYERS && n_dec >= 1 && n_dec <= NN_MAX_LAYERS,
             "nn_hooks_init_seq2seq: layers %d+%d outside [0, %d]+[1, %d]", n_enc, n_dec,
             NN_MAX_LAYERS, NN_MAX_LAYERS);
    nn_hooks_init(h, n_dec);
    h->seq2seq = 1, h->n_enc = n_enc, h->n_dec = n_dec;
}

void nn_hooks_init_like(NnHooks *h, const NnHooks *like) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(like);
    if (like->seq2seq)
        nn_hooks_init_seq2seq(h, like->n_enc, like->n_dec);
    else
        nn_hooks_init(h, like->n_layer);
}

void nn_hooks_free(NnHooks *h) {
    AG_CHECK_ARG(h);
    free(h->entries);
    NnHooks layout = *h;
    nn_hooks_init_like(h, &layout);
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
    h->entries[h->n++] = (NnHookEntry){p->stack, p->kind, p->layer, a->fn, a->ctx};
    h->on[p->stack][p->kind][p->layer < 0 ? 0 : p->layer] = 1;
    a->matched++;
}

int nn_hooks_add(NnHooks *h, const char *pattern, NnHookFn fn, void *ctx) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(pattern);
    AG_CHECK_ARG(fn);
    Adder a = {h, pattern, fn, ctx, 0};
    each_point(h, add_visit, &a);
    char what[64];
    describe(h, what, sizeof what);
    if (!a.matched)
        return ag_fail(AG_ERR_ARG, "hook pattern '%s' matches no hook point of %s (names like %s)",
                       pattern, what,
                       h->seq2seq ? "encoder.hook_embed, decoder.blocks.0.cross_attn.hook_pattern, "
                                    "decoder.ln_final.hook_normalized"
                                  : "hook_embed, blocks.0.attn.hook_pattern, "
                                    "ln_final.hook_normalized");
    return a.matched;
}

Tensor *nn_hook_run(Tape *t, NnHooks *h, NnHookKind kind, int layer, Tensor *x) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(x);
    if (!nn_hooks_on(h, kind, layer) || h->status != AG_OK) return x;
    NnHookPoint p = nn_hook_point_in(h->stack, kind, layer);
    for (int i = 0; i < h->n && h->status == AG_OK; i++) {
        const NnHookEntry *e = &h->entries[i];
        if (e->stack != h->stack || e->kind != kind || e->layer != layer) continue;
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

/* x (B, T, C) seen as rows -> the rows of x picked by ids (B, T): (B, T, C), an id read any
 * number of times (ag_embedding with x as its table, so that gradients reach x) */
static Tensor *rows_of(Tape *t, Tensor *x, int rows, int C, const int *ids, int B, int T) {
    return ag_embedding(t, ag_reshape(t, x, 2, (int[]){rows, C}), ids, B, T);
}

Tensor *nn_hook_norm(Tape *t, NnHooks *h, NnHookKind scale, int layer, Tensor *x, Tensor *weight,
                     Tensor *bias, double eps, int rms) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(x);
    AG_CHECK_ARG(weight);
    AG_CHECK(x->ndim == 3 && weight->ndim == 1 && weight->shape[0] == x->shape[2] &&
                 (!bias || tensor_same_shape(bias, weight)) && !(rms && bias),
             "nn_hook_norm: x %s must be (B, T, C), the weight %s (C), the bias (C) or NULL "
             "(RMSNorm: NULL)",
             tensor_shape_str(x), tensor_shape_str(weight));
    nn_hook_norm_scale(t, h, scale, layer, x, eps, rms);
    NnHookKind normalized = (NnHookKind)(scale + 1);
    if (!nn_hooks_on(h, normalized, layer))
        return nn_hook_run(t, h, normalized, layer,
                           rms ? ag_rmsnorm(t, x, weight, eps)
                               : ag_layernorm(t, x, weight, bias, eps));
    /* apart: x / scale (centred for LayerNorm) with a weight of ones, hooked, then times the
     * weight (its row repeated over (B, T)) plus the bias: the fused kernel's
     * ((x - mean) rstd) w + b in the same order, so the same bits */
    int B = x->shape[0], T = x->shape[1], C = x->shape[2];
    Tensor *ones = tensor_new(t->arena, 1, (int[]){C}, "norm_ones");
    tensor_fill(ones, 1);
    Tensor *xh = rms ? ag_rmsnorm(t, x, ones, eps) : ag_layernorm(t, x, ones, NULL, eps);
    xh = nn_hook_run(t, h, normalized, layer, xh);
    int *zeros = calloc((size_t)B * T, sizeof(int));
    AG_CHECK(zeros, "nn_hook_norm: out of memory for (%d, %d) ids", B, T);
    Tensor *y = ag_mul(t, xh, rows_of(t, weight, 1, C, zeros, B, T));
    free(zeros);
    return bias ? ag_add_bias(t, y, bias) : y;
}

int nn_hooks_explicit_at(const NnHooks *h, int layer, NnHookKind q) {
    AG_CHECK(q == NN_HOOK_Q || q == NN_HOOK_CROSS_Q,
             "nn_hooks_explicit_at: kind %d is not NN_HOOK_Q or NN_HOOK_CROSS_Q", (int)q);
    for (int k = 0; k < 5; k++) /* q, k, v, scores, pattern */
        if (nn_hooks_on(h, (NnHookKind)(q + k), layer)) return 1;
    return q == NN_HOOK_Q &&
           (nn_hooks_on(h, NN_HOOK_ROT_Q, layer) || nn_hooks_on(h, NN_HOOK_ROT_K, layer));
}

int nn_hooks_explicit_attention(const NnHooks *h, int layer) {
    return nn_hooks_explicit_at(h, layer, NN_HOOK_Q);
}

/* the kind k steps after a->q (q, k, v, scores, pattern, z) */
#define AT(a, k) ((NnHookKind)((a)->q + (k)))
enum { AT_Q, AT_K, AT_V, AT_SCORES, AT_PATTERN, AT_Z };

/* q (B, Tq, NH*HS), k and v (B, Tk, NKV*HS) with NKV dividing NH (causal: Tk >= Tq), or abort
 * naming the layer and the shapes */
static void check_qkv(const NnHookAttn *a, const Tensor *q, const Tensor *k, const Tensor *v) {
    int NH = a->n_heads, HS = NH > 0 && q->ndim == 3 ? q->shape[2] / NH : 0;
    int NKV = HS > 0 && k->ndim == 3 ? k->shape[2] / HS : 0;
    AG_CHECK(q->ndim == 3 && k->ndim == 3 && tensor_same_shape(k, v) &&
                 q->shape[0] == k->shape[0] && NH > 0 && HS > 0 && q->shape[2] == NH * HS &&
                 NKV > 0 && k->shape[2] == NKV * HS && NH % NKV == 0 &&
                 (!a->causal || k->shape[1] >= q->shape[1]),
             "nn_hook_attention: blocks.%d: q %s, k %s and v %s must be (B, Tq, NH*HS) and "
             "(B, Tk, NKV*HS) twice for %d heads, NKV dividing NH (causal: Tk >= Tq)",
             a->layer, tensor_shape_str(q), tensor_shape_str(k), tensor_shape_str(v), NH);
}

Tensor *nn_hook_attend(Tape *t, NnHooks *h, const NnHookAttn *a, Tensor *q, Tensor *k, Tensor *v) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(q);
    AG_CHECK_ARG(k);
    AG_CHECK_ARG(v);
    int NH = a->n_heads, l = a->layer;
    check_qkv(a, q, k, v);
    int B = q->shape[0], Tq = q->shape[1], Tk = k->shape[1], HS = q->shape[2] / NH;
    int NKV = k->shape[2] / HS;
    if (NKV != NH) { /* grouped-query: key/value head g serves query heads [g r, (g + 1) r),
                      * TransformerLens's repeat_interleave (gradients sum over the group) */
        int *ids = malloc((size_t)B * Tk * NH * sizeof(int));
        AG_CHECK(ids, "nn_hook_attention: out of memory for (%d, %d, %d) ids", B, Tk, NH);
        for (int r = 0; r < B * Tk; r++)
            for (int hd = 0; hd < NH; hd++) ids[r * NH + hd] = r * NKV + hd / (NH / NKV);
        k = ag_reshape(t, rows_of(t, k, B * Tk * NKV, HS, ids, 1, B * Tk * NH), 3,
                       (int[]){B, Tk, NH * HS});
        v = ag_reshape(t, rows_of(t, v, B * Tk * NKV, HS, ids, 1, B * Tk * NH), 3,
                       (int[]){B, Tk, NH * HS});
        free(ids);
    }
    Tensor *qh = ag_split_heads(t, q, NH), *kh = ag_split_heads(t, k, NH);
    Tensor *vh = ag_split_heads(t, v, NH);
    /* the scores (B, NH, Tq, Tk): q k^T / sqrt(HS), -inf where a key is masked */
    Tensor *mask = tensor_new4(t->arena, B, NH, Tq, Tk, "attn_mask");
    for (int b = 0; b < B; b++)
        for (int n = 0; n < NH; n++)
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++) {
                    int off = (a->causal && j > i + Tk - Tq) ||
                              (a->key_padding && a->key_padding[(size_t)b * Tk + j]);
                    mask->data[(((size_t)b * NH + n) * Tq + i) * Tk + j] =
                        off ? -(Real)INFINITY : 0;
                }
    Tensor *s = ag_scale(t, ag_matmul_bt(t, qh, kh), 1.0 / sqrt((double)HS));
    s = nn_hook_run(t, h, AT(a, AT_SCORES), l, ag_add(t, s, mask));
    Tensor *p = nn_hook_run(t, h, AT(a, AT_PATTERN), l, ag_softmax(t, s));
    if (a->probs) *a->probs = p;
    Tensor *y = ag_matmul(t, ag_dropout(t, p, a->dropout, a->rng), vh); /* (B, NH, Tq, HS) */
    return ag_merge_heads(t, y);                                        /* (B, Tq, C) */
}

Tensor *nn_hook_attention_at(Tape *t, NnHooks *h, const NnHookAttn *a, Tensor *q, Tensor *k,
                             Tensor *v) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(q);
    AG_CHECK_ARG(k);
    AG_CHECK_ARG(v);
    check_qkv(a, q, k, v);
    int nkv = k->shape[2] / (q->shape[2] / a->n_heads); /* k and v: the key/value heads */
    q = nn_hook_heads(t, h, AT(a, AT_Q), a->layer, q, a->n_heads);
    k = nn_hook_heads(t, h, AT(a, AT_K), a->layer, k, nkv);
    v = nn_hook_heads(t, h, AT(a, AT_V), a->layer, v, nkv);
    return nn_hook_attend(t, h, a, q, k, v);
}

Tensor *nn_hook_attention(Tape *t, NnHooks *h, int layer, Tensor *q, Tensor *k, Tensor *v,
                          int n_heads, double dropout, Rng *rng, Tensor **probs) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(q);
    AG_CHECK_ARG(k);
    AG_CHECK_ARG(v);
    NnHookAttn a = {.layer = layer,
                    .q = NN_HOOK_Q,
                    .n_heads = n_heads,
                    .causal = 1,
                    .dropout = dropout,
                    .rng = rng,
                    .probs = probs};
    return nn_hook_attention_at(t, h, &a, q, k, v);
}
