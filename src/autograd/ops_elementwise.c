/* ops_elementwise.c: add, sub, mul, add_bias, scale, relu, gelu, gelu_tanh, silu, dropout; each
 * constructor
 * followed by its backward. The pattern every op file follows: check, allocate, run the
 * forward kernel, record; backward runs the backward kernel into the inputs' gradients.
 * Next: ops_matmul.c. */
#include "ops_internal.h"

/* a and b of the same shape, else abort naming the op and both shapes */
static void check_same(const char *op, const Tensor *a, const Tensor *b) {
    AG_CHECK(a != NULL && b != NULL, "%s: tensor argument is NULL (a %s, b %s)", op,
             a ? a->name : "NULL", b ? b->name : "NULL");
    AG_CHECK(tensor_same_shape(a, b), "%s: shapes differ: %s %s vs %s %s", op, a->name,
             tensor_shape_str(a), b->name, tensor_shape_str(b));
}

/* The three same-shape binary ops share everything but their kernels. */
static Tensor *binary(Tape *tape, AgOp op, const char *opname, Tensor *a, Tensor *b,
                      void (*fwd)(Real *, const Real *, const Real *, size_t)) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    check_same(opname, a, b);
    Tensor *y = ag_out(tape, op, a->ndim, a->shape);
    fwd(y->data, a->data, b->data, a->size);
    ag_record(tape, op, y, 2, (Tensor *[]){a, b});
    return y;
}

Tensor *ag_add(Tape *tape, Tensor *a, Tensor *b) {
    return binary(tape, AG_OP_ADD, "ag_add", a, b, k_add_forward);
}
void ag_add_backward(AgNode *n) {
    k_add_backward(ag_grad_if(n->in[0]), ag_grad_if(n->in[1]), n->out->grad, n->out->size,
                   n->store);
}

Tensor *ag_sub(Tape *tape, Tensor *a, Tensor *b) {
    return binary(tape, AG_OP_SUB, "ag_sub", a, b, k_sub_forward);
}
void ag_sub_backward(AgNode *n) {
    k_sub_backward(ag_grad_if(n->in[0]), ag_grad_if(n->in[1]), n->out->grad, n->out->size,
                   n->store);
}

Tensor *ag_mul(Tape *tape, Tensor *a, Tensor *b) {
    return binary(tape, AG_OP_MUL, "ag_mul", a, b, k_mul_forward);
}
void ag_mul_backward(AgNode *n) {
    k_mul_backward(ag_grad_if(n->in[0]), ag_grad_if(n->in[1]), n->in[0]->data, n->in[1]->data,
                   n->out->grad, n->out->size, n->store);
}

Tensor *ag_add_bias(Tape *tape, Tensor *x, Tensor *bias) {
    AG_CHECK(tape != NULL, "ag_add_bias: tape is NULL");
    AG_CHECK_TENSOR("ag_add_bias", x);
    AG_CHECK_TENSOR("ag_add_bias", bias);
    /* bias must equal the trailing dimensions of x: (C) or (T,C) for x (B,T,C) */
    int ok = bias->ndim >= 1 && bias->ndim <= x->ndim;
    for (int i = 1; ok && i <= bias->ndim; i++)
        ok = bias->shape[bias->ndim - i] == x->shape[x->ndim - i];
    AG_CHECK(ok, "ag_add_bias: bias must match the trailing dims of x: x %s %s vs bias %s %s",
             x->name, tensor_shape_str(x), bias->name, tensor_shape_str(bias));
    Tensor *y = ag_out(tape, AG_OP_ADD_BIAS, x->ndim, x->shape);
    k_add_bias_forward(y->data, x->data, bias->data, x->size / bias->size, (int)bias->size);
    ag_record(tape, AG_OP_ADD_BIAS, y, 2, (Tensor *[]){x, bias});
    return y;
}
void ag_add_bias_backward(AgNode *n) {
    Tensor *x = n->in[0], *bias = n->in[1];
    k_add_bias_backward(ag_grad_if(x), ag_grad_if(bias), n->out->grad, x->size / bias->size,
                        (int)bias->size, n->store & 1);
}

