/* text_internal.h: the tokenizer's layout, shared by the files of src/text (not installed for
 * programs: they use text.h). A tokenizer keeps the bytes of every id in one blob (off[id] ..
 * off[id + 1]), the merges in learning order with a hash from (left, right) to the merge's rank,
 * and the chunking of TXT_SPLIT_GPT2. Read next: tokenizer.c. */
#ifndef ATTOGRAD_TEXT_INTERNAL_H
#define ATTOGRAD_TEXT_INTERNAL_H

#include "text.h"

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
    uint64_t *mkeys; /* open addressing: (left << 32 | right) + 1, 0 when empty */
    int32_t *mrank;
    size_t mcap; /* a power of two */
};

/* A new empty tokenizer of kind and split (no ids yet); NULL when out of memory. */
TxtTokenizer *txt_new_empty_(TxtKind kind, TxtSplit split);
/* Appends an id with the given bytes; AG_OK or AG_ERR_NOMEM. */
int txt_push_token_(TxtTokenizer *t, const uint8_t *bytes, size_t len);
/* Appends the merge (a, b) as the next id (its bytes: a's then b's); AG_OK or AG_ERR_NOMEM. */
int txt_push_merge_(TxtTokenizer *t, int a, int b);
/* The rank of merge (a, b) (its id is n_base + rank), or -1. */
int txt_merge_rank_(const TxtTokenizer *t, int a, int b);
/* The length of the chunk that starts at p[0] of p[0..n), n > 0, under TXT_SPLIT_GPT2. */
size_t txt_gpt2_chunk_(const uint8_t *p, size_t n);
/* bytes of id (no checks) */
static inline size_t txt_len_(const TxtTokenizer *t, int id) { return t->off[id + 1] - t->off[id]; }

#endif
