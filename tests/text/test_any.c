/* test_any.c: TxtAny (src/text/any.c), attograd's tokenizer or a tokenizer.json behind one
 * interface: its saved form read back to the same tokenizer and the same bytes, encode, decode
 * and token bytes equal to the tokenizer it holds, a folder's tokenizer in its order (attograd's
 * own first), the fit to a model's vocabulary, and bad input refused naming the label or folder.
 * Read next: tests/hf/test_model.c (a model with its tokenizer). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

static const char TEXT[] = "the cat sat on the mat; the rat sat too.\n";

static TxtTokenizer *bpe(void) {
    TxtTokenizer *t;
    cr_assert_eq(txt_bpe_train(TEXT, sizeof TEXT - 1, 270, TXT_SPLIT_GPT2, "any", &t), AG_OK, "%s",
                 ag_last_error());
    return t;
}

/* a's encode, decode and token bytes equal tok's, and its saved form reads back the same */
static void same_as(const TxtAny *a, const TxtTokenizer *tok) {
    int *x, *y;
    size_t nx, ny;
    cr_assert_eq(txt_any_encode_alloc(a, TEXT, sizeof TEXT - 1, &x, &nx, "t"), AG_OK);
    cr_assert_eq(txt_encode_alloc(tok, TEXT, sizeof TEXT - 1, TXT_SPECIAL_ORDINARY, &y, &ny, "t"),
                 AG_OK);
    cr_assert_eq(nx, ny);
    cr_assert(memcmp(x, y, nx * sizeof *x) == 0);
    char *d;
    size_t nd;
    cr_assert_eq(txt_any_decode_alloc(a, x, nx, &d, &nd, "ids"), AG_OK);
    cr_assert_eq(nd, sizeof TEXT - 1);
    cr_assert(memcmp(d, TEXT, nd) == 0);
    for (int id = 0; id < txt_vocab_size(tok); id++) {
        size_t la, lt;
        const uint8_t *ba = txt_any_token_bytes(a, id, &la), *bt = txt_token_bytes(tok, id, &lt);
        cr_assert(la == lt && memcmp(ba, bt, la) == 0, "id %d", id);
    }
    cr_assert_eq(txt_any_vocab_size(a), txt_vocab_size(tok));
    free(x), free(y), free(d);
}

Test(txt_any, attograds_saved_form_reads_back_to_the_same_tokenizer_and_bytes) {
    TxtTokenizer *tok = bpe();
    size_t n, m;
    uint8_t *b = txt_to_bytes(tok, &n);
    TxtAny a;
    cr_assert_eq(txt_any_from_bytes(b, n, "tok", &a), AG_OK, "%s", ag_last_error());
    cr_assert(a.tok && !a.hf);
    same_as(&a, tok);
    uint8_t *b2 = txt_any_to_bytes(&a, &m);
    cr_assert(m == n && memcmp(b, b2, n) == 0);
    txt_any_free(&a);
    cr_assert(!a.tok && !a.hf);
    txt_any_free(&a); /* a zeroed TxtAny frees nothing */
    free(b), free(b2);
    txt_free(tok);
}

Test(txt_any, a_tokenizer_json_reads_as_one_with_the_same_ids) {
    TxtTokenizer *tok = bpe();
    char *json;
    cr_assert_eq(txt_to_hf_json(tok, &json), AG_OK, "%s", ag_last_error());
    TxtAny a;
    cr_assert_eq(txt_any_from_bytes(json, strlen(json), "tokenizer.json", &a), AG_OK, "%s",
                 ag_last_error());
    cr_assert(a.hf && !a.tok);
    same_as(&a, tok);
    size_t m;
    uint8_t *b = txt_any_to_bytes(&a, &m); /* the JSON text it was read from */
    cr_assert(m == strlen(json) && memcmp(b, json, m) == 0);
    /* a model's padded id past the tokenizer.json's vocabulary stands for no bytes */
    size_t len = 99;
    const uint8_t *pad = txt_any_token_bytes(&a, txt_vocab_size(tok) + 3, &len);
    cr_assert(len == 0 && pad && *pad == 0);
    txt_any_free(&a);
    free(json), free(b);
    txt_free(tok);
}

