/* k_embedding.c: the embedding lookup and its scatter-add backward.
 * Backward adds into rows picked by ids, and two positions may pick the same row, so threads
 * split the columns (never the positions): each gradient element has one writer, and adds in
 * position order. Next: ../autograd/autograd.h. */
#include <string.h>

#include "kernels.h"

void k_embedding_forward(Real *y, const Real *weight, const int *ids, size_t N, int C) {
#pragma omp parallel for schedule(static) if (N * (size_t)C >= K_PAR_MIN)
    for (size_t i = 0; i < N; i++)
        memcpy(y + i * C, weight + (size_t)ids[i] * C, (size_t)C * sizeof(Real));
}
/* forward: y[i,:] = W[ids[i],:], so gW[v,:] += sum of gy[i,:] over positions i with ids[i] == v
 * (positions holding padding_idx send nothing: the padding row stays as initialised) */
void k_embedding_backward(Real *gweight, const int *ids, int padding_idx, const Real *gy, size_t N,
                          int C) {
#pragma omp parallel for schedule(static) if (N * (size_t)C >= K_PAR_MIN)
    for (int c = 0; c < C; c++)
        for (size_t i = 0; i < N; i++)
            if (ids[i] != padding_idx) gweight[(size_t)ids[i] * C + c] += gy[i * C + c];
}
