/* tensor.h: the data layer of attograd. The scalar type (Real), the Tensor, the Arena that
 * owns tensor memory, status codes and the abort-on-misuse macro.
 * Not here: the seeded RNG (rng.h), math loops (kernels.h), anything that records gradients
 * (../autograd/autograd.h). Read this first, then rng.h, then kernels.h.
 *
 * Memory has two lifetimes. Parameters, their gradients and optimizer state live in a
 * long-lived arena for the whole run; everything a forward pass makes lives in a step arena
 * that one arena_reset() frees. Arenas grow in chunks as they are used, and a reset keeps the
 * chunks, so a loop that does the same each step allocates nothing after its first. */
#ifndef ATTOGRAD_TENSOR_H
#define ATTOGRAD_TENSOR_H

#include <stddef.h>
#include <stdint.h>

/* ---- scalar type, chosen at build time (make REAL=double defines AG_REAL_DOUBLE) ---- */
#ifdef AG_REAL_DOUBLE
typedef double Real;
#define AG_REAL_NAME "double"
#else
typedef float Real;
#define AG_REAL_NAME "float"
#endif

#define AG_MAX_DIMS 4
#define AG_NAME_LEN 96

/* ---- status codes (for everything that touches the environment: files, flags, data) ----
 * 0 is success, failures are small negatives, ag_strerror() names them. The detailed message
 * of the last failure on this thread (with the path and the reason) is ag_last_error(). */
enum {
    AG_OK = 0,
    AG_ERR_IO = -1,     /* open, read, write, fsync or rename failed */
    AG_ERR_FORMAT = -2, /* the file is not what it claims (bad magic, CRC, header) */
    AG_ERR_SHAPE = -3,  /* a tensor is missing or has another shape than expected */
    AG_ERR_NOMEM = -4,  /* an allocation failed or a declared size is over the limit */
    AG_ERR_ARG = -5,    /* a bad argument from a user (flag, option, value) */
    AG_ERR_RANGE = -6,  /* a value is out of its allowed range (index, token id) */
};
const char *ag_strerror(int code);
const char *ag_last_error(void);
/* Records "fmt..." as the last error of this thread and returns code (for `return ag_fail(...)`). */
int ag_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- misuse of the API aborts, naming the place, the op and the shapes ---- */
void ag_abort(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
#define AG_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond)) ag_abort(__FILE__, __LINE__, __VA_ARGS__);                                    \
    } while (0)
/* The first lines of a public function: a NULL pointer argument aborts naming the function
 * and the argument, e.g. "tensor_fill: argument 't' is NULL". */
#define AG_CHECK_ARG(p) AG_CHECK((p) != NULL, "%s: argument '%s' is NULL", __func__, #p)

/* ---- Arena: a bump allocator that grows ----
 * Memory comes in chunks; the first has capacity_bytes (0: none until the first alloc), each
 * new one at least as much as all before it. Pointers stay valid until arena_reset, which
 * keeps the chunks for the next cycle. */
typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    char name[32];
    ArenaChunk *first, *cur; /* the chunks in order; the one allocations come from */
    size_t cap;              /* bytes reserved in all chunks */
    size_t used;             /* bytes handed out since the last reset (64-byte blocks) */
    size_t peak;             /* the most `used` has been */
    size_t limit;            /* cap may not pass it: SIZE_MAX unless arena_set_limit */
    int lazy_grads;          /* arena_lazy_grads */
} Arena;

Arena *arena_new(const char *name, size_t capacity_bytes);
void arena_free(Arena *a);
/* 64-byte aligned, uninitialised. Grows the arena when needed; aborts with the arena's name
 * when that would pass its limit or malloc fails. */
void *arena_alloc(Arena *a, size_t bytes);
/* Aborts if the arena already reserves more than limit_bytes. */
void arena_set_limit(Arena *a, size_t limit_bytes);
/* on 1: the parameters made in a from now on (tensor_param) get their gradient (zeroed) when
 * one is first needed (ag_backward, optim_new, a view of their rows) instead of at once, so
 * that a model that is only run holds no gradients (a published model loaded to sample or
 * study: half the memory); 0: at once (the default). Either way the same values. */
void arena_lazy_grads(Arena *a, int on);
/* Frees everything at once and keeps the chunks. Debug builds (AG_DEBUG) fill the freed
 * bytes with NaN. */
void arena_reset(Arena *a);

/* ---- Tensor: contiguous, row-major, shapes outermost first like PyTorch: (B,T,C) ---- */
typedef struct Tensor {
    int ndim;               /* 0 (a scalar) .. AG_MAX_DIMS */
    int shape[AG_MAX_DIMS]; /* shape[0] is outermost */
    size_t size;            /* number of elements: the product of shape */
    Real *data;
    Real *grad;   /* NULL until a gradient is needed */
    Arena *arena; /* where data (and grad) live */
    int requires_grad;
    int is_param;           /* lives for the whole run; its grad is zeroed by the caller */
    char name[AG_NAME_LEN]; /* shown in error messages and in the printed tape */
} Tensor;

/* A tensor of the given shape in arena a; data uninitialised (tensor_zeros: set to 0). */
Tensor *tensor_new(Arena *a, int ndim, const int *shape, const char *name);
Tensor *tensor_zeros(Arena *a, int ndim, const int *shape, const char *name);
/* Convenience: tensor_new with the shape given as arguments, e.g. tensor_new2(a, M, N, "w"). */
Tensor *tensor_new1(Arena *a, int d0, const char *name);
Tensor *tensor_new2(Arena *a, int d0, int d1, const char *name);
Tensor *tensor_new3(Arena *a, int d0, int d1, int d2, const char *name);
Tensor *tensor_new4(Arena *a, int d0, int d1, int d2, int d3, const char *name);
/* A parameter: data zeroed, requires_grad, gradient allocated and zeroed, in arena a (in an
 * arena_lazy_grads arena: the gradient NULL until first needed). */
Tensor *tensor_param(Arena *a, int ndim, const int *shape, const char *name);

void tensor_set_name(Tensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Turns gradient tracking on: allocates t->grad (zeroed) in t's arena if absent. */
void tensor_requires_grad(Tensor *t);
void tensor_zero_grad(Tensor *t);
void tensor_fill(Tensor *t, Real v);
/* Copies n = t->size values (float or double source, converted to Real). */
void tensor_copy_from_floats(Tensor *t, const float *src);
void tensor_copy_from_doubles(Tensor *t, const double *src);
/* Copies t's t->size values out as doubles into dst (a measure in double of the weights) */
void tensor_copy_to_doubles(const Tensor *t, double *dst);
int tensor_same_shape(const Tensor *a, const Tensor *b);
/* "(2,4,8)" in one of a few rotating per-thread buffers: several may be used in one message. */
const char *tensor_shape_str(const Tensor *t);
/* Elements of the leading dimensions: size / shape[ndim-1] (the "rows" of the last dim). */
size_t tensor_rows(const Tensor *t);
/* Prints name, shape and up to max values to stderr (for debugging and students). */
void tensor_print(const Tensor *t, int max);

#endif
