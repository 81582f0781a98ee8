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
 * What each value may be, and the limits of reading: ckpt_read below.
 * Not here: the .npz container (npz.h). */
#ifndef ATTOGRAD_CHECKPOINT_H
#define ATTOGRAD_CHECKPOINT_H

#include "../nn/nn.h"
#include "../optim/optim.h"
#include "npz.h"

#define CKPT_MAX_DATA 32

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
 * NULL (weights and configuration only). level 0..9. stats may be NULL. Nothing ckpt_read
 * would refuse is written: a non-finite weight or optimizer state, a negative Adam second
 * moment, a step outside [0, CKPT_MAX_STEP], an all-zero RNG state are AG_ERR_RANGE naming the
 * tensor and the index ("last.npz: not saved: decoder.norm.weight[0] = nan: must be
 * finite"), and the file at path is left as it was. */
int ckpt_save(const char *path, const Seq2Seq *m, const CkptState *st, int level, NpzStats *stats);

/* ---- reading: once, and checked before anything is used ----
 * Limits (docs/robustness.md):
 *   CKPT_MAX_STEP           train.step: the integers a double counts exactly
 *   CKPT_MAX_SMALL          .npy bytes of each small entry: meta.config.*, meta.optim.*,
 *                           train.step, rng.state, data.position
 *   CKPT_MAX_SMALL_ENTRIES  small entries in a file (a checkpoint has 31)
 *   CKPT_MAX_EXTRA          .npy bytes of meta.extra */
#define CKPT_MAX_STEP ((int64_t)1 << 53)
#define CKPT_MAX_SMALL 4096
#define CKPT_MAX_SMALL_ENTRIES 64
#define CKPT_MAX_EXTRA ((uint64_t)64 << 20)

/* Reads path once (npz_read with its limits) and checks what it means before anything is
 * used. In order: the small entries (above) are read first, each at most CKPT_MAX_SMALL
 * bytes, and meta.extra may declare at most CKPT_MAX_EXTRA; the configuration they hold then
 * bounds the other entries before any of them is allocated: together at most 8 bytes a
 * parameter (float64), three times that with an optimizer, plus CKPT_MAX_SMALL an entry (so a
 * small file declaring a huge entry costs nothing). Then: the configurations
 * (ckpt_check_config, optim_check_config), at least as many parameter values as the model has
 * parameters, the types of train.step, rng.state and data.position, and the library's rules:
 *   train.step            in [0, CKPT_MAX_STEP]
 *   rng.state             not all zeros (the generator would stay at 0)
 *   every float array     finite, also once converted to the build's Real
 *   optim.*.exp_avg_sq    >= 0 (Adam's second moment)
 * Any failure: nothing is returned, and the message names the file, the entry, the value and
 * the rule ("last.npz: train.step = -1: must be >= 0"); codes AG_ERR_RANGE (a value),
 * AG_ERR_FORMAT, AG_ERR_SHAPE, AG_ERR_NOMEM (over a limit), AG_ERR_IO. On success *out holds
 * every entry (npz_free it); read the configuration with ckpt_config_of, build the model, load
 * it with ckpt_load_from, and check the caller's own entries with ckpt_check_rules. */
int ckpt_read(const char *path, NpzFile **out);
/* The configurations of a file from ckpt_read (already checked). opt_cfg and has_optim may be
 * NULL. AG_ERR_SHAPE / AG_ERR_FORMAT when the file has none. */
int ckpt_config_of(const NpzFile *f, Seq2SeqConfig *cfg, OptimConfig *opt_cfg, int *has_optim);
/* ckpt_load on a file from ckpt_read. */
int ckpt_load_from(const NpzFile *f, Seq2Seq *m, CkptState *st);

/* A rule over the values of named entries: the library's own (above) and a caller's (the
 * translation example's data.position). entry: a name, or "*suffix" for every entry whose
 * name ends with suffix ("*": every entry). Kinds:
 *   CKPT_INT          element index of an '<i8' entry in [ilo, ihi]
 *   CKPT_F64_BITS     element index of an '<i8' entry, read as the bits of a double: finite,
 *                     in [lo, hi]
 *   CKPT_FLOATS       every element of the matching float arrays: finite (also as Real), in
 *                     [lo, hi] (other dtypes are skipped)
 *   CKPT_NOT_ALL_ZERO an integer entry with at least one non-zero element (what: the reason)
 * what names the value in messages ("data.position[0] (epoch) = -1: must be >= 0"), may be
 * NULL. A rule whose entry is absent, or whose index is past an entry's end, passes. */
typedef enum { CKPT_INT, CKPT_F64_BITS, CKPT_FLOATS, CKPT_NOT_ALL_ZERO } CkptRuleKind;
typedef struct CkptRule {
    const char *entry;
    int index;
    const char *what;
    CkptRuleKind kind;
    int64_t ilo, ihi;
    double lo, hi;
} CkptRule;
/* Checks rules[0..n) over f in order: AG_OK, or the first failure (AG_ERR_RANGE for a value,
 * AG_ERR_FORMAT for an entry of another dtype), its message naming the file, the entry (and
 * index), the value and the rule. */
int ckpt_check_rules(const NpzFile *f, const CkptRule *rules, int n);

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

/* Loads everything into m (built with the same configuration) and the non-NULL parts of st.
 * Everything is validated first (configuration equal to m's, every parameter and optimizer
 * state tensor present with its shape, RNG, data position of st->n_data values); on any error
 * nothing is changed and the message names the file, the tensor and the reason. If st->extra
 * is requested (st != NULL), st->extra gets a malloc'd copy of the stored bytes (free it) and
 * st->extra_len their count; NULL and 0 when the file has none. */
int ckpt_load(const char *path, Seq2Seq *m, CkptState *st);
/* ckpt_read_config and ckpt_load each read the file (ckpt_read); a program that needs both
 * reads it once with ckpt_read, ckpt_config_of and ckpt_load_from. */

#endif
