/* gpt_cli.h: attograd-gpt, a program that trains a GPT (src/nn/gpt.h) on a text from scratch:
 * `prepare` (text -> tokenizer + llm.c token shards), `train` (nanoGPT's loop: AdamW, warmup
 * and cosine, clipping, validation, checkpoints, exact resume), `sample` (streamed generation)
 * and `eval` (valid loss, bits per byte); the lens commands `cache`, `ablate`, `patch`
 * (lens.c), `detect`, `lens` and `export` (readout.c), `view` (view.c); their files and
 * tables are src/lens/report.h's. docs/gpt.md is the user's guide.
 * What the files share: how a command reads its flags (src/flag), the exit codes (src/run's
 * RUN_EXIT_*), the checkpoint layout. From examples/common (common.h): allocation, the message
 * of a model whose values overflow; from src/run: folders, the clock, the plots.
 * Not here: the model (src/nn/gpt.c), tokenizers and shards (src/text), loading and saving a
 * model with its tokenizer (src/hf's hf_model_load, hf_model_save). Read next: main.c. */
#ifndef ATTOGRAD_GPT_CLI_H
#define ATTOGRAD_GPT_CLI_H

#include <stdint.h>

#include "../common/common.h" /* ex_malloc, ex_not_finite, ex_bitsd */
#include "attograd.h"

#define GP_PROG "attograd-gpt"

/* ---- flags: a command reads argv[2..argc) with src/flag's flag_parse_cmd (GP_PROG, its name,
 * "[flags]", what it does): AG_OK, FLAG_HELP (the usage printed) or AG_ERR_ARG naming the flag */

/* ---- the commands: each returns an exit code (RUN_EXIT_*) ---- */
int gp_prepare(int argc, char **argv);
int gp_train(int argc, char **argv);
int gp_sample(int argc, char **argv);
int gp_eval(int argc, char **argv);
int gp_cache(int argc, char **argv); /* lens.c: the lens of src/lens on a checkpoint */
int gp_ablate(int argc, char **argv);
int gp_patch(int argc, char **argv);
int gp_detect(int argc, char **argv); /* readout.c: head detectors, logit lens, export */
int gp_lens(int argc, char **argv);
int gp_export(int argc, char **argv);
int gp_view(int argc, char **argv); /* view.c: one HTML page (src/view) */

/* ---- checkpoints (train.c writes them on the run loop, docs/run.md) ----
 * A checkpoint holds the GPT (meta.config.* from nn_gpt_ckpt_config), AdamW's state and step
 * (its schedule included), the dropout RNG, the tokenizer's saved form (meta.extra) and the
 * run's state by name (meta.run.*); one written before the run loop holds data.position
 * instead (train.c reads it). */

/* ---- what the lens commands share (lens.c) ---- */

/* rows from --prompt (one row) or --prompts FILE (a row per line, all of one length, each at
 * most block_size tokens); errors name the flag or the file and line */
int gp_read_rows(const HfModel *g, const char *prompt, const char *file, LensRows *r);
/* What a lens command holds (src/lens/cmd.h's LensProgram's self): the input's flags (a.prompt,
 * a.prompts; gp_view's also a.ckpt, a.out, a.threads), the model (dropout 0), its
 * configuration as trained, the library's command (the rows, a tape, the model, its outputs) */
typedef struct GpLensFlags {
    const char *ckpt, *prompt, *prompts, *out;
    int threads;
} GpLensFlags;
typedef struct GpLens {
    GpLensFlags a;
    HfModel g;
    GptConfig cfg;
    LensCmd c;
    Arena *step;
    LensFlags f;   /* the common flags (gp_lens_parse) */
    LensProgram p; /* gp_lens_program's (gp_lens_parse) */
    /* cache's --max-bytes; detect's rows without prompts (generate): random tokens repeated */
    double max_bytes;
    int generate, repeat, length, batch;
    int64_t seed;
} GpLens;
/* where the lens commands read a model by default: what `make gpt` writes */
#define GP_DEFAULT_CKPT "build/gpt/run/best.npz"
/* the LensProgram on l: loads --ckpt (or --model) and makes the tape, reads the rows of
 * --prompt or --prompts (detect's generate: random tokens repeated), checks a cache's size
 * (max_bytes), reads patch's --clean and --corrupt, frees the model */
LensProgram gp_lens_program(GpLens *l);
/* lens_flags_parse into l->f with attograd-gpt's input flags: --model, and --prompt and
 * --prompts with parts & GP_LENS_ROWS; sets l->p; argv[0..2): the program and the command */
enum { GP_LENS_ROWS = 1 << 8 };
int gp_lens_parse(GpLens *l, const LensUsage *u, int parts, Flag *own, int n_own, int argc,
                  char **argv);
/* gp_view's start (lens_cmd_start on a.ckpt, a.threads, the rows with parts & GP_LENS_ROWS;
 * --out's folder not made) and end (lens_cmd_finish's exit code; cmd names the command) */
int gp_lens_start(GpLens *l, int rc, int parts);
int gp_lens_end(GpLens *l, int rc, const char *cmd);
/* the checkpoint's model with dropout 0 (the runs are deterministic); *cfg: as trained */
int gp_lens_load(HfModel *g, const char *ckpt, GptConfig *cfg);
/* the last error again, after "prefix: " */
int gp_refail(int rc, const char *prefix);

#endif
