/* tape.c: the tape (a linked list of nodes in the step arena), recording, backward (and its
 * hook for leaves whose gradient is final), printing, and check mode (the first op whose output
 * or gradient went non-finite).
 * Not here: the ops themselves (ops_*.c) or the gradient check (gradcheck.c).
 * Read next: ops_elementwise.c for the simplest ops, then ops_softmax.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_internal.h"

static const char *const op_names[] = {
#define AG_OP(NAME, name, store, derivative) #name,
#include "ops.def"
#undef AG_OP
};

static const char *const op_derivatives[] = {
#define AG_OP(NAME, name, store, derivative) derivative,
#include "ops.def"
#undef AG_OP
};

typedef void (*BackwardFn)(AgNode *node);
static const BackwardFn backward_fns[] = {
#define AG_OP(NAME, name, store, derivative) ag_##name##_backward,
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

/* Gradient buffers of intermediates are recycled during backward. A released buffer goes on
 * the tape's free list (its first bytes hold the list entry), kept in address order: a buffer
 * next to a free neighbour merges with it, so that the space of two small gradients can serve a
 * large one later. ensure_grad takes the smallest free block that is large enough, gives back
 * the rest of it as a block of its own, and asks the arena only when no block fits. (With whole
 * buffers only, the backward of a 2+2-layer seq2seq step allocated 11.3 MiB anew: a feed-forward
 * block's (n, 4C) gradient went to a (n, 3C) request and the next (n, 4C) one found nothing.)
 * Buffers come from arena_alloc, so each is at least 64 bytes and 64-byte aligned; blocks are
 * cut at multiples of 64 bytes, so every block is too. */
typedef struct FreeGrad {
    size_t bytes;
    struct FreeGrad *next;
} FreeGrad;

enum { GRAD_ALIGN = 64 };

/* bytes rounded up as arena_alloc rounds them: what a buffer of that size really holds */
static size_t grad_bytes(size_t bytes) {
    size_t b = (bytes + GRAD_ALIGN - 1) / GRAD_ALIGN * GRAD_ALIGN;
    return b < GRAD_ALIGN ? GRAD_ALIGN : b;
}

/* A block of at least bytes (a multiple of 64) from the free list, or NULL: the smallest that
 * fits (the first of those in address order), its tail left on the list when it is longer. */
static void *take_free(Tape *tape, size_t bytes) {
    FreeGrad **best = NULL;
    for (FreeGrad **f = (FreeGrad **)&tape->free_grads; *f; f = &(*f)->next)
        if ((*f)->bytes >= bytes && (!best || (*f)->bytes < (*best)->bytes)) best = f;
    if (!best) return NULL;
    FreeGrad *b = *best;
    if (b->bytes - bytes >= GRAD_ALIGN) { /* the tail stays free, in b's place in the order */
        FreeGrad *tail = (FreeGrad *)((char *)b + bytes);
        tail->bytes = b->bytes - bytes;
        tail->next = b->next;
        *best = tail;
    } else {
        *best = b->next;
    }
    return b;
}

/* p (bytes, a multiple of 64) joins the free list at its address, merged with the blocks that
 * end where it starts and start where it ends. */
static void give_free(Tape *tape, void *p, size_t bytes) {
    FreeGrad *prev = NULL, *next = tape->free_grads;
    while (next && (char *)next < (char *)p) prev = next, next = next->next;
    FreeGrad *b = p;
    b->bytes = bytes;
    b->next = next;
    if (next && (char *)b + b->bytes == (char *)next) { /* b runs into next */
        b->bytes += next->bytes;
        b->next = next->next;
    }
    if (prev && (char *)prev + prev->bytes == (char *)b) { /* prev runs into b */
        prev->bytes += b->bytes;
        prev->next = b->next;
    } else if (prev) {
        prev->next = b;
    } else {
        tape->free_grads = b;
    }
}

/* A block of bytes (a multiple of 64) when no free block is large enough: the last free block
 * grown in place when it is the arena's last block (it ends where the arena's current chunk is
 * filled up to), else new memory from the arena. */
static void *grow_free(Tape *tape, size_t bytes) {
    FreeGrad **last = (FreeGrad **)&tape->free_grads;
    if (!*last) return arena_alloc(tape->arena, bytes);
    while ((*last)->next) last = &(*last)->next;
    FreeGrad *b = *last;
    if (!arena_grow_last(tape->arena, (char *)b + b->bytes, bytes - b->bytes))
        return arena_alloc(tape->arena, bytes);
    *last = NULL; /* the whole block, grown to bytes */
    return b;
}

/* A gradient buffer for a tensor that has none yet (intermediates get theirs here, lazily),
 * zeroed unless the backward about to run stores into it whole. Returns 1 when it is new. */
