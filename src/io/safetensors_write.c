/* safetensors_write.c: the writer, laid out as the reference library's serialize
 * (safetensors/src/tensor.rs, prepare): the tensors sorted by dtype, largest first in the order
 * of its Dtype, then by name (bytes compared), each at the offset where the one before ends;
 * the header compact JSON with "__metadata__" first, then the tensors in that order, each
 * {"dtype","shape","data_offsets"}; padded with spaces to a multiple of 8 bytes so that the data
 * starts aligned. For the tensors and metadata tests/io/safetensors/make_fixtures.py writes,
 * the bytes equal safetensors.numpy.save_file's (tests/io/test_safetensors.c checks them).
 * Real values are converted while writing: to F32 or F64 by a C cast, to F16 and BF16 rounded
 * to nearest even (encode_small below), past the type's range an infinity.
 * Not here: reading (safetensors_read.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"

typedef struct {
    char *name;
    StDtype dtype; /* as stored */
    int from_real; /* 1: data is count Reals, converted to dtype; 0: bytes as stored */
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t count;
    const void *data;
} WTensor;

struct StWriter {
    WTensor *t;
    int n, cap;
    char **meta_keys, **meta_values;
    int n_meta;
};

StWriter *st_writer_new(void) {
    StWriter *w = calloc(1, sizeof *w);
    AG_CHECK(w != NULL, "st_writer_new: out of memory");
    return w;
}

void st_writer_free(StWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta_keys[i]);
        free(w->meta_values[i]);
    }
    free(w->t);
    free(w->meta_keys);
    free(w->meta_values);
    free(w);
}

/* 1 if s is UTF-8 as JSON may hold it (jansson's own check, through a string value) */
static int is_utf8(const char *s) {
    json_t *j = json_string(s);
    json_decref(j);
    return j != NULL;
}

static void add_tensor(StWriter *w, const char *fn, const char *name, StDtype dtype, int from_real,
                       int ndim, const int64_t *shape, const void *data) {
    AG_CHECK(w != NULL, "%s: argument 'w' is NULL", fn);
    AG_CHECK(name != NULL, "%s: argument 'name' is NULL", fn);
    AG_CHECK(*name, "%s: a tensor needs a non-empty name", fn);
    AG_CHECK(is_utf8(name), "%s: tensor name '%s' is not UTF-8", fn, name);
    AG_CHECK(strcmp(name, "__metadata__") != 0, "%s: '__metadata__' is not a tensor name", fn);
    AG_CHECK((unsigned)dtype < ST_N_DTYPES, "%s: '%s': dtype %d outside the enum", fn, name,
             (int)dtype);
    AG_CHECK(ndim >= 0 && ndim <= ST_MAX_DIMS, "%s: '%s': ndim %d outside 0..%d", fn, name, ndim,
             ST_MAX_DIMS);
    AG_CHECK(ndim == 0 || shape, "%s: '%s': NULL shape for ndim %d", fn, name, ndim);
    for (int i = 0; i < w->n; i++)
        AG_CHECK(strcmp(w->t[i].name, name) != 0, "%s: tensor '%s' added twice", fn, name);
    WTensor e = {.dtype = dtype, .from_real = from_real, .ndim = ndim, .count = 1, .data = data};
    for (int i = 0; i < ndim; i++) {
        AG_CHECK(shape[i] >= 0, "%s: '%s': dimension %d is %lld", fn, name, i, (long long)shape[i]);
        AG_CHECK(shape[i] == 0 || e.count <= SIZE_MAX / 8 / (size_t)shape[i],
                 "%s: '%s': the shape's element count overflows", fn, name);
        e.shape[i] = shape[i];
        e.count *= (size_t)shape[i];
    }
    AG_CHECK(data || e.count == 0, "%s: '%s': NULL data for %zu elements", fn, name, e.count);
    e.name = strdup(name);
    AG_CHECK(e.name != NULL, "%s: out of memory", fn);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->t = realloc(w->t, (size_t)w->cap * sizeof *w->t);
        AG_CHECK(w->t != NULL, "%s: out of memory", fn);
    }
    w->t[w->n++] = e;
}

void st_add(StWriter *w, const char *name, StDtype dtype, int ndim, const int64_t *shape,
            const void *data) {
    add_tensor(w, "st_add", name, dtype, 0, ndim, shape, data);
}

void st_add_real(StWriter *w, const char *name, const Tensor *t, StDtype as) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(t);
    AG_CHECK(st_dtype_is_float(as), "st_add_real: '%s': %s is not F32, F64, F16 or BF16",
             name ? name : "(null)", st_dtype_name(as));
    int64_t shape[ST_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    add_tensor(w, "st_add_real", name, as, 1, t->ndim, shape, t->data);
}

