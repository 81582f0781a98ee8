/* lens.c: the cache, ablation, patching and attribution of lens.h, in that order. Each is a hook
 * (an NnHookFn of ../nn/hooks.h) or a loop of hooked forwards; a hook that replaces an
 * activation builds the replacement with ag_ ops (x * keep + values), so that backward flows
 * through what it kept.
 * Not here: where the hooks run (../nn/hooks.c, ../nn/gpt.c). Read next: docs/lens.md. */
#include "lens.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cache ---- */

void lens_cache_init(LensCache *c, int with_grads) {
    AG_CHECK_ARG(c);
    memset(c, 0, sizeof *c);
    c->with_grads = with_grads;
}

void lens_cache_free(LensCache *c) {
    AG_CHECK_ARG(c);
    for (int i = 0; i < c->n; i++) free(c->acts[i].data), free(c->acts[i].grad);
    free(c->acts);
    memset(c, 0, sizeof *c);
}

const LensAct *lens_cache_get(const LensCache *c, const char *name) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(name);
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->acts[i].at.name, name) == 0) return &c->acts[i];
    return NULL;
}

/* a hook's arguments (ctx: the hook's struct) */
#define CHECK_HOOK_ARGS()                                                                          \
    AG_CHECK_ARG(t);                                                                               \
    AG_CHECK_ARG(x);                                                                               \
    AG_CHECK_ARG(*x);                                                                              \
    AG_CHECK_ARG(at);                                                                              \
    AG_CHECK_ARG(ctx)

int lens_cache_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    CHECK_HOOK_ARGS();
    LensCache *c = ctx;
    const Tensor *v = *x;
    LensAct *a = (LensAct *)lens_cache_get(c, at->name);
    if (!a) {
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 32;
            LensAct *acts = realloc(c->acts, (size_t)cap * sizeof *acts);
            if (!acts) return ag_fail(AG_ERR_NOMEM, "the cache: out of memory for %d entries", cap);
            c->acts = acts, c->cap = cap;
        }
        a = &c->acts[c->n++];
        memset(a, 0, sizeof *a);
    }
    if (a->size != v->size) {
        free(a->data), free(a->grad);
        a->grad = NULL;
        a->data = malloc(v->size * sizeof(Real));
        if (!a->data) {
            a->size = 0;
            return ag_fail(AG_ERR_NOMEM, "the cache: out of memory for %s %s", at->name,
                           tensor_shape_str(v));
        }
    }
    a->at = *at;
    a->ndim = v->ndim;
    memcpy(a->shape, v->shape, sizeof a->shape);
    a->size = v->size;
    memcpy(a->data, v->data, v->size * sizeof(Real));
    a->tap = NULL;
    if (c->with_grads && !at->read_only && !t->no_grad) {
        a->tap = tensor_zeros(t->arena, v->ndim, v->shape, "lens_tap");
        tensor_requires_grad(a->tap);
        *x = ag_add(t, *x, a->tap); /* x + 0: the same values */
    }
    return AG_OK;
}

void lens_cache_take_grads(LensCache *c) {
    AG_CHECK_ARG(c);
    for (int i = 0; i < c->n; i++) {
        LensAct *a = &c->acts[i];
        if (!a->tap) continue;
        if (!a->grad) a->grad = malloc(a->size * sizeof(Real));
        AG_CHECK(a->grad, "lens_cache_take_grads: out of memory for %s", a->at.name);
        memcpy(a->grad, a->tap->grad, a->size * sizeof(Real));
        a->tap = NULL;
    }
}

/* s as a JSON string into buf at *len (cap bytes); 0 when it does not fit */
static int json_str(char *buf, size_t cap, size_t *len, const char *s) {
    size_t n = *len;
    if (n + 1 >= cap) return 0;
    buf[n++] = '"';
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[8];
        int k = ch == '"' || ch == '\\' ? snprintf(esc, sizeof esc, "\\%c", ch)
                : ch < 0x20             ? snprintf(esc, sizeof esc, "\\u%04x", ch)
                                        : snprintf(esc, sizeof esc, "%c", ch);
        if (n + (size_t)k + 2 >= cap) return 0;
        memcpy(buf + n, esc, (size_t)k);
        n += (size_t)k;
    }
    buf[n++] = '"';
    buf[n] = 0;
    *len = n;
    return 1;
}

/* strs[0..n) as a JSON list, malloc'd (NULL: out of memory) */
static char *json_list(const char *const *strs, int n, size_t *len) {
    size_t cap = 16;
    for (int i = 0; i < n; i++) cap += 6 * strlen(strs[i]) + 4;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t k = 0;
    buf[k++] = '[';
    for (int i = 0; i < n; i++) {
        if (i) buf[k++] = ',';
        json_str(buf, cap, &k, strs[i]);
    }
    buf[k++] = ']';
    buf[k] = 0;
    *len = k;
    return buf;
}

