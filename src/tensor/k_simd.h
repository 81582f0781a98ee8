/* k_simd.h: the vector layer of the register-tiled products, k_gemm.c's micro-kernel and
 * k_attention.c's tile(): a type Vec of VLEN Reals and the operations they use, chosen at
 * compile time:
 *   AVX-512           16 floats or 8 doubles (-march=x86-64-v4, or native on such a CPU)
 *   AVX2 + FMA        8 floats or 4 doubles (-march=x86-64-v3)
 *   portable          for any other target (x86-64 without AVX2, arm64, ...) or with
 *                     -DAG_SIMD_PORTABLE: the compiler's generic vectors of 16 bytes, 4 floats
 *                     or 2 doubles (GCC and Clang); one Real a "vector" with other compilers
 *                     or -DAG_SIMD_SCALAR
 * vfma(a, b, c) = a b + c rounded once (a fused multiply-add) in the vector families, and in
 * the portable one wherever the target fuses (arm64, or fma() a hardware instruction:
 * FP_FAST_FMA), so that every family computes the same element the same way where it can;
 * elsewhere (x86-64 without FMA) a b + c rounds twice. Within a family the vector width never
 * changes a result: each lane is one element's own sum.
 * K_SIMD_FAMILY names the family (ag_kernel_family reports it). At the end, for the AVX-512
 * and AVX2 families: a VLEN x VLEN transpose in registers (transpose_tile), and one vector's
 * lanes reduced in k_lanes.h's order (vhsum, vhmax) with partial loads for row tails.
 * Not here: the loops (k_gemm.c, k_attention.c); the row reductions (k_lanes.h).
 * Read next: k_lanes.h. */
#ifndef ATTOGRAD_K_SIMD_H
#define ATTOGRAD_K_SIMD_H

#include <math.h>

#include "tensor.h"

/* fma in the build's precision (used where the portable family fuses, k_simd.h's vfma) */
#ifdef AG_REAL_DOUBLE
#define K_FMA fma
#else
#define K_FMA fmaf
#endif

#if !defined(AG_SIMD_PORTABLE) && (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__)))
#include <immintrin.h>
#endif

#if !defined(AG_SIMD_PORTABLE) && defined(__AVX512F__)
#define K_SIMD_FAMILY "AVX-512"
#define K_SIMD_AVX512 1
#ifdef AG_REAL_DOUBLE
typedef __m512d Vec;
#define VLEN 8
#define vload _mm512_loadu_pd
#define vstore _mm512_storeu_pd
#define vset1 _mm512_set1_pd
#define vzero _mm512_setzero_pd
#define vadd _mm512_add_pd
#define vmax0(v) _mm512_max_pd(v, _mm512_setzero_pd())
#define vfma _mm512_fmadd_pd
#else
typedef __m512 Vec;
#define VLEN 16
#define vload _mm512_loadu_ps
#define vstore _mm512_storeu_ps
#define vset1 _mm512_set1_ps
#define vzero _mm512_setzero_ps
#define vadd _mm512_add_ps
#define vmax0(v) _mm512_max_ps(v, _mm512_setzero_ps())
#define vfma _mm512_fmadd_ps
#endif
/* PIN(v): v stays in a register. Without it GCC 12 reads a vector of a tile's right-hand
 * operand from memory again in every fused multiply-add that uses it, so the tile is bound by
 * loads instead of multiply-adds (attention 10% slower). */
#define PIN(v) __asm__("" : "+v"(v))

#elif !defined(AG_SIMD_PORTABLE) && defined(__AVX2__) && defined(__FMA__)
#define K_SIMD_FAMILY "AVX2"
#define K_SIMD_AVX2 1
#ifdef AG_REAL_DOUBLE
typedef __m256d Vec;
#define VLEN 4
#define vload _mm256_loadu_pd
#define vstore _mm256_storeu_pd
#define vset1 _mm256_set1_pd
#define vzero _mm256_setzero_pd
#define vadd _mm256_add_pd
#define vmax0(v) _mm256_max_pd(v, _mm256_setzero_pd())
#define vfma _mm256_fmadd_pd
#else
typedef __m256 Vec;
#define VLEN 8
#define vload _mm256_loadu_ps
#define vstore _mm256_storeu_ps
#define vset1 _mm256_set1_ps
#define vzero _mm256_setzero_ps
#define vadd _mm256_add_ps
#define vmax0(v) _mm256_max_ps(v, _mm256_setzero_ps())
#define vfma _mm256_fmadd_ps
#endif
#define PIN(v) __asm__("" : "+x"(v))

