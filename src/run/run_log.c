/* run_log.c: what a run writes besides checkpoints: the CSV log (a row every --log-every
 * steps: the means since the last row, the learning rate, tokens/s, the validation metrics
 * when there was one; a resumed run cuts it back to its checkpoint's step), the progress bar on
 * a terminal (a line a row elsewhere) with the ETA, the messages of a run that started, stopped
 * or finished, loss.png drawn by gnuplot (a script loss.gp beside it; gnuplot missing: skipped,
 * said once, nothing else changes), SIGINT and SIGTERM, the clock. Process 0 alone writes.
 * Not here: the loop (run.c). Read next: docs/run.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/file.h"
#include "run_internal.h"

/* ---- the clock, folders, the CSV file ---- */

double run_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void run_fmt_time(char *buf, size_t n, double s) {
    AG_CHECK_ARG(buf);
    long t = s >= 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

int run_make_dirs(const char *path) {
    AG_CHECK_ARG(path);
    if (!*path) return ag_fail(AG_ERR_IO, "'': not a folder");
    char *buf = io_path_join("", path); /* a copy, never cut */
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p) continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            int rc = ag_fail(AG_ERR_IO, "%s: cannot create the folder: %s", buf, strerror(errno));
            free(buf);
            return rc;
        }
        *p = c;
        if (!c) break;
    }
    free(buf);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return ag_fail(AG_ERR_IO, "%s: not a folder", path);
    return AG_OK;
}

int run_csv_open(const char *path, const char *header, int64_t step, int resume, FILE **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(header);
    AG_CHECK_ARG(out);
    *out = NULL;
    int rc = io_check_replace(path); /* a FIFO, a device or a link there is never opened */
    if (rc != AG_OK) return rc;
    FILE *f = resume ? fopen(path, "r+") : NULL;
    if (f) { /* keep the header and the rows up to step; a crash may have left more */
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        long keep = -1, at = 0;
        while ((len = getline(&line, &cap, f)) > 0 && line[len - 1] == '\n') {
            long long st;
            if (at == 0 && strcmp(line, header) != 0) break;
            if (at > 0 && (sscanf(line, "%lld,", &st) != 1 || st > step)) break;
            at += (long)len;
            keep = at;
        }
        free(line);
        if (keep > 0) {
            if (ftruncate(fileno(f), keep) != 0 || fseek(f, 0, SEEK_END) != 0) {
                int e = errno;
                fclose(f);
                return ag_fail(AG_ERR_IO, "%s: cannot cut after step %lld: %s", path,
                               (long long)step, strerror(e));
            }
            *out = f;
            return AG_OK;
        }
        fclose(f); /* another log: a new one */
    }
    *out = fopen(path, "w");
    if (!*out || fputs(header, *out) < 0 || fflush(*out) != 0)
        return ag_fail(AG_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return AG_OK;
}

int run_paths(RunLoop *r) {
    const char *o = r->c->out;
    if (strlen(o) + sizeof "/loss.png.tmp.4294967295" > RUN_PATH_MAX - 64)
        return ag_fail(AG_ERR_ARG, "--out: a path of %zu bytes: at most %d", strlen(o),
                       (int)(RUN_PATH_MAX - 64 - sizeof "/loss.png.tmp.4294967295"));
    snprintf(r->last_path, sizeof r->last_path, "%s/last.npz", o);
    snprintf(r->best_path, sizeof r->best_path, "%s/best.npz", o);
    snprintf(r->csv_path, sizeof r->csv_path, "%s/log.csv", o);
    snprintf(r->png_path, sizeof r->png_path, "%s/loss.png", o);
    return AG_OK;
}

/* Temporary files a killed save or plot left in --out ("last.npz.tmp.<pid>", ...): never
 * read, removed when a run starts there. */
static void remove_stale_temps(const RunLoop *r) {
    static const char *const prefixes[] = {"last.npz.tmp.", "best.npz.tmp.", "loss.png.tmp.",
                                           "loss.png.err."};
    DIR *d = opendir(r->c->out);
    char path[RUN_PATH_MAX + 300];
    for (struct dirent *e; d && (e = readdir(d));)
        for (int i = 0; i < 4; i++) {
            size_t n = strlen(prefixes[i]);
            if (strncmp(e->d_name, prefixes[i], n) != 0 || !e->d_name[n] ||
                strspn(e->d_name + n, "0123456789") != strlen(e->d_name + n))
                continue;
            snprintf(path, sizeof path, "%s/%s", r->c->out, e->d_name);
            if (unlink(path) == 0 && !r->c->quiet)
                printf("removed %s (left by an interrupted save)\n", path);
        }
    if (d) closedir(d);
}

int run_log_open(RunLoop *r) {
    remove_stale_temps(r);
    char header[512];
    size_t k = (size_t)snprintf(header, sizeof header, "step,train_loss,lr,grad_norm,tokens_per_s");
    for (int i = 0; r->m->validate && i < r->m->n_metrics; i++)
        k += (size_t)snprintf(header + k, sizeof header - k, ",valid_%s", r->m->metric_names[i]);
    snprintf(header + k, sizeof header - k, "\n");
    r->tty = isatty(STDOUT_FILENO);
    return run_csv_open(r->csv_path, header, r->step, r->c->resume, &r->csv);
}

/* ---- what is printed ---- */

static double eta_s(const RunLoop *r, double t) {
    int64_t done = r->step - r->step_start;
    return done > 0 ? (t - r->t_start) / (double)done * (double)(r->c->steps - r->step) : 0;
}

int run_log_row(RunLoop *r, const double *valid) {
    RunState *st = &r->st;
    double n = st->row_steps > 0 ? (double)st->row_steps : 1, t = run_now_s();
    double loss = st->row_loss / n, norm = st->row_norm / n;
    double tps = t > r->t_row ? st->row_tokens / (t - r->t_row) : 0;
    if (r->csv) {
        fprintf(r->csv, "%lld,%.6f,%.6e,%.6f,%.0f", (long long)r->step, loss, r->opt->last_lr, norm,
                tps);
        for (int i = 0; r->m->validate && i < r->m->n_metrics; i++)
            valid ? fprintf(r->csv, ",%.6f", valid[i]) : fputs(",", r->csv);
        fputs("\n", r->csv);
        if (fflush(r->csv) != 0 || ferror(r->csv))
            return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", r->csv_path,
                           strerror(errno ? errno : EIO));
        if (!r->c->quiet && !r->tty) {
            char eta[32];
            run_fmt_time(eta, sizeof eta, eta_s(r, t));
            printf("step %lld/%lld  loss %.4f  lr %.2e  grad %.3f  %.0f tok/s  ETA %s\n",
                   (long long)r->step, (long long)r->c->steps, loss, r->opt->last_lr, norm, tps,
                   eta);
            fflush(stdout);
        }
    }
    r->last_tps = tps;
    st->row_loss = st->row_norm = st->row_tokens = 0;
    st->row_steps = 0;
    r->t_row = t;
    if (valid && r->csv) {
        run_plot(r, 0); /* loss.png, outside the next row's tokens/s */
        r->t_row = run_now_s();
    }
    return AG_OK;
}

