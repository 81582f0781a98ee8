/* eval.h: a trained model scored on a data set, the way every user of it scores it: a
 * sequence-to-sequence model (nn.h's Seq2Seq) on a set of sentence pairs (text's TxtPairSet):
 * the teacher-forced loss, greedy hypotheses decoded a bounded window at a time, exact match,
 * token accuracy and BLEU (text's TxtScore), and the hypotheses file. Under mpirun the batches
 * are shared among the processes and the figures are the one-process ones, to the bit.
 * It sits above nn, text and dist (it includes nothing from io, optim, run or lens): the run
 * loop's validation callback and a program's eval command both call it.
 * Not here: reading the pairs (text/pairs.h), the scores' formulas (text/score.c), the search
 * (nn/seq2seq_search.c). Read next: seq2seq.c. */
#ifndef AG_EVAL_H
#define AG_EVAL_H

#include <stdio.h>

#include "../nn/nn.h"
#include "../text/pairs.h"
#include "../text/score.h"

/* Pairs an evaluation holds the hypotheses of at a time (or one batch, when larger). */
#define EVAL_WINDOW 4096

/* The decoding budget of a source of S positions (EOS included): 2 S + 10 tokens, at most the
 * model's max_len. */
int eval_seq2seq_budget(const Seq2SeqConfig *c, int S);

/* The teacher-forced loss of batch b (no-grad; resets tape t), times its target tokens: sums
 * of it over batches, divided by the tokens, give the mean over a data set. */
double eval_seq2seq_loss_sum(Seq2Seq *m, Tape *t, const TxtPairBatch *b);

/* Decodes pairs [0, limit) of d (limit <= 0: all) greedily (TXT_BOS, TXT_EOS, the budget
 * above) and scores them; with loss not NULL also the teacher-forced loss (mean over target
 * tokens). The pairs go in windows of EVAL_WINDOW in file order; each window is sorted by
 * length and decoded in batches of batch rows, its sentences scored as they are decoded, and
 * with hyps not NULL its lines written, in file order, before the next window:
 * source<TAB>reference<TAB>hypothesis, each side the text its vocabulary's tokenizer makes, or
 * its words between single spaces (src and tgt are then needed). Memory: one batch and the
 * hypotheses of one window, whatever the number of pairs. stop, when not NULL, is polled
 * between batches: when it returns 1 the evaluation stops and this returns 0 (else 1); score
 * then holds the pairs decoded so far and *loss is not set. A logit or a loss that is not
 * finite (finite weights that overflow) returns AG_ERR_RANGE naming it; the evaluation still
 * runs to its end (every process alike).
 * Under mpirun (dist_size() > 1: a trainer's validation) batch k of the whole evaluation is
 * process k mod P's; the losses are gathered exactly and added in batch order and the counts
 * summed, so every process gets the one-process figures, to the bit. stop must then give the
 * same answer in every process (run_stop_requested), and hyps must be NULL (abort). */
int eval_seq2seq(Seq2Seq *m, Tape *t, const TxtPairSet *d, int limit, int batch, TxtScore *score,
                 double *loss, FILE *hyps, const TxtVocab *src, const TxtVocab *tgt,
                 int (*stop)(void));

#endif
