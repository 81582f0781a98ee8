/* util.c: small helpers the example programs share: allocation that aborts when memory runs
 * out (as the library's arenas do), the message of a model whose values overflow
 * (ex_not_finite).
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
