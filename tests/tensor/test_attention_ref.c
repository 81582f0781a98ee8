/* test_attention_ref.c: the fast attention kernel (k_attention.c) against its definition, the
 * reference kernel (k_attention_ref.c), on every layout a KAttention describes: (B, heads, T,
 * HS) tensors, heads side by side in (B, T, width) projections, packed rows; with causal and
 * key-padding masks (fully masked rows and batches included), additive masks ((Tq, Tk) for all,
 * or per batch and head, -inf included), Tq != Tk, grouped-query and
 * multi-query heads, dropout. y, P and the three gradients (accumulated into random values)
 * must agree to rounding: 1e-12 in the double build, 2e-5 in float; under bf16 products (the
 * float build) within bf16 rounding.
 * Under `make ATTN=ref` both calls run the reference, and the test compares it with itself.
 * Not here: the op's shape checks and gradient checks (tests/autograd/test_attention.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "tensor/kernels.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 2e-5
#endif

typedef struct {
    int B, NH, NKV, Tq, Tk, HS, causal, padding, layout; /* layout 0 heads, 1 columns, 2 packed */
    double p;
    int bias; /* an additive mask: 0 none, 1 (Tq, Tk) for all, 2 (B, NH, Tq, Tk) */
} Case;

static Real *randn(Rng *r, size_t n) {
    Real *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (Real)rng_normal(r);
    return x;
}

static Real *copy(const Real *x, size_t n) {
    Real *y = malloc((n ? n : 1) * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* max |x - y| / (1 + max |y|) */
static double diff(const Real *x, const Real *y, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)x[i] - (double)y[i]));
        m = fmax(m, fabs((double)y[i]));
    }
    return d / (1 + m);
}

