/* test_attention_bf16.c: attention's products under --precision bf16 (k_bf16_products): the six
 * products (q k^T, A v; backward's gy v^T, G k, G^T q, A^T gy) take bf16 operands and sum in
 * fp32 as k_attention.c's opening comment defines: per element one chain from +0 over the
 * pairs (k, k+1) in order from k = 0, each pair as vdpbf16ps takes it (the odd half first,
 * each partial sum flushed to zero when below FLT_MIN), an odd K padded with a zero half; the
 * softmax and its backward stay fp32. The fast kernel (k_attention.c) bit for bit against that
 * definition written out here element by element (y, the scores through P, and every gradient;
 * odd HS, causal blocks whose key ends are odd, grouped-query heads, key padding, dropout),
 * on every kernel family (vdpbf16ps or its emulation: the same expected values); a case whose
 * bits change when a pair's even half is taken first; the same bits at 1, 2 and 3 threads for
 * the fast and the reference kernel (k_attention_ref.c, held to the fast one within bf16
 * rounding by test_attention_ref.c). The float build (bf16 products run there only).
 * Not here: the products of the Linear layers (test_gemm_bf16.c), a bf16 step
 * (tests/nn/test_gpt_bf16.c). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "attograd.h"
#include "tensor/k_attention.h"
#include "tensor/k_lanes.h"

#ifndef AG_REAL_DOUBLE
static float bf(float x) { return k_bf16_to_float(k_bf16_round(x)); }
static float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* The definition: sum over k < K of x[k sx] y[k sy], both rounded to bf16, one chain from +0 in
 * pairs (k, k+1) from k = 0, the odd half first, each step flushed; an odd K's last pair has
 * the half x = 0 against ypad (what the other operand holds there: 0, or the next key's
 * value). even_first: the halves the other way round (a kernel that must fail). */
static float chain_order(const float *x, size_t sx, const float *y, size_t sy, int K, float ypad,
                         int even_first) {
    float s = 0;
    for (int k = 0; k < K; k += 2) {
        float xh = k + 1 < K ? bf(x[(size_t)(k + 1) * sx]) : 0;
        float yh = k + 1 < K ? bf(y[(size_t)(k + 1) * sy]) : bf(ypad);
        float xl = bf(x[(size_t)k * sx]), yl = bf(y[(size_t)k * sy]);
        if (even_first) {
            s = ftz(fmaf(xl, yl, s));
            s = ftz(fmaf(xh, yh, s));
        } else {
            s = ftz(fmaf(xh, yh, s));
            s = ftz(fmaf(xl, yl, s));
        }
    }
    return s;
}
static float chain(const float *x, size_t sx, const float *y, size_t sy, int K, float ypad) {
    return chain_order(x, sx, y, sy, K, ypad, 0);
}

