/* plot.c: the example programs' pictures: the training curves from log.csv (train and valid
 * loss, valid exact match against the step), and the heatmap panels the translator's
 * attention.c and heads.c, the lens commands and attograd-induction draw with. Each is a
 * gnuplot script run by the library's run_plot_script (src/run/run_plot.c: kept next to the
 * PNG as NAME.gp; without gnuplot nothing is drawn and the caller is told the plot was
 * skipped: training and the analyses never depend on it).
 * Not here: what the pictures show (the programs' files; their trainers write log.csv).
 * Read next: examples/translate/attention.c. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- heatmap panels (attention.c, heads.c) ---- */

/* s as a gnuplot single-quoted string: '' stands for a quote, nothing else is special */
void ex_gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        if (*s != '\n' && *s != '\r') fputc(*s, f);
    }
    fputc('\'', f);
}

void ex_gp_begin(FILE *f, int width, int height, int font_size) {
    fprintf(f,
            "set terminal pngcairo size %d,%d font 'DejaVu Sans,%d' noenhanced background "
            "'white'\n",
            width, height, font_size);
    fprintf(f, "set output outfile\n");
}

void ex_script_begin(ExScript *s, int width, int height) {
    s->buf = NULL, s->len = 0;
    s->f = open_memstream(&s->buf, &s->len);
    AG_CHECK(s->f, "ex_script_begin: out of memory");
    ex_gp_begin(s->f, width, height, 11);
}

int ex_script_draw(ExScript *s, const char *dir, const char *name, const char *prefix) {
    fclose(s->f);
    char png[1100];
    snprintf(png, sizeof png, "%s/%s", dir, name);
    int rc = run_plot_script(s->buf, png);
    free(s->buf);
    if (rc != RUN_PLOT_DRAWN) fprintf(stderr, "%s: %s\n", prefix, ag_last_error());
    return rc == RUN_PLOT_DRAWN;
}

/* tics from labels: set xtics ('a' 0, 'b' 1, ...) */
static void gp_tics(FILE *f, const char *axis, const char *const *labels, int n, const char *opt) {
    fprintf(f, "set %s (", axis);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        ex_gp_string(f, labels[i]);
        fprintf(f, " %d", i);
    }
    fprintf(f, ") %s\n", opt);
}

void ex_gp_panel(FILE *f, const ExGpPanel *p) {
    int id = p->id;
    fprintf(f, "$M%d << EOD\n", id);
    for (int r = 0; r < p->rows; r++) {
        for (int c = 0; c < p->cols; c++)
            fprintf(f, "%s%.5g", c ? " " : "", p->v[(size_t)r * p->cols + c]);
        fputc('\n', f);
    }
    fprintf(f, "EOD\n");
    fprintf(f, "set lmargin at screen %.5f\nset rmargin at screen %.5f\n", p->x0, p->x1);
    fprintf(f, "set bmargin at screen %.5f\nset tmargin at screen %.5f\n", p->y0, p->y1);
    fprintf(f, "set xrange [-0.5:%g]\nset yrange [%g:-0.5]\n", p->cols - 0.5, p->rows - 0.5);
    fprintf(f, "set cbrange [%.6g:%.6g]\n", p->lo, p->hi);
    fprintf(f, "set title ");
    ex_gp_string(f, p->title ? p->title : "");
    fputc('\n', f);
    if (p->xlab)
        gp_tics(f, "xtics", p->xlab, p->cols,
                p->horizontal_xtics ? "scale 0 font ',9'" : "rotate by 90 right scale 0 font ',8'");
    else
        fprintf(f, "unset xtics\n");
    if (p->ylab)
        gp_tics(f, "ytics", p->ylab, p->rows, "scale 0 font ',8'");
    else
        fprintf(f, "unset ytics\n");
    if (p->colorbox)
        fprintf(f,
                "set colorbox user origin screen %.5f, screen %.5f size screen %.5f, screen "
                "%.5f\n",
                p->cb_x, p->y0, p->cb_w, p->y1 - p->y0);
    else
        fprintf(f, "unset colorbox\n");
    if (p->values)
        fprintf(f,
                "plot $M%d matrix with image notitle, $M%d matrix using 1:2:(sprintf('%%.%dg', "
                "$3)):($3 > %.6g ? 0xffffff : 0) with labels tc rgb variable font ',9' "
                "notitle\n",
                id, id, p->values, p->lo + 0.6 * (p->hi - p->lo));
    else
        fprintf(f, "plot $M%d matrix with image notitle\n", id);
}

/* ---- the training curves ---- */

/* log.csv's columns by header name (attograd-gpt's has no valid_exact), so that appended
 * columns change nothing */
