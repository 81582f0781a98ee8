/* k_reduce.c: full sums and the broadcast that is their backward. A sum runs in index order on
 * one thread, accumulated in double, so it is the same for any thread count.
 * Next: k_softmax.c. */
#include <string.h>

#include "kernels.h"

size_t k_par_min = 16384;

double k_sum_forward(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}
/* forward: y = sum_i x_i, so every x_i receives the same g */
void k_sum_backward(Real *gx, Real g, size_t n) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) gx[i] += g;
}

/* columns per block of k_sum_rows: one thread sums a block over every row, reading each row's
 * block contiguously, its sums held in a few vector registers */
#define SUM_COL_BLOCK 64

void k_sum_rows(Real *g, const Real *x, size_t rows, int C) {
    int n_blocks = (C + SUM_COL_BLOCK - 1) / SUM_COL_BLOCK;
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= K_PAR_MIN && n_blocks > 1)
    for (int blk = 0; blk < n_blocks; blk++) {
        int c0 = blk * SUM_COL_BLOCK;
        if (C - c0 >= SUM_COL_BLOCK) { /* a full block: a fixed count the compiler unrolls */
            Real s[SUM_COL_BLOCK] = {0};
            for (size_t r = 0; r < rows; r++) {
                const Real *xr = x + r * C + c0;
                for (int c = 0; c < SUM_COL_BLOCK; c++) s[c] += xr[c];
            }
            for (int c = 0; c < SUM_COL_BLOCK; c++) g[c0 + c] += s[c];
            continue;
        }
        Real s[SUM_COL_BLOCK] = {0};
        int nc = C - c0;
        for (size_t r = 0; r < rows; r++) {
            const Real *xr = x + r * C + c0;
            for (int c = 0; c < nc; c++) s[c] += xr[c];
        }
        for (int c = 0; c < nc; c++) g[c0 + c] += s[c];
    }
}

void k_zero(Real *x, size_t n) {
    enum { CHUNK = 4096 }; /* one memset per chunk */
    size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t c = 0; c < chunks; c++) {
        size_t i0 = c * CHUNK, len = n - i0 < CHUNK ? n - i0 : CHUNK;
        memset(x + i0, 0, len * sizeof(Real));
    }
}

void k_accumulate(Real *gx, const Real *gy, size_t n) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) gx[i] += gy[i];
}
