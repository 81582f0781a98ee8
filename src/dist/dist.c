/* dist.c: the processes (MPI when built with -DAG_MPI, one process otherwise), the fixed
 * pairwise tree that sums the shards' gradients, and a training step over shards (with MPI,
 * its reduction overlapped with the last shard's backward, bucket by bucket).
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

#ifdef AG_MPI
static long env_long(const char *name, long dflt, long lo, long hi);
static DistOverlap *overlap_new(DistGrad *d);
#endif
static void overlap_free(DistOverlap *ov);

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
#ifdef AG_MPI
    if (P > 1 && env_long("AG_DIST_OVERLAP", 1, 0, 1)) d->ov = overlap_new(d);
#endif
    return d;
}

void dist_grad_free(DistGrad *d) {
    if (!d) return;
    overlap_free(d->ov);
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

/* sum: the S shards' sum (every process the same bits): each parameter's grad becomes sum / S;
 * returns the mean loss */
static double write_mean(DistGrad *d, const Real *sum) {
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
    d->n_reduce++;
    return d->mean ? (double)*src / d->n_shards : (double)*src;
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
    double mean = write_mean(d, sum);
    d->reduce_s += now_s() - t0;
    d->after_s += now_s() - t0;
    return mean;
}

/* ---- overlapping the reduction with the last owned shard's backward ----
 * Buckets: runs of whole parameters, taken from the end of the parameter list (backward makes
 * the last parameters' gradients final first; the loss value, put before backward, rides in
 * bucket 0). The tree adds element by element, so it can run on each bucket's slice of the
 * shards' buffers alone: per element, the same edges in the same order, so the same bits as
 * dist_tree_sum. This process's edges of the tree (dist_tree_sum's walk, kept in order) are run
 * for each bucket as a little state machine: an addition at once, a send as MPI_Isend, a
 * receive as MPI_Irecv then, once MPI_Test says it arrived, the addition. A bucket starts when
 * its parameters' gradients are all final in the last owned shard (ag_backward_on_leaf copies
 * each into that shard's buffer as backward finishes it); every call of the hook also moves
 * the other buckets on. The sum is broadcast with MPI_Ibcast, buckets in order (collectives
 * must start in the same order in every process): the root starts each as its tree ends, the
 * others start all of theirs at once.
 * After backward the buckets are driven to the end, waiting on the first one that waits for a
 * message: no deadlock (the lowest waiting edge of the lowest unfinished bucket has its send
 * posted). A message's tag is bucket * S + its right node. */
#ifdef AG_MPI
enum { EDGE_ADD, EDGE_SEND, EDGE_RECV };

typedef struct DistEdge {
    int kind, left, right, peer; /* node left += node right; peer: the other process */
} DistEdge;

typedef struct DistBucket {
    int p0, p1;      /* parameters p0 .. p1 - 1 of ps */
    size_t off, len; /* values off .. off + len - 1 of a shard's buffer */
    int waiting;     /* its parameters not yet final in the last owned shard */
    int edge;        /* the next of this process's edges to run */
    int recv_posted; /* edge's MPI_Irecv was started (its request: recv) */
    MPI_Request recv;
} DistBucket;

struct DistOverlap {
    DistEdge *edges; /* this process's edges of the tree, in dist_tree_sum's order */
    int n_edges, n_send_edges;
    DistBucket *b;
    int n_buckets;
    int *bucket_of;     /* (ps->n) the bucket of parameter j */
    size_t *offset;     /* (ps->n) where parameter j starts in a shard's buffer */
    char *final;        /* (ps->n) parameter j copied this step */
    int hint;           /* where the last parameter was found (the next is usually just before) */
    MPI_Request *bcast; /* (n_buckets) */
    MPI_Request *sends; /* (n_buckets * n_send_edges) */
    int n_sends, next_bcast;
    Real *sum;        /* (n) the broadcast root, in processes other than the root's */
    double in_hook_s; /* wall seconds inside the hook this step */
};

/* AG_DIST_OVERLAP / AG_DIST_BUCKET_KB: unset gives dflt; else a whole number in [lo, hi] */
static long env_long(const char *name, long dflt, long lo, long hi) {
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    AG_CHECK(*end == 0 && x >= lo && x <= hi,
             "dist_grad_new: %s=%s: not a whole number of %ld .. %ld", name, v, lo, hi);
    return x;
}

