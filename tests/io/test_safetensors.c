/* test_safetensors.c: the safetensors reader and writer (src/io/safetensors*.c) against files
 * the reference library wrote (tests/fixtures/safetensors/, written by
 * tests/io/safetensors_fixtures.py with safetensors.torch.save_file): their values read back,
 * the same bytes written for the same tensors, the edge values of every float type, a sharded
 * model through its index; round trips of each dtype with the rounding of F16 and BF16; files
 * mapped, not read (the resident memory after st_read of a 32 MB file); and every hostile case,
 * built here by hand: truncations, a header length past the file or over the limit, bad JSON,
 * wrong JSON types, unknown dtypes, sizes that disagree with the offsets, overflowing shapes,
 * gaps, overlaps, stray bytes, duplicate names, hostile indexes. Each must fail with its code
 * and a message naming the file (and the tensor) and the reason, without crashing (ASan under
 * DEBUG=1). The live check against the Python package runs elsewhere:
 * tests/io/test_numpy.sh (make test-numpy). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attograd.h"
#include "expect_abort.h"
#include "files.h"

#define FIX "tests/fixtures/safetensors/"

/* element i of the fixtures' "thirds": float32(sign * (i + 1) / 3) */
static double third(size_t i, double sign) { return (double)(float)(sign * (double)(i + 1) / 3.0); }

static void fill_thirds(Tensor *t, double sign) {
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)third(i, sign);
}

static void expect_fail(int rc, int code, const char *path, const char *what) {
    cr_assert_eq(rc, code, "expected code %d, got %d: %s", code, rc, ag_last_error());
    cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "message lacks the path %s: %s",
              path, ag_last_error());
    cr_assert(strstr(ag_last_error(), what), "message lacks '%s': %s", what, ag_last_error());
}

/* ---- the reference library's files ---- */

/* the tensors of reference.safetensors: name, dtype, shape, sign of its thirds */
static const struct {
    const char *name;
    StDtype dtype;
    int ndim;
    int shape[3];
    double sign;
} ref_tensors[] = {
    {"wte.weight", ST_F32, 2, {4, 3}, 1},
    {"h.0.attn.c_attn.weight", ST_F64, 2, {3, 6}, -1},
    {"h.0.ln_1.bias", ST_F16, 1, {5}, 1},
    {"h.0.ln_1.weight", ST_BF16, 1, {5}, -1},
    {"na\xc3\xafve", ST_F32, 0, {0}, 1},
    {"B.upper", ST_F32, 1, {2}, -1},
    {"h.0.mlp.c_fc.weight", ST_F16, 3, {2, 2, 3}, 1},
};
#define N_REF (int)(sizeof ref_tensors / sizeof ref_tensors[0])

/* x rounded to F16 or BF16 by another route than the library's: the nearest of the two
 * neighbours found by stepping bit patterns of the (small) format, ties to the even one */
static double to_small(double x, StDtype d) {
    StTensor t = {.name = "x", .path = "x", .dtype = d, .count = 1};
    unsigned char b[2];
    t.data = b;
    double best = NAN;
    uint16_t best_bits = 0;
    for (uint32_t bits = 0; bits < 0x10000; bits++) {
        b[0] = (unsigned char)bits;
        b[1] = (unsigned char)(bits >> 8);
        double v = st_value(&t, 0);
        if (!isfinite(v) || signbit(v) != signbit(x)) continue;
        double e = fabs(v - x), eb = fabs(best - x);
        if (isnan(best) || e < eb || (e == eb && !(bits & 1) && (best_bits & 1))) {
            best = v;
            best_bits = (uint16_t)bits;
        }
    }
    return best;
}

