/* report.c: the outputs of the lens commands of report.h: the cache's run, the tables of
 * ablate, patch and lens as .npz, as text and as heatmaps. Every printed line and file is what
 * attograd-gpt's and attograd-translate's commands wrote before they shared this file.
 * Not here: the sweeps (lens.c), the lens's numbers (logit.c), the drawing (the program's
 * LensHeatmapFn). Read next: docs/lens.md. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/npz.h"

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p, "lens_report: out of memory for %zu x %zu bytes", n, size);
    return p;
}

/* a label of at most 63 bytes, malloc'd: fmt with one int */
static char *label_int(const char *fmt, int v) {
    char *s = zalloc(64, 1);
    snprintf(s, 64, fmt, v);
    return s;
}

/* ---- labels and paths ---- */

char *lens_path_swap(const char *npz, const char *suffix) {
    AG_CHECK_ARG(npz);
    AG_CHECK_ARG(suffix);
    size_t len = strlen(npz), n = strlen(suffix);
    if (len > 4 && strcmp(npz + len - 4, ".npz") == 0) len -= 4;
    char *s = zalloc(len + n + 1, 1);
    memcpy(s, npz, len);
    memcpy(s + len, suffix, n + 1);
    return s;
}

char **lens_labels_numbers(int n) {
    char **lab = zalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) lab[i] = label_int("%d", i);
    return lab;
}

char **lens_labels_points(const NnHookPoint *pts, int n, int heads) {
    AG_CHECK_ARG(pts);
    int per = heads ? heads : 1;
    char **lab = zalloc((size_t)n * per, sizeof(char *));
    for (int p = 0; p < n; p++)
        for (int k = 0; k < per; k++) {
            char *s = zalloc(NN_HOOK_NAME_LEN + 16, 1);
            if (heads)
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s h%d", pts[p].name, k);
            else
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s", pts[p].name);
            lab[p * per + k] = s;
        }
    return lab;
}

char **lens_labels_tokens(const LensReport *rp, NnHookStack stack, const int *ids, int n,
                          int label) {
    AG_CHECK_ARG(rp);
    AG_CHECK_ARG(ids);
    char **lab = zalloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++)
        lab[i] = rp->token_text ? rp->token_text(rp->ctx, stack, ids[i], label)
                                : label_int("%d", ids[i]);
    return lab;
}

void lens_labels_free(char **lab, int n) {
    for (int i = 0; lab && i < n; i++) free(lab[i]);
    free(lab);
}

int lens_report_heatmap(const LensReport *rp, const char *out, const char *suffix,
                        const char *title, const double *v, int rows, int cols, char **yl,
                        char **xl, double range) {
    AG_CHECK_ARG(rp);
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(suffix);
    AG_CHECK_ARG(title);
    AG_CHECK_ARG(v);
    int rc = 1; /* RUN_PLOT_SKIPPED */
    if (rp->heatmap) {
        char *png = lens_path_swap(out, suffix);
        rc = rp->heatmap(png, title, v, rows, cols, yl, xl, range);
        if (rc == 0) printf("heatmap: %s\n", png);
        if (rc == 1) printf("heatmap: skipped (gnuplot is not installed)\n");
        if (rc == 2) fprintf(stderr, "%s: %s\n", rp->prog ? rp->prog : "lens", ag_last_error());
        free(png);
    }
    lens_labels_free(yl, rows);
    lens_labels_free(xl, cols);
    return rc;
}

/* ---- cache ---- */

int lens_cache_run(Tape *t, const LensModel *lm, const void *input, NnHooks *h, LensCache *c,
                   const LensMetric *mt, Tensor **logits) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(lm);
    AG_CHECK_ARG(input);
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(c);
    AG_CHECK(!mt || c->with_grads, "lens_cache_run: a metric needs a cache made with gradients");
    ag_tape_reset(t);
    int was = ag_no_grad(t, mt == NULL);
    Tensor *z = lm->forward(t, lm->model, input, h);
    if (z && mt) {
        ag_backward(t, lens_metric(t, mt, z));
        lens_cache_take_grads(c);
        if (lm->params) ag_params_zero_grad(lm->params);
    }
    ag_no_grad(t, was);
    if (logits) *logits = z;
    return z ? AG_OK : AG_ERR_ARG;
}

