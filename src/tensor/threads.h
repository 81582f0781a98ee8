/* threads.h: how many threads the kernels run on, and which SIMD family the build compiled
 * in: the part of the kernels a program sets or reports (attograd.h exports it; the kernels
 * themselves, kernels.h, are internal). Not here: the kernels. Read next: k_threads.c. */
#ifndef ATTOGRAD_THREADS_H
#define ATTOGRAD_THREADS_H

/* ag_threads_default: OMP_NUM_THREADS when set, else the CPUs this process may run on
 * (sched_getaffinity), at most AG_THREADS_MAX (1 without OpenMP). ag_threads_use(n) runs the
 * kernels on n threads (0: ag_threads_default) and returns the count in use. Any count gives
 * the same bits. ag_threads_available: the CPUs this process may run on.
 * ag_threads_wait: how idle threads wait, in words ("spin 1000, then sleep": the bound that a
 * program linked with libattograd.a gives libgomp when the user set neither GOMP_SPINCOUNT nor
 * OMP_WAIT_POLICY; see k_threads.c and docs/speed.md).
 * ag_kernel_family: "AVX-512", "AVX2" or "portable", the SIMD family the build compiled in. */
#define AG_THREADS_MAX 8
#define AG_SPINCOUNT 1000
int ag_threads_available(void);
int ag_threads_default(void);
int ag_threads_use(int n);
const char *ag_threads_wait(void);
const char *ag_kernel_family(void);

#endif
