/* k_optim.c: the optimizer update loops (SGD with momentum, Adam/AdamW) and the two loops of
 * gradient clipping (sum of squares, scaling). Each element of a parameter is updated from its
 * own gradient and state only, so the loops split freely across threads and give the same
 * bits for any thread count. The arithmetic follows torch.optim's (PyTorch 1.13) operation by
 * operation, so that the double build matches it to the last bit or nearly.
 * Not here: the scalars of a step (bias corrections, scheduled lr), computed in double once per
 * step by optim_step (../optim/optim.c). Next: that file. */
#include <math.h>

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
 * v = v b2 + ((1 - b2) g) g; denom = sqrt(v) / sqrt(bc2) + eps; p = p - (step_size m) / denom */
void k_adam_step(Real *p, const Real *g, Real *m, Real *v, size_t n, const KAdam *h) {
    Real b1 = h->beta1, b2 = h->beta2, omb1 = h->one_minus_beta1, omb2 = h->one_minus_beta2;
    Real eps = h->eps, l2 = h->l2, decay = h->decay, step_size = h->step_size;
    Real bc2_sqrt = h->bc2_sqrt;
    PAR_FOR
    for (size_t i = 0; i < n; i++) {
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

double k_sum_squares(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

void k_scale_inplace(Real *x, Real s, size_t n) {
    PAR_FOR
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
