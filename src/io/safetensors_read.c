/* safetensors_read.c: the reader. It maps the file and trusts nothing in it; in order:
 *   1. the file: regular, at least the 8 bytes of the header length;
 *   2. the header length N: inside the file, within StLimits.max_header;
 *   3. the header: starts with '{', parses as JSON (jansson, with duplicate keys refused);
 *      "__metadata__" an object of strings; every other member a tensor whose dtype, shape and
 *      data_offsets have the right JSON types and values, and whose shape x dtype size
 *      (overflow-checked) is its byte count;
 *   4. the data: every tensor inside it; sorted by offset, they start at 0 and follow each
 *      other without a gap or an overlap up to the end of the file.
 * Then an index (model.safetensors.index.json) and its shards (st_open): the index's types and
 * file names first, then each shard as above, then index and shards against each other.
 * Any failure frees everything and returns a code with a message naming the file, the tensor
 * and the reason. Layout: the format section of huggingface/safetensors' README.
 * Not here: the conversions to Real (safetensors.c); writing (safetensors_write.c). */
#define _DEFAULT_SOURCE /* madvise's MADV_DONTNEED (st_set_done_with) beside POSIX 2008 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

typedef unsigned long long ull; /* for printing uint64_t with %llu */

StLimits st_default_limits(void) { return (StLimits){ST_MAX_HEADER, 1000000, 10000}; }

/* A name from a file fit for a message: at most about 80 bytes (cut between characters), the
 * control characters as \xNN (jansson has checked that the name is UTF-8). buf: 400 bytes. */
static const char *shown(const char *s, char *buf) {
    size_t k = 0, i = 0;
    for (; s[i] && (i < 80 || ((unsigned char)s[i] & 0xc0) == 0x80); i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            k += (size_t)snprintf(buf + k, 8, "\\x%02x", c);
        else
            buf[k++] = (char)c;
    }
    strcpy(buf + k, s[i] ? "..." : "");
    return buf;
}

/* Records "path: tensor 'name': reason" (or "path: reason" when name is NULL); returns code. */
__attribute__((format(printf, 4, 5))) static int tfail(const char *path, const char *name, int code,
                                                       const char *fmt, ...) {
    char reason[512], nm[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (name) return ag_fail(code, "%s: tensor '%s': %s", path, shown(name, nm), reason);
    return ag_fail(code, "%s: %s", path, reason);
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* An integer >= 0 from a JSON value into *v; 0 if it is not one. */
static int json_count(const json_t *j, uint64_t *v) {
    if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
    *v = (uint64_t)json_integer_value(j);
    return 1;
}

/* ---- 3. one tensor of the header ---- */

static int parse_tensor(StFile *f, const char *name, json_t *val, StTensor *t) {
    const char *p = f->path;
    char sh[ST_MAX_DIMS * 24];
    if (!*name) return tfail(p, NULL, AG_ERR_FORMAT, "a tensor has an empty name");
    if (!json_is_object(val))
        return tfail(p, name, AG_ERR_FORMAT, "not an object with dtype, shape and data_offsets");
    const char *key;
    json_t *v;
    json_object_foreach(val, key, v) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets")) {
            char nm[400];
            return tfail(p, name, AG_ERR_FORMAT,
                         "unexpected key '%s' (a tensor holds dtype, shape and data_offsets)",
                         shown(key, nm));
        }
    }
    json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
           *jo = json_object_get(val, "data_offsets");
    if (!jd || !js || !jo)
        return tfail(p, name, AG_ERR_FORMAT, "lacks '%s'",
                     !jd   ? "dtype"
                     : !js ? "shape"
                           : "data_offsets");
    if (!json_is_string(jd)) return tfail(p, name, AG_ERR_FORMAT, "'dtype' is not a string");
    int d = 0;
    while (d < ST_N_DTYPES && strcmp(json_string_value(jd), st_dtype_name((StDtype)d)) != 0) d++;
    if (d == ST_N_DTYPES) {
        char nm[400];
        return tfail(p, name, AG_ERR_FORMAT,
                     "dtype '%s' is not supported (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, "
                     "F16, BF16, I32, U32, F32, F64, I64, U64)",
                     shown(json_string_value(jd), nm));
    }
    t->dtype = (StDtype)d;
    if (!json_is_array(js)) return tfail(p, name, AG_ERR_FORMAT, "'shape' is not an array");
    if (json_array_size(js) > ST_MAX_DIMS)
        return tfail(p, name, AG_ERR_FORMAT, "'shape' has %zu dimensions, more than %d",
                     json_array_size(js), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(js);
    uint64_t count = 1, dim;
    int overflow = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (!json_count(json_array_get(js, (size_t)i), &dim))
            return tfail(p, name, AG_ERR_FORMAT, "'shape'[%d] is not an integer >= 0", i);
        t->shape[i] = (int64_t)dim;
        if (dim != 0 && count > UINT64_MAX / dim) overflow = 1;
        count *= dim;
    }
    uint64_t isz = st_dtype_size(t->dtype), begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 ||
        !json_count(json_array_get(jo, 0), &begin) || !json_count(json_array_get(jo, 1), &end))
        return tfail(p, name, AG_ERR_FORMAT, "'data_offsets' is not two integers >= 0");
    if (end < begin)
        return tfail(p, name, AG_ERR_FORMAT, "data_offsets [%llu,%llu] end before they begin",
                     (ull)begin, (ull)end);
    st_shape_str(sh, sizeof sh, t->ndim, t->shape);
    if (overflow || count > UINT64_MAX / isz || count * isz > SIZE_MAX)
        return tfail(p, name, AG_ERR_FORMAT,
                     "shape %s of %s is more bytes than memory can hold; its data_offsets "
                     "[%llu,%llu] hold %llu",
                     sh, st_dtype_name(t->dtype), (ull)begin, (ull)end, (ull)(end - begin));
    if (count * isz != end - begin)
        return tfail(p, name, AG_ERR_FORMAT,
                     "shape %s of %s is %llu bytes, its data_offsets [%llu,%llu] hold %llu", sh,
                     st_dtype_name(t->dtype), (ull)(count * isz), (ull)begin, (ull)end,
                     (ull)(end - begin));
    t->name = strdup(name);
    if (!t->name) return tfail(p, NULL, AG_ERR_NOMEM, "out of memory");
    t->path = f->path;
    t->count = (size_t)count;
    t->nbytes = (size_t)(count * isz);
    t->offset = begin;
    return AG_OK;
}

