/* checkpoint.h: a training checkpoint in one .npz: the model's parameters (PyTorch names), its
 * configuration, the optimizer's state and configuration, the step (the schedule's position),
 * the RNG state and a data-loader position, plus optional bytes (e.g. a vocabulary). A
 * checkpoint alone rebuilds the model and continues the run to the bit.
 * Entries beside the parameters (all under npz's reserved prefixes, so npz_load_params skips
 * them and numpy shows them by name):
 *   meta.config.<field>   the Seq2SeqConfig, one 0-d int64 or float64 per field
 *   meta.optim.<field>    the OptimConfig, likewise
 *   meta.extra            the caller's bytes ('|u1'), if any
 *   optim.<param>.exp_avg / .exp_avg_sq / .momentum_buffer, and train.step (0-d int64)
 *   rng.state             (4) uint64: the training RNG (dropout)
 *   data.position         (n) int64: the caller's data-loader position (epoch, cursor, ...)
 * Weights-only export: ckpt_save with opt, rng and data NULL (config and parameters only).
 * Not here: the .npz container (npz.h). */
#ifndef ATTOGRAD_CHECKPOINT_H
#define ATTOGRAD_CHECKPOINT_H

#include "../nn/nn.h"
#include "../optim/optim.h"
#include "npz.h"

#define CKPT_MAX_DATA 16

/* What a checkpoint holds beside the model; any pointer may be NULL (not saved / not wanted). */
typedef struct CkptState {
    Optimizer *opt;
    Rng *rng;
    int64_t data[CKPT_MAX_DATA]; /* the data-loader position */
    int n_data;                  /* 0: none */
    const void *extra;           /* saving: bytes to keep, e.g. a vocabulary */
    size_t extra_len;
} CkptState;

/* Writes path atomically (npz_write: temp file, fsync, rename, fsync of the folder). st may be
 * NULL (weights and configuration only). level 0..9. stats may be NULL. */
int ckpt_save(const char *path, const Seq2Seq *m, const CkptState *st, int level, NpzStats *stats);

/* The model and optimizer configurations stored in a checkpoint, to build the model (and the
 * optimizer) before ckpt_load. opt_cfg may be NULL; *has_optim tells whether the file has an
 * optimizer (may be NULL). What it returns is safe to build: the model configuration passed
 * ckpt_check_config (so nn_seq2seq_init cannot abort on it and the model is at most
 * CKPT_MAX_PARAMS values), the optimizer's passed optim_check_config, and the file holds at
 * least as many parameter values as the model has parameters (a small file cannot make the
 * caller build a large model). Otherwise AG_ERR_FORMAT naming the path and the field. */
int ckpt_read_config(const char *path, Seq2SeqConfig *cfg, OptimConfig *opt_cfg, int *has_optim);

/* The largest model a checkpoint may describe: parameters plus the other values the model
 * allocates (sinusoidal position tables, head gates). 2^28 values: 1 GiB in float, 2 GiB in
 * double, twice that with gradients. */
#define CKPT_MAX_PARAMS ((int64_t)1 << 28)

/* Checks a model configuration that came from a file: every field in the range
 * nn_seq2seq_init accepts (it would abort otherwise), integers that were not cut when read,
 * and a model of at most CKPT_MAX_PARAMS values. AG_OK and the parameter count in *n_params
 * (may be NULL), or AG_ERR_FORMAT: "<what>: meta.config: <reason>". */
int ckpt_check_config(const Seq2SeqConfig *c, int64_t *n_params, const char *what);

/* The capacity of an arena in which nn_seq2seq_init builds a model of configuration c (one
 * ckpt_check_config accepted) and, with_optim, optim_new its Adam or SGD state: parameters,
 * gradients, the position tables and every tensor header, with a little room to spare. */
size_t ckpt_arena_bytes(const Seq2SeqConfig *c, int with_optim);

/* Loads everything into m (built with the same configuration) and the non-NULL parts of st.
 * Everything is validated first (configuration equal to m's, every parameter and optimizer
 * state tensor present with its shape, RNG, data position of st->n_data values); on any error
 * nothing is changed and the message names the file, the tensor and the reason. If st->extra
 * is requested (st != NULL), st->extra gets a malloc'd copy of the stored bytes (free it) and
 * st->extra_len their count; NULL and 0 when the file has none. */
int ckpt_load(const char *path, Seq2Seq *m, CkptState *st);

#endif