Test(safetensors, reads_the_reference_librarys_values) {
    StFile *f;
    cr_assert_eq(st_read(FIX "reference.safetensors", &f, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(f->n, N_REF + 1);
    cr_assert_str_eq(st_meta(f, "format"), "pt");
    cr_assert_eq(f->n_meta, 1);
    cr_assert_eq(f->header_bytes % 8, 0);
    cr_assert_eq(8 + f->header_bytes + f->data_bytes, f->file_bytes);
    for (int k = 0; k < N_REF; k++) {
        const StTensor *t = st_find(f, ref_tensors[k].name);
        cr_assert(t, "'%s' not found", ref_tensors[k].name);
        cr_assert_eq(t->dtype, ref_tensors[k].dtype, "%s", t->name);
        cr_assert_eq(t->ndim, ref_tensors[k].ndim);
        for (int i = 0; i < t->ndim; i++) cr_assert_eq(t->shape[i], ref_tensors[k].shape[i]);
        cr_assert_str_eq(t->path, FIX "reference.safetensors");
        Real *v = malloc(t->count * sizeof *v);
        cr_assert_eq(st_to_reals(t, v), AG_OK, "%s", ag_last_error());
        for (size_t i = 0; i < t->count; i++) {
            double want = third(i, ref_tensors[k].sign);
            if (t->dtype == ST_F16 || t->dtype == ST_BF16) want = to_small(want, t->dtype);
            cr_assert_eq((double)v[i], (double)(Real)want, "%s[%zu]: %.17g, want %.17g", t->name, i,
                         (double)v[i], want);
            cr_assert_eq(st_value(t, i), want, "%s[%zu]", t->name, i);
        }
        free(v);
    }
    const StTensor *e = st_find(f, "empty");
    cr_assert(e && e->count == 0 && e->nbytes == 0 && e->ndim == 2 && e->shape[0] == 0);
    cr_assert_null(st_find(f, "missing"));
    cr_assert_null(st_find(f, "wte"));
    /* the tensors in the order of their bytes: F64 first, then F32, BF16, F16 (the writer's) */
    for (int i = 0; i + 1 < f->n; i++) {
        cr_assert_eq(f->tensors[i].offset + f->tensors[i].nbytes, f->tensors[i + 1].offset);
        cr_assert_geq(f->tensors[i].dtype, f->tensors[i + 1].dtype);
    }
    st_free(f);
}

/* the tensors of reference.safetensors through st_add_real (and st_add for the empty one) */
static StWriter *reference_writer(Arena *a) {
    StWriter *w = st_writer_new();
    for (int k = N_REF - 1; k >= 0; k--) { /* in another order than the file's */
        Tensor *t = tensor_new(a, ref_tensors[k].ndim, ref_tensors[k].shape, "t");
        fill_thirds(t, ref_tensors[k].sign);
        st_add_real(w, ref_tensors[k].name, t, ref_tensors[k].dtype);
    }
    st_add(w, "empty", ST_F32, 2, (int64_t[]){0, 3}, NULL);
    return w;
}

Test(safetensors, writes_the_reference_librarys_bytes) {
    Arena *a = arena_new("st", 1 << 16);
    StWriter *w = reference_writer(a);
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "st");
    ts_join(path, dir, "ours.safetensors");
    StStats st;
    cr_assert_eq(st_write(w, path, &st), AG_OK, "%s", ag_last_error());
    size_t n_ours, n_ref;
    char *ours = ts_read_text(path, &n_ours),
         *ref = ts_read_text(FIX "reference.safetensors", &n_ref);
    cr_assert_eq(st.file_bytes, n_ours);
    cr_assert_eq(st.n_tensors, N_REF + 1);
    cr_assert_eq(n_ours, n_ref, "%zu bytes, the reference library wrote %zu", n_ours, n_ref);
    for (size_t i = 0; i < n_ref; i++)
        cr_assert_eq(ours[i], ref[i], "byte %zu differs: %.120s", i, ours + 8);
    free(ours);
    free(ref);
    st_writer_free(w);
    ts_rm_tree(dir);
    arena_free(a);
}

Test(safetensors, reads_every_float_types_edge_values) {
    StFile *f;
    cr_assert_eq(st_read(FIX "specials.safetensors", &f, NULL), AG_OK, "%s", ag_last_error());
    static const struct {
        const char *name;
        double max, tiny, minnorm;
    } types[] = {{"f16", 65504.0, 0x1p-24, 0x1p-14},
                 {"bf16", 3.3895313892515355e38, 0x1p-133, 0x1p-126},
                 {"f32", 3.4028234663852886e38, 0x1p-149, 0x1p-126},
                 {"f64", 1.7976931348623157e308, 0x1p-1074, 0x1p-1022}};
    for (int k = 0; k < 4; k++) {
        const StTensor *t = st_find(f, types[k].name);
        cr_assert(t && t->count == 11);
        double want[11] = {0.0,
                           -0.0,
                           1.0,
                           -2.0,
                           types[k].max,
                           -types[k].max,
                           types[k].tiny,
                           -types[k].minnorm,
                           INFINITY,
                           -INFINITY,
                           NAN};
        for (size_t i = 0; i < 10; i++) {
            double v = st_value(t, i);
            cr_assert(v == want[i] && signbit(v) == signbit(want[i]), "%s[%zu] = %.17g, want %.17g",
                      t->name, i, v, want[i]);
        }
        cr_assert(isnan(st_value(t, 10)));
        /* into Real: NaN and infinities carried over, as npz_read does; F64's extremes round */
        Real v[11];
        cr_assert_eq(st_to_reals(t, v), AG_OK);
        cr_assert(isnan((double)v[10]) && isinf((double)v[8]) && v[8] > 0 && signbit((double)v[1]));
        for (size_t i = 0; i < 8; i++) cr_assert_eq((double)v[i], (double)(Real)want[i]);
        /* st_check_finite: the first value that is not finite in Real */
        int rc = st_check_finite(t);
        int first = sizeof(Real) == sizeof(float) && k == 3 ? 4 : 8;
        char what[64];
        snprintf(what, sizeof what, "tensor '%s'[%d] = %s", t->name, first,
                 first == 4 ? "1.79769313e+308" : "inf");
        expect_fail(rc, AG_ERR_RANGE, FIX "specials.safetensors", what);
        cr_assert(strstr(ag_last_error(), first == 4 ? "must be finite as the build's floating type"
                                                     : "must be finite"));
    }
    const StTensor *ids = st_find(f, "position_ids");
    cr_assert(ids && ids->dtype == ST_I64 && ids->ndim == 2 && ids->shape[1] == 5);
    for (size_t i = 0; i < 5; i++) cr_assert_eq(st_value(ids, i), (double)i);
    const StTensor *m = st_find(f, "mask"), *fl = st_find(f, "flags"), *i32 = st_find(f, "i32");
    cr_assert(m->dtype == ST_U8 && st_value(m, 2) == 255);
    cr_assert(fl->dtype == ST_BOOL && st_value(fl, 0) == 1 && st_value(fl, 1) == 0);
    cr_assert(i32->dtype == ST_I32 && st_value(i32, 0) == -2147483648.0 &&
              st_value(i32, 3) == 2147483647.0);
    Real r[5];
    expect_fail(st_to_reals(ids, r), AG_ERR_FORMAT, FIX "specials.safetensors",
                "tensor 'position_ids': stored as I64, not as a float type");
    expect_fail(st_check_finite(ids), AG_ERR_FORMAT, FIX "specials.safetensors", "stored as I64");
    st_free(f);
}

/* The checks and conversions run a whole tensor at a time (st_check_finite scans blocks of
 * values): in a long tensor of each float type the first value that is not finite, past the
 * first blocks and after one in its own block, is the one named; values before it convert. */
Test(safetensors, a_long_tensor_names_its_first_nonfinite_value) {
    enum { N = 1000, BAD = 700 };
    static const StDtype types[4] = {ST_F16, ST_BF16, ST_F32, ST_F64};
    static const uint64_t inf_bits[4] = {0x7c00u, 0x7f80u, 0x7f800000u, 0x7ff0000000000000u};
    static const uint64_t one_bits[4] = {0x3c00u, 0x3f80u, 0x3f800000u, 0x3ff0000000000000u};
    unsigned char buf[N * 8];
    Real out[N];
    for (int k = 0; k < 4; k++) {
        size_t size = st_dtype_size(types[k]);
        for (size_t i = 0; i < N; i++) {
            uint64_t v = i == BAD || i == BAD + 5 ? inf_bits[k] | 1 /* NaN */ : one_bits[k];
            if (i == BAD + 9) v = inf_bits[k]; /* +inf */
            memcpy(buf + i * size, &v, size);
        }
        StTensor t = {.name = "w",
                      .path = "mem",
                      .dtype = types[k],
                      .ndim = 1,
                      .shape = {N},
                      .count = N,
                      .nbytes = N * size,
                      .data = buf};
        expect_fail(st_check_finite(&t), AG_ERR_RANGE, "mem", "tensor 'w'[700] = nan");
        cr_assert_eq(st_to_reals(&t, out), AG_OK);
        for (size_t i = 0; i < N; i++)
            cr_assert(i == BAD || i == BAD + 5 || i == BAD + 9 ? !isfinite((double)out[i])
                                                               : out[i] == 1,
                      "%s[%zu] = %g", st_dtype_name(types[k]), i, (double)out[i]);
        t.count = BAD, t.nbytes = BAD * size; /* only the values before it: all finite */
        cr_assert_eq(st_check_finite(&t), AG_OK, "%s", ag_last_error());
    }
}

/* ---- round trips ---- */

Test(safetensors, round_trips_each_float_type) {
    Arena *a = arena_new("st", 1 << 20);
    Tensor *t = tensor_new2(a, 20, 21, "w");
    Rng rng;
    rng_seed(&rng, 7);
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = (Real)(rng_normal(&rng) * ldexp(1.0, (int)(i % 61) - 30));
    /* the edges: zeros, subnormals of F16, the values around F16's largest, NaN, infinities */
    static const double edge[] = {0.0,      -0.0,      0x1p-25,   0x1.8p-25, 0x1p-24,
                                  65504.0,  65519.0,   65520.0,   -65520.0,  1e30,
                                  0x1.01p0, 0x1.008p0, 0x1.018p0, 0x1.03p0};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) t->data[i] = (Real)edge[i];
    t->data[20] = (Real)NAN;
    t->data[21] = (Real)INFINITY;
    t->data[22] = (Real)-INFINITY;
    static const StDtype as[] = {ST_F32, ST_F64, ST_F16, ST_BF16};
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "st");
    ts_join(path, dir, "rt.safetensors");
    StWriter *w = st_writer_new();
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof name, "w.%s", st_dtype_name(as[k]));
        st_add_real(w, name, t, as[k]);
    }
    st_add_meta(w, "note", "h\xc3\xa9llo");
    cr_assert_eq(st_write(w, path, NULL), AG_OK, "%s", ag_last_error());
    st_writer_free(w);
    StSet *s;
    cr_assert_eq(st_open(path, &s, NULL), AG_OK, "%s", ag_last_error());
    cr_assert_eq(s->n_files, 1);
    cr_assert_str_eq(st_meta(s->files[0], "note"), "h\xc3\xa9llo");
    cr_assert_str_eq(s->files[0]->meta_keys[0], "format"); /* always first */
    Tensor *back = tensor_new2(a, 20, 21, "back");
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof name, "w.%s", st_dtype_name(as[k]));
        const StTensor *e = st_set_find(s, name);
        cr_assert(e && e->dtype == as[k]);
        int conv = -1;
        cr_assert_eq(st_to_tensor(e, back, &conv), AG_OK, "%s", ag_last_error());
        cr_assert_eq(conv, as[k] != ST_REAL);
        for (size_t i = 0; i < t->size; i++) {
            double x = (double)t->data[i], y = (double)back->data[i];
            if (isnan(x)) {
                cr_assert(isnan(y));
                continue;
            }
            double want = as[k] == ST_F32   ? (double)(float)x
                          : as[k] == ST_F64 ? x
                          : fabs(x) >= (as[k] == ST_F16 ? 65520.0 : 0x1.ffp127)
                              ? copysign(INFINITY, x)
                              : to_small(x, as[k]);
            cr_assert(y == (double)(Real)want && signbit(y) == signbit(want),
                      "%s[%zu]: %.17g written, %.17g read, want %.17g", name, i, x, y, want);
        }
    }
    /* F16's round to nearest even, spelled out */
    const StTensor *h = st_set_find(s, "w.F16");
    cr_assert_eq(st_value(h, 2), 0.0);     /* 2^-25: half the smallest subnormal, ties to 0 */
    cr_assert_eq(st_value(h, 3), 0x1p-24); /* 1.5 * 2^-25 rounds up */
    cr_assert_eq(st_value(h, 6), 65504.0); /* below the midpoint to 65536 */
    cr_assert(isinf(st_value(h, 7)));      /* the midpoint ties to even: 65536, an infinity */
    /* and BF16's (7 fraction bits): ties to the even neighbour */
    const StTensor *b = st_set_find(s, "w.BF16");
    cr_assert_eq(st_value(b, 10), 1.0);          /* 1 + 2^-8: the midpoint, to 1 (even) */
    cr_assert_eq(st_value(b, 11), 1.0);          /* 1 + 2^-9: below it */
    cr_assert_eq(st_value(b, 12), 1.0 + 0x1p-7); /* 1 + 2^-8 + 2^-9: above it */
    cr_assert_eq(st_value(b, 13), 1.0 + 0x1p-6); /* 1 + 3 2^-8: the midpoint, up to the even */
    st_set_free(s);
    ts_rm_tree(dir);
    arena_free(a);
}

