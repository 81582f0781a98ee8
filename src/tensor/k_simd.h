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
 * K_SIMD_FAMILY names the family (ag_kernel_family reports it).
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
/* a function inlined into its caller (a tile's row count then a constant), and a prefetch of a
 * line about to be written */
#ifdef __GNUC__
#define K_ALWAYS_INLINE inline __attribute__((always_inline))
#define PREFETCH_W(p) __builtin_prefetch((p), 1)
#else
#define K_ALWAYS_INLINE inline
#define PREFETCH_W(p) ((void)(p))
#endif

#endif
