/* test_npz.c: the .npz reader and writer (src/io). Round trips of every dtype and of tensors
 * at levels 0..9; hostile files (every truncation, flipped bytes, bad zip structures, bad .npy
 * headers, huge shapes, a zip bomb, limits) that must fail with a message naming the path and
 * the reason, without crashing (ASan in DEBUG=1); failed writes (a missing or read-only folder,
 * injected faults at each step, a real write failure through RLIMIT_FSIZE, a real full disk:
 * a small tmpfs in a private mount namespace, or /dev/full where there is none) that must leave
 * the previous file intact, for root and for other users alike; a writer killed at random
 * moments; and npz_save_params / npz_load_params on a seq2seq model.
 * Hostile files are built here by hand (zip_make, npy_make below), independently of the
 * library's writer. The numpy interop runs elsewhere: tests/io/test_numpy.sh. */
#define _GNU_SOURCE /* setgroups (the read-only folder test) */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "attograd.h"
#include "expect_abort.h"
#include "files.h"
#include "io/npz_internal.h"

/* ---- temporary folders and files ---- */

typedef struct {
    char dir[64];
} TmpDir;

static void td_init_in(TmpDir *t, const char *parent) {
    snprintf(t->dir, sizeof t->dir, "%s/attograd-npz.XXXXXX", parent);
    cr_assert(mkdtemp(t->dir) != NULL, "mkdtemp: %s", strerror(errno));
}
static void td_init(TmpDir *t) { td_init_in(t, "/tmp"); }
static char *td_file(const TmpDir *t, const char *name, char *out) {
    snprintf(out, 256, "%.64s/%.180s", t->dir, name);
    return out;
}
/* the names in the folder, as one string "a b c" (sorted order not guaranteed) and a count */
static int td_count(const TmpDir *t, char *names, size_t cap) {
    DIR *d = opendir(t->dir);
    cr_assert(d != NULL);
    int n = 0;
    if (names) names[0] = '\0';
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        if (names) {
            strncat(names, e->d_name, cap - strlen(names) - 2);
            strcat(names, " ");
        }
    }
    closedir(d);
    return n;
}
static void td_free(TmpDir *t) {
    chmod(t->dir, 0700);
    DIR *d = opendir(t->dir);
    if (d) {
        char p[256];
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%.64s/%.180s", t->dir, e->d_name);
                if (unlink(p) != 0) rmdir(p);
            }
        closedir(d);
    }
    rmdir(t->dir);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    cr_assert(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}
static void spit(const char *path, const void *b, size_t n) {
    FILE *f = fopen(path, "wb");
    cr_assert(f != NULL, "%s: %s", path, strerror(errno));
    cr_assert(fwrite(b, 1, n, f) == n);
    cr_assert(fclose(f) == 0);
}

/* npz_read must fail: code (any failure if 0), *out NULL, a message "path: ..." containing
 * want (if not NULL). */
static void expect_read_fails(const char *path, int code, const char *want) {
    NpzFile *f = (NpzFile *)1;
    int rc = npz_read(path, &f, NULL);
    const char *msg = ag_last_error();
    cr_assert(rc != AG_OK, "%s: read succeeded, expected '%s'", path, want ? want : "a failure");
    if (code)
        cr_assert_eq(rc, code, "%s: code %d (%s), expected %d: %s", path, rc, ag_strerror(rc), code,
                     msg);
    cr_assert(f == NULL, "%s: *out not NULL after a failure", path);
    cr_assert(strncmp(msg, path, strlen(path)) == 0 && msg[strlen(path)] == ':',
              "message does not start with the path: %s", msg);
    if (want) cr_assert(strstr(msg, want) != NULL, "message lacks '%s': %s", want, msg);
}

/* ---- a sample archive whose contents derive from a seed ---- */

typedef struct {
    int64_t which;
    float w[30000];
    double d[40];
    unsigned char text[64];
} Sample;

static void sample_init(Sample *s, int seed) {
    Rng r;
    rng_seed(&r, (uint64_t)seed);
    memset(s, 0, sizeof *s); /* every byte is written, the text's padding included */
    s->which = seed;
    for (size_t i = 0; i < 30000; i++) s->w[i] = (float)rng_normal(&r);
    for (size_t i = 0; i < 40; i++) s->d[i] = rng_normal(&r);
    snprintf((char *)s->text, sizeof s->text, "{\"seed\": %d, \"name\": \"sample\"}", seed);
}
static NpzWriter *sample_writer(const Sample *s) {
    NpzWriter *w = npz_writer_new();
    npz_add_i64(w, "which", 0, NULL, &s->which);
    npz_add_f32(w, "w", 2, (int64_t[]){300, 100}, s->w);
    npz_add_f64(w, "d", 3, (int64_t[]){2, 4, 5}, s->d);
    npz_add_bytes(w, "meta.text", s->text, sizeof s->text);
    return w;
}
static int sample_write(const Sample *s, const char *path, int level) {
    NpzWriter *w = sample_writer(s);
    int rc = npz_write(w, path, level, NULL);
    npz_writer_free(w);
    return rc;
}
/* 1 if f holds exactly s */
static int sample_equal(const NpzFile *f, const Sample *s) {
    const NpzEntry *a = npz_find(f, "which"), *b = npz_find(f, "w"), *c = npz_find(f, "d"),
                   *t = npz_find(f, "meta.text");
    return f->n == 4 && a && a->dtype == NPZ_I64 && a->ndim == 0 &&
           *(const int64_t *)a->data == s->which && b && b->dtype == NPZ_F32 && b->ndim == 2 &&
           b->shape[0] == 300 && b->shape[1] == 100 && memcmp(b->data, s->w, sizeof s->w) == 0 &&
           c && c->dtype == NPZ_F64 && c->ndim == 3 && c->count == 40 &&
           memcmp(c->data, s->d, sizeof s->d) == 0 && t && t->dtype == NPZ_U8 &&
           t->count == sizeof s->text && memcmp(t->data, s->text, sizeof s->text) == 0;
}
static int sample_check(const Sample *s, const char *path) {
    NpzFile *f;
    if (npz_read(path, &f, NULL) != AG_OK) return 0;
    int ok = sample_equal(f, s);
    npz_free(f);
    return ok;
}

/* ---- a hand-made zip builder, independent of src/io ---- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} Buf;

static void bput(Buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void b16(Buf *b, uint32_t v) { bput(b, (unsigned char[]){v & 255, (v >> 8) & 255}, 2); }
static void b32(Buf *b, uint32_t v) {
    b16(b, v & 0xFFFF);
    b16(b, v >> 16);
}

/* An .npy with the given header dict (padded to 64 bytes, as numpy does) and data. */
static void npy_make(Buf *b, const char *dict, const void *data, size_t n) {
    size_t hl = strlen(dict), total = (10 + hl + 1 + 63) / 64 * 64;
    bput(b, "\x93NUMPY\x01\x00", 8);
    b16(b, (uint32_t)(total - 10));
    bput(b, dict, hl);
    for (size_t i = 10 + hl; i + 1 < total; i++) bput(b, " ", 1);
    bput(b, "\n", 1);
    bput(b, data, n);
}

typedef struct {
    const char *name;
    const void *data; /* the uncompressed content */
    size_t len;
    int method;      /* 0: stored; 8: deflated here */
    const void *raw; /* if not NULL: stored as the compressed bytes instead (raw_len) */
    size_t raw_len;
    long long usize; /* declared uncompressed size when >= 0 (default: len) */
    uint16_t flags;
} ZEnt;

typedef struct {
    size_t local[8], central[8], cd_off, end;
} ZipLayout;

static void deflate_raw(const void *src, size_t n, Buf *out) {
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert(deflateInit2(&z, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    unsigned char chunk[4096];
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)n;
    int ret;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof chunk;
        ret = deflate(&z, Z_FINISH);
        bput(out, chunk, sizeof chunk - z.avail_out);
    } while (ret != Z_STREAM_END);
    deflateEnd(&z);
}

/* A complete zip of n entries: local headers with their data, the central directory, the end
 * record. The offsets of each piece go to *lay for tests that patch them afterwards. */
