/* ops_embedding.c: the embedding lookup, rows of a (V, C) table picked by token ids (alone, or
 * scaled, with positions added and only some rows kept: ag_embedding_rows); and the
 * gather and scatter of rows by distinct row numbers, with which nn_seq2seq_loss packs a
 * batch's live (non-padding) rows into (n, C) and puts them back in (B, T, C) for attention.
 * Next: gradcheck.c. */
#include "ops_internal.h"

/* Aborts unless tape and weight (V, C) are given and ids (B, T) are, with every id in [0, V)
 * (a bad one named by its position). */
static void check_lookup(const char *op, const Tape *tape, const Tensor *weight, const int *ids,
                         int B, int T) {
    AG_CHECK(tape != NULL, "%s: tape is NULL", op);
    AG_CHECK_TENSOR(op, weight);
    AG_CHECK(weight->ndim == 2, "%s: weight must be (V,C): %s %s", op, weight->name,
             tensor_shape_str(weight));
    AG_CHECK(ids != NULL, "%s: ids is NULL for weight %s %s", op, weight->name,
             tensor_shape_str(weight));
    AG_CHECK(B > 0 && T > 0, "%s: ids shape (%d,%d) must be positive (weight %s %s)", op, B, T,
             weight->name, tensor_shape_str(weight));
    int V = weight->shape[0];
    for (size_t i = 0; i < (size_t)B * T; i++)
        AG_CHECK(ids[i] >= 0 && ids[i] < V,
                 "%s: id %d at position (%zu,%zu) of ids (%d,%d) is outside the vocabulary of "
                 "size %d (weight %s %s)",
                 op, ids[i], i / (size_t)T, i % (size_t)T, B, T, V, weight->name,
                 tensor_shape_str(weight));
}

Tensor *ag_embedding(Tape *tape, Tensor *weight, const int *ids, int B, int T) {
    return ag_embedding_padded(tape, weight, ids, B, T, -1);
}

typedef struct EmbeddingCtx {
    const int *ids; /* (rows of the output), a copy */
    int padding_idx;
    Real scale; /* ag_embedding_rows' s (ag_embedding_padded's backward does not read it) */
} EmbeddingCtx;
Tensor *ag_embedding_padded(Tape *tape, Tensor *weight, const int *ids, int B, int T,
                            int padding_idx) {
    check_lookup("ag_embedding", tape, weight, ids, B, T);
    int C = weight->shape[1];
    size_t N = (size_t)B * T;
    Tensor *y = ag_out(tape, AG_OP_EMBEDDING, 3, (int[]){B, T, C});
    k_embedding_forward(y->data, weight->data, ids, N, C);
    AgNode *n = ag_record(tape, AG_OP_EMBEDDING, y, 1, &weight);
    if (n)
        *AG_SAVE(tape, n, EmbeddingCtx) =
            (EmbeddingCtx){ag_save_ints(tape, ids, N), padding_idx, 1};
    return y;
}
void ag_embedding_backward(AgNode *n) {
    Tensor *w = n->in[0];
    const EmbeddingCtx *c = n->ctx;
    k_embedding_backward(w->grad, c->ids, c->padding_idx, n->out->grad,
                         n->out->size / (size_t)w->shape[1], w->shape[1]);
}

Tensor *ag_embedding_rows(Tape *tape, Tensor *weight, const int *ids, int B, int T, int padding_idx,
                          double scale, const Tensor *pos, const int *rows, int n) {
    check_lookup("ag_embedding_rows", tape, weight, ids, B, T);
    int C = weight->shape[1];
    size_t N = (size_t)B * T;
    AG_CHECK(pos == NULL || (pos->ndim == 2 && pos->shape[0] == T && pos->shape[1] == C),
             "ag_embedding_rows: pos must be (T,C) = (%d,%d): %s %s (weight %s %s)", T, C,
             pos->name, tensor_shape_str(pos), weight->name, tensor_shape_str(weight));
    AG_CHECK(pos == NULL || !pos->requires_grad,
             "ag_embedding_rows: pos %s %s requires grad; it is a constant here (use "
             "ag_add_bias for learned positions)",
             pos->name, tensor_shape_str(pos));
    AG_CHECK(rows == NULL || n >= 1,
             "ag_embedding_rows: n %d must be >= 1 for ids (%d,%d) (weight %s %s)", n, B, T,
             weight->name, tensor_shape_str(weight));
    size_t m = rows ? (size_t)n : N;
    for (size_t i = 0; rows && i < m; i++)
        AG_CHECK(rows[i] >= 0 && (size_t)rows[i] < N,
                 "ag_embedding_rows: row %d at index %zu of rows (%d) is outside [0, %zu) for "
                 "ids (%d,%d) (weight %s %s)",
                 rows[i], i, n, N, B, T, weight->name, tensor_shape_str(weight));
    Tensor *y = rows ? ag_out(tape, AG_OP_EMBEDDING_ROWS, 2, (int[]){n, C})
                     : ag_out(tape, AG_OP_EMBEDDING_ROWS, 3, (int[]){B, T, C});
    k_embedding_rows_forward(y->data, weight->data, ids, rows, m, T, C, (Real)scale,
                             pos ? pos->data : NULL);
    AgNode *node = ag_record(tape, AG_OP_EMBEDDING_ROWS, y, 1, &weight);
    if (!node) return y;
    /* backward reads the output rows' own ids */
    int *kept = arena_alloc(tape->arena, m * sizeof(int));
    for (size_t i = 0; i < m; i++) kept[i] = ids[rows ? (size_t)rows[i] : i];
    *AG_SAVE(tape, node, EmbeddingCtx) = (EmbeddingCtx){kept, padding_idx, (Real)scale};
    return y;
}

