/* rng.h: a seeded random number generator that gives the same numbers on every machine.
 * xoshiro256** (Blackman and Vigna, 2018) seeded through splitmix64: integer arithmetic only,
 * so a seed means the same stream on any compiler, CPU or thread count. Draws are doubles,
 * converted to Real by the caller, so the float and double builds start from the same values.
 * The state is four 64-bit words: save it and restore it to continue a stream exactly.
 * Not here: the initialisers of nn layers (they call these). Next: kernels.h. */
#ifndef ATTOGRAD_RNG_H
#define ATTOGRAD_RNG_H

#include <stdint.h>

#include "tensor.h"

typedef struct Rng {
    uint64_t s[4];
} Rng;

void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_u64(Rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(Rng *r);
/* Standard normal by Box-Muller (one value per call, two uniforms used). */
double rng_normal(Rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t rng_below(Rng *r, uint64_t n);
/* A stateless mix of (key, counter): the basis of dropout masks that any thread can compute
 * for any element without sharing a stream, so masks do not depend on the thread count. */
uint64_t rng_hash(uint64_t key, uint64_t counter);

/* Fill t with uniform values in [lo, hi) or normal values (mean, std), in element order. */
void rng_fill_uniform(Rng *r, Tensor *t, double lo, double hi);
void rng_fill_normal(Rng *r, Tensor *t, double mean, double std);

#endif
