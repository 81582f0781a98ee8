/* measures.c: the data split, the Fourier basis of Z_p and the progress measures of
 * grokking.h, on plain arrays of doubles (no tape, no model: main.c feeds them the model's
 * embedding, neurons and logits; the tests feed them hand-built ones).
 * Not here: reading checkpoints, plots (main.c). Read next: main.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "grokking.h"

int gk_is_prime(int p) {
    if (p < 2) return 0;
    for (int d = 2; d * d <= p; d++)
        if (p % d == 0) return 0;
    return 1;
}

int gk_split(int p, double frac, uint64_t seed, unsigned char *is_train) {
    int n = (int)lround(frac * p);
    n = n < 1 ? 1 : n > p - 1 ? p - 1 : n;
    memset(is_train, 0, (size_t)p * p);
    int a[GK_MAX_P];
    for (int c = 0; c < p; c++) { /* answer c: the pairs (a, c - a), a shuffled */
        Rng g;
        rng_seed(&g, rng_hash(seed, (uint64_t)c));
        for (int i = 0; i < p; i++) a[i] = i;
        for (int i = p - 1; i > 0; i--) {
            int j = (int)rng_below(&g, (uint64_t)i + 1), t = a[i];
            a[i] = a[j], a[j] = t;
        }
        for (int i = 0; i < n; i++) is_train[a[i] * p + ((c - a[i]) % p + p) % p] = 1;
    }
    return n * p;
}

void gk_fourier_basis(int p, double *B) {
    double pi = acos(-1.0);
    for (int x = 0; x < p; x++) B[x] = 1 / sqrt(p);
    for (int k = 1; 2 * k < p; k++)
        for (int x = 0; x < p; x++) {
            /* (k x) mod p first: the angle stays in [0, 2 pi) */
            double w = 2 * pi * (double)((k * x) % p) / p;
            B[(2 * k - 1) * p + x] = sqrt(2.0 / p) * cos(w);
            B[2 * k * p + x] = sqrt(2.0 / p) * sin(w);
        }
}

/* coefficient i of column j of W (p, d): B_i . W[:, j] */
static double coef(int p, int d, const double *W, const double *B, int i, int j) {
    double s = 0;
    for (int x = 0; x < p; x++) s += B[i * p + x] * W[x * d + j];
    return s;
}

void gk_freq_norms(int p, int d, const double *W, const double *B, double *norm, double *constant) {
    double c0 = 0;
    for (int j = 0; j < d; j++) c0 += pow(coef(p, d, W, B, 0, j), 2);
    if (constant) *constant = sqrt(c0);
    for (int k = 1; 2 * k < p; k++) {
        double s = 0;
        for (int j = 0; j < d; j++)
            s += pow(coef(p, d, W, B, 2 * k - 1, j), 2) + pow(coef(p, d, W, B, 2 * k, j), 2);
        norm[k - 1] = sqrt(s);
    }
}

void gk_neuron_freqs(int p, int H, const double *act, const double *B, int *best, double *share) {
    size_t pH = (size_t)p * H;
    int K = (p - 1) / 2;
    /* Y[i][b][h] = sum_a B[i][a] act[a][b][h]: the transform over a */
    double *Y = calloc((size_t)p * pH, sizeof *Y);
    double *F0 = calloc(pH, sizeof *F0);                  /* F[0][j][h] for every j */
    double *Fi0 = calloc(pH, sizeof *Fi0);                /* F[i][0][h] for every i */
    double *Fin = calloc(4 * (size_t)K * H, sizeof *Fin); /* F[i][j] within frequency k */
    double *total = calloc((size_t)H, sizeof *total);
    AG_CHECK(Y && F0 && Fi0 && Fin && total, "gk_neuron_freqs: out of memory (p %d, H %d)", p, H);
    for (int i = 0; i < p; i++)
        for (int a = 0; a < p; a++) {
            double w = B[i * p + a];
            const double *x = act + a * pH;
            double *y = Y + i * pH;
            for (size_t q = 0; q < pH; q++) y[q] += w * x[q];
        }
    for (size_t q = 0; q < (size_t)p * pH; q++) total[q % H] += act[q] * act[q];
    /* F[i][j][h] = sum_b Y[i][b][h] B[j][b] for the (i, j) the shares need */
    for (int j = 0; j < p; j++) /* i = 0, every j */
        for (int b = 0; b < p; b++)
            for (int h = 0; h < H; h++) F0[j * H + h] += Y[b * H + h] * B[j * p + b];
    for (int i = 0; i < p; i++)
        for (int b = 0; b < p; b++)
            for (int h = 0; h < H; h++) Fi0[i * H + h] += Y[i * pH + b * H + h] * B[b];
    for (int k = 1; k <= K; k++)
        for (int r = 0; r < 2; r++)     /* i = 2k-1+r */
            for (int s = 0; s < 2; s++) /* j = 2k-1+s */
                for (int b = 0; b < p; b++) {
                    double w = B[(2 * k - 1 + s) * p + b];
                    const double *y = Y + (size_t)(2 * k - 1 + r) * pH + b * H;
                    double *f = Fin + ((size_t)(k - 1) * 4 + r * 2 + s) * H;
                    for (int h = 0; h < H; h++) f[h] += y[h] * w;
                }
    for (int h = 0; h < H; h++) {
        double var = total[h] - F0[h] * F0[h]; /* Parseval: minus the mean's part */
        best[h] = 1, share[h] = 0;
        for (int k = 1; k <= K && var > 1e-12 * total[h] && var > 0; k++) {
            double s = 0;
            for (int r = 0; r < 2; r++)
                s += pow(F0[(2 * k - 1 + r) * H + h], 2) + pow(Fi0[(2 * k - 1 + r) * H + h], 2);
            for (int q = 0; q < 4; q++) s += pow(Fin[((size_t)(k - 1) * 4 + q) * H + h], 2);
            if (s / var > share[h]) share[h] = s / var, best[h] = k;
        }
    }
    free(Y), free(F0), free(Fi0), free(Fin), free(total);
}

