/* translate.h: the translation example as a library: TSV data, loading a checkpoint into a
 * model, translating a sentence (src/nn's greedy and beam search), evaluating a data set, the
 * trainer and the command line; attention maps, head importance and the plots drawn with gnuplot
 * (attention.c, heads.c on src/lens/heads.h and src/view/heads_plot.h). main.c only calls tr_main; the tests call these
 * functions directly.
 * Not here: the model itself (src/nn), the optimizer (src/optim), checkpoints (src/io).
 * The vocabularies (words, or char / BPE tokenizers) and the scores (exact match, token
 * accuracy, corpus BLEU-4), the batches and their length-bucketed loader are the library's:
 * src/text/vocab.h, score.h and pairs.h.
 * Read next: decode.c, train.c, then
 * cli.c (the subcommands and their flags); ../common/common.h holds the helpers the example
 * programs share (allocation, plots).
 *
 * Conventions of the example: token ids are ints; PAD is 0 in both vocabularies (the model's
 * pad_id), then BOS, EOS, UNK. A source row is its tokens then EOS; the decoder reads BOS then
 * the target tokens (tgt_in) and predicts the target tokens then EOS (tgt_out). Functions that
 * touch files or data return AG_OK or an AG_ERR_* code with the message in ag_last_error();
 * nothing here calls exit(). */
#ifndef ATTOGRAD_TRANSLATE_H
#define ATTOGRAD_TRANSLATE_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/common.h"
#include "attograd.h"

/* The program's name: every message on stderr starts with "attograd-translate COMMAND: ". */
#define TR_PROG "attograd-translate"
/* where every command reads a trained model by default: what `make demo` writes (and `train`
 * with its default --out) */
#define TR_DEFAULT_CKPT "build/demo/best.npz"

/* ---- the program's exit codes (tr_main, tr_train_main) ---- */
enum {
    TR_EXIT_OK = 0,
    TR_EXIT_FAIL = 1,      /* a run that failed: non-finite loss, a write error */
    TR_EXIT_USAGE = 2,     /* bad flags, a missing file, malformed data */
    TR_EXIT_SIGINT = 130,  /* interrupted by SIGINT (Ctrl-C), checkpoint saved (128 + 2) */
    TR_EXIT_SIGTERM = 143, /* interrupted by SIGTERM, checkpoint saved (128 + 15) */
};

/* The helpers the example programs share (allocation, plots, the lens's --metric, the
 * data-parallel lines): ../common/common.h, prefix ex_. */

/* Limits on what files and the standard input may hold (README, "Limits"): the library's
 * TXT_VOCAB_MAX_WORDS (src/text/vocab.h) and TXT_PAIRS_MAX_LINE (pairs.h), each a clear error
 * naming the file, the line and the limit. translate skips an over-long line of its input, but
 * gives up (exit 2) when the line goes on for this many more bytes (/dev/zero, an endless
 * pipe): 16 MiB */
#define TR_MAX_SKIP (64 * TXT_PAIRS_MAX_LINE)

/* ---- a trained model with its vocabularies ---- */
typedef struct Translator {
    Seq2Seq model;
    TxtVocab src, tgt;
    Arena *params; /* the parameters */
    Arena *step;   /* forward passes (it grows to the largest) */
    /* in no-grad mode; a pass with gradients (head importance) calls ag_no_grad(tape, 0) */
    Tape *tape;
    int64_t trained_steps; /* train.step of the checkpoint, 0 if it has none */
    char *path;            /* the checkpoint's path (messages name it) */
} Translator;

/* Loads a checkpoint written by the trainer (last.npz or best.npz): the configuration, the
 * parameters and the vocabularies. The model is left in inference use (no dropout: every
 * function below runs in no-grad mode). */
