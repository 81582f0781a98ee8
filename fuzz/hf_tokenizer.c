/* hf_tokenizer.c: a Hugging Face tokenizer.json (src/text/hf_tokenizer.c) on any bytes: the JSON
 * (jansson), every key's type and value, the ids, the merges and the added tokens. A refusal
 * must name the file; a tokenizer it accepts must encode a few texts and the input itself (when
 * it is UTF-8) into ids inside its vocabulary, the same ids twice, and decode them. */
#include <string.h>

#include "fuzz.h"

static void encode_decode(const TxtHf *t, const char *s, size_t n) {
    int *ids, *again;
    size_t n_ids, n_again;
    int rc = txt_hf_encode_alloc(t, s, n, &ids, &n_ids, "text");
    if (rc != AG_OK) {
        /* only a text that is not UTF-8, or one NFC might change, is refused */
        FUZZ_CHECK(rc == AG_ERR_FORMAT || rc == AG_ERR_ARG, "encode: %s", ag_last_error());
        fuzz_check_failure(rc, "text: ");
        return;
    }
    FUZZ_CHECK(txt_hf_encode_alloc(t, s, n, &again, &n_again, "text") == AG_OK, "second encode");
    FUZZ_CHECK(ids && again, "no array for %zu ids", n_ids);
    FUZZ_CHECK(n_again == n_ids && !memcmp(ids, again, n_ids * sizeof *ids), "not deterministic");
    for (size_t i = 0; i < n_ids; i++)
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < txt_hf_vocab_size(t), "id %d of %d", ids[i],
                   txt_hf_vocab_size(t));
    char *back;
    size_t len;
    FUZZ_CHECK(txt_hf_decode_alloc(t, ids, n_ids, &back, &len, "ids") == AG_OK, "decode: %s",
               ag_last_error());
    FUZZ_CHECK(strlen(back) <= len, "no NUL at the end");
    free(back);
    free(ids);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TxtHf *t = (TxtHf *)&t;
    int rc = txt_hf_from_json((const char *)data, size, "tokenizer.json", &t);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, "tokenizer.json: ");
        FUZZ_CHECK(t == NULL, "a refused input returned a tokenizer");
        return 0;
    }
    FUZZ_CHECK(txt_hf_vocab_size(t) >= 0 && txt_hf_vocab_size(t) <= TXT_MAX_VOCAB, "%d ids",
               txt_hf_vocab_size(t));
    static const char *const texts[] = {"Hello world, it's  a test\t\n",
                                        "caf\xc3\xa9 \xe6\x97\xa5 1234",
                                        "<|endoftext|>x<s>",
                                        "",
                                        " ",
                                        "\xf0\x9f\x98\x80  \x01"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
        encode_decode(t, texts[k], strlen(texts[k]));
    encode_decode(t, (const char *)data, size < 4096 ? size : 4096);
    txt_hf_free(t);
    return 0;
}