/* ---- hostile files ---- */

/* path holds: the 8-byte header length (len, or the header's own length when len < 0), the
 * header hdr, then ndata bytes of data (1, 2, 3, ...) */
static void put_st(const char *path, long long len, const char *hdr, size_t ndata) {
    size_t h = strlen(hdr), n = 8 + h + ndata;
    unsigned char *b = malloc(n);
    uint64_t l = len < 0 ? (uint64_t)h : (uint64_t)len;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(l >> (8 * i));
    memcpy(b + 8, hdr, h);
    for (size_t i = 0; i < ndata; i++) b[8 + h + i] = (unsigned char)(i + 1);
    ts_write_bytes(path, b, n);
    free(b);
}

typedef struct {
    const char *why;
    long long len; /* -1: the header's length */
    const char *hdr;
    size_t ndata;
    int code;
    const char *msg; /* the message holds it (after "path: ") */
} Hostile;

#define T1(x) "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" x "}}"
static const Hostile hostile[] = {
    {"header length past the file", 1LL << 62, "{}", 0, AG_ERR_FORMAT,
     "the header length 4611686018427387904 runs past the end of the file (2 bytes follow"},
    {"header length one past the file", 3, "{}", 0, AG_ERR_FORMAT, "runs past the end of the file"},
    {"header length 2^64 - 1", -2, "{}", 0, AG_ERR_FORMAT,
     "the header length 18446744073709551614"},
    {"no brace", -1, "  {}", 0, AG_ERR_FORMAT, "the header does not start with '{'"},
    {"an array", -1, "[1]", 0, AG_ERR_FORMAT, "does not start with '{'"},
    {"zero header", 0, "", 0, AG_ERR_FORMAT, "does not start with '{'"},
    {"cut JSON", -1, "{\"a\":", 0, AG_ERR_FORMAT, "the header is not valid JSON"},
    {"trailing bytes", -1, "{} x", 0, AG_ERR_FORMAT, "the header is not valid JSON"},
    {"padding spaces", -1, "{}      ", 0, AG_OK, ""},
    {"invalid UTF-8", -1, "{\"\xff\":{}}", 0, AG_ERR_FORMAT, "not valid JSON"},
    {"escaped NUL in a name", -1, "{\"a\\u0000b\":{}}", 0, AG_ERR_FORMAT, "not valid JSON"},
    {"duplicate names", -1,
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     2, AG_ERR_FORMAT, "duplicate"},
    {"metadata not an object", -1, "{\"__metadata__\":[]}", 0, AG_ERR_FORMAT,
     "'__metadata__' is not an object"},
    {"metadata value a number", -1, "{\"__metadata__\":{\"format\":1}}", 0, AG_ERR_FORMAT,
     "'__metadata__' entry 'format' is not a string"},
    {"empty name", -1, "{\"\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}", 0,
     AG_ERR_FORMAT, "a tensor has an empty name"},
    {"tensor not an object", -1, "{\"a\":[1]}", 0, AG_ERR_FORMAT,
     "tensor 'a': not an object with dtype, shape and data_offsets"},
    {"a valid file", -1, T1("[0,8]"), 8, AG_OK, ""},
    {"unknown key", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"quant\":\"q4\"}}", 8,
     AG_ERR_FORMAT, "tensor 'a': unexpected key 'quant'"},
    {"missing dtype", -1, "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, AG_ERR_FORMAT,
     "tensor 'a': lacks 'dtype'"},
    {"missing offsets", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, AG_ERR_FORMAT,
     "lacks 'data_offsets'"},
    {"dtype a number", -1, "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "'dtype' is not a string"},
    {"unknown dtype", -1, "{\"a\":{\"dtype\":\"Q4_0\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1,
     AG_ERR_FORMAT, "tensor 'a': dtype 'Q4_0' is not supported"},
    {"newer dtype", -1, "{\"a\":{\"dtype\":\"F8_E8M0\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
     AG_ERR_FORMAT, "dtype 'F8_E8M0' is not supported"},
    {"dtype in lower case", -1, "{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     8, AG_ERR_FORMAT, "dtype 'f32' is not supported"},
    {"shape not an array", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "'shape' is not an array"},
    {"negative dimension", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
     8, AG_ERR_FORMAT, "'shape'[0] is not an integer >= 0"},
    {"fractional dimension", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, AG_ERR_FORMAT,
     "'shape'[0] is not an integer >= 0"},
    {"nine dimensions", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "'shape' has 9 dimensions, more than 8"},
    {"a dimension past 2^63", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "not valid JSON"},
    {"offsets not a pair", -1, T1("[0,4,8]"), 8, AG_ERR_FORMAT,
     "'data_offsets' is not two integers >= 0"},
    {"offsets as text", -1, T1("[\"0\",\"8\"]"), 8, AG_ERR_FORMAT, "'data_offsets' is not two"},
    {"negative offset", -1, T1("[-8,0]"), 8, AG_ERR_FORMAT, "'data_offsets' is not two"},
    {"offsets reversed", -1, T1("[8,0]"), 8, AG_ERR_FORMAT,
     "data_offsets [8,0] end before they begin"},
    {"wrong dtype size", -1, T1("[0,6]"), 6, AG_ERR_FORMAT,
     "tensor 'a': shape [2] of F32 is 8 bytes, its data_offsets [0,6] hold 6"},
    {"F16 counted as F32", -1, "{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     8, AG_ERR_FORMAT, "shape [2] of F16 is 4 bytes, its data_offsets [0,8] hold 8"},
    {"overflowing shape", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "shape [4294967296,4294967296,16] of F32 is more bytes than memory can hold"},
    {"shape x size overflowing", -1,
     "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", 8,
     AG_ERR_FORMAT, "more bytes than memory can hold"},
    {"truncated data", -1, T1("[0,8]"), 5, AG_ERR_FORMAT,
     "tensor 'a': its data_offsets [0,8] run past the end of the data (5 bytes: is the file "
     "truncated?)"},
    {"offsets far past the file", -1, T1("[9223372036854775000,9223372036854775008]"), 8,
     AG_ERR_FORMAT, "its data_offsets [9223372036854775000,9223372036854775008] run past the end"},
    {"offsets past 2^63", -1, T1("[18446744073709551600,18446744073709551608]"), 8, AG_ERR_FORMAT,
     "not valid JSON: too big integer"},
    {"overlapping offsets", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     12, AG_ERR_FORMAT, "tensor 'b': its bytes [4,12) overlap those of tensor 'a' [0,8)"},
    {"the same bytes twice", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     8, AG_ERR_FORMAT, "overlap those of tensor"},
    {"an empty tensor inside another", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
     8, AG_ERR_FORMAT, "tensor 'b': its bytes [4,4) overlap those of tensor 'a'"},
    {"a gap", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
     20, AG_ERR_FORMAT,
     "tensor 'b': a gap of 4 bytes before it: it starts at 12, tensor 'a' ends at 8"},
    {"a gap at the start", -1, T1("[4,12]"), 12, AG_ERR_FORMAT,
     "tensor 'a': a gap of 4 bytes before it: it starts at 4, the data begins ends at 0"},
    {"stray bytes", -1, T1("[0,8]"), 11, AG_ERR_FORMAT,
     "3 bytes after the last tensor (which ends at 8 of the 11 bytes of data) belong to no tensor"},
    {"data without tensors", -1, "{}", 4, AG_ERR_FORMAT, "4 bytes after the last tensor"},
    {"a name with a newline", -1,
     "{\"a\\nb\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,6]}}", 6, AG_ERR_FORMAT,
     "tensor 'a\\x0ab': shape [2]"},
};

static char hostile_dir[256];
static void hostile_setup(void) { ts_tmp_dir(hostile_dir, sizeof hostile_dir, "st-hostile"); }
static void hostile_teardown(void) { ts_rm_tree(hostile_dir); }

Test(safetensors, refuses_every_hostile_file_naming_it, .init = hostile_setup,
     .fini = hostile_teardown) {
    char path[512];
    ts_join(path, hostile_dir, "h.safetensors");
    for (size_t k = 0; k < sizeof hostile / sizeof *hostile; k++) {
        const Hostile *h = &hostile[k];
        long long len = h->len == -2 ? -1 : h->len;
        put_st(path, len, h->hdr, h->ndata);
        if (h->len == -2) { /* the length field all ones but the lowest bit */
            FILE *fp = fopen(path, "r+b");
            fwrite("\xfe\xff\xff\xff\xff\xff\xff\xff", 1, 8, fp);
            fclose(fp);
        }
        StFile *f = (StFile *)&k; /* must come back NULL on failure */
        int rc = st_read(path, &f, NULL);
        if (h->code == AG_OK) {
            cr_assert_eq(rc, AG_OK, "%s: %s", h->why, ag_last_error());
            st_free(f);
            continue;
        }
        cr_assert_null(f, "%s: a failed read returned a file", h->why);
        cr_assert_eq(rc, h->code, "%s: code %d: %s", h->why, rc, ag_last_error());
        cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s: %s", h->why,
                  ag_last_error());
        cr_assert(strstr(ag_last_error(), h->msg), "%s: '%s' lacks '%s'", h->why, ag_last_error(),
                  h->msg);
    }
}

Test(safetensors, refuses_short_files_folders_and_missing_files, .init = hostile_setup,
     .fini = hostile_teardown) {
    char path[512];
    ts_join(path, hostile_dir, "short.safetensors");
    StFile *f;
    for (size_t n = 0; n < 8; n++) {
        ts_write_bytes(path, "\x02\0\0\0\0\0\0\0", n);
        expect_fail(st_read(path, &f, NULL), AG_ERR_FORMAT, path,
                    "too short for a safetensors file");
    }
    expect_fail(st_read(hostile_dir, &f, NULL), AG_ERR_IO, hostile_dir, "is a folder");
    ts_join(path, hostile_dir, "missing.safetensors");
    expect_fail(st_read(path, &f, NULL), AG_ERR_IO, path, "cannot open: No such file");
    cr_assert_null(f);
    expect_fail(st_read("/dev/null", &f, NULL), AG_ERR_IO, "/dev/null", "not a regular file");
}

Test(safetensors, fails_on_every_truncation_of_a_real_file, .init = hostile_setup,
     .fini = hostile_teardown) {
    size_t n;
    char *b = ts_read_text(FIX "reference.safetensors", &n), path[512];
    ts_join(path, hostile_dir, "cut.safetensors");
    for (size_t k = 0; k < n; k++) {
        ts_write_bytes(path, b, k);
        StFile *f;
        int rc = st_read(path, &f, NULL);
        cr_assert_eq(rc, AG_ERR_FORMAT, "cut at %zu: %d %s", k, rc, ag_last_error());
        cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0);
    }
    /* one byte more: stray */
    b = realloc(b, n + 1);
    b[n] = 0;
    ts_write_bytes(path, b, n + 1);
    StFile *f;
    expect_fail(st_read(path, &f, NULL), AG_ERR_FORMAT, path, "1 bytes after the last tensor");
    free(b);
}

Test(safetensors, limits_bound_the_header_and_the_tensors, .init = hostile_setup,
     .fini = hostile_teardown) {
    StFile *f;
    StLimits lim = st_default_limits();
    cr_assert_eq(lim.max_header, 100000000u); /* the reference library's */
    lim.max_header = 100;
    size_t n;
    char *b = ts_read_text(FIX "reference.safetensors", &n);
    expect_fail(st_read(FIX "reference.safetensors", &f, &lim), AG_ERR_NOMEM,
                FIX "reference.safetensors", "over the limit of 100 (StLimits.max_header)");
    free(b);
    lim = st_default_limits();
    lim.max_tensors = 3;
    expect_fail(st_read(FIX "reference.safetensors", &f, &lim), AG_ERR_NOMEM,
                FIX "reference.safetensors", "8 tensors, over the limit of 3");
    /* a header of nested arrays 100000 deep: jansson's depth limit, not the stack */
    char path[512];
    ts_join(path, hostile_dir, "deep.safetensors");
    size_t depth = 100000;
    char *hdr = malloc(2 * depth + 16);
    strcpy(hdr, "{\"a\":");
    size_t k = strlen(hdr);
    for (size_t i = 0; i < depth; i++) hdr[k++] = '[';
    for (size_t i = 0; i < depth; i++) hdr[k++] = ']';
    strcpy(hdr + k, "}");
    put_st(path, -1, hdr, 0);
    free(hdr);
    expect_fail(st_read(path, &f, NULL), AG_ERR_FORMAT, path, "not valid JSON");
}

/* ---- sharded models ---- */

Test(safetensors, reads_a_sharded_model_through_its_index) {
    static const char *const how[] = {FIX "sharded", FIX "sharded/",
                                      FIX "sharded/model.safetensors.index.json"};
    for (int k = 0; k < 3; k++) {
        StSet *s;
        cr_assert_eq(st_open(how[k], &s, NULL), AG_OK, "%s: %s", how[k], ag_last_error());
        cr_assert_eq(s->n_files, 2);
        cr_assert_eq(s->n, 4);
        const StTensor *b = st_set_find(s, "transformer.h.0.attn.c_attn.bias");
        cr_assert(b && b->dtype == ST_F16 && b->count == 6);
        cr_assert(strstr(b->path, "sharded/model-00002-of-00002.safetensors"), "%s", b->path);
        for (size_t i = 0; i < 6; i++) cr_assert_eq(st_value(b, i), to_small(third(i, 1), ST_F16));
        const StTensor *w = st_set_find(s, "transformer.wte.weight");
        cr_assert(w && strstr(w->path, "model-00001-of-00002"));
        for (size_t i = 0; i < 6; i++) cr_assert_eq(st_value(w, i), third(i, -1));
        cr_assert_null(st_set_find(s, "wte.weight"));
        for (int i = 0; i + 1 < s->n; i++)
            cr_assert_lt(strcmp(s->tensors[i]->name, s->tensors[i + 1]->name), 0);
        st_set_free(s);
    }
}

/* a copy of the sharded fixture in dir with the index replaced by index (NULL: kept) */
static void sharded_copy(const char *dir, const char *index) {
    static const char *const files[] = {"model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors",
                                        "model.safetensors.index.json"};
    for (int i = 0; i < 3; i++) {
        char src[512], dst[512];
        size_t n;
        snprintf(src, sizeof src, FIX "sharded/%s", files[i]);
        char *b = ts_read_text(src, &n);
        ts_join(dst, dir, files[i]);
        if (i == 2 && index)
            ts_write_text(dst, index);
        else
            ts_write_bytes(dst, b, n);
        free(b);
    }
}

#define S1 "\"model-00001-of-00002.safetensors\""
#define S2 "\"model-00002-of-00002.safetensors\""
#define WM(a, b, c, d)                                                                             \
    "{\"metadata\":{\"total_size\":108},\"weight_map\":{\"lm_head.weight\":" a                     \
    ",\"transformer.h.0.attn.c_attn.bias\":" b ",\"transformer.h.0.attn.c_attn.weight\":" c        \
    ",\"transformer.wte.weight\":" d "}}"

Test(safetensors, refuses_hostile_indexes_naming_them, .init = hostile_setup,
     .fini = hostile_teardown) {
    static const struct {
        const char *index, *msg;
        int code;
        int in_shard; /* the message names a shard rather than the index */
    } cases[] = {
        {WM(S2, S2, S1, S1), "", AG_OK, 0},
        {"{\"weight_map\":"
         "{\"lm_head.weight\":" S2 "}}",
         "model-00002-of-00002.safetensors: "
         "tensor 'transformer.h.0.attn.c_attn.bias': not named by the index",
         AG_ERR_FORMAT, 1},
        {WM(S2, S2, S1, S2), "tensor 'transformer.wte.weight': the index puts it in ",
         AG_ERR_FORMAT, 0},
        {WM(S2, S2, S1, "\"../model-00001-of-00002.safetensors\""),
         "tensor 'transformer.wte.weight': shard '../model-00001-of-00002.safetensors' is not a "
         "file name in the index's folder",
         AG_ERR_FORMAT, 0},
        {WM(S2, S2, S1, "\"/etc/passwd\""), "shard '/etc/passwd' is not a file name", AG_ERR_FORMAT,
         0},
        {WM(S2, S2, S1, "\"..\""), "shard '..' is not a file name", AG_ERR_FORMAT, 0},
        {WM(S2, S2, S1, "\"\""), "shard '' is not a file name", AG_ERR_FORMAT, 0},
        {WM(S2, S2, S1, "3"), "tensor 'transformer.wte.weight': its shard is not a string",
         AG_ERR_FORMAT, 0},
        {WM(S2, S2, S1, "\"model-00003-of-00002.safetensors\""),
         "model-00003-of-00002.safetensors: cannot open", AG_ERR_IO, 1},
        {"{\"metadata\":{}}", "'weight_map' is missing", AG_ERR_FORMAT, 0},
        {"{\"weight_map\":[]}", "'weight_map' is not an object", AG_ERR_FORMAT, 0},
        {"{\"weight_map\":{},\"format\":\"pt\"}", "unexpected key 'format'", AG_ERR_FORMAT, 0},
        {"{\"metadata\":{\"total_size\":-1},\"weight_map\":{}}",
         "'metadata'.'total_size' is not an integer >= 0", AG_ERR_FORMAT, 0},
        {"{\"metadata\":\"x\",\"weight_map\":{}}", "'metadata' is not an object", AG_ERR_FORMAT, 0},
        {"{\"weight_map\":{\"a\":" S1 ",\"a\":" S1 "}}", "not valid JSON: duplicate", AG_ERR_FORMAT,
         0},
        {"{\"weight_map\":", "not valid JSON", AG_ERR_FORMAT, 0},
        {"[]", "not a JSON object", AG_ERR_FORMAT, 0},
        {"{\"weight_map\":{\"a.weight\":" S1 "}}", "tensor 'a.weight': the index puts it in ",
         AG_ERR_FORMAT, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char sub[512], index[600];
        snprintf(sub, sizeof sub, "%s/%zu", hostile_dir, k);
        cr_assert_eq(mkdir(sub, 0700), 0);
        sharded_copy(sub, cases[k].index);
        snprintf(index, sizeof index, "%s/model.safetensors.index.json", sub);
        StSet *s = (StSet *)&k;
        int rc = st_open(sub, &s, NULL);
        if (cases[k].code == AG_OK) {
            cr_assert_eq(rc, AG_OK, "%zu: %s", k, ag_last_error());
            st_set_free(s);
            continue;
        }
        cr_assert_null(s);
        cr_assert_eq(rc, cases[k].code, "%zu: %d %s", k, rc, ag_last_error());
        if (!cases[k].in_shard)
            cr_assert(strncmp(ag_last_error(), index, strlen(index)) == 0, "%zu: %s", k,
                      ag_last_error());
        else
            cr_assert(strncmp(ag_last_error(), sub, strlen(sub)) == 0, "%zu: %s", k,
                      ag_last_error());
        cr_assert(strstr(ag_last_error(), cases[k].msg), "%zu: '%s' lacks '%s'", k, ag_last_error(),
                  cases[k].msg);
    }
}

Test(safetensors, a_folder_prefers_model_safetensors_as_transformers_does, .init = hostile_setup,
     .fini = hostile_teardown) {
    StSet *s;
    expect_fail(st_open(hostile_dir, &s, NULL), AG_ERR_IO, hostile_dir,
                "no model.safetensors or model.safetensors.index.json in this folder");
    sharded_copy(hostile_dir, "{\"weight_map\":"); /* a broken index, never read */
    char path[512];
    ts_join(path, hostile_dir, "model.safetensors");
    size_t n;
    char *b = ts_read_text(FIX "reference.safetensors", &n);
    ts_write_bytes(path, b, n);
    free(b);
    cr_assert_eq(st_open(hostile_dir, &s, NULL), AG_OK, "%s", ag_last_error());
    cr_assert(s->n_files == 1 && st_set_find(s, "wte.weight"));
    st_set_free(s);
    ts_join(path, hostile_dir, "nothing.here");
    expect_fail(st_open(path, &s, NULL), AG_ERR_IO, path, "cannot open");
}

/* a folder with only the other forms transformers reads: refused naming the file and saying
 * that safetensors are needed (and how to get them) */
Test(safetensors, a_folder_of_pickled_weights_is_refused_naming_the_file, .init = hostile_setup,
     .fini = hostile_teardown) {
    static const char *const files[] = {"flax_model.msgpack", "tf_model.h5",
                                        "pytorch_model.bin.index.json", "pytorch_model.bin"};
    char path[512];
    StSet *s;
    for (int i = 0; i < 4; i++) { /* added in turn: the one transformers reads first is named */
        ts_write_text(ts_join(path, hostile_dir, files[i]), "not read");
        expect_fail(st_open(hostile_dir, &s, NULL), AG_ERR_IO, hostile_dir, files[i]);
        cr_assert(strstr(ag_last_error(), i < 2 ? "another library's format" : "PyTorch's pickle"),
                  "%s", ag_last_error());
        cr_assert(strstr(ag_last_error(), "the weights are needed as safetensors (transformers "
                                          "writes them: AutoModelForCausalLM.from_pretrained("),
                  "%s", ag_last_error());
    }
}

/* ---- memory: the file is mapped, not read ---- */

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

Test(safetensors, maps_the_file_instead_of_reading_it) {
    if (rss_kib() < 0) cr_skip_test("no /proc/self/status to read the resident memory from");
    size_t n = (size_t)8 << 20; /* 8 Mi floats: 32 MiB */
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)i;
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "st-big");
    ts_join(path, dir, "big.safetensors");
    StWriter *w = st_writer_new();
    st_add(w, "x", ST_F32, 2, (int64_t[]){2048, 4096}, x);
    cr_assert_eq(st_write(w, path, NULL), AG_OK, "%s", ag_last_error());
    st_writer_free(w);
    free(x);
    long before = rss_kib();
    StFile *f;
    cr_assert_eq(st_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    long after = rss_kib();
    cr_assert_lt(after - before, 4096,
                 "st_read of a 32 MiB file grew the resident memory by %ld KiB", after - before);
    const StTensor *t = st_find(f, "x");
    cr_assert_eq(t->nbytes, n * 4);
    cr_assert_eq(st_value(t, n - 1), (double)(n - 1));
    st_free(f);
    /* converted, a tensor's pages leave memory (st_set_done_with) and read back the same */
    StSet *set;
    cr_assert_eq(st_open(path, &set, NULL), AG_OK, "%s", ag_last_error());
    t = st_set_find(set, "x");
    Real *r = malloc(n * sizeof *r);
    cr_assert(r && st_to_reals(t, r) == AG_OK);
    long read = rss_kib();
    st_set_done_with(set, t);
    long done = rss_kib();
    cr_assert_gt(read - done, 24 * 1024, "st_set_done_with gave back %ld KiB of 32 MiB",
                 read - done);
    for (size_t i = 0; i < n; i += 4093) cr_assert_eq(st_value(t, i), (double)i);
    unsigned char keep[64];
    memset(keep, 7, sizeof keep);
    StTensor mine = {.name = "m",
                     .path = "mem",
                     .dtype = ST_U8,
                     .ndim = 1,
                     .shape = {64},
                     .count = 64,
                     .nbytes = 64,
                     .data = keep};
    st_set_done_with(set, &mine); /* not the set's: untouched */
    cr_assert(keep[0] == 7 && keep[63] == 7);
    free(r);
    st_set_free(set);
    ts_rm_tree(dir);
}

/* ---- parameters, shapes, writes that fail ---- */

Test(safetensors, saves_and_loads_a_models_parameters) {
    Arena *a = arena_new("st", 1 << 16);
    ParamList pl;
    ag_params_init(&pl);
    Tensor *w1 = tensor_param(a, 2, (int[]){3, 4}, "h.0.attn.c_attn.weight");
    Tensor *b1 = tensor_param(a, 1, (int[]){4}, "h.0.attn.c_attn.bias");
    fill_thirds(w1, 1);
    fill_thirds(b1, -1);
    ag_params_add(&pl, w1);
    ag_params_add(&pl, b1);
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "st");
    ts_join(path, dir, "p.safetensors");
    StStats st;
    cr_assert_eq(st_save_params(&pl, path, ST_REAL, &st), AG_OK, "%s", ag_last_error());
    cr_assert_eq(st.n_tensors, 2);
    cr_assert_eq(st.data_bytes, 16 * sizeof(Real));
    StFile *f;
    cr_assert_eq(st_read(path, &f, NULL), AG_OK);
    Tensor *w2 = tensor_new2(a, 3, 4, "w2"), *bad = tensor_new2(a, 4, 3, "bad");
    tensor_fill(bad, 7);
    int conv = -1;
    cr_assert_eq(st_to_tensor(st_find(f, "h.0.attn.c_attn.weight"), w2, &conv), AG_OK);
    cr_assert_eq(conv, 0);
    cr_assert_eq(memcmp(w2->data, w1->data, 12 * sizeof(Real)), 0);
    expect_fail(st_to_tensor(st_find(f, "h.0.attn.c_attn.weight"), bad, &conv), AG_ERR_SHAPE, path,
                "tensor 'h.0.attn.c_attn.weight': shape [3,4] in the file, (4,3) in 'bad'");
    for (size_t i = 0; i < bad->size; i++) cr_assert_eq(bad->data[i], 7);
    st_free(f);
    ag_params_free(&pl);
    ts_rm_tree(dir);
    arena_free(a);
}

