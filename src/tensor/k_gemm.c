/* k_gemm.c: the one matrix product every matmul runs on, C (M,N) = op(A) op(B) (+ C), as a packed,
 * cache-blocked GEMM with a register-tiled micro-kernel (the design of Goto and van de Geijn,
 * "Anatomy of high-performance matrix multiplication", 2008, and of BLIS).
 *
 * Three levels, from the inside out:
 *   micro-kernel  an MR x NR tile of C held in vector registers; per step k it loads NR values of
 *                 op(B), broadcasts MR values of op(A) and does MR * NR / VLEN fused multiply-adds.
 *   packing       op(B) is copied into panels of NR columns, k-major ("for k: NR values"), and
 *                 op(A) into strips of MR rows ("for k: MR values"), zero-padded to full panels
 *                 and strips. Packed data is contiguous, so the micro-kernel streams it. The
 *                 transposed forms are read in place while packing: no transpose is ever
 *                 stored. A row-major A (not ta) is already contiguous in k, so its full strips
 *                 are read where they are (MR short runs) and only a last, partial one is packed.
 *                 A block is packed 16 stored rows at a time, each row's piece dealt out to all
 *                 its strips or panels (reads along rows, writes in runs); op(B) stored
 *                 transposed (x W^T) is transposed VLEN x VLEN in registers (AVX-512, AVX2).
 *                 In a training step the packing is mostly waiting for memory: the weight
 *                 gradient gy^T x packs activations last touched in the forward. Packing gy^T
 *                 also sums its rows, a Linear's bias gradient, when asked (k_gemm_sum_team).
 *   blocking      K is cut into blocks of KC, C into blocks of MC rows and NC columns, so that a
 *                 packed block of op(B) (KC x NC) stays in L2 and a strip of op(A) (MR x KC) in
 *                 L1 while the kernel sweeps it across the B block.
 * Scratch: each thread owns one buffer of (MC + NC) * KC values (MC*KC for A, KC*NC for B),
 * from k_thread_scratch (k_scratch.c): allocated on its first call and kept for its life (freed
 * when the thread exits), so a training loop mallocs nothing here after its first step.
 *
 * Determinism. Every element of C is computed the same way whoever computes it: its K values are
 * summed block by block (the KC boundaries are fixed: 0, KC, 2KC, ...), inside a block by one FMA
 * chain in k order started from 0, and the block's sum is then added to C (or stored, for the
 * first block when not accumulating). Threads only split C into disjoint rectangles of whole
 * tiles; they never split K. So the result is bit-identical for any thread count, even though the
 * split itself depends on the thread count. Edge tiles run the same kernel on zero-padded data
 * into a local tile, then add it to C element by element: the same two roundings.
 *
 * The vector family is k_simd.h's, chosen at compile time: AVX-512 (16 floats or 8 doubles a
 * vector), AVX2 + FMA (8 or 4), or portable (the compiler's generic vectors of 16 bytes, 4 or 2;
 * fused where the target fuses; forced with -DAG_SIMD_PORTABLE). All three do the same
 * arithmetic per element, so the portable one gives the vector kernels' bits wherever the
 * target fuses (arm64).
 * make BLAS=openblas instead calls cblas_?gemm (to compare; not thread-deterministic).
 * Read next: k_matmul.c (the matmul kernels built on this one). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_simd.h"
#include "kernels.h"

#ifdef AG_BLAS_OPENBLAS
#include <cblas.h>

void k_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
            int accumulate) {
    if (M <= 0 || N <= 0) return;
#ifdef AG_REAL_DOUBLE
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0, A, ta ? M : K, B, tb ? K : N, accumulate ? 1.0 : 0.0, C, N);
#else
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, 1.0f, A, ta ? M : K, B, tb ? K : N, accumulate ? 1.0f : 0.0f, C, N);
#endif
}

void k_gemm_bias(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias) {
    for (int i = 0; i < M; i++) memcpy(C + (size_t)i * N, bias, (size_t)N * sizeof(Real));
    k_gemm(ta, tb, M, N, K, A, B, C, 1);
}

void k_gemm_relu(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias) {
    if (bias)
        k_gemm_bias(ta, tb, M, N, K, A, B, C, bias);
    else
        k_gemm(ta, tb, M, N, K, A, B, C, 0);
    for (size_t i = 0; i < (size_t)M * N; i++) C[i] = C[i] > 0 ? C[i] : 0;
}

void k_gemm_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                 const Real *B, Real *C, int accumulate) {
    (void)T;
    if (t == job % T) k_gemm(ta, tb, M, N, K, A, B, C, accumulate);
}

void k_gemm_sum_team(int t, int T, int job, int tb, int M, int N, int K, const Real *A,
                     const Real *B, Real *C, int accumulate, Real *sum) {
    if (t != job % T) return;
    k_gemm(1, tb, M, N, K, A, B, C, accumulate);
    if (sum && M > 0) k_sum_rows_team(0, 1, sum, A, (size_t)(K > 0 ? K : 0), M);
}

#else /* our own GEMM */

