/* test_run.c: the run loop (src/run) with a tiny model of its own (a dropout layer and a linear
 * classifier of 4 numbers, one state field, a few extra bytes), run in this process through
 * run_main: the cadence of CSV rows, validations and saves; the learning rate of each step
 * under warmup + cosine, inverse-sqrt and constant schedules; the CSV's columns; a NaN stop
 * naming the step and keeping the last good checkpoint, and a validation loss not finite
 * (finite weights whose products overflow) or a later metric not finite stopping the same way; SIGINT (a forked child) saving once and
 * exiting 130; --resume with no flag repeated giving the bytes of a straight run (checkpoints
 * and log but for tokens/s), the model's state and extra bytes back; a model flag given again
 * with another value refused, named as typed, a remembered one taken; a file of an older layout
 * resumed through the model's legacy reader, a start that refuses, --resume to --schedule-steps;
 * a missing gnuplot reported
 * as skipped, never masking the exit code; eval (exit 1 when a metric is not finite); a saved value out of its range refused, named;
 * a log loss axis's tick labels distinct and each its tick's value; run_check_given's message;
 * run_report_memory's lines.
 * Then examples/classify (AG_CLASSIFY_BIN), the README's "write your own model" program, run
 * whole: it learns; killed (SIGKILL) in the middle and resumed with `--out DIR --resume` alone,
 * it writes the bytes of a run never killed; a changed model flag is refused; eval.
 * Not here: mpirun (tests/dist/test_mpi.sh). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attograd.h"
#include "files.h"

typedef struct {
    int width;
    double p;
} TinyConfig;
static const CkptField tiny_fields[] = {CKPT_CFG_INT(TinyConfig, width, 1, 64),
                                        CKPT_CFG_FLOAT(TinyConfig, p, 0, 0.9)};
typedef struct {
    int64_t draws; /* the model's state: batches drawn */
} TinyState;
static const CkptField state_fields[] = {CKPT_CFG_INT(TinyState, draws, 0, 1 << 30)};

typedef struct {
    TinyConfig cfg;
    TinyState st;
    ParamList params;
    Linear l1, l2;
    RunConfig *rc;
    float x[64 * 4];
    int y[64];
    int64_t raise_at;
    int n_valid;
    char extra_seen[16];
} Tiny;

static int tiny_build(void *ctx, Arena *a, Rng *init, ParamList **params) {
    Tiny *m = ctx;
    NnBuilder b = nn_builder(a, &m->params, init);
    nn_linear_init(&m->l1, &b, "l1", 4, m->cfg.width, NN_BIAS);
    nn_linear_init(&m->l2, &b, "l2", m->cfg.width, 2, NN_BIAS);
    *params = &m->params;
    return AG_OK;
}

/* rows of step s: 4 numbers, label 1 when their sum is positive */
static void tiny_rows(Tiny *m, int64_t s, int n) {
    Rng g;
    rng_seed(&g, rng_hash((uint64_t)m->rc->seed, (uint64_t)s));
    for (int j = 0; j < n; j++) {
        double sum = 0;
        for (int k = 0; k < 4; k++) sum += m->x[j * 4 + k] = (float)(2 * rng_uniform(&g) - 1);
        m->y[j] = sum > 0;
    }
}

static int tiny_batch(void *ctx, int64_t step, int lo, int hi, int S, double *tokens) {
    Tiny *m = ctx;
    (void)lo, (void)hi, (void)S;
    if (step == m->raise_at) raise(SIGINT);
    tiny_rows(m, step, m->rc->batch);
    m->st.draws++;
    *tokens = m->rc->batch;
    return AG_OK;
}

static Tensor *tiny_forward(Tiny *m, Tape *t, int r0, int B, Rng *rng) {
    Tensor *x = tensor_new2(t->arena, B, 4, "x");
    for (int i = 0; i < B * 4; i++) x->data[i] = (Real)m->x[r0 * 4 + i];
    Tensor *h = nn_linear(t, &m->l1, x); /* no ReLU: a NaN weight makes the loss NaN */
    return nn_linear(t, &m->l2, rng ? ag_dropout(t, h, m->cfg.p, rng) : h);
}

static Tensor *tiny_loss(void *ctx, Tape *t, int i, int S, Rng *rng) {
    Tiny *m = ctx;
    int B = m->rc->batch, r0 = i * B / S, r1 = (i + 1) * B / S;
    return ag_cross_entropy(t, tiny_forward(m, t, r0, r1 - r0, rng), m->y + r0, -1);
}

static int stop_in_valid = 0; /* k > 0: a SIGINT during the k-th validation (run_stop_requested) */

static int huge_in_valid = 0; /* k > 0: the k-th validation makes the weights huge (finite) */

static int nan_acc_in_valid = 0; /* k > 0: the k-th validation's second metric is a NaN */

static int tiny_validate(void *ctx, Tape *t, double *v) {
    Tiny *m = ctx;
    m->n_valid++;
    if (m->n_valid == huge_in_valid) /* finite weights whose products overflow */
        for (int i = 0; i < m->params.n; i++)
            for (size_t k = 0; k < m->params.items[i]->size; k++)
                m->params.items[i]->data[k] = (Real)(sizeof(Real) == 4 ? 1e38 : 1e307);
    if (m->n_valid == stop_in_valid) raise(SIGINT);
    if (stop_in_valid && run_stop_requested()) return RUN_VALID_INTERRUPTED;
    tiny_rows(m, 0, 64);
    int prev = ag_no_grad(t, 1), right = 0;
    Tensor *lg = tiny_forward(m, t, 0, 64, NULL);
    v[0] = (double)ag_cross_entropy(t, lg, m->y, -1)->data[0];
    for (int j = 0; j < 64; j++) right += (lg->data[2 * j + 1] > lg->data[2 * j]) == m->y[j];
    v[1] = m->n_valid == nan_acc_in_valid ? NAN : right / 64.0;
    ag_no_grad(t, prev);
    return AG_OK;
}

static int tiny_extra(void *ctx, const void *bytes, size_t len) {
    Tiny *m = ctx;
    snprintf(m->extra_seen, sizeof m->extra_seen, "%.*s", (int)len, (const char *)bytes);
    return len == 5 && memcmp(bytes, "hello", 5) == 0 ? AG_OK
                                                      : ag_fail(AG_ERR_FORMAT, "extra bytes");
}

static int loud = 0; /* 1: the run prints its progress (quiet otherwise) */
/* the optional parts a test turns on: the legacy reader, a start that fails, steps_to_schedule */
static int with_legacy = 0, start_fails = 0, to_schedule = 0;

/* A file of the tiny model's "older program": its run's state in data.position (LEGACY_*) */
enum {
    LEGACY_DRAWS,
    LEGACY_BATCH,
    LEGACY_ROW_STEPS,
    LEGACY_BEST_STEP,
    LEGACY_LAST_VALID,
    LEGACY_ROW_LOSS,
    LEGACY_ROW_NORM,
    LEGACY_ROW_TOKENS,
    LEGACY_BEST_LOSS,
    LEGACY_BEST_ACC,
    LEGACY_COUNT
};

static double as_double(int64_t i) {
    double d;
    memcpy(&d, &i, 8);
    return d;
}

static int tiny_legacy(void *ctx, const NpzFile *f, int64_t step, RunState *st) {
    Tiny *m = ctx;
    const NpzEntry *e = npz_find(f, "data.position");
    if (!e || e->dtype != NPZ_I64 || e->count != LEGACY_COUNT)
        return ag_fail(AG_ERR_FORMAT, "%s: no data.position of %d values", f->path, LEGACY_COUNT);
    const int64_t *p = e->data;
    if (p[LEGACY_DRAWS] != step) return ag_fail(AG_ERR_FORMAT, "%s: draws != step", f->path);
    m->st.draws = p[LEGACY_DRAWS];
    m->rc->batch = (int)p[LEGACY_BATCH];
    m->rc->shards = 1; /* its only layout: one process, one shard */
    OptimConfig oc;
    int has = 0;
    int rc = ckpt_optim_config(f, &oc, &has);
    if (rc != AG_OK || !has) return rc != AG_OK ? rc : ag_fail(AG_ERR_FORMAT, "no optimizer");
    m->rc->optim.schedule = oc.schedule; /* --schedule-steps as resolved */
    *st = (RunState){.row_loss = as_double(p[LEGACY_ROW_LOSS]),
                     .row_norm = as_double(p[LEGACY_ROW_NORM]),
                     .row_tokens = as_double(p[LEGACY_ROW_TOKENS]),
                     .row_steps = p[LEGACY_ROW_STEPS],
                     .best_step = p[LEGACY_BEST_STEP],
                     .last_valid = p[LEGACY_LAST_VALID],
                     .best = {as_double(p[LEGACY_BEST_LOSS]), as_double(p[LEGACY_BEST_ACC])}};
    return AG_OK;
}

static int tiny_start(void *ctx) {
    Tiny *m = ctx;
    return start_fails ? ag_fail(AG_ERR_ARG, "--width %d: the start says no", m->cfg.width) : AG_OK;
}
static int keep_every = 0; /* RunConfig.keep_every of the next run_tiny */
static int nano_names = 0; /* the next run_tiny's run flags under nanoGPT's names too */
/* RunConfig.compress and .check_finite of the next run_tiny; draws_column: the model's CSV
 * column "draws" (RunModel.columns, describe) */
