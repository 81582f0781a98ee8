/* weights.c: a Hugging Face folder's weights into an nn_gpt model (hf_load) and a model out as
 * a folder transformers loads (hf_save). Each parameter of attograd's GPT has one tensor of
 * the folder, named and laid out as transformers names and lays it out:
 *   GPT2LMHeadModel   the same names as nanoGPT's (transformer.h.0.attn.c_attn.weight; a file
 *                     may leave "transformer." out, as GPT2Model saves them), but its Conv1D
 *                     layers (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) store (in, out):
 *                     transposed on the way in and out. The head is tied (no lm_head.weight).
 *   LlamaForCausalLM  model.embed_tokens, model.layers.<l>.self_attn.{q,k,v,o}_proj,
 *                     mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm,
 *                     model.norm, lm_head. transformers' rotary turns the two halves of each
 *                     head (rotate_half), attograd's (Meta's) adjacent pairs: the rows of q_proj
 *                     and k_proj are permuted per head, HF row r*hs/2 + p <-> Meta row 2p + r.
 *   GPTNeoXForCausalLM  gpt_neox.embed_in, gpt_neox.layers.<l>.attention.query_key_value (per
 *                     head [q k v], regrouped into attograd's q, k, v rows, the first rotary_dim
 *                     rows of each q and k head turned from rotate-half to pairs as LLaMA's),
 *                     attention.dense, mlp.dense_h_to_4h, mlp.dense_4h_to_h, input_layernorm,
 *                     post_attention_layernorm, gpt_neox.final_layer_norm, embed_out: a
 *                     GPT-2-style model with rotary positions, read and written back.
 * Every tensor is checked before use (its dtype a float type, its shape, finite values) and
 * every tensor of the folder must be a weight of the model (old GPT-2 files' causal-mask
 * buffers and rotary inv_freq aside), with errors naming the folder and the tensor.
 * Not here: config.json (config.c); the safetensors format (src/io/safetensors*.c). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hf.h"
#include "../io/file.h"
#include "../io/safetensors.h"

typedef enum { HF_AS_IS, HF_TRANSPOSE, HF_ROPE, HF_NEOX_QKV } HfLayout;

typedef struct {
    char name[256]; /* the tensor's name in the folder */
    HfLayout how;
    int heads; /* HF_ROPE, HF_NEOX_QKV: the heads of the rows */
    int rot;   /* the rotary columns of a head (HF_ROPE: the head size) */
} HfName;

/* GPT-NeoX: a GPT-2-style model with rotary positions (how hf_config reads "gpt_neox") */
static int neox(const GptConfig *c) { return c->style == NN_GPT2 && c->pos == NN_GPT_POS_ROPE; }

static int ends_with(const char *s, const char *end) {
    size_t n = strlen(s), k = strlen(end);
    return n >= k && strcmp(s + n - k, end) == 0;
}

/* attograd's names (a parameter's name up to its last dot; %d: the layer) and transformers' */
typedef struct {
    const char *ours, *theirs;
} Rename;
static const Rename neox_names[] = {
    {"transformer.wte", "gpt_neox.embed_in"},
    {"transformer.ln_f", "gpt_neox.final_layer_norm"},
    {"lm_head", "embed_out"},
    {"transformer.h.%d.ln_1", "gpt_neox.layers.%d.input_layernorm"},
    {"transformer.h.%d.ln_2", "gpt_neox.layers.%d.post_attention_layernorm"},
    {"transformer.h.%d.attn.c_attn", "gpt_neox.layers.%d.attention.query_key_value"},
    {"transformer.h.%d.attn.c_proj", "gpt_neox.layers.%d.attention.dense"},
    {"transformer.h.%d.mlp.c_fc", "gpt_neox.layers.%d.mlp.dense_h_to_4h"},
    {"transformer.h.%d.mlp.c_proj", "gpt_neox.layers.%d.mlp.dense_4h_to_h"},
};
static const Rename llama_names[] = {
    {"tok_embeddings", "model.embed_tokens"},
    {"norm", "model.norm"},
    {"output", "lm_head"},
    {"layers.%d.attention.wq", "model.layers.%d.self_attn.q_proj"},
    {"layers.%d.attention.wk", "model.layers.%d.self_attn.k_proj"},
    {"layers.%d.attention.wv", "model.layers.%d.self_attn.v_proj"},
    {"layers.%d.attention.wo", "model.layers.%d.self_attn.o_proj"},
    {"layers.%d.feed_forward.w1", "model.layers.%d.mlp.gate_proj"},
    {"layers.%d.feed_forward.w2", "model.layers.%d.mlp.down_proj"},
    {"layers.%d.feed_forward.w3", "model.layers.%d.mlp.up_proj"},
    {"layers.%d.attention_norm", "model.layers.%d.input_layernorm"},
    {"layers.%d.ffn_norm", "model.layers.%d.post_attention_layernorm"},
};

