/* train.c: `attograd-gpt train`, nanoGPT's train.py in C: random windows of block_size tokens
 * from train.bin (a seeded TxtLoader draws their starts; each window is read from the file when
 * it is used, so memory does not grow with the file, and a process reads only its rows' and
 * its validation batches' windows), the GPT's loss, backward, gradient clipping (1.0),
 * AdamW (decay on the weights of two or more dimensions only, as nanoGPT's param groups) with
 * linear warmup and cosine decay to --lr-min (OptimConfig's OPTIM_WARMUP_COSINE); every
 * --valid-every steps the mean loss over --eval-iters fixed batches of valid.bin, best.npz
 * when it is the best so far, and last.npz. A CSV row every --log-every steps (the means
 * since the last row), a progress line with the ETA and tokens/s. SIGINT and SIGTERM save
 * last.npz and exit 130 / 143; --resume continues to the bit (the checkpoint holds the
 * weights, AdamW's state and step, the dropout RNG, the loader's RNG, the sums of the CSV row
 * being accumulated, and the tokenizer). A non-finite loss or gradient stops the run naming the
 * step (exit 1); the last good checkpoint stays (written to a temporary file, then renamed).
 * --shards S (or mpirun -np P): each step's batch is S micro-shards whose gradients are summed
 * in a fixed tree (src/dist/dist.h), the same bits for any P; process 0 alone writes files
 * (docs/mpi.md).
 * Not here: checkpoints for sampling (sample.c), the flag parser (main.c). Read next:
 * sample.c. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpt_cli.h"

typedef struct {
    /* settings */
    GptConfig mc;
    OptimConfig oc;
    int batch, eval_interval, eval_iters, log_interval, threads, resume, force, quiet, shards;
    int64_t max_iters, lr_decay_iters, inject_nan;
    double wd, clip;
    uint64_t seed;
    const char *data, *out;
    /* state */
    TxtTokenizer *tok;
    uint8_t *tok_bytes;
    size_t tok_len;
    TxtShard *train_bin, *valid_bin; /* open: each process reads the windows of its rows */
    size_t n_train, n_valid;
    Gpt m;
    Arena *params, *step_arena;
    Tape *tape;
    Optimizer *opt;
    Rng rng;
    TxtLoader loader;
    int *x, *y, *win; /* (batch, block) inputs and targets; a window of block + 1 tokens */
    size_t *starts;   /* (batch) the windows of this batch */
    int64_t step, saved_step, step_start;
    int64_t pos[GP_POS_COUNT];
    char *last_path, *best_path, *csv_path; /* OUT/last.npz, ... (io_path_join) */
    FILE *csv;
    int tty;
    DistGrad *dist;      /* NULL: one process, one shard (the plain step) */
    uint64_t shard_seed; /* this step's: shard i's dropout RNG is rng_hash(shard_seed, i) */
    double t_start, t_row, t_bar, last_tps;
} GpTrainer;

#define GP_MAX_STEP_TOKENS (1 << 22) /* batch x block: 4M tokens a step */

static const char csv_header[] = "step,train_loss,lr,grad_norm,tokens_per_s,valid_loss\n";

/* ---- data ---- */

static int read_data(GpTrainer *g) {
    char *p = io_path_join(g->data, "tokenizer");
    int rc = txt_load(p, &g->tok);
    free(p);
    if (rc != AG_OK) return rc;
    g->tok_bytes = txt_to_bytes(g->tok, &g->tok_len);
    int V = txt_vocab_size(g->tok);
    p = io_path_join(g->data, "train.bin"); /* shards: regular files only (a FIFO never hangs) */
    rc = txt_shard_open(p, V, &g->train_bin);
    free(p);
    if (rc != AG_OK) return rc;
    g->n_train = txt_shard_count(g->train_bin);
    p = io_path_join(g->data, "valid.bin");
    rc = txt_shard_open(p, V, &g->valid_bin);
    free(p);
    if (rc == AG_OK) g->n_valid = txt_shard_count(g->valid_bin);
    return rc;
}

/* Rows [r0, r1) of the batch whose windows start at g->starts, read from f into g->x and g->y
 * (the other rows are other processes'). AG_OK, or an error naming the file (a token outside
 * the vocabulary, a short read). */
static int read_rows(GpTrainer *g, TxtShard *f, int r0, int r1) {
    int T = g->mc.block_size;
    for (int r = r0; r < r1; r++) {
        int rc = txt_shard_tokens(f, g->starts[r], (size_t)T + 1, g->win);
        if (rc != AG_OK) return rc;
        memcpy(g->x + (size_t)r * T, g->win, (size_t)T * sizeof(int));
        memcpy(g->y + (size_t)r * T, g->win + 1, (size_t)T * sizeof(int));
    }
    return AG_OK;
}

/* ---- the model and the optimizer ---- */

static void build(GpTrainer *g, uint64_t seed) {
    g->params = arena_new("params", 0);
    Rng init;
    rng_seed(&init, seed);
    nn_gpt_init(&g->m, g->params, &init, &g->mc);
    g->opt = optim_new(g->params, &g->m.params, &g->oc);
    rng_seed(&g->rng, rng_hash(seed, 1));
}

/* ---- checkpoints ---- */

static int save(GpTrainer *g, const char *path) {
    if (dist_rank() != 0) { /* process 0 writes; the others hold the same state */
        if (path == g->last_path) g->saved_step = g->step;
        return AG_OK;
    }
    if (g->csv && (fflush(g->csv) != 0 || fsync(fileno(g->csv)) != 0)) {
        ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", g->csv_path, strerror(errno));
        fprintf(stderr, GP_PROG " train: %s\n", ag_last_error());
        return AG_ERR_IO;
    }
    txt_loader_state(&g->loader, g->pos + GP_POS_LOADER);
    Checkpoint ck = {.params = &g->m.params,
                     .config = nn_gpt_ckpt_config(&g->m.cfg),
                     .opt = g->opt,
                     .rng = &g->rng,
                     .n_data = g->pos[GP_POS_SHARDS] > 1 ? GP_POS_COUNT : GP_POS_COUNT - 1,
                     .extra = g->tok_bytes,
                     .extra_len = g->tok_len};
    memcpy(ck.data, g->pos, sizeof g->pos);
    int rc = ckpt_save(path, &ck, 0, NULL);
    if (rc != AG_OK) {
        fprintf(stderr, GP_PROG " train: %s\n", ag_last_error());
        dist_abort(TR_EXIT_FAIL); /* the other processes would wait for this one */
    } else if (path == g->last_path)
        g->saved_step = g->step;
    return rc;
}

