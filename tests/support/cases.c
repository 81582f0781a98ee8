/* cases.c: the op case table. Shapes include odd sizes (5, 7, 13, 17, 33) that divide no vector
 * width, leading batch dimensions, shared and batched matmul operands. Integer inputs (ids,
 * targets) are made from the case's arguments, with repeats and ignored rows on purpose. */
#include "cases.h"
#include <math.h>

#include <string.h>

/* This file is a table, one case a line: clang-format would break its rows, so it skips it. */
/* clang-format off */

static Tensor *b_add(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_add(t, in[0], in[1]); }
static Tensor *b_sub(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_sub(t, in[0], in[1]); }
static Tensor *b_mul(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_mul(t, in[0], in[1]); }
static Tensor *b_add_bias(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_add_bias(t, in[0], in[1]); }
static Tensor *b_scale(Tape *t, Tensor **in, const GcCase *c) { return ag_scale(t, in[0], c->farg); }
static Tensor *b_relu(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_relu(t, in[0]); }
static Tensor *b_gelu(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_gelu(t, in[0]); }
static Tensor *b_gelu_tanh(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_gelu_tanh(t, in[0]); }
/* gelu_tanh of 3 in[0]: the inputs spread over [-6, 6], where the tails matter */
static Tensor *b_gelu_tanh_wide(Tape *t, Tensor **in, const GcCase *c) {
    (void)c;
    return ag_gelu_tanh(t, ag_scale(t, in[0], 3));
}
static Tensor *b_silu(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_silu(t, in[0]); }
/* LLaMA's SwiGLU gate from existing ops: silu(a) * b */
static Tensor *b_swiglu(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_mul(t, ag_silu(t, in[0]), in[1]); }
static Tensor *b_dropout(Tape *t, Tensor **in, const GcCase *c) {
    Rng rng; /* the same key on every call, so every evaluation sees the same mask */
    rng_seed(&rng, (uint64_t)c->arg[0]);
    return ag_dropout(t, in[0], c->farg, &rng);
}
static Tensor *b_matmul(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_matmul(t, in[0], in[1]); }
static Tensor *b_matmul_bt(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_matmul_bt(t, in[0], in[1]); }
static Tensor *b_linear(Tape *t, Tensor **in, const GcCase *c) {
    return ag_linear(t, in[0], in[1], c->n_in > 2 ? in[2] : NULL);
}
static Tensor *b_linear_relu(Tape *t, Tensor **in, const GcCase *c) {
    return ag_linear_relu(t, in[0], in[1], c->n_in > 2 ? in[2] : NULL);
}
static Tensor *b_transpose(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_transpose(t, in[0]); }
static Tensor *b_reshape(Tape *t, Tensor **in, const GcCase *c) {
    int nd = c->arg[0];
    return ag_reshape(t, in[0], nd, &c->arg[1]);
}
static Tensor *b_split_heads(Tape *t, Tensor **in, const GcCase *c) { return ag_split_heads(t, in[0], c->arg[0]); }
static Tensor *b_merge_heads(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_merge_heads(t, in[0]); }
static Tensor *b_sum(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_sum(t, in[0]); }
static Tensor *b_mean(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_mean(t, in[0]); }
static Tensor *b_softmax(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_softmax(t, in[0]); }
static Tensor *b_log_softmax(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_log_softmax(t, in[0]); }

/* targets: row r gets (3r + 1) mod V, and every arg[0]-th row (if arg[0] > 0) is ignored */
static Tensor *b_cross_entropy(Tape *t, Tensor **in, const GcCase *c) {
    Tensor *x = in[0];
    size_t rows = tensor_rows(x);
    int V = x->shape[x->ndim - 1];
    int targets[256];
    for (size_t r = 0; r < rows && r < 256; r++)
        targets[r] = (c->arg[0] > 0 && r % (size_t)c->arg[0] == 1) ? -100 : (int)((3 * r + 1) % (size_t)V);
    return ag_cross_entropy(t, x, targets, -100);
}
/* ids: position i picks (5i + 2) mod V, so rows repeat once positions exceed V */
static Tensor *b_embedding(Tape *t, Tensor **in, const GcCase *c) {
    int B = c->arg[0], T = c->arg[1], V = in[0]->shape[0];
    int ids[256];
    for (int i = 0; i < B * T && i < 256; i++) ids[i] = (5 * i + 2) % V;
    return ag_embedding_padded(t, in[0], ids, B, T, c->arg[2]);
}

/* ag_embedding_rows: ids as b_embedding's, scale farg, positions (T, C) a constant made from
 * the arguments when arg[2] is 1, and arg[3] rows (every third from 1, mod B*T, so some repeat
 * once arg[3] > B*T / 3) or every row when arg[3] is 0; no padding_idx (test_embedding.c has it) */
static Tensor *b_embedding_rows(Tape *t, Tensor **in, const GcCase *c) {
    int B = c->arg[0], T = c->arg[1], V = in[0]->shape[0], C = in[0]->shape[1], n = c->arg[3];
    int ids[256], rows[64];
    for (int i = 0; i < B * T && i < 256; i++) ids[i] = (5 * i + 2) % V;
    for (int i = 0; i < n && i < 64; i++) rows[i] = (3 * i + 1) % (B * T);
    Tensor *pos = NULL;
    if (c->arg[2]) {
        pos = tensor_new2(t->arena, T, C, "pos");
        for (size_t i = 0; i < pos->size; i++) pos->data[i] = (Real)(0.25 * (double)(i % 7) - 0.5);
    }
    return ag_embedding_rows(t, in[0], ids, B, T, -1, c->farg, pos, n ? rows : NULL, n);
}

