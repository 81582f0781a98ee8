/* record.c: the data (random prefixes repeated to fill the context) and what is recorded every
 * few steps on a fixed evaluation batch: the loss on the predictable positions (those whose
 * next token repeats an earlier one: the prefix has been seen), the loss on the others, the
 * loss per position, and every head's induction and previous-token scores (lens_detect_heads,
 * TransformerLens's definitions, no exclusions); the records as bytes for the checkpoint's
 * meta.extra, and back (src/run's run_records). Not here: the training run (train.c), the files and pictures (files.c,
 * plot.c). Read next: train.c. */
#include "induction.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/common.h" /* ex_malloc */

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

void ind_split_batch(const int *seq, int B, int T, int *idx, int *tgt) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            idx[b * T + t] = seq[b * (T + 1) + t];
            tgt[b * T + t] = seq[b * (T + 1) + t + 1];
        }
}

/* rec's arrays as the library's records (src/run/run_records.c), in the order of the bytes
 * of meta.extra: int64 n_layer, NH, T, R; then step (R) int64; train_loss, loss_pred,
 * loss_other (R), loss_pos (R, T), induction and previous (R, n_layer, NH) float64;
 * pattern_first (n_layer, NH, T, T) float32 (a, head: room for them) */
static RunRecords records(IndRecord *rec, RunRecArray *a, int64_t *head) {
    size_t LH = (size_t)rec->n_layer * rec->NH, T = (size_t)rec->T;
    static const char *const names[] = {"layers", "heads", "positions"};
    const RunRecArray x[8] = {
        {(void **)&rec->step, 8, 1, 0},      {(void **)&rec->train_loss, 8, 1, 0},
        {(void **)&rec->loss_pred, 8, 1, 0}, {(void **)&rec->loss_other, 8, 1, 0},
        {(void **)&rec->loss_pos, 8, T, 0},  {(void **)&rec->induction, 8, LH, 0},
        {(void **)&rec->previous, 8, LH, 0}, {(void **)&rec->pattern_first, 4, LH * T * T, 1}};
    memcpy(a, x, sizeof x);
    head[0] = rec->n_layer, head[1] = rec->NH, head[2] = rec->T;
    return (RunRecords){a, 8, head, names, 3, rec->R, rec->cap};
}

/* room for R records */
static void record_alloc(IndRecord *rec, int R) {
    RunRecArray a[8];
    int64_t head[3];
    RunRecords r = records(rec, a, head);
    run_records_reserve(&r, R);
    rec->cap = r.cap;
}

void ind_record_start(IndRecord *rec, const char *name, int n_layer, int NH, int T, int Be) {
    ind_record_free(rec);
    *rec = (IndRecord){.name = name, .n_layer = n_layer, .NH = NH, .T = T};
    size_t TT = (size_t)T * T;
    rec->pattern_first = ex_calloc((size_t)n_layer * NH * TT, sizeof(float));
    rec->pattern_last = ex_calloc((size_t)n_layer * Be * NH * TT, sizeof(float));
}

/* the model on the evaluation batch eval_idx (Be, T), no gradient: its probabilities stay in
 * m->attn[l].last_probs; the logits (Be, T, vocab) */
static Tensor *eval_forward(AttnOnly *m, Tape *t, const int *eval_idx, int Be, int T) {
    ag_tape_reset(t);
    int was = ag_no_grad(t, 1);
    Tensor *logits = ind_model_forward(t, m, eval_idx, Be, T);
    ag_no_grad(t, was);
    return logits;
}

void ind_record(IndRecord *rec, AttnOnly *m, Tape *t, const IndOptions *o, const int *eval_idx,
                const int *eval_tgt, const int *eval_prefix, int64_t step, double train_loss,
                int first, double *v) {
    int B = o->eval_batch, T = o->ctx, V = o->vocab, NH = rec->NH;
    record_alloc(rec, rec->R + 1);
    int r = rec->R++;
    rec->step[r] = step;
    rec->train_loss[r] = train_loss;
    Tensor *logits = eval_forward(m, t, eval_idx, B, T); /* (B, T, V) */
    double pred = 0, other = 0;
    int n_pred = 0, n_other = 0;
    double *pos = rec->loss_pos + (size_t)r * T;
    for (int i = 0; i < T; i++) pos[i] = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++) {
            double ce =
                nn_token_loss(logits->data + ((size_t)b * T + i) * V, V, eval_tgt[b * T + i]);
            pos[i] += ce / B;
            /* position i predicts token i + 1, a repeat when i + 1 >= the prefix's length */
            if (i + 1 >= eval_prefix[b])
                pred += ce, n_pred++;
            else
                other += ce, n_other++;
        }
    rec->loss_pred[r] = n_pred ? pred / n_pred : NAN;
    rec->loss_other[r] = n_other ? other / n_other : NAN;
    if (v)
        v[0] = (pred + other) / (n_pred + n_other), v[1] = rec->loss_pred[r],
        v[2] = rec->loss_other[r];
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
    }
    ag_tape_reset(t);
}

void ind_record_patterns(IndRecord *rec, AttnOnly *m, Tape *t, const int *eval_idx, int Be) {
    int T = rec->T, NH = rec->NH;
    eval_forward(m, t, eval_idx, Be, T);
    size_t n = (size_t)Be * NH * T * T;
    for (int l = 0; l < rec->n_layer; l++)
        for (size_t k = 0; k < n; k++)
            rec->pattern_last[(size_t)l * n + k] = (float)m->attn[l].last_probs->data[k];
    ag_tape_reset(t);
}

void *ind_record_bytes(const IndRecord *rec, size_t *len) {
    RunRecArray a[8];
    int64_t head[3];
    RunRecords r = records((IndRecord *)rec, a, head);
    return run_records_bytes(&r, len);
}

int ind_record_load(IndRecord *rec, const void *bytes, size_t len, int64_t last_step) {
    RunRecArray a[8];
    int64_t head[3];
    RunRecords r = records(rec, a, head);
    int rc = run_records_load(&r, bytes, len, "meta.extra");
    rec->cap = r.cap;
    for (int64_t k = 0; k < r.R && rc == AG_OK; k++) {
        int64_t s = rec->step[k];
        if (s < 0 || s > last_step || (k && s <= rec->step[k - 1]))
            rc = ag_fail(AG_ERR_FORMAT,
                         "meta.extra: record %lld is of step %lld (steps rise from 0 to the "
                         "checkpoint's %lld)",
                         (long long)k, (long long)s, (long long)last_step);
    }
    if (rc == AG_OK) rec->R = r.R;
    return rc;
}

void ind_record_free(IndRecord *rec) {
    free(rec->step), free(rec->train_loss), free(rec->loss_pred), free(rec->loss_other);
    free(rec->loss_pos), free(rec->induction), free(rec->previous);
    free(rec->pattern_first), free(rec->pattern_last);
    *rec = (IndRecord){0};
}

double ind_best_head(const IndRecord *rec, const double *scores, int *layer, int *head) {
    int LH = rec->n_layer * rec->NH, best = 0;
    const double *s = scores + (size_t)(rec->R - 1) * LH;
    for (int k = 1; k < LH; k++)
        if (s[k] > s[best]) best = k;
    *layer = best / rec->NH, *head = best % rec->NH;
    return s[best];
}
