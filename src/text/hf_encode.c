/* hf_encode.c: encoding and decoding with a Hugging Face tokenizer read by hf_tokenizer.c: added
 * tokens split off (leftmost, longest, the library's two passes), the normalizer and the
 * pre-tokenizer (GPT-2's split over code points, Digits, Metaspace), then the merges lowest rank
 * first, leftmost first, as the tokenizers library's Word::merge_all; decoding as its decoders
 * (ByteLevel; Replace, ByteFallback, Fuse, Strip; Metaspace). Not here: reading and checking the
 * file (hf_tokenizer.c). Read next: docs/hf.md, section "tokenizer.json". */
#include <stdlib.h>
#include <string.h>

#include "hf_internal.h"

#define FAIL(code, ...) ag_fail(code, __VA_ARGS__)

/* ---- encoding ---- */

typedef struct {
    int *ids;
    size_t n, cap;
    /* a word's symbols and the merge heap */
    struct Sym {
        int id, prev, next, alive;
    } * sym;
    size_t scap;
    struct Cand {
        int rank, pos, id;
    } * heap;
    size_t hn, hcap;
    uint8_t *buf; /* a piece with its prefix, or a normalized segment */
    size_t bcap;
} Enc;

static int emit(Enc *e, int id) {
    if (e->n == e->cap) {
        size_t cap = e->cap * 2 + 64;
        int *p = realloc(e->ids, cap * sizeof *p);
        if (!p) return AG_ERR_NOMEM;
        e->ids = p;
        e->cap = cap;
    }
    e->ids[e->n++] = id;
    return AG_OK;
}

