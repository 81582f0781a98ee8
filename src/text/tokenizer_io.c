/* tokenizer_io.c: a tokenizer's saved form. txt_to_bytes writes a small little-endian format
 * (below, and docs/text.md) that a checkpoint keeps as its extra bytes; txt_from_bytes reads it
 * back, checking every value before it is used, so a damaged or hostile input is refused with
 * its reason and never makes it allocate more than the limits of text.h allow. txt_save and
 * txt_load put the same bytes in an .npz file (entry "tokenizer").
 * Layout (all integers uint32, little-endian):
 *   "ATGTOKEN" (8 bytes), version (1), kind (1 char, 2 BPE), split (0 none, 1 GPT-2),
 *   n_base, n_merges, n_special,
 *   char: the n_base bytes, strictly increasing (BPE: n_base is 256, nothing here),
 *   n_merges x (left, right),
 *   n_special x (length, the string's bytes).
 * Not here: the tokenizer itself (tokenizer.c). Read next: shards.c. */
#include <stdlib.h>
#include <string.h>

#include "../io/npz.h"
#include "text_internal.h"

#define TOK_MAGIC "ATGTOKEN"
#define TOK_VERSION 1
#define TOK_HEADER 32

static uint8_t *put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + 4;
}
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint8_t *txt_to_bytes(const TxtTokenizer *t, size_t *len) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(len);
    size_t n = TOK_HEADER + (t->kind == TXT_CHAR ? (size_t)t->n_base : 0) + 8 * (size_t)t->n_merges;
    int fs = t->n_base + t->n_merges;
    for (int k = 0; k < t->n_special; k++) n += 4 + txt_len_(t, fs + k);
    uint8_t *b = malloc(n), *p = b;
    AG_CHECK(b, "txt_to_bytes: out of memory (%zu bytes)", n);
    memcpy(p, TOK_MAGIC, 8);
    p += 8;
    p = put32(p, TOK_VERSION);
    p = put32(p, (uint32_t)t->kind);
    p = put32(p, (uint32_t)t->split);
    p = put32(p, (uint32_t)t->n_base);
    p = put32(p, (uint32_t)t->n_merges);
    p = put32(p, (uint32_t)t->n_special);
    if (t->kind == TXT_CHAR)
        for (int i = 0; i < t->n_base; i++) *p++ = t->blob[t->off[i]];
    for (int k = 0; k < 2 * t->n_merges; k++) p = put32(p, (uint32_t)t->merges[k]);
    for (int k = 0; k < t->n_special; k++) {
        size_t l = txt_len_(t, fs + k);
        p = put32(p, (uint32_t)l);
        memcpy(p, t->blob + t->off[fs + k], l);
        p += l;
    }
    *len = n;
    return b;
}

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        rc = ag_fail(code, __VA_ARGS__);                                                           \
        goto fail;                                                                                 \
    } while (0)

