/* train.c: the trainer. Reads the data, builds or resumes the model, and runs the loop: a
 * length-bucketed batch, the loss, backward, clipping, an Adam step; a CSV row every
 * log_every steps, validation (loss and greedy exact match) every valid_every steps, the
 * latest and the best checkpoints, a progress bar on a terminal. SIGINT and SIGTERM set a
 * flag checked between steps: the run saves and stops. A non-finite loss or gradient stops
 * the run naming the step (and, in check mode, the op), keeping the last good checkpoint. A
 * failed write (a full disk, a read-only folder) stops it naming the file; checkpoints are
 * written atomically and the log is synced before each save and cut back to the checkpoint's
 * step on resume, so no fault loses a checkpoint or a logged row (README, "Faults").
 * Resuming is bit-exact: the checkpoint holds the weights, Adam's state and step, the dropout
 * RNG and the loader's position (data.position, below), and an epoch's batches are a pure
 * function of (seed, epoch). Not here: decoding and metrics (decode.c), flags (cli.c). */
#include "translate.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

volatile sig_atomic_t tr_stop_signal = 0;

/* data.position of a checkpoint: the loader, the best validation so far, the last validated
 * step, the CSV row being accumulated and the run's settings that --resume keeps (doubles
 * stored as their bits). Checkpoints written before the settings were kept hold the first
 * POS_V1_COUNT values. What each may be: position_rules. */
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
    POS_TOTAL, /* --steps (or --epochs times the batches of an epoch) */
    POS_CLIP,  /* --clip (double bits) */
    POS_COUNT,
    POS_V1_COUNT = POS_LOG_EVERY
};

static int64_t dbits(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}
static double bitsd(int64_t i) {
    double x;
    memcpy(&x, &i, sizeof x);
    return x;
}

/* What data.position's values may be, checked (ckpt_check_rules) before any is used, by
 * --resume and by every command that loads a checkpoint (tr_load). A checkpoint of step s:
 * the epoch, the best and last validated steps and the steps since the last CSV row are at
 * most s, and the loader's position is exactly batch s of the plan (epoch times the batches
 * of an epoch, plus the cursor). The training file itself is compared later (its pairs). */
