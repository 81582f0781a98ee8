/* test_translate_threads.c: the translator's thread count, through the program
 * (AG_TRANSLATE_BIN): train prints the kernel family, the thread count and how idle threads
 * wait on one line; --threads above the CPUs this process may use warns and still runs (the
 * results do not depend on it).
 * Not here: the policy itself (tests/tensor/test_threads.c). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "attograd.h"
#include "files.h"

/* a tiny model, one step, no validation: the run is about the lines it prints first */
static TsRun train_with_threads(const char *threads, char *dir, size_t n) {
    char train[512], out[512];
    ts_tmp_dir(dir, n, "threads");
    ts_write_text(ts_join(train, dir, "train.tsv"),
                  "a b c\tx y z\nb c\ty z\nc a\tz x\na c b\tx z y\n");
    ts_join(out, dir, "run");
    const char *args[] = {"train",     "--train", train,      "--no-valid", "--out",
                          out,         "--steps", "1",        "--threads",  threads,
                          "--d-model", "16",      "--heads",  "2",          "--layers",
                          "1",         "--ff",    "32",       "--max-len",  "8",
                          "--batch",   "2",       "--warmup", "0",          NULL};
    return ts_run(dir, args, NULL);
}

Test(translate_threads, train_names_the_kernels_and_the_thread_count) {
    char dir[512], want[160];
    TsRun r = train_with_threads("1", dir, sizeof dir);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    snprintf(want, sizeof want, "kernels: %s, 1 threads (", ag_kernel_family());
    cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
    cr_assert(!strstr(r.err, "warning"), "%s", r.err);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(translate_threads, more_threads_than_cpus_warns_and_runs) {
    char dir[512], want[160], threads[16];
    int n = ag_threads_available() + 1;
    snprintf(threads, sizeof threads, "%d", n);
    TsRun r = train_with_threads(threads, dir, sizeof dir);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    snprintf(want, sizeof want, "warning: --threads %d is more than the %d CPUs", n,
             ag_threads_available());
    cr_assert(strstr(r.err, want), "no '%s' in:\n%s", want, r.err);
#ifdef _OPENMP
    snprintf(want, sizeof want, ", %d threads (", n);
#else
    snprintf(want, sizeof want, ", 1 threads ("); /* built without OpenMP: one thread */
#endif
    cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