/* rows: i picks (arg[1] i + arg[2]) mod R, distinct since the stride is prime to R, out of
 * order on purpose; gather arg[0] of the R rows of in[0]. With farg != 0 the input is scaled
 * first, so that its gradient is a fresh intermediate buffer that the gather's backward
 * stores into, zeros included (tape.c) */
static Tensor *b_gather_rows(Tape *t, Tensor **in, const GcCase *c) {
    int R = (int)tensor_rows(in[0]), rows[64];
    for (int i = 0; i < c->arg[0] && i < 64; i++) rows[i] = (c->arg[1] * i + c->arg[2]) % R;
    Tensor *x = c->farg != 0 ? ag_scale(t, in[0], c->farg) : in[0];
    return ag_gather_rows(t, x, rows, c->arg[0]);
}
/* scatter in[0] (n, C) into (B, T) = (arg[0], arg[1]), row i to (arg[2] i + arg[3]) mod BT;
 * farg as for gather_rows */
static Tensor *b_scatter_rows(Tape *t, Tensor **in, const GcCase *c) {
    int B = c->arg[0], T = c->arg[1], n = in[0]->shape[0], rows[64];
    for (int i = 0; i < n && i < 64; i++) rows[i] = (c->arg[2] * i + c->arg[3]) % (B * T);
    Tensor *x = c->farg != 0 ? ag_scale(t, in[0], c->farg) : in[0];
    return ag_scatter_rows(t, x, rows, B, T);
}

/* layernorm with eps 1e-5; in[1] is the weight's offset from 1 (a weight around 1, as after
 * initialisation, but not exactly 1: the weight gradient must matter); in[2], when the case has
 * it, the bias */
static Tensor *b_layernorm(Tape *t, Tensor **in, const GcCase *c) {
    Tensor *ones = tensor_new(t->arena, in[1]->ndim, in[1]->shape, "ones");
    tensor_fill(ones, 1);
    Tensor *w = ag_add(t, in[1], ones);
    return ag_layernorm(t, in[0], w, c->n_in == 3 ? in[2] : NULL, 1e-5);
}

/* add_layernorm, eps 1e-5: in[0] = x, in[1] = f, then the weight's offset from 1 and, when the
 * case has it, the bias. arg[0]: 0 as given (leaves: the backward adds into their gradients),
 * 1 x and f scaled first (intermediates: the backward writes their new gradients, AgNode.store),
 * 2 f is x itself (no in[1]: the weight is in[1]; its gradient must be the sum of both) */
static Tensor *b_add_layernorm(Tape *t, Tensor **in, const GcCase *c) {
    int same = c->arg[0] == 2, at = same ? 1 : 2;
    Tensor *x = in[0], *f = same ? in[0] : in[1];
    if (c->arg[0] == 1) {
        x = ag_scale(t, x, 1.5);
        f = ag_scale(t, f, -0.5);
    }
    Tensor *ones = tensor_new(t->arena, in[at]->ndim, in[at]->shape, "ones");
    tensor_fill(ones, 1);
    Tensor *w = ag_add(t, in[at], ones);
    return ag_add_layernorm(t, x, f, w, c->n_in > at + 1 ? in[at + 1] : NULL, 1e-5);
}

/* rmsnorm with eps 1e-5; in[1] is the weight's offset from 1 (as for layernorm). arg[0] 1: x
 * scaled first (an intermediate: the backward writes its new gradient, AgNode.store) */
static Tensor *b_rmsnorm(Tape *t, Tensor **in, const GcCase *c) {
    Tensor *ones = tensor_new(t->arena, in[1]->ndim, in[1]->shape, "ones");
    tensor_fill(ones, 1);
    Tensor *x = c->arg[0] == 1 ? ag_scale(t, in[0], 1.5) : in[0];
    return ag_rmsnorm(t, x, ag_add(t, in[1], ones), 1e-5);
}

/* rope of in[0]: arg = {head_size, pos0, col, n_cols}, farg the base (0: 10000) */
static Tensor *b_rope(Tape *t, Tensor **in, const GcCase *c) {
    return ag_rope(t, in[0], &(AgRope){c->arg[0], c->arg[1], c->farg, c->arg[2], c->arg[3], 0, 0});
}
/* rope of in[0] with keep: every column back, those outside [col, col + n_cols) unchanged */
static Tensor *b_rope_keep(Tape *t, Tensor **in, const GcCase *c) {
    return ag_rope(t, in[0], &(AgRope){c->arg[0], c->arg[1], c->farg, c->arg[2], c->arg[3], 1, 0});
}
/* partial rotary: rope of in[0] turning the first rot_dims = arg[2] columns of each head;
 * arg = {head_size, pos0, rot_dims, n_cols}, keep 1 (the columns past n_cols, 0: none, pass
 * through as well), farg the base */
static Tensor *b_rope_partial(Tape *t, Tensor **in, const GcCase *c) {
    return ag_rope(t, in[0],
                   &(AgRope){.head_size = c->arg[0],
                             .pos0 = c->arg[1],
                             .base = c->farg,
                             .n_cols = c->arg[3],
                             .keep = 1,
                             .rot_dims = c->arg[2]});
}
/* a fused projection's query and key blocks: in[0] (..., T, 3n) with n = arg[3], q = rope of
 * columns [0, n), k = rope of [n, 2n), y = q * k (both ropes add into in[0]'s gradient) */