static int compress = 0, check_finite = 0, draws_column = 0;
static const char *nan_param = NULL; /* RunModel.nan_param of the next run_tiny */

static void tiny_describe(void *ctx, int csv, char *buf, size_t n) {
    Tiny *m = ctx;
    snprintf(buf, n, csv ? "%lld" : "draws %lld", (long long)m->st.draws);
}

/* A run of the tiny model with args (after the program's name); its exit code; *out: what the
 * model saw (may be NULL) */
static int run_tiny(const char *const *args, Tiny *out, int64_t raise_at) {
    static Tiny m;
    memset(&m, 0, sizeof m);
    m.cfg = (TinyConfig){8, 0.1};
    m.raise_at = raise_at;
    RunConfig rc = run_defaults();
    rc.steps = 20, rc.batch = 16, rc.optim.lr = 0.05, rc.optim.schedule.warmup = 4;
    rc.log_every = 3, rc.valid_every = 5, rc.save_every = 4, rc.threads = 1, rc.quiet = !loud;
    rc.keep_every = keep_every, rc.compress = compress, rc.check_finite = check_finite;
    m.rc = &rc;
    static const char *const metrics[] = {"loss", "acc"};
    RunModel model = {.prog = "tiny",
                      .ctx = &m,
                      .build = tiny_build,
                      .config = {"tiny", tiny_fields, 2, &m.cfg, NULL},
                      .batch = tiny_batch,
                      .loss = tiny_loss,
                      .validate = tiny_validate,
                      .n_metrics = 2,
                      .metric_names = metrics,
                      .state = {NULL, state_fields, 1, &m.st, NULL},
                      .extra = "hello",
                      .extra_len = 5,
                      .load_extra = tiny_extra,
                      .start = tiny_start,
                      .legacy = with_legacy ? tiny_legacy : NULL,
                      .columns = draws_column ? "draws" : NULL,
                      .describe = tiny_describe,
                      .nan_param = nan_param};
    rc.steps_to_schedule = to_schedule;
    RunLoop *r = run_new(&model, &rc);
    Flag fl[2 + RUN_N_FLAGS] = {
        {"width|hidden", FLAG_INT, &m.cfg.width, "N", "hidden units", 1, 64, NULL, 0},
        {"p", FLAG_DOUBLE, &m.cfg.p, "P", "dropout", 0, 0.9, NULL, 0}};
    int n = 2 + run_flags(r, fl + 2);
    if (nano_names) { /* as attograd-gpt train names them */
        flag_find(fl, n, "steps")->name = "steps|max-iters";
        flag_find(fl, n, "warmup")->name = "warmup|warmup-iters";
        flag_find(fl, n, "schedule-steps")->name = "schedule-steps|lr-decay-iters";
        flag_find(fl, n, "lr-min")->name = "lr-min|min-lr";
    }
    char *argv[64] = {"tiny"};
    int argc = 1;
    while (args[argc - 1]) argv[argc] = (char *)args[argc - 1], argc++;
    int code = run_main(r, fl, n, argc, argv);
    run_loop_free(r);
    ag_params_free(&m.params);
    if (out) *out = m;
    return code;
}

/* the end of a forked child: what it printed reaches its files */
static void child_exit(int code) {
    fflush(NULL);
    _exit(code);
}

/* the run in a forked child (its own signals; stdout and stderr into dir/child.out and
 * dir/child.err; progress printed when loud): its exit status */
static int run_child(const char *dir, const char *const *args, int64_t raise_at, int be_loud) {
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char p[512];
        cr_assert(freopen(ts_join(p, dir, "child.out"), "w", stdout) != NULL);
        cr_assert(freopen(ts_join(p, dir, "child.err"), "w", stderr) != NULL);
        loud = be_loud;
        child_exit(run_tiny(args, NULL, raise_at));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* the two runs in folders a and b wrote the same last.npz, best.npz and log.csv (but for its
 * tokens/s); returns b's log (malloc'd) */
static char *expect_same_run(const char *a, const char *b) {
    char p[512], q[512];
    const char *files[] = {"last.npz", "best.npz"};
    for (int i = 0; i < 2; i++)
        cr_assert(ts_same_file(ts_join(p, a, files[i]), ts_join(q, b, files[i])), "%s differs",
                  files[i]);
    char *la = ts_csv_drop_column(ts_join(p, a, "log.csv"), 4);
    char *lb = ts_csv_drop_column(ts_join(q, b, "log.csv"), 4);
    cr_assert_str_eq(la, lb);
    free(la);
    return lb;
}

static int64_t ckpt_step(const char *path) {
    NpzFile *f;
    cr_assert_eq(npz_read(path, &f, NULL), AG_OK, "%s", ag_last_error());
    const NpzEntry *e = npz_find(f, "train.step");
    cr_assert(e);
    int64_t s;
    memcpy(&s, e->data, 8);
    npz_free(f);
    return s;
}

Test(run, logs_validates_and_saves_at_its_cadence_with_the_csv_columns) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run");
    Tiny m;
    cr_assert_eq(run_tiny((const char *[]){"--out", dir, NULL}, &m, -1), 0);
    char *csv = ts_read_text(ts_join(p, dir, "log.csv"), NULL);
    /* rows every 3 steps, at each validation (every 5) and at the end */
    const char *want[] = {"3,", "5,", "6,", "9,", "10,", "12,", "15,", "18,", "20,"};
    char *line = strchr(csv, '\n') + 1;
    cr_assert_eq(strncmp(csv, "step,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_acc\n",
                         (size_t)(line - csv)),
                 0, "header: %.*s", (int)(line - csv), csv);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(strncmp(line, want[i], strlen(want[i])), 0, "row %d: %s", i, line);
        int commas = 0, valid = 0;
        char *end = strchr(line, '\n');
        for (char *c = line; c < end; c++) commas += *c == ',';
        valid = end[-1] != ',';
        cr_assert_eq(commas, 6, "row %d has %d commas", i, commas);
        int due = atoi(line) % 5 == 0;
        cr_assert_eq(valid, due, "row %s: validation %d, expected %d", line, valid, due);
        line = end + 1;
    }
    cr_assert_eq(*line, '\0', "rows after the end: %s", line);
    cr_assert_eq(m.n_valid, 4, "validations: %d", m.n_valid);
    cr_assert_eq(m.st.draws, 20);
    cr_assert_eq(ckpt_step(ts_join(p, dir, "last.npz")), 20);
    free(csv);
    ts_rm_tree(dir);
}

/* the lr column of a run with flags, one row a step, against optim_schedule_lr */
static void check_schedule(const char *const *flags, OptimSchedule s, double lr) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-sched");
    const char *args[16] = {"--out", dir, "--log-every", "1"};
    int n = 4;
    for (int i = 0; flags[i]; i++) args[n++] = flags[i];
    args[n] = NULL;
    cr_assert_eq(run_tiny(args, NULL, -1), 0);
    char *csv = ts_read_text(ts_join(p, dir, "log.csv"), NULL), *line = strchr(csv, '\n') + 1;
    for (int64_t t = 1; t <= 20; t++, line = strchr(line, '\n') + 1) {
        long long step;
        double loss, got;
        cr_assert_eq(sscanf(line, "%lld,%lf,%lf", &step, &loss, &got), 3, "%s", line);
        double want = optim_schedule_lr(&s, lr, t);
        cr_assert(step == t && fabs(got - want) <= 1e-6 * want + 1e-300,
                  "step %lld: lr %.9g, expected %.9g", step, got, want);
    }
    free(csv);
    ts_rm_tree(dir);
}

Test(run, follows_its_learning_rate_schedules) {
    check_schedule((const char *[]){NULL}, (OptimSchedule){OPTIM_WARMUP_COSINE, 4, 20, 1e-4}, 0.05);
    check_schedule(
        (const char *[]){"--warmup", "0", "--lr-min", "0.001", "--schedule-steps", "10", NULL},
        (OptimSchedule){OPTIM_WARMUP_COSINE, 0, 10, 1e-3}, 0.05);
    check_schedule((const char *[]){"--schedule", "invsqrt", "--lr", "0.02", NULL},
                   (OptimSchedule){OPTIM_WARMUP_INVSQRT, 4, 20, 1e-4}, 0.02);
    check_schedule((const char *[]){"--schedule", "constant", NULL},
                   (OptimSchedule){OPTIM_CONSTANT, 4, 20, 1e-4}, 0.05);
}

Test(run, a_nan_stops_naming_the_step_and_keeps_the_last_good_checkpoint) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-nan");
    int code = run_child(dir, (const char *[]){"--out", dir, "--inject-nan", "11", NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "tiny train: step 11: the training loss is nan: training stopped") &&
                  strstr(err, "last.npz (step 8)"),
              "%s", err);
    cr_assert_eq(ckpt_step(ts_join(p, dir, "last.npz")), 8);
    free(err);
    ts_rm_tree(dir);
}

/* a validation metric that is not finite stops the run as a training NaN does: the step and the
 * metric named, exit 1, no row of it, best.npz the last good one. The loss: finite weights whose
 * products overflow; the accuracy: a NaN. */
