/* report.h: the outputs of the lens commands, written once for any model. A program that has
 * read its checkpoint and its rows gives its model as a LensModel (lens.h) and the texts of
 * its tokens through a callback; these functions run the cache's forward pass, write the .npz
 * of cache, ablate, patch and lens, print their tables on stdout and draw each heatmap beside
 * the .npz (out.npz -> out.png, out_lens.png) with the program's heatmap drawer. attograd-gpt's
 * and attograd-translate's cache, ablate, patch and lens are these calls; a model of your own
 * gets the same files by filling a LensModel (lens.h) and a LensReport:
 *   LensReport rp = {"my-prog", my_heatmap, my_token_text, &my_vocab};
 *   LensAblateTable a;   // lens_ablate_sweep_model(t, &lm, &in, "blocks.*.attn.hook_z", ...)
 *   lens_report_ablate(&rp, &a, LENS_ZERO, "loss", "build/ablate.npz");
 * Seq2seq models (points of NN_HOOK_ENCODER or NN_HOOK_DECODER) get wider name columns and
 * their logit lens's texts say "decoder position"; everything else is the same.
 * Not here: command lines and checkpoints (the programs: examples/gpt/lens.c,
 * examples/translate/lens.c), the sweeps (lens.c), the lens's numbers (logit.c), the head
 * detectors' tables (they differ by model: the programs).
 * Read next: report.c; docs/lens.md has each file's names and shapes. */
#ifndef ATTOGRAD_LENS_REPORT_H
#define ATTOGRAD_LENS_REPORT_H

#include "lens.h"
#include "logit.h"

/* Draws values v (rows, cols), row 0 at the top, with tick labels ylab (rows) and xlab (cols)
 * into png: range 0 a signed scale on the largest magnitude, range > 0 [0, range]. Returns
 * RUN_PLOT_DRAWN (0), RUN_PLOT_SKIPPED (1, the drawer is not installed) or RUN_PLOT_FAILED (2,
 * ag_last_error() says why): src/run's codes. */
typedef int (*LensHeatmapFn)(const char *png, const char *title, const double *v, int rows,
                             int cols, char **ylab, char **xlab, double range);
/* The text of token id (malloc'd) in the vocabulary of the stack's tokens (NN_HOOK_ENCODER: a
 * seq2seq model's source; else the decoder's or the GPT's); label 1: for a picture's ticks
 * (newline and tab may be shown as \n, \t), 0: as it is (a cache's token_strs). */
typedef char *(*LensTokenTextFn)(const void *ctx, NnHookStack stack, int id, int label);

typedef struct LensReport {
    const char *prog;           /* starts a failed picture's message on stderr ("attograd-gpt") */
    LensHeatmapFn heatmap;      /* NULL: no pictures */
    LensTokenTextFn token_text; /* NULL: tokens shown as their ids */
    const void *ctx;            /* token_text's */
} LensReport;

/* ---- labels and paths ---- */
/* path npz with its ".npz" (if any) replaced by suffix (".png", "_lens.png"), malloc'd */
char *lens_path_swap(const char *npz, const char *suffix);
/* labels (malloc'd, n of them): "0", "1", ..; a point's name, or "name h<k>" for each of heads
 * (heads 0: one per point) */
char **lens_labels_numbers(int n);
char **lens_labels_points(const NnHookPoint *pts, int n, int heads);
/* the text of every one of ids[0..n) (rp's token_text with label; a cache's token_strs: 0),
 * malloc'd */
char **lens_labels_tokens(const LensReport *rp, NnHookStack stack, const int *ids, int n,
                          int label);
void lens_labels_free(char **lab, int n); /* lab NULL: a no-op */

/* Draws v (rows, cols) into out with ".npz" replaced by suffix and prints "heatmap: PNG" (or
 * why it was skipped; a failure on stderr after "prog: "); frees yl (rows) and xl (cols).
 * Nothing drawn without rp->heatmap. Returns the drawer's code (RUN_PLOT_SKIPPED without one). */
int lens_report_heatmap(const LensReport *rp, const char *out, const char *suffix,
                        const char *title, const double *v, int rows, int cols, char **yl,
                        char **xl, double range);

/* ---- the commands' outputs ---- */
/* cache: runs lm on input once with the hooks h (the caller added lens_cache_hook with c to
 * them, lens_hooks_add_list), as in evaluation; with a metric mt (c made with gradients) also
 * its backward, copying each activation's gradient (lens_cache_take_grads) and zeroing the
 * parameters' gradients. *logits (may be NULL): the run's (B, T, V), in t's arena. AG_OK, or
 * AG_ERR_ARG when a hook failed. Resets the tape t. */
int lens_cache_run(Tape *t, const LensModel *lm, const void *input, NnHooks *h, LensCache *c,
                   const LensMetric *mt, Tensor **logits);

/* ablate: writes a's table to out ("values" (point, head) or (point, 1), "base", "axes"
 * ("point,head" or "point,none"), "metric", "mode" ("zero", "mean"), "points" (JSON)), prints
 * it as the change from base, and draws it. AG_OK, or npz_write's error (AG_ERR_RANGE: a value
 * that is not finite, nothing written). */
int lens_report_ablate(const LensReport *rp, const LensAblateTable *a, LensAblateMode mode,
                       const char *metric, const char *out);
/* patch: writes s (lens_sweep_save) to out, prints its line and draws the change from the
 * corrupted run (attribution: the estimate itself); the position ticks are the tokens of the
 * corrupted run: src_ids (S) when the points are an encoder's, else ids (T). AG_OK or
 * lens_sweep_save's error. */
int lens_report_patch(const LensReport *rp, const LensSweep *s, const char *metric, const int *ids,
                      const int *src_ids, const char *out);
/* lens: writes ll to out (lens_logit_save; ids (B, T) the stream's tokens, good and bad (B):
 * bad NULL for one token), prints the lens's table at ll->pos and the attribution's parts
 * (mean over the rows), and draws the attribution (block, part) into out.png and the lens
 * (stage, position) into out_lens.png. AG_OK or lens_logit_save's error. */
int lens_report_logit(const LensReport *rp, const LensLogit *ll, const int *ids, const int *good,
                      const int *bad, const char *out);

#endif
