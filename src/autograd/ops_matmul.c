/* ops_matmul.c: matmul, matmul_bt (A @ B^T without a transpose), transpose, reshape and the
 * head split/merge of attention. Next: ops_reduce.c. */
#include <string.h>

#include "ops_internal.h"

/* Shape rules shared by matmul and matmul_bt. a (..., M, K); b is 2-D (shared across the
 * leading dims) or has a's leading dims. bt: b is (N, K) rather than (K, N). */
typedef struct {
    int BATCH, M, K, N, b_batched;
} MatmulDims;

static MatmulDims matmul_dims(const char *op, const Tensor *a, const Tensor *b, int bt) {
    AG_CHECK(a != NULL && b != NULL, "%s: tensor argument '%s' is NULL (other argument: %s %s)", op,
             a ? "b" : "a",
             a   ? a->name
             : b ? b->name
                 : "NULL",
             tensor_shape_str(a ? a : b));
    AG_CHECK(a->ndim >= 2 && b->ndim >= 2, "%s: both operands need 2 or more dims: %s %s vs %s %s",
             op, a->name, tensor_shape_str(a), b->name, tensor_shape_str(b));
    MatmulDims d;
    d.M = a->shape[a->ndim - 2];
    d.K = a->shape[a->ndim - 1];
    int bk = bt ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    d.N = bt ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    AG_CHECK(bk == d.K, "%s: inner dimensions differ: %s %s vs %s %s", op, a->name,
             tensor_shape_str(a), b->name, tensor_shape_str(b));
    d.b_batched = b->ndim > 2;
    if (d.b_batched) {
        int same = b->ndim == a->ndim;
        for (int i = 0; same && i < a->ndim - 2; i++) same = a->shape[i] == b->shape[i];
        AG_CHECK(same, "%s: leading (batch) dimensions differ: %s %s vs %s %s", op, a->name,
                 tensor_shape_str(a), b->name, tensor_shape_str(b));
    }
    d.BATCH = (int)(a->size / ((size_t)d.M * d.K));
    return d;
}

static Tensor *matmul_out(Tape *tape, AgOp op, const Tensor *a, int N) {
    int shape[AG_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[a->ndim - 1] = N;
    return ag_out(tape, op, a->ndim, shape);
}

/* matmul and matmul_bt differ only in how b is read (bt: stored (N, K)) */
static Tensor *matmul_op(Tape *tape, AgOp op, const char *opname, Tensor *a, Tensor *b, int bt) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    MatmulDims d = matmul_dims(opname, a, b, bt);
    Tensor *y = matmul_out(tape, op, a, d.N);
    (bt ? k_matmul_bt_forward : k_matmul_forward)(y->data, a->data, b->data, d.BATCH, d.M, d.K, d.N,
                                                  d.b_batched);
    ag_record(tape, op, y, 2, (Tensor *[]){a, b});
    return y;
}

static void matmul_op_backward(AgNode *n, const char *opname, int bt) {
    MatmulDims d = matmul_dims(opname, n->in[0], n->in[1], bt);
    (bt ? k_matmul_bt_backward : k_matmul_backward)(ag_grad_if(n->in[0]), ag_grad_if(n->in[1]),
                                                    n->in[0]->data, n->in[1]->data, n->out->grad,
                                                    d.BATCH, d.M, d.K, d.N, d.b_batched);
}

Tensor *ag_matmul(Tape *tape, Tensor *a, Tensor *b) {
    return matmul_op(tape, AG_OP_MATMUL, "ag_matmul", a, b, 0);
}
void ag_matmul_backward(AgNode *n) { matmul_op_backward(n, "ag_matmul", 0); }

Tensor *ag_matmul_bt(Tape *tape, Tensor *a, Tensor *b) {
    return matmul_op(tape, AG_OP_MATMUL_BT, "ag_matmul_bt", a, b, 1);
}
void ag_matmul_bt_backward(AgNode *n) { matmul_op_backward(n, "ag_matmul_bt", 1); }

