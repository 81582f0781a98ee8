/* cmd.h: the lens commands' runs, written once for any model: a program parses its flags,
 * loads its model and reads its rows of tokens into a LensCmd; then the metric of --metric,
 * cache, ablate, patch and the logit lens are one call each, and lens_cmd_end frees what the
 * command holds and gives its exit code. attograd-gpt's and attograd-translate's commands are
 * these calls (docs/lens.md shows a model of your own on them), started and ended by one
 * start and one end around the flags every lens command has (LensFlags; the program gives a
 * LensProgram: its callbacks load, rows, free). A GPT's rows are its tokens
 * (src NULL); a seq2seq model's are sentence pairs run teacher-forced (src the source + EOS,
 * ids BOS + the target, next the target + EOS).
 * lens_cmd_run takes each command from its parsed flags to its exit code (commands.c), with
 * detect's table for either kind of model.
 * Not here: a program's own flags (its input, each command's), checkpoints, how text becomes
 * tokens (the programs' callbacks), the outputs' files and tables (report.h), the detectors
 * (detect.h). Read next: cmd.c, commands.c, report.h; docs/lens.md. */
#ifndef ATTOGRAD_LENS_CMD_H
#define ATTOGRAD_LENS_CMD_H

#include "../flag/flag.h"
#include "detect.h"
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

/* ---- one set of flags, one start and one end for every program's lens commands ---- */

/* The flags every lens command has, declared once here (lens_flags_parse adds their rows); a
 * program adds only its own (its input: a translator's sentence, a GPT's prompts) */
typedef struct LensFlags {
    const char *ckpt;       /* --ckpt: LensProgram's default */
    const char *out;        /* --out: build/lens/NAME.npz */
    const char *metric;     /* --metric (LENS_FLAGS_METRIC); lens_flags_metric gives its default */
    const char *good, *bad; /* --good, --bad (LENS_FLAGS_GOOD_BAD): texts, given together */
    int threads;            /* --threads [0, 4096]: 0 the library's default */
    int pos;                /* --pos (LENS_FLAGS_POS): the logit difference's position, -1 */
    char **args;            /* the arguments without a flag (LENS_FLAGS_ARGS; malloc'd) */
    int nargs, loaded;      /* loaded: LensProgram's load was called (its free is due) */
    const char *prog, *name;
    char out_default[64];
    int ntexts; /* the texts given (FLAG_STR rows), checked by lens_cmd_start */
    const char *texts[16];
    char labels[16][32];
} LensFlags;
/* The parts of a command's table beyond --ckpt, --out and --threads */
enum {
    LENS_FLAGS_GOOD_BAD = 1, /* --good, --bad */
    LENS_FLAGS_POS = 2,      /* --pos [-1, 2^20] */
    LENS_FLAGS_METRIC = 7,   /* --metric, --good, --bad, --pos */
    LENS_FLAGS_ARGS = 8      /* arguments without a flag are kept in args (else refused) */
};
/* lens_flags_parse's and lens_cmd_start's "done before the run" (--help, a check only): exit 0 */
#define LENS_CMD_DONE FLAG_HELP

/* A command's usage: "usage: PROG name args", what, and --out's help */
typedef struct LensUsage {
    const char *name, *args, *what, *out;
} LensUsage;

/* What a program gives the start and the end of its lens commands: its name and --ckpt's
 * default, and callbacks on its own state (self) */
typedef struct LensProgram {
    const char *prog, *ckpt; /* "attograd-gpt"; --ckpt's default */
    const char *unit;        /* --good's and --bad's value in --help: "WORD", "TOKEN" */
    const char *arg_label;   /* an argument's name in a message: "the sentence" */
    int parse_only;          /* lens_cmd_start stops after the checks (a fuzz harness) */
    void *self;              /* the program's state, given to every callback */
    /* text (label names it) is valid (AG_OK), else an error; NULL: texts are not checked */
    int (*check_text)(const char *text, const char *label, const char **out);
    int (*out_dir)(const char *path); /* makes the folder of path (run_out_file_dir) */
    /* loads f->ckpt and fills c's t, lm, ro, rp and one_token (prog, name, ckpt are set) */
    int (*load)(void *self, const LensFlags *f, LensCmd *c);
    int (*rows)(void *self, const LensFlags *f, LensRows *r); /* the rows of the input flags */
    void (*free)(void *self); /* what load made (called once load was, also when it failed) */
    /* for lens_cmd_run: the flag that gives several rows in a message ("--prompts FILE"); cache:
     * refuses rows too large for the machine before the run (NULL: none); patch: the clean and
     * the corrupted rows of --clean and --corrupt (after the load) */
    const char *rows_flag;
    int (*cache_check)(void *self, const LensCmd *c, const char *hooks, int grads);
    int (*pair_rows)(void *self, const char *clean, const char *corrupt, LensRows *a, LensRows *b);
} LensProgram;