static void zip_make(Buf *b, const ZEnt *e, int n, ZipLayout *lay) {
    Buf comp[8] = {{0}};
    uint32_t crc[8];
    for (int i = 0; i < n; i++) {
        crc[i] = (uint32_t)crc32(0, e[i].data, (uInt)e[i].len);
        if (e[i].raw)
            bput(&comp[i], e[i].raw, e[i].raw_len);
        else if (e[i].method == 8)
            deflate_raw(e[i].data, e[i].len, &comp[i]);
        else
            bput(&comp[i], e[i].data, e[i].len);
    }
    size_t off[8];
    for (int i = 0; i < n; i++) {
        off[i] = b->n;
        if (lay) lay->local[i] = b->n;
        uint32_t us = e[i].usize >= 0 ? (uint32_t)e[i].usize : (uint32_t)e[i].len;
        b32(b, 0x04034b50);
        b16(b, 20);
        b16(b, e[i].flags);
        b16(b, (uint32_t)e[i].method);
        b16(b, 0);
        b16(b, 0x21);
        b32(b, crc[i]);
        b32(b, (uint32_t)comp[i].n);
        b32(b, us);
        b16(b, (uint32_t)strlen(e[i].name));
        b16(b, 0);
        bput(b, e[i].name, strlen(e[i].name));
        bput(b, comp[i].p, comp[i].n);
    }
    size_t cd = b->n;
    for (int i = 0; i < n; i++) {
        if (lay) lay->central[i] = b->n;
        uint32_t us = e[i].usize >= 0 ? (uint32_t)e[i].usize : (uint32_t)e[i].len;
        b32(b, 0x02014b50);
        b16(b, 20);
        b16(b, 20);
        b16(b, e[i].flags);
        b16(b, (uint32_t)e[i].method);
        b16(b, 0);
        b16(b, 0x21);
        b32(b, crc[i]);
        b32(b, (uint32_t)comp[i].n);
        b32(b, us);
        b16(b, (uint32_t)strlen(e[i].name));
        b16(b, 0);
        b16(b, 0);
        b16(b, 0);
        b16(b, 0);
        b32(b, 0);
        b32(b, (uint32_t)off[i]);
        bput(b, e[i].name, strlen(e[i].name));
        free(comp[i].p);
    }
    if (lay) {
        lay->cd_off = cd;
        lay->end = b->n;
    }
    b32(b, 0x06054b50);
    b16(b, 0);
    b16(b, 0);
    b16(b, (uint32_t)n);
    b16(b, (uint32_t)n);
    b32(b, (uint32_t)(b->n - 12 - cd));
    b32(b, (uint32_t)cd);
    b16(b, 0);
}

static void set32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* one .npy entry "x.npy" with the given dict and data, stored, in file name of t */
static void write_one_npy(const TmpDir *t, const char *file, const char *dict, const void *data,
                          size_t n, char *path) {
    Buf npy = {0}, z = {0};
    npy_make(&npy, dict, data, n);
    zip_make(&z, &(ZEnt){"x.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}, 1, NULL);
    spit(td_file(t, file, path), z.p, z.n);
    free(npy.p);
    free(z.p);
}

/* ======================= round trips ======================= */

static void fill_tensor(Tensor *t, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    rng_fill_normal(&r, t, 0, 1);
}

Test(npz_roundtrip, real_tensors_of_every_rank_at_every_level_are_bit_exact) {
    static const int shapes[][5] = {{0},          {1, 1},          {1, 7},      {2, 3, 5},
                                    {3, 2, 3, 4}, {4, 2, 3, 4, 5}, {2, 64, 300}};
    TmpDir td;
    td_init(&td);
    Arena *a = arena_new("npz", 8 << 20);
    char path[256];
    td_file(&td, "t.npz", path);
    for (int level = 0; level <= 9; level += 3) {
        NpzWriter *w = npz_writer_new();
        Tensor *ts[7];
        for (int k = 0; k < 7; k++) {
            ts[k] = tensor_new(a, shapes[k][0], shapes[k] + 1, "t");
            fill_tensor(ts[k], 100 + (uint64_t)k);
            char name[32];
            snprintf(name, sizeof name, "t%d", k);
            npz_add_real(w, name, ts[k]);
        }
        NpzStats st;
        cr_assert_eq(npz_write(w, path, level, &st), AG_OK, "%s", ag_last_error());
        npz_writer_free(w);
        NpzFile *f;
        cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
        cr_assert_eq(f->n, 7);
        for (int k = 0; k < 7; k++) {
            char name[32];
            snprintf(name, sizeof name, "t%d", k);
            const NpzEntry *e = npz_find(f, name);
            cr_assert(e != NULL, "level %d: %s missing", level, name);
            cr_assert_eq(e->dtype, NPZ_REAL);
            cr_assert_eq(e->ndim, ts[k]->ndim);
            for (int d = 0; d < e->ndim; d++) cr_assert_eq(e->shape[d], ts[k]->shape[d]);
            cr_assert_eq(e->count, ts[k]->size);
            cr_assert(memcmp(e->data, ts[k]->data, ts[k]->size * sizeof(Real)) == 0,
                      "level %d: %s differs", level, name);
            Tensor *back = tensor_zeros(a, ts[k]->ndim, ts[k]->shape, "back");
            int conv = -1;
            cr_assert_eq(npz_entry_to_tensor(f, e, back, &conv), AG_OK, "%s", ag_last_error());
            cr_assert_eq(conv, 0);
            cr_assert(memcmp(back->data, ts[k]->data, ts[k]->size * sizeof(Real)) == 0);
        }
        cr_assert_eq(f->data_bytes, st.data_bytes);
        cr_assert_eq(f->file_bytes, st.file_bytes);
        npz_free(f);
        arena_reset(a);
    }
    arena_free(a);
    td_free(&td);
}

Test(npz_roundtrip, floats_convert_between_float32_and_float64) {
    TmpDir td;
    td_init(&td);
    Arena *a = arena_new("npz", 1 << 20);
    Tensor *x = tensor_new2(a, 5, 7, "x");
    fill_tensor(x, 5);
    char path[256];
    td_file(&td, "c.npz", path);
    NpzWriter *w = npz_writer_new();
    npz_add_real_as(w, "as_f32", x, NPZ_F32);
    npz_add_real_as(w, "as_f64", x, NPZ_F64);
    cr_assert_eq(npz_write(w, path, 6, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e32 = npz_find(f, "as_f32"), *e64 = npz_find(f, "as_f64.npy");
    cr_assert(e32 && e64);
    cr_assert_eq(e32->dtype, NPZ_F32);
    cr_assert_eq(e64->dtype, NPZ_F64);
    for (size_t i = 0; i < x->size; i++) {
        cr_assert_eq(((const float *)e32->data)[i], (float)x->data[i]);
        cr_assert_eq(((const double *)e64->data)[i], (double)x->data[i]);
    }
    Tensor *y = tensor_zeros(a, 2, (int[]){5, 7}, "y");
    int conv;
    /* the other type than Real converts and says so; float -> double -> float is exact */
    const NpzEntry *other = NPZ_REAL == NPZ_F32 ? e64 : e32;
    cr_assert_eq(npz_entry_to_tensor(f, other, y, &conv), AG_OK);
    cr_assert_eq(conv, 1);
    for (size_t i = 0; i < x->size; i++) cr_assert_eq(y->data[i], (Real)(float)x->data[i]);
    /* a tensor of another shape: an error naming both shapes, the tensor left alone */
    Tensor *z = tensor_zeros(a, 2, (int[]){7, 5}, "z");
    cr_assert_eq(npz_entry_to_tensor(f, e32, z, NULL), AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "shape (5,7) in the file, (7,5) in the model"), "%s",
              ag_last_error());
    for (size_t i = 0; i < z->size; i++) cr_assert_eq(z->data[i], 0);
    npz_free(f);
    arena_free(a);
    td_free(&td);
}

Test(npz_roundtrip, integers_bytes_scalars_and_empty_arrays) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "i.npz", path);
    static const int64_t i64[5] = {INT64_MIN, -1, 0, 1, INT64_MAX};
    static const uint64_t u64[4] = {0x9e3779b97f4a7c15ull, 1, UINT64_MAX, 0};
    static const int32_t i32[6] = {INT32_MIN, -2, 0, 3, 4, INT32_MAX};
    static const char bytes[] = "vocab\0with NUL\xff and \xc3\xa9 UTF-8";
    static const int64_t step = 123456789012345;
    for (int level = 0; level <= 6; level += 6) {
        NpzWriter *w = npz_writer_new();
        npz_add_i64(w, "i64", 1, (int64_t[]){5}, i64);
        npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, u64);
        npz_add_i32(w, "i32", 2, (int64_t[]){2, 3}, i32);
        npz_add_bytes(w, "vocab", bytes, sizeof bytes);
        npz_add_bytes(w, "no_bytes", NULL, 0);
        npz_add_i64(w, "train.step", 0, NULL, &step);
        npz_add_f64(w, "empty", 3, (int64_t[]){2, 0, 4}, NULL);
        cr_assert_eq(npz_write(w, path, level, NULL), AG_OK, "%s", ag_last_error());
        npz_writer_free(w);
        NpzFile *f;
        cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
        const NpzEntry *e = npz_find(f, "i64");
        cr_assert(e && e->dtype == NPZ_I64 && e->count == 5 && !memcmp(e->data, i64, sizeof i64));
        e = npz_find(f, "rng.state");
        cr_assert(e && e->dtype == NPZ_U64 && e->count == 4 && !memcmp(e->data, u64, sizeof u64));
        e = npz_find(f, "i32");
        cr_assert(e && e->dtype == NPZ_I32 && e->ndim == 2 && !memcmp(e->data, i32, sizeof i32));
        e = npz_find(f, "vocab");
        cr_assert(e && e->dtype == NPZ_U8 && e->count == sizeof bytes &&
                  !memcmp(e->data, bytes, sizeof bytes));
        e = npz_find(f, "no_bytes");
        cr_assert(e && e->dtype == NPZ_U8 && e->ndim == 1 && e->count == 0);
        e = npz_find(f, "train.step");
        cr_assert(e && e->ndim == 0 && e->count == 1 && *(const int64_t *)e->data == step);
        e = npz_find(f, "empty");
        cr_assert(e && e->ndim == 3 && e->shape[1] == 0 && e->count == 0 && e->nbytes == 0);
        cr_assert(npz_find(f, "missing") == NULL);
        npz_free(f);
    }
    td_free(&td);
}

