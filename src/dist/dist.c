/* dist.c: the processes (MPI when built with -DAG_MPI, one process otherwise), the fixed
 * pairwise tree that sums the shards' gradients, and a training step over shards.
 * Why not MPI_Allreduce: the standard leaves the order of its additions to the library, which
 * picks an algorithm by message size and process count (Open MPI: recursive doubling, ring,
 * Rabenseifner, ...), so the bits change with the number of processes (docs/mpi.md measures
 * it). Here the order is ours: the tree over shard index, its edges that cross processes sent
 * point to point (MPI_Send / MPI_Recv), the root broadcast (a copy: no arithmetic).
 * Not here: the trainers' use of it (examples/gpt/train.c, examples/translate/train.c). Read
 * next: docs/mpi.md. */
#include "dist.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef AG_MPI
#include <mpi.h>
#ifdef AG_REAL_DOUBLE
#define DIST_MPI_REAL MPI_DOUBLE
#else
#define DIST_MPI_REAL MPI_FLOAT
#endif
#endif

/* ---- the processes ---- */

void dist_init(void) {
#ifdef AG_MPI
    int on = 0;
    MPI_Initialized(&on);
    if (!on) MPI_Init(NULL, NULL);
#endif
}

void dist_finalize(void) {
#ifdef AG_MPI
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    if (on && !off) MPI_Finalize();
#endif
}

void dist_abort(int code) {
#ifdef AG_MPI
    if (dist_size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)code;
#endif
}

#ifdef AG_MPI
static int mpi_on(void) {
    int on = 0, off = 0;
    MPI_Initialized(&on);
    MPI_Finalized(&off);
    return on && !off;
}
#endif

