/* lens.c: `attograd-translate cache`, `ablate` and `patch`: the lens of src/lens/lens.h on the
 * seq2seq model's hook points (encoder.*, decoder.*, decoder.blocks.L.cross_attn.*) for
 * sentence pairs run teacher-forced: the source + EOS on the encoder, BOS + the target on the
 * decoder. cache writes the activations a name pattern selects (and a logit difference's
 * gradients) to one .npz; ablate zeroes or mean-ablates every head (or point) in turn and
 * tables the metric; patch runs activation or attribution patching from a clean source into a
 * corrupted one; detect scores every head as a previous-token, duplicate-token and induction
 * head, and the cross-attention's by its diagonal (src/lens/detect.h); lens runs the decoder's
 * logit lens and direct logit attribution (src/lens/logit.h). docs/lens.md is the user's guide.
 * Not here: the flags (cli.c), the hooks (src/nn/hooks.c), the sweeps (src/lens/lens.c), the
 * heatmap (plot.c, ex_plot_heatmap). Read next: docs/lens.md. */
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
    int *src = ex_calloc((size_t)L, sizeof(int)), *tgt = ex_calloc((size_t)L, sizeof(int));
    int S = tr_tokenize(&tr->src, source, src, L - 1, &n_unk, stderr, TR_PROG ": ");
    int T = 0, rc = AG_OK;
    if (S == 0) rc = ag_fail(AG_ERR_ARG, "%s: the source has no words", label);
    if (rc == AG_OK && S > L - 1)
        rc =
            ag_fail(AG_ERR_ARG, "%s: %d source words, the model reads at most %d", label, S, L - 1);
    if (rc == AG_OK) {
        T = target ? tr_tokenize(&tr->tgt, target, tgt, L - 1, &n_unk, stderr, TR_PROG ": ")
                   : tr_translate_ids(tr, src, S, 1, 0, tgt, L - 1);
        if (T < 0) rc = T; /* the model's values overflowed: the message names the checkpoint */
        if (target && T > L - 1)
            rc = ag_fail(AG_ERR_ARG, "%s: %d target words, the model reads at most %d", label, T,
                         L - 1);
    }
    if (rc == AG_OK && b == 0) {
        r->B = B, r->S = S + 1, r->T = T + 1;
        r->src = ex_calloc((size_t)B * r->S, sizeof(int));
        r->tgt = ex_calloc((size_t)B * r->T, sizeof(int));
        r->next = ex_calloc((size_t)B * r->T, sizeof(int));
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

/* The rows' teacher-forced logits are finite: AG_OK, or AG_ERR_RANGE naming the checkpoint and
 * where the first NaN or inf began (finite weights that overflow); every command on the rows
 * refuses them so, before it writes or prints anything. */
static int rows_finite(Translator *tr, const TrLensRows *r) {
    Tape *t = tr->tape;
    int was = ag_no_grad(t, 1), chk = ag_check_finite(t, 1);
    ag_tape_reset(t);
    Tensor *mem = nn_seq2seq_encode(t, &tr->model, r->src, r->B, r->S, NULL);
    Tensor *logits = nn_seq2seq_decode(t, &tr->model, mem, r->src, r->S, r->tgt, r->B, r->T, NULL);
    int rc = ex_tensor_finite(logits, "logits", NULL);
    if (rc != AG_OK) ex_not_finite(rc, tr->path, t);
    ag_tape_reset(t);
    ag_check_finite(t, chk);
    ag_no_grad(t, was);
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
        FILE *f;
        rc = io_fopen_read(pairs, &f, NULL); /* a regular file: it is read twice */
        if (rc != AG_OK) return rc;
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
    if (rc == AG_OK) rc = rows_finite(tr, r);
    if (rc != AG_OK) tr_lens_rows_free(r);
    return rc;
}

void tr_lens_rows_free(TrLensRows *r) {
    free(r->src), free(r->tgt), free(r->next);
    memset(r, 0, sizeof *r);
}

/* ---- the metric ---- */

/* a target word that is one token of the target vocabulary (ctx: the Translator) */
static int one_word(const void *ctx, const char *word, const char *flag, int *id) {
    const Translator *tr = ctx;
    int ids[4], n_unk = 0;
    int n = *word ? tr_tokenize(&tr->tgt, word, ids, 4, &n_unk, NULL, NULL) : 0;
    if (n != 1 || n_unk)
        return ag_fail(AG_ERR_ARG, "--%s '%s': %s", flag, word,
                       n != 1 ? "not one target token" : "not in the target vocabulary");
    *id = ids[0];
    return AG_OK;
}

int tr_lens_metric(const Translator *tr, const TrLensRows *r, const char *kind, const char *good,
                   const char *bad, int pos, ExLensMetric *m) {
    if (strcmp(kind, "loss") == 0) { /* the teacher-forced loss of the target, EOS included */
        memset(m, 0, sizeof *m);
        m->mt = (LensMetric){.kind = LENS_LOSS, .targets = r->next};
        return AG_OK;
    }
    return ex_lens_logit_diff(kind, good, bad, pos, r->B, r->T, one_word, tr, m);
}

/* ---- cache ---- */

char **tr_lens_words(const TrVocab *v, const int *ids, size_t n) {
    char **w = ex_calloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        const char *s = tr_vocab_word(v, ids[i]);
        w[i] = ex_malloc(strlen(s) + 1);
        strcpy(w[i], s);
    }
    return w;
}
void tr_lens_words_free(char **w, size_t n) {
    for (size_t i = 0; i < n; i++) free(w[i]);
    free(w);
}

