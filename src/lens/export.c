/* export.c: the TransformerLens export of export.h: the check of what HookedTransformer can
 * express, each weight transposed or split by head into TransformerLens's layout (float32), and
 * the configuration as JSON.
 * Not here: the layout's table (export.h). Read next: tests/lens/tl_forward.py, a numpy forward
 * written from TransformerLens's conventions, which the test suite runs on an exported file;
 * tests/lens/tl_cache.py, which loads one into HookedTransformer itself. */
#include "export.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/file.h"
#include "../io/npz.h"

int lens_tl_check(const GptConfig *cfg) {
    AG_CHECK_ARG(cfg);
    int rc = nn_gpt_check_config(cfg, NULL);
    if (rc != AG_OK) return rc;
    GptConfig o = nn_gpt_options(cfg);
    if (o.post_ln)
        return ag_fail(AG_ERR_ARG, "post-LN blocks: HookedTransformer's blocks are pre-LN");
    if (o.mlp == NN_GPT_MLP_SWIGLU && o.bias == NN_GPT_BIAS_ON)
        return ag_fail(AG_ERR_ARG, "a SwiGLU MLP with biases: HookedTransformer's gated MLP "
                                   "adds none inside the gate (export SwiGLU models without "
                                   "biases)");
    return AG_OK;
}

/* The arrays being written: each a float32 copy the writer points to until npz_write */
typedef struct Out {
    NpzWriter *w;
    float **bufs;
    int n, cap;
} Out;

static float *array(Out *o, const char *name, int ndim, const int64_t *shape) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= (size_t)shape[d];
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 64;
        o->bufs = realloc(o->bufs, (size_t)o->cap * sizeof *o->bufs);
        AG_CHECK(o->bufs, "lens_tl_export: out of memory for %d arrays", o->cap);
    }
    float *f = calloc(n ? n : 1, sizeof(float));
    AG_CHECK(f, "lens_tl_export: out of memory for %s (%zu values)", name, n);
    o->bufs[o->n++] = f;
    npz_add_f32(o->w, name, ndim, shape, f);
    return f;
}

/* name: t's values as they are (shape), or zeros when t is NULL (a missing bias) */
static void copy(Out *o, const char *name, const Tensor *t, int ndim, const int64_t *shape) {
    float *f = array(o, name, ndim, shape);
    if (t)
        for (size_t i = 0; i < t->size; i++) f[i] = (float)t->data[i];
}

/* name: the transpose of w (rows, cols) -> (cols, rows) */
static void transposed(Out *o, const char *name, const Tensor *w, int rows, int cols) {
    float *f = array(o, name, 2, (int64_t[]){cols, rows});
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            f[(size_t)j * rows + i] = (float)w->data[(size_t)i * cols + j];
}

/* The weight rows of W_Q (k 0), W_K (1) or W_V (2) and their bias: c_attn's row blocks
 * [0, C), [C, C + KV), [C + KV, C + 2 KV) (GPT-2's names), or wq, wk, wv (LLaMA's) */
static void qkv_rows(const GptBlock *h, const GptConfig *c, int k, const Real **w, const Real **b) {
    int C = c->n_embd, KV = c->n_kv_head * (C / c->n_head), row0[3] = {0, C, C + KV};
    if (c->style == NN_LLAMA) {
        const Linear *l[3] = {&h->wq, &h->wk, &h->wv};
        *w = l[k]->weight->data, *b = l[k]->bias ? l[k]->bias->data : NULL;
        return;
    }
    *w = h->c_attn.weight->data + (size_t)row0[k] * C;
    *b = h->c_attn.bias ? h->c_attn.bias->data + row0[k] : NULL;
}

