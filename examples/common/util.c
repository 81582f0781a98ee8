/* util.c: small helpers the example programs share: allocation that aborts when memory runs
 * out (as the library's arenas do), the message of a model whose values overflow
 * (ex_not_finite) and the lens commands' --metric logit-diff (--good, --bad, --pos).
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
