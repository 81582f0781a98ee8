/* k_attention.c: fused scaled dot-product attention (scores, mask, softmax, dropout, times v)
 * and the per-head gate. The forward shares (batch, head) pairs among threads. The backward
 * shares (batch, key/value head) pairs: one thread computes every query row of the heads that
 * read that key/value head (all of them with grouped-query attention), so it alone writes their
 * q-gradient rows and the key/value head's k- and v-gradients, and sums every term in a fixed
 * order (keys in order for a query row, (head, query row) in order for a key row). No (B, NH,
 * Tq, Tk) buffer of score gradients is needed: each query row's are used at once.
 * Speed: the scores of a query row are its dots with every key. They are computed from a
 * transposed copy of the head's keys (kt, HS x Tk, in per-thread scratch), summing over d in
 * order as a plain dot would, but with the loop over keys innermost and contiguous, so that it
 * runs in vector lanes; every other loop runs along HS or Tk, contiguous too.
 * Not here: shape checks (../autograd/ops_attention.c). Read the softmax pair in k_softmax.c
 * first: the backward below is its formula with the scores being q k^T / sqrt(HS). */
#include <math.h>

#include "k_math.h"
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

/* Score tiles: S[i][j] = x_i . r_j for rows x_i (n x HS) and r_j (T x HS), given transposed
 * and padded with zeros to TP = T rounded up to KB columns: rt (HS x TP). Each S[i][j] sums
 * its HS products in d order from 0, exactly as a plain dot, but RB rows times KB keys are summed
 * at once in registers (the loops over keys vectorize), so each value of rt loaded serves RB
 * rows. */
#define KB 32
#define RB 4

static int padded(int T) { return (T + KB - 1) / KB * KB; }

/* rt (HS, TP) = r (T, HS) transposed, columns T..TP zero */
static void transpose_padded(Real *restrict rt, const Real *restrict r, int T, int HS) {
    int TP = padded(T);
    for (int d = 0; d < HS; d++)
        for (int j = T; j < TP; j++) rt[(size_t)d * TP + j] = 0;
    for (int j = 0; j < T; j++)
        for (int d = 0; d < HS; d++) rt[(size_t)d * TP + j] = r[(size_t)j * HS + d];
}

/* S (n, T) with row stride T = x (n, HS) times r^T, rt as above */
static void score_tile(Real *restrict S, const Real *restrict x, int n, const Real *restrict rt,
                       int T, int HS) {
    int TP = padded(T);
    for (int i0 = 0; i0 < n; i0 += RB) {
        const Real *xr[RB]; /* past the last row, repeat it (computed, not stored) */
        for (int r = 0; r < RB; r++) xr[r] = x + (size_t)(i0 + r < n ? i0 + r : n - 1) * HS;
        for (int j0 = 0; j0 < TP; j0 += KB) {
            Real acc[RB][KB] = {{0}};
            for (int d = 0; d < HS; d++) {
                const Real *rd = rt + (size_t)d * TP + j0;
                for (int r = 0; r < RB; r++) {
                    Real xd = xr[r][d];
                    for (int jj = 0; jj < KB; jj++) acc[r][jj] += xd * rd[jj];
                }
            }
            int nj = T - j0 < KB ? T - j0 : KB;
            for (int r = 0; r < RB && i0 + r < n; r++)
                for (int jj = 0; jj < nj; jj++) S[(size_t)(i0 + r) * T + j0 + jj] = acc[r][jj];
        }
    }
}

/* y (HS) += w x (HS) */
static void axpy(Real *restrict y, Real w, const Real *restrict x, int HS) {
    for (int d = 0; d < HS; d++) y[d] += w * x[d];
}

/* Every query row i of head h of batch b: its probabilities P[row, :] and output y[row, :].
 * kt: scratch for the head's keys transposed (HS x padded(Tk)). */
static void forward_head(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a, int b, int h, Real *kt) {
    int Tk = a->Tk, HS = a->HS;
    size_t kv0 = ((size_t)b * a->NKV + h / (a->NH / a->NKV)) * Tk; /* key row 0 of the head */
    const uint8_t *pad = a->mask ? a->mask + (size_t)b * Tk : NULL;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    size_t row0 = ((size_t)b * a->NH + h) * a->Tq;
    transpose_padded(kt, k + kv0 * HS, Tk, HS);
    score_tile(P + row0 * Tk, q + row0 * HS, a->Tq, kt, Tk, HS); /* raw dots, every key */
    for (int i = 0; i < a->Tq; i++) {
        size_t row = row0 + i;
        Real *pi = P + row * Tk, *yi = y + row * HS;
        int end = key_end(a, i);
        /* scores of the visible keys and their max; masked keys never enter the softmax: their
         * score is -inf, so that their e^(s - m) is exactly 0 */
        Real m = 0;
        int any = 0;
        for (int j = 0; j < Tk; j++) {
            if (!visible(pad, end, j)) {
                pi[j] = -(Real)INFINITY;
                continue;
            }
            pi[j] *= scale;
            if (!any || pi[j] > m) m = pi[j];
            any = 1;
        }
        for (int d = 0; d < HS; d++) yi[d] = 0;
        if (!any) { /* every key masked: probabilities 0 and output 0, not 0/0 */
            for (int j = 0; j < Tk; j++) pi[j] = 0;
            continue;
        }
        for (int j = 0; j < Tk; j++) pi[j] = K_EXP(pi[j] - m); /* in vector lanes */
        Real s = 0;
        for (int j = 0; j < Tk; j++) s += pi[j];
        Real inv = 1 / s;
        for (int j = 0; j < Tk; j++) pi[j] *= inv;
        /* y_i = sum_j dropout(P_ij) v_j, keys in order */
        for (int j = 0; j < Tk; j++) {
            if (pi[j] == 0 || !keep(a, row * Tk + j)) continue;
            axpy(yi, a->p == 0 ? pi[j] : pi[j] * inv_keep, v + (kv0 + j) * HS, HS);
        }
    }
}

