/* bpe_train.c: training a byte-level BPE (txt_bpe_train). The text is cut into chunks
 * (TXT_SPLIT_GPT2) and equal chunks are counted once with their number of occurrences as a
 * weight (TXT_SPLIT_NONE: the whole text is one chunk of weight 1). The symbols of the distinct
 * chunks sit back to back in one array, a symbol of L bytes at the position of its first byte:
 * its next is L positions on (or none at the end of its chunk), and the L - 1 positions it
 * covers hold -(start + 2), so that the position before a symbol names the symbol before it.
 * A bit marks the first position of each chunk; the chunk's weight is found by its start.
 *
 * Memory: 4 bytes a byte of the distinct chunks for the symbols, 1 bit for the chunk starts, 8
 * bytes a distinct chunk (start, weight), 4 bytes an adjacent pair for the positions (their
 * lists grow at most to twice that as merges add positions), and the pairs and the heap (one
 * entry a distinct pair or a count that grew), whatever the text: one repeated letter is one
 * chunk of the whole text (docs/robustness.md measures 200 MB of one letter and of base64).
 *
 * Counting is incremental, as in sentencepiece's and Hugging Face's trainers: every adjacent
 * pair has a count (the sum of the weights of its occurrences) and a list of the positions
 * where it started at some point. Merging pair (a, b) into c visits only those positions (in
 * increasing order, so that overlaps such as "aaa" merge left to right as minbpe does), checks
 * each still holds (a, b), and updates the counts of the pairs around it: (x, a) and (b, y)
 * lose the weight, (x, c) and (c, y) gain it. The best pair comes from a max-heap of
 * (count, a, b) entries, some stale: a popped entry whose count is no longer the pair's is
 * pushed again with its true count (a count that fell), or dropped (a newer entry holds the
 * count that grew: every pair whose count grows is pushed once after each merge). The heap's
 * order (count down, then a up, then b up) is the tie-break, so the result depends only on the
 * text. Cost: each merge visits the occurrences of its own pair, not the whole text.
 * Not here: encoding (tokenizer.c). Read next: tokenizer_io.c. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

typedef struct {
    int64_t count;
    int32_t a, b;
    int32_t *pos; /* positions where (a, b) started at some point (stale ones are skipped) */
    int32_t npos, cappos;
    unsigned char dirty;    /* its count grew during this merge: push it once after */
    unsigned char excluded; /* merging it would pass a token length limit */
} Pair;

typedef struct {
    int64_t count;
    int32_t a, b;
} HeapEntry;

typedef struct {
    /* symbols of the distinct chunks, back to back: sym[i] >= 0 a symbol starting at i, else
     * -(s + 2): a byte of the symbol that starts at s; bit i of first: a chunk starts at i */
    int32_t *sym;
    uint8_t *first;
    int32_t n;
    int32_t *cstart, *cweight; /* each distinct chunk's first position and weight */
    int32_t n_chunks;
    const TxtTokenizer *tok; /* the symbols' byte lengths */
    /* pairs, and a hash (a, b) -> index into pairs */
    Pair *pairs;
    int32_t n_pairs, cap_pairs;
    TxtPairMap index;
    HeapEntry *heap;
    size_t hn, hcap;
    int32_t *dirty;
    int32_t n_dirty, cap_dirty;
    int oom;
} Trainer;

/* ---- the max-heap of (count, a, b): larger count first, then smaller a, then smaller b ---- */

