/* grade.c: the coursework grader (docs/course.md). For every exercise (a backward kernel
 * whose body a student writes: softmax, log_softmax, cross_entropy, layernorm, rmsnorm, matmul,
 * linear, gelu, embedding, rope, attention) it runs, in the double build:
 *   1. gradient checks of the op on several shapes (odd sizes, masks, grouped heads), each
 *      against central differences with loss = sum(out * R), R a random upstream gradient, and
 *      the measure of ag_gradcheck (|a - n| / max(1, |a|, |n|) <= 1e-6, gradient not all 0);
 *      the analytic gradient is what backward adds to buffers that held random values before
 *      (a backward that writes = instead of adding += fails);
 *   2. a check of the op's module (nn's multi-head attention with masks and grouped heads, the
 *      feed-forward block, a GPT's loss, ...) against central differences;
 *   3. an end-to-end run: a tiny model that uses the op trains 8 SGD steps, and its losses
 *      must match, step for step, the losses the real kernels gave (course/expected.txt,
 *      written by `make exercise` from the real tree).
 * A failure prints the op, the case, the first failing element (index, analytic, numeric) and
 * a hint read off the two gradients: all zero, overwritten instead of added to, off by a
 * constant factor, the transpose of the right one, off by a per-row term (a missing mean or
 * weighted-sum term), elements left out, right without masks (or without grouped heads) but
 * not with them, the attention weights transposed, which inputs' gradients are wrong. The last
 * line is "N passed, N failed".
 * Each exercise runs in a child process, so a crash in a student's kernel is reported, not
 * fatal. Usage:
 *   grade [--exercises FILE] [--expected FILE] [--cases FILE]   (exit 0: all passed, 1: not)
 *   grade --record FILE      (the real kernels: writes the end-to-end losses)
 * FILE for --cases (hidden cases, by an instructor): one case a line, "op n1 n2 ... [seed S]",
 * the integers as in the built-in table below; '#' starts a comment.
 * Not here: the exercise regions (src/, "EXERCISE(") and the copy (scripts/exercise.sh). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attograd.h"

#define TOL 1e-6
#define EPS 1e-6
#define E2E_STEPS 8
#define MAX_CASES 64

typedef struct {
    int op;   /* index in ops[] */
    int a[8]; /* the op's integers (see ops[].args) */
    unsigned seed;
    int hidden; /* from --cases */
} Case;

typedef struct {
    const char *name;
    const char *args; /* what a[] holds */
    int n_args;
} OpInfo;

enum {
    SOFTMAX,
    LOG_SOFTMAX,
    CROSS_ENTROPY,
    LAYERNORM,
    RMSNORM,
    MATMUL,
    LINEAR,
    GELU,
    EMBEDDING,
    ROPE,
    ATTENTION,
    N_OPS
};
static const OpInfo ops[N_OPS] = {
    {"softmax", "rows C", 2},
    {"log_softmax", "rows C", 2},
    {"cross_entropy", "rows V ignore_every", 3},
    {"layernorm", "rows C fused", 3},
    {"rmsnorm", "rows C", 2},
    {"matmul", "BATCH M K N b_batched bt", 6},
    {"linear", "rows in out bias", 4},
    {"gelu", "rows C", 2},
    {"embedding", "V C B T padding_idx+1", 5},
    {"rope", "B T NH HS", 4},
    {"attention", "B NH NKV Tq Tk HS mask(0 none, 1 causal, 2 padding) dropout%", 8},
};

/* the built-in cases: odd sizes that divide no vector width, masks, grouped heads */
static const Case builtin[] = {
    {SOFTMAX, {3, 7}, 1, 0},
    {SOFTMAX, {5, 17}, 2, 0},
    {SOFTMAX, {2, 33}, 3, 0},
    {LOG_SOFTMAX, {3, 7}, 1, 0},
    {LOG_SOFTMAX, {4, 19}, 2, 0},
    {CROSS_ENTROPY, {5, 7, 0}, 1, 0},
    {CROSS_ENTROPY, {9, 11, 3}, 2, 0},
    {LAYERNORM, {3, 7, 0}, 1, 0},
    {LAYERNORM, {4, 33, 0}, 2, 0},
    {LAYERNORM, {3, 5, 1}, 3, 0},
    {RMSNORM, {3, 7}, 1, 0},
    {RMSNORM, {4, 33}, 2, 0},
    {MATMUL, {1, 3, 5, 4, 0, 0}, 1, 0},
    {MATMUL, {2, 5, 3, 7, 1, 0}, 2, 0},
    {MATMUL, {2, 3, 4, 5, 0, 0}, 3, 0},
    {MATMUL, {2, 3, 5, 4, 1, 1}, 4, 0},
    {MATMUL, {1, 4, 3, 6, 0, 1}, 5, 0},
    {LINEAR, {4, 5, 3, 1}, 1, 0},
    {LINEAR, {7, 3, 6, 0}, 2, 0},
    {GELU, {5, 13}, 1, 0},
    {GELU, {3, 7}, 2, 0},
    {EMBEDDING, {7, 5, 2, 6, 0}, 1, 0},
    {EMBEDDING, {5, 3, 2, 7, 3}, 2, 0},
    {ROPE, {2, 5, 2, 4}, 1, 0},
    {ROPE, {1, 7, 3, 6}, 2, 0},
    {ATTENTION, {1, 2, 2, 5, 5, 4, 0, 0}, 1, 0},
    {ATTENTION, {2, 2, 1, 5, 5, 3, 1, 0}, 2, 0},
    {ATTENTION, {2, 4, 2, 3, 6, 4, 2, 0}, 3, 0},
    {ATTENTION, {1, 2, 2, 6, 6, 4, 1, 30}, 4, 0},
};

/* ---- the ops under test: inputs and forward ---- */

static Arena *g_arena; /* inputs and parameters: outlives the tape's resets */

typedef struct {
    int n;
    Tensor *in[4];
    const char *names[4];
} Inputs;

static Tensor *input(Inputs *I, Rng *rng, const char *name, int ndim, const int *shape) {
    Tensor *t = tensor_param(g_arena, ndim, shape, name);
    rng_fill_normal(rng, t, 0, 1);
    I->names[I->n] = name;
    I->in[I->n++] = t;
    return t;
}

