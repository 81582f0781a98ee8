/* test_classify.c: examples/classify (AG_CLASSIFY_BIN, which make test sets), the README's
 * "write your own model" program, run whole: it learns its task; killed (SIGKILL) in the middle
 * of a run and resumed with `--out DIR --resume` alone, it writes the bytes of a run never
 * killed (last.npz, best.npz, log.csv but for tokens/s); a changed model flag on --resume is
 * refused, named; eval reads the best checkpoint back.
 * Not here: the run loop's own tests (test_run.c), mpirun (tests/dist/test_mpi.sh). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "attograd.h"
#include "files.h"

static TsRun run(const char *dir, const char *const *args) {
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
    char dir[64], a[512], b[512], p[512], q[512];
    ts_tmp_dir(dir, sizeof dir, "classify");
    ts_join(a, dir, "straight");
    ts_join(b, dir, "killed");
    TsRun r = run(dir, (const char *[]){"--out", a, "--steps", "600", "--save-every", "20", SMALL,
                                        NULL});
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    int pid = ts_start_env("AG_CLASSIFY_BIN", dir,
                           (const char *[]){"--out", b, "--steps", "600", "--save-every", "20",
                                            SMALL, NULL},
                           NULL);
    ts_join(p, b, "log.csv");
    for (int i = 0; i < 3000 && log_rows(p) < 5; i++) /* at most 30 s */
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    kill(pid, SIGKILL);
    r = ts_finish(dir, pid);
    cr_assert_eq(r.code, 128 + SIGKILL, "the run ended before it was killed: exit %d", r.code);
    ts_run_free(&r);
    r = run(dir, (const char *[]){"--out", b, "--resume", NULL});
    cr_assert_eq(r.code, 0, "resume: exit %d: %s", r.code, r.err);
    ts_run_free(&r);
    const char *files[] = {"last.npz", "best.npz"};
    for (int i = 0; i < 2; i++)
        cr_assert(ts_same_file(ts_join(p, a, files[i]), ts_join(q, b, files[i])), "%s differs",
                  files[i]);
    char *la = ts_csv_drop_column(ts_join(p, a, "log.csv"), 4);
    char *lb = ts_csv_drop_column(ts_join(q, b, "log.csv"), 4);
    cr_assert_str_eq(la, lb);
    /* it learned: the last row's valid accuracy */
    cr_assert(strtod(strrchr(la, ',') + 1, NULL) > 0.8, "valid accuracy: %s", strrchr(la, ','));
    free(la), free(lb);
    /* a changed model flag is refused, named; eval reads best.npz */
    r = run(dir, (const char *[]){"--out", b, "--resume", "--heads", "2", "--steps", "700", NULL});
    cr_assert(r.code == 2 && strstr(r.err, "--heads 2 differs from the checkpoint's (4"), "%d %s",
              r.code, r.err);
    ts_run_free(&r);
    r = run(dir, (const char *[]){"eval", "--out", b, NULL});
    cr_assert(r.code == 0 && strstr(r.out, "best.npz: step ") && strstr(r.out, "valid accuracy"),
              "%d %s %s", r.code, r.out, r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