int txt_from_bytes(const void *bytes, size_t len, const char *label, TxtTokenizer **out) {
    AG_CHECK(bytes || len == 0, "txt_from_bytes: argument 'bytes' is NULL");
    AG_CHECK_ARG(out);
    if (!label) label = "tokenizer";
    *out = NULL;
    const uint8_t *b = bytes;
    TxtTokenizer *t = NULL;
    size_t *lens = NULL;
    int rc = AG_OK;
    if (len < TOK_HEADER)
        return ag_fail(AG_ERR_FORMAT, "%s: %zu bytes: shorter than the %d-byte header", label, len,
                       TOK_HEADER);
    if (memcmp(b, TOK_MAGIC, 8) != 0)
        return ag_fail(AG_ERR_FORMAT, "%s: not an attograd tokenizer (no ATGTOKEN magic)", label);
    uint32_t version = get32(b + 8), kind = get32(b + 12), split = get32(b + 16);
    uint32_t n_base = get32(b + 20), n_merges = get32(b + 24), n_special = get32(b + 28);
    if (version != TOK_VERSION)
        return ag_fail(AG_ERR_FORMAT, "%s: version %u: this library reads version %d", label,
                       version, TOK_VERSION);
    if (kind != TXT_CHAR && kind != TXT_BPE)
        return ag_fail(AG_ERR_FORMAT, "%s: kind %u: must be 1 (char) or 2 (bpe)", label, kind);
    if (split != TXT_SPLIT_NONE && split != TXT_SPLIT_GPT2)
        return ag_fail(AG_ERR_FORMAT, "%s: split %u: must be 0 (none) or 1 (gpt2)", label, split);
    if (kind == TXT_CHAR && (split != TXT_SPLIT_NONE || n_merges != 0 || n_base > 256))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: a char tokenizer with split %u, %u merges, %u bytes: must be 0, 0 and "
                       "at most 256",
                       label, split, n_merges, n_base);
    if (kind == TXT_BPE && n_base != 256)
        return ag_fail(AG_ERR_FORMAT, "%s: a BPE tokenizer with %u base ids: must be 256", label,
                       n_base);
    if (n_special > TXT_MAX_SPECIAL)
        return ag_fail(AG_ERR_RANGE, "%s: %u special tokens: at most %d", label, n_special,
                       TXT_MAX_SPECIAL);
    if ((uint64_t)n_base + n_merges + n_special > TXT_MAX_VOCAB)
        return ag_fail(AG_ERR_RANGE, "%s: %llu ids: at most %d", label,
                       (unsigned long long)n_base + n_merges + n_special, TXT_MAX_VOCAB);
    /* the fixed parts must be in the bytes before anything is allocated */
    uint64_t fixed = TOK_HEADER + (kind == TXT_CHAR ? n_base : 0) + 8 * (uint64_t)n_merges +
                     4 * (uint64_t)n_special;
    if (fixed > len)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: %u merges and %u special tokens need at least %llu bytes, the input "
                       "holds %zu",
                       label, n_merges, n_special, (unsigned long long)fixed, len);

    t = txt_new_empty_((TxtKind)kind, (TxtSplit)split);
    if (!t) FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    const uint8_t *p = b + TOK_HEADER;
    if (kind == TXT_CHAR) {
        for (uint32_t i = 0; i < n_base; i++) {
            if (i > 0 && p[i] <= p[i - 1])
                FAIL(AG_ERR_FORMAT,
                     "%s: char byte %u (0x%02x) is not above the one before (0x%02x)", label, i,
                     p[i], p[i - 1]);
            if (txt_push_token_(t, p + i, 1) != AG_OK)
                FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
            t->byte_id[p[i]] = t->n_base++;
        }
        p += n_base;
    } else {
        for (int i = 0; i < 256; i++) {
            uint8_t byte = (uint8_t)i;
            if (txt_push_token_(t, &byte, 1) != AG_OK)
                FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
            t->byte_id[i] = t->n_base++;
        }
    }
    /* merges: each part an earlier id; lengths within the limits before any token is built */
    lens = malloc(((size_t)n_base + n_merges + 1) * sizeof *lens);
    if (!lens) FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    for (uint32_t i = 0; i < n_base; i++) lens[i] = 1;
    uint64_t total = n_base;
    for (uint32_t k = 0; k < n_merges; k++) {
        uint32_t a = get32(p + 8 * (size_t)k), c = get32(p + 8 * (size_t)k + 4);
        uint32_t id = n_base + k;
        if (a >= id || c >= id)
            FAIL(AG_ERR_RANGE, "%s: merge %u (id %u) = (%u, %u): its parts must be ids below %u",
                 label, k, id, a, c, id);
        lens[id] = lens[a] + lens[c];
        total += lens[id];
        if (lens[id] > TXT_MAX_TOKEN_LEN)
            FAIL(AG_ERR_RANGE, "%s: merge %u (id %u) makes a token of %zu bytes: at most %d", label,
                 k, id, lens[id], TXT_MAX_TOKEN_LEN);
        if (total > TXT_MAX_TOKEN_BYTES)
            FAIL(AG_ERR_RANGE, "%s: the tokens up to merge %u take %llu bytes: at most %d", label,
                 k, (unsigned long long)total, TXT_MAX_TOKEN_BYTES);
        if (txt_merge_rank_(t, (int)a, (int)c) >= 0)
            FAIL(AG_ERR_FORMAT, "%s: merge %u (%u, %u) repeats merge %d", label, k, a, c,
                 txt_merge_rank_(t, (int)a, (int)c));
        if (txt_push_merge_(t, (int)a, (int)c) != AG_OK)
            FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    }
    p += 8 * (size_t)n_merges;
    for (uint32_t k = 0; k < n_special; k++) {
        size_t left = len - (size_t)(p - b);
        if (left < 4)
            FAIL(AG_ERR_FORMAT, "%s: special token %u: its length is past the end", label, k);
        uint32_t l = get32(p);
        if (l == 0 || l > TXT_MAX_SPECIAL_LEN)
            FAIL(AG_ERR_RANGE, "%s: special token %u of %u bytes: must be 1..%d", label, k, l,
                 TXT_MAX_SPECIAL_LEN);
        if (l > left - 4)
            FAIL(AG_ERR_FORMAT, "%s: special token %u of %u bytes: only %zu left", label, k, l,
                 left - 4);
        char s[TXT_MAX_SPECIAL_LEN + 1];
        memcpy(s, p + 4, l);
        s[l] = '\0';
        if (strlen(s) != l) FAIL(AG_ERR_FORMAT, "%s: special token %u holds a NUL byte", label, k);
        if (txt_special_id(t, s) >= 0)
            FAIL(AG_ERR_FORMAT, "%s: special token %u ('%s') repeats an earlier one", label, k, s);
        if (txt_add_special(t, s) < 0) FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
        p += 4 + l;
    }
    if ((size_t)(p - b) != len)
        FAIL(AG_ERR_FORMAT, "%s: %zu bytes left over after the tokenizer's %zu", label,
             len - (size_t)(p - b), (size_t)(p - b));
    free(lens);
    *out = t;
    return AG_OK;
