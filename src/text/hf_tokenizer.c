/* hf_tokenizer.c: Hugging Face tokenizers read from tokenizer.json (or GPT-2's vocab.json and
 * merges.txt): the two BPE families published models use. Byte-level BPE (GPT-2, GPT-NeoX /
 * Pythia, SmolLM): added tokens split off first, the ByteLevel pre-tokenizer with GPT-2's split
 * pattern written by hand over code points (the classes \p{L}, \p{N}, \s from hf_unicode.c), the
 * Digits pre-tokenizer before it, and an NFC normalizer only on texts it cannot change.
 * SentencePiece-style BPE (LLaMA): spaces as U+2581 through the Prepend/Replace normalizer or the
 * Metaspace pre-tokenizer, characters merged, unknown characters as <0xXX> byte tokens. Every
 * member of the JSON is checked before it is used, and anything else refused naming the key and
 * value; then the queries. Not here: encoding and decoding (hf_encode.c), attograd's own
 * tokenizers (tokenizer.c) and their tokenizer.json (hf_write.c). Read next: hf_encode.c. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf_internal.h"
#include "text_internal.h"
#include "../io/safetensors.h"

/* ---- small helpers ---- */

/* adds id to the hash; the id already there with the same bytes, or -1 when it was new */
static int hash_add(TxtHf *t, int id) {
    size_t n;
    const uint8_t *p = tok(t, id, &n);
    for (size_t i = fnv(p, n) & (t->hcap - 1);; i = (i + 1) & (t->hcap - 1)) {
        int32_t v = t->hash[i];
        if (!v) {
            t->hash[i] = id + 1;
            t->in_hash[id] = 1;
            return -1;
        }
        size_t l;
        const uint8_t *q = tok(t, v - 1, &l);
        if (l == n && memcmp(p, q, n) == 0) return v - 1;
    }
}

/* GPT-2's byte <-> character table: the printable bytes stand for themselves, the others for
 * U+0100 + k in byte order (bytes_to_unicode in GPT-2's encoder.py) */
uint32_t txt_hf_byte_char_(int b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int k = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) k++;
    return 0x100 + (uint32_t)k;
}
static int char_byte(uint32_t c) {
    static int16_t inv[0x200];
    static int ready;
    if (!ready) { /* idempotent: racing threads write the same values */
        for (int i = 0; i < 0x200; i++) inv[i] = -1;
        for (int b = 0; b < 256; b++) inv[txt_hf_byte_char_(b)] = (int16_t)b;
        ready = 1;
    }
    return c < 0x200 ? inv[c] : -1;
}

/* the byte-level decoding of the UTF-8 string s[0..n) into out (room n), or -1 when a
 * character is outside the 256 of the table */
static long bytelevel_decode(const uint8_t *s, size_t n, uint8_t *out) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid(s + i, n - i);
        if (!l) return -1;
        int b = char_byte(utf8_get(s + i, n - i, &l));
        if (b < 0) return -1;
        out[k++] = (uint8_t)b;
        i += l;
    }
    return (long)k;
}

/* ---- building ---- */

static int push_bytes(TxtHf *t, int id, const uint8_t *p, size_t n) {
    (void)id;
    if (t->blob_len + n > t->blob_cap) {
        size_t cap = (t->blob_len + n) * 2 + 64;
        uint8_t *b = realloc(t->blob, cap);
        if (!b) return AG_ERR_NOMEM;
        t->blob = b;
        t->blob_cap = cap;
    }
    memcpy(t->blob + t->blob_len, p, n);
    t->blob_len += n;
    return AG_OK;
}

void txt_hf_free(TxtHf *t) {
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->added);
    free(t->in_hash);
    free(t->hash);
    txt_pairs_free_(&t->rank);
    free(t->merged);
    free(t->adds);
    free(t->json);
    free(t);
}

typedef struct {
    const char *label;
    TxtHf *t;
    json_t *root;
} Ctx;

#define FAIL(code, ...) ag_fail(code, __VA_ARGS__)

/* "label: "key": value: why" with the value as compact JSON, cut at 200 bytes */
static int kfail(const Ctx *x, const char *key, const json_t *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int kfail(const Ctx *x, const char *key, const json_t *v, const char *fmt, ...) {
    char why[512], val[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (v) {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(val, sizeof val, ": %.200s%s", s ? s : "?", s && strlen(s) > 200 ? "..." : "");
        free(s);
    }
    return FAIL(AG_ERR_FORMAT, "%s: \"%s\"%s: %s", x->label, key, val, why);
}

/* checks that object o has only the keys of allowed (NULL-terminated) */
static int only_keys(const Ctx *x, const char *where, const json_t *o, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char k[300];
            snprintf(k, sizeof k, "%s.%s", where, key);
            return kfail(x, k, v, "not a key attograd knows here");
        }
    }
    return AG_OK;
}

static int get_bool(const Ctx *x, const char *where, const json_t *o, const char *key, int dflt,
                    int *out) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = dflt, AG_OK;
    if (!json_is_boolean(v)) {
        char k[300];
        snprintf(k, sizeof k, "%s.%s", where, key);
        return kfail(x, k, v, "must be true or false");
    }
    *out = json_is_true(v);
    return AG_OK;
}