/* ---- ablate ---- */

/* the points' names as a JSON list (hook names need no escapes), malloc'd */
static char *names_json(const NnHookPoint *pts, int n) {
    char *s = zalloc((size_t)n * (NN_HOOK_NAME_LEN + 3) + 3, 1);
    strcpy(s, "[");
    for (int p = 0; p < n; p++)
        strcat(strcat(strcat(s, "\""), pts[p].name), p + 1 < n ? "\"," : "\"");
    return strcat(s, "]");
}

/* the printed tables' column of point names: a seq2seq model's are longer */
static int name_width(const NnHookPoint *pts, int n) {
    return n > 0 && pts[0].stack != NN_HOOK_GPT ? 40 : 32;
}

int lens_report_ablate(const LensReport *rp, const LensAblateTable *a, LensAblateMode mode,
                       const char *metric, const char *out) {
    AG_CHECK_ARG(rp);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(metric);
    AG_CHECK_ARG(out);
    int n_pts = a->n_points, cols = a->n_heads ? a->n_heads : 1;
    const char *smode = mode == LENS_MEAN ? "mean" : "zero";
    const char *axes = a->n_heads ? "point,head" : "point,none";
    char *names = names_json(a->points, n_pts);
    NpzWriter *w = npz_writer_new();
    npz_writer_finite(w, 1); /* a model that overflowed is refused, not written */
    npz_add_f64(w, "values", 2, (int64_t[]){n_pts, cols}, a->values);
    npz_add_f64(w, "base", 0, NULL, &a->base);
    npz_add_bytes(w, "axes", axes, strlen(axes));
    npz_add_bytes(w, "metric", metric, strlen(metric));
    npz_add_bytes(w, "mode", smode, strlen(smode));
    npz_add_bytes(w, "points", names, strlen(names));
    int rc = npz_write(w, out, 0, NULL);
    npz_writer_free(w);
    free(names);
    if (rc != AG_OK) return rc;
    printf("%s: %s ablation of %d point(s)%s, %s with every part %.6f\n", out, smode, n_pts,
           a->n_heads ? " x every head" : "", metric, a->base);
    double *d = zalloc((size_t)n_pts * cols, sizeof(double));
    int width = name_width(a->points, n_pts);
    for (int p = 0; p < n_pts; p++) {
        printf("  %-*s", width, a->points[p].name);
        for (int k = 0; k < cols; k++) {
            d[p * cols + k] = a->values[p * cols + k] - a->base;
            printf(" %+9.4f", d[p * cols + k]);
        }
        printf("\n");
    }
    char title[256];
    snprintf(title, sizeof title, "%s ablation: %s change (base %.4f)", smode, metric, a->base);
    lens_report_heatmap(rp, out, ".png", title, d, n_pts, cols,
                        lens_labels_points(a->points, n_pts, 0), lens_labels_numbers(cols), 0);
    free(d);
    return AG_OK;
}

/* ---- patch ---- */

