/* k_attention.c: fused scaled dot-product attention (scores, masks, softmax, dropout, times v)
 * and the per-head gate. The forward shares (batch, head) pairs among threads. The backward
 * shares (batch, key/value head) pairs: one thread computes every query row of the heads that
 * read that key/value head (all of them with grouped-query attention), so it alone writes their
 * q-gradient rows and the key/value head's k- and v-gradients, and sums every term in a fixed
 * order. No (B, NH, Tq, Tk) buffer of score gradients is needed: a head's are used at once.
 * Threads take the pairs as they come free, each first from its own range of batch elements,
 * the rows its core wrote (PairRange below); the values do not depend on who takes a pair.
 * Speed: per head, every product (q k^T, P v, and backward's gy v^T, G k, G^T q, A^T gy) is a
 * small matrix product done in fp32 by one register-tiled loop, tile() below, on operands
 * copied into per-thread scratch where they need another layout. Heads are read through strides
 * (KAttention.qs, ks, ys), so the same code serves (B, heads, T, HS) tensors and the heads of
 * (B, T, C) projections. Softmax and its backward reduce rows in vector registers
 * (k_lanes.h's _v forms, the same bits as the plain ones); short rows (float, AVX-512 and
 * AVX2) stay in registers through the whole softmax (softmax_rows_v); a thread asks for the
 * rows of the pair it will likely take next while it computes this one (prefetch_rows).
 * Not here: shape checks (../autograd/ops_attention.c). Read the reference first
 * (k_attention_ref.c: the same contract in plain loops, which the tests hold this kernel to);
 * its backward is k_softmax.c's formula with the scores being q k^T / sqrt(HS).
 * Under --precision bf16 (kernels.h's k_bf16_products) the six products take bf16 operands and
 * sum in fp32 on k_gemm_bf16.c's micro-kernel (vdpbf16ps where the build has AVX512_BF16, its
 * exact emulation elsewhere: the same bits in every kernel family); the softmax, its backward
 * and dropout stay fp32 (forward_head_bf16, backward_group_bf16). The arithmetic, the one
 * definition: each operand rounded to bf16 (k_bf16_round); per element of a product one chain
 * over K (not cut into blocks), from +0, in pairs (k, k+1) in order from k = 0, each pair as
 * vdpbf16ps takes it, the odd half first:
 *     s = ftz(fma(x[k+1], b[k+1], s));  s = ftz(fma(x[k], b[k], s))
 * (ftz: a zero of its sign below FLT_MIN; the product of two bf16 is exact in fp32), then
 * stored (y, the scores, gy v^T) or added to the gradient (gq, gk, gv: g = g + s, an fp32 add,
 * one head after the other for a key/value head read by several). K: HS for q k^T and gy v^T;
 * the query rows from 0 for G^T q and A^T gy (rows that do not see a key hold exact zeros
 * there, which leave a sum from +0 as it is, so the sums start at the first pair of rows that
 * sees the key); for A v and G k the keys up to the end of the keys the row's block sees (the
 * causal end of its last row, and no further than the last key that is not padding), the
 * blocks being BMR = 8 query rows from row 0 with causal attention and all the rows without.
 * An odd K's last pair has a zero half in x (for A v and G k the other operand's half there is
 * the next key's value when there is one: a zero product either way). Layout: the operands are
 * packed as they are copied (k_bf16_pack, vcvtne2ps2bf16 with AVX512_BF16): the left one (q,
 * gy; A, G by rows; G^T and A^T by pairs of query rows) in strips of 8 rows, one 32-bit word a
 * pair a row, broadcast; the right one (k^T, v^T by pairs of HS; v, k, q, gy by pairs of rows)
 * in panels of 32 columns, one word a pair a column (bf16 of k in the low half, of k+1 in the
 * high). Tests: tests/tensor/test_attention_bf16.c (the definition written out, bit for bit).
 * Next: k_embedding.c. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "k_attention.h"
#include "k_lanes.h"
#include "k_math.h"
#include "k_simd.h"

/* The first query row of batch b that sees key j0 (n_q when none): key_end grows with i. */
static int first_seer(const KAttention *a, int b, int j0) {
    int lo = 0, hi = n_q(a, b);
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (key_end(a, b, mid) > j0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Keys at or past the returned index are padding for every query of batch b: 1 + the last key
 * that is not padding (0 when all are), n_k without a mask. Their probabilities are 0, so the
 * products need not run over them. */
static int visible_end(const KAttention *a, int b) {
    const uint8_t *pad = pad_of(a, b);
    int end = n_k(a, b);
    if (!pad) return end;
    while (end > 0 && pad[end - 1]) end--;
    return end;
}

/* ---- the small products ----
 * tile: C (n, N) = or += X (n, K) times Bp (K, N). X[i][k] is read at X[i*rsx + k*csx], so the
 * same loop takes X as stored (rsx = row stride, csx = 1) or transposed (rsx = 1, csx = row
 * stride of the stored matrix): G^T q and P^T gy need no transposed copy. Rows of Bp are ldb
 * apart and hold padded(N) readable values (past N anything: those columns are computed and
 * never stored), so a (K, N) matrix with N a multiple of KB is read in place.
 * RB rows of C times KB columns are summed at once in registers: for each k RB values of X are
 * broadcast against KB values of Bp (a last block of at most VLEN columns: one vector of them).
 * Every C[i][j] sums its K products in k order from 0 (then is stored, or added to C), so it is
 * the same whichever thread computes it and whatever width its block has.
 * The registers are k_simd.h's, k_gemm.c's vector layer: with AVX-512 the KB columns are
 * 512-bit registers updated by fused multiply-adds; with AVX2 + FMA, two 256-bit registers a
 * row (KB 16 floats or 8 doubles), so that the 4 x 2 sums and the 2 vectors of Bp fit in its 16
 * registers; the portable family likewise with its 16-byte vectors (KB 8 floats or 4 doubles);
 * without vectors, KB values a row. Every element of
 * a tile takes the same path (no scalar tail), so the choice never depends on where an element
 * falls. */
#if defined(K_SIMD_AVX512)
#define KB 32
#define RB 8 /* 16 of the 32 vector registers hold sums */
#elif defined(K_SIMD_AVX2) || defined(K_SIMD_GENERIC)
#define KB (2 * VLEN)
#define RB 4 /* 8 of the 16 vector registers hold sums */
#else
#define KB 32
#define RB 4
#endif
#define NV (KB / VLEN)

static int padded(int N) { return (N + KB - 1) / KB * KB; }

/* Rows [i0, i0 + rb) and columns [j0, j0 + nv VLEN) of C (rb and nv constants once inlined:
 * 8 or 4 rows, KB / VLEN vectors or 1) */
static K_ALWAYS_INLINE void tile_block(Real *restrict C, size_t ldc, const Real *const *xr,
                                       size_t csx, int i0, int n, int K, const Real *restrict Bp,
                                       size_t ldb, int N, int add, const int rb, int j0,
                                       const int nv) {
    Vec acc[RB][NV];
    UNROLL for (int r = 0; r < rb; r++) { UNROLL for (int v = 0; v < nv; v++) acc[r][v] = vzero(); }
    const Real *b = Bp + j0;
    for (int k = 0; k < K; k++, b += ldb) {
        Vec bv[NV];
        UNROLL for (int v = 0; v < nv; v++) {
            bv[v] = vload(b + v * VLEN);
            PIN(bv[v]);
        }
        UNROLL for (int r = 0; r < rb; r++) {
            Vec x = vset1(xr[r][(size_t)k * csx]);
            UNROLL for (int v = 0; v < nv; v++) acc[r][v] = vfma(x, bv[v], acc[r][v]);
        }
    }
    int w = nv * VLEN, nj = N - j0 < w ? N - j0 : w;
    if (nj == w && i0 + rb <= n) { /* a full tile: straight from the registers */
        UNROLL for (int r = 0; r < rb; r++) {
            Real *c = C + (size_t)(i0 + r) * ldc + j0;
            UNROLL for (int v = 0; v < nv; v++) {
                Vec cv = acc[r][v];
                if (add) cv = vadd(vload(c + v * VLEN), cv);
                vstore(c + v * VLEN, cv);
            }
        }
        return;
    }
    /* a partial tile: the registers into a local array (stores at fixed places, where a
     * memcpy of acc[r] was a library call per row), then its first nj columns. (Masked
     * stores straight from the registers were slower: GCC 12 then keeps one or two sums on
     * the stack in the loop above.) */
    Real out[RB][KB];
    UNROLL for (int r = 0; r < rb; r++) {
        UNROLL for (int v = 0; v < nv; v++) vstore(out[r] + v * VLEN, acc[r][v]);
    }
    for (int r = 0; r < rb && i0 + r < n; r++) {
        Real *c = C + (size_t)(i0 + r) * ldc + j0;
        if (add)
            for (int j = 0; j < nj; j++) c[j] += out[r][j];
        else
            for (int j = 0; j < nj; j++) c[j] = out[r][j];
    }
}

/* Rows [i0, i0 + rb) of C (rb a constant once inlined: 8 or 4), every column block: KB
 * columns at a time, the last block one vector wide when at most VLEN columns are left (with
 * AVX-512, keys 1-16 of a block of 32: half the work for short rows and causal blocks) */
static K_ALWAYS_INLINE void tile_rows(Real *restrict C, size_t ldc, const Real *restrict X,
                                      size_t rsx, size_t csx, int i0, int n, int K,
                                      const Real *restrict Bp, size_t ldb, int N, int add,
                                      const int rb) {
    const Real *xr[RB]; /* past the last row, repeat it (computed, not stored) */
    for (int r = 0; r < rb; r++) xr[r] = X + (size_t)(i0 + r < n ? i0 + r : n - 1) * rsx;
    int j0 = 0;
    for (; N - j0 > VLEN; j0 += KB)
        tile_block(C, ldc, xr, csx, i0, n, K, Bp, ldb, N, add, rb, j0, NV);
    if (j0 < N) tile_block(C, ldc, xr, csx, i0, n, K, Bp, ldb, N, add, rb, j0, 1);
}

static void tile(Real *restrict C, size_t ldc, const Real *restrict X, size_t rsx, size_t csx,
                 int n, int K, const Real *restrict Bp, size_t ldb, int N, int add) {
    /* ask for the rows of C now: they are often gradients not touched for a while, and the
     * sums below take long enough for them to arrive */
    if (add)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < N; j += 64 / (int)sizeof(Real)) PREFETCH_W(C + (size_t)i * ldc + j);
    int i0 = 0;
    for (; n - i0 > RB / 2; i0 += RB) tile_rows(C, ldc, X, rsx, csx, i0, n, K, Bp, ldb, N, add, RB);
    if (i0 < n) tile_rows(C, ldc, X, rsx, csx, i0, n, K, Bp, ldb, N, add, RB / 2);
}

/* dst (N, padded(R)) = src (R, N) transposed (src rows ld apart), zero columns past R: by
 * VLEN x VLEN blocks in registers (k_simd.h's transpose_tile), a last block of fewer than
 * VLEN rows through a copy padded with rows of zeros (so that short batches, T 11-20, also
 * take the registers), the columns left over (N not a multiple of VLEN) one value at a time.
 * Values are only moved: the result is the same either way. */
static void transpose_pad(Real *restrict dst, const Real *restrict src, size_t ld, int R, int N) {
    int RP = padded(R), c0 = 0, r_end = 0; /* columns < c0 of dst rows are set up to r_end */
#ifdef K_HAVE_TRANSPOSE
    c0 = N / VLEN * VLEN;
    for (int r0 = 0; r0 < R; r0 += VLEN) {
        int rows = R - r0 < VLEN ? R - r0 : VLEN;
        for (int cb = 0; cb < c0; cb += VLEN) {
            if (rows == VLEN) {
                transpose_tile(dst + (size_t)cb * RP + r0, (size_t)RP, src + (size_t)r0 * ld + cb,
                               ld);
                continue;
            }
            Real t[VLEN * VLEN]; /* the last rows, then zeros */
            for (int r = 0; r < VLEN; r++)
                if (r < rows)
                    vstore(t + r * VLEN, vload(src + (size_t)(r0 + r) * ld + cb));
                else
                    vstore(t + r * VLEN, vzero());
            transpose_tile(dst + (size_t)cb * RP + r0, (size_t)RP, t, VLEN);
        }
        r_end = r0 + VLEN;
    }
    for (int c = 0; c < c0; c++)
        for (int r = r_end; r < RP; r++) dst[(size_t)c * RP + r] = 0;
#endif
    for (int c = c0; c < N; c++) {
        Real *d = dst + (size_t)c * RP;
        for (int r = 0; r < R; r++) d[r] = src[(size_t)r * ld + c];
        for (int r = R; r < RP; r++) d[r] = 0;
    }
    (void)r_end;
}

/* Ask for R rows of N values (ld apart) to come into L2, or, with write, into L1 to be
 * written. A thread asks for the pair it is likely to take next (walk_guess) while it computes
 * this one: the heads of a projection are usually in L3 only when attention starts, and rows ld
 * apart are not what the hardware's prefetchers guess; the backward also asks for the pair's
 * probabilities, written by the forward long before (their first loads were a quarter of its
 * own time at 2 threads), the forward for the P and y rows it will write (last written a step
 * before, often by the other core: a tenth of the forward's time at 2 threads; the backward's
 * gradients did not gain). Only a hint: a wrong guess costs a few loads. */
static void prefetch_rows(const Real *p, size_t ld, int R, int N, int write) {
    for (int r = 0; r < R; r++)
        for (int c = 0; c < N; c += 64 / (int)sizeof(Real)) {
            if (write)
                PREFETCH_W(p + (size_t)r * ld + c);
            else
                PREFETCH_L2(p + (size_t)r * ld + c);
        }
}

/* An operand of tile() with N columns (rows ld apart): itself when N is a multiple of KB (*ldb
 * = ld), else copied into dst with rows of padded(N) values, zeros past N (*ldb = padded(N)). */
static const Real *as_operand(Real *restrict dst, const Real *restrict src, size_t ld, int R, int N,
                              size_t *ldb) {
    int NP = padded(N);
    if (NP == N) {
        *ldb = ld;
        return src;
    }
    for (int r = 0; r < R; r++) {
        memcpy(dst + (size_t)r * NP, src + (size_t)r * ld, (size_t)N * sizeof(Real));
        for (int c = N; c < NP; c++) dst[(size_t)r * NP + c] = 0;
    }
    *ldb = (size_t)NP;
    return dst;
}

/* the per-thread scratch of the forward: kt (HS x padded(Tk)), vp (Tk x padded(HS)),
 * A (Tq x Tk), padrow (Tk); under bf16 forward_head_bf16's */
static size_t forward_scratch_bf16(const KAttention *a);
static size_t forward_scratch(const KAttention *a) {
    if (k_bf16_products) return forward_scratch_bf16(a);
    return (size_t)a->HS * padded(a->Tk) + (size_t)a->Tk * padded(a->HS) + (size_t)a->Tq * a->Tk +
           (size_t)a->Tk;
}

/* Rows of P from their raw dots: row i becomes pi[j] = softmax over visible j of
 * pi[j] * scale + M[j] (M the additive mask's row by key position, kp[j] for packed keys; none
 * when M is NULL), 0 elsewhere. Only keys j < n can be visible (the causal end and the last key
 * that is not padding): only their dots were computed, and the rest of the row is set to 0.
 * Padding keys below n get the score -inf, so that their e^(s - m) is exactly 0 (k_expf's and
 * exp's value there), as do keys the mask blocks (M = -inf); a row with no visible key is all
 * 0 (not 0/0).
 * In three passes over a few rows at a time (SOFTMAX_ROWS): the scores and their max, then
 * e^(s - max) and their sum (k_row_sum's lanes: the same sum), then the division. Each pass
 * ends in a reduction whose steps wait on one another; with the rows' passes side by side
 * they overlap (one row at a time, a row of 64 took 150 cycles). */
#define SOFTMAX_ROWS 8

/* pass 1 of row pi: the scaled, masked scores of its keys j < n, 0 past n (to Tk); their max */
static Real scores_row(Real *pi, int Tk, int n, const uint8_t *pad, const Real *M, const int *kp,
                       Real scale) {
    const Real ninf = -(Real)INFINITY;
    /* one loop over the whole row (a separate loop of zeros became a call to memset) */
    if (M)
        for (int j = 0; j < Tk; j++)
            pi[j] = j >= n ? 0 : pad && pad[j] ? ninf : pi[j] * scale + M[kp ? kp[j] : j];
    else if (pad)
        for (int j = 0; j < Tk; j++) pi[j] = j >= n ? 0 : !pad[j] ? pi[j] * scale : ninf;
    else
        for (int j = 0; j < Tk; j++) pi[j] = j < n ? pi[j] * scale : 0;
    return k_row_max_v(pi, n);
}

/* pass 2: pi[j] = e^(pi[j] - m) for j < n (in vector lanes), and their sum; a row with no
 * visible key (m = -inf) is all 0, or all NaN when a score is NaN, and its sum is 0 */
static Real exp_row(Real *pi, int n, Real m) {
    if (m == -(Real)INFINITY) {
        Real z = 0;
        for (int j = 0; j < n; j++) z = pi[j] != pi[j] ? pi[j] : z;
        for (int j = 0; j < n; j++) pi[j] = z;
        return 0;
    }
    for (int j = 0; j < n; j++) pi[j] = K_EXP(pi[j] - m); /* in vector lanes */
    return k_row_sum_v(pi, n);
}

/* ---- the same three passes a vector at a time (float, the AVX-512 and AVX2 families) ----
 * Rows of 11-20 keys are one or two vectors, where the loops above ran the scores' pass one
 * value at a time (the padding's test), and the exponentials too (GCC keeps k_expf's loop
 * scalar when it cannot tell the row is long); each reduction then loaded the row whole just
 * after it was stored value by value, and waited for those stores to reach the cache. Here a
 * row of at most VROW_MAX keys (64 with AVX-512, 32 with AVX2) is loaded once, kept in
 * registers (x[]) through the passes, and stored once, 8 rows side by side. Each lane does the
 * scalar code's operations in its order (vexpf is k_expf line by line; no FMA contraction
 * under -std=c11); the max and the sum take block bk into lane vector bk % K_NV, lanes past n
 * left out, then the same tree: the steps of k_row_max_v and k_row_sum_v, so the same bits.
 * Without an additive mask only (with one: the loops above). */
#if defined(K_HAVE_VREDUCE) && !defined(AG_REAL_DOUBLE)
#define ATTN_VROWS 1
#define VROW_BLOCKS 4 /* with AVX2 rows of 64 keys (8 blocks) ran 12% slower than the loops */
#define VROW_MAX (VROW_BLOCKS * VLEN)
typedef unsigned VecU __attribute__((vector_size(sizeof(Vec))));
typedef int VecI __attribute__((vector_size(sizeof(Vec))));

/* m ? a : b lane by lane (m all ones or all zeros in a lane) */
static inline Vec vsel(VecU m, Vec a, Vec b) { return (Vec)(((VecU)a & m) | ((VecU)b & ~m)); }

/* lanes < c of v into p (0 < c <= VLEN); nothing past p[c - 1] is written */
static inline void vstore_upto(Real *p, int c, Vec v) {
#if defined(K_SIMD_AVX512)
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << c) - 1), v);
#else
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(p, m, v);
#endif
}
/* lanes < c from p (0 < c <= VLEN), the others 0; nothing past p[c - 1] is read */
static inline Vec vload_upto(const Real *p, int c) {
    return c == VLEN ? vload(p) : vload_part(p, c, vzero());
}

