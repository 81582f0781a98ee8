/* plot.c: the experiment's pictures, gnuplot scripts with their data inline drawn through the
 * library's run_plot_script (run_gp_script_draw, src/run/run_gp.c: NAME.gp kept next to
 * NAME.png; without gnuplot nothing is drawn and the data files are all there is).
 *   loss.png               the loss on the predictable positions against the step, 2-layer and
 *                          1-layer control (and the 2-layer model's loss on the other positions)
 *   scores.png             every head's induction score (top) and previous-token score (bottom)
 *                          against the step, the 2-layer model's heads and the control's
 *   loss_positions.png     the 2-layer model's loss at each position (across) at each record
 *                          (down): the repeated part turns dark as the induction head forms
 *   patterns_<name>.png    each head's pattern on evaluation sequence 0, before training (top
 *                          row) and after (bottom row)
 * Not here: the numbers (record.c, files.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "induction.h"

/* $<name> << EOD: step and one column per series of (R, n) values */
static void data_block(FILE *f, const char *name, const IndRecord *x, const double *v, int n) {
    fprintf(f, "$%s << EOD\n", name);
    for (int r = 0; r < x->R; r++) {
        fprintf(f, "%lld", (long long)x->step[r]);
        for (int k = 0; k < n; k++) fprintf(f, " %.6g", v[(size_t)r * n + k]);
        fprintf(f, "\n");
    }
    fprintf(f, "EOD\n");
}

static int plot_loss(const IndOptions *o, const IndRecord *recs, int n_recs) {
    RunGpScript s;
    run_gp_script_begin(&s, 900, 520);
    FILE *f = s.f;
    data_block(f, "P2", &recs[0], recs[0].loss_pred, 1);
    data_block(f, "O2", &recs[0], recs[0].loss_other, 1);
    if (n_recs > 1) data_block(f, "P1", &recs[1], recs[1].loss_pred, 1);
    fprintf(f, "set title 'loss on the predictable (repeated) positions, evaluation batch'\n"
               "set xlabel 'step'\nset ylabel 'cross-entropy (nats)'\nset grid\n"
               "set yrange [0:*]\nset key top right\n"
               "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 3 lc rgb 'gray40'\n"
               "plot $P2 using 1:2 with lines lw 2 lc rgb '#1f77b4' title '2-layer, predictable', "
               "$O2 using 1:2 with lines lw 1 dt 2 lc rgb '#1f77b4' title '2-layer, other "
               "positions'");
    if (n_recs > 1)
        fprintf(f, ", $P1 using 1:2 with lines lw 2 lc rgb '#d62728' title '1-layer control, "
                   "predictable'");
    fprintf(f, ", %g with lines dt 3 lc rgb 'gray50' title 'ln(vocab)'\n", log((double)o->vocab));
    return run_gp_script_draw(&s, o->out, "loss.png", "attograd-induction");
}

static const char *const colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static void score_panel(FILE *f, const IndRecord *recs, int n_recs, int prev, double y0,
                        double y1) {
    const char *what = prev ? "previous-token" : "induction";
    fprintf(f, "set tmargin at screen %.3f\nset bmargin at screen %.3f\n", y1, y0);
    fprintf(f, "set title '%s score of every head (TransformerLens detect_head, \"mul\")'\n", what);
    fprintf(f, "set ylabel '%s score'\nset yrange [0:1]\n", what);
    fprintf(f, "plot ");
    int first = 1;
    for (int m = 0; m < n_recs; m++) {
        const IndRecord *x = &recs[m];
        for (int k = 0; k < x->n_layer * x->NH; k++) {
            int l = k / x->NH, h = k % x->NH;
            fprintf(f, "%s$S%d_%d using 1:%d with lines lw %d dt %d lc rgb '%s' title '%s L%dH%d'",
                    first ? "" : ", ", m, prev, k + 2, l == x->n_layer - 1 ? 2 : 1, m ? 3 : 1,
                    m ? "gray50" : colors[k % 8], m ? "1-layer" : "2-layer", l, h);
            first = 0;
        }
    }
    fprintf(f, "\n");
}

static int plot_scores(const IndOptions *o, const IndRecord *recs, int n_recs) {
    RunGpScript s;
    run_gp_script_begin(&s, 1000, 800);
    FILE *f = s.f;
    for (int m = 0; m < n_recs; m++)
        for (int prev = 0; prev < 2; prev++) {
            char name[32];
            snprintf(name, sizeof name, "S%d_%d", m, prev);
            data_block(f, name, &recs[m], prev ? recs[m].previous : recs[m].induction,
                       recs[m].n_layer * recs[m].NH);
        }
    fprintf(f, "set multiplot\nset grid\nset key outside right top font ',9'\n"
               "set lmargin at screen 0.08\nset rmargin at screen 0.78\nset xlabel 'step'\n");
    score_panel(f, recs, n_recs, 0, 0.56, 0.95);
    score_panel(f, recs, n_recs, 1, 0.07, 0.46);
    fprintf(f, "unset multiplot\n");
    return run_gp_script_draw(&s, o->out, "scores.png", "attograd-induction");
}

