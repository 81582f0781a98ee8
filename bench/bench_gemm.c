/* bench_gemm.c: the speed of k_gemm on the shapes a transformer step uses, against OpenBLAS
 * when the bench was built with it (see bench/README.md). One line per shape and thread count:
 *   bench gemm FORM MxKxN threads=<n> attograd_ms=<x> gflops=<g> pct_peak=<p>
 *       [openblas_ms=<y> ratio=<y/x>]
 *       cpu_ms=<c>
 * ratio > 1 means attograd is faster. Times are the median of RUNS runs, attograd and OpenBLAS
 * alternating; each run repeats the product until it has taken at least MIN_RUN_MS. pct_peak is
 * against the FMA peak measured here first (one thread, registers only), times the threads.
 * cpu_ms is the CPU time of all threads per product: on a machine shared with other programs,
 * cpu_ms of one thread is the time the product takes when it has the core (ms is wall time).
 * bench_gemm --peak prints the first line (the peak; with AVX512_BF16 also vdpbf16ps's,
 * peak_bf16_gflops_per_thread) only; bench_gemm --bandwidth one line of the memory bandwidth
 * at 1 and 2 threads (gbs_1, gbs_2: GB/s of a[i] = b[i] + s c[i] over arrays no cache holds); bench_gemm TEXT runs the shapes whose
 * "FORM MxKxN" contains TEXT (e.g. TN, or 1280x128x). bench_gemm --cold [TEXT] runs each product
 * on operands no cache holds (one of many copies in turn: COLD_MIB of them), as a training step
 * runs a weight gradient on activations last touched in the forward.
 * Not here: a whole training step (bench_step.c). Build and run: make bench, then
 * build/bench/bench_gemm (or REAL=double). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"

/* (the unroll pragmas keep the 12 chains of measure_peak in registers) */
#ifdef BENCH_OPENBLAS
/* bench/openblas_ref.c, compiled and linked only when OpenBLAS is installed */
void ref_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
              int threads);
#endif

enum { RUNS = 7, MAX_SETS = 512 };
#define COLD_MIB 128.0 /* --cold: 4 times the L3 of the machines we measure on */
#define MIN_RUN_MS 40.0

typedef struct {
    const char *form;
    int ta, tb, M, K, N;
} Shape;

/* (M,K,N): the square reference, the Linear layers of a d_model 128, d_ff 512 model on 64 x 20
 * tokens (seq2seq-small: forward x W^T is NT, the input gradient gy W is NN, the weight
 * gradient gy^T x is TN; W is (out,in) with (in,out) (128,384), (128,128), (128,512), (512,128));
 * then those of seq2seq-base */
static const Shape SHAPES[] = {
    {"NN", 0, 0, 1024, 1024, 1024},
    {"NN", 0, 0, 1280, 128, 384},
    {"NN", 0, 0, 1280, 128, 512},
    {"NN", 0, 0, 1280, 512, 128},
    {"NN", 0, 0, 1280, 384, 128},
    {"NT", 0, 1, 1280, 128, 512},
    {"NT", 0, 1, 1280, 128, 384},
    {"NT", 0, 1, 1280, 512, 128},
    {"TN", 1, 0, 512, 1280, 128},
    {"TN", 1, 0, 384, 1280, 128},
    {"TN", 1, 0, 128, 1280, 512},
    {"TN", 1, 0, 128, 1280, 128},
    /* seq2seq-base: d_model 512, d_ff 2048, vocabulary 1000 on 512 rows */
    {"NN", 0, 0, 512, 2048, 512},
    {"NN", 0, 0, 512, 512, 2048},
    {"NN", 0, 0, 512, 1000, 512},
    {"NT", 0, 1, 512, 512, 2048},
    {"NT", 0, 1, 512, 2048, 512},
    {"NT", 0, 1, 512, 512, 1000},
    {"TN", 1, 0, 2048, 512, 512},
    {"TN", 1, 0, 512, 512, 2048},
    {"TN", 1, 0, 1000, 512, 512},
};

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* GFLOP/s of one thread running independent FMA chains in registers: the machine's peak for
 * this build's vector width (12 chains cover the FMA latency times the FMA units). Timed in
 * thread CPU time, so that other programs on the machine do not lower it. */
