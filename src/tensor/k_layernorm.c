/* k_layernorm.c: the fused LayerNorm over the last dimension, forward and backward.
 * Each row of C values is normalised in one function call: mean, variance, normalise, scale and
 * shift, with the row statistics in double so that rows with a large common offset (x + 1e4)
 * keep their precision. The weight and bias gradients are sums over rows: they run in their own
 * loop split by columns, each column summed in row order by one thread (no atomics), so results
 * are the same for any thread count. Not here: shape checks (ops_layernorm.c).
 * Next: ops_layernorm.c, which records this op on the tape. */
#include <math.h>

#include "kernels.h"

/* columns per block of the weight/bias gradient loop: one thread sums a block over every row,
 * reading each row's block contiguously */
#define LN_COL_BLOCK 32

void k_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *weight,
                         const Real *bias, double eps, size_t rows, int C) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * C;
        Real *yr = y + r * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += (double)xr[c];
        double mean = s / C;
        /* two passes (sum of squared deviations from the mean), not E[x^2] - mean^2, which
         * cancels catastrophically when the row has a large offset */
        double v = 0;
        for (int c = 0; c < C; c++) {
            double d = (double)xr[c] - mean;
            v += d * d;
        }
        double rstd = 1.0 / sqrt(v / C + eps);
        for (int c = 0; c < C; c++) {
            double xhat = ((double)xr[c] - mean) * rstd;
            double out = xhat * (double)weight[c];
            if (bias) out += (double)bias[c];
            yr[c] = (Real)out;
        }
        stats[2 * r] = (Real)mean;
        stats[2 * r + 1] = (Real)rstd;
    }
}

/* forward, per row of C: mean = sum_c x_c / C, var = sum_c (x_c - mean)^2 / C,
 * rstd = 1 / sqrt(var + eps), xhat_c = (x_c - mean) rstd, y_c = xhat_c w_c + b_c.
 * So dL/db_c = sum over rows of gy_c and dL/dw_c = sum over rows of gy_c xhat_c. For x, let
 * dxhat_c = gy_c w_c. Since d mean/dx_j = 1/C and d rstd/dx_j = -rstd^3 (x_j - mean) / C,
 *     d xhat_c / dx_j = rstd (delta_cj - 1/C - xhat_c xhat_j / C),
 * and summing dxhat_c against it gives
 *     gx_j = rstd (dxhat_j - mean_c(dxhat_c) - xhat_j mean_c(dxhat_c xhat_c)).
 * This is the standard derivation (Ba et al. 2016, the same algebra as the batch-norm backward
 * of Ioffe & Szegedy 2015 along another axis; worked through in karpathy/llm.c,
 * doc/layernorm/layernorm.md). xhat is recomputed from x and the saved mean and rstd. */
void k_layernorm_backward(Real *gx, Real *gweight, Real *gbias, const Real *x,
                          const Real *weight, const Real *stats, const Real *gy, size_t rows,
                          int C) {
    size_t n = rows * (size_t)C;
    if (gx) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
        for (size_t r = 0; r < rows; r++) {
            const Real *xr = x + r * C, *gr = gy + r * C;
            Real *gxr = gx + r * C;
            double mean = (double)stats[2 * r], rstd = (double)stats[2 * r + 1];
            double sum_d = 0, sum_dx = 0;
            for (int c = 0; c < C; c++) {
                double xhat = ((double)xr[c] - mean) * rstd;
                double dxhat = (double)gr[c] * (double)weight[c];
                sum_d += dxhat;
                sum_dx += dxhat * xhat;
            }
            double mean_d = sum_d / C, mean_dx = sum_dx / C;
            for (int c = 0; c < C; c++) {
                double xhat = ((double)xr[c] - mean) * rstd;
                double dxhat = (double)gr[c] * (double)weight[c];
                gxr[c] += (Real)(rstd * (dxhat - mean_d - xhat * mean_dx));
            }
        }
    }
    if (!gweight && !gbias) return;
    int n_blocks = (C + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * LN_COL_BLOCK;
        int c1 = c0 + LN_COL_BLOCK < C ? c0 + LN_COL_BLOCK : C;
        double sw[LN_COL_BLOCK] = {0}, sb[LN_COL_BLOCK] = {0};
        for (size_t r = 0; r < rows; r++) {
            const Real *xr = x + r * C, *gr = gy + r * C;
            double mean = (double)stats[2 * r], rstd = (double)stats[2 * r + 1];
            for (int c = c0; c < c1; c++) {
                double g = (double)gr[c];
                sw[c - c0] += g * (((double)xr[c] - mean) * rstd);
                sb[c - c0] += g;
            }
        }
        for (int c = c0; c < c1; c++) {
            if (gweight) gweight[c] += (Real)sw[c - c0];
            if (gbias) gbias[c] += (Real)sb[c - c0];
        }
    }
}
