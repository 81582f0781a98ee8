/* k_layernorm.c: the fused LayerNorm and RMSNorm over the last dimension, forward and backward.
 * Rows of C values are normalised a few at a time: mean, variance, normalise, scale and shift,
 * with the row statistics in double so that rows with a large common offset (x + 1e4)
 * keep their precision. RMSNorm (LLaMA's) is the same row without centring: mean taken as 0,
 * no bias, and the same code runs it (a `centred` flag). The weight and bias gradients are sums over rows: each fixed block of
 * LN_ROW_BLOCK rows sums its share in row order in the same pass that computes the rows' input
 * gradients, then one thread per column adds the blocks' shares in block order (no atomics), so
 * results are the same for any thread count. The residual sub-layer's x + f and its LayerNorm also run
 * as one pair (k_add_layernorm_*), which never stores x + f: forward and backward each form a
 * few rows of it at a time in a per-thread buffer. Not here: shape checks (ops_layernorm.c).
 * Next: ops_layernorm.c, which records this op on the tape. */
#include <math.h>

#include "k_lanes.h"
#include "kernels.h"

/* columns of a row's input gradient computed at once (they stay in L1) */
#define LN_COL_CHUNK 256
/* rows per block of the weight/bias gradient sums: each block's partial sums in row order, then
 * the blocks' sums in block order; a fixed number, so the same sums for any thread count */
#define LN_ROW_BLOCK 32

/* backward's two row sums: sum_c dxhat_c and sum_c dxhat_c xhat_c, dxhat_c = gy_c w_c */
static inline void dsums_add(const Real *x, const Real *gy, const Real *w, double mean, double rstd,
                             int c, double *ad, double *adx) {
    double xhat = ((double)x[c] - mean) * rstd, dxhat = (double)gy[c] * (double)w[c];
    *ad += dxhat;
    *adx += dxhat * xhat;
}
static void row_dsums(const Real *x, const Real *gy, const Real *w, double mean, double rstd, int C,
                      double *sum_d, double *sum_dx) {
    double ad[K_LANES] = {0}, adx[K_LANES] = {0}; /* k_lanes.h's order, two sums in one pass */
    int c = 0;
    for (; c + K_LANES <= C; c += K_LANES)
        for (int l = 0; l < K_LANES; l++) dsums_add(x, gy, w, mean, rstd, c + l, &ad[l], &adx[l]);
    for (int l = 0; c + l < C; l++) dsums_add(x, gy, w, mean, rstd, c + l, &ad[l], &adx[l]);
    *sum_d = k_lanes_total_d(ad);
    *sum_dx = k_lanes_total_d(adx);
}

/* rows normalised together: their statistics first, row after row, then their outputs. A
 * row's statistics are a chain of dependent steps (sum, mean, squared deviations, square root,
 * division); kept apart from the outputs, the chains of neighbouring rows overlap in the
 * processor (1.4 times faster for C = 128) */
#define LN_FWD_ROWS 4

/* rows [r0, r1) (at most LN_FWD_ROWS): y = (x - mean) rstd w + b, each row's (mean, rstd) into
 * st; not centred (RMSNorm): mean = 0, so rstd = 1 / sqrt(mean(x^2) + eps) */
static void norm_rows(Real *y, Real *st, const Real *x, const Real *weight, const Real *bias,
                      double eps, size_t r0, size_t r1, int C, int centred) {
    double mean[LN_FWD_ROWS], rstd[LN_FWD_ROWS];
    for (size_t r = r0; r < r1; r++) mean[r - r0] = centred ? k_row_sum_d(x + r * C, C) / C : 0.0;
    /* two passes (sum of squared deviations from the mean), not E[x^2] - mean^2, which
     * cancels catastrophically when the row has a large offset */
    for (size_t r = r0; r < r1; r++)
        rstd[r - r0] = 1.0 / sqrt(k_row_sq_dev_d(x + r * C, mean[r - r0], C) / C + eps);
    for (size_t r = r0; r < r1; r++) {
        const Real *xr = x + r * C;
        Real *yr = y + r * C;
        double m = mean[r - r0], rs = rstd[r - r0];
        if (bias) /* two loops, so that neither has a branch and both run in vector lanes */
            for (int c = 0; c < C; c++)
                yr[c] = (Real)(((double)xr[c] - m) * rs * (double)weight[c] + (double)bias[c]);
        else
            for (int c = 0; c < C; c++)
                yr[c] = (Real)(((double)xr[c] - m) * rs * (double)weight[c]);
        st[2 * r] = (Real)m;
        st[2 * r + 1] = (Real)rs;
    }
}

