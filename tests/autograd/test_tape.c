/* test_tape.c: the tape itself. Gradients of a tensor used twice add up; backward runs once per
 * step and only from a scalar; no-grad mode records nothing; reset empties the tape and its
 * arena; the printed tape lists ops newest first with shapes; a small chain matches gradients
 * worked out by hand; intermediate gradient buffers are recycled during backward (freed
 * neighbours merge, larger blocks are split); a training-like loop stops growing its arenas
 * after the first step; and ag_backward_on_leaf calls each leaf once, when its gradient is final.
 * Not here: the gradient of each op (test_gradcheck.c) and op misuse (test_errors.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "attograd.h"
#include "expect_abort.h"

static Tensor *from_doubles(Arena *a, int ndim, const int *shape, const double *v,
                            const char *name) {
    Tensor *t = tensor_new(a, ndim, shape, name);
    tensor_copy_from_doubles(t, v);
    return t;
}

#define TOL 1e-6

/* ---- a tensor used twice ---- */

Test(ag_tape, tensor_used_twice_in_mul_gets_2x) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = from_doubles(params, 1, (int[]){4}, (double[]){1.5, -2, 0.25, 3}, "x");
    tensor_requires_grad(x);
    ag_backward(tape, ag_sum(tape, ag_mul(tape, x, x))); /* d/dx sum x^2 = 2x */
    for (size_t i = 0; i < x->size; i++)
        cr_assert_float_eq(x->grad[i], 2 * x->data[i], TOL, "element %zu", i);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