static void run_case(const Case *c, uint64_t seed, double tol) {
    Rng r;
    rng_seed(&r, seed);
    KAttention a;
    memset(&a, 0, sizeof a);
    a.B = c->B, a.NH = c->NH, a.NKV = c->NKV, a.Tq = c->Tq, a.Tk = c->Tk, a.HS = c->HS;
    a.causal = c->causal, a.p = c->p, a.key = rng_u64(&r);
    size_t nq = (size_t)c->B * c->NH * c->Tq * c->HS, nk = (size_t)c->B * c->NKV * c->Tk * c->HS;
    uint8_t *mask = NULL;
    int *qoff = NULL, *qpos = NULL, *koff = NULL, *kpos = NULL, *poff = NULL;
    if (c->padding) { /* batch 0 keeps every key, the last (of two or more) pads all of them: fully masked */
        mask = calloc((size_t)c->B * c->Tk, 1);
        for (int b = 1; b < c->B; b++)
            for (int j = 0; j < c->Tk; j++)
                mask[(size_t)b * c->Tk + j] = b == c->B - 1 ? 1 : rng_uniform(&r) < 0.3;
        a.mask = mask;
    }
    size_t np = (size_t)c->B * c->NH * c->Tq * c->Tk;
    Real *bias = NULL; /* values in [-2, 2), -inf at about one in five; (B, NH) case: the first
                        * query row of batch 0, head 0 wholly blocked */
    if (c->bias) {
        size_t nb = c->bias == 1 ? (size_t)c->Tq * c->Tk : np;
        bias = malloc(nb * sizeof *bias);
        for (size_t e = 0; e < nb; e++)
            bias[e] = rng_uniform(&r) < 0.2 || (c->bias == 2 && e < (size_t)c->Tk)
                          ? -(Real)INFINITY
                          : (Real)(4 * rng_uniform(&r) - 2);
        a.bias = bias;
        if (c->bias == 2) a.bs[1] = (size_t)c->Tq * c->Tk, a.bs[0] = c->NH * a.bs[1];
    }
    if (c->layout == 0) {
        k_attention_strides_heads(&a);
    } else if (c->layout == 1) { /* q, y (B, Tq, NH*HS); k, v (B, Tk, NKV*HS) */
        size_t Cq = (size_t)c->NH * c->HS, Ck = (size_t)c->NKV * c->HS;
        a.qs[0] = a.ys[0] = (size_t)c->Tq * Cq, a.qs[1] = a.ys[1] = c->HS, a.qs[2] = a.ys[2] = Cq;
        a.ks[0] = (size_t)c->Tk * Ck, a.ks[1] = c->HS, a.ks[2] = Ck;
    } else { /* packed: every other query row, the key rows that are not padding */
        cr_assert(c->Tq == c->Tk);
        qoff = calloc((size_t)c->B + 1, sizeof *qoff),
        koff = calloc((size_t)c->B + 1, sizeof *koff);
        poff = calloc((size_t)c->B + 1, sizeof *poff);
        qpos = calloc((size_t)c->B * c->Tq, sizeof *qpos);
        kpos = calloc((size_t)c->B * c->Tk, sizeof *kpos);
        uint8_t *packed_mask = mask ? calloc((size_t)c->B * c->Tk, 1) : NULL;
        for (int b = 0; b < c->B; b++) {
            qoff[b + 1] = qoff[b], koff[b + 1] = koff[b];
            for (int t = 0; t < c->Tq; t++)
                if (t % 2 == b % 2) qpos[qoff[b + 1]++] = t;
            for (int t = 0; t < c->Tk; t++)
                if (!mask || !mask[(size_t)b * c->Tk + t] || t == 0) {
                    if (packed_mask) packed_mask[koff[b + 1]] = mask[(size_t)b * c->Tk + t];
                    kpos[koff[b + 1]++] = t;
                }
            poff[b + 1] = poff[b] + (qoff[b + 1] - qoff[b]) * (koff[b + 1] - koff[b]);
        }
        size_t Cq = (size_t)c->NH * c->HS, Ck = (size_t)c->NKV * c->HS;
        a.qs[1] = a.ys[1] = c->HS, a.qs[2] = a.ys[2] = Cq, a.ks[1] = c->HS, a.ks[2] = Ck;
        a.qoff = qoff, a.qpos = qpos, a.koff = koff, a.kpos = kpos, a.poff = poff;
        free(mask);
        mask = packed_mask;
        a.mask = mask;
        nq = (size_t)qoff[c->B] * Cq, nk = (size_t)koff[c->B] * Ck;
        np = (size_t)c->NH * poff[c->B];
    }
    Real *q = randn(&r, nq), *k = randn(&r, nk), *v = randn(&r, nk), *gy = randn(&r, nq);
    Real *gq = randn(&r, nq), *gk = randn(&r, nk), *gv = randn(&r, nk);
    Real *gq2 = copy(gq, nq), *gk2 = copy(gk, nk), *gv2 = copy(gv, nk);
    Real *y = calloc(nq + 1, sizeof *y), *y2 = calloc(nq + 1, sizeof *y2);
    Real *P = calloc(np + 1, sizeof *P), *P2 = calloc(np + 1, sizeof *P2);
    k_attention_forward(y, P, q, k, v, &a);
    k_attention_forward_ref(y2, P2, q, k, v, &a);
    k_attention_backward(gq, gk, gv, q, k, v, P, gy, &a);
    k_attention_backward_ref(gq2, gk2, gv2, q, k, v, P2, gy, &a);
    const char *names[] = {"y", "P", "gq", "gk", "gv"};
    const Real *fast[] = {y, P, gq, gk, gv}, *ref[] = {y2, P2, gq2, gk2, gv2};
    size_t n[] = {nq, np, nq, nk, nk};
    for (int t = 0; t < 5; t++) {
        double d = diff(fast[t], ref[t], n[t]);
        cr_assert(d <= tol,
                  "%s differs by %.3g: B %d NH %d NKV %d Tq %d Tk %d HS %d causal %d padding %d "
                  "layout %d p %g bias %d",
                  names[t], d, c->B, c->NH, c->NKV, c->Tq, c->Tk, c->HS, c->causal, c->padding,
                  c->layout, c->p, c->bias);
    }
    /* rows of P sum to 1, or to 0 when no key is left: all padding (the last batch), none
     * allowed yet by the causal rule, all blocked by the additive mask, or a mix of these */
    if (c->layout == 0 && c->p == 0)
        for (size_t row = 0; row < np / c->Tk; row++) {
            int b = (int)(row / ((size_t)c->NH * c->Tq)), i = (int)(row % c->Tq), any = 0;
            size_t at_bias = c->bias == 1 ? (size_t)i * c->Tk : row * c->Tk;
            double s = 0;
            for (int j = 0; j < c->Tk; j++) {
                s += (double)P2[row * c->Tk + j];
                any |= !(c->causal && j > i + c->Tk - c->Tq) && !(mask && mask[b * c->Tk + j]) &&
                       !(bias && bias[at_bias + j] == -(Real)INFINITY);
            }
            cr_assert(any ? fabs(s - 1) < 1e-5 : s == 0, "row %zu sums to %g (a key left: %d)", row,
                      s, any);
        }
    free(q), free(k), free(v), free(gy), free(gq), free(gk), free(gv), free(gq2), free(gk2);
    free(gv2), free(y), free(y2), free(P), free(P2), free(mask), free(bias);
    free(qoff), free(qpos), free(koff), free(kpos), free(poff);
}