Test(run, a_valid_metric_not_finite_stops_naming_the_step_and_keeps_the_best) {
    for (int acc = 0; acc < 2; acc++) {
        char dir[64], p[512];
        ts_tmp_dir(dir, sizeof dir, "run-valid-nan");
        *(acc ? &nan_acc_in_valid : &huge_in_valid) = 2; /* the validation of step 10 */
        int code = run_child(dir, (const char *[]){"--out", dir, NULL}, -1, 0);
        huge_in_valid = nan_acc_in_valid = 0;
        char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
        cr_assert_eq(code, 1, "exit %d: %s", code, err);
        cr_assert(strstr(err, acc ? "tiny train: step 10: the valid acc is nan"
                                  : "tiny train: step 10: the valid loss is ") &&
                      strstr(err, ": training stopped. The last good checkpoint is") &&
                      strstr(err, "last.npz (step 8)"),
                  "%s", err);
        cr_assert_eq(ckpt_step(ts_join(p, dir, "best.npz")), 5);
        cr_assert_eq(ckpt_step(ts_join(p, dir, "last.npz")), 8);
        char *csv = ts_read_text(ts_join(p, dir, "log.csv"), NULL);
        cr_assert(!strstr(csv, "\n10,") && !strstr(csv, "nan") && !strstr(csv, "inf"), "%s", csv);
        free(csv);
        free(err);
        ts_rm_tree(dir);
    }
}

Test(run, sigint_saves_once_and_resume_gives_the_bytes_of_a_straight_run) {
    char a[64], b[64], p[512];
    ts_tmp_dir(a, sizeof a, "run-straight");
    ts_tmp_dir(b, sizeof b, "run-resumed");
    cr_assert_eq(run_tiny((const char *[]){"--out", a, NULL}, NULL, -1), 0);
    int code = run_child(b, (const char *[]){"--out", b, NULL}, 7, 0); /* SIGINT in step 7 */
    char *err = ts_read_text(ts_join(p, b, "child.err"), NULL);
    cr_assert_eq(code, 130, "exit %d: %s", code, err);
    const char *said = strstr(err, "interrupted by SIGINT at step 7: saved");
    cr_assert(said && !strstr(said + 1, "interrupted"), "%s", err);
    cr_assert_eq(ckpt_step(ts_join(p, b, "last.npz")), 7);
    Tiny m;
    cr_assert_eq(run_tiny((const char *[]){"--out", b, "--resume", NULL}, &m, -1), 0);
    cr_assert_eq(m.st.draws, 20, "the model's state came back: %lld draws", (long long)m.st.draws);
    cr_assert_str_eq(m.extra_seen, "hello");
    free(expect_same_run(a, b));
    free(err);
    ts_rm_tree(a);
    ts_rm_tree(b);
}

/* a signal during a validation (the model polls run_stop_requested): last.npz of that step, no
 * CSV row for it, exit 130; --resume validates that step first, then the run ends as one never
 * stopped (the same checkpoints and log) */
Test(run, a_signal_in_a_validation_saves_and_resume_validates_that_step_first) {
    char a[64], b[64], p[512];
    ts_tmp_dir(a, sizeof a, "run-vstraight");
    ts_tmp_dir(b, sizeof b, "run-vstopped");
    stop_in_valid = 1000; /* polled, never raised: the straight run */
    cr_assert_eq(run_tiny((const char *[]){"--out", a, NULL}, NULL, -1), 0);
    stop_in_valid = 2; /* the validation of step 10 */
    int code = run_child(b, (const char *[]){"--out", b, NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, b, "child.err"), NULL);
    cr_assert_eq(code, 130, "exit %d: %s", code, err);
    cr_assert(strstr(err, "interrupted by SIGINT at step 10: saved"), "%s", err);
    cr_assert_eq(ckpt_step(ts_join(p, b, "last.npz")), 10);
    char *log = ts_read_text(ts_join(p, b, "log.csv"), NULL);
    cr_assert(strstr(log, "\n9,") && !strstr(log, "\n10,"), "no row of step 10 yet: %s", log);
    free(log);
    stop_in_valid = 1000;
    Tiny m;
    cr_assert_eq(run_tiny((const char *[]){"--out", b, "--resume", NULL}, &m, -1), 0);
    cr_assert_eq(m.n_valid, 3, "step 10's validation, then 15 and 20: %d", m.n_valid);
    stop_in_valid = 0;
    free(expect_same_run(a, b));
    free(err);
    ts_rm_tree(a);
    ts_rm_tree(b);
}

/* RunModel.columns: the model's CSV columns after step (its words in the progress lines too);
 * RunConfig.compress: deflated checkpoints, which resume as stored ones do */
Test(run, a_model_adds_csv_columns_and_the_checkpoints_may_be_compressed) {
    char a[64], b[64], p[512], q[512];
    ts_tmp_dir(a, sizeof a, "run-stored");
    ts_tmp_dir(b, sizeof b, "run-deflated");
    cr_assert_eq(run_tiny((const char *[]){"--out", a, NULL}, NULL, -1), 0);
    draws_column = 1, compress = 6;
    int code = run_child(b, (const char *[]){"--out", b, "--steps", "12", NULL}, -1, 1);
    cr_assert_eq(code, 0);
    char *log = ts_read_text(ts_join(p, b, "log.csv"), NULL);
    cr_assert(
        strncmp(
            log, "step,draws,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_acc\n3,3,",
            strlen("step,draws,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_acc\n3,3,")) ==
            0,
        "%s", log);
    char *out = ts_read_text(ts_join(p, b, "child.out"), NULL);
    cr_assert(strstr(out, "step 3/12  draws 3  loss "), "%s", out);
    struct stat sa, sb;
    cr_assert(stat(ts_join(p, a, "last.npz"), &sa) == 0 &&
              stat(ts_join(q, b, "last.npz"), &sb) == 0);
    cr_assert(sb.st_size < sa.st_size, "deflated %lld, stored %lld bytes", (long long)sb.st_size,
              (long long)sa.st_size);
    draws_column = 0;
    cr_assert_eq(
        run_tiny((const char *[]){"--out", b, "--resume", "--steps", "20", NULL}, NULL, -1), 0);
    compress = 0;
    cr_assert_eq(
        run_tiny((const char *[]){"--out", b, "--resume", "--steps", "21", NULL}, NULL, -1), 0);
    cr_assert_eq(ckpt_step(ts_join(p, b, "last.npz")), 21);
    free(log), free(out);
    ts_rm_tree(a);
    ts_rm_tree(b);
}

/* RunConfig.check_finite: a NaN's stop names the op where it began, with shards too; without
 * it, the stop says how to find it. RunModel.nan_param: the parameter --inject-nan poisons. */
Test(run, check_mode_names_the_op_of_a_nan_with_or_without_shards) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-check");
    const char *const shards[] = {"1", "2"};
    for (int k = 0; k < 3; k++) {
        check_finite = k < 2;
        nan_param = k == 1 ? "l2.weight" : NULL;
        int code = run_child(dir,
                             (const char *[]){"--out", dir, "--force", "--inject-nan", "6",
                                              "--shards", shards[k % 2], NULL},
                             -1, 0);
        char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
        cr_assert_eq(code, 1, "exit %d: %s", code, err);
        cr_assert(strstr(err, "tiny train: step 6: the training loss is nan"), "%s", err);
        if (check_finite)
            cr_assert(strstr(err, "the first non-finite value: ") &&
                          strstr(err, k == 1 ? "l2.weight" : "l1.weight"),
                      "shards %s: %s", shards[k % 2], err);
        else
            cr_assert(strstr(err, "(run with AG_CHECK_FINITE=1, to name the op"), "%s", err);
        free(err);
    }
    check_finite = 0, nan_param = NULL;
    ts_rm_tree(dir);
}

Test(run, keep_every_keeps_the_history_and_a_kept_state_resumes_to_the_bits) {
    char a[64], b[64], p[512], q[512];
    ts_tmp_dir(a, sizeof a, "run-keep");
    ts_tmp_dir(b, sizeof b, "run-keep-resumed");
    keep_every = 6;
    cr_assert_eq(run_tiny((const char *[]){"--out", a, NULL}, NULL, -1), 0);
    keep_every = 0;
    for (int s = 0; s <= 20; s++) {
        snprintf(q, sizeof q, "ckpt/step_%08d.npz", s);
        struct stat st;
        int kept = stat(ts_join(p, a, q), &st) == 0;
        cr_assert_eq(kept, s % 6 == 0, "step %d: %s", s, kept ? "kept" : "missing");
        if (kept) cr_assert_eq(ckpt_step(p), s);
    }
    /* run_kept lists them by step; a folder without ckpt/, or with none in it, is refused */
    char **names;
    int n;
    cr_assert_eq(run_kept(a, &names, &n), AG_OK, "%s", ag_last_error());
    cr_assert_eq(n, 4);
    for (int i = 0; i < n; i++) {
        snprintf(q, sizeof q, "step_%08d.npz", 6 * i);
        cr_assert_str_eq(names[i], q);
        free(names[i]);
    }
    free(names);
    cr_assert_eq(run_kept(b, &names, &n), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "/ckpt: cannot read: ") && n == 0 && !names, "%s",
              ag_last_error());
    cr_assert_eq(mkdir(ts_join(p, b, "ckpt"), 0755), 0);
    cr_assert_eq(run_kept(b, &names, &n), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "/ckpt: no step_*.npz in it"), "%s", ag_last_error());
    rmdir(p);
    /* the state kept at step 12, as last.npz of another folder, continues to the same bits */
    size_t len;
    char *kept = ts_slurp(ts_join(p, a, "ckpt/step_00000012.npz"), &len);
    ts_write_bytes(ts_join(q, b, "last.npz"), kept, len);
    free(kept);
    cr_assert_eq(run_tiny((const char *[]){"--out", b, "--resume", NULL}, NULL, -1), 0);
    cr_assert(ts_same_file(ts_join(p, a, "last.npz"), q), "last.npz differs");
    ts_rm_tree(a);
    ts_rm_tree(b);
}