#elif defined(__GNUC__) && !defined(AG_SIMD_SCALAR)
/* Portable: GCC's (and Clang's) generic vectors of 16 bytes, the width every 64-bit target has
 * (SSE2 on any x86-64, NEON on arm64), which the compiler turns into that target's vector
 * instructions. a b + c is fused where the target fuses: NEON's vfmaq on arm64, fma() per lane
 * elsewhere when it is a hardware instruction (FP_FAST_FMA), else two roundings (x86-64
 * without FMA): in each case the same arithmetic as the scalar form below, lane by lane. */
#define K_SIMD_FAMILY "portable"
#define K_SIMD_GENERIC 1
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif
#include <string.h>
#ifdef AG_REAL_DOUBLE
#define VLEN 2
typedef double Vec __attribute__((vector_size(16)));
typedef long long VecMask __attribute__((vector_size(16)));
#else
#define VLEN 4
typedef float Vec __attribute__((vector_size(16)));
typedef int VecMask __attribute__((vector_size(16)));
#endif
/* unaligned loads and stores (memcpy of 16 bytes is one instruction) */
static inline Vec vload(const Real *p) {
    Vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void vstore(Real *p, Vec v) { memcpy(p, &v, sizeof v); }
static inline Vec vzero(void) { return (Vec){0}; }
#ifdef AG_REAL_DOUBLE
static inline Vec vset1(Real x) { return (Vec){x, x}; }
#else
static inline Vec vset1(Real x) { return (Vec){x, x, x, x}; }
#endif
static inline Vec vadd(Vec a, Vec b) { return a + b; }
/* a > 0 ? a : 0 lane by lane (0 for NaN), through the comparison's all-ones mask */
static inline Vec vmax0(Vec a) { return (Vec)((VecMask)a & (a > (Vec){0})); }
#if defined(__aarch64__) && defined(__ARM_NEON) && defined(AG_REAL_DOUBLE)
static inline Vec vfma(Vec a, Vec b, Vec c) {
    return (Vec)vfmaq_f64((float64x2_t)c, (float64x2_t)a, (float64x2_t)b);
}
#elif defined(__aarch64__) && defined(__ARM_NEON)
static inline Vec vfma(Vec a, Vec b, Vec c) {
    return (Vec)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
}
#elif (defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMA)) ||                                         \
    (!defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMAF))
static inline Vec vfma(Vec a, Vec b, Vec c) {
    Vec r;
    for (int i = 0; i < VLEN; i++) r[i] = K_FMA(a[i], b[i], c[i]);
    return r;
}
#else
static inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
#endif
#define PIN(v) ((void)(v))

#else
/* Portable C without vector extensions (or with -DAG_SIMD_SCALAR): one Real a "vector" */
#define K_SIMD_FAMILY "portable"
typedef Real Vec;
#define VLEN 1
static inline Vec vload(const Real *p) { return *p; }
static inline void vstore(Real *p, Vec v) { *p = v; }
static inline Vec vset1(Real x) { return x; }
static inline Vec vzero(void) { return 0; }
static inline Vec vadd(Vec a, Vec b) { return a + b; }
static inline Vec vmax0(Vec a) { return a > 0 ? a : 0; }
#if (defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMA)) ||                                           \
    (!defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMAF))
static inline Vec vfma(Vec a, Vec b, Vec c) { return K_FMA(a, b, c); }
#else
static inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
#endif
#define PIN(v) ((void)(v))
#endif

/* the loops over a tile's registers unrolled, so that its sums stay in registers */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 16")
#else
#define UNROLL
#endif
/* a function inlined into its caller (a tile's row count then a constant), a prefetch of a
 * line about to be written, and of a line to be read soon (into L2, not L1) */
#ifdef __GNUC__
#define K_ALWAYS_INLINE inline __attribute__((always_inline))
#define PREFETCH_W(p) __builtin_prefetch((p), 1)
#define PREFETCH_L2(p) __builtin_prefetch((p), 0, 1)
#else
#define K_ALWAYS_INLINE inline
#define PREFETCH_W(p) ((void)(p))
#define PREFETCH_L2(p) ((void)(p))
#endif

