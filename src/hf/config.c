/* config.c: a GPT-2's config.json (transformers' GPT2Config) into a GptConfig. The keys are in
 * three tables: mapped onto a field (their values checked), required to hold the one value
 * attograd computes, and known not to change what the model computes; a key in none of them is
 * refused, naming it; the values then pass the ranges of the model's checkpoint fields and
 * nn_gpt_check_config. The JSON is parsed by jansson (docs/hf.md says why).
 * Not here: the weights (src/io/safetensors_read.c). */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf.h"
#include "../io/safetensors.h"

/* Keys that do not change the logits of a GPT2LMHeadModel: the tokenizer's ids, generation
 * defaults, the heads of other GPT-2 classes (summary_*: GPT2DoubleHeadsModel), the
 * initialisation, and transformers' bookkeeping. Their values are not read. */
static const char *const ignored[] = {"_name_or_path",
                                      "transformers_version",
                                      "torch_dtype",
                                      "dtype",
                                      "initializer_range",
                                      "use_cache",
                                      "bos_token_id",
                                      "eos_token_id",
                                      "pad_token_id",
                                      "sep_token_id",
                                      "decoder_start_token_id",
                                      "summary_type",
                                      "summary_use_proj",
                                      "summary_activation",
                                      "summary_proj_to_labels",
                                      "summary_first_dropout",
                                      "task_specific_params",
                                      "output_attentions",
                                      "output_hidden_states",
                                      "return_dict",
                                      "id2label",
                                      "label2id",
                                      "problem_type",
                                      "chunk_size_feed_forward",
                                      "torchscript",
                                      "use_bfloat16",
                                      "tokenizer_class",
                                      "prefix",
                                      "finetuning_task",
                                      "max_length",
                                      "min_length",
                                      "do_sample",
                                      "early_stopping",
                                      "num_beams",
                                      "num_beam_groups",
                                      "diversity_penalty",
                                      "temperature",
                                      "top_k",
                                      "top_p",
                                      "typical_p",
                                      "repetition_penalty",
                                      "length_penalty",
                                      "no_repeat_ngram_size",
                                      "encoder_no_repeat_ngram_size",
                                      "bad_words_ids",
                                      "num_return_sequences",
                                      "output_scores",
                                      "return_dict_in_generate",
                                      "forced_bos_token_id",
                                      "forced_eos_token_id",
                                      "remove_invalid_values",
                                      "exponential_decay_length_penalty",
                                      "suppress_tokens",
                                      "begin_suppress_tokens"};

/* Keys whose only value attograd computes (transformers' default), as JSON text. */
static const char *const required[][2] = {
    {"scale_attn_weights", "true"},               /* scores / sqrt(head size) */
    {"scale_attn_by_inverse_layer_idx", "false"}, /* no extra 1 / (layer + 1) */
    {"reorder_and_upcast_attn", "false"},         /* no other precision for the scores */
    {"add_cross_attention", "false"},             /* a decoder only */
    {"is_encoder_decoder", "false"},
    {"is_decoder", "false"},
    {"tie_encoder_decoder", "false"},
    {"pruned_heads", "{}"}, /* every head of every layer */
    {"cross_attention_hidden_size", "null"},
};

typedef struct {
    const char *label;
    GptConfig c;
    double pdrop[3]; /* resid, embd, attn */
    int have_type, n_positions, n_ctx;
} Ctx;

/* v as compact JSON for a message, at most about 60 bytes */
static const char *shown(const json_t *v, char *buf, size_t cap) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, cap, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
    free(s);
    return buf;
}

/* Records "label: "key": value: reason"; returns AG_ERR_FORMAT. */
__attribute__((format(printf, 4, 5))) static int kfail(const Ctx *x, const char *key,
                                                       const json_t *v, const char *fmt, ...) {
    char reason[320], val[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return ag_fail(AG_ERR_FORMAT, "%s: \"%.80s\": %s: %s", x->label, key,
                   v ? shown(v, val, sizeof val) : "(absent)", reason);
}

static int get_int(const Ctx *x, const char *key, const json_t *v, int *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT_MAX)
        return kfail(x, key, v, "must be an integer in [1, %d]", INT_MAX);
    *out = (int)json_integer_value(v);
    return AG_OK;
}

