/* cmd.h: the lens commands' runs, written once for any model: a program parses its flags,
 * loads its model and reads its rows of tokens into a LensCmd; then the metric of --metric,
 * cache, ablate, patch and the logit lens are one call each, and lens_cmd_end frees what the
 * command holds and gives its exit code. attograd-gpt's and attograd-translate's commands are
 * these calls (docs/lens.md shows a model of your own on them). A GPT's rows are its tokens
 * (src NULL); a seq2seq model's are sentence pairs run teacher-forced (src the source + EOS,
 * ids BOS + the target, next the target + EOS).
 * Not here: what the flags mean (the programs; lens_cmd_parse reads them), checkpoints, how text becomes tokens (the programs), the outputs' files and
 * tables (report.h), the head detectors (their tables differ by model: the programs).
 * Read next: cmd.c, report.h; docs/lens.md. */
#ifndef ATTOGRAD_LENS_CMD_H
#define ATTOGRAD_LENS_CMD_H

#include "../flag/flag.h"
#include "lens.h"
#include "logit.h"
#include "report.h"

/* The rows a command runs on (each malloc'd; lens_rows_free frees them) */
typedef struct LensRows {
    int *ids;  /* (B, T): the tokens; a seq2seq model's: the decoder's input (BOS + target) */
    int *src;  /* (B, S): a seq2seq model's source + EOS; NULL: a GPT's rows */
    int *next; /* (B, T): what each position predicts (the target + EOS); NULL: ids shifted */
    int B, S, T;
} LensRows;
void lens_rows_free(LensRows *r); /* r zeroed; NULL arrays are fine */

/* What a lens command holds once the program has loaded its model and read its rows */
typedef struct LensCmd {
    const char *prog, *name; /* "attograd-gpt", "cache": start the messages on stderr */
    const char *ckpt;        /* the checkpoint: names the model when its values overflow */
    Tape *t;                 /* the runs' tape (the program's) */
    LensModel lm;            /* lens_gpt, lens_seq2seq (its layout freed by lens_cmd_end) */
    LensReadout ro;          /* the logit lens's readout (lens_readout_gpt, _seq2seq) */
    LensReport rp;           /* the outputs' token texts and heatmaps */
    LensTokenFn one_token;   /* --good, --bad, --token's ids (its ctx: rp.ctx) */
    LensRows r;              /* the rows (freed by lens_cmd_end) */
} LensCmd;

/* The metric of --metric for rows r: "loss" (the next tokens' loss: r->next, or each token's
 * next, a GPT row's last predicting nothing; such a row needs 2 tokens or more) or
 * "logit-diff" (good minus bad at position pos, -1 the last: lens_logit_diff_metric). */
int lens_cmd_metric(const LensCmd *c, const LensRows *r, const char *kind, const char *good,
                    const char *bad, int pos, LensOwnedMetric *m);

/* cache: the rows run once with a cache at the points of hooks (comma-separated globs, each
 * matching: "--hooks" names them in errors), with mt (may be NULL) also its gradients; writes
 * out (lens_cache_save; info gives the configuration, the rows and their texts are added) and
 * prints a line naming it. */
int lens_cmd_cache(LensCmd *c, const char *hooks, const LensMetric *mt, LensRunInfo info,
                   const char *out);
/* ablate: each head (or point) of the points of hook ablated in turn (mode; at positions, n_pos
 * 0: all) on the rows; lens_report_ablate's file, table and heatmap. */
int lens_cmd_ablate(LensCmd *c, const char *hook, LensAblateMode mode, const int *positions,
                    int n_pos, const LensMetric *mt, const char *metric, const char *out);
/* patch: activation patching (or attribution) from the rows (one clean row) into corrupt (as
 * many tokens) over the points of hook by axes; lens_report_patch's file, line and heatmap. */
int lens_cmd_patch(LensCmd *c, const LensRows *corrupt, const char *hook, LensAxes axes,
                   int attribution, const LensMetric *mt, const char *metric, const char *out);
/* lens: the logit lens and direct logit attribution of logit(good), or logit(good) -
 * logit(bad) (bad may be NULL) at position pos (-1: the last) of the rows; good_flag names
 * good's flag ("token", "word", "good"). lens_report_logit's file, tables and heatmaps. */
int lens_cmd_logit(LensCmd *c, const char *good, const char *good_flag, const char *bad, int pos,
                   const char *out);

/* A lens command's flags: argv[0..argc) parsed into the table fl[0..n) (flag_parse; pos, npos
 * as there). --help prints the one layout of every program's lens commands on stdout:
 * "usage: PROG NAME ARGS", what, a blank line, "flags (default) [range]:" and flag_help's
 * table. Returns flag_parse's AG_OK, FLAG_HELP or AG_ERR_ARG (the message: ag_last_error). */
int lens_cmd_parse(const char *prog, const char *name, const char *args, const char *what, Flag *fl,
                   int n, int argc, char **argv, char **pos, int *npos);

/* rc again with ag_last_error() after "<ckpt>: the model's values are not finite on this input
 * ...": a file refused a value that is not finite (AG_ERR_RANGE) */
int lens_cmd_not_finite(const LensCmd *c, int rc);
/* The end of a command: the rows and the model's layout freed; 0 for AG_OK, else the message
 * printed as "prog name: why" and 2 (1 for AG_ERR_NOMEM), as src/run's RUN_EXIT_* */
int lens_cmd_end(LensCmd *c, int rc);

#endif