/* a norm: w (and b for LayerNorm) under prefix, as normalization_type says */
static void norm(Out *o, const char *prefix, const LayerNorm *ln, const GptConfig *c) {
    char name[96];
    int64_t C = c->n_embd;
    if (c->norm == NN_GPT_NORM_NONE) return;
    snprintf(name, sizeof name, "%s.w", prefix);
    copy(o, name, ln->weight, 1, &C);
    if (c->norm == NN_GPT_NORM_LAYER) {
        snprintf(name, sizeof name, "%s.b", prefix);
        copy(o, name, ln->bias, 1, &C);
    }
}

/* HookedTransformerConfig's act_fn of an MLP kind (SwiGLU: with gated_mlp) */
static const char *mlp_act(NnGptMlp k) {
    return k == NN_GPT_MLP_SWIGLU      ? "silu"
           : k == NN_GPT_MLP_RELU      ? "relu"
           : k == NN_GPT_MLP_GELU_TANH ? "gelu_new"
                                       : "gelu";
}

static int write_config(const GptConfig *c, const char *path) {
    FILE *f;
    char *tmp;
    int rc = io_fopen_write(path, &f, &tmp); /* a new file renamed over path (src/io/file.h) */
    if (rc != AG_OK) return rc;
    int attn_only = c->mlp == NN_GPT_MLP_NONE, rope = c->pos == NN_GPT_POS_ROPE;
    const char *norm = c->norm == NN_GPT_NORM_LAYER ? "\"LN\""
                       : c->norm == NN_GPT_NORM_RMS ? "\"RMS\""
                                                    : "null";
    fprintf(f,
            "{\n  \"model_name\": \"attograd-gpt\",\n  \"n_layers\": %d,\n  \"d_model\": %d,\n"
            "  \"n_ctx\": %d,\n  \"d_head\": %d,\n  \"n_heads\": %d,\n",
            c->n_layer, c->n_embd, c->block_size, c->n_embd / c->n_head, c->n_head);
    if (attn_only)
        fprintf(f, "  \"d_mlp\": null,\n  \"attn_only\": true,\n");
    else
        fprintf(f, "  \"d_mlp\": %d,\n  \"attn_only\": false,\n", c->ffn_hidden);
    if (c->mlp == NN_GPT_MLP_SWIGLU) fprintf(f, "  \"gated_mlp\": true,\n");
    if (c->parallel_residual) fprintf(f, "  \"parallel_attn_mlp\": true,\n");
    if (c->n_kv_head != c->n_head) fprintf(f, "  \"n_key_value_heads\": %d,\n", c->n_kv_head);
    if (rope)
        fprintf(f,
                "  \"positional_embedding_type\": \"rotary\",\n  \"rotary_dim\": %d,\n"
                "  \"rotary_base\": %.17g,\n  \"rotary_adjacent_pairs\": true,\n",
                c->rotary_dim, c->rope_base);
    else
        fprintf(f, "  \"positional_embedding_type\": \"standard\",\n");
    fprintf(f,
            "  \"d_vocab\": %d,\n  \"d_vocab_out\": %d,\n  \"act_fn\": \"%s\",\n"
            "  \"normalization_type\": %s,\n  \"eps\": %.17g,\n"
            "  \"default_prepend_bos\": false\n}\n",
            c->vocab_size, c->vocab_size, mlp_act(c->mlp), norm, c->norm_eps);
    return io_fclose_replace(f, tmp, path);
}