Test(ag_tape, tensor_used_twice_in_add_gets_2) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = from_doubles(params, 2, (int[]){2, 2}, (double[]){1, 2, 3, 4}, "x");
    tensor_requires_grad(x);
    ag_backward(tape, ag_sum(tape, ag_add(tape, x, x)));
    for (size_t i = 0; i < x->size; i++) cr_assert_float_eq(x->grad[i], 2.0, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* x feeds two different branches: L = sum(x) + sum(3x) - mean(x), so dL/dx = 1 + 3 - 1/n */
Test(ag_tape, tensor_used_in_two_branches_gets_the_sum) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = from_doubles(params, 1, (int[]){5}, (double[]){1, -1, 2, -2, 0.5}, "x");
    tensor_requires_grad(x);
    Tensor *l = ag_sub(tape, ag_add(tape, ag_sum(tape, x), ag_sum(tape, ag_scale(tape, x, 3))),
                       ag_mean(tape, x));
    ag_backward(tape, l);
    for (size_t i = 0; i < x->size; i++) cr_assert_float_eq(x->grad[i], 4.0 - 0.2, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* Gradients accumulate across steps too: two steps without zeroing give twice the gradient. */
Test(ag_tape, parameter_gradients_accumulate_across_steps) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *w = tensor_param(params, 1, (int[]){3}, "w");
    tensor_copy_from_doubles(w, (double[]){1, 2, 3});
    for (int step = 0; step < 2; step++) {
        ag_tape_reset(tape);
        ag_backward(tape, ag_sum(tape, ag_scale(tape, w, 0.5)));
    }
    for (size_t i = 0; i < w->size; i++) cr_assert_float_eq(w->grad[i], 1.0, TOL);
    tensor_zero_grad(w);
    for (size_t i = 0; i < w->size; i++) cr_assert_eq(w->grad[i], 0);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* ---- misuse of backward (the message is checked in a child process) ---- */

static void backward_of_matrix(void *ctx) {
    (void)ctx;
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(tape->arena, 2, (int[]){2, 3}, "x");
    tensor_requires_grad(x);
    ag_backward(tape, ag_relu(tape, x));
}

/* Backward recycles the gradient buffers of intermediates: a chain of 30 ops on 1000 values
 * needs two gradient buffers at a time, not 30; the intermediates' grads are NULL afterwards
 * (as PyTorch's non-leaf .grad is None) and the leaf's is right. */
Test(ag_tape, intermediate_gradients_are_released_and_reused) {
    Arena *params = arena_new("params", 1 << 14);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 20));
    Tensor *x = tensor_new1(params, 1000, "x");
    tensor_fill(x, 1);
    tensor_requires_grad(x);
    Tensor *h[31];
    h[0] = x;
    for (int i = 1; i <= 30; i++)
        h[i] = i % 2 ? ag_scale(tape, h[i - 1], 2) : ag_relu(tape, h[i - 1]);
    Tensor *loss = ag_sum(tape, h[30]);
    size_t forward = tape->arena->used, one = (1000 * sizeof(Real) + 63) / 64 * 64;
    ag_backward(tape, loss);
    cr_assert_leq(tape->arena->used - forward, 2 * one + 64, "backward took %zu bytes",
                  tape->arena->used - forward);
    for (int i = 1; i <= 30; i++) cr_assert_null(h[i]->grad, "h[%d] kept its gradient", i);
    cr_assert_null(loss->grad);
    for (size_t i = 0; i < x->size; i++) cr_assert_float_eq(x->grad[i], 32768.0, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* Freed gradient blocks merge with free neighbours and a larger free block is split: x (40,100)
 * -> scale -> gather 20 rows -> scale -> scatter them back to (4,10,100) -> sum. Backward
 * takes d's gradient (4000 values, block A), then c's (2000, block B); b's gradient is cut from
 * A once d's is freed, and when c's is freed the rest of A and B (adjacent) make one block of
 * 4000 values for a's. Without merging, a's gradient would be a third block. */
Test(ag_tape, freed_gradient_blocks_merge_and_split) {
    Arena *params = arena_new("params", 1 << 16);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 20));
    Tensor *x = tensor_new2(params, 40, 100, "x");
    tensor_fill(x, 1);
    tensor_requires_grad(x);
    int rows[20];
    for (int i = 0; i < 20; i++) rows[i] = 2 * i;
    Tensor *a = ag_scale(tape, x, 2);
    Tensor *b = ag_gather_rows(tape, a, rows, 20);
    Tensor *c = ag_scale(tape, b, 3);
    Tensor *d = ag_scatter_rows(tape, c, rows, 4, 10);
    Tensor *loss = ag_sum(tape, d);
    size_t forward = tape->arena->used, big = 4000 * sizeof(Real), small = 2000 * sizeof(Real);
    ag_backward(tape, loss);
    cr_assert_eq(tape->arena->used - forward, 64 + big + small,
                 "backward took %zu bytes: the loss's 64, %zu and %zu expected",
                 tape->arena->used - forward, big, small);
    for (int r = 0; r < 40; r++)
        for (int j = 0; j < 100; j++)
            cr_assert_float_eq(x->grad[r * 100 + j], r % 2 == 0 ? 6.0 : 0.0, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

Test(ag_backward, aborts_on_a_non_scalar_loss) {
    Capture c;
    capture_run(backward_of_matrix, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "ag_backward: loss 'relu' (2,3) is not a scalar (6 elements)"), "%s",
              c.err);
    cr_assert(capture_file_line(&c, NULL, 0, NULL, NULL), "%s", c.err);
}

static void backward_twice(void *ctx) {
    (void)ctx;
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(tape->arena, 1, (int[]){3}, "x");
    tensor_requires_grad(x);
    Tensor *loss = ag_sum(tape, x);
    ag_backward(tape, loss);
    ag_backward(tape, loss);
}

Test(ag_backward, aborts_when_called_twice_without_reset) {
    Capture c;
    capture_run(backward_twice, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "ag_backward: called twice"), "%s", c.err);
    cr_assert(capture_has(&c, "ag_tape_reset"), "%s", c.err);
}

static void record_after_backward(void *ctx) {
    (void)ctx;
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(tape->arena, 1, (int[]){3}, "x");
    tensor_requires_grad(x);
    ag_backward(tape, ag_sum(tape, x));
    ag_relu(tape, x);
}

Test(ag_backward, recording_after_backward_aborts) {
    Capture c;
    capture_run(record_after_backward, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "relu: recording on a tape after ag_backward"), "%s", c.err);
}

static void backward_without_grad(void *ctx) {
    (void)ctx;
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(tape->arena, 1, (int[]){3}, "x"); /* no requires_grad */
    ag_backward(tape, ag_sum(tape, x));
}

Test(ag_backward, aborts_when_the_loss_depends_on_nothing_that_requires_grad) {
    Capture c;
    capture_run(backward_without_grad, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "ag_backward: loss 'sum' does not depend"), "%s", c.err);
}

/* requires_grad set by hand, without the gradient buffer tensor_requires_grad would allocate */
static void grad_buffer_missing(void *ctx) {
    (void)ctx;
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(params, 2, (int[]){2, 3}, "x");
    x->requires_grad = 1;
    ag_backward(tape, ag_sum(tape, x));
}