static Tensor *b_rope_qk(Tape *t, Tensor **in, const GcCase *c) {
    int n = c->arg[3];
    Tensor *q = ag_rope(t, in[0], &(AgRope){c->arg[0], c->arg[1], c->farg, 0, n, 0, 0});
    Tensor *k = ag_rope(t, in[0], &(AgRope){c->arg[0], c->arg[1], c->farg, n, n, 0, 0});
    return ag_mul(t, q, k);
}

/* LLaMA's attention inputs: q in[0] (B, T, NH*HS) and k in[1] (B, T, NKV*HS) rotated at pos0
 * arg[1] (head size arg[0]), v in[2] as is, then causal grouped-query attention on the columns */
static Tensor *b_rope_attention(Tape *t, Tensor **in, const GcCase *c) {
    int HS = c->arg[0], NH = in[0]->shape[2] / HS, NKV = in[1]->shape[2] / HS;
    Tensor *q = ag_rope(t, in[0], &(AgRope){.head_size = HS, .pos0 = c->arg[1]});
    Tensor *k = ag_rope(t, in[1], &(AgRope){.head_size = HS, .pos0 = c->arg[1]});
    return ag_attention(t, q, k, in[2], &(AgAttnLayout){.kind = AG_ATTN_COLS, .heads = {NH, NKV, HS, 0, 0, 0}}, AG_CAUSAL, 0, NULL, NULL);
}

/* Key padding masks for the attention cases, (B=2, Tk), chosen by arg[1] (0 = no mask). */
static const struct {
    int B, Tk;
    uint8_t m[2 * 5];
} attn_masks[] = {
    {0, 0, {0}},
    /* batch 1 pads its last two keys */
    {2, 5, {0, 0, 0, 0, 0, /**/ 0, 0, 0, 1, 1}},
    /* left padding in batch 1: with causal, its query 0 sees only a padded key */
    {2, 3, {0, 0, 0, /**/ 1, 0, 0}},
    /* batch 1 is all padding: every one of its query rows has no key */
    {2, 5, {0, 1, 0, 0, 0, /**/ 1, 1, 1, 1, 1}},
};
/* Attention masks (AgAttnMask.attn_mask) for the attention cases, chosen by a number (0 = none),
 * built in the tape's arena from their indices (the same on every call):
 *   1: (Tq, Tk), ALiBi's bias -0.5 |t - u| (with Tk - Tq aligned at the end), -inf on key 1
 *   2: (B, NH, Tq, Tk), a bias in [-1, 1) with -inf at every third element, and the first query
 *      row of batch 0 and head 0 wholly blocked (its probabilities, output and gradients 0)
 *   3: (1, NH, Tq, Tk), ALiBi per head (slope 2^-(h+1)), one mask for every batch element
 *   4: (B, 1, Tq, Tk), a boolean prefix-LM mask through ag_attn_mask_bool: the first two keys
 *      seen by every query, the others blocked above the diagonal */
static const Tensor *case_attn_mask(Tape *t, int which, int B, int NH, int Tq, int Tk) {
    const Real ninf = -(Real)INFINITY;
    if (which == 0) return NULL;
    if (which == 4) {
        uint8_t *blocked = arena_alloc(t->arena, (size_t)B * Tq * Tk);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < Tq; i++)
                for (int j = 0; j < Tk; j++)
                    blocked[((size_t)b * Tq + i) * Tk + j] = j >= 2 && j > i + Tk - Tq;
        return ag_attn_mask_bool(t, blocked, 4, (int[]){B, 1, Tq, Tk});
    }
    int shape[4] = {which == 2 ? B : 1, which == 1 ? 1 : NH, Tq, Tk};
    Tensor *m = which == 1 ? tensor_new2(t->arena, Tq, Tk, "alibi")
                           : tensor_new(t->arena, 4, shape, "attn_mask");
    for (size_t e = 0; e < m->size; e++) {
        int j = (int)(e % (size_t)Tk), i = (int)(e / (size_t)Tk % (size_t)Tq);
        int h = (int)(e / ((size_t)Tq * Tk) % (size_t)shape[1]);
        double dist = fabs((double)(i + Tk - Tq - j));
        if (which == 1) m->data[e] = j == 1 ? ninf : (Real)(-0.5 * dist);
        if (which == 3) m->data[e] = (Real)(-ldexp(1.0, -(h + 1)) * dist);
        if (which == 2)
            m->data[e] = e < (size_t)Tk || e % 3 == 2 ? ninf : (Real)((double)(e * 37 % 64) / 32 - 1);
    }
    return m;
}

/* q, k, v = in[0..2]; arg[0] causal, arg[1] mask, arg[2] rng seed for dropout p = farg,
 * arg[3] an attention mask (case_attn_mask) */
static Tensor *b_attention(Tape *t, Tensor **in, const GcCase *c) {
    AgMask mask = {NULL, 0, 0};
    if (c->arg[1]) {
        AG_CHECK(attn_masks[c->arg[1]].B == in[1]->shape[0] &&
                 attn_masks[c->arg[1]].Tk == in[1]->shape[2], "%s: mask %d does not fit k %s",
                 c->name, c->arg[1], tensor_shape_str(in[1]));
        mask = (AgMask){attn_masks[c->arg[1]].m, attn_masks[c->arg[1]].B, attn_masks[c->arg[1]].Tk};
    }
    Rng rng; /* the same key on every call, so every evaluation sees the same dropout mask */
    rng_seed(&rng, (uint64_t)c->arg[2]);
    const Tensor *am = case_attn_mask(t, c->arg[3], in[0]->shape[0], in[0]->shape[1],
                                      in[0]->shape[2], in[1]->shape[2]);
    return ag_attention(t, in[0], in[1], in[2], NULL, &(AgAttnMask){.causal = c->arg[0], .key_padding = mask.data ? &mask : NULL, .attn_mask = am}, c->farg,
                        &rng, NULL);
}
/* ag_attention, AG_ATTN_COLS: where the heads sit (AgHeads), causal, an attn_masks row and the dropout
 * seed (p = farg); one input is a fused q/k/v tensor, two are q and a fused k/v, three q, k, v */
