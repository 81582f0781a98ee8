/* plot.c: attograd-translate's training curves from log.csv (train and valid loss, valid exact
 * match against the step), a gnuplot script run by the library's run_plot_script
 * (src/run/run_plot.c: kept next to the PNG as NAME.gp; without gnuplot nothing is drawn and
 * the caller is told the plot was skipped: training never depends on it).
 * Not here: the heatmaps and script pieces (src/run/run_gp.c), what the pictures show.
 * Read next: examples/translate/attention.c. */
#include "common.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the training curves ---- */

/* The columns of log.csv (also attograd-gpt's, which has no valid_exact), by header name, so
 * that appended columns change nothing. */
typedef struct {
    double *step, *train, *vloss, *vexact;
    int n, n_valid, n_exact; /* rows with a valid loss, and with a valid exact match too */
} LossLog;

static void log_free(LossLog *l) {
    free(l->step);
    free(l->train);
    free(l->vloss);
    free(l->vexact);
}

/* field k (0-based) of a CSV line: its text in buf, "" if missing */
static void csv_field(const char *line, int k, char *buf, size_t n) {
    const char *p = line;
    for (int i = 0; i < k && p; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    if (!p) {
        buf[0] = '\0';
        return;
    }
    size_t len = strcspn(p, ",\r\n");
    snprintf(buf, n, "%.*s", (int)len, p);
}

static int read_log(const char *csv, LossLog *l) {
    memset(l, 0, sizeof *l);
    FILE *f = fopen(csv, "r");
    if (!f) return ag_fail(AG_ERR_IO, "%s: cannot open: %s", csv, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int col[4] = {-1, -1, -1, -1}, cap_rows = 0, header = 0;
    const char *names[4] = {"step", "train_loss", "valid_loss", "valid_exact"};
    while (getline(&line, &cap, f) > 0) {
        if (!header) {
            for (int k = 0; k < 32; k++) {
                char name[64];
                csv_field(line, k, name, sizeof name);
                for (int j = 0; j < 4; j++)
                    if (strcmp(name, names[j]) == 0) col[j] = k;
            }
            header = 1;
            if (col[0] < 0 || col[1] < 0) {
                free(line);
                fclose(f);
                return ag_fail(AG_ERR_FORMAT, "%s: no step and train_loss columns in its header",
                               csv);
            }
            continue;
        }
        if (l->n == cap_rows) {
            cap_rows = cap_rows ? 2 * cap_rows : 256;
            l->step = realloc(l->step, (size_t)cap_rows * sizeof(double));
            l->train = realloc(l->train, (size_t)cap_rows * sizeof(double));
            l->vloss = realloc(l->vloss, (size_t)cap_rows * sizeof(double));
            l->vexact = realloc(l->vexact, (size_t)cap_rows * sizeof(double));
            AG_CHECK(l->step && l->train && l->vloss && l->vexact, "plot: out of memory");
        }
        double v[4];
        for (int j = 0; j < 4; j++) {
            char buf[64], *end;
            v[j] = NAN;
            if (col[j] < 0) continue;
            csv_field(line, col[j], buf, sizeof buf);
            double x = strtod(buf, &end);
            if (*buf && !*end) v[j] = x;
        }
        if (!isfinite(v[0])) continue; /* a line cut short by a crash */
        l->step[l->n] = v[0];
        l->train[l->n] = v[1];
        l->vloss[l->n] = v[2];
        l->vexact[l->n] = v[3];
        l->n_valid += isfinite(v[2]);
        l->n_exact += isfinite(v[2]) && isfinite(v[3]);
        l->n++;
    }
    free(line);
    fclose(f);
    return AG_OK;
}

int ex_plot_loss(const char *csv_path, const char *png_path) {
    LossLog l;
    if (read_log(csv_path, &l) != AG_OK) return RUN_PLOT_FAILED;
    if (l.n == 0) {
        log_free(&l);
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
    run_gp_begin(f, 960, 600, 11);
    /* the key in one row above the plot (inside, it would hide a curve sooner or later); the
     * log's path small at the bottom right */
    char title[700];
    snprintf(title, sizeof title, "training curves: %s", csv_path);
    fprintf(f, "set label 99 ");
    run_gp_string(f, title);
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
    log_free(&l);
    int rc = run_plot_script(script, png_path);
    free(script);
    return rc;
}
