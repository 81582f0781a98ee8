/* test_load.c: Hugging Face folders into attograd's GPT (src/hf/weights.c) and back. The
 * folders of tests/fixtures/hf/ were written by transformers (tests/hf/make_hf_fixtures.py,
 * run by hand) with the logits it computes in float64 for fixed ids (expected.safetensors):
 * attograd's forward of the loaded model must give them to 1e-4 (float build) or 1e-10
 * (double). Then an export written by hf_save reads back with the same bits of every weight,
 * and what cannot be loaded is refused naming the folder, the tensor and the reason. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"
#include "tensor/kernels.h" /* k_par_min: every product split among the threads */
#include "models.h"

#define FX "tests/fixtures/hf/"
#define TOL (sizeof(Real) == sizeof(double) ? 1e-10 : 1e-4)

/* the largest |attograd - transformers| over the logits of dir's expected ids, relative to
 * 1 + |transformers'| (ts_logits_error) */
static double logits_error(const char *dir, Gpt *m) {
    char path[512];
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    return ts_logits_error(path, m);
}

static void matches(const char *dir) {
    Arena *a = arena_new("params", 0);
    Gpt m;
    cr_assert_eq(hf_load(dir, a, &m), AG_OK, "%s: %s", dir, ag_last_error());
    double e = logits_error(dir, &m);
    cr_assert(e <= TOL, "%s: logits differ from transformers' by %.3g (tolerance %.0e)", dir, e,
              TOL);
    nn_gpt_free(&m);
    arena_free(a);
}

Test(hf_load, gpt2_with_gelu_new_matches_transformers) { matches(FX "gpt2"); }
Test(hf_load, gpt2_with_the_exact_gelu_matches_transformers) { matches(FX "gpt2_gelu"); }
Test(hf_load, gpt2_keys_without_transformer_prefix) { matches(FX "gpt2_bare"); }
Test(hf_load, llama_grouped_query_sharded_matches_transformers) { matches(FX "llama"); }
Test(hf_load, llama_tied_matches_transformers) { matches(FX "llama_tied"); }

Test(hf_load, neox_parallel_partial_rotary_matches_transformers) { matches(FX "neox"); }
Test(hf_load, neox_sequential_matches_transformers) { matches(FX "neox_sequential"); }

Test(hf_load, reads_neoxs_configuration) {
    GptConfig c;
    cr_assert_eq(hf_config(FX "neox", &c), AG_OK, "%s", ag_last_error());
    cr_assert(c.style == NN_GPT2 && c.pos == NN_GPT_POS_ROPE && c.norm == NN_GPT_NORM_LAYER &&
              c.mlp == NN_GPT_MLP_GELU && c.bias == NN_GPT_BIAS_ON && c.parallel_residual == 1 &&
              c.rotary_dim == 2 && c.untied == 1 && c.n_embd == 32 && c.n_head == 4 &&
              c.ffn_hidden == 64 && c.rope_base == 10000);
    cr_assert_eq(hf_config(FX "neox_sequential", &c), AG_OK, "%s", ag_last_error());
    cr_assert_eq(c.parallel_residual, 0);
}

Test(hf_load, reads_llamas_configuration) {
    GptConfig c;
    cr_assert_eq(hf_config(FX "llama", &c), AG_OK, "%s", ag_last_error());
    cr_assert(c.style == NN_LLAMA && c.n_head == 4 && c.n_kv_head == 2 && c.n_embd == 16 &&
              c.ffn_hidden == 40 && c.rope_base == 500000.0 && c.norm_eps == 1e-6 &&
              c.untied == 1 && c.block_size == 32 && c.vocab_size == 96);
    cr_assert_eq(hf_config(FX "llama_tied", &c), AG_OK, "%s", ag_last_error());
    cr_assert_eq(c.untied, 0);
}

/* ---- decoding ---- */

/* Decoding through the cache (5 positions, then one at a time: products of one row, k_gemm's
 * rows path, and attention over the cached keys) gives every position the very bits of the
 * full forward over all 12 (the blocked products), for 1, 2 and 3 threads with every product
 * split among them: so a token generated is the one the full forward gives, and a change of
 * the decoding path that changes a bit fails here */
