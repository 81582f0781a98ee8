/* npz_write.c: the writer. Entries are collected (pointers, not copies), then npz_write streams
 * them into a temporary file and renames it over the target. Each entry is one zip record:
 *   local header (30 bytes + name + optional ZIP64 extra) | .npy header | array data
 * stored as is (level 0) or as a raw deflate stream (zlib, levels 1..9); the CRC-32 and the
 * compressed size are known only afterwards, so the local header is rewritten in place once
 * the entry is done. After the entries come the central directory (one 46-byte header per
 * entry, pointing at its local header) and the end record (plus the ZIP64 end record and
 * locator when offsets or counts need 64 bits). Layouts: PKWARE's APPNOTE.TXT, section 4.3.
 * Also here: the dtype table and npz_shape_str, shared with npz_read.c.
 * Not here: reading (npz_read.c), parameters (npz_params.c). */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "file.h"
#include "npz_internal.h"

/* ---- dtypes ---- */

static const struct {
    const char *descr;
    size_t size;
} dtypes[NPZ_N_DTYPES] = {
    [NPZ_F32] = {"<f4", 4}, [NPZ_F64] = {"<f8", 8}, [NPZ_I64] = {"<i8", 8},
    [NPZ_U64] = {"<u8", 8}, [NPZ_I32] = {"<i4", 4}, [NPZ_U8] = {"|u1", 1},
};

const char *npz_dtype_descr(NpzDtype d) {
    return (unsigned)d < NPZ_N_DTYPES ? dtypes[d].descr : "?";
}
size_t npz_dtype_size(NpzDtype d) { return (unsigned)d < NPZ_N_DTYPES ? dtypes[d].size : 0; }

const char *npz_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    AG_CHECK_ARG(buf);
    AG_CHECK(ndim <= 0 || shape != NULL, "npz_shape_str: argument 'shape' is NULL for %d dims",
             ndim);
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

/* ---- fault injection (see npz_internal.h) ---- */

static NpzFault fault_where;
static int fault_err;
static uint64_t fault_after;

void npz_test_set_fault(NpzFault where, int err, uint64_t after) {
    fault_where = where;
    fault_err = err;
    fault_after = after;
}

/* 1 (and errno set) if the injected fault fires at this step; bytes: written so far plus
 * the bytes of this write (only NPZ_FAULT_WRITE looks at it). */
static int fault(NpzFault where, uint64_t bytes) {
    if (fault_where != where || (where == NPZ_FAULT_WRITE && bytes <= fault_after)) return 0;
    fault_where = NPZ_FAULT_NONE;
    errno = fault_err;
    return 1;
}

/* ---- the writer's entries ---- */

typedef struct {
    char *zname;    /* "<name>.npy" */
    NpzDtype dtype; /* as stored */
    NpzDtype src;   /* as in memory (differs only for npz_add_real_as conversions) */
    int ndim;
    int64_t shape[NPZ_MAX_DIMS];
    size_t count;
    const void *data;
    int finite; /* npz_writer_finite was on when it was added: checked by npz_write */
    /* filled while writing */
    uint32_t crc;
    uint64_t usize, csize, offset;
} WEntry;

struct NpzWriter {
    WEntry *e;
    int n, cap;
    int force_zip64;
    int finite; /* npz_writer_finite */
};

NpzWriter *npz_writer_new(void) {
    NpzWriter *w = calloc(1, sizeof *w);
    AG_CHECK(w != NULL, "npz_writer_new: out of memory");
    return w;
}

void npz_writer_free(NpzWriter *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->e[i].zname);
    free(w->e);
    free(w);
}

void npz_writer_force_zip64(NpzWriter *w, int on) {
    AG_CHECK_ARG(w);
    w->force_zip64 = on != 0;
}

void npz_writer_finite(NpzWriter *w, int on) {
    AG_CHECK_ARG(w);
    w->finite = on != 0;
}

/* npz_writer_finite's check: AG_OK, or AG_ERR_RANGE naming the first entry and element that
 * holds a NaN or an infinity */