Test(ag_backward, aborts_on_a_leaf_without_gradient_buffer) {
    Capture c;
    capture_run(grad_buffer_missing, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "ag_backward: tensor 'x' (2,3)"), "%s", c.err);
    cr_assert(capture_has(&c, "tensor_requires_grad"), "%s", c.err);
}

Test(ag_backward, runs_again_after_reset) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_param(params, 1, (int[]){3}, "x");
    ag_backward(tape, ag_sum(tape, x));
    cr_assert_eq(tape->backward_done, 1);
    ag_tape_reset(tape);
    cr_assert_eq(tape->backward_done, 0);
    ag_backward(tape, ag_sum(tape, x));
    for (size_t i = 0; i < x->size; i++) cr_assert_float_eq(x->grad[i], 2.0, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* ---- what gets recorded ---- */

Test(ag_no_grad, records_nothing_and_dropout_is_the_identity) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_param(params, 2, (int[]){2, 3}, "x");
    tensor_fill(x, 0.5);
    Tensor *w = tensor_param(params, 2, (int[]){3, 4}, "w");
    tensor_fill(w, -0.25);
    cr_assert_eq(ag_no_grad(tape, 1), 0, "grad mode is on by default");
    Tensor *h = ag_gelu(tape, ag_matmul(tape, x, w));
    Rng rng, before;
    rng_seed(&rng, 5);
    before = rng;
    Tensor *d = ag_dropout(tape, h, 0.5, &rng);
    cr_assert(d == h, "dropout in no-grad mode must return its input");
    cr_assert(memcmp(&rng, &before, sizeof rng) == 0, "dropout in no-grad mode drew from rng");
    Tensor *loss = ag_mean(tape, ag_softmax(tape, d));
    cr_assert_eq(tape->n_nodes, 0);
    cr_assert_null(tape->last);
    cr_assert_eq(h->requires_grad, 0);
    cr_assert_eq(loss->requires_grad, 0);
    cr_assert_float_eq(loss->data[0], 0.25, TOL, "the forward still computes");

    /* recording resumes */
    cr_assert_eq(ag_no_grad(tape, 0), 1);
    Tensor *y = ag_matmul(tape, x, w);
    cr_assert_eq(tape->n_nodes, 1);
    cr_assert_eq(y->requires_grad, 1);
    Tensor *z = ag_dropout(tape, y, 0.5, &rng);
    cr_assert(z != y, "dropout in grad mode makes a new tensor");
    cr_assert(memcmp(&rng, &before, sizeof rng) != 0, "dropout in grad mode draws a key");
    cr_assert_eq(tape->n_nodes, 2);
    cr_assert_eq(tape->last->op, AG_OP_DROPOUT);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

Test(ag_tape, ops_on_inputs_without_grad_record_no_node) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(params, 2, (int[]){2, 3}, "x");
    Tensor *w = tensor_zeros(params, 2, (int[]){3, 4}, "w");
    Tensor *y = ag_relu(tape, ag_matmul(tape, x, w));
    ag_softmax(tape, y);
    ag_cross_entropy(tape, y, (int[]){0, 3}, -100);
    cr_assert_eq(tape->n_nodes, 0);
    cr_assert_eq(y->requires_grad, 0);

    /* one input that requires grad is enough; the other gets no gradient */
    tensor_requires_grad(w);
    Tensor *loss = ag_sum(tape, ag_matmul(tape, x, w));
    cr_assert_eq(tape->n_nodes, 2);
    ag_backward(tape, loss);
    cr_assert_null(x->grad, "x does not require grad and must get no gradient buffer");
    cr_assert_not_null(w->grad);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* A branch that does not reach the loss gets no gradient and costs nothing in backward. */
Test(ag_tape, backward_skips_outputs_the_loss_does_not_use) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_param(params, 1, (int[]){4}, "x");
    Tensor *unused = ag_relu(tape, x);
    Tensor *loss = ag_sum(tape, x);
    ag_backward(tape, loss);
    cr_assert_null(unused->grad);
    for (size_t i = 0; i < x->size; i++) cr_assert_float_eq(x->grad[i], 1.0, TOL);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

Test(ag_tape, reset_empties_the_tape_and_the_arena) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_param(params, 2, (int[]){2, 3}, "x");
    ag_backward(tape, ag_mean(tape, ag_relu(tape, x)));
    cr_assert_eq(tape->n_nodes, 2);
    cr_assert_gt(tape->arena->used, 0);
    size_t peak = tape->arena->peak;
    size_t params_used = params->used;
    ag_tape_reset(tape);
    cr_assert_eq(tape->n_nodes, 0);
    cr_assert_null(tape->last);
    cr_assert_eq(tape->arena->used, 0);
    cr_assert_eq(tape->arena->peak, peak, "reset keeps the peak");
    cr_assert_eq(params->used, params_used, "reset leaves other arenas alone");
    cr_assert_not_null(x->grad, "parameters keep their gradients");
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* ---- printing ---- */

/* Splits a line into whitespace-separated tokens (in place); returns how many. */
static int tokens(char *line, char **tok, int max) {
    int n = 0;
    for (char *s = strtok(line, " \t\n"); s && n < max; s = strtok(NULL, " \t\n")) tok[n++] = s;
    return n;
}

Test(ag_tape, print_lists_ops_newest_first_with_shapes) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = tensor_zeros(params, 2, (int[]){2, 3}, "x");
    Tensor *w = tensor_param(params, 2, (int[]){3, 4}, "w");
    ag_mean(tape, ag_relu(tape, ag_matmul(tape, x, w)));

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    ag_tape_print(tape, f);
    fclose(f);

    /* expected tokens of each line: number, op, "->", output shape, "<-", inputs */
    const char *want[][7] = {
        {"3", "mean", "->", "()", "<-", "relu(2,4)", NULL},
        {"2", "relu", "->", "(2,4)", "<-", "matmul(2,4)", NULL},
        {"1", "matmul", "->", "(2,4)", "<-", "x(2,3)", "w(3,4)"},
    };
    char *line = buf;
    char *nl = strchr(line, '\n');
    cr_assert_not_null(nl, "%s", buf);
    *nl = '\0';
    cr_assert_str_eq(line, "tape: 3 nodes, backward order (newest first)");
    for (int k = 0; k < 3; k++) {
        line = nl + 1;
        nl = strchr(line, '\n');
        cr_assert_not_null(nl, "line %d missing in:\n%s", k + 2, buf);
        *nl = '\0';
        char *tok[10];
        int n = tokens(line, tok, 10);
        int n_want = want[k][6] ? 7 : 6;
        cr_assert_eq(n, n_want, "line %d has %d tokens", k + 2, n);
        for (int i = 0; i < n_want; i++)
            cr_assert_str_eq(tok[i], want[k][i], "line %d token %d", k + 2, i);
    }
    cr_assert_eq(nl[1], '\0', "nothing after the last node");
    free(buf);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

Test(ag_tape, every_op_has_a_name_and_a_derivative) {
    for (int op = 0; op < AG_OP_COUNT; op++) {
        const char *name = ag_op_name((AgOp)op);
        const char *d = ag_op_derivative((AgOp)op);
        cr_assert(name && *name, "op %d has no name", op);
        cr_assert(d && strlen(d) > 5, "op '%s' has no derivative", name);
        cr_assert(strstr(d, "y") != NULL, "derivative of '%s' does not mention y: %s", name, d);
        for (int other = 0; other < op; other++)
            cr_assert_str_neq(name, ag_op_name((AgOp)other), "two ops named '%s'", name);
    }
    cr_assert_str_eq(ag_op_name(AG_OP_MATMUL), "matmul");
    cr_assert_str_eq(ag_op_name(AG_OP_CROSS_ENTROPY), "cross_entropy");
}

static void op_name_out_of_range(void *ctx) {
    (void)ctx;
    ag_op_name(AG_OP_COUNT);
}

Test(ag_tape, op_name_out_of_range_aborts) {
    Capture c;
    capture_run(op_name_out_of_range, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "ag_op_name: no op"), "%s", c.err);
}

