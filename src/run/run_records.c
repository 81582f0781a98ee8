/* run_records.c: the records a program takes as it trains, grown as they come and kept as bytes
 * in every checkpoint's meta.extra (run.h says the layout), so that --resume continues them;
 * attograd-induction's losses and head scores are such records; and records as a CSV file
 * (run_records_csv: attograd-grokking's measures of each kept checkpoint), and the first step a
 * record reaches a value (run_first_step). Not here: what is recorded
 * (the program), the checkpoint (run.c: RunModel.extra and load_extra). Read next: run.h. */
#include <stdlib.h>
#include <string.h>

#include "../io/file.h"
#include "run.h"

void run_records_reserve(RunRecords *r, int R) {
    AG_CHECK_ARG(r);
    AG_CHECK(R >= 0 && R <= RUN_MAX_RECORDS, "run_records_reserve: %d records", R);
    if (R <= r->cap) return;
    int cap = r->cap ? 2 * r->cap : 64;
    if (cap < R) cap = R;
    for (int k = 0; k < r->n; k++) {
        RunRecArray *a = &r->a[k];
        if (a->fixed) continue;
        void *p = realloc(*a->data, (size_t)cap * a->per * a->elem + 1);
        AG_CHECK(p, "run_records_reserve: out of memory for %d records", cap);
        *a->data = p;
    }
    r->cap = cap;
}

/* the bytes of R records */
static size_t records_size(const RunRecords *r, int64_t R) {
    size_t n = ((size_t)r->n_head + 1) * 8;
    for (int k = 0; k < r->n; k++)
        n += (r->a[k].fixed ? 1 : (size_t)R) * r->a[k].per * r->a[k].elem;
    return n;
}

void *run_records_bytes(const RunRecords *r, size_t *len) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(len);
    *len = records_size(r, r->R);
    char *b = malloc(*len), *at = b + ((size_t)r->n_head + 1) * 8;
    AG_CHECK(b, "run_records_bytes: out of memory for %zu bytes", *len);
    int64_t R = r->R;
    if (r->n_head) memcpy(b, r->head, (size_t)r->n_head * 8);
    memcpy(b + (size_t)r->n_head * 8, &R, 8);
    for (int k = 0; k < r->n; k++) {
        size_t n = (r->a[k].fixed ? 1 : (size_t)R) * r->a[k].per * r->a[k].elem;
        if (n) memcpy(at, *r->a[k].data, n);
        at += n;
    }
    return b;
}

int run_records_load(RunRecords *r, const void *bytes, size_t len, const char *what) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(what);
    size_t head = ((size_t)r->n_head + 1) * 8;
    if (!bytes || len < head)
        return ag_fail(AG_ERR_FORMAT, "%s holds %zu bytes: no records", what, len);
    const char *p = bytes;
    for (int i = 0; i < r->n_head; i++) {
        int64_t v;
        memcpy(&v, p + 8 * i, 8);
        if (v != r->head[i])
            return ag_fail(AG_ERR_FORMAT, "%s: records of %lld %s; these are of %lld", what,
                           (long long)v, r->head_names ? r->head_names[i] : "(a shape number)",
                           (long long)r->head[i]);
    }
    int64_t R;
    memcpy(&R, p + head - 8, 8);
    if (R < 0 || R > RUN_MAX_RECORDS || records_size(r, R) != len)
        return ag_fail(AG_ERR_FORMAT, "%s: %lld records do not fill its %zu bytes", what,
                       (long long)R, len);
    run_records_reserve(r, (int)R);
    p += head;
    for (int k = 0; k < r->n; k++) {
        size_t n = (r->a[k].fixed ? 1 : (size_t)R) * r->a[k].per * r->a[k].elem;
        if (n) memcpy(*r->a[k].data, p, n);
        p += n;
    }
    r->R = (int)R;
    return AG_OK;
}

void run_records_free(RunRecords *r) {
    if (!r) return;
    for (int k = 0; k < r->n; k++)
        if (!r->a[k].fixed) free(*r->a[k].data), *r->a[k].data = NULL;
    r->R = r->cap = 0;
}

int run_records_csv(const char *path, const int64_t *steps, int n, const char *const *names,
                    const double *cols, int n_cols) {
    AG_CHECK_ARG(path);
    AG_CHECK(n == 0 || steps, "run_records_csv: %s: %d records and steps NULL", path, n);
    AG_CHECK(n_cols == 0 || (names && (n == 0 || cols)),
             "run_records_csv: %s: %d columns without names or values", path, n_cols);
    FILE *f;
    char *tmp;
    int rc = io_fopen_write(path, &f, &tmp);
    if (rc != AG_OK) return rc;
    fprintf(f, "step");
    for (int c = 0; c < n_cols; c++) fprintf(f, ",%s", names[c]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%lld", (long long)steps[i]);
        for (int c = 0; c < n_cols; c++) fprintf(f, ",%.6g", cols[(size_t)c * n + i]);
        fprintf(f, "\n");
    }
    return io_fclose_replace(f, tmp, path);
}

int64_t run_first_step(const int64_t *steps, const double *v, int n, double x, int above) {
    AG_CHECK_ARG(steps);
    AG_CHECK_ARG(v);
    for (int i = 0; i < n; i++)
        if (above ? v[i] >= x : v[i] < x) return steps[i];
    return -1;
}
