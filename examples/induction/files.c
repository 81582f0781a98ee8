/* files.c: what the experiment writes to its folder.
 *   induction.npz    config.<flag> (int64, lr and weight_decay float64); eval_tokens (B, T + 1)
 *                    and eval_prefix_len (B) int32 (the evaluation batch); per model
 *                    (two_layer, one_layer): step (R) int64; train_loss, loss_predictable,
 *                    loss_other (R), loss_per_position (R, T), induction_score and
 *                    previous_token_score (R, n_layer, NH) float64; pattern_first
 *                    (n_layer, NH, T, T) float32, evaluation sequence 0 before training; and
 *                    blocks.<l>.attn.hook_pattern (B, NH, T, T) float32, every evaluation
 *                    sequence after training (TransformerLens's name for a layer's pattern).
 *   curves.csv       model,step,train_loss,loss_predictable,loss_other
 *   heads.csv        model,step,layer,head,induction,previous_token
 *   positions.csv    model,step,pos_0,...,pos_<T-1> (the mean loss of each position)
 * A file that cannot be written is an error naming its path; every file is written to a
 * temporary name and renamed (src/io/file.h). Not here: the pictures (plot.c).
 * Read next: plot.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "induction.h"

/* A CSV file of the folder, written as the library writes every file (src/io/file.h): into a
 * new temporary file beside it, then renamed over it (a device, FIFO, folder or link there is
 * refused and stays). The path is allocated, never cut. */
typedef struct {
    FILE *f;
    char *path, *tmp;
} Csv;

static int csv_open(const char *dir, const char *name, Csv *c) {
    c->path = io_path_join(dir, name);
    int rc = io_fopen_write(c->path, &c->f, &c->tmp);
    if (rc != AG_OK) free(c->path);
    return rc;
}

static int csv_close(Csv *c) {
    int rc = io_fclose_replace(c->f, c->tmp, c->path);
    free(c->path);
    return rc;
}

static int write_csv(const IndOptions *o, const IndRecord *recs, int n_recs) {
    Csv c;
    int rc = csv_open(o->out, "curves.csv", &c);
    if (rc != AG_OK) return rc;
    FILE *f = c.f;
    fprintf(f, "model,step,train_loss,loss_predictable,loss_other\n");
    for (int m = 0; m < n_recs; m++)
        for (int r = 0; r < recs[m].R; r++)
            fprintf(f, "%s,%lld,%.6g,%.6g,%.6g\n", recs[m].name, (long long)recs[m].step[r],
                    recs[m].train_loss[r], recs[m].loss_pred[r], recs[m].loss_other[r]);
    if ((rc = csv_close(&c)) != AG_OK || (rc = csv_open(o->out, "heads.csv", &c)) != AG_OK)
        return rc;
    f = c.f;
    fprintf(f, "model,step,layer,head,induction,previous_token\n");
    for (int m = 0; m < n_recs; m++) {
        const IndRecord *x = &recs[m];
        int LH = x->n_layer * x->NH;
        for (int r = 0; r < x->R; r++)
            for (int k = 0; k < LH; k++)
                fprintf(f, "%s,%lld,%d,%d,%.6f,%.6f\n", x->name, (long long)x->step[r], k / x->NH,
                        k % x->NH, x->induction[(size_t)r * LH + k],
                        x->previous[(size_t)r * LH + k]);
    }
    if ((rc = csv_close(&c)) != AG_OK || (rc = csv_open(o->out, "positions.csv", &c)) != AG_OK)
        return rc;
    f = c.f;
    fprintf(f, "model,step");
    for (int i = 0; i < o->ctx; i++) fprintf(f, ",pos_%d", i);
    fprintf(f, "\n");
    for (int m = 0; m < n_recs; m++)
        for (int r = 0; r < recs[m].R; r++) {
            fprintf(f, "%s,%lld", recs[m].name, (long long)recs[m].step[r]);
            for (int i = 0; i < o->ctx; i++)
                fprintf(f, ",%.5g", recs[m].loss_pos[(size_t)r * o->ctx + i]);
            fprintf(f, "\n");
        }
    return csv_close(&c);
}

int ind_write_files(const IndOptions *o, const IndRecord *recs, int n_recs, const int *eval_tokens,
                    const int *eval_prefix) {
    NpzWriter *w = npz_writer_new();
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {
        {"vocab", o->vocab},           {"ctx", o->ctx},           {"d_model", o->d_model},
        {"n_head", o->n_head},         {"batch", o->batch},       {"eval_batch", o->eval_batch},
        {"steps", o->steps},           {"every", o->every},       {"min_prefix", o->min_prefix},
        {"max_prefix", o->max_prefix}, {"seed", (int64_t)o->seed}};
    int64_t ivals[sizeof ints / sizeof ints[0]];
    char name[160];
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        ivals[k] = ints[k].v;
        snprintf(name, sizeof name, "config.%s", ints[k].name);
        npz_add_i64(w, name, 0, NULL, &ivals[k]);
    }
    npz_add_f64(w, "config.lr", 0, NULL, &o->lr);
    npz_add_f64(w, "config.weight_decay", 0, NULL, &o->weight_decay);
    int Be = o->eval_batch, T = o->ctx;
    npz_add_int(w, "eval_tokens", 2, (int64_t[]){Be, T + 1}, eval_tokens);
    npz_add_int(w, "eval_prefix_len", 1, (int64_t[]){Be}, eval_prefix);
    for (int m = 0; m < n_recs; m++) {
        const IndRecord *x = &recs[m];
        int64_t R = x->R, L = x->n_layer, NH = x->NH;
#define KEY(what) (snprintf(name, sizeof name, "%s." what, x->name), name)
        npz_add_i64(w, KEY("step"), 1, &R, x->step);
        npz_add_f64(w, KEY("train_loss"), 1, &R, x->train_loss);
        npz_add_f64(w, KEY("loss_predictable"), 1, &R, x->loss_pred);
        npz_add_f64(w, KEY("loss_other"), 1, &R, x->loss_other);
        npz_add_f64(w, KEY("loss_per_position"), 2, (int64_t[]){R, T}, x->loss_pos);
        npz_add_f64(w, KEY("induction_score"), 3, (int64_t[]){R, L, NH}, x->induction);
        npz_add_f64(w, KEY("previous_token_score"), 3, (int64_t[]){R, L, NH}, x->previous);
        npz_add_f32(w, KEY("pattern_first"), 4, (int64_t[]){L, NH, T, T}, x->pattern_first);
        for (int l = 0; l < L; l++) {
            snprintf(name, sizeof name, "%s.blocks.%d.attn.hook_pattern", x->name, l);
            npz_add_f32(w, name, 4, (int64_t[]){Be, NH, T, T},
                        x->pattern_last + (size_t)l * Be * NH * T * T);
        }
#undef KEY
    }
    char *path = io_path_join(o->out, "induction.npz");
    int rc = npz_write(w, path, 1, NULL);
    free(path);
    npz_writer_free(w);
    return rc != AG_OK ? rc : write_csv(o, recs, n_recs);
}