/* ---- gradients through a chain, by hand ----
 * x (2,3), w (3,2), h = x w, r = relu(h), L = mean(r) over 4 elements.
 *   h = [[4, 2], [-6.5, 1]]  so  r = [[4, 2], [0, 1]]  and  L = 7/4.
 *   dL/dh = (h > 0) / 4 = [[.25, .25], [0, .25]]  =: g
 *   dL/dx = g w^T = [[0, .625, -.25], [-.25, .5, .25]]
 *   dL/dw = x^T g = [[.25, .25], [.5, .25], [-.25, .5]] */
Test(ag_tape, chain_gradients_match_hand_computation) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *x = from_doubles(params, 2, (int[]){2, 3}, (double[]){1, 2, -1, 0, -1, 3}, "x");
    Tensor *w = from_doubles(params, 2, (int[]){3, 2}, (double[]){1, -1, 0.5, 2, -2, 1}, "w");
    tensor_requires_grad(x);
    tensor_requires_grad(w);
    Tensor *loss = ag_mean(tape, ag_relu(tape, ag_matmul(tape, x, w)));
    cr_assert_float_eq(loss->data[0], 1.75, TOL);
    ag_backward(tape, loss);
    const double gx[] = {0, 0.625, -0.25, -0.25, 0.5, 0.25};
    const double gw[] = {0.25, 0.25, 0.5, 0.25, -0.25, 0.5};
    for (int i = 0; i < 6; i++) {
        cr_assert_float_eq(x->grad[i], gx[i], TOL, "dL/dx[%d] = %g, want %g", i, x->grad[i], gx[i]);
        cr_assert_float_eq(w->grad[i], gw[i], TOL, "dL/dw[%d] = %g, want %g", i, w->grad[i], gw[i]);
    }
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* ---- memory over a training loop ----
 * A step resets the tape, runs forward (embedding, matmul_bt, add_bias, gelu, dropout, split and
 * merge heads, softmax, cross-entropy), backward, and a plain SGD update. Both arenas start
 * empty and grow in the first step; after it neither may grow: the step arena's chunks, peak
 * and use and the parameter arena's use stay fixed. This is how "no malloc in the training
 * loop after the first step" shows for the tape. */
