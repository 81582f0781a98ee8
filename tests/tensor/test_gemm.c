/* test_gemm.c: k_gemm, the packed and blocked matrix product under every matmul.
 * Every form (NN, NT, TN, TT) with and without accumulate, on odd shapes and on shapes one below
 * and one above each of the kernel's tile and block sizes (read from k_gemm_blocking, so every
 * build is tested at its own boundaries), against a plain triple loop in double. The error of an
 * element is measured against sum_k |a_ik b_kj| + |c_ij|, the size of what it sums, so that
 * cancellation cannot hide or fake an error. Then: results are bit-identical for 1, 2 and 3
 * threads at the default threshold and with every product split (k_par_min = 1), also for a
 * Linear backward's products run back to back in one team, and K = 0, M = 0 or N = 0 do what
 * the contract says. A Linear's bias gradient summed inside gW's product (k_gemm_sum_team)
 * keeps k_sum_rows's bits for any thread count.
 * Not here: the matmul ops built on k_gemm (tests/autograd/test_gradcheck.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-5
#endif

typedef struct {
    int M, K, N;
} Dims;

static Real *random_array(Rng *rng, size_t n) {
    Real *x = malloc((n ? n : 1) * sizeof(Real));
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (Real)rng_normal(rng);
    return x;
}

/* op(A)[i,k] and op(B)[k,j] as k_gemm reads them */
static double at(const Real *A, int ta, int M, int K, int i, int k) {
    return ta ? (double)A[(size_t)k * M + i] : (double)A[(size_t)i * K + k];
}
static double bt(const Real *B, int tb, int K, int N, int k, int j) {
    return tb ? (double)B[(size_t)j * K + k] : (double)B[(size_t)k * N + j];
}

/* Runs one product and returns the largest error of an element relative to its size. */
static double check_one(Rng *rng, int ta, int tb, int accumulate, Dims d) {
    int M = d.M, K = d.K, N = d.N;
    Real *A = random_array(rng, (size_t)M * K), *B = random_array(rng, (size_t)K * N);
    Real *C = random_array(rng, (size_t)M * N);
    Real *C0 = malloc(((size_t)M * N + 1) * sizeof(Real));
    cr_assert(C0);
    memcpy(C0, C, (size_t)M * N * sizeof(Real));
    k_gemm(ta, tb, M, N, K, A, B, C, accumulate);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = accumulate ? (double)C0[(size_t)i * N + j] : 0, mag = fabs(s);
            for (int k = 0; k < K; k++) {
                double p = at(A, ta, M, K, i, k) * bt(B, tb, K, N, k, j);
                s += p;
                mag += fabs(p);
            }
            double err = fabs((double)C[(size_t)i * N + j] - s) / (mag > 0 ? mag : 1);
            if (err > worst) worst = err;
        }
    free(A);
    free(B);
    free(C);
    free(C0);
    return worst;
}

static void check_shapes(const Dims *dims, int n) {
    static const char *forms[4] = {"NN", "NT", "TN", "TT"};
    Rng rng;
    rng_seed(&rng, 11);
    for (int s = 0; s < n; s++)
        for (int f = 0; f < 4; f++)
            for (int acc = 0; acc <= 1; acc++) {
                double err = check_one(&rng, f >= 2, f % 2, acc, dims[s]);
                cr_assert(err <= TOL, "%s %dx%dx%d accumulate=%d: relative error %.3g > %.0e",
                          forms[f], dims[s].M, dims[s].K, dims[s].N, acc, err, TOL);
            }
}

Test(k_gemm, matches_a_double_reference_on_odd_shapes) {
    static const Dims dims[] = {{1, 1, 1},   {7, 13, 5},  {33, 65, 17}, {129, 31, 257},
                                {1, 300, 1}, {2, 1, 300}, {300, 1, 2},  {64, 64, 64}};
    check_shapes(dims, (int)(sizeof dims / sizeof dims[0]));
}

/* One below, at and one above each tile and block size: M around mr and mc, N around nr and nc,
 * K around kc and 2 kc (where the sum goes on in C). */
Test(k_gemm, matches_a_double_reference_across_every_block_boundary) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    const Dims dims[] = {
        {mr - 1, 3, nr - 1},
        {mr, 5, nr},
        {mr + 1, 4, nr + 1},
        {mc - 1, 9, 2 * nr + 3},
        {mc, 2, nc},
        {mc + 1, 7, nr - 1},
        {mr + 1, 6, nc - 1},
        {mr - 1, 5, nc + 1},
        {5, kc - 1, 7},
        {5, kc, 9},
        {mr + 3, kc + 1, 11},
        {9, 2 * kc + 1, nr + 5},
        {mc + mr + 1, kc + 3, nc + nr + 1},
    };
    check_shapes(dims, (int)(sizeof dims / sizeof dims[0]));
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* The same product with 1, 2 and 3 threads must give the same bits, in every form and with
 * accumulate (C starts from the same random values each time). */