void st_add_params(StWriter *w, const ParamList *pl, StDtype as) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(pl);
    for (int i = 0; i < pl->n; i++) st_add_real(w, pl->items[i]->name, pl->items[i], as);
}

void st_add_meta(StWriter *w, const char *key, const char *value) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(key);
    AG_CHECK_ARG(value);
    AG_CHECK(is_utf8(key) && is_utf8(value), "st_add_meta: '%s' or its value is not UTF-8", key);
    AG_CHECK(strcmp(key, "format") != 0, "st_add_meta: \"format\" is always \"pt\"");
    for (int i = 0; i < w->n_meta; i++)
        AG_CHECK(strcmp(w->meta_keys[i], key) != 0, "st_add_meta: '%s' given twice", key);
    w->meta_keys = realloc(w->meta_keys, (size_t)(w->n_meta + 1) * sizeof *w->meta_keys);
    w->meta_values = realloc(w->meta_values, (size_t)(w->n_meta + 1) * sizeof *w->meta_values);
    AG_CHECK(w->meta_keys && w->meta_values, "st_add_meta: out of memory");
    w->meta_keys[w->n_meta] = strdup(key);
    w->meta_values[w->n_meta] = strdup(value);
    AG_CHECK(w->meta_keys[w->n_meta] && w->meta_values[w->n_meta], "st_add_meta: out of memory");
    w->n_meta++;
}

/* ---- conversions ---- */

/* x rounded to nearest even in a binary format of ebits exponent bits and mbits fraction bits
 * (F16: 5, 10; BF16: 8, 7), as its bit pattern: subnormals kept, past the largest finite value
 * an infinity, NaN a quiet NaN of the same sign. The division by the power of two q and
 * nearbyint (the default rounding mode: to nearest even) are exact but for that rounding. */
static uint16_t encode_small(double x, int ebits, int mbits) {
    uint32_t sign = signbit(x) ? 1u << (ebits + mbits) : 0, top = (1u << ebits) - 1;
    int bias = (int)(top >> 1);
    if (isnan(x)) return (uint16_t)(sign | top << mbits | 1u << (mbits - 1));
    double a = fabs(x);
    if (a == 0) return (uint16_t)sign;
    if (isinf(a)) return (uint16_t)(sign | top << mbits);
    int e;
    frexp(a, &e); /* a = f 2^e, f in [0.5, 1): its leading bit is 2^(e-1) */
    int ex = e - 1 < 1 - bias ? 1 - bias : e - 1;
    double m = nearbyint(ldexp(a, mbits - ex));
    if (m >= ldexp(1.0, mbits + 1)) { /* rounded up to the next power of two */
        m = ldexp(1.0, mbits);
        ex++;
    }
    if (ex > bias) return (uint16_t)(sign | top << mbits);
    uint32_t mi = (uint32_t)m;
    if (mi < 1u << mbits) return (uint16_t)(sign | mi); /* a subnormal */
    return (uint16_t)(sign | (uint32_t)(ex + bias) << mbits | (mi - (1u << mbits)));
}

/* n Reals at src as dtype into dst (n * st_dtype_size(dtype) bytes) */
static void encode_reals(const Real *src, size_t n, StDtype dtype, unsigned char *dst) {
    for (size_t i = 0; i < n; i++) {
        double x = (double)src[i];
        if (dtype == ST_F32) {
            float f = (float)src[i];
            memcpy(dst + 4 * i, &f, 4);
        } else if (dtype == ST_F64) {
            memcpy(dst + 8 * i, &x, 8);
        } else {
            uint16_t h = dtype == ST_F16 ? encode_small(x, 5, 10) : encode_small(x, 8, 7);
            memcpy(dst + 2 * i, &h, 2);
        }
    }
}

/* ---- the file ---- */

static int by_dtype_then_name(const void *a, const void *b) {
    const WTensor *x = *(const WTensor *const *)a, *y = *(const WTensor *const *)b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The header for the tensors in order, padded: malloc'd, its length in *len; NULL: no memory. */
static char *header_json(const StWriter *w, WTensor *const *order, size_t *len) {
    json_t *root = json_object(), *meta = json_object();
    int bad = !root || !meta || json_object_set_new(meta, "format", json_string("pt"));
    for (int i = 0; i < w->n_meta; i++)
        bad |= json_object_set_new(meta, w->meta_keys[i], json_string(w->meta_values[i]));
    bad |= json_object_set_new(root, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < w->n && !bad; i++) {
        const WTensor *e = order[i];
        json_t *shape = json_array(), *offs = json_array();
        for (int k = 0; k < e->ndim; k++)
            bad |= json_array_append_new(shape, json_integer(e->shape[k]));
        uint64_t end = off + e->count * st_dtype_size(e->dtype);
        bad |= json_array_append_new(offs, json_integer((json_int_t)off));
        bad |= json_array_append_new(offs, json_integer((json_int_t)end));
        off = end;
        bad |= json_object_set_new(root, e->name,
                                   json_pack("{s:s,s:o,s:o}", "dtype", st_dtype_name(e->dtype),
                                             "shape", shape, "data_offsets", offs));
    }
    char *text = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) return NULL;
    size_t n = strlen(text), pad = (8 - n % 8) % 8;
    char *out = realloc(text, n + pad + 1);
    if (!out) {
        free(text);
        return NULL;
    }
    memset(out + n, ' ', pad);
    *len = n + pad;
    return out;
}

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = ENOSPC;
            return -1;
        }
        s += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The length, the header and every tensor's bytes to fd; errno set on failure. */
