/* tensor.c: arenas, tensor creation, shape helpers, status codes and the abort on misuse.
 * Not here: math (kernels in k_*.c), recording gradients (../autograd). Next: rng.c. */
#define _DEFAULT_SOURCE /* madvise's MADV_HUGEPAGE beside POSIX 2008 */
#include "tensor.h"

#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

/* ---- arenas ----
 * An arena is a list of chunks, each one aligned_alloc'd block. Allocation bumps through the
 * current chunk; one that does not fit moves on to the next chunk (kept from an earlier
 * cycle, if big enough) or to a new one inserted there, of at least the bytes reserved so far
 * (so the chunks double) and never less than ARENA_MIN_CHUNK. Reset rewinds every chunk and
 * keeps them all: a loop that makes the same allocations each step reuses the same chunks and
 * never reaches malloc after its first step. The tail a chunk cannot fill stays unused until
 * the next reset. */

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)64 << 10)

struct ArenaChunk {
    struct ArenaChunk *next;
    char *base;
    size_t cap, used;
};

static size_t round_up(size_t bytes) {
    return (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

/* A chunk of at least ARENA_HUGE bytes is aligned to it and asks the system for huge pages
 * (Linux's transparent huge pages, when set to madvise): a 500 MB model's weights read once per
 * decoded token then cost a TLB entry per 2 MiB instead of per 4 KiB. */
#define ARENA_HUGE ((size_t)2 << 20)

/* A new chunk of cap bytes, after `after` (or the first when after is NULL). */
static ArenaChunk *chunk_insert(Arena *a, ArenaChunk *after, size_t cap) {
    ArenaChunk *c = calloc(1, sizeof *c);
    AG_CHECK(c != NULL, "arena '%s': out of memory for a chunk header", a->name);
#ifdef MADV_HUGEPAGE
    if (cap >= 2 * ARENA_HUGE) { /* (the block a whole number of huge pages; cap bytes used) */
        size_t bytes = cap + (ARENA_HUGE - cap % ARENA_HUGE) % ARENA_HUGE;
        c->base = aligned_alloc(ARENA_HUGE, bytes);
        if (c->base) madvise(c->base, bytes, MADV_HUGEPAGE); /* a hint: failure changes nothing */
    } else
#endif
        c->base = aligned_alloc(ARENA_ALIGN, cap);
    AG_CHECK(c->base != NULL, "arena '%s': cannot reserve %zu bytes more (%zu reserved)", a->name,
             cap, a->cap);
    c->cap = cap;
    if (after) {
        c->next = after->next;
        after->next = c;
    } else {
        c->next = a->first;
        a->first = c;
    }
    a->cap += cap;
    return c;
}

Arena *arena_new(const char *name, size_t capacity_bytes) {
    AG_CHECK_ARG(name);
    Arena *a = calloc(1, sizeof *a);
    AG_CHECK(a != NULL, "arena_new: out of memory for arena '%s'", name);
    snprintf(a->name, sizeof a->name, "%s", name);
    a->limit = SIZE_MAX;
    if (capacity_bytes > 0) a->cur = chunk_insert(a, NULL, round_up(capacity_bytes));
    return a;
}

void arena_set_limit(Arena *a, size_t limit_bytes) {
    AG_CHECK_ARG(a);
    AG_CHECK(limit_bytes >= a->cap,
             "arena_set_limit: arena '%s' already reserves %zu bytes, over the limit %zu", a->name,
             a->cap, limit_bytes);
    a->limit = limit_bytes;
}

void arena_lazy_grads(Arena *a, int on) {
    AG_CHECK_ARG(a);
    a->lazy_grads = on != 0;
}

void arena_free(Arena *a) {
    if (!a) return;
    ag_params_written(); /* a parameter made later may have a freed one's address */
    for (ArenaChunk *c = a->first, *next; c; c = next) {
        next = c->next;
        free(c->base);
        free(c);
    }
    free(a);
}

void *arena_alloc(Arena *a, size_t bytes) {
    AG_CHECK_ARG(a);
    AG_CHECK(bytes <= SIZE_MAX - ARENA_ALIGN, "arena '%s': %zu bytes asked for", a->name, bytes);
    size_t need = round_up(bytes);
    if (need == 0) need = ARENA_ALIGN;
    ArenaChunk *c = a->cur;
    if (!c || c->cap - c->used < need) {
        ArenaChunk *next = c ? c->next : a->first;
        if (next && next->cap >= need) {
            c = next; /* rewound by the last reset: empty */
        } else {
            size_t grow = a->cap > need ? a->cap : need;
            if (grow < ARENA_MIN_CHUNK) grow = round_up(ARENA_MIN_CHUNK);
            size_t room = a->limit - a->cap;
            AG_CHECK(need <= room,
                     "arena '%s' is full: %zu bytes needed, %zu reserved of its limit %zu", a->name,
                     need, a->cap, a->limit);
            if (grow > room) grow = room / ARENA_ALIGN * ARENA_ALIGN;
            c = chunk_insert(a, c, grow);
        }
        a->cur = c;
    }
    void *p = c->base + c->used;
    c->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return p;
}

/* Declared in ../autograd/ops_internal.h (the tape's gradient recycling uses it): the block
 * that ends at end grows by bytes in place when end is where the current chunk is filled up to
 * and the chunk has room; returns 1 then, else 0 and nothing changes. */
int arena_grow_last(Arena *a, const void *end, size_t bytes) {
    ArenaChunk *c = a->cur;
    size_t need = round_up(bytes);
    if (!c || (const char *)end != c->base + c->used || c->cap - c->used < need) return 0;
    c->used += need;
    a->used += need;
    if (a->used > a->peak) a->peak = a->used;
    return 1;
}

void arena_reset(Arena *a) {
    AG_CHECK_ARG(a);
    for (ArenaChunk *c = a->first; c; c = c->next) {
#ifdef AG_DEBUG
        /* Stale pointers into a reset arena now read NaN, which every check downstream notices. */
        Real nan_value = (Real)NAN;
        Real *p = (Real *)c->base;
        for (size_t i = 0; i < c->used / sizeof(Real); i++) p[i] = nan_value;
#endif
        c->used = 0;
    }
    a->cur = a->first;
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
    if (a->lazy_grads)
        t->requires_grad = 1; /* its gradient comes with its first use (arena_lazy_grads) */
    else
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
    ag_params_written();
}

void tensor_copy_from_floats(Tensor *t, const float *src) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(src);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)src[i];
    ag_params_written();
}

void tensor_copy_from_doubles(Tensor *t, const double *src) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(src);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)src[i];
    ag_params_written();
}

void tensor_copy_to_doubles(const Tensor *t, double *dst) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(dst);
    for (size_t i = 0; i < t->size; i++) dst[i] = (double)t->data[i];
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
