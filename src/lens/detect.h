/* detect.h: head detectors. Each scores an attention head by the share of its attention mass
 * that falls on the positions a kind of head is expected to attend to: previous-token,
 * duplicate-token and induction heads, as TransformerLens's detect_head defines them
 * (transformer_lens/head_detector.py, error_measure "mul", its default).
 *
 * For one sequence of tokens tok[0..T) the detection pattern D (T, T) is 0 or 1, and 0 above the
 * diagonal (query i, key j):
 *   previous token:  D[i][j] = 1 when j == i - 1
 *   duplicate token: D[i][j] = 1 when j < i and tok[j] == tok[i] (an earlier copy of the token)
 *   induction:       D[i][j] = 1 when 1 <= j <= i and tok[j - 1] == tok[i] (the token after
 *                    an earlier copy of the current one: the duplicate pattern shifted one key
 *                    to the right, cut to the lower triangle)
 * and a head's score on it, with A (T, T) the head's probabilities (rows sum to 1, or to 0 for
 * a query that sees nothing), is
 *   score = sum_ij A'[i][j] D[i][j] / sum_ij A'[i][j]
 * where A' is A with key 0 zeroed when exclude_bos and the diagonal zeroed when
 * exclude_current_token (both off by default, as TransformerLens's). So a head that puts all
 * its attention on the pattern's positions scores 1, and one that puts none there 0. A
 * sequence whose A' sums to 0 scores 0 (TransformerLens would divide by 0). For a batch the
 * score is the mean of the sequences' scores, as TransformerLens's detect_head on a list of
 * sequences (which, unlike this, drops the exclude flags when it recurses on each one).
 * Examples with T positions, no exclusion: a causal head spread evenly over the keys it sees
 * (A[i][j] = 1/(i+1), j <= i) scores (H_T - 1) / T as a previous-token head (H_T the T-th
 * harmonic number; 0.0585 for T = 64); a head spread evenly over all T keys, (T - 1) / T^2.
 * lens_detect_gpt scores every head of a GPT on given tokens (its attention probabilities,
 * last_probs of gpt.h); lens_detect_seq2seq every head of a seq2seq model on sentence pairs:
 * the encoder's and the decoder's self-attention with the three kinds above (the encoder is not
 * causal: its mass above the diagonal counts in the total, so a head looking ahead scores low),
 * and the cross-attention with the diagonal score: the share of its attention on key j == i
 * (query i, decoder input BOS + target, against the source + EOS: the target word predicted
 * at i against the source word at i, the alignment of a translation that keeps the word order;
 * a query i >= S has no such key). lens_repeated_tokens makes the sequences an induction head
 * is found on.
 * Not here: hooks and caches (lens.h). Read next: detect.c. */
#ifndef ATTOGRAD_LENS_DETECT_H
#define ATTOGRAD_LENS_DETECT_H

#include <stdint.h>

#include "../nn/gpt.h"
#include "../tensor/tensor.h"

typedef enum {
    LENS_PREVIOUS_TOKEN = 0, /* TransformerLens's "previous_token_head" */
    LENS_DUPLICATE_TOKEN,    /* "duplicate_token_head" */
    LENS_INDUCTION,          /* "induction_head" */
    LENS_N_HEAD_KINDS
} LensHeadKind;

/* "previous_token", "duplicate_token", "induction" */
const char *lens_head_kind_name(LensHeadKind kind);

/* TransformerLens's exclude_bos and exclude_current_token; zeroed (or NULL): neither */
typedef struct LensDetectOptions {
    int exclude_bos;           /* leave key 0 out of the attention mass */
    int exclude_current_token; /* leave key i of query i out of the attention mass */
} LensDetectOptions;

/* The detection pattern of kind for tokens (T) -> D (T, T) bytes, 0 or 1, row i the query. */
void lens_detection_pattern(LensHeadKind kind, const int *tokens, int T, uint8_t *D);
/* The highest score a causal head can reach on tokens (B, T) with no exclusion: each query's
 * attention sums to 1, so a query whose row of the detection pattern holds no 1 caps it; the
 * mean over the B sequences of the share of queries whose row holds a 1 (a perfect head of that
 * kind scores it: lens_detect_heads). Aborts as lens_detection_pattern. */
double lens_detect_ceiling(LensHeadKind kind, const int *tokens, int B, int T);

/* Scores every head of one layer: pattern (B, NH, T, T) (query, key: a model's attention
 * probabilities), tokens (B, T) (row b the tokens of sequence b), opt or NULL
 * -> scores (NH), each the mean over the B sequences of that head's score (the sums in double).
 * A head whose pattern holds a NaN or an infinity (a model that overflowed) scores NaN.
 * Aborts, naming the function and the shapes, when pattern is not 4-D with square (T, T)
 * matrices matching tokens (B, T), or a kind is unknown. */
void lens_detect_heads(const Tensor *pattern, const int *tokens, int B, int T, LensHeadKind kind,
                       const LensDetectOptions *opt, double *scores);

/* Runs m (no grad, as in evaluation) on tokens (B, T) and scores every head of every layer on
 * its attention probabilities -> scores (LENS_N_HEAD_KINDS, n_layer, n_head), kind-major. Resets
 * the tape t. */
void lens_detect_gpt(Tape *t, Gpt *m, const int *tokens, int B, int T, const LensDetectOptions *opt,
                     double *scores);

/* The diagonal score of every head of one attention: pattern (B, NH, Tq, Tk) -> scores (NH),
 * each the mean over the B rows of sum_i A[i][i] / sum_ij A[i][j] (i < min(Tq, Tk); 0 when A
 * sums to 0). Aborts, naming the function and the shape, unless pattern is 4-D with B rows. */
void lens_detect_diagonal(const Tensor *pattern, int B, double *scores);

/* Runs m (no grad, as in evaluation) on src (B, S) and the decoder's input tgt (B, T) with hooks
 * on every hook_pattern, and scores its heads: enc (LENS_N_HEAD_KINDS, n_enc, NH) on src, dec
 * (LENS_N_HEAD_KINDS, n_dec, NH) on tgt (kind-major), cross (n_dec, NH) the diagonal score.
 * Resets the tape t. */
void lens_detect_seq2seq(Tape *t, Seq2Seq *m, const int *src, int S, const int *tgt, int B, int T,
                         const LensDetectOptions *opt, double *enc, double *dec, double *cross);

/* tokens (B, T): each row L tokens drawn uniformly from [0, V), repeated to fill T (the test
 * sequences of induction heads: from position L on, every token occurred L positions back).
 * Aborts unless 1 <= L <= T and V >= 1. */
void lens_repeated_tokens(Rng *r, int V, int L, int B, int T, int *tokens);

#endif