int tr_check_position(const NpzFile *f) {
    const NpzEntry *e = npz_find(f, "data.position"), *se = npz_find(f, "train.step");
    if (!e) return AG_OK;
    if (e->dtype != NPZ_I64 || e->ndim != 1 || (e->count != POS_V1_COUNT && e->count != POS_COUNT))
        return ag_fail(AG_ERR_FORMAT,
                       "%s: 'data.position' must be %d or %d '<i8' values (not a checkpoint of "
                       "attograd-translate?)",
                       f->path, POS_V1_COUNT, POS_COUNT);
    int64_t step = 0, p[POS_COUNT];
    if (se && se->dtype == NPZ_I64 && se->ndim == 0) memcpy(&step, se->data, sizeof step);
    const int64_t big = 1 << 30;
#define R_INT(i, what, lo, hi)                                                                     \
    { "data.position", i, what, CKPT_INT, lo, hi, 0, 0 }
#define R_F64(i, what, lo, hi)                                                                     \
    { "data.position", i, what, CKPT_F64_BITS, 0, 0, lo, hi }
    const CkptRule rules[] = {
        R_INT(POS_EPOCH, "epoch", 0, step),
        R_INT(POS_CURSOR, "cursor", 0, INT_MAX),
        R_INT(POS_BATCH, "batch size", 1, 1 << 20),
        R_INT(POS_N_TRAIN, "training pairs", 1, INT_MAX),
        R_INT(POS_BEST_STEP, "step of best.npz", 0, step),
        R_F64(POS_BEST_EXACT, "best valid exact match", 0, 1),
        R_F64(POS_BEST_LOSS, "best valid loss", 0, DBL_MAX),
        R_INT(POS_LAST_VALID, "last validated step", 0, step),
        R_F64(POS_IV_LOSS, "losses since the last log row", 0, DBL_MAX),
        R_F64(POS_IV_NORM, "gradient norms since the last log row", 0, DBL_MAX),
        R_INT(POS_IV_STEPS, "steps since the last log row", 0, step),
        R_INT(POS_IV_TOKENS, "tokens since the last log row", 0, CKPT_MAX_STEP),
        R_INT(POS_LOG_EVERY, "--log-every", 1, big),
        R_INT(POS_VALID_EVERY, "--valid-every", 0, big), /* 0: a run without validation */
        R_INT(POS_SAVE_EVERY, "--save-every", 0, big),
        R_INT(POS_VALID_MAX, "--valid-max", 0, big),
        R_INT(POS_TOTAL, "--steps", step > 1 ? step : 1, CKPT_MAX_STEP),
        R_F64(POS_CLIP, "--clip", 0, DBL_MAX),
    };
#undef R_INT
#undef R_F64
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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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

static int file_exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

static void on_signal(int sig) {
    if (tr_stop_signal) { /* a second signal: stop now, without saving */
        static const char msg[] = "\nsecond signal: quitting without saving\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    tr_stop_signal = sig;
}

static int stop_requested(void) { return tr_stop_signal != 0; }

/* ---- the trainer's state ---- */
typedef struct {
    const TrTrainConfig *cfg;
    TrVocab src, tgt;
    TrData train, valid;
    int have_valid;
    int no_valid; /* resumed from a run without validation, and --valid-every not given */
    Seq2Seq m;
    Arena *params, *step_arena;
    Tape *tape;
    Optimizer *opt;
    Rng rng;
    TrLoader loader;
    TrBatch batch;
    int64_t step, total, saved_step;
    int64_t pos[POS_COUNT];
    int log_every, valid_every, save_every, valid_max; /* the run's (cfg's, or on resume the
                                                        * checkpoint's unless given again) */
    double clip;
    char last_path[600], best_path[600], csv_path[600];
    FILE *csv;
    char *vocab_text;
    size_t vocab_len;
    int tty;
    double t_start, t_row, t_bar, last_tps;
    int64_t step_start;
} Trainer;

static void fmt_time(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

static int save(Trainer *tr, const char *path) {
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
    tr->pos[POS_CLIP] = dbits(tr->clip);
    Checkpoint ck = {.params = &tr->m.params,
                     .config = tr_model_config(&tr->m.cfg),
                     .opt = tr->opt,
                     .rng = &tr->rng,
                     .n_data = POS_COUNT,
                     .extra = tr->vocab_text,
                     .extra_len = tr->vocab_len};
    memcpy(ck.data, tr->pos, sizeof tr->pos);
    int rc = ckpt_save(path, &ck, tr->cfg->compress, NULL);
    if (rc != AG_OK)
        fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
    else if (path == tr->last_path)
        tr->saved_step = tr->step;
    return rc;
}

/* ---- the CSV log ---- */
static const char csv_header[] =
    "step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_exact\n";

/* On resume: keeps the rows up to step (a crash may have left later ones, or half a row) by
 * truncating the file after the last of them, then appends. Truncating needs no disk space and
 * writes nothing, so a full disk or a failed write never loses the rows already there. */
static int open_csv(Trainer *tr, int resume) {
    FILE *f = resume ? fopen(tr->csv_path, "r+") : NULL;
    if (!f && resume && errno != ENOENT)
        return ag_fail(AG_ERR_IO, "%s: cannot open for appending: %s", tr->csv_path,
                       strerror(errno));
    if (f) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        long keep = 0, at = 0;
        int header = 0;
        while ((n = getline(&line, &cap, f)) > 0) {
            long long st;
            at += (long)n;
            if (line[n - 1] != '\n') break; /* a row cut short by a crash */
            if (at == (long)n) {
                header = strcmp(line, csv_header) == 0;
                if (!header) break;
            } else if (sscanf(line, "%lld,", &st) != 1 || st > tr->step) {
                break;
            }
            keep = at;
        }
        free(line);
        if (header) {
            if (ftruncate(fileno(f), keep) != 0 || fseek(f, 0, SEEK_END) != 0) {
                int e = errno;
                fclose(f);
                return ag_fail(AG_ERR_IO, "%s: cannot truncate after step %lld: %s", tr->csv_path,
                               (long long)tr->step, strerror(e));
            }
            tr->csv = f;
            return AG_OK;
        }
        fclose(f); /* not our log: start a new one */
    }
    tr->csv = fopen(tr->csv_path, "w");
    if (!tr->csv)
        return ag_fail(AG_ERR_IO, "%s: cannot open for writing: %s", tr->csv_path, strerror(errno));
    fputs(csv_header, tr->csv);
    if (fflush(tr->csv) != 0)
        return ag_fail(AG_ERR_IO, "%s: cannot write: %s", tr->csv_path, strerror(errno));
    return AG_OK;
}

static double epoch_of(const Trainer *tr) {
    return (double)tr->loader.epoch + (double)tr->loader.cursor / tr->loader.n_batches;
}

/* One CSV row for the steps since the last one (and, if valid, the validation). A failed
 * write (a full disk) is AG_ERR_IO naming the log: the run stops there. */
static int write_row(Trainer *tr, int valid, double vloss, double vexact) {
    int64_t *p = tr->pos;
    double n = p[POS_IV_STEPS] > 0 ? (double)p[POS_IV_STEPS] : 1, t = now_s();
    double loss = bitsd(p[POS_IV_LOSS]) / n, norm = bitsd(p[POS_IV_NORM]) / n;
    double tps = t > tr->t_row ? (double)p[POS_IV_TOKENS] / (t - tr->t_row) : 0;
    fprintf(tr->csv, "%lld,%.4f,%.6f,%.6e,%.6f,%.0f,", (long long)tr->step, epoch_of(tr), loss,
            tr->opt->last_lr, norm, tps);
    if (valid)
        fprintf(tr->csv, "%.6f,%.6f\n", vloss, vexact);
    else
        fputs(",\n", tr->csv);
    if (fflush(tr->csv) != 0 || ferror(tr->csv))
        return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", tr->csv_path,
                       strerror(errno ? errno : EIO));
    if (tr->cfg->verbose && !tr->tty) {
        char eta[32];
        double spent = t - tr->t_start, per = spent / (double)(tr->step - tr->step_start);
        fmt_time(eta, sizeof eta, per * (double)(tr->total - tr->step));
        printf("step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  grad %.3f  %.0f tok/s  eta %s\n",
               (long long)tr->step, (long long)tr->total, epoch_of(tr), loss, tr->opt->last_lr,
               norm, tps, eta);
        fflush(stdout);
    }
    tr->last_tps = tps;
    p[POS_IV_LOSS] = dbits(0);
    p[POS_IV_NORM] = dbits(0);
    p[POS_IV_STEPS] = p[POS_IV_TOKENS] = 0;
    tr->t_row = t;
    if (valid) { /* redraw loss.png (plot.c), outside the next row's tokens/s */
        tr_train_plot(tr->csv_path, tr->cfg->verbose, 0);
        tr->t_row = now_s();
    }
    return AG_OK;
}

/* The progress bar (a terminal only), at most 10 times a second. */
static void progress(Trainer *tr, double loss, int force) {
    if (!tr->cfg->verbose || !tr->tty) return;
    double t = now_s();
    if (!force && t - tr->t_bar < 0.1) return;
    tr->t_bar = t;
    double frac = (double)tr->step / (double)tr->total, spent = t - tr->t_start;
    double per = spent / (double)(tr->step - tr->step_start);
    char bar[21], eta[32];
    for (int i = 0; i < 20; i++) bar[i] = i < (int)(frac * 20) ? '#' : '.';
    bar[20] = '\0';
    fmt_time(eta, sizeof eta, per * (double)(tr->total - tr->step));
    double n = tr->pos[POS_IV_STEPS] ? (double)tr->pos[POS_IV_STEPS] : 1;
    double tps = tr->pos[POS_IV_STEPS] && t > tr->t_row
                     ? (double)tr->pos[POS_IV_TOKENS] / (t - tr->t_row)
                     : tr->last_tps;
    if (tr->pos[POS_IV_STEPS]) loss = bitsd(tr->pos[POS_IV_LOSS]) / n;
    printf("\r[%s] step %lld/%lld  epoch %.2f  loss %.4f  lr %.2e  %.0f tok/s  ETA %s\033[K", bar,
           (long long)tr->step, (long long)tr->total, epoch_of(tr), loss, tr->opt->last_lr, tps,
           eta);
    fflush(stdout);
}

static void end_bar(Trainer *tr) {
    if (tr->cfg->verbose && tr->tty) {
        printf("\n");
        fflush(stdout);
    }
}

static int params_finite(const Trainer *tr) {
    for (int i = 0; i < tr->m.params.n; i++) {
        const Tensor *p = tr->m.params.items[i];
        for (size_t k = 0; k < p->size; k++)
            if (!isfinite((double)p->data[k])) return 0;
    }
    return 1;
}

/* The message of a run that went non-finite at step s. from_tape: the loss or a gradient,
 * which check mode traces to an op (else the optimizer's update overflowed a weight). */
static void diverged(Trainer *tr, int64_t s, const char *what, double value, int from_tape) {
    const char *v = isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
    end_bar(tr);
    fprintf(stderr, TR_PROG " train: step %lld: %s is %s: training stopped. ", (long long)s, what,
            v);
    fprintf(stderr, "The last good checkpoint is %s (step %lld)\n", tr->last_path,
            (long long)tr->saved_step);
    const AgNonFinite *r = ag_first_nonfinite(tr->tape);
    if (!from_tape)
        fprintf(stderr, "the loss and gradients were finite: the optimizer's update overflowed "
                        "(try a smaller --lr, or --clip)\n");
    else if (r)
        fprintf(stderr, "the first non-finite value: %s\n", ag_nonfinite_message(r));
    else if (!tr->tape->check_finite)
        fprintf(stderr, "(run with --check-finite, or AG_CHECK_FINITE=1, to name the op where it "
                        "first appeared)\n");
}

/* After a failed write (the message is printed): what is still safe on disk. */
static void write_failed(Trainer *tr) {
    end_bar(tr);
    fprintf(stderr,
            "training stopped at step %lld; the last good checkpoint is %s (step %lld), "
            "unchanged\n",
            (long long)tr->step, tr->last_path, (long long)tr->saved_step);
}

/* Peak and current resident memory in KiB: VmHWM and VmRSS of /proc/self/status, or where
 * there is none getrusage's ru_maxrss (and -1 for the current figure). */
static void memory_kib(long *peak, long *now) {
    *peak = *now = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "VmHWM: %ld", peak) == 1) continue;
            sscanf(line, "VmRSS: %ld", now);
        }
        fclose(f);
    }
    struct rusage ru;
    if (*peak < 0 && getrusage(RUSAGE_SELF, &ru) == 0) *peak = ru.ru_maxrss;
}

