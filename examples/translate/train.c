/* train.c: `attograd-translate train` on the library's run loop (src/run, docs/run.md): the
 * translator gives its flags, the model (built from them, or on --resume from the checkpoint's
 * meta.config), a step's length-bucketed batch (src/text's txt_pair_loader), the loss of a
 * shard weighted by its target tokens, the validation (loss and greedy exact match,
 * interruptible: a signal during it saves, and --resume validates that step first), the
 * loader's position as its state, the vocabularies in meta.extra, the epoch column of the CSV; the run gives the rest: Adam, the
 * schedules, clipping, --shards and mpirun, the CSV, progress, loss.png, best.npz and last.npz
 * (zlib level --compress), SIGINT and the NaN stop (--check-finite names the op), --resume to
 * the bit. Checkpoints written before the run loop (their positional data.position, POS_*,
 * checked by tr_check_position) still resume to the bit (legacy).
 * --report-rss: the run's memory report (run_report_memory; make soak).
 * Not here: the flags of the other commands (cli.c), decoding and metrics (decode.c), checking
 * a configuration (model_config.c). Read next: cli.c. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "translate.h"

/* ---- the model's callbacks ---- */

/* The loss of a shard is its mean over its target tokens times their share of the batch's:
 * the batch's loss is the mean over all its non-padding tokens (nn_seq2seq_loss), so the
 * normalizer is the whole batch's token count, whichever process holds the shard. */
Tensor *tr_shard_loss(Seq2Seq *m, Tape *t, const TxtPairSet *d, const TxtPairBatch *b, int i, int S,
                      TxtPairBatch *sb, Rng *rng) {
    AG_CHECK(S >= 1 && i >= 0 && i < S && b->B >= 1,
             "tr_shard_loss: shard %d of %d of a batch of %d rows", i, S, b->B);
    int r0 = (int)((int64_t)i * b->B / S), r1 = (int)((int64_t)(i + 1) * b->B / S);
    if (r1 == r0) return NULL;
    txt_pair_batch_make(sb, d->pairs, b->rows + r0, r1 - r0);
    Tensor *l = nn_seq2seq_loss(t, m, sb->src, sb->S, sb->tgt_in, sb->tgt_out, sb->B, sb->T, rng);
    return ag_scale(t, l, (double)sb->n_tgt_tokens / (double)b->n_tgt_tokens);
}

/* the model's state beside the run's (meta.run.model.*): the loader's position and seed, the
 * training file's pairs (a resume needs the same data) */
typedef struct {
    int64_t epoch, cursor, loader_seed, n_train;
} TrState;

static const CkptField state_fields[] = {
    {"epoch", CKPT_FIELD_INT, offsetof(TrState, epoch), 8, 0, (double)CKPT_MAX_STEP, 0},
    {"cursor", CKPT_FIELD_INT, offsetof(TrState, cursor), 8, 0, INT_MAX, 0},
    {"loader_seed", CKPT_FIELD_INT, offsetof(TrState, loader_seed), 8, -1e19, 1e19, 0},
    {"n_train", CKPT_FIELD_INT, offsetof(TrState, n_train), 8, 1, INT_MAX, 0},
};

typedef struct {
    RunConfig rc;
    RunModel model;
    RunLoop *run;
    Flag *fl;
    int n_fl;
    /* the model's flags */
    const char *data, *train, *valid;
    int no_valid, tokenizer, vocab, layers, enc, dec, kv_heads, act, epochs, valid_max;
    double embed_gain, max_memory;
    Seq2SeqConfig given; /* the model's flags as a configuration */
    Seq2SeqConfig mc;    /* the model: the flags' (a new run) or the checkpoint's (--resume) */
    TrState st;
    TxtVocab src, tgt;
    TxtPairSet train_d, valid_d;
    int have_valid, built, ready;
    Seq2Seq m;
    Arena *arena;
    TxtPairLoader loader;
    TxtPairBatch batch, shard;
    char *vocab_text;
} TrRun;

static const Flag *find(const TrRun *g, const char *name) {
    return flag_find(g->fl, g->n_fl, name);
}

/* ---- data ---- */

static int read_data(TrRun *g, int grow) {
    char tp[600], vp[600];
    snprintf(tp, sizeof tp, "%s/train.tsv", g->data);
    snprintf(vp, sizeof vp, "%s/valid.tsv", g->data);
    const char *train = g->train ? g->train : tp, *valid = g->valid ? g->valid : vp;
    int max_tokens = g->mc.max_len - 1;
    int rc = txt_pairs_read(train, &g->train_d, &g->src, &g->tgt, grow, max_tokens);
    if (rc == AG_OK && !g->no_valid) {
        rc = txt_pairs_read(valid, &g->valid_d, &g->src, &g->tgt, 0, max_tokens);
        g->have_valid = rc == AG_OK;
    }
    if (rc == AG_OK && !grow && g->train_d.n != g->st.n_train)
        rc = ag_fail(AG_ERR_ARG,
                     "%s has %d pairs; the checkpoint was trained on %lld: resume with the same "
                     "data",
                     train, g->train_d.n, (long long)g->st.n_train);
    return rc;
}

