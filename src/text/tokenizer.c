/* tokenizer.c: the tokenizer's storage (ids and their bytes, merges and their lookup, special
 * tokens), the character-level tokenizer, GPT-2-like chunking, encoding and decoding.
 * Encoding a BPE chunk applies merges as minbpe's encode does (the pair of lowest rank first,
 * its occurrences left to right), but with a heap of (rank, position) over a linked list of
 * symbols, so a chunk of m bytes costs O(m log m) instead of O(m^2) (TXT_SPLIT_NONE makes the
 * whole text one chunk). Not here: training (bpe_train.c), the saved form (tokenizer_io.c).
 * Read next: bpe_train.c. */
#include <stdlib.h>
#include <string.h>

#include "text_internal.h"

/* ---- storage ---- */

TxtTokenizer *txt_new_empty_(TxtKind kind, TxtSplit split) {
    TxtTokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->split = split;
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    t->off = malloc(sizeof *t->off);
    if (!t->off) {
        free(t);
        return NULL;
    }
    t->off[0] = 0;
    t->off_cap = 1;
    return t;
}

void txt_free(TxtTokenizer *t) {
    if (!t) return;
    free(t->merges);
    free(t->blob);
    free(t->off);
    txt_pairs_free_(&t->rank);
    free(t);
}

static int n_ids(const TxtTokenizer *t) { return t->n_base + t->n_merges + t->n_special; }

int txt_push_token_(TxtTokenizer *t, const uint8_t *bytes, size_t len) {
    int n = n_ids(t);
    if (n + 2 > t->off_cap) {
        int cap = t->off_cap * 2 + 16;
        size_t *o = realloc(t->off, (size_t)cap * sizeof *o);
        if (!o) return ag_fail(AG_ERR_NOMEM, "tokenizer: out of memory");
        t->off = o;
        t->off_cap = cap;
    }
    if (t->blob_len + len > t->blob_cap) {
        size_t cap = (t->blob_len + len) * 2 + 256;
        uint8_t *b = realloc(t->blob, cap);
        if (!b) return ag_fail(AG_ERR_NOMEM, "tokenizer: out of memory");
        t->blob = b;
        t->blob_cap = cap;
    }
    if (len) memcpy(t->blob + t->blob_len, bytes, len);
    t->blob_len += len;
    t->off[n + 1] = t->blob_len;
    return AG_OK;
}

/* ---- the pair map (text_internal.h) ---- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t pair_key(int a, int b) { return (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1; }

/* the slot of key in keys[0..cap): where it is, or the first empty one after its hash */
static size_t key_slot(const uint64_t *keys, size_t cap, uint64_t key) {
    size_t i = mix64(key) & (cap - 1);
    while (keys[i] && keys[i] != key) i = (i + 1) & (cap - 1);
    return i;
}

int txt_pairs_reserve_(TxtPairMap *m, size_t n, size_t min_cap) {
    if (n * 2 <= m->cap) return AG_OK;
    size_t cap = m->cap ? m->cap * 2 : min_cap;
    while (n * 2 > cap) cap *= 2;
    uint64_t *k = calloc(cap, sizeof *k);
    int32_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return AG_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = key_slot(k, cap, m->keys[i]);
        k[j] = m->keys[i];
        v[j] = m->vals[i];
    }
    txt_pairs_free_(m);
    m->keys = k, m->vals = v, m->cap = cap;
    return AG_OK;
}

size_t txt_pairs_slot_(const TxtPairMap *m, int a, int b) {
    return key_slot(m->keys, m->cap, pair_key(a, b));
}

void txt_pairs_set_(TxtPairMap *m, size_t i, int a, int b, int32_t v) {
    m->keys[i] = pair_key(a, b);
    m->vals[i] = v;
}

int32_t txt_pairs_get_(const TxtPairMap *m, int a, int b) {
    if (!m->cap) return -1;
    size_t i = txt_pairs_slot_(m, a, b);
    return m->keys[i] ? m->vals[i] : -1;
}