static void make_inputs(const Case *c, Inputs *I) {
    Rng rng;
    rng_seed(&rng, 1000 + c->seed);
    const int *a = c->a;
    memset(I, 0, sizeof *I);
    switch (c->op) {
    case SOFTMAX:
    case LOG_SOFTMAX:
    case RMSNORM:
    case GELU:
        input(I, &rng, "x", 2, (int[]){a[0], a[1]});
        if (c->op == RMSNORM) input(I, &rng, "weight", 1, (int[]){a[1]});
        break;
    case CROSS_ENTROPY: input(I, &rng, "logits", 2, (int[]){a[0], a[1]}); break;
    case LAYERNORM:
        input(I, &rng, "x", 2, (int[]){a[0], a[1]});
        if (a[2]) input(I, &rng, "f", 2, (int[]){a[0], a[1]});
        input(I, &rng, "weight", 1, (int[]){a[1]});
        input(I, &rng, "bias", 1, (int[]){a[1]});
        break;
    case MATMUL:
        input(I, &rng, "a", 3, (int[]){a[0], a[1], a[2]});
        if (a[4])
            input(I, &rng, "b", 3, a[5] ? (int[]){a[0], a[3], a[2]} : (int[]){a[0], a[2], a[3]});
        else
            input(I, &rng, "b", 2, a[5] ? (int[]){a[3], a[2]} : (int[]){a[2], a[3]});
        break;
    case LINEAR:
        input(I, &rng, "x", 2, (int[]){a[0], a[1]});
        input(I, &rng, "W", 2, (int[]){a[2], a[1]});
        if (a[3]) input(I, &rng, "bias", 1, (int[]){a[2]});
        break;
    case EMBEDDING: input(I, &rng, "W", 2, (int[]){a[0], a[1]}); break;
    case ROPE: input(I, &rng, "x", 4, (int[]){a[0], a[2], a[1], a[3]}); break;
    case ATTENTION:
        input(I, &rng, "q", 4, (int[]){a[0], a[1], a[3], a[5]});
        input(I, &rng, "k", 4, (int[]){a[0], a[2], a[4], a[5]});
        input(I, &rng, "v", 4, (int[]){a[0], a[2], a[4], a[5]});
        break;
    }
}

/* row b of the key padding: the last 1 + b keys are padding (at least one key stays) */
static uint8_t g_pad[64 * 64];

static Tensor *forward(Tape *t, Tensor **in, const Case *c) {
    const int *a = c->a;
    switch (c->op) {
    case SOFTMAX: return ag_softmax(t, in[0]);
    case LOG_SOFTMAX: return ag_log_softmax(t, in[0]);
    case CROSS_ENTROPY: {
        int targets[512];
        for (int r = 0; r < a[0]; r++)
            targets[r] = a[2] > 0 && r % a[2] == 1 ? -100 : (int)((3 * r + 1 + c->seed) % a[1]);
        return ag_cross_entropy(t, in[0], targets, -100);
    }
    case LAYERNORM:
        if (a[2]) return ag_add_layernorm(t, in[0], in[1], in[2], in[3], 1e-5);
        return ag_layernorm(t, in[0], in[1], in[2], 1e-5);
    case RMSNORM: return ag_rmsnorm(t, in[0], in[1], 1e-5);
    case MATMUL: return a[5] ? ag_matmul_bt(t, in[0], in[1]) : ag_matmul(t, in[0], in[1]);
    case LINEAR: return ag_linear(t, in[0], in[1], a[3] ? in[2] : NULL);
    case GELU: return ag_gelu(t, in[0]);
    case EMBEDDING: {
        int ids[512];
        for (int i = 0; i < a[2] * a[3]; i++) ids[i] = (int)((5 * i + 2 + c->seed) % a[0]);
        return ag_embedding_padded(t, in[0], ids, a[2], a[3], a[4] - 1);
    }
    case ROPE: return ag_rope(t, in[0], &(AgRope){.head_size = a[3], .pos0 = (int)c->seed % 3});
    case ATTENTION: {
        for (int b = 0; b < a[0]; b++)
            for (int j = 0; j < a[4]; j++) g_pad[b * a[4] + j] = j >= a[4] - 1 - b % (a[4] - 1);
        AgMask pad = {g_pad, a[0], a[4]};
        AgAttnMask m = {.causal = a[6] == 1, .key_padding = a[6] == 2 ? &pad : NULL};
        Rng rng;
        rng_seed(&rng, 77 + c->seed); /* the same dropout mask at every evaluation */
        return ag_attention(t, in[0], in[1], in[2], NULL, &m, a[7] / 100.0, &rng, NULL);
    }
    }
    return NULL;
}

/* ---- one gradient check, with everything the hints need ---- */

typedef struct {
    int n_in;
    const char *names[4];
    Tensor *in[4];
    double *ana[4], *num[4]; /* per input, size elements: the increment, the numeric gradient */
    double *ana0[4];         /* the analytic gradient from zeroed buffers */
    int pass;
    int pass0;     /* ana0 matches num */
    int overwrote; /* ana != ana0: the increment depends on what the buffer held */
    int bad_input; /* the first failing element: input, index */
    size_t bad_index;
    double worst;
} Check;

typedef Tensor *(*ForwardFn)(Tape *t, Tensor **in, const void *ctx);

static double weighted(const Tensor *y, const Tensor *R) {
    double s = 0;
    for (size_t i = 0; i < y->size; i++) s += (double)y->data[i] * (double)R->data[i];
    return s;
}

/* |a - n| / max(1, |a|, |n|), ag_gradcheck's measure */
static double rel_err(double a, double n) {
    return fabs(a - n) / fmax(1.0, fmax(fabs(a), fabs(n)));
}

/* one backward of sum(f(in) * R) into the inputs' gradient buffers, each filled first with
 * zeros (fill NULL) or with random values drawn from fill; out[i][e] = after - before */
static void backward_increment(Tape *t, ForwardFn f, const void *ctx, Tensor **in, int n_in,
                               Tensor *R, Rng *fill, double **out) {
    ag_tape_reset(t);
    Tensor *y = f(t, in, ctx);
    for (int i = 0; i < n_in; i++) {
        for (size_t e = 0; e < in[i]->size; e++) in[i]->grad[e] = fill ? (Real)rng_normal(fill) : 0;
        for (size_t e = 0; e < in[i]->size; e++) out[i][e] = (double)in[i]->grad[e];
    }
    ag_backward(t, ag_sum(t, ag_mul(t, y, R)));
    for (int i = 0; i < n_in; i++)
        for (size_t e = 0; e < in[i]->size; e++) out[i][e] = (double)in[i]->grad[e] - out[i][e];
    ag_tape_reset(t);
}

/* Analytic and numeric gradients of sum(f(in) * R) for every input element. The analytic
 * gradient is what one backward adds to the inputs' gradient buffers, which hold random values
 * before it (as when another op has added its share already): a backward that writes (=)
 * instead of adding (+=) loses them and fails. The same backward from zeroed buffers (ana0)
 * tells that mistake apart from a wrong formula. */