Test(hf_load, decoding_through_the_cache_gives_the_full_forwards_bits) {
    static const char *const dirs[] = {FX "gpt2", FX "llama", FX "neox", FX "neox_sequential"};
    size_t saved = k_par_min;
    k_par_min = 1;
    for (int k = 0; k < 4; k++) {
        Arena *a = arena_new("params", 0), *step = arena_new("step", 0);
        Gpt m;
        cr_assert_eq(hf_load(dirs[k], a, &m), AG_OK, "%s", ag_last_error());
        enum { T = 12 };
        int V = m.cfg.vocab_size, ids[T];
        for (int i = 0; i < T; i++) ids[i] = (1 + 37 * i) % V;
        Tape *t = ag_tape_new(step);
        ag_no_grad(t, 1);
        ag_threads_use(1);
        Tensor *full = nn_gpt_forward(t, &m, ids, 1, T, NULL);
        Real *want = malloc(full->size * sizeof(Real));
        cr_assert(want);
        memcpy(want, full->data, full->size * sizeof(Real));
        for (int threads = 1; threads <= 3; threads++) {
            ag_threads_use(threads);
            GptCache c;
            nn_gpt_cache_init(&c, &m, 1, T);
            for (int p = 0; p < T;) {
                int n = p == 0 ? 5 : 1;
                ag_tape_reset(t);
                Tensor *y = nn_gpt_forward_cached(t, &m, &c, ids + p, 1, n);
                for (int i = 0; i < n; i++)
                    cr_assert(memcmp(y->data + (size_t)i * V, want + (size_t)(p + i) * V,
                                     (size_t)V * sizeof(Real)) == 0,
                              "%s, %d threads: position %d's logits decoded through the cache "
                              "differ from the full forward's",
                              dirs[k], threads, p + i);
                p += n;
            }
            nn_gpt_cache_free(&c);
        }
        free(want);
        ag_tape_free(t);
        nn_gpt_free(&m);
        arena_free(step);
        arena_free(a);
    }
    k_par_min = saved;
    ag_threads_use(0); /* the default again */
}

/* ---- a loaded model only run holds no gradients ---- */

static int read_only(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx) {
    (void)t, (void)x, (void)at;
    ++*(int *)ctx;
    return AG_OK;
}

/* every parameter of m without a gradient, and a's bytes as they were (used) */
static void no_gradient(const Gpt *m, const Arena *a, size_t used, const char *dir,
                        const char *after) {
    for (int i = 0; i < m->params.n; i++)
        cr_assert(m->params.items[i]->grad == NULL, "%s: %s has a gradient after %s", dir,
                  m->params.items[i]->name, after);
    cr_assert_eq(a->used, used, "%s: the parameters' arena grew by %zu bytes in %s", dir,
                 a->used - used, after);
}

/* attograd-gpt loads a folder into an arena_lazy_grads arena to sample or study it: a forward,
 * a hooked forward (every point hooked, so the attention runs as plain ops on c_attn's row
 * blocks) and a cached hooked forward, all without gradients, make no gradient */