static int64_t n_batches(const TrRun *g) { return (g->train_d.n + g->rc.batch - 1) / g->rc.batch; }

/* A batch too big for the memory is the user's flag, refused before the run. A step of two
 * rows, the longest source and the longest target (each row padded to both lengths, as in the
 * largest batch), is run and measured; the largest batch has min(--batch, pairs) such rows.
 * The parameters keep their values; every step zeroes the gradients this one leaves. */
static int check_step_memory(TrRun *g) {
    const TxtPairSet *d = &g->train_d;
    int rows[2] = {0, 0};
    for (int i = 1; i < d->n; i++) {
        if (d->pairs[i].src_len > d->pairs[rows[0]].src_len) rows[0] = i;
        if (d->pairs[i].tgt_len > d->pairs[rows[1]].tgt_len) rows[1] = i;
    }
    TxtPairBatch b;
    memset(&b, 0, sizeof b);
    txt_pair_batch_make(&b, d->pairs, rows, 2);
    Arena *a = arena_new("step", 0);
    Tape *t = ag_tape_new(a);
    Rng rng; /* dropout's draws: the memory is the same whatever they are */
    rng_seed(&rng, 0);
    ag_backward(t, nn_seq2seq_loss(t, &g->m, b.src, b.S, b.tgt_in, b.tgt_out, 2, b.T, &rng));
    int B = g->rc.batch < d->n ? g->rc.batch : d->n;
    double need = (double)a->used / 2 * B, gib = (double)(1 << 30);
    ag_tape_free(t);
    arena_free(a);
    txt_pair_batch_free(&b);
    ag_params_zero_grad(&g->m.params);
    double limit = g->max_memory * gib;
    if (limit <= 0) limit = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (limit <= 0 || need <= limit) return AG_OK;
    return ag_fail(AG_ERR_ARG,
                   "--batch %d: a step of %d pairs of up to %d source and %d target tokens needs "
                   "%.2f GiB, more than %s%.2f GiB: use a smaller --batch",
                   g->rc.batch, B, d->max_src, d->max_tgt, need / gib,
                   g->max_memory > 0 ? "--max-memory " : "this machine's memory of ", limit / gib);
}

/* The data read and the model built: the loader at the state's position, the step's memory
 * checked, what a run says before its first step */
static int ready(TrRun *g) {
    int64_t nb = n_batches(g), step = run_last_step(g->run);
    if (g->st.cursor > nb || g->st.epoch * nb + g->st.cursor != step)
        return ag_fail(AG_ERR_RANGE,
                       "%s/last.npz: the loader's position, epoch %lld, cursor %lld: with %lld "
                       "batches an epoch that is not step %lld: the loader takes one batch a step",
                       g->rc.out, (long long)g->st.epoch, (long long)g->st.cursor, (long long)nb,
                       (long long)step);
    txt_pair_loader_init(&g->loader, g->train_d.pairs, g->train_d.n, g->rc.batch,
                         (uint64_t)g->st.loader_seed);
    txt_pair_loader_seek(&g->loader, g->st.epoch, g->st.cursor);
    g->ready = 1;
    if (find(g, "epochs")->given) g->rc.steps = g->epochs * nb;
    if (g->rc.steps < step)
        return ag_fail(AG_ERR_ARG,
                       "--%s asks for %lld steps, but %s/last.npz is already at step %lld: give "
                       "more steps, or none to finish the run",
                       find(g, "epochs")->given ? "epochs" : "steps", (long long)g->rc.steps,
                       g->rc.out, (long long)step);
    g->vocab_text = txt_vocab_pair_save(&g->src, &g->tgt, &g->model.extra_len);
    g->model.extra = g->vocab_text;
    int rc = check_step_memory(g);
    if (rc != AG_OK || g->rc.quiet) return rc;
    const Seq2SeqConfig *m = &g->mc;
    printf("model: d_model %d, %d heads (%d key/value), %d+%d layers, ff %d, dropout %g, "
           "%s; %zu parameters\n",
           m->layer.d_model, m->layer.n_heads, m->layer.n_kv_heads, m->n_enc_layers,
           m->n_dec_layers, m->layer.d_ff, m->layer.dropout, m->layer.pre_ln ? "pre-LN" : "post-LN",
           ag_params_count(&g->m.params));
    printf("data: %d training pairs (%d batches of %d an epoch), %d valid pairs; "
           "vocabularies %d source, %d target words\n",
           g->train_d.n, g->loader.n_batches, g->loader.batch_size,
           g->have_valid ? g->valid_d.n : 0, g->src.n, g->tgt.n);
    fflush(stdout);
    return AG_OK;
}

/* ---- the run's callbacks ---- */

