/* vocab.c: vocabularies of a sequence model's side (vocab.h). Word-level: ids in order of first
 * appearance after the four specials (<pad> <bos> <eos> <unk>), an open-addressing hash table
 * from words to ids, tokenizing on blanks (with hints for unknown words: another case,
 * punctuation split off). With a txt_ tokenizer (characters or BPE, tokenizer.c): its ids after
 * the four specials, a text encoded whole. Input text: lines read with a bound, the checks
 * (UTF-8, a byte-order mark, several sentences), and the saved form of a pair of vocabularies (a word list, or both
 * tokenizers' bytes).
 * Not here: the tokenizers (tokenizer.c), reading data files (the programs'). Read next:
 * score.c (what a translation is scored with). */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "../tensor/tensor.h"
#include "text_internal.h"

static const char *const special_words[TXT_N_SPECIAL] = {"<pad>", "<bos>", "<eos>", "<unk>"};
#define VOCAB_MAGIC "attograd-translate vocab 1\n"
#define VOCAB_MAGIC_TOK "attograd-translate vocab 2\n"

const char *const txt_vocab_kind_names[] = {"word", "char", "bpe", NULL};

static uint64_t hash_word(const char *w, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a, 64 bits */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)w[i]) * 1099511628211ull;
    return h;
}

void *txt_xrealloc_(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    AG_CHECK(q != NULL, "src/text: out of memory (%zu bytes)", bytes);
    return q;
}

static char *xstrndup(const char *s, size_t len) {
    char *c = txt_xrealloc_(NULL, len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

static void insert_slot(TxtVocab *v, int id) {
    const char *w = v->words[id];
    size_t mask = (size_t)v->n_slots - 1, i = hash_word(w, strlen(w)) & mask;
    while (v->slots[i] >= 0) i = (i + 1) & mask;
    v->slots[i] = id;
}

/* keeps the table at most half full */
static void rehash(TxtVocab *v, int n_slots) {
    free(v->slots);
    v->slots = txt_xrealloc_(NULL, (size_t)n_slots * sizeof *v->slots);
    v->n_slots = n_slots;
    for (int i = 0; i < n_slots; i++) v->slots[i] = -1;
    for (int id = TXT_N_SPECIAL; id < v->n; id++) insert_slot(v, id);
}

void txt_vocab_init(TxtVocab *v) {
    AG_CHECK_ARG(v);
    memset(v, 0, sizeof *v);
    v->cap_words = 64;
    v->words = txt_xrealloc_(NULL, (size_t)v->cap_words * sizeof *v->words);
    for (int i = 0; i < TXT_N_SPECIAL; i++)
        v->words[i] = xstrndup(special_words[i], strlen(special_words[i]));
    v->n = TXT_N_SPECIAL;
    rehash(v, 128);
}

void txt_vocab_free(TxtVocab *v) {
    AG_CHECK_ARG(v);
    if (v->tok) txt_free(v->tok);
    for (int i = 0; i < v->n; i++) free(v->words[i]);
    free(v->words);
    free(v->slots);
    memset(v, 0, sizeof *v);
}

int txt_vocab_find(const TxtVocab *v, const char *w, size_t len) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(w);
    size_t mask = (size_t)v->n_slots - 1, i = hash_word(w, len) & mask;
    for (; v->slots[i] >= 0; i = (i + 1) & mask) {
        const char *c = v->words[v->slots[i]];
        if (strncmp(c, w, len) == 0 && c[len] == '\0') return v->slots[i];
    }
    return -1;
}

int txt_vocab_add(TxtVocab *v, const char *w, size_t len) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(w);
    int id = txt_vocab_find(v, w, len);
    if (id >= 0) return id;
    if (v->n == v->cap_words) {
        v->cap_words *= 2;
        v->words = txt_xrealloc_(v->words, (size_t)v->cap_words * sizeof *v->words);
    }
    id = v->n++;
    v->words[id] = xstrndup(w, len);
    if (2 * (v->n - TXT_N_SPECIAL) > v->n_slots)
        rehash(v, 2 * v->n_slots);
    else
        insert_slot(v, id);
    return id;
}