int lens_tl_export(const Gpt *m, const char *npz_path, const char *json_path) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(npz_path);
    AG_CHECK_ARG(json_path);
    int rc = lens_tl_check(&m->cfg);
    if (rc != AG_OK) return rc;
    GptConfig c = nn_gpt_options(&m->cfg);
    int C = c.n_embd, NH = c.n_head, NKV = c.n_kv_head, HS = C / NH, H = c.ffn_hidden;
    int V = c.vocab_size, gqa = NKV != NH;
    Out o = {.w = npz_writer_new()};
    npz_writer_finite(o.w, 1); /* float32 copies: a weight beyond float32's range is refused */
    copy(&o, "embed.W_E", m->wte.weight, 2, (int64_t[]){V, C});
    if (c.pos != NN_GPT_POS_ROPE) /* no positions: a standard embedding of zeros */
        copy(&o, "pos_embed.W_pos", c.pos == NN_GPT_POS_LEARNED ? m->wpe.table : NULL, 2,
             (int64_t[]){c.block_size, C});
    for (int l = 0; l < c.n_layer; l++) {
        const GptBlock *h = &m->h[l];
        char name[96], pre[32];
        snprintf(pre, sizeof pre, "blocks.%d", l);
        snprintf(name, sizeof name, "%s.ln1", pre);
        norm(&o, name, &h->ln_1, &c);
        static const char *const qkv = "QKV";
        for (int k = 0; k < 3; k++) { /* W_Q, W_K, W_V (n, C, HS) from rows (n HS, C) */
            int n = k ? NKV : NH;
            const char *under = k && gqa ? "_" : ""; /* grouped-query: _W_K, _W_V (NKV, ...) */
            const Real *wr, *br;
            qkv_rows(h, &c, k, &wr, &br);
            snprintf(name, sizeof name, "%s.attn.%sW_%c", pre, under, qkv[k]);
            float *W = array(&o, name, 3, (int64_t[]){n, C, HS});
            snprintf(name, sizeof name, "%s.attn.%sb_%c", pre, under, qkv[k]);
            float *b = array(&o, name, 2, (int64_t[]){n, HS});
            for (int hd = 0; hd < n; hd++)
                for (int d = 0; d < HS; d++) {
                    size_t row = (size_t)hd * HS + d;
                    for (int i = 0; i < C; i++)
                        W[((size_t)hd * C + i) * HS + d] = (float)wr[row * C + i];
                    if (br) b[hd * HS + d] = (float)br[row];
                }
        }
        snprintf(name, sizeof name, "%s.attn.W_O", pre); /* (NH, HS, C): c_proj's columns */
        float *WO = array(&o, name, 3, (int64_t[]){NH, HS, C});
        for (int i = 0; i < C; i++)
            for (int j = 0; j < C; j++)
                WO[(size_t)j * C + i] = (float)h->c_proj.weight->data[(size_t)i * C + j];
        snprintf(name, sizeof name, "%s.attn.b_O", pre);
        copy(&o, name, h->c_proj.bias, 1, (int64_t[]){C});
        if (c.mlp == NN_GPT_MLP_NONE) continue;
        snprintf(name, sizeof name, "%s.ln2", pre);
        norm(&o, name, &h->ln_2, &c);
        int gated = c.mlp == NN_GPT_MLP_SWIGLU; /* silu(x W_gate) * (x W_in) + b_in, W_out */
        if (gated) {
            snprintf(name, sizeof name, "%s.mlp.W_gate", pre);
            transposed(&o, name, h->c_fc.weight, H, C);
        }
        snprintf(name, sizeof name, "%s.mlp.W_in", pre);
        transposed(&o, name, gated ? h->w3.weight : h->c_fc.weight, H, C);
        snprintf(name, sizeof name, "%s.mlp.b_in", pre); /* gated: zeros (lens_tl_check) */
        copy(&o, name, gated ? NULL : h->c_fc.bias, 1, (int64_t[]){H});
        snprintf(name, sizeof name, "%s.mlp.W_out", pre);
        transposed(&o, name, h->mlp_proj.weight, C, H);
        snprintf(name, sizeof name, "%s.mlp.b_out", pre);
        copy(&o, name, h->mlp_proj.bias, 1, (int64_t[]){C});
    }
    norm(&o, "ln_final", &m->ln_f, &c);
    transposed(&o, "unembed.W_U", m->lm_head.weight, V, C);
    copy(&o, "unembed.b_U", NULL, 1, (int64_t[]){V});
    rc = npz_write(o.w, npz_path, 0, NULL);
    npz_writer_free(o.w);
    for (int i = 0; i < o.n; i++) free(o.bufs[i]);
    free(o.bufs);
    return rc == AG_OK ? write_config(&c, json_path) : rc;
}
