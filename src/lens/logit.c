/* logit.c: the logit lens and direct logit attribution of logit.h. One hooked forward caches
 * the parts of the residual stream (hook_embed, hook_pos_embed, every hook_z and hook_mlp_out)
 * and the streams between blocks; the attribution is then plain loops in double over each
 * (row, position), the lens the model's own final norm and head (nn_gpt_unembed, or the
 * decoder's norm and generator) on each cached stream. A LensReadout holds what differs between
 * a GPT and a seq2seq decoder (names, weights, biases), so the loops are written once.
 * Not here: the hooks (../nn/hooks.c), the cache (lens.c). Read next: docs/lens.md. */
#include "logit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lens.h"

void lens_logit_free(LensLogit *r) {
    AG_CHECK_ARG(r);
    free(r->parts), free(r->dla), free(r->metric), free(r->scale);
    free(r->lens), free(r->lens_logprob), free(r->lens_next), free(r->lens_top);
    free(r->accumulated);
    free(r->lens_logits), free(r->logits);
    memset(r, 0, sizeof *r);
}

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p, "lens_logit_run: out of memory for %zu x %zu bytes", n, size);
    return p;
}

/* the data of the cached point name (it must be there) */
static const Real *act(const LensCache *c, const char *name) {
    const LensAct *a = lens_cache_get(c, name);
    AG_CHECK(a, "lens_logit_run: %s was not cached", name);
    return a->data;
}