/* k_expf (k_math.h) in every lane: the same operations in the same order */
static inline Vec vexpf(Vec x) {
    const Vec shift = vset1(12582912.0f), lo = vset1(-88.0f), hi = vset1(88.375f);
    Vec xc = vsel((VecU)(x < lo), lo, vsel((VecU)(x > hi), hi, x));
    Vec t = xc * vset1(1.44269504088896341f) + shift;
    Vec n = t - shift;
    Vec r = xc - n * vset1(0.693359375f);
    r = r - n * vset1(-2.12194440e-4f);
    Vec p = vset1(1.0f / 5040);
    p = p * r + vset1(1.0f / 720);
    p = p * r + vset1(1.0f / 120);
    p = p * r + vset1(1.0f / 24);
    p = p * r + vset1(1.0f / 6);
    p = p * r + vset1(0.5f);
    p = p * r + vset1(1.0f);
    p = p * r + vset1(1.0f);
    VecU e = ((VecU)t - (VecU)shift + 127u) << 23; /* 2^n */
    Vec y = p * (Vec)e;
    return vsel((VecU)(x > vset1(88.3762626647949f)), vset1(INFINITY), y);
}

/* lanes j0 + l < n (l the lane) */
static inline VecU lanes_below(int j0, int n) {
    static const int iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    VecI l;
    memcpy(&l, iota, sizeof l);
    return (VecU)(l < n - j0);
}

