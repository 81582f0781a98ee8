/* lens.c: `attograd-translate cache`, `ablate` and `patch`: the lens of src/lens/lens.h on the
 * seq2seq model's hook points (encoder.*, decoder.*, decoder.blocks.L.cross_attn.*) for
 * sentence pairs run teacher-forced: the source + EOS on the encoder, BOS + the target on the
 * decoder. cache writes the activations a name pattern selects (and a logit difference's
 * gradients) to one .npz; ablate zeroes or mean-ablates every head (or point) in turn and
 * tables the metric; patch runs activation or attribution patching from a clean source into a
 * corrupted one. docs/lens.md is the user's guide.
 * Not here: the flags (cli.c), the hooks (src/nn/hooks.c), the sweeps (src/lens/lens.c), the
 * heatmap (plot.c, tr_plot_heatmap). Read next: docs/lens.md. */
#include "translate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rows a command runs on ---- */

/* one pair into row b of r (allocated for r->B rows of S and T when b is 0): the source (its
 * words, not empty) and the target (NULL: the greedy translation) */
static int add_pair(Translator *tr, TrLensRows *r, int b, int B, const char *source,
                    const char *target, const char *label) {
    int L = tr->model.cfg.max_len, n_unk = 0;
    int *src = tr_calloc((size_t)L, sizeof(int)), *tgt = tr_calloc((size_t)L, sizeof(int));
    int S = tr_tokenize(&tr->src, source, src, L - 1, &n_unk, stderr, TR_PROG ": ");
    int T = 0, rc = AG_OK;
    if (S == 0) rc = ag_fail(AG_ERR_ARG, "%s: the source has no words", label);
    if (rc == AG_OK && S > L - 1)
        rc =
            ag_fail(AG_ERR_ARG, "%s: %d source words, the model reads at most %d", label, S, L - 1);
    if (rc == AG_OK) {
        T = target ? tr_tokenize(&tr->tgt, target, tgt, L - 1, &n_unk, stderr, TR_PROG ": ")
                   : tr_translate_ids(tr, src, S, 1, 0, tgt, L - 1);
        if (target && T > L - 1)
            rc = ag_fail(AG_ERR_ARG, "%s: %d target words, the model reads at most %d", label, T,
                         L - 1);
    }
    if (rc == AG_OK && b == 0) {
        r->B = B, r->S = S + 1, r->T = T + 1;
        r->src = tr_calloc((size_t)B * r->S, sizeof(int));
        r->tgt = tr_calloc((size_t)B * r->T, sizeof(int));
        r->next = tr_calloc((size_t)B * r->T, sizeof(int));
    } else if (rc == AG_OK && (S + 1 != r->S || T + 1 != r->T)) {
        rc = ag_fail(AG_ERR_ARG,
                     "%s has %d source and %d target tokens, the first row %d and %d (rows must "
                     "be as long)",
                     label, S, T, r->S - 1, r->T - 1);
    }
    if (rc == AG_OK) {
        int *s = r->src + (size_t)b * r->S, *ti = r->tgt + (size_t)b * r->T;
        int *nx = r->next + (size_t)b * r->T;
        memcpy(s, src, (size_t)S * sizeof(int));
        s[S] = TR_EOS;
        ti[0] = TR_BOS;
        memcpy(ti + 1, tgt, (size_t)T * sizeof(int));
        memcpy(nx, tgt, (size_t)T * sizeof(int));
        nx[T] = TR_EOS;
    }
    free(src);
    free(tgt);
    return rc;
}

int tr_lens_rows(Translator *tr, const char *sentence, const char *target, const char *pairs,
                 TrLensRows *r) {
    memset(r, 0, sizeof *r);
    if (!sentence == !pairs) return ag_fail(AG_ERR_ARG, "give a sentence or --pairs FILE");
    int rc = AG_OK;
    if (sentence) {
        rc = add_pair(tr, r, 0, 1, sentence, target, "the sentence");
    } else {
        FILE *f = fopen(pairs, "rb");
        if (!f) return ag_fail(AG_ERR_IO, "%s: cannot read: %s", pairs, strerror(errno));
        char *line = NULL;
        size_t cap = 0, len;
        int n = 0, k = 0, got;
        while ((got = tr_read_line(f, &line, &cap, TR_MAX_LINE, &len)) == 1) n++;
        if (got < 0)
            rc = ag_fail(AG_ERR_ARG, "%s: line %d is longer than %d bytes", pairs, n + 1,
                         TR_MAX_LINE);
        if (rc == AG_OK && n == 0) rc = ag_fail(AG_ERR_ARG, "%s: no lines", pairs);
        rewind(f);
        while (rc == AG_OK && k < n && tr_read_line(f, &line, &cap, TR_MAX_LINE, &len) == 1) {
            char label[600], *tab = strchr(line, '\t');
            snprintf(label, sizeof label, "%s: line %d", pairs, k + 1);
            if (!tab) {
                rc = ag_fail(AG_ERR_ARG, "%s: no tab between the source and the target", label);
                break;
            }
            *tab = 0;
            rc = add_pair(tr, r, k++, n, line, tab + 1, label);
        }
        free(line);
        fclose(f);
    }
    if (rc != AG_OK) tr_lens_rows_free(r);
    return rc;
}