static int is_str(const json_t *v, const char *s) {
    return json_is_string(v) && !strcmp(json_string_value(v), s);
}
static const char *type_of(const json_t *o) {
    json_t *v = json_object_get(o, "type");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* the JSON string v's bytes (jansson keeps its length: a NUL inside is refused by the parser) */
static int str_bytes(const json_t *v, const uint8_t **p, size_t *n) {
    if (!json_is_string(v)) return 0;
    *p = (const uint8_t *)json_string_value(v);
    *n = json_string_length(v);
    return 1;
}

/* ---- the model: vocab and merges ---- */

/* the model bytes of a vocabulary key: byte-level decoded (*reach 0 when a character is not one
 * of the 256: then its UTF-8, which only an added token can produce), else the key itself */
static int model_bytes(const TxtHf *t, const uint8_t *s, size_t n, uint8_t *buf, size_t *len,
                       int *reach) {
    if (t->kind == HF_BYTELEVEL) {
        long k = bytelevel_decode(s, n, buf);
        if (k >= 0) return *len = (size_t)k, *reach = 1, AG_OK;
    }
    memcpy(buf, s, n);
    *len = n;
    *reach = 1;
    if (t->kind == HF_BYTELEVEL) *reach = 0;
    return AG_OK;
}

static int load_vocab(Ctx *x, const json_t *vocab, json_t *added) {
    TxtHf *t = x->t;
    size_t nv = json_object_size(vocab), na = json_array_size(added);
    if (nv + na > TXT_MAX_VOCAB)
        return kfail(x, "model.vocab", NULL, "%zu tokens and %zu added tokens: more than %d", nv,
                     na, TXT_MAX_VOCAB);
    /* the ids: each one once, all of 0 .. n-1 (vocab and added tokens together) */
    size_t cap = nv + na;
    const json_t **by_id = calloc(cap ? cap : 1, sizeof *by_id);
    const char **key_of = calloc(cap ? cap : 1, sizeof *key_of);
    if (!by_id || !key_of) {
        free(by_id), free(key_of);
        return FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
    }
    int rc = AG_OK, n = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= (json_int_t)cap) {
            char k[320];
            snprintf(k, sizeof k, "model.vocab.%.200s", key);
            rc = kfail(x, k, v,
                       "must be an id in [0, %zu) (the vocabulary and added tokens hold %zu)", cap,
                       cap);
            goto out;
        }
        int id = (int)json_integer_value(v);
        if (key_of[id]) {
            char k[320];
            snprintf(k, sizeof k, "model.vocab.%.200s", key);
            rc = kfail(x, k, v, "id %d is also the id of \"%.200s\"", id, key_of[id]);
            goto out;
        }
        key_of[id] = key;
        if (id + 1 > n) n = id + 1;
    }
    for (size_t i = 0; i < na; i++) {
        json_t *a = json_array_get(added, i);
        json_t *jid = json_object_get(a, "id");
        int id = (int)json_integer_value(jid); /* checked by load_added before */
        if (id >= (int)cap || id < 0) {
            rc = kfail(x, "added_tokens", jid, "id outside [0, %zu)", cap);
            goto out;
        }
        if (!key_of[id]) {
            if (by_id[id]) {
                rc = kfail(x, "added_tokens", jid, "two added tokens have this id");
                goto out;
            }
            by_id[id] = a;
            if (id + 1 > n) n = id + 1;
        }
    }
    for (int id = 0; id < n; id++)
        if (!key_of[id] && !by_id[id]) {
            rc = kfail(x, "model.vocab", NULL,
                       "ids must run from 0 without a gap: id %d is missing (the largest is %d)",
                       id, n - 1);
            goto out;
        }
    t->n = n;
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->added = calloc((size_t)n + 1, 1);
    t->in_hash = calloc((size_t)n + 1, 1);
    t->hcap = 64;
    while (t->hcap < (size_t)n * 2) t->hcap *= 2;
    t->hash = calloc(t->hcap, sizeof *t->hash);
    uint8_t *buf = malloc(TXT_MAX_TOKEN_LEN * 4 + 4);
    if (!t->off || !t->added || !t->in_hash || !t->hash || !buf) {
        free(buf);
        rc = FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
        goto out;
    }
    for (int id = 0; id < n && rc == AG_OK; id++) {
        const uint8_t *s = NULL;
        size_t len = 0, bl = 0;
        int reach = 0;
        t->off[id] = t->blob_len;
        if (key_of[id]) {
            s = (const uint8_t *)key_of[id];
            len = strlen(key_of[id]);
        } else {
            str_bytes(json_object_get(by_id[id], "content"), &s, &len);
        }
        if (len == 0 || len > TXT_MAX_TOKEN_LEN * 4) {
            rc = kfail(x, key_of[id] ? "model.vocab" : "added_tokens", NULL,
                       "token of id %d has %zu bytes: must be 1 to %d", id, len,
                       TXT_MAX_TOKEN_LEN * 4);
            break;
        }
        if (key_of[id]) {
            model_bytes(t, s, len, buf, &bl, &reach);
        } else {
            memcpy(buf, s, len);
            bl = len;
        }
        if (push_bytes(t, id, buf, bl) != AG_OK) {
            rc = FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
            break;
        }
        t->off[id + 1] = t->blob_len;
        if (key_of[id] && reach) {
            int other = hash_add(t, id);
            if (other >= 0) {
                char k[320];
                snprintf(k, sizeof k, "model.vocab.%.200s", key_of[id]);
                rc = kfail(x, k, NULL, "ids %d and %d stand for the same bytes", other, id);
            }
        }
    }
    t->off[n] = t->blob_len;
    free(buf);