static int get_num(const Ctx *x, const char *key, const json_t *v, double lo, double hi,
                   int lo_open, double *out) {
    double d = json_number_value(v);
    if (!json_is_number(v) || !isfinite(d) || d < lo || (lo_open && d == lo) || d >= hi)
        return kfail(x, key, v, "must be a number in %s%g, %g)", lo_open ? "(" : "[", lo, hi);
    *out = d;
    return AG_OK;
}

/* transformers' ACT2FN names of what attograd's GPT-2 MLP computes: "gelu" the exact GELU,
 * x Phi(x); "gelu_new" (GPT-2's own) and "gelu_pytorch_tanh" its tanh approximation, one formula
 * (ag_gelu_tanh); "relu" */
static int activation(Ctx *x, const char *key, const json_t *v) {
    const char *s = json_string_value(v);
    if (!s) return kfail(x, key, v, "must be a string");
    if (!strcmp(s, "gelu")) return x->c.mlp = NN_GPT_MLP_GELU, AG_OK;
    if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_pytorch_tanh"))
        return x->c.mlp = NN_GPT_MLP_GELU_TANH, AG_OK;
    if (!strcmp(s, "relu")) return x->c.mlp = NN_GPT_MLP_RELU, AG_OK;
    if (!strcmp(s, "gelu_fast"))
        return kfail(x, key, v,
                     "not supported: its constants are rounded (0.7978845608), so it is not "
                     "\"gelu_new\"'s formula");
    return kfail(x, key, v,
                 "not supported: attograd's GPT-2 MLP computes \"gelu\", \"gelu_new\" (also "
                 "\"gelu_pytorch_tanh\") or \"relu\"");
}

/* 1 when key is one of the ignored or required keys (*rc: its verdict), else 0. The required
 * keys of n_required rows from table; tie_word_embeddings and quantization_config too, which
 * both families share. */
static int common_key(Ctx *x, const char *key, const json_t *v, const char *const (*table)[2],
                      size_t n_required, int *rc) {
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        if (strcmp(key, ignored[i]) == 0) return *rc = AG_OK, 1;
    if (!strcmp(key, "tie_word_embeddings")) {
        *rc = json_is_boolean(v) ? AG_OK : kfail(x, key, v, "must be true or false");
        if (*rc == AG_OK) x->c.untied = json_is_false(v);
        return 1;
    }
    if (!strcmp(key, "quantization_config"))
        return *rc = kfail(x, key, v, "quantized weights are not supported"), 1;
    for (size_t i = 0; i < n_required; i++) {
        if (strcmp(key, table[i][0]) != 0) continue;
        json_t *want = json_loads(table[i][1], JSON_DECODE_ANY, NULL);
        int same = json_equal(v, want);
        json_decref(want);
        *rc = same ? AG_OK : kfail(x, key, v, "attograd computes only %s", table[i][1]);
        return 1;
    }
    return 0;
}

/* "architectures": a list of the one class name cls */
static int architectures(const Ctx *x, const char *key, const json_t *v, const char *cls) {
    size_t i;
    json_t *a;
    if (!json_is_array(v)) return kfail(x, key, v, "must be a list of class names");
    json_array_foreach(v, i, a) {
        if (!json_is_string(a) || strcmp(json_string_value(a), cls) != 0)
            return kfail(x, key, v, "only \"%s\" is supported", cls);
    }
    return AG_OK;
}

