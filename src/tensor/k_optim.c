/* k_optim.c: the optimizer update loops (SGD with momentum, Adam/AdamW; each can zero the
 * gradient it has read, zero_grad's pass fused in) and the two loops of gradient clipping (sum
 * of squares, scaling). Each element of a parameter is updated from its
 * own gradient and state only, so the loops split freely across threads and give the same
 * bits for any thread count. The arithmetic follows torch.optim's (PyTorch 1.13) operation by
 * operation, so that the double build matches it to the last bit or nearly.
 * Not here: the scalars of a step (bias corrections, scheduled lr), computed in double once per
 * step by optim_step (../optim/optim.c). Next: that file. */
#include <math.h>

#include "k_lanes.h"
#include "kernels.h"

#define PAR_FOR _Pragma("omp parallel for schedule(static) if (n >= K_PAR_MIN)")

/* torch: d_p = g + wd p; buf = d_p (first) or buf * momentum + d_p; d_p = d_p + momentum buf
 * (Nesterov) or buf; p = p - lr d_p. With momentum 0 there is no buffer: p = p - lr d_p. */
/* Two loops, without the buffer and with it: one loop that touched buf or not stayed scalar in
 * the AVX2 build (GCC puts a conditional store in vector lanes only with AVX-512's masks). The
 * conditions left choose between two values, which vector lanes do with a blend. With
 * h->zero_grad, g = 0 once read (optim_step_zero_grad: zero_grad's pass in this one). */
void k_sgd_step(Real *p, Real *g, Real *buf, size_t n, const KSgd *h) {
    Real lr = h->lr, mom = h->momentum, wd = h->weight_decay;
    int nesterov = h->nesterov, first = h->first, zero = h->zero_grad;
    if (!buf) {
        PAR_FOR
        for (size_t i = 0; i < n; i++) {
            Real d = wd != 0 ? g[i] + wd * p[i] : g[i];
            if (zero) g[i] = 0;
            p[i] = p[i] - lr * d;
        }
        return;
    }
    PAR_FOR
    for (size_t i = 0; i < n; i++) {
        Real d = wd != 0 ? g[i] + wd * p[i] : g[i];
        if (zero) g[i] = 0;
        Real b = first ? d : buf[i] * mom + d;
        buf[i] = b;
        d = nesterov ? d + mom * b : b;
        p[i] = p[i] - lr * d;
    }
}

/* torch: g = g + wd p (Adam); p = p * (1 - lr wd) (AdamW); m = m b1 + (1 - b1) g;
 * v = v b2 + ((1 - b2) g) g; denom = sqrt(v) / sqrt(bc2) + eps; p = p - (step_size m) / denom.
 * Before all that, p = p * pre (optim_step_decay's decay, applied as if by a pass of its own).
 * With zero, g = 0 once read (as SGD's). Elements [lo, hi) of one parameter. Inlined twice,
 * zero 0 and 1, so that neither loop tests it. */
static inline void adam_range(Real *p, Real *g, Real *m, Real *v, size_t lo, size_t hi,
                              const KAdam *h, Real pre, int zero) {
    Real b1 = h->beta1, b2 = h->beta2, omb1 = h->one_minus_beta1, omb2 = h->one_minus_beta2;
    Real eps = h->eps, l2 = h->l2, decay = h->decay, step_size = h->step_size;
    Real bc2_sqrt = h->bc2_sqrt;
    for (size_t i = lo; i < hi; i++) {
        Real gi = g[i], pi = p[i];
        if (zero) g[i] = 0;
        if (pre != 1) pi = pi * pre;
        if (l2 != 0) gi = gi + l2 * pi;
        if (decay != 1) pi = pi * decay;
        Real mi = m[i] * b1 + omb1 * gi;
        Real vi = v[i] * b2 + omb2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        Real denom = (Real)sqrt(vi) / bc2_sqrt + eps;
        p[i] = pi - step_size * mi / denom;
    }
}

/* One parallel region for every parameter (a region per parameter was ~30 a step, each a
 * barrier): thread t of T updates its k_team_slice of each parameter (small ones whole, large
 * ones cut at multiples of 16 elements) and goes on to the next parameter without waiting,
 * since no two parameters share memory. Every element's update is the same whoever
 * runs it, so the bits do not depend on T. */
void k_adam_step_many(Tensor *const *ps, Tensor *const *m, Tensor *const *v, int count,
                      const KAdam *h) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += ps[i]->size;
    (void)total; /* read only by the OpenMP clause: unused without OpenMP */