out:
    free(by_id);
    free(key_of);
    return rc;
}

/* one merge's two parts, from "a b" or ["a", "b"] */
static int merge_parts(const json_t *m, const uint8_t **a, size_t *an, const uint8_t **b,
                       size_t *bn) {
    if (json_is_array(m)) {
        return json_array_size(m) == 2 && str_bytes(json_array_get(m, 0), a, an) &&
               str_bytes(json_array_get(m, 1), b, bn);
    }
    const uint8_t *s;
    size_t n;
    if (!str_bytes(m, &s, &n)) return 0;
    const uint8_t *sp = memchr(s, ' ', n);
    if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - s) - 1)) return 0;
    *a = s, *an = (size_t)(sp - s), *b = sp + 1, *bn = n - *an - 1;
    return 1;
}

static int part_id(const TxtHf *t, const uint8_t *s, size_t n, uint8_t *buf) {
    if (t->kind == HF_BYTELEVEL) {
        long k = bytelevel_decode(s, n, buf);
        return k < 0 ? -1 : lookup(t, buf, (size_t)k);
    }
    return lookup(t, s, n);
}

/* adds merge (a, b) as the next rank; a message for the caller on failure */
static int add_merge(Ctx *x, size_t k, const json_t *m, const uint8_t *a, size_t an,
                     const uint8_t *b, size_t bn) {
    TxtHf *t = x->t;
    uint8_t *buf = malloc(an + bn + 8);
    if (!buf) return FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
    int ia = part_id(t, a, an, buf), ib = part_id(t, b, bn, buf);
    int rc = AG_OK;
    char where[64];
    snprintf(where, sizeof where, "model.merges[%zu]", k);
    if (ia < 0 || ib < 0) {
        rc = kfail(x, where, m, "names \"%.*s\", not a token of the vocabulary",
                   (int)(ia < 0 ? an : bn), (const char *)(ia < 0 ? a : b));
    } else {
        size_t la, lb;
        const uint8_t *pa = tok(t, ia, &la), *pb = tok(t, ib, &lb);
        memcpy(buf, pa, la);
        memcpy(buf + la, pb, lb);
        int ic = lookup(t, buf, la + lb);
        if (ic < 0) {
            rc = kfail(x, where, m, "the merged token is not in the vocabulary");
        } else {
            size_t slot = txt_pairs_slot_(&t->rank, ia, ib);
            if (t->rank.keys[slot])
                rc = kfail(x, where, m, "repeats model.merges[%d]", t->rank.vals[slot]);
            else {
                txt_pairs_set_(&t->rank, slot, ia, ib, (int32_t)k);
                t->merged[k] = ic;
            }
        }
    }
    free(buf);
    return rc;
}

static int load_merges(Ctx *x, const json_t *merges) {
    TxtHf *t = x->t;
    if (!json_is_array(merges)) return kfail(x, "model.merges", NULL, "must be an array");
    size_t nm = json_array_size(merges);
    if (nm > TXT_MAX_VOCAB)
        return kfail(x, "model.merges", NULL, "%zu merges: more than %d", nm, TXT_MAX_VOCAB);
    t->merged = malloc((nm ? nm : 1) * sizeof *t->merged);
    if (!t->merged || txt_pairs_reserve_(&t->rank, nm + 1, 64) != AG_OK)
        return FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
    for (size_t k = 0; k < nm; k++) {
        const json_t *m = json_array_get(merges, k);
        const uint8_t *a, *b;
        size_t an, bn;
        if (!merge_parts(m, &a, &an, &b, &bn)) {
            char where[64];
            snprintf(where, sizeof where, "model.merges[%zu]", k);
            return kfail(x, where, m, "a merge is \"a b\" or [\"a\", \"b\"]");
        }
        int rc = add_merge(x, k, m, a, an, b, bn);
        if (rc != AG_OK) return rc;
    }
    t->n_merges = (int)nm;
    return AG_OK;
}

/* ---- added tokens ---- */