static int check_finite(const NpzWriter *w, const char *path) {
    for (int i = 0; i < w->n; i++) {
        const WEntry *e = &w->e[i];
        if (!e->finite || (e->src != NPZ_F32 && e->src != NPZ_F64)) continue;
        for (size_t k = 0; k < e->count; k++) {
            double v = e->src == NPZ_F32 ? (double)((const float *)e->data)[k]
                                         : ((const double *)e->data)[k];
            if (e->dtype == NPZ_F32) v = (double)(float)v;
            if (isfinite(v)) continue;
            int len = (int)strlen(e->zname) - 4;
            return ag_fail(AG_ERR_RANGE, "%s: not written: %.*s[%zu] = %g: must be finite", path,
                           len, e->zname, k, v);
        }
    }
    return AG_OK;
}

static void add_entry(NpzWriter *w, const char *fn, const char *name, NpzDtype dtype, NpzDtype src,
                      int ndim, const int64_t *shape, const void *data) {
    AG_CHECK(w != NULL, "%s: argument 'w' is NULL", fn);
    AG_CHECK(name != NULL, "%s: argument 'name' is NULL", fn);
    AG_CHECK(name[0] != '\0', "%s: the name is empty", fn);
    size_t len = strlen(name);
    AG_CHECK(len <= 4096, "%s: name '%.40s...' is %zu bytes long (4096 at most)", fn, name, len);
    AG_CHECK((unsigned)dtype < NPZ_N_DTYPES, "%s: '%s' has an unknown dtype %d", fn, name,
             (int)dtype);
    AG_CHECK(ndim >= 0 && ndim <= NPZ_MAX_DIMS, "%s: '%s' has %d dims (0..%d allowed)", fn, name,
             ndim, NPZ_MAX_DIMS);
    AG_CHECK(ndim == 0 || shape != NULL, "%s: '%s' has %d dims and a NULL shape", fn, name, ndim);
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        AG_CHECK(shape[i] >= 0, "%s: '%s' dim %d is %lld (must be >= 0)", fn, name, i,
                 (long long)shape[i]);
        AG_CHECK(shape[i] == 0 || count <= SIZE_MAX / 8 / (uint64_t)shape[i],
                 "%s: '%s' has too many elements", fn, name);
        count *= (size_t)shape[i];
    }
    AG_CHECK(count == 0 || data != NULL, "%s: '%s' has %zu elements and NULL data", fn, name,
             count);
    for (int i = 0; i < w->n; i++)
        AG_CHECK(strncmp(w->e[i].zname, name, len) != 0 || strcmp(w->e[i].zname + len, ".npy"),
                 "%s: an entry named '%s' was already added", fn, name);
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 32;
        WEntry *e = realloc(w->e, (size_t)cap * sizeof *e);
        AG_CHECK(e != NULL, "%s: out of memory for %d entries", fn, cap);
        w->e = e;
        w->cap = cap;
    }
    WEntry *e = &w->e[w->n];
    memset(e, 0, sizeof *e);
    e->zname = malloc(len + 5);
    AG_CHECK(e->zname != NULL, "%s: out of memory", fn);
    memcpy(e->zname, name, len);
    memcpy(e->zname + len, ".npy", 5);
    e->dtype = dtype;
    e->src = src;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->count = count;
    e->data = data;
    e->finite = w->finite;
    w->n++;
}

