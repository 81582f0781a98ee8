/* plot.c: the experiment's page and pictures. OUT/induction.html (src/view: one offline page)
 * holds the curves as plots, the loss per position and the patterns after training as tables,
 * and both runs' log.csv; the pictures are the page's plots drawn by gnuplot (view_plot_pngs)
 * and heatmaps (run_plot_heatmap, view_grid_png), each with its script (data inline) as NAME.gp:
 *   loss.png               the loss on the predictable positions against the step, 2-layer and
 *                          1-layer control (and the 2-layer model's loss on the other positions)
 *   scores.png             every head's induction score (top) and previous-token score (bottom)
 *                          against the step, the 2-layer model's heads and the control's
 *   loss_positions.png     the 2-layer model's loss at each position (across) at each record
 *                          (down): the repeated part turns pale as the induction head forms
 *   patterns_<name>.png    each head's pattern on evaluation sequence 0, before training (top
 *                          row) and after (bottom row)
 * Without gnuplot the page and the data files are all there is. Not here: the numbers
 * (record.c, files.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "induction.h"
#include "../common/common.h" /* ex_malloc */

/* patterns_<name>.png: each head's pattern on evaluation sequence 0, before training (top row:
 * pattern_first) and after (bottom row: sequence 0 of layer l's batch in pattern_last) */
static void plot_patterns(const IndOptions *o, const IndRecord *x, char *drawn, size_t size) {
    int LH = x->n_layer * x->NH, T = x->T;
    size_t TT = (size_t)T * T;
    const float **v = ex_malloc((size_t)2 * LH * (sizeof *v + sizeof(char *) + 64));
    char **titles = (char **)(v + 2 * LH), *text = (char *)(titles + 2 * LH), name[64];
    for (int i = 0; i < 2 * LH; i++) {
        int row = i / LH, k = i % LH, l = k / x->NH, h = k % x->NH;
        v[i] = row == 0 ? x->pattern_first + (size_t)k * TT
                        : x->pattern_last + ((size_t)l * o->eval_batch * x->NH + h) * TT;
        titles[i] = text + 64 * i;
        snprintf(titles[i], 64, "L%dH%d %s", l, h, row ? "after" : "before");
    }
    snprintf(name, sizeof name, "patterns_%s.png", x->name);
    ViewGrid g = {v, (const char *const *)titles, 2, LH, T, T, 190, 1};
    view_grid_png(o->out, name, &g, "attograd-induction", drawn, size);
    free(v);
}

