/* prompts.c: a --prompts file of attograd-gpt's lens commands (gp_read_rows, examples/gpt/lens.c),
 * fed any bytes, on a tiny model with a character tokenizer of "ab c\n" and block_size 8. What it
 * accepts holds no NUL byte (which would have cut the text there), every row as long as the
 * first and at most block_size tokens, each id in the vocabulary, and one row per line. */
#include <string.h>

#include "fuzz.h"
#include "gpt_cli.h"

static HfModel model;

static void make_model(void) {
    static const char chars[] = "ab c\n";
    model.text.tok = txt_char_new(chars, sizeof chars - 1);
    model.arena = arena_new("params", 0);
    GptConfig c = {.vocab_size = txt_vocab_size(model.text.tok),
                   .block_size = 8,
                   .n_layer = 1,
                   .n_head = 1,
                   .n_embd = 8};
    Rng r;
    rng_seed(&r, 1);
    nn_gpt_init(&model.m, model.arena, &r, &c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!model.text.tok) make_model();
    const char *path = fuzz_file(data, size);
    LensRows r;
    int rc = gp_read_rows(&model, NULL, path, &r);
    if (rc != AG_OK) {
        FUZZ_CHECK(r.ids == NULL && r.B == 0, "a failure left rows");
        fuzz_check_failure(rc, path);
        return 0;
    }
    FUZZ_CHECK(memchr(data, 0, size) == NULL, "a NUL byte accepted");
    FUZZ_CHECK(r.B >= 1 && r.T >= 1 && r.T <= 8, "rows (%d, %d)", r.B, r.T);
    size_t lines = 0;
    for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
    lines += size > 0 && data[size - 1] != '\n';
    FUZZ_CHECK((size_t)r.B == lines, "%d rows from %zu lines", r.B, lines);
    for (int i = 0; i < r.B * r.T; i++)
        FUZZ_CHECK(r.ids[i] >= 0 && r.ids[i] < txt_vocab_size(model.text.tok), "id %d", r.ids[i]);
    free(r.ids);
    return 0;
}
