/* ops_reduce.c: sum and mean over every element, to a scalar (a tensor of 0 dims).
 * Next: ops_softmax.c. */
#include "ops_internal.h"

static Tensor *reduce(Tape *tape, AgOp op, const char *opname, Tensor *x, double div) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", opname);
    AG_CHECK(x != NULL, "%s: tensor argument 'x' is NULL", opname);
    Tensor *y = ag_out(tape, op, 0, NULL);
    y->data[0] = (Real)(k_sum_forward(x->data, x->size) / div);
    ag_record(tape, op, y, 1, &x);
    return y;
}

Tensor *ag_sum(Tape *tape, Tensor *x) { return reduce(tape, AG_OP_SUM, "ag_sum", x, 1.0); }
void ag_sum_backward(AgNode *n) {
    k_sum_backward(n->in[0]->grad, n->out->grad[0], n->in[0]->size, n->store & 1);
}

Tensor *ag_mean(Tape *tape, Tensor *x) {
    return reduce(tape, AG_OP_MEAN, "ag_mean", x, x ? (double)x->size : 1.0);
}
void ag_mean_backward(AgNode *n) {
    size_t count = n->in[0]->size;
    k_sum_backward(n->in[0]->grad, (Real)(n->out->grad[0] / (double)count), count, n->store & 1);
}
