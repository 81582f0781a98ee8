/* kernels.h: every math loop of attograd, as forward/backward pairs on raw arrays.
 * Kernels know nothing of tensors or tapes: they take pointers and sizes (B, T, C, NH, HS ...).
 * Backward kernels accumulate (+=) into gradients, so a tensor used twice gets the sum. A few
 * take a `store` flag: set, they write (=) that gradient whole instead (the tape hands them a
 * new, unset buffer and so spares zeroing it; ../autograd/tape.c).
 * Threads: `#pragma omp` only here, only on loops where each output element is written by one
 * thread, and every reduction runs in a fixed order inside one thread, so results are
 * bit-identical for any OMP_NUM_THREADS. A gradient pointer may be NULL: that input needs none.
 * Not here: shape checks (the ag_ ops do them). Read next: k_elementwise.c. */
#ifndef ATTOGRAD_KERNELS_H
#define ATTOGRAD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor.h"
#include "threads.h"

/* Below this many elements a loop runs on one thread: starting threads costs more.
 * A variable so that tests can set it to 1 and split even tiny loops across threads
 * (defined in k_threads.c). */
extern size_t k_par_min;
#define K_PAR_MIN k_par_min

/* Inside a parallel region: this thread's number *t and the team's size *T (0 and 1 outside
 * one, and without OpenMP). */
static inline void k_team(int *t, int *T) {
#ifdef _OPENMP
    *t = omp_get_thread_num();
    *T = omp_get_num_threads();
#else
    *t = 0;
    *T = 1;
#endif
}

/* Thread t of T's slice [*lo, *hi) of the i-th of several arrays of n elements each, for the
 * kernels that run one parallel region over many arrays (Adam, zeroing gradients) with no
 * barrier between them: an array of fewer than 4096 goes whole to thread i % T, a larger one is
 * cut at multiples of 16 elements. Which thread gets what never changes a value. */
static inline void k_team_slice(int i, size_t n, int t, int T, size_t *lo, size_t *hi) {
    *lo = *hi = 0;
    if (n < 4096) {
        if (i % T == t) *hi = n;
        return;
    }
    size_t units = (n + 15) / 16;
    *lo = units * (size_t)t / (size_t)T * 16;
    *hi = units * (size_t)(t + 1) / (size_t)T * 16;
    if (*hi > n) *hi = n;
}

/* ---- per-thread scratch (k_scratch.c) ----
 * n Reals, 64-byte aligned, owned by the calling thread: the same buffer comes back on its next
 * call with the same slot (grown when n is larger), so a kernel may use it inside a parallel
 * region, each thread its own. Freed when the thread ends. One slot per kernel family, so that
 * a kernel's scratch survives the calls it makes to another. */
enum {
    K_SCRATCH_GEMM,
    K_SCRATCH_ATTENTION,
    K_SCRATCH_LAYERNORM,
    K_SCRATCH_REDUCE,
    K_SCRATCH_ROWS, /* a few rows of a row-wise kernel (LayerNorm's x + f) */
    K_SCRATCH_BF16, /* k_gemm_bf16.c's packed pairs */
    K_SCRATCH_SLOTS
};
Real *k_thread_scratch(int slot, size_t n);

/* ---- rng.h's counter hash, inline ----
 * splitmix64's step (Steele, Lea and Flood 2014), and rng_hash(key, counter) built on it
 * (rng.c's rng_hash and rng_seed call these): inline, a kernel's loop over elements (dropout)
 * runs the hash in vector lanes, where a call per element kept it scalar. */
static inline uint64_t k_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t k_hash(uint64_t key, uint64_t counter) {
    uint64_t x = key ^ (counter * 0xD1B54A32D192ED03ull);
    return k_splitmix64(&x);
}

/* ---- elementwise, n elements (k_elementwise.c) ---- */
void k_add_forward(Real *y, const Real *a, const Real *b, size_t n);
/* store: bit 0 writes ga, bit 1 gb, instead of adding to them */
void k_add_backward(Real *ga, Real *gb, const Real *gy, size_t n, unsigned store);
void k_sub_forward(Real *y, const Real *a, const Real *b, size_t n);
/* store as k_add_backward's */
void k_sub_backward(Real *ga, Real *gb, const Real *gy, size_t n, unsigned store);
void k_mul_forward(Real *y, const Real *a, const Real *b, size_t n);
/* store as k_add_backward's */
void k_mul_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy, size_t n,
                    unsigned store);
