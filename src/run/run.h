/* run.h: a training run around a model's callbacks, nanoGPT's train.py as a library: the model
 * gives its flags, how to build itself, the loss of a shard of a step's batch, its validation
 * metrics and the state it wants kept; the run gives the rest. That is: one table of flags (the
 * run's standard rows, run_flags, after the model's own), AdamW/Adam/SGD with warmup and cosine
 * or inverse-sqrt decay (src/optim), gradient clipping, --shards and mpirun through src/dist
 * (the same bits for any number of processes), a CSV row every --log-every steps, validation
 * every --valid-every steps with best.npz, last.npz every --save-every steps (atomic writes),
 * progress with the ETA and tokens/s, loss.png drawn by gnuplot when it is installed, SIGINT and
 * SIGTERM (save once, exit 130 / 143), a non-finite loss, gradient or weight (stop naming the
 * step, exit 1, the last good checkpoint kept), and --resume: the checkpoint holds the weights,
 * the optimizer, the RNG, the flags of the run and the model and their state as named fields
 * (meta.run.<name>), so `--out DIR --resume` alone continues to the bit, and a model flag given
 * again with another value is refused, named. `PROG eval` reads a checkpoint back and prints
 * the validation metrics. docs/run.md is the guide; examples/classify.c the shortest program.
 * Not here: a model (its callbacks), the flag parser (../flag/flag.h), the tree of shards
 * (../dist/dist.h), checkpoints' entries (../io/checkpoint.h). Read next: run.c, then
 * run_log.c. */
#ifndef AG_RUN_H
#define AG_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "../dist/dist.h"
#include "../flag/flag.h"
#include "../io/checkpoint.h"
#include "../optim/optim.h"
#include "../tensor/threads.h"

/* Exit codes of run_main (as the example programs' TR_EXIT_*) */
enum { RUN_EXIT_OK = 0, RUN_EXIT_FAIL = 1, RUN_EXIT_USAGE = 2 };
#define RUN_EXIT_SIGINT 130
#define RUN_EXIT_SIGTERM 143

#define RUN_MAX_METRICS 8 /* validation metrics of a model (the loss first) */
#define RUN_N_FLAGS 22    /* rows run_flags writes */
#define RUN_MAX_FLAGS 256 /* rows of a program's whole table */
/* RunModel.validate's return when a signal stopped it (run_stop_requested): the run saves
 * last.npz and exits 130 / 143; --resume validates that step first, then goes on */
#define RUN_VALID_INTERRUPTED 1

/* The run's state beside the model's: the sums of the CSV row being accumulated, the best
 * validation (best_step 0: none yet), the last validated step (meta.run.run.*) */
typedef struct RunState {
    double row_loss, row_norm, row_tokens;
    int64_t row_steps, best_step, last_valid;
    double best[RUN_MAX_METRICS];
} RunState;