/* linear and linear_relu: x (..., in), W (out, in), b (out) or NULL -> y (..., out) */
static Tensor *linear_op(Tape *tape, AgOp op, const char *opname, Tensor *x, Tensor *W, Tensor *b) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    AG_CHECK_TENSOR(opname, x);
    AG_CHECK_TENSOR(opname, W);
    AG_CHECK(W->ndim == 2 && x->ndim >= 1 && x->shape[x->ndim - 1] == W->shape[1],
             "%s: x must be (..., in) and W (out, in): x %s %s vs W %s %s", opname, x->name,
             tensor_shape_str(x), W->name, tensor_shape_str(W));
    AG_CHECK(b == NULL || (b->ndim == 1 && b->shape[0] == W->shape[0]),
             "%s: b must be (out): W %s %s vs b %s %s", opname, W->name, tensor_shape_str(W),
             b ? b->name : "", tensor_shape_str(b));
    int in = W->shape[1], out = W->shape[0], rows = (int)(x->size / (size_t)in);
    Tensor *y = matmul_out(tape, op, x, out);
    (op == AG_OP_LINEAR_RELU ? k_linear_relu_forward : k_linear_forward)(
        y->data, x->data, W->data, b ? b->data : NULL, rows, in, out);
    Tensor *inputs[3] = {x, W, b};
    ag_record(tape, op, y, b ? 3 : 2, inputs);
    return y;
}

Tensor *ag_linear(Tape *tape, Tensor *x, Tensor *W, Tensor *b) {
    return linear_op(tape, AG_OP_LINEAR, "ag_linear", x, W, b);
}
void ag_linear_backward(AgNode *n) {
    Tensor *x = n->in[0], *W = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    int in = W->shape[1], out = W->shape[0], rows = (int)(x->size / (size_t)in);
    k_linear_backward(ag_grad_if(x), ag_grad_if(W), ag_grad_if(b), x->data, W->data, n->out->grad,
                      rows, in, out, n->store & 1);
}

Tensor *ag_linear_relu(Tape *tape, Tensor *x, Tensor *W, Tensor *b) {
    return linear_op(tape, AG_OP_LINEAR_RELU, "ag_linear_relu", x, W, b);
}
/* The output's gradient becomes the masked one in place: the tape reads it no more after this
 * (it recycles the buffer next, ../autograd/tape.c), and no zeroed buffer is needed for it. */
void ag_linear_relu_backward(AgNode *n) {
    Tensor *x = n->in[0], *W = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    int in = W->shape[1], out = W->shape[0], rows = (int)(x->size / (size_t)in);
    k_linear_relu_backward(ag_grad_if(x), ag_grad_if(W), ag_grad_if(b), x->data, W->data,
                           n->out->data, n->out->grad, rows, in, out, n->store & 1);
}

Tensor *ag_transpose(Tape *tape, Tensor *x) {
    AG_CHECK(tape != NULL, "ag_transpose: tape is NULL");
    AG_CHECK_TENSOR("ag_transpose", x);
    AG_CHECK(x->ndim >= 2, "ag_transpose: needs 2 or more dims: %s %s", x->name,
             tensor_shape_str(x));
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    int M = x->shape[x->ndim - 2], N = x->shape[x->ndim - 1];
    shape[x->ndim - 2] = N;
    shape[x->ndim - 1] = M;
    Tensor *y = ag_out(tape, AG_OP_TRANSPOSE, x->ndim, shape);
    k_transpose_forward(y->data, x->data, (int)(x->size / ((size_t)M * N)), M, N);
    ag_record(tape, AG_OP_TRANSPOSE, y, 1, &x);
    return y;
}
void ag_transpose_backward(AgNode *n) {
    Tensor *x = n->in[0];
    int M = x->shape[x->ndim - 2], N = x->shape[x->ndim - 1];
    k_transpose_backward(x->grad, n->out->grad, (int)(x->size / ((size_t)M * N)), M, N);
}