static const TxtHf *cmp_added_hf;
static int cmp_added(const void *pa, const void *pb) {
    const HfAdded *a = pa, *b = pb;
    size_t la, lb;
    const uint8_t *sa = tok(cmp_added_hf, a->id, &la), *sb = tok(cmp_added_hf, b->id, &lb);
    if (sa[0] != sb[0]) return sa[0] < sb[0] ? -1 : 1;
    if (la != lb) return la > lb ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* the added tokens' shape, before the vocabulary is built (ids, flags) */
static int check_added(Ctx *x, const json_t *added) {
    static const char *const keys[] = {"id",     "content",    "single_word", "lstrip",
                                       "rstrip", "normalized", "special",     NULL};
    if (!json_is_array(added)) return kfail(x, "added_tokens", NULL, "must be an array");
    if (json_array_size(added) > 65536)
        return kfail(x, "added_tokens", NULL, "%zu added tokens: more than 65536",
                     json_array_size(added));
    size_t i;
    json_t *a;
    json_array_foreach((json_t *)added, i, a) {
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        if (!json_is_object(a)) return kfail(x, where, a, "must be an object");
        int rc = only_keys(x, where, a, keys);
        if (rc != AG_OK) return rc;
        json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= TXT_MAX_VOCAB)
            return kfail(x, where, id, "its \"id\" must be an integer in [0, %d)", TXT_MAX_VOCAB);
        const uint8_t *s;
        size_t n;
        if (!str_bytes(json_object_get(a, "content"), &s, &n) || n == 0 || n > TXT_MAX_SPECIAL_LEN)
            return kfail(x, where, json_object_get(a, "content"),
                         "its \"content\" must be a string of 1 to %d bytes", TXT_MAX_SPECIAL_LEN);
        static const char *const off[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++) {
            int b;
            if ((rc = get_bool(x, where, a, off[k], 0, &b)) != AG_OK) return rc;
            if (b) return kfail(x, where, a, "\"%s\": true is not supported", off[k]);
        }
        int b;
        if ((rc = get_bool(x, where, a, "normalized", 0, &b)) != AG_OK ||
            (rc = get_bool(x, where, a, "special", 0, &b)) != AG_OK)
            return rc;
    }
    return AG_OK;
}

static int load_added(Ctx *x, const json_t *added) {
    TxtHf *t = x->t;
    size_t na = json_array_size(added);
    t->adds = malloc((na ? na : 1) * sizeof *t->adds);
    if (!t->adds) return FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
    size_t i;
    json_t *a;
    json_array_foreach((json_t *)added, i, a) {
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        int id = (int)json_integer_value(json_object_get(a, "id"));
        const uint8_t *s = NULL;
        size_t n = 0, l;
        str_bytes(json_object_get(a, "content"), &s, &n);
        const uint8_t *have = tok(t, id, &l);
        /* the vocabulary's token of that id must be the same text, and no other token that */
        uint8_t *buf = malloc(n + 1);
        if (!buf) return FAIL(AG_ERR_NOMEM, "%s: out of memory", x->label);
        size_t bl;
        int reach;
        model_bytes(t, s, n, buf, &bl, &reach);
        int same = bl == l && !memcmp(buf, have, l), other = reach ? lookup(t, buf, bl) : -1;
        free(buf);
        if (other >= 0 && other != id)
            return kfail(x, where, a, "its content is the vocabulary's token %d, not %d", other,
                         id);
        if (!t->added[id] && t->in_hash[id]) {
            if (!same) return kfail(x, where, a, "the vocabulary's token %d is another text", id);
        } else if (t->added[id] || l != n || memcmp(s, have, n)) {
            return kfail(x, where, a, "the vocabulary's token %d is another text", id);
        }
        int special = json_is_true(json_object_get(a, "special"));
        int normalized = json_is_true(json_object_get(a, "normalized"));
        if (normalized && (t->prepend_norm || t->replace_norm))
            return kfail(
                x, where, a,
                "\"normalized\": true with a normalizer that changes spaces is not supported");
        t->added[id] = (uint8_t)(1 + special);
        t->adds[t->n_adds++] = (HfAdded){id, normalized};
    }
    cmp_added_hf = t;
    qsort(t->adds, (size_t)t->n_adds, sizeof *t->adds, cmp_added);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_adds) {
            size_t l;
            if (tok(t, t->adds[k].id, &l)[0] >= b) break;
            k++;
        }
        t->add_first[b] = k;
    }
    return AG_OK;
}

/* ---- normalizer, pre-tokenizer, decoder, model options ---- */

static int load_normalizer(Ctx *x, const json_t *v) {
    TxtHf *t = x->t;
    if (!v || json_is_null(v)) return AG_OK;
    const char *ty = type_of(v);
    if (ty && !strcmp(ty, "NFC")) return t->nfc = 1, AG_OK;
    const json_t *list = v;
    if (ty && !strcmp(ty, "Sequence")) list = json_object_get(v, "normalizers");
    size_t n = json_is_array(list) ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(list) ? json_array_get(list, i) : v;
        const char *et = type_of(e);
        if (et && !strcmp(et, "Prepend") && is_str(json_object_get(e, "prepend"), SPACE_MARK) &&
            !t->replace_norm && !t->prepend_norm && json_object_size(e) == 2)
            t->prepend_norm = 1;
        else if (et && !strcmp(et, "Replace") && json_object_size(e) == 3 &&
                 is_str(json_object_get(json_object_get(e, "pattern"), "String"), " ") &&
                 json_object_size(json_object_get(e, "pattern")) == 1 &&
                 is_str(json_object_get(e, "content"), SPACE_MARK) && !t->replace_norm)
            t->replace_norm = 1;
        else if (et && !strcmp(et, "NFC") && !t->nfc && !t->prepend_norm && !t->replace_norm)
            t->nfc = 1;
        else
            return kfail(x, "normalizer", e,
                         "not supported (attograd reads NFC, Prepend \"\xe2\x96\x81\" and Replace "
                         "\" \" by \"\xe2\x96\x81\")");
    }
    return AG_OK;
}