/* p renamed by table t (its leaf, ".weight" or ".bias", kept) into h->name; the row of t, or
 * NULL when none matches. The layer is the first number between dots. */
static const Rename *rename_by(const Rename *t, size_t n, const char *p, HfName *h) {
    const char *leaf = strrchr(p, '.');
    if (!leaf || (size_t)(leaf - p) >= 200) return NULL;
    char stem[256];
    int layer = -1;
    size_t o = 0;
    for (const char *q = p; q < leaf && o < sizeof stem - 3; q++) {
        if (layer < 0 && *q >= '0' && *q <= '9' && q > p && q[-1] == '.') {
            layer = atoi(q);
            while (q + 1 < leaf && q[1] >= '0' && q[1] <= '9') q++;
            stem[o++] = '%', stem[o++] = 'd';
        } else {
            stem[o++] = *q;
        }
    }
    stem[o] = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(stem, t[i].ours) != 0) continue;
        char fmt[256];
        snprintf(fmt, sizeof fmt, "%s%%s", t[i].theirs);
        if (layer >= 0)
            snprintf(h->name, sizeof h->name, fmt, layer, leaf);
        else
            snprintf(h->name, sizeof h->name, "%s%s", t[i].theirs, leaf);
        return &t[i];
    }
    return NULL;
}

/* The folder's name and layout of attograd's parameter p; bare: GPT-2 names without
 * "transformer.". Aborts on a name attograd's GPT does not make (misuse). */
static HfName hf_name(const GptConfig *c, const char *p, int bare) {
    HfName h = {.how = HF_AS_IS};
    int hs = c->n_embd / c->n_head;
    if (c->style == NN_GPT2 && !neox(c)) {
        const char *q = bare && !strncmp(p, "transformer.", 12) ? p + 12 : p;
        snprintf(h.name, sizeof h.name, "%s", q);
        if (ends_with(p, "attn.c_attn.weight") || ends_with(p, "attn.c_proj.weight") ||
            ends_with(p, "mlp.c_fc.weight") || ends_with(p, "mlp.c_proj.weight"))
            h.how = HF_TRANSPOSE;
        return h;
    }
    const Rename *r = neox(c)
                          ? rename_by(neox_names, sizeof neox_names / sizeof *neox_names, p, &h)
                          : rename_by(llama_names, sizeof llama_names / sizeof *llama_names, p, &h);
    AG_CHECK(r, "hf: parameter '%s' has no %s name", p, neox(c) ? "GPT-NeoX" : "LLaMA");
    if (!strcmp(r->ours, "transformer.h.%d.attn.c_attn"))
        h.how = HF_NEOX_QKV, h.heads = c->n_head, h.rot = c->rotary_dim ? c->rotary_dim : hs;
    if (!strcmp(r->ours, "layers.%d.attention.wq") || !strcmp(r->ours, "layers.%d.attention.wk")) {
        h.how = HF_ROPE, h.rot = hs;
        h.heads =
            !strcmp(r->ours, "layers.%d.attention.wq") || !c->n_kv_head ? c->n_head : c->n_kv_head;
    }
    return h;
}