static void run_check(Tape *t, ForwardFn f, const void *ctx, Tensor **in, const char **names,
                      int n_in, unsigned seed, Check *k) {
    memset(k, 0, sizeof *k);
    k->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        k->in[i] = in[i];
        k->names[i] = names[i];
        k->ana[i] = malloc(in[i]->size * sizeof(double));
        k->ana0[i] = malloc(in[i]->size * sizeof(double));
        k->num[i] = malloc(in[i]->size * sizeof(double));
    }
    ag_tape_reset(t);
    Tensor *y = f(t, in, ctx);
    Arena *ra = arena_new("R", 0);
    Tensor *R = tensor_new(ra, y->ndim, y->shape, "R");
    Rng rng;
    rng_seed(&rng, 555 + seed);
    rng_fill_normal(&rng, R, 0, 1);
    backward_increment(t, f, ctx, in, n_in, R, NULL, k->ana0);
    Rng fill;
    rng_seed(&fill, 9000 + seed);
    backward_increment(t, f, ctx, in, n_in, R, &fill, k->ana);
    k->pass = k->pass0 = 1;
    k->bad_input = -1;
    double maxabs = 0;
    for (int i = 0; i < n_in; i++)
        for (size_t e = 0; e < in[i]->size; e++) {
            Real orig = in[i]->data[e];
            in[i]->data[e] = orig + (Real)EPS;
            ag_tape_reset(t);
            double hi = weighted(f(t, in, ctx), R);
            in[i]->data[e] = orig - (Real)EPS;
            ag_tape_reset(t);
            double lo = weighted(f(t, in, ctx), R);
            in[i]->data[e] = orig;
            double n = (hi - lo) / (2 * EPS), an = k->ana[i][e], an0 = k->ana0[i][e];
            k->num[i][e] = n;
            double err = rel_err(an, n);
            if (!(err <= TOL) && k->bad_input < 0) {
                k->bad_input = i;
                k->bad_index = e;
            }
            if (!(err <= k->worst)) k->worst = err;
            if (!(rel_err(an0, n) <= TOL)) k->pass0 = 0;
            /* the same sum added to other starting values differs by rounding only */
            if (!(fabs(an - an0) <= 1e-9 * fmax(1.0, fabs(an0)))) k->overwrote = 1;
            maxabs = fmax(maxabs, fabs(an));
        }
    ag_tape_reset(t);
    arena_free(ra);
    if (k->bad_input >= 0 || !(maxabs > 0)) k->pass = 0;
    if (k->bad_input < 0 && !(maxabs > 0)) k->bad_input = 0;
}

static void free_check(Check *k) {
    for (int i = 0; i < k->n_in; i++) {
        free(k->ana[i]);
        free(k->ana0[i]);
        free(k->num[i]);
    }
}

/* ---- hints: what the analytic gradient a is, compared with the numeric n ---- */

static int close_arrays(const double *a, const double *b, size_t n) {
    for (size_t e = 0; e < n; e++)
        if (!(fabs(a[e] - b[e]) / fmax(1.0, fmax(fabs(a[e]), fabs(b[e]))) <= 1e-5)) return 0;
    return 1;
}

/* a == c n for one c != 1: returns 1 and c */
static int const_factor(const double *a, const double *n, size_t len, double *c) {
    double an = 0, nn = 0;
    for (size_t e = 0; e < len; e++) {
        an += a[e] * n[e];
        nn += n[e] * n[e];
    }
    if (!(nn > 0)) return 0;
    *c = an / nn;
    if (fabs(*c - 1) < 1e-3) return 0;
    for (size_t e = 0; e < len; e++)
        if (!(fabs(a[e] - *c * n[e]) <= 1e-6 * fmax(1.0, fabs(a[e])))) return 0;
    return 1;
}

/* a holds n's transpose (last two dims swapped, stored in n's memory); or, square, a == n^T */
static int transposed(const double *a, const double *n, const Tensor *x) {
    if (x->ndim < 2) return 0;
    int R = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1];
    if (R == 1 || C == 1) return 0;
    size_t batch = x->size / ((size_t)R * C);
    for (size_t p = 0; p < batch; p++)
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                double want = n[p * R * C + (size_t)r * C + c];
                double got = a[p * R * C + (size_t)c * R + r];
                if (!(fabs(got - want) <= 1e-6 * fmax(1.0, fabs(want)))) return 0;
            }
    return 1;
}

/* a - n, in every row of C, is a combination of the basis vectors of that row (k of them,
 * basis(row, j, out)); least squares per row, then the residual */
typedef void (*BasisFn)(const Case *c, Tensor **in, size_t row, int C, double *b1, double *b2);
static int row_combination(const double *a, const double *n, size_t rows, int C, int k,
                           BasisFn basis, const Case *c, Tensor **in) {
    double *b1 = malloc((size_t)C * sizeof(double)), *b2 = malloc((size_t)C * sizeof(double));
    int ok = 1, any = 0;
    for (size_t r = 0; r < rows && ok; r++) {
        basis(c, in, r, C, b1, b2);
        double g11 = 0, g12 = 0, g22 = 0, d1 = 0, d2 = 0, dd = 0;
        for (int j = 0; j < C; j++) {
            double d = a[r * C + j] - n[r * C + j];
            g11 += b1[j] * b1[j];
            g12 += b1[j] * b2[j];
            g22 += b2[j] * b2[j];
            d1 += b1[j] * d;
            d2 += b2[j] * d;
            dd += d * d;
        }
        double x1 = 0, x2 = 0;
        if (k == 1) {
            x1 = g11 > 0 ? d1 / g11 : 0;
        } else {
            double det = g11 * g22 - g12 * g12;
            if (fabs(det) > 1e-12) {
                x1 = (d1 * g22 - d2 * g12) / det;
                x2 = (g11 * d2 - g12 * d1) / det;
            }
        }
        double res = 0;
        for (int j = 0; j < C; j++) {
            double d = a[r * C + j] - n[r * C + j] - x1 * b1[j] - (k == 2 ? x2 * b2[j] : 0);
            res += d * d;
        }
        if (dd > 1e-10) any = 1;
        if (!(sqrt(res) <= 1e-6 * fmax(1.0, sqrt(dd)))) ok = 0;
    }
    free(b1);
    free(b2);
    return ok && any;
}

static void basis_softmax(const Case *c, Tensor **in, size_t row, int C, double *b1, double *b2) {
    (void)c;
    const Real *x = in[0]->data + row * C;
    double m = -INFINITY, s = 0;
    for (int j = 0; j < C; j++) m = fmax(m, (double)x[j]);
    for (int j = 0; j < C; j++) s += exp((double)x[j] - m);
    for (int j = 0; j < C; j++) b1[j] = b2[j] = exp((double)x[j] - m) / s; /* y, e^(log y) */
}
static void basis_norm(const Case *c, Tensor **in, size_t row, int C, double *b1, double *b2) {
    const Real *x = in[0]->data + row * C;
    const Real *f = c->op == LAYERNORM && c->a[2] ? in[1]->data + row * C : NULL;
    int centred = c->op == LAYERNORM;
    double mean = 0, var = 0;
    for (int j = 0; j < C; j++) mean += (double)x[j] + (f ? (double)f[j] : 0);
    mean = centred ? mean / C : 0;
    for (int j = 0; j < C; j++) {
        double d = (double)x[j] + (f ? (double)f[j] : 0) - mean;
        var += d * d;
    }
    double rstd = 1 / sqrt(var / C + 1e-5);
    for (int j = 0; j < C; j++) {
        double xhat = ((double)x[j] + (f ? (double)f[j] : 0) - mean) * rstd;
        if (centred) {
            b1[j] = 1;
            b2[j] = xhat;
        } else {
            b1[j] = xhat;
            b2[j] = 0;
        }
    }
}

/* For attention with Tq == Tk: is v's gradient A gy instead of A^T gy (A the attention
 * weights after dropout)? A is found by probing the forward with one-hot values. */