Test(hf_load, a_forward_with_every_hook_makes_no_gradient_of_a_lazy_model) {
    static const char *const dirs[] = {FX "gpt2", FX "llama", FX "neox"};
    for (int k = 0; k < 3; k++) {
        Arena *a = arena_new("params", 0), *step = arena_new("step", 0);
        arena_lazy_grads(a, 1);
        Gpt m;
        cr_assert_eq(hf_load(dirs[k], a, &m), AG_OK, "%s", ag_last_error());
        size_t used = a->used;
        no_gradient(&m, a, used, dirs[k], "hf_load");
        Tape *t = ag_tape_new(step);
        ag_no_grad(t, 1);
        int ids[6] = {1, 5, 9, 2, 7, 3}, calls = 0;
        nn_gpt_forward(t, &m, ids, 1, 6, NULL);
        no_gradient(&m, a, used, dirs[k], "a forward");
        NnHooks h;
        nn_hooks_init(&h, m.cfg.n_layer);
        cr_assert_gt(nn_hooks_add(&h, "*", read_only, &calls), 0);
        ag_tape_reset(t);
        cr_assert(nn_gpt_forward_hooked(t, &m, ids, 1, 6, NULL, &h), "%s", ag_last_error());
        cr_assert_gt(calls, 0);
        no_gradient(&m, a, used, dirs[k], "a hooked forward");
        GptCache c;
        nn_gpt_cache_init(&c, &m, 1, 6);
        ag_tape_reset(t);
        cr_assert(nn_gpt_forward_cached_hooked(t, &m, &c, ids, 1, 4, &h), "%s", ag_last_error());
        cr_assert(nn_gpt_forward_cached_hooked(t, &m, &c, ids + 4, 1, 2, &h), "%s",
                  ag_last_error());
        no_gradient(&m, a, used, dirs[k], "a cached hooked forward");
        nn_gpt_cache_free(&c);
        nn_hooks_free(&h);
        ag_tape_free(t);
        nn_gpt_free(&m);
        arena_free(step);
        arena_free(a);
    }
}

/* dir's model written by hf_save into a fresh folder and read back: every weight the same bits */
static void round_trip(Gpt *m) {
    char tmp[256];
    ts_tmp_dir(tmp, sizeof tmp, "hfsave");
    cr_assert_eq(hf_save(m, tmp), AG_OK, "%s", ag_last_error());
    /* no bos/eos id outside the vocabulary (transformers' GPT-2 defaults are 50256): null */
    char cp[512];
    char *json = ts_read_text(ts_join(cp, tmp, "config.json"), NULL);
    GptConfig o = nn_gpt_options(&m->cfg);
    int gpt2 = o.style == NN_GPT2 && o.pos != NN_GPT_POS_ROPE; /* rotary: GPT-NeoX's 0 and 2 */
    cr_assert(!gpt2 == !strstr(json, "\"eos_token_id\": null") && !strstr(json, "50256"), "%s",
              json);
    free(json);
    Arena *b = arena_new("params", 0);
    Gpt back;
    cr_assert_eq(hf_load(tmp, b, &back), AG_OK, "%s: %s", tmp, ag_last_error());
    cr_assert_eq(back.params.n, m->params.n);
    for (int i = 0; i < m->params.n; i++) {
        const Tensor *p = m->params.items[i], *q = back.params.items[i];
        cr_assert_str_eq(p->name, q->name);
        cr_assert(p->size == q->size && memcmp(p->data, q->data, p->size * sizeof(Real)) == 0,
                  "%s: not the same bits after hf_save and hf_load", p->name);
    }
    GptConfig c = nn_gpt_options(&m->cfg), d = nn_gpt_options(&back.cfg);
    cr_assert(c.style == d.style && c.mlp == d.mlp && c.n_kv_head == d.n_kv_head &&
              c.untied == d.untied && c.rope_base == d.rope_base && c.norm_eps == d.norm_eps &&
              c.ffn_hidden == d.ffn_hidden && c.block_size == d.block_size && c.pos == d.pos &&
              c.rotary_dim == d.rotary_dim && c.parallel_residual == d.parallel_residual);
    nn_gpt_free(&back);
    arena_free(b);
    ts_rm_tree(tmp);
}

Test(hf_save, round_trips_the_fixtures_bit_for_bit) {
    static const char *const dirs[] = {FX "gpt2_gelu", FX "llama", FX "llama_tied", FX "neox",
                                       FX "neox_sequential"};
    for (int k = 0; k < 5; k++) {
        Arena *a = arena_new("params", 0);
        Gpt m;
        cr_assert_eq(hf_load(dirs[k], a, &m), AG_OK, "%s", ag_last_error());
        round_trip(&m);
        nn_gpt_free(&m);
        arena_free(a);
    }
}