static void check_threads(Dims d) {
    int M = d.M, K = d.K, N = d.N;
    Rng rng;
    rng_seed(&rng, 12);
    Real *A = random_array(&rng, (size_t)M * K), *B = random_array(&rng, (size_t)K * N);
    Real *C0 = random_array(&rng, (size_t)M * N);
    size_t bytes = (size_t)M * N * sizeof(Real);
    Real *one = malloc(bytes), *many = malloc(bytes);
    cr_assert(one && many);
    for (int f = 0; f < 4; f++)
        for (int acc = 0; acc <= 1; acc++) {
            int ta = f >= 2, tb = f % 2;
            set_threads(1);
            memcpy(one, C0, bytes);
            k_gemm(ta, tb, M, N, K, A, B, one, acc);
            for (int t = 2; t <= 3; t++) {
                set_threads(t);
                memcpy(many, C0, bytes);
                k_gemm(ta, tb, M, N, K, A, B, many, acc);
                cr_assert(memcmp(one, many, bytes) == 0,
                          "form %d %dx%dx%d accumulate=%d: %d threads differ from 1", f, M, K, N,
                          acc, t);
            }
        }
    set_threads(2);
    free(A);
    free(B);
    free(C0);
    free(one);
    free(many);
}

Test(k_gemm, bit_identical_for_1_2_and_3_threads_at_the_default_threshold) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    const Dims dims[] = {
        {mc + 2 * mr + 3, kc + 7, 3 * nr + 5}, {2 * mr + 1, 2 * kc + 1, nc + 3}, {301, 64, 97}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) check_threads(dims[i]);
}

Test(k_gemm, bit_identical_for_1_2_and_3_threads_when_every_product_splits) {
    size_t saved = k_par_min;
    k_par_min = 1;
    const Dims dims[] = {{7, 13, 5}, {33, 65, 17}, {129, 31, 257}, {17, 300, 40}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) check_threads(dims[i]);
    k_par_min = saved;
}

Test(k_gemm, empty_sum_sets_zero_or_leaves_c) {
    Real A[1] = {1}, B[1] = {1}, C[6] = {1, 2, 3, 4, 5, 6};
    k_gemm(0, 0, 2, 3, 0, A, B, C, 1); /* K = 0, accumulate: C + nothing */
    for (int i = 0; i < 6; i++) cr_assert_eq(C[i], (Real)(i + 1));
    k_gemm(1, 1, 2, 3, 0, A, B, C, 0); /* K = 0: C = an empty sum */
    for (int i = 0; i < 6; i++) cr_assert_eq(C[i], (Real)0);
    C[0] = 9;
    k_gemm(0, 0, 0, 3, 4, A, B, C, 0); /* no rows, no columns: nothing is touched */
    k_gemm(0, 0, 2, 0, 4, A, B, C, 0);
    cr_assert_eq(C[0], (Real)9);
}

/* A Linear backward runs its products back to back in one team (k_gemm_team), no barrier
 * between them: here gx = gy W splits by rows and gW = gy^T x by columns. A thread done with
 * its share of gx goes on to gW while the other still reads gx's operands and packed blocks:
 * nothing one thread packs may land where another still reads (a team sharing one packed
 * block of op(B) between its threads failed this). Run often, the results must stay those of
 * one thread. */