/* Bytes malloc has handed out and not had back, in KiB (glibc 2.33 and later), else -1. Unlike
 * the RSS it does not depend on where blocks land in the heap, so a leak of a few KiB a
 * validation shows; it counts the small freed blocks glibc keeps in its per-thread cache
 * (tcache) as in use: a few KiB that settle within the first few hundred steps. */
static long malloc_in_use_kib(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
#else
    return -1;
#endif
}

/* --report-rss: one line, to stdout (also with --quiet: it was asked for); first[0], first[1]:
 * the peak RSS and the malloc figure of the first report */
static void report_rss(const Trainer *tr, long first[2]) {
    long peak, now;
    memory_kib(&peak, &now);
    printf("memory: peak RSS %ld KiB after step %lld (now %ld KiB)", peak, (long long)tr->step,
           now);
    long used = malloc_in_use_kib(); /* after a printf: with --quiet, stdout's buffer is new */
    if (first[0] >= 0)
        printf(", %+ld KiB since step %lld", peak - first[0], (long long)tr->cfg->report_rss);
    if (used >= 0) {
        printf("; malloc in use %ld KiB", used);
        if (first[0] >= 0) printf(", %+ld KiB", used - first[1]);
    }
    printf("\n");
    fflush(stdout);
    if (first[0] < 0) {
        first[0] = peak;
        first[1] = used;
    }
}