void tr_lens_rows_free(TrLensRows *r) {
    free(r->src), free(r->tgt), free(r->next);
    memset(r, 0, sizeof *r);
}

/* ---- the metric ---- */

/* a target word that is one token of the target vocabulary */
static int one_word(const Translator *tr, const char *word, const char *flag, int *id) {
    int ids[4], n_unk = 0;
    int n = *word ? tr_tokenize(&tr->tgt, word, ids, 4, &n_unk, NULL, NULL) : 0;
    if (n != 1 || n_unk)
        return ag_fail(AG_ERR_ARG, "--%s '%s': %s", flag, word,
                       n != 1 ? "not one target token" : "not in the target vocabulary");
    *id = ids[0];
    return AG_OK;
}

int tr_lens_metric(const Translator *tr, const TrLensRows *r, const char *kind, const char *good,
                   const char *bad, int pos, TrLensMetric *m) {
    memset(m, 0, sizeof *m);
    if (strcmp(kind, "loss") == 0) { /* the teacher-forced loss of the target, EOS included */
        m->mt = (LensMetric){.kind = LENS_LOSS, .targets = r->next};
        return AG_OK;
    }
    if (strcmp(kind, "logit-diff") != 0)
        return ag_fail(AG_ERR_ARG, "--metric %s: not loss or logit-diff", kind);
    if (!good || !bad) return ag_fail(AG_ERR_ARG, "--metric logit-diff needs --good and --bad");
    if (pos < -1 || pos >= r->T)
        return ag_fail(AG_ERR_ARG, "--pos %d: outside the decoder's %d positions (-1: the last)",
                       pos, r->T);
    int gi, bi, rc = one_word(tr, good, "good", &gi);
    if (rc == AG_OK) rc = one_word(tr, bad, "bad", &bi);
    if (rc != AG_OK) return rc;
    m->good = tr_malloc((size_t)r->B * sizeof(int));
    m->bad = tr_malloc((size_t)r->B * sizeof(int));
    for (int b = 0; b < r->B; b++) m->good[b] = gi, m->bad[b] = bi;
    m->mt = (LensMetric){.kind = LENS_LOGIT_DIFF, .pos = pos, .good = m->good, .bad = m->bad};
    return AG_OK;
}

void tr_lens_metric_free(TrLensMetric *m) {
    free(m->good), free(m->bad);
    memset(m, 0, sizeof *m);
}

/* ---- cache ---- */

char **tr_lens_words(const TrVocab *v, const int *ids, size_t n) {
    char **w = tr_calloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const char *s = tr_vocab_word(v, ids[i]);
        w[i] = tr_malloc(strlen(s) + 1);
        strcpy(w[i], s);
    }
    return w;
}
void tr_lens_words_free(char **w, size_t n) {
    for (size_t i = 0; i < n; i++) free(w[i]);
    free(w);
}

/* "a,b" into hooks of h with fn and ctx; an error names the flag */
static int add_patterns(NnHooks *h, const char *patterns, const char *flag, NnHookFn fn,
                        void *ctx) {
    char *list = tr_malloc(strlen(patterns) + 1);
    strcpy(list, patterns);
    int rc = AG_OK, n = 0;
    for (char *p = strtok(list, ","); rc == AG_OK && p; p = strtok(NULL, ","), n++) {
        if (nn_hooks_add(h, p, fn, ctx) < 0) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ag_last_error());
            rc = ag_fail(AG_ERR_ARG, "%s: %s", flag, msg);
        }
    }
    if (rc == AG_OK && n == 0) rc = ag_fail(AG_ERR_ARG, "%s '%s': no pattern", flag, patterns);
    free(list);
    return rc;
}