int lens_report_patch(const LensReport *rp, const LensSweep *s, const char *metric, const int *ids,
                      const int *src_ids, const char *out) {
    AG_CHECK_ARG(rp);
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(metric);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(out);
    int rc = lens_sweep_save(s, out);
    if (rc != AG_OK) return rc;
    static const char *by[] = {"position", "head", "head-position"};
    const char *what = s->attribution ? "attribution patching" : "activation patching";
    int cols = s->axes == LENS_BY_HEAD ? s->n_heads : s->T;
    int per = s->axes == LENS_BY_HEAD_POS ? s->n_heads : 0, rows = s->n_points * (per ? per : 1);
    printf("%s: %s over (%s) of %d point(s); %s clean %.6f, corrupted %.6f\n", out, what,
           by[s->axes], s->n_points, metric, s->clean, s->corrupted);
    double *d = zalloc((size_t)rows * cols, sizeof(double));
    for (int i = 0; i < rows * cols; i++)
        d[i] = s->attribution ? s->values[i] : s->values[i] - s->corrupted;
    NnHookStack stack = s->n_points ? s->points[0].stack : NN_HOOK_GPT;
    const int *pos_ids = stack == NN_HOOK_ENCODER && src_ids ? src_ids : ids;
    char **xl = s->axes == LENS_BY_HEAD ? lens_labels_numbers(cols)
                                        : lens_labels_tokens(rp, stack, pos_ids, cols, 1);
    char title[256];
    snprintf(title, sizeof title,
             "%s: %s change from the corrupted run (clean %.3f, corrupted %.3f)", what, metric,
             s->clean, s->corrupted);
    lens_report_heatmap(rp, out, ".png", title, d, rows, cols,
                        lens_labels_points(s->points, s->n_points, per), xl, 0);
    free(d);
    return AG_OK;
}

/* ---- lens ---- */

/* the mean over the B rows of v[(s * B + b) * T + pos] (a (stage, B, T) array) */
static double row_mean(const double *v, int s, int B, int T, int pos) {
    double m = 0;
    for (int b = 0; b < B; b++) m += v[((size_t)s * B + b) * T + pos];
    return m / B;
}

/* the lens's table at position P: each stage's metric, log p(good), top-1, accumulated and
 * the loss of the next tokens over every row and position (those that have one) */
static void print_lens(const LensReport *rp, const LensLogit *ll, int dec) {
    int B = ll->B, T = ll->T, S = ll->n_layer + 1, P = ll->pos;
    size_t BT = (size_t)B * T;
    NnHookStack stack = dec ? NN_HOOK_DECODER : NN_HOOK_GPT;
    if (dec)
        printf("logit lens (each decoder stream through the final decoder norm and the "
               "generator; accumulated:\nthe parts so far read with the final norm's scale; "
               "loss: of the next target word, every row\nand position):\n");
    else
        printf("logit lens (each stream through the final norm and the head; accumulated: the "
               "parts so far\nread with the final norm's scale; loss: of the next token, over "
               "every row and position):\n");
    int sw = 28 + (int)strlen(ll->prefix), tw = dec ? 10 : 8;
    printf("  %-*s %12s %12s %*s %12s %8s\n", sw, "stage", "metric", "log p(good)", tw, "top-1",
           "accumulated", "loss");
    for (int s = 0; s < S; s++) {
        char stage[NN_HOOK_NAME_LEN + 16], quoted[80];
        if (s == 0)
            snprintf(stage, sizeof stage, "%sblocks.0.hook_resid_pre", ll->prefix);
        else
            snprintf(stage, sizeof stage, "%sblocks.%d.hook_resid_post", ll->prefix, s - 1);
        double loss = 0;
        size_t n = 0;
        for (size_t i = 0; i < BT; i++)
            if (!isnan(ll->lens_next[(size_t)s * BT + i])) loss -= ll->lens_next[s * BT + i], n++;
        char **top = lens_labels_tokens(rp, stack, &ll->lens_top[(size_t)s * BT + P], 1, 1);
        snprintf(quoted, sizeof quoted, "'%.60s'", top[0]);
        lens_labels_free(top, 1);
        printf("  %-*s %12.6f %12.6f %*s %12.6f %8.4f\n", sw, stage, row_mean(ll->lens, s, B, T, P),
               row_mean(ll->lens_logprob, s, B, T, P), tw, quoted,
               row_mean(ll->accumulated, s, B, T, P), n ? loss / (double)n : NAN);
    }
}

