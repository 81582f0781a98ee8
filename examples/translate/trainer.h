/* trainer.h: the trainer's state and the functions its files share (train.c runs the loop;
 * train_setup.c starts a run, fresh or resumed, and saves checkpoints; train_log.c writes the
 * CSV log, the progress bar and the messages of a stopped run; train_system.c holds what
 * touches the process: memory figures, temporary files). Internal to the example:
 * tests use translate.h. Read next: train_setup.c (after train.c, the loop). */
#ifndef ATTOGRAD_TRAINER_H
#define ATTOGRAD_TRAINER_H

#include <string.h>

#include "translate.h"

/* data.position of a checkpoint: the loader, the best validation so far, the last validated
 * step, the CSV row being accumulated and the run's settings that --resume keeps (doubles
 * stored as their bits). Checkpoints written before the settings were kept hold the first
 * POS_V1_COUNT values; --shards is stored only when above 1 (POS_V2_COUNT values otherwise, as
 * before it existed). What each may be: tr_check_position. */
enum {
    POS_EPOCH,
    POS_CURSOR,
    POS_SEED,       /* the loader's seed */
    POS_BATCH,      /* batch size */
    POS_N_TRAIN,    /* pairs in the training file */
    POS_BEST_STEP,  /* step of best.npz (0: none yet) */
    POS_BEST_EXACT, /* its valid exact match (double bits) */
    POS_BEST_LOSS,  /* its valid loss (double bits) */
    POS_LAST_VALID, /* the last step whose validation finished */
    POS_IV_LOSS,    /* sum of the losses since the last CSV row (double bits) */
    POS_IV_NORM,    /* sum of the gradient norms since then (double bits) */
    POS_IV_STEPS,   /* steps since then */
    POS_IV_TOKENS,  /* target tokens since then */
    POS_LOG_EVERY,  /* the run's settings: --log-every */
    POS_VALID_EVERY,
    POS_SAVE_EVERY,
    POS_VALID_MAX,
    POS_TOTAL,  /* --steps (or --epochs times the batches of an epoch) */
    POS_CLIP,   /* --clip (double bits) */
    POS_SHARDS, /* --shards (docs/mpi.md), when above 1 */
    POS_COUNT,
    POS_V1_COUNT = POS_LOG_EVERY,
    POS_V2_COUNT = POS_SHARDS
};

/* the trainer's state */
typedef struct {
    const TrTrainConfig *cfg;
    TrVocab src, tgt;
    TrData train, valid;
    int have_valid;
    int no_valid; /* resumed from a run without validation, and --valid-every not given */
    Seq2Seq m;
    Arena *params, *step_arena;
    Tape *tape;
    Optimizer *opt;
    Rng rng;
    TrLoader loader;
    TrBatch batch;
    int64_t step, total, saved_step;
    int64_t pos[POS_COUNT];
    int log_every, valid_every, save_every, valid_max; /* the run's (cfg's, or on resume the
                                                        * checkpoint's unless given again) */
    double clip;
    char last_path[600], best_path[600], csv_path[600];
    FILE *csv;
    char *vocab_text;
    size_t vocab_len;
    int tty;
    double t_start, t_row, t_bar, last_tps;
    int64_t step_start;
    Tensor *poison; /* --inject-nan: the weight set to NaN before that step (fault tests) */
    /* several shards or processes (docs/mpi.md); dist NULL: one process, one shard (the plain
     * step) */
    int shards;
    DistGrad *dist;
    uint64_t shard_seed; /* this step's: shard i's dropout RNG is rng_hash(shard_seed, i) */
    TrBatch shard;       /* the rows of the shard being computed */
} Trainer;

/* ---- train_setup.c: starting a run, checkpoints ---- */
/* Reads the data, builds or resumes the model and optimizer, opens the log, measures a step's
 * memory: TR_EXIT_OK, or the exit code of a failed start (its message printed). */
int tr_trainer_start(Trainer *tr, const TrTrainConfig *c);
void tr_trainer_free(Trainer *tr);
/* Writes the whole state to path (last.npz or best.npz) after syncing the log. */
int tr_save(Trainer *tr, const char *path);

/* ---- train_log.c: what the run prints and logs ---- */
int tr_log_open(Trainer *tr, int resume);
int tr_log_row(Trainer *tr, int valid, double vloss, double vexact);
void tr_log_header(const Trainer *tr, int threads);
void tr_progress(Trainer *tr, double loss, int force);
void tr_end_bar(Trainer *tr);
void tr_diverged(Trainer *tr, int64_t s, const char *what, double value, int from_tape);
void tr_write_failed(Trainer *tr);

/* ---- train_system.c: memory, files ---- */
void tr_report_rss(const Trainer *tr, long first[2]);
void tr_remove_stale_temps(const Trainer *tr);
void tr_fixed_mmap_threshold(void);
#endif