static int seq2seq_config_json(char *buf, size_t cap, const Seq2SeqConfig *c) {
    const TransformerConfig *l = &c->layer;
    return snprintf(buf, cap,
                    "{\"model\": \"seq2seq\", \"src_vocab\": %d, \"tgt_vocab\": %d, "
                    "\"n_enc_layers\": %d, \"n_dec_layers\": %d, \"max_len\": %d, \"pad_id\": %d, "
                    "\"learned_pos\": %d, \"tie_output\": %d, \"d_model\": %d, \"n_heads\": %d, "
                    "\"n_kv_heads\": %d, \"d_ff\": %d, \"pre_ln\": %d, \"act\": \"%s\", "
                    "\"ln_eps\": %.17g, \"dropout\": %.17g}",
                    c->src_vocab, c->tgt_vocab, c->n_enc_layers, c->n_dec_layers, c->max_len,
                    c->pad_id, c->learned_pos, c->tie_output, l->d_model, l->n_heads, l->n_kv_heads,
                    l->d_ff, l->pre_ln, l->act == NN_GELU ? "gelu" : "relu", l->ln_eps, l->dropout);
}

static int config_json(char *buf, size_t cap, const GptConfig *c) {
    return snprintf(buf, cap,
                    "{\"model\": \"gpt\", \"style\": \"%s\", \"vocab_size\": %d, \"block_size\": "
                    "%d, \"n_layer\": %d, \"n_head\": %d, \"n_embd\": %d, \"n_kv_head\": %d, "
                    "\"no_bias\": %d, \"untied\": %d, \"ffn_hidden\": %d, \"rope_base\": %.17g, "
                    "\"norm_eps\": %.17g, \"dropout\": %.17g}",
                    c->style == NN_LLAMA ? "llama" : "gpt2", c->vocab_size, c->block_size,
                    c->n_layer, c->n_head, c->n_embd, c->n_kv_head, c->no_bias, c->untied,
                    c->ffn_hidden, c->rope_base, c->norm_eps, c->dropout);
}

/* tokens (B, T) as int32 under key, their strings (may be NULL) as JSON under strs_key; the
 * writer keeps pointers (npz.h), so the copies go to keep[0..2), freed after npz_write */
static int add_tokens(NpzWriter *w, const char *path, const char *key, const char *strs_key,
                      const int *ids, int B, int T, const char *const *strs, void *keep[2]) {
    size_t n = (size_t)B * T, len = 0;
    int32_t *tokens = calloc(n ? n : 1, sizeof *tokens);
    char *json = strs ? json_list(strs, (int)n, &len) : NULL;
    keep[0] = tokens, keep[1] = json;
    if (!tokens || (strs && !json))
        return ag_fail(AG_ERR_NOMEM, "%s: out of memory for %zu tokens", path, n);
    for (size_t i = 0; i < n; i++) tokens[i] = ids[i];
    npz_add_i32(w, key, 2, (int64_t[]){B, T}, tokens);
    if (json) npz_add_bytes(w, strs_key, json, len);
    return AG_OK;
}

int lens_cache_save(const LensCache *c, const char *path, const LensRunInfo *run) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(run);
    AG_CHECK(run->tokens && run->B > 0 && run->T > 0, "lens_cache_save: tokens %p (B, T) (%d,%d)",
             (const void *)run->tokens, run->B, run->T);
    NpzWriter *w = npz_writer_new();
    for (int i = 0; i < c->n; i++) {
        const LensAct *a = &c->acts[i];
        int64_t shape[AG_MAX_DIMS];
        for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[d];
        /* every activation finite (a NaN or inf means a model that overflowed, named by the
         * first point in forward order that holds one), but the attention scores, -inf above
         * the diagonal; what overflows there reaches the pattern after them */
        npz_writer_finite(w, strstr(a->at.name, "hook_attn_scores") == NULL);
        npz_add(w, a->at.name, NPZ_REAL, a->ndim, shape, a->data);
        if (a->grad) {
            char gname[NN_HOOK_NAME_LEN + 8];
            snprintf(gname, sizeof gname, "%s.grad", a->at.name);
            npz_add(w, gname, NPZ_REAL, a->ndim, shape, a->grad);
        }
    }
    AG_CHECK(!run->src_tokens || run->S > 0, "lens_cache_save: source tokens (B, S) (%d,%d)",
             run->B, run->S);
    char cfg[1024];
    void *keep[4] = {0};
    int rc = add_tokens(w, path, "tokens", "token_strs", run->tokens, run->B, run->T,
                        run->token_strs, keep);
    if (rc == AG_OK && run->src_tokens)
        rc = add_tokens(w, path, "src_tokens", "src_token_strs", run->src_tokens, run->B, run->S,
                        run->src_token_strs, keep + 2);
    if (rc == AG_OK) {
        if (run->cfg)
            npz_add_bytes(w, "config", cfg, (size_t)config_json(cfg, sizeof cfg, run->cfg));
        else if (run->seq2seq_cfg)
            npz_add_bytes(w, "config", cfg,
                          (size_t)seq2seq_config_json(cfg, sizeof cfg, run->seq2seq_cfg));
        rc = npz_write(w, path, 0, NULL);
    }
    npz_writer_free(w);
    for (int i = 0; i < 4; i++) free(keep[i]);
    return rc;
}

