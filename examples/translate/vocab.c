/* vocab.c: word-level vocabularies. Ids in order of first appearance after the four specials
 * (<pad> <bos> <eos> <unk>), an open-addressing hash table from words to ids, tokenizing on
 * blanks, and the text form stored in a checkpoint's meta.extra bytes.
 * Not here: reading data files (data.c). Read next: data.c. */
#include "translate.h"

#include <stdlib.h>
#include <string.h>

static const char *const special_words[TR_N_SPECIAL] = {"<pad>", "<bos>", "<eos>", "<unk>"};
#define VOCAB_MAGIC "attograd-translate vocab 1\n"

static uint64_t hash_word(const char *w, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)w[i]) * 1099511628211ull;
    return h;
}

static void *xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes);
    AG_CHECK(q != NULL, "translate: out of memory (%zu bytes)", bytes);
    return q;
}

static char *xstrndup(const char *s, size_t len) {
    char *c = xrealloc(NULL, len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

static void insert_slot(TrVocab *v, int id) {
    const char *w = v->words[id];
    size_t mask = (size_t)v->n_slots - 1, i = hash_word(w, strlen(w)) & mask;
    while (v->slots[i] >= 0) i = (i + 1) & mask;
    v->slots[i] = id;
}

/* keeps the table at most half full */
static void rehash(TrVocab *v, int n_slots) {
    free(v->slots);
    v->slots = xrealloc(NULL, (size_t)n_slots * sizeof *v->slots);
    v->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++) v->slots[i] = -1;
    for (int id = TR_N_SPECIAL; id < v->n; id++) insert_slot(v, id);
}

void tr_vocab_init(TrVocab *v) {
    memset(v, 0, sizeof *v);
    v->cap_words = 64;
    v->words = xrealloc(NULL, (size_t)v->cap_words * sizeof *v->words);
    for (int i = 0; i < TR_N_SPECIAL; i++)
        v->words[i] = xstrndup(special_words[i], strlen(special_words[i]));
    v->n = TR_N_SPECIAL;
    rehash(v, 128);
}

void tr_vocab_free(TrVocab *v) {
    for (int i = 0; i < v->n; i++) free(v->words[i]);
    free(v->words);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

int tr_vocab_find(const TrVocab *v, const char *w, size_t len) {
    size_t mask = (size_t)v->n_slots - 1, i = hash_word(w, len) & mask;
    for (; v->slots[i] >= 0; i = (i + 1) & mask) {
        const char *c = v->words[v->slots[i]];
        if (strncmp(c, w, len) == 0 && c[len] == '\0') return v->slots[i];
    }
    return -1;
}

int tr_vocab_add(TrVocab *v, const char *w, size_t len) {
    int id = tr_vocab_find(v, w, len);
    if (id >= 0) return id;
    if (v->n == v->cap_words) {
        v->cap_words *= 2;
        v->words = xrealloc(v->words, (size_t)v->cap_words * sizeof *v->words);
    }
    id = v->n++;
    v->words[id] = xstrndup(w, len);
    if (2 * (v->n - TR_N_SPECIAL) > v->n_slots)
        rehash(v, 2 * v->n_slots);
    else
        insert_slot(v, id);
    return id;
}

const char *tr_vocab_word(const TrVocab *v, int id) {
    return id >= 0 && id < v->n ? v->words[id] : "<?>";
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int tr_tokenize(const TrVocab *v, const char *text, int *ids, int cap, int *n_unk, FILE *warn) {
    int n = 0, unk = 0;
    const char *p = text;
    for (;;) {
        while (is_blank(*p)) p++;
        if (!*p) break;
        const char *w = p;
        while (*p && !is_blank(*p)) p++;
        int id = tr_vocab_find(v, w, (size_t)(p - w));
        if (id < 0) {
            id = TR_UNK;
            unk++;
            if (warn) fprintf(warn, "unknown word '%.*s' (mapped to <unk>)\n", (int)(p - w), w);
        }
        if (n < cap) ids[n] = id;
        n++;
    }
    if (n_unk) *n_unk = unk;
    return n;
}

size_t tr_detokenize(const TrVocab *v, const int *ids, int n, char *out, size_t cap) {
    size_t len = 0;
    for (int i = 0; i < n && ids[i] != TR_EOS && ids[i] != TR_PAD; i++) {
        if (ids[i] == TR_BOS) continue;
        const char *w = tr_vocab_word(v, ids[i]);
        size_t wl = strlen(w);
        if (len > 0) {
            if (len + 1 < cap) out[len] = ' ';
            len++;
        }
        for (size_t k = 0; k < wl; k++, len++)
            if (len + 1 < cap) out[len] = w[k];
    }
    if (cap > 0) out[len < cap ? len : cap - 1] = '\0';
    return len;
}

/* ---- the text form of both vocabularies ---- */

static void append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap) *cap = *cap ? 2 * *cap : 4096;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static void append_side(char **buf, size_t *len, size_t *cap, const char *name, const TrVocab *v) {
    char head[64];
    int n = snprintf(head, sizeof head, "%s %d\n", name, v->n - TR_N_SPECIAL);
    append(buf, len, cap, head, (size_t)n);
    for (int i = TR_N_SPECIAL; i < v->n; i++) {
        append(buf, len, cap, v->words[i], strlen(v->words[i]));
        append(buf, len, cap, "\n", 1);
    }
}

char *tr_vocab_pair_save(const TrVocab *src, const TrVocab *tgt, size_t *len) {
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    append(&buf, len, &cap, VOCAB_MAGIC, strlen(VOCAB_MAGIC));
    append_side(&buf, len, &cap, "src", src);
    append_side(&buf, len, &cap, "tgt", tgt);
    return buf;
}

/* Reads "<name> <count>\n" then count words, one a line, at *pos. */
static int load_side(const char *b, size_t len, size_t *pos, const char *name, TrVocab *v,
                     const char *what) {
    size_t nl = strlen(name);
    const char *end = memchr(b + *pos, '\n', len - *pos);
    if (!end || (size_t)(end - (b + *pos)) <= nl + 1 || memcmp(b + *pos, name, nl) != 0 ||
        b[*pos + nl] != ' ')
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: expected '%s <count>' at byte %zu", what,
                       name, *pos);
    /* the count: decimal digits alone, up to the newline (strtol would skip blanks, newlines
     * included, and so read past the end of bytes that are not NUL-terminated: found by
     * fuzz/vocab.c, kept in fuzz/regressions/vocab/) */
    const char *digits = b + *pos + nl + 1, *d = digits;
    long count = 0;
    for (; d < end && *d >= '0' && *d <= '9'; d++)
        if (count <= TR_MAX_VOCAB) count = 10 * count + (*d - '0');
    if (d != end || d == digits)
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: bad %s word count", what, name);
    if (count > TR_MAX_VOCAB - TR_N_SPECIAL)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: vocabulary: %s has %.*s words, over the limit of %d (TR_MAX_VOCAB %d "
                       "with the %d specials)",
                       what, name, (int)(d - digits < 24 ? d - digits : 24), digits,
                       TR_MAX_VOCAB - TR_N_SPECIAL, TR_MAX_VOCAB, TR_N_SPECIAL);
    *pos = (size_t)(end - b) + 1;
    for (long i = 0; i < count; i++) {
        const char *w = b + *pos;
        end = *pos < len ? memchr(w, '\n', len - *pos) : NULL;
        if (!end)
            return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: %s word %ld of %ld is missing", what,
                           name, i + 1, count);
        size_t wl = (size_t)(end - w);
        if (wl > TR_MAX_WORD)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: vocabulary: %s word %ld is %zu bytes long, over the limit of %d "
                           "(TR_MAX_WORD)",
                           what, name, i + 1, wl, TR_MAX_WORD);
        int bad = wl == 0;
        for (size_t k = 0; k < wl && !bad; k++) bad = is_blank(w[k]) || w[k] == '\0';
        if (bad || tr_vocab_find(v, w, wl) >= 0)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: vocabulary: %s word %ld is empty, holds a blank "
                           "or repeats an earlier one",
                           what, name, i + 1);
        tr_vocab_add(v, w, wl);
        *pos = (size_t)(end - b) + 1;
    }
    return AG_OK;
}

int tr_vocab_pair_load(const char *bytes, size_t len, TrVocab *src, TrVocab *tgt,
                       const char *what) {
    size_t ml = strlen(VOCAB_MAGIC), pos = ml;
    if (!bytes || len < ml || memcmp(bytes, VOCAB_MAGIC, ml) != 0)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: no vocabulary (not a checkpoint of "
                       "attograd-translate?)",
                       what);
    tr_vocab_init(src);
    tr_vocab_init(tgt);
    int rc = load_side(bytes, len, &pos, "src", src, what);
    if (rc == AG_OK) rc = load_side(bytes, len, &pos, "tgt", tgt, what);
    if (rc == AG_OK && pos != len)
        rc = ag_fail(AG_ERR_FORMAT, "%s: vocabulary: %zu unexpected bytes at the end", what,
                     len - pos);
    if (rc != AG_OK) {
        tr_vocab_free(src);
        tr_vocab_free(tgt);
    }
    return rc;
}
