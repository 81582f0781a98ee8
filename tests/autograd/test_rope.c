/* test_rope.c: ag_rope beyond the gradient checks of the case table: the forward against the
 * formula written out with complex numbers (as Meta's apply_rotary_emb), position 0 is the
 * identity, a rotation keeps each pair's length, the score of a rotated query and key depends
 * only on their distance (what RoPE is for), a decoding step at pos0 = t gives row t of the
 * whole sequence to the bit, a column block gives the bits of the same columns copied out, and
 * split heads (B, NH, T, HS) give the bits of (B, T, C); partial rotary (rot_dims) against
 * GPT-NeoX's rotate_half written out as HF's modeling_gpt_neox.py does it, on rows permuted
 * within the rotated dims as a loader does. The gradient checks and the misuse rows
 * are in tests/support/cases.c and test_errors.c; the PyTorch comparison in
 * tests/autograd/torch_ops.py. */
#include <complex.h>
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cases.h"

#ifdef AG_REAL_DOUBLE
#define TIGHT 1e-12
#else
#define TIGHT 1e-5
#endif

static void fill(Tensor *t, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    rng_fill_normal(&rng, t, 0, 1);
}

/* x (rows, C) with rows (b, t), heads of HS: the reference in complex double */
static double max_err_vs_complex(const Tensor *y, const Tensor *x, int T, int HS, int pos0,
                                 double base) {
    int C = x->shape[x->ndim - 1];
    double worst = 0;
    for (size_t r = 0; r < tensor_rows(x); r++) {
        int pos = pos0 + (int)(r % (size_t)T);
        for (int h = 0; h < C; h += HS)
            for (int i = 0; i < HS / 2; i++) {
                double theta = 1.0 / pow(base, (double)(2 * i) / HS);
                double complex z =
                    (double)x->data[r * C + h + 2 * i] + I * (double)x->data[r * C + h + 2 * i + 1];
                double complex w = z * cexp(I * (pos * theta));
                worst = fmax(worst, fabs(creal(w) - (double)y->data[r * C + h + 2 * i]));
                worst = fmax(worst, fabs(cimag(w) - (double)y->data[r * C + h + 2 * i + 1]));
            }
    }
    return worst;
}

Test(ag_rope, forward_matches_the_complex_formula) {
    TestEnv env = test_env_new();
    Tensor *x = tensor_new3(env.params, 2, 7, 24, "x");
    fill(x, 1);
    struct {
        int HS, pos0;
        double base;
    } runs[] = {{8, 0, 10000}, {6, 13, 10000}, {24, 250, 500000}, {2, 3, 100}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        Tensor *y = ag_rope(env.tape, x,
                            &(AgRope){.head_size = runs[k].HS,
                                      .pos0 = runs[k].pos0,
                                      .base = runs[k].base == 10000 ? 0 : runs[k].base});
        double e = max_err_vs_complex(y, x, 7, runs[k].HS, runs[k].pos0, runs[k].base);
        cr_assert(e < 10 * TIGHT, "head_size %d pos0 %d base %g: max error %.3g", runs[k].HS,
                  runs[k].pos0, runs[k].base, e);
    }
    test_env_free(&env);
}

Test(ag_rope, position_0_is_the_identity_and_rotations_keep_lengths) {
    TestEnv env = test_env_new();
    enum { T = 9, C = 16, HS = 8 };
    Tensor *x = tensor_new2(env.params, T, C, "x");
    fill(x, 2);
    Tensor *y = ag_rope(env.tape, x, &(AgRope){.head_size = HS});
    for (int c = 0; c < C; c++) /* row 0 is at position 0: cos 0 = 1, sin 0 = 0 exactly */
        cr_assert_eq(y->data[c], x->data[c], "column %d", c);
    for (int i = 0; i < T * C; i += 2) {
        double nx = hypot((double)x->data[i], (double)x->data[i + 1]);
        double ny = hypot((double)y->data[i], (double)y->data[i + 1]);
        cr_assert(fabs(nx - ny) < 10 * TIGHT * fmax(1, nx), "pair %d: |x| %.17g, |y| %.17g", i / 2,
                  nx, ny);
    }
    test_env_free(&env);
}

