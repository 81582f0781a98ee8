/* lens.h: interpretability on the hook points of ../nn/hooks.h, with TransformerLens's names:
 * a cache of activations (and of a metric's gradients with respect to them) written to one
 * .npz, zero and mean ablation of heads and positions, activation patching over (point,
 * position), (point, head) and (point, head, position) with a metric (a logit difference or
 * the loss), and attribution patching (the first-order estimate (clean - corrupted) . d metric /
 * d activation). docs/lens.md has the names, the shapes and a worked example with numpy.
 *   LensCache c; lens_cache_init(&c, 0);
 *   NnHooks h; nn_hooks_init(&h, m.cfg.n_layer);
 *   nn_hooks_add(&h, "blocks.*.attn.hook_pattern", lens_cache_hook, &c);
 *   nn_gpt_forward_hooked(tape, &m, ids, B, T, NULL, &h);   // c holds every layer's pattern
 *   lens_cache_save(&c, "cache.npz", &(LensRunInfo){.tokens = ids, .B = B, .T = T});
 * The sweeps run any model through a LensModel (lens_gpt, lens_seq2seq).
 * Not here: the hook points and their calls (../nn/hooks.c), the models (../nn/gpt.c,
 * transformer.c), what the programs' commands write from the sweeps (report.h).
 * Read next: lens.c, report.h. */
#ifndef ATTOGRAD_LENS_H
#define ATTOGRAD_LENS_H

#include "../io/npz.h"
#include "../nn/gpt.h"

/* ---- cache ---- */

/* One activation as a hook saw it: its point's name, its shape, a copy of its values (and, when
 * the cache takes gradients, d metric / d activation after lens_cache_take_grads). */
typedef struct LensAct {
    NnHookPoint at;
    int ndim, shape[AG_MAX_DIMS];
    size_t size;
    Real *data;
    Real *grad;  /* NULL until lens_cache_take_grads */
    Tensor *tap; /* with grads: the zero leaf added to the activation (in the step arena) */
} LensAct;

typedef struct LensCache {
    int with_grads; /* 1: the hook also adds a zero leaf, whose gradient is the activation's */
    int n, cap;
    LensAct *acts; /* in the order the forward met them */
} LensCache;

void lens_cache_init(LensCache *c, int with_grads);
void lens_cache_free(LensCache *c);
/* The activation called name, or NULL */
const LensAct *lens_cache_get(const LensCache *c, const char *name);
/* The hook (ctx: a LensCache): copies the activation (a second forward replaces it); with
 * grads, replaces x by x + 0 with a leaf 0 (the same values) whose gradient is x's. */
int lens_cache_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx);
/* After ag_backward of a metric: copies each tapped activation's gradient into its grad */
void lens_cache_take_grads(LensCache *c);
/* A flag's comma-separated list of patterns ("blocks.0.*,hook_embed"): fn at the points of each
 * (nn_hooks_add). Strict: an empty list or an empty element ("", ",", "*,", "a,,b") and a
 * pattern that matches nothing are AG_ERR_ARG naming the flag and the value
 * ("--hooks '*,': pattern 2 is empty"). Returns the points added, or the error. */
int lens_hooks_add_list(NnHooks *h, const char *list, const char *flag, NnHookFn fn, void *ctx);

/* What was run: tokens (B, T) (a seq2seq model: the decoder's input); token_strs (B*T strings,
 * may be NULL); the model's config (may be NULL). A seq2seq model's run also has its source
 * src_tokens (B, S) with src_token_strs (may be NULL) and seq2seq_cfg. */
typedef struct LensRunInfo {
    const int *tokens;
    int B, T;
    const char *const *token_strs;
    const GptConfig *cfg;
    const int *src_tokens;
    int S;
    const char *const *src_token_strs;
    const Seq2SeqConfig *seq2seq_cfg;
} LensRunInfo;
/* Writes the cache to path: every activation under its name ("blocks.0.attn.hook_pattern"),
 * its gradient as "<name>.grad", "tokens" (int32 (B, T)), "token_strs" (the strings as JSON
 * in bytes: json.loads(f["token_strs"].tobytes())) and "config" (the configuration as JSON in
 * bytes); for a seq2seq model also "src_tokens" (int32 (B, S)) and "src_token_strs". AG_OK or
 * npz_write's error naming the path. */