/* The checks of the flags among themselves (also tr_check_args'): AG_OK or AG_ERR_ARG */
static int check_flags(TrRun *g) {
    if (find(g, "steps")->given && find(g, "epochs")->given)
        return ag_fail(AG_ERR_ARG, "give --steps or --epochs, not both");
    if (find(g, "vocab")->given && g->tokenizer != TXT_VOCAB_BPE)
        return ag_fail(AG_ERR_ARG, "--vocab needs --tokenizer bpe");
    Seq2SeqConfig *m = &g->given;
    m->n_enc_layers = g->enc >= 0 ? g->enc : g->layers;
    m->n_dec_layers = g->dec >= 0 ? g->dec : g->layers;
    m->layer.n_kv_heads = g->kv_heads > 0 ? g->kv_heads : m->layer.n_heads;
    m->layer.act = (NnActivation)g->act;
    if (m->layer.d_model % m->layer.n_heads != 0)
        return ag_fail(AG_ERR_ARG, "--heads %d does not divide --d-model %d", m->layer.n_heads,
                       m->layer.d_model);
    if (m->layer.n_heads % m->layer.n_kv_heads != 0)
        return ag_fail(AG_ERR_ARG, "--kv-heads %d does not divide --heads %d", m->layer.n_kv_heads,
                       m->layer.n_heads);
    return AG_OK;
}

/* The flags read (RunModel.start): they agree with each other; a new run reads its data, grows
 * the vocabularies and resolves the schedule's defaults */
static int start(void *ctx) {
    TrRun *g = ctx;
    RunConfig *c = &g->rc;
    int rc = check_flags(g);
    if (rc != AG_OK) return rc;
    ag_threads_use_flag(TR_PROG, c->threads); /* a warning when more than the CPUs */
    if (c->optim.momentum == 0) c->optim.nesterov = 0;
    if (c->optim.kind == OPTIM_ADAMW && !find(g, "weight-decay")->given) c->weight_decay = 0.01;
    if (c->resume) {
        if (find(g, "embed-gain")->given)
            fprintf(stderr, TR_PROG " train: warning: --embed-gain has no effect on --resume (it "
                                    "only scales the initial embeddings)\n");
        return AG_OK;
    }
    g->mc = g->given;
    txt_vocab_init(&g->src);
    txt_vocab_init(&g->tgt);
    g->src.kind = g->tgt.kind = (TxtVocabKind)g->tokenizer; /* char, bpe: trained as it is read */
    g->src.bpe_vocab = g->tgt.bpe_vocab = g->vocab;
    rc = read_data(g, 1);
    if (rc != AG_OK) return rc;
    g->mc.src_vocab = g->src.n, g->mc.tgt_vocab = g->tgt.n, g->mc.pad_id = TXT_PAD;
    rc = tr_check_config(&g->mc, "the model");
    if (rc != AG_OK) return rc;
    if (g->epochs > 0) c->steps = g->epochs * n_batches(g);
    OptimSchedule *s = &c->optim.schedule;
    if (s->total == 0) s->total = c->steps;
    if (s->warmup < 0) { /* the default scales with the run: min(300, steps / 5) */
        int64_t w = s->total / 5 < 300 ? s->total / 5 : 300;
        s->warmup = s->kind == OPTIM_WARMUP_INVSQRT && w < 1 ? 1 : w;
    }
    if (s->kind == OPTIM_WARMUP_COSINE && s->warmup >= s->total)
        return ag_fail(AG_ERR_ARG, "--warmup %lld must be below the number of steps %lld",
                       (long long)s->warmup, (long long)s->total);
    g->st = (TrState){0, 0, (int64_t)rng_hash((uint64_t)c->seed, 2), g->train_d.n};
    return AG_OK;
}

static const char *const act_names[] = {"relu", "gelu", NULL};

/* --resume: a model flag given again must make the checkpoint's model (mc), named */
static int check_given(const TrRun *g, const Seq2SeqConfig *mc) {
    const Seq2SeqConfig *gv = &g->given;
    const char *ln = mc->layer.pre_ln ? "pre-LN" : "post-LN";
    const RunGiven v[] = {
        {"d-model", gv->layer.d_model, mc->layer.d_model, NULL},
        {"heads", gv->layer.n_heads, mc->layer.n_heads, NULL},
        {"kv-heads", gv->layer.n_kv_heads, mc->layer.n_kv_heads, NULL},
        {"layers", gv->n_enc_layers, mc->n_enc_layers, NULL},
        {"layers", gv->n_dec_layers, mc->n_dec_layers, NULL},
        {"enc-layers", gv->n_enc_layers, mc->n_enc_layers, NULL},
        {"dec-layers", gv->n_dec_layers, mc->n_dec_layers, NULL},
        {"ff", gv->layer.d_ff, mc->layer.d_ff, NULL},
        {"act", gv->layer.act, mc->layer.act, act_names[mc->layer.act]},
        {"dropout", gv->layer.dropout, mc->layer.dropout, NULL},
        {"pre-ln", gv->layer.pre_ln, mc->layer.pre_ln, ln},
        {"post-ln", gv->layer.pre_ln, mc->layer.pre_ln, ln},
        {"max-len", gv->max_len, mc->max_len, NULL},
        {"learned-pos", gv->learned_pos, mc->learned_pos, NULL},
        {"tie-output", gv->tie_output, mc->tie_output, NULL},
    };
    return run_check_given(g->fl, g->n_fl, v, (int)(sizeof v / sizeof v[0]));
}

