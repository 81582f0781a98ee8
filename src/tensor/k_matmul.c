/* k_matmul.c: the matmul and A @ B^T kernels, forward and backward, each one or a few calls of
 * k_gemm (k_gemm.c, which reads transposed operands in place), and the transpose and head
 * split/merge moves. Next: k_reduce.c. */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels.h"

/* y (BATCH,M,N) = a (BATCH,M,K) times b read as (K,N), stored (K,N) or, when tb, (N,K);
 * a 2-D b is shared by the whole batch: one GEMM over all BATCH*M rows */
static void batched_forward(Real *y, const Real *a, const Real *b, int BATCH, int M, int K, int N,
                            int b_batched, int tb) {
    if (!b_batched) {
        k_gemm(0, tb, BATCH * M, N, K, a, b, y, 0);
        return;
    }
    for (int p = 0; p < BATCH; p++)
        k_gemm(0, tb, M, N, K, a + (size_t)p * M * K, b + (size_t)p * K * N, y + (size_t)p * M * N,
               0);
}

void k_matmul_forward(Real *y, const Real *a, const Real *b, int BATCH, int M, int K, int N,
                      int b_batched) {
    batched_forward(y, a, b, BATCH, M, K, N, b_batched, 0);
}
/* forward: y = a b (per batch). So ga = gy b^T (M,N)x(N,K) and gb = a^T gy (K,M)x(M,N);
 * a shared b sums its gradient over the batch, which is one GEMM with BATCH*M as inner dim. */
void k_matmul_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy, int BATCH,
                       int M, int K, int N, int b_batched) {
    /* EXERCISE(matmul): add dL/da into ga and dL/db into gb (either may be NULL).
     *   a, ga (BATCH, M, K); gy (BATCH, M, N); b, gb (BATCH, K, N) when b_batched, else (K, N)
     *   shared by every batch element (its gradient sums over them); accumulate (+=)
     * Plain loops are fine; k_gemm (kernels.h) is the fast way. Derived in docs/backprop.md,
     * section 3 "Linear" (y = x W^T there; here y = a b).
     * STUB: (void)ga; (void)gb; (void)a; (void)b; (void)gy; (void)BATCH; (void)M; (void)K;
     * STUB: (void)N; (void)b_batched; */
    if (!b_batched) {
        if (ga) k_gemm(0, 1, BATCH * M, K, N, gy, b, ga, 1);
        if (gb) k_gemm(1, 0, K, N, BATCH * M, a, gy, gb, 1);
        return;
    }
    for (int p = 0; p < BATCH; p++) {
        const Real *ap = a + (size_t)p * M * K, *bp = b + (size_t)p * K * N;
        const Real *gyp = gy + (size_t)p * M * N;
        if (ga) k_gemm(0, 1, M, K, N, gyp, bp, ga + (size_t)p * M * K, 1);
        if (gb) k_gemm(1, 0, K, N, M, ap, gyp, gb + (size_t)p * K * N, 1);
    }
    /* END EXERCISE */
}

void k_matmul_bt_forward(Real *y, const Real *a, const Real *b, int BATCH, int M, int K, int N,
                         int b_batched) {
    batched_forward(y, a, b, BATCH, M, K, N, b_batched, 1);
}
/* forward: y = a b^T with b (N,K). So ga = gy b (M,N)x(N,K) and gb = gy^T a (N,M)x(M,K). */
void k_matmul_bt_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy,
                          int BATCH, int M, int K, int N, int b_batched) {
    /* EXERCISE(matmul): the same for y = a b^T: b, gb (BATCH, N, K), or (N, K) when shared.
     * STUB: (void)ga; (void)gb; (void)a; (void)b; (void)gy; (void)BATCH; (void)M; (void)K;
     * STUB: (void)N; (void)b_batched; */
    if (!b_batched) {
        if (ga) k_gemm(0, 0, BATCH * M, K, N, gy, b, ga, 1);
        if (gb) k_gemm(1, 0, N, K, BATCH * M, gy, a, gb, 1);
        return;
    }
    for (int p = 0; p < BATCH; p++) {
        const Real *ap = a + (size_t)p * M * K, *bp = b + (size_t)p * N * K;
        const Real *gyp = gy + (size_t)p * M * N;
        if (ga) k_gemm(0, 0, M, K, N, gyp, bp, ga + (size_t)p * M * K, 1);
        if (gb) k_gemm(1, 0, N, K, M, gyp, ap, gb + (size_t)p * N * K, 1);
    }
    /* END EXERCISE */
}

