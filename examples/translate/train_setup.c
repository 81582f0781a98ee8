/* train_setup.c: starting a run and keeping its state. A fresh run reads the data, grows the
 * vocabularies and builds the model and optimizer from the flags; --resume reads last.npz
 * once (every value checked before use), rebuilds everything from it, and checks that the data
 * and any flag given again agree with it. The checkpoint's data.position holds the loader's
 * position, the best validation, the row being accumulated and the run's settings (trainer.h);
 * tr_check_position checks them. A batch too big for the memory is refused before the run.
 * Not here: the loop (train.c), the log (train_log.c). Read next: train_system.c. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "trainer.h"

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

TrTrainConfig tr_train_defaults(void) {
    TrTrainConfig c;
    memset(&c, 0, sizeof c);
    c.train_path = "build/data/train.tsv";
    c.valid_path = "build/data/valid.tsv";
    c.out_dir = "build/demo"; /* where make demo trains, and every command reads by default */
    c.model = nn_seq2seq_default_config(0, 0, 128, 4, 2);
    c.model.layer.d_ff = 512;
    c.model.layer.dropout = 0.1;
    c.model.max_len = 128;
    c.tokenizer = TR_TOK_WORD;
    c.vocab = 1000;
    c.optim = optim_defaults(OPTIM_ADAM);
    c.optim.lr = 1e-3;
    c.optim.beta2 = 0.98;
    c.optim.eps = 1e-9;
    c.optim.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, -1, 0, 1e-5}; /* -1: see below */
    c.batch = 64;
    c.steps = 2000;
    c.clip = 1.0;
    c.embed_gain = 0.3;
    c.seed = 1;
    c.log_every = 50;
    c.valid_every = 500;
    c.compress = 1;
    c.verbose = 1;
    return c;
}

int tr_check_config(const Seq2SeqConfig *c, const char *what) {
    const TransformerConfig *l = &c->layer;
    const char *why = NULL;
    char buf[160];
    if (c->src_vocab <= TR_N_SPECIAL || c->tgt_vocab <= TR_N_SPECIAL ||
        c->src_vocab > TR_MAX_VOCAB || c->tgt_vocab > TR_MAX_VOCAB) {
        snprintf(buf, sizeof buf, "vocabularies of %d and %d words: each must be in [%d, %d]",
                 c->src_vocab, c->tgt_vocab, TR_N_SPECIAL + 1, TR_MAX_VOCAB);
        why = buf;
    } else if (c->n_enc_layers < 0 || c->n_enc_layers > NN_MAX_LAYERS || c->n_dec_layers < 1 ||
               c->n_dec_layers > NN_MAX_LAYERS) {
        snprintf(buf, sizeof buf, "layers %d+%d: the encoder takes 0..%d, the decoder 1..%d",
                 c->n_enc_layers, c->n_dec_layers, NN_MAX_LAYERS, NN_MAX_LAYERS);
        why = buf;
    } else if (c->max_len < 2 || c->max_len > 4096)
        why = "max_len must be in [2, 4096]";
    else if (c->pad_id != TR_PAD)
        why = "pad_id must be 0";
    else if (l->d_model < 1 || l->d_model > 8192 || l->d_ff < 1 || l->d_ff > 65536)
        why = "d_model must be in [1, 8192] and ff in [1, 65536]";
    else if (l->n_heads < 1 || l->d_model % l->n_heads != 0) {
        snprintf(buf, sizeof buf, "%d heads do not divide d_model %d", l->n_heads, l->d_model);
        why = buf;
    } else if (l->n_kv_heads < 1 || l->n_heads % l->n_kv_heads != 0) {
        snprintf(buf, sizeof buf, "%d key/value heads do not divide %d heads", l->n_kv_heads,
                 l->n_heads);
        why = buf;
    } else if (!(l->dropout >= 0 && l->dropout < 1))
        why = "dropout must be in [0, 1)";
    else if (!(l->ln_eps > 0) || (l->act != NN_RELU && l->act != NN_GELU))
        why = "bad LayerNorm eps or activation";
    if (!why) return AG_OK;
    return ag_fail(AG_ERR_ARG, "%s: %s", what, why);
}