/* The row of a head in transformers' rotate-half layout holding attograd's (Meta's) row i,
 * with rot rotary columns: pair p's two rows 2p and 2p + 1 are HF's p and rot/2 + p; the rows
 * from rot on pass through. */
static int half_row(int i, int rot) { return i >= rot ? i : (i % 2) * (rot / 2) + i / 2; }

/* src (rows, cols) in the folder's layout -> dst in attograd's (to_hf 0), or back (to_hf 1) */
static void relayout(const HfName *h, const Real *src, Real *dst, int rows, int cols, int to_hf) {
    if (h->how == HF_TRANSPOSE) { /* the folder's (cols, rows), attograd's (rows, cols) */
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                if (to_hf)
                    dst[(size_t)j * rows + i] = src[(size_t)i * cols + j];
                else
                    dst[(size_t)i * cols + j] = src[(size_t)j * rows + i];
        return;
    }
    if (h->how == HF_ROPE) { /* each head of rows / heads rows: rotate-half to pairs */
        int hs = rows / h->heads;
        for (int hd = 0; hd < h->heads; hd++)
            for (int i = 0; i < hs; i++) {
                size_t meta = (size_t)hd * hs + i, hf = (size_t)hd * hs + half_row(i, h->rot);
                memcpy(dst + (to_hf ? hf : meta) * cols, src + (to_hf ? meta : hf) * cols,
                       (size_t)cols * sizeof *dst);
            }
        return;
    }
    if (h->how == HF_NEOX_QKV) { /* HF (heads, [q k v], hs) per head; attograd (q, k, v) */
        int hs = rows / 3 / h->heads, C = hs * h->heads;
        for (int part = 0; part < 3; part++)
            for (int hd = 0; hd < h->heads; hd++)
                for (int i = 0; i < hs; i++) {
                    size_t meta = (size_t)part * C + (size_t)hd * hs + i,
                           hf = (size_t)hd * 3 * hs + (size_t)part * hs +
                                (part < 2 ? half_row(i, h->rot) : i);
                    memcpy(dst + (to_hf ? hf : meta) * cols, src + (to_hf ? meta : hf) * cols,
                           (size_t)cols * sizeof *dst);
                }
        return;
    }
    memcpy(dst, src, (size_t)rows * cols * sizeof *dst);
}

/* A tensor of the folder attograd's model has no parameter for, yet loads without: old GPT-2
 * files' causal masks, rotary caches, a tied head saved anyway (transformers ties it over). */
static int ignorable(const GptConfig *c, const char *name) {
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
           ends_with(name, ".attention.bias") || ends_with(name, ".attention.masked_bias") ||
           ends_with(name, "rotary_emb.inv_freq") ||
           (!c->untied && !strcmp(name, "lm_head.weight"));
}

static const char *class_of(const GptConfig *c) {
    return c->style == NN_LLAMA ? "LlamaForCausalLM"
           : neox(c)            ? "GPTNeoXForCausalLM"
                                : "GPT2LMHeadModel";
}