#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- the tile of the build's vector family (k_simd.h: Vec holds VLEN Reals) ---- */
#if defined(K_SIMD_AVX512)
/* 8 x 2 vectors: 16 accumulators of the 32 registers, 2 for op(B), 1 for a broadcast of op(A).
 * Measured on Zen 4: 6 x 2 and 12 x 2 as fast, 14 x 2 and 4 x 4 slower. */
#define MR 8
#define NV 2
#elif defined(K_SIMD_AVX2)
/* 6 x 2 vectors: 12 accumulators of the 16 registers */
#define MR 6
#define NV 2
#elif defined(K_SIMD_GENERIC)
/* 6 x 2 vectors of 16 bytes: 12 accumulators, 2 for op(B), 1 broadcast and 1 product (x86-64
 * has no FMA: a multiply, then an add) in SSE2's 16 registers */
#define MR 6
#define NV 2
#else
#define MR 4
#define NV 8
#endif

#ifdef GEMM_MR /* tuning: -DGEMM_MR=.. -DGEMM_NV=.. */
#undef MR
#define MR GEMM_MR
#endif
#ifdef GEMM_NV
#undef NV
#define NV GEMM_NV
#endif
#define NR (NV * VLEN)

/* ---- blocking: KC fixes the summation order (see the top); MC and NC only the speed ----
 * A strip of A (MR x KC, 8 KiB of floats) stays in L1 and the packed B block (KC x NC, 512 KiB
 * of floats) in L2. On the shapes of bench/ anything from KC 128..384, NC 256..1024 and MC
 * 96..384 is within a few percent of these. */
#ifndef GEMM_KC
#define GEMM_KC 256
#endif
#ifndef GEMM_MC
#define GEMM_MC (MR * 24)
#endif
#ifndef GEMM_NC
#define GEMM_NC (NR * 16)
#endif
#define KC GEMM_KC
#define MC GEMM_MC
#define NC GEMM_NC
_Static_assert(MC % MR == 0 && NC % NR == 0, "k_gemm: MC and NC must be multiples of the tile");

/* ---- packing ----
 * Both pack a whole block at once, PACK_KB rows of the stored matrix at a time: the pieces of
 * those rows (each contiguous in memory) are dealt out to the strips or panels they belong to,
 * so that reads go along rows and each strip or panel gets PACK_KB * MR (or NR) values written
 * one after the other. (One row at a time, the writes of a row went to strips 8 KiB apart, all
 * in one set of L1, and stalled; one strip at a time, as before, read 8 or 32 values of each
 * row and came back for the next ones later.) */
#ifndef GEMM_PACK_KB
#define GEMM_PACK_KB 16
#endif
#define PACK_KB GEMM_PACK_KB

/* Deals kn rows of w values (src, row stride ld) out to stripes of width W (MR or NR): stripe
 * s takes values s*W .. s*W + W - 1 of each row (0 past the w-th), its kn rows one after the
 * other from d + s*W*kc on. */
static inline void deal_rows(Real *d, const Real *src, size_t ld, int kn, int w, int W, int kc) {
    int s = 0;
    for (; s + W <= w; s += W, d += (size_t)W * kc) {
        const Real *a = src + s;
        for (int k = 0; k < kn; k++, a += ld)
            memcpy(d + (size_t)k * W, a, (size_t)W * sizeof(Real));
    }
    if (s < w) {
        const Real *a = src + s;
        for (int k = 0; k < kn; k++, a += ld) {
            for (int c = 0; c < w - s; c++) d[(size_t)k * W + c] = a[c];
            for (int c = w - s; c < W; c++) d[(size_t)k * W + c] = 0;
        }
    }
}

/* s[0..w) += the kn rows of w values at src (row stride ld), each s[i] adding its rows one by
 * one in row order (a vector lane per i: the same bits as a scalar loop). Four vectors at a
 * time, so that four chains of adds run side by side. */
static void add_rows(Real *restrict s, const Real *restrict src, size_t ld, int kn, int w) {
    int i = 0;
    for (; i + 4 * VLEN <= w; i += 4 * VLEN) {
        Vec v0 = vload(s + i), v1 = vload(s + i + VLEN), v2 = vload(s + i + 2 * VLEN),
            v3 = vload(s + i + 3 * VLEN);
        const Real *a = src + i;
        for (int k = 0; k < kn; k++, a += ld) {
            v0 = vadd(v0, vload(a));
            v1 = vadd(v1, vload(a + VLEN));
            v2 = vadd(v2, vload(a + 2 * VLEN));
            v3 = vadd(v3, vload(a + 3 * VLEN));
        }
        vstore(s + i, v0);
        vstore(s + i + VLEN, v1);
        vstore(s + i + 2 * VLEN, v2);
        vstore(s + i + 3 * VLEN, v3);
    }
    for (; i + VLEN <= w; i += VLEN) {
        Vec v = vload(s + i);
        const Real *a = src + i;
        for (int k = 0; k < kn; k++, a += ld) v = vadd(v, vload(a));
        vstore(s + i, v);
    }
    for (; i < w; i++) {
        Real v = s[i];
        for (int k = 0; k < kn; k++) v += src[(size_t)k * ld + i];
        s[i] = v;
    }
}

