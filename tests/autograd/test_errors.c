/* test_errors.c: every check of every ag_ op, misused on purpose. Each row of the table below
 * runs one misuse in a child process (tests/support/expect_abort.h) and asserts that the child
 * died by SIGABRT and that stderr reads "<file>.c:<line>: ag_<op>: ..." with the shapes (and ids,
 * sizes, p) the row lists. The rows run as one parameterized test per op; an op of ops.def
 * without rows here fails it (add rows when you add an op).
 * Not here: misuse of the tape itself (test_tape.c) and of arenas and tensors
 * (tests/tensor/test_arena.c). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "expect_abort.h"

/* This file is a table, one case a line: clang-format would break its rows, so it skips it. */
/* clang-format off */

/* ---- the misuse cases. Each gets a fresh tape; tensors live in the tape's step arena. ---- */

/* a zeroed tensor of up to 4 dims (ndim 0 is a scalar), named for the message */
static Tensor *mk(Tape *tp, const char *name, int ndim, int d0, int d1, int d2, int d3) {
    Tensor *t = tensor_zeros(tp->arena, ndim, (int[]){d0, d1, d2, d3}, name);
    tensor_requires_grad(t);
    return t;
}
#define T0(n) mk(tp, n, 0, 1, 1, 1, 1)
#define T1(n, a) mk(tp, n, 1, a, 1, 1, 1)
#define T2(n, a, b) mk(tp, n, 2, a, b, 1, 1)
#define T3(n, a, b, c) mk(tp, n, 3, a, b, c, 1)
#define T4(n, a, b, c, d) mk(tp, n, 4, a, b, c, d)

/* elementwise: add, sub, mul share one check */
static void add_shapes(Tape *tp) { ag_add(tp, T2("lhs", 2, 3), T2("rhs", 3, 2)); }
static void add_ranks(Tape *tp) { ag_add(tp, T1("lhs", 6), T2("rhs", 2, 3)); }
static void add_null(Tape *tp) { ag_add(tp, T2("lhs", 2, 3), NULL); }
static void add_tape(Tape *tp) { ag_add(NULL, T2("lhs", 2, 3), T2("rhs", 2, 3)); }
static void sub_shapes(Tape *tp) { ag_sub(tp, T3("lhs", 2, 4, 8), T3("rhs", 2, 8, 4)); }
static void sub_null(Tape *tp) { ag_sub(tp, NULL, T2("rhs", 2, 3)); }
static void sub_tape(Tape *tp) { ag_sub(NULL, T2("lhs", 2, 3), T2("rhs", 2, 3)); }
static void mul_shapes(Tape *tp) { ag_mul(tp, T1("lhs", 5), T1("rhs", 4)); }
static void mul_null(Tape *tp) { ag_mul(tp, T1("lhs", 5), NULL); }
static void mul_tape(Tape *tp) { ag_mul(NULL, T1("lhs", 5), T1("rhs", 5)); }

static void add_bias_len(Tape *tp) { ag_add_bias(tp, T3("x", 2, 3, 5), T1("bias", 4)); }
static void add_bias_rank(Tape *tp) { ag_add_bias(tp, T2("x", 2, 5), T2("bias", 1, 5)); }
static void add_bias_scalar_x(Tape *tp) { ag_add_bias(tp, T0("x"), T1("bias", 1)); }
static void add_bias_null_x(Tape *tp) { ag_add_bias(tp, NULL, T1("bias", 5)); }
static void add_bias_null_bias(Tape *tp) { ag_add_bias(tp, T2("x", 2, 5), NULL); }
static void add_bias_tape(Tape *tp) { ag_add_bias(NULL, T2("x", 2, 5), T1("bias", 5)); }

static void scale_null(Tape *tp) { ag_scale(tp, NULL, 2.0); }
static void scale_tape(Tape *tp) { ag_scale(NULL, T1("x", 3), 2.0); }
static void relu_null(Tape *tp) { ag_relu(tp, NULL); }
static void relu_tape(Tape *tp) { ag_relu(NULL, T1("x", 3)); }
static void gelu_null(Tape *tp) { ag_gelu(tp, NULL); }
static void gelu_tape(Tape *tp) { ag_gelu(NULL, T1("x", 3)); }
static void gelu_tanh_null(Tape *tp) { ag_gelu_tanh(tp, NULL); }
static void gelu_tanh_tape(Tape *tp) { ag_gelu_tanh(NULL, T1("x", 3)); }
static void silu_null(Tape *tp) { ag_silu(tp, NULL); }
static void silu_tape(Tape *tp) { ag_silu(NULL, T1("x", 3)); }

static void dropout_p(Tape *tp, double p) {
    Rng rng;
    rng_seed(&rng, 1);
    ag_dropout(tp, T2("x", 3, 4), p, &rng);
}
static void dropout_negative(Tape *tp) { dropout_p(tp, -0.25); }
static void dropout_one(Tape *tp) { dropout_p(tp, 1.0); }
static void dropout_above_one(Tape *tp) { dropout_p(tp, 1.5); }
static void dropout_nan(Tape *tp) { dropout_p(tp, NAN); }
/* the range check comes before the no-grad shortcut, so evaluation code is checked too */
static void dropout_one_no_grad(Tape *tp) {
    ag_no_grad(tp, 1);
    dropout_p(tp, 1.0);
}
static void dropout_null_rng(Tape *tp) { ag_dropout(tp, T2("x", 3, 4), 0.5, NULL); }
static void dropout_null(Tape *tp) {
    Rng rng;
    rng_seed(&rng, 1);
    ag_dropout(tp, NULL, 0.5, &rng);
}
static void dropout_tape(Tape *tp) {
    Rng rng;
    rng_seed(&rng, 1);
    ag_dropout(NULL, T2("x", 3, 4), 0.5, &rng);
}

/* matrix products and layout */
static void matmul_inner(Tape *tp) { ag_matmul(tp, T3("q", 2, 4, 8), T3("k", 2, 5, 8)); }
static void matmul_inner_2d(Tape *tp) { ag_matmul(tp, T2("a", 3, 4), T2("b", 5, 6)); }
static void matmul_batch(Tape *tp) { ag_matmul(tp, T3("a", 2, 4, 8), T3("b", 3, 8, 5)); }
static void matmul_batch_rank(Tape *tp) { ag_matmul(tp, T4("a", 2, 3, 4, 8), T3("b", 2, 8, 5)); }
static void matmul_rank_a(Tape *tp) { ag_matmul(tp, T1("a", 8), T2("b", 8, 5)); }
static void matmul_rank_b(Tape *tp) { ag_matmul(tp, T2("a", 3, 8), T1("b", 8)); }
static void matmul_null_a(Tape *tp) { ag_matmul(tp, NULL, T2("b", 8, 5)); }
static void matmul_null_b(Tape *tp) { ag_matmul(tp, T2("a", 3, 8), NULL); }
static void matmul_tape(Tape *tp) { ag_matmul(NULL, T2("a", 3, 8), T2("b", 8, 5)); }

static void matmul_bt_inner(Tape *tp) { ag_matmul_bt(tp, T3("q", 2, 4, 8), T2("k", 5, 7)); }
static void matmul_bt_batch(Tape *tp) { ag_matmul_bt(tp, T3("q", 2, 4, 8), T3("k", 3, 5, 8)); }
static void matmul_bt_rank(Tape *tp) { ag_matmul_bt(tp, T3("q", 2, 4, 8), T1("k", 8)); }
static void matmul_bt_null(Tape *tp) { ag_matmul_bt(tp, T3("q", 2, 4, 8), NULL); }
static void matmul_bt_tape(Tape *tp) { ag_matmul_bt(NULL, T2("q", 4, 8), T2("k", 5, 8)); }

static void linear_in(Tape *tp) { ag_linear(tp, T3("x", 2, 3, 4), T2("W", 5, 6), T1("b", 5)); }
static void linear_w_rank(Tape *tp) { ag_linear(tp, T2("x", 3, 4), T1("W", 4), NULL); }
static void linear_scalar_x(Tape *tp) { ag_linear(tp, T0("x"), T2("W", 5, 1), NULL); }
static void linear_b_len(Tape *tp) { ag_linear(tp, T2("x", 3, 4), T2("W", 5, 4), T1("b", 4)); }
static void linear_b_rank(Tape *tp) { ag_linear(tp, T2("x", 3, 4), T2("W", 5, 4), T2("b", 1, 5)); }
static void linear_null_x(Tape *tp) { ag_linear(tp, NULL, T2("W", 5, 4), NULL); }
static void linear_null_w(Tape *tp) { ag_linear(tp, T2("x", 3, 4), NULL, NULL); }
static void linear_tape(Tape *tp) { ag_linear(NULL, T2("x", 3, 4), T2("W", 5, 4), NULL); }
static void linear_relu_in(Tape *tp) { ag_linear_relu(tp, T3("x", 2, 3, 4), T2("W", 5, 6), NULL); }
static void linear_relu_b_len(Tape *tp) { ag_linear_relu(tp, T2("x", 3, 4), T2("W", 5, 4), T1("b", 4)); }
static void linear_relu_null_x(Tape *tp) { ag_linear_relu(tp, NULL, T2("W", 5, 4), NULL); }
static void linear_relu_tape(Tape *tp) { ag_linear_relu(NULL, T2("x", 3, 4), T2("W", 5, 4), NULL); }