int lens_hooks_add_list(NnHooks *h, const char *list, const char *flag, NnHookFn fn, void *ctx) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(list);
    AG_CHECK_ARG(flag);
    AG_CHECK_ARG(fn);
    size_t len = strlen(list);
    char *p = malloc(len + 1);
    AG_CHECK(p, "%s: out of memory", __func__);
    int total = 0, k = 1;
    for (const char *at = list;; k++) {
        const char *end = strchr(at, ',');
        size_t n = end ? (size_t)(end - at) : strlen(at);
        if (n == 0) {
            total = ag_fail(AG_ERR_ARG,
                            "%s '%s': pattern %d is empty (patterns are separated "
                            "by single commas)",
                            flag, list, k);
            break;
        }
        memcpy(p, at, n);
        p[n] = 0;
        int got = nn_hooks_add(h, p, fn, ctx);
        if (got < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ag_last_error());
            total = ag_fail(got, "%s '%s': %s", flag, list, msg);
            break;
        }
        total += got;
        if (!end) break;
        at = end + 1;
    }
    free(p);
    return total;
}

/* ---- replacing chosen elements ---- */

static int in_list(const int *list, int n, int v) {
    if (n == 0) return 1;
    for (int i = 0; i < n; i++)
        if (list[i] == v) return 1;
    return 0;
}

/* element i of an activation of shape (ndim) at point at: its head (-1: no head axis) and
 * query position */
static void coords(const NnHookPoint *at, int ndim, const int *shape, size_t i, int *head,
                   int *pos) {
    *head = -1, *pos = -1;
    for (int d = ndim - 1; d >= 0; d--) {
        int c = (int)(i % (size_t)shape[d]);
        i /= (size_t)shape[d];
        if (d == at->head_axis) *head = c;
        if (d == at->pos_axis) *pos = c;
    }
}

static int check_select(const NnHookPoint *at, const LensSelect *s) {
    if (s->n_heads && at->head_axis < 0)
        return ag_fail(AG_ERR_ARG, "%s has no head axis: heads cannot be chosen there", at->name);
    return AG_OK;
}

/* *x -> x * keep + values where keep is 0 at the chosen elements (values there: vals, or 0 when
 * vals is NULL) and 1 elsewhere. A -inf of x (a masked score) stays. */
static void replace(Tape *t, Tensor **x, const NnHookPoint *at, const LensSelect *s,
                    const Real *vals, size_t vals_period) {
    Tensor *v = *x;
    Tensor *keep = tensor_new(t->arena, v->ndim, v->shape, "lens_keep");
    Tensor *put = vals ? tensor_new(t->arena, v->ndim, v->shape, "lens_values") : NULL;
    for (size_t i = 0; i < v->size; i++) {
        int head, pos;
        coords(at, v->ndim, v->shape, i, &head, &pos);
        int chosen = in_list(s->heads, s->n_heads, head) &&
                     in_list(s->positions, s->n_positions, pos) &&
                     !(isinf(v->data[i]) && v->data[i] < 0);
        keep->data[i] = chosen ? 0 : 1;
        if (put) put->data[i] = chosen ? vals[i % vals_period] : 0;
    }
    Tensor *y = ag_mul(t, v, keep);
    *x = put ? ag_add(t, y, put) : y;
}

