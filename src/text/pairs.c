/* pairs.c: padded batches of sentence pairs and the length-bucketed, seeded loader (pairs.h).
 * Not here: reading pairs from files (a program's own), the vocabulary (vocab.c). Read next:
 * score.c. */
#include "pairs.h"

#include <stdlib.h>
#include <string.h>

#include "../tensor/rng.h"
#include "../tensor/tensor.h"
#include "text_internal.h"
#include "vocab.h"

/* ---- batches ---- */

void txt_pair_batch_make(TxtPairBatch *b, const TxtPair *pairs, const int *rows, int B) {
    AG_CHECK_ARG(b);
    AG_CHECK_ARG(pairs);
    AG_CHECK_ARG(rows);
    int S = 0, T = 0;
    for (int r = 0; r < B; r++) {
        const TxtPair *p = &pairs[rows[r]];
        if (p->src_len + 1 > S) S = p->src_len + 1;
        if (p->tgt_len + 1 > T) T = p->tgt_len + 1;
    }
    size_t need = (size_t)B * (S + 2 * T + 1);
    if (need > b->cap) {
        free(b->src);
        b->cap = need;
        b->src = txt_xrealloc_(NULL, need * sizeof(int));
    }
    b->tgt_in = b->src + (size_t)B * S;
    b->tgt_out = b->tgt_in + (size_t)B * T;
    b->rows = b->tgt_out + (size_t)B * T;
    b->B = B;
    b->S = S;
    b->T = T;
    b->n_src_tokens = b->n_tgt_tokens = 0;
    for (int r = 0; r < B; r++) {
        const TxtPair *p = &pairs[rows[r]];
        int *s = b->src + (size_t)r * S, *ti = b->tgt_in + (size_t)r * T,
            *to = b->tgt_out + (size_t)r * T;
        for (int i = 0; i < S; i++) s[i] = i < p->src_len ? p->src[i] : TXT_PAD;
        s[p->src_len] = TXT_EOS;
        for (int i = 0; i < T; i++) {
            ti[i] = i == 0 ? TXT_BOS : i <= p->tgt_len ? p->tgt[i - 1] : TXT_PAD;
            to[i] = i < p->tgt_len ? p->tgt[i] : i == p->tgt_len ? TXT_EOS : TXT_PAD;
        }
        b->rows[r] = rows[r];
        b->n_src_tokens += p->src_len + 1;
        b->n_tgt_tokens += p->tgt_len + 1;
    }
}

void txt_pair_batch_free(TxtPairBatch *b) {
    AG_CHECK_ARG(b);
    free(b->src);
    memset(b, 0, sizeof *b);
}

/* ---- the loader ---- */

typedef struct {
    uint64_t key;
    int index;
} SortItem;

static int cmp_items(const void *a, const void *b) {
    const SortItem *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

void txt_pairs_by_length(const TxtPair *pairs, int first, int n, int *rows) {
    AG_CHECK_ARG(pairs);
    AG_CHECK_ARG(rows);
    SortItem *items = txt_xrealloc_(NULL, (size_t)n * sizeof *items);
    for (int i = 0; i < n; i++) {
        const TxtPair *p = &pairs[first + i];
        items[i].key = ((uint64_t)p->src_len << 32) | (uint64_t)p->tgt_len;
        items[i].index = first + i;
    }
    qsort(items, (size_t)n, sizeof *items, cmp_items);
    for (int i = 0; i < n; i++) rows[i] = items[i].index;
    free(items);
}

/* The plan of epoch l->epoch: bucketed by length with random tie keys, batch order shuffled. */
static void plan_epoch(TxtPairLoader *l) {
    Rng r;
    rng_seed(&r, rng_hash(l->seed, (uint64_t)l->epoch));
    SortItem *items = txt_xrealloc_(NULL, (size_t)l->n * sizeof *items);
    for (int i = 0; i < l->n; i++) {
        uint64_t ls = (uint64_t)l->pairs[i].src_len, lt = (uint64_t)l->pairs[i].tgt_len;
        items[i].key = (ls << 48) | ((lt & 0xffff) << 32) | (rng_u64(&r) >> 32);
        items[i].index = i;
    }
    qsort(items, (size_t)l->n, sizeof *items, cmp_items);
    int *perm = txt_xrealloc_(NULL, (size_t)l->n_batches * sizeof *perm);
    for (int i = 0; i < l->n_batches; i++) perm[i] = i;
    for (int i = l->n_batches - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int pos = 0;
    for (int k = 0; k < l->n_batches; k++) {
        int first = perm[k] * l->batch_size, last = first + l->batch_size;
        if (last > l->n) last = l->n;
        l->start[k] = pos;
        for (int i = first; i < last; i++) l->order[pos++] = items[i].index;
    }
    l->start[l->n_batches] = pos;
    free(perm);
    free(items);
}

void txt_pair_loader_init(TxtPairLoader *l, const TxtPair *pairs, int n, int batch_size,
                          uint64_t seed) {
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(pairs);
    AG_CHECK(batch_size > 0 && n > 0, "txt_pair_loader_init: batch size %d, %d pairs", batch_size,
             n);
    memset(l, 0, sizeof *l);
    l->pairs = pairs;
    l->n = n;
    l->batch_size = batch_size;
    l->n_batches = (n + batch_size - 1) / batch_size;
    l->seed = seed;
    l->order = txt_xrealloc_(NULL, (size_t)n * sizeof *l->order);
    l->start = txt_xrealloc_(NULL, (size_t)(l->n_batches + 1) * sizeof *l->start);
    plan_epoch(l);
}

void txt_pair_loader_free(TxtPairLoader *l) {
    AG_CHECK_ARG(l);
    free(l->order);
    free(l->start);
    memset(l, 0, sizeof *l);
}

void txt_pair_loader_seek(TxtPairLoader *l, int64_t epoch, int64_t cursor) {
    AG_CHECK_ARG(l);
    AG_CHECK(epoch >= 0 && cursor >= 0 && cursor <= l->n_batches,
             "txt_pair_loader_seek: epoch %lld cursor %lld (%d batches)", (long long)epoch,
             (long long)cursor, l->n_batches);
    if (epoch != l->epoch) {
        l->epoch = epoch;
        plan_epoch(l);
    }
    l->cursor = cursor;
}

void txt_pair_loader_next(TxtPairLoader *l, TxtPairBatch *b) {
    AG_CHECK_ARG(l);
    AG_CHECK_ARG(b);
    if (l->cursor == l->n_batches) txt_pair_loader_seek(l, l->epoch + 1, 0);
    int k = (int)l->cursor++;
    txt_pair_batch_make(b, l->pairs, l->order + l->start[k], l->start[k + 1] - l->start[k]);
}
