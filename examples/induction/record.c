/* record.c: the data (random prefixes repeated to fill the context), the training loop (AdamW
 * on the next-token loss of every position) and what is recorded every few steps on a fixed
 * evaluation batch: the loss on the predictable positions (those whose next token repeats an
 * earlier one: the prefix has been seen), the loss on the others, the loss per position, and
 * every head's induction and previous-token scores (lens_detect_heads, TransformerLens's
 * definitions, no exclusions). Not here: the files and pictures (files.c, plot.c). Read next:
 * files.c. */
#include "induction.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "../common/common.h" /* ex_malloc */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ind_make_batch(Rng *r, const IndOptions *o, int B, int *tokens, int *prefix_len) {
    int T1 = o->ctx + 1;
    for (int b = 0; b < B; b++) {
        int L = o->min_prefix + (int)rng_below(r, (uint64_t)(o->max_prefix - o->min_prefix + 1));
        int *row = tokens + (size_t)b * T1;
        for (int i = 0; i < L; i++) row[i] = (int)rng_below(r, (uint64_t)o->vocab);
        for (int i = L; i < T1; i++) row[i] = row[i - L];
        prefix_len[b] = L;
    }
}

/* inputs (B, T) and targets (B, T) from sequences (B, T + 1) */
static void split_batch(const int *seq, int B, int T, int *idx, int *tgt) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            idx[b * T + t] = seq[b * (T + 1) + t];
            tgt[b * T + t] = seq[b * (T + 1) + t + 1];
        }
}

static void record_grow(IndRecord *rec) {
    if (rec->R < rec->cap) return;
    int cap = rec->cap ? 2 * rec->cap : 64, LH = rec->n_layer * rec->NH;
    rec->step = realloc(rec->step, (size_t)cap * sizeof *rec->step);
    rec->train_loss = realloc(rec->train_loss, (size_t)cap * sizeof(double));
    rec->loss_pred = realloc(rec->loss_pred, (size_t)cap * sizeof(double));
    rec->loss_other = realloc(rec->loss_other, (size_t)cap * sizeof(double));
    rec->loss_pos = realloc(rec->loss_pos, (size_t)cap * rec->T * sizeof(double));
    rec->induction = realloc(rec->induction, (size_t)cap * LH * sizeof(double));
    rec->previous = realloc(rec->previous, (size_t)cap * LH * sizeof(double));
    if (!rec->step || !rec->train_loss || !rec->loss_pred || !rec->loss_other || !rec->loss_pos ||
        !rec->induction || !rec->previous) {
        fprintf(stderr, "attograd-induction: out of memory for %d records\n", cap);
        abort();
    }
    rec->cap = cap;
}

/* One record: the model on the evaluation batch (no gradient), its losses and head scores. */
static void record(IndRecord *rec, AttnOnly *m, Tape *t, const IndOptions *o, const int *eval_idx,
                   const int *eval_tgt, const int *eval_prefix, int64_t step, double train_loss,
                   int first, int last) {
    int B = o->eval_batch, T = o->ctx, V = o->vocab, NH = rec->NH;
    record_grow(rec);
    int r = rec->R++;
    rec->step[r] = step;
    rec->train_loss[r] = train_loss;
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    Tensor *logits = ind_model_forward(t, m, eval_idx, B, T); /* (B, T, V) */
    ag_no_grad(t, was);
    double pred = 0, other = 0;
    int n_pred = 0, n_other = 0;
    double *pos = rec->loss_pos + (size_t)r * T;
    for (int i = 0; i < T; i++) pos[i] = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            const Real *z = logits->data + ((size_t)b * T + i) * V;
            double mx = z[0], s = 0;
            for (int v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
            for (int v = 0; v < V; v++) s += exp((double)z[v] - mx);
            double ce = log(s) + mx - (double)z[eval_tgt[b * T + i]];
            pos[i] += ce / B;
            /* position i predicts token i + 1, a repeat when i + 1 >= the prefix's length */
            if (i + 1 >= eval_prefix[b])
                pred += ce, n_pred++;
            else
                other += ce, n_other++;
        }
    rec->loss_pred[r] = n_pred ? pred / n_pred : NAN;
    rec->loss_other[r] = n_other ? other / n_other : NAN;
    for (int l = 0; l < rec->n_layer; l++) {
        const Tensor *P = m->attn[l].last_probs; /* (B, NH, T, T) */
        double *ind = rec->induction + ((size_t)r * rec->n_layer + l) * NH;
        double *prev = rec->previous + ((size_t)r * rec->n_layer + l) * NH;
        lens_detect_heads(P, eval_idx, B, T, LENS_INDUCTION, NULL, ind);
        lens_detect_heads(P, eval_idx, B, T, LENS_PREVIOUS_TOKEN, NULL, prev);
        size_t TT = (size_t)T * T;
        if (first)
            for (size_t k = 0; k < NH * TT; k++)
                rec->pattern_first[l * NH * TT + k] = (float)P->data[k]; /* sequence 0 */
        if (last)
            for (size_t k = 0; k < (size_t)B * NH * TT; k++)
                rec->pattern_last[(size_t)l * B * NH * TT + k] = (float)P->data[k];
    }
    ag_tape_reset(t);
}