/* What data.position may hold, checked before any of it is used. */
static int check_position(const NpzFile *f, int64_t step) {
    const NpzEntry *e = npz_find(f, "data.position");
    if (!e || e->dtype != NPZ_I64 || e->ndim != 1 ||
        (e->count != GP_POS_COUNT && e->count != GP_POS_COUNT - 1))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: 'data.position' must be %d or %d '<i8' values (not a checkpoint of "
                       "attograd-gpt train?)",
                       f->path, GP_POS_COUNT - 1, GP_POS_COUNT);
    int has_shards = e->count == GP_POS_COUNT;
    const int64_t big = 1 << 30;
    const CkptRule rules[] = {
        CKPT_RULE_INT("data.position", GP_POS_LOADER + 4, "batches drawn", step, step),
        CKPT_RULE_INT("data.position", GP_POS_BATCH, "--batch-size", 1, 1 << 20),
        CKPT_RULE_INT("data.position", GP_POS_N_TRAIN, "train tokens", 2, TXT_SHARD_MAX_TOKENS),
        CKPT_RULE_INT("data.position", GP_POS_N_VALID, "valid tokens", 2, TXT_SHARD_MAX_TOKENS),
        CKPT_RULE_F64("data.position", GP_POS_WD, "--weight-decay", 0, 1e3),
        CKPT_RULE_F64("data.position", GP_POS_CLIP, "--grad-clip", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_EVAL_INTERVAL, "--eval-interval", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_EVAL_ITERS, "--eval-iters", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_LOG_INTERVAL, "--log-interval", 1, big),
        CKPT_RULE_INT("data.position", GP_POS_BEST_STEP, "step of best.npz", 0, step),
        CKPT_RULE_F64("data.position", GP_POS_BEST_LOSS, "best valid loss", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_LAST_VALID, "last validated step", 0, step),
        CKPT_RULE_F64("data.position", GP_POS_IV_LOSS, "losses since the last log row", 0, DBL_MAX),
        CKPT_RULE_F64("data.position", GP_POS_IV_NORM, "gradient norms since the last log row", 0,
                      DBL_MAX),
        CKPT_RULE_INT("data.position", GP_POS_IV_STEPS, "steps since the last log row", 0, step),
        CKPT_RULE_INT("data.position", GP_POS_SHARDS, "--shards", 2, 1 << 16),
    };
    return ckpt_check_rules(f, rules, (int)(sizeof rules / sizeof rules[0]) - !has_shards);
}

/* The model's option flags and their values: the names of NnGptPos, NnGptNorm, NnGptMlp from 1
 * on (0, the style's choice, is no value) */
static const char *const pos_names[] = {"", "learned", "rope", "none", NULL};
static const char *const norm_names[] = {"", "layernorm", "rmsnorm", "none", NULL};
static const char *const mlp_names[] = {"", "gelu", "swiglu", "none", NULL};
static const char *const *choice_names(const char *flag) {
    return strcmp(flag, "pos") == 0    ? pos_names
           : strcmp(flag, "norm") == 0 ? norm_names
           : strcmp(flag, "mlp") == 0  ? mlp_names
                                       : NULL;
}

/* --flag's value (when given) as the number of its name in choice_names(flag) -> *out, or
 * AG_ERR_ARG naming the flag and the choices */
static int parse_choice(Flag *fl, int n, const char *flag, int *out) {
    const Flag *f = flag_find(fl, n, flag);
    if (!f->given) return AG_OK;
    const char *v = *(const char **)f->ptr, *const *names = choice_names(flag);
    for (int k = 1; names[k]; k++)
        if (strcmp(v, names[k]) == 0) {
            *out = k;
            return AG_OK;
        }
    return ag_fail(AG_ERR_ARG, "--%s %s: must be %s, %s or %s", flag, v, names[1], names[2],
                   names[3]);
}

/* --resume: a flag given again must agree with the checkpoint (the run cannot honour another
 * value); AG_ERR_ARG naming it. */
static int check_given(const GpTrainer *g, Flag *fl, int n, const GptConfig *mc,
                       const OptimConfig *oc) {
    GptConfig so = nn_gpt_options(mc); /* the stored model's choices, each made */
    const struct {
        const char *flag;
        double given, stored;
    } v[] = {
        {"layers", g->mc.n_layer, mc->n_layer},
        {"heads", g->mc.n_head, mc->n_head},
        {"d-model", g->mc.n_embd, mc->n_embd},
        {"kv-heads", g->mc.n_kv_head, so.n_kv_head},
        {"llama", g->mc.style, mc->style},
        {"pos", g->mc.pos, so.pos},
        {"norm", g->mc.norm, so.norm},
        {"mlp", g->mc.mlp, so.mlp},
        {"bias", NN_GPT_BIAS_ON, so.bias},
        {"no-bias", NN_GPT_BIAS_OFF, so.bias},
        {"post-ln", g->mc.post_ln, mc->post_ln},
        {"ff", g->mc.ffn_hidden, so.ffn_hidden},
        {"rope-base", g->mc.rope_base, so.rope_base},
        {"untied", g->mc.untied, mc->untied},
        {"block-size", g->mc.block_size, mc->block_size},
        {"dropout", g->mc.dropout, mc->dropout},
        {"batch", g->batch, (double)g->pos[GP_POS_BATCH]},
        {"lr", g->oc.lr, oc->lr},
        {"lr-min", g->oc.schedule.lr_min, oc->schedule.lr_min},
        {"warmup", (double)g->oc.schedule.warmup, (double)oc->schedule.warmup},
        {"schedule-steps", (double)g->lr_decay_iters, (double)oc->schedule.total},
        {"beta2", g->oc.beta2, oc->beta2},
        {"weight-decay", g->wd, bitsd(g->pos[GP_POS_WD])},
        {"clip", g->clip, bitsd(g->pos[GP_POS_CLIP])},
        {"seed", (double)g->seed, (double)g->pos[GP_POS_SEED]},
        {"shards", g->shards, (double)g->pos[GP_POS_SHARDS]},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const Flag *f = flag_find(fl, n, v[i].flag);
        if (!f->given || v[i].given == v[i].stored) continue;
        char given[64], stored[64], spelled[64]; /* a choice by its name, a switch by the option */
        const char *const *names = choice_names(v[i].flag);
        if (f->type == FLAG_PATH) { /* --pos, --norm, --mlp */
            snprintf(given, sizeof given, " %s", *(const char **)f->ptr);
            snprintf(stored, sizeof stored, "%s", names[(int)v[i].stored]);
        } else if (f->type == FLAG_SWITCH) {
            given[0] = '\0';
            snprintf(stored, sizeof stored, "%s",
                     strcmp(v[i].flag, "llama") == 0 ? (mc->style ? "LLaMA" : "GPT-2")
                     : strstr(v[i].flag, "bias")
                         ? (so.bias == NN_GPT_BIAS_ON ? "biases" : "no biases")
                     : v[i].stored ? "on"
                                   : "off");
        } else {
            snprintf(given, sizeof given, " %.9g", v[i].given);
            snprintf(stored, sizeof stored, "%.9g", v[i].stored);
        }
        return ag_fail(AG_ERR_ARG,
                       "--%s%s differs from the checkpoint's (%s): --resume continues the run "
                       "with its model, optimizer, batch size and seed (start a new run with "
                       "--force to change them)",
                       flag_spelling(f, spelled, sizeof spelled), given, stored);
    }
    return AG_OK;
}

