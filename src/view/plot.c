/* plot.c: one plot of the page's Plots tab as JSON (view_plot, view.h; the tab: view_plots):
 * named curves over one x axis; and the same plots drawn as a PNG by gnuplot (view_plot_png), so that a program
 * describes its curves once for its page and its pictures (view_plot_pngs: several into a
 * folder); one table of the Tables tab (view_table); the labels of a table's rows and the list of
 * what was drawn (view_labels, view_drawn). Not here: drawing them in the page
 * (page.html's buildPlots), running gnuplot (src/run/run_plot.c), the other parts of the
 * document (view.c). Read next: page.html. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/file.h"
#include "../run/run.h"
#include "view.h"

void view_plot(ViewBuf *b, const ViewPlot *p) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(p);
    AG_CHECK(p->name && p->title && p->xlabel && p->x && p->n >= 0 && p->ns >= 0 &&
                 (p->ns == 0 || (p->names && p->ys)),
             "view_plot: a plot needs its name, title, xlabel and x, n >= 0 (%d), and names "
             "and ys for its %d series",
             p->n, p->ns);
    view_raw(b, "{");
    view_field_str(b, "name", p->name);
    view_raw(b, ",");
    view_field_str(b, "title", p->title);
    view_raw(b, ",");
    view_field_str(b, "xlabel", p->xlabel);
    view_raw(b, p->logx ? ",\"logx\":true" : ",\"logx\":false");
    view_raw(b, p->logy ? ",\"logy\":true,\"x\":" : ",\"logy\":false,\"x\":");
    view_nums(b, p->x, (size_t)p->n);
    view_raw(b, ",\"series\":[");
    for (int s = 0; s < p->ns; s++) {
        AG_CHECK(p->names[s] && p->ys[s], "view_plot: %s: series %d has no name or values", p->name,
                 s);
        view_raw(b, s ? ",{" : "{");
        view_field_str(b, "name", p->names[s]);
        view_raw(b, ",\"y\":");
        view_nums(b, p->ys[s], (size_t)p->n);
        view_raw(b, "}");
    }
    view_raw(b, "]");
    if (p->extra && *p->extra) view_raw(b, ","), view_raw(b, p->extra);
    view_raw(b, "}");
}

/* the number after "key": in a plot's extra JSON fields, or def */
static double extra_num(const char *extra, const char *key, double def) {
    const char *at = extra ? strstr(extra, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : def;
}

int view_plot_png(const char *png, const ViewPlot *plots, int n, int width, int height) {
    AG_CHECK_ARG(png);
    AG_CHECK_ARG(plots);
    AG_CHECK(n >= 1, "view_plot_png: %s: %d plots", png, n);
    RunGpScript s = {0};
    s.f = open_memstream(&s.buf, &s.len);
    AG_CHECK(s.f, "view_plot_png: out of memory");
    FILE *f = s.f;
    run_gp_begin(f, width, height, 11);
    if (n > 1) fprintf(f, "set multiplot layout %d,1\n", n);
    fprintf(f, "set grid\nset key outside right\nset format y '%%g'\n");
    for (int i = 0; i < n; i++) {
        const ViewPlot *p = &plots[i];
        AG_CHECK(p->x && p->title && p->xlabel && (p->ns == 0 || (p->names && p->ys)),
                 "view_plot_png: %s: plot %d needs its title, xlabel, x, names and ys", png, i);
        fprintf(f, "$P%d << EOD\n", i); /* a row a point (x > 0 only on a log x axis) */
        for (int r = 0; r < p->n; r++) {
            if (p->logx && !(p->x[r] > 0)) continue;
            fprintf(f, "%.10g", p->x[r]);
            for (int c = 0; c < p->ns; c++) /* NaN: no point (gnuplot's missing value) */
                isfinite(p->ys[c][r]) ? fprintf(f, " %.6g", p->ys[c][r]) : fprintf(f, " NaN");
            fputc('\n', f);
        }
        fprintf(f, "EOD\nset title ");
        run_gp_string(f, p->title);
        fprintf(f, "\nset xlabel ");
        run_gp_string(f, p->xlabel);
        fprintf(f, "\n%s logscale x\n%s logscale y\n", p->logx ? "set" : "unset",
                p->logy ? "set" : "unset");
        double lo = extra_num(p->extra, "\"ymin\":", NAN),
               hi = extra_num(p->extra, "\"ymax\":", NAN);
        if (isfinite(lo) && isfinite(hi))
            fprintf(f, "set yrange [%.6g:%.6g]\n", lo, hi + 0.02 * (hi - lo));
        else
            fprintf(f, "set yrange [*:*]\n");
        int bars = p->extra && strstr(p->extra, "\"bars\":true");
        if (bars && p->n > 0)
            fprintf(f, "set style fill solid\nset xrange [%.10g:%.10g]\n", p->x[0] - 1,
                    p->x[p->n - 1] + 1);
        fprintf(f, "plot");
        for (int c = 0; c < p->ns; c++) {
            fprintf(f, "%s $P%d u 1:%d w %s t ", c ? "," : "", i, c + 2,
                    bars ? "boxes" : "lp pt 7 ps 0.4 lw 2");
            run_gp_string(f, p->names[c]);
        }
        fprintf(f, "%s\n", p->ns ? "" : " NaN notitle");
        if (bars) fprintf(f, "set autoscale x\n");
    }
    if (n > 1) fprintf(f, "unset multiplot\n");
    fclose(f);
    int rc = run_plot_script(s.buf, png);
    free(s.buf);
    return rc;
}

void view_plots(ViewBuf *b, const ViewPlot *p, int n) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(p);
    view_raw(b, ",\"plots\":[");
    for (int i = 0; i < n; i++) view_raw(b, i ? "," : ""), view_plot(b, &p[i]);
    view_raw(b, "]");
}

