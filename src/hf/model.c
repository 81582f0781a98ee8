/* model.c: HfModel (hf.h), a GPT with its tokenizer from a Hugging Face folder (hf_load and
 * txt_any_load_dir) or from an attograd checkpoint (ckpt_read with nn_gpt_ckpt_config, the
 * weights, the tokenizer's saved form in meta.extra, train.step), the tokenizer checked to fit
 * the model either way; and written back as a folder transformers loads (hf_model_save).
 * Not here: the folder's layouts (weights.c), the checkpoint container (src/io/checkpoint.c),
 * the tokenizers (src/text). Read next: docs/hf.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/checkpoint.h"
#include "../io/file.h"
#include "../io/safetensors.h"
#include "hf.h"

int hf_is_folder(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int folder_load(const char *dir, HfModel *g) {
    g->arena = arena_new("params", 0);
    arena_lazy_grads(g->arena, 1); /* run or studied, not trained: gradients only if needed */
    int rc = hf_load(dir, g->arena, &g->m);
    if (rc != AG_OK) {
        arena_free(g->arena);
        g->arena = NULL;
        return rc;
    }
    rc = txt_any_load_dir(dir, &g->text);
    if (rc == AG_OK && !(g->dir = strdup(dir)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", dir);
    if (rc == AG_OK) rc = txt_any_fits(&g->text, g->m.cfg.vocab_size, dir);
    return rc;
}

static int ckpt_file_load(const char *path, HfModel *g) {
    struct stat st;
    if (stat(path, &st) != 0)
        return ag_fail(AG_ERR_IO, "%s: cannot read: %s", path, strerror(ENOENT));
    NpzFile *f;
    GptConfig mc = {0};
    CkptConfig kc = nn_gpt_ckpt_config(&mc);
    int rc = ckpt_read(path, &kc, &f);
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    g->arena = arena_new("params", 0);
    arena_lazy_grads(g->arena, 1);
    Rng init;
    rng_seed(&init, 1);
    nn_gpt_init(&g->m, g->arena, &init, &mc);
    Checkpoint ck = {.params = &g->m.params, .config = nn_gpt_ckpt_config(&g->m.cfg)};
    rc = ckpt_load_from(f, &ck);
    const NpzEntry *se = npz_find(f, "train.step");
    if (rc == AG_OK && se && se->dtype == NPZ_I64 && se->ndim == 0)
        memcpy(&g->step, se->data, sizeof g->step);
    npz_free(f);
    if (rc == AG_OK && !ck.extra)
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no tokenizer (meta.extra)", path);
    if (rc == AG_OK) rc = txt_any_from_bytes(ck.extra, ck.extra_len, path, &g->text);
    free((void *)ck.extra);
    if (rc == AG_OK) rc = txt_any_fits(&g->text, mc.vocab_size, path);
    return rc;
}

int hf_model_load(const char *path, HfModel *out) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(out);
    memset(out, 0, sizeof *out);
    int rc = hf_is_folder(path) ? folder_load(path, out) : ckpt_file_load(path, out);
    if (rc != AG_OK) hf_model_free(out);
    return rc;
}

void hf_model_free(HfModel *g) {
    AG_CHECK_ARG(g);
    if (g->arena) {
        nn_gpt_free(&g->m);
        arena_free(g->arena);
    }
    txt_any_free(&g->text);
    free(g->dir);
    memset(g, 0, sizeof *g);
}

/* src's bytes written to dst (a tokenizer file of the source folder, at most 256 MiB as
 * txt_hf_load reads it) */
static int copy_file(const char *src, const char *dst) {
    char *buf;
    size_t size;
    int rc = st_read_small(src, (uint64_t)256 << 20, &buf, &size);
    if (rc == AG_OK) rc = io_write_file(dst, buf, size);
    free(buf);
    return rc;
}

/* tokenizer_config.json naming the class that takes tokenizer.json as it is: without it
 * transformers' AutoTokenizer picks the model type's class (GPT2Tokenizer for a GPT-2 config),
 * which puts GPT-2's own pre-tokenizer in place of attograd's split and changes the ids of text
 * where a non-ASCII character touches a letter */
static int write_tokenizer_config(const char *dir) {
    static const char text[] = "{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n";
    char *path = io_path_join(dir, "tokenizer_config.json");
    int rc = io_write_file(path, text, sizeof text - 1);
    free(path);
    return rc;
}

int hf_model_save(const HfModel *g, const char *dir) {
    AG_CHECK_ARG(g);
    AG_CHECK_ARG(dir);
    int rc = hf_save(&g->m, dir);
    if (g->text.tok) {
        char *tok = io_path_join(dir, TXT_ANY_OWN_FILE),
             *json = io_path_join(dir, "tokenizer.json");
        if (rc == AG_OK) rc = txt_save(g->text.tok, tok);
        if (rc == AG_OK) rc = txt_write_hf(g->text.tok, json);
        if (rc == AG_OK) rc = write_tokenizer_config(dir);
        free(tok), free(json);
        return rc;
    }
    if (!g->dir) { /* a checkpoint's tokenizer.json (attograd-gpt prepare --model of a folder) */
        char *json = io_path_join(dir, "tokenizer.json");
        size_t len;
        const char *text = txt_hf_json(g->text.hf, &len);
        if (rc == AG_OK) rc = io_write_file(json, text, len);
        if (rc == AG_OK) rc = write_tokenizer_config(dir);
        free(json);
        return rc;
    }
    static const char *const names[] = {"tokenizer.json", "vocab.json", "merges.txt",
                                        "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; rc == AG_OK && i < sizeof names / sizeof *names; i++) {
        char *src = io_path_join(g->dir, names[i]), *dst = io_path_join(dir, names[i]);
        struct stat st;
        if (stat(src, &st) == 0) rc = copy_file(src, dst);
        free(src), free(dst);
    }
    return rc;
}
