/* gpt.c: attograd-gpt's checkpoint, fed any file: hf_model_load (src/hf/model.c: the
 * checkpoint, its configuration, weights and tokenizer), then what sample and eval do with the
 * model it loads: nn_gpt_generate draws a few tokens, nn_gpt_loss_over gives the loss of a window.
 * A model whose values overflow (finite weights, non-finite logits) must come back as
 * AG_ERR_RANGE with a message, never abort in nn_sample; a finite loss or a NaN with the
 * reason. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "gpt_cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    HfModel g;
    int rc = hf_model_load(path, &g);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, path);
        return 0;
    }
    int V = g.m.cfg.vocab_size, T = g.m.cfg.block_size < 6 ? g.m.cfg.block_size : 6;
    FUZZ_CHECK(V >= 1 && T >= 1 && g.text.tok && txt_vocab_size(g.text.tok) == V,
               "vocab %d, block %d", V, g.m.cfg.block_size);
    int ids[16];
    for (int i = 0; i < 16; i++) ids[i] = i % V;
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ag_check_finite(t, 1);
    Rng r;
    rng_seed(&r, 1);
    NnSampling s = {.temperature = 1, .top_k = 0, .top_p = 1};
    int got = nn_gpt_generate(t, &g.m, ids, 1, 3, &s, &r, NULL, NULL);
    FUZZ_CHECK(got == 3 || (got == AG_ERR_RANGE && strstr(ag_last_error(), "overflowed")),
               "nn_gpt_generate: %d: %s", got, ag_last_error());
    for (int i = 0; i < 16; i++) ids[i] = i % V;
    int64_t n_pred;
    double loss = nn_gpt_loss_over(t, &g.m, ids, (size_t)T + 1, 2, &n_pred);
    FUZZ_CHECK(isfinite(loss) ? loss >= 0 && n_pred == T
                              : strstr(ag_last_error(), "the loss of tokens") != NULL,
               "nn_gpt_loss_over: %g over %lld tokens: %s", loss, (long long)n_pred,
               ag_last_error());
    ag_tape_free(t);
    arena_free(step);
    hf_model_free(&g);
    return 0;
}