Test(npz_roundtrip, stats_give_raw_and_file_sizes_and_deflate_shrinks_zeros) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "s.npz", path);
    static float zeros[100000];
    NpzStats st[2];
    for (int k = 0; k < 2; k++) {
        NpzWriter *w = npz_writer_new();
        npz_add_f32(w, "zeros", 2, (int64_t[]){1000, 100}, zeros);
        npz_add_f32(w, "one", 0, NULL, zeros);
        cr_assert_eq(npz_write(w, path, k ? 6 : 0, &st[k]), AG_OK);
        npz_writer_free(w);
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        cr_assert_eq((size_t)sb.st_size, st[k].file_bytes);
        cr_assert_eq(st[k].n_entries, 2);
        cr_assert_eq(st[k].data_bytes, 400004);
        cr_assert_eq(st[k].raw_bytes, 400004 + 2 * 128); /* each .npy header is 128 bytes */
    }
    cr_assert_gt(st[0].file_bytes, st[0].raw_bytes); /* stored: the zip adds its headers */
    cr_assert_lt(st[1].file_bytes, st[0].raw_bytes / 100);
    cr_log_info("100000 zeros: raw %zu bytes, stored %zu, deflated %zu", st[0].raw_bytes,
                st[0].file_bytes, st[1].file_bytes);
    td_free(&td);
}

Test(npz_roundtrip, files_are_byte_for_byte_deterministic) {
    TmpDir td;
    td_init(&td);
    char p1[256], p2[256];
    Sample s;
    sample_init(&s, 3);
    cr_assert_eq(sample_write(&s, td_file(&td, "1.npz", p1), 6), AG_OK);
    cr_assert_eq(sample_write(&s, td_file(&td, "2.npz", p2), 6), AG_OK);
    size_t n1, n2;
    unsigned char *a = slurp(p1, &n1), *b = slurp(p2, &n2);
    cr_assert(n1 == n2 && memcmp(a, b, n1) == 0);
    free(a);
    free(b);
    td_free(&td);
}

Test(npz_roundtrip, forced_zip64_records_read_back) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "z.npz", path);
    Sample s;
    sample_init(&s, 4);
    for (int level = 0; level <= 6; level += 6) {
        NpzWriter *w = sample_writer(&s);
        npz_writer_force_zip64(w, 1);
        cr_assert_eq(npz_write(w, path, level, NULL), AG_OK);
        npz_writer_free(w);
        size_t n;
        unsigned char *b = slurp(path, &n);
        /* the first local header's sizes point to its ZIP64 extra; a ZIP64 end record and
         * its locator sit before the end record, whose fields all say "see ZIP64" */
        cr_assert_eq(get32(b + 18), 0xFFFFFFFFu);
        cr_assert_eq(get32(b + 22), 0xFFFFFFFFu);
        cr_assert_eq(get32(b + n - 22 - 20), ZIP64_LOC_SIG);
        cr_assert_eq(get32(b + n - 22 - 20 - 56), ZIP64_END_SIG);
        cr_assert_eq(get16(b + n - 22 + 10), 0xFFFF);
        free(b);
        cr_assert(sample_check(&s, path), "level %d: %s", level, ag_last_error());
    }
    td_free(&td);
}

Test(npz_roundtrip, an_archive_without_entries) {
    TmpDir td;
    td_init(&td);
    char path[256];
    NpzWriter *w = npz_writer_new();
    NpzStats st;
    cr_assert_eq(npz_write(w, td_file(&td, "e.npz", path), 6, &st), AG_OK);
    npz_writer_free(w);
    cr_assert_eq(st.file_bytes, 22); /* just the end record */
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(f->n, 0);
    npz_free(f);
    td_free(&td);
}

/* ---- misuse of the writer aborts ---- */

static void add_twice(void *ctx) {
    (void)ctx;
    NpzWriter *w = npz_writer_new();
    static const double x = 1;
    npz_add_f64(w, "lr", 0, NULL, &x);
    npz_add_f64(w, "lr", 0, NULL, &x);
}
static void add_negative(void *ctx) {
    (void)ctx;
    npz_add_f32(npz_writer_new(), "w", 2, (int64_t[]){3, -1}, (const float[3]){0});
}
static void add_null_data(void *ctx) {
    (void)ctx;
    npz_add_i64(npz_writer_new(), "steps", 1, (int64_t[]){2}, NULL);
}

Test(npz_write, misuse_aborts_naming_the_entry) {
    struct {
        void (*fn)(void *);
        const char *want;
    } cases[] = {{add_twice, "npz_add_f64: an entry named 'lr' was already added"},
                 {add_negative, "npz_add_f32: 'w' dim 1 is -1"},
                 {add_null_data, "npz_add_i64: 'steps' has 2 elements and NULL data"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Capture c;
        capture_run(cases[i].fn, NULL, &c);
        cr_assert(capture_aborted(&c), "case %zu: did not abort: %s", i, c.err);
        cr_assert(capture_has(&c, cases[i].want), "case %zu: %s", i, c.err);
    }
}

Test(npz_write, a_bad_level_is_an_argument_error) {
    NpzWriter *w = npz_writer_new();
    cr_assert_eq(npz_write(w, "/tmp/never-written.npz", 10, NULL), AG_ERR_ARG);
    cr_assert(strstr(ag_last_error(), "/tmp/never-written.npz: compression level 10"));
    npz_writer_free(w);
}

/* ======================= hostile files ======================= */

/* A small valid archive: two entries, stored or deflated, optionally with ZIP64 records. */
static unsigned char *small_archive(const TmpDir *td, int level, int zip64, size_t *n,
                                    NpzFile **ref) {
    char path[256];
    td_file(td, "ref.npz", path);
    static const float w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    static const int64_t step = 77;
    NpzWriter *wr = npz_writer_new();
    npz_writer_force_zip64(wr, zip64);
    npz_add_f32(wr, "w", 2, (int64_t[]){3, 4}, w);
    npz_add_i64(wr, "step", 0, NULL, &step);
    cr_assert_eq(npz_write(wr, path, level, NULL), AG_OK);
    npz_writer_free(wr);
    cr_assert_eq(npz_read(path, ref, NULL), AG_OK);
    unsigned char *b = slurp(path, n);
    unlink(path);
    return b;
}

static int same_contents(const NpzFile *a, const NpzFile *b) {
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const NpzEntry *x = &a->entries[i], *y = &b->entries[i];
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim ||
            x->nbytes != y->nbytes || memcmp(x->shape, y->shape, sizeof x->shape) ||
            memcmp(x->data, y->data, x->nbytes))
            return 0;
    }
    return 1;
}

Test(npz_hostile, every_truncation_fails_with_the_path) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "cut.npz", path);
    for (int variant = 0; variant < 3; variant++) {
        size_t n;
        NpzFile *ref;
        unsigned char *b = small_archive(&td, variant == 0 ? 0 : 6, variant == 2, &n, &ref);
        for (size_t cut = 0; cut < n; cut++) {
            spit(path, b, cut);
            expect_read_fails(path, 0, NULL);
            int rc = npz_read(path, &(NpzFile *){NULL}, NULL);
            cr_assert(rc == AG_ERR_FORMAT || rc == AG_ERR_IO, "cut %zu: code %d", cut, rc);
        }
        spit(path, b, n);
        NpzFile *f;
        cr_assert_eq(npz_read(path, &f, NULL), AG_OK);
        cr_assert(same_contents(f, ref));
        npz_free(f);
        npz_free(ref);
        free(b);
    }
    td_free(&td);
}

Test(npz_hostile, flipped_bytes_fail_or_read_the_same_arrays) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "flip.npz", path);
    static const unsigned char masks[] = {0x01, 0x80, 0xFF};
    for (int variant = 0; variant < 3; variant++) {
        size_t n, failed = 0, tried = 0;
        NpzFile *ref;
        unsigned char *b = small_archive(&td, variant == 0 ? 0 : 6, variant == 2, &n, &ref);
        for (size_t pos = 0; pos < n; pos++)
            for (size_t m = 0; m < sizeof masks; m++) {
                b[pos] ^= masks[m];
                spit(path, b, n);
                b[pos] ^= masks[m];
                NpzFile *f;
                int rc = npz_read(path, &f, NULL);
                tried++;
                if (rc == AG_OK) {
                    /* only fields the reader does not need may change: never the arrays */
                    cr_assert(same_contents(f, ref),
                              "variant %d: byte %zu ^ 0x%02x read "
                              "different arrays",
                              variant, pos, masks[m]);
                    npz_free(f);
                } else {
                    failed++;
                    const char *msg = ag_last_error();
                    cr_assert(strncmp(msg, path, strlen(path)) == 0, "%s", msg);
                }
            }
        cr_log_info("variant %d: %zu of %zu flips rejected", variant, failed, tried);
        cr_assert_gt(failed * 4, tried * 3, "only %zu of %zu flips were caught", failed, tried);
        npz_free(ref);
        free(b);
    }
    td_free(&td);
}

