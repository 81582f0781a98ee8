/* model_config.c: the translator's model configuration in a checkpoint: the seq2seq model's
 * (nn_seq2seq_ckpt_config: its fields as meta.config.* entries and nn_seq2seq_check_config)
 * with the translator's own limits added to the check a configuration read from a file must
 * pass before a model is built from it.
 * Not here: what the translator checks of flags (tr_check_config, train_setup.c); the checkpoint
 * itself (src/io/checkpoint.h). Read next: decode.c (loading) or train_setup.c (saving). */
#include "translate.h"

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