static const struct {
    AgHeads heads;
    int causal, mask, seed, attn_mask;
} cols_variants[] = {
    {{2, 2, 4, 0, 8, 16}, 0, 0, 0, 0},  /* self-attention, qkv (B,T,3*8) */
    {{2, 2, 4, 0, 0, 8}, 0, 1, 0, 0},   /* cross: q (B,Tq,8), kv (B,Tk,16), key padding */
    {{4, 2, 2, 0, 0, 0}, 1, 0, 0, 0},   /* grouped-query, causal: q (B,T,8), k and v (B,T,4) */
    {{2, 2, 4, 3, 12, 21}, 1, 2, 7, 0}, /* heads at odd columns of (B,T,30), causal + padding */
    /* head size 32: operands read in place, through the fused (B,T,192) row stride */
    {{2, 2, 32, 0, 64, 128}, 1, 1, 0, 0},
    /* cross with key padding and a (B, NH, Tq, Tk) additive mask */
    {{2, 2, 4, 0, 0, 8}, 0, 1, 0, 2},
    /* grouped-query, causal, ALiBi per head */
    {{4, 2, 2, 0, 0, 0}, 1, 0, 0, 3},
};
static Tensor *b_attention_cols(Tape *t, Tensor **in, const GcCase *c) {
    int vi = c->arg[0];
    Tensor *q = in[0], *k = in[c->n_in > 1 ? 1 : 0], *v = in[c->n_in - 1];
    AgMask mask = {NULL, 0, 0};
    if (cols_variants[vi].mask) {
        int m = cols_variants[vi].mask;
        AG_CHECK(attn_masks[m].B == k->shape[0] && attn_masks[m].Tk == k->shape[1],
                 "%s: mask %d does not fit k %s", c->name, m, tensor_shape_str(k));
        mask = (AgMask){attn_masks[m].m, attn_masks[m].B, attn_masks[m].Tk};
    }
    Rng rng;
    rng_seed(&rng, (uint64_t)cols_variants[vi].seed);
    const Tensor *am = case_attn_mask(t, cols_variants[vi].attn_mask, q->shape[0],
                                      cols_variants[vi].heads.n_heads, q->shape[1], k->shape[1]);
    AgAttnLayout L = {.kind = AG_ATTN_COLS, .heads = cols_variants[vi].heads};
    return ag_attention(t, q, k, v, &L, &(AgAttnMask){.causal = cols_variants[vi].causal, .key_padding = mask.data ? &mask : NULL, .attn_mask = am}, c->farg,
                        &rng, NULL);
}
/* ag_attention, AG_ATTN_ROWS, on ragged row maps of a batch of B = 3: a row left out in the middle of a
 * sequence (a masked key), a batch element with a single live row, a kept key that is masked.
 * Maps (row b*T + t) and the (B, Tk) mask per variant; q, k, v as for cols_variants. */
static const int rows_self[10] = {0, 1, 3, 4, /**/ 5, /**/ 10, 11, 12, 13, 14};    /* T 5 */
static const uint8_t rows_self_mask[15] = {0, 0, 1, 0, 0, /**/ 0, 1, 1, 1, 1, /**/ 0, 0, 0, 0, 1};
static const int rows_cq[9] = {1, 2, 4, /**/ 5, /**/ 10, 11, 12, 13, 14};         /* Tq 5 */
static const int rows_ck[7] = {0, 2, /**/ 4, 5, 6, 7, /**/ 9};                      /* Tk 4 */
static const uint8_t rows_ck_mask[12] = {0, 1, 0, 1, /**/ 0, 0, 0, 1, /**/ 1, 0, 1, 1};
static const struct {
    AgHeads heads;
    int causal, cross, seed, attn_mask;
} rows_variants[] = {
    {{2, 2, 4, 0, 8, 16}, 1, 0, 0, 0}, /* causal self-attention, qkv (10, 3*8) */
    {{2, 2, 4, 0, 0, 8}, 0, 1, 0, 0},  /* cross: q (9, 8), kv (7, 16) */
    {{4, 2, 2, 0, 0, 0}, 1, 0, 3, 0},  /* grouped-query causal: q (10, 8), k and v (10, 4) */
    {{2, 2, 32, 0, 64, 128}, 1, 0, 0, 0}, /* head size 32, read in place: qkv (10, 3*64) */
    {{2, 2, 4, 0, 0, 8}, 0, 1, 0, 2},     /* cross, (B, NH, Tq, Tk) mask by positions */
    {{2, 2, 4, 0, 8, 16}, 1, 0, 0, 4},    /* causal self, a boolean (B, 1, T, T) mask */
};
static Tensor *b_attention_rows(Tape *t, Tensor **in, const GcCase *c) {
    int vi = c->arg[0], cross = rows_variants[vi].cross;
    Tensor *q = in[0], *k = in[c->n_in > 1 ? 1 : 0], *v = in[c->n_in - 1];
    AgRows rq = {cross ? rows_cq : rows_self, 3, 5}, rk = {cross ? rows_ck : rows_self, 3, 5};
    if (cross) rk.T = 4;
    Rng rng;
    rng_seed(&rng, (uint64_t)rows_variants[vi].seed);
    const Tensor *am = case_attn_mask(t, rows_variants[vi].attn_mask, 3,
                                      rows_variants[vi].heads.n_heads, rq.T, rk.T);
    AgAttnLayout L = {.kind = AG_ATTN_ROWS, .heads = rows_variants[vi].heads, .q_rows = rq,
                      .k_rows = rk};
    AgMask kp = {cross ? rows_ck_mask : rows_self_mask, rk.B, rk.T};
    AgAttnMask M = {rows_variants[vi].causal, &kp, am};
    return ag_attention(t, q, k, v, &L, &M, c->farg, &rng, NULL);
}
static Tensor *b_head_gate(Tape *t, Tensor **in, const GcCase *c) { (void)c; return ag_head_gate(t, in[0], in[1]); }