/* x, y (rows, C), bias (C) */
void k_add_bias_forward(Real *y, const Real *x, const Real *bias, size_t rows, int C);
/* store: write gx (=) instead of adding to it */
void k_add_bias_backward(Real *gx, Real *gbias, const Real *gy, size_t rows, int C, int store);
void k_scale_forward(Real *y, const Real *x, Real s, size_t n);
void k_scale_backward(Real *gx, const Real *gy, Real s, size_t n, int store);
void k_relu_forward(Real *y, const Real *x, size_t n);
void k_relu_backward(Real *gx, const Real *y, const Real *gy, size_t n);
void k_gelu_forward(Real *y, const Real *x, size_t n);
/* store: write gx (=) instead of adding to it */
void k_gelu_backward(Real *gx, const Real *x, const Real *gy, size_t n, int store);
/* GPT-2's GELU, the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
void k_gelu_tanh_forward(Real *y, const Real *x, size_t n);
/* store: write gx (=) instead of adding to it */
void k_gelu_tanh_backward(Real *gx, const Real *x, const Real *gy, size_t n, int store);
/* y = x sigmoid(x) (SiLU, also called swish) */
void k_silu_forward(Real *y, const Real *x, size_t n);
void k_silu_backward(Real *gx, const Real *x, const Real *gy, size_t n);
/* Element i is kept when rng_hash(key, i) maps to a uniform >= p; kept ones scale by 1/(1-p). */
void k_dropout_forward(Real *y, const Real *x, uint64_t key, double p, size_t n);
/* store: gx is written (a dropped element's gradient set to 0), not added to */
void k_dropout_backward(Real *gx, const Real *gy, uint64_t key, double p, size_t n, int store);

/* ---- matrix products (k_matmul.c) ----
 * k_gemm: C (M,N) = op(A) op(B) (+ C when accumulate), op(A) (M,K), op(B) (K,N), row-major.
 * ta: A is stored (K,M) and read transposed; tb: B is stored (N,K) and read transposed.
 * Packed and cache-blocked (k_gemm.c). Threads split C into disjoint tiles; every C element
 * sums its k in a fixed order (fixed blocks of k), so results do not depend on thread count. */
void k_gemm(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
            int accumulate);
/* C (M,N) = bias (N, added to every row) + op(A) op(B): the same bits as filling C with bias
 * rows and calling k_gemm with accumulate, without that pass over C. */
void k_gemm_bias(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias);
/* C (M,N) = max(bias + op(A) op(B), 0) (bias may be NULL): the ReLU applied as the products are
 * stored, the same bits as k_gemm_bias then k_relu_forward. */
void k_gemm_relu(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 const Real *bias);
/* k_gemm run by a team already inside a parallel region: thread t of T computes its share (a
 * product too small to share goes whole to thread job % T). No barrier at the end: the caller
 * may run other products that do not read C before its region ends. */
void k_gemm_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                 const Real *B, Real *C, int accumulate);
/* k_gemm_team with ta = 1 (A stored (K,M)) that also adds to sum (M; NULL: none) the column
 * sums of A, summed while A is packed (a Linear's gbias next to gW = gy^T x, without a second
 * pass over gy). sum gets exactly k_sum_rows(sum, A, K, M)'s bits, for any thread count. */
void k_gemm_sum_team(int t, int T, int job, int tb, int M, int N, int K, const Real *A,
                     const Real *B, Real *C, int accumulate, Real *sum);
/* The GEMM kernel this build uses: "avx512", "avx2", "portable" or "openblas". */
const char *k_gemm_kernel_name(void);
/* Its register tile (mr x nr) and blocks (kc of K, mc rows, nc columns), for tests and benches. */
void k_gemm_blocking(int *mr, int *nr, int *kc, int *mc, int *nc);
/* ---- bf16 products (k_gemm_bf16.c) ----
 * k_gemm_bf16: k_gemm with both operands rounded to bf16 (k_bf16_round: to nearest even, a
 * float denormal to a zero of its sign, NaN kept quiet) and every product summed in fp32, in
 * the one order k_gemm_bf16.c defines (vdpbf16ps where the build has AVX512_BF16, its exact
 * emulation elsewhere: the same bits; any thread count the same bits). k_gemm_bf16_bias: C =
 * the bias row (N) + the product, the bits of storing the bias in C and accumulating onto it,
 * without that pass over C. k_gemm_bf16_team as k_gemm_team. k_bf16_native: 1 when the build runs vdpbf16ps. k_bf16_products: 1 while the
 * step's products run in bf16 (ag_precision_use); k_gemm and its forms (k_gemm.c) then run
 * k_gemm_bf16, attention's products (k_attention.c) take bf16 operands and sum them as
 * k_gemm_bf16 does (one chain per element; k_attention.c's opening comment), and its reference
 * (k_attention_ref.c) rounds its operands to bf16 and sums in fp32 in its own order. */
