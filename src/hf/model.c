/* model.c: HfModel (hf.h), a GPT with its tokenizer from a Hugging Face folder (hf_load and
 * txt_any_load_dir) or from an attograd checkpoint (ckpt_read with nn_gpt_ckpt_config, the
 * weights, the tokenizer's saved form in meta.extra, train.step), the tokenizer checked to fit
 * the model either way.
 * Not here: the folder's layouts (weights.c), the checkpoint container (src/io/checkpoint.c),
 * the tokenizers (src/text). Read next: docs/hf.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/checkpoint.h"
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
