/* k_layernorm.c: the fused LayerNorm over the last dimension, forward and backward.
 * Each row of C values is normalised in one function call: mean, variance, normalise, scale and
 * shift, with the row statistics in double so that rows with a large common offset (x + 1e4)
 * keep their precision. The weight and bias gradients are sums over rows: they run in their own
 * loop split by columns, each column summed in row order by one thread (no atomics), so results
 * are the same for any thread count. The residual sub-layer's x + f and its LayerNorm also run
 * as one pair (k_add_layernorm_*). Not here: shape checks (ops_layernorm.c).
 * Next: ops_layernorm.c, which records this op on the tape. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels.h"

/* columns summed at once by the weight/bias gradient loop (their sums stay in L1) */
#define LN_COL_CHUNK 256

/* Row sums in double, in 8 interleaved partial sums (column c goes to sum c mod 8) added up in
 * a fixed order at the end: the same result wherever it runs, and the 8 sums advance together
 * in one vector register, where a single running sum would wait on each add. */
#define LANES 8
static double lanes_total(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* sum_c x_c and, given the mean, sum_c (x_c - mean)^2 */
static double row_sum(const Real *x, int C) {
    double acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += (double)x[c + l];
    for (int l = 0; c + l < C; l++) acc[l] += (double)x[c + l];
    return lanes_total(acc);
}
static double row_sq_dev(const Real *x, double mean, int C) {
    double acc[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int l = 0; l < LANES; l++) {
            double d = (double)x[c + l] - mean;
            acc[l] += d * d;
        }
    for (int l = 0; c + l < C; l++) {
        double d = (double)x[c + l] - mean;
        acc[l] += d * d;
    }
    return lanes_total(acc);
}

/* backward's two row sums: sum_c dxhat_c and sum_c dxhat_c xhat_c, dxhat_c = gy_c w_c */
static void row_dsums(const Real *x, const Real *gy, const Real *w, double mean, double rstd, int C,
                      double *sum_d, double *sum_dx) {
    double ad[LANES] = {0}, adx[LANES] = {0};
    int c = 0;
    for (; c + LANES <= C; c += LANES)
        for (int l = 0; l < LANES; l++) {
            double xhat = ((double)x[c + l] - mean) * rstd;
            double dxhat = (double)gy[c + l] * (double)w[c + l];
            ad[l] += dxhat;
            adx[l] += dxhat * xhat;
        }
    for (int l = 0; c + l < C; l++) {
        double xhat = ((double)x[c + l] - mean) * rstd;
        double dxhat = (double)gy[c + l] * (double)w[c + l];
        ad[l] += dxhat;
        adx[l] += dxhat * xhat;
    }
    *sum_d = lanes_total(ad);
    *sum_dx = lanes_total(adx);
}

/* one row: y = (x - mean) rstd w + b, its (mean, rstd) into st[0..1] */
static void norm_row(Real *yr, Real *st, const Real *xr, const Real *weight, const Real *bias,
                     double eps, int C) {
    double mean = row_sum(xr, C) / C;
    /* two passes (sum of squared deviations from the mean), not E[x^2] - mean^2, which
     * cancels catastrophically when the row has a large offset */
    double rstd = 1.0 / sqrt(row_sq_dev(xr, mean, C) / C + eps);
    if (bias) /* two loops, so that neither has a branch and both run in vector lanes */
        for (int c = 0; c < C; c++)
            yr[c] = (Real)(((double)xr[c] - mean) * rstd * (double)weight[c] + (double)bias[c]);
    else
        for (int c = 0; c < C; c++)
            yr[c] = (Real)(((double)xr[c] - mean) * rstd * (double)weight[c]);
    st[0] = (Real)mean;
    st[1] = (Real)rstd;
}

void k_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *weight, const Real *bias,
                         double eps, size_t rows, int C) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++)
        norm_row(y + r * C, stats + 2 * r, x + r * C, weight, bias, eps, C);
}

/* The residual sum and its LayerNorm in one pass over each row: s = x + f (kept for backward)
 * is still in L1 when it is normalised. The same arithmetic as k_add_forward followed by
 * k_layernorm_forward, so the same values. */
void k_add_layernorm_forward(Real *y, Real *s, Real *stats, const Real *x, const Real *f,
                             const Real *weight, const Real *bias, double eps, size_t rows, int C) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * C, *fr = f + r * C;
        Real *sr = s + r * C;
        for (int c = 0; c < C; c++) sr[c] = xr[c] + fr[c];
        norm_row(y + r * C, stats + 2 * r, sr, weight, bias, eps, C);
    }
}

/* Writes (store) or adds g into dst; dst NULL: nothing. Plain loops: a call to memcpy for a
 * row of a few hundred bytes cost more than the copy. */
