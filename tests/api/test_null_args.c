/* test_null_args.c: NULL where the public API expects a pointer is caught at the boundary.
 * Each row of the table calls one function with one required pointer argument NULL (the
 * arguments before it non-NULL: zeroed dummies, since nothing is read before the checks) in a
 * child process, and asserts that the child died by SIGABRT with "file.c:LINE: <function>:
 * argument '<name>' is NULL". A coverage test reads the public headers (src/tensor, autograd,
 * nn, optim, io (files, npz, checkpoints, safetensors), hf, text, lens, flag, run, view) and
 * fails for any function taking a pointer that has no row here, unless it is listed below as
 * accepting NULL (free-like functions) or is an op (ag_add, ...: the misuse table of
 * tests/autograd/test_errors.c covers those, NULL tape and tensors included).
 * Not here: shape and range checks (test_errors.c, tests/tensor/test_arena.c, the nn and optim
 * tests). */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"

/* zeroed dummies: non-NULL arguments that come before the NULL one */
static Arena A;
static Tensor T;
static ViewBuf VB;
static const void *view_text(const void *ctx, int id, size_t *len) {
    (void)ctx, (void)id;
    *len = 1;
    return "x";
}
static Tape TP;
static Rng R;
static ParamList PL;
static NnBuilder NB;
static Linear LIN;
static LayerNorm LN;
static Embedding EMB;
static PositionalEncoding PE;
static Flag FL;
static FeedForward FF;
static MultiHeadAttention MHA;
static MhaConfig MC;
static NnKVCache KV;
static EncoderLayer ENC;
static DecoderLayer DEC;
static TransformerConfig TC;
static Seq2Seq S2S;
static Seq2SeqConfig S2C;
static NnDecodeState DS;
static Gpt GPT;
static GptConfig GPC;
static GptCache GCA;
static NnSampling SMP;
static OptimConfig OC;
static NpzFile NF;
static StFile SF;
static StSet SS;
static StTensor STT;
static Checkpoint CK;
static int admit_all(void *ctx, const NpzDirectory *dir, const NpzFile *loaded) {
    (void)ctx, (void)dir, (void)loaded;
    return AG_OK;
}
#define ADMIT admit_all
static NpzEntry NE;
static AgGradcheckResult GCR;
static char BUF[AG_NAME_LEN];
static const int IDS[4];
static int OUTI[4];
static const size_t STARTS[1];
static double D1[4];
static Tensor *INPUTS[1] = {&T};
static Tensor *gc_fn(Tape *t, Tensor **in, void *ctx) {
    (void)t;
    (void)ctx;
    return in[0];
}
static TxtTokenizer *const TOK = (TxtTokenizer *)&A; /* never read: the checks come first */
static TxtAny TANY = {.tok = (TxtTokenizer *)&A};    /* never read: the checks come first */
static HfModel HFM;
static LensOwnedMetric LOM;
static int tok_fn(const void *ctx, const char *text, const char *flag, int *id) {
    (void)ctx, (void)text, (void)flag, (void)id;
    return AG_OK;
}
static RunLoop *const RL = (RunLoop *)&A; /* never read: the checks come first */
static RunModel RM;
static RunConfig RC;
static TxtLoader TL;
static TxtVocab VOC;
static TxtScore SCO;
static TxtPair PAIR;
static TxtPairBatch PB;
static TxtPairLoader PL2;
static TxtPairSet PSET;
static int I1;
static size_t Z1;
static int64_t STATE[TXT_LOADER_STATE_LEN];
static Real R1;
static Real *LEAF[1] = {&R1};
static DistGrad DG;
static Tensor *null_loss(void *ctx, Tape *t, int shard) {
    (void)ctx;
    (void)shard;
    return ag_sum(t, &T);
}
static const char *volatile NO_FMT = NULL; /* volatile: no format warning at compile time */
static NnHooks HK;
static NnHookPoint HP;
static LensCache LC;
static LensSweep LSW;
static LensLogit LL;
static LensMetric LM;
static LensRunInfo LRI;
static LensModel LMO;
static LensReadout RO;
static LensAblateTable LAT;
static LensReport LRP;
static LensCmd LCM;
static LensRows LRW;
static NnHookAttn HA;
static MultiHeadAttention MHA;
static Tensor *TX = &T;
static LensHeadBlock LHB;
static LensHeadData LHD;
static LensHeadImportance LHI;
static LensPatterns LPS;
static int hook_fn(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at, (void)ctx;
    return AG_OK;
}

