/* cases.h: the table of op test cases shared by the gradient checks, the thread-determinism
 * test, the float-vs-double comparison and the op coverage test. One row is an op at one
 * shape: how to build its inputs and how to call it. Add a row here for every new op (the
 * coverage test in tests/autograd/test_gradcheck.c fails until some row records the op). */
#ifndef ATTOGRAD_TEST_CASES_H
#define ATTOGRAD_TEST_CASES_H

#include "attograd.h"

#define GC_MAX_IN 4

typedef struct GcCase GcCase;
struct GcCase {
    const char *name;
    int n_in;
    int ndim[GC_MAX_IN];
    int shape[GC_MAX_IN][AG_MAX_DIMS];
    Tensor *(*build)(Tape *tape, Tensor **in, const GcCase *c);
    int arg[4];              /* integer arguments (heads, vocab, ...) */
    double farg;             /* a scalar argument (scale, p) */
    unsigned no_grad_inputs; /* bit i set: input i does not require grad */
};

/* All cases (a static table) and their count. */
const GcCase *gc_cases(size_t *n);
/* Case k (aborts when out of range). */
const GcCase *gc_case(size_t k);
/* Criterion parameters: the case indices. Tests take an index, not a GcCase, because
 * Criterion may run each test in a freshly executed process where the pointers inside a
 * copied struct would mean nothing. */
#include <criterion/parameterized.h>
struct criterion_test_params gc_case_params(void);

/* Creates a case's inputs in arena a, filled with seeded normal values rounded to float, so the
 * float and double builds see exactly the same numbers. */
void gc_make_inputs(const GcCase *c, Arena *a, Tensor **in);
/* Runs the case: forward on the tape, then backward of loss = sum(out * R) with a fixed R.
 * Returns the output (in the tape's arena; valid until the next reset). */
Tensor *gc_forward_backward(const GcCase *c, Tape *tape, Tensor **in);

/* A test's memory: an arena for inputs and a tape over its own step arena; freed in one call. */
typedef struct {
    Arena *params;
    Tape *tape;
} TestEnv;
TestEnv test_env_new(void);
void test_env_free(TestEnv *e);

/* Adapter for ag_gradcheck: ctx is the GcCase. */
Tensor *gc_build_fn(Tape *tape, Tensor **in, void *ctx);

#endif