int tr_save(Trainer *tr, const char *path) {
    if (dist_rank() != 0) { /* process 0 writes; the others hold the same state */
        if (path == tr->last_path) tr->saved_step = tr->step;
        return AG_OK;
    }
    /* the log's rows up to this step reach the disk before the checkpoint that --resume would
     * start from: a power cut can then lose no row older than the checkpoint */
    if (tr->csv && (fflush(tr->csv) != 0 || fsync(fileno(tr->csv)) != 0)) {
        ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", tr->csv_path, strerror(errno));
        fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
        return AG_ERR_IO;
    }
    tr->pos[POS_EPOCH] = tr->loader.epoch;
    tr->pos[POS_CURSOR] = tr->loader.cursor;
    tr->pos[POS_LOG_EVERY] = tr->log_every;
    /* a run without validation stores --valid-every 0, and the cadence of its saves */
    tr->pos[POS_VALID_EVERY] = tr->have_valid ? tr->valid_every : 0;
    tr->pos[POS_SAVE_EVERY] =
        tr->have_valid || tr->save_every > 0 ? tr->save_every : tr->valid_every;
    tr->pos[POS_VALID_MAX] = tr->valid_max;
    tr->pos[POS_TOTAL] = tr->total;
    tr->pos[POS_CLIP] = ex_dbits(tr->clip);
    tr->pos[POS_SHARDS] = tr->shards;
    Checkpoint ck = {.params = &tr->m.params,
                     .config = tr_model_config(&tr->m.cfg),
                     .opt = tr->opt,
                     .rng = &tr->rng,
                     .n_data = tr->shards > 1 ? POS_COUNT : POS_V2_COUNT,
                     .extra = tr->vocab_text,
                     .extra_len = tr->vocab_len};
    memcpy(ck.data, tr->pos, sizeof tr->pos);
    int rc = ckpt_save(path, &ck, tr->cfg->compress, NULL);
    if (rc != AG_OK) {
        fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
        dist_abort(TR_EXIT_FAIL); /* the other processes would wait for this one */
    } else if (path == tr->last_path)
        tr->saved_step = tr->step;
    return rc;
}

static int read_data(Trainer *tr, int grow) {
    const TrTrainConfig *c = tr->cfg;
    int max_tokens = tr->m.cfg.max_len > 0 ? tr->m.cfg.max_len - 1 : c->model.max_len - 1;
    int rc = tr_data_read(c->train_path, &tr->train, &tr->src, &tr->tgt, grow, max_tokens);
    if (rc != AG_OK) return rc;
    if (!tr->no_valid && c->valid_path && *c->valid_path) {
        rc = tr_data_read(c->valid_path, &tr->valid, &tr->src, &tr->tgt, 0, max_tokens);
        if (rc != AG_OK) return rc;
        tr->have_valid = 1;
    }
    return AG_OK;
}

/* A batch too big for the memory is the user's flag, refused before the run, not an abort in
 * the middle of it. A step of two rows, the longest source and the longest target (each row
 * padded to both lengths, as in the largest batch), is run on a copy of the RNG and measured;
 * the largest batch has min(--batch, pairs) such rows. The parameters keep their values, and
 * every step zeroes the gradients this one leaves. */
