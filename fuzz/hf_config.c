/* hf_config.c: a GPT-2's config.json (src/hf/config.c) on any text: the JSON (jansson), each
 * key's table, type and range, the checks between keys, then nn_gpt_check_config. A
 * configuration it accepts must be one nn_gpt_check_config accepts, of a GPT-2 (learned
 * positions, LayerNorm, GELU, biases); a refusal must name the file. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GptConfig c;
    int rc = hf_gpt2_config_from_text((const char *)data, size, "config.json", &c);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, "config.json: ");
        return 0;
    }
    FUZZ_CHECK(nn_gpt_check_config(&c, NULL) == AG_OK, "accepted, but: %s", ag_last_error());
    FUZZ_CHECK(c.style == NN_GPT2 && c.pos == NN_GPT_POS_LEARNED && c.norm == NN_GPT_NORM_LAYER &&
                   c.mlp == NN_GPT_MLP_GELU && c.bias == NN_GPT_BIAS_ON && !c.post_ln,
               "not a GPT-2");
    FUZZ_CHECK(c.dropout >= 0 && c.dropout < 1 && c.norm_eps > 0, "dropout %g, eps %g", c.dropout,
               c.norm_eps);
    return 0;
}
