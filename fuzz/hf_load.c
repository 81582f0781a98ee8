/* hf_load.c: a Hugging Face folder (src/hf/weights.c) whose model.safetensors is any bytes: the
 * first byte chooses the config.json (a tiny GPT-2, a tiny LLaMA with grouped-query heads, or
 * a tiny GPT-NeoX, from tests/fixtures/hf), the rest is the weights file. Everything the safetensors reader
 * checks, then each tensor's name, dtype, shape and values against the model. A folder it
 * accepts must give a model whose every weight is finite and which written again (hf_save)
 * reads back with the same bits (GPT-NeoX: not written yet, so not checked); a refusal must
 * name the folder. */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* a config.json from the fixtures (the folder layout the loader reads) */
static const char *const configs[] = {
    "{\"activation_function\": \"gelu\", \"architectures\": [\"GPT2LMHeadModel\"], "
    "\"model_type\": \"gpt2\", \"n_embd\": 16, \"n_head\": 4, \"n_layer\": 2, \"n_positions\": 32, "
    "\"vocab_size\": 96, \"resid_pdrop\": 0, \"embd_pdrop\": 0, \"attn_pdrop\": 0}",
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 16, "
    "\"intermediate_size\": 40, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
    "\"num_key_value_heads\": 2, \"max_position_embeddings\": 32, \"rms_norm_eps\": 1e-06, "
    "\"rope_theta\": 500000.0, \"tie_word_embeddings\": false, \"vocab_size\": 96}",
    "{\"architectures\": [\"GPTNeoXForCausalLM\"], \"model_type\": \"gpt_neox\", \"hidden_size\": "
    "32, \"intermediate_size\": 64, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "
    "\"max_position_embeddings\": 32, \"rotary_pct\": 0.25, \"use_parallel_residual\": true, "
    "\"hidden_act\": \"gelu\", \"tie_word_embeddings\": false, \"vocab_size\": 96}"};

static char dir[64], back[128];

/* the folders go when the process ends */
static void clean(void) {
    static const char *const names[] = {"config.json", "model.safetensors"};
    char p[256];
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", back, names[k]);
        unlink(p);
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        unlink(p);
    }
    rmdir(back);
    rmdir(dir);
}

static void put(const char *name, const void *data, size_t size) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    FUZZ_CHECK(f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/attograd-fuzz-hf.%d", (int)getpid());
        snprintf(back, sizeof back, "%s/back", dir);
        FUZZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST, "cannot create %s", dir);
        atexit(clean);
    }
    if (size < 1) return 0;
    const char *cfg = configs[data[0] % 3];
    put("config.json", cfg, strlen(cfg));
    put("model.safetensors", data + 1, size - 1);
    Arena *a = arena_new("params", 0);
    Gpt m;
    int rc = hf_load(dir, a, &m);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, dir);
        arena_free(a);
        return 0;
    }
    for (int i = 0; i < m.params.n; i++)
        for (size_t j = 0; j < m.params.items[i]->size; j++)
            FUZZ_CHECK(isfinite(m.params.items[i]->data[j]), "%s[%zu] not finite",
                       m.params.items[i]->name, j);
    if (m.cfg.parallel_residual || m.cfg.rotary_dim) { /* GPT-NeoX: no export yet */
        nn_gpt_free(&m);
        arena_free(a);
        return 0;
    }
    FUZZ_CHECK(hf_save(&m, back) == AG_OK, "accepted, but not written: %s", ag_last_error());
    Arena *b = arena_new("params", 0);
    Gpt r;
    FUZZ_CHECK(hf_load(back, b, &r) == AG_OK, "written, but not read back: %s", ag_last_error());
    for (int i = 0; i < m.params.n; i++)
        FUZZ_CHECK(memcmp(m.params.items[i]->data, r.params.items[i]->data,
                          m.params.items[i]->size * sizeof(Real)) == 0,
                   "%s: other bits read back", m.params.items[i]->name);
    nn_gpt_free(&r);
    arena_free(b);
    nn_gpt_free(&m);
    arena_free(a);
    return 0;
}