static int check_step_memory(Trainer *tr) {
    const TrData *d = &tr->train;
    int rows[2] = {0, 0};
    for (int i = 1; i < d->n; i++) {
        if (d->pairs[i].src_len > d->pairs[rows[0]].src_len) rows[0] = i;
        if (d->pairs[i].tgt_len > d->pairs[rows[1]].tgt_len) rows[1] = i;
    }
    TrBatch b;
    memset(&b, 0, sizeof b);
    tr_batch_make(&b, d, rows, 2);
    Rng rng = tr->rng;
    ag_tape_reset(tr->tape);
    ag_backward(tr->tape,
                nn_seq2seq_loss(tr->tape, &tr->m, b.src, b.S, b.tgt_in, b.tgt_out, 2, b.T, &rng));
    int B = tr->loader.batch_size < d->n ? tr->loader.batch_size : d->n;
    double need = (double)tr->step_arena->used / 2 * B, gib = (double)(1 << 30);
    ag_tape_reset(tr->tape);
    tr_batch_free(&b);
    double limit = tr->cfg->max_memory * gib;
    if (limit <= 0) limit = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (limit <= 0 || need <= limit) return AG_OK;
    return ag_fail(AG_ERR_ARG,
                   "--batch %d: a step of %d pairs of up to %d source and %d target tokens needs "
                   "%.2f GiB, more than %s%.2f GiB: use a smaller --batch",
                   tr->loader.batch_size, B, d->max_src, d->max_tgt, need / gib,
                   tr->cfg->max_memory > 0 ? "--max-memory " : "this machine's memory of ",
                   limit / gib);
}

static void build(Trainer *tr, const Seq2SeqConfig *mc, const OptimConfig *oc, uint64_t seed) {
    tr->params = arena_new("params", 0);
    Rng init;
    rng_seed(&init, seed);
    nn_seq2seq_init(&tr->m, tr->params, &init, mc);
    nn_seq2seq_need_weights(&tr->m, 0); /* training reads no attention maps (tr_attention's
                                          * own Translator does) */
    tr->opt = optim_new(tr->params, &tr->m.params, oc);
    rng_seed(&tr->rng, rng_hash(seed, 1));
}

/* Steps of the run, from --steps or --epochs (batches per epoch known once data is read). */
static int64_t total_steps(const TrTrainConfig *c, const TrData *train, int batch) {
    if (c->epochs > 0) return (int64_t)c->epochs * ((train->n + batch - 1) / batch);
    return c->steps;
}

static int setup_fresh(Trainer *tr) {
    const TrTrainConfig *c = tr->cfg;
    tr_vocab_init(&tr->src);
    tr_vocab_init(&tr->tgt);
    tr->src.kind = tr->tgt.kind = c->tokenizer; /* char, bpe: trained as the data is read */
    tr->src.bpe_vocab = tr->tgt.bpe_vocab = c->vocab;
    int rc = read_data(tr, 1);
    if (rc != AG_OK) return rc;
    Seq2SeqConfig mc = c->model;
    mc.src_vocab = tr->src.n;
    mc.tgt_vocab = tr->tgt.n;
    mc.pad_id = TR_PAD;
    rc = tr_check_config(&mc, "the model");
    if (rc != AG_OK) return rc;
    tr->total = total_steps(c, &tr->train, c->batch);
    OptimConfig oc = c->optim;
    if (oc.schedule.total == 0) oc.schedule.total = tr->total;
    /* the default warmup scales with the run: min(300, steps / 5), at least 1 for invsqrt */
    if (oc.schedule.warmup < 0) {
        int64_t w = oc.schedule.total / 5 < 300 ? oc.schedule.total / 5 : 300;
        oc.schedule.warmup = oc.schedule.kind == OPTIM_WARMUP_INVSQRT && w < 1 ? 1 : w;
    }
    if (oc.schedule.kind == OPTIM_WARMUP_COSINE && oc.schedule.warmup >= oc.schedule.total)
        return ag_fail(AG_ERR_ARG, "--warmup %lld must be below the number of steps %lld",
                       (long long)oc.schedule.warmup, (long long)oc.schedule.total);
    if (oc.schedule.kind == OPTIM_WARMUP_INVSQRT && oc.schedule.warmup < 1)
        return ag_fail(AG_ERR_ARG, "--schedule invsqrt needs --warmup >= 1");
    if (oc.schedule.kind == OPTIM_WARMUP_COSINE && oc.schedule.lr_min > oc.lr)
        return ag_fail(AG_ERR_ARG, "--lr-min %g must not exceed --lr %g", oc.schedule.lr_min,
                       oc.lr);
    build(tr, &mc, &oc, c->seed);
    /* nn_seq2seq_init starts the embeddings at N(0, 1/d_model); embed_gain scales that */
    Tensor *emb[2] = {tr->m.src_embed.weight, tr->m.tgt_embed.weight};
    for (int k = 0; k < 2 && c->embed_gain != 1.0; k++)
        for (size_t i = 0; i < emb[k]->size; i++) emb[k]->data[i] *= (Real)c->embed_gain;
    tr_loader_init(&tr->loader, &tr->train, c->batch, rng_hash(c->seed, 2));
    memset(tr->pos, 0, sizeof tr->pos);
    tr->pos[POS_SEED] = (int64_t)tr->loader.seed;
    tr->pos[POS_BATCH] = c->batch;
    tr->pos[POS_N_TRAIN] = tr->train.n;
    tr->log_every = c->log_every;
    tr->valid_every = c->valid_every;
    tr->save_every = c->save_every;
    tr->valid_max = c->valid_max;
    tr->clip = c->clip;
    tr->shards = c->shards > 0 ? c->shards : dist_size();
    return AG_OK;
}

