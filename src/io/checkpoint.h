/* checkpoint.h: a training checkpoint of any model in one .npz: its parameters (by name), a
 * configuration the model describes (key -> integer, float or string), the optimizer's state
 * and configuration, the step (the schedule's position), the RNG state, a data-loader position
 * and the caller's bytes (e.g. a vocabulary). A checkpoint alone rebuilds the model and
 * continues the run to the bit.
 *
 * A model says what its configuration is with a table of fields of its config struct
 * (CkptField, CkptConfig: ../autograd/config.h, below io so that models need no file code):
 *   typedef struct { int vocab, d_model, n_layer; double dropout; char name[16]; } MyConfig;
 *   static const CkptField my_fields[] = {
 *       CKPT_CFG_INT(MyConfig, vocab, 1, 1 << 20), CKPT_CFG_INT(MyConfig, d_model, 1, 4096),
 *       CKPT_CFG_INT(MyConfig, n_layer, 1, 64),    CKPT_CFG_FLOAT(MyConfig, dropout, 0, 0.99),
 *       CKPT_CFG_STRING(MyConfig, name)};
 *   MyConfig cfg = ...;
 *   Checkpoint ck = {.params = &params, .opt = opt, .rng = &rng,
 *                    .config = {"mine", my_fields, 5, &cfg}};
 *   ckpt_save("last.npz", &ck, 6, NULL);                  // saving
 *   NpzFile *f;
 *   ckpt_read("last.npz", &ck.config, &f);                // reading: fills cfg, checked
 *   ... build the model from cfg, its optimizer ...
 *   ckpt_load_from(f, &ck); npz_free(f);                  // loading: all or nothing
 *
 * Entries beside the parameters (under npz's reserved prefixes, so npz_load_params skips them
 * and numpy shows them by name):
 *   meta.model            '|u1' the model's kind ("seq2seq"), if given
 *   meta.config.<field>   one 0-d int64 or float64 per field, a string as '|u1' bytes
 *                         (numpy: bytes(f["meta.config.name"]).decode())
 *   meta.optim.<field>    the OptimConfig, likewise
 *   meta.extra            the caller's bytes ('|u1'), if any
 *   optim.<param>.exp_avg / .exp_avg_sq / .momentum_buffer, and train.step (0-d int64)
 *   rng.state             (4) uint64: the training RNG (dropout)
 *   data.position         (n) int64: the caller's data-loader position (epoch, cursor, ...)
 *   meta.run.<field>      one 0-d int64 or float64 per field of Checkpoint.run (a string as
 *                         '|u1' bytes): the run's state by name (src/run/run.h)
 * Weights-only export: opt, rng and n_data left empty. Files written before meta.model existed
 * load (their configuration entries are named as the fields were).
 * Not here: the .npz container (npz.h); the field tables (../autograd/config.h); a model's own
 * configuration rules (its check). */
#ifndef ATTOGRAD_CHECKPOINT_H
#define ATTOGRAD_CHECKPOINT_H

#include <stddef.h>

#include "../autograd/config.h"
#include "../optim/optim.h"
#include "npz.h"

#define CKPT_MAX_DATA 32

/* ---- the whole state ---- */

/* What a checkpoint holds; any part may be left empty (NULL, 0: not saved / not wanted). */
typedef struct Checkpoint {
    ParamList *params; /* saved by name; loaded into, all or nothing */
    CkptConfig config;
    Optimizer *opt; /* its configuration, state tensors and step */
    Rng *rng;
    int64_t data[CKPT_MAX_DATA]; /* the data-loader position */
    int n_data;
    const void *extra; /* saving: bytes to keep; loading: a malloc'd copy (free it), or NULL */
    size_t extra_len;
    CkptConfig run; /* the run's state as named fields (meta.run.<name>: a trainer's sums, its
                     * settings, a loader's position; src/run), n_fields 0: none. run.model and
                     * run.check are not used */
} Checkpoint;

/* Writes path atomically (npz_write: temp file, fsync, rename, fsync of the folder); level
 * 0..9; stats may be NULL. Nothing ckpt_read would refuse is written: a configuration outside
 * its fields' ranges or its check, a non-finite weight or optimizer state, a negative Adam
 * second moment, a step outside [0, CKPT_MAX_STEP], an all-zero RNG state are AG_ERR_RANGE
 * naming the tensor and the index ("last.npz: not saved: decoder.norm.weight[0] = nan: must be
 * finite"), and the file at path is left as it was. */
int ckpt_save(const char *path, const Checkpoint *c, int level, NpzStats *stats);

