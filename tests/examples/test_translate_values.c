/* test_translate_values.c: checkpoints that are well formed but wrong, against every command
 * that reads one. A generator takes a good checkpoint of a tiny run and sets one value at a
 * time to a boundary or beyond it (-1, 0, max + 1, NaN, +-Inf, 2^62, an all-zero RNG, an
 * entry far larger than the model), each a valid .npz with a valid CRC; eval, translate,
 * attention, heads and train --resume must each exit 2 naming the entry, the value and the
 * rule, and never crash. Also here: --resume keeps the run's settings (a resume with no
 * repeated flags is byte-identical to a straight run), refuses flags it cannot honour and
 * --steps below the step reached, and names best.npz only when there is one.
 * The library's rules are tested in tests/io/test_checkpoint.c; faults during a run in
 * test_translate_faults.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "translate.h"

/* n pairs of random copy sequences of 2..6 symbols from 6 letters */
static void write_copies(const char *path, int n, uint64_t seed) {
    FILE *f = fopen(path, "w");
    cr_assert(f != NULL);
    Rng r;
    rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        int len = 2 + (int)rng_below(&r, 5);
        for (int side = 0; side < 2; side++)
            for (int k = 0; k < len; k++)
                fprintf(f, "%c%c", (char)('a' + (i * 7 + k * 3) % 6),
                        k + 1 < len ? ' '
                        : side      ? '\n'
                                    : '\t');
    }
    fclose(f);
}

#define TINY_FLAGS                                                                                 \
    "--threads", "1", "--d-model", "16", "--heads", "2", "--layers", "1", "--ff", "32",            \
        "--max-len", "24", "--batch", "8", "--warmup", "2"

static int64_t bits(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}

/* A tiny run of 6 steps, validated every 3: dir/good/last.npz (step 6, best.npz of step 6) */
static void good_run(const char *dir, const char *train, char *out) {
    ts_join(out, dir, "good");
    const char *args[] = {"train",   "--train",     train, "--valid",     train, "--out",
                          out,       "--steps",     "6",   "--log-every", "4",   "--valid-every",
                          "3",       "--valid-max", "8",   "--dropout",   "0.1", TINY_FLAGS,
                          "--quiet", NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "the good run: %s", r.err);
    ts_run_free(&r);
}

/* data.position's layout (POS_* in train.c), in a checkpoint written before the run loop */
#define V2_FIXTURE "tests/fixtures/translate_v2_last.npz"
enum {
    EPOCH,
    CURSOR,
    SEED,
    BATCH,
    N_TRAIN,
    BEST_STEP,
    BEST_EXACT,
    BEST_LOSS,
    LAST_VALID,
    IV_LOSS,
    IV_NORM,
    IV_STEPS,
    IV_TOKENS,
    LOG_EVERY,
    VALID_EVERY,
    SAVE_EVERY,
    VALID_MAX,
    TOTAL,
    CLIP
};