void run_progress(RunLoop *r, double loss, int force) {
    if (r->c->quiet || !r->tty) return;
    double t = run_now_s();
    if (!force && t - r->t_bar < 0.1) return;
    r->t_bar = t;
    char bar[21], eta[32];
    int fill = (int)(20.0 * (double)r->step / (double)r->c->steps);
    for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
    bar[20] = '\0';
    run_fmt_time(eta, sizeof eta, eta_s(r, t));
    int64_t n = r->st.row_steps;
    double tps = n && t > r->t_row ? r->st.row_tokens / (t - r->t_row) : r->last_tps;
    if (n) loss = r->st.row_loss / (double)n;
    printf("\r[%s] step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\033[K", bar,
           (long long)r->step, (long long)r->c->steps, loss, r->opt->last_lr, tps, eta);
    fflush(stdout);
}

void run_end_bar(RunLoop *r) {
    if (r->c->quiet || !r->tty) return;
    printf("\n");
    fflush(stdout);
}

void run_say_start(RunLoop *r, int threads) {
    if (r->c->quiet) return;
    printf("kernels: %s, %d threads\n", ag_kernel_family(), threads);
    if (r->c->resume) printf("resuming %s at step %lld\n", r->last_path, (long long)r->step);
    if (r->dist)
        printf("data parallel: %d processes, %d shards a step (process 0: shards %d..%d)\n",
               dist_size(), r->dist->n_shards, r->dist->lo, r->dist->hi - 1);
    printf("%zu parameters; batch %d; lr %g, %s schedule (warmup %lld, to step %lld); training to "
           "step %lld; writing %s, %s\n",
           ag_params_count(r->params), r->c->batch, r->opt->cfg.lr,
           r->opt->cfg.schedule.kind == OPTIM_CONSTANT        ? "constant"
           : r->opt->cfg.schedule.kind == OPTIM_WARMUP_COSINE ? "cosine"
                                                              : "invsqrt",
           (long long)r->opt->cfg.schedule.warmup, (long long)r->opt->cfg.schedule.total,
           (long long)r->c->steps, r->last_path, r->csv_path);
    fflush(stdout);
}

