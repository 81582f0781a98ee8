/* train.c: one model of the experiment as a training run of the library's run loop
 * (src/run/run.h): the flags (the experiment's rows, then the run's), the model built from them
 * (its weights drawn from --seed as before the run loop: the same bits), the training batches
 * (their Rng's state kept in the checkpoint as meta.run.model.data0..3), the loss of a shard
 * of the batch (AdamW at a constant rate, no clipping: the run's flags with this experiment's
 * defaults), and the validation: a record of the evaluation batch (record.c) every --every
 * steps, whose records travel in every checkpoint's meta.extra so that --resume continues them.
 * Each run lives in OUT/<name>/ (last.npz, best.npz, log.csv, loss.png).
 * Not here: the records' numbers (record.c), the summary and files (main.c, files.c).
 * Read next: files.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "induction.h"
#include "../common/common.h" /* ex_malloc, ex_file_exists */

static const CkptField config_fields[] = {
    CKPT_CFG_INT(AttnOnlyConfig, vocab, 2, 65536), CKPT_CFG_INT(AttnOnlyConfig, block, 4, 1024),
    CKPT_CFG_INT(AttnOnlyConfig, n_layer, 1, IND_MAX_LAYERS),
    CKPT_CFG_INT(AttnOnlyConfig, n_head, 1, 64), CKPT_CFG_INT(AttnOnlyConfig, d_model, 1, 4096)};
static const CkptField state_fields[] = {{"data0", CKPT_FIELD_INT, 0, 8, -1e19, 1e19, 0},
                                         {"data1", CKPT_FIELD_INT, 8, 8, -1e19, 1e19, 0},
                                         {"data2", CKPT_FIELD_INT, 16, 8, -1e19, 1e19, 0},
                                         {"data3", CKPT_FIELD_INT, 24, 8, -1e19, 1e19, 0}};
static const char *const metrics[] = {"loss", "predictable", "other"};
static const char *const transient[] = {"no-control", NULL};

/* the flags' values into o */
static void sync_options(IndRun *x) {
    IndOptions *o = &x->o;
    o->steps = (int)x->rc.steps, o->every = x->rc.valid_every, o->batch = x->rc.batch;
    o->lr = x->rc.optim.lr, o->weight_decay = x->rc.weight_decay, o->seed = (uint64_t)x->rc.seed;
    o->vocab = x->cfg.vocab, o->ctx = x->cfg.block, o->d_model = x->cfg.d_model;
    o->n_head = x->cfg.n_head, o->quiet = x->rc.quiet;
}

/* the flags together (a new run's in start, before anything is read; the final ones in build) */
static int check_options(IndRun *x) {
    sync_options(x);
    const IndOptions *o = &x->o;
    if (o->d_model % o->n_head)
        return ag_fail(AG_ERR_ARG, "--heads %d: the number of heads must divide --d-model %d",
                       o->n_head, o->d_model);
    if (o->min_prefix < 2 || o->min_prefix > o->max_prefix)
        return ag_fail(AG_ERR_ARG,
                       "--min-prefix %d: must be at least 2 and at most --max-prefix %d",
                       o->min_prefix, o->max_prefix);
    if (o->max_prefix >= o->ctx)
        return ag_fail(AG_ERR_ARG,
                       "--max-prefix %d: must be shorter than --block-size %d (the prefix must "
                       "repeat)",
                       o->max_prefix, o->ctx);
    return AG_OK;
}

/* the records so far as the bytes every checkpoint keeps (meta.extra) */
static void keep_records(IndRun *x) {
    free(x->extra);
    x->extra = ind_record_bytes(&x->rec, &x->model.extra_len);
    x->model.extra = x->extra;
}

/* the run's folder OUT/<name>; the one_layer run starts afresh on --resume when it has none yet
 * (the experiment was stopped during the two_layer run) */
static int start(void *ctx) {
    IndRun *x = ctx;
    x->o.out = x->rc.out;
    free(x->out);
    x->out = io_path_join(x->rc.out, x->name);
    x->rc.out = x->out;
    char *last = io_path_join(x->out, "last.npz");
    if (x->fresh_if_missing && x->rc.resume && !ex_file_exists(last)) x->rc.resume = 0;
    free(last);
    return x->rc.resume ? AG_OK : check_options(x);
}