Test(run, resume_refuses_a_changed_kept_flag_naming_it_and_takes_a_remembered_one) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-flags");
    cr_assert_eq(
        run_tiny((const char *[]){"--out", dir, "--steps", "10", "--width", "6", NULL}, NULL, -1),
        0);
    const char *bad[][6] = {{"--hidden", "7"}, {"--lr", "0.1"}, {"--batch", "8"}, {"--seed", "2"}};
    const char *names[] = {"--hidden 7 differs from the checkpoint's (6,",
                           "--lr 0.1 differs from the checkpoint's (0.05,", "--batch 8 differs",
                           "--seed 2 differs"};
    for (int i = 0; i < 4; i++) {
        int code = run_child(
            dir,
            (const char *[]){"--out", dir, "--resume", "--steps", "12", bad[i][0], bad[i][1], NULL},
            -1, 0);
        char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
        cr_assert_eq(code, 2, "%s: exit %d", bad[i][0], code);
        cr_assert(strstr(err, names[i]), "%s: %s", names[i], err);
        free(err);
        cr_assert_eq(ckpt_step(ts_join(p, dir, "last.npz")), 10, "the checkpoint was touched");
    }
    /* the same value again, and a remembered flag (--steps) given: taken */
    Tiny m;
    cr_assert_eq(
        run_tiny((const char *[]){"--out", dir, "--resume", "--width", "6", "--steps", "12", NULL},
                 &m, -1),
        0);
    cr_assert_eq(m.cfg.width, 6);
    cr_assert_eq(ckpt_step(ts_join(p, dir, "last.npz")), 12);
    /* without --resume or --force, an existing run is not overwritten */
    int code = run_child(dir, (const char *[]){"--out", dir, NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "exists: continue that run with --resume"), "%d %s", code,
              err);
    free(err);
    ts_rm_tree(dir);
}

/* src's checkpoint as the tiny model's older program wrote it: every entry but the run's named
 * fields (meta.run.*), which go to data.position (LEGACY_*) */
static void write_legacy(const char *src, const char *dst) {
    NpzFile *f;
    cr_assert_eq(npz_read(src, &f, NULL), AG_OK, "%s", ag_last_error());
    NpzWriter *w = npz_writer_new();
    int64_t pos[LEGACY_COUNT];
    const struct {
        const char *name;
        int at;
    } named[] = {{"meta.run.model.draws", LEGACY_DRAWS},
                 {"meta.run.flag.batch", LEGACY_BATCH},
                 {"meta.run.run.row_steps", LEGACY_ROW_STEPS},
                 {"meta.run.run.best_step", LEGACY_BEST_STEP},
                 {"meta.run.run.last_valid", LEGACY_LAST_VALID},
                 {"meta.run.run.row_loss", LEGACY_ROW_LOSS},
                 {"meta.run.run.row_norm", LEGACY_ROW_NORM},
                 {"meta.run.run.row_tokens", LEGACY_ROW_TOKENS},
                 {"meta.run.run.best_loss", LEGACY_BEST_LOSS},
                 {"meta.run.run.best_acc", LEGACY_BEST_ACC}};
    for (int k = 0; k < LEGACY_COUNT; k++) {
        const NpzEntry *e = npz_find(f, named[k].name);
        cr_assert(e && e->nbytes == 8, "%s: no %s", src, named[k].name);
        memcpy(&pos[named[k].at], e->data, 8); /* an int64, or a double's bits */
    }
    for (int i = 0; i < f->n; i++) {
        const NpzEntry *e = &f->entries[i];
        if (strncmp(e->name, "meta.run.", 9) != 0)
            npz_add(w, e->name, e->dtype, e->ndim, e->shape, e->data);
    }
    npz_add_i64(w, "data.position", 1, (int64_t[]){LEGACY_COUNT}, pos);
    cr_assert_eq(npz_write(w, dst, 0, NULL), AG_OK, "%s", ag_last_error());
    npz_writer_free(w);
    npz_free(f);
}

/* RunModel.legacy: a file without the run's named fields, written by "an older program",
 * resumes to the bytes of a straight run (its --batch and state from its own layout), refuses a
 * kept flag given again with another value, and is refused outright by a model without a
 * legacy reader. RunModel.start: its error stops the run before anything is written (exit 2).
 * steps_to_schedule: --resume without --steps runs to --schedule-steps. */