/* op(A)[i,k] = A[i*K + k], or A[k*M + i] when ta. The strips of rows [i0, i0+mc) of op(A), k in
 * [k0, k0+kc): strip s (rows i0 + s*MR ..) at d + s*MR*kc, k-major: for each k the MR values
 * of its rows (0 past the last row). Not ta, mc < MR: one strip (the caller packs only a last,
 * partial strip: full ones are read in place). When ta and sum is not NULL, also sum[r] += the
 * kc values of row i0 + r, in k order, from the stored rows just dealt out (still in L1). */
static void pack_a(Real *d, const Real *A, int ta, int M, int K, int i0, int mc, int k0, int kc,
                   Real *sum) {
    if (ta) {
        const Real *a = A + (size_t)k0 * M + i0;
        for (int kb = 0; kb < kc; kb += PACK_KB, a += (size_t)PACK_KB * M) {
            int kn = kc - kb < PACK_KB ? kc - kb : PACK_KB;
            deal_rows(d + (size_t)kb * MR, a, (size_t)M, kn, mc, MR, kc);
            if (sum) add_rows(sum, a, (size_t)M, kn, mc);
        }
        return;
    }
    for (int k = 0; k < kc; k++, d += MR) {
        const Real *a = A + (size_t)i0 * K + k0 + k;
        for (int r = 0; r < mc; r++) d[r] = a[(size_t)r * K];
        for (int r = mc; r < MR; r++) d[r] = 0;
    }
}

/* op(B)[k,j] = B[k*N + j], or B[j*K + k] when tb. The panels of columns [j0, j0+nc) of op(B),
 * k in [k0, k0+kc): panel p (columns j0 + p*NR ..) at d + p*NR*kc, k-major: for each k the NR
 * values of its columns (0 past the last). */
static void pack_b(Real *d, const Real *B, int tb, int N, int K, int k0, int kc, int j0, int nc) {
    if (!tb) {
        const Real *b = B + (size_t)k0 * N + j0;
        for (int kb = 0; kb < kc; kb += PACK_KB, b += (size_t)PACK_KB * N) {
            int kn = kc - kb < PACK_KB ? kc - kb : PACK_KB;
            deal_rows(d + (size_t)kb * NR, b, (size_t)N, kn, nc, NR, kc);
        }
        return;
    }
    /* B stored (N,K): column j of op(B) is row j of B. A transpose: of VLEN x VLEN tiles in
     * registers where the panel is full, else done 8 k at a time so that the part of the panel
     * being written (8 x NR) stays in L1. */
    for (int jr = 0; jr < nc; jr += NR, d += (size_t)NR * kc) {
        int cols = nc - jr < NR ? nc - jr : NR, kb = 0;
        const Real *b = B + (size_t)(j0 + jr) * K + k0;
#ifdef K_HAVE_TRANSPOSE
        if (cols == NR)
            for (; kb + VLEN <= kc; kb += VLEN)
                for (int v = 0; v < NV; v++)
                    transpose_tile(d + (size_t)kb * NR + v * VLEN, NR,
                                   b + (size_t)v * VLEN * K + kb, (size_t)K);
#endif
        for (; kb < kc; kb += 8) {
            int kn = kc - kb < 8 ? kc - kb : 8;
            Real *dk = d + (size_t)kb * NR;
            for (int c = 0; c < cols; c++) {
                const Real *bc = b + (size_t)c * K + kb;
                for (int k = 0; k < kn; k++) dk[k * NR + c] = bc[k];
            }
            for (int c = cols; c < NR; c++)
                for (int k = 0; k < kn; k++) dk[k * NR + c] = 0;
        }
    }
}

/* ---- the micro-kernel ----
 * Sums the kc products of each of the MR x NR elements of a tile: a[i*rsa + k*csa] for row i at
 * step k (a packed strip: rsa 1, csa MR; rows of A read in place: rsa K, csa 1) times b, a
 * packed panel (kc x NR). Then C[0..mr, 0..nr) (row stride ldc) = that sum, plus C when add,
 * else plus bias[0..nr) when bias is not NULL (the same bits as C = bias, then C += sum); and
 * when relu (the last block of K), max(that, 0): x > 0 ? x : 0, as k_relu_forward (the vector
 * max returns its second operand, 0, for NaN too). */