int txt_vocab_set_tokenizer(TxtVocab *v, TxtTokenizer *t, const char *what) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(what);
    int n = txt_vocab_size(t);
    if (n > TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL) {
        txt_free(t);
        return ag_fail(AG_ERR_FORMAT, "%s: the tokenizer has %d tokens, over the limit of %d", what,
                       n, TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL);
    }
    v->tok = t;
    v->kind = txt_kind(t) == TXT_CHAR ? TXT_VOCAB_CHAR : TXT_VOCAB_BPE;
    v->cap_words = TXT_N_SPECIAL + n;
    v->words = txt_xrealloc_(v->words, (size_t)v->cap_words * sizeof *v->words);
    for (int i = 0; i < n; i++) {
        size_t len;
        const uint8_t *b = txt_token_bytes(t, i, &len);
        v->words[v->n++] = xstrndup((const char *)b, len);
    }
    for (int b = 0; b < 256; b++) v->byte_id[b] = TXT_UNK;
    if (v->kind == TXT_VOCAB_CHAR)
        for (int i = 0; i < n - txt_n_special(t); i++)
            v->byte_id[*txt_token_bytes(t, i, &(size_t){0})] = TXT_N_SPECIAL + i;
    return AG_OK;
}

int txt_vocab_encode(const TxtVocab *v, const char *s, size_t len, int *ids, int cap, int *n_unk,
                     FILE *warn, const char *where) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(s);
    AG_CHECK(ids != NULL || cap == 0, "%s: argument '%s' is NULL", __func__, "ids");
    AG_CHECK(v->tok != NULL, "txt_vocab_encode: the vocabulary has no tokenizer");
    int n = 0, unk = 0;
    if (v->kind == TXT_VOCAB_CHAR) {
        for (size_t i = 0; i < len; i++, n++) {
            unsigned char c = (unsigned char)s[i];
            int id = v->byte_id[c];
            if (id == TXT_UNK) {
                unk++;
                if (warn)
                    fprintf(warn,
                            "%sbyte 0x%02x%s%c%s at offset %zu is not in the vocabulary "
                            "(read as <unk>)\n",
                            where ? where : "", c, c >= 0x20 && c < 0x7f ? " ('" : "",
                            c >= 0x20 && c < 0x7f ? c : ' ', c >= 0x20 && c < 0x7f ? "')" : "", i);
            }
            if (n < cap) ids[n] = id;
        }
    } else {
        int *t;
        size_t nt;
        int rc =
            txt_encode_alloc(v->tok, s, len, TXT_SPECIAL_ORDINARY, &t, &nt, "txt_vocab_encode");
        AG_CHECK(rc == AG_OK, "%s", ag_last_error());
        for (size_t i = 0; i < nt; i++, n++)
            if (n < cap) ids[n] = TXT_N_SPECIAL + t[i];
        free(t);
    }
    if (n_unk) *n_unk = unk;
    return n;
}

const char *txt_vocab_word(const TxtVocab *v, int id) {
    AG_CHECK_ARG(v);
    return id >= 0 && id < v->n ? v->words[id] : "<?>";
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* ---- checks of input text: the byte-order mark, UTF-8, several sentences ---- */

size_t txt_bom_len(const char *s, size_t len) {
    AG_CHECK_ARG(s);
    return len >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
}

int txt_utf8_check(const char *text, size_t len, size_t *bad) {
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(bad);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n;                      /* continuation bytes */
        unsigned lo = 0x80, hi = 0xbf; /* the range of the first one */
        if (c < 0x80)
            n = 0;
        else if (c >= 0xc2 && c <= 0xdf)
            n = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            if (c == 0xe0) lo = 0xa0; /* no overlong 3-byte forms */
            if (c == 0xed) hi = 0x9f; /* no surrogates U+D800..U+DFFF */
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            if (c == 0xf0) lo = 0x90; /* no overlong 4-byte forms */
            if (c == 0xf4) hi = 0x8f; /* nothing above U+10FFFF */
        } else {
            *bad = i; /* a continuation byte alone, an overlong 0xc0/0xc1 lead, 0xf5..0xff */
            return 0;
        }
        for (size_t k = 1; k <= n; k++) {
            unsigned lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xbf;
            if (i + k >= len || s[i + k] < lo_k || s[i + k] > hi_k) {
                *bad = i;
                return 0;
            }
        }
        i += n + 1;
    }
    return 1;
}

