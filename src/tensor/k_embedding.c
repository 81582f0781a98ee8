/* k_embedding.c: the embedding lookup and its scatter-add backward; then the gather and
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