static int attention_p_transposed(Tape *t, const Case *c, Tensor **in, const double *gv) {
    const int *a = c->a;
    int B = a[0], NH = a[1], NKV = a[2], T = a[3], HS = a[5], grp = NH / NKV;
    if (a[3] != a[4]) return 0;
    Tensor *v = in[2];
    Real *saved = malloc(v->size * sizeof(Real));
    memcpy(saved, v->data, v->size * sizeof(Real));
    double *W = calloc((size_t)B * NH * T * T, sizeof(double)); /* W[b,h,i,j] */
    for (int j = 0; j < T; j++) {
        memset(v->data, 0, v->size * sizeof(Real));
        for (int b = 0; b < B; b++)
            for (int g = 0; g < NKV; g++) v->data[(((size_t)b * NKV + g) * T + j) * HS] = 1;
        ag_tape_reset(t);
        Tensor *y = forward(t, in, c);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < T; i++)
                    W[(((size_t)b * NH + h) * T + i) * T + j] =
                        (double)y->data[(((size_t)b * NH + h) * T + i) * HS];
    }
    memcpy(v->data, saved, v->size * sizeof(Real));
    ag_tape_reset(t);
    /* R as run_check drew it */
    Arena *ra = arena_new("R", 0);
    Tensor *R = tensor_new(ra, 4, (int[]){B, NH, T, HS}, "R");
    Rng rng;
    rng_seed(&rng, 555 + c->seed);
    rng_fill_normal(&rng, R, 0, 1);
    double *want = calloc(v->size, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int j = 0; j < T; j++)
                for (int i = 0; i < T; i++)
                    for (int d = 0; d < HS; d++) /* gv_j += W_ji R_i: the transposed weights */
                        want[(((size_t)b * NKV + h / grp) * T + j) * HS + d] +=
                            W[(((size_t)b * NH + h) * T + j) * T + i] *
                            (double)R->data[(((size_t)b * NH + h) * T + i) * HS + d];
    int yes = close_arrays(gv, want, v->size);
    free(want);
    free(W);
    free(saved);
    arena_free(ra);
    return yes;
}

/* ---- printing ---- */

static void case_desc(const Case *c, char *buf, size_t n) {
    int len = snprintf(buf, n, "%s(", c->hidden ? "hidden case " : "");
    for (int i = 0; i < ops[c->op].n_args && len < (int)n; i++)
        len += snprintf(buf + len, n - (size_t)len, "%s%d", i ? "," : "", c->a[i]);
    if (len < (int)n) snprintf(buf + len, n - (size_t)len, ") seed %u", c->seed);
}

static void index_str(const Tensor *x, size_t e, char *buf, size_t n) {
    int idx[AG_MAX_DIMS];
    for (int d = x->ndim - 1; d >= 0; d--) {
        idx[d] = (int)(e % (size_t)x->shape[d]);
        e /= (size_t)x->shape[d];
    }
    int len = snprintf(buf, n, "[");
    for (int d = 0; d < x->ndim && len < (int)n; d++)
        len += snprintf(buf + len, n - (size_t)len, "%s%d", d ? "," : "", idx[d]);
    if (len < (int)n) snprintf(buf + len, n - (size_t)len, "]");
}

/* "q's and k's": names[j] for the inputs j whose bit is set in mask, joined */
static void name_list(const Check *k, unsigned mask, char *buf, size_t n) {
    int total = 0, seen = 0;
    for (int j = 0; j < k->n_in; j++) total += (mask >> j) & 1;
    buf[0] = 0;
    for (int j = 0; j < k->n_in; j++) {
        if (!((mask >> j) & 1)) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s's",
                 seen == 0           ? ""
                 : seen == total - 1 ? " and "
                                     : ", ",
                 k->names[j]);
        seen++;
    }
}

/* input i's analytic gradient is right except where it is exactly 0: returns how many such
 * elements there are (0: not that pattern) */
static size_t left_out(const Check *k, int i) {
    size_t zeros = 0;
    for (size_t e = 0; e < k->in[i]->size; e++) {
        if (rel_err(k->ana[i][e], k->num[i][e]) <= TOL) continue;
        if (k->ana[i][e] != 0) return 0;
        zeros++;
    }
    return zeros;
}

/* the hint for a failed check of op c (NULL c: a module, generic hints only); twin: which
 * variant of the case passes (TWIN_MASKS: without its masks, ignored rows or dropout;
 * TWIN_GROUPS: attention with one key/value head per query head), or 0 */
enum { TWIN_MASKS = 1, TWIN_GROUPS = 2 };
static void hint(const Check *k, const Case *c, Tape *t, Tensor **in, int twin, char *buf,
                 size_t n) {
    int i = k->bad_input;
    const Tensor *x = k->in[i];
    double f;
    size_t zeros;
    int allzero = 1;
    for (int j = 0; j < k->n_in; j++)
        for (size_t e = 0; e < k->in[j]->size; e++) allzero &= k->ana[j][e] == 0;
    if (allzero)
        snprintf(buf, n,
                 "zero gradient: every input's gradient is 0 (is the body still the stub? "
                 "gradients are added into the buffers, +=)");
    else if (k->overwrote)
        snprintf(buf, n,
                 "overwrote the gradient instead of adding to it (+=): the buffers held "
                 "values before this backward (another op's share) and lost them; from "
                 "zeroed buffers the values are %s",
                 k->pass0 ? "right" : "wrong too");
    else if (twin == TWIN_MASKS)
        snprintf(buf, n,
                 "mask forgotten: the same case without masks, ignored rows or dropout "
                 "passes; the backward must skip (or zero) what the forward masked, "
                 "ignored or dropped");
    else if (twin == TWIN_GROUPS)
        snprintf(buf, n,
                 "grouped heads not summed: the same case with one key/value head per query "
                 "head passes; key/value head g is read by the query heads g*NH/NKV to "
                 "(g+1)*NH/NKV - 1, and its gradient is the sum of theirs");
    else if (c && c->op == ATTENTION && i == 2 && attention_p_transposed(t, c, in, k->ana[2]))
        snprintf(buf, n,
                 "off by a transpose: v's gradient is A gy with the attention weights A "
                 "(Tq, Tk) transposed; it is A^T gy (gv_j sums P_ij over queries i)");
    else if (transposed(k->ana[i], k->num[i], x))
        snprintf(buf, n,
                 "off by a transpose: %s's gradient holds the transpose of the right "
                 "one (rows and columns swapped)",
                 k->names[i]);
    else if (const_factor(k->ana[i], k->num[i], x->size, &f))
        snprintf(buf, n,
                 "off by a constant factor: analytic = %.6g x numeric (a missing 1/n, "
                 "1/sqrt(HS) or 1/(1-p)? a sign?)",
                 f);
    else if (c && (c->op == SOFTMAX || c->op == LOG_SOFTMAX) && i == 0 &&
             row_combination(k->ana[0], k->num[0], tensor_rows(x), x->shape[x->ndim - 1], 1,
                             basis_softmax, c, in))
        snprintf(buf, n,
                 "off by a multiple of softmax(x) in each row: the term with the row's "
                 "sum (%s) is missing or wrong",
                 c->op == SOFTMAX ? "sum_j gy_j y_j, subtracted from gy" : "sum_j gy_j");
    else if (c && (c->op == LAYERNORM || c->op == RMSNORM) && (i == 0 || (c->a[2] && i == 1)) &&
             row_combination(k->ana[i], k->num[i], tensor_rows(x), x->shape[x->ndim - 1],
                             c->op == LAYERNORM ? 2 : 1, basis_norm, c, in))
        snprintf(buf, n,
                 "off by %s in each row: the terms that flow through the row's %s are "
                 "missing or wrong",
                 c->op == LAYERNORM ? "a + b xhat" : "b xhat",
                 c->op == LAYERNORM ? "mean and variance (the mean terms)" : "mean square");
    else if ((zeros = left_out(k, i)) > 0) {
        char idx[64];
        index_str(x, k->bad_index, idx, sizeof idx);
        snprintf(buf, n,
                 "elements left out: %s's gradient is right except at %zu elements where it "
                 "is 0 (the first %s): does a loop stop early, or skip a row or a column?",
                 k->names[i], zeros, idx);
    } else {
        int extra = 0; /* analytic nonzero where the output does not depend on the input */
        for (size_t e = 0; e < x->size; e++) extra |= k->num[i][e] == 0 && k->ana[i][e] != 0;
        unsigned wrong = 0;
        for (int j = 0; j < k->n_in; j++)
            for (size_t e = 0; e < k->in[j]->size; e++)
                if (!(rel_err(k->ana[j][e], k->num[j][e]) <= TOL)) wrong |= 1u << j;
        unsigned right = ((1u << k->n_in) - 1) & ~wrong;
        if (extra)
            snprintf(buf, n,
                     "a gradient where the output does not depend on %s (a masked, "
                     "padded or ignored position?)",
                     k->names[i]);
        else if (wrong && right) {
            char w[160], r[160];
            name_list(k, wrong, w, sizeof w);
            name_list(k, right, r, sizeof r);
            snprintf(buf, n, "wrong values in %s gradient%s only; %s %s right", w,
                     wrong & (wrong - 1) ? "s" : "", r, right & (right - 1) ? "are" : "is");
        } else
            snprintf(buf, n, "wrong values (compare with the derivation in docs/backprop.md)");
    }
}

