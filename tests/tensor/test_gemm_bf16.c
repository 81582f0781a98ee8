/* test_gemm_bf16.c: k_gemm_bf16, the product with bf16 inputs and fp32 sums (a step's products
 * under --precision bf16). k_bf16_round on its edge cases (ties to even, NaN, infinity,
 * denormals); every form (NN, NT, TN, TT), with and without accumulate, on shapes around the
 * kernel's tile and K block, against the arithmetic k_gemm_bf16.c defines written out here as a
 * scalar loop (bit for bit: the build's kernel, vdpbf16ps or its emulation, must give exactly
 * those bits, also for values whose sums and products fall below FLT_MIN), and against a
 * float64 product of the unrounded inputs within the bound bf16 rounding implies (2^-7 of
 * sum |a b| for the two roundings of each product, plus the fp32 sums'). Then: 1, 2 and 3
 * threads give the same bits; keeping a thread's packed A across blocks of columns gives the
 * bits of packing it per block; the bias form (k_gemm_bf16_bias) is the bias stored, then the
 * product accumulated; ag_precision_use refuses bf16 in the double build.
 * Not here: a step in bf16 (tests/autograd/test_precision_bf16.c). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"

static float bf(Real x) { return k_bf16_to_float(k_bf16_round((float)x)); }
static double at(const Real *A, int ta, int M, int K, int i, int k) {
    return ta ? (double)A[(size_t)k * M + i] : (double)A[(size_t)i * K + k];
}
static double bt(const Real *B, int tb, int K, int N, int k, int j) {
    return tb ? (double)B[(size_t)j * K + k] : (double)B[(size_t)k * N + j];
}
static float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* C[i,j] as k_gemm_bf16.c's header defines it, one element at a time */
static Real reference(const Real *A, const Real *B, Real c, int ta, int tb, int M, int K, int N,
                      int i, int j, int accumulate) {
    float C = (float)c;
    for (int k0 = 0; k0 < K; k0 += K_BF16_KB) {
        int k1 = k0 + K_BF16_KB < K ? k0 + K_BF16_KB : K;
        float s = 0.0f;
        for (int k = k0; k < k1; k += 2) {
            float a1 = k + 1 < k1 ? bf((Real)at(A, ta, M, K, i, k + 1)) : 0;
            float b1 = k + 1 < k1 ? bf((Real)bt(B, tb, K, N, k + 1, j)) : 0;
            s = ftz(fmaf(a1, b1, s));
            s = ftz(fmaf(bf((Real)at(A, ta, M, K, i, k)), bf((Real)bt(B, tb, K, N, k, j)), s));
        }
        C = (k0 == 0 && !accumulate) ? s : C + s;
    }
    return (Real)C;
}

static Real *random_array(Rng *rng, size_t n, double scale) {
    Real *x = malloc((n ? n : 1) * sizeof(Real));
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (Real)(scale * rng_normal(rng));
    return x;
}

/* one product: its bits against reference(), its error against float64; returns the largest
 * error relative to sum |a b| + |c| */
static double check_one(Rng *rng, int ta, int tb, int accumulate, int M, int K, int N,
                        double scale) {
    Real *A = random_array(rng, (size_t)M * K, scale), *B = random_array(rng, (size_t)K * N, 1);
    Real *C = random_array(rng, (size_t)M * N, scale),
         *C0 = malloc(((size_t)M * N + 1) * sizeof(Real));
    cr_assert(C0);
    memcpy(C0, C, (size_t)M * N * sizeof(Real));
    k_gemm_bf16(ta, tb, M, N, K, A, B, C, accumulate);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            Real got = C[(size_t)i * N + j];
            Real want = reference(A, B, C0[(size_t)i * N + j], ta, tb, M, K, N, i, j, accumulate);
            cr_assert(memcmp(&got, &want, sizeof got) == 0,
                      "ta %d tb %d acc %d M %d K %d N %d: C[%d,%d] = %a, the definition %a", ta, tb,
                      accumulate, M, K, N, i, j, (double)got, (double)want);
            double s = accumulate ? (double)C0[(size_t)i * N + j] : 0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                double p = at(A, ta, M, K, i, k) * bt(B, tb, K, N, k, j);
                s += p;
                mag += fabs(p);
            }
            double err = fabs((double)got - s) / (mag > 0 ? mag : 1);
            if (err > worst) worst = err;
        }
    free(A);
    free(B);
    free(C);
    free(C0);
    return worst;
}

