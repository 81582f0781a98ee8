/* gradcheck.c: compares the tape's gradients with central differences.
 * loss = sum(out * R) with R a fixed random tensor (seeded normal values, never all ones), so
 * every element of out carries a different weight and a backward that drops a term shows.
 * The numeric derivative of input element x is (loss(x + eps) - loss(x - eps)) / (2 eps),
 * with the step measured after rounding to Real. The error of an element is
 * |analytic - numeric| / max(1, |analytic|, |numeric|): relative for large gradients, absolute
 * for small ones, so a gradient near zero does not blow up the measure.
 * Not here: the test cases (tests/support/cases.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

#define GRADCHECK_R_SEED 20240611u

double ag_gradcheck_default_eps(void) { return sizeof(Real) == sizeof(double) ? 1e-6 : 1e-2; }
double ag_gradcheck_default_tol(void) { return sizeof(Real) == sizeof(double) ? 1e-6 : 2e-2; }

static double weighted_sum(const Tensor *out, const double *R) {
    double s = 0;
    for (size_t i = 0; i < out->size; i++) s += (double)out->data[i] * R[i];
    return s;
}

int ag_gradcheck(Tape *tape, AgGradcheckFn fn, void *ctx, Tensor **inputs, int n_inputs, double eps,
                 double tol, AgGradcheckResult *res) {
    AG_CHECK_ARG(tape);
    AG_CHECK_ARG(fn);
    AG_CHECK_ARG(inputs);
    AG_CHECK(tape != NULL && fn != NULL && inputs != NULL, "ag_gradcheck: NULL argument");
    for (int i = 0; i < n_inputs; i++) {
        AG_CHECK(inputs[i] != NULL, "ag_gradcheck: input %d is NULL", i);
        AG_CHECK(inputs[i]->arena != tape->arena,
                 "ag_gradcheck: input %d '%s' %s lives in the "
                 "tape's arena, which the check resets; create inputs in another arena",
                 i, inputs[i]->name, tensor_shape_str(inputs[i]));
    }
    int prev_no_grad = ag_no_grad(tape, 0);
    AgGradcheckResult r = {0};

    /* analytic: one forward and backward on the tape */
    ag_tape_reset(tape);
    for (int i = 0; i < n_inputs; i++) tensor_zero_grad(inputs[i]);
    Tensor *out = fn(tape, inputs, ctx);
    AG_CHECK(out != NULL, "ag_gradcheck: the function returned NULL");
    double *R = malloc(out->size * sizeof *R);
    AG_CHECK(R != NULL, "ag_gradcheck: out of memory");
    Rng rng;
    rng_seed(&rng, GRADCHECK_R_SEED);
    Tensor *Rt = tensor_new(tape->arena, out->ndim, out->shape, "R");
    for (size_t i = 0; i < out->size; i++) {
        R[i] = rng_normal(&rng);
        Rt->data[i] = (Real)R[i];
    }
    for (size_t i = 0; i < out->size; i++) R[i] = (double)Rt->data[i];
    Tensor *loss = ag_sum(tape, ag_mul(tape, out, Rt));
    ag_backward(tape, loss);

    /* keep the analytic gradients: the numeric passes run on a reset tape */
    size_t total = 0;
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i]->requires_grad) total += inputs[i]->size;
    double *analytic = malloc((total ? total : 1) * sizeof *analytic);
    AG_CHECK(analytic != NULL, "ag_gradcheck: out of memory");
    size_t off = 0;
    for (int i = 0; i < n_inputs; i++) {
        if (!inputs[i]->requires_grad) continue;
        for (size_t j = 0; j < inputs[i]->size; j++) analytic[off + j] = (double)inputs[i]->grad[j];
        off += inputs[i]->size;
    }

    /* numeric: central differences, element by element (in grad mode, so dropout stays on) */
    off = 0;
    for (int i = 0; i < n_inputs; i++) {
        Tensor *x = inputs[i];
        if (!x->requires_grad) continue;
        for (size_t j = 0; j < x->size; j++) {
            Real orig = x->data[j];
            Real hi = (Real)((double)orig + eps), lo = (Real)((double)orig - eps);
            x->data[j] = hi;
            ag_tape_reset(tape);
            double lhi = weighted_sum(fn(tape, inputs, ctx), R);
            x->data[j] = lo;
            ag_tape_reset(tape);
            double llo = weighted_sum(fn(tape, inputs, ctx), R);
            x->data[j] = orig;
            double num = (lhi - llo) / ((double)hi - (double)lo);
            double ana = analytic[off + j];
            double err = fabs(ana - num) / fmax(1.0, fmax(fabs(ana), fabs(num)));
            if (err > r.max_err || r.n_checked == 0) {
                r.max_err = err;
                r.input = i;
                r.index = j;
                r.analytic = ana;
                r.numeric = num;
            }
            if (fabs(ana) > r.max_abs_grad) r.max_abs_grad = fabs(ana);
            r.n_checked++;
        }
        off += x->size;
    }
    ag_tape_reset(tape);
    ag_no_grad(tape, prev_no_grad);
    free(R);
    free(analytic);
    if (res) *res = r;
    return r.max_err <= tol && r.max_abs_grad > 0;
}

void ag_gradcheck_print(const AgGradcheckResult *r, FILE *f) {
    AG_CHECK(r != NULL, "ag_gradcheck_print: argument 'res' is NULL");
    AG_CHECK_ARG(f);
    fprintf(f,
            "gradcheck: %zu elements, worst error %.3g at input %d element %zu (analytic %.10g, "
            "numeric %.10g), largest gradient %.3g\n",
            r->n_checked, r->max_err, r->input, r->index, r->analytic, r->numeric, r->max_abs_grad);
}