/* ---- lines read with a bound ---- */

int txt_read_line(FILE *f, char **buf, size_t *cap, size_t max, size_t *len) {
    AG_CHECK_ARG(f);
    AG_CHECK_ARG(buf);
    AG_CHECK_ARG(cap);
    AG_CHECK_ARG(len);
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF && c != '\n') {
        if (n + 2 > *cap) {
            size_t want = *cap ? 2 * *cap : 256;
            if (want > max + 2) want = max + 2;
            *buf = txt_xrealloc_(*buf, want);
            *cap = want;
        }
        (*buf)[n++] = (char)c;
        if (n > max) break; /* over the limit: stop, the rest of the line stays unread */
    }
    if (c == EOF && n == 0) return 0;
    if (!*buf) {
        *buf = txt_xrealloc_(NULL, 2);
        *cap = 2;
    }
    (*buf)[n] = '\0';
    *len = n;
    return n > max ? -1 : 1;
}

int txt_skip_line(FILE *f, size_t max) {
    AG_CHECK_ARG(f);
    for (size_t n = 0; n <= max; n++) {
        int c = getc_unlocked(f);
        if (c == EOF || c == '\n') return 1;
    }
    return 0;
}

static int ends_sentence(char c) { return c == '.' || c == '!' || c == '?'; }

int txt_count_sentences(const char *text) {
    AG_CHECK_ARG(text);
    int n = 0, inside = 0; /* inside: a sentence has words and no end yet */
    const char *p = text;
    for (;;) {
        while (is_blank(*p)) p++;
        if (!*p) break;
        while (*p && !is_blank(*p)) p++;
        if (!inside) n++;
        inside = !ends_sentence(p[-1]);
    }
    return n;
}

int txt_check_arg(const char *text, const char *label, const char **out) {
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(out);
    size_t len = strlen(text), bom = txt_bom_len(text, len), bad;
    *out = NULL;
    if (!txt_utf8_check(text + bom, len - bom, &bad))
        return ag_fail(AG_ERR_FORMAT, "%s is not valid UTF-8 (byte %zu is 0x%02x)", label, bad + 1,
                       (unsigned char)text[bom + bad]);
    *out = text + bom;
    return AG_OK;
}

/* ---- unknown words and their hints ---- */

static int is_punct(char c) {
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
}

/* The id of w[0..len), or of its ASCII lower case (copied into low, len bytes); *lowered says
 * which one was found. -1 if neither. */
static int find_any_case(const TxtVocab *v, const char *w, size_t len, char *low, int *lowered) {
    *lowered = 0;
    int id = txt_vocab_find(v, w, len);
    if (id >= 0) return id;
    int changed = 0;
    for (size_t i = 0; i < len; i++) {
        low[i] = w[i] >= 'A' && w[i] <= 'Z' ? (char)(w[i] - 'A' + 'a') : w[i];
        changed |= low[i] != w[i];
    }
    id = changed ? txt_vocab_find(v, low, len) : -1;
    *lowered = id >= 0;
    return id;
}

/* Names the unknown word w[0..len) on warn, with what the vocabulary holds instead when a
 * change of case or punctuation split from the word (each mark a token) finds it:
 *   'The' is not in the vocabulary; 'the' is (read as <unk>)
 *   'dog.' is not in the vocabulary; 'dog' '.' are: separate punctuation with spaces (...)
 *   'Dog,' is not in the vocabulary; 'dog' is, ',' is not (...) */
