/* hf.h: models in the Hugging Face layout: a config.json read into a GptConfig (GPT-2, LLaMA,
 * GPT-NeoX), a folder's weights loaded into attograd's GPT (hf_load) and written back
 * (hf_save). A name borrowed from transformers means what it means there: each key of the
 * configuration is either mapped onto a GptConfig field (with its value checked), required to
 * hold the value attograd's model computes (e.g. "scale_attn_weights": true), or listed as not
 * changing what the model computes (the tokenizer's ids, generation defaults, transformers'
 * bookkeeping). Any other key, and any value attograd cannot compute, is refused naming the key
 * and the value, never approximated (docs/hf.md, "config.json").
 * HfModel (model.c) loads a GPT with its tokenizer from a folder or an attograd checkpoint, and
 * saves it as a folder (hf_model_save).
 * Not here: the safetensors format (src/io/safetensors.h); the model (src/nn/gpt.h); the
 * tokenizers (src/text/text.h). Read next: config.c, then weights.c, model.c. */
#ifndef ATTOGRAD_HF_H
#define ATTOGRAD_HF_H

#include <stddef.h>

#include "../nn/gpt.h"
#include "../text/text.h"

/* The largest config.json read (a GPT-2 configuration is under 1 KB). */
#define HF_MAX_CONFIG (1 << 20)

/* Reads the configuration of a GPT-2 (transformers' GPT2LMHeadModel, "model_type": "gpt2") from
 * path (a config.json, or a folder holding one) into *out: vocab_size, n_positions (the
 * context: block_size), n_embd, n_layer, n_head, n_inner (null: 4 n_embd), the three dropout
 * rates (equal: attograd has one), layer_norm_epsilon and tie_word_embeddings, with
 * transformers' defaults for the keys a file leaves out; learned positions, LayerNorm, the MLP
 * of activation_function ("gelu_new", GPT-2's own and the default, and "gelu_pytorch_tanh":
 * NN_GPT_MLP_GELU_TANH; "gelu": NN_GPT_MLP_GELU, the exact one; "relu"), biases, pre-LN. Then
 * nn_gpt_check_config. On failure *out is unchanged and the code is AG_ERR_IO (open, read),
 * AG_ERR_NOMEM (over HF_MAX_CONFIG) or AG_ERR_FORMAT, with a message naming the file, the key
 * and the value: "gpt2/config.json: "activation_function": "silu": not supported: ...". */
int hf_gpt2_config(const char *path, GptConfig *out);
/* The same from the text of a configuration (len bytes); label names it in messages. */
int hf_gpt2_config_from_text(const char *text, size_t len, const char *label, GptConfig *out);

/* ---- any family: GPT-2 and LLaMA ---- */

/* Reads a config.json (path: the file or its folder) of the family its "model_type" names:
 * "gpt2" as hf_gpt2_config; "llama" (LlamaForCausalLM): vocab_size, max_position_embeddings
 * (block_size), hidden_size, intermediate_size (ffn_hidden), num_hidden_layers,
 * num_attention_heads, num_key_value_heads (grouped-query heads; null: as many as heads),
 * head_dim (hidden_size / num_attention_heads only), rms_norm_eps, rope_theta (or transformers
 * 5's "rope_parameters" {"rope_type": "default", "rope_theta": ...}), tie_word_embeddings,
 * attention_dropout, with LlamaConfig's defaults; hidden_act "silu", attention_bias and
 * mlp_bias false, no rope_scaling required. An NN_LLAMA GptConfig (RoPE, RMSNorm, SwiGLU, no
 * biases); "gpt_neox" (GPTNeoXForCausalLM): the same sizes, layer_norm_eps, hidden_act (as
 * GPT-2's activation_function), use_parallel_residual (parallel_residual), rotary_pct or
 * rope_parameters' partial_rotary_factor (rotary_dim = int(head size x it), even, at least 2),
 * rotary_emb_base or rope_theta, attention_dropout and hidden_dropout (equal), with
 * GPTNeoXConfig's defaults: an NN_GPT2 GptConfig with RoPE, LayerNorm, biases, untied unless
 * tie_word_embeddings. Errors as hf_gpt2_config's; other types are refused naming the value. */
int hf_config(const char *path, GptConfig *out);
int hf_config_from_text(const char *text, size_t len, const char *label, GptConfig *out);