/* ---- a VLEN x VLEN transpose in registers: d[k*ldd + c] = s[c*lds + k] ----
 * Rows are interleaved in pairs, then fours (within 128-bit lanes), then the lanes are
 * exchanged. Only moves: the values are copied exactly. The AVX-512 and AVX2 families have it
 * (K_HAVE_TRANSPOSE); k_gemm.c packs a transposed B with it, k_attention.c transposes a head
 * of keys or values. */
#if defined(K_SIMD_AVX512)
#define K_HAVE_TRANSPOSE 1
#ifdef AG_REAL_DOUBLE
static K_ALWAYS_INLINE void transpose_tile(Real *d, size_t ldd, const Real *s, size_t lds) {
    __m512d r[8], t[8];
    UNROLL for (int i = 0; i < 8; i++) r[i] = _mm512_loadu_pd(s + i * lds);
    UNROLL for (int i = 0; i < 8; i += 2) { /* t[2p + m], lane l: rows 2p, 2p+1 at k = 2l + m */
        t[i] = _mm512_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_pd(r[i], r[i + 1]);
    }
    UNROLL for (int m = 0; m < 2; m++) {
        __m512d u0 = _mm512_shuffle_f64x2(t[m], t[2 + m], 0x88);
        __m512d u1 = _mm512_shuffle_f64x2(t[m], t[2 + m], 0xDD);
        __m512d u2 = _mm512_shuffle_f64x2(t[4 + m], t[6 + m], 0x88);
        __m512d u3 = _mm512_shuffle_f64x2(t[4 + m], t[6 + m], 0xDD);
        _mm512_storeu_pd(d + (size_t)(0 + m) * ldd, _mm512_shuffle_f64x2(u0, u2, 0x88));
        _mm512_storeu_pd(d + (size_t)(2 + m) * ldd, _mm512_shuffle_f64x2(u1, u3, 0x88));
        _mm512_storeu_pd(d + (size_t)(4 + m) * ldd, _mm512_shuffle_f64x2(u0, u2, 0xDD));
        _mm512_storeu_pd(d + (size_t)(6 + m) * ldd, _mm512_shuffle_f64x2(u1, u3, 0xDD));
    }
}
#else
static K_ALWAYS_INLINE void transpose_tile(Real *d, size_t ldd, const Real *s, size_t lds) {
    __m512 r[16], t[16];
    UNROLL for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * lds);
    UNROLL for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    UNROLL for (int i = 0; i < 16; i += 4) { /* r[4g + m], lane l: rows 4g..4g+3 at k = 4l + m */
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    UNROLL for (int m = 0; m < 4; m++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88);
        __m512 u1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
        __m512 u2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88);
        __m512 u3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
        _mm512_storeu_ps(d + (size_t)(0 + m) * ldd, _mm512_shuffle_f32x4(u0, u2, 0x88));
        _mm512_storeu_ps(d + (size_t)(4 + m) * ldd, _mm512_shuffle_f32x4(u1, u3, 0x88));
        _mm512_storeu_ps(d + (size_t)(8 + m) * ldd, _mm512_shuffle_f32x4(u0, u2, 0xDD));
        _mm512_storeu_ps(d + (size_t)(12 + m) * ldd, _mm512_shuffle_f32x4(u1, u3, 0xDD));
    }
}
#endif
#elif defined(K_SIMD_AVX2)
#define K_HAVE_TRANSPOSE 1
#ifdef AG_REAL_DOUBLE
static K_ALWAYS_INLINE void transpose_tile(Real *d, size_t ldd, const Real *s, size_t lds) {
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + lds);
    __m256d r2 = _mm256_loadu_pd(s + 2 * lds), r3 = _mm256_loadu_pd(s + 3 * lds);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ldd, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ldd, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ldd, _mm256_permute2f128_pd(t1, t3, 0x31));
}
#else
static K_ALWAYS_INLINE void transpose_tile(Real *d, size_t ldd, const Real *s, size_t lds) {
    __m256 r[8], t[8];
    UNROLL for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + i * lds);
    UNROLL for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    UNROLL for (int i = 0; i < 8; i += 4) { /* r[4g + m], lane l: rows 4g..4g+3 at k = 4l + m */
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    UNROLL for (int m = 0; m < 4; m++) {
        _mm256_storeu_ps(d + (size_t)m * ldd, _mm256_permute2f128_ps(r[m], r[4 + m], 0x20));
        _mm256_storeu_ps(d + (size_t)(4 + m) * ldd, _mm256_permute2f128_ps(r[m], r[4 + m], 0x31));
    }
}
#endif
#endif