/* The models attograd builds that a transformers class computes, each family and option once:
 * GPT-2 (GPT2LMHeadModel) with the exact GELU, tied; gelu_new, untied; ReLU, one layer; LLaMA
 * (LlamaForCausalLM) with grouped-query heads, untied and tied; GPT-NeoX (GPTNeoXForCausalLM)
 * with a parallel residual and 4 of each head's 12 columns turned, untied, and sequential with
 * whole heads turned, gelu_new, tied. Both the round trip and the live comparison run them. */
#define SMALL(L) .vocab_size = 50, .block_size = 16, .n_layer = L
static const GptConfig exportable[] = {
    {SMALL(2), .n_head = 2, .n_embd = 16},
    {SMALL(2), .n_head = 2, .n_embd = 16, .mlp = NN_GPT_MLP_GELU_TANH, .untied = 1},
    {SMALL(1), .n_head = 2, .n_embd = 16, .mlp = NN_GPT_MLP_RELU},
    {SMALL(2), .style = NN_LLAMA, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .rope_base = 5000,
     .untied = 1},
    {SMALL(2), .style = NN_LLAMA, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .rope_base = 777},
    {SMALL(2), .n_head = 2, .n_embd = 24, .pos = NN_GPT_POS_ROPE, .rotary_dim = 4,
     .parallel_residual = 1, .rope_base = 321, .untied = 1},
    {SMALL(2), .n_head = 2, .n_embd = 16, .pos = NN_GPT_POS_ROPE, .mlp = NN_GPT_MLP_GELU_TANH,
     .rope_base = 2000},
};
#undef SMALL
#define N_EXPORTABLE (sizeof exportable / sizeof *exportable)

/* exportable[k] with random weights from seed, far from the initialisation's scale (m in a's
 * arena) */
static void exportable_model(Gpt *m, Arena *a, size_t k, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    nn_gpt_init(m, a, &rng, &exportable[k]);
    for (int i = 0; i < m->params.n; i++)
        for (size_t j = 0; j < m->params.items[i]->size; j++)
            m->params.items[i]->data[j] += (Real)(0.3 * rng_normal(&rng));
}

Test(hf_save, round_trips_models_attograd_builds) {
    for (size_t k = 0; k < N_EXPORTABLE; k++) {
        Arena *a = arena_new("params", 0);
        Gpt m;
        exportable_model(&m, a, k, 5 + k);
        round_trip(&m);
        nn_gpt_free(&m);
        arena_free(a);
    }
}

/* each model with the option named: GPT-2 has no post-LN blocks, no positions other than
 * learned ones (rotary: GPT-NeoX's), no parallel residual (GPT-NeoX's, with rotary positions) */
Test(hf_save, refuses_models_no_transformers_class_computes) {
#define ONE_LAYER .vocab_size = 40, .block_size = 8, .n_layer = 1, .n_head = 2
    static const struct {
        GptConfig c;
        const char *says;
    } rows[] = {
        {{ONE_LAYER, .n_embd = 8, .pos = NN_GPT_POS_NONE},
         "positions other than learned or rotary ones"},
        {{ONE_LAYER, .n_embd = 8, .parallel_residual = 1}, "a parallel residual without rotary"},
        {{ONE_LAYER, .n_embd = 8, .pos = NN_GPT_POS_ROPE, .norm = NN_GPT_NORM_RMS},
         "norms other than LayerNorm has no transformers class (GPTNeoXForCausalLM"},
        {{ONE_LAYER, .style = NN_LLAMA, .n_embd = 16, .rotary_dim = 4}, "partial rotary"},
    };
#undef ONE_LAYER
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        Arena *a = arena_new("params", 0);
        Rng rng;
        rng_seed(&rng, 1);
        Gpt m;
        nn_gpt_init(&m, a, &rng, &rows[k].c);
        cr_assert_eq(hf_save(&m, "/nonexistent-never-written"), AG_ERR_ARG, "row %zu", k);
        cr_assert(strstr(ag_last_error(), rows[k].says), "row %zu: %s", k, ag_last_error());
        nn_gpt_free(&m);
        arena_free(a);
    }
}

/* ---- hostile folders ---- */