static int write_body(int fd, WTensor *const *order, int n, const char *hdr, size_t hlen) {
    unsigned char len8[8], buf[1 << 15];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    if (write_all(fd, len8, 8) || write_all(fd, hdr, hlen)) return -1;
    for (int i = 0; i < n; i++) {
        const WTensor *e = order[i];
        size_t isz = st_dtype_size(e->dtype);
        if (!e->from_real) {
            if (write_all(fd, e->data, e->count * isz)) return -1;
            continue;
        }
        size_t per = sizeof buf / 8;
        for (size_t at = 0; at < e->count; at += per) {
            size_t k = e->count - at < per ? e->count - at : per;
            encode_reals((const Real *)e->data + at, k, e->dtype, buf);
            if (write_all(fd, buf, k * isz)) return -1;
        }
    }
    return 0;
}

/* fsync of the folder holding path, so that the rename survives a power loss; errno or 0 */
static int sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return ENOMEM;
    int fd = open(dir, O_RDONLY | O_CLOEXEC), err = fd < 0 ? errno : 0;
    if (fd >= 0 && fsync(fd) != 0 && errno != EINVAL) err = errno; /* EINVAL: cannot sync */
    if (fd >= 0) close(fd);
    free(dir);
    return err;
}

int st_write(StWriter *w, const char *path, StStats *stats) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(path);
    if (stats) memset(stats, 0, sizeof *stats);
    WTensor **order = malloc((size_t)(w->n ? w->n : 1) * sizeof *order);
    size_t tlen = strlen(path) + 32, hlen = 0;
    char *tmp = malloc(tlen), *hdr = NULL;
    if (order) {
        for (int i = 0; i < w->n; i++) order[i] = &w->t[i];
        qsort(order, (size_t)w->n, sizeof *order, by_dtype_then_name);
        hdr = header_json(w, order, &hlen);
    }
    if (!order || !tmp || !hdr) {
        free(order);
        free(tmp);
        free(hdr);
        return ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    int rc = AG_OK, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot create the temporary file '%s': %s", path, tmp,
                     strerror(errno));
    if (rc == AG_OK && write_body(fd, order, w->n, hdr, hlen) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: writing the temporary file failed: %s", path, strerror(errno));
    if (rc == AG_OK && fsync(fd) != 0)
        rc =
            ag_fail(AG_ERR_IO, "%s: fsync of the temporary file failed: %s", path, strerror(errno));
    if (fd >= 0 && close(fd) != 0 && rc == AG_OK)
        rc = ag_fail(AG_ERR_IO, "%s: closing the temporary file failed: %s", path, strerror(errno));
    if (rc == AG_OK && rename(tmp, path) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot rename '%s' over it: %s", path, tmp, strerror(errno));
    if (rc != AG_OK && fd >= 0) unlink(tmp); /* a file at path was never touched */
    int err = rc == AG_OK ? sync_parent(path) : 0;
    if (err)
        rc = ag_fail(AG_ERR_IO,
                     "%s: written, but fsync of its folder failed: %s (the new file is in place; "
                     "a power loss could still undo the rename)",
                     path, strerror(err));
    if (rc == AG_OK && stats) {
        stats->n_tensors = w->n;
        stats->header_bytes = hlen;
        for (int i = 0; i < w->n; i++)
            stats->data_bytes += w->t[i].count * st_dtype_size(w->t[i].dtype);
        stats->file_bytes = 8 + hlen + stats->data_bytes;
    }
    free(order);
    free(tmp);
    free(hdr);
    return rc;
}

int st_save_params(const ParamList *pl, const char *path, StDtype as, StStats *stats) {
    AG_CHECK_ARG(pl);
    AG_CHECK_ARG(path);
    StWriter *w = st_writer_new();
    st_add_params(w, pl, as);
    int rc = st_write(w, path, stats);
    st_writer_free(w);
    return rc;
}
