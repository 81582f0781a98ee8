/* run_gp.c: the building blocks of gnuplot scripts the programs draw with: a string literal,
 * the PNG terminal, heatmap panels, a script written in memory and drawn (run_gp_script_*), and
 * a whole heatmap picture (run_plot_heatmap: the lens commands'). Each picture goes through
 * run_plot_script (run_plot.c: the script kept next to the PNG as NAME.gp).
 * Not here: what the pictures show (the programs), running gnuplot (run_plot.c).
 * Read next: run_plot.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

void run_gp_string(FILE *f, const char *s) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(s);
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        if (*s != '\n' && *s != '\r') fputc(*s, f);
    }
    fputc('\'', f);
}

void run_gp_begin(FILE *f, int width, int height, int font_size) {
    AG_CHECK_ARG(f);
    fprintf(f,
            "set terminal pngcairo size %d,%d font 'DejaVu Sans,%d' noenhanced background "
            "'white'\n",
            width, height, font_size);
    fprintf(f, "set output outfile\n");
}

void run_gp_script_begin(RunGpScript *s, int width, int height) {
    AG_CHECK_ARG(s);
    s->buf = NULL, s->len = 0;
    s->f = open_memstream(&s->buf, &s->len);
    AG_CHECK(s->f, "run_gp_script_begin: out of memory");
    run_gp_begin(s->f, width, height, 11);
}

int run_gp_script_draw(RunGpScript *s, const char *dir, const char *name, const char *prefix) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(prefix);
    fclose(s->f);
    char png[1100];
    snprintf(png, sizeof png, "%s/%s", dir, name);
    int rc = run_plot_script(s->buf, png);
    free(s->buf);
    s->f = NULL, s->buf = NULL;
    if (rc != RUN_PLOT_DRAWN) fprintf(stderr, "%s: %s\n", prefix, ag_last_error());
    return rc == RUN_PLOT_DRAWN;
}

/* tics from labels: set xtics ('a' 0, 'b' 1, ...) */
static void gp_tics(FILE *f, const char *axis, const char *const *labels, int n, const char *opt) {
    fprintf(f, "set %s (", axis);
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        run_gp_string(f, labels[i]);
        fprintf(f, " %d", i);
    }
    fprintf(f, ") %s\n", opt);
}

void run_gp_panel(FILE *f, const RunGpPanel *p) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(p);
    AG_CHECK(p->v || (size_t)p->rows * p->cols == 0, "run_gp_panel: no values for (%d, %d)",
             p->rows, p->cols);
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
    run_gp_string(f, p->title ? p->title : "");
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

int run_plot_heatmap(const char *png, const char *title, const double *v, int rows, int cols,
                     char **ylab, char **xlab, double range) {
    AG_CHECK_ARG(png);
    AG_CHECK_ARG(title);
    AG_CHECK_ARG(v);
    if (!run_gnuplot_available()) return RUN_PLOT_SKIPPED;
    float *f = malloc((size_t)rows * cols * sizeof(float));
    AG_CHECK(f, "run_plot_heatmap: out of memory");
    double hi = 1e-9;
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        f[i] = (float)v[i];
        if (fabs(v[i]) > hi && isfinite(v[i])) hi = fabs(v[i]);
    }
    if (range > 0) hi = range;
    int cw = cols <= 16 ? 64 : cols <= 64 ? 14 : 8, ch = rows <= 32 ? 22 : 12;
    int left = 200, top = 60, W = left + cols * cw + 120, H = top + rows * ch + 70;
    if (W < 600) W = 600;
    RunGpScript s = {0};
    s.f = open_memstream(&s.buf, &s.len);
    AG_CHECK(s.f, "run_plot_heatmap: out of memory");
    run_gp_begin(s.f, W, H, 10);
    fprintf(s.f, "set multiplot\nset border lw 0.5\nset cbtics font ',8'\nset label 1 ");
    run_gp_string(s.f, title);
    fprintf(s.f, " at screen 0.5, screen %.5f center font ',11'\n", 1 - 22.0 / H);
    if (range > 0)
        fprintf(s.f, "set palette defined (0 '#ffffff', 1 '#b2182b')\n");
    else
        fprintf(s.f, "set palette defined (-1 '#2166ac', 0 '#ffffff', 1 '#b2182b')\n");
    RunGpPanel p = {.id = 0,
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
    run_gp_panel(s.f, &p);
    fprintf(s.f, "unset multiplot\n");
    fclose(s.f);
    int rc = run_plot_script(s.buf, png);
    free(s.buf);
    free(f);
    return rc;
}
