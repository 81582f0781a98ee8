/* test_check_finite.c: check mode (ag_check_finite, autograd.h). An op whose forward overflows
 * is named with its node, output, element and value; an op fed a NaN says which input held it;
 * a backward that overflows names the node and the input whose gradient went non-finite while
 * the forward stayed finite; only the first event is kept until ag_tape_reset; the mode is off
 * by default, AG_CHECK_FINITE=1 turns it on for new tapes, and it changes no result.
 * Not here: the trainer's use of it (tests/examples/test_translate.c, --check-finite). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

/* a factor whose square overflows Real but which does not itself: 1e30 (float), 1e200 */
static double big(void) { return sizeof(Real) == sizeof(float) ? 1e30 : 1e200; }

typedef struct {
    Arena *params;
    Tape *tape;
} Fixture;

static Fixture fx_new(void) {
    Fixture f = {arena_new("params", 1 << 12), NULL};
    f.tape = ag_tape_new(arena_new("step", 1 << 16));
    return f;
}

static void fx_free(Fixture *f) {
    arena_free(f->tape->arena);
    ag_tape_free(f->tape);
    arena_free(f->params);
}

static Tensor *leaf(Fixture *f, const char *name, int n, const double *v) {
    Tensor *t = tensor_new1(f->params, n, name);
    tensor_copy_from_doubles(t, v);
    tensor_requires_grad(t);
    return t;
}

Test(ag_check_finite, is_off_by_default_and_finds_nothing_then) {
    Fixture f = fx_new();
    cr_assert_eq(f.tape->check_finite, 0);
    Tensor *x = leaf(&f, "x", 3, (double[]){1, 2, big()});
    Tensor *y = ag_scale(f.tape, x, big());
    cr_assert(isinf((double)y->data[2]));
    cr_assert_null(ag_first_nonfinite(f.tape));
    fx_free(&f);
}

Test(ag_check_finite, names_the_first_op_whose_output_overflows) {
    Fixture f = fx_new();
    cr_assert_eq(ag_check_finite(f.tape, 1), 0);
    Tensor *x = leaf(&f, "x", 3, (double[]){1, 2, big()});
    Tensor *a = ag_relu(f.tape, x);         /* node 1: finite */
    Tensor *b = ag_scale(f.tape, a, big()); /* node 2: element 2 overflows */
    Tensor *c = ag_softmax(f.tape, b);      /* node 3: NaN from the inf, not reported */
    ag_sum(f.tape, c);
    const AgNonFinite *r = ag_first_nonfinite(f.tape);
    cr_assert_not_null(r);
    cr_assert_eq(r->backward, 0);
    cr_assert_eq(r->op, AG_OP_SCALE);
    cr_assert_eq(r->node, 2);
    cr_assert_eq(r->input, -1);
    cr_assert_eq(r->bad_input, -1, "the input of scale was finite");
    cr_assert_str_eq(r->tensor, "scale");
    cr_assert_eq(r->ndim, 1);
    cr_assert_eq(r->shape[0], 3);
    cr_assert_eq(r->index, 2);
    cr_assert(isinf(r->value) && r->value > 0);
    const char *m = ag_nonfinite_message(r);
    cr_assert(strstr(m, "forward of node 2 (scale): its output 'scale' (3) holds inf at element 2"),
              "%s", m);
    cr_assert(strstr(m, "from finite inputs 'relu' (3)"), "%s", m);
    /* a reset forgets it; the mode stays on */
    ag_tape_reset(f.tape);
    cr_assert_null(ag_first_nonfinite(f.tape));
    cr_assert_eq(ag_check_finite(f.tape, 0), 1);
    fx_free(&f);
}

Test(ag_check_finite, names_the_input_that_already_held_a_nan) {
    Fixture f = fx_new();
    ag_check_finite(f.tape, 1);
    Tensor *x = leaf(&f, "x", 2, (double[]){1, 2});
    Tensor *w = leaf(&f, "decoder.norm.weight", 2, (double[]){1, NAN});
    Tensor *y = ag_mul(f.tape, x, w);
    ag_sum(f.tape, y);
    const AgNonFinite *r = ag_first_nonfinite(f.tape);
    cr_assert_not_null(r);
    cr_assert_eq(r->op, AG_OP_MUL);
    cr_assert_eq(r->node, 1);
    cr_assert_eq(r->bad_input, 1);
    cr_assert(isnan(r->value));
    cr_assert(strstr(r->message, "its input 1 'decoder.norm.weight' (2) already held nan at "
                                 "element 1"),
              "%s", r->message);
    fx_free(&f);
}

/* x = 1/big, y = big x = 1, z = big y = big, loss = sum z: every value finite; backward:
 * dz = 1, dy = big, dx = big^2 = inf. The report is node 1 (the first scale), input x. */
Test(ag_check_finite, names_the_node_whose_input_gradient_overflows) {
    Fixture f = fx_new();
    ag_check_finite(f.tape, 1);
    Tensor *x = leaf(&f, "x", 2, (double[]){1 / big(), 0.5 / big()});
    Tensor *loss = ag_sum(f.tape, ag_scale(f.tape, ag_scale(f.tape, x, big()), big()));
    cr_assert(isfinite((double)loss->data[0]));
    cr_assert_null(ag_first_nonfinite(f.tape), "the forward pass is finite");
    ag_backward(f.tape, loss);
    cr_assert(isinf((double)x->grad[0]));
    const AgNonFinite *r = ag_first_nonfinite(f.tape);
    cr_assert_not_null(r);
    cr_assert_eq(r->backward, 1);
    cr_assert_eq(r->op, AG_OP_SCALE);
    cr_assert_eq(r->node, 1);
    cr_assert_eq(r->input, 0);
    cr_assert_str_eq(r->tensor, "x");
    cr_assert_eq(r->index, 0);
    cr_assert(strstr(r->message, "backward of node 1 (scale): the gradient of its input 0 'x' "
                                 "(2) holds inf at element 0 (the gradient of its output "
                                 "'scale' (2) was finite)"),
              "%s", r->message);
    fx_free(&f);
}

Test(ag_check_finite, the_environment_turns_it_on_and_results_do_not_change) {
    setenv("AG_CHECK_FINITE", "1", 1);
    Fixture on = fx_new();
    unsetenv("AG_CHECK_FINITE");
    Fixture off = fx_new();
    cr_assert_eq(on.tape->check_finite, 1);
    cr_assert_eq(off.tape->check_finite, 0);
    const double v[] = {0.5, -1.25, 2, 0.75, -0.1, 3};
    Tensor *g[2];
    Fixture *fs[2] = {&on, &off};
    for (int k = 0; k < 2; k++) {
        Tape *t = fs[k]->tape;
        Tensor *x = leaf(fs[k], "x", 6, v);
        Tensor *r = ag_reshape(t, x, 2, (int[]){2, 3});
        Tensor *loss = ag_mean(t, ag_mul(t, ag_gelu(t, r), ag_log_softmax(t, r)));
        ag_backward(t, loss);
        g[k] = x;
    }
    cr_assert_null(ag_first_nonfinite(on.tape));
    cr_assert(memcmp(g[0]->grad, g[1]->grad, 6 * sizeof(Real)) == 0);
    fx_free(&on);
    fx_free(&off);
}