/* <rope(q, m), rope(k, n)> = Re sum conj(q e^(i m theta)) k e^(i n theta), a function of
 * n - m alone: the same q and k at positions (3, 1) and (40, 38) give the same score */
Test(ag_rope, the_score_of_a_query_and_a_key_depends_only_on_their_distance) {
    TestEnv env = test_env_new();
    enum { HS = 16 };
    Tensor *q = tensor_new2(env.params, 1, HS, "q"), *k = tensor_new2(env.params, 1, HS, "k");
    fill(q, 3);
    fill(k, 4);
    const int pos[][2] = {{3, 1}, {40, 38}, {1002, 1000}};
    double score[3];
    for (int s = 0; s < 3; s++) {
        Tensor *qr = ag_rope(env.tape, q, &(AgRope){.head_size = HS, .pos0 = pos[s][0]});
        Tensor *kr = ag_rope(env.tape, k, &(AgRope){.head_size = HS, .pos0 = pos[s][1]});
        score[s] = 0;
        for (int c = 0; c < HS; c++) score[s] += (double)qr->data[c] * (double)kr->data[c];
    }
    double unrotated = 0;
    for (int c = 0; c < HS; c++) unrotated += (double)q->data[c] * (double)k->data[c];
    for (int s = 1; s < 3; s++)
        cr_assert(fabs(score[s] - score[0]) < 100 * TIGHT, "distance 2 at %d: %.17g vs %.17g",
                  pos[s][0], score[s], score[0]);
    cr_assert(fabs(score[0] - unrotated) > 1e-3, "the rotation changed nothing: %.17g", score[0]);
    test_env_free(&env);
}

/* Incremental decoding: row t alone at pos0 = P + t has the bits of row t of the sequence
 * rotated from pos0 = P, and so has its gradient */
Test(ag_rope, a_decoding_step_gives_the_bits_of_its_row_in_the_whole_sequence) {
    TestEnv env = test_env_new();
    enum { B = 2, T = 6, C = 12, HS = 4, P = 5 };
    Tensor *x = tensor_new3(env.params, B, T, C, "x");
    fill(x, 5);
    Tensor *full = ag_rope(env.tape, x, &(AgRope){.head_size = HS, .pos0 = P});
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            Tensor *row = tensor_new3(env.params, 1, 1, C, "row");
            memcpy(row->data, x->data + ((size_t)b * T + t) * C, C * sizeof(Real));
            Tensor *y = ag_rope(env.tape, row, &(AgRope){.head_size = HS, .pos0 = P + t});
            cr_assert(memcmp(y->data, full->data + ((size_t)b * T + t) * C, C * sizeof(Real)) == 0,
                      "row (%d,%d) differs", b, t);
        }
    test_env_free(&env);
}

/* columns [8, 20) of a (2,3,28) tensor: the same bits as rotating those columns copied out;
 * the gradient lands in those columns only */
Test(ag_rope, a_column_block_gives_the_bits_of_the_columns_copied_out) {
    TestEnv env = test_env_new();
    enum { B = 2, T = 3, C = 28, HS = 4, COL = 8, N = 12 };
    Tensor *x = tensor_new3(env.params, B, T, C, "qkv");
    Tensor *xc = tensor_new3(env.params, B, T, N, "k");
    fill(x, 6);
    for (int r = 0; r < B * T; r++)
        memcpy(xc->data + (size_t)r * N, x->data + (size_t)r * C + COL, N * sizeof(Real));
    tensor_requires_grad(x);
    tensor_requires_grad(xc);
    AgRope rope = {.head_size = HS, .pos0 = 2, .col = COL, .n_cols = N};
    Tensor *y = ag_rope(env.tape, x, &rope);
    rope.col = rope.n_cols = 0;
    Tensor *yc = ag_rope(env.tape, xc, &rope);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[2], N);
    cr_assert(memcmp(y->data, yc->data, yc->size * sizeof(Real)) == 0);
    Tensor *R = tensor_new3(env.tape->arena, B, T, N, "R");
    fill(R, 7);
    ag_backward(env.tape, ag_add(env.tape, ag_sum(env.tape, ag_mul(env.tape, y, R)),
                                 ag_sum(env.tape, ag_mul(env.tape, yc, R))));
    for (int r = 0; r < B * T; r++)
        for (int c = 0; c < C; c++) {
            Real g = x->grad[(size_t)r * C + c];
            if (c < COL || c >= COL + N)
                cr_assert_eq(g, 0, "column %d outside the block has gradient %g", c, (double)g);
            else
                cr_assert_eq(g, xc->grad[(size_t)r * N + c - COL], "row %d column %d", r, c);
        }
    test_env_free(&env);
}

