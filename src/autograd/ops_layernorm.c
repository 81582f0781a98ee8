/* ops_layernorm.c: the fused LayerNorm op over the last dimension, as PyTorch's nn.LayerNorm
 * (biased variance, eps inside the square root, weight and optional bias of size C). It saves
 * only the mean and 1/std of each row, (rows, 2); backward recomputes the normalised x from
 * them. ag_add_layernorm is the residual step x = norm(x + f) of a post-LN sub-layer as one op:
 * it saves the statistics only (backward forms x + f again from its inputs) and its backward
 * writes the gradient of x + f into both inputs.
 * ag_rmsnorm is LLaMA's RMSNorm (no centring, no bias), saving (0, 1/rms) per row.
 * Not here: the loops and the derivation of the gradient (../tensor/k_layernorm.c).
 * Next: ops_rope.c. */
#include "ops_internal.h"

/* The checks every normalisation op makes, naming op: x (..., C), weight (C), bias (C) or NULL,
 * eps > 0. */
static void check_norm(const char *op, const Tensor *x, const Tensor *weight, const Tensor *bias,
                       double eps) {
    AG_CHECK(x->ndim >= 1, "%s: x must have a last dimension: x %s %s vs weight %s %s", op, x->name,
             tensor_shape_str(x), weight->name, tensor_shape_str(weight));
    int C = x->shape[x->ndim - 1];
    AG_CHECK(weight->ndim == 1 && weight->shape[0] == C,
             "%s: weight must be (C) with C the last dim of x: x %s %s vs weight %s %s", op,
             x->name, tensor_shape_str(x), weight->name, tensor_shape_str(weight));
    AG_CHECK(bias == NULL || (bias->ndim == 1 && bias->shape[0] == C),
             "%s: bias must be (C) with C the last dim of x: x %s %s vs bias %s %s", op, x->name,
             tensor_shape_str(x), bias->name, tensor_shape_str(bias));
    AG_CHECK(eps > 0, "%s: eps = %g must be > 0 (x %s %s, weight %s %s)", op, eps, x->name,
             tensor_shape_str(x), weight->name, tensor_shape_str(weight));
}

/* x (..., C), weight (C), bias (C) or NULL -> (..., C) */
Tensor *ag_layernorm(Tape *tape, Tensor *x, Tensor *weight, Tensor *bias, double eps) {
    AG_CHECK(tape != NULL, "ag_layernorm: tape is NULL");
    AG_CHECK_TENSOR("ag_layernorm", x);
    AG_CHECK_TENSOR("ag_layernorm", weight);
    check_norm("ag_layernorm", x, weight, bias, eps);
    int C = x->shape[x->ndim - 1];
    size_t rows = tensor_rows(x);
    Tensor *y = ag_out(tape, AG_OP_LAYERNORM, x->ndim, x->shape);
    Tensor *stats = tensor_new2(tape->arena, (int)rows, 2, "layernorm_stats");
    k_layernorm_forward(y->data, stats->data, x->data, weight->data, bias ? bias->data : NULL, eps,
                        rows, C);
    AgNode *n = ag_record(tape, AG_OP_LAYERNORM, y, bias ? 3 : 2, (Tensor *[]){x, weight, bias});
    if (n) n->saved = stats;
    return y;
}
void ag_layernorm_backward(AgNode *n) {
    Tensor *x = n->in[0], *weight = n->in[1], *bias = n->n_in == 3 ? n->in[2] : NULL;
    k_layernorm_backward(ag_grad_if(x), ag_grad_if(weight), ag_grad_if(bias), x->data, weight->data,
                         n->saved->data, n->out->grad, tensor_rows(x), x->shape[x->ndim - 1],
                         n->store & 1);
}

/* x (..., C), f (..., C) the same shape, weight (C), bias (C) or NULL -> (..., C).
 * Saves the (rows, 2) statistics of s = x + f; x and f, its inputs, stay as they are until
 * backward (no op writes into a recorded tensor). */
Tensor *ag_add_layernorm(Tape *tape, Tensor *x, Tensor *f, Tensor *weight, Tensor *bias,
                         double eps) {
    AG_CHECK(tape != NULL, "ag_add_layernorm: tape is NULL");
    AG_CHECK_TENSOR("ag_add_layernorm", x);
    AG_CHECK_TENSOR("ag_add_layernorm", f);
    AG_CHECK_TENSOR("ag_add_layernorm", weight);
    AG_CHECK(tensor_same_shape(x, f), "ag_add_layernorm: x and f shapes differ: x %s %s vs f %s %s",
             x->name, tensor_shape_str(x), f->name, tensor_shape_str(f));
    check_norm("ag_add_layernorm", x, weight, bias, eps);
    int C = x->shape[x->ndim - 1];
    size_t rows = tensor_rows(x);
    Tensor *y = ag_out(tape, AG_OP_ADD_LAYERNORM, x->ndim, x->shape);
    Tensor *stats = tensor_new2(tape->arena, (int)rows, 2, "add_layernorm_stats");
    k_add_layernorm_forward(y->data, stats->data, x->data, f->data, weight->data,
                            bias ? bias->data : NULL, eps, rows, C);
    AgNode *n =
        ag_record(tape, AG_OP_ADD_LAYERNORM, y, bias ? 4 : 3, (Tensor *[]){x, f, weight, bias});
    if (n) n->saved = stats;
    return y;
}
void ag_add_layernorm_backward(AgNode *n) {
    Tensor *x = n->in[0], *f = n->in[1], *weight = n->in[2], *bias = n->n_in == 4 ? n->in[3] : NULL;
    k_add_layernorm_backward(ag_grad_if(x), ag_grad_if(f), ag_grad_if(weight), ag_grad_if(bias),
                             x->data, f->data, weight->data, n->saved->data, n->out->grad,
                             tensor_rows(x), x->shape[x->ndim - 1], n->store & 3);
}

/* x (..., C), weight (C) -> (..., C): y = x / sqrt(mean(x^2) + eps) * weight per row */
Tensor *ag_rmsnorm(Tape *tape, Tensor *x, Tensor *weight, double eps) {
    AG_CHECK(tape != NULL, "ag_rmsnorm: tape is NULL");
    AG_CHECK_TENSOR("ag_rmsnorm", x);
    AG_CHECK_TENSOR("ag_rmsnorm", weight);
    check_norm("ag_rmsnorm", x, weight, NULL, eps);
    int C = x->shape[x->ndim - 1];
    size_t rows = tensor_rows(x);
    Tensor *y = ag_out(tape, AG_OP_RMSNORM, x->ndim, x->shape);
    Tensor *stats = tensor_new2(tape->arena, (int)rows, 2, "rmsnorm_stats");
    k_rmsnorm_forward(y->data, stats->data, x->data, weight->data, eps, rows, C);
    AgNode *n = ag_record(tape, AG_OP_RMSNORM, y, 2, (Tensor *[]){x, weight});
    if (n) n->saved = stats;
    return y;
}
void ag_rmsnorm_backward(AgNode *n) {
    Tensor *x = n->in[0], *weight = n->in[1];
    k_rmsnorm_backward(ag_grad_if(x), ag_grad_if(weight), x->data, weight->data, n->saved->data,
                       n->out->grad, tensor_rows(x), x->shape[x->ndim - 1], n->store & 1);
}
