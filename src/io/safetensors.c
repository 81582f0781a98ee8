/* safetensors.c: what the reader and the writer of safetensors files share: the dtype table
 * (names and sizes as the reference library's Dtype), the half-precision formats decoded
 * exactly (F16: IEEE 754 binary16; BF16: the upper 16 bits of a binary32), and the conversions
 * of a file's tensor into Real (st_value, st_to_reals, st_to_tensor, st_check_finite).
 * Not here: the file's layout (safetensors_read.c, safetensors_write.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "../tensor/threads.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "attograd's safetensors code assumes a little-endian host, like the files"
#endif

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_N_DTYPES] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},           [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_I16] = {"I16", 2},
    [ST_U16] = {"U16", 2},         [ST_F16] = {"F16", 2},         [ST_BF16] = {"BF16", 2},
    [ST_I32] = {"I32", 4},         [ST_U32] = {"U32", 4},         [ST_F32] = {"F32", 4},
    [ST_F64] = {"F64", 8},         [ST_I64] = {"I64", 8},         [ST_U64] = {"U64", 8},
};

const char *st_dtype_name(StDtype d) { return (unsigned)d < ST_N_DTYPES ? dtypes[d].name : "?"; }
size_t st_dtype_size(StDtype d) { return (unsigned)d < ST_N_DTYPES ? dtypes[d].size : 0; }
int st_dtype_is_float(StDtype d) {
    return d == ST_F16 || d == ST_BF16 || d == ST_F32 || d == ST_F64;
}

/* binary16: sign, 5 exponent bits (bias 15), 10 fraction bits; exact in a double */
static double f16_value(uint16_t h) {
    int e = (h >> 10) & 0x1f;
    double mag = e == 0    ? ldexp((double)(h & 0x3ff), -24)
                 : e == 31 ? ((h & 0x3ff) ? NAN : INFINITY)
                           : ldexp((double)(0x400 | (h & 0x3ff)), e - 25);
    return (h & 0x8000) ? -mag : mag;
}

static float bf16_value(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

double st_value(const StTensor *t, size_t i) {
    AG_CHECK_ARG(t);
    AG_CHECK(i < t->count, "st_value: index %zu outside tensor '%s' of %zu elements", i, t->name,
             t->count);
    const unsigned char *p = t->data + i * st_dtype_size(t->dtype);
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
    } v;
    memcpy(&v, p, st_dtype_size(t->dtype));
    switch (t->dtype) {
    case ST_I8: return v.i8;
    case ST_I16: return v.i16;
    case ST_U16: return v.u16;
    case ST_F16: return f16_value(v.u16);
    case ST_BF16: return bf16_value(v.u16);
    case ST_I32: return v.i32;
    case ST_U32: return v.u32;
    case ST_F32: return v.f32;
    case ST_F64: return v.f64;
    case ST_I64: return (double)v.i64;
    case ST_U64: return (double)v.u64;
    default: return v.u8; /* BOOL, U8 and the F8 types' raw bytes */
    }
}

/* ---- whole tensors: one loop per dtype (a switch per value was a tenth of loading GPT-2) ---- */

int st_to_reals(const StTensor *t, Real *out) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(out);
    ag_params_written(); /* out may be a parameter's data */
    if (!st_dtype_is_float(t->dtype))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: tensor '%s': stored as %s, not as a float type (F16, BF16, F32 "
                       "or F64)",
                       t->path, t->name, st_dtype_name(t->dtype));
    if (t->dtype == ST_REAL) { /* the build's own type: the bytes as they are */
        if (t->nbytes) memcpy(out, t->data, t->nbytes);
        return AG_OK;
    }
    const unsigned char *p = t->data;
    size_t n = t->count;
    uint16_t h;
    float f;
    double d;
    switch (t->dtype) {
    case ST_F16:
        for (size_t i = 0; i < n; i++) memcpy(&h, p + 2 * i, 2), out[i] = (Real)f16_value(h);
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) memcpy(&h, p + 2 * i, 2), out[i] = (Real)bf16_value(h);
        break;
    case ST_F32:
        for (size_t i = 0; i < n; i++) memcpy(&f, p + 4 * i, 4), out[i] = (Real)f;
        break;
    default: /* ST_F64 */
        for (size_t i = 0; i < n; i++) memcpy(&d, p + 8 * i, 8), out[i] = (Real)d;
        break;
    }
    return AG_OK;
}

const char *st_shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    AG_CHECK_ARG(buf);
    AG_CHECK(ndim == 0 || shape != NULL, "%s: argument 'shape' is NULL", __func__);
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
    return buf;
}