/* What a model gives the run. Every callback gets ctx. Only build and loss are required. */
typedef struct RunModel {
    const char *prog; /* the program's name in messages: "classify train: ..." */
    void *ctx;
    /* Builds the model from its flags (on --resume and for eval they hold the checkpoint's
     * values) into the long-lived arena a, drawing its initial weights from init; *params: its
     * parameter list. AG_OK, or AG_ERR_ARG naming the flag that cannot be honoured. */
    int (*build)(void *ctx, Arena *a, Rng *init, ParamList **params);
    /* the model's configuration (meta.config.*; its values the struct build fills), so that the
     * checkpoint alone rebuilds the model; n_fields 0: none */
    CkptConfig config;
    /* Draws the batch of step `step` (from 1; every process draws the same) and reads the rows
     * of shards [lo, hi) of n_shards, which this process computes; *tokens: what the batch
     * counts toward tokens/s. NULL: loss draws its own. AG_OK, or a data error (the message
     * names the file): the run stops, exit 2. */
    int (*batch)(void *ctx, int64_t step, int lo, int hi, int n_shards, double *tokens);
    /* The loss of shard i of n_shards of the step's batch, a scalar on t; rng: this shard's
     * dropout (the same whichever process computes it). NULL: the shard holds no rows. */
    Tensor *(*loss)(void *ctx, Tape *t, int shard, int n_shards, Rng *rng);
    /* Validation (NULL: none, and no best.npz): the metrics v[0..n_metrics), v[0] the loss,
     * computed with t (no gradients needed). Collective: every process calls it. AG_OK, a
     * data error, or RUN_VALID_INTERRUPTED when run_stop_requested() said so during a long one. */
    int (*validate)(void *ctx, Tape *t, double *v);
    int n_metrics;
    const char *const *metric_names; /* CSV columns valid_<name>; [0] is "loss" */
    /* 1 when metrics v beat best (NULL: a lower loss v[0]) */
    int (*better)(const double *v, const double *best);
    /* the model's own state beside the run's (a data loader's position) as named fields,
     * saved as meta.run.model.<name> and restored on --resume before batch is next called
     * (a field marked optional, added after files were written, reads 0 from them);
     * n_fields 0: none */
    CkptConfig state;
    /* bytes to keep in the checkpoint (meta.extra: a tokenizer); on --resume and eval, the
     * file's are given to load_extra (may be NULL), which checks them (AG_OK or an error).
     * Read at each save: a model may point them at what it has gathered so far */
    const void *extra;
    size_t extra_len;
    int (*load_extra)(void *ctx, const void *bytes, size_t len);
    /* 1: each shard's loss is already weighted by its share of the batch (tokens), and the
     * shards' gradients are summed; 0: their mean (shards of equal weight) */
    int shard_sum;
    /* flags of the model's table (canonical names, NULL-terminated lists; may be NULL) that
     * --resume takes from the checkpoint unless given again, with no refusal (a path, a
     * validation's size): remember; and those never saved (an output's name): transient.
     * Every other row of the model's is kept: given again with another value, it is refused. */
    const char *const *remember;
    const char *const *transient;
    /* Called once the flags are read, before anything is built or read (NULL: none): the
     * model checks its flags together and opens its data. AG_OK, or an error naming the flag
     * or the file (exit 2). */
    int (*start)(void *ctx);
    /* --resume of a checkpoint without the run's named fields (meta.run.*), written by the
     * program before it was on this loop (NULL: such a file is refused): sets the values of
     * the flags and of the model's state that f holds in its own layout (a flag given again
     * is then checked against them as any other), and the run's state *st; step is the
     * file's. AG_OK, or an error naming the file and the value. */
    int (*legacy)(void *ctx, const NpzFile *f, int64_t step, RunState *st);
    /* columns of the model's own in the CSV after step, comma-separated ("epoch"; NULL: none),
     * and describe: their cells for the row being written (csv 1: "0.2133") or a few words for
     * the progress lines after "step N/M" (csv 0: "epoch 0.21"), into buf of n bytes */
    const char *columns;
    void (*describe)(void *ctx, int csv, char *buf, size_t n);
    /* the parameter --inject-nan poisons (its name; NULL: the first) */
    const char *nan_param;
    /* what the batch counts, in the data-parallel line ("pairs"; NULL: "examples") */
    const char *unit;
    /* draws png from the CSV at csv (RUN_PLOT_*, as run_plot_loss; NULL: run_plot_loss): a
     * model's own loss.png (attograd-translate's adds the exact match) */
    int (*plot)(const char *csv, const char *png);
} RunModel;

/* The run's settings, the rows of run_flags (their canonical spellings; docs/run.md). The
 * program sets its defaults before run_flags. Kept by --resume (given again with another value:
 * refused): batch, lr, lr-min, warmup, schedule, schedule-steps, weight-decay, clip, seed,
 * shards, precision and the optimizer; remembered (the checkpoint's unless given): steps, log-every,
 * valid-every, save-every; not saved: out, resume, force, threads, quiet, inject-nan. */