void k_linear_forward(Real *y, const Real *x, const Real *W, const Real *bias, int rows, int in,
                      int out) {
    if (bias)
        k_gemm_bias(0, 1, rows, out, in, x, W, y, bias);
    else
        k_gemm(0, 1, rows, out, in, x, W, y, 0);
}
/* Thread t of T's share of a Linear's backward: gx = gy W (rows,out)x(out,in) (stored when
 * store, else added), gW += gy^T x (out,rows)x(rows,in), gbias += the column sums of gy. The
 * three write different arrays and only read gy, W and x: a thread done with its share of one
 * starts on the next, with no barrier in between. */
static void linear_backward_team(int t, int T, Real *gx, Real *gW, Real *gbias, const Real *x,
                                 const Real *W, const Real *gy, int rows, int in, int out,
                                 int store) {
    /* EXERCISE(linear): y = x W^T + bias: dL/dx into gx, dL/dW into gW, dL/dbias into gbias
     * (any may be NULL), thread t's share of T (k_gemm_team, k_gemm_sum_team and
     * k_sum_rows_team split the work by t; with T = 1, t = 0 a plain loop over everything is
     * right too).
     *   x, gx (rows, in); W, gW (out, in); gbias (out); gy (rows, out)
     *   store != 0: gx is a fresh buffer to write (=); otherwise, and always for gW and
     *   gbias, accumulate (+=)
     * Derived in docs/backprop.md, section 3 "Linear".
     * STUB: if (store && gx && t == 0)
     * STUB:     for (size_t i = 0; i < (size_t)rows * in; i++) gx[i] = 0;
     * STUB: (void)T; (void)gW; (void)gbias; (void)x; (void)W; (void)gy; (void)out; */
    if (gx) k_gemm_team(t, T, 0, 0, 0, rows, in, out, gy, W, gx, !store);
    if (gW) /* gbias summed as gy is packed for gW (kernels.h) */
        k_gemm_sum_team(t, T, 1, 0, out, in, rows, gy, x, gW, 1, gbias);
    else if (gbias)
        k_sum_rows_team(t, T, gbias, gy, (size_t)rows, out);
    /* END EXERCISE */
}

static size_t linear_backward_work(const Real *gx, const Real *gW, const Real *gbias, int rows,
                                   int in, int out) {
    return (size_t)rows * out * ((gx ? in : 0) + (gW ? in : 0) + (gbias ? 1 : 0));
}

/* forward: y = x W^T + bias. So gx = gy W, gW = gy^T x and gbias = the column sums of gy: one
 * parallel region for the three (instead of three regions that each wait for the slower
 * thread). */
void k_linear_backward(Real *gx, Real *gW, Real *gbias, const Real *x, const Real *W,
                       const Real *gy, int rows, int in, int out, int store) {
#pragma omp parallel if (linear_backward_work(gx, gW, gbias, rows, in, out) / 64 >= K_PAR_MIN)
    {
        int T = 1, t = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        linear_backward_team(t, T, gx, gW, gbias, x, W, gy, rows, in, out, store);
    }
    /* END EXERCISE */
}

