/* pairs_read.c: sentence pairs from a TSV file (pairs.h: txt_pairs_read): regular files and
 * pipes, lines read with a bound (txt_read_line), UTF-8 checked, words split on single spaces
 * into a vocabulary (grown, or unknown words counted as TXT_UNK); for a char or BPE vocabulary
 * without a tokenizer yet, the file's columns train the tokenizers first.
 * Not here: batches and the loader (pairs.c), the vocabulary (vocab.c). Read next: pairs.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../io/file.h"
#include "../tensor/tensor.h"
#include "pairs.h"
#include "text.h"
#include "text_internal.h"
#include "vocab.h"

#define XSTR_(x) #x
#define XSTR(x) XSTR_(x) /* a limit's value as a string */

/* Splits side s[0..len) on single spaces into ids (appended to *ids). Returns the word count,
 * or -1 with a reason in why. */
static int encode_side(const char *s, size_t len, TxtVocab *v, int grow, int **ids, size_t *n_ids,
                       size_t *cap, long *n_unk, const char **why) {
    if (len == 0) {
        *why = "is empty";
        return -1;
    }
    int words = 0;
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && s[j] != ' ') j++;
        if (j == i) {
            *why = i == 0     ? "starts with a space"
                   : j == len ? "ends with a space"
                              : "has two spaces in a row";
            return -1;
        }
        for (size_t k = i; k < j; k++)
            if (s[k] == '\r' || s[k] == '\n' || s[k] == '\0' || s[k] == '\t') {
                *why = s[k] == '\0' ? "contains a NUL byte" : "contains a control character";
                return -1;
            }
        if (j - i > TXT_VOCAB_MAX_WORD_LEN) {
            *why = "has a word longer than " XSTR(
                TXT_VOCAB_MAX_WORD_LEN) " bytes (TXT_VOCAB_MAX_WORD_LEN)";
            return -1;
        }
        if (v->tok) { /* checked as words; the tokenizer encodes the whole side */
            i = j + 1;
            continue;
        }
        int id = txt_vocab_find(v, s + i, j - i);
        if (id < 0 && grow) {
            if (v->n >= TXT_VOCAB_MAX_WORDS) {
                *why = "has a new word, but its vocabulary already holds " XSTR(
                    TXT_VOCAB_MAX_WORDS) " words (TXT_VOCAB_MAX_WORDS)";
                return -1;
            }
            id = txt_vocab_add(v, s + i, j - i);
        }
        if (id < 0) {
            id = TXT_UNK;
            (*n_unk)++;
        }
        if (*n_ids == *cap) {
            *cap = *cap ? 2 * *cap : 4096;
            *ids = txt_xrealloc_(*ids, *cap * sizeof **ids);
        }
        (*ids)[(*n_ids)++] = id;
        words++;
        i = j + 1;
    }
    if (v->tok) {
        int n = txt_vocab_encode(v, s, len, NULL, 0, NULL, NULL, NULL);
        if (*n_ids + (size_t)n > *cap) {
            while (*n_ids + (size_t)n > *cap) *cap = *cap ? 2 * *cap : 4096;
            *ids = txt_xrealloc_(*ids, *cap * sizeof **ids);
        }
        int unk;
        txt_vocab_encode(v, s, len, *ids + *n_ids, n, &unk, NULL, NULL);
        *n_ids += (size_t)n;
        *n_unk += unk;
        return n;
    }
    return words;
}

/* AG_OK if st is a regular file or a pipe; else AG_ERR_IO naming what it is. */
static int readable_kind(const char *path, const struct stat *st) {
    if (S_ISREG(st->st_mode) || S_ISFIFO(st->st_mode)) return AG_OK;
    const char *kind = S_ISDIR(st->st_mode)    ? "a folder"
                       : S_ISCHR(st->st_mode)  ? "a character device"
                       : S_ISBLK(st->st_mode)  ? "a block device"
                       : S_ISSOCK(st->st_mode) ? "a socket"
                                               : "not a regular file";
    return ag_fail(AG_ERR_IO, "%s: is %s: only regular files and pipes are read", path, kind);
}

static int read_pairs(FILE *f, const char *path, TxtPairSet *d, TxtVocab *src_v, TxtVocab *tgt_v,
                      int grow, int max_tokens);