int tr_lens_cache(Translator *tr, const TrLensRows *r, const char *hooks, const ExLensMetric *mt,
                  const char *out) {
    LensCache c;
    lens_cache_init(&c, mt != NULL);
    NnHooks h;
    nn_hooks_init_seq2seq(&h, tr->model.cfg.n_enc_layers, tr->model.cfg.n_dec_layers);
    int rc = lens_hooks_add_list(&h, hooks, "--hooks", lens_cache_hook, &c); /* strict */
    if (rc > 0) rc = AG_OK;
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
    char **lab = ex_calloc((size_t)n * per, sizeof(char *));
    for (int p = 0; p < n; p++)
        for (int k = 0; k < per; k++) {
            char *s = ex_malloc(NN_HOOK_NAME_LEN + 16);
            if (heads)
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s h%d", pts[p].name, k);
            else
                snprintf(s, NN_HOOK_NAME_LEN + 16, "%s", pts[p].name);
            lab[p * per + k] = s;
        }
    return lab;
}
static char **number_labels(int n) {
    char **lab = ex_calloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) lab[i] = ex_malloc(12), snprintf(lab[i], 12, "%d", i);
    return lab;
}

/* png: path with ".npz" replaced by suffix (".png", "_lens.png") */
static void png_of(const char *npz, const char *suffix, char *png, size_t n) {
    size_t len = strlen(npz);
    if (len > 4 && strcmp(npz + len - 4, ".npz") == 0) len -= 4;
    snprintf(png, n, "%.*s%s", (int)len, npz, suffix);
}

/* draws the heatmap beside out (out without .npz, then suffix; range as ex_plot_heatmap's) and
 * says where (or why not); frees the labels */
static void heatmap_as(const char *out, const char *suffix, const char *title, const double *v,
                       int rows, int cols, char **yl, char **xl, double range) {
    char png[1024];
    png_of(out, suffix, png, sizeof png);
    int rc = ex_plot_heatmap(png, title, v, rows, cols, yl, xl, range);
    if (rc == RUN_PLOT_DRAWN) printf("heatmap: %s\n", png);
    if (rc == RUN_PLOT_SKIPPED) printf("heatmap: skipped (gnuplot is not installed)\n");
    if (rc == RUN_PLOT_FAILED) fprintf(stderr, TR_PROG ": %s\n", ag_last_error());
    tr_lens_words_free(yl, (size_t)rows);
    tr_lens_words_free(xl, (size_t)cols);
}
static void heatmap(const char *out, const char *title, const double *v, int rows, int cols,
                    char **yl, char **xl) {
    heatmap_as(out, ".png", title, v, rows, cols, yl, xl, 0);
}

