/* tensor.c: arenas, tensor creation, shape helpers, status codes and the abort on misuse.
 * Not here: math (kernels in k_*.c), recording gradients (../autograd). Next: rng.c. */
#include "tensor.h"

#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

void ag_abort(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

static _Thread_local char last_error[512];

const char *ag_last_error(void) { return last_error; }

int ag_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *ag_strerror(int code) {
    switch (code) {
    case AG_OK: return "ok";
    case AG_ERR_IO: return "input/output error";
    case AG_ERR_FORMAT: return "bad file format";
    case AG_ERR_SHAPE: return "tensor missing or of the wrong shape";
    case AG_ERR_NOMEM: return "out of memory or size over the limit";
    case AG_ERR_ARG: return "bad argument";
    case AG_ERR_RANGE: return "value out of range";
    default: return "unknown error code";
    }
}

/* ---- arenas ---- */

#define ARENA_ALIGN 64

Arena *arena_new(const char *name, size_t capacity_bytes) {
    AG_CHECK_ARG(name);
    Arena *a = calloc(1, sizeof *a);
    AG_CHECK(a != NULL, "arena_new: out of memory for arena '%s'", name);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->cap = (capacity_bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (a->cap > 0) {
        a->base = aligned_alloc(ARENA_ALIGN, a->cap);
        AG_CHECK(a->base != NULL, "arena_new: cannot reserve %zu bytes for arena '%s'", a->cap,
                 name);
    }
    return a;
}

void arena_free(Arena *a) {
    if (!a) return;
    free(a->base);
    free(a);
}

void *arena_alloc(Arena *a, size_t bytes) {
    AG_CHECK_ARG(a);
    size_t need = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (need == 0) need = ARENA_ALIGN;
    AG_CHECK(need <= a->cap - a->used,
             "arena '%s' is full: %zu bytes needed, %zu available (capacity %zu)", a->name, need,
             a->cap - a->used, a->cap);
    void *p = a->base + a->used;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

void arena_reset(Arena *a) {
    AG_CHECK_ARG(a);
#ifdef AG_DEBUG
    /* Stale pointers into a reset arena now read NaN, which every check downstream notices. */
    Real nan_value = (Real)NAN;
    Real *p = (Real *)a->base;
    for (size_t i = 0; i < a->used / sizeof(Real); i++) p[i] = nan_value;
#endif
    a->used = 0;
}

/* ---- tensors ---- */

Tensor *tensor_new(Arena *a, int ndim, const int *shape, const char *name) {
    AG_CHECK(a != NULL, "tensor_new: argument 'a' is NULL (the arena of tensor '%s')",
             name ? name : "");
    AG_CHECK(ndim >= 0 && ndim <= AG_MAX_DIMS, "tensor_new: '%s' has %d dims (0..%d allowed)",
             name ? name : "", ndim, AG_MAX_DIMS);
    AG_CHECK(ndim == 0 || shape != NULL, "tensor_new: argument 'shape' is NULL for '%s' of %d dims",
             name ? name : "", ndim);
    Tensor *t = arena_alloc(a, sizeof *t);
    memset(t, 0, sizeof *t);
    t->ndim = ndim;
    t->size = 1;
    for (int i = 0; i < ndim; i++) {
        AG_CHECK(shape[i] > 0, "tensor_new: '%s' dim %d is %d (must be > 0)", name ? name : "", i,
                 shape[i]);
        t->shape[i] = shape[i];
        t->size *= (size_t)shape[i];
    }
    t->arena = a;
    t->data = arena_alloc(a, t->size * sizeof(Real));
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    return t;
}

Tensor *tensor_zeros(Arena *a, int ndim, const int *shape, const char *name) {
    AG_CHECK_ARG(a);
    Tensor *t = tensor_new(a, ndim, shape, name);
    memset(t->data, 0, t->size * sizeof(Real));
    return t;
}

Tensor *tensor_new1(Arena *a, int d0, const char *name) {
    AG_CHECK_ARG(a);
    return tensor_new(a, 1, (int[]){d0}, name);
}
Tensor *tensor_new2(Arena *a, int d0, int d1, const char *name) {
    AG_CHECK_ARG(a);
    return tensor_new(a, 2, (int[]){d0, d1}, name);
}
Tensor *tensor_new3(Arena *a, int d0, int d1, int d2, const char *name) {
    AG_CHECK_ARG(a);
    return tensor_new(a, 3, (int[]){d0, d1, d2}, name);
}
Tensor *tensor_new4(Arena *a, int d0, int d1, int d2, int d3, const char *name) {
    AG_CHECK_ARG(a);
    return tensor_new(a, 4, (int[]){d0, d1, d2, d3}, name);
}

Tensor *tensor_param(Arena *a, int ndim, const int *shape, const char *name) {
    AG_CHECK_ARG(a);
    Tensor *t = tensor_zeros(a, ndim, shape, name);
    t->is_param = 1;
    tensor_requires_grad(t);
    return t;
}

void tensor_set_name(Tensor *t, const char *fmt, ...) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(fmt);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}

void tensor_requires_grad(Tensor *t) {
    AG_CHECK_ARG(t);
    t->requires_grad = 1;
    if (!t->grad) {
        t->grad = arena_alloc(t->arena, t->size * sizeof(Real));
        memset(t->grad, 0, t->size * sizeof(Real));
    }
}

void tensor_zero_grad(Tensor *t) {
    AG_CHECK_ARG(t);
    if (t->grad) k_zero(t->grad, t->size);
}

void tensor_fill(Tensor *t, Real v) {
    AG_CHECK_ARG(t);
    for (size_t i = 0; i < t->size; i++) t->data[i] = v;
}

void tensor_copy_from_floats(Tensor *t, const float *src) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(src);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)src[i];
}

void tensor_copy_from_doubles(Tensor *t, const double *src) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(src);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)src[i];
}

int tensor_same_shape(const Tensor *a, const Tensor *b) {
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(b);
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

const char *tensor_shape_str(const Tensor *t) {
    static _Thread_local char bufs[8][64];
    static _Thread_local int next;
    char *b = bufs[next];
    next = (next + 1) % 8;
    if (!t) {
        snprintf(b, 64, "(NULL)");
        return b;
    }
    int n = snprintf(b, 64, "(");
    for (int i = 0; i < t->ndim; i++)
        n += snprintf(b + n, 64 - (size_t)n, i ? ",%d" : "%d", t->shape[i]);
    snprintf(b + n, 64 - (size_t)n, ")");
    return b;
}

size_t tensor_rows(const Tensor *t) {
    AG_CHECK_ARG(t);
    return t->ndim == 0 ? 1 : t->size / (size_t)t->shape[t->ndim - 1];
}

void tensor_print(const Tensor *t, int max) {
    AG_CHECK_ARG(t);
    fprintf(stderr, "%s %s:", t->name, tensor_shape_str(t));
    for (size_t i = 0; i < t->size && (int)i < max; i++)
        fprintf(stderr, " %.6g", (double)t->data[i]);
    if (t->size > (size_t)max) fprintf(stderr, " ...");
    fputc('\n', stderr);
}