/* X(function, argument, the call with that argument NULL) */
#define NULL_ROWS(X)                                                                               \
    /* tensor.h */                                                                                 \
    X(arena_new, name, arena_new(NULL, 64))                                                        \
    X(arena_set_limit, a, arena_set_limit(NULL, 0))                                                \
    X(arena_lazy_grads, a, arena_lazy_grads(NULL, 1))                                              \
    X(arena_alloc, a, arena_alloc(NULL, 8))                                                        \
    X(arena_reset, a, arena_reset(NULL))                                                           \
    X(tensor_new, a, tensor_new(NULL, 1, (int[]){2}, "x"))                                         \
    X(tensor_new, shape, tensor_new(&A, 2, NULL, "x"))                                             \
    X(tensor_zeros, a, tensor_zeros(NULL, 1, (int[]){2}, "x"))                                     \
    X(tensor_new1, a, tensor_new1(NULL, 2, "x"))                                                   \
    X(tensor_new2, a, tensor_new2(NULL, 2, 3, "x"))                                                \
    X(tensor_new3, a, tensor_new3(NULL, 2, 3, 4, "x"))                                             \
    X(tensor_new4, a, tensor_new4(NULL, 2, 3, 4, 5, "x"))                                          \
    X(tensor_param, a, tensor_param(NULL, 1, (int[]){2}, "w"))                                     \
    X(tensor_set_name, t, tensor_set_name(NULL, "x"))                                              \
    X(tensor_set_name, fmt, tensor_set_name(&T, NO_FMT))                                           \
    X(tensor_requires_grad, t, tensor_requires_grad(NULL))                                         \
    X(tensor_zero_grad, t, tensor_zero_grad(NULL))                                                 \
    X(tensor_fill, t, tensor_fill(NULL, 1))                                                        \
    X(tensor_copy_from_floats, t, tensor_copy_from_floats(NULL, (float[]){1}))                     \
    X(tensor_copy_from_floats, src, tensor_copy_from_floats(&T, NULL))                             \
    X(tensor_copy_from_doubles, t, tensor_copy_from_doubles(NULL, (double[]){1}))                  \
    X(tensor_copy_from_doubles, src, tensor_copy_from_doubles(&T, NULL))                           \
    X(tensor_same_shape, a, tensor_same_shape(NULL, &T))                                           \
    X(tensor_same_shape, b, tensor_same_shape(&T, NULL))                                           \
    X(tensor_rows, t, tensor_rows(NULL))                                                           \
    X(tensor_print, t, tensor_print(NULL, 4))                                                      \
    /* rng.h */                                                                                    \
    X(rng_seed, r, rng_seed(NULL, 1))                                                              \
    X(rng_u64, r, rng_u64(NULL))                                                                   \
    X(rng_uniform, r, rng_uniform(NULL))                                                           \
    X(rng_normal, r, rng_normal(NULL))                                                             \
    X(rng_below, r, rng_below(NULL, 3))                                                            \
    X(rng_fill_uniform, r, rng_fill_uniform(NULL, &T, 0, 1))                                       \
    X(rng_fill_uniform, t, rng_fill_uniform(&R, NULL, 0, 1))                                       \
    X(rng_fill_normal, r, rng_fill_normal(NULL, &T, 0, 1))                                         \
    X(rng_fill_normal, t, rng_fill_normal(&R, NULL, 0, 1))                                         \
    /* autograd.h, besides the ops */                                                              \
    X(ag_tape_new, step, ag_tape_new(NULL))                                                        \
    X(ag_tape_reset, tape, ag_tape_reset(NULL))                                                    \
    X(ag_no_grad, tape, ag_no_grad(NULL, 1))                                                       \
    X(ag_backward, tape, ag_backward(NULL, &T))                                                    \
    X(ag_backward, loss, ag_backward(&TP, NULL))                                                   \
    X(ag_tape_print, tape, ag_tape_print(NULL, stderr))                                            \
    X(ag_tape_print, f, ag_tape_print(&TP, NULL))                                                  \
    X(ag_tape_dot, tape, ag_tape_dot(NULL, stderr))                                                \
    X(ag_tape_dot, f, ag_tape_dot(&TP, NULL))                                                      \
    X(ag_tape_keep_norms, tape, ag_tape_keep_norms(NULL, 1))                                       \
    X(ag_backward_on_leaf, tape, ag_backward_on_leaf(NULL, NULL, NULL))                            \
    X(ag_check_finite, tape, ag_check_finite(NULL, 1))                                             \
    X(ag_first_nonfinite, tape, ag_first_nonfinite(NULL))                                          \
    X(ag_nonfinite_message, r, ag_nonfinite_message(NULL))                                         \
    X(ag_gradcheck, tape, ag_gradcheck(NULL, gc_fn, NULL, INPUTS, 1, 1e-3, 1e-3, NULL))            \
    X(ag_gradcheck, fn, ag_gradcheck(&TP, NULL, NULL, INPUTS, 1, 1e-3, 1e-3, NULL))                \
    X(ag_gradcheck, inputs, ag_gradcheck(&TP, gc_fn, NULL, NULL, 1, 1e-3, 1e-3, NULL))             \
    X(ag_gradcheck_print, res, ag_gradcheck_print(NULL, stderr))                                   \
    X(ag_gradcheck_print, f, ag_gradcheck_print(&GCR, NULL))                                       \
    X(ag_attn_mask_bool, tape, ag_attn_mask_bool(NULL, (const uint8_t[]){0}, 2, (int[]){1, 1}))    \
    X(ag_attn_mask_bool, blocked, ag_attn_mask_bool(&TP, NULL, 2, (int[]){1, 1}))                  \
    X(ag_attn_mask_bool, shape, ag_attn_mask_bool(&TP, (const uint8_t[]){0}, 2, NULL))             \
    /* autograd.h: the parameter list */                                                           \
    X(ag_params_init, pl, ag_params_init(NULL))                                                    \
    X(ag_params_free, pl, ag_params_free(NULL))                                                    \
    X(ag_params_add, pl, ag_params_add(NULL, &T))                                                  \
    X(ag_params_add, t, ag_params_add(&PL, NULL))                                                  \
    X(ag_params_find, pl, ag_params_find(NULL, "w"))                                               \
    X(ag_params_find, name, ag_params_find(&PL, NULL))                                             \
    X(ag_params_count, pl, ag_params_count(NULL))                                                  \
    X(ag_params_zero_grad, pl, ag_params_zero_grad(NULL))                                          \
    X(ag_params_print, pl, ag_params_print(NULL, stderr))                                          \
    X(ag_params_print, f, ag_params_print(&PL, NULL))                                              \
    /* nn.h */                                                                                     \
    X(nn_builder, a, nn_builder(NULL, &PL, &R))                                                    \
    X(nn_builder, pl, nn_builder(&A, NULL, &R))                                                    \
    X(nn_scope, b, nn_scope(NULL, "x"))                                                            \
    X(nn_scope, fmt, nn_scope(&NB, NO_FMT))                                                        \
    X(nn_param, b, nn_param(NULL, "w", 1, (int[]){2}))                                             \
    X(nn_param, name, nn_param(&NB, NULL, 1, (int[]){2}))                                          \
    X(nn_param_rows, a, nn_param_rows(NULL, &T, 0, 1, "v"))                                        \
    X(nn_param_rows, p, nn_param_rows(&A, NULL, 0, 1, "v"))                                        \
    X(nn_param_rows, name, nn_param_rows(&A, &T, 0, 1, NULL))                                      \
    X(nn_param_rows_on, t, nn_param_rows_on(NULL, &T, 0, 1, "v"))                                  \
    X(nn_param_rows_on, p, nn_param_rows_on(&TP, NULL, 0, 1, "v"))                                 \
    X(nn_param_rows_on, name, nn_param_rows_on(&TP, &T, 0, 1, NULL))                               \
    X(nn_linear_init, l, nn_linear_init(NULL, &NB, "", 2, 3, NN_BIAS))                             \
    X(nn_linear_init, b, nn_linear_init(&LIN, NULL, "", 2, 3, NN_BIAS))                            \
    X(nn_linear_init, name, nn_linear_init(&LIN, &NB, NULL, 2, 3, NN_BIAS))                        \
    X(nn_linear, t, nn_linear(NULL, &LIN, &T))                                                     \
    X(nn_linear, l, nn_linear(&TP, NULL, &T))                                                      \
    X(nn_linear, x, nn_linear(&TP, &LIN, NULL))                                                    \
    X(nn_layernorm_init, ln, nn_layernorm_init(NULL, &NB, "", 4, 1e-5))                            \
    X(nn_layernorm_init, b, nn_layernorm_init(&LN, NULL, "", 4, 1e-5))                             \
    X(nn_layernorm_init, name, nn_layernorm_init(&LN, &NB, NULL, 4, 1e-5))                         \
    X(nn_layernorm, t, nn_layernorm(NULL, &LN, &T))                                                \
    X(nn_layernorm, ln, nn_layernorm(&TP, NULL, &T))                                               \
    X(nn_layernorm, x, nn_layernorm(&TP, &LN, NULL))                                               \
    X(nn_add_layernorm, t, nn_add_layernorm(NULL, &LN, &T, &T))                                    \
    X(nn_add_layernorm, ln, nn_add_layernorm(&TP, NULL, &T, &T))                                   \
    X(nn_add_layernorm, x, nn_add_layernorm(&TP, &LN, NULL, &T))                                   \
    X(nn_add_layernorm, f, nn_add_layernorm(&TP, &LN, &T, NULL))                                   \
    X(nn_embedding_init, e, nn_embedding_init(NULL, &NB, "", 5, 4, NN_NO_PADDING))                 \
    X(nn_embedding_init, b, nn_embedding_init(&EMB, NULL, "", 5, 4, NN_NO_PADDING))                \
    X(nn_embedding_init, name, nn_embedding_init(&EMB, &NB, NULL, 5, 4, NN_NO_PADDING))            \
    X(nn_embedding, t, nn_embedding(NULL, &EMB, IDS, 1, 2))                                        \
    X(nn_embedding, e, nn_embedding(&TP, NULL, IDS, 1, 2))                                         \
    X(nn_embedding, ids, nn_embedding(&TP, &EMB, NULL, 1, 2))                                      \
    X(nn_positional_init, pe, nn_positional_init(NULL, &NB, "", 8, 4, NN_SINUSOIDAL))              \
    X(nn_positional_init, b, nn_positional_init(&PE, NULL, "", 8, 4, NN_SINUSOIDAL))               \
    X(nn_positional_init, name, nn_positional_init(&PE, &NB, NULL, 8, 4, NN_SINUSOIDAL))           \
    X(nn_positional, t, nn_positional(NULL, &PE, &T, 0))                                           \
    X(nn_positional, pe, nn_positional(&TP, NULL, &T, 0))                                          \
    X(nn_positional, x, nn_positional(&TP, &PE, NULL, 0))                                          \
    X(nn_positions, t, nn_positions(NULL, &PE, 0, 1))                                              \
    X(nn_positions, pe, nn_positions(&TP, NULL, 0, 1))                                             \
    X(nn_ffn_init, f, nn_ffn_init(NULL, &NB, "", 4, 8, NN_RELU, 0))                                \
    X(nn_ffn_init, b, nn_ffn_init(&FF, NULL, "", 4, 8, NN_RELU, 0))                                \
    X(nn_ffn_init, name, nn_ffn_init(&FF, &NB, NULL, 4, 8, NN_RELU, 0))                            \
    X(nn_ffn, t, nn_ffn(NULL, &FF, &T, NULL))                                                      \
    X(nn_ffn, f, nn_ffn(&TP, NULL, &T, NULL))                                                      \
    X(nn_ffn, x, nn_ffn(&TP, &FF, NULL, NULL))                                                     \
    X(nn_mha_init, m, nn_mha_init(NULL, &NB, "", &MC))                                             \
    X(nn_mha_init, b, nn_mha_init(&MHA, NULL, "", &MC))                                            \
    X(nn_mha_init, name, nn_mha_init(&MHA, &NB, NULL, &MC))                                        \
    X(nn_mha_init, cfg, nn_mha_init(&MHA, &NB, "", NULL))                                          \
    X(nn_mha_track_gates, m, nn_mha_track_gates(NULL, 1))                                          \
    X(nn_mha_forward, t, nn_mha_forward(NULL, &MHA, &T, &T, &T, NULL, NULL))                       \
    X(nn_mha_forward, m, nn_mha_forward(&TP, NULL, &T, &T, &T, NULL, NULL))                        \
    X(nn_mha_forward, query, nn_mha_forward(&TP, &MHA, NULL, &T, &T, NULL, NULL))                  \
    X(nn_mha_forward, key, nn_mha_forward(&TP, &MHA, &T, NULL, &T, NULL, NULL))                    \
    X(nn_mha_forward, value, nn_mha_forward(&TP, &MHA, &T, &T, NULL, NULL, NULL))                  \
    X(nn_mha_forward_rows, t, nn_mha_forward_rows(NULL, &MHA, &T, NULL, &T, NULL, 0, 0))           \
    X(nn_mha_forward_rows, m, nn_mha_forward_rows(&TP, NULL, &T, NULL, &T, NULL, 0, 0))            \
    X(nn_mha_forward_rows, query, nn_mha_forward_rows(&TP, &MHA, NULL, NULL, &T, NULL, 0, 0))      \
    X(nn_mha_forward_rows, key_value, nn_mha_forward_rows(&TP, &MHA, &T, NULL, NULL, NULL, 0, 0))  \
    X(nn_mha_project_kv, t, nn_mha_project_kv(NULL, &MHA, &T, 0))                                  \
    X(nn_mha_project_kv, m, nn_mha_project_kv(&TP, NULL, &T, 0))                                   \
    X(nn_mha_project_kv, x, nn_mha_project_kv(&TP, &MHA, NULL, 0))                                 \
    X(nn_mha_forward_kv, t, nn_mha_forward_kv(NULL, &MHA, &T, &T, &T, NULL, NULL))                 \
    X(nn_mha_forward_kv, m, nn_mha_forward_kv(&TP, NULL, &T, &T, &T, NULL, NULL))                  \
    X(nn_mha_forward_kv, query, nn_mha_forward_kv(&TP, &MHA, NULL, &T, &T, NULL, NULL))            \
    X(nn_mha_forward_kv, kh, nn_mha_forward_kv(&TP, &MHA, &T, NULL, &T, NULL, NULL))               \
    X(nn_mha_forward_kv, vh, nn_mha_forward_kv(&TP, &MHA, &T, &T, NULL, NULL, NULL))               \
    X(nn_kv_cache_init, c, nn_kv_cache_init(NULL, &MHA, 1, 4))                                     \
    X(nn_kv_cache_init, m, nn_kv_cache_init(&KV, NULL, 1, 4))                                      \
    X(nn_kv_cache_free, c, nn_kv_cache_free(NULL))                                                 \
    X(nn_mha_forward_cached, t, nn_mha_forward_cached(NULL, &MHA, &KV, &T))                        \
    X(nn_mha_forward_cached, m, nn_mha_forward_cached(&TP, NULL, &KV, &T))                         \
    X(nn_mha_forward_cached, c, nn_mha_forward_cached(&TP, &MHA, NULL, &T))                        \
    X(nn_mha_forward_cached, x, nn_mha_forward_cached(&TP, &MHA, &KV, NULL))                       \
    X(nn_encoder_layer_init, l, nn_encoder_layer_init(NULL, &NB, "", &TC))                         \
    X(nn_encoder_layer_init, b, nn_encoder_layer_init(&ENC, NULL, "", &TC))                        \
    X(nn_encoder_layer_init, name, nn_encoder_layer_init(&ENC, &NB, NULL, &TC))                    \
    X(nn_encoder_layer_init, cfg, nn_encoder_layer_init(&ENC, &NB, "", NULL))                      \
    X(nn_encoder_layer, t, nn_encoder_layer(NULL, &ENC, &T, NULL, NULL))                           \
    X(nn_encoder_layer, l, nn_encoder_layer(&TP, NULL, &T, NULL, NULL))                            \
    X(nn_encoder_layer, x, nn_encoder_layer(&TP, &ENC, NULL, NULL, NULL))                          \
    X(nn_decoder_layer_init, l, nn_decoder_layer_init(NULL, &NB, "", &TC))                         \
    X(nn_decoder_layer_init, b, nn_decoder_layer_init(&DEC, NULL, "", &TC))                        \
    X(nn_decoder_layer_init, name, nn_decoder_layer_init(&DEC, &NB, NULL, &TC))                    \
    X(nn_decoder_layer_init, cfg, nn_decoder_layer_init(&DEC, &NB, "", NULL))                      \
    X(nn_decoder_layer, t, nn_decoder_layer(NULL, &DEC, &T, &T, NULL, NULL, NULL))                 \
    X(nn_decoder_layer, l, nn_decoder_layer(&TP, NULL, &T, &T, NULL, NULL, NULL))                  \
    X(nn_decoder_layer, x, nn_decoder_layer(&TP, &DEC, NULL, &T, NULL, NULL, NULL))                \
    X(nn_decoder_layer, memory, nn_decoder_layer(&TP, &DEC, &T, NULL, NULL, NULL, NULL))           \
    X(nn_seq2seq_init, m, nn_seq2seq_init(NULL, &A, &R, &S2C))                                     \
    X(nn_seq2seq_init, a, nn_seq2seq_init(&S2S, NULL, &R, &S2C))                                   \
    X(nn_seq2seq_init, rng, nn_seq2seq_init(&S2S, &A, NULL, &S2C))                                 \
    X(nn_seq2seq_init, cfg, nn_seq2seq_init(&S2S, &A, &R, NULL))                                   \
    X(nn_seq2seq_free, m, nn_seq2seq_free(NULL))                                                   \
    X(nn_seq2seq_ckpt_config, cfg, nn_seq2seq_ckpt_config(NULL))                                   \
    X(nn_padding_mask, t, nn_padding_mask(NULL, IDS, 1, 2, 0))                                     \
    X(nn_padding_mask, ids, nn_padding_mask(&TP, NULL, 1, 2, 0))                                   \
    X(nn_seq2seq_encode, t, nn_seq2seq_encode(NULL, &S2S, IDS, 1, 2, NULL))                        \
    X(nn_seq2seq_encode, m, nn_seq2seq_encode(&TP, NULL, IDS, 1, 2, NULL))                         \
    X(nn_seq2seq_encode, src, nn_seq2seq_encode(&TP, &S2S, NULL, 1, 2, NULL))                      \
    X(nn_seq2seq_decode, t, nn_seq2seq_decode(NULL, &S2S, &T, IDS, 2, IDS, 1, 2, NULL))            \
    X(nn_seq2seq_decode, m, nn_seq2seq_decode(&TP, NULL, &T, IDS, 2, IDS, 1, 2, NULL))             \
    X(nn_seq2seq_decode, memory, nn_seq2seq_decode(&TP, &S2S, NULL, IDS, 2, IDS, 1, 2, NULL))      \
    X(nn_seq2seq_decode, src, nn_seq2seq_decode(&TP, &S2S, &T, NULL, 2, IDS, 1, 2, NULL))          \
    X(nn_seq2seq_decode, tgt_in, nn_seq2seq_decode(&TP, &S2S, &T, IDS, 2, NULL, 1, 2, NULL))       \
    X(nn_seq2seq_loss, t, nn_seq2seq_loss(NULL, &S2S, IDS, 2, IDS, IDS, 1, 2, NULL))               \
    X(nn_seq2seq_loss, m, nn_seq2seq_loss(&TP, NULL, IDS, 2, IDS, IDS, 1, 2, NULL))                \
    X(nn_seq2seq_loss, src, nn_seq2seq_loss(&TP, &S2S, NULL, 2, IDS, IDS, 1, 2, NULL))             \
    X(nn_seq2seq_loss, tgt_in, nn_seq2seq_loss(&TP, &S2S, IDS, 2, NULL, IDS, 1, 2, NULL))          \
    X(nn_seq2seq_loss, tgt_out, nn_seq2seq_loss(&TP, &S2S, IDS, 2, IDS, NULL, 1, 2, NULL))         \
    X(nn_decode_begin, s, nn_decode_begin(NULL, &S2S, &T, IDS, 1, 2, 4))                           \
    X(nn_decode_begin, m, nn_decode_begin(&DS, NULL, &T, IDS, 1, 2, 4))                            \
    X(nn_decode_begin, memory, nn_decode_begin(&DS, &S2S, NULL, IDS, 1, 2, 4))                     \
    X(nn_decode_begin, src, nn_decode_begin(&DS, &S2S, &T, NULL, 1, 2, 4))                         \
    X(nn_decode_step, t, nn_decode_step(NULL, &S2S, &DS, IDS))                                     \
    X(nn_decode_step, m, nn_decode_step(&TP, NULL, &DS, IDS))                                      \
    X(nn_decode_step, s, nn_decode_step(&TP, &S2S, NULL, IDS))                                     \
    X(nn_decode_step, tokens, nn_decode_step(&TP, &S2S, &DS, NULL))                                \
    X(nn_decode_end, s, nn_decode_end(NULL))                                                       \
    X(nn_seq2seq_greedy, t, nn_seq2seq_greedy(NULL, &S2S, IDS, 1, 2, 1, 2, 4, OUTI, OUTI))         \
    X(nn_seq2seq_greedy, m, nn_seq2seq_greedy(&TP, NULL, IDS, 1, 2, 1, 2, 4, OUTI, OUTI))          \
    X(nn_seq2seq_greedy, src, nn_seq2seq_greedy(&TP, &S2S, NULL, 1, 2, 1, 2, 4, OUTI, OUTI))       \
    X(nn_seq2seq_greedy, out, nn_seq2seq_greedy(&TP, &S2S, IDS, 1, 2, 1, 2, 4, NULL, OUTI))        \
    X(nn_seq2seq_greedy, lens, nn_seq2seq_greedy(&TP, &S2S, IDS, 1, 2, 1, 2, 4, OUTI, NULL))       \
    X(nn_seq2seq_beam, t, nn_seq2seq_beam(NULL, &S2S, IDS, 2, 1, 2, 2, 4, 0.6, OUTI))              \
    X(nn_seq2seq_beam, m, nn_seq2seq_beam(&TP, NULL, IDS, 2, 1, 2, 2, 4, 0.6, OUTI))               \
    X(nn_seq2seq_beam, src, nn_seq2seq_beam(&TP, &S2S, NULL, 2, 1, 2, 2, 4, 0.6, OUTI))            \
    X(nn_seq2seq_beam, out, nn_seq2seq_beam(&TP, &S2S, IDS, 2, 1, 2, 2, 4, 0.6, NULL))             \
    /* optim.h */                                                                                  \
    X(optim_schedule_lr, s, optim_schedule_lr(NULL, 1e-3, 1))                                      \
    X(optim_new, a, optim_new(NULL, &PL, &OC))                                                     \
    X(optim_new, pl, optim_new(&A, NULL, &OC))                                                     \
    X(optim_new, cfg, optim_new(&A, &PL, NULL))                                                    \
    X(optim_lr, o, optim_lr(NULL))                                                                 \
    X(optim_step, o, optim_step(NULL))                                                             \
    X(optim_step_zero_grad, o, optim_step_zero_grad(NULL))                                         \
    X(optim_step_decay, o, optim_step_decay(NULL, 0.1, 2))                                         \
    X(optim_state_count, o, optim_state_count(NULL))                                               \
    X(optim_state_tensor, o, optim_state_tensor(NULL, 0))                                          \
    X(optim_get_step, o, optim_get_step(NULL))                                                     \
    X(optim_set_step, o, optim_set_step(NULL, 1))                                                  \
    X(optim_clip_grad_norm, pl, optim_clip_grad_norm(NULL, 1))                                     \
    X(optim_check_config, c, optim_check_config(NULL))                                             \
    /* checkpoint.h */                                                                             \
    X(ckpt_save, path, ckpt_save(NULL, &CK, 0, NULL))                                              \
    X(ckpt_save, c, ckpt_save("x.npz", NULL, 0, NULL))                                             \
    X(ckpt_load, path, ckpt_load(NULL, &CK))                                                       \
    X(ckpt_load, c, ckpt_load("x.npz", NULL))                                                      \
    X(ckpt_read, path, ckpt_read(NULL, NULL, (NpzFile *[1]){0}))                                   \
    X(ckpt_read, out, ckpt_read("x.npz", NULL, NULL))                                              \
    X(ckpt_optim_config, f, ckpt_optim_config(NULL, &OC, (int[1]){0}))                             \
    X(ckpt_optim_config, o, ckpt_optim_config(&NF, NULL, (int[1]){0}))                             \
    X(ckpt_optim_config, has, ckpt_optim_config(&NF, &OC, NULL))                                   \
    X(ckpt_load_from, f, ckpt_load_from(NULL, &CK))                                                \
    X(ckpt_load_from, c, ckpt_load_from(&NF, NULL))                                                \
    X(ckpt_read_run, f, ckpt_read_run(NULL, &CK.run))                                              \
    X(ckpt_read_run, run, ckpt_read_run(&NF, NULL))                                                \
    X(nn_seq2seq_check_config, cfg, nn_seq2seq_check_config(NULL, NULL, NULL))                     \
    /* gpt.h */                                                                                    \
    X(nn_gpt_check_config, c, nn_gpt_check_config(NULL, NULL))                                     \
    X(nn_gpt_options, c, nn_gpt_options(NULL))                                                     \
    X(nn_gpt_init, m, nn_gpt_init(NULL, &A, &R, &GPC))                                             \
    X(nn_gpt_init, a, nn_gpt_init(&GPT, NULL, &R, &GPC))                                           \
    X(nn_gpt_init, rng, nn_gpt_init(&GPT, &A, NULL, &GPC))                                         \
    X(nn_gpt_init, cfg, nn_gpt_init(&GPT, &A, &R, NULL))                                           \
    X(nn_gpt_init_unset, m, nn_gpt_init_unset(NULL, &A, &GPC))                                     \
    X(nn_gpt_init_unset, a, nn_gpt_init_unset(&GPT, NULL, &GPC))                                   \
    X(nn_gpt_init_unset, cfg, nn_gpt_init_unset(&GPT, &A, NULL))                                   \
    X(nn_gpt_free, m, nn_gpt_free(NULL))                                                           \
    X(nn_gpt_forward, t, nn_gpt_forward(NULL, &GPT, (int[]){0}, 1, 1, NULL))                       \
    X(nn_gpt_forward, m, nn_gpt_forward(&TP, NULL, (int[]){0}, 1, 1, NULL))                        \
    X(nn_gpt_forward, idx, nn_gpt_forward(&TP, &GPT, NULL, 1, 1, NULL))                            \
    X(nn_gpt_unembed, t, nn_gpt_unembed(NULL, &GPT, &T))                                           \
    X(nn_gpt_unembed, m, nn_gpt_unembed(&TP, NULL, &T))                                            \
    X(nn_gpt_unembed, x, nn_gpt_unembed(&TP, &GPT, NULL))                                          \
    X(nn_gpt_loss, t, nn_gpt_loss(NULL, &GPT, (int[]){0}, (int[]){0}, 1, 1, NULL))                 \
    X(nn_gpt_loss, m, nn_gpt_loss(&TP, NULL, (int[]){0}, (int[]){0}, 1, 1, NULL))                  \
    X(nn_gpt_loss, idx, nn_gpt_loss(&TP, &GPT, NULL, (int[]){0}, 1, 1, NULL))                      \
    X(nn_gpt_loss, targets, nn_gpt_loss(&TP, &GPT, (int[]){0}, NULL, 1, 1, NULL))                  \
    X(nn_gpt_loss_over, t, nn_gpt_loss_over(NULL, &GPT, (int[2]){0}, 2, 1, (int64_t[1]){0}))       \
    X(nn_gpt_loss_over, m, nn_gpt_loss_over(&TP, NULL, (int[2]){0}, 2, 1, (int64_t[1]){0}))        \
    X(nn_gpt_loss_over, tokens, nn_gpt_loss_over(&TP, &GPT, NULL, 2, 1, (int64_t[1]){0}))          \
    X(nn_gpt_loss_over, n_pred, nn_gpt_loss_over(&TP, &GPT, (int[2]){0}, 2, 1, NULL))              \
    X(nn_gpt_ckpt_config, cfg, nn_gpt_ckpt_config(NULL))                                           \
    X(nn_gpt_cache_init, c, nn_gpt_cache_init(NULL, &GPT, 1, 1))                                   \
    X(nn_gpt_cache_init, m, nn_gpt_cache_init(&GCA, NULL, 1, 1))                                   \
    X(nn_gpt_cache_free, c, nn_gpt_cache_free(NULL))                                               \
    X(nn_gpt_forward_cached, t, nn_gpt_forward_cached(NULL, &GPT, &GCA, (int[]){0}, 1, 1))         \
    X(nn_gpt_forward_cached, m, nn_gpt_forward_cached(&TP, NULL, &GCA, (int[]){0}, 1, 1))          \
    X(nn_gpt_forward_cached, c, nn_gpt_forward_cached(&TP, &GPT, NULL, (int[]){0}, 1, 1))          \
    X(nn_gpt_forward_cached, idx, nn_gpt_forward_cached(&TP, &GPT, &GCA, NULL, 1, 1))              \
    X(nn_gpt_generate, t, nn_gpt_generate(NULL, &GPT, (int[2]){0}, 1, 1, &SMP, &R, NULL, NULL))    \
    X(nn_gpt_generate, m, nn_gpt_generate(&TP, NULL, (int[2]){0}, 1, 1, &SMP, &R, NULL, NULL))     \
    X(nn_gpt_generate, ids, nn_gpt_generate(&TP, &GPT, NULL, 1, 1, &SMP, &R, NULL, NULL))          \
    X(nn_gpt_generate, s, nn_gpt_generate(&TP, &GPT, (int[2]){0}, 1, 1, NULL, &R, NULL, NULL))     \
    X(nn_gpt_forward_hooked, t, nn_gpt_forward_hooked(NULL, &GPT, IDS, 1, 1, NULL, &HK))           \
    X(nn_gpt_forward_hooked, m, nn_gpt_forward_hooked(&TP, NULL, IDS, 1, 1, NULL, &HK))            \
    X(nn_gpt_forward_hooked, idx, nn_gpt_forward_hooked(&TP, &GPT, NULL, 1, 1, NULL, &HK))         \
    X(nn_gpt_forward_hooked, hooks, nn_gpt_forward_hooked(&TP, &GPT, IDS, 1, 1, NULL, NULL))       \
    /* hooks.h */                                                                                  \
    X(nn_hooks_init, h, nn_hooks_init(NULL, 1))                                                    \
    X(nn_hooks_free, h, nn_hooks_free(NULL))                                                       \
    X(nn_hooks_add, h, nn_hooks_add(NULL, "*", hook_fn, NULL))                                     \
    X(nn_hooks_add, pattern, nn_hooks_add(&HK, NULL, hook_fn, NULL))                               \
    X(nn_hooks_add, fn, nn_hooks_add(&HK, "*", NULL, NULL))                                        \
    X(nn_hook_glob, pattern, nn_hook_glob(NULL, "x"))                                              \
    X(nn_hook_glob, name, nn_hook_glob("x", NULL))                                                 \
    X(nn_hook_find, name, nn_hook_find(NULL, 1, &HP))                                              \
    X(nn_hook_find, out, nn_hook_find("hook_embed", 1, NULL))                                      \
    X(nn_hook_run, t, nn_hook_run(NULL, &HK, NN_HOOK_EMBED, -1, &T))                               \
    X(nn_hook_run, h, nn_hook_run(&TP, NULL, NN_HOOK_EMBED, -1, &T))                               \
    X(nn_hook_run, x, nn_hook_run(&TP, &HK, NN_HOOK_EMBED, -1, NULL))                              \
    X(nn_hook_heads, t, nn_hook_heads(NULL, &HK, NN_HOOK_Z, 0, &T, 1))                             \
    X(nn_hook_heads, h, nn_hook_heads(&TP, NULL, NN_HOOK_Z, 0, &T, 1))                             \
    X(nn_hook_heads, x, nn_hook_heads(&TP, &HK, NN_HOOK_Z, 0, NULL, 1))                            \
    X(nn_hook_norm_scale, t, nn_hook_norm_scale(NULL, &HK, NN_HOOK_LN1_SCALE, 0, &T, 1e-5, 0))     \
    X(nn_hook_norm_scale, h, nn_hook_norm_scale(&TP, NULL, NN_HOOK_LN1_SCALE, 0, &T, 1e-5, 0))     \
    X(nn_hook_norm_scale, x, nn_hook_norm_scale(&TP, &HK, NN_HOOK_LN1_SCALE, 0, NULL, 1e-5, 0))    \
    X(nn_hook_norm, t, nn_hook_norm(NULL, &HK, NN_HOOK_LN1_SCALE, 0, &T, &T, NULL, 1e-5, 0))       \
    X(nn_hook_norm, h, nn_hook_norm(&TP, NULL, NN_HOOK_LN1_SCALE, 0, &T, &T, NULL, 1e-5, 0))       \
    X(nn_hook_norm, x, nn_hook_norm(&TP, &HK, NN_HOOK_LN1_SCALE, 0, NULL, &T, NULL, 1e-5, 0))      \
    X(nn_hook_norm, weight, nn_hook_norm(&TP, &HK, NN_HOOK_LN1_SCALE, 0, &T, NULL, NULL, 1e-5, 0)) \
    X(nn_hook_attention, t, nn_hook_attention(NULL, &HK, 0, &T, &T, &T, 1, 0, NULL, NULL))         \
    X(nn_hook_attention, h, nn_hook_attention(&TP, NULL, 0, &T, &T, &T, 1, 0, NULL, NULL))         \
    X(nn_hook_attention, q, nn_hook_attention(&TP, &HK, 0, NULL, &T, &T, 1, 0, NULL, NULL))        \
    X(nn_hook_attention, k, nn_hook_attention(&TP, &HK, 0, &T, NULL, &T, 1, 0, NULL, NULL))        \
    X(nn_hook_attention, v, nn_hook_attention(&TP, &HK, 0, &T, &T, NULL, 1, 0, NULL, NULL))        \
    X(nn_hooks_init_seq2seq, h, nn_hooks_init_seq2seq(NULL, 1, 1))                                 \
    X(nn_hooks_init_like, h, nn_hooks_init_like(NULL, &HK))                                        \
    X(nn_hooks_init_like, like, nn_hooks_init_like(&HK, NULL))                                     \
    X(nn_hooks_find, h, nn_hooks_find(NULL, "hook_embed", &HP))                                    \
    X(nn_hooks_find, name, nn_hooks_find(&HK, NULL, &HP))                                          \
    X(nn_hooks_find, out, nn_hooks_find(&HK, "hook_embed", NULL))                                  \
    X(nn_hook_entry_point, e, nn_hook_entry_point(NULL))                                           \
    X(nn_hook_attend, t, nn_hook_attend(NULL, &HK, &HA, &T, &T, &T))                               \
    X(nn_hook_attend, h, nn_hook_attend(&TP, NULL, &HA, &T, &T, &T))                               \
    X(nn_hook_attend, a, nn_hook_attend(&TP, &HK, NULL, &T, &T, &T))                               \
    X(nn_hook_attend, q, nn_hook_attend(&TP, &HK, &HA, NULL, &T, &T))                              \
    X(nn_hook_attend, k, nn_hook_attend(&TP, &HK, &HA, &T, NULL, &T))                              \
    X(nn_hook_attend, v, nn_hook_attend(&TP, &HK, &HA, &T, &T, NULL))                              \
    X(nn_hook_attention_at, t, nn_hook_attention_at(NULL, &HK, &HA, &T, &T, &T))                   \
    X(nn_hook_attention_at, h, nn_hook_attention_at(&TP, NULL, &HA, &T, &T, &T))                   \
    X(nn_hook_attention_at, a, nn_hook_attention_at(&TP, &HK, NULL, &T, &T, &T))                   \
    X(nn_hook_attention_at, q, nn_hook_attention_at(&TP, &HK, &HA, NULL, &T, &T))                  \
    X(nn_hook_attention_at, k, nn_hook_attention_at(&TP, &HK, &HA, &T, NULL, &T))                  \
    X(nn_hook_attention_at, v, nn_hook_attention_at(&TP, &HK, &HA, &T, &T, NULL))                  \
    X(nn_mha_forward_hooked, t, nn_mha_forward_hooked(NULL, &MHA, &T, &T, NULL, NULL, &HK, &HA))   \
    X(nn_mha_forward_hooked, m, nn_mha_forward_hooked(&TP, NULL, &T, &T, NULL, NULL, &HK, &HA))    \
    X(nn_mha_forward_hooked, query,                                                                \
      nn_mha_forward_hooked(&TP, &MHA, NULL, &T, NULL, NULL, &HK, &HA))                            \
    X(nn_mha_forward_hooked, key_value,                                                            \
      nn_mha_forward_hooked(&TP, &MHA, &T, NULL, NULL, NULL, &HK, &HA))                            \
    X(nn_mha_forward_hooked, h, nn_mha_forward_hooked(&TP, &MHA, &T, &T, NULL, NULL, NULL, &HA))   \
    X(nn_mha_forward_hooked, a, nn_mha_forward_hooked(&TP, &MHA, &T, &T, NULL, NULL, &HK, NULL))   \
    X(nn_gpt_forward_cached_hooked, t,                                                             \
      nn_gpt_forward_cached_hooked(NULL, &GPT, &GCA, IDS, 1, 1, &HK))                              \
    X(nn_gpt_forward_cached_hooked, m,                                                             \
      nn_gpt_forward_cached_hooked(&TP, NULL, &GCA, IDS, 1, 1, &HK))                               \
    X(nn_gpt_forward_cached_hooked, c,                                                             \
      nn_gpt_forward_cached_hooked(&TP, &GPT, NULL, IDS, 1, 1, &HK))                               \
    X(nn_gpt_forward_cached_hooked, idx,                                                           \
      nn_gpt_forward_cached_hooked(&TP, &GPT, &GCA, NULL, 1, 1, &HK))                              \
    X(nn_gpt_forward_cached_hooked, hooks,                                                         \
      nn_gpt_forward_cached_hooked(&TP, &GPT, &GCA, IDS, 1, 1, NULL))                              \
    X(nn_seq2seq_dropouts, m, nn_seq2seq_dropouts(NULL, (double *[1]){0}))                         \
    X(nn_seq2seq_dropouts, p, nn_seq2seq_dropouts(&S2S, NULL))                                     \
    X(nn_seq2seq_need_weights, m, nn_seq2seq_need_weights(NULL, 0))                                \
    X(nn_seq2seq_forward_hooked, t,                                                                \
      nn_seq2seq_forward_hooked(NULL, &S2S, IDS, 1, IDS, 1, 1, NULL, &HK))                         \
    X(nn_seq2seq_forward_hooked, m,                                                                \
      nn_seq2seq_forward_hooked(&TP, NULL, IDS, 1, IDS, 1, 1, NULL, &HK))                          \
    X(nn_seq2seq_forward_hooked, src,                                                              \
      nn_seq2seq_forward_hooked(&TP, &S2S, NULL, 1, IDS, 1, 1, NULL, &HK))                         \
    X(nn_seq2seq_forward_hooked, tgt_in,                                                           \
      nn_seq2seq_forward_hooked(&TP, &S2S, IDS, 1, NULL, 1, 1, NULL, &HK))                         \
    X(nn_seq2seq_forward_hooked, hooks,                                                            \
      nn_seq2seq_forward_hooked(&TP, &S2S, IDS, 1, IDS, 1, 1, NULL, NULL))                         \
    /* lens.h */                                                                                   \
    X(lens_cache_init, c, lens_cache_init(NULL, 0))                                                \
    X(lens_cache_free, c, lens_cache_free(NULL))                                                   \
    X(lens_cache_get, c, lens_cache_get(NULL, "x"))                                                \
    X(lens_cache_get, name, lens_cache_get(&LC, NULL))                                             \
    X(lens_hooks_add_list, h, lens_hooks_add_list(NULL, "*", "--hooks", hook_fn, NULL))            \
    X(lens_hooks_add_list, list, lens_hooks_add_list(&HK, NULL, "--hooks", hook_fn, NULL))         \
    X(lens_hooks_add_list, flag, lens_hooks_add_list(&HK, "*", NULL, hook_fn, NULL))               \
    X(lens_hooks_add_list, fn, lens_hooks_add_list(&HK, "*", "--hooks", NULL, NULL))               \
    X(lens_cache_hook, t, lens_cache_hook(NULL, &TX, &HP, &LC))                                    \
    X(lens_cache_hook, x, lens_cache_hook(&TP, NULL, &HP, &LC))                                    \
    X(lens_cache_hook, at, lens_cache_hook(&TP, &TX, NULL, &LC))                                   \
    X(lens_cache_hook, ctx, lens_cache_hook(&TP, &TX, &HP, NULL))                                  \
    X(lens_ablate_hook, t, lens_ablate_hook(NULL, &TX, &HP, &LC))                                  \
    X(lens_ablate_hook, x, lens_ablate_hook(&TP, NULL, &HP, &LC))                                  \
    X(lens_ablate_hook, at, lens_ablate_hook(&TP, &TX, NULL, &LC))                                 \
    X(lens_ablate_hook, ctx, lens_ablate_hook(&TP, &TX, &HP, NULL))                                \
    X(lens_patch_hook, t, lens_patch_hook(NULL, &TX, &HP, &LC))                                    \
    X(lens_patch_hook, x, lens_patch_hook(&TP, NULL, &HP, &LC))                                    \
    X(lens_patch_hook, at, lens_patch_hook(&TP, &TX, NULL, &LC))                                   \
    X(lens_patch_hook, ctx, lens_patch_hook(&TP, &TX, &HP, NULL))                                  \
    X(lens_cache_take_grads, c, lens_cache_take_grads(NULL))                                       \
    X(lens_cache_save, c, lens_cache_save(NULL, "x.npz", &LRI))                                    \
    X(lens_cache_save, path, lens_cache_save(&LC, NULL, &LRI))                                     \
    X(lens_cache_save, run, lens_cache_save(&LC, "x.npz", NULL))                                   \
    X(lens_metric, t, lens_metric(NULL, &LM, &T))                                                  \
    X(lens_metric, mt, lens_metric(&TP, NULL, &T))                                                 \
    X(lens_metric, logits, lens_metric(&TP, &LM, NULL))                                            \
    X(lens_logit_diff_metric, kind,                                                                \
      lens_logit_diff_metric(NULL, "a", "b", -1, 1, 1, tok_fn, NULL, &LOM))                        \
    X(lens_logit_diff_metric, token,                                                               \
      lens_logit_diff_metric("logit-diff", "a", "b", -1, 1, 1, NULL, NULL, &LOM))                  \
    X(lens_logit_diff_metric, m,                                                                   \
      lens_logit_diff_metric("logit-diff", "a", "b", -1, 1, 1, tok_fn, NULL, NULL))                \
    X(lens_owned_metric_free, m, lens_owned_metric_free(NULL))                                     \
    X(lens_patch_sweep, t, lens_patch_sweep(NULL, &GPT, IDS, IDS, 1, 1, "*", 0, &LM, &LSW))        \
    X(lens_patch_sweep, m, lens_patch_sweep(&TP, NULL, IDS, IDS, 1, 1, "*", 0, &LM, &LSW))         \
    X(lens_patch_sweep, clean, lens_patch_sweep(&TP, &GPT, NULL, IDS, 1, 1, "*", 0, &LM, &LSW))    \
    X(lens_patch_sweep, corrupt, lens_patch_sweep(&TP, &GPT, IDS, NULL, 1, 1, "*", 0, &LM, &LSW))  \
    X(lens_patch_sweep, pattern, lens_patch_sweep(&TP, &GPT, IDS, IDS, 1, 1, NULL, 0, &LM, &LSW))  \
    X(lens_patch_sweep, mt, lens_patch_sweep(&TP, &GPT, IDS, IDS, 1, 1, "*", 0, NULL, &LSW))       \
    X(lens_patch_sweep, out, lens_patch_sweep(&TP, &GPT, IDS, IDS, 1, 1, "*", 0, &LM, NULL))       \
    X(lens_attribute, t, lens_attribute(NULL, &GPT, IDS, IDS, 1, 1, "*", 0, &LM, &LSW))            \
    X(lens_attribute, m, lens_attribute(&TP, NULL, IDS, IDS, 1, 1, "*", 0, &LM, &LSW))             \
    X(lens_attribute, clean, lens_attribute(&TP, &GPT, NULL, IDS, 1, 1, "*", 0, &LM, &LSW))        \
    X(lens_attribute, corrupt, lens_attribute(&TP, &GPT, IDS, NULL, 1, 1, "*", 0, &LM, &LSW))      \
    X(lens_attribute, pattern, lens_attribute(&TP, &GPT, IDS, IDS, 1, 1, NULL, 0, &LM, &LSW))      \
    X(lens_attribute, mt, lens_attribute(&TP, &GPT, IDS, IDS, 1, 1, "*", 0, NULL, &LSW))           \
    X(lens_attribute, out, lens_attribute(&TP, &GPT, IDS, IDS, 1, 1, "*", 0, &LM, NULL))           \
    X(lens_sweep_free, s, lens_sweep_free(NULL))                                                   \
    X(lens_gpt, m, lens_gpt(NULL))                                                                 \
    X(lens_seq2seq, m, lens_seq2seq(NULL))                                                         \
    X(lens_patch_sweep_model, t, lens_patch_sweep_model(NULL, &LMO, IDS, IDS, "*", 0, &LM, &LSW))  \
    X(lens_patch_sweep_model, lm, lens_patch_sweep_model(&TP, NULL, IDS, IDS, "*", 0, &LM, &LSW))  \
    X(lens_patch_sweep_model, clean,                                                               \
      lens_patch_sweep_model(&TP, &LMO, NULL, IDS, "*", 0, &LM, &LSW))                             \
    X(lens_patch_sweep_model, corrupt,                                                             \
      lens_patch_sweep_model(&TP, &LMO, IDS, NULL, "*", 0, &LM, &LSW))                             \
    X(lens_patch_sweep_model, pattern,                                                             \
      lens_patch_sweep_model(&TP, &LMO, IDS, IDS, NULL, 0, &LM, &LSW))                             \
    X(lens_patch_sweep_model, mt, lens_patch_sweep_model(&TP, &LMO, IDS, IDS, "*", 0, NULL, &LSW)) \
    X(lens_patch_sweep_model, out, lens_patch_sweep_model(&TP, &LMO, IDS, IDS, "*", 0, &LM, NULL)) \
    X(lens_attribute_model, t, lens_attribute_model(NULL, &LMO, IDS, IDS, "*", 0, &LM, &LSW))      \
    X(lens_attribute_model, lm, lens_attribute_model(&TP, NULL, IDS, IDS, "*", 0, &LM, &LSW))      \
    X(lens_attribute_model, clean, lens_attribute_model(&TP, &LMO, NULL, IDS, "*", 0, &LM, &LSW))  \
    X(lens_attribute_model, corrupt,                                                               \
      lens_attribute_model(&TP, &LMO, IDS, NULL, "*", 0, &LM, &LSW))                               \
    X(lens_attribute_model, pattern,                                                               \
      lens_attribute_model(&TP, &LMO, IDS, IDS, NULL, 0, &LM, &LSW))                               \
    X(lens_attribute_model, mt, lens_attribute_model(&TP, &LMO, IDS, IDS, "*", 0, NULL, &LSW))     \
    X(lens_attribute_model, out, lens_attribute_model(&TP, &LMO, IDS, IDS, "*", 0, &LM, NULL))     \
    X(lens_ablate_sweep_model, t,                                                                  \
      lens_ablate_sweep_model(NULL, &LMO, IDS, "*", 0, NULL, 0, &LM, &LAT))                        \
    X(lens_ablate_sweep_model, lm,                                                                 \
      lens_ablate_sweep_model(&TP, NULL, IDS, "*", 0, NULL, 0, &LM, &LAT))                         \
    X(lens_ablate_sweep_model, input,                                                              \
      lens_ablate_sweep_model(&TP, &LMO, NULL, "*", 0, NULL, 0, &LM, &LAT))                        \
    X(lens_ablate_sweep_model, pattern,                                                            \
      lens_ablate_sweep_model(&TP, &LMO, IDS, NULL, 0, NULL, 0, &LM, &LAT))                        \
    X(lens_ablate_sweep_model, mt,                                                                 \
      lens_ablate_sweep_model(&TP, &LMO, IDS, "*", 0, NULL, 0, NULL, &LAT))                        \
    X(lens_ablate_sweep_model, out,                                                                \
      lens_ablate_sweep_model(&TP, &LMO, IDS, "*", 0, NULL, 0, &LM, NULL))                         \
    X(lens_ablate_table_free, a, lens_ablate_table_free(NULL))                                     \
    X(lens_sweep_save, s, lens_sweep_save(NULL, "x.npz"))                                          \
    X(lens_sweep_save, path, lens_sweep_save(&LSW, NULL))                                          \
    /* detect.h, logit.h, export.h */                                                              \
    X(lens_detection_pattern, tokens, lens_detection_pattern(0, NULL, 1, (uint8_t[1]){0}))         \
    X(lens_detection_pattern, D, lens_detection_pattern(0, IDS, 1, NULL))                          \
    X(lens_detect_heads, pattern, lens_detect_heads(NULL, IDS, 1, 1, 0, NULL, (double[1]){0}))     \
    X(lens_detect_heads, tokens, lens_detect_heads(&T, NULL, 1, 1, 0, NULL, (double[1]){0}))       \
    X(lens_detect_heads, scores, lens_detect_heads(&T, IDS, 1, 1, 0, NULL, NULL))                  \
    X(lens_detect_gpt, t, lens_detect_gpt(NULL, &GPT, IDS, 1, 1, NULL, (double[1]){0}))            \
    X(lens_detect_gpt, m, lens_detect_gpt(&TP, NULL, IDS, 1, 1, NULL, (double[1]){0}))             \
    X(lens_detect_gpt, tokens, lens_detect_gpt(&TP, &GPT, NULL, 1, 1, NULL, (double[1]){0}))       \
    X(lens_detect_gpt, scores, lens_detect_gpt(&TP, &GPT, IDS, 1, 1, NULL, NULL))                  \
    X(lens_detect_diagonal, pattern, lens_detect_diagonal(NULL, 1, (double[1]){0}))                \
    X(lens_detect_diagonal, scores, lens_detect_diagonal(&T, 1, NULL))                             \
    X(lens_detect_seq2seq, t,                                                                      \
      lens_detect_seq2seq(NULL, &S2S, IDS, 1, IDS, 1, 1, NULL, D1, D1, D1))                        \
    X(lens_detect_seq2seq, m, lens_detect_seq2seq(&TP, NULL, IDS, 1, IDS, 1, 1, NULL, D1, D1, D1)) \
    X(lens_detect_seq2seq, src,                                                                    \
      lens_detect_seq2seq(&TP, &S2S, NULL, 1, IDS, 1, 1, NULL, D1, D1, D1))                        \
    X(lens_detect_seq2seq, tgt,                                                                    \
      lens_detect_seq2seq(&TP, &S2S, IDS, 1, NULL, 1, 1, NULL, D1, D1, D1))                        \
    X(lens_detect_seq2seq, enc,                                                                    \
      lens_detect_seq2seq(&TP, &S2S, IDS, 1, IDS, 1, 1, NULL, NULL, D1, D1))                       \
    X(lens_detect_seq2seq, dec,                                                                    \
      lens_detect_seq2seq(&TP, &S2S, IDS, 1, IDS, 1, 1, NULL, D1, NULL, D1))                       \
    X(lens_detect_seq2seq, cross,                                                                  \
      lens_detect_seq2seq(&TP, &S2S, IDS, 1, IDS, 1, 1, NULL, D1, D1, NULL))                       \
    X(lens_repeated_tokens, r, lens_repeated_tokens(NULL, 2, 1, 1, 1, (int[1]){0}))                \
    X(lens_repeated_tokens, tokens, lens_repeated_tokens(&R, 2, 1, 1, 1, NULL))                    \
    X(lens_logit_run, t, lens_logit_run(NULL, &GPT, IDS, 1, 1, IDS, NULL, -1, &LL))                \
    X(lens_logit_run, m, lens_logit_run(&TP, NULL, IDS, 1, 1, IDS, NULL, -1, &LL))                 \
    X(lens_logit_run, ids, lens_logit_run(&TP, &GPT, NULL, 1, 1, IDS, NULL, -1, &LL))              \
    X(lens_logit_run, good, lens_logit_run(&TP, &GPT, IDS, 1, 1, NULL, IDS, -1, &LL))              \
    X(lens_logit_run, out, lens_logit_run(&TP, &GPT, IDS, 1, 1, IDS, NULL, -1, NULL))              \
    X(lens_readout_gpt, m, lens_readout_gpt(NULL))                                                 \
    X(lens_readout_seq2seq, m, lens_readout_seq2seq(NULL))                                         \
    X(lens_logit_run_model, t,                                                                     \
      lens_logit_run_model(NULL, &LMO, IDS, &RO, IDS, 1, 1, IDS, NULL, -1, &LL))                   \
    X(lens_logit_run_model, lm,                                                                    \
      lens_logit_run_model(&TP, NULL, IDS, &RO, IDS, 1, 1, IDS, NULL, -1, &LL))                    \
    X(lens_logit_run_model, input,                                                                 \
      lens_logit_run_model(&TP, &LMO, NULL, &RO, IDS, 1, 1, IDS, NULL, -1, &LL))                   \
    X(lens_logit_run_model, ro,                                                                    \
      lens_logit_run_model(&TP, &LMO, IDS, NULL, IDS, 1, 1, IDS, NULL, -1, &LL))                   \
    X(lens_logit_run_model, next,                                                                  \
      lens_logit_run_model(&TP, &LMO, IDS, &RO, NULL, 1, 1, IDS, NULL, -1, &LL))                   \
    X(lens_logit_run_model, good,                                                                  \
      lens_logit_run_model(&TP, &LMO, IDS, &RO, IDS, 1, 1, NULL, IDS, -1, &LL))                    \
    X(lens_logit_run_model, out,                                                                   \
      lens_logit_run_model(&TP, &LMO, IDS, &RO, IDS, 1, 1, IDS, NULL, -1, NULL))                   \
    X(lens_logit_free, r, lens_logit_free(NULL))                                                   \
    X(lens_logit_save, r, lens_logit_save(NULL, IDS, IDS, NULL, "x.npz"))                          \
    X(lens_logit_save, ids, lens_logit_save(&LL, NULL, IDS, NULL, "x.npz"))                        \
    X(lens_logit_save, good, lens_logit_save(&LL, IDS, NULL, NULL, "x.npz"))                       \
    X(lens_logit_save, path, lens_logit_save(&LL, IDS, IDS, NULL, NULL))                           \
    X(lens_tl_check, cfg, lens_tl_check(NULL))                                                     \
    X(lens_tl_export, m, lens_tl_export(NULL, "x.npz", "x.json"))                                  \
    X(lens_tl_export, npz_path, lens_tl_export(&GPT, NULL, "x.json"))                              \
    X(lens_tl_export, json_path, lens_tl_export(&GPT, "x.npz", NULL))                              \
    X(lens_path_swap, npz, lens_path_swap(NULL, ".png"))                                           \
    X(lens_path_swap, suffix, lens_path_swap("x.npz", NULL))                                       \
    X(lens_labels_points, pts, lens_labels_points(NULL, 1, 0))                                     \
    X(lens_labels_tokens, rp, lens_labels_tokens(NULL, NN_HOOK_GPT, IDS, 1, 0))                    \
    X(lens_labels_tokens, ids, lens_labels_tokens(&LRP, NN_HOOK_GPT, NULL, 1, 0))                  \
    X(lens_report_heatmap, rp,                                                                     \
      lens_report_heatmap(NULL, "x.npz", ".png", "t", D1, 1, 1, NULL, NULL, 0))                    \
    X(lens_report_heatmap, out,                                                                    \
      lens_report_heatmap(&LRP, NULL, ".png", "t", D1, 1, 1, NULL, NULL, 0))                       \
    X(lens_report_heatmap, suffix,                                                                 \
      lens_report_heatmap(&LRP, "x.npz", NULL, "t", D1, 1, 1, NULL, NULL, 0))                      \
    X(lens_report_heatmap, title,                                                                  \
      lens_report_heatmap(&LRP, "x.npz", ".png", NULL, D1, 1, 1, NULL, NULL, 0))                   \
    X(lens_report_heatmap, v,                                                                      \
      lens_report_heatmap(&LRP, "x.npz", ".png", "t", NULL, 1, 1, NULL, NULL, 0))                  \
    X(lens_cache_run, t, lens_cache_run(NULL, &LMO, IDS, &HK, &LC, NULL, NULL))                    \
    X(lens_cache_run, lm, lens_cache_run(&TP, NULL, IDS, &HK, &LC, NULL, NULL))                    \
    X(lens_cache_run, input, lens_cache_run(&TP, &LMO, NULL, &HK, &LC, NULL, NULL))                \
    X(lens_cache_run, h, lens_cache_run(&TP, &LMO, IDS, NULL, &LC, NULL, NULL))                    \
    X(lens_cache_run, c, lens_cache_run(&TP, &LMO, IDS, &HK, NULL, NULL, NULL))                    \
    X(lens_report_ablate, rp, lens_report_ablate(NULL, &LAT, LENS_ZERO, "loss", "x.npz"))          \
    X(lens_report_ablate, a, lens_report_ablate(&LRP, NULL, LENS_ZERO, "loss", "x.npz"))           \
    X(lens_report_ablate, metric, lens_report_ablate(&LRP, &LAT, LENS_ZERO, NULL, "x.npz"))        \
    X(lens_report_ablate, out, lens_report_ablate(&LRP, &LAT, LENS_ZERO, "loss", NULL))            \
    X(lens_report_patch, rp, lens_report_patch(NULL, &LSW, "loss", IDS, NULL, "x.npz"))            \
    X(lens_report_patch, s, lens_report_patch(&LRP, NULL, "loss", IDS, NULL, "x.npz"))             \
    X(lens_report_patch, metric, lens_report_patch(&LRP, &LSW, NULL, IDS, NULL, "x.npz"))          \
    X(lens_report_patch, ids, lens_report_patch(&LRP, &LSW, "loss", NULL, NULL, "x.npz"))          \
    X(lens_report_patch, out, lens_report_patch(&LRP, &LSW, "loss", IDS, NULL, NULL))              \
    X(lens_report_logit, rp, lens_report_logit(NULL, &LL, IDS, IDS, NULL, "x.npz"))                \
    X(lens_report_logit, ll, lens_report_logit(&LRP, NULL, IDS, IDS, NULL, "x.npz"))               \
    X(lens_report_logit, ids, lens_report_logit(&LRP, &LL, NULL, IDS, NULL, "x.npz"))              \
    X(lens_report_logit, good, lens_report_logit(&LRP, &LL, IDS, NULL, NULL, "x.npz"))             \
    X(lens_report_logit, out, lens_report_logit(&LRP, &LL, IDS, IDS, NULL, NULL))                  \
    X(lens_cmd_metric, c, lens_cmd_metric(NULL, &LRW, "loss", NULL, NULL, -1, &LOM))               \
    X(lens_cmd_metric, r, lens_cmd_metric(&LCM, NULL, "loss", NULL, NULL, -1, &LOM))               \
    X(lens_cmd_metric, kind, lens_cmd_metric(&LCM, &LRW, NULL, NULL, NULL, -1, &LOM))              \
    X(lens_cmd_metric, m, lens_cmd_metric(&LCM, &LRW, "loss", NULL, NULL, -1, NULL))               \
    X(lens_cmd_cache, c, lens_cmd_cache(NULL, "*", NULL, LRI, "x.npz"))                            \
    X(lens_cmd_cache, hooks, lens_cmd_cache(&LCM, NULL, NULL, LRI, "x.npz"))                       \
    X(lens_cmd_cache, out, lens_cmd_cache(&LCM, "*", NULL, LRI, NULL))                             \
    X(lens_cmd_ablate, c, lens_cmd_ablate(NULL, "*", LENS_ZERO, NULL, 0, &LM, "loss", "x.npz"))    \
    X(lens_cmd_ablate, hook, lens_cmd_ablate(&LCM, NULL, LENS_ZERO, NULL, 0, &LM, "loss", "x"))    \
    X(lens_cmd_ablate, mt, lens_cmd_ablate(&LCM, "*", LENS_ZERO, NULL, 0, NULL, "loss", "x"))      \
    X(lens_cmd_ablate, metric, lens_cmd_ablate(&LCM, "*", LENS_ZERO, NULL, 0, &LM, NULL, "x"))     \
    X(lens_cmd_ablate, out, lens_cmd_ablate(&LCM, "*", LENS_ZERO, NULL, 0, &LM, "loss", NULL))     \
    X(lens_cmd_patch, c, lens_cmd_patch(NULL, &LRW, "*", LENS_BY_POS, 0, &LM, "loss", "x"))        \
    X(lens_cmd_patch, corrupt, lens_cmd_patch(&LCM, NULL, "*", LENS_BY_POS, 0, &LM, "loss", "x"))  \
    X(lens_cmd_patch, hook, lens_cmd_patch(&LCM, &LRW, NULL, LENS_BY_POS, 0, &LM, "loss", "x"))    \
    X(lens_cmd_patch, mt, lens_cmd_patch(&LCM, &LRW, "*", LENS_BY_POS, 0, NULL, "loss", "x"))      \
    X(lens_cmd_patch, metric, lens_cmd_patch(&LCM, &LRW, "*", LENS_BY_POS, 0, &LM, NULL, "x"))     \
    X(lens_cmd_patch, out, lens_cmd_patch(&LCM, &LRW, "*", LENS_BY_POS, 0, &LM, "loss", NULL))     \
    X(lens_cmd_logit, c, lens_cmd_logit(NULL, "a", "token", NULL, -1, "x.npz"))                    \
    X(lens_cmd_logit, good, lens_cmd_logit(&LCM, NULL, "token", NULL, -1, "x.npz"))                \
    X(lens_cmd_logit, good_flag, lens_cmd_logit(&LCM, "a", NULL, NULL, -1, "x.npz"))               \
    X(lens_cmd_logit, out, lens_cmd_logit(&LCM, "a", "token", NULL, -1, NULL))                     \
    X(lens_cmd_not_finite, c, lens_cmd_not_finite(NULL, AG_ERR_RANGE))                             \
    X(lens_cmd_end, c, lens_cmd_end(NULL, AG_OK))                                                  \
    X(nn_token_loss, logits, nn_token_loss(NULL, 1, 0))                                            \
    X(nn_sample, logits, nn_sample(NULL, 1, &SMP, &R))                                             \
    X(nn_sample, s, nn_sample((Real[1]){0}, 1, NULL, &R))                                          \
    X(ckpt_check_rules, f, ckpt_check_rules(NULL, NULL, 0))                                        \
    /* npz.h */                                                                                    \
    X(npz_shape_str, buf, npz_shape_str(NULL, 8, 0, NULL))                                         \
    X(npz_shape_str, shape, npz_shape_str(BUF, sizeof BUF, 2, NULL))                               \
    X(npz_read, path, npz_read(NULL, (NpzFile *[1]){0}, NULL))                                     \
    X(npz_read, out, npz_read("x.npz", NULL, NULL))                                                \
    X(npz_read_admitted, path, npz_read_admitted(NULL, (NpzFile *[1]){0}, NULL, ADMIT, NULL))      \
    X(npz_read_admitted, out, npz_read_admitted("x.npz", NULL, NULL, ADMIT, NULL))                 \
    X(npz_read_admitted, admit, npz_read_admitted("x.npz", (NpzFile *[1]){0}, NULL, NULL, NULL))   \
    X(npz_find, f, npz_find(NULL, "w"))                                                            \
    X(npz_find, name, npz_find(&NF, NULL))                                                         \
    X(npz_entry_to_tensor, f, npz_entry_to_tensor(NULL, &NE, &T, NULL))                            \
    X(npz_entry_to_tensor, e, npz_entry_to_tensor(&NF, NULL, &T, NULL))                            \
    X(npz_entry_to_tensor, t, npz_entry_to_tensor(&NF, &NE, NULL, NULL))                           \
    X(io_path_join, dir, io_path_join(NULL, "x"))                                                  \
    X(io_path_join, name, io_path_join("d", NULL))                                                 \
    X(io_open_read, path, io_open_read(NULL, (int[1]){0}, NULL))                                   \
    X(io_open_read, fd, io_open_read("x", NULL, NULL))                                             \
    X(io_fopen_read, f, io_fopen_read("x", NULL, NULL))                                            \
    X(io_fopen_stream, path, io_fopen_stream(NULL, 0, (FILE *[1]){0}))                             \
    X(io_fopen_stream, f, io_fopen_stream("x", 0, NULL))                                           \
    X(io_check_replace, path, io_check_replace(NULL))                                              \
    X(io_temp_create, path, io_temp_create(NULL, (int[1]){0}, (char *[1]){0}))                     \
    X(io_temp_create, fd, io_temp_create("x", NULL, (char *[1]){0}))                               \
    X(io_temp_create, tmp, io_temp_create("x", (int[1]){0}, NULL))                                 \
    X(io_replace, tmp, io_replace(NULL, "x"))                                                      \
    X(io_replace, path, io_replace("x", NULL))                                                     \
    X(io_fopen_write, f, io_fopen_write("x", NULL, (char *[1]){0}))                                \
    X(io_fopen_write, tmp, io_fopen_write("x", (FILE *[1]){0}, NULL))                              \
    X(io_fclose_replace, f, io_fclose_replace(NULL, BUF, "x"))                                     \
    X(io_fclose_replace, tmp, io_fclose_replace(stdin, NULL, "x"))                                 \
    X(io_fclose_replace, path, io_fclose_replace(stdin, BUF, NULL))                                \
    X(io_read_all, f, io_read_all(NULL, 1, "x", (char *[1]){0}, (size_t[1]){0}))                   \
    X(io_read_all, label, io_read_all(stdin, 1, NULL, (char *[1]){0}, (size_t[1]){0}))             \
    X(io_read_all, text, io_read_all(stdin, 1, "x", NULL, (size_t[1]){0}))                         \
    X(io_read_all, n, io_read_all(stdin, 1, "x", (char *[1]){0}, NULL))                            \
    X(io_write_file, path, io_write_file(NULL, "x", 1))                                            \
    X(io_write_file, bytes, io_write_file("x", NULL, 1))                                           \
    X(npz_writer_finite, w, npz_writer_finite(NULL, 1))                                            \
    X(npz_writer_force_zip64, w, npz_writer_force_zip64(NULL, 1))                                  \
    X(npz_add, w, npz_add(NULL, "x", NPZ_F32, 0, NULL, (float[]){1}))                              \
    X(npz_add, name, npz_add(npz_writer_new(), NULL, NPZ_F32, 0, NULL, (float[]){1}))              \
    X(npz_add_f32, w, npz_add_f32(NULL, "x", 0, NULL, (float[]){1}))                               \
    X(npz_add_f64, w, npz_add_f64(NULL, "x", 0, NULL, (double[]){1}))                              \
    X(npz_add_i64, w, npz_add_i64(NULL, "x", 0, NULL, (int64_t[]){1}))                             \
    X(npz_add_u64, w, npz_add_u64(NULL, "x", 0, NULL, (uint64_t[]){1}))                            \
    X(npz_add_i32, w, npz_add_i32(NULL, "x", 0, NULL, (int32_t[]){1}))                             \
    X(npz_add_bytes, w, npz_add_bytes(NULL, "x", "ab", 2))                                         \
    X(npz_add_real, w, npz_add_real(NULL, "x", &T))                                                \
    X(npz_add_real, t, npz_add_real(npz_writer_new(), "x", NULL))                                  \
    X(npz_add_real_as, w, npz_add_real_as(NULL, "x", &T, NPZ_F32))                                 \
    X(npz_add_real_as, t, npz_add_real_as(npz_writer_new(), "x", NULL, NPZ_F32))                   \
    X(npz_add_params, w, npz_add_params(NULL, &PL, NPZ_F32))                                       \
    X(npz_add_params, pl, npz_add_params(npz_writer_new(), NULL, NPZ_F32))                         \
    X(npz_write, w, npz_write(NULL, "x.npz", 0, NULL))                                             \
    X(npz_write, path, npz_write(npz_writer_new(), NULL, 0, NULL))                                 \
    X(npz_save_params, pl, npz_save_params(NULL, "x.npz", 0, NULL))                                \
    X(npz_save_params, path, npz_save_params(&PL, NULL, 0, NULL))                                  \
    X(npz_load_params, pl, npz_load_params(NULL, "x.npz", NULL))                                   \
    X(npz_load_params, path, npz_load_params(&PL, NULL, NULL))                                     \
    X(npz_params_from_file, pl, npz_params_from_file(NULL, &NF, NULL))                             \
    X(npz_params_from_file, f, npz_params_from_file(&PL, NULL, NULL))                              \
    /* safetensors.h */                                                                            \
    X(st_shape_str, buf, st_shape_str(NULL, 8, 0, NULL))                                           \
    X(st_shape_str, shape, st_shape_str(BUF, sizeof BUF, 2, NULL))                                 \
    X(st_read, path, st_read(NULL, (StFile *[1]){0}, NULL))                                        \
    X(st_read, out, st_read("x.safetensors", NULL, NULL))                                          \
    X(st_find, f, st_find(NULL, "w"))                                                              \
    X(st_find, name, st_find(&SF, NULL))                                                           \
    X(st_meta, f, st_meta(NULL, "format"))                                                         \
    X(st_meta, key, st_meta(&SF, NULL))                                                            \
    X(st_open, path, st_open(NULL, (StSet *[1]){0}, NULL))                                         \
    X(st_open, out, st_open("x", NULL, NULL))                                                      \
    X(st_set_find, s, st_set_find(NULL, "w"))                                                      \
    X(st_set_find, name, st_set_find(&SS, NULL))                                                   \
    X(st_set_done_with, s, st_set_done_with(NULL, &STT))                                           \
    X(st_set_done_with, t, st_set_done_with(&SS, NULL))                                            \
    X(st_read_small, path, st_read_small(NULL, 8, (char *[1]){0}, &Z1))                            \
    X(st_read_small, text, st_read_small("x", 8, NULL, &Z1))                                       \
    X(st_read_small, len, st_read_small("x", 8, (char *[1]){0}, NULL))                             \
    X(st_value, t, st_value(NULL, 0))                                                              \
    X(st_to_reals, t, st_to_reals(NULL, (Real[1]){0}))                                             \
    X(st_to_reals, out, st_to_reals(&STT, NULL))                                                   \
    X(st_to_tensor, t, st_to_tensor(NULL, &T, NULL))                                               \
    X(st_to_tensor, dst, st_to_tensor(&STT, NULL, NULL))                                           \
    X(st_check_finite, t, st_check_finite(NULL))                                                   \
    X(st_add, w, st_add(NULL, "x", ST_F32, 0, NULL, (float[]){1}))                                 \
    X(st_add, name, st_add(st_writer_new(), NULL, ST_F32, 0, NULL, (float[]){1}))                  \
    X(st_add_real, w, st_add_real(NULL, "x", &T, ST_F32))                                          \
    X(st_add_real, name, st_add_real(st_writer_new(), NULL, &T, ST_F32))                           \
    X(st_add_real, t, st_add_real(st_writer_new(), "x", NULL, ST_F32))                             \
    X(st_add_params, w, st_add_params(NULL, &PL, ST_F32))                                          \
    X(st_add_params, pl, st_add_params(st_writer_new(), NULL, ST_F32))                             \
    X(st_add_meta, w, st_add_meta(NULL, "k", "v"))                                                 \
    X(st_add_meta, key, st_add_meta(st_writer_new(), NULL, "v"))                                   \
    X(st_add_meta, value, st_add_meta(st_writer_new(), "k", NULL))                                 \
    X(st_write, w, st_write(NULL, "x.safetensors", NULL))                                          \
    X(st_write, path, st_write(st_writer_new(), NULL, NULL))                                       \
    X(st_save_params, pl, st_save_params(NULL, "x.safetensors", ST_F32, NULL))                     \
    X(st_save_params, path, st_save_params(&PL, NULL, ST_F32, NULL))                               \
    /* hf.h */                                                                                     \
    X(hf_gpt2_config, path, hf_gpt2_config(NULL, &GPC))                                            \
    X(hf_gpt2_config, out, hf_gpt2_config("x", NULL))                                              \
    X(hf_gpt2_config_from_text, text, hf_gpt2_config_from_text(NULL, 0, "x", &GPC))                \
    X(hf_gpt2_config_from_text, label, hf_gpt2_config_from_text("{}", 2, NULL, &GPC))              \
    X(hf_gpt2_config_from_text, out, hf_gpt2_config_from_text("{}", 2, "x", NULL))                 \
    X(hf_config, path, hf_config(NULL, &GPC))                                                      \
    X(hf_config, out, hf_config("x", NULL))                                                        \
    X(hf_config_from_text, text, hf_config_from_text(NULL, 0, "x", &GPC))                          \
    X(hf_config_from_text, label, hf_config_from_text("{}", 2, NULL, &GPC))                        \
    X(hf_config_from_text, out, hf_config_from_text("{}", 2, "x", NULL))                           \
    X(hf_load, dir, hf_load(NULL, &A, &GPT))                                                       \
    X(hf_load, a, hf_load("x", NULL, &GPT))                                                        \
    X(hf_load, m, hf_load("x", &A, NULL))                                                          \
    X(hf_save, m, hf_save(NULL, "x"))                                                              \
    X(hf_save, dir, hf_save(&GPT, NULL))                                                           \
    X(hf_model_load, path, hf_model_load(NULL, &HFM))                                              \
    X(hf_model_load, out, hf_model_load("x", NULL))                                                \
    X(hf_model_free, g, hf_model_free(NULL))                                                       \
    /* text.h */                                                                                   \
    X(txt_char_new, text, txt_char_new(NULL, 1))                                                   \
    X(txt_bpe_train, text, txt_bpe_train(NULL, 1, 300, TXT_SPLIT_NONE, "x", NULL))                 \
    X(txt_bpe_train, out, txt_bpe_train("ab", 2, 300, TXT_SPLIT_NONE, "x", NULL))                  \
    X(txt_kind, t, txt_kind(NULL))                                                                 \
    X(txt_split, t, txt_split(NULL))                                                               \
    X(txt_vocab_size, t, txt_vocab_size(NULL))                                                     \
    X(txt_n_merges, t, txt_n_merges(NULL))                                                         \
    X(txt_n_special, t, txt_n_special(NULL))                                                       \
    X(txt_merge, t, txt_merge(NULL, 0, &I1, &I1))                                                  \
    X(txt_merge, left, txt_merge(TOK, 0, NULL, &I1))                                               \
    X(txt_merge, right, txt_merge(TOK, 0, &I1, NULL))                                              \
    X(txt_token_bytes, t, txt_token_bytes(NULL, 0, &Z1))                                           \
    X(txt_token_bytes, len, txt_token_bytes(TOK, 0, NULL))                                         \
    X(txt_add_special, t, txt_add_special(NULL, "<s>"))                                            \
    X(txt_add_special, s, txt_add_special(TOK, NULL))                                              \
    X(txt_special_id, t, txt_special_id(NULL, "<s>"))                                              \
    X(txt_special_id, s, txt_special_id(TOK, NULL))                                                \
    X(txt_encode, t, txt_encode(NULL, "a", 1, TXT_SPECIAL_ALLOW, &I1, 1, &Z1, "x"))                \
    X(txt_encode, text, txt_encode(TOK, NULL, 1, TXT_SPECIAL_ALLOW, &I1, 1, &Z1, "x"))             \
    X(txt_encode, ids, txt_encode(TOK, "a", 1, TXT_SPECIAL_ALLOW, NULL, 1, &Z1, "x"))              \
    X(txt_encode, n_ids_out, txt_encode(TOK, "a", 1, TXT_SPECIAL_ALLOW, &I1, 1, NULL, "x"))        \
    X(txt_encode_alloc, t, txt_encode_alloc(NULL, "a", 1, TXT_SPECIAL_ALLOW, NULL, &Z1, "x"))      \
    X(txt_encode_alloc, text, txt_encode_alloc(TOK, NULL, 1, TXT_SPECIAL_ALLOW, NULL, &Z1, "x"))   \
    X(txt_encode_alloc, ids, txt_encode_alloc(TOK, "a", 1, TXT_SPECIAL_ALLOW, NULL, &Z1, "x"))     \
    X(txt_encode_alloc, n_ids_out,                                                                 \
      txt_encode_alloc(TOK, "a", 1, TXT_SPECIAL_ALLOW, (int **)&TOK, NULL, "x"))                   \
    X(txt_decode, t, txt_decode(NULL, IDS, 1, BUF, 1, "x"))                                        \
    X(txt_decode, ids, txt_decode(TOK, NULL, 1, BUF, 1, "x"))                                      \
    X(txt_decode, out, txt_decode(TOK, IDS, 1, NULL, 1, "x"))                                      \
    X(txt_decode_alloc, t, txt_decode_alloc(NULL, IDS, 1, NULL, &Z1, "x"))                         \
    X(txt_decode_alloc, ids, txt_decode_alloc(TOK, NULL, 1, NULL, &Z1, "x"))                       \
    X(txt_decode_alloc, out, txt_decode_alloc(TOK, IDS, 1, NULL, &Z1, "x"))                        \
    X(txt_decode_alloc, len, txt_decode_alloc(TOK, IDS, 1, (char **)&TOK, NULL, "x"))              \
    X(txt_to_bytes, t, txt_to_bytes(NULL, &Z1))                                                    \
    X(txt_to_bytes, len, txt_to_bytes(TOK, NULL))                                                  \
    X(txt_from_bytes, bytes, txt_from_bytes(NULL, 1, "x", NULL))                                   \
    X(txt_from_bytes, out, txt_from_bytes("x", 1, "x", NULL))                                      \
    X(txt_save, t, txt_save(NULL, "x.npz"))                                                        \
    X(txt_save, path, txt_save(TOK, NULL))                                                         \
    X(txt_load, path, txt_load(NULL, NULL))                                                        \
    X(txt_load, out, txt_load("x.npz", NULL))                                                      \
    X(txt_save_bytes, bytes, txt_save_bytes(NULL, 1, "x.npz"))                                     \
    X(txt_save_bytes, path, txt_save_bytes("x", 1, NULL))                                          \
    X(txt_load_bytes, path, txt_load_bytes(NULL, 1, NULL, NULL))                                   \
    X(txt_load_bytes, bytes, txt_load_bytes("x.npz", 1, NULL, NULL))                               \
    X(txt_load_bytes, len, txt_load_bytes("x.npz", 1, (uint8_t **)&VB, NULL))                      \
    X(txt_shard_write, path, txt_shard_write(NULL, IDS, 1, 10))                                    \
    X(txt_shard_write, ids, txt_shard_write("x.bin", NULL, 1, 10))                                 \
    X(txt_shard_read, path, txt_shard_read(NULL, 0, NULL, NULL))                                   \
    X(txt_shard_read, ids, txt_shard_read("x.bin", 0, NULL, NULL))                                 \
    X(txt_shard_read, n, txt_shard_read("x.bin", 0, (int **)&TOK, NULL))                           \
    X(txt_loader_init, L, txt_loader_init(NULL, IDS, 0, 4, 1, 2, 1, "x"))                          \
    X(txt_shard_open, path, txt_shard_open(NULL, 0, NULL))                                         \
    X(txt_shard_open, out, txt_shard_open("x.bin", 0, NULL))                                       \
    X(txt_shard_count, s, txt_shard_count(NULL))                                                   \
    X(txt_shard_tokens, s, txt_shard_tokens(NULL, 0, 1, &I1))                                      \
    X(txt_shard_tokens, out, txt_shard_tokens((TxtShard *)&A, 0, 1, NULL))                         \
    X(txt_loader_starts, L, txt_loader_starts(NULL, (size_t *)STATE))                              \
    X(txt_loader_starts, starts, txt_loader_starts(&TL, NULL))                                     \
    X(txt_loader_next, L, txt_loader_next(NULL, &I1, &I1))                                         \
    X(txt_loader_next, x, txt_loader_next(&TL, NULL, &I1))                                         \
    X(txt_loader_next, y, txt_loader_next(&TL, &I1, NULL))                                         \
    X(txt_loader_state, L, txt_loader_state(NULL, STATE))                                          \
    X(txt_loader_state, state, txt_loader_state(&TL, NULL))                                        \
    X(txt_loader_restore, L, txt_loader_restore(NULL, STATE, "x"))                                 \
    X(txt_loader_restore, state, txt_loader_restore(&TL, NULL, "x"))                               \
    /* vocab.h, score.h */                                                                         \
    X(txt_vocab_init, v, txt_vocab_init(NULL))                                                     \
    X(txt_vocab_free, v, txt_vocab_free(NULL))                                                     \
    X(txt_vocab_add, v, txt_vocab_add(NULL, "a", 1))                                               \
    X(txt_vocab_add, w, txt_vocab_add(&VOC, NULL, 1))                                              \
    X(txt_vocab_find, v, txt_vocab_find(NULL, "a", 1))                                             \
    X(txt_vocab_find, w, txt_vocab_find(&VOC, NULL, 1))                                            \
    X(txt_vocab_word, v, txt_vocab_word(NULL, 0))                                                  \
    X(txt_vocab_set_tokenizer, v, txt_vocab_set_tokenizer(NULL, TOK, "x"))                         \
    X(txt_vocab_set_tokenizer, t, txt_vocab_set_tokenizer(&VOC, NULL, "x"))                        \
    X(txt_vocab_set_tokenizer, what, txt_vocab_set_tokenizer(&VOC, TOK, NULL))                     \
    X(txt_vocab_tokenize, v, txt_vocab_tokenize(NULL, "a", OUTI, 4, NULL, NULL, NULL))             \
    X(txt_vocab_tokenize, text, txt_vocab_tokenize(&VOC, NULL, OUTI, 4, NULL, NULL, NULL))         \
    X(txt_vocab_tokenize, ids, txt_vocab_tokenize(&VOC, "a", NULL, 4, NULL, NULL, NULL))           \
    X(txt_vocab_encode, v, txt_vocab_encode(NULL, "a", 1, OUTI, 4, NULL, NULL, NULL))              \
    X(txt_vocab_encode, s, txt_vocab_encode(&VOC, NULL, 1, OUTI, 4, NULL, NULL, NULL))             \
    X(txt_vocab_encode, ids, txt_vocab_encode(&VOC, "a", 1, NULL, 4, NULL, NULL, NULL))            \
    X(txt_vocab_detokenize, v, txt_vocab_detokenize(NULL, IDS, 1, BUF, 4))                         \
    X(txt_vocab_detokenize, ids, txt_vocab_detokenize(&VOC, NULL, 1, BUF, 4))                      \
    X(txt_vocab_detokenize, out, txt_vocab_detokenize(&VOC, IDS, 1, NULL, 4))                      \
    X(txt_vocab_pair_save, src, txt_vocab_pair_save(NULL, &VOC, &Z1))                              \
    X(txt_vocab_pair_save, tgt, txt_vocab_pair_save(&VOC, NULL, &Z1))                              \
    X(txt_vocab_pair_save, len, txt_vocab_pair_save(&VOC, &VOC, NULL))                             \
    X(txt_vocab_pair_load, src, txt_vocab_pair_load("x", 1, NULL, &VOC, "x"))                      \
    X(txt_vocab_pair_load, tgt, txt_vocab_pair_load("x", 1, &VOC, NULL, "x"))                      \
    X(txt_vocab_pair_load, what, txt_vocab_pair_load("x", 1, &VOC, &VOC, NULL))                    \
    X(txt_bom_len, s, txt_bom_len(NULL, 3))                                                        \
    X(txt_utf8_check, text, txt_utf8_check(NULL, 1, &Z1))                                          \
    X(txt_utf8_check, bad, txt_utf8_check("a", 1, NULL))                                           \
    X(txt_count_sentences, text, txt_count_sentences(NULL))                                        \
    X(txt_read_line, f, txt_read_line(NULL, (char **)&TOK, &Z1, 8, &Z1))                           \
    X(txt_read_line, buf, txt_read_line(stdin, NULL, &Z1, 8, &Z1))                                 \
    X(txt_read_line, cap, txt_read_line(stdin, (char **)&TOK, NULL, 8, &Z1))                       \
    X(txt_read_line, len, txt_read_line(stdin, (char **)&TOK, &Z1, 8, NULL))                       \
    X(txt_skip_line, f, txt_skip_line(NULL, 8))                                                    \
    X(txt_score_add, s, txt_score_add(NULL, IDS, 1, IDS, 1))                                       \
    X(txt_score_add, hyp, txt_score_add(&SCO, NULL, 1, IDS, 1))                                    \
    X(txt_score_add, ref, txt_score_add(&SCO, IDS, 1, NULL, 1))                                    \
    X(txt_score_exact, s, txt_score_exact(NULL))                                                   \
    X(txt_score_tokens, s, txt_score_tokens(NULL))                                                 \
    X(txt_score_bleu, s, txt_score_bleu(NULL))                                                     \
    X(txt_pair_batch_make, b, txt_pair_batch_make(NULL, &PAIR, IDS, 1))                            \
    X(txt_pair_batch_make, pairs, txt_pair_batch_make(&PB, NULL, IDS, 1))                          \
    X(txt_pair_batch_make, rows, txt_pair_batch_make(&PB, &PAIR, NULL, 1))                         \
    X(txt_pair_batch_free, b, txt_pair_batch_free(NULL))                                           \
    X(txt_pair_loader_init, l, txt_pair_loader_init(NULL, &PAIR, 1, 1, 1))                         \
    X(txt_pair_loader_init, pairs, txt_pair_loader_init(&PL2, NULL, 1, 1, 1))                      \
    X(txt_pair_loader_free, l, txt_pair_loader_free(NULL))                                         \
    X(txt_pair_loader_seek, l, txt_pair_loader_seek(NULL, 0, 0))                                   \
    X(txt_pair_loader_next, l, txt_pair_loader_next(NULL, &PB))                                    \
    X(txt_pair_loader_next, b, txt_pair_loader_next(&PL2, NULL))                                   \
    X(txt_hf_load, path, txt_hf_load(NULL, NULL))                                                  \
    X(txt_hf_load, out, txt_hf_load("x.json", NULL))                                               \
    X(txt_hf_from_json, text, txt_hf_from_json(NULL, 1, "x", NULL))                                \
    X(txt_hf_from_json, label, txt_hf_from_json("{}", 2, NULL, NULL))                              \
    X(txt_hf_from_json, out, txt_hf_from_json("{}", 2, "x", NULL))                                 \
    X(txt_hf_from_vocab_merges, vocab_path, txt_hf_from_vocab_merges(NULL, "m", NULL))             \
    X(txt_hf_from_vocab_merges, merges_path, txt_hf_from_vocab_merges("v", NULL, NULL))            \
    X(txt_hf_from_vocab_merges, out, txt_hf_from_vocab_merges("v", "m", NULL))                     \
    X(txt_hf_vocab_size, t, txt_hf_vocab_size(NULL))                                               \
    X(txt_hf_json, t, txt_hf_json(NULL, NULL))                                                     \
    X(txt_hf_json, len, txt_hf_json((TxtHf *)&A, NULL))                                            \
    X(txt_hf_token_bytes, t, txt_hf_token_bytes(NULL, 0, &Z1))                                     \
    X(txt_hf_token_bytes, len, txt_hf_token_bytes((TxtHf *)&A, 0, NULL))                           \
    X(txt_hf_is_special, t, txt_hf_is_special(NULL, 0))                                            \
    X(txt_hf_token_id, t, txt_hf_token_id(NULL, "a"))                                              \
    X(txt_hf_token_id, s, txt_hf_token_id((TxtHf *)&A, NULL))                                      \
    X(txt_hf_encode_alloc, t, txt_hf_encode_alloc(NULL, "a", 1, NULL, &Z1, "x"))                   \
    X(txt_hf_encode_alloc, text, txt_hf_encode_alloc((TxtHf *)&A, NULL, 1, NULL, &Z1, "x"))        \
    X(txt_hf_encode_alloc, ids, txt_hf_encode_alloc((TxtHf *)&A, "a", 1, NULL, &Z1, "x"))          \
    X(txt_hf_encode_alloc, n_ids,                                                                  \
      txt_hf_encode_alloc((TxtHf *)&A, "a", 1, (int **)&TOK, NULL, "x"))                           \
    X(txt_hf_decode_alloc, t, txt_hf_decode_alloc(NULL, IDS, 1, NULL, &Z1, "x"))                   \
    X(txt_hf_decode_alloc, ids, txt_hf_decode_alloc((TxtHf *)&A, NULL, 1, NULL, &Z1, "x"))         \
    X(txt_hf_decode_alloc, out, txt_hf_decode_alloc((TxtHf *)&A, IDS, 1, NULL, &Z1, "x"))          \
    X(txt_hf_decode_alloc, len,                                                                    \
      txt_hf_decode_alloc((TxtHf *)&A, IDS, 1, (char **)&TOK, NULL, "x"))                          \
    X(txt_to_hf_json, t, txt_to_hf_json(NULL, NULL))                                               \
    X(txt_to_hf_json, text, txt_to_hf_json(TOK, NULL))                                             \
    X(txt_write_hf, t, txt_write_hf(NULL, "x.json"))                                               \
    X(txt_write_hf, path, txt_write_hf(TOK, NULL))                                                 \
    X(txt_any_load_dir, dir, txt_any_load_dir(NULL, &TANY))                                        \
    X(txt_any_load_dir, out, txt_any_load_dir("x", NULL))                                          \
    X(txt_any_from_bytes, bytes, txt_any_from_bytes(NULL, 1, "x", &TANY))                          \
    X(txt_any_from_bytes, label, txt_any_from_bytes("a", 1, NULL, &TANY))                          \
    X(txt_any_from_bytes, out, txt_any_from_bytes("a", 1, "x", NULL))                              \
    X(txt_any_to_bytes, t, txt_any_to_bytes(NULL, &Z1))                                            \
    X(txt_any_to_bytes, len, txt_any_to_bytes(&TANY, NULL))                                        \
    X(txt_any_vocab_size, t, txt_any_vocab_size(NULL))                                             \
    X(txt_any_fits, t, txt_any_fits(NULL, 1, "x"))                                                 \
    X(txt_any_fits, label, txt_any_fits(&TANY, 1, NULL))                                           \
    X(txt_any_encode_alloc, t, txt_any_encode_alloc(NULL, "a", 1, NULL, &Z1, "x"))                 \
    X(txt_any_token_bytes, t, txt_any_token_bytes(NULL, 0, &Z1))                                   \
    X(txt_any_token_bytes, len, txt_any_token_bytes(&TANY, 0, NULL))                               \
    X(txt_any_decode_alloc, t, txt_any_decode_alloc(NULL, IDS, 1, NULL, &Z1, "x"))                 \
    X(txt_any_free, t, txt_any_free(NULL))                                                         \
    X(dist_sum_disjoint, v, dist_sum_disjoint(NULL, 1))                                            \
    X(dist_sum_i64, v, dist_sum_i64(NULL, 1))                                                      \
    X(dist_agree, print, dist_agree(0, NULL))                                                      \
    X(dist_threads_on_node, total, dist_threads_on_node(1, NULL, &I1))                             \
    X(dist_threads_on_node, cpus, dist_threads_on_node(1, &I1, NULL))                              \
    X(dist_tree_sum, leaf, dist_tree_sum(NULL, 1, 1, &I1, &R1))                                    \
    X(dist_tree_sum, owner, dist_tree_sum(LEAF, 1, 1, NULL, &R1))                                  \
    X(dist_tree_sum, tmp, dist_tree_sum(LEAF, 1, 1, &I1, NULL))                                    \
    X(dist_grad_new, ps, dist_grad_new(NULL, 1))                                                   \
    X(dist_grad_put, d, dist_grad_put(NULL, 0, 0))                                                 \
    X(dist_grad_reduce, d, dist_grad_reduce(NULL))                                                 \
    X(dist_grad_step, d, dist_grad_step(NULL, &TP, null_loss, NULL))                               \
    X(dist_grad_step, t, dist_grad_step(&DG, NULL, null_loss, NULL))                               \
    X(dist_grad_step, loss, dist_grad_step(&DG, &TP, NULL, NULL))                                  \
    X(flag_parse, fl, flag_parse(NULL, 1, 0, NULL, NULL, NULL))                                    \
    X(flag_help, out, flag_help(NULL, &FL, 1))                                                     \
    X(flag_help, fl, flag_help(stderr, NULL, 1))                                                   \
    X(flag_find, fl, flag_find(NULL, 1, "x"))                                                      \
    X(flag_find, name, flag_find(&FL, 1, NULL))                                                    \
    X(flag_given, fl, flag_given(NULL, 1, "x"))                                                    \
    X(flag_given, name, flag_given(&FL, 1, NULL))                                                  \
    X(flag_spelling, f, flag_spelling(NULL, BUF, 1))                                               \
    X(flag_spelling, buf, flag_spelling(&FL, NULL, 1))                                             \
    /* run.h */                                                                                    \
    X(run_new, m, run_new(NULL, &RC))                                                              \
    X(run_new, c, run_new(&RM, NULL))                                                              \
    X(run_flags, r, run_flags(NULL, &FL))                                                          \
    X(run_flags, fl, run_flags(RL, NULL))                                                          \
    X(run_main, r, run_main(NULL, &FL, 1, 1, (char *[]){"x", NULL}))                               \
    X(run_main, fl, run_main(RL, NULL, 1, 1, (char *[]){"x", NULL}))                               \
    X(run_main, argv, run_main(RL, &FL, 1, 1, NULL))                                               \
    X(run_last_step, r, run_last_step(NULL))                                                       \
    X(run_best, r, run_best(NULL))                                                                 \
    X(run_fmt_time, buf, run_fmt_time(NULL, 1, 0))                                                 \
    X(run_make_dirs, path, run_make_dirs(NULL))                                                    \
    X(run_csv_open, path, run_csv_open(NULL, "h", 0, 0, (FILE *[1]){0}))                           \
    X(run_csv_open, header, run_csv_open("x", NULL, 0, 0, (FILE *[1]){0}))                         \
    X(run_csv_open, out, run_csv_open("x", "h", 0, 0, NULL))                                       \
    X(run_plot_loss, csv, run_plot_loss(NULL, "x.png"))                                            \
    X(run_plot_loss, png, run_plot_loss("x.csv", NULL))                                            \
    X(run_plot_script, script, run_plot_script(NULL, "x.png"))                                     \
    X(run_plot_script, png, run_plot_script("x", NULL))                                            \
    X(run_gp_log_ytics, f, run_gp_log_ytics(NULL, 1, 2))                                           \
    X(run_saved_text, path, run_saved_text(NULL, "x", (char *[1]){0}))                             \
    X(run_saved_text, name, run_saved_text("x", NULL, (char *[1]){0}))                             \
    X(run_saved_text, value, run_saved_text("x", "x", NULL))                                       \
    X(run_kept, dir, run_kept(NULL, (char **[1]){0}, (int[1]){0}))                                 \
    X(run_kept, names, run_kept("x", NULL, (int[1]){0}))                                           \
    X(run_kept, n, run_kept("x", (char **[1]){0}, NULL))                                           \
    X(run_check_given, fl, run_check_given(NULL, 1, &(RunGiven){"x", 1, 1, NULL}, 1))              \
    X(run_check_given, v, run_check_given(&FL, 1, NULL, 1))                                        \
    X(run_report_memory, f, run_report_memory(NULL, 1, 1, (long[2]){-1, -1}))                      \
    X(run_report_memory, first, run_report_memory(stderr, 1, 1, NULL))                             \
    X(run_csv_read, path,                                                                          \
      run_csv_read(NULL, (const char *[]){"x"}, 1, 0, (double *[1]){0}, (int[1]){0}))              \
    X(run_csv_read, names, run_csv_read("x", NULL, 1, 0, (double *[1]){0}, (int[1]){0}))           \
    X(run_csv_read, cols, run_csv_read("x", (const char *[]){"x"}, 1, 0, NULL, (int[1]){0}))       \
    X(run_csv_read, rows, run_csv_read("x", (const char *[]){"x"}, 1, 0, (double *[1]){0}, NULL))  \
    /* view.h */                                                                                   \
    X(view_raw, b, view_raw(NULL, "x"))                                                            \
    X(view_raw, text, view_raw(&VB, NULL))                                                         \
    X(view_str, b, view_str(NULL, "x", 1))                                                         \
    X(view_str, bytes, view_str(&VB, NULL, 0))                                                     \
    X(view_key, b, view_key(NULL, "x"))                                                            \
    X(view_key, key, view_key(&VB, NULL))                                                          \
    X(view_num, b, view_num(NULL, 1))                                                              \
    X(view_int, b, view_int(NULL, 1))                                                              \
    X(view_base64, b, view_base64(NULL, (const uint8_t *)"x", 1))                                  \
    X(view_base64, s, view_base64(&VB, NULL, 0))                                                   \
    X(view_attention, out, view_attention(NULL, &T, 0, 0))                                         \
    X(view_attention, probs, view_attention(&VB, NULL, 0, 0))                                      \
    X(view_runs, b, view_runs(NULL, (char *[1]){"x"}, 1))                                          \
    X(view_runs, dirs, view_runs(&VB, NULL, 0))                                                    \
    X(view_measure, b, view_measure(NULL, "n", "k", D1, 1, 1, 0))                                  \
    X(view_measure, name, view_measure(&VB, NULL, "k", D1, 1, 1, 0))                               \
    X(view_measure, kind, view_measure(&VB, "n", NULL, D1, 1, 1, 0))                               \
    X(view_measure, v, view_measure(&VB, "n", "k", NULL, 1, 1, 0))                                 \
    X(view_softmax, z, view_softmax(NULL, 1, D1))                                                  \
    X(view_softmax, p, view_softmax((Real[1]){0}, 1, NULL))                                        \
    X(view_top_k, b, view_top_k(NULL, D1, 1, 1, view_text, NULL))                                  \
    X(view_top_k, p, view_top_k(&VB, NULL, 1, 1, view_text, NULL))                                 \
    X(view_top_k, text, view_top_k(&VB, D1, 1, 1, NULL, NULL))                                     \
    X(view_scores, b, view_scores(NULL, D1, 0, 1, 1))                                              \
    X(view_scores, sc, view_scores(&VB, NULL, 0, 1, 1))                                            \
    X(view_tables, b, view_tables(NULL, "x.npz"))                                                  \
    X(view_tables, path, view_tables(&VB, NULL))                                                   \
    X(view_write_html, path, view_write_html(NULL, &VB))                                           \
    X(view_write_html, data, view_write_html("x.html", NULL))                                      \
    X(view_page, out, view_page(NULL, "t", NULL, NULL, NULL, NULL, 0, NULL))                       \
    X(view_page, title, view_page("x.html", NULL, NULL, NULL, NULL, NULL, 0, NULL))                \
    X(view_nums, b, view_nums(NULL, D1, 1))                                                        \
    X(view_nums, v, view_nums(&VB, NULL, 0))                                                       \
    X(view_field_str, b, view_field_str(NULL, "k", "v"))                                           \
    X(view_field_str, key, view_field_str(&VB, NULL, "v"))                                         \
    X(view_field_str, s, view_field_str(&VB, "k", NULL))                                           \
    X(view_plot, b, view_plot(NULL, &(ViewPlot){0}))                                               \
    X(view_plot, p, view_plot(&VB, NULL))                                                          \
    X(txt_check_arg, text, txt_check_arg(NULL, "x", (const char *[1]){0}))                         \
    X(txt_check_arg, label, txt_check_arg("x", NULL, (const char *[1]){0}))                        \
    X(txt_check_arg, out, txt_check_arg("x", "x", NULL))                                           \
    X(run_out_dir, dir, run_out_dir(NULL))                                                         \
    X(txt_pairs_read, path, txt_pairs_read(NULL, &(TxtPairSet){0}, &VOC, &VOC, 0, 0))              \
    X(txt_pairs_read, d, txt_pairs_read("x", NULL, &VOC, &VOC, 0, 0))                              \
    X(txt_pairs_read, src_v, txt_pairs_read("x", &(TxtPairSet){0}, NULL, &VOC, 0, 0))              \
    X(txt_pairs_read, tgt_v, txt_pairs_read("x", &(TxtPairSet){0}, &VOC, NULL, 0, 0))              \
    X(txt_pairs_free, d, txt_pairs_free(NULL))                                                     \
    X(txt_pairs_by_length, pairs, txt_pairs_by_length(NULL, 0, 1, (int[1]){0}))                    \
    X(txt_pairs_by_length, rows, txt_pairs_by_length(&(TxtPair){0}, 0, 1, NULL))                   \
    /* run.h: run_gp.c */                                                                          \
    X(run_gp_string, f, run_gp_string(NULL, "x"))                                                  \
    X(run_gp_string, s, run_gp_string(stderr, NULL))                                               \
    X(run_gp_begin, f, run_gp_begin(NULL, 1, 1, 1))                                                \
    X(run_gp_panel, f, run_gp_panel(NULL, &(RunGpPanel){0}))                                       \
    X(run_gp_panel, p, run_gp_panel(stderr, NULL))                                                 \
    X(run_gp_script_begin, s, run_gp_script_begin(NULL, 1, 1))                                     \
    X(run_gp_script_draw, s, run_gp_script_draw(NULL, "d", "x.png", "p"))                          \
    X(run_gp_script_draw, dir, run_gp_script_draw(&(RunGpScript){0}, NULL, "x.png", "p"))          \
    X(run_gp_script_draw, name, run_gp_script_draw(&(RunGpScript){0}, "d", NULL, "p"))             \
    X(run_gp_script_draw, prefix, run_gp_script_draw(&(RunGpScript){0}, "d", "x.png", NULL))       \
    X(run_plot_heatmap, png, run_plot_heatmap(NULL, "t", (double[1]){0}, 1, 1, NULL, NULL, 0))     \
    X(run_plot_heatmap, title,                                                                     \
      run_plot_heatmap("x.png", NULL, (double[1]){0}, 1, 1, NULL, NULL, 0))                        \
    X(run_plot_heatmap, v, run_plot_heatmap("x.png", "t", NULL, 1, 1, NULL, NULL, 0))              \
    X(view_plot_png, png, view_plot_png(NULL, &(ViewPlot){0}, 1, 1, 1))                            \
    X(view_plot_png, plots, view_plot_png("x.png", NULL, 1, 1, 1))                                 \
    X(lens_cmd_parse, prog,                                                                        \
      lens_cmd_parse(NULL, "c", "", "", (Flag[1]){0}, 1, 0, NULL, NULL, NULL))                     \
    X(lens_cmd_parse, name,                                                                        \
      lens_cmd_parse("p", NULL, "", "", (Flag[1]){0}, 1, 0, NULL, NULL, NULL))                     \
    X(lens_cmd_parse, args,                                                                        \
      lens_cmd_parse("p", "c", NULL, "", (Flag[1]){0}, 1, 0, NULL, NULL, NULL))                    \
    X(lens_cmd_parse, what,                                                                        \
      lens_cmd_parse("p", "c", "", NULL, (Flag[1]){0}, 1, 0, NULL, NULL, NULL))                    \
    X(lens_cmd_parse, fl, lens_cmd_parse("p", "c", "", "", NULL, 1, 0, NULL, NULL, NULL))          \
    X(run_out_file_dir, path, run_out_file_dir(NULL))                                              \
    X(flag_usage, out, flag_usage(NULL, "p", "c", "", "", &FL, 1))                                 \
    X(flag_usage, prog, flag_usage(stderr, NULL, "c", "", "", &FL, 1))                             \
    X(flag_usage, cmd, flag_usage(stderr, "p", NULL, "", "", &FL, 1))                              \
    X(flag_usage, args, flag_usage(stderr, "p", "c", NULL, "", &FL, 1))                            \
    X(flag_usage, what, flag_usage(stderr, "p", "c", "", NULL, &FL, 1))                            \
    X(flag_usage, fl, flag_usage(stderr, "p", "c", "", "", NULL, 1))                               \
    X(flag_parse_cmd, prog, flag_parse_cmd(NULL, "c", "", "", &FL, 1, 0, NULL, NULL, NULL))        \
    X(flag_parse_cmd, cmd, flag_parse_cmd("p", NULL, "", "", &FL, 1, 0, NULL, NULL, NULL))         \
    X(flag_parse_cmd, args, flag_parse_cmd("p", "c", NULL, "", &FL, 1, 0, NULL, NULL, NULL))       \
    X(flag_parse_cmd, what, flag_parse_cmd("p", "c", "", NULL, &FL, 1, 0, NULL, NULL, NULL))       \
    X(flag_parse_cmd, fl, flag_parse_cmd("p", "c", "", "", NULL, 1, 0, NULL, NULL, NULL))          \
    /* eval.h */                                                                                   \
    X(eval_seq2seq_budget, c, eval_seq2seq_budget(NULL, 1))                                        \
    X(eval_seq2seq_loss_sum, m, eval_seq2seq_loss_sum(NULL, &TP, &PB))                             \
    X(eval_seq2seq_loss_sum, t, eval_seq2seq_loss_sum(&S2S, NULL, &PB))                            \
    X(eval_seq2seq_loss_sum, b, eval_seq2seq_loss_sum(&S2S, &TP, NULL))                            \
    X(eval_seq2seq, m, eval_seq2seq(NULL, &TP, &PSET, 0, 1, &SCO, NULL, NULL, NULL, NULL, NULL))   \
    X(eval_seq2seq, t, eval_seq2seq(&S2S, NULL, &PSET, 0, 1, &SCO, NULL, NULL, NULL, NULL, NULL))  \
    X(eval_seq2seq, d, eval_seq2seq(&S2S, &TP, NULL, 0, 1, &SCO, NULL, NULL, NULL, NULL, NULL))    \
    X(eval_seq2seq, score,                                                                         \
      eval_seq2seq(&S2S, &TP, &PSET, 0, 1, NULL, NULL, NULL, NULL, NULL, NULL))                    \
    X(lens_flags_parse, p,                                                                         \
      lens_flags_parse(NULL, &(LensUsage){"c", "", "", ""}, 0, &(LensFlags){0}, NULL, 0, NULL, 0,  \
                       0, NULL))                                                                   \
    X(lens_flags_parse, u,                                                                         \
      lens_flags_parse(&(LensProgram){0}, NULL, 0, &(LensFlags){0}, NULL, 0, NULL, 0, 0, NULL))    \
    X(lens_flags_parse, f,                                                                         \
      lens_flags_parse(&(LensProgram){0}, &(LensUsage){"c", "", "", ""}, 0, NULL, NULL, 0, NULL,   \
                       0, 0, NULL))                                                                \
    X(lens_flags_refuse, f, lens_flags_refuse(NULL, "why"))                                        \
    X(lens_flags_refuse, why, lens_flags_refuse(&(LensFlags){0}, NULL))                            \
    X(lens_flags_metric, f, lens_flags_metric(NULL))                                               \
    X(lens_cmd_start, c, lens_cmd_start(NULL, &(LensProgram){0}, &(LensFlags){0}, AG_OK, 0))       \
    X(lens_cmd_start, p, lens_cmd_start(&(LensCmd){0}, NULL, &(LensFlags){0}, AG_OK, 0))           \
    X(lens_cmd_start, f, lens_cmd_start(&(LensCmd){0}, &(LensProgram){0}, NULL, AG_OK, 0))         \
    X(lens_cmd_finish, c, lens_cmd_finish(NULL, &(LensProgram){0}, &(LensFlags){0}, AG_OK))        \
    X(lens_cmd_finish, p, lens_cmd_finish(&(LensCmd){0}, NULL, &(LensFlags){0}, AG_OK))            \
    X(lens_cmd_finish, f, lens_cmd_finish(&(LensCmd){0}, &(LensProgram){0}, NULL, AG_OK))          \
    X(view_table, b, view_table(NULL, &(ViewTable){0}))                                            \
    X(view_table, t, view_table(&VB, NULL))                                                        \
    X(view_plot_pngs, dir, view_plot_pngs(NULL, (ViewPng[1]){{0}}, 1, "p", NULL, 0))               \
    X(view_plot_pngs, pngs, view_plot_pngs("d", NULL, 1, "p", NULL, 0))                            \
    X(view_plot_pngs, prog, view_plot_pngs("d", (ViewPng[1]){{0}}, 1, NULL, NULL, 0))              \
    X(run_records_reserve, r, run_records_reserve(NULL, 1))                                        \
    X(run_records_bytes, r, run_records_bytes(NULL, &(size_t){0}))                                 \
    X(run_records_bytes, len, run_records_bytes(&(RunRecords){0}, NULL))                           \
    X(run_records_load, r, run_records_load(NULL, "", 0, "w"))                                     \
    X(run_records_load, what, run_records_load(&(RunRecords){0}, "", 0, NULL))                     \
    X(run_records_csv, path, run_records_csv(NULL, NULL, 0, NULL, NULL, 0))                        \
    X(view_tokens, b, view_tokens(NULL, &(ViewSide){0}))                                           \
    X(view_tokens, s, view_tokens(&VB, NULL))                                                      \
    X(view_attn_row, s,                                                                            \
      view_attn_row(NULL, &(ViewSide){0}, NULL, (const Tensor *[1]){0}, 0, D1, 0))                 \
    X(view_attn_row, q,                                                                            \
      view_attn_row(&(ViewAttnSet){0}, NULL, NULL, (const Tensor *[1]){0}, 0, D1, 0))              \
    X(view_attn_row, probs,                                                                        \
      view_attn_row(&(ViewAttnSet){0}, &(ViewSide){0}, NULL, NULL, 0, D1, 0))                      \
    X(view_attn_row, sc,                                                                           \
      view_attn_row(&(ViewAttnSet){0}, &(ViewSide){0}, NULL, (const Tensor *[1]){0}, 0, NULL, 0))  \
    X(view_attn_sets, b, view_attn_sets(NULL, NULL, 0))                                            \
    X(view_predict_row, pr, view_predict_row(NULL, 0, &(ViewSide){0}, (Real[1]){0}, 1, NULL, 0))   \
    X(view_predict_row, shown,                                                                     \
      view_predict_row(&(ViewPredict){.B = 1}, 0, NULL, (Real[1]){0}, 1, NULL, 0))                 \
    X(view_predict_row, logits,                                                                    \
      view_predict_row(&(ViewPredict){.B = 1}, 0, &(ViewSide){0}, NULL, 1, NULL, 0))               \
    X(view_predict_json, b, view_predict_json(NULL, &(ViewPredict){0}, NULL, "u", 0, NULL, NULL))  \
    X(view_predict_json, pr, view_predict_json(&VB, NULL, NULL, "u", 0, NULL, NULL))               \
    X(view_predict_json, unit,                                                                     \
      view_predict_json(&VB, &(ViewPredict){0}, NULL, NULL, 0, NULL, NULL))                        \
    X(view_cmd_page, out, view_cmd_page(NULL, NULL, NULL, NULL, NULL, NULL, 0, 0))                 \
    X(lens_heads_seq2seq, m, lens_heads_seq2seq(NULL, &LHB))                                       \
    X(lens_heads_seq2seq, b, lens_heads_seq2seq(&S2S, NULL))                                       \
    X(lens_head_importance, t, lens_head_importance(NULL, &LHB, 1, &PL, &LHD, &LHI, NULL))         \
    X(lens_head_importance, b, lens_head_importance(&TP, NULL, 1, &PL, &LHD, &LHI, NULL))          \
    X(lens_head_importance, params, lens_head_importance(&TP, &LHB, 1, NULL, &LHD, &LHI, NULL))    \
    X(lens_head_importance, d, lens_head_importance(&TP, &LHB, 1, &PL, NULL, &LHI, NULL))          \
    X(lens_head_importance, h, lens_head_importance(&TP, &LHB, 1, &PL, &LHD, NULL, NULL))          \
    X(lens_heads_free, h, lens_heads_free(NULL))                                                   \
    X(lens_heads_print, h, lens_heads_print(NULL, stdout, 0))                                      \
    X(lens_heads_print, f, lens_heads_print(&LHI, NULL, 0))                                        \
    X(lens_heads_save_tsv, h, lens_heads_save_tsv(NULL, "x.tsv"))                                  \
    X(lens_heads_save_tsv, path, lens_heads_save_tsv(&LHI, NULL))                                  \
    X(lens_patterns_add, a, lens_patterns_add(NULL, "x", "t", 0, &T, 0, 0))                        \
    X(lens_patterns_add, name, lens_patterns_add(&LPS, NULL, "t", 0, &T, 0, 0))                    \
    X(lens_patterns_tokens, a, lens_patterns_tokens(NULL, "x", NULL, 0))                           \
    X(lens_patterns_tokens, name, lens_patterns_tokens(&LPS, NULL, NULL, 0))                       \
    X(lens_patterns_free, a, lens_patterns_free(NULL))                                             \
    X(lens_patterns_save, a, lens_patterns_save(NULL, "x.npz"))                                    \
    X(lens_patterns_save, path, lens_patterns_save(&LPS, NULL))                                    \
    X(view_heads_png, h, view_heads_png(NULL, "x.png", "t"))                                       \
    X(view_heads_png, png, view_heads_png(&LHI, NULL, "t"))                                        \
    X(view_patterns_png, a, view_patterns_png(NULL, 0, "c", "x.png"))                              \
    X(view_patterns_png, png, view_patterns_png(&LPS, 0, "c", NULL))                               \
    X(lens_cmd_detect, c, lens_cmd_detect(NULL, &(LensDetectOptions){0}, "x.npz"))                 \
    X(lens_cmd_detect, opt, lens_cmd_detect(&(LensCmd){0}, NULL, "x.npz"))                         \
    X(lens_cmd_detect, out, lens_cmd_detect(&(LensCmd){0}, &(LensDetectOptions){0}, NULL))         \
    X(lens_cmd_run, p,                                                                             \
      lens_cmd_run(LENS_CMD_CACHE, NULL, &(LensCmd){0}, &(LensFlags){0}, &(LensCmdArgs){0}, 0))    \
    X(lens_cmd_run, c,                                                                             \
      lens_cmd_run(LENS_CMD_CACHE, &(LensProgram){0}, NULL, &(LensFlags){0}, &(LensCmdArgs){0},    \
                   0))                                                                             \
    X(lens_cmd_run, f,                                                                             \
      lens_cmd_run(LENS_CMD_CACHE, &(LensProgram){0}, &(LensCmd){0}, NULL, &(LensCmdArgs){0}, 0))  \
    X(lens_cmd_run, a,                                                                             \
      lens_cmd_run(LENS_CMD_CACHE, &(LensProgram){0}, &(LensCmd){0}, &(LensFlags){0}, NULL, 0))    \
    X(ag_threads_use_flag, prog, ag_threads_use_flag(NULL, 1))                                     \
    X(view_labels, prefix, view_labels(NULL, NULL, 1))                                             \
    X(view_drawn, drawn, view_drawn(NULL, 8, "x.png"))                                             \
    X(view_drawn, name, view_drawn((char[8]){0}, 8, NULL))                                         \
    X(view_body_raw, b, view_body_raw(NULL, &VB))                                                  \
    X(view_body_raw, body, view_body_raw(&VB, NULL))                                               \
    X(view_grid_png, dir, view_grid_png(NULL, "x.png", &(ViewGrid){0}, "p", NULL, 0))              \
    X(view_grid_png, name, view_grid_png("d", NULL, &(ViewGrid){0}, "p", NULL, 0))                 \
    X(view_grid_png, g, view_grid_png("d", "x.png", NULL, "p", NULL, 0))                           \
    X(view_grid_png, prog, view_grid_png("d", "x.png", &(ViewGrid){0}, NULL, NULL, 0))             \
    X(run_kept_load, m, run_kept_load(NULL, "d", "x.npz", &A, &(ParamList *){0}, &(int64_t){0}))   \
    X(run_kept_load, dir, run_kept_load(&RM, NULL, "x.npz", &A, &(ParamList *){0}, &(int64_t){0})) \
    X(run_kept_load, name, run_kept_load(&RM, "d", NULL, &A, &(ParamList *){0}, &(int64_t){0}))    \
    X(run_kept_load, a, run_kept_load(&RM, "d", "x.npz", NULL, &(ParamList *){0}, &(int64_t){0}))  \
    X(run_kept_load, params, run_kept_load(&RM, "d", "x.npz", &A, NULL, &(int64_t){0}))            \
    X(run_kept_load, step, run_kept_load(&RM, "d", "x.npz", &A, &(ParamList *){0}, NULL))          \
    X(run_first_step, steps, run_first_step(NULL, D1, 1, 0, 1))                                    \
    X(run_first_step, v, run_first_step((const int64_t[1]){0}, NULL, 1, 0, 1))                     \
    X(lens_detect_ceiling, tokens, lens_detect_ceiling(LENS_INDUCTION, NULL, 1, 1))                \
    X(view_ints, b, view_ints(NULL, (const int[1]){0}, 1))                                         \
    X(view_ints, v, view_ints(&VB, NULL, 1))                                                       \
    X(view_plots, b, view_plots(NULL, (ViewPlot[1]){{0}}, 1))                                      \
    X(view_plots, p, view_plots(&VB, NULL, 1))                                                     \
    X(ag_params_norm, pl, ag_params_norm(NULL))                                                    \
    X(flag_help_asked, argv, flag_help_asked(1, NULL))                                             \
    X(tensor_copy_to_doubles, t, tensor_copy_to_doubles(NULL, D1))                                 \
    X(tensor_copy_to_doubles, dst, tensor_copy_to_doubles(&T, NULL))                               \
    X(npz_add_int, w, npz_add_int(NULL, "x", 0, NULL, (const int[1]){0}))                          \
    X(npz_add_int, name, npz_add_int((NpzWriter *)&A, NULL, 0, NULL, (const int[1]){0}))           \
    X(hf_model_save, g, hf_model_save(NULL, "x"))                                                  \
    X(hf_model_save, dir, hf_model_save(&HFM, NULL))                                               \
    X(txt_shard_windows, s, txt_shard_windows(NULL, NULL, 1, 1, OUTI, OUTI, OUTI))                 \
    X(txt_shard_windows, starts, txt_shard_windows((TxtShard *)&A, NULL, 1, 1, OUTI, OUTI, OUTI))  \
    X(txt_shard_windows, win, txt_shard_windows((TxtShard *)&A, STARTS, 1, 1, NULL, OUTI, OUTI))   \
    X(txt_shard_windows, x, txt_shard_windows((TxtShard *)&A, STARTS, 1, 1, OUTI, NULL, OUTI))     \
    X(txt_shard_windows, y, txt_shard_windows((TxtShard *)&A, STARTS, 1, 1, OUTI, OUTI, NULL))