static int build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    IndRun *x = ctx;
    IndOptions *o = &x->o;
    (void)init; /* the weights are drawn from --seed itself, as the experiment always drew them */
    int rc = check_options(x);
    if (rc != AG_OK) return rc;
    if (x->cfg.n_layer != x->layers)
        return ag_fail(AG_ERR_FORMAT, "%s: a checkpoint of %d layers, not %s's %d", x->out,
                       x->cfg.n_layer, x->name, x->layers);
    Rng rng;
    rng_seed(&rng, o->seed); /* the same initial embeddings for both models */
    ind_model_init(&x->m, a, &rng, &x->cfg);
    *params = &x->m.params;
    int B = o->batch, T = o->ctx, Be = o->eval_batch;
    free(x->seq), free(x->pl), free(x->idx), free(x->tgt);
    free(x->eval_tokens), free(x->eval_prefix), free(x->eidx), free(x->etgt);
    x->seq = ex_malloc((size_t)B * (T + 1) * sizeof(int));
    x->pl = ex_malloc((size_t)B * sizeof(int));
    x->idx = ex_malloc((size_t)B * T * sizeof(int));
    x->tgt = ex_malloc((size_t)B * T * sizeof(int));
    /* the evaluation batch: its own stream, the same for both models */
    x->eval_tokens = ex_malloc((size_t)Be * (T + 1) * sizeof(int));
    x->eval_prefix = ex_malloc((size_t)Be * sizeof(int));
    x->eidx = ex_malloc((size_t)Be * T * sizeof(int));
    x->etgt = ex_malloc((size_t)Be * T * sizeof(int));
    Rng er;
    rng_seed(&er, o->seed ^ 0x5eedULL);
    ind_make_batch(&er, o, Be, x->eval_tokens, x->eval_prefix);
    ind_split_batch(x->eval_tokens, Be, T, x->eidx, x->etgt);
    Rng data;
    rng_seed(&data, o->seed * 1000003u + 17); /* the training batches: one stream */
    memcpy(x->data, data.s, sizeof x->data);
    ind_record_start(&x->rec, x->name, x->layers, o->n_head, T, Be);
    if (!x->rc.resume) { /* step 0: the weights as drawn */
        ind_record(&x->rec, &x->m, x->tape, o, x->eidx, x->etgt, x->eval_prefix, 0, NAN, 1, NULL);
        keep_records(x);
    }
    return AG_OK;
}

/* the batch of step `step`: every process draws all of it (the same draws) */
static int batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    IndRun *x = ctx;
    (void)lo, (void)hi, (void)S;
    Rng d;
    memcpy(d.s, x->data, sizeof d.s);
    ind_make_batch(&d, &x->o, x->o.batch, x->seq, x->pl);
    memcpy(x->data, d.s, sizeof x->data);
    ind_split_batch(x->seq, x->o.batch, x->o.ctx, x->idx, x->tgt);
    x->step = step;
    x->loss_sum = 0, x->loss_n = 0;
    *tokens = (double)x->o.batch * x->o.ctx;
    return AG_OK;
}

/* the next-token loss of every position of shard i's rows */
static Tensor *loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    IndRun *x = ctx;
    (void)rng;
    int B = x->o.batch, T = x->o.ctx, r0 = (int)((int64_t)i * B / S),
        n = (int)((int64_t)(i + 1) * B / S) - r0;
    if (n == 0) return NULL;
    Tensor *l = ag_cross_entropy(t, ind_model_forward(t, &x->m, x->idx + (size_t)r0 * T, n, T),
                                 x->tgt + (size_t)r0 * T, -1);
    x->loss_sum += (double)l->data[0], x->loss_n++;
    return l;
}

/* a record; its metrics: the evaluation batch's loss, on the predictable positions, the others.
 * The record's train_loss: the mean of this process's shards (the step's loss in one process) */
static int validate(void *ctx, Tape *t, double *v) {
    IndRun *x = ctx;
    ind_record(&x->rec, &x->m, t, &x->o, x->eidx, x->etgt, x->eval_prefix, x->step,
               x->loss_n ? x->loss_sum / x->loss_n : NAN, 0, v);
    keep_records(x);
    return AG_OK;
}

static int load_extra(void *ctx, const void *bytes, size_t len) {
    IndRun *x = ctx;
    int rc = ind_record_load(&x->rec, bytes, len, run_last_step(x->r));
    if (rc != AG_OK) return ag_fail(rc, "%s/last.npz: %s", x->out, ag_last_error());
    keep_records(x);
    return AG_OK;
}