void npz_add(NpzWriter *w, const char *name, NpzDtype dtype, int ndim, const int64_t *shape,
             const void *data) {
    add_entry(w, "npz_add", name, dtype, dtype, ndim, shape, data);
}
void npz_add_f32(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const float *d) {
    add_entry(w, "npz_add_f32", name, NPZ_F32, NPZ_F32, ndim, shape, d);
}
void npz_add_f64(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const double *d) {
    add_entry(w, "npz_add_f64", name, NPZ_F64, NPZ_F64, ndim, shape, d);
}
void npz_add_i64(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int64_t *d) {
    add_entry(w, "npz_add_i64", name, NPZ_I64, NPZ_I64, ndim, shape, d);
}
void npz_add_u64(NpzWriter *w, const char *name, int ndim, const int64_t *shape,
                 const uint64_t *d) {
    add_entry(w, "npz_add_u64", name, NPZ_U64, NPZ_U64, ndim, shape, d);
}
void npz_add_i32(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int32_t *d) {
    add_entry(w, "npz_add_i32", name, NPZ_I32, NPZ_I32, ndim, shape, d);
}
void npz_add_int(NpzWriter *w, const char *name, int ndim, const int64_t *shape, const int *d) {
    _Static_assert(sizeof(int) == sizeof(int32_t), "npz_add_int: int is not 32 bits here");
    add_entry(w, "npz_add_int", name, NPZ_I32, NPZ_I32, ndim, shape, d);
}
void npz_add_bytes(NpzWriter *w, const char *name, const void *bytes, size_t n) {
    int64_t shape[1] = {(int64_t)n};
    add_entry(w, "npz_add_bytes", name, NPZ_U8, NPZ_U8, 1, shape, bytes);
}

/* t (any shape) */
void npz_add_real_as(NpzWriter *w, const char *name, const Tensor *t, NpzDtype as) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(t);
    AG_CHECK(as == NPZ_F32 || as == NPZ_F64,
             "npz_add_real_as: '%s' as '%s': only '<f4' or "
             "'<f8'",
             name ? name : "", npz_dtype_descr(as));
    int64_t shape[AG_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    add_entry(w, "npz_add_real", name, as, NPZ_REAL, t->ndim, shape, t->data);
}
void npz_add_real(NpzWriter *w, const char *name, const Tensor *t) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(t);
    npz_add_real_as(w, name, t, NPZ_REAL);
}
void npz_add_params(NpzWriter *w, const ParamList *pl, NpzDtype as) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(pl);
    for (int i = 0; i < pl->n; i++) npz_add_real_as(w, pl->items[i]->name, pl->items[i], as);
}

/* ---- the .npy header: magic, version, length, then a Python dict padded with spaces and a
 * newline so that the data starts at a multiple of 64 bytes (as numpy writes it) ---- */

/* Writes the header into buf (cap >= 512 is enough for NPZ_MAX_DIMS dims) and returns its
 * length: version 1.0 (2-byte length) unless the dict needs more than 65535 bytes (2.0). */
static size_t npy_header(const WEntry *e, unsigned char *buf, size_t cap) {
    char dict[400], shape[NPZ_MAX_DIMS * 24 + 4];
    size_t n = (size_t)snprintf(shape, sizeof shape, "(");
    for (int i = 0; i < e->ndim; i++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%lld%s", (long long)e->shape[i],
                              e->ndim == 1      ? ","
                              : i + 1 < e->ndim ? ", "
                                                : "");
    snprintf(shape + n, sizeof shape - n, ")");
    int dlen = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                        npz_dtype_descr(e->dtype), shape);
    size_t pre = NPY_MAGIC_LEN + 2 + 2; /* magic, version, 2-byte length */
    size_t total = (pre + (size_t)dlen + 1 + 63) / 64 * 64;
    int major = 1;
    if (total - pre > 65535) { /* cannot happen with NPZ_MAX_DIMS dims; kept for the format */
        major = 2;
        pre += 2;
        total = (pre + (size_t)dlen + 1 + 63) / 64 * 64;
    }
    AG_CHECK(total <= cap, "npy_header: %zu bytes do not fit in %zu", total, cap);
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    if (major == 1)
        put16(buf + 8, (uint32_t)(total - pre));
    else
        put32(buf + 8, (uint32_t)(total - pre));
    memcpy(buf + pre, dict, (size_t)dlen);
    memset(buf + pre + dlen, ' ', total - pre - (size_t)dlen - 1);
    buf[total - 1] = '\n';
    return total;
}

/* ---- the output stream: a buffer over the temporary file's descriptor ---- */

typedef struct {
    int fd;
    uint64_t pos;     /* bytes written so far, buffered ones included */
    uint64_t flushed; /* bytes handed to write() */
    size_t len;       /* bytes in buf */
    int err;          /* errno of the first failure, 0 if none */
    unsigned char buf[1 << 16];
} Out;