static int cand_less(const struct Cand *a, const struct Cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}
static int heap_push(Enc *e, struct Cand c) {
    if (e->hn == e->hcap) {
        size_t cap = e->hcap * 2 + 64;
        struct Cand *h = realloc(e->heap, cap * sizeof *h);
        if (!h) return AG_ERR_NOMEM;
        e->heap = h;
        e->hcap = cap;
    }
    size_t i = e->hn++;
    while (i > 0 && cand_less(&c, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = c;
    return AG_OK;
}
static struct Cand heap_pop(Enc *e) {
    struct Cand top = e->heap[0], last = e->heap[--e->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->hn) break;
        if (c + 1 < e->hn && cand_less(&e->heap[c + 1], &e->heap[c])) c++;
        if (!cand_less(&e->heap[c], &last)) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->hn) e->heap[i] = last;
    return top;
}

static int push_pair(const TxtHf *t, Enc *e, int pos) {
    int nx = e->sym[pos].next;
    if (nx < 0) return AG_OK;
    int32_t r = txt_pairs_get_(&t->rank, e->sym[pos].id, e->sym[nx].id);
    if (r < 0) return AG_OK;
    return heap_push(e, (struct Cand){r, pos, t->merged[r]});
}

static int add_sym(Enc *e, size_t *m, int id) {
    if (*m == e->scap) {
        size_t cap = e->scap * 2 + 64;
        struct Sym *s = realloc(e->sym, cap * sizeof *s);
        if (!s) return AG_ERR_NOMEM;
        e->sym = s;
        e->scap = cap;
    }
    e->sym[*m] = (struct Sym){id, (int)*m - 1, -1, 1};
    if (*m) e->sym[*m - 1].next = (int)*m;
    (*m)++;
    return AG_OK;
}

/* one word of p[0..n) (its model bytes: raw bytes for byte-level, normalized UTF-8 for SPM):
 * its characters (byte fallback, unknown), then the merges lowest rank first, leftmost first
 * (the tokenizers library's Word::merge_all) */
static int bpe_word(const TxtHf *t, Enc *e, const uint8_t *p, size_t n) {
    if (n == 0) return AG_OK;
    if (t->ignore_merges) {
        int id = lookup(t, p, n);
        if (id >= 0) return emit(e, id);
    }
    size_t m = 0;
    int pending_unk = 0;
    for (size_t i = 0; i < n;) {
        size_t l = t->kind == HF_BYTELEVEL ? 1 : utf8_valid(p + i, n - i);
        int id = t->kind == HF_BYTELEVEL ? t->byte_id[p[i]] : lookup(t, p + i, l);
        if (id >= 0) {
            if (pending_unk && add_sym(e, &m, t->unk) != AG_OK) return AG_ERR_NOMEM;
            pending_unk = 0;
            if (add_sym(e, &m, id) != AG_OK) return AG_ERR_NOMEM;
        } else {
            int all = t->kind == HF_SPM && t->byte_fallback;
            for (size_t k = 0; all && k < l; k++) all = t->byte_id[p[i + k]] >= 0;
            if (all) {
                if (pending_unk && add_sym(e, &m, t->unk) != AG_OK) return AG_ERR_NOMEM;
                pending_unk = 0;
                for (size_t k = 0; k < l; k++)
                    if (add_sym(e, &m, t->byte_id[p[i + k]]) != AG_OK) return AG_ERR_NOMEM;
            } else if (t->unk >= 0) {
                if (pending_unk && !t->fuse_unk && add_sym(e, &m, t->unk) != AG_OK)
                    return AG_ERR_NOMEM;
                pending_unk = 1;
            } /* else dropped, as the library drops it */
        }
        i += l;
    }
    if (pending_unk && add_sym(e, &m, t->unk) != AG_OK) return AG_ERR_NOMEM;
    e->hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        if (push_pair(t, e, (int)i) != AG_OK) return AG_ERR_NOMEM;
    while (e->hn) {
        struct Cand c = heap_pop(e);
        struct Sym *s = &e->sym[c.pos];
        if (!s->alive || s->next < 0) continue;
        int32_t r = txt_pairs_get_(&t->rank, s->id, e->sym[s->next].id);
        if (r < 0 || t->merged[r] != c.id) continue;
        struct Sym *nx = &e->sym[s->next];
        s->id = c.id;
        nx->alive = 0;
        s->next = nx->next;
        if (s->next >= 0) e->sym[s->next].prev = c.pos;
        if (s->prev >= 0 && push_pair(t, e, s->prev) != AG_OK) return AG_ERR_NOMEM;
        if (push_pair(t, e, c.pos) != AG_OK) return AG_ERR_NOMEM;
    }
    for (int i = m ? 0 : -1; i >= 0; i = e->sym[i].next)
        if (emit(e, e->sym[i].id) != AG_OK) return AG_ERR_NOMEM;
    return AG_OK;
}

/* GPT-2's pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ at
 * p[0..n) (valid UTF-8, n > 0): the length of the match that starts there */
size_t txt_hf_gpt2_chunk_(const uint8_t *p, size_t n) {
    size_t q = txt_contraction_(p, n);
    if (q) return q;
    size_t i = 0, l;
    if (p[0] == ' ' && n >= 2 && cp_class(utf8_get(p + 1, n - 1, &l)) != C_S) i = 1;
    int c = cp_class(utf8_get(p + i, n - i, &l));
    if (c != C_S) {
        while (i < n && cp_class(utf8_get(p + i, n - i, &l)) == c) i += l;
        return i;
    }
    /* whitespace: all of a run that ends the text, else without its last character */
    size_t k = 0, last = 0, count = 0;
    while (k < n && cp_class(utf8_get(p + k, n - k, &l)) == C_S) last = k, k += l, count++;
    if (k == n || count == 1) return k;
    return last;
}

static int ensure_buf(Enc *e, size_t n) {
    if (n <= e->bcap) return AG_OK;
    uint8_t *b = realloc(e->buf, n);
    if (!b) return AG_ERR_NOMEM;
    e->buf = b;
    e->bcap = n;
    return AG_OK;
}

/* a piece after the Digits split: ByteLevel (prefix space, GPT-2's split), then BPE */
static int bytelevel_piece(const TxtHf *t, Enc *e, const uint8_t *p, size_t n) {
    if (n == 0) return AG_OK;
    if (t->add_prefix_space && p[0] != ' ') {
        if (ensure_buf(e, n + 1) != AG_OK) return AG_ERR_NOMEM;
        e->buf[0] = ' ';
        memcpy(e->buf + 1, p, n);
        p = e->buf;
        n++;
    }
    for (size_t i = 0; i < n;) {
        size_t l = t->use_regex ? txt_hf_gpt2_chunk_(p + i, n - i) : n - i;
        if (bpe_word(t, e, p + i, l) != AG_OK) return AG_ERR_NOMEM;
        i += l;
    }
    return AG_OK;
}

/* a stretch of text between added tokens; at0: it starts the text */
static int encode_segment(const TxtHf *t, Enc *e, const uint8_t *p, size_t n, int at0) {
    if (n == 0) return AG_OK;
    if (t->kind == HF_BYTELEVEL) {
        if (t->own_split) {
            for (size_t i = 0; i < n;) {
                size_t l = txt_gpt2_chunk_(p + i, n - i);
                if (bytelevel_piece(t, e, p + i, l) != AG_OK) return AG_ERR_NOMEM;
                i += l;
            }
            return AG_OK;
        }
        if (!t->digits) return bytelevel_piece(t, e, p, n);
        for (size_t i = 0; i < n;) {
            size_t l, j = i;
            int num = cp_class(utf8_get(p + i, n - i, &l)) == C_N;
            if (num && t->digits == 1)
                j += l;
            else
                while (j < n && (cp_class(utf8_get(p + j, n - j, &l)) == C_N) == num) j += l;
            if (bytelevel_piece(t, e, p + i, j - i) != AG_OK) return AG_ERR_NOMEM;
            i = j;
        }
        return AG_OK;
    }
    /* SPM: the normalizer and Metaspace into buf, spaces as U+2581 */
    if (ensure_buf(e, 3 * n + 6) != AG_OK) return AG_ERR_NOMEM; /* spaces, both prefixes */
    size_t k = 0;
    if (t->prepend_norm) memcpy(e->buf, SPACE_MARK, 3), k = 3;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ' ' && (t->replace_norm || t->meta))
            memcpy(e->buf + k, SPACE_MARK, 3), k += 3;
        else
            e->buf[k++] = p[i];
    }
    uint8_t *q = e->buf;
    if (t->meta && (t->meta_prepend == META_ALWAYS || (t->meta_prepend == META_FIRST && at0)) &&
        !(k >= 3 && !memcmp(q, SPACE_MARK, 3))) {
        memmove(q + 3, q, k);
        memcpy(q, SPACE_MARK, 3);
        k += 3;
    }
    if (!t->meta || !t->meta_split) return bpe_word(t, e, q, k);
    /* Metaspace's split: a word starts at each U+2581 */
    size_t start = 0;
    for (size_t i = 1; i + 3 <= k; i++)
        if (!memcmp(q + i, SPACE_MARK, 3)) {
            if (bpe_word(t, e, q + start, i - start) != AG_OK) return AG_ERR_NOMEM;
            start = i;
        }
    return bpe_word(t, e, q + start, k - start);
}