static double dot(const Real *a, const double *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* the metric of one position's logits z (V) and its log softmax at good */
static double metric_of(const Real *z, int good, int bad) {
    return (double)z[good] - (bad >= 0 ? (double)z[bad] : 0);
}
static double logprob_of(const Real *z, int V, int good, int *top) {
    double hi = z[0];
    int arg = 0;
    for (int v = 1; v < V; v++)
        if (z[v] > hi) hi = z[v], arg = v;
    double s = 0;
    for (int v = 0; v < V; v++) s += exp((double)z[v] - hi);
    *top = arg;
    return (double)z[good] - hi - log(s);
}

/* The attribution at one (row, position): r (C) the final residual, dir (C) the metric's
 * direction in the head, parts of the position cached in c -> out (n_parts), *scale */
typedef struct Reader {
    const LensReadout *ro;
    const LensCache *c;
    double *u, *g; /* (C): the direction read through the norm; W_O^T u */
} Reader;

/* the data of the point prefix + name at row */
static const Real *part(const Reader *rd, size_t row, const char *fmt, int l, const char *attn) {
    char name[NN_HOOK_NAME_LEN], tail[NN_HOOK_NAME_LEN];
    snprintf(tail, sizeof tail, fmt, l, attn);
    snprintf(name, sizeof name, "%s%s", rd->ro->prefix, tail);
    return act(rd->c, name) + row * rd->ro->C;
}

static void attribute(Reader *rd, size_t row, const double *dir, const double *dir_b, double *out,
                      double *scale) {
    const LensReadout *ro = rd->ro;
    int C = ro->C, NH = ro->n_head, HS = C / NH, L = ro->n_layer, k = 0;
    const Real *r = part(rd, row, "blocks.%d.hook_resid_post", L - 1, NULL);
    /* u: d scaled by the norm's weight and 1 / s, centered for LayerNorm (so that c . u is
     * ((c - mean(c)) / s) . (w * d) for every part c) */
    double s = 1, mean = 0;
    if (ro->norm != LENS_NORM_NONE) {
        int rms = ro->norm == LENS_NORM_RMS;
        double sq = 0;
        for (int i = 0; i < C; i++) mean += r[i];
        mean = rms ? 0 : mean / C;
        for (int i = 0; i < C; i++) sq += ((double)r[i] - mean) * ((double)r[i] - mean);
        s = sqrt(sq / C + ro->eps);
    }
    double umean = 0;
    for (int i = 0; i < C; i++) {
        double w = ro->norm == LENS_NORM_NONE ? 1 : (double)ro->norm_w->data[i];
        rd->u[i] = w * dir[i] / s;
        umean += rd->u[i] / C;
    }
    if (ro->norm == LENS_NORM_LAYER)
        for (int i = 0; i < C; i++) rd->u[i] -= umean;
    *scale = s;
    out[k++] = dot(part(rd, row, "hook_embed", 0, NULL), rd->u, C);
    if (ro->has_pos) out[k++] = dot(part(rd, row, "hook_pos_embed", 0, NULL), rd->u, C);
    for (int l = 0; l < L; l++) {
        for (int a = 0; a < ro->n_attn; a++) {
            const Tensor *W = ro->W_O[l][a]; /* (C, C): out, in (the heads' columns) */
            for (int j = 0; j < C; j++) rd->g[j] = 0;
            for (int i = 0; i < C; i++)
                for (int j = 0; j < C; j++)
                    rd->g[j] += (double)W->data[(size_t)i * C + j] * rd->u[i];
            const Real *z = part(rd, row, "blocks.%d.%s.hook_z", l, ro->attn[a]); /* (NH, HS) */
            for (int h = 0; h < NH; h++) out[k++] = dot(z + h * HS, rd->g + h * HS, HS);
            if (ro->b_O[l][a]) out[k++] = dot(ro->b_O[l][a]->data, rd->u, C);
        }
        if (ro->has_mlp) out[k++] = dot(part(rd, row, "blocks.%d.hook_mlp_out", l, NULL), rd->u, C);
    }
    if (ro->norm == LENS_NORM_LAYER && ro->norm_b) out[k++] = dot(ro->norm_b->data, dir, C);
    if (ro->b_U) out[k++] = dir_b[0];
}

/* the parts' names, in attribute's order; stage (may be NULL): the lens stage from which each
 * is in the stream (0 the embeddings, l + 1 block l's, -1 the biases after the norm: in all) */
static int part_names(const LensReadout *ro, char (*names)[LENS_PART_NAME_LEN], int *stage) {
    int k = 0;
#define PART(st, ...)                                                                              \
    (names ? snprintf(names[k], LENS_PART_NAME_LEN, __VA_ARGS__) : 0),                             \
        (stage ? stage[k] = (st) : 0), k++
    PART(0, "embed");
    if (ro->has_pos) PART(0, "pos_embed");
    for (int l = 0; l < ro->n_layer; l++) {
        for (int a = 0; a < ro->n_attn; a++) {
            const char *in = a ? ".cross." : "";
            for (int h = 0; h < ro->n_head; h++) PART(l + 1, "L%d%sH%d", l, in, h);
            if (ro->b_O[l][a]) PART(l + 1, "L%d%sb_O", l, a ? in : ".");
        }
        if (ro->has_mlp) PART(l + 1, "L%d.mlp_out", l);
    }
    if (ro->norm == LENS_NORM_LAYER && ro->norm_b) PART(-1, "ln_final.b");
    if (ro->b_U) PART(-1, "b_U");
#undef PART
    return k;
}

static Tensor *gpt_unembed(Tape *t, void *model, Tensor *x) { return nn_gpt_unembed(t, model, x); }

LensReadout lens_readout_gpt(Gpt *m) {
    AG_CHECK_ARG(m);
    GptConfig o = nn_gpt_options(&m->cfg);
    LensReadout ro = {.prefix = "",
                      .n_layer = o.n_layer,
                      .n_head = o.n_head,
                      .C = o.n_embd,
                      .V = o.vocab_size,
                      .norm = o.norm == NN_GPT_NORM_NONE  ? LENS_NORM_NONE
                              : o.norm == NN_GPT_NORM_RMS ? LENS_NORM_RMS
                                                          : LENS_NORM_LAYER,
                      .norm_w = m->ln_f.weight,
                      .norm_b = m->ln_f.bias,
                      .eps = m->ln_f.eps,
                      .W_U = m->lm_head.weight,
                      .has_pos = o.pos == NN_GPT_POS_LEARNED,
                      .has_mlp = o.mlp != NN_GPT_MLP_NONE,
                      .n_attn = 1,
                      .attn = {"attn"},
                      .unembed = gpt_unembed,
                      .model = m};
    if (o.post_ln)
        ro.refuse = "a post-LN model: its last norm is inside the last block, so the residual "
                    "stream does not reach the head through one norm";
    for (int l = 0; l < o.n_layer; l++)
        ro.W_O[l][0] = m->h[l].c_proj.weight, ro.b_O[l][0] = m->h[l].c_proj.bias;
    return ro;
}

static Tensor *seq2seq_unembed(Tape *t, void *model, Tensor *x) {
    Seq2Seq *m = model;
    return nn_linear(t, &m->generator, nn_layernorm(t, &m->dec_norm, x));
}

LensReadout lens_readout_seq2seq(Seq2Seq *m) {
    AG_CHECK_ARG(m);
    const TransformerConfig *c = &m->cfg.layer;
    LensReadout ro = {.prefix = "decoder.",
                      .n_layer = m->cfg.n_dec_layers,
                      .n_head = c->n_heads,
                      .C = c->d_model,
                      .V = m->cfg.tgt_vocab,
                      .norm = LENS_NORM_LAYER,
                      .norm_w = m->dec_norm.weight,
                      .norm_b = m->dec_norm.bias,
                      .eps = m->dec_norm.eps,
                      .W_U = m->generator.weight,
                      .b_U = m->generator.bias,
                      .has_pos = 1, /* decoder.hook_pos_embed: sinusoidal or learned */
                      .has_mlp = 1,
                      .n_attn = 2,
                      .attn = {"attn", "cross_attn"},
                      .unembed = seq2seq_unembed,
                      .model = m};
    if (!c->pre_ln)
        ro.refuse = "a post-LN model: every decoder block ends in a norm, so the residual stream "
                    "does not reach the generator through the final decoder norm alone";
    for (int l = 0; l < m->cfg.n_dec_layers; l++) {
        ro.W_O[l][0] = m->dec[l].self_attn.out_proj.weight;
        ro.b_O[l][0] = m->dec[l].self_attn.out_proj.bias;
        ro.W_O[l][1] = m->dec[l].multihead_attn.out_proj.weight;
        ro.b_O[l][1] = m->dec[l].multihead_attn.out_proj.bias;
    }
    return ro;
}

int lens_logit_run(Tape *t, Gpt *m, const int *ids, int B, int T, const int *good, const int *bad,
                   int pos, LensLogit *out) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(out);
    if (bad) AG_CHECK_ARG(good);
    AG_CHECK(B >= 1 && T >= 1, "lens_logit_run: (B, T) (%d,%d) must be at least 1", B, T);
    int *next = zalloc((size_t)B * T, sizeof(int)); /* the next input token, none at the end */
    for (size_t i = 0; i < (size_t)B * T; i++) next[i] = (int)(i % T) + 1 < T ? ids[i + 1] : -1;
    LensModel lm = lens_gpt(m);
    LensTokens in = {ids, B, T};
    LensReadout ro = lens_readout_gpt(m);
    int rc = lens_logit_run_model(t, &lm, &in, &ro, next, B, T, good, bad, pos, out);
    nn_hooks_free(&lm.layout);
    free(next);
    return rc;
}

