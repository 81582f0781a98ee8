/* ops_rope.c: the rotary position embedding op (RoPE, as Meta's LLaMA and llama2.c apply it to
 * queries and keys). x (..., T, C): row (..., t) is at position pos0 + t, so a (B, T, C)
 * projection, a (T, C) one and split heads (B, NH, T, HS) all work, and a decoding step with a
 * KV cache of length L passes pos0 = L. The op rotates the columns [col, col + n_cols) of x
 * (heads of head_size side by side) and returns only them, (..., T, n_cols): so the query and
 * key blocks of a fused projection are rotated without copying its value columns; or, with
 * keep, all of x's columns, the others passed through (gradient 1). With rot_dims only the
 * first rot_dims columns of each head turn (partial rotary), the rest pass through. It saves
 * the (T, rot_dims) table of cos and sin for backward. Not here: the loops (../tensor/k_rope.c).
 * Next: ops_embedding.c. */
#include <limits.h>
#include <math.h>

#include "ops_internal.h"

typedef struct RopeCtx {
    const Real *cs; /* (T, HS): the forward's cos and sin of each position and pair */
    int T, HS, col, n_cols, keep, R;
} RopeCtx;

/* x (..., T, C) -> (..., T, n_cols), the columns [col, col + n_cols) of x rotated; keep:
 * (..., T, C), the other columns of x beside them */
Tensor *ag_rope(Tape *tape, Tensor *x, const AgRope *r) {
    AG_CHECK(tape != NULL, "ag_rope: tape is NULL");
    AG_CHECK_TENSOR("ag_rope", x);
    AG_CHECK(r != NULL, "ag_rope: the AgRope argument is NULL (x %s %s)", x->name,
             tensor_shape_str(x));
    AG_CHECK(x->ndim >= 2, "ag_rope: x must be (..., T, C) with 2 or more dims: x %s %s", x->name,
             tensor_shape_str(x));
    int T = x->shape[x->ndim - 2], C = x->shape[x->ndim - 1], HS = r->head_size;
    int R = r->rot_dims == 0 ? HS : r->rot_dims;
    int n = r->n_cols == 0 ? C - r->col : r->n_cols;
    double base = r->base == 0 ? 10000.0 : r->base;
    AG_CHECK(HS > 0 && HS % 2 == 0, "ag_rope: head_size %d must be even and > 0 (x %s %s)", HS,
             x->name, tensor_shape_str(x));
    AG_CHECK(R > 0 && R % 2 == 0 && R <= HS,
             "ag_rope: rot_dims %d must be even, > 0 and <= head_size %d (0: head_size) (x %s %s)",
             r->rot_dims, HS, x->name, tensor_shape_str(x));
    AG_CHECK(r->col >= 0 && r->n_cols >= 0 && r->col <= C && n <= C - r->col,
             "ag_rope: columns [%d, %d) (col %d, n_cols %d) are not within the C = %d columns of "
             "x %s %s",
             r->col, r->col + n, r->col, r->n_cols, C, x->name, tensor_shape_str(x));
    AG_CHECK(n > 0 && n % HS == 0,
             "ag_rope: the %d columns [%d, %d) are not a whole number of heads of head_size %d "
             "(x %s %s)",
             n, r->col, r->col + n, HS, x->name, tensor_shape_str(x));
    AG_CHECK(r->pos0 >= 0 && r->pos0 <= INT_MAX - T,
             "ag_rope: pos0 %d must be >= 0 and pos0 + T fit an int (T = %d, x %s %s)", r->pos0, T,
             x->name, tensor_shape_str(x));
    AG_CHECK(base > 0 && base < INFINITY, "ag_rope: base = %g must be finite and > 0 (x %s %s)",
             base, x->name, tensor_shape_str(x));
    AG_CHECK(r->keep == 0 || r->keep == 1, "ag_rope: keep %d must be 0 or 1 (x %s %s)", r->keep,
             x->name, tensor_shape_str(x));
    int shape[AG_MAX_DIMS], yc = r->keep ? C : n, y0 = r->keep ? r->col : 0;
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 1] = yc;
    Tensor *y = ag_out(tape, AG_OP_ROPE, x->ndim, shape);
    Real *cs = arena_alloc(tape->arena, (size_t)T * (size_t)R * sizeof(Real));
    k_rope_table(cs, T, r->pos0, R, base);
    k_rope_forward(y->data + y0, (size_t)yc, x->data + r->col, (size_t)C, cs, tensor_rows(x), T, n,
                   HS, R);
    if (r->keep) k_rope_pass(y->data, x->data, tensor_rows(x), C, r->col, n);
    AgNode *nd = ag_record(tape, AG_OP_ROPE, y, 1, &x);
    if (nd) *AG_SAVE(tape, nd, RopeCtx) = (RopeCtx){cs, T, HS, r->col, n, r->keep, R};
    return y;
}
void ag_rope_backward(AgNode *n) {
    const RopeCtx *c = n->ctx;
    Tensor *x = n->in[0];
    int C = x->shape[x->ndim - 1], yc = c->keep ? C : c->n_cols;
    k_rope_backward(x->grad + c->col, (size_t)C, n->out->grad + (c->keep ? c->col : 0), (size_t)yc,
                    c->cs, tensor_rows(x), c->T, c->n_cols, c->HS, c->R);
    if (c->keep) k_rope_pass_backward(x->grad, n->out->grad, tensor_rows(x), C, c->col, c->n_cols);
}
