/* k_gemm_bf16.c: the matrix product with bf16 inputs and fp32 sums, C (M,N) = op(A) op(B)
 * (+ C), for the bf16 precision of a training step (kernels.h's k_precision): the operands are
 * rounded to bf16 (round to nearest even, k_bf16_round) as they are packed, and every product
 * is summed in fp32. With AVX512_BF16 (the build's -march has it: __AVX512BF16__) the
 * micro-kernel is vdpbf16ps; every other build runs an exact emulation of that instruction,
 * with the same bits.
 *
 * The arithmetic, the one definition both forms compute. K is cut into blocks of KB (even;
 * fixed boundaries 0, KB, 2KB, ...) and each block into pairs (k, k+1), an odd K padded with a
 * zero pair half. Per element of C, each block's sum starts at +0 and takes its pairs in
 * order, each pair as vdpbf16ps takes it (Intel SDM, VDPBF16PS: the odd half first):
 *     s = ftz(fma(a[k+1], b[k+1], s));  s = ftz(fma(a[k], b[k], s))
 * where ftz(x) is x, or a zero of x's sign when |x| < FLT_MIN (the instruction flushes its
 * result; the products of two bf16 are exact in fp32, so the fma adds the exact product). The
 * first block's sum is stored in C (or added to it when accumulating), each later one added:
 * C = C + s, an fp32 add. Checked bit for bit on an AMD Zen 5 against the instruction (tests:
 * tests/tensor/test_gemm_bf16.c): the order (odd half first), the flushed sums and the
 * products kept exact even when they are below FLT_MIN.
 *
 * Layout: op(B) is packed into panels of NR columns, per pair one 32-bit word per column
 * (bf16 of k in the low half, of k+1 in the high half: vdpbf16ps's element order); op(A) into
 * strips of MR rows, per pair one word per row, broadcast to every lane. Threads split C into
 * disjoint strips of rows (or panels of columns when there are fewer strips than threads):
 * every element is computed the same way whoever computes it, so the bits do not depend on the
 * thread count. Scratch per thread from k_thread_scratch (K_SCRATCH_BF16).
 * The packing and the micro-kernel also serve attention's products under bf16 (k_attention.c,
 * through kernels.h's k_bf16_pack, k_bf16_pack_strips2 and k_bf16_tile).
 * Not here: the fp32 product, and where a step's products choose this one (k_gemm.c's gemm and
 * gemm_team, so that every matmul and Linear of k_matmul.c follows). Read next: k_matmul.c. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "k_simd.h"
#include "kernels.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && !defined(AG_SIMD_PORTABLE)
#include <immintrin.h>
#define BF16_HW 1
#endif

enum { BMR = K_BF16_MR, BNR = K_BF16_NR, KB = K_BF16_KB, BNC = 512 };

static inline uint16_t round_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN, quiet */
    if (!(u & 0x7f800000u)) return (uint16_t)((u >> 16) & 0x8000u); /* 0 or denormal: +-0 */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

uint16_t k_bf16_round(float x) { return round_bf16(x); }

float k_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int k_bf16_native(void) {
#ifdef BF16_HW
    return 1;
#else
    return 0;
#endif
}

/* the word of a pair: bf16(lo) in the low half, bf16(hi) in the high half */
static inline uint32_t pair_word(Real lo, Real hi) {
    return (uint32_t)round_bf16((float)lo) | (uint32_t)round_bf16((float)hi) << 16;
}

/* op(X)[r, k] of a stored (R,K) matrix, or of (K,R) read transposed when t (rows ld apart) */
static inline Real at(const Real *X, size_t ld, int t, int r, int k) {
    return t ? X[(size_t)k * ld + r] : X[(size_t)r * ld + k];
}

#if !defined(BF16_HW) || defined(AG_REAL_DOUBLE)
/* rows [r0, r0+rn) of op(X) (R,K; the stored matrix's rows ld apart), pairs of k in [k0,
 * k0+kc): for each pair, W words (one per row, 0 past rn) at d; kc even except at the end of K
 * (the missing half 0) */
static void pack_ld(uint32_t *d, const Real *X, size_t ld, int t, int K, int r0, int rn, int k0,
                    int kc, int W) {
    for (int q = 0; q < kc; q += 2, d += W) {
        int k = k0 + q;
        for (int r = 0; r < rn; r++) {
            Real lo = at(X, ld, t, r0 + r, k);
            Real hi = k + 1 < K ? at(X, ld, t, r0 + r, k + 1) : 0;
            d[r] = pair_word(lo, hi);
        }
        for (int r = rn; r < W; r++) d[r] = 0;
    }
}