Test(npz_hostile, not_a_zip_empty_a_folder_missing_a_fifo_a_lone_npy) {
    TmpDir td;
    td_init(&td);
    char path[256];
    spit(td_file(&td, "text.npz", path), "hello, this is not a zip archive at all\n", 40);
    expect_read_fails(path, AG_ERR_FORMAT, "not a zip archive");
    spit(td_file(&td, "empty.npz", path), "", 0);
    expect_read_fails(path, AG_ERR_FORMAT, "empty file");
    spit(td_file(&td, "tiny.npz", path), "PK", 2);
    expect_read_fails(path, AG_ERR_FORMAT, "not a zip archive");
    expect_read_fails(td.dir, AG_ERR_IO, "not a regular file (a folder)");
    expect_read_fails(td_file(&td, "missing.npz", path), AG_ERR_IO, strerror(ENOENT));
    cr_assert_eq(mkfifo(td_file(&td, "fifo.npz", path), 0600), 0);
    expect_read_fails(path, AG_ERR_IO, "not a regular file"); /* and does not wait for a writer */
    Buf npy = {0};
    npy_make(&npy, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "\0\0\0\0\0\0\0\0",
             8);
    spit(td_file(&td, "lone.npy", path), npy.p, npy.n);
    expect_read_fails(path, AG_ERR_FORMAT, "a single .npy array, not an .npz");
    free(npy.p);
    td_free(&td);
}