Test(run, a_file_of_an_older_layout_resumes_through_the_model_and_start_may_refuse) {
    char a[64], b[64], c[64], p[512], q[512];
    ts_tmp_dir(a, sizeof a, "run-legacy-a");
    ts_tmp_dir(b, sizeof b, "run-legacy-b");
    ts_tmp_dir(c, sizeof c, "run-legacy-c");
    cr_assert_eq(run_tiny((const char *[]){"--out", a, "--batch", "8", NULL}, NULL, -1), 0);
    cr_assert_eq(run_tiny((const char *[]){"--out", c, "--batch", "8", "--steps", "10",
                                           "--schedule-steps", "20", NULL},
                          NULL, -1),
                 0);
    write_legacy(ts_join(p, c, "last.npz"), ts_join(q, b, "last.npz"));
    /* without a legacy reader the file is refused, naming a missing field */
    int code = run_child(b, (const char *[]){"--out", b, "--resume", "--steps", "20", NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, b, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "meta.run."), "exit %d: %s", code, err);
    free(err);
    with_legacy = 1;
    code = run_child(b, (const char *[]){"--out", b, "--resume", "--batch", "16", NULL}, -1, 0);
    err = ts_read_text(ts_join(p, b, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--batch 16 differs from the checkpoint's (8,"),
              "exit %d: %s", code, err);
    free(err);
    Tiny m;
    cr_assert_eq(run_tiny((const char *[]){"--out", b, "--resume", "--steps", "20", NULL}, &m, -1),
                 0);
    with_legacy = 0;
    cr_assert_eq(m.st.draws, 20);
    cr_assert(ts_same_file(ts_join(p, a, "last.npz"), ts_join(q, b, "last.npz")));
    cr_assert(ts_same_file(ts_join(p, a, "best.npz"), ts_join(q, b, "best.npz")));
    /* steps_to_schedule: the run of c (10 steps, its schedule to 20) resumed without --steps */
    ts_rm_tree(c);
    ts_tmp_dir(c, sizeof c, "run-legacy-c");
    cr_assert_eq(run_tiny((const char *[]){"--out", c, "--batch", "8", "--steps", "10",
                                           "--schedule-steps", "20", NULL},
                          NULL, -1),
                 0);
    to_schedule = 1;
    cr_assert_eq(run_tiny((const char *[]){"--out", c, "--resume", NULL}, &m, -1), 0);
    to_schedule = 0;
    cr_assert_eq(ckpt_step(ts_join(q, c, "last.npz")), 20);
    cr_assert(ts_same_file(ts_join(p, a, "last.npz"), q));
    /* a start that refuses: exit 2 with its message, nothing written */
    ts_rm_tree(c);
    ts_tmp_dir(c, sizeof c, "run-legacy-c");
    start_fails = 1;
    code = run_child(c, (const char *[]){"--out", c, NULL}, -1, 0);
    start_fails = 0;
    err = ts_read_text(ts_join(p, c, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "tiny train: --width 8: the start says no"), "exit %d: %s",
              code, err);
    free(err);
    struct stat sb;
    cr_assert(stat(ts_join(p, c, "last.npz"), &sb) != 0, "a refused start wrote last.npz");
    ts_rm_tree(a);
    ts_rm_tree(b);
    ts_rm_tree(c);
}

Test(run, precision_bf16_is_thread_count_free_kept_on_resume_and_refused_in_double) {
    char a[64], b[64], c[64], p[512], q[512];
    ts_tmp_dir(a, sizeof a, "run-bf16-1");
#if defined(AG_REAL_DOUBLE) || defined(AG_BLAS_OPENBLAS)
    int code = run_child(a, (const char *[]){"--out", a, "--precision", "bf16", NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, a, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--precision bf16: not in this build"), "exit %d: %s", code,
              err);
    free(err);
    (void)b, (void)c, (void)q;
#else
    ts_tmp_dir(b, sizeof b, "run-bf16-2");
    ts_tmp_dir(c, sizeof c, "run-fp32");
    cr_assert_eq(run_tiny((const char *[]){"--out", a, "--precision", "bf16", NULL}, NULL, -1), 0);
    cr_assert_eq(ag_precision(), AG_PRECISION_BF16);
    cr_assert_eq(
        run_tiny((const char *[]){"--out", b, "--precision", "bf16", "--threads", "2", NULL}, NULL,
                 -1),
        0);
    free(expect_same_run(a, b));
    /* where the products are emulated the program says so, once, before training */
    char w[64];
    ts_tmp_dir(w, sizeof w, "run-bf16-warn");
    int wcode = run_child(w, (const char *[]){"--out", w, "--precision", "bf16", NULL}, -1, 0);
    char *warn = ts_read_text(ts_join(p, w, "child.err"), NULL);
    cr_assert(wcode == 0, "exit %d: %s", wcode, warn);
    int emulated = strcmp(ag_precision_bf16_unit(), "vdpbf16ps") != 0;
    cr_assert(!emulated == !strstr(warn, "tiny: warning: --precision bf16 runs an exact emulation"),
              "products %s, stderr: %s", ag_precision_bf16_unit(), warn);
    free(warn);
    ts_rm_tree(w);
    cr_assert_eq(run_tiny((const char *[]){"--out", c, NULL}, NULL, -1), 0);
    cr_assert_eq(ag_precision(), AG_PRECISION_FP32);
    cr_assert(!ts_same_file(ts_join(p, a, "last.npz"), ts_join(q, c, "last.npz")),
              "bf16 wrote fp32's bytes: its products were not bf16");
    int code = run_child(
        a, (const char *[]){"--out", a, "--resume", "--steps", "22", "--precision", "fp32", NULL},
        -1, 0);
    char *err = ts_read_text(ts_join(p, a, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--precision fp32 differs from the checkpoint's (bf16,"),
              "exit %d: %s", code, err);
    free(err);
    cr_assert_eq(
        run_tiny((const char *[]){"--out", a, "--resume", "--steps", "22", NULL}, NULL, -1), 0);
    cr_assert_eq(ag_precision(), AG_PRECISION_BF16, "--resume took the checkpoint's bf16");
    ag_precision_use(AG_PRECISION_FP32);
    ts_rm_tree(b);
    ts_rm_tree(c);
#endif
    ts_rm_tree(a);
}

/* the start line says what the learning rate really does: a cosine whose floor is the peak is
 * a warmup then a constant rate, not "cosine" */
Test(run, says_what_its_schedule_really_is) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-say");
    const struct {
        const char *flags[7], *want;
    } rows[] = {{{NULL}, "; lr 0.05, cosine schedule (warmup 4 steps, to lr 0.0001 at step 5);"},
                {{"--lr-min", "0.05", NULL}, "; lr 0.05 (warmup 4 steps, then constant);"},
                {{"--lr-min", "0.05", "--warmup", "0", NULL}, "; constant lr 0.05;"},
                {{"--schedule", "constant", NULL}, "; constant lr 0.05;"},
                {{"--schedule", "invsqrt", NULL}, "; lr 0.05, invsqrt schedule (warmup 4 steps);"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const char *args[12] = {"--out", dir, "--force", "--steps", "5"};
        int n = 5;
        for (int j = 0; rows[i].flags[j]; j++) args[n++] = rows[i].flags[j];
        args[n] = NULL;
        int code = run_child(dir, args, -1, 1);
        char *out = ts_read_text(ts_join(p, dir, "child.out"), NULL);
        cr_assert(code == 0 && strstr(out, rows[i].want), "row %zu: exit %d, want [%s] in: %s", i,
                  code, rows[i].want, out);
        cr_assert(!strstr(out, "cosine") || strstr(rows[i].want, "cosine"), "row %zu: %s", i, out);
        free(out);
    }
    ts_rm_tree(dir);
}

/* --steps within the warmup: a flat cosine (warmup, then constant) runs them, its lr the
 * warmup's; a decaying cosine whose end is --steps is refused naming --steps and the ways out */
Test(run, steps_within_the_warmup_run_a_flat_schedule_and_name_the_fix_otherwise) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-short");
    int code = run_child(dir,
                         (const char *[]){"--out", dir, "--steps", "3", "--lr-min", "0.05",
                                          "--log-every", "1", NULL},
                         -1, 0);
    char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert_eq(code, 0, "exit %d: %s", code, err);
    free(err);
    char *csv = ts_read_text(ts_join(p, dir, "log.csv"), NULL), *line = strchr(csv, '\n') + 1;
    for (int t = 1; t <= 3; t++, line = strchr(line, '\n') + 1) {
        long long step;
        double loss, lr;
        cr_assert_eq(sscanf(line, "%lld,%lf,%lf", &step, &loss, &lr), 3, "%s", line);
        cr_assert(step == t && fabs(lr - 0.05 * t / 4) <= 1e-9, "step %lld: lr %g", step, lr);
    }
    free(csv);
    code = run_child(dir, (const char *[]){"--out", dir, "--force", "--steps", "3", NULL}, -1, 0);
    err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 &&
                  strstr(err, "--steps 3: the cosine schedule decays from the end of its "
                              "warmup (--warmup 4) to --steps") &&
                  strstr(err, "--schedule constant"),
              "exit %d: %s", code, err);
    free(err);
    code = run_child(
        dir,
        (const char *[]){"--out", dir, "--force", "--steps", "3", "--schedule-steps", "4", NULL},
        -1, 0);
    err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--warmup 4 must be below --schedule-steps 4"),
              "exit %d: %s", code, err);
    free(err);
    /* given under another of their names (attograd-gpt's nanoGPT spellings), they are named so */
    nano_names = 1;
    code = run_child(
        dir,
        (const char *[]){"--out", dir, "--force", "--max-iters", "3", "--warmup-iters", "5", NULL},
        -1, 0);
    err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 &&
                  strstr(err, "--max-iters 3: the cosine schedule decays from the end of its "
                              "warmup (--warmup-iters 5) to --max-iters: give more steps, a "
                              "shorter --warmup-iters, a --schedule-steps above"),
              "exit %d: %s", code, err);
    free(err);
    code = run_child(dir,
                     (const char *[]){"--out", dir, "--force", "--max-iters", "3",
                                      "--lr-decay-iters", "4", NULL},
                     -1, 0);
    err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--warmup 4 must be below --lr-decay-iters 4"),
              "exit %d: %s", code, err);
    free(err);
    code =
        run_child(dir, (const char *[]){"--out", dir, "--force", "--min-lr", "0.5", NULL}, -1, 0);
    err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 && strstr(err, "--min-lr 0.5 must not exceed --lr 0.05"), "exit %d: %s",
              code, err);
    free(err);
    nano_names = 0;
    ts_rm_tree(dir);
}

Test(run, a_missing_gnuplot_is_reported_as_skipped_and_masks_no_exit_code) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-plot");
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    int code = run_child(dir, (const char *[]){"--out", dir, "--inject-nan", "7", NULL}, -1, 1);
    unsetenv("AG_GNUPLOT");
    char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    char *out = ts_read_text(ts_join(p, dir, "child.out"), NULL);
    cr_assert_eq(code, 1, "exit %d: %s", code, err);
    cr_assert(strstr(err, "step 7: the training loss is nan") && !strstr(err, "plot skipped"), "%s",
              err);
    const char *note =
        strstr(out, "loss.png: plot skipped: gnuplot not found (AG_GNUPLOT=/nonexistent/gnuplot)");
    cr_assert(note && !strstr(note + 30, "plot skipped"), "said once: %s", out);
    free(err), free(out);
    ts_rm_tree(dir);
}

/* what --out holds is written as every attograd program writes (src/io/file.h): a FIFO at
 * log.csv is refused at once (never waited on), a link at loss.png is never replaced, and an
 * --out too long for the names built from it is refused naming the flag, never cut */
