/* run_plot.c: the pictures, drawn by gnuplot (Debian's gnuplot-nox) through its cairo PNG
 * terminal: run_plot_script runs any script (the example programs' heatmaps too), and the
 * run's training curves from its log.csv (run_plot_loss: train and valid loss, and valid exact
 * match when the log has it; every program's loss.png). Each picture is a self-contained gnuplot
 * script, its data inline, kept next to the PNG as NAME.gp: `gnuplot NAME.gp` draws NAME.png
 * again (edit it to restyle). gnuplot runs as a child process in its own process group (Ctrl-C
 * is the run's), dying with the run, drawing into a temporary file renamed over the PNG; when
 * it is not installed (or AG_GNUPLOT names a command that does not exist) nothing is drawn and
 * the caller is told the plot was skipped: training never depends on it.
 * Not here: when a run draws (run_log.c, run_plot). Read next: docs/run.md. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/file.h"
#include "run_internal.h"

/* ---- finding and running gnuplot ---- */

static const char *gnuplot_command(void) {
    const char *g = getenv("AG_GNUPLOT");
    return g && *g ? g : "gnuplot";
}

static int is_program(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 && S_ISREG(s.st_mode) && access(path, X_OK) == 0;
}

/* The program's path: cmd itself if it holds a '/', else the first match in PATH. */
static int find_program(const char *cmd, char *out, size_t n) {
    if (strchr(cmd, '/')) {
        snprintf(out, n, "%s", cmd);
        return is_program(out);
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(out, n, "%.*s%s%s", (int)len, p, len ? "/" : "", cmd);
        if (is_program(out)) return 1;
        if (!end) return 0;
        p = end + 1;
    }
}

int run_gnuplot_available(void) {
    char path[1024];
    return find_program(gnuplot_command(), path, sizeof path);
}

/* base of png: "dir/loss.png" -> "dir/loss" */
static void strip_png(char *out, size_t n, const char *png) {
    size_t len = strlen(png);
    if (len > 4 && strcmp(png + len - 4, ".png") == 0) len -= 4;
    snprintf(out, n, "%.*s", (int)len, png);
}

/* "name = 'value'" into out (value quoted as gnuplot reads it: '' for a quote) */
static void gp_assign(char *out, size_t n, const char *name, const char *value) {
    size_t k = (size_t)snprintf(out, n, "%s = '", name);
    for (const char *s = value; *s && k + 3 < n; s++) {
        if (*s == '\'') out[k++] = '\'';
        out[k++] = *s;
    }
    if (k + 2 <= n) {
        out[k++] = '\'';
        out[k] = '\0';
    }
}

/* Keeps the first line of gnuplot's complaint that names a problem (for the message). */
static void first_error(const char *log, char *out, size_t n) {
    const char *p = log, *best = NULL;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && !best) best = p;
        if (len > 0 && (strstr(p, "error") || strstr(p, "rror:"))) {
            best = p;
            break;
        }
        if (!e) break;
        p = e + 1;
    }
    if (!best) {
        snprintf(out, n, "no message");
        return;
    }
    const char *e = strchr(best, '\n');
    snprintf(out, n, "%.*s", (int)(e ? (size_t)(e - best) : strlen(best)), best);
}