static inline __attribute__((always_inline)) void
micro_kernel(int kc, const Real *restrict a, size_t rsa, size_t csa, const Real *restrict b,
             Real *c, size_t ldc, int mr, int nr, int add, const Real *bias, int relu) {
    Vec acc[MR][NV];
    UNROLL for (int i = 0; i < MR; i++) UNROLL for (int v = 0; v < NV; v++) acc[i][v] = vzero();
    /* ask for the C tile now, so that it has arrived when the sums are added to it (C is often
     * a gradient last touched long ago: +5-10% inside a training step) */
    UNROLL for (int i = 0; i < MR; i++) {
        PREFETCH_W(c + (size_t)i * ldc);
        PREFETCH_W(c + (size_t)i * ldc + NR - 1);
    }
    for (int k = 0; k < kc; k++, a += csa, b += NR) {
        Vec bv[NV];
        UNROLL for (int v = 0; v < NV; v++) bv[v] = vload(b + v * VLEN);
        UNROLL for (int i = 0; i < MR; i++) {
            Vec ai = vset1(a[i * rsa]);
            UNROLL for (int v = 0; v < NV; v++) acc[i][v] = vfma(ai, bv[v], acc[i][v]);
        }
    }
    if (mr == MR && nr == NR) {
        UNROLL for (int i = 0; i < MR; i++) UNROLL for (int v = 0; v < NV; v++) {
            Real *p = c + (size_t)i * ldc + v * VLEN;
            Vec r = add    ? vadd(vload(p), acc[i][v])
                    : bias ? vadd(vload(bias + v * VLEN), acc[i][v])
                           : acc[i][v];
            vstore(p, relu ? vmax0(r) : r);
        }
        return;
    }
    Real tile[MR * NR];
    UNROLL for (int i = 0; i < MR; i++) UNROLL for (int v = 0; v < NV; v++)
        vstore(tile + i * NR + v * VLEN, acc[i][v]);
    for (int i = 0; i < mr; i++) {
        Real *p = c + (size_t)i * ldc;
        for (int j = 0; j < nr; j++) {
            Real r = add    ? p[j] + tile[i * NR + j]
                     : bias ? bias[j] + tile[i * NR + j]
                            : tile[i * NR + j];
            p[j] = relu && !(r > 0) ? 0 : r;
        }
    }
}

/* the two forms the blocked loop calls: a packed strip, or MR full rows of A read in place */
static void micro_packed(int kc, const Real *a, const Real *b, Real *c, size_t ldc, int mr, int nr,
                         int add, const Real *bias, int relu) {
    micro_kernel(kc, a, 1, MR, b, c, ldc, mr, nr, add, bias, relu);
}
static void micro_rows(int kc, const Real *a, size_t lda, const Real *b, Real *c, size_t ldc,
                       int nr, int add, const Real *bias, int relu) {
    micro_kernel(kc, a, lda, 1, b, c, ldc, MR, nr, add, bias, relu);
}

/* ---- one thread's share: C[i0..i1, j0..j1) of the full product, blocked ----
 * Rows of a row-major A (not ta) are contiguous in k already: full strips are read in place
 * and only a last, partial strip is packed (with its zero rows).
 * sum (ta only; NULL: none): sum[i0..i1) += the row sums of op(A), taken while the first
 * column block packs A. Each row's K values are added in k order into a running sum from 0
 * (carried across the K blocks, in scratch after the B block), added to sum once at the end:
 * the bits of k_sum_rows (k_reduce.c) on A stored (K,M). */
static void gemm_block(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                       int accumulate, const Real *bias, int relu, int i0, int i1, int j0, int j1,
                       Real *sum) {
    size_t nsum = sum ? (size_t)(i1 - i0) : 0;
    Real *abuf = k_thread_scratch(K_SCRATCH_GEMM, (size_t)(MC + NC) * KC + nsum);
    Real *bbuf = abuf + (size_t)MC * KC;
    Real *run = bbuf + (size_t)NC * KC; /* (i1 - i0) running sums */
    if (sum) memset(run, 0, nsum * sizeof(Real));
    for (int jc = j0; jc < j1; jc += NC) {
        int nc = j1 - jc < NC ? j1 - jc : NC;
        int summing = sum && jc == j0; /* a wider N packs the same rows again: sum them once */
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            int add = accumulate || pc > 0, last = relu && pc + kc >= K;
            pack_b(bbuf, B, tb, N, K, pc, kc, jc, nc);
            for (int ic = i0; ic < i1; ic += MC) {
                int mc = i1 - ic < MC ? i1 - ic : MC;
                if (ta)
                    pack_a(abuf, A, ta, M, K, ic, mc, pc, kc, summing ? run + (ic - i0) : NULL);
                else if (mc % MR) /* the last, partial strip */
                    pack_a(abuf + (size_t)(mc - mc % MR) * kc, A, ta, M, K, ic + mc - mc % MR,
                           mc % MR, pc, kc, NULL);
                for (int ir = 0; ir < mc; ir += MR) {
                    int mr = mc - ir < MR ? mc - ir : MR;
                    int packed = ta || mr < MR;
                    const Real *a =
                        packed ? abuf + (size_t)ir * kc : A + (size_t)(ic + ir) * K + pc;
                    /* rows of A read in place: ask for the next strip's rows while this one
                     * runs (they are often activations not touched for a while) */
                    if (!ta && ic + ir + 2 * MR <= i1)
                        for (int r = 0; r < MR; r++) {
                            const Real *an = A + (size_t)(ic + ir + MR + r) * K + pc;
                            for (int k = 0; k < kc; k += 64 / (int)sizeof(Real))
                                __builtin_prefetch(an + k);
                        }
                    for (int jr = 0; jr < nc; jr += NR) {
                        int nr = nc - jr < NR ? nc - jr : NR;
                        Real *c = C + (size_t)(ic + ir) * N + jc + jr;
                        const Real *bj = bias ? bias + jc + jr : NULL;
                        if (packed)
                            micro_packed(kc, a, bbuf + (size_t)jr * kc, c, (size_t)N, mr, nr, add,
                                         bj, last);
                        else
                            micro_rows(kc, a, (size_t)K, bbuf + (size_t)jr * kc, c, (size_t)N, nr,
                                       add, bj, last);
                    }
                }
            }
        }
        if (summing)
            for (int i = 0; i < i1 - i0; i++) sum[i0 + i] += run[i];
    }
}