/* The model, into the run's arena (RunModel.build): a new run's weights drawn from --seed
 * itself (the translator's seeding, as before the run loop), the embeddings scaled by
 * --embed-gain */
static int build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    TrRun *g = ctx;
    RunConfig *c = &g->rc;
    if (c->resume) {
        int rc = check_given(g, &g->mc);
        if (rc != AG_OK) return rc;
        /* a run without validation stays one, unless --valid-every is given */
        if (g->no_valid && !find(g, "no-valid")->given && find(g, "valid-every")->given)
            g->no_valid = 0;
    }
    g->model.validate = g->no_valid ? NULL : g->model.validate;
    rng_seed(init, (uint64_t)c->seed);
    nn_seq2seq_init(&g->m, a, init, &g->mc);
    nn_seq2seq_need_weights(&g->m, 0); /* training reads no attention maps */
    g->built = 1;
    *params = &g->m.params;
    if (c->resume) return AG_OK; /* the weights are the checkpoint's; ready: load_extra */
    Tensor *emb[2] = {g->m.src_embed.weight, g->m.tgt_embed.weight};
    for (int k = 0; k < 2 && g->embed_gain != 1.0; k++)
        for (size_t i = 0; i < emb[k]->size; i++) emb[k]->data[i] *= (Real)g->embed_gain;
    ag_params_written();
    return ready(g);
}

/* --resume: the checkpoint's vocabularies (RunModel.load_extra), then the data read with them */
static int load_extra(void *ctx, const void *bytes, size_t len) {
    TrRun *g = ctx;
    char path[4200];
    snprintf(path, sizeof path, "%s/last.npz", g->rc.out);
    int rc = txt_vocab_pair_load(bytes, len, &g->src, &g->tgt, path);
    if (rc == AG_OK && (g->src.n != g->mc.src_vocab || g->tgt.n != g->mc.tgt_vocab))
        rc = ag_fail(AG_ERR_FORMAT,
                     "the checkpoint's vocabularies (%d, %d words) do not match its model's "
                     "(%d, %d)",
                     g->src.n, g->tgt.n, g->mc.src_vocab, g->mc.tgt_vocab);
    if (rc == AG_OK && find(g, "tokenizer")->given && g->tokenizer != (int)g->src.kind)
        rc = ag_fail(AG_ERR_ARG,
                     "--tokenizer %s differs from the checkpoint's (%s): --resume continues the "
                     "run with its tokenizers",
                     txt_vocab_kind_names[g->tokenizer], txt_vocab_kind_names[g->src.kind]);
    if (rc == AG_OK && find(g, "vocab")->given && g->vocab != g->src.bpe_vocab)
        rc = ag_fail(AG_ERR_ARG,
                     "--vocab %d differs from the checkpoint's (%d): --resume continues the run "
                     "with its tokenizers",
                     g->vocab, g->src.bpe_vocab);
    if (rc == AG_OK) rc = read_data(g, 0);
    return rc == AG_OK ? ready(g) : rc;
}

/* Step s's batch (RunModel.batch): the loader's next, whole in every process (its shards' rows
 * are made by loss) */
static int batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    TrRun *g = ctx;
    (void)step, (void)lo, (void)hi, (void)S;
    txt_pair_loader_next(&g->loader, &g->batch);
    g->st.epoch = g->loader.epoch, g->st.cursor = g->loader.cursor;
    *tokens = (double)g->batch.n_tgt_tokens;
    return AG_OK;
}

/* Shard i of S (RunModel.loss); one shard: the batch's loss itself */
static Tensor *loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    TrRun *g = ctx;
    TxtPairBatch *b = &g->batch;
    if (S == 1)
        return nn_seq2seq_loss(t, &g->m, b->src, b->S, b->tgt_in, b->tgt_out, b->B, b->T, rng);
    return tr_shard_loss(&g->m, t, &g->train_d, b, i, S, &g->shard, rng);
}

/* The valid loss and greedy exact match on --valid-max pairs (RunModel.validate); a signal
 * stops it between batches. Values that overflowed although the weights are finite are
 * logged as they came out, as the step's own checks decide. */
static int validate(void *ctx, Tape *t, double *v) {
    TrRun *g = ctx;
    TxtScore sc;
    int done = eval_seq2seq(&g->m, t, &g->valid_d, g->valid_max, g->rc.batch, &sc, &v[0], NULL,
                            &g->src, &g->tgt, run_stop_requested);
    if (!done) return RUN_VALID_INTERRUPTED;
    v[1] = txt_score_exact(&sc);
    return AG_OK;
}

/* better: a higher exact match, or as high and a lower loss */
static int better(const double *v, const double *best) {
    return v[1] > best[1] || (v[1] == best[1] && v[0] < best[0]);
}

/* the CSV's epoch column and the progress lines' epoch (RunModel.describe) */
static void describe(void *ctx, int csv, char *buf, size_t n) {
    TrRun *g = ctx;
    double e =
        g->ready ? (double)g->loader.epoch + (double)g->loader.cursor / (double)g->loader.n_batches
                 : 0;
    snprintf(buf, n, csv ? "%.4f" : "epoch %.2f", e);
}