Test(npz_hostile, bad_npy_headers_are_rejected_with_the_reason) {
    struct {
        const char *dict, *want;
        size_t data;
    } cases[] = {
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,), }",
         "shape (1000000000000) of '<f8' is 8000000000000 bytes, but the entry holds 16 bytes", 16},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 8), }",
         "more elements than memory can hold", 16},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (10,), }",
         "is 80 bytes, but the entry holds 64 bytes", 64},
        {"{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }",
         "dtype '<c16' is not supported", 16},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }",
         "dtype '>f4' is not supported", 16},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }",
         "'descr' is not a dtype string", 16},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", "fortran_order is True", 16},
        {"{'descr': '<f4', 'shape': (4,), }", "lacks 'fortran_order'", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1, }",
         "unexpected or repeated key 'extra'", 16},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
         "repeated key 'descr'", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", "lacks the comma", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", "not a non-negative", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
         "a dimension too large", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,4), }",
         "more dims than", 16},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4,), } junk", "stray bytes", 16},
        {"['descr', '<f4']", "not a dict", 16},
    };
    TmpDir td;
    td_init(&td);
    char path[256];
    unsigned char data[64] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_one_npy(&td, "h.npz", cases[i].dict, data, cases[i].data, path);
        expect_read_fails(path, AG_ERR_FORMAT, cases[i].want);
        cr_assert(strstr(ag_last_error(), "entry 'x.npy'"), "%s", ag_last_error());
    }
    /* the preamble: magic, version, header length */
    Buf npy = {0}, z = {0};
    npy_make(&npy, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", data, 4);
    const struct {
        size_t at;
        unsigned char v;
        const char *want;
    } pre[] = {{0, 0x92, "no \\x93NUMPY magic"},
               {6, 4, ".npy version 4.0"},
               {7, 1, ".npy version 1.1"},
               {9, 0x7f, "runs past the end of the entry"}};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        unsigned char old = npy.p[pre[i].at];
        npy.p[pre[i].at] = pre[i].v;
        z.n = 0;
        zip_make(&z, &(ZEnt){"x.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}, 1, NULL);
        spit(td_file(&td, "p.npz", path), z.p, z.n);
        expect_read_fails(path, AG_ERR_FORMAT, pre[i].want);
        npy.p[pre[i].at] = old;
    }
    free(npy.p);
    free(z.p);
    td_free(&td);
}

Test(npz_hostile, zip_structure_errors_are_named) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Buf npy = {0};
    npy_make(&npy, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", "\1\2\3\4\5\6\7\10",
             8);
    ZipLayout lay;
    Buf z = {0};
    /* a valid two-entry archive first, so that every failure below is the change made */
    ZEnt two[2] = {{"a.npy", npy.p, npy.n, 8, NULL, 0, -1, 0},
                   {"b.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}};
    zip_make(&z, two, 2, &lay);
    spit(td_file(&td, "ok.npz", path), z.p, z.n);
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(f->n, 2);
    npz_free(f);

    struct {
        ZEnt e[2];
        int n;
        const char *want;
    } cases[] = {
        {{{"a.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}, {"a.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}},
         2,
         "entry 'a.npy': the name appears twice"},
        {{{"a.txt", npy.p, npy.n, 0, NULL, 0, -1, 0}}, 1, "the name does not end in .npy"},
        {{{"a.npy", npy.p, npy.n, 0, NULL, 0, -1, 1}}, 1, "encrypted entries are not supported"},
        {{{"a.npy", npy.p, npy.n, 12, npy.p, npy.n, -1, 0}}, 1, "compression method 12"},
        {{{"a.npy", npy.p, npy.n, 0, NULL, 0, (long long)npy.n + 1, 0}},
         1,
         "stored, but its sizes differ"},
        {{{"a.npy", npy.p, npy.n, 8, NULL, 0, (long long)npy.n + 100, 0}},
         1,
         "inflates to 136 bytes, it declares 236"},
        {{{"a.npy", npy.p, npy.n, 8, "\x03\x00", 2, -1, 0}}, 1, "inflates to 0 bytes"},
        {{{"a.npy", npy.p, npy.n, 8, "\xff\xff\xff\xff", 4, -1, 0}}, 1, "corrupt deflate data"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        z.n = 0;
        zip_make(&z, cases[i].e, cases[i].n, NULL);
        spit(td_file(&td, "bad.npz", path), z.p, z.n);
        expect_read_fails(path, AG_ERR_FORMAT, cases[i].want);
    }

    /* patches of the valid archive */
    struct {
        size_t at;
        uint32_t v;
        int width;
        const char *want;
    } patches[] = {
        {lay.central[1] + 42, (uint32_t)lay.cd_off + 5, 4, "is not before the central directory"},
        {lay.central[1] + 42, (uint32_t)lay.local[0], 4, "names another entry"},
        {lay.central[0] + 16, 0x12345678, 4, "CRC-32 0x"},
        {lay.local[1] + 14, 0x12345678, 4, "CRC-32 0x12345678 in the local header"},
        {lay.local[0] + 8, 0, 2, "compression method 0 in the local header, 8 in the central"},
        {lay.local[1] + 22, 7, 4, "sizes 7 ("},
        {lay.local[0], 0x04034b51, 4, "no local header at offset 0"},
        {lay.central[1], 0x02014b51, 4, "central directory header 1"},
        {lay.end + 8, 0x00030003, 4, "3 entries cannot fit"},
        {lay.end + 16, (uint32_t)lay.cd_off - 1, 4, "does not end where the end record starts"},
        {lay.end + 4, 1, 2, "multi-disk"},
        {lay.central[0] + 34, 2, 2, "multi-disk"},
        {lay.central[0] + 30, 9, 2, "malformed extra field"},
        {lay.central[1] + 30, 0xFFF0, 2, "runs past the end of the directory"},
        {lay.central[1] + 24, 0xFFFFFFFF, 4, "ZIP64 extra field is missing"},
    };
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        z.n = 0;
        zip_make(&z, two, 2, &lay);
        if (patches[i].width == 4)
            set32(z.p + patches[i].at, patches[i].v);
        else
            put16(z.p + patches[i].at, patches[i].v);
        spit(td_file(&td, "patched.npz", path), z.p, z.n);
        expect_read_fails(path, AG_ERR_FORMAT, patches[i].want);
    }

    /* overlapping entries: b's local header and data sit inside a's stored data */
    Buf inner = {0}, outer = {0};
    zip_make(&inner, &(ZEnt){"b.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}, 1, &lay);
    size_t b_len = lay.cd_off; /* b's local header and data */
    ZEnt a = {"a.npy", inner.p, b_len, 0, NULL, 0, -1, 0};
    zip_make(&outer, (ZEnt[]){a, {"b.npy", npy.p, npy.n, 0, NULL, 0, -1, 0}}, 2, &lay);
    set32(outer.p + lay.central[1] + 42, (uint32_t)(lay.local[0] + 30 + 5));
    spit(td_file(&td, "overlap.npz", path), outer.p, outer.n);
    expect_read_fails(path, AG_ERR_FORMAT, "entry 'a.npy': overlaps entry 'b.npy'");
    free(inner.p);
    free(outer.p);
    free(z.p);
    free(npy.p);
    td_free(&td);
}

Test(npz_hostile, hostile_names_are_shown_cut_and_printable) {
    TmpDir td;
    td_init(&td);
    char path[256], name[300];
    memset(name, 'n', 200);
    name[3] = '\x01';
    strcpy(name + 200, ".npy");
    Buf npy = {0}, z = {0};
    npy_make(&npy, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd", 4);
    zip_make(&z, &(ZEnt){name, npy.p, npy.n, 0, NULL, 0, -1, 0}, 1, NULL);
    spit(td_file(&td, "names.npz", path), z.p, z.n);
    expect_read_fails(path, AG_ERR_FORMAT, "entry 'nnn?nnnn");
    cr_assert(strstr(ag_last_error(), "nnn...': .npy header: fortran_order is True"), "%s",
              ag_last_error());
    free(npy.p);
    free(z.p);
    td_free(&td);
}

/* 64 MiB of zeros, deflated (about 64 KiB) */
static void bomb_stream(Buf *out) {
    static unsigned char zeros[1 << 20];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    cr_assert(deflateInit2(&zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    unsigned char chunk[1 << 16];
    for (int i = 0; i < 64; i++) {
        zs.next_in = zeros;
        zs.avail_in = sizeof zeros;
        int ret;
        do {
            zs.next_out = chunk;
            zs.avail_out = sizeof chunk;
            ret = deflate(&zs, i == 63 ? Z_FINISH : Z_NO_FLUSH);
            bput(out, chunk, sizeof chunk - zs.avail_out);
        } while (zs.avail_out == 0 || (i == 63 && ret != Z_STREAM_END));
    }
    deflateEnd(&zs);
}

Test(npz_hostile, a_zip_bomb_stops_at_its_declared_size) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Buf bomb = {0}, z = {0};
    bomb_stream(&bomb);
    cr_assert_lt(bomb.n, 1 << 18);
    /* a valid .npy header in front, so that only the size gives it away */
    Buf npy = {0};
    static const unsigned char zeros[896];
    npy_make(&npy, "{'descr': '|u1', 'fortran_order': False, 'shape': (896,), }", zeros, 896);
    cr_assert_eq(npy.n, 1024);
    zip_make(&z, &(ZEnt){"bomb.npy", npy.p, 1024, 8, bomb.p, bomb.n, 1024, 0}, 1, NULL);
    spit(td_file(&td, "bomb.npz", path), z.p, z.n);
    /* in a child, to measure its peak memory: it must not grow by the 64 MiB */
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        NpzFile *f;
        int rc = npz_read(path, &f, NULL);
        getrusage(RUSAGE_SELF, &after);
        long grew_kb = after.ru_maxrss - before.ru_maxrss;
        int ok = rc == AG_ERR_FORMAT &&
                 strstr(ag_last_error(), "inflates to more than the 1024 bytes it declares");
        if (!ok || grew_kb > 16 * 1024)
            fprintf(stderr, "bomb: rc %d, peak memory grew by %ld KiB: %s\n", rc, grew_kb,
                    ag_last_error());
        _exit(ok && grew_kb <= 16 * 1024 ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the bomb was not stopped cheaply");
    expect_read_fails(path, AG_ERR_FORMAT, "entry 'bomb.npy': inflates to more than the 1024");

    /* the same stream, declared honestly: over a limit of 1 MiB before any inflating */
    z.n = 0;
    zip_make(&z, &(ZEnt){"bomb.npy", npy.p, 1024, 8, bomb.p, bomb.n, 64 << 20, 0}, 1, NULL);
    spit(path, z.p, z.n);
    NpzLimits lim = {1 << 20, 10};
    NpzFile *f = NULL;
    cr_assert_eq(npz_read(path, &f, &lim), AG_ERR_NOMEM);
    cr_assert(strstr(ag_last_error(), "declares 67108864 bytes; with the rest of the file that is "
                                      "over the limit of 1048576 bytes"),
              "%s", ag_last_error());
    free(npy.p);
    free(bomb.p);
    free(z.p);
    td_free(&td);
}

Test(npz_hostile, limits_bound_the_bytes_and_the_entries) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Sample s;
    sample_init(&s, 9);
    cr_assert_eq(sample_write(&s, td_file(&td, "l.npz", path), 6), AG_OK);
    NpzFile *f = NULL;
    NpzLimits lim = {12000, 100};
    cr_assert_eq(npz_read(path, &f, &lim), AG_ERR_NOMEM);
    cr_assert(strstr(ag_last_error(), "over the limit of 12000 bytes (NpzLimits.max_bytes)"), "%s",
              ag_last_error());
    lim = (NpzLimits){1 << 20, 3};
    cr_assert_eq(npz_read(path, &f, &lim), AG_ERR_NOMEM);
    cr_assert(strstr(ag_last_error(), "4 entries, over the limit of 3"), "%s", ag_last_error());
    lim = (NpzLimits){130000, 4};
    cr_assert_eq(npz_read(path, &f, &lim), AG_OK, "%s", ag_last_error());
    cr_assert(sample_equal(f, &s));
    npz_free(f);
    td_free(&td);
}

/* Deflate cannot do better than 1032 to 1: an entry that declares more than that from its
 * compressed size is refused from the directory alone, before a buffer of the declared size
 * exists, so a file of a few bytes cannot make the reader allocate a gigabyte. */
Test(npz_hostile, a_size_deflate_cannot_produce_is_refused_before_allocating) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Buf npy = {0}, z = {0}, stream = {0};
    static const unsigned char zeros[4096];
    npy_make(&npy, "{'descr': '|u1', 'fortran_order': False, 'shape': (4096,), }", zeros, 4096);
    deflate_raw(npy.p, npy.n, &stream);
    long long most = 1032 * (long long)stream.n;
    cr_assert_lt((long long)npy.n, most);
    /* one byte over what the stream could ever give */
    zip_make(&z, &(ZEnt){"x.npy", npy.p, npy.n, 8, NULL, 0, most + 1, 0}, 1, NULL);
    spit(td_file(&td, "ratio.npz", path), z.p, z.n);
    expect_read_fails(path, AG_ERR_FORMAT, "more than deflate can produce (1032 to 1)");
    cr_assert(strstr(ag_last_error(), "entry 'x.npy'"), "%s", ag_last_error());
    /* a gigabyte declared by a file of about a hundred bytes: the same, whatever the limit */
    z.n = 0;
    zip_make(&z, &(ZEnt){"x.npy", npy.p, npy.n, 8, "\x03\x00", 2, 1 << 30, 0}, 1, NULL);
    cr_assert_lt(z.n, 200);
    spit(path, z.p, z.n);
    NpzLimits big = {(size_t)1 << 40, 10};
    NpzFile *f = NULL;
    cr_assert_eq(npz_read(path, &f, &big), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "declares 1073741824 bytes from 2 compressed bytes"), "%s",
              ag_last_error());
    /* exactly the bound is allowed past the directory: then the data tell (it inflates short) */
    z.n = 0;
    zip_make(&z, &(ZEnt){"x.npy", npy.p, npy.n, 8, NULL, 0, most, 0}, 1, NULL);
    spit(path, z.p, z.n);
    expect_read_fails(path, AG_ERR_FORMAT, "it declares");
    /* and a real stream at zlib's best level stays under the bound: 64 MiB of zeros */
    Buf bomb = {0};
    bomb_stream(&bomb);
    cr_assert_geq(1032 * (long long)bomb.n, 64LL << 20, "zlib beat 1032:1 (%zu bytes)", bomb.n);
    free(bomb.p);
    free(stream.p);
    free(npy.p);
    free(z.p);
    td_free(&td);
}

/* ======================= failed writes ======================= */

Test(npz_write, a_missing_folder_fails_naming_the_path) {
    const char *path = "/tmp/attograd-no-such-folder/sub/model.npz";
    Sample s;
    sample_init(&s, 1);
    cr_assert_eq(sample_write(&s, path, 6), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), path) == ag_last_error(), "%s", ag_last_error());
    cr_assert(strstr(ag_last_error(), strerror(ENOENT)), "%s", ag_last_error());
}

/* Runs fn(dir, note) in a child; note (256 bytes) comes back to the caller: what the child
 * did, or why it could not. Returns the child's exit code: 0 passed, 77 the condition cannot be
 * produced here (note says why), else failed. */
typedef int (*ChildFn)(const char *dir, char *note);
static int in_child(ChildFn fn, const char *dir, char note[256]) {
    int p[2];
    cr_assert_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char msg[256] = "";
        close(p[0]);
        int rc = fn(dir, msg);
        ssize_t len = (ssize_t)strlen(msg);
        if (write(p[1], msg, (size_t)len) != len) rc = 3;
        _exit(rc);
    }
    close(p[1]);
    size_t got = 0;
    for (ssize_t k; got < 255 && (k = read(p[0], note + got, 255 - got)) > 0;) got += (size_t)k;
    note[got] = 0;
    close(p[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A folder no file can be created in, with the error the writer must report: as another user,
 * chmod 0555 (EACCES). Root writes through chmod, so as root a read-only tmpfs in a private
 * mount namespace (EROFS), or where there is none, the child drops to user and group 65534
 * (nobody) with the folder at 0555 (EACCES). */
static int read_only_child(const char *dir, char *note) {
    char path[256], want[64], why[200];
    snprintf(path, sizeof path, "%s/model.npz", dir);
    snprintf(want, sizeof want, "%s", strerror(EACCES));
    if (geteuid() != 0) {
        if (chmod(dir, 0555) != 0) return 2;
        snprintf(note, 256, "chmod 0555");
    } else if (ts_private_mounts(why, sizeof why) == 0 &&
               ts_mount_tmpfs(dir, "64k", 1, why, sizeof why) == 0) {
        snprintf(want, sizeof want, "%s", strerror(EROFS));
        snprintf(note, 256, "a read-only tmpfs");
    } else {
        if (chmod(dir, 0555) != 0) return 2;
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
            snprintf(note, 256, "root, %s, and cannot drop to user 65534: %s", why,
                     strerror(errno));
            return 77;
        }
        snprintf(note, 256, "user 65534 and chmod 0555");
    }
    Sample s;
    sample_init(&s, 1);
    int rc = sample_write(&s, path, 6);
    const char *msg = ag_last_error();
    int ok = rc == AG_ERR_IO && strncmp(msg, path, strlen(path)) == 0 && strstr(msg, want);
    if (!ok) {
        char how[64];
        snprintf(how, sizeof how, "%s", note);
        snprintf(note, 256, "%.40s: rc %d: %.120s (wanted '%.40s')", how, rc, msg, want);
    }
    return ok ? 0 : 1;
}

Test(npz_write, a_read_only_folder_fails_naming_the_path) {
    TmpDir td;
    td_init(&td);
    char note[256];
    int r = in_child(read_only_child, td.dir, note);
    td_free(&td);
    if (r == 77) cr_skip_test("read-only folder: SKIPPED: %s", note);
    cr_assert_eq(r, 0, "read-only folder (%s)", note);
    cr_log_info("read-only folder: %s", note);
}

/* Pre-creates A at path, then writes B with a fault at `where`; checks the code, the message,
 * that A is still there byte for byte and that no temporary file is left. */
static void fault_case(NpzFault where, int err, uint64_t after, const char *what) {
    TmpDir td;
    td_init(&td);
    char path[256], names[512];
    td_file(&td, "model.npz", path);
    Sample a, b;
    sample_init(&a, 1);
    sample_init(&b, 2);
    cr_assert_eq(sample_write(&a, path, 0), AG_OK);
    size_t n0, n1;
    unsigned char *before = slurp(path, &n0);
    npz_test_set_fault(where, err, after);
    int rc = sample_write(&b, path, 0);
    npz_test_set_fault(NPZ_FAULT_NONE, 0, 0);
    const char *msg = ag_last_error();
    cr_assert_eq(rc, AG_ERR_IO, "%s: code %d: %s", what, rc, msg);
    cr_assert(strncmp(msg, path, strlen(path)) == 0, "%s: %s", what, msg);
    cr_assert(strstr(msg, strerror(err)), "%s: message lacks '%s': %s", what, strerror(err), msg);
    cr_assert(strstr(msg, what), "%s: %s", what, msg);
    unsigned char *now = slurp(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, now, n0) == 0, "%s: the old file changed", what);
    cr_assert_eq(td_count(&td, names, sizeof names), 1, "%s: left behind: %s", what, names);
    cr_assert(sample_check(&a, path));
    free(before);
    free(now);
    td_free(&td);
}

Test(npz_write, a_failure_at_any_step_leaves_the_old_file_intact) {
    fault_case(NPZ_FAULT_OPEN, EACCES, 0, "cannot create the temporary file");
    fault_case(NPZ_FAULT_WRITE, ENOSPC, 0, "writing the temporary file failed");
    fault_case(NPZ_FAULT_WRITE, ENOSPC, 100, "writing the temporary file failed");
    fault_case(NPZ_FAULT_WRITE, EIO, 5000, "writing the temporary file failed");
    fault_case(NPZ_FAULT_FSYNC, EIO, 0, "fsync of the temporary file failed");
    fault_case(NPZ_FAULT_CLOSE, EDQUOT, 0, "closing the temporary file failed");
    fault_case(NPZ_FAULT_RENAME, EXDEV, 0, "cannot rename");
}

Test(npz_write, a_failed_folder_sync_reports_but_the_new_file_is_in_place) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "model.npz", path);
    Sample a, b;
    sample_init(&a, 1);
    sample_init(&b, 2);
    cr_assert_eq(sample_write(&a, path, 6), AG_OK);
    npz_test_set_fault(NPZ_FAULT_DIRSYNC, EIO, 0);
    cr_assert_eq(sample_write(&b, path, 6), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "fsync of its folder failed"), "%s", ag_last_error());
    cr_assert(strstr(ag_last_error(), "the new file is in place"), "%s", ag_last_error());
    cr_assert(sample_check(&b, path));
    cr_assert_eq(td_count(&td, NULL, 0), 1);
    td_free(&td);
}