int ind_plot(const IndOptions *o, const IndRecord *recs, int n_recs, char *drawn, size_t size) {
    const IndRecord *two = &recs[0];
    int R = two->R, T = two->T, LH[2] = {0, 0}, S = 4;
    if (n_recs > 1 && (recs[1].R != R || memcmp(recs[1].step, two->step, (size_t)R * 8) != 0))
        n_recs = 1; /* the control's records are of other steps: not drawn beside */
    for (int m = 0; m < n_recs; m++) LH[m] = recs[m].n_layer * recs[m].NH, S += 2 * LH[m];
    /* the curves: step (x), then S series of R values; names and ys point into them */
    double *x = ex_malloc((size_t)(S + 1) * R * sizeof *x), *y = x + R, lnv = log(o->vocab);
    char(*name)[32] = ex_malloc((size_t)S * sizeof *name);
    const char **names = ex_malloc((size_t)S * sizeof *names);
    const double **ys = ex_malloc((size_t)S * sizeof *ys);
    double hi = lnv;
    for (int r = 0; r < R; r++) {
        x[r] = (double)two->step[r];
        y[r] = two->loss_pred[r], y[R + r] = two->loss_other[r], y[3 * R + r] = lnv;
        y[2 * R + r] = n_recs > 1 ? recs[1].loss_pred[r] : NAN;
        for (int k = 0; k < 3; k++)
            if (isfinite(y[k * R + r]) && y[k * R + r] > hi) hi = y[k * R + r];
    }
    const char *loss_names[] = {"2-layer, predictable", "2-layer, other positions",
                                "1-layer control, predictable", "ln(vocab)"};
    for (int k = 0; k < 4; k++) names[k] = loss_names[k], ys[k] = y + (size_t)k * R;
    int s = 4;
    for (int prev = 0; prev < 2; prev++)
        for (int m = 0; m < n_recs; m++)
            for (int k = 0; k < LH[m]; k++, s++) {
                const double *v = prev ? recs[m].previous : recs[m].induction;
                for (int r = 0; r < R; r++) y[(size_t)s * R + r] = v[(size_t)r * LH[m] + k];
                snprintf(name[s], sizeof name[s], "%s L%dH%d", m ? "1-layer" : "2-layer",
                         k / recs[m].NH, k % recs[m].NH);
                names[s] = name[s], ys[s] = y + (size_t)s * R;
            }
    char range[64];
    snprintf(range, sizeof range, "\"ymin\":0,\"ymax\":%.6g", hi);
    int n_loss = n_recs > 1 ? 4 : 3, per = LH[0] + LH[1];
    if (n_loss == 3) names[2] = names[3], ys[2] = ys[3]; /* no control: ln(vocab) third */
    ViewPlot pl[] = {
        {"loss", "loss on the predictable (repeated) positions, evaluation batch", "step", 0, 0, x,
         R, names, ys, n_loss, range},
        {"induction scores", "induction score of every head (TransformerLens detect_head, \"mul\")",
         "step", 0, 0, x, R, names + 4, ys + 4, per, "\"ymin\":0,\"ymax\":1"},
        {"previous-token scores",
         "previous-token score of every head (TransformerLens detect_head, \"mul\")", "step", 0, 0,
         x, R, names + 4 + per, ys + 4 + per, per, "\"ymin\":0,\"ymax\":1"}};
    /* the page: the plots; the loss per position and the patterns after training as tables */
    ViewBuf b = {0};
    view_plots(&b, pl, 3);
    view_raw(&b, ",\"tables\":[");
    char **steps = view_labels("step ", two->step, R), **pos = view_labels("", NULL, T), title[160];
    size_t TT = (size_t)T * T;
    double *p = ex_malloc(TT * sizeof *p);
    for (int m = 0; m < n_recs; m++) {
        const IndRecord *rec = &recs[m];
        snprintf(title, sizeof title, "%s: loss per position (across) at each record (down)",
                 rec->name);
        view_table(&b, &(ViewTable){rec->name, title, (const char *const *)steps,
                                    (const char *const *)pos, R, T, rec->loss_pos});
        for (int k = 0; k < LH[m]; k++) {
            int l = k / rec->NH, h = k % rec->NH;
            const float *f = rec->pattern_last + ((size_t)l * o->eval_batch * rec->NH + h) * TT;
            for (size_t i = 0; i < TT; i++) p[i] = f[i];
            char tn[64];
            snprintf(tn, sizeof tn, "%s L%dH%d", rec->name, l, h);
            snprintf(title, sizeof title,
                     "%s L%dH%d after training: evaluation sequence 0, queries down, keys across",
                     rec->name, l, h);
            view_raw(&b, ","), view_table(&b, &(ViewTable){tn, title, (const char *const *)pos,
                                                           (const char *const *)pos, T, T, p});
        }
        if (m + 1 < n_recs) view_raw(&b, ",");
    }
    view_raw(&b, "]");
    char *runs[2] = {io_path_join(o->out, "two_layer"), io_path_join(o->out, "one_layer")},
         *path = io_path_join(o->out, "induction.html");
    snprintf(title, sizeof title, "induction heads: vocabulary %d, context %d, %d steps", o->vocab,
             o->ctx, o->steps);
    int rc = view_page(path, title, view_body_raw, &b, NULL, runs, n_recs, NULL);
    if (rc == AG_OK) view_drawn(drawn, size, "induction.html");
    if (rc == AG_OK && !run_gnuplot_available())
        fprintf(stderr, "attograd-induction: no gnuplot (scripts/deps.sh gnuplot-nox): the "
                        "pictures are skipped, the page and the data files are written\n");
    else if (rc == AG_OK) {
        ViewPng png[] = {{"loss.png", pl, 1, 900, 520}, {"scores.png", pl + 1, 2, 1000, 800}};
        view_plot_pngs(o->out, png, 2, "attograd-induction", drawn, size);
        char *heat = io_path_join(o->out, "loss_positions.png");
        snprintf(title, sizeof title,
                 "2-layer: loss per position (across, 0..%d) at each record (down, steps 0..%lld)",
                 T - 1, (long long)two->step[R - 1]);
        if (run_plot_heatmap(heat, title, two->loss_pos, R, T, steps, NULL, 1.25 * lnv) ==
            RUN_PLOT_DRAWN)
            view_drawn(drawn, size, "loss_positions.png");
        else
            fprintf(stderr, "attograd-induction: %s\n", ag_last_error());
        free(heat);
        for (int m = 0; m < n_recs; m++) plot_patterns(o, &recs[m], drawn, size);
    }
    free(runs[0]), free(runs[1]), free(path), free(p), free(steps), free(pos);
    view_buf_free(&b);
    free(x), free(name), free(names), free(ys);
    return rc;
}
