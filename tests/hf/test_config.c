/* test_config.c: a GPT-2's config.json into a GptConfig (src/hf/config.c): the configurations
 * transformers itself wrote (tests/fixtures/hf/, by tests/hf/hf_fixtures.py: a tiny GPT-2 with
 * the exact GELU, and GPT2Config's defaults, GPT-2 small's with "gelu_new"), then one change at a
 * time to the tiny one: every key attograd cannot honour refused naming the key and the value. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

#define TINY "tests/fixtures/hf/tiny_gelu"

Test(hf_config, reads_the_configuration_transformers_writes) {
    GptConfig c;
    static const char *const how[] = {TINY, TINY "/", TINY "/config.json"};
    for (int k = 0; k < 3; k++) {
        memset(&c, 0xff, sizeof c);
        cr_assert_eq(hf_gpt2_config(how[k], &c), AG_OK, "%s: %s", how[k], ag_last_error());
        cr_assert_eq(c.style, NN_GPT2);
        cr_assert_eq(c.vocab_size, 96);
        cr_assert_eq(c.block_size, 32);
        cr_assert_eq(c.n_embd, 16);
        cr_assert_eq(c.n_layer, 2);
        cr_assert_eq(c.n_head, 4);
        cr_assert_eq(c.n_kv_head, 0);
        cr_assert_eq(c.ffn_hidden, 0);
        cr_assert_eq(c.dropout, 0.1);
        cr_assert_eq(c.norm_eps, 1e-5);
        cr_assert_eq(c.untied, 0);
        cr_assert(c.pos == NN_GPT_POS_LEARNED && c.norm == NN_GPT_NORM_LAYER &&
                  c.mlp == NN_GPT_MLP_GELU && c.bias == NN_GPT_BIAS_ON && c.post_ln == 0);
        cr_assert_eq(nn_gpt_check_config(&c, NULL), AG_OK);
    }
}

Test(hf_config, reads_gpt2s_own_tanh_gelu) {
    GptConfig c = {0};
    cr_assert_eq(hf_gpt2_config("tests/fixtures/hf/gpt2_default", &c), AG_OK, "%s",
                 ag_last_error());
    cr_assert(c.mlp == NN_GPT_MLP_GELU_TANH && c.n_layer == 12 && c.n_embd == 768 &&
              c.vocab_size == 50257 && c.block_size == 1024);
    /* the other spellings of the activations attograd computes */
    static const struct {
        const char *act;
        NnGptMlp mlp;
    } acts[] = {{"gelu_pytorch_tanh", NN_GPT_MLP_GELU_TANH},
                {"gelu_new", NN_GPT_MLP_GELU_TANH},
                {"gelu", NN_GPT_MLP_GELU},
                {"relu", NN_GPT_MLP_RELU}};
    for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"activation_function\": \"%s\"}",
                 acts[k].act);
        memset(&c, 0, sizeof c);
        cr_assert_eq(hf_gpt2_config_from_text(text, strlen(text), "t", &c), AG_OK, "%s",
                     ag_last_error());
        cr_assert_eq(c.mlp, acts[k].mlp, "%s", acts[k].act);
    }
    /* absent: transformers' default, gelu_new */
    memset(&c, 0, sizeof c);
    cr_assert_eq(hf_gpt2_config_from_text("{\"model_type\": \"gpt2\"}", 22, "t", &c), AG_OK, "%s",
                 ag_last_error());
    cr_assert_eq(c.mlp, NN_GPT_MLP_GELU_TANH);
}

/* the tiny configuration with "key": value replaced (or added; value NULL: removed) */
static char *edited(const char *key, const char *value) {
    size_t n;
    char *text = ts_read_text(TINY "/config.json", &n);
    char *out = malloc(n + strlen(key) + (value ? strlen(value) : 0) + 16);
    char pat[128];
    snprintf(pat, sizeof pat, "\n  \"%s\": ", key);
    char *at = strstr(text, pat);
    if (at) {
        char *end = strchr(at + strlen(pat), '\n'); /* a one-line value, or a list's lines */
        if (at[strlen(pat)] == '[' && end == at + strlen(pat) + 1)
            end = strchr(strstr(at, "\n  ]") + 1, '\n');
        if (end[-1] == ',') end--;
        size_t head = (size_t)(at - text);
        memcpy(out, text, head);
        if (value) {
            sprintf(out + head, "%s%s%s", pat, value, end);
        } else { /* drop the line and a comma before it when it was the last */
            strcpy(out + head, end + (*end == ',' ? 1 : 0));
        }
    } else { /* add it first */
        sprintf(out, "{\n  \"%s\": %s,%s", key, value, text + 1);
    }
    free(text);
    return out;
}

