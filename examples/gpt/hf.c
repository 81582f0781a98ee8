/* hf.c: attograd-gpt's `export --format hf --out DIR`: the model as a folder transformers
 * loads (hf_save) with its tokenizer (attograd's own as TXT_ANY_OWN_FILE and tokenizer.json, or
 * the source folder's files). Reading a folder (--model DIR) is src/hf's hf_model_load.
 * Not here: the model's layouts (src/hf/weights.c), tokenizer.json itself (src/text/hf_*.c).
 * Read next: docs/hf.md. */
#include <stdlib.h>
#include <string.h>

#include "gpt_cli.h"

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

int gp_hf_export(const HfModel *g, const char *dir) {
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
    if (!g->dir) { /* a checkpoint's tokenizer.json (prepare --model of a folder) */
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
        if (ex_file_exists(src)) rc = copy_file(src, dst);
        free(src), free(dst);
    }
    return rc;
}