void k_linear_relu_forward(Real *y, const Real *x, const Real *W, const Real *bias, int rows,
                           int in, int out) {
    k_gemm_relu(0, 1, rows, out, in, x, W, y, bias);
}
/* forward: y = max(x W^T + b, 0). So the gradient at the product is g = gy where y > 0 and 0
 * elsewhere (as k_relu_backward), and then gx, gW, gbias as k_linear_backward with g. g is
 * written over gy: the op's output gradient is read by nothing after its own backward. The
 * mask and the products run in one parallel region, a barrier between them (every product
 * reads all of g). */
void k_linear_relu_backward(Real *gx, Real *gW, Real *gbias, const Real *x, const Real *W,
                            const Real *y, Real *gy, int rows, int in, int out, int store) {
    size_t n = (size_t)rows * out;
    int par =
        linear_backward_work(gx, gW, gbias, rows, in, out) / 64 >= K_PAR_MIN || n >= K_PAR_MIN;
#pragma omp parallel if (par)
    {
        int T = 1, t = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) gy[i] = y[i] > 0 ? gy[i] : 0;
        linear_backward_team(t, T, gx, gW, gbias, x, W, gy, rows, in, out, store);
    }
}

void k_transpose_forward(Real *y, const Real *x, int BATCH, int M, int N) {
    size_t n = (size_t)BATCH * M * N;
#pragma omp parallel for collapse(2) schedule(static) if (n >= K_PAR_MIN)
    for (int p = 0; p < BATCH; p++)
        for (int j = 0; j < N; j++)
            for (int i = 0; i < M; i++)
                y[((size_t)p * N + j) * M + i] = x[((size_t)p * M + i) * N + j];
}
/* forward: y[p,j,i] = x[p,i,j], so gx[p,i,j] += gy[p,j,i] */
void k_transpose_backward(Real *gx, const Real *gy, int BATCH, int M, int N) {
    size_t n = (size_t)BATCH * M * N;
#pragma omp parallel for collapse(2) schedule(static) if (n >= K_PAR_MIN)
    for (int p = 0; p < BATCH; p++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                gx[((size_t)p * M + i) * N + j] += gy[((size_t)p * N + j) * M + i];
}

/* The one permutation behind split and merge: (B,T,NH,HS) <-> (B,NH,T,HS).
 * to_heads = 1 moves (B,T,C) rows into (B,NH,T,HS); 0 moves back. acc adds instead of copying. */
static void permute_heads(Real *dst, const Real *src, int B, int T, int NH, int HS, int to_heads,
                          int acc) {
    size_t n = (size_t)B * T * NH * HS;
#pragma omp parallel for collapse(3) schedule(static) if (n >= K_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t bt = (((size_t)b * T + t) * NH + h) * HS; /* in (B,T,NH,HS) */
                size_t bh = (((size_t)b * NH + h) * T + t) * HS; /* in (B,NH,T,HS) */
                Real *d = dst + (to_heads ? bh : bt);
                const Real *s = src + (to_heads ? bt : bh);
                if (acc)
                    for (int i = 0; i < HS; i++) d[i] += s[i];
                else
                    memcpy(d, s, (size_t)HS * sizeof(Real));
            }
}

void k_split_heads_forward(Real *y, const Real *x, int B, int T, int NH, int HS) {
    permute_heads(y, x, B, T, NH, HS, 1, 0);
}
/* forward: y[b,h,t,:] = x[b,t,h*HS:(h+1)*HS], a pure move: gradients move back the same way */
void k_split_heads_backward(Real *gx, const Real *gy, int B, int T, int NH, int HS) {
    permute_heads(gx, gy, B, T, NH, HS, 0, 1);
}

void k_merge_heads_forward(Real *y, const Real *x, int B, int T, int NH, int HS) {
    permute_heads(y, x, B, T, NH, HS, 0, 0);
}
/* forward: y[b,t,h*HS:(h+1)*HS] = x[b,h,t,:]; gradients move back into (B,NH,T,HS) */
void k_merge_heads_backward(Real *gx, const Real *gy, int B, int T, int NH, int HS) {
    permute_heads(gx, gy, B, T, NH, HS, 1, 1);
}