void txt_pairs_free_(TxtPairMap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int txt_merge_rank_(const TxtTokenizer *t, int a, int b) { return txt_pairs_get_(&t->rank, a, b); }

int txt_push_merge_(TxtTokenizer *t, int a, int b) {
    AG_CHECK(t->n_special == 0 && a >= 0 && b >= 0 && a < n_ids(t) && b < n_ids(t),
             "txt_push_merge_: merge (%d, %d) of a tokenizer of %d ids, %d specials", a, b,
             n_ids(t), t->n_special);
    if (t->n_merges + 1 > t->merges_cap) {
        int cap = t->merges_cap * 2 + 64;
        int32_t *m = realloc(t->merges, (size_t)cap * 2 * sizeof *m);
        if (!m) return ag_fail(AG_ERR_NOMEM, "tokenizer: out of memory");
        t->merges = m;
        t->merges_cap = cap;
    }
    if (txt_pairs_reserve_(&t->rank, (size_t)t->n_merges + 1, 1024) != AG_OK)
        return ag_fail(AG_ERR_NOMEM, "tokenizer: out of memory");
    /* the new token's bytes: a's then b's (copied through a buffer: the blob may move) */
    size_t la = txt_len_(t, a), lb = txt_len_(t, b);
    uint8_t *tmp = malloc(la + lb + 1);
    if (!tmp) return ag_fail(AG_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(tmp, t->blob + t->off[a], la);
    memcpy(tmp + la, t->blob + t->off[b], lb);
    int rc = txt_push_token_(t, tmp, la + lb);
    free(tmp);
    if (rc != AG_OK) return rc;
    t->merges[2 * t->n_merges] = a;
    t->merges[2 * t->n_merges + 1] = b;
    txt_pairs_set_(&t->rank, txt_pairs_slot_(&t->rank, a, b), a, b, t->n_merges);
    t->n_merges++;
    return AG_OK;
}

/* ---- accessors ---- */

TxtKind txt_kind(const TxtTokenizer *t) {
    AG_CHECK_ARG(t);
    return t->kind;
}
TxtSplit txt_split(const TxtTokenizer *t) {
    AG_CHECK_ARG(t);
    return t->split;
}
int txt_vocab_size(const TxtTokenizer *t) {
    AG_CHECK_ARG(t);
    return n_ids(t);
}
int txt_n_merges(const TxtTokenizer *t) {
    AG_CHECK_ARG(t);
    return t->n_merges;
}
int txt_n_special(const TxtTokenizer *t) {
    AG_CHECK_ARG(t);
    return t->n_special;
}

void txt_merge(const TxtTokenizer *t, int k, int *left, int *right) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(left);
    AG_CHECK_ARG(right);
    AG_CHECK(k >= 0 && k < t->n_merges, "txt_merge: merge %d of %d", k, t->n_merges);
    *left = t->merges[2 * k];
    *right = t->merges[2 * k + 1];
}

const uint8_t *txt_token_bytes(const TxtTokenizer *t, int id, size_t *len) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(len);
    AG_CHECK(id >= 0 && id < n_ids(t), "txt_token_bytes: id %d outside [0, %d)", id, n_ids(t));
    *len = txt_len_(t, id);
    return t->blob + t->off[id];
}

/* ---- the character-level tokenizer ---- */

TxtTokenizer *txt_char_new(const void *text, size_t n) {
    AG_CHECK(text || n == 0, "txt_char_new: argument 'text' is NULL");
    TxtTokenizer *t = txt_new_empty_(TXT_CHAR, TXT_SPLIT_NONE);
    AG_CHECK(t, "txt_char_new: out of memory");
    unsigned char seen[256] = {0};
    const uint8_t *p = text;
    for (size_t i = 0; i < n; i++) seen[p[i]] = 1;
    for (int b = 0; b < 256; b++) {
        if (!seen[b]) continue;
        uint8_t byte = (uint8_t)b;
        AG_CHECK(txt_push_token_(t, &byte, 1) == AG_OK, "txt_char_new: out of memory");
        t->byte_id[b] = t->n_base++;
    }
    return t;
}

/* ---- special tokens ---- */

int txt_special_id(const TxtTokenizer *t, const char *s) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(s);
    size_t n = strlen(s);
    int first = t->n_base + t->n_merges;
    for (int k = 0; k < t->n_special; k++)
        if (txt_len_(t, first + k) == n && memcmp(t->blob + t->off[first + k], s, n) == 0)
            return first + k;
    return -1;
}