static DistOverlap *overlap_new(DistGrad *d) {
    int S = d->n_shards, me = dist_rank();
    const ParamList *ps = d->ps;
    size_t bucket = (size_t)env_long("AG_DIST_BUCKET_KB", 256, 1, 1 << 20) * 1024 / sizeof(Real);
    DistOverlap *ov = calloc(1, sizeof *ov);
    AG_CHECK(ov, "dist_grad_new: out of memory");
    int n_max = 0; /* the edges: dist_tree_sum's walk, only those that touch this process */
    for (int s = 1; s < S; s *= 2) n_max += S / (2 * s) + 1;
    ov->edges = calloc((size_t)n_max, sizeof *ov->edges);
    ov->bucket_of = calloc((size_t)ps->n + 1, sizeof *ov->bucket_of);
    ov->offset = calloc((size_t)ps->n + 1, sizeof *ov->offset);
    ov->final = calloc((size_t)ps->n + 1, 1);
    ov->b = calloc((size_t)ps->n + 1, sizeof *ov->b);
    AG_CHECK(ov->edges && ov->bucket_of && ov->offset && ov->final && ov->b,
             "dist_grad_new: out of memory");
    for (int s = 1; s < S; s *= 2)
        for (int i = 0; i + s < S; i += 2 * s) {
            int a = d->owner[i], c = d->owner[i + s];
            if (a != me && c != me) continue;
            int kind = a == c ? EDGE_ADD : c == me ? EDGE_SEND : EDGE_RECV;
            ov->edges[ov->n_edges++] = (DistEdge){kind, i, i + s, c == me ? a : c};
            ov->n_send_edges += kind == EDGE_SEND;
        }
    size_t off = 0;
    for (int j = 0; j < ps->n; j++) {
        ov->offset[j] = off;
        off += ps->items[j]->size;
    }
    /* buckets from the end of the list: bucket 0 holds the last parameters and the loss */
    for (int j = ps->n - 1; j >= 0;) {
        DistBucket *b = &ov->b[ov->n_buckets];
        b->p1 = j + 1;
        size_t len = 0;
        while (j >= 0 && len < bucket) len += ps->items[j--]->size; /* until it holds enough */
        b->p0 = j + 1;
        for (int k = b->p0; k < b->p1; k++) ov->bucket_of[k] = ov->n_buckets;
        b->off = ov->offset[b->p0];
        b->len = len + (ov->n_buckets == 0); /* the loss */
        AG_CHECK(b->len <= (size_t)0x7fffffff,
                 "dist_grad_new: a bucket of %zu values: more than an int", b->len);
        ov->n_buckets++;
    }
    void *ub = NULL;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    long tag_ub = flag ? (long)*(int *)ub : 32767;
    AG_CHECK(
        (long)ov->n_buckets * S <= tag_ub,
        "dist_grad_new: %d buckets x %d shards: more message tags than MPI's %ld (give a larger "
        "AG_DIST_BUCKET_KB)",
        ov->n_buckets, S, tag_ub);
    ov->bcast = calloc((size_t)ov->n_buckets, sizeof *ov->bcast);
    ov->sends = calloc((size_t)(ov->n_buckets * ov->n_send_edges + 1), sizeof *ov->sends);
    ov->sum = malloc(d->n * sizeof(Real));
    AG_CHECK(ov->bcast && ov->sends && ov->sum, "dist_grad_new: out of memory");
    return ov;
}

static void overlap_free(DistOverlap *ov) {
    if (!ov) return;
    free(ov->edges);
    free(ov->bucket_of);
    free(ov->offset);
    free(ov->final);
    free(ov->b);
    free(ov->bcast);
    free(ov->sends);
    free(ov->sum);
    free(ov);
}

/* Runs bucket bi's edges as far as they go without waiting. */
static void bucket_advance(DistGrad *d, int bi) {
    DistOverlap *ov = d->ov;
    DistBucket *b = &ov->b[bi];
    if (b->waiting) return;
    while (b->edge < ov->n_edges) {
        const DistEdge *e = &ov->edges[b->edge];
        int tag = bi * d->n_shards + e->right;
        if (e->kind == EDGE_ADD) {
            add_into(d->leaf[e->left] + b->off, d->leaf[e->right] + b->off, b->len);
        } else if (e->kind == EDGE_SEND) {
            MPI_Isend(d->leaf[e->right] + b->off, (int)b->len, DIST_MPI_REAL, e->peer, tag,
                      MPI_COMM_WORLD, &ov->sends[ov->n_sends++]);
        } else {
            if (!b->recv_posted) {
                MPI_Irecv(d->tmp + b->off, (int)b->len, DIST_MPI_REAL, e->peer, tag, MPI_COMM_WORLD,
                          &b->recv);
                b->recv_posted = 1;
            }
            int done = 0; /* (MPI_Test of a finished request, set to MPI_REQUEST_NULL, says done) */
            MPI_Test(&b->recv, &done, MPI_STATUS_IGNORE);
            if (!done) return;
            b->recv_posted = 0;
            add_into(d->leaf[e->left] + b->off, d->tmp + b->off, b->len);
        }
        b->edge++;
    }
}

/* Moves every bucket on; the root starts the broadcasts of finished trees, in bucket order.
 * The first bucket whose tree is not done here, or -1. */
static int overlap_progress(DistGrad *d) {
    DistOverlap *ov = d->ov;
    int first = -1, root = d->owner[0] == dist_rank();
    for (int bi = 0; bi < ov->n_buckets; bi++) {
        bucket_advance(d, bi);
        if (ov->b[bi].edge < ov->n_edges && first < 0) first = bi;
    }
    while (root && ov->next_bcast < ov->n_buckets && ov->b[ov->next_bcast].edge == ov->n_edges) {
        DistBucket *b = &ov->b[ov->next_bcast];
        MPI_Ibcast(d->leaf[0] + b->off, (int)b->len, DIST_MPI_REAL, d->owner[0], MPI_COMM_WORLD,
                   &ov->bcast[ov->next_bcast]);
        ov->next_bcast++;
    }
    if (ov->next_bcast > 0) { /* let the broadcasts move too */
        int done;
        MPI_Testall(ov->next_bcast, ov->bcast, &done, MPI_STATUSES_IGNORE);
    }
    return first;
}

