/* text_internal.h: the tokenizer's layout, shared by the files of src/text (not installed for
 * programs: they use text.h). A tokenizer keeps the bytes of every id in one blob (off[id] ..
 * off[id + 1]), the merges in learning order with a hash from (left, right) to the merge's rank,
 * and the chunking of TXT_SPLIT_GPT2. Read next: tokenizer.c. */
#ifndef ATTOGRAD_TEXT_INTERNAL_H
#define ATTOGRAD_TEXT_INTERNAL_H

#include "text.h"

/* A hash from a pair of ids (a, b) to an int32 value, for the merges' ranks (tokenizer.c) and
 * the trainer's pairs (bpe_train.c): open addressing with linear probing, kept at most half
 * full; the key (a << 32 | b) + 1, 0 in an empty slot. All zero: empty. */
typedef struct TxtPairMap {
    uint64_t *keys;
    int32_t *vals;
    size_t cap; /* a power of two, or 0 */
} TxtPairMap;
/* Room for n pairs, the table doubling from min_cap (a power of two): AG_OK, or AG_ERR_NOMEM
 * with m unchanged (no message: the caller says what ran out) */
int txt_pairs_reserve_(TxtPairMap *m, size_t n, size_t min_cap);
/* The slot of (a, b) when m holds it, else the empty slot where it goes; m->cap > 0 */
size_t txt_pairs_slot_(const TxtPairMap *m, int a, int b);
/* (a, b) -> v at slot i (txt_pairs_slot_'s, with room reserved) */
void txt_pairs_set_(TxtPairMap *m, size_t i, int a, int b, int32_t v);
/* The value of (a, b), or -1 */
int32_t txt_pairs_get_(const TxtPairMap *m, int a, int b);
void txt_pairs_free_(TxtPairMap *m);

struct TxtTokenizer {
    TxtKind kind;
    TxtSplit split;
    int n_base;       /* ids that are one byte: 256 (BPE) or the distinct bytes (char) */
    int n_merges;     /* BPE: ids n_base .. n_base + n_merges - 1 */
    int n_special;    /* the last ids */
    int byte_id[256]; /* the id of each byte, -1 when a char tokenizer does not know it */
    int32_t *merges;  /* (n_merges, 2) */
    int merges_cap;
    uint8_t *blob; /* the bytes of every id, back to back */
    size_t blob_len, blob_cap;
    size_t *off; /* (n_ids + 1) offsets into blob */
    int off_cap;
    TxtPairMap rank; /* (left, right) -> the merge's rank */
};

/* A new empty tokenizer of kind and split (no ids yet); NULL when out of memory. */
TxtTokenizer *txt_new_empty_(TxtKind kind, TxtSplit split);
/* Appends an id with the given bytes; AG_OK or AG_ERR_NOMEM. */
int txt_push_token_(TxtTokenizer *t, const uint8_t *bytes, size_t len);
/* Appends the merge (a, b) as the next id (its bytes: a's then b's); AG_OK or AG_ERR_NOMEM. */
int txt_push_merge_(TxtTokenizer *t, int a, int b);
/* The rank of merge (a, b) (its id is n_base + rank), or -1. */
int txt_merge_rank_(const TxtTokenizer *t, int a, int b);
/* GPT-2's contractions 's 't 're 've 'm 'll 'd at p[0..n): the length of the one there, or 0 */
size_t txt_contraction_(const uint8_t *p, size_t n);
/* The length of the chunk that starts at p[0] of p[0..n), n > 0, under TXT_SPLIT_GPT2. */
size_t txt_gpt2_chunk_(const uint8_t *p, size_t n);
/* bytes of id (no checks) */
static inline size_t txt_len_(const TxtTokenizer *t, int id) { return t->off[id + 1] - t->off[id]; }

/* realloc that aborts naming the size when memory runs out (vocab.c, pairs.c: a vocabulary or a
 * batch that cannot grow is not an input error) */
void *txt_xrealloc_(void *p, size_t bytes);

#endif