int txt_add_special(TxtTokenizer *t, const char *s) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(s);
    size_t n = strlen(s);
    if (n == 0) return ag_fail(AG_ERR_ARG, "txt_add_special: an empty special token");
    if (n > TXT_MAX_SPECIAL_LEN)
        return ag_fail(AG_ERR_ARG, "txt_add_special: %zu bytes: at most %d", n,
                       TXT_MAX_SPECIAL_LEN);
    if (txt_special_id(t, s) >= 0)
        return ag_fail(AG_ERR_ARG, "txt_add_special: '%s' is already a special token", s);
    if (t->n_special >= TXT_MAX_SPECIAL || n_ids(t) >= TXT_MAX_VOCAB)
        return ag_fail(AG_ERR_ARG, "txt_add_special: the vocabulary is full (%d ids, %d special)",
                       n_ids(t), t->n_special);
    if (t->blob_len + n > TXT_MAX_TOKEN_BYTES)
        return ag_fail(AG_ERR_ARG, "txt_add_special: the tokens would pass %d bytes",
                       TXT_MAX_TOKEN_BYTES);
    int rc = txt_push_token_(t, (const uint8_t *)s, n);
    if (rc != AG_OK) return rc;
    t->n_special++;
    return n_ids(t) - 1;
}

/* The longest special token that starts at p[0..n), or -1; *len its length. */
static int special_at(const TxtTokenizer *t, const uint8_t *p, size_t n, size_t *len) {
    int best = -1, first = t->n_base + t->n_merges;
    *len = 0;
    for (int k = 0; k < t->n_special; k++) {
        size_t l = txt_len_(t, first + k);
        if (l <= n && l > *len && t->blob[t->off[first + k]] == p[0] &&
            memcmp(t->blob + t->off[first + k], p, l) == 0) {
            best = first + k;
            *len = l;
        }
    }
    return best;
}

/* ---- GPT-2-like chunks ---- */

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };
static int byte_class(uint8_t c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return C_SPACE;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return C_LETTER;
    if (c >= '0' && c <= '9') return C_DIGIT;
    return C_OTHER;
}

/* GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * over bytes: the first alternative that matches at p[0] wins, each as long as it can. */
size_t txt_contraction_(const uint8_t *p, size_t n) {
    if (p[0] == '\'' && n >= 2) {
        if (n >= 3 && ((p[1] == 'r' && p[2] == 'e') || (p[1] == 'v' && p[2] == 'e') ||
                       (p[1] == 'l' && p[2] == 'l')))
            return 3;
        if (p[1] == 's' || p[1] == 't' || p[1] == 'm' || p[1] == 'd') return 2;
    }
    return 0;
}

size_t txt_gpt2_chunk_(const uint8_t *p, size_t n) {
    size_t q = txt_contraction_(p, n);
    if (q) return q;
    size_t i = 0;
    if (p[0] == ' ' && n >= 2 && byte_class(p[1]) != C_SPACE) i = 1;
    int c = byte_class(p[i]);
    if (c != C_SPACE) {
        while (i < n && byte_class(p[i]) == c) i++;
        return i;
    }
    /* a run of whitespace: all of it at the end of the text, else without its last byte (a
     * space then starts the next chunk; another whitespace byte is a chunk alone) */
    size_t k = 0;
    while (k < n && byte_class(p[k]) == C_SPACE) k++;
    if (k == n || k == 1) return k;
    return k - 1;
}

/* ---- encoding ---- */

/* Working memory of one BPE chunk, kept between chunks: the chunk's m symbols, a symbol of L
 * bytes at the position of its first byte (its next is L positions on), the other L - 1
 * positions holding -(start + 2) so that the position before a symbol names the symbol before
 * it; 4 bytes a byte of the chunk, and the heap's 8 bytes a pair. */
typedef struct {
    int32_t *sym;
    int32_t m;
    uint64_t *heap; /* (rank << 40 | position), smallest first */
    size_t cap, hcap, hn;
} EncWork;

static int work_reserve(EncWork *w, size_t m) {
    if (m > w->cap) {
        size_t cap = m + m / 2 + 64;
        int32_t *s = realloc(w->sym, cap * sizeof *s);
        if (!s) return AG_ERR_NOMEM;
        w->sym = s;
        w->cap = cap;
    }
    return AG_OK;
}

/* the symbol after the one at i, or -1; the one before, or -1 */
static int32_t enc_next(const TxtTokenizer *t, const EncWork *w, int32_t i) {
    int32_t e = i + (int32_t)txt_len_(t, w->sym[i]);
    return e < w->m ? e : -1;
}
static int32_t enc_prev(const EncWork *w, int32_t i) {
    if (i == 0) return -1;
    int32_t k = w->sym[i - 1];
    return k >= 0 ? i - 1 : -(k + 2);
}

