/* hf.c: attograd-gpt and Hugging Face folders: --model DIR (a folder transformers writes:
 * config.json, model.safetensors or shards) where a command takes --ckpt, and
 * `export --format hf --out DIR`. A folder's model comes from src/hf (hf_load); its tokenizer is
 * attograd's own (GP_HF_TOKENIZER, which `export --format hf` writes beside config.json) where
 * the folder holds one, else the folder's tokenizer.json (or GPT-2's vocab.json + merges.txt)
 * read by src/text's txt_hf_*, with the tokenizers library's ids. The commands encode and decode
 * through gp_encode_alloc, gp_token_bytes and gp_decode_alloc, whichever of the two it is.
 * Not here: the model's layouts (src/hf/weights.c), tokenizer.json itself (src/text/hf_*.c).
 * Read next: docs/hf.md. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpt_cli.h"

int gp_is_folder(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int gp_hf_tokenizer_load(const char *dir, TxtTokenizer **tok, TxtHf **hf) {
    *tok = NULL, *hf = NULL;
    char *own = io_path_join(dir, GP_HF_TOKENIZER), *json = io_path_join(dir, "tokenizer.json"),
         *vocab = io_path_join(dir, "vocab.json"), *merges = io_path_join(dir, "merges.txt");
    int rc;
    if (ex_file_exists(own))
        rc = txt_load(own, tok);
    else if (ex_file_exists(json) || (ex_file_exists(vocab) && ex_file_exists(merges)))
        rc = txt_hf_load(dir, hf); /* tokenizer.json first, as txt_hf_load reads a folder */
    else
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or %s)", dir,
                     GP_HF_TOKENIZER);
    free(own), free(json), free(vocab), free(merges);
    return rc;
}

int gp_tokenizer_from_bytes(const void *bytes, size_t len, const char *label, TxtTokenizer **tok,
                            TxtHf **hf) {
    *tok = NULL, *hf = NULL;
    if (len >= 8 && memcmp(bytes, "ATGTOKEN", 8) == 0)
        return txt_from_bytes(bytes, len, label, tok);
    int rc = txt_hf_from_json(bytes, len, label, hf);
    if (rc != AG_OK && strstr(ag_last_error(), ": not valid JSON: ")) {
        char why[600];
        snprintf(why, sizeof why, "%s", ag_last_error() + strlen(label) + 2);
        rc = ag_fail(rc, "%s: neither attograd's tokenizer (ATGTOKEN) nor a tokenizer.json (%s)",
                     label, why);
    }
    return rc;
}

uint8_t *gp_tokenizer_bytes(const TxtTokenizer *tok, const TxtHf *hf, size_t *len) {
    if (tok) return txt_to_bytes(tok, len);
    const char *json = txt_hf_json(hf, len);
    uint8_t *b = ex_malloc(*len ? *len : 1);
    memcpy(b, json, *len);
    return b;
}

int gp_tokenizer_vocab(const TxtTokenizer *tok, const TxtHf *hf) {
    return tok ? txt_vocab_size(tok) : txt_hf_vocab_size(hf);
}

int gp_tokenizer_fits(const TxtTokenizer *tok, const TxtHf *hf, int vocab_size, const char *label) {
    int V = gp_tokenizer_vocab(tok, hf);
    /* a tokenizer.json may hold fewer ids than the model's padded vocabulary (GPT-2's 50257 of
     * 50257, Pythia's 50277 of 50304): ids it lacks are never encoded, and decoding one is an
     * error naming it; more ids than the model has are refused */
    if (tok ? V != vocab_size : V > vocab_size)
        return ag_fail(AG_ERR_FORMAT, "%s: the tokenizer has %d ids, the model %d", label, V,
                       vocab_size);
    return AG_OK;
}

int gp_hf_model_load(GpModel *g, const char *dir) {
    memset(g, 0, sizeof *g);
    g->arena = arena_new("params", 0);
    arena_lazy_grads(g->arena, 1); /* run or studied, not trained: gradients only if needed */
    int rc = hf_load(dir, g->arena, &g->m);
    if (rc != AG_OK) {
        arena_free(g->arena);
        g->arena = NULL;
        return rc;
    }
    rc = gp_hf_tokenizer_load(dir, &g->tok, &g->hf);
    if (rc == AG_OK && g->hf && !(g->hf_dir = strdup(dir)))
        rc = ag_fail(AG_ERR_NOMEM, "%s: out of memory", dir);
    if (rc == AG_OK) rc = gp_tokenizer_fits(g->tok, g->hf, g->m.cfg.vocab_size, dir);
    if (rc != AG_OK) gp_model_free(g);
    return rc;
}

