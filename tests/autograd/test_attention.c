/* test_attention.c: the fused attention and head-gate ops against independent references:
 * the composition of plain ops (matmul_bt, scale, softmax, matmul), explicit masks, repeated
 * key/value heads for grouped-query attention, and the incremental-decoding property of the
 * end-aligned causal mask, and the AG_ATTN_ROWS layout against scatter, AG_ATTN_COLS, gather on
 * ragged row maps; attention masks of each shape against the scores plus the mask. Gradients against finite differences are in test_gradcheck.c (the
 * attention rows of tests/support/cases.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <string.h>

#include "cases.h"

/* ~1e-12 in double, 1e-5 in float: the same math in another order */
#define TOL (sizeof(Real) == sizeof(double) ? 1e-12 : 1e-5)

/* t filled with seeded normal values rounded to float, requiring grad */
static Tensor *randn_fill(Tensor *t, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (size_t i = 0; i < t->size; i++) t->data[i] = (Real)(float)rng_normal(&rng);
    tensor_requires_grad(t);
    return t;
}
static Tensor *randn4(Arena *a, int d0, int d1, int d2, int d3, const char *name, uint64_t seed) {
    return randn_fill(tensor_new4(a, d0, d1, d2, d3, name), seed);
}
static Tensor *randn2(Arena *a, int d0, int d1, const char *name, uint64_t seed) {
    return randn_fill(tensor_new(a, 2, (int[]){d0, d1}, name), seed);
}

/* max |x - y| / max(1, |y|) over n values */
static double max_diff(const Real *x, const Real *y, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]) / fmax(1.0, fabs((double)y[i]));
        if (!(d <= worst)) worst = d; /* a NaN is the worst */
    }
    return worst;
}

static int all_finite(const Real *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite((double)x[i])) return 0;
    return 1;
}

/* backward of loss = sum(y * R) with a fixed random R */
static void backward_weighted(Tape *tape, Tensor *y) {
    Tensor *R = tensor_new(tape->arena, y->ndim, y->shape, "R");
    Rng rng;
    rng_seed(&rng, 99);
    for (size_t i = 0; i < R->size; i++) R->data[i] = (Real)(float)rng_normal(&rng);
    ag_backward(tape, ag_sum(tape, ag_mul(tape, y, R)));
}

static Real *copy_grad(Arena *a, const Tensor *t) {
    Real *g = arena_alloc(a, t->size * sizeof(Real));
    memcpy(g, t->grad, t->size * sizeof(Real));
    return g;
}

static void zero_grads(Tensor *q, Tensor *k, Tensor *v) {
    tensor_zero_grad(q);
    tensor_zero_grad(k);
    tensor_zero_grad(v);
}

/* The fused op's output, probabilities and gradients (of loss = sum(y * R)), kept while the
 * same inputs go through a composition of plain ops on the reset tape. */
typedef struct {
    Real *y, *P, *gq, *gk, *gv;
} Fused;

static Fused keep_fused(TestEnv *env, Tensor *y, Tensor *P, Tensor *q, Tensor *k, Tensor *v) {
    backward_weighted(env->tape, y);
    Fused f;
    f.y = arena_alloc(env->params, y->size * sizeof(Real));
    f.P = arena_alloc(env->params, P->size * sizeof(Real));
    memcpy(f.y, y->data, y->size * sizeof(Real));
    memcpy(f.P, P->data, P->size * sizeof(Real));
    f.gq = copy_grad(env->params, q);
    f.gk = copy_grad(env->params, k);
    f.gv = copy_grad(env->params, v);
    ag_tape_reset(env->tape);
    zero_grads(q, k, v);
    return f;
}

/* the composition's yc = Pc v against the kept results, gradients included */
static void assert_matches(const Fused *f, Tape *tape, Tensor *yc, Tensor *Pc, Tensor *q, Tensor *k,
                           Tensor *v) {
    backward_weighted(tape, yc);
    cr_assert(max_diff(f->y, yc->data, yc->size) < TOL, "output: %g",
              max_diff(f->y, yc->data, yc->size));
    cr_assert(max_diff(f->P, Pc->data, Pc->size) < TOL, "probs: %g",
              max_diff(f->P, Pc->data, Pc->size));
    cr_assert(max_diff(f->gq, q->grad, q->size) < TOL, "dq: %g", max_diff(f->gq, q->grad, q->size));
    cr_assert(max_diff(f->gk, k->grad, k->size) < TOL, "dk: %g", max_diff(f->gk, k->grad, k->size));
    cr_assert(max_diff(f->gv, v->grad, v->size) < TOL, "dv: %g", max_diff(f->gv, v->grad, v->size));
}

static void check_against_composition(int B, int NH, int Tq, int Tk, int HS) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, B, NH, Tq, HS, "q", 1);
    Tensor *k = randn4(env.params, B, NH, Tk, HS, "k", 2);
    Tensor *v = randn4(env.params, B, NH, Tk, HS, "v", 3);

    Tensor *P;
    Tensor *y = ag_attention(env.tape, q, k, v, NULL, NULL, 0, NULL, &P);
    Fused f = keep_fused(&env, y, P, q, k, v);
    Tensor *S = ag_scale(env.tape, ag_matmul_bt(env.tape, q, k), 1.0 / sqrt((double)HS));
    Tensor *Pc = ag_softmax(env.tape, S);
    assert_matches(&f, env.tape, ag_matmul(env.tape, Pc, v), Pc, q, k, v);
    test_env_free(&env);
}

Test(ag_attention, equals_the_composition_of_plain_ops) {
    check_against_composition(2, 2, 3, 5, 4);
}

/* The kernel sums scores in tiles of query rows and blocks of keys (k_attention.c): sizes that
 * leave partial tiles and blocks on every side. */
Test(ag_attention, equals_the_composition_across_tile_edges) {
    check_against_composition(2, 3, 7, 37, 9);
    check_against_composition(1, 2, 33, 64, 16);
}

/* Causal and padded rows against plain ops with an additive mask (-inf where a key is hidden):
 * the kernel runs each block of query rows only over the keys that block can see and stops at
 * the batch's last key that is not padding (k_attention.c), so trailing padding of several
 * lengths and T = 21 (row blocks 8, 8, 5) must give the same numbers. Every row sees a key. */