static double train_step(Tape *tape, Tensor *wte, Tensor *w, Tensor *b, Rng *rng, const int *ids,
                         const int *targets) {
    ag_tape_reset(tape);
    Tensor *e = ag_embedding(tape, wte, ids, 2, 3); /* (2,3,8) */
    Tensor *h = ag_gelu(tape, ag_add_bias(tape, ag_matmul_bt(tape, e, w), b));
    h = ag_dropout(tape, h, 0.1, rng);
    h = ag_merge_heads(tape, ag_split_heads(tape, h, 2)); /* (2,3,8) again */
    Tensor *logits = ag_matmul_bt(tape, h, wte);          /* (2,3,10) */
    Tensor *loss = ag_cross_entropy(tape, logits, targets, -1);
    ag_backward(tape, loss);
    Tensor *ps[] = {wte, w, b};
    for (int p = 0; p < 3; p++) {
        for (size_t i = 0; i < ps[p]->size; i++) ps[p]->data[i] -= (Real)0.1 * ps[p]->grad[i];
        tensor_zero_grad(ps[p]);
    }
    return loss->data[0];
}

Test(ag_tape, training_loop_does_not_grow_the_arenas_after_the_first_step) {
    Arena *params = arena_new("params", 0);
    Tape *tape = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 11);
    Tensor *wte = tensor_param(params, 2, (int[]){10, 8}, "wte");
    Tensor *w = tensor_param(params, 2, (int[]){8, 8}, "w");
    Tensor *b = tensor_param(params, 1, (int[]){8}, "b");
    rng_fill_normal(&rng, wte, 0, 0.5);
    rng_fill_normal(&rng, w, 0, 0.5);
    const int ids[6] = {1, 4, 2, 9, 0, 4};
    const int targets[6] = {4, 2, 9, -1, 4, 7};
    size_t params_used = params->used;

    double first = train_step(tape, wte, w, b, &rng, ids, targets);
    size_t used1 = tape->arena->used, cap1 = tape->arena->cap;
    train_step(tape, wte, w, b, &rng, ids, targets);
    size_t peak2 = tape->arena->peak;
    double last = 0;
    for (int step = 3; step <= 10; step++) {
        last = train_step(tape, wte, w, b, &rng, ids, targets);
        cr_assert_eq(tape->arena->used, used1, "step %d used %zu bytes, step 1 used %zu", step,
                     tape->arena->used, used1);
        cr_assert_eq(tape->arena->cap, cap1, "step %d reserved %zu bytes, step 1 %zu", step,
                     tape->arena->cap, cap1);
    }
    cr_assert_eq(tape->arena->peak, peak2,
                 "the step arena grew: peak %zu after step 10, %zu "
                 "after step 2",
                 tape->arena->peak, peak2);
    cr_assert_eq(peak2, used1, "the peak is one step's use");
    cr_assert_eq(params->used, params_used, "the parameter arena grew during training");
    cr_assert(isfinite(first) && isfinite(last));
    cr_assert_lt(last, first, "ten SGD steps did not lower the loss (%g -> %g)", first, last);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* y = sum(relu(x) * w) with x = (1, -2, 3), w = (2, 2, 2): a known tape of three nodes */