static int heap_before(const HeapEntry *x, const HeapEntry *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static void heap_push(Trainer *T, HeapEntry e) {
    if (T->hn == T->hcap) {
        size_t cap = T->hcap * 2 + 1024;
        HeapEntry *h = realloc(T->heap, cap * sizeof *h);
        if (!h) {
            T->oom = 1;
            return;
        }
        T->heap = h;
        T->hcap = cap;
    }
    size_t i = T->hn++;
    while (i > 0 && heap_before(&e, &T->heap[(i - 1) / 2])) {
        T->heap[i] = T->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    T->heap[i] = e;
}

static HeapEntry heap_pop(Trainer *T) {
    HeapEntry top = T->heap[0], last = T->heap[--T->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= T->hn) break;
        if (c + 1 < T->hn && heap_before(&T->heap[c + 1], &T->heap[c])) c++;
        if (!heap_before(&T->heap[c], &last)) break;
        T->heap[i] = T->heap[c];
        i = c;
    }
    if (T->hn) T->heap[i] = last;
    return top;
}

/* ---- pairs ---- */

/* The index of pair (a, b), created with count 0 when new; -1 when out of memory. */
static int32_t pair_get(Trainer *T, int32_t a, int32_t b) {
    if (txt_pairs_reserve_(&T->index, (size_t)T->n_pairs + 1, 4096) != AG_OK) {
        T->oom = 1;
        return -1;
    }
    size_t i = txt_pairs_slot_(&T->index, a, b);
    if (T->index.keys[i]) return T->index.vals[i];
    if (T->n_pairs == T->cap_pairs) {
        int32_t cap = T->cap_pairs * 2 + 1024;
        Pair *p = realloc(T->pairs, (size_t)cap * sizeof *p);
        if (!p) {
            T->oom = 1;
            return -1;
        }
        T->pairs = p;
        T->cap_pairs = cap;
    }
    txt_pairs_set_(&T->index, i, a, b, T->n_pairs);
    T->pairs[T->n_pairs] = (Pair){.a = a, .b = b};
    return T->n_pairs++;
}

static void pair_add_pos(Trainer *T, Pair *p, int32_t pos) {
    if (p->npos == p->cappos) {
        int32_t cap = p->cappos < 4 ? 4 : p->cappos * 2;
        int32_t *q = realloc(p->pos, (size_t)cap * sizeof *q);
        if (!q) {
            T->oom = 1;
            return;
        }
        p->pos = q;
        p->cappos = cap;
    }
    p->pos[p->npos++] = pos;
}

/* (a, b) gained weight w at position pos */
static void pair_inc(Trainer *T, int32_t a, int32_t b, int32_t w, int32_t pos) {
    int32_t k = pair_get(T, a, b);
    if (k < 0) return;
    Pair *p = &T->pairs[k];
    p->count += w;
    pair_add_pos(T, p, pos);
    if (!p->dirty) {
        p->dirty = 1;
        if (T->n_dirty == T->cap_dirty) {
            int32_t cap = T->cap_dirty * 2 + 256;
            int32_t *d = realloc(T->dirty, (size_t)cap * sizeof *d);
            if (!d) {
                T->oom = 1;
                return;
            }
            T->dirty = d;
            T->cap_dirty = cap;
        }
        T->dirty[T->n_dirty++] = k;
    }
}

static void pair_dec(Trainer *T, int32_t a, int32_t b, int32_t w) {
    int32_t k = pair_get(T, a, b);
    if (k >= 0) T->pairs[k].count -= w;
}

/* ---- symbols: neighbours and weights ---- */

static int is_first(const Trainer *T, int32_t i) { return (T->first[i >> 3] >> (i & 7)) & 1; }

/* the symbol after the one at start i, or -1 at the end of its chunk */
static int32_t next_of(const Trainer *T, int32_t i) {
    int32_t e = i + (int32_t)txt_len_(T->tok, T->sym[i]);
    return e >= T->n || is_first(T, e) ? -1 : e;
}

/* the symbol before the one at start i, or -1 at the start of its chunk */
static int32_t prev_of(const Trainer *T, int32_t i) {
    if (is_first(T, i)) return -1;
    int32_t k = T->sym[i - 1];
    return k >= 0 ? i - 1 : -(k + 2);
}

/* the weight of the chunk that holds position i */
static int32_t weight_of(const Trainer *T, int32_t i) {
    int32_t lo = 0, hi = T->n_chunks - 1; /* the last chunk starting at or before i */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (T->cstart[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return T->cweight[lo];
}

/* Merges every occurrence of pair k into the new id c, left to right. A pair's positions are
 * in increasing order: they are either the first count's (a scan) or were all added during the
 * one merge that made the newer of its two ids, which visits positions in increasing order.
 * Left to right is what makes overlaps ("aaa" with pair (a, a)) merge as minbpe does. */
static void merge_pair(Trainer *T, int32_t k, int32_t c) {
    int32_t a = T->pairs[k].a, b = T->pairs[k].b;
    int32_t *pos = T->pairs[k].pos, npos = T->pairs[k].npos;
    T->pairs[k].pos = NULL;
    T->pairs[k].npos = T->pairs[k].cappos = 0;
    for (int32_t q = 0; q < npos; q++) {
        int32_t i = pos[q];
        AG_CHECK(q == 0 || i > pos[q - 1], "txt_bpe_train: positions of pair (%d, %d) out of order",
                 a, b);
        if (T->sym[i] != a) continue; /* stale */
        int32_t j = next_of(T, i);
        if (j < 0 || T->sym[j] != b) continue;
        int32_t w = weight_of(T, i), p = prev_of(T, i), n = next_of(T, j);
        if (p >= 0) pair_dec(T, T->sym[p], a, w);
        if (n >= 0) pair_dec(T, b, T->sym[n], w);
        T->pairs[k].count -= w;
        /* c covers [i, j + len(b)): j and the last byte name i as the start */
        int32_t last = j + (int32_t)txt_len_(T->tok, b) - 1;
        T->sym[j] = -(i + 2);
        T->sym[last] = -(i + 2);
        T->sym[i] = c;
        if (p >= 0) pair_inc(T, T->sym[p], c, w, p);
        if (n >= 0) pair_inc(T, c, T->sym[n], w, i);
    }
    free(pos);
    for (int32_t d = 0; d < T->n_dirty; d++) {
        Pair *p = &T->pairs[T->dirty[d]];
        p->dirty = 0;
        if (p->count > 0) heap_push(T, (HeapEntry){p->count, p->a, p->b});
    }
    T->n_dirty = 0;
}

/* ---- chunks: the distinct chunks of the text and how often each occurs ---- */

typedef struct {
    size_t off, len;
    int64_t count;
} Chunk;

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* the distinct chunks of text under split, in order of first occurrence; -1 when out of memory */
static int64_t distinct_chunks(const uint8_t *text, size_t n, TxtSplit split, Chunk **out) {
    size_t cap = 1024, nc = 0, hcap = 4096;
    Chunk *ch = malloc(cap * sizeof *ch);
    int64_t *table = malloc(hcap * sizeof *table); /* chunk index + 1, 0 empty */
    if (!ch || !table) goto oom;
    memset(table, 0, hcap * sizeof *table);
    for (size_t i = 0; i < n;) {
        size_t len = split == TXT_SPLIT_GPT2 ? txt_gpt2_chunk_(text + i, n - i) : n - i;
        uint64_t h = hash_bytes(text + i, len);
        size_t s = h & (hcap - 1);
        while (table[s]) {
            Chunk *c = &ch[table[s] - 1];
            if (c->len == len && memcmp(text + c->off, text + i, len) == 0) break;
            s = (s + 1) & (hcap - 1);
        }
        if (table[s]) {
            ch[table[s] - 1].count++;
        } else {
            if (nc == cap) {
                Chunk *c2 = realloc(ch, (cap *= 2) * sizeof *ch);
                if (!c2) goto oom;
                ch = c2;
            }
            ch[nc] = (Chunk){i, len, 1};
            table[s] = (int64_t)++nc;
            if (nc * 2 > hcap) { /* grow and rehash */
                size_t hc2 = hcap * 2;
                int64_t *t2 = calloc(hc2, sizeof *t2);
                if (!t2) goto oom;
                for (size_t k = 0; k < nc; k++) {
                    size_t s2 = hash_bytes(text + ch[k].off, ch[k].len) & (hc2 - 1);
                    while (t2[s2]) s2 = (s2 + 1) & (hc2 - 1);
                    t2[s2] = (int64_t)k + 1;
                }
                free(table);
                table = t2;
                hcap = hc2;
            }
        }
        i += len;
    }
    free(table);
    *out = ch;
    return (int64_t)nc;
oom:
    free(ch);
    free(table);
    return -1;
}

static void trainer_free(Trainer *T) {
    free(T->sym);
    free(T->first);
    free(T->cstart);
    free(T->cweight);
    for (int32_t k = 0; k < T->n_pairs; k++) free(T->pairs[k].pos);
    free(T->pairs);
    txt_pairs_free_(&T->index);
    free(T->heap);
    free(T->dirty);
}

int txt_bpe_train(const void *text, size_t n, int vocab_size, TxtSplit split, const char *label,
                  TxtTokenizer **out) {
    AG_CHECK(text || n == 0, "txt_bpe_train: argument 'text' is NULL");
    AG_CHECK_ARG(out);
    if (!label) label = "txt_bpe_train";
    *out = NULL;
    if (vocab_size < 256 || vocab_size > TXT_MAX_VOCAB)
        return ag_fail(AG_ERR_ARG, "%s: vocabulary size %d: must be in [256, %d]", label,
                       vocab_size, TXT_MAX_VOCAB);
    if (split != TXT_SPLIT_NONE && split != TXT_SPLIT_GPT2)
        return ag_fail(AG_ERR_ARG, "%s: split %d: must be TXT_SPLIT_NONE or TXT_SPLIT_GPT2", label,
                       (int)split);
    if (n >= (size_t)INT32_MAX) /* positions and chunk counts are int32 */
        return ag_fail(AG_ERR_ARG, "%s: %zu bytes of text: training takes less than 2 GiB", label,
                       n);
    TxtTokenizer *t = txt_new_empty_(TXT_BPE, split);
    if (!t) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label);
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        if (txt_push_token_(t, &byte, 1) != AG_OK) {
            txt_free(t);
            return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label);
        }
        t->byte_id[b] = t->n_base++;
    }

    const uint8_t *p = text;
    Trainer T = {0};
    Chunk *ch = NULL;
    int64_t nc = distinct_chunks(p, n, split, &ch);
    if (nc < 0) goto oom;
    size_t total = 0;
    for (int64_t k = 0; k < nc; k++) total += ch[k].len;
    T.n = (int32_t)total; /* at most n */
    T.tok = t;
    size_t m = total ? total : 1;
    T.sym = malloc(m * sizeof *T.sym);
    T.first = calloc(m / 8 + 1, 1);
    T.cstart = malloc((size_t)(nc ? nc : 1) * sizeof *T.cstart);
    T.cweight = malloc((size_t)(nc ? nc : 1) * sizeof *T.cweight);
    if (!T.sym || !T.first || !T.cstart || !T.cweight) goto oom;
    int32_t at = 0;
    for (int64_t k = 0; k < nc; k++) {
        T.cstart[k] = at;
        T.cweight[k] = (int32_t)ch[k].count; /* at most n */
        T.first[at >> 3] |= (uint8_t)(1u << (at & 7));
        for (size_t i = 0; i < ch[k].len; i++, at++) T.sym[at] = p[ch[k].off + i];
    }
    T.n_chunks = (int32_t)nc;
    free(ch);
    ch = NULL;
    for (int32_t k = 0; k < T.n_chunks; k++) {
        int32_t end = k + 1 < T.n_chunks ? T.cstart[k + 1] : T.n;
        for (int32_t i = T.cstart[k]; i + 1 < end; i++)
            pair_inc(&T, T.sym[i], T.sym[i + 1], T.cweight[k], i);
    }
    for (int32_t d = 0; d < T.n_dirty; d++) {
        Pair *pr = &T.pairs[T.dirty[d]];
        pr->dirty = 0;
        heap_push(&T, (HeapEntry){pr->count, pr->a, pr->b});
    }
    T.n_dirty = 0;
    if (T.oom) goto oom;

    while (256 + t->n_merges < vocab_size && T.hn > 0) {
        HeapEntry e = heap_pop(&T);
        int32_t k = pair_get(&T, e.a, e.b);
        if (k < 0) goto oom;
        Pair *pr = &T.pairs[k];
        if (pr->excluded) continue;
        if (e.count != pr->count) {
            /* stale: a count that fell goes back with its true value; one that grew has a
             * newer entry already */
            if (pr->count > 0 && pr->count < e.count)
                heap_push(&T, (HeapEntry){pr->count, pr->a, pr->b});
            continue;
        }
        if (e.count < 2) break; /* the best pair occurs once: nothing to gain */
        size_t len = txt_len_(t, e.a) + txt_len_(t, e.b);
        if (len > TXT_MAX_TOKEN_LEN) {
            pr->excluded = 1;
            continue;
        }
        if (t->blob_len + len > TXT_MAX_TOKEN_BYTES) break;
        if (txt_push_merge_(t, e.a, e.b) != AG_OK) goto oom;
        merge_pair(&T, k, 256 + t->n_merges - 1);
        if (T.oom) goto oom;
    }
    trainer_free(&T);
    *out = t;
    return AG_OK;
oom:
    free(ch);
    trainer_free(&T);
    txt_free(t);
    return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label);
}