static void print_failure(const char *op, const char *what, const Check *k, const char *h) {
    char idx[64];
    const Tensor *x = k->in[k->bad_input];
    index_str(x, k->bad_index, idx, sizeof idx);
    printf("FAIL  %-13s %s\n      input %s %s, first failing element %zu %s: analytic %.10g, "
           "numeric %.10g\n      hint: %s\n",
           op, what, k->names[k->bad_input], tensor_shape_str(x), k->bad_index, idx,
           k->ana[k->bad_input][k->bad_index], k->num[k->bad_input][k->bad_index], h);
}

/* ---- the op's gradient checks ---- */

static Tensor *case_forward(Tape *t, Tensor **in, const void *ctx) { return forward(t, in, ctx); }

/* the same case without masks, ignored rows or dropout, when it had any */
static int unmasked_twin(const Case *c, Case *twin) {
    *twin = *c;
    if (c->op == ATTENTION && (c->a[6] || c->a[7])) {
        twin->a[6] = twin->a[7] = 0;
        return 1;
    }
    if (c->op == CROSS_ENTROPY && c->a[2]) {
        twin->a[2] = 0;
        return 1;
    }
    if (c->op == EMBEDDING && c->a[4]) {
        twin->a[4] = 0;
        return 1;
    }
    return 0;
}

/* attention with grouped heads (NKV < NH): the same case with one key/value head a query head */
static int ungrouped_twin(const Case *c, Case *twin) {
    *twin = *c;
    if (c->op != ATTENTION || c->a[2] == c->a[1]) return 0;
    twin->a[2] = c->a[1];
    return 1;
}

/* whether the variant twin of a failed case passes */
static int twin_passes(Tape *t, const Case *twin) {
    Inputs J;
    make_inputs(twin, &J);
    Check k2;
    run_check(t, case_forward, twin, J.in, J.names, J.n, twin->seed, &k2);
    int pass = k2.pass;
    free_check(&k2);
    return pass;
}

static int grade_case(Tape *t, const Case *c) {
    Inputs I;
    make_inputs(c, &I);
    Check k;
    run_check(t, case_forward, c, I.in, I.names, I.n, c->seed, &k);
    char what[160], h[400];
    case_desc(c, what, sizeof what);
    char label[200];
    snprintf(label, sizeof label, "gradcheck %s", what);
    if (k.pass) {
        printf("pass  %-13s %s (worst error %.2g)\n", ops[c->op].name, label, k.worst);
    } else {
        Case twin;
        int which = 0;
        if (unmasked_twin(c, &twin) && twin_passes(t, &twin))
            which = TWIN_MASKS;
        else if (ungrouped_twin(c, &twin) && twin_passes(t, &twin))
            which = TWIN_GROUPS;
        hint(&k, c, t, I.in, which, h, sizeof h);
        print_failure(ops[c->op].name, label, &k, h);
    }
    int pass = k.pass;
    free_check(&k);
    return pass;
}

enum { E2E_GPT2, E2E_LLAMA, E2E_OPS, N_E2E };
static const char *e2e_names[N_E2E] = {"gpt2", "llama", "ops"};
static const char *e2e_desc[N_E2E] = {
    "a GPT-2 (1 layer, d 8) trains 8 SGD steps",
    "a LLaMA GPT (RMSNorm, RoPE, grouped heads) trains 8 SGD steps",
    "a classifier from ops (matmul, softmax attention, log-softmax) trains 8 SGD steps"};
static const char *e2e_uses[N_E2E] = {"attention cross_entropy embedding gelu layernorm linear",
                                      "attention cross_entropy embedding linear rmsnorm rope",
                                      "log_softmax matmul softmax"};

/* ---- module checks: the op inside the module that uses it ---- */

typedef struct {
    int op;
    const char *what;
    Tensor *(*fn)(Tape *t, Tensor **in, const void *ctx);
    int (*setup)(Inputs *I, void *state);
} Module;

static MultiHeadAttention g_mha;
static FeedForward g_ffn;
static Gpt g_gpt;
static AgMask g_mha_pad;
static uint8_t g_mha_pad_bytes[2 * 5];

