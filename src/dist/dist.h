/* dist.h: data-parallel training that gives the same bits for any number of processes.
 * The global batch is cut into a fixed number of micro-shards (S, chosen by the user, not by the
 * process count). Each process computes the gradients of the shards it owns; the S gradients
 * are then summed in one fixed pairwise tree over shard index (at stride 1, 2, 4, ...: node i
 * += node i + stride), whichever process holds them, and every process receives the root.
 * 1, 2 or 4 processes, and one process accumulating the S shards in turn, add the same numbers
 * in the same order, so they get the same bits.
 * Built with MPI (make MPI=1: -DAG_MPI, mpicc) the tree's edges that cross processes are MPI
 * point-to-point messages and the root is broadcast; without MPI there is one process, which
 * owns every shard (gradient accumulation). Plain MPI-3 calls only.
 * Not here: what a shard is for a model (the trainer's loss callback), the trainers' loaders
 * and checkpoints (examples/gpt/train.c, examples/translate/train*.c). Read next: dist.c, then
 * docs/mpi.md. */
#ifndef ATTOGRAD_DIST_H
#define ATTOGRAD_DIST_H

#include <stddef.h>

#include "../autograd/autograd.h"

/* ---- the processes ----
 * dist_init: MPI_Init (once; a no-op without MPI). Errors are fatal (Open MPI's default
 * handler): a process that dies makes mpirun stop the others, naming its rank.
 * dist_finalize: MPI_Finalize. dist_abort: MPI_Abort(code) (or nothing without MPI): for an
 * error only this process knows of, which would otherwise leave the others waiting. */
void dist_init(void);
void dist_finalize(void);
void dist_abort(int code);
int dist_rank(void);     /* 0 .. dist_size() - 1 */
int dist_size(void);     /* processes in the run (1 without MPI) */
int dist_with_mpi(void); /* 1 when built with MPI */

/* 1 when flag is non-zero in any process (every process gets the same answer). */
int dist_any(int flag);
/* The start of a run, agreed on: rc is this process's status (AG_OK, or an AG_ERR_* code with its
 * message in ag_last_error()). Returns AG_OK when every process started; else an error in every
 * process (a process that started gets AG_ERR_ARG, "process R: stopped: another process could
 * not start"), and *print says whether this process prints its message: process 0 always, the
 * others only when process 0 started (so that one reason is printed, not one a process).
 * Collective. */
int dist_agree(int rc, int *print);
/* v[0..n) (not NULL): each element non-zero in at most one process; every process gets the elementwise
 * sum, which is exact (x + 0 = x), so whatever order MPI adds in. */
void dist_sum_disjoint(double *v, int n);
/* v[0..n) (not NULL): every process gets the elementwise sum over the processes: integers, so
 * exact in any order. */
void dist_sum_i64(int64_t *v, int n);
/* The threads that all processes on this machine will run (the sum of their threads), and the
 * CPUs of the machine (sysconf). */
void dist_threads_on_node(int threads, int *total, int *cpus);

/* ---- the tree ----
 * dist_tree_sum: leaf[i] (n values) for the shards i in [0, S) this process owns (owner[i] ==
 * dist_rank(); the others NULL): after it, leaf[owner == owner[0]][0] holds the sum of all S
 * leaves added in the fixed tree order (the other owned leaves are overwritten by partial
 * sums); tmp: n values of scratch. Any owner map gives the same bits. Collective: every
 * process calls it with the same S, n and owner. */
void dist_tree_sum(Real **leaf, int S, size_t n, const int *owner, Real *tmp);

/* ---- a training step over shards ----
 * DistGrad keeps one flat buffer per owned shard: the gradients of every parameter of ps (in
 * list order) and the shard's loss. Shards are given to processes in contiguous runs: process
 * r owns [r S / P, (r + 1) S / P).
 * Overlap (with MPI and more than one process): the buffer is cut into buckets of whole
 * parameters (about AG_DIST_BUCKET_KB kB, default 256, from the end of the list: backward
 * finishes the last parameters first), and each bucket's tree and broadcast start, with
 * non-blocking calls, as soon as the last owned shard's backward has made its parameters'
 * gradients final (ag_backward_on_leaf), while backward goes on. The tree runs per element, so
 * the bits are the same. AG_DIST_OVERLAP=0 in the environment turns it off (the whole reduction
 * after the last backward, as without MPI). */
typedef struct DistOverlap DistOverlap; /* dist.c */

typedef struct DistGrad {
    int n_shards, lo, hi; /* S; this process owns shards lo .. hi - 1 */
    size_t n;             /* values a shard: the parameters' scalars + 1 (the loss) */
    const ParamList *ps;
    int *owner;  /* (S) */
    Real **leaf; /* (S) pointers, NULL for shards of other processes */
    Real *mem, *tmp;
    int mean; /* 1 (dist_grad_new's): the step's gradient and loss are the mean over the S shards
               * (shards of equal weight); 0: their sum (each shard's loss already weighted by
               * its share of the batch, e.g. of its tokens: the caller sets it) */
    double reduce_s;  /* wall seconds spent reducing (tree + broadcast), summed: in
                       * dist_grad_reduce, or with overlap, inside the hook during backward
                       * plus from the end of backward to the mean */
    double after_s;   /* of reduce_s, the part after the last backward ended (with overlap:
                       * what backward did not hide; without, all of it) */
    int64_t n_reduce; /* reductions */
    DistOverlap *ov;  /* the buckets and their messages; NULL: no overlap */
} DistGrad;

/* Aborts when n_shards < 1 or fewer than the processes, or when AG_DIST_OVERLAP is not 0 or 1
 * or AG_DIST_BUCKET_KB not a whole number of 1 .. 1048576. */
DistGrad *dist_grad_new(const ParamList *ps, int n_shards);
void dist_grad_free(DistGrad *d);
/* Copies the gradients of d->ps (just computed by backward for shard i alone) and its loss
 * into shard i's buffer; aborts when this process does not own shard i. */
void dist_grad_put(DistGrad *d, int shard, Real loss);
/* After every owned shard was put: the tree sum, broadcast; every parameter's grad becomes the
 * mean over the S shards (sum / S; with d->mean 0 the sum), and the mean loss (the sum) is
 * returned. Collective. */
double dist_grad_reduce(DistGrad *d);

/* The loss of shard i (a scalar on tape t, whose backward gives shard i's gradients); NULL for a
 * shard that holds no rows this step (its gradient and loss are then 0). */
typedef Tensor *(*DistLossFn)(void *ctx, Tape *t, int shard);
/* One step's gradients: for each owned shard, tape reset, zero grad, loss, backward, put; then
 * dist_grad_reduce (with overlap, the last shard's backward starts the reduction, bucket by
 * bucket, and it ends after backward). The mean (or, with d->mean 0, summed) loss, non-finite
 * when any shard's was; every parameter's grad is the mean (or sum) over the S shards.
 * Collective. */
double dist_grad_step(DistGrad *d, Tape *t, DistLossFn loss, void *ctx);

#endif