static void transpose_rank(Tape *tp) { ag_transpose(tp, T1("x", 5)); }
static void transpose_scalar(Tape *tp) { ag_transpose(tp, T0("x")); }
static void transpose_null(Tape *tp) { ag_transpose(tp, NULL); }
static void transpose_tape(Tape *tp) { ag_transpose(NULL, T2("x", 2, 3)); }

static void reshape_count(Tape *tp) { ag_reshape(tp, T3("x", 2, 3, 4), 2, (int[]){5, 5}); }
static void reshape_zero_dim(Tape *tp) { ag_reshape(tp, T3("x", 2, 3, 4), 2, (int[]){0, 24}); }
static void reshape_negative(Tape *tp) { ag_reshape(tp, T3("x", 2, 3, 4), 2, (int[]){-6, -4}); }
static void reshape_too_many_dims(Tape *tp) {
    ag_reshape(tp, T3("x", 2, 3, 4), 5, (int[]){1, 2, 3, 4, 1});
}
static void reshape_null(Tape *tp) { ag_reshape(tp, NULL, 2, (int[]){6, 4}); }
static void reshape_tape(Tape *tp) { ag_reshape(NULL, T3("x", 2, 3, 4), 2, (int[]){6, 4}); }

static void split_heads_divisible(Tape *tp) { ag_split_heads(tp, T3("x", 2, 3, 10), 4); }
static void split_heads_zero(Tape *tp) { ag_split_heads(tp, T3("x", 2, 3, 10), 0); }
static void split_heads_rank(Tape *tp) { ag_split_heads(tp, T2("x", 3, 10), 2); }
static void split_heads_null(Tape *tp) { ag_split_heads(tp, NULL, 2); }
static void split_heads_tape(Tape *tp) { ag_split_heads(NULL, T3("x", 2, 3, 10), 2); }
static void merge_heads_rank(Tape *tp) { ag_merge_heads(tp, T3("x", 2, 3, 4)); }
static void merge_heads_null(Tape *tp) { ag_merge_heads(tp, NULL); }
static void merge_heads_tape(Tape *tp) { ag_merge_heads(NULL, T4("x", 2, 2, 3, 4)); }

/* reductions */
static void sum_null(Tape *tp) { ag_sum(tp, NULL); }
static void sum_tape(Tape *tp) { ag_sum(NULL, T2("x", 2, 3)); }
static void mean_null(Tape *tp) { ag_mean(tp, NULL); }
static void mean_tape(Tape *tp) { ag_mean(NULL, T2("x", 2, 3)); }

/* softmax family */
static void softmax_scalar(Tape *tp) { ag_softmax(tp, T0("x")); }
static void softmax_null(Tape *tp) { ag_softmax(tp, NULL); }
static void softmax_tape(Tape *tp) { ag_softmax(NULL, T2("x", 2, 3)); }
static void log_softmax_scalar(Tape *tp) { ag_log_softmax(tp, T0("x")); }
static void log_softmax_null(Tape *tp) { ag_log_softmax(tp, NULL); }
static void log_softmax_tape(Tape *tp) { ag_log_softmax(NULL, T2("x", 2, 3)); }

static void cross_entropy_target_high(Tape *tp) {
    ag_cross_entropy(tp, T2("logits", 3, 5), (int[]){0, 5, 1}, -100);
}
static void cross_entropy_target_negative(Tape *tp) {
    ag_cross_entropy(tp, T3("logits", 2, 2, 7), (int[]){0, 6, -1, 2}, -100);
}
static void cross_entropy_null_targets(Tape *tp) {
    ag_cross_entropy(tp, T2("logits", 3, 5), NULL, -100);
}
static void cross_entropy_scalar(Tape *tp) { ag_cross_entropy(tp, T0("logits"), (int[]){0}, -100); }
static void cross_entropy_null(Tape *tp) { ag_cross_entropy(tp, NULL, (int[]){0, 1, 2}, -100); }
static void cross_entropy_tape(Tape *tp) {
    ag_cross_entropy(NULL, T2("logits", 3, 5), (int[]){0, 1, 2}, -100);
}

/* normalisation */
static void layernorm_scalar(Tape *tp) { ag_layernorm(tp, T0("x"), T1("weight", 1), NULL, 1e-5); }
static void layernorm_weight_len(Tape *tp) {
    ag_layernorm(tp, T3("x", 2, 3, 4), T1("weight", 5), NULL, 1e-5);
}
static void layernorm_weight_rank(Tape *tp) {
    ag_layernorm(tp, T2("x", 2, 4), T2("weight", 1, 4), NULL, 1e-5);
}
static void layernorm_bias_len(Tape *tp) {
    ag_layernorm(tp, T3("x", 2, 3, 4), T1("weight", 4), T1("bias", 3), 1e-5);
}
static void layernorm_bias_rank(Tape *tp) {
    ag_layernorm(tp, T2("x", 2, 4), T1("weight", 4), T2("bias", 2, 4), 1e-5);
}
static void layernorm_eps_zero(Tape *tp) {
    ag_layernorm(tp, T2("x", 2, 4), T1("weight", 4), NULL, 0.0);
}
static void layernorm_eps_negative(Tape *tp) {
    ag_layernorm(tp, T2("x", 2, 4), T1("weight", 4), T1("bias", 4), -0.5);
}
static void layernorm_eps_nan(Tape *tp) {
    ag_layernorm(tp, T2("x", 2, 4), T1("weight", 4), NULL, NAN);
}
static void layernorm_null_x(Tape *tp) { ag_layernorm(tp, NULL, T1("weight", 4), NULL, 1e-5); }
static void layernorm_null_weight(Tape *tp) { ag_layernorm(tp, T2("x", 2, 4), NULL, NULL, 1e-5); }
static void layernorm_tape(Tape *tp) {
    ag_layernorm(NULL, T2("x", 2, 4), T1("weight", 4), T1("bias", 4), 1e-5);
}
static void rmsnorm_scalar(Tape *tp) { ag_rmsnorm(tp, T0("x"), T1("weight", 1), 1e-5); }
static void rmsnorm_weight_len(Tape *tp) { ag_rmsnorm(tp, T3("x", 2, 3, 4), T1("weight", 5), 1e-5); }
static void rmsnorm_weight_rank(Tape *tp) { ag_rmsnorm(tp, T2("x", 2, 4), T2("weight", 1, 4), 1e-5); }
static void rmsnorm_eps_zero(Tape *tp) { ag_rmsnorm(tp, T2("x", 2, 4), T1("weight", 4), 0.0); }
static void rmsnorm_eps_negative(Tape *tp) { ag_rmsnorm(tp, T2("x", 2, 4), T1("weight", 4), -1e-6); }
static void rmsnorm_eps_nan(Tape *tp) { ag_rmsnorm(tp, T2("x", 2, 4), T1("weight", 4), NAN); }
static void rmsnorm_null_x(Tape *tp) { ag_rmsnorm(tp, NULL, T1("weight", 4), 1e-5); }
static void rmsnorm_null_weight(Tape *tp) { ag_rmsnorm(tp, T2("x", 2, 4), NULL, 1e-5); }
static void rmsnorm_tape(Tape *tp) { ag_rmsnorm(NULL, T2("x", 2, 4), T1("weight", 4), 1e-5); }

static void rope_rank(Tape *tp) { ag_rope(tp, T1("q", 8), &(AgRope){.head_size = 4}); }
static void rope_odd(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 10), &(AgRope){.head_size = 5}); }
static void rope_zero_hs(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 0}); }
static void rope_cols_past(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 4, .col = 16, .n_cols = 12}); }
static void rope_col_negative(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 4, .col = -4, .n_cols = 8}); }
static void rope_col_past(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 4, .col = 28}); }
static void rope_part_head(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 8, .col = 8, .n_cols = 12}); }
static void rope_no_cols(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 4, .col = 24}); }
static void rope_pos0(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 4, .pos0 = -1}); }
static void rope_pos0_overflow(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 4, .pos0 = 2147483646}); }
static void rope_base_negative(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 4, .base = -10000}); }
static void rope_base_inf(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 4, .base = INFINITY}); }
static void rope_base_nan(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), &(AgRope){.head_size = 4, .base = NAN}); }
static void rope_null_r(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 8), NULL); }
static void rope_rot_odd(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 16), &(AgRope){.head_size = 8, .rot_dims = 3}); }
static void rope_rot_wide(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 16), &(AgRope){.head_size = 8, .rot_dims = 10}); }
static void rope_rot_negative(Tape *tp) { ag_rope(tp, T3("q", 2, 3, 16), &(AgRope){.head_size = 8, .rot_dims = -2}); }
static void rope_null_x(Tape *tp) { ag_rope(tp, NULL, &(AgRope){.head_size = 4}); }
static void rope_keep(Tape *tp) { ag_rope(tp, T3("qkv", 2, 3, 24), &(AgRope){.head_size = 4, .n_cols = 16, .keep = 2}); }
static void rope_tape(Tape *tp) { ag_rope(NULL, T3("q", 2, 3, 8), &(AgRope){.head_size = 4}); }