/* two A strips of op(X) read transposed (X stored (K,R)): rows [r0, r0+8) into d0 and [r0+8,
 * r0+16) into d1 (NULL: none), rn of the 16 rows real (the rest 0); pack_pairs' words */
static void strips2_ld(uint32_t *d0, uint32_t *d1, const Real *X, size_t ld, int K, int r0, int rn,
                       int k0, int kc) {
    pack_ld(d0, X, ld, 1, K, r0, rn < 8 ? rn : 8, k0, kc, 8);
    if (d1) pack_ld(d1, X, ld, 1, K, r0 + 8, rn > 16 ? 8 : rn - 8, k0, kc, 8);
}

#else
/* The same packing with vcvtneps2bf16, which rounds as round_bf16 does (to nearest even,
 * denormals to a zero of their sign, NaN kept quiet: checked on every one of the 2^32 floats).
 * t: the pair's two halves are rows k and k+1 of the stored (K,R) matrix, each contiguous in
 * r: 16 columns at a time, both rounded at once and their words interleaved. Not t: a row r of the
 * stored (R,K) matrix holds its pairs in order, so its bf16 values read as 32-bit words are
 * the pair words; they go to column r of d (a transpose). */
/* the words of 16 pairs (lo[i], hi[i]) for the i where m is set, 0 elsewhere (hi read only when
 * two, else 0): both rows' 16 values rounded by one vcvtne2ps2bf16, their words interleaved */
static inline __m512i pair_words16(const float *lo, const float *hi, __mmask16 m, int two) {
    static const short pick[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                   8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    __m512 h = two ? _mm512_maskz_loadu_ps(m, hi) : _mm512_setzero_ps();
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(pick),
                                    (__m512i)_mm512_cvtne2ps_pbh(h, _mm512_maskz_loadu_ps(m, lo)));
}

/* rows [r0, r0+rn) (rn <= 8, the rest 0) of the stored (R,K) X, pairs of k in [k0, k0+kc): an
 * A strip, 8 words a pair. 16 pairs at a time: each row's 16 words in a register, the 8 x 16
 * words turned over by unpacks (rows 0-3 and 4-7 of 4 pairs in each) and a qword permute that
 * joins a pair's two halves, one 8-word store a pair */
static void strip8(uint32_t *d, const Real *X, size_t ld, int r0, int rn, int k0, int kc) {
    static const long long lo[8] = {0, 1, 8, 9, 2, 3, 10, 11}, hi[8] = {4, 5, 12, 13, 6, 7, 14, 15};
    __m512i join_lo = _mm512_loadu_si512(lo), join_hi = _mm512_loadu_si512(hi);
    int np = (kc + 1) / 2;
    for (int q = 0; q < np; q += 16) {
        int n = kc - 2 * q < 32 ? kc - 2 * q : 32; /* values left of each row's block */
        __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
        __mmask16 m1 = (__mmask16)(n <= 16 ? 0u : n >= 32 ? 0xffffu : (1u << (n - 16)) - 1u);
        __m512i w[8], t[8], u[8];
        for (int i = 0; i < 8; i++) {
            w[i] = _mm512_setzero_si512();
            if (i < rn) {
                const float *x = X + (size_t)(r0 + i) * ld + k0 + 2 * q;
                w[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + 16),
                                                    _mm512_maskz_loadu_ps(m0, x));
            }
        }
        for (int i = 0; i < 8; i += 2) { /* rows i, i+1 of pairs 4l, 4l+1 | 4l+2, 4l+3 */
            t[i] = _mm512_unpacklo_epi32(w[i], w[i + 1]);
            t[i + 1] = _mm512_unpackhi_epi32(w[i], w[i + 1]);
        }
        for (int h = 0; h < 8; h += 4) { /* rows h..h+3 of pair 4l + j in lane l of u[h/4*4+j] */
            u[h] = _mm512_unpacklo_epi64(t[h], t[h + 2]);
            u[h + 1] = _mm512_unpackhi_epi64(t[h], t[h + 2]);
            u[h + 2] = _mm512_unpacklo_epi64(t[h + 1], t[h + 3]);
            u[h + 3] = _mm512_unpackhi_epi64(t[h + 1], t[h + 3]);
        }
        int nq = np - q < 16 ? np - q : 16;
        for (int j = 0; j < 4; j++) {
            __m512i a = _mm512_permutex2var_epi64(u[j], join_lo, u[4 + j]); /* pairs j, 4+j */
            __m512i b = _mm512_permutex2var_epi64(u[j], join_hi, u[4 + j]); /* 8+j, 12+j */
            __m256i part[4] = {_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1),
                               _mm512_castsi512_si256(b), _mm512_extracti64x4_epi64(b, 1)};
            for (int l = 0; l < 4; l++)
                if (4 * l + j < nq)
                    _mm256_storeu_si256((__m256i *)(d + (size_t)(q + 4 * l + j) * 8), part[l]);
        }
    }
}