#define S1(a) 1, {a}
#define S2(a, b) 2, {a, b}
#define S3(a, b, c) 3, {a, b, c}
#define S4(a, b, c, d) 4, {a, b, c, d}

static const GcCase cases[] = {
    {"add (2,3,5)", 2, {3, 3}, {{2, 3, 5}, {2, 3, 5}}, b_add, {0}, 0, 0},
    {"add (17)", 2, {1, 1}, {{17}, {17}}, b_add, {0}, 0, 0},
    {"sub (4,7)", 2, {2, 2}, {{4, 7}, {4, 7}}, b_sub, {0}, 0, 0},
    {"mul (3,13)", 2, {2, 2}, {{3, 13}, {3, 13}}, b_mul, {0}, 0, 0},
    {"mul (2,2,3,5), only a needs grad", 2, {4, 4}, {{2, 2, 3, 5}, {2, 2, 3, 5}}, b_mul, {0}, 0, 2},
    {"add_bias (2,3,5)+(5)", 2, {3, 1}, {{2, 3, 5}, {5}}, b_add_bias, {0}, 0, 0},
    {"add_bias (7,33)+(33)", 2, {2, 1}, {{7, 33}, {33}}, b_add_bias, {0}, 0, 0},
    {"add_bias (2,5,3)+(5,3) positions", 2, {3, 2}, {{2, 5, 3}, {5, 3}}, b_add_bias, {0}, 0, 0},
    {"scale (3,7) by -1.7", 1, {2}, {{3, 7}}, b_scale, {0}, -1.7, 0},
    {"relu (5,13)", 1, {2}, {{5, 13}}, b_relu, {0}, 0, 0},
    {"gelu (5,13)", 1, {2}, {{5, 13}}, b_gelu, {0}, 0, 0},
    {"gelu_tanh (5,13)", 1, {2}, {{5, 13}}, b_gelu_tanh, {0}, 0, 0},
    {"gelu_tanh of 3 x (2,3,11): the tails", 1, {3}, {{2, 3, 11}}, b_gelu_tanh_wide, {0}, 0, 0},
    {"silu (5,13)", 1, {2}, {{5, 13}}, b_silu, {0}, 0, 0},
    {"swiglu silu(a) * b (2,3,7)", 2, {3, 3}, {{2, 3, 7}, {2, 3, 7}}, b_swiglu, {0}, 0, 0},
    {"dropout p=0.3 (4,17)", 1, {2}, {{4, 17}}, b_dropout, {7}, 0.3, 0},
    {"matmul (3,4)@(4,5)", 2, {2, 2}, {{3, 4}, {4, 5}}, b_matmul, {0}, 0, 0},
    {"matmul (17,19)@(19,13)", 2, {2, 2}, {{17, 19}, {19, 13}}, b_matmul, {0}, 0, 0},
    {"matmul (2,3,4)@(4,5) shared b", 2, {3, 2}, {{2, 3, 4}, {4, 5}}, b_matmul, {0}, 0, 0},
    {"matmul (2,3,4)@(2,4,5) batched", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, b_matmul, {0}, 0, 0},
    {"matmul (2,2,3,4)@(2,2,4,3) 4-D", 2, {4, 4}, {{2, 2, 3, 4}, {2, 2, 4, 3}}, b_matmul, {0}, 0, 0},
    {"matmul_bt (3,4)@(5,4)^T", 2, {2, 2}, {{3, 4}, {5, 4}}, b_matmul_bt, {0}, 0, 0},
    {"matmul_bt (2,7,5)@(3,5)^T shared b", 2, {3, 2}, {{2, 7, 5}, {3, 5}}, b_matmul_bt, {0}, 0, 0},
    {"matmul_bt (2,2,3,4)@(2,2,5,4)^T batched", 2, {4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}}, b_matmul_bt, {0}, 0, 0},
    {"linear (2,3,4) W (5,4) b (5)", 3, {3, 2, 1}, {{2, 3, 4}, {5, 4}, {5}}, b_linear, {0}, 0, 0},
    {"linear (7) W (3,7) no bias", 2, {1, 2}, {{7}, {3, 7}}, b_linear, {0}, 0, 0},
    {"linear (4,5) W (3,5) b (3), only x needs grad", 3, {2, 2, 1}, {{4, 5}, {3, 5}, {3}}, b_linear, {0}, 0, 6},
    {"linear (3,300) W (4,300) b (4), two GEMM k blocks", 3, {2, 2, 1}, {{3, 300}, {4, 300}, {4}}, b_linear, {0}, 0, 0},
    {"linear_relu (2,3,4) W (5,4) b (5)", 3, {3, 2, 1}, {{2, 3, 4}, {5, 4}, {5}}, b_linear_relu, {0}, 0, 0},
    {"linear_relu (3,260) W (4,260) no bias, two GEMM k blocks", 2, {2, 2}, {{3, 260}, {4, 260}}, b_linear_relu, {0}, 0, 0},
    {"transpose (3,5)", 1, {2}, {{3, 5}}, b_transpose, {0}, 0, 0},
    {"transpose (2,3,7)", 1, {3}, {{2, 3, 7}}, b_transpose, {0}, 0, 0},
    {"reshape (2,3,4)->(6,4)", 1, {3}, {{2, 3, 4}}, b_reshape, {2, 6, 4}, 0, 0},
    {"reshape (5,6)->(2,3,5)", 1, {2}, {{5, 6}}, b_reshape, {3, 2, 3, 5}, 0, 0},
    {"split_heads (2,3,6) NH=2", 1, {3}, {{2, 3, 6}}, b_split_heads, {2}, 0, 0},
    {"split_heads (1,5,9) NH=3", 1, {3}, {{1, 5, 9}}, b_split_heads, {3}, 0, 0},
    {"merge_heads (2,3,5,4)", 1, {4}, {{2, 3, 5, 4}}, b_merge_heads, {0}, 0, 0},
    {"sum (3,5)", 1, {2}, {{3, 5}}, b_sum, {0}, 0, 0},
    {"mean (2,3,7)", 1, {3}, {{2, 3, 7}}, b_mean, {0}, 0, 0},
    {"softmax (4,7)", 1, {2}, {{4, 7}}, b_softmax, {0}, 0, 0},
    {"softmax (2,3,33)", 1, {3}, {{2, 3, 33}}, b_softmax, {0}, 0, 0},
    {"log_softmax (4,7)", 1, {2}, {{4, 7}}, b_log_softmax, {0}, 0, 0},
    {"log_softmax (2,2,13)", 1, {3}, {{2, 2, 13}}, b_log_softmax, {0}, 0, 0},
    {"cross_entropy (6,5)", 1, {2}, {{6, 5}}, b_cross_entropy, {0}, 0, 0},
    {"cross_entropy (2,5,7) with ignored rows", 1, {3}, {{2, 5, 7}}, b_cross_entropy, {3}, 0, 0},
    {"layernorm (2,3,5) weight and bias", 3, {3, 1, 1}, {{2, 3, 5}, {5}, {5}}, b_layernorm, {0}, 0, 0},
    {"layernorm (7,33) weight and bias", 3, {2, 1, 1}, {{7, 33}, {33}, {33}}, b_layernorm, {0}, 0, 0},
    {"layernorm (4,6) no bias", 2, {2, 1}, {{4, 6}, {6}}, b_layernorm, {0}, 0, 0},
    {"add_layernorm (2,3,5) weight and bias", 4, {3, 3, 1, 1}, {{2, 3, 5}, {2, 3, 5}, {5}, {5}}, b_add_layernorm, {0}, 0, 0},
    {"add_layernorm (3,300) intermediates, no bias", 3, {2, 2, 1}, {{3, 300}, {3, 300}, {300}}, b_add_layernorm, {1}, 0, 0},
    {"add_layernorm (4,7) of x + x", 3, {2, 1, 1}, {{4, 7}, {7}, {7}}, b_add_layernorm, {2}, 0, 0},
    {"add_layernorm (2,5,6) f without grad", 4, {3, 3, 1, 1}, {{2, 5, 6}, {2, 5, 6}, {6}, {6}}, b_add_layernorm, {1}, 0, 2},
    {"rmsnorm (2,3,5)", 2, {3, 1}, {{2, 3, 5}, {5}}, b_rmsnorm, {0}, 0, 0},
    {"rmsnorm (7,33)", 2, {2, 1}, {{7, 33}, {33}}, b_rmsnorm, {0}, 0, 0},
    {"rmsnorm (40,9), more rows than a weight-gradient block", 2, {2, 1}, {{40, 9}, {9}}, b_rmsnorm, {0}, 0, 0},
    {"rmsnorm (3,300) of an intermediate", 2, {2, 1}, {{3, 300}, {300}}, b_rmsnorm, {1}, 0, 0},
    {"rope (2,5,8) head_size 4", 1, {3}, {{2, 5, 8}}, b_rope, {4, 0, 0, 0}, 0, 0},
    {"rope (2,3,12) head_size 6 pos0 7 base 500000", 1, {3}, {{2, 3, 12}}, b_rope, {6, 7, 0, 0}, 500000, 0},
    {"rope (5,16) head_size 8 pos0 3", 1, {2}, {{5, 16}}, b_rope, {8, 3, 0, 0}, 0, 0},
    {"rope split heads (2,2,3,4)", 1, {4}, {{2, 2, 3, 4}}, b_rope, {4, 0, 0, 0}, 0, 0},
    {"rope columns [6,18) of (2,3,24) head_size 4 pos0 2", 1, {3}, {{2, 3, 24}}, b_rope, {4, 2, 6, 12}, 0, 0},
    {"rope one step (1,1,8) at pos0 100000", 1, {3}, {{1, 1, 8}}, b_rope, {8, 100000, 0, 0}, 0, 0},
    {"rope q and k blocks of one qkv (2,3,24)", 1, {3}, {{2, 3, 24}}, b_rope_qk, {4, 1, 0, 8}, 0, 0},
    {"rope keep: q and k blocks of one qkv (2,3,24) rotated, v passed through", 1, {3}, {{2, 3, 24}}, b_rope_keep, {4, 2, 0, 16}, 0, 0},
    {"rope partial: 4 of each head's 8 columns (2,5,16) pos0 3", 1, {3}, {{2, 5, 16}}, b_rope_partial, {8, 3, 4, 0}, 0, 0},
    {"rope partial: 2 of 6 (3,18) pos0 1 base 500", 1, {2}, {{3, 18}}, b_rope_partial, {6, 1, 2, 0}, 500, 0},
    {"rope partial: q and k blocks [0,16) of a qkv (2,3,24), 4 of 8 a head", 1, {3}, {{2, 3, 24}}, b_rope_partial, {8, 2, 4, 16}, 0, 0},
    {"rope keep: columns [4,12) of (2,3,16), the others passed through", 1, {3}, {{2, 3, 16}}, b_rope_keep, {4, 5, 4, 8}, 300, 0},
    {"rope q (2,4,8) k v (2,4,4) at pos0 3, then grouped-query causal attention", 3, {3, 3, 3}, {{2, 4, 8}, {2, 4, 4}, {2, 4, 4}}, b_rope_attention, {4, 3}, 0, 0},
    {"embedding (7,5) ids (2,3)", 1, {2}, {{7, 5}}, b_embedding, {2, 3, -1}, 0, 0},
    {"embedding (4,13) ids (3,5) with repeats", 1, {2}, {{4, 13}}, b_embedding, {3, 5, -1}, 0, 0},
    {"embedding_rows (7,5) ids (2,3) scaled, no positions, every row", 1, {2}, {{7, 5}}, b_embedding_rows, {2, 3, 0, 0}, 1.5, 0},
    {"embedding_rows (4,13) ids (3,5) scaled, positions, 4 rows", 1, {2}, {{4, 13}}, b_embedding_rows, {3, 5, 1, 4}, 2.5, 0},
    {"embedding_rows (6,17) ids (2,4) positions, 11 rows with repeats", 1, {2}, {{6, 17}}, b_embedding_rows, {2, 4, 1, 11}, -0.75, 0},
    {"gather_rows 4 of (2,3,5)", 1, {3}, {{2, 3, 5}}, b_gather_rows, {4, 5, 1}, 0, 0},
    {"gather_rows all 7 of (7,33) permuted", 1, {2}, {{7, 33}}, b_gather_rows, {7, 3, 2}, 0, 0},
    {"gather_rows 3 of (2,4,6) after a scale", 1, {3}, {{2, 4, 6}}, b_gather_rows, {3, 3, 1}, 0.5, 0},
    {"scatter_rows (4,5) into (2,3)", 1, {2}, {{4, 5}}, b_scatter_rows, {2, 3, 5, 1}, 0, 0},
    {"scatter_rows (3,33) into (1,7) after a scale", 1, {2}, {{3, 33}}, b_scatter_rows, {1, 7, 2, 0}, 1.5, 0},
    {"attention (2,2,3,4) self", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}}, b_attention, {0}, 0, 0},
    {"attention (2,2,3,4) cross Tk=5", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0}, 0, 0},
    {"attention (2,2,3,4) causal", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}}, b_attention, {1}, 0, 0},
    {"attention (1,2,2,5) causal on a cache Tk=5", 3, {4, 4, 4}, {{1, 2, 2, 5}, {1, 2, 5, 5}, {1, 2, 5, 5}}, b_attention, {1}, 0, 0},
    {"attention (2,2,3,4) cross key padding", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0, 1}, 0, 0},
    {"attention (2,2,3,4) causal + left padding", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}}, b_attention, {1, 2}, 0, 0},
    {"attention (2,2,3,4) batch 1 fully padded", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0, 3}, 0, 0},
    {"attention (2,4,3,5) grouped-query NKV=2 causal", 3, {4, 4, 4}, {{2, 4, 3, 5}, {2, 2, 3, 5}, {2, 2, 3, 5}}, b_attention, {1}, 0, 0},
    {"attention (2,4,3,4) multi-query NKV=1 padding", 3, {4, 4, 4}, {{2, 4, 3, 4}, {2, 1, 5, 4}, {2, 1, 5, 4}}, b_attention, {0, 1}, 0, 0},
    {"attention (2,2,5,4) dropout p=0.2", 3, {4, 4, 4}, {{2, 2, 5, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0, 0, 7}, 0.2, 0},
    {"attention (2,4,3,4) GQA causal padding dropout p=0.3", 3, {4, 4, 4}, {{2, 4, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {1, 1, 11}, 0.3, 0},
    /* head size 32: the 8-row tiles and operands read in place (k_attention.c); Tk 40 also a
     * partial column block */
    {"attention (2,2,9,32) causal, head size 32", 3, {4, 4, 4}, {{2, 2, 9, 32}, {2, 2, 9, 32}, {2, 2, 9, 32}}, b_attention, {1}, 0, 0},
    {"attention (2,1,9,32) cross Tk=40 dropout p=0.2", 3, {4, 4, 4}, {{2, 1, 9, 32}, {2, 1, 40, 32}, {2, 1, 40, 32}}, b_attention, {0, 0, 5}, 0.2, 0},
    {"attention_cols self, one qkv (2,3,24)", 1, {3}, {{2, 3, 24}}, b_attention_cols, {0}, 0, 0},
    {"attention_cols cross, q (2,3,8) kv (2,5,16) padding", 2, {3, 3}, {{2, 3, 8}, {2, 5, 16}}, b_attention_cols, {1}, 0, 0},
    {"attention_cols grouped-query causal, q (2,3,8) k v (2,3,4)", 3, {3, 3, 3}, {{2, 3, 8}, {2, 3, 4}, {2, 3, 4}}, b_attention_cols, {2}, 0, 0},
    {"attention_cols qkv (2,3,30) at columns 3,12,21 causal padding dropout p=0.2", 1, {3}, {{2, 3, 30}}, b_attention_cols, {3}, 0.2, 0},
    {"attention_rows causal self, qkv (10,24) of (3,5), ragged", 1, {2}, {{10, 24}}, b_attention_rows, {0}, 0, 0},
    {"attention_rows cross, q (9,8) of (3,5), kv (7,16) of (3,4)", 2, {2, 2}, {{9, 8}, {7, 16}}, b_attention_rows, {1}, 0, 0},
    {"attention_rows grouped-query causal, q (10,8) k v (10,4) dropout p=0.2", 3, {2, 2, 2}, {{10, 8}, {10, 4}, {10, 4}}, b_attention_rows, {2}, 0.2, 0},
    {"attention_cols qkv (2,5,192) head size 32 causal padding", 1, {3}, {{2, 5, 192}}, b_attention_cols, {4}, 0, 0},
    {"attention_rows causal self, qkv (10,192) head size 32", 1, {2}, {{10, 192}}, b_attention_rows, {3}, 0, 0},
    /* attention masks (case_attn_mask), alone and with causal, key padding, dropout, GQA */
    {"attention (2,2,3,4) cross Tk=5, ALiBi (Tq,Tk) mask", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0, 0, 0, 1}, 0, 0},
    {"attention (2,2,3,4) causal + left padding + (B,NH,Tq,Tk) mask", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}}, b_attention, {1, 2, 0, 2}, 0, 0},
    {"attention (2,4,3,4) GQA causal, ALiBi per head, dropout p=0.2", 3, {4, 4, 4}, {{2, 4, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}}, b_attention, {1, 0, 13, 3}, 0.2, 0},
    {"attention (2,2,3,4) cross Tk=5, boolean prefix mask + key padding", 3, {4, 4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}, {2, 2, 5, 4}}, b_attention, {0, 1, 0, 4}, 0, 0},
    {"attention (2,2,9,32) causal, ALiBi per head, head size 32", 3, {4, 4, 4}, {{2, 2, 9, 32}, {2, 2, 9, 32}, {2, 2, 9, 32}}, b_attention, {1, 0, 0, 3}, 0, 0},
    {"attention_cols cross padding + (B,NH,Tq,Tk) mask, q (2,3,8) kv (2,5,16)", 2, {3, 3}, {{2, 3, 8}, {2, 5, 16}}, b_attention_cols, {5}, 0, 0},
    {"attention_cols grouped-query causal ALiBi, q (2,3,8) k v (2,3,4)", 3, {3, 3, 3}, {{2, 3, 8}, {2, 3, 4}, {2, 3, 4}}, b_attention_cols, {6}, 0, 0},
    {"attention_rows cross (B,NH,Tq,Tk) mask by positions", 2, {2, 2}, {{9, 8}, {7, 16}}, b_attention_rows, {4}, 0, 0},
    {"attention_rows causal self, boolean (B,1,T,T) mask", 1, {2}, {{10, 24}}, b_attention_rows, {5}, 0, 0},
    {"head_gate (2,3,4,5) gate (3)", 2, {4, 1}, {{2, 3, 4, 5}, {3}}, b_head_gate, {0}, 0, 0},
};

