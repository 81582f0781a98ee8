/* test_threads.c: the thread policy and kernel family of k_threads.c.
 * The default thread count (OMP_NUM_THREADS when set, else the CPUs of sched_getaffinity up to
 * AG_THREADS_MAX) and ag_threads_use; the kernel family agrees with the GEMM's own choice; and the
 * bounded spin: a program linked with libattograd.a (tests/tools/threads_info, found through
 * AG_THREADS_INFO, which make test sets) is run with chosen environments and libgomp's own
 * report (OMP_DISPLAY_ENV=verbose) says what spin count it took: AG_SPINCOUNT when the user set
 * neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, the user's when set; and the program sees exactly
 * the environment it was given.
 * Not here: that results do not depend on the thread count (each kernel's tests). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor/kernels.h" /* below the public API: kernels called directly */
#include "attograd.h"
#include "files.h"

Test(ag_threads, available_counts_the_cpus_this_process_may_use) {
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    cr_assert_eq(ag_threads_available(), CPU_COUNT(&set));
}

/* --threads above the CPUs: one warning line naming the program, and the count still used */
Test(ag_threads, use_flag_warns_when_more_than_the_cpus, .init = cr_redirect_stderr) {
    int n = ag_threads_available();
    ag_threads_use_flag("prog", n);
    ag_threads_use_flag("prog", 0);
    int used = ag_threads_use_flag("prog", n + 1);
    ag_threads_use(0);
#ifdef _OPENMP
    cr_expect_eq(used, n + 1);
#else
    cr_expect_eq(used, 1);
#endif
    char want[160];
    snprintf(want, sizeof want,
             "prog: warning: --threads %d is more than the %d CPUs this process may use\n", n + 1,
             n);
    fflush(stderr);
    cr_assert_stderr_eq_str(want);
}

Test(ag_threads, default_is_the_available_cpus_capped_without_omp_num_threads) {
    unsetenv("OMP_NUM_THREADS");
    int n = ag_threads_available();
#ifdef _OPENMP
    cr_assert_eq(ag_threads_default(), n < AG_THREADS_MAX ? n : AG_THREADS_MAX);
    cr_assert_eq(ag_threads_use(0), ag_threads_default());
    cr_assert_eq(omp_get_max_threads(), ag_threads_default());
#else
    (void)n;
    cr_assert_eq(ag_threads_default(), 1);
    cr_assert_eq(ag_threads_use(0), 1);
#endif
}

Test(ag_threads, default_honours_omp_num_threads_when_set) {
    setenv("OMP_NUM_THREADS", "3", 1);
#ifdef _OPENMP
    omp_set_num_threads(3); /* what libgomp did with the variable at start-up */
    cr_assert_eq(ag_threads_default(), 3);
    cr_assert_eq(ag_threads_use(0), 3);
#else
    cr_assert_eq(ag_threads_default(), 1);
#endif
}

Test(ag_threads, use_applies_an_explicit_count) {
#ifdef _OPENMP
    cr_assert_eq(ag_threads_use(5), 5);
    cr_assert_eq(omp_get_max_threads(), 5);
    cr_assert_eq(ag_threads_use(1), 1);
#else
    cr_assert_eq(ag_threads_use(5), 1);
#endif
}

Test(ag_threads, use_aborts_on_a_negative_count, .signal = SIGABRT) { ag_threads_use(-1); }

/* the family and the GEMM's micro-kernel come from the same compiler test (k_simd.h) */
Test(ag_kernel_family, agrees_with_the_gemm_kernel) {
    const char *f = ag_kernel_family(), *g = k_gemm_kernel_name();
    cr_assert(strcmp(f, "AVX-512") == 0 || strcmp(f, "AVX2") == 0 || strcmp(f, "portable") == 0,
              "family '%s'", f);
    if (strcmp(g, "openblas") == 0) return; /* make BLAS=openblas: the GEMM is OpenBLAS's */
    cr_assert_str_eq(f, g, "family %s, GEMM kernel %s", f, g);
}

/* ---- the bounded spin, seen from a program linked with libattograd.a ---- */

/* runs threads_info with exactly the environment envs (NULL-terminated); its output in dir */
static TsRun run_info(char **envs, char *dir, size_t n) {
    const char *bin = getenv("AG_THREADS_INFO");
    cr_assert(bin && access(bin, X_OK) == 0,
              "AG_THREADS_INFO is not a program (make test sets it)");
    ts_tmp_dir(dir, n, "threads");
    char out[512], err[512];
    ts_join(out, dir, "stdout.txt");
    ts_join(err, dir, "stderr.txt");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(99);
        dup2(fo, 1);
        dup2(fe, 2);
        char *args[] = {(char *)bin, NULL};
        execve(bin, args, envs);
        _exit(98);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    TsRun r = {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
               ts_read_text(out, NULL), ts_read_text(err, NULL)};
    cr_assert_eq(r.code, 0, "%s exited %d: %s", bin, r.code, r.err);
    return r;
}