typedef struct RunConfig {
    int64_t steps;
    int batch;
    OptimConfig optim;   /* kind, betas, eps; lr, warmup, schedule: the flags */
    int decay_min_ndim;  /* 0: --weight-decay is the optimizer's own; k > 0: nanoGPT's groups,
                             * decay on the parameters of k or more dimensions (optim_step_decay) */
    double weight_decay; /* --weight-decay */
    double clip;         /* --clip: the gradient's norm, 0: none */
    int64_t seed;        /* --seed: the weights (rng_hash(seed, 0)), dropout (.., 1) */
    int shards;          /* --shards: 0: one a process */
    const char *out;     /* --out: last.npz, best.npz, log.csv, loss.png */
    int resume, force, quiet, threads;
    int log_every, valid_every, save_every; /* save_every 0: --valid-every */
    int64_t inject_nan;    /* tests: a NaN in the first parameter before that step */
    int steps_to_schedule; /* 1: --resume without --steps runs to --schedule-steps (nanoGPT's
                            * max_iters = lr_decay_iters) instead of the saved --steps */
    int precision;         /* --precision: AG_PRECISION_FP32 or _BF16 (threads.h), set as the model
                            * is built (the double build refuses bf16: exit 2); a checkpoint older
                            * than the flag reads fp32 */
    int keep_every;        /* 0: none; k > 0: the state at step 0 and every k steps is also kept
                            * as OUT/ckpt/step_NNNNNNNN.npz (last.npz's entries; --resume continues
                            * from one copied to last.npz): the run's history, for an analysis. No
                            * row of run_flags: a program offers it as a flag of its own */
    /* Not saved, no row of run_flags (a program offers them as flags of its own: their names
     * are then never kept by --resume): */
    int compress;       /* the checkpoints' zlib level, 0 (stored) to 9 (attograd-translate's
                       * --compress) */
    int check_finite;   /* check mode on the run's tape (ag_check_finite): a non-finite loss or
                       * gradient is traced to the op where it began, named in the stop */
    int64_t report_rss; /* k > 0: after step k and at the end, a line to stdout (also with
                         * --quiet) of the peak and current resident memory and malloc's bytes
                         * in use (run_report_memory; attograd-translate's --report-rss) */
} RunConfig;

/* The defaults a program starts from: 1000 steps, batch 32, AdamW (torch's betas) at lr 1e-3,
 * cosine to 1e-4 after 100 warmup steps, weight decay 0.01, clip 1, seed 1, out "build/run",
 * a row every 10 steps, validation and last.npz every 100. */
RunConfig run_defaults(void);

typedef struct RunLoop RunLoop; /* run.c */

/* A run of model m with settings c (both are kept by pointer: they must outlive the run, and
 * c's fields are where the flags write). */
RunLoop *run_new(const RunModel *m, RunConfig *c);
void run_loop_free(RunLoop *r);
/* Writes the run's standard rows (RUN_N_FLAGS of them) at fl: the program's table is its
 * model's rows followed by these. Returns the number written. */
int run_flags(RunLoop *r, Flag *fl);
/* The whole program: argv[1] is "train" (the default when it is absent or starts with '-')
 * or "eval" (the checkpoint --ckpt, default OUT/best.npz, else OUT/last.npz: its step and
 * validation metrics), then flags of the table fl[0..n) (the model's rows and run_flags').
 * --help prints the table. Returns the exit code; messages go to stderr as "PROG CMD: ...". */
int run_main(RunLoop *r, Flag *fl, int n, int argc, char **argv);

/* A model flag that --resume compares with the checkpoint's model (its architecture is
 * meta.config's, so such a flag is transient, not among the run's saved ones) */