static float *randn(Rng *r, size_t n) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n; i++) x[i] = (float)rng_normal(r);
    return x;
}
static float *copy(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof *y);
    cr_assert(y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static int same(float x, float y) { return memcmp(&x, &y, sizeof x) == 0; }

/* 1 + the last key of batch b that is not padding */
static int vis_of(const KAttention *a, int b) {
    int end = a->Tk;
    while (a->mask && end > 0 && a->mask[(size_t)b * a->Tk + end - 1]) end--;
    return end;
}
/* K of the products over keys for query row i (A v, G k): the keys its block of rows sees
 * (blocks of 8 rows from 0 with causal attention, else all rows), no further than vis */
static int block_end(const KAttention *a, int b, int i, int vis) {
    int last = a->causal ? (i / 8 * 8 + 7 < a->Tq ? i / 8 * 8 + 7 : a->Tq - 1) : a->Tq - 1;
    int e = key_end(a, b, last);
    return e < vis ? e : vis;
}

typedef struct Case {
    int B, NH, NKV, Tq, Tk, HS, causal, pad;
    double p;
} Case;

/* (B, NH, T, HS) heads, (B, NKV, T, HS) keys and values: the fast kernel under bf16 against
 * the definition, element by element */
static void definition_case(Case c, uint64_t seed) {
    int B = c.B, NH = c.NH, NKV = c.NKV, Tq = c.Tq, Tk = c.Tk, HS = c.HS, group = NH / NKV;
    Rng r;
    rng_seed(&r, seed);
    KAttention a;
    memset(&a, 0, sizeof a);
    a.B = B, a.NH = NH, a.NKV = NKV, a.Tq = Tq, a.Tk = Tk, a.HS = HS, a.causal = c.causal;
    a.p = c.p, a.key = rng_u64(&r);
    k_attention_strides_heads(&a);
    uint8_t *mask = calloc((size_t)B * Tk, 1);
    cr_assert(mask);
    if (c.pad) { /* batch 1: an odd visible end and holes; the last batch all padding */
        for (int j = 0; j < Tk; j++) mask[(size_t)(1 % B) * Tk + j] = j % 5 == 3 || j >= Tk - 2;
        if (B > 2)
            for (int j = 0; j < Tk; j++) mask[(size_t)(B - 1) * Tk + j] = 1;
        a.mask = mask;
    }
    size_t nq = (size_t)B * NH * Tq * HS, nk = (size_t)B * NKV * Tk * HS;
    size_t np = (size_t)B * NH * Tq * Tk;
    float *q = randn(&r, nq), *k = randn(&r, nk), *v = randn(&r, nk), *gy = randn(&r, nq);
    float *gq = randn(&r, nq), *gk = randn(&r, nk), *gv = randn(&r, nk);
    float *gq0 = copy(gq, nq), *gk0 = copy(gk, nk), *gv0 = copy(gv, nk);
    float *y = calloc(nq, sizeof *y), *P = calloc(np, sizeof *P);
    float *A = calloc(np, sizeof *A), *G = calloc(np, sizeof *G);
    cr_assert(y && P && A && G);
    k_bf16_products = 1;
    k_attention_forward(y, P, q, k, v, &a);
    k_attention_backward(gq, gk, gv, q, k, v, P, gy, &a);
    k_bf16_products = 0;
    float scale = (float)(1.0 / sqrt((double)HS)), inv_keep = (float)(1.0 / (1.0 - c.p));
    /* P: the fp32 kernel's softmax of the defined scores. With Tk <= HS the fp32 kernel's raw
     * dots of rows S_i against unit rows e_j are S_ij exactly, so its P is that softmax */
    if (Tk <= HS) {
        float *S = calloc(nq, sizeof *S), *E = calloc(nk, sizeof *E), *P0 = calloc(np, sizeof *P0);
        float *y0 = calloc(nq, sizeof *y0);
        cr_assert(S && E && P0 && y0);
        for (int b = 0; b < B; b++) {
            int vis = vis_of(&a, b);
            for (int h = 0; h < NH; h++) {
                const float *qh = q + q_at(&a, a.qs, b, h), *kh = k + k_at(&a, b, h / group);
                for (int i = 0; i < Tq; i++)
                    for (int j = 0; j < block_end(&a, b, i, vis) && j < key_end(&a, b, i); j++)
                        S[q_at(&a, a.qs, b, h) + (size_t)i * HS + j] =
                            chain(qh + (size_t)i * HS, 1, kh + (size_t)j * HS, 1, HS, 0);
            }
            for (int g = 0; g < NKV; g++)
                for (int j = 0; j < Tk; j++) E[k_at(&a, b, g) + (size_t)j * HS + j] = 1;
        }
        k_attention_forward(y0, P0, S, E, v, &a);
        for (size_t e = 0; e < np; e++)
            cr_assert(same(P[e], P0[e]), "P[%zu]: %.9g, the softmax of the defined scores %.9g", e,
                      (double)P[e], (double)P0[e]);
        free(S), free(E), free(P0), free(y0);
    }
    for (int b = 0; b < B; b++) {
        int vis = vis_of(&a, b);
        for (int h = 0; h < NH; h++) {
            int gh = h / group;
            size_t p0 = p_at(&a, b, h), qo = q_at(&a, a.qs, b, h), ko = k_at(&a, b, gh);
            float *Ah = A + p0, *Gh = G + p0;
            const float *Ph = P + p0;
            for (int i = 0; i < Tq; i++) {
                int K = block_end(&a, b, i, vis);
                for (int j = 0; j < Tk; j++) /* A = dropout(P) */
                    Ah[(size_t)i * Tk + j] =
                        keep(&a, p0 + (size_t)i * Tk + j) ? Ph[(size_t)i * Tk + j] * inv_keep : 0;
                for (int d = 0; d < HS; d++) { /* y = A v */
                    float pad = K < vis ? v[ko + (size_t)K * HS + d] : 0;
                    float s = chain(Ah + (size_t)i * Tk, 1, v + ko + d, (size_t)HS, K, pad);
                    size_t e = qo + (size_t)i * HS + d;
                    cr_assert(same(s, y[e]), "y[%d,%d,%d,%d]: %.9g, defined %.9g", b, h, i, d,
                              (double)y[e], (double)s);
                }
                float *Gi = Gh + (size_t)i * Tk;
                const float *pi = Ph + (size_t)i * Tk;
                for (int j = 0; j < K; j++) { /* gA = gy v^T, gP = gA m / (1-p) */
                    float s = chain(gy + qo + (size_t)i * HS, 1, v + ko + (size_t)j * HS, 1, HS, 0);
                    Gi[j] = keep(&a, p0 + (size_t)i * Tk + j) ? s * inv_keep : 0;
                }
                float D = k_row_dot_nz(Gi, pi, K); /* the softmax backward, fp32 */
                for (int j = 0; j < Tk; j++)
                    Gi[j] = j < K && pi[j] != 0 ? pi[j] * (Gi[j] - D) * scale : 0;
                for (int d = 0; d < HS; d++) { /* gq, G k */
                    float pad = K < vis ? k[ko + (size_t)K * HS + d] : 0;
                    float s = chain(Gi, 1, k + ko + d, (size_t)HS, K, pad);
                    size_t e = qo + (size_t)i * HS + d;
                    cr_assert(same(gq0[e] + s, gq[e]), "gq[%d,%d,%d,%d]: %.9g, defined %.9g", b, h,
                              i, d, (double)gq[e], (double)(gq0[e] + s));
                }
            }
        }
        for (int g = 0; g < NKV; g++) /* gk (G^T q) and gv (A^T gy): the heads in order */
            for (int j = 0; j < Tk; j++)
                for (int d = 0; d < HS; d++) {
                    size_t e = k_at(&a, b, g) + (size_t)j * HS + d;
                    float sk = gk0[e], sv = gv0[e];
                    for (int h = g * group; j < vis && h < (g + 1) * group; h++) {
                        size_t p0 = p_at(&a, b, h), qo = q_at(&a, a.qs, b, h);
                        sk = sk + chain(G + p0 + j, (size_t)Tk, q + qo + d, (size_t)HS, Tq, 0);
                        sv = sv + chain(A + p0 + j, (size_t)Tk, gy + qo + d, (size_t)HS, Tq, 0);
                    }
                    cr_assert(same(sk, gk[e]), "gk[%d,%d,%d,%d]: %.9g, defined %.9g", b, g, j, d,
                              (double)gk[e], (double)sk);
                    cr_assert(same(sv, gv[e]), "gv[%d,%d,%d,%d]: %.9g, defined %.9g", b, g, j, d,
                              (double)gv[e], (double)sv);
                }
    }
    free(q), free(k), free(v), free(gy), free(gq), free(gk), free(gv), free(gq0), free(gk0);
    free(gv0), free(y), free(P), free(A), free(G), free(mask);
}
#endif

Test(attention_bf16, the_fast_kernel_computes_the_definition) {
#ifdef AG_REAL_DOUBLE
    cr_skip_test("bf16 products run in the float build only (the double build refuses bf16)");
#elif defined(AG_ATTN_REF)
    cr_skip_test("make ATTN=ref: the reference kernel sums in its own order (held to the fast "
                 "kernel within bf16 rounding by test_attention_ref.c)");
#else
    const Case cases[] = {
        /* B, NH, NKV, Tq, Tk, HS, causal, pad, p */
        {1, 1, 1, 1, 1, 1, 0, 0, 0},      {2, 2, 2, 5, 5, 8, 0, 0, 0},
        {2, 3, 3, 37, 37, 20, 0, 0, 0},   {1, 2, 2, 7, 19, 16, 0, 0, 0},
        {2, 2, 2, 64, 64, 64, 0, 0, 0},   {1, 1, 1, 70, 70, 33, 0, 0, 0},
        {2, 2, 1, 29, 29, 33, 0, 0, 0},   {3, 4, 2, 21, 24, 33, 0, 1, 0.2},
        {3, 4, 2, 45, 45, 24, 0, 1, 0.2}, {2, 2, 2, 13, 13, 5, 0, 1, 0},
        {1, 2, 2, 11, 11, 13, 0, 0, 0.5},
    };
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++)
        for (int causal = 0; causal < 2; causal++) {
            Case c = cases[s];
            c.causal = causal;
            definition_case(c, 100 + 10 * s + (uint64_t)causal);
        }
#endif
}