/* ---- reading: once, and checked before anything is used ----
 * Limits (docs/robustness.md):
 *   CKPT_MAX_STEP           train.step: the integers a double counts exactly
 *   CKPT_MAX_SMALL          .npy bytes of each small entry: meta.model, meta.config.*,
 *                           meta.optim.*, meta.run.*, train.step, rng.state, data.position
 *   CKPT_MAX_SMALL_ENTRIES  small entries in a file
 *   CKPT_MAX_EXTRA          .npy bytes of meta.extra
 *   CKPT_MAX_PARAMS         parameter values a configuration may describe (../autograd/config.h) */
#define CKPT_MAX_STEP ((int64_t)1 << 53)
#define CKPT_MAX_SMALL 4096
#define CKPT_MAX_SMALL_ENTRIES 96
#define CKPT_MAX_EXTRA ((uint64_t)64 << 20)

/* Reads path once (npz_read with its limits) and checks what it means before anything is
 * used. In order: the small entries (above) are read first, each at most CKPT_MAX_SMALL bytes,
 * and meta.extra may declare at most CKPT_MAX_EXTRA. With cfg (may be NULL): meta.model must be
 * cfg->model's (when both have one), every field is read (present or optional (0 when absent),
 * its type, an int that fits,
 * a string that fits, a number in [lo, hi]) and cfg->check passes; the parameter count it gives
 * (at most CKPT_MAX_PARAMS) bounds the other entries before any of them is allocated: together
 * at most 8 bytes a parameter (float64), three times that with an optimizer, plus
 * CKPT_MAX_SMALL an entry (so a small file declaring a huge entry costs nothing), and the file
 * must hold at least that many parameter values. Then the optimizer's configuration
 * (optim_check_config), the types of train.step, rng.state and data.position, and the
 * library's rules:
 *   train.step            in [0, CKPT_MAX_STEP]
 *   rng.state             not all zeros (the generator would stay at 0)
 *   every float array     finite, also once converted to the build's Real
 *   optim.*.exp_avg_sq    >= 0 (Adam's second moment)
 * Any failure: nothing is returned or changed, and the message names the file, the entry, the
 * value and the rule ("last.npz: train.step = -1: must be >= 0"); codes AG_ERR_RANGE (a
 * value), AG_ERR_FORMAT, AG_ERR_SHAPE, AG_ERR_NOMEM (over a limit), AG_ERR_IO. On success
 * *out holds every entry (npz_free it) and cfg->values the configuration. Members of the struct
 * that no field describes keep their values: start from a zeroed (or default) struct. */
int ckpt_read(const char *path, const CkptConfig *cfg, NpzFile **out);

/* The optimizer configuration of a file from ckpt_read (already checked): AG_OK and *has 1,
 * or *has 0 when the file has none (a weights-only export). */
int ckpt_optim_config(const NpzFile *f, OptimConfig *o, int *has);

/* Loads a file from ckpt_read into the non-empty parts of c. Everything is validated first (a
 * configuration equal to c->config's values, every parameter and optimizer state tensor
 * present with its shape, train.step, the RNG, a data position of c->n_data values); on any
 * error nothing is changed and the message names the file, the tensor and the reason. Then
 * c->extra gets a malloc'd copy of meta.extra, NUL-terminated (free it), and c->extra_len its
 * length; NULL and 0 when the file has none. */
int ckpt_load_from(const NpzFile *f, Checkpoint *c);
/* The run's fields (meta.run.<name>) of a file from ckpt_read into run->values, each checked
 * against its field (present, its type, in [lo, hi]; an optional one absent reads 0): AG_OK,
 * or an error naming the file and the entry, and then run->values is as it was. */
int ckpt_read_run(const NpzFile *f, const CkptConfig *run);
/* ckpt_read with c->config, then ckpt_load_from: for a model already built with the file's
 * configuration. */
int ckpt_load(const char *path, Checkpoint *c);

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
/* A rule on element i of entry, named what: an integer in [lo, hi], or a double (its '<i8'
 * bits) in [lo, hi] */
#define CKPT_RULE_INT(entry, i, what, lo, hi)                                                      \
    { entry, i, what, CKPT_INT, lo, hi, 0, 0 }
#define CKPT_RULE_F64(entry, i, what, lo, hi)                                                      \
    { entry, i, what, CKPT_F64_BITS, 0, 0, lo, hi }
/* Checks rules[0..n) over f in order: AG_OK, or the first failure (AG_ERR_RANGE for a value,
 * AG_ERR_FORMAT for an entry of another dtype), its message naming the file, the entry (and
 * index), the value and the rule. */
int ckpt_check_rules(const NpzFile *f, const CkptRule *rules, int n);

#endif