#define K_BF16_KB 256 /* the block of K whose sum is one chain (even) */
extern int k_bf16_products;
/* k_bf16_keep_a: a thread keeps its rows of op(A) packed (all of K) across its blocks of
 * columns, packed once, when they take at most this many 32-bit words (2^19: 2 MiB); larger
 * ones are packed again for each block. Speed only: the words are the same either way (tests
 * set it to 0 to compare the two). */
extern size_t k_bf16_keep_a;
uint16_t k_bf16_round(float x);
float k_bf16_to_float(uint16_t h);
int k_bf16_native(void);
void k_gemm_bf16(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                 int accumulate);
void k_gemm_bf16_team(int t, int T, int job, int ta, int tb, int M, int N, int K, const Real *A,
                      const Real *B, Real *C, int accumulate);
void k_gemm_bf16_bias(int ta, int tb, int M, int N, int K, const Real *A, const Real *B, Real *C,
                      const Real *bias);
/* Packed weights kept across products (k_gemm_bf16.c's "packed weights kept with their
 * parameter"): a product under bf16 whose op(B) is a 2-d parameter registered by the optimizer
 * reads its panels packed by the optimizer's last step instead of packing them (the same
 * words, so the same bits). k_bf16_gen: the generation of parameter data; every library
 * writer of a parameter's data other than the optimizer's step calls ag_params_written
 * (threads.h), which makes every packed copy stale. k_bf16_cache_begin(ps, count,
 * pack): before an optimizer step that writes the parameters ps: a new generation; with pack
 * (and bf16 on) each 2-d parameter of ps registered and its layouts that products read
 * allocated (not in later steps) and stamped current, to be packed by
 * k_bf16_cache_pack_rows during the step; without, their copies stale. k_bf16_cache_to_pack(p):
 * p's copy to pack in this step, or NULL. k_bf16_cache_pack_rows(e, r0, r1): rows [r0, r1) of
 * the weight (one block: r0 a multiple of K_BF16_NR, r1 the next or the end) into its copies, once the step
 * has written them. k_bf16_cache_on (1): 0 turns the cache off (tests). k_bf16_cache_check
 * (0): 1 packs as well and aborts when a copy differs (tests: a writer that did not bump). */
#define K_BF16_NR 32 /* the width of a panel of op(B) */
typedef struct KBf16Packed KBf16Packed;
extern uint64_t k_bf16_gen;
extern int k_bf16_cache_on, k_bf16_cache_check;
void k_bf16_cache_begin(Tensor *const *ps, int count, int pack);
KBf16Packed *k_bf16_cache_to_pack(const Tensor *p);
void k_bf16_cache_pack_rows(const KBf16Packed *e, int r0, int r1);
/* k_gemm_bf16.c's pieces, for attention's products under bf16 (k_attention.c), the same words
 * and the same sums as the matrix product's:
 * k_bf16_pack(d, X, ld, t, K, r0, rn, k0, kc, W): rows [r0, r0+rn) of op(X) (R,K) (X stored
 * (R,K) with rows ld apart, or (K,R) read transposed when t), pairs (k, k+1) of k in [k0,
 * k0+kc) (k0 even, kc even unless k0 + kc = K: the missing half 0): for each pair W words at
 * d, one per row (0 past rn), bf16(op(X)[r,k]) in the low half, bf16(op(X)[r,k+1]) the high.
 * k_bf16_pack_strips2(d0, d1, X, ld, K, r0, rn, k0, kc): k_bf16_pack of two strips of op(X)
 * read transposed (t, W = K_BF16_MR): rows [r0, r0+8) to d0 and [r0+8, r0+16) to d1 (NULL:
 * none), rn of the 16 real (16 rows of X read at once).
 * k_bf16_tile(np, a, b, c, ldc, mr, nr, add): C[0..mr, 0..nr) (rows ldc apart, mr <= K_BF16_MR,
 * nr <= K_BF16_NR) = or (add) += the sums of np pairs of a strip a (np x K_BF16_MR words) and a
 * panel b (np x K_BF16_NR words), each sum one chain from +0 (vdpbf16ps, or its emulation). */