Test(k_gemm, team_products_back_to_back_keep_their_bits) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    int rows = 8 * mc, in = 4 * nr, out = mr; /* gW has one row strip: split by columns */
    size_t saved = k_par_min;
    k_par_min = 1;
    Rng rng;
    rng_seed(&rng, 13);
    Real *x = random_array(&rng, (size_t)rows * in), *W = random_array(&rng, (size_t)out * in);
    Real *gy = random_array(&rng, (size_t)rows * out);
    size_t nx = (size_t)rows * in, nw = (size_t)out * in;
    Real *gx1 = calloc(nx, sizeof(Real)), *gw1 = calloc(nw, sizeof(Real));
    Real *gx2 = malloc(nx * sizeof(Real)), *gw2 = malloc(nw * sizeof(Real));
    cr_assert(gx1 && gw1 && gx2 && gw2);
    set_threads(1);
    k_linear_backward(gx1, gw1, NULL, x, W, gy, rows, in, out, 1);
    for (int rep = 0; rep < 40; rep++) {
        set_threads(2 + rep % 2);
        memset(gw2, 0, nw * sizeof(Real));
        k_linear_backward(gx2, gw2, NULL, x, W, gy, rows, in, out, 1);
        cr_assert(memcmp(gx1, gx2, nx * sizeof(Real)) == 0, "gx differs, run %d", rep);
        cr_assert(memcmp(gw1, gw2, nw * sizeof(Real)) == 0, "gW differs, run %d", rep);
    }
    set_threads(2);
    k_par_min = saved;
    free(x);
    free(W);
    free(gy);
    free(gx1);
    free(gw1);
    free(gx2);
    free(gw2);
}

/* A Linear's gbias is summed while gW = gy^T x packs gy (k_gemm_sum_team): it must get the
 * bits of k_sum_rows, a Real sum per column from 0 in row order added once to gbias (+=, from
 * random values), with 1, 2 and 3 threads, on shapes one below and above the tile (out), KC
 * (rows, the K of gW) and NC (in: the first column block sums, the next ones must not add
 * again), with the default threshold (some products run whole on one thread) and with every
 * product split; also rows = 0 (nothing added) and in = 0 (no product: the plain sum). */
static void check_bias_sum(int rows, int in, int out) {
    Rng rng;
    rng_seed(&rng, 14);
    Real *x = random_array(&rng, (size_t)rows * in), *gy = random_array(&rng, (size_t)rows * out);
    Real *g0 = random_array(&rng, (size_t)out), *want = malloc((out + 1) * sizeof(Real));
    Real *gb = malloc((out + 1) * sizeof(Real)), *gw = calloc((size_t)out * in + 1, sizeof(Real));
    Real *gw1 = calloc((size_t)out * in + 1, sizeof(Real));
    cr_assert(want && gb && gw && gw1);
    for (int c = 0; c < out; c++) {
        Real s = 0;
        for (int r = 0; r < rows; r++) s += gy[(size_t)r * out + c];
        want[c] = g0[c] + s;
    }
    memcpy(gb, g0, out * sizeof(Real));
    set_threads(1);
    k_sum_rows(gb, gy, (size_t)rows, out);
    cr_assert(memcmp(gb, want, out * sizeof(Real)) == 0, "k_sum_rows %dx%d", rows, out);
    k_gemm(1, 0, out, in, rows, gy, x, gw1, 1);
    for (int t = 1; t <= 3; t++) {
        set_threads(t);
        memcpy(gb, g0, out * sizeof(Real));
        memset(gw, 0, ((size_t)out * in + 1) * sizeof(Real));
        k_linear_backward(NULL, gw, gb, x, NULL, gy, rows, in, out, 0);
        cr_assert(memcmp(gb, want, out * sizeof(Real)) == 0,
                  "gbias rows %d in %d out %d, %d threads: not k_sum_rows's bits", rows, in, out,
                  t);
        cr_assert(memcmp(gw, gw1, (size_t)out * in * sizeof(Real)) == 0,
                  "gW rows %d in %d out %d, %d threads: not k_gemm's bits", rows, in, out, t);
    }
    set_threads(2);
    free(x);
    free(gy);
    free(g0);
    free(want);
    free(gb);
    free(gw);
    free(gw1);
}

static void check_bias_sums(void) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    const Dims dims[] = {/* M = out, K = rows, N = in */
                         {mr - 1, 5, 3},
                         {mr + 1, kc - 1, nr + 1},
                         {2 * mr + 3, kc + 1, nc + 1},
                         {mc + mr + 1, 2 * kc + 3, 2 * nr + 5},
                         {mc - 1, kc, nc - 1},
                         {3 * mr, 3 * kc + 7, 2 * nc + nr + 3},
                         {37, 0, 9},
                         {45, 70, 0}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        check_bias_sum(dims[i].K, dims[i].N, dims[i].M);
}

Test(k_gemm, linear_bias_sum_in_the_weight_product_keeps_k_sum_rows_bits) {
    check_bias_sums();
    size_t saved = k_par_min;
    k_par_min = 1;
    check_bias_sums();
    k_par_min = saved;
}