static int setup_resume(GpTrainer *g, Flag *fl, int n_fl) {
    if (!tr_file_exists(g->last_path))
        return ag_fail(AG_ERR_IO, "%s: no checkpoint to resume from (train without --resume first)",
                       g->last_path);
    NpzFile *f;
    GptConfig mc = {0};
    CkptConfig kc = nn_gpt_ckpt_config(&mc);
    int rc = ckpt_read(g->last_path, &kc, &f);
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    OptimConfig oc;
    int has = 0;
    rc = ckpt_optim_config(f, &oc, &has);
    if (rc == AG_OK && (!has || !npz_find(f, "rng.state") || !npz_find(f, "train.step")))
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no optimizer state or RNG: cannot resume from it",
                     f->path);
    int64_t step = 0;
    const NpzEntry *se = npz_find(f, "train.step");
    if (rc == AG_OK && se->dtype == NPZ_I64 && se->ndim == 0) memcpy(&step, se->data, sizeof step);
    if (rc == AG_OK) rc = check_position(f, step);
    int n_data = rc == AG_OK ? (int)npz_find(f, "data.position")->count : 0;
    if (rc != AG_OK) {
        npz_free(f);
        return rc;
    }
    GptConfig given_mc = g->mc;
    OptimConfig given_oc = g->oc;
    g->mc = mc;
    g->oc = oc;
    build(g, 0);
    Checkpoint ck = {.params = &g->m.params,
                     .config = nn_gpt_ckpt_config(&g->m.cfg),
                     .opt = g->opt,
                     .rng = &g->rng,
                     .n_data = n_data};
    rc = ckpt_load_from(f, &ck);
    npz_free(f);
    if (rc != AG_OK) return rc;
    int same_tok =
        ck.extra && ck.extra_len == g->tok_len && memcmp(ck.extra, g->tok_bytes, g->tok_len) == 0;
    free((void *)ck.extra);
    if (!same_tok)
        return ag_fail(AG_ERR_ARG, "%s/tokenizer is not the tokenizer %s was trained with", g->data,
                       g->last_path);
    memcpy(g->pos, ck.data, sizeof g->pos);
    if (n_data < GP_POS_COUNT) g->pos[GP_POS_SHARDS] = 1;
    g->step = optim_get_step(g->opt);
    if ((size_t)g->pos[GP_POS_N_TRAIN] != g->n_train ||
        (size_t)g->pos[GP_POS_N_VALID] != g->n_valid)
        return ag_fail(AG_ERR_ARG,
                       "%s holds %zu train and %zu valid tokens; %s was trained on %lld and "
                       "%lld: resume with the same data",
                       g->data, g->n_train, g->n_valid, g->last_path,
                       (long long)g->pos[GP_POS_N_TRAIN], (long long)g->pos[GP_POS_N_VALID]);
    GpTrainer given = *g;
    given.mc = given_mc;
    given.oc = given_oc;
    rc = check_given(&given, fl, n_fl, &mc, &oc);
    if (rc != AG_OK) return rc;
    g->batch = (int)g->pos[GP_POS_BATCH];
    g->seed = (uint64_t)g->pos[GP_POS_SEED];
    g->wd = bitsd(g->pos[GP_POS_WD]);
    g->clip = bitsd(g->pos[GP_POS_CLIP]);
    g->shards = (int)g->pos[GP_POS_SHARDS];
#define KEPT(field, flag, p)                                                                       \
    if (!flag_find(fl, n_fl, flag)->given) g->field = (int)g->pos[p]
    KEPT(eval_interval, "valid-every", GP_POS_EVAL_INTERVAL);
    KEPT(eval_iters, "eval-iters", GP_POS_EVAL_ITERS);
    KEPT(log_interval, "log-every", GP_POS_LOG_INTERVAL);
#undef KEPT
    if (!flag_find(fl, n_fl, "steps")->given) g->max_iters = g->oc.schedule.total;
    if (g->max_iters < g->step)
        return ag_fail(AG_ERR_ARG,
                       "--steps %lld: %s is already at step %lld: give more, or none to "
                       "finish the schedule",
                       (long long)g->max_iters, g->last_path, (long long)g->step);
    rc = txt_loader_init(&g->loader, NULL, 0, g->n_train, g->batch, g->mc.block_size, 1,
                         "train.bin");
    if (rc == AG_OK) rc = txt_loader_restore(&g->loader, g->pos + GP_POS_LOADER, g->last_path);
    g->saved_step = g->step;
    return rc;
}