static int one_key(Ctx *x, const char *key, json_t *v) {
    int rc;
    if (common_key(x, key, v, required, sizeof required / sizeof *required, &rc)) return rc;
    GptConfig *c = &x->c;
    if (!strcmp(key, "model_type")) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "gpt2") != 0)
            return kfail(x, key, v, "not a GPT-2 configuration (\"gpt2\")");
        x->have_type = 1;
        return AG_OK;
    }
    if (!strcmp(key, "architectures")) return architectures(x, key, v, "GPT2LMHeadModel");
    if (!strcmp(key, "vocab_size")) return get_int(x, key, v, &c->vocab_size);
    if (!strcmp(key, "n_positions")) return get_int(x, key, v, &x->n_positions);
    if (!strcmp(key, "n_ctx")) return get_int(x, key, v, &x->n_ctx);
    if (!strcmp(key, "n_embd")) return get_int(x, key, v, &c->n_embd);
    if (!strcmp(key, "n_layer")) return get_int(x, key, v, &c->n_layer);
    if (!strcmp(key, "n_head")) return get_int(x, key, v, &c->n_head);
    if (!strcmp(key, "n_inner"))
        return json_is_null(v) ? AG_OK : get_int(x, key, v, &c->ffn_hidden);
    if (!strcmp(key, "activation_function")) return activation(x, key, v);
    if (!strcmp(key, "resid_pdrop")) return get_num(x, key, v, 0, 1, 0, &x->pdrop[0]);
    if (!strcmp(key, "embd_pdrop")) return get_num(x, key, v, 0, 1, 0, &x->pdrop[1]);
    if (!strcmp(key, "attn_pdrop")) return get_num(x, key, v, 0, 1, 0, &x->pdrop[2]);
    if (!strcmp(key, "layer_norm_epsilon")) return get_num(x, key, v, 0, 1, 1, &c->norm_eps);
    return kfail(x, key, v, "not a key of a GPT-2 configuration attograd knows");
}

/* GptConfig's fields as the keys of a configuration name them. Their ranges are the model's
 * own, from the table its checkpoints are read with (nn_gpt_ckpt_config), so that both accept
 * the same models, and nn_gpt_check_config's arithmetic stays far from int's range. */
#define N_FIELD_KEYS 8
static const char *const field_keys[N_FIELD_KEYS][2] = {{"vocab_size", "vocab_size"},
                                                        {"block_size", "n_positions"},
                                                        {"n_layer", "n_layer"},
                                                        {"n_head", "n_head"},
                                                        {"n_embd", "n_embd"},
                                                        {"ffn_hidden", "n_inner"},
                                                        {"norm_eps", "layer_norm_epsilon"},
                                                        {"dropout", "resid_pdrop"}};
/* the same for LLaMA's names, with the key/value heads and RoPE's base */
static const char *const llama_field_keys[N_FIELD_KEYS + 2][2] = {
    {"vocab_size", "vocab_size"},
    {"block_size", "max_position_embeddings"},
    {"n_layer", "num_hidden_layers"},
    {"n_head", "num_attention_heads"},
    {"n_embd", "hidden_size"},
    {"ffn_hidden", "intermediate_size"},
    {"norm_eps", "rms_norm_eps"},
    {"dropout", "attention_dropout"},
    {"n_kv_head", "num_key_value_heads"},
    {"rope_base", "rope_theta"}};

/* the same for GPT-NeoX's names */
static const char *const neox_field_keys[N_FIELD_KEYS + 1][2] = {
    {"vocab_size", "vocab_size"},     {"block_size", "max_position_embeddings"},
    {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"},
    {"n_embd", "hidden_size"},        {"ffn_hidden", "intermediate_size"},
    {"norm_eps", "layer_norm_eps"},   {"dropout", "attention_dropout"},
    {"rope_base", "rotary_emb_base"}};

static int check_ranges(const char *label, GptConfig *c, const char *const (*keys)[2],
                        size_t n_keys) {
    CkptConfig cc = nn_gpt_ckpt_config(c);
    for (size_t k = 0; k < n_keys; k++) {
        const CkptField *fd = NULL;
        for (int i = 0; i < cc.n_fields && !fd; i++)
            if (strcmp(cc.fields[i].name, keys[k][0]) == 0) fd = &cc.fields[i];
        AG_CHECK(fd && (fd->type == CKPT_FIELD_FLOAT ? fd->size == sizeof(double)
                                                     : fd->size == sizeof(int)),
                 "hf: GptConfig's field '%s' is not in its checkpoint table as expected",
                 keys[k][0]);
        const char *at = (const char *)c + fd->offset;
        double x;
        if (fd->type == CKPT_FIELD_FLOAT) {
            memcpy(&x, at, sizeof x);
        } else {
            int i;
            memcpy(&i, at, sizeof i);
            x = i;
        }
        if (x < fd->lo || x > fd->hi)
            return ag_fail(AG_ERR_FORMAT,
                           "%s: \"%s\": %.17g: outside [%.17g, %.17g], what attograd's GPT "
                           "accepts (as in its checkpoints)",
                           label, keys[k][1], x, fd->lo, fd->hi);
    }
    return AG_OK;
}

/* The configuration's JSON: AG_OK with *root, or AG_ERR_FORMAT naming label. */
static int parse(const char *text, size_t len, const char *label, json_t **root) {
    json_error_t err;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!*root)
        return ag_fail(AG_ERR_FORMAT, "%s: not valid JSON: %s (at byte %d)", label, err.text,
                       err.position);
    if (!json_is_object(*root)) {
        json_decref(*root);
        return ag_fail(AG_ERR_FORMAT, "%s: not a JSON object", label);
    }
    return AG_OK;
}

