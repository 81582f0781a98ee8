/* config.h: a model's configuration as a table of the fields of its config struct (CkptField,
 * CkptConfig): what a model tells a checkpoint beside its parameters (ParamList, autograd.h),
 * so that a checkpoint alone rebuilds the model. A model describes itself here without knowing
 * files or optimizers: nn's models give their tables (nn_gpt_ckpt_config, nn_seq2seq_ckpt_config)
 * and io's checkpoints read and write any table (../io/checkpoint.h).
 *   typedef struct { int vocab, d_model, n_layer; double dropout; char name[16]; } MyConfig;
 *   static const CkptField my_fields[] = {
 *       CKPT_CFG_INT(MyConfig, vocab, 1, 1 << 20), CKPT_CFG_INT(MyConfig, d_model, 1, 4096),
 *       CKPT_CFG_INT(MyConfig, n_layer, 1, 64),    CKPT_CFG_FLOAT(MyConfig, dropout, 0, 0.99),
 *       CKPT_CFG_STRING(MyConfig, name)};
 *   MyConfig cfg = ...;
 *   CkptConfig c = {"mine", my_fields, 5, &cfg};
 * Not here: saving and reading (../io/checkpoint.h). Read next: ../io/checkpoint.h. */
#ifndef ATTOGRAD_CONFIG_H
#define ATTOGRAD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* Parameter values a configuration may describe (a checkpoint refuses more): 2^28 values,
 * 1 GiB in float, 2 GiB in double, twice that with gradients. */
#define CKPT_MAX_PARAMS ((int64_t)1 << 28)

typedef enum { CKPT_FIELD_INT, CKPT_FIELD_FLOAT, CKPT_FIELD_STRING } CkptFieldType;
typedef struct CkptField {
    const char *name;   /* meta.config.<name>; nested members as "layer.d_model" */
    CkptFieldType type; /* INT: an int, enum or int64_t; FLOAT: a double; STRING: a char array */
    size_t offset, size;
    double lo, hi; /* a number read from a file must be in [lo, hi] */
    int optional;  /* 1: a file without the entry reads 0 (a string: "") (a field added after
                    * files were written; 0 must be in [lo, hi] and mean what those files meant) */
} CkptField;
#define CKPT_FIELD_(S, f, type, lo, hi, opt)                                                       \
    { #f, type, offsetof(S, f), sizeof(((S *)0)->f), (double)(lo), (double)(hi), opt }
#define CKPT_CFG_INT(S, f, lo, hi) CKPT_FIELD_(S, f, CKPT_FIELD_INT, lo, hi, 0)
#define CKPT_CFG_FLOAT(S, f, lo, hi) CKPT_FIELD_(S, f, CKPT_FIELD_FLOAT, lo, hi, 0)
#define CKPT_CFG_STRING(S, f) CKPT_FIELD_(S, f, CKPT_FIELD_STRING, 0, 0, 0)
/* the same, optional: older files without the entry read 0 */
#define CKPT_CFG_INT_OPT(S, f, lo, hi) CKPT_FIELD_(S, f, CKPT_FIELD_INT, lo, hi, 1)
#define CKPT_CFG_FLOAT_OPT(S, f, lo, hi) CKPT_FIELD_(S, f, CKPT_FIELD_FLOAT, lo, hi, 1)

/* A configuration: the struct at values, described by fields[0..n_fields). check (may be NULL)
 * says what the fields alone cannot (n_heads divides d_model, ...) and how many parameter values
 * the model it describes has: a file must hold that many, and a small file cannot make the
 * caller build a large model. It returns AG_OK or ag_fail(AG_ERR_FORMAT, "<reason>")
 * (../tensor/tensor.h). */
typedef struct CkptConfig {
    const char *model; /* meta.model: a file of another kind is refused; NULL: none */
    const CkptField *fields;
    int n_fields;
    void *values;
    int (*check)(const void *values, int64_t *n_params);
} CkptConfig;

#endif
