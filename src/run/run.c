/* run.c: the run loop (run.h). run_main parses the flags, starts a fresh run or resumes one,
 * then takes steps: the model's batch, the loss of each shard (src/dist sums them in a fixed
 * tree when there are several shards or processes), backward, clipping, the optimizer's step;
 * after each, what is due: validation (best.npz), a CSV row, last.npz. The run's state is a
 * table of named fields built at start (CkptField rows over one buffer): the flags it keeps
 * ("flag.lr"), its sums since the last CSV row and its best validation ("run.*"), the model's
 * own fields ("model.*"), written to meta.run.<name> by every save and read back by --resume.
 * Not here: the CSV, progress, plots, signals and the clock (run_log.c). Read next:
 * run_log.c. */
#include "run.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_internal.h"

/* ---- the run's flags ---- */

static const char *const schedule_names[] = {"constant", "invsqrt", "cosine", NULL};
static const char *const precision_names[] = {"fp32", "bf16", NULL}; /* AG_PRECISION_* */

RunConfig run_defaults(void) {
    RunConfig c;
    memset(&c, 0, sizeof c);
    c.steps = 1000;
    c.batch = 32;
    c.optim = optim_defaults(OPTIM_ADAMW);
    c.optim.weight_decay = 0; /* --weight-decay */
    c.optim.schedule = (OptimSchedule){OPTIM_WARMUP_COSINE, 100, 0, 1e-4};
    c.weight_decay = 0.01;
    c.clip = 1.0;
    c.seed = 1;
    c.out = "build/run";
    c.log_every = 10;
    c.valid_every = 100;
    return c;
}

int run_flags(RunLoop *r, Flag *fl) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(fl);
    RunConfig *c = r->c;
    const Flag rows[RUN_N_FLAGS] = {
        {"steps", FLAG_I64, &c->steps, "N", "training steps", 1, 1e12, NULL, 0},
        {"batch", FLAG_INT, &c->batch, "N", "examples a step", 1, 1 << 20, NULL, 0},
        {"lr", FLAG_DOUBLE, &c->optim.lr, "X", "the peak learning rate", 0, FLAG_LR_MAX, NULL, 0},
        {"lr-min", FLAG_DOUBLE, &c->optim.schedule.lr_min, "X", "cosine: the final learning rate",
         0, FLAG_LR_MAX, NULL, 0},
        {"warmup", FLAG_I64, &c->optim.schedule.warmup, "N", "linear warmup steps", 0, 1e12, NULL,
         0},
        {"schedule", FLAG_CHOICE, &c->optim.schedule.kind, "NAME",
         "the decay after warmup: constant, invsqrt or cosine", 0, 0, schedule_names, 0},
        {"schedule-steps", FLAG_I64, &c->optim.schedule.total, "N",
         "the step where the cosine reaches --lr-min (0: --steps)", 0, 1e12, NULL, 0},
        {"weight-decay", FLAG_DOUBLE, &c->weight_decay, "X", "weight decay", 0, FLAG_WD_MAX, NULL,
         0},
        {"clip", FLAG_DOUBLE, &c->clip, "X", "clip the gradient norm (0: no)", 0, FLAG_CLIP_MAX,
         NULL, 0},
        {"seed", FLAG_I64, &c->seed, "N", "weights, data and dropout", 0, 9007199254740992.0, NULL,
         0},
        {"shards", FLAG_INT, &c->shards, "S",
         "micro-shards a batch, summed in a fixed order: the same bits for any number of "
         "processes (0: one a process; docs/mpi.md)",
         0, 1 << 16, NULL, 0},
        {"out", FLAG_PATH, &c->out, "DIR", "where last.npz, best.npz, log.csv, loss.png go", 0, 0,
         NULL, 0},
        {"resume", FLAG_SWITCH, &c->resume, NULL, "continue the run in --out from its last.npz", 1,
         0, NULL, 0},
        {"force", FLAG_SWITCH, &c->force, NULL, "start a new run over the one in --out", 1, 0, NULL,
         0},
        {"log-every", FLAG_INT, &c->log_every, "N", "steps between CSV rows", 1, 1 << 30, NULL, 0},
        {"valid-every", FLAG_INT, &c->valid_every, "N", "steps between validations", 1, 1 << 30,
         NULL, 0},
        {"save-every", FLAG_INT, &c->save_every, "N", "steps between saves (0: --valid-every)", 0,
         1 << 30, NULL, 0},
        {"threads", FLAG_INT, &c->threads, "N", "0: the CPUs (OMP_NUM_THREADS)", 0, 1024, NULL, 0},
        {"quiet", FLAG_SWITCH, &c->quiet, NULL, "print errors only", 1, 0, NULL, 0},
        {"inject-nan", FLAG_I64, &c->inject_nan, "STEP", "(tests) a NaN weight before STEP", 0,
         1e12, NULL, 0},
        {"ckpt", FLAG_PATH, &r->ckpt, "FILE",
         "eval: the checkpoint (default OUT/best.npz, else OUT/last.npz)", 0, 0, NULL, 0},
        {"precision", FLAG_CHOICE, &c->precision, "P",
         "the matrix products: fp32, or bf16 inputs summed in fp32 (the float build; "
         "docs/speed.md)",
         0, 0, precision_names, 0},
    };
    memcpy(fl, rows, sizeof rows);
    return RUN_N_FLAGS;
}

/* What --resume does with a flag: keep it (refuse another value), remember it (the
 * checkpoint's unless given), or nothing (not saved) */
enum { KEEP, REMEMBER, TRANSIENT };