/* A real write() failure without root: RLIMIT_FSIZE makes writes past the limit fail with
 * EFBIG (SIGXFSZ ignored), after part of the temporary file is written. */
static int fsize_child(const char *dir, char *note) {
    char path[256];
    snprintf(path, sizeof path, "%s/model.npz", dir);
    Sample a, b;
    sample_init(&a, 1);
    sample_init(&b, 2);
    if (sample_write(&a, path, 0) != AG_OK) return 2;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {8000, 8000};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 3;
    int rc = sample_write(&b, path, 0);
    const char *msg = ag_last_error();
    int ok = rc == AG_ERR_IO && strncmp(msg, path, strlen(path)) == 0 &&
             strstr(msg, strerror(EFBIG)) && sample_check(&a, path);
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    if (!ok || n != 1) snprintf(note, 256, "RLIMIT_FSIZE: rc %d, %d files: %.150s", rc, n, msg);
    return ok && n == 1 ? 0 : 1;
}

Test(npz_write, a_real_write_failure_leaves_the_old_file_intact) {
    TmpDir td;
    td_init(&td);
    char note[256];
    cr_assert_eq(in_child(fsize_child, td.dir, note), 0, "%s", note);
    td_free(&td);
}

/* A full disk: a small file A is written, then B (120 KB, stored) must fail with ENOSPC and
 * leave A. Where a private mount namespace is possible (root, or any user with user
 * namespaces) the folder is a 64 KiB tmpfs that B overflows, and ENOSPC comes from the kernel.
 * Elsewhere the write of B fails with an injected ENOSPC after 100 bytes (npz_test_set_fault):
 * the writer never writes through a link planted at its temporary path (io_temp_create), so a
 * link to /dev/full can no longer stand in for a full disk. */
static int enospc_child(const char *dir, char *note) {
    char path[256], why[200];
    snprintf(path, sizeof path, "%s/model.npz", dir);
    int tmpfs = ts_private_mounts(why, sizeof why) == 0 &&
                ts_mount_tmpfs(dir, "64k", 0, why, sizeof why) == 0;
    snprintf(note, 256, "%s", tmpfs ? "tmpfs" : "injected ENOSPC");
    static float big[30000];
    int64_t one = 1;
    NpzWriter *w = npz_writer_new();
    npz_add_i64(w, "which", 0, NULL, &one);
    if (npz_write(w, path, 0, NULL) != AG_OK) return 2;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!tmpfs) npz_test_set_fault(NPZ_FAULT_WRITE, ENOSPC, 100);
    npz_add_f32(w, "big", 1, (int64_t[]){30000}, big);
    int rc = npz_write(w, path, 0, NULL);
    npz_test_set_fault(NPZ_FAULT_NONE, 0, 0);
    npz_writer_free(w);
    const char *msg = ag_last_error();
    NpzFile *f = NULL;
    int ok = rc == AG_ERR_IO && strncmp(msg, path, strlen(path)) == 0 &&
             strstr(msg, strerror(ENOSPC)) && npz_read(path, &f, NULL) == AG_OK && f->n == 1;
    npz_free(f);
    struct stat st;
    int left = lstat(tmp, &st) == 0;
    if (!ok || left)
        snprintf(note, 256, "%s: rc %d: %.150s%s", tmpfs ? "tmpfs" : "injected ENOSPC", rc, msg,
                 left ? " (the temporary file was left)" : "");
    return ok && !left ? 0 : 1;
}

Test(npz_write, a_full_disk_leaves_the_old_file_intact) {
    TmpDir td;
    td_init(&td);
    char note[256];
    int r = in_child(enospc_child, td.dir, note);
    /* a tmpfs was private to the child: here the folder is still empty */
    int files = td_count(&td, NULL, 0);
    td_free(&td);
    cr_assert_eq(r, 0, "full disk (%s)", note);
    cr_assert_eq(files, strcmp(note, "tmpfs") == 0 ? 0 : 1, "full disk (%s): %d files", note,
                 files);
    cr_log_info("full disk: %s", note);
}