/* The values of a configuration read: within the checkpoint's ranges (keys named as in the
 * file), then a model nn_gpt_check_config accepts. */
static int finish(const char *label, GptConfig *c, const char *const (*keys)[2], size_t n) {
    int rc = check_ranges(label, c, keys, n);
    if (rc == AG_OK && nn_gpt_check_config(c, NULL) != AG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", ag_last_error());
        rc = ag_fail(AG_ERR_FORMAT, "%s: %s", label, why);
    }
    return rc;
}

static int gpt2_from_json(json_t *root, const char *label, GptConfig *out) {
    /* transformers' GPT2Config defaults for what a file leaves out */
    Ctx x = {.label = label,
             .c = {.style = NN_GPT2,
                   .vocab_size = 50257,
                   .n_layer = 12,
                   .n_head = 12,
                   .n_embd = 768,
                   .norm_eps = 1e-5,
                   .pos = NN_GPT_POS_LEARNED,
                   .norm = NN_GPT_NORM_LAYER,
                   .mlp = NN_GPT_MLP_GELU_TANH, /* "activation_function": "gelu_new" */
                   .bias = NN_GPT_BIAS_ON},
             .pdrop = {0.1, 0.1, 0.1},
             .n_positions = 1024};
    int rc = AG_OK;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc != AG_OK) break;
        rc = one_key(&x, key, v);
    }
    if (rc == AG_OK && !x.have_type)
        rc = kfail(&x, "model_type", NULL, "a configuration names its model type (\"gpt2\")");
    if (rc == AG_OK && x.n_ctx && x.n_ctx != x.n_positions)
        rc = kfail(&x, "n_ctx", json_object_get(root, "n_ctx"), "differs from n_positions %d",
                   x.n_positions);
    if (rc == AG_OK && (x.pdrop[0] != x.pdrop[1] || x.pdrop[0] != x.pdrop[2]))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: \"resid_pdrop\" %g, \"embd_pdrop\" %g and \"attn_pdrop\" %g differ: "
                     "attograd's GPT has one dropout rate",
                     label, x.pdrop[0], x.pdrop[1], x.pdrop[2]);
    x.c.block_size = x.n_positions;
    x.c.dropout = x.pdrop[0];
    if (rc == AG_OK) rc = finish(label, &x.c, field_keys, N_FIELD_KEYS);
    if (rc == AG_OK) *out = x.c;
    return rc;
}

int hf_gpt2_config_from_text(const char *text, size_t len, const char *label, GptConfig *out) {
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(out);
    json_t *root;
    int rc = parse(text, len, label, &root);
    if (rc != AG_OK) return rc;
    rc = gpt2_from_json(root, label, out);
    json_decref(root);
    return rc;
}

/* ---- LLaMA (transformers' LlamaConfig, LlamaForCausalLM) ---- */

/* Keys of a LlamaConfig whose only value attograd computes. */
static const char *const llama_required[][2] = {
    {"hidden_act", "\"silu\""},  /* SwiGLU's gate */
    {"attention_bias", "false"}, /* no biases */
    {"mlp_bias", "false"},
    {"rope_scaling", "null"}, /* RoPE as trained, no extension */
    {"is_encoder_decoder", "false"},
    {"is_decoder", "false"},
    {"add_cross_attention", "false"},
    {"tie_encoder_decoder", "false"},
    {"pruned_heads", "{}"},
};

typedef struct {
    Ctx x;
    int n_kv_null, head_dim, have_theta, neox;
    double rotary_pct, dropout2; /* GPT-NeoX: rotary_pct; hidden_dropout */
} LCtx;