static int listed(const char *const *list, const char *name) {
    for (int i = 0; list && list[i]; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

static const char *const run_remember[] = {"steps", "log-every", "valid-every", "save-every", NULL};
static const char *const run_transient[] = {"out",   "resume",     "force", "threads",
                                            "quiet", "inject-nan", "ckpt",  NULL};

static int flag_class(const RunLoop *r, const Flag *f, const char *name) {
    const char *p = (const char *)f->ptr, *c0 = (const char *)r->c;
    int ours = (p >= c0 && p < c0 + sizeof *r->c) || f->ptr == (const void *)&r->ckpt;
    if (f->ptr == (const void *)&r->c->compress || f->ptr == (const void *)&r->c->check_finite ||
        f->ptr == (const void *)&r->c->report_rss)
        return TRANSIENT; /* a program's rows for them, under any name */
    if (ours)
        return listed(run_remember, name)    ? REMEMBER
               : listed(run_transient, name) ? TRANSIENT
                                             : KEEP;
    return listed(r->m->remember, name)    ? REMEMBER
           : listed(r->m->transient, name) ? TRANSIENT
                                           : KEEP;
}

/* ---- the run's state as named fields over one buffer ---- */

/* the run's own: the sums of the CSV row being accumulated, the best validation */
static const struct {
    const char *name;
    size_t offset;
    CkptFieldType type;
    double lo, hi;
} state_rows[] = {
    {"run.row_loss", offsetof(RunState, row_loss), CKPT_FIELD_FLOAT, -DBL_MAX, DBL_MAX},
    {"run.row_norm", offsetof(RunState, row_norm), CKPT_FIELD_FLOAT, 0, DBL_MAX},
    {"run.row_tokens", offsetof(RunState, row_tokens), CKPT_FIELD_FLOAT, 0, DBL_MAX},
    {"run.row_steps", offsetof(RunState, row_steps), CKPT_FIELD_INT, 0, (double)CKPT_MAX_STEP},
    {"run.best_step", offsetof(RunState, best_step), CKPT_FIELD_INT, 0, (double)CKPT_MAX_STEP},
    {"run.last_valid", offsetof(RunState, last_valid), CKPT_FIELD_INT, 0, (double)CKPT_MAX_STEP},
};
#define N_STATE (int)(sizeof state_rows / sizeof state_rows[0])

static void add_slot(RunLoop *r, const char *name, CkptFieldType type, size_t size, double lo,
                     double hi, void *src, const Flag *flag, int cls) {
    AG_CHECK(r->n_slots < RUN_MAX_SLOTS, "run: more than %d saved values", RUN_MAX_SLOTS);
    RunSlot *s = &r->slots[r->n_slots];
    CkptField *fd = &r->fields[r->n_slots++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->src = src;
    s->flag = flag;
    s->cls = cls;
    s->size = size;
    s->off = r->buf_len;
    r->buf_len += (size + 7) / 8 * 8;
    *fd = (CkptField){s->name, type, s->off, size, lo, hi, 0};
}

/* The table: the kept and remembered flags of fl, the run's state, the model's state. */
static void build_slots(RunLoop *r) {
    char name[80];
    r->n_slots = 0;
    r->buf_len = 0;
    for (int i = 0; i < r->n_fl; i++) {
        const Flag *f = &r->fl[i];
        size_t len = strcspn(f->name, "|");
        snprintf(name, sizeof name, "flag.%.*s", (int)len, f->name);
        int cls = flag_class(r, f, name + 5);
        if (cls == TRANSIENT) continue;
        /* a number's saved range: its flag's, widened to a default outside it (0: "none") */
        double now = f->type == FLAG_DOUBLE ? *(double *)f->ptr
                     : f->type == FLAG_I64  ? (double)*(int64_t *)f->ptr
                     : f->type == FLAG_INT  ? (double)*(int *)f->ptr
                                            : 0;
        double lo = f->lo < now ? f->lo : now, hi = f->hi > now ? f->hi : now;
        switch (f->type) {
        case FLAG_INT:
        case FLAG_SWITCH:
        case FLAG_CHOICE: {
            if (f->type == FLAG_SWITCH) lo = f->lo < 0 ? f->lo : 0, hi = f->lo > 1 ? f->lo : 1;
            if (f->type == FLAG_CHOICE) lo = hi = 0;
            for (int k = 0; f->type == FLAG_CHOICE && f->choices[k]; k++) hi = k;
            add_slot(r, name, CKPT_FIELD_INT, sizeof(int), lo, hi, f->ptr, f, cls);
            /* a checkpoint older than --precision holds no flag.precision: fp32 (0) */
            if (f->ptr == (const void *)&r->c->precision) r->fields[r->n_slots - 1].optional = 1;
            break;
        }
        case FLAG_I64: add_slot(r, name, CKPT_FIELD_INT, 8, lo, hi, f->ptr, f, cls); break;
        case FLAG_U64: /* its bits in an int64 */
            add_slot(r, name, CKPT_FIELD_INT, 8, -1e19, 1e19, f->ptr, f, cls);
            break;
        case FLAG_DOUBLE: add_slot(r, name, CKPT_FIELD_FLOAT, 8, lo, hi, f->ptr, f, cls); break;
        case FLAG_STR:
        case FLAG_PATH:
            add_slot(r, name, CKPT_FIELD_STRING, RUN_STR_MAX, 0, 0, f->ptr, f, cls);
            r->fields[r->n_slots - 1].optional = 1; /* a file older than the flag's saving: "" */
            break;
        default:
            AG_CHECK(0, "run: flag --%s: a list cannot be saved: name it in RunModel.transient",
                     name + 5);
        }
    }
    for (int i = 0; i < N_STATE; i++)
        add_slot(r, state_rows[i].name, state_rows[i].type, 8, state_rows[i].lo, state_rows[i].hi,
                 (char *)&r->st + state_rows[i].offset, NULL, KEEP);
    for (int i = 0; i < r->m->n_metrics; i++) {
        snprintf(name, sizeof name, "run.best_%s", r->m->metric_names[i]);
        add_slot(r, name, CKPT_FIELD_FLOAT, 8, -DBL_MAX, DBL_MAX, &r->st.best[i], NULL, KEEP);
    }
    const CkptConfig *ms = &r->m->state;
    for (int i = 0; i < ms->n_fields; i++) {
        const CkptField *fd = &ms->fields[i];
        snprintf(name, sizeof name, "model.%s", fd->name);
        add_slot(r, name, fd->type, fd->size, fd->lo, fd->hi, (char *)ms->values + fd->offset, NULL,
                 KEEP);
        r->fields[r->n_slots - 1].optional = fd->optional; /* a field added later reads 0 */
    }
    free(r->buf);
    free(r->given);
    r->buf = calloc(r->buf_len ? r->buf_len : 1, 1);
    r->given = calloc(r->buf_len ? r->buf_len : 1, 1);
    AG_CHECK(r->buf && r->given, "run: out of memory");
}

/* the values into buf (r->buf before a save; r->given before a checkpoint is read) */
static void to_buf(RunLoop *r, char *buf) {
    for (int i = 0; i < r->n_slots; i++) {
        RunSlot *s = &r->slots[i];
        char *b = buf + s->off;
        if (s->flag && (s->flag->type == FLAG_STR || s->flag->type == FLAG_PATH)) {
            /* v may be b itself: a value restored from the buffer (from_buf) */
            const char *v = *(const char **)s->src;
            size_t n = v ? strnlen(v, RUN_STR_MAX - 1) : 0;
            if (v != b) memmove(b, v ? v : "", n);
            b[n] = '\0';
        } else {
            memcpy(b, s->src, s->size);
        }
    }
}

/* r->buf into the values; a flag given on this command line from r->given */
static void from_buf(RunLoop *r) {
    for (int i = 0; i < r->n_slots; i++) {
        RunSlot *s = &r->slots[i];
        char *b = (s->flag && s->flag->given ? r->given : r->buf) + s->off;
        if (s->flag && (s->flag->type == FLAG_STR || s->flag->type == FLAG_PATH))
            *(const char **)s->src = s->flag->type == FLAG_PATH && !*b ? NULL : b;
        else
            memcpy(s->src, b, s->size);
    }
}

/* The spelling the user typed of the flag whose value is at ptr (the canonical one when it was
 * not given; canon when no row holds ptr), without "--", into buf (cap bytes): for messages */
static const char *spelled(const RunLoop *r, const void *ptr, const char *canon, char *buf,
                           size_t cap) {
    for (int i = 0; i < r->n_fl; i++)
        if (r->fl[i].ptr == ptr) return flag_spelling(&r->fl[i], buf, cap);
    snprintf(buf, cap, "%s", canon);
    return buf;
}

/* Every text flag the run saves fits its field whole (RUN_STR_MAX): AG_OK, or AG_ERR_ARG
 * naming it (before the model's start reads anything) */
static int texts_fit(RunLoop *r) {
    char sp[80];
    for (int i = 0; i < r->n_fl; i++) {
        const Flag *f = &r->fl[i];
        if (f->type != FLAG_STR && f->type != FLAG_PATH) continue;
        flag_spelling(f, sp, sizeof sp);
        const char *v = *(const char *const *)f->ptr;
        size_t n = v ? strlen(v) : 0, len = strcspn(f->name, "|");
        char name[80];
        snprintf(name, sizeof name, "%.*s", (int)len, f->name);
        if (n >= RUN_STR_MAX && flag_class(r, f, name) != TRANSIENT)
            return ag_fail(AG_ERR_ARG, "--%s: %zu bytes: a run saves a text of at most %d", sp, n,
                           RUN_STR_MAX - 1);
    }
    return AG_OK;
}

/* A kept flag given again (r->given) must equal the checkpoint's (r->buf) */
static int check_kept(RunLoop *r, const char *path) {
    for (int i = 0; i < r->n_slots; i++) {
        RunSlot *s = &r->slots[i];
        if (!s->flag || s->cls != KEEP || !s->flag->given) continue;
        const char *b = r->buf + s->off, *src = r->given + s->off;
        char given[RUN_STR_MAX + 8], stored[RUN_STR_MAX + 8], sp[80];
        int same;
        if (s->flag->type == FLAG_STR || s->flag->type == FLAG_PATH) {
            same = strcmp(src, b) == 0;
            snprintf(given, sizeof given, " %s", src);
            snprintf(stored, sizeof stored, "%s", b);
        } else if (s->flag->type == FLAG_DOUBLE) {
            double v, w;
            memcpy(&v, src, 8), memcpy(&w, b, 8);
            same = v == w;
            snprintf(given, sizeof given, " %.9g", v);
            snprintf(stored, sizeof stored, "%.9g", w);
        } else {
            int64_t v = 0, w = 0;
            if (s->size == 8) {
                memcpy(&v, src, 8), memcpy(&w, b, 8);
            } else {
                int x, y;
                memcpy(&x, src, 4), memcpy(&y, b, 4);
                v = x, w = y;
            }
            same = v == w;
            if (s->flag->type == FLAG_CHOICE) {
                snprintf(given, sizeof given, " %s", s->flag->choices[v]);
                snprintf(stored, sizeof stored, "%s", s->flag->choices[w]);
            } else if (s->flag->type == FLAG_SWITCH) {
                given[0] = '\0';
                snprintf(stored, sizeof stored, "%s", w ? "on" : "off");
            } else {
                snprintf(given, sizeof given, " %lld", (long long)v);
                snprintf(stored, sizeof stored, "%lld", (long long)w);
            }
        }
        if (same) continue;
        return ag_fail(AG_ERR_ARG,
                       "--%s%s differs from the checkpoint's (%s, %s): --resume continues the run "
                       "with its model, optimizer, batch size and seed (start a new run with "
                       "--force to change them)",
                       flag_spelling(s->flag, sp, sizeof sp), given, stored, path);
    }
    return AG_OK;
}

int run_check_given(const Flag *fl, int nfl, const RunGiven *v, int n) {
    AG_CHECK_ARG(fl);
    AG_CHECK_ARG(v);
    for (int i = 0; i < n; i++) {
        const Flag *f = flag_find((Flag *)fl, nfl, v[i].flag);
        if (!f->given || v[i].given == v[i].stored) continue;
        char given[RUN_STR_MAX + 8] = "", stored[64], sp[80];
        switch (f->type) { /* the value as typed */
        case FLAG_SWITCH: break;
        case FLAG_CHOICE: snprintf(given, sizeof given, " %s", f->choices[*(int *)f->ptr]); break;
        case FLAG_STR:
        case FLAG_PATH: snprintf(given, sizeof given, " %s", *(const char **)f->ptr); break;
        default: snprintf(given, sizeof given, " %.9g", v[i].given);
        }
        if (v[i].stored_text)
            snprintf(stored, sizeof stored, "%s", v[i].stored_text);
        else if (f->type == FLAG_SWITCH)
            snprintf(stored, sizeof stored, "%s", v[i].stored ? "on" : "off");
        else
            snprintf(stored, sizeof stored, "%.9g", v[i].stored);
        return ag_fail(AG_ERR_ARG,
                       "--%s%s differs from the checkpoint's (%s): --resume continues the run "
                       "with its model, optimizer, batch size and seed (start a new run with "
                       "--force to change them)",
                       flag_spelling(f, sp, sizeof sp), given, stored);
    }
    return AG_OK;
}

/* ---- starting ---- */

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static CkptConfig run_table(RunLoop *r) {
    return (CkptConfig){NULL, r->fields, r->n_slots, r->buf, NULL};
}

/* The model (its flags hold what it is), the optimizer (oc) and the training RNG */
static int build(RunLoop *r, const OptimConfig *oc) {
    if (ag_precision_use(r->c->precision) != AG_OK)
        return ag_fail(AG_ERR_ARG,
                       "--precision %s: not in this build (bf16 products are the float build's, "
                       "without BLAS=openblas)",
                       precision_names[r->c->precision]);
    if (r->c->precision == AG_PRECISION_BF16 && strcmp(ag_precision_bf16_unit(), "vdpbf16ps") &&
        dist_rank() == 0) /* the same bits, but a scalar loop: say so before a long run */
        fprintf(stderr,
                "%s: warning: --precision bf16 runs an exact emulation of vdpbf16ps in this build "
                "(no AVX512_BF16 in its -march): the bits of a CPU with it, several times slower "
                "than fp32 (docs/speed.md)\n",
                r->m->prog);
    r->params_arena = arena_new("params", 0);
    Rng init;
    rng_seed(&init, rng_hash((uint64_t)r->c->seed, 0));
    int rc = r->m->build(r->m->ctx, r->params_arena, &init, &r->params);
    if (rc != AG_OK) return rc;
    if (oc) r->opt = optim_new(r->params_arena, r->params, oc);
    rng_seed(&r->rng, rng_hash((uint64_t)r->c->seed, 1));
    return AG_OK;
}

static int setup_fresh(RunLoop *r) {
    RunConfig *c = r->c;
    if (!c->force && file_exists(r->last_path))
        return ag_fail(AG_ERR_ARG,
                       "%s exists: continue that run with --resume, or start a new one over it "
                       "with --force",
                       r->last_path);
    if (c->shards == 0) c->shards = dist_size(); /* saved as resolved */
    OptimSchedule *s = &c->optim.schedule;
    int from_steps = s->total == 0; /* --schedule-steps not given: the cosine spans --steps */
    if (from_steps) s->total = c->steps;
    /* a flat cosine (--lr-min at --lr: a warmup, then constant) is the same for any end past
     * its warmup: a run no longer than the warmup is then allowed (it stops within the warmup) */
    if (s->kind == OPTIM_WARMUP_COSINE && s->warmup >= s->total && s->lr_min >= c->optim.lr)
        s->total = s->warmup + 1;
    /* the flags named as the user typed them (attograd-gpt's --max-iters, --warmup-iters) */
    char st[80], wu[80], ss[80], lm[80], lr[80];
    spelled(r, &c->steps, "steps", st, sizeof st);
    spelled(r, &s->warmup, "warmup", wu, sizeof wu);
    spelled(r, &s->total, "schedule-steps", ss, sizeof ss);
    spelled(r, &s->lr_min, "lr-min", lm, sizeof lm);
    spelled(r, &c->optim.lr, "lr", lr, sizeof lr);
    if (s->kind == OPTIM_WARMUP_COSINE && s->warmup >= s->total && from_steps)
        return ag_fail(AG_ERR_ARG,
                       "--%s %lld: the cosine schedule decays from the end of its warmup "
                       "(--%s %lld) to --%s: give more steps, a shorter --%s, a "
                       "--%s above the warmup, or --schedule constant",
                       st, (long long)c->steps, wu, (long long)s->warmup, st, wu, ss);
    if (s->kind == OPTIM_WARMUP_COSINE && s->warmup >= s->total)
        return ag_fail(AG_ERR_ARG, "--%s %lld must be below --%s %lld", wu, (long long)s->warmup,
                       ss, (long long)s->total);
    if (s->kind == OPTIM_WARMUP_INVSQRT && s->warmup < 1)
        return ag_fail(AG_ERR_ARG, "--schedule invsqrt needs --%s >= 1", wu);
    if (s->kind == OPTIM_WARMUP_COSINE && s->lr_min > c->optim.lr)
        return ag_fail(AG_ERR_ARG, "--%s %g must not exceed --%s %g", lm, s->lr_min, lr,
                       c->optim.lr);
    OptimConfig oc = c->optim;
    oc.weight_decay = c->decay_min_ndim > 0 ? 0 : c->weight_decay;
    int rc = optim_check_config(&oc);
    if (rc != AG_OK) return rc;
    memset(&r->st, 0, sizeof r->st);
    return build(r, &oc);
}

/* 1 when --steps was given on this command line */
static int steps_given(const RunLoop *r) {
    for (int i = 0; i < r->n_slots; i++)
        if (r->slots[i].src == (void *)&r->c->steps) return r->slots[i].flag->given != 0;
    return 0;
}

/* 1 when f holds any of the run's named fields (meta.run.*) */
static int has_run_fields(const NpzFile *f) {
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->entries[i].name, "meta.run.", 9) == 0) return 1;
    return 0;
}

/* Reads path: the saved flags (kept ones given again must agree; the others not given are
 * restored), the model built from them, then its weights and, when train, the optimizer,
 * RNG and state. */
static int load(RunLoop *r, const char *path, int train) {
    if (!file_exists(path))
        return ag_fail(AG_ERR_IO, "%s: no checkpoint%s", path,
                       train ? " to resume from (train without --resume first)" : "");
    NpzFile *f;
    to_buf(r, r->given); /* ckpt_read fills the model's configuration, which flags may be */
    const CkptConfig *mc = r->m->config.n_fields ? &r->m->config : NULL;
    int rc = ckpt_read(path, mc, &f);
    if (rc != AG_OK) return rc == AG_ERR_NOMEM ? AG_ERR_FORMAT : rc;
    const NpzEntry *se = npz_find(f, "train.step"); /* its type: checked by ckpt_read */
    if (se) memcpy(&r->step, se->data, sizeof r->step);
    CkptConfig rt = run_table(r);
    int old = train && r->m->legacy && !has_run_fields(f);
    rc = old ? r->m->legacy(r->m->ctx, f, r->step, &r->st) : ckpt_read_run(f, &rt);
    if (rc == AG_OK && old) to_buf(r, r->buf); /* the file's values as a saved table */
    if (rc == AG_OK && train) rc = check_kept(r, path);
    if (rc == AG_OK) from_buf(r);
    OptimConfig oc;
    int has = 0;
    if (rc == AG_OK && train) rc = ckpt_optim_config(f, &oc, &has);
    if (rc == AG_OK && train && (!has || !npz_find(f, "rng.state")))
        rc = ag_fail(AG_ERR_FORMAT, "%s: holds no optimizer state or RNG: cannot resume from it",
                     path);
    if (rc == AG_OK) rc = build(r, train ? &oc : NULL);
    Checkpoint ck = {.params = r->params,
                     .config = r->m->config,
                     .opt = train ? r->opt : NULL,
                     .rng = train ? &r->rng : NULL,
                     .run = old ? (CkptConfig){0} : rt};
    if (rc == AG_OK) rc = ckpt_load_from(f, &ck);
    npz_free(f);
    if (rc != AG_OK) return rc;
    from_buf(r);              /* the run's and the model's state, after build */
    if (train && r->step > 0) /* the lr of the checkpoint's step, as after that step */
        r->opt->last_lr = optim_schedule_lr(&r->opt->cfg.schedule, r->opt->cfg.lr, r->step);
    if (ck.extra && r->m->load_extra) rc = r->m->load_extra(r->m->ctx, ck.extra, ck.extra_len);
    free((void *)ck.extra);
    if (rc != AG_OK) return rc;
    if (train && r->c->steps_to_schedule && !steps_given(r))
        r->c->steps = r->c->optim.schedule.total;
    if (train && r->c->steps < r->step)
        return ag_fail(AG_ERR_ARG,
                       "--steps %lld: %s is already at step %lld: give more, or none to finish "
                       "the run",
                       (long long)r->c->steps, path, (long long)r->step);
    return AG_OK;
}

int run_save(RunLoop *r, const char *path) {
    if (dist_rank() != 0) { /* process 0 writes; the others hold the same state */
        if (path == r->last_path) r->saved_step = r->step;
        return AG_OK;
    }
    /* the log's rows reach the disk before the checkpoint --resume would start from */
    if (r->csv && (fflush(r->csv) != 0 || fsync(fileno(r->csv)) != 0))
        return ag_fail(AG_ERR_IO, "%s: cannot write the log: %s", r->csv_path, strerror(errno));
    to_buf(r, r->buf);
    Checkpoint ck = {.params = r->params,
                     .config = r->m->config,
                     .opt = r->opt,
                     .rng = &r->rng,
                     .extra = r->m->extra,
                     .extra_len = r->m->extra_len,
                     .run = run_table(r)};
    int rc = ckpt_save(path, &ck, r->c->compress, NULL);
    if (rc == AG_OK && path == r->last_path) r->saved_step = r->step; /* the last good one */
    return rc;
}

/* OUT/ckpt/step_NNNNNNNN.npz, the kept state of this step (RunConfig.keep_every) */
static int run_keep(RunLoop *r) {
    if (dist_rank() != 0) return AG_OK;
    char dir[RUN_PATH_MAX + 8], path[RUN_PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/ckpt", r->c->out);
    snprintf(path, sizeof path, "%s/step_%08lld.npz", dir, (long long)r->step);
    int rc = run_make_dirs(dir);
    return rc == AG_OK ? run_save(r, path) : rc;
}

/* ---- the steps ---- */

static Tensor *shard_loss(void *ctx, Tape *t, int i) {
    RunLoop *r = ctx;
    Rng g;
    rng_seed(&g, rng_hash(r->shard_seed, (uint64_t)i));
    return r->m->loss(r->m->ctx, t, i, r->c->shards, &g);
}

/* Check mode with shards: the tape of the shard where a value went non-finite was reset since
 * (dist_grad_step runs them one after another). This process's shards run again (the weights
 * and the dropout seeds are unchanged) up to the first non-finite value, which the stop names. */
static void retrace_shards(RunLoop *r) {
    if (!r->tape->check_finite) return;
    for (int i = r->dist->lo; i < r->dist->hi; i++) {
        ag_tape_reset(r->tape);
        ag_params_zero_grad(r->params);
        Tensor *l = shard_loss(r, r->tape, i);
        if (!l) continue;
        if (ag_first_nonfinite(r->tape)) return;
        ag_backward(r->tape, l);
        if (ag_first_nonfinite(r->tape)) return;
    }
}

/* After the stop message of a non-finite value (process 0): where it began. from_tape: the loss
 * or a gradient, which check mode traced to an op; else the update overflowed a weight. */
static void say_where(const RunLoop *r, int from_tape) {
    if (dist_rank() != 0) return;
    const AgNonFinite *nf = ag_first_nonfinite(r->tape);
    char sp[80];
    spelled(r, &r->c->check_finite, "", sp, sizeof sp);
    if (!from_tape)
        fprintf(stderr, "the loss and gradients were finite: the optimizer's update overflowed "
                        "(try a smaller --lr, or --clip)\n");
    else if (nf)
        fprintf(stderr, "the first non-finite value: %s\n", ag_nonfinite_message(nf));
    else if (!r->tape->check_finite)
        fprintf(stderr,
                "(run with %s%s%sAG_CHECK_FINITE=1, to name the op where it first "
                "appeared)\n",
                *sp ? "--" : "", sp, *sp ? ", or " : "");
}

/* One step: NULL, or what was not finite (then nothing was updated) */
static const char *train_step(RunLoop *r, double *loss, double *norm) {
    if (r->dist) {
        r->shard_seed = rng_u64(&r->rng);
        *loss = dist_grad_step(r->dist, r->tape, shard_loss, r);
        if (!isfinite(*loss)) retrace_shards(r);
    } else {
        ag_tape_reset(r->tape);
        ag_params_zero_grad(r->params);
        Tensor *l = r->m->loss(r->m->ctx, r->tape, 0, 1, &r->rng);
        AG_CHECK(l != NULL, "%s: the loss of the only shard is NULL", r->m->prog);
        *loss = (double)l->data[0];
        if (isfinite(*loss)) ag_backward(r->tape, l);
    }
    if (!isfinite(*loss)) return "the training loss";
    *norm = optim_clip_grad_norm(r->params, r->c->clip > 0 ? r->c->clip : DBL_MAX);
    if (!isfinite(*norm)) {
        if (r->dist) retrace_shards(r);
        return "the gradient norm";
    }
    if (r->c->decay_min_ndim > 0)
        optim_step_decay(r->opt, r->c->weight_decay, r->c->decay_min_ndim);
    else
        optim_step(r->opt);
    return NULL;
}

static int params_finite(const RunLoop *r) {
    for (int i = 0; i < r->params->n; i++) {
        const Tensor *p = r->params->items[i];
        for (size_t k = 0; k < p->size; k++)
            if (!isfinite((double)p->data[k])) return 0;
    }
    return 1;
}

/* the first of the validation's metrics v that is not finite, or -1 */
static int first_not_finite(const RunLoop *r, const double *v) {
    for (int i = 0; i < r->m->n_metrics; i++)
        if (!isfinite(v[i])) return i;
    return -1;
}

/* The model's validation: RUN_EXIT_OK (v filled, best.npz when better) or an exit code */
static int validate(RunLoop *r, double *v) {
    int rc = r->m->validate(r->m->ctx, r->tape, v);
    ag_tape_reset(r->tape);
    if (rc == RUN_VALID_INTERRUPTED) {
        r->valid_stopped = 1; /* train_loop saves and stops; --resume validates this step */
        return RUN_EXIT_OK;
    }
    if (rc != AG_OK) return run_stopped(r, r->step, NULL, 0, RUN_EXIT_USAGE);
    int bad = first_not_finite(r, v);
    if (bad >= 0) {
        char what[64];
        snprintf(what, sizeof what, "the valid %s", r->m->metric_names[bad]);
        return run_stopped(r, r->step, what, v[bad], RUN_EXIT_FAIL);
    }
    int better =
        r->st.best_step == 0 || (r->m->better ? r->m->better(v, r->st.best) : v[0] < r->st.best[0]);
    r->st.last_valid = r->step;
    if (better) {
        r->st.best_step = r->step;
        memcpy(r->st.best, v, (size_t)r->m->n_metrics * sizeof *v);
    }
    run_say_valid(r, v, better);
    if (better && run_save(r, r->best_path) != AG_OK) return run_write_failed(r);
    return RUN_EXIT_OK;
}

/* After step s: the row's sums, then what is due. An exit code. */
static int after_step(RunLoop *r, double loss, double norm, double tokens) {
    RunConfig *c = r->c;
    int64_t s = r->step;
    r->st.row_loss += loss;
    r->st.row_norm += norm;
    r->st.row_tokens += tokens;
    r->st.row_steps++;
    run_progress(r, loss, 0);
    int save_every = c->save_every > 0 ? c->save_every : c->valid_every;
    int valid_due = r->m->validate && (s % c->valid_every == 0 || s == c->steps);
    int save_due = s % save_every == 0 || s == c->steps;
    if ((valid_due || save_due) && !params_finite(r)) {
        int code = run_stopped(r, s, "a weight after the update", NAN, RUN_EXIT_FAIL);
        say_where(r, 0);
        return code;
    }
    double v[RUN_MAX_METRICS];
    if (valid_due) {
        int code = validate(r, v);
        if (code != RUN_EXIT_OK || r->valid_stopped) return code;
    }
    if (s % c->log_every == 0 || valid_due || s == c->steps) {
        if (run_log_row(r, valid_due ? v : NULL) != AG_OK) return run_write_failed(r);
        run_progress(r, loss, 1);
    }
    if (save_due && run_save(r, r->last_path) != AG_OK) return run_write_failed(r);
    if (c->keep_every > 0 && s % c->keep_every == 0 && run_keep(r) != AG_OK)
        return run_write_failed(r);
    return RUN_EXIT_OK;
}

/* --resume of a run a signal stopped during the validation of its step: that validation, its
 * CSV row and (when due) last.npz, as the run would have done. An exit code. */
static int finish_validation(RunLoop *r) {
    RunConfig *c = r->c;
    int64_t s = r->step;
    if (!c->resume || !r->m->validate || s == 0 || r->st.last_valid >= s ||
        (s % c->valid_every != 0 && s != c->steps))
        return RUN_EXIT_OK;
    double v[RUN_MAX_METRICS];
    int code = validate(r, v);
    if (code != RUN_EXIT_OK || r->valid_stopped) return code;
    if (run_log_row(r, v) != AG_OK) return run_write_failed(r);
    int save_every = c->save_every > 0 ? c->save_every : c->valid_every;
    if ((s % save_every == 0 || s == c->steps) && run_save(r, r->last_path) != AG_OK)
        return run_write_failed(r);
    return RUN_EXIT_OK;
}

static int train_loop(RunLoop *r) {
    RunConfig *c = r->c;
    int code = RUN_EXIT_OK, interrupted = 0;
    if (!c->resume && run_save(r, r->last_path) != AG_OK) code = run_write_failed(r);
    if (code == RUN_EXIT_OK && !c->resume && c->keep_every > 0 && run_keep(r) != AG_OK)
        code = run_write_failed(r);
    if (code == RUN_EXIT_OK) code = finish_validation(r);
    interrupted = r->valid_stopped;
    while (code == RUN_EXIT_OK && !interrupted && r->step < c->steps) {
        if (run_stop_requested()) { /* a signal to any process stops all */
            interrupted = 1;
            break;
        }
        int64_t s = r->step + 1;
        if (c->inject_nan == s) { /* fault tests */
            Tensor *p = r->m->nan_param ? ag_params_find(r->params, r->m->nan_param) : NULL;
            (p ? p : r->params->items[0])->data[0] = (Real)NAN;
            ag_params_written();
        }
        if (c->report_rss > 0 && s == c->report_rss + 1)
            run_report_memory(stdout, s - 1, c->report_rss, r->rss_first);
        double tokens = c->batch, loss = 0, norm = 0;
        int lo = r->dist ? r->dist->lo : 0, hi = r->dist ? r->dist->hi : 1;
        if (r->m->batch && r->m->batch(r->m->ctx, s, lo, hi, c->shards, &tokens) != AG_OK) {
            code = run_stopped(r, s, NULL, 0, RUN_EXIT_USAGE);
            break;
        }
        const char *what = train_step(r, &loss, &norm);
        if (what) {
            code = run_stopped(r, s, what, isfinite(loss) ? norm : loss, RUN_EXIT_FAIL);
            say_where(r, 1);
            break;
        }
        r->step = s;
        code = after_step(r, loss, norm, tokens);
        interrupted = r->valid_stopped;
    }
    run_end_bar(r);
    if (code == RUN_EXIT_OK && interrupted) {
        int sig = run_signal_caught() ? run_signal_caught() : SIGINT;
        if (run_save(r, r->last_path) != AG_OK) return run_write_failed(r);
        if (dist_rank() == 0)
            fprintf(stderr,
                    "%s train: interrupted by %s at step %lld: saved %s; continue with --resume\n",
                    r->m->prog, sig == SIGTERM ? "SIGTERM" : "SIGINT", (long long)r->step,
                    r->last_path);
        return sig == SIGTERM ? RUN_EXIT_SIGTERM : RUN_EXIT_SIGINT;
    }
    if (code == RUN_EXIT_OK) run_say_done(r);
    return code;
}

/* ---- the program ---- */

RunLoop *run_new(const RunModel *m, RunConfig *c) {
    AG_CHECK_ARG(m);
    AG_CHECK_ARG(c);
    AG_CHECK(m->build && m->loss && m->prog, "run_new: a model needs prog, build, loss");
    AG_CHECK(!m->validate ||
                 (m->n_metrics >= 1 && m->n_metrics <= RUN_MAX_METRICS && m->metric_names),
             "run_new: %s: validate gives 1 to %d metrics, named", m->prog, RUN_MAX_METRICS);
    RunLoop *r = calloc(1, sizeof *r);
    AG_CHECK(r, "run_new: out of memory");
    r->m = m;
    r->c = c;
    r->rss_first[0] = r->rss_first[1] = -1;
    return r;
}

void run_loop_free(RunLoop *r) {
    if (!r) return;
    if (r->csv) fclose(r->csv);
    dist_grad_free(r->dist);
    if (r->tape) ag_tape_free(r->tape);
    if (r->step_arena) arena_free(r->step_arena);
    if (r->params_arena) arena_free(r->params_arena);
    free(r->buf);
    free(r->given);
    free(r);
}

int64_t run_last_step(const RunLoop *r) {
    AG_CHECK_ARG(r);
    return r->step;
}
const double *run_best(const RunLoop *r) {
    AG_CHECK_ARG(r);
    return r->st.best;
}

/* eval: the checkpoint's step and metrics */
static int run_eval(RunLoop *r) {
    const char *path = r->ckpt;
    char p[RUN_PATH_MAX];
    if (!path) {
        path = file_exists(r->best_path) ? r->best_path : r->last_path;
        snprintf(p, sizeof p, "%s", path);
        path = p;
    }
    if (!r->m->validate) return ag_fail(AG_ERR_ARG, "%s: the model has no validation", path);
    int rc = load(r, path, 0);
    if (rc != AG_OK) return rc;
    r->step_arena = arena_new("step", 0);
    r->tape = ag_tape_new(r->step_arena);
    double v[RUN_MAX_METRICS];
    rc = r->m->validate(r->m->ctx, r->tape, v);
    if (rc != AG_OK || dist_rank() != 0) return rc;
    printf("%s: step %lld:", path, (long long)r->step);
    for (int i = 0; i < r->m->n_metrics; i++)
        printf("%s valid %s %.6f", i ? "," : "", r->m->metric_names[i], v[i]);
    printf("\n");
    int bad = first_not_finite(r, v);
    if (bad < 0) return AG_OK;
    r->eval_failed = 1; /* the file is sound (load checked it); the model's numbers are not */
    return ag_fail(AG_ERR_RANGE, "%s: the valid %s is %s: the model does not compute finite values",
                   path, r->m->metric_names[bad],
                   isnan(v[bad]) ? "nan"
                   : v[bad] > 0  ? "inf"
                                 : "-inf");
}

static int start_train(RunLoop *r) {
    RunConfig *c = r->c;
    int rc = AG_OK;
    if (c->resume && c->force) rc = ag_fail(AG_ERR_ARG, "--resume and --force: choose one");
    if (rc == AG_OK) rc = c->resume ? load(r, r->last_path, 1) : setup_fresh(r);
    if (rc == AG_OK && (c->shards < dist_size() || c->shards > c->batch))
        rc = ag_fail(AG_ERR_ARG,
                     "--shards %d: must be at least the %d processes and at most the batch size %d",
                     c->shards, dist_size(), c->batch);
    if (rc == AG_OK && dist_rank() == 0) rc = run_make_dirs(c->out);
    if (rc == AG_OK && dist_rank() == 0) {
        rc = run_log_open(r);
        struct stat st; /* a log that cannot be written (not one that is no file): exit 1 */
        r->log_failed = rc != AG_OK && (stat(r->csv_path, &st) != 0 || S_ISREG(st.st_mode));
    }
    return rc;
}

int run_main(RunLoop *r, Flag *fl, int n, int argc, char **argv) {
    AG_CHECK_ARG(r);
    AG_CHECK_ARG(fl);
    AG_CHECK_ARG(argv);
    const char *cmd = argc > 1 && argv[1][0] != '-' ? argv[1] : "train";
    int first = argc > 1 && argv[1][0] != '-' ? 2 : 1, eval = strcmp(cmd, "eval") == 0;
    r->fl = fl;
    r->n_fl = n;
    r->cmd = cmd;
    int rc = eval || strcmp(cmd, "train") == 0
                 ? flag_parse(fl, n, argc - first, argv + first, NULL, NULL)
                 : ag_fail(AG_ERR_ARG, "'%s': not a command (train, eval)", cmd);
    if (rc == FLAG_HELP) {
        flag_usage(stdout, r->m->prog, "[train|eval]", "[flags]",
                   "  train: trains a model (--resume continues it)\n"
                   "  eval: a checkpoint's validation metrics",
                   fl, n);
        return RUN_EXIT_OK;
    }
    if (dist_rank() != 0) r->c->quiet = 1;
    int threads = ag_threads_use(r->c->threads);
    if (rc == AG_OK) rc = texts_fit(r);
    if (rc == AG_OK && r->m->start) rc = r->m->start(r->m->ctx);
    if (rc == AG_OK) {
        build_slots(r);
        rc = run_paths(r);
        if (rc == AG_OK) rc = eval ? run_eval(r) : start_train(r);
    }
    int print;
    rc = dist_agree(rc, &print); /* one process that cannot start stops all */
    if (rc != AG_OK) {
        if (print) fprintf(stderr, "%s %s: %s\n", r->m->prog, cmd, ag_last_error());
        return rc == AG_ERR_NOMEM || r->log_failed || r->eval_failed ? RUN_EXIT_FAIL
                                                                     : RUN_EXIT_USAGE;
    }
    if (eval) return RUN_EXIT_OK;
    r->step_arena = arena_new("step", 0);
    r->tape = ag_tape_new(r->step_arena);
    if (r->c->check_finite) ag_check_finite(r->tape, 1);
    if (r->c->shards > 1 || dist_size() > 1) {
        r->dist = dist_grad_new(r->params, r->c->shards);
        r->dist->mean = !r->m->shard_sum;
    }
    run_say_start(r, threads);
    run_signals_catch();
    r->step_start = r->saved_step = r->step;
    r->t_start = r->t_row = r->t_bar = run_now_s();
    int code = train_loop(r);
    if (r->csv && code == RUN_EXIT_OK) {
        run_plot(r, 1);
    } else if (r->csv) { /* the plot's failure never hides why the run stopped */
        char why[1024];
        snprintf(why, sizeof why, "%s", ag_last_error());
        run_plot(r, 1);
        ag_fail(AG_ERR_IO, "%s", why);
    }
    dist_any(0); /* no process exits (ending the job) before process 0 saved */
    run_signals_restore();
    fflush(stdout);
    if (r->c->report_rss > 0 && r->rss_first[0] >= 0)
        run_report_memory(stdout, r->step, r->c->report_rss, r->rss_first);
    return code;
}

/* ---- one saved text flag, read without the rest of its checkpoint ---- */

typedef struct {
    const char *entry;
    char *value;
} SavedText;

static int admit_text(void *ctx, const NpzDirectory *dir, const NpzFile *loaded) {
    SavedText *st = ctx;
    if (!loaded) {
        for (int i = 0; i < dir->n; i++) dir->first[i] = strcmp(dir->names[i], st->entry) == 0;
        return AG_OK;
    }
    const NpzEntry *e = npz_find(loaded, st->entry);
    if (!e)
        return ag_fail(AG_ERR_FORMAT, "%s: holds no %s (written before the run saved it)",
                       loaded->path, st->entry);
    if (e->dtype != NPZ_U8 || e->ndim != 1 || e->count >= RUN_STR_MAX ||
        memchr(e->data, 0, e->count))
        return ag_fail(AG_ERR_FORMAT, "%s: %s: a text of at most %d bytes with no NUL expected",
                       loaded->path, st->entry, RUN_STR_MAX - 1);
    st->value = calloc(e->count + 1, 1);
    AG_CHECK(st->value, "run: out of memory");
    memcpy(st->value, e->data, e->count);
    return AG_ERR_ARG; /* the rest of the file is not read */
}

int run_saved_text(const char *path, const char *name, char **value) {
    AG_CHECK_ARG(path);
    AG_CHECK_ARG(name);
    AG_CHECK_ARG(value);
    char entry[160];
    snprintf(entry, sizeof entry, "meta.run.flag.%s", name);
    SavedText st = {entry, NULL};
    NpzFile *f = NULL;
    int rc = npz_read_admitted(path, &f, NULL, admit_text, &st);
    npz_free(f);
    *value = st.value;
    return st.value ? AG_OK : rc;
}
