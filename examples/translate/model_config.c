/* model_config.c: the translator's model configuration in a checkpoint: the seq2seq model's
 * (nn_seq2seq_ckpt_config: its fields as meta.config.* entries and nn_seq2seq_check_config)
 * with the translator's own limits added to the check a configuration read from a file must
 * pass before a model is built from it; those limits (tr_check_config) also check the flags.
 * Not here: the checkpoint itself (src/io/checkpoint.h). Read next: decode.c (loading) or
 * train.c (saving). */
#include "translate.h"

int tr_check_config(const Seq2SeqConfig *c, const char *what) {
    const TransformerConfig *l = &c->layer;
    const char *why = NULL;
    char buf[160];
    if (c->src_vocab <= TXT_N_SPECIAL || c->tgt_vocab <= TXT_N_SPECIAL ||
        c->src_vocab > TXT_VOCAB_MAX_WORDS || c->tgt_vocab > TXT_VOCAB_MAX_WORDS) {
        snprintf(buf, sizeof buf, "vocabularies of %d and %d words: each must be in [%d, %d]",
                 c->src_vocab, c->tgt_vocab, TXT_N_SPECIAL + 1, TXT_VOCAB_MAX_WORDS);
        why = buf;
    } else if (c->max_len < 2 || c->max_len > 4096)
        why = "max_len must be in [2, 4096]";
    else if (c->pad_id != TXT_PAD)
        why = "pad_id must be 0";
    else if (l->d_model < 1 || l->d_model > 8192 || l->d_ff < 1 || l->d_ff > 65536)
        why = "d_model must be in [1, 8192] and ff in [1, 65536]";
    if (!why) return AG_OK;
    return ag_fail(AG_ERR_ARG, "%s: %s", what, why);
}

/* The model's check (nn_seq2seq_ckpt_config's), then the translator's limits. */
static int check_translator(const void *values, int64_t *n_params) {
    int rc = nn_seq2seq_ckpt_config((Seq2SeqConfig *)values).check(values, n_params);
    if (rc == AG_OK) rc = tr_check_config(values, "the translator");
    return rc;
}

CkptConfig tr_model_config(Seq2SeqConfig *c) {
    CkptConfig k = nn_seq2seq_ckpt_config(c);
    k.check = check_translator;
    return k;
}