static int out_flush(Out *o) {
    size_t off = 0;
    while (off < o->len && !o->err) {
        size_t n = o->len - off;
        ssize_t k = fault(NPZ_FAULT_WRITE, o->flushed + n) ? -1 : write(o->fd, o->buf + off, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0)
            o->err = errno;
        else if (k == 0)
            o->err = ENOSPC; /* write() made no progress: treat as a full disk */
        else {
            off += (size_t)k;
            o->flushed += (uint64_t)k;
        }
    }
    o->len = 0;
    return o->err ? -1 : 0;
}

static int out_write(Out *o, const void *p, size_t n) {
    const unsigned char *s = p;
    while (n > 0 && !o->err) {
        size_t k = sizeof o->buf - o->len;
        if (k > n) k = n;
        memcpy(o->buf + o->len, s, k);
        o->len += k;
        o->pos += k;
        s += k;
        n -= k;
        if (o->len == sizeof o->buf) out_flush(o);
    }
    return o->err ? -1 : 0;
}

/* Rewrites n bytes at offset off, which out_flush has already handed to write(). */
static int out_patch(Out *o, uint64_t off, const unsigned char *p, size_t n) {
    if (out_flush(o)) return -1;
    size_t done = 0;
    while (done < n) {
        ssize_t k = fault(NPZ_FAULT_WRITE, o->flushed + n)
                        ? -1
                        : pwrite(o->fd, p + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            o->err = k < 0 ? errno : ENOSPC;
            return -1;
        }
        done += (size_t)k;
    }
    return 0;
}

/* ---- zip records ---- */

#define DOS_DATE_1980_01_01 0x0021 /* ((1980 - 1980) << 9) | (1 << 5) | 1; time 00:00:00 is 0 */
/* entries at least this large use ZIP64 sizes: deflate may grow incompressible data by a few
 * bytes per 16 KiB block, which stays far below the 256 MiB left to 0xFFFFFFFF */
#define ZIP64_THRESHOLD 0xF0000000u

static int name_is_ascii(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80) return 0;
    return 1;
}

static int local_zip64(const NpzWriter *w, const WEntry *e) {
    return w->force_zip64 || e->usize >= ZIP64_THRESHOLD;
}

/* The local header of e (with its current crc and sizes) into buf; returns its length. */
static size_t local_header(const NpzWriter *w, const WEntry *e, int method, unsigned char *buf) {
    int z64 = local_zip64(w, e);
    size_t nlen = strlen(e->zname);
    unsigned char *p = buf;
    p = put32(p, ZIP_LOCAL_SIG);
    p = put16(p, z64 ? 45 : method == ZIP_DEFLATED ? 20 : 10); /* version needed to extract */
    p = put16(p, name_is_ascii(e->zname) ? 0 : ZIP_FLAG_UTF8);
    p = put16(p, (uint32_t)method);
    p = put16(p, 0); /* time */
    p = put16(p, DOS_DATE_1980_01_01);
    p = put32(p, e->crc);
    p = put32(p, z64 ? ZIP_MAX32 : (uint32_t)e->csize);
    p = put32(p, z64 ? ZIP_MAX32 : (uint32_t)e->usize);
    p = put16(p, (uint32_t)nlen);
    p = put16(p, z64 ? 20 : 0);
    memcpy(p, e->zname, nlen);
    p += nlen;
    if (z64) { /* in a local header the ZIP64 extra holds both sizes (APPNOTE 4.5.3) */
        p = put16(p, ZIP64_EXTRA_ID);
        p = put16(p, 16);
        p = put64(p, e->usize);
        p = put64(p, e->csize);
    }
    return (size_t)(p - buf);
}