int lens_ablate_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    CHECK_HOOK_ARGS();
    const LensAblation *a = ctx;
    int rc = check_select(at, &a->sel);
    if (rc != AG_OK) return rc;
    if (a->mode == LENS_ZERO) {
        replace(t, x, at, &a->sel, NULL, 1);
        return AG_OK;
    }
    const LensAct *src = a->means ? lens_cache_get(a->means, at->name) : NULL;
    const Tensor *v = *x;
    if (!src)
        return ag_fail(AG_ERR_ARG, "mean ablation of %s: the means' cache lacks it", at->name);
    int same = src->ndim == v->ndim;
    for (int d = 1; d < v->ndim && same; d++) same = src->shape[d] == v->shape[d];
    if (!same)
        return ag_fail(AG_ERR_SHAPE,
                       "mean ablation of %s: the cache holds (%d,...) of %d dims, the "
                       "activation is %s",
                       at->name, src->shape[0], src->ndim, tensor_shape_str(v));
    size_t per = v->size / (size_t)v->shape[0]; /* one batch row */
    Real *mean = arena_alloc(t->arena, per * sizeof(Real));
    for (size_t i = 0; i < per; i++) {
        double s = 0;
        for (int b = 0; b < src->shape[0]; b++) s += src->data[(size_t)b * per + i];
        mean[i] = (Real)(s / src->shape[0]);
    }
    replace(t, x, at, &a->sel, mean, per);
    return AG_OK;
}

int lens_patch_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    CHECK_HOOK_ARGS();
    const LensPatch *p = ctx;
    int rc = check_select(at, &p->sel);
    if (rc != AG_OK) return rc;
    const LensAct *src = p->src ? lens_cache_get(p->src, at->name) : NULL;
    if (!src) return ag_fail(AG_ERR_ARG, "patching %s: the source cache lacks it", at->name);
    const Tensor *v = *x;
    int same = src->ndim == v->ndim;
    for (int d = 0; d < v->ndim && same; d++) same = src->shape[d] == v->shape[d];
    if (!same)
        return ag_fail(AG_ERR_SHAPE, "patching %s: the source holds %d dims (%d,...), the run %s",
                       at->name, src->ndim, src->shape[0], tensor_shape_str(v));
    replace(t, x, at, &p->sel, src->data, src->size);
    return AG_OK;
}

/* ---- metrics ---- */

Tensor *lens_metric(Tape *t, const LensMetric *mt, Tensor *logits) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(mt);
    AG_CHECK_ARG(logits);
    AG_CHECK(logits->ndim == 3, "lens_metric: logits %s must be (B, T, V)",
             tensor_shape_str(logits));
    int B = logits->shape[0], T = logits->shape[1], V = logits->shape[2];
    if (mt->kind == LENS_LOSS) {
        AG_CHECK(mt->targets, "lens_metric: the loss needs targets (B, T) = (%d,%d)", B, T);
        return ag_cross_entropy(t, logits, mt->targets, -1);
    }
    AG_CHECK(mt->kind == LENS_LOGIT_DIFF && mt->good && mt->bad && mt->pos >= -1 && mt->pos < T,
             "lens_metric: kind %d, good/bad tokens %p %p, position %d of logits %s", (int)mt->kind,
             (const void *)mt->good, (const void *)mt->bad, mt->pos, tensor_shape_str(logits));
    int pos = mt->pos < 0 ? T - 1 : mt->pos;
    Tensor *r = tensor_zeros(t->arena, 3, logits->shape, "lens_logit_diff"); /* (B, T, V) */
    for (int b = 0; b < B; b++) {
        AG_CHECK(mt->good[b] >= 0 && mt->good[b] < V && mt->bad[b] >= 0 && mt->bad[b] < V,
                 "lens_metric: tokens %d and %d of row %d outside [0, %d)", mt->good[b], mt->bad[b],
                 b, V);
        Real *row = r->data + ((size_t)b * T + pos) * V;
        row[mt->good[b]] += (Real)(1.0 / B);
        row[mt->bad[b]] -= (Real)(1.0 / B);
    }
    return ag_sum(t, ag_mul(t, logits, r));
}

int lens_logit_diff_metric(const char *kind, const char *good, const char *bad, int pos, int B,
                           int T, LensTokenFn token, const void *ctx, LensOwnedMetric *m) {
    AG_CHECK_ARG(kind);
    AG_CHECK_ARG(token);
    AG_CHECK_ARG(m);
    memset(m, 0, sizeof *m);
    if (strcmp(kind, "logit-diff") != 0)
        return ag_fail(AG_ERR_ARG, "--metric %s: not loss or logit-diff", kind);
    if (!good || !bad) return ag_fail(AG_ERR_ARG, "--metric logit-diff needs --good and --bad");
    if (pos < -1 || pos >= T)
        return ag_fail(AG_ERR_ARG, "--pos %d: outside the rows' %d positions (-1: the last)", pos,
                       T);
    int gi, bi, rc = token(ctx, good, "good", &gi);
    if (rc == AG_OK) rc = token(ctx, bad, "bad", &bi);
    if (rc != AG_OK) return rc;
    m->good = malloc((size_t)(B > 0 ? B : 1) * sizeof(int));
    m->bad = malloc((size_t)(B > 0 ? B : 1) * sizeof(int));
    AG_CHECK(m->good && m->bad, "lens_logit_diff_metric: out of memory (%d rows)", B);
    for (int b = 0; b < B; b++) m->good[b] = gi, m->bad[b] = bi;
    m->mt = (LensMetric){.kind = LENS_LOGIT_DIFF, .pos = pos, .good = m->good, .bad = m->bad};
    return AG_OK;
}