static int heap_push(EncWork *w, uint64_t key) {
    if (w->hn == w->hcap) {
        size_t cap = w->hcap * 2 + 64;
        uint64_t *h = realloc(w->heap, cap * sizeof *h);
        if (!h) return AG_ERR_NOMEM;
        w->heap = h;
        w->hcap = cap;
    }
    size_t i = w->hn++;
    while (i > 0 && w->heap[(i - 1) / 2] > key) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = key;
    return AG_OK;
}

static uint64_t heap_pop(EncWork *w) {
    uint64_t top = w->heap[0], last = w->heap[--w->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->hn) break;
        if (c + 1 < w->hn && w->heap[c + 1] < w->heap[c]) c++;
        if (w->heap[c] >= last) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->hn) w->heap[i] = last;
    return top;
}

/* pushes the pair that starts at position i, if it is a merge */
static int push_pair(const TxtTokenizer *t, EncWork *w, int32_t i) {
    int32_t j = i < 0 ? -1 : enc_next(t, w, i);
    if (j < 0) return AG_OK;
    int r = txt_merge_rank_(t, w->sym[i], w->sym[j]);
    return r < 0 ? AG_OK : heap_push(w, ((uint64_t)r << 40) | (uint64_t)i);
}

/* Appends the ids of one chunk p[0..m) (m < 2^31) of a BPE tokenizer to out. */
static int encode_bpe_chunk(const TxtTokenizer *t, EncWork *w, const uint8_t *p, size_t m, int *out,
                            size_t cap, size_t *n_out) {
    if (m == 1 || t->n_merges == 0) {
        for (size_t i = 0; i < m; i++) {
            if (*n_out >= cap) return AG_ERR_NOMEM;
            out[(*n_out)++] = p[i];
        }
        return AG_OK;
    }
    if (work_reserve(w, m) != AG_OK) return AG_ERR_NOMEM;
    for (size_t i = 0; i < m; i++) w->sym[i] = p[i];
    w->m = (int32_t)m;
    w->hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        if (push_pair(t, w, (int32_t)i) != AG_OK) return AG_ERR_NOMEM;
    while (w->hn) {
        uint64_t e = heap_pop(w);
        int r = (int)(e >> 40), a = t->merges[2 * r], b = t->merges[2 * r + 1];
        int32_t i = (int32_t)(e & (((uint64_t)1 << 40) - 1));
        /* stale: position i was merged away or now starts another pair */
        if (w->sym[i] != a) continue;
        int32_t j = enc_next(t, w, i);
        if (j < 0 || w->sym[j] != b) continue;
        int32_t last = j + (int32_t)txt_len_(t, b) - 1; /* the merged symbol covers [i, last] */
        w->sym[j] = -(i + 2);
        w->sym[last] = -(i + 2);
        w->sym[i] = t->n_base + r;
        if (push_pair(t, w, enc_prev(w, i)) != AG_OK || push_pair(t, w, i) != AG_OK)
            return AG_ERR_NOMEM;
    }
    for (int32_t i = 0; i >= 0; i = enc_next(t, w, i)) {
        if (*n_out >= cap) return AG_ERR_NOMEM;
        out[(*n_out)++] = w->sym[i];
    }
    return AG_OK;
}

/* Appends the ids of the ordinary text p[0..m) (no special token in it) to out. */
static int encode_ordinary(const TxtTokenizer *t, EncWork *w, const uint8_t *p, size_t m,
                           size_t base, int *out, size_t cap, size_t *n_out, const char *label) {
    if (t->kind == TXT_CHAR) {
        for (size_t i = 0; i < m; i++) {
            int id = t->byte_id[p[i]];
            if (id < 0)
                return ag_fail(AG_ERR_RANGE,
                               "%s: byte 0x%02x ('%c') at offset %zu is not in the vocabulary",
                               label, p[i], p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?', base + i);
            if (*n_out >= cap) goto full;
            out[(*n_out)++] = id;
        }
        return AG_OK;
    }
    for (size_t i = 0; i < m;) {
        size_t len = m - i;
        if (t->split == TXT_SPLIT_GPT2) len = txt_gpt2_chunk_(p + i, m - i);
        if (len >= ((size_t)1 << 31))
            return ag_fail(AG_ERR_ARG, "%s: a chunk of %zu bytes: at most 2 GiB", label, len);
        if (encode_bpe_chunk(t, w, p + i, len, out, cap, n_out) != AG_OK) goto full;
        i += len;
    }
    return AG_OK;
full:
    if (*n_out >= cap)
        return ag_fail(AG_ERR_NOMEM, "%s: more than %zu ids (the buffer's room)", label, cap);
    return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label);
}