/* The child saves samples start, start + 1, ... forever (odd ones deflated); the parent kills
 * it at random moments. */
static void save_forever(const char *path, int start) {
    Sample s;
    for (int n = start;; n++) {
        sample_init(&s, n);
        sample_write(&s, path, n & 1);
    }
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

Test(npz_write, a_writer_killed_at_random_moments_never_leaves_a_corrupt_file) {
    /* in memory (/dev/shm) where there is one: a kill tests the rename, not the disk, and an
     * fsync there costs little, so many saves fit in the test's time */
    TmpDir td;
    struct stat sb;
    int shm = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0;
    td_init_in(&td, shm ? "/dev/shm" : "/tmp");
    char path[256];
    td_file(&td, "model.npz", path);
    Sample s;
    sample_init(&s, 0);
    cr_assert_eq(sample_write(&s, path, 0), AG_OK);
    /* A child that starts and completes one save takes t (the longest of 3 tries). Kills land
     * uniformly in [0, scale], scale = 2 t at first, so that some interrupt the child's first
     * save and others come after one or more saves replaced the file. Save times vary, so
     * scale adapts: it grows after a kill that found no new save and shrinks otherwise. */
    double t = 0;
    for (int k = 0; k < 3; k++) {
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) _exit(sample_write(&s, path, 0) == AG_OK ? 0 : 1);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        double dt = seconds_since(&t0);
        if (dt > t) t = dt;
    }
    Rng r;
    rng_seed(&r, (uint64_t)time(NULL));
    int64_t last = 0;
    int advanced = 0, temps = 0;
    double scale = 2 * t;
    for (int k = 0; k < 50; k++) {
        fflush(NULL);
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
            save_forever(path, (int)last + 1);
            _exit(0);
        }
        double delay = scale * rng_uniform(&r);
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) continue;
        /* the file is a complete save, never older than the last one seen */
        NpzFile *f;
        cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "kill %d: %s", k, ag_last_error());
        const NpzEntry *e = npz_find(f, "which");
        cr_assert(e && e->dtype == NPZ_I64 && e->count == 1, "kill %d: no 'which'", k);
        int64_t which = *(const int64_t *)e->data;
        cr_assert_geq(which, last, "kill %d: save %lld after save %lld", k, (long long)which,
                      (long long)last);
        sample_init(&s, (int)which);
        cr_assert(sample_equal(f, &s), "kill %d: save %lld is not what was written", k,
                  (long long)which);
        npz_free(f);
        advanced += which > last;
        scale *= which > last ? 0.8 : 1.25;
        if (scale > 0.1) scale = 0.1;
        last = which;
        /* a writer killed mid-save leaves its temporary file: remove it */
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
        temps += unlink(tmp) == 0;
    }
    cr_log_info("50 kills (%s, a child's first save %.1f ms): %d came after new saves, %d left a "
                "temporary file; %lld saves in all",
                shm ? "/dev/shm" : "/tmp", 1e3 * t, advanced, temps, (long long)last);
    cr_assert_gt(advanced, 0, "no save completed before its kill: the test proved little");
    cr_assert_gt(temps, 0, "no kill landed inside a save: the test proved little");
    cr_assert_eq(td_count(&td, NULL, 0), 1);
    td_free(&td);
}

/* ======================= model parameters ======================= */

typedef struct {
    Arena *arena;
    Seq2Seq m;
    Rng rng;
} Model;

static void model_init(Model *md, uint64_t seed, int d_model) {
    md->arena = arena_new("params", 64 << 20);
    rng_seed(&md->rng, seed);
    Seq2SeqConfig cfg = nn_seq2seq_default_config(20, 22, d_model, 2, 1);
    nn_seq2seq_init(&md->m, md->arena, &md->rng, &cfg);
}
static void model_free(Model *md) {
    nn_seq2seq_free(&md->m);
    arena_free(md->arena);
}
/* every parameter's bytes, concatenated (malloc) */
static unsigned char *snapshot(const ParamList *pl, size_t *n) {
    *n = ag_params_count(pl) * sizeof(Real);
    unsigned char *b = malloc(*n), *p = b;
    for (int i = 0; i < pl->n; i++) {
        memcpy(p, pl->items[i]->data, pl->items[i]->size * sizeof(Real));
        p += pl->items[i]->size * sizeof(Real);
    }
    return b;
}

Test(npz_params, save_then_load_into_a_fresh_model_gives_identical_weights) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Model a, b;
    model_init(&a, 1, 16);
    model_init(&b, 2, 16);
    NpzStats st;
    cr_assert_eq(npz_save_params(&a.m.params, td_file(&td, "m.npz", path), 6, &st), AG_OK);
    cr_assert_eq(st.n_entries, a.m.params.n);
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK);
    cr_assert(npz_find(f, "encoder.layers.0.self_attn.in_proj_weight") != NULL);
    cr_assert(npz_find(f, "decoder.layers.0.multihead_attn.out_proj.bias") != NULL);
    npz_free(f);
    size_t na, nb;
    unsigned char *sa = snapshot(&a.m.params, &na), *sb = snapshot(&b.m.params, &nb);
    cr_assert(na == nb && memcmp(sa, sb, na) != 0);
    NpzLoadInfo info;
    cr_assert_eq(npz_load_params(&b.m.params, path, &info), AG_OK, "%s", ag_last_error());
    cr_assert_eq(info.n_loaded, a.m.params.n);
    cr_assert_eq(info.n_converted, 0);
    cr_assert_eq(info.n_skipped, 0);
    free(sb);
    sb = snapshot(&b.m.params, &nb);
    cr_assert(memcmp(sa, sb, na) == 0);
    free(sa);
    free(sb);
    model_free(&a);
    model_free(&b);
    td_free(&td);
}

/* Writes a's parameters with one change (what), tries to load them into b, and checks the code,
 * the message and that b did not change at all. */
typedef enum { DROP, TRANSPOSE, AS_INT, EXTRA, RESERVED, OTHER_FLOAT, CORRUPT } Change;

static int load_changed(Change what, int victim, int *code, NpzLoadInfo *info) {
    TmpDir td;
    td_init(&td);
    char path[256];
    td_file(&td, "m.npz", path);
    Model a, b;
    model_init(&a, 1, 16);
    model_init(&b, 2, 16);
    const ParamList *pl = &a.m.params;
    NpzWriter *w = npz_writer_new();
    static int64_t ints[1 << 16];
    for (int i = 0; i < pl->n; i++) {
        const Tensor *t = pl->items[i];
        int64_t shape[AG_MAX_DIMS];
        for (int d = 0; d < t->ndim; d++) shape[d] = t->shape[d];
        if (i == victim && what == DROP) continue;
        if (i == victim && what == TRANSPOSE) {
            cr_assert_eq(t->ndim, 2);
            npz_add(w, t->name, NPZ_REAL, 2, (int64_t[]){shape[1], shape[0]}, t->data);
        } else if (i == victim && what == AS_INT) {
            cr_assert_leq(t->size, sizeof ints / sizeof *ints);
            npz_add_i64(w, t->name, t->ndim, shape, ints);
        } else if (what == OTHER_FLOAT) {
            npz_add_real_as(w, t->name, t, NPZ_REAL == NPZ_F32 ? NPZ_F64 : NPZ_F32);
        } else {
            npz_add_real(w, t->name, t);
        }
    }
    static const int64_t step = 1000;
    static const uint64_t rng[4] = {1, 2, 3, 4};
    if (what == EXTRA) npz_add_i64(w, "decoder.layers.5.norm1.weight", 0, NULL, &step);
    if (what == RESERVED) {
        npz_add_i64(w, "optim.step", 0, NULL, &step);
        npz_add_u64(w, "rng.state", 1, (int64_t[]){4}, rng);
        npz_add_bytes(w, "meta.config", "{}", 2);
    }
    cr_assert_eq(npz_write(w, path, 1, NULL), AG_OK);
    npz_writer_free(w);
    if (what == CORRUPT) {
        size_t n;
        unsigned char *bytes = slurp(path, &n);
        bytes[n / 2] ^= 0x10;
        spit(path, bytes, n);
        free(bytes);
    }
    size_t n0, n1;
    unsigned char *before = snapshot(&b.m.params, &n0);
    *code = npz_load_params(&b.m.params, path, info);
    unsigned char *after = snapshot(&b.m.params, &n1);
    int changed = memcmp(before, after, n0) != 0;
    if (*code != AG_OK) {
        cr_assert(!changed, "a failed load changed the model: %s", ag_last_error());
        cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s", ag_last_error());
    } else {
        unsigned char *want = snapshot(&a.m.params, &n1);
        if (what != OTHER_FLOAT) cr_assert(memcmp(want, after, n0) == 0);
        free(want);
    }
    free(before);
    free(after);
    model_free(&a);
    model_free(&b);
    td_free(&td);
    return changed;
}