static void pack_ld(uint32_t *d, const Real *X, size_t ld, int t, int K, int r0, int rn, int k0,
                    int kc, int W) {
    if (t) {
        for (int q = 0; q < kc; q += 2, d += W) {
            int k = k0 + q;
            const float *lo = X + (size_t)k * ld + r0, *hi = lo + ld;
            for (int r = 0; r < W; r += 16) {
                int n = rn - r < 0 ? 0 : rn - r > 16 ? 16 : rn - r;
                __mmask16 m = (__mmask16)((1u << n) - 1u),
                          st = (__mmask16)((1u << (W - r < 16 ? W - r : 16)) - 1u);
                _mm512_mask_storeu_epi32(d + r, st, pair_words16(lo + r, hi + r, m, k + 1 < K));
            }
        }
        return;
    }
    /* by blocks of 16 rows (8 for an A strip: strip8) and 16 pairs: the rows' words into a
     * 16 x 16 block (rows past rn 0), turned over in registers (k_simd.h's transpose_tile: the
     * words only move) into 16 pairs of W words */
    int np = (kc + 1) / 2;
    if (W == 8) {
        strip8(d, X, ld, r0, rn, k0, kc);
        return;
    }
    for (int r = 0; r < W; r += 16) {
        int rows = W - r < 16 ? W - r : 16;
        for (int q = 0; q < np; q += 16) {
            float blk[16 * 16], out[16 * 16];
            int n = kc - 2 * q < 32 ? kc - 2 * q : 32; /* values left of each row's block */
            __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
            __mmask16 m1 = (__mmask16)(n <= 16 ? 0u : n >= 32 ? 0xffffu : (1u << (n - 16)) - 1u);
            for (int i = 0; i < 16; i++) {
                __m512i w = _mm512_setzero_si512();
                if (i < rows && r + i < rn) {
                    const float *x = X + (size_t)(r0 + r + i) * ld + k0 + 2 * q;
                    w = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, x + 16),
                                                     _mm512_maskz_loadu_ps(m0, x));
                }
                _mm512_storeu_si512(blk + 16 * i, w);
            }
            int nq = np - q < 16 ? np - q : 16;
            if (rows == 16 && nq == 16) {
                transpose_tile((float *)(d + (size_t)q * W + r), (size_t)W, blk, 16);
                continue;
            }
            transpose_tile(out, 16, blk, 16);
            __mmask16 mr = (__mmask16)((1u << rows) - 1u);
            for (int p = 0; p < nq; p++)
                _mm512_mask_storeu_epi32(d + (size_t)(q + p) * W + r, mr,
                                         _mm512_loadu_si512(out + 16 * p));
        }
    }
}

/* two A strips of op(X) read transposed (X stored (K,R)): rows [r0, r0+8) into d0 and [r0+8,
 * r0+16) into d1 (NULL: none), rn of the 16 rows real (the rest 0); pack_pairs' words. One
 * strip alone reads half a cache line of each of rows k and k+1 a pair; two read whole lines
 * (pair_words16: the first 8 words to d0, the last 8 to d1) */
static void strips2_ld(uint32_t *d0, uint32_t *d1, const Real *X, size_t ld, int K, int r0, int rn,
                       int k0, int kc) {
    int n = rn < 0 ? 0 : rn > 16 ? 16 : rn;
    __mmask16 m = (__mmask16)((1u << n) - 1u);
    for (int q = 0; q < kc; q += 2, d0 += 8) {
        const float *lo = X + (size_t)(k0 + q) * ld + r0;
        __m512i w = pair_words16(lo, lo + ld, m, k0 + q + 1 < K);
        _mm256_storeu_si256((__m256i *)d0, _mm512_castsi512_si256(w));
        if (d1) _mm256_storeu_si256((__m256i *)(d1 + 4 * q), _mm512_extracti64x4_epi64(w, 1));
    }
}
#endif