/* every row of x (rows, C), LN_FWD_ROWS at a time; the blocks split across threads */
static void norm_all(Real *y, Real *stats, const Real *x, const Real *weight, const Real *bias,
                     double eps, size_t rows, int C, int centred) {
    size_t nblk = (rows + LN_FWD_ROWS - 1) / LN_FWD_ROWS;
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t b = 0; b < nblk; b++) {
        size_t r0 = b * LN_FWD_ROWS, r1 = r0 + LN_FWD_ROWS < rows ? r0 + LN_FWD_ROWS : rows;
        norm_rows(y, stats, x, weight, bias, eps, r0, r1, C, centred);
    }
}

void k_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *weight, const Real *bias,
                         double eps, size_t rows, int C) {
    norm_all(y, stats, x, weight, bias, eps, rows, C, 1);
}

void k_rmsnorm_forward(Real *y, Real *stats, const Real *x, const Real *weight, double eps,
                       size_t rows, int C) {
    norm_all(y, stats, x, weight, NULL, eps, rows, C, 0);
}

/* The residual sum and its LayerNorm in one pass over each block of rows: s = x + f of the
 * block goes to the thread's buffer (LN_FWD_ROWS rows, in L1) and is normalised from there; it
 * is not kept (backward forms it again from x and f: a (rows, C) tensor less in the step arena
 * and one stream of writes less). The same arithmetic as k_add_forward followed by
 * k_layernorm_forward, so the same values. */