/* padrow (Tk): 1 where key j of batch b is padding, else 0 (pad[j] as a vector can read it) */
static void pad_row(Real *padrow, const uint8_t *pad, int Tk) {
    for (int j = 0; j < Tk; j++) padrow[j] = pad[j] ? 1 : 0;
}

/* softmax_rows' three passes on nr <= SOFTMAX_ROWS rows (Tk <= VROW_MAX keys; row r at
 * pi[r], keys j < n[r] visible; padrow or NULL), each pass over all the rows before the next
 * (their chains of dependent steps overlap; one row at a time took 15% longer than the loops
 * above) */
static void softmax_rows_v(Real *const *pi, const int *n, int nr, int Tk, const Real *padrow,
                           Real scale) {
    const Vec ninf = vset1(-(Real)INFINITY);
    Vec x[SOFTMAX_ROWS][VROW_BLOCKS];
    Real m[SOFTMAX_ROWS];
    int nbk = (Tk + VLEN - 1) / VLEN;
    for (int r = 0; r < nr; r++) { /* j >= n ? 0 : pad[j] ? -inf : pi[j] * scale; the max */
        Vec acc[K_NV];
        for (int l = 0; l < K_NV; l++) acc[l] = ninf;
        for (int bk = 0; bk < nbk; bk++) {
            int j0 = bk * VLEN, c = Tk - j0 < VLEN ? Tk - j0 : VLEN;
            Vec v = vload_upto(pi[r] + j0, c) * vset1(scale);
            if (padrow) v = vsel((VecU)(vload_upto(padrow + j0, c) != vzero()), ninf, v);
            VecU live = lanes_below(j0, n[r]);
            x[r][bk] = vsel(live, v, vzero());
            acc[bk % K_NV] = vmaxv(vsel(live, v, ninf), acc[bk % K_NV]);
        }
        UNROLL for (int w = K_NV / 2; w > 0; w /= 2) {
            UNROLL for (int l = 0; l < w; l++) acc[l] = vmaxv(acc[l + w], acc[l]);
        }
        m[r] = vhmax(acc[0]);
    }
    Real sum[SOFTMAX_ROWS];
    for (int r = 0; r < nr; r++) {             /* e^(s - m) and their sum */
        if (m[r] == -(Real)INFINITY) continue; /* no visible key: exp_row's rule, below */
        Vec acc[K_NV];
        for (int l = 0; l < K_NV; l++) acc[l] = vzero();
        for (int bk = 0; bk * VLEN < n[r]; bk++) {
            x[r][bk] = vsel(lanes_below(bk * VLEN, n[r]), vexpf(x[r][bk] - vset1(m[r])), vzero());
            acc[bk % K_NV] = vadd(acc[bk % K_NV], x[r][bk]);
        }
        sum[r] = k_vlanes_total(acc); /* at least e^0 = 1, or NaN */
    }
    for (int r = 0; r < nr; r++) { /* the division */
        if (m[r] == -(Real)INFINITY) continue;
        Vec inv = vset1(1 / sum[r]);
        for (int bk = 0; bk * VLEN < n[r]; bk++)
            x[r][bk] = vsel(lanes_below(bk * VLEN, n[r]), x[r][bk] * inv, vzero());
    }
    for (int r = 0; r < nr; r++) {
        for (int bk = 0; bk < nbk; bk++) {
            int j0 = bk * VLEN;
            vstore_upto(pi[r] + j0, Tk - j0 < VLEN ? Tk - j0 : VLEN, x[r][bk]);
        }
        if (m[r] == -(Real)INFINITY) exp_row(pi[r], n[r], m[r]);
    }
}
#endif