static int by_offset(const void *a, const void *b) {
    const StTensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const StTensor *const *)a)->name, (*(const StTensor *const *)b)->name);
}

/* The tensor named name in v (n tensors sorted by name), or NULL. */
static const StTensor *find_sorted(const StTensor *const *v, int n, const char *name) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(name, v[mid]->name);
        if (c == 0) return v[mid];
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- 3 and 4: the header, then the tensors against the data ---- */

static int parse_header(StFile *f, const StLimits *lim) {
    const char *p = f->path;
    const unsigned char *m = f->map_;
    uint64_t size = f->file_bytes, n = get64(m);
    if (n > size - 8)
        return tfail(p, NULL, AG_ERR_FORMAT,
                     "the header length %llu runs past the end of the file (%llu bytes follow "
                     "the length: truncated, or not a safetensors file)",
                     (ull)n, (ull)(size - 8));
    if (n > lim->max_header)
        return tfail(p, NULL, AG_ERR_NOMEM,
                     "a header of %llu bytes, over the limit of %llu (StLimits.max_header)", (ull)n,
                     (ull)lim->max_header);
    if (n == 0 || m[8] != '{')
        return tfail(p, NULL, AG_ERR_FORMAT,
                     "the header does not start with '{' (not a safetensors file?)");
    json_error_t err;
    json_t *root = json_loadb((const char *)m + 8, (size_t)n, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return tfail(p, NULL, AG_ERR_FORMAT,
                     "the header is not valid JSON: %s (at byte %d of %llu)", err.text,
                     err.position, (ull)n);
    f->header_bytes = (size_t)n;
    f->data_bytes = (size_t)(size - 8 - n);
    int rc = AG_OK;
    json_t *meta = json_object_get(root, "__metadata__");
    size_t n_t = json_object_size(root) - (meta != NULL);
    if (n_t > lim->max_tensors)
        rc = tfail(p, NULL, AG_ERR_NOMEM,
                   "%zu tensors, over the limit of %zu (StLimits.max_tensors)", n_t,
                   lim->max_tensors);
    if (rc == AG_OK && meta && !json_is_object(meta))
        rc = tfail(p, NULL, AG_ERR_FORMAT, "'__metadata__' is not an object");
    if (rc == AG_OK && meta) {
        size_t nm = json_object_size(meta);
        f->meta_keys = calloc(nm ? nm : 1, sizeof *f->meta_keys);
        f->meta_values = calloc(nm ? nm : 1, sizeof *f->meta_values);
        if (!f->meta_keys || !f->meta_values) rc = tfail(p, NULL, AG_ERR_NOMEM, "out of memory");
        const char *key;
        json_t *v;
        json_object_foreach(meta, key, v) {
            if (rc != AG_OK) break;
            char nmb[400];
            if (!json_is_string(v)) {
                rc = tfail(p, NULL, AG_ERR_FORMAT, "'__metadata__' entry '%s' is not a string",
                           shown(key, nmb));
                break;
            }
            f->meta_keys[f->n_meta] = strdup(key);
            f->meta_values[f->n_meta] = strdup(json_string_value(v));
            if (!f->meta_keys[f->n_meta] || !f->meta_values[f->n_meta++])
                rc = tfail(p, NULL, AG_ERR_NOMEM, "out of memory");
        }
    }
    if (rc == AG_OK) {
        f->tensors = calloc(n_t ? n_t : 1, sizeof *f->tensors);
        f->by_name_ = calloc(n_t ? n_t : 1, sizeof *f->by_name_);
        if (!f->tensors || !f->by_name_) rc = tfail(p, NULL, AG_ERR_NOMEM, "out of memory");
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc != AG_OK) break;
        if (v == meta) continue;
        rc = parse_tensor(f, key, v, &f->tensors[f->n]);
        if (rc == AG_OK) f->n++;
    }
    json_decref(root);
    if (rc != AG_OK) return rc;

    /* 4. the data: inside it, then in order without gaps or overlaps, then up to its end */
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i];
        if (t->offset > f->data_bytes || t->nbytes > f->data_bytes - t->offset)
            return tfail(p, t->name, AG_ERR_FORMAT,
                         "its data_offsets [%llu,%llu] run past the end of the data (%zu bytes: "
                         "is the file truncated?)",
                         (ull)t->offset, (ull)(t->offset + t->nbytes), f->data_bytes);
    }
    qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, by_offset);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i], *prev = i ? &f->tensors[i - 1] : NULL;
        char nm[400];
        if (t->offset > at)
            return tfail(p, t->name, AG_ERR_FORMAT,
                         "a gap of %llu bytes before it: it starts at %llu, %s%s%s ends at %llu",
                         (ull)(t->offset - at), (ull)t->offset, prev ? "tensor '" : "the data",
                         prev ? shown(prev->name, nm) : " begins", prev ? "'" : "", (ull)at);
        if (t->offset < at)
            return tfail(p, t->name, AG_ERR_FORMAT,
                         "its bytes [%llu,%llu) overlap those of tensor '%s' [%llu,%llu)",
                         (ull)t->offset, (ull)(t->offset + t->nbytes), shown(prev->name, nm),
                         (ull)prev->offset, (ull)at);
        at = t->offset + t->nbytes;
    }
    if (at != f->data_bytes)
        return tfail(p, NULL, AG_ERR_FORMAT,
                     "%llu bytes after the last tensor (which ends at %llu of the %zu bytes of "
                     "data) belong to no tensor",
                     (ull)(f->data_bytes - at), (ull)at, f->data_bytes);
    for (int i = 0; i < f->n; i++) {
        f->tensors[i].data = m + 8 + n + f->tensors[i].offset;
        f->by_name_[i] = &f->tensors[i];
    }
    qsort(f->by_name_, (size_t)f->n, sizeof *f->by_name_, by_name);
    return AG_OK;
}

