/* sample.c: a next token from a model's logits (nn_sample): greedy, or drawn from the softmax
 * of logits / temperature, cut to the top_k most likely tokens and to the nucleus of top_p
 * (Holtzman et al. 2019), the kept probabilities renormalised. Deterministic: tokens are ranked
 * by logit then id, the probabilities summed in double in that order, and one uniform draw
 * picks the token.
 * nn_token_loss: one position's cross-entropy from its logits, in double.
 * Not here: running a model (gpt.c: nn_gpt_generate). Next: gpt.c. */
#include "nn.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double z; /* logit / temperature */
    int id;
} Ranked;

/* most likely first; equal logits by id */
static int by_rank(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->z != y->z) return x->z > y->z ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
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
    Ranked *r = malloc((size_t)V * sizeof *r);
    AG_CHECK(r, "nn_sample: out of memory for %d tokens", V);
    for (int j = 0; j < V; j++) r[j] = (Ranked){(double)logits[j] / s->temperature, j};
    qsort(r, (size_t)V, sizeof *r, by_rank);
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