static void warn_unknown(const TxtVocab *v, const char *w, size_t len, FILE *warn,
                         const char *where) {
    size_t a = 0, b = len; /* the core w[a..b): leading and trailing marks split off */
    while (a < len && is_punct(w[a])) a++;
    while (b > a && is_punct(w[b - 1])) b--;
    /* the pieces in order: each leading mark, the core (if any), each trailing mark; found[i]
     * for the piece starting at i, low its spelling in the vocabulary (or as written) */
    char *low = txt_xrealloc_(NULL, 2 * len + 1), *found = low + len;
    int lowered, any_lowered = 0, pieces = 0, n_found = 0;
    for (size_t i = 0; i < len; pieces++) {
        size_t n = i < a || i >= b ? 1 : b - a;
        found[i] = find_any_case(v, w + i, n, low + i, &lowered) >= 0;
        n_found += found[i];
        any_lowered |= lowered;
        if (!lowered) memcpy(low + i, w + i, n);
        i += n;
    }
    fprintf(warn, "%s'%.*s' is not in the vocabulary", where ? where : "", (int)len, w);
    if (n_found > 0 && (pieces > 1 || any_lowered)) {
        /* the pieces found, then (when some are not) the others */
        for (int pass = 1; pass >= 0; pass--) {
            int k = 0;
            for (size_t i = 0; i < len;) {
                size_t n = i < a || i >= b ? 1 : b - a;
                if (found[i] == pass)
                    fprintf(warn, "%s'%.*s'", k++ ? " " : pass ? "; " : ", ", (int)n, low + i);
                i += n;
            }
            if (pass && k > 1 && n_found == pieces)
                fprintf(warn, " are: separate punctuation with spaces");
            else if (k > 0)
                fprintf(warn, " %s%s", k > 1 ? "are" : "is", pass ? "" : " not");
        }
    }
    fprintf(warn, " (read as <unk>)\n");
    free(low);
}

int txt_vocab_tokenize(const TxtVocab *v, const char *text, int *ids, int cap, int *n_unk,
                       FILE *warn, const char *where) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(text);
    AG_CHECK(ids != NULL || cap == 0, "%s: argument '%s' is NULL", __func__, "ids");
    if (v->tok) {
        size_t a = 0, b = strlen(text);
        while (a < b && is_blank(text[a])) a++;
        while (b > a && is_blank(text[b - 1])) b--;
        return txt_vocab_encode(v, text + a, b - a, ids, cap, n_unk, warn, where);
    }
    int n = 0, unk = 0;
    const char *p = text;
    for (;;) {
        while (is_blank(*p)) p++;
        if (!*p) break;
        const char *w = p;
        while (*p && !is_blank(*p)) p++;
        int id = txt_vocab_find(v, w, (size_t)(p - w));
        if (id < 0) {
            id = TXT_UNK;
            unk++;
            if (warn) warn_unknown(v, w, (size_t)(p - w), warn, where);
        }
        if (n < cap) ids[n] = id;
        n++;
    }
    if (n_unk) *n_unk = unk;
    return n;
}

