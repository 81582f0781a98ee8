/* k_layernorm.c: the fused LayerNorm and RMSNorm over the last dimension, forward and backward.
 * Rows of C values are normalised a few at a time: mean, variance, normalise, scale and shift.
 * The row statistics (the mean and the sum of squared deviations) are summed in double, so that
 * rows with a large common offset (x + 1e4) keep their precision; every per-element step
 * (normalise, scale, shift, the backward's row sums and gradients, the weight/bias sums) runs in
 * Real, twice as many lanes as double in the float build. The double build computes exactly
 * what it computed in double throughout. RMSNorm (LLaMA's) is the same row without centring:
 * mean taken as 0, no bias, and the same code runs it (a `centred` flag). The weight and bias
 * gradients are sums over rows: each fixed block of LN_ROW_BLOCK rows sums its share in row
 * order in the same pass that computes the rows' input gradients, then one thread per column
 * adds the blocks' shares in block order, in double (no atomics), so results are the same for
 * any thread count. The residual sub-layer's x + f and its LayerNorm also run as one pair
 * (k_add_layernorm_*), which never stores x + f: forward and backward each form a few rows of
 * it at a time in a per-thread buffer. Not here: shape checks (ops_layernorm.c).
 * Next: ops_layernorm.c, which records this op on the tape. */
#include <math.h>

#include "k_lanes.h"
#include "kernels.h"

/* rows per block of the weight/bias gradient sums: each block's partial sums in row order, then
 * the blocks' sums in block order; a fixed number, so the same sums for any thread count */
#define LN_ROW_BLOCK 32

/* backward's two row sums: sum_c dxhat_c and sum_c dxhat_c xhat_c, dxhat_c = gy_c w_c, in
 * Real lanes (k_lanes.h's order, two sums in one pass) */