int dist_rank(void) {
#ifdef AG_MPI
    int r = 0;
    if (mpi_on()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
#else
    return 0;
#endif
}

int dist_size(void) {
#ifdef AG_MPI
    int n = 1;
    if (mpi_on()) MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
#else
    return 1;
#endif
}

int dist_with_mpi(void) {
#ifdef AG_MPI
    return 1;
#else
    return 0;
#endif
}

int dist_any(int flag) {
    int any = flag != 0;
#ifdef AG_MPI
    if (dist_size() > 1) MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
#endif
    return any;
}

int dist_agree(int rc, int *print) {
    AG_CHECK_ARG(print);
    int any_failed = dist_any(rc != AG_OK), first_failed = dist_any(dist_rank() == 0 && rc);
    if (any_failed && rc == AG_OK)
        rc = ag_fail(AG_ERR_ARG,
                     "process %d: stopped: another process could not start (its message says "
                     "why)",
                     dist_rank());
    *print = rc != AG_OK && (dist_rank() == 0 || !first_failed);
    return rc;
}

/* v[0..n) summed over the processes, in place (MPI's order: callers make it exact) */
#ifdef AG_MPI
static void sum_everywhere(void *v, int n, MPI_Datatype type) {
    if (dist_size() > 1 && n > 0) MPI_Allreduce(MPI_IN_PLACE, v, n, type, MPI_SUM, MPI_COMM_WORLD);
}
#define SUM_EVERYWHERE(v, n, type) sum_everywhere(v, n, type)
#else
#define SUM_EVERYWHERE(v, n, type) ((void)(v), (void)(n))
#endif

void dist_sum_i64(int64_t *v, int n) {
    AG_CHECK_ARG(v);
    AG_CHECK(n >= 0, "dist_sum_i64: n %d", n);
    SUM_EVERYWHERE(v, n, MPI_INT64_T);
}

void dist_sum_disjoint(double *v, int n) {
    AG_CHECK_ARG(v);
    AG_CHECK(n >= 0, "dist_sum_disjoint: n %d", n);
    SUM_EVERYWHERE(v, n, MPI_DOUBLE);
}

void dist_threads_on_node(int threads, int *total, int *cpus) {
    AG_CHECK_ARG(total);
    AG_CHECK_ARG(cpus);
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    *cpus = c > 0 ? (int)c : 1;
    *total = threads;
#ifdef AG_MPI
    if (dist_size() > 1) {
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Allreduce(&threads, total, 1, MPI_INT, MPI_SUM, node);
        MPI_Comm_free(&node);
    }
#endif
}

/* ---- the tree ---- */

/* a[k] += b[k]: one addition an element, always left + right */
static void add_into(Real *a, const Real *b, size_t n) {
    for (size_t k = 0; k < n; k++) a[k] += b[k];
}

/* Level by level: at stride s the node at i (a multiple of 2s) adds the node at i + s (when it
 * exists), so node 0 ends with ((l0 + l1) + (l2 + l3)) + ... A node lives with the owner of
 * its first leaf. An edge inside one process is an addition; an edge between two is a message
 * from the right node's owner to the left's. Every process walks the same edges in the same
 * order, so the earliest unfinished edge always has both ends waiting on it: no deadlock,
 * whatever the owner map. */
void dist_tree_sum(Real **leaf, int S, size_t n, const int *owner, Real *tmp) {
    AG_CHECK_ARG(leaf);
    AG_CHECK_ARG(owner);
    AG_CHECK_ARG(tmp);
    AG_CHECK(S >= 1, "dist_tree_sum: %d shards", S);
    int me = dist_rank();
    for (int i = 0; i < S; i++)
        AG_CHECK((owner[i] == me) == (leaf[i] != NULL) && owner[i] >= 0 && owner[i] < dist_size(),
                 "dist_tree_sum: shard %d: owner %d, buffer %s in process %d of %d", i, owner[i],
                 leaf[i] ? "given" : "missing", me, dist_size());
    for (int s = 1; s < S; s *= 2) {
        for (int i = 0; i + s < S; i += 2 * s) {
            int a = owner[i], b = owner[i + s];
            if (a == me && b == me) {
                add_into(leaf[i], leaf[i + s], n);
            } else if (a == me || b == me) {
#ifdef AG_MPI
                AG_CHECK(n <= (size_t)0x7fffffff, "dist_tree_sum: %zu values: more than an int", n);
                if (b == me)
                    MPI_Send(leaf[i + s], (int)n, DIST_MPI_REAL, a, i + s, MPI_COMM_WORLD);
                else {
                    MPI_Recv(tmp, (int)n, DIST_MPI_REAL, b, i + s, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                    add_into(leaf[i], tmp, n);
                }
#else
                AG_CHECK(0, "dist_tree_sum: shard %d of process %d without MPI",
                         a == me ? i + s : i, a == me ? b : a);
#endif
            }
        }
    }
}

/* ---- a training step over shards ---- */

DistGrad *dist_grad_new(const ParamList *ps, int n_shards) {
    AG_CHECK_ARG(ps);
    int P = dist_size(), me = dist_rank();
    AG_CHECK(n_shards >= 1 && n_shards >= P,
             "dist_grad_new: %d shards for %d processes: give each process one shard or more",
             n_shards, P);
    DistGrad *d = calloc(1, sizeof *d);
    AG_CHECK(d, "dist_grad_new: out of memory");
    d->n_shards = n_shards;
    d->mean = 1;
    d->ps = ps;
    d->n = ag_params_count(ps) + 1;
    d->lo = (int)((int64_t)me * n_shards / P);
    d->hi = (int)((int64_t)(me + 1) * n_shards / P);
    d->owner = calloc((size_t)n_shards, sizeof *d->owner);
    d->leaf = calloc((size_t)n_shards, sizeof *d->leaf);
    d->mem = malloc((size_t)(d->hi - d->lo) * d->n * sizeof(Real));
    d->tmp = malloc(d->n * sizeof(Real));
    AG_CHECK(d->owner && d->leaf && d->mem && d->tmp,
             "dist_grad_new: out of memory for %d shards of %zu values", d->hi - d->lo, d->n);
    for (int r = 0; r < P; r++)
        for (int i = (int)((int64_t)r * n_shards / P); i < (int)((int64_t)(r + 1) * n_shards / P);
             i++)
            d->owner[i] = r;
    for (int i = d->lo; i < d->hi; i++) d->leaf[i] = d->mem + (size_t)(i - d->lo) * d->n;
    return d;
}

void dist_grad_free(DistGrad *d) {
    if (!d) return;
    free(d->owner);
    free(d->leaf);
    free(d->mem);
    free(d->tmp);
    free(d);
}

void dist_grad_put(DistGrad *d, int shard, Real loss) {
    AG_CHECK_ARG(d);
    AG_CHECK(shard >= d->lo && shard < d->hi,
             "dist_grad_put: shard %d is not this process's (it owns %d .. %d of %d)", shard, d->lo,
             d->hi - 1, d->n_shards);
    Real *dst = d->leaf[shard];
    for (int j = 0; j < d->ps->n; j++) {
        const Tensor *p = d->ps->items[j];
        AG_CHECK(p->grad, "dist_grad_put: parameter '%s' has no gradient", p->name);
        memcpy(dst, p->grad, p->size * sizeof(Real));
        dst += p->size;
    }
    *dst = loss;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double dist_grad_reduce(DistGrad *d) {
    AG_CHECK_ARG(d);
    double t0 = now_s();
    dist_tree_sum(d->leaf, d->n_shards, d->n, d->owner, d->tmp);
    Real *sum = d->owner[0] == dist_rank() ? d->leaf[0] : d->tmp;
#ifdef AG_MPI
    if (dist_size() > 1) /* a copy of the root: the same bits everywhere */
        MPI_Bcast(sum, (int)d->n, DIST_MPI_REAL, d->owner[0], MPI_COMM_WORLD);
#endif
    const Real *src = sum;
    Real inv = (Real)(1.0 / d->n_shards);
    for (int j = 0; j < d->ps->n; j++) {
        Tensor *p = d->ps->items[j];
        if (d->n_shards == 1 || !d->mean)
            memcpy(p->grad, src, p->size * sizeof(Real));
        else
            for (size_t k = 0; k < p->size; k++) p->grad[k] = src[k] * inv;
        src += p->size;
    }
    d->reduce_s += now_s() - t0;
    d->n_reduce++;
    return d->mean ? (double)*src / d->n_shards : (double)*src;
}

double dist_grad_step(DistGrad *d, Tape *t, DistLossFn loss, void *ctx) {
    AG_CHECK_ARG(d);
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(loss);
    for (int i = d->lo; i < d->hi; i++) {
        ag_tape_reset(t);
        ag_params_zero_grad(d->ps);
        Tensor *l = loss(ctx, t, i);
        if (l) ag_backward(t, l); /* NULL: an empty shard, its gradients stay 0 */
        dist_grad_put(d, i, l ? l->data[0] : 0);
    }
    ag_tape_reset(t);
    return dist_grad_reduce(d);
}
