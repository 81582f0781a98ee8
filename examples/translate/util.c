/* util.c: small helpers the example's files share (and attograd-gpt, examples/gpt): allocation
 * that aborts when memory runs out (as the library's arenas do), mkdir -p, a duration in words,
 * a CSV log that a resumed run cuts back to its checkpoint's step, the message of a model whose
 * values overflow (tr_not_finite), and the lens commands'
 * --metric logit-diff (--good, --bad, --pos).
 * Not here: anything about the model or the data. Read next: vocab.c. */
#include "translate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void *tr_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    AG_CHECK(p != NULL, "tr_malloc: out of memory (%zu bytes)", bytes);
    return p;
}

void *tr_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    AG_CHECK(p != NULL, "tr_calloc: out of memory (%zu x %zu bytes)", n, size);
    return p;
}

int tr_tensor_finite(const Tensor *x, const char *name, const Tape *t) {
    for (size_t i = 0; i < x->size; i++) {
        if (isfinite((double)x->data[i])) continue;
        const AgNonFinite *nf = t ? ag_first_nonfinite(t) : NULL;
        return ag_fail(AG_ERR_RANGE, "%s[%zu] = %g: must be finite%s%s", name, i,
                       (double)x->data[i], nf ? "; it began at the " : "",
                       nf ? ag_nonfinite_message(nf) : "");
    }
    return AG_OK;
}

int tr_not_finite(int rc, const char *ckpt, const Tape *t) {
    const AgNonFinite *nf = t ? ag_first_nonfinite(t) : NULL;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ag_last_error());
    return ag_fail(rc,
                   "%s: the model's values are not finite on this input (its weights are finite "
                   "but overflow): %s%s%s",
                   ckpt, msg, nf ? "; it began at the " : "", nf ? ag_nonfinite_message(nf) : "");
}

int tr_make_dirs(const char *path) {
    if (!*path) return ag_fail(AG_ERR_IO, "'': not a folder");
    char *buf = io_path_join("", path); /* a copy, never cut */
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                int rc =
                    ag_fail(AG_ERR_IO, "%s: cannot create the folder: %s", buf, strerror(errno));
                free(buf);
                return rc;
            }
            *p = c;
            if (!c) break;
        }
    }
    free(buf);
    struct stat s;
    if (stat(path, &s) != 0 || !S_ISDIR(s.st_mode))
        return ag_fail(AG_ERR_IO, "%s: not a folder", path);
    return AG_OK;
}

void tr_fmt_time(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

/* On resume: keeps the rows up to step (a crash may have left later ones, or half a row) by
 * truncating the file after the last of them, then appends. Truncating needs no disk space and
 * writes nothing, so a full disk or a failed write never loses the rows already there. */
int tr_csv_open(const char *path, const char *header, int64_t step, int resume, FILE **out) {
    int rc = io_check_replace(path); /* a regular file or a new name: never a FIFO or a device */
    if (rc != AG_OK) return rc;
    FILE *f = resume ? fopen(path, "r+") : NULL;
    if (!f && resume && errno != ENOENT)
        return ag_fail(AG_ERR_IO, "%s: cannot open for appending: %s", path, strerror(errno));
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        long keep = 0, at = 0;
        int have_header = 0;
        while ((n = getline(&line, &cap, f)) > 0) {
            long long st;
            at += (long)n;
            if (line[n - 1] != '\n') break; /* a row cut short by a crash */
            if (at == (long)n) {
                have_header = strcmp(line, header) == 0;
                if (!have_header) break;
            } else if (sscanf(line, "%lld,", &st) != 1 || st > step) {
                break;
            }
            keep = at;
        }
        free(line);
        if (have_header) {
            if (ftruncate(fileno(f), keep) != 0 || fseek(f, 0, SEEK_END) != 0) {
                int e = errno;
                fclose(f);
                return ag_fail(AG_ERR_IO, "%s: cannot truncate after step %lld: %s", path,
                               (long long)step, strerror(e));
            }
            *out = f;
            return AG_OK;
        }
        fclose(f); /* not our log: start a new one */
    }
    *out = fopen(path, "w");
    if (!*out) return ag_fail(AG_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    fputs(header, *out);
    if (fflush(*out) != 0) return ag_fail(AG_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return AG_OK;
}

/* ---- the lens's --metric ---- */

int tr_lens_logit_diff(const char *kind, const char *good, const char *bad, int pos, int B, int T,
                       TrTokenFn token, const void *ctx, TrLensMetric *m) {
    memset(m, 0, sizeof *m);
    if (strcmp(kind, "logit-diff") != 0)
        return ag_fail(AG_ERR_ARG, "--metric %s: not loss or logit-diff", kind);
    if (!good || !bad) return ag_fail(AG_ERR_ARG, "--metric logit-diff needs --good and --bad");
    if (pos < -1 || pos >= T)
        return ag_fail(AG_ERR_ARG, "--pos %d: outside the rows' %d positions (-1: the last)", pos,
                       T);
    int gi, bi, rc = token(ctx, good, "good", &gi);
    if (rc == AG_OK) rc = token(ctx, bad, "bad", &bi);
    if (rc != AG_OK) return rc;
    m->good = tr_malloc((size_t)B * sizeof(int));
    m->bad = tr_malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) m->good[b] = gi, m->bad[b] = bi;
    m->mt = (LensMetric){.kind = LENS_LOGIT_DIFF, .pos = pos, .good = m->good, .bad = m->bad};
    return AG_OK;
}

void tr_lens_metric_free(TrLensMetric *m) {
    free(m->good), free(m->bad), free(m->targets);
    memset(m, 0, sizeof *m);
}