/* A setting of the run on resume: the command's when given (not TR_KEEP), else the
 * checkpoint's, else (a checkpoint older than the stored settings) the default. */
static int64_t kept(int64_t given, const Trainer *tr, int pos, int64_t fallback, int n_pos) {
    if (given != TR_KEEP) return given;
    return pos < n_pos ? tr->pos[pos] : fallback;
}

/* On resume, a flag of the model, the optimizer, the batch or the seed given again must equal
 * the checkpoint's: the run cannot honour another value (AG_ERR_ARG naming the flag). */
static int check_given(const Trainer *tr, const Seq2SeqConfig *mc, const OptimConfig *oc) {
    const TrTrainConfig *c = tr->cfg;
    const Seq2SeqConfig *g = &c->model;
    const OptimConfig *go = &c->optim;
    if (!c->given) return AG_OK;
    const char *had = tr_tok_names[tr->src.kind];
    if (strstr(c->given, " tokenizer ") && c->tokenizer != tr->src.kind)
        return ag_fail(AG_ERR_ARG,
                       "--tokenizer %s differs from the checkpoint's (%s): --resume continues "
                       "the run with its tokenizers",
                       tr_tok_names[c->tokenizer], had);
    if (strstr(c->given, " vocab ") && c->vocab != tr->src.bpe_vocab)
        return ag_fail(AG_ERR_ARG,
                       "--vocab %d differs from the checkpoint's (%d): --resume continues "
                       "the run with its tokenizers",
                       c->vocab, tr->src.bpe_vocab);
    const struct {
        const char *flag;
        double given, stored;
    } v[] = {
        {"d-model", g->layer.d_model, mc->layer.d_model},
        {"heads", g->layer.n_heads, mc->layer.n_heads},
        {"kv-heads", g->layer.n_kv_heads, mc->layer.n_kv_heads},
        {"layers", g->n_enc_layers, mc->n_enc_layers},
        {"layers", g->n_dec_layers, mc->n_dec_layers},
        {"enc-layers", g->n_enc_layers, mc->n_enc_layers},
        {"dec-layers", g->n_dec_layers, mc->n_dec_layers},
        {"ff", g->layer.d_ff, mc->layer.d_ff},
        {"act", g->layer.act, mc->layer.act},
        {"dropout", g->layer.dropout, mc->layer.dropout},
        {"pre-ln", g->layer.pre_ln, mc->layer.pre_ln},
        {"post-ln", g->layer.pre_ln, mc->layer.pre_ln},
        {"max-len", g->max_len, mc->max_len},
        {"learned-pos", g->learned_pos, mc->learned_pos},
        {"tie-output", g->tie_output, mc->tie_output},
        {"optim", go->kind, oc->kind},
        {"lr", go->lr, oc->lr},
        {"beta1", go->beta1, oc->beta1},
        {"beta2", go->beta2, oc->beta2},
        {"weight-decay", go->weight_decay, oc->weight_decay},
        {"momentum", go->momentum, oc->momentum},
        {"schedule", go->schedule.kind, oc->schedule.kind},
        {"warmup", (double)go->schedule.warmup, (double)oc->schedule.warmup},
        {"schedule-steps", (double)go->schedule.total, (double)oc->schedule.total},
        {"lr-min", go->schedule.lr_min, oc->schedule.lr_min},
        {"batch", c->batch, (double)tr->pos[POS_BATCH]},
        {"shards", c->shards, (double)tr->shards},
        {"clip", c->clip, tr->clip},
        {"seed", (double)rng_hash(c->seed, 2), (double)(uint64_t)tr->pos[POS_SEED]},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char key[40];
        snprintf(key, sizeof key, " %s ", v[i].flag);
        if (!strstr(c->given, key) || v[i].given == v[i].stored) continue;
        char was[48] = "";
        if (strcmp(v[i].flag, "seed") != 0) snprintf(was, sizeof was, " (%.9g)", v[i].stored);
        return ag_fail(AG_ERR_ARG,
                       "--%s differs from the checkpoint's%s: --resume continues the run with "
                       "its model, optimizer, batch size and seed (start a new run with --force "
                       "to change them)",
                       v[i].flag, was);
    }
    if (strstr(c->given, " embed-gain "))
        fprintf(stderr, TR_PROG " train: warning: --embed-gain has no effect on --resume (it "
                                "only scales the "
                                "initial embeddings)\n");
    return AG_OK;
}