/* "rope_parameters" (transformers 5) or an old "rope_scaling": {"rope_type": "default",
 * "rope_theta": base}; any other rope_type (linear, dynamic, yarn, llama3, ...) is refused */
static int rope_parameters(LCtx *l, const char *key, json_t *v) {
    const char *k;
    json_t *e;
    if (!json_is_object(v)) return kfail(&l->x, key, v, "must be an object");
    json_object_foreach(v, k, e) {
        if (!strcmp(k, "rope_type") || !strcmp(k, "type")) {
            if (!json_is_string(e) || strcmp(json_string_value(e), "default") != 0)
                return kfail(&l->x, key, v,
                             "only \"rope_type\": \"default\" (RoPE without scaling) is "
                             "supported");
        } else if (!strcmp(k, "rope_theta")) {
            int rc = get_num(&l->x, "rope_theta", e, 0, 1e300, 1, &l->x.c.rope_base);
            if (rc != AG_OK) return rc;
            l->have_theta = 1;
        } else if (l->neox && !strcmp(k, "partial_rotary_factor")) {
            int rc = get_num(&l->x, "partial_rotary_factor", e, 0, 1.0000001, 1, &l->rotary_pct);
            if (rc != AG_OK) return rc;
        } else {
            return kfail(&l->x, key, v, "\"%s\" is not supported (RoPE without scaling only)", k);
        }
    }
    return AG_OK;
}

/* The sizes LLaMA's and GPT-NeoX's configurations name alike: 1 when key is one (*rc: its
 * verdict), else 0 */
static int sizes(Ctx *x, const char *key, const json_t *v, int *rc) {
    static const struct {
        const char *key;
        size_t at;
    } t[] = {{"vocab_size", offsetof(GptConfig, vocab_size)},
             {"max_position_embeddings", offsetof(GptConfig, block_size)},
             {"hidden_size", offsetof(GptConfig, n_embd)},
             {"intermediate_size", offsetof(GptConfig, ffn_hidden)},
             {"num_hidden_layers", offsetof(GptConfig, n_layer)},
             {"num_attention_heads", offsetof(GptConfig, n_head)}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(key, t[i].key))
            return *rc = get_int(x, key, v, (int *)((char *)&x->c + t[i].at)), 1;
    return 0;
}

/* every member of root through fn, stopping at the first refusal */
static int each_key(json_t *root, LCtx *l, int (*fn)(LCtx *, const char *, json_t *)) {
    int rc = AG_OK;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (rc != AG_OK) break;
        rc = fn(l, key, v);
    }
    return rc;
}

static int llama_key(LCtx *l, const char *key, json_t *v) {
    Ctx *x = &l->x;
    GptConfig *c = &x->c;
    int rc;
    if (common_key(x, key, v, llama_required, sizeof llama_required / sizeof *llama_required, &rc))
        return rc;
    if (!strcmp(key, "model_type")) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "llama") != 0)
            return kfail(x, key, v, "not a LLaMA configuration (\"llama\")");
        x->have_type = 1;
        return AG_OK;
    }
    if (!strcmp(key, "architectures")) return architectures(x, key, v, "LlamaForCausalLM");
    if (sizes(x, key, v, &rc)) return rc;
    if (!strcmp(key, "num_key_value_heads")) {
        l->n_kv_null = json_is_null(v);
        return l->n_kv_null ? AG_OK : get_int(x, key, v, &c->n_kv_head);
    }
    if (!strcmp(key, "head_dim")) return json_is_null(v) ? AG_OK : get_int(x, key, v, &l->head_dim);
    if (!strcmp(key, "rms_norm_eps")) return get_num(x, key, v, 0, 1, 1, &c->norm_eps);
    if (!strcmp(key, "attention_dropout")) return get_num(x, key, v, 0, 1, 0, &c->dropout);
    if (!strcmp(key, "rope_theta")) {
        l->have_theta = 1;
        return get_num(x, key, v, 0, 1e300, 1, &c->rope_base);
    }
    if (!strcmp(key, "rope_parameters")) return rope_parameters(l, key, v);
    if (!strcmp(key, "pretraining_tp")) /* a slicing of the same products in old transformers */
        return json_is_integer(v) && json_integer_value(v) >= 1
                   ? AG_OK
                   : kfail(x, key, v, "must be an integer >= 1");
    return kfail(x, key, v, "not a key of a LLaMA configuration attograd knows");
}

