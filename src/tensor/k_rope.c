/* k_rope.c: rotary position embedding (RoPE; Su et al. 2021, "RoFormer"), forward and backward,
 * in the convention of Meta's LLaMA and llama2.c: within each head of HS columns, the pair of
 * columns (2i, 2i+1) is a point in the plane, turned by the angle pos * theta_i with
 * theta_i = base^(-2i/R), for the pairs of the first R columns (R = HS, or fewer: partial
 * rotary, GPT-NeoX's rotary_pct); the columns [R, HS) of each head pass through unchanged. The cos and sin of every (position, pair) go into a table once per
 * call, each entry computed on its own in double (the same bits for any thread count); the
 * rotations then read it. Backward turns the gradient back by the same angle (a rotation's
 * inverse is its transpose). Not here: shape checks and the choice of positions (ops_rope.c).
 * Next: ops_rope.c. */
#include <math.h>

#include "kernels.h"

/* A pair i at a time (its theta once, then every position): threads take pairs. An entry
 * costs a cos and a sin, some 16 elementwise operations, hence the threshold. */
void k_rope_table(Real *cs, int T, int pos0, int R, double base) {
    int P = R / 2;
#pragma omp parallel for schedule(static) if ((size_t)T * (size_t)P * 16 >= K_PAR_MIN)
    for (int i = 0; i < P; i++) {
        double theta = pow(base, -2.0 * i / R);
        for (int t = 0; t < T; t++) {
            double a = (double)(pos0 + t) * theta;
            cs[(size_t)t * R + 2 * i] = (Real)cos(a);
            cs[(size_t)t * R + 2 * i + 1] = (Real)sin(a);
        }
    }
}

/* one row: each head's pairs (x0, x1) of its first R columns -> (x0 cos - x1 sin,
 * x0 sin + x1 cos), the complex product (x0 + i x1) e^(i a) of Meta's apply_rotary_emb; its
 * columns [R, HS) copied */
void k_rope_forward(Real *y, size_t ldy, const Real *x, size_t ldx, const Real *cs, size_t rows,
                    int T, int n, int HS, int R) {
#pragma omp parallel for schedule(static) if (rows * (size_t)n >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * ldx, *c = cs + (r % (size_t)T) * R;
        Real *yr = y + r * ldy;
        for (int h = 0; h < n; h += HS) {
            for (int i = 0; i < R; i += 2) {
                Real co = c[i], si = c[i + 1], x0 = xr[h + i], x1 = xr[h + i + 1];
                yr[h + i] = x0 * co - x1 * si;
                yr[h + i + 1] = x0 * si + x1 * co;
            }
            for (int i = R; i < HS; i++) yr[h + i] = xr[h + i];
        }
    }
}

/* forward: y = R(a) x for each pair, R(a) = [[cos, -sin], [sin, cos]]. So gx = R(a)^T gy =
 * R(-a) gy: gx0 += gy0 cos + gy1 sin, gx1 += -gy0 sin + gy1 cos; the columns [R, HS) of each
 * head were copied, so gx += gy there. Each row of gx is written by the one thread that owns
 * the row. */
void k_rope_backward(Real *gx, size_t ldx, const Real *gy, size_t ldy, const Real *cs, size_t rows,
                     int T, int n, int HS, int R) {
    /* EXERCISE(rope): add dL/dx into gx for the rotation of k_rope_forward above.
     *   rows of n columns (heads of HS, pairs (2i, 2i+1) for 2i < R, then columns [R, HS)
     *   copied); row r of gx starts at r * ldx, of gy at r * ldy; row r is at position r % T,
     *   whose cos and sin of pair i are cs[(r % T) * R + 2i] and cs[(r % T) * R + 2i + 1];
     *   accumulate (+=)
     * Derived in docs/backprop.md, section 12 "Rotary positions and SiLU".
     * STUB: (void)gx; (void)ldx; (void)gy; (void)ldy; (void)cs; (void)rows; (void)T;
     * STUB: (void)n; (void)HS; (void)R; */
#pragma omp parallel for schedule(static) if (rows * (size_t)n >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *gr = gy + r * ldy, *c = cs + (r % (size_t)T) * R;
        Real *gxr = gx + r * ldx;
        for (int h = 0; h < n; h += HS) {
            for (int i = 0; i < R; i += 2) {
                Real co = c[i], si = c[i + 1], g0 = gr[h + i], g1 = gr[h + i + 1];
                gxr[h + i] += g0 * co + g1 * si;
                gxr[h + i + 1] += g1 * co - g0 * si;
            }
            for (int i = R; i < HS; i++) gxr[h + i] += gr[h + i];
        }
    }
    /* END EXERCISE */
}

/* keep: the columns outside the rotated block pass through: forward y = x, so gx += gy */
void k_rope_pass(Real *y, const Real *x, size_t rows, int C, int col, int n) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *xr = x + r * (size_t)C;
        Real *yr = y + r * (size_t)C;
        for (int j = 0; j < col; j++) yr[j] = xr[j];
        for (int j = col + n; j < C; j++) yr[j] = xr[j];
    }
}
void k_rope_pass_backward(Real *gx, const Real *gy, size_t rows, int C, int col, int n) {
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const Real *gr = gy + r * (size_t)C;
        Real *gxr = gx + r * (size_t)C;
        for (int j = 0; j < col; j++) gxr[j] += gr[j];
        for (int j = col + n; j < C; j++) gxr[j] += gr[j];
    }
}