size_t txt_vocab_detokenize(const TxtVocab *v, const int *ids, int n, char *out, size_t cap) {
    AG_CHECK_ARG(v);
    AG_CHECK_ARG(ids);
    AG_CHECK(out != NULL || cap == 0, "%s: argument '%s' is NULL", __func__, "out");
    size_t len = 0;
    for (int i = 0; i < n && ids[i] != TXT_EOS && ids[i] != TXT_PAD; i++) {
        if (ids[i] == TXT_BOS) continue;
        const char *w = txt_vocab_word(v, ids[i]);
        size_t wl = strlen(w);
        if (v->tok && ids[i] >= TXT_N_SPECIAL) /* a token's bytes (byte 0 makes an empty word) */
            w = (const char *)txt_token_bytes(v->tok, ids[i] - TXT_N_SPECIAL, &wl);
        if (len > 0 && !v->tok) {
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
        *buf = txt_xrealloc_(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static void append_side(char **buf, size_t *len, size_t *cap, const char *name, const TxtVocab *v) {
    char head[64];
    int n = snprintf(head, sizeof head, "%s %d\n", name, v->n - TXT_N_SPECIAL);
    append(buf, len, cap, head, (size_t)n);
    for (int i = TXT_N_SPECIAL; i < v->n; i++) {
        append(buf, len, cap, v->words[i], strlen(v->words[i]));
        append(buf, len, cap, "\n", 1);
    }
}

static void append_tok_side(char **buf, size_t *len, size_t *cap, const char *name,
                            const TxtVocab *v) {
    size_t n;
    uint8_t *b = txt_to_bytes(v->tok, &n);
    char head[64];
    int h = snprintf(head, sizeof head, "%s %zu\n", name, n);
    append(buf, len, cap, head, (size_t)h);
    append(buf, len, cap, (const char *)b, n);
    free(b);
}

char *txt_vocab_pair_save(const TxtVocab *src, const TxtVocab *tgt, size_t *len) {
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt);
    AG_CHECK_ARG(len);
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    if (src->tok && tgt->tok) {
        char head[64];
        int h = snprintf(head, sizeof head, "tokenizer %s %d\n", txt_vocab_kind_names[src->kind],
                         src->kind == TXT_VOCAB_BPE ? src->bpe_vocab : 0);
        append(&buf, len, &cap, VOCAB_MAGIC_TOK, strlen(VOCAB_MAGIC_TOK));
        append(&buf, len, &cap, head, (size_t)h);
        append_tok_side(&buf, len, &cap, "src", src);
        append_tok_side(&buf, len, &cap, "tgt", tgt);
        return buf;
    }
    append(&buf, len, &cap, VOCAB_MAGIC, strlen(VOCAB_MAGIC));
    append_side(&buf, len, &cap, "src", src);
    append_side(&buf, len, &cap, "tgt", tgt);
    return buf;
}

/* Reads "<name> <count>\n" then count words, one a line, at *pos. */
static int load_side(const char *b, size_t len, size_t *pos, const char *name, TxtVocab *v,
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
        if (count <= TXT_VOCAB_MAX_WORDS) count = 10 * count + (*d - '0');
    if (d != end || d == digits)
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: bad %s word count", what, name);
    if (count > TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL)
        return ag_fail(
            AG_ERR_FORMAT,
            "%s: vocabulary: %s has %.*s words, over the limit of %d (TXT_VOCAB_MAX_WORDS %d "
            "with the %d specials)",
            what, name, (int)(d - digits < 24 ? d - digits : 24), digits,
            TXT_VOCAB_MAX_WORDS - TXT_N_SPECIAL, TXT_VOCAB_MAX_WORDS, TXT_N_SPECIAL);
    *pos = (size_t)(end - b) + 1;
    for (long i = 0; i < count; i++) {
        const char *w = b + *pos;
        end = *pos < len ? memchr(w, '\n', len - *pos) : NULL;
        if (!end)
            return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: %s word %ld of %ld is missing", what,
                           name, i + 1, count);
        size_t wl = (size_t)(end - w);
        if (wl > TXT_VOCAB_MAX_WORD_LEN)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: vocabulary: %s word %ld is %zu bytes long, over the limit of %d "
                           "(TXT_VOCAB_MAX_WORD_LEN)",
                           what, name, i + 1, wl, TXT_VOCAB_MAX_WORD_LEN);
        int bad = wl == 0;
        for (size_t k = 0; k < wl && !bad; k++) bad = is_blank(w[k]) || w[k] == '\0';
        if (bad || txt_vocab_find(v, w, wl) >= 0)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: vocabulary: %s word %ld is empty, holds a blank "
                           "or repeats an earlier one",
                           what, name, i + 1);
        txt_vocab_add(v, w, wl);
        *pos = (size_t)(end - b) + 1;
    }
    return AG_OK;
}

/* A decimal number alone on a line at b[*pos..len) (at most max): 1, *pos past its '\n'. */
static int read_count(const char *b, size_t len, size_t *pos, long max, long *out) {
    const char *end = memchr(b + *pos, '\n', len - *pos), *d = b + *pos;
    long n = 0;
    for (; end && d < end && *d >= '0' && *d <= '9'; d++)
        if (n <= max) n = 10 * n + (*d - '0');
    if (!end || d != end || d == b + *pos || n > max) return 0;
    *pos = (size_t)(end - b) + 1;
    *out = n;
    return 1;
}