/* Rows [i0, i1) of the head's P (rows Tk apart, batch b, head h) from their raw dots, keys
 * j < min(key_end, vis) visible; padrow: batch b's padding by pad_row (ATTN_VROWS only) */
static void softmax_rows(Real *Ph, int i0, int i1, int vis, const KAttention *a, int b, int h,
                         Real scale, const Real *padrow) {
    int Tk = n_k(a, b);
    const uint8_t *pad = pad_of(a, b);
    const int *kp = kpos_of(a, b);
#ifdef ATTN_VROWS
    /* rows that all end on a whole vector, without padding, stay with the loops above (they
     * vectorize whole there: mha's rows of 64 keys ran 5% faster) */
    if (!a->bias && Tk <= VROW_MAX && (a->causal || pad || vis % VLEN != 0)) {
        for (int r0 = i0; r0 < i1; r0 += SOFTMAX_ROWS) {
            int nr = i1 - r0 < SOFTMAX_ROWS ? i1 - r0 : SOFTMAX_ROWS, n[SOFTMAX_ROWS];
            Real *pi[SOFTMAX_ROWS];
            for (int r = 0; r < nr; r++) {
                n[r] = key_end(a, b, r0 + r);
                if (n[r] > vis) n[r] = vis;
                pi[r] = Ph + (size_t)(r0 + r) * Tk;
            }
            softmax_rows_v(pi, n, nr, Tk, pad ? padrow : NULL, scale);
        }
        return;
    }
#endif
    (void)padrow;
    for (int r0 = i0; r0 < i1; r0 += SOFTMAX_ROWS) {
        int nr = i1 - r0 < SOFTMAX_ROWS ? i1 - r0 : SOFTMAX_ROWS, n[SOFTMAX_ROWS];
        Real m[SOFTMAX_ROWS], s[SOFTMAX_ROWS];
        for (int r = 0; r < nr; r++) {
            n[r] = key_end(a, b, r0 + r);
            if (n[r] > vis) n[r] = vis;
            m[r] = scores_row(Ph + (size_t)(r0 + r) * Tk, Tk, n[r], pad, bias_row(a, b, h, r0 + r),
                              kp, scale);
        }
        for (int r = 0; r < nr; r++) s[r] = exp_row(Ph + (size_t)(r0 + r) * Tk, n[r], m[r]);
        for (int r = 0; r < nr; r++) {
            if (s[r] == 0) continue; /* no visible key: left as exp_row set it */
            Real inv = 1 / s[r], *pi = Ph + (size_t)(r0 + r) * Tk;
            for (int j = 0; j < n[r]; j++) pi[j] *= inv;
        }
    }
}

/* Query rows go by blocks, each over the keys its rows can see (up to the causal end of its
 * last row and the batch's last key that is not padding): with causal attention blocks of RB
 * (the row blocks tile() makes itself), else one block of all Tq rows (smaller blocks only
 * added calls: 4% slower at T 64). */
static int row_step(const KAttention *a) { return a->causal ? RB : a->Tq; }

/* A rows [i0, i1) (rows Tk apart) = dropout(P) of the head's rows (P's first element p0),
 * keys j < kend: P / (1 - p) where kept, else 0 */
static K_ALWAYS_INLINE void dropout_rows(Real *A, const Real *P, const KAttention *a, size_t p0,
                                         int Tk, int i0, int i1, int kend, Real inv_keep) {
    for (int i = i0; i < i1; i++)
        for (int j = 0; j < kend; j++) {
            size_t e = p0 + (size_t)i * Tk + j;
            A[(size_t)i * Tk + j] = keep(a, e) ? P[e] * inv_keep : 0;
        }
}

/* Head h of batch b: the probabilities P[b, h] (Tq x Tk) and the output rows y[b, h] (fp32;
 * under bf16 forward_head_bf16 below) */
static void forward_head(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a, int b, int h, Real *scratch) {
    int Tq = n_q(a, b), Tk = n_k(a, b), HS = a->HS, g = h / (a->NH / a->NKV);
    int vis = visible_end(a, b);
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    Real *kt = scratch, *vp = kt + (size_t)HS * padded(a->Tk);
    Real *A = vp + (size_t)a->Tk * padded(HS), *padrow = A + (size_t)a->Tq * a->Tk;
    size_t p0 = p_at(a, b, h); /* the head's first element of P */
    size_t lq = a->qs[2], ly = a->ys[2], ldv;
    Real *Ph = P + p0;
    const Real *qh = q + q_at(a, a->qs, b, h);
    Real *yh = y + q_at(a, a->ys, b, h);
    transpose_pad(kt, k + k_at(a, b, g), a->ks[2], vis, HS);
    const Real *vb = as_operand(vp, v + k_at(a, b, g), a->ks[2], vis, HS, &ldv);
#ifdef ATTN_VROWS
    if (pad_of(a, b)) pad_row(padrow, pad_of(a, b), Tk);
#endif
    for (int i0 = 0, step = row_step(a); i0 < Tq; i0 += step) {
        int nb = Tq - i0 < step ? Tq - i0 : step, kend = key_end(a, b, i0 + nb - 1);
        if (kend > vis) kend = vis;
        Real *Pb = Ph + (size_t)i0 * Tk;
        tile(Pb, (size_t)Tk, qh + (size_t)i0 * lq, lq, 1, nb, HS, kt, (size_t)padded(vis), kend,
             0); /* raw q.k dots */
        softmax_rows(Ph, i0, i0 + nb, vis, a, b, h, scale, padrow);
        /* y = A v with A = dropout(P) (P itself without dropout): sums over keys in order */
        const Real *Ab = Pb;
        if (a->p != 0) {
            dropout_rows(A, P, a, p0, Tk, i0, i0 + nb, kend, inv_keep);
            Ab = A + (size_t)i0 * Tk;
        }
        tile(yh + (size_t)i0 * ly, ly, Ab, (size_t)Tk, 1, nb, kend, vb, ldv, HS, 0);
    }
}

/* ---- the products under --precision bf16 (the definition: the opening comment) ----
 * An operand on the left of a product (X of C = X Bp) is packed in strips of BMR rows, per
 * pair of its K one word a row (k_bf16_pack with W = BMR: strip i0 at word i0 np, np its
 * pairs); one on the right in panels of BNR columns, per pair one word a column (panel j0 at
 * word j0 np). k_bf16_tile (k_gemm_bf16.c's micro-kernel) sums a strip against a panel. */
enum { BMR = K_BF16_MR, BNR = K_BF16_NR };
static int pairs_of(int K) { return (K + 1) / 2; }
static size_t up_to(int n, int m) { return (size_t)((n + m - 1) / m) * (size_t)m; }

/* op(X) (M, K) into strips at d (X stored (M, K) with rows ld apart, or (K, M) when t) */
static void pack_strips(uint32_t *d, const Real *X, size_t ld, int t, int M, int K) {
    for (int i0 = 0; i0 < M; i0 += BMR)
        k_bf16_pack(d + (size_t)i0 * pairs_of(K), X, ld, t, K, i0, M - i0 < BMR ? M - i0 : BMR, 0,
                    K, BMR);
}

