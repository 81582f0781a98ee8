/* pairs.h: sentence pairs as token ids (a source and a target sequence each: translation, or
 * any sequence-to-sequence task), their padded batches in the layout a seq2seq model reads, and
 * a loader that buckets the pairs by length and shuffles the batches of each epoch from a
 * seeded RNG, its position two integers (so a checkpoint restores it to the bit). A batch uses
 * the specials of vocab.h: the source row is the tokens then TXT_EOS; the decoder reads
 * TXT_BOS then the target (tgt_in) and predicts the target then TXT_EOS (tgt_out); TXT_PAD
 * after each row's end.
 * And a set of pairs read from a TSV file (txt_pairs_read, pairs_read.c).
 * Not here: the vocabulary (vocab.h), the model (nn.h: nn_seq2seq_*).
 * Read next: pairs.c; docs/text.md, "Sentence pairs". */
#ifndef ATTOGRAD_TEXT_PAIRS_H
#define ATTOGRAD_TEXT_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

typedef struct TxtPair {
    int *src, *tgt;       /* token ids without BOS/EOS (the caller's memory) */
    int src_len, tgt_len; /* >= 1 */
    int line;             /* where the pair came from (1-based line of its file), for messages */
} TxtPair;

typedef struct TxtPairBatch {
    int B, S, T;       /* rows; source length (longest source + EOS); target length (+1) */
    int *src;          /* (B, S): tokens, EOS, then PAD */
    int *tgt_in;       /* (B, T): BOS, tokens, then PAD */
    int *tgt_out;      /* (B, T): tokens, EOS, then PAD (PAD is ignored by the loss) */
    int *rows;         /* (B): the pair index of each row */
    long n_src_tokens; /* non-PAD entries of src */
    long n_tgt_tokens; /* non-PAD entries of tgt_out: the tokens the loss averages over */
    size_t cap;        /* the buffers' capacity in ints */
} TxtPairBatch;        /* all zero: empty, no buffers yet */

/* Fills b with pairs[rows[0..B)] (buffers grow as needed, and are reused; start from a zeroed
 * TxtPairBatch). */
void txt_pair_batch_make(TxtPairBatch *b, const TxtPair *pairs, const int *rows, int B);
void txt_pair_batch_free(TxtPairBatch *b);

/* An epoch's batches: the pairs sorted by (source length, target length, a random key), cut
 * into batches of batch_size consecutive pairs (so a batch holds pairs of about one length and
 * little padding), the batch order shuffled. The random keys and the shuffle come from an RNG
 * seeded with (seed, epoch): the plan of an epoch is a pure function of them, so (epoch,
 * cursor) is the whole position of the loader and a checkpoint restores it exactly. */
typedef struct TxtPairLoader {
    const TxtPair *pairs;
    int n;                     /* pairs */
    int batch_size, n_batches; /* batches per epoch, the last may be smaller */
    uint64_t seed;
    int64_t epoch, cursor; /* the next batch: batch `cursor` of epoch `epoch` */
    int *order;            /* (n): pairs of the epoch, batch after batch */
    int *start;            /* (n_batches + 1): where each batch starts in order */
} TxtPairLoader;

/* n > 0 pairs (kept by pointer: they must outlive the loader), batch_size > 0. */
void txt_pair_loader_init(TxtPairLoader *l, const TxtPair *pairs, int n, int batch_size,
                          uint64_t seed);
void txt_pair_loader_free(TxtPairLoader *l);
/* Moves to batch cursor of epoch (0 <= cursor <= n_batches). */
void txt_pair_loader_seek(TxtPairLoader *l, int64_t epoch, int64_t cursor);
/* The batch at the position, then advances (to the next epoch after its last batch). */
void txt_pair_loader_next(TxtPairLoader *l, TxtPairBatch *b);

/* rows[0..n) = pairs first .. first + n - 1 sorted by (source length, target length, index):
 * batches of consecutive rows hold little padding (an evaluation's order). */
void txt_pairs_by_length(const TxtPair *pairs, int first, int n, int *rows);

/* ---- a set of pairs from a TSV file (pairs_read.c) ----
 * Limits (each a clear error naming the file and the line, never an unbounded allocation):
 * TXT_PAIRS_MAX_LINE bytes a line; a FIFO given as the file must send something (or close)
 * within TXT_PAIRS_PIPE_WAIT_MS; words and vocabularies: vocab.h's TXT_VOCAB_MAX_*. */
#define TXT_PAIRS_MAX_LINE 262144
#define TXT_PAIRS_PIPE_WAIT_MS 10000

typedef struct TxtPairSet {
    char path[512];
    TxtPair *pairs; /* ids without BOS/EOS, into ids; line: the file's */
    int n;
    int *ids;                  /* every pair's tokens in one block */
    long n_unk_src, n_unk_tgt; /* words not in the vocabularies (grow == 0) */
    int max_src, max_tgt;      /* longest sides */
} TxtPairSet;

/* Reads path: one pair a line, source<TAB>target, tokens separated by single spaces, a final
 * CR tolerated, UTF-8 (a byte-order mark at the start of the file is skipped). With grow, new
 * words are added to the vocabularies (the training set); otherwise they become TXT_UNK and
 * are counted. A side longer than max_tokens (0: no limit; a model's max_len - 1, named in the
 * message as --max-len) is an error, and so are a line that is not valid UTF-8, a line over
 * TXT_PAIRS_MAX_LINE bytes (reading stops there: an endless line costs no more), a word over
 * TXT_VOCAB_MAX_WORD_LEN bytes and a vocabulary that would grow past TXT_VOCAB_MAX_WORDS words.
 * With grow and vocabularies of kind char or bpe that have no tokenizer yet, the file is read
 * into memory, each side's tokenizer is trained on its column (bpe: to bpe_vocab tokens), then
 * the pairs are encoded with them. Only regular files and pipes are read: a device
 * (/dev/zero) or a folder is refused before it is read. Errors name the path, the line and the
 * reason (AG_ERR_IO for a file that cannot be read, AG_ERR_FORMAT for a malformed line or an
 * empty file):
 *   data/train.tsv:12: the line has no tab between source and target */
int txt_pairs_read(const char *path, TxtPairSet *d, TxtVocab *src_v, TxtVocab *tgt_v, int grow,
                   int max_tokens);
void txt_pairs_free(TxtPairSet *d);

#endif
