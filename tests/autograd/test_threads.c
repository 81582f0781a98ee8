/* test_threads.c: every kernel gives bit-identical results for any thread count.
 * The parallel threshold is lowered to 1 so that even these small cases split across threads;
 * each case runs forward and backward with 1, 2 and 3 threads and the outputs and input
 * gradients must match to the bit (memcmp, not a tolerance). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "cases.h"

/* output and gradients of one run, copied out of the arenas */
typedef struct {
    Real buf[8192];
    size_t n;
} Snapshot;

static void run(const GcCase *c, int threads, Snapshot *s) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    Arena *params = arena_new("inputs", 1 << 20);
    Tape *tape = ag_tape_new(arena_new("step", 8 << 20));
    Tensor *in[GC_MAX_IN];
    gc_make_inputs(c, params, in);
    Tensor *out = gc_forward_backward(c, tape, in);
    s->n = 0;
    memcpy(s->buf, out->data, out->size * sizeof(Real));
    s->n += out->size;
    for (int i = 0; i < c->n_in; i++) {
        if (!in[i]->requires_grad) continue;
        cr_assert(s->n + in[i]->size <= 8192);
        memcpy(s->buf + s->n, in[i]->grad, in[i]->size * sizeof(Real));
        s->n += in[i]->size;
    }
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
}

ParameterizedTestParameters(kernels, bit_identical_for_1_2_and_3_threads) {
    return gc_case_params();
}

ParameterizedTest(size_t *k, kernels, bit_identical_for_1_2_and_3_threads) {
    const GcCase *c = gc_case(*k);
    k_par_min = 1;
    static Snapshot one, many;
    run(c, 1, &one);
    for (int threads = 2; threads <= 3; threads++) {
        run(c, threads, &many);
        cr_assert_eq(one.n, many.n);
        cr_assert(memcmp(one.buf, many.buf, one.n * sizeof(Real)) == 0,
                  "%s: results with %d threads differ from 1 thread", c->name, threads);
    }
}

/* A bigger GEMM than the cases, at the default threshold: the real parallel path. */
Test(kernels, gemm_bit_identical_across_threads_at_default_threshold) {
    int M = 67, N = 45, K = 129;
    static Real A[67 * 129], Bm[129 * 45], C1[67 * 45], C2[67 * 45];
    Rng rng;
    rng_seed(&rng, 5);
    for (int i = 0; i < M * K; i++) A[i] = (Real)rng_normal(&rng);
    for (int i = 0; i < K * N; i++) Bm[i] = (Real)rng_normal(&rng);
    for (int form = 0; form < 3; form++) {
        int ta = form == 2, tb = form == 1;
#ifdef _OPENMP
        omp_set_num_threads(1);
#endif
        k_gemm(ta, tb, M, N, K, A, Bm, C1, 0);
#ifdef _OPENMP
        omp_set_num_threads(2);
#endif
        k_gemm(ta, tb, M, N, K, A, Bm, C2, 0);
        cr_assert(memcmp(C1, C2, sizeof C1) == 0, "gemm form %d differs across threads", form);
    }
}