/* ---- 1 and 2: the file ---- */

int st_read(const char *path, StFile **out, const StLimits *lim) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    *out = NULL;
    StLimits l = lim ? *lim : st_default_limits();
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* NONBLOCK: a FIFO must not hang */
    if (fd < 0) return ag_fail(AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = AG_OK;
    if (fstat(fd, &st) != 0)
        rc = ag_fail(AG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(st.st_mode))
        rc = ag_fail(AG_ERR_IO, "%s: is a folder, not a safetensors file", path);
    else if (!S_ISREG(st.st_mode))
        rc = ag_fail(AG_ERR_IO, "%s: not a regular file", path);
    else if (st.st_size < 8)
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: %lld bytes, too short for a safetensors file (its first 8 bytes are the "
                     "header's length)",
                     path, (long long)st.st_size);
    StFile *f = rc == AG_OK ? calloc(1, sizeof *f) : NULL;
    if (rc == AG_OK && (!f || !(f->path = strdup(path))))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    if (rc == AG_OK) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = ag_fail(AG_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        else {
            f->map_ = m;
            f->map_len_ = (size_t)st.st_size;
            f->file_bytes = (size_t)st.st_size;
        }
    }
    close(fd);
    if (rc == AG_OK) rc = parse_header(f, &l);
    if (rc != AG_OK) {
        st_free(f);
        return rc;
    }
    *out = f;
    return AG_OK;
}