static int load_bytelevel_pre(Ctx *x, const json_t *e) {
    static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex",
                                       NULL};
    int rc = only_keys(x, "pre_tokenizer", e, keys);
    if (rc == AG_OK)
        rc = get_bool(x, "pre_tokenizer", e, "add_prefix_space", 1, &x->t->add_prefix_space);
    if (rc == AG_OK) rc = get_bool(x, "pre_tokenizer", e, "use_regex", 1, &x->t->use_regex);
    int b;
    if (rc == AG_OK) rc = get_bool(x, "pre_tokenizer", e, "trim_offsets", 1, &b); /* offsets only */
    x->t->kind = HF_BYTELEVEL;
    return rc;
}

static int load_pre(Ctx *x, const json_t *v) {
    TxtHf *t = x->t;
    if (!v || json_is_null(v)) return AG_OK;
    const char *ty = type_of(v);
    const json_t *list = v;
    if (ty && !strcmp(ty, "Sequence")) list = json_object_get(v, "pretokenizers");
    size_t n = json_is_array(list) ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(list) ? json_array_get(list, i) : v;
        const char *et = type_of(e);
        int rc;
        if (et && !strcmp(et, "ByteLevel") && !t->kind) {
            if ((rc = load_bytelevel_pre(x, e)) != AG_OK) return rc;
        } else if (et && !strcmp(et, "Digits") && !t->kind && !t->digits &&
                   json_object_size(e) == 2) {
            int ind;
            if ((rc = get_bool(x, "pre_tokenizer", e, "individual_digits", 0, &ind)) != AG_OK)
                return rc;
            t->digits = ind ? 1 : 2;
        } else if (et && !strcmp(et, "Split") && !t->kind && !t->own_split && !t->digits &&
                   is_str(json_object_get(json_object_get(e, "pattern"), "Regex"),
                          txt_hf_attograd_split_) &&
                   is_str(json_object_get(e, "behavior"), "Isolated") &&
                   json_is_false(json_object_get(e, "invert")) && json_object_size(e) == 4) {
            t->own_split = 1;
        } else if (et && !strcmp(et, "Metaspace") && !t->kind && n == 1) {
            static const char *const keys[] = {
                "type",    "replacement", "add_prefix_space", "prepend_scheme", "split",
                "str_rep", NULL};
            if ((rc = only_keys(x, "pre_tokenizer", e, keys)) != AG_OK) return rc;
            if (!is_str(json_object_get(e, "replacement"), SPACE_MARK))
                return kfail(x, "pre_tokenizer.replacement", json_object_get(e, "replacement"),
                             "only \"\xe2\x96\x81\" is supported");
            json_t *ps = json_object_get(e, "prepend_scheme");
            int aps = 1;
            if ((rc = get_bool(x, "pre_tokenizer", e, "add_prefix_space", 1, &aps)) != AG_OK)
                return rc;
            t->meta_prepend = aps ? META_ALWAYS : META_NEVER;
            if (ps && !json_is_null(ps)) {
                if (is_str(ps, "first"))
                    t->meta_prepend = META_FIRST;
                else if (is_str(ps, "always"))
                    t->meta_prepend = META_ALWAYS;
                else if (is_str(ps, "never"))
                    t->meta_prepend = META_NEVER;
                else
                    return kfail(x, "pre_tokenizer.prepend_scheme", ps,
                                 "must be first, always or never");
            }
            if ((rc = get_bool(x, "pre_tokenizer", e, "split", 1, &t->meta_split)) != AG_OK)
                return rc;
            t->meta = 1;
            t->kind = HF_SPM;
        } else {
            return kfail(x, "pre_tokenizer", e,
                         "not supported (attograd reads ByteLevel, Digits or attograd's Split then "
                         "ByteLevel, Metaspace)");
        }
    }
    if (t->own_split && (t->kind != HF_BYTELEVEL || t->use_regex || t->add_prefix_space))
        return kfail(x, "pre_tokenizer", v,
                     "attograd's split is read only before a ByteLevel without its own split or "
                     "prefix space");
    if (t->digits && t->kind != HF_BYTELEVEL)
        return kfail(x, "pre_tokenizer", v, "Digits is supported only before ByteLevel");
    return AG_OK;
}