/* pack_ld and strips2_ld of a stored matrix whose rows are whole (R or K values apart) */
static inline void pack_strips2(uint32_t *d0, uint32_t *d1, const Real *X, int R, int K, int r0,
                                int rn, int k0, int kc) {
    strips2_ld(d0, d1, X, (size_t)R, K, r0, rn, k0, kc);
}
static inline void pack_pairs(uint32_t *d, const Real *X, int t, int R, int K, int r0, int rn,
                              int k0, int kc, int W) {
    pack_ld(d, X, (size_t)(t ? R : K), t, K, r0, rn, k0, kc, W);
}

void k_bf16_pack(uint32_t *d, const Real *X, size_t ld, int t, int K, int r0, int rn, int k0,
                 int kc, int W) {
    pack_ld(d, X, ld, t, K, r0, rn, k0, kc, W);
}

void k_bf16_pack_strips2(uint32_t *d0, uint32_t *d1, const Real *X, size_t ld, int K, int r0,
                         int rn, int k0, int kc) {
    strips2_ld(d0, d1, X, ld, K, r0, rn, k0, kc);
}

/* s = ftz(fma(a, b, s)), one half of a pair (the emulation). Where fmaf is an instruction it is
 * used as is. Elsewhere (x86-64 without FMA, where it is a call into libm) a b + s, which is
 * the same value whenever the product a b is exact in fp32: always for two bf16 (8-bit
 * significands) unless it falls below 2^-100 or overflows, and then fmaf. */
static inline float step(float a, float b, float s) {
#if defined(FP_FAST_FMAF) || defined(__FMA__) || defined(__aarch64__)
    float r = fmaf(a, b, s);
#else
    float p = a * b;
    float r =
        (fabsf(p) >= 0x1p-100f && fabsf(p) <= FLT_MAX) || a == 0 || b == 0 ? s + p : fmaf(a, b, s);
#endif
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}

/* One BMR x BNR tile: sums of np pairs of strip a (np x BMR words) and panel b (np x BNR
 * words), then C[0..mr, 0..nr) (row stride ldc) = sum, or C + sum when add, or else bias + sum
 * when bias (nr values: the same add as storing the bias in C first) */
static void micro(int np, const uint32_t *restrict a, const uint32_t *restrict b, Real *c,
                  size_t ldc, int mr, int nr, int add, const Real *bias) {
    float tile[BMR * BNR];
#ifdef BF16_HW
    __m512 acc[BMR][2];
    for (int i = 0; i < BMR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (int q = 0; q < np; q++, a += BMR, b += BNR) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
        UNROLL for (int i = 0; i < BMR; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
    }
#ifndef AG_REAL_DOUBLE
    /* C = sum, or C + sum (the same fp32 add as the loop below), straight from the registers */
    __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xffffu : (1u << nr) - 1u);
    __mmask16 m1 = (__mmask16)(nr <= 16 ? 0u : nr >= 32 ? 0xffffu : (1u << (nr - 16)) - 1u);
    for (int i = 0; i < mr; i++) {
        float *p = c + (size_t)i * ldc;
        const float *x = add ? p : bias;
        __m512 s0 = acc[i][0], s1 = acc[i][1];
        if (x) {
            s0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, x), s0);
            s1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, x + 16), s1);
        }
        _mm512_mask_storeu_ps(p, m0, s0);
        _mm512_mask_storeu_ps(p + 16, m1, s1);
    }
    return;
#endif
    for (int i = 0; i < BMR; i++) {
        _mm512_storeu_ps(tile + i * BNR, acc[i][0]);
        _mm512_storeu_ps(tile + i * BNR + 16, acc[i][1]);
    }
#else
    for (int i = 0; i < BMR * BNR; i++) tile[i] = 0.0f;
    for (int q = 0; q < np; q++, a += BMR, b += BNR) {
        float bl[BNR], bh[BNR];
        for (int j = 0; j < BNR; j++) {
            bl[j] = k_bf16_to_float((uint16_t)b[j]);
            bh[j] = k_bf16_to_float((uint16_t)(b[j] >> 16));
        }
        for (int i = 0; i < BMR; i++) {
            float al = k_bf16_to_float((uint16_t)a[i]),
                  ah = k_bf16_to_float((uint16_t)(a[i] >> 16));
            float *s = tile + i * BNR;
            for (int j = 0; j < BNR; j++) s[j] = step(al, bl[j], step(ah, bh[j], s[j]));
        }
    }