#define AS_FN(fn, arg, call)                                                                       \
    static void null_##fn##_##arg(void *ctx) {                                                     \
        (void)ctx;                                                                                 \
        call;                                                                                      \
    }
NULL_ROWS(AS_FN)

typedef struct {
    const char *fn, *arg;
    void (*run)(void *);
} NullRow;

#define AS_ROW(fn, arg, call) {#fn, #arg, null_##fn##_##arg},
static const NullRow rows[] = {NULL_ROWS(AS_ROW)};
#define N_ROWS (sizeof rows / sizeof rows[0])

/* Functions that take a pointer and accept NULL, with the reason. */
static const char *const accepts_null[][2] = {
    {"arena_free", "NULL is a no-op, as free"},
    {"ag_tape_free", "NULL is a no-op, as free"},
    {"npz_free", "NULL is a no-op, as free"},
    {"npz_writer_free", "NULL is a no-op, as free"},
    {"st_free", "NULL is a no-op, as free"},
    {"st_set_free", "NULL is a no-op, as free"},
    {"st_writer_free", "NULL is a no-op, as free"},
    {"txt_free", "NULL is a no-op, as free"},
    {"txt_hf_free", "NULL is a no-op, as free"},
    {"dist_grad_free", "NULL is a no-op, as free"},
    {"run_loop_free", "NULL is a no-op, as free"},
    {"txt_shard_close", "NULL is a no-op, as free"},
    {"txt_loader_init", "tokens NULL: a loader of window starts only (txt_loader_starts)"},
    {"tensor_shape_str", "gives \"(NULL)\": error messages show a missing tensor"},
    {"ag_fail", "a printf-like format (the compiler checks the call)"},
    {"ag_abort", "a printf-like format (the compiler checks the call)"},
    {"ag_embedding_padded", "an op: ag_embedding's rows in test_errors.c run through it"},
    {"nn_hooks_on", "NULL hooks: none is set (the models' test at every point)"},
    {"nn_hooks_explicit_attention", "NULL hooks: the fused attention"},
    {"nn_hooks_explicit_at", "NULL hooks: the fused attention"},
    {"view_buf_free", "NULL is a no-op, as free"},
    {"lens_labels_free", "NULL is a no-op, as free"},
    {"hf_is_folder", "NULL names no folder: 0"},
    {"run_records_free", "NULL is a no-op, as free"},
    {"view_predict_free", "NULL is a no-op, as free"},
    {"view_cmd_check", "out NULL: the --out error a command gives; pos NULL with npos 0"},
};