typedef struct RunGiven {
    const char *flag;        /* its canonical name in the table */
    double given, stored;    /* what the flag's value makes, and what the checkpoint's model is */
    const char *stored_text; /* the checkpoint's in words ("rope"); NULL: the number (a switch:
                              * on or off) */
} RunGiven;
/* The first flag of v[0..n) given (in fl[0..nfl)) with a value that makes another model than
 * the checkpoint's: AG_ERR_ARG, "--n-head 4 differs from the checkpoint's (2): --resume
 * continues the run with its model, ..." (the spelling and the value as typed; a switch by its
 * name); AG_OK when there is none. A model's build calls it on --resume. */
int run_check_given(const Flag *fl, int nfl, const RunGiven *v, int n);

/* What a run did, for tests and programs: the steps taken and the last metrics */
int64_t run_last_step(const RunLoop *r);
const double *run_best(const RunLoop *r); /* the best validation's metrics (n_metrics) */

/* ---- run_log.c: what the run writes besides checkpoints (also usable alone) ---- */
double run_now_s(void); /* a monotonic clock in seconds */
/* "1h02m" or "3m07s" */
void run_fmt_time(char *buf, size_t n, double seconds);
/* mkdir -p: AG_OK or AG_ERR_IO naming the folder */
int run_make_dirs(const char *path);
/* The folder a program writes into (--out): made if needed (run_make_dirs) and writable by this
 * process. AG_OK, or AG_ERR_IO naming it: "DIR: cannot write into the folder: REASON". */
int run_out_dir(const char *dir);
/* The folder of the file path (what is before its last '/'; nothing for a name alone) made
 * ready as run_out_dir does: AG_OK or its AG_ERR_IO. */
int run_out_file_dir(const char *path);
/* Opens the CSV log with its header; on resume keeps the rows up to step (cut after them) and
 * appends. AG_OK or AG_ERR_IO naming the path. */
int run_csv_open(const char *path, const char *header, int64_t step, int resume, FILE **out);
/* Reads the columns names[0..n) (n <= 64) of the CSV at path, found by its header, into
 * cols[j][0..*rows) (each allocated: free them; NULL when there is no row): a row for each line
 * whose names[0] cell is a number (a line cut short by a crash is skipped), an empty cell or a
 * column the header lacks reads NAN. AG_OK, or AG_ERR_IO naming the path, or AG_ERR_FORMAT when
 * the header lacks any of names[0..need) (naming them). */
int run_csv_read(const char *path, const char *const *names, int n, int need, double **cols,
                 int *rows);
/* Draws png from the CSV at csv (columns step, train_loss, valid_loss and, when there, the
 * valid_exact match on a right axis in %, by their header names) with gnuplot: RUN_PLOT_DRAWN,
 * RUN_PLOT_SKIPPED (no gnuplot, or no rows yet; the reason in ag_last_error) or
 * RUN_PLOT_FAILED (the reason; a header without step or train_loss). AG_GNUPLOT names another
 * gnuplot command. */
enum { RUN_PLOT_DRAWN = 0, RUN_PLOT_SKIPPED = 1, RUN_PLOT_FAILED = 2 };
int run_plot_loss(const char *csv, const char *png);
/* Writes script to PNG-without-.png + ".gp" (a first line saying how to draw it again, and
 * outfile set to png unless gnuplot -e set it) and runs gnuplot on it into a temporary file
 * renamed over png; the script sets its terminal, then `set output outfile`. RUN_PLOT_* as
 * above: skipped when gnuplot is missing ("PNG: plot skipped: gnuplot not found (...)"),
 * failed with gnuplot's first complaint. run_gnuplot_available: 1 if $AG_GNUPLOT (a path, or a
 * name looked up in PATH), else gnuplot, names an executable file. */
int run_plot_script(const char *script, const char *png);
/* Writes gnuplot's "set yrange" and "set ytics (...)" for a log y axis over data in [lo, hi]
 * (both finite and > 0; lo <= hi): the range padded a little, 3 ticks or more at round values
 * (whole decades; 1, 2, 5 of each; 1 to 9 of each; or, for a narrow range, multiples of a round
 * step), each labelled with as few digits as give its value back (so no two labels are the
 * same). */
