/* test_attention_bf16.c: attention's products under --precision bf16 (k_bf16_products): every
 * operand of the six products (q k^T, A v; backward's gy v^T, G k, G^T q, A^T gy) rounded to
 * bf16, the sums and the softmax in fp32. The fast kernel (k_attention.c) bit for bit against
 * that arithmetic written out here: P is the fp32 kernel's P of the rounded q and k (the scores
 * are then the same sums), y and the gradients scalar sums of exact products in the order the
 * kernel defines (each from 0 over k in order, then added to the gradient; the softmax
 * backward's row sum by k_lanes.h's k_row_dot_nz); the reference kernel (k_attention_ref.c)
 * within bf16 rounding of the fast one on every layout, mask and dropout; both give the same
 * bits at 1, 2 and 3 threads. The float build (bf16 products run there only).
 * Not here: the products of the Linear layers (test_gemm_bf16.c), a bf16 step
 * (tests/nn/test_gpt_bf16.c). */
#include <criterion/criterion.h>
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
static float *rounded(const float *x, size_t n) {
    float *y = copy(x, n);
    for (size_t i = 0; i < n; i++) y[i] = bf(y[i]);
    return y;
}

/* (B, NH, T, HS) heads, NKV = NH, no padding nor dropout: the definition above, element by
 * element, against the fast kernel under bf16 */
static void definition_case(int B, int NH, int Tq, int Tk, int HS, int causal, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    KAttention a;
    memset(&a, 0, sizeof a);
    a.B = B, a.NH = NH, a.NKV = NH, a.Tq = Tq, a.Tk = Tk, a.HS = HS, a.causal = causal;
    k_attention_strides_heads(&a);
    size_t nq = (size_t)B * NH * Tq * HS, nk = (size_t)B * NH * Tk * HS;
    size_t np = (size_t)B * NH * Tq * Tk;
    float *q = randn(&r, nq), *k = randn(&r, nk), *v = randn(&r, nk), *gy = randn(&r, nq);
    float *gq = randn(&r, nq), *gk = randn(&r, nk), *gv = randn(&r, nk);
    float *gq0 = copy(gq, nq), *gk0 = copy(gk, nk), *gv0 = copy(gv, nk);
    float *y = calloc(nq, sizeof *y), *P = calloc(np, sizeof *P), *P0 = calloc(np, sizeof *P0);
    float *y0 = calloc(nq, sizeof *y0), *G = calloc((size_t)Tq * Tk, sizeof *G);
    cr_assert(y && P && P0 && y0 && G);
    k_bf16_products = 1;
    k_attention_forward(y, P, q, k, v, &a);
    k_attention_backward(gq, gk, gv, q, k, v, P, gy, &a);
    k_bf16_products = 0;
    float *qr = rounded(q, nq), *kr = rounded(k, nk);
    k_attention_forward(y0, P0, qr, kr, v, &a); /* the fp32 kernel: P of the rounded q, k */
    cr_assert(memcmp(P, P0, np * sizeof *P) == 0, "P: not the fp32 softmax of bf16 scores");
    float scale = (float)(1.0 / sqrt((double)HS));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t o = ((size_t)b * NH + h), qo = o * Tq * HS, ko = o * Tk * HS;
            const float *Ph = P + o * Tq * Tk;
            for (int i = 0; i < Tq; i++) {
                for (int d = 0; d < HS; d++) { /* y = bf(P) bf(v) */
                    float s = 0;
                    for (int j = 0; j < Tk; j++)
                        s += bf(Ph[(size_t)i * Tk + j]) * bf(v[ko + (size_t)j * HS + d]);
                    cr_assert(s == y[qo + (size_t)i * HS + d] ||
                                  (s == 0 && y[qo + (size_t)i * HS + d] == 0),
                              "y[%d,%d,%d,%d]: %.9g, defined %.9g", b, h, i, d,
                              (double)y[qo + (size_t)i * HS + d], (double)s);
                }
                float *Gi = G + (size_t)i * Tk;
                const float *pi = Ph + (size_t)i * Tk;
                for (int j = 0; j < Tk; j++) { /* gA = bf(gy) bf(v)^T */
                    float s = 0;
                    for (int d = 0; d < HS; d++)
                        s += bf(gy[qo + (size_t)i * HS + d]) * bf(v[ko + (size_t)j * HS + d]);
                    Gi[j] = s;
                }
                float D = k_row_dot_nz(Gi, pi, Tk);
                for (int j = 0; j < Tk; j++)
                    Gi[j] = pi[j] != 0 ? bf(pi[j] * (Gi[j] - D) * scale) : 0;
            }
            for (int i = 0; i < Tq; i++)
                for (int d = 0; d < HS; d++) { /* gq += bf(G) bf(k) */
                    float s = 0;
                    for (int j = 0; j < Tk; j++)
                        s += G[(size_t)i * Tk + j] * bf(k[ko + (size_t)j * HS + d]);
                    size_t e = qo + (size_t)i * HS + d;
                    cr_assert(gq0[e] + s == gq[e], "gq[%d,%d,%d,%d]: %.9g, defined %.9g", b, h, i,
                              d, (double)gq[e], (double)(gq0[e] + s));
                }
            for (int j = 0; j < Tk; j++)
                for (int d = 0; d < HS; d++) { /* gk += bf(G)^T bf(q), gv += bf(P)^T bf(gy) */
                    float s = 0, t = 0;
                    for (int i = 0; i < Tq; i++) {
                        s += G[(size_t)i * Tk + j] * bf(q[qo + (size_t)i * HS + d]);
                        t += bf(Ph[(size_t)i * Tk + j]) * bf(gy[qo + (size_t)i * HS + d]);
                    }
                    size_t e = ko + (size_t)j * HS + d;
                    cr_assert(gk0[e] + s == gk[e], "gk[%d,%d,%d,%d]: %.9g, defined %.9g", b, h, j,
                              d, (double)gk[e], (double)(gk0[e] + s));
                    cr_assert(gv0[e] + t == gv[e], "gv[%d,%d,%d,%d]: %.9g, defined %.9g", b, h, j,
                              d, (double)gv[e], (double)(gv0[e] + t));
                }
        }
    free(q), free(k), free(v), free(gy), free(gq), free(gk), free(gv), free(gq0), free(gk0);
    free(gv0), free(y), free(P), free(P0), free(y0), free(G), free(qr), free(kr);
}
#endif

Test(attention_bf16, the_fast_kernel_computes_the_definition) {
#ifdef AG_REAL_DOUBLE
    cr_skip_test("bf16 products run in the float build only (the double build refuses bf16)");
#elif defined(AG_ATTN_REF)
    cr_skip_test("make ATTN=ref: the reference kernel sums in its own order (held to the fast "
                 "kernel within bf16 rounding by test_attention_ref.c)");
#else
    const int shapes[][5] = {/* B, NH, Tq, Tk, HS */
                             {1, 1, 1, 1, 1},   {2, 2, 5, 5, 8},    {2, 3, 37, 37, 20},
                             {1, 2, 7, 19, 16}, {2, 2, 64, 64, 64}, {1, 1, 70, 70, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int causal = 0; causal < 2; causal++) {
            const int *x = shapes[s];
            definition_case(x[0], x[1], x[2], x[3], x[4], causal, 100 + 10 * s + causal);
        }
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
