/* k_softmax.c: softmax, log-softmax and cross-entropy over the last dimension, row by row.
 * Rows are independent, so threads share rows; inside a row every max and sum is one of
 * k_lanes.h's (a fixed order, in vector lanes).
 * Every row subtracts its max before exp so that large logits cannot overflow. exp and log run
 * in the build's precision (K_EXP, K_LOG of k_math.h: in the float build an exp the compiler
 * vectorizes, and logf).
 * Next: k_attention_ref.c (attention: a softmax over q k^T / sqrt(HS)). */
#include <math.h>

#include "k_lanes.h"
#include "k_math.h"
#include "kernels.h"

#define ROWS_PAR _Pragma("omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)")

void k_softmax_forward(Real *y, const Real *x, size_t rows, int C) {
    ROWS_PAR
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * C;
        Real *yr = y + r * C;
        Real m = k_row_max(xr, C);
        for (int j = 0; j < C; j++) yr[j] = K_EXP(xr[j] - m);
        Real inv = 1 / k_row_sum(yr, C);
        for (int j = 0; j < C; j++) yr[j] *= inv;
    }
}
/* forward: y_i = e^(x_i) / sum_j e^(x_j), so dy_i/dx_k = y_i (delta_ik - y_k) and
 * gx_k = sum_i gy_i y_i (delta_ik - y_k) = y_k (gy_k - sum_i gy_i y_i): only y is needed */
void k_softmax_backward(Real *gx, const Real *y, const Real *gy, size_t rows, int C) {
    /* EXERCISE(softmax): add dL/dx into gx, for each of the rows independently.
     *   y  (rows, C): the forward's output y = softmax(x) of each row (saved; x is not kept)
     *   gy (rows, C): dL/dy;   gx (rows, C): dL/dx, accumulate (+=)
     * Only y is needed. Derived in docs/backprop.md, section 4 "Softmax".
     * STUB: (void)gx; (void)y; (void)gy; (void)rows; (void)C; */
    ROWS_PAR
    for (size_t r = 0; r < rows; r++) {
        const Real *yr = y + r * C, *gr = gy + r * C;
        Real dot = k_row_dot(gr, yr, C);
        for (int j = 0; j < C; j++) gx[r * C + j] += yr[j] * (gr[j] - dot);
    }
    /* END EXERCISE */
}

void k_log_softmax_forward(Real *y, const Real *x, size_t rows, int C) {
    ROWS_PAR
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * C;
        Real m = k_row_max(xr, C);
        Real lse = m + K_LOG(k_row_sum_exp(xr, m, C));
        for (int j = 0; j < C; j++) y[r * C + j] = xr[j] - lse;
    }
}
/* forward: y_i = x_i - log sum_j e^(x_j), so dy_i/dx_k = delta_ik - softmax_k and
 * gx_k = gy_k - e^(y_k) sum_i gy_i (softmax recovered from the saved output as e^y) */
void k_log_softmax_backward(Real *gx, const Real *y, const Real *gy, size_t rows, int C) {
    /* EXERCISE(log_softmax): add dL/dx into gx, for each of the rows independently.
     *   y  (rows, C): the forward's output y = x - log sum_j e^(x_j) of each row (saved)
     *   gy (rows, C): dL/dy;   gx (rows, C): dL/dx, accumulate (+=)
     * softmax(x) is e^y (K_EXP). Derived in docs/backprop.md, section 5 "Log-softmax".
     * STUB: (void)gx; (void)y; (void)gy; (void)rows; (void)C; */
    ROWS_PAR
    for (size_t r = 0; r < rows; r++) {
        const Real *yr = y + r * C, *gr = gy + r * C;
        Real s = k_row_sum(gr, C);
        for (int j = 0; j < C; j++) gx[r * C + j] += gr[j] - K_EXP(yr[j]) * s;
    }
    /* END EXERCISE */
}

double k_cross_entropy_forward(Real *lse, const Real *logits, const int *targets, int ignore_index,
                               size_t rows, int V, size_t *n_kept) {
#pragma omp parallel for schedule(static) if (rows * (size_t)V >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = logits + r * V;
        Real m = k_row_max(xr, V);
        lse[r] = m + K_LOG(k_row_sum_exp(xr, m, V));
    }
    /* the mean over kept rows, summed in row order on one thread */
    double total = 0;
    size_t kept = 0;
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index) continue;
        total += (double)lse[r] - (double)logits[r * V + targets[r]];
        kept++;
    }
    *n_kept = kept;
    return kept ? total / (double)kept : 0.0;
}
/* forward: L = (1/n) sum_r (lse_r - x[r, t_r]) over kept rows, so
 * dL/dx[r,j] = (softmax(x_r)_j - [j == t_r]) / n, with softmax_j = e^(x_j - lse_r) */
void k_cross_entropy_backward(Real *glogits, const Real *logits, const Real *lse,
                              const int *targets, int ignore_index, Real g, size_t rows, int V) {
    /* EXERCISE(cross_entropy): add dL/dlogits into glogits (part 2 of 2; part 1 is g, in
     * ag_cross_entropy_backward, src/autograd/ops_softmax.c).
     *   logits, glogits (rows, V); lse (rows): log sum_j e^(logits[r,j]), saved by the forward;
     *   targets (rows): the class of each row, ignore_index for a row that is not in the loss;
     *   g: dL/dloss already divided by the number of kept rows (part 1)
     * Derived in docs/backprop.md, section 6 "Cross-entropy".
     * STUB: (void)glogits; (void)logits; (void)lse; (void)targets; (void)ignore_index;
     * STUB: (void)g; (void)rows; (void)V; */
#pragma omp parallel for schedule(static) if (rows * (size_t)V >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        if (targets[r] == ignore_index) continue;
        const Real *xr = logits + r * V;
        Real *gr = glogits + r * V;
        for (int j = 0; j < V; j++) gr[j] += g * K_EXP(xr[j] - lse[r]);
        gr[targets[r]] -= g;
    }
    /* END EXERCISE */
}
