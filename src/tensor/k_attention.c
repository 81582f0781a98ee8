/* k_attention.c: fused scaled dot-product attention (scores, mask, softmax, dropout, times v)
 * and the per-head gate. One query row of one head is the unit of work: the forward and the
 * q-gradient share rows among threads; the k- and v-gradients, where many query rows (and, with
 * grouped-query attention, several query heads) add into one key row, run in a second loop over
 * key rows that sums its terms in a fixed order, so no two threads write one element.
 * Not here: shape checks (../autograd/ops_attention.c). Read the softmax pair in k_softmax.c
 * first: the backward below is its formula with the scores being q k^T / sqrt(HS). */
#include <math.h>

#include "kernels.h"
#include "rng.h"

/* Element e of P survives dropout when its hashed uniform in [0,1) is >= p: a pure function of
 * (key, e), the rule of k_dropout_forward in k_elementwise.c, so backward can recompute it. */
static int keep(const KAttention *a, size_t e) {
    return a->p == 0 || (double)(rng_hash(a->key, e) >> 11) * 0x1.0p-53 >= a->p;
}

/* Keys j < end are allowed by the causal rule j <= i + Tk - Tq (aligned at the end). */
static int key_end(const KAttention *a, int i) {
    if (!a->causal) return a->Tk;
    int end = i + a->Tk - a->Tq + 1;
    return end < 0 ? 0 : end;
}

static int visible(const uint8_t *pad, int end, int j) { return j < end && !(pad && pad[j]); }

static Real dot(const Real *x, const Real *y, int n) {
    Real s = 0;
    for (int d = 0; d < n; d++) s += x[d] * y[d];
    return s;
}

/* Query row i of head h of batch b: its probabilities P[row, :] and its output y[row, :]. */
static void forward_row(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                        const KAttention *a, int b, int h, int i) {
    int Tk = a->Tk, HS = a->HS;
    size_t row = ((size_t)b * a->NH + h) * a->Tq + i;
    size_t kv0 = ((size_t)b * a->NKV + h / (a->NH / a->NKV)) * Tk; /* key row 0 of the head */
    const Real *qi = q + row * HS;
    const uint8_t *pad = a->mask ? a->mask + (size_t)b * Tk : NULL;
    int end = key_end(a, i);
    Real *pi = P + row * Tk, *yi = y + row * HS;
    Real scale = (Real)(1.0 / sqrt((double)HS)), m = 0;
    int any = 0;
    /* scores of the visible keys and their max; masked keys never enter the softmax */
    for (int j = 0; j < Tk; j++) {
        pi[j] = 0;
        if (!visible(pad, end, j)) continue;
        pi[j] = dot(qi, k + (kv0 + j) * HS, HS) * scale;
        if (!any || pi[j] > m) m = pi[j];
        any = 1;
    }
    for (int d = 0; d < HS; d++) yi[d] = 0;
    if (!any) return; /* every key masked: probabilities 0 and output 0, not 0/0 */
    Real s = 0;
    for (int j = 0; j < Tk; j++) {
        if (!visible(pad, end, j)) continue;
        pi[j] = exp(pi[j] - m);
        s += pi[j];
    }
    Real inv = 1 / s, inv_keep = (Real)(1.0 / (1.0 - a->p));
    for (int j = 0; j < Tk; j++) pi[j] *= inv;
    /* y_i = sum_j dropout(P_ij) v_j, keys in order */
    for (int j = 0; j < Tk; j++) {
        if (!visible(pad, end, j) || !keep(a, row * Tk + j)) continue;
        Real w = a->p == 0 ? pi[j] : pi[j] * inv_keep;
        const Real *vj = v + (kv0 + j) * HS;
        for (int d = 0; d < HS; d++) yi[d] += w * vj[d];
    }
}

void k_attention_forward(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a) {
    int B = a->B, NH = a->NH, Tq = a->Tq;
    size_t work = (size_t)B * NH * Tq * a->Tk * a->HS;
#pragma omp parallel for collapse(3) schedule(static) if (work >= K_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Tq; i++) forward_row(y, P, q, k, v, a, b, h, i);
}

/* forward: s_ij = q_i.k_j / sqrt(HS), P = softmax over visible j, A = dropout(P), y = A v.
 * So gA_ij = gy_i.v_j, gP_ij = gA_ij m_ij / (1-p) (the same mask m), the softmax backward from
 * the saved output gs_ij = P_ij (gP_ij - sum_l gP_il P_il), and the raw dot's gradient is
 * G_ij = gs_ij / sqrt(HS). Then gq_i += sum_j G_ij k_j (here, by query rows),
 * gk_j += sum_ij G_ij q_i and gv_j += sum_i A_ij gy_i (below, by key rows).
 * Masked and fully masked rows have P = 0, so G = A = 0 there and nothing flows. */