int txt_encode(const TxtTokenizer *t, const void *text, size_t n, TxtSpecialMode mode, int *ids,
               size_t cap, size_t *n_ids_out, const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(text || n == 0, "txt_encode: argument 'text' is NULL");
    AG_CHECK(ids || cap == 0, "txt_encode: argument 'ids' is NULL");
    AG_CHECK_ARG(n_ids_out);
    if (!label) label = "txt_encode";
    const uint8_t *p = text;
    EncWork w = {0};
    *n_ids_out = 0;
    int rc = AG_OK;
    size_t start = 0; /* start of the ordinary text not yet encoded */
    if (mode == TXT_SPECIAL_ALLOW && t->n_special > 0) {
        unsigned char first[256] = {0};
        int fs = t->n_base + t->n_merges;
        for (int k = 0; k < t->n_special; k++) first[t->blob[t->off[fs + k]]] = 1;
        for (size_t i = 0; i < n && rc == AG_OK;) {
            size_t len;
            int id = first[p[i]] ? special_at(t, p + i, n - i, &len) : -1;
            if (id < 0) {
                i++;
                continue;
            }
            rc = encode_ordinary(t, &w, p + start, i - start, start, ids, cap, n_ids_out, label);
            if (rc == AG_OK) {
                if (*n_ids_out >= cap)
                    rc = ag_fail(AG_ERR_NOMEM, "%s: more than %zu ids (the buffer's room)", label,
                                 cap);
                else
                    ids[(*n_ids_out)++] = id;
            }
            i += len;
            start = i;
        }
    }
    if (rc == AG_OK)
        rc = encode_ordinary(t, &w, p + start, n - start, start, ids, cap, n_ids_out, label);
    free(w.sym);
    free(w.heap);
    return rc;
}

int txt_encode_alloc(const TxtTokenizer *t, const void *text, size_t n, TxtSpecialMode mode,
                     int **ids, size_t *n_ids_out, const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(text || n == 0, "txt_encode_alloc: argument 'text' is NULL");
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(n_ids_out);
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label ? label : "txt_encode");
    int rc = txt_encode(t, text, n, mode, *ids, n, n_ids_out, label);
    if (rc != AG_OK) {
        free(*ids);
        *ids = NULL;
        *n_ids_out = 0;
    }
    return rc;
}

/* ---- decoding ---- */

int64_t txt_decode(const TxtTokenizer *t, const int *ids, size_t n, void *out, size_t cap,
                   const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(ids || n == 0, "txt_decode: argument 'ids' is NULL");
    AG_CHECK(out || cap == 0, "txt_decode: argument 'out' is NULL");
    if (!label) label = "txt_decode";
    int nid = n_ids(t);
    uint8_t *o = out;
    int64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= nid)
            return ag_fail(AG_ERR_RANGE, "%s: id %d at %zu outside the vocabulary [0, %d)", label,
                           ids[i], i, nid);
        size_t l = txt_len_(t, ids[i]);
        if ((size_t)need < cap) {
            size_t k = cap - (size_t)need < l ? cap - (size_t)need : l;
            memcpy(o + need, t->blob + t->off[ids[i]], k);
        }
        need += (int64_t)l;
    }
    return need;
}

int txt_decode_alloc(const TxtTokenizer *t, const int *ids, size_t n, char **out, size_t *len,
                     const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(ids || n == 0, "txt_decode_alloc: argument 'ids' is NULL");
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(len);
    *out = NULL;
    *len = 0;
    int64_t need = txt_decode(t, ids, n, NULL, 0, label);
    if (need < 0) return (int)need;
    char *s = malloc((size_t)need + 1);
    if (!s) return ag_fail(AG_ERR_NOMEM, "%s: out of memory", label ? label : "txt_decode");
    txt_decode(t, ids, n, s, (size_t)need, label);
    s[need] = '\0';
    *out = s;
    *len = (size_t)need;
    return AG_OK;
}
