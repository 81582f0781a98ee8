/* ops_softmax.c: softmax, log-softmax and cross-entropy over the last dimension. Softmax and
 * log-softmax save nothing but their output (backward needs only y, as in PyTorch's
 * derivatives.yaml); cross-entropy saves one number per row, the log-sum-exp, instead of the
 * (rows, V) probabilities. Next: ops_attention.c (attention is a softmax over scores). */
#include "ops_internal.h"

static Tensor *softmax_like(Tape *tape, AgOp op, const char *opname, Tensor *x,
                            void (*fwd)(Real *, const Real *, size_t, int)) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    AG_CHECK(x != NULL, "%s: tensor argument 'x' is NULL", opname);
    AG_CHECK(x->ndim >= 1, "%s: x must have a last dimension: %s %s", opname, x->name,
             tensor_shape_str(x));
    Tensor *y = ag_out(tape, op, x->ndim, x->shape);
    fwd(y->data, x->data, tensor_rows(x), x->shape[x->ndim - 1]);
    ag_record(tape, op, y, 1, &x);
    return y;
}

Tensor *ag_softmax(Tape *tape, Tensor *x) {
    return softmax_like(tape, AG_OP_SOFTMAX, "ag_softmax", x, k_softmax_forward);
}
void ag_softmax_backward(AgNode *n) {
    Tensor *y = n->out;
    k_softmax_backward(n->in[0]->grad, y->data, y->grad, tensor_rows(y), y->shape[y->ndim - 1]);
}

Tensor *ag_log_softmax(Tape *tape, Tensor *x) {
    return softmax_like(tape, AG_OP_LOG_SOFTMAX, "ag_log_softmax", x, k_log_softmax_forward);
}
void ag_log_softmax_backward(AgNode *n) {
    Tensor *y = n->out;
    k_log_softmax_backward(n->in[0]->grad, y->data, y->grad, tensor_rows(y), y->shape[y->ndim - 1]);
}

typedef struct CrossEntropyCtx {
    const int *targets; /* (rows), a copy */
    int ignore_index;
    double kept; /* the rows not ignored: the mean's divisor */
} CrossEntropyCtx;
Tensor *ag_cross_entropy(Tape *tape, Tensor *logits, const int *targets, int ignore_index) {
    AG_CHECK(tape != NULL, "ag_cross_entropy: tape is NULL");
    AG_CHECK_TENSOR("ag_cross_entropy", logits);
    AG_CHECK(targets != NULL, "ag_cross_entropy: targets is NULL for logits %s %s", logits->name,
             tensor_shape_str(logits));
    AG_CHECK(logits->ndim >= 1, "ag_cross_entropy: logits must be (..., V): %s %s", logits->name,
             tensor_shape_str(logits));
    size_t rows = tensor_rows(logits);
    int V = logits->shape[logits->ndim - 1];
    for (size_t r = 0; r < rows; r++)
        AG_CHECK(targets[r] == ignore_index || (targets[r] >= 0 && targets[r] < V),
                 "ag_cross_entropy: target %d at row %zu is outside [0, %d) for logits %s %s "
                 "(ignore_index %d)",
                 targets[r], r, V, logits->name, tensor_shape_str(logits), ignore_index);
    Tensor *lse = tensor_new1(tape->arena, (int)rows, "lse");
    Tensor *y = ag_out(tape, AG_OP_CROSS_ENTROPY, 0, NULL);
    size_t kept;
    y->data[0] = (Real)k_cross_entropy_forward(lse->data, logits->data, targets, ignore_index, rows,
                                               V, &kept);
    AgNode *n = ag_record(tape, AG_OP_CROSS_ENTROPY, y, 1, &logits);
    if (n) {
        n->saved = lse;
        *AG_SAVE(tape, n, CrossEntropyCtx) =
            (CrossEntropyCtx){ag_save_ints(tape, targets, rows), ignore_index, (double)kept};
    }
    return y;
}
void ag_cross_entropy_backward(AgNode *n) {
    const CrossEntropyCtx *c = n->ctx;
    if (c->kept == 0) return; /* every row ignored: the loss is the constant 0 */
    Tensor *x = n->in[0];
    /* EXERCISE(cross_entropy): part 1 of 2: g, the loss's gradient gy = n->out->grad[0]
     * scaled as every logit of a kept row receives it; c->kept is the number of rows that are
     * not ignored (docs/backprop.md, section 6). Part 2: k_cross_entropy_backward.
     * STUB: Real g = 0; */
    Real g = (Real)(n->out->grad[0] / c->kept);
    /* END EXERCISE */
    k_cross_entropy_backward(x->grad, x->data, n->saved->data, c->targets, c->ignore_index, g,
                             tensor_rows(x), x->shape[x->ndim - 1]);
}