int run_plot_script(const char *script, const char *png) {
    AG_CHECK_ARG(script);
    AG_CHECK_ARG(png);
    char exe[1024];
    const char *cmd = gnuplot_command();
    if (!find_program(cmd, exe, sizeof exe)) {
        ag_fail(AG_ERR_IO,
                "%s: plot skipped: gnuplot not found (%s%s); install it with "
                "scripts/deps.sh gnuplot-nox, or set AG_GNUPLOT to its path",
                png, getenv("AG_GNUPLOT") && *getenv("AG_GNUPLOT") ? "AG_GNUPLOT=" : "command ",
                cmd);
        return RUN_PLOT_SKIPPED;
    }
    /* the script next to the picture, then gnuplot draws into a temporary file that is renamed
     * over png: a reader never sees half a picture */
    char base[600], gp[620], tmp[640], setout[700];
    if (strlen(png) + 1 > sizeof base) { /* the names below are made from it: never cut */
        ag_fail(AG_ERR_IO, "%s: plot skipped: a path of %zu bytes (at most %zu)", png, strlen(png),
                sizeof base - 1);
        return RUN_PLOT_FAILED;
    }
    strip_png(base, sizeof base, png);
    snprintf(gp, sizeof gp, "%s.gp", base);
    snprintf(tmp, sizeof tmp, "%s.png.tmp.%ld", base, (long)getpid());
    FILE *f;
    char *gp_tmp; /* the script too goes through a temporary file (src/io/file.h) */
    if (io_fopen_write(gp, &f, &gp_tmp) != AG_OK) return RUN_PLOT_FAILED;
    fprintf(f, "# drawn by attograd (src/run/run_plot.c); `gnuplot %s` draws %s again\n", gp, png);
    char def[700];
    gp_assign(def, sizeof def, "outfile", png);
    fprintf(f, "if (!exists('outfile')) %s\n", def);
    fputs(script, f);
    if (io_fclose_replace(f, gp_tmp, gp) != AG_OK) return RUN_PLOT_FAILED;
    if (io_check_replace(png) != AG_OK) return RUN_PLOT_FAILED; /* before gnuplot's work */
    gp_assign(setout, sizeof setout, "outfile", tmp);
    int pfd[2];
    if (pipe(pfd) != 0) {
        ag_fail(AG_ERR_IO, "%s: pipe: %s", png, strerror(errno));
        return RUN_PLOT_FAILED;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        ag_fail(AG_ERR_IO, "%s: fork: %s", png, strerror(errno));
        return RUN_PLOT_FAILED;
    }
    if (pid == 0) {
        /* its own process group: Ctrl-C on the terminal is the trainer's to handle */
        setpgid(0, 0);
#ifdef __linux__
        /* but it dies with the trainer: after a kill -9 an orphan would still write its
         * temporary PNG into the output folder, under a resumed run */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
#else
        (void)parent;
#endif
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0) {
            dup2(in, 0);
            close(in);
        }
        dup2(pfd[1], 1);
        dup2(pfd[1], 2);
        close(pfd[0]);
        close(pfd[1]);
        execl(exe, exe, "-e", setout, gp, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char log[4096];
    size_t used = 0;
    for (;;) {
        char chunk[1024];
        ssize_t r = read(pfd[0], chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        size_t k = (size_t)r < sizeof log - 1 - used ? (size_t)r : sizeof log - 1 - used;
        memcpy(log + used, chunk, k);
        used += k;
    }
    log[used] = '\0';
    close(pfd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    struct stat s;
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && stat(tmp, &s) == 0 && s.st_size > 0;
    if (!ok) {
        char why[256];
        first_error(log, why, sizeof why);
        unlink(tmp);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !*log)
            ag_fail(AG_ERR_IO, "%s: plot failed: %s could not be started", png, exe);
        else
            ag_fail(AG_ERR_IO, "%s: plot failed: %s exited with %d: %s (the script is %s)", png,
                    exe, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), why, gp);
        return RUN_PLOT_FAILED;
    }
    if (io_replace(tmp, png) != AG_OK) { /* a regular file or a new name only */
        unlink(tmp);
        return RUN_PLOT_FAILED;
    }
    return RUN_PLOT_DRAWN;
}

/* ---- the loss curve ---- */

/* the column of each name in a CSV header line, -1 when absent */
static void csv_columns(const char *header, const char *const *names, int n, int *col) {
    for (int j = 0; j < n; j++) col[j] = -1;
    const char *p = header;
    for (int k = 0; p; k++) {
        size_t len = strcspn(p, ",\n");
        for (int j = 0; j < n; j++)
            if (strlen(names[j]) == len && strncmp(p, names[j], len) == 0) col[j] = k;
        p = p[len] == ',' ? p + len + 1 : NULL;
    }
}

/* field k of a CSV line as a number, NAN when empty or absent */
static double csv_number(const char *line, int k) {
    const char *p = line;
    for (int i = 0; i < k && p; i++)
        if ((p = strchr(p, ','))) p++;
    if (k < 0 || !p || *p == ',' || *p == '\n' || !*p) return NAN;
    char *end;
    double x = strtod(p, &end);
    return end != p && (*end == ',' || *end == '\n' || !*end) ? x : NAN;
}

int run_csv_read(const char *path, const char *const *names, int n, int need, double **cols,
                 int *rows) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(names);
    AG_CHECK_ARG(cols);
    AG_CHECK_ARG(rows);
    AG_CHECK(n >= 1 && n <= 64 && need <= n, "run_csv_read: %d columns, %d needed", n, need);
    *rows = 0;
    for (int j = 0; j < n; j++) cols[j] = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return ag_fail(AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int col[64], room = 0, rc = AG_OK;
    csv_columns(getline(&line, &cap, f) > 0 ? line : "", names, n, col);
    char lacks[512] = "";
    for (int j = 0; j < need; j++)
        if (col[j] < 0)
            snprintf(lacks + strlen(lacks), sizeof lacks - strlen(lacks), "%s%s",
                     *lacks ? ", " : "", names[j]);
    if (*lacks) rc = ag_fail(AG_ERR_FORMAT, "%s: its header has no column %s", path, lacks);
    while (rc == AG_OK && getline(&line, &cap, f) > 0) {
        if (!isfinite(csv_number(line, col[0]))) continue; /* a line cut short by a crash */
        if (*rows == room) {
            room = room ? 2 * room : 256;
            for (int j = 0; j < n; j++) {
                cols[j] = realloc(cols[j], (size_t)room * sizeof(double));
                AG_CHECK(cols[j], "run_csv_read: out of memory");
            }
        }
        for (int j = 0; j < n; j++) cols[j][*rows] = csv_number(line, col[j]);
        (*rows)++;
    }
    free(line);
    fclose(f);
    return rc;
}

/* m * 10^e, as the double nearest to it (a negative power divides: 3 / 10, not 3 * 0.1) */
static double times_ten(double m, int e) { return e < 0 ? m / pow(10, -e) : m * pow(10, e); }

/* the ticks of a log axis over [lo, hi]: at most cap into t; how many (run_gp_log_ytics) */
static int log_ticks(double lo, double hi, double *t, int cap) {
    static const double mant[3][9] = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
    static const int n_mant[3] = {1, 3, 9};
    int e0 = (int)floor(log10(lo)), e1 = (int)floor(log10(hi));
    for (int s = 0; s < 3; s++) {
        int n = 0;
        for (int e = e0; e <= e1; e++)
            for (int k = 0; k < n_mant[s]; k++) {
                double v = times_ten(mant[s][k], e);
                if (v >= lo && v <= hi && n < cap) t[n++] = v;
            }
        if (n >= 3) return n;
    }
    /* narrower than from one whole number to the next of a decade: multiples of 5, 2 or 1
     * times a power of ten, the largest step that gives 3 ticks */
    for (int e = (int)floor(log10(hi - lo)); e > (int)floor(log10(hi - lo)) - 4; e--)
        for (int k = 2; k >= 0; k--) {
            double m = mant[1][k], step = times_ten(m, e);
            double i0 = ceil(lo / step), i1 = floor(hi / step);
            if (i1 - i0 + 1 < 3) continue;
            int n = 0;
            for (double i = i0; i <= i1 && n < cap; i++) t[n++] = times_ten(i * m, e);
            return n;
        }
    return 0;
}

void run_gp_log_ytics(FILE *f, double lo, double hi) {
    AG_CHECK_ARG(f);
    double pad = fmax(1.05, pow(hi / lo, 0.05)), a = lo / pad, b = hi * pad, t[32];
    if (!(lo > 0) || !(hi >= lo) || !isfinite(b) || !(a > 0)) return; /* gnuplot's own */
    int n = log_ticks(a, b, t, 32);
    fprintf(f, "set yrange [%.10g:%.10g]\nset ytics (", a, b);
    for (int i = 0; i < n; i++) {
        char lab[40];
        for (int p = 1; p <= 17; p++) { /* the fewest digits that give the value back */
            snprintf(lab, sizeof lab, "%.*g", p, t[i]);
            if (fabs(strtod(lab, NULL) - t[i]) <= 1e-9 * t[i]) break;
        }
        fprintf(f, "%s\"%s\" %s", i ? ", " : "", lab, lab);
    }
    fprintf(f, ")\n");
}

/* The script: train and valid loss (left axis, log scale when every loss is positive, its
 * ticks from run_gp_log_ytics) and valid exact match (right axis, %, when the log has a
 * valid_exact column with values), the data inline, from the log's n rows of c[0..4) (step,
 * train_loss, valid_loss, valid_exact) */
static char *loss_script(const char *csv, double *const *c, int n) {
    char *tt = NULL, *va = NULL, *ve = NULL;
    size_t lt = 0, la = 0, le = 0;
    /* train rows; valid rows (all of them, and those with an exact match too) */
    FILE *t = open_memstream(&tt, &lt), *v = open_memstream(&va, &la),
         *e = open_memstream(&ve, &le);
    AG_CHECK(t && v && e, "run: out of memory");
    int positive = 1, n_valid = 0, n_exact = 0;
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < n; i++) {
        double s = c[0][i], a = c[1][i], b = c[2][i], x = c[3][i];
        if (isfinite(a)) {
            fprintf(t, "%.10g %.8g\n", s, a);
            positive &= a > 0, lo = fmin(lo, a), hi = fmax(hi, a);
        }
        if (!isfinite(b)) continue;
        positive &= b > 0, lo = fmin(lo, b), hi = fmax(hi, b);
        fprintf(v, "%.10g %.8g %.8g\n", s, b, 100 * x), n_valid++;
        if (isfinite(x)) fprintf(e, "%.10g %.8g %.8g\n", s, b, 100 * x), n_exact++;
    }
    fclose(t), fclose(v), fclose(e);
    char *out = NULL;
    size_t olen = 0;
    FILE *f = open_memstream(&out, &olen);
    AG_CHECK(f, "run: out of memory");
    run_gp_begin(f, 960, 600, 11);
    /* the key in one row above the plot (inside, it would hide a curve sooner or later); the
     * log's path small at the bottom right */
    char title[700];
    snprintf(title, sizeof title, "training curves: %s", csv);
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
    if (n_exact > 0)
        fprintf(f, "set y2label 'valid exact match (%%)'\nset y2range [0:100]\n"
                   "set y2tics 0,10,100\nset border 11\n");
    fprintf(f, "$train << EOD\n%sEOD\n$valid << EOD\n%sEOD\n", tt, n_exact > 0 ? ve : va);
    fprintf(f, "plot $train using 1:2 with lines lw 2 lc rgb '#1f77b4' title 'train loss'");
    if (n_valid > 0)
        fprintf(f, ", \\\n  $valid using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb '#ff7f0e' "
                   "title 'valid loss'");
    if (n_exact > 0)
        fprintf(f, ", \\\n  $valid using 1:3 axes x1y2 with linespoints lw 2 "
                   "dt 2 pt 5 ps 0.8 lc rgb '#2ca02c' title 'valid exact match (right axis)'");
    fprintf(f, "\n");
    fclose(f);
    free(tt), free(va), free(ve);
    return out;
}

