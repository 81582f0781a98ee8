/* common.h: what the example programs (attograd-translate, attograd-gpt, attograd-induction)
 * share beyond the library: allocation that aborts when memory runs out, the message of a model
 * whose values overflow (util.c). Prefix ex_. The clock, folders, the CSV log, SIGINT and the
 * pictures come from the library's run module (src/run/run.h: run_now_s, run_fmt_time,
 * run_make_dirs, run_csv_open, run_signals_catch, run_plot_loss, run_gp_*, run_plot_heatmap).
 * Not here: anything about one program's model or data (examples/translate, examples/gpt,
 * examples/induction). Read next: util.c. */
#ifndef ATTOGRAD_EXAMPLES_COMMON_H
#define ATTOGRAD_EXAMPLES_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"

/* ---- small helpers (util.c) ---- */
/* malloc and calloc that abort (AG_CHECK) when memory runs out; 0 bytes is allowed */
void *ex_malloc(size_t bytes);
void *ex_calloc(size_t n, size_t size);
/* 1 if path names something (stat succeeds) */
int ex_file_exists(const char *path);
/* The double whose bits an int64 checkpoint entry holds (run state written before src/run) */
static inline double ex_bitsd(int64_t i) {
    double x;
    memcpy(&x, &i, sizeof x);
    return x;
}
/* AG_OK when every element of x is finite, else AG_ERR_RANGE naming the first ("NAME[i] = inf:
 * must be finite") and, when t's check mode (ag_check_finite) saw one, where the first NaN or
 * inf began ("; it began at the forward of ..."). t may be NULL. */
int ex_tensor_finite(const Tensor *x, const char *name, const Tape *t);
/* Values of a run that are not finite although the checkpoint's weights are (they overflow):
 * the last error again as "CKPT: the model's values are not finite (...): <error>", followed by
 * where the first NaN or inf appeared when the tape's check mode saw it (t may be NULL).
 * Returns rc (AG_ERR_RANGE: exit 2). attograd-translate's and attograd-gpt's commands. */
int ex_not_finite(int rc, const char *ckpt, const Tape *t);

/* The name the lens commands use for the library's heatmaps (src/run/run.h, LensHeatmapFn) */
#define ex_plot_heatmap run_plot_heatmap

#endif