/* One parameter from the set: name, dtype, shape and values checked. */
static int load_param(const char *dir, const StSet *s, const GptConfig *c, Tensor *p, int bare) {
    HfName h = hf_name(c, p->name, bare);
    const StTensor *t = st_set_find(s, h.name);
    if (!t)
        return ag_fail(AG_ERR_FORMAT,
                       "%s: tensor '%s' is missing (a %s with this config.json has it)", dir,
                       h.name, class_of(c));
    int rows = p->shape[0], cols = p->ndim == 2 ? p->shape[1] : 1;
    int64_t want[2] = {rows, cols};
    if (h.how == HF_TRANSPOSE) want[0] = cols, want[1] = rows;
    char ws[64], gs[96];
    if (!st_dtype_is_float(t->dtype))
        return ag_fail(AG_ERR_FORMAT, "%s: tensor '%s' (%s): stored as %s, not as a float type",
                       dir, h.name, t->path, st_dtype_name(t->dtype));
    if (t->ndim != p->ndim || t->shape[0] != want[0] || (p->ndim == 2 && t->shape[1] != want[1]))
        return ag_fail(AG_ERR_SHAPE, "%s: tensor '%s' (%s): shape %s, the model's is %s", dir,
                       h.name, t->path, st_shape_str(gs, sizeof gs, t->ndim, t->shape),
                       st_shape_str(ws, sizeof ws, p->ndim, want));
    int rc = st_check_finite(t);
    if (rc != AG_OK) return rc;
    if (h.how == HF_AS_IS) { /* no temporary copy */
        rc = st_to_reals(t, p->data);
    } else {
        Real *tmp = malloc(p->size * sizeof *tmp);
        AG_CHECK(tmp, "hf_load: out of memory for %zu values", p->size);
        rc = st_to_reals(t, tmp);
        if (rc == AG_OK) relayout(&h, tmp, p->data, rows, cols, 0);
        free(tmp);
    }
    st_set_done_with(s, t); /* the file's copy leaves memory: one copy of each weight at a time */
    return rc;
}

int hf_load(const char *dir, Arena *a, Gpt *m) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(a);
    AG_CHECK_ARG(m);
    GptConfig cfg;
    int rc = hf_config(dir, &cfg);
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    StSet *s = NULL;
    if ((rc = st_open(dir, &s, NULL)) != AG_OK) return rc;
    cfg.dropout = 0; /* a published model runs as in evaluation; training sets its own */
    nn_gpt_init_unset(m, a, &cfg); /* no draws: every weight is loaded below */
    int bare = cfg.style == NN_GPT2 && !st_set_find(s, "transformer.wte.weight");
    unsigned char *used = calloc((size_t)s->n + 1, 1);
    AG_CHECK(used, "hf_load: out of memory");
    for (int i = 0; i < m->params.n && rc == AG_OK; i++) {
        rc = load_param(dir, s, &cfg, m->params.items[i], bare);
        HfName h = hf_name(&cfg, m->params.items[i]->name, bare);
        for (int k = 0; k < s->n; k++)
            if (!strcmp(s->tensors[k]->name, h.name)) used[k] = 1;
    }
    for (int k = 0; k < s->n && rc == AG_OK; k++)
        if (!used[k] && !ignorable(&cfg, s->tensors[k]->name))
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s: tensor '%s' (%s) is not a weight of a %s with this config.json", dir,
                         s->tensors[k]->name, s->tensors[k]->path, class_of(&cfg));
    free(used);
    st_set_free(s);
    if (rc != AG_OK) {
        nn_gpt_free(m);
        memset(m, 0, sizeof *m);
    }
    return rc;
}

/* ---- writing a folder ---- */

/* AG_OK when transformers' class computes what c does; else AG_ERR_ARG naming the option. A
 * GPT-2-style model with rotary positions is GPT-NeoX's (parallel residual or not, rotary on
 * all or part of each head, tied or untied). */