int tr_lens_cache(Translator *tr, const TrLensRows *r, const char *hooks, const TrLensMetric *mt,
                  const char *out) {
    LensCache c;
    lens_cache_init(&c, mt != NULL);
    NnHooks h;
    nn_hooks_init_seq2seq(&h, tr->model.cfg.n_enc_layers, tr->model.cfg.n_dec_layers);
    int rc = add_patterns(&h, hooks, "--hooks", lens_cache_hook, &c);
    LensModel lm = lens_seq2seq(&tr->model);
    LensPair in = {r->src, r->tgt, r->B, r->S, r->T};
    if (rc == AG_OK) {
        ag_tape_reset(tr->tape);
        int was = ag_no_grad(tr->tape, mt == NULL);
        Tensor *logits = lm.forward(tr->tape, lm.model, &in, &h);
        if (!logits) rc = AG_ERR_ARG;
        if (logits && mt) {
            ag_backward(tr->tape, lens_metric(tr->tape, &mt->mt, logits));
            lens_cache_take_grads(&c);
            ag_params_zero_grad(&tr->model.params);
        }
        ag_no_grad(tr->tape, was);
    }
    if (rc == AG_OK) {
        size_t ns = (size_t)r->B * r->S, nt = (size_t)r->B * r->T;
        char **ss = tr_lens_words(&tr->src, r->src, ns);
        char **ts = tr_lens_words(&tr->tgt, r->tgt, nt);
        LensRunInfo run = {.tokens = r->tgt,
                           .B = r->B,
                           .T = r->T,
                           .token_strs = (const char *const *)ts,
                           .src_tokens = r->src,
                           .S = r->S,
                           .src_token_strs = (const char *const *)ss,
                           .seq2seq_cfg = &tr->model.cfg};
        rc = lens_cache_save(&c, out, &run);
        if (rc == AG_OK)
            printf("%s: %d activations%s of %d row(s), %d source and %d decoder positions\n", out,
                   c.n, mt ? " and gradients" : "", r->B, r->S, r->T);
        tr_lens_words_free(ss, ns);
        tr_lens_words_free(ts, nt);
    }
    nn_hooks_free(&h);
    lens_cache_free(&c);
    return rc;
}

/* ---- ablate and patch: the tables, their .npz and their heatmaps ---- */

/* row labels: a point's name, or "name h<k>" per head */
static char **point_labels(const NnHookPoint *pts, int n, int heads) {
    int per = heads ? heads : 1;
    char **lab = tr_calloc((size_t)n * per, sizeof(char *));
    for (int p = 0; p < n; p++)
        for (int k = 0; k < per; k++) {
            char *s = tr_malloc(NN_HOOK_NAME_LEN + 16);
            if (heads)
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s h%d", pts[p].name, k);
            else
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s", pts[p].name);
            lab[p * per + k] = s;
        }
    return lab;
}
static char **number_labels(int n) {
    char **lab = tr_calloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) lab[i] = tr_malloc(12), snprintf(lab[i], 12, "%d", i);
    return lab;
}

/* png: path with ".npz" replaced by ".png" */
static void png_of(const char *npz, char *png, size_t n) {
    size_t len = strlen(npz);
    if (len > 4 && strcmp(npz + len - 4, ".npz") == 0) len -= 4;
    snprintf(png, n, "%.*s.png", (int)len, npz);
}

/* draws the heatmap beside out and says where (or why not); frees the labels */
static void heatmap(const char *out, const char *title, const double *v, int rows, int cols,
                    char **yl, char **xl) {
    char png[1024];
    png_of(out, png, sizeof png);
    int rc = tr_plot_heatmap(png, title, v, rows, cols, yl, xl, 0);
    if (rc == TR_PLOT_DRAWN) printf("heatmap: %s\n", png);
    if (rc == TR_PLOT_SKIPPED) printf("heatmap: skipped (gnuplot is not installed)\n");
    if (rc == TR_PLOT_FAILED) fprintf(stderr, TR_PROG ": %s\n", ag_last_error());
    tr_lens_words_free(yl, (size_t)rows);
    tr_lens_words_free(xl, (size_t)cols);
}

/* the point names as a JSON list (hook names need no escapes), malloc'd */
static char *names_json(const NnHookPoint *pts, int n) {
    char *s = tr_malloc((size_t)n * (NN_HOOK_NAME_LEN + 3) + 3);
    strcpy(s, "[");
    for (int p = 0; p < n; p++)
        strcat(strcat(strcat(s, "\""), pts[p].name), p + 1 < n ? "\"," : "\"");
    return strcat(s, "]");
}

