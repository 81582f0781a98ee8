/* score.h: how close a model's output sequences are to reference ones, over token ids: the
 * share of exact matches, token accuracy (position-wise) and corpus BLEU-4 (Papineni et al.
 * 2002). Counts are integers, added one sentence at a time; the figures come from the sums,
 * so the counts of several processes (or several batches) add up to the one-run figures
 * exactly.
 * Not here: turning text into ids (vocab.h), decoding (nn.h: nn_seq2seq_greedy, _beam).
 * Read next: score.c; docs/text.md, "Scores". */
#ifndef ATTOGRAD_TEXT_SCORE_H
#define ATTOGRAD_TEXT_SCORE_H

typedef struct TxtScore {
    long n_sent, n_exact;
    long ref_tokens, tok_correct; /* token accuracy: position-wise matches / reference tokens */
    long match[4], total[4];      /* BLEU: clipped n-gram matches, hypothesis n-grams, n = 1..4 */
    long hyp_len, ref_len;
} TxtScore; /* all zero: no sentence yet */

/* Adds one sentence: hyp and ref are ids without specials (BOS, EOS, PAD). A reference
 * TXT_UNK (vocab.h) is a word outside the vocabulary and matches nothing (not even a
 * hypothesis TXT_UNK). hyp may be NULL when hyp_len is 0, ref when ref_len is 0. */
void txt_score_add(TxtScore *s, const int *hyp, int hyp_len, const int *ref, int ref_len);
double txt_score_exact(const TxtScore *s);  /* exact-match share, 0..1 */
double txt_score_tokens(const TxtScore *s); /* token accuracy, 0..1 */
/* Corpus BLEU-4 as Papineni et al. 2002 define it, 0..100, on the token ids as given (one
 * reference a sentence): the geometric mean of the clipped n-gram precisions of the whole
 * corpus for n = 1..4, times the brevity penalty exp(1 - r/c) when the hypotheses are shorter
 * in all (c < r) than the references. No smoothing: 0 if any precision is 0 (sacrebleu's
 * corpus_bleu with smooth_method="none" and tokenize="none" on the same tokens gives the
 * same figure; its default "exp" smoothing differs only there). */
double txt_score_bleu(const TxtScore *s);

#endif