/* op(B) (K, N) into panels at d (B stored (K, N) with rows ld apart, or (N, K) when t) */
static void pack_panels(uint32_t *d, const Real *B, size_t ld, int t, int K, int N) {
    for (int j0 = 0; j0 < N; j0 += BNR)
        k_bf16_pack(d + (size_t)j0 * pairs_of(K), B, ld, !t, K, j0, N - j0 < BNR ? N - j0 : BNR, 0,
                    K, BNR);
}

/* C (M, N) (rows ldc apart) = or (add) += the sums over np pairs of strips xs (packed with
 * npx pairs) and panels bp (npb pairs; bp may point at a later pair of the first panel) */
static void tile_bf16(Real *C, size_t ldc, const uint32_t *xs, int npx, int M, const uint32_t *bp,
                      int npb, int N, int np, int add) {
    for (int i0 = 0; i0 < M; i0 += BMR)
        for (int j0 = 0; j0 < N; j0 += BNR)
            k_bf16_tile(np, xs + (size_t)i0 * npx, bp + (size_t)j0 * npb, C + (size_t)i0 * ldc + j0,
                        ldc, M - i0 < BMR ? M - i0 : BMR, N - j0 < BNR ? N - j0 : BNR, add);
}

/* Reals that n words take */
static size_t words(size_t n) { return (n * sizeof(uint32_t) + sizeof(Real) - 1) / sizeof(Real); }

/* the scratch of forward_head_bf16: A (Tq x Tk), padrow (Tk), then words: k^T's panels (HS,
 * Tk), v's panels (Tk, HS), q's strips (Tq, HS), A's strips (Tq, Tk) */
static size_t forward_scratch_bf16(const KAttention *a) {
    int hp = pairs_of(a->HS), kp = pairs_of(a->Tk);
    return (size_t)a->Tq * a->Tk + (size_t)a->Tk +
           words((size_t)hp * up_to(a->Tk, BNR) + (size_t)kp * up_to(a->HS, BNR) +
                 up_to(a->Tq, BMR) * hp + up_to(a->Tq, BMR) * kp);
}

/* forward_head under bf16: the same P (its scores the bf16 sums q k^T) and y = bf16 A v, query
 * rows in blocks of BMR with causal attention (else one block) */
static void forward_head_bf16(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                              const KAttention *a, int b, int h, Real *scratch) {
    int Tq = n_q(a, b), Tk = n_k(a, b), HS = a->HS, g = h / (a->NH / a->NKV);
    int vis = visible_end(a, b), hp = pairs_of(HS), vp = pairs_of(vis);
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    Real *A = scratch, *padrow = A + (size_t)a->Tq * a->Tk;
    uint32_t *kw = (uint32_t *)(padrow + a->Tk);
    uint32_t *vw = kw + (size_t)hp * up_to(a->Tk, BNR);
    uint32_t *qw = vw + (size_t)pairs_of(a->Tk) * up_to(HS, BNR);
    uint32_t *aw = qw + up_to(a->Tq, BMR) * hp;
    size_t p0 = p_at(a, b, h), kv = k_at(a, b, g), ly = a->ys[2];
    Real *Ph = P + p0, *yh = y + q_at(a, a->ys, b, h);
    pack_panels(kw, k + kv, a->ks[2], 1, HS, vis); /* k^T (HS, vis) */
    pack_panels(vw, v + kv, a->ks[2], 0, vis, HS); /* v (vis, HS) */
    pack_strips(qw, q + q_at(a, a->qs, b, h), a->qs[2], 0, Tq, HS);
    (void)padrow;
#ifdef ATTN_VROWS
    if (pad_of(a, b)) pad_row(padrow, pad_of(a, b), Tk);
#endif
    for (int i0 = 0, step = a->causal ? BMR : Tq; i0 < Tq; i0 += step) {
        int nb = Tq - i0 < step ? Tq - i0 : step, kend = key_end(a, b, i0 + nb - 1);
        if (kend > vis) kend = vis;
        Real *Pb = Ph + (size_t)i0 * Tk;
        tile_bf16(Pb, (size_t)Tk, qw + (size_t)i0 * hp, hp, nb, kw, hp, kend, hp, 0); /* q.k */
        softmax_rows(Ph, i0, i0 + nb, vis, a, b, h, scale, padrow);
        const Real *Ab = Pb;
        if (a->p != 0) {
            dropout_rows(A, P, a, p0, Tk, i0, i0 + nb, kend, inv_keep);
            Ab = A + (size_t)i0 * Tk;
        }
        pack_strips(aw, Ab, (size_t)Tk, 0, nb, kend);
        tile_bf16(yh + (size_t)i0 * ly, ly, aw, pairs_of(kend), nb, vw, vp, HS, pairs_of(kend),
                  0); /* y = A v */
    }
}

/* Pd[b, h] (Tq, Tk) = head h of batch b of P (packed rows) at its positions, 0 elsewhere */
static void unpack_head(Real *Pd, const Real *P, const KAttention *a, int b, int h) {
    int Tk = a->Tk;
    size_t plane = (size_t)a->Tq * Tk;
    Real *d = Pd + ((size_t)b * a->NH + h) * plane;
    const Real *src = P + p_at(a, b, h);
    int nq = n_q(a, b), nk = n_k(a, b);
    const int *qp = a->qpos + a->qoff[b], *kp = a->kpos + a->koff[b];
    memset(d, 0, plane * sizeof(Real));
    for (int i = 0; i < nq; i++)
        for (int j = 0; j < nk; j++) d[(size_t)qp[i] * Tk + kp[j]] = src[(size_t)i * nk + j];
}

void k_attention_forward(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a) {
    k_attention_forward_probs(y, P, NULL, q, k, v, a);
}

/* ---- which thread computes which pair ----
 * Threads take the (batch, head) pairs of the forward, (batch, kv head) of the backward, a few
 * at a time as they come free, not in fixed halves: with packed rows the batch elements differ
 * in length (seq2seq-small's rows hold 12 to 20 tokens, and the fixed halves of the pairs
 * differ by 5% of the work), and a thread that starts late (woken from sleep, or descheduled
 * by another process) leaves its pairs to the others instead of making them wait at the
 * barrier. Each pair is computed whole by one thread and writes its own rows and columns, so
 * the values do not depend on who took it.
 * Where a thread starts: pair p = b * n + h (n heads a batch element) lies in the home range of
 * one thread, range t the batch elements whose middle query row is in the t-th of T equal
 * parts of the rows: the rows thread t of the products around attention writes and reads
 * (k_gemm.c cuts C into T strips of rows on most of their shapes: every output projection and
 * input gradient, some input projections; others it cuts by columns, and then q, k and v come
 * from different cores in any order). A thread takes chunks from the front of its own range,
 * then, when it is empty, from the back of the others' (the end farthest from their owners), so
 * it mostly reads rows its own core wrote and writes rows its own core reads next; the forward
 * and the backward have the same homes, so the backward finds its probabilities where it wrote
 * them. (Taking pairs in loop order, as schedule(dynamic) did, gave each thread about half its
 * pairs from the other core.)
 * A range keeps in one 64-bit word how many of its pairs were taken from the front (low 32 bits)
 * and from the back (high 32 bits). A take is one atomic add that returns the word as it was,
 * with every earlier take in it: the take gets the pairs no earlier one got, clipped where the
 * front meets the back. The atomics only hand out pairs; no value is summed across threads.
 * Each range has its own cache line: an owner's takes stay in its core until others steal. */
typedef struct PairRange {
    _Alignas(64) uint64_t taken; /* pairs taken from the front (low 32 bits), the back (high) */
    int lo, hi;                  /* its pairs [lo, hi) */
} PairRange;

/* About 16 takes a thread over all the pairs */
static int pairs_chunk(int pairs, int T) {
    int c = pairs / (16 * T);
    return c > 1 ? c : 1;
}

/* r[0..T) = the home ranges of the B * n pairs (n a batch element's), none taken: range t ends
 * at the first batch element whose middle query row is past (t + 1) / T of all the rows */
