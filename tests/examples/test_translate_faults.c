/* test_translate_faults.c: the trainer of the translation example under faults. Each case runs
 * the program (AG_TRANSLATE_BIN, set by the Makefile) and checks the exit code, that the error
 * names the path and the reason, and that the checkpoints and the log written before the fault
 * are still there byte for byte and load:
 *   - a diverging run (SGD at lr 1e3) stops at the first non-finite loss naming the step, and
 *     with --check-finite the op, its node and the tensor; last.npz is the step before;
 *   - a read-only output folder (chmod when not root; as root, a read-only bind mount in a
 *     private mount namespace, since root writes through chmod);
 *   - a full disk (a tiny tmpfs in a private mount namespace, as root or, in a user namespace,
 *     as another user; the injected ENOSPC case runs everywhere);
 *   - a checkpoint path that is a folder, and an output folder under a regular file;
 *   - kill -9 at random moments, then --resume: the same final checkpoints, to the byte, and the
 *     same log as a run never interrupted.
 * A case that cannot run here (no namespace for a mount) is reported as skipped, with the reason.
 * SIGINT and SIGTERM (save, message, exit 130 / 143) are in test_translate.c. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/npz_internal.h"
#include "files.h"
#include "translate.h"
#include "translate_run.h"

/* ---- running the program ---- */

/* The step a checkpoint holds; it must load and hold finite weights. */
static int64_t ckpt_step(const char *path) {
    Translator tr;
    cr_assert_eq(tr_load(&tr, path), AG_OK, "%s", ag_last_error());
    int64_t s = tr.trained_steps;
    for (int i = 0; i < tr.model.params.n; i++) {
        const Tensor *p = tr.model.params.items[i];
        for (size_t k = 0; k < p->size; k++)
            cr_assert(isfinite((double)p->data[k]), "%s holds a non-finite weight", path);
    }
    tr_free(&tr);
    return s;
}

/* The steps of the log's rows; checks the header and that every row is whole and in order
 * (but for a last row cut short, when partial_ok: a write that failed half way). */
