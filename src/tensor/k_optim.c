/* k_optim.c: the optimizer update loops (SGD with momentum, Adam/AdamW) and the two loops of
 * gradient clipping (sum of squares, scaling). Each element of a parameter is updated from its
 * own gradient and state only, so the loops split freely across threads and give the same
 * bits for any thread count. The arithmetic follows torch.optim's (PyTorch 1.13) operation by
 * operation, so that the double build matches it to the last bit or nearly.
 * Not here: the scalars of a step (bias corrections, scheduled lr), computed in double once per
 * step by optim_step (../optim/optim.c). Next: that file. */
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels.h"

#define PAR_FOR _Pragma("omp parallel for schedule(static) if (n >= K_PAR_MIN)")

/* torch: d_p = g + wd p; buf = d_p (first) or buf * momentum + d_p; d_p = d_p + momentum buf
 * (Nesterov) or buf; p = p - lr d_p. With momentum 0 there is no buffer: p = p - lr d_p. */
void k_sgd_step(Real *p, const Real *g, Real *buf, size_t n, const KSgd *h) {
    Real lr = h->lr, mom = h->momentum, wd = h->weight_decay;
    int nesterov = h->nesterov, first = h->first;
    PAR_FOR
    for (size_t i = 0; i < n; i++) {
        Real d = g[i];
        if (wd != 0) d = d + wd * p[i];
        if (buf) {
            Real b = first ? d : buf[i] * mom + d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        p[i] = p[i] - lr * d;
    }
}

/* torch: g = g + wd p (Adam); p = p * (1 - lr wd) (AdamW); m = m b1 + (1 - b1) g;
 * v = v b2 + ((1 - b2) g) g; denom = sqrt(v) / sqrt(bc2) + eps; p = p - (step_size m) / denom.
 * Elements [lo, hi) of one parameter. */
static void adam_range(Real *p, const Real *g, Real *m, Real *v, size_t lo, size_t hi,
                       const KAdam *h) {
    Real b1 = h->beta1, b2 = h->beta2, omb1 = h->one_minus_beta1, omb2 = h->one_minus_beta2;
    Real eps = h->eps, l2 = h->l2, decay = h->decay, step_size = h->step_size;
    Real bc2_sqrt = h->bc2_sqrt;
    for (size_t i = lo; i < hi; i++) {
        Real gi = g[i], pi = p[i];
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
#pragma omp parallel if (total >= K_PAR_MIN)
    {
        int T = 1, t = 0;
#ifdef _OPENMP
        T = omp_get_num_threads();
        t = omp_get_thread_num();
#endif
        for (int i = 0; i < count; i++) {
            size_t lo, hi;
            k_team_slice(i, ps[i]->size, t, T, &lo, &hi);
            if (lo < hi) adam_range(ps[i]->data, ps[i]->grad, m[i]->data, v[i]->data, lo, hi, h);
        }
    }
}

double k_sum_squares(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

void k_scale_inplace(Real *x, Real s, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