static void pair_ranges(PairRange *r, int T, const KAttention *a, int n) {
    size_t rows = a->qoff ? (size_t)a->qoff[a->B] : (size_t)a->B * a->Tq;
    int b = 0;
    for (int t = 0; t < T; t++) {
        r[t].taken = 0, r[t].lo = b * n;
        for (; b < a->B; b++) {
            size_t mid = (a->qoff ? (size_t)a->qoff[b] : (size_t)b * a->Tq) + n_q(a, b) / 2;
            if (t < T - 1 && mid * T >= (t + 1) * rows) break;
        }
        r[t].hi = b * n;
    }
}

/* Up to c pairs of range r, from its front or (back) its back: [*p0, *p1); 0 when none is left */
static int take(PairRange *r, int c, int back, int *p0, int *p1) {
    uint64_t add = back ? (uint64_t)c << 32 : (uint64_t)c, was;
#pragma omp atomic capture
    {
        was = r->taken;
        r->taken += add;
    }
    int front = r->lo + (int)(uint32_t)was, end = r->hi - (int)(was >> 32);
    if (front >= end) return 0;
    *p0 = back && end - c > front ? end - c : front;
    *p1 = !back && front + c < end ? front + c : end;
    return 1;
}

/* One thread's walk over the pairs: its own range front to back, then the others' (t + 1, ...)
 * back to front, a chunk at a time */
typedef struct PairWalk {
    PairRange *r;
    int T, t, chunk;
    int v;           /* in range (t + v) % T: its own (v = 0), then the others' */
    int p, end, dir; /* the chunk left: pairs p, p + dir, ... before end */
} PairWalk;

static PairWalk pair_walk(PairRange *r, int T, int chunk) {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    return (PairWalk){r, T, t, chunk, 0, 0, 0, 1};
}

/* the thread's next pair into *p: 0 when none is left */
static int walk_next(PairWalk *w, int *p) {
    while (w->p == w->end) {
        if (w->v == w->T) return 0;
        int p0, p1;
        if (!take(&w->r[(w->t + w->v) % w->T], w->chunk, w->v > 0, &p0, &p1))
            w->v++;
        else if (w->v == 0)
            w->p = p0, w->end = p1, w->dir = 1;
        else
            w->p = p1 - 1, w->end = p0 - 1, w->dir = -1;
    }
    *p = w->p;
    w->p += w->dir;
    return 1;
}

/* the pair the thread likely takes after p (the next of its chunk, or of the next chunk on the
 * same side of the range; another thread may take it first), or -1 */
static int walk_guess(const PairWalk *w, int p) {
    const PairRange *r = &w->r[(w->t + w->v) % w->T];
    int g = p + w->dir;
    return g >= r->lo && g < r->hi ? g : -1;
}