static int setup_fresh(GpTrainer *g) {
    if (!g->force && tr_file_exists(g->last_path))
        return ag_fail(AG_ERR_ARG,
                       "%s exists: continue that run with --resume, or start a new one over it "
                       "with --force",
                       g->last_path);
    g->mc.vocab_size = txt_vocab_size(g->tok);
    int rc = nn_gpt_check_config(&g->mc, NULL);
    if (rc != AG_OK) {
        char why[400];
        snprintf(why, sizeof why, "%s", ag_last_error()); /* ag_fail writes the same buffer */
        return ag_fail(AG_ERR_ARG, "the model: %s", why);
    }
    if (g->lr_decay_iters == 0) g->lr_decay_iters = g->max_iters;
    g->oc.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, g->oc.schedule.warmup, g->lr_decay_iters,
                                     g->oc.schedule.lr_min};
    if (g->oc.schedule.warmup >= g->lr_decay_iters)
        return ag_fail(AG_ERR_ARG, "--warmup %lld must be below --schedule-steps %lld",
                       (long long)g->oc.schedule.warmup, (long long)g->lr_decay_iters);
    if (g->oc.schedule.lr_min > g->oc.lr)
        return ag_fail(AG_ERR_ARG, "--lr-min %g must not exceed --lr %g", g->oc.schedule.lr_min,
                       g->oc.lr);
    rc = txt_loader_init(&g->loader, NULL, 0, g->n_train, g->batch, g->mc.block_size,
                         rng_hash(g->seed, 2), "train.bin");
    if (rc != AG_OK) return rc;
    if (g->shards == 0) g->shards = dist_size();
    build(g, g->seed);
    memset(g->pos, 0, sizeof g->pos);
    g->pos[GP_POS_SHARDS] = g->shards;
    g->pos[GP_POS_SEED] = (int64_t)g->seed;
    g->pos[GP_POS_BATCH] = g->batch;
    g->pos[GP_POS_N_TRAIN] = (int64_t)g->n_train;
    g->pos[GP_POS_N_VALID] = (int64_t)g->n_valid;
    g->pos[GP_POS_WD] = dbits(g->wd);
    g->pos[GP_POS_CLIP] = dbits(g->clip);
    return AG_OK;
}

/* ---- validation ---- */

/* The mean loss of eval_iters batches of valid.bin, the same batches every time (a loader of
 * its own seed, started again): comparable from one validation to the next, and a pure function
 * of the weights, so a resumed run validates to the same bits. With P processes, process r
 * reads and computes batches r, r + P, ...; the losses, gathered (dist_sum_disjoint: exact),
 * are added in batch order, as one process does. AG_OK, or a data error (its message). */
static int validate(GpTrainer *g, double *vloss) {
    TxtLoader L;
    int rc = txt_loader_init(&L, NULL, 0, g->n_valid, g->batch, g->mc.block_size,
                             rng_hash(g->seed, 3), "valid.bin");
    AG_CHECK(rc == AG_OK, "%s", ag_last_error()); /* checked at the start */
    double sum = 0, part[256];
    int P = dist_size(), me = dist_rank();
    ag_no_grad(g->tape, 1);
    for (int i0 = 0; i0 < g->eval_iters && rc == AG_OK; i0 += 256) {
        int n = g->eval_iters - i0 < 256 ? g->eval_iters - i0 : 256;
        for (int i = 0; i < n; i++) {
            txt_loader_starts(&L, g->starts);
            part[i] = 0;
            if ((i0 + i) % P != me || rc != AG_OK) continue;
            rc = read_rows(g, g->valid_bin, 0, g->batch);
            if (rc != AG_OK) continue;
            ag_tape_reset(g->tape);
            part[i] =
                (double)nn_gpt_loss(g->tape, &g->m, g->x, g->y, g->batch, g->mc.block_size, NULL)
                    ->data[0];
        }
        if (rc == AG_OK) dist_sum_disjoint(part, n);
        for (int i = 0; i < n; i++) sum += part[i];
    }
    ag_no_grad(g->tape, 0);
    ag_tape_reset(g->tape);
    *vloss = sum / g->eval_iters;
    return rc;
}

/* ---- what the run prints and logs ---- */

static void progress(GpTrainer *g, double loss, int force) {
    if (g->quiet || !g->tty) return;
    double t = tr_now_s();
    if (!force && t - g->t_bar < 0.1) return;
    g->t_bar = t;
    double frac = (double)g->step / (double)g->max_iters;
    double per = (t - g->t_start) / (double)(g->step - g->step_start);
    char bar[21], eta[32];
    for (int i = 0; i < 20; i++) bar[i] = i < (int)(frac * 20) ? '#' : '.';
    bar[20] = '\0';
    tr_fmt_time(eta, sizeof eta, per * (double)(g->max_iters - g->step));
    int64_t n = g->pos[GP_POS_IV_STEPS];
    double tps =
        n && t > g->t_row ? (double)n * g->batch * g->mc.block_size / (t - g->t_row) : g->last_tps;
    if (n) loss = bitsd(g->pos[GP_POS_IV_LOSS]) / (double)n;
    printf("\r[%s] step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\033[K", bar,
           (long long)g->step, (long long)g->max_iters, loss, g->opt->last_lr, tps, eta);
    fflush(stdout);
}

static void end_bar(GpTrainer *g) {
    if (!g->quiet && g->tty) {
        printf("\n");
        fflush(stdout);
    }
}