/* Reads all of f into a malloc'd buffer (*buf, *len). */
static int slurp(FILE *f, const char *path, char **buf, size_t *len) {
    size_t cap = 1 << 16;
    *buf = txt_xrealloc_(NULL, cap);
    *len = 0;
    size_t got;
    while ((got = fread(*buf + *len, 1, cap - *len, f)) > 0) {
        *len += got;
        if (*len == cap) *buf = txt_xrealloc_(*buf, cap *= 2);
    }
    if (ferror(f)) {
        free(*buf);
        return ag_fail(AG_ERR_IO, "%s: read error: %s", path, strerror(errno));
    }
    return AG_OK;
}

/* Gathers the source and target columns of text[0..len) (lines joined by '\n' for BPE, whose
 * GPT-2 split keeps merges within a line; run together for characters) and trains v's
 * tokenizer on its column. Lines without exactly one tab are left out: read_pairs names them. */
static int train_tokenizers(const char *text, size_t len, const char *path, TxtVocab *v[2]) {
    char *col[2] = {txt_xrealloc_(NULL, len + 1), txt_xrealloc_(NULL, len + 1)};
    size_t n[2] = {0, 0};
    for (size_t i = 0; i < len;) {
        const char *line = text + i, *nl = memchr(line, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - line) : len - i;
        i += ll + 1;
        if (i == ll + 1 && txt_bom_len(line, ll)) line += 3, ll -= 3;
        if (ll && line[ll - 1] == '\r') ll--;
        const char *tab = memchr(line, '\t', ll);
        if (!tab || memchr(tab + 1, '\t', ll - (size_t)(tab + 1 - line))) continue;
        size_t part[2][2] = {{0, (size_t)(tab - line)}, {(size_t)(tab + 1 - line), ll}};
        for (int k = 0; k < 2; k++) {
            if (v[k]->kind == TXT_VOCAB_BPE && n[k]) col[k][n[k]++] = '\n';
            memcpy(col[k] + n[k], line + part[k][0], part[k][1] - part[k][0]);
            n[k] += part[k][1] - part[k][0];
        }
    }
    int rc = AG_OK;
    for (int k = 0; k < 2 && rc == AG_OK; k++) {
        char label[600];
        snprintf(label, sizeof label, "%s: the %s column's tokenizer", path,
                 k ? "target" : "source");
        TxtTokenizer *t = NULL;
        if (v[k]->kind == TXT_VOCAB_CHAR)
            t = txt_char_new(col[k], n[k]);
        else
            rc = txt_bpe_train(col[k], n[k], v[k]->bpe_vocab, TXT_SPLIT_GPT2, label, &t);
        if (rc == AG_OK) rc = txt_vocab_set_tokenizer(v[k], t, label);
    }
    free(col[0]);
    free(col[1]);
    return rc;
}

int txt_pairs_read(const char *path, TxtPairSet *d, TxtVocab *src_v, TxtVocab *tgt_v, int grow,
                   int max_tokens) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(d);
    AG_CHECK_ARG(src_v);
    AG_CHECK_ARG(tgt_v);
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    /* a device is refused before it is opened (opening some has effects), and checked again
     * once open (the path may have changed in between) */
    struct stat st;
    if (stat(path, &st) == 0 && readable_kind(path, &st) != AG_OK) return AG_ERR_IO;
    FILE *f; /* a pipe nobody writes to is an error after TXT_PAIRS_PIPE_WAIT_MS, not a hang */
    int kind = io_fopen_stream(path, TXT_PAIRS_PIPE_WAIT_MS, &f);
    if (kind != AG_OK) return kind;
    if (!grow || src_v->tok || src_v->kind == TXT_VOCAB_WORD) {
        int rc = read_pairs(f, path, d, src_v, tgt_v, grow, max_tokens);
        fclose(f);
        return rc;
    }
    /* char or bpe, not trained yet: the file (a pipe too) is read once into memory, the
     * tokenizers are trained on its columns, then its pairs are read from memory */
    char *text;
    size_t len;
    int rc = slurp(f, path, &text, &len);
    fclose(f);
    if (rc != AG_OK) return rc;
    TxtVocab *v[2] = {src_v, tgt_v};
    rc = train_tokenizers(text, len, path, v);
    FILE *m = rc == AG_OK && len ? fmemopen(text, len, "rb") : NULL;
    if (rc == AG_OK && !m && len)
        rc = ag_fail(AG_ERR_IO, "%s: cannot read from memory: %s", path, strerror(errno));
    if (rc == AG_OK && !len) rc = ag_fail(AG_ERR_FORMAT, "%s: no sentence pairs", path);
    if (rc == AG_OK) rc = read_pairs(m, path, d, src_v, tgt_v, grow, max_tokens);
    if (m) fclose(m);
    free(text);
    return rc;
}