#endif
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            Real *p = c + (size_t)i * ldc + j;
            *p = add    ? (Real)((float)*p + tile[i * BNR + j])
                 : bias ? (Real)((float)bias[j] + tile[i * BNR + j])
                        : (Real)tile[i * BNR + j];
        }
}

void k_bf16_tile(int np, const uint32_t *a, const uint32_t *b, Real *c, size_t ldc, int mr, int nr,
                 int add) {
    micro(np, a, b, c, ldc, mr, nr, add, NULL);
}

/* ---- packed weights kept with their parameter (kernels.h: k_bf16_cache_*) ----
 * A weight W (R, C) is op(B) of two products: x W^T (tb: op(B) (C, R), its panels BNR rows of W
 * wide, layout 0) and gy W (op(B) (R, C), panels BNR columns of W wide, layout 1). Each layout
 * kept holds every panel with all of K's pairs in a row: pair q of the panel at column j (a
 * multiple of BNR) at word (j npk + q BNR), npk = (K + 1) / 2, the words pack_pairs gives the
 * product's B blocks (the same words: the blocks of K start at even k). A product whose B is a
 * registered weight marks the layout it needs (want); the optimizer's step (k_optim.c) packs
 * the wanted layouts of the weights it writes, row block by row block as it updates them, and
 * stamps them with the generation k_bf16_cache_begin made; every other writer of a
 * parameter's data bumps k_bf16_gen (ag_params_written), so a layout is read only while
 * nothing has written its weight since it was packed. */
typedef struct KBf16Packed {
    const Real *w;
    int rows, cols;
    uint32_t *lay[2];
    size_t cap[2];  /* words allocated */
    int want[2];    /* a product read it */
    uint64_t gen;   /* the k_bf16_gen its layouts were packed at; 0: never */
    uint64_t owner; /* the step that registered it last (k_bf16_cache_begin's count) */
} KBf16Packed;
enum { CACHE_MAX = 1024 };
static KBf16Packed cache[CACHE_MAX];
static int n_cache;
static uint64_t begun; /* k_bf16_cache_begin's calls */
uint64_t k_bf16_gen = 1;
int k_bf16_cache_on = 1;
int k_bf16_cache_check = 0;

void ag_params_written(void) { k_bf16_gen++; }

static size_t layout_words(int l, int R, int C) {
    int n = l ? C : R, k = l ? R : C; /* op(B) (k, n) */
    return (size_t)((n + BNR - 1) / BNR) * BNR * (size_t)((k + 1) / 2);
}

/* the panel at column j of op(B), pairs from k = pc (even) on */
static inline const uint32_t *panel(const uint32_t *bc, int npk, int j, int pc) {
    return bc + (size_t)j * npk + (size_t)(pc / 2) * BNR;
}

/* op(B) of a product (tb: B stored (N,K)) packed and current, or NULL; mark: note that a
 * product wants it */
static const uint32_t *cached(const Real *B, int tb, int N, int K, int mark) {
    if (!k_bf16_cache_on) return NULL;
    for (int i = 0; i < n_cache; i++) {
        KBf16Packed *e = &cache[i];
        if (e->w != B) continue;
        int l = !tb;
        if (tb ? e->rows != N || e->cols != K : e->rows != K || e->cols != N) return NULL;
        if (mark && !e->want[l]) e->want[l] = 1;
        return e->gen == k_bf16_gen && e->lay[l] ? e->lay[l] : NULL;
    }
    return NULL;
}

static KBf16Packed *entry(const Real *w) {
    for (int i = 0; i < n_cache; i++)
        if (cache[i].w == w) return &cache[i];
    return NULL;
}