int gk_key_freqs(int p, int H, const int *best, const double *share, double min_share,
                 int min_neurons, int *keys, int max_keys) {
    int K = (p - 1) / 2, count[GK_MAX_P] = {0}, n = 0;
    for (int h = 0; h < H; h++)
        if (share[h] >= min_share) count[best[h]]++;
    while (n < max_keys) { /* the most neurons first */
        int top = 0;
        for (int k = 1; k <= K; k++)
            if (count[k] >= min_neurons && (top == 0 || count[k] > count[top])) top = k;
        if (top == 0) break;
        keys[n++] = top;
        count[top] = -1;
    }
    for (int i = 1; i < n; i++) /* increasing k */
        for (int j = i; j > 0 && keys[j] < keys[j - 1]; j--) {
            int t = keys[j];
            keys[j] = keys[j - 1], keys[j - 1] = t;
        }
    return n;
}

void gk_loss(int p, const double *logits, const unsigned char *is_train, int want, double *loss,
             double *acc) {
    double sum = 0;
    int n = 0, right = 0;
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++) {
            int r = a * p + b, c = (a + b) % p;
            if (want >= 0 && is_train[r] != want) continue;
            const double *l = logits + (size_t)r * p;
            double mx = l[0], z = 0;
            int arg = 0;
            for (int j = 1; j < p; j++)
                if (l[j] > mx) mx = l[j], arg = j;
            for (int j = 0; j < p; j++) z += exp(l[j] - mx);
            sum += log(z) + mx - l[c];
            right += arg == c;
            n++;
        }
    *loss = n ? sum / n : NAN;
    if (acc) *acc = n ? (double)right / n : NAN;
}

void gk_project_freqs(int p, const double *logits, const int *keys, int nk, int constant,
                      double *out) {
    size_t P2 = (size_t)p * p;
    memset(out, 0, P2 * p * sizeof *out);
    if (constant)
        for (int c = 0; c < p; c++) {
            double m = 0;
            for (size_t r = 0; r < P2; r++) m += logits[r * p + c];
            for (size_t r = 0; r < P2; r++) out[r * p + c] = m / (double)P2;
        }
    double *u = malloc(P2 * sizeof *u), pi = acos(-1.0);
    AG_CHECK(u, "gk_project_freqs: out of memory (p %d)", p);
    for (int i = 0; i < nk; i++)
        for (int trig = 0; trig < 2; trig++) { /* cos(w_k (a + b)), then sin */
            double nn = 0;
            for (size_t r = 0; r < P2; r++) {
                double w = 2 * pi * (double)((keys[i] * (int)(r / p + r % p)) % p) / p;
                u[r] = trig ? sin(w) : cos(w);
                nn += u[r] * u[r];
            }
            for (size_t r = 0; r < P2; r++) u[r] /= sqrt(nn);
            for (int c = 0; c < p; c++) {
                double s = 0;
                for (size_t r = 0; r < P2; r++) s += u[r] * logits[r * p + c];
                for (size_t r = 0; r < P2; r++) out[r * p + c] += s * u[r];
            }
        }
    free(u);
}

double gk_restricted_loss(int p, const double *logits, const int *keys, int nk, double *work) {
    double loss;
    gk_project_freqs(p, logits, keys, nk, 1, work);
    gk_loss(p, work, NULL, -1, &loss, NULL);
    return loss;
}

double gk_excluded_loss(int p, const double *logits, const unsigned char *is_train, const int *keys,
                        int nk, double *work) {
    double loss;
    gk_project_freqs(p, logits, keys, nk, 0, work);
    size_t n = (size_t)p * p * p;
    for (size_t q = 0; q < n; q++) work[q] = logits[q] - work[q];
    gk_loss(p, work, is_train, 1, &loss, NULL);
    return loss;
}