/* Parses argv[0..argc) into the table: --ckpt, input[0..n_in) (the program's), own[0..n_own)
 * (the command's; own[i].given set), the rows of parts, --out (u->out), --threads; f's
 * defaults set first (p->ckpt, build/lens/NAME.npz, --pos -1). --help prints lens_cmd_parse's
 * layout and returns LENS_CMD_DONE. AG_OK, LENS_CMD_DONE, or AG_ERR_ARG whose message ends
 * "(see PROG NAME --help)". */
int lens_flags_parse(const LensProgram *p, const LensUsage *u, int parts, LensFlags *f,
                     const Flag *input, int n_in, Flag *own, int n_own, int argc, char **argv);
/* AG_ERR_ARG "why (see PROG NAME --help)": a command line the command refuses */
int lens_flags_refuse(const LensFlags *f, const char *why);
/* --metric, or its default: logit-diff when --good and --bad are given, else loss */
const char *lens_flags_metric(const LensFlags *f);

/* The start of a command, rc lens_flags_parse's (nothing done unless AG_OK): the arguments
 * --good and --bad given together, the arguments (p->arg_label) and every text given
 * (FLAG_STR rows, named by their flag) checked,
 * LENS_CMD_DONE when p->parse_only; --out's folder made, --threads set (a warning when more
 * than the CPUs), the model loaded (p->load) and, with rows, c->r read (p->rows). AG_OK or
 * the code to give lens_cmd_finish. */
int lens_cmd_start(LensCmd *c, const LensProgram *p, LensFlags *f, int rc, int rows);
/* The end: lens_cmd_end (the message printed, the exit code; LENS_CMD_DONE: 0), then p->free
 * when the model was loaded, and f->args freed */
int lens_cmd_finish(LensCmd *c, const LensProgram *p, LensFlags *f, int rc);

/* rc again with ag_last_error() after "<ckpt>: the model's values are not finite on this input
 * ...": a file refused a value that is not finite (AG_ERR_RANGE) */
int lens_cmd_not_finite(const LensCmd *c, int rc);
/* The end of a command: the rows and the model's layout freed; 0 for AG_OK, else the message
 * printed as "prog name: why" and 2 (1 for AG_ERR_NOMEM), as src/run's RUN_EXIT_* */
int lens_cmd_end(LensCmd *c, int rc);

/* ---- each command from its flags to its exit code (commands.c) ---- */

/* detect: every head of the rows' model scored as a previous-token, duplicate-token and
 * induction head (a GPT's: lens_detect_gpt, c->lm.model a Gpt; a seq2seq model's, rows with a
 * src: its encoder's and decoder's self-attention and its cross-attention's diagonal,
 * lens_detect_seq2seq); prints the table, writes out (scores, or encoder, decoder and
 * cross_diagonal; kinds, axes, tokens, src_tokens, exclude) and its heatmap (.png beside it) */
int lens_cmd_detect(LensCmd *c, const LensDetectOptions *opt, const char *out);

typedef enum {
    LENS_CMD_CACHE,
    LENS_CMD_ABLATE,
    LENS_CMD_PATCH,
    LENS_CMD_DETECT,
    LENS_CMD_LOGIT /* the logit lens: the command "lens" */
} LensCmdKind;

/* The values of a command's own flags: the program's rows point into one (its defaults set
 * before lens_flags_parse), and what the run takes beside them */
typedef struct LensCmdArgs {
    const char *hooks;              /* cache --hooks: comma-separated globs */
    LensRunInfo info;               /* cache: the configuration in the .npz */
    const char *hook;               /* ablate, patch --hook: a glob */
    int mode;                       /* ablate --mode: a LensAblateMode (FLAG_CHOICE) */
    const char *mode_name;          /* or its name as text ("zero", "mean"), checked here */
    FlagInts positions;             /* ablate --positions (none: all) */
    const char *clean, *corrupt;    /* patch --clean, --corrupt: both required */
    int by;                         /* patch --by: a LensAxes (FLAG_CHOICE) */
    const char *by_name;            /* or its name ("position", "head", "head-position") */
    int attribution;                /* patch --attribution */
    LensDetectOptions detect;       /* detect --exclude-bos, --exclude-current */
    const char *token, *token_flag; /* lens: the token (its flag's name, "token"; NULL: --good) */
    int pos;                        /* lens --pos (-1: the last) */
} LensCmdArgs;

/* The command kind from lens_flags_parse's rc to its exit code (lens_cmd_finish's): its own
 * flags checked (ablate's mode_name, patch's --clean and --corrupt and by_name, the logit lens's
 * token or --good and --bad: "give --TOKEN_FLAG UNIT, or --good UNIT --bad UNIT"), the start
 * (with the rows but for patch, whose are p->pair_rows's), the metric of --metric (cache:
 * logit-diff with --good and --bad), then cache (after p->cache_check), ablate (a GPT's
 * --positions checked against its rows; a note on stderr for a mean over one row), patch,
 * detect or the logit lens, and the end. */
int lens_cmd_run(LensCmdKind kind, const LensProgram *p, LensCmd *c, LensFlags *f, LensCmdArgs *a,
                 int rc);

#endif