static void add_layernorm_shapes(Tape *tp) {
    ag_add_layernorm(tp, T3("x", 2, 3, 4), T3("f", 2, 4, 3), T1("weight", 4), NULL, 1e-5);
}
static void add_layernorm_scalar(Tape *tp) { ag_add_layernorm(tp, T0("x"), T0("f"), T1("weight", 1), NULL, 1e-5); }
static void add_layernorm_weight_len(Tape *tp) {
    ag_add_layernorm(tp, T3("x", 2, 3, 4), T3("f", 2, 3, 4), T1("weight", 5), NULL, 1e-5);
}
static void add_layernorm_bias_rank(Tape *tp) {
    ag_add_layernorm(tp, T2("x", 2, 4), T2("f", 2, 4), T1("weight", 4), T2("bias", 2, 4), 1e-5);
}
static void add_layernorm_eps(Tape *tp) {
    ag_add_layernorm(tp, T2("x", 2, 4), T2("f", 2, 4), T1("weight", 4), NULL, 0.0);
}
static void add_layernorm_null_f(Tape *tp) { ag_add_layernorm(tp, T2("x", 2, 4), NULL, T1("weight", 4), NULL, 1e-5); }
static void add_layernorm_null_weight(Tape *tp) { ag_add_layernorm(tp, T2("x", 2, 4), T2("f", 2, 4), NULL, NULL, 1e-5); }
static void add_layernorm_tape(Tape *tp) {
    ag_add_layernorm(NULL, T2("x", 2, 4), T2("f", 2, 4), T1("weight", 4), NULL, 1e-5);
}

/* lookup */
static void embedding_id_high(Tape *tp) {
    ag_embedding(tp, T2("wte", 5, 4), (int[]){0, 1, 5, 2}, 2, 2);
}
static void embedding_id_negative(Tape *tp) {
    ag_embedding(tp, T2("wte", 5, 4), (int[]){0, 1, 2, -3, 4, 0}, 2, 3);
}
static void embedding_rank(Tape *tp) { ag_embedding(tp, T3("wte", 2, 5, 4), (int[]){0, 1}, 1, 2); }
static void embedding_null_ids(Tape *tp) { ag_embedding(tp, T2("wte", 5, 4), NULL, 1, 2); }
static void embedding_bad_bt(Tape *tp) { ag_embedding(tp, T2("wte", 5, 4), (int[]){0, 1}, 0, 2); }
static void embedding_null(Tape *tp) { ag_embedding(tp, NULL, (int[]){0, 1}, 1, 2); }
static void embedding_tape(Tape *tp) { ag_embedding(NULL, T2("wte", 5, 4), (int[]){0, 1}, 1, 2); }
/* ag_embedding_rows: ids (2,3) of a (5,4) table, positions (3,4) */
static const int rows_ids[6] = {0, 1, 2, 3, 4, 0};
static void embedding_rows_row_high(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, NULL, (int[]){1, 6}, 2); }
static void embedding_rows_row_negative(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, NULL, (int[]){-2}, 1); }
static void embedding_rows_n_zero(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, NULL, (int[]){0}, 0); }
static void embedding_rows_pos_shape(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, T2("pe", 4, 4), NULL, 0); }
/* a learned position table belongs in ag_add_bias, whose backward gives it its gradient */
static void embedding_rows_pos_grad(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, T2("pe", 3, 4), NULL, 0); }
static void embedding_rows_id_high(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), (int[]){0, 1, 2, 3, 9, 0}, 2, 3, -1, 2.0, NULL, NULL, 0); }
static void embedding_rows_rank(Tape *tp) { ag_embedding_rows(tp, T1("wte", 5), rows_ids, 2, 3, -1, 2.0, NULL, NULL, 0); }
static void embedding_rows_null_ids(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), NULL, 2, 3, -1, 2.0, NULL, NULL, 0); }
static void embedding_rows_bad_bt(Tape *tp) { ag_embedding_rows(tp, T2("wte", 5, 4), rows_ids, 2, -3, -1, 2.0, NULL, NULL, 0); }
static void embedding_rows_null(Tape *tp) { ag_embedding_rows(tp, NULL, rows_ids, 2, 3, -1, 2.0, NULL, NULL, 0); }
static void embedding_rows_tape(Tape *tp) { ag_embedding_rows(NULL, T2("wte", 5, 4), rows_ids, 2, 3, -1, 2.0, NULL, NULL, 0); }

static void gather_rows_high(Tape *tp) { ag_gather_rows(tp, T3("h", 2, 3, 5), (int[]){0, 6, 1}, 3); }
static void gather_rows_negative(Tape *tp) { ag_gather_rows(tp, T2("h", 4, 5), (int[]){2, -1}, 2); }
static void gather_rows_repeat(Tape *tp) { ag_gather_rows(tp, T2("h", 4, 5), (int[]){3, 1, 3}, 3); }
static void gather_rows_n_zero(Tape *tp) { ag_gather_rows(tp, T2("h", 4, 5), (int[]){0}, 0); }
static void gather_rows_n_large(Tape *tp) { ag_gather_rows(tp, T2("h", 2, 5), (int[]){0, 1, 0}, 3); }
static void gather_rows_scalar(Tape *tp) { ag_gather_rows(tp, T0("h"), (int[]){0}, 1); }
static void gather_rows_null_rows(Tape *tp) { ag_gather_rows(tp, T2("h", 4, 5), NULL, 2); }
static void gather_rows_null(Tape *tp) { ag_gather_rows(tp, NULL, (int[]){0}, 1); }
static void gather_rows_tape(Tape *tp) { ag_gather_rows(NULL, T2("h", 4, 5), (int[]){0}, 1); }
static void scatter_rows_high(Tape *tp) { ag_scatter_rows(tp, T2("p", 2, 5), (int[]){1, 6}, 2, 3); }
static void scatter_rows_repeat(Tape *tp) { ag_scatter_rows(tp, T2("p", 3, 5), (int[]){4, 2, 2}, 2, 3); }
static void scatter_rows_rank(Tape *tp) { ag_scatter_rows(tp, T3("p", 1, 2, 5), (int[]){0, 1}, 2, 3); }
static void scatter_rows_too_many(Tape *tp) { ag_scatter_rows(tp, T2("p", 7, 5), (int[]){0, 1, 2, 3, 4, 5, 6}, 2, 3); }
static void scatter_rows_bad_bt(Tape *tp) { ag_scatter_rows(tp, T2("p", 2, 5), (int[]){0, 1}, 0, 3); }
static void scatter_rows_null_rows(Tape *tp) { ag_scatter_rows(tp, T2("p", 2, 5), NULL, 2, 3); }
static void scatter_rows_null(Tape *tp) { ag_scatter_rows(tp, NULL, (int[]){0}, 2, 3); }
static void scatter_rows_tape(Tape *tp) { ag_scatter_rows(NULL, T2("p", 2, 5), (int[]){0, 1}, 2, 3); }