/* A CSV row of the means since the last one (and the validation loss when valid). */
static int log_row(GpTrainer *g, int valid, double vloss) {
    int64_t *p = g->pos;
    double n = p[GP_POS_IV_STEPS] > 0 ? (double)p[GP_POS_IV_STEPS] : 1, t = tr_now_s();
    double loss = bitsd(p[GP_POS_IV_LOSS]) / n, norm = bitsd(p[GP_POS_IV_NORM]) / n;
    double tps = t > g->t_row
                     ? (double)p[GP_POS_IV_STEPS] * g->batch * g->mc.block_size / (t - g->t_row)
                     : 0;
    if (!g->csv) goto done; /* not process 0 */
    fprintf(g->csv, "%lld,%.6f,%.6e,%.6f,%.0f,", (long long)g->step, loss, g->opt->last_lr, norm,
            tps);
    if (valid)
        fprintf(g->csv, "%.6f\n", vloss);
    else
        fputs("\n", g->csv);
    if (fflush(g->csv) != 0 || ferror(g->csv))
        return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", g->csv_path,
                       strerror(errno ? errno : EIO));
    if (!g->quiet && !g->tty) {
        char eta[32];
        double per = (t - g->t_start) / (double)(g->step - g->step_start);
        tr_fmt_time(eta, sizeof eta, per * (double)(g->max_iters - g->step));
        printf("step %lld/%lld  loss %.4f  lr %.2e  grad %.3f  %.0f tok/s  ETA %s\n",
               (long long)g->step, (long long)g->max_iters, loss, g->opt->last_lr, norm, tps, eta);
        fflush(stdout);
    }
done:
    g->last_tps = tps;
    p[GP_POS_IV_LOSS] = p[GP_POS_IV_NORM] = dbits(0);
    p[GP_POS_IV_STEPS] = 0;
    g->t_row = t;
    return AG_OK;
}

static void stopped(GpTrainer *g, int64_t s, const char *what, double value) {
    end_bar(g);
    fprintf(stderr,
            GP_PROG " train: step %lld: %s is %s: training stopped. The last good checkpoint is "
                    "%s (step %lld)\n",
            (long long)s, what,
            isnan(value) ? "nan"
            : value > 0  ? "inf"
                         : "-inf",
            g->last_path, (long long)g->saved_step);
}

/* ---- the loop ---- */

/* Shard i of the batch (rows i B/S .. (i + 1) B/S - 1), its own dropout RNG: the same numbers
 * whichever process computes it. */
static Tensor *shard_loss(void *ctx, Tape *t, int i) {
    GpTrainer *g = ctx;
    int b = g->batch / g->shards;
    size_t off = (size_t)i * (size_t)b * (size_t)g->mc.block_size;
    Rng r;
    rng_seed(&r, rng_hash(g->shard_seed, (uint64_t)i));
    return nn_gpt_loss(t, &g->m, g->x + off, g->y + off, b, g->mc.block_size, &r);
}

/* The next batch: every process draws all its windows (the same draws, so the loader's state
 * is the same whatever P) and reads those of the rows of its shards. AG_OK or a data error. */
static int next_batch(GpTrainer *g) {
    txt_loader_starts(&g->loader, g->starts);
    int b = g->batch / g->shards, lo = g->dist ? g->dist->lo : 0, hi = g->dist ? g->dist->hi : 1;
    return read_rows(g, g->train_bin, lo * b, hi * b);
}

/* One step: the loss of the batch read, backward, clipping, decay and AdamW's update. NULL, or
 * what was not finite (then nothing was updated). */
static const char *train_step(GpTrainer *g, int64_t s, double *loss, double *norm) {
    if (g->inject_nan == s) g->m.wte.weight->data[0] = (Real)NAN; /* fault tests */
    if (g->dist) { /* the shards' mean gradient and loss, the same in every process */
        g->shard_seed = rng_u64(&g->rng);
        *loss = dist_grad_step(g->dist, g->tape, shard_loss, g);
        if (!isfinite(*loss)) return "the training loss";
    } else {
        ag_tape_reset(g->tape);
        ag_params_zero_grad(&g->m.params);
        Tensor *l = nn_gpt_loss(g->tape, &g->m, g->x, g->y, g->batch, g->mc.block_size, &g->rng);
        *loss = (double)l->data[0];
        if (!isfinite(*loss)) return "the training loss";
        ag_backward(g->tape, l);
    }
    *norm = optim_clip_grad_norm(&g->m.params, g->clip > 0 ? g->clip : DBL_MAX);
    if (!isfinite(*norm)) return "the gradient norm";
    /* AdamW's decoupled decay, p *= 1 - lr wd, on the parameters of two or more dimensions
     * (the Linear weights and the embeddings; not biases nor LayerNorms) as torch's AdamW
     * does first in its step, in the same pass as the update */
    optim_step_decay(g->opt, g->wd, 2);
    return NULL;
}

/* A token of the data could not be used (outside the vocabulary, a file cut short): the
 * message names the file; the run stops (exit 2), the other processes with it. */
static int data_failed(GpTrainer *g) {
    end_bar(g);
    fprintf(stderr,
            GP_PROG " train: %s: training stopped at step %lld. The last good checkpoint is %s "
                    "(step %lld)\n",
            ag_last_error(), (long long)g->step, g->last_path, (long long)g->saved_step);
    dist_abort(TR_EXIT_USAGE); /* the others would wait for this process */
    return TR_EXIT_USAGE;
}

/* After step s: the row's sums, the progress line, then validation, a CSV row and last.npz
 * when they are due. An exit code. */
static int after_step(GpTrainer *g, int64_t s, double l, double norm) {
    int64_t *p = g->pos;
    p[GP_POS_IV_LOSS] = dbits(bitsd(p[GP_POS_IV_LOSS]) + l);
    p[GP_POS_IV_NORM] = dbits(bitsd(p[GP_POS_IV_NORM]) + norm);
    p[GP_POS_IV_STEPS]++;
    progress(g, l, 0);
    int valid_due = s % g->eval_interval == 0 || s == g->max_iters;
    double vloss = 0;
    if (valid_due) {
        if (validate(g, &vloss) != AG_OK) return data_failed(g);
        if (!isfinite(vloss)) {
            stopped(g, s, "the valid loss", vloss);
            return TR_EXIT_FAIL;
        }
        int better = p[GP_POS_BEST_STEP] == 0 || vloss < bitsd(p[GP_POS_BEST_LOSS]);
        p[GP_POS_LAST_VALID] = s;
        if (better) {
            p[GP_POS_BEST_STEP] = s;
            p[GP_POS_BEST_LOSS] = dbits(vloss);
        }
        if (!g->quiet) {
            end_bar(g);
            printf("valid at step %lld: loss %.4f%s\n", (long long)s, vloss,
                   better ? ", best so far" : "");
            fflush(stdout);
        }
        if (better && save(g, g->best_path) != AG_OK) return TR_EXIT_FAIL;
    }
    if (s % g->log_interval == 0 || valid_due) {
        if (log_row(g, valid_due, vloss) != AG_OK) {
            fprintf(stderr, GP_PROG " train: %s\n", ag_last_error());
            dist_abort(TR_EXIT_FAIL);
            return TR_EXIT_FAIL;
        }
        if (valid_due && g->csv) {
            tr_train_plot(GP_PROG, g->csv_path, 0,
                          0); /* loss.png, outside the next row's tokens/s */
            g->t_row = tr_now_s();
        }
        progress(g, l, 1);
    }
    if (valid_due && save(g, g->last_path) != AG_OK) return TR_EXIT_FAIL;
    return TR_EXIT_OK;
}

