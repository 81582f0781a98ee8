/* heads_plot.c: head importance's two heatmaps, a layer's grid of attention patterns and a grid
 * of heatmaps of one size, as gnuplot scripts drawn into PNGs (heads_plot.h).
 * Not here: the numbers (../lens/heads.c), the panels' script (../run/run_gp.c).
 * Read next: ../run/run_gp.c. */
#include "heads_plot.h"

#include <stdlib.h>
#include <string.h>

#include "../run/run.h"
#include "view.h"

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    AG_CHECK(p != NULL, "heads_plot: out of memory (%zu x %zu bytes)", n, size);
    return p;
}

/* the script in memory, drawn into png */
static int draw(char *script, const char *png) {
    int rc = run_plot_script(script, png);
    free(script);
    return rc;
}

int view_heads_png(const LensHeadImportance *h, const char *png, const char *title) {
    AG_CHECK_ARG(h);
    AG_CHECK_ARG(png);
    int NB = h->n_blocks, NH = h->NH;
    int cell_w = NH <= 8 ? 64 : 40, cell_h = 30, left = 110, gap = 120, right = 100;
    int top = 80, bottom = 36;
    int pw = NH * cell_w, ph = NB * cell_h;
    int W = left + 2 * pw + gap + right, H = top + ph + bottom;
    if (W < 700) W = 700;
    char **rows = xcalloc((size_t)NB, sizeof(char *)), **cols = xcalloc((size_t)NH, sizeof(char *));
    for (int b = 0; b < NB; b++) {
        rows[b] = xcalloc(32, 1);
        snprintf(rows[b], 32, "%s %d", h->kind[b] ? h->kind[b] : "", h->layer[b]);
    }
    for (int k = 0; k < NH; k++) {
        cols[k] = xcalloc(16, 1);
        snprintf(cols[k], 16, "%d", k);
    }
    float *up = xcalloc((size_t)NB * NH, sizeof(float)),
          *gs = xcalloc((size_t)NB * NH, sizeof(float));
    double lo = 0, hi = 0;
    for (size_t i = 0; i < (size_t)NB * NH; i++) {
        up[i] = (float)h->loss_up[i];
        gs[i] = (float)h->grad_score[i];
        if (h->loss_up[i] < lo) lo = h->loss_up[i];
        if (h->loss_up[i] > hi) hi = h->loss_up[i];
    }
    if (hi - lo < 1e-6) hi = lo + 1e-6;
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    AG_CHECK(f != NULL, "view_heads_png: out of memory");
    run_gp_begin(f, W, H, 10);
    fprintf(f, "set multiplot\nset border lw 0.5\nset cbtics font ',8'\n");
    fprintf(f, "set label 1 ");
    run_gp_string(f, title ? title : "head importance");
    fprintf(f, " at screen 0.5, screen %.5f center font ',12'\n", 1 - 22.0 / H);
    fprintf(f, "set xlabel 'head' font ',9' offset 0,0.6\n");
    for (int panel = 0; panel < 2; panel++) {
        RunGpPanel p;
        memset(&p, 0, sizeof p);
        p.id = panel;
        p.v = panel ? gs : up;
        p.rows = NB;
        p.cols = NH;
        p.xlab = (const char *const *)cols;
        p.ylab = panel ? NULL : (const char *const *)rows;
        double x0 = left + panel * (pw + gap);
        p.x0 = x0 / W;
        p.x1 = (x0 + pw) / W;
        p.y1 = 1 - (double)top / H;
        p.y0 = 1 - (double)(top + ph) / H;
        p.lo = panel ? 0 : lo;
        p.hi = panel ? 1 : hi;
        p.title = panel ? "gradient score |dL/dgate| (L2-normalized per block)"
                        : "loss increase when the head is masked";
        p.colorbox = 1;
        p.cb_x = (x0 + pw + 12) / W;
        p.cb_w = 12.0 / W;
        p.values = 2;
        p.horizontal_xtics = 1;
        if (panel == 0)
            fprintf(f, "set palette defined (0 '#ffffff', 0.5 '#fc9272', 1 '#a50f15')\n");
        else
            fprintf(f, "set palette defined (0 '#ffffff', 0.5 '#9ecae1', 1 '#08519c')\n");
        run_gp_panel(f, &p);
        if (panel == 0) fprintf(f, "unset label 1\n");
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    for (int b = 0; b < NB; b++) free(rows[b]);
    for (int k = 0; k < NH; k++) free(cols[k]);
    free(rows);
    free(cols);
    free(up);
    free(gs);
    return draw(script, png);
}

/* ---- one layer's grid ---- */

static int max_label(const LensTokenList *l) {
    int m = 1;
    for (int i = 0; i < l->n; i++)
        if ((int)strlen(l->tok[i]) > m) m = (int)strlen(l->tok[i]);
    return m;
}

int view_patterns_png(const LensPatterns *a, int layer, const char *caption, const char *png) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(png);
    const LensPattern *row[LENS_MAX_HEAD_BLOCKS];
    int n_rows = 0;
    for (int i = 0; i < a->n; i++)
        if (a->blocks[i].layer == layer) row[n_rows++] = &a->blocks[i];
    AG_CHECK(n_rows > 0, "view_patterns_png: layer %d: none of the %d blocks is of that layer",
             layer, a->n);
    /* in pixels: square cells; tick labels of about CH pixels a character (8 pt) */
    const double CH = 6.5;
    int n_max = 1, lab_y = 1, NH = row[0]->NH;
    for (int l = 0; l < a->n_lists; l++) {
        if (a->lists[l].n > n_max) n_max = a->lists[l].n;
        if (max_label(&a->lists[l]) > lab_y) lab_y = max_label(&a->lists[l]);
    }
    int cell = 340 / n_max;
    if (cell > 30) cell = 30;
    if (cell < 12) cell = 12;
    if (NH * n_max * cell > 2000) cell = 2000 / (NH * n_max) > 8 ? 2000 / (NH * n_max) : 8;
    int wmax = n_max * cell, gap = 22;
    int left = 48 + (int)(CH * lab_y), right = 90, top = 78, title_h = 30;
    int W = left + NH * wmax + (NH - 1) * gap + right;
    if (W < 640) W = 640;
    int H = top + 12;
    int row_h[LENS_MAX_HEAD_BLOCKS], row_w[LENS_MAX_HEAD_BLOCKS], row_xl[LENS_MAX_HEAD_BLOCKS];
    for (int r = 0; r < n_rows; r++) {
        row_h[r] = row[r]->Tq * cell;
        row_w[r] = row[r]->Tk * cell;
        row_xl[r] = 18 + (int)(CH * max_label(&a->lists[row[r]->k_list]));
        H += title_h + row_h[r] + row_xl[r];
    }
    char *script = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&script, &len);
    AG_CHECK(f != NULL, "view_patterns_png: out of memory");
    run_gp_begin(f, W, H, 10);
    fprintf(f, "set palette defined (0 '#ffffff', 0.25 '#c6dbef', 0.5 '#6baed6', 0.75 "
               "'#2171b5', 1 '#08306b')\n");
    fprintf(f, "set cbtics 0.2 font ',8'\nset border lw 0.5\n");
    fprintf(f, "set multiplot\n");
    char buf[256];
    snprintf(buf, sizeof buf, "layer %d attention, every head (rows: queries, columns: keys)",
             layer);
    fprintf(f, "set label 1 ");
    run_gp_string(f, buf);
    fprintf(f, " at screen 0.5, screen %.5f center font ',12'\n", 1 - 22.0 / H);
    /* the caption: a long one is cut (the axes carry every token) */
    char *line = xcalloc(strlen(caption ? caption : "") + 4, 1);
    strcpy(line, caption ? caption : "");
    if (strlen(line) > (size_t)(W / 7)) strcpy(line + W / 7 - 3, "...");
    fprintf(f, "set label 2 ");
    run_gp_string(f, line);
    fprintf(f, " at screen 0.5, screen %.5f center font ',10'\n", 1 - 46.0 / H);
    free(line);
    int y = top, id = 0;
    for (int r = 0; r < n_rows; r++) {
        const LensPattern *b = row[r];
        y += title_h;
        for (int h = 0; h < NH; h++) {
            RunGpPanel p;
            memset(&p, 0, sizeof p);
            p.id = id++;
            p.v = b->p + (size_t)h * b->Tq * b->Tk;
            p.rows = b->Tq;
            p.cols = b->Tk;
            p.xlab = (const char *const *)a->lists[b->k_list].tok;
            p.ylab = h == 0 ? (const char *const *)a->lists[b->q_list].tok : NULL;
            double x0 = left + h * (wmax + gap);
            p.x0 = x0 / W;
            p.x1 = (x0 + row_w[r]) / W;
            p.y1 = 1 - (double)y / H;
            p.y0 = 1 - (double)(y + row_h[r]) / H;
            p.lo = 0;
            p.hi = 1;
            snprintf(buf, sizeof buf, "head %d", h);
            p.title = buf;
            p.colorbox = h == NH - 1;
            p.cb_x = (double)(W - right + 24) / W;
            p.cb_w = 14.0 / W;
            if (h == 0) {
                fprintf(f, "set ylabel ");
                run_gp_string(f, b->title ? b->title : b->name);
                fprintf(f, " font ',10'\n");
            } else {
                fprintf(f, "unset ylabel\n");
            }
            run_gp_panel(f, &p);
            if (r == 0 && h == 0) fprintf(f, "unset label 1\nunset label 2\n");
        }
        y += row_h[r] + row_xl[r];
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    return draw(script, png);
}