/* attention: q (B,NH,Tq,HS), k and v (B,NKV,Tk,HS); no causal mask, no probs out */
static void att(Tape *tp, Tensor *q, Tensor *k, Tensor *v, const uint8_t *mask, double p,
                Rng *rng) {
    ag_attention(tp, q, k, v, NULL, &(AgAttnMask){.key_padding = mask ? &(AgMask){mask, 2, 3} : NULL}, p, rng, NULL);
}
#define Q T4("q", 2, 4, 3, 8)
#define KV(n) T4(n, 2, 2, 3, 8)
static void attention_null_q(Tape *tp) { att(tp, NULL, KV("k"), KV("v"), NULL, 0, NULL); }
static void attention_null_k(Tape *tp) { att(tp, Q, NULL, KV("v"), NULL, 0, NULL); }
static void attention_null_v(Tape *tp) { att(tp, Q, KV("k"), NULL, NULL, 0, NULL); }
static void attention_q_rank(Tape *tp) {
    att(tp, T3("q", 2, 4, 8), KV("k"), KV("v"), NULL, 0, NULL);
}
static void attention_v_rank(Tape *tp) { att(tp, Q, KV("k"), T3("v", 2, 3, 8), NULL, 0, NULL); }
static void attention_kv_shapes(Tape *tp) {
    att(tp, Q, KV("k"), T4("v", 2, 2, 5, 8), NULL, 0, NULL);
}
static void attention_batch(Tape *tp) {
    att(tp, Q, T4("k", 3, 2, 3, 8), T4("v", 3, 2, 3, 8), NULL, 0, NULL);
}
static void attention_head_size(Tape *tp) {
    att(tp, Q, T4("k", 2, 2, 3, 6), T4("v", 2, 2, 3, 6), NULL, 0, NULL);
}
static void attention_heads_multiple(Tape *tp) {
    att(tp, Q, T4("k", 2, 3, 3, 8), T4("v", 2, 3, 3, 8), NULL, 0, NULL);
}
static void attention_more_kv_heads(Tape *tp) {
    att(tp, T4("q", 2, 2, 3, 8), T4("k", 2, 4, 3, 8), T4("v", 2, 4, 3, 8), NULL, 0, NULL);
}
static void attention_p(Tape *tp, double p) {
    Rng rng;
    rng_seed(&rng, 1);
    att(tp, Q, KV("k"), KV("v"), NULL, p, &rng);
}
static void attention_p_negative(Tape *tp) { attention_p(tp, -0.25); }
static void attention_p_one(Tape *tp) { attention_p(tp, 1.0); }
static void attention_p_nan(Tape *tp) { attention_p(tp, NAN); }
/* as for ag_dropout, the range check comes before the no-grad shortcut */
static void attention_p_one_no_grad(Tape *tp) {
    ag_no_grad(tp, 1);
    attention_p(tp, 1.0);
}
/* (B,Tk) = (2,3); the 2 at (1,2) is not a 0/1 flag */
static void attention_mask_value(Tape *tp) {
    att(tp, Q, KV("k"), KV("v"), (const uint8_t[]){0, 0, 1, 0, 1, 2}, 0, NULL);
}
static void attention_null_rng(Tape *tp) { att(tp, Q, KV("k"), KV("v"), NULL, 0.5, NULL); }
/* attention masks: q (2,4,3,8) over k (2,2,3,8): (Tq, Tk) = (3,3), (B, NH) = (2,4) */
static void att_mask(Tape *tp, Tensor *m) {
    ag_attention(tp, Q, KV("k"), KV("v"), NULL, &(AgAttnMask){.attn_mask = m}, 0, NULL, NULL);
}
static Tensor *filled(Tensor *m, Real x) { /* a constant (mk's tensors require gradients) */
    m->requires_grad = 0;
    for (size_t e = 0; e < m->size; e++) m->data[e] = 0;
    m->data[m->size - 1] = x;
    return m;
}
static void attention_amask_rows(Tape *tp) { att_mask(tp, filled(T2("bias", 4, 3), 0)); }
static void attention_amask_heads(Tape *tp) { att_mask(tp, filled(T4("bias", 2, 3, 3, 3), 0)); }
static void attention_amask_rank(Tape *tp) { att_mask(tp, filled(T3("bias", 4, 3, 3), 0)); }
static void attention_amask_nan(Tape *tp) { att_mask(tp, filled(T2("bias", 3, 3), NAN)); }
static void attention_amask_inf(Tape *tp) { att_mask(tp, filled(T2("bias", 3, 3), INFINITY)); }
static void attention_amask_grad(Tape *tp) {
    Tensor *m = filled(T2("bias", 3, 3), 0);
    m->requires_grad = 1;
    att_mask(tp, m);
}
static void attention_tape(Tape *tp) { att(NULL, Q, KV("k"), KV("v"), NULL, 0, NULL); }
static void attention_mask_shape(Tape *tp) {
    static const uint8_t m[6] = {0};
    ag_attention(tp, Q, KV("k"), KV("v"), NULL, &(AgAttnMask){.key_padding = &(AgMask){m, 3, 2}}, 0, NULL, NULL);
}
static void attention_mask_data(Tape *tp) {
    ag_attention(tp, Q, KV("k"), KV("v"), NULL, &(AgAttnMask){.key_padding = &(AgMask){NULL, 2, 3}}, 0, NULL, NULL);
}
static void attention_layout_kind(Tape *tp) {
    ag_attention(tp, Q, KV("k"), KV("v"), &(AgAttnLayout){.kind = (AgAttnKind)7}, NULL, 0,
                 NULL, NULL);
}
#undef Q
#undef KV

static void cols(Tape *tp, Tensor *q, Tensor *k, Tensor *v, AgHeads h, double p, Rng *rng,
                 const uint8_t *mask) {
    ag_attention(tp, q, k, v, &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = h}, &(AgAttnMask){.key_padding = mask ? &(AgMask){mask, 2, 3} : NULL}, p, rng, NULL);
}
static const AgHeads H24 = {2, 2, 4, 0, 8, 16};
static void cols_rank(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    cols(tp, qkv, qkv, qkv, H24, 0, NULL, NULL);
}
static void cols_null(Tape *tp) {
    Tensor *q = T3("q", 2, 3, 8);
    cols(tp, q, NULL, q, H24, 0, NULL, NULL);
}
static void cols_kv_shapes(Tape *tp) {
    cols(tp, T3("q", 2, 3, 8), T3("k", 2, 5, 8), T3("v", 2, 4, 8), (AgHeads){2, 2, 4, 0, 0, 0}, 0,
         NULL, NULL);
}
static void cols_batch(Tape *tp) {
    Tensor *kv = T3("kv", 3, 5, 16);
    cols(tp, T3("q", 2, 3, 8), kv, kv, (AgHeads){2, 2, 4, 0, 0, 8}, 0, NULL, NULL);
}
static void cols_heads(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(tp, qkv, qkv, qkv, (AgHeads){3, 2, 4, 0, 8, 16}, 0, NULL, NULL);
}
static void cols_q_width(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(tp, qkv, qkv, qkv, (AgHeads){2, 2, 4, 20, 8, 16}, 0, NULL, NULL);
}
static void cols_v_width(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(tp, qkv, qkv, qkv, (AgHeads){2, 2, 4, 0, 8, 17}, 0, NULL, NULL);
}
static void cols_p(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    Rng rng;
    rng_seed(&rng, 1);
    cols(tp, qkv, qkv, qkv, H24, 1.0, &rng, NULL);
}
static void cols_mask(Tape *tp) {
    static const uint8_t bad[6] = {0, 0, 0, 0, 3, 0};
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(tp, qkv, qkv, qkv, H24, 0, NULL, bad);
}
static void cols_rng(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(tp, qkv, qkv, qkv, H24, 0.5, NULL, NULL);
}
static void cols_tape(Tape *tp) {
    Tensor *qkv = T3("qkv", 2, 3, 24);
    cols(NULL, qkv, qkv, qkv, H24, 0, NULL, NULL);
}

/* ag_attention, AG_ATTN_ROWS: q (3, 24) fused qkv packed by rows {0, 1, 3} of (B, T) = (2, 2) */
static const int R3[3] = {0, 1, 3};
static const uint8_t R_MASK[4] = {0, 0, 1, 0}; /* row (1,0) is left out: it must be masked */
static void rows_op(Tape *tp, Tensor *q, const int *qi, Tensor *k, Tensor *v, const int *ki,
                    int kB, AgHeads h, const uint8_t *mask) {
    ag_attention(tp, q, k, v, &(AgAttnLayout){.kind = AG_ATTN_ROWS, .heads = h, .q_rows = {qi, 2, 2}, .k_rows = {ki, kB, 2}}, &(AgAttnMask){.causal = 1, .key_padding = mask ? &(AgMask){mask, kB, 2} : NULL}, 0,
                 NULL, NULL);
}
static void rows_rank(Tape *tp) {
    Tensor *qkv = T3("qkv", 1, 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 2, H24, R_MASK);
}
static void rows_null(Tape *tp) {
    Tensor *q = T2("q", 3, 24);
    rows_op(tp, q, R3, q, NULL, R3, 2, H24, R_MASK);
}
static void rows_kv_shapes(Tape *tp) {
    rows_op(tp, T2("q", 3, 8), R3, T2("k", 3, 8), T2("v", 3, 4), R3, 2,
            (AgHeads){2, 2, 4, 0, 0, 0}, R_MASK);
}
static void rows_batch(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 3, H24, R_MASK);
}
static void rows_width(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 2, (AgHeads){2, 2, 4, 0, 8, 17}, R_MASK);
}
static void rows_null_idx(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, NULL, qkv, qkv, R3, 2, H24, R_MASK);
}
static void rows_order(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, (int[]){0, 3, 1}, qkv, qkv, R3, 2, H24, R_MASK);
}
static void rows_range(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, (int[]){0, 1, 4}, 2, H24, R_MASK);
}
static void rows_too_many(Tape *tp) {
    Tensor *qkv = T2("qkv", 5, 24);
    rows_op(tp, qkv, (int[]){0, 1, 2, 3, 4}, qkv, qkv, (int[]){0, 1, 2, 3, 4}, 2, H24, NULL);
}
static void rows_unmasked(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 2, H24, (const uint8_t[]){0, 0, 0, 0});
}
static void rows_no_mask(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 2, H24, NULL);
}
static void rows_mask_value(Tape *tp) {
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(tp, qkv, R3, qkv, qkv, R3, 2, H24, (const uint8_t[]){0, 0, 2, 0});
}
static void rows_tape(Tape *tp) {
    (void)tp;
    Tensor *qkv = T2("qkv", 3, 24);
    rows_op(NULL, qkv, R3, qkv, qkv, R3, 2, H24, R_MASK);
}

static void head_gate_x_rank(Tape *tp) { ag_head_gate(tp, T3("x", 2, 3, 4), T1("gate", 3)); }
static void head_gate_gate_rank(Tape *tp) {
    ag_head_gate(tp, T4("x", 2, 3, 4, 5), T2("gate", 1, 3));
}
static void head_gate_gate_len(Tape *tp) { ag_head_gate(tp, T4("x", 2, 3, 4, 5), T1("gate", 4)); }
static void head_gate_null_x(Tape *tp) { ag_head_gate(tp, NULL, T1("gate", 3)); }
static void head_gate_null_gate(Tape *tp) { ag_head_gate(tp, T4("x", 2, 3, 4, 5), NULL); }
static void head_gate_tape(Tape *tp) { ag_head_gate(NULL, T4("x", 2, 3, 4, 5), T1("gate", 3)); }

#define MAX_WANT 6

typedef struct {
    AgOp op;                     /* the op misused: the message must start with "ag_<op>: " */
    const char *name;            /* what the misuse is */
    void (*fn)(Tape *tp);
    const char *want[MAX_WANT];  /* substrings the message must contain */
} Misuse;

