/* bpe.c: BPE training and encoding on any text. The first input byte picks the vocabulary size
 * (256 + 0..255) and the split (its low bit); the rest is the training text. The trained
 * tokenizer must round-trip the text and its reverse (decode(encode(s)) == s, with and without a
 * special token that occurs in the text), use fewer ids than bytes only through its merges, and
 * train again to the same merges (determinism). */
#include <string.h>

#include "fuzz.h"

static void round_trip(const TxtTokenizer *t, const uint8_t *s, size_t n, TxtSpecialMode mode) {
    int *ids;
    size_t n_ids;
    FUZZ_CHECK(txt_encode_alloc(t, s, n, mode, &ids, &n_ids, "fuzz") == AG_OK, "encode: %s",
               ag_last_error());
    FUZZ_CHECK(n_ids <= n, "%zu ids for %zu bytes", n_ids, n);
    if (txt_n_merges(t) == 0 && mode == TXT_SPECIAL_ORDINARY)
        FUZZ_CHECK(n_ids == n, "no merges, yet %zu ids for %zu bytes", n_ids, n);
    char *back;
    size_t len;
    FUZZ_CHECK(txt_decode_alloc(t, ids, n_ids, &back, &len, "fuzz") == AG_OK, "decode: %s",
               ag_last_error());
    FUZZ_CHECK(len == n && memcmp(back, s, n) == 0, "decode(encode(s)) != s");
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int vocab = 256 + data[0];
    TxtSplit split = data[0] & 1 ? TXT_SPLIT_GPT2 : TXT_SPLIT_NONE;
    const uint8_t *text = data + 1;
    size_t n = size - 1;
    TxtTokenizer *t, *t2;
    FUZZ_CHECK(txt_bpe_train(text, n, vocab, split, "fuzz", &t) == AG_OK, "train: %s",
               ag_last_error());
    FUZZ_CHECK(txt_vocab_size(t) <= vocab, "%d ids, asked %d", txt_vocab_size(t), vocab);
    FUZZ_CHECK(txt_bpe_train(text, n, vocab, split, "fuzz", &t2) == AG_OK, "train again");
    size_t n1, n2;
    uint8_t *b1 = txt_to_bytes(t, &n1), *b2 = txt_to_bytes(t2, &n2);
    FUZZ_CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0, "training twice gives other merges");
    free(b1);
    free(b2);
    txt_free(t2);
    /* a special token: the input's first bytes, when they make a NUL-free string */
    char sp[9] = {0};
    for (size_t i = 0; i < 8 && i < n && text[i]; i++) sp[i] = (char)text[i];
    if (sp[0]) FUZZ_CHECK(txt_add_special(t, sp) >= 0, "add_special: %s", ag_last_error());
    uint8_t *rev = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) rev[i] = text[n - 1 - i];
    round_trip(t, text, n, TXT_SPECIAL_ORDINARY);
    round_trip(t, text, n, TXT_SPECIAL_ALLOW);
    round_trip(t, rev, n, TXT_SPECIAL_ALLOW);
    free(rev);
    txt_free(t);
    return 0;
}
