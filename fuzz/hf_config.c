/* hf_config.c: a config.json (src/hf/config.c) on any text, read as a GPT-2's
 * (hf_gpt2_config_from_text) and as any family's (hf_config_from_text): the JSON (jansson), each
 * key's table, type and range, the checks between keys, then nn_gpt_check_config. A
 * configuration either accepts must be one nn_gpt_check_config accepts, of its family (GPT-2:
 * learned positions, LayerNorm, GELU (exact or tanh) or ReLU, biases; LLaMA: RoPE, RMSNorm, SwiGLU, no biases); what
 * the GPT-2 reader accepts the general one reads the same; a refusal must name the file. */
#include <string.h>

#include "fuzz.h"

/* the same model: every field (memcmp would also compare the struct's padding, which a struct
 * copy need not keep) */
static int same_config(const GptConfig *a, const GptConfig *b) {
    return a->style == b->style && a->vocab_size == b->vocab_size &&
           a->block_size == b->block_size && a->n_layer == b->n_layer && a->n_head == b->n_head &&
           a->n_embd == b->n_embd && a->n_kv_head == b->n_kv_head &&
           memcmp(&a->dropout, &b->dropout, sizeof a->dropout) == 0 && a->no_bias == b->no_bias &&
           a->untied == b->untied && a->ffn_hidden == b->ffn_hidden &&
           memcmp(&a->rope_base, &b->rope_base, sizeof a->rope_base) == 0 &&
           memcmp(&a->norm_eps, &b->norm_eps, sizeof a->norm_eps) == 0 && a->pos == b->pos &&
           a->norm == b->norm && a->mlp == b->mlp && a->bias == b->bias &&
           a->post_ln == b->post_ln && a->parallel_residual == b->parallel_residual &&
           a->rotary_dim == b->rotary_dim;
}

/* any family's reader: its invariants */
static void any_family(const uint8_t *data, size_t size, const GptConfig *gpt2) {
    GptConfig c;
    memset(&c, 0, sizeof c);
    int rc = hf_config_from_text((const char *)data, size, "config.json", &c);
    if (rc != AG_OK) {
        FUZZ_CHECK(!gpt2, "the GPT-2 reader accepted what hf_config_from_text refuses: %s",
                   ag_last_error());
        fuzz_check_failure(rc, "config.json: ");
        return;
    }
    FUZZ_CHECK(nn_gpt_check_config(&c, NULL) == AG_OK, "accepted, but: %s", ag_last_error());
    if (gpt2) FUZZ_CHECK(same_config(&c, gpt2), "the two readers read different models");
    if (c.style == NN_LLAMA)
        FUZZ_CHECK(c.pos == NN_GPT_POS_ROPE && c.norm == NN_GPT_NORM_RMS &&
                       c.mlp == NN_GPT_MLP_SWIGLU && c.bias == NN_GPT_BIAS_OFF && c.no_bias &&
                       !c.post_ln && c.rope_base > 0 && c.norm_eps > 0,
                   "not a LLaMA");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GptConfig c;
    memset(&c, 0, sizeof c);
    int rc = hf_gpt2_config_from_text((const char *)data, size, "config.json", &c);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, "config.json: ");
        any_family(data, size, NULL);
        return 0;
    }
    any_family(data, size, &c);
    FUZZ_CHECK(nn_gpt_check_config(&c, NULL) == AG_OK, "accepted, but: %s", ag_last_error());
    FUZZ_CHECK(c.style == NN_GPT2 && c.pos == NN_GPT_POS_LEARNED && c.norm == NN_GPT_NORM_LAYER &&
                   (c.mlp == NN_GPT_MLP_GELU || c.mlp == NN_GPT_MLP_GELU_TANH ||
                    c.mlp == NN_GPT_MLP_RELU) &&
                   c.bias == NN_GPT_BIAS_ON && !c.post_ln,
               "not a GPT-2");
    FUZZ_CHECK(c.dropout >= 0 && c.dropout < 1 && c.norm_eps > 0, "dropout %g, eps %g", c.dropout,
               c.norm_eps);
    return 0;
}