static int llama_from_json(json_t *root, const char *label, GptConfig *out) {
    /* LlamaConfig's defaults for what a file leaves out */
    LCtx l = {.x = {.label = label,
                    .c = {.style = NN_LLAMA,
                          .vocab_size = 32000,
                          .block_size = 2048,
                          .n_layer = 32,
                          .n_head = 32,
                          .n_embd = 4096,
                          .ffn_hidden = 11008,
                          .norm_eps = 1e-6,
                          .rope_base = 10000,
                          .untied = 1,
                          .no_bias = 1,
                          .pos = NN_GPT_POS_ROPE,
                          .norm = NN_GPT_NORM_RMS,
                          .mlp = NN_GPT_MLP_SWIGLU,
                          .bias = NN_GPT_BIAS_OFF}}};
    int rc = each_key(root, &l, llama_key);
    GptConfig *c = &l.x.c;
    if (rc == AG_OK && c->n_kv_head == c->n_head) c->n_kv_head = 0; /* no grouping */
    if (rc == AG_OK && l.head_dim && l.head_dim * c->n_head != c->n_embd)
        rc = kfail(&l.x, "head_dim", json_object_get(root, "head_dim"),
                   "attograd's heads are hidden_size / num_attention_heads = %d / %d wide",
                   c->n_embd, c->n_head);
    if (rc == AG_OK) rc = finish(label, c, llama_field_keys, N_FIELD_KEYS + 2);
    if (rc == AG_OK) *out = *c;
    return rc;
}

static int neox_from_json(json_t *root, const char *label, GptConfig *out);

int hf_config_from_text(const char *text, size_t len, const char *label, GptConfig *out) {
    AG_CHECK_ARG(text);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(out);
    json_t *root;
    int rc = parse(text, len, label, &root);
    if (rc != AG_OK) return rc;
    const json_t *t = json_object_get(root, "model_type");
    const char *type = json_string_value(t);
    Ctx x = {.label = label};
    if (type && !strcmp(type, "llama"))
        rc = llama_from_json(root, label, out);
    else if (type && !strcmp(type, "gpt2"))
        rc = gpt2_from_json(root, label, out);
    else if (type && !strcmp(type, "gpt_neox"))
        rc = neox_from_json(root, label, out);
    else
        rc = kfail(&x, "model_type", t,
                   "attograd reads \"gpt2\" (GPT2LMHeadModel), \"llama\" "
                   "(LlamaForCausalLM) and \"gpt_neox\" (GPTNeoXForCausalLM)");
    json_decref(root);
    return rc;
}

/* path's config.json: path itself, or the file in the folder path */
static int config_text(const char *path, char **text, size_t *n, char *file, size_t cap) {
    struct stat st;
    size_t plen = strlen(path);
    int k =
        stat(path, &st) == 0 && S_ISDIR(st.st_mode)
            ? snprintf(file, cap, "%s%sconfig.json", path, plen && path[plen - 1] == '/' ? "" : "/")
            : snprintf(file, cap, "%s", path);
    if (k < 0 || (size_t)k >= cap)
        return ag_fail(AG_ERR_ARG, "%.200s...: a path of %zu bytes is too long", path, plen);
    return st_read_small(file, HF_MAX_CONFIG, text, n);
}

int hf_config(const char *path, GptConfig *out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    char file[4096], *text = NULL;
    size_t n = 0;
    int rc = config_text(path, &text, &n, file, sizeof file);
    if (rc == AG_OK) rc = hf_config_from_text(text, n, file, out);
    free(text);
    return rc;
}

int hf_gpt2_config(const char *path, GptConfig *out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    char file[4096], *text = NULL;
    size_t n = 0;
    int rc = config_text(path, &text, &n, file, sizeof file);
    if (rc == AG_OK) rc = hf_gpt2_config_from_text(text, n, file, out);
    free(text);
    return rc;
}

/* ---- GPT-NeoX (transformers' GPTNeoXConfig, GPTNeoXForCausalLM: Pythia) ---- */

static const char *const neox_required[][2] = {
    {"attention_bias", "true"}, /* biases on query_key_value and dense */
    {"rope_scaling", "null"},         {"is_encoder_decoder", "false"},  {"is_decoder", "false"},
    {"add_cross_attention", "false"}, {"tie_encoder_decoder", "false"}, {"pruned_heads", "{}"},
};