Test(tr_values, every_command_refuses_each_wrong_value_naming_it_with_exit_2) {
    char dir[64], train[512], good[512], bad[512], last[512], att[512], heads[512];
    ts_tmp_dir(dir, sizeof dir, "values");
    write_copies(ts_join(train, dir, "train.tsv"), 40, 5);
    good_run(dir, train, good);
    ts_join(bad, dir, "bad");
    cr_assert_eq(mkdir(bad, 0755), 0);
    ts_join(last, bad, "last.npz");
    char good_last[512];
    ts_join(good_last, good, "last.npz");
    const double inf = HUGE_VAL, nan = strtod("nan", NULL);
    const int64_t big = (int64_t)1 << 62, step = 6;
    const char *w = "decoder.norm.weight", *m = "optim.decoder.norm.weight.exp_avg",
               *v = "optim.decoder.norm.weight.exp_avg_sq", *p = "data.position";
    struct {
        const char *name;
        long index;
        double x;
        int64_t i;
        const char *want;
    } cases[] = {
        /* the library's rules */
        {"train.step", 0, 0, -1, "train.step = -1: must be >= 0"},
        {"train.step", 0, 0, INT64_MIN, "train.step = -9223372036854775808: must be >= 0"},
        {"train.step", 0, 0, big, "train.step = 4611686018427387904: must be <= 9007199254740992"},
        {"train.step", 0, 0, CKPT_MAX_STEP + 1, "train.step = 9007199254740993: must be <="},
        {"rng.state", -1, 0, 0, "rng.state is all zeros"},
        {w, 1, nan, 0, "decoder.norm.weight[1] = nan: must be finite"},
        {w, 0, inf, 0, "decoder.norm.weight[0] = inf: must be finite"},
        {w, 15, -inf, 0, "decoder.norm.weight[15] = -inf: must be finite"},
        {m, 3, nan, 0, "exp_avg[3] = nan: must be finite"},
        {v, 3, -1, 0, "exp_avg_sq[3] (Adam's second moment) = -1: must be >= 0"},
        {v, 3, inf, 0, "exp_avg_sq[3] (Adam's second moment) = inf: must be finite"},
        /* memory: entries far beyond what the model holds */
        {"optim.junk", -2, 0, 8 << 20, "more than a model of"},
        {"meta.extra", -2, 0, (int64_t)CKPT_MAX_EXTRA + 1, "'meta.extra' holds at most"},
        /* the example's data.position, in a checkpoint written before the run loop (the
         * fixture: step 6 of 5 pairs, --batch 2: 3 batches an epoch) */
        {p, EPOCH, 0, -1, "data.position[0] (epoch) = -1: must be >= 0"},
        {p, EPOCH, 0, big, "data.position[0] (epoch) = 4611686018427387904: must be <= 6"},
        {p, EPOCH, 0, 0,
         "epoch 0, cursor 3: with 3 batches an epoch (5 pairs, batch 2) that is "
         "not step 6 (train.step)"},
        {p, CURSOR, 0, -1, "data.position[1] (cursor) = -1: must be >= 0"},
        {p, CURSOR, 0, 7, "data.position: epoch 1, cursor 7: with 3 batches an epoch"},
        {p, CURSOR, 0, big, "data.position[1] (cursor) = 4611686018427387904: must be <="},
        {p, BATCH, 0, 0, "data.position[3] (batch size) = 0: must be >= 1"},
        {p, BATCH, 0, -1, "data.position[3] (batch size) = -1: must be >= 1"},
        {p, BATCH, 0, (1 << 20) + 1, "(batch size) = 1048577: must be <= 1048576"},
        {p, N_TRAIN, 0, 0, "data.position[4] (training pairs) = 0: must be >= 1"},
        {p, BEST_STEP, 0, -1, "(step of best.npz) = -1: must be >= 0"},
        {p, BEST_STEP, 0, step + 1, "(step of best.npz) = 7: must be <= 6"},
        {p, BEST_EXACT, 0, bits(nan), "(best valid exact match) = nan: must be finite"},
        {p, BEST_EXACT, 0, bits(-1), "(best valid exact match) = -1: must be >= 0"},
        {p, BEST_EXACT, 0, bits(2.0), "(best valid exact match) = 2: must be <= 1"},
        {p, BEST_EXACT, 0, bits(inf), "(best valid exact match) = inf: must be finite"},
        {p, BEST_LOSS, 0, bits(nan), "(best valid loss) = nan: must be finite"},
        {p, BEST_LOSS, 0, bits(-1), "(best valid loss) = -1: must be >= 0"},
        {p, BEST_LOSS, 0, bits(-inf), "(best valid loss) = -inf: must be finite"},
        {p, LAST_VALID, 0, -1, "(last validated step) = -1: must be >= 0"},
        {p, LAST_VALID, 0, big, "(last validated step) = 4611686018427387904: must be <= 6"},
        {p, IV_LOSS, 0, bits(nan), "(losses since the last log row) = nan: must be finite"},
        {p, IV_LOSS, 0, bits(-1), "(losses since the last log row) = -1: must be >= 0"},
        {p, IV_NORM, 0, bits(inf), "(gradient norms since the last log row) = inf"},
        {p, IV_STEPS, 0, -1, "(steps since the last log row) = -1: must be >= 0"},
        {p, IV_STEPS, 0, step + 1, "(steps since the last log row) = 7: must be <= 6"},
        {p, IV_TOKENS, 0, -1, "(tokens since the last log row) = -1: must be >= 0"},
        {p, IV_TOKENS, 0, INT64_MAX, "(tokens since the last log row) = 9223372036854775807"},
        {p, LOG_EVERY, 0, 0, "data.position[13] (--log-every) = 0: must be >= 1"},
        {p, LOG_EVERY, 0, (1 << 30) + 1, "(--log-every) = 1073741825: must be <= 1073741824"},
        {p, VALID_EVERY, 0, -1, "(--valid-every) = -1: must be >= 0"}, /* 0: no validation */
        {p, SAVE_EVERY, 0, -1, "(--save-every) = -1: must be >= 0"},
        {p, VALID_MAX, 0, -1, "(--valid-max) = -1: must be >= 0"},
        {p, TOTAL, 0, step - 1, "(--steps) = 5: must be >= 6"},
        {p, TOTAL, 0, big, "(--steps) = 4611686018427387904: must be <= 9007199254740992"},
        {p, CLIP, 0, bits(nan), "(--clip) = nan: must be finite"},
        {p, CLIP, 0, bits(-1), "(--clip) = -1: must be >= 0"},
    };
    ts_join(att, dir, "att");
    ts_join(heads, dir, "heads");
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        /* today's checkpoints keep the run's state as named fields (below) */
        const char *base = cases[k].name == p ? V2_FIXTURE : good_last;
        ts_npz_edit(base, last, cases[k].name, cases[k].index, cases[k].x, cases[k].i);
        const char *cmds[5][16] = {
            {"eval", "--ckpt", last, "--max", "4", train, NULL},
            {"translate", "--ckpt", last, "a b", NULL},
            {"attention", "--ckpt", last, "--out", att, "--no-plot", "a b", NULL},
            {"heads", "--ckpt", last, "--data", train, "--max", "4", "--out", heads, NULL},
            {"train", "--resume", "--out", bad, "--train", train, "--valid", train, "--steps", "8",
             "--quiet", NULL},
        };
        for (int c = 0; c < 5; c++) {
            TsRun r = ts_run(dir, cmds[c], NULL);
            cr_assert_eq(r.code, 2, "%s with %s[%ld] changed: exit %d (2 expected): %s", cmds[c][0],
                         cases[k].name, cases[k].index, r.code, r.err);
            cr_assert(strstr(r.err, cases[k].want) && strstr(r.err, last),
                      "%s: expected '%s' naming %s: %s", cmds[c][0], cases[k].want, last, r.err);
            cr_assert(!strstr(r.err, "last good checkpoint"), "%s", r.err);
            ts_run_free(&r);
        }
    }
    /* the run's named fields (meta.run.*), which train --resume alone reads: each checked */
    const struct {
        const char *name;
        int64_t i;
        const char *want;
    } named[] = {
        {"meta.run.model.epoch", -1, "meta.run.model.epoch = -1: must be an integer in [0, "},
        {"meta.run.model.cursor", 2, "the loader's position, epoch 1, cursor 2: with 5 batches"},
        {"meta.run.model.n_train", 0, "meta.run.model.n_train = 0: must be an integer in [1, "},
        {"meta.run.run.best_step", -1, "meta.run.run.best_step = -1: must be an integer in [0, "},
        {"meta.run.flag.batch", 0, "meta.run.flag.batch = 0: must be an integer in [1, "},
        {"meta.run.flag.log-every", 0, "meta.run.flag.log-every = 0: must be an integer in [1, "},
    };
    for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
        ts_npz_edit(good_last, last, named[k].name, 0, 0, named[k].i);
        const char *args[] = {"train",   "--resume", "--out",   bad, "--train", train,
                              "--valid", train,      "--steps", "8", "--quiet", NULL};
        TsRun r = ts_run(dir, args, NULL);
        cr_assert_eq(r.code, 2, "%s changed: exit %d (2 expected): %s", named[k].name, r.code,
                     r.err);
        cr_assert(strstr(r.err, named[k].want) && strstr(r.err, last),
                  "expected '%s' naming %s: %s", named[k].want, last, r.err);
        ts_run_free(&r);
    }
    /* the untouched checkpoint passes every command */
    const char *ok[] = {"eval", "--ckpt", good_last, "--max", "4", train, NULL};
    TsRun r = ts_run(dir, ok, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* Runs straight (into a), half then resume (into b), each expected to exit 0, then checks that
 * a and b hold the same bytes in each of files and the same log values. Returns the log values
 * (the caller frees them). */
static char *resume_matches_straight(const char *dir, const char *const *straight,
                                     const char *const *half, const char *const *resume,
                                     const char *a, const char *b, const char *const *files,
                                     int n_files) {
    const char *const *runs[] = {straight, half, resume};
    char p1[512], p2[512];
    for (int i = 0; i < 3; i++) {
        TsRun r = ts_run(dir, runs[i], NULL);
        cr_assert_eq(r.code, 0, "run %d: %s", i, r.err);
        ts_run_free(&r);
    }
    for (int i = 0; i < n_files; i++)
        cr_assert(ts_same_file(ts_join(p1, a, files[i]), ts_join(p2, b, files[i])),
                  "%s differs after resume", files[i]);
    /* the logs but for column 5, tokens_per_s (a timing) */
    char *x = ts_csv_drop_column(ts_join(p1, a, "log.csv"), 5),
         *y = ts_csv_drop_column(ts_join(p2, b, "log.csv"), 5);
    cr_assert_str_eq(x, y, "the logs differ");
    free(y);
    return x;
}

/* A resume that repeats no flag (but the data and --steps) gives the straight run's bytes:
 * validation batches with the run's --batch over several batches, and the run's --valid-every,
 * --valid-max, --log-every, --save-every and --clip are kept. */
Test(tr_values, a_resume_without_repeated_flags_is_byte_identical_to_a_straight_run) {
    char dir[64], train[512], valid[512], a[512], b[512];
    ts_tmp_dir(dir, sizeof dir, "values");
    write_copies(ts_join(train, dir, "train.tsv"), 48, 7);
    write_copies(ts_join(valid, dir, "valid.tsv"), 30, 8);
    ts_join(a, dir, "straight");
    ts_join(b, dir, "halves");
#define RUN_FLAGS(o, n)                                                                            \
    "train", "--train", train, "--valid", valid, "--out", o, "--steps", n, "--schedule-steps",     \
        "12", "--valid-every", "3", "--valid-max", "20", "--log-every", "2", "--save-every", "6",  \
        "--clip", "0.5", "--dropout", "0.2", TINY_FLAGS, "--quiet"
    const char *straight[] = {RUN_FLAGS(a, "12"), NULL};
    const char *half[] = {RUN_FLAGS(b, "6"), NULL};
    const char *resume[] = {"train", "--train",  train,     "--valid", valid,     "--out",
                            b,       "--resume", "--steps", "12",      "--quiet", NULL};
    const char *files[] = {"last.npz", "best.npz"};
    char *x = resume_matches_straight(dir, straight, half, resume, a, b, files, 2);
    int rows = 0;
    for (char *q = x; (q = strchr(q, '\n')); q++) rows++;
    cr_assert_eq(rows, 1 + 8, "every 2 steps and at 3, 9 (validations): %s", x);
    free(x);
    ts_rm_tree(dir);
}

/* A run without validation (--no-valid) stays one on resume, even where the data folder has a
 * valid.tsv (it used to validate from then on and write a best.npz the straight run has not):
 * the same last.npz and log as the straight run, and no best.npz. */
Test(tr_values, a_run_without_validation_resumes_without_it) {
    char dir[64], train[512], valid[512], a[512], b[512], path[512];
    ts_tmp_dir(dir, sizeof dir, "values");
    write_copies(ts_join(train, dir, "train.tsv"), 48, 7);
    write_copies(ts_join(valid, dir, "valid.tsv"), 30, 8);
    ts_join(a, dir, "straight");
    ts_join(b, dir, "halves");
#define NO_VALID_FLAGS(o, n)                                                                       \
    "train", "--train", train, "--no-valid", "--out", o, "--steps", n, "--schedule-steps", "12",   \
        "--log-every", "2", "--save-every", "6", TINY_FLAGS, "--quiet"
    const char *straight[] = {NO_VALID_FLAGS(a, "12"), NULL};
    const char *half[] = {NO_VALID_FLAGS(b, "6"), NULL};
    const char *resume[] = {"train", "--train",  train,     "--valid", valid,     "--out",
                            b,       "--resume", "--steps", "12",      "--quiet", NULL};
    const char *files[] = {"last.npz"};
    char *x = resume_matches_straight(dir, straight, half, resume, a, b, files, 1);
    free(x);
    struct stat st;
    cr_assert(stat(ts_join(path, b, "best.npz"), &st) != 0, "the resumed run wrote best.npz");
    ts_rm_tree(dir);
}

/* --resume refuses what it cannot honour: another model or optimizer value (the same value
 * given again is fine), and --steps below the step reached (it used to print "training to
 * step 100" then "done" at step 120, exit 0); it names best.npz only when there is one. */
Test(tr_values, resume_refuses_flags_it_cannot_honour_and_names_best_only_when_there_is_one) {
    char dir[64], train[512], out[512], last[512];
    ts_tmp_dir(dir, sizeof dir, "values");
    write_copies(ts_join(train, dir, "train.tsv"), 40, 9);
    ts_join(out, dir, "run");
    const char *first[] = {"train",   "--train", train,      "--no-valid", "--out", out,
                           "--steps", "6",       TINY_FLAGS, "--quiet",    NULL};
    TsRun r = ts_run(dir, first, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    ts_run_free(&r);
    struct {
        const char *flag, *value, *want;
    } refused[] = {
        {"--steps", "4", "--steps asks for 4 steps, but"},
        {"--lr", "0.5", "--lr 0.5 differs from the checkpoint's (0.001, "},
        {"--d-model", "32", "--d-model 32 differs from the checkpoint's (16)"},
        {"--batch", "4", "--batch 4 differs from the checkpoint's (8, "},
        {"--seed", "9", "--seed 9 differs from the checkpoint's"},
        {"--optim", "sgd", "--optim sgd differs"},
        {"--clip", "0.5", "--clip 0.5 differs from the checkpoint's (1, "},
    };
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        const char *args[] = {"train",          "--train", train,      "--no-valid",
                              "--out",          out,       "--resume", refused[k].flag,
                              refused[k].value, "--quiet", NULL};
        r = ts_run(dir, args, NULL);
        cr_assert_eq(r.code, 2, "%s %s: exit %d: %s", refused[k].flag, refused[k].value, r.code,
                     r.err);
        cr_assert(strstr(r.err, refused[k].want), "expected '%s': %s", refused[k].want, r.err);
        ts_run_free(&r);
    }
    /* the same values again are honoured; a hostile best step names no best.npz */
    ts_join(last, out, "last.npz");
    ts_npz_edit(last, last, "meta.run.run.best_step", 0, 0, 3);
    const char *same[] = {"train",    "--train", train, "--no-valid", "--out", out,
                          "--resume", "--steps", "8",   TINY_FLAGS,   NULL};
    r = ts_run(dir, same, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "done: step 8"), "%s", r.out);
    cr_assert(!strstr(r.out, "best:"), "names a best.npz that does not exist: %s", r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