void run_say_valid(RunLoop *r, const double *v, int better) {
    if (r->c->quiet) return;
    run_end_bar(r);
    printf("valid at step %lld:", (long long)r->step);
    for (int i = 0; i < r->m->n_metrics; i++)
        printf("%s %s %.4f", i ? "," : "", r->m->metric_names[i], v[i]);
    printf("%s\n", better ? " (best so far)" : "");
    fflush(stdout);
}

void run_say_done(RunLoop *r) {
    if (r->c->quiet) return;
    double spent = run_now_s() - r->t_start;
    char t[32];
    run_fmt_time(t, sizeof t, spent);
    printf("done: step %lld in %s\n", (long long)r->step, t);
    if (r->st.best_step > 0)
        printf("best: step %lld, valid %s %.4f -> %s\n", (long long)r->st.best_step,
               r->m->metric_names[0], r->st.best[0], r->best_path);
    printf("latest: %s; log: %s\n", r->last_path, r->csv_path);
    fflush(stdout);
}

int run_stopped(RunLoop *r, int64_t s, const char *what, double value, int code) {
    run_end_bar(r);
    if (dist_rank() == 0) { /* every process stopped at the same step: one message */
        fprintf(stderr, "%s train: step %lld: ", r->m->prog, (long long)s);
        if (what)
            fprintf(stderr, "%s is %s", what, isnan(value) ? "nan" : value > 0 ? "inf" : "-inf");
        else
            fprintf(stderr, "%s", ag_last_error());
        fprintf(stderr, ": training stopped. The last good checkpoint is %s (step %lld)\n",
                r->last_path, (long long)r->saved_step);
    }
    if (!what) dist_abort(code); /* a data error only this process may have seen */
    return code;
}

int run_write_failed(RunLoop *r) {
    run_end_bar(r);
    fprintf(stderr,
            "%s train: %s\ntraining stopped at step %lld; the last good checkpoint is %s "
            "(step %lld)\n",
            r->m->prog, ag_last_error(), (long long)r->step, r->last_path,
            (long long)r->saved_step);
    dist_abort(RUN_EXIT_FAIL); /* the others would wait for process 0 */
    return RUN_EXIT_FAIL;
}

/* ---- signals ---- */

static volatile sig_atomic_t caught = 0;

