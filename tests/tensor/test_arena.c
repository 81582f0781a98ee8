/* test_arena.c: arenas (alignment, growth, limits, reset, peak), tensor creation and shapes, and the
 * status codes. The abort messages are checked in a child process (tests/support/expect_abort.h).
 * Not here: the RNG (test_rng.c) and anything on a tape (tests/autograd). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"

/* ---- arenas ---- */

Test(arena, alloc_returns_64_byte_aligned_pointers) {
    Arena *a = arena_new("align", 1 << 14);
    const size_t sizes[] = {1, 3, 8, 63, 64, 65, 100, 0, 200, 4096, 7};
    char *prev = NULL;
    size_t prev_size = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = arena_alloc(a, sizes[i]);
        cr_assert_eq((uintptr_t)p % 64, 0, "alloc(%zu) returned %p", sizes[i], (void *)p);
        if (prev)
            cr_assert_geq(p, prev + prev_size, "alloc(%zu) overlaps the previous one", sizes[i]);
        memset(p, 0xAB, sizes[i]); /* the bytes are usable (ASan checks the bounds) */
        prev = p;
        prev_size = sizes[i];
    }
    /* every size rounds up to whole 64-byte blocks; a 0-byte request still takes one */
    cr_assert_eq(a->used, 64 * (1 + 1 + 1 + 1 + 1 + 2 + 2 + 1 + 4 + 64 + 1));
    arena_free(a);
}

Test(arena, capacity_rounds_up_and_long_names_are_cut) {
    Arena *a = arena_new("a-name-much-longer-than-the-thirty-one-characters-kept", 100);
    cr_assert_eq(a->cap, 128);
    cr_assert_eq(strlen(a->name), sizeof a->name - 1);
    cr_assert_eq(strncmp(a->name, "a-name-much-longer", 18), 0);
    cr_assert_eq(a->used, 0);
    cr_assert_eq(a->peak, 0);
    arena_free(a);
    arena_free(NULL); /* allowed, like free(NULL) */
}

Test(arena, grows_past_its_first_chunk_and_keeps_what_it_holds) {
    Arena *a = arena_new("activations", 256);
    unsigned char *first = arena_alloc(a, 100); /* takes 128 */
    memset(first, 0x5A, 100);
    unsigned char *second = arena_alloc(a, 200); /* needs 256, 128 left: a new chunk */
    cr_assert_eq((uintptr_t)second % 64, 0);
    memset(second, 0xA5, 200);
    for (int i = 0; i < 100; i++) cr_assert_eq(first[i], 0x5A, "byte %d of the first block", i);
    cr_assert_eq(a->used, 128 + 256);
    cr_assert_gt(a->cap, 256);
    arena_free(a);
}

Test(arena, an_empty_arena_reserves_on_its_first_alloc) {
    Arena *a = arena_new("empty", 0);
    cr_assert_eq(a->cap, 0);
    char *p = arena_alloc(a, 1);
    cr_assert_not_null(p);
    cr_assert_eq(a->used, 64);
    cr_assert_geq(a->cap, 64);
    arena_free(a);
}

/* Many small allocations and a large one: the chunks at least double, so what is reserved
 * stays within a small factor of what is used. */
Test(arena, growth_is_geometric_and_not_wasteful) {
    Arena *a = arena_new("grow", 0);
    for (int i = 0; i < 10000; i++) arena_alloc(a, 1000);
    arena_alloc(a, (size_t)3 << 20);
    cr_assert_eq(a->used, 10000 * 1024 + ((size_t)3 << 20));
    cr_assert_leq(a->cap, 3 * a->used + ((size_t)64 << 10), "%zu reserved for %zu used", a->cap,
                  a->used);
    arena_free(a);
}

/* A reset keeps the chunks: the same allocations again get the same pointers and reserve
 * nothing more (the "no malloc after the first step" of a training loop). */
