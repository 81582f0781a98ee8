/* ops_dump.c: runs the ops of a LLaMA-style block (rmsnorm, rope, silu, and SwiGLU as
 * silu(a) * b) and GPT-2's GELU (gelu_tanh, HF's gelu_new) on seeded inputs, backward from
 * loss = sum(y * R) with a random R, and writes
 * inputs, settings, outputs and gradients to a file that tests/autograd/torch_ops.py reads and
 * recomputes in PyTorch float64 with references written by hand (PyTorch 1.13 has no RMSNorm
 * or RoPE module). Double build. File format: ../support/dumpfile.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "dumpfile.h"

static FILE *out;

static void put(const char *prefix, const char *name, const Tensor *t, const Real *values) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", prefix, name);
    dump_tensor(out, full, t, values);
}

/* settings as a 1-D record of numbers */
static void put_numbers(Arena *a, const char *prefix, const char *name, int n, const double *v) {
    Tensor *t = tensor_new1(a, n, name);
    for (int i = 0; i < n; i++) t->data[i] = (Real)v[i];
    put(prefix, name, t, t->data);
}

static Tensor *input(Arena *a, Rng *rng, int ndim, const int *shape, double mean, double std,
                     const char *prefix, const char *name) {
    Tensor *x = tensor_new(a, ndim, shape, name);
    rng_fill_normal(rng, x, mean, std);
    tensor_requires_grad(x);
    put(prefix, name, x, x->data);
    return x;
}

/* writes y and a random R (as prefix.yname, prefix.rname) and returns sum(y * R) */
static Tensor *weighed(Tape *t, Rng *rng, Tensor *y, const char *prefix, const char *yname,
                       const char *rname) {
    Tensor *R = tensor_new(t->arena, y->ndim, y->shape, "R");
    rng_fill_normal(rng, R, 0, 1);
    put(prefix, yname, y, y->data);
    put(prefix, rname, R, R->data);
    return ag_sum(t, ag_mul(t, y, R));
}

static void rmsnorm_case(Tape *t, Arena *a, Rng *rng, const char *p, int R, int C, double eps) {
    ag_tape_reset(t);
    Tensor *x = input(a, rng, 2, (int[]){R, C}, 0.5, 1.5, p, "x");
    Tensor *w = input(a, rng, 1, (int[]){C}, 1.0, 0.3, p, "w");
    put_numbers(a, p, "eps", 1, (double[]){eps});
    ag_backward(t, weighed(t, rng, ag_rmsnorm(t, x, w, eps), p, "y", "R"));
    put(p, "gx", x, x->grad);
    put(p, "gw", w, w->grad);
}

/* rope of the heads of x (B, T, C) at columns [col, col + n) (n 0: all) */
static void rope_case(Tape *t, Arena *a, Rng *rng, const char *p, int B, int T, int C, AgRope r) {
    ag_tape_reset(t);
    Tensor *x = input(a, rng, 3, (int[]){B, T, C}, 0, 1, p, "x");
    int n = r.n_cols ? r.n_cols : C - r.col;
    put_numbers(a, p, "config", 5,
                (double[]){r.head_size, r.pos0, r.base == 0 ? 10000 : r.base, r.col, n});
    ag_backward(t, weighed(t, rng, ag_rope(t, x, &r), p, "y", "R"));
    put(p, "gx", x, x->grad);
}

/* the query and key blocks of one fused projection (B, T, (NH + 2 NKV) HS), rotated at pos0:
 * both rotations add into the projection's gradient; the value columns get none */
static void rope_qkv_case(Tape *t, Arena *a, Rng *rng, const char *p, int NH, int NKV, int HS,
                          int pos0, double base) {
    ag_tape_reset(t);
    int B = 2, T = 5, C = (NH + 2 * NKV) * HS;
    Tensor *x = input(a, rng, 3, (int[]){B, T, C}, 0, 1, p, "x");
    put_numbers(a, p, "config", 5, (double[]){HS, pos0, base, NH, NKV});
    Tensor *q = ag_rope(t, x, &(AgRope){HS, pos0, base, 0, NH * HS, 0, 0});
    Tensor *k = ag_rope(t, x, &(AgRope){HS, pos0, base, NH * HS, NKV * HS, 0, 0});
    ag_backward(t, ag_add(t, weighed(t, rng, q, p, "yq", "Rq"), weighed(t, rng, k, p, "yk", "Rk")));
    put(p, "gx", x, x->grad);
}

int main(int argc, char **argv) {
    out = dump_open(argc, argv);
    if (!out) return 2;
    Arena *a = arena_new("inputs", 16 << 20);
    Tape *t = ag_tape_new(arena_new("step", 64 << 20));
    Rng rng;
    rng_seed(&rng, 1515);

    rmsnorm_case(t, a, &rng, "rmsnorm", 15, 24, 1e-5);
    /* more rows than a weight-gradient block, a row wider than a column chunk */
    rmsnorm_case(t, a, &rng, "rmsnorm_wide", 70, 300, 1e-6);

    rope_case(t, a, &rng, "rope", 2, 6, 24, (AgRope){.head_size = 8});
    rope_case(t, a, &rng, "rope_pos0", 3, 4, 12, (AgRope){.head_size = 6, .pos0 = 9});
    rope_case(t, a, &rng, "rope_step", 2, 1, 32, (AgRope){.head_size = 32, .pos0 = 1000});
    rope_case(t, a, &rng, "rope_block", 2, 5, 40,
              (AgRope){.head_size = 4, .pos0 = 3, .base = 500000, .col = 8, .n_cols = 16});
    rope_qkv_case(t, a, &rng, "rope_qkv", 4, 2, 8, 7, 10000);

    ag_tape_reset(t);
    Tensor *x = input(a, &rng, 2, (int[]){4, 33}, 0, 4, "silu", "x");
    ag_backward(t, weighed(t, &rng, ag_silu(t, x), "silu", "y", "R"));
    put("silu", "gx", x, x->grad);

    ag_tape_reset(t); /* GPT-2's gelu_new; inputs N(0, 3), the tails included */
    Tensor *xg = input(a, &rng, 2, (int[]){5, 41}, 0, 3, "gelu_tanh", "x");
    ag_backward(t, weighed(t, &rng, ag_gelu_tanh(t, xg), "gelu_tanh", "y", "R"));
    put("gelu_tanh", "gx", xg, xg->grad);

    ag_tape_reset(t);
    Tensor *ga = input(a, &rng, 3, (int[]){3, 7, 20}, 0, 2, "swiglu", "a");
    Tensor *gb = input(a, &rng, 3, (int[]){3, 7, 20}, 0, 1, "swiglu", "b");
    ag_backward(t, weighed(t, &rng, ag_mul(t, ag_silu(t, ga), gb), "swiglu", "y", "R"));
    put("swiglu", "ga", ga, ga->grad);
    put("swiglu", "gb", gb, gb->grad);

    arena_free(t->arena);
    ag_tape_free(t);
    arena_free(a);
    return dump_close(out, argv[1]);
}
