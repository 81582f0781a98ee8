/* tape.c: the tape (a linked list of nodes in the step arena), recording, backward, printing,
 * and check mode (the first op whose output or gradient went non-finite).
 * Not here: the ops themselves (ops_*.c) or the gradient check (gradcheck.c).
 * Read next: ops_elementwise.c for the simplest ops, then ops_softmax.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

static const char *const op_names[] = {
#define AG_OP(NAME, name, derivative) #name,
#include "ops.def"
#undef AG_OP
};

static const char *const op_derivatives[] = {
#define AG_OP(NAME, name, derivative) derivative,
#include "ops.def"
#undef AG_OP
};

typedef void (*BackwardFn)(AgNode *node);
static const BackwardFn backward_fns[] = {
#define AG_OP(NAME, name, derivative) ag_##name##_backward,
#include "ops.def"
#undef AG_OP
};

const char *ag_op_name(AgOp op) {
    AG_CHECK(op >= 0 && op < AG_OP_COUNT, "ag_op_name: no op %d", (int)op);
    return op_names[op];
}

const char *ag_op_derivative(AgOp op) {
    AG_CHECK(op >= 0 && op < AG_OP_COUNT, "ag_op_derivative: no op %d", (int)op);
    return op_derivatives[op];
}

Tape *ag_tape_new(Arena *step) {
    AG_CHECK_ARG(step);
    Tape *t = calloc(1, sizeof *t);
    AG_CHECK(t != NULL, "ag_tape_new: out of memory");
    t->arena = step;
    const char *check = getenv("AG_CHECK_FINITE");
    t->check_finite = check && *check && strcmp(check, "0") != 0;
    return t;
}

void ag_tape_free(Tape *tape) { free(tape); }

void ag_tape_reset(Tape *tape) {
    AG_CHECK_ARG(tape);
    tape->last = NULL;
    tape->n_nodes = 0;
    tape->backward_done = 0;
    tape->free_grads = NULL;
    tape->nonfinite.found = 0;
    arena_reset(tape->arena);
}

int ag_no_grad(Tape *tape, int on) {
    AG_CHECK_ARG(tape);
    int prev = tape->no_grad;
    tape->no_grad = on;
    return prev;
}

/* ---- check mode (autograd.h): the first NaN or inf, found where it appeared ---- */

int ag_check_finite(Tape *tape, int on) {
    AG_CHECK_ARG(tape);
    int prev = tape->check_finite;
    tape->check_finite = on != 0;
    return prev;
}

const AgNonFinite *ag_first_nonfinite(const Tape *tape) {
    AG_CHECK_ARG(tape);
    return tape->nonfinite.found ? &tape->nonfinite : NULL;
}

const char *ag_nonfinite_message(const AgNonFinite *r) {
    AG_CHECK_ARG(r);
    return r->found ? r->message : "every value checked is finite";
}

/* the index of the first NaN or inf of p[0..n), or n */
static size_t first_nonfinite(const Real *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return i;
    return n;
}

