/* k_attention_ref.c: attention as its definition, in plain loops over batch b, head h, query
 * row i and key j (the style of llm.c's attention_forward/backward), forward next to backward.
 * It defines what the fast kernel (k_attention.c: register tiles, scratch layouts, SIMD) must
 * compute: the tests compare the two on every layout, mask and dropout, and `make ATTN=ref`
 * builds the library with this one under every attention op (the whole suite passes with it).
 * The layouts (full batch or packed rows, heads side by side or not) are read through
 * k_attention.h, as the fast kernel reads them. Forward runs (b, h) pairs in parallel, backward
 * (b, key/value head) pairs: one thread writes a query row's and a key/value head's gradients,
 * in a fixed order, so any thread count gives the same bits. Under --precision bf16 every
 * product's operands are rounded to bf16 (op below), its sums and the softmax stay fp32; the
 * backward (a course exercise) reads as the plain formula: its products are rowdot and rowaxpy
 * below, which do the rounding. Its sums keep their k order (and a gradient takes its terms
 * one at a time), not the fast kernel's pairs with flushed partial sums (k_attention.c's
 * opening comment): the two agree within bf16 rounding, not bit for bit.
 * Not here: shape checks (../autograd/ops_attention.c), the fast kernel. Read the softmax pair
 * in k_softmax.c first: the backward below is its formula, with scores q k^T / sqrt(HS).
 * Read next: k_attention.c. */
#include <math.h>

#include "k_attention.h"

/* an operand of a product: as it is, or under --precision bf16 (kernels.h's k_bf16_products)
 * rounded to bf16; the product of two is exact in fp32, so the sums below are then the fp32
 * sums of exact products, in the same order */
static inline Real op(Real x) {
    return k_bf16_products ? (Real)k_bf16_to_float(k_bf16_round((float)x)) : x;
}

/* x . y over n values, summed from 0 in order (the operands rounded by op) */
static inline Real rowdot(const Real *x, const Real *y, int n) {
    Real s = 0;
    for (int d = 0; d < n; d++) s += op(x[d]) * op(y[d]);
    return s;
}
/* y += s x over n values (the operands rounded by op) */
static inline void rowaxpy(Real *y, Real s, const Real *x, int n) {
    Real r = op(s);
    for (int d = 0; d < n; d++) y[d] += r * op(x[d]);
}

/* key j is visible from query row i of batch b: allowed by the causal rule, not padding */
static int visible(const KAttention *a, int b, int i, int j) {
    const uint8_t *pad = pad_of(a, b);
    return j < key_end(a, b, i) && !(pad && pad[j]);
}

/* forward, for each (b, h, i): s_j = q_i . k_j / sqrt(HS) + M_ij (the additive mask, 0 without
 * one) over the visible keys j; P_ij = exp(s_j - max s) / sum (0 for the others and where
 * M_ij = -inf, a whole row of 0 when no key is left, of NaN when a score is NaN); A_ij = P_ij m_ij / (1 - p),
 * m_ij = keep(e) (dropout); y_i = sum_j A_ij v_j. */
void k_attention_forward_ref(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                             const KAttention *a) {
    int HS = a->HS, group = a->NH / a->NKV;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->NH; h++) {
            int nq = n_q(a, b), nk = n_k(a, b);
            const Real *kh = k + k_at(a, b, h / group), *vh = v + k_at(a, b, h / group);
            const int *kp = kpos_of(a, b);
            for (int i = 0; i < nq; i++) {
                const Real *qi = q + q_at(a, a->qs, b, h) + (size_t)i * a->qs[2];
                const Real *Mi = bias_row(a, b, h, i);
                Real *yi = y + q_at(a, a->ys, b, h) + (size_t)i * a->ys[2];
                size_t e0 = p_at(a, b, h) + (size_t)i * nk; /* P's row i */
                Real *pi = P + e0, max = -INFINITY, sum = 0;
                for (int j = 0; j < nk; j++) { /* the scores (-inf where not visible), max */
                    pi[j] = 0;
                    if (!visible(a, b, i, j)) {
                        pi[j] = -INFINITY;
                        continue;
                    }
                    for (int d = 0; d < HS; d++)
                        pi[j] += op(qi[d]) * op(kh[(size_t)j * a->ks[2] + d]);
                    pi[j] *= scale;
                    if (Mi) pi[j] += Mi[kp ? kp[j] : j];
                    if (pi[j] > max) max = pi[j];
                }
                for (int j = 0; j < nk; j++) { /* exp, and the sum (NaN if a score is) */
                    int none = max == -INFINITY && pi[j] == pi[j]; /* no visible key */
                    pi[j] = none ? 0 : (Real)exp((double)(pi[j] - max));
                    sum += pi[j];
                }
                for (int j = 0; j < nk; j++) pi[j] = sum != 0 ? pi[j] / sum : 0;
                for (int d = 0; d < HS; d++) { /* y_i = dropout(P_i) v */
                    Real acc = 0;
                    for (int j = 0; j < nk; j++)
                        if (pi[j] != 0 && keep(a, e0 + (size_t)j))
                            acc += op(pi[j] * inv_keep) * op(vh[(size_t)j * a->ks[2] + d]);
                    yi[d] = acc;
                }
            }
        }
}