const StTensor *st_find(const StFile *f, const char *name) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(name);
    return find_sorted(f->by_name_, f->n, name);
}

const char *st_meta(const StFile *f, const char *key) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(key);
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

void st_free(StFile *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free((void *)f->tensors[i].name);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->tensors);
    free(f->by_name_);
    if (f->map_) munmap(f->map_, f->map_len_);
    free(f->path);
    free(f);
}

/* ---- sets: one file, or an index and its shards ---- */

/* dir[0..dlen) then sep then name, malloc'd; NULL when out of memory */
static char *path_in(const char *dir, size_t dlen, const char *sep, const char *name) {
    size_t n = dlen + strlen(sep) + strlen(name) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%.*s%s%s", (int)dlen, dir, sep, name);
    return s;
}

/* A folder without safetensors weights: AG_ERR_IO naming what it holds instead, when it is one
 * of the other forms transformers reads (PyTorch's pickle, TensorFlow's, Flax's), which attograd
 * does not: a pickle runs code when it is loaded, and the others need their own libraries */
static int no_weights(const char *dir, size_t dlen, const char *sep) {
    static const char *const other[] = {"pytorch_model.bin", "pytorch_model.bin.index.json",
                                        "tf_model.h5", "flax_model.msgpack"};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        char *p = path_in(dir, dlen, sep, other[i]);
        struct stat st;
        int there = p && stat(p, &st) == 0;
        free(p);
        if (there)
            return ag_fail(AG_ERR_IO,
                           "%s: no %s or %s in this folder, only %s, which attograd does not read "
                           "(%s): the weights are needed as safetensors (transformers writes them: "
                           "AutoModelForCausalLM.from_pretrained(\"%s\").save_pretrained(NEW_DIR))",
                           dir, ST_WEIGHTS_NAME, ST_INDEX_NAME, other[i],
                           i < 2 ? "PyTorch's pickle, which runs code when it is loaded"
                                 : "another library's format",
                           dir);
    }
    return ag_fail(AG_ERR_IO, "%s: no %s or %s in this folder", dir, ST_WEIGHTS_NAME,
                   ST_INDEX_NAME);
}

/* Fills s->tensors with every tensor of s's files, sorted by name. */
static int set_collect(StSet *s) {
    size_t n = 0;
    for (int i = 0; i < s->n_files; i++) n += (size_t)s->files[i]->n;
    s->tensors = calloc(n ? n : 1, sizeof *s->tensors);
    if (!s->tensors) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", s->path);
    for (int i = 0; i < s->n_files; i++)
        for (int k = 0; k < s->files[i]->n; k++) s->tensors[s->n++] = &s->files[i]->tensors[k];
    qsort(s->tensors, n, sizeof *s->tensors, by_name);
    for (size_t i = 0; i + 1 < n; i++)
        if (strcmp(s->tensors[i]->name, s->tensors[i + 1]->name) == 0)
            return tfail(s->path, s->tensors[i]->name, AG_ERR_FORMAT, "in both %s and %s",
                         s->tensors[i]->path, s->tensors[i + 1]->path);
    return AG_OK;
}