Test(arena, reset_keeps_the_chunks_for_the_same_allocations) {
    Arena *a = arena_new("step", 0);
    const size_t sizes[] = {100, 70000, 5, 300000, 64, 1 << 20, 9000};
    void *first[7];
    for (int i = 0; i < 7; i++) first[i] = arena_alloc(a, sizes[i]);
    size_t cap = a->cap, used = a->used;
    for (int cycle = 0; cycle < 3; cycle++) {
        arena_reset(a);
        for (int i = 0; i < 7; i++)
            cr_assert_eq(arena_alloc(a, sizes[i]), first[i], "cycle %d, alloc %d moved", cycle, i);
        cr_assert_eq(a->cap, cap, "cycle %d reserved more", cycle);
        cr_assert_eq(a->used, used);
    }
    arena_free(a);
}

static void over_limit(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("activations", 256);
    arena_set_limit(a, 256);
    arena_alloc(a, 100); /* takes 128 */
    arena_alloc(a, 200); /* needs 256, 128 left and no room to grow */
}

Test(arena, passing_its_limit_aborts_naming_the_arena_and_the_bytes) {
    Capture c;
    capture_run(over_limit, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_file_line(&c, NULL, 0, NULL, NULL), "no file:line prefix: %s", c.err);
    cr_assert(capture_has(&c, "arena 'activations' is full: 256 bytes needed, 256 reserved of "
                              "its limit 256"),
              "%s", c.err);
}

static void limit_below_reserved(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("params", 4096);
    arena_set_limit(a, 1024);
}

Test(arena, a_limit_below_what_is_reserved_aborts) {
    Capture c;
    capture_run(limit_below_reserved, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "arena_set_limit: arena 'params' already reserves 4096 bytes, over "
                              "the limit 1024"),
              "%s", c.err);
}

static void overflow_by_tensor(void *ctx) {
    (void)ctx;
    Arena *a = arena_new("params", 1024);
    arena_set_limit(a, 1024);
    tensor_new2(a, 100, 100, "big");
}

