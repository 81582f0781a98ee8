/* k_reduce.c: full sums and the broadcast that is their backward. A sum runs in index order on
 * one thread, accumulated in double, so it is the same for any thread count.
 * Next: k_softmax.c. */
#include "kernels.h"

size_t k_par_min = 16384;

double k_sum_forward(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}
/* forward: y = sum_i x_i, so every x_i receives the same g */
void k_sum_backward(Real *gx, Real g, size_t n) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) gx[i] += g;
}

void k_accumulate(Real *gx, const Real *gy, size_t n) {
#pragma omp parallel for schedule(static) if (n >= K_PAR_MIN)
    for (size_t i = 0; i < n; i++) gx[i] += gy[i];
}
