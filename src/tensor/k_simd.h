/* k_simd.h: the vector layer of the register-tiled products, k_gemm.c's micro-kernel and
 * k_attention.c's tile(): a type Vec of VLEN Reals and the operations they use, chosen at
 * compile time:
 *   AVX-512           16 floats or 8 doubles (-march=x86-64-v4, or native on such a CPU)
 *   AVX2 + FMA        8 floats or 4 doubles (-march=x86-64-v3)
 *   portable C        one Real a "vector", for any other target or with -DAG_SIMD_PORTABLE
 * vfma(a, b, c) = a b + c rounded once (a fused multiply-add) in the vector families, and in
 * the portable one wherever fma() is a hardware instruction (FP_FAST_FMA), so that every family
 * computes the same element the same way where it can; elsewhere a b + c rounds twice.
 * K_SIMD_FAMILY names the family (ag_kernel_family reports it).
 * Not here: the loops (k_gemm.c, k_attention.c); the row reductions (k_lanes.h).
 * Read next: k_lanes.h. */
#ifndef ATTOGRAD_K_SIMD_H
#define ATTOGRAD_K_SIMD_H

#include <math.h>

#include "tensor.h"

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

#else
#define K_SIMD_FAMILY "portable"
typedef Real Vec;
#define VLEN 1
static inline Vec vload(const Real *p) { return *p; }
static inline void vstore(Real *p, Vec v) { *p = v; }
static inline Vec vset1(Real x) { return x; }
static inline Vec vzero(void) { return 0; }
static inline Vec vadd(Vec a, Vec b) { return a + b; }
static inline Vec vmax0(Vec a) { return a > 0 ? a : 0; }
#if defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMA)
static inline Vec vfma(Vec a, Vec b, Vec c) { return fma(a, b, c); }
#elif !defined(AG_REAL_DOUBLE) && defined(FP_FAST_FMAF)
static inline Vec vfma(Vec a, Vec b, Vec c) { return fmaf(a, b, c); }
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