/* libgomp's report of the spin count it took, or "" (a build without OpenMP prints none) */
static void spincount(const TsRun *r, char *out, size_t n) {
    const char *p = strstr(r->err, "GOMP_SPINCOUNT = '");
    out[0] = 0;
    if (p) sscanf(p + strlen("GOMP_SPINCOUNT = '"), "%31[0-9]", out);
    (void)n;
}

/* every variable passed, in order, and nothing else */
static void assert_env_unchanged(const TsRun *r, char **envs) {
    const char *p = r->out;
    for (char **e = envs; *e; e++) {
        char line[300];
        snprintf(line, sizeof line, "env %s\n", *e);
        const char *at = strstr(p, line);
        cr_assert(at, "the program does not see '%s' (after the previous variables):\n%s", *e,
                  r->out);
        p = at + strlen(line);
    }
    cr_assert(!strstr(p, "env "), "the program sees more than it was given:\n%s", r->out);
}

#define K_STR_(x) #x
#define K_STR(x) K_STR_(x)

Test(ag_threads_spin, bounded_when_the_user_set_nothing) {
    char *envs[] = {"HOME=/nonexistent", "OMP_DISPLAY_ENV=verbose", "_=/usr/bin/threads_info",
                    "LANG=C", NULL};
    char dir[512], got[32];
    TsRun r = run_info(envs, dir, sizeof dir);
    spincount(&r, got, sizeof got);
#ifdef _OPENMP
    cr_assert_str_eq(got, K_STR(AG_SPINCOUNT), "libgomp took spin count '%s':\n%s", got, r.err);
    cr_assert(strstr(r.out, "wait spin " K_STR(AG_SPINCOUNT) ", then sleep\n"), "%s", r.out);
#else
    cr_assert(strstr(r.out, "wait no threads"), "%s", r.out);
#endif
    assert_env_unchanged(&r, envs);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

#ifdef _OPENMP
Test(ag_threads_spin, the_users_gomp_spincount_wins) {
    char *envs[] = {"_=/usr/bin/threads_info", "GOMP_SPINCOUNT=77", "OMP_DISPLAY_ENV=verbose",
                    NULL};
    char dir[512], got[32];
    TsRun r = run_info(envs, dir, sizeof dir);
    spincount(&r, got, sizeof got);
    cr_assert_str_eq(got, "77", "%s", r.err);
    cr_assert(strstr(r.out, "wait as GOMP_SPINCOUNT / OMP_WAIT_POLICY say\n"), "%s", r.out);
    assert_env_unchanged(&r, envs);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

Test(ag_threads_spin, the_users_wait_policy_wins) {
    char *envs[] = {"OMP_WAIT_POLICY=active", "OMP_DISPLAY_ENV=verbose", "_=/bin/x", NULL};
    char dir[512], got[32];
    TsRun r = run_info(envs, dir, sizeof dir);
    spincount(&r, got, sizeof got);
    cr_assert_str_eq(got, "30000000000", "%s", r.err); /* libgomp's spin for active */
    assert_env_unchanged(&r, envs);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* no `_`: the slot of OLDPWD, SHLVL or PWD (as a program started from python has) */
Test(ag_threads_spin, bounded_with_another_shell_variable) {
    char *envs[] = {"PWD=/tmp", "OMP_DISPLAY_ENV=verbose", "SHLVL=1", NULL};
    char dir[512], got[32];
    TsRun r = run_info(envs, dir, sizeof dir);
    spincount(&r, got, sizeof got);
    cr_assert_str_eq(got, K_STR(AG_SPINCOUNT), "libgomp took spin count '%s':\n%s", got, r.err);
    assert_env_unchanged(&r, envs);
    ts_run_free(&r);
    ts_rm_tree(dir);
}

/* a bare environment (no variable whose slot could be lent): OpenMP's default, and said so */
Test(ag_threads_spin, untouched_without_a_slot_and_said_so) {
    char *envs[] = {"OMP_DISPLAY_ENV=verbose", "HOME=/root", NULL};
    char dir[512], got[32];
    TsRun r = run_info(envs, dir, sizeof dir);
    spincount(&r, got, sizeof got);
    cr_assert_str_eq(got, "300000", "%s", r.err);
    cr_assert(strstr(r.out, "wait OpenMP's default\n"), "%s", r.out);
    assert_env_unchanged(&r, envs);
    ts_run_free(&r);
    ts_rm_tree(dir);
}
#endif