#define K_BF16_MR 8 /* the rows of a strip of op(A) */
void k_bf16_pack(uint32_t *d, const Real *X, size_t ld, int t, int K, int r0, int rn, int k0,
                 int kc, int W);
void k_bf16_pack_strips2(uint32_t *d0, uint32_t *d1, const Real *X, size_t ld, int K, int r0,
                         int rn, int k0, int kc);
void k_bf16_tile(int np, const uint32_t *a, const uint32_t *b, Real *c, size_t ldc, int mr, int nr,
                 int add);
/* a (BATCH,M,K) @ b (K,N) [b_batched=0] or (BATCH,K,N) [b_batched=1] -> y (BATCH,M,N) */
void k_matmul_forward(Real *y, const Real *a, const Real *b, int BATCH, int M, int K, int N,
                      int b_batched);
void k_matmul_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy, int BATCH,
                       int M, int K, int N, int b_batched);
/* a (BATCH,M,K) @ b^T with b (N,K) or (BATCH,N,K) -> y (BATCH,M,N) */
void k_matmul_bt_forward(Real *y, const Real *a, const Real *b, int BATCH, int M, int K, int N,
                         int b_batched);
void k_matmul_bt_backward(Real *ga, Real *gb, const Real *a, const Real *b, const Real *gy,
                          int BATCH, int M, int K, int N, int b_batched);
/* The Linear layer: x (rows,in), W (out,in), bias (out) or NULL -> y (rows,out) = x W^T + bias.
 * The bias is where the product's sums start (one GEMM, no second pass over y). */
void k_linear_forward(Real *y, const Real *x, const Real *W, const Real *bias, int rows, int in,
                      int out);
/* y (rows, out) = max(x W^T + bias, 0), bias NULL for none */
void k_linear_relu_forward(Real *y, const Real *x, const Real *W, const Real *bias, int rows,
                           int in, int out);
/* gy (rows, out) is overwritten with gy * (y > 0), then as k_linear_backward */
void k_linear_relu_backward(Real *gx, Real *gW, Real *gbias, const Real *x, const Real *W,
                            const Real *y, Real *gy, int rows, int in, int out, int store);
/* store: gx is written, not added to (gW and gbias are always added to) */
void k_linear_backward(Real *gx, Real *gW, Real *gbias, const Real *x, const Real *W,
                       const Real *gy, int rows, int in, int out, int store);
/* x (BATCH,M,N) -> y (BATCH,N,M) */
void k_transpose_forward(Real *y, const Real *x, int BATCH, int M, int N);
void k_transpose_backward(Real *gx, const Real *gy, int BATCH, int M, int N);
/* x (B,T,NH*HS) -> y (B,NH,T,HS) */
void k_split_heads_forward(Real *y, const Real *x, int B, int T, int NH, int HS);
void k_split_heads_backward(Real *gx, const Real *gy, int B, int T, int NH, int HS);
/* x (B,NH,T,HS) -> y (B,T,NH*HS) */
void k_merge_heads_forward(Real *y, const Real *x, int B, int T, int NH, int HS);
void k_merge_heads_backward(Real *gx, const Real *gy, int B, int T, int NH, int HS);

/* ---- reductions (k_reduce.c) ---- */
/* The sum of n values in double, in one fixed order (blocks of 4096 in k_lanes.h's lanes, the
 * blocks' sums in order) for any thread count. */
double k_sum_forward(const Real *x, size_t n);
/* gx_i += g for every i, or = g with store (the backward of sum; mean passes g = gy / n) */
void k_sum_backward(Real *gx, Real g, size_t n, int store);
/* g (C) += the sum over rows of x (rows, C): each column summed in row order by one thread
 * (threads share blocks of columns), so the same for any thread count */
void k_sum_rows(Real *g, const Real *x, size_t rows, int C);
/* Thread t of T's share of k_sum_rows, inside a parallel region (no barrier). */
void k_sum_rows_team(int t, int T, Real *g, const Real *x, size_t rows, int C);
/* x_i = 0 (threads share the range: zeroing gradients is a pass over memory like any other) */
void k_zero(Real *x, size_t n);
/* k_zero on the gradients of count tensors (those that have one) in one parallel region */
void k_zero_grads(Tensor *const *ts, int count);
/* every gradient of count tensors *= s, in one parallel region */
void k_scale_grads(Tensor *const *ts, int count, Real s);
/* gx_i += gy_i: the backward of any op whose output is its input seen another way */
void k_accumulate(Real *gx, const Real *gy, size_t n);