/* The central directory header of e into buf; returns its length. */
static size_t central_header(const NpzWriter *w, const WEntry *e, int method, unsigned char *buf) {
    int big_u = w->force_zip64 || e->usize >= ZIP_MAX32;
    int big_c = w->force_zip64 || e->csize >= ZIP_MAX32;
    int big_o = w->force_zip64 || e->offset >= ZIP_MAX32;
    int xlen = (big_u + big_c + big_o) * 8;
    int version = xlen || local_zip64(w, e) ? 45 : method == ZIP_DEFLATED ? 20 : 10;
    size_t nlen = strlen(e->zname);
    unsigned char *p = buf;
    p = put32(p, ZIP_CENTRAL_SIG);
    p = put16(p, (3u << 8) | 45); /* made by: Unix, spec 4.5 */
    p = put16(p, (uint32_t)version);
    p = put16(p, name_is_ascii(e->zname) ? 0 : ZIP_FLAG_UTF8);
    p = put16(p, (uint32_t)method);
    p = put16(p, 0);
    p = put16(p, DOS_DATE_1980_01_01);
    p = put32(p, e->crc);
    p = put32(p, big_c ? ZIP_MAX32 : (uint32_t)e->csize);
    p = put32(p, big_u ? ZIP_MAX32 : (uint32_t)e->usize);
    p = put16(p, (uint32_t)nlen);
    p = put16(p, (uint32_t)(xlen ? xlen + 4 : 0));
    p = put16(p, 0);              /* comment length */
    p = put16(p, 0);              /* disk number */
    p = put16(p, 0);              /* internal attributes */
    p = put32(p, 0100644u << 16); /* external: a regular file, rw-r--r-- */
    p = put32(p, big_o ? ZIP_MAX32 : (uint32_t)e->offset);
    memcpy(p, e->zname, nlen);
    p += nlen;
    if (xlen) { /* only the fields that are 0xFFFFFFFF above, in this order */
        p = put16(p, ZIP64_EXTRA_ID);
        p = put16(p, (uint32_t)xlen);
        if (big_u) p = put64(p, e->usize);
        if (big_c) p = put64(p, e->csize);
        if (big_o) p = put64(p, e->offset);
    }
    return (size_t)(p - buf);
}

/* ---- one entry: header, then data through the CRC and (level > 0) deflate ---- */

typedef struct {
    Out *o;
    z_stream z;
    int deflating;
    uint32_t crc;
    unsigned char zbuf[1 << 16];
} Sink;

/* Feeds n bytes into the CRC and the output (deflated or stored). -1: write failed (o->err
 * set), -2: zlib failed. */
static int sink_put(Sink *s, const void *p, size_t n, int finish) {
    const unsigned char *b = p;
    size_t left = n;
    do {
        uInt k = left > (1u << 30) ? (1u << 30) : (uInt)left;
        s->crc = (uint32_t)crc32(s->crc, b, k);
        if (!s->deflating) {
            if (out_write(s->o, b, k)) return -1;
        } else {
            int last = finish && k == left;
            s->z.next_in = (Bytef *)b;
            s->z.avail_in = k;
            int ret;
            do {
                s->z.next_out = s->zbuf;
                s->z.avail_out = sizeof s->zbuf;
                ret = deflate(&s->z, last ? Z_FINISH : Z_NO_FLUSH);
                if (ret == Z_STREAM_ERROR) return -2;
                if (out_write(s->o, s->zbuf, sizeof s->zbuf - s->z.avail_out)) return -1;
            } while (s->z.avail_out == 0 || (last && ret != Z_STREAM_END));
        }
        b += k;
        left -= k;
    } while (left > 0);
    return 0;
}

/* Streams e's header and data; sets e->crc and e->csize. */
static int write_entry_data(Sink *s, WEntry *e, const unsigned char *hdr, size_t hlen) {
    int rc = sink_put(s, hdr, hlen, e->count == 0);
    size_t isz = npz_dtype_size(e->src);
    if (rc == 0 && e->count > 0) {
        if (e->src == e->dtype) {
            rc = sink_put(s, e->data, e->count * isz, 1);
        } else { /* a float <-> double conversion, 8192 values at a time */
            union {
                float f[8192];
                double d[8192];
            } tmp;
            for (size_t i = 0; i < e->count && rc == 0; i += 8192) {
                size_t k = e->count - i < 8192 ? e->count - i : 8192;
                if (e->dtype == NPZ_F32)
                    for (size_t j = 0; j < k; j++)
                        tmp.f[j] = (float)((const double *)e->data)[i + j];
                else
                    for (size_t j = 0; j < k; j++) tmp.d[j] = ((const float *)e->data)[i + j];
                rc = sink_put(s, &tmp, k * npz_dtype_size(e->dtype), i + k == e->count);
            }
        }
    }
    e->crc = s->crc;
    return rc;
}