void ag_embedding_rows_backward(AgNode *n) {
    Tensor *w = n->in[0];
    const EmbeddingCtx *c = n->ctx;
    k_embedding_rows_backward(w->grad, c->ids, c->padding_idx, c->scale, n->out->grad,
                              n->out->size / (size_t)w->shape[1], w->shape[1]);
}

/* What gather and scatter save: the row map their backward reads (k_pick_rows's `from`). */
typedef struct PickCtx {
    const int *from;
} PickCtx;

/* Aborts unless rows[0..n) are distinct and in [0, R) (x names the tensor in the message).
 * Returns the inverse map in the step arena: where[rows[i]] = i, -1 for the other rows. */
static const int *check_rows(Tape *tape, const char *op, const int *rows, int n, size_t R,
                             const Tensor *x) {
    int *first = arena_alloc(tape->arena, R * sizeof(int)); /* where each row was seen */
    for (size_t r = 0; r < R; r++) first[r] = -1;
    for (int i = 0; i < n; i++) {
        AG_CHECK(rows[i] >= 0 && (size_t)rows[i] < R,
                 "%s: row %d at index %d of rows (%d) is outside [0, %zu) for x %s %s", op, rows[i],
                 i, n, R, x->name, tensor_shape_str(x));
        AG_CHECK(first[rows[i]] < 0,
                 "%s: row %d appears twice in rows (%d), at indices %d and %d (rows must be "
                 "distinct) for x %s %s",
                 op, rows[i], n, first[rows[i]], i, x->name, tensor_shape_str(x));
        first[rows[i]] = i;
    }
    return first;
}

Tensor *ag_gather_rows(Tape *tape, Tensor *x, const int *rows, int n) {
    AG_CHECK(tape != NULL, "ag_gather_rows: tape is NULL");
    AG_CHECK_TENSOR("ag_gather_rows", x);
    AG_CHECK(x->ndim >= 1, "ag_gather_rows: x must be (..., C): %s %s", x->name,
             tensor_shape_str(x));
    AG_CHECK(rows != NULL, "ag_gather_rows: rows is NULL for x %s %s", x->name,
             tensor_shape_str(x));
    size_t R = tensor_rows(x);
    int C = x->shape[x->ndim - 1];
    AG_CHECK(n >= 1 && (size_t)n <= R, "ag_gather_rows: n %d is outside [1, %zu] for x %s %s", n, R,
             x->name, tensor_shape_str(x));
    const int *where = check_rows(tape, "ag_gather_rows", rows, n, R, x);
    Tensor *y = ag_out(tape, AG_OP_GATHER_ROWS, 2, (int[]){n, C});
    k_pick_rows(y->data, x->data, rows, (size_t)n, C, 1);
    AgNode *node = ag_record(tape, AG_OP_GATHER_ROWS, y, 1, &x);
    if (node) AG_SAVE(tape, node, PickCtx)->from = where; /* (R), already in the step arena */
    return y;
}
void ag_gather_rows_backward(AgNode *n) {
    Tensor *x = n->in[0];
    /* forward: y[i] = x[rows[i]], so gx[r] += gy[where[r]] for a picked row r */
    const PickCtx *c = n->ctx;
    k_pick_rows(x->grad, n->out->grad, c->from, tensor_rows(x), x->shape[x->ndim - 1],
                n->store & 1);
}

Tensor *ag_scatter_rows(Tape *tape, Tensor *x, const int *rows, int B, int T) {
    AG_CHECK(tape != NULL, "ag_scatter_rows: tape is NULL");
    AG_CHECK_TENSOR("ag_scatter_rows", x);
    AG_CHECK(x->ndim == 2, "ag_scatter_rows: x must be (n, C): %s %s", x->name,
             tensor_shape_str(x));
    AG_CHECK(rows != NULL, "ag_scatter_rows: rows is NULL for x %s %s", x->name,
             tensor_shape_str(x));
    int n = x->shape[0], C = x->shape[1];
    AG_CHECK(B > 0 && T > 0 && (size_t)n <= (size_t)B * T,
             "ag_scatter_rows: (B, T) = (%d,%d) must be positive and hold the %d rows of x %s %s",
             B, T, n, x->name, tensor_shape_str(x));
    const int *where = check_rows(tape, "ag_scatter_rows", rows, n, (size_t)B * T, x);
    Tensor *y = ag_out(tape, AG_OP_SCATTER_ROWS, 3, (int[]){B, T, C});
    k_pick_rows(y->data, x->data, where, (size_t)B * T, C, 1);
    AgNode *node = ag_record(tape, AG_OP_SCATTER_ROWS, y, 1, &x);
    if (node) AG_SAVE(tape, node, PickCtx)->from = ag_save_ints(tape, rows, (size_t)n);
    return y;
}
void ag_scatter_rows_backward(AgNode *n) {
    Tensor *x = n->in[0];
    /* forward: y[rows[i]] = x[i] (other rows 0), so gx[i] += gy[rows[i]] */
    const PickCtx *c = n->ctx;
    k_pick_rows(x->grad, n->out->grad, c->from, (size_t)x->shape[0], x->shape[1], n->store & 1);
}