/* Builds *m in arena a from the Hugging Face folder dir: config.json (hf_config), then every
 * parameter from model.safetensors or the shards of model.safetensors.index.json, in the
 * layout weights.c describes (GPT-2's Conv1D transposed, LLaMA's q/k rows from rotate-half to
 * adjacent pairs, GPT-NeoX's fused query_key_value regrouped). Each tensor's name, dtype (a float type), shape and values (finite) are
 * checked, and every tensor of the folder must be one of the model's. The model's dropout is
 * 0 (as in evaluation). AG_OK, or AG_ERR_IO / AG_ERR_FORMAT / AG_ERR_SHAPE / AG_ERR_RANGE /
 * AG_ERR_NOMEM with a message naming the folder (or file) and the tensor; *m is then zeroed
 * and a's allocations are the caller's to free (arena_free). */
int hf_load(const char *dir, Arena *a, Gpt *m);
/* Writes m into the folder dir (created if missing): config.json for GPT2LMHeadModel (a
 * GPT-2-style model: learned positions, LayerNorm, exact GELU, biases, pre-LN,
 * "activation_function" "gelu", "gelu_new" or "relu") or LlamaForCausalLM (a LLaMA-style model: RoPE, RMSNorm,
 * SwiGLU, no biases), and model.safetensors in the build's Real (F32 or F64) with
 * transformers' names and layouts, so hf_load reads back the same bits. A model no
 * transformers class computes (other options) is AG_ERR_ARG naming the option; a failed write
 * AG_ERR_IO naming the path. */
int hf_save(const Gpt *m, const char *dir);

/* ---- a GPT and its tokenizer, to run or study (model.c) ---- */
/* What a program needs to run a trained GPT on text: the model (weights only, its gradients
 * allocated only when asked for: arena_lazy_grads; its configuration as saved: a checkpoint's
 * dropout as trained, set m.cfg.dropout = 0 to study it as the lens commands do, a folder's 0)
 * and the tokenizer it was trained with, from either
 *   an attograd checkpoint (a .npz file as attograd-gpt train writes it: the configuration of
 *   nn_gpt_ckpt_config, the parameters, the tokenizer's saved form in meta.extra, train.step),
 *   or a Hugging Face folder (hf_load, and txt_any_load_dir's tokenizer).
 *   HfModel g; if (hf_model_load("out/last.npz", &g) != AG_OK) puts(ag_last_error());
 *   g.m.cfg.dropout = 0;
 *   int *ids; size_t n; txt_any_encode_alloc(&g.text, "To be", 5, &ids, &n, "prompt");
 *   ... nn_gpt_forward(tape, &g.m, ids, 1, (int)n, NULL) ...; hf_model_free(&g);
 * docs/hf.md ("A model and its tokenizer") has a longer example. */
typedef struct HfModel {
    Gpt m;
    Arena *arena; /* the parameters' arena */
    TxtAny text;  /* the tokenizer: attograd's own or a tokenizer.json */
    char *dir;    /* the folder the model came from (malloc'd), or NULL for a checkpoint */
    int64_t step; /* a checkpoint's train.step (0 when it has none, and for a folder) */
} HfModel;
/* 1 when path names a folder (hf_model_load reads it as a Hugging Face folder) */
int hf_is_folder(const char *path);
/* path: a folder (hf_load, txt_any_load_dir) or a checkpoint file. The tokenizer must fit the
 * model (txt_any_fits). AG_OK, or an error naming the path (or the file of the folder) and the
 * reason: AG_ERR_IO (missing, unreadable), AG_ERR_FORMAT (not a checkpoint of a GPT, no
 * tokenizer in meta.extra, a tokenizer that does not fit), AG_ERR_RANGE / AG_ERR_SHAPE as
 * ckpt_load_from and hf_load give them; out is then zeroed and nothing is left allocated. */
int hf_model_load(const char *path, HfModel *out);
void hf_model_free(HfModel *g); /* everything g holds; g zeroed (a zeroed g is fine) */
/* g as a folder transformers loads, dir (created if missing): config.json and
 * model.safetensors (hf_save), and the tokenizer: attograd's own as TXT_ANY_OWN_FILE and as
 * tokenizer.json (txt_write_hf) with a tokenizer_config.json naming PreTrainedTokenizerFast;
 * or, for a model read from a folder, that folder's tokenizer files (tokenizer.json,
 * vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json: those it holds)
 * copied as they were; or a checkpoint's tokenizer.json (data prepared with a folder's
 * tokenizer) written again with that tokenizer_config.json. AG_OK, or hf_save's error, or
 * AG_ERR_IO naming the file. */
int hf_model_save(const HfModel *g, const char *dir);

#endif