int lens_logit_run_model(Tape *t, const LensModel *lm, const void *input, const LensReadout *ro,
                         const int *next, int B, int T, const int *good, const int *bad, int pos,
                         LensLogit *out) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(lm);
    AG_CHECK_ARG(input);
    AG_CHECK_ARG(ro);
    AG_CHECK_ARG(next);
    AG_CHECK_ARG(out);
    if (bad) AG_CHECK_ARG(good); /* (a NULL good alone reads each position's next token) */
    memset(out, 0, sizeof *out);
    int V = ro->V, C = ro->C, L = ro->n_layer, NH = ro->n_head, S = L + 1;
    if (ro->refuse) return ag_fail(AG_ERR_ARG, "%s", ro->refuse);
    if (pos < 0) pos += T;
    if (pos < 0 || pos >= T)
        return ag_fail(AG_ERR_ARG, "position %d outside the %d positions", pos, T);
    for (int b = 0; good && b < B; b++)
        if (good[b] < 0 || good[b] >= V || (bad && (bad[b] < 0 || bad[b] >= V)))
            return ag_fail(AG_ERR_ARG, "row %d: token %d or %d outside the vocabulary [0, %d)", b,
                           good[b], bad ? bad[b] : 0, V);
    for (size_t i = 0; i < (size_t)B * T; i++)
        if (next[i] < -1 || next[i] >= V)
            return ag_fail(AG_ERR_ARG,
                           "row %zu, position %zu: next token %d outside the "
                           "vocabulary [0, %d)",
                           i / T, i % T, next[i], V);
    /* the forward, caching the parts and the streams */
    LensCache c;
    lens_cache_init(&c, 0);
    NnHooks h;
    nn_hooks_init_like(&h, &lm->layout);
    char points[5 + LENS_MAX_ATTN]
               [NN_HOOK_NAME_LEN]; /* embed, pos, resid_pre, resid_post, mlp_out, hook_z */
    int np = 0;
    snprintf(points[np++], NN_HOOK_NAME_LEN, "%shook_embed", ro->prefix);
    snprintf(points[np++], NN_HOOK_NAME_LEN, "%sblocks.*.hook_resid_post", ro->prefix);
    snprintf(points[np++], NN_HOOK_NAME_LEN, "%sblocks.0.hook_resid_pre", ro->prefix);
    if (ro->has_pos) snprintf(points[np++], NN_HOOK_NAME_LEN, "%shook_pos_embed", ro->prefix);
    if (ro->has_mlp)
        snprintf(points[np++], NN_HOOK_NAME_LEN, "%sblocks.*.hook_mlp_out", ro->prefix);
    for (int a = 0; a < ro->n_attn; a++)
        snprintf(points[np++], NN_HOOK_NAME_LEN, "%sblocks.*.%s.hook_z", ro->prefix, ro->attn[a]);
    for (int i = 0; i < np; i++)
        AG_CHECK(nn_hooks_add(&h, points[i], lens_cache_hook, &c) > 0, "%s", ag_last_error());
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    Tensor *logits = lm->forward(t, lm->model, input, &h);
    nn_hooks_free(&h);
    if (!logits) {
        ag_no_grad(t, was);
        lens_cache_free(&c);
        return AG_ERR_ARG;
    }
    AG_CHECK(logits->ndim == 3 && logits->shape[0] == B && logits->shape[1] == T &&
                 logits->shape[2] == V,
             "lens_logit_run_model: logits %s, want (%d,%d,%d)", tensor_shape_str(logits), B, T, V);
    size_t BT = (size_t)B * T;
    out->B = B, out->T = T, out->V = V, out->n_layer = L, out->n_head = NH, out->pos = pos;
    snprintf(out->prefix, sizeof out->prefix, "%s", ro->prefix);
    out->has_bad = bad != NULL;
    out->n_parts = part_names(ro, NULL, NULL);
    out->parts = zalloc((size_t)out->n_parts, sizeof *out->parts);
    int *stage = zalloc((size_t)out->n_parts, sizeof(int));
    part_names(ro, out->parts, stage);
    out->dla = zalloc(BT * out->n_parts, sizeof(double));
    out->metric = zalloc(BT, sizeof(double));
    out->scale = zalloc(BT, sizeof(double));
    out->lens = zalloc(S * BT, sizeof(double));
    out->lens_logprob = zalloc(S * BT, sizeof(double));
    out->lens_next = zalloc(S * BT, sizeof(double));
    out->lens_top = zalloc(S * BT, sizeof(int));
    out->accumulated = zalloc(S * BT, sizeof(double));
    out->lens_logits = zalloc((size_t)S * B * V, sizeof(float));
    out->logits = zalloc(BT * V, sizeof(float));
    for (size_t i = 0; i < BT * V; i++) out->logits[i] = (float)logits->data[i];
    /* the attribution */
    Reader rd = {ro, &c, zalloc((size_t)C, sizeof(double)), zalloc((size_t)C, sizeof(double))};
    double *dir = zalloc((size_t)C, sizeof(double));
    const Real *WU = ro->W_U->data; /* (V, C) */
    for (size_t row = 0; row < BT; row++) {
        /* (without good: the position's next token, none (NaN) at the row's end) */
        int b = (int)(row / T), gi = good ? good[b] : next[row], bi = bad ? bad[b] : -1;
        int none = gi < 0;
        if (none) gi = 0;
        for (int i = 0; i < C; i++)
            dir[i] =
                (double)WU[(size_t)gi * C + i] - (bi >= 0 ? (double)WU[(size_t)bi * C + i] : 0);
        double dir_b = ro->b_U ? (double)ro->b_U->data[gi] - (bi >= 0 ? ro->b_U->data[bi] : 0) : 0;
        attribute(&rd, row, dir, &dir_b, out->dla + row * out->n_parts, &out->scale[row]);
        out->metric[row] = none ? NAN : metric_of(logits->data + row * V, gi, bi);
        for (int k = 0; none && k < out->n_parts; k++) out->dla[row * out->n_parts + k] = NAN;
    }
    /* accumulated: the parts in the stream at each stage, and the biases after the norm */
    for (size_t row = 0; row < BT; row++) {
        const double *d = out->dla + row * out->n_parts;
        for (int s = 0; s < S; s++) {
            double sum = 0;
            for (int k = 0; k < out->n_parts; k++)
                if (stage[k] <= s) sum += d[k];
            out->accumulated[(size_t)s * BT + row] = sum;
        }
    }
    /* the logit lens: each stream through the model's final norm and head */
    for (int s = 0; s < S; s++) {
        char name[NN_HOOK_NAME_LEN];
        if (s == 0)
            snprintf(name, sizeof name, "%sblocks.0.hook_resid_pre", ro->prefix);
        else
            snprintf(name, sizeof name, "%sblocks.%d.hook_resid_post", ro->prefix, s - 1);
        Tensor *x = tensor_new3(t->arena, B, T, C, "lens_stream");
        memcpy(x->data, act(&c, name), BT * C * sizeof(Real));
        Tensor *z = ro->unembed(t, ro->model, x); /* (B, T, V) */
        for (size_t row = 0; row < BT; row++) {
            int b = (int)(row / T), gi = good ? good[b] : next[row];
            const Real *zr = z->data + row * V;
            size_t at = (size_t)s * BT + row;
            out->lens[at] = gi < 0 ? NAN : metric_of(zr, gi, bad ? bad[b] : -1);
            out->lens_logprob[at] = logprob_of(zr, V, gi < 0 ? 0 : gi, &out->lens_top[at]);
            if (gi < 0) out->lens_logprob[at] = NAN;
            int top;
            out->lens_next[at] =
                next[row] >= 0 && next[row] < V ? logprob_of(zr, V, next[row], &top) : NAN;
            if ((int)(row % T) == pos)
                for (int v = 0; v < V; v++)
                    out->lens_logits[((size_t)s * B + b) * V + v] = (float)zr[v];
        }
    }
    ag_no_grad(t, was);
    ag_tape_reset(t);
    free(rd.u), free(rd.g), free(dir), free(stage);
    lens_cache_free(&c);
    return AG_OK;
}

