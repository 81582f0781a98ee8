/* dist_tree.c: the gradient reduction of src/dist under mpirun, for tests/dist/test_mpi.sh and
 * docs/mpi.md. S leaves of n values (leaf i from its own seed, magnitudes spread over 2^±20 so
 * that the order of additions shows in the bits), owned by the processes as MAP says:
 *   contiguous   process r owns [r S / P, (r + 1) S / P) (what DistGrad does)
 *   cyclic       leaf i is process i mod P's
 *   reversed     leaf i is process P - 1 - (i mod P)'s
 * Usage: dist_tree S N MAP [REPS]
 * With REPS, process 0 prints instead the milliseconds of one reduction (the tree and the
 * broadcast, after a barrier, so waiting for a slow process is not counted; the time of the
 * process that got the sum last): the median of REPS and the fastest (the one least disturbed
 * by other jobs on a shared machine).
 * Process 0 prints one line (hashes are FNV-1a of the result's bytes):
 *   tree HASH ref HASH seq HASH allreduce HASH
 * tree: dist_tree_sum with that map; ref: a recursive pairwise sum written independently here
 * (one process, all leaves); seq: ((l0 + l1) + l2) + ..., the order one accumulating process
 * would take; allreduce: each process adds its own leaves in order, then MPI_Allreduce(SUM)
 * (what a data-parallel trainer would usually do; "-" without MPI).
 * Not here: the checks (the script). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

#ifdef AG_MPI
#include <mpi.h>
#endif

static void fill_leaf(Real *v, size_t n, int i) {
    Rng r;
    rng_seed(&r, rng_hash(12345, (uint64_t)i));
    for (size_t k = 0; k < n; k++) {
        double scale = (double)((uint64_t)1 << rng_below(&r, 40)) / (double)((uint64_t)1 << 20);
        v[k] = (Real)(rng_normal(&r) * scale);
    }
}

static uint64_t fnv(const void *p, size_t len) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* the pairwise tree over [lo, hi) inside an aligned span (a power of two): the left half
 * first, as a whole, then the right half, if any of it exists */
static void ref_sum(Real **all, int lo, int hi, int span, size_t n, Real *out) {
    if (hi - lo == 1) {
        memcpy(out, all[lo], n * sizeof(Real));
        return;
    }
    int half = span / 2;
    if (lo + half >= hi) {
        ref_sum(all, lo, hi, half, n, out);
        return;
    }
    Real *right = malloc(n * sizeof(Real));
    ref_sum(all, lo, lo + half, half, n, out);
    ref_sum(all, lo + half, hi, half, n, right);
    for (size_t k = 0; k < n; k++) out[k] = out[k] + right[k];
    free(right);
}

int main(int argc, char **argv) {
    dist_init();
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: dist_tree S N contiguous|cyclic|reversed [REPS]\n");
        return 2;
    }
    int S = atoi(argv[1]), P = dist_size(), me = dist_rank();
    size_t n = (size_t)atol(argv[2]);
    const char *map = argv[3];
    if (S < 1 || n < 1) return 2;
    int *owner = malloc((size_t)S * sizeof *owner);
    for (int i = 0; i < S; i++) {
        if (strcmp(map, "contiguous") == 0) {
            owner[i] = 0;
            while ((int64_t)(owner[i] + 1) * S / P <= i) owner[i]++;
        } else if (strcmp(map, "cyclic") == 0)
            owner[i] = i % P;
        else if (strcmp(map, "reversed") == 0)
            owner[i] = P - 1 - i % P;
        else {
            fprintf(stderr, "dist_tree: %s: unknown map\n", map);
            return 2;
        }
    }
    Real **leaf = calloc((size_t)S, sizeof *leaf), *tmp = malloc(n * sizeof(Real));
    Real *mine = calloc(n, sizeof(Real));
    int have_mine = 0;
    for (int i = 0; i < S; i++) {
        if (owner[i] != me) continue;
        leaf[i] = malloc(n * sizeof(Real));
        fill_leaf(leaf[i], n, i);
        for (size_t k = 0; k < n; k++) mine[k] = have_mine ? mine[k] + leaf[i][k] : leaf[i][k];
        have_mine = 1;
    }
    if (argc == 5) {
        int reps = atoi(argv[4]);
        double *ms = calloc((size_t)(reps > 0 ? reps : 1), sizeof *ms);
        for (int r = 0; r < reps; r++) {
#ifdef AG_MPI
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            dist_tree_sum(leaf, S, n, owner, tmp);
            MPI_Bcast(owner[0] == me ? leaf[0] : tmp, (int)n,
                      sizeof(Real) == 8 ? MPI_DOUBLE : MPI_FLOAT, owner[0], MPI_COMM_WORLD);
            ms[r] = 1e3 * (MPI_Wtime() - t0);
            /* the slowest process's time: the root's MPI_Bcast may return once its data is in
             * the socket's buffer, before the others have it */
            MPI_Allreduce(MPI_IN_PLACE, &ms[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
        }
        for (int i = 1; i < reps; i++) /* insertion sort: the median */
            for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
                double t = ms[j];
                ms[j] = ms[j - 1];
                ms[j - 1] = t;
            }
        if (me == 0)
            printf("%d processes, %d leaves of %zu values (%zu bytes): %.3f ms a reduction "
                   "(median of %d; fastest %.3f ms)\n",
                   P, S, n, n * sizeof(Real), reps > 0 ? ms[reps / 2] : 0.0, reps,
                   reps > 0 ? ms[0] : 0.0);
        free(ms);
        dist_finalize();
        return 0;
    }
    char allreduce[32] = "-";
#ifdef AG_MPI
    MPI_Allreduce(MPI_IN_PLACE, mine, (int)n, sizeof(Real) == 8 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    snprintf(allreduce, sizeof allreduce, "%016llx",
             (unsigned long long)fnv(mine, n * sizeof(Real)));
#endif
    dist_tree_sum(leaf, S, n, owner, tmp);
    Real *root = leaf[0];
#ifdef AG_MPI
    if (owner[0] != me) root = tmp;
    MPI_Bcast(root, (int)n, sizeof(Real) == 8 ? MPI_DOUBLE : MPI_FLOAT, owner[0], MPI_COMM_WORLD);
#endif
    if (me == 0) {
        Real **all = malloc((size_t)S * sizeof *all);
        for (int i = 0; i < S; i++) {
            all[i] = malloc(n * sizeof(Real));
            fill_leaf(all[i], n, i);
        }
        int span = 1;
        while (span < S) span *= 2;
        Real *ref = malloc(n * sizeof(Real)), *seq = malloc(n * sizeof(Real));
        ref_sum(all, 0, S, span, n, ref);
        memcpy(seq, all[0], n * sizeof(Real));
        for (int i = 1; i < S; i++)
            for (size_t k = 0; k < n; k++) seq[k] = seq[k] + all[i][k];
        printf("tree %016llx ref %016llx seq %016llx allreduce %s\n",
               (unsigned long long)fnv(root, n * sizeof(Real)),
               (unsigned long long)fnv(ref, n * sizeof(Real)),
               (unsigned long long)fnv(seq, n * sizeof(Real)), allreduce);
        for (int i = 0; i < S; i++) free(all[i]);
        free(all);
        free(ref);
        free(seq);
    }
    for (int i = 0; i < S; i++) free(leaf[i]);
    free(leaf);
    free(tmp);
    free(mine);
    free(owner);
    dist_finalize();
    return 0;
}