/* threads a parallel region below may have (the ranges: one each) */
static int team_max(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

void k_attention_forward_probs(Real *y, Real *P, Real *Pd, const Real *q, const Real *k,
                               const Real *v, const KAttention *a) {
#ifdef AG_ATTN_REF
    k_attention_forward_ref(y, P, q, k, v, a);
    if (Pd) k_attention_probs_unpack(Pd, P, a);
    return;
#endif
    int NH = a->NH, T = team_max(), chunk = pairs_chunk(a->B * NH, T);
    size_t work = (size_t)a->B * NH * a->Tq * a->Tk * a->HS;
    PairRange ranges[T];
    pair_ranges(ranges, T, a, NH);
#pragma omp parallel if (work >= K_PAR_MIN)
    {
        Real *scratch = k_thread_scratch(K_SCRATCH_ATTENTION, forward_scratch(a));
        PairWalk w = pair_walk(ranges, T, chunk);
        for (int p; walk_next(&w, &p);) {
            int b = p / NH, h = p % NH, n = walk_guess(&w, p);
            if (n >= 0) { /* its rows, to come while this pair is computed */
                int nb = n / NH, nh = n % NH, g = nh / (NH / a->NKV);
                prefetch_rows(q + q_at(a, a->qs, nb, nh), a->qs[2], n_q(a, nb), a->HS, 0);
                prefetch_rows(k + k_at(a, nb, g), a->ks[2], n_k(a, nb), a->HS, 0);
                prefetch_rows(v + k_at(a, nb, g), a->ks[2], n_k(a, nb), a->HS, 0);
                prefetch_rows(P + p_at(a, nb, nh), 0, 1, n_q(a, nb) * n_k(a, nb), 1);
                prefetch_rows(y + q_at(a, a->ys, nb, nh), a->ys[2], n_q(a, nb), a->HS, 1);
            }
            if (k_bf16_products)
                forward_head_bf16(y, P, q, k, v, a, b, h, scratch);
            else
                forward_head(y, P, q, k, v, a, b, h, scratch);
            /* the thread that computes a head also unpacks it into Pd: no second parallel
             * region (one barrier less a call) and the head's P is still in its cache */
            if (Pd) unpack_head(Pd, P, a, b, h);
        }
    }
}

/* forward: s_ij = q_i.k_j / sqrt(HS), P = softmax over visible j, A = dropout(P), y = A v.
 * So gA_ij = gy_i.v_j, gP_ij = gA_ij m_ij / (1-p) (the same mask m), the softmax backward from
 * the saved output gs_ij = P_ij (gP_ij - sum_l gP_il P_il), and the raw dot's gradient is
 * G_ij = gs_ij / sqrt(HS). Then gq_i += sum_j G_ij k_j, gk_j += sum_i G_ij q_i and
 * gv_j += sum_i A_ij gy_i: as matrices gq += G k, gk += G^T q, gv += A^T gy.
 * Masked and fully masked rows have P = 0, so G = A = 0 there and nothing flows.
 * Here for key/value head g of batch b and every head h that reads it, in order h = g*group,
 * ..., so a key row's gradient adds one head's sum after the other. Keys past the batch's last
 * key that is not padding (visible_end) have P = 0 in every row: the products skip them.
 * Under bf16 (k_bf16_products) backward_group_bf16 below. */
static size_t backward_scratch_bf16(const KAttention *a);
static size_t backward_scratch(const KAttention *a) {
    if (k_bf16_products) return backward_scratch_bf16(a);
    size_t tq = (size_t)a->Tq, tk = (size_t)a->Tk, hs = (size_t)a->HS, hp = (size_t)padded(a->HS);
    /* vt, kp, G, A (with dropout), qp or gyp */
    return hs * padded(a->Tk) + tk * hp + tq * tk + tq * tk + tq * hp;
}

/* gx (rows of keys, ld apart) += X^T Y over the keys j < vis of batch b: X (Tq, Tk) read
 * transposed, Y (Tq, HS) with rows ldy apart (Tq, Tk: the batch's rows). Causal: a block of RB
 * keys from j0 is seen only from its first seer on (query row j0 - (Tk - Tq) in a full batch),
 * and X is 0 in the rows above, so the sums start there. With set, gx = X^T Y instead, and the
 * rows of the keys past vis (which no query sees) are set to 0. */
static void add_keys(Real *gx, size_t ld, const Real *X, const Real *Y, size_t ldy,
                     const KAttention *a, int b, int vis, int set) {
    int Tq = n_q(a, b), Tk = n_k(a, b), step = a->causal ? RB : vis;
    for (int j0 = 0; j0 < vis; j0 += step) {
        int nk = vis - j0 < step ? vis - j0 : step, i0 = a->causal ? first_seer(a, b, j0) : 0;
        tile(gx + (size_t)j0 * ld, ld, X + (size_t)i0 * Tk + j0, 1, (size_t)Tk, nk, Tq - i0,
             Y + (size_t)i0 * ldy, ldy, a->HS, !set);
    }
    if (set)
        for (int j = vis; j < Tk; j++) memset(gx + (size_t)j * ld, 0, (size_t)a->HS * sizeof(Real));
}

/* Rows [i0, i1) of G (rows Tk apart), gA = gy v^T on entry (keys j < kend), become the raw
 * dots' gradients: gP = gA m / (1-p) (0 where dropped), G = P (gP - sum_j gP P) scale, and 0
 * for kend <= j < vis (where G^T q's product reads) */
static K_ALWAYS_INLINE void softmax_back_rows(Real *G, const Real *Ph, const KAttention *a,
                                              size_t p0, int Tk, int i0, int i1, int kend, int vis,
                                              Real inv_keep, Real scale) {
    for (int i = i0; i < i1; i++) {
        const Real *pi = Ph + (size_t)i * Tk;
        Real *Gi = G + (size_t)i * Tk;
        if (a->p != 0) /* gP = gA m / (1-p): 0 where dropped */
            for (int j = 0; j < kend; j++)
                Gi[j] = keep(a, p0 + (size_t)i * Tk + j) ? Gi[j] * inv_keep : 0;
        Real D = k_row_dot_nz_v(Gi, pi, kend); /* sum_j gP_ij P_ij */
        for (int j = 0; j < vis; j++)          /* 0 past kend, where gk's product reads */
            Gi[j] = j < kend && pi[j] != 0 ? pi[j] * (Gi[j] - D) * scale : 0;
    }
}

/* store: as k_attention_backward_store's; a key/value head's gradient is set by the first head
 * that reads it, then added to by the others */
static void backward_group(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                           const Real *v, const Real *P, const Real *gy, const KAttention *a, int b,
                           int g, Real *scratch, unsigned store) {
    int Tq = n_q(a, b), Tk = n_k(a, b), HS = a->HS, group = a->NH / a->NKV;
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    Real *vt = scratch, *kp = vt + (size_t)HS * padded(a->Tk);
    Real *G = kp + (size_t)a->Tk * padded(HS);
    Real *A = G + (size_t)a->Tq * a->Tk, *xp = A + (size_t)a->Tq * a->Tk;
    size_t kv = k_at(a, b, g), lk = a->ks[2], lq = a->qs[2], ly = a->ys[2], ldk = 0, ldx;
    int vis = visible_end(a, b);
    const Real *kb = NULL;
    if (gq || gk) transpose_pad(vt, v + kv, lk, vis, HS);
    if (gq) kb = as_operand(kp, k + kv, lk, vis, HS, &ldk);
    for (int h = g * group; h < (g + 1) * group; h++) {
        size_t p0 = p_at(a, b, h);
        int first = h == g * group; /* the first head of the group: sets gk and gv (store) */
        const Real *Ph = P + p0, *gyh = gy + q_at(a, a->ys, b, h);
        if (gq || gk) { /* by blocks of query rows (row_step), each up to the keys it sees */
            for (int i0 = 0, step = row_step(a); i0 < Tq; i0 += step) {
                int nb = Tq - i0 < step ? Tq - i0 : step, kend = key_end(a, b, i0 + nb - 1);
                if (kend > vis) kend = vis;
                Real *Gb = G + (size_t)i0 * Tk;
                tile(Gb, (size_t)Tk, gyh + (size_t)i0 * ly, ly, 1, nb, HS, vt, (size_t)padded(vis),
                     kend, 0); /* gy v^T */
                softmax_back_rows(G, Ph, a, p0, Tk, i0, i0 + nb, kend, vis, inv_keep, scale);
                if (gq)
                    tile(gq + q_at(a, a->qs, b, h) + (size_t)i0 * lq, lq, Gb, (size_t)Tk, 1, nb,
                         kend, kb, ldk, HS, !(store & 1));
            }
            if (gk) { /* gk += G^T q */
                const Real *qb = as_operand(xp, q + q_at(a, a->qs, b, h), lq, Tq, HS, &ldx);
                add_keys(gk + kv, lk, G, qb, ldx, a, b, vis, first && (store & 2));
            }
        }
        if (gv) { /* gv += A^T gy */
            const Real *Ah = Ph;
            if (a->p != 0) {
                dropout_rows(A, P, a, p0, Tk, 0, Tq, vis, inv_keep);
                Ah = A;
            }
            /* gyb first: as an argument beside ldx, ldx could be read before as_operand set
             * it (the order of arguments is unspecified; GCC read the stale ldx of q) */
            const Real *gyb = as_operand(xp, gyh, ly, Tq, HS, &ldx);
            add_keys(gv + kv, lk, Ah, gyb, ldx, a, b, vis, first && (store & 4));
        }
    }
}

/* the scratch of backward_group_bf16: G and A (Tq x Tk), then words: v^T's panels (HS, Tk),
 * k's panels (Tk, HS), gy's strips (Tq, HS), G's strips (Tq, Tk), q's or gy's panels (Tq,
 * HS), two strips of G^T or A^T (2 BMR, Tq) */
static size_t backward_scratch_bf16(const KAttention *a) {
    int hp = pairs_of(a->HS), kp = pairs_of(a->Tk), qp = pairs_of(a->Tq);
    return 2 * (size_t)a->Tq * a->Tk +
           words((size_t)hp * up_to(a->Tk, BNR) + (size_t)kp * up_to(a->HS, BNR) +
                 up_to(a->Tq, BMR) * hp + up_to(a->Tq, BMR) * kp + (size_t)qp * up_to(a->HS, BNR) +
                 2 * (size_t)BMR * qp);
}

/* add_keys under bf16: gx (rows of keys, ld apart) = or += X^T Y, X (Tq, Tk) stored, Y's
 * panels yw (Tq, HS): strips of BMR keys, two at a time (16 keys of a row of X read at once),
 * each pair of strips of X^T packed from the first pair of query rows that sees its first key
 * (the pairs above are X's zeros: they add nothing to a sum from +0); ts: two strips' scratch */
static void add_keys_bf16(Real *gx, size_t ld, const Real *X, const uint32_t *yw, uint32_t *ts,
                          const KAttention *a, int b, int vis, int set) {
    int Tq = n_q(a, b), Tk = n_k(a, b), qp = pairs_of(Tq);
    for (int j0 = 0; j0 < vis; j0 += 2 * BMR) {
        int nk = vis - j0, i0 = a->causal ? first_seer(a, b, j0) & ~1 : 0;
        int np = pairs_of(Tq - i0);
        uint32_t *t1 = ts + (size_t)BMR * np;
        k_bf16_pack_strips2(ts, nk > BMR ? t1 : NULL, X, (size_t)Tk, Tq, j0, nk, i0, Tq - i0);
        for (int s = 0; s < 2 && s * BMR < nk; s++) {
            int n = nk - s * BMR < BMR ? nk - s * BMR : BMR;
            tile_bf16(gx + (size_t)(j0 + s * BMR) * ld, ld, s ? t1 : ts, np, n,
                      yw + (size_t)(i0 / 2) * BNR, qp, a->HS, np, !set);
        }
    }
    if (set)
        for (int j = vis; j < Tk; j++) memset(gx + (size_t)j * ld, 0, (size_t)a->HS * sizeof(Real));
}

/* backward_group under bf16: the same G, and the products gy v^T, G k, G^T q, A^T gy in bf16;
 * query rows in blocks of BMR with causal attention (else one block) */
static void backward_group_bf16(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                                const Real *v, const Real *P, const Real *gy, const KAttention *a,
                                int b, int g, Real *scratch, unsigned store) {
    int Tq = n_q(a, b), Tk = n_k(a, b), HS = a->HS, group = a->NH / a->NKV;
    int vis = visible_end(a, b), hp = pairs_of(HS), vp = pairs_of(vis);
    Real scale = (Real)(1.0 / sqrt((double)HS)), inv_keep = (Real)(1.0 / (1.0 - a->p));
    Real *G = scratch, *A = G + (size_t)a->Tq * a->Tk;
    uint32_t *vtw = (uint32_t *)(A + (size_t)a->Tq * a->Tk);
    uint32_t *kw = vtw + (size_t)hp * up_to(a->Tk, BNR);
    uint32_t *gys = kw + (size_t)pairs_of(a->Tk) * up_to(HS, BNR);
    uint32_t *gs = gys + up_to(a->Tq, BMR) * hp;
    uint32_t *yw = gs + up_to(a->Tq, BMR) * pairs_of(a->Tk);
    uint32_t *ts = yw + (size_t)pairs_of(a->Tq) * up_to(HS, BNR);
    size_t kv = k_at(a, b, g), lk = a->ks[2], lq = a->qs[2], ly = a->ys[2];
    if (gq || gk) pack_panels(vtw, v + kv, lk, 1, HS, vis); /* v^T (HS, vis) */
    if (gq) pack_panels(kw, k + kv, lk, 0, vis, HS);        /* k (vis, HS) */
    for (int h = g * group; h < (g + 1) * group; h++) {
        size_t p0 = p_at(a, b, h);
        int first = h == g * group; /* the first head of the group: sets gk and gv (store) */
        const Real *Ph = P + p0, *gyh = gy + q_at(a, a->ys, b, h);
        if (gq || gk) {
            pack_strips(gys, gyh, ly, 0, Tq, HS);
            for (int i0 = 0, step = a->causal ? BMR : Tq; i0 < Tq; i0 += step) {
                int nb = Tq - i0 < step ? Tq - i0 : step, kend = key_end(a, b, i0 + nb - 1);
                if (kend > vis) kend = vis;
                Real *Gb = G + (size_t)i0 * Tk;
                tile_bf16(Gb, (size_t)Tk, gys + (size_t)i0 * hp, hp, nb, vtw, hp, kend, hp,
                          0); /* gy v^T */
                softmax_back_rows(G, Ph, a, p0, Tk, i0, i0 + nb, kend, vis, inv_keep, scale);
                if (gq) { /* gq: the product G k */
                    pack_strips(gs, Gb, (size_t)Tk, 0, nb, kend);
                    tile_bf16(gq + q_at(a, a->qs, b, h) + (size_t)i0 * lq, lq, gs, pairs_of(kend),
                              nb, kw, vp, HS, pairs_of(kend), !(store & 1));
                }
            }
            if (gk) { /* gk += G^T q */
                pack_panels(yw, q + q_at(a, a->qs, b, h), lq, 0, Tq, HS);
                add_keys_bf16(gk + kv, lk, G, yw, ts, a, b, vis, first && (store & 2));
            }
        }
        if (gv) { /* gv += A^T gy */
            const Real *Ah = Ph;
            if (a->p != 0) {
                dropout_rows(A, P, a, p0, Tk, 0, Tq, vis, inv_keep);
                Ah = A;
            }
            pack_panels(yw, gyh, ly, 0, Tq, HS);
            add_keys_bf16(gv + kv, lk, Ah, yw, ts, a, b, vis, first && (store & 4));
        }
    }
}

void k_attention_backward(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k, const Real *v,
                          const Real *P, const Real *gy, const KAttention *a) {
    k_attention_backward_store(gq, gk, gv, q, k, v, P, gy, a, 0);
}

#ifdef AG_ATTN_REF
/* The reference adds: the gradients it is to set are zeroed first, the heads' columns of every
 * query row (gq) and of every key row (gk, gv). */
static void zero_heads(Real *g, const size_t *st, int rows_of_b, int heads, const KAttention *a,
                       int b, int which_q) {
    for (int h = 0; h < heads; h++) {
        size_t o = which_q ? q_at(a, st, b, h) : k_at(a, b, h);
        for (int i = 0; i < rows_of_b; i++)
            memset(g + o + (size_t)i * st[2], 0, (size_t)a->HS * sizeof(Real));
    }
}
#endif

void k_attention_backward_store(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                                const Real *v, const Real *P, const Real *gy, const KAttention *a,
                                unsigned store) {
#ifdef AG_ATTN_REF
    for (int b = 0; b < a->B; b++) {
        if (gq && (store & 1)) zero_heads(gq, a->qs, n_q(a, b), a->NH, a, b, 1);
        if (gk && (store & 2)) zero_heads(gk, a->ks, n_k(a, b), a->NKV, a, b, 0);
        if (gv && (store & 4)) zero_heads(gv, a->ks, n_k(a, b), a->NKV, a, b, 0);
    }
    k_attention_backward_ref(gq, gk, gv, q, k, v, P, gy, a);
    return;
#endif
    int NKV = a->NKV, group = a->NH / NKV, T = team_max(), chunk = pairs_chunk(a->B * NKV, T);
    size_t work = (size_t)a->B * a->NH * a->Tq * a->Tk * a->HS;
    if (!gq && !gk && !gv) return;
    PairRange ranges[T]; /* the forward's homes: the same batch elements */
    pair_ranges(ranges, T, a, NKV);
#pragma omp parallel if (work >= K_PAR_MIN)
    {
        Real *scratch = k_thread_scratch(K_SCRATCH_ATTENTION, backward_scratch(a));
        PairWalk w = pair_walk(ranges, T, chunk);
        for (int p; walk_next(&w, &p);) {
            int n = walk_guess(&w, p);
            if (n >= 0) {
                int nb = n / NKV, ng = n % NKV;
                /* its heads' probabilities: one block of group (nq, nk) planes */
                prefetch_rows(P + p_at(a, nb, ng * group), 0, 1, group * n_q(a, nb) * n_k(a, nb),
                              0);
                prefetch_rows(k + k_at(a, nb, ng), a->ks[2], n_k(a, nb), a->HS, 0);
                prefetch_rows(v + k_at(a, nb, ng), a->ks[2], n_k(a, nb), a->HS, 0);
                for (int h = ng * group; h < (ng + 1) * group; h++) {
                    prefetch_rows(q + q_at(a, a->qs, nb, h), a->qs[2], n_q(a, nb), a->HS, 0);
                    prefetch_rows(gy + q_at(a, a->ys, nb, h), a->ys[2], n_q(a, nb), a->HS, 0);
                }
            }
            if (k_bf16_products)
                backward_group_bf16(gq, gk, gv, q, k, v, P, gy, a, p / NKV, p % NKV, scratch,
                                    store);
            else
                backward_group(gq, gk, gv, q, k, v, P, gy, a, p / NKV, p % NKV, scratch, store);
        }
    }
}

void k_attention_probs_unpack(Real *Pd, const Real *P, const KAttention *a) {
    int B = a->B, NH = a->NH;
    size_t plane = (size_t)a->Tq * a->Tk;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * NH * plane >= K_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) unpack_head(Pd, P, a, b, h);
}