/* The pairs of f, one a line (txt_pairs_read's rules); f stays open. */
static int read_pairs(FILE *f, const char *path, TxtPairSet *d, TxtVocab *src_v, TxtVocab *tgt_v,
                      int grow, int max_tokens) {
    char *line = NULL;
    size_t line_cap = 0, n_ids = 0, ids_cap = 0, len = 0;
    int *ids = NULL, cap_pairs = 0, lineno = 0, rc = AG_OK, got;
    /* pairs point into ids, which moves while it grows: keep offsets, fix pointers at the end */
    size_t *offsets = NULL;
    while ((got = txt_read_line(f, &line, &line_cap, TXT_PAIRS_MAX_LINE, &len)) != 0) {
        lineno++;
        if (got < 0) {
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s:%d: the line is longer than %d bytes (TXT_PAIRS_MAX_LINE)", path,
                         lineno, TXT_PAIRS_MAX_LINE);
            break;
        }
        /* a byte-order mark opens the file: it is no part of the first word */
        size_t bom = lineno == 1 ? txt_bom_len(line, len) : 0, bad;
        char *text = line + bom;
        len -= bom;
        if (!txt_utf8_check(text, len, &bad)) {
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s:%d: the line is not valid UTF-8 (byte %zu is 0x%02x): save the "
                         "file as UTF-8",
                         path, lineno, bad + bom + 1, (unsigned char)text[bad]);
            break;
        }
        if (len && text[len - 1] == '\r') len--;
        const char *tab = memchr(text, '\t', len), *why = NULL, *side = "source";
        if (len == 0)
            why = "is empty (one pair a line: source<TAB>target)";
        else if (!tab)
            why = "has no tab between source and target";
        else if (memchr(tab + 1, '\t', len - (size_t)(tab + 1 - text)))
            why = "has more than one tab (one pair a line: source<TAB>target)";
        if (why) {
            rc = ag_fail(AG_ERR_FORMAT, "%s:%d: the line %s", path, lineno, why);
            break;
        }
        size_t off = n_ids;
        int ns = encode_side(text, (size_t)(tab - text), src_v, grow, &ids, &n_ids, &ids_cap,
                             &d->n_unk_src, &why);
        int nt = -1;
        if (ns > 0) {
            side = "target";
            nt = encode_side(tab + 1, len - (size_t)(tab + 1 - text), tgt_v, grow, &ids, &n_ids,
                             &ids_cap, &d->n_unk_tgt, &why);
        }
        if (ns < 0 || nt < 0) {
            rc = ag_fail(AG_ERR_FORMAT, "%s:%d: the %s %s", path, lineno, side, why);
            break;
        }
        if (max_tokens > 0 && (ns > max_tokens || nt > max_tokens)) {
            rc = ag_fail(AG_ERR_FORMAT,
                         "%s:%d: the %s has %d tokens; the model allows %d "
                         "(--max-len %d, with EOS or BOS)",
                         path, lineno, ns > max_tokens ? "source" : "target",
                         ns > max_tokens ? ns : nt, max_tokens, max_tokens + 1);
            break;
        }
        if (d->n == cap_pairs) {
            cap_pairs = cap_pairs ? 2 * cap_pairs : 1024;
            d->pairs = txt_xrealloc_(d->pairs, (size_t)cap_pairs * sizeof *d->pairs);
            offsets = txt_xrealloc_(offsets, (size_t)cap_pairs * sizeof *offsets);
        }
        offsets[d->n] = off;
        d->pairs[d->n++] = (TxtPair){NULL, NULL, ns, nt, lineno};
        if (ns > d->max_src) d->max_src = ns;
        if (nt > d->max_tgt) d->max_tgt = nt;
    }
    if (rc == AG_OK && ferror(f))
        rc = ag_fail(AG_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (rc == AG_OK && d->n == 0) rc = ag_fail(AG_ERR_FORMAT, "%s: no sentence pairs", path);
    free(line);
    d->ids = ids;
    for (int i = 0; rc == AG_OK && i < d->n; i++) {
        d->pairs[i].src = ids + offsets[i];
        d->pairs[i].tgt = d->pairs[i].src + d->pairs[i].src_len;
    }
    free(offsets);
    if (rc != AG_OK) txt_pairs_free(d);
    return rc;
}

void txt_pairs_free(TxtPairSet *d) {
    AG_CHECK_ARG(d);
    free(d->pairs);
    free(d->ids);
    d->pairs = NULL;
    d->ids = NULL;
    d->n = 0;
}