Test(k_bf16_round, rounds_to_nearest_even_and_keeps_the_specials) {
    struct {
        uint32_t in;
        uint16_t out;
    } rows[] = {
        {0x3f800000u, 0x3f80},                        /* 1 */
        {0x3f808000u, 0x3f80},                        /* a tie, to the even 1 */
        {0x3f818000u, 0x3f82},                        /* a tie, to the even 1 + 2^-6 */
        {0x3f808001u, 0x3f81},                        /* just above a tie: up */
        {0x3f807fffu, 0x3f80},                        /* just below: down */
        {0xbf808001u, 0xbf81},                        /* negative: the same on the magnitude */
        {0x7f7fffffu, 0x7f80},                        /* FLT_MAX rounds to infinity */
        {0x7f800000u, 0x7f80},                        /* infinity stays */
        {0xff800000u, 0xff80}, {0x7f800001u, 0x7fc0}, /* a signalling NaN comes back quiet */
        {0xffc00000u, 0xffc0}, {0x00000000u, 0x0000},
        {0x80000000u, 0x8000}, {0x007fffffu, 0x0000}, /* a denormal: a zero of its sign */
        {0x807fffffu, 0x8000}, {0x00800000u, 0x0080}, /* FLT_MIN is kept */
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        float x;
        memcpy(&x, &rows[r].in, sizeof x);
        cr_assert_eq(k_bf16_round(x), rows[r].out, "k_bf16_round(0x%08x) = 0x%04x, want 0x%04x",
                     rows[r].in, k_bf16_round(x), rows[r].out);
    }
    cr_assert_eq(k_bf16_to_float(0x3f81), 1.0f + 0x1p-7f);
}

Test(k_gemm_bf16, every_form_matches_its_definition_and_the_bf16_bound) {
    Rng rng;
    rng_seed(&rng, 35);
    int dims[][3] = {
        {1, 1, 1},     {3, 5, 7},     {8, 2, 32},     {9, 255, 33},  {7, 256, 31},
        {17, 257, 65}, {16, 513, 40}, {33, 600, 530}, {520, 3, 1025}}; /* the last: C three blocks of columns wide */
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int form = 0; form < 8; form++) {
            int M = dims[d][0], K = dims[d][1], N = dims[d][2];
            double worst = check_one(&rng, form & 1, (form >> 1) & 1, form >> 2, M, K, N, 1);
            /* each product off by at most (1 + 2^-8)^2 - 1 (bf16 keeps 8 bits: a unit
             * roundoff of 2^-8), then the fp32 sums: a chain of K_BF16_KB, an add per block */
            double bound = 0x1p-7 + 0x1p-16 + (K_BF16_KB + K / K_BF16_KB + 2) * 0x1p-24;
            cr_assert(worst <= bound, "M %d K %d N %d form %d: error %g above %g", M, K, N, form,
                      worst, bound);
            cr_assert(worst > 0 || K < 2, "no rounding at all: the inputs were not rounded?");
        }
}

Test(k_gemm_bf16, tiny_values_flush_as_the_instruction_does) {
    Rng rng;
    rng_seed(&rng, 36);
    /* A around 2^-63 and B around 1: sums near FLT_MIN, products below it */
    check_one(&rng, 0, 1, 1, 9, 300, 40, 0x1p-63);
    check_one(&rng, 1, 0, 0, 9, 300, 40, 0x1p-66);
}

/* k_gemm_bf16_bias: bias + the product, the bits of the bias stored in C and the product
 * accumulated onto it (its definition: C + s per K block), 1 and 2 threads, K 0 too */