/* the leftmost, then longest, added token in p[a..b) whose normalized flag is norm: its
 * position (b when none) and *id */
static size_t find_added(const TxtHf *t, const uint8_t *p, size_t a, size_t b, int norm, int *id,
                         size_t *len) {
    for (size_t i = a; i < b; i++) {
        for (int k = t->add_first[p[i]]; k < t->add_first[p[i] + 1]; k++) {
            if (t->adds[k].normalized != norm) continue;
            size_t l;
            const uint8_t *s = tok(t, t->adds[k].id, &l);
            if (l <= b - i && !memcmp(p + i, s, l)) {
                *id = t->adds[k].id;
                *len = l;
                return i;
            }
        }
    }
    return b;
}

/* p[a..b): the normalized added tokens split off, the rest encoded */
static int encode_gap(const TxtHf *t, Enc *e, const uint8_t *p, size_t a, size_t b) {
    while (a < b) {
        int id;
        size_t l = 0, at = find_added(t, p, a, b, 1, &id, &l);
        if (encode_segment(t, e, p + a, at - a, a == 0) != AG_OK) return AG_ERR_NOMEM;
        if (at == b) break;
        if (emit(e, id) != AG_OK) return AG_ERR_NOMEM;
        a = at + l;
    }
    return AG_OK;
}

