/* pairs.h: sentence pairs as token ids (a source and a target sequence each: translation, or
 * any sequence-to-sequence task), their padded batches in the layout a seq2seq model reads, and
 * a loader that buckets the pairs by length and shuffles the batches of each epoch from a
 * seeded RNG, its position two integers (so a checkpoint restores it to the bit). A batch uses
 * the specials of vocab.h: the source row is the tokens then TXT_EOS; the decoder reads
 * TXT_BOS then the target (tgt_in) and predicts the target then TXT_EOS (tgt_out); TXT_PAD
 * after each row's end.
 * Not here: reading pairs from a file (a program's own format: attograd-translate reads TSV,
 * examples/translate/data.c), the vocabulary (vocab.h), the model (nn.h: nn_seq2seq_*).
 * Read next: pairs.c; docs/text.md, "Sentence pairs". */
#ifndef ATTOGRAD_TEXT_PAIRS_H
#define ATTOGRAD_TEXT_PAIRS_H

#include <stddef.h>
#include <stdint.h>

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

#endif