/* src's bytes written to dst (a tokenizer file of the source folder, at most 256 MiB as
 * txt_hf_load reads it) */
static int copy_file(const char *src, const char *dst) {
    char *buf, *tmp;
    size_t size;
    FILE *out;
    int rc = st_read_small(src, (uint64_t)256 << 20, &buf, &size);
    if (rc == AG_OK && (rc = io_fopen_write(dst, &out, &tmp)) == AG_OK) {
        fwrite(buf, 1, size, out);
        rc = io_fclose_replace(out, tmp, dst);
    }
    free(buf);
    return rc;
}

/* tokenizer_config.json naming the class that takes tokenizer.json as it is: without it
 * transformers' AutoTokenizer picks the model type's class (GPT2Tokenizer for a GPT-2 config),
 * which puts GPT-2's own pre-tokenizer in place of attograd's split and changes the ids of text
 * where a non-ASCII character touches a letter */
static int write_tokenizer_config(const char *dir) {
    char *path = io_path_join(dir, "tokenizer_config.json"), *tmp;
    FILE *f;
    int rc = io_fopen_write(path, &f, &tmp);
    if (rc == AG_OK) {
        fputs("{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n", f);
        rc = io_fclose_replace(f, tmp, path);
    }
    free(path);
    return rc;
}

int gp_hf_export(const GpModel *g, const char *dir) {
    int rc = hf_save(&g->m, dir);
    if (g->tok) {
        char *tok = io_path_join(dir, GP_HF_TOKENIZER), *json = io_path_join(dir, "tokenizer.json");
        if (rc == AG_OK) rc = txt_save(g->tok, tok);
        if (rc == AG_OK) rc = txt_write_hf(g->tok, json);
        if (rc == AG_OK) rc = write_tokenizer_config(dir);
        free(tok), free(json);
        return rc;
    }
    if (!g->hf_dir) { /* a checkpoint's tokenizer.json (prepare --model of a folder) */
        char *json = io_path_join(dir, "tokenizer.json"), *tmp;
        size_t len;
        const char *text = txt_hf_json(g->hf, &len);
        FILE *f;
        if (rc == AG_OK && (rc = io_fopen_write(json, &f, &tmp)) == AG_OK) {
            fwrite(text, 1, len, f);
            rc = io_fclose_replace(f, tmp, json);
        }
        if (rc == AG_OK) rc = write_tokenizer_config(dir);
        free(json);
        return rc;
    }
    static const char *const names[] = {"tokenizer.json", "vocab.json", "merges.txt",
                                        "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; rc == AG_OK && i < sizeof names / sizeof *names; i++) {
        char *src = io_path_join(g->hf_dir, names[i]), *dst = io_path_join(dir, names[i]);
        if (ex_file_exists(src)) rc = copy_file(src, dst);
        free(src), free(dst);
    }
    return rc;
}

int gp_encode_alloc(const GpModel *g, const void *text, size_t n, int **ids, size_t *len,
                    const char *label) {
    return g->hf ? txt_hf_encode_alloc(g->hf, text, n, ids, len, label)
                 : txt_encode_alloc(g->tok, text, n, TXT_SPECIAL_ORDINARY, ids, len, label);
}

const uint8_t *gp_token_bytes(const GpModel *g, int id, size_t *len) {
    if (g->hf && id >= txt_hf_vocab_size(g->hf)) { /* a padded id of the model: no text */
        *len = 0;
        return (const uint8_t *)"";
    }
    return g->hf ? txt_hf_token_bytes(g->hf, id, len) : txt_token_bytes(g->tok, id, len);
}

int gp_decode_alloc(const GpModel *g, const int *ids, size_t n, char **out, size_t *len) {
    return g->hf ? txt_hf_decode_alloc(g->hf, ids, n, out, len, "ids")
                 : txt_decode_alloc(g->tok, ids, n, out, len, "ids");
}