/* Products of a few rows (decoding one token: x W^T, the head) take k_gemm's path that reads
 * op(B) as it streams instead of packing it whole. Each row must come out with the very bits
 * it gets inside a product of many rows (the blocked path), in every form, with accumulate,
 * bias and bias + ReLU, on shapes around the tile (nr), the column groups and KC, for 1, 2 and
 * 3 threads with the default threshold and with every product split. Rows i0 .. i0+m of a
 * product of `big` rows: op(A) restricted to them, stored as the form stores A. */
static Real *rows_of(const Real *A, int ta, int big, int K, int i0, int m) {
    Real *s = malloc(((size_t)m * K + 1) * sizeof(Real));
    cr_assert(s);
    for (int i = 0; i < m; i++)
        for (int k = 0; k < K; k++)
            s[ta ? (size_t)k * m + i : (size_t)i * K + k] =
                ta ? A[(size_t)k * big + i0 + i] : A[(size_t)(i0 + i) * K + k];
    return s;
}

/* how = 0: k_gemm, 1: k_gemm with accumulate, 2: k_gemm_bias, 3: k_gemm_relu with a bias */
static void product(int how, int ta, int tb, int M, int N, int K, const Real *A, const Real *B,
                    Real *C, const Real *bias) {
    if (how <= 1)
        k_gemm(ta, tb, M, N, K, A, B, C, how);
    else if (how == 2)
        k_gemm_bias(ta, tb, M, N, K, A, B, C, bias);
    else
        k_gemm_relu(ta, tb, M, N, K, A, B, C, bias);
}

static void check_few_rows(Dims d) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    int big = 2 * mr + 3, K = d.K, N = d.N;
    Rng rng;
    rng_seed(&rng, 15);
    Real *A = random_array(&rng, (size_t)big * K), *B = random_array(&rng, (size_t)K * N);
    Real *C0 = random_array(&rng, (size_t)big * N), *bias = random_array(&rng, (size_t)N);
    Real *full = malloc(((size_t)big * N + 1) * sizeof(Real));
    Real *part = malloc(((size_t)4 * N + 1) * sizeof(Real));
    cr_assert(full && part);
    for (int f = 0; f < 4; f++)
        for (int how = 0; how < 4; how++) {
            int ta = f >= 2, tb = f % 2;
            set_threads(1);
            memcpy(full, C0, (size_t)big * N * sizeof(Real));
            product(how, ta, tb, big, N, K, A, B, full, bias);
            for (int m = 1; m <= 4; m++)
                for (int i0 = 0; i0 + m <= big; i0 += 2 * m + 1) {
                    Real *a = rows_of(A, ta, big, K, i0, m);
                    for (int t = 1; t <= 3; t++) {
                        set_threads(t);
                        memcpy(part, C0 + (size_t)i0 * N, (size_t)m * N * sizeof(Real));
                        product(how, ta, tb, m, N, K, a, B, part, bias);
                        cr_assert(
                            memcmp(part, full + (size_t)i0 * N, (size_t)m * N * sizeof(Real)) == 0,
                            "form %d how %d K %d N %d: rows %d..%d alone, %d threads, "
                            "differ from the product of %d rows",
                            f, how, K, N, i0, i0 + m - 1, t, big);
                    }
                    free(a);
                }
        }
    set_threads(2);
    free(A);
    free(B);
    free(C0);
    free(bias);
    free(full);
    free(part);
}

static void check_few_rows_shapes(void) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    const Dims dims[] = {/* M unused: K and N */
                         {0, 1, 1},           {0, 3, nr - 1},          {0, 17, nr + 1},
                         {0, kc - 1, 4 * nr}, {0, kc + 1, 4 * nr + 3}, {0, 2 * kc + 5, 9 * nr - 1},
                         {0, 40, 3 * nr + 7}, {0, 96, nc + 5}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) check_few_rows(dims[i]);
}

Test(k_gemm, a_few_rows_alone_get_their_bits_in_a_product_of_many) {
    check_few_rows_shapes();
    size_t saved = k_par_min;
    k_par_min = 1;
    check_few_rows_shapes();
    k_par_min = saved;
}

Test(k_gemm, a_few_rows_match_a_double_reference) {
    int mr, nr, kc, mc, nc;
    k_gemm_blocking(&mr, &nr, &kc, &mc, &nc);
    const Dims dims[] = {{1, 2 * kc + 3, 5 * nr + 3}, {2, kc + 1, 4 * nr + 1}, {3, 33, 2 * nr - 1},
                         {4, 7, 9 * nr + 5},          {1, 768, 257},           {3, 1, 1}};
    check_shapes(dims, (int)(sizeof dims / sizeof dims[0]));
}
