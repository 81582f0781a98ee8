/* tokenizer.c: the saved-tokenizer reader (txt_from_bytes), fed any bytes (what a checkpoint's
 * extra bytes or a tokenizer file may hold). What it accepts must save back to exactly the same
 * bytes (the format has one spelling for each tokenizer), keep every id within the limits, and
 * round-trip text: decode(encode(s)) == s, with special tokens allowed or not, for s the input
 * itself (any bytes; a char tokenizer refuses bytes it does not know, naming them). */
#include <string.h>

#include "fuzz.h"

static void round_trip(const TxtTokenizer *t, const uint8_t *s, size_t n, TxtSpecialMode mode) {
    int *ids;
    size_t n_ids;
    int rc = txt_encode_alloc(t, s, n, mode, &ids, &n_ids, "fuzz");
    if (rc != AG_OK) {
        FUZZ_CHECK(txt_kind(t) == TXT_CHAR && rc == AG_ERR_RANGE, "encode failed: %s",
                   ag_last_error());
        fuzz_check_failure(rc, "fuzz");
        return;
    }
    FUZZ_CHECK(n_ids <= n, "%zu ids for %zu bytes", n_ids, n);
    char *back;
    size_t len;
    FUZZ_CHECK(txt_decode_alloc(t, ids, n_ids, &back, &len, "fuzz") == AG_OK, "decode: %s",
               ag_last_error());
    FUZZ_CHECK(len == n && memcmp(back, s, n) == 0, "decode(encode(s)) != s");
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TxtTokenizer *t;
    int rc = txt_from_bytes(data, size, "fuzz", &t);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, "fuzz");
        FUZZ_CHECK(t == NULL, "a refused input returned a tokenizer");
        return 0;
    }
    FUZZ_CHECK(txt_vocab_size(t) <= TXT_MAX_VOCAB, "%d ids", txt_vocab_size(t));
    size_t total = 0;
    for (int id = 0; id < txt_vocab_size(t); id++) {
        size_t len;
        txt_token_bytes(t, id, &len);
        FUZZ_CHECK(len >= 1 && len <= TXT_MAX_TOKEN_LEN, "id %d of %zu bytes", id, len);
        total += len;
    }
    FUZZ_CHECK(total <= TXT_MAX_TOKEN_BYTES, "%zu token bytes", total);
    size_t n;
    uint8_t *b = txt_to_bytes(t, &n);
    FUZZ_CHECK(n == size && memcmp(b, data, n) == 0, "saved again: other bytes (%zu, %zu)", n,
               size);
    free(b);
    round_trip(t, data, size, TXT_SPECIAL_ORDINARY);
    round_trip(t, data, size, TXT_SPECIAL_ALLOW);
    txt_free(t);
    return 0;
}