int run_plot_loss(const char *csv, const char *png) {
    AG_CHECK_ARG(csv);
    AG_CHECK_ARG(png);
    if (strlen(png) > RUN_PATH_MAX - 64) { /* the names built from it would be cut */
        ag_fail(AG_ERR_ARG, "%.60s...: plot failed: a path of %zu bytes: at most %d", png,
                strlen(png), RUN_PATH_MAX - 64);
        return RUN_PLOT_FAILED;
    }
    static const char *const names[] = {"step", "train_loss", "valid_loss", "valid_exact"};
    double *c[4];
    int n;
    struct stat st; /* an empty log (no header yet) has no rows yet; a header needs the two */
    int empty = stat(csv, &st) == 0 && st.st_size == 0;
    if (run_csv_read(csv, names, 4, empty ? 0 : 2, c, &n) != AG_OK) {
        char why[RUN_PATH_MAX + 128];
        snprintf(why, sizeof why, "%s", ag_last_error()); /* "CSV: cannot open: reason" */
        ag_fail(AG_ERR_IO, "%s: plot failed: %s", png, why);
        return RUN_PLOT_FAILED;
    }
    char *script = loss_script(csv, c, n);
    for (int j = 0; j < 4; j++) free(c[j]);
    int rc = RUN_PLOT_SKIPPED;
    if (!n)
        ag_fail(AG_ERR_FORMAT, "%s: plot skipped: %s has no rows yet", png, csv);
    else
        rc = run_plot_script(script, png);
    free(script);
    return rc;
}

/* After a validation row and at the end: loss.png. A skipped or failed plot is said once
 * (skipped: on stdout unless quiet; failed: on stderr) and changes nothing else. */