/* a folder tmp holding config (text) and a copy of src's weights file */
static void folder(char *tmp, size_t n, const char *config, const char *weights) {
    ts_tmp_dir(tmp, n, "hfbad");
    char p[512];
    ts_write_text(ts_join(p, tmp, "config.json"), config);
    if (weights) {
        size_t len;
        char *b = ts_slurp(weights, &len);
        ts_write_bytes(ts_join(p, tmp, "model.safetensors"), b, len);
        free(b);
    }
}

static void refused(const char *config, const char *weights, int code, const char *want) {
    char tmp[256];
    folder(tmp, sizeof tmp, config, weights);
    Arena *a = arena_new("params", 0);
    Gpt m;
    int rc = hf_load(tmp, a, &m);
    cr_assert_eq(rc, code, "rc %d: %s", rc, ag_last_error());
    cr_assert(strstr(ag_last_error(), want), "'%s' lacks '%s'", ag_last_error(), want);
    arena_free(a);
    ts_rm_tree(tmp);
}

/* the text of fixture dir's config.json with from replaced by to (once) */
static char *config_with(const char *dir, const char *from, const char *to) {
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    size_t n;
    char *s = ts_read_text(p, &n), *at = strstr(s, from);
    cr_assert(at, "%s lacks %s", p, from);
    char *r = malloc(n + strlen(to) + 1);
    sprintf(r, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    free(s);
    return r;
}

/* A folder whose config.json is fixture dir's with from replaced by to (dir NULL: to is the
 * whole text), with weights (a file copied; NULL: none), refused with code and a message
 * holding want */
static const struct {
    const char *dir, *from, *to, *weights;
    int code;
    const char *want;
} hostile[] = {
    /* another model's weights: the first missing tensor named */
    {FX "gpt2_gelu", "", "", FX "llama_tied/model.safetensors", AG_ERR_FORMAT,
     "tensor 'wte.weight' is missing"},
    /* a width the weights do not have */
    {FX "gpt2_gelu", "\"n_inner\": null", "\"n_inner\": 32", FX "gpt2_gelu/model.safetensors",
     AG_ERR_SHAPE, "tensor 'transformer.h.0.mlp.c_fc.weight' ("},
    /* fewer layers than the weights: layer 1's tensors belong to nothing */
    {FX "gpt2_gelu", "\"n_layer\": 2", "\"n_layer\": 1", FX "gpt2_gelu/model.safetensors",
     AG_ERR_FORMAT, "is not a weight of a GPT2LMHeadModel"},
    /* values attograd cannot compute, named with the key */
    {FX "llama", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", NULL, AG_ERR_FORMAT,
     "\"hidden_act\": \"gelu\": attograd computes only \"silu\""},
    {FX "llama", "\"rope_type\": \"default\"", "\"rope_type\": \"yarn\"", NULL, AG_ERR_FORMAT,
     "only \"rope_type\": \"default\""},
    {FX "llama", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", NULL, AG_ERR_FORMAT,
     "n_kv_head"},
    {FX "llama", "\"head_dim\": 4", "\"head_dim\": 8", NULL, AG_ERR_FORMAT, "\"head_dim\": 8"},
    {FX "llama", "\"use_cache\": true", "\"sliding_window\": 4096", NULL, AG_ERR_FORMAT,
     "\"sliding_window\": 4096: not a key"},
    {NULL, NULL, "{\"model_type\": \"mistral\"}", NULL, AG_ERR_FORMAT,
     "\"model_type\": \"mistral\""},
    /* GPT-NeoX: an odd number of rotary columns, another activation, biases off */
    {FX "neox", "\"partial_rotary_factor\": 0.25", "\"partial_rotary_factor\": 0.375", NULL,
     AG_ERR_FORMAT, "0.375 of a head of 8 columns is 3 rotary columns"},
    {FX "neox", "\"hidden_act\": \"gelu\"", "\"hidden_act\": \"silu\"", NULL, AG_ERR_FORMAT,
     "\"hidden_act\": \"silu\": not supported"},
    {FX "neox", "\"attention_bias\": true", "\"attention_bias\": false", NULL, AG_ERR_FORMAT,
     "\"attention_bias\": false: attograd computes only true"},
    /* GPT-NeoX's weights under a GPT-2 configuration: named */
    {FX "gpt2_gelu", "", "", FX "neox/model.safetensors", AG_ERR_FORMAT,
     "tensor 'wte.weight' is missing"},
    {NULL, NULL, "[1]", NULL, AG_ERR_FORMAT, "not a JSON object"},
    /* no weights at all; a weights file that is not one */
    {FX "gpt2_gelu", "", "", NULL, AG_ERR_IO, ""},
    {FX "gpt2_gelu", "", "", FX "gpt2_gelu/config.json", AG_ERR_FORMAT, "model.safetensors"},
};

Test(hf_load, refuses_hostile_folders_naming_tensor_and_reason) {
    for (size_t k = 0; k < sizeof hostile / sizeof *hostile; k++) {
        char *c = hostile[k].dir ? config_with(hostile[k].dir, hostile[k].from, hostile[k].to)
                                 : strdup(hostile[k].to);
        refused(c, hostile[k].weights, hostile[k].code, hostile[k].want);
        free(c);
    }
}

Test(hf_load, refuses_weights_that_are_not_finite) {
    Arena *a = arena_new("params", 0);
    Gpt m;
    cr_assert_eq(hf_load(FX "gpt2_gelu", a, &m), AG_OK, "%s", ag_last_error());
    Tensor *w = ag_params_find(&m.params, "transformer.h.1.ln_2.bias");
    w->data[3] = NAN;
    char tmp[256];
    ts_tmp_dir(tmp, sizeof tmp, "hfnan");
    cr_assert_eq(hf_save(&m, tmp), AG_OK, "%s", ag_last_error());
    Arena *b = arena_new("params", 0);
    Gpt back;
    cr_assert_eq(hf_load(tmp, b, &back), AG_ERR_RANGE);
    cr_assert(strstr(ag_last_error(), "'transformer.h.1.ln_2.bias'[3] = nan"), "%s",
              ag_last_error());
    arena_free(b);
    ts_rm_tree(tmp);
    nn_gpt_free(&m);
    arena_free(a);
}

/* ---- the live comparison: transformers loads what hf_save writes ---- */

/* a python3 with transformers and torch (AG_HF_PYTHON, else /usr/bin/python3), or NULL */
static const char *hf_python(void) {
    static char cmd[1024];
    const char *env = getenv("AG_HF_PYTHON");
    const char *py = env && *env ? env : "/usr/bin/python3";
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, safetensors, transformers' >/dev/null 2>&1",
             py);
    return system(cmd) == 0 ? py : NULL;
}