/* ---- softmax family, rows of C (k_softmax.c) ---- */
void k_softmax_forward(Real *y, const Real *x, size_t rows, int C);
void k_softmax_backward(Real *gx, const Real *y, const Real *gy, size_t rows, int C);
void k_log_softmax_forward(Real *y, const Real *x, size_t rows, int C);
void k_log_softmax_backward(Real *gx, const Real *y, const Real *gy, size_t rows, int C);
/* logits (rows, V), targets (rows). Writes lse (rows) = log sum_j e^(x_j) for backward, and
 * returns the mean over kept rows of lse - x[target]; *n_kept gets the kept row count. */
double k_cross_entropy_forward(Real *lse, const Real *logits, const int *targets, int ignore_index,
                               size_t rows, int V, size_t *n_kept);
/* gx (rows, V) += g (softmax(x) - onehot(target)) on kept rows, g = gy / n_kept */
void k_cross_entropy_backward(Real *glogits, const Real *logits, const Real *lse,
                              const int *targets, int ignore_index, Real g, size_t rows, int V);

/* ---- normalisation, rows of C (k_layernorm.c) ---- */
/* x, y (rows, C); weight (C); bias (C) or NULL. y = (x - mean) rstd weight + bias per row with
 * rstd = 1 / sqrt(var + eps), var biased; stats (rows, 2) gets (mean, rstd) of each row. */
void k_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *weight, const Real *bias,
                         double eps, size_t rows, int C);
/* gx (rows, C), gweight (C), gbias (C), any may be NULL; stats as written by the forward.
 * store: gx is written, not added to. */
void k_layernorm_backward(Real *gx, Real *gweight, Real *gbias, const Real *x, const Real *weight,
                          const Real *stats, const Real *gy, size_t rows, int C, int store);
/* RMSNorm: x, y (rows, C), weight (C): y = x rstd weight per row with rstd = 1 / sqrt(mean(x^2)
 * + eps); stats (rows, 2) gets (0, rstd) of each row (the layout LayerNorm's (mean, rstd) has) */
void k_rmsnorm_forward(Real *y, Real *stats, const Real *x, const Real *weight, double eps,
                       size_t rows, int C);
/* gx (rows, C), gweight (C), either may be NULL; stats as written by the forward. store: gx
 * is written, not added to. */
void k_rmsnorm_backward(Real *gx, Real *gweight, const Real *x, const Real *weight,
                        const Real *stats, const Real *gy, size_t rows, int C, int store);
/* x, f, y (rows, C): y = LayerNorm(s) of s = x + f as k_layernorm_forward (s is not kept) */
void k_add_layernorm_forward(Real *y, Real *stats, const Real *x, const Real *f, const Real *weight,
                             const Real *bias, double eps, size_t rows, int C);
/* the LayerNorm backward on s = x + f (formed again from x and f), its input gradient written
 * into both gx and gf (any of the four gradients may be NULL); store bit 0: gx is written, not
 * added to; bit 1: the same for gf */
void k_add_layernorm_backward(Real *gx, Real *gf, Real *gweight, Real *gbias, const Real *x,
                              const Real *f, const Real *weight, const Real *stats, const Real *gy,
                              size_t rows, int C, unsigned store);

/* ---- rotary position embedding (k_rope.c) ---- */
/* cs (T, R): for position pos0 + t and pair i < R/2, cs[t, 2i] = cos(a), cs[t, 2i+1] = sin(a),
 * a = (pos0 + t) base^(-2i/R), each computed in double. R even (the rotated columns a head). */
void k_rope_table(Real *cs, int T, int pos0, int R, double base);
/* rows of n = NH*HS columns: x row r starts at x + r*ldx, y row r at y + r*ldy; row r is at
 * table row t = r % T. Within each head of HS columns, pair (2i, 2i+1) with 2i < R turns by the
 * table's angle: y0 = x0 cos - x1 sin, y1 = x0 sin + x1 cos; columns [R, HS) are copied. */
