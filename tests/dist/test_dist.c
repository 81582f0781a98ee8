/* test_dist.c: the data-parallel step of src/dist in one process (the suite does not run under
 * mpirun): the tree's order of additions (against a recursive pairwise sum written here, and
 * different from a left-to-right sum), a step over S shards of a GPT giving the full batch's
 * mean gradient and loss, weighted shards summed (empty ones adding nothing), S = 1 giving
 * exactly the plain step's bits, the one-process answers of the collectives, and the refusals.
 * Not here: 2 and 4 processes (tests/dist/test_mpi.sh, make test-mpi). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"

#ifdef AG_REAL_DOUBLE
#define TOL 1e-12
#else
#define TOL 3e-5
#endif

/* leaf i: n values whose magnitudes span 2^-20 .. 2^20, so that the order of additions shows */
static Real *make_leaf(int i, size_t n) {
    Real *v = malloc(n * sizeof(Real));
    Rng r;
    rng_seed(&r, rng_hash(99, (uint64_t)i));
    for (size_t k = 0; k < n; k++)
        v[k] = (Real)(rng_normal(&r) * (double)((uint64_t)1 << rng_below(&r, 40)) /
                      (double)((uint64_t)1 << 20));
    return v;
}

/* (l[lo] + ... ) as a pairwise tree: halves of an aligned power-of-two span */
static Real pair_ref(Real **l, int lo, int hi, int span, size_t k) {
    if (hi - lo == 1) return l[lo][k];
    int half = span / 2;
    if (lo + half >= hi) return pair_ref(l, lo, hi, half, k);
    Real a = pair_ref(l, lo, lo + half, half, k);
    Real b = pair_ref(l, lo + half, hi, half, k);
    return a + b;
}

Test(dist_tree_sum, adds_in_the_fixed_pairwise_order_not_left_to_right) {
    const size_t n = 4096;
    int differs_from_sequential = 0;
    for (int S = 1; S <= 9; S++) {
        Real **leaf = malloc((size_t)S * sizeof *leaf), **keep = malloc((size_t)S * sizeof *keep);
        int *owner = calloc((size_t)S, sizeof *owner);
        Real *tmp = malloc(n * sizeof(Real));
        for (int i = 0; i < S; i++) {
            leaf[i] = make_leaf(i, n);
            keep[i] = make_leaf(i, n);
        }
        dist_tree_sum(leaf, S, n, owner, tmp);
        int span = 1;
        while (span < S) span *= 2;
        for (size_t k = 0; k < n; k++) {
            Real want = pair_ref(keep, 0, S, span, k), seq = keep[0][k];
            for (int i = 1; i < S; i++) seq += keep[i][k];
            cr_assert(memcmp(&leaf[0][k], &want, sizeof(Real)) == 0,
                      "S %d, value %zu: tree %.17g, pairwise reference %.17g", S, k,
                      (double)leaf[0][k], (double)want);
            if (seq != want) differs_from_sequential = 1;
        }
        for (int i = 0; i < S; i++) {
            free(leaf[i]);
            free(keep[i]);
        }
        free(leaf);
        free(keep);
        free(owner);
        free(tmp);
    }
    cr_assert(differs_from_sequential, "no value where the order of additions shows");
}

/* ---- a step over shards of a GPT ---- */

static const GptConfig tiny = {
    .vocab_size = 7, .block_size = 6, .n_layer = 2, .n_head = 2, .n_embd = 8};
enum { B = 8, T = 6 };

typedef struct {
    Gpt m;
    Arena *params, *steps;
    Tape *tape;
    int x[B * T], y[B * T];
    int shards;
} Net;

static void net_init(Net *n, int shards) {
    memset(n, 0, sizeof *n);
    n->params = arena_new("params", 0);
    n->steps = arena_new("step", 0);
    n->tape = ag_tape_new(n->steps);
    Rng r;
    rng_seed(&r, 7);
    nn_gpt_init(&n->m, n->params, &r, &tiny);
    for (int i = 0; i < B * T; i++) {
        n->x[i] = (i * 5 + i / T * 3) % tiny.vocab_size;
        n->y[i] = (i * 3 + 1 + i / T) % tiny.vocab_size;
    }
    n->shards = shards;
}

static void net_free(Net *n) {
    ag_tape_free(n->tape);
    arena_free(n->steps);
    nn_gpt_free(&n->m);
    arena_free(n->params);
}

static Tensor *net_shard_loss(void *ctx, Tape *t, int i) {
    Net *n = ctx;
    int b = B / n->shards;
    return nn_gpt_loss(t, &n->m, n->x + i * b * T, n->y + i * b * T, b, T, NULL);
}

/* the full batch's gradients (a copy) and loss, the plain way */
static Real *full_batch(Net *n, double *loss) {
    ag_tape_reset(n->tape);
    ag_params_zero_grad(&n->m.params);
    Tensor *l = nn_gpt_loss(n->tape, &n->m, n->x, n->y, B, T, NULL);
    *loss = (double)l->data[0];
    ag_backward(n->tape, l);
    Real *g = malloc(ag_params_count(&n->m.params) * sizeof(Real)), *p = g;
    for (int j = 0; j < n->m.params.n; j++) {
        Tensor *w = n->m.params.items[j];
        memcpy(p, w->grad, w->size * sizeof(Real));
        p += w->size;
    }
    return g;
}