void k_attention_forward(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a) {
    int B = a->B, NH = a->NH;
    size_t work = (size_t)B * NH * a->Tq * a->Tk * a->HS;
#pragma omp parallel if (work >= K_PAR_MIN)
    {
        Real *kt = k_thread_scratch(K_SCRATCH_ATTENTION, (size_t)a->HS * padded(a->Tk));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) forward_head(y, P, q, k, v, a, b, h, kt);
    }
}

/* forward: s_ij = q_i.k_j / sqrt(HS), P = softmax over visible j, A = dropout(P), y = A v.
 * So gA_ij = gy_i.v_j, gP_ij = gA_ij m_ij / (1-p) (the same mask m), the softmax backward from
 * the saved output gs_ij = P_ij (gP_ij - sum_l gP_il P_il), and the raw dot's gradient is
 * G_ij = gs_ij / sqrt(HS). Then gq_i += sum_j G_ij k_j, gk_j += sum_i G_ij q_i and
 * gv_j += sum_i A_ij gy_i.
 * Masked and fully masked rows have P = 0, so G = A = 0 there and nothing flows: those terms
 * are skipped.
 * Here for key/value head g of batch b and every query row of the heads that read it;
 * vt (HS x padded(Tk)) and G (Tq x Tk) are scratch. */
static void backward_group(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                           const Real *v, const Real *P, const Real *gy, const KAttention *a,
                           int b, int g, Real *vt, Real *G) {
    int Tq = a->Tq, Tk = a->Tk, HS = a->HS, group = a->NH / a->NKV;
    size_t kv0 = ((size_t)b * a->NKV + g) * Tk;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    if (gq || gk) transpose_padded(vt, v + kv0 * HS, Tk, HS);
    for (int h = g * group; h < (g + 1) * group; h++) {
        size_t row0 = ((size_t)b * a->NH + h) * Tq;
        if (gq || gk) score_tile(G, gy + row0 * HS, Tq, vt, Tk, HS); /* gA_ij = gy_i.v_j */
        for (int i = 0; i < Tq; i++) {
            size_t row = row0 + i;
            const Real *pi = P + row * Tk, *gyi = gy + row * HS;
            if (gq || gk) {
                Real *Gi = G + (size_t)i * Tk;
                Real D = 0; /* sum_j gP_ij P_ij */
                for (int j = 0; j < Tk; j++) {
                    if (pi[j] == 0 || !keep(a, row * Tk + j)) {
                        Gi[j] = 0;
                        continue;
                    }
                    if (a->p != 0) Gi[j] *= inv_keep;
                    D += Gi[j] * pi[j];
                }
                for (int j = 0; j < Tk; j++) Gi[j] = pi[j] * (Gi[j] - D) * scale;
                for (int j = 0; j < Tk; j++) {
                    if (pi[j] == 0) continue;
                    if (gq) axpy(gq + row * HS, Gi[j], k + (kv0 + j) * HS, HS);
                    if (gk) axpy(gk + (kv0 + j) * HS, Gi[j], q + row * HS, HS);
                }
            }
            if (gv)
                for (int j = 0; j < Tk; j++) {
                    if (pi[j] == 0 || !keep(a, row * Tk + j)) continue;
                    axpy(gv + (kv0 + j) * HS, a->p == 0 ? pi[j] : pi[j] * inv_keep, gyi, HS);
                }
        }
    }
}

void k_attention_backward(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                          const Real *v, const Real *P, const Real *gy, const KAttention *a) {
    int B = a->B, NKV = a->NKV, Tk = a->Tk;
    size_t work = (size_t)B * a->NH * a->Tq * Tk * a->HS;
    if (!gq && !gk && !gv) return;
#pragma omp parallel if (work >= K_PAR_MIN)
    {
        size_t nvt = (size_t)a->HS * padded(Tk);
        Real *vt = k_thread_scratch(K_SCRATCH_ATTENTION, nvt + (size_t)a->Tq * Tk);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int g = 0; g < NKV; g++)
                backward_group(gq, gk, gv, q, k, v, P, gy, a, b, g, vt, vt + nvt);
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