/* "<name> <n>\n" then n bytes of txt_to_bytes' form, at *pos: the tokenizer of kind. */
static int load_tok_side(const char *b, size_t len, size_t *pos, const char *name,
                         TxtVocabKind kind, long bpe_vocab, TxtVocab *v, const char *what) {
    size_t nl = strlen(name);
    long n;
    if (len - *pos <= nl || memcmp(b + *pos, name, nl) != 0 || b[*pos + nl] != ' ')
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: expected '%s <bytes>' at byte %zu", what,
                       name, *pos);
    *pos += nl + 1;
    if (!read_count(b, len, pos, (long)(len - *pos), &n) || (size_t)n > len - *pos)
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: bad %s tokenizer size (or past the end)",
                       what, name);
    char label[600];
    snprintf(label, sizeof label, "%s: %s tokenizer", what, name);
    TxtTokenizer *t;
    int rc = txt_from_bytes(b + *pos, (size_t)n, label, &t);
    if (rc != AG_OK) return rc;
    *pos += (size_t)n;
    TxtKind want = kind == TXT_VOCAB_CHAR ? TXT_CHAR : TXT_BPE;
    if (txt_kind(t) != want || txt_n_special(t) != 0 ||
        (kind == TXT_VOCAB_BPE && txt_vocab_size(t) > bpe_vocab)) {
        txt_free(t);
        return ag_fail(AG_ERR_FORMAT, "%s: vocabulary: the %s tokenizer is not the %s one it says",
                       what, name, txt_vocab_kind_names[kind]);
    }
    rc = txt_vocab_set_tokenizer(v, t, what);
    v->bpe_vocab = (int)bpe_vocab;
    return rc;
}

/* The form with tokenizers, past its magic at pos. */
static int load_tok_pair(const char *b, size_t len, size_t pos, TxtVocab *src, TxtVocab *tgt,
                         const char *what) {
    static const char head[] = "tokenizer ";
    size_t hl = strlen(head);
    int kind = -1;
    long vocab = 0;
    if (len - pos > hl && memcmp(b + pos, head, hl) == 0) {
        pos += hl;
        for (int k = TXT_VOCAB_CHAR; k <= TXT_VOCAB_BPE; k++) {
            size_t kl = strlen(txt_vocab_kind_names[k]);
            if (len - pos > kl && memcmp(b + pos, txt_vocab_kind_names[k], kl) == 0 &&
                b[pos + kl] == ' ') {
                kind = k;
                pos += kl + 1;
                break;
            }
        }
    }
    if (kind < 0 || !read_count(b, len, &pos, TXT_VOCAB_BPE_MAX, &vocab) ||
        (kind == TXT_VOCAB_BPE) != (vocab >= TXT_VOCAB_BPE_MIN))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: vocabulary: expected 'tokenizer char 0' or "
                       "'tokenizer bpe <vocab>' at byte %zu",
                       what, strlen(VOCAB_MAGIC_TOK));
    int rc = load_tok_side(b, len, &pos, "src", (TxtVocabKind)kind, vocab, src, what);
    if (rc == AG_OK) rc = load_tok_side(b, len, &pos, "tgt", (TxtVocabKind)kind, vocab, tgt, what);
    if (rc == AG_OK && pos != len)
        rc = ag_fail(AG_ERR_FORMAT, "%s: vocabulary: %zu unexpected bytes at the end", what,
                     len - pos);
    return rc;
}

int txt_vocab_pair_load(const char *bytes, size_t len, TxtVocab *src, TxtVocab *tgt,
                        const char *what) {
    AG_CHECK_ARG(src);
    AG_CHECK_ARG(tgt);
    AG_CHECK_ARG(what);
    size_t ml = strlen(VOCAB_MAGIC), pos = ml;
    if (bytes && len >= ml && memcmp(bytes, VOCAB_MAGIC_TOK, ml) == 0) {
        txt_vocab_init(src);
        txt_vocab_init(tgt);
        int rc = load_tok_pair(bytes, len, pos, src, tgt, what);
        if (rc != AG_OK) {
            txt_vocab_free(src);
            txt_vocab_free(tgt);
        }
        return rc;
    }
    if (!bytes || len < ml || memcmp(bytes, VOCAB_MAGIC, ml) != 0)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: no vocabulary (not a checkpoint of "
                       "attograd-translate?)",
                       what);
    txt_vocab_init(src);
    txt_vocab_init(tgt);
    int rc = load_side(bytes, len, &pos, "src", src, what);
    if (rc == AG_OK) rc = load_side(bytes, len, &pos, "tgt", tgt, what);
    if (rc == AG_OK && pos != len)
        rc = ag_fail(AG_ERR_FORMAT, "%s: vocabulary: %zu unexpected bytes at the end", what,
                     len - pos);
    if (rc != AG_OK) {
        txt_vocab_free(src);
        txt_vocab_free(tgt);
    }
    return rc;
}