static void check_masked_against_composition(int causal) {
    enum { B = 3, NH = 2, T = 21, HS = 9 };
    static const int pads[B] = {0, 6, 13}; /* trailing padding keys of each batch row */
    uint8_t mask[B * T];
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++) mask[b * T + j] = j >= T - pads[b];
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, B, NH, T, HS, "q", 7);
    Tensor *k = randn4(env.params, B, NH, T, HS, "k", 8);
    Tensor *v = randn4(env.params, B, NH, T, HS, "v", 9);
    Tensor *P;
    Tensor *y = ag_attention(env.tape, q, k, v, NULL,
                             &(AgAttnMask){.causal = causal, .key_padding = &(AgMask){mask, B, T}},
                             0, NULL, &P);
    Fused f = keep_fused(&env, y, P, q, k, v);
    Tensor *M = tensor_new4(env.tape->arena, B, NH, T, T, "mask");
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    M->data[(((size_t)b * NH + h) * T + i) * T + j] =
                        mask[b * T + j] || (causal && j > i) ? -(Real)INFINITY : 0;
    Tensor *S = ag_scale(env.tape, ag_matmul_bt(env.tape, q, k), 1.0 / sqrt((double)HS));
    Tensor *Pc = ag_softmax(env.tape, ag_add(env.tape, S, M));
    assert_matches(&f, env.tape, ag_matmul(env.tape, Pc, v), Pc, q, k, v);
    test_env_free(&env);
}

Test(ag_attention, trailing_padding_equals_the_composition_with_an_additive_mask) {
    check_masked_against_composition(0);
}

Test(ag_attention, causal_with_trailing_padding_equals_the_composition) {
    check_masked_against_composition(1);
}

/* An attention mask (AgAttnMask.attn_mask) of each accepted shape, with causal and key padding,
 * against plain ops on the scores plus the mask (broadcast by hand) plus -inf where causal or
 * padding hide a key. The mask: ALiBi's -slope |i - j| (slope per head and batch element where
 * the shape has them) and -inf at some keys, one (b, h, i) row wholly blocked where the shape
 * is (B, NH, T, T) (it must give 0, not NaN). shape: 0 (T, T), 1 (1, NH, T, T), 2 (B, 1, T, T),
 * 3 (B, NH, T, T). */
static void check_attn_mask_against_composition(int shape) {
    enum { B = 2, NH = 3, T = 11, HS = 5 };
    uint8_t pad[B * T] = {0};
    for (int j = 8; j < T; j++) pad[T + j] = 1; /* batch 1 pads its last three keys */
    int mb = shape >= 2 ? B : 1, mh = shape == 1 || shape == 3 ? NH : 1;
    TestEnv env = test_env_new();
    Tensor *M = shape == 0 ? tensor_new2(env.params, T, T, "alibi")
                           : tensor_new4(env.params, mb, mh, T, T, "alibi");
    for (size_t e = 0; e < M->size; e++) {
        int j = (int)(e % T), i = (int)(e / T % T), h = (int)(e / (T * T) % mh);
        int b = (int)(e / ((size_t)T * T * mh));
        double slope = ldexp(1.0, -(h + 1)) * (1 + b);
        M->data[e] = (e % 7 == 3) || (shape == 3 && e / T == 4) ? -(Real)INFINITY
                                                                : (Real)(-slope * abs(i - j));
    }
    Tensor *q = randn4(env.params, B, NH, T, HS, "q", 21);
    Tensor *k = randn4(env.params, B, NH, T, HS, "k", 22);
    Tensor *v = randn4(env.params, B, NH, T, HS, "v", 23);
    Tensor *P;
    AgAttnMask mask = {.causal = 1, .key_padding = &(AgMask){pad, B, T}, .attn_mask = M};
    Tensor *y = ag_attention(env.tape, q, k, v, NULL, &mask, 0, NULL, &P);
    cr_assert(all_finite(y->data, y->size) && all_finite(P->data, P->size));
    Fused f = keep_fused(&env, y, P, q, k, v);
    Tensor *A = tensor_new4(env.tape->arena, B, NH, T, T, "mask");
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++) {
                    size_t at =
                        (((size_t)(mb > 1 ? b : 0) * mh + (mh > 1 ? h : 0)) * T + i) * T + j;
                    Real m = M->data[at];
                    if (pad[b * T + j] || j > i) m = -(Real)INFINITY;
                    A->data[(((size_t)b * NH + h) * T + i) * T + j] = m;
                }
    /* wholly blocked rows (the one of shape 3, and where -inf, causal and padding meet): plain
     * softmax would give NaN there; the composition gets a finite row times 0 instead (Z),
     * which is what the fused op must give: P 0, output 0, no gradient */
    Tensor *Z = tensor_new4(env.tape->arena, B, NH, T, T, "keep");
    tensor_fill(Z, 1);
    int blocked_rows = 0;
    for (size_t row = 0; row < (size_t)B * NH * T; row++) {
        int any = 0;
        for (int j = 0; j < T; j++) any |= A->data[row * T + j] != -(Real)INFINITY;
        if (any) continue;
        blocked_rows++;
        for (int j = 0; j < T; j++) {
            cr_assert(f.P[row * T + j] == 0, "P of blocked row %zu: %g", row,
                      (double)f.P[row * T + j]);
            A->data[row * T + j] = 0, Z->data[row * T + j] = 0;
        }
    }
    cr_assert(shape != 3 || blocked_rows >= 1);
    Tensor *S = ag_scale(env.tape, ag_matmul_bt(env.tape, q, k), 1.0 / sqrt((double)HS));
    Tensor *Pc = ag_mul(env.tape, ag_softmax(env.tape, ag_add(env.tape, S, A)), Z);
    Tensor *yc = ag_matmul(env.tape, Pc, v);
    assert_matches(&f, env.tape, yc, Pc, q, k, v);
    test_env_free(&env);
}

Test(ag_attention, attn_mask_of_every_shape_equals_the_composition_with_the_mask_added) {
    for (int shape = 0; shape < 4; shape++) check_attn_mask_against_composition(shape);
}