Test(run, a_fifo_a_link_or_a_long_out_is_refused_and_nothing_is_replaced, .timeout = 120) {
    char dir[64], p[512], q[512];
    ts_tmp_dir(dir, sizeof dir, "run-hostile");
    cr_assert_eq(mkfifo(ts_join(p, dir, "log.csv"), 0600), 0);
    int code = run_child(dir, (const char *[]){"--out", dir, NULL}, -1, 0);
    char *err = ts_read_text(ts_join(q, dir, "child.err"), NULL);
    cr_assert_eq(code, 2, "FIFO log.csv: exit %d: %s", code, err);
    cr_assert(strstr(err, p) && strstr(err, "not a regular file"), "%s", err);
    struct stat st;
    cr_assert(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
    free(err);
    unlink(p);
    /* a link at loss.png: the run goes on, the plot fails once naming it, the link stays */
    cr_assert_eq(symlink("/nonexistent/target", ts_join(p, dir, "loss.png")), 0);
    setenv("AG_GNUPLOT", "/bin/true", 1); /* a "gnuplot" that draws nothing */
    code = run_child(dir, (const char *[]){"--out", dir, NULL}, -1, 0);
    unsetenv("AG_GNUPLOT");
    err = ts_read_text(ts_join(q, dir, "child.err"), NULL);
    cr_assert_eq(code, 0, "link loss.png: exit %d: %s", code, err);
    cr_assert(strstr(err, "loss.png") && strstr(err, "not a regular file"), "%s", err);
    cr_assert(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "the link was replaced");
    free(err);
    /* --out of 5000 bytes (beyond PATH_MAX) */
    char *longdir = malloc(5100);
    snprintf(longdir, 5100, "%s/", dir);
    while (strlen(longdir) < 5000) strcat(longdir, "d");
    code = run_child(dir, (const char *[]){"--out", longdir, NULL}, -1, 0);
    err = ts_read_text(ts_join(q, dir, "child.err"), NULL);
    cr_assert_eq(code, 2, "long --out: exit %d: %s", code, err);
    cr_assert(strstr(err, "--out: a path of 5000 bytes"), "%s", err);
    free(err);
    free(longdir);
    ts_rm_tree(dir);
}

Test(run, eval_reads_a_checkpoint_back_and_a_bad_saved_value_is_refused_named) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-eval");
    cr_assert_eq(
        run_tiny((const char *[]){"--out", dir, "--steps", "10", "--width", "5", NULL}, NULL, -1),
        0);
    int code = run_child(dir, (const char *[]){"eval", "--out", dir, NULL}, -1, 0);
    char *out = ts_read_text(ts_join(p, dir, "child.out"), NULL);
    cr_assert_eq(code, 0, "%s", out);
    cr_assert(strstr(out, "best.npz: step 10: valid loss ") && strstr(out, ", valid acc "), "[%s]",
              out);
    free(out);
    /* a checkpoint whose model computes a non-finite loss: the metrics, then exit 1, named */
    huge_in_valid = 1;
    code = run_child(dir, (const char *[]){"eval", "--out", dir, NULL}, -1, 0);
    huge_in_valid = 0;
    out = ts_read_text(ts_join(p, dir, "child.out"), NULL);
    char *err0 = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 1 && strstr(out, "best.npz: step 10: valid loss ") &&
                  strstr(err0, "best.npz: the valid loss is ") &&
                  strstr(err0, ": the model does not compute finite values"),
              "exit %d: [%s] [%s]", code, out, err0);
    free(out);
    free(err0);
    /* a saved value outside its flag's range: resume refuses the file, naming the entry */
    ts_join(p, dir, "last.npz");
    ts_npz_edit(p, p, "meta.run.flag.batch", 0, 0, 0);
    code = run_child(dir, (const char *[]){"--out", dir, "--resume", "--steps", "12", NULL}, -1, 0);
    char *err = ts_read_text(ts_join(p, dir, "child.err"), NULL);
    cr_assert(code == 2 &&
                  strstr(err, "last.npz: meta.run.flag.batch = 0: must be an integer in [1,"),
              "exit %d: %s", code, err);
    free(err);
    ts_rm_tree(dir);
}

/* ---- examples/classify (AG_CLASSIFY_BIN, which make test sets), run whole ---- */

static TsRun classify(const char *dir, const char *const *args) {
    return ts_finish(dir, ts_start_env("AG_CLASSIFY_BIN", dir, args, NULL));
}

static int log_rows(const char *path) {
    char *t = ts_slurp(path, NULL);
    int n = 0;
    for (char *c = t; c && *c; c++) n += *c == '\n';
    free(t);
    return n - 1;
}

#define SMALL "--d-model", "16", "--layers", "1", "--len", "8", "--threads", "1", "--quiet"

Test(classify, killed_and_resumed_writes_the_bytes_of_a_straight_run) {
    char dir[64], a[512], b[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "classify");
    ts_join(a, dir, "straight");
    ts_join(b, dir, "killed");
    TsRun r = classify(
        dir, (const char *[]){"--out", a, "--steps", "600", "--save-every", "20", SMALL, NULL});
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    int pid = ts_start_env(
        "AG_CLASSIFY_BIN", dir,
        (const char *[]){"--out", b, "--steps", "600", "--save-every", "20", SMALL, NULL}, NULL);
    ts_join(p, b, "log.csv");
    for (int i = 0; i < 3000 && log_rows(p) < 5; i++) /* at most 30 s */
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    kill(pid, SIGKILL);
    r = ts_finish(dir, pid);
    cr_assert_eq(r.code, 128 + SIGKILL, "the run ended before it was killed: exit %d", r.code);
    ts_run_free(&r);
    r = classify(dir, (const char *[]){"--out", b, "--resume", NULL});
    cr_assert_eq(r.code, 0, "resume: exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    char *la = expect_same_run(a, b);
    /* it learned: the last row's valid accuracy */
    cr_assert(strtod(strrchr(la, ',') + 1, NULL) > 0.8, "valid accuracy: %s", strrchr(la, ','));
    free(la);
    /* a changed model flag is refused, named; eval reads best.npz */
    r = classify(dir,
                 (const char *[]){"--out", b, "--resume", "--heads", "2", "--steps", "700", NULL});
    cr_assert(r.code == 2 && strstr(r.err, "--heads 2 differs from the checkpoint's (4"), "%d %s",
              r.code, r.err);
    ts_run_free(&r);
    r = classify(dir, (const char *[]){"eval", "--out", b, NULL});
    cr_assert(r.code == 0 && strstr(r.out, "best.npz: step ") && strstr(r.out, "valid accuracy"),
              "%d %s %s", r.code, r.out, r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* the ticks of a log y axis (run_gp_log_ytics) in script: each label and value into lab and v
 * (at most 32); how many. Asserts the script sets them and a yrange [*lo:*hi]. */
static int log_ytics_of(const char *script, char lab[][40], double *v, double *lo, double *hi) {
    const char *r = strstr(script, "set yrange [");
    cr_assert(r && sscanf(r, "set yrange [%lf:%lf]", lo, hi) == 2, "no yrange: %s", script);
    const char *p = strstr(script, "set ytics (");
    cr_assert(p, "no ytics: %s", script);
    p += strlen("set ytics (");
    int n = 0, used;
    while (n < 32 && sscanf(p, " \"%39[^\"]\" %lf%n", lab[n], &v[n], &used) == 2) {
        n++, p += used;
        if (*p == ',') p++;
    }
    cr_assert_eq(*p, ')', "ytics not read to their end: %s", p);
    return n;
}

/* loss curves on a log y axis: the tick labels are distinct, each its tick's value, 3 or more,
 * within the range, whether the losses span a few hundredths or several decades */
Test(run, a_log_loss_axis_has_distinct_tick_labels_that_are_their_values) {
    static const double ranges[][2] = {{2.2, 2.25}, {2.201, 2.203},  {1.82, 2.4}, {0.9, 1.3},
                                       {1.5, 4},    {0.02, 3.5},     {1e-4, 7},   {3, 3},
                                       {250, 260},  {0.0311, 0.0312}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        char *s = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&s, &len);
        run_gp_log_ytics(f, ranges[k][0], ranges[k][1]);
        fclose(f);
        char lab[32][40];
        double v[32], lo, hi;
        int n = log_ytics_of(s, lab, v, &lo, &hi);
        cr_assert(lo > 0 && lo <= ranges[k][0] && hi >= ranges[k][1], "%s", s);
        cr_assert(n >= 3 && n <= 32, "[%g, %g]: %d ticks: %s", ranges[k][0], ranges[k][1], n, s);
        for (int i = 0; i < n; i++) {
            cr_assert(v[i] >= lo && v[i] <= hi, "a tick outside the range: %s", s);
            cr_assert(fabs(strtod(lab[i], NULL) - v[i]) <= 1e-9 * v[i], "label %s of %.17g: %s",
                      lab[i], v[i], s);
            for (int j = 0; j < i; j++)
                cr_assert(strcmp(lab[i], lab[j]) != 0 && v[i] > v[j], "ticks %s %s: %s", lab[j],
                          lab[i], s);
        }
        free(s);
    }
    /* a run's loss.gp whose losses span two hundredths (once drawn with "2" "2" or no label) */
    char dir[64], p[512], q[512];
    ts_tmp_dir(dir, sizeof dir, "run-logtics");
    FILE *c = fopen(ts_join(p, dir, "log.csv"), "w");
    cr_assert(c);
    fprintf(c, "step,train_loss,valid_loss\n10,2.231,\n20,2.224,2.229\n30,2.219,2.226\n");
    fclose(c);
    setenv("AG_GNUPLOT", "/bin/true", 1); /* the script is written; nothing is drawn */
    run_plot_loss(p, ts_join(q, dir, "loss.png"));
    unsetenv("AG_GNUPLOT");
    char *gp = ts_read_text(ts_join(q, dir, "loss.gp"), NULL);
    char lab[32][40];
    double v[32], lo, hi;
    int n = log_ytics_of(gp, lab, v, &lo, &hi);
    cr_assert(strstr(gp, "set logscale y") && n >= 3 && lo <= 2.219 && hi >= 2.231, "%s", gp);
    for (int i = 1; i < n; i++) cr_assert(strcmp(lab[i], lab[i - 1]) != 0, "%s", gp);
    free(gp);
    ts_rm_tree(dir);
}

/* run_check_given: a model flag given with a value that makes another model than the
 * checkpoint's is refused, named as typed with its value (a choice by name, a switch by its
 * name alone) and the checkpoint's (in words when given); one not given, or given with the
 * same value, passes */
Test(run, check_given_names_the_first_changed_model_flag_as_typed) {
    int width = 8, act = 0, tied = 0;
    static const char *const acts[] = {"relu", "gelu", NULL};
    Flag fl[] = {{"width|hidden", FLAG_INT, &width, "N", "width", 1, 64, NULL, 0},
                 {"act", FLAG_CHOICE, &act, NULL, "activation", 0, 0, acts, 0},
                 {"tied", FLAG_SWITCH, &tied, NULL, "tied", 1, 0, NULL, 0}};
    const struct {
        const char *argv[4];
        const char *says; /* NULL: accepted */
    } rows[] = {
        {{"--act", "gelu", NULL}, "--act gelu differs from the checkpoint's (relu): --resume"},
        {{"--hidden", "16", NULL}, "--hidden 16 differs from the checkpoint's (8)"},
        {{"--tied", NULL}, "--tied differs from the checkpoint's (off)"},
        {{"--width", "8", "--act", "relu"}, NULL},
        {{NULL}, NULL},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        width = 8, act = 0, tied = 0;
        for (int i = 0; i < 3; i++) fl[i].given = 0;
        int argc = 0;
        while (argc < 4 && rows[k].argv[argc]) argc++;
        cr_assert_eq(flag_parse(fl, 3, argc, (char **)rows[k].argv, NULL, NULL), AG_OK);
        const RunGiven v[] = {
            {"width", width, 8, NULL}, {"act", act, 0, acts[0]}, {"tied", tied, 0, NULL}};
        int rc = run_check_given(fl, 3, v, 3);
        if (!rows[k].says) {
            cr_assert_eq(rc, AG_OK, "row %zu: %s", k, ag_last_error());
            continue;
        }
        cr_assert_eq(rc, AG_ERR_ARG, "row %zu", k);
        cr_assert(strstr(ag_last_error(), rows[k].says), "row %zu: %s", k, ag_last_error());
    }
}

/* run_report_memory: a first line of the peak and current RSS after a step, then lines with
 * the change since the first report; the first figures kept in first[] */
Test(run, report_memory_says_the_peak_and_then_its_change) {
    char buf[1024] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    cr_assert(f);
    long first[2] = {-1, -1};
    run_report_memory(f, 10, 10, first);
    run_report_memory(f, 20, 10, first);
    fclose(f);
    cr_assert(first[0] > 0, "the peak RSS: %ld", first[0]);
    char *second = strchr(buf, '\n');
    cr_assert(second && strncmp(buf, "memory: peak RSS ", 17) == 0, "%s", buf);
    cr_assert(strstr(buf, " KiB after step 10 (now ") < second && strstr(buf, "since") > second,
              "%s", buf);
    cr_assert(strstr(second, "KiB after step 20") && strstr(second, " KiB since step 10"), "%s",
              buf);
}

/* run_csv_read: columns by header name in any order, an empty cell or an absent column NAN, a
 * line cut short skipped; a header without a needed column refused naming it, a missing file
 * named */
Test(run, csv_read_finds_columns_by_name_and_refuses_a_missing_needed_one) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "csv");
    ts_write_text(ts_join(p, dir, "log.csv"), "epoch,step,train_loss,valid_loss\n"
                                              "0.1,10,2.5,\n0.2,20,1.5,1.25\n0.3,");
    static const char *const names[] = {"step", "valid_loss", "valid_exact"};
    double *c[3];
    int n;
    cr_assert_eq(run_csv_read(p, names, 3, 2, c, &n), AG_OK, "%s", ag_last_error());
    cr_assert_eq(n, 2);
    cr_assert(c[0][0] == 10 && c[0][1] == 20 && isnan(c[1][0]) && c[1][1] == 1.25);
    cr_assert(isnan(c[2][0]) && isnan(c[2][1]));
    for (int j = 0; j < 3; j++) free(c[j]);
    cr_assert_eq(run_csv_read(p, names, 3, 3, c, &n), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "no column valid_exact"), "%s", ag_last_error());
    cr_assert(!c[0] && n == 0);
    cr_assert_eq(run_csv_read(ts_join(p, dir, "none.csv"), names, 3, 1, c, &n), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "none.csv"), "%s", ag_last_error());
    ts_rm_tree(dir);
}