Test(api, every_null_row_aborts_naming_the_function_and_the_argument) {
    int failed = 0;
    for (size_t k = 0; k < N_ROWS; k++) {
        Capture c;
        capture_run(rows[k].run, NULL, &c);
        char want[160];
        snprintf(want, sizeof want, "%s: argument '%s' is NULL", rows[k].fn, rows[k].arg);
        const char *rest = NULL;
        int ok = capture_aborted(&c) && capture_file_line(&c, NULL, 0, NULL, &rest) &&
                 strncmp(rest, want, strlen(want)) == 0;
        cr_expect(ok,
                  "%s(%s = NULL): wanted an abort with \"file.c:LINE: %s\"; got signal %d, "
                  "exit %d, stderr: %s",
                  rows[k].fn, rows[k].arg, want, c.signal, c.exit_code, c.err);
        failed += !ok;
    }
    cr_assert_eq(failed, 0, "%d of %zu rows failed", failed, N_ROWS);
}

/* ---- coverage: every public function that takes a pointer has a row ---- */

/* The header's text without comments, preprocessor lines and braces' contents (struct and
 * enum bodies): what is left is declarations. */
static char *declarations(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL,
              "%s: cannot open (run the suite from the repository root, as make "
              "test does)",
              path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *src = malloc((size_t)n + 1), *out = malloc((size_t)n + 1), *o = out;
    cr_assert(fread(src, 1, (size_t)n, f) == (size_t)n);
    src[n] = '\0';
    fclose(f);
    int depth = 0, bol = 1;
    for (char *p = src; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
            continue;
        }
        if (bol && *p == '#') { /* a preprocessor line, with its continuations */
            while (*p && !(*p == '\n' && p[-1] != '\\')) p++;
            continue;
        }
        bol = *p == '\n' ? 1 : (bol && isspace((unsigned char)*p));
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--;
        else if (depth == 0)
            *o++ = *p;
        p++;
    }
    *o = '\0';
    free(src);
    return out;
}

