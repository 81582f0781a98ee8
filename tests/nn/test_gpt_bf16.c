/* test_gpt_bf16.c: a step of `make gpt`'s model (4 layers, 4 heads, n_embd 128, block 64, the
 * 65 characters of its Shakespeare; batch 2) under ag_precision_use(AG_PRECISION_BF16): a short AdamW
 * run on a learnable token stream gives the same bits at 1 and 2 threads, learns, and stays
 * close to the fp32 run from the same weights (and is not the fp32 run: the products really
 * are bf16). The float build only: the double build refuses bf16
 * (tests/tensor/test_gemm_bf16.c). Not here: the kernel (tests/tensor/test_gemm_bf16.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attograd.h"

#if !defined(AG_REAL_DOUBLE) && !defined(AG_BLAS_OPENBLAS)
enum { V = 65, BT = 2, TT = 64, STEPS = 24 };

/* step s's rows: token i+1 follows token i by a fixed rule, with a jump every 7 positions */
static void batch(int *idx, int *tgt, int s) {
    uint64_t h = (uint64_t)s * 0x9e3779b97f4a7c15ull;
    for (int b = 0; b < BT; b++) {
        int x = (int)((h >> (8 * b)) % V);
        for (int i = 0; i <= TT; i++) {
            if (i < TT) idx[b * TT + i] = x;
            if (i > 0) tgt[b * TT + i - 1] = x;
            x = i % 7 == 6 ? (x * 11 + 5) % V : (x + 3) % V;
        }
    }
}

/* STEPS losses of the model trained from seed 1 with the products in precision, on threads */
static void run(int precision, int threads, double *losses) {
    cr_assert_eq(ag_precision_use(precision), AG_OK);
    ag_threads_use(threads);
    GptConfig c = {.vocab_size = V, .block_size = TT, .n_layer = 4, .n_head = 4, .n_embd = 128};
    Arena *params = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, params, &rng, &c);
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    oc.lr = 3e-3;
    Optimizer *opt = optim_new(params, &m.params, &oc);
    int idx[BT * TT], tgt[BT * TT];
    for (int s = 0; s < STEPS; s++) {
        batch(idx, tgt, s);
        ag_tape_reset(t);
        ag_params_zero_grad(&m.params);
        Tensor *loss = nn_gpt_loss(t, &m, idx, tgt, BT, TT, &rng);
        ag_backward(t, loss);
        optim_step(opt);
        losses[s] = (double)loss->data[0];
    }
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(params);
    ag_precision_use(AG_PRECISION_FP32);
    ag_threads_use(1);
}

#endif

Test(gpt_bf16, trains_with_the_same_bits_at_one_and_two_threads_close_to_fp32) {
#if defined(AG_REAL_DOUBLE) || defined(AG_BLAS_OPENBLAS)
    cr_skip_test("bf16 products are the float build's (the double build and BLAS=openblas's "
                 "refuse them)");
#else
    double fp32[STEPS], one[STEPS], two[STEPS];
    run(AG_PRECISION_FP32, 1, fp32);
    run(AG_PRECISION_BF16, 1, one);
    run(AG_PRECISION_BF16, 2, two);
    int differs = 0;
    for (int s = 0; s < STEPS; s++) {
        cr_assert(memcmp(&one[s], &two[s], sizeof one[s]) == 0,
                  "step %d: %.9g at 1 thread, %.9g at 2", s, one[s], two[s]);
        differs |= one[s] != fp32[s];
    }
    cr_assert(differs, "bf16 gave fp32's bits at every step: the products were not bf16");
    cr_assert(one[STEPS - 1] < 0.5 * one[0], "bf16 did not learn: %g -> %g", one[0],
              one[STEPS - 1]);
    double a = 0, b = 0; /* the last 5 steps' mean loss */
    for (int s = STEPS - 5; s < STEPS; s++) a += one[s] / 5, b += fp32[s] / 5;
    cr_assert(fabs(a - b) < 0.05 * b + 0.02, "bf16's loss %g, fp32's %g", a, b);
    printf("gpt_bf16: loss %.4f -> %.4f (fp32 %.4f -> %.4f)\n", one[0], a, fp32[0], b);
#endif
}
