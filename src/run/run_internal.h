/* run_internal.h: what run.c (the loop, the state, resuming) and run_log.c (what a run prints
 * and writes besides checkpoints, signals) share: the RunLoop struct. Internal to src/run.
 * Read next: run.c. */
#ifndef AG_RUN_INTERNAL_H
#define AG_RUN_INTERNAL_H

#include <signal.h>

#include "run.h"

#define RUN_MAX_SLOTS 96  /* saved values: flags, the run's state, the model's */
#define RUN_STR_MAX 4096  /* a saved text flag's bytes, NUL included (PATH_MAX) */
#define RUN_PATH_MAX 4224 /* PATH_MAX and the names built on --out */

/* one saved value: where it lives (src) and where in the buffer (off) */
typedef struct RunSlot {
    char name[96];
    void *src;
    size_t size, off;
    const Flag *flag; /* a flag's value, or NULL */
    int cls;          /* a flag: KEEP or REMEMBER (run.c) */
} RunSlot;

struct RunLoop {
    const RunModel *m;
    RunConfig *c;
    const char *cmd, *ckpt;
    Flag *fl;
    int n_fl;
    RunSlot slots[RUN_MAX_SLOTS];
    CkptField fields[RUN_MAX_SLOTS];
    int n_slots;
    char *buf, *given; /* the saved values; the values of this command line */
    size_t buf_len;
    RunState st;
    Arena *params_arena, *step_arena;
    ParamList *params;
    Tape *tape;
    Optimizer *opt;
    Rng rng;
    DistGrad *dist;
    uint64_t shard_seed;
    int64_t step, saved_step, step_start;
    char last_path[RUN_PATH_MAX], best_path[RUN_PATH_MAX], csv_path[RUN_PATH_MAX],
        png_path[RUN_PATH_MAX];
    FILE *csv;
    int tty, plot_said;
    int valid_stopped; /* a signal stopped a validation (RUN_VALID_INTERRUPTED) */
    int log_failed;    /* the log could not be opened to write (exit 1, not 2) */
    int eval_failed;   /* eval: a metric was not finite (exit 1, not 2) */
    double t_start, t_row, t_bar, last_tps;
    long rss_first[2]; /* run_report_memory's first figures (RunConfig.report_rss) */
};

/* run.c */
int run_save(RunLoop *r, const char *path);

/* run_log.c */
int run_paths(RunLoop *r); /* AG_ERR_ARG when --out is too long for them */
int run_log_open(RunLoop *r);
int run_log_row(RunLoop *r, const double *valid);
void run_progress(RunLoop *r, double loss, int force);
void run_end_bar(RunLoop *r);
void run_plot(RunLoop *r, int final);
void run_say_start(RunLoop *r, int threads);
/* the learning rate and its schedule in words ("constant lr 0.001", "lr 0.001 (warmup 10
 * steps, then constant)", "lr 0.05, cosine schedule (...)"), in buf[0..n); returns buf */
const char *run_describe_schedule(const OptimSchedule *s, double lr, char *buf, size_t n);
void run_say_valid(RunLoop *r, const double *v, int better);
void run_say_done(RunLoop *r);
/* the message of a run that stopped at step s (what is value, or a data error when what is
 * NULL: ag_last_error()); returns code */
int run_stopped(RunLoop *r, int64_t s, const char *what, double value, int code);
/* a write failed (its message in ag_last_error()): what is still safe; RUN_EXIT_FAIL */
int run_write_failed(RunLoop *r);

#endif
