/* logit.c: the logit lens and direct logit attribution of logit.h. One hooked forward caches
 * the parts of the residual stream (hook_embed, hook_pos_embed, every hook_z and hook_mlp_out)
 * and the streams between blocks; the attribution is then plain loops in double over each
 * (row, position), the lens the model's own final norm and head (nn_gpt_unembed) on each
 * cached stream.
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
    const Gpt *m;
    const GptConfig *o; /* the options, every choice made */
    const LensCache *c;
    int C, NH, HS;
    double *u, *g; /* (C): the direction read through the norm; W_O^T u */
} Reader;

static void attribute(Reader *rd, size_t row, const double *dir, double *out, double *scale) {
    const Gpt *m = rd->m;
    int C = rd->C, NH = rd->NH, HS = rd->HS, L = m->cfg.n_layer, k = 0;
    char name[NN_HOOK_NAME_LEN];
    snprintf(name, sizeof name, "blocks.%d.hook_resid_post", L - 1);
    const Real *r = act(rd->c, name) + row * C;
    /* u: d scaled by the norm's weight and 1 / s, centered for LayerNorm (so that c . u is
     * ((c - mean(c)) / s) . (w * d) for every part c) */
    double s = 1, mean = 0;
    if (rd->o->norm != NN_GPT_NORM_NONE) {
        int rms = rd->o->norm == NN_GPT_NORM_RMS;
        double sq = 0;
        for (int i = 0; i < C; i++) mean += r[i];
        mean = rms ? 0 : mean / C;
        for (int i = 0; i < C; i++) sq += ((double)r[i] - mean) * ((double)r[i] - mean);
        s = sqrt(sq / C + m->ln_f.eps);
    }
    double umean = 0;
    for (int i = 0; i < C; i++) {
        double w = rd->o->norm == NN_GPT_NORM_NONE ? 1 : (double)m->ln_f.weight->data[i];
        rd->u[i] = w * dir[i] / s;
        umean += rd->u[i] / C;
    }
    if (rd->o->norm == NN_GPT_NORM_LAYER)
        for (int i = 0; i < C; i++) rd->u[i] -= umean;
    *scale = s;
    out[k++] = dot(act(rd->c, "hook_embed") + row * C, rd->u, C);
    if (rd->o->pos == NN_GPT_POS_LEARNED)
        out[k++] = dot(act(rd->c, "hook_pos_embed") + row * C, rd->u, C);
    for (int l = 0; l < L; l++) {
        const Tensor *W = m->h[l].c_proj.weight; /* (C, C): out, in (the heads' columns) */
        for (int j = 0; j < C; j++) rd->g[j] = 0;
        for (int i = 0; i < C; i++)
            for (int j = 0; j < C; j++) rd->g[j] += (double)W->data[(size_t)i * C + j] * rd->u[i];
        snprintf(name, sizeof name, "blocks.%d.attn.hook_z", l);
        const Real *z = act(rd->c, name) + row * C; /* (NH, HS) */
        for (int h = 0; h < NH; h++) out[k++] = dot(z + h * HS, rd->g + h * HS, HS);
        if (m->h[l].c_proj.bias) out[k++] = dot(m->h[l].c_proj.bias->data, rd->u, C);
        if (rd->o->mlp != NN_GPT_MLP_NONE) {
            snprintf(name, sizeof name, "blocks.%d.hook_mlp_out", l);
            out[k++] = dot(act(rd->c, name) + row * C, rd->u, C);
        }
    }
    if (rd->o->norm == NN_GPT_NORM_LAYER && m->ln_f.bias)
        out[k++] = dot(m->ln_f.bias->data, dir, C);
}

/* the parts' names, in attribute's order */
static int part_names(const Gpt *m, const GptConfig *o, char (*names)[LENS_PART_NAME_LEN]) {
    int k = 0;
#define PART(...) (names ? snprintf(names[k], LENS_PART_NAME_LEN, __VA_ARGS__) : 0), k++
    PART("embed");
    if (o->pos == NN_GPT_POS_LEARNED) PART("pos_embed");
    for (int l = 0; l < m->cfg.n_layer; l++) {
        for (int h = 0; h < m->cfg.n_head; h++) PART("L%dH%d", l, h);
        if (m->h[l].c_proj.bias) PART("L%d.b_O", l);
        if (o->mlp != NN_GPT_MLP_NONE) PART("L%d.mlp_out", l);
    }
    if (o->norm == NN_GPT_NORM_LAYER && m->ln_f.bias) PART("ln_final.b");
#undef PART
    return k;
}