void lens_owned_metric_free(LensOwnedMetric *m) {
    AG_CHECK_ARG(m);
    free(m->good), free(m->bad), free(m->targets);
    memset(m, 0, sizeof *m);
}

/* ---- the models a sweep runs ---- */

static Tensor *gpt_forward(Tape *t, void *model, const void *input, NnHooks *h) {
    Gpt *m = model;
    const LensTokens *in = input;
    double dropout = m->cfg.dropout;
    m->cfg.dropout = 0; /* as in evaluation */
    Tensor *logits = nn_gpt_forward_hooked(t, m, in->ids, in->B, in->T, NULL, h);
    m->cfg.dropout = dropout;
    return logits;
}

LensModel lens_gpt(Gpt *m) {
    AG_CHECK_ARG(m);
    LensModel lm = {gpt_forward, m, {0}, m->cfg.n_head, &m->params};
    nn_hooks_init(&lm.layout, m->cfg.n_layer);
    return lm;
}

static Tensor *seq2seq_forward(Tape *t, void *model, const void *input, NnHooks *h) {
    Seq2Seq *m = model;
    const LensPair *in = input;
    double *p[NN_SEQ2SEQ_MAX_DROPOUTS], saved[NN_SEQ2SEQ_MAX_DROPOUTS];
    int n = nn_seq2seq_dropouts(m, p);
    for (int i = 0; i < n; i++) saved[i] = *p[i], *p[i] = 0; /* as in evaluation */
    Tensor *logits =
        nn_seq2seq_forward_hooked(t, m, in->src, in->S, in->tgt, in->B, in->T, NULL, h);
    for (int i = 0; i < n; i++) *p[i] = saved[i];
    return logits;
}

LensModel lens_seq2seq(Seq2Seq *m) {
    AG_CHECK_ARG(m);
    LensModel lm = {seq2seq_forward, m, {0}, m->cfg.layer.n_heads, &m->params};
    nn_hooks_init_seq2seq(&lm.layout, m->cfg.n_enc_layers, m->cfg.n_dec_layers);
    return lm;
}

/* ---- sweeps ---- */

static int collect(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at, (void)ctx;
    return AG_OK;
}

/* the points of pattern (the table is sized by sweep_size, after the clean run) */
static int sweep_init(LensSweep *s, const LensModel *lm, const char *pattern, LensAxes axes) {
    memset(s, 0, sizeof *s);
    NnHooks h;
    nn_hooks_init_like(&h, &lm->layout);
    int n = nn_hooks_add(&h, pattern, collect, NULL);
    if (n < 0) return n;
    s->points = malloc((size_t)n * sizeof *s->points);
    AG_CHECK(s->points, "lens: out of memory for %d points", n);
    for (int i = 0; i < n; i++) {
        s->points[i] = nn_hook_entry_point(&h.entries[i]);
        int rc = AG_OK;
        if (s->points[i].read_only) /* a patch would replace it; the fused norm takes none */
            rc = ag_fail(AG_ERR_ARG,
                         "%s: %s is read-only (the fused norm's scale takes no replacement and "
                         "has no gradient): it cannot be patched",
                         pattern, s->points[i].name);
        else if (axes != LENS_BY_POS && s->points[i].head_axis < 0)
            rc =
                ag_fail(AG_ERR_ARG, "%s has no head axis: patch it by position", s->points[i].name);
        if (rc != AG_OK) {
            nn_hooks_free(&h);
            lens_sweep_free(s);
            return rc;
        }
    }
    nn_hooks_free(&h);
    s->axes = axes, s->n_points = n, s->n_heads = lm->n_heads;
    return AG_OK;
}

static size_t per_point(const LensSweep *s) {
    return s->axes == LENS_BY_POS    ? (size_t)s->T
           : s->axes == LENS_BY_HEAD ? (size_t)s->n_heads
                                     : (size_t)s->n_heads * s->T;
}