/* 1 if name is "<file>.tmp.<digits>" for one of the files the trainer writes atomically */
static int is_temp_of_ours(const char *name) {
    static const char *const files[] = {"last.npz.tmp.", "best.npz.tmp.", "loss.png.tmp."};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(files[i]);
        if (strncmp(name, files[i], n) != 0 || !name[n]) continue;
        if (strspn(name + n, "0123456789") == strlen(name + n)) return 1;
    }
    return 0;
}

/* Temporary files of saves that a kill -9 interrupted ("last.npz.tmp.<pid>", also the loss
 * plot's): never read, removed when a run starts in the folder. */
static void remove_stale_temps(const Trainer *tr) {
    DIR *d = opendir(tr->cfg->out_dir);
    if (!d) return;
    char path[1100];
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_temp_of_ours(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", tr->cfg->out_dir, e->d_name);
        if (unlink(path) == 0 && tr->cfg->verbose)
            printf("removed %s (left by an interrupted save)\n", path);
    }
    closedir(d);
}

/* Validation: loss and greedy exact match on valid. Returns 0 if interrupted. */
static int validate(Trainer *tr, double *vloss, double *vexact) {
    TrScore sc;
    int done =
        tr_evaluate(&tr->m, tr->tape, &tr->valid, tr->valid_max, tr->loader.batch_size, &sc, vloss,
                    NULL, &tr->src, &tr->tgt, tr->cfg->handle_signals ? stop_requested : NULL);
    if (!done) return 0;
    *vexact = tr_score_exact(&sc);
    int64_t *p = tr->pos;
    int better = p[POS_BEST_STEP] == 0 || *vexact > bitsd(p[POS_BEST_EXACT]) ||
                 (*vexact == bitsd(p[POS_BEST_EXACT]) && *vloss < bitsd(p[POS_BEST_LOSS]));
    p[POS_LAST_VALID] = tr->step;
    if (better) {
        p[POS_BEST_STEP] = tr->step;
        p[POS_BEST_EXACT] = dbits(*vexact);
        p[POS_BEST_LOSS] = dbits(*vloss);
    }
    if (tr->cfg->verbose) {
        end_bar(tr);
        printf("valid at step %lld: loss %.4f, exact match %.2f%% (%ld sentences)%s\n",
               (long long)tr->step, *vloss, 100 * *vexact, sc.n_sent,
               better ? ", best so far" : "");
        fflush(stdout);
    }
    if (better && save(tr, tr->best_path) != AG_OK) return -1;
    return 1;
}