void k_bf16_cache_begin(Tensor *const *ps, int count, int pack) {
    uint64_t was = k_bf16_gen++;
    begun++;
    /* what was current stays current unless it is one of ps (the step writes only those) */
    for (int i = 0; i < n_cache; i++)
        if (cache[i].gen == was) cache[i].gen = k_bf16_gen;
    pack = pack && k_bf16_cache_on && k_bf16_products;
    for (int i = 0; i < count; i++) {
        const Tensor *p = ps[i];
        if (p->ndim != 2) continue;
        KBf16Packed *e = entry(p->data);
        if (!pack) {
            if (e) e->gen = 0;
            continue;
        }
        if (e && (e->rows != p->shape[0] || e->cols != p->shape[1])) e->want[0] = e->want[1] = 0;
        if (!e) { /* a free slot, or one nobody registered in the last two steps */
            for (int j = 0; j < n_cache && !e; j++)
                if (cache[j].gen != k_bf16_gen && cache[j].owner + 2 < begun) e = &cache[j];
            if (!e && n_cache < CACHE_MAX) e = &cache[n_cache++];
            if (!e) continue; /* full: this weight is packed by its products */
            e->want[0] = e->want[1] = 0;
        }
        e->w = p->data;
        e->rows = p->shape[0];
        e->cols = p->shape[1];
        e->owner = begun;
        e->gen = 0;
        int any = 0;
        for (int l = 0; l < 2; l++) {
            if (!e->want[l]) continue;
            size_t words = layout_words(l, e->rows, e->cols);
            if (e->cap[l] < words) {
                free(e->lay[l]);
                e->lay[l] = aligned_alloc(64, (words * sizeof(uint32_t) + 63) / 64 * 64);
                AG_CHECK(e->lay[l] != NULL, "optim step: no memory for the packed copy of '%s' %s",
                         p->name, tensor_shape_str(p));
                e->cap[l] = words;
            }
            any = 1;
        }
        if (any) e->gen = k_bf16_gen;
    }
}

KBf16Packed *k_bf16_cache_to_pack(const Tensor *p) {
    if (p->ndim != 2 || !k_bf16_cache_on || !k_bf16_products) return NULL;
    KBf16Packed *e = entry(p->data);
    return e && e->gen == k_bf16_gen && e->owner == begun ? e : NULL;
}

/* n words (a multiple of 16) from s to d (64-byte aligned), written without reading d's lines
 * first (non-temporal stores: the copy is read again only by the next step's products) */
static void stream_words(uint32_t *d, const uint32_t *s, size_t n) {
#ifdef BF16_HW
    for (size_t i = 0; i < n; i += 16)
        _mm512_stream_si512((void *)(d + i), _mm512_loadu_si512(s + i));
#else
    memcpy(d, s, n * sizeof *d);
#endif
}

/* Each piece packed into buf (in L1: at most 16 pairs of a panel) and streamed to the copy */
void k_bf16_cache_pack_rows(const KBf16Packed *e, int r0, int r1) {
    uint32_t buf[16 * BNR];
    int R = e->rows, C = e->cols;
    AG_CHECK(r0 >= 0 && r0 % BNR == 0 && r0 < r1 && r1 - r0 <= BNR && r1 <= R,
             "k_bf16_cache_pack_rows: rows [%d, %d) of (%d, %d) are not one block of %d", r0, r1, R,
             C, BNR);
    if (e->lay[0] && e->want[0]) { /* x W^T: op(B) (C, R), a panel is BNR rows of W */
        int npk = (C + 1) / 2;
        for (int r = r0; r < r1; r += BNR)
            for (int q = 0; q < npk; q += 16) {
                int nq = npk - q < 16 ? npk - q : 16;
                pack_pairs(buf, e->w, 0, R, C, r, r1 - r < BNR ? r1 - r : BNR, 2 * q,
                           C - 2 * q < 32 ? C - 2 * q : 32, BNR);
                stream_words(e->lay[0] + (size_t)r * npk + (size_t)q * BNR, buf, (size_t)nq * BNR);
            }
    }
    if (e->lay[1] && e->want[1]) { /* gy W: op(B) (R, C), rows r0.. are pairs r0/2.. */
        int npk = (R + 1) / 2;
        for (int j = 0; j < C; j += BNR) {
            pack_pairs(buf, e->w, 1, C, R, j, C - j < BNR ? C - j : BNR, r0, r1 - r0, BNR);
            stream_words(e->lay[1] + (size_t)j * npk + (size_t)(r0 / 2) * BNR, buf,
                         (size_t)((r1 - r0 + 1) / 2) * BNR);
        }
    }
#ifdef BF16_HW
    _mm_sfence(); /* the streamed words before any later read (the region's end orders them) */
#endif
}

/* A thread's op(A) rows, all of K, stay packed across its blocks of columns when they take at
 * most this many words (kernels.h: k_bf16_keep_a) */
size_t k_bf16_keep_a = (size_t)1 << 19;

