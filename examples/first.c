/* first.c: the README's first program. Causal self-attention on the tape: queries, keys and
 * values as parameters, ag_attention, a loss, ag_backward, and then ag_gradcheck, which compares
 * every gradient with central differences (the check every op in the suite passes).
 * Not here: modules and optimizers (examples/tape_tour.c trains a small model; src/nn).
 * Read next: examples/tape_tour.c, then src/autograd/autograd.h.
 * Build and run: make && build/examples/first */
#include <stdio.h>

#include "attograd.h"

/* y = softmax(q k^T / sqrt(HS), causal) v.  in = {q, k, v}, each (B, NH, T, HS) -> (B, NH, T, HS):
 * the layout NULL; then causal 1, no padding mask, no dropout, no probabilities */
static Tensor *attend(Tape *tape, Tensor **in, void *ctx) {
    (void)ctx;
    return ag_attention(tape, in[0], in[1], in[2], NULL, AG_CAUSAL, 0.0, NULL, NULL);
}

int main(void) {
    Arena *params = arena_new("params", 0), *step = arena_new("step", 0); /* they grow */
    Tape *tape = ag_tape_new(step);
    Rng rng;
    rng_seed(&rng, 1);
    int shape[4] = {1, 2, 5, 8}; /* (B, NH, T, HS): one sequence, 2 heads, 5 tokens */
    Tensor *qkv[3];
    for (int i = 0; i < 3; i++) {
        qkv[i] = tensor_param(params, 4, shape, "qkv");
        rng_fill_normal(&rng, qkv[i], 0, 1);
    }

    Tensor *y = attend(tape, qkv, NULL);              /* (1, 2, 5, 8) */
    Tensor *loss = ag_mean(tape, ag_mul(tape, y, y)); /* () */
    ag_backward(tape, loss);                          /* fills qkv[i]->grad */
    /* the first token sees only itself (causal): its query's gradient is 0; the last one's is not */
    printf("loss %.6f  dloss/dq[0,0,0,0] %+.6f  dloss/dq[0,0,4,0] %+.6f\n", (double)loss->data[0],
           (double)qkv[0]->grad[0], (double)qkv[0]->grad[4 * 8]);
    ag_tape_reset(tape); /* every tensor of the step is gone */

    AgGradcheckResult r;
    int ok = ag_gradcheck(tape, attend, NULL, qkv, 3, ag_gradcheck_default_eps(),
                          ag_gradcheck_default_tol(), &r);
    ag_gradcheck_print(&r, stdout);
    printf("gradcheck %s (%s build)\n", ok ? "passed" : "FAILED", AG_REAL_NAME);
    ag_tape_free(tape);
    arena_free(step);
    arena_free(params);
    return ok ? 0 : 1;
}
