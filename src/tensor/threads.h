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
/* ag_threads_use(n) for a program's --threads N: when n is more than ag_threads_available(),
 * first a line on stderr, "PROG: warning: --threads N is more than the C CPUs this process may
 * use" (prog: the program's name; the count still runs, with the same bits). */
int ag_threads_use_flag(const char *prog, int n);
const char *ag_threads_wait(void);
const char *ag_kernel_family(void);

/* The precision of the matrix products of a step (the Linear layers' and ag_matmul's, forward
 * and backward): AG_PRECISION_FP32 (the default), or AG_PRECISION_BF16: their operands rounded
 * to bf16 and the products summed in fp32 (k_gemm_bf16.c), and so attention's products (q k^T,
 * P v and their backward's: k_attention.c); weights, gradients, the optimizer, norms, softmax
 * and the loss stay in the build's Real. ag_precision_use(p) sets it
 * for every following product and returns AG_OK, or AG_ERR_ARG (nothing changed) for bf16 in
 * the double build (which stays exact for gradient checks) and in make BLAS=openblas's. ag_precision_bf16_unit: "vdpbf16ps"
 * when the build runs AVX512_BF16's instruction, else "emulated" (the same bits, slower). */
enum { AG_PRECISION_FP32 = 0, AG_PRECISION_BF16 = 1 };
int ag_precision_use(int precision);
int ag_precision(void);
const char *ag_precision_bf16_unit(void);
/* Under bf16 the optimizer's step keeps a packed bf16 copy of each weight that the products
 * read (k_gemm_bf16.c). Every library writer of a parameter's data (loaders, initialisers,
 * tensor_fill, tensor_copy_from_*) calls ag_params_written, which makes every copy stale until
 * the next step; code that writes a parameter's data itself between steps must call it too. */
void ag_params_written(void);

#endif