/* T, the positions of the points in the clean run's cache cc (all as many), and the table */
static int sweep_size(LensSweep *s, const LensCache *cc) {
    s->T = 0;
    for (int p = 0; p < s->n_points; p++) {
        const LensAct *a = lens_cache_get(cc, s->points[p].name);
        if (!a) continue; /* a point this model does not have (its table row: no change) */
        int T = a->shape[a->at.pos_axis];
        if (s->T && T != s->T)
            return ag_fail(AG_ERR_ARG,
                           "%s has %d positions, %s %d: patch points with as many positions "
                           "(the encoder's and the decoder's apart)",
                           a->at.name, T, s->points[0].name, s->T);
        s->T = T;
    }
    if (!s->T) return ag_fail(AG_ERR_ARG, "%s: no point of the pattern ran", s->points[0].name);
    s->values = calloc((size_t)s->n_points * per_point(s), sizeof(double));
    AG_CHECK(s->values, "lens: out of memory for %d x %zu values", s->n_points, per_point(s));
    return AG_OK;
}

/* index j of a point's row -> what it chooses */
static LensSelect select_of(const LensSweep *s, size_t j, int *head, int *pos) {
    if (s->axes == LENS_BY_POS) return *pos = (int)j, (LensSelect){NULL, 0, pos, 1};
    if (s->axes == LENS_BY_HEAD) return *head = (int)j, (LensSelect){head, 1, NULL, 0};
    *head = (int)(j / (size_t)s->T), *pos = (int)(j % (size_t)s->T);
    return (LensSelect){head, 1, pos, 1};
}

/* one forward of input with the hooks h (may be NULL) and the metric; backward when grad */
static int run_metric(Tape *t, const LensModel *lm, const void *input, NnHooks *h,
                      const LensMetric *mt, int grad, double *value) {
    ag_tape_reset(t);
    int was = ag_no_grad(t, !grad);
    NnHooks none;
    if (!h) nn_hooks_init_like(&none, &lm->layout), h = &none;
    Tensor *logits = lm->forward(t, lm->model, input, h);
    int rc = AG_OK;
    if (!logits) {
        rc = h->status;
    } else {
        Tensor *v = lens_metric(t, mt, logits);
        *value = v->data[0];
        if (grad) ag_backward(t, v);
    }
    ag_no_grad(t, was);
    return rc;
}

/* How both sweeps begin: the checks, the table (*s), the clean run's metric and its cache of
 * the sweep's points (*cc), the corrupted run's metric. On failure nothing is left allocated. */
#define CHECK_ARG_OF(fn, p) AG_CHECK((p) != NULL, "%s: argument '%s' is NULL", fn, #p)
static int sweep_begin(const char *fn, Tape *t, const LensModel *lm, const void *clean,
                       const void *corrupt, const char *pattern, LensAxes axes,
                       const LensMetric *mt, LensSweep *out, LensCache *cc) {
    CHECK_ARG_OF(fn, t);
    CHECK_ARG_OF(fn, lm);
    CHECK_ARG_OF(fn, clean);
    CHECK_ARG_OF(fn, corrupt);
    CHECK_ARG_OF(fn, pattern);
    CHECK_ARG_OF(fn, mt);
    CHECK_ARG_OF(fn, out);
    LensSweep *s = out;
    int rc = sweep_init(s, lm, pattern, axes);
    if (rc != AG_OK) return rc;
    lens_cache_init(cc, 0);
    NnHooks h;
    nn_hooks_init_like(&h, &lm->layout);
    rc = nn_hooks_add(&h, pattern, lens_cache_hook, cc);
    if (rc >= 0) rc = run_metric(t, lm, clean, &h, mt, 0, &s->clean);
    if (rc >= 0) rc = sweep_size(s, cc);
    if (rc >= 0) rc = run_metric(t, lm, corrupt, NULL, mt, 0, &s->corrupted);
    nn_hooks_free(&h);
    if (rc >= 0) return AG_OK;
    lens_cache_free(cc);
    lens_sweep_free(s);
    return rc;
}

int lens_patch_sweep_model(Tape *t, const LensModel *lm, const void *clean, const void *corrupt,
                           const char *pattern, LensAxes axes, const LensMetric *mt,
                           LensSweep *out) {
    LensCache cc;
    int rc = sweep_begin(__func__, t, lm, clean, corrupt, pattern, axes, mt, out, &cc);
    if (rc != AG_OK) return rc;
    size_t per = per_point(out);
    for (int p = 0; p < out->n_points && rc == AG_OK; p++)
        for (size_t j = 0; j < per && rc == AG_OK; j++) {
            int head = -1, pos = -1;
            LensPatch patch = {&cc, select_of(out, j, &head, &pos)};
            NnHooks h;
            nn_hooks_init_like(&h, &lm->layout);
            rc = nn_hooks_add(&h, out->points[p].name, lens_patch_hook, &patch);
            if (rc >= 0) rc = run_metric(t, lm, corrupt, &h, mt, 0, &out->values[p * per + j]);
            nn_hooks_free(&h);
        }
    lens_cache_free(&cc);
    ag_tape_reset(t);
    if (rc != AG_OK) lens_sweep_free(out);
    return rc;
}