static int load_decoder(Ctx *x, const json_t *v) {
    TxtHf *t = x->t;
    const char *ty = v ? type_of(v) : NULL;
    if (t->kind == HF_BYTELEVEL) {
        if (!ty || strcmp(ty, "ByteLevel"))
            return kfail(x, "decoder", v, "a ByteLevel tokenizer decodes with ByteLevel");
        return AG_OK;
    }
    if (!v || json_is_null(v)) return kfail(x, "decoder", v, "a decoder is required");
    const json_t *list = v;
    if (ty && !strcmp(ty, "Sequence")) list = json_object_get(v, "decoders");
    size_t n = json_is_array(list) ? json_array_size(list) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(list) ? json_array_get(list, i) : v;
        const char *et = type_of(e);
        if (et && !strcmp(et, "Replace") && is_str(json_object_get(e, "content"), " ") &&
            is_str(json_object_get(json_object_get(e, "pattern"), "String"), SPACE_MARK) &&
            json_object_size(e) == 3 && json_object_size(json_object_get(e, "pattern")) == 1 &&
            !t->dec_replace && !t->dec_byte_fallback)
            t->dec_replace = 1;
        else if (et && !strcmp(et, "ByteFallback") && json_object_size(e) == 1 &&
                 !t->dec_byte_fallback)
            t->dec_byte_fallback = 1;
        else if (et && !strcmp(et, "Fuse") && json_object_size(e) == 1)
            ;
        else if (et && !strcmp(et, "Strip") && is_str(json_object_get(e, "content"), " ") &&
                 json_integer_value(json_object_get(e, "start")) == 1 &&
                 json_is_integer(json_object_get(e, "start")) &&
                 json_is_integer(json_object_get(e, "stop")) &&
                 json_integer_value(json_object_get(e, "stop")) == 0 && json_object_size(e) == 4 &&
                 i == n - 1)
            t->dec_strip = 1;
        else if (et && !strcmp(et, "Metaspace") &&
                 is_str(json_object_get(e, "replacement"), SPACE_MARK) && !t->dec_replace &&
                 !t->dec_byte_fallback) {
            json_t *ps = json_object_get(e, "prepend_scheme");
            t->dec_replace = 1;
            t->dec_meta_strip =
                !is_str(ps, "never") && !json_is_false(json_object_get(e, "add_prefix_space"));
        } else
            return kfail(
                x, "decoder", e,
                "not supported (attograd reads Replace \"\xe2\x96\x81\" by \" \", ByteFallback, "
                "Fuse, Strip of one leading space, Metaspace)");
    }
    if (!t->dec_replace)
        return kfail(x, "decoder", v, "does not turn \"\xe2\x96\x81\" back into spaces");
    return AG_OK;
}

static int load_model(Ctx *x, const json_t *m, json_t *added) {
    TxtHf *t = x->t;
    static const char *const keys[] = {"type",
                                       "dropout",
                                       "unk_token",
                                       "continuing_subword_prefix",
                                       "end_of_word_suffix",
                                       "fuse_unk",
                                       "byte_fallback",
                                       "ignore_merges",
                                       "vocab",
                                       "merges",
                                       NULL};
    if (!json_is_object(m)) return kfail(x, "model", m, "must be an object");
    if (!is_str(json_object_get(m, "type"), "BPE"))
        return kfail(x, "model.type", json_object_get(m, "type"), "only \"BPE\" is supported");
    int rc = only_keys(x, "model", m, keys);
    if (rc != AG_OK) return rc;
    json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d))
        return kfail(x, "model.dropout", d, "only null is supported (no dropout)");
    static const char *const empty[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        json_t *e = json_object_get(m, empty[k]);
        if (e && !json_is_null(e) && !is_str(e, "")) {
            char w[64];
            snprintf(w, sizeof w, "model.%s", empty[k]);
            return kfail(x, w, e, "only null or \"\" is supported");
        }
    }
    if ((rc = get_bool(x, "model", m, "fuse_unk", 0, &t->fuse_unk)) != AG_OK ||
        (rc = get_bool(x, "model", m, "byte_fallback", 0, &t->byte_fallback)) != AG_OK ||
        (rc = get_bool(x, "model", m, "ignore_merges", 0, &t->ignore_merges)) != AG_OK)
        return rc;
    json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab)) return kfail(x, "model.vocab", vocab, "must be an object");
    if ((rc = load_vocab(x, vocab, added)) != AG_OK) return rc;
    if ((rc = load_added(x, added)) != AG_OK) return rc;
    t->unk = -1;
    json_t *unk = json_object_get(m, "unk_token");
    if (unk && !json_is_null(unk)) {
        const uint8_t *s;
        size_t n;
        if (!str_bytes(unk, &s, &n) || (t->unk = lookup(t, s, n)) < 0)
            return kfail(x, "model.unk_token", unk, "not a token of the vocabulary");
    }
    for (int b = 0; b < 256; b++) {
        if (t->kind == HF_BYTELEVEL) {
            uint8_t c = (uint8_t)b;
            t->byte_id[b] = lookup(t, &c, 1);
        } else {
            char s[8];
            snprintf(s, sizeof s, "<0x%02X>", b);
            t->byte_id[b] = t->byte_fallback ? lookup(t, (const uint8_t *)s, 6) : -1;
        }
    }
    return load_merges(x, json_object_get(m, "merges"));
}