Test(run, out_dir_makes_the_folder_and_refuses_one_it_cannot_write_into) {
    char dir[64], p[700], q[512];
    ts_tmp_dir(dir, sizeof dir, "run-outdir");
    snprintf(q, sizeof q, "%s/a/b", dir);
    cr_assert_eq(run_out_dir(q), AG_OK, "%s", ag_last_error());
    struct stat st;
    cr_assert(stat(q, &st) == 0 && S_ISDIR(st.st_mode), "%s was not made", q);
    /* a regular file in the way: named */
    ts_write_text(ts_join(p, dir, "file"), "x");
    snprintf(q, sizeof q, "%s/file/sub", dir);
    cr_assert_eq(run_out_dir(q), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "/file"), "%s", ag_last_error());
    /* a folder without write permission: refused, naming it (root may write anywhere) */
    snprintf(q, sizeof q, "%s/a", dir);
    cr_assert_eq(chmod(q, 0555), 0);
    int rc = run_out_dir(q);
    if (geteuid() == 0) {
        cr_assert_eq(rc, AG_OK, "%s", ag_last_error());
    } else {
        cr_assert_eq(rc, AG_ERR_IO);
        snprintf(p, sizeof p, "%s: cannot write into the folder: ", q);
        cr_assert(strstr(ag_last_error(), p), "%s", ag_last_error());
    }
    chmod(q, 0755);
    /* run_out_file_dir: the folder of a file; a name alone and "/x" need nothing; a file in the
     * way is named */
    snprintf(q, sizeof q, "%s/c/d/x.npz", dir);
    cr_assert_eq(run_out_file_dir(q), AG_OK, "%s", ag_last_error());
    snprintf(p, sizeof p, "%s/c/d", dir);
    cr_assert(stat(p, &st) == 0 && S_ISDIR(st.st_mode) && stat(q, &st) != 0, "%s", p);
    cr_assert(run_out_file_dir("x.npz") == AG_OK && run_out_file_dir("/x.npz") == AG_OK);
    snprintf(q, sizeof q, "%s/file/x.npz", dir);
    cr_assert_eq(run_out_file_dir(q), AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), "/file"), "%s", ag_last_error());
    ts_rm_tree(dir);
}

/* run_gp.c: a string literal, a heatmap panel, a script drawn into a folder, a whole heatmap */
Test(run_gp, a_script_of_panels_is_written_next_to_its_png_and_a_heatmap_draws) {
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    run_gp_string(f, "it's\nok");
    fclose(f);
    cr_assert_str_eq(s, "'it''sok'");
    free(s);
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "run-gp");
    RunGpScript sc;
    run_gp_script_begin(&sc, 300, 200);
    run_gp_panel(sc.f, &(RunGpPanel){.id = 7,
                                     .v = (const float[]){0.25f, 1, 0, 0.5f},
                                     .rows = 2,
                                     .cols = 2,
                                     .xlab = (const char *const[]){"a", "b'"},
                                     .title = "t",
                                     .x1 = 1,
                                     .y1 = 1,
                                     .hi = 1,
                                     .values = 2});
    setenv("AG_GNUPLOT", "/bin/true", 1); /* the script is written; nothing is drawn */
    cr_assert_eq(run_gp_script_draw(&sc, dir, "panel.png", "test"), 0); /* failed, said */
    setenv("AG_GNUPLOT", "/nonexistent/gnuplot", 1);
    double v[6] = {-1, 0, 1, 2, 3, 4};
    cr_assert_eq(run_plot_heatmap(ts_join(p, dir, "h.png"), "h", v, 2, 3, NULL, NULL, 0),
                 RUN_PLOT_SKIPPED);
    unsetenv("AG_GNUPLOT");
    char *gp = ts_read_text(ts_join(p, dir, "panel.gp"), NULL);
    cr_assert(strstr(gp, "set terminal pngcairo size 300,200 font 'DejaVu Sans,11'") &&
                  strstr(gp, "$M7 << EOD\n0.25 1\n0 0.5\nEOD\n") &&
                  strstr(gp, "set xtics ('a' 0, 'b''' 1)") && strstr(gp, "unset ytics") &&
                  strstr(gp, "sprintf('%.2g', $3)") && strstr(gp, "unset colorbox"),
              "%s", gp);
    free(gp);
    if (!run_gnuplot_available()) {
        ts_rm_tree(dir);
        cr_skip_test("gnuplot is not installed: the heatmap is not drawn");
    }
    char *yl[2] = {"r0", "r1"}, *xl[3] = {"c0", "c1", "c2"};
    cr_assert_eq(run_plot_heatmap(ts_join(p, dir, "h.png"), "h", v, 2, 3, yl, xl, 0),
                 RUN_PLOT_DRAWN, "%s", ag_last_error());
    struct stat st;
    cr_assert(stat(p, &st) == 0 && st.st_size > 0);
    gp = ts_read_text(ts_join(p, dir, "h.gp"), NULL);
    cr_assert(strstr(gp, "font 'DejaVu Sans,10'") && strstr(gp, "set cbrange [-4:4]") &&
                  strstr(gp, "(-1 '#2166ac', 0 '#ffffff', 1 '#b2182b')"),
              "%s", gp);
    free(gp);
    ts_rm_tree(dir);
}

/* run_plot_loss: the exact match on a right axis when the log has it, a header without the
 * columns named */