static char *dot_of_small_tape(int keep_norms, int run_backward) {
    Arena *a = arena_new("test", 0), *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ag_tape_keep_norms(t, keep_norms);
    Tensor *x = tensor_param(a, 1, (int[]){3}, "x");
    Tensor *w = tensor_new(a, 1, (int[]){3}, "w");
    Real xs[3] = {1, -2, 3};
    for (int i = 0; i < 3; i++) {
        x->data[i] = xs[i];
        w->data[i] = 2;
    }
    Tensor *loss = ag_sum(t, ag_mul(t, ag_relu(t, x), w));
    if (run_backward) ag_backward(t, loss);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_eq(ag_tape_dot(t, f), 0);
    fclose(f);
    ag_tape_free(t);
    arena_free(step);
    arena_free(a);
    return text;
}

Test(ag_tape_dot, writes_a_node_per_op_with_shape_norms_and_edges_from_inputs) {
    char *text = dot_of_small_tape(1, 1);
    /* |relu(x)| = sqrt(10) = 3.162, |relu(x) * w| = sqrt(40) = 6.325, its gradient is 1 each
     * (sqrt 3), relu's is w (sqrt 12), x's is w where x > 0 (sqrt 8) */
    const char *want = "digraph tape {\n"
                       "  rankdir=BT;\n"
                       "  node [fontname=\"monospace\", fontsize=10];\n"
                       "  n3 [shape=box, label=\"3 sum\\n()\\n|y| 8  |g| 1\"];\n"
                       "  n2 -> n3;\n"
                       "  n2 [shape=box, label=\"2 mul\\n(3)\\n|y| 6.325  |g| 1.732\"];\n"
                       "  n1 -> n2;\n"
                       "  l2_1 [shape=ellipse, label=\"w\\n(3)\\n|y| 3.464  |g| -\"];\n"
                       "  l2_1 -> n2;\n"
                       "  n1 [shape=box, label=\"1 relu\\n(3)\\n|y| 3.162  |g| 3.464\"];\n"
                       "  l1_0 [shape=ellipse, label=\"x\\n(3)\\n|y| 3.742  |g| 2.828\"];\n"
                       "  l1_0 -> n1;\n"
                       "}\n";
    cr_assert_str_eq(text, want);
    free(text);
}

Test(ag_tape_dot, shows_no_intermediate_gradient_unless_norms_were_kept) {
    char *text = dot_of_small_tape(0, 1);
    cr_assert_not_null(strstr(text, "1 relu\\n(3)\\n|y| 3.162  |g| -"), "%s", text);
    cr_assert_not_null(strstr(text, "|y| 3.742  |g| 2.828"), "%s", text); /* x, a leaf */
    free(text);
    text = dot_of_small_tape(1, 0); /* before backward: x's zeroed buffer, no other gradient */
    cr_assert_not_null(strstr(text, "x\\n(3)\\n|y| 3.742  |g| 0\""), "%s", text);
    cr_assert_not_null(strstr(text, "1 relu\\n(3)\\n|y| 3.162  |g| -"), "%s", text);
    free(text);
}

/* ---- ag_backward_on_leaf: a leaf's gradient is final when the oldest node reading it ran ---- */

typedef struct LeafLog {
    int n;
    const Tensor *who[8];
    double grad_then[8][3]; /* the leaf's gradient when it was called */
} LeafLog;

static void log_leaf(void *ctx, Tensor *leaf) {
    LeafLog *log = ctx;
    cr_assert_lt(log->n, 8, "more calls than leaves");
    log->who[log->n] = leaf;
    for (size_t i = 0; i < leaf->size; i++) log->grad_then[log->n][i] = (double)leaf->grad[i];
    log->n++;
}

/* l = sum((w1 * x + w2) * w1): node 1 (oldest) reads w1 and x, node 2 reads w2, node 3 w1 again;
 * u is never read. Backward runs 4, 3, 2, 1: w2 is final after node 2, w1 and x after node 1
 * (in node 1's input order); neither u nor an intermediate is called, and each leaf's gradient
 * when called equals its gradient at the end. With the hook off, no call. */