/* ---- npz_write ---- */

static int fail_errno(const char *path, const char *what, int err) {
    return ag_fail(AG_ERR_IO, "%s: %s: %s", path, what, strerror(err));
}

/* Writes every record into the open temporary file. Returns AG_OK or an error (recorded). */
static int write_archive(NpzWriter *w, Out *o, Sink *s, int level, const char *path) {
    int method = level > 0 ? ZIP_DEFLATED : ZIP_STORED;
    size_t cap = 512 + 4096 + 64;
    unsigned char *rec = malloc(cap), hdr[512];
    if (!rec) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    int rc = AG_OK;
    for (int i = 0; i < w->n && rc == AG_OK; i++) {
        WEntry *e = &w->e[i];
        size_t hlen = npy_header(e, hdr, sizeof hdr);
        e->usize = hlen + e->count * npz_dtype_size(e->dtype);
        e->csize = method == ZIP_STORED ? e->usize : 0;
        e->crc = 0;
        e->offset = o->pos;
        size_t llen = local_header(w, e, method, rec);
        if (out_write(o, rec, llen)) break;
        uint64_t start = o->pos;
        s->crc = (uint32_t)crc32(0, Z_NULL, 0);
        s->deflating = method == ZIP_DEFLATED;
        /* -1: a write failed (o->err, reported below), -2: zlib failed */
        int r =
            s->deflating && deflateReset(&s->z) != Z_OK ? -2 : write_entry_data(s, e, hdr, hlen);
        if (r == -2) {
            rc = ag_fail(AG_ERR_IO, "%s: entry '%s': zlib deflate failed: %s", path, e->zname,
                         s->z.msg ? s->z.msg : "stream error");
            break;
        }
        if (r) break;
        e->csize = o->pos - start;
        if (!local_zip64(w, e) && e->csize >= ZIP_MAX32) {
            rc = ag_fail(AG_ERR_IO, "%s: entry '%s' compressed to %llu bytes, over 4 GiB", path,
                         e->zname, (unsigned long long)e->csize);
            break;
        }
        if (out_patch(o, e->offset, rec, local_header(w, e, method, rec))) break;
    }
    /* central directory and end records */
    uint64_t cd_off = o->pos;
    for (int i = 0; i < w->n && rc == AG_OK && !o->err; i++)
        out_write(o, rec, central_header(w, &w->e[i], method, rec));
    uint64_t cd_size = o->pos - cd_off;
    int z64 =
        w->force_zip64 || w->n >= (int)ZIP_MAX16 || cd_off >= ZIP_MAX32 || cd_size >= ZIP_MAX32;
    if (rc == AG_OK && !o->err && z64) {
        uint64_t end64 = o->pos;
        unsigned char *p = rec;
        p = put32(p, ZIP64_END_SIG);
        p = put64(p, ZIP64_END_SIZE - 12); /* size of the rest of this record */
        p = put16(p, (3u << 8) | 45);
        p = put16(p, 45);
        p = put32(p, 0); /* this disk */
        p = put32(p, 0); /* disk of the central directory */
        p = put64(p, (uint64_t)w->n);
        p = put64(p, (uint64_t)w->n);
        p = put64(p, cd_size);
        p = put64(p, cd_off);
        p = put32(p, ZIP64_LOC_SIG);
        p = put32(p, 0);
        p = put64(p, end64);
        p = put32(p, 1); /* total number of disks */
        out_write(o, rec, (size_t)(p - rec));
    }
    if (rc == AG_OK && !o->err) {
        unsigned char *p = rec;
        uint32_t n16 = z64 ? ZIP_MAX16 : (uint32_t)w->n;
        p = put32(p, ZIP_END_SIG);
        p = put16(p, 0);
        p = put16(p, 0);
        p = put16(p, n16);
        p = put16(p, n16);
        p = put32(p, z64 ? ZIP_MAX32 : (uint32_t)cd_size);
        p = put32(p, z64 ? ZIP_MAX32 : (uint32_t)cd_off);
        p = put16(p, 0); /* comment length */
        out_write(o, rec, (size_t)(p - rec));
        out_flush(o);
    }
    free(rec);
    if (rc == AG_OK && o->err) rc = fail_errno(path, "writing the temporary file failed", o->err);
    return rc;
}