/* the point names as a JSON list (hook names need no escapes), malloc'd */
static char *names_json(const NnHookPoint *pts, int n) {
    char *s = ex_malloc((size_t)n * (NN_HOOK_NAME_LEN + 3) + 3);
    strcpy(s, "[");
    for (int p = 0; p < n; p++)
        strcat(strcat(strcat(s, "\""), pts[p].name), p + 1 < n ? "\"," : "\"");
    return strcat(s, "]");
}

int tr_lens_ablate(Translator *tr, const TrLensRows *r, const char *hook, LensAblateMode mode,
                   const int *positions, int n_pos, const ExLensMetric *m, const char *metric,
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
        double *d = ex_malloc((size_t)a.n_points * cols * sizeof(double));
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
                  const char *hook, LensAxes axes, int attribution, const ExLensMetric *m,
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
        double *d = ex_malloc((size_t)rows * cols * sizeof(double));
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

/* ---- detect and lens ---- */

/* a label of at most 63 bytes, malloc'd */
static char *label(const char *fmt, const char *a, int l, int h) {
    char *s = ex_malloc(64);
    snprintf(s, 64, fmt, a, l, h);
    return s;
}

int tr_lens_detect(Translator *tr, const TrLensRows *r, const LensDetectOptions *opt,
                   const char *out) {
    int LE = tr->model.cfg.n_enc_layers, LD = tr->model.cfg.n_dec_layers;
    int NH = tr->model.cfg.layer.n_heads, K = LENS_N_HEAD_KINDS;
    double *enc = ex_calloc((size_t)K * (LE ? LE : 1) * NH, sizeof(double));
    double *dec = ex_calloc((size_t)K * LD * NH, sizeof(double));
    double *cross = ex_calloc((size_t)LD * NH, sizeof(double));
    lens_detect_seq2seq(tr->tape, &tr->model, r->src, r->S, r->tgt, r->B, r->T, opt, enc, dec,
                        cross);
    /* the table: a row per head, its scores of each kind; the cross-attention's diagonal */
    printf("scores: the share of each head's attention on the pattern's positions, mean over %d "
           "row(s)\n  %-16s %16s %16s %16s\n",
           r->B, "head", "previous_token", "duplicate_token", "induction");
    for (int side = 0; side < 2; side++) {
        int L = side ? LD : LE;
        const double *sc = side ? dec : enc;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++) {
                printf("  %-8s L%dH%-3d", side ? "decoder" : "encoder", l, h);
                for (int k = 0; k < K; k++) printf(" %16.3f", sc[((size_t)k * L + l) * NH + h]);
                printf("\n");
            }
    }
    printf("cross-attention: the share on the source position of the same index (diagonal)\n");
    for (int l = 0; l < LD; l++)
        for (int h = 0; h < NH; h++)
            printf("  cross    L%dH%-3d %16.3f\n", l, h, cross[l * NH + h]);
    int32_t *tok = ex_malloc((size_t)r->B * r->T * sizeof(int32_t));
    int32_t *stok = ex_malloc((size_t)r->B * r->S * sizeof(int32_t));
    for (size_t i = 0; i < (size_t)r->B * r->T; i++) tok[i] = r->tgt[i];
    for (size_t i = 0; i < (size_t)r->B * r->S; i++) stok[i] = r->src[i];
    static const char kinds[] = "[\"previous_token\",\"duplicate_token\",\"induction\"]";
    static const char axes[] = "encoder, decoder: kind,layer,head; cross_diagonal: layer,head";
    int64_t ex[2] = {opt->exclude_bos, opt->exclude_current_token};
    NpzWriter *w = npz_writer_new();
    npz_add_f64(w, "encoder", 3, (int64_t[]){K, LE, NH}, enc);
    npz_add_f64(w, "decoder", 3, (int64_t[]){K, LD, NH}, dec);
    npz_add_f64(w, "cross_diagonal", 2, (int64_t[]){LD, NH}, cross);
    npz_add_bytes(w, "kinds", kinds, strlen(kinds));
    npz_add_bytes(w, "axes", axes, strlen(axes));
    npz_add_i32(w, "tokens", 2, (int64_t[]){r->B, r->T}, tok);
    npz_add_i32(w, "src_tokens", 2, (int64_t[]){r->B, r->S}, stok);
    npz_add_i64(w, "exclude", 1, (int64_t[]){2}, ex);
    int rc = npz_write(w, out, 0, NULL);
    npz_writer_free(w);
    if (rc == AG_OK) {
        printf("%s: encoder (kind, layer, head), decoder (kind, layer, head), cross_diagonal "
               "(layer, head)\n",
               out);
        /* the heatmap: a row per (side, kind, layer), the cross-attention's diagonal last */
        int rows = K * (LE + LD) + LD;
        double *grid = ex_calloc((size_t)rows * NH, sizeof(double));
        char **yl = ex_calloc((size_t)rows, sizeof(char *));
        int row = 0;
        for (int side = 0; side < 2; side++)
            for (int k = 0; k < K; k++)
                for (int l = 0; l < (side ? LD : LE); l++, row++) {
                    const double *sc = side ? dec : enc;
                    memcpy(grid + (size_t)row * NH, sc + ((size_t)k * (side ? LD : LE) + l) * NH,
                           (size_t)NH * sizeof(double));
                    yl[row] = label(side ? "dec %s L%d" : "enc %s L%d",
                                    lens_head_kind_name((LensHeadKind)k), l, 0);
                }
        for (int l = 0; l < LD; l++, row++) {
            memcpy(grid + (size_t)row * NH, cross + (size_t)l * NH, (size_t)NH * sizeof(double));
            yl[row] = label("%scross diagonal L%d", "", l, 0);
        }
        heatmap_as(out, ".png", "head detectors: share of attention on the pattern", grid, rows, NH,
                   yl, number_labels(NH), 1);
        free(grid);
    }
    free(tok), free(stok), free(enc), free(dec), free(cross);
    return rc;
}

