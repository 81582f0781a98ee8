/* commands.c: each lens command from its parsed flags to its exit code (lens_cmd_run of cmd.h:
 * the checks of its own flags, the start, the run, the end) and detect's run on any model's rows
 * (lens_cmd_detect: the table, the .npz, the heatmap). Every printed line and message is what
 * attograd-gpt's and attograd-translate's commands printed when each program ran them itself.
 * Not here: the common flags, start and end and the other runs (cmd.c), the detectors
 * (detect.c). Read next: cmd.c, detect.h. */
#include "cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *zalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p, "lens_cmd: out of memory for %zu x %zu bytes", n, size);
    return p;
}

/* ---- detect ---- */

/* the share of queries of a GPT's rows that have a position of each kind's pattern to attend
 * to (no exclusions: a perfect head's score), then every head's scores and the best of each */
static void print_gpt_scores(const LensRows *r, const double *scores, int L, int NH) {
    int K = LENS_N_HEAD_KINDS;
    printf("scores: the share of each head's attention on the pattern's positions "
           "(a perfect head: ");
    for (int k = 0; k < K; k++)
        printf("%s%s %.3f", k ? ", " : "", lens_head_kind_name((LensHeadKind)k),
               lens_detect_ceiling((LensHeadKind)k, r->ids, r->B, r->T));
    printf(" without exclusions)\n  head ");
    for (int k = 0; k < K; k++) printf(" %16s", lens_head_kind_name((LensHeadKind)k));
    printf("\n");
    for (int l = 0; l < L; l++)
        for (int h = 0; h < NH; h++) {
            printf("  L%dH%-2d", l, h);
            for (int k = 0; k < K; k++) printf(" %16.3f", scores[((size_t)k * L + l) * NH + h]);
            printf("\n");
        }
    for (int k = 0; k < K; k++) {
        int best = 0;
        for (int i = 1; i < L * NH; i++)
            if (scores[(size_t)k * L * NH + i] > scores[(size_t)k * L * NH + best]) best = i;
        printf("best %s head: L%dH%d %.3f\n", lens_head_kind_name((LensHeadKind)k), best / NH,
               best % NH, scores[(size_t)k * L * NH + best]);
    }
}

/* a seq2seq model's: a row per head of the encoder's and the decoder's self-attention, then
 * the cross-attention's diagonal */
static void print_seq2seq_scores(int B, const double *enc, const double *dec, const double *cross,
                                 int LE, int LD, int NH) {
    printf("scores: the share of each head's attention on the pattern's positions, mean over %d "
           "row(s)\n  %-16s %16s %16s %16s\n",
           B, "head", "previous_token", "duplicate_token", "induction");
    for (int side = 0; side < 2; side++) {
        int L = side ? LD : LE;
        const double *sc = side ? dec : enc;
        for (int l = 0; l < L; l++)
            for (int h = 0; h < NH; h++) {
                printf("  %-8s L%dH%-3d", side ? "decoder" : "encoder", l, h);
                for (int k = 0; k < LENS_N_HEAD_KINDS; k++)
                    printf(" %16.3f", sc[((size_t)k * L + l) * NH + h]);
                printf("\n");
            }
    }
    printf("cross-attention: the share on the source position of the same index (diagonal)\n");
    for (int l = 0; l < LD; l++)
        for (int h = 0; h < NH; h++)
            printf("  cross    L%dH%-3d %16.3f\n", l, h, cross[l * NH + h]);
}

/* rows n..n+K*L of the heatmap's grid (NH columns) and labels: scores (K, L, NH), each row
 * "<prefix><kind> L<l>"; returns the next row */
static int heat_rows(double *grid, char **yl, int row, const char *prefix, const double *scores,
                     int L, int NH) {
    for (int k = 0; k < LENS_N_HEAD_KINDS; k++)
        for (int l = 0; l < L; l++, row++) {
            memcpy(grid + (size_t)row * NH, scores + ((size_t)k * L + l) * NH,
                   (size_t)NH * sizeof(double));
            yl[row] = zalloc(64, 1);
            snprintf(yl[row], 64, "%s%s L%d", prefix, lens_head_kind_name((LensHeadKind)k), l);
        }
    return row;
}

/* v[0..n) as int32 (malloc'd) */
static int32_t *as_i32(const int *v, size_t n) {
    int32_t *o = zalloc(n, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) o[i] = v[i];
    return o;
}

