/* test_gradcheck.c: every op of the table against central differences (double build), and
 * the coverage test that fails when an op of ops.def has no case in tests/support/cases.c. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "cases.h"

ParameterizedTestParameters(ag_ops, grad_matches_finite_differences) { return gc_case_params(); }

/* Double build: eps 1e-6, tolerance 1e-6 on |analytic - numeric| / max(1, |analytic|, |numeric|);
 * central differences are good to about 1e-9 here, so a wrong term shows. The float build runs
 * the same cases at a float tolerance; the tight check is the double build's (make test runs
 * both). */
#ifdef AG_REAL_DOUBLE
#define GC_EPS 1e-6
#define GC_TOL 1e-6
#else
#define GC_EPS 1e-2
#define GC_TOL 5e-2
#endif

ParameterizedTest(size_t *k, ag_ops, grad_matches_finite_differences) {
    const GcCase *c = gc_case(*k);
    TestEnv env = test_env_new();
    Tensor *in[GC_MAX_IN];
    gc_make_inputs(c, env.params, in);
    AgGradcheckResult r;
    int ok = ag_gradcheck(env.tape, gc_build_fn, (void *)c, in, c->n_in, GC_EPS, GC_TOL, &r);
    cr_assert(r.max_abs_grad > 0, "%s: every gradient is zero", c->name);
    cr_assert(ok, "%s: worst error %.3g at input %d element %zu (analytic %.12g, numeric %.12g)",
              c->name, r.max_err, r.input, r.index, r.analytic, r.numeric);
    test_env_free(&env);
}

Test(ag_ops, every_op_in_the_table_has_a_gradient_check) {
    size_t n;
    const GcCase *cases = gc_cases(&n);
    int covered[AG_OP_COUNT] = {0};
    TestEnv env = test_env_new();
    Arena *params = env.params;
    Tape *tape = env.tape;
    for (size_t k = 0; k < n; k++) {
        Tensor *in[GC_MAX_IN];
        gc_make_inputs(&cases[k], params, in);
        ag_tape_reset(tape);
        cases[k].build(tape, in, &cases[k]);
        for (AgNode *node = tape->last; node; node = node->prev) covered[node->op] = 1;
    }
    for (int op = 0; op < AG_OP_COUNT; op++)
        cr_expect(covered[op], "op '%s' has no case in tests/support/cases.c, so no gradient check",
                  ag_op_name((AgOp)op));
    test_env_free(&env);
}

/* The check must catch a wrong backward: a gradient that is off by a factor must fail. */
static Tensor *wrong_grad_fn(Tape *tape, Tensor **in, void *ctx) {
    (void)ctx;
    /* y = x * x computed as mul(x, x'), where x' is a no-grad copy: backward misses half */
    Tensor *copy = tensor_new(tape->arena, in[0]->ndim, in[0]->shape, "copy");
    for (size_t i = 0; i < copy->size; i++) copy->data[i] = in[0]->data[i];
    return ag_mul(tape, in[0], copy);
}

Test(ag_gradcheck, reports_a_wrong_gradient) {
    TestEnv env = test_env_new();
    Arena *params = env.params;
    Tape *tape = env.tape;
    Tensor *x = tensor_new2(params, 3, 4, "x");
    Rng rng;
    rng_seed(&rng, 3);
    rng_fill_normal(&rng, x, 0, 1);
    tensor_requires_grad(x);
    AgGradcheckResult r;
    int ok = ag_gradcheck(tape, wrong_grad_fn, NULL, &x, 1, ag_gradcheck_default_eps(),
                          ag_gradcheck_default_tol(), &r);
    cr_assert(!ok, "a backward missing half the gradient passed (error %g)", r.max_err);
    cr_assert(r.max_err > 0.1);
    test_env_free(&env);
}

static Tensor *all_ignored_fn(Tape *tape, Tensor **in, void *ctx) {
    (void)ctx;
    int targets[4] = {-100, -100, -100, -100};
    Tensor *loss = ag_cross_entropy(tape, in[0], targets, -100);
    return ag_reshape(tape, loss, 1, (int[]){1});
}

Test(ag_gradcheck, fails_when_no_gradient_flows) {
    TestEnv env = test_env_new();
    Arena *params = env.params;
    Tape *tape = env.tape;
    Tensor *x = tensor_new2(params, 4, 5, "x");
    tensor_fill(x, 0.5);
    tensor_requires_grad(x);
    /* every target ignored: the loss is the constant 0 and no gradient flows */
    AgGradcheckResult r;
    int ok = ag_gradcheck(tape, all_ignored_fn, NULL, &x, 1, 1e-6, 1e-6, &r);
    cr_assert(!ok, "a check with no gradient at all must not pass");
    cr_assert_eq(r.max_abs_grad, 0);
    cr_assert_eq(r.n_checked, 20);
    test_env_free(&env);
}