int tr_lens_ablate(Translator *tr, const TrLensRows *r, const char *hook, LensAblateMode mode,
                   const int *positions, int n_pos, const TrLensMetric *m, const char *metric,
                   const char *out) {
    LensModel lm = lens_seq2seq(&tr->model);
    LensPair in = {r->src, r->tgt, r->B, r->S, r->T};
    LensAblateTable a;
    int rc = lens_ablate_sweep_model(tr->tape, &lm, &in, hook, mode, positions, n_pos, &m->mt, &a);
    if (rc != AG_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ag_last_error());
        return ag_fail(rc, "--hook: %s", msg);
    }
    int cols = a.n_heads ? a.n_heads : 1;
    const char *smode = mode == LENS_MEAN ? "mean" : "zero";
    NpzWriter *w = npz_writer_new();
    npz_add_f64(w, "values", 2, (int64_t[]){a.n_points, cols}, a.values);
    npz_add_f64(w, "base", 0, NULL, &a.base);
    const char *axes = a.n_heads ? "point,head" : "point,none";
    npz_add_bytes(w, "axes", axes, strlen(axes));
    npz_add_bytes(w, "metric", metric, strlen(metric));
    npz_add_bytes(w, "mode", smode, strlen(smode));
    char *names = names_json(a.points, a.n_points);
    npz_add_bytes(w, "points", names, strlen(names));
    rc = npz_write(w, out, 0, NULL);
    npz_writer_free(w);
    free(names);
    if (rc == AG_OK) {
        printf("%s: %s ablation of %d point(s)%s, %s with every part %.6f\n", out, smode,
               a.n_points, a.n_heads ? " x every head" : "", metric, a.base);
        double *d = tr_malloc((size_t)a.n_points * cols * sizeof(double));
        for (int p = 0; p < a.n_points; p++) {
            printf("  %-40s", a.points[p].name);
            for (int k = 0; k < cols; k++) {
                d[p * cols + k] = a.values[p * cols + k] - a.base;
                printf(" %+9.4f", d[p * cols + k]);
            }
            printf("\n");
        }
        char title[256];
        snprintf(title, sizeof title, "%s ablation: %s change (base %.4f)", smode, metric, a.base);
        heatmap(out, title, d, a.n_points, cols, point_labels(a.points, a.n_points, 0),
                number_labels(cols));
        free(d);
    }
    lens_ablate_table_free(&a);
    return rc;
}

int tr_lens_patch(Translator *tr, const TrLensRows *clean, const TrLensRows *corrupt,
                  const char *hook, LensAxes axes, int attribution, const TrLensMetric *m,
                  const char *metric, const char *out) {
    if (clean->S != corrupt->S || clean->T != corrupt->T)
        return ag_fail(AG_ERR_ARG,
                       "--corrupt has %d source and %d target tokens, --clean %d and %d: they "
                       "must be as many",
                       corrupt->S - 1, corrupt->T - 1, clean->S - 1, clean->T - 1);
    LensModel lm = lens_seq2seq(&tr->model);
    LensPair a = {clean->src, clean->tgt, 1, clean->S, clean->T};
    LensPair b = {corrupt->src, corrupt->tgt, 1, corrupt->S, corrupt->T};
    LensSweep s;
    int rc = (attribution ? lens_attribute_model : lens_patch_sweep_model)(tr->tape, &lm, &a, &b,
                                                                           hook, axes, &m->mt, &s);
    if (rc != AG_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ag_last_error());
        return ag_fail(rc, "--hook: %s", msg);
    }
    rc = lens_sweep_save(&s, out);
    if (rc == AG_OK) {
        static const char *by[] = {"position", "head", "head-position"};
        int cols = axes == LENS_BY_HEAD ? s.n_heads : s.T;
        int rows = s.n_points * (axes == LENS_BY_HEAD_POS ? s.n_heads : 1);
        printf("%s: %s over (%s) of %d point(s); %s clean %.6f, corrupted %.6f\n", out,
               attribution ? "attribution patching" : "activation patching", by[axes], s.n_points,
               metric, s.clean, s.corrupted);
        double *d = tr_malloc((size_t)rows * cols * sizeof(double));
        for (int i = 0; i < rows * cols; i++)
            d[i] = attribution ? s.values[i] : s.values[i] - s.corrupted;
        int enc = s.points[0].stack == NN_HOOK_ENCODER; /* positions: the source's */
        char **xl = axes == LENS_BY_HEAD ? number_labels(cols)
                    : enc                ? tr_lens_words(&tr->src, corrupt->src, (size_t)cols)
                                         : tr_lens_words(&tr->tgt, corrupt->tgt, (size_t)cols);
        char title[256];
        snprintf(title, sizeof title,
                 "%s: %s change from the corrupted run (clean %.3f, corrupted %.3f)",
                 attribution ? "attribution patching" : "activation patching", metric, s.clean,
                 s.corrupted);
        heatmap(out, title, d, rows, cols,
                point_labels(s.points, s.n_points, axes == LENS_BY_HEAD_POS ? s.n_heads : 0), xl);
        free(d);
    }
    lens_sweep_free(&s);
    return rc;
}