int st_read_small(const char *path, uint64_t max, char **text, size_t *len) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(len);
    *text = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ag_fail(AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int rc = AG_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = ag_fail(AG_ERR_IO, "%s: not a regular file", path);
    else if ((uint64_t)st.st_size > max)
        rc = ag_fail(AG_ERR_NOMEM, "%s: %lld bytes, over the limit of %llu bytes", path,
                     (long long)st.st_size, (ull)max);
    else if (!(*text = malloc((size_t)st.st_size + 1)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    size_t done = 0;
    while (rc == AG_OK && done < (size_t)st.st_size) {
        ssize_t k = read(fd, *text + done, (size_t)st.st_size - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            rc = ag_fail(AG_ERR_IO, "%s: reading failed: %s", path,
                         k < 0 ? strerror(errno) : "the file ended early");
        else
            done += (size_t)k;
    }
    close(fd);
    if (rc == AG_OK) (*text)[done] = '\0';
    if (rc != AG_OK) {
        free(*text);
        *text = NULL;
    }
    *len = done;
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index at path: its JSON checked, then its shards read, then both against each other. */
static int open_index(StSet *s, const char *path, const StLimits *lim) {
    char *text = NULL;
    size_t len = 0;
    int rc = st_read_small(path, lim->max_header, &text, &len);
    if (rc) return rc;
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    free(text);
    if (!root)
        return ag_fail(AG_ERR_FORMAT, "%s: not valid JSON: %s (at byte %d)", path, err.text,
                       err.position);
    const char *key, **shards = NULL;
    json_t *v, *wm = json_object_get(root, "weight_map"), *meta = json_object_get(root, "metadata");
    char nm[400];
    if (!json_is_object(root))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: not a JSON object (an index holds metadata and weight_map)", path);
    json_object_foreach(root, key, v) {
        if (rc != AG_OK) break;
        if (strcmp(key, "weight_map") && strcmp(key, "metadata")) {
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s: unexpected key '%s' (an index holds metadata and weight_map)", path,
                         shown(key, nm));
            break;
        }
    }
    if (rc == AG_OK && (!wm || !json_is_object(wm)))
        rc = ag_fail(AG_ERR_FORMAT, "%s: 'weight_map' is %s", path,
                     wm ? "not an object" : "missing");
    if (rc == AG_OK && meta && !json_is_object(meta))
        rc = ag_fail(AG_ERR_FORMAT, "%s: 'metadata' is not an object", path);
    json_t *total = meta ? json_object_get(meta, "total_size") : NULL;
    uint64_t ignored;
    if (rc == AG_OK && total && !json_count(total, &ignored))
        rc = ag_fail(AG_ERR_FORMAT, "%s: 'metadata'.'total_size' is not an integer >= 0", path);
    /* the shards' names: each value of weight_map, checked, then the distinct ones */
    size_t n_map = rc == AG_OK ? json_object_size(wm) : 0, n_sh = 0;
    if (rc == AG_OK && !(shards = calloc(n_map ? n_map : 1, sizeof *shards)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    if (rc == AG_OK) {
        json_object_foreach(wm, key, v) {
            const char *sh = json_string_value(v);
            if (!sh) {
                rc = tfail(path, key, AG_ERR_FORMAT, "its shard is not a string");
                break;
            }
            if (!*sh || strlen(sh) > 255 || strchr(sh, '/') || !strcmp(sh, ".") ||
                !strcmp(sh, "..")) {
                rc = tfail(path, key, AG_ERR_FORMAT,
                           "shard '%s' is not a file name in the index's folder", shown(sh, nm));
                break;
            }
            shards[n_sh++] = sh;
        }
    }
    if (rc == AG_OK) {
        qsort(shards, n_sh, sizeof *shards, cmp_str);
        size_t k = 0;
        for (size_t i = 0; i < n_sh; i++)
            if (k == 0 || strcmp(shards[k - 1], shards[i]) != 0) shards[k++] = shards[i];
        n_sh = k;
        if (n_sh > lim->max_files)
            rc = ag_fail(AG_ERR_NOMEM, "%s: %zu shards, over the limit of %zu (StLimits.max_files)",
                         path, n_sh, lim->max_files);
    }
    if (rc == AG_OK && !(s->files = calloc(n_sh ? n_sh : 1, sizeof *s->files)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    const char *slash = strrchr(path, '/'); /* the shards are beside the index */
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    for (size_t i = 0; i < n_sh && rc == AG_OK; i++) {
        char *sp = path_in(path, dlen, "", shards[i]);
        rc = sp ? st_read(sp, &s->files[s->n_files], lim)
                : ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
        if (rc == AG_OK) s->n_files++;
        free(sp);
    }
    /* both ways: what the index names is in its shard, what a shard holds the index names */
    if (rc == AG_OK) {
        json_object_foreach(wm, key, v) {
            const char *sh = json_string_value(v);
            const StFile *f = NULL;
            for (int i = 0; i < s->n_files && !f; i++)
                if (strcmp(shards[i], sh) == 0) f = s->files[i];
            if (!st_find(f, key)) {
                rc = tfail(path, key, AG_ERR_FORMAT,
                           "the index puts it in %s, which does not hold it", f->path);
                break;
            }
        }
    }
    for (int i = 0; i < s->n_files && rc == AG_OK; i++) {
        for (int k = 0; k < s->files[i]->n && rc == AG_OK; k++) {
            const char *name = s->files[i]->tensors[k].name;
            const char *sh = json_string_value(json_object_get(wm, name));
            if (!sh)
                rc = tfail(s->files[i]->path, name, AG_ERR_FORMAT, "not named by the index %s",
                           path);
            else if (strcmp(sh, shards[i]) != 0)
                rc = tfail(s->files[i]->path, name, AG_ERR_FORMAT,
                           "the index %s puts it in shard '%s'", path, shown(sh, nm));
        }
    }
    free(shards);
    json_decref(root);
    return rc;
}

int st_open(const char *path, StSet **out, const StLimits *lim) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    *out = NULL;
    StLimits l = lim ? *lim : st_default_limits();
    StSet *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st;
    int rc = AG_OK;
    char *file = NULL;
    size_t plen = strlen(path);
    if (stat(path, &st) != 0) {
        rc = ag_fail(AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        const char *sep = path[plen - 1] == '/' ? "" : "/";
        file = path_in(path, plen, sep, ST_WEIGHTS_NAME);
        char *index = path_in(path, plen, sep, ST_INDEX_NAME);
        if (!file || !index)
            rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
        else if (stat(file, &st) != 0) {
            free(file);
            file = NULL;
            if (stat(index, &st) == 0)
                rc = open_index(s, index, &l);
            else
                rc = no_weights(path, plen, sep);
        }
        free(index);
    } else if (plen >= 5 && strcmp(path + plen - 5, ".json") == 0) {
        rc = open_index(s, path, &l);
    } else {
        file = strdup(path);
        if (!file) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    if (rc == AG_OK && file) {
        s->files = calloc(1, sizeof *s->files);
        if (!s->files) rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
        if (rc == AG_OK) rc = st_read(file, &s->files[0], &l);
        if (rc == AG_OK) s->n_files = 1;
    }
    free(file);
    if (rc == AG_OK) rc = set_collect(s);
    if (rc != AG_OK) {
        st_set_free(s);
        return rc;
    }
    *out = s;
    return AG_OK;
}

const StTensor *st_set_find(const StSet *s, const char *name) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(name);
    return find_sorted(s->tensors, s->n, name);
}

void st_set_done_with(const StSet *s, const StTensor *t) {
    AG_CHECK_ARG(s);
    AG_CHECK_ARG(t);
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t b = (uintptr_t)t->data, e = b + t->nbytes;
    if (page <= 0) return;
    for (int i = 0; i < s->n_files; i++) {
        uintptr_t m = (uintptr_t)s->files[i]->map_, n = m + s->files[i]->map_len_;
        if (!m || b < m || e > n) continue; /* not this file's bytes */
        /* the whole pages inside t's bytes: another tensor's bytes may share the edge pages */
        uintptr_t p0 = (b + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
        uintptr_t p1 = e / (uintptr_t)page * (uintptr_t)page;
#ifdef MADV_DONTNEED
        if (p1 > p0) madvise((void *)p0, p1 - p0, MADV_DONTNEED);
#endif
        return;
    }
}

void st_set_free(StSet *s) {
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) st_free(s->files[i]);
    free(s->files);
    free(s->tensors);
    free(s->path);
    free(s);
}
