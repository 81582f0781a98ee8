/* k_reduce.c: full sums and the broadcast that is their backward, sums over rows (a bias's
 * gradient), zeroing and scaling gradients. Every sum runs in one fixed order whatever the
 * thread count, so it gives the same bits for any OMP_NUM_THREADS.
 * Next: k_softmax.c. */
#include <string.h>

#include "k_lanes.h"
#include "kernels.h"

/* A full sum in one fixed order: x cut into blocks of K_SUM_BLOCK elements, each block summed in
 * double in k_lanes.h's K_LANES lanes, then the blocks' sums added in block order. Threads share
 * out whole blocks and write each block's sum to its own slot (the calling thread's scratch), so
 * a block gives the same sum whichever thread computes it. A single running sum in index order
 * waited on each add: 0.3 ms, all of it serial, for the (32, 64, 256) loss of make bench's mha. */
#define K_SUM_BLOCK 4096

double k_sum_forward(const Real *x, size_t n) {
    size_t nb = (n + K_SUM_BLOCK - 1) / K_SUM_BLOCK;
    double *part = (double *)k_thread_scratch(
        K_SCRATCH_REDUCE, (nb * sizeof(double) + sizeof(Real) - 1) / sizeof(Real));
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t b = 0; b < nb; b++) {
        size_t i0 = b * K_SUM_BLOCK, len = n - i0 < K_SUM_BLOCK ? n - i0 : K_SUM_BLOCK;
        part[b] = k_row_sum_d(x + i0, (int)len);
    }
    double s = 0; /* the blocks' sums in order */
    for (size_t b = 0; b < nb; b++) s += part[b];
    return s;
}
/* forward: y = sum_i x_i, so every x_i receives the same g (store: gx is set to it) */
void k_sum_backward(Real *gx, Real g, size_t n, int store) {
    if (store) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
        for (size_t i = 0; i < n; i++) gx[i] = g;
    } else {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
        for (size_t i = 0; i < n; i++) gx[i] += g;
    }
}

/* k_sum_rows: each thread owns a contiguous range of columns (cut at multiples of 16) and walks
 * the rows in order, adding each row's part of its range into sums kept in L1 (SUM_CHUNK
 * columns at a time). Every column is summed in row order from 0 whoever owns it, so the split
 * (which depends on the thread count) never changes a bit. Reading row by row streams memory;
 * the earlier column blocks of 64 each walked all rows with a stride and were 1.5-1.9 times
 * slower on a (2048, 768) gradient that is not in cache. */
#define SUM_CHUNK 512

void k_sum_rows_team(int t, int T, Real *g, const Real *x, size_t rows, int C) {
    int units = (C + 15) / 16; /* groups of 16 columns, shared out evenly */
    int c0 = (int)((long)units * t / T) * 16, c1 = (int)((long)units * (t + 1) / T) * 16;
    if (c1 > C) c1 = C;
    for (int cb = c0; cb < c1; cb += SUM_CHUNK) {
        int nc = c1 - cb < SUM_CHUNK ? c1 - cb : SUM_CHUNK;
        Real s[SUM_CHUNK];
        for (int c = 0; c < nc; c++) s[c] = 0;
        for (size_t r = 0; r < rows; r++) {
            const Real *xr = x + r * C + cb;
            for (int c = 0; c < nc; c++) s[c] += xr[c];
        }
        for (int c = 0; c < nc; c++) g[cb + c] += s[c];
    }
}

void k_sum_rows(Real *g, const Real *x, size_t rows, int C) {
#pragma omp parallel if (rows * (size_t)C >= K_PAR_MIN && C >= 32)
    {
        int t, T;
        k_team(&t, &T);
        k_sum_rows_team(t, T, g, x, rows, C);
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

/* One parallel region for every gradient (a region per parameter was ~30 a step): thread t of
 * T scales its k_team_slice of each, with no barrier between them; s = 0 writes zeros (memset:
 * a NaN or infinite gradient is cleared too). */
static void scale_grads(Tensor *const *ts, int count, Real s) {
    size_t total = 0;
    for (int i = 0; i < count; i++)
        if (ts[i]->grad) total += ts[i]->size;
    (void)total; /* read only by the OpenMP clause: unused without OpenMP */
#pragma omp parallel if (total >= K_PAR_MIN)
    {
        int t, T;
        k_team(&t, &T);
        for (int i = 0; i < count; i++) {
            if (!ts[i]->grad) continue;
            size_t lo, hi;
            k_team_slice(i, ts[i]->size, t, T, &lo, &hi);
            Real *g = ts[i]->grad;
            if (s == 0 && lo < hi)
                memset(g + lo, 0, (hi - lo) * sizeof(Real));
            else if (s != 0)
                for (size_t k = lo; k < hi; k++) g[k] *= s;
        }
    }
}

void k_zero_grads(Tensor *const *ts, int count) { scale_grads(ts, count, 0); }

void k_scale_grads(Tensor *const *ts, int count, Real s) {
    if (s != 0) scale_grads(ts, count, s);
}

void k_accumulate(Real *gx, const Real *gy, size_t n) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) gx[i] += gy[i];
}