static const char *value_str(double v) { return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

/* Fills the report's tensor fields from t, whose element i is non-finite. */
static void note_tensor(AgNonFinite *r, const Tensor *t, size_t i, const Real *vals) {
    r->found = 1;
    snprintf(r->tensor, sizeof r->tensor, "%s", t->name);
    r->ndim = t->ndim;
    for (int d = 0; d < AG_MAX_DIMS; d++) r->shape[d] = d < t->ndim ? t->shape[d] : 0;
    r->index = i;
    r->value = (double)vals[i];
}

/* After op's forward kernel: is its output finite? If not, were its inputs? */
static void check_forward(Tape *tape, AgOp op, const Tensor *out, int n_in, Tensor **in) {
    size_t i = first_nonfinite(out->data, out->size);
    if (i == out->size) return;
    AgNonFinite *r = &tape->nonfinite;
    note_tensor(r, out, i, out->data);
    r->backward = 0;
    r->op = op;
    r->node = tape->n_nodes + 1;
    r->input = -1;
    r->bad_input = -1;
    for (int k = 0; k < n_in && r->bad_input < 0; k++)
        if (first_nonfinite(in[k]->data, in[k]->size) < in[k]->size) r->bad_input = k;
    int len =
        snprintf(r->message, sizeof r->message,
                 "forward of node %d (%s): its output '%s' %s holds %s at element %zu", r->node,
                 op_names[op], out->name, tensor_shape_str(out), value_str(r->value), i);
    size_t cap = sizeof r->message, at = len < 0 ? cap : (size_t)len;
    if (r->bad_input >= 0) {
        const Tensor *b = in[r->bad_input];
        size_t j = first_nonfinite(b->data, b->size);
        if (at < cap)
            snprintf(r->message + at, cap - at,
                     "; its input %d '%s' %s already held %s at "
                     "element %zu",
                     r->bad_input, b->name, tensor_shape_str(b), value_str((double)b->data[j]), j);
    } else {
        for (int k = 0; k < n_in && at < cap; k++) {
            len = snprintf(r->message + at, cap - at, "%s '%s' %s",
                           k ? "," : "; from finite inputs", in[k]->name, tensor_shape_str(in[k]));
            at += len < 0 ? cap : (size_t)len;
        }
    }
}

/* After node n's backward (node number k): are the gradients of its inputs finite? */
static void check_backward(Tape *tape, const AgNode *n, int k) {
    for (int j = 0; j < n->n_in; j++) {
        const Tensor *x = n->in[j];
        if (!x->requires_grad || !x->grad) continue;
        size_t i = first_nonfinite(x->grad, x->size);
        if (i == x->size) continue;
        AgNonFinite *r = &tape->nonfinite;
        note_tensor(r, x, i, x->grad);
        r->backward = 1;
        r->op = n->op;
        r->node = k;
        r->input = j;
        r->bad_input = -1;
        snprintf(r->message, sizeof r->message,
                 "backward of node %d (%s): the gradient of its input %d '%s' %s holds %s at "
                 "element %zu (the gradient of its output '%s' %s was finite)",
                 k, op_names[n->op], j, x->name, tensor_shape_str(x), value_str(r->value), i,
                 n->out->name, tensor_shape_str(n->out));
        return;
    }
}

Tensor *ag_out(Tape *tape, AgOp op, int ndim, const int *shape) {
    return tensor_new(tape->arena, ndim, shape, op_names[op]);
}

AgNode *ag_record(Tape *tape, AgOp op, Tensor *out, int n_in, Tensor **in) {
    if (tape->check_finite && !tape->nonfinite.found) check_forward(tape, op, out, n_in, in);
    if (tape->no_grad) return NULL;
    int any = 0;
    for (int i = 0; i < n_in; i++) any |= in[i]->requires_grad;
    if (!any) return NULL;
    AG_CHECK(!tape->backward_done,
             "%s: recording on a tape after ag_backward; call "
             "ag_tape_reset first",
             op_names[op]);
    AgNode *n = arena_alloc(tape->arena, sizeof *n);
    memset(n, 0, sizeof *n);
    n->grad_norm = -1;
    n->op = op;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->prev = tape->last;
    tape->last = n;
    tape->n_nodes++;
    out->requires_grad = 1;
    return n;
}

void *ag_save_ctx(Tape *tape, AgNode *n, size_t bytes) {
    void *c = arena_alloc(tape->arena, bytes);
    memset(c, 0, bytes);
    n->ctx = c;
    return c;
}

const int *ag_save_ints(Tape *tape, const int *src, size_t n) {
    int *dst = arena_alloc(tape->arena, n * sizeof *dst);
    memcpy(dst, src, n * sizeof *dst);
    return dst;
}

const uint8_t *ag_save_bytes(Tape *tape, const uint8_t *src, size_t n) {
    uint8_t *dst = arena_alloc(tape->arena, n);
    memcpy(dst, src, n);
    return dst;
}

/* Gradient buffers of intermediates are recycled during backward: a released buffer goes on
 * the tape's free list (its first bytes hold the list entry) and ensure_grad takes the
 * smallest free buffer that is large enough before it asks the arena for a new one. Buffers
 * come from arena_alloc, so each is at least 64 bytes and 64-byte aligned. */
typedef struct FreeGrad {
    size_t bytes;
    struct FreeGrad *next;
} FreeGrad;

/* A gradient buffer for a tensor that has none yet (intermediates get theirs here, lazily),
 * zeroed unless the backward about to run stores into it whole. Returns 1 when it is new. */
static int ensure_grad(Tape *tape, Tensor *t, int zero) {
    if (t->grad) return 0;
    AG_CHECK(t->arena == tape->arena,
             "ag_backward: tensor '%s' %s requires grad but has no "
             "gradient buffer; call tensor_requires_grad on it",
             t->name, tensor_shape_str(t));
    size_t bytes = t->size * sizeof(Real);
    FreeGrad **best = NULL;
    for (FreeGrad **f = (FreeGrad **)&tape->free_grads; *f; f = &(*f)->next)
        if ((*f)->bytes >= bytes && (!best || (*f)->bytes < (*best)->bytes)) best = f;
    if (best) {
        t->grad = (Real *)*best;
        *best = (*best)->next;
    } else {
        t->grad = arena_alloc(tape->arena, bytes);
    }
    if (zero) {
        k_zero(t->grad, t->size);
    } else {
#ifdef AG_DEBUG
        /* a backward that adds into this buffer instead of storing reads NaN */
        for (size_t i = 0; i < t->size; i++) t->grad[i] = (Real)NAN;
#endif
    }
    return 1;
}

/* The inputs (bit j: in[j]) whose new gradient buffer the op's backward writes (=) whole, so
 * the tape need not zero it: the backward honours node->store for these and adds elsewhere.
 * Zeroing was about 2.7% of a seq2seq step; these ops write nearly every new gradient there. */
static unsigned can_store(AgOp op) {
    switch (op) {
    case AG_OP_ADD:
    case AG_OP_ADD_LAYERNORM: return 3;
    case AG_OP_ADD_BIAS:
    case AG_OP_SCALE:
    case AG_OP_GELU:
    case AG_OP_LINEAR:
    case AG_OP_LINEAR_RELU:
    case AG_OP_LAYERNORM:
    case AG_OP_RMSNORM:
    case AG_OP_GATHER_ROWS:
    case AG_OP_SCATTER_ROWS: return 1;
    default: return 0;
    }
}

/* Gives node n's inputs that require grad their gradient buffers and sets n->store. An input
 * that appears twice among n's inputs is zeroed: its second write must add to the first. */
static void prepare_grads(Tape *tape, AgNode *n) {
    unsigned can = can_store(n->op);
    n->store = 0;
    for (int i = 0; i < n->n_in; i++) {
        Tensor *x = n->in[i];
        if (!x->requires_grad) continue;
        int store = (can >> i) & 1;
        for (int j = 0; j < n->n_in && store; j++)
            if (j != i && n->in[j] == x) store = 0;
        if (ensure_grad(tape, x, !store) && store) n->store |= 1u << i;
    }
}

/* After its op's backward nothing reads an intermediate's gradient again (every consumer of
 * the output is newer, so it ran before): its buffer joins the free list. Leaves keep theirs. */
static void release_grad(Tape *tape, AgNode *n) {
    Tensor *t = n->out;
    if (t->is_param || t->arena != tape->arena || !t->grad) return;
    size_t bytes = (t->size * sizeof(Real) + 63) / 64 * 64; /* what arena_alloc reserved */
    if (bytes < 64) bytes = 64;
#ifdef AG_DEBUG
    /* a stale pointer to this gradient now reads NaN */
    for (size_t i = 0; i < t->size; i++) t->grad[i] = (Real)NAN;
#endif
    FreeGrad *f = (FreeGrad *)t->grad;
    f->bytes = bytes;
    f->next = tape->free_grads;
    tape->free_grads = f;
    t->grad = NULL;
}

/* the Euclidean norm, summed in double in index order */
static double norm_of(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

void ag_backward(Tape *tape, Tensor *loss) {
    AG_CHECK_ARG(tape);
    AG_CHECK_ARG(loss);
    AG_CHECK(loss->size == 1,
             "ag_backward: loss '%s' %s is not a scalar (%zu elements); reduce it "
             "with ag_sum or ag_mean first",
             loss->name, tensor_shape_str(loss), loss->size);
    AG_CHECK(loss->requires_grad,
             "ag_backward: loss '%s' does not depend on any tensor that "
             "requires grad (or was computed in no-grad mode)",
             loss->name);
    AG_CHECK(!tape->backward_done, "ag_backward: called twice on one tape; call ag_tape_reset "
                                   "between steps");
    tape->backward_done = 1;
    ensure_grad(tape, loss, 1);
    loss->grad[0] = 1;
    int k = tape->n_nodes + 1; /* node numbers as ag_tape_print shows them */
    for (AgNode *n = tape->last; n; n = n->prev) {
        k--;
        if (!n->out->grad) continue; /* nothing downstream used this output */
        prepare_grads(tape, n);
        backward_fns[n->op](n);
        if (tape->check_finite && !tape->nonfinite.found) check_backward(tape, n, k);
        if (tape->keep_norms) n->grad_norm = norm_of(n->out->grad, n->out->size);
        release_grad(tape, n);
    }
}

void ag_tape_print(const Tape *tape, FILE *f) {
    AG_CHECK_ARG(tape);
    AG_CHECK_ARG(f);
    fprintf(f, "tape: %d nodes, backward order (newest first)\n", tape->n_nodes);
    int k = tape->n_nodes;
    for (const AgNode *n = tape->last; n; n = n->prev, k--) {
        fprintf(f, "%4d %-14s -> %-16s <-", k, op_names[n->op], tensor_shape_str(n->out));
        for (int i = 0; i < n->n_in; i++)
            fprintf(f, " %s%s", n->in[i]->name, tensor_shape_str(n->in[i]));
        fputc('\n', f);
    }
}

int ag_tape_keep_norms(Tape *tape, int on) {
    AG_CHECK_ARG(tape);
    int prev = tape->keep_norms;
    tape->keep_norms = on != 0;
    return prev;
}

/* the node that produced t (newest first), or NULL for a leaf; its number in *k */
static const AgNode *producer(const Tape *tape, const Tensor *t, int *k) {
    int m = tape->n_nodes;
    for (const AgNode *n = tape->last; n; n = n->prev, m--)
        if (n->out == t) {
            *k = m;
            return n;
        }
    return NULL;
}

/* "|y| 1.23  |g| 4.56" (|g| -: no gradient to show) */
static void dot_norms(FILE *f, const Tensor *t, double gnorm) {
    fprintf(f, "|y| %.4g  |g| ", norm_of(t->data, t->size));
    if (gnorm < 0 && t->grad) gnorm = norm_of(t->grad, t->size);
    if (gnorm >= 0)
        fprintf(f, "%.4g", gnorm);
    else
        fputc('-', f);
}

int ag_tape_dot(const Tape *tape, FILE *f) {
    AG_CHECK_ARG(tape);
    AG_CHECK_ARG(f);
    fprintf(f, "digraph tape {\n  rankdir=BT;\n  node [fontname=\"monospace\", fontsize=10];\n");
    int k = tape->n_nodes;
    for (const AgNode *n = tape->last; n; n = n->prev, k--) {
        fprintf(f, "  n%d [shape=box, label=\"%d %s\\n%s\\n", k, k, op_names[n->op],
                tensor_shape_str(n->out));
        dot_norms(f, n->out, n->grad_norm);
        fprintf(f, "\"];\n");
        for (int i = 0; i < n->n_in; i++) {
            const Tensor *x = n->in[i];
            int from = 0;
            if (producer(tape, x, &from)) {
                fprintf(f, "  n%d -> n%d;\n", from, k);
                continue;
            }
            /* a leaf: one ellipse, named after its oldest reader and that reader's slot */
            int first_k = k, first_i = i, m = tape->n_nodes;
            for (const AgNode *r = tape->last; r; r = r->prev, m--)
                for (int j = 0; j < r->n_in; j++)
                    if (r->in[j] == x) {
                        first_k = m;
                        first_i = j;
                    }
            if (first_k == k && first_i == i) {
                fprintf(f, "  l%d_%d [shape=ellipse, label=\"", k, i);
                for (const char *c = x->name; *c; c++) /* quotes and backslashes escaped */
                    fprintf(f, "%s%c", *c == '"' || *c == '\\' ? "\\" : "", *c);
                fprintf(f, "\\n%s\\n", tensor_shape_str(x));
                dot_norms(f, x, -1);
                fprintf(f, "\"];\n");
            }
            fprintf(f, "  l%d_%d -> n%d;\n", first_k, first_i, k);
        }
    }
    fprintf(f, "}\n");
    return ferror(f) ? -1 : 0;
}
