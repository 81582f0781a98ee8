/* tape_tour.c: a first program with attograd. A 2-layer MLP learns the XOR of the signs of
 * two coordinates (a point is class 1 when x0 * x1 > 0), trained by plain SGD written inline.
 * It shows the whole life of a training step: arenas, parameters, a forward pass recorded on
 * the tape, ag_backward, the update, and ag_tape_reset; then it prints the tape of one step
 * and checks the gradients of the whole forward pass with ag_gradcheck, the check the test
 * suite runs on every op. Deterministic: one seed, same output on every run and thread count.
 * Not here: modules (src/nn) and optimizers (src/optim), which will replace the hand-made
 * layers and the update loop below. Read next: src/autograd/autograd.h, then ops.def.
 * --dot FILE also writes the first step's tape as a Graphviz graph (ag_tape_dot; draw it with
 * `dot -Tpng FILE -o tape.png`).
 * Build and run: make && build/examples/tape_tour [--dot FILE] */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

enum { N = 64, D = 2, H = 16, K = 2, STEPS = 300, PRINT_EVERY = 30 };
#define LR 0.5

/* The model's parameters, shaped like PyTorch's nn.Linear: weight (out, in), bias (out). */
typedef struct {
    Tensor *w1, *b1, *w2, *b2;
} Mlp;

/* The toy data set: N points in [-1, 1)^2 and their labels. */
typedef struct {
    Tensor *x; /* (N, D), no gradient: it is data */
    int y[N];  /* (N) class ids, 0 or 1 */
} Data;

/* logits = gelu(x w1^T + b1) w2^T + b2.  x (N, D), w1 (H, D), b1 (H), w2 (K, H), b2 (K)
 * -> (N, K). Every call records 5 nodes on the tape (2 matmul_bt, 2 add_bias, 1 gelu). */
static Tensor *mlp_forward(Tape *tape, Tensor *x, Tensor *w1, Tensor *b1, Tensor *w2, Tensor *b2) {
    Tensor *h = ag_gelu(tape, ag_add_bias(tape, ag_matmul_bt(tape, x, w1), b1)); /* (N, H) */
    return ag_add_bias(tape, ag_matmul_bt(tape, h, w2), b2);                     /* (N, K) */
}

/* The same forward in the shape ag_gradcheck wants: inputs = {w1, b1, w2, b2}, ctx = Data. */
static Tensor *forward_for_gradcheck(Tape *tape, Tensor **p, void *ctx) {
    const Data *d = ctx;
    return mlp_forward(tape, d->x, p[0], p[1], p[2], p[3]);
}

/* Plain SGD: p -= lr * dL/dp for every element, then the gradient goes back to zero (backward
 * accumulates with +=, so a gradient left over would add into the next step's). */
static void sgd_step(Tensor **params, int n, double lr) {
    for (int k = 0; k < n; k++) {
        Tensor *p = params[k];
        for (size_t i = 0; i < p->size; i++) p->data[i] -= (Real)lr * p->grad[i];
        tensor_zero_grad(p);
    }
}

/* writes the tape's graph to path; 0, or 2 with a message naming the path and the reason */
static int write_dot(const Tape *tape, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "tape_tour: cannot write %s: %s\n", path, strerror(errno));
        return 2;
    }
    int bad = ag_tape_dot(tape, f) != 0;
    bad |= fclose(f) != 0;
    if (bad) fprintf(stderr, "tape_tour: writing %s failed\n", path);
    return bad ? 2 : 0;
}

int main(int argc, char **argv) {
    const char *dot_path = NULL;
    if (argc == 3 && strcmp(argv[1], "--dot") == 0)
        dot_path = argv[2];
    else if (argc != 1) {
        fprintf(stderr, "usage: tape_tour [--dot FILE]\n");
        return 2;
    }
    /* Two arenas, two lifetimes: parameters and their gradients live for the whole run; every
     * tensor a forward pass makes lives in the step arena, which ag_tape_reset frees at once.
     * Both grow as they are used (0: no memory until the first tensor), and a reset keeps
     * what the step arena reserved for the next step. */
    Arena *params = arena_new("params", 0);
    Arena *step = arena_new("step", 0);
    Tape *tape = ag_tape_new(step);
    ag_tape_keep_norms(tape, dot_path != NULL); /* every node's |g| for the picture */
    Rng rng;
    rng_seed(&rng, 42);

    /* parameters: normal init scaled by 1/sqrt(fan_in), biases zero (tensor_param zeroes) */
    Mlp m;
    m.w1 = tensor_param(params, 2, (int[]){H, D}, "w1");
    m.b1 = tensor_param(params, 1, (int[]){H}, "b1");
    m.w2 = tensor_param(params, 2, (int[]){K, H}, "w2");
    m.b2 = tensor_param(params, 1, (int[]){K}, "b2");
    rng_fill_normal(&rng, m.w1, 0, 1 / sqrt((double)D));
    rng_fill_normal(&rng, m.w2, 0, 1 / sqrt((double)H));
    Tensor *all[4] = {m.w1, m.b1, m.w2, m.b2};

    /* data: a plain tensor (no requires_grad), in the long-lived arena */
    Data d;
    d.x = tensor_new2(params, N, D, "x");
    rng_fill_uniform(&rng, d.x, -1, 1);
    for (int i = 0; i < N; i++) d.y[i] = d.x->data[i * D] * d.x->data[i * D + 1] > 0;

    printf("tape_tour: %d points, MLP %d -> %d -> %d, SGD lr %g, %s build\n", N, D, H, K, LR,
           AG_REAL_NAME);
    double first_loss = 0, loss_value = 0;
    for (int s = 0; s <= STEPS; s++) {
        Tensor *logits = mlp_forward(tape, d.x, m.w1, m.b1, m.w2, m.b2); /* (N, K) */
        Tensor *loss = ag_cross_entropy(tape, logits, d.y, -100);        /* () */
        ag_backward(tape, loss); /* fills w1->grad, b1->grad, w2->grad, b2->grad */
        loss_value = (double)loss->data[0];
        if (s == 0) {
            first_loss = loss_value;
            ag_tape_print(tape, stdout);
            if (dot_path && write_dot(tape, dot_path) != 0) {
                ag_tape_free(tape);
                arena_free(step);
                arena_free(params);
                return 2;
            }
        }
        if (s % PRINT_EVERY == 0) {
            int correct = 0;
            for (int i = 0; i < N; i++) {
                const Real *l = logits->data + i * K;
                correct += (l[1] > l[0]) == d.y[i];
            }
            printf("step %3d  loss %.4f  accuracy %2d/%d\n", s, loss_value, correct, N);
        }
        /* every tensor of this step dies here: read what you need (loss_value) before */
        ag_tape_reset(tape);
        if (s < STEPS) sgd_step(all, 4, LR);
    }

    /* Check the gradients of the whole forward against central differences. The check
     * forms loss = sum(logits * R) with a fixed random R, so each logit counts differently. */
    AgGradcheckResult r;
    int ok = ag_gradcheck(tape, forward_for_gradcheck, &d, all, 4, ag_gradcheck_default_eps(),
                          ag_gradcheck_default_tol(), &r);
    ag_gradcheck_print(&r, stdout);
    printf("gradcheck %s (tolerance %g)\n", ok ? "passed" : "FAILED", ag_gradcheck_default_tol());
    printf("arenas: params %zu bytes used, step peak %zu bytes\n", params->used, step->peak);

    int status = ok && loss_value < first_loss ? 0 : 1;
    ag_tape_free(tape);
    arena_free(step);
    arena_free(params);
    return status;
}