/* The run's defaults of `train`: the demo's configuration (make demo). Its schedule's warmup
 * -1: the run picks min(300, schedule steps / 5) (at least 1 for invsqrt), so that a short run
 * (--steps 100) needs no --warmup. */
static RunConfig train_defaults(void) {
    RunConfig c = run_defaults();
    c.optim = optim_defaults(OPTIM_ADAM);
    c.optim.lr = 1e-3, c.optim.beta2 = 0.98, c.optim.eps = 1e-9;
    c.optim.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, -1, 0, 1e-5};
    c.weight_decay = c.optim.weight_decay;
    c.batch = 64, c.steps = 2000, c.clip = 1.0, c.seed = 1, c.out = "build/demo";
    c.log_every = 50, c.valid_every = 500, c.save_every = 0, c.compress = 1;
    return c;
}

/* ---- checkpoints written before the run loop ---- */

/* data.position of a checkpoint written before the run loop (today's keep their state as named
 * meta.run.* fields): the loader, the best validation so far, the last validated step, the CSV
 * row being accumulated and the run's settings that --resume keeps (doubles stored as their
 * bits). Checkpoints written before the settings were kept hold the first
 * POS_V1_COUNT values; --shards is stored only when above 1 (POS_V2_COUNT values otherwise, as
 * before it existed). What each may be: tr_check_position. */
enum {
    POS_EPOCH,
    POS_CURSOR,
    POS_SEED,       /* the loader's seed */
    POS_BATCH,      /* batch size */
    POS_N_TRAIN,    /* pairs in the training file */
    POS_BEST_STEP,  /* step of best.npz (0: none yet) */
    POS_BEST_EXACT, /* its valid exact match (double bits) */
    POS_BEST_LOSS,  /* its valid loss (double bits) */
    POS_LAST_VALID, /* the last step whose validation finished */
    POS_IV_LOSS,    /* sum of the losses since the last CSV row (double bits) */
    POS_IV_NORM,    /* sum of the gradient norms since then (double bits) */
    POS_IV_STEPS,   /* steps since then */
    POS_IV_TOKENS,  /* target tokens since then */
    POS_LOG_EVERY,  /* the run's settings: --log-every */
    POS_VALID_EVERY,
    POS_SAVE_EVERY,
    POS_VALID_MAX,
    POS_TOTAL,  /* --steps (or --epochs times the batches of an epoch) */
    POS_CLIP,   /* --clip (double bits) */
    POS_SHARDS, /* --shards (docs/mpi.md), when above 1 */
    POS_COUNT,
    POS_V1_COUNT = POS_LOG_EVERY,
    POS_V2_COUNT = POS_SHARDS
};

/* What data.position's values may be, checked (ckpt_check_rules) before any is used, by
 * --resume and by every command that loads a checkpoint (tr_load). A checkpoint of step s:
 * the epoch, the best and last validated steps and the steps since the last CSV row are at
 * most s, and the loader's position is exactly batch s of the plan (epoch times the batches
 * of an epoch, plus the cursor). The training file itself is compared later (its pairs). */