int ex_plot_loss(const char *csv_path, const char *png_path) {
    static const char *const names[] = {"step", "train_loss", "valid_loss", "valid_exact"};
    double *c[4];
    int n;
    if (run_csv_read(csv_path, names, 4, 2, c, &n) != AG_OK) return RUN_PLOT_FAILED;
    struct {
        double *step, *train, *vloss, *vexact;
        int n, n_valid, n_exact; /* rows with a valid loss, and with a valid exact match too */
    } l = {c[0], c[1], c[2], c[3], n, 0, 0};
    for (int i = 0; i < n; i++) {
        l.n_valid += isfinite(l.vloss[i]);
        l.n_exact += isfinite(l.vloss[i]) && isfinite(l.vexact[i]);
    }
    if (l.n == 0) {
        ag_fail(AG_ERR_FORMAT, "%s: plot skipped: %s has no rows yet", png_path, csv_path);
        return RUN_PLOT_SKIPPED;
    }
    int positive = 1;
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < l.n; i++) {
        if (isfinite(l.train[i]) && !(l.train[i] > 0)) positive = 0;
        if (isfinite(l.vloss[i]) && !(l.vloss[i] > 0)) positive = 0;
        if (isfinite(l.train[i])) lo = fmin(lo, l.train[i]), hi = fmax(hi, l.train[i]);
        if (isfinite(l.vloss[i])) lo = fmin(lo, l.vloss[i]), hi = fmax(hi, l.vloss[i]);
    }
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    ex_gp_begin(f, 960, 600, 11);
    /* the key in one row above the plot (inside, it would hide a curve sooner or later); the
     * log's path small at the bottom right */
    char title[700];
    snprintf(title, sizeof title, "training curves: %s", csv_path);
    fprintf(f, "set label 99 ");
    ex_gp_string(f, title);
    fprintf(f, " at screen 0.99, screen 0.02 right font ',8' tc rgb '#666666'\n");
    fprintf(f, "set xlabel 'step'\nset ylabel 'loss (cross-entropy per target token)'\n");
    if (positive) fprintf(f, "set logscale y\nset mytics 10\n");
    fprintf(f, "set grid xtics ytics mytics lt 1 lc rgb '#dddddd' lw 1, lt 1 lc rgb '#f0f0f0' "
               "lw 1\nset ytics nomirror\nset xrange [0:*]\nset border 3\nset tmargin 3\n");
    if (positive && lo <= hi) run_gp_log_ytics(f, lo, hi); /* distinct labels, narrow or wide */
    fprintf(f, "set key outside top center horizontal Left reverse samplen 3 width 2 maxrows 1 "
               "font ',10'\n");
    if (l.n_exact > 0)
        fprintf(f, "set y2label 'valid exact match (%%)'\nset y2range [0:100]\n"
                   "set y2tics 0,10,100\nset border 11\n");
    fprintf(f, "$train << EOD\n");
    for (int i = 0; i < l.n; i++)
        if (isfinite(l.train[i])) fprintf(f, "%.10g %.8g\n", l.step[i], l.train[i]);
    fprintf(f, "EOD\n$valid << EOD\n");
    for (int i = 0; i < l.n; i++)
        if (isfinite(l.vloss[i]) && (isfinite(l.vexact[i]) || l.n_exact == 0))
            fprintf(f, "%.10g %.8g %.8g\n", l.step[i], l.vloss[i], 100 * l.vexact[i]);
    fprintf(f, "EOD\n");
    fprintf(f, "plot $train using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'train loss'");
    if (l.n_valid > 0)
        fprintf(f, ", \\\n  $valid using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '#ff7f0e' "
                   "title 'valid loss'");
    if (l.n_exact > 0)
        fprintf(f, ", \\\n  $valid using 1:3 axes x1y2 with linespoints lw 2 "
                   "dt 2 pt 5 ps 0.8 lc rgb '#2ca02c' title 'valid exact match (right axis)'");
    fprintf(f, "\n");
    fclose(f);
    for (int j = 0; j < 4; j++) free(c[j]);
    int rc = run_plot_script(script, png_path);
    free(script);
    return rc;
}

/* values (rows, cols) as a heatmap: blue (negative) through white to red, 0 in the middle */
int ex_plot_heatmap(const char *png, const char *title, const double *v, int rows, int cols,
                    char **ylab, char **xlab, double range) {
    if (!run_gnuplot_available()) return RUN_PLOT_SKIPPED;
    float *f = ex_malloc((size_t)rows * cols * sizeof(float));
    double hi = 1e-9;
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        f[i] = (float)v[i];
        if (fabs(v[i]) > hi && isfinite(v[i])) hi = fabs(v[i]);
    }
    if (range > 0) hi = range;
    int cw = cols <= 16 ? 64 : cols <= 64 ? 14 : 8, ch = rows <= 32 ? 22 : 12;
    int left = 200, top = 60, W = left + cols * cw + 120, H = top + rows * ch + 70;
    if (W < 600) W = 600;
    char *script = NULL;
    size_t len = 0;
    FILE *s = open_memstream(&script, &len);
    ex_gp_begin(s, W, H, 10);
    fprintf(s, "set multiplot\nset border lw 0.5\nset cbtics font ',8'\nset label 1 ");
    ex_gp_string(s, title);
    fprintf(s, " at screen 0.5, screen %.5f center font ',11'\n", 1 - 22.0 / H);
    if (range > 0)
        fprintf(s, "set palette defined (0 '#ffffff', 1 '#b2182b')\n");
    else
        fprintf(s, "set palette defined (-1 '#2166ac', 0 '#ffffff', 1 '#b2182b')\n");
    ExGpPanel p = {.id = 0,
                   .v = f,
                   .rows = rows,
                   .cols = cols,
                   .xlab = (const char *const *)xlab,
                   .ylab = (const char *const *)ylab,
                   .x0 = (double)left / W,
                   .x1 = (double)(left + cols * cw) / W,
                   .y1 = 1 - (double)top / H,
                   .y0 = 1 - (double)(top + rows * ch) / H,
                   .lo = range > 0 ? 0 : -hi,
                   .hi = hi,
                   .colorbox = 1,
                   .cb_x = (double)(left + cols * cw + 12) / W,
                   .cb_w = 12.0 / W,
                   .values = cols <= 16 && rows <= 32 ? 2 : 0,
                   .horizontal_xtics = cols <= 16};
    ex_gp_panel(s, &p);
    fprintf(s, "unset multiplot\n");
    fclose(s);
    int rc = run_plot_script(script, png);
    free(script);
    free(f);
    return rc;
}