Test(npz_params, a_missing_tensor_fails_and_leaves_every_parameter_unchanged) {
    int code;
    load_changed(DROP, 5, &code, NULL);
    cr_assert_eq(code, AG_ERR_SHAPE);
    Model a;
    model_init(&a, 1, 16);
    char want[160];
    snprintf(want, sizeof want, "tensor '%s' %s is missing from the file",
             a.m.params.items[5]->name, tensor_shape_str(a.m.params.items[5]));
    cr_assert(strstr(ag_last_error(), want), "%s", ag_last_error());
    model_free(&a);
}

Test(npz_params, a_wrong_shape_or_dtype_fails_and_leaves_every_parameter_unchanged) {
    int code;
    load_changed(TRANSPOSE, 0, &code, NULL); /* src_embed.weight (20,16) */
    cr_assert_eq(code, AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(),
                     "tensor 'src_embed.weight': shape (16,20) in the file, (20,16) in the model"),
              "%s", ag_last_error());
    load_changed(AS_INT, 3, &code, NULL);
    cr_assert_eq(code, AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "stored as '<i8', not as a float type"), "%s",
              ag_last_error());
    load_changed(CORRUPT, 0, &code, NULL);
    cr_assert_eq(code, AG_ERR_FORMAT, "%s", ag_last_error());
}

Test(npz_params, unknown_arrays_fail_reserved_prefixes_are_skipped) {
    int code;
    NpzLoadInfo info;
    load_changed(EXTRA, -1, &code, &info);
    cr_assert_eq(code, AG_ERR_SHAPE);
    cr_assert(strstr(ag_last_error(), "array 'decoder.layers.5.norm1.weight' is not a parameter "
                                      "of this model"),
              "%s", ag_last_error());
    cr_assert(load_changed(RESERVED, -1, &code, &info));
    cr_assert_eq(code, AG_OK, "%s", ag_last_error());
    cr_assert_eq(info.n_skipped, 3);
    cr_assert_eq(info.n_converted, 0);
}

Test(npz_params, the_other_float_type_loads_converted) {
    int code;
    NpzLoadInfo info;
    cr_assert(load_changed(OTHER_FLOAT, -1, &code, &info));
    cr_assert_eq(code, AG_OK, "%s", ag_last_error());
    cr_assert_eq(info.n_converted, info.n_loaded);
    cr_assert_gt(info.n_loaded, 10);
}

/* The figures the README quotes: nn_seq2seq_default_config(64, 64, 128, 4, 2). */
Test(npz_params, seq2seq_checkpoint_sizes) {
    TmpDir td;
    td_init(&td);
    char path[256];
    Arena *arena = arena_new("params", 64 << 20);
    Rng rng;
    rng_seed(&rng, 42);
    Seq2Seq a, b;
    Seq2SeqConfig cfg = nn_seq2seq_default_config(64, 64, 128, 4, 2);
    nn_seq2seq_init(&a, arena, &rng, &cfg);
    nn_seq2seq_init(&b, arena, &rng, &cfg);
    td_file(&td, "seq2seq.npz", path);
    static const int levels[] = {0, 1, 6, 9};
    for (size_t li = 0; li < sizeof levels / sizeof *levels; li++) {
        int level = levels[li];
        NpzStats st;
        struct timespec t0, t1, t2;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cr_assert_eq(npz_save_params(&a.params, path, level, &st), AG_OK, "%s", ag_last_error());
        clock_gettime(CLOCK_MONOTONIC, &t1);
        cr_assert_eq(npz_load_params(&b.params, path, NULL), AG_OK, "%s", ag_last_error());
        clock_gettime(CLOCK_MONOTONIC, &t2);
        double ws = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        double rs = (double)(t2.tv_sec - t1.tv_sec) + 1e-9 * (double)(t2.tv_nsec - t1.tv_nsec);
        cr_log_info("seq2seq(64,64,128,4,2), %s: %d tensors, %zu parameters, level %d: raw %zu "
                    "bytes, file %zu bytes (%.1f%%), save %.3f s, load %.3f s",
                    AG_REAL_NAME, st.n_entries, ag_params_count(&a.params), level, st.raw_bytes,
                    st.file_bytes, 100.0 * (double)st.file_bytes / (double)st.raw_bytes, ws, rs);
        if (level > 0) cr_assert_lt(st.file_bytes, st.raw_bytes);
        for (int i = 0; i < a.params.n; i++)
            cr_assert(memcmp(a.params.items[i]->data, b.params.items[i]->data,
                             a.params.items[i]->size * sizeof(Real)) == 0);
    }
    nn_seq2seq_free(&a);
    nn_seq2seq_free(&b);
    arena_free(arena);
    td_free(&td);
}

/* io_read_all: a stream whole, its limit, a NUL after the bytes, and a stream that fails */
Test(io_read_all, reads_a_stream_whole_up_to_its_limit_and_names_it_past_it) {
    size_t big = 100000;
    char *src = malloc(big);
    cr_assert(src);
    for (size_t i = 0; i < big; i++) src[i] = (char)('a' + i % 26);
    for (int k = 0; k < 4; k++) {
        size_t len = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 4097 : big;
        FILE *f = fmemopen(src, big, "rb");
        cr_assert(f);
        char *text = NULL;
        size_t n = 7;
        /* limit len: a stream of len bytes after the first big - len are skipped */
        fseek(f, (long)(big - len), SEEK_SET);
        cr_assert_eq(io_read_all(f, len, "s", &text, &n), AG_OK, "%s", ag_last_error());
        cr_assert(n == len && memcmp(text, src + big - len, len) == 0 && text[n] == 0);
        free(text);
        rewind(f);
        if (len < big) { /* one byte more than allowed */
            cr_assert_eq(io_read_all(f, len, "the stream", &text, &n), AG_ERR_ARG);
            char want[80];
            snprintf(want, sizeof want, "the stream: more than %zu bytes", len);
            cr_assert_str_eq(ag_last_error(), want);
            cr_assert(text == NULL && n == 0);
        }
        fclose(f);
    }
    FILE *w = tmpfile(); /* opened for writing and reading: a read error once closed for read */
    cr_assert(w);
    FILE *wo = fdopen(dup(fileno(w)), "w");
    char *text = NULL;
    size_t n = 0;
    cr_assert_eq(io_read_all(wo, 10, "wo", &text, &n), AG_ERR_IO);
    cr_assert(strncmp(ag_last_error(), "wo: cannot read: ", 17) == 0, "%s", ag_last_error());
    fclose(wo), fclose(w);
    free(src);
}

/* io_write_file: bytes as a whole file (replaced whole, empty when n is 0), nothing left beside
 * it; a folder at the path or a missing folder is an error naming the path, and the folder stays */
Test(io_write_file, writes_the_bytes_whole_and_refuses_a_folder) {
    TmpDir td;
    td_init(&td);
    char path[256], sub[256], *text = NULL;
    size_t n = 0;
    td_file(&td, "a.txt", path);
    cr_assert_eq(io_write_file(path, "hello\0world", 11), AG_OK, "%s", ag_last_error());
    cr_assert_eq(st_read_small(path, 100, &text, &n), AG_OK, "%s", ag_last_error());
    cr_assert(n == 11 && memcmp(text, "hello\0world", 11) == 0);
    free(text);
    cr_assert_eq(io_write_file(path, NULL, 0), AG_OK, "%s", ag_last_error());
    struct stat st;
    cr_assert(stat(path, &st) == 0 && st.st_size == 0);
    cr_assert_eq(td_count(&td, NULL, 0), 1); /* no temporary file left */
    cr_assert_eq(mkdir(td_file(&td, "d", sub), 0700), 0);
    cr_assert_eq(io_write_file(sub, "x", 1), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), sub) != NULL, "%s", ag_last_error());
    cr_assert(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    cr_assert_eq(td_count(&td, NULL, 0), 2);
    td_file(&td, "missing/b.txt", sub);
    cr_assert_eq(io_write_file(sub, "x", 1), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), sub) != NULL, "%s", ag_last_error());
    rmdir(td_file(&td, "d", sub));
    td_free(&td);
}

Test(npz_roundtrip, c_ints_are_the_same_file_as_int32) {
    TmpDir td;
    td_init(&td);
    char a[256], b[256];
    static const int ids[6] = {INT32_MIN, -2, 0, 3, 4, INT32_MAX};
    static const int32_t i32[6] = {INT32_MIN, -2, 0, 3, 4, INT32_MAX};
    NpzWriter *w = npz_writer_new();
    npz_add_int(w, "ids", 2, (int64_t[]){2, 3}, ids);
    cr_assert_eq(npz_write(w, td_file(&td, "int.npz", a), 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    w = npz_writer_new();
    npz_add_i32(w, "ids", 2, (int64_t[]){2, 3}, i32);
    cr_assert_eq(npz_write(w, td_file(&td, "i32.npz", b), 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    cr_assert(na == nb && memcmp(x, y, na) == 0, "the two files differ");
    free(x), free(y);
    NpzFile *f;
    cr_assert_eq(npz_read(a, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e = npz_find(f, "ids");
    cr_assert(e && e->dtype == NPZ_I32 && e->count == 6 && !memcmp(e->data, ids, sizeof ids));
    npz_free(f);
    td_free(&td);
}