Test(run, the_loss_plot_adds_the_exact_match_when_the_log_has_it) {
    char dir[64], p[512], q[512];
    ts_tmp_dir(dir, sizeof dir, "run-exact");
    ts_join(p, dir, "log.csv");
    setenv("AG_GNUPLOT", "/bin/true", 1); /* the script is written; nothing is drawn */
    for (int exact = 0; exact < 2; exact++) {
        ts_write_text(p, exact ? "step,train_loss,valid_loss,valid_exact\n10,2,,\n20,1,1.5,0.25\n"
                               : "step,train_loss,valid_loss\n10,2,\n20,1,1.5\n");
        run_plot_loss(p, ts_join(q, dir, "loss.png"));
        char *gp = ts_read_text(ts_join(q, dir, "loss.gp"), NULL);
        cr_assert(strstr(gp, "$train << EOD\n10 2\n20 1\nEOD\n"), "%s", gp);
        if (exact)
            cr_assert(strstr(gp, "$valid << EOD\n20 1.5 25\nEOD\n") && strstr(gp, "y2label") &&
                          strstr(gp, "axes x1y2"),
                      "%s", gp);
        else
            cr_assert(strstr(gp, "$valid << EOD\n20 1.5 nan\nEOD\n") && !strstr(gp, "y2label"),
                      "%s", gp);
        free(gp);
    }
    ts_write_text(p, "when,what\n1,2\n");
    cr_assert_eq(run_plot_loss(p, q), RUN_PLOT_FAILED);
    cr_assert(strstr(ag_last_error(), "its header has no column step, train_loss"), "%s",
              ag_last_error());
    ts_write_text(p, "");
    cr_assert_eq(run_plot_loss(p, q), RUN_PLOT_SKIPPED);
    cr_assert(strstr(ag_last_error(), "no rows yet"), "%s", ag_last_error());
    unsetenv("AG_GNUPLOT");
    ts_rm_tree(dir);
}

/* run_records: records grown as they come, as bytes and back; bytes of another shape or size
 * refused, naming what they are and changing nothing */
Test(run_records, bytes_and_back_refuse_another_shape_or_size) {
    int64_t *step = NULL;
    double *loss = NULL;
    float fixed[3] = {1, 2, 3}, *fp = fixed; /* a fixed array: its caller's */
    const int64_t head[2] = {4, 3};
    RunRecArray a[] = {
        {(void **)&step, 8, 1, 0}, {(void **)&loss, 8, 2, 0}, {(void **)&fp, 4, 3, 1}};
    RunRecords r = {a, 3, head, (const char *const[]){"layers", "positions"}, 2, 0, 0};
    run_records_reserve(&r, 100);
    cr_assert(r.cap >= 100 && step && loss);
    for (int i = 0; i < 100; i++) step[i] = 10 * i, loss[2 * i] = i, loss[2 * i + 1] = -i;
    r.R = 100;
    size_t len;
    char *b = run_records_bytes(&r, &len);
    cr_assert_eq(len, 3 * 8 + 100 * (8 + 16) + 12);
    int64_t *step2 = NULL;
    double *loss2 = NULL;
    float fixed2[3] = {0}, *fp2 = fixed2;
    RunRecArray a2[] = {
        {(void **)&step2, 8, 1, 0}, {(void **)&loss2, 8, 2, 0}, {(void **)&fp2, 4, 3, 1}};
    RunRecords r2 = {a2, 3, head, NULL, 2, 0, 0};
    cr_assert_eq(run_records_load(&r2, b, len - 1, "meta.extra"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "meta.extra: 100 records do not fill its"), "%s",
              ag_last_error());
    cr_assert_eq(r2.R, 0);
    cr_assert_eq(run_records_load(&r2, b, 8, "x"), AG_ERR_FORMAT);
    cr_assert_eq(run_records_load(&r2, b, len, "meta.extra"), AG_OK, "%s", ag_last_error());
    cr_assert_eq(r2.R, 100);
    cr_assert(memcmp(step2, step, 800) == 0 && memcmp(loss2, loss, 1600) == 0 &&
              memcmp(fixed2, fixed, sizeof fixed) == 0);
    const int64_t other[2] = {4, 5};
    r.head = other;
    cr_assert_eq(run_records_load(&r, b, len, "meta.extra"), AG_ERR_FORMAT);
    cr_assert(strstr(ag_last_error(), "meta.extra: records of 3 positions; these are of 5"), "%s",
              ag_last_error());
    free(b);
    run_records_free(&r), run_records_free(&r2);
    cr_assert(step == NULL && loss2 == NULL && r.cap == 0);
}

/* run_records_csv: a header, then a row a record; a folder in the way is an error naming it */
Test(run_records, csv_a_header_then_a_row_a_record) {
    char dir[64], p[512];
    ts_tmp_dir(dir, sizeof dir, "records-csv");
    const int64_t steps[] = {0, 10};
    const double cols[] = {1.5, 2, NAN, 0.25}; /* (2 columns, 2 records) */
    cr_assert_eq(run_records_csv(ts_join(p, dir, "r.csv"), steps, 2,
                                 (const char *const[]){"loss", "acc"}, cols, 2),
                 AG_OK, "%s", ag_last_error());
    char *text = ts_read_text(p, NULL);
    cr_assert_str_eq(text, "step,loss,acc\n0,1.5,nan\n10,2,0.25\n");
    free(text);
    cr_assert_eq(run_records_csv(dir, steps, 2, (const char *const[]){"loss", "acc"}, cols, 2),
                 AG_ERR_IO);
    cr_assert(strstr(ag_last_error(), dir), "%s", ag_last_error());
    ts_rm_tree(dir);
}

/* run_kept_load: each kept state read for an analysis into the model built once, its step */
Test(run, run_kept_load_reads_each_kept_state_into_the_model_built_once) {
    char a[64], p[512], q[512];
    ts_tmp_dir(a, sizeof a, "run-kept-load");
    keep_every = 6;
    cr_assert_eq(run_tiny((const char *[]){"--out", a, "--width", "5", NULL}, NULL, -1), 0);
    keep_every = 0;
    char **names;
    int n;
    cr_assert_eq(run_kept(a, &names, &n), AG_OK, "%s", ag_last_error());
    cr_assert_eq(n, 4);
    static Tiny m, o;
    memset(&m, 0, sizeof m);
    m.cfg = (TinyConfig){8, 0.1}; /* the file's configuration replaces it */
    RunModel model = {
        .ctx = &m, .build = tiny_build, .config = {"tiny", tiny_fields, 2, &m.cfg, NULL}};
    Arena *arena = arena_new("kept", 0), *other = arena_new("other", 0);
    ParamList *params = NULL;
    float first = 0;
    for (int i = 0; i < n; i++) {
        int64_t step = -1;
        cr_assert_eq(run_kept_load(&model, a, names[i], arena, &params, &step), AG_OK, "%s",
                     ag_last_error());
        cr_assert_eq(step, 6 * i);
        cr_assert(params == &m.params && m.params.n == 4 && m.cfg.width == 5,
                  "built once, as the file's: %d parameters, width %d", m.params.n, m.cfg.width);
        if (i == 0) first = m.l1.weight->data[0];
        /* the file's weights: a model loaded apart with ckpt_load holds the same bits */
        memset(&o, 0, sizeof o);
        o.cfg = m.cfg;
        Rng r;
        rng_seed(&r, 7);
        ParamList *op;
        tiny_build(&o, other, &r, &op);
        Checkpoint ck = {.params = op, .config = {"tiny", tiny_fields, 2, &o.cfg, NULL}};
        snprintf(q, sizeof q, "ckpt/%s", names[i]);
        cr_assert_eq(ckpt_load(ts_join(p, a, q), &ck), AG_OK, "%s", ag_last_error());
        free((void *)ck.extra);
        for (int k = 0; k < m.params.n; k++)
            cr_assert(memcmp(m.params.items[k]->data, op->items[k]->data,
                             m.params.items[k]->size * sizeof(Real)) == 0,
                      "%s: parameter %d", names[i], k);
        ag_params_free(&o.params);
        free(names[i]);
    }
    free(names);
    cr_assert_neq(m.l1.weight->data[0], first, "the last kept state is not the first");
    /* a file that is not a checkpoint: the error names it */
    ts_write_text(ts_join(p, a, "ckpt/step_99999999.npz"), "not a checkpoint");
    int64_t step = -1;
    cr_assert_neq(run_kept_load(&model, a, "step_99999999.npz", arena, &params, &step), AG_OK);
    cr_assert(strstr(ag_last_error(), "ckpt/step_99999999.npz"), "%s", ag_last_error());
    ag_params_free(&m.params);
    arena_free(arena), arena_free(other);
    ts_rm_tree(a);
}

Test(run_first_step, the_first_record_that_reaches_the_value_either_way) {
    const int64_t steps[] = {0, 10, 20, 30};
    const double acc[] = {0.1, NAN, 0.96, 1}, loss[] = {4, 2, 0.5, 0.9};
    cr_assert_eq(run_first_step(steps, acc, 4, 0.95, 1), 20);
    cr_assert_eq(run_first_step(steps, acc, 4, 1, 1), 30);
    cr_assert_eq(run_first_step(steps, acc, 4, 1.5, 1), -1);
    cr_assert_eq(run_first_step(steps, acc, 4, 0.5, 0), 0);
    cr_assert_eq(run_first_step(steps, loss, 4, 1, 0), 20);
    cr_assert_eq(run_first_step(steps, loss, 4, 0.1, 0), -1);
    cr_assert_eq(run_first_step(steps, loss, 0, 10, 0), -1); /* no records */
}
