/* test_embedding.c: the padding index of ag_embedding_padded. Its row gets no gradient (by
 * design, so it is not a finite-difference case); every other row gets the same gradient as
 * without a padding index. Then ag_embedding_rows against the chain of ops it fuses. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cases.h"

Test(ag_embedding_padded, padding_row_gets_no_gradient_others_unchanged) {
    TestEnv env = test_env_new();
    Tensor *w = tensor_new2(env.params, 5, 3, "w");
    Rng rng;
    rng_seed(&rng, 9);
    rng_fill_normal(&rng, w, 0, 1);
    tensor_requires_grad(w);
    int ids[6] = {0, 1, 2, 1, 0, 4}; /* id 0 is padding, used twice */
    Real plain[15];
    for (int pass = 0; pass < 2; pass++) {
        ag_tape_reset(env.tape);
        tensor_zero_grad(w);
        Tensor *y = ag_embedding_padded(env.tape, w, ids, 2, 3, pass ? 0 : -1);
        Tensor *R = tensor_new(env.tape->arena, 3, y->shape, "R");
        Rng rr;
        rng_seed(&rr, 11); /* the same upstream gradient in both passes */
        rng_fill_normal(&rr, R, 0, 1);
        ag_backward(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R)));
        if (pass == 0) {
            for (int i = 0; i < 15; i++) plain[i] = w->grad[i];
            cr_assert(plain[0] != 0, "without padding_idx row 0 receives a gradient");
            continue;
        }
        for (int c = 0; c < 3; c++) cr_assert_eq(w->grad[c], 0, "padding row got a gradient");
        for (int i = 3; i < 15; i++)
            cr_assert_eq(w->grad[i], plain[i], "row %d changed by the padding index", i / 3);
    }
    test_env_free(&env);
}

/* ag_embedding_rows against the chain it replaces in nn's seq2seq (embedding_padded, scale,
 * add_bias of constant positions, gather_rows): the same output bits and the same weight
 * gradient bits, when the rows left out hold padding_idx. ids (3,7) of a (9,33) table, pad 0 at
 * the end of rows as a padded batch has them, the live rows kept. */
Test(ag_embedding_rows, equals_the_chain_bit_for_bit) {
    enum { B = 3, T = 7, V = 9, C = 33, PAD = 0 };
    TestEnv env = test_env_new();
    Tensor *w = tensor_new2(env.params, V, C, "w"), *pos = tensor_new2(env.params, T, C, "pos");
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_normal(&rng, w, 0, 1);
    rng_fill_normal(&rng, pos, 0, 1);
    tensor_requires_grad(w);
    int ids[B * T], rows[B * T], n = 0;
    for (int i = 0; i < B * T; i++) {
        int b = i / T, t = i % T;
        ids[i] = t >= T - 2 * b ? PAD : 1 + (int)rng_below(&rng, V - 1); /* id 0 inside too */
        if (i == 3) ids[i] = PAD;
        if (t < T - 2 * b) rows[n++] = i;
    }
    double s = sqrt(128.0);
    Real out[2][B * T * C], grad[2][V * C];
    for (int pass = 0; pass < 2; pass++) {
        ag_tape_reset(env.tape);
        tensor_zero_grad(w);
        Tape *tp = env.tape;
        Tensor *y;
        if (pass == 0) {
            Tensor *x = ag_scale(tp, ag_embedding_padded(tp, w, ids, B, T, PAD), s);
            y = ag_gather_rows(tp, ag_add_bias(tp, x, pos), rows, n);
        } else {
            y = ag_embedding_rows(tp, w, ids, B, T, PAD, s, pos, rows, n);
        }
        cr_assert(y->ndim == 2 && y->shape[0] == n && y->shape[1] == C);
        Tensor *R = tensor_new(tp->arena, 2, y->shape, "R");
        Rng rr;
        rng_seed(&rr, 6); /* the same upstream gradient in both passes */
        rng_fill_normal(&rr, R, 0, 1);
        ag_backward(tp, ag_sum(tp, ag_mul(tp, y, R)));
        memcpy(out[pass], y->data, y->size * sizeof(Real));
        memcpy(grad[pass], w->grad, w->size * sizeof(Real));
    }
    cr_assert(memcmp(out[0], out[1], (size_t)n * C * sizeof(Real)) == 0, "outputs differ");
    cr_assert(memcmp(grad[0], grad[1], sizeof grad[0]) == 0, "weight gradients differ");
    for (int c = 0; c < C; c++) cr_assert_eq(grad[1][PAD * C + c], 0, "padding row got a gradient");
    int nonzero = 0;
    for (int i = 0; i < V * C; i++) nonzero += grad[1][i] != 0;
    cr_assert(nonzero > C, "the weight gradient is almost all zeros");
    test_env_free(&env);
}