int tr_check_position(const NpzFile *f) {
    const NpzEntry *e = npz_find(f, "data.position"), *se = npz_find(f, "train.step");
    if (!e) return AG_OK;
    if (e->dtype != NPZ_I64 || e->ndim != 1 ||
        (e->count != POS_V1_COUNT && e->count != POS_V2_COUNT && e->count != POS_COUNT))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: 'data.position' must be %d, %d or %d '<i8' values (not a checkpoint "
                       "of attograd-translate?)",
                       f->path, POS_V1_COUNT, POS_V2_COUNT, POS_COUNT);
    int64_t step = 0, p[POS_COUNT];
    if (se && se->dtype == NPZ_I64 && se->ndim == 0) memcpy(&step, se->data, sizeof step);
    const int64_t big = 1 << 30;
    const CkptRule rules[] = {
        CKPT_RULE_INT("data.position", POS_EPOCH, "epoch", 0, step),
        CKPT_RULE_INT("data.position", POS_CURSOR, "cursor", 0, INT_MAX),
        CKPT_RULE_INT("data.position", POS_BATCH, "batch size", 1, 1 << 20),
        CKPT_RULE_INT("data.position", POS_N_TRAIN, "training pairs", 1, INT_MAX),
        CKPT_RULE_INT("data.position", POS_BEST_STEP, "step of best.npz", 0, step),
        CKPT_RULE_F64("data.position", POS_BEST_EXACT, "best valid exact match", 0, 1),
        CKPT_RULE_F64("data.position", POS_BEST_LOSS, "best valid loss", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", POS_LAST_VALID, "last validated step", 0, step),
        CKPT_RULE_F64("data.position", POS_IV_LOSS, "losses since the last log row", 0, DBL_MAX),
        CKPT_RULE_F64("data.position", POS_IV_NORM, "gradient norms since the last log row", 0,
                      DBL_MAX),
        CKPT_RULE_INT("data.position", POS_IV_STEPS, "steps since the last log row", 0, step),
        CKPT_RULE_INT("data.position", POS_IV_TOKENS, "tokens since the last log row", 0,
                      CKPT_MAX_STEP),
        CKPT_RULE_INT("data.position", POS_LOG_EVERY, "--log-every", 1, big),
        CKPT_RULE_INT("data.position", POS_VALID_EVERY, "--valid-every", 0,
                      big), /* 0: a run without validation */
        CKPT_RULE_INT("data.position", POS_SAVE_EVERY, "--save-every", 0, big),
        CKPT_RULE_INT("data.position", POS_VALID_MAX, "--valid-max", 0, big),
        CKPT_RULE_INT("data.position", POS_TOTAL, "--steps", step > 1 ? step : 1, CKPT_MAX_STEP),
        CKPT_RULE_F64("data.position", POS_CLIP, "--clip", 0, DBL_MAX),
        CKPT_RULE_INT("data.position", POS_SHARDS, "--shards", 2, 1 << 20),
    };
    int rc = ckpt_check_rules(f, rules, (int)(sizeof rules / sizeof rules[0]));
    if (rc != AG_OK) return rc;
    memcpy(p, e->data, e->count * sizeof(int64_t));
    int64_t nb = (p[POS_N_TRAIN] + p[POS_BATCH] - 1) / p[POS_BATCH];
    if (p[POS_CURSOR] > nb || p[POS_EPOCH] > step / nb || p[POS_EPOCH] * nb + p[POS_CURSOR] != step)
        return ag_fail(AG_ERR_RANGE,
                       "%s: data.position: epoch %lld, cursor %lld: with %lld batches an epoch "
                       "(%lld pairs, batch %lld) that is not step %lld (train.step): the loader "
                       "takes one batch a step",
                       f->path, (long long)p[POS_EPOCH], (long long)p[POS_CURSOR], (long long)nb,
                       (long long)p[POS_N_TRAIN], (long long)p[POS_BATCH], (long long)step);
    return AG_OK;
}

/* A checkpoint written before the run loop (RunModel.legacy): data.position (checked by
 * tr_check_position) and the optimizer's configuration as the run's flags and state. Its
 * seed is the loader's (rng_hash(--seed, 2)): a --seed given again must hash to it. */
static int legacy(void *ctx, const NpzFile *f, int64_t step, RunState *st) {
    TrRun *g = ctx;
    RunConfig *c = &g->rc;
    (void)step;
    const NpzEntry *e = npz_find(f, "data.position");
    OptimConfig oc;
    int has = 0, rc = e ? tr_check_position(f) : AG_OK;
    if (rc == AG_OK && !e)
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no data position: cannot resume from it", f->path);
    if (rc == AG_OK) rc = ckpt_optim_config(f, &oc, &has);
    if (rc == AG_OK && !has)
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no optimizer state: cannot resume from it", f->path);
    if (rc != AG_OK) return rc;
    const int64_t *p = (const int64_t *)e->data;
    int n = (int)e->count;
    if (find(g, "seed")->given && (int64_t)rng_hash((uint64_t)c->seed, 2) != p[POS_SEED])
        return ag_fail(AG_ERR_ARG,
                       "--seed differs from the checkpoint's: --resume continues the run with "
                       "its model, optimizer, batch size and seed (start a new run with --force "
                       "to change them)");
    RunConfig d = train_defaults();
    c->optim = oc;
    c->weight_decay = oc.weight_decay;
    c->batch = (int)p[POS_BATCH];
    c->shards = n > POS_SHARDS ? (int)p[POS_SHARDS] : 1;
    c->clip = n > POS_CLIP ? ex_bitsd(p[POS_CLIP]) : d.clip;
    c->steps = n > POS_TOTAL ? p[POS_TOTAL] : d.steps;
    c->log_every = n > POS_LOG_EVERY ? (int)p[POS_LOG_EVERY] : d.log_every;
    c->valid_every =
        n > POS_VALID_EVERY && p[POS_VALID_EVERY] ? (int)p[POS_VALID_EVERY] : d.valid_every;
    g->no_valid = n > POS_VALID_EVERY && p[POS_VALID_EVERY] == 0;
    c->save_every = n > POS_SAVE_EVERY ? (int)p[POS_SAVE_EVERY] : d.save_every;
    g->valid_max = n > POS_VALID_MAX ? (int)p[POS_VALID_MAX] : 0;
    g->st = (TrState){p[POS_EPOCH], p[POS_CURSOR], p[POS_SEED], p[POS_N_TRAIN]};
    *st = (RunState){.row_loss = ex_bitsd(p[POS_IV_LOSS]),
                     .row_norm = ex_bitsd(p[POS_IV_NORM]),
                     .row_tokens = (double)p[POS_IV_TOKENS],
                     .row_steps = p[POS_IV_STEPS],
                     .best_step = p[POS_BEST_STEP],
                     .last_valid = p[POS_LAST_VALID]};
    st->best[0] = ex_bitsd(p[POS_BEST_LOSS]);
    st->best[1] = ex_bitsd(p[POS_BEST_EXACT]);
    return AG_OK;
}

/* ---- the command ---- */

static const char *const optim_names[] = {"sgd", "adam", "adamw", NULL};
/* the data's paths are not saved (as before the run loop: --resume reads --data, default
 * build/data, or --train and --valid) */
static const char *const remember[] = {"no-valid", "valid-max", NULL};
static const char *const transient[] = {
    "data",       "train",      "valid",  "tokenizer",  "vocab",      "d-model",
    "heads",      "kv-heads",   "layers", "enc-layers", "dec-layers", "ff",
    "act",        "dropout",    "pre-ln", "post-ln",    "max-len",    "learned-pos",
    "tie-output", "embed-gain", "epochs", "max-memory", NULL};

#define N_MODEL_FLAGS 31
#define BIG 1e18

/* what `train --help` says above the flags */
#define TRAIN_WHAT                                                                                 \
    "Trains a transformer on sentence pairs (TSV: source<TAB>target, tokens separated by "         \
    "spaces).\nWrites --out/last.npz (latest), --out/best.npz (best validation) and "              \
    "--out/log.csv\n(columns: step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,"         \
    "valid_exact),\nand draws the curves in --out/loss.png (gnuplot).\nCtrl-C (SIGINT) or "        \
    "SIGTERM saves last.npz and exits with 130 or 143; --resume continues\nthe run to the bit. "   \
    "Exit codes: 0 done, 1 failed (non-finite loss: the step is named,\nlast.npz is the last "     \
    "good state), 2 bad flags or data."

/* `attograd-translate train` with argv[0..argc) after "train"; parse_only: the flags parsed
 * and checked, nothing read or written (tr_check_args) */
int tr_train_main(int argc, char **argv, int parse_only) {
    TrRun G, *g = &G;
    memset(g, 0, sizeof *g);
    RunConfig *c = &g->rc;
    *c = train_defaults();
    /* the demo's model; embed_gain: the embeddings' size at the start, N(0, gain^2 / d_model),
     * so entries of std gain after the forward's sqrt(d_model) scaling (1 is nn_seq2seq_init's
     * own; 0.3 was chosen on valid, README) */
    g->given = nn_seq2seq_default_config(0, 0, 128, 4, 2);
    g->given.layer.d_ff = 512, g->given.layer.dropout = 0.1, g->given.max_len = 128;
    g->data = "build/data", g->tokenizer = TXT_VOCAB_WORD, g->vocab = 1000;
    g->layers = g->given.n_enc_layers, g->enc = g->dec = -1, g->act = (int)g->given.layer.act;
    g->embed_gain = 0.3, g->valid_max = 0;
    static const char *const metrics[] = {"loss", "exact"};
    g->model = (RunModel){.prog = TR_PROG,
                          .ctx = g,
                          .build = build,
                          .config = tr_model_config(&g->mc),
                          .batch = batch,
                          .loss = loss,
                          .validate = validate,
                          .n_metrics = 2,
                          .metric_names = metrics,
                          .better = better,
                          .state = {NULL, state_fields, 4, &g->st, NULL},
                          .load_extra = load_extra,
                          .shard_sum = 1,
                          .remember = remember,
                          .transient = transient,
                          .start = start,
                          .legacy = legacy,
                          .columns = "epoch",
                          .describe = describe,
                          .nan_param = "decoder.norm.weight",
                          .unit = "pairs",
                          .plot = run_plot_loss};
    RunLoop *r = run_new(&g->model, c);
    g->run = r;
    Seq2SeqConfig *m = &g->given;
    OptimConfig *o = &c->optim;
    Flag fl[N_MODEL_FLAGS + RUN_N_FLAGS] = {
        FLAG_ROW("data", FLAG_PATH, &g->data, "DIR", "read DIR/train.tsv and DIR/valid.tsv"),
        FLAG_ROW("train", FLAG_PATH, &g->train, "FILE", "training pairs (default DIR/train.tsv)"),
        FLAG_ROW("valid", FLAG_PATH, &g->valid, "FILE", "validation pairs (default DIR/valid.tsv)"),
        FLAG_SW("no-valid", &g->no_valid, "no validation (and no best.npz)"),
        FLAG_ONE_OF(
            "tokenizer", &g->tokenizer, "word|char|bpe",
            "tokens: blank-separated words, bytes, or byte-level BPE (one tokenizer a side)",
            txt_vocab_kind_names),
        FLAG_NUM("vocab", FLAG_INT, &g->vocab, "N",
                 "--tokenizer bpe: each side's tokens, the 256 bytes included", TXT_VOCAB_BPE_MIN,
                 TXT_VOCAB_BPE_MAX),
        FLAG_NUM("d-model", FLAG_INT, &m->layer.d_model, "N", "model width", 1, 8192),
        FLAG_NUM("heads", FLAG_INT, &m->layer.n_heads, "N", "attention heads", 1, 1024),
        FLAG_NUM("kv-heads", FLAG_INT, &g->kv_heads, "N",
                 "key/value heads, grouped-query (default: --heads)", 0, 1024),
        FLAG_NUM("layers", FLAG_INT, &g->layers, "N", "encoder and decoder layers", 1,
                 NN_MAX_LAYERS),
        FLAG_NUM("enc-layers", FLAG_INT, &g->enc, "N", "encoder layers (default --layers)", 0,
                 NN_MAX_LAYERS),
        FLAG_NUM("dec-layers", FLAG_INT, &g->dec, "N", "decoder layers (default --layers)", 1,
                 NN_MAX_LAYERS),
        FLAG_NUM("ff", FLAG_INT, &m->layer.d_ff, "N", "feed-forward width", 1, 65536),
        FLAG_ONE_OF("act", &g->act, "relu|gelu", "feed-forward activation", act_names),
        FLAG_NUM("dropout", FLAG_DOUBLE, &m->layer.dropout, "P", "dropout", 0, 0.99),
        FLAG_SW("pre-ln", &m->layer.pre_ln, "LayerNorm before each sub-layer"),
        {"post-ln", FLAG_SWITCH, &m->layer.pre_ln, NULL, "LayerNorm after (the default)", 0, 0,
         NULL, 0},
        FLAG_NUM("max-len", FLAG_INT, &m->max_len, "N", "longest sequence, EOS/BOS included", 2,
                 4096),
        FLAG_SW("learned-pos", &m->learned_pos, "learned positions, not sinusoids"),
        FLAG_SW("tie-output", &m->tie_output, "the generator shares tgt_embed"),
        FLAG_ONE_OF("optim", &o->kind, "NAME", "sgd, adam or adamw", optim_names),
        FLAG_NUM("beta1", FLAG_DOUBLE, &o->beta1, "X", "Adam's beta1", 0, 0.999999),
        FLAG_NUM("beta2", FLAG_DOUBLE, &o->beta2, "X", "Adam's beta2", 0, 0.999999),
        FLAG_NUM("momentum", FLAG_DOUBLE, &o->momentum, "X", "SGD momentum", 0, BIG),
        FLAG_NUM("embed-gain", FLAG_DOUBLE, &g->embed_gain, "G",
                 "initial embeddings N(0, G^2/d_model): std G once scaled by sqrt(d_model)", 0,
                 BIG),
        FLAG_NUM("epochs", FLAG_INT, &g->epochs, "N", "train N epochs instead of --steps", 1,
                 1 << 30),
        FLAG_NUM("valid-max", FLAG_INT, &g->valid_max, "N", "valid pairs to decode, 0: all", 0,
                 1 << 30),
        FLAG_NUM("compress", FLAG_INT, &c->compress, "LEVEL",
                 "zlib level of the checkpoints, 0: stored", 0, 9),
        FLAG_SW("check-finite", &c->check_finite,
                "check every op's output and gradient: a divergence names the op"),
        FLAG_NUM("max-memory", FLAG_DOUBLE, &g->max_memory, "GIB",
                 "refuse a --batch whose step needs more (default: this machine's memory)", 0, BIG),
        FLAG_NUM("report-rss", FLAG_I64, &c->report_rss, "STEP",
                 "print the peak RSS after STEP and at the end", 0, BIG),
    };
    int n = N_MODEL_FLAGS;
    n += run_flags(r, fl + n);
    *flag_find(fl, n, "ckpt") = fl[n - 1], n--; /* eval's: the translator's own */
    /* the translator's ranges and defaults */
    flag_find(fl, n, "steps")->hi = flag_find(fl, n, "seed")->hi = BIG;
    flag_find(fl, n, "threads")->hi = 4096;
    flag_find(fl, n, "warmup")->help = "warmup steps (default: min(300, steps / 5))";
    flag_find(fl, n, "weight-decay")->help = "weight decay (default 0, adamw 0.01)";
    g->fl = fl, g->n_fl = n;
    int code,
        rc = flag_parse_cmd(TR_PROG, "train", "[flags]", TRAIN_WHAT, fl, n, argc, argv, NULL, NULL);
    if (rc == AG_OK && parse_only) rc = check_flags(g);
    if (rc == FLAG_HELP) {
        code = RUN_EXIT_OK;
    } else if (rc != AG_OK || parse_only) {
        if (rc != AG_OK)
            fprintf(stderr, "%s train: %s (see %s train --help)\n", TR_PROG, ag_last_error(),
                    TR_PROG);
        code = rc != AG_OK ? RUN_EXIT_USAGE : RUN_EXIT_OK;
    } else {
        run_fix_mmap_threshold(); /* a long run's RSS stays flat (make soak) */
        char *args[RUN_MAX_FLAGS * 2 + 4] = {TR_PROG, "train"};
        int k = 2;
        for (int i = 0; i < argc && k < (int)(sizeof args / sizeof *args) - 1; i++)
            args[k++] = argv[i];
        code = run_main(r, fl, n, k, args);
    }
    run_loop_free(r);
    if (g->built) nn_seq2seq_free(&g->m);
    txt_pair_batch_free(&g->batch);
    txt_pair_batch_free(&g->shard);
    if (g->ready) txt_pair_loader_free(&g->loader);
    txt_pairs_free(&g->train_d);
    txt_pairs_free(&g->valid_d);
    if (g->src.words) txt_vocab_free(&g->src);
    if (g->tgt.words) txt_vocab_free(&g->tgt);
    free(g->vocab_text);
    return code;
}