Test(arena, a_tensor_too_big_for_a_limited_arena_aborts) {
    Capture c;
    capture_run(overflow_by_tensor, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    char need[64];
    snprintf(need, sizeof need, "%zu bytes needed", (100 * 100 * sizeof(Real) + 63) / 64 * 64);
    cr_assert(capture_has(&c, "arena 'params' is full"), "%s", c.err);
    cr_assert(capture_has(&c, need), "want \"%s\" in: %s", need, c.err);
}

Test(arena, exactly_full_is_fine) {
    Arena *a = arena_new("exact", 256);
    arena_alloc(a, 128);
    arena_alloc(a, 65); /* rounds up to 128: the arena is now exactly full */
    cr_assert_eq(a->used, a->cap);
    arena_free(a);
}

Test(arena, reset_frees_everything_and_keeps_the_peak) {
    Arena *a = arena_new("step", 4096);
    char *first = arena_alloc(a, 100);
    arena_alloc(a, 1000);
    size_t used = a->used;
    cr_assert_eq(used, 128 + 1024);
    cr_assert_eq(a->peak, used);
    arena_reset(a);
    cr_assert_eq(a->used, 0);
    cr_assert_eq(a->peak, used, "reset must keep the peak");
    /* memory is reused from the start */
    cr_assert_eq(arena_alloc(a, 10), first);
    cr_assert_eq(a->peak, used, "a smaller step does not change the peak");
    arena_alloc(a, 2000);
    cr_assert_eq(a->peak, 64 + 2048, "a bigger step raises it");
    arena_free(a);
}

#ifdef AG_DEBUG
/* Debug builds poison what a reset frees, so a stale pointer reads NaN instead of old values. */
Test(arena, reset_fills_freed_memory_with_nan_in_debug_builds) {
    Arena *a = arena_new("step", 4096);
    Tensor *t = tensor_new2(a, 7, 9, "stale");
    tensor_fill(t, 1);
    Real *data = t->data;
    size_t n = t->size;
    arena_reset(a);
    for (size_t i = 0; i < n; i++)
        cr_assert(isnan(data[i]), "element %zu is %g", i, (double)data[i]);
    arena_free(a);
}
#endif

/* ---- tensors ---- */

Test(tensor, new_sets_shape_size_and_name) {
    Arena *a = arena_new("t", 1 << 14);
    Tensor *t = tensor_new(a, 3, (int[]){2, 3, 4}, "h");
    cr_assert_eq(t->ndim, 3);
    cr_assert_eq(t->shape[0], 2);
    cr_assert_eq(t->shape[1], 3);
    cr_assert_eq(t->shape[2], 4);
    cr_assert_eq(t->size, 24);
    cr_assert_str_eq(t->name, "h");
    cr_assert_eq(t->arena, a);
    cr_assert_null(t->grad);
    cr_assert_eq(t->requires_grad, 0);
    cr_assert_eq(t->is_param, 0);
    cr_assert_eq((uintptr_t)t->data % 64, 0);
    cr_assert_eq(tensor_rows(t), 6);

    Tensor *s = tensor_new(a, 0, NULL, NULL);
    cr_assert_eq(s->ndim, 0);
    cr_assert_eq(s->size, 1);
    cr_assert_str_eq(s->name, "");
    cr_assert_eq(tensor_rows(s), 1);

    Tensor *t4 = tensor_new4(a, 2, 1, 3, 5, "four");
    cr_assert_eq(t4->ndim, 4);
    cr_assert_eq(t4->size, 30);
    cr_assert_eq(tensor_new1(a, 7, "one")->size, 7);
    cr_assert_eq(tensor_new2(a, 7, 2, "two")->shape[1], 2);
    cr_assert_eq(tensor_new3(a, 7, 2, 3, "three")->size, 42);

    tensor_set_name(t, "layer%d.%s", 3, "mlp");
    cr_assert_str_eq(t->name, "layer3.mlp");
    arena_free(a);
}

Test(tensor, zeros_fill_and_copy) {
    Arena *a = arena_new("t", 1 << 14);
    /* dirty the arena first, so zeroing is visible */
    memset(arena_alloc(a, 1024), 0x7F, 1024);
    arena_reset(a);
    Tensor *z = tensor_zeros(a, 2, (int[]){3, 5}, "z");
    for (size_t i = 0; i < z->size; i++) cr_assert_eq(z->data[i], 0);
    tensor_fill(z, (Real)2.5);
    for (size_t i = 0; i < z->size; i++) cr_assert_eq(z->data[i], (Real)2.5);
    Tensor *u = tensor_new1(a, 3, "u");
    tensor_copy_from_floats(u, (float[]){1.5f, -2, 3});
    cr_assert_eq(u->data[1], (Real)-2);
    tensor_copy_from_doubles(u, (double[]){0.25, 4, -8});
    cr_assert_eq(u->data[2], (Real)-8);
    arena_free(a);
}

static void zero_dim(void *ctx) {
    (void)ctx;
    tensor_new(arena_new("t", 1 << 12), 3, (int[]){2, 0, 4}, "bad");
}
static void negative_dim(void *ctx) {
    (void)ctx;
    tensor_new(arena_new("t", 1 << 12), 2, (int[]){-3, 4}, "neg");
}
static void too_many_dims(void *ctx) {
    (void)ctx;
    tensor_new(arena_new("t", 1 << 12), 5, (int[]){1, 1, 1, 1, 1}, "five");
}

Test(tensor, new_with_a_dim_of_zero_or_less_aborts) {
    Capture c;
    capture_run(zero_dim, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "tensor_new: 'bad' dim 1 is 0 (must be > 0)"), "%s", c.err);
    capture_run(negative_dim, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "tensor_new: 'neg' dim 0 is -3"), "%s", c.err);
    capture_run(too_many_dims, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "tensor_new: 'five' has 5 dims (0..4 allowed)"), "%s", c.err);
}

Test(tensor, new_with_a_dim_of_zero_aborts, .signal = SIGABRT) {
    tensor_new2(arena_new("t", 1 << 12), 3, 0, "bad");
}

Test(tensor, param_is_zeroed_with_a_zeroed_grad) {
    Arena *a = arena_new("params", 1 << 14);
    memset(arena_alloc(a, 8192), 0x5A, 8192); /* garbage where the parameter will go */
    arena_reset(a);
    Tensor *p = tensor_param(a, 2, (int[]){16, 17}, "w");
    cr_assert_eq(p->requires_grad, 1);
    cr_assert_eq(p->is_param, 1);
    cr_assert_not_null(p->grad);
    cr_assert_neq(p->grad, p->data);
    for (size_t i = 0; i < p->size; i++) {
        cr_assert_eq(p->data[i], 0, "data[%zu]", i);
        cr_assert_eq(p->grad[i], 0, "grad[%zu]", i);
    }
    /* tensor_requires_grad on a tensor that has a gradient keeps it */
    p->grad[3] = 1;
    Real *g = p->grad;
    tensor_requires_grad(p);
    cr_assert_eq(p->grad, g);
    cr_assert_eq(p->grad[3], 1);
    tensor_zero_grad(p);
    cr_assert_eq(p->grad[3], 0);
    arena_free(a);
}