int lens_report_logit(const LensReport *rp, const LensLogit *ll, const int *ids, const int *good,
                      const int *bad, const char *out) {
    AG_CHECK_ARG(rp);
    AG_CHECK_ARG(ll);
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(good);
    AG_CHECK_ARG(out);
    int rc = lens_logit_save(ll, ids, good, bad, out);
    if (rc != AG_OK) return rc;
    int B = ll->B, T = ll->T, L = ll->n_layer, S = L + 1, P = ll->pos, n = ll->n_parts;
    int dec = ll->prefix[0] != 0; /* a seq2seq model's decoder */
    NnHookStack stack = dec ? NN_HOOK_DECODER : NN_HOOK_GPT;
    const char *where = dec ? "decoder " : "";
    char **tok = lens_labels_tokens(rp, stack, (int[]){good[0], bad ? bad[0] : 0, ids[P]}, 3, 1);
    char metric[256];
    if (bad)
        snprintf(metric, sizeof metric, "logit('%.100s') - logit('%.100s')", tok[0], tok[1]);
    else
        snprintf(metric, sizeof metric, "logit('%.200s')", tok[0]);
    double model = 0, sum = 0;
    for (int b = 0; b < B; b++) model += ll->metric[(size_t)b * T + P] / B;
    printf("%s: %s at %sposition %d (row 0's %s there: '%s'), mean over %d row(s): %.6f\n", out,
           metric, where, P, dec ? "input" : "token", tok[2], B, model);
    lens_labels_free(tok, 3);
    print_lens(rp, ll, dec);
    /* the attribution at P, mean over the rows: the table, then a heatmap (block, part) */
    double *mean = zalloc((size_t)n, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int k = 0; k < n; k++) mean[k] += ll->dla[((size_t)b * T + P) * n + k] / B;
    printf("direct logit attribution at %sposition %d (mean over the rows):\n", where, P);
    int pw = dec ? 16 : 12;
    for (int k = 0; k < n; k++) {
        printf("  %-*s %+12.6f\n", pw, ll->parts[k], mean[k]);
        sum += mean[k];
    }
    printf("  %-*s %+12.6f (the model's: %.6f)\n", pw, "sum", sum, model);
    /* a column per part of a block (the attentions' heads and biases, the MLP), named without
     * the layer: "H0", "b_O", "cross.H0", "mlp_out" */
    int first = 0, per = 0;
    while (first < n && ll->parts[first][0] != 'L') first++;
    while (first + per < n && strncmp(ll->parts[first + per], "L0", 2) == 0 &&
           (ll->parts[first + per][2] == 'H' || ll->parts[first + per][2] == '.'))
        per++;
    double *grid = zalloc((size_t)L * per, sizeof(double));
    for (int l = 0; l < L; l++)
        for (int c = 0; c < per; c++) grid[l * per + c] = mean[first + l * per + c];
    char **yl = zalloc((size_t)L, sizeof(char *)), **xl = zalloc((size_t)per, sizeof(char *));
    for (int l = 0; l < L; l++) yl[l] = label_int("block %d", l);
    for (int c = 0; c < per; c++) {
        const char *name = ll->parts[first + c] + 2; /* "H0", ".b_O", ".cross.H0" */
        xl[c] = zalloc(LENS_PART_NAME_LEN, 1);
        snprintf(xl[c], LENS_PART_NAME_LEN, "%s", name + (*name == '.'));
    }
    char title[512];
    snprintf(title, sizeof title, "direct logit attribution to %s at %sposition %d", metric, where,
             P);
    lens_report_heatmap(rp, out, ".png", title, grid, L, per, yl, xl, 0);
    /* the lens at every position: (stage, position), mean over the rows */
    double *lens = zalloc((size_t)S * T, sizeof(double));
    for (int s = 0; s < S; s++)
        for (int q = 0; q < T; q++) lens[s * T + q] = row_mean(ll->lens, s, B, T, q);
    yl = zalloc((size_t)S, sizeof(char *));
    for (int s = 0; s < S; s++)
        yl[s] = s ? label_int("after block %d", s - 1) : label_int("embeddings", 0);
    snprintf(title, sizeof title, "logit lens: %s at each %sposition (row 0's %s)", metric, where,
             dec ? "input" : "tokens");
    lens_report_heatmap(rp, out, "_lens.png", title, lens, S, T, yl,
                        lens_labels_tokens(rp, stack, ids, T, 1), 0);
    free(lens), free(grid), free(mean);
    return AG_OK;
}
