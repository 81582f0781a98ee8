/* bench_step.c: the time of one training step (forward and backward, no optimizer) of a small
 * seq2seq transformer: d_model 128, 4 heads, 2+2 layers, d_ff 512, no dropout, batch 64 of 20
 * source and 20 target tokens, vocabularies of 64. Prints the median of several steps for 1 and
 * 2 threads, `bench step threads=<n> ms=<x> cpu_ms=<c> peak_mib=<p> loss=<l>`, or for the
 * thread counts given as arguments. ms is wall time, cpu_ms the CPU time of all threads (see
 * bench_gemm.c), peak_mib the step arena's peak (activations and gradients of a step).
 * Not here: the GEMM alone (bench_gemm.c), the optimizer and PyTorch (bench_models.c,
 * compare.py). Build and run: make bench && build/bench/bench_step */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attograd.h"

enum { BATCH = 64, S = 20, T = 20, VOCAB = 64, RUNS = 7 };

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    Seq2SeqConfig cfg = nn_seq2seq_default_config(VOCAB, VOCAB, 128, 4, 2);
    cfg.layer.d_ff = 512;
    cfg.layer.dropout = 0;
    Arena *params = arena_new("params", 64 << 20);
    Tape *tape = ag_tape_new(arena_new("step", (size_t)1 << 30));
    Rng rng;
    rng_seed(&rng, 1);
    Seq2Seq m;
    nn_seq2seq_init(&m, params, &rng, &cfg);
    nn_seq2seq_need_weights(&m, 0); /* a training step: no attention maps */
    static int src[BATCH * S], tgt_in[BATCH * T], tgt_out[BATCH * T];
    for (int i = 0; i < BATCH * S; i++) src[i] = 1 + (int)rng_below(&rng, VOCAB - 1);
    for (int i = 0; i < BATCH * T; i++) {
        tgt_in[i] = 1 + (int)rng_below(&rng, VOCAB - 1);
        tgt_out[i] = 1 + (int)rng_below(&rng, VOCAB - 1);
    }
    int counts[8] = {1, 2}, n_counts = 2;
    if (argc > 1) n_counts = 0;
    for (int i = 1; i < argc && n_counts < 8; i++) counts[n_counts++] = atoi(argv[i]);
    for (int c = 0; c < n_counts; c++) {
        int threads = counts[c];
#ifdef _OPENMP
        omp_set_num_threads(threads);
#else
        if (threads > 1) break;
#endif
        double ms[RUNS], cpu[RUNS], loss = 0;
        for (int r = 0; r < RUNS + 1; r++) {
            double t0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
            Tensor *l = nn_seq2seq_loss(tape, &m, src, S, tgt_in, tgt_out, BATCH, T, &rng);
            ag_backward(tape, l);
            double dt = clock_ms(CLOCK_MONOTONIC) - t0;
            double dc = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
            loss = l->data[0];
            ag_tape_reset(tape);
            ag_params_zero_grad(&m.params);
            if (r > 0) { /* the first step warms up caches and scratch */
                ms[r - 1] = dt;
                cpu[r - 1] = dc;
            }
        }
        qsort(ms, RUNS, sizeof ms[0], cmp_double);
        qsort(cpu, RUNS, sizeof cpu[0], cmp_double);
        printf("bench step threads=%d ms=%.2f cpu_ms=%.2f peak_mib=%.1f loss=%.6f\n", threads,
               ms[RUNS / 2], cpu[RUNS / 2], (double)tape->arena->peak / (1024.0 * 1024.0), loss);
    }
    nn_seq2seq_free(&m);
    arena_free(tape->arena);
    ag_tape_free(tape);
    arena_free(params);
    return 0;
}