/* ---- a few rows: C (M <= ROWS_MAX, N) with op(B) read as it streams ----
 * Decoding one token at a time runs products of one row (x W^T of every Linear, the head's
 * x wte^T), where packing op(B) whole for the blocked loop above cost as much as the product
 * (each B value is used once) and the MR-row tile was mostly zero rows. Here a thread sweeps
 * its columns ROWS_P panels (ROWS_P NR columns) at a time, every row of C at once, and for
 * each block of KC values of k keeps the rows x ROWS_P NR sums in registers: a row-major
 * op(B) (not tb) is read in place, a transposed one (x W^T) is transposed ROWS_KB values of k
 * at a time into a buffer on the stack (pack_b on a sliver that stays in L1), and so is a
 * last, partial group of panels (zero-padded).
 * The same bits as gemm_block: each element is summed block by block (KC), inside a block by
 * one FMA chain in k order started from 0, the block's sum stored (or added to the bias row)
 * for the first block and added to C after, a ReLU on the last: so a row gives the same
 * values alone as in a product of many rows, and threads split only columns. */
#define ROWS_MAX 4
#define ROWS_P 4
#ifndef GEMM_ROWS_KB
#define GEMM_ROWS_KB 32
#endif
#define ROWS_KB GEMM_ROWS_KB
#ifndef GEMM_ROWS /* tuning: products of at most this many rows (0..ROWS_MAX) come here */
#define GEMM_ROWS ROWS_MAX
#endif
_Static_assert(GEMM_ROWS >= 0 && GEMM_ROWS <= ROWS_MAX, "k_gemm: GEMM_ROWS in 0..ROWS_MAX");

/* rows i0 .. i0+R of C, columns [j0, j1) (j0 a multiple of NR), P panels at a time (R x P NV
 * sums in registers); R and P constants once inlined */
static K_ALWAYS_INLINE void rows_tile(int R, int P, int ta, int tb, int M, int N, int K,
                                      const Real *A, const Real *B, Real *C, int accumulate,
                                      const Real *bias, int relu, int i0, int j0, int j1) {
    _Alignas(64) Real buf[ROWS_P * NR * ROWS_KB];
    size_t as = ta ? (size_t)M : 1; /* op(A)[i, k + 1] is as values after op(A)[i, k] */
    for (int jg = j0; jg < j1; jg += P * NR) {
        int nc = j1 - jg < P * NR ? j1 - jg : P * NR;
        int inplace = !tb && nc == P * NR;
        if (nc < P * NR) memset(buf, 0, sizeof buf); /* the panels pack_b leaves out */
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC;
            Vec acc[ROWS_MAX][ROWS_P * NV];
            UNROLL for (int r = 0; r < R; r++) UNROLL for (int q = 0; q < P * NV; q++) acc[r][q] =
                vzero();
            for (int kb = 0; kb < kc; kb += ROWS_KB) {
                int kn = kc - kb < ROWS_KB ? kc - kb : ROWS_KB, k0 = pc + kb;
                const Real *b = buf;
                size_t ldk = NR,
                       ldp = (size_t)NR * kn; /* op(B)[k0 + k, panel p] at k ldk + p ldp */
                if (inplace) {
                    b = B + (size_t)k0 * N + jg;
                    ldk = (size_t)N;
                    ldp = NR;
                } else {
                    pack_b(buf, B, tb, N, K, k0, kn, jg, nc);
                }
                const Real *a = ta ? A + (size_t)k0 * M + i0 : A + (size_t)i0 * K + k0;
                size_t ra = ta ? 1 : (size_t)K; /* the next row of op(A) */
                for (int k = 0; k < kn; k++) {
                    Vec ai[ROWS_MAX];
                    UNROLL for (int r = 0; r < R; r++) ai[r] = vset1(a[r * ra + k * as]);
                    UNROLL for (int q = 0; q < P * NV; q++) {
                        Vec bv = vload(b + k * ldk + (q / NV) * ldp + (q % NV) * VLEN);
                        UNROLL for (int r = 0; r < R; r++) acc[r][q] = vfma(ai[r], bv, acc[r][q]);
                    }
                }
            }
            int add = accumulate || pc > 0, last = relu && pc + kc >= K;
            UNROLL for (int r = 0; r < R; r++) UNROLL for (int q = 0; q < P * NV; q++) {
                int j = jg + q * VLEN;
                if (j >= j1) break;
                Real *c = C + (size_t)(i0 + r) * N + j;
                if (j + VLEN <= j1) {
                    Vec x = add    ? vadd(vload(c), acc[r][q])
                            : bias ? vadd(vload(bias + j), acc[r][q])
                                   : acc[r][q];
                    vstore(c, last ? vmax0(x) : x);
                } else {
                    Real t[VLEN];
                    vstore(t, acc[r][q]);
                    for (int l = 0; l < j1 - j; l++) {
                        Real x = add ? c[l] + t[l] : bias ? bias[j + l] + t[l] : t[l];
                        c[l] = last && !(x > 0) ? 0 : x;
                    }
                }
            }
        }
    }
}

