/* induction.h: the induction-head experiment (docs/induction.md). An attention-only
 * transformer (model.c: embeddings, n_layer causal attention layers on a residual stream, an
 * unembedding; no MLP, no LayerNorm) trained on sequences whose random prefix repeats
 * (main.c) on the library's run loop (train.c), with the loss on the repeated positions and
 * every head's induction and previous-token scores (src/lens/detect.h) recorded as it trains
 * (record.c), written to .npz and CSV files, an offline HTML page and its pictures (plot.c).
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

/* ---- the experiment's settings: the flags (main.c's table) ---- */
typedef struct IndOptions {
    const char *out;  /* output folder (--out); each model's run in OUT/<name>/ */
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
/* inputs idx (B, T) and targets tgt (B, T) from sequences seq (B, T + 1) */
void ind_split_batch(const int *seq, int B, int T, int *idx, int *tgt);

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
    double seconds;       /* training time (of this process's part, when resumed) */
} IndRecord;

/* record.c: the records of one model (rec zeroed or started before) */
void ind_record_start(IndRecord *rec, const char *name, int n_layer, int NH, int T, int B_eval);
/* One record of step `step`: the model on the evaluation batch eval_idx, eval_tgt (B_eval, T)
 * with no gradient, its losses and head scores; first: also pattern_first. v (NULL: none):
 * the validation metrics: the loss of every position, of the predictable ones, of the others. */
void ind_record(IndRecord *rec, AttnOnly *m, Tape *t, const IndOptions *o, const int *eval_idx,
                const int *eval_tgt, const int *eval_prefix, int64_t step, double train_loss,
                int first, double *v);
/* pattern_last: the model's patterns on the evaluation batch eval_idx (B_eval, T) */
void ind_record_patterns(IndRecord *rec, AttnOnly *m, Tape *t, const int *eval_idx, int B_eval);
/* the records as bytes (allocated, *len of them) and back (a checkpoint's meta.extra): AG_OK,
 * or AG_ERR_FORMAT when they are not records of this model up to step last_step */
void *ind_record_bytes(const IndRecord *rec, size_t *len);
int ind_record_load(IndRecord *rec, const void *bytes, size_t len, int64_t last_step);
void ind_record_free(IndRecord *rec);
/* the highest score of the last record: its layer and head */
double ind_best_head(const IndRecord *rec, const double *scores, int *layer, int *head);

/* ---- one model's training run (train.c): the library's run loop (src/run/run.h) in
 * OUT/<name>/ (last.npz, best.npz, log.csv, loss.png; --resume, --shards, SIGINT) ---- */
#define IND_N_FLAGS 8 /* the experiment's rows before the run's */
typedef struct IndRun {
    const char *name; /* "two_layer", "one_layer" */
    IndOptions o;     /* the flags as the run ends (o.out: --out) */
    AttnOnlyConfig cfg;
    RunConfig rc;
    RunModel model;
    RunLoop *r;
    Flag fl[IND_N_FLAGS + RUN_N_FLAGS];
    int n_fl, layers, fresh_if_missing;
    char *out; /* OUT/<name> */
    AttnOnly m;
    IndRecord rec;
    int64_t data[4]; /* the training batches' Rng state (meta.run.model.data0..3) */
    int *seq, *pl, *idx, *tgt, *eval_tokens, *eval_prefix, *eidx, *etgt;
    int64_t step;
    double loss_sum; /* the step's shards' losses, and their count */
    int loss_n;
    void *extra; /* the records as bytes, saved with every checkpoint */
    Arena *arena;
    Tape *tape; /* records outside validation */
} IndRun;

/* A run of the n_layer model `name`, its flags' defaults those of like (NULL: the experiment's
 * defaults), then its table. */
void ind_run_init(IndRun *x, const char *name, int n_layer, const IndRun *like);
/* run_main on argv: trains (or resumes) the model, then records its patterns; the exit code */
int ind_run_main(IndRun *x, int argc, char **argv);
void ind_run_free(IndRun *x);

/* files.c: induction.npz, curves.csv, heads.csv, positions.csv in o->out */
int ind_write_files(const IndOptions *o, const IndRecord *recs, int n_recs, const int *eval_tokens,
                    const int *eval_prefix);
/* plot.c: induction.html (the curves, the loss per position, the patterns after training and
 * both runs' log.csv in one offline page: src/view) and, with gnuplot, loss.png, scores.png,
 * loss_positions.png, patterns_<name>.png. Appends ", NAME" to drawn (a string of size n) for
 * the page and each picture; a picture skipped or failed is said on stderr. AG_OK, or the
 * page's error (naming its path). */
int ind_plot(const IndOptions *o, const IndRecord *recs, int n_recs, char *drawn, size_t n);

#endif