static int has_row(const char *fn) {
    for (size_t k = 0; k < N_ROWS; k++)
        if (strcmp(rows[k].fn, fn) == 0) return 1;
    return 0;
}

static int exempt(const char *fn) {
    for (size_t k = 0; k < sizeof accepts_null / sizeof accepts_null[0]; k++)
        if (strcmp(accepts_null[k][0], fn) == 0) return 1;
    for (int op = 0; op < AG_OP_COUNT; op++) { /* ag_<op>: test_errors.c */
        char name[64];
        snprintf(name, sizeof name, "ag_%s", ag_op_name((AgOp)op));
        if (strcmp(name, fn) == 0) return 1;
    }
    return 0;
}

Test(api, every_public_function_taking_a_pointer_has_a_null_row) {
    static const char *const headers[] = {
        "src/tensor/tensor.h",  "src/tensor/rng.h",  "src/autograd/autograd.h",
        "src/nn/nn.h",          "src/nn/gpt.h",      "src/optim/optim.h",
        "src/io/checkpoint.h",  "src/io/npz.h",      "src/io/file.h",
        "src/text/text.h",      "src/dist/dist.h",   "src/nn/hooks.h",
        "src/lens/lens.h",      "src/lens/detect.h", "src/lens/logit.h",
        "src/lens/export.h",    "src/flag/flag.h",   "src/run/run.h",
        "src/io/safetensors.h", "src/hf/hf.h",       "src/view/view.h",
        "src/lens/report.h",    "src/text/vocab.h",  "src/text/score.h",
        "src/text/pairs.h",     "src/eval/eval.h",   "src/lens/heads.h",
        "src/view/heads_plot.h"};
    static const char *const prefixes[] = {"ag_",   "arena_", "tensor_", "rng_",  "nn_",   "optim_",
                                           "ckpt_", "npz_",   "io_",     "txt_",  "lens_", "flag_",
                                           "run_",  "st_",    "hf_",     "view_", "eval_"};
    int seen = 0, missing = 0;
    for (size_t h = 0; h < sizeof headers / sizeof headers[0]; h++) {
        char *d = declarations(headers[h]);
        for (char *p = d; *p; p++) {
            if (!(isalpha((unsigned char)*p) || *p == '_') ||
                (p > d && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
                continue;
            char *e = p;
            while (isalnum((unsigned char)*e) || *e == '_') e++;
            int ours = 0;
            for (size_t k = 0; k < sizeof prefixes / sizeof prefixes[0]; k++)
                ours |= strncmp(p, prefixes[k], strlen(prefixes[k])) == 0;
            char *q = e;
            while (*q == ' ') q++;
            if (!ours || *q != '(') {
                p = e - 1;
                continue;
            }
            /* the parameter list, to its closing parenthesis */
            int depth = 0, pointer = 0;
            char *r = q;
            for (; *r; r++) {
                if (*r == '(') depth++;
                if (*r == ')' && --depth == 0) break;
                pointer |= *r == '*';
            }
            /* a typedef of a function pointer (AgGradcheckFn) has its name after "(*": skip */
            char fn[96];
            snprintf(fn, sizeof fn, "%.*s", (int)(e - p), p);
            seen++;
            if (pointer && !has_row(fn) && !exempt(fn)) {
                cr_expect(0,
                          "%s: %s takes a pointer but has no NULL row in "
                          "tests/api/test_null_args.c (add one, or list it in accepts_null with "
                          "the reason)",
                          headers[h], fn);
                missing++;
            }
            p = r;
        }
        free(d);
    }
    cr_assert_gt(seen, 100, "only %d declarations found: is the header parser broken?", seen);
    cr_assert_eq(missing, 0);
}
