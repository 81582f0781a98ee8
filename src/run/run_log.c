/* run_log.c: what a run writes besides checkpoints: the CSV log (a row every --log-every
 * steps: the means since the last row, the learning rate, tokens/s, the validation metrics
 * when there was one; a resumed run cuts it back to its checkpoint's step), the progress bar on
 * a terminal (a line a row elsewhere) with the ETA, the messages of a run that started, stopped
 * or finished, when loss.png is redrawn (run_plot.c draws it; gnuplot missing: skipped, said
 * once, nothing else changes), SIGINT and SIGTERM, the clock, the kept checkpoints (run_kept,
 * run_kept_load: a run's history for an analysis), the memory report. Process 0
 * alone writes (the memory report: every process).
 * Not here: the loop (run.c). Read next: docs/run.md. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

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

int run_out_dir(const char *dir) {
    AG_CHECK_ARG(dir);
    int rc = run_make_dirs(dir);
    if (rc == AG_OK && access(dir, W_OK | X_OK) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot write into the folder: %s", dir, strerror(errno));
    return rc;
}

int run_out_file_dir(const char *path) {
    AG_CHECK_ARG(path);
    char *dir = io_path_join("", path), *slash = strrchr(dir, '/'); /* a copy */
    int rc = AG_OK;
    if (slash) *slash = 0;
    if (slash && *dir) rc = run_out_dir(dir);
    free(dir);
    return rc;
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
                                           "loss.png.err.", "loss.gp.tmp."};
    DIR *d = opendir(r->c->out);
    char path[RUN_PATH_MAX + 300];
    for (struct dirent *e; d && (e = readdir(d));)
        for (int i = 0; i < 5; i++) {
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
    size_t k =
        (size_t)snprintf(header, sizeof header, "step%s%s,train_loss,lr,grad_norm,tokens_per_s",
                         r->m->columns ? "," : "", r->m->columns ? r->m->columns : "");
    for (int i = 0; i < r->m->n_metrics; i++) /* without validation too: empty cells */
        k += (size_t)snprintf(header + k, sizeof header - k, ",valid_%s", r->m->metric_names[i]);
    snprintf(header + k, sizeof header - k, "\n");
    r->tty = isatty(STDOUT_FILENO);
    return run_csv_open(r->csv_path, header, r->step, r->c->resume, &r->csv);
}

/* ---- what is printed ---- */

/* the model's words for the row or the progress line (RunModel.describe): sep then them, or "" */
static const char *model_says(const RunLoop *r, int csv, const char *sep, char *buf, size_t n) {
    buf[0] = '\0';
    if (!r->m->columns || !r->m->describe) return buf;
    size_t k = (size_t)snprintf(buf, n, "%s", sep);
    r->m->describe(r->m->ctx, csv, buf + k, n - k);
    return buf;
}

static double eta_s(const RunLoop *r, double t) {
    int64_t done = r->step - r->step_start;
    return done > 0 ? (t - r->t_start) / (double)done * (double)(r->c->steps - r->step) : 0;
}