typedef struct ScaleCtx {
    double s;
} ScaleCtx;
Tensor *ag_scale(Tape *tape, Tensor *x, double s) {
    AG_CHECK(tape != NULL, "ag_scale: tape is NULL");
    AG_CHECK_TENSOR("ag_scale", x);
    Tensor *y = ag_out(tape, AG_OP_SCALE, x->ndim, x->shape);
    k_scale_forward(y->data, x->data, (Real)s, x->size);
    AgNode *n = ag_record(tape, AG_OP_SCALE, y, 1, &x);
    if (n) AG_SAVE(tape, n, ScaleCtx)->s = s;
    return y;
}
void ag_scale_backward(AgNode *n) {
    const ScaleCtx *c = n->ctx;
    k_scale_backward(n->in[0]->grad, n->out->grad, (Real)c->s, n->out->size, n->store & 1);
}

/* relu, gelu, gelu_tanh and silu: one input, same shape out */
static Tensor *unary(Tape *tape, AgOp op, const char *opname, Tensor *x,
                     void (*fwd)(Real *, const Real *, size_t)) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    AG_CHECK(x != NULL, "%s: tensor argument 'x' is NULL", opname);
    Tensor *y = ag_out(tape, op, x->ndim, x->shape);
    fwd(y->data, x->data, x->size);
    ag_record(tape, op, y, 1, &x);
    return y;
}

Tensor *ag_relu(Tape *tape, Tensor *x) {
    return unary(tape, AG_OP_RELU, "ag_relu", x, k_relu_forward);
}
void ag_relu_backward(AgNode *n) {
    k_relu_backward(n->in[0]->grad, n->out->data, n->out->grad, n->out->size);
}

Tensor *ag_gelu(Tape *tape, Tensor *x) {
    return unary(tape, AG_OP_GELU, "ag_gelu", x, k_gelu_forward);
}
void ag_gelu_backward(AgNode *n) {
    k_gelu_backward(n->in[0]->grad, n->in[0]->data, n->out->grad, n->out->size, n->store & 1);
}

Tensor *ag_gelu_tanh(Tape *tape, Tensor *x) {
    return unary(tape, AG_OP_GELU_TANH, "ag_gelu_tanh", x, k_gelu_tanh_forward);
}
void ag_gelu_tanh_backward(AgNode *n) {
    k_gelu_tanh_backward(n->in[0]->grad, n->in[0]->data, n->out->grad, n->out->size, n->store & 1);
}

Tensor *ag_silu(Tape *tape, Tensor *x) {
    return unary(tape, AG_OP_SILU, "ag_silu", x, k_silu_forward);
}
void ag_silu_backward(AgNode *n) {
    k_silu_backward(n->in[0]->grad, n->in[0]->data, n->out->grad, n->out->size);
}

typedef struct DropoutCtx {
    double p;
    uint64_t key; /* names the mask: element e is kept when rng_hash(key, e) maps to >= p */
} DropoutCtx;
Tensor *ag_dropout(Tape *tape, Tensor *x, double p, Rng *rng) {
    AG_CHECK(tape != NULL, "ag_dropout: tape is NULL");
    AG_CHECK_TENSOR("ag_dropout", x);
    AG_CHECK(p >= 0 && p < 1, "ag_dropout: p = %g must be in [0, 1) for x %s %s", p, x->name,
             tensor_shape_str(x));
    if (tape->no_grad || p == 0) return x;
    AG_CHECK(rng != NULL, "ag_dropout: rng is NULL (p = %g, x %s %s)", p, x->name,
             tensor_shape_str(x));
    /* one draw from the stream per call: the key names this call's mask */
    uint64_t key = rng_u64(rng);
    Tensor *y = ag_out(tape, AG_OP_DROPOUT, x->ndim, x->shape);
    k_dropout_forward(y->data, x->data, key, p, x->size);
    AgNode *n = ag_record(tape, AG_OP_DROPOUT, y, 1, &x);
    if (n) *AG_SAVE(tape, n, DropoutCtx) = (DropoutCtx){p, key};
    return y;
}
void ag_dropout_backward(AgNode *n) {
    const DropoutCtx *c = n->ctx;
    k_dropout_backward(n->in[0]->grad, n->out->grad, c->key, c->p, n->out->size, n->store & 1);
}