Test(k_gemm_bf16, the_bias_form_is_the_bias_then_accumulate) {
    Rng rng;
    rng_seed(&rng, 38);
    int dims[][3] = {{9, 300, 40}, {70, 530, 90}, {5, 0, 33}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int form = 0; form < 4; form++) {
            int M = dims[d][0], K = dims[d][1], N = dims[d][2], ta = form & 1, tb = form >> 1;
            Real *A = random_array(&rng, (size_t)M * K, 1);
            Real *B = random_array(&rng, (size_t)K * N, 1);
            Real *bias = random_array(&rng, (size_t)N, 1);
            Real *want = random_array(&rng, (size_t)M * N, 1);
            Real *got = random_array(&rng, (size_t)M * N, 1);
            for (int i = 0; i < M; i++)
                memcpy(want + (size_t)i * N, bias, (size_t)N * sizeof(Real));
            k_gemm_bf16(ta, tb, M, N, K, A, B, want, 1);
            for (int threads = 1; threads <= 2; threads++) {
#ifdef _OPENMP
                omp_set_num_threads(threads);
#endif
                size_t saved = k_par_min;
                k_par_min = 1;
                k_gemm_bf16_bias(ta, tb, M, N, K, A, B, got, bias);
                k_par_min = saved;
                cr_assert(memcmp(got, want, (size_t)M * N * sizeof(Real)) == 0,
                          "M %d K %d N %d ta %d tb %d, %d threads: not the bias then accumulate", M,
                          K, N, ta, tb, threads);
            }
#ifdef _OPENMP
            omp_set_num_threads(1);
#endif
            free(A), free(B), free(bias), free(want), free(got);
        }
}

Test(k_gemm_bf16, same_bits_for_one_two_and_three_threads) {
#ifdef _OPENMP
    Rng rng;
    rng_seed(&rng, 37);
    int M = 70, K = 530, N = 90;
    Real *A = random_array(&rng, (size_t)M * K, 1), *B = random_array(&rng, (size_t)K * N, 1);
    Real *C[3];
    size_t saved = k_par_min;
    k_par_min = 1;
    for (int n = 1; n <= 3; n++) {
        C[n - 1] = calloc((size_t)M * N, sizeof(Real));
        cr_assert(C[n - 1]);
        omp_set_num_threads(n);
        k_gemm_bf16(n == 2, 1, M, N, K, A, B, C[n - 1], 0);
        if (n == 2) { /* ta read from A stored (K,M): the same numbers transposed */
            Real *At = malloc((size_t)M * K * sizeof(Real));
            cr_assert(At);
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) At[(size_t)k * M + i] = A[(size_t)i * K + k];
            k_gemm_bf16(1, 1, M, N, K, At, B, C[1], 0);
            free(At);
        }
    }
    k_par_min = saved;
    omp_set_num_threads(1);
    for (int n = 1; n < 3; n++)
        cr_assert(memcmp(C[0], C[n], (size_t)M * N * sizeof(Real)) == 0, "%d threads differ from 1",
                  n + 1);
    for (int n = 0; n < 3; n++) free(C[n]);
    free(A);
    free(B);
#else
    cr_skip_test("built without OpenMP: one thread only");
#endif
}

/* A thread keeps its packed rows of op(A) across its blocks of columns (k_bf16_keep_a) or
 * packs them again for each: the same words, so the same bits, for every form, one block of
 * columns (N <= 768) or several, K past one block */
Test(k_gemm_bf16, keeping_a_packed_gives_the_bits_of_packing_it_per_block) {
    Rng rng;
    rng_seed(&rng, 41);
    int dims[][3] = {{19, 300, 1700}, {8, 7, 1600}, {40, 513, 700}}; /* N > 2 x 768: split
                                                                       * by 2 threads, still wider
                                                                       * than one block */
    size_t saved = k_bf16_keep_a;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int form = 0; form < 8; form++) {
            int M = dims[d][0], K = dims[d][1], N = dims[d][2], ta = form & 1, tb = (form >> 1) & 1,
                acc = form >> 2;
            Real *A = random_array(&rng, (size_t)M * K, 1),
                 *B = random_array(&rng, (size_t)K * N, 1),
                 *C0 = random_array(&rng, (size_t)M * N, 1);
            Real *C[2];
            for (int keep = 0; keep < 2; keep++) {
                C[keep] = malloc((size_t)M * N * sizeof(Real));
                cr_assert(C[keep]);
                memcpy(C[keep], C0, (size_t)M * N * sizeof(Real));
                k_bf16_keep_a = keep ? saved : 0;
                k_gemm_bf16(ta, tb, M, N, K, A, B, C[keep], acc);
            }
            k_bf16_keep_a = saved;
            cr_assert(memcmp(C[0], C[1], (size_t)M * N * sizeof(Real)) == 0,
                      "M %d K %d N %d form %d: kept A differs from A packed per block", M, K, N,
                      form);
            /* and both are the definition (a few elements: the full check is above) */
            for (int i = 0; i < M; i += M - 1)
                for (int j = 0; j < N; j += 97) {
                    Real want = reference(A, B, C0[(size_t)i * N + j], ta, tb, M, K, N, i, j, acc);
                    cr_assert(memcmp(&C[1][(size_t)i * N + j], &want, sizeof want) == 0,
                              "M %d K %d N %d form %d: C[%d,%d] = %a, the definition %a", M, K, N,
                              form, i, j, (double)C[1][(size_t)i * N + j], (double)want);
                }
            free(A), free(B), free(C0), free(C[0]), free(C[1]);
        }
}

