/* hf_write.c: attograd's char and BPE tokenizers as a Hugging Face tokenizer.json that the
 * tokenizers library loads with the same ids: a byte-level BPE (each byte stands for a character
 * of GPT-2's alphabet), attograd's merges in their order, its special tokens as added special
 * tokens, and its split (TXT_SPLIT_GPT2) as a Split pre-tokenizer with attograd's own pattern
 * (ASCII letters and every non-ASCII character are letters, ASCII white space) before a ByteLevel
 * that does not split again. A char tokenizer is the same with no merges. Not here: reading
 * (hf_tokenizer.c). Read next: docs/hf.md, section "tokenizer.json". */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_internal.h"
#include "text_internal.h"
#include "../io/file.h"

/* attograd's TXT_SPLIT_GPT2 (txt_gpt2_chunk_) as the tokenizers library's regex (Oniguruma) */
const char txt_hf_attograd_split_[] =
    "'(?:re|ve|ll|s|t|m|d)| ?[A-Za-z\\x{80}-\\x{10FFFF}]+| ?[0-9]+"
    "| ?[^ \\t\\n\\r\\x0B\\x0CA-Za-z0-9\\x{80}-\\x{10FFFF}]+"
    "|[ \\t\\n\\r\\x0B\\x0C]+(?![^ \\t\\n\\r\\x0B\\x0C])|[ \\t\\n\\r\\x0B\\x0C]+";

/* the byte-level string of bytes p[0..n) into out (room 2n + 1), NUL-terminated */
static void bytelevel(const uint8_t *p, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = txt_hf_byte_char_(p[i]);
        if (c < 0x80)
            out[k++] = (char)c;
        else
            out[k++] = (char)(0xC0 | (c >> 6)), out[k++] = (char)(0x80 | (c & 0x3F));
    }
    out[k] = 0;
}

static json_t *bytelevel_pre(int use_regex) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                     "trim_offsets", 1, "use_regex", use_regex);
}

int txt_to_hf_json(const TxtTokenizer *t, char **text) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(text);
    *text = NULL;
    int n = txt_vocab_size(t), ns = txt_n_special(t), nm = t->kind == TXT_BPE ? t->n_merges : 0;
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    char *buf = malloc(2 * TXT_MAX_TOKEN_LEN + 1), *b2 = malloc(2 * TXT_MAX_TOKEN_LEN + 1);
    int rc = vocab && merges && added && buf && b2 ? AG_OK : AG_ERR_NOMEM;
    for (int id = 0; id < n - ns && rc == AG_OK; id++) {
        size_t len = txt_len_(t, id);
        bytelevel(t->blob + t->off[id], len, buf);
        json_t *old = json_object_get(vocab, buf);
        if (old) {
            rc = ag_fail(AG_ERR_ARG,
                         "txt_write_hf: ids %d and %d stand for the same bytes, which a "
                         "tokenizer.json cannot hold",
                         (int)json_integer_value(old), id);
            break;
        }
        if (json_object_set_new(vocab, buf, json_integer(id))) rc = AG_ERR_NOMEM;
    }
    for (int k = 0; k < nm && rc == AG_OK; k++) {
        int a = t->merges[2 * k], b = t->merges[2 * k + 1];
        bytelevel(t->blob + t->off[a], txt_len_(t, a), buf);
        bytelevel(t->blob + t->off[b], txt_len_(t, b), b2);
        if (json_array_append_new(merges, json_pack("[s, s]", buf, b2))) rc = AG_ERR_NOMEM;
    }
    for (int id = n - ns; id < n && rc == AG_OK; id++) {
        json_t *s = json_stringn((const char *)t->blob + t->off[id], txt_len_(t, id));
        if (!s) {
            rc = ag_fail(AG_ERR_ARG, "txt_write_hf: special token %d is not UTF-8 text", id);
            break;
        }
        if (json_array_append_new(added, json_pack("{s:i, s:o, s:b, s:b, s:b, s:b, s:b}", "id", id,
                                                   "content", s, "single_word", 0, "lstrip", 0,
                                                   "rstrip", 0, "normalized", 0, "special", 1)))
            rc = AG_ERR_NOMEM;
    }
    free(buf);
    free(b2);
    json_t *pre = NULL, *root = NULL;
    if (rc == AG_OK) {
        pre = t->kind == TXT_BPE && t->split == TXT_SPLIT_GPT2
                  ? json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence",
                              "pretokenizers", "type", "Split", "pattern", "Regex",
                              txt_hf_attograd_split_, "behavior", "Isolated", "invert", 0,
                              bytelevel_pre(0))
                  : bytelevel_pre(0);
        root = json_pack("{s:s, s:n, s:n, s:O, s:n, s:o, s:o, s:{s:s, s:b, s:b, s:b}, "
                         "s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:O, s:O}}",
                         "version", "1.0", "truncation", "padding", "added_tokens", added,
                         "normalizer", "pre_tokenizer", pre, "post_processor", bytelevel_pre(0),
                         "decoder", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                         "use_regex", 1, "model", "type", "BPE", "dropout", "unk_token",
                         "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                         "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
        if (root) *text = json_dumps(root, JSON_INDENT(1));
        if (!*text) rc = AG_ERR_NOMEM;
    }
    json_decref(root);
    json_decref(vocab);
    json_decref(merges);
    json_decref(added);
    if (rc == AG_ERR_NOMEM) return ag_fail(AG_ERR_NOMEM, "txt_write_hf: out of memory");
    return rc;
}

int txt_write_hf(const TxtTokenizer *t, const char *path) {
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(path);
    char *text;
    int rc = txt_to_hf_json(t, &text);
    if (rc != AG_OK) return rc;
    FILE *f;
    char *tmp;
    if ((rc = io_fopen_write(path, &f, &tmp)) == AG_OK) {
        fputs(text, f);
        fputc('\n', f);
        rc = io_fclose_replace(f, tmp, path);
    }
    free(text);
    return rc;
}