/* ag_attn_mask_bool: 1 -> -inf, 0 -> 0, and the same probabilities as that additive mask */
Test(ag_attention, a_boolean_mask_blocks_what_it_marks) {
    enum { T = 4 };
    const uint8_t blocked[T * T] = {0, 1, 1, 1, /**/ 0, 0, 1, 1, /**/ 1, 1, 1, 1, /**/ 0, 1, 0, 0};
    TestEnv env = test_env_new();
    Tensor *m = ag_attn_mask_bool(env.tape, blocked, 2, (int[]){T, T});
    cr_assert(m->ndim == 2 && m->shape[0] == T && m->shape[1] == T && !m->requires_grad);
    for (int e = 0; e < T * T; e++)
        cr_assert(blocked[e] ? m->data[e] == -(Real)INFINITY : m->data[e] == 0);
    Tensor *q = randn4(env.params, 1, 2, T, 3, "q", 31),
           *k = randn4(env.params, 1, 2, T, 3, "k", 32);
    Tensor *v = randn4(env.params, 1, 2, T, 3, "v", 33), *P;
    ag_attention(env.tape, q, k, v, NULL, &(AgAttnMask){.attn_mask = m}, 0, NULL, &P);
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < T; i++) {
            double s = 0;
            for (int j = 0; j < T; j++) {
                Real p = P->data[((size_t)h * T + i) * T + j];
                cr_assert(!blocked[i * T + j] || p == 0, "P[%d,%d,%d] = %g", h, i, j, (double)p);
                s += (double)p;
            }
            cr_assert(i == 2 ? s == 0 : fabs(s - 1) < 1e-6, "row %d sums to %g", i, s);
        }
    test_env_free(&env);
}

/* Causal self-attention (T = 4) with left padding: batch 1 pads keys 0 and 1, so its query
 * rows 0 and 1 see no key at all. */
enum { MB = 2, MNH = 2, MT = 4, MHS = 3 };
static const uint8_t left_pad[MB * MT] = {0, 0, 0, 0, /**/ 1, 1, 0, 0};

static const AgMask left_pad_mask = {left_pad, MB, MT};

static int mask_visible(int b, int i, int j) { return j <= i && !left_pad[b * MT + j]; }

Test(ag_attention, probs_rows_sum_to_one_and_masked_entries_are_zero) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, MB, MNH, MT, MHS, "q", 4);
    Tensor *k = randn4(env.params, MB, MNH, MT, MHS, "k", 5);
    Tensor *v = randn4(env.params, MB, MNH, MT, MHS, "v", 6);
    Tensor *P = NULL;
    ag_attention(env.tape, q, k, v, NULL, &(AgAttnMask){.causal = 1, .key_padding = &left_pad_mask},
                 0, NULL, &P);
    cr_assert(P != NULL);
    cr_assert(P->ndim == 4 && P->shape[0] == MB && P->shape[1] == MNH && P->shape[2] == MT &&
                  P->shape[3] == MT,
              "probs shape %s", tensor_shape_str(P));
    int n_empty = 0;
    for (int b = 0; b < MB; b++)
        for (int h = 0; h < MNH; h++)
            for (int i = 0; i < MT; i++) {
                const Real *row = P->data + (((size_t)b * MNH + h) * MT + i) * MT;
                double s = 0;
                int any = 0;
                for (int j = 0; j < MT; j++) {
                    if (!mask_visible(b, i, j))
                        cr_assert(row[j] == 0, "P[%d,%d,%d,%d] = %g is masked", b, h, i, j,
                                  (double)row[j]);
                    else
                        cr_assert(row[j] > 0, "P[%d,%d,%d,%d] = %g is visible", b, h, i, j,
                                  (double)row[j]);
                    any |= mask_visible(b, i, j);
                    s += (double)row[j];
                }
                cr_assert(fabs(s - (any ? 1.0 : 0.0)) < 10 * TOL, "row (%d,%d,%d) sums to %.17g", b,
                          h, i, s);
                n_empty += !any;
            }
    cr_assert_eq(n_empty, 2 * MNH, "batch 1 rows 0 and 1 of each head have no key");
    test_env_free(&env);
}

Test(ag_attention, causal_upper_triangle_is_exactly_zero) {
    TestEnv env = test_env_new();
    int T = 5;
    Tensor *q = randn4(env.params, 1, 3, T, 4, "q", 7);
    Tensor *k = randn4(env.params, 1, 3, T, 4, "k", 8);
    Tensor *v = randn4(env.params, 1, 3, T, 4, "v", 9);
    Tensor *P;
    ag_attention(env.tape, q, k, v, NULL, AG_CAUSAL, 0, NULL, &P);
    for (int h = 0; h < 3; h++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                Real p = P->data[((size_t)h * T + i) * T + j];
                if (j > i)
                    cr_assert(p == 0, "P[%d,%d,%d] = %g above the diagonal", h, i, j, (double)p);
                else
                    cr_assert(p > 0);
            }
    /* the first query sees only itself */
    cr_assert(P->data[0] == 1);
    test_env_free(&env);
}

Test(ag_attention, fully_masked_rows_give_zero_output_and_gradient_without_nan) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, MB, MNH, MT, MHS, "q", 10);
    Tensor *k = randn4(env.params, MB, MNH, MT, MHS, "k", 11);
    Tensor *v = randn4(env.params, MB, MNH, MT, MHS, "v", 12);
    Tensor *P;
    Tensor *y =
        ag_attention(env.tape, q, k, v, NULL,
                     &(AgAttnMask){.causal = 1, .key_padding = &left_pad_mask}, 0, NULL, &P);
    backward_weighted(env.tape, y);
    cr_assert(all_finite(y->data, y->size) && all_finite(P->data, P->size));
    cr_assert(all_finite(q->grad, q->size) && all_finite(k->grad, k->size) &&
                  all_finite(v->grad, v->size),
              "a gradient is not finite");
    for (int h = 0; h < MNH; h++)
        for (int i = 0; i < 2; i++) { /* batch 1, query rows 0 and 1 */
            size_t row = ((size_t)(1 * MNH + h) * MT + i) * MHS;
            for (int d = 0; d < MHS; d++) {
                cr_assert(y->data[row + d] == 0, "output of an empty row is %g",
                          (double)y->data[row + d]);
                cr_assert(q->grad[row + d] == 0, "dq of an empty row is %g",
                          (double)q->grad[row + d]);
            }
            /* the padded keys 0 and 1 of batch 1 receive nothing */
            for (int j = 0; j < 2; j++) {
                size_t kr = ((size_t)(1 * MNH + h) * MT + j) * MHS;
                for (int d = 0; d < MHS; d++)
                    cr_assert(k->grad[kr + d] == 0 && v->grad[kr + d] == 0);
            }
        }
    /* the other rows do get gradients */
    double other = 0;
    for (size_t e = 0; e < q->size; e++) other = fmax(other, fabs((double)q->grad[e]));
    cr_assert(other > 0);
    test_env_free(&env);
}