Test(tensor, shape_str_formats_shapes) {
    Arena *a = arena_new("t", 1 << 16);
    Tensor *t = tensor_new3(a, 2, 3, 4, "t");
    Tensor *s = tensor_new(a, 0, NULL, "s");
    Tensor *v = tensor_new1(a, 17, "v");
    /* several results stay valid together (they are used in one message) */
    const char *ts = tensor_shape_str(t), *ss = tensor_shape_str(s), *vs = tensor_shape_str(v);
    cr_assert_str_eq(ts, "(2,3,4)");
    cr_assert_str_eq(ss, "()");
    cr_assert_str_eq(vs, "(17)");
    cr_assert_str_eq(tensor_shape_str(NULL), "(NULL)");
    cr_assert_str_eq(tensor_shape_str(tensor_new4(a, 1000, 1, 2, 3, "w")), "(1000,1,2,3)");
    cr_assert(tensor_same_shape(t, t));
    cr_assert(!tensor_same_shape(t, v));
    cr_assert(!tensor_same_shape(tensor_new2(a, 2, 3, "x"), tensor_new2(a, 3, 2, "y")));
    arena_free(a);
}

/* ---- status codes ---- */

Test(status, strerror_names_every_code) {
    const int codes[] = {AG_OK,        AG_ERR_IO,  AG_ERR_FORMAT, AG_ERR_SHAPE,
                         AG_ERR_NOMEM, AG_ERR_ARG, AG_ERR_RANGE};
    const int n = sizeof codes / sizeof codes[0];
    const char *unknown = ag_strerror(12345);
    cr_assert_str_eq(unknown, "unknown error code");
    cr_assert_str_eq(ag_strerror(-7), unknown);
    for (int i = 0; i < n; i++) {
        const char *s = ag_strerror(codes[i]);
        cr_assert(s && *s, "code %d has no message", codes[i]);
        cr_assert_str_neq(s, unknown, "code %d is not named", codes[i]);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(s, ag_strerror(codes[j]), "codes %d and %d share a message", codes[i],
                              codes[j]);
    }
    cr_assert_str_eq(ag_strerror(AG_OK), "ok");
}

Test(status, fail_records_the_message_and_returns_the_code) {
    int rc = ag_fail(AG_ERR_IO, "cannot open '%s': %s", "ckpt/model.bin", "No such file");
    cr_assert_eq(rc, AG_ERR_IO);
    cr_assert_str_eq(ag_last_error(), "cannot open 'ckpt/model.bin': No such file");
    rc = ag_fail(AG_ERR_RANGE, "token %d outside [0, %d)", 70000, 50257);
    cr_assert_eq(rc, AG_ERR_RANGE);
    cr_assert_str_eq(ag_last_error(), "token 70000 outside [0, 50257)");
    /* a long message is cut, not overflowed */
    char long_msg[2000];
    memset(long_msg, 'x', sizeof long_msg - 1);
    long_msg[sizeof long_msg - 1] = '\0';
    ag_fail(AG_ERR_ARG, "%s", long_msg);
    size_t len = strlen(ag_last_error());
    cr_assert(len > 100 && len < sizeof long_msg - 1, "length %zu", len);
}

Test(tensor, copy_to_doubles_gives_every_value_back) {
    Arena *a = arena_new("t", 1 << 14);
    Tensor *u = tensor_new(a, 2, (int[]){2, 3}, "u");
    const double v[6] = {0.25, 4, -8, 1.5, 0, -0.125};
    tensor_copy_from_doubles(u, v);
    double out[7] = {0, 0, 0, 0, 0, 0, 99};
    tensor_copy_to_doubles(u, out);
    for (int i = 0; i < 6; i++) cr_assert_eq(out[i], v[i], "%d: %g", i, out[i]);
    cr_assert_eq(out[6], 99, "t->size values, no more");
    arena_free(a);
}