int tr_load(Translator *tr, const char *ckpt_path);
void tr_free(Translator *tr);
/* One teacher-forced forward of a sentence pair in no-grad mode: src (S) and tgt (T) are
 * token ids without specials; the model reads src + EOS and BOS + tgt. -> logits (1, T+1, V)
 * in tr's step arena, where position i predicts tgt[i] (position T predicts EOS). Afterwards
 * tr->model.dec[l].multihead_attn.last_probs is layer l's cross-attention (1, NH, T+1, S+1)
 * and .self_attn.last_probs its self-attention (1, NH, T+1, T+1); likewise enc[l].self_attn
 * (1, NH, S+1, S+1). Valid until the next call on tr. S + 1 and T + 1 <= max_len. */
Tensor *tr_forward_pair(Translator *tr, const int *src, int S, const int *tgt, int T);

/* Translates one tokenized sentence (ids without EOS), greedy (beam <= 1) or beam search of
 * beam beams with the length penalty alpha (src/nn: nn_seq2seq_greedy, nn_seq2seq_beam; at
 * most 2 S + 10 tokens, within max_len). -> the number of target ids in out (at most cap), or AG_ERR_RANGE when the model's values
 * overflowed (the message names tr's checkpoint: ex_not_finite). */
int tr_translate_ids(Translator *tr, const int *src, int S, int beam, double alpha, int *out,
                     int cap);

/* n tokens of a sentence cut to the max the model reads, saying so on warn (may be NULL) after
 * the prefix where: min(n, max). */
int tr_cut_words(int n, int max, FILE *warn, const char *where);
/* The text of n ids of v (txt_vocab_detokenize), NUL-terminated, ex_malloc'd. */
char *tr_text(const TxtVocab *v, const int *ids, int n);

/* ---- training (train.c) ---- */
/* Shard i of S of batch b (made by txt_pair_batch_make or the loader from pairs of d): its rows
 * [i B / S, (i + 1) B / S) made into sb (padded to their own lengths), and their loss: the mean
 * cross-entropy over the shard's target tokens times its share of the batch's target tokens
 * (sb->n_tgt_tokens / b->n_tgt_tokens), so that the S shards' losses and gradients sum to the
 * whole batch's mean over its non-padding tokens (up to rounding). rng: the shard's dropout
 * RNG. NULL when the shard holds no rows (a batch of fewer than S pairs). */
Tensor *tr_shard_loss(Seq2Seq *m, Tape *t, const TxtPairSet *d, const TxtPairBatch *b, int i, int S,
                      TxtPairBatch *sb, Rng *rng);

/* The translator's limits on a model configuration beyond the model's own rules
 * (nn_seq2seq_check_config: the layers, heads, dropout, activation; a checkpoint's read checks
 * them first, the flags' ranges and checks keep to them): the vocabularies' sizes, max_len,
 * pad_id 0, d_model and ff. AG_ERR_ARG naming what. */
int tr_check_config(const Seq2SeqConfig *c, const char *what);
/* The model's configuration in a checkpoint (model_config.c): nn_seq2seq_ckpt_config(c), whose
 * check also runs tr_check_config: what ckpt_read reads passes both. */
CkptConfig tr_model_config(Seq2SeqConfig *c);
/* Checks the trainer's data.position of a checkpoint read by ckpt_read (when it has one), with
 * a table of rules (ckpt_check_rules): every value in its range, the loader's position that
 * of train.step, the best and accumulated figures finite in their domain. AG_ERR_RANGE or
 * AG_ERR_FORMAT naming the file, the value and the rule (train.c lists them). */
int tr_check_position(const NpzFile *f);
/* `attograd-translate train` (its flags after the command: argv[0..argc)); parse_only: the
 * flags parsed and checked, nothing read or written. Returns the exit code. */
int tr_train_main(int argc, char **argv, int parse_only);

/* The command line: `attograd-translate <command> [flags]`, the commands train, eval,
 * translate, attention and heads. Returns the exit code. The slots of argv after the command
 * may be reordered (its positional arguments gathered at the front, as GNU getopt does). */
