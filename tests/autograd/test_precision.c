/* test_precision.c: the float build's forward outputs and gradients against the double
 * build's on the same inputs (inputs are rounded to float in both builds, so they are equal).
 * make test runs the double build first and points AG_DOUBLE_DUMP at its dump_cases program.
 * Only the float build has this test: the double build is the reference. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cases.h"

#ifndef AG_REAL_DOUBLE
static int read_header(FILE *f, char *kind, size_t *a, size_t *b) {
    return fscanf(f, "%7s %zu %zu", kind, a, b) == 3;
}

Test(precision, float_build_matches_double_build) {
    const char *dump = getenv("AG_DOUBLE_DUMP");
    cr_assert(dump != NULL && *dump, "AG_DOUBLE_DUMP is not set: run this suite through "
                                     "'make test', which builds the double reference first");
    FILE *f = popen(dump, "r");
    cr_assert(f != NULL, "cannot run %s", dump);
    size_t n;
    const GcCase *cases = gc_cases(&n);
    TestEnv env = test_env_new();
    Arena *params = env.params;
    Tape *tape = env.tape;
    double worst = 0;
    for (size_t k = 0; k < n; k++) {
        Tensor *in[GC_MAX_IN];
        arena_reset(params);
        gc_make_inputs(&cases[k], params, in);
        ag_tape_reset(tape);
        Tensor *out = gc_forward_backward(&cases[k], tape, in);
        char kind[8];
        size_t idx, size;
        cr_assert(read_header(f, kind, &idx, &size) && idx == k && size == out->size,
                  "%s: the double dump is out of step (is it from the same source?)",
                  cases[k].name);
        for (size_t j = 0; j < size; j++) {
            double d;
            cr_assert(fscanf(f, "%lf", &d) == 1);
            double err = fabs((double)out->data[j] - d) / fmax(1.0, fabs(d));
            if (err > worst) worst = err;
            cr_assert(err < 1e-5, "%s: output %zu is %.9g in float, %.17g in double", cases[k].name,
                      j, (double)out->data[j], d);
        }
        for (int i = 0; i < cases[k].n_in; i++) {
            if (!in[i]->requires_grad) continue;
            cr_assert(read_header(f, kind, &idx, &size) && (int)idx == i && size == in[i]->size,
                      "%s: gradient header out of step", cases[k].name);
            for (size_t j = 0; j < size; j++) {
                double d;
                cr_assert(fscanf(f, "%lf", &d) == 1);
                double err = fabs((double)in[i]->grad[j] - d) / fmax(1.0, fabs(d));
                if (err > worst) worst = err;
                cr_assert(err < 1e-5,
                          "%s: gradient of input %d element %zu is %.9g in float, "
                          "%.17g in double",
                          cases[k].name, i, j, (double)in[i]->grad[j], d);
            }
        }
    }
    cr_assert(pclose(f) == 0, "%s failed", dump);
    cr_log_info("float vs double: worst relative difference %.3g over %zu cases", worst, n);
    test_env_free(&env);
}
#endif
