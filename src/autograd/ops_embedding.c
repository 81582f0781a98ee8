/* ops_embedding.c: the embedding lookup, rows of a (V, C) table picked by token ids.
 * Next: gradcheck.c. */
#include "ops_internal.h"

Tensor *ag_embedding(Tape *tape, Tensor *weight, const int *ids, int B, int T) {
    return ag_embedding_padded(tape, weight, ids, B, T, -1);
}

Tensor *ag_embedding_padded(Tape *tape, Tensor *weight, const int *ids, int B, int T,
                            int padding_idx) {
    AG_CHECK(tape != NULL, "ag_embedding: tape is NULL");
    AG_CHECK_TENSOR("ag_embedding", weight);
    AG_CHECK(weight->ndim == 2, "ag_embedding: weight must be (V,C): %s %s", weight->name,
             tensor_shape_str(weight));
    AG_CHECK(ids != NULL, "ag_embedding: ids is NULL for weight %s %s", weight->name,
             tensor_shape_str(weight));
    AG_CHECK(B > 0 && T > 0, "ag_embedding: ids shape (%d,%d) must be positive (weight %s %s)", B,
             T, weight->name, tensor_shape_str(weight));
    int V = weight->shape[0], C = weight->shape[1];
    size_t N = (size_t)B * T;
    for (size_t i = 0; i < N; i++)
        AG_CHECK(ids[i] >= 0 && ids[i] < V,
                 "ag_embedding: id %d at position (%zu,%zu) of ids (%d,%d) is outside the "
                 "vocabulary of size %d (weight %s %s)",
                 ids[i], i / (size_t)T, i % (size_t)T, B, T, V, weight->name,
                 tensor_shape_str(weight));
    Tensor *y = ag_out(tape, AG_OP_EMBEDDING, 3, (int[]){B, T, C});
    k_embedding_forward(y->data, weight->data, ids, N, C);
    AgNode *n = ag_record(tape, AG_OP_EMBEDDING, y, 1, &weight);
    if (n) {
        n->idx = ag_save_ints(tape, ids, N);
        n->i[0] = padding_idx;
    }
    return y;
}
void ag_embedding_backward(AgNode *n) {
    Tensor *w = n->in[0];
    k_embedding_backward(w->grad, n->idx, n->i[0], n->out->grad, n->out->size / (size_t)w->shape[1],
                         w->shape[1]);
}