#pragma omp parallel if (total >= K_PAR_MIN)
    {
        int t, T;
        k_team(&t, &T);
        for (int i = 0; i < count; i++) {
            size_t lo, hi;
            Real pre = ps[i]->ndim >= h->pre_min_ndim ? h->pre : 1;
            const KBf16Packed *e = k_bf16_cache_to_pack(ps[i]);
            if (e) { /* by blocks of K_BF16_NR rows, each packed while it is in cache */
                int R = ps[i]->shape[0], nb = (R + K_BF16_NR - 1) / K_BF16_NR;
                size_t C = (size_t)ps[i]->shape[1];
                for (int b = (int)((long)nb * t / T); b < (int)((long)nb * (t + 1) / T); b++) {
                    int r0 = b * K_BF16_NR, r1 = r0 + K_BF16_NR < R ? r0 + K_BF16_NR : R;
                    adam_range(ps[i]->data, ps[i]->grad, m[i]->data, v[i]->data, r0 * C, r1 * C, h,
                               pre, h->zero_grad);
                    k_bf16_cache_pack_rows(e, r0, r1);
                }
                continue;
            }
            k_team_slice(i, ps[i]->size, t, T, &lo, &hi);
            if (lo < hi && h->zero_grad)
                adam_range(ps[i]->data, ps[i]->grad, m[i]->data, v[i]->data, lo, hi, h, pre, 1);
            else if (lo < hi)
                adam_range(ps[i]->data, ps[i]->grad, m[i]->data, v[i]->data, lo, hi, h, pre, 0);
        }
    }
}

/* Gradient clipping's sum of squares, in one fixed order whatever the thread count: each
 * gradient cut into blocks of SQ_BLOCK elements, each block summed in double in k_lanes.h's
 * K_LANES lanes, then the blocks' sums added in order (a gradient's blocks in index order, the
 * gradients in list order). Threads share out whole blocks and write each block's sum to its
 * own slot, so a block gives the same sum whichever thread computes it. The lanes advance
 * together in vector registers, where one running sum waited on every add. */
#define SQ_BLOCK 4096

static size_t sq_blocks(size_t n) { return (n + SQ_BLOCK - 1) / SQ_BLOCK; }

static double block_sum_squares(const Real *x, int n) {
    double s;
    K_LANES_SUM(double, k_lanes_total_d, n, (double)x[j] * (double)x[j], &s);
    return s;
}

/* Thread t of T's blocks of x (n elements) into part[0, sq_blocks(n)): a single block goes to
 * thread `owner`, more are cut into T runs of blocks. */
static void sum_squares_team(int t, int T, int owner, const Real *x, size_t n, double *part) {
    size_t nb = sq_blocks(n), lo = nb * (size_t)t / (size_t)T,
           hi = nb * (size_t)(t + 1) / (size_t)T;
    if (nb == 1) lo = 0, hi = owner == t;
    for (size_t b = lo; b < hi; b++) {
        size_t i0 = b * SQ_BLOCK, len = n - i0 < SQ_BLOCK ? n - i0 : SQ_BLOCK;
        part[b] = block_sum_squares(x + i0, (int)len);
    }
}

/* One parallel region for every gradient, as k_adam_step_many: the blocks of gradient i follow
 * those of the gradients before it in part[] (nb doubles of the calling thread's scratch,
 * shared by the team). */
double k_sum_squares_grads(Tensor *const *ts, int count) {
    size_t nb = 0, total = 0;
    for (int i = 0; i < count; i++)
        if (ts[i]->grad) nb += sq_blocks(ts[i]->size), total += ts[i]->size;
    double *part = (double *)k_thread_scratch(
        K_SCRATCH_REDUCE, (nb * sizeof(double) + sizeof(Real) - 1) / sizeof(Real));
    (void)total; /* read only by the OpenMP clause: unused without OpenMP */
#pragma omp parallel if (total >= K_PAR_MIN)
    {
        int t, T;
        k_team(&t, &T);
        size_t off = 0;
        for (int i = 0; i < count; i++) {
            if (!ts[i]->grad) continue;
            sum_squares_team(t, T, i % T, ts[i]->grad, ts[i]->size, part + off);
            off += sq_blocks(ts[i]->size);
        }
    }
    double s = 0; /* the blocks' sums in order */
    for (size_t b = 0; b < nb; b++) s += part[b];
    return s;
}

void k_scale_inplace(Real *x, Real s, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