#ifdef K_HAVE_TRANSPOSE
/* The sums of one VLEN-wide group of columns of C in a row-tile (rows_tb): stored (or added
 * to the bias) for the first block of K, added to C after, a ReLU on the last: rows_tile's
 * arithmetic for one full vector */
static K_ALWAYS_INLINE void rows_put(Real *c, Vec acc, const Real *bias, int add, int last) {
    Vec x = add ? vadd(vload(c), acc) : bias ? vadd(vload(bias), acc) : acc;
    vstore(c, last ? vmax0(x) : x);
}

/* Rows i0 .. i0+R of C (R <= ROWS_MAX), columns [j0, j1) in groups of VLEN, for op(B) stored
 * transposed (x W^T: B is (N, K), column j of op(B) is row j of B): a group is VLEN rows of B,
 * VLEN * K values one after the other in memory, read once, VLEN x VLEN at a time transposed
 * in registers (transpose_tile into a buffer that stays in L1), all of K before the next
 * group. rows_tile instead swept P NR rows of B in steps of ROWS_KB values of k: 128 rows
 * read 128 bytes at a time, more streams than the hardware prefetcher follows, so that a
 * product of one row ran at a third of the memory's speed. While a group is summed, the next
 * group's bytes (VLEN cache lines per tile, as many as the tile reads) are asked for into L2,
 * in memory order. Columns past the last full group (j1 - j0 not a multiple of VLEN) are left
 * to the caller. The same bits as rows_tile: each element summed block by block (KC), inside
 * a block one FMA chain in k order from 0 (the tail of K past the last full tile gathered a
 * value per lane). */
#define TB_LINES ((int)(VLEN * VLEN * sizeof(Real) / 64)) /* the cache lines of a tile */
static K_ALWAYS_INLINE void rows_tb(int R, int ta, int M, int N, int K, const Real *A,
                                    const Real *B, Real *C, int accumulate, const Real *bias,
                                    int relu, int i0, int j0, int j1) {
    _Alignas(64) Real buf[VLEN * VLEN];
    size_t as = ta ? (size_t)M : 1, ra = ta ? 1 : (size_t)K; /* op(A)[i, k]: i ra + k as */
    const Real *a0 = A + (size_t)i0 * (ta ? 1 : (size_t)K);
    const char *end = (const char *)(B + (size_t)(j1 - (j1 - j0) % VLEN) * K);
    for (int jg = j0; jg + VLEN <= j1; jg += VLEN) {
        const Real *w = B + (size_t)jg * K;
        const char *next = (const char *)(w + (size_t)VLEN * K); /* the next group's bytes */
        for (int pc = 0; pc < K; pc += KC) {
            int kc = K - pc < KC ? K - pc : KC, kb = 0;
            Vec acc[ROWS_MAX];
            UNROLL for (int r = 0; r < R; r++) acc[r] = vzero();
            for (; kb + VLEN <= kc; kb += VLEN) {
                int k0 = pc + kb;
                transpose_tile(buf, VLEN, w + k0, (size_t)K); /* buf[k VLEN + c] = B[jg+c, k0+k] */
                for (int l = 0; l < TB_LINES && next < end; l++, next += 64) PREFETCH_L2(next);
                UNROLL for (int k = 0; k < VLEN; k++) {
                    Vec bv = vload(buf + k * VLEN);
                    UNROLL for (int r = 0; r < R; r++) acc[r] =
                        vfma(vset1(a0[r * ra + (size_t)(k0 + k) * as]), bv, acc[r]);
                }
            }
            for (; kb < kc; kb++) { /* K's tail: one k at a time, a lane per column */
                int k = pc + kb;
                for (int c = 0; c < VLEN; c++) buf[c] = w[(size_t)c * K + k];
                Vec bv = vload(buf);
                UNROLL for (int r = 0; r < R; r++) acc[r] =
                    vfma(vset1(a0[r * ra + (size_t)k * as]), bv, acc[r]);
            }
            int add = accumulate || pc > 0, last = relu && pc + kc >= K;
            UNROLL for (int r = 0; r < R; r++)
                rows_put(C + (size_t)(i0 + r) * N + jg, acc[r], bias ? bias + jg : NULL, add, last);
        }
    }
}
#endif

