/* util.c: small helpers the example programs share: allocation that aborts when memory runs
 * out (as the library's arenas do), the message of a model whose values overflow
 * (ex_not_finite), the lens commands' --metric logit-diff (--good, --bad, --pos), and the lines
 * both trainers print when they run as several processes.
 * Not here: anything about a model or its data; the pictures (plot.c). Read next: plot.c. */
#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void *ex_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    AG_CHECK(p != NULL, "ex_malloc: out of memory (%zu bytes)", bytes);
    return p;
}

void *ex_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    AG_CHECK(p != NULL, "ex_calloc: out of memory (%zu x %zu bytes)", n, size);
    return p;
}

int ex_tensor_finite(const Tensor *x, const char *name, const Tape *t) {
    for (size_t i = 0; i < x->size; i++) {
        if (isfinite((double)x->data[i])) continue;
        const AgNonFinite *nf = t ? ag_first_nonfinite(t) : NULL;
        return ag_fail(AG_ERR_RANGE, "%s[%zu] = %g: must be finite%s%s", name, i,
                       (double)x->data[i], nf ? "; it began at the " : "",
                       nf ? ag_nonfinite_message(nf) : "");
    }
    return AG_OK;
}

int ex_not_finite(int rc, const char *ckpt, const Tape *t) {
    const AgNonFinite *nf = t ? ag_first_nonfinite(t) : NULL;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ag_last_error());
    return ag_fail(rc,
                   "%s: the model's values are not finite on this input (its weights are finite "
                   "but overflow): %s%s%s",
                   ckpt, msg, nf ? "; it began at the " : "", nf ? ag_nonfinite_message(nf) : "");
}

int ex_file_exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

/* ---- several processes ---- */

int ex_stop_any(void) { return dist_any(run_signal_caught() != 0); }

void ex_dist_warn_threads(const char *prog, int threads) {
    int node_threads, cpus;
    dist_threads_on_node(threads, &node_threads, &cpus);
    if (node_threads > cpus && dist_rank() == 0)
        fprintf(stderr,
                "%s train: warning: the processes on this machine run %d threads in all (%d "
                "here) for %d CPUs: give fewer --threads or processes (docs/mpi.md)\n",
                prog, node_threads, threads, cpus);
}

void ex_dist_line(const DistGrad *d, int batch, const char *unit) {
    if (!d) return;
    int S = d->n_shards;
    if (batch % S == 0)
        printf("data parallel: %d processes, %d shards of %d %s a step (process 0: shards "
               "%d..%d)\n",
               dist_size(), S, batch / S, unit, d->lo, d->hi - 1);
    else
        printf("data parallel: %d processes, %d shards of %d or %d %s a step (process 0: shards "
               "%d..%d)\n",
               dist_size(), S, batch / S, batch / S + 1, unit, d->lo, d->hi - 1);
}

void ex_dist_summary(const DistGrad *d) {
    if (!d || d->n_reduce == 0) return;
    printf("data parallel: the gradients' reduction (%zu values, tree and broadcast) took %.2f ms "
           "a step in process 0, %.2f ms of it after backward\n",
           d->n, 1e3 * d->reduce_s / (double)d->n_reduce, 1e3 * d->after_s / (double)d->n_reduce);
}

/* ---- the lens's --metric ---- */

int ex_lens_logit_diff(const char *kind, const char *good, const char *bad, int pos, int B, int T,
                       ExTokenFn token, const void *ctx, ExLensMetric *m) {
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
    m->good = ex_malloc((size_t)B * sizeof(int));
    m->bad = ex_malloc((size_t)B * sizeof(int));
    for (int b = 0; b < B; b++) m->good[b] = gi, m->bad[b] = bi;
    m->mt = (LensMetric){.kind = LENS_LOGIT_DIFF, .pos = pos, .good = m->good, .bad = m->bad};
    return AG_OK;
}

void ex_lens_metric_free(ExLensMetric *m) {
    free(m->good), free(m->bad), free(m->targets);
    memset(m, 0, sizeof *m);
}
