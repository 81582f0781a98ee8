/* test_embedding.c: the padding index of ag_embedding_padded. Its row gets no gradient (by
 * design, so it is not a finite-difference case); every other row gets the same gradient as
 * without a padding index. */
#include <criterion/criterion.h>

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