/* Resumes from f (read once and checked by ckpt_read): checks data.position, builds the model
 * and optimizer of its configuration, loads them, then the data, and the loader's position. */
static int resume_from(Trainer *tr, const NpzFile *f, const Seq2SeqConfig *file_cfg) {
    const TrTrainConfig *c = tr->cfg;
    Seq2SeqConfig mc = *file_cfg;
    OptimConfig oc;
    int has_optim = 0;
    int rc = ckpt_optim_config(f, &oc, &has_optim);
    if (rc != AG_OK) return rc;
    if (!has_optim || !npz_find(f, "data.position") || !npz_find(f, "rng.state"))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: holds no optimizer state, RNG or data position: cannot resume from "
                       "it",
                       f->path);
    rc = tr_check_position(f);
    if (rc != AG_OK) return rc;
    build(tr, &mc, &oc, 0);
    Checkpoint ck = {.params = &tr->m.params,
                     .config = tr_model_config(&tr->m.cfg),
                     .opt = tr->opt,
                     .rng = &tr->rng,
                     /* POS_V1_COUNT, POS_V2_COUNT or POS_COUNT */
                     .n_data = (int)npz_find(f, "data.position")->count};
    rc = ckpt_load_from(f, &ck);
    if (rc != AG_OK) return rc;
    rc = tr_vocab_pair_load(ck.extra, ck.extra_len, &tr->src, &tr->tgt, f->path);
    free((void *)ck.extra);
    if (rc == AG_OK && (tr->src.n != mc.src_vocab || tr->tgt.n != mc.tgt_vocab))
        rc = ag_fail(AG_ERR_FORMAT,
                     "%s: the vocabularies (%d, %d words) do not match the model's (%d, %d)",
                     f->path, tr->src.n, tr->tgt.n, mc.src_vocab, mc.tgt_vocab);
    if (rc != AG_OK) return rc;
    int n_pos = ck.n_data;
    memcpy(tr->pos, ck.data, (size_t)n_pos * sizeof(int64_t));
    tr->shards = n_pos > POS_SHARDS ? (int)tr->pos[POS_SHARDS] : 1;
    /* --clip is the run's (as attograd-gpt's --grad-clip): given again, it must agree */
    TrTrainConfig d = tr_train_defaults();
    tr->clip = n_pos > POS_CLIP ? ex_bitsd(tr->pos[POS_CLIP]) : d.clip;
    rc = check_given(tr, &mc, &oc);
    if (rc != AG_OK) return rc;
    tr->step = optim_get_step(tr->opt);
    tr->log_every = (int)kept(c->log_every, tr, POS_LOG_EVERY, d.log_every, n_pos);
    /* a run without validation (--no-valid) stays one, unless --valid-every is given */
    tr->no_valid =
        n_pos > POS_VALID_EVERY && tr->pos[POS_VALID_EVERY] == 0 && c->valid_every == TR_KEEP;
    tr->valid_every = tr->no_valid
                          ? d.valid_every
                          : (int)kept(c->valid_every, tr, POS_VALID_EVERY, d.valid_every, n_pos);
    tr->save_every = (int)kept(c->save_every, tr, POS_SAVE_EVERY, d.save_every, n_pos);
    tr->valid_max = (int)kept(c->valid_max, tr, POS_VALID_MAX, d.valid_max, n_pos);
    rc = read_data(tr, 0);
    if (rc != AG_OK) return rc;
    if (tr->train.n != tr->pos[POS_N_TRAIN])
        return ag_fail(AG_ERR_ARG,
                       "%s has %d pairs; the checkpoint %s was trained on %lld: "
                       "resume with the same data",
                       c->train_path, tr->train.n, f->path, (long long)tr->pos[POS_N_TRAIN]);
    /* batch, cursor and epoch passed tr_check_position, against the pairs just compared */
    tr_loader_init(&tr->loader, &tr->train, (int)tr->pos[POS_BATCH], (uint64_t)tr->pos[POS_SEED]);
    tr_loader_seek(&tr->loader, tr->pos[POS_EPOCH], tr->pos[POS_CURSOR]);
    if (c->steps == TR_KEEP && c->epochs <= 0)
        tr->total = n_pos > POS_TOTAL ? tr->pos[POS_TOTAL] : d.steps;
    else
        tr->total = total_steps(c, &tr->train, tr->loader.batch_size);
    if (tr->total < tr->step)
        return ag_fail(AG_ERR_ARG,
                       "--%s asks for %lld steps, but %s is already at step %lld: give more "
                       "steps, or none to finish the run",
                       c->epochs > 0 ? "epochs" : "steps", (long long)tr->total, f->path,
                       (long long)tr->step);
    tr->saved_step = tr->step;
    return AG_OK;
}