int lens_cache_save(const LensCache *c, const char *path, const LensRunInfo *run);

/* ---- ablation and patching: replacing some elements of an activation ----
 * The elements chosen are those whose head (on a point with a head axis) is in heads and whose
 * query position is in positions; n_heads 0 means every head, n_positions 0 every position.
 * A replacement keeps the masked scores of hook_attn_scores at -inf. */
typedef struct LensSelect {
    const int *heads;
    int n_heads;
    const int *positions;
    int n_positions;
} LensSelect;

typedef enum { LENS_ZERO = 0, LENS_MEAN = 1 } LensAblateMode;
/* ctx of lens_ablate_hook: the chosen elements become 0, or their mean over the batch in
 * means (a cache of the same point over a reference batch, any batch size) */
typedef struct LensAblation {
    LensAblateMode mode;
    LensSelect sel;
    const LensCache *means;
} LensAblation;
int lens_ablate_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx);

/* ctx of lens_patch_hook: the chosen elements take the values of the same point in src (a
 * cache of another run of the same shape: the clean run) */
typedef struct LensPatch {
    const LensCache *src;
    LensSelect sel;
} LensPatch;
int lens_patch_hook(Tape *t, Tensor **x, const NnHookPoint *at, void *ctx);

/* ---- metrics ---- */
typedef enum { LENS_LOGIT_DIFF = 0, LENS_LOSS = 1 } LensMetricKind;
/* LENS_LOGIT_DIFF: the mean over the batch of logits[b, pos, good[b]] - logits[b, pos, bad[b]]
 * (pos -1: the last position); LENS_LOSS: the mean cross-entropy against targets (B, T) */
typedef struct LensMetric {
    LensMetricKind kind;
    int pos;
    const int *good, *bad; /* (B) */
    const int *targets;    /* (B, T) */
} LensMetric;
/* logits (B, T, V) -> the metric, a scalar on the tape */
Tensor *lens_metric(Tape *t, const LensMetric *mt, Tensor *logits);
/* A metric with the arrays it owns: good and bad (B) for a logit difference, targets (B, T)
 * where the caller made them (malloc'd; lens_owned_metric_free frees them); any may be NULL. */
typedef struct LensOwnedMetric {
    LensMetric mt;
    int *good, *bad, *targets;
} LensOwnedMetric;
/* ctx's id of the token text, which must be exactly one token; errors name flag */
typedef int (*LensTokenFn)(const void *ctx, const char *text, const char *flag, int *id);
/* The lens commands' --metric when it is not "loss" (which the caller builds): kind
 * "logit-diff", the tokens good minus bad (--good, --bad: token(ctx, ...) finds each id) at
 * position pos of T (-1: the last) in every one of B rows, into m (zeroed first). AG_OK, or
 * AG_ERR_ARG naming the flag: a kind that is neither, --good or --bad missing, --pos outside
 * [-1, T), a token that token() refuses (its message). */
int lens_logit_diff_metric(const char *kind, const char *good, const char *bad, int pos, int B,
                           int T, LensTokenFn token, const void *ctx, LensOwnedMetric *m);
void lens_owned_metric_free(LensOwnedMetric *m); /* m zeroed; NULL arrays are fine */

/* ---- the model a sweep runs ---- */
/* forward: one run of input with the hooks h (h's layout is the model's), as in evaluation (no
 * dropout) -> logits (B, T, V), or NULL when a hook failed (ag_last_error() says why); layout:
 * hooks initialised for the model, none added; n_heads: its heads; params: zeroed after an
 * attribution's backward. */