fail:
    free(lens);
    txt_free(t);
    return rc;
}

/* ---- a standalone file: an .npz with the entry "tokenizer" ---- */

int txt_save_bytes(const void *bytes, size_t len, const char *path) {
    AG_CHECK(bytes || len == 0, "txt_save_bytes: argument 'bytes' is NULL");
    AG_CHECK_ARG(path);
    NpzWriter *w = npz_writer_new();
    npz_add_bytes(w, "tokenizer", bytes, len);
    int rc = npz_write(w, path, 6, NULL);
    npz_writer_free(w);
    return rc;
}

int txt_save(const TxtTokenizer *t, const char *path) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(path);
    size_t n;
    uint8_t *b = txt_to_bytes(t, &n);
    int rc = txt_save_bytes(b, n, path);
    free(b);
    return rc;
}

int txt_load_bytes(const char *path, size_t max, uint8_t **bytes, size_t *len) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(bytes);
    AG_CHECK_ARG(len);
    *bytes = NULL, *len = 0;
    NpzLimits lim = {.max_bytes = max + 4096, .max_entries = 16};
    NpzFile *f;
    int rc = npz_read(path, &f, &lim);
    if (rc != AG_OK) return rc;
    const NpzEntry *e = npz_find(f, "tokenizer");
    if (!e)
        rc = ag_fail(AG_ERR_FORMAT, "%s: no entry 'tokenizer': not a tokenizer file", path);
    else if (e->dtype != NPZ_U8 || e->ndim != 1)
        rc = ag_fail(AG_ERR_FORMAT, "%s: entry 'tokenizer' is not a 1-D '|u1' array", path);
    else if (e->nbytes > max)
        rc = ag_fail(AG_ERR_FORMAT, "%s: a tokenizer of %zu bytes, over the limit of %zu", path,
                     e->nbytes, max);
    else if (!(*bytes = malloc(e->nbytes ? e->nbytes : 1)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", path);
    else
        memcpy(*bytes, e->data, *len = e->nbytes);
    npz_free(f);
    return rc;
}

int txt_load(const char *path, TxtTokenizer **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    *out = NULL;
    /* the largest valid tokenizer: header, 256 bytes, every merge, every special */
    size_t max = TOK_HEADER + 256 + 8 * (size_t)TXT_MAX_VOCAB +
                 (size_t)TXT_MAX_SPECIAL * (4 + TXT_MAX_SPECIAL_LEN);
    uint8_t *b;
    size_t n;
    int rc = txt_load_bytes(path, max, &b, &n);
    if (rc == AG_OK) rc = txt_from_bytes(b, n, path, out);
    free(b);
    return rc;
}