/* ---- setting up: a fresh run or a resumed one ---- */

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
                     /* POS_V1_COUNT or POS_COUNT */
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
    rc = check_given(tr, &mc, &oc);
    if (rc != AG_OK) return rc;
    tr->step = optim_get_step(tr->opt);
    TrTrainConfig d = tr_train_defaults();
    tr->log_every = (int)kept(c->log_every, tr, POS_LOG_EVERY, d.log_every, n_pos);
    /* a run without validation (--no-valid) stays one, unless --valid-every is given */
    tr->no_valid =
        n_pos > POS_VALID_EVERY && tr->pos[POS_VALID_EVERY] == 0 && c->valid_every == TR_KEEP;
    tr->valid_every = tr->no_valid
                          ? d.valid_every
                          : (int)kept(c->valid_every, tr, POS_VALID_EVERY, d.valid_every, n_pos);
    tr->save_every = (int)kept(c->save_every, tr, POS_SAVE_EVERY, d.save_every, n_pos);
    tr->valid_max = (int)kept(c->valid_max, tr, POS_VALID_MAX, d.valid_max, n_pos);
    tr->clip = c->clip != TR_KEEP ? c->clip : n_pos > POS_CLIP ? bitsd(tr->pos[POS_CLIP]) : d.clip;
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
    if (!file_exists(tr->last_path))
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