/* ag_backward_on_leaf's callback: a parameter of the last owned shard is final */
static void on_leaf(void *ctx, Tensor *x) {
    DistGrad *d = ctx;
    DistOverlap *ov = d->ov;
    double t0 = now_s();
    int n = d->ps->n, j = -1;
    for (int k = 0; k < n && j < 0; k++) { /* from the hint down: usually the first look */
        int c = ((ov->hint - k) % n + n) % n;
        if (d->ps->items[c] == x) j = c;
    }
    if (j < 0 || ov->final[j]) return; /* not a parameter (an input) */
    ov->hint = j - 1;
    ov->final[j] = 1;
    memcpy(d->leaf[d->hi - 1] + ov->offset[j], x->grad, x->size * sizeof(Real));
    ov->b[ov->bucket_of[j]].waiting--;
    overlap_progress(d);
    ov->in_hook_s += now_s() - t0;
}

/* Before the last owned shard's backward: every bucket waits for its parameters; the loss is
 * in; the processes other than the root start their broadcasts (to ov->sum). */
static void overlap_begin(DistGrad *d, Real loss) {
    DistOverlap *ov = d->ov;
    for (int bi = 0; bi < ov->n_buckets; bi++) {
        DistBucket *b = &ov->b[bi];
        b->waiting = b->p1 - b->p0;
        b->edge = 0;
        b->recv_posted = 0;
        b->recv = MPI_REQUEST_NULL;
    }
    memset(ov->final, 0, (size_t)d->ps->n);
    ov->hint = d->ps->n - 1;
    ov->n_sends = 0;
    ov->next_bcast = 0;
    ov->in_hook_s = 0;
    d->leaf[d->hi - 1][d->n - 1] = loss;
    if (d->owner[0] != dist_rank()) {
        for (int bi = 0; bi < ov->n_buckets; bi++)
            MPI_Ibcast(ov->sum + ov->b[bi].off, (int)ov->b[bi].len, DIST_MPI_REAL, d->owner[0],
                       MPI_COMM_WORLD, &ov->bcast[bi]);
        ov->next_bcast = ov->n_buckets;
    }
}

/* After the last owned shard's backward: the parameters backward did not reach (zero
 * gradients) go in, the buckets are driven to the end, the mean is written. The mean loss. */
static double overlap_end(DistGrad *d) {
    DistOverlap *ov = d->ov;
    double t0 = now_s();
    for (int j = 0; j < d->ps->n; j++)
        if (!ov->final[j]) {
            Tensor *p = d->ps->items[j];
            memcpy(d->leaf[d->hi - 1] + ov->offset[j], p->grad, p->size * sizeof(Real));
            ov->b[ov->bucket_of[j]].waiting--;
        }
    for (int bi; (bi = overlap_progress(d)) >= 0;)
        MPI_Wait(&ov->b[bi].recv, MPI_STATUS_IGNORE); /* bucket bi waits for a message */
    MPI_Waitall(ov->n_buckets, ov->bcast, MPI_STATUSES_IGNORE);
    MPI_Waitall(ov->n_sends, ov->sends, MPI_STATUSES_IGNORE);
    double mean = write_mean(d, d->owner[0] == dist_rank() ? d->leaf[0] : ov->sum);
    d->reduce_s += now_s() - t0 + ov->in_hook_s;
    d->after_s += now_s() - t0;
    return mean;
}
#else
static void overlap_free(DistOverlap *ov) { (void)ov; }
#endif

double dist_grad_step(DistGrad *d, Tape *t, DistLossFn loss, void *ctx) {
    AG_CHECK_ARG(d);
    AG_CHECK_ARG(t);
    AG_CHECK_ARG(loss);
    for (int i = d->lo; i < d->hi; i++) {
        ag_tape_reset(t);
        ag_params_zero_grad(d->ps);
        Tensor *l = loss(ctx, t, i);
#ifdef AG_MPI
        if (d->ov && i == d->hi - 1) { /* the reduction starts during this backward */
            overlap_begin(d, l ? l->data[0] : 0);
            if (l) { /* NULL: an empty shard: overlap_end puts its zero gradients */
                ag_backward_on_leaf(t, on_leaf, d);
                ag_backward(t, l);
                ag_backward_on_leaf(t, NULL, NULL);
            }
            ag_tape_reset(t);
            return overlap_end(d);
        }
#endif
        if (l) ag_backward(t, l); /* NULL: an empty shard, its gradients stay 0 */
        dist_grad_put(d, i, l ? l->data[0] : 0);
    }
    ag_tape_reset(t);
    return dist_grad_reduce(d);
}
