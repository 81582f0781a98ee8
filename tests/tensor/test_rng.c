/* test_rng.c: the seeded RNG. Same seed, same stream; saving the state continues it exactly;
 * the first outputs for seed 42 are pinned to constants from an independent implementation,
 * so the stream is the same on every machine and cannot change by accident; and the uniform,
 * normal and bounded draws have the right range and moments.
 * Not here: dropout masks built on rng_hash (tests/autograd). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"

/* Golden values. They come from this Python 3 script, written from the descriptions of
 * xoshiro256** and splitmix64 at https://prng.di.unimi.it/ (not from rng.c), run once:
 *
 *   M = 2**64 - 1
 *   def splitmix(s):
 *       s = (s + 0x9E3779B97F4A7C15) & M; z = s
 *       z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
 *       z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
 *       return s, z ^ (z >> 31)
 *   def rotl(x, k): return ((x << k) | (x >> (64 - k))) & M
 *   def stream(seed):
 *       st, s = seed, []
 *       for _ in range(4): st, v = splitmix(st); s.append(v)
 *       while True:
 *           yield (rotl(s[1] * 5 & M, 7) * 9) & M
 *           t = (s[1] << 17) & M
 *           s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
 *           s[3] = rotl(s[3], 45)
 *   def rng_hash(key, ctr): return splitmix(key ^ (ctr * 0xD1B54A32D192ED03 & M))[1]
 *
 * first six of stream(42); uniform = (u64 >> 11) * 2**-53 on the first two; normal = Box-Muller
 * sqrt(-2 log(1 - u1)) cos(2 pi u2) on them (math.log, math.cos). */
static const uint64_t golden_seed42[] = {
    0x15780b2e0c2ec716ull, 0x6104d9866d113a7eull, 0xae17533239e499a1ull,
    0xecb8ad4703b360a1ull, 0xfde6dc7fe2ec5e64ull, 0xc50da53101795238ull,
};

Test(rng, seed_42_gives_the_golden_stream) {
    Rng r;
    rng_seed(&r, 42);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(rng_u64(&r), golden_seed42[i], "output %d of seed 42 changed", i);
    rng_seed(&r, 0);
    cr_assert_eq(rng_u64(&r), 0x99ec5f36cb75f2b4ull, "first output of seed 0 changed");
}

Test(rng, uniform_and_normal_follow_from_the_stream) {
    Rng r;
    rng_seed(&r, 42);
    cr_assert_eq(rng_uniform(&r), 0x1.5780b2e0c2ec0p-4);
    cr_assert_eq(rng_uniform(&r), 0x1.84136619b444ep-2);
    rng_seed(&r, 42);
    /* log and cos come from libm, which may differ in the last bit between machines */
    double z = rng_normal(&r); /* (cr_assert_float_eq evaluates its arguments twice) */
    cr_assert_float_eq(z, -0.303263064678738, 1e-13, "%.17g", z);
}

Test(rng, hash_is_a_fixed_function_of_key_and_counter) {
    cr_assert_eq(rng_hash(0, 0), 0xe220a8397b1dcdafull);
    cr_assert_eq(rng_hash(42, 0), 0xbdd732262feb6e95ull);
    cr_assert_eq(rng_hash(42, 1), 0xc8ddbbbeab9cba1bull);
    cr_assert_eq(rng_hash(0xDEADBEEF, 12345), 0xb11e5fc9be19aa70ull);
    for (uint64_t i = 0; i < 1000; i++) {
        cr_assert_eq(rng_hash(7, i), rng_hash(7, i));
        cr_assert_neq(rng_hash(7, i), rng_hash(7, i + 1));
        cr_assert_neq(rng_hash(7, i), rng_hash(8, i));
    }
}

Test(rng, same_seed_same_stream) {
    Rng a, b;
    rng_seed(&a, 123456789);
    rng_seed(&b, 123456789);
    for (int i = 0; i < 1000; i++) cr_assert_eq(rng_u64(&a), rng_u64(&b), "draw %d", i);
    for (int i = 0; i < 100; i++) cr_assert_eq(rng_normal(&a), rng_normal(&b), "normal %d", i);
}

Test(rng, different_seeds_differ) {
    const uint64_t seeds[] = {0, 1, 2, 42, 43, UINT64_MAX};
    const int n = sizeof seeds / sizeof seeds[0];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            Rng a, b;
            rng_seed(&a, seeds[i]);
            rng_seed(&b, seeds[j]);
            int same = 0;
            for (int k = 0; k < 100; k++) same += rng_u64(&a) == rng_u64(&b);
            cr_assert_eq(same, 0, "seeds %llu and %llu agree on %d of 100 draws",
                         (unsigned long long)seeds[i], (unsigned long long)seeds[j], same);
        }
}