/* softmax, matmul: attention built from tape ops as the formula reads (causal mask added) */
static Tensor *mod_attention_ops(Tape *t, Tensor **in, const void *ctx) {
    (void)ctx;
    int T = in[0]->shape[2];
    Tensor *s = ag_scale(t, ag_matmul_bt(t, in[0], in[1]), 1 / sqrt((double)in[0]->shape[3]));
    Tensor *mask = tensor_new(t->arena, 4, s->shape, "causal");
    for (size_t e = 0; e < mask->size; e++)
        mask->data[e] = (int)(e % T) > (int)(e / T % T) ? (Real)-INFINITY : 0;
    return ag_matmul(t, ag_softmax(t, ag_add(t, s, mask)), in[2]);
}
static int setup_attention_ops(Inputs *I, void *st) {
    (void)st;
    Rng rng;
    rng_seed(&rng, 11);
    memset(I, 0, sizeof *I);
    for (int i = 0; i < 3; i++)
        input(I, &rng, i == 0 ? "q" : i == 1 ? "k" : "v", 4, (int[]){2, 2, 5, 3});
    return 3;
}
/* log_softmax: the negative log-likelihood of a (2, 5, 7) batch, ignoring one position */
static Tensor *mod_nll(Tape *t, Tensor **in, const void *ctx) {
    (void)ctx;
    Tensor *lp = ag_log_softmax(t, in[0]);
    Tensor *pick = tensor_new(t->arena, 3, lp->shape, "onehot");
    tensor_fill(pick, 0);
    for (int r = 0; r < 10; r++)
        if (r != 3) pick->data[r * 7 + (r * 3 + 2) % 7] = (Real)(-1.0 / 9);
    return ag_sum(t, ag_mul(t, lp, pick));
}
static int setup_nll(Inputs *I, void *st) {
    (void)st;
    Rng rng;
    rng_seed(&rng, 12);
    memset(I, 0, sizeof *I);
    input(I, &rng, "logits", 3, (int[]){2, 5, 7});
    return 1;
}
/* attention: nn's multi-head attention, 4 heads reading 2 key/value heads, causal and a key
 * padding mask, d_model 8 */
static Tensor *mod_mha(Tape *t, Tensor **in, const void *ctx) {
    (void)ctx;
    AgAttnMask m = {.key_padding = &g_mha_pad, .causal = 1};
    return nn_mha_forward(t, &g_mha, in[0], in[0], in[0], &m, NULL);
}
static ParamList g_pl;
static int setup_mha(Inputs *I, void *st) {
    (void)st;
    Rng rng;
    rng_seed(&rng, 13);
    ag_params_init(&g_pl);
    NnBuilder b = nn_builder(g_arena, &g_pl, &rng);
    nn_mha_init(&g_mha, &b, "attn", &(MhaConfig){.d_model = 8, .n_heads = 4, .n_kv_heads = 2});
    for (int i = 0; i < 10; i++) g_mha_pad_bytes[i] = (i == 4) || (i >= 8);
    g_mha_pad = (AgMask){g_mha_pad_bytes, 2, 5};
    memset(I, 0, sizeof *I);
    input(I, &rng, "x", 3, (int[]){2, 5, 8});
    I->names[I->n] = "k_proj.weight";
    I->in[I->n++] = g_mha.k_proj.weight;
    return 2;
}
/* linear, gelu: nn's feed-forward block, linear2(gelu(linear1(x))) */
static Tensor *mod_ffn(Tape *t, Tensor **in, const void *ctx) {
    (void)ctx;
    return nn_ffn(t, &g_ffn, in[0], NULL);
}
static int setup_ffn(Inputs *I, void *st) {
    (void)st;
    Rng rng;
    rng_seed(&rng, 14);
    ag_params_init(&g_pl);
    NnBuilder b = nn_builder(g_arena, &g_pl, &rng);
    nn_ffn_init(&g_ffn, &b, "ffn", 5, 7, NN_GELU, 0);
    memset(I, 0, sizeof *I);
    input(I, &rng, "x", 3, (int[]){2, 3, 5});
    I->names[I->n] = "linear1.weight";
    I->in[I->n++] = g_ffn.linear1.weight;
    I->names[I->n] = "linear2.bias";
    I->in[I->n++] = g_ffn.linear2.bias;
    return 3;
}
/* cross_entropy, embedding, layernorm (GPT-2 style) and rmsnorm, rope (LLaMA style): a GPT's
 * loss, one layer, d 8, 2 heads, vocab 11, T 5, one ignored target */
static const int g_idx[10] = {1, 4, 2, 9, 3, 0, 7, 7, 5, 10};
static const int g_tgt[10] = {4, 2, 9, 3, -1, 7, 7, 5, 10, 6};
static Tensor *mod_gpt(Tape *t, Tensor **in, const void *ctx) {
    (void)in;
    (void)ctx;
    return nn_gpt_loss(t, &g_gpt, g_idx, g_tgt, 2, 5, NULL);
}
static int g_gpt_live; /* g_gpt holds a model (freed before the next one) */
static void gpt_init(int llama, unsigned seed) {
    if (g_gpt_live) nn_gpt_free(&g_gpt);
    g_gpt_live = 1;
    Rng rng;
    rng_seed(&rng, seed);
    GptConfig cfg = {.style = llama ? NN_LLAMA : NN_GPT2,
                     .vocab_size = 11,
                     .block_size = 8,
                     .n_layer = 1,
                     .n_head = 2,
                     .n_embd = 8,
                     .n_kv_head = llama ? 1 : 0};
    nn_gpt_init(&g_gpt, g_arena, &rng, &cfg);
}
static int setup_gpt(Inputs *I, void *st) {
    int llama = *(int *)st;
    gpt_init(llama, 15);
    memset(I, 0, sizeof *I);
    const char *names[2][2] = {{"transformer.h.0.ln_1.weight", "transformer.wte.weight"},
                               {"layers.0.attention_norm.weight", "layers.0.attention.wk.weight"}};
    for (int j = 0; j < 2; j++) {
        Tensor *p = ag_params_find(&g_gpt.params, names[llama][j]);
        if (!p) {
            fprintf(stderr, "grade: no parameter %s\n", names[llama][j]);
            exit(2);
        }
        /* a norm's weight away from 1, so that its gradient matters everywhere */
        if (j == 0)
            for (size_t e = 0; e < p->size; e++) p->data[e] += (Real)(0.1 * (double)(e % 5));
        I->names[I->n] = names[llama][j];
        I->in[I->n++] = p;
    }
    return 2;
}

static int grade_module(Tape *t, int op) {
    Inputs I;
    int llama = op == RMSNORM || op == ROPE;
    Tensor *(*fn)(Tape *, Tensor **, const void *) = NULL;
    const char *what = NULL, *uses = NULL;
    switch (op) {
    case SOFTMAX:
    case MATMUL:
        setup_attention_ops(&I, NULL);
        fn = mod_attention_ops;
        what = "module: attention from ops, q k v (2,2,5,3), causal mask";
        uses = "matmul softmax";
        break;
    case LOG_SOFTMAX:
        setup_nll(&I, NULL);
        fn = mod_nll;
        what = "module: negative log-likelihood (2,5,7), one position ignored";
        uses = "log_softmax";
        break;
    case ATTENTION:
        setup_mha(&I, NULL);
        fn = mod_mha;
        what = "module: nn_mha, 4 heads on 2 kv heads, causal + key padding, x (2,5,8)";
        uses = "attention linear";
        break;
    case LINEAR:
    case GELU:
        setup_ffn(&I, NULL);
        fn = mod_ffn;
        what = "module: nn_ffn, linear2(gelu(linear1(x))), x (2,3,5)";
        uses = "gelu linear";
        break;
    default:
        setup_gpt(&I, &llama);
        fn = mod_gpt;
        what = llama ? "module: LLaMA GPT loss (RMSNorm, RoPE, 2 heads on 1 kv head)"
                     : "module: GPT-2 loss (LayerNorm, GELU MLP, tied embeddings)";
        uses = e2e_uses[llama ? E2E_LLAMA : E2E_GPT2];
    }
    Check k;
    run_check(t, fn, NULL, I.in, I.names, I.n, 99, &k);
    if (k.pass) {
        printf("pass  %-13s %s (worst error %.2g)\n", ops[op].name, what, k.worst);
    } else {
        char h[400];
        hint(&k, NULL, t, I.in, 0, h, sizeof h);
        print_failure(ops[op].name, what, &k, h);
        printf("      the module runs: %s (a failing gradient check there comes first)\n", uses);
    }
    int pass = k.pass;
    free_check(&k);
    return pass;
}