int lens_attribute_model(Tape *t, const LensModel *lm, const void *clean, const void *corrupt,
                         const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out) {
    LensCache cc, gc;
    int rc = sweep_begin(__func__, t, lm, clean, corrupt, pattern, axes, mt, out, &cc);
    if (rc != AG_OK) return rc;
    out->attribution = 1;
    lens_cache_init(&gc, 1);
    NnHooks h;
    nn_hooks_init_like(&h, &lm->layout);
    if (rc == AG_OK) rc = nn_hooks_add(&h, pattern, lens_cache_hook, &gc);
    double corr;
    if (rc >= 0) rc = run_metric(t, lm, corrupt, &h, mt, 1, &corr);
    nn_hooks_free(&h);
    if (rc == AG_OK) lens_cache_take_grads(&gc);
    ag_params_zero_grad(lm->params);
    size_t per = per_point(out);
    for (int p = 0; p < out->n_points && rc == AG_OK; p++) {
        const LensAct *a = lens_cache_get(&cc, out->points[p].name);
        const LensAct *g = lens_cache_get(&gc, out->points[p].name);
        if (!a && !g) continue; /* not in this model: no change */
        if (!a || !g || !g->grad) {
            rc = ag_fail(AG_ERR_ARG, "%s: no gradient (a read-only point)", out->points[p].name);
            break;
        }
        double *row = out->values + p * per;
        for (size_t i = 0; i < a->size; i++) {
            int head, pos;
            coords(&a->at, a->ndim, a->shape, i, &head, &pos);
            double d = ((double)a->data[i] - g->data[i]) * g->grad[i];
            if (!isfinite(d)) continue; /* a masked score: -inf in both runs */
            size_t j = out->axes == LENS_BY_POS    ? (size_t)pos
                       : out->axes == LENS_BY_HEAD ? (size_t)head
                                                   : (size_t)head * out->T + (size_t)pos;
            row[j] += d;
        }
    }
    lens_cache_free(&cc);
    lens_cache_free(&gc);
    ag_tape_reset(t);
    if (rc != AG_OK) lens_sweep_free(out);
    return rc;
}

/* the GPT sweeps' arguments, checked before the model is read */
#define CHECK_GPT_SWEEP_ARGS()                                                                     \
    CHECK_ARG_OF(__func__, t);                                                                     \
    CHECK_ARG_OF(__func__, m);                                                                     \
    CHECK_ARG_OF(__func__, clean);                                                                 \
    CHECK_ARG_OF(__func__, corrupt);                                                               \
    CHECK_ARG_OF(__func__, pattern);                                                               \
    CHECK_ARG_OF(__func__, mt);                                                                    \
    CHECK_ARG_OF(__func__, out)

int lens_patch_sweep(Tape *t, Gpt *m, const int *clean, const int *corrupt, int B, int T,
                     const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out) {
    CHECK_GPT_SWEEP_ARGS();
    LensModel lm = lens_gpt(m);
    LensTokens a = {clean, B, T}, b = {corrupt, B, T};
    return lens_patch_sweep_model(t, &lm, &a, &b, pattern, axes, mt, out);
}

int lens_attribute(Tape *t, Gpt *m, const int *clean, const int *corrupt, int B, int T,
                   const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out) {
    CHECK_GPT_SWEEP_ARGS();
    LensModel lm = lens_gpt(m);
    LensTokens a = {clean, B, T}, b = {corrupt, B, T};
    return lens_attribute_model(t, &lm, &a, &b, pattern, axes, mt, out);
}

/* ---- ablation sweeps ---- */