void k_rope_forward(Real *y, size_t ldy, const Real *x, size_t ldx, const Real *cs, size_t rows,
                    int T, int n, int HS, int R);
/* gx (rows with stride ldx) += the inverse rotation of gy (stride ldy); gy itself on the
 * columns [R, HS) of each head */
void k_rope_backward(Real *gx, size_t ldx, const Real *gy, size_t ldy, const Real *cs, size_t rows,
                     int T, int n, int HS, int R);
/* ag_rope's keep: rows of C columns; y = x outside the columns [col, col + n) (forward), and
 * gx += gy there (backward) */
void k_rope_pass(Real *y, const Real *x, size_t rows, int C, int col, int n);
void k_rope_pass_backward(Real *gx, const Real *gy, size_t rows, int C, int col, int n);

/* ---- lookup: embedding rows, and rows picked by index (k_embedding.c) ---- */
/* weight (V,C), ids (N) -> y (N,C) */
void k_embedding_forward(Real *y, const Real *weight, const int *ids, size_t N, int C);
/* positions whose id is padding_idx (-1: none) add nothing */
void k_embedding_backward(Real *gweight, const int *ids, int padding_idx, const Real *gy, size_t N,
                          int C);
/* y[i,:] = s weight[ids[r],:] + P[r mod T,:] (no P: NULL), r = rows[i] (rows NULL: r = i),
 * for i < n: weight (V,C), P (T,C) -> y (n,C) */
void k_embedding_rows_forward(Real *y, const Real *weight, const int *ids, const int *rows,
                              size_t n, int T, int C, Real s, const Real *P);
/* gweight[ids[i],:] += s gy[i,:] for i < n unless ids[i] is padding_idx: gy (n,C) */
void k_embedding_rows_backward(Real *gweight, const int *ids, int padding_idx, Real s,
                               const Real *gy, size_t n, int C);
/* y[i,:] (=, or += when not store) x[from[i],:] for i < n; from[i] -1: no row (store: y[i,:] =
 * 0; else nothing). Gather forward (and the embedding's): from = the row numbers;
 * scatter forward: from = their inverse map; the backwards swap the two. */
void k_pick_rows(Real *y, const Real *x, const int *from, size_t n, int C, int store);

/* ---- attention and head gate (k_attention.c) ---- */
/* One attention call's sizes and options. q (B,NH,Tq,HS); k, v (B,NKV,Tk,HS), NH % NKV == 0,
 * query head h reads key/value head h / (NH / NKV). causal: query i sees keys
 * j <= i + Tk - Tq. mask (B,Tk), 1 = padding key, or NULL. p: dropout on the probabilities
 * (0 = none), element e of P kept when rng_hash(key, e) maps to a uniform >= p. */
typedef struct KAttention {
    int B, NH, NKV, Tq, Tk, HS;
    int causal;
    const uint8_t *mask; /* key padding, (B, Tk) bytes (1 = padding), or NULL */
    /* An additive mask on the scaled scores, by positions: query t, key u of batch b, head h
     * add bias[b*bs[0] + h*bs[1] + t*Tk + u] (-inf blocks the key); or NULL. Only the forward
     * reads it (the backward reads P). */
    const Real *bias;
    size_t bs[2];
    double p;
    uint64_t key;
    /* Layout: row t of head h of batch b starts at q[b*qs[0] + h*qs[1] + t*qs[2]] (and so in
     * gq), of y (and gy) at ys, of k and v (gk, gv) at ks. For (B, heads, T, HS) tensors call
     * k_attention_strides_heads. P is always (B,NH,Tq,Tk). */
    size_t qs[3], ks[3], ys[3];
    /* Packed rows (all NULL for the full batch). q, y (and gq, gy) then hold only some rows of
     * the (B, Tq) batch, packed in increasing order: those of batch b are rows [qoff[b],
     * qoff[b+1]) (row r starts at r*qs[2] + h*qs[1]), qpos[r] the position t of row r; k, v
     * likewise by koff, kpos (ks). mask is then per packed key row (its nk bytes). P holds for
     * batch b and head h an nq x nk block (the batch's packed query and key rows) at
     * NH*poff[b] + h*nq*nk. Without maps that is P (B,NH,Tq,Tk). */
    const int *qoff, *qpos, *koff, *kpos, *poff;
} KAttention;
/* the strides of q, y (B,NH,Tq,HS) and k, v (B,NKV,Tk,HS), contiguous */
void k_attention_strides_heads(KAttention *a);
/* P (B,NH,Tq,Tk) = softmax(q k^T / sqrt(HS) + bias) over the visible keys (0 elsewhere; a row
 * with no visible key is all 0) before dropout; y (B,NH,Tq,HS) = dropout(P) v. */
