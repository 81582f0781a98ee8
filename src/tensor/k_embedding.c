/* k_embedding.c: the embedding lookup and its scatter-add backward; then the gather and
 * scatter of rows by distinct indices that pack a batch's live rows (ag_gather_rows).
 * Embedding backward adds into rows picked by ids, and two positions may pick the same row, so
 * threads split the columns (never the positions): each gradient element has one writer, and
 * adds in position order. Next: ../autograd/autograd.h. */
#include <string.h>

#include "kernels.h"

void k_embedding_forward(Real *y, const Real *weight, const int *ids, size_t N, int C) {
#pragma omp parallel for schedule(static) if (N * (size_t)C >= K_PAR_MIN)
    for (size_t i = 0; i < N; i++)
        memcpy(y + i * C, weight + (size_t)ids[i] * C, (size_t)C * sizeof(Real));
}
/* forward: y[i,:] = W[ids[i],:], so gW[v,:] += sum of gy[i,:] over positions i with ids[i] == v
 * (positions holding padding_idx send nothing: the padding row stays as initialised) */
void k_embedding_backward(Real *gweight, const int *ids, int padding_idx, const Real *gy, size_t N,
                          int C) {
#pragma omp parallel for schedule(static) if (N * (size_t)C >= K_PAR_MIN)
    for (int c = 0; c < C; c++)
        for (size_t i = 0; i < N; i++)
            if (ids[i] != padding_idx) gweight[(size_t)ids[i] * C + c] += gy[i * C + c];
}

/* ---- rows picked by index: the packing of live rows (ag_gather_rows, ag_scatter_rows) ----
 * The row numbers are distinct, so every output row and every gradient row has one writer:
 * threads split the rows. where (R) is the inverse map: where[r] = i if rows[i] == r, else -1. */
void k_gather_rows_forward(Real *y, const Real *x, const int *rows, size_t n, int C) {
    k_embedding_forward(y, x, rows, n, C); /* the same lookup: x is the table */
}
/* forward: y[i,:] = x[rows[i],:], so gx[r,:] += gy[where[r],:] for a picked row r and nothing
 * for the others (store: gx[r,:] = gy[where[r],:], or 0 for the others) */
void k_gather_rows_backward(Real *gx, const int *where, const Real *gy, size_t R, int C,
                            int store) {
#pragma omp parallel for schedule(static) if (R * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        Real *g = gx + r * C;
        if (where[r] < 0) {
            if (store) memset(g, 0, (size_t)C * sizeof(Real));
            continue;
        }
        const Real *s = gy + (size_t)where[r] * C;
        if (store)
            memcpy(g, s, (size_t)C * sizeof(Real));
        else
            for (int c = 0; c < C; c++) g[c] += s[c];
    }
}
/* y[r,:] = x[where[r],:], or 0 for a row no x row goes to: each row of y written once */
void k_scatter_rows_forward(Real *y, const Real *x, const int *where, size_t R, int C) {
#pragma omp parallel for schedule(static) if (R * (size_t)C >= K_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        if (where[r] < 0)
            memset(y + r * C, 0, (size_t)C * sizeof(Real));
        else
            memcpy(y + r * C, x + (size_t)where[r] * C, (size_t)C * sizeof(Real));
    }
}
/* forward: y[rows[i],:] = x[i,:] (other rows 0), so gx[i,:] += gy[rows[i],:]
 * (store: gx[i,:] = gy[rows[i],:], every row of gx written) */
void k_scatter_rows_backward(Real *gx, const int *rows, const Real *gy, size_t n, int C,
                             int store) {
#pragma omp parallel for schedule(static) if (n * (size_t)C >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        Real *g = gx + i * C;
        const Real *s = gy + (size_t)rows[i] * C;
        if (store)
            memcpy(g, s, (size_t)C * sizeof(Real));
        else
            for (int c = 0; c < C; c++) g[c] += s[c];
    }
}