Test(hf_config, refuses_what_attograd_cannot_compute_naming_the_key_and_value) {
    static const struct {
        const char *key, *value, *msg;
    } cases[] = {
        {"activation_function", "\"silu\"",
         "\"activation_function\": \"silu\": not supported: attograd's GPT-2 MLP computes "
         "\"gelu\", \"gelu_new\""},
        {"activation_function", "\"gelu_fast\"", "its constants are rounded"},
        {"model_type", "\"llama\"", "\"model_type\": \"llama\": not a GPT-2 configuration"},
        {"model_type", NULL, "\"model_type\": (absent): a configuration names its model type"},
        {"rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}",
         "\"rope_scaling\": {\"type\":\"linear\",\"factor\":2.0}: not a key of a GPT-2 "
         "configuration attograd knows"},
        {"sliding_window", "4096", "\"sliding_window\": 4096: not a key"},
        {"scale_attn_by_inverse_layer_idx", "true", "attograd computes only false"},
        {"scale_attn_weights", "false",
         "\"scale_attn_weights\": false: attograd computes only true"},
        {"add_cross_attention", "true",
         "\"add_cross_attention\": true: attograd computes only false"},
        {"pruned_heads", "{\"0\": [1]}",
         "\"pruned_heads\": {\"0\":[1]}: attograd computes only {}"},
        {"quantization_config", "{\"quant_method\": \"gptq\", \"bits\": 4}",
         "quantized weights are not supported"},
        {"n_embd", "16.0", "\"n_embd\": 16.0: must be an integer in [1, 2147483647]"},
        {"n_embd", "\"16\"", "must be an integer"},
        {"n_layer", "0", "\"n_layer\": 0: must be an integer"},
        {"vocab_size", "4294967296", "\"vocab_size\": 4294967296: must be an integer"},
        {"n_head", "3", "tests/fixtures/hf/tiny_gelu/config.json: "},
        {"n_ctx", "64", "\"n_ctx\": 64: differs from n_positions 32"},
        {"n_embd", "2147483647",
         "\"n_embd\": 2147483647: outside [1, 65536], what attograd's GPT accepts (as in its "
         "checkpoints)"},
        {"n_layer", "300", "\"n_layer\": 300: outside [1, 256]"},
        {"layer_norm_epsilon", "0.75", "\"layer_norm_epsilon\": 0.75: outside [0, 0.5]"},
        {"attn_pdrop", "0.0",
         "\"resid_pdrop\" 0.1, \"embd_pdrop\" 0.1 and \"attn_pdrop\" 0 differ"},
        {"resid_pdrop", "1.5", "\"resid_pdrop\": 1.5: must be a number in [0, 1)"},
        {"layer_norm_epsilon", "0", "\"layer_norm_epsilon\": 0: must be a number in (0, 1)"},
        {"tie_word_embeddings", "1", "\"tie_word_embeddings\": 1: must be true or false"},
        {"n_inner", "-4", "\"n_inner\": -4: must be an integer"},
        {"architectures", "[\"GPT2DoubleHeadsModel\"]",
         "\"architectures\": [\"GPT2DoubleHeadsModel\"]: only \"GPT2LMHeadModel\" is supported"},
        {"vocab_size", "96, \"vocab_size\": 97", "not valid JSON: duplicate object key"},
    };
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "hf");
    ts_join(path, dir, "config.json");
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *text = edited(cases[k].key, cases[k].value);
        GptConfig c = {0};
        int rc = hf_gpt2_config_from_text(text, strlen(text), TINY "/config.json", &c);
        cr_assert_eq(rc, AG_ERR_FORMAT, "%s = %s: %d %s\n%s", cases[k].key, cases[k].value, rc,
                     ag_last_error(), text);
        cr_assert(strstr(ag_last_error(), cases[k].msg), "%s: '%s' lacks '%s'", cases[k].key,
                  ag_last_error(), cases[k].msg);
        cr_assert(strncmp(ag_last_error(), TINY "/config.json: ", strlen(TINY) + 14) == 0);
        cr_assert_eq(c.vocab_size, 0);
        /* and through a file: the same, naming the file */
        ts_write_text(path, text);
        cr_assert_eq(hf_gpt2_config(path, &c), AG_ERR_FORMAT);
        cr_assert(strncmp(ag_last_error(), path, strlen(path)) == 0, "%s", ag_last_error());
        free(text);
    }
    /* changes that are accepted: a key that does not change the logits, untied, n_inner */
    static const char *const fine[][2] = {
        {"use_cache", "false"},
        {"bos_token_id", "null"},
        {"initializer_range", "0.5"},
        {"tie_word_embeddings", "false"},
        {"n_inner", "48"},
        {"n_ctx", "32"},
        {"task_specific_params", "{\"x\": {\"do_sample\": true}}"}};
    for (size_t k = 0; k < sizeof fine / sizeof *fine; k++) {
        char *text = edited(fine[k][0], fine[k][1]);
        GptConfig c;
        cr_assert_eq(hf_gpt2_config_from_text(text, strlen(text), "x", &c), AG_OK, "%s: %s",
                     fine[k][0], ag_last_error());
        if (k == 3) cr_assert_eq(c.untied, 1);
        if (k == 4) cr_assert_eq(c.ffn_hidden, 48);
        free(text);
    }
    ts_rm_tree(dir);
}

Test(hf_config, refuses_files_it_cannot_read) {
    GptConfig c;
    char dir[256], path[512];
    ts_tmp_dir(dir, sizeof dir, "hf");
    ts_join(path, dir, "config.json");
    cr_assert_eq(hf_gpt2_config(dir, &c), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "config.json: cannot open: No such file"), "%s",
              ag_last_error());
    char *big = malloc(HF_MAX_CONFIG + 2);
    memset(big, ' ', HF_MAX_CONFIG + 1);
    big[HF_MAX_CONFIG + 1] = '\0';
    ts_write_text(path, big);
    free(big);
    cr_assert_eq(hf_gpt2_config(path, &c), AG_ERR_NOMEM);
    cr_assert(strstr(ag_last_error(), "over the limit of 1048576 bytes"));
    ts_write_text(path, "[1, 2]");
    cr_assert_eq(hf_gpt2_config(path, &c), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "config.json: not a JSON object"), "%s", ag_last_error());
    ts_write_text(path, "{\"model_type\": \"gpt2\",");
    cr_assert_eq(hf_gpt2_config(path, &c), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "not valid JSON"));
    ts_rm_tree(dir);
}