static void put(Real *restrict dst, const Real *restrict g, int n, int store) {
    if (!dst) return;
    if (store)
        for (int c = 0; c < n; c++) dst[c] = g[c];
    else
        for (int c = 0; c < n; c++) dst[c] += g[c];
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
 * doc/layernorm/layernorm.md). xhat is recomputed from x and the saved mean and rstd.
 * Here the input gradient goes into gx and, when gx2 is not NULL, into gx2 as well (the fused
 * residual op, whose sum has two inputs); store bit 0 for gx, bit 1 for gx2. */
static void ln_backward(Real *gx, Real *gx2, Real *gweight, Real *gbias, const Real *x,
                        const Real *weight, const Real *stats, const Real *gy, size_t rows, int C,
                        unsigned store) {
    size_t n = rows * (size_t)C;
    /* one parallel region for both loops: the row loop (gx) and the column loop (gweight,
     * gbias) write different arrays, so a thread goes on to its columns without waiting */
#pragma omp parallel if (n >= K_PAR_MIN)
    {
        if (gx || gx2) {
#pragma omp for schedule(static) nowait
            for (size_t r = 0; r < rows; r++) {
                const Real *xr = x + r * C, *gr = gy + r * C;
                double mean = (double)stats[2 * r], rstd = (double)stats[2 * r + 1];
                double sum_d, sum_dx;
                row_dsums(xr, gr, weight, mean, rstd, C, &sum_d, &sum_dx);
                double mean_d = sum_d / C, mean_dx = sum_dx / C;
                /* the row's gradient a chunk at a time (in L1), then written to each target */
                for (int cb = 0; cb < C; cb += LN_COL_CHUNK) {
                    int nc = C - cb < LN_COL_CHUNK ? C - cb : LN_COL_CHUNK;
                    Real g[LN_COL_CHUNK];
                    for (int c = 0; c < nc; c++) {
                        double xhat = ((double)xr[cb + c] - mean) * rstd;
                        double dxhat = (double)gr[cb + c] * (double)weight[cb + c];
                        g[c] = (Real)(rstd * (dxhat - mean_d - xhat * mean_dx));
                    }
                    put(gx ? gx + r * C + cb : NULL, g, nc, store & 1);
                    put(gx2 ? gx2 + r * C + cb : NULL, g, nc, (store >> 1) & 1);
                }
            }
        }
        if (gweight || gbias) {
            /* Each thread owns a contiguous range of columns (cut at multiples of 16) and walks
             * the rows in order, so every column is summed in row order whoever owns it, and
             * memory is read row by row (blocks of 32 columns that each walked every row with a
             * stride were slower). */
            int T = 1, t = 0;
#ifdef _OPENMP
            T = omp_get_num_threads();
            t = omp_get_thread_num();
#endif
            int units = (C + 15) / 16;
            int c0 = (int)((long)units * t / T) * 16, c1 = (int)((long)units * (t + 1) / T) * 16;
            if (c1 > C) c1 = C;
            for (int cb = c0; cb < c1; cb += LN_COL_CHUNK) {
                int nc = c1 - cb < LN_COL_CHUNK ? c1 - cb : LN_COL_CHUNK;
                double sw[LN_COL_CHUNK], sb[LN_COL_CHUNK];
                for (int c = 0; c < nc; c++) sw[c] = sb[c] = 0;
                for (size_t r = 0; r < rows; r++) {
                    const Real *xr = x + r * C + cb, *gr = gy + r * C + cb;
                    double mean = (double)stats[2 * r], rstd = (double)stats[2 * r + 1];
                    for (int c = 0; c < nc; c++) {
                        double g = (double)gr[c];
                        sw[c] += g * (((double)xr[c] - mean) * rstd);
                        sb[c] += g;
                    }
                }
                for (int c = 0; c < nc; c++) {
                    if (gweight) gweight[cb + c] += (Real)sw[c];
                    if (gbias) gbias[cb + c] += (Real)sb[c];
                }
            }
        }
    }
}

void k_layernorm_backward(Real *gx, Real *gweight, Real *gbias, const Real *x, const Real *weight,
                          const Real *stats, const Real *gy, size_t rows, int C, int store) {
    ln_backward(gx, NULL, gweight, gbias, x, weight, stats, gy, rows, C, store ? 1u : 0u);
}

/* forward: s = x + f, y = LayerNorm(s) (above). So gs is the LayerNorm's input gradient and
 * gx += gs, gf += gs: computed once per row and written into both. */
void k_add_layernorm_backward(Real *gx, Real *gf, Real *gweight, Real *gbias, const Real *s,
                              const Real *weight, const Real *stats, const Real *gy, size_t rows,
                              int C, unsigned store) {
    ln_backward(gx, gf, gweight, gbias, s, weight, stats, gy, rows, C, store);
}