void view_table(ViewBuf *b, const ViewTable *t) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(t);
    AG_CHECK(t->name && t->title && t->rows && t->cols && t->values && t->n_rows >= 0 &&
                 t->n_cols >= 0,
             "view_table: a table needs its name, title, rows, cols and values (%d, %d)", t->n_rows,
             t->n_cols);
    view_raw(b, "{");
    view_field_str(b, "name", t->name);
    view_raw(b, ",");
    view_field_str(b, "title", t->title);
    for (int k = 0; k < 2; k++) {
        int n = k ? t->n_cols : t->n_rows;
        view_raw(b, k ? "],\"cols\":[" : ",\"rows\":[");
        for (int i = 0; i < n; i++) {
            const char *s = (k ? t->cols : t->rows)[i];
            AG_CHECK(s, "view_table: %s: %s label %d is NULL", t->name, k ? "column" : "row", i);
            if (i) view_raw(b, ",");
            view_str(b, s, strlen(s));
        }
    }
    view_raw(b, "],\"values\":");
    view_nums(b, t->values, (size_t)t->n_rows * t->n_cols);
    view_raw(b, "}");
}

int view_plot_pngs(const char *dir, const ViewPng *pngs, int n, const char *prog, char *drawn,
                   size_t size) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(pngs);
    AG_CHECK_ARG(prog);
    int k = 0;
    for (int i = 0; i < n; i++) {
        char *path = io_path_join(dir, pngs[i].name);
        int rc = view_plot_png(path, pngs[i].plots, pngs[i].n, pngs[i].width, pngs[i].height);
        free(path);
        if (rc != RUN_PLOT_DRAWN) {
            fprintf(stderr, "%s: %s\n", prog, ag_last_error());
            continue;
        }
        k++;
        if (drawn) view_drawn(drawn, size, pngs[i].name);
    }
    return k;
}

char **view_labels(const char *prefix, const int64_t *v, int n) {
    AG_CHECK_ARG(prefix);
    AG_CHECK(n >= 0, "view_labels: %d labels", n);
    char **s = malloc((size_t)(n ? n : 1) * (sizeof *s + 32));
    AG_CHECK(s, "view_labels: out of memory for %d labels", n);
    for (int i = 0; i < n; i++) {
        s[i] = (char *)(s + n) + 32 * i;
        snprintf(s[i], 32, "%s%lld", prefix, v ? (long long)v[i] : (long long)i);
    }
    return s;
}

void view_drawn(char *drawn, size_t size, const char *name) {
    AG_CHECK_ARG(drawn);
    AG_CHECK_ARG(name);
    size_t len = strlen(drawn);
    if (len < size) snprintf(drawn + len, size - len, ", %s", name);
}
