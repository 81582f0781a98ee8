/* model_config.c: the translator's model configuration in a checkpoint: the fields of
 * Seq2SeqConfig as meta.config.* entries (their names are those of the files written before
 * checkpoints were generic, so those still load) and the check a configuration read from a
 * file must pass before a model is built from it.
 * Not here: what the translator checks of flags (tr_check_config, train_setup.c); the checkpoint
 * itself (src/io/checkpoint.h). Read next: decode.c (loading) or train_setup.c (saving). */
#include "translate.h"

#include <limits.h>

static const CkptField seq2seq_fields[] = {
    CKPT_CFG_INT(Seq2SeqConfig, src_vocab, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, tgt_vocab, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, n_enc_layers, 0, NN_MAX_LAYERS),
    CKPT_CFG_INT(Seq2SeqConfig, n_dec_layers, 1, NN_MAX_LAYERS),
    CKPT_CFG_INT(Seq2SeqConfig, max_len, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, pad_id, 0, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, learned_pos, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, tie_output, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, layer.d_model, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.n_heads, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.n_kv_heads, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.d_ff, 1, INT_MAX),
    CKPT_CFG_INT(Seq2SeqConfig, layer.pre_ln, 0, 1),
    CKPT_CFG_INT(Seq2SeqConfig, layer.act, NN_RELU, NN_GELU),
    CKPT_CFG_FLOAT(Seq2SeqConfig, layer.dropout, 0, 1),
    CKPT_CFG_FLOAT(Seq2SeqConfig, layer.ln_eps, 1e-300, 1),
};

/* What the fields alone cannot say (nn_seq2seq_check_config: heads divide d_model, ...), a
 * model of at most CKPT_MAX_PARAMS values in all, and the translator's own limits. */
static int check_seq2seq(const void *values, int64_t *n_params) {
    int64_t n_values = 0;
    int rc = nn_seq2seq_check_config(values, n_params, &n_values);
    if (rc == AG_OK && n_values > CKPT_MAX_PARAMS)
        return ag_fail(AG_ERR_FORMAT,
                       "a model of %lld parameters and other values is over the limit of %lld "
                       "(CKPT_MAX_PARAMS)",
                       (long long)n_values, (long long)CKPT_MAX_PARAMS);
    if (rc == AG_OK) rc = tr_check_config(values, "the translator");
    return rc;
}

CkptConfig tr_model_config(Seq2SeqConfig *c) {
    CkptConfig k = {"seq2seq", seq2seq_fields,
                    (int)(sizeof seq2seq_fields / sizeof seq2seq_fields[0]), c, check_seq2seq};
    return k;
}
