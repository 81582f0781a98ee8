/* openblas_ref.c: the OpenBLAS call bench_gemm.c compares k_gemm with, in its own file so that
 * only the bench sees cblas.h and links -lopenblas (the Makefile builds it when OpenBLAS is
 * installed). Same contract as k_gemm: C (M,N) = op(A) op(B), row-major. */
#include <cblas.h>

#include "attograd.h"

void ref_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
              int threads);

void ref_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
              int threads) {
    openblas_set_num_threads(threads);
#ifdef AG_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0, A, ta ? M : K, B, tb ? K : N, 0.0, C, N);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, C, N);
#endif
}