static int setup_resume(Trainer *tr) {
    if (!ex_file_exists(tr->last_path))
        return ag_fail(AG_ERR_IO,
                       "%s: no checkpoint to resume from (train without --resume "
                       "first)",
                       tr->last_path);
    NpzFile *f;
    Seq2SeqConfig mc = {0};
    CkptConfig kc = tr_model_config(&mc);
    int rc = ckpt_read(tr->last_path, &kc, &f);
    /* a file over a limit is a bad file (exit 2), as for every other command */
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    rc = resume_from(tr, f, &mc);
    npz_free(f);
    return rc;
}

void tr_trainer_free(Trainer *tr) {
    if (tr->csv) fclose(tr->csv);
    dist_grad_free(tr->dist);
    tr_batch_free(&tr->batch);
    tr_batch_free(&tr->shard);
    if (tr->loader.order) tr_loader_free(&tr->loader);
    if (tr->tape) ag_tape_free(tr->tape);
    if (tr->step_arena) arena_free(tr->step_arena);
    if (tr->params) {
        nn_seq2seq_free(&tr->m);
        arena_free(tr->params);
    }
    tr_data_free(&tr->train);
    tr_data_free(&tr->valid);
    if (tr->src.words) tr_vocab_free(&tr->src);
    if (tr->tgt.words) tr_vocab_free(&tr->tgt);
    free(tr->vocab_text);
}

/* Error codes of the setup -> exit codes: what the user gave is wrong (2), or the machine
 * failed (1). print: this process says why (dist_agree: one message for all processes). */
static int setup_exit(int rc, int print) {
    if (print) fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
    return rc == AG_ERR_NOMEM ? TR_EXIT_FAIL : TR_EXIT_USAGE;
}