int run_log_row(RunLoop *r, const double *valid) {
    RunState *st = &r->st;
    double n = st->row_steps > 0 ? (double)st->row_steps : 1, t = run_now_s();
    double loss = st->row_loss / n, norm = st->row_norm / n;
    double tps = t > r->t_row ? st->row_tokens / (t - r->t_row) : 0;
    char said[128];
    if (r->csv) {
        fprintf(r->csv, "%lld%s,%.6f,%.6e,%.6f,%.0f", (long long)r->step,
                model_says(r, 1, ",", said, sizeof said), loss, r->opt->last_lr, norm, tps);
        for (int i = 0; i < r->m->n_metrics; i++)
            valid ? fprintf(r->csv, ",%.6f", valid[i]) : fputs(",", r->csv);
        fputs("\n", r->csv);
        if (fflush(r->csv) != 0 || ferror(r->csv))
            return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", r->csv_path,
                           strerror(errno ? errno : EIO));
        if (!r->c->quiet && !r->tty) {
            char eta[32];
            run_fmt_time(eta, sizeof eta, eta_s(r, t));
            printf("step %lld/%lld%s  loss %.4f  lr %.2e  grad %.3f  %.0f tok/s  ETA %s\n",
                   (long long)r->step, (long long)r->c->steps,
                   model_says(r, 0, "  ", said, sizeof said), loss, r->opt->last_lr, norm, tps,
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
    char said[128];
    printf("\r[%s] step %lld/%lld%s  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\033[K", bar,
           (long long)r->step, (long long)r->c->steps, model_says(r, 0, "  ", said, sizeof said),
           loss, r->opt->last_lr, tps, eta);
    fflush(stdout);
}

void run_end_bar(RunLoop *r) {
    if (r->c->quiet || !r->tty) return;
    printf("\n");
    fflush(stdout);
}

/* What the learning rate does, as the schedule really is: a cosine whose floor is the peak
 * (lr_min = lr) is a warmup then a constant rate, and is said so; the constant schedule has no
 * warmup (optim.h) */
const char *run_describe_schedule(const OptimSchedule *s, double lr, char *buf, size_t n) {
    long long w = (long long)s->warmup, total = (long long)s->total;
    if (s->kind == OPTIM_CONSTANT || (s->kind == OPTIM_WARMUP_COSINE && s->lr_min >= lr && !w))
        snprintf(buf, n, "constant lr %g", lr);
    else if (s->kind == OPTIM_WARMUP_COSINE && s->lr_min >= lr)
        snprintf(buf, n, "lr %g (warmup %lld steps, then constant)", lr, w);
    else if (s->kind == OPTIM_WARMUP_COSINE)
        snprintf(buf, n, "lr %g, cosine schedule (warmup %lld steps, to lr %g at step %lld)", lr, w,
                 s->lr_min, total);
    else
        snprintf(buf, n, "lr %g, invsqrt schedule (warmup %lld steps)", lr, w);
    return buf;
}

void run_say_start(RunLoop *r, int threads) {
    if (r->c->quiet) return;
    printf("kernels: %s, %d threads (%s)\n", ag_kernel_family(), threads, ag_threads_wait());
    if (r->c->resume) printf("resuming %s at step %lld\n", r->last_path, (long long)r->step);
    if (r->dist) {
        int S = r->dist->n_shards, b = r->c->batch / S;
        char rows[48];
        snprintf(rows, sizeof rows, r->c->batch % S ? "%d or %d" : "%d", b, b + 1);
        printf("data parallel: %d processes, %d shards of %s %s a step (process 0: shards "
               "%d..%d)\n",
               dist_size(), S, rows, r->m->unit ? r->m->unit : "examples", r->dist->lo,
               r->dist->hi - 1);
    }
    char sched[160];
    printf("%zu parameters; batch %d; %s; training to step %lld; writing %s, %s\n",
           ag_params_count(r->params), r->c->batch,
           run_describe_schedule(&r->opt->cfg.schedule, r->opt->cfg.lr, sched, sizeof sched),
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
    struct stat st;
    if (r->st.best_step > 0 && stat(r->best_path, &st) == 0)
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
            "(step %lld), unchanged\n",
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

int run_stop_requested(void) { return dist_any(caught != 0); }

/* The handlers to put back: one process has one set of them, so they live here; depth counts
 * nested catches (the translator's trainer inside a run), and only the outermost restores. */
static struct sigaction saved[2];
static int depth = 0;

void run_signals_catch(void) {
    if (depth++ > 0) return;
    caught = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &saved[0]);
    sigaction(SIGTERM, &sa, &saved[1]);
}

void run_signals_restore(void) {
    if (depth == 0) return; /* nothing caught */
    if (--depth > 0) return;
    sigaction(SIGINT, &saved[0], NULL);
    sigaction(SIGTERM, &saved[1], NULL);
}

/* ---- the loss curve (drawn by run_plot.c) ---- */

/* After a validation row and at the end: loss.png. A skipped or failed plot is said once
 * (skipped: on stdout unless quiet; failed: on stderr) and changes nothing else. */
void run_plot(RunLoop *r, int final) {
    int rc =
        r->m->plot ? r->m->plot(r->csv_path, r->png_path) : run_plot_loss(r->csv_path, r->png_path);
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

/* ---- the kept checkpoints ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int run_kept(const char *dir, char ***names, int *n) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(names);
    AG_CHECK_ARG(n);
    *names = NULL, *n = 0;
    char *path = io_path_join(dir, "ckpt");
    DIR *d = opendir(path);
    if (!d) {
        int rc = ag_fail(AG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "step_", 5) || len < 9 || strcmp(e->d_name + len - 4, ".npz"))
            continue;
        char **more = realloc(*names, (size_t)(*n + 1) * sizeof **names);
        AG_CHECK(more, "run_kept: out of memory for %d names", *n + 1);
        *names = more;
        (*names)[*n] = malloc(len + 1);
        AG_CHECK((*names)[*n], "run_kept: out of memory");
        memcpy((*names)[(*n)++], e->d_name, len + 1);
    }
    closedir(d);
    int rc = *n ? AG_OK : ag_fail(AG_ERR_IO, "%s: no step_*.npz in it", path);
    free(path);
    if (*n) qsort(*names, (size_t)*n, sizeof **names, by_name); /* their names sort by step */
    return rc;
}

int run_kept_load(const RunModel *m, const char *dir, const char *name, Arena *a,
                  ParamList **params, int64_t *step) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(params);
    AG_CHECK_ARG(step);
    char *ckpt = io_path_join(dir, "ckpt"), *path = io_path_join(ckpt, name);
    free(ckpt);
    NpzFile *f;
    int rc = ckpt_read(path, m->config.n_fields ? &m->config : NULL, &f);
    free(path);
    if (rc != AG_OK) return rc;
    if (!*params) {
        Rng init;
        rng_seed(&init, 1);
        rc = m->build(m->ctx, a, &init, params);
    }
    Checkpoint ck = {.params = *params, .config = m->config};
    if (rc == AG_OK) rc = ckpt_load_from(f, &ck);
    free((void *)ck.extra);
    const NpzEntry *e = npz_find(f, "train.step"); /* its type: checked by ckpt_read */
    *step = 0;
    if (e) memcpy(step, e->data, sizeof *step);
    npz_free(f);
    return rc;
}

/* ---- memory: the resident set and malloc's bytes in use ---- */

/* Peak and current resident memory in KiB: VmHWM and VmRSS of /proc/self/status, or where
 * there is none getrusage's ru_maxrss (and -1 for the current figure) */
static void memory_kib(long *peak, long *now) {
    *peak = *now = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "VmHWM: %ld", peak) == 1) continue;
            sscanf(line, "VmRSS: %ld", now);
        }
        fclose(f);
    }
    struct rusage ru;
    if (*peak < 0 && getrusage(RUSAGE_SELF, &ru) == 0) *peak = ru.ru_maxrss;
}

/* Bytes malloc has handed out and not had back, in KiB (glibc 2.33 and later), else -1; the
 * small freed blocks of glibc's per-thread cache count as in use (a few KiB that settle) */
static long malloc_in_use_kib(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
#else
    return -1;
#endif
}

void run_report_memory(FILE *f, int64_t step, int64_t since, long first[2]) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(first);
    long peak, now;
    memory_kib(&peak, &now);
    fprintf(f, "memory: peak RSS %ld KiB after step %lld (now %ld KiB)", peak, (long long)step,
            now);
    long used = malloc_in_use_kib(); /* after a print: with --quiet, stdout's buffer is new */
    if (first[0] >= 0) fprintf(f, ", %+ld KiB since step %lld", peak - first[0], (long long)since);
    if (used >= 0) {
        fprintf(f, "; malloc in use %ld KiB", used);
        if (first[0] >= 0) fprintf(f, ", %+ld KiB", used - first[1]);
    }
    fprintf(f, "\n");
    fflush(f);
    if (first[0] < 0) {
        first[0] = peak;
        first[1] = used;
    }
}

void run_fix_mmap_threshold(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}