static int load_post(Ctx *x, const json_t *v) {
    const char *ty = v ? type_of(v) : NULL;
    if (!v || json_is_null(v) ||
        (ty && (!strcmp(ty, "ByteLevel") || !strcmp(ty, "TemplateProcessing"))))
        return AG_OK; /* encode gives the ids without it (add_special_tokens=False) */
    return kfail(x, "post_processor", v,
                 "not supported (attograd reads ByteLevel and TemplateProcessing)");
}

int txt_hf_from_json(const char *text, size_t len, const char *label, TxtHf **out) {
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(out);
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return FAIL(AG_ERR_FORMAT, "%s: not valid JSON: %s (at byte %d)", label, err.text,
                    err.position);
    Ctx x = {.label = label, .root = root, .t = calloc(1, sizeof(TxtHf))};
    int rc = AG_OK;
    if (!x.t)
        rc = FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    else if (!json_is_object(root))
        rc = FAIL(AG_ERR_FORMAT, "%s: not a JSON object", label);
    static const char *const keys[] = {
        "version",       "truncation",     "padding", "added_tokens", "normalizer",
        "pre_tokenizer", "post_processor", "decoder", "model",        NULL};
    if (rc == AG_OK) rc = only_keys(&x, "", root, keys);
    static const char *const nulls[] = {"truncation", "padding"};
    for (int k = 0; k < 2 && rc == AG_OK; k++) {
        json_t *v = json_object_get(root, nulls[k]);
        if (v && !json_is_null(v))
            rc = kfail(&x, nulls[k], v, "only null is supported (it changes the ids)");
    }
    json_t *added = json_object_get(root, "added_tokens"), *empty = json_array();
    if (!added) added = empty;
    if (rc == AG_OK) rc = check_added(&x, added);
    if (rc == AG_OK) rc = load_normalizer(&x, json_object_get(root, "normalizer"));
    if (rc == AG_OK) rc = load_pre(&x, json_object_get(root, "pre_tokenizer"));
    if (rc == AG_OK && !x.t->kind) {
        if (x.t->prepend_norm || x.t->replace_norm)
            x.t->kind = HF_SPM;
        else
            rc = kfail(&x, "pre_tokenizer", json_object_get(root, "pre_tokenizer"),
                       "neither ByteLevel nor Metaspace, and no normalizer writes spaces as "
                       "\"\xe2\x96\x81\": not a tokenizer attograd reads");
    }
    if (rc == AG_OK && x.t->kind == HF_SPM && x.t->nfc)
        rc = kfail(&x, "normalizer", json_object_get(root, "normalizer"),
                   "NFC is supported only with ByteLevel");
    if (rc == AG_OK) rc = load_decoder(&x, json_object_get(root, "decoder"));
    if (rc == AG_OK) rc = load_post(&x, json_object_get(root, "post_processor"));
    if (rc == AG_OK) rc = load_model(&x, json_object_get(root, "model"), added);
    json_decref(empty);
    json_decref(root);
    if (rc == AG_OK && !(x.t->json = malloc(len ? len : 1)))
        rc = FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    if (rc != AG_OK) {
        txt_hf_free(x.t);
        return rc;
    }
    memcpy(x.t->json, text, len);
    x.t->json_len = len;
    *out = x.t;
    return AG_OK;
}

/* ---- files ---- */

#define HF_TOK_MAX_FILE ((uint64_t)256 << 20)

static int join(const char *dir, const char *name, char *buf, size_t cap) {
    size_t n = strlen(dir);
    int k = snprintf(buf, cap, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
    if (k < 0 || (size_t)k >= cap)
        return FAIL(AG_ERR_ARG, "%.200s...: a path of %zu bytes is too long", dir, n);
    return AG_OK;
}

int txt_hf_load(const char *path, TxtHf **out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    *out = NULL;
    struct stat st;
    char file[4096];
    int rc = AG_OK;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((rc = join(path, "tokenizer.json", file, sizeof file)) != AG_OK) return rc;
        if (stat(file, &st) != 0) {
            char v[4096], m[4096];
            if ((rc = join(path, "vocab.json", v, sizeof v)) != AG_OK ||
                (rc = join(path, "merges.txt", m, sizeof m)) != AG_OK)
                return rc;
            if (stat(v, &st) == 0) return txt_hf_from_vocab_merges(v, m, out);
            return FAIL(AG_ERR_IO, "%s: holds neither tokenizer.json nor vocab.json and merges.txt",
                        path);
        }
    } else {
        int k = snprintf(file, sizeof file, "%s", path);
        if (k < 0 || (size_t)k >= sizeof file)
            return FAIL(AG_ERR_ARG, "%.200s...: a path of %zu bytes is too long", path,
                        strlen(path));
    }
    char *text = NULL;
    size_t n = 0;
    rc = st_read_small(file, HF_TOK_MAX_FILE, &text, &n);
    if (rc == AG_OK) rc = txt_hf_from_json(text, n, file, out);
    free(text);
    return rc;
}

