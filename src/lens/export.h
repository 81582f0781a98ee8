/* export.h: a GPT (../nn/gpt.h) in TransformerLens's HookedTransformer state-dict layout, so
 * that HookedTransformer(HookedTransformerConfig(**cfg)).load_state_dict(...) runs it with the
 * same logits (strict: every parameter key is here; HookedTransformer builds only its buffers,
 * the causal mask, IGNORE and the rotary tables). The arrays (float32, one .npz) under TransformerLens's names and shapes
 * (C = d_model, NH = n_heads, HS = d_head, H = d_mlp, V = d_vocab, n_ctx = block_size):
 *   embed.W_E (V, C)                    pos_embed.W_pos (n_ctx, C)  (not with RoPE)
 *   blocks.L.ln1.w, ln1.b (C)           (RMSNorm: w only; no norm: neither)
 *   blocks.L.attn.W_Q, W_K, W_V (NH, C, HS)    b_Q, b_K, b_V (NH, HS)
 *                                       (grouped-query: _W_K, _W_V (NKV, C, HS), _b_K, _b_V)
 *   blocks.L.attn.W_O (NH, HS, C)       b_O (C)
 *   blocks.L.ln2.w, ln2.b (C)           (not in attention-only models)
 *   blocks.L.mlp.W_in (C, H), b_in (H), W_out (H, C), b_out (C)
 *                                       (SwiGLU: W_gate (w1), W_in (w3), W_out (w2), and b_in,
 *                                       b_out of zeros: TransformerLens's GatedMLP holds them,
 *                                       no b_gate; a strict load_state_dict needs every key)
 *   ln_final.w, ln_final.b (C)          unembed.W_U (C, V), unembed.b_U (V)
 * TransformerLens multiplies activations on the right (x W), attograd's Linear weights are
 * (out, in) as PyTorch's: W_Q[h][m][k] = c_attn.weight[h HS + k][m], W_O[h][k][m] =
 * c_proj.weight[m][h HS + k], W_in = c_fc.weight^T, W_U = lm_head.weight^T. A model without
 * biases gets zero biases (TransformerLens's layers always have them); b_U is zero (attograd's
 * head has no bias). The configuration (JSON, HookedTransformerConfig's field names) says
 * act_fn "gelu" (attograd's GELU is the exact erf form, as PyTorch's nn.GELU; GPT-2's own
 * "gelu_new" is the tanh approximation, NN_GPT_MLP_GELU_TANH's), "relu" or "silu" with gated_mlp (SwiGLU), normalization_type
 * "LN", "RMS" or null, positional_embedding_type "standard" (learned positions; no positions:
 * W_pos of zeros) or "rotary" (rotary_dim d_head, rotary_base, rotary_adjacent_pairs: attograd's
 * RoPE turns interleaved pairs, as Meta's and GPT-J's), n_key_value_heads for grouped-query
 * heads, attn_only for models without MLP.
 * Expressible: every pre-LN model of gpt.h but SwiGLU with biases (TransformerLens's gated MLP
 * has none inside the gate). Refused (lens_tl_check): post-LN, SwiGLU with biases.
 * Not here: loading such files back. Read next: export.c; docs/lens.md, "Export". */
#ifndef ATTOGRAD_LENS_EXPORT_H
#define ATTOGRAD_LENS_EXPORT_H

#include "../nn/gpt.h"

/* AG_OK when TransformerLens's HookedTransformer can run a model of cfg as exported here, else
 * AG_ERR_ARG with the reason in ag_last_error() ("RoPE positions: ..."). */
int lens_tl_check(const GptConfig *cfg);
/* Writes m's weights to npz_path (float32, the names above) and its HookedTransformerConfig to
 * json_path. AG_OK; AG_ERR_ARG from lens_tl_check (nothing written); AG_ERR_IO naming the path. */
int lens_tl_export(const Gpt *m, const char *npz_path, const char *json_path);

#endif