/* A NaN score poisons its row instead of vanishing: with causal attention query row 0 sees key 0
 * only, and a NaN there must give a row of NaN (not the zeros of a row with no visible key);
 * a NaN beside finite scores (row 1 sees keys 0 and 1) makes its row NaN too. Rows that do not
 * see key 0 of that head (none here: every causal row sees key 0) would stay finite, so the
 * other batch, without a NaN, is checked to be finite. */
Test(ag_attention, a_nan_score_makes_its_row_nan_not_zero) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, MB, MNH, MT, MHS, "q", 16);
    Tensor *k = randn4(env.params, MB, MNH, MT, MHS, "k", 17);
    Tensor *v = randn4(env.params, MB, MNH, MT, MHS, "v", 18);
    k->data[0] = (Real)NAN; /* batch 0, head 0, key 0 */
    Tensor *P;
    ag_attention(env.tape, q, k, v, NULL, AG_CAUSAL, 0, NULL, &P);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j <= i; j++)
            cr_assert(isnan(P->data[(size_t)i * MT + j]), "P[0, 0, %d, %d] = %g", i, j,
                      (double)P->data[(size_t)i * MT + j]);
    size_t batch = (size_t)MNH * MT * MT;
    cr_assert(all_finite(P->data + batch, batch), "batch 1 has no NaN input");
    test_env_free(&env);
}

/* Grouped-query attention equals plain multi-head attention with each key/value head repeated
 * for the query heads of its group; the gradient of a shared head is the sum over its copies. */
static void check_gqa_against_repeated(int NKV) {
    TestEnv env = test_env_new();
    int B = 2, NH = 4, Tq = 3, Tk = 5, HS = 4, group = NH / NKV;
    static const uint8_t pad[2 * 5] = {0, 0, 0, 0, 0, /**/ 0, 0, 1, 0, 1};
    Tensor *q = randn4(env.params, B, NH, Tq, HS, "q", 13);
    Tensor *k = randn4(env.params, B, NKV, Tk, HS, "k", 14);
    Tensor *v = randn4(env.params, B, NKV, Tk, HS, "v", 15);
    Tensor *kr = randn4(env.params, B, NH, Tk, HS, "k_repeated", 0);
    Tensor *vr = randn4(env.params, B, NH, Tk, HS, "v_repeated", 0);
    size_t blk = (size_t)Tk * HS;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t src = ((size_t)b * NKV + h / group) * blk, dst = ((size_t)b * NH + h) * blk;
            memcpy(kr->data + dst, k->data + src, blk * sizeof(Real));
            memcpy(vr->data + dst, v->data + src, blk * sizeof(Real));
        }
    Tensor *y = ag_attention(env.tape, q, k, v, NULL,
                             &(AgAttnMask){.causal = 1, .key_padding = &(AgMask){pad, B, Tk}}, 0,
                             NULL, NULL);
    backward_weighted(env.tape, y);
    Real *yg = arena_alloc(env.params, y->size * sizeof(Real));
    memcpy(yg, y->data, y->size * sizeof(Real));
    Real *gq = copy_grad(env.params, q);

    ag_tape_reset(env.tape);
    tensor_zero_grad(q);
    Tensor *yr = ag_attention(env.tape, q, kr, vr, NULL,
                              &(AgAttnMask){.causal = 1, .key_padding = &(AgMask){pad, B, Tk}}, 0,
                              NULL, NULL);
    backward_weighted(env.tape, yr);
    cr_assert(max_diff(yg, yr->data, y->size) < TOL, "NKV=%d output: %g", NKV,
              max_diff(yg, yr->data, y->size));
    cr_assert(max_diff(gq, q->grad, q->size) < TOL, "NKV=%d dq", NKV);
    /* dk of a shared head = the sum of its copies' dk, in head order */
    Real *sk = arena_alloc(env.params, k->size * sizeof(Real));
    Real *sv = arena_alloc(env.params, v->size * sizeof(Real));
    memset(sk, 0, k->size * sizeof(Real));
    memset(sv, 0, v->size * sizeof(Real));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t dst = ((size_t)b * NKV + h / group) * blk, src = ((size_t)b * NH + h) * blk;
            for (size_t e = 0; e < blk; e++) {
                sk[dst + e] += kr->grad[src + e];
                sv[dst + e] += vr->grad[src + e];
            }
        }
    cr_assert(max_diff(k->grad, sk, k->size) < 10 * TOL, "NKV=%d dk: %g", NKV,
              max_diff(k->grad, sk, k->size));
    cr_assert(max_diff(v->grad, sv, v->size) < 10 * TOL, "NKV=%d dv: %g", NKV,
              max_diff(v->grad, sv, v->size));
    double gmax = 0;
    for (size_t e = 0; e < k->size; e++) gmax = fmax(gmax, fabs((double)k->grad[e]));
    cr_assert(gmax > 0);
    test_env_free(&env);
}

Test(ag_attention, multi_query_equals_mha_with_repeated_kv_heads) { check_gqa_against_repeated(1); }
Test(ag_attention, grouped_query_equals_mha_with_repeated_kv_heads) {
    check_gqa_against_repeated(2);
}

/* ---- AG_ATTN_COLS: the same kernel reading heads in place ---- */

static Tensor *randn3(Arena *a, int d0, int d1, int d2, const char *name, uint64_t seed) {
    return randn_fill(tensor_new3(a, d0, d1, d2, name), seed);
}

static int same_bits(const Real *x, const Real *y, size_t n) {
    return memcmp(x, y, n * sizeof(Real)) == 0;
}

/* q (B,Tq,NH*HS), k and v (B,Tk,NKV*HS): AG_ATTN_COLS against split_heads, ag_attention,
 * merge_heads on the same leaves: output, probabilities and all three gradients to the bit.
 * Then once more with q, k, v packed side by side in one (B,T,3C) tensor (self-attention). */
