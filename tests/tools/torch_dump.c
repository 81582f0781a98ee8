/* torch_dump.c: writes attograd's MultiHeadAttention (one key/value tensor, then distinct
 * query, key and value, then additive and boolean attention masks), a 1+1-layer transformer and the causal encoder layer (the GPT block,
 * post- and pre-LN), and the GPT model (nn_gpt, tied and untied): weights, inputs, outputs and gradients, to a file that tests/nn/torch_compare.py reads, rebuilds in
 * PyTorch with the same weights, and compares (double build, float64 in PyTorch).
 * File format: records of [u32 name length][name][u32 ndim][u32 shape...][f64 data...]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "dumpfile.h"

static FILE *out;

static void put(const char *name, const Tensor *t, const Real *values) {
    dump_tensor(out, name, t, values);
}

static void put_params(const char *prefix, const ParamList *pl) {
    char name[256];
    for (int i = 0; i < pl->n; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, pl->items[i]->name);
        put(name, pl->items[i], pl->items[i]->data);
        snprintf(name, sizeof name, "%sgrad.%s", prefix, pl->items[i]->name);
        put(name, pl->items[i], pl->items[i]->grad);
    }
}

static Tensor *input(Arena *a, Rng *rng, int B, int T, int C, const char *name) {
    Tensor *x = tensor_new3(a, B, T, C, name);
    rng_fill_normal(rng, x, 0, 1);
    tensor_requires_grad(x);
    return x;
}

/* loss = sum(y * R) with R random; writes R so that PyTorch uses the same */
static void backward_with_R(Tape *t, Tensor *y, Rng *rng, const char *name) {
    Tensor *R = tensor_new(t->arena, y->ndim, y->shape, "R");
    rng_fill_normal(rng, R, 0, 1);
    put(name, R, R->data);
    ag_backward(t, ag_sum(t, ag_mul(t, y, R)));
}

static void mask_tensor(Arena *a, const uint8_t *m, int B, int T, const char *name) {
    Tensor *t = tensor_new2(a, B, T, name);
    for (int i = 0; i < B * T; i++) t->data[i] = m[i];
    put(name, t, t->data);
}

