/* any.c: TxtAny (text.h), attograd's tokenizer or a tokenizer.json behind one interface: read
 * from a folder or from a saved form, written back to bytes, checked against a model's
 * vocabulary size, encode, decode and one token's bytes, each handed to the tokenizer it holds.
 * Not here: either tokenizer itself (tokenizer.c, hf_tokenizer.c). Read next: docs/text.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/file.h"
#include "../tensor/tensor.h"
#include "text.h"

/* exactly one of the two is set (misuse aborts naming the function) */
static void check_one(const TxtAny *t, const char *fn) {
    AG_CHECK(t != NULL, "%s: argument 't' is NULL", fn);
    AG_CHECK(!t->tok != !t->hf, "%s: the TxtAny holds %s", fn,
             t->tok ? "two tokenizers" : "no tokenizer");
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int txt_any_load_dir(const char *dir, TxtAny *out) {
    AG_CHECK_ARG(dir);
    AG_CHECK_ARG(out);
    memset(out, 0, sizeof *out);
    char *own = io_path_join(dir, TXT_ANY_OWN_FILE), *json = io_path_join(dir, "tokenizer.json"),
         *vocab = io_path_join(dir, "vocab.json"), *merges = io_path_join(dir, "merges.txt");
    int rc;
    if (file_exists(own))
        rc = txt_load(own, &out->tok);
    else if (file_exists(json) || (file_exists(vocab) && file_exists(merges)))
        rc = txt_hf_load(dir, &out->hf); /* tokenizer.json first, as txt_hf_load reads a folder */
    else
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or %s)", dir,
                     TXT_ANY_OWN_FILE);
    free(own), free(json), free(vocab), free(merges);
    return rc;
}

int txt_any_from_bytes(const void *bytes, size_t len, const char *label, TxtAny *out) {
    AG_CHECK_ARG(bytes);
    AG_CHECK_ARG(label);
    AG_CHECK_ARG(out);
    memset(out, 0, sizeof *out);
    if (len >= 8 && memcmp(bytes, "ATGTOKEN", 8) == 0)
        return txt_from_bytes(bytes, len, label, &out->tok);
    int rc = txt_hf_from_json(bytes, len, label, &out->hf);
    if (rc != AG_OK && strstr(ag_last_error(), ": not valid JSON: ")) {
        char why[600];
        snprintf(why, sizeof why, "%s", ag_last_error() + strlen(label) + 2);
        rc = ag_fail(rc, "%s: neither attograd's tokenizer (ATGTOKEN) nor a tokenizer.json (%s)",
                     label, why);
    }
    return rc;
}

uint8_t *txt_any_to_bytes(const TxtAny *t, size_t *len) {
    check_one(t, "txt_any_to_bytes");
    AG_CHECK_ARG(len);
    if (t->tok) return txt_to_bytes(t->tok, len);
    const char *json = txt_hf_json(t->hf, len);
    uint8_t *b = malloc(*len ? *len : 1);
    AG_CHECK(b != NULL, "txt_any_to_bytes: out of memory (%zu bytes)", *len);
    memcpy(b, json, *len);
    return b;
}

int txt_any_vocab_size(const TxtAny *t) {
    check_one(t, "txt_any_vocab_size");
    return t->tok ? txt_vocab_size(t->tok) : txt_hf_vocab_size(t->hf);
}

int txt_any_fits(const TxtAny *t, int vocab_size, const char *label) {
    check_one(t, "txt_any_fits");
    AG_CHECK_ARG(label);
    int V = txt_any_vocab_size(t);
    /* a tokenizer.json may hold fewer ids than the model's padded vocabulary: ids it lacks are
     * never encoded, and decoding one is an error naming it; more ids than the model has are
     * refused */
    if (t->tok ? V != vocab_size : V > vocab_size)
        return ag_fail(AG_ERR_FORMAT, "%s: the tokenizer has %d ids, the model %d", label, V,
                       vocab_size);
    return AG_OK;
}

int txt_any_encode_alloc(const TxtAny *t, const void *text, size_t n, int **ids, size_t *len,
                         const char *label) {
    check_one(t, "txt_any_encode_alloc");
    return t->hf ? txt_hf_encode_alloc(t->hf, text, n, ids, len, label)
                 : txt_encode_alloc(t->tok, text, n, TXT_SPECIAL_ORDINARY, ids, len, label);
}

const uint8_t *txt_any_token_bytes(const TxtAny *t, int id, size_t *len) {
    check_one(t, "txt_any_token_bytes");
    AG_CHECK_ARG(len);
    if (t->hf && id >= txt_hf_vocab_size(t->hf)) { /* a padded id of the model: no text */
        *len = 0;
        return (const uint8_t *)"";
    }
    return t->hf ? txt_hf_token_bytes(t->hf, id, len) : txt_token_bytes(t->tok, id, len);
}

int txt_any_decode_alloc(const TxtAny *t, const int *ids, size_t n, char **out, size_t *len,
                         const char *label) {
    check_one(t, "txt_any_decode_alloc");
    return t->hf ? txt_hf_decode_alloc(t->hf, ids, n, out, len, label)
                 : txt_decode_alloc(t->tok, ids, n, out, len, label);
}

void txt_any_free(TxtAny *t) {
    AG_CHECK_ARG(t);
    if (t->tok) txt_free(t->tok);
    if (t->hf) txt_hf_free(t->hf);
    memset(t, 0, sizeof *t);
}