/* ---- one vector's lanes reduced, and partial loads: for k_lanes.h's row reductions in
 * registers (K_HAVE_VREDUCE: the AVX-512 and AVX2 families) ----
 * vhsum(v): the lanes' total as k_lanes.h's tree, halves added lane by lane (lane l += lane
 * l + VLEN/2, ..., lane 0 += lane 1); vhmax(v) the same tree of vmaxv. vmaxv(a, b) = a > b ? a
 * : b lane by lane (K_MAX: the max instructions return b when either is NaN or both are 0).
 * vmul(a, b) = a b; vnz(p, y) = y != 0 ? p : 0 lane by lane (a NaN y is not 0).
 * vload_part(p, c, fill): lanes < c from p (0 < c < VLEN), the others fill; nothing past
 * p[c - 1] is read. */
#if defined(K_SIMD_AVX512)
#define K_HAVE_VREDUCE 1
#ifdef AG_REAL_DOUBLE
#define vmul _mm512_mul_pd
#define vmaxv _mm512_max_pd
static inline Vec vnz(Vec p, Vec y) {
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(y, _mm512_setzero_pd(), _CMP_NEQ_UQ), p);
}
static inline Vec vload_part(const Real *p, int c, Vec fill) {
    return _mm512_mask_loadu_pd(fill, (__mmask8)((1u << c) - 1), p);
}
static inline Real vhsum(Vec v) {
    __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
static inline Real vhmax(Vec v) {
    __m256d a = _mm256_max_pd(_mm512_extractf64x4_pd(v, 1), _mm512_castpd512_pd256(v));
    __m128d b = _mm_max_pd(_mm256_extractf128_pd(a, 1), _mm256_castpd256_pd128(a));
    return _mm_cvtsd_f64(_mm_max_sd(_mm_unpackhi_pd(b, b), b));
}
#else
#define vmul _mm512_mul_ps
#define vmaxv _mm512_max_ps
static inline Vec vnz(Vec p, Vec y) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_NEQ_UQ), p);
}
static inline Vec vload_part(const Real *p, int c, Vec fill) {
    return _mm512_mask_loadu_ps(fill, (__mmask16)((1u << c) - 1), p);
}
static inline Real vhsum(Vec v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}
static inline Real vhmax(Vec v) {
    __m256 a = _mm256_max_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    __m128 b = _mm_max_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    b = _mm_max_ps(_mm_movehl_ps(b, b), b);
    return _mm_cvtss_f32(_mm_max_ss(_mm_shuffle_ps(b, b, 1), b));
}
#endif
#elif defined(K_SIMD_AVX2)
#define K_HAVE_VREDUCE 1
#ifdef AG_REAL_DOUBLE
#define vmul _mm256_mul_pd
#define vmaxv _mm256_max_pd
static inline Vec vnz(Vec p, Vec y) {
    return _mm256_and_pd(p, _mm256_cmp_pd(y, _mm256_setzero_pd(), _CMP_NEQ_UQ));
}
static inline Vec vload_part(const Real *p, int c, Vec fill) {
    __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(c), _mm256_setr_epi64x(0, 1, 2, 3));
    return _mm256_blendv_pd(fill, _mm256_maskload_pd(p, m), _mm256_castsi256_pd(m));
}
static inline Real vhsum(Vec v) {
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
static inline Real vhmax(Vec v) {
    __m128d b = _mm_max_pd(_mm256_extractf128_pd(v, 1), _mm256_castpd256_pd128(v));
    return _mm_cvtsd_f64(_mm_max_sd(_mm_unpackhi_pd(b, b), b));
}
#else
#define vmul _mm256_mul_ps
#define vmaxv _mm256_max_ps
static inline Vec vnz(Vec p, Vec y) {
    return _mm256_and_ps(p, _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_NEQ_UQ));
}
static inline Vec vload_part(const Real *p, int c, Vec fill) {
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline Real vhsum(Vec v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}
static inline Real vhmax(Vec v) {
    __m128 b = _mm_max_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    b = _mm_max_ps(_mm_movehl_ps(b, b), b);
    return _mm_cvtss_f32(_mm_max_ss(_mm_shuffle_ps(b, b, 1), b));
}
#endif
#endif

#endif