/* the blocks of columns of a thread's cols: one when cols <= BNC_ONE (a B block of 768 x KB
 * still sits in L2 beside the A strip in L1, and each A strip is packed once), else BNC wide */
enum { BNC_ONE = BNC + BNC / 2 };
static int col_block(int cols) { return cols <= BNC_ONE ? cols : BNC; }

/* whether a thread's rows of op(A) (rows x K) are packed once for all its blocks of columns */
static int keeps_a(double rows, int K) {
    return rows * (double)((K + 1) / 2) <= (double)k_bf16_keep_a;
}

/* The values one thread packs for its block (rows x cols of C): its op(B) once (none when
 * op(B) is a weight's kept copy, b_kept) and its op(A) once, or once per block of columns when
 * it does not keep it */
static double packed(double rows, double cols, int K, int b_kept) {
    double blocks = keeps_a(rows, K) ? 1 : ceil(cols / col_block((int)cols));
    return ((b_kept ? 0 : (double)cols) + rows * blocks) * K;
}

/* C[i0..i1, j0..j1) of the product, blocked: for each block of columns (col_block) and KB of
 * K, the B block packed once, then each strip of BMR rows packed and swept across it (its strip
 * in L1, the block's panels read from L2: strips packed together and read from L2 were
 * slower). When the thread keeps its A (keeps_a) the strips are packed during the first block
 * of columns, each strip's pairs of all K in a row (pair p of strip s at word (s NPK + p) BMR),
 * and read back for the next blocks: the same words, packed once. */
static void block(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                  int accumulate, const Real *bias, const uint32_t *bc, int i0, int i1, int j0,
                  int j1) {
    int bnc = col_block(j1 - j0), npk = (K + 1) / 2;
    int keep = j1 - j0 > bnc && keeps_a(i1 - i0, K);
    /* op(A) read transposed is packed two strips at a time (pack_strips2): the second one's
     * words wait in the strip after the first (a second strip of scratch when not kept) */
    size_t awords = keep ? (size_t)((i1 - i0 + BMR - 1) / BMR) * BMR * npk
                         : (size_t)(ta ? 2 : 1) * BMR * (KB / 2);
    size_t words = awords + (size_t)BNC_ONE * (KB / 2);
    uint32_t *abuf = (uint32_t *)k_thread_scratch(
        K_SCRATCH_BF16, (words * sizeof(uint32_t) + sizeof(Real) - 1) / sizeof(Real));
    uint32_t *bbuf = abuf + awords;
    for (int jc = j0; jc < j1; jc += bnc) {
        int nc = j1 - jc < bnc ? j1 - jc : bnc;
        for (int pc = 0; pc < K; pc += KB) {
            int kc = K - pc < KB ? K - pc : KB, np = (kc + 1) / 2;
            int add = accumulate || pc > 0;
            for (int jr = 0; jr < nc && (!bc || k_bf16_cache_check); jr += BNR) {
                int nr = nc - jr < BNR ? nc - jr : BNR;
                /* op(B) (K,N) is op'(B) (N,K) read the other way: tb stored (N,K) */
                pack_pairs(bbuf + (size_t)jr * np, B, !tb, N, K, jc + jr, nr, pc, kc, BNR);
                if (bc)
                    AG_CHECK(!memcmp(bbuf + (size_t)jr * np, panel(bc, npk, jc + jr, pc),
                                     (size_t)np * BNR * sizeof(uint32_t)),
                             "k_gemm_bf16: the packed copy of a weight (%d, %d) is stale: its "
                             "data was written without ag_params_written()",
                             tb ? N : K, tb ? K : N);
            }
            for (int ir = i0; ir < i1; ir += BMR) {
                int mr = i1 - ir < BMR ? i1 - ir : BMR, odd = (ir - i0) / BMR % 2;
                size_t next = keep ? (size_t)npk * BMR : (size_t)BMR * (KB / 2);
                uint32_t *a = keep ? abuf + ((size_t)(ir - i0) / BMR * npk + pc / 2) * BMR
                                   : abuf + (ta && odd ? next : 0);
                if ((!keep || jc == j0) && ta && !odd)
                    pack_strips2(a, ir + BMR < i1 ? a + next : NULL, A, M, K, ir, i1 - ir, pc, kc);
                else if ((!keep || jc == j0) && !ta)
                    pack_pairs(a, A, ta, M, K, ir, mr, pc, kc, BMR);
                for (int jr = 0; jr < nc; jr += BNR) {
                    int nr = nc - jr < BNR ? nc - jr : BNR;
                    const uint32_t *b = bc ? panel(bc, npk, jc + jr, pc) : bbuf + (size_t)jr * np;
                    micro(np, a, b, C + (size_t)ir * N + jc + jr, (size_t)N, mr, nr, add,
                          bias ? bias + jc + jr : NULL);
                }
            }
        }
    }
}