/* Thread t of T's share of a product of M <= ROWS_MAX rows: whole panels of columns. As many
 * panels at a time as keep the sums within the micro-kernel's MR x NV registers (at most
 * ROWS_P: 8 chains of fused multiply-adds for one row hide their latency). */
#define ROWS_PANELS(R) (MR / (R) < 1 ? 1 : MR / (R) > ROWS_P ? ROWS_P : MR / (R))
static void rows_share(int t, int T, int ta, int tb, int M, int N, int K, const Real *A,
                       const Real *B, Real *C, int accumulate, const Real *bias, int relu) {
    int nt = (N + NR - 1) / NR;
    int j0 = (int)((long)t * nt / T) * NR, j1 = (int)((long)(t + 1) * nt / T) * NR;
    if (j1 > N) j1 = N;
    int jt = j0; /* columns from jt on: rows_tile's */
#ifdef K_HAVE_TRANSPOSE
    if (tb) jt = j0 + (j1 > j0 ? (j1 - j0) / VLEN * VLEN : 0);
#endif
    for (int i0 = 0; i0 < M && j0 < j1; i0 += ROWS_MAX) {
        switch (M - i0 < ROWS_MAX ? M - i0 : ROWS_MAX) {
#ifdef K_HAVE_TRANSPOSE
#define ROWS_TB(R) rows_tb(R, ta, M, N, K, A, B, C, accumulate, bias, relu, i0, j0, jt)
#else
#define ROWS_TB(R) (void)0
#endif
#define ROWS_TILE(R)                                                                               \
    ROWS_TB(R);                                                                                    \
    if (jt < j1)                                                                                   \
    rows_tile(R, ROWS_PANELS(R), ta, tb, M, N, K, A, B, C, accumulate, bias, relu, i0, jt, j1)
        case 1: ROWS_TILE(1); break;
        case 2: ROWS_TILE(2); break;
        case 3: ROWS_TILE(3); break;
        default: ROWS_TILE(4);
#undef ROWS_TILE
#undef ROWS_TB
        }
    }
}

/* How T threads cut C: into tm x tn rectangles of whole tiles (mt row strips, nt column
 * panels), the factorisation with the least work on the busiest thread, counting the packing
 * each thread repeats. Any choice gives the same numbers; this one only sets the speed. */
static void split_threads(int T, int mt, int nt, int K, int *tm_out, int *tn_out) {
    double best = -1;
    for (int tm = 1; tm <= T; tm++) {
        if (T % tm) continue;
        int tn = T / tm;
        double rows = (double)((mt + tm - 1) / tm) * MR, cols = (double)((nt + tn - 1) / tn) * NR;
        double cost = rows * cols * K + 4.0 * K * (rows * ceil(cols / NC) + cols);
        if (best < 0 || cost < best) {
            best = cost;
            *tm_out = tm;
            *tn_out = tn;
        }
    }
}

/* multiply-adds below which one thread does the whole product: 64 K_PAR_MIN (1M by default,
 * about 20 us on one core); waking a team costs more than it saves */
static int gemm_is_small(int M, int N, int K) {
    int mt = (M + MR - 1) / MR, nt = (N + NR - 1) / NR;
    /* a product of a few rows reads each value of op(B) once, from memory: a team pays off
     * from 4 K_PAR_MIN values of op(B) on (256 KiB of floats) */
    if (M <= GEMM_ROWS) return (size_t)N * (size_t)K / 4 < K_PAR_MIN || nt <= 1;
    return (size_t)M * (size_t)N * (size_t)K / 64 < K_PAR_MIN || (size_t)mt * nt <= 1;
}

/* Thread t of T's share of the product (all of it when T is 1), and of sum's (gemm_block;
 * NULL: none): the rows of C a thread computes are summed by the one thread of their row band
 * whose columns start at 0 (threads that split columns share those rows: one adds them). */