static int exportable(const GptConfig *cfg) {
    GptConfig c = nn_gpt_options(cfg);
    const char *why = NULL;
    int gpt2 = c.style == NN_GPT2, nx = neox(&c);
    if (c.post_ln)
        why = "post-LN blocks";
    else if (c.parallel_residual && !nx)
        why = "a parallel residual without rotary positions (GPT-NeoX's has them)";
    else if (c.rotary_dim && c.rotary_dim != c.n_embd / c.n_head && !nx)
        why = "partial rotary (GPT-NeoX's; LLaMA turns whole heads)";
    else if (gpt2 && c.pos != NN_GPT_POS_LEARNED && !nx)
        why = "positions other than learned or rotary ones";
    else if (gpt2 && c.norm != NN_GPT_NORM_LAYER)
        why = "norms other than LayerNorm";
    else if (gpt2 && c.mlp != NN_GPT_MLP_GELU && c.mlp != NN_GPT_MLP_GELU_TANH &&
             c.mlp != NN_GPT_MLP_RELU)
        why = "an MLP other than GELU's or ReLU's";
    else if (gpt2 && c.bias != NN_GPT_BIAS_ON)
        why = "no biases";
    else if (gpt2 && c.n_kv_head != c.n_head)
        why = "grouped-query heads";
    else if (!gpt2 && c.pos != NN_GPT_POS_ROPE)
        why = "positions other than rotary ones";
    else if (!gpt2 && c.norm != NN_GPT_NORM_RMS)
        why = "norms other than RMSNorm";
    else if (!gpt2 && c.mlp != NN_GPT_MLP_SWIGLU)
        why = "an MLP other than SwiGLU";
    else if (!gpt2 && c.bias != NN_GPT_BIAS_OFF)
        why = "biases";
    if (!why) return AG_OK;
    return ag_fail(AG_ERR_ARG,
                   "a %s-style model with %s has no transformers class (%s computes another "
                   "model)",
                   gpt2 ? "GPT-2" : "LLaMA", why, class_of(cfg));
}

/* GPT-NeoX's partial_rotary_factor for rot of hs columns: the smallest double from rot / hs up
 * whose int(hs * f), as transformers computes the rotary columns, is rot */
static double rotary_factor(int rot, int hs) {
    double f = (double)rot / hs;
    while ((int)(hs * f) < rot) f = nextafter(f, 2.0);
    return f;
}

#define SET(o, k, v) json_object_set_new(o, k, v)

/* the sizes LlamaConfig and GPTNeoXConfig name alike */
static void sizes_json(json_t *o, const GptConfig *c) {
    SET(o, "vocab_size", json_integer(c->vocab_size));
    SET(o, "max_position_embeddings", json_integer(c->block_size));
    SET(o, "hidden_size", json_integer(c->n_embd));
    SET(o, "intermediate_size", json_integer(c->ffn_hidden));
    SET(o, "num_hidden_layers", json_integer(c->n_layer));
    SET(o, "num_attention_heads", json_integer(c->n_head));
}

/* config.json for c as transformers' GPT2Config, LlamaConfig or GPTNeoXConfig writes it */
static json_t *config_json(const GptConfig *cfg) {
    GptConfig c = nn_gpt_options(cfg);
    json_t *o = json_object(), *arch = json_array();
    json_array_append_new(arch, json_string(class_of(&c)));
    SET(o, "architectures", arch);
    const char *dtype = sizeof(Real) == sizeof(double) ? "float64" : "float32";
    const char *act = c.mlp == NN_GPT_MLP_GELU_TANH ? "gelu_new"
                      : c.mlp == NN_GPT_MLP_RELU    ? "relu"
                                                    : "gelu";
    if (neox(&c)) { /* as transformers 5's GPTNeoXConfig writes it */
        int hs = c.n_embd / c.n_head;
        SET(o, "model_type", json_string("gpt_neox"));
        sizes_json(o, &c);
        SET(o, "hidden_act", json_string(act));
        SET(o, "layer_norm_eps", json_real(c.norm_eps));
        SET(o, "use_parallel_residual", json_boolean(c.parallel_residual));
        SET(o, "attention_bias", json_true());
        SET(o, "attention_dropout", json_real(c.dropout));
        SET(o, "hidden_dropout", json_real(c.dropout));
        json_t *rope = json_object();
        SET(rope, "partial_rotary_factor",
            json_real(rotary_factor(c.rotary_dim ? c.rotary_dim : hs, hs)));
        SET(rope, "rope_theta", json_real(c.rope_base));
        SET(rope, "rope_type", json_string("default"));
        SET(o, "rope_parameters", rope);
    } else if (c.style == NN_GPT2) {
        SET(o, "model_type", json_string("gpt2"));
        SET(o, "vocab_size", json_integer(c.vocab_size));
        SET(o, "n_positions", json_integer(c.block_size));
        SET(o, "n_embd", json_integer(c.n_embd));
        SET(o, "n_layer", json_integer(c.n_layer));
        SET(o, "n_head", json_integer(c.n_head));
        SET(o, "n_inner", json_integer(c.ffn_hidden));
        SET(o, "activation_function", json_string(act));
        SET(o, "layer_norm_epsilon", json_real(c.norm_eps));
        SET(o, "resid_pdrop", json_real(c.dropout));
        SET(o, "embd_pdrop", json_real(c.dropout));
        SET(o, "attn_pdrop", json_real(c.dropout));
        SET(o, "scale_attn_weights", json_true());
    } else {
        SET(o, "model_type", json_string("llama"));
        sizes_json(o, &c);
        SET(o, "num_key_value_heads", json_integer(c.n_kv_head));
        SET(o, "head_dim", json_integer(c.n_embd / c.n_head));
        SET(o, "hidden_act", json_string("silu"));
        SET(o, "rms_norm_eps", json_real(c.norm_eps));
        SET(o, "rope_theta", json_real(c.rope_base));
        SET(o, "attention_bias", json_false());
        SET(o, "mlp_bias", json_false());
        SET(o, "attention_dropout", json_real(c.dropout));
    }
    /* transformers' defaults name tokens a small vocabulary lacks (GPT2Config's bos and eos
     * 50256, LlamaConfig's 1 and 2, GPTNeoXConfig's 0 and 2): null says the model has none, as
     * attograd's have */
    int bos = neox(&c)             ? 0
              : c.style == NN_GPT2 ? 50256
                                   : 1,
        eos = c.style == NN_GPT2 && !neox(&c) ? 50256 : 2;
    if (bos >= c.vocab_size) SET(o, "bos_token_id", json_null());
    if (eos >= c.vocab_size) SET(o, "eos_token_id", json_null());
    SET(o, "tie_word_embeddings", json_boolean(!c.untied));
    SET(o, "dtype", json_string(dtype));
    return o;
}

