/* train_setup.c: the trainer's defaults (tr_train_defaults), the translator's checks of a
 * model's configuration beyond the model's own (tr_check_config) and of the positional
 * data.position of a checkpoint written before the run loop (tr_check_position: every command
 * that loads one, and the legacy resume of train.c), and tr_train: a TrTrainConfig run as the
 * command line it stands for.
 * Not here: the run (train.c). Read next: cli.c. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
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
    c.tokenizer = TXT_VOCAB_WORD;
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
    if (c->src_vocab <= TXT_N_SPECIAL || c->tgt_vocab <= TXT_N_SPECIAL ||
        c->src_vocab > TXT_VOCAB_MAX_WORDS || c->tgt_vocab > TXT_VOCAB_MAX_WORDS) {
        snprintf(buf, sizeof buf, "vocabularies of %d and %d words: each must be in [%d, %d]",
                 c->src_vocab, c->tgt_vocab, TXT_N_SPECIAL + 1, TXT_VOCAB_MAX_WORDS);
        why = buf;
    } else if (c->max_len < 2 || c->max_len > 4096)
        why = "max_len must be in [2, 4096]";
    else if (c->pad_id != TXT_PAD)
        why = "pad_id must be 0";
    else if (l->d_model < 1 || l->d_model > 8192 || l->d_ff < 1 || l->d_ff > 65536)
        why = "d_model must be in [1, 8192] and ff in [1, 65536]";
    if (!why) return AG_OK;
    return ag_fail(AG_ERR_ARG, "%s: %s", what, why);
}

/* ---- tr_train: a configuration as the command line it stands for ---- */

typedef struct {
    char *argv[160];
    char text[80][48];
    int argc, n_text;
    const char *given; /* on resume, the flags given again (" name name "), as TrTrainConfig */
    int resume;
} Args;

static void arg(Args *a, const char *s) {
    if (a->argc < (int)(sizeof a->argv / sizeof *a->argv) - 1) a->argv[a->argc++] = (char *)s;
}

/* --name value, unless on resume the flag was not given again (kept: 1 for the flags the run
 * keeps from the checkpoint) */
static void opt(Args *a, int kept, const char *name, const char *fmt, ...) {
    char key[48];
    snprintf(key, sizeof key, " %s ", name + 2);
    if (a->resume && kept && !(a->given && strstr(a->given, key))) return;
    if (a->n_text >= 80) return;
    char *t = a->text[a->n_text++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t, sizeof a->text[0], fmt, ap);
    va_end(ap);
    arg(a, name);
    if (*t) arg(a, t); /* a switch: the name alone */
}

int tr_train(const TrTrainConfig *c) {
    static Args A; /* the texts outlive the run (the flags point into them) */
    Args *a = &A;
    memset(a, 0, sizeof *a);
    a->given = c->given, a->resume = c->resume;
    const Seq2SeqConfig *m = &c->model;
    const OptimConfig *o = &c->optim;
    static const char *const optims[] = {"sgd", "adam", "adamw"};
    static const char *const schedules[] = {"constant", "invsqrt", "cosine"};
    arg(a, "--train"), arg(a, c->train_path);
    if (c->valid_path && *c->valid_path)
        arg(a, "--valid"), arg(a, c->valid_path);
    else
        arg(a, "--no-valid");
    arg(a, "--out"), arg(a, c->out_dir);
    if (c->resume) arg(a, "--resume");
    if (c->force) arg(a, "--force");
    if (!c->verbose) arg(a, "--quiet");
    if (c->check_finite) arg(a, "--check-finite");
    opt(a, 0, "--threads", "%d", c->threads);
    opt(a, 0, "--compress", "%d", c->compress);
    opt(a, 0, "--inject-nan", "%lld", (long long)c->inject_nan);
    opt(a, 0, "--report-rss", "%lld", (long long)c->report_rss);
    opt(a, 0, "--max-memory", "%.17g", c->max_memory);
    /* the run's settings: on resume, TR_KEEP takes the checkpoint's */
    if (c->epochs > 0)
        opt(a, 0, "--epochs", "%d", c->epochs);
    else if (!(c->resume && c->steps == TR_KEEP))
        opt(a, 0, "--steps", "%lld", (long long)c->steps);
    if (!(c->resume && c->log_every == TR_KEEP)) opt(a, 0, "--log-every", "%d", c->log_every);
    if (!(c->resume && c->valid_every == TR_KEEP)) opt(a, 0, "--valid-every", "%d", c->valid_every);
    if (!(c->resume && c->save_every == TR_KEEP)) opt(a, 0, "--save-every", "%d", c->save_every);
    if (!(c->resume && c->valid_max == TR_KEEP)) opt(a, 0, "--valid-max", "%d", c->valid_max);
    /* the model, the optimizer, the batch and the seed: on resume, those given again */
    opt(a, 1, "--tokenizer", "%s", txt_vocab_kind_names[c->tokenizer]);
    if (c->tokenizer == TXT_VOCAB_BPE) opt(a, 1, "--vocab", "%d", c->vocab);
    opt(a, 1, "--d-model", "%d", m->layer.d_model);
    opt(a, 1, "--heads", "%d", m->layer.n_heads);
    opt(a, 1, "--kv-heads", "%d", m->layer.n_kv_heads);
    opt(a, 1, "--enc-layers", "%d", m->n_enc_layers);
    opt(a, 1, "--dec-layers", "%d", m->n_dec_layers);
    opt(a, 1, "--ff", "%d", m->layer.d_ff);
    opt(a, 1, "--act", "%s", m->layer.act == NN_GELU ? "gelu" : "relu");
    opt(a, 1, "--dropout", "%.17g", m->layer.dropout);
    if (m->layer.pre_ln) opt(a, 1, "--pre-ln", "%s", "");
    opt(a, 1, "--max-len", "%d", m->max_len);
    if (m->learned_pos) opt(a, 1, "--learned-pos", "%s", "");
    if (m->tie_output) opt(a, 1, "--tie-output", "%s", "");
    opt(a, 1, "--embed-gain", "%.17g", c->embed_gain);
    opt(a, 1, "--optim", "%s", optims[o->kind]);
    opt(a, 1, "--lr", "%.17g", o->lr);
    opt(a, 1, "--beta1", "%.17g", o->beta1);
    opt(a, 1, "--beta2", "%.17g", o->beta2);
    opt(a, 1, "--weight-decay", "%.17g", o->weight_decay);
    opt(a, 1, "--momentum", "%.17g", o->momentum);
    opt(a, 1, "--schedule", "%s", schedules[o->schedule.kind]);
    if (o->schedule.warmup >= 0) opt(a, 1, "--warmup", "%lld", (long long)o->schedule.warmup);
    opt(a, 1, "--schedule-steps", "%lld", (long long)o->schedule.total);
    opt(a, 1, "--lr-min", "%.17g", o->schedule.lr_min);
    opt(a, 1, "--batch", "%d", c->batch);
    opt(a, 1, "--clip", "%.17g", c->clip);
    opt(a, 1, "--seed", "%llu", (unsigned long long)c->seed);
    opt(a, 1, "--shards", "%d", c->shards);
    a->argv[a->argc] = NULL;
    return tr_train_main(a->argc, a->argv, 0);
}