int lens_cmd_detect(LensCmd *c, const LensDetectOptions *opt, const char *out) {
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(opt);
    AG_CHECK_ARG(out);
    const LensRows *r = &c->r;
    int K = LENS_N_HEAD_KINDS, s2s = r->src != NULL, LE = 0, LD, NH;
    double *enc = NULL, *dec, *cross = NULL; /* a GPT's scores: dec */
    if (s2s) {
        Seq2Seq *m = c->lm.model;
        LE = m->cfg.n_enc_layers, LD = m->cfg.n_dec_layers, NH = m->cfg.layer.n_heads;
        enc = zalloc((size_t)K * (LE ? LE : 1) * NH, sizeof(double));
        dec = zalloc((size_t)K * LD * NH, sizeof(double));
        cross = zalloc((size_t)LD * NH, sizeof(double));
        lens_detect_seq2seq(c->t, m, r->src, r->S, r->ids, r->B, r->T, opt, enc, dec, cross);
        print_seq2seq_scores(r->B, enc, dec, cross, LE, LD, NH);
    } else {
        Gpt *m = c->lm.model;
        LD = m->cfg.n_layer, NH = m->cfg.n_head;
        dec = zalloc((size_t)K * LD * NH, sizeof(double));
        lens_detect_gpt(c->t, m, r->ids, r->B, r->T, opt, dec);
        print_gpt_scores(r, dec, LD, NH);
    }
    static const char kinds[] = "[\"previous_token\",\"duplicate_token\",\"induction\"]";
    const char *axes =
        s2s ? "encoder, decoder: kind,layer,head; cross_diagonal: layer,head" : "kind,layer,head";
    int32_t *tok = as_i32(r->ids, (size_t)r->B * r->T);
    int32_t *stok = s2s ? as_i32(r->src, (size_t)r->B * r->S) : NULL;
    int64_t ex[2] = {opt->exclude_bos, opt->exclude_current_token};
    NpzWriter *w = npz_writer_new();
    npz_writer_finite(w, 1); /* a model that overflowed is refused, not written */
    if (s2s) {
        npz_add_f64(w, "encoder", 3, (int64_t[]){K, LE, NH}, enc);
        npz_add_f64(w, "decoder", 3, (int64_t[]){K, LD, NH}, dec);
        npz_add_f64(w, "cross_diagonal", 2, (int64_t[]){LD, NH}, cross);
    } else {
        npz_add_f64(w, "scores", 3, (int64_t[]){K, LD, NH}, dec);
    }
    npz_add_bytes(w, "kinds", kinds, strlen(kinds));
    npz_add_bytes(w, "axes", axes, strlen(axes));
    npz_add_i32(w, "tokens", 2, (int64_t[]){r->B, r->T}, tok);
    if (s2s) npz_add_i32(w, "src_tokens", 2, (int64_t[]){r->B, r->S}, stok);
    npz_add_i64(w, "exclude", 1, (int64_t[]){2}, ex);
    int rc = npz_write(w, out, 0, NULL);
    if (rc == AG_ERR_RANGE) rc = lens_cmd_not_finite(c, rc);
    npz_writer_free(w);
    if (rc == AG_OK) {
        printf(s2s ? "%s: encoder (kind, layer, head), decoder (kind, layer, head), "
                     "cross_diagonal (layer, head)\n"
                   : "%s: scores (kind, layer, head)\n",
               out);
        /* the heatmap: a row per (side, kind, layer), a seq2seq model's cross-attention last */
        int rows = K * (LE + LD) + (s2s ? LD : 0), row = 0;
        double *grid = zalloc((size_t)rows * NH, sizeof(double));
        char **yl = zalloc((size_t)rows, sizeof(char *));
        if (s2s) row = heat_rows(grid, yl, row, "enc ", enc, LE, NH);
        row = heat_rows(grid, yl, row, s2s ? "dec " : "", dec, LD, NH);
        for (int l = 0; s2s && l < LD; l++, row++) {
            memcpy(grid + (size_t)row * NH, cross + (size_t)l * NH, (size_t)NH * sizeof(double));
            yl[row] = zalloc(64, 1);
            snprintf(yl[row], 64, "cross diagonal L%d", l);
        }
        lens_report_heatmap(&c->rp, out, ".png",
                            "head detectors: share of attention on the pattern", grid, rows, NH, yl,
                            lens_labels_numbers(NH), 1);
        free(grid);
    }
    free(tok), free(stok), free(enc), free(dec), free(cross);
    return rc;
}

/* ---- each command from its flags to its exit code ---- */