static void check_cols_against_heads(int B, int NH, int NKV, int Tq, int Tk, int HS, int causal,
                                     const uint8_t *mask, double p) {
    const AgMask *kp = mask ? &(AgMask){mask, B, Tk} : NULL;
    TestEnv env = test_env_new();
    Tensor *q = randn3(env.params, B, Tq, NH * HS, "q", 31);
    Tensor *k = randn3(env.params, B, Tk, NKV * HS, "k", 32);
    Tensor *v = randn3(env.params, B, Tk, NKV * HS, "v", 33);
    Rng rng;
    rng_seed(&rng, 4);
    Tensor *P, *Pc;
    Tensor *yh = ag_merge_heads(
        env.tape,
        ag_attention(env.tape, ag_split_heads(env.tape, q, NH), ag_split_heads(env.tape, k, NKV),
                     ag_split_heads(env.tape, v, NKV), NULL,
                     &(AgAttnMask){.causal = causal, .key_padding = kp}, p, &rng, &P));
    backward_weighted(env.tape, yh);
    Real *y0 = arena_alloc(env.params, yh->size * sizeof(Real));
    memcpy(y0, yh->data, yh->size * sizeof(Real));
    Real *p0 = arena_alloc(env.params, P->size * sizeof(Real));
    memcpy(p0, P->data, P->size * sizeof(Real));
    Real *gq = copy_grad(env.params, q), *gk = copy_grad(env.params, k);
    Real *gv = copy_grad(env.params, v);

    ag_tape_reset(env.tape);
    zero_grads(q, k, v);
    rng_seed(&rng, 4);
    Tensor *y = ag_attention(env.tape, q, k, v,
                             &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = {NH, NKV, HS, 0, 0, 0}},
                             &(AgAttnMask){.causal = causal, .key_padding = kp}, p, &rng, &Pc);
    backward_weighted(env.tape, y);
    cr_assert(y->ndim == 3 && y->shape[0] == B && y->shape[1] == Tq && y->shape[2] == NH * HS);
    cr_assert(same_bits(y->data, y0, y->size), "output");
    cr_assert(same_bits(Pc->data, p0, Pc->size), "probabilities");
    cr_assert(same_bits(q->grad, gq, q->size), "dq");
    cr_assert(same_bits(k->grad, gk, k->size), "dk");
    cr_assert(same_bits(v->grad, gv, v->size), "dv");

    if (NKV == NH && Tq == Tk) { /* one (B,T,3C) tensor holding q, k, v side by side */
        int C = NH * HS;
        Tensor *qkv = tensor_new3(env.params, B, Tq, 3 * C, "qkv");
        for (size_t r = 0; r < (size_t)B * Tq; r++) {
            memcpy(qkv->data + r * 3 * C, q->data + r * C, (size_t)C * sizeof(Real));
            memcpy(qkv->data + r * 3 * C + C, k->data + r * C, (size_t)C * sizeof(Real));
            memcpy(qkv->data + r * 3 * C + 2 * C, v->data + r * C, (size_t)C * sizeof(Real));
        }
        tensor_requires_grad(qkv);
        ag_tape_reset(env.tape);
        rng_seed(&rng, 4);
        y = ag_attention(env.tape, qkv, qkv, qkv,
                         &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = {NH, NH, HS, 0, C, 2 * C}},
                         &(AgAttnMask){.causal = causal, .key_padding = kp}, p, &rng, NULL);
        backward_weighted(env.tape, y);
        cr_assert(same_bits(y->data, y0, y->size), "packed output");
        for (size_t r = 0; r < (size_t)B * Tq; r++) {
            const Real *g = qkv->grad + r * 3 * C;
            cr_assert(same_bits(g, gq + r * C, (size_t)C), "packed dq, row %zu", r);
            cr_assert(same_bits(g + C, gk + r * C, (size_t)C), "packed dk, row %zu", r);
            cr_assert(same_bits(g + 2 * C, gv + r * C, (size_t)C), "packed dv, row %zu", r);
        }
        /* qkv an intermediate (times 1): its gradient is a fresh buffer that the backward sets,
         * each of q, k, v its own columns, not zeroed first. Twice: the second step's buffer
         * holds the first step's values, which a column or row left unset would keep. */
        for (int pass = 0; pass < 2; pass++) {
            ag_tape_reset(env.tape);
            tensor_zero_grad(qkv);
            rng_seed(&rng, 4);
            Tensor *s = ag_scale(env.tape, qkv, 1);
            y = ag_attention(
                env.tape, s, s, s,
                &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = {NH, NH, HS, 0, C, 2 * C}},
                &(AgAttnMask){.causal = causal, .key_padding = kp}, p, &rng, NULL);
            backward_weighted(env.tape, y);
            cr_assert(env.tape->last->prev->prev->store == 1, "attention sets qkv's gradient");
            for (size_t r = 0; r < (size_t)B * Tq; r++) {
                const Real *g = qkv->grad + r * 3 * C;
                cr_assert(same_bits(g, gq + r * C, (size_t)C), "set dq, row %zu", r);
                cr_assert(same_bits(g + C, gk + r * C, (size_t)C), "set dk, row %zu", r);
                cr_assert(same_bits(g + 2 * C, gv + r * C, (size_t)C), "set dv, row %zu", r);
            }
        }
    }
    test_env_free(&env);
}

Test(ag_attention, columns_equal_split_attention_merge_to_the_bit) {
    static const uint8_t pad[2 * 37] = {[30] = 1, [31] = 1, [37 + 0] = 1, [37 + 36] = 1};
    check_cols_against_heads(2, 2, 2, 3, 5, 4, 0, NULL, 0);
    check_cols_against_heads(2, 4, 2, 7, 7, 9, 1, NULL, 0);     /* grouped-query, causal */
    check_cols_against_heads(2, 3, 3, 37, 37, 8, 1, pad, 0.25); /* padding and dropout */
    check_cols_against_heads(2, 4, 1, 5, 37, 16, 0, pad, 0);    /* multi-query, cross */
}

/* A ragged row map of (B, T): row (b, t) is in when keep(b, t); batch 1 keeps t = 0 only,
 * batch 0 leaves out rows in the middle. Returns the count; idx (B*T) filled increasing. */
static int ragged_map(int *idx, int B, int T, int shift) {
    int n = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int in = b == 1 ? t == 0 : b == 0 ? (t + shift) % 4 != 2 : t < T - 1 - shift;
            if (in) idx[n++] = b * T + t;
        }
    return n;
}

/* AG_ATTN_ROWS on packed q (nq, NH*HS), k, v (nk, NKV*HS) against ag_scatter_rows ->
 * AG_ATTN_COLS -> ag_gather_rows on the same leaves: output, all three gradients (random
 * upstream weights), and the probabilities: those of kept query rows as the composition's, the
 * others 0. Key rows left out are masked (plus one kept key per batch element but the single). */
