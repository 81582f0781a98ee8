/* translate_run.h: the translator's trainer driven from the tests: a TsTrainConfig (the demo's
 * configuration, then what a test changes) run as the `attograd-translate train` command line it
 * stands for, in this process (tr_train_main). Test support only: no program uses it.
 * Not here: the trainer (examples/translate/train.c), the assertions (each test).
 * Read next: tests/examples/test_translate.c. */
#ifndef AG_TESTS_TRANSLATE_RUN_H
#define AG_TESTS_TRANSLATE_RUN_H

#include <stdint.h>

#include "attograd.h"

typedef struct TsTrainConfig {
    const char *train_path, *valid_path, *out_dir; /* valid_path NULL or "": --no-valid */
    Seq2SeqConfig model;                           /* vocabulary sizes are filled from the data */
    OptimConfig optim; /* --schedule-steps from schedule.total (0: the steps) */
    int batch;
    int64_t steps;                          /* steps to reach (a resumed run continues up to it) */
    int epochs;                             /* when > 0, --epochs instead of --steps */
    double clip;                            /* max gradient norm, 0: none */
    double embed_gain;                      /* --embed-gain */
    uint64_t seed;                          /* initial weights, dropout and data order */
    int log_every, valid_every, save_every; /* steps; save_every 0: = valid_every */
    int valid_max;                          /* valid pairs decoded for exact match (0: all) */
    int compress;                           /* zlib level of the checkpoints, 0: stored */
    int threads;                            /* 0: leave OpenMP's default */
    int resume;                             /* --resume: continue from out_dir/last.npz */
    int force;                              /* --force */
    int verbose;                            /* 0: --quiet */
    int64_t inject_nan;                     /* --inject-nan (0: never) */
    int check_finite;                       /* --check-finite */
    int64_t report_rss;                     /* --report-rss (0: none) */
    double max_memory;                      /* --max-memory in GiB (0: the machine's) */
    /* on resume, the model/optimizer/batch/seed flags given again (" d-model lr "); the others
     * are left to the checkpoint; NULL: none */
    const char *given;
    TxtVocabKind tokenizer; /* --tokenizer */
    int vocab;              /* bpe: --vocab */
    int shards;             /* --shards (0: one a process) */
} TsTrainConfig;

/* The demo's configuration (`attograd-translate train` without flags; its schedule.warmup -1:
 * no --warmup, the run picks it). Every flag is passed, so a test's run does not depend on the
 * program's defaults. */
TsTrainConfig ts_train_defaults(void);
/* Runs cfg as its command line: `train` with every flag (on resume, only the run's settings,
 * the switches and the flags named in cfg->given). Returns the program's exit code
 * (TR_EXIT_*). */
int ts_train(const TsTrainConfig *cfg);

#endif