typedef struct LensModel {
    Tensor *(*forward)(Tape *t, void *model, const void *input, NnHooks *h);
    void *model;
    NnHooks layout;
    int n_heads;
    ParamList *params;
} LensModel;
/* A GPT's input: tokens (B, T) */
typedef struct LensTokens {
    const int *ids;
    int B, T;
} LensTokens;
/* A seq2seq model's input: the source (B, S) and the decoder's input (B, T) */
typedef struct LensPair {
    const int *src, *tgt;
    int B, S, T;
} LensPair;
LensModel lens_gpt(Gpt *m);         /* input: a LensTokens */
LensModel lens_seq2seq(Seq2Seq *m); /* input: a LensPair */

/* ---- patching sweeps ---- */
typedef enum { LENS_BY_POS = 0, LENS_BY_HEAD = 1, LENS_BY_HEAD_POS = 2 } LensAxes;
/* values (n_points, T), (n_points, NH) or (n_points, NH, T): the metric of the corrupted run
 * with one (point, position / head / head and position) patched from the clean run (or, for
 * attribution, its first-order estimate); clean and corrupted: the two runs' metrics. */
typedef struct LensSweep {
    LensAxes axes;
    int n_points, n_heads, T;
    NnHookPoint *points;
    double *values;
    double clean, corrupted;
    int attribution; /* 1: lens_attribute made it */
} LensSweep;
/* Runs clean (B, T) and corrupt (B, T) tokens, then for every point matching pattern and
 * every index of axes the corrupted run with that part patched. The points must have a head
 * axis for LENS_BY_HEAD*, and none may be read-only (hook_scale). AG_OK, or AG_ERR_ARG (no point
 * matches, no head axis, a read-only point, a hook's
 * failure). Resets the tape t; leaves the parameters' gradients zero. */
int lens_patch_sweep(Tape *t, Gpt *m, const int *clean, const int *corrupt, int B, int T,
                     const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out);
/* The same table from attribution patching: one clean run, one corrupted run with its
 * backward; value = sum over the patched elements of (clean - corrupted) * d metric / d act. */
int lens_attribute(Tape *t, Gpt *m, const int *clean, const int *corrupt, int B, int T,
                   const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out);
/* The same two on any model: clean and corrupt are its inputs (LensTokens, LensPair), of the
 * same shapes. The table's positions are those of the points' position axis (T: the points
 * must all have as many; a seq2seq model's encoder points have the source's). */
int lens_patch_sweep_model(Tape *t, const LensModel *lm, const void *clean, const void *corrupt,
                           const char *pattern, LensAxes axes, const LensMetric *mt,
                           LensSweep *out);
int lens_attribute_model(Tape *t, const LensModel *lm, const void *clean, const void *corrupt,
                         const char *pattern, LensAxes axes, const LensMetric *mt, LensSweep *out);
void lens_sweep_free(LensSweep *s);

/* ---- ablation sweeps ---- */
/* values (n_points, n_heads) (or (n_points, 1) for points without heads): the metric of input
 * with one head of one point ablated (each point alone when they have no heads), at
 * positions (n_positions 0: all); mean ablation takes the mean over input's batch; base: the
 * metric with nothing ablated. */
typedef struct LensAblateTable {
    int n_points, n_heads; /* n_heads 0: the points have no heads */
    NnHookPoint *points;
    double *values;
    double base;
} LensAblateTable;
/* Every point of pattern must have heads, or none; none read-only. AG_OK, or AG_ERR_ARG (no
 * point matches, a mix, a position outside a point's, a hook's failure). Resets the tape. */
int lens_ablate_sweep_model(Tape *t, const LensModel *lm, const void *input, const char *pattern,
                            LensAblateMode mode, const int *positions, int n_positions,
                            const LensMetric *mt, LensAblateTable *out);
void lens_ablate_table_free(LensAblateTable *a);
/* "values" with its axes named in "axes" ("point,position", "point,head",
 * "point,head,position"), "points" (the names as JSON in bytes), "clean", "corrupted" */
int lens_sweep_save(const LensSweep *s, const char *path);

#endif