Test(hf_save, transformers_loads_the_export_with_the_same_logits) {
    const char *py = hf_python();
    if (!py) {
        const char *env = getenv("AG_HF_PYTHON");
        cr_skip_test("the live comparison with transformers: %s cannot import torch, safetensors "
                     "and transformers (set AG_HF_PYTHON to a python3 that can, e.g. "
                     "/opt/tl/bin/python); the committed fixtures were compared",
                     env && *env ? env : "/usr/bin/python3");
    }
    for (size_t k = 0; k < N_EXPORTABLE; k++) {
        Arena *a = arena_new("params", 0);
        Gpt m;
        exportable_model(&m, a, k, 11 + k);
        char tmp[256], cmd[1024];
        ts_tmp_dir(tmp, sizeof tmp, "hflive");
        cr_assert_eq(hf_save(&m, tmp), AG_OK, "%s", ag_last_error());
        snprintf(cmd, sizeof cmd, "'%s' tests/hf/hf_live.py '%s' >/dev/null 2>&1", py, tmp);
        cr_assert_eq(system(cmd), 0, "%s failed (run it by hand to see why)", cmd);
        double e = logits_error(tmp, &m);
        cr_assert(e <= TOL, "%s: transformers' logits differ by %.3g", tmp, e);
        ts_rm_tree(tmp);
        nn_gpt_free(&m);
        arena_free(a);
    }
}