static void check_rows_against_cols(int B, int NH, int NKV, int Tq, int Tk, int HS, int causal,
                                    int shift) {
    TestEnv env = test_env_new();
    int *qi = arena_alloc(env.params, (size_t)B * Tq * sizeof(int));
    int *ki = arena_alloc(env.params, (size_t)B * Tk * sizeof(int));
    int nq = ragged_map(qi, B, Tq, shift), nk = ragged_map(ki, B, Tk, shift + 1);
    uint8_t *mask = arena_alloc(env.params, (size_t)B * Tk);
    memset(mask, 1, (size_t)B * Tk);
    for (int r = 0; r < nk; r++) mask[ki[r]] = ki[r] % Tk == Tk - 2 && ki[r] / Tk != 1;
    const AgMask *kp = &(AgMask){mask, B, Tk};
    Tensor *q = randn2(env.params, nq, NH * HS, "q", 41);
    Tensor *k = randn2(env.params, nk, NKV * HS, "k", 42);
    Tensor *v = randn2(env.params, nk, NKV * HS, "v", 43);
    Tensor *P, *Pr;
    Tensor *yc = ag_attention(
        env.tape, ag_scatter_rows(env.tape, q, qi, B, Tq), ag_scatter_rows(env.tape, k, ki, B, Tk),
        ag_scatter_rows(env.tape, v, ki, B, Tk),
        &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = {NH, NKV, HS, 0, 0, 0}},
        &(AgAttnMask){.causal = causal, .key_padding = kp}, 0, NULL, &P);
    yc = ag_gather_rows(env.tape, yc, qi, nq);
    backward_weighted(env.tape, yc);
    Real *y0 = arena_alloc(env.params, yc->size * sizeof(Real));
    memcpy(y0, yc->data, yc->size * sizeof(Real));
    Real *gq = copy_grad(env.params, q), *gk = copy_grad(env.params, k);
    Real *gv = copy_grad(env.params, v);
    size_t np = P->size; /* P is in the step arena, reset below */
    Real *p0 = arena_alloc(env.params, np * sizeof(Real));
    memcpy(p0, P->data, np * sizeof(Real));

    ag_tape_reset(env.tape);
    zero_grads(q, k, v);
    Tensor *y = ag_attention(env.tape, q, k, v,
                             &(AgAttnLayout){.kind = AG_ATTN_ROWS,
                                             .heads = {NH, NKV, HS, 0, 0, 0},
                                             .q_rows = {qi, B, Tq},
                                             .k_rows = {ki, B, Tk}},
                             &(AgAttnMask){.causal = causal, .key_padding = kp}, 0, NULL, &Pr);
    cr_assert(env.tape->last && env.tape->last->op == AG_OP_ATTENTION &&
                  env.tape->last->prev == NULL,
              "one node, no scatter or gather");
    backward_weighted(env.tape, y);
    cr_assert(y->ndim == 2 && y->shape[0] == nq && y->shape[1] == NH * HS);
    cr_assert(max_diff(y->data, y0, y->size) <= TOL, "output: %g", max_diff(y->data, y0, y->size));
    cr_assert(max_diff(q->grad, gq, q->size) <= TOL, "dq: %g", max_diff(q->grad, gq, q->size));
    cr_assert(max_diff(k->grad, gk, k->size) <= TOL, "dk: %g", max_diff(k->grad, gk, k->size));
    cr_assert(max_diff(v->grad, gv, v->size) <= TOL, "dv: %g", max_diff(v->grad, gv, v->size));
    cr_assert(Pr->ndim == 4 && Pr->size == np);
    size_t plane = (size_t)Tq * Tk;
    for (size_t e = 0; e < np; e++) {
        int b = (int)(e / ((size_t)NH * plane)), t = (int)(e % plane / Tk), kept = 0;
        for (int r = 0; r < nq; r++) kept |= qi[r] == b * Tq + t;
        if (kept)
            cr_assert(fabs((double)Pr->data[e] - (double)p0[e]) <= TOL, "P[%zu] %g vs %g", e,
                      (double)Pr->data[e], (double)p0[e]);
        else
            cr_assert(Pr->data[e] == 0, "P[%zu] of a left-out query row: %g", e,
                      (double)Pr->data[e]);
    }
    /* q, k, v intermediates (times 1): fresh gradient buffers that the backward sets, key rows
     * no query sees included (0); twice, so that the second step's buffers hold old values */
    for (int pass = 0; pass < 2; pass++) {
        ag_tape_reset(env.tape);
        zero_grads(q, k, v);
        Tensor *qs = ag_scale(env.tape, q, 1), *ks = ag_scale(env.tape, k, 1);
        Tensor *vs = ag_scale(env.tape, v, 1);
        Tensor *ys =
            ag_attention(env.tape, qs, ks, vs,
                         &(AgAttnLayout){.kind = AG_ATTN_ROWS,
                                         .heads = {NH, NKV, HS, 0, 0, 0},
                                         .q_rows = {qi, B, Tq},
                                         .k_rows = {ki, B, Tk}},
                         &(AgAttnMask){.causal = causal, .key_padding = kp}, 0, NULL, NULL);
        backward_weighted(env.tape, ys);
        cr_assert(env.tape->last->prev->prev->store == 7, "attention sets the gradients");
        cr_assert(max_diff(q->grad, gq, q->size) <= TOL, "set dq: %g",
                  max_diff(q->grad, gq, q->size));
        cr_assert(max_diff(k->grad, gk, k->size) <= TOL, "set dk: %g",
                  max_diff(k->grad, gk, k->size));
        cr_assert(max_diff(v->grad, gv, v->size) <= TOL, "set dv: %g",
                  max_diff(v->grad, gv, v->size));
    }
    test_env_free(&env);
}

Test(ag_attention, packed_rows_equal_scatter_columns_gather) {
    check_rows_against_cols(3, 2, 2, 6, 6, 4, 1, 0);    /* causal self-attention shape */
    check_rows_against_cols(3, 2, 2, 5, 9, 8, 0, 1);    /* cross */
    check_rows_against_cols(3, 4, 2, 7, 9, 4, 1, 2);    /* grouped-query, causal, Tq < Tk */
    check_rows_against_cols(3, 2, 1, 37, 37, 16, 1, 1); /* several row and key blocks */
    check_rows_against_cols(3, 2, 2, 40, 33, 32, 0, 3); /* HS a multiple of 32: v read in place */
    check_rows_against_cols(3, 2, 2, 20, 20, 32, 1, 1); /* the same, causal */
}