/* names[0..n) as a JSON list (hook and part names need no escapes), malloc'd */
static char *names_json(const char *first, size_t stride, int n, size_t *len) {
    size_t cap = 3;
    for (int i = 0; i < n; i++) cap += strlen(first + i * stride) + 3;
    char *s = zalloc(cap, 1), *p = s;
    p += sprintf(p, "[");
    for (int i = 0; i < n; i++) p += sprintf(p, "%s\"%s\"", i ? "," : "", first + i * stride);
    p += sprintf(p, "]");
    *len = (size_t)(p - s);
    return s;
}

int lens_logit_save(const LensLogit *r, const int *ids, const int *good, const int *bad,
                    const char *path) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(good);
    AG_CHECK_ARG(path);
    int B = r->B, T = r->T, S = r->n_layer + 1;
    size_t BT = (size_t)B * T;
    int32_t *tok = zalloc(BT, sizeof *tok), *g = zalloc((size_t)B, sizeof *g);
    int32_t *bd = zalloc((size_t)B, sizeof *bd), *top = zalloc(S * BT, sizeof *top);
    for (size_t i = 0; i < BT; i++) tok[i] = ids[i];
    for (int b = 0; b < B; b++) g[b] = good[b], bd[b] = bad ? bad[b] : -1;
    for (size_t i = 0; i < S * BT; i++) top[i] = r->lens_top[i];
    char(*stages)[NN_HOOK_NAME_LEN] = zalloc((size_t)S, sizeof *stages);
    snprintf(stages[0], NN_HOOK_NAME_LEN, "%sblocks.0.hook_resid_pre", r->prefix);
    for (int l = 0; l < r->n_layer; l++)
        snprintf(stages[l + 1], NN_HOOK_NAME_LEN, "%sblocks.%d.hook_resid_post", r->prefix, l);
    size_t np, ns;
    char *parts = names_json(r->parts[0], LENS_PART_NAME_LEN, r->n_parts, &np);
    char *snames = names_json(stages[0], NN_HOOK_NAME_LEN, S, &ns);
    int64_t p = r->pos;
    NpzWriter *w = npz_writer_new();
    npz_writer_finite(w, 1); /* a model that overflowed is refused, not written */
    npz_add_i32(w, "tokens", 2, (int64_t[]){B, T}, tok);
    npz_add_i32(w, "good", 1, (int64_t[]){B}, g);
    if (bad) npz_add_i32(w, "bad", 1, (int64_t[]){B}, bd);
    npz_add_f64(w, "metric", 2, (int64_t[]){B, T}, r->metric);
    npz_add_f64(w, "scale", 2, (int64_t[]){B, T}, r->scale);
    npz_add_f64(w, "dla", 3, (int64_t[]){B, T, r->n_parts}, r->dla);
    npz_add_bytes(w, "parts", parts, np);
    npz_add_bytes(w, "stages", snames, ns);
    npz_add_f64(w, "lens", 3, (int64_t[]){S, B, T}, r->lens);
    npz_add_f64(w, "lens_logprob", 3, (int64_t[]){S, B, T}, r->lens_logprob);
    npz_writer_finite(w, 0); /* NaN where a row has no next token */
    npz_add_f64(w, "lens_next", 3, (int64_t[]){S, B, T}, r->lens_next);
    npz_writer_finite(w, 1);
    npz_add_i32(w, "lens_top", 3, (int64_t[]){S, B, T}, top);
    npz_add_f64(w, "accumulated", 3, (int64_t[]){S, B, T}, r->accumulated);
    npz_add_f32(w, "lens_logits", 3, (int64_t[]){S, B, r->V}, r->lens_logits);
    npz_add_f32(w, "logits", 3, (int64_t[]){B, T, r->V}, r->logits);
    npz_add_i64(w, "pos", 0, NULL, &p);
    int rc = npz_write(w, path, 0, NULL);
    npz_writer_free(w);
    free(tok), free(g), free(bd), free(top), free(stages), free(parts), free(snames);
    return rc;
}