Tensor *ag_reshape(Tape *tape, Tensor *x, int ndim, const int *shape) {
    AG_CHECK(tape != NULL, "ag_reshape: tape is NULL");
    AG_CHECK_TENSOR("ag_reshape", x);
    AG_CHECK(ndim >= 0 && ndim <= AG_MAX_DIMS && (ndim == 0 || shape != NULL),
             "ag_reshape: %s %s to %d dims (0..%d allowed)", x->name, tensor_shape_str(x), ndim,
             AG_MAX_DIMS);
    size_t size = 1;
    char want[64];
    int len = snprintf(want, sizeof want, "(");
    for (int i = 0; i < ndim; i++) {
        size *= shape[i] > 0 ? (size_t)shape[i] : 0;
        len += snprintf(want + len, sizeof want - (size_t)len, i ? ",%d" : "%d", shape[i]);
    }
    snprintf(want + len, sizeof want - (size_t)len, ")");
    AG_CHECK(size == x->size, "ag_reshape: element counts differ: %s %s vs new shape %s", x->name,
             tensor_shape_str(x), want);
    /* a view: a new header over the same data; its gradient is its own buffer */
    Tensor *y = arena_alloc(tape->arena, sizeof *y);
    memset(y, 0, sizeof *y);
    y->ndim = ndim;
    for (int i = 0; i < ndim; i++) y->shape[i] = shape[i];
    y->size = size;
    y->data = x->data;
    y->arena = tape->arena;
    snprintf(y->name, sizeof y->name, "reshape");
    ag_record(tape, AG_OP_RESHAPE, y, 1, &x);
    return y;
}
void ag_reshape_backward(AgNode *n) { k_accumulate(n->in[0]->grad, n->out->grad, n->out->size); }

Tensor *ag_split_heads(Tape *tape, Tensor *x, int n_heads) {
    AG_CHECK(tape != NULL, "ag_split_heads: tape is NULL");
    AG_CHECK_TENSOR("ag_split_heads", x);
    AG_CHECK(x->ndim == 3, "ag_split_heads: x must be (B,T,C): %s %s", x->name,
             tensor_shape_str(x));
    AG_CHECK(n_heads > 0 && x->shape[2] % n_heads == 0,
             "ag_split_heads: C = %d of %s %s is not divisible by n_heads = %d", x->shape[2],
             x->name, tensor_shape_str(x), n_heads);
    int B = x->shape[0], T = x->shape[1], HS = x->shape[2] / n_heads;
    Tensor *y = ag_out(tape, AG_OP_SPLIT_HEADS, 4, (int[]){B, n_heads, T, HS});
    k_split_heads_forward(y->data, x->data, B, T, n_heads, HS);
    ag_record(tape, AG_OP_SPLIT_HEADS, y, 1, &x);
    return y;
}
void ag_split_heads_backward(AgNode *n) {
    const int *s = n->out->shape; /* (B,NH,T,HS) */
    k_split_heads_backward(n->in[0]->grad, n->out->grad, s[0], s[2], s[1], s[3]);
}

Tensor *ag_merge_heads(Tape *tape, Tensor *x) {
    AG_CHECK(tape != NULL, "ag_merge_heads: tape is NULL");
    AG_CHECK_TENSOR("ag_merge_heads", x);
    AG_CHECK(x->ndim == 4, "ag_merge_heads: x must be (B,NH,T,HS): %s %s", x->name,
             tensor_shape_str(x));
    int B = x->shape[0], NH = x->shape[1], T = x->shape[2], HS = x->shape[3];
    Tensor *y = ag_out(tape, AG_OP_MERGE_HEADS, 3, (int[]){B, T, NH * HS});
    k_merge_heads_forward(y->data, x->data, B, T, NH, HS);
    ag_record(tape, AG_OP_MERGE_HEADS, y, 1, &x);
    return y;
}
void ag_merge_heads_backward(AgNode *n) {
    const int *s = n->in[0]->shape; /* (B,NH,T,HS) */
    k_merge_heads_backward(n->in[0]->grad, n->out->grad, s[0], s[2], s[1], s[3]);
}