static const Misuse misuses[] = {
    {AG_OP_ADD, "shapes differ", add_shapes, {"shapes differ", "lhs (2,3)", "rhs (3,2)"}},
    {AG_OP_ADD, "ranks differ", add_ranks, {"shapes differ", "lhs (6)", "rhs (2,3)"}},
    {AG_OP_ADD, "NULL tensor", add_null, {"is NULL", "a lhs", "b NULL"}},
    {AG_OP_ADD, "NULL tape", add_tape, {"tape is NULL"}},
    {AG_OP_SUB, "shapes differ", sub_shapes, {"shapes differ", "lhs (2,4,8)", "rhs (2,8,4)"}},
    {AG_OP_SUB, "NULL tensor", sub_null, {"is NULL", "a NULL", "b rhs"}},
    {AG_OP_SUB, "NULL tape", sub_tape, {"tape is NULL"}},
    {AG_OP_MUL, "shapes differ", mul_shapes, {"shapes differ", "lhs (5)", "rhs (4)"}},
    {AG_OP_MUL, "NULL tensor", mul_null, {"is NULL", "b NULL"}},
    {AG_OP_MUL, "NULL tape", mul_tape, {"tape is NULL"}},

    {AG_OP_ADD_BIAS, "bias length", add_bias_len, {"x (2,3,5)", "bias (4)"}},
    {AG_OP_ADD_BIAS, "bias rank", add_bias_rank, {"x (2,5)", "bias (1,5)"}},
    {AG_OP_ADD_BIAS, "scalar x", add_bias_scalar_x, {"x ()", "bias (1)"}},
    {AG_OP_ADD_BIAS, "NULL x", add_bias_null_x, {"'x' is NULL"}},
    {AG_OP_ADD_BIAS, "NULL bias", add_bias_null_bias, {"'bias' is NULL"}},
    {AG_OP_ADD_BIAS, "NULL tape", add_bias_tape, {"tape is NULL"}},

    {AG_OP_SCALE, "NULL tensor", scale_null, {"'x' is NULL"}},
    {AG_OP_SCALE, "NULL tape", scale_tape, {"tape is NULL"}},
    {AG_OP_RELU, "NULL tensor", relu_null, {"'x' is NULL"}},
    {AG_OP_RELU, "NULL tape", relu_tape, {"tape is NULL"}},
    {AG_OP_GELU, "NULL tensor", gelu_null, {"'x' is NULL"}},
    {AG_OP_GELU, "NULL tape", gelu_tape, {"tape is NULL"}},
    {AG_OP_GELU_TANH, "NULL tensor", gelu_tanh_null, {"'x' is NULL"}},
    {AG_OP_GELU_TANH, "NULL tape", gelu_tanh_tape, {"tape is NULL"}},
    {AG_OP_SILU, "NULL tensor", silu_null, {"'x' is NULL"}},
    {AG_OP_SILU, "NULL tape", silu_tape, {"tape is NULL"}},

    {AG_OP_DROPOUT, "p < 0", dropout_negative, {"p = -0.25", "[0, 1)", "x (3,4)"}},
    {AG_OP_DROPOUT, "p == 1", dropout_one, {"p = 1 ", "[0, 1)", "x (3,4)"}},
    {AG_OP_DROPOUT, "p > 1", dropout_above_one, {"p = 1.5", "[0, 1)", "x (3,4)"}},
    {AG_OP_DROPOUT, "p NaN", dropout_nan, {"p = nan", "[0, 1)", "x (3,4)"}},
    {AG_OP_DROPOUT, "p == 1 in no-grad mode", dropout_one_no_grad, {"p = 1 ", "x (3,4)"}},
    {AG_OP_DROPOUT, "NULL rng", dropout_null_rng, {"rng is NULL", "p = 0.5", "x (3,4)"}},
    {AG_OP_DROPOUT, "NULL tensor", dropout_null, {"'x' is NULL"}},
    {AG_OP_DROPOUT, "NULL tape", dropout_tape, {"tape is NULL"}},

    {AG_OP_MATMUL, "inner dims (3-D)", matmul_inner, {"inner dimensions differ", "q (2,4,8)", "k (2,5,8)"}},
    {AG_OP_MATMUL, "inner dims (2-D)", matmul_inner_2d, {"inner dimensions differ", "a (3,4)", "b (5,6)"}},
    {AG_OP_MATMUL, "batch dims", matmul_batch, {"batch", "a (2,4,8)", "b (3,8,5)"}},
    {AG_OP_MATMUL, "batch ranks", matmul_batch_rank, {"batch", "a (2,3,4,8)", "b (2,8,5)"}},
    {AG_OP_MATMUL, "a of rank 1", matmul_rank_a, {"2 or more dims", "a (8)", "b (8,5)"}},
    {AG_OP_MATMUL, "b of rank 1", matmul_rank_b, {"2 or more dims", "a (3,8)", "b (8)"}},
    {AG_OP_MATMUL, "NULL a", matmul_null_a, {"'a' is NULL", "b (8,5)"}},
    {AG_OP_MATMUL, "NULL b", matmul_null_b, {"'b' is NULL", "a (3,8)"}},
    {AG_OP_MATMUL, "NULL tape", matmul_tape, {"tape is NULL"}},

    {AG_OP_MATMUL_BT, "inner dims", matmul_bt_inner, {"inner dimensions differ", "q (2,4,8)", "k (5,7)"}},
    {AG_OP_MATMUL_BT, "batch dims", matmul_bt_batch, {"batch", "q (2,4,8)", "k (3,5,8)"}},
    {AG_OP_MATMUL_BT, "b of rank 1", matmul_bt_rank, {"2 or more dims", "q (2,4,8)", "k (8)"}},
    {AG_OP_MATMUL_BT, "NULL b", matmul_bt_null, {"'b' is NULL", "q (2,4,8)"}},
    {AG_OP_MATMUL_BT, "NULL tape", matmul_bt_tape, {"tape is NULL"}},

    {AG_OP_LINEAR, "in features", linear_in, {"(..., in)", "W (out, in)", "x (2,3,4)", "W (5,6)"}},
    {AG_OP_LINEAR, "W of rank 1", linear_w_rank, {"(..., in)", "x (3,4)", "W (4)"}},
    {AG_OP_LINEAR, "scalar x", linear_scalar_x, {"(..., in)", "x ()", "W (5,1)"}},
    {AG_OP_LINEAR, "b length", linear_b_len, {"b must be (out)", "W (5,4)", "b (4)"}},
    {AG_OP_LINEAR, "b of rank 2", linear_b_rank, {"b must be (out)", "W (5,4)", "b (1,5)"}},
    {AG_OP_LINEAR, "NULL x", linear_null_x, {"'x' is NULL"}},
    {AG_OP_LINEAR, "NULL W", linear_null_w, {"'W' is NULL"}},
    {AG_OP_LINEAR, "NULL tape", linear_tape, {"tape is NULL"}},
    {AG_OP_LINEAR_RELU, "in features", linear_relu_in, {"(..., in)", "W (out, in)", "x (2,3,4)", "W (5,6)"}},
    {AG_OP_LINEAR_RELU, "b length", linear_relu_b_len, {"b must be (out)", "W (5,4)", "b (4)"}},
    {AG_OP_LINEAR_RELU, "NULL x", linear_relu_null_x, {"'x' is NULL"}},
    {AG_OP_LINEAR_RELU, "NULL tape", linear_relu_tape, {"tape is NULL"}},

    {AG_OP_TRANSPOSE, "rank 1", transpose_rank, {"2 or more dims", "x (5)"}},
    {AG_OP_TRANSPOSE, "scalar", transpose_scalar, {"2 or more dims", "x ()"}},
    {AG_OP_TRANSPOSE, "NULL tensor", transpose_null, {"'x' is NULL"}},
    {AG_OP_TRANSPOSE, "NULL tape", transpose_tape, {"tape is NULL"}},

    {AG_OP_RESHAPE, "element count", reshape_count, {"element counts differ", "x (2,3,4)", "(5,5)"}},
    {AG_OP_RESHAPE, "a zero dim", reshape_zero_dim, {"element counts differ", "x (2,3,4)", "(0,24)"}},
    {AG_OP_RESHAPE, "negative dims", reshape_negative, {"element counts differ", "x (2,3,4)", "(-6,-4)"}},
    {AG_OP_RESHAPE, "5 dims", reshape_too_many_dims, {"x (2,3,4)", "to 5 dims"}},
    {AG_OP_RESHAPE, "NULL tensor", reshape_null, {"'x' is NULL"}},
    {AG_OP_RESHAPE, "NULL tape", reshape_tape, {"tape is NULL"}},

    {AG_OP_SPLIT_HEADS, "heads do not divide C", split_heads_divisible, {"not divisible", "C = 10", "x (2,3,10)", "n_heads = 4"}},
    {AG_OP_SPLIT_HEADS, "zero heads", split_heads_zero, {"x (2,3,10)", "n_heads = 0"}},
    {AG_OP_SPLIT_HEADS, "rank 2", split_heads_rank, {"(B,T,C)", "x (3,10)"}},
    {AG_OP_SPLIT_HEADS, "NULL tensor", split_heads_null, {"'x' is NULL"}},
    {AG_OP_SPLIT_HEADS, "NULL tape", split_heads_tape, {"tape is NULL"}},
    {AG_OP_MERGE_HEADS, "rank 3", merge_heads_rank, {"(B,NH,T,HS)", "x (2,3,4)"}},
    {AG_OP_MERGE_HEADS, "NULL tensor", merge_heads_null, {"'x' is NULL"}},
    {AG_OP_MERGE_HEADS, "NULL tape", merge_heads_tape, {"tape is NULL"}},

    {AG_OP_SUM, "NULL tensor", sum_null, {"'x' is NULL"}},
    {AG_OP_SUM, "NULL tape", sum_tape, {"tape is NULL"}},
    {AG_OP_MEAN, "NULL tensor", mean_null, {"'x' is NULL"}},
    {AG_OP_MEAN, "NULL tape", mean_tape, {"tape is NULL"}},

    {AG_OP_SOFTMAX, "scalar", softmax_scalar, {"last dimension", "x ()"}},
    {AG_OP_SOFTMAX, "NULL tensor", softmax_null, {"'x' is NULL"}},
    {AG_OP_SOFTMAX, "NULL tape", softmax_tape, {"tape is NULL"}},
    {AG_OP_LOG_SOFTMAX, "scalar", log_softmax_scalar, {"last dimension", "x ()"}},
    {AG_OP_LOG_SOFTMAX, "NULL tensor", log_softmax_null, {"'x' is NULL"}},
    {AG_OP_LOG_SOFTMAX, "NULL tape", log_softmax_tape, {"tape is NULL"}},

    {AG_OP_CROSS_ENTROPY, "target >= V", cross_entropy_target_high, {"target 5 at row 1", "[0, 5)", "logits (3,5)", "ignore_index -100"}},
    {AG_OP_CROSS_ENTROPY, "target < 0", cross_entropy_target_negative, {"target -1 at row 2", "[0, 7)", "logits (2,2,7)"}},
    {AG_OP_CROSS_ENTROPY, "NULL targets", cross_entropy_null_targets, {"targets is NULL", "logits (3,5)"}},
    {AG_OP_CROSS_ENTROPY, "scalar logits", cross_entropy_scalar, {"(..., V)", "logits ()"}},
    {AG_OP_CROSS_ENTROPY, "NULL logits", cross_entropy_null, {"'logits' is NULL"}},
    {AG_OP_CROSS_ENTROPY, "NULL tape", cross_entropy_tape, {"tape is NULL"}},

    {AG_OP_LAYERNORM, "scalar x", layernorm_scalar, {"last dimension", "x ()", "weight (1)"}},
    {AG_OP_LAYERNORM, "weight length", layernorm_weight_len, {"weight must be (C)", "x (2,3,4)", "weight (5)"}},
    {AG_OP_LAYERNORM, "weight rank", layernorm_weight_rank, {"weight must be (C)", "x (2,4)", "weight (1,4)"}},
    {AG_OP_LAYERNORM, "bias length", layernorm_bias_len, {"bias must be (C)", "x (2,3,4)", "bias (3)"}},
    {AG_OP_LAYERNORM, "bias rank", layernorm_bias_rank, {"bias must be (C)", "x (2,4)", "bias (2,4)"}},
    {AG_OP_LAYERNORM, "eps == 0", layernorm_eps_zero, {"eps = 0 ", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_LAYERNORM, "eps < 0", layernorm_eps_negative, {"eps = -0.5", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_LAYERNORM, "eps NaN", layernorm_eps_nan, {"eps = nan", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_LAYERNORM, "NULL x", layernorm_null_x, {"'x' is NULL"}},
    {AG_OP_LAYERNORM, "NULL weight", layernorm_null_weight, {"'weight' is NULL"}},
    {AG_OP_LAYERNORM, "NULL tape", layernorm_tape, {"tape is NULL"}},
    {AG_OP_ADD_LAYERNORM, "x and f shapes", add_layernorm_shapes, {"x and f shapes differ", "x (2,3,4)", "f (2,4,3)"}},
    {AG_OP_ADD_LAYERNORM, "scalar x", add_layernorm_scalar, {"last dimension", "x ()", "weight (1)"}},
    {AG_OP_ADD_LAYERNORM, "weight length", add_layernorm_weight_len, {"weight must be (C)", "x (2,3,4)", "weight (5)"}},
    {AG_OP_ADD_LAYERNORM, "bias rank", add_layernorm_bias_rank, {"bias must be (C)", "x (2,4)", "bias (2,4)"}},
    {AG_OP_ADD_LAYERNORM, "eps == 0", add_layernorm_eps, {"eps = 0 ", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_ADD_LAYERNORM, "NULL f", add_layernorm_null_f, {"'f' is NULL"}},
    {AG_OP_ADD_LAYERNORM, "NULL weight", add_layernorm_null_weight, {"'weight' is NULL"}},
    {AG_OP_ADD_LAYERNORM, "NULL tape", add_layernorm_tape, {"tape is NULL"}},

    {AG_OP_RMSNORM, "scalar x", rmsnorm_scalar, {"last dimension", "x ()", "weight (1)"}},
    {AG_OP_RMSNORM, "weight length", rmsnorm_weight_len, {"weight must be (C)", "x (2,3,4)", "weight (5)"}},
    {AG_OP_RMSNORM, "weight rank", rmsnorm_weight_rank, {"weight must be (C)", "x (2,4)", "weight (1,4)"}},
    {AG_OP_RMSNORM, "eps == 0", rmsnorm_eps_zero, {"eps = 0 ", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_RMSNORM, "eps < 0", rmsnorm_eps_negative, {"eps = -1e-06", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_RMSNORM, "eps NaN", rmsnorm_eps_nan, {"eps = nan", "> 0", "x (2,4)", "weight (4)"}},
    {AG_OP_RMSNORM, "NULL x", rmsnorm_null_x, {"'x' is NULL"}},
    {AG_OP_RMSNORM, "NULL weight", rmsnorm_null_weight, {"'weight' is NULL"}},
    {AG_OP_RMSNORM, "NULL tape", rmsnorm_tape, {"tape is NULL"}},

    {AG_OP_ROPE, "x of rank 1", rope_rank, {"(..., T, C)", "q (8)"}},
    {AG_OP_ROPE, "keep 2", rope_keep, {"keep 2", "0 or 1", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "odd head_size", rope_odd, {"head_size 5", "even", "q (2,3,10)"}},
    {AG_OP_ROPE, "head_size 0", rope_zero_hs, {"head_size 0", "even and > 0", "q (2,3,8)"}},
    {AG_OP_ROPE, "columns past C", rope_cols_past, {"columns [16, 28)", "C = 24", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "negative col", rope_col_negative, {"columns [-4, 4)", "col -4", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "col past C, n_cols 0", rope_col_past, {"columns [28, 24)", "col 28, n_cols 0", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "part of a head", rope_part_head, {"the 12 columns [8, 20)", "whole number of heads", "head_size 8", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "no columns", rope_no_cols, {"the 0 columns [24, 24)", "head_size 4", "qkv (2,3,24)"}},
    {AG_OP_ROPE, "pos0 < 0", rope_pos0, {"pos0 -1", ">= 0", "T = 3", "q (2,3,8)"}},
    {AG_OP_ROPE, "pos0 + T overflows", rope_pos0_overflow, {"pos0 2147483646", "fit an int", "T = 3", "q (2,3,8)"}},
    {AG_OP_ROPE, "base < 0", rope_base_negative, {"base = -10000", "finite and > 0", "q (2,3,8)"}},
    {AG_OP_ROPE, "base inf", rope_base_inf, {"base = inf", "finite and > 0", "q (2,3,8)"}},
    {AG_OP_ROPE, "base NaN", rope_base_nan, {"base = nan", "finite and > 0", "q (2,3,8)"}},
    {AG_OP_ROPE, "odd rot_dims", rope_rot_odd, {"rot_dims 3", "even, > 0 and <= head_size 8", "q (2,3,16)"}},
    {AG_OP_ROPE, "rot_dims > head_size", rope_rot_wide, {"rot_dims 10", "<= head_size 8", "q (2,3,16)"}},
    {AG_OP_ROPE, "rot_dims < 0", rope_rot_negative, {"rot_dims -2", "even, > 0", "q (2,3,16)"}},
    {AG_OP_ROPE, "NULL AgRope", rope_null_r, {"AgRope argument is NULL", "q (2,3,8)"}},
    {AG_OP_ROPE, "NULL x", rope_null_x, {"'x' is NULL"}},
    {AG_OP_ROPE, "NULL tape", rope_tape, {"tape is NULL"}},

    {AG_OP_EMBEDDING, "id >= V", embedding_id_high, {"id 5 at position (1,0)", "ids (2,2)", "vocabulary of size 5", "wte (5,4)"}},
    {AG_OP_EMBEDDING, "id < 0", embedding_id_negative, {"id -3 at position (1,0)", "ids (2,3)", "vocabulary of size 5", "wte (5,4)"}},
    {AG_OP_EMBEDDING, "weight of rank 3", embedding_rank, {"(V,C)", "wte (2,5,4)"}},
    {AG_OP_EMBEDDING, "NULL ids", embedding_null_ids, {"ids is NULL", "wte (5,4)"}},
    {AG_OP_EMBEDDING, "ids shape (0,2)", embedding_bad_bt, {"(0,2)", "wte (5,4)"}},
    {AG_OP_EMBEDDING, "NULL weight", embedding_null, {"'weight' is NULL"}},
    {AG_OP_EMBEDDING, "NULL tape", embedding_tape, {"tape is NULL"}},
    {AG_OP_EMBEDDING_ROWS, "row >= B*T", embedding_rows_row_high, {"row 6 at index 1 of rows (2)", "[0, 6)", "ids (2,3)", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "row < 0", embedding_rows_row_negative, {"row -2 at index 0 of rows (1)", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "n 0", embedding_rows_n_zero, {"n 0", ">= 1", "ids (2,3)", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "positions not (T,C)", embedding_rows_pos_shape, {"(T,C) = (3,4)", "pe (4,4)", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "positions that require grad", embedding_rows_pos_grad, {"pe (3,4) requires grad", "ag_add_bias"}},
    {AG_OP_EMBEDDING_ROWS, "id >= V", embedding_rows_id_high, {"id 9 at position (1,1)", "vocabulary of size 5", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "weight of rank 1", embedding_rows_rank, {"(V,C)", "wte (5)"}},
    {AG_OP_EMBEDDING_ROWS, "NULL ids", embedding_rows_null_ids, {"ids is NULL", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "ids shape (2,-3)", embedding_rows_bad_bt, {"(2,-3)", "wte (5,4)"}},
    {AG_OP_EMBEDDING_ROWS, "NULL weight", embedding_rows_null, {"'weight' is NULL"}},
    {AG_OP_EMBEDDING_ROWS, "NULL tape", embedding_rows_tape, {"tape is NULL"}},

    {AG_OP_GATHER_ROWS, "row >= R", gather_rows_high, {"row 6 at index 1 of rows (3)", "[0, 6)", "h (2,3,5)"}},
    {AG_OP_GATHER_ROWS, "row < 0", gather_rows_negative, {"row -1 at index 1 of rows (2)", "[0, 4)", "h (4,5)"}},
    {AG_OP_GATHER_ROWS, "a repeated row", gather_rows_repeat, {"row 3 appears twice in rows (3)", "indices 0 and 2", "distinct", "h (4,5)"}},
    {AG_OP_GATHER_ROWS, "n 0", gather_rows_n_zero, {"n 0", "[1, 4]", "h (4,5)"}},
    {AG_OP_GATHER_ROWS, "n > R", gather_rows_n_large, {"n 3", "[1, 2]", "h (2,5)"}},
    {AG_OP_GATHER_ROWS, "scalar x", gather_rows_scalar, {"(..., C)", "h ()"}},
    {AG_OP_GATHER_ROWS, "NULL rows", gather_rows_null_rows, {"rows is NULL", "h (4,5)"}},
    {AG_OP_GATHER_ROWS, "NULL x", gather_rows_null, {"'x' is NULL"}},
    {AG_OP_GATHER_ROWS, "NULL tape", gather_rows_tape, {"tape is NULL"}},
    {AG_OP_SCATTER_ROWS, "row >= B*T", scatter_rows_high, {"row 6 at index 1 of rows (2)", "[0, 6)", "p (2,5)"}},
    {AG_OP_SCATTER_ROWS, "a repeated row", scatter_rows_repeat, {"row 2 appears twice in rows (3)", "indices 1 and 2", "p (3,5)"}},
    {AG_OP_SCATTER_ROWS, "x of rank 3", scatter_rows_rank, {"(n, C)", "p (1,2,5)"}},
    {AG_OP_SCATTER_ROWS, "more rows than B*T", scatter_rows_too_many, {"(B, T) = (2,3)", "the 7 rows", "p (7,5)"}},
    {AG_OP_SCATTER_ROWS, "B 0", scatter_rows_bad_bt, {"(B, T) = (0,3)", "p (2,5)"}},
    {AG_OP_SCATTER_ROWS, "NULL rows", scatter_rows_null_rows, {"rows is NULL", "p (2,5)"}},
    {AG_OP_SCATTER_ROWS, "NULL x", scatter_rows_null, {"'x' is NULL"}},
    {AG_OP_SCATTER_ROWS, "NULL tape", scatter_rows_tape, {"tape is NULL"}},

    {AG_OP_ATTENTION, "NULL q", attention_null_q, {"is NULL", "q NULL", "k k", "v v"}},
    {AG_OP_ATTENTION, "NULL k", attention_null_k, {"is NULL", "q q", "k NULL", "v v"}},
    {AG_OP_ATTENTION, "NULL v", attention_null_v, {"is NULL", "q q", "k k", "v NULL"}},
    {AG_OP_ATTENTION, "q of rank 3", attention_q_rank, {"4-D", "q (2,4,8)", "k (2,2,3,8)", "v (2,2,3,8)"}},
    {AG_OP_ATTENTION, "v of rank 3", attention_v_rank, {"4-D", "q (2,4,3,8)", "k (2,2,3,8)", "v (2,3,8)"}},
    {AG_OP_ATTENTION, "k and v shapes", attention_kv_shapes, {"k and v shapes differ", "k (2,2,3,8)", "v (2,2,5,8)"}},
    {AG_OP_ATTENTION, "batch sizes", attention_batch, {"batch sizes differ", "q (2,4,3,8)", "k (3,2,3,8)"}},
    {AG_OP_ATTENTION, "head sizes", attention_head_size, {"head sizes (HS) differ", "q (2,4,3,8)", "k (2,2,3,6)"}},
    {AG_OP_ATTENTION, "NH % NKV != 0", attention_heads_multiple, {"query heads (4)", "multiple of key/value heads (3)", "q (2,4,3,8)", "k (2,3,3,8)"}},
    {AG_OP_ATTENTION, "NKV > NH", attention_more_kv_heads, {"query heads (2)", "multiple of key/value heads (4)", "q (2,2,3,8)", "k (2,4,3,8)"}},
    {AG_OP_ATTENTION, "dropout_p < 0", attention_p_negative, {"dropout_p = -0.25", "[0, 1)", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "dropout_p == 1", attention_p_one, {"dropout_p = 1 ", "[0, 1)", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "dropout_p NaN", attention_p_nan, {"dropout_p = nan", "[0, 1)", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "dropout_p == 1 in no-grad mode", attention_p_one_no_grad, {"dropout_p = 1 ", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "mask value 2", attention_mask_value, {"key_padding (2,3) holds 2 at (1,2)", "0 (attend) or 1 (padding)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "key_padding of another shape", attention_mask_shape, {"key_padding (3,2) must be (B, Tk) = (2,3)", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "key_padding without data", attention_mask_data, {"key_padding (2,3) has NULL data", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "NULL rng", attention_null_rng, {"rng is NULL", "dropout_p = 0.5", "q (2,4,3,8)", "k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "NULL tape", attention_tape, {"tape is NULL"}},
    {AG_OP_ATTENTION, "attn_mask rows", attention_amask_rows, {"attn_mask bias (4,3) must be (Tq, Tk) = (3,3)", "q (2,4,3,8)"}},
    {AG_OP_ATTENTION, "attn_mask heads", attention_amask_heads, {"attn_mask bias (2,3,3,3)", "(B, NH, Tq, Tk) = (2,4,3,3)", "q (2,4,3,8)"}},
    {AG_OP_ATTENTION, "attn_mask of rank 3", attention_amask_rank, {"attn_mask bias (4,3,3) must be", "k k (2,2,3,8)"}},
    {AG_OP_ATTENTION, "attn_mask NaN", attention_amask_nan, {"attn_mask bias (3,3) holds nan at element 8", "finite or -inf"}},
    {AG_OP_ATTENTION, "attn_mask +inf", attention_amask_inf, {"attn_mask bias (3,3) holds inf at element 8"}},
    {AG_OP_ATTENTION, "attn_mask with a gradient", attention_amask_grad, {"attn_mask bias (3,3) requires a gradient", "constant"}},
    {AG_OP_ATTENTION, "layout kind 7", attention_layout_kind, {"layout kind 7 is not an AgAttnKind"}},
    {AG_OP_ATTENTION, "q of rank 2", cols_rank, {"3-D", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "NULL k", cols_null, {"is NULL", "q q", "k NULL", "v q"}},
    {AG_OP_ATTENTION, "k and v shapes", cols_kv_shapes, {"k and v shapes differ", "k (2,5,8)", "v (2,4,8)"}},
    {AG_OP_ATTENTION, "batch sizes", cols_batch, {"batch sizes differ", "q (2,3,8)", "kv (3,5,16)"}},
    {AG_OP_ATTENTION, "NH % NKV != 0", cols_heads, {"n_heads 3", "multiple of n_kv_heads 2", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "q's heads past its width", cols_q_width, {"q's heads, columns [20, 28)", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "v's heads past its width", cols_v_width, {"v's heads, columns [17, 25)", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "dropout_p == 1", cols_p, {"dropout_p = 1 ", "[0, 1)", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "mask value 3", cols_mask, {"key_padding (2,3) holds 3 at (1,1)", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "NULL rng", cols_rng, {"rng is NULL", "dropout_p = 0.5", "qkv (2,3,24)"}},
    {AG_OP_ATTENTION, "NULL tape", cols_tape, {"tape is NULL"}},
    {AG_OP_ATTENTION, "q of rank 3", rows_rank, {"2-D", "qkv (1,3,24)"}},
    {AG_OP_ATTENTION, "NULL v", rows_null, {"is NULL", "q q", "k q", "v NULL"}},
    {AG_OP_ATTENTION, "k and v shapes", rows_kv_shapes, {"k and v shapes differ", "k (3,8)", "v (3,4)"}},
    {AG_OP_ATTENTION, "batch sizes", rows_batch, {"batch sizes differ", "q_rows B 2", "k_rows B 3", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "v's heads past its width", rows_width, {"v's heads, columns [17, 25)", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "NULL q_rows.idx", rows_null_idx, {"q_rows.idx is NULL", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "rows not increasing", rows_order, {"q_rows row 1 at index 2 is not above row 3 at index 1", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "row >= B*T", rows_range, {"k_rows row 4 at index 2", "[0, 4)", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "more rows than B*T", rows_too_many, {"q_rows (B, T) = (2,2)", "the 5 rows", "qkv (5,24)"}},
    {AG_OP_ATTENTION, "a left-out key not masked", rows_unmasked, {"key row (1,0) is not in k_rows but not masked", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "a left-out key, no mask", rows_no_mask, {"key row (1,0) is not in k_rows", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "mask value 2", rows_mask_value, {"key_padding (2,2) holds 2 at (1,0)", "qkv (3,24)"}},
    {AG_OP_ATTENTION, "NULL tape", rows_tape, {"tape is NULL"}},
    {AG_OP_HEAD_GATE, "x of rank 3", head_gate_x_rank, {"(B,NH,T,HS)", "gate (NH)", "x (2,3,4)", "gate (3)"}},
    {AG_OP_HEAD_GATE, "gate of rank 2", head_gate_gate_rank, {"(B,NH,T,HS)", "gate (NH)", "x (2,3,4,5)", "gate (1,3)"}},
    {AG_OP_HEAD_GATE, "gate length", head_gate_gate_len, {"(B,NH,T,HS)", "gate (NH)", "x (2,3,4,5)", "gate (4)"}},
    {AG_OP_HEAD_GATE, "NULL x", head_gate_null_x, {"'x' is NULL"}},
    {AG_OP_HEAD_GATE, "NULL gate", head_gate_null_gate, {"'gate' is NULL"}},
    {AG_OP_HEAD_GATE, "NULL tape", head_gate_tape, {"tape is NULL"}},
};
#define N_MISUSES (sizeof misuses / sizeof misuses[0])

/* Runs in the child: a fresh tape over a small step arena, then the misuse. */
static void run_misuse(void *ctx) {
    const Misuse *m = ctx;
    Tape *tp = ag_tape_new(arena_new("step", 1 << 16));
    m->fn(tp);
}

/* Checks one row; returns 1 if the child aborted with the message the row wants. Failures are
 * reported with cr_expect, so every failing row of an op shows, not just the first. */
static int check_misuse(const Misuse *m) {
    char op[64];
    snprintf(op, sizeof op, "ag_%s: ", ag_op_name(m->op));
    Capture c;
    capture_run(run_misuse, (void *)m, &c);
    if (!capture_aborted(&c)) {
        cr_expect(0, "%s%s: did not abort (signal %d, exit %d); stderr: %s", op, m->name,
                  c.signal, c.exit_code, c.err);
        return 0;
    }
    const char *rest;
    if (!capture_file_line(&c, NULL, 0, NULL, &rest)) {
        cr_expect(0, "%s%s: message has no 'file.c:line: ' prefix: %s", op, m->name, c.err);
        return 0;
    }
    int ok = strncmp(rest, op, strlen(op)) == 0;
    cr_expect(ok, "%s%s: the message after file:line does not start with '%s': %s", op,
              m->name, op, c.err);
    for (int i = 0; i < MAX_WANT && m->want[i]; i++) {
        int has = capture_has(&c, m->want[i]);
        cr_expect(has, "%s%s: message lacks \"%s\": %s", op, m->name, m->want[i], c.err);
        ok &= has;
    }
    return ok;
}

/* One test per op (the parameter is the op's number), running all of that op's rows. One
 * process per op rather than per row: Criterion starts a process for each test, which costs
 * about 25 ms, against about 1 ms for a row's fork. */
ParameterizedTestParameters(ag_ops, misuse_aborts_naming_the_op_and_shapes) {
    static size_t ops[AG_OP_COUNT];
    for (size_t k = 0; k < AG_OP_COUNT; k++) ops[k] = k;
    return cr_make_param_array(size_t, ops, AG_OP_COUNT);
}

ParameterizedTest(size_t *op, ag_ops, misuse_aborts_naming_the_op_and_shapes) {
    int rows = 0, passed = 0;
    for (size_t k = 0; k < N_MISUSES; k++) {
        if (misuses[k].op != (AgOp)*op) continue;
        rows++;
        passed += check_misuse(&misuses[k]);
    }
    cr_assert_gt(rows, 0, "op '%s' has no misuse rows in tests/autograd/test_errors.c",
                 ag_op_name((AgOp)*op));
    cr_assert_eq(passed, rows, "ag_%s: %d of %d misuse rows failed", ag_op_name((AgOp)*op),
                 rows - passed, rows);
}

Test(ag_ops, every_op_in_the_table_has_misuse_cases) {
    int rows[AG_OP_COUNT] = {0}, tape_null[AG_OP_COUNT] = {0};
    for (size_t k = 0; k < N_MISUSES; k++) {
        rows[misuses[k].op]++;
        if (strcmp(misuses[k].want[0], "tape is NULL") == 0) tape_null[misuses[k].op] = 1;
    }
    for (int op = 0; op < AG_OP_COUNT; op++) {
        cr_expect(rows[op] >= 2, "op '%s' has %d misuse rows in tests/autograd/test_errors.c "
                  "(want a NULL tape and every check it makes)", ag_op_name((AgOp)op), rows[op]);
        cr_expect(tape_null[op], "op '%s' has no NULL-tape row", ag_op_name((AgOp)op));
    }
}

/* The full prefix for one case: the file the check is in, a line number, then the message. */
static void matmul_inner_mismatch(void *ctx) {
    (void)ctx;
    Tape *tp = ag_tape_new(arena_new("step", 1 << 16));
    matmul_inner(tp);
}

Test(ag_abort, message_starts_with_file_and_line) {
    Capture c;
    capture_run(matmul_inner_mismatch, NULL, &c);
    cr_assert(capture_aborted(&c), "stderr: %s", c.err);
    char file[256];
    int line = 0;
    const char *rest;
    cr_assert(capture_file_line(&c, file, sizeof file, &line, &rest), "no prefix: %s", c.err);
    cr_assert_str_eq(file, "src/autograd/ops_matmul.c");
    cr_assert(line > 1 && line < 1000, "line %d", line);
    cr_assert_str_eq(rest, "ag_matmul: inner dimensions differ: q (2,4,8) vs k (2,5,8)\n");
}

/* The helper itself: a child that returns normally is reported as an exit, not an abort, so
 * a check that stopped aborting would fail the table above. */
static void does_nothing(void *ctx) {
    (void)ctx;
    fprintf(stderr, "still alive");
}

Test(expect_abort, reports_a_normal_exit_and_its_output) {
    Capture c;
    capture_run(does_nothing, NULL, &c);
    cr_assert(!capture_aborted(&c));
    cr_assert_eq(c.signal, 0);
    cr_assert_eq(c.exit_code, 0);
    cr_assert_str_eq(c.err, "still alive");
    cr_assert(!capture_file_line(&c, NULL, 0, NULL, NULL));
}

static void killed_by_sigterm(void *ctx) {
    (void)ctx;
    raise(SIGTERM);
}

/* much more than CAPTURE_MAX bytes, then abort: the capture is cut, the child never blocks */
static void floods_stderr_then_aborts(void *ctx) {
    (void)ctx;
    for (int i = 0; i < 2000; i++) fprintf(stderr, "line %04d of a long report................\n", i);
    abort();
}

Test(expect_abort, tells_abort_from_other_signals_and_survives_long_output) {
    Capture c;
    capture_run(killed_by_sigterm, NULL, &c);
    cr_assert_eq(c.signal, SIGTERM);
    cr_assert(!capture_aborted(&c));
    capture_run(floods_stderr_then_aborts, NULL, &c);
    cr_assert(capture_aborted(&c), "signal %d", c.signal);
    cr_assert_eq(c.err_len, CAPTURE_MAX - 1);
    cr_assert_eq(strlen(c.err), CAPTURE_MAX - 1);
    cr_assert(strncmp(c.err, "line 0000 of", 12) == 0);
}

/* Criterion's own way, as the style guide shows it: the test passes only if it aborts. */
Test(ag_matmul, aborts_on_inner_dim_mismatch, .signal = SIGABRT) {
    Tape *tp = ag_tape_new(arena_new("step", 1 << 16));
    ag_matmul(tp, T3("q", 2, 4, 8), T3("k", 2, 5, 8));
}

Test(ag_embedding, aborts_on_id_outside_vocabulary, .signal = SIGABRT) {
    Tape *tp = ag_tape_new(arena_new("step", 1 << 16));
    ag_embedding(tp, T2("wte", 5, 4), (int[]){0, 7}, 1, 2);
}
/* clang-format on */