Test(txt_any, bytes_of_neither_kind_are_refused_naming_the_label) {
    TxtAny a;
    static const char junk[] = "not a tokenizer";
    int rc = txt_any_from_bytes(junk, sizeof junk - 1, "data/tokenizer", &a);
    cr_assert_neq(rc, AG_OK);
    cr_assert(strstr(ag_last_error(), "data/tokenizer: neither attograd's tokenizer (ATGTOKEN) nor "
                                      "a tokenizer.json (") == ag_last_error(),
              "%s", ag_last_error());
    cr_assert(!a.tok && !a.hf);
    /* a cut attograd tokenizer: its own reader's error, naming the label */
    TxtTokenizer *tok = bpe();
    size_t n;
    uint8_t *b = txt_to_bytes(tok, &n);
    cr_assert_neq(txt_any_from_bytes(b, n / 2, "cut", &a), AG_OK);
    cr_assert(strncmp(ag_last_error(), "cut: ", 5) == 0, "%s", ag_last_error());
    free(b);
    txt_free(tok);
}

Test(txt_any, fits_attograds_exactly_and_a_tokenizer_json_at_most) {
    TxtTokenizer *tok = bpe();
    int V = txt_vocab_size(tok);
    char *json;
    cr_assert_eq(txt_to_hf_json(tok, &json), AG_OK);
    TxtAny own = {.tok = tok}, hf;
    cr_assert_eq(txt_any_from_bytes(json, strlen(json), "j", &hf), AG_OK);
    cr_assert_eq(txt_any_fits(&own, V, "m"), AG_OK);
    cr_assert_eq(txt_any_fits(&own, V + 1, "m.npz"), AG_ERR_FORMAT);
    char want[128];
    snprintf(want, sizeof want, "m.npz: the tokenizer has %d ids, the model %d", V, V + 1);
    cr_assert_str_eq(ag_last_error(), want);
    cr_assert_eq(txt_any_fits(&hf, V, "m"), AG_OK);
    cr_assert_eq(txt_any_fits(&hf, V + 7, "m"), AG_OK); /* a padded vocabulary */
    cr_assert_eq(txt_any_fits(&hf, V - 1, "dir"), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "dir: the tokenizer has %d ids, the model %d", V, V - 1);
    cr_assert_str_eq(ag_last_error(), want);
    txt_any_free(&own);
    txt_any_free(&hf);
    free(json);
}

Test(txt_any, a_folders_tokenizer_is_attograds_own_first_then_tokenizer_json) {
    char dir[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "txtany");
    TxtAny a;
    cr_assert_eq(txt_any_load_dir(dir, &a), AG_ERR_FORMAT);
    char want[1024];
    snprintf(want, sizeof want,
             "%s: holds no tokenizer (tokenizer.json, vocab.json + merges.txt, or "
             "attograd-tokenizer.bin)",
             dir);
    cr_assert_str_eq(ag_last_error(), want);
    TxtTokenizer *tok = bpe();
    cr_assert_eq(txt_write_hf(tok, ts_join(p, dir, "tokenizer.json")), AG_OK);
    cr_assert_eq(txt_any_load_dir(dir, &a), AG_OK, "%s", ag_last_error());
    cr_assert(a.hf && !a.tok);
    same_as(&a, tok);
    txt_any_free(&a);
    cr_assert_eq(txt_save(tok, ts_join(p, dir, TXT_ANY_OWN_FILE)), AG_OK);
    cr_assert_eq(txt_any_load_dir(dir, &a), AG_OK, "%s", ag_last_error());
    cr_assert(a.tok && !a.hf);
    same_as(&a, tok);
    txt_any_free(&a);
    txt_free(tok);
    ts_rm_tree(dir);
}

Test(txt_any, an_empty_one_aborts_naming_the_function, .signal = SIGABRT) {
    TxtAny a = {0};
    txt_any_vocab_size(&a);
}
