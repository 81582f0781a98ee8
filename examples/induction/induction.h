/* induction.h: the induction-head experiment (docs/induction.md). An attention-only
 * transformer (model.c: embeddings, n_layer causal attention layers on a residual stream, an
 * unembedding; no MLP, no LayerNorm) trained on sequences whose random prefix repeats
 * (main.c), with the loss on the repeated positions and every head's induction and
 * previous-token scores (src/lens/detect.h) recorded as it trains (record.c), written to .npz
 * and CSV files and drawn by gnuplot (plot.c).
 * Not here: the detectors themselves (src/lens/detect.c). Read next: model.c. */
#ifndef AG_INDUCTION_H
#define AG_INDUCTION_H

#include <stdint.h>
#include <stdio.h>

#include "attograd.h"

#define IND_MAX_LAYERS 4

/* ---- the model (model.c): it reads like nanoGPT's model.py without the MLP and the norms ---- */
typedef struct AttnOnlyConfig {
    int vocab, block; /* tokens, context */
    int n_layer, n_head, d_model;
} AttnOnlyConfig;

typedef struct AttnOnly {
    AttnOnlyConfig cfg;
    ParamList params;
    Embedding wte;                           /* wte.weight (vocab, d_model) */
    PositionalEncoding wpe;                  /* wpe.weight (block, d_model), learned */
    MultiHeadAttention attn[IND_MAX_LAYERS]; /* blocks.<l>.attn.in_proj_weight, out_proj, ... */
    Linear unembed;                          /* unembed.weight (vocab, d_model), no bias */
} AttnOnly;

void ind_model_init(AttnOnly *m, Arena *a, Rng *rng, const AttnOnlyConfig *c);
/* idx (B, T) -> logits (B, T, vocab); m->attn[l].last_probs: layer l's (B, NH, T, T) */
Tensor *ind_model_forward(Tape *t, AttnOnly *m, const int *idx, int B, int T);

/* ---- the run ---- */
typedef struct IndOptions {
    const char *out;  /* output folder */
    int steps, every; /* training steps; a record every `every` steps (and at 0 and the end) */
    int batch, eval_batch;
    double lr, weight_decay;
    uint64_t seed;
    int vocab, ctx, d_model, n_head;
    int min_prefix, max_prefix; /* the repeated prefix's length, drawn in [min, max] */
    int control;                /* 1: also the 1-layer control */
    int quiet;
} IndOptions;

/* Sequences of T + 1 tokens: a prefix of L tokens drawn uniformly from the vocabulary, L drawn
 * in [min_prefix, max_prefix], repeated to the end. tokens (B, T + 1); prefix_len (B). */
void ind_make_batch(Rng *r, const IndOptions *o, int B, int *tokens, int *prefix_len);

/* What one model's run recorded: R records of the evaluation batch. */
typedef struct IndRecord {
    const char *name; /* "two_layer", "one_layer" */
    int n_layer, NH, T, R, cap;
    int64_t *step;        /* (R) */
    double *train_loss;   /* (R) the training batch's loss at that step (NaN at step 0) */
    double *loss_pred;    /* (R) mean loss on the predictable (repeated) positions */
    double *loss_other;   /* (R) mean loss on the other positions */
    double *loss_pos;     /* (R, T) mean loss per position */
    double *induction;    /* (R, n_layer, NH) induction scores */
    double *previous;     /* (R, n_layer, NH) previous-token scores */
    float *pattern_first; /* (n_layer, NH, T, T) of evaluation sequence 0 before training */
    float *pattern_last;  /* (n_layer, B_eval, NH, T, T) after training: every sequence */
    double seconds;       /* training time */
} IndRecord;

/* record.c: runs one model (n_layer layers) through training, recording as it goes */
int ind_run(const IndOptions *o, int n_layer, const int *eval_tokens, const int *eval_prefix,
            IndRecord *rec);
void ind_record_free(IndRecord *rec);
/* the first record step whose predictable-position loss is below x, or -1 */
int64_t ind_first_below(const IndRecord *rec, double x);
/* the highest score of the last record: its layer and head */
double ind_best_head(const IndRecord *rec, const double *scores, int *layer, int *head);

/* files.c: induction.npz, curves.csv, heads.csv, positions.csv in o->out */
int ind_write_files(const IndOptions *o, const IndRecord *recs, int n_recs, const int *eval_tokens,
                    const int *eval_prefix);
/* plot.c: loss.png, scores.png, loss_positions.png, patterns_<name>.png (gnuplot; skipped
 * without it). Returns the number of pictures drawn and appends ", NAME.png" to drawn (a string
 * of size n) for each; a skip or failure is said on stderr. */
int ind_plot(const IndOptions *o, const IndRecord *recs, int n_recs, const int *eval_tokens,
             char *drawn, size_t n);

#endif