static inline void dsums_add(const Real *x, const Real *gy, const Real *w, Real mean, Real rstd,
                             int c, Real *ad, Real *adx) {
    Real xhat = (x[c] - mean) * rstd, dxhat = gy[c] * w[c];
    *ad += dxhat;
    *adx += dxhat * xhat;
}
static void row_dsums(const Real *x, const Real *gy, const Real *w, Real mean, Real rstd, int C,
                      Real *sum_d, Real *sum_dx) {
    Real ad[K_LANES] = {0}, adx[K_LANES] = {0};
    int c = 0;
    for (; c + K_LANES <= C; c += K_LANES)
        for (int l = 0; l < K_LANES; l++) dsums_add(x, gy, w, mean, rstd, c + l, &ad[l], &adx[l]);
    for (int l = 0; c + l < C; l++) dsums_add(x, gy, w, mean, rstd, c + l, &ad[l], &adx[l]);
    *sum_d = k_lanes_total(ad);
    *sum_dx = k_lanes_total(adx);
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
    double mean[LN_FWD_ROWS], rstd[LN_FWD_ROWS] = {0};
    for (size_t r = r0; r < r1; r++) mean[r - r0] = centred ? k_row_sum_d(x + r * C, C) / C : 0.0;
    /* two passes (sum of squared deviations from the mean), not E[x^2] - mean^2, which
     * cancels catastrophically when the row has a large offset */
    for (size_t r = r0; r < r1; r++) rstd[r - r0] = k_row_sq_dev_d(x + r * C, mean[r - r0], C);
    /* the rows' square roots and divisions together, in one vector (unused rows: 1 / sqrt(eps)) */
    for (int i = 0; i < LN_FWD_ROWS; i++) rstd[i] = 1.0 / sqrt(rstd[i] / C + eps);
    for (size_t r = r0; r < r1; r++) {
        const Real *xr = x + r * C;
        Real *yr = y + r * C;
        /* the outputs in Real lanes (twice as many as double's): the mean as a sum of two Reals,
         * mh + ml, so that x - mh is exact for x near the mean (Sterbenz) and (x - mh) - ml
         * rounds once, relative to the deviation, even when the row sits at 1e4 (ml = 0 in the
         * double build: the same arithmetic as in double) */
        Real mh = (Real)mean[r - r0], ml = (Real)(mean[r - r0] - (double)mh);
        Real rs = (Real)rstd[r - r0];
        if (bias) /* two loops, so that neither has a branch and both run in vector lanes */
            for (int c = 0; c < C; c++) yr[c] = ((xr[c] - mh) - ml) * rs * weight[c] + bias[c];
        else
            for (int c = 0; c < C; c++) yr[c] = ((xr[c] - mh) - ml) * rs * weight[c];
        st[2 * r] = mh;
        st[2 * r + 1] = rs;
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

/* rows of backward handled together: their row sums first (their chains of adds overlap), then
 * their gradients, then their shares of the weight/bias sums in one pass (each column's running
 * sums stay in registers for the group's rows, added in row order as one row at a time would) */
#define LN_BWD_ROWS 4

/* One row's input gradient g_c = rstd (dxhat_c - mean_d - xhat_c mean_dx) into gx and gx2
 * (mode 0: not wanted, 1: written, 2: added to; gx and gx2 may be the same array, as in
 * ag_add_layernorm(x, x), so they are not restrict). Inlined with constant modes: one
 * branch-free loop for each combination, so that g goes straight to its targets in vector
 * lanes. */
static K_ALWAYS_INLINE void grad_row(Real *gx, Real *gx2, const Real *restrict xr,
                                     const Real *restrict gr, const Real *restrict w, Real mean,
                                     Real rstd, Real mean_d, Real mean_dx, int C, int m1, int m2) {
    for (int c = 0; c < C; c++) {
        Real xhat = (xr[c] - mean) * rstd;
        Real g = rstd * (gr[c] * w[c] - mean_d - xhat * mean_dx);
        if (m1 == 1) gx[c] = g;
        if (m1 == 2) gx[c] += g;
        if (m2 == 1) gx2[c] = g;
        if (m2 == 2) gx2[c] += g;
    }
}
static void grad_row_any(Real *gx, Real *gx2, const Real *xr, const Real *gr, const Real *w,
                         Real mean, Real rstd, Real mean_d, Real mean_dx, int C, int mode) {
#define GRAD_ROW(m1, m2) grad_row(gx, gx2, xr, gr, w, mean, rstd, mean_d, mean_dx, C, m1, m2)
    switch (mode) {
    case 1: GRAD_ROW(1, 0); break;
    case 2: GRAD_ROW(2, 0); break;
    case 3: GRAD_ROW(0, 1); break;
    case 4: GRAD_ROW(1, 1); break;
    case 5: GRAD_ROW(2, 1); break;
    case 6: GRAD_ROW(0, 2); break;
    case 7: GRAD_ROW(1, 2); break;
    case 8: GRAD_ROW(2, 2); break;
    default: break;
    }
#undef GRAD_ROW
}

/* sw_c += gy_c xhat_c and sb_c += gy_c for the rows i < nr (xr[i], gr[i], their mean and rstd),
 * in row order; LN_BWD_ROWS rows in one pass over sw and sb */
static void wsum_rows(Real *restrict sw, Real *restrict sb, const Real *const *xr,
                      const Real *const *gr, const Real *mean, const Real *rstd, int nr, int C) {
    if (nr == LN_BWD_ROWS)
        for (int c = 0; c < C; c++) {
            Real a = sw[c], s = sb[c];
            UNROLL for (int i = 0; i < LN_BWD_ROWS; i++) {
                a += gr[i][c] * ((xr[i][c] - mean[i]) * rstd[i]);
                s += gr[i][c];
            }
            sw[c] = a;
            sb[c] = s;
        }
    else
        for (int i = 0; i < nr; i++)
            for (int c = 0; c < C; c++) {
                sw[c] += gr[i][c] * ((xr[i][c] - mean[i]) * rstd[i]);
                sb[c] += gr[i][c];
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
     * STUB: (void)centred; (void)row_dsums; (void)grad_row_any; (void)wsum_rows; */
    size_t n = rows * (size_t)C;
    int want_x = gx || gx2, want_w = gweight || gbias;
    /* each target's mode for grad_row: 0 none, 1 written, 2 added to */
    int mode = (gx ? 2 - (store & 1) : 0) + 3 * (gx2 ? 2 - ((store >> 1) & 1) : 0);
    size_t nblk = (rows + LN_ROW_BLOCK - 1) / LN_ROW_BLOCK;
    /* the blocks' partial sums of gy xhat and gy, (nblk, 2, C), in the calling thread's
     * scratch, shared by the team */
    Real *part = want_w ? k_thread_scratch(K_SCRATCH_LAYERNORM, nblk * 2 * (size_t)C) : NULL;
    /* One pass over x and gy: each block of rows gets its input gradients and its share of the
     * weight/bias sums while the rows are in L1; a second loop adds the blocks' shares. */
#pragma omp parallel if (n >= K_PAR_MIN)
    {
        /* x + f, LN_BWD_ROWS rows */
        Real *srow = f ? k_thread_scratch(K_SCRATCH_ROWS, LN_BWD_ROWS * (size_t)C) : NULL;
#pragma omp for schedule(static)
        for (size_t b = 0; b < nblk; b++) {
            size_t r1 = (b + 1) * LN_ROW_BLOCK < rows ? (b + 1) * LN_ROW_BLOCK : rows;
            Real *sw = part ? part + b * 2 * (size_t)C : NULL, *sb = sw ? sw + C : NULL;
            if (sw)
                for (int c = 0; c < 2 * C; c++) sw[c] = 0;
            for (size_t r0 = b * LN_ROW_BLOCK; r0 < r1; r0 += LN_BWD_ROWS) {
                int nr = r1 - r0 < LN_BWD_ROWS ? (int)(r1 - r0) : LN_BWD_ROWS;
                const Real *xr[LN_BWD_ROWS], *gr[LN_BWD_ROWS];
                Real mean[LN_BWD_ROWS], rstd[LN_BWD_ROWS], mean_d[LN_BWD_ROWS],
                    mean_dx[LN_BWD_ROWS];
                for (int i = 0; i < nr; i++) {
                    size_t r = r0 + i;
                    xr[i] = x + r * C;
                    gr[i] = gy + r * C;
                    if (f) {
                        for (int c = 0; c < C; c++) srow[i * C + c] = xr[i][c] + f[r * C + c];
                        xr[i] = srow + i * C;
                    }
                    mean[i] = stats[2 * r];
                    rstd[i] = stats[2 * r + 1];
                }
                if (want_x) {
                    for (int i = 0; i < nr; i++) {
                        Real sum_d, sum_dx;
                        row_dsums(xr[i], gr[i], weight, mean[i], rstd[i], C, &sum_d, &sum_dx);
                        mean_d[i] = centred ? sum_d / C : 0;
                        mean_dx[i] = sum_dx / C;
                    }
                    for (int i = 0; i < nr; i++) {
                        size_t r = r0 + i;
                        grad_row_any(gx ? gx + r * C : NULL, gx2 ? gx2 + r * C : NULL, xr[i], gr[i],
                                     weight, mean[i], rstd[i], mean_d[i], mean_dx[i], C, mode);
                    }
                }
                if (sw) wsum_rows(sw, sb, xr, gr, mean, rstd, nr, C);
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
                    const Real *pw = part + b * 2 * (size_t)C + cb, *pb = pw + C;
                    for (int c = 0; c < nc; c++) {
                        w[c] += (double)pw[c];
                        bs[c] += (double)pb[c];
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