static int log_rows_p(const char *path, int64_t *last_step, int partial_ok) {
    char *text = ts_slurp(path, NULL);
    cr_assert(text != NULL, "%s: %s", path, strerror(errno));
    const char *head = "step,epoch,train_loss,lr,grad_norm,tokens_per_s,valid_loss,valid_exact\n";
    cr_assert(strncmp(text, head, strlen(head)) == 0, "%s: %s", path, text);
    size_t len = strlen(text);
    if (partial_ok)
        while (len > 0 && text[len - 1] != '\n') text[--len] = '\0';
    cr_assert(len > 0 && text[len - 1] == '\n', "%s ends with a partial row: %s", path, text);
    int rows = 0;
    long long prev = 0;
    for (char *line = strchr(text, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        long long s;
        int commas = 0;
        for (char *p = line; *p != '\n'; p++) commas += *p == ',';
        cr_assert(sscanf(line, "%lld,", &s) == 1 && s > prev && commas == 7, "%s: bad row in %s",
                  path, text);
        prev = s;
        rows++;
    }
    free(text);
    if (last_step) *last_step = prev;
    return rows;
}

static int log_rows(const char *path, int64_t *last_step) { return log_rows_p(path, last_step, 0); }

/* Files of the output folder kept byte for byte before a fault. */
typedef struct {
    const char *name;
    char *bytes;
    size_t len;
} Kept;

static void keep(Kept *k, int n, const char *out) {
    char p[512];
    for (int i = 0; i < n; i++) {
        k[i].bytes = ts_slurp(ts_join(p, out, k[i].name), &k[i].len);
        cr_assert(k[i].bytes != NULL, "%s: %s", p, strerror(errno));
    }
}

static void expect_kept(Kept *k, int n, const char *out, const char *what) {
    char p[512];
    for (int i = 0; i < n; i++) {
        size_t len;
        char *now = ts_slurp(ts_join(p, out, k[i].name), &len);
        cr_assert(now != NULL, "%s: %s is gone", what, p);
        cr_assert(len == k[i].len && memcmp(now, k[i].bytes, len) == 0, "%s: %s changed", what, p);
        free(now);
        free(k[i].bytes);
    }
}

#define TINY_FLAGS                                                                                 \
    "--threads", "1", "--d-model", "16", "--heads", "2", "--layers", "1", "--ff", "32",            \
        "--max-len", "24", "--batch", "8", "--warmup", "2", "--quiet"

/* A first run of 10 steps with validation: out holds last.npz, best.npz and log.csv. */
static void first_run(const char *dir, const char *train, const char *out) {
    const char *args[] = {"train", "--train",     train, "--valid",       train, "--out",
                          out,     "--steps",     "10",  "--valid-every", "10",  "--log-every",
                          "2",     "--valid-max", "8",   TINY_FLAGS,      NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 0, "first run: exit %d: %s", r.code, r.err);
    ts_run_free(&r);
}

/* Resumes the run in out up to step 20, validating and saving every 5 steps */
static TsRun resume(const char *dir, const char *train, const char *out) {
    const char *args[] = {"train",
                          "--train",
                          train,
                          "--valid",
                          train,
                          "--out",
                          out,
                          "--resume",
                          "--steps",
                          "20",
                          "--valid-every",
                          "5",
                          "--save-every",
                          "5",
                          "--valid-max",
                          "8",
                          "--quiet",
                          NULL};
    return ts_run(dir, args, NULL);
}

/* Resumes the run in out up to step 20 and expects it to fail naming want_path and reason. */
static void resume_fails(const char *dir, const char *train, const char *out, const char *want_path,
                         const char *reason, int want_code) {
    TsRun r = resume(dir, train, out);
    cr_assert_eq(r.code, want_code, "exit %d: %s", r.code, r.err);
    char want[700];
    snprintf(want, sizeof want, "attograd-translate train: %s", want_path);
    cr_assert(strstr(r.err, want) != NULL, "the error does not name %s: %s", want_path, r.err);
    cr_assert(strstr(r.err, reason) != NULL, "the error does not say '%s': %s", reason, r.err);
    ts_run_free(&r);
}

/* ---- a diverging run ---- */

Test(tr_faults, a_diverging_run_names_the_step_and_in_check_mode_the_op) {
    char dir[64], train[512], out[512], last[512];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 64, 0, 41, 2, 6, 6);
    ts_join(out, dir, "run");
    ts_join(last, out, "last.npz");
    for (int check = 0; check < 2; check++) {
        const char *args[] = {"train",
                              "--train",
                              train,
                              "--no-valid",
                              "--out",
                              out,
                              "--force",
                              "--steps",
                              "200",
                              "--save-every",
                              "1",
                              "--optim",
                              "sgd",
                              "--lr",
                              "1e3",
                              "--clip",
                              "0",
                              TINY_FLAGS,
                              check ? "--check-finite" : NULL,
                              NULL};
        TsRun r = ts_run(dir, args, NULL);
        cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
        const char *m = strstr(r.err, "train: step ");
        cr_assert(m != NULL, "%s", r.err);
        long long step = atoll(m + strlen("train: step "));
        cr_assert(step > 1 && step < 200, "%s", r.err);
        cr_assert(strstr(r.err, ": the training loss is nan: training stopped. The last good "
                                "checkpoint is ") ||
                      strstr(r.err, ": the training loss is inf: training stopped.") ||
                      strstr(r.err, ": the gradient norm is "),
                  "%s", r.err);
        cr_assert(strstr(r.err, last), "%s", r.err);
        cr_assert_eq(ckpt_step(last), step - 1, "%s", r.err);
        if (!check) {
            cr_assert(strstr(r.err, "run with --check-finite"), "%s", r.err);
        } else {
            /* "the first non-finite value: forward of node 32 (linear): its output 'linear'
             * (8,3,16) holds inf at element 0; from finite inputs ..." */
            const char *f = strstr(r.err, "the first non-finite value: ");
            cr_assert(f != NULL, "%s", r.err);
            int node = 0;
            char dirn[16], op[32];
            cr_assert(sscanf(f + strlen("the first non-finite value: "),
                             "%15s of node %d (%31[^)])", dirn, &node, op) == 3,
                      "%s", r.err);
            cr_assert(node >= 1 && (strcmp(dirn, "forward") == 0 || strcmp(dirn, "backward") == 0),
                      "%s", r.err);
            int known = 0;
            for (int k = 0; k < AG_OP_COUNT; k++) known |= strcmp(op, ag_op_name((AgOp)k)) == 0;
            cr_assert(known, "'%s' is not an op: %s", op, r.err);
            cr_assert(strstr(f, " holds ") && strstr(f, " at element "), "%s", r.err);
        }
        ts_run_free(&r);
    }
    /* a poisoned weight: check mode names the op that read it and the weight */
    const char *poison[] = {
        "train",    "--train", train,          "--no-valid", "--out",        out, "--force",
        "--steps",  "20",      "--save-every", "5",          "--inject-nan", "7", "--check-finite",
        TINY_FLAGS, NULL};
    TsRun r = ts_run(dir, poison, NULL);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "attograd-translate train: step 7: the training loss is nan"), "%s",
              r.err);
    cr_assert(strstr(r.err, "(layernorm): its output 'layernorm' (8,"), "%s", r.err);
    cr_assert(strstr(r.err, "its input 1 'decoder.norm.weight' (16) already held nan at element 0"),
              "%s", r.err);
    cr_assert_eq(ckpt_step(last), 5);
    ts_run_free(&r);
    /* the same with 2 shards: the shards' tapes are gone by the end of the step; the trainer
     * runs them again to name the op */
    const char *sharded[] = {
        "train",    "--train", train,          "--no-valid", "--out",    out, "--force",
        "--steps",  "20",      "--inject-nan", "7",          "--shards", "2", "--check-finite",
        TINY_FLAGS, NULL};
    r = ts_run(dir, sharded, NULL);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, "attograd-translate train: step 7: the training loss is nan"), "%s",
              r.err);
    cr_assert(strstr(r.err, "its input 1 'decoder.norm.weight' (16) already held nan at element 0"),
              "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* ---- failed writes ---- */

/* As root, chmod does not stop writes: bind the folder read-only on itself in a private mount
 * namespace of this test's process (the program inherits it). 0, or -1 with the reason. */
static int make_read_only(const char *path, char *why, size_t n) {
    char p[256];
    snprintf(p, sizeof p, "%.200s", path);
    if (geteuid() != 0) {
        if (chmod(path, 0555) == 0) return 0;
        snprintf(why, n, "chmod %.180s: %.40s", p, strerror(errno));
        return -1;
    }
    char ns[200];
    if (ts_private_mounts(ns, sizeof ns) != 0) {
        snprintf(why, n, "running as root, and %s", ns);
        return -1;
    }
    if (mount(path, path, NULL, MS_BIND, NULL) != 0 ||
        mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0) {
        snprintf(why, n, "running as root, and no read-only bind mount here: %s", strerror(errno));
        return -1;
    }
    return 0;
}

Test(tr_faults, a_read_only_folder_fails_naming_the_path_and_keeps_checkpoints_and_log) {
    char dir[64], train[512], out[512], csv[512], why[256];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 42, 2, 6, 6);
    ts_join(out, dir, "run");
    first_run(dir, train, out);
    Kept k[] = {{"last.npz", 0, 0}, {"best.npz", 0, 0}, {"log.csv", 0, 0}};
    keep(k, 3, out);
    if (make_read_only(out, why, sizeof why) != 0) {
        ts_rm_tree(dir);
        cr_skip_test("read-only folder: SKIPPED: %s", why);
    }
    ts_join(csv, out, "log.csv");
    char p[512];
    if (geteuid() == 0) {
        /* the first write of a resumed run is the log (opened to append) */
        resume_fails(dir, train, out, csv, strerror(EROFS), 1);
        expect_kept(k, 3, out, "read-only folder");
        cr_assert_eq(log_rows(csv, NULL), 5);
    } else {
        /* the log is a writable file in a folder where no file can be created: it grows, and
         * the first checkpoint save fails */
        char prefix[520];
        snprintf(prefix, sizeof prefix, "%s/", out);
        resume_fails(dir, train, out, prefix, strerror(EACCES), 1);
        expect_kept(k, 2, out, "read-only folder");
        free(k[2].bytes);
        cr_assert_geq(log_rows(csv, NULL), 5);
    }
    cr_assert_eq(ckpt_step(ts_join(p, out, "last.npz")), 10);
    cr_assert_eq(ckpt_step(ts_join(p, out, "best.npz")), 10);
    if (geteuid() == 0)
        umount2(out, MNT_DETACH);
    else
        chmod(out, 0755);
    ts_rm_tree(dir);
}

