/* hf_internal.h: what the files of a Hugging Face tokenizer share: its layout (TxtHf, built by
 * hf_tokenizer.c, used by hf_encode.c), small helpers on it and on UTF-8, and the Unicode tables
 * of hf_unicode.c (generated). Not installed. Read next: hf_tokenizer.c. */
#ifndef ATTOGRAD_HF_INTERNAL_H
#define ATTOGRAD_HF_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text_internal.h"
extern const uint32_t txt_hf_letter[][2], txt_hf_number[][2], txt_hf_space[][2],
    txt_hf_nfc_unsafe[][2];
extern const int txt_hf_letter_n, txt_hf_number_n, txt_hf_space_n, txt_hf_nfc_unsafe_n;

/* ---- the layout of a tokenizer ---- */
enum { HF_BYTELEVEL = 1, HF_SPM = 2 };
enum { META_NEVER = 0, META_FIRST = 1, META_ALWAYS = 2 };

typedef struct {
    int id;
    int normalized;
} HfAdded;

struct TxtHf {
    int kind;
    int n;         /* ids 0 .. n-1, every one present */
    uint8_t *blob; /* each id's bytes: byte-level decoded, a piece as written, an added content */
    size_t blob_len, blob_cap;
    size_t *off;      /* (n + 1) */
    uint8_t *added;   /* per id: 0 a model token, 1 an added token, 2 an added special token */
    uint8_t *in_hash; /* per id: reachable by the model (its bytes are a key of the hash) */
    int32_t *hash;    /* open addressing over the model tokens' bytes: id + 1, 0 empty */
    size_t hcap;
    TxtPairMap rank; /* (left, right) -> rank */
    int32_t *merged; /* (n_merges) the id each merge makes */
    int n_merges;
    int byte_id[256]; /* byte-level: the id of each byte's character; SPM: of <0xXX>; else -1 */
    int unk, fuse_unk, byte_fallback, ignore_merges;
    HfAdded *adds; /* sorted by first byte, then longest first */
    int n_adds;
    int add_first[257];
    /* normalizer and pre-tokenizer */
    int nfc, prepend_norm, replace_norm;
    int add_prefix_space, use_regex, digits; /* digits: 0 none, 1 individual, 2 runs */
    int own_split; /* attograd's TXT_SPLIT_GPT2 as a Split before ByteLevel (hf_write.c) */
    int meta, meta_prepend, meta_split;
    /* SPM decoder */
    int dec_replace, dec_byte_fallback, dec_strip, dec_meta_strip;
    char *json; /* the tokenizer.json text read (txt_hf_json), json_len bytes */
    size_t json_len;
};

#define SPACE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's space */

static inline uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static inline const uint8_t *tok(const TxtHf *t, int id, size_t *len) {
    *len = t->off[id + 1] - t->off[id];
    return t->blob + t->off[id];
}

/* the id whose model bytes are p[0..n), or -1 */
static inline int lookup(const TxtHf *t, const uint8_t *p, size_t n) {
    if (!t->hcap) return -1;
    for (size_t i = fnv(p, n) & (t->hcap - 1);; i = (i + 1) & (t->hcap - 1)) {
        int32_t v = t->hash[i];
        if (!v) return -1;
        size_t l;
        const uint8_t *q = tok(t, v - 1, &l);
        if (l == n && memcmp(p, q, n) == 0) return v - 1;
    }
}

/* one UTF-8 character at p[0..n), already validated: its code point, *len its bytes */
static inline uint32_t utf8_get(const uint8_t *p, size_t n, size_t *len) {
    (void)n;
    if (p[0] < 0x80) return *len = 1, p[0];
    if (p[0] < 0xE0) return *len = 2, ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    if (p[0] < 0xF0)
        return *len = 3,
               ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    return *len = 4, ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
                         ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

/* the length of a valid UTF-8 character at p[0..n) (Rust's str rules: no overlong form, no
 * surrogate, nothing past U+10FFFF), or 0 */
static inline size_t utf8_valid(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && p[1] >= 0x90) return 0; /* past U+10FFFF */
    return k;
}

static inline int in_ranges(const uint32_t (*r)[2], int n, uint32_t c) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < r[mid][0])
            hi = mid - 1;
        else if (c > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

enum { C_L, C_N, C_S, C_O };
static inline int cp_class(uint32_t c) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return C_L;
        if (c >= '0' && c <= '9') return C_N;
        if (c == ' ' || (c >= 9 && c <= 13)) return C_S;
        return C_O;
    }
    if (in_ranges(txt_hf_letter, txt_hf_letter_n, c)) return C_L;
    if (in_ranges(txt_hf_number, txt_hf_number_n, c)) return C_N;
    if (in_ranges(txt_hf_space, txt_hf_space_n, c)) return C_S;
    return C_O;
}

/* GPT-2's byte-level alphabet: the character that stands for byte b (bytes_to_unicode) */
uint32_t txt_hf_byte_char_(int b);
/* GPT-2's split pattern over code points: the length of the chunk at p[0..n), valid UTF-8 */
size_t txt_hf_gpt2_chunk_(const uint8_t *p, size_t n);
/* attograd's TXT_SPLIT_GPT2 as a regex of the tokenizers library (hf_write.c) */
extern const char txt_hf_attograd_split_[];
#endif