static int run(GpTrainer *g) {
    struct sigaction old[2];
    tr_signals_catch(old);
    g->t_start = g->t_row = g->t_bar = tr_now_s();
    g->step_start = g->step;
    int code = TR_EXIT_OK, interrupted = 0;
    if (!g->resume && save(g, g->last_path) != AG_OK) code = TR_EXIT_FAIL;
    while (code == TR_EXIT_OK && g->step < g->max_iters) {
        if (tr_stop_any()) { /* a signal to any process stops all */
            interrupted = 1;
            break;
        }
        int64_t s = g->step + 1;
        double l = 0, norm = 0;
        if (next_batch(g) != AG_OK) {
            code = data_failed(g);
            break;
        }
        const char *what = train_step(g, s, &l, &norm);
        if (what) {
            stopped(g, s, what, isfinite(l) ? norm : l);
            code = TR_EXIT_FAIL;
            break;
        }
        g->step = s;
        code = after_step(g, s, l, norm);
    }
    end_bar(g);
    if (code == TR_EXIT_OK && interrupted) {
        int sig = tr_stop_signal ? tr_stop_signal : SIGINT;
        if (save(g, g->last_path) != AG_OK) {
            code = TR_EXIT_FAIL;
        } else {
            if (dist_rank() == 0)
                fprintf(stderr,
                        GP_PROG " train: interrupted by %s at step %lld: saved %s; continue with "
                                "--resume\n",
                        sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)g->step, g->last_path);
            code = sig == SIGTERM ? TR_EXIT_SIGTERM : TR_EXIT_SIGINT;
        }
    } else if (code == TR_EXIT_OK && !g->quiet) {
        double spent = tr_now_s() - g->t_start;
        char t[32];
        tr_fmt_time(t, sizeof t, spent);
        printf("done: step %lld in %s (%.0f tokens/s)\n", (long long)g->step, t,
               (double)(g->step - g->step_start) * g->batch * g->mc.block_size /
                   (spent > 0 ? spent : 1));
        if (g->pos[GP_POS_BEST_STEP] > 0)
            printf("best: step %lld, valid loss %.4f -> %s\n", (long long)g->pos[GP_POS_BEST_STEP],
                   bitsd(g->pos[GP_POS_BEST_LOSS]), g->best_path);
        printf("latest: %s; log: %s\n", g->last_path, g->csv_path);
        tr_dist_summary(g->dist);
    }
    if (g->csv) tr_train_plot(GP_PROG, g->csv_path, !g->quiet, 1);
    dist_any(0); /* no process exits (and so ends the job) before process 0 has saved */
    tr_signals_restore(old);
    fflush(stdout);
    return code;
}

static void trainer_free(GpTrainer *g) {
    if (g->csv) fclose(g->csv);
    dist_grad_free(g->dist);
    if (g->tape) ag_tape_free(g->tape);
    if (g->step_arena) arena_free(g->step_arena);
    if (g->params) {
        nn_gpt_free(&g->m);
        arena_free(g->params);
    }
    if (g->tok) txt_free(g->tok);
    free(g->tok_bytes);
    txt_shard_close(g->train_bin);
    txt_shard_close(g->valid_bin);
    free(g->last_path);
    free(g->best_path);
    free(g->csv_path);
    free(g->x);
    free(g->y);
    free(g->win);
    free(g->starts);
}