int lens_logit_run(Tape *t, Gpt *m, const int *ids, int B, int T, const int *good, const int *bad,
                   int pos, LensLogit *out) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(good);
    AG_CHECK_ARG(out);
    memset(out, 0, sizeof *out);
    GptConfig o = nn_gpt_options(&m->cfg);
    int V = o.vocab_size, C = o.n_embd, L = o.n_layer, NH = o.n_head, S = L + 1;
    if (o.post_ln)
        return ag_fail(AG_ERR_ARG, "a post-LN model: its last norm is inside the last block, so "
                                   "the residual stream does not reach the head through one norm");
    if (pos < 0) pos += T;
    if (pos < 0 || pos >= T)
        return ag_fail(AG_ERR_ARG, "position %d outside the %d positions", pos, T);
    for (int b = 0; b < B; b++)
        if (good[b] < 0 || good[b] >= V || (bad && (bad[b] < 0 || bad[b] >= V)))
            return ag_fail(AG_ERR_ARG, "row %d: token %d or %d outside the vocabulary [0, %d)", b,
                           good[b], bad ? bad[b] : 0, V);
    /* the forward, caching the parts and the streams */
    LensCache c;
    lens_cache_init(&c, 0);
    NnHooks h;
    nn_hooks_init(&h, L);
    const char *points[] = {"hook_embed",
                            "blocks.*.attn.hook_z",
                            "blocks.*.hook_resid_post",
                            "blocks.0.hook_resid_pre",
                            o.pos == NN_GPT_POS_LEARNED ? "hook_pos_embed" : NULL,
                            o.mlp != NN_GPT_MLP_NONE ? "blocks.*.hook_mlp_out" : NULL};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++)
        if (points[i])
            AG_CHECK(nn_hooks_add(&h, points[i], lens_cache_hook, &c) > 0, "%s", ag_last_error());
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    Tensor *logits = nn_gpt_forward_hooked(t, m, ids, B, T, NULL, &h);
    nn_hooks_free(&h);
    if (!logits) {
        ag_no_grad(t, was);
        lens_cache_free(&c);
        return AG_ERR_ARG;
    }
    size_t BT = (size_t)B * T;
    out->B = B, out->T = T, out->V = V, out->n_layer = L, out->n_head = NH, out->pos = pos;
    out->has_bad = bad != NULL;
    out->n_parts = part_names(m, &o, NULL);
    out->parts = zalloc((size_t)out->n_parts, sizeof *out->parts);
    part_names(m, &o, out->parts);
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
    Reader rd = {m,
                 &o,
                 &c,
                 C,
                 NH,
                 C / NH,
                 zalloc((size_t)C, sizeof(double)),
                 zalloc((size_t)C, sizeof(double))};
    double *dir = zalloc((size_t)C, sizeof(double));
    const Real *WU = m->lm_head.weight->data; /* (V, C) */
    for (size_t row = 0; row < BT; row++) {
        int b = (int)(row / T), gi = good[b], bi = bad ? bad[b] : -1;
        for (int i = 0; i < C; i++)
            dir[i] =
                (double)WU[(size_t)gi * C + i] - (bi >= 0 ? (double)WU[(size_t)bi * C + i] : 0);
        attribute(&rd, row, dir, out->dla + row * out->n_parts, &out->scale[row]);
        out->metric[row] = metric_of(logits->data + row * V, gi, bi);
    }
    /* accumulated: the parts up to each stage (embeddings; then each block's), and the bias */
    for (size_t row = 0; row < BT; row++) {
        const double *d = out->dla + row * out->n_parts;
        int per = NH + (m->h[0].c_proj.bias != NULL) + (o.mlp != NN_GPT_MLP_NONE);
        int first = 1 + (o.pos == NN_GPT_POS_LEARNED), last = out->n_parts - 1;
        double bias = strcmp(out->parts[last], "ln_final.b") == 0 ? d[last] : 0, sum = bias;
        for (int k = 0; k < first; k++) sum += d[k];
        out->accumulated[row] = sum;
        for (int l = 0; l < L; l++) {
            for (int k = 0; k < per; k++) sum += d[first + l * per + k];
            out->accumulated[(size_t)(l + 1) * BT + row] = sum;
        }
    }
    /* the logit lens: each stream through the model's final norm and head */
    for (int s = 0; s < S; s++) {
        char name[NN_HOOK_NAME_LEN];
        if (s == 0)
            snprintf(name, sizeof name, "blocks.0.hook_resid_pre");
        else
            snprintf(name, sizeof name, "blocks.%d.hook_resid_post", s - 1);
        Tensor *x = tensor_new3(t->arena, B, T, C, "lens_stream");
        memcpy(x->data, act(&c, name), BT * C * sizeof(Real));
        Tensor *z = nn_gpt_unembed(t, m, x); /* (B, T, V) */
        for (size_t row = 0; row < BT; row++) {
            int b = (int)(row / T);
            const Real *zr = z->data + row * V;
            size_t at = (size_t)s * BT + row;
            out->lens[at] = metric_of(zr, good[b], bad ? bad[b] : -1);
            out->lens_logprob[at] = logprob_of(zr, V, good[b], &out->lens_top[at]);
            int top, t_next = (int)(row % T) + 1;
            out->lens_next[at] = t_next < T ? logprob_of(zr, V, ids[row + 1], &top) : NAN;
            if ((int)(row % T) == pos)
                for (int v = 0; v < V; v++)
                    out->lens_logits[((size_t)s * B + b) * V + v] = (float)zr[v];
        }
    }
    ag_no_grad(t, was);
    ag_tape_reset(t);
    free(rd.u), free(rd.g), free(dir);
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
    snprintf(stages[0], NN_HOOK_NAME_LEN, "blocks.0.hook_resid_pre");
    for (int l = 0; l < r->n_layer; l++)
        snprintf(stages[l + 1], NN_HOOK_NAME_LEN, "blocks.%d.hook_resid_post", l);
    size_t np, ns;
    char *parts = names_json(r->parts[0], LENS_PART_NAME_LEN, r->n_parts, &np);
    char *snames = names_json(stages[0], NN_HOOK_NAME_LEN, S, &ns);
    int64_t p = r->pos;
    NpzWriter *w = npz_writer_new();
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
    npz_add_f64(w, "lens_next", 3, (int64_t[]){S, B, T}, r->lens_next);
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