static int ensure_grad(Tape *tape, Tensor *t, int zero) {
    if (t->grad) return 0;
    if (t->is_param) { /* a lazy parameter's (arena_lazy_grads): zeroed and added to, as ever */
        tensor_requires_grad(t);
        return 0;
    }
    AG_CHECK(t->arena == tape->arena,
             "ag_backward: tensor '%s' %s requires grad but has no "
             "gradient buffer; call tensor_requires_grad on it",
             t->name, tensor_shape_str(t));
    size_t bytes = t->size * sizeof(Real);
    t->grad = take_free(tape, grad_bytes(bytes));
    if (!t->grad) t->grad = grow_free(tape, grad_bytes(bytes));
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
 * the tape need not zero it: ops.def's store column. The backward honours node->store for
 * these and adds elsewhere. Zeroing was about 2.7% of a seq2seq step; these ops write nearly
 * every new gradient there. Attention's inputs are often one tensor (q, k and v side by side),
 * each part written by its own gradient: ag_attention_can_store (ASK) tells when those parts
 * make the whole tensor. */
#define AG_STORE_NONE(name) 0u
#define AG_STORE_IN0(name) 1u
#define AG_STORE_IN0_IN1(name) 3u
#define AG_STORE_ASK(name) ag_##name##_can_store(n)
static unsigned can_store(const AgNode *n) {
    switch (n->op) {
#define AG_OP(NAME, name, store, derivative)                                                       \
    case AG_OP_##NAME:                                                                             \
        return AG_STORE_##store(name);
#include "ops.def"
#undef AG_OP
    default: return 0;
    }
}

/* Gives node n's inputs that require grad their gradient buffers and sets n->store. An input
 * that appears twice among n's inputs is zeroed (its second write must add to the first),
 * except attention's parts of one tensor, which can_store has checked. */
static void prepare_grads(Tape *tape, AgNode *n) {
    unsigned can = can_store(n);
    n->store = 0;
    for (int i = 0; i < n->n_in; i++) {
        Tensor *x = n->in[i];
        if (!x->requires_grad) continue;
        int store = (can >> i) & 1;
        for (int j = 0; j < n->n_in && store && n->op != AG_OP_ATTENTION; j++)
            if (j != i && n->in[j] == x) store = 0;
        if (ensure_grad(tape, x, !store) && store) n->store |= 1u << i;
    }
}

/* After its op's backward nothing reads an intermediate's gradient again (every consumer of
 * the output is newer, so it ran before): its buffer joins the free list. Leaves keep theirs. */
static void release_grad(Tape *tape, AgNode *n) {
    Tensor *t = n->out;
    if (t->is_param || t->arena != tape->arena || !t->grad) return;
#ifdef AG_DEBUG
    /* a stale pointer to this gradient now reads NaN */
    for (size_t i = 0; i < t->size; i++) t->grad[i] = (Real)NAN;
#endif
    give_free(tape, t->grad, grad_bytes(t->size * sizeof(Real)));
    t->grad = NULL;
}

/* the Euclidean norm, summed in double in index order */
static double norm_of(const Real *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

/* ---- when a leaf's gradient is final (ag_backward_on_leaf) ----
 * A table of the tape's tensors (open addressing on the pointer): for each, whether a node
 * produced it and the number of the oldest node reading it (nodes numbered 1 = oldest, as
 * ag_tape_print counts). Built before the walk; after node k's backward, each input of node k
 * that is a leaf and whose oldest reader is k is final. */
typedef struct LeafSlot {
    const Tensor *t;
    int oldest;   /* the oldest node reading t, or 0 */
    int produced; /* a node's output */
    int called;   /* fn was called for it */
} LeafSlot;

typedef struct LeafTable {
    LeafSlot *slot;
    size_t mask; /* capacity - 1 (a power of two) */
} LeafTable;

static LeafSlot *leaf_slot(LeafTable *lt, const Tensor *t) {
    size_t h = (size_t)(((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull);
    for (size_t i = h & lt->mask;; i = (i + 1) & lt->mask)
        if (lt->slot[i].t == t || !lt->slot[i].t) {
            lt->slot[i].t = t;
            return &lt->slot[i];
        }
}

static void leaf_table_build(const Tape *tape, LeafTable *lt) {
    size_t cap = 64;
    while (cap < 2 * (size_t)tape->n_nodes * (AG_MAX_INPUTS + 1)) cap *= 2;
    lt->slot = calloc(cap, sizeof *lt->slot);
    AG_CHECK(lt->slot, "ag_backward: out of memory for the leaf table of %d nodes", tape->n_nodes);
    lt->mask = cap - 1;
    int k = tape->n_nodes;
    for (const AgNode *n = tape->last; n; n = n->prev, k--) { /* newest first: oldest wins */
        leaf_slot(lt, n->out)->produced = 1;
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i]->requires_grad) leaf_slot(lt, n->in[i])->oldest = k;
    }
}

/* after node k's backward: the leaves it was the last to write */
static void leaf_table_call(Tape *tape, LeafTable *lt, const AgNode *n, int k) {
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i]->requires_grad) continue;
        LeafSlot *e = leaf_slot(lt, n->in[i]);
        if (e->produced || e->oldest != k || e->called) continue;
        e->called = 1;
        tape->leaf_fn(tape->leaf_ctx, n->in[i]);
    }
}

void ag_backward_on_leaf(Tape *tape, AgLeafFn fn, void *ctx) {
    AG_CHECK_ARG(tape);
    tape->leaf_fn = fn;
    tape->leaf_ctx = ctx;
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
    LeafTable lt = {0};
    if (tape->leaf_fn) leaf_table_build(tape, &lt);
    int k = tape->n_nodes + 1; /* node numbers as ag_tape_print shows them */
    for (AgNode *n = tape->last; n; n = n->prev) {
        k--;
        if (n->out->grad) { /* else nothing downstream used this output */
            prepare_grads(tape, n);
            backward_fns[n->op](n);
            if (tape->check_finite && !tape->nonfinite.found) check_backward(tape, n, k);
            if (tape->keep_norms) n->grad_norm = norm_of(n->out->grad, n->out->size);
            release_grad(tape, n);
        }
        if (tape->leaf_fn) leaf_table_call(tape, &lt, n, k);
    }
    free(lt.slot);
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