static int plot_positions(const IndOptions *o, const IndRecord *x) {
    RunGpScript s;
    run_gp_script_begin(&s, 900, 620);
    float *v = malloc((size_t)x->R * x->T * sizeof *v);
    if (!v) abort();
    for (size_t k = 0; k < (size_t)x->R * x->T; k++) v[k] = (float)x->loss_pos[k];
    char title[160];
    snprintf(title, sizeof title,
             "2-layer: loss per position (across, 0..%d) at each record (down, steps 0..%lld)",
             x->T - 1, (long long)x->step[x->R - 1]);
    run_gp_panel(s.f, &(RunGpPanel){.id = 1,
                                    .v = v,
                                    .rows = x->R,
                                    .cols = x->T,
                                    .title = title,
                                    .x0 = 0.06,
                                    .x1 = 0.86,
                                    .y0 = 0.05,
                                    .y1 = 0.90,
                                    .lo = 0,
                                    .hi = 1.25 * log((double)o->vocab),
                                    .colorbox = 1,
                                    .cb_x = 0.89,
                                    .cb_w = 0.025});
    free(v);
    return run_gp_script_draw(&s, o->out, "loss_positions.png", "attograd-induction");
}

static int plot_patterns(const IndOptions *o, const IndRecord *x) {
    int LH = x->n_layer * x->NH, T = x->T, Be = o->eval_batch;
    RunGpScript s;
    int cell = 190;
    run_gp_script_begin(&s, 60 + cell * LH + 70, 2 * cell + 60);
    FILE *f = s.f;
    fprintf(f, "set multiplot\n");
    double W = 60 + cell * LH + 70, H = 2 * cell + 60;
    size_t TT = (size_t)T * T;
    for (int row = 0; row < 2; row++)
        for (int k = 0; k < LH; k++) {
            int l = k / x->NH, h = k % x->NH;
            /* before: sequence 0 of pattern_first; after: sequence 0 of layer l's batch */
            const float *p = row == 0 ? x->pattern_first + (size_t)k * TT
                                      : x->pattern_last + ((size_t)l * Be * x->NH + h) * TT;
            char title[64];
            snprintf(title, sizeof title, "L%dH%d %s", l, h, row ? "after" : "before");
            double x0 = (60.0 + cell * k) / W, y1 = 1 - (35.0 + cell * row) / H;
            run_gp_panel(f, &(RunGpPanel){.id = row * LH + k,
                                          .v = p,
                                          .rows = T,
                                          .cols = T,
                                          .title = title,
                                          .x0 = x0,
                                          .x1 = x0 + (cell - 14.0) / W,
                                          .y0 = y1 - (cell - 40.0) / H,
                                          .y1 = y1,
                                          .lo = 0,
                                          .hi = 1,
                                          .colorbox = k == LH - 1,
                                          .cb_x = (60.0 + cell * LH + 10) / W,
                                          .cb_w = 15.0 / W});
        }
    fprintf(f, "unset multiplot\n");
    char name[64];
    snprintf(name, sizeof name, "patterns_%s.png", x->name);
    return run_gp_script_draw(&s, o->out, name, "attograd-induction");
}

/* ", name" at the end of the string drawn (of size n), when drawn is 1 */
static int add_name(char *list, size_t n, int drawn, const char *name) {
    size_t len = strlen(list);
    if (drawn && len < n) snprintf(list + len, n - len, ", %s", name);
    return drawn;
}

int ind_plot(const IndOptions *o, const IndRecord *recs, int n_recs, const int *eval_tokens,
             char *drawn, size_t n) {
    (void)eval_tokens;
    if (!run_gnuplot_available()) {
        fprintf(stderr, "attograd-induction: no gnuplot (scripts/deps.sh gnuplot-nox): the "
                        "pictures are skipped, the data files are written\n");
        return 0;
    }
    int k = add_name(drawn, n, plot_loss(o, recs, n_recs), "loss.png");
    k += add_name(drawn, n, plot_scores(o, recs, n_recs), "scores.png");
    k += add_name(drawn, n, plot_positions(o, &recs[0]), "loss_positions.png");
    for (int m = 0; m < n_recs; m++) {
        char name[128];
        snprintf(name, sizeof name, "patterns_%s.png", recs[m].name);
        k += add_name(drawn, n, plot_patterns(o, &recs[m]), name);
    }
    return k;
}