/* The start of tr_train: the settings, a fresh or resumed run, the output folder, the step
 * arena (measured: check_step_memory), agreed on by every process (one that cannot start stops
 * all), then the log and the shards' buffers. Process 0 alone makes the folder and writes in
 * it. */
int tr_trainer_start(Trainer *tr, const TrTrainConfig *c) {
    memset(tr, 0, sizeof *tr);
    tr->cfg = c;
    int rc = AG_OK;
    /* on resume, TR_KEEP takes the checkpoint's setting */
#define BAD_SETTING(x, lo) ((x) < (lo) && !(c->resume && (x) == TR_KEEP))
    if (c->batch < 1 || (BAD_SETTING(c->steps, 1) && c->epochs < 1) ||
        BAD_SETTING(c->log_every, 1) || BAD_SETTING(c->valid_every, 1) ||
        BAD_SETTING(c->save_every, 0) || BAD_SETTING(c->valid_max, 0) || BAD_SETTING(c->clip, 0) ||
        c->steps > CKPT_MAX_STEP || c->shards < 0)
        rc = ag_fail(AG_ERR_ARG, "batch, steps (at most 2^53) or epochs, log, valid and save "
                                 "intervals must be positive, valid-max, the clipping norm and "
                                 "shards >= 0");
#undef BAD_SETTING
    snprintf(tr->last_path, sizeof tr->last_path, "%s/last.npz", c->out_dir);
    snprintf(tr->best_path, sizeof tr->best_path, "%s/best.npz", c->out_dir);
    snprintf(tr->csv_path, sizeof tr->csv_path, "%s/log.csv", c->out_dir);
    if (rc == AG_OK && c->resume)
        rc = setup_resume(tr);
    else if (rc == AG_OK && !c->force && ex_file_exists(tr->last_path))
        rc = ag_fail(AG_ERR_ARG,
                     "%s exists: continue that run with --resume, or start a new "
                     "one over it with --force",
                     tr->last_path);
    else if (rc == AG_OK)
        rc = setup_fresh(tr);
    if (rc == AG_OK && tr->total > CKPT_MAX_STEP)
        rc = ag_fail(AG_ERR_ARG, "%lld steps: at most %lld", (long long)tr->total,
                     (long long)CKPT_MAX_STEP);
    if (rc == AG_OK && (tr->shards < dist_size() || tr->shards > tr->loader.batch_size))
        rc = ag_fail(AG_ERR_ARG,
                     "--shards %d: must be at least the %d processes and at most the batch "
                     "size %d",
                     tr->shards, dist_size(), tr->loader.batch_size);
    if (rc == AG_OK && dist_rank() == 0) rc = run_make_dirs(c->out_dir);
    if (rc == AG_OK) {
        tr->vocab_text = tr_vocab_pair_save(&tr->src, &tr->tgt, &tr->vocab_len);
        tr->step_arena = arena_new("step", 0);
        tr->tape = ag_tape_new(tr->step_arena);
        rc = check_step_memory(tr);
    }
    int print;
    rc = dist_agree(rc, &print); /* every process stops when one cannot start */
    if (rc != AG_OK) return setup_exit(rc, print);
    if (c->check_finite) ag_check_finite(tr->tape, 1);
    tr->tty = isatty(STDOUT_FILENO);
    if (dist_rank() == 0) {
        tr_remove_stale_temps(tr);
        if (tr_log_open(tr, c->resume) != AG_OK) {
            fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
            dist_abort(TR_EXIT_FAIL);
            return TR_EXIT_FAIL;
        }
    }
    tr->poison = c->inject_nan > 0 ? ag_params_find(&tr->m.params, "decoder.norm.weight") : NULL;
    if (tr->shards > 1 || dist_size() > 1) {
        tr->dist = dist_grad_new(&tr->m.params, tr->shards);
        tr->dist->mean = 0; /* each shard's loss is weighted by its share of the tokens */
    }
    return TR_EXIT_OK;
}
