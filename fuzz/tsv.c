/* tsv.c: the TSV corpus loader (txt_pairs_read) of the translation example: lines, tabs, single
 * spaces, CR, NUL bytes, long lines and words, a growing vocabulary; then the length-bucketed
 * loader and a padded batch of what was read. */
#include <string.h>

#include "fuzz.h"
#include "translate.h"

static void check_data(const TxtPairSet *d, const TxtVocab *src, const TxtVocab *tgt,
                       int max_tokens) {
    int max_s = 0, max_t = 0, line = 0;
    for (int i = 0; i < d->n; i++) {
        const TxtPair *p = &d->pairs[i];
        FUZZ_CHECK(p->src_len >= 1 && p->tgt_len >= 1, "pair %d: lengths %d, %d", i, p->src_len,
                   p->tgt_len);
        FUZZ_CHECK(max_tokens == 0 || (p->src_len <= max_tokens && p->tgt_len <= max_tokens),
                   "pair %d over %d tokens", i, max_tokens);
        FUZZ_CHECK(p->line > line, "line numbers %d after %d", p->line, line);
        line = p->line;
        for (int k = 0; k < p->src_len; k++)
            FUZZ_CHECK(p->src[k] >= TXT_UNK && p->src[k] < src->n, "source id %d", p->src[k]);
        for (int k = 0; k < p->tgt_len; k++)
            FUZZ_CHECK(p->tgt[k] >= TXT_UNK && p->tgt[k] < tgt->n, "target id %d", p->tgt[k]);
        if (p->src_len > max_s) max_s = p->src_len;
        if (p->tgt_len > max_t) max_t = p->tgt_len;
    }
    FUZZ_CHECK(max_s == d->max_src && max_t == d->max_tgt, "longest sides");
    FUZZ_CHECK(src->n <= TXT_VOCAB_MAX_WORDS && tgt->n <= TXT_VOCAB_MAX_WORDS,
               "vocabulary over the limit");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    TxtVocab src, tgt;
    txt_vocab_init(&src);
    txt_vocab_init(&tgt);
    TxtPairSet d;
    int rc = txt_pairs_read(path, &d, &src, &tgt, 1, 0);
    if (rc != AG_OK) {
        fuzz_check_failure(rc, path);
    } else {
        check_data(&d, &src, &tgt, 0);
        TxtPairLoader l;
        TxtPairBatch b;
        memset(&b, 0, sizeof b);
        txt_pair_loader_init(&l, d.pairs, d.n, 3, 7);
        for (int k = 0; k < l.n_batches && k < 4; k++) {
            txt_pair_loader_next(&l, &b);
            FUZZ_CHECK(b.B >= 1 && b.B <= 3 && b.S >= 2 && b.T >= 2, "batch %d %d %d", b.B, b.S,
                       b.T);
        }
        txt_pair_batch_free(&b);
        txt_pair_loader_free(&l);
        txt_pairs_free(&d);
        /* again with the vocabularies fixed (unknown words) and a token limit */
        rc = txt_pairs_read(path, &d, &src, &tgt, 0, 6);
        if (rc == AG_OK) {
            check_data(&d, &src, &tgt, 6);
            txt_pairs_free(&d);
        } else {
            fuzz_check_failure(rc, path);
        }
    }
    txt_vocab_free(&src);
    txt_vocab_free(&tgt);
    return 0;
}
