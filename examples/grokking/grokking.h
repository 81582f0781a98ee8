/* grokking.h: grokking of modular addition (Power et al. 2022) and the progress measures of
 * Nanda et al. 2023 ("Progress measures for grokking via mechanistic interpretability"): the
 * data, the Fourier basis of Z_p and the measures, as plain functions on arrays of doubles
 * (measures.c, which tests/examples/test_grokking.c calls directly), and the program
 * attograd-grokking (main.c: training on the run loop, the analysis of the kept checkpoints,
 * the plots). docs/grokking.md explains each measure.
 * Indexing: a pair (a, b) of Z_p x Z_p is row a p + b; the Fourier basis B is (p, p), row 0
 * the constant 1/sqrt(p), row 2k-1 sqrt(2/p) cos(w_k x), row 2k sqrt(2/p) sin(w_k x), w_k =
 * 2 pi k / p, k = 1..(p-1)/2 (p odd): orthonormal, so coefficients are B v.
 * Not here: the model (src/nn/gpt.h), the trainer (src/run/run.h). Read next: measures.c. */
#ifndef ATTOGRAD_GROKKING_H
#define ATTOGRAD_GROKKING_H

#include <stdint.h>

#define GK_MAX_P 256 /* the largest modulus (a prime at most this) */

/* 1 when p is a prime (the task needs a field only for its name; the Fourier analysis needs p
 * odd) */
int gk_is_prime(int p);

/* The split of the p^2 pairs, drawn from seed: is_train[a p + b] 1 for a training pair. It is
 * balanced: every answer c = (a + b) mod p has the same number of training pairs,
 * round(frac p) of its p pairs (at least 1, at most p - 1), chosen by a shuffle of its pairs.
 * Returns the number of training pairs (p round(frac p)). The same seed gives the same split on
 * any machine (integer arithmetic only). */
int gk_split(int p, double frac, uint64_t seed, unsigned char *is_train);

/* B (p, p) as above (p odd) */
void gk_fourier_basis(int p, double *B);
/* The norm of each frequency k = 1..(p-1)/2 of a table W (p, d) indexed by the token (the
 * embedding): norm[k-1] = sqrt(|B_{2k-1} W|^2 + |B_{2k} W|^2); *constant (may be NULL): |B_0 W|.
 * The squared norms and the constant's add up to |W|^2. */
void gk_freq_norms(int p, int d, const double *W, const double *B, double *norm, double *constant);

/* The neurons: act (p^2, H) the activations of H neurons on every pair (row a p + b). For each
 * neuron h, the share of its variance (around its mean) that the terms of one frequency k
 * explain: the 2D Fourier coefficients F = B N B^T of N(a, b) = act[a p + b][h] at (i, j), i
 * and j in {0, 2k-1, 2k} but not both 0 (cos/sin of w_k a, of w_k b and their products). best[h]
 * the k with the largest share (1..(p-1)/2), share[h] that share (0 for a constant neuron). */
void gk_neuron_freqs(int p, int H, const double *act, const double *B, int *best, double *share);

/* The key frequencies from the neurons: the k that are best[h] of at least min_neurons
 * neurons whose share is at least min_share, in increasing k; at most max_keys (those with the
 * most neurons). Returns their number. */
int gk_key_freqs(int p, int H, const int *best, const double *share, double min_share,
                 int min_neurons, int *keys, int max_keys);

/* The mean cross-entropy and accuracy of logits (p^2, p) against (a + b) mod p over the pairs
 * whose is_train[pair] equals want (want < 0: every pair; is_train may then be NULL). */
void gk_loss(int p, const double *logits, const unsigned char *is_train, int want, double *loss,
             double *acc);
/* The logits (p^2, p) cut to frequencies: out = the part of logits, for each output c, along
 * the directions of (a, b) space cos(w_k (a + b)) and sin(w_k (a + b)) for the nk frequencies
 * keys (these directions are orthogonal over Z_p^2), plus, with constant 1, the mean over (a, b)
 * of each column. Restricted logits: constant 1; what excluded logits remove: constant 0. */
void gk_project_freqs(int p, const double *logits, const int *keys, int nk, int constant,
                      double *out);
/* Restricted loss: the loss on every pair of the logits cut to the key frequencies and the
 * constant. Excluded loss: the loss on the training pairs of the logits with the key
 * frequencies' parts removed. work: p^3 doubles. */
double gk_restricted_loss(int p, const double *logits, const int *keys, int nk, double *work);
double gk_excluded_loss(int p, const double *logits, const unsigned char *is_train, const int *keys,
                        int nk, double *work);

#endif