void k_add_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *f, const Real *weight,
                             const Real *bias, double eps, size_t rows, int C) {
    size_t nblk = (rows + LN_FWD_ROWS - 1) / LN_FWD_ROWS;
#pragma omp parallel if (rows * (size_t)C >= K_PAR_MIN)
    {
        Real *s = k_thread_scratch(K_SCRATCH_ROWS, LN_FWD_ROWS * (size_t)C);
#pragma omp for schedule(static)
        for (size_t b = 0; b < nblk; b++) {
            size_t r0 = b * LN_FWD_ROWS, r1 = r0 + LN_FWD_ROWS < rows ? r0 + LN_FWD_ROWS : rows;
            for (size_t i = r0 * C; i < r1 * C; i++) s[i - r0 * C] = x[i] + f[i];
            /* the buffer's rows 0 .. r1 - r0, their outputs to y and stats from row r0 */
            norm_rows(y + r0 * C, stats + 2 * r0, s, weight, bias, eps, 0, r1 - r0, C, 1);
        }
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
 * residual op, whose sum has two inputs); store bit 0 for gx, bit 1 for gx2. With f not NULL
 * the normalised input is x + f, formed a row at a time in the thread's buffer.
 * RMSNorm (not centred): rms = sqrt(sum_c x_c^2 / C + eps), rstd = 1 / rms, xhat_c = x_c rstd,
 * y_c = xhat_c w_c (Zhang & Sennrich 2019). Now d rstd/dx_j = -rstd^3 x_j / C and there is no
 * mean, so d xhat_c / dx_j = rstd (delta_cj - xhat_c xhat_j / C) and
 *     gx_j = rstd (dxhat_j - xhat_j mean_c(dxhat_c xhat_c)):
 * the LayerNorm formula without its mean_c(dxhat_c) term, with the saved mean 0. */
static void ln_backward(Real *gx, Real *gx2, Real *gweight, Real *gbias, const Real *x,
                        const Real *f, const Real *weight, const Real *stats, const Real *gy,
                        size_t rows, int C, unsigned store, int centred) {
    /* EXERCISE(layernorm rmsnorm): the backward of LayerNorm (centred = 1) and of RMSNorm
     * (centred = 0, no bias), row by row; the forward is in the comment above.
     *   x, gy (rows, C): the forward's input and dL/dy;  weight (C);
     *   f (rows, C) or NULL: when given, the forward's input was x + f (the fused residual)
     *   stats (rows, 2): each row's (mean, rstd) saved by the forward (mean 0 for RMSNorm)
     *   gx (rows, C): dL/dx; gx2, when not NULL, receives the same dL/dx (the fused x + f)
     *   gweight, gbias (C): sums over rows; gbias NULL for RMSNorm; any target may be NULL
     *   store bit 0: gx is a fresh buffer to write (=), else accumulate (+=); bit 1: gx2
     * Plain loops are fine (no threads needed). Derived in docs/backprop.md, section 7
     * "LayerNorm" (RMSNorm: the same algebra without the mean).
     * STUB: for (size_t i = 0; i < rows * (size_t)C; i++) {
     * STUB:     if ((store & 1) && gx) gx[i] = 0;
     * STUB:     if ((store & 2) && gx2) gx2[i] = 0;
     * STUB: }
     * STUB: (void)gweight; (void)gbias; (void)x; (void)f; (void)weight; (void)stats; (void)gy;
     * STUB: (void)centred; (void)row_dsums; (void)put; */
    size_t n = rows * (size_t)C;
    int want_x = gx || gx2, want_w = gweight || gbias;
    size_t nblk = (rows + LN_ROW_BLOCK - 1) / LN_ROW_BLOCK;
    /* the blocks' partial sums of gy xhat and gy, (nblk, 2, C) doubles, in the calling
     * thread's scratch, shared by the team */
    double *part = NULL;
    if (want_w) {
        size_t bytes = nblk * 2 * (size_t)C * sizeof(double);
        part = (double *)k_thread_scratch(K_SCRATCH_LAYERNORM,
                                          (bytes + sizeof(Real) - 1) / sizeof(Real));
    }
    /* One pass over x and gy: each block of rows gets its input gradients and its share of the
     * weight/bias sums while the rows are in L1; a second loop adds the blocks' shares. */
#pragma omp parallel if (n >= K_PAR_MIN)
    {
        Real *srow = f ? k_thread_scratch(K_SCRATCH_ROWS, (size_t)C) : NULL; /* x + f, a row */
#pragma omp for schedule(static)
        for (size_t b = 0; b < nblk; b++) {
            size_t r1 = (b + 1) * LN_ROW_BLOCK < rows ? (b + 1) * LN_ROW_BLOCK : rows;
            double *sw = part ? part + b * 2 * (size_t)C : NULL, *sb = sw ? sw + C : NULL;
            if (sw)
                for (int c = 0; c < 2 * C; c++) sw[c] = 0;
            for (size_t r = b * LN_ROW_BLOCK; r < r1; r++) {
                const Real *xr = x + r * C, *gr = gy + r * C;
                if (f) {
                    for (int c = 0; c < C; c++) srow[c] = xr[c] + f[r * C + c];
                    xr = srow;
                }
                double mean = (double)stats[2 * r], rstd = (double)stats[2 * r + 1];
                if (!want_x) { /* only the weight/bias sums */
                    for (int c = 0; c < C; c++) {
                        double g = (double)gr[c];
                        sw[c] += g * (((double)xr[c] - mean) * rstd);
                        sb[c] += g;
                    }
                    continue;
                }
                double sum_d, sum_dx;
                row_dsums(xr, gr, weight, mean, rstd, C, &sum_d, &sum_dx);
                double mean_d = centred ? sum_d / C : 0.0, mean_dx = sum_dx / C;
                /* the row's gradient a chunk at a time (in L1), then written to each target */
                for (int cb = 0; cb < C; cb += LN_COL_CHUNK) {
                    int nc = C - cb < LN_COL_CHUNK ? C - cb : LN_COL_CHUNK;
                    Real g[LN_COL_CHUNK];
                    if (sw) /* two loops, so that neither has a branch */
                        for (int c = 0; c < nc; c++) {
                            double xhat = ((double)xr[cb + c] - mean) * rstd;
                            double gyc = (double)gr[cb + c];
                            double dxhat = gyc * (double)weight[cb + c];
                            g[c] = (Real)(rstd * (dxhat - mean_d - xhat * mean_dx));
                            sw[cb + c] += gyc * xhat;
                            sb[cb + c] += gyc;
                        }
                    else
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
        /* (the loop's barrier: every block's share is written) each column summed over the
         * blocks in block order by one thread, 16 columns at a time */
        if (want_w) {
#pragma omp for schedule(static)
            for (int cb = 0; cb < C; cb += 16) {
                int nc = C - cb < 16 ? C - cb : 16;
                double w[16] = {0}, bs[16] = {0};
                for (size_t b = 0; b < nblk; b++) {
                    const double *pw = part + b * 2 * (size_t)C + cb, *pb = pw + C;
                    for (int c = 0; c < nc; c++) {
                        w[c] += pw[c];
                        bs[c] += pb[c];
                    }
                }
                for (int c = 0; c < nc; c++) {
                    if (gweight) gweight[cb + c] += (Real)w[c];
                    if (gbias) gbias[cb + c] += (Real)bs[c];
                }
            }
        }
    }
    /* END EXERCISE */
}

void k_layernorm_backward(Real *gx, Real *gweight, Real *gbias, const Real *x, const Real *weight,
                          const Real *stats, const Real *gy, size_t rows, int C, int store) {
    ln_backward(gx, NULL, gweight, gbias, x, NULL, weight, stats, gy, rows, C, store ? 1u : 0u, 1);
}

void k_rmsnorm_backward(Real *gx, Real *gweight, const Real *x, const Real *weight,
                        const Real *stats, const Real *gy, size_t rows, int C, int store) {
    ln_backward(gx, NULL, gweight, NULL, x, NULL, weight, stats, gy, rows, C, store ? 1u : 0u, 0);
}

/* forward: s = x + f, y = LayerNorm(s) (above). So gs is the LayerNorm's input gradient and
 * gx += gs, gf += gs: computed once per row (from s formed again, the same bits as forward's)
 * and written into both. */
void k_add_layernorm_backward(Real *gx, Real *gf, Real *gweight, Real *gbias, const Real *x,
                              const Real *f, const Real *weight, const Real *stats, const Real *gy,
                              size_t rows, int C, unsigned store) {
    ln_backward(gx, gf, gweight, gbias, x, f, weight, stats, gy, rows, C, store, 1);
}