/* Fills the file system of dir: a file grows until a write fails (ENOSPC). */
static void fill_up(const char *dir) {
    char p[512];
    int fd = open(ts_join(p, dir, "filler"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "%s: %s", p, strerror(errno));
    static char zeros[4096];
    while (write(fd, zeros, sizeof zeros) > 0) continue;
    cr_assert_eq(errno, ENOSPC, "filling %s: %s", p, strerror(errno));
    while (write(fd, zeros, 1) > 0) continue; /* the last partial block */
    close(fd);
}

Test(tr_faults, a_full_disk_fails_naming_the_path_and_keeps_checkpoints_and_log) {
    char dir[64], train[512], out[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 43, 2, 6, 6);
    /* out is the 2 MiB tmpfs, as /proc/<holder>/root/tmp/attograd-faults.../run */
    char run[512], why[256];
    ts_join(run, dir, "run");
    cr_assert_eq(mkdir(run, 0755), 0);
    int holder = ts_hold_tmpfs(run, "2m", out, why, sizeof why);
    if (holder < 0) {
        ts_rm_tree(dir);
        cr_skip_test("full disk: SKIPPED: %s (the injected ENOSPC test covers the logic)", why);
    }
    first_run(dir, train, out);
    /* loss.png and loss.gp are redrawn when they can be; they are not kept */
    Kept k[] = {{"last.npz", 0, 0}, {"best.npz", 0, 0}, {"log.csv", 0, 0}};
    keep(k, 3, out);
    fill_up(out);
    /* the log may take one more row in its last block; the first save fails */
    TsRun r = resume(dir, train, out);
    cr_assert_eq(r.code, 1, "exit %d: %s", r.code, r.err);
    cr_assert(strstr(r.err, strerror(ENOSPC)), "%s", r.err);
    char want[700];
    snprintf(want, sizeof want, "attograd-translate train: %s/", out);
    cr_assert(strstr(r.err, want), "the error does not name a file in %s: %s", out, r.err);
    cr_assert(strstr(r.err, "the last good checkpoint is ") &&
                  strstr(r.err, "(step 10), unchanged"),
              "%s", r.err);
    ts_run_free(&r);
    expect_kept(k, 2, out, "full disk");
    cr_assert_eq(ckpt_step(ts_join(p, out, "last.npz")), 10);
    cr_assert_eq(ckpt_step(ts_join(p, out, "best.npz")), 10);
    int64_t last_row;
    int rows = log_rows_p(ts_join(p, out, "log.csv"), &last_row, 1);
    cr_assert(rows >= 5, "the log lost rows: %d", rows);
    char *text = ts_slurp(ts_join(p, out, "log.csv"), NULL);
    cr_assert(strncmp(text, k[2].bytes, k[2].len) == 0, "the log's first rows changed");
    free(text);
    free(k[2].bytes);
    /* space again: the run resumes and completes, the log continues after step 10 */
    unlink(ts_join(p, out, "filler"));
    r = resume(dir, train, out);
    cr_assert_eq(r.code, 0, "after freeing space: exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    cr_assert_eq(ckpt_step(ts_join(p, out, "last.npz")), 20);
    /* 2..10 every 2 (the first run), then 12..20 every 2 (--log-every 2 is kept on resume)
     * and 15 (a validation) */
    cr_assert_eq(log_rows(ts_join(p, out, "log.csv"), &last_row), 11);
    cr_assert_eq(last_row, 20);
    ts_release_tmpfs(holder);
    ts_rm_tree(dir);
}

/* The same without root: the checkpoint's write fails with an injected ENOSPC (in this
 * process, through tr_train), after 100 bytes of the temporary file. The loss plot drawn at the
 * end of the failed run must not replace that error, whether gnuplot is missing (the plot is
 * skipped) or fails (AG_GNUPLOT names /bin/false): both are tried, on any machine. */
Test(tr_faults, an_injected_full_disk_keeps_the_previous_checkpoint) {
    char dir[64], train[512], out[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 44, 2, 6, 6);
    TsTrainConfig c = ts_train_defaults();
    c.train_path = train;
    c.valid_path = NULL;
    c.out_dir = ts_join(out, dir, "run");
    c.model.layer.d_model = 16;
    c.model.layer.n_heads = c.model.layer.n_kv_heads = 2;
    c.model.layer.d_ff = 32;
    c.model.n_enc_layers = c.model.n_dec_layers = 1;
    c.model.max_len = 24;
    c.optim.schedule.warmup = 2;
    c.batch = 8;
    c.steps = 10;
    c.log_every = 2;
    c.valid_every = 5;
    c.verbose = 0;
    c.threads = 1;
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    c.resume = 1;
    c.steps = 20;
    ts_join(p, out, "last.npz");
    const char *gnuplot[] = {"/nonexistent/gnuplot", "/bin/false"};
    for (int g = 0; g < 2; g++) {
        Kept k[] = {{"last.npz", 0, 0}};
        keep(k, 1, out);
        cr_assert_eq(setenv("AG_GNUPLOT", gnuplot[g], 1), 0);
        npz_test_set_fault(NPZ_FAULT_WRITE, ENOSPC, 100);
        cr_assert_eq(ts_train(&c), TR_EXIT_FAIL, "AG_GNUPLOT=%s", gnuplot[g]);
        npz_test_set_fault(NPZ_FAULT_NONE, 0, 0);
        const char *msg = ag_last_error();
        cr_assert(strncmp(msg, p, strlen(p)) == 0, "AG_GNUPLOT=%s: %s", gnuplot[g], msg);
        cr_assert(strstr(msg, strerror(ENOSPC)), "AG_GNUPLOT=%s: %s", gnuplot[g], msg);
        expect_kept(k, 1, out, "injected ENOSPC");
        cr_assert_eq(ckpt_step(p), 10);
    }
    cr_assert_eq(unsetenv("AG_GNUPLOT"), 0);
    /* no temporary file is left, and the run resumes from step 10 */
    DIR *d = opendir(out);
    for (struct dirent *e; (e = readdir(d));)
        cr_assert(strstr(e->d_name, ".tmp.") == NULL, "left behind: %s", e->d_name);
    closedir(d);
    cr_assert_eq(ts_train(&c), TR_EXIT_OK, "%s", ag_last_error());
    cr_assert_eq(ckpt_step(p), 20);
    int64_t last_row;
    cr_assert_eq(log_rows(ts_join(p, out, "log.csv"), &last_row), 10);
    cr_assert_eq(last_row, 20);
    ts_rm_tree(dir);
}

Test(tr_faults, a_checkpoint_path_that_is_a_folder_fails_and_keeps_the_rest) {
    char dir[64], train[512], out[512], best[512], p[512];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 40, 0, 45, 2, 6, 6);
    ts_join(out, dir, "run");
    first_run(dir, train, out);
    /* best.npz is now a folder (with a file in it): the next best save cannot replace it */
    ts_join(best, out, "best.npz");
    cr_assert_eq(unlink(best), 0);
    cr_assert_eq(mkdir(best, 0755), 0);
    ts_write_text(ts_join(p, best, "keep.txt"), "not a checkpoint\n");
    Kept k[] = {{"last.npz", 0, 0}};
    keep(k, 1, out);
    /* the resumed run validates at step 15: a best model, whose save fails */
    resume_fails(dir, train, out, best, "not a regular file (a folder): not replaced", 1);
    expect_kept(k, 1, out, "best.npz is a folder");
    cr_assert_eq(ckpt_step(ts_join(p, out, "last.npz")), 10);
    int64_t last_row;
    log_rows(ts_join(p, out, "log.csv"), &last_row);
    cr_assert(last_row >= 10 && last_row <= 15, "last row %lld", (long long)last_row);
    char *text = ts_slurp(ts_join(p, best, "keep.txt"), NULL);
    cr_assert_str_eq(text, "not a checkpoint\n");
    free(text);
    /* an output folder under a regular file: usage error (2) naming the folder */
    char file[512], under[512];
    ts_write_text(ts_join(file, dir, "a-file"), "x\n");
    ts_join(under, file, "run");
    const char *args[] = {"train", "--train", train, "--no-valid", "--out",
                          under,   "--steps", "5",   TINY_FLAGS,   NULL};
    TsRun r = ts_run(dir, args, NULL);
    cr_assert_eq(r.code, 2, "exit %d: %s", r.code, r.err);
    char want[700];
    snprintf(want, sizeof want, "attograd-translate train: %s: cannot create the folder: %s", under,
             strerror(ENOTDIR));
    cr_assert(strstr(r.err, want), "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* ---- kill -9, then --resume ---- */

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

Test(tr_faults, kill_9_at_random_moments_then_resume_gives_the_same_checkpoints_and_log) {
    char dir[64], train[512], straight[512], out[512], p1[512], p2[512];
    ts_tmp_dir(dir, sizeof dir, "faults");
    ts_write_copy_task(ts_join(train, dir, "train.tsv"), 64, 0, 46, 2, 6, 6);
    /* dropout on: the RNG state must be restored too; saves every 7 steps, validation every
     * 10 (a kill may land in a save, a validation or a log row) */
#define KILL_FLAGS(o)                                                                              \
    "train", "--train", train, "--valid", train, "--out", o, "--steps", "60", "--dropout", "0.2",  \
        "--valid-every", "10", "--save-every", "7", "--log-every", "1", "--valid-max", "8",        \
        TINY_FLAGS
    const char *a[] = {KILL_FLAGS(ts_join(straight, dir, "straight")), NULL};
    double t0 = now_s();
    TsRun r = ts_run(dir, a, NULL);
    double t_run = now_s() - t0;
    cr_assert_eq(r.code, 0, "%s", r.err);
    ts_run_free(&r);
    Rng rng;
    rng_seed(&rng, (uint64_t)time(NULL));
    int killed = 0;
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "killed%d", round);
        ts_join(out, dir, name);
        const char *b[] = {KILL_FLAGS(out), NULL};
        pid_t pid = ts_start(dir, b, NULL);
        double delay = t_run * (0.1 + 0.8 * rng_uniform(&rng));
        struct timespec ts = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        r = ts_finish(dir, pid);
        killed += r.code == 128 + SIGKILL;
        ts_run_free(&r);
        /* resume (or start again if the kill came before the first save) */
        char last[512];
        struct stat st;
        int have = stat(ts_join(last, out, "last.npz"), &st) == 0;
        const char *resume[] = {KILL_FLAGS(out), have ? "--resume" : "--force", NULL};
        r = ts_run(dir, resume, NULL);
        cr_assert_eq(r.code, 0, "round %d: resume after kill -9 at %.3f s: %s", round, delay,
                     r.err);
        ts_run_free(&r);
        const char *files[] = {"last.npz", "best.npz"};
        for (int i = 0; i < 2; i++)
            cr_assert(ts_same_file(ts_join(p1, straight, files[i]), ts_join(p2, out, files[i])),
                      "round %d (kill at %.3f s of %.3f): %s differs from the uninterrupted run",
                      round, delay, t_run, files[i]);
        /* the logs but for column 5, tokens_per_s (a timing) */
        char *x = ts_csv_drop_column(ts_join(p1, straight, "log.csv"), 5),
             *y = ts_csv_drop_column(ts_join(p2, out, "log.csv"), 5);
        cr_assert_str_eq(x, y, "round %d: the logs differ", round);
        free(x);
        free(y);
        /* no temporary file of an interrupted save is left */
        DIR *d = opendir(out);
        for (struct dirent *e; (e = readdir(d));)
            cr_assert(strstr(e->d_name, ".tmp.") == NULL, "left behind: %s", e->d_name);
        closedir(d);
    }
    cr_assert_gt(killed, 0, "every run finished before its kill: the test proved nothing");
    ts_rm_tree(dir);
}