Test(rng, a_saved_state_continues_the_stream_exactly) {
    Rng r;
    rng_seed(&r, 2024);
    for (int i = 0; i < 37; i++) rng_u64(&r);
    rng_normal(&r);
    Rng saved = r; /* the state is plain data: copy it, or write its four words to a file */
    uint64_t ahead[64];
    for (int i = 0; i < 64; i++) ahead[i] = rng_u64(&r);
    double u = rng_uniform(&r), z = rng_normal(&r);
    Rng restored;
    memcpy(&restored, &saved, sizeof restored);
    for (int i = 0; i < 64; i++) cr_assert_eq(rng_u64(&restored), ahead[i], "draw %d", i);
    cr_assert_eq(rng_uniform(&restored), u);
    cr_assert_eq(rng_normal(&restored), z);
    cr_assert(memcmp(&restored, &r, sizeof r) == 0);
}

/* The seed is fixed, so these statistics are fixed numbers; the bounds are loose (about five
 * standard errors) so they say "the distribution is right", not "these exact draws". */
#define N_DRAWS 100000

Test(rng, uniform_is_in_0_1_with_mean_one_half) {
    Rng r;
    rng_seed(&r, 7);
    double sum = 0, sum2 = 0, lo = 1, hi = 0;
    for (int i = 0; i < N_DRAWS; i++) {
        double u = rng_uniform(&r);
        cr_assert(u >= 0 && u < 1, "draw %d = %.17g", i, u);
        sum += u;
        sum2 += u * u;
        if (u < lo) lo = u;
        if (u > hi) hi = u;
    }
    double mean = sum / N_DRAWS, var = sum2 / N_DRAWS - mean * mean;
    cr_assert_float_eq(mean, 0.5, 0.005, "mean %g", mean); /* std error 0.0009 */
    cr_assert_float_eq(var, 1.0 / 12, 0.002, "variance %g", var);
    cr_assert_lt(lo, 1e-3);
    cr_assert_gt(hi, 1 - 1e-3);
}

Test(rng, normal_has_mean_0_and_std_1) {
    Rng r;
    rng_seed(&r, 8);
    double sum = 0, sum2 = 0, sum4 = 0;
    int beyond3 = 0;
    for (int i = 0; i < N_DRAWS; i++) {
        double z = rng_normal(&r);
        cr_assert(isfinite(z), "draw %d = %g", i, z);
        sum += z;
        sum2 += z * z;
        sum4 += z * z * z * z;
        beyond3 += fabs(z) > 3;
    }
    double mean = sum / N_DRAWS, sd = sqrt(sum2 / N_DRAWS - mean * mean);
    cr_assert_float_eq(mean, 0.0, 0.02, "mean %g", mean); /* std error 0.003 */
    cr_assert_float_eq(sd, 1.0, 0.02, "std %g", sd);      /* std error 0.002 */
    cr_assert_float_eq(sum4 / N_DRAWS, 3.0, 0.15, "fourth moment %g", sum4 / N_DRAWS);
    /* P(|z| > 3) = 0.0027: about 270 of 100k */
    cr_assert(beyond3 > 150 && beyond3 < 400, "%d draws beyond 3 sigma", beyond3);
}

Test(rng, below_n_never_reaches_n_and_hits_every_value) {
    Rng r;
    rng_seed(&r, 9);
    const uint64_t ns[] = {1, 2, 3, 7, 10, 1000, (1ull << 63) + 1};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        uint64_t n = ns[k];
        int seen[16] = {0};
        for (int i = 0; i < 20000; i++) {
            uint64_t v = rng_below(&r, n);
            cr_assert_lt(v, n, "rng_below(%llu) gave %llu", (unsigned long long)n,
                         (unsigned long long)v);
            if (n <= 16) seen[v] = 1;
        }
        for (uint64_t v = 0; n <= 16 && v < n; v++)
            cr_assert(seen[v], "rng_below(%llu) never gave %llu", (unsigned long long)n,
                      (unsigned long long)v);
    }
}

static void below_zero(void *ctx) {
    Rng r;
    rng_seed(&r, 1);
    (void)ctx;
    rng_below(&r, 0);
}

Test(rng, below_zero_aborts) {
    Capture c;
    capture_run(below_zero, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d, stderr: %s", c.signal, c.err);
    cr_assert(capture_has(&c, "rng_below: n must be > 0"), "%s", c.err);
}

Test(rng, fill_draws_in_element_order) {
    Arena *a = arena_new("t", 1 << 14);
    Tensor *t = tensor_new2(a, 5, 7, "t");
    Rng r, copy;
    rng_seed(&r, 10);
    copy = r;
    rng_fill_uniform(&r, t, -2, 3);
    for (size_t i = 0; i < t->size; i++) {
        cr_assert_eq(t->data[i], (Real)(-2 + 5 * rng_uniform(&copy)), "element %zu", i);
        cr_assert(t->data[i] >= -2 && t->data[i] <= 3);
    }
    rng_fill_normal(&r, t, 1, 0.5);
    for (size_t i = 0; i < t->size; i++)
        cr_assert_eq(t->data[i], (Real)(1 + 0.5 * rng_normal(&copy)), "element %zu", i);
    cr_assert(memcmp(&r, &copy, sizeof r) == 0, "fill used a different number of draws");
    arena_free(a);
}