int hf_save(const Gpt *m, const char *dir) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(dir);
    int rc = exportable(&m->cfg);
    if (rc != AG_OK) return rc;
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ag_fail(AG_ERR_IO, "%s: cannot create the folder: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ag_fail(AG_ERR_IO, "%s: not a folder", dir);
    /* the weights, relaid out into buffers that live until st_write returns */
    const ParamList *pl = &m->params;
    Tensor *tmp = calloc((size_t)pl->n + 1, sizeof *tmp);
    AG_CHECK(tmp, "hf_save: out of memory");
    StWriter *w = st_writer_new();
    for (int i = 0; i < pl->n; i++) {
        const Tensor *p = pl->items[i];
        HfName h = hf_name(&m->cfg, p->name, 0);
        int rows = p->shape[0], cols = p->ndim == 2 ? p->shape[1] : 1;
        tmp[i] = *p;
        tmp[i].data = malloc(p->size * sizeof(Real));
        AG_CHECK(tmp[i].data, "hf_save: out of memory for %zu values", p->size);
        if (h.how == HF_TRANSPOSE) tmp[i].shape[0] = cols, tmp[i].shape[1] = rows;
        relayout(&h, p->data, tmp[i].data, rows, cols, 1);
        st_add_real(w, h.name, &tmp[i], ST_REAL);
    }
    char *path = io_path_join(dir, ST_WEIGHTS_NAME);
    rc = st_write(w, path, NULL);
    free(path);
    st_writer_free(w);
    for (int i = 0; i < pl->n; i++) free(tmp[i].data);
    free(tmp);
    if (rc != AG_OK) return rc;
    json_t *o = config_json(&m->cfg);
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(o);
    AG_CHECK(text, "hf_save: out of memory");
    path = io_path_join(dir, "config.json");
    FILE *f;
    char *tname;
    rc = io_fopen_write(path, &f, &tname);
    if (rc == AG_OK) {
        fputs(text, f);
        fputc('\n', f);
        rc = io_fclose_replace(f, tname, path);
    }
    free(path);
    free(text);
    return rc;
}