static void trainer_free(Trainer *tr) {
    if (tr->csv) fclose(tr->csv);
    tr_batch_free(&tr->batch);
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
 * failed (1). */
static int setup_exit(int rc) {
    fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
    return rc == AG_ERR_NOMEM ? TR_EXIT_FAIL : TR_EXIT_USAGE;
}

/* ---- the loop ---- */

/* glibc's malloc serves a block of 128 KiB or more with an mmap of its own, but once such a
 * block is freed it raises that threshold to the block's size (mallopt(3)): the first
 * validation's decoding arena (nn_decode_begin: 142 KiB for make soak's model) is mmapped and
 * unmapped, and every later one comes from the heap, between the blocks of checkpoint saves
 * and key/value caches, where it leaves holes that grow the heap a few times (make soak: up to
 * +490 KiB of peak RSS after step 100, flat after step 1000, the bytes in use flat throughout;
 * or nothing, as the layout falls). Setting the threshold turns that adjustment off: the large
 * blocks that come and go with each validation keep coming from mmap and go back at free.
 * Process-wide, like the thread count; nothing to do outside glibc. */
static void fixed_mmap_threshold(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
}

int tr_train(const TrTrainConfig *c) {
    Trainer T;
    Trainer *tr = &T;
    memset(tr, 0, sizeof *tr);
    tr->cfg = c;
    int threads = k_threads_use(c->threads);
    fixed_mmap_threshold();
    /* on resume, TR_KEEP takes the checkpoint's setting */
#define BAD_SETTING(x, lo) ((x) < (lo) && !(c->resume && (x) == TR_KEEP))
    if (c->batch < 1 || (BAD_SETTING(c->steps, 1) && c->epochs < 1) ||
        BAD_SETTING(c->log_every, 1) || BAD_SETTING(c->valid_every, 1) ||
        BAD_SETTING(c->save_every, 0) || BAD_SETTING(c->valid_max, 0) || BAD_SETTING(c->clip, 0) ||
        c->steps > CKPT_MAX_STEP) {
        ag_fail(AG_ERR_ARG, "batch, steps (at most 2^53) or epochs, log, valid and save intervals "
                            "must be positive, valid-max and the clipping norm >= 0");
        return setup_exit(AG_ERR_ARG);
    }
#undef BAD_SETTING
    snprintf(tr->last_path, sizeof tr->last_path, "%s/last.npz", c->out_dir);
    snprintf(tr->best_path, sizeof tr->best_path, "%s/best.npz", c->out_dir);
    snprintf(tr->csv_path, sizeof tr->csv_path, "%s/log.csv", c->out_dir);
    int rc;
    if (c->resume) {
        rc = setup_resume(tr);
    } else if (!c->force && file_exists(tr->last_path)) {
        rc = ag_fail(AG_ERR_ARG,
                     "%s exists: continue that run with --resume, or start a new "
                     "one over it with --force",
                     tr->last_path);
    } else {
        rc = setup_fresh(tr);
    }
    if (rc == AG_OK && tr->total > CKPT_MAX_STEP)
        rc = ag_fail(AG_ERR_ARG, "%lld steps: at most %lld", (long long)tr->total,
                     (long long)CKPT_MAX_STEP);
    if (rc == AG_OK) rc = tr_make_dirs(c->out_dir);
    if (rc != AG_OK) {
        int code = setup_exit(rc);
        trainer_free(tr);
        return code;
    }
    tr->vocab_text = tr_vocab_pair_save(&tr->src, &tr->tgt, &tr->vocab_len);
    tr->step_arena = arena_new("step", 0);
    tr->tape = ag_tape_new(tr->step_arena);
    if (check_step_memory(tr) != AG_OK) {
        int code = setup_exit(AG_ERR_ARG);
        trainer_free(tr);
        return code;
    }
    if (c->check_finite) ag_check_finite(tr->tape, 1);
    tr->tty = isatty(STDOUT_FILENO);
    remove_stale_temps(tr);
    int code = TR_EXIT_OK;
    if (open_csv(tr, c->resume) != AG_OK) {
        fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
        trainer_free(tr);
        return TR_EXIT_FAIL;
    }
    if (c->verbose) {
        const Seq2SeqConfig *m = &tr->m.cfg;
        printf("kernels: %s, %d threads (%s)\n", k_kernel_family(), threads, k_threads_wait());
        if (c->resume)
            printf("resuming %s at step %lld (the model, optimizer, batch size and seed are the "
                   "checkpoint's)\n",
                   tr->last_path, (long long)tr->step);
        printf("model: d_model %d, %d heads (%d key/value), %d+%d layers, ff %d, dropout %g, "
               "%s; %zu parameters\n",
               m->layer.d_model, m->layer.n_heads, m->layer.n_kv_heads, m->n_enc_layers,
               m->n_dec_layers, m->layer.d_ff, m->layer.dropout,
               m->layer.pre_ln ? "pre-LN" : "post-LN", ag_params_count(&tr->m.params));
        printf("data: %d training pairs (%d batches of %d an epoch), %d valid pairs; "
               "vocabularies %d source, %d target words\n",
               tr->train.n, tr->loader.n_batches, tr->loader.batch_size,
               tr->have_valid ? tr->valid.n : 0, tr->src.n, tr->tgt.n);
        printf("training to step %lld; writing %s, %s and %s\n", (long long)tr->total,
               tr->last_path, tr->best_path, tr->csv_path);
        fflush(stdout);
    }
    struct sigaction sa, old_int, old_term;
    if (c->handle_signals) {
        tr_stop_signal = 0;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
    }
    tr->t_start = tr->t_row = tr->t_bar = now_s();
    tr->step_start = tr->step;
    if (!c->resume && save(tr, tr->last_path) != AG_OK) code = TR_EXIT_FAIL;
    int interrupted = 0;
    long rss_first[2] = {-1, -1};
    double vloss = 0, vexact = 0, last_loss = 0;
    /* a validation the previous run could not finish (it was interrupted during it) */
    if (code == TR_EXIT_OK && c->resume && tr->have_valid && tr->step > 0 &&
        tr->pos[POS_LAST_VALID] < tr->step &&
        (tr->step % tr->valid_every == 0 || tr->step == tr->total)) {
        int v = validate(tr, &vloss, &vexact);
        if (v < 0)
            code = TR_EXIT_FAIL;
        else if (v == 0)
            interrupted = 1;
        else if (write_row(tr, 1, vloss, vexact) != AG_OK) {
            fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
            code = TR_EXIT_FAIL;
        }
    }
    Tensor *poison =
        c->inject_nan > 0 ? ag_params_find(&tr->m.params, "decoder.norm.weight") : NULL;
    int save_every = tr->save_every > 0 ? tr->save_every : tr->valid_every;
    while (code == TR_EXIT_OK && !interrupted && tr->step < tr->total) {
        if (c->handle_signals && stop_requested()) {
            interrupted = 1;
            break;
        }
        int64_t s = tr->step + 1;
        tr_loader_next(&tr->loader, &tr->batch);
        TrBatch *b = &tr->batch;
        ag_tape_reset(tr->tape);
        ag_params_zero_grad(&tr->m.params);
        if (poison && s == c->inject_nan) poison->data[0] = (Real)NAN;
        Tensor *loss = nn_seq2seq_loss(tr->tape, &tr->m, b->src, b->S, b->tgt_in, b->tgt_out, b->B,
                                       b->T, &tr->rng);
        double l = (double)loss->data[0], norm = 0;
        const char *what = NULL;
        if (!isfinite(l)) {
            what = "the training loss";
        } else {
            ag_backward(tr->tape, loss);
            norm = optim_clip_grad_norm(&tr->m.params, tr->clip > 0 ? tr->clip : DBL_MAX);
            if (!isfinite(norm)) what = "the gradient norm";
        }
        if (what) {
            diverged(tr, s, what, isfinite(l) ? norm : l, 1);
            code = TR_EXIT_FAIL;
            break;
        }
        optim_step(tr->opt);
        tr->step = s;
        last_loss = l;
        int64_t *p = tr->pos;
        p[POS_IV_LOSS] = dbits(bitsd(p[POS_IV_LOSS]) + l);
        p[POS_IV_NORM] = dbits(bitsd(p[POS_IV_NORM]) + norm);
        p[POS_IV_STEPS]++;
        p[POS_IV_TOKENS] += b->n_tgt_tokens;
        progress(tr, l, 0);
        int valid_due = tr->have_valid && (s % tr->valid_every == 0 || s == tr->total);
        int save_due = s % save_every == 0 || s == tr->total, valid_ok = 0;
        if ((valid_due || save_due) && !params_finite(tr)) {
            /* an update overflowed: nothing is saved, the last good checkpoint stays */
            diverged(tr, s, "a weight after the update", NAN, 0);
            code = TR_EXIT_FAIL;
            break;
        }
        if (valid_due) {
            int v = validate(tr, &vloss, &vexact);
            if (v < 0) {
                write_failed(tr);
                code = TR_EXIT_FAIL;
                break;
            }
            if (v == 0) {
                interrupted = 1;
                break;
            }
            valid_ok = 1;
        }
        if (s % tr->log_every == 0 || valid_due || s == tr->total) {
            if (write_row(tr, valid_ok, vloss, vexact) != AG_OK) {
                fprintf(stderr, TR_PROG " train: %s\n", ag_last_error());
                write_failed(tr);
                code = TR_EXIT_FAIL;
                break;
            }
            progress(tr, l, 1);
        }
        if (save_due && save(tr, tr->last_path) != AG_OK) {
            write_failed(tr);
            code = TR_EXIT_FAIL;
            break;
        }
        if (c->report_rss > 0 && s == c->report_rss) report_rss(tr, rss_first);
    }
    end_bar(tr);
    if (code == TR_EXIT_OK && interrupted) {
        int sig = tr_stop_signal ? tr_stop_signal : SIGINT;
        if (!params_finite(tr)) {
            diverged(tr, tr->step, "a weight after the update", NAN, 0);
            code = TR_EXIT_FAIL;
        } else if (save(tr, tr->last_path) != AG_OK) {
            code = TR_EXIT_FAIL;
        } else {
            fprintf(stderr,
                    TR_PROG " train: interrupted by %s at step %lld: saved %s; continue with "
                            "--resume\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)tr->step, tr->last_path);
            code = sig == SIGTERM ? TR_EXIT_SIGTERM : TR_EXIT_SIGINT;
        }
    } else if (code == TR_EXIT_OK && c->verbose) {
        double spent = now_s() - tr->t_start;
        char t[32];
        fmt_time(t, sizeof t, spent);
        printf("done: step %lld, last loss %.4f, %s (%.1f steps/s)\n", (long long)tr->step,
               last_loss, t, (double)(tr->step - tr->step_start) / (spent > 0 ? spent : 1));
        if (tr->pos[POS_BEST_STEP] > 0 && file_exists(tr->best_path))
            printf("best: step %lld, valid exact match %.2f%%, loss %.4f -> %s\n",
                   (long long)tr->pos[POS_BEST_STEP], 100 * bitsd(tr->pos[POS_BEST_EXACT]),
                   bitsd(tr->pos[POS_BEST_LOSS]), tr->best_path);
        printf("latest: %s; log: %s\n", tr->last_path, tr->csv_path);
    }
    if (c->report_rss > 0 && rss_first[0] >= 0) report_rss(tr, rss_first);
    tr_train_plot(tr->csv_path, c->verbose, 1);
    if (c->handle_signals) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGTERM, &old_term, NULL);
    }
    fflush(stdout);
    trainer_free(tr);
    return code;
}