static void backward_row(Real *gq, Real *dS, const Real *k, const Real *v, const Real *P,
                         const Real *gy, const KAttention *a, int b, int h, int i) {
    int Tk = a->Tk, HS = a->HS;
    size_t row = ((size_t)b * a->NH + h) * a->Tq + i;
    size_t kv0 = ((size_t)b * a->NKV + h / (a->NH / a->NKV)) * Tk;
    const Real *pi = P + row * Tk, *gyi = gy + row * HS;
    Real *gi = dS + row * Tk;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    Real D = 0;
    for (int j = 0; j < Tk; j++) { /* gP_ij, and D = sum_j gP_ij P_ij */
        gi[j] = 0;
        if (pi[j] == 0 || !keep(a, row * Tk + j)) continue;
        gi[j] = dot(gyi, v + (kv0 + j) * HS, HS);
        if (a->p != 0) gi[j] *= inv_keep;
        D += gi[j] * pi[j];
    }
    for (int j = 0; j < Tk; j++) gi[j] = pi[j] * (gi[j] - D) * scale;
    if (!gq) return;
    Real *gqi = gq + row * HS;
    for (int j = 0; j < Tk; j++) {
        if (pi[j] == 0) continue;
        const Real *kj = k + (kv0 + j) * HS;
        for (int d = 0; d < HS; d++) gqi[d] += gi[j] * kj[d];
    }
}

/* Key row j of key/value head g of batch b: the sums over the group's query heads and every
 * query row, in (head, row) order, added into gk[j] and gv[j]. */
static void backward_key(Real *gk, Real *gv, const Real *dS, const Real *q, const Real *P,
                         const Real *gy, const KAttention *a, int b, int g, int j) {
    int Tq = a->Tq, Tk = a->Tk, HS = a->HS, group = a->NH / a->NKV;
    size_t kr = ((size_t)b * a->NKV + g) * Tk + j;
    Real *gkj = gk ? gk + kr * HS : NULL, *gvj = gv ? gv + kr * HS : NULL;
    Real inv_keep = (Real)(1.0 / (1.0 - a->p));
    for (int h = g * group; h < (g + 1) * group; h++)
        for (int i = 0; i < Tq; i++) {
            size_t row = ((size_t)b * a->NH + h) * Tq + i, e = row * Tk + j;
            if (P[e] == 0) continue; /* masked (or underflowed): no term */
            if (gkj) {
                const Real *qi = q + row * HS;
                for (int d = 0; d < HS; d++) gkj[d] += dS[e] * qi[d];
            }
            if (gvj && keep(a, e)) {
                Real w = a->p == 0 ? P[e] : P[e] * inv_keep;
                const Real *gyi = gy + row * HS;
                for (int d = 0; d < HS; d++) gvj[d] += w * gyi[d];
            }
        }
}

void k_attention_backward(Real *gq, Real *gk, Real *gv, Real *dS, const Real *q, const Real *k,
                          const Real *v, const Real *P, const Real *gy, const KAttention *a) {
    int B = a->B, NH = a->NH, NKV = a->NKV, Tq = a->Tq, Tk = a->Tk;
    size_t work = (size_t)B * NH * Tq * Tk * a->HS;
    if (gq || gk) {
#pragma omp parallel for collapse(3) schedule(static) if (work >= K_PAR_MIN)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < Tq; i++) backward_row(gq, dS, k, v, P, gy, a, b, h, i);
    }
    if (gk || gv) {
#pragma omp parallel for collapse(3) schedule(static) if (work >= K_PAR_MIN)
        for (int b = 0; b < B; b++)
            for (int g = 0; g < NKV; g++)
                for (int j = 0; j < Tk; j++) backward_key(gk, gv, dS, q, P, gy, a, b, g, j);
    }
}

void k_head_gate_forward(Real *y, const Real *x, const Real *gate, int B, int NH, int T, int HS) {
    size_t n = (size_t)T * HS; /* one head's block of one batch element */
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t o = ((size_t)b * NH + h) * n;
            for (size_t e = 0; e < n; e++) y[o + e] = gate[h] * x[o + e];
        }
}
/* forward: y[b,h,t,d] = gate[h] x[b,h,t,d], so gx = gate[h] gy and ggate[h] is the sum over
 * b, t, d of x gy: one thread per head, in index order */
void k_head_gate_backward(Real *gx, Real *ggate, const Real *x, const Real *gate, const Real *gy,
                          int B, int NH, int T, int HS) {
    size_t n = (size_t)T * HS;
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)b * NH + h) * n;
                for (size_t e = 0; e < n; e++) gx[o + e] += gate[h] * gy[o + e];
            }
    }
    if (!ggate) return;
#pragma omp parallel for schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
    for (int h = 0; h < NH; h++) {
        Real s = 0;
        for (int b = 0; b < B; b++) {
            size_t o = ((size_t)b * NH + h) * n;
            for (size_t e = 0; e < n; e++) s += x[o + e] * gy[o + e];
        }
        ggate[h] += s;
    }
}