static void gemm_share(int t, int T, int ta, int tb, int M, int N, int K, const Real *A,
                       const Real *B, Real *C, int accumulate, const Real *bias, int relu,
                       Real *sum) {
    if (M <= 0) return;
    if (sum && (N <= 0 || K <= 0)) { /* no product to take the sums from */
        if (t == 0) k_sum_rows_team(0, 1, sum, A, (size_t)(K > 0 ? K : 0), M);
        sum = NULL;
    }
    if (N <= 0) return;
    if (K <= 0) {
        if (!accumulate && t == 0)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    Real r = bias ? bias[j] : 0;
                    C[(size_t)i * N + j] = relu && !(r > 0) ? 0 : r;
                }
        return;
    }
    if (M <= GEMM_ROWS && !sum) {
        rows_share(t, T, ta, tb, M, N, K, A, B, C, accumulate, bias, relu);
        return;
    }
    int mt = (M + MR - 1) / MR, nt = (N + NR - 1) / NR;
    int tm = 1, tn = 1;
    split_threads(T, mt, nt, K, &tm, &tn);
    int ti = t / tn, tj = t % tn;
    /* thread (ti, tj) gets row strips [ti*mt/tm, (ti+1)*mt/tm), panels likewise */
    int i0 = (int)((long)ti * mt / tm) * MR, i1 = (int)((long)(ti + 1) * mt / tm) * MR;
    int j0 = (int)((long)tj * nt / tn) * NR, j1 = (int)((long)(tj + 1) * nt / tn) * NR;
    if (i1 > M) i1 = M;
    if (j1 > N) j1 = N;
    if (i0 < i1 && j0 < j1)
        gemm_block(ta, tb, M, N, K, A, B, C, accumulate, bias, relu, i0, i1, j0, j1,
                   j0 == 0 ? sum : NULL);
}

/* The products under --precision bf16 (k_bf16_products; k_gemm_bf16.c): C = the bias rows,
 * then C += the product, and a ReLU after it; a Linear's bias gradient (sum) k_sum_rows_team's
 * bits, as gemm_block gives them */
static void gemm_bf16(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                      int accumulate, const Real *bias, int relu) {
    if (bias)
        for (int i = 0; i < M; i++) memcpy(C + (size_t)i * N, bias, (size_t)N * sizeof(Real));
    k_gemm_bf16(ta, tb, M, N, K, A, B, C, accumulate || bias);
    if (relu && M > 0 && N > 0) k_relu_forward(C, C, (size_t)M * N);
}

static void gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 int accumulate, const Real *bias, int relu) {
    if (k_bf16_products) {
        gemm_bf16(ta, tb, M, N, K, A, B, C, accumulate, bias, relu);
        return;
    }
#pragma omp parallel if (!gemm_is_small(M, N, K))
    {
        int T = 1, t = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        gemm_share(t, T, ta, tb, M, N, K, A, B, C, accumulate, bias, relu, NULL);
    }
}

/* Thread t of T's share of a product that other jobs share a region with (kernels.h): a small
 * product is job % T's alone; sum as gemm_share's (ta only) */
static void gemm_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                      const Real *B, Real *C, int accumulate, Real *sum) {
    if (k_bf16_products) {
        k_gemm_bf16_team(t, T, job, ta, tb, M, N, K, A, B, C, accumulate);
        if (sum && M > 0) k_sum_rows_team(t, T, sum, A, (size_t)(K > 0 ? K : 0), M);
        return;
    }
    if (gemm_is_small(M, N, K)) {
        if (t == job % T) gemm_share(0, 1, ta, tb, M, N, K, A, B, C, accumulate, NULL, 0, sum);
        return;
    }
    gemm_share(t, T, ta, tb, M, N, K, A, B, C, accumulate, NULL, 0, sum);
}

void k_gemm_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                 const Real *B, Real *C, int accumulate) {
    gemm_team(t, T, job, ta, tb, M, N, K, A, B, C, accumulate, NULL);
}

void k_gemm_sum_team(int t, int T, int job, int tb, int M, int N, int K, const Real *A,
                     const Real *B, Real *C, int accumulate, Real *sum) {
    gemm_team(t, T, job, 1, tb, M, N, K, A, B, C, accumulate, sum);
}

void k_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
            int accumulate) {
    gemm(ta, tb, M, N, K, A, B, C, accumulate, NULL, 0);
}

void k_gemm_bias(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias) {
    gemm(ta, tb, M, N, K, A, B, C, 0, bias, 0);
}

void k_gemm_relu(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias) {
    gemm(ta, tb, M, N, K, A, B, C, 0, bias, 1);
}

#endif /* AG_BLAS_OPENBLAS */

const char *k_gemm_kernel_name(void) {
#ifdef AG_BLAS_OPENBLAS
    return "openblas";
#else
    return K_SIMD_FAMILY;
#endif
}

void k_gemm_blocking(int *mr, int *nr, int *kc, int *mc, int *nc) {
#ifdef AG_BLAS_OPENBLAS /* OpenBLAS blocks its own way; these only give tests some sizes */
    *mr = 8, *nr = 16, *kc = 256, *mc = 128, *nc = 512;
#else
    *mr = MR, *nr = NR, *kc = KC, *mc = MC, *nc = NC;
#endif
}