int txt_hf_encode_alloc(const TxtHf *t, const void *text, size_t n, int **ids, size_t *n_ids,
                        const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(text || n == 0, "txt_hf_encode_alloc: argument 'text' is NULL");
    AG_CHECK_ARG(ids);
    AG_CHECK_ARG(n_ids);
    if (!label) label = "txt_hf_encode";
    *ids = NULL;
    *n_ids = 0;
    const uint8_t *p = text;
    if (n >= ((size_t)1 << 31))
        return FAIL(AG_ERR_ARG, "%s: a text of %zu bytes: at most 2 GiB", label, n);
    for (size_t i = 0; i < n;) {
        size_t l = utf8_valid(p + i, n - i);
        if (!l)
            return FAIL(AG_ERR_FORMAT,
                        "%s: byte 0x%02x at offset %zu is not valid UTF-8 (the tokenizers library "
                        "encodes only text)",
                        label, p[i], i);
        if (t->nfc && l > 1) {
            size_t ll;
            uint32_t c = utf8_get(p + i, n - i, &ll);
            if (in_ranges(txt_hf_nfc_unsafe, txt_hf_nfc_unsafe_n, c))
                return FAIL(AG_ERR_ARG,
                            "%s: U+%04X at offset %zu may change under the tokenizer's NFC "
                            "normalizer, which attograd does not implement",
                            label, c, i);
        }
        i += l;
    }
    Enc e = {0};
    int rc = AG_OK;
    size_t a = 0;
    while (rc == AG_OK && a <= n) {
        int id;
        size_t l = 0, at = find_added(t, p, a, n, 0, &id, &l);
        if (encode_gap(t, &e, p, a, at) != AG_OK) rc = AG_ERR_NOMEM;
        if (at == n || rc != AG_OK) break;
        if (emit(&e, id) != AG_OK) rc = AG_ERR_NOMEM;
        a = at + l;
    }
    free(e.sym);
    free(e.heap);
    free(e.buf);
    if (rc == AG_OK && !e.ids && !(e.ids = malloc(sizeof *e.ids))) rc = AG_ERR_NOMEM; /* none */
    if (rc != AG_OK) {
        free(e.ids);
        return FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    }
    *ids = e.ids;
    *n_ids = e.n;
    return AG_OK;
}

/* ---- decoding ---- */

static int hexval(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int txt_hf_decode_alloc(const TxtHf *t, const int *ids, size_t n, char **out, size_t *len,
                        const char *label) {
    AG_CHECK_ARG(t);
    AG_CHECK(ids || n == 0, "txt_hf_decode_alloc: argument 'ids' is NULL");
    AG_CHECK_ARG(out);
    AG_CHECK_ARG(len);
    if (!label) label = "txt_hf_decode";
    *out = NULL;
    *len = 0;
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return FAIL(AG_ERR_RANGE, "%s: id %d at %zu is outside the vocabulary [0, %d)", label,
                        ids[i], i, t->n);
        total += t->off[ids[i] + 1] - t->off[ids[i]];
    }
    char *s = malloc(total);
    if (!s) return FAIL(AG_ERR_NOMEM, "%s: out of memory", label);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l;
        const uint8_t *p = tok(t, ids[i], &l);
        if (t->kind == HF_BYTELEVEL) {
            memcpy(s + k, p, l);
            k += l;
            continue;
        }
        size_t start = k;
        if (t->dec_byte_fallback && l == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' &&
            hexval(p[3]) >= 0 && hexval(p[4]) >= 0) {
            s[k++] = (char)(hexval(p[3]) * 16 + hexval(p[4]));
            continue;
        }
        for (size_t j = 0; j < l;) {
            if (t->dec_replace && j + 3 <= l && !memcmp(p + j, SPACE_MARK, 3))
                s[k++] = ' ', j += 3;
            else
                s[k++] = (char)p[j++];
        }
        if (i == 0 && t->dec_meta_strip && k > start && s[start] == ' ')
            memmove(s + start, s + start + 1, --k - start);
    }
    if (t->dec_strip && k && s[0] == ' ') memmove(s, s + 1, --k);
    s[k] = 0;
    *out = s;
    *len = k;
    return AG_OK;
}
