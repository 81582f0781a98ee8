/* translate_run.c: ts_train, a TsTrainConfig run as the `attograd-translate train` command line
 * it stands for, and the demo's configuration (ts_train_defaults).
 * Not here: the trainer (examples/translate/train.c). Read next: translate_run.h. */
#include "translate_run.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "translate.h"

TsTrainConfig ts_train_defaults(void) {
    TsTrainConfig c;
    memset(&c, 0, sizeof c);
    c.train_path = "build/data/train.tsv";
    c.valid_path = "build/data/valid.tsv";
    c.out_dir = "build/demo";
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
    c.optim.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, -1, 0, 1e-5};
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

typedef struct {
    char *argv[160];
    char text[80][48];
    int argc, n_text;
    const char *given; /* on resume, the flags given again (" name name ") */
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

int ts_train(const TsTrainConfig *c) {
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
    /* the run's settings, given again on resume */
    if (c->epochs > 0)
        opt(a, 0, "--epochs", "%d", c->epochs);
    else
        opt(a, 0, "--steps", "%lld", (long long)c->steps);
    opt(a, 0, "--log-every", "%d", c->log_every);
    opt(a, 0, "--valid-every", "%d", c->valid_every);
    opt(a, 0, "--save-every", "%d", c->save_every);
    opt(a, 0, "--valid-max", "%d", c->valid_max);
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