void k_attention_forward(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                         const KAttention *a);
/* The same, and (when Pd is not NULL) k_attention_probs_unpack(Pd, P, a) of each head by the
 * thread that computed it, in the same parallel region (packed rows only: a->qoff set). */
void k_attention_forward_probs(Real *y, Real *P, Real *Pd, const Real *q, const Real *k,
                               const Real *v, const KAttention *a);
/* From the saved P (no other buffer: the score gradients of a query row are used at once).
 * Adds into gq, gk, gv (any may be NULL). */
void k_attention_backward(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k, const Real *v,
                          const Real *P, const Real *gy, const KAttention *a);
/* The same, but store bit 0 (gq), 1 (gk), 2 (gv) writes (=) that gradient instead of adding:
 * the heads' HS columns of every query row (gq) or every key row (gk, gv, 0 where no query
 * sees the key), so that a fresh buffer need not be zeroed first. */
void k_attention_backward_store(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                                const Real *v, const Real *P, const Real *gy, const KAttention *a,
                                unsigned store);
/* The reference kernel (k_attention_ref.c): the same contract in plain loops over b, h, i, j.
 * It defines the op and is the fast kernel's test oracle; built with -DAG_ATTN_REF (make
 * ATTN=ref), k_attention_forward and k_attention_backward call it. */
void k_attention_forward_ref(Real *y, Real *P, const Real *q, const Real *k, const Real *v,
                             const KAttention *a);
void k_attention_backward_ref(Real *gq, Real *gk, Real *gv, const Real *q, const Real *k,
                              const Real *v, const Real *P, const Real *gy, const KAttention *a);
/* Pd (B,NH,Tq,Tk) = P of packed rows (a->qoff set) at their positions, 0 elsewhere. */
void k_attention_probs_unpack(Real *Pd, const Real *P, const KAttention *a);
/* x, y (B,NH,T,HS), gate (NH): y[b,h] = gate[h] x[b,h] */
void k_head_gate_forward(Real *y, const Real *x, const Real *gate, int B, int NH, int T, int HS);
void k_head_gate_backward(Real *gx, Real *ggate, const Real *x, const Real *gate, const Real *gy,
                          int B, int NH, int T, int HS);

/* ---- optimizer updates, n elements of one parameter (k_optim.c) ----
 * Not forward/backward pairs: in-place updates of a parameter and its state from its gradient.
 * The scalars are computed once per step by optim_step (../optim/optim.c). */
typedef struct KSgd {
    Real lr, momentum, weight_decay;
    int nesterov;
    int first;     /* the buffer's first step: buf = g */
    int zero_grad; /* g = 0 once read */
} KSgd;
/* p, g, buf (n); buf NULL when momentum is 0. */
void k_sgd_step(Real *p, Real *g, Real *buf, size_t n, const KSgd *h);
typedef struct KAdam {
    Real beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
    Real l2;          /* Adam's weight decay, added to g; 0 for AdamW */
    Real decay;       /* AdamW's p *= decay (1 - lr wd) before the update; 1 for Adam */
    Real step_size;   /* lr / (1 - beta1^t) */
    Real bc2_sqrt;    /* sqrt(1 - beta2^t) */
    Real pre;         /* p *= pre first, on parameters of at least pre_min_ndim dimensions */
    int pre_min_ndim; /* (optim_step_decay's decay; pre 1: none) */
    int zero_grad;    /* g = 0 once read */
} KAdam;
/* For each i < count: parameter ps[i] (data p, gradient g) and its moments m[i], v[i] (all
 * ps[i]->size), in one parallel region. */
void k_adam_step_many(Tensor *const *ps, Tensor *const *m, Tensor *const *v, int count,
                      const KAdam *h);
/* the sum of the squares of the gradients of count tensors (those that have one) in double, in
 * one fixed order (blocks of 4096 in k_lanes.h's lanes, the blocks' sums in list order;
 * k_optim.c), the same for any thread count, in one parallel region */
double k_sum_squares_grads(Tensor *const *ts, int count);
/* x_i *= s */
void k_scale_inplace(Real *x, Real s, size_t n);

#endif
