/* hf.c: attograd-gpt and Hugging Face folders: --model DIR (a folder transformers writes:
 * config.json, model.safetensors or shards) where a command takes --ckpt, and
 * `export --format hf --out DIR`. A folder's model comes from src/hf (hf_load); its tokenizer is
 * attograd's own, in the file GP_HF_TOKENIZER that `export --format hf` writes beside
 * config.json: tokenizer.json is not read yet, so a folder with only that one is refused
 * naming it. Not here: the model's layouts (src/hf/weights.c). Read next: docs/hf.md. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt_cli.h"

int gp_is_folder(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int gp_hf_model_load(GpModel *g, const char *dir) {
    memset(g, 0, sizeof *g);
    g->arena = arena_new("params", 0);
    int rc = hf_load(dir, g->arena, &g->m);
    if (rc != AG_OK) {
        arena_free(g->arena);
        g->arena = NULL;
        return rc;
    }
    char *tok = io_path_join(dir, GP_HF_TOKENIZER), *json = io_path_join(dir, "tokenizer.json");
    if (ex_file_exists(tok))
        rc = txt_load(tok, &g->tok);
    else if (ex_file_exists(json))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: tokenizer.json is not read by attograd yet (only its own tokenizer, "
                     "%s, which export --format hf writes)",
                     dir, GP_HF_TOKENIZER);
    else
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no tokenizer (%s)", dir, GP_HF_TOKENIZER);
    if (rc == AG_OK && txt_vocab_size(g->tok) != g->m.cfg.vocab_size)
        rc = ag_fail(AG_ERR_FORMAT, "%s: the tokenizer has %d ids, the model %d", dir,
                     txt_vocab_size(g->tok), g->m.cfg.vocab_size);
    free(tok);
    free(json);
    if (rc != AG_OK) gp_model_free(g);
    return rc;
}

int gp_hf_export(const GpModel *g, const char *dir) {
    int rc = hf_save(&g->m, dir);
    char *tok = io_path_join(dir, GP_HF_TOKENIZER);
    if (rc == AG_OK) rc = txt_save(g->tok, tok);
    free(tok);
    return rc;
}
