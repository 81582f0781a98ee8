/* safetensors.c: the safetensors reader on whole files: the header length, the JSON header
 * (jansson: its syntax, types, duplicate names), dtypes, shapes and their byte counts, the
 * offsets against the data (gaps, overlaps, truncation). Each input is read twice: with the
 * default limits, and with small ones (a 256-byte header, 4 tensors) that a success must
 * respect. A file that reads must then satisfy what a caller relies on: the tensors cover the
 * data in order, each one's bytes are its count times its dtype's size inside the file, st_find
 * finds each by name, a float tensor converts to Real and st_check_finite answers OK or
 * AG_ERR_RANGE; and, written again with st_write (tmpfs), it reads back with the same tensors. */
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static void check_file(const StFile *f, const StLimits *lim, size_t size) {
    FUZZ_CHECK(f->file_bytes == size, "file_bytes %zu of %zu", f->file_bytes, size);
    FUZZ_CHECK(8 + f->header_bytes + f->data_bytes == size, "header %zu + data %zu",
               f->header_bytes, f->data_bytes);
    FUZZ_CHECK(f->header_bytes <= lim->max_header, "header %zu", f->header_bytes);
    FUZZ_CHECK((size_t)f->n <= lim->max_tensors, "%d tensors", f->n);
    const unsigned char *data = (const unsigned char *)f->map_ + 8 + f->header_bytes;
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i];
        FUZZ_CHECK(t->name && t->name[0], "tensor %d has no name", i);
        FUZZ_CHECK((unsigned)t->dtype < ST_N_DTYPES, "dtype %d", (int)t->dtype);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "ndim %d", t->ndim);
        size_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_CHECK(t->shape[d] >= 0, "negative dim");
            count *= (size_t)t->shape[d];
        }
        FUZZ_CHECK(count == t->count, "count %zu, shape says %zu", t->count, count);
        FUZZ_CHECK(t->nbytes == t->count * st_dtype_size(t->dtype), "nbytes %zu", t->nbytes);
        FUZZ_CHECK(t->offset == at, "tensor %d starts at %llu, not %llu", i,
                   (unsigned long long)t->offset, (unsigned long long)at);
        FUZZ_CHECK(t->data == data + t->offset, "data pointer");
        at += t->nbytes;
        FUZZ_CHECK(st_find(f, t->name) == t, "st_find('%s')", t->name);
        if (st_dtype_is_float(t->dtype)) {
            Real *v = malloc(t->count ? t->count * sizeof *v : 1);
            FUZZ_CHECK(v && st_to_reals(t, v) == AG_OK, "st_to_reals");
            free(v);
            int rc = st_check_finite(t);
            FUZZ_CHECK(rc == AG_OK || rc == AG_ERR_RANGE, "st_check_finite %d", rc);
            if (rc) fuzz_check_failure(rc, f->path);
        } else if (t->count) {
            (void)st_value(t, t->count - 1);
        }
    }
    FUZZ_CHECK(at == f->data_bytes, "the tensors end at %llu of %zu", (unsigned long long)at,
               f->data_bytes);
}

/* f written again (its bytes as they are), read back: the same tensors */
static void check_rewrite(const StFile *f) {
    static char path[96];
    if (!path[0])
        snprintf(path, sizeof path, "%s/attograd-fuzz-st.%ld",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    StWriter *w = st_writer_new();
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i];
        st_add(w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], "format") != 0)
            st_add_meta(w, f->meta_keys[i], f->meta_values[i]);
    int rc = st_write(w, path, NULL);
    st_writer_free(w);
    FUZZ_CHECK(rc == AG_OK, "st_write: %s", ag_last_error());
    StFile *g = NULL;
    rc = st_read(path, &g, NULL);
    FUZZ_CHECK(rc == AG_OK, "reading what st_write wrote: %s", ag_last_error());
    FUZZ_CHECK(g->n == f->n && g->data_bytes == f->data_bytes, "%d tensors, %d", g->n, f->n);
    FUZZ_CHECK(st_meta(g, "format") && strcmp(st_meta(g, "format"), "pt") == 0, "format");
    for (int i = 0; i < f->n; i++) {
        const StTensor *a = &f->tensors[i], *b = st_find(g, a->name);
        FUZZ_CHECK(b && b->dtype == a->dtype && b->ndim == a->ndim && b->nbytes == a->nbytes &&
                       memcmp(b->shape, a->shape, sizeof a->shape[0] * (size_t)a->ndim) == 0 &&
                       (a->nbytes == 0 || memcmp(a->data, b->data, a->nbytes) == 0),
                   "tensor '%s' changed", a->name);
    }
    st_free(g);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    StLimits lims[2] = {st_default_limits(), {256, 4, 2}};
    for (int k = 0; k < 2; k++) {
        StFile *f = NULL;
        int rc = st_read(path, &f, &lims[k]);
        if (rc != AG_OK) {
            FUZZ_CHECK(f == NULL, "a failed read returned a file");
            fuzz_check_failure(rc, path);
            continue;
        }
        check_file(f, &lims[k], size);
        if (k == 0) check_rewrite(f);
        st_free(f);
    }
    return 0;
}