/* fsync of the folder that holds path, so that the rename itself survives a power loss. */
static int sync_folder(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return ENOMEM;
    int err = 0;
    int fd = fault(NPZ_FAULT_DIRSYNC, 0) ? -1 : open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        err = errno;
    else {
        /* some file systems cannot sync a folder (EINVAL): nothing more can be done there */
        if (fsync(fd) != 0 && errno != EINVAL) err = errno;
        close(fd);
    }
    free(dir);
    return err;
}

int npz_write(NpzWriter *w, const char *path, int level, NpzStats *stats) {
    AG_CHECK_ARG(w);
    AG_CHECK_ARG(path);
    if (stats) memset(stats, 0, sizeof *stats);
    if (level < 0 || level > 9)
        return ag_fail(AG_ERR_ARG, "%s: compression level %d outside 0..9", path, level);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    Out *o = malloc(sizeof *o);
    Sink *s = calloc(1, sizeof *s);
    if (!tmp || !o || !s) {
        free(tmp);
        free(o);
        free(s);
        return ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    memset(o, 0, offsetof(Out, buf));
    s->o = o;
    int rc = check_finite(w, path);
    o->fd = -1;
    if (rc == AG_OK && fault(NPZ_FAULT_OPEN, 0)) {
        int err = errno;
        rc = ag_fail(AG_ERR_IO, "%s: cannot create the temporary file '%s': %s", path, tmp,
                     strerror(err));
    } else if (rc == AG_OK) { /* io_temp_create: a new file, never through a link */
        char *made = NULL;
        rc = io_temp_create(path, &o->fd, &made);
        free(made);
    }
    if (rc == AG_OK && level > 0 &&
        deflateInit2(&s->z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        rc = ag_fail(AG_ERR_NOMEM, "%s: zlib deflateInit2 failed", path);
    int deflating = rc == AG_OK && level > 0;
    if (rc == AG_OK) rc = write_archive(w, o, s, level, path);
    if (rc == AG_OK && (fault(NPZ_FAULT_FSYNC, 0) || fsync(o->fd) != 0))
        rc = fail_errno(path, "fsync of the temporary file failed", errno);
    if (o->fd >= 0) {
        int err = close(o->fd) != 0 ? errno : 0;
        if (fault(NPZ_FAULT_CLOSE, 0)) err = errno;
        if (err && rc == AG_OK) rc = fail_errno(path, "closing the temporary file failed", err);
    }
    if (rc == AG_OK && fault(NPZ_FAULT_RENAME, 0)) {
        int err = errno;
        rc = ag_fail(AG_ERR_IO, "%s: cannot rename '%s' over it: %s", path, tmp, strerror(err));
    } else if (rc == AG_OK) {
        rc = io_replace(tmp, path);
    }
    if (rc != AG_OK) {
        if (o->fd >= 0) unlink(tmp); /* the old file at path was never touched */
    } else {
        int err = sync_folder(path);
        if (err)
            rc = ag_fail(AG_ERR_IO,
                         "%s: written, but fsync of its folder failed: %s (the new "
                         "file is in place; a power loss could still undo the rename)",
                         path, strerror(err));
        if (stats) {
            stats->n_entries = w->n;
            for (int i = 0; i < w->n; i++) {
                stats->raw_bytes += w->e[i].usize;
                stats->data_bytes += w->e[i].count * npz_dtype_size(w->e[i].dtype);
            }
            stats->file_bytes = o->pos;
        }
    }
    if (deflating) deflateEnd(&s->z);
    free(tmp);
    free(o);
    free(s);
    return rc;
}