int tr_main(int argc, char **argv);
/* The same parsing and checking of the flags, but no command runs (no file is read or
 * written): TR_EXIT_OK (also for --help, printed), or TR_EXIT_USAGE with the message printed.
 * For the fuzz harness of the command line (fuzz/cli.c). */
int tr_check_args(int argc, char **argv);

/* ---- attention maps (attention.c) ---- */
typedef struct TrAttention {
    LensPatterns p;   /* every block (encoder self per layer, then decoder self and
                                 cross per layer) and the tokens: encoder_tokens (S),
                                 decoder_tokens (T) */
    int n_enc, n_dec; /* layers */
    int S, T;         /* encoder positions (source + <eos>), decoder ones (<bos> + target) */
    char *source, *translation; /* the texts the model read (unknown words as <unk>) */
    char *caption;              /* "source  ->  translation", the pictures' second title */
    int n_unk;                  /* source words not in the vocabulary */
} TrAttention;

/* Tokenizes sentence (unknown words named on warn, may be NULL, after the prefix
 * "attograd-translate attention: "; over-long input cut to max_len - 1 words), translates it
 * greedily (or takes target, a translation to teacher-force, when not NULL), runs one no-grad
 * forward of the pair and copies every block's last_probs. AG_ERR_ARG for a sentence without
 * words. The .npz: lens_patterns_save(&a->p, path); layer l's grid: view_patterns_png. */
int tr_attention_collect(Translator *tr, const char *sentence, const char *target, TrAttention *a,
                         FILE *warn);
void tr_attention_free(TrAttention *a);
/* `view` (view.c): one HTML page of src/view; argv after the command. An exit code. */
int tr_view_main(int argc, char **argv);
/* ---- the lens on the model's hook points (lens.c; docs/lens.md) ---- */
/* Sentence pairs run teacher-forced into r (src/lens/cmd.h's LensRows): src (B, S) the source
 * tokens + EOS, ids (B, T) BOS + the target tokens (the decoder's input), next (B, T) the target
 * tokens + EOS (what each decoder position predicts). One row from sentence and target (NULL:
 * its greedy translation), or a row per line of the file pairs ("source<TAB>target", every line
 * as many source and target tokens); exactly one of sentence and pairs. AG_OK, or an error
 * naming the file and line, or the sentence. */
int tr_lens_rows(Translator *tr, const char *sentence, const char *target, const char *pairs,
                 LensRows *r);
/* What a lens command holds (src/lens/cmd.h): the model (loaded: tr_free is due), the input's
 * flags (--sentence, --target, --pairs), the common flags, the library's command and the
 * program (its callbacks: the model loaded, the rows read, the model freed) */
typedef struct TrLens {
    Translator tr;
    const char *sentence, *target, *pairs;
    int loaded;
    LensFlags f;
    LensCmd c;
    LensProgram p;
} TrLens;
/* lens_flags_parse (argv after the command) with the input's rows (parts & TR_LENS_ROWS: a
 * sentence argument, --sentence, --target, --pairs); sets l->p (parse_only: only the checks) */
enum { TR_LENS_ROWS = 1 << 8 };
int tr_lens_parse(TrLens *l, int parse_only, const LensUsage *u, int parts, Flag *own, int n_own,
                  int argc, char **argv);

/* ---- head importance (heads.c) ---- */
/* The library's two measures (lens_head_importance) over pairs [0, limit) of d (limit <= 0:
 * all) in teacher-forced batches of batch pairs sorted by length; h->n_rows: the pairs. The
 * gates are left as they were (1) and untracked. progress (may be NULL) gets a line of
 * progress. The table: lens_heads_print; the picture: view_heads_png. */
int tr_head_importance(Translator *tr, const TxtPairSet *d, int limit, int batch,
                       LensHeadImportance *h, FILE *progress);

#endif