void ind_run_init(IndRun *x, const char *name, int n_layer, const IndRun *like) {
    memset(x, 0, sizeof *x);
    x->name = name;
    x->layers = n_layer;
    if (like) {
        x->o = like->o, x->cfg = like->cfg, x->rc = like->rc;
        x->rc.out = like->o.out, x->rc.resume = x->rc.force = 0;
    } else {
        x->o = (IndOptions){.eval_batch = 32, .min_prefix = 8, .max_prefix = 24, .control = 1};
        x->cfg = (AttnOnlyConfig){.vocab = 64, .block = 64, .n_head = 4, .d_model = 64};
        x->rc = run_defaults();
        x->rc.steps = 1500, x->rc.batch = 32, x->rc.optim.lr = 3e-3, x->rc.weight_decay = 0.01;
        x->rc.optim.schedule = (OptimSchedule){OPTIM_CONSTANT, 0, 0, 0};
        x->rc.clip = 0, x->rc.seed = 1, x->rc.out = "build/induction";
        x->rc.log_every = 25, x->rc.valid_every = 25;
    }
    x->cfg.n_layer = n_layer;
    x->model = (RunModel){.prog = "attograd-induction",
                          .ctx = x,
                          .build = build,
                          .batch = batch,
                          .loss = loss,
                          .validate = validate,
                          .n_metrics = 3,
                          .metric_names = metrics,
                          .load_extra = load_extra,
                          .transient = transient,
                          .start = start};
    x->model.config = (CkptConfig){"attn_only", config_fields, 5, &x->cfg, NULL};
    x->model.state = (CkptConfig){NULL, state_fields, 4, x->data, NULL};
    x->r = run_new(&x->model, &x->rc);
    x->arena = arena_new("records", 0);
    x->tape = ag_tape_new(x->arena);
    IndOptions *o = &x->o;
    Flag rows[IND_N_FLAGS] = {
        {"eval-batch", FLAG_INT, &o->eval_batch, "N", "sequences of the fixed evaluation batch", 1,
         1024, NULL, 0},
        {"vocab", FLAG_INT, &x->cfg.vocab, "N", "tokens", 2, 65536, NULL, 0},
        {"block-size|ctx", FLAG_INT, &x->cfg.block, "N", "context length", 4, 1024, NULL, 0},
        {"d-model", FLAG_INT, &x->cfg.d_model, "N", "residual width", 1, 4096, NULL, 0},
        {"heads", FLAG_INT, &x->cfg.n_head, "N", "heads per layer", 1, 64, NULL, 0},
        {"min-prefix", FLAG_INT, &o->min_prefix, "N", "shortest repeated prefix", 1, 1024, NULL, 0},
        {"max-prefix", FLAG_INT, &o->max_prefix, "N", "longest repeated prefix", 1, 1024, NULL, 0},
        {"no-control", FLAG_SWITCH, &o->control, NULL, "skip the 1-layer control", 0, 0, NULL, 0},
    };
    memcpy(x->fl, rows, sizeof rows);
    x->n_fl = IND_N_FLAGS + run_flags(x->r, x->fl + IND_N_FLAGS);
    /* the experiment's spelling of the records' cadence: an alias of the run's --valid-every */
    Flag *every = flag_find(x->fl, x->n_fl, "valid-every");
    every->name = "valid-every|every";
    every->help = "steps between records of the evaluation batch (the run's validations)";
    flag_find(x->fl, x->n_fl, "quiet")->help = "print the summary only";
    flag_find(x->fl, x->n_fl, "steps")->hi = 1000000; /* the experiment's ranges */
    flag_find(x->fl, x->n_fl, "batch")->hi = 4096;
}

int ind_run_main(IndRun *x, int argc, char **argv) {
    double t0 = run_now_s();
    int code = run_main(x->r, x->fl, x->n_fl, argc, argv);
    if (code == RUN_EXIT_OK && x->rec.R > 0) {
        ind_record_patterns(&x->rec, &x->m, x->tape, x->eidx, x->o.eval_batch);
        x->rec.seconds = run_now_s() - t0;
    }
    if (code == RUN_EXIT_OK && x->rec.R > 0 && x->rec.step[0] != 0) {
        fprintf(stderr, "attograd-induction: %s/last.npz holds no records from step 0\n", x->out);
        code = RUN_EXIT_USAGE;
    }
    return code;
}

void ind_run_free(IndRun *x) {
    run_loop_free(x->r);
    ag_params_free(&x->m.params);
    ag_tape_free(x->tape), arena_free(x->arena);
    ind_record_free(&x->rec);
    free(x->seq), free(x->pl), free(x->idx), free(x->tgt);
    free(x->eval_tokens), free(x->eval_prefix), free(x->eidx), free(x->etgt);
    free(x->extra), free(x->out);
}