int main(int argc, char **argv) {
    out = dump_open(argc, argv);
    if (!out) return 2;
    Arena *params = arena_new("params", 16 << 20);
    Tape *t = ag_tape_new(arena_new("step", 64 << 20));
    Rng rng;
    rng_seed(&rng, 2024);
    int B = 2, Tq = 5, Tk = 7, C = 16, NH = 4, FF = 24;

    /* 1. MultiHeadAttention: cross-attention with key padding, and causal self-attention */
    ParamList pl;
    ag_params_init(&pl);
    NnBuilder b = nn_builder(params, &pl, &rng);
    MultiHeadAttention mha;
    nn_mha_init(&mha, &b, "mha", &(MhaConfig){.d_model = C, .n_heads = NH});
    for (size_t i = 0; i < mha.in_proj_bias->size; i++) /* non-zero biases to compare them too */
        mha.in_proj_bias->data[i] = (Real)(0.1 * rng_normal(&rng));
    for (size_t i = 0; i < mha.out_proj.bias->size; i++)
        mha.out_proj.bias->data[i] = (Real)(0.1 * rng_normal(&rng));
    Tensor *q = input(params, &rng, B, Tq, C, "q"), *kv = input(params, &rng, B, Tk, C, "kv");
    uint8_t kpm[2 * 7] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    AgMask kpm_mask = {kpm, B, Tk};
    Tensor *y = nn_mha_forward(t, &mha, q, kv, kv, &(AgAttnMask){.key_padding = &kpm_mask}, NULL);
    put("mha.q", q, q->data);
    put("mha.kv", kv, kv->data);
    mask_tensor(params, kpm, B, Tk, "mha.key_padding_mask");
    put("mha.out", y, y->data);
    put("mha.probs", mha.last_probs, mha.last_probs->data);
    backward_with_R(t, y, &rng, "mha.R");
    put("mha.grad.q", q, q->grad);
    put("mha.grad.kv", kv, kv->grad);
    put_params("", &pl);

    /* 1b. the same module with distinct query, key and value tensors (and causal: query i sees
     * keys j <= i + Tk - Tq), its gradients from zero */
    ag_tape_reset(t);
    for (int i = 0; i < pl.n; i++) tensor_zero_grad(pl.items[i]);
    Tensor *k = input(params, &rng, B, Tk, C, "k"), *v = input(params, &rng, B, Tk, C, "v");
    tensor_zero_grad(q);
    y = nn_mha_forward(t, &mha, q, k, v, &(AgAttnMask){.key_padding = &kpm_mask, .causal = 1},
                       NULL);
    put("qkv.k", k, k->data);
    put("qkv.v", v, v->data);
    put("qkv.out", y, y->data);
    backward_with_R(t, y, &rng, "qkv.R");
    put("qkv.grad.q", q, q->grad);
    put("qkv.grad.k", k, k->grad);
    put("qkv.grad.v", v, v->grad);
    put_params("qkv.", &pl);

    /* 1c. distinct q, k, v with key padding, causal and an additive (B, NH, Tq, Tk) mask: ALiBi
     * slopes per head, an offset per batch element, key 3 blocked (-inf) for every query */
    ag_tape_reset(t);
    for (int i = 0; i < pl.n; i++) tensor_zero_grad(pl.items[i]);
    tensor_zero_grad(q), tensor_zero_grad(k), tensor_zero_grad(v);
    Tensor *am = tensor_new4(params, B, NH, Tq, Tk, "attn_mask");
    for (size_t e = 0; e < am->size; e++) {
        int j = (int)(e % Tk), i = (int)(e / Tk % Tq), h = (int)(e / ((size_t)Tq * Tk) % NH);
        int bb = (int)(e / ((size_t)NH * Tq * Tk));
        am->data[e] =
            j == 3 ? -(Real)INFINITY : (Real)(-0.25 * (h + 1) * abs(i + Tk - Tq - j) + 0.1 * bb);
    }
    y = nn_mha_forward(t, &mha, q, k, v,
                       &(AgAttnMask){.key_padding = &kpm_mask, .causal = 1, .attn_mask = am}, NULL);
    put("amask.mask", am, am->data);
    put("amask.out", y, y->data);
    backward_with_R(t, y, &rng, "amask.R");
    put("amask.grad.q", q, q->grad);
    put("amask.grad.k", k, k->grad);
    put("amask.grad.v", v, v->grad);
    put_params("amask.", &pl);

    /* 1d. cross-attention (key == value) with key padding and a boolean (Tq, Tk) mask through
     * ag_attn_mask_bool: keys 0 and 1 seen by every query, the others only up to i + 2 */
    ag_tape_reset(t);
    for (int i = 0; i < pl.n; i++) tensor_zero_grad(pl.items[i]);
    tensor_zero_grad(q), tensor_zero_grad(kv);
    uint8_t blocked[5 * 7];
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) blocked[i * Tk + j] = j >= 2 && j > i + 2;
    Tensor *bm = ag_attn_mask_bool(t, blocked, 2, (int[]){Tq, Tk});
    y = nn_mha_forward(t, &mha, q, kv, kv, &(AgAttnMask){.key_padding = &kpm_mask, .attn_mask = bm},
                       NULL);
    Tensor *bm_out = tensor_new2(params, Tq, Tk, "bool_mask");
    for (int e = 0; e < Tq * Tk; e++) bm_out->data[e] = blocked[e];
    put("bmask.mask", bm_out, bm_out->data);
    put("bmask.out", y, y->data);
    backward_with_R(t, y, &rng, "bmask.R");
    put("bmask.grad.q", q, q->grad);
    put("bmask.grad.kv", kv, kv->grad);
    put_params("bmask.", &pl);
    ag_params_free(&pl);

    /* 2. a 1+1-layer post-LN transformer (encoder, decoder, final norms), gelu off, no dropout */
    ag_tape_reset(t);
    ParamList tp;
    ag_params_init(&tp);
    b = nn_builder(params, &tp, &rng);
    TransformerConfig cfg = {.d_model = C, .n_heads = NH, .d_ff = FF};
    EncoderLayer enc;
    DecoderLayer dec;
    LayerNorm enc_norm, dec_norm;
    nn_encoder_layer_init(&enc, &b, "encoder.layers.0", &cfg);
    nn_layernorm_init(&enc_norm, &b, "encoder.norm", C, NN_LN_EPS);
    nn_decoder_layer_init(&dec, &b, "decoder.layers.0", &cfg);
    nn_layernorm_init(&dec_norm, &b, "decoder.norm", C, NN_LN_EPS);
    for (int i = 0; i < tp.n; i++) /* move norms and biases off 1 and 0 */
        if (strstr(tp.items[i]->name, "norm") || strstr(tp.items[i]->name, "bias"))
            for (size_t j = 0; j < tp.items[i]->size; j++)
                tp.items[i]->data[j] += (Real)(0.1 * rng_normal(&rng));
    Tensor *src = input(params, &rng, B, Tk, C, "src"), *tgt = input(params, &rng, B, Tq, C, "tgt");
    uint8_t src_pad[2 * 7] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    uint8_t tgt_pad[2 * 5] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    AgMask sm = {src_pad, B, Tk}, tm = {tgt_pad, B, Tq};
    Tensor *mem = nn_layernorm(t, &enc_norm, nn_encoder_layer(t, &enc, src, &sm, NULL));
    Tensor *o = nn_layernorm(t, &dec_norm, nn_decoder_layer(t, &dec, tgt, mem, &tm, &sm, NULL));
    put("tf.src", src, src->data);
    put("tf.tgt", tgt, tgt->data);
    mask_tensor(params, src_pad, B, Tk, "tf.src_key_padding_mask");
    mask_tensor(params, tgt_pad, B, Tq, "tf.tgt_key_padding_mask");
    put("tf.out", o, o->data);
    backward_with_R(t, o, &rng, "tf.R");
    put("tf.grad.src", src, src->grad);
    put("tf.grad.tgt", tgt, tgt->grad);
    put_params("tf.", &tp);
    ag_params_free(&tp);

    /* 3. the GPT block: a causal encoder layer, post-LN (gpt0) and pre-LN (gpt1), gelu, with
     * key padding at the end of a row */
    for (int pre = 0; pre <= 1; pre++) {
        ag_tape_reset(t);
        ParamList gp;
        ag_params_init(&gp);
        b = nn_builder(params, &gp, &rng);
        char prefix[16];
        snprintf(prefix, sizeof prefix, "gpt%d.", pre);
        EncoderLayer blk;
        nn_encoder_layer_init(&blk, &b, "",
                              &(TransformerConfig){.d_model = C,
                                                   .n_heads = NH,
                                                   .d_ff = FF,
                                                   .pre_ln = pre,
                                                   .act = NN_GELU,
                                                   .causal = 1});
        for (int i = 0; i < gp.n; i++) /* move norms and biases off 1 and 0 */
            for (size_t j = 0; j < gp.items[i]->size; j++)
                gp.items[i]->data[j] += (Real)(0.1 * rng_normal(&rng));
        Tensor *x = input(params, &rng, B, Tk, C, "x");
        Tensor *g = nn_encoder_layer(t, &blk, x, &sm, NULL);
        char name[64];
        snprintf(name, sizeof name, "%sx", prefix);
        put(name, x, x->data);
        snprintf(name, sizeof name, "%skey_padding_mask", prefix);
        mask_tensor(params, src_pad, B, Tk, name);
        snprintf(name, sizeof name, "%sout", prefix);
        put(name, g, g->data);
        snprintf(name, sizeof name, "%sR", prefix);
        backward_with_R(t, g, &rng, name);
        snprintf(name, sizeof name, "%sgrad.x", prefix);
        put(name, x, x->grad);
        put_params(prefix, &gp);
        ag_params_free(&gp);
    }

    /* 4. the GPT model (nn_gpt): tied head with biases (model0), untied without (model1), the
     * LLaMA style with grouped-query heads and an untied head (model2), GPT-2's blocks with
     * RoPE and RMSNorm (model3, a mix); the loss of a batch with ignored targets, and every
     * gradient */
    for (int variant = 0; variant <= 3; variant++) {
        ag_tape_reset(t);
        GptConfig gc = {.vocab_size = 11,
                        .block_size = 9,
                        .n_layer = 2,
                        .n_head = NH,
                        .n_embd = C,
                        .no_bias = variant == 1,
                        .untied = variant >= 1};
        if (variant == 2) gc.style = NN_LLAMA, gc.n_kv_head = NH / 2;
        if (variant == 3) gc.untied = 0, gc.pos = NN_GPT_POS_ROPE, gc.norm = NN_GPT_NORM_RMS;
        Gpt m;
        nn_gpt_init(&m, params, &rng, &gc);
        for (int i = 0; i < m.params.n; i++) {   /* norms and biases off 1 and 0; weights 10 */
            Tensor *w = m.params.items[i];       /* times larger, so that attention is far */
            for (size_t j = 0; j < w->size; j++) /* from uniform and positions matter */
                w->data[j] =
                    w->ndim == 1 ? w->data[j] + (Real)(0.1 * rng_normal(&rng)) : 10 * w->data[j];
        }
        int idx[2 * 8], targets[2 * 8];
        for (int i = 0; i < 2 * 8; i++) idx[i] = (int)(rng_u64(&rng) % 11);
        for (int i = 0; i < 2 * 8; i++) targets[i] = i % 5 == 4 ? -1 : (int)(rng_u64(&rng) % 11);
        Tensor *logits = nn_gpt_forward(t, &m, idx, 2, 8, NULL);
        Tensor *loss = ag_cross_entropy(t, logits, targets, -1);
        ag_backward(t, loss);
        char prefix[32], name[64];
        snprintf(prefix, sizeof prefix, "model%d.", variant);
        Tensor *ids = tensor_new2(params, 2, 8, "idx"), *tg = tensor_new2(params, 2, 8, "tgt");
        for (int i = 0; i < 2 * 8; i++) ids->data[i] = idx[i], tg->data[i] = targets[i];
        snprintf(name, sizeof name, "%sidx", prefix);
        put(name, ids, ids->data);
        snprintf(name, sizeof name, "%stargets", prefix);
        put(name, tg, tg->data);
        snprintf(name, sizeof name, "%slogits", prefix);
        put(name, logits, logits->data);
        snprintf(name, sizeof name, "%sloss", prefix);
        put(name, loss, loss->data);
        put_params(prefix, &m.params);
        nn_gpt_free(&m);
    }

    arena_free(t->arena);
    ag_tape_free(t);
    arena_free(params);
    return dump_close(out, argv[1]);
}