void run_gp_log_ytics(FILE *f, double lo, double hi);
int run_gnuplot_available(void);
/* ---- run_gp.c: building blocks of the programs' gnuplot pictures ---- */
/* s as a gnuplot string literal ('...'; a quote doubled, line breaks dropped) */
void run_gp_string(FILE *f, const char *s);
/* set terminal pngcairo (width x height pixels, font size) and set output outfile */
void run_gp_begin(FILE *f, int width, int height, int font_size);
/* One heatmap panel of a script: values v (rows, cols), row 0 at the top */
typedef struct RunGpPanel {
    int id;                                /* a number unique within the script */
    const float *v;                        /* (rows, cols), row 0 at the top */
    int rows, cols;                        /* queries, keys */
    const char *const *xlab, *const *ylab; /* (cols) and (rows) tick labels, NULL: none */
    const char *title;
    double x0, x1, y0, y1; /* the plot area, screen fractions (0, 0: bottom left) */
    double lo, hi;         /* the colour range */
    int colorbox;          /* draw the colour bar at cb_x (width cb_w), as high as the panel */
    double cb_x, cb_w;
    int values;           /* > 0: print each value in its cell with this many digits */
    int horizontal_xtics; /* 0: x labels rotated by 90 degrees */
} RunGpPanel;
/* one heatmap: inline data block $M<id>, margins, tics, the image (and its values) */
void run_gp_panel(FILE *f, const RunGpPanel *p);
/* A script written in memory (open_memstream; f), begun with run_gp_begin (width x height
 * pixels, font 11); run_gp_script_draw closes it and draws DIR/NAME through run_plot_script,
 * saying a skip or failure on stderr as "PREFIX: <why>". 1 when drawn. */
typedef struct RunGpScript {
    FILE *f;
    char *buf;
    size_t len;
} RunGpScript;
void run_gp_script_begin(RunGpScript *s, int width, int height);
int run_gp_script_draw(RunGpScript *s, const char *dir, const char *name, const char *prefix);
/* A heatmap picture of values (rows, cols), row 0 at the top, each value printed in its cell
 * when the grid is small (the lens commands' LensHeatmapFn): range 0: blue (negative) through
 * white to red, 0 in the middle; range > 0: white (0) to red (range), for shares such as
 * detector scores. RUN_PLOT_* as run_plot_script (skipped without gnuplot). */
int run_plot_heatmap(const char *png, const char *title, const double *v, int rows, int cols,
                     char **ylab, char **xlab, double range);
/* SIGINT and SIGTERM set a flag, the signal's number, that run_signal_caught returns (0: none);
 * a second one quits at once (exit 128 + its number, nothing saved). run_signals_restore puts
 * back the handlers run_signals_catch found; calls nest (only the outermost restore puts them
 * back; a restore without a catch does nothing). The header needs no POSIX feature macro. */
void run_signals_catch(void);
void run_signals_restore(void);
int run_signal_caught(void);
/* The text flag `name` (its canonical spelling) that the checkpoint at path saved
 * (meta.run.flag.<name>, at most 4095 bytes), read without the file's other arrays, into
 * *value (allocated; NULL on failure): so a program finds its data folder on --resume before
 * the run reads the checkpoint. AG_OK, or an error naming the path and the entry. */
int run_saved_text(const char *path, const char *name, char **value);
/* The checkpoints a run kept (RunConfig.keep_every) in dir/ckpt: their names
 * (step_NNNNNNNN.npz), by step, into *names[0..*n) (each and the list allocated: free them).
 * AG_OK, or AG_ERR_IO naming the folder: it cannot be read, or it holds none. */