int lens_ablate_sweep_model(Tape *t, const LensModel *lm, const void *input, const char *pattern,
                            LensAblateMode mode, const int *positions, int n_positions,
                            const LensMetric *mt, LensAblateTable *out) {
    CHECK_ARG_OF(__func__, t);
    CHECK_ARG_OF(__func__, lm);
    CHECK_ARG_OF(__func__, input);
    CHECK_ARG_OF(__func__, pattern);
    CHECK_ARG_OF(__func__, mt);
    CHECK_ARG_OF(__func__, out);
    memset(out, 0, sizeof *out);
    NnHooks all;
    nn_hooks_init_like(&all, &lm->layout);
    LensCache means;
    lens_cache_init(&means, 0);
    int n = nn_hooks_add(&all, pattern, lens_cache_hook, &means), rc = n < 0 ? n : AG_OK;
    if (rc == AG_OK) {
        out->points = malloc((size_t)n * sizeof *out->points);
        AG_CHECK(out->points, "%s: out of memory for %d points", __func__, n);
        for (int i = 0; i < n; i++) out->points[i] = nn_hook_entry_point(&all.entries[i]);
        out->n_heads = out->points[0].head_axis >= 0 ? lm->n_heads : 0;
        out->n_points = n;
        for (int i = 0; i < n && rc == AG_OK; i++)
            if ((out->points[i].head_axis >= 0) != (out->n_heads > 0) || out->points[i].read_only)
                rc = ag_fail(AG_ERR_ARG,
                             "%s: %s %s (the points must all have heads or all not, and not be "
                             "read-only)",
                             pattern, out->points[i].name,
                             out->points[i].read_only ? "is read-only" : "differs");
    }
    if (rc == AG_OK) rc = run_metric(t, lm, input, &all, mt, 0, &out->base); /* and the means */
    for (int i = 0; i < n_positions && rc == AG_OK; i++)
        for (int p = 0; p < means.n && rc == AG_OK; p++) {
            const LensAct *a = &means.acts[p];
            if (positions[i] < 0 || positions[i] >= a->shape[a->at.pos_axis])
                rc = ag_fail(AG_ERR_ARG, "position %d is outside the %d of %s", positions[i],
                             a->shape[a->at.pos_axis], a->at.name);
        }
    int cols = out->n_heads ? out->n_heads : 1;
    if (rc == AG_OK) {
        out->values = calloc((size_t)n * cols, sizeof(double));
        AG_CHECK(out->values, "%s: out of memory for %d x %d values", __func__, n, cols);
    }
    for (int p = 0; p < n && rc == AG_OK; p++)
        for (int k = 0; k < cols && rc == AG_OK; k++) {
            LensAblation ab = {
                mode,
                {out->n_heads ? &k : NULL, out->n_heads ? 1 : 0, positions, n_positions},
                &means};
            NnHooks h;
            nn_hooks_init_like(&h, &lm->layout);
            rc = nn_hooks_add(&h, out->points[p].name, lens_ablate_hook, &ab);
            if (rc >= 0) rc = run_metric(t, lm, input, &h, mt, 0, &out->values[p * cols + k]);
            nn_hooks_free(&h);
        }
    nn_hooks_free(&all);
    lens_cache_free(&means);
    ag_tape_reset(t);
    if (rc != AG_OK) lens_ablate_table_free(out);
    return rc;
}

void lens_ablate_table_free(LensAblateTable *a) {
    AG_CHECK_ARG(a);
    free(a->points);
    free(a->values);
    memset(a, 0, sizeof *a);
}

void lens_sweep_free(LensSweep *s) {
    AG_CHECK_ARG(s);
    free(s->points);
    free(s->values);
    memset(s, 0, sizeof *s);
}

int lens_sweep_save(const LensSweep *s, const char *path) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(path);
    static const char *axes[] = {"point,position", "point,head", "point,head,position"};
    int64_t shape[3] = {s->n_points, s->axes == LENS_BY_POS ? s->T : s->n_heads, s->T};
    int ndim = s->axes == LENS_BY_HEAD_POS ? 3 : 2;
    const char **names = malloc((size_t)s->n_points * sizeof *names);
    AG_CHECK(names, "lens_sweep_save: out of memory");
    for (int i = 0; i < s->n_points; i++) names[i] = s->points[i].name;
    size_t len = 0;
    char *json = json_list(names, s->n_points, &len);
    free(names);
    if (!json) return ag_fail(AG_ERR_NOMEM, "%s: out of memory for the point names", path);
    NpzWriter *w = npz_writer_new();
    npz_writer_finite(w, 1); /* a model that overflowed is refused, not written */
    npz_add_f64(w, "values", ndim, shape, s->values);
    npz_add_bytes(w, "axes", axes[s->axes], strlen(axes[s->axes]));
    npz_add_bytes(w, "points", json, len);
    npz_add_f64(w, "clean", 0, NULL, &s->clean);
    npz_add_f64(w, "corrupted", 0, NULL, &s->corrupted);
    npz_add_i64(w, "attribution", 0, NULL, &(int64_t){s->attribution});
    int rc = npz_write(w, path, 0, NULL);
    npz_writer_free(w);
    free(json);
    return rc;
}
