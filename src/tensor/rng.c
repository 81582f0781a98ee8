/* rng.c: xoshiro256** with splitmix64 seeding, uniform, normal and a counter hash.
 * Reference: https://prng.di.unimi.it/ (public domain algorithms, written again here). */
#include "rng.h"

#include <math.h>

#include "kernels.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(Rng *r, uint64_t seed) {
    AG_CHECK_ARG(r);
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = k_splitmix64(&x);
}

uint64_t rng_u64(Rng *r) {
    AG_CHECK_ARG(r);
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(Rng *r) {
    AG_CHECK_ARG(r);
    return (double)(rng_u64(r) >> 11) * 0x1.0p-53;
}

double rng_normal(Rng *r) {
    AG_CHECK_ARG(r);
    /* 1 - u is in (0, 1], so the log is finite. */
    double u1 = 1.0 - rng_uniform(r);
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

uint64_t rng_below(Rng *r, uint64_t n) {
    AG_CHECK_ARG(r);
    AG_CHECK(n > 0, "rng_below: n must be > 0");
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_u64(r);
    while (x >= limit);
    return x % n;
}

uint64_t rng_hash(uint64_t key, uint64_t counter) { return k_hash(key, counter); }

void rng_fill_uniform(Rng *r, Tensor *t, double lo, double hi) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(t);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)(lo + (hi - lo) * rng_uniform(r));
    ag_params_written();
}

void rng_fill_normal(Rng *r, Tensor *t, double mean, double std) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(t);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)(mean + std * rng_normal(r));
    ag_params_written();
}