Test(ag_attention, probs_are_computed_in_no_grad_mode_and_dropout_is_off) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, 2, 2, 3, 4, "q", 16);
    Tensor *k = randn4(env.params, 2, 2, 3, 4, "k", 17);
    Tensor *v = randn4(env.params, 2, 2, 3, 4, "v", 18);
    Tensor *P0;
    Tensor *y0 = ag_attention(env.tape, q, k, v, NULL, AG_CAUSAL, 0, NULL, &P0);
    int nodes = env.tape->n_nodes;
    cr_assert_eq(nodes, 1);

    int prev = ag_no_grad(env.tape, 1);
    Rng rng;
    rng_seed(&rng, 5);
    Tensor *P = NULL;
    Tensor *y = ag_attention(env.tape, q, k, v, NULL, AG_CAUSAL, 0.5, &rng, &P);
    ag_no_grad(env.tape, prev);
    cr_assert_eq(env.tape->n_nodes, nodes, "no-grad mode recorded a node");
    cr_assert(P != NULL && P != P0);
    cr_assert(memcmp(P->data, P0->data, P->size * sizeof(Real)) == 0);
    cr_assert(memcmp(y->data, y0->data, y->size * sizeof(Real)) == 0,
              "dropout must be the identity in no-grad mode");
    test_env_free(&env);
}

Test(ag_attention, dropout_zeroes_or_rescales_each_probability) {
    TestEnv env = test_env_new();
    int B = 2, NH = 2, T = 8, HS = 8; /* v = identity rows, so y = dropout(P) exactly */
    Tensor *q = randn4(env.params, B, NH, T, HS, "q", 19);
    Tensor *k = randn4(env.params, B, NH, T, HS, "k", 20);
    Tensor *v = randn4(env.params, B, NH, T, HS, "v", 21);
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int d = 0; d < HS; d++) v->data[r * HS + d] = (Real)((size_t)d == r % T);
    Rng rng;
    rng_seed(&rng, 3);
    Tensor *P;
    double p = 0.5;
    Tensor *y = ag_attention(env.tape, q, k, v, NULL, NULL, p, &rng, &P);
    size_t dropped = 0;
    for (size_t e = 0; e < P->size; e++) {
        if (y->data[e] == 0) {
            dropped++;
        } else {
            Real want = P->data[e] * (Real)(1.0 / (1.0 - p));
            cr_assert(fabs((double)(y->data[e] - want)) <= 4 * TOL * fmax(1.0, fabs((double)want)),
                      "kept element %zu: %g, want %g", e, (double)y->data[e], (double)want);
        }
    }
    /* 256 draws at p = 0.5: far outside [80, 176] only with a broken mask */
    cr_assert(dropped > 80 && dropped < 176, "%zu of %zu dropped at p = 0.5", dropped, P->size);
    /* the same rng state gives the same mask; the next draw another one */
    Rng again;
    rng_seed(&again, 3);
    Tensor *y2 = ag_attention(env.tape, q, k, v, NULL, NULL, p, &again, NULL);
    cr_assert(memcmp(y->data, y2->data, y->size * sizeof(Real)) == 0);
    Tensor *y3 = ag_attention(env.tape, q, k, v, NULL, NULL, p, &again, NULL);
    cr_assert(memcmp(y->data, y3->data, y->size * sizeof(Real)) != 0);
    test_env_free(&env);
}

/* Decoding one token at a time: query t against the first t+1 keys and values (the cache) gives
 * row t of the full causal computation, and so do the last m queries against all keys. */
Test(ag_attention, causal_query_on_a_cache_equals_the_last_rows_of_the_full_pass) {
    TestEnv env = test_env_new();
    int NH = 2, T = 6, HS = 4;
    Tensor *q = randn4(env.params, 1, NH, T, HS, "q", 22);
    Tensor *k = randn4(env.params, 1, NH, T, HS, "k", 23);
    Tensor *v = randn4(env.params, 1, NH, T, HS, "v", 24);
    Tensor *y = ag_attention(env.tape, q, k, v, NULL, AG_CAUSAL, 0, NULL, NULL);
    ag_no_grad(env.tape, 1);
    for (int t = 0; t < T; t++) { /* query t, cache of t+1 keys */
        Tensor *qt = tensor_new4(env.tape->arena, 1, NH, 1, HS, "q_t");
        Tensor *kc = tensor_new4(env.tape->arena, 1, NH, t + 1, HS, "k_cache");
        Tensor *vc = tensor_new4(env.tape->arena, 1, NH, t + 1, HS, "v_cache");
        for (int h = 0; h < NH; h++) {
            memcpy(qt->data + (size_t)h * HS, q->data + ((size_t)h * T + t) * HS,
                   (size_t)HS * sizeof(Real));
            memcpy(kc->data + (size_t)h * (t + 1) * HS, k->data + (size_t)h * T * HS,
                   (size_t)(t + 1) * HS * sizeof(Real));
            memcpy(vc->data + (size_t)h * (t + 1) * HS, v->data + (size_t)h * T * HS,
                   (size_t)(t + 1) * HS * sizeof(Real));
        }
        Tensor *yt = ag_attention(env.tape, qt, kc, vc, NULL, AG_CAUSAL, 0, NULL, NULL);
        for (int h = 0; h < NH; h++)
            cr_assert(max_diff(yt->data + (size_t)h * HS, y->data + ((size_t)h * T + t) * HS,
                               (size_t)HS) < TOL,
                      "step %d head %d", t, h);
    }
    for (int m = 1; m <= 3; m++) { /* the last m queries against every key */
        Tensor *qm = tensor_new4(env.tape->arena, 1, NH, m, HS, "q_last");
        for (int h = 0; h < NH; h++)
            memcpy(qm->data + (size_t)h * m * HS, q->data + ((size_t)h * T + T - m) * HS,
                   (size_t)m * HS * sizeof(Real));
        Tensor *ym = ag_attention(env.tape, qm, k, v, NULL, AG_CAUSAL, 0, NULL, NULL);
        for (int h = 0; h < NH; h++)
            cr_assert(max_diff(ym->data + (size_t)h * m * HS,
                               y->data + ((size_t)h * T + T - m) * HS, (size_t)m * HS) < TOL,
                      "last %d rows, head %d", m, h);
    }
    test_env_free(&env);
}