/* split heads (B, NH, T, HS): row (b, h, t) is at position t, as row (b, t) of (B, T, C) */
Test(ag_rope, split_heads_give_the_bits_of_the_projection_layout) {
    TestEnv env = test_env_new();
    enum { B = 2, T = 5, NH = 3, HS = 6 };
    Tensor *x = tensor_new3(env.params, B, T, NH * HS, "x");
    fill(x, 8);
    AgRope rope = {.head_size = HS, .pos0 = 4, .base = 50};
    Tensor *a = ag_split_heads(env.tape, ag_rope(env.tape, x, &rope), NH);
    Tensor *b = ag_rope(env.tape, ag_split_heads(env.tape, x, NH), &rope);
    cr_assert(tensor_same_shape(a, b));
    cr_assert(memcmp(a->data, b->data, a->size * sizeof(Real)) == 0);
    test_env_free(&env);
}

/* HF's GPT-NeoX rotary on one head h (HS values, its first R rotated), as modeling_gpt_neox.py
 * writes it: inv_freq_j = base^(-2j/R) for j < R/2, cos and sin of p inv_freq repeated over
 * both halves, q_rot * cos + rotate_half(q_rot) * sin with rotate_half(x) = (-x2, x1), then
 * the pass-through dims appended. */
static void neox_rotary(double *out, const double *h, int HS, int R, int pos, double base) {
    for (int j = 0; j < R / 2; j++) {
        double a = pos * (1.0 / pow(base, (double)(2 * j) / R)), co = cos(a), si = sin(a);
        out[j] = h[j] * co - h[j + R / 2] * si;
        out[j + R / 2] = h[j + R / 2] * co + h[j] * si;
    }
    for (int i = R; i < HS; i++) out[i] = h[i];
}

Test(ag_rope, partial_rotary_is_neoxs_on_rows_permuted_within_the_rotated_dims) {
    TestEnv env = test_env_new();
    enum { B = 2, T = 5, NH = 3, HS = 8, C = NH * HS };
    Tensor *x = tensor_new3(env.params, B, T, C, "x");
    fill(x, 7);
    const struct {
        int R, pos0;
        double base;
    } runs[] = {{2, 0, 10000}, {4, 3, 10000}, {6, 11, 500}, {8, 2, 10000}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        int R = runs[k].R;
        Tensor *y = ag_rope(env.tape, x,
                            &(AgRope){.head_size = HS,
                                      .pos0 = runs[k].pos0,
                                      .base = runs[k].base,
                                      .rot_dims = R == HS ? 0 : R});
        double worst = 0;
        for (size_t r = 0; r < (size_t)B * T; r++)
            for (int h = 0; h < NH; h++) {
                const Real *xh = x->data + r * C + h * HS, *yh = y->data + r * C + h * HS;
                double hf[HS], want[HS];
                /* attograd's pair (2j, 2j+1) is HF's (j, j + R/2): our 2j is HF's j */
                for (int j = 0; j < R / 2; j++) hf[j] = xh[2 * j], hf[j + R / 2] = xh[2 * j + 1];
                for (int i = R; i < HS; i++) hf[i] = xh[i];
                neox_rotary(want, hf, HS, R, runs[k].pos0 + (int)(r % T), runs[k].base);
                for (int j = 0; j < R / 2; j++) {
                    worst = fmax(worst, fabs((double)yh[2 * j] - want[j]));
                    worst = fmax(worst, fabs((double)yh[2 * j + 1] - want[j + R / 2]));
                }
                for (int i = R; i < HS; i++) /* passed through: the same bits */
                    cr_assert(yh[i] == xh[i], "R %d: column %d of head %d changed", R, i, h);
            }
        cr_assert(worst < 10 * TIGHT, "R %d pos0 %d: max error %.3g", R, runs[k].pos0, worst);
    }
    test_env_free(&env);
}