Test(ag_tape, leaf_hook_calls_each_leaf_once_when_its_gradient_is_final) {
    Arena *params = arena_new("params", 1 << 12);
    Tape *tape = ag_tape_new(arena_new("step", 1 << 16));
    Tensor *w1 = tensor_param(params, 1, (int[]){3}, "w1");
    Tensor *w2 = tensor_param(params, 1, (int[]){3}, "w2");
    Tensor *u = tensor_param(params, 1, (int[]){3}, "u");
    tensor_copy_from_doubles(w1, (double[]){0.5, -1.5, 2});
    tensor_copy_from_doubles(w2, (double[]){1, 0.25, -3});
    for (int round = 0; round < 3; round++) {
        LeafLog log = {0};
        ag_backward_on_leaf(tape, round < 2 ? log_leaf : NULL, &log);
        ag_tape_reset(tape);
        for (size_t i = 0; i < 3; i++) w1->grad[i] = w2->grad[i] = u->grad[i] = 0;
        Tensor *x = from_doubles(tape->arena, 1, (int[]){3}, (double[]){2, 3, -1}, "x");
        tensor_requires_grad(x);
        Tensor *l = ag_sum(tape, ag_mul(tape, ag_add(tape, ag_mul(tape, w1, x), w2), w1));
        ag_backward(tape, l);
        if (round == 2) {
            cr_assert_eq(log.n, 0, "the hook is off: %d calls", log.n);
            break;
        }
        cr_assert_eq(log.n, 3, "round %d: %d calls, not 3 (w2, w1, x)", round, log.n);
        const Tensor *want[3] = {w2, w1, x};
        for (int c = 0; c < 3; c++) {
            cr_assert_eq(log.who[c], want[c], "round %d call %d: %s, not %s", round, c,
                         log.who[c]->name, want[c]->name);
            for (size_t i = 0; i < 3; i++)
                cr_assert_eq(log.grad_then[c][i], (double)want[c]->grad[i],
                             "%s[%zu]: %g when called, %g at the end", want[c]->name, i,
                             log.grad_then[c][i], (double)want[c]->grad[i]);
        }
        /* by hand: dl/dw1 = (w1 x + w2) + w1 x, dl/dw2 = w1, dl/dx = w1^2 */
        for (size_t i = 0; i < 3; i++) {
            double a = w1->data[i], b = w2->data[i], xv = x->data[i];
            cr_assert_float_eq(w1->grad[i], 2 * a * xv + b, TOL);
            cr_assert_float_eq(w2->grad[i], a, TOL);
            cr_assert_float_eq(x->grad[i], a * a, TOL);
            cr_assert_eq(u->grad[i], 0);
        }
    }
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

/* the graph of a real tape (attention_tour's) is valid Graphviz: dot lays it out */
Test(ag_tape_dot, the_attention_tour_graph_is_read_by_graphviz) {
    if (system("command -v dot >/dev/null 2>&1") != 0) cr_skip_test("graphviz's dot not installed");
    const char *bin = getenv("AG_ATTENTION_TOUR_BIN");
    cr_assert_not_null(bin, "AG_ATTENTION_TOUR_BIN is not set (make test sets it)");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "d=$(mktemp -d) && %s --dot $d/t.dot >/dev/null && dot -Tsvg $d/t.dot -o $d/t.svg "
             "&& grep -q softmax $d/t.svg; r=$?; rm -rf \"$d\"; exit $r",
             bin);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* --dot to a path that cannot be written: exit 2, the path and the reason on stderr */
Test(ag_tape_dot, the_tours_exit_2_naming_a_dot_path_they_cannot_write) {
    const char *bin = getenv("AG_ATTENTION_TOUR_BIN");
    cr_assert_not_null(bin, "AG_ATTENTION_TOUR_BIN is not set (make test sets it)");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s --dot /nonexistent-dir/t.dot 2>&1 >/dev/null | grep -q "
             "'cannot write /nonexistent-dir/t.dot: No such file'",
             bin);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(cmd, sizeof cmd, "%s --dot /nonexistent-dir/t.dot >/dev/null 2>&1", bin);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d", st);
    snprintf(cmd, sizeof cmd, "%s --bogus >/dev/null 2>&1", bin);
    st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit status %d for a bad flag", st);
}