Test(dist_grad_step, gives_the_mean_gradient_and_loss_of_the_whole_batch) {
    const int shard_counts[] = {2, 4, 8};
    for (int c = 0; c < 3; c++) {
        Net n;
        net_init(&n, shard_counts[c]);
        double want_loss;
        Real *want = full_batch(&n, &want_loss);
        DistGrad *d = dist_grad_new(&n.m.params, n.shards);
        double loss = dist_grad_step(d, n.tape, net_shard_loss, &n);
        cr_assert(fabs(loss - want_loss) <= TOL * fabs(want_loss),
                  "%d shards: loss %.17g, not %.17g", n.shards, loss, want_loss);
        const Real *w = want;
        double max_abs = 0;
        for (int j = 0; j < n.m.params.n; j++) {
            Tensor *p = n.m.params.items[j];
            for (size_t k = 0; k < p->size; k++, w++) {
                cr_assert(fabs((double)p->grad[k] - (double)*w) <= TOL * (1 + fabs((double)*w)),
                          "%d shards: %s.grad[%zu] %.17g, whole batch %.17g", n.shards, p->name, k,
                          (double)p->grad[k], (double)*w);
                if (fabs((double)*w) > max_abs) max_abs = fabs((double)*w);
            }
        }
        cr_assert(max_abs > 1e-3, "the whole batch's gradient is all (nearly) zero");
        dist_grad_free(d);
        free(want);
        net_free(&n);
    }
}

Test(dist_grad_step, with_one_shard_gives_the_plain_steps_bits) {
    Net n;
    net_init(&n, 1);
    double want_loss;
    Real *want = full_batch(&n, &want_loss);
    DistGrad *d = dist_grad_new(&n.m.params, 1);
    double loss = dist_grad_step(d, n.tape, net_shard_loss, &n);
    cr_assert(loss == want_loss, "loss %.17g, not %.17g", loss, want_loss);
    const Real *w = want;
    for (int j = 0; j < n.m.params.n; j++) {
        Tensor *p = n.m.params.items[j];
        cr_assert(memcmp(p->grad, w, p->size * sizeof(Real)) == 0, "%s: other bits", p->name);
        w += p->size;
    }
    dist_grad_free(d);
    free(want);
    net_free(&n);
}

/* d->mean 0: the sum of the shards' gradients and losses (each shard's loss weighted by the
 * caller); a NULL loss is an empty shard, which adds nothing */
static Tensor *half_or_empty(void *ctx, Tape *t, int i) {
    Net *n = ctx;
    if (i >= 2) return NULL; /* shards 2 and 3: no rows */
    int b = B / 2;
    return ag_scale(t, nn_gpt_loss(t, &n->m, n->x + i * b * T, n->y + i * b * T, b, T, NULL), 0.5);
}

Test(dist_grad_step, sums_weighted_shards_and_skips_empty_ones) {
    Net n;
    net_init(&n, 4);
    double want_loss;
    Real *want = full_batch(&n, &want_loss);
    DistGrad *d = dist_grad_new(&n.m.params, 4);
    d->mean = 0;
    double loss = dist_grad_step(d, n.tape, half_or_empty, &n);
    cr_assert(fabs(loss - want_loss) <= TOL * fabs(want_loss), "loss %.17g, not %.17g", loss,
              want_loss);
    const Real *w = want;
    for (int j = 0; j < n.m.params.n; j++) {
        Tensor *p = n.m.params.items[j];
        for (size_t k = 0; k < p->size; k++, w++)
            cr_assert(fabs((double)p->grad[k] - (double)*w) <= TOL * (1 + fabs((double)*w)),
                      "%s.grad[%zu] %.17g, whole batch %.17g", p->name, k, (double)p->grad[k],
                      (double)*w);
    }
    dist_grad_free(d);
    free(want);
    net_free(&n);
}

Test(dist, one_process_without_mpirun) {
    cr_assert_eq(dist_size(), 1);
    cr_assert_eq(dist_rank(), 0);
    cr_assert_eq(dist_any(0), 0);
    cr_assert_eq(dist_any(5), 1);
    double v[3] = {1.5, 0, -2};
    dist_sum_disjoint(v, 3);
    cr_assert(v[0] == 1.5 && v[1] == 0 && v[2] == -2);
    int64_t c[2] = {(int64_t)1 << 60, -3};
    dist_sum_i64(c, 2);
    cr_assert(c[0] == (int64_t)1 << 60 && c[1] == -3);
    int print = -1;
    cr_assert_eq(dist_agree(AG_OK, &print), AG_OK);
    cr_assert_eq(print, 0);
    ag_fail(AG_ERR_IO, "x: cannot open");
    cr_assert_eq(dist_agree(AG_ERR_IO, &print), AG_ERR_IO);
    cr_assert_eq(print, 1);
    cr_assert_str_eq(ag_last_error(), "x: cannot open");
}

/* ---- misuse ---- */

Test(dist_grad_new, aborts_on_zero_shards, .signal = SIGABRT) {
    Net n;
    net_init(&n, 1);
    dist_grad_new(&n.m.params, 0);
}

Test(dist_grad_put, aborts_on_a_shard_this_process_does_not_own, .signal = SIGABRT) {
    Net n;
    net_init(&n, 2);
    DistGrad *d = dist_grad_new(&n.m.params, 2);
    dist_grad_put(d, 2, 0);
}

Test(dist_tree_sum, aborts_when_an_owned_leaf_has_no_buffer, .signal = SIGABRT) {
    Real a[4] = {0}, tmp[4];
    Real *leaf[2] = {a, NULL};
    int owner[2] = {0, 0};
    dist_tree_sum(leaf, 2, 4, owner, tmp);
}

Test(dist_tree_sum, aborts_on_a_leaf_of_a_process_that_does_not_exist, .signal = SIGABRT) {
    Real a[4] = {0}, tmp[4];
    Real *leaf[2] = {a, NULL};
    int owner[2] = {0, 1};
    dist_tree_sum(leaf, 2, 4, owner, tmp);
}