/* GPT-2's pair: vocab.json ({token: id}) and merges.txt ("#version" line, then "a b" a line),
 * as GPT2Tokenizer reads them: the ByteLevel pre-tokenizer with GPT-2's split, no prefix space,
 * and "<|endoftext|>", when the vocabulary has it, a special token. */
int txt_hf_from_vocab_merges(const char *vocab_path, const char *merges_path, TxtHf **out) {
    AG_CHECK_ARG(vocab_path);
    AG_CHECK_ARG(merges_path);
    AG_CHECK_ARG(out);
    *out = NULL;
    char *vt = NULL, *mt = NULL;
    size_t vn = 0, mn = 0;
    int rc = st_read_small(vocab_path, HF_TOK_MAX_FILE, &vt, &vn);
    if (rc == AG_OK) rc = st_read_small(merges_path, HF_TOK_MAX_FILE, &mt, &mn);
    json_error_t err;
    json_t *vocab = NULL, *merges = NULL, *root = NULL;
    if (rc == AG_OK && !(vocab = json_loadb(vt, vn, JSON_REJECT_DUPLICATES, &err)))
        rc = FAIL(AG_ERR_FORMAT, "%s: not valid JSON: %s (at byte %d)", vocab_path, err.text,
                  err.position);
    if (rc == AG_OK && !json_is_object(vocab))
        rc = FAIL(AG_ERR_FORMAT, "%s: not a JSON object", vocab_path);
    if (rc == AG_OK) {
        merges = json_array();
        size_t line = 0;
        for (size_t i = 0; i < mn && rc == AG_OK; line++) {
            const char *e = memchr(mt + i, '\n', mn - i);
            size_t l = e ? (size_t)(e - (mt + i)) : mn - i;
            size_t ll = l && mt[i + l - 1] == '\r' ? l - 1 : l;
            if (!(line == 0 && ll >= 8 && !memcmp(mt + i, "#version", 8)) && ll > 0) {
                json_t *s = json_stringn(mt + i, ll);
                if (!s)
                    rc = FAIL(AG_ERR_FORMAT, "%s: line %zu is not UTF-8 text", merges_path,
                              line + 1);
                else
                    json_array_append_new(merges, s);
            }
            i += l + 1;
        }
    }
    if (rc == AG_OK) {
        /* a whole tokenizer.json, as transformers converts GPT2Tokenizer (GPT2Converter), so
         * that its text (txt_hf_json) is a file the tokenizers library loads too */
        root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:n, "
                         "s:{s:s, s:b, s:b, s:b}, s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, "
                         "s:O, s:O}}",
                         "version", "1.0", "truncation", "padding", "added_tokens", json_array(),
                         "normalizer", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0,
                         "trim_offsets", 1, "use_regex", 1, "post_processor", "decoder", "type",
                         "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1,
                         "model", "type", "BPE", "dropout", "unk_token",
                         "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                         "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
        json_t *eot = json_object_get(vocab, "<|endoftext|>");
        if (root && json_is_integer(eot))
            json_array_append_new(json_object_get(root, "added_tokens"),
                                  json_pack("{s:O, s:s, s:b, s:b, s:b, s:b, s:b}", "id", eot,
                                            "content", "<|endoftext|>", "single_word", 0, "lstrip",
                                            0, "rstrip", 0, "normalized", 0, "special", 1));
        char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
        if (!text)
            rc = FAIL(AG_ERR_NOMEM, "%s: out of memory", vocab_path);
        else {
            rc = txt_hf_from_json(text, strlen(text), vocab_path, out);
            /* a merge's error names merges.txt */
            if (rc != AG_OK && strstr(ag_last_error(), "model.merges")) {
                char why[600];
                snprintf(why, sizeof why, "%s", ag_last_error() + strlen(vocab_path));
                rc = FAIL(rc, "%s%s", merges_path, why);
            }
        }
        free(text);
    }
    json_decref(root);
    json_decref(vocab);
    json_decref(merges);
    free(vt);
    free(mt);
    return rc;
}

/* ---- queries ---- */

int txt_hf_vocab_size(const TxtHf *t) {
    AG_CHECK_ARG(t);
    return t->n;
}

const char *txt_hf_json(const TxtHf *t, size_t *len) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(len);
    *len = t->json_len;
    return t->json;
}

const uint8_t *txt_hf_token_bytes(const TxtHf *t, int id, size_t *len) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(len);
    AG_CHECK(id >= 0 && id < t->n, "txt_hf_token_bytes: id %d outside [0, %d)", id, t->n);
    return tok(t, id, len);
}

int txt_hf_is_special(const TxtHf *t, int id) {
    AG_CHECK_ARG(t);
    AG_CHECK(id >= 0 && id < t->n, "txt_hf_is_special: id %d outside [0, %d)", id, t->n);
    return t->added[id] == 2;
}

int txt_hf_token_id(const TxtHf *t, const char *s) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(s);
    size_t n = strlen(s);
    for (int k = 0; k < t->n_adds; k++) {
        size_t l;
        const uint8_t *p = tok(t, t->adds[k].id, &l);
        if (l == n && !memcmp(p, s, n)) return t->adds[k].id;
    }
    return lookup(t, (const uint8_t *)s, n);
}
