/* test_gpt_bf16.c: a step of `make gpt`'s model (4 layers, 4 heads, n_embd 128, block 64, the
 * 65 characters of its Shakespeare; batch 2) under ag_precision_use(AG_PRECISION_BF16): a short AdamW
 * run on a learnable token stream gives the same bits at 1 and 2 threads, learns, and stays
 * close to the fp32 run from the same weights (and is not the fp32 run: the products really
 * are bf16). The packed bf16 copies of the weights that AdamW's step keeps under bf16
 * (k_gemm_bf16.c's "packed weights kept with their parameter"): a short run gives the same
 * bits with the copies and without them (k_bf16_cache_on 0: every product packs its weights),
 * at 1 and 2 threads, with every read of a copy checked against the product's own packing
 * (k_bf16_cache_check); weights written between steps by the library's writers (an .npz load,
 * tensor_copy_from_floats, a direct write followed by ag_params_written) leave no copy stale;
 * a direct write that does not call it is caught by the check (and so the copies are really
 * read). The float build only: the double build refuses bf16
 * (tests/tensor/test_gemm_bf16.c). Not here: the kernel (tests/tensor/test_gemm_bf16.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: the cache's switches */
#include "attograd.h"

#if !defined(AG_REAL_DOUBLE) && !defined(AG_BLAS_OPENBLAS)
enum { V = 65, BT = 2, TT = 64, STEPS = 24, CSTEPS = 6, AT = 3 };

/* what is written into the weights before step AT of run_written */
enum { NONE, NPZ, COPY, BUMPED, UNBUMPED };

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

/* the weight the writers change: block 1's attention projection (its x W^T and gy W) */
static Tensor *target(Gpt *m) {
    Tensor *w = m->h[1].c_attn.weight;
    cr_assert(w->ndim == 2);
    return w;
}

/* steps losses and the last weights' checksum (sum, may be NULL) of the model trained from
 * seed 1 with the products in precision on threads, the copies on or off (and checked), with
 * write before step AT */
static void run_written(int precision, int threads, int cache, int write, int steps, double *losses,
                        double *sum) {
    cr_assert_eq(ag_precision_use(precision), AG_OK);
    ag_threads_use(threads);
    k_bf16_cache_on = cache;
    k_bf16_cache_check = cache;
    GptConfig c = {.vocab_size = V, .block_size = TT, .n_layer = 4, .n_head = 4, .n_embd = 128};
    Arena *params = arena_new("params", 0);
    Tape *t = ag_tape_new(arena_new("step", 0));
    Rng rng;
    rng_seed(&rng, 1);
    Gpt m;
    nn_gpt_init(&m, params, &rng, &c);
    char path[] = "/tmp/test_gpt_bf16_cache_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(npz_save_params(&m.params, path, 0, NULL), AG_OK, "%s", ag_last_error());
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    oc.lr = 3e-3;
    Optimizer *opt = optim_new(params, &m.params, &oc);
    int idx[BT * TT], tgt[BT * TT];
    for (int s = 0; s < steps; s++) {
        if (s == AT && write != NONE) {
            Tensor *w = target(&m);
            if (write == NPZ) /* back to the first weights */
                cr_assert_eq(npz_load_params(&m.params, path, NULL), AG_OK, "%s", ag_last_error());
            if (write == COPY) {
                float *v = malloc(w->size * sizeof *v);
                for (size_t i = 0; i < w->size; i++) v[i] = (float)w->data[i] * 0.5f;
                tensor_copy_from_floats(w, v);
                free(v);
            }
            if (write == BUMPED || write == UNBUMPED)
                for (size_t i = 0; i < w->size; i += 3) w->data[i] = -w->data[i];
            if (write == BUMPED) ag_params_written();
        }
        batch(idx, tgt, s);
        ag_tape_reset(t);
        ag_params_zero_grad(&m.params);
        Tensor *loss = nn_gpt_loss(t, &m, idx, tgt, BT, TT, &rng);
        ag_backward(t, loss);
        optim_step(opt);
        losses[s] = (double)loss->data[0];
    }
    for (int i = 0; sum && i < m.params.n; i++)
        for (size_t j = 0; j < m.params.items[i]->size; j++)
            *sum += (double)m.params.items[i]->data[j] * (double)(j % 7 + 1);
    remove(path);
    ag_tape_free(t);
    nn_gpt_free(&m);
    arena_free(params);
    k_bf16_cache_on = 1;
    k_bf16_cache_check = 0;
    ag_precision_use(AG_PRECISION_FP32);
    ag_threads_use(1);
}

/* STEPS losses of the model trained from seed 1 with the products in precision, on threads */
static void run(int precision, int threads, double *losses) {
    run_written(precision, threads, 1, NONE, STEPS, losses, NULL);
}

/* the run with the copies against the run without, bit for bit */
static void same_bits(int threads, int write) {
    double on[CSTEPS], off[CSTEPS], son = 0, soff = 0;
    run_written(AG_PRECISION_BF16, threads, 1, write, CSTEPS, on, &son);
    run_written(AG_PRECISION_BF16, threads, 0, write, CSTEPS, off, &soff);
    for (int s = 0; s < CSTEPS; s++)
        cr_assert(memcmp(&on[s], &off[s], sizeof on[s]) == 0,
                  "write %d, %d threads, step %d: %.9g with the copies, %.9g without", write,
                  threads, s, on[s], off[s]);
    cr_assert(memcmp(&son, &soff, sizeof son) == 0, "the final weights differ: %.17g %.17g", son,
              soff);
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

#if !defined(AG_REAL_DOUBLE) && !defined(AG_BLAS_OPENBLAS)
Test(gpt_bf16_cache, same_bits_with_and_without_the_copies_at_one_and_two_threads) {
    same_bits(1, NONE);
    same_bits(2, NONE);
}

Test(gpt_bf16_cache, weights_written_between_steps_leave_no_copy_stale) {
    same_bits(1, NPZ);
    same_bits(2, COPY);
    same_bits(1, BUMPED);
}

/* the check finds the copy stale: the step after the write reads it */
Test(gpt_bf16_cache, a_write_without_ag_params_written_is_caught, .signal = SIGABRT) {
    double l[CSTEPS];
    run_written(AG_PRECISION_BF16, 1, 1, UNBUMPED, CSTEPS, l, NULL);
}
#else
Test(gpt_bf16_cache, float_build_only) {
    cr_skip_test("bf16 products are the float build's (the double build and BLAS=openblas's "
                 "refuse them)");
}
#endif