/* backward of the forward above, from the saved P, for each (b, h, i):
 *   gA_ij = gy_i . v_j;   gP_ij = gA_ij m_ij / (1 - p)          (dropout's mask again)
 *   gv_j += A_ij gy_i                                           (y = A v)
 *   gs_ij = P_ij (gP_ij - sum_l P_il gP_il)                     (softmax, from its output)
 *   gq_i += sum_j gs_ij k_j / sqrt(HS);  gk_j += gs_ij q_i / sqrt(HS)   (s = q k^T / sqrt(HS))
 * Keys that are not visible have P = 0: nothing flows through them. The additive mask M is a
 * constant: s's gradient is q's and k's alone. Gradients accumulate (+=);
 * any of gq, gk, gv may be NULL. */
void k_attention_backward_ref(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                              const Real *v, const Real *P, const Real *gy, const KAttention *a) {
    /* EXERCISE(attention): the backward of k_attention_forward_ref above, from the saved P.
     *   for each batch b, query head h (reading key/value head h / (NH / NKV)), query row i
     *   of n_q(a, b) and key j of n_k(a, b), with d over HS: q's row i starts at
     *   q_at(a, a->qs, b, h) + i * a->qs[2], gy's at q_at(a, a->ys, b, h) + i * a->ys[2], k's
     *   and v's row j at k_at(a, b, g) + j * a->ks[2]; P's row i at p_at(a, b, h) + i * nk
     *   P_ij: the softmax weights (0 where masked); keep(a, e) with e = P's flat index: whether
     *   dropout kept P_ij, then scaled by 1 / (1 - a->p)
     *   gq, gk, gv: shaped as q, k, v; accumulate (+=); any of them may be NULL
     * A key/value head read by several query heads (grouped-query) sums their gradients.
     * rowdot(x, y, n) and rowaxpy(y, s, x, n) above: a row's dot product, y += s x.
     * Derived in docs/backprop.md, section 8 "Scaled dot-product attention".
     * STUB: (void)gq; (void)gk; (void)gv; (void)q; (void)k; (void)v; (void)P; (void)gy;
     * STUB: (void)a; */
    int HS = a->HS, group = a->NH / a->NKV;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < a->B; b++)
        for (int g = 0; g < a->NKV; g++) /* every head h that reads key/value head g */
            for (int h = g * group; h < (g + 1) * group; h++) {
                int nq = n_q(a, b), nk = n_k(a, b);
                size_t kv = k_at(a, b, g), lk = a->ks[2];
                for (int i = 0; i < nq; i++) {
                    size_t e0 = p_at(a, b, h) + (size_t)i * nk, qi = q_at(a, a->qs, b, h);
                    const Real *pi = P + e0;
                    const Real *gyi = gy + q_at(a, a->ys, b, h) + (size_t)i * a->ys[2];
                    qi += (size_t)i * a->qs[2];
                    Real dot = 0; /* sum_l P_il gP_il */
                    for (int j = 0; j < nk; j++) {
                        if (pi[j] == 0 || !keep(a, e0 + (size_t)j)) continue;
                        Real gA = rowdot(gyi, v + kv + (size_t)j * lk, HS);
                        dot += pi[j] * gA * inv_keep;
                        if (gv) /* gv_j += A_ij gy_i */
                            rowaxpy(gv + kv + (size_t)j * lk, pi[j] * inv_keep, gyi, HS);
                    }
                    for (int j = 0; j < nk; j++) {
                        if (pi[j] == 0) continue;
                        Real gP = 0;
                        if (keep(a, e0 + (size_t)j))
                            gP = rowdot(gyi, v + kv + (size_t)j * lk, HS) * inv_keep;
                        Real gs = pi[j] * (gP - dot) * scale;
                        if (gq) rowaxpy(gq + qi, gs, k + kv + (size_t)j * lk, HS);
                        if (gk) rowaxpy(gk + kv + (size_t)j * lk, gs, q + qi, HS);
                    }
                }
            }
    /* END EXERCISE */
}