static double measure_peak(void) {
    const long iters = 5000000;
    double best = 0;
    for (int rep = 0; rep < 15; rep++) {
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID), flops;
        Real sink;
#if defined(__AVX512F__) && !defined(AG_REAL_DOUBLE)
        __m512 acc[12], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
        for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
        for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
        for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
        sink = _mm512_reduce_add_ps(acc[0]);
        flops = (double)iters * 12 * 16 * 2;
#elif defined(__AVX512F__)
        __m512d acc[12], x = _mm512_set1_pd(1.0000001), y = _mm512_set1_pd(0.9999999);
        for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_pd((double)i);
        for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm512_fmadd_pd(acc[i], x, y);
        for (int i = 1; i < 12; i++) acc[0] = _mm512_add_pd(acc[0], acc[i]);
        sink = _mm512_reduce_add_pd(acc[0]);
        flops = (double)iters * 12 * 8 * 2;
#elif defined(__AVX2__) && defined(__FMA__) && !defined(AG_REAL_DOUBLE)
        __m256 acc[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
        for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
        for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
        float tmp[8];
        for (int i = 1; i < 12; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
        _mm256_storeu_ps(tmp, acc[0]);
        sink = tmp[0];
        flops = (double)iters * 12 * 8 * 2;
#elif defined(__AVX2__) && defined(__FMA__)
        __m256d acc[12], x = _mm256_set1_pd(1.0000001), y = _mm256_set1_pd(0.9999999);
        for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_pd((double)i);
        for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_pd(acc[i], x, y);
        double tmp[4];
        for (int i = 1; i < 12; i++) acc[0] = _mm256_add_pd(acc[0], acc[i]);
        _mm256_storeu_pd(tmp, acc[0]);
        sink = tmp[0];
        flops = (double)iters * 12 * 4 * 2;
#else
        Real acc[12], x = (Real)1.0000001, y = (Real)0.9999999;
        for (int i = 0; i < 12; i++) acc[i] = (Real)i;
        for (long n = 0; n < iters / 8; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = acc[i] * x + y;
        sink = acc[0] + acc[11];
        flops = (double)(iters / 8) * 12 * 2;
#endif
        double ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (sink == (Real)12345) printf(" ");
        double g = flops / (ms * 1e6);
        if (g > best) best = g;
    }
    return best;
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* ms per product: repeats it until MIN_RUN_MS has passed, returns the mean of that run. The
 * product runs on the sets of operands A[i], B[i], C[i] in turn (one set, or --cold's many). */
static double time_ours(const Shape *s, Real **A, Real **B, Real **C, int sets, double *cpu_ms) {
    int reps = 0;
    double t0 = now_ms(), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID), t;
    do {
        int i = reps % sets;
        k_gemm(s->ta, s->tb, s->M, s->N, s->K, A[i], B[i], C[i], 0);
        reps++;
    } while ((t = now_ms() - t0) < MIN_RUN_MS);
    *cpu_ms = (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
    return t / reps;
}

#ifdef BENCH_OPENBLAS
static double time_ref(const Shape *s, const Real *A, const Real *B, Real *C, int threads) {
    int reps = 0;
    double t0 = now_ms(), t;
    do {
        ref_gemm(s->ta, s->tb, s->M, s->N, s->K, A, B, C, threads);
        reps++;
    } while ((t = now_ms() - t0) < MIN_RUN_MS);
    return t / reps;
}
#endif

/* GFLOP/s of one thread running independent vdpbf16ps chains (2 multiply-adds a lane): the
 * bf16 peak the products of --precision bf16 reach for; 0 when the build lacks AVX512_BF16 */
static double measure_peak_bf16(void) {
#if defined(__AVX512BF16__) && defined(__AVX512F__)
    const long iters = 5000000;
    double best = 0;
    for (int rep = 0; rep < 15; rep++) {
        double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
        __m512 acc[12];
        __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = x; /* bf16 1.0 pairs */
        for (int i = 0; i < 12; i++) acc[i] = _mm512_set1_ps((float)i);
        for (long n = 0; n < iters; n++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
        for (int i = 1; i < 12; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
        volatile float sink = _mm512_reduce_add_ps(acc[0]);
        (void)sink;
        double ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - t0;
        double g = (double)iters * 12 * 16 * 4 / (ms * 1e6);
        if (g > best) best = g;
    }
    return best;
#else
    return 0;
#endif
}

/* GB/s of memory moved by `threads` threads running a[i] = b[i] + s c[i] (read two arrays, write
 * one: 12 bytes an element in float) over BW_MIB of arrays, far past any cache: the bound of the
 * steps' memory-bound work (the optimizer, norms, elementwise). The best of 5 passes, timed in
 * wall time (bandwidth is shared: on a busy machine this is low). */
#define BW_MIB 192.0
static double measure_bandwidth(int threads) {
    size_t n = (size_t)(BW_MIB * 1048576.0 / 3 / sizeof(float));
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) return 0;
    set_threads(threads);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2; /* pages placed by their thread */
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = clock_ms(CLOCK_MONOTONIC);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 0.5f * c[i];
        double ms = clock_ms(CLOCK_MONOTONIC) - t0;
        double g = 3.0 * n * sizeof(float) / (ms * 1e6);
        if (g > best) best = g;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--bandwidth") == 0) { /* compare.py's roofline */
        printf("bench bandwidth array_mib=%.0f", BW_MIB);
        for (int threads = 1; threads <= 2; threads++)
            printf(" gbs_%d=%.1f", threads, measure_bandwidth(threads));
        printf("\n");
        return 0;
    }
    double peak = measure_peak(), peak_bf16 = measure_peak_bf16();
    printf("bench gemm kernel=%s real=%s peak_gflops_per_thread=%.1f", k_gemm_kernel_name(),
           AG_REAL_NAME, peak);
    if (peak_bf16 > 0) printf(" peak_bf16_gflops_per_thread=%.1f", peak_bf16);
    printf("\n");
    if (argc > 1 && strcmp(argv[1], "--peak") == 0) return 0; /* compare.py's pct_peak */
    int cold = argc > 1 && strcmp(argv[1], "--cold") == 0;
    const char *only = argc > 1 + cold ? argv[1 + cold] : NULL; /* "TN", "1280x128": those only */
    Rng rng;
    rng_seed(&rng, 3);
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
        const Shape *s = &SHAPES[si];
        char name[64];
        snprintf(name, sizeof name, "%s %dx%dx%d", s->form, s->M, s->K, s->N);
        if (only && !strstr(name, only)) continue;
        size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
        /* --cold: enough sets of operands to fill COLD_MIB, so each product finds its own
         * evicted from every cache, as a weight gradient finds the activations of the forward */
        int sets = cold ? (int)(COLD_MIB * 1048576.0 / ((na + nb + nc) * sizeof(Real))) + 1 : 1;
        Real *A[MAX_SETS], *B[MAX_SETS], *C[MAX_SETS], *C2 = malloc(nc * sizeof(Real));
        if (sets > MAX_SETS) sets = MAX_SETS;
        for (int k = 0; k < sets; k++) {
            A[k] = malloc(na * sizeof(Real)), B[k] = malloc(nb * sizeof(Real));
            C[k] = malloc(nc * sizeof(Real));
            if (!A[k] || !B[k] || !C[k] || !C2) return 1;
            for (size_t i = 0; i < na; i++) A[k][i] = (Real)rng_normal(&rng);
            for (size_t i = 0; i < nb; i++) B[k][i] = (Real)rng_normal(&rng);
            memset(C[k], 0, nc * sizeof(Real));
        }
        double flops = 2.0 * s->M * s->K * s->N;
        for (int threads = 1; threads <= 2; threads++) {
#ifndef _OPENMP
            if (threads > 1) break; /* built without OpenMP: one thread only */
#endif
            set_threads(threads);
            double ours[RUNS], cpu[RUNS];
#ifdef BENCH_OPENBLAS
            double ref[RUNS];
#endif
            for (int r = 0; r < RUNS; r++) {
                ours[r] = time_ours(s, A, B, C, sets, &cpu[r]);
#ifdef BENCH_OPENBLAS
                ref[r] = time_ref(s, A[0], B[0], C2, threads);
#endif
            }
            qsort(ours, RUNS, sizeof ours[0], cmp_double);
            qsort(cpu, RUNS, sizeof cpu[0], cmp_double);
            double ms = ours[RUNS / 2], g = flops / (ms * 1e6);
            printf("bench gemm %s%s %dx%dx%d threads=%d attograd_ms=%.3f gflops=%.1f pct_peak=%.1f",
                   s->form, cold ? " cold" : "", s->M, s->K, s->N, threads, ms, g,
                   100.0 * g / (peak * threads));
#ifdef BENCH_OPENBLAS
            qsort(ref, RUNS, sizeof ref[0], cmp_double);
            double diff = 0; /* the two results should agree to rounding */
            for (size_t i = 0; i < nc; i++)
                diff = fmax(diff, fabs((double)C[0][i] - (double)C2[i]));
            printf(" openblas_ms=%.3f ratio=%.2f max_abs_diff=%.1e", ref[RUNS / 2],
                   ref[RUNS / 2] / ms, diff);
#endif
            printf(" cpu_ms=%.3f\n", cpu[RUNS / 2]);
            fflush(stdout);
        }
        for (int k = 0; k < sets; k++) {
            free(A[k]);
            free(B[k]);
            free(C[k]);
        }
        free(C2);
    }
    return 0;
}
