/* sample.c: a next token from a model's logits (nn_sample): greedy, or drawn from the softmax
 * of logits / temperature, cut to the top_k most likely tokens and to the nucleus of top_p
 * (Holtzman et al. 2019), the kept probabilities renormalised. Deterministic: tokens are ranked
 * by logit then id, the probabilities summed in double in that order, and one uniform draw
 * picks the token.
 * nn_token_loss: one position's cross-entropy from its logits, in double.
 * Not here: running a model (gpt.c: nn_gpt_generate). Next: gpt.c. */
#include "nn.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double z; /* logit / temperature; while ranking, its key (rank_key) */
    int id;
} Ranked;

/* A key whose unsigned order is the rank: a larger z first (-0 and +0 equal, -inf last) */
static uint64_t rank_key(double z) {
    if (z == 0) z = 0; /* -0: +0 */
    uint64_t u;
    memcpy(&u, &z, sizeof u);
    u = u >> 63 ? ~u : u | (uint64_t)1 << 63; /* ascending in z */
    return ~u;
}

/* r[0..n), in id order, sorted by rank (the most likely first, equal logits by id): a radix
 * sort of the keys, least significant byte first, each pass stable, so that equal keys keep
 * the id order (qsort's comparison of (z, id) gives the same order, in about 20 times as long
 * for a vocabulary of 50257); tmp holds n. Bytes all tokens share are skipped. */
static void rank_sort(Ranked *r, Ranked *tmp, int n) {
    for (int j = 0; j < n; j++) {
        uint64_t k = rank_key(r[j].z);
        memcpy(&r[j].z, &k, sizeof k);
    }
    for (int shift = 0; shift < 64; shift += 8) {
        size_t count[257] = {0};
        for (int j = 0; j < n; j++) {
            uint64_t k;
            memcpy(&k, &r[j].z, sizeof k);
            count[(k >> shift & 255) + 1]++;
        }
        int same = 0;
        for (int d = 1; d <= 256; d++) same |= count[d] == (size_t)n;
        if (same) continue;
        for (int d = 1; d <= 256; d++) count[d] += count[d - 1];
        for (int j = 0; j < n; j++) {
            uint64_t k;
            memcpy(&k, &r[j].z, sizeof k);
            tmp[count[k >> shift & 255]++] = r[j];
        }
        memcpy(r, tmp, (size_t)n * sizeof *r);
    }
}

int nn_sample(const Real *logits, int V, const NnSampling *s, Rng *rng) {
    AG_CHECK_ARG(logits);
    AG_CHECK_ARG(s);
    AG_CHECK(V > 0, "nn_sample: V %d must be > 0", V);
    AG_CHECK(s->temperature >= 0 && isfinite(s->temperature) && s->top_k >= 0 && s->top_p >= 0 &&
                 s->top_p <= 1,
             "nn_sample: temperature %g must be >= 0, top_k %d >= 0 and top_p %g in [0, 1]",
             s->temperature, s->top_k, s->top_p);
    int best = 0;
    for (int j = 0; j < V; j++) {
        AG_CHECK(!isnan(logits[j]) && logits[j] != (Real)INFINITY,
                 "nn_sample: logit %d of %d is %g", j, V, (double)logits[j]);
        if (logits[j] > logits[best]) best = j;
    }
    if (s->temperature == 0 || s->top_k == 1) return best; /* greedy: no draw */
    AG_CHECK_ARG(rng);
    AG_CHECK(logits[best] != -(Real)INFINITY,
             "nn_sample: all %d logits are -inf: no probabilities to draw from", V);
    Ranked *r = malloc(2 * (size_t)V * sizeof *r);
    AG_CHECK(r, "nn_sample: out of memory for %d tokens", V);
    for (int j = 0; j < V; j++) r[j] = (Ranked){(double)logits[j] / s->temperature, j};
    rank_sort(r, r + V, V);
    for (int j = 0; j < V; j++) r[j].z = (double)logits[r[j].id] / s->temperature;
    int n = s->top_k > 0 && s->top_k < V ? s->top_k : V; /* the kept tokens: r[0..n) */
    double total = 0, max = r[0].z;
    for (int j = 0; j < n; j++) { /* from here on r[j].z is e^(z - max z) */
        r[j].z = exp(r[j].z - max);
        total += r[j].z;
    }
    if (s->top_p > 0 && s->top_p < 1) { /* the smallest prefix holding top_p of the mass */
        double kept = 0;
        int m = 0;
        while (m < n && kept < s->top_p * total) kept += r[m++].z;
        n = m, total = kept;
    }
    double u = rng_uniform(rng) * total, run = 0;
    int tok = r[n - 1].id; /* where rounding leaves u past the last sum */
    for (int j = 0; j < n; j++) {
        run += r[j].z;
        if (u < run) {
            tok = r[j].id;
            break;
        }
    }
    free(r);
    return tok;
}

double nn_token_loss(const Real *logits, int V, int target) {
    AG_CHECK_ARG(logits);
    AG_CHECK(V > 0 && target >= 0 && target < V, "nn_token_loss: target %d outside [0, V %d)",
             target, V);
    double mx = logits[0], s = 0;
    for (int c = 1; c < V; c++) mx = logits[c] > mx ? logits[c] : mx;
    for (int c = 0; c < V; c++) s += exp((double)logits[c] - mx);
    return log(s) + mx - (double)logits[target];
}