/* thread t of T's share: a grid of tm x tn blocks of whole strips and panels (tm tn = T), the
 * one whose largest block costs least: its multiply-adds, and the values it packs at about
 * 128 multiply-adds each (a value packed costs about two cycles, vdpbf16ps does 32 two to a
 * cycle; op(B) read from a weight's kept copy, bc, is not packed) */
static void share(int t, int T, int ta, int tb, int M, int N, int K, const Real *A, const Real *B,
                  Real *C, int accumulate, const Real *bias, const uint32_t *bc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!accumulate && t == 0)
            for (size_t i = 0; i < (size_t)M * N; i++) C[i] = bias ? bias[i % (size_t)N] : 0;
        return;
    }
    if (accumulate) bias = NULL; /* not both (k_gemm_bf16_bias) */
    int mt = (M + BMR - 1) / BMR, nt = (N + BNR - 1) / BNR, tm = T, tn = 1;
    double best = -1;
    for (int m = 1; m <= T; m++) {
        if (T % m) continue;
        double rows = (double)((mt + m - 1) / m) * BMR,
               cols = (double)((nt + T / m - 1) / (T / m)) * BNR;
        double cost = rows * cols * K + 128.0 * packed(rows, cols, K, bc != NULL);
        if (best < 0 || cost < best) best = cost, tm = m, tn = T / m;
    }
    int ti = t / tn, tj = t % tn;
    int i0 = (int)((long)ti * mt / tm) * BMR, i1 = (int)((long)(ti + 1) * mt / tm) * BMR;
    int j0 = (int)((long)tj * nt / tn) * BNR, j1 = (int)((long)(tj + 1) * nt / tn) * BNR;
    if (i1 > M) i1 = M;
    if (j1 > N) j1 = N;
    if (i0 < i1 && j0 < j1) block(ta, tb, M, N, K, A, B, C, accumulate, bias, bc, i0, i1, j0, j1);
}

static int is_small(int M, int N, int K) {
    return (size_t)M * (size_t)N * (size_t)K / 64 < K_PAR_MIN;
}

void k_gemm_bf16_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                      const Real *B, Real *C, int accumulate) {
    if (is_small(M, N, K)) {
        if (t == job % T)
            share(0, 1, ta, tb, M, N, K, A, B, C, accumulate, NULL, cached(B, tb, N, K, 1));
        return;
    }
    share(t, T, ta, tb, M, N, K, A, B, C, accumulate, NULL, cached(B, tb, N, K, t == 0));
}

/* C = op(A) op(B), + C when accumulate, + the bias row (N) when bias */
static void gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 int accumulate, const Real *bias) {
    const uint32_t *bc = cached(B, tb, N, K, 1);
#pragma omp parallel if (!is_small(M, N, K))
    {
        int T = 1, t = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        share(t, T, ta, tb, M, N, K, A, B, C, accumulate, bias, bc);
    }
}

void k_gemm_bf16(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 int accumulate) {
    gemm(ta, tb, M, N, K, A, B, C, accumulate, NULL);
}

void k_gemm_bf16_bias(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                      const Real *bias) {
    gemm(ta, tb, M, N, K, A, B, C, 0, bias);
}

/* ---- the step's precision (threads.h) ---- */
int k_bf16_products = 0;

int ag_precision_use(int precision) {
    if (precision == AG_PRECISION_FP32) {
        k_bf16_products = 0;
        return AG_OK;
    }
#if defined(AG_REAL_DOUBLE) || defined(AG_BLAS_OPENBLAS)
    return AG_ERR_ARG;
#else
    if (precision != AG_PRECISION_BF16) return AG_ERR_ARG;
    k_bf16_products = 1;
    return AG_OK;
#endif
}

int ag_precision(void) { return k_bf16_products ? AG_PRECISION_BF16 : AG_PRECISION_FP32; }

const char *ag_precision_bf16_unit(void) { return k_bf16_native() ? "vdpbf16ps" : "emulated"; }