void k_attention_strides_heads(KAttention *a) {
    size_t HS = (size_t)a->HS;
    a->qs[0] = (size_t)a->NH * a->Tq * HS, a->qs[1] = (size_t)a->Tq * HS, a->qs[2] = HS;
    a->ys[0] = a->qs[0], a->ys[1] = a->qs[1], a->ys[2] = HS;
    a->ks[0] = (size_t)a->NKV * a->Tk * HS, a->ks[1] = (size_t)a->Tk * HS, a->ks[2] = HS;
}

void k_head_gate_forward(Real *y, const Real *x, const Real *gate, int B, int NH, int T, int HS) {
    size_t n = (size_t)T * HS; /* one head's block of one batch element */
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t o = ((size_t)b * NH + h) * n;
            for (size_t e = 0; e < n; e++) y[o + e] = gate[h] * x[o + e];
        }
}
/* forward: y[b,h,t,d] = gate[h] x[b,h,t,d], so gx = gate[h] gy and ggate[h] is the sum over
 * b, t, d of x gy: one thread per head, in index order */
void k_head_gate_backward(Real *gx, Real *ggate, const Real *x, const Real *gate, const Real *gy,
                          int B, int NH, int T, int HS) {
    size_t n = (size_t)T * HS;
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                size_t o = ((size_t)b * NH + h) * n;
                for (size_t e = 0; e < n; e++) gx[o + e] += gate[h] * gy[o + e];
            }
    }
    if (!ggate) return;
#pragma omp parallel for schedule(static) if ((size_t)B * NH * n >= K_PAR_MIN)
    for (int h = 0; h < NH; h++) {
        Real s = 0;
        for (int b = 0; b < B; b++) {
            size_t o = ((size_t)b * NH + h) * n;
            for (size_t e = 0; e < n; e++) s += x[o + e] * gy[o + e];
        }
        ggate[h] += s;
    }
}