/* ---- a grid of heatmaps of one size ---- */

int view_grid_png(const char *dir, const char *name, const ViewGrid *g, const char *prog,
                  char *drawn, size_t size) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(g);
    AG_CHECK_ARG(prog);
    AG_CHECK(g->v && g->titles && g->n_rows > 0 && g->n_cols > 0 && g->cell > 40,
             "view_grid_png: %s: a grid needs its panels, titles, (%d, %d) of them and cells "
             "over 40 pixels (%d)",
             name, g->n_rows, g->n_cols, g->cell);
    int N = g->n_cols, cell = g->cell;
    double W = 60 + cell * N + 70, H = g->n_rows * cell + 60;
    RunGpScript s;
    run_gp_script_begin(&s, (int)W, (int)H);
    fprintf(s.f, "set multiplot\n");
    for (int row = 0; row < g->n_rows; row++)
        for (int k = 0; k < N; k++) {
            double x0 = (60.0 + cell * k) / W, y1 = 1 - (35.0 + cell * row) / H;
            run_gp_panel(s.f, &(RunGpPanel){.id = row * N + k,
                                            .v = g->v[row * N + k],
                                            .rows = g->rows,
                                            .cols = g->cols,
                                            .title = g->titles[row * N + k],
                                            .x0 = x0,
                                            .x1 = x0 + (cell - 14.0) / W,
                                            .y0 = y1 - (cell - 40.0) / H,
                                            .y1 = y1,
                                            .hi = g->hi,
                                            .colorbox = k == N - 1,
                                            .cb_x = (60.0 + cell * N + 10) / W,
                                            .cb_w = 15.0 / W});
        }
    fprintf(s.f, "unset multiplot\n");
    int ok = run_gp_script_draw(&s, dir, name, prog);
    if (ok && drawn) view_drawn(drawn, size, name);
    return ok;
}