/* ---- end to end: a tiny model trains E2E_STEPS SGD steps ---- */

static int e2e_of(int op) {
    if (op == RMSNORM || op == ROPE) return E2E_LLAMA;
    if (op == SOFTMAX || op == LOG_SOFTMAX || op == MATMUL) return E2E_OPS;
    return E2E_GPT2;
}

/* the ops model: 6 sequences of 4 tokens (one-hot, 5 classes); scores q k^T with causal mask,
 * softmax, times v, the last position's row times Wo -> log-softmax -> NLL of the class */
static Tensor *ops_model_loss(Tape *t, Tensor **p) {
    Tensor *x = tensor_new(t->arena, 3, (int[]){6, 4, 5}, "x");
    Tensor *pick = tensor_new(t->arena, 3, (int[]){6, 4, 5}, "target");
    tensor_fill(x, 0);
    tensor_fill(pick, 0);
    for (int s = 0; s < 6; s++) {
        for (int i = 0; i < 4; i++) x->data[(s * 4 + i) * 5 + (s * 7 + i * 3) % 5] = 1;
        pick->data[(s * 4 + 3) * 5 + (s * 2 + 1) % 5] = (Real)(-1.0 / 6); /* last position */
    }
    Tensor *q = ag_matmul(t, x, p[0]), *k = ag_matmul(t, x, p[1]), *v = ag_matmul(t, x, p[2]);
    Tensor *s = ag_scale(t, ag_matmul_bt(t, q, k), 0.5);
    Tensor *mask = tensor_new(t->arena, 3, s->shape, "causal");
    for (size_t e = 0; e < mask->size; e++)
        mask->data[e] = (int)(e % 4) > (int)(e / 4 % 4) ? (Real)-INFINITY : 0;
    Tensor *h = ag_matmul(t, ag_softmax(t, ag_add(t, s, mask)), v); /* (6,4,4) */
    Tensor *lp = ag_log_softmax(t, ag_matmul(t, h, p[3]));          /* (6,4,5) */
    return ag_sum(t, ag_mul(t, lp, pick));
}

static void e2e_run(int which, double *loss) {
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    ParamList *pl = &g_pl;
    Tensor *p[4];
    Rng rng;
    rng_seed(&rng, 21);
    if (which == E2E_OPS) {
        ag_params_init(pl);
        const int shapes[4][2] = {{5, 4}, {5, 4}, {5, 4}, {4, 5}};
        const char *names[4] = {"Wq", "Wk", "Wv", "Wo"};
        for (int i = 0; i < 4; i++) {
            p[i] = tensor_param(g_arena, 2, shapes[i], names[i]);
            rng_fill_normal(&rng, p[i], 0, 0.5);
            ag_params_add(pl, p[i]);
        }
    } else {
        gpt_init(which == E2E_LLAMA, 22);
        pl = &g_gpt.params;
    }
    /* plain SGD: Adam would hide a gradient off by a constant factor (its update is nearly
     * scale-free) */
    OptimConfig oc = optim_defaults(OPTIM_SGD);
    oc.lr = which == E2E_OPS ? 0.5 : 0.3;
    Optimizer *o = optim_new(g_arena, pl, &oc);
    for (int s = 0; s < E2E_STEPS; s++) {
        ag_params_zero_grad(pl);
        Tensor *l = which == E2E_OPS ? ops_model_loss(t, p)
                                     : nn_gpt_loss(t, &g_gpt, g_idx, g_tgt, 2, 5, NULL);
        loss[s] = (double)l->data[0];
        ag_backward(t, l);
        optim_step(o);
        ag_tape_reset(t);
    }
    if (which == E2E_OPS) ag_params_free(pl);
    ag_tape_free(t);
    arena_free(step);
}

static double g_expected[N_E2E][E2E_STEPS];
static int g_have_expected[N_E2E];

static int grade_e2e(int op) {
    int w = e2e_of(op);
    double loss[E2E_STEPS];
    e2e_run(w, loss);
    if (!g_have_expected[w]) {
        printf("FAIL  %-13s end-to-end: %s\n      no losses of the real kernels to compare "
               "with (course/expected.txt; make exercise writes it)\n",
               ops[op].name, e2e_desc[w]);
        return 0;
    }
    int s = 0;
    for (; s < E2E_STEPS; s++)
        if (!(fabs(loss[s] - g_expected[w][s]) <= 1e-6 * fmax(1.0, fabs(g_expected[w][s])))) break;
    if (s == E2E_STEPS) {
        printf("pass  %-13s end-to-end: %s (loss %.4f -> %.4f, as the real kernels)\n",
               ops[op].name, e2e_desc[w], loss[0], loss[E2E_STEPS - 1]);
        return 1;
    }
    printf("FAIL  %-13s end-to-end: %s\n      loss %.6f -> %.6f; the real kernels: %.6f -> "
           "%.6f (first difference at step %d)\n      hint: the model also runs: %s; fix "
           "their gradient checks first\n",
           ops[op].name, e2e_desc[w], loss[0], loss[E2E_STEPS - 1], g_expected[w][0],
           g_expected[w][E2E_STEPS - 1], s, e2e_uses[w]);
    return 0;
}

/* ---- files ---- */

static int op_by_name(const char *s) {
    for (int i = 0; i < N_OPS; i++)
        if (strcmp(ops[i].name, s) == 0) return i;
    return -1;
}

static void die(const char *path, int line, const char *why) {
    if (line)
        fprintf(stderr, "grade: %s:%d: %s\n", path, line, why);
    else
        fprintf(stderr, "grade: %s: %s\n", path, why);
    exit(2);
}

