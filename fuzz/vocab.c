/* vocab.c: the vocabulary loader (txt_vocab_pair_load), fed the bytes a checkpoint keeps in
 * meta.extra. What it accepts must save and load back to the same words with the same ids,
 * and every word must be found at its id. The input as a sentence then goes through the
 * tokenizer (with the hints for unknown words), the sentence count and the UTF-8 check. */
#include <string.h>

#include "fuzz.h"
#include "translate.h"

static void check_same(const TxtVocab *a, const TxtVocab *b) {
    FUZZ_CHECK(a->n == b->n, "%d words, then %d", a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        FUZZ_CHECK(strcmp(a->words[i], b->words[i]) == 0, "word %d differs", i);
        if (i >= TXT_N_SPECIAL)
            FUZZ_CHECK(txt_vocab_find(a, a->words[i], strlen(a->words[i])) == i, "word %d", i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TxtVocab src, tgt, src2, tgt2;
    int rc = txt_vocab_pair_load((const char *)data, size, &src, &tgt, "fuzz");
    if (rc != AG_OK) {
        fuzz_check_failure(rc, "fuzz");
        return 0;
    }
    FUZZ_CHECK(src.n <= TXT_VOCAB_MAX_WORDS && tgt.n <= TXT_VOCAB_MAX_WORDS, "%d, %d words", src.n,
               tgt.n);
    size_t len;
    char *bytes = txt_vocab_pair_save(&src, &tgt, &len);
    FUZZ_CHECK(len <= size, "saved %zu bytes from %zu", len, size);
    rc = txt_vocab_pair_load(bytes, len, &src2, &tgt2, "saved");
    FUZZ_CHECK(rc == AG_OK, "what was loaded does not load back: %s", ag_last_error());
    check_same(&src, &src2);
    check_same(&tgt, &tgt2);
    /* the input as a sentence: ids in range, and detokenizing fits its own count */
    int ids[64], n_unk = 0;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    /* the unknown words' hints go to /dev/null: they must only not crash or read past a word */
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    int n = txt_vocab_tokenize(&src, text, ids, 64, &n_unk, sink, "fuzz: ");
    for (int i = 0; i < n && i < 64; i++) FUZZ_CHECK(ids[i] >= TXT_UNK && ids[i] < src.n, "id");
    FUZZ_CHECK(txt_count_sentences(text) <= n, "more sentences than words");
    size_t bad = size;
    if (!txt_utf8_check((const char *)data, size, &bad))
        FUZZ_CHECK(bad < size && (data[bad] >= 0x80), "bad byte %zu of %zu", bad, size);
    char out[256];
    size_t need = txt_vocab_detokenize(&src, ids, n < 64 ? n : 64, out, sizeof out);
    FUZZ_CHECK(strlen(out) == (need < sizeof out ? need : sizeof out - 1), "detokenize");
    free(text);
    free(bytes);
    txt_vocab_free(&src);
    txt_vocab_free(&tgt);
    txt_vocab_free(&src2);
    txt_vocab_free(&tgt2);
    return 0;
}