/* every case: shapes, layouts, masks, dropout and additive masks; their count */
static int every_case(double tol) {
    const int shapes[][6] = {
        /* B, NH, NKV, Tq, Tk, HS */
        {1, 1, 1, 1, 1, 1},   {2, 4, 4, 5, 5, 8},    {3, 4, 2, 17, 17, 16}, {2, 4, 1, 33, 33, 12},
        {2, 2, 2, 7, 19, 16}, {3, 6, 3, 40, 40, 32}, {2, 2, 1, 70, 70, 64},
    };
    int n_cases = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int layout = 0; layout < 3; layout++)
            for (int causal = 0; causal < 2; causal++)
                for (int padding = 0; padding < 2; padding++)
                    for (int drop = 0; drop < 2; drop++)
                        for (int bias = 0; bias < 3; bias++) {
                            const int *x = shapes[s];
                            if (layout == 2 && x[3] != x[4]) continue;
                            Case c = {x[0],   x[1],    x[2],   x[3],           x[4], x[5],
                                      causal, padding, layout, drop ? 0.3 : 0, bias};
                            run_case(&c,
                                     10000 * s + 1000 * layout + 100 * causal + 20 * padding +
                                         10 * drop + bias,
                                     tol);
                            n_cases++;
                        }
    return n_cases;
}

Test(attention_ref, the_fast_kernel_computes_the_reference_on_every_layout) {
    cr_assert(every_case(TOL) > 300);
}

/* Under --precision bf16 both kernels round the products' operands and sum in fp32, in their
 * own orders (the fast kernel in pairs, its partial sums flushed below FLT_MIN: k_attention.c;
 * the reference in k order, each term of a gradient added to it as the course's exercise
 * writes it); where their fp32 P or score gradients differ in the last bit, a rounding to bf16
 * can differ by one bf16 unit (2^-8 of that term): agreement within 2^-10 of the largest value
 * (the cases differ by up to about 2^-11), not to fp32 rounding. (The fast kernel's bits are
 * held to their definition in test_attention_bf16.c.) */
Test(attention_ref, the_fast_kernel_computes_the_reference_in_bf16) {
#ifdef AG_REAL_DOUBLE
    cr_skip_test("bf16 products run in the float build only (the double build refuses bf16)");
#else
    k_bf16_products = 1;
    int n = every_case(0x1p-10);
    k_bf16_products = 0;
    cr_assert(n > 300);
#endif
}