/* hidden cases: "op n1 n2 ... [seed S]" per line; sizes checked before use */
static int read_cases(const char *path, Case *out, int max) {
    FILE *f = fopen(path, "r");
    if (!f) die(path, 0, strerror(errno));
    char line[512];
    int n = 0, ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *tok = strtok(line, " \t\r\n");
        if (!tok) continue;
        int op = op_by_name(tok);
        if (op < 0) die(path, ln, "unknown op (softmax, log_softmax, cross_entropy, ...)");
        if (n == max) die(path, ln, "too many cases");
        Case c = {.op = op, .seed = 1, .hidden = 1};
        int k = 0;
        while ((tok = strtok(NULL, " \t\r\n"))) {
            char *end;
            if (strcmp(tok, "seed") == 0) {
                tok = strtok(NULL, " \t\r\n");
                long s = tok ? strtol(tok, &end, 10) : -1;
                if (!tok || *end || s < 0 || s > 1000000) die(path, ln, "seed needs 0..1000000");
                c.seed = (unsigned)s;
                continue;
            }
            long v = strtol(tok, &end, 10);
            if (*end || k == ops[op].n_args) die(path, ln, "expected the op's integers");
            if (v < 0 || v > 64) die(path, ln, "an integer outside 0..64");
            c.a[k++] = (int)v;
        }
        if (k != ops[op].n_args) {
            char why[200];
            snprintf(why, sizeof why, "%s takes %d integers: %s", ops[op].name, ops[op].n_args,
                     ops[op].args);
            die(path, ln, why);
        }
        const int *a = c.a;
        int ok = 1;
        for (int i = 0; i < ops[op].n_args; i++)
            if (i < 2) ok &= a[i] >= 1;
        switch (op) {
        case CROSS_ENTROPY: ok &= a[1] >= 2 && a[0] <= 512; break;
        case SOFTMAX:
        case LOG_SOFTMAX: ok &= a[1] >= 2; break;
        case LAYERNORM: ok &= a[1] >= 2 && a[2] <= 1; break;
        case MATMUL: ok &= a[2] >= 1 && a[3] >= 1 && a[4] <= 1 && a[5] <= 1; break;
        case LINEAR: ok &= a[2] >= 1 && a[3] <= 1; break;
        case EMBEDDING: ok &= a[2] >= 1 && a[3] >= 1 && a[4] <= a[0] && a[2] * a[3] <= 512; break;
        case ROPE: ok &= a[2] >= 1 && a[3] >= 2 && a[3] % 2 == 0; break;
        case ATTENTION:
            ok &= a[2] >= 1 && a[1] % a[2] == 0 && a[3] >= 1 && a[4] >= 2 && a[5] >= 1 &&
                  a[6] <= 2 && a[7] <= 90 && a[0] * a[4] <= 64 * 64;
            break;
        }
        if (!ok) die(path, ln, "sizes out of range for the op");
        out[n++] = c;
    }
    fclose(f);
    return n;
}

static void read_expected(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return; /* each end-to-end check then fails, saying so */
    char name[32];
    while (fscanf(f, "%31s", name) == 1) {
        int w = -1;
        for (int i = 0; i < N_E2E; i++)
            if (strcmp(name, e2e_names[i]) == 0) w = i;
        if (w < 0) die(path, 0, "an unknown model name");
        for (int s = 0; s < E2E_STEPS; s++)
            if (fscanf(f, "%lf", &g_expected[w][s]) != 1 || !isfinite(g_expected[w][s]))
                die(path, 0, "expected 8 finite losses after the model's name");
        g_have_expected[w] = 1;
    }
    fclose(f);
}

/* ---- main: each exercise in a child process ---- */

static void grade_op(int op, const Case *extra, int n_extra, int fd) {
    g_arena = arena_new("grade", 0);
    Arena *step = arena_new("step", 0);
    Tape *t = ag_tape_new(step);
    int passed = 0, failed = 0, r;
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++)
        if (builtin[i].op == op) {
            r = grade_case(t, &builtin[i]);
            passed += r;
            failed += !r;
        }
    for (int i = 0; i < n_extra; i++)
        if (extra[i].op == op) {
            r = grade_case(t, &extra[i]);
            passed += r;
            failed += !r;
        }
    r = grade_module(t, op);
    passed += r;
    failed += !r;
    r = grade_e2e(op);
    passed += r;
    failed += !r;
    fflush(stdout);
    char msg[32];
    int len = snprintf(msg, sizeof msg, "%d %d\n", passed, failed);
    if (write(fd, msg, (size_t)len) != len) _exit(3);
    _exit(0);
}

int main(int argc, char **argv) {
    const char *ex_path = NULL, *exp_path = "course/expected.txt", *cases_path = NULL,
               *record = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--exercises") == 0)
            ex_path = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--expected") == 0)
            exp_path = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--cases") == 0)
            cases_path = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--record") == 0)
            record = argv[++i];
        else {
            fprintf(stderr, "usage: grade [--exercises FILE] [--expected FILE] [--cases FILE] | "
                            "--record FILE\n");
            return 2;
        }
    }
    if (record) { /* the real kernels' losses */
        g_arena = arena_new("grade", 0);
        FILE *f = fopen(record, "w");
        if (!f) die(record, 0, strerror(errno));
        for (int w = 0; w < N_E2E; w++) {
            double loss[E2E_STEPS];
            e2e_run(w, loss);
            fprintf(f, "%s", e2e_names[w]);
            for (int s = 0; s < E2E_STEPS; s++) fprintf(f, " %.17g", loss[s]);
            fprintf(f, "\n");
        }
        if (fclose(f) != 0) die(record, 0, "write failed");
        return 0;
    }
    int want[N_OPS] = {0};
    if (ex_path) {
        FILE *f = fopen(ex_path, "r");
        if (!f) die(ex_path, 0, strerror(errno));
        char name[64];
        while (fscanf(f, "%63s", name) == 1) {
            int op = op_by_name(name);
            if (op < 0) die(ex_path, 0, "an unknown exercise name");
            want[op] = 1;
        }
        fclose(f);
    } else {
        for (int i = 0; i < N_OPS; i++) want[i] = 1;
    }
    static Case extra[MAX_CASES];
    int n_extra = cases_path ? read_cases(cases_path, extra, MAX_CASES) : 0;
    read_expected(exp_path);

    int total_p = 0, total_f = 0, row_p[N_OPS] = {0}, row_f[N_OPS] = {0}, crashed[N_OPS] = {0};
    for (int op = 0; op < N_OPS; op++) {
        if (!want[op]) continue;
        int fds[2];
        if (pipe(fds) != 0) die("pipe", 0, strerror(errno));
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) die("fork", 0, strerror(errno));
        if (pid == 0) {
            close(fds[0]);
            grade_op(op, extra, n_extra, fds[1]);
        }
        close(fds[1]);
        char buf[64] = {0};
        ssize_t got = read(fds[0], buf, sizeof buf - 1);
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        int p = 0, fl = 0;
        if (got <= 0 || sscanf(buf, "%d %d", &p, &fl) != 2) {
            crashed[op] = 1;
            fl = 1;
            printf("FAIL  %-13s crashed (%s %d) while grading: out-of-range indices in the "
                   "backward?\n",
                   ops[op].name, WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        }
        row_p[op] = p;
        row_f[op] = fl;
        total_p += p;
        total_f += fl;
    }
    printf("\n%-14s %7s %7s\n", "exercise", "passed", "failed");
    for (int op = 0; op < N_OPS; op++)
        if (want[op])
            printf("%-14s %7d %7d%s\n", ops[op].name, row_p[op], row_f[op],
                   crashed[op] ? "  (crashed)" : "");
    printf("%d passed, %d failed\n", total_p, total_f);
    return total_f ? 1 : 0;
}