/* op(A) read transposed (ta: A stored (K,M)) is packed two strips of rows at a time, op(A) as
 * stored one strip at a time by another loop: the same words, so the same bits, on row counts
 * of an even and an odd number of strips, a last strip part full, 1, 2 and 3 threads (a thread's
 * rows may start at an odd strip), kept across blocks of columns or not */
Test(k_gemm_bf16, op_a_read_transposed_gives_the_bits_of_op_a_as_stored) {
    Rng rng;
    rng_seed(&rng, 42);
    int dims[][3] = {{15, 3, 33}, {16, 257, 40}, {24, 600, 31}, {41, 130, 70}, {57, 64, 1600}};
    size_t saved_par = k_par_min, saved_keep = k_bf16_keep_a;
    k_par_min = 1;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int form = 0; form < 4; form++) {
            int M = dims[d][0], K = dims[d][1], N = dims[d][2], tb = form & 1, acc = form >> 1;
            Real *A = random_array(&rng, (size_t)M * K, 1),
                 *B = random_array(&rng, (size_t)K * N, 1),
                 *C0 = random_array(&rng, (size_t)M * N, 1);
            Real *At = malloc((size_t)M * K * sizeof(Real)),
                 *want = malloc((size_t)M * N * sizeof(Real)),
                 *got = malloc((size_t)M * N * sizeof(Real));
            cr_assert(At && want && got);
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) At[(size_t)k * M + i] = A[(size_t)i * K + k];
            memcpy(want, C0, (size_t)M * N * sizeof(Real));
            k_gemm_bf16(0, tb, M, N, K, A, B, want, acc);
            for (int threads = 1; threads <= 3; threads++)
                for (int keep = 0; keep < 2; keep++) {
#ifdef _OPENMP
                    omp_set_num_threads(threads);
#else
                    if (threads > 1) continue;
#endif
                    k_bf16_keep_a = keep ? saved_keep : 0;
                    memcpy(got, C0, (size_t)M * N * sizeof(Real));
                    k_gemm_bf16(1, tb, M, N, K, At, B, got, acc);
                    cr_assert(memcmp(got, want, (size_t)M * N * sizeof(Real)) == 0,
                              "M %d K %d N %d tb %d acc %d, %d threads, keep %d: op(A) read "
                              "transposed differs from op(A) as stored",
                              M, K, N, tb, acc, threads, keep);
                }
            free(A), free(B), free(C0), free(At), free(want), free(got);
        }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    k_par_min = saved_par;
    k_bf16_keep_a = saved_keep;
}

Test(ag_precision, bf16_is_refused_in_the_double_build_only) {
#if defined(AG_REAL_DOUBLE) || defined(AG_BLAS_OPENBLAS)
    cr_assert_eq(ag_precision_use(AG_PRECISION_BF16), AG_ERR_ARG);
    cr_assert_eq(ag_precision(), AG_PRECISION_FP32);
#else
    cr_assert_eq(ag_precision_use(AG_PRECISION_BF16), AG_OK);
    cr_assert_eq(ag_precision(), AG_PRECISION_BF16);
#endif
    cr_assert_eq(ag_precision_use(AG_PRECISION_FP32), AG_OK);
    cr_assert_eq(ag_precision(), AG_PRECISION_FP32);
    cr_assert_eq(ag_precision_use(7), AG_ERR_ARG);
    cr_assert_str_neq(ag_precision_bf16_unit(), "");
}