int run_kept(const char *dir, char ***names, int *n);
/* Reads the kept checkpoint dir/ckpt/name (one of run_kept's) for an analysis of the run's
 * history: its configuration into m->config's values (checked), the model built by m->build
 * into a the first time (*params NULL; its initial weights, drawn from seed 1, are overwritten),
 * then the file's weights into *params; *step: the file's train.step (0 when it has none).
 * AG_OK, or the file's error naming its path (nothing loaded). */
int run_kept_load(const RunModel *m, const char *dir, const char *name, Arena *a,
                  ParamList **params, int64_t *step);
/* One line to f: "memory: peak RSS P KiB after step S (now N KiB)" (VmHWM and VmRSS of
 * /proc/self/status; elsewhere getrusage's peak and -1), then, after the first report, ", +D KiB
 * since step SINCE", and glibc's bytes in use ("; malloc in use U KiB" and its change), which
 * unlike the RSS show a leak of a few KiB whatever the heap's layout. first[0..2): the first
 * report's figures, {-1, -1} before it (set by it). */
void run_report_memory(FILE *f, int64_t step, int64_t since, long first[2]);
/* glibc's malloc raises its mmap threshold to the size of each large block freed (mallopt(3)),
 * so blocks that come and go (a validation's decoding arena) land in the heap between
 * long-lived ones and leave holes that grow it; this fixes the threshold at 128 KiB, process-
 * wide (nothing outside glibc): a long run's RSS stays flat. */
void run_fix_mmap_threshold(void);
/* 1 when SIGINT or SIGTERM reached any process of the run (collective: every process calls
 * it): a long validation polls it and returns RUN_VALID_INTERRUPTED */
int run_stop_requested(void);

/* ---- run_records.c: records a program takes every few steps (a loss, scores per head, ...),
 * kept as bytes in every checkpoint's meta.extra (RunModel.extra, load_extra) so that --resume
 * continues them. The bytes: head[0..n_head) int64 (the shape the records are of), R int64,
 * then each array in order, native byte order: a per-record array's R x per elements, a fixed
 * array's per elements. ---- */
typedef struct RunRecArray {
    void **data; /* the array (allocated by run_records_reserve for a per-record one) */
    size_t elem; /* bytes an element: 8 (int64, double), 4 (float) */
    size_t per;  /* elements a record; fixed: elements of the array */
    int fixed;   /* 1: one array for the run (its caller allocates it), not one a record */
} RunRecArray;
typedef struct RunRecords {
    RunRecArray *a;
    int n;
    const int64_t *head;           /* (n_head) */
    const char *const *head_names; /* (n_head) their names for errors ("layers"), or NULL */
    int n_head;
    int R, cap; /* records held, room for */
} RunRecords;
#define RUN_MAX_RECORDS 10000000 /* bytes claiming more records are refused */
/* room for R records in every per-record array (aborts when out of memory) */
void run_records_reserve(RunRecords *r, int R);
/* the records as bytes (allocated; *len of them) */
void *run_records_bytes(const RunRecords *r, size_t *len);
/* the records back from bytes: AG_OK, or AG_ERR_FORMAT naming what (for example "meta.extra")
 * when its head is not r->head or its size not that of its records (nothing changed) */
int run_records_load(RunRecords *r, const void *bytes, size_t len, const char *what);
/* frees the per-record arrays (R and cap become 0; fixed arrays are their caller's) */
void run_records_free(RunRecords *r);
/* Writes path as CSV: the header "step,names[0],...", then a row a record i: steps[i] and each
 * column's cols[c * n + i] (%.6g; cols (n_cols, n)), into a temporary file renamed over path
 * (src/io/file.h). AG_OK, or AG_ERR_IO naming the path and the reason. */
int run_records_csv(const char *path, const int64_t *steps, int n, const char *const *names,
                    const double *cols, int n_cols);
/* The first steps[i] of n records whose value v[i] reaches x (above 1: v[i] >= x, an accuracy;
 * above 0: v[i] < x, a loss), or -1 when none does (a NaN never does) */
int64_t run_first_step(const int64_t *steps, const double *v, int n, double x, int above);

#endif
