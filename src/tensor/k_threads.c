/* k_threads.c: how many threads the kernels run on, how those threads wait between parallel
 * regions, and which kernel family the build compiled in.
 *
 * Thread count. ag_threads_default: OMP_NUM_THREADS when the user set it, else the CPUs this
 * process may run on (sched_getaffinity: a taskset or a container's cpuset counts), at most
 * AG_THREADS_MAX. ag_threads_use applies a count (0: that default) and returns it.
 *
 * Waiting. A parallel region ends in a barrier; the threads that arrive first wait there for the
 * others, and pool threads wait between regions for the next one. libgomp (GCC's OpenMP) spins
 * GOMP_SPINCOUNT times (300000 when neither it nor OMP_WAIT_POLICY is set: milliseconds) before
 * it sleeps. On a quiet machine that spin is what makes a short region cheap; on a machine where
 * another process wants a core, the spinning thread takes the CPU from the very thread it waits
 * for, and 2 threads run 1.8 times slower than 1 (docs/speed.md, "Threads on a shared
 * machine"). A bounded spin (AG_SPINCOUNT) keeps the quiet speed and sleeps soon enough.
 * libgomp reads GOMP_SPINCOUNT once, in its own constructor, which runs before any constructor
 * of a program, so the library cannot simply setenv. In a program linked with libattograd.a the
 * entry below in .preinit_array runs first of all (before any shared library is initialized)
 * and, when the user set neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY, shows libgomp
 * GOMP_SPINCOUNT=AG_SPINCOUNT. glibc installs the process's environment only after the
 * pre-initializers (its own initialization sets environ to the array the kernel passed), so
 * setenv there is lost; instead the entry borrows, in that array, the slot of one of the
 * variables a shell keeps for itself and no library reads (`_`, the path of the command it
 * runs; else OLDPWD, SHLVL or PWD), and a constructor of ours, which runs after libgomp's, gives
 * the slot back: the program then sees its environment unchanged. Where none of them is set (a
 * program started with a bare environment, env -i), in libattograd.so (.preinit_array is not
 * allowed in a shared object) and in a build without OpenMP, nothing is changed: ag_threads_wait
 * says which case holds, and the user can set GOMP_SPINCOUNT (docs/speed.md).
 *
 * `k_par_min` lives here: every kernel with a parallel region reads it, so a program that can
 * run one links this file and so its .preinit_array entry.
 * Not here: the parallel loops (k_*.c). Read next: k_scratch.c. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT, putenv */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "k_simd.h"
#include "kernels.h"

size_t k_par_min = 16384;

/* ---- kernel family ----
 * k_simd.h's choice: AVX-512 where the compiler targets it (-march=x86-64-v4, or native on such
 * a CPU), AVX2 with FMA (-march=x86-64-v3), otherwise the portable C kernels. k_gemm_kernel_name
 * names the GEMM's, which make BLAS=openblas changes alone. */
const char *ag_kernel_family(void) { return K_SIMD_FAMILY; }

/* ---- thread count ---- */

int ag_threads_available(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int ag_threads_default(void) {
#ifdef _OPENMP
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) return omp_get_max_threads();
    int n = ag_threads_available();
    return n < AG_THREADS_MAX ? n : AG_THREADS_MAX;
#else
    return 1;
#endif
}

int ag_threads_use(int n) {
    AG_CHECK(n >= 0, "ag_threads_use: %d threads (0: the default, ag_threads_default)", n);
#ifdef _OPENMP
    omp_set_num_threads(n > 0 ? n : ag_threads_default());
    return omp_get_max_threads();
#else
    return 1;
#endif
}

int ag_threads_use_flag(const char *prog, int n) {
    AG_CHECK_ARG(prog);
    if (n > ag_threads_available())
        fprintf(stderr, "%s: warning: --threads %d is more than the %d CPUs this process may use\n",
                prog, n, ag_threads_available());
    return ag_threads_use(n);
}

/* ---- how threads wait: the bounded spin (see the top of this file) ---- */

#define K_SPIN_STR_(x) #x
#define K_SPIN_STR(x) K_SPIN_STR_(x)
enum { SPIN_UNTOUCHED, SPIN_LENT };
static int spin_state = SPIN_UNTOUCHED;

#if defined(_OPENMP) && defined(__ELF__) && defined(__GLIBC__) && !defined(AG_SHARED)
static char spin_entry[] = "GOMP_SPINCOUNT=" K_SPIN_STR(AG_SPINCOUNT);
static char *spin_lender; /* the entry whose slot spin_entry holds until spin_give_back */

/* s is "NAME=..." */
static int env_is(const char *s, const char *name) {
    size_t n = strlen(name);
    return strncmp(s, name, n) == 0 && s[n] == '=';
}

/* Before the C library and libgomp are initialized: environ is not set yet, so the array is
 * read through envp, and only pointers in it are changed (nothing is allocated). */
static void spin_preinit(int argc, char **argv, char **envp) {
    (void)argc, (void)argv;
    if (!envp) return;
    static const char *const lenders[] = {"_", "OLDPWD", "SHLVL", "PWD"}; /* preferred first */
    char **lender = NULL;
    int rank = 4;
    for (char **e = envp; *e; e++) {
        if (env_is(*e, "GOMP_SPINCOUNT") || env_is(*e, "OMP_WAIT_POLICY")) return;
        for (int i = 0; i < rank; i++)
            if (env_is(*e, lenders[i])) lender = e, rank = i;
    }
    if (!lender) return;
    spin_lender = *lender;
    *lender = spin_entry;
    spin_state = SPIN_LENT;
}
__attribute__((section(".preinit_array"),
               used)) static void (*spin_preinit_entry)(int, char **, char **) = spin_preinit;

/* After every shared library's constructor, libgomp's included (the program's own constructors
 * run last, this one first among them): the slot goes back to its variable. If a constructor between
 * replaced the environment array (setenv copies it), the entry is found in the copy; if one
 * removed or replaced GOMP_SPINCOUNT itself, the variable is added back. */
__attribute__((constructor(101))) static void spin_give_back(void) {
    extern char **environ;
    if (spin_state != SPIN_LENT) return;
    for (char **e = environ; e && *e; e++)
        if (*e == spin_entry) {
            *e = spin_lender;
            return;
        }
    putenv(spin_lender);
}
#endif

const char *ag_threads_wait(void) {
#ifdef _OPENMP
    if (spin_state == SPIN_LENT) return "spin " K_SPIN_STR(AG_SPINCOUNT) ", then sleep";
    if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY"))
        return "as GOMP_SPINCOUNT / OMP_WAIT_POLICY say";
    return "OpenMP's default";
#else
    return "no threads (built without OpenMP)";
#endif
}
