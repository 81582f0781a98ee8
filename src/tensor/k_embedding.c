/* k_embedding.c: the embedding lookup and its scatter-add backward; the lookup fused with a
 * scale, positions and the choice of rows (ag_embedding_rows); then the gather and
 * scatter of rows by distinct indices that pack a batch's live rows (ag_gather_rows), all
 * four directions through one row-picking kernel, which the embedding's forward uses too.
 * Embedding backward adds into rows picked by ids, and two positions may pick the same row, so
 * threads split the columns (never the positions): each gradient element has one writer, and
 * adds in position order. Next: ../autograd/autograd.h. */
#include <string.h>

#include "kernels.h"

void k_embedding_forward(Real *y, const Real *weight, const int *ids, size_t N, int C) {
    k_pick_rows(y, weight, ids, N, C, 1); /* the same lookup (below) */
}
/* forward: y[i,:] = W[ids[i],:], so gW[v,:] += sum of gy[i,:] over positions i with ids[i] == v
 * (positions holding padding_idx send nothing: the padding row stays as initialised) */
void k_embedding_backward(Real *gweight, const int *ids, int padding_idx, const Real *gy, size_t N,
                          int C) {
    /* EXERCISE(embedding): add dL/dW into gweight for y[i,:] = W[ids[i],:].
     *   ids (N): the row each position read (an id may repeat); gy (N, C): dL/dy;
     *   gweight (V, C): accumulate (+=); a position whose id is padding_idx sends nothing
     * docs/backprop.md, section 2 "Why gradients accumulate" (a row read twice).
     * STUB: (void)gweight; (void)ids; (void)padding_idx; (void)gy; (void)N; (void)C; */
    /* threads split the columns in groups of 16 (a cache line of floats); each group walks the
     * positions in order, reading gy a line at a time instead of one element a row apart */
#pragma omp parallel for schedule(static) if (N * (size_t)C >= K_PAR_MIN)
    for (int cb = 0; cb < C; cb += 16) {
        int nc = C - cb < 16 ? C - cb : 16;
        for (size_t i = 0; i < N; i++) {
            if (ids[i] == padding_idx) continue;
            Real *gw = gweight + (size_t)ids[i] * C + cb;
            const Real *g = gy + i * C + cb;
            for (int c = 0; c < nc; c++) gw[c] += g[c];
        }
    }
    /* END EXERCISE */
}

/* ---- the model's input rows in one pass: s W[id] + P[position], for some rows only ----
 * What ag_embedding_rows computes for the rows a batch keeps (the live rows of nn's seq2seq):
 * the lookup, the scale and the positions, one pass and one parallel region where the chain
 * embedding, scale, add_bias, gather_rows took four. W*s then + P, rounded as the chain rounds
 * them (no contraction: -std=c11). Row i of the output is row r = rows[i] (i without rows) of
 * the (B*T) batch, at position r mod T of P (T, C), or no position when P is NULL. */
void k_embedding_rows_forward(Real *y, const Real *weight, const int *ids, const int *rows,
                              size_t n, int T, int C, Real s, const Real *P) {
#pragma omp parallel for schedule(static) if (n * (size_t)C >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        size_t r = rows ? (size_t)rows[i] : i;
        const Real *w = weight + (size_t)ids[r] * C;
        Real *yr = y + i * C;
        if (P) {
            const Real *p = P + (r % (size_t)T) * C;
            for (int c = 0; c < C; c++) yr[c] = w[c] * s + p[c];
        } else {
            for (int c = 0; c < C; c++) yr[c] = w[c] * s;
        }
    }
}
/* forward: y[i,:] = s W[ids[i],:] + P[.], so gW[v,:] += s gy[i,:] over positions i with ids[i]
 * == v, in position order (ids here are the kept rows' own, padding_idx's send nothing). Split
 * by columns as k_embedding_backward; s gy rounded first, as ag_scale's backward rounds it. */
void k_embedding_rows_backward(Real *gweight, const int *ids, int padding_idx, Real s,
                               const Real *gy, size_t n, int C) {
#pragma omp parallel for schedule(static) if (n * (size_t)C >= K_PAR_MIN)
    for (int cb = 0; cb < C; cb += 16) {
        int nc = C - cb < 16 ? C - cb : 16;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] == padding_idx) continue;
            Real *gw = gweight + (size_t)ids[i] * C + cb;
            const Real *g = gy + i * C + cb;
            for (int c = 0; c < nc; c++) gw[c] += s * g[c];
        }
    }
}

/* ---- rows picked by index: the packing of live rows (ag_gather_rows, ag_scatter_rows) ----
 * One kernel does the four directions: gather's forward and scatter's backward pick rows by
 * their list of row numbers, scatter's forward and gather's backward by the inverse map (-1:
 * no row). Each output row has one writer (whatever the map, so the embedding's ids may
 * repeat): threads split the rows. */
void k_pick_rows(Real *y, const Real *x, const int *from, size_t n, int C, int store) {
#pragma omp parallel for schedule(static) if (n * (size_t)C >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        Real *yr = y + i * C;
        if (from[i] < 0) {
            if (store) memset(yr, 0, (size_t)C * sizeof(Real));
            continue;
        }
        const Real *xr = x + (size_t)from[i] * C;
        if (store)
            memcpy(yr, xr, (size_t)C * sizeof(Real));
        else
            for (int c = 0; c < C; c++) yr[c] += xr[c];
    }
}