/* --positions (integers >= 0) checked against a GPT's rows: each below T, at most T of them */
static int positions_in(const FlagInts *l, int T) {
    char text[96] = "";
    for (int i = 0; i < l->n && strlen(text) + 16 < sizeof text; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s%d", i ? "," : "", l->v[i]);
    for (int i = 0; i < l->n; i++) {
        if (l->v[i] >= T)
            return ag_fail(AG_ERR_ARG, "--positions %s: not a list of integers in [0, %d)", text,
                           T);
        if (i == T) return ag_fail(AG_ERR_ARG, "--positions %s: more than %d values", text, T);
    }
    return AG_OK;
}

/* the checks of a command's own flags before anything starts */
static int check_args(LensCmdKind kind, const LensProgram *p, const LensFlags *f, LensCmdArgs *a) {
    if (kind == LENS_CMD_ABLATE && a->mode_name) {
        if (strcmp(a->mode_name, "mean") == 0)
            a->mode = LENS_MEAN;
        else if (strcmp(a->mode_name, "zero") != 0)
            return ag_fail(AG_ERR_ARG, "--mode %s: not zero or mean", a->mode_name);
    }
    if (kind == LENS_CMD_PATCH && (!a->clean || !a->corrupt))
        return lens_flags_refuse(f, "--clean TEXT and --corrupt TEXT are required");
    if (kind == LENS_CMD_PATCH && a->by_name) {
        static const char *const bys[] = {"position", "head", "head-position"};
        int i = 0;
        while (i < 3 && strcmp(a->by_name, bys[i]) != 0) i++;
        if (i == 3)
            return ag_fail(AG_ERR_ARG, "--by %s: not position, head or head-position", a->by_name);
        a->by = i;
    }
    if (kind == LENS_CMD_LOGIT && !a->token == !f->good) {
        char why[160];
        const char *u = p->unit ? p->unit : "TOKEN";
        snprintf(why, sizeof why, "give --%s %s, or --good %s --bad %s",
                 a->token_flag ? a->token_flag : "token", u, u, u);
        return lens_flags_refuse(f, why);
    }
    return AG_OK;
}

int lens_cmd_run(LensCmdKind kind, const LensProgram *p, LensCmd *c, LensFlags *f, LensCmdArgs *a,
                 int rc) {
    AG_CHECK_ARG(p);
    AG_CHECK_ARG(c);
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(a);
    AG_CHECK(kind >= LENS_CMD_CACHE && kind <= LENS_CMD_LOGIT, "lens_cmd_run: kind %d", (int)kind);
    AG_CHECK(kind != LENS_CMD_PATCH || p->pair_rows, "lens_cmd_run: patch needs pair_rows");
    if (rc == AG_OK) rc = check_args(kind, p, f, a);
    rc = lens_cmd_start(c, p, f, rc, kind != LENS_CMD_PATCH);
    LensRows corrupt = {0};
    LensOwnedMetric m = {0};
    const char *metric = kind == LENS_CMD_CACHE ? "logit-diff" : lens_flags_metric(f);
    if (rc == AG_OK && kind == LENS_CMD_PATCH)
        rc = p->pair_rows(p->self, a->clean, a->corrupt, &c->r, &corrupt);
    if (rc == AG_OK && kind == LENS_CMD_CACHE && p->cache_check)
        rc = p->cache_check(p->self, c, a->hooks, f->good != NULL);
    if (rc == AG_OK &&
        (kind == LENS_CMD_ABLATE || kind == LENS_CMD_PATCH || (kind == LENS_CMD_CACHE && f->good)))
        rc = lens_cmd_metric(c, &c->r, metric, f->good, f->bad, f->pos, &m);
    if (rc == AG_OK && kind == LENS_CMD_ABLATE && !c->r.src) /* a GPT's points: T positions */
        rc = positions_in(&a->positions, c->r.T);
    if (rc == AG_OK && kind == LENS_CMD_ABLATE && a->mode == LENS_MEAN && c->r.B == 1)
        fprintf(stderr,
                "%s ablate: note: the mean over one row is the row itself (give %s for a "
                "batch)\n",
                p->prog, p->rows_flag ? p->rows_flag : "more rows");
    if (rc == AG_OK) switch (kind) {
        case LENS_CMD_CACHE:
            rc = lens_cmd_cache(c, a->hooks, f->good ? &m.mt : NULL, a->info, f->out);
            break;
        case LENS_CMD_ABLATE:
            rc = lens_cmd_ablate(c, a->hook, (LensAblateMode)a->mode, a->positions.v,
                                 a->positions.n, &m.mt, metric, f->out);
            break;
        case LENS_CMD_PATCH:
            rc = lens_cmd_patch(c, &corrupt, a->hook, (LensAxes)a->by, a->attribution, &m.mt,
                                metric, f->out);
            break;
        case LENS_CMD_DETECT: rc = lens_cmd_detect(c, &a->detect, f->out); break;
        case LENS_CMD_LOGIT:
            rc = lens_cmd_logit(c, a->token ? a->token : f->good,
                                a->token ? (a->token_flag ? a->token_flag : "token") : "good",
                                f->bad, a->pos, f->out);
            break;
        }
    lens_owned_metric_free(&m);
    lens_rows_free(&corrupt);
    return lens_cmd_finish(c, p, f, rc);
}