int gp_train(int argc, char **argv) {
    GpTrainer T, *g = &T;
    memset(g, 0, sizeof *g);
    /* nanoGPT's config/train_shakespeare_char.py, and its README's CPU run */
    g->mc =
        (GptConfig){.block_size = 256, .n_layer = 6, .n_head = 6, .n_embd = 384, .dropout = 0.2};
    g->oc = optim_defaults(OPTIM_ADAMW);
    g->oc.lr = 1e-3;
    g->oc.beta2 = 0.99;
    g->oc.weight_decay = 0; /* train_step applies --weight-decay (optim_step_decay) */
    g->oc.schedule.warmup = 100;
    g->oc.schedule.lr_min = 1e-4;
    g->batch = 64;
    g->max_iters = 5000;
    g->wd = 0.1;
    g->clip = 1.0;
    g->eval_interval = 250;
    g->eval_iters = 200;
    g->log_interval = 10;
    g->seed = 1337;
    g->out = NULL;
    int64_t seed = 1337;
    int llama = 0, bias = 0;
    const char *pos = NULL, *norm = NULL, *mlp = NULL;
    Flag fl[] = {
        {"data", FLAG_PATH, &g->data, NULL, "the prepared folder (prepare --out)", 0, 0, NULL, 0},
        {"out", FLAG_PATH, &g->out, NULL, "where last.npz, best.npz, log.csv go", 0, 0, NULL, 0},
        {"layers|n-layer", FLAG_INT, &g->mc.n_layer, NULL, "blocks", 1, NN_GPT_MAX_LAYERS, NULL, 0},
        {"heads|n-head", FLAG_INT, &g->mc.n_head, NULL, "attention heads", 1, 1024, NULL, 0},
        {"d-model|n-embd", FLAG_INT, &g->mc.n_embd, NULL, "the model's width", 1, 8192, NULL, 0},
        {"kv-heads|n-kv-head", FLAG_INT, &g->mc.n_kv_head, NULL,
         "key/value heads (0: --heads; fewer: grouped-query)", 0, 1024, NULL, 0},
        {"llama", FLAG_SWITCH, &llama, NULL,
         "LLaMA's defaults and names (RoPE, RMSNorm, SwiGLU, no biases) instead of GPT-2's", 1, 0,
         NULL, 0},
        {"pos", FLAG_PATH, &pos, "NAME",
         "positions: learned|rope|none (default: GPT-2 learned, --llama rope)", 0, 0, NULL, 0},
        {"norm", FLAG_PATH, &norm, "NAME",
         "norms: layernorm|rmsnorm|none (default: GPT-2 layernorm, --llama rmsnorm)", 0, 0, NULL,
         0},
        {"mlp", FLAG_PATH, &mlp, "NAME",
         "feed-forward: gelu|swiglu|none (none: attention only; default: GPT-2 gelu, --llama "
         "swiglu)",
         0, 0, NULL, 0},
        {"ff|ffn-hidden", FLAG_INT, &g->mc.ffn_hidden, NULL,
         "the MLP's width (0: gelu 4 d-model, swiglu llama2.c's 8/3 d-model)", 0, 1 << 20, NULL, 0},
        {"rope-base", FLAG_DOUBLE, &g->mc.rope_base, NULL, "RoPE's base (0: 10000)", 0, 1e9, NULL,
         0},
        {"bias", FLAG_SWITCH, &bias, NULL, "biases in the Linear layers and LayerNorms (GPT-2's)",
         1, 0, NULL, 0},
        {"no-bias", FLAG_SWITCH, &g->mc.no_bias, NULL, "no biases (nanoGPT's bias=False; LLaMA's)",
         1, 0, NULL, 0},
        {"post-ln", FLAG_SWITCH, &g->mc.post_ln, NULL,
         "post-LN blocks, norm(x + f(x)), no final norm (default: pre-LN)", 1, 0, NULL, 0},
        {"untied", FLAG_SWITCH, &g->mc.untied, NULL, "a head of its own (not the embeddings)", 1, 0,
         NULL, 0},
        {"block-size", FLAG_INT, &g->mc.block_size, NULL, "context length (tokens)", 1, 1 << 16,
         NULL, 0},
        {"dropout", FLAG_DOUBLE, &g->mc.dropout, NULL, "dropout rate", 0, 0.99, NULL, 0},
        {"batch|batch-size", FLAG_INT, &g->batch, NULL, "windows a step", 1, 1 << 16, NULL, 0},
        {"steps|max-iters", FLAG_I64, &g->max_iters, NULL, "steps of the run", 1, 1e12, NULL, 0},
        {"lr", FLAG_DOUBLE, &g->oc.lr, NULL, "the peak learning rate", 0, FLAG_LR_MAX, NULL, 0},
        {"lr-min|min-lr", FLAG_DOUBLE, &g->oc.schedule.lr_min, NULL, "where the cosine ends", 0,
         FLAG_LR_MAX, NULL, 0},
        {"warmup|warmup-iters", FLAG_I64, &g->oc.schedule.warmup, NULL, "linear warmup steps", 0,
         1e12, NULL, 0},
        {"schedule-steps|lr-decay-iters", FLAG_I64, &g->lr_decay_iters, NULL,
         "the step where the cosine reaches --lr-min (default: --steps)", 1, 1e12, NULL, 0},
        {"beta2", FLAG_DOUBLE, &g->oc.beta2, NULL, "AdamW's beta2", 0, 0.999999, NULL, 0},
        {"weight-decay", FLAG_DOUBLE, &g->wd, NULL, "AdamW's decay of 2-D weights", 0, FLAG_WD_MAX,
         NULL, 0},
        {"clip|grad-clip", FLAG_DOUBLE, &g->clip, NULL, "clip the gradient norm (0: no)", 0,
         FLAG_CLIP_MAX, NULL, 0},
        {"valid-every|eval-interval", FLAG_INT, &g->eval_interval, NULL,
         "steps between validations and last.npz", 1, 1 << 30, NULL, 0},
        {"eval-iters", FLAG_INT, &g->eval_iters, NULL, "batches of a validation", 1, 1 << 30, NULL,
         0},
        {"log-every|log-interval", FLAG_INT, &g->log_interval, NULL, "steps between CSV rows", 1,
         1 << 30, NULL, 0},
        {"seed", FLAG_I64, &seed, NULL, "initialisation, batches, dropout", 0, 9007199254740992.0,
         NULL, 0},
        {"shards", FLAG_INT, &g->shards, NULL,
         "micro-shards a batch, summed in a fixed order: the same bits for any number of "
         "processes (0: one a process; docs/mpi.md)",
         0, 1 << 16, NULL, 0},
        {"threads", FLAG_INT, &g->threads, NULL, "0: the CPUs (OMP_NUM_THREADS)", 0, 1024, NULL, 0},
        {"resume", FLAG_SWITCH, &g->resume, NULL, "continue OUT/last.npz", 1, 0, NULL, 0},
        {"force", FLAG_SWITCH, &g->force, NULL, "start over an existing run", 1, 0, NULL, 0},
        {"quiet", FLAG_SWITCH, &g->quiet, NULL, "print errors only", 1, 0, NULL, 0},
        {"inject-nan", FLAG_I64, &g->inject_nan, NULL, "(tests) a NaN weight at that step", 1, 1e12,
         NULL, 0},
    };
    int n_fl = (int)(sizeof fl / sizeof fl[0]), help;
    int rc = gp_parse(argc, argv, 2, fl, n_fl, &help);
    if (help) {
        gp_usage("train", "trains a GPT on DATA (prepare's folder)", fl, n_fl);
        return TR_EXIT_OK;
    }
    g->seed = (uint64_t)seed;
    g->mc.style = llama ? NN_LLAMA : NN_GPT2;
    int pos_k = 0, norm_k = 0, mlp_k = 0;
    if (rc == AG_OK) rc = parse_choice(fl, n_fl, "pos", &pos_k);
    if (rc == AG_OK) rc = parse_choice(fl, n_fl, "norm", &norm_k);
    if (rc == AG_OK) rc = parse_choice(fl, n_fl, "mlp", &mlp_k);
    g->mc.pos = (NnGptPos)pos_k, g->mc.norm = (NnGptNorm)norm_k, g->mc.mlp = (NnGptMlp)mlp_k;
    if (rc == AG_OK && bias && g->mc.no_bias)
        rc = ag_fail(AG_ERR_ARG, "--bias and --no-bias: choose one");
    if (bias) g->mc.bias = NN_GPT_BIAS_ON;
    if (rc == AG_OK && (!g->data || !g->out))
        rc = ag_fail(AG_ERR_ARG, "--data and --out are required");
    if (rc == AG_OK && (int64_t)g->batch * g->mc.block_size > GP_MAX_STEP_TOKENS)
        rc = ag_fail(AG_ERR_ARG, "--batch %d x --block-size %d: more than %d tokens a step",
                     g->batch, g->mc.block_size, GP_MAX_STEP_TOKENS);
    if (rc == AG_OK && g->resume && g->force)
        rc = ag_fail(AG_ERR_ARG, "--resume and --force: choose one");
    int threads = ag_threads_use(g->threads);
    if (rc == AG_OK) {
        g->last_path = io_path_join(g->out, "last.npz");
        g->best_path = io_path_join(g->out, "best.npz");
        g->csv_path = io_path_join(g->out, "log.csv");
        rc = read_data(g);
    }
    if (rc == AG_OK) rc = g->resume ? setup_resume(g, fl, n_fl) : setup_fresh(g);
    if (rc == AG_OK && (g->batch % g->shards != 0 || g->shards < dist_size()))
        rc = ag_fail(AG_ERR_ARG,
                     "--shards %d: must divide the batch size %d and be at least the %d "
                     "processes",
                     g->shards, g->batch, dist_size());
    if (rc == AG_OK && g->resume && (int64_t)g->batch * g->mc.block_size > GP_MAX_STEP_TOKENS)
        rc = ag_fail(AG_ERR_RANGE, "%s: batch %d x block_size %d: more than %d tokens a step",
                     g->last_path, g->batch, g->mc.block_size, GP_MAX_STEP_TOKENS);
    if (rc == AG_OK) { /* the valid split must hold a window too */
        TxtLoader L;
        rc = txt_loader_init(&L, NULL, 0, g->n_valid, g->batch, g->mc.block_size, 1, "valid.bin");
    }
    if (rc == AG_OK && dist_rank() == 0) rc = tr_make_dirs(g->out);
    /* every process stops when one cannot start; process 0 says why (the others when it could) */
    int print;
    rc = dist_agree(rc, &print);
    if (rc != AG_OK) {
        if (print) fprintf(stderr, GP_PROG " train: %s\n", ag_last_error());
        trainer_free(g);
        return rc == AG_ERR_NOMEM ? TR_EXIT_FAIL : TR_EXIT_USAGE;
    }
    g->step_arena = arena_new("step", 0);
    g->tape = ag_tape_new(g->step_arena);
    g->x = tr_malloc((size_t)g->batch * (size_t)g->mc.block_size * sizeof(int));
    g->y = tr_malloc((size_t)g->batch * (size_t)g->mc.block_size * sizeof(int));
    g->win = tr_malloc(((size_t)g->mc.block_size + 1) * sizeof(int));
    g->starts = tr_malloc((size_t)g->batch * sizeof(size_t));
    g->tty = isatty(STDOUT_FILENO);
    g->pos[GP_POS_EVAL_INTERVAL] = g->eval_interval; /* on resume: the checkpoint's, or given */
    g->pos[GP_POS_EVAL_ITERS] = g->eval_iters;
    g->pos[GP_POS_LOG_INTERVAL] = g->log_interval;
    if (dist_rank() == 0 &&
        tr_csv_open(g->csv_path, csv_header, g->step, g->resume, &g->csv) != AG_OK) {
        fprintf(stderr, GP_PROG " train: %s\n", ag_last_error());
        dist_abort(TR_EXIT_FAIL);
        trainer_free(g);
        return TR_EXIT_FAIL;
    }
    if (g->shards > 1 || dist_size() > 1) g->dist = dist_grad_new(&g->m.params, g->shards);
    tr_dist_warn_threads(GP_PROG, threads);
    if (dist_rank() != 0) g->quiet = 1;
    if (!g->quiet) {
        printf("kernels: %s, %d threads\n", ag_kernel_family(), threads);
        if (g->resume) printf("resuming %s at step %lld\n", g->last_path, (long long)g->step);
        tr_dist_line(g->dist, g->batch, "windows");
        GptConfig o = nn_gpt_options(&g->mc);
        printf("model: %d layers, %d heads (%d key/value), n_embd %d, block %d, vocabulary %d, "
               "dropout %g; %zu parameters\n",
               g->mc.n_layer, g->mc.n_head, o.n_kv_head, g->mc.n_embd, g->mc.block_size,
               g->mc.vocab_size, g->mc.dropout, ag_params_count(&g->m.params));
        printf("block: %s names; positions %s, norm %s, %s, mlp %s (%d wide), %s, %s head\n",
               g->mc.style == NN_LLAMA ? "LLaMA's" : "GPT-2's", pos_names[o.pos],
               norm_names[o.norm], o.post_ln ? "post-LN" : "pre-LN", mlp_names[o.mlp], o.ffn_hidden,
               o.bias == NN_GPT_BIAS_ON ? "biases" : "no biases", o.untied ? "untied" : "tied");
        printf("data: %zu train tokens, %zu valid; batch %d x %d tokens; AdamW lr %g -> %g "
               "(warmup %lld, cosine to step %lld), weight decay %g, clip %g\n",
               g->n_train, g->n_valid, g->batch, g->mc.block_size, g->oc.lr, g->oc.schedule.lr_min,
               (long long)g->oc.schedule.warmup, (long long)g->oc.schedule.total, g->wd, g->clip);
        printf("training to step %lld; validation every %d steps (%d batches); writing %s, %s, "
               "%s\n",
               (long long)g->max_iters, g->eval_interval, g->eval_iters, g->last_path, g->best_path,
               g->csv_path);
        fflush(stdout);
    }
    int code = run(g);
    trainer_free(g);
    return code;
}