const GcCase *gc_cases(size_t *n) {
    *n = sizeof cases / sizeof cases[0];
    return cases;
}

const GcCase *gc_case(size_t k) {
    AG_CHECK(k < sizeof cases / sizeof cases[0], "gc_case: no case %zu", k);
    return &cases[k];
}

struct criterion_test_params gc_case_params(void) {
    static size_t idx[sizeof cases / sizeof cases[0]];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) idx[k] = k;
    return cr_make_param_array(size_t, idx, sizeof cases / sizeof cases[0]);
}

void gc_make_inputs(const GcCase *c, Arena *a, Tensor **in) {
    Rng rng;
    rng_seed(&rng, 1000u + (uint64_t)strlen(c->name));
    for (int i = 0; i < c->n_in; i++) {
        in[i] = tensor_new(a, c->ndim[i], c->shape[i], "in");
        tensor_set_name(in[i], "in%d", i);
        for (size_t j = 0; j < in[i]->size; j++) in[i]->data[j] = (Real)(float)rng_normal(&rng);
        if (!(c->no_grad_inputs & (1u << i))) tensor_requires_grad(in[i]);
    }
}

Tensor *gc_build_fn(Tape *tape, Tensor **in, void *ctx) {
    const GcCase *c = ctx;
    return c->build(tape, in, c);
}

Tensor *gc_forward_backward(const GcCase *c, Tape *tape, Tensor **in) {
    for (int i = 0; i < c->n_in; i++) tensor_zero_grad(in[i]);
    Tensor *out = c->build(tape, in, c);
    Tensor *R = tensor_new(tape->arena, out->ndim, out->shape, "R");
    Rng rng;
    rng_seed(&rng, 77);
    for (size_t j = 0; j < R->size; j++) R->data[j] = (Real)(float)rng_normal(&rng);
    ag_backward(tape, ag_sum(tape, ag_mul(tape, out, R)));
    return out;
}

TestEnv test_env_new(void) {
    TestEnv e = {arena_new("inputs", 1 << 20), ag_tape_new(arena_new("step", 8 << 20))};
    return e;
}

void test_env_free(TestEnv *e) {
    arena_free(e->tape->arena);
    ag_tape_free(e->tape);
    arena_free(e->params);
}
/* clang-format on */