/* the mean over the B rows of v[(s * B + b) * T + pos] (a (stage, B, T) array) */
static double row_mean(const double *v, int s, int B, int T, int pos) {
    double m = 0;
    for (int b = 0; b < B; b++) m += v[((size_t)s * B + b) * T + pos];
    return m / B;
}

int tr_lens_logit(Translator *tr, const TrLensRows *r, const char *good, const char *bad, int pos,
                  const char *out) {
    int gi, bi = -1, rc = one_word(tr, good, bad ? "good" : "word", &gi);
    if (rc == AG_OK && bad) rc = one_word(tr, bad, "bad", &bi);
    if (rc != AG_OK) return rc;
    if (pos < -r->T || pos >= r->T)
        return ag_fail(AG_ERR_ARG, "--pos %d: outside the decoder's %d positions (-1: the last)",
                       pos, r->T);
    int B = r->B, T = r->T;
    int *gs = ex_malloc((size_t)B * sizeof(int)), *bs = ex_malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) gs[b] = gi, bs[b] = bi;
    LensModel lm = lens_seq2seq(&tr->model);
    LensPair in = {r->src, r->tgt, B, r->S, T};
    LensReadout ro = lens_readout_seq2seq(&tr->model);
    LensLogit ll;
    rc =
        lens_logit_run_model(tr->tape, &lm, &in, &ro, r->next, B, T, gs, bad ? bs : NULL, pos, &ll);
    nn_hooks_free(&lm.layout);
    if (rc == AG_OK) rc = lens_logit_save(&ll, r->tgt, gs, bad ? bs : NULL, out);
    if (rc == AG_OK) {
        int L = ll.n_layer, S = L + 1, P = ll.pos, n = ll.n_parts;
        size_t BT = (size_t)B * T;
        char metric[256];
        if (bad)
            snprintf(metric, sizeof metric, "logit('%s') - logit('%s')", good, bad);
        else
            snprintf(metric, sizeof metric, "logit('%s')", good);
        double model = 0, sum = 0;
        for (int b = 0; b < B; b++) model += ll.metric[(size_t)b * T + P] / B;
        printf("%s: %s at decoder position %d (row 0's input there: '%s'), mean over %d "
               "row(s): %.6f\n",
               out, metric, P, tr_vocab_word(&tr->tgt, r->tgt[P]), B, model);
        printf("logit lens (each decoder stream through the final decoder norm and the "
               "generator; accumulated:\nthe parts so far read with the final norm's scale; "
               "loss: of the next target word, every row\nand position):\n");
        printf("  %-36s %12s %12s %10s %12s %8s\n", "stage", "metric", "log p(good)", "top-1",
               "accumulated", "loss");
        for (int s = 0; s < S; s++) {
            char stage[64], quoted[64];
            if (s == 0)
                snprintf(stage, sizeof stage, "decoder.blocks.0.hook_resid_pre");
            else
                snprintf(stage, sizeof stage, "decoder.blocks.%d.hook_resid_post", s - 1);
            double loss = 0;
            for (size_t i = 0; i < BT; i++) loss -= ll.lens_next[(size_t)s * BT + i] / (double)BT;
            snprintf(quoted, sizeof quoted, "'%s'",
                     tr_vocab_word(&tr->tgt, ll.lens_top[(size_t)s * BT + P]));
            printf("  %-36s %12.6f %12.6f %10s %12.6f %8.4f\n", stage,
                   row_mean(ll.lens, s, B, T, P), row_mean(ll.lens_logprob, s, B, T, P), quoted,
                   row_mean(ll.accumulated, s, B, T, P), loss);
        }
        double *mean = ex_calloc((size_t)n, sizeof(double));
        for (int b = 0; b < B; b++)
            for (int k = 0; k < n; k++) mean[k] += ll.dla[((size_t)b * T + P) * n + k] / B;
        printf("direct logit attribution at decoder position %d (mean over the rows):\n", P);
        for (int k = 0; k < n; k++) {
            printf("  %-16s %+12.6f\n", ll.parts[k], mean[k]);
            sum += mean[k];
        }
        printf("  %-16s %+12.6f (the model's: %.6f)\n", "sum", sum, model);
        /* the heatmap: a row per block, a column per part of a block (self-attention's heads
         * and bias, the cross-attention's, the MLP), named without the layer */
        int first = 0, per = 0;
        while (first < n && ll.parts[first][0] != 'L') first++;
        while (first + per < n && strncmp(ll.parts[first + per], "L0", 2) == 0 &&
               (ll.parts[first + per][2] == 'H' || ll.parts[first + per][2] == '.'))
            per++;
        double *grid = ex_calloc((size_t)L * per, sizeof(double));
        for (int l = 0; l < L; l++)
            for (int c = 0; c < per; c++) grid[l * per + c] = mean[first + l * per + c];
        char **yl = ex_calloc((size_t)L, sizeof(char *)),
             **xl = ex_calloc((size_t)per, sizeof(char *));
        for (int l = 0; l < L; l++) yl[l] = label("%sblock %d", "", l, 0);
        for (int c = 0; c < per; c++) {
            const char *name = ll.parts[first + c] + 2; /* "H0", ".b_O", ".cross.H0" */
            xl[c] = label("%s", name + (*name == '.'), 0, 0);
        }
        char title[512];
        snprintf(title, sizeof title, "direct logit attribution to %s at decoder position %d",
                 metric, P);
        heatmap(out, title, grid, L, per, yl, xl);
        /* the lens at every position: (stage, position), mean over the rows */
        double *lens = ex_calloc((size_t)S * T, sizeof(double));
        for (int s = 0; s < S; s++)
            for (int q = 0; q < T; q++) lens[s * T + q] = row_mean(ll.lens, s, B, T, q);
        yl = ex_calloc((size_t)S, sizeof(char *));
        for (int s = 0; s < S; s++)
            yl[s] = s ? label("%safter block %d", "", s - 1, 0) : label("%sembeddings", "", 0, 0);
        snprintf(title, sizeof title, "logit lens: %s at each decoder position (row 0's input)",
                 metric);
        heatmap_as(out, "_lens.png", title, lens, S, T, yl,
                   tr_lens_words(&tr->tgt, r->tgt, (size_t)T), 0);
        free(lens), free(grid), free(mean);
    }
    lens_logit_free(&ll);
    free(gs), free(bs);
    return rc;
}
