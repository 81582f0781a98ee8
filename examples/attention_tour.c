/* attention_tour.c: attention, the op this library exists for, taken apart and put back
 * together. First it is built from tape ops as the formula reads,
 *     y = dropout(softmax(q k^T / sqrt(HS) + M)) v        (M: 0, or -inf above the diagonal)
 * and the tape is printed: one node per op, each differentiated by its own backward. Then the
 * same computation runs as one fused op, ag_attention, whose kernel does it all per (batch,
 * head) and never stores the scores. Both draw their dropout mask from the same RNG state by
 * the same rule, so the outputs and the gradients of q, k and v must agree to rounding:
 * 1e-12 in the double build, 1e-5 in float; otherwise the program exits 1.
 * The path a student follows from the model down to the loops (4 hops):
 *   nn_mha_forward (src/nn/attention.c) -> ag_attention (src/autograd/ops_attention.c) ->
 *   its backward, ag_attention_backward (same file) -> k_attention_backward, whose definition
 *   in plain loops is src/tensor/k_attention_ref.c (the fast kernel, k_attention.c, is tested
 *   against it).
 * docs/backprop.md derives every line of the backward.
 * --dot FILE writes the tape of part 1 (the formula from ops) as a Graphviz graph (ag_tape_dot),
 * with the norm of every value and gradient: docs/images/attention_tape.png is that picture.
 * Build and run: make && build/examples/attention_tour [--dot FILE] */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

enum { B = 2, NH = 2, T = 5, HS = 4 };
#define DROPOUT 0.2

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-5
#endif

/* y from the formula, op by op: q, k, v (B, NH, T, HS) -> (B, NH, T, HS) */
static Tensor *attention_by_hand(Tape *t, Tensor *q, Tensor *k, Tensor *v, Rng *rng) {
    Tensor *s = ag_matmul_bt(t, q, k);          /* (B, NH, T, T): q_i . k_j */
    s = ag_scale(t, s, 1.0 / sqrt((double)HS)); /* / sqrt(HS) */
    Tensor *mask = tensor_new4(t->arena, B, NH, T, T, "causal_mask");
    for (size_t e = 0; e < mask->size; e++) { /* key j > query i: -inf */
        int i = (int)(e / T % T), j = (int)(e % T);
        mask->data[e] = j > i ? (Real)-INFINITY : 0;
    }
    Tensor *P = ag_softmax(t, ag_add(t, s, mask));          /* over the keys */
    return ag_matmul(t, ag_dropout(t, P, DROPOUT, rng), v); /* (B, NH, T, HS) */
}

/* loss = sum(y * w): its gradient with respect to y is w, a random upstream gradient */
static Tensor *loss_of(Tape *t, Tensor *y, Tensor *w) { return ag_sum(t, ag_mul(t, y, w)); }

static double max_diff(const Real *a, const Real *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

int main(int argc, char **argv) {
    const char *dot_path = NULL;
    if (argc == 3 && strcmp(argv[1], "--dot") == 0)
        dot_path = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: attention_tour [--dot FILE]\n");
        return 2;
    }
    Arena *params = arena_new("params", 0), *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ag_tape_keep_norms(t, dot_path != NULL);
    Rng init;
    rng_seed(&init, 7);
    const int shape[4] = {B, NH, T, HS};
    Tensor *q = tensor_param(params, 4, shape, "q"), *k = tensor_param(params, 4, shape, "k");
    Tensor *v = tensor_param(params, 4, shape, "v"), *w = tensor_new(params, 4, shape, "w");
    Tensor *x[4] = {q, k, v, w};
    for (int n = 0; n < 4; n++)
        for (size_t e = 0; e < x[n]->size; e++) x[n]->data[e] = (Real)rng_normal(&init);

    /* 1. the formula on the tape */
    Rng rng;
    rng_seed(&rng, 1);
    Tensor *y = attention_by_hand(t, q, k, v, &rng);
    ag_backward(t, loss_of(t, y, w));
    printf("attention from tape ops (B %d, heads %d, T %d, HS %d, dropout %g):\n", B, NH, T, HS,
           DROPOUT);
    ag_tape_print(t, stdout);
    if (dot_path) {
        FILE *f = fopen(dot_path, "w");
        int bad = !f || ag_tape_dot(t, f) != 0;
        if (f) bad |= fclose(f) != 0;
        if (bad) {
            if (!f)
                fprintf(stderr, "attention_tour: cannot write %s: %s\n", dot_path, strerror(errno));
            else
                fprintf(stderr, "attention_tour: writing %s failed\n", dot_path);
            ag_tape_free(t);
            arena_free(step);
            arena_free(params);
            return 2;
        }
    }
    Tensor *y1 = tensor_new(params, 4, shape, "y1"), *g1[3];
    for (size_t e = 0; e < y->size; e++) y1->data[e] = y->data[e];
    for (int n = 0; n < 3; n++) {
        g1[n] = tensor_new(params, 4, shape, "grad");
        for (size_t e = 0; e < x[n]->size; e++) g1[n]->data[e] = x[n]->grad[e];
        tensor_zero_grad(x[n]);
    }

    /* 2. the fused op, from the same RNG state */
    ag_tape_reset(t);
    rng_seed(&rng, 1);
    Tensor *y2 = ag_attention(t, q, k, v, NULL, AG_CAUSAL, DROPOUT, &rng, NULL);
    ag_backward(t, loss_of(t, y2, w));
    printf("\nthe fused op:\n");
    ag_tape_print(t, stdout);

    /* 3. the same numbers */
    const char *names[4] = {"y", "dq", "dk", "dv"};
    double d[4] = {max_diff(y1->data, y2->data, y1->size), max_diff(g1[0]->data, q->grad, q->size),
                   max_diff(g1[1]->data, k->grad, k->size),
                   max_diff(g1[2]->data, v->grad, v->size)};
    int bad = 0;
    printf("\nlargest difference, tape ops vs fused (tolerance %g):\n", TOL);
    for (int n = 0; n < 4; n++) {
        printf("  %-2s %.3g\n", names[n], d[n]);
        bad |= !(d[n] <= TOL);
    }
    printf(bad ? "MISMATCH\n" : "the fused op computes the formula\n");
    ag_tape_free(t);
    arena_free(step);
    arena_free(params);
    return bad;
}