Test(safetensors, a_failed_write_leaves_what_was_there) {
    char dir[256], path[512], sub[512];
    ts_tmp_dir(dir, sizeof dir, "st");
    StWriter *w = st_writer_new();
    st_add(w, "a", ST_U8, 1, (int64_t[]){3}, "abc");
    ts_join(path, dir, "missing/x.safetensors");
    expect_fail(st_write(w, path, NULL), AG_ERR_IO, path, "cannot create the temporary file");
    /* a folder in the way: the rename fails, the temporary file is removed */
    ts_join(sub, dir, "in_the_way");
    cr_assert_eq(mkdir(sub, 0700), 0);
    ts_join(path, sub, "keep");
    ts_write_text(path, "kept");
    expect_fail(st_write(w, sub, NULL), AG_ERR_IO, sub, "cannot rename");
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    cr_assert_eq(n, 1, "the temporary file was left behind");
    char *kept = ts_read_text(path, NULL);
    cr_assert_str_eq(kept, "kept");
    free(kept);
    st_writer_free(w);
    ts_rm_tree(dir);
}

/* ---- misuse of the writer aborts ---- */

static void dup_name(void *ctx) {
    (void)ctx;
    StWriter *w = st_writer_new();
    st_add(w, "a", ST_U8, 1, (int64_t[]){1}, "x");
    st_add(w, "a", ST_U8, 1, (int64_t[]){1}, "x");
}
static void meta_name(void *ctx) {
    (void)ctx;
    st_add(st_writer_new(), "__metadata__", ST_U8, 1, (int64_t[]){1}, "x");
}
static void empty_name(void *ctx) {
    (void)ctx;
    st_add(st_writer_new(), "", ST_U8, 1, (int64_t[]){1}, "x");
}
static void bad_utf8(void *ctx) {
    (void)ctx;
    st_add(st_writer_new(), "a\xff", ST_U8, 1, (int64_t[]){1}, "x");
}
static void negative_dim(void *ctx) {
    (void)ctx;
    st_add(st_writer_new(), "a", ST_U8, 1, (int64_t[]){-1}, "x");
}
static void format_meta(void *ctx) {
    (void)ctx;
    st_add_meta(st_writer_new(), "format", "tf");
}
static void int_real(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("st", 4096);
    st_add_real(st_writer_new(), "a", tensor_new1(a, 2, "a"), ST_I32);
}

Test(safetensors, writer_misuse_aborts_naming_it) {
    static const struct {
        void (*fn)(void *);
        const char *msg;
    } cases[] = {{dup_name, "st_add: tensor 'a' added twice"},
                 {meta_name, "'__metadata__' is not a tensor name"},
                 {empty_name, "a tensor needs a non-empty name"},
                 {bad_utf8, "is not UTF-8"},
                 {negative_dim, "'a': dimension 0 is -1"},
                 {format_meta, "\"format\" is always \"pt\""},
                 {int_real, "st_add_real: 'a': I32 is not F32, F64, F16 or BF16"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        Capture c;
        capture_run(cases[k].fn, NULL, &c);
        cr_assert(capture_aborted(&c), "%s: did not abort", cases[k].msg);
        cr_assert(capture_has(&c, cases[k].msg), "'%s' lacks '%s'", c.err, cases[k].msg);
    }
}