static int neox_key(LCtx *l, const char *key, json_t *v) {
    Ctx *x = &l->x;
    GptConfig *c = &x->c;
    int rc;
    if (common_key(x, key, v, neox_required, sizeof neox_required / sizeof *neox_required, &rc))
        return rc;
    if (!strcmp(key, "model_type")) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "gpt_neox") != 0)
            return kfail(x, key, v, "not a GPT-NeoX configuration (\"gpt_neox\")");
        x->have_type = 1;
        return AG_OK;
    }
    if (!strcmp(key, "architectures")) return architectures(x, key, v, "GPTNeoXForCausalLM");
    if (sizes(x, key, v, &rc)) return rc;
    if (!strcmp(key, "hidden_act")) return activation(x, key, v);
    if (!strcmp(key, "layer_norm_eps")) return get_num(x, key, v, 0, 1, 1, &c->norm_eps);
    if (!strcmp(key, "attention_dropout")) return get_num(x, key, v, 0, 1, 0, &c->dropout);
    if (!strcmp(key, "hidden_dropout")) return get_num(x, key, v, 0, 1, 0, &l->dropout2);
    if (!strcmp(key, "classifier_dropout")) /* GPTNeoXForTokenClassification's head */
        return json_is_null(v) || json_is_number(v) ? AG_OK : kfail(x, key, v, "must be a number");
    if (!strcmp(key, "use_parallel_residual")) {
        if (!json_is_boolean(v)) return kfail(x, key, v, "must be true or false");
        c->parallel_residual = json_is_true(v);
        return AG_OK;
    }
    if (!strcmp(key, "rotary_pct")) return get_num(x, key, v, 0, 1.0000001, 1, &l->rotary_pct);
    if (!strcmp(key, "rotary_emb_base") || !strcmp(key, "rope_theta")) {
        l->have_theta = 1;
        return get_num(x, key, v, 0, 1e300, 1, &c->rope_base);
    }
    if (!strcmp(key, "rope_parameters")) return rope_parameters(l, key, v);
    return kfail(x, key, v, "not a key of a GPT-NeoX configuration attograd knows");
}

static int neox_from_json(json_t *root, const char *label, GptConfig *out) {
    /* GPTNeoXConfig's defaults for what a file leaves out */
    LCtx l = {.x = {.label = label,
                    .c = {.style = NN_GPT2,
                          .vocab_size = 50432,
                          .block_size = 2048,
                          .n_layer = 44,
                          .n_head = 64,
                          .n_embd = 6144,
                          .ffn_hidden = 24576,
                          .norm_eps = 1e-5,
                          .rope_base = 10000,
                          .untied = 1,
                          .parallel_residual = 1,
                          .pos = NN_GPT_POS_ROPE,
                          .norm = NN_GPT_NORM_LAYER,
                          .mlp = NN_GPT_MLP_GELU,
                          .bias = NN_GPT_BIAS_ON}},
              .neox = 1,
              .rotary_pct = 0.25};
    int rc = each_key(root, &l, neox_key);
    GptConfig *c = &l.x.c;
    if (rc == AG_OK && l.dropout2 != c->dropout)
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: \"attention_dropout\" %g and \"hidden_dropout\" %g differ: attograd's "
                     "GPT has one dropout rate",
                     label, c->dropout, l.dropout2);
    if (rc == AG_OK && c->n_head >= 1 && c->n_embd % c->n_head == 0) {
        /* transformers: rotary_ndims = int(head_size * rotary_pct) */
        int hs = c->n_embd / c->n_head, r = (int)(hs * l.rotary_pct);
        if (r < 2 || r % 2)
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s: \"rotary_pct\" (\"partial_rotary_factor\") %g of a head of %d "
                         "columns is %d rotary columns: attograd turns an even number, at least 2",
                         label, l.rotary_pct, hs, r);
        c->rotary_dim = r >= hs ? 0 : r;
    }
    if (rc == AG_OK) rc = finish(label, c, neox_field_keys, N_FIELD_KEYS + 1);
    if (rc == AG_OK) *out = *c;
    return rc;
}
