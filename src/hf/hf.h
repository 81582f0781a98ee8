/* hf.h: models in the Hugging Face layout, the configuration side: a config.json read into a
 * GptConfig. A name borrowed from transformers means what it means there: each key of the
 * configuration is either mapped onto a GptConfig field (with its value checked), required to
 * hold the value attograd's model computes (e.g. "scale_attn_weights": true), or listed as not
 * changing what the model computes (the tokenizer's ids, generation defaults, transformers'
 * bookkeeping). Any other key, and any value attograd cannot compute, is refused naming the key
 * and the value, never approximated (docs/hf.md, "config.json").
 * Not here: the weights (src/io/safetensors.h); the model (src/nn/gpt.h). */
#ifndef ATTOGRAD_HF_H
#define ATTOGRAD_HF_H

#include <stddef.h>

#include "../nn/gpt.h"

/* The largest config.json read (a GPT-2 configuration is under 1 KB). */
#define HF_MAX_CONFIG (1 << 20)

/* Reads the configuration of a GPT-2 (transformers' GPT2LMHeadModel, "model_type": "gpt2") from
 * path (a config.json, or a folder holding one) into *out: vocab_size, n_positions (the
 * context: block_size), n_embd, n_layer, n_head, n_inner (null: 4 n_embd), the three dropout
 * rates (equal: attograd has one), layer_norm_epsilon and tie_word_embeddings, with
 * transformers' defaults for the keys a file leaves out; learned positions, LayerNorm, GELU,
 * biases, pre-LN. Then nn_gpt_check_config. On failure *out is unchanged and the code is
 * AG_ERR_IO (open, read), AG_ERR_NOMEM (over HF_MAX_CONFIG) or AG_ERR_FORMAT, with a message
 * naming the file, the key and the value: "gpt2/config.json: "activation_function": "gelu_new"
 * (GELU's tanh approximation) is not supported: attograd's GELU is the exact one, x Phi(x)". */
int hf_gpt2_config(const char *path, GptConfig *out);
/* The same from the text of a configuration (len bytes); label names it in messages. */
int hf_gpt2_config_from_text(const char *text, size_t len, const char *label, GptConfig *out);

#endif
