/* trainer.h: what the trainer's files share (train.c: the run on src/run's loop; train_setup.c:
 * the defaults, the checks of a configuration and of a checkpoint written before the run loop,
 * tr_train). Internal to the example: tests use translate.h.
 * Read next: train_setup.c. */
#ifndef ATTOGRAD_TRAINER_H
#define ATTOGRAD_TRAINER_H

#include <string.h>

#include "translate.h"

/* data.position of a checkpoint written before the run loop (today's keep their state as named
 * meta.run.* fields): the loader, the best validation so far, the last validated step, the CSV
 * row being accumulated and the run's settings that --resume keeps (doubles stored as their
 * bits). Checkpoints written before the settings were kept hold the first
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

#endif