Test(ag_head_gate, scales_each_head_by_its_gate) {
    TestEnv env = test_env_new();
    Tensor *x = randn4(env.params, 2, 3, 4, 5, "x", 25);
    Tensor *g = tensor_new1(env.params, 3, "gate");
    g->data[0] = 0.5;
    g->data[1] = 0;
    g->data[2] = -2;
    Tensor *y = ag_head_gate(env.tape, x, g);
    for (size_t e = 0; e < x->size; e++) {
        int h = (int)(e / 20 % 3);
        cr_assert(y->data[e] == g->data[h] * x->data[e]);
    }
    test_env_free(&env);
}

/* ---- misuse aborts ---- */
static void attention_of(int q1, int q3, int k0, int k1, int v2, int causal, const uint8_t *mask,
                         double p, int with_rng) {
    TestEnv env = test_env_new();
    Tensor *q = randn4(env.params, 2, q1, 3, q3, "q", 1);
    Tensor *k = randn4(env.params, k0, k1, 5, 4, "k", 2);
    Tensor *v = randn4(env.params, k0, k1, v2, 4, "v", 3);
    Rng rng;
    rng_seed(&rng, 1);
    const AgMask *kp = mask ? &(AgMask){mask, 2, 5} : NULL;
    ag_attention(env.tape, q, k, v, NULL, &(AgAttnMask){.causal = causal, .key_padding = kp}, p,
                 with_rng ? &rng : NULL, NULL);
    test_env_free(&env); /* not reached when the call aborts */
}

Test(ag_attention, accepts_valid_arguments) { attention_of(4, 4, 2, 2, 5, 1, NULL, 0.1, 1); }
Test(ag_attention, aborts_on_head_size_mismatch, .signal = SIGABRT) {
    attention_of(2, 3, 2, 2, 5, 0, NULL, 0, 1);
}
Test(ag_attention, aborts_on_batch_mismatch, .signal = SIGABRT) {
    attention_of(2, 4, 3, 2, 5, 0, NULL, 0, 1);
}
Test(ag_attention, aborts_when_k_and_v_differ, .signal = SIGABRT) {
    attention_of(2, 4, 2, 2, 4, 0, NULL, 0, 1);
}
Test(ag_attention, aborts_when_heads_are_not_a_multiple_of_kv_heads, .signal = SIGABRT) {
    attention_of(3, 4, 2, 2, 5, 0, NULL, 0, 1);
}
Test(ag_attention, aborts_on_dropout_p_of_one, .signal = SIGABRT) {
    attention_of(2, 4, 2, 2, 5, 0, NULL, 1.0, 1);
}
Test(ag_attention, aborts_on_dropout_without_rng, .signal = SIGABRT) {
    attention_of(2, 4, 2, 2, 5, 0, NULL, 0.1, 0);
}
Test(ag_attention, aborts_on_a_mask_value_other_than_0_or_1, .signal = SIGABRT) {
    static const uint8_t bad[2 * 5] = {0, 0, 2, 0, 0, 0, 0, 0, 0, 0};
    attention_of(2, 4, 2, 2, 5, 0, bad, 0, 1);
}
Test(ag_head_gate, aborts_when_gate_size_differs_from_heads, .signal = SIGABRT) {
    TestEnv env = test_env_new();
    Tensor *x = randn4(env.params, 2, 3, 4, 5, "x", 1);
    Tensor *g = tensor_new1(env.params, 4, "gate");
    ag_head_gate(env.tape, x, g);
    test_env_free(&env);
}
Test(ag_attention, attn_mask_bool_aborts_on_a_value_other_than_0_or_1, .signal = SIGABRT) {
    TestEnv env = test_env_new();
    ag_attn_mask_bool(env.tape, (const uint8_t[]){0, 1, 2, 0}, 2, (int[]){2, 2});
}
Test(ag_attention, attn_mask_bool_aborts_on_a_shape_of_3_dimensions, .signal = SIGABRT) {
    TestEnv env = test_env_new();
    ag_attn_mask_bool(env.tape, (const uint8_t[]){0, 1, 0, 0}, 3, (int[]){1, 2, 2});
}

/* The softmax of rows without an additive mask runs a vector at a time (k_attention.c's
 * softmax_rows_v, float on AVX-512 and AVX2), with one the loops: a mask of zeros adds 0 to
 * every score, so both must give the same bits of P and y. Rows of 1 to 70 keys (one vector,
 * a part of a second, past the rows kept in registers), key padding (a batch element all
 * padding: its rows are 0), causal or not, and scores from -300 to 300 (k_expf's clamps). */
Test(ag_attention, rows_without_a_mask_give_the_bits_of_a_mask_of_zeros) {
    static const int lengths[] = {1, 5, 16, 17, 20, 31, 33, 64, 70};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++)
        for (int causal = 0; causal < 2; causal++)
            for (int big = 0; big < 2; big++) {
                TestEnv env = test_env_new();
                int T = lengths[li], B = 3, NH = 2, HS = 8;
                Tensor *q = randn4(env.params, B, NH, T, HS, "q", 11 + li);
                Tensor *k = randn4(env.params, B, NH, T, HS, "k", 12 + li);
                Tensor *v = randn4(env.params, B, NH, T, HS, "v", 13 + li);
                if (big)
                    for (size_t e = 0; e < q->size; e++) q->data[e] *= 40;
                uint8_t pad[3 * 70];
                for (int b = 0; b < B; b++) /* batch 0: none; 1: the last third; 2: all */
                    for (int t = 0; t < T; t++)
                        pad[b * T + t] = b == 2 || (b == 1 && 3 * t >= 2 * T);
                Tensor *zero = tensor_new(env.tape->arena, 2, (int[]){T, T}, "zeros");
                tensor_fill(zero, 0);
                AgAttnMask plain = {.causal = causal, .key_padding = &(AgMask){pad, B, T}};
                AgAttnMask with_zero = plain;
                with_zero.attn_mask = zero;
                Tensor *P0, *P1;
                Tensor *y0 = ag_attention(env.tape, q, k, v, NULL, &plain, 0, NULL, &P0);
                Tensor *y1 = ag_attention(env.tape, q, k, v, NULL, &with_zero, 0, NULL, &P1);
                cr_assert(memcmp(P0->data, P1->data, P0->size * sizeof(Real)) == 0,
                          "T %d causal %d big %d: P differs", T, causal, big);
                cr_assert(memcmp(y0->data, y1->data, y0->size * sizeof(Real)) == 0,
                          "T %d causal %d big %d: y differs", T, causal, big);
                for (size_t e = 0; e < (size_t)NH * T * T; e++) /* batch 2: all padding */
                    cr_assert(P0->data[2 * (size_t)NH * T * T + e] == 0);
                test_env_free(&env);
            }
}