/* dst (any shape) */
int st_to_tensor(const StTensor *t, Tensor *dst, int *converted) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(dst);
    int same = t->ndim == dst->ndim;
    for (int i = 0; same && i < t->ndim; i++) same = t->shape[i] == dst->shape[i];
    if (!same) {
        char fs[ST_MAX_DIMS * 24];
        return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s': shape %s in the file, %s in '%s'", t->path,
                       t->name, st_shape_str(fs, sizeof fs, t->ndim, t->shape),
                       tensor_shape_str(dst), dst->name);
    }
    int rc = st_to_reals(t, dst->data);
    if (rc == AG_OK && converted) *converted = t->dtype != ST_REAL;
    return rc;
}

/* Finite as the build's Real: the stored exponent bits not all ones (NaN and the infinities
 * have them all set; every finite F16, BF16 and F32 value is finite as a float), and for F64 in
 * the float build the value rounded to float. The scans test a block at a time (a loop the
 * compiler vectorizes) and look for the index only in a block that has one. */
#define SCAN_BLOCK 256
#ifndef AG_REAL_DOUBLE
static int float_nonfinite(float r) {
    uint32_t b;
    memcpy(&b, &r, sizeof b);
    return (b & 0x7f800000u) == 0x7f800000u;
}
#endif

/* the index of the first of t's n values whose exponent bits (mask) are all set; n if none */
static size_t scan_bits(const unsigned char *p, size_t n, size_t size, uint64_t mask) {
    for (size_t i0 = 0; i0 < n; i0 += SCAN_BLOCK) {
        size_t i1 = n - i0 < SCAN_BLOCK ? n : i0 + SCAN_BLOCK;
        int bad = 0;
        if (size == 2)
            for (size_t i = i0; i < i1; i++) {
                uint16_t v;
                memcpy(&v, p + 2 * i, 2);
                bad |= (v & mask) == mask;
            }
        else if (size == 4)
            for (size_t i = i0; i < i1; i++) {
                uint32_t v;
                memcpy(&v, p + 4 * i, 4);
                bad |= (v & mask) == mask;
            }
        else
            for (size_t i = i0; i < i1; i++) {
                uint64_t v;
                memcpy(&v, p + 8 * i, 8);
                bad |= (v & mask) == mask;
            }
        if (!bad) continue;
        for (size_t i = i0; i < i1; i++) {
            uint64_t v = 0;
            memcpy(&v, p + size * i, size);
            if ((v & mask) == mask) return i;
        }
    }
    return n;
}

/* the index of t's first value that is not finite as a Real (F64 in the float build: also one
 * past FLT_MAX); t->count if none */
static size_t first_nonfinite(const StTensor *t) {
    const unsigned char *p = t->data;
    size_t n = t->count;
    switch (t->dtype) {
    case ST_F16: return scan_bits(p, n, 2, 0x7c00u);
    case ST_BF16: return scan_bits(p, n, 2, 0x7f80u);
    case ST_F32: return scan_bits(p, n, 4, 0x7f800000u);
    default: /* ST_F64 */
#ifdef AG_REAL_DOUBLE
        return scan_bits(p, n, 8, 0x7ff0000000000000u);
#else
        for (size_t i0 = 0; i0 < n; i0 += SCAN_BLOCK) {
            size_t i1 = n - i0 < SCAN_BLOCK ? n : i0 + SCAN_BLOCK;
            int bad = 0;
            for (size_t i = i0; i < i1; i++) {
                double d;
                memcpy(&d, p + 8 * i, 8);
                bad |= float_nonfinite((float)d);
            }
            if (!bad) continue;
            for (size_t i = i0; i < i1; i++) {
                double d;
                memcpy(&d, p + 8 * i, 8);
                if (float_nonfinite((float)d)) return i;
            }
        }
        return n;
#endif
    }
}

int st_check_finite(const StTensor *t) {
    AG_CHECK_ARG(t);
    if (!st_dtype_is_float(t->dtype))
        return ag_fail(AG_ERR_FORMAT, "%s: tensor '%s': stored as %s, not as a float type", t->path,
                       t->name, st_dtype_name(t->dtype));
    size_t i = first_nonfinite(t);
    if (i == t->count) return AG_OK;
    double v = st_value(t, i);
    return ag_fail(AG_ERR_RANGE, "%s: tensor '%s'[%zu] = %.9g: must be finite%s", t->path, t->name,
                   i, v, isfinite(v) ? " as the build's floating type" : "");
}