/* Four keys of equal score (k = 0: P = 1/4 exactly) and one query row: y_d sums 1/4 v_jd over
 * the pairs (0, 1), (2, 3); with v = 4, 0, 6 2^-24, 4 2^-24 the products are 1, 0, 1.5 2^-24,
 * 2^-24, and the second pair gives 1 + 2^-23 when its odd half comes first, 1 + 2^-22 when
 * the even half does. Likewise gv with one key (P = 1) sums gy over the query rows. */
Test(attention_bf16, the_odd_half_of_a_pair_comes_first) {
#ifdef AG_REAL_DOUBLE
    cr_skip_test("bf16 products run in the float build only (the double build refuses bf16)");
#elif defined(AG_ATTN_REF)
    cr_skip_test("make ATTN=ref: the reference kernel sums in its own order");
#else
    const float col[4] = {4, 0, 6 * 0x1p-24f, 4 * 0x1p-24f},
                quarter[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    cr_assert(
        !same(chain_order(quarter, 1, col, 1, 4, 0, 0), chain_order(quarter, 1, col, 1, 4, 0, 1)),
        "the case does not tell the orders apart");
    KAttention a;
    memset(&a, 0, sizeof a);
    a.B = 1, a.NH = 1, a.NKV = 1, a.Tq = 1, a.Tk = 4, a.HS = 2;
    k_attention_strides_heads(&a);
    float q[2] = {1, -1}, k[8] = {0}, v[8], y[2], P[4];
    for (int j = 0; j < 4; j++) v[2 * j] = v[2 * j + 1] = col[j];
    k_bf16_products = 1;
    k_attention_forward(y, P, q, k, v, &a);
    k_bf16_products = 0;
    cr_assert(P[0] == 0.25f && P[3] == 0.25f);
    cr_assert(same(y[0], 1 + 0x1p-23f), "y %.9g: not the odd half first", (double)y[0]);
    cr_assert(same(y[0], chain(quarter, 1, col, 1, 4, 0)));
    /* gv = A^T gy over 4 query rows, one key */
    a.Tq = 4, a.Tk = 1;
    k_attention_strides_heads(&a);
    float q4[8] = {0}, k1[2] = {0}, v1[2] = {1, 1}, y4[8], P4[4], gy4[8], gq4[8] = {0};
    float gk1[2] = {0}, gv1[2] = {0};
    for (int i = 0; i < 4; i++) gy4[2 * i] = gy4[2 * i + 1] = col[i] / 4;
    k_bf16_products = 1;
    k_attention_forward(y4, P4, q4, k1, v1, &a);
    k_attention_backward(gq4, gk1, gv1, q4, k1, v1, P4, gy4, &a);
    k_bf16_products = 0;
    cr_assert(P4[0] == 1 && P4[3] == 1);
    cr_assert(same(gv1[0], 1 + 0x1p-23f), "gv %.9g: not the odd half first", (double)gv1[0]);
#endif
}

#if !defined(AG_REAL_DOUBLE) && defined(_OPENMP)
/* y, P, gq, gk, gv of one bf16 forward and backward (fast or reference kernel) at n threads,
 * in one array */
static float *bf16_run(const KAttention *a, const float *q, const float *k, const float *v,
                       const float *gy, size_t nq, size_t nk, size_t np, int n, int ref) {
    float *out = calloc(2 * nq + 2 * nk + np, sizeof *out);
    cr_assert(out);
    float *y = out, *gq = y + nq, *gk = gq + nq, *gv = gk + nk, *P = gv + nk;
    omp_set_num_threads(n);
    k_bf16_products = 1;
    if (ref) {
        k_attention_forward_ref(y, P, q, k, v, a);
        k_attention_backward_ref(gq, gk, gv, q, k, v, P, gy, a);
    } else {
        k_attention_forward(y, P, q, k, v, a);
        k_attention_backward(gq, gk, gv, q, k, v, P, gy, a);
    }
    k_bf16_products = 0;
    return out;
}
#endif

Test(attention_bf16, same_bits_for_one_two_and_three_threads) {
#ifdef AG_REAL_DOUBLE
    cr_skip_test("bf16 products run in the float build only (the double build refuses bf16)");
#elif !defined(_OPENMP)
    cr_skip_test("built without OpenMP: one thread only");
#else
    /* grouped-query heads, causal, key padding (the last batch element all padding), dropout */
    int B = 3, NH = 4, NKV = 2, T = 45, HS = 24;
    Rng r;
    rng_seed(&r, 351);
    KAttention a;
    memset(&a, 0, sizeof a);
    a.B = B, a.NH = NH, a.NKV = NKV, a.Tq = T, a.Tk = T, a.HS = HS, a.causal = 1, a.p = 0.2;
    a.key = rng_u64(&r);
    k_attention_strides_heads(&a);
    uint8_t *mask = calloc((size_t)B * T, 1);
    cr_assert(mask);
    for (int j = 0; j < T; j++) mask[T + j] = j % 5 == 3, mask[2 * T + j] = 1;
    a.mask = mask;
    size_t nq = (size_t)B * NH * T * HS, nk = (size_t)B * NKV * T * HS, np = (size_t)B * NH * T * T;
    float *q = randn(&r, nq), *k = randn(&r, nk), *v = randn(&r, nk), *gy = randn(&r, nq);
    size_t n = 2 * nq + 2 * nk + np, saved = k_par_min;
    k_par_min = 1;
    for (int ref = 0; ref < 2; ref++) {
        float *one = bf16_run(&a, q, k, v, gy, nq, nk, np, 1, ref);
        for (int t = 2; t <= 3; t++) {
            float *more = bf16_run(&a, q, k, v, gy, nq, nk, np, t, ref);
            cr_assert(memcmp(one, more, n * sizeof *one) == 0,
                      "%s kernel: %d threads differ from 1", ref ? "reference" : "fast", t);
            free(more);
        }
        free(one);
    }
    k_par_min = saved;
    omp_set_num_threads(1);
    free(q), free(k), free(v), free(gy), free(mask);
#endif
}