static void on_signal(int sig) {
    if (caught) { /* a second signal: now, without saving */
        static const char msg[] = "\nsecond signal: quitting without saving\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    caught = sig;
}

int run_signal_caught(void) { return caught; }

void run_signals_catch(struct sigaction old[2]) {
    AG_CHECK_ARG(old);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    caught = 0;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
}

void run_signals_restore(const struct sigaction old[2]) {
    AG_CHECK_ARG(old);
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
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

/* The script: the data inline (train loss, and valid loss where there is one), log y when every
 * loss is positive. NULL when the log has no rows. */
static char *loss_script(FILE *in, const char *csv, const char *png, int *rows) {
    static const char *const names[] = {"step", "train_loss", "valid_loss"};
    int col[3];
    char *line = NULL, *text = NULL;
    size_t cap = 0, len = 0;
    FILE *t = open_memstream(&text, &len), *v = NULL;
    char *vtext = NULL;
    size_t vlen = 0;
    v = open_memstream(&vtext, &vlen);
    AG_CHECK(t && v, "run: out of memory");
    int positive = 1, nv = 0;
    *rows = 0;
    if (getline(&line, &cap, in) > 0) csv_columns(line, names, 3, col);
    while (col[0] >= 0 && col[1] >= 0 && getline(&line, &cap, in) > 0) {
        double s = csv_number(line, col[0]), a = csv_number(line, col[1]),
               b = csv_number(line, col[2]);
        if (!isfinite(s) || !isfinite(a)) continue;
        fprintf(t, "%.10g %.8g\n", s, a);
        positive &= a > 0;
        (*rows)++;
        if (isfinite(b)) fprintf(v, "%.10g %.8g\n", s, b), positive &= b > 0, nv++;
    }
    free(line);
    fclose(v);
    fclose(t);
    char *out = NULL;
    size_t olen = 0;
    FILE *o = open_memstream(&out, &olen);
    AG_CHECK(o, "run: out of memory");
    fprintf(o,
            "# the training curves of %s (src/run/run_log.c); `gnuplot loss.gp` draws %s again\n"
            "if (!exists('outfile')) outfile = 'loss.png'\n"
            "set terminal pngcairo size 960,600 font 'DejaVu Sans,11' noenhanced\n"
            "set output outfile\nset xlabel 'step'\nset ylabel 'loss'\nset grid\n"
            "set key top right\n%s$train << EOD\n%sEOD\n$valid << EOD\n%sEOD\n"
            "plot $train using 1:2 with lines lw 2 title 'train loss'%s\n",
            csv, png, positive ? "set logscale y\n" : "", text, vtext,
            nv ? ", $valid using 1:2 with linespoints lw 2 pt 7 title 'valid loss'" : "");
    fclose(o);
    free(text);
    free(vtext);
    return out;
}

/* runs gnuplot on script (in gp) writing png through a temporary file renamed over it */
static int gnuplot(const char *gp, const char *png) {
    const char *cmd = getenv("AG_GNUPLOT");
    cmd = cmd && *cmd ? cmd : "gnuplot";
    char tmp[RUN_PATH_MAX + 32], set[RUN_PATH_MAX + 64], err[RUN_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", png, (long)getpid());
    snprintf(err, sizeof err, "%s.err.%ld", png, (long)getpid());
    snprintf(set, sizeof set, "outfile = '%s'", tmp);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return ag_fail(AG_ERR_IO, "%s: plot failed: fork: %s", png, strerror(errno));
    if (pid == 0) {
        setpgid(0, 0); /* Ctrl-C on the terminal is the run's to handle */
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0666), in = open("/dev/null", O_RDONLY);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        if (in >= 0) dup2(in, 0);
        execlp(cmd, cmd, "-e", set, gp, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    char why[200] = "";
    FILE *e = fopen(err, "r");
    if (e) {
        if (!fgets(why, sizeof why, e)) why[0] = '\0';
        why[strcspn(why, "\n")] = '\0';
        fclose(e);
    }
    unlink(err);
    struct stat st;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        unlink(tmp);
        ag_fail(AG_ERR_IO,
                "%s: plot skipped: %s%s not found; install gnuplot (scripts/deps.sh gnuplot-nox) "
                "or set AG_GNUPLOT",
                png, getenv("AG_GNUPLOT") && *getenv("AG_GNUPLOT") ? "AG_GNUPLOT=" : "", cmd);
        return RUN_PLOT_SKIPPED;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(tmp, &st) != 0 || !st.st_size) {
        unlink(tmp);
        ag_fail(AG_ERR_IO, "%s: plot failed: %s: %s (the script is %s)", png, cmd,
                *why ? why : "no picture", gp);
        return RUN_PLOT_FAILED;
    }
    if (io_replace(tmp, png) != AG_OK) { /* only over a regular file or a missing name */
        unlink(tmp);
        return RUN_PLOT_FAILED;
    }
    return RUN_PLOT_DRAWN;
}

int run_plot_loss(const char *csv, const char *png) {
    AG_CHECK_ARG(csv);
    AG_CHECK_ARG(png);
    if (strlen(png) > RUN_PATH_MAX - 64) { /* the names built from it (gnuplot()) would be cut */
        ag_fail(AG_ERR_ARG, "%.60s...: plot failed: a path of %zu bytes: at most %d", png,
                strlen(png), RUN_PATH_MAX - 64);
        return RUN_PLOT_FAILED;
    }
    FILE *in = fopen(csv, "r");
    if (!in) {
        ag_fail(AG_ERR_IO, "%s: plot failed: %s: %s", png, csv, strerror(errno));
        return RUN_PLOT_FAILED;
    }
    int rows;
    char *script = loss_script(in, csv, png, &rows);
    fclose(in);
    char gp[RUN_PATH_MAX + 8];
    size_t n = strlen(png);
    snprintf(gp, sizeof gp, "%.*s.gp", (int)(n > 4 && !strcmp(png + n - 4, ".png") ? n - 4 : n),
             png);
    int rc = RUN_PLOT_SKIPPED;
    FILE *f = NULL;
    char *tmp = NULL;
    if (!rows) {
        ag_fail(AG_ERR_FORMAT, "%s: plot skipped: %s has no rows yet", png, csv);
    } else if (io_check_replace(png) != AG_OK || io_fopen_write(gp, &f, &tmp) != AG_OK) {
        rc = RUN_PLOT_FAILED;
    } else {
        fputs(script, f); /* a failed write is seen by io_fclose_replace (ferror), naming gp */
        rc = io_fclose_replace(f, tmp, gp) == AG_OK ? gnuplot(gp, png) : RUN_PLOT_FAILED;
    }
    free(script);
    return rc;
}

/* After a validation row and at the end: loss.png. A skipped or failed plot is said once
 * (skipped: on stdout unless quiet; failed: on stderr) and changes nothing else. */
void run_plot(RunLoop *r, int final) {
    int rc = run_plot_loss(r->csv_path, r->png_path);
    if (rc == RUN_PLOT_DRAWN && final && !r->c->quiet) printf("loss plot: %s\n", r->png_path);
    if (rc != RUN_PLOT_DRAWN && !r->plot_said) {
        if (rc == RUN_PLOT_FAILED)
            fprintf(stderr, "%s train: %s\n", r->m->prog, ag_last_error());
        else if (!r->c->quiet)
            printf("%s\n", ag_last_error());
        r->plot_said = 1;
    }
    fflush(stdout);
}