int ind_run(const IndOptions *o, int n_layer, const int *eval_tokens, const int *eval_prefix,
            IndRecord *rec) {
    int T = o->ctx, B = o->batch, Be = o->eval_batch;
    *rec = (IndRecord){.name = n_layer == 1 ? "one_layer" : "two_layer",
                       .n_layer = n_layer,
                       .NH = o->n_head,
                       .T = T};
    size_t TT = (size_t)T * T;
    rec->pattern_first = ex_malloc((size_t)n_layer * o->n_head * TT * sizeof(float));
    rec->pattern_last = ex_malloc((size_t)n_layer * Be * o->n_head * TT * sizeof(float));
    Arena *params = arena_new("params", 0), *step = arena_new("step", 0);
    Rng rng;
    rng_seed(&rng, o->seed); /* the same initial embeddings and batches for both models */
    AttnOnly m;
    ind_model_init(&m, params, &rng,
                   &(AttnOnlyConfig){.vocab = o->vocab,
                                     .block = T,
                                     .n_layer = n_layer,
                                     .n_head = o->n_head,
                                     .d_model = o->d_model});
    OptimConfig oc = optim_defaults(OPTIM_ADAMW);
    oc.lr = o->lr, oc.weight_decay = o->weight_decay;
    Optimizer *opt = optim_new(params, &m.params, &oc);
    Tape *t = ag_tape_new(step);
    int *seq = ex_malloc((size_t)B * (T + 1) * sizeof(int)),
        *pl = ex_malloc((size_t)B * sizeof(int));
    int *idx = ex_malloc((size_t)B * T * sizeof(int)),
        *tgt = ex_malloc((size_t)B * T * sizeof(int));
    int *eidx = ex_malloc((size_t)Be * T * sizeof(int)),
        *etgt = ex_malloc((size_t)Be * T * sizeof(int));
    split_batch(eval_tokens, Be, T, eidx, etgt);
    Rng data;
    rng_seed(&data, o->seed * 1000003u + 17); /* the training batches: one stream */
    double t0 = now_s();
    record(rec, &m, t, o, eidx, etgt, eval_prefix, 0, NAN, 1, o->steps == 0);
    for (int64_t s = 1; s <= o->steps; s++) {
        ind_make_batch(&data, o, B, seq, pl);
        split_batch(seq, B, T, idx, tgt);
        ag_tape_reset(t);
        ag_params_zero_grad(&m.params);
        Tensor *loss = ag_cross_entropy(t, ind_model_forward(t, &m, idx, B, T), tgt, -1);
        ag_backward(t, loss);
        optim_step(opt);
        double lv = (double)loss->data[0];
        if (s % o->every == 0 || s == o->steps) {
            record(rec, &m, t, o, eidx, etgt, eval_prefix, s, lv, 0, s == o->steps);
            if (!o->quiet) {
                int r = rec->R - 1;
                printf("  %s step %5lld  train %.3f  predictable %.3f  other %.3f  (%.1f s)\n",
                       rec->name, (long long)s, lv, rec->loss_pred[r], rec->loss_other[r],
                       now_s() - t0);
                fflush(stdout);
            }
        }
    }
    rec->seconds = now_s() - t0;
    free(seq), free(pl), free(idx), free(tgt), free(eidx), free(etgt);
    ag_tape_free(t), arena_free(step), ag_params_free(&m.params), arena_free(params);
    return AG_OK;
}

void ind_record_free(IndRecord *rec) {
    free(rec->step), free(rec->train_loss), free(rec->loss_pred), free(rec->loss_other);
    free(rec->loss_pos), free(rec->induction), free(rec->previous);
    free(rec->pattern_first), free(rec->pattern_last);
    *rec = (IndRecord){0};
}

int64_t ind_first_below(const IndRecord *rec, double x) {
    for (int r = 0; r < rec->R; r++)
        if (rec->loss_pred[r] < x) return rec->step[r];
    return -1;
}

double ind_best_head(const IndRecord *rec, const double *scores, int *layer, int *head) {
    int LH = rec->n_layer * rec->NH, best = 0;
    const double *s = scores + (size_t)(rec->R - 1) * LH;
    for (int k = 1; k < LH; k++)
        if (s[k] > s[best]) best = k;
    *layer = best / rec->NH, *head = best % rec->NH;
    return s[best];
}
